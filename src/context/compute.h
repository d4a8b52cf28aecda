/*
 * The compute resources of a context: a tensor arena for the per-decode graph
 * (reset, not reallocated, each time), the graph allocator with its buffer
 * (sized once for the worst graph), and the backend that runs graphs.
 */
#ifndef LLAMAC_CONTEXT_COMPUTE_H
#define LLAMAC_CONTEXT_COMPUTE_H

#include <stdbool.h>
#include <stddef.h>

#include "tensor/tensor.h"

struct context_compute;

/* max_tensors: tensors per graph (the arena's size); n_threads: the most threads any graph uses. */
struct context_compute *compute_new(size_t max_tensors, int n_threads);
void compute_free(struct context_compute *cc);

/* Empties the arena and returns it, ready for building the next graph. */
struct tensor_ctx *compute_arena(struct context_compute *cc);

/* Grows the compute buffer to fit g (a worst-case graph); no data is placed. */
bool compute_reserve(struct context_compute *cc, struct graph *g);
/* Places every tensor of g that has no memory yet in the compute buffer. */
bool compute_alloc(struct context_compute *cc, struct graph *g);
/* Runs g with n_threads; abort_cb (may be NULL) can stop it. With an
 * observer (eval_cb, may be NULL; see context_eval_cb in context.h) the graph
 * runs in parts that end at the nodes the observer asks for. */
bool compute_run(struct context_compute *cc, struct graph *g, int n_threads,
                 bool (*abort_cb)(void *data), void *abort_data,
                 bool (*eval_cb)(struct tensor *node, bool ask, void *data), void *eval_data);

/* Bytes of the compute buffer (for reporting). */
size_t compute_buffer_size(const struct context_compute *cc);

#endif

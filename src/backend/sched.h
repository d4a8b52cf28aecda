/*
 * The scheduler: runs one graph on several backends.
 *
 * Backends are given in priority order (the CPU last, as the fallback).
 * For each graph the scheduler
 *   1. assigns every node a backend: a node pinned with
 *      backend_sched_set_tensor_backend() keeps its pin; a node that writes
 *      into existing memory (op_cpy into the KV cache) runs where that memory
 *      is; a node reading a weight (a source in a BUFFER_USAGE_WEIGHTS
 *      buffer) runs where the weight is, if that backend supports the op;
 *      otherwise the first backend that supports the op. View ops compute
 *      nothing and belong to their source's backend; input leafs to the
 *      backend of their first consumer.
 *   2. cuts the node list into splits, runs of consecutive nodes on one backend;
 *   3. gives every source a split's backend cannot read in place (computed on
 *      another backend, or in memory of a buffer type the backend cannot use)
 *      a copy in that backend's memory, made at the start of the first split
 *      that needs it, and points the consumers' src[] at the copy;
 *   4. plans the memory of the whole graph, copies included, with one graph
 *      allocator holding a buffer per backend, so tensors live from the split
 *      that makes them to the split that last reads them;
 *   5. computes the splits in order, copying each split's inputs first.
 *
 * A graph is rewritten in step 3, so give each built graph to alloc_graph
 * once (reserve leaves the graph as it was). Reserve with the largest graph
 * first, then per decode: build, backend_sched_alloc_graph, set the inputs
 * (backend_tensor_set), backend_sched_graph_compute, read the outputs.
 */
#ifndef LLAMAC_BACKEND_SCHED_H
#define LLAMAC_BACKEND_SCHED_H

#include <stdbool.h>
#include <stddef.h>

#include "backend/backend.h"

#define SCHED_MAX_BACKENDS 8

struct backend_sched;

/* The backends stay owned by the caller and must outlive the scheduler.
 * NULL (error_set) on bad arguments or out of memory. */
struct backend_sched *backend_sched_new(struct backend *const *backends, int n_backends);
void backend_sched_free(struct backend_sched *sched);

/* Runs node on backend in the next graph given to reserve or alloc_graph
 * (the pins are then cleared). False (error_set) if backend is not one of
 * the scheduler's or cannot compute the node. */
bool backend_sched_set_tensor_backend(struct backend_sched *sched, struct tensor *node, struct backend *backend);

/* Sizes every backend's compute buffer for g; g is left unchanged. */
bool backend_sched_reserve(struct backend_sched *sched, struct graph *g);
/* Assigns, splits and places g's tensors (inputs included: set them next). */
bool backend_sched_alloc_graph(struct backend_sched *sched, struct graph *g);
/* Computes g, which must be the graph alloc_graph placed last. It may be
 * computed again after setting its inputs again (an input's memory is reused
 * once it has been read). False (error_set) otherwise, or if a backend fails
 * or is aborted. */
bool backend_sched_graph_compute(struct backend_sched *sched, struct graph *g);

/* About the last graph split: */
int backend_sched_n_splits(const struct backend_sched *sched);
int backend_sched_n_copies(const struct backend_sched *sched);
/* The backend a node of that graph runs on (NULL if it is not one of its tensors). */
struct backend *backend_sched_tensor_backend(const struct backend_sched *sched, const struct tensor *t);
/* Bytes of backend's compute buffer the plans so far need. */
size_t backend_sched_buffer_size(const struct backend_sched *sched, struct backend *backend);

#endif

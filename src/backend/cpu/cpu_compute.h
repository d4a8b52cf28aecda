/*
 * The CPU compute engine: a persistent thread pool and the kernels that run a
 * graph's nodes on host memory. The CPU backend (cpu_backend.c) wraps this in
 * the backend vtable; tests may call it directly on graphs whose tensors have
 * data (tensor contexts with a data arena).
 *
 * Numerics follow llama.cpp b1892's ggml.c where they change results (see the
 * comments in cpu_ops.c): mul_mat converts src1 to the weight's vec_dot_type
 * first, rms_norm sums in double, soft_max and silu go through F16 tables, ...
 *
 * Thread safety: one pool is used by one caller at a time.
 */
#ifndef LLAMAC_BACKEND_CPU_CPU_COMPUTE_H
#define LLAMAC_BACKEND_CPU_CPU_COMPUTE_H

#include <stdbool.h>

#include "tensor/tensor.h"

struct cpu_threadpool; /* persistent worker threads */

/* A pool of n_threads - 1 workers plus the calling thread (n_threads >= 1).
 * NULL on failure (error_set). */
struct cpu_threadpool *cpu_threadpool_new(int n_threads);
void cpu_threadpool_free(struct cpu_threadpool *pool);
/* The n_threads the pool was created with. */
int cpu_threadpool_size(const struct cpu_threadpool *pool);

/* Computes g->nodes in order with n_threads (<= pool size; larger values are
 * clamped) threads. Work memory (e.g. activations converted to a weight's
 * vec_dot type) is owned by the pool and grows only when a larger graph needs
 * it. abort_cb (may be NULL) is polled between nodes; returning true stops the
 * computation. Returns false (error_set) if an op or type combination is
 * unsupported, memory is missing, or the computation was aborted. */
bool cpu_graph_compute(struct cpu_threadpool *pool, struct graph *g, int n_threads,
                       bool (*abort_cb)(void *data), void *abort_data);

/* Whether cpu_graph_compute can run this node (op, types, layouts). */
bool cpu_op_supported(const struct tensor *node);

#endif

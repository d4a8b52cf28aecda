/*
 * The CPU backend: host memory buffers and graph computation on the CPU
 * kernels (cpu_compute.h) with a persistent thread pool.
 *
 * Host buffers align their base and every tensor the allocators place to 64
 * bytes. Like b1892's CPU buffers, a buffer asked for `size` bytes has
 * PAD64(size) + 64 usable bytes and reports that as its size — session files
 * record the KV buffer's size, so this arithmetic is part of the format.
 */
#ifndef LLAMAC_BACKEND_CPU_CPU_BACKEND_H
#define LLAMAC_BACKEND_CPU_CPU_BACKEND_H

#include <stdbool.h>
#include <stddef.h>

#include "backend/backend.h"

#define CPU_BUFFER_ALIGNMENT 64

/* A CPU backend computing with n_threads threads (>= 1). NULL (error_set) on failure. */
struct backend *backend_cpu_new(int n_threads);
bool backend_is_cpu(const struct backend *backend);
/* Threads for the next graphs. The pool grows (once) when n_threads exceeds
 * every earlier value, so alternating between two counts creates no threads.
 * False (error_set) if n_threads < 1 or the pool cannot grow. */
bool backend_cpu_set_n_threads(struct backend *cpu, int n_threads);
/* Polled between nodes; returning true makes graph_compute stop and fail. NULL clears it. */
void backend_cpu_set_abort_callback(struct backend *cpu, bool (*abort_cb)(void *data), void *abort_data);

/* Host memory (a static object: never freed). */
struct backend_buffer_type *backend_cpu_buffer_type(void);
/* A host buffer over memory the caller owns (e.g. a mapped model file); freeing
 * the buffer leaves the memory alone. ptr must stay valid while the buffer
 * is used. NULL (error_set) if ptr is NULL or out of memory. */
struct backend_buffer *backend_cpu_buffer_from_ptr(void *ptr, size_t size);

#endif

/*
 * Buffer types, buffers and backends: where tensor memory lives and what
 * computes on it.
 *
 *   buffer type   a kind of memory (host RAM, one GPU's memory, ...): its
 *                 alignment, the bytes a tensor needs in it, whether the host
 *                 can address it, which backends can use it. Allocates buffers.
 *   buffer        one allocation of a buffer type. Tensors are placed in it
 *                 (tensor->data points inside, tensor->buffer at it); their
 *                 bytes are read and written through the buffer, never by
 *                 dereferencing tensor->data unless the buffer is host memory.
 *   backend       computes graphs whose tensors live in buffers it can use.
 *
 * Each is a table of function pointers plus a context pointer; members marked
 * "(optional)" may be NULL. A backend implementation fills the tables
 * (cpu/cpu_backend.c is the first) and everyone else calls the functions
 * below, which supply the defaults and the checks.
 *
 * Typical use (the model and context layers):
 *
 *     struct backend *cpu = backend_cpu_new(n_threads);            // cpu/cpu_backend.h
 *     // weights used in place from a mapped file:
 *     struct backend_buffer *w = backend_cpu_buffer_from_ptr(map, map_size);
 *     backend_buffer_set_usage(w, BUFFER_USAGE_WEIGHTS);
 *     backend_buffer_place_tensor(w, tok_embd, map + offset);     // for each weight
 *     // the KV cache: every tensor of a context in one buffer:
 *     struct backend_buffer *kv = backend_alloc_ctx_tensors(kv_ctx, backend_default_buffer_type(cpu));
 *     // per decode: graph_allocr (graph/alloc.h) or backend_sched (sched.h), then
 *     backend_graph_compute(cpu, graph);
 *
 * Thread safety: a buffer type is shared and stateless; a buffer or backend is
 * used by one thread at a time.
 */
#ifndef LLAMAC_BACKEND_BACKEND_H
#define LLAMAC_BACKEND_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tensor/tensor.h"

struct backend_buffer_type;
struct backend_buffer;
struct backend;

/* ---- buffer types -------------------------------------------------------------- */

struct backend_buffer_type_i {
    const char *(*name)(struct backend_buffer_type *buft);
    /* A buffer of at least `size` usable bytes from its base; NULL (with error_set) on failure. */
    struct backend_buffer *(*alloc_buffer)(struct backend_buffer_type *buft, size_t size);
    /* Alignment of the buffer's base and of every tensor placed by the allocators (a power of two). */
    size_t (*alignment)(struct backend_buffer_type *buft);
    /* (optional) bytes tensor t needs in this kind of memory, >= tensor_nbytes(t); default tensor_nbytes. */
    size_t (*alloc_size)(struct backend_buffer_type *buft, const struct tensor *t);
    /* Whether `backend` can compute on tensors in this memory. */
    bool (*supports_backend)(struct backend_buffer_type *buft, struct backend *backend);
    /* (optional) whether tensor->data is a host address the CPU can read and write; default false. */
    bool (*is_host)(struct backend_buffer_type *buft);
};

struct backend_buffer_type {
    struct backend_buffer_type_i iface;
    void *context;
};

const char *backend_buft_name(struct backend_buffer_type *buft);
/* NULL with error_set() on failure (out of memory, size too large). */
struct backend_buffer *backend_buft_alloc_buffer(struct backend_buffer_type *buft, size_t size);
size_t backend_buft_alignment(struct backend_buffer_type *buft);
size_t backend_buft_alloc_size(struct backend_buffer_type *buft, const struct tensor *t);
bool backend_buft_supports_backend(struct backend_buffer_type *buft, struct backend *backend);
bool backend_buft_is_host(struct backend_buffer_type *buft);

/* ---- buffers ------------------------------------------------------------------- */

/* What a buffer holds; the scheduler computes an op where its weights live. */
enum backend_buffer_usage {
    BUFFER_USAGE_ANY = 0,
    BUFFER_USAGE_WEIGHTS = 1,
    BUFFER_USAGE_COMPUTE = 2,
};

struct backend_buffer_i {
    /* (optional) releases the memory and the context (not the struct itself). */
    void (*free)(struct backend_buffer *buf);
    /* Address of the first usable byte (aligned to the buffer type's alignment). */
    void *(*base)(struct backend_buffer *buf);
    /* (optional) prepares a tensor just placed in the buffer (e.g. backend-private extra data). */
    void (*init_tensor)(struct backend_buffer *buf, struct tensor *t);
    /* Bytes [offset, offset + size) of t's data; bounds already checked. */
    void (*set_tensor)(struct backend_buffer *buf, struct tensor *t, const void *data, size_t offset, size_t size);
    void (*get_tensor)(struct backend_buffer *buf, const struct tensor *t, void *data, size_t offset, size_t size);
    /* (optional) copies src (in any buffer) into dst (in this buffer), same layout;
     * false when this pair of buffers has no fast path (the caller then stages it). */
    bool (*cpy_tensor)(struct backend_buffer *buf, const struct tensor *src, struct tensor *dst);
    /* Sets every byte of the buffer to value. */
    void (*clear)(struct backend_buffer *buf, uint8_t value);
    /* (optional) forgets per-tensor state kept by init_tensor, before the buffer is reused. */
    void (*reset)(struct backend_buffer *buf);
};

struct backend_buffer {
    struct backend_buffer_i iface;
    struct backend_buffer_type *buft;
    void *context;
    size_t size; /* usable bytes from base */
    enum backend_buffer_usage usage;
};

/* For buffer type implementations: wraps an allocation (usage ANY). NULL on out of memory. */
struct backend_buffer *backend_buffer_init(struct backend_buffer_type *buft, struct backend_buffer_i iface,
                                           void *context, size_t size);
void backend_buffer_free(struct backend_buffer *buf); /* NULL is a no-op */

void *backend_buffer_base(struct backend_buffer *buf);
size_t backend_buffer_size(const struct backend_buffer *buf);
struct backend_buffer_type *backend_buffer_get_type(const struct backend_buffer *buf);
bool backend_buffer_is_host(const struct backend_buffer *buf);
void backend_buffer_set_usage(struct backend_buffer *buf, enum backend_buffer_usage usage);
enum backend_buffer_usage backend_buffer_get_usage(const struct backend_buffer *buf);
void backend_buffer_clear(struct backend_buffer *buf, uint8_t value);
void backend_buffer_reset(struct backend_buffer *buf);

/* Places t (not a view) at caller-chosen addr inside buf (e.g. a weight at its
 * offset in a mapped file): sets t->data and t->buffer and initialises it.
 * addr needs no particular alignment (GGUF aligns tensor data to 32 bytes,
 * less than the buffer types' 64). False (error_set) if [addr, addr + alloc
 * size) is not inside the buffer, or t is a view or already has data. */
bool backend_buffer_place_tensor(struct backend_buffer *buf, struct tensor *t, void *addr);

/* Points a view at its source's memory (view_src must have data). */
bool backend_view_init(struct tensor *view);

/* Allocates every tensor of ctx that has no data yet in one new buffer of
 * buft (each at an aligned offset, sizes padded to the alignment, as b1892),
 * then points the views among them. NULL (error_set) on failure or when no
 * tensor needs memory. The caller owns the buffer. */
struct backend_buffer *backend_alloc_ctx_tensors(struct tensor_ctx *ctx, struct backend_buffer_type *buft);
/* The buffer size backend_alloc_ctx_tensors would request (before the buffer type's own slack). */
bool backend_ctx_tensors_size(struct tensor_ctx *ctx, struct backend_buffer_type *buft, size_t *size_out);

/* ---- tensor data ---------------------------------------------------------------- */

/* Bytes [offset, offset + size) of t's data (t or its view source placed in a
 * buffer, or with data in host memory outside any buffer). False (error_set)
 * if t is not placed or the range is outside tensor_nbytes(t). */
bool backend_tensor_set(struct tensor *t, const void *data, size_t offset, size_t size);
bool backend_tensor_get(const struct tensor *t, void *data, size_t offset, size_t size);
/* Copies src's bytes into dst; both placed, same type, shape and strides. */
bool backend_tensor_copy(const struct tensor *src, struct tensor *dst);
/* The buffer holding t's bytes (its own or its view source's), or NULL. */
struct backend_buffer *backend_tensor_buffer(const struct tensor *t);

/* ---- backends -------------------------------------------------------------------- */

struct backend_i {
    const char *(*name)(struct backend *backend);
    /* Releases the context and the struct. */
    void (*free)(struct backend *backend);
    struct backend_buffer_type *(*default_buffer_type)(struct backend *backend);
    /* (optional) queue a write/read of t's bytes; done by the next synchronize. */
    void (*set_tensor_async)(struct backend *backend, struct tensor *t, const void *data, size_t offset, size_t size);
    void (*get_tensor_async)(struct backend *backend, const struct tensor *t, void *data, size_t offset, size_t size);
    /* (optional) waits for queued work. */
    void (*synchronize)(struct backend *backend);
    /* Computes the graph's nodes in order (view ops and OP_NONE nodes are no-ops).
     * False when computation was aborted or failed (error_set says which). */
    bool (*graph_compute)(struct backend *backend, struct graph *g);
    /* Whether graph_compute can compute this node (type combination included). */
    bool (*supports_op)(struct backend *backend, const struct tensor *node);
};

struct backend {
    struct backend_i iface;
    void *context;
};

const char *backend_name(struct backend *backend);
void backend_free(struct backend *backend); /* NULL is a no-op */
struct backend_buffer_type *backend_default_buffer_type(struct backend *backend);
bool backend_tensor_set_async(struct backend *backend, struct tensor *t, const void *data, size_t offset, size_t size);
bool backend_tensor_get_async(struct backend *backend, const struct tensor *t, void *data, size_t offset, size_t size);
void backend_synchronize(struct backend *backend);
bool backend_graph_compute(struct backend *backend, struct graph *g);
bool backend_supports_op(struct backend *backend, const struct tensor *node);

/* Ops that only reinterpret memory (VIEW, RESHAPE, PERMUTE, TRANSPOSE): nothing to compute. */
bool backend_op_is_view(enum tensor_op op);

#endif

/*
 * The graph allocator: places the tensors of a graph that have no memory yet
 * (inputs and intermediate results) in one buffer per buffer type, reusing
 * memory as soon as a tensor's last consumer has run.
 *
 * Planning walks the nodes in order, as they will be computed:
 *   - leafs without data (inputs the caller fills after allocation) and nodes
 *     flagged TENSOR_FLAG_INPUT are placed first, so no node overwrites them;
 *   - each node gets a block from a best-fit free list (sizes padded to the
 *     buffer type's alignment; adjacent free blocks merge);
 *   - after a node, each source whose consumers have all run is freed; a view
 *     keeps its view_src alive until the view's own consumers have run;
 *   - element-wise ops (add, sub, mul, div, add1, scale, sqr, sqrt, log,
 *     unary, diag_mask_*, rope, rms_norm, soft_max) take over the block of a
 *     source with the same type, shape and strides when this node is that
 *     source's only consumer, nothing views it, and it is neither a leaf nor
 *     flagged INPUT or OUTPUT (a view source qualifies when the view starts at
 *     its beginning and is its only view); the kernels allow dst == src;
 *   - tensors that already have data (weights, the KV cache, views of them)
 *     are left alone; OUTPUT-flagged tensors are never freed. Inputs are
 *     freed once read, so set them again before computing a graph again.
 *
 * reserve() plans a graph without touching it and sizes (allocates) the
 * buffers; alloc_graph() plans again and points every tensor into the
 * buffers. Reserve once with the largest graph (e.g. a full batch); graphs
 * that fit then allocate nothing. A graph that needs more makes the buffer
 * grow (logged), rather than fail.
 */
#ifndef LLAMAC_GRAPH_ALLOC_H
#define LLAMAC_GRAPH_ALLOC_H

#include <stdbool.h>
#include <stddef.h>

#include "backend/backend.h"

struct graph_allocr;

/* One buffer of buffer type buft. NULL (error_set) on out of memory. */
struct graph_allocr *graph_allocr_new(struct backend_buffer_type *buft);
/* One buffer per buffer type; tensors say which via buffer ids (the index into bufts). */
struct graph_allocr *graph_allocr_new_n(struct backend_buffer_type *const *bufts, int n_bufs);
void graph_allocr_free(struct graph_allocr *ga); /* frees its buffers too */

/* Sizes the buffers for g (never shrinks them) without placing any tensor.
 * The _n forms take each node's and leaf's buffer id (NULL: all 0). False
 * (error_set) on out of memory. */
bool graph_allocr_reserve(struct graph_allocr *ga, struct graph *g);
bool graph_allocr_reserve_n(struct graph_allocr *ga, struct graph *g, const int *node_buffer_ids,
                            const int *leaf_buffer_ids);
/* Places every tensor of g that has no data yet (views included). */
bool graph_allocr_alloc_graph(struct graph_allocr *ga, struct graph *g);
bool graph_allocr_alloc_graph_n(struct graph_allocr *ga, struct graph *g, const int *node_buffer_ids,
                                const int *leaf_buffer_ids);

/* Bytes of buffer buffer_id that the plans so far need (the largest). */
size_t graph_allocr_reserved_size(const struct graph_allocr *ga, int buffer_id);
/* The buffer (usage COMPUTE), or NULL while no plan has needed memory in it. */
struct backend_buffer *graph_allocr_buffer(const struct graph_allocr *ga, int buffer_id);

#endif

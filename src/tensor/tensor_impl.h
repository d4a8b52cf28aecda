/*
 * Internals shared by tensor.c, ops.c and graph.c (not for other modules).
 */
#ifndef LLAMAC_TENSOR_TENSOR_IMPL_H
#define LLAMAC_TENSOR_TENSOR_IMPL_H

#include "tensor/tensor.h"

/* A tensor of n_dims dims; a view of view_src at view_offs when view_src is
 * set (no data of its own), else with data from the context's arena if it has
 * one. NULL (error_set) on a bad type or shape, overflow or a full context. */
struct tensor *tensor_new_impl(struct tensor_ctx *ctx, enum ggml_type type, int n_dims, const int64_t *ne,
                               struct tensor *view_src, size_t view_offs);
/* A view of all of a, with a's shape and strides. */
struct tensor *tensor_view_whole(struct tensor_ctx *ctx, struct tensor *a);
/* Zeroed memory owned (and freed) by the context; NULL when out of memory. */
void *tensor_ctx_alloc_block(struct tensor_ctx *ctx, size_t size);

#endif

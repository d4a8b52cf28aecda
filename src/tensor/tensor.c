/*
 * Tensor contexts, tensor creation, properties and views.
 * Op constructors are in ops.c, graphs in graph.c.
 */
#include "tensor/tensor_impl.h"

#include <assert.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/checked.h"
#include "core/fp16.h"
#include "core/log.h"
#include "quant/quant.h"

/* A block of memory owned by a context besides its tensors (graphs). A reset
 * keeps the blocks and marks them free, so rebuilding the same graph reuses
 * them instead of allocating. */
struct tensor_ctx_block {
    struct tensor_ctx_block *next;
    size_t size;   /* payload bytes */
    bool in_use;
    max_align_t payload[];
};

struct tensor_ctx {
    struct tensor *tensors; /* [max_tensors] */
    size_t n_tensors;
    size_t max_tensors;
    char *data;             /* arena for tensor data, or NULL (tensors get no data) */
    size_t data_size;
    size_t data_used;
    struct tensor_ctx_block *blocks;
};

struct tensor_ctx *tensor_ctx_new(size_t max_tensors, size_t data_size) {
    struct tensor_ctx *ctx = calloc(1, sizeof *ctx);
    if (!ctx) {
        error_set("tensor_ctx_new: out of memory");
        return NULL;
    }
    ctx->max_tensors = max_tensors;
    ctx->tensors = calloc(max_tensors ? max_tensors : 1, sizeof *ctx->tensors);
    if (data_size > 0) {
        size_t rounded = 0;
        if (ck_align_up(data_size, TENSOR_DATA_ALIGN, &rounded)) {
            ctx->data = aligned_alloc(TENSOR_DATA_ALIGN, rounded);
        }
        ctx->data_size = rounded;
    }
    if (!ctx->tensors || (data_size > 0 && !ctx->data)) {
        error_set("tensor_ctx_new: cannot allocate %zu tensors and %zu bytes of data", max_tensors, data_size);
        tensor_ctx_free(ctx);
        return NULL;
    }
    return ctx;
}

void tensor_ctx_free(struct tensor_ctx *ctx) {
    if (!ctx) return;
    struct tensor_ctx_block *b = ctx->blocks;
    while (b) {
        struct tensor_ctx_block *next = b->next;
        free(b);
        b = next;
    }
    free(ctx->data);
    free(ctx->tensors);
    free(ctx);
}

void tensor_ctx_reset(struct tensor_ctx *ctx) {
    ctx->n_tensors = 0;
    ctx->data_used = 0;
    for (struct tensor_ctx_block *b = ctx->blocks; b; b = b->next) b->in_use = false;
}

size_t tensor_ctx_data_overhead(size_t n_tensors) {
    return n_tensors * TENSOR_DATA_ALIGN;
}

struct tensor *tensor_ctx_first(struct tensor_ctx *ctx) {
    return ctx->n_tensors ? &ctx->tensors[0] : NULL;
}

struct tensor *tensor_ctx_next(struct tensor_ctx *ctx, struct tensor *t) {
    size_t i = (size_t)(t - ctx->tensors) + 1;
    return i < ctx->n_tensors ? &ctx->tensors[i] : NULL;
}

size_t tensor_ctx_count(const struct tensor_ctx *ctx) {
    return ctx->n_tensors;
}

void *tensor_ctx_alloc_block(struct tensor_ctx *ctx, size_t size) {
    /* a free block from before the last reset: the smallest that fits */
    struct tensor_ctx_block *best = NULL;
    for (struct tensor_ctx_block *b = ctx->blocks; b; b = b->next) {
        if (!b->in_use && b->size >= size && (!best || b->size < best->size)) best = b;
    }
    if (best) {
        best->in_use = true;
        memset(best->payload, 0, size);
        return best->payload;
    }
    size_t total;
    if (!ck_add_size(sizeof(struct tensor_ctx_block), size, &total)) return NULL;
    struct tensor_ctx_block *b = calloc(1, total);
    if (!b) return NULL;
    b->size = size;
    b->in_use = true;
    b->next = ctx->blocks;
    ctx->blocks = b;
    return b->payload;
}

/* ---- creation -------------------------------------------------------------------- */

/* Bytes of a contiguous tensor of this type and shape; false on overflow or a
 * row that is not whole blocks. */
static bool tensor_contiguous_size(enum ggml_type type, const int64_t ne[TENSOR_MAX_DIMS], size_t *out) {
    size_t size;
    if (!type_row_size(type, ne[0], &size)) return false;
    for (int i = 1; i < TENSOR_MAX_DIMS; i++) {
        if (!ck_mul_size(size, (size_t)ne[i], &size)) return false;
    }
    *out = size;
    return true;
}

struct tensor *tensor_new_impl(struct tensor_ctx *ctx, enum ggml_type type, int n_dims, const int64_t *ne_in,
                               struct tensor *view_src, size_t view_offs) {
    const struct type_traits *tt = type_traits_get(type);
    if (!tt) {
        error_set("tensor_new: invalid element type %d", (int)type);
        return NULL;
    }
    if (n_dims < 1 || n_dims > TENSOR_MAX_DIMS) {
        error_set("tensor_new: %d dimensions (1 to %d allowed)", n_dims, TENSOR_MAX_DIMS);
        return NULL;
    }
    int64_t ne[TENSOR_MAX_DIMS] = { 1, 1, 1, 1 };
    for (int i = 0; i < n_dims; i++) {
        if (ne_in[i] < 0) {
            error_set("tensor_new: negative dimension %lld", (long long)ne_in[i]);
            return NULL;
        }
        ne[i] = ne_in[i];
    }
    if (ne[0] % tt->blck_size != 0) {
        error_set("tensor_new: row of %lld elements is not a multiple of the %s block size %lld",
                  (long long)ne[0], tt->name, (long long)tt->blck_size);
        return NULL;
    }
    size_t data_size;
    if (!tensor_contiguous_size(type, ne, &data_size)) {
        error_set("tensor_new: tensor size overflows");
        return NULL;
    }
    /* a view of a view refers to the base tensor directly */
    if (view_src && view_src->view_src) {
        view_offs += view_src->view_offs;
        view_src = view_src->view_src;
    }
    if (view_src) {
        size_t end;
        if (!ck_add_size(data_size, view_offs, &end) || end > tensor_nbytes(view_src)) {
            error_set("tensor view: %zu bytes at offset %zu exceed the %zu bytes of '%s'",
                      data_size, view_offs, tensor_nbytes(view_src), view_src->name);
            return NULL;
        }
    }
    if (ctx->n_tensors >= ctx->max_tensors) {
        error_set("tensor context full (%zu tensors)", ctx->max_tensors);
        return NULL;
    }
    void *data = NULL;
    if (view_src) {
        data = view_src->data ? (char *)view_src->data + view_offs : NULL;
    } else if (ctx->data) {
        size_t need;
        if (!ck_align_up(data_size, TENSOR_DATA_ALIGN, &need) || need > ctx->data_size - ctx->data_used) {
            error_set("tensor context data arena full (%zu of %zu bytes used, %zu more needed)",
                      ctx->data_used, ctx->data_size, data_size);
            return NULL;
        }
        data = ctx->data + ctx->data_used;
        ctx->data_used += need;
    }
    struct tensor *t = &ctx->tensors[ctx->n_tensors++];
    memset(t, 0, sizeof *t);
    t->type = type;
    for (int i = 0; i < TENSOR_MAX_DIMS; i++) t->ne[i] = ne[i];
    t->nb[0] = tt->type_size;
    t->nb[1] = tt->type_size * (size_t)(ne[0] / tt->blck_size);
    for (int i = 2; i < TENSOR_MAX_DIMS; i++) t->nb[i] = t->nb[i - 1] * (size_t)ne[i - 1];
    t->op = OP_NONE;
    t->view_src = view_src;
    t->view_offs = view_offs;
    t->data = data;
    return t;
}

struct tensor *tensor_new(struct tensor_ctx *ctx, enum ggml_type type, int n_dims, const int64_t *ne) {
    return tensor_new_impl(ctx, type, n_dims, ne, NULL, 0);
}

struct tensor *tensor_new_1d(struct tensor_ctx *ctx, enum ggml_type type, int64_t ne0) {
    return tensor_new(ctx, type, 1, &ne0);
}

struct tensor *tensor_new_2d(struct tensor_ctx *ctx, enum ggml_type type, int64_t ne0, int64_t ne1) {
    const int64_t ne[2] = { ne0, ne1 };
    return tensor_new(ctx, type, 2, ne);
}

struct tensor *tensor_new_3d(struct tensor_ctx *ctx, enum ggml_type type, int64_t ne0, int64_t ne1, int64_t ne2) {
    const int64_t ne[3] = { ne0, ne1, ne2 };
    return tensor_new(ctx, type, 3, ne);
}

struct tensor *tensor_new_4d(struct tensor_ctx *ctx, enum ggml_type type, int64_t ne0, int64_t ne1, int64_t ne2,
                             int64_t ne3) {
    const int64_t ne[4] = { ne0, ne1, ne2, ne3 };
    return tensor_new(ctx, type, 4, ne);
}

struct tensor *tensor_dup_shape(struct tensor_ctx *ctx, const struct tensor *a) {
    if (!a) return NULL;
    return tensor_new(ctx, a->type, TENSOR_MAX_DIMS, a->ne);
}

struct tensor *tensor_set_name(struct tensor *t, const char *fmt, ...) {
    if (!t) return NULL;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t->name, sizeof t->name, fmt, ap);
    va_end(ap);
    return t;
}

/* ---- properties ------------------------------------------------------------------ */

int64_t tensor_nelements(const struct tensor *t) {
    return t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
}

int64_t tensor_nrows(const struct tensor *t) {
    return t->ne[1] * t->ne[2] * t->ne[3];
}

size_t tensor_nbytes(const struct tensor *t) {
    for (int i = 0; i < TENSOR_MAX_DIMS; i++) {
        if (t->ne[i] == 0) return 0;
    }
    const struct type_traits *tt = type_traits_get(t->type);
    size_t nbytes;
    if (tt->blck_size == 1) {
        nbytes = tt->type_size;
        for (int i = 0; i < TENSOR_MAX_DIMS; i++) nbytes += (size_t)(t->ne[i] - 1) * t->nb[i];
    } else {
        nbytes = (size_t)(t->ne[0] / tt->blck_size) * t->nb[0];
        for (int i = 1; i < TENSOR_MAX_DIMS; i++) nbytes += (size_t)(t->ne[i] - 1) * t->nb[i];
    }
    return nbytes;
}

size_t tensor_row_size(const struct tensor *t) {
    size_t size = 0;
    type_row_size(t->type, t->ne[0], &size);
    return size;
}

size_t tensor_element_size(const struct tensor *t) {
    return type_traits_get(t->type)->type_size;
}

int tensor_n_dims(const struct tensor *t) {
    for (int i = TENSOR_MAX_DIMS - 1; i >= 1; i--) {
        if (t->ne[i] > 1) return i + 1;
    }
    return 1;
}

bool tensor_is_contiguous(const struct tensor *t) {
    const struct type_traits *tt = type_traits_get(t->type);
    return t->nb[0] == tt->type_size &&
           t->nb[1] == t->nb[0] * (size_t)(t->ne[0] / tt->blck_size) &&
           t->nb[2] == t->nb[1] * (size_t)t->ne[1] &&
           t->nb[3] == t->nb[2] * (size_t)t->ne[2];
}

bool tensor_is_transposed(const struct tensor *t) {
    return t->nb[0] > t->nb[1];
}

bool tensor_is_permuted(const struct tensor *t) {
    return t->nb[0] > t->nb[1] || t->nb[1] > t->nb[2] || t->nb[2] > t->nb[3];
}

bool tensor_same_shape(const struct tensor *a, const struct tensor *b) {
    return a->ne[0] == b->ne[0] && a->ne[1] == b->ne[1] && a->ne[2] == b->ne[2] && a->ne[3] == b->ne[3];
}

bool tensor_can_repeat(const struct tensor *small, const struct tensor *big) {
    for (int i = 0; i < TENSOR_MAX_DIMS; i++) {
        if (small->ne[i] == 0 ? big->ne[i] != 0 : big->ne[i] % small->ne[i] != 0) return false;
    }
    return true;
}

/* Address of logical element i (row-major over ne0 fastest) of a non-quantized tensor. */
static void *tensor_element_ptr(const struct tensor *t, int64_t i) {
    const int64_t i0 = i % t->ne[0];
    i /= t->ne[0];
    const int64_t i1 = i % t->ne[1];
    i /= t->ne[1];
    const int64_t i2 = i % t->ne[2];
    const int64_t i3 = i / t->ne[2];
    return (char *)t->data + i0 * t->nb[0] + i1 * t->nb[1] + i2 * t->nb[2] + i3 * t->nb[3];
}

float tensor_get_f32_1d(const struct tensor *t, int64_t i) {
    const void *p = tensor_element_ptr(t, i);
    switch (t->type) {
        case GGML_TYPE_F32: return *(const float *)p;
        case GGML_TYPE_F16: return fp16_to_fp32(*(const fp16_t *)p);
        case GGML_TYPE_I32: return (float)*(const int32_t *)p;
        case GGML_TYPE_I16: return (float)*(const int16_t *)p;
        case GGML_TYPE_I8:  return (float)*(const int8_t *)p;
        default: break;
    }
    assert(!"tensor_get_f32_1d: quantized tensor");
    return 0.0f;
}

void tensor_set_f32_1d(struct tensor *t, int64_t i, float v) {
    void *p = tensor_element_ptr(t, i);
    switch (t->type) {
        case GGML_TYPE_F32: *(float *)p = v; return;
        case GGML_TYPE_F16: *(fp16_t *)p = fp32_to_fp16(v); return;
        case GGML_TYPE_I32: *(int32_t *)p = (int32_t)v; return;
        case GGML_TYPE_I16: *(int16_t *)p = (int16_t)v; return;
        case GGML_TYPE_I8:  *(int8_t *)p = (int8_t)v; return;
        default: break;
    }
    assert(!"tensor_set_f32_1d: quantized tensor");
}

/* ---- views ----------------------------------------------------------------------- */

static struct tensor *tensor_view_impl(struct tensor_ctx *ctx, struct tensor *a, int n_dims, const int64_t *ne,
                                       size_t offset) {
    if (!a) return NULL;
    struct tensor *t = tensor_new_impl(ctx, a->type, n_dims, ne, a, offset);
    if (!t) return NULL;
    tensor_set_name(t, "%s (view)", a->name);
    t->op = OP_VIEW;
    t->src[0] = a;
    memcpy(t->op_params, &offset, sizeof offset);
    return t;
}

/* A view with explicit strides: the bytes it reaches must lie inside a. */
static struct tensor *tensor_view_strided(struct tensor_ctx *ctx, struct tensor *a, int n_dims, const int64_t *ne,
                                          const size_t *nb, size_t offset) {
    struct tensor *t = tensor_view_impl(ctx, a, n_dims, ne, offset);
    if (!t) return NULL;
    for (int i = 1; i < n_dims; i++) t->nb[i] = nb[i - 1];
    for (int i = n_dims; i < TENSOR_MAX_DIMS; i++) t->nb[i] = t->nb[i - 1] * (size_t)t->ne[i - 1];
    size_t end;
    if (!ck_add_size(t->view_offs, tensor_nbytes(t), &end) || end > tensor_nbytes(t->view_src)) {
        error_set("tensor view of '%s': strides reach past its %zu bytes", a->name, tensor_nbytes(t->view_src));
        return NULL;
    }
    return t;
}

struct tensor *tensor_view_1d(struct tensor_ctx *ctx, struct tensor *a, int64_t ne0, size_t offset) {
    return tensor_view_impl(ctx, a, 1, &ne0, offset);
}

struct tensor *tensor_view_2d(struct tensor_ctx *ctx, struct tensor *a, int64_t ne0, int64_t ne1, size_t nb1,
                              size_t offset) {
    const int64_t ne[2] = { ne0, ne1 };
    const size_t nb[1] = { nb1 };
    return tensor_view_strided(ctx, a, 2, ne, nb, offset);
}

struct tensor *tensor_view_3d(struct tensor_ctx *ctx, struct tensor *a, int64_t ne0, int64_t ne1, int64_t ne2,
                              size_t nb1, size_t nb2, size_t offset) {
    const int64_t ne[3] = { ne0, ne1, ne2 };
    const size_t nb[2] = { nb1, nb2 };
    return tensor_view_strided(ctx, a, 3, ne, nb, offset);
}

struct tensor *tensor_view_4d(struct tensor_ctx *ctx, struct tensor *a, int64_t ne0, int64_t ne1, int64_t ne2,
                              int64_t ne3, size_t nb1, size_t nb2, size_t nb3, size_t offset) {
    const int64_t ne[4] = { ne0, ne1, ne2, ne3 };
    const size_t nb[3] = { nb1, nb2, nb3 };
    return tensor_view_strided(ctx, a, 4, ne, nb, offset);
}

/* A view of all of a with a's strides (the result of op_cpy). */
struct tensor *tensor_view_whole(struct tensor_ctx *ctx, struct tensor *a) {
    struct tensor *t = tensor_view_impl(ctx, a, TENSOR_MAX_DIMS, a->ne, 0);
    if (!t) return NULL;
    for (int i = 0; i < TENSOR_MAX_DIMS; i++) t->nb[i] = a->nb[i];
    return t;
}

static struct tensor *tensor_reshape_impl(struct tensor_ctx *ctx, struct tensor *a, int n_dims, const int64_t *ne) {
    if (!a) return NULL;
    if (!tensor_is_contiguous(a)) {
        error_set("reshape of '%s': the source is not contiguous", a->name);
        return NULL;
    }
    int64_t n = 1;
    for (int i = 0; i < n_dims; i++) n *= ne[i];
    if (n != tensor_nelements(a)) {
        error_set("reshape of '%s': %lld elements into %lld", a->name, (long long)tensor_nelements(a), (long long)n);
        return NULL;
    }
    struct tensor *t = tensor_new_impl(ctx, a->type, n_dims, ne, a, 0);
    if (!t) return NULL;
    tensor_set_name(t, "%s (reshaped)", a->name);
    t->op = OP_RESHAPE;
    t->src[0] = a;
    return t;
}

struct tensor *tensor_reshape_1d(struct tensor_ctx *ctx, struct tensor *a, int64_t ne0) {
    return tensor_reshape_impl(ctx, a, 1, &ne0);
}

struct tensor *tensor_reshape_2d(struct tensor_ctx *ctx, struct tensor *a, int64_t ne0, int64_t ne1) {
    const int64_t ne[2] = { ne0, ne1 };
    return tensor_reshape_impl(ctx, a, 2, ne);
}

struct tensor *tensor_reshape_3d(struct tensor_ctx *ctx, struct tensor *a, int64_t ne0, int64_t ne1, int64_t ne2) {
    const int64_t ne[3] = { ne0, ne1, ne2 };
    return tensor_reshape_impl(ctx, a, 3, ne);
}

struct tensor *tensor_reshape_4d(struct tensor_ctx *ctx, struct tensor *a, int64_t ne0, int64_t ne1, int64_t ne2,
                                 int64_t ne3) {
    const int64_t ne[4] = { ne0, ne1, ne2, ne3 };
    return tensor_reshape_impl(ctx, a, 4, ne);
}

struct tensor *tensor_permute(struct tensor_ctx *ctx, struct tensor *a, int axis0, int axis1, int axis2, int axis3) {
    if (!a) return NULL;
    const int axes[4] = { axis0, axis1, axis2, axis3 };
    bool used[4] = { false, false, false, false };
    for (int i = 0; i < 4; i++) {
        if (axes[i] < 0 || axes[i] > 3 || used[axes[i]]) {
            error_set("permute of '%s': axes %d %d %d %d are not a permutation of 0..3", a->name, axis0, axis1,
                      axis2, axis3);
            return NULL;
        }
        used[axes[i]] = true;
    }
    struct tensor *t = tensor_view_whole(ctx, a);
    if (!t) return NULL;
    tensor_set_name(t, "%s (permuted)", a->name);
    for (int i = 0; i < 4; i++) {
        t->ne[axes[i]] = a->ne[i];
        t->nb[axes[i]] = a->nb[i];
    }
    t->op = OP_PERMUTE;
    memset(t->op_params, 0, sizeof t->op_params);
    memcpy(t->op_params, axes, sizeof axes);
    return t;
}

struct tensor *tensor_transpose(struct tensor_ctx *ctx, struct tensor *a) {
    if (!a) return NULL;
    struct tensor *t = tensor_permute(ctx, a, 1, 0, 2, 3);
    if (!t) return NULL;
    tensor_set_name(t, "%s (transposed)", a->name);
    t->op = OP_TRANSPOSE;
    return t;
}

/*
 * Op constructors: each checks its operands' shapes and types, creates the
 * result tensor and records the op; nothing is computed here.
 *
 * Every constructor returns NULL when an operand is NULL (so a failed step
 * propagates through a graph builder) and NULL with error_set() when the
 * operands do not fit. Shapes and op_params follow b1892's ggml.c so that
 * graph builders translate one to one.
 */
#include "tensor/tensor_impl.h"

#include <string.h>

#include "core/log.h"
#include "quant/quant.h"

static void op_param_set_i32(struct tensor *t, int i, int32_t v) { t->op_params[i] = v; }
static void op_param_set_f32(struct tensor *t, int i, float v) { memcpy(&t->op_params[i], &v, sizeof v); }

/* The result of an op: a new tensor of `type` and shape `ne` with sources a, b. */
static struct tensor *op_new(struct tensor_ctx *ctx, enum tensor_op op, enum ggml_type type, const int64_t *ne,
                             struct tensor *a, struct tensor *b) {
    struct tensor *t = tensor_new_impl(ctx, type, TENSOR_MAX_DIMS, ne, NULL, 0);
    if (!t) return NULL;
    t->op = op;
    t->src[0] = a;
    t->src[1] = b;
    return t;
}

static struct tensor *op_new_like(struct tensor_ctx *ctx, enum tensor_op op, struct tensor *a, struct tensor *b) {
    return op_new(ctx, op, a->type, a->ne, a, b);
}

static bool op_check_f32(const struct tensor *t, const char *op) {
    if (t->type != GGML_TYPE_F32) {
        error_set("%s: '%s' is %s, F32 needed", op, t->name, type_name(t->type));
        return false;
    }
    return true;
}

static bool op_check_same_shape(const struct tensor *a, const struct tensor *b, const char *op) {
    if (!tensor_same_shape(a, b)) {
        error_set("%s: shapes [%lld %lld %lld %lld] and [%lld %lld %lld %lld] differ", op, (long long)a->ne[0],
                  (long long)a->ne[1], (long long)a->ne[2], (long long)a->ne[3], (long long)b->ne[0],
                  (long long)b->ne[1], (long long)b->ne[2], (long long)b->ne[3]);
        return false;
    }
    return true;
}

/* ---- element-wise -------------------------------------------------------------- */

struct tensor *op_dup(struct tensor_ctx *ctx, struct tensor *a) {
    if (!a) return NULL;
    return op_new_like(ctx, OP_DUP, a, NULL);
}

/* add, sub, mul, div: b is repeated over a (a.ne[i] a multiple of b.ne[i]). */
static struct tensor *op_binary(struct tensor_ctx *ctx, enum tensor_op op, struct tensor *a, struct tensor *b) {
    if (!a || !b) return NULL;
    const char *name = tensor_op_name(op);
    if (!tensor_can_repeat(b, a)) {
        error_set("%s: [%lld %lld %lld %lld] cannot be broadcast to [%lld %lld %lld %lld]", name,
                  (long long)b->ne[0], (long long)b->ne[1], (long long)b->ne[2], (long long)b->ne[3],
                  (long long)a->ne[0], (long long)a->ne[1], (long long)a->ne[2], (long long)a->ne[3]);
        return NULL;
    }
    /* F16 + F16/F32 exists for ADD (b1892 supports it); everything else is F32 */
    const bool f16_add = op == OP_ADD && a->type == GGML_TYPE_F16 &&
                         (b->type == GGML_TYPE_F16 || b->type == GGML_TYPE_F32) && tensor_same_shape(a, b);
    if (!f16_add && (!op_check_f32(a, name) || !op_check_f32(b, name))) return NULL;
    return op_new_like(ctx, op, a, b);
}

struct tensor *op_add(struct tensor_ctx *ctx, struct tensor *a, struct tensor *b) { return op_binary(ctx, OP_ADD, a, b); }
struct tensor *op_sub(struct tensor_ctx *ctx, struct tensor *a, struct tensor *b) { return op_binary(ctx, OP_SUB, a, b); }
struct tensor *op_mul(struct tensor_ctx *ctx, struct tensor *a, struct tensor *b) { return op_binary(ctx, OP_MUL, a, b); }
struct tensor *op_div(struct tensor_ctx *ctx, struct tensor *a, struct tensor *b) { return op_binary(ctx, OP_DIV, a, b); }

struct tensor *op_add1(struct tensor_ctx *ctx, struct tensor *a, struct tensor *b) {
    if (!a || !b) return NULL;
    if (tensor_nelements(b) != 1) {
        error_set("add1: '%s' is not a scalar", b->name);
        return NULL;
    }
    if (!op_check_f32(a, "add1") || !op_check_f32(b, "add1")) return NULL;
    return op_new_like(ctx, OP_ADD1, a, b);
}

/* acc and set: b is written into the view of a given by strides nb1..3 and a byte offset. */
static struct tensor *op_view_write(struct tensor_ctx *ctx, enum tensor_op op, struct tensor *a, struct tensor *b,
                                    size_t nb1, size_t nb2, size_t nb3, size_t offset) {
    if (!a || !b) return NULL;
    const char *name = tensor_op_name(op);
    if (!op_check_f32(a, name) || !op_check_f32(b, name)) return NULL;
    if (!tensor_is_contiguous(a)) {
        error_set("%s: '%s' is not contiguous", name, a->name);
        return NULL;
    }
    /* the last element written must lie inside a */
    const size_t nb[4] = { sizeof(float), nb1, nb2, nb3 };
    size_t last = offset;
    for (int i = 0; i < 4; i++) {
        if (b->ne[i] == 0) return op_new_like(ctx, op, a, b);
        last += (size_t)(b->ne[i] - 1) * nb[i];
    }
    if (last + sizeof(float) > tensor_nbytes(a) || offset % sizeof(float) != 0 || nb1 > INT32_MAX ||
        nb2 > INT32_MAX || nb3 > INT32_MAX || offset > INT32_MAX) {
        error_set("%s: the view written reaches past the %zu bytes of '%s'", name, tensor_nbytes(a), a->name);
        return NULL;
    }
    struct tensor *t = op_new_like(ctx, op, a, b);
    if (!t) return NULL;
    op_param_set_i32(t, 0, (int32_t)nb1);
    op_param_set_i32(t, 1, (int32_t)nb2);
    op_param_set_i32(t, 2, (int32_t)nb3);
    op_param_set_i32(t, 3, (int32_t)offset);
    return t;
}

struct tensor *op_acc(struct tensor_ctx *ctx, struct tensor *a, struct tensor *b, size_t nb1, size_t nb2, size_t nb3,
                      size_t offset) {
    return op_view_write(ctx, OP_ACC, a, b, nb1, nb2, nb3, offset);
}

struct tensor *op_set(struct tensor_ctx *ctx, struct tensor *a, struct tensor *b, size_t nb1, size_t nb2, size_t nb3,
                      size_t offset) {
    return op_view_write(ctx, OP_SET, a, b, nb1, nb2, nb3, offset);
}

static struct tensor *op_unary_f32(struct tensor_ctx *ctx, enum tensor_op op, struct tensor *a) {
    if (!a) return NULL;
    if (!op_check_f32(a, tensor_op_name(op))) return NULL;
    return op_new_like(ctx, op, a, NULL);
}

struct tensor *op_sqr(struct tensor_ctx *ctx, struct tensor *a) { return op_unary_f32(ctx, OP_SQR, a); }
struct tensor *op_sqrt(struct tensor_ctx *ctx, struct tensor *a) { return op_unary_f32(ctx, OP_SQRT, a); }
struct tensor *op_log(struct tensor_ctx *ctx, struct tensor *a) { return op_unary_f32(ctx, OP_LOG, a); }

struct tensor *op_scale(struct tensor_ctx *ctx, struct tensor *a, float s) {
    struct tensor *t = op_unary_f32(ctx, OP_SCALE, a);
    if (t) op_param_set_f32(t, 0, s);
    return t;
}

struct tensor *op_clamp(struct tensor_ctx *ctx, struct tensor *a, float min, float max) {
    struct tensor *t = op_unary_f32(ctx, OP_CLAMP, a);
    if (!t) return NULL;
    op_param_set_f32(t, 0, min);
    op_param_set_f32(t, 1, max);
    return t;
}

struct tensor *op_unary(struct tensor_ctx *ctx, struct tensor *a, enum tensor_unary_op uop) {
    if ((int)uop < 0 || uop >= UNARY_COUNT) {
        error_set("unary: unknown op %d", (int)uop);
        return NULL;
    }
    struct tensor *t = op_unary_f32(ctx, OP_UNARY, a);
    if (t) op_param_set_i32(t, 0, (int32_t)uop);
    return t;
}

struct tensor *op_silu(struct tensor_ctx *ctx, struct tensor *a) { return op_unary(ctx, a, UNARY_SILU); }

struct tensor *op_silu_back(struct tensor_ctx *ctx, struct tensor *a, struct tensor *grad) {
    if (!a || !grad) return NULL;
    if (!op_check_f32(a, "silu_back") || !op_check_f32(grad, "silu_back") ||
        !op_check_same_shape(a, grad, "silu_back")) {
        return NULL;
    }
    return op_new_like(ctx, OP_SILU_BACK, a, grad);
}

/* ---- reductions and shape changes ------------------------------------------------- */

struct tensor *op_sum(struct tensor_ctx *ctx, struct tensor *a) {
    if (!a) return NULL;
    if (!op_check_f32(a, "sum")) return NULL;
    const int64_t ne[4] = { 1, 1, 1, 1 };
    return op_new(ctx, OP_SUM, GGML_TYPE_F32, ne, a, NULL);
}

static struct tensor *op_row_reduce(struct tensor_ctx *ctx, enum tensor_op op, struct tensor *a) {
    if (!a) return NULL;
    if (!op_check_f32(a, tensor_op_name(op))) return NULL;
    const int64_t ne[4] = { 1, a->ne[1], a->ne[2], a->ne[3] };
    return op_new(ctx, op, GGML_TYPE_F32, ne, a, NULL);
}

struct tensor *op_sum_rows(struct tensor_ctx *ctx, struct tensor *a) { return op_row_reduce(ctx, OP_SUM_ROWS, a); }
struct tensor *op_mean(struct tensor_ctx *ctx, struct tensor *a) { return op_row_reduce(ctx, OP_MEAN, a); }

struct tensor *op_repeat(struct tensor_ctx *ctx, struct tensor *a, struct tensor *shape_of) {
    if (!a || !shape_of) return NULL;
    if (!tensor_can_repeat(a, shape_of)) {
        error_set("repeat: '%s' does not tile the shape of '%s'", a->name, shape_of->name);
        return NULL;
    }
    if (type_traits_get(a->type)->is_quantized) {
        error_set("repeat: quantized type %s", type_name(a->type));
        return NULL;
    }
    return op_new(ctx, OP_REPEAT, a->type, shape_of->ne, a, NULL);
}

struct tensor *op_repeat_back(struct tensor_ctx *ctx, struct tensor *a, struct tensor *shape_of) {
    if (!a || !shape_of) return NULL;
    if (!tensor_can_repeat(shape_of, a)) {
        error_set("repeat_back: the shape of '%s' does not tile '%s'", shape_of->name, a->name);
        return NULL;
    }
    if (!op_check_f32(a, "repeat_back")) return NULL;
    return op_new(ctx, OP_REPEAT_BACK, a->type, shape_of->ne, a, NULL);
}

struct tensor *op_concat(struct tensor_ctx *ctx, struct tensor *a, struct tensor *b) {
    if (!a || !b) return NULL;
    if (a->ne[0] != b->ne[0] || a->ne[1] != b->ne[1] || a->ne[3] != b->ne[3] || a->type != b->type ||
        (a->type != GGML_TYPE_F32 && a->type != GGML_TYPE_I32)) {
        error_set("concat: '%s' and '%s' differ outside dimension 2 or are not both F32/I32", a->name, b->name);
        return NULL;
    }
    const int64_t ne[4] = { a->ne[0], a->ne[1], a->ne[2] + b->ne[2], a->ne[3] };
    return op_new(ctx, OP_CONCAT, a->type, ne, a, b);
}

struct tensor *op_pad(struct tensor_ctx *ctx, struct tensor *a, int p0, int p1, int p2, int p3) {
    if (!a) return NULL;
    if (p0 < 0 || p1 < 0 || p2 < 0 || p3 < 0) {
        error_set("pad: negative padding");
        return NULL;
    }
    if (!op_check_f32(a, "pad")) return NULL;
    const int64_t ne[4] = { a->ne[0] + p0, a->ne[1] + p1, a->ne[2] + p2, a->ne[3] + p3 };
    return op_new(ctx, OP_PAD, GGML_TYPE_F32, ne, a, NULL);
}

struct tensor *op_cont(struct tensor_ctx *ctx, struct tensor *a) {
    if (!a) return NULL;
    struct tensor *t = op_new_like(ctx, OP_CONT, a, NULL);
    if (t) tensor_set_name(t, "%s (cont)", a->name);
    return t;
}

struct tensor *op_cpy(struct tensor_ctx *ctx, struct tensor *a, struct tensor *b) {
    if (!a || !b) return NULL;
    if (tensor_nelements(a) != tensor_nelements(b)) {
        error_set("cpy: '%s' has %lld elements, '%s' %lld", a->name, (long long)tensor_nelements(a), b->name,
                  (long long)tensor_nelements(b));
        return NULL;
    }
    /* the result is b itself (as a view), so later ops read what was copied */
    struct tensor *t = tensor_view_whole(ctx, b);
    if (!t) return NULL;
    if (b->name[0]) {
        tensor_set_name(t, "%s (copy of %s)", b->name, a->name);
    } else {
        tensor_set_name(t, "%s (copy)", a->name);
    }
    t->op = OP_CPY;
    memset(t->op_params, 0, sizeof t->op_params);
    t->src[0] = a;
    t->src[1] = b;
    return t;
}

/* ---- normalisation ----------------------------------------------------------------- */

static struct tensor *op_norm_impl(struct tensor_ctx *ctx, enum tensor_op op, struct tensor *a, float eps) {
    if (!a) return NULL;
    if (!op_check_f32(a, tensor_op_name(op))) return NULL;
    struct tensor *t = op_new_like(ctx, op, a, NULL);
    if (t) op_param_set_f32(t, 0, eps);
    return t;
}

struct tensor *op_norm(struct tensor_ctx *ctx, struct tensor *a, float eps) { return op_norm_impl(ctx, OP_NORM, a, eps); }
struct tensor *op_rms_norm(struct tensor_ctx *ctx, struct tensor *a, float eps) {
    return op_norm_impl(ctx, OP_RMS_NORM, a, eps);
}

struct tensor *op_rms_norm_back(struct tensor_ctx *ctx, struct tensor *a, struct tensor *grad, float eps) {
    if (!a || !grad) return NULL;
    if (!op_check_f32(a, "rms_norm_back") || !op_check_f32(grad, "rms_norm_back") ||
        !op_check_same_shape(a, grad, "rms_norm_back")) {
        return NULL;
    }
    struct tensor *t = op_new_like(ctx, OP_RMS_NORM_BACK, a, grad);
    if (t) op_param_set_f32(t, 0, eps);
    return t;
}

/* ---- matrix products -------------------------------------------------------------- */

static bool op_check_mul_mat(const struct tensor *a, const struct tensor *b, const char *op) {
    const struct type_traits *tt = type_traits_get(a->type);
    if (a->ne[0] != b->ne[0] || a->ne[2] == 0 || a->ne[3] == 0 || b->ne[2] % a->ne[2] != 0 ||
        b->ne[3] % a->ne[3] != 0) {
        error_set("%s: [%lld %lld %lld %lld] x [%lld %lld %lld %lld] do not fit", op, (long long)a->ne[0],
                  (long long)a->ne[1], (long long)a->ne[2], (long long)a->ne[3], (long long)b->ne[0],
                  (long long)b->ne[1], (long long)b->ne[2], (long long)b->ne[3]);
        return false;
    }
    if (!tt || (a->type != GGML_TYPE_F32 && a->type != GGML_TYPE_F16 && !tt->is_quantized)) {
        error_set("%s: weight type %s cannot be multiplied", op, type_name(a->type));
        return false;
    }
    if (b->type != GGML_TYPE_F32 && b->type != GGML_TYPE_F16) {
        error_set("%s: activations of type %s", op, type_name(b->type));
        return false;
    }
    /* rows must be packed (as b1892); dims 1..3 may have any strides */
    if (a->nb[0] != tt->type_size || b->nb[0] != type_traits_get(b->type)->type_size) {
        error_set("%s: operands with strided rows (transposed) are not supported; use op_cont first", op);
        return false;
    }
    return true;
}

struct tensor *op_mul_mat(struct tensor_ctx *ctx, struct tensor *a, struct tensor *b) {
    if (!a || !b) return NULL;
    if (!op_check_mul_mat(a, b, "mul_mat")) return NULL;
    const int64_t ne[4] = { a->ne[1], b->ne[1], b->ne[2], b->ne[3] };
    return op_new(ctx, OP_MUL_MAT, GGML_TYPE_F32, ne, a, b);
}

struct tensor *op_mul_mat_masked(struct tensor_ctx *ctx, struct tensor *a, struct tensor *b, struct tensor *mask) {
    if (!a || !b || !mask) return NULL;
    if (mask->type != GGML_TYPE_F32 || mask->ne[0] != a->ne[1] || mask->ne[1] != b->ne[1] || mask->ne[2] != 1 ||
        mask->ne[3] != 1 || mask->nb[0] != sizeof(float)) {
        error_set("mul_mat_masked: the mask must be F32 [%lld, %lld]", (long long)a->ne[1], (long long)b->ne[1]);
        return NULL;
    }
    struct tensor *t = op_mul_mat(ctx, a, b);
    if (t) t->src[2] = mask;
    return t;
}

struct tensor *op_attention(struct tensor_ctx *ctx, struct tensor *k, struct tensor *q, struct tensor *v,
                            struct tensor *mask, float scale) {
    if (!k || !q || !v || !mask) return NULL;
    const int64_t d_k = k->ne[0], n_kv = k->ne[1], h_kv = k->ne[2], n_tok = q->ne[1], n_head = q->ne[2];
    if (k->type != GGML_TYPE_F16 || v->type != GGML_TYPE_F16 || q->type != GGML_TYPE_F32 ||
        k->nb[0] != sizeof(uint16_t) || v->nb[0] != sizeof(uint16_t) || q->nb[0] != sizeof(float)) {
        error_set("attention: k and v must be F16 and q F32, with packed rows");
        return NULL;
    }
    if (q->ne[0] != d_k || v->ne[0] != n_kv || v->ne[2] != h_kv || h_kv == 0 || n_head % h_kv != 0 ||
        k->ne[3] != 1 || q->ne[3] != 1 || v->ne[3] != 1) {
        error_set("attention: k [%lld %lld %lld], q [%lld %lld %lld], v [%lld %lld %lld] do not fit", (long long)d_k,
                  (long long)n_kv, (long long)h_kv, (long long)q->ne[0], (long long)n_tok, (long long)n_head,
                  (long long)v->ne[0], (long long)v->ne[1], (long long)v->ne[2]);
        return NULL;
    }
    if (mask->type != GGML_TYPE_F32 || mask->ne[0] != n_kv || mask->ne[1] != n_tok || mask->ne[2] != 1 ||
        mask->ne[3] != 1 || !tensor_is_contiguous(mask)) {
        error_set("attention: the mask must be F32 [%lld, %lld], contiguous", (long long)n_kv, (long long)n_tok);
        return NULL;
    }
    const int64_t ne[4] = { v->ne[1], n_head, n_tok, 1 };
    struct tensor *t = op_new(ctx, OP_ATTENTION, GGML_TYPE_F32, ne, k, q);
    if (!t) return NULL;
    t->src[2] = mask;
    t->src[3] = v;
    op_param_set_f32(t, 0, scale);
    return t;
}

struct tensor *op_mul_mat_id(struct tensor_ctx *ctx, struct tensor *const *as, int n_as, struct tensor *ids, int id,
                             struct tensor *b) {
    if (!as || !ids || !b) return NULL;
    if (n_as <= 0 || n_as > TENSOR_MAX_SRC - 2) {
        error_set("mul_mat_id: %d experts (1 to %d supported)", n_as, TENSOR_MAX_SRC - 2);
        return NULL;
    }
    for (int i = 0; i < n_as; i++) {
        if (!as[i]) return NULL;
        if (!tensor_same_shape(as[i], as[0]) || as[i]->type != as[0]->type) {
            error_set("mul_mat_id: expert %d differs in shape or type from expert 0", i);
            return NULL;
        }
    }
    if (ids->type != GGML_TYPE_I32 || ids->ne[1] != b->ne[1] || ids->ne[2] != b->ne[2] || ids->ne[3] != b->ne[3] ||
        id < 0 || id >= ids->ne[0]) {
        error_set("mul_mat_id: ids must be I32 [n_ids > %d, %lld] matching the rows of b", id, (long long)b->ne[1]);
        return NULL;
    }
    if (!op_check_mul_mat(as[0], b, "mul_mat_id")) return NULL;
    const int64_t ne[4] = { as[0]->ne[1], b->ne[1], b->ne[2], b->ne[3] };
    struct tensor *t = op_new(ctx, OP_MUL_MAT_ID, GGML_TYPE_F32, ne, ids, b);
    if (!t) return NULL;
    op_param_set_i32(t, 0, id);
    op_param_set_i32(t, 1, n_as);
    for (int i = 0; i < n_as; i++) t->src[2 + i] = as[i];
    return t;
}

struct tensor *op_out_prod(struct tensor_ctx *ctx, struct tensor *a, struct tensor *b) {
    if (!a || !b) return NULL;
    if (a->ne[1] != b->ne[1] || a->ne[2] != b->ne[2] || a->ne[3] != b->ne[3]) {
        error_set("out_prod: '%s' and '%s' differ in dimensions 1..3", a->name, b->name);
        return NULL;
    }
    if (!op_check_f32(a, "out_prod") || !op_check_f32(b, "out_prod")) return NULL;
    const int64_t ne[4] = { a->ne[0], b->ne[0], a->ne[2], b->ne[3] };
    return op_new(ctx, OP_OUT_PROD, GGML_TYPE_F32, ne, a, b);
}

/* ---- rows -------------------------------------------------------------------------- */

struct tensor *op_get_rows(struct tensor_ctx *ctx, struct tensor *a, struct tensor *rows) {
    if (!a || !rows) return NULL;
    if (rows->type != GGML_TYPE_I32 || a->ne[2] != rows->ne[1] || rows->ne[3] != 1 || a->ne[3] != rows->ne[2]) {
        error_set("get_rows: indices '%s' must be I32 [n, %lld, %lld]", rows->name, (long long)a->ne[2],
                  (long long)a->ne[3]);
        return NULL;
    }
    const struct type_traits *tt = type_traits_get(a->type);
    if (a->type != GGML_TYPE_F32 && a->type != GGML_TYPE_F16 && a->type != GGML_TYPE_I32 && !tt->is_quantized) {
        error_set("get_rows: rows of type %s", type_name(a->type));
        return NULL;
    }
    /* rows come out as F32 (dequantized), except I32 stays I32 (b1892) */
    const enum ggml_type type = a->type == GGML_TYPE_I32 ? GGML_TYPE_I32 : GGML_TYPE_F32;
    const int64_t ne[4] = { a->ne[0], rows->ne[0], rows->ne[1], rows->ne[2] };
    return op_new(ctx, OP_GET_ROWS, type, ne, a, rows);
}

struct tensor *op_get_rows_back(struct tensor_ctx *ctx, struct tensor *grad, struct tensor *rows,
                                struct tensor *shape_of) {
    if (!grad || !rows || !shape_of) return NULL;
    if (tensor_n_dims(grad) > 2 || tensor_n_dims(rows) > 1 || rows->type != GGML_TYPE_I32 ||
        grad->ne[1] != rows->ne[0] || tensor_n_dims(shape_of) > 2 || grad->ne[0] != shape_of->ne[0] ||
        (grad->type != GGML_TYPE_F32 && grad->type != GGML_TYPE_F16)) {
        error_set("get_rows_back: needs grad [n, m] (F32/F16), I32 rows [m] and a shape [n, rows]");
        return NULL;
    }
    const int64_t ne[4] = { shape_of->ne[0], shape_of->ne[1], 1, 1 };
    struct tensor *t = op_new(ctx, OP_GET_ROWS_BACK, GGML_TYPE_F32, ne, grad, rows);
    if (t) t->src[2] = shape_of;
    return t;
}

struct tensor *op_diag(struct tensor_ctx *ctx, struct tensor *a) {
    if (!a) return NULL;
    if (a->ne[1] != 1 || !op_check_f32(a, "diag")) {
        error_set("diag: needs an F32 row vector");
        return NULL;
    }
    const int64_t ne[4] = { a->ne[0], a->ne[0], a->ne[2], a->ne[3] };
    return op_new(ctx, OP_DIAG, GGML_TYPE_F32, ne, a, NULL);
}

static struct tensor *op_diag_mask(struct tensor_ctx *ctx, enum tensor_op op, struct tensor *a, int n_past) {
    if (!a) return NULL;
    if (n_past < 0) {
        error_set("%s: n_past %d < 0", tensor_op_name(op), n_past);
        return NULL;
    }
    if (!op_check_f32(a, tensor_op_name(op))) return NULL;
    struct tensor *t = op_new_like(ctx, op, a, NULL);
    if (t) op_param_set_i32(t, 0, n_past);
    return t;
}

struct tensor *op_diag_mask_inf(struct tensor_ctx *ctx, struct tensor *a, int n_past) {
    return op_diag_mask(ctx, OP_DIAG_MASK_INF, a, n_past);
}

struct tensor *op_diag_mask_zero(struct tensor_ctx *ctx, struct tensor *a, int n_past) {
    return op_diag_mask(ctx, OP_DIAG_MASK_ZERO, a, n_past);
}

/* ---- attention ------------------------------------------------------------------- */

struct tensor *op_soft_max(struct tensor_ctx *ctx, struct tensor *a, struct tensor *mask, float scale) {
    if (!a) return NULL;
    if (!op_check_f32(a, "soft_max")) return NULL;
    if (!tensor_is_contiguous(a)) {
        error_set("soft_max: '%s' is not contiguous", a->name);
        return NULL;
    }
    if (mask) {
        /* as b1892: the mask repeats over a's rows (row r uses mask row r % mask.ne1) */
        if (!op_check_f32(mask, "soft_max mask")) return NULL;
        if (!tensor_is_contiguous(mask) || mask->ne[2] != 1 || mask->ne[3] != 1 || mask->ne[0] != a->ne[0] ||
            !tensor_can_repeat(mask, a)) {
            error_set("soft_max: mask [%lld %lld] does not fit rows of %lld", (long long)mask->ne[0],
                      (long long)mask->ne[1], (long long)a->ne[0]);
            return NULL;
        }
    }
    struct tensor *t = op_new_like(ctx, OP_SOFT_MAX, a, mask);
    if (t) op_param_set_f32(t, 0, scale);
    return t;
}

struct tensor *op_soft_max_back(struct tensor_ctx *ctx, struct tensor *grad, struct tensor *y) {
    if (!grad || !y) return NULL;
    if (!op_check_f32(grad, "soft_max_back") || !op_check_f32(y, "soft_max_back") ||
        !op_check_same_shape(grad, y, "soft_max_back")) {
        return NULL;
    }
    return op_new_like(ctx, OP_SOFT_MAX_BACK, grad, y);
}

static struct tensor *op_rope_impl(struct tensor_ctx *ctx, enum tensor_op op, struct tensor *a, struct tensor *pos,
                                   int n_dims, int mode, int n_ctx, int n_orig_ctx, float freq_base,
                                   float freq_scale, float ext_factor, float attn_factor, float beta_fast,
                                   float beta_slow) {
    if (!a || !pos) return NULL;
    const char *name = tensor_op_name(op);
    if (pos->type != GGML_TYPE_I32 || tensor_n_dims(pos) > 1 || pos->ne[0] != a->ne[2]) {
        error_set("%s: positions must be I32 [%lld]", name, (long long)a->ne[2]);
        return NULL;
    }
    if (n_dims <= 0 || n_dims % 2 != 0 || n_dims > a->ne[0] || (mode & 4) != 0) {
        error_set("%s: n_dims %d (even, <= %lld) or mode %d (GLM) not supported", name, n_dims,
                  (long long)a->ne[0], mode);
        return NULL;
    }
    if (a->type != GGML_TYPE_F32 && a->type != GGML_TYPE_F16) {
        error_set("%s: type %s", name, type_name(a->type));
        return NULL;
    }
    struct tensor *t = op_new_like(ctx, op, a, pos);
    if (!t) return NULL;
    /* b1892's layout: n_past (unused), n_dims, mode, n_ctx, n_orig_ctx, then the floats */
    op_param_set_i32(t, 0, 0);
    op_param_set_i32(t, 1, n_dims);
    op_param_set_i32(t, 2, mode);
    op_param_set_i32(t, 3, n_ctx);
    op_param_set_i32(t, 4, n_orig_ctx);
    op_param_set_f32(t, 5, freq_base);
    op_param_set_f32(t, 6, freq_scale);
    op_param_set_f32(t, 7, ext_factor);
    op_param_set_f32(t, 8, attn_factor);
    op_param_set_f32(t, 9, beta_fast);
    op_param_set_f32(t, 10, beta_slow);
    return t;
}

struct tensor *op_rope(struct tensor_ctx *ctx, struct tensor *a, struct tensor *pos, int n_dims, int mode, int n_ctx,
                       int n_orig_ctx, float freq_base, float freq_scale, float ext_factor, float attn_factor,
                       float beta_fast, float beta_slow) {
    return op_rope_impl(ctx, OP_ROPE, a, pos, n_dims, mode, n_ctx, n_orig_ctx, freq_base, freq_scale, ext_factor,
                        attn_factor, beta_fast, beta_slow);
}

struct tensor *op_rope_back(struct tensor_ctx *ctx, struct tensor *grad, struct tensor *pos, int n_dims, int mode,
                            int n_ctx, int n_orig_ctx, float freq_base, float freq_scale, float ext_factor,
                            float attn_factor, float beta_fast, float beta_slow) {
    return op_rope_impl(ctx, OP_ROPE_BACK, grad, pos, n_dims, mode, n_ctx, n_orig_ctx, freq_base, freq_scale,
                        ext_factor, attn_factor, beta_fast, beta_slow);
}

struct tensor *op_alibi(struct tensor_ctx *ctx, struct tensor *a, int n_past, int n_head, float bias_max) {
    if (!a) return NULL;
    if (n_past < 0 || n_head <= 0 || a->ne[2] != n_head) {
        error_set("alibi: n_head %d must equal dimension 2 (%lld), n_past >= 0", n_head, (long long)a->ne[2]);
        return NULL;
    }
    if (a->type != GGML_TYPE_F32 && a->type != GGML_TYPE_F16) {
        error_set("alibi: type %s", type_name(a->type));
        return NULL;
    }
    /* b1892 returns a tensor of a's type (its F16 kernel then writes floats, a bug we do not copy) */
    struct tensor *t = op_new(ctx, OP_ALIBI, GGML_TYPE_F32, a->ne, a, NULL);
    if (!t) return NULL;
    op_param_set_i32(t, 0, n_past);
    op_param_set_i32(t, 1, n_head);
    op_param_set_f32(t, 2, bias_max);
    return t;
}

struct tensor *op_argsort(struct tensor_ctx *ctx, struct tensor *a, enum tensor_sort_order order) {
    if (!a) return NULL;
    if (order != SORT_ASC && order != SORT_DESC) {
        error_set("argsort: unknown order %d", (int)order);
        return NULL;
    }
    if (!op_check_f32(a, "argsort")) return NULL;
    if (a->ne[0] > INT32_MAX) {
        error_set("argsort: rows of %lld elements", (long long)a->ne[0]);
        return NULL;
    }
    struct tensor *t = op_new(ctx, OP_ARGSORT, GGML_TYPE_I32, a->ne, a, NULL);
    if (t) op_param_set_i32(t, 0, (int32_t)order);
    return t;
}

struct tensor *op_top_k(struct tensor_ctx *ctx, struct tensor *a, int k) {
    if (!a) return NULL;
    if (k <= 0 || k > a->ne[0]) {
        error_set("top_k: k = %d for rows of %lld", k, (long long)a->ne[0]);
        return NULL;
    }
    struct tensor *sorted = op_argsort(ctx, a, SORT_DESC);
    if (!sorted) return NULL;
    return tensor_view_4d(ctx, sorted, k, sorted->ne[1], sorted->ne[2], sorted->ne[3], sorted->nb[1], sorted->nb[2],
                          sorted->nb[3], 0);
}

/* ---- losses ------------------------------------------------------------------------ */

struct tensor *op_cross_entropy_loss(struct tensor_ctx *ctx, struct tensor *logits, struct tensor *targets) {
    if (!logits || !targets) return NULL;
    if (!op_check_f32(logits, "cross_entropy_loss") || !op_check_f32(targets, "cross_entropy_loss") ||
        !op_check_same_shape(logits, targets, "cross_entropy_loss")) {
        return NULL;
    }
    const int64_t ne[4] = { 1, 1, 1, 1 };
    return op_new(ctx, OP_CROSS_ENTROPY_LOSS, GGML_TYPE_F32, ne, logits, targets);
}

struct tensor *op_cross_entropy_loss_back(struct tensor_ctx *ctx, struct tensor *logits, struct tensor *targets,
                                          struct tensor *grad) {
    if (!logits || !targets || !grad) return NULL;
    if (!op_check_f32(logits, "cross_entropy_loss_back") || !op_check_f32(targets, "cross_entropy_loss_back") ||
        !op_check_f32(grad, "cross_entropy_loss_back") ||
        !op_check_same_shape(logits, targets, "cross_entropy_loss_back")) {
        return NULL;
    }
    if (tensor_nelements(grad) != 1) {
        error_set("cross_entropy_loss_back: the loss gradient '%s' is not a scalar", grad->name);
        return NULL;
    }
    struct tensor *t = op_new_like(ctx, OP_CROSS_ENTROPY_LOSS_BACK, logits, targets);
    if (t) t->src[2] = grad;
    return t;
}

/* ---- names -------------------------------------------------------------------------- */

static const char *const g_op_names[OP_COUNT] = {
    [OP_NONE] = "none",
    [OP_DUP] = "dup",
    [OP_ADD] = "add",
    [OP_ADD1] = "add1",
    [OP_ACC] = "acc",
    [OP_SUB] = "sub",
    [OP_MUL] = "mul",
    [OP_DIV] = "div",
    [OP_SQR] = "sqr",
    [OP_SQRT] = "sqrt",
    [OP_LOG] = "log",
    [OP_SUM] = "sum",
    [OP_SUM_ROWS] = "sum_rows",
    [OP_MEAN] = "mean",
    [OP_REPEAT] = "repeat",
    [OP_REPEAT_BACK] = "repeat_back",
    [OP_CONCAT] = "concat",
    [OP_NORM] = "norm",
    [OP_RMS_NORM] = "rms_norm",
    [OP_RMS_NORM_BACK] = "rms_norm_back",
    [OP_MUL_MAT] = "mul_mat",
    [OP_MUL_MAT_ID] = "mul_mat_id",
    [OP_OUT_PROD] = "out_prod",
    [OP_SCALE] = "scale",
    [OP_SET] = "set",
    [OP_CPY] = "cpy",
    [OP_CONT] = "cont",
    [OP_RESHAPE] = "reshape",
    [OP_VIEW] = "view",
    [OP_PERMUTE] = "permute",
    [OP_TRANSPOSE] = "transpose",
    [OP_GET_ROWS] = "get_rows",
    [OP_GET_ROWS_BACK] = "get_rows_back",
    [OP_DIAG] = "diag",
    [OP_DIAG_MASK_INF] = "diag_mask_inf",
    [OP_DIAG_MASK_ZERO] = "diag_mask_zero",
    [OP_SOFT_MAX] = "soft_max",
    [OP_SOFT_MAX_BACK] = "soft_max_back",
    [OP_ROPE] = "rope",
    [OP_ROPE_BACK] = "rope_back",
    [OP_ALIBI] = "alibi",
    [OP_CLAMP] = "clamp",
    [OP_ARGSORT] = "argsort",
    [OP_PAD] = "pad",
    [OP_UNARY] = "unary",
    [OP_SILU_BACK] = "silu_back",
    [OP_CROSS_ENTROPY_LOSS] = "cross_entropy_loss",
    [OP_CROSS_ENTROPY_LOSS_BACK] = "cross_entropy_loss_back",
    [OP_ATTENTION] = "attention",
};

const char *tensor_op_name(enum tensor_op op) {
    return (int)op >= 0 && op < OP_COUNT && g_op_names[op] ? g_op_names[op] : "?";
}

/*
 * Scalar reference kernels: copies and conversions, element-wise ops,
 * reductions, tiling, row gathers, masks, sorting.
 *
 * Every kernel accepts arbitrary strides in dimensions 1..3 and, where noted,
 * in dimension 0 too; the support checks say what else is required.
 */
#include <math.h>
#include <string.h>

#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/cpu_vec.h"
#include "core/fp16.h"
#include "quant/quant.h"

static bool cpu_is_quantized(enum ggml_type type) {
    const struct type_traits *tt = type_traits_get(type);
    return tt && tt->is_quantized;
}

static bool cpu_all_f32(const struct tensor *dst, int n_src) {
    if (dst->type != GGML_TYPE_F32) return false;
    for (int i = 0; i < n_src; i++) {
        if (!dst->src[i] || dst->src[i]->type != GGML_TYPE_F32) return false;
    }
    return true;
}

static bool cpu_supported_f32_unary(const struct tensor *dst) { return cpu_all_f32(dst, 1); }
static bool cpu_supported_f32_binary(const struct tensor *dst) { return cpu_all_f32(dst, 2); }

/* Address of logical element k (ne0 fastest) of t. */
static void *cpu_flat_elem(const struct tensor *t, int64_t k) {
    const int64_t i0 = k % t->ne[0];
    k /= t->ne[0];
    const int64_t i1 = k % t->ne[1];
    k /= t->ne[1];
    const int64_t i2 = k % t->ne[2];
    return cpu_elem(t, i0, i1, i2, k / t->ne[2]);
}

/* ---- dup / cont / cpy -----------------------------------------------------------
 * Elements are copied in logical order (dst may have another shape with the
 * same count), converting types. As b1892: F32 -> F16 rounds to nearest
 * even; F32 -> quantized uses the type's from_float on whole rows (the KV
 * cache), which needs dst contiguous and rows of whole blocks. */

static bool cpu_dup_supported(const struct tensor *dst) {
    const struct tensor *src = dst->src[0];
    const struct type_traits *st = type_traits_get(src->type);
    if (st->is_quantized && src->nb[0] != st->type_size) return false;
    if (cpu_is_quantized(dst->type)) {
        const int64_t blck = type_traits_get(dst->type)->blck_size;
        if (!tensor_is_contiguous(dst) || src->ne[0] % blck != 0) return false;
        return src->type == dst->type || (cpu_type_to_float_ok(src->type) && cpu_type_from_float_ok(dst->type));
    }
    if (src->type == dst->type) return true;
    return (dst->type == GGML_TYPE_F32 || dst->type == GGML_TYPE_F16) && cpu_type_to_float_ok(src->type);
}

static size_t cpu_dup_work(const struct tensor *dst, int n_threads) {
    return (size_t)n_threads * cpu_scratch_stride((size_t)dst->src[0]->ne[0] * sizeof(float));
}

static void cpu_dup(const struct cpu_task *task, struct tensor *dst) {
    const struct tensor *src = dst->src[0];
    const int64_t ne00 = src->ne[0];
    const struct type_traits *dt = type_traits_get(dst->type);
    const size_t esize = dt->type_size;
    const bool dst_cont = tensor_is_contiguous(dst);
    float *tmp = cpu_task_scratch(task, 0, (size_t)ne00 * sizeof(float));
    int64_t r0, r1;
    cpu_task_rows(task, tensor_nrows(src), &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        int64_t i1, i2, i3;
        cpu_row_index(src, r, &i1, &i2, &i3);
        const char *srow = cpu_elem(src, 0, i1, i2, i3);
        const int64_t k = r * ne00; /* logical index of the row's first element */
        if (dt->is_quantized) {
            char *drow = (char *)dst->data + (size_t)(k / dt->blck_size) * esize;
            if (src->type == dst->type) {
                memcpy(drow, srow, (size_t)(ne00 / dt->blck_size) * esize);
            } else {
                cpu_row_to_float(src->type, srow, src->nb[0], tmp, ne00);
                cpu_row_from_float(dst->type, tmp, drow, ne00);
            }
        } else if (src->type == dst->type) {
            if (dst_cont && src->nb[0] == esize) {
                memcpy((char *)dst->data + (size_t)k * esize, srow, (size_t)ne00 * esize);
            } else {
                for (int64_t j = 0; j < ne00; j++) memcpy(cpu_flat_elem(dst, k + j), srow + j * src->nb[0], esize);
            }
        } else {
            cpu_row_to_float(src->type, srow, src->nb[0], tmp, ne00);
            if (dst_cont) { /* F32 or F16 (rounded to nearest even) */
                cpu_row_from_float(dst->type, tmp, (char *)dst->data + (size_t)k * esize, ne00);
                continue;
            }
            for (int64_t j = 0; j < ne00; j++) {
                void *d = dst_cont ? (char *)dst->data + (size_t)(k + j) * esize : cpu_flat_elem(dst, k + j);
                if (dst->type == GGML_TYPE_F32) {
                    memcpy(d, &tmp[j], sizeof(float));
                } else {
                    const fp16_t h = fp32_to_fp16(tmp[j]);
                    memcpy(d, &h, sizeof h);
                }
            }
        }
    }
}

const struct cpu_op_desc cpu_desc_dup = { .kernel = cpu_dup, .work_size = cpu_dup_work, .supported = cpu_dup_supported };

/* ---- binary element-wise with broadcasting of src1 ------------------------------ */

static float cpu_ld_f32(const struct tensor *t, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
    float v;
    memcpy(&v, cpu_elem(t, i0, i1, i2, i3), sizeof v);
    return v;
}

static void cpu_st_f32(const struct tensor *t, int64_t i0, int64_t i1, int64_t i2, int64_t i3, float v) {
    memcpy(cpu_elem(t, i0, i1, i2, i3), &v, sizeof v);
}

static float cpu_ld_any(const struct tensor *t, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
    const void *p = cpu_elem(t, i0, i1, i2, i3);
    if (t->type == GGML_TYPE_F16) {
        fp16_t h;
        memcpy(&h, p, sizeof h);
        return fp16_to_fp32(h);
    }
    float v;
    memcpy(&v, p, sizeof v);
    return v;
}

static void cpu_st_any(const struct tensor *t, int64_t i0, int64_t i1, int64_t i2, int64_t i3, float v) {
    void *p = cpu_elem(t, i0, i1, i2, i3);
    if (t->type == GGML_TYPE_F16) {
        const fp16_t h = fp32_to_fp16(v);
        memcpy(p, &h, sizeof h);
    } else {
        memcpy(p, &v, sizeof v);
    }
}

/* Rows of packed F32 with b's row as long as a's: the same operations, in a loop the compiler vectorizes. */
static void cpu_binary_row_f32(enum tensor_op op, const float *x, const float *y, float *z, int64_t n) {
    switch (op) {
        case OP_ADD: for (int64_t i = 0; i < n; i++) z[i] = x[i] + y[i]; break;
        case OP_SUB: for (int64_t i = 0; i < n; i++) z[i] = x[i] - y[i]; break;
        case OP_MUL: for (int64_t i = 0; i < n; i++) z[i] = x[i] * y[i]; break;
        default: for (int64_t i = 0; i < n; i++) z[i] = x[i] / y[i]; break;
    }
}

static void cpu_binary(const struct cpu_task *task, struct tensor *dst) {
    const struct tensor *a = dst->src[0], *b = dst->src[1];
    const bool packed = dst->type == GGML_TYPE_F32 && a->type == GGML_TYPE_F32 && b->type == GGML_TYPE_F32 &&
                        dst->nb[0] == sizeof(float) && a->nb[0] == sizeof(float) && b->nb[0] == sizeof(float) &&
                        b->ne[0] == dst->ne[0];
    if (packed && tensor_nrows(dst) == 1) {
        int64_t e0, e1;
        cpu_task_elems(task, dst->ne[0], &e0, &e1);
        if (e0 < e1) cpu_binary_row_f32(dst->op, (const float *)a->data + e0, (const float *)b->data + e0,
                                        (float *)dst->data + e0, e1 - e0);
        return;
    }
    int64_t r0, r1;
    cpu_task_rows(task, tensor_nrows(dst), &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        int64_t i1, i2, i3;
        cpu_row_index(dst, r, &i1, &i2, &i3);
        const int64_t j1 = i1 % b->ne[1], j2 = i2 % b->ne[2], j3 = i3 % b->ne[3];
        if (packed) {
            cpu_binary_row_f32(dst->op, cpu_elem(a, 0, i1, i2, i3), cpu_elem(b, 0, j1, j2, j3),
                               cpu_elem(dst, 0, i1, i2, i3), dst->ne[0]);
            continue;
        }
        for (int64_t i0 = 0; i0 < dst->ne[0]; i0++) {
            const float x = cpu_ld_any(a, i0, i1, i2, i3);
            const float y = cpu_ld_any(b, i0 % b->ne[0], j1, j2, j3);
            float z;
            switch (dst->op) {
                case OP_ADD: z = x + y; break;
                case OP_SUB: z = x - y; break;
                case OP_MUL: z = x * y; break;
                default: z = x / y; break;
            }
            cpu_st_any(dst, i0, i1, i2, i3, z);
        }
    }
}

/* add also takes F16 + F16/F32 -> F16 (rounded once, as b1892's add_f16_*) */
static bool cpu_add_supported(const struct tensor *dst) {
    if (cpu_all_f32(dst, 2)) return true;
    const struct tensor *a = dst->src[0], *b = dst->src[1];
    return a->type == GGML_TYPE_F16 && dst->type == GGML_TYPE_F16 &&
           (b->type == GGML_TYPE_F16 || b->type == GGML_TYPE_F32);
}

const struct cpu_op_desc cpu_desc_add = { .kernel = cpu_binary, .supported = cpu_add_supported };
const struct cpu_op_desc cpu_desc_sub = { .kernel = cpu_binary, .supported = cpu_supported_f32_binary };
const struct cpu_op_desc cpu_desc_mul = { .kernel = cpu_binary, .supported = cpu_supported_f32_binary };
const struct cpu_op_desc cpu_desc_div = { .kernel = cpu_binary, .supported = cpu_supported_f32_binary };

static void cpu_add1(const struct cpu_task *task, struct tensor *dst) {
    const struct tensor *a = dst->src[0];
    float v;
    memcpy(&v, dst->src[1]->data, sizeof v);
    int64_t r0, r1;
    cpu_task_rows(task, tensor_nrows(dst), &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        int64_t i1, i2, i3;
        cpu_row_index(dst, r, &i1, &i2, &i3);
        for (int64_t i0 = 0; i0 < dst->ne[0]; i0++) cpu_st_f32(dst, i0, i1, i2, i3, cpu_ld_f32(a, i0, i1, i2, i3) + v);
    }
}

const struct cpu_op_desc cpu_desc_add1 = { .kernel = cpu_add1, .supported = cpu_supported_f32_binary };

/* ---- acc / set: b written into a view of (a copy of) a ----------------------------- */

static void cpu_view_write(const struct cpu_task *task, struct tensor *dst) {
    const struct tensor *a = dst->src[0], *b = dst->src[1];
    if (task->phase == CPU_PHASE_INIT) {
        /* copy a first (both contiguous), unless computing in place */
        if (dst->data == a->data) return;
        const size_t n = tensor_nbytes(dst);
        const size_t chunk = (n + (size_t)task->nth - 1) / (size_t)task->nth;
        const size_t off = chunk * (size_t)task->ith;
        if (off < n) memcpy((char *)dst->data + off, (const char *)a->data + off, off + chunk > n ? n - off : chunk);
        return;
    }
    const size_t nb1 = (size_t)dst->op_params[0], nb2 = (size_t)dst->op_params[1];
    const size_t nb3 = (size_t)dst->op_params[2], offset = (size_t)dst->op_params[3];
    int64_t r0, r1;
    cpu_task_rows(task, tensor_nrows(b), &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        int64_t i1, i2, i3;
        cpu_row_index(b, r, &i1, &i2, &i3);
        const size_t row = offset + (size_t)i1 * nb1 + (size_t)i2 * nb2 + (size_t)i3 * nb3;
        float *d = (float *)((char *)dst->data + row);
        const float *s = (const float *)((const char *)a->data + row);
        for (int64_t i0 = 0; i0 < b->ne[0]; i0++) {
            const float y = cpu_ld_f32(b, i0, i1, i2, i3);
            d[i0] = dst->op == OP_ACC ? s[i0] + y : y;
        }
    }
}

const struct cpu_op_desc cpu_desc_acc = { .kernel = cpu_view_write, .has_init = true, .supported = cpu_supported_f32_binary };
const struct cpu_op_desc cpu_desc_set = { .kernel = cpu_view_write, .has_init = true, .supported = cpu_supported_f32_binary };

/* ---- unary element-wise ------------------------------------------------------------ */

static float cpu_unary_value(const struct tensor *dst, float x) {
    switch (dst->op) {
        case OP_SQR: return x * x;
        case OP_SQRT: return sqrtf(x);
        case OP_LOG: return logf(x);
        case OP_SCALE: return x * tensor_op_param_f32(dst, 0);
        case OP_CLAMP: {
            const float lo = tensor_op_param_f32(dst, 0), hi = tensor_op_param_f32(dst, 1);
            const float m = x < hi ? x : hi; /* MAX(MIN(x, max), min) as b1892 */
            return m > lo ? m : lo;
        }
        default: break;
    }
    switch ((enum tensor_unary_op)dst->op_params[0]) {
        case UNARY_ABS: return fabsf(x);
        case UNARY_SGN: return x > 0.0f ? 1.0f : (x < 0.0f ? -1.0f : 0.0f);
        case UNARY_NEG: return -x;
        case UNARY_STEP: return x > 0.0f ? 1.0f : 0.0f;
        case UNARY_TANH: return tanhf(x);
        case UNARY_ELU: return x > 0.0f ? x : expf(x) - 1.0f;
        case UNARY_RELU: return x > 0.0f ? x : 0.0f;
        /* b1892 quirk: gelu, gelu_quick and silu are F16 table lookups (see cpu_convert.c) */
        case UNARY_GELU: return cpu_table_gelu(x);
        case UNARY_GELU_QUICK: return cpu_table_gelu_quick(x);
        case UNARY_SILU: return cpu_table_silu(x);
        default: return x;
    }
}

/* The F16 table behind a table-lookup unary op, or -1. */
static int cpu_unary_table(const struct tensor *dst) {
    if (dst->op != OP_UNARY) return -1;
    switch ((enum tensor_unary_op)dst->op_params[0]) {
        case UNARY_GELU: return CPU_TABLE_GELU;
        case UNARY_GELU_QUICK: return CPU_TABLE_GELU_QUICK;
        case UNARY_SILU: return CPU_TABLE_SILU;
        default: return -1;
    }
}

static void cpu_unary(const struct cpu_task *task, struct tensor *dst) {
    const struct tensor *a = dst->src[0];
    const int table = cpu_unary_table(dst);
    const bool rows = table >= 0 && a->nb[0] == sizeof(float) && dst->nb[0] == sizeof(float);
    if (rows && tensor_nrows(dst) == 1) {
        int64_t e0, e1;
        cpu_task_elems(task, dst->ne[0], &e0, &e1);
        if (e0 < e1) cpu_vec_table_f16(cpu_table_data((enum cpu_table_id)table), (const float *)a->data + e0,
                                       (float *)dst->data + e0, e1 - e0);
        return;
    }
    int64_t r0, r1;
    cpu_task_rows(task, tensor_nrows(dst), &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        int64_t i1, i2, i3;
        cpu_row_index(dst, r, &i1, &i2, &i3);
        if (rows) {
            cpu_vec_table_f16(cpu_table_data((enum cpu_table_id)table), cpu_elem(a, 0, i1, i2, i3),
                              cpu_elem(dst, 0, i1, i2, i3), dst->ne[0]);
            continue;
        }
        for (int64_t i0 = 0; i0 < dst->ne[0]; i0++) {
            cpu_st_f32(dst, i0, i1, i2, i3, cpu_unary_value(dst, cpu_ld_f32(a, i0, i1, i2, i3)));
        }
    }
}

static bool cpu_unary_supported(const struct tensor *dst) {
    return cpu_all_f32(dst, 1) && dst->op_params[0] >= 0 && dst->op_params[0] < UNARY_COUNT;
}

const struct cpu_op_desc cpu_desc_sqr = { .kernel = cpu_unary, .supported = cpu_supported_f32_unary };
const struct cpu_op_desc cpu_desc_sqrt = { .kernel = cpu_unary, .supported = cpu_supported_f32_unary };
const struct cpu_op_desc cpu_desc_log = { .kernel = cpu_unary, .supported = cpu_supported_f32_unary };
const struct cpu_op_desc cpu_desc_scale = { .kernel = cpu_unary, .supported = cpu_supported_f32_unary };
const struct cpu_op_desc cpu_desc_clamp = { .kernel = cpu_unary, .supported = cpu_supported_f32_unary };
const struct cpu_op_desc cpu_desc_unary = { .kernel = cpu_unary, .supported = cpu_unary_supported };

/* silu'(x) * grad, at x rounded to F16 (b1892: the forward used F16 x) */
static void cpu_silu_back(const struct cpu_task *task, struct tensor *dst) {
    const struct tensor *x = dst->src[0], *g = dst->src[1];
    int64_t r0, r1;
    cpu_task_rows(task, tensor_nrows(dst), &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        int64_t i1, i2, i3;
        cpu_row_index(dst, r, &i1, &i2, &i3);
        for (int64_t i0 = 0; i0 < dst->ne[0]; i0++) {
            const float xv = fp16_round(cpu_ld_f32(x, i0, i1, i2, i3));
            const float dy = cpu_ld_f32(g, i0, i1, i2, i3);
            const float s = 1.0f / (1.0f + expf(-xv));
            cpu_st_f32(dst, i0, i1, i2, i3, dy * s * (1.0f + xv * (1.0f - s)));
        }
    }
}

const struct cpu_op_desc cpu_desc_silu_back = { .kernel = cpu_silu_back, .supported = cpu_supported_f32_binary };

/* ---- reductions (sums in double, as b1892's ggml_float) ---------------------------- */

static double cpu_row_sum(const struct tensor *a, int64_t i1, int64_t i2, int64_t i3) {
    double sum = 0.0;
    for (int64_t i0 = 0; i0 < a->ne[0]; i0++) sum += (double)cpu_ld_f32(a, i0, i1, i2, i3);
    return sum;
}

static void cpu_sum(const struct cpu_task *task, struct tensor *dst) {
    if (task->ith != 0) return;
    const struct tensor *a = dst->src[0];
    double sum = 0.0;
    for (int64_t r = 0; r < tensor_nrows(a); r++) {
        int64_t i1, i2, i3;
        cpu_row_index(a, r, &i1, &i2, &i3);
        sum += cpu_row_sum(a, i1, i2, i3);
    }
    cpu_st_f32(dst, 0, 0, 0, 0, (float)sum);
}

static void cpu_sum_rows(const struct cpu_task *task, struct tensor *dst) {
    const struct tensor *a = dst->src[0];
    int64_t r0, r1;
    cpu_task_rows(task, tensor_nrows(a), &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        int64_t i1, i2, i3;
        cpu_row_index(a, r, &i1, &i2, &i3);
        float v = (float)cpu_row_sum(a, i1, i2, i3);
        if (dst->op == OP_MEAN) v /= (float)a->ne[0];
        cpu_st_f32(dst, 0, i1, i2, i3, v);
    }
}

const struct cpu_op_desc cpu_desc_sum = { .kernel = cpu_sum, .supported = cpu_supported_f32_unary };
const struct cpu_op_desc cpu_desc_sum_rows = { .kernel = cpu_sum_rows, .supported = cpu_supported_f32_unary };
const struct cpu_op_desc cpu_desc_mean = { .kernel = cpu_sum_rows, .supported = cpu_supported_f32_unary };

/* ---- tiling ------------------------------------------------------------------------- */

static void cpu_repeat(const struct cpu_task *task, struct tensor *dst) {
    const struct tensor *a = dst->src[0];
    const size_t esize = tensor_element_size(dst);
    int64_t r0, r1;
    cpu_task_rows(task, tensor_nrows(dst), &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        int64_t i1, i2, i3;
        cpu_row_index(dst, r, &i1, &i2, &i3);
        for (int64_t i0 = 0; i0 < dst->ne[0]; i0++) {
            memcpy(cpu_elem(dst, i0, i1, i2, i3),
                   cpu_elem(a, i0 % a->ne[0], i1 % a->ne[1], i2 % a->ne[2], i3 % a->ne[3]), esize);
        }
    }
}

static bool cpu_repeat_supported(const struct tensor *dst) {
    return dst->type == dst->src[0]->type && !cpu_is_quantized(dst->type);
}

const struct cpu_op_desc cpu_desc_repeat = { .kernel = cpu_repeat, .supported = cpu_repeat_supported };

/* Sums the tiles of a into dst; each dst row adds its tiles in b1892's loop order. */
static void cpu_repeat_back(const struct cpu_task *task, struct tensor *dst) {
    const struct tensor *a = dst->src[0];
    const int64_t nr0 = a->ne[0] / dst->ne[0], nr1 = a->ne[1] / dst->ne[1];
    const int64_t nr2 = a->ne[2] / dst->ne[2], nr3 = a->ne[3] / dst->ne[3];
    int64_t r0, r1;
    cpu_task_rows(task, tensor_nrows(dst), &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        int64_t k1, k2, k3;
        cpu_row_index(dst, r, &k1, &k2, &k3);
        for (int64_t k0 = 0; k0 < dst->ne[0]; k0++) cpu_st_f32(dst, k0, k1, k2, k3, 0.0f);
        for (int64_t i3 = 0; i3 < nr3; i3++)
            for (int64_t i2 = 0; i2 < nr2; i2++)
                for (int64_t i1 = 0; i1 < nr1; i1++)
                    for (int64_t i0 = 0; i0 < nr0; i0++)
                        for (int64_t k0 = 0; k0 < dst->ne[0]; k0++) {
                            const float v = cpu_ld_f32(a, i0 * dst->ne[0] + k0, i1 * dst->ne[1] + k1,
                                                       i2 * dst->ne[2] + k2, i3 * dst->ne[3] + k3);
                            cpu_st_f32(dst, k0, k1, k2, k3, cpu_ld_f32(dst, k0, k1, k2, k3) + v);
                        }
    }
}

const struct cpu_op_desc cpu_desc_repeat_back = { .kernel = cpu_repeat_back, .supported = cpu_supported_f32_unary };

static void cpu_concat(const struct cpu_task *task, struct tensor *dst) {
    const struct tensor *a = dst->src[0], *b = dst->src[1];
    int64_t r0, r1;
    cpu_task_rows(task, tensor_nrows(dst), &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        int64_t i1, i2, i3;
        cpu_row_index(dst, r, &i1, &i2, &i3);
        for (int64_t i0 = 0; i0 < dst->ne[0]; i0++) {
            const void *s = i2 < a->ne[2] ? cpu_elem(a, i0, i1, i2, i3) : cpu_elem(b, i0, i1, i2 - a->ne[2], i3);
            memcpy(cpu_elem(dst, i0, i1, i2, i3), s, 4);
        }
    }
}

static bool cpu_concat_supported(const struct tensor *dst) {
    const struct tensor *a = dst->src[0], *b = dst->src[1];
    return (a->type == GGML_TYPE_F32 || a->type == GGML_TYPE_I32) && b->type == a->type && dst->type == a->type;
}

const struct cpu_op_desc cpu_desc_concat = { .kernel = cpu_concat, .supported = cpu_concat_supported };

static void cpu_pad(const struct cpu_task *task, struct tensor *dst) {
    const struct tensor *a = dst->src[0];
    int64_t r0, r1;
    cpu_task_rows(task, tensor_nrows(dst), &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        int64_t i1, i2, i3;
        cpu_row_index(dst, r, &i1, &i2, &i3);
        const bool row_inside = i1 < a->ne[1] && i2 < a->ne[2] && i3 < a->ne[3];
        for (int64_t i0 = 0; i0 < dst->ne[0]; i0++) {
            const float v = row_inside && i0 < a->ne[0] ? cpu_ld_f32(a, i0, i1, i2, i3) : 0.0f;
            cpu_st_f32(dst, i0, i1, i2, i3, v);
        }
    }
}

const struct cpu_op_desc cpu_desc_pad = { .kernel = cpu_pad, .supported = cpu_supported_f32_unary };

/* ---- rows ---------------------------------------------------------------------------- */

static void cpu_get_rows(const struct cpu_task *task, struct tensor *dst) {
    const struct tensor *a = dst->src[0], *idx = dst->src[1];
    int64_t r0, r1;
    cpu_task_rows(task, tensor_nelements(idx), &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        const int64_t i10 = r % idx->ne[0];
        int64_t i11, i12, unused;
        cpu_row_index(idx, r / idx->ne[0], &i11, &i12, &unused);
        int32_t row;
        memcpy(&row, cpu_elem(idx, i10, i11, i12, 0), sizeof row);
        if (row < 0 || row >= a->ne[1]) {
            cpu_kernel_fail(task, CPU_ERR_ROW_INDEX);
            continue;
        }
        const char *srow = cpu_elem(a, 0, row, i11, i12);
        char *drow = cpu_elem(dst, 0, i10, i11, i12);
        if (a->type == GGML_TYPE_I32) {
            for (int64_t i0 = 0; i0 < a->ne[0]; i0++) memcpy(drow + i0 * dst->nb[0], srow + i0 * a->nb[0], 4);
        } else if (dst->nb[0] == sizeof(float)) {
            /* F16 and quantized rows are dequantized (b1892) */
            cpu_row_to_float(a->type, srow, a->nb[0], (float *)drow, a->ne[0]);
        }
    }
}

static bool cpu_get_rows_supported(const struct tensor *dst) {
    const struct tensor *a = dst->src[0];
    const struct type_traits *tt = type_traits_get(a->type);
    if (a->type == GGML_TYPE_I32) return dst->type == GGML_TYPE_I32;
    if (tt->is_quantized && a->nb[0] != tt->type_size) return false;
    return dst->type == GGML_TYPE_F32 && dst->nb[0] == sizeof(float) && cpu_type_to_float_ok(a->type);
}

const struct cpu_op_desc cpu_desc_get_rows = { .kernel = cpu_get_rows, .supported = cpu_get_rows_supported };

/* dst[rows[i]] += grad[i], each dst row summing its gradients in index order */
static void cpu_get_rows_back(const struct cpu_task *task, struct tensor *dst) {
    const struct tensor *g = dst->src[0], *idx = dst->src[1];
    int64_t r0, r1;
    cpu_task_rows(task, dst->ne[1], &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        for (int64_t i0 = 0; i0 < dst->ne[0]; i0++) cpu_st_f32(dst, i0, r, 0, 0, 0.0f);
    }
    for (int64_t i = 0; i < idx->ne[0]; i++) {
        int32_t row;
        memcpy(&row, cpu_elem(idx, i, 0, 0, 0), sizeof row);
        if (row < 0 || row >= dst->ne[1]) {
            cpu_kernel_fail(task, CPU_ERR_ROW_INDEX);
            continue;
        }
        if (row < r0 || row >= r1) continue;
        for (int64_t i0 = 0; i0 < dst->ne[0]; i0++) {
            cpu_st_f32(dst, i0, row, 0, 0, cpu_ld_f32(dst, i0, row, 0, 0) + cpu_ld_any(g, i0, i, 0, 0));
        }
    }
}

static bool cpu_get_rows_back_supported(const struct tensor *dst) {
    const enum ggml_type t = dst->src[0]->type;
    return dst->type == GGML_TYPE_F32 && (t == GGML_TYPE_F32 || t == GGML_TYPE_F16);
}

const struct cpu_op_desc cpu_desc_get_rows_back = { .kernel = cpu_get_rows_back, .supported = cpu_get_rows_back_supported };

static void cpu_diag(const struct cpu_task *task, struct tensor *dst) {
    const struct tensor *a = dst->src[0];
    int64_t r0, r1;
    cpu_task_rows(task, tensor_nrows(dst), &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        int64_t i1, i2, i3;
        cpu_row_index(dst, r, &i1, &i2, &i3);
        for (int64_t i0 = 0; i0 < dst->ne[0]; i0++) {
            cpu_st_f32(dst, i0, i1, i2, i3, i0 == i1 ? cpu_ld_f32(a, i1, 0, i2, i3) : 0.0f);
        }
    }
}

const struct cpu_op_desc cpu_desc_diag = { .kernel = cpu_diag, .supported = cpu_supported_f32_unary };

/* entries (i0, i1) with i0 > n_past + i1 become -inf (or 0) */
static void cpu_diag_mask(const struct cpu_task *task, struct tensor *dst) {
    const struct tensor *a = dst->src[0];
    const int64_t n_past = dst->op_params[0];
    const float value = dst->op == OP_DIAG_MASK_INF ? -INFINITY : 0.0f;
    int64_t r0, r1;
    cpu_task_rows(task, tensor_nrows(dst), &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        int64_t i1, i2, i3;
        cpu_row_index(dst, r, &i1, &i2, &i3);
        for (int64_t i0 = 0; i0 < dst->ne[0]; i0++) {
            cpu_st_f32(dst, i0, i1, i2, i3, i0 > n_past + i1 ? value : cpu_ld_f32(a, i0, i1, i2, i3));
        }
    }
}

const struct cpu_op_desc cpu_desc_diag_mask = { .kernel = cpu_diag_mask, .supported = cpu_supported_f32_unary };

/* ---- argsort ---------------------------------------------------------------------------
 * b1892 sorts each row with a quadratic exchange sort (for j, for k > j: swap
 * when out of order). We use the same algorithm so that ties come out in the
 * same order (it decides which experts a MoE router picks on ties). */
static void cpu_argsort(const struct cpu_task *task, struct tensor *dst) {
    const struct tensor *a = dst->src[0];
    const bool desc = dst->op_params[0] == SORT_DESC;
    const int64_t n = a->ne[0];
    int64_t r0, r1;
    cpu_task_rows(task, tensor_nrows(a), &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        int64_t i1, i2, i3;
        cpu_row_index(a, r, &i1, &i2, &i3);
        int32_t *idx = cpu_elem(dst, 0, i1, i2, i3); /* dst is contiguous (created by op_argsort) */
        for (int64_t j = 0; j < n; j++) idx[j] = (int32_t)j;
        for (int64_t j = 0; j < n; j++) {
            for (int64_t k = j + 1; k < n; k++) {
                const float vj = cpu_ld_f32(a, idx[j], i1, i2, i3), vk = cpu_ld_f32(a, idx[k], i1, i2, i3);
                if (desc ? vj < vk : vj > vk) {
                    const int32_t t = idx[j];
                    idx[j] = idx[k];
                    idx[k] = t;
                }
            }
        }
    }
}

static bool cpu_argsort_supported(const struct tensor *dst) {
    return dst->src[0]->type == GGML_TYPE_F32 && dst->type == GGML_TYPE_I32 && dst->nb[0] == sizeof(int32_t);
}

const struct cpu_op_desc cpu_desc_argsort = { .kernel = cpu_argsort, .supported = cpu_argsort_supported };

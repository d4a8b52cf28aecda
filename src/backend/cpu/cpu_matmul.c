/*
 * Matrix products: mul_mat, mul_mat_id (mixture of experts), out_prod.
 * Products of packed (or F16) weights go to cpu_packed.h: mul_mat's and
 * mul_mat_id's (F16 experts: one column only).
 *
 * As b1892 (ggml_compute_forward_mul_mat): src1 (the activations) is first
 * converted to the weight type's vec_dot type — F32 weights keep F32, F16
 * weights round the activations to F16, Q4_0/Q5_x/Q8_0 quantize them to Q8_0
 * (Q4_1/Q5_1 to Q8_1), the k-quants and IQ2 to Q8_K — and then every output
 * value is one vec_dot(weight row, converted column). Those roundings are
 * what the golden logits carry. The dot products come from the trait table,
 * which adds in b1892's x86 order (see quant_float.c), so the logits match
 * the reference bit for bit.
 *
 * Exceptions, for training: a mul_mat marked MUL_MAT_ORDER_ANY (F32 x F32, at
 * least 32 x 32 x 32) and out_prod run on the tiled SIMD kernels of
 * cpu_gemm.h when the CPU has them: float chains of fused multiply-adds,
 * within float rounding of the reference order.
 */
#include <string.h>

#include "backend/cpu/cpu_gemm.h"
#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/cpu_packed.h"
#include "quant/quant.h"

typedef void (*cpu_vec_dot_fn)(int64_t n, float *s, const void *x, const void *y);

struct cpu_dot_kind {
    cpu_vec_dot_fn vec_dot;
    enum ggml_type vec_dot_type;
};

/* The weight type's dot product from the trait table (b1892's arithmetic); vec_dot
 * is NULL when the type has none (integer types, Q8_K). */
static struct cpu_dot_kind cpu_dot_kind_get(enum ggml_type type) {
    const struct type_traits *tt = type_traits_get(type);
    if (!tt || !tt->vec_dot || !type_traits_get(tt->vec_dot_type)) {
        return (struct cpu_dot_kind){ NULL, GGML_TYPE_F32 };
    }
    return (struct cpu_dot_kind){ tt->vec_dot, tt->vec_dot_type };
}

static bool cpu_mul_mat_check(const struct tensor *w, const struct tensor *x, const struct tensor *dst) {
    const struct cpu_dot_kind k = cpu_dot_kind_get(w->type);
    if (!k.vec_dot) return false;
    const struct type_traits *wt = type_traits_get(w->type), *xt = type_traits_get(x->type);
    if (w->nb[0] != wt->type_size || x->nb[0] != xt->type_size) return false;
    if (dst->type != GGML_TYPE_F32 || dst->nb[0] != sizeof(float)) return false;
    if (x->type == k.vec_dot_type) return true;
    if (x->ne[0] % type_traits_get(k.vec_dot_type)->blck_size != 0) return false;
    return cpu_type_to_float_ok(x->type) && cpu_type_from_float_ok(k.vec_dot_type);
}

/* ---- src1 conversion (INIT phase), shared by mul_mat and mul_mat_id ---------------- */

static size_t cpu_conv_row_size(const struct tensor *w, const struct tensor *x) {
    const struct cpu_dot_kind k = cpu_dot_kind_get(w->type);
    size_t size = 0;
    type_row_size(k.vec_dot_type, x->ne[0], &size);
    return size;
}

/* Bytes for the converted src1 plus per-thread float rows (0 when no conversion). */
static size_t cpu_conv_work(const struct tensor *w, const struct tensor *x, int n_threads) {
    const struct cpu_dot_kind k = cpu_dot_kind_get(w->type);
    if (!k.vec_dot || x->type == k.vec_dot_type) return 0;
    return cpu_scratch_stride(cpu_conv_row_size(w, x) * (size_t)tensor_nrows(x)) +
           (size_t)n_threads * cpu_scratch_stride((size_t)x->ne[0] * sizeof(float));
}

static void cpu_conv_src1(const struct cpu_task *task, const struct tensor *w, const struct tensor *x) {
    const struct cpu_dot_kind k = cpu_dot_kind_get(w->type);
    if (x->type == k.vec_dot_type) return;
    const size_t row_size = cpu_conv_row_size(w, x);
    float *tmp = cpu_task_scratch(task, cpu_scratch_stride(row_size * (size_t)tensor_nrows(x)),
                                  (size_t)x->ne[0] * sizeof(float));
    int64_t r0, r1;
    cpu_task_rows(task, tensor_nrows(x), &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        int64_t i1, i2, i3;
        cpu_row_index(x, r, &i1, &i2, &i3);
        const void *src = cpu_elem(x, 0, i1, i2, i3);
        char *out = task->wdata + (size_t)r * row_size;
        if (x->type == GGML_TYPE_F32) {
            cpu_row_from_float(k.vec_dot_type, src, out, x->ne[0]);
        } else {
            cpu_row_to_float(x->type, src, x->nb[0], tmp, x->ne[0]);
            cpu_row_from_float(k.vec_dot_type, tmp, out, x->ne[0]);
        }
    }
}

/* Column (i11, i12, i13) of src1 as the dot product's second operand. */
static const void *cpu_src1_col(const struct cpu_task *task, const struct tensor *w, const struct tensor *x,
                                int64_t i11, int64_t i12, int64_t i13) {
    const struct cpu_dot_kind k = cpu_dot_kind_get(w->type);
    if (x->type == k.vec_dot_type) return cpu_elem(x, 0, i11, i12, i13);
    const int64_t r = i11 + x->ne[1] * (i12 + x->ne[2] * i13);
    return task->wdata + (size_t)r * cpu_conv_row_size(w, x);
}

/* ---- mul_mat --------------------------------------------------------------------------- */

/* The output grid of a product of weights w (rows of w->ne[0]) and the columns of x. */
static struct cpu_chunks cpu_mul_mat_chunks(const struct cpu_task *task, const struct tensor *w,
                                            const struct tensor *x, int64_t n_cols) {
    const struct cpu_dot_kind k = cpu_dot_kind_get(w->type);
    size_t row_bytes = 0, col_bytes = 0;
    type_row_size(w->type, w->ne[0], &row_bytes);
    type_row_size(k.vec_dot_type, x->ne[0], &col_bytes);
    return cpu_chunks_plan(w->ne[1], row_bytes, CPU_CHUNK_ROW_ALIGN, n_cols, col_bytes, task->nth);
}

/* F32 x F32 products marked MUL_MAT_ORDER_ANY and large enough to pay for
 * transposing the weight run on the tiled kernels of cpu_gemm.h: the
 * weight's slices are packed as panels W^T [k][n] in the work memory (INIT),
 * then C = W^T-panel x X column by column. */
static bool cpu_mul_mat_tiled(const struct tensor *dst) {
    const struct tensor *w = dst->src[0], *x = dst->src[1];
    return dst->op_params[0] == MUL_MAT_ORDER_ANY && w->type == GGML_TYPE_F32 && x->type == GGML_TYPE_F32 &&
           w->ne[0] >= 32 && w->ne[1] >= 32 && x->ne[1] >= 32 && cpu_gemm_f32_available();
}

static void cpu_mul_mat_pack(const struct cpu_task *task, const struct tensor *w) {
    const int64_t K = w->ne[0], N = w->ne[1];
    int64_t r0, r1;
    cpu_task_rows(task, tensor_nrows(w), &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        int64_t i, i2, i3;
        cpu_row_index(w, r, &i, &i2, &i3);
        const float *row = cpu_elem(w, 0, i, i2, i3);
        float *panel = (float *)task->wdata + (i2 + w->ne[2] * i3) * K * N;
        for (int64_t k = 0; k < K; k++) panel[k * N + i] = row[k];
    }
}

/* Points g at slice (i2, i3) of dst's operands. */
typedef void (*cpu_gemm_slice_fn)(const struct cpu_task *task, const struct tensor *dst, int64_t i2, int64_t i3,
                                  struct cpu_gemm_f32 *g);

/* This thread's share of g's tiles over every slice of dst (the tiles of
 * all slices split evenly between the threads). */
static void cpu_gemm_f32_slices(const struct cpu_task *task, const struct tensor *dst, struct cpu_gemm_f32 *g,
                                cpu_gemm_slice_fn point) {
    const int64_t per_slice = cpu_gemm_f32_n_tiles(g);
    int64_t t0, t1;
    cpu_task_rows(task, per_slice * dst->ne[2] * dst->ne[3], &t0, &t1);
    for (int64_t t = t0; t < t1;) {
        const int64_t slice = t / per_slice;
        const int64_t end = (slice + 1) * per_slice < t1 ? (slice + 1) * per_slice : t1;
        point(task, dst, slice % dst->ne[2], slice / dst->ne[2], g);
        cpu_gemm_f32_run(g, t - slice * per_slice, end - slice * per_slice);
        t = end;
    }
}

static void cpu_mul_mat_slice(const struct cpu_task *task, const struct tensor *dst, int64_t i12, int64_t i13,
                              struct cpu_gemm_f32 *g) {
    const struct tensor *w = dst->src[0], *x = dst->src[1];
    const int64_t r2 = x->ne[2] / w->ne[2], r3 = x->ne[3] / w->ne[3];
    g->a = task->wdata + (size_t)((i12 / r2 + w->ne[2] * (i13 / r3)) * w->ne[0] * w->ne[1]) * sizeof(float);
    g->b = cpu_elem(x, 0, 0, i12, i13);
    g->c = cpu_elem(dst, 0, 0, i12, i13);
}

static void cpu_mul_mat_tiles(const struct cpu_task *task, struct tensor *dst) {
    const struct tensor *w = dst->src[0], *x = dst->src[1];
    struct cpu_gemm_f32 g = {
        .n0 = w->ne[1], .n1 = x->ne[1], .nj = w->ne[0], .a_sj = (size_t)w->ne[1] * sizeof(float), .b_s1 = x->nb[1],
        .b_sj = x->nb[0], .c_s1 = dst->nb[1],
    };
    cpu_gemm_f32_slices(task, dst, &g, cpu_mul_mat_slice);
}

static void cpu_mul_mat(const struct cpu_task *task, struct tensor *dst) {
    const struct tensor *w = dst->src[0], *x = dst->src[1];
    if (cpu_fast_mul_mat_applies(dst)) {
        cpu_fast_mul_mat(task, dst);
        return;
    }
    const bool tiled = cpu_mul_mat_tiled(dst);
    if (task->phase == CPU_PHASE_INIT) {
        if (tiled) {
            cpu_mul_mat_pack(task, w);
        } else {
            cpu_conv_src1(task, w, x);
        }
        return;
    }
    if (tiled) {
        cpu_mul_mat_tiles(task, dst);
        return;
    }
    const struct cpu_dot_kind k = cpu_dot_kind_get(w->type);
    const int64_t r2 = x->ne[2] / w->ne[2], r3 = x->ne[3] / w->ne[3];
    const struct cpu_chunks ch = cpu_mul_mat_chunks(task, w, x, x->ne[1] * x->ne[2] * x->ne[3]);
    for (int64_t chunk = cpu_task_next_chunk(task); chunk < cpu_chunks_count(&ch); chunk = cpu_task_next_chunk(task)) {
        int64_t a0, a1, b0, b1;
        cpu_chunks_range(&ch, chunk, &a0, &a1, &b0, &b1);
        for (int64_t c = b0; c < b1; c++) {
            int64_t i11, i12, i13;
            cpu_row_index(x, c, &i11, &i12, &i13);
            /* the weight broadcasts over dims 2 and 3: x slice i12 uses w slice i12 / r2 (GQA) */
            const char *wmat = cpu_elem(w, 0, 0, i12 / r2, i13 / r3);
            const void *col = cpu_src1_col(task, w, x, i11, i12, i13);
            float *out = cpu_elem(dst, 0, i11, i12, i13);
            for (int64_t i = a0; i < a1; i++) k.vec_dot(w->ne[0], &out[i], wmat + i * w->nb[1], col);
        }
    }
}

static size_t cpu_mul_mat_work(const struct tensor *dst, int n_threads) {
    const struct tensor *w = dst->src[0], *x = dst->src[1];
    if (cpu_fast_mul_mat_applies(dst)) return cpu_fast_mul_mat_work(dst, n_threads);
    if (cpu_mul_mat_tiled(dst)) return (size_t)tensor_nelements(w) * sizeof(float);
    return cpu_conv_work(w, x, n_threads);
}

static bool cpu_mul_mat_supported(const struct tensor *dst) {
    return cpu_mul_mat_check(dst->src[0], dst->src[1], dst);
}

const struct cpu_op_desc cpu_desc_mul_mat = {
    .kernel = cpu_mul_mat, .has_init = true, .work_size = cpu_mul_mat_work, .supported = cpu_mul_mat_supported,
    .first_bytes = cpu_fast_mul_mat_first_bytes,
};

/* ---- mul_mat_id: dst column c = as[ids[id, c]] x b column c ---------------------------- */

static void cpu_mul_mat_id(const struct cpu_task *task, struct tensor *dst) {
    const struct tensor *ids = dst->src[0], *x = dst->src[1], *w0 = dst->src[2];
    if (cpu_fast_mul_mat_id_applies(dst)) {
        cpu_fast_mul_mat_id(task, dst);
        return;
    }
    if (task->phase == CPU_PHASE_INIT) {
        cpu_conv_src1(task, w0, x);
        return;
    }
    const int id = dst->op_params[0], n_as = dst->op_params[1];
    const struct cpu_dot_kind k = cpu_dot_kind_get(w0->type);
    /* the experts agree in type and shape (op_mul_mat_id checks), so one grid serves them all */
    const struct cpu_chunks ch = cpu_mul_mat_chunks(task, w0, x, x->ne[1] * x->ne[2] * x->ne[3]);
    for (int64_t chunk = cpu_task_next_chunk(task); chunk < cpu_chunks_count(&ch); chunk = cpu_task_next_chunk(task)) {
        int64_t a0, a1, b0, b1;
        cpu_chunks_range(&ch, chunk, &a0, &a1, &b0, &b1);
        for (int64_t c = b0; c < b1; c++) {
            int64_t i11, i12, i13;
            cpu_row_index(x, c, &i11, &i12, &i13);
            int32_t e;
            memcpy(&e, cpu_elem(ids, id, i11, i12, i13), sizeof e);
            if (e < 0 || e >= n_as) {
                cpu_kernel_fail(task, CPU_ERR_EXPERT_INDEX);
                continue;
            }
            const struct tensor *w = dst->src[2 + e];
            const char *wmat = cpu_elem(w, 0, 0, i12 / (x->ne[2] / w->ne[2]), i13 / (x->ne[3] / w->ne[3]));
            const void *col = cpu_src1_col(task, w0, x, i11, i12, i13);
            float *out = cpu_elem(dst, 0, i11, i12, i13);
            for (int64_t i = a0; i < a1; i++) k.vec_dot(w->ne[0], &out[i], wmat + i * w->nb[1], col);
        }
    }
}

static size_t cpu_mul_mat_id_work(const struct tensor *dst, int n_threads) {
    if (cpu_fast_mul_mat_id_applies(dst)) return cpu_fast_mul_mat_id_work(dst, n_threads);
    return cpu_conv_work(dst->src[2], dst->src[1], n_threads);
}

static bool cpu_mul_mat_id_supported(const struct tensor *dst) {
    const int n_as = dst->op_params[1];
    if (dst->src[0]->type != GGML_TYPE_I32) return false;
    for (int e = 0; e < n_as; e++) {
        if (!cpu_mul_mat_check(dst->src[2 + e], dst->src[1], dst)) return false;
    }
    return true;
}

const struct cpu_op_desc cpu_desc_mul_mat_id = {
    .kernel = cpu_mul_mat_id, .has_init = true, .work_size = cpu_mul_mat_id_work, .supported = cpu_mul_mat_id_supported,
};

/* ---- out_prod: dst[i0, i1] = sum_j a[i0, j] * b[i1, j] ------------------------------------
 * The reference adds the products in j order in float; with a's rows packed
 * (nb[0] = 4) the tiled kernels compute the same sums with fused multiply-adds. */

static void cpu_out_prod_slice(const struct cpu_task *task, const struct tensor *dst, int64_t i2, int64_t i3,
                               struct cpu_gemm_f32 *g) {
    (void)task;
    g->a = cpu_elem(dst->src[0], 0, 0, i2, i3);
    g->b = cpu_elem(dst->src[1], 0, 0, i2, i3);
    g->c = cpu_elem(dst, 0, 0, i2, i3);
}

static void cpu_out_prod_tiles(const struct cpu_task *task, struct tensor *dst) {
    const struct tensor *a = dst->src[0], *b = dst->src[1];
    struct cpu_gemm_f32 g = {
        .n0 = dst->ne[0], .n1 = dst->ne[1], .nj = a->ne[1], .a_sj = a->nb[1], .b_s1 = b->nb[0], .b_sj = b->nb[1],
        .c_s1 = dst->nb[1],
    };
    cpu_gemm_f32_slices(task, dst, &g, cpu_out_prod_slice);
}

static void cpu_out_prod(const struct cpu_task *task, struct tensor *dst) {
    const struct tensor *a = dst->src[0], *b = dst->src[1];
    if (a->nb[0] == sizeof(float) && cpu_gemm_f32_available()) {
        cpu_out_prod_tiles(task, dst);
        return;
    }
    int64_t r0, r1;
    cpu_task_rows(task, tensor_nrows(dst), &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        int64_t i1, i2, i3;
        cpu_row_index(dst, r, &i1, &i2, &i3);
        float *out = cpu_elem(dst, 0, i1, i2, i3);
        for (int64_t i0 = 0; i0 < dst->ne[0]; i0++) out[i0] = 0.0f;
        for (int64_t j = 0; j < a->ne[1]; j++) {
            float v;
            memcpy(&v, cpu_elem(b, i1, j, i2, i3), sizeof v);
            for (int64_t i0 = 0; i0 < dst->ne[0]; i0++) {
                float av;
                memcpy(&av, cpu_elem(a, i0, j, i2, i3), sizeof av);
                out[i0] += av * v;
            }
        }
    }
}

static bool cpu_out_prod_supported(const struct tensor *dst) {
    return dst->type == GGML_TYPE_F32 && dst->nb[0] == sizeof(float) && dst->src[0]->type == GGML_TYPE_F32 &&
           dst->src[1]->type == GGML_TYPE_F32;
}

const struct cpu_op_desc cpu_desc_out_prod = { .kernel = cpu_out_prod, .supported = cpu_out_prod_supported };

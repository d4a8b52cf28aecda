/*
 * Scalar reference kernels for the network ops: norms, soft_max, RoPE, ALiBi,
 * cross-entropy. Their arithmetic follows b1892's ggml.c step by step
 * (float vs. double, the order of operations) because these values feed
 * every layer and the golden logits were made with them.
 */
#include <math.h>
#include <string.h>

#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/cpu_vec.h"
#include "core/fp16.h"

static const float CPU_PI = 3.14159265358979323846f;

static bool cpu_nn_f32_unary(const struct tensor *dst) {
    return dst->type == GGML_TYPE_F32 && dst->src[0]->type == GGML_TYPE_F32;
}

static bool cpu_nn_f32_binary(const struct tensor *dst) {
    return cpu_nn_f32_unary(dst) && dst->src[1]->type == GGML_TYPE_F32;
}

/* Row i1, i2, i3 of an F32 tensor copied to buf (rows may be strided). */
static const float *cpu_load_row(const struct tensor *t, int64_t i1, int64_t i2, int64_t i3, float *buf) {
    const char *p = cpu_elem(t, 0, i1, i2, i3);
    if (t->nb[0] == sizeof(float)) return (const float *)p;
    cpu_row_to_float(GGML_TYPE_F32, p, t->nb[0], buf, t->ne[0]);
    return buf;
}

static size_t cpu_row_buf_work(const struct tensor *dst, int n_threads) {
    /* up to three row buffers per thread (inputs with strided rows) */
    return (size_t)n_threads * cpu_scratch_stride(3 * (size_t)dst->ne[0] * sizeof(float));
}

static float *cpu_row_buf(const struct cpu_task *task, const struct tensor *dst, int which) {
    return (float *)cpu_task_scratch(task, 0, 3 * (size_t)dst->ne[0] * sizeof(float)) + which * dst->ne[0];
}

/* ---- norms ------------------------------------------------------------------------- */

/* layer norm: sums in double, mean and variance rounded to float (b1892) */
static void cpu_norm(const struct cpu_task *task, struct tensor *dst) {
    const struct tensor *a = dst->src[0];
    const float eps = tensor_op_param_f32(dst, 0);
    const int64_t n = a->ne[0];
    int64_t r0, r1;
    cpu_task_rows(task, tensor_nrows(a), &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        int64_t i1, i2, i3;
        cpu_row_index(a, r, &i1, &i2, &i3);
        const float *x = cpu_load_row(a, i1, i2, i3, cpu_row_buf(task, dst, 0));
        float *y = cpu_elem(dst, 0, i1, i2, i3);
        double sum = 0.0;
        for (int64_t i = 0; i < n; i++) sum += (double)x[i];
        const float mean = (float)(sum / (double)n);
        double sum2 = 0.0;
        for (int64_t i = 0; i < n; i++) {
            const float v = x[i] - mean;
            y[i] = v;
            sum2 += (double)(v * v);
        }
        const float variance = (float)(sum2 / (double)n);
        const float scale = 1.0f / sqrtf(variance + eps);
        for (int64_t i = 0; i < n; i++) y[i] *= scale;
    }
}

/* b1892: sum of squares of float products accumulated in double, the mean
 * rounded to float, then y = x * (1 / sqrtf(mean + eps)) */
static float cpu_rms_scale(double sum_of_squares, int64_t n, float eps) {
    const float mean = (float)(sum_of_squares / (double)n);
    return 1.0f / sqrtf(mean + eps);
}

/* Rows of contiguous floats CPU_NORM_ROWS at a time: each row's sum is
 * still one chain of dependent double additions in b1892's order, and the
 * rows' chains run side by side (one alone waits an addition's latency per
 * element; 2 threads, pp 512 on a TinyLlama-shaped model: rms_norm 1.6% of
 * the time). */
#define CPU_NORM_ROWS 8
static void cpu_rms_norm_rows(const struct tensor *a, struct tensor *dst, int64_t r, float eps) {
    const int64_t n = a->ne[0];
    const float *x[CPU_NORM_ROWS];
    float *y[CPU_NORM_ROWS];
    double sum[CPU_NORM_ROWS] = { 0 };
    for (int k = 0; k < CPU_NORM_ROWS; k++) {
        int64_t i1, i2, i3;
        cpu_row_index(a, r + k, &i1, &i2, &i3);
        x[k] = cpu_elem(a, 0, i1, i2, i3);
        y[k] = cpu_elem(dst, 0, i1, i2, i3);
    }
    for (int64_t i = 0; i < n; i++) {
        for (int k = 0; k < CPU_NORM_ROWS; k++) sum[k] += (double)(x[k][i] * x[k][i]);
    }
    for (int k = 0; k < CPU_NORM_ROWS; k++) {
        const float scale = cpu_rms_scale(sum[k], n, eps);
        for (int64_t i = 0; i < n; i++) y[k][i] = x[k][i] * scale;
    }
}

static void cpu_rms_norm(const struct cpu_task *task, struct tensor *dst) {
    const struct tensor *a = dst->src[0];
    const float eps = tensor_op_param_f32(dst, 0);
    const int64_t n = a->ne[0];
    int64_t r0, r1;
    cpu_task_rows(task, tensor_nrows(a), &r0, &r1);
    for (int64_t r = r0; r < r1;) {
        if (a->nb[0] == sizeof(float) && r1 - r >= CPU_NORM_ROWS) {
            cpu_rms_norm_rows(a, dst, r, eps);
            r += CPU_NORM_ROWS;
            continue;
        }
        int64_t i1, i2, i3;
        cpu_row_index(a, r, &i1, &i2, &i3);
        const float *x = cpu_load_row(a, i1, i2, i3, cpu_row_buf(task, dst, 0));
        float *y = cpu_elem(dst, 0, i1, i2, i3);
        double sum = 0.0;
        for (int64_t i = 0; i < n; i++) sum += (double)(x[i] * x[i]);
        const float scale = cpu_rms_scale(sum, n, eps);
        for (int64_t i = 0; i < n; i++) y[i] = x[i] * scale;
        r++;
    }
}

/* dx = (dz + x * (-sum(x*dz) / (sum(x*x) + eps*n))) / sqrt(mean(x*x) + eps), as b1892 */
static void cpu_rms_norm_back(const struct cpu_task *task, struct tensor *dst) {
    const struct tensor *a = dst->src[0], *g = dst->src[1];
    const float eps = tensor_op_param_f32(dst, 0);
    const int64_t n = a->ne[0];
    int64_t r0, r1;
    cpu_task_rows(task, tensor_nrows(a), &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        int64_t i1, i2, i3;
        cpu_row_index(a, r, &i1, &i2, &i3);
        const float *x = cpu_load_row(a, i1, i2, i3, cpu_row_buf(task, dst, 0));
        const float *dz = cpu_load_row(g, i1, i2, i3, cpu_row_buf(task, dst, 1));
        float *dx = cpu_elem(dst, 0, i1, i2, i3);
        double sum_xx = 0.0, sum_xdz = 0.0;
        for (int64_t i = 0; i < n; i++) {
            sum_xx += (double)(x[i] * x[i]);
            sum_xdz += (double)(x[i] * dz[i]);
        }
        const float mean_eps = (float)sum_xx / (float)n + eps;
        const float sum_eps = (float)sum_xx + eps * (float)n;
        const float rrms = 1.0f / sqrtf(mean_eps);
        const float k = (float)(-sum_xdz) / sum_eps;
        for (int64_t i = 0; i < n; i++) dx[i] = (x[i] * k + dz[i]) * rrms;
    }
}

const struct cpu_op_desc cpu_desc_norm = { .kernel = cpu_norm, .work_size = cpu_row_buf_work, .supported = cpu_nn_f32_unary };
const struct cpu_op_desc cpu_desc_rms_norm = { .kernel = cpu_rms_norm, .work_size = cpu_row_buf_work, .supported = cpu_nn_f32_unary };
const struct cpu_op_desc cpu_desc_rms_norm_back = {
    .kernel = cpu_rms_norm_back, .work_size = cpu_row_buf_work, .supported = cpu_nn_f32_binary,
};

/* ---- soft_max ------------------------------------------------------------------------
 * b1892 (ggml_compute_forward_soft_max_f32): w = x*scale (+ mask row r % mask.ne1);
 * max; each exp(w - max) is a lookup in the F16 exp table of (w - max) rounded
 * to F16 (-inf gives 0); the sum of those in double; then every value is
 * multiplied by the float of 1/sum. a and dst are contiguous (op_soft_max). */
void cpu_soft_max_row(const float *sp, const float *mp, float scale, float *wp, float *dp, int64_t nc, bool round_f16) {
    cpu_vec_soft_max_row(cpu_table_data(CPU_TABLE_EXP), sp, mp, scale, wp, dp, nc, round_f16);
}

static void cpu_soft_max(const struct cpu_task *task, struct tensor *dst) {
    const struct tensor *a = dst->src[0], *mask = dst->src[1];
    const float scale = tensor_op_param_f32(dst, 0);
    const int64_t nc = a->ne[0];
    float *wp = cpu_row_buf(task, dst, 0);
    int64_t r0, r1;
    cpu_task_rows(task, tensor_nrows(a), &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        const float *sp = (const float *)((const char *)a->data + r * a->nb[1]);
        const float *mp = mask ? (const float *)((const char *)mask->data + (r % mask->ne[1]) * mask->nb[1]) : NULL;
        cpu_soft_max_row(sp, mp, scale, wp, (float *)((char *)dst->data + r * dst->nb[1]), nc, false);
    }
}

static bool cpu_soft_max_supported(const struct tensor *dst) {
    const struct tensor *a = dst->src[0], *mask = dst->src[1];
    return cpu_nn_f32_unary(dst) && tensor_is_contiguous(a) && tensor_is_contiguous(dst) &&
           (!mask || (mask->type == GGML_TYPE_F32 && tensor_is_contiguous(mask)));
}

const struct cpu_op_desc cpu_desc_soft_max = {
    .kernel = cpu_soft_max, .work_size = cpu_row_buf_work, .supported = cpu_soft_max_supported,
};

/* dx = y * (dy - dot(y, dy)) */
static void cpu_soft_max_back(const struct cpu_task *task, struct tensor *dst) {
    const struct tensor *gy = dst->src[0], *y = dst->src[1];
    const int64_t n = dst->ne[0];
    int64_t r0, r1;
    cpu_task_rows(task, tensor_nrows(dst), &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        int64_t i1, i2, i3;
        cpu_row_index(dst, r, &i1, &i2, &i3);
        const float *dy = cpu_load_row(gy, i1, i2, i3, cpu_row_buf(task, dst, 0));
        const float *yv = cpu_load_row(y, i1, i2, i3, cpu_row_buf(task, dst, 1));
        float *dx = cpu_elem(dst, 0, i1, i2, i3);
        double dot = 0.0;
        for (int64_t i = 0; i < n; i++) dot += (double)(yv[i] * dy[i]);
        const float d = (float)dot;
        for (int64_t i = 0; i < n; i++) dx[i] = (dy[i] - d) * yv[i];
    }
}

const struct cpu_op_desc cpu_desc_soft_max_back = {
    .kernel = cpu_soft_max_back, .work_size = cpu_row_buf_work, .supported = cpu_nn_f32_binary,
};

/* ---- RoPE -----------------------------------------------------------------------------
 * b1892's rope_f32/rope_f16 with YaRN: theta starts at the position p and is
 * multiplied by theta_scale = powf(freq_base, -2/n_dims) for each pair, in
 * float; cos/sin of theta (interpolated by freq_scale, blended for YaRN) are
 * scaled by mscale = attn_factor (times 1 + 0.1 ln(1/freq_scale) with YaRN). */

static float rope_yarn_ramp(float low, float high, int i0) {
    const float y = (float)(i0 / 2 - low) / (high - low > 0.001f ? high - low : 0.001f);
    return 1.0f - fminf(1.0f, fmaxf(0.0f, y));
}

static void rope_yarn(float theta_extrap, float freq_scale, const float corr_dims[2], int64_t i0, float ext_factor,
                      float mscale, float *cos_theta, float *sin_theta) {
    const float theta_interp = freq_scale * theta_extrap;
    float theta = theta_interp;
    if (ext_factor != 0.0f) {
        const float ramp_mix = rope_yarn_ramp(corr_dims[0], corr_dims[1], (int)i0) * ext_factor;
        theta = theta_interp * (1 - ramp_mix) + theta_extrap * ramp_mix;
        mscale *= 1.0f + 0.1f * logf(1.0f / freq_scale);
    }
    *cos_theta = cosf(theta) * mscale;
    *sin_theta = sinf(theta) * mscale;
}

static float rope_yarn_corr_dim(int n_dims, int n_orig_ctx, float n_rot, float base) {
    return (float)n_dims * logf((float)n_orig_ctx / (n_rot * 2 * CPU_PI)) / (2 * logf(base));
}

static void rope_yarn_corr_dims(int n_dims, int n_orig_ctx, float freq_base, float beta_fast, float beta_slow,
                                float dims[2]) {
    const float start = floorf(rope_yarn_corr_dim(n_dims, n_orig_ctx, beta_fast, freq_base));
    const float end = ceilf(rope_yarn_corr_dim(n_dims, n_orig_ctx, beta_slow, freq_base));
    dims[0] = fmaxf(0.0f, start);
    dims[1] = fminf((float)(n_dims - 1), end);
}

static float rope_ld(const struct tensor *t, const char *p) {
    if (t->type == GGML_TYPE_F16) {
        fp16_t h;
        memcpy(&h, p, sizeof h);
        return fp16_to_fp32(h);
    }
    float v;
    memcpy(&v, p, sizeof v);
    return v;
}

static void rope_st(const struct tensor *t, char *p, float v) {
    if (t->type == GGML_TYPE_F16) {
        const fp16_t h = fp32_to_fp16(v);
        memcpy(p, &h, sizeof h);
    } else {
        memcpy(p, &v, sizeof v);
    }
}

/* Rotates elements i and i + off of a row by (cos, sin). */
static void rope_rotate(const struct tensor *a, const struct tensor *dst, const char *src, char *out, int64_t i,
                        int64_t off, float cos_t, float sin_t) {
    const float x0 = rope_ld(a, src + i * a->nb[0]);
    const float x1 = rope_ld(a, src + (i + off) * a->nb[0]);
    rope_st(dst, out + i * dst->nb[0], x0 * cos_t - x1 * sin_t);
    rope_st(dst, out + (i + off) * dst->nb[0], x0 * sin_t + x1 * cos_t);
}

/* Normal mode on contiguous F32 rows (LLaMA's): rope_rotate's arithmetic on
 * plain floats, which the compiler vectorizes. Zen 5, TinyLlama shape, 2
 * threads: the rope nodes of a 512-token batch in 0.45 of the cycles, the
 * batch +0.9% (fast Q4_0, in-process A/B against rope_rotate). */
static void rope_rotate_f32(const float *x, float *y, const float *cs, int64_t n) {
    for (int64_t i = 0; i + 1 < n; i += 2) {
        const float x0 = x[i], x1 = x[i + 1], c = cs[i], s = cs[i + 1];
        y[i] = x0 * c - x1 * s;
        y[i + 1] = x0 * s + x1 * c;
    }
}

/* The rotations of a row at position p: cs[i] = cos, cs[i + 1] = sin (with
 * sin_sign) for each pair's first element i; NEOX: for i < n_dims only. */
struct rope_params {
    int n_dims, mode;
    float freq_scale, ext_factor, attn_factor, sin_sign, theta_scale, inv_ndims, corr_dims[2];
};

static void rope_rotations(const struct rope_params *rp, int32_t p, int64_t ne0, float *cs) {
    float theta_base = (float)p;
    if (!(rp->mode & ROPE_MODE_NEOX)) {
        /* pairs (i0, i0+1) over the whole row, as b1892 (not only the first n_dims) */
        for (int64_t i0 = 0; i0 + 1 < ne0; i0 += 2) {
            rope_yarn(theta_base, rp->freq_scale, rp->corr_dims, i0, rp->ext_factor, rp->attn_factor, &cs[i0],
                      &cs[i0 + 1]);
            cs[i0 + 1] *= rp->sin_sign;
            theta_base *= rp->theta_scale;
        }
        return;
    }
    /* b1892 quirks kept: theta is multiplied by freq_scale here and again in
     * rope_yarn, and the YaRN ramp gets the float cur_rot truncated to an
     * integer (always 0). */
    theta_base *= rp->freq_scale;
    for (int64_t ic = 0; ic + 1 < ne0 && ic < rp->n_dims; ic += 2) {
        const float cur_rot = rp->inv_ndims * (float)ic;
        rope_yarn(theta_base, rp->freq_scale, rp->corr_dims, (int64_t)cur_rot, rp->ext_factor, rp->attn_factor,
                  &cs[ic], &cs[ic + 1]);
        cs[ic + 1] *= rp->sin_sign;
        theta_base *= rp->theta_scale;
    }
}

/* One row at src to out, with its position's rotations cs. */
static void rope_row(const struct rope_params *rp, const struct tensor *a, const struct tensor *dst, const char *src,
                     char *out, const float *cs) {
    const int64_t ne0 = a->ne[0];
    if (!(rp->mode & ROPE_MODE_NEOX)) {
        if (a->type == GGML_TYPE_F32 && a->nb[0] == sizeof(float) && dst->nb[0] == sizeof(float)) {
            rope_rotate_f32((const float *)src, (float *)out, cs, ne0);
            return;
        }
        for (int64_t i0 = 0; i0 + 1 < ne0; i0 += 2) rope_rotate(a, dst, src, out, i0, 1, cs[i0], cs[i0 + 1]);
        return;
    }
    /* elements past n_dims are copied unchanged */
    for (int64_t ic = 0; ic + 1 < ne0; ic += 2) {
        if (ic < rp->n_dims) {
            rope_rotate(a, dst, src, out, ic / 2, rp->n_dims / 2, cs[ic], cs[ic + 1]);
        } else {
            for (int64_t k = ic; k < ic + 2; k++) rope_st(dst, out + k * dst->nb[0], rope_ld(a, src + k * a->nb[0]));
        }
    }
}

static void cpu_rope(const struct cpu_task *task, struct tensor *dst) {
    const struct tensor *a = dst->src[0], *pos = dst->src[1];
    const int n_orig_ctx = dst->op_params[4];
    const float freq_base = tensor_op_param_f32(dst, 5);
    struct rope_params rp = {
        .n_dims = dst->op_params[1], .mode = dst->op_params[2], .freq_scale = tensor_op_param_f32(dst, 6),
        .ext_factor = tensor_op_param_f32(dst, 7), .attn_factor = tensor_op_param_f32(dst, 8),
        /* rope_back rotates by -theta: the inverse rotation */
        .sin_sign = dst->op == OP_ROPE_BACK ? -1.0f : 1.0f,
    };
    rp.theta_scale = powf(freq_base, -2.0f / (float)rp.n_dims);
    rp.inv_ndims = -1.0f / (float)rp.n_dims;
    rope_yarn_corr_dims(rp.n_dims, n_orig_ctx, freq_base, tensor_op_param_f32(dst, 9), tensor_op_param_f32(dst, 10),
                        rp.corr_dims);
    const int64_t ne0 = a->ne[0];
    /* rows of one position (a token's heads) share their rotations: computed
     * once per position met, the same floats as per row */
    float *cs = cpu_row_buf(task, dst, 0);
    bool have = false;
    int32_t have_p = 0;

    int64_t r0, r1;
    cpu_task_rows(task, tensor_nrows(a), &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        int64_t i1, i2, i3;
        cpu_row_index(a, r, &i1, &i2, &i3);
        int32_t p;
        memcpy(&p, cpu_elem(pos, i2, 0, 0, 0), sizeof p);
        if (!have || p != have_p) {
            rope_rotations(&rp, p, ne0, cs);
            have = true;
            have_p = p;
        }
        rope_row(&rp, a, dst, cpu_elem(a, 0, i1, i2, i3), cpu_elem(dst, 0, i1, i2, i3), cs);
    }
}

static bool cpu_rope_supported(const struct tensor *dst) {
    const struct tensor *a = dst->src[0];
    return (a->type == GGML_TYPE_F32 || a->type == GGML_TYPE_F16) && dst->type == a->type &&
           dst->src[1]->type == GGML_TYPE_I32 && a->ne[0] % 2 == 0;
}

const struct cpu_op_desc cpu_desc_rope = {
    .kernel = cpu_rope, .work_size = cpu_row_buf_work, .supported = cpu_rope_supported,
};

/* ---- ALiBi ----------------------------------------------------------------------------- */

static void cpu_alibi(const struct cpu_task *task, struct tensor *dst) {
    const struct tensor *a = dst->src[0];
    const int n_head = dst->op_params[1];
    const float max_bias = tensor_op_param_f32(dst, 2);
    const int n_heads_log2_floor = 1 << (int)floor(log2(n_head));
    const float m0 = powf(2.0f, -max_bias / (float)n_heads_log2_floor);
    const float m1 = powf(2.0f, -(max_bias / 2.0f) / (float)n_heads_log2_floor);
    int64_t r0, r1;
    cpu_task_rows(task, tensor_nrows(a), &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        int64_t i1, i2, i3;
        cpu_row_index(a, r, &i1, &i2, &i3);
        const int64_t k = i2; /* the head */
        const float m_k = k < n_heads_log2_floor ? powf(m0, (float)(k + 1))
                                                 : powf(m1, (float)(2 * (k - n_heads_log2_floor) + 1));
        const char *src = cpu_elem(a, 0, i1, i2, i3);
        for (int64_t i0 = 0; i0 < a->ne[0]; i0++) {
            const float v = (float)i0 * m_k + rope_ld(a, src + i0 * a->nb[0]);
            memcpy(cpu_elem(dst, i0, i1, i2, i3), &v, sizeof v);
        }
    }
}

static bool cpu_alibi_supported(const struct tensor *dst) {
    const enum ggml_type t = dst->src[0]->type;
    return dst->type == GGML_TYPE_F32 && (t == GGML_TYPE_F32 || t == GGML_TYPE_F16);
}

const struct cpu_op_desc cpu_desc_alibi = { .kernel = cpu_alibi, .supported = cpu_alibi_supported };

/* ---- cross entropy ------------------------------------------------------------------------
 * b1892: softmax with expf (GGML_CROSS_ENTROPY_EXP_FP16 is off) and a double
 * sum, probabilities rescaled to [eps, 1] (eps = 1e-9) before the log,
 * loss = -sum(targets * log p) / n_rows. The per-row sums are added in row
 * order (b1892 adds per-thread partial sums) so the result does not depend on
 * the thread count. */

static size_t cpu_ce_work(const struct tensor *dst, int n_threads) {
    const struct tensor *a = dst->src[0];
    return cpu_scratch_stride((size_t)tensor_nrows(a) * sizeof(float)) +
           (size_t)n_threads * cpu_scratch_stride(3 * (size_t)a->ne[0] * sizeof(float));
}

/* Softmax of row x into p (unscaled exp values); returns the double sum. */
static double cpu_ce_exp(const float *x, float *p, int64_t n) {
    float max = -INFINITY;
    for (int64_t i = 0; i < n; i++) max = x[i] > max ? x[i] : max;
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++) {
        if (x[i] == -INFINITY) {
            p[i] = 0.0f;
        } else {
            p[i] = expf(x[i] - max);
            sum += (double)p[i];
        }
    }
    return sum;
}

static void cpu_cross_entropy_loss(const struct cpu_task *task, struct tensor *dst) {
    const struct tensor *a = dst->src[0], *t = dst->src[1];
    const int64_t n = a->ne[0], nr = tensor_nrows(a);
    float *row_loss = (float *)task->wdata;
    if (task->phase == CPU_PHASE_FINALIZE) {
        if (task->ith != 0) return;
        double sum = 0.0;
        for (int64_t r = 0; r < nr; r++) sum += (double)row_loss[r];
        const float loss = (float)sum * (-1.0f / (float)nr);
        memcpy(dst->data, &loss, sizeof loss);
        return;
    }
    const size_t off = cpu_scratch_stride((size_t)nr * sizeof(float));
    float *buf = cpu_task_scratch(task, off, 3 * (size_t)n * sizeof(float));
    const float eps = 1e-9f;
    int64_t r0, r1;
    cpu_task_rows(task, nr, &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        int64_t i1, i2, i3;
        cpu_row_index(a, r, &i1, &i2, &i3);
        const float *x = cpu_load_row(a, i1, i2, i3, buf);
        const float *y = cpu_load_row(t, i1, i2, i3, buf + n);
        float *st = buf + 2 * n;
        const double sum = cpu_ce_exp(x, st, n);
        const float k = (float)((1.0 - eps) / sum);
        double row = 0.0;
        for (int64_t i = 0; i < n; i++) row += (double)(logf(st[i] * k + eps) * y[i]);
        row_loss[r] = (float)row;
    }
}

static bool cpu_ce_supported(const struct tensor *dst) { return cpu_nn_f32_binary(dst); }

const struct cpu_op_desc cpu_desc_cross_entropy_loss = {
    .kernel = cpu_cross_entropy_loss, .has_finalize = true, .work_size = cpu_ce_work, .supported = cpu_ce_supported,
};

/* grad = (softmax(x) rescaled to [eps, 1] - targets) * d / n_rows, eps = 1e-9 in double (b1892) */
static void cpu_cross_entropy_loss_back(const struct cpu_task *task, struct tensor *dst) {
    const struct tensor *a = dst->src[0], *t = dst->src[1], *g = dst->src[2];
    const int64_t n = a->ne[0], nr = tensor_nrows(a);
    const double eps = 1e-9;
    float d;
    memcpy(&d, g->data, sizeof d);
    const float k_grad = d / (float)nr;
    int64_t r0, r1;
    cpu_task_rows(task, nr, &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        int64_t i1, i2, i3;
        cpu_row_index(a, r, &i1, &i2, &i3);
        const float *x = cpu_load_row(a, i1, i2, i3, cpu_row_buf(task, dst, 0));
        const float *y = cpu_load_row(t, i1, i2, i3, cpu_row_buf(task, dst, 1));
        float *ds = cpu_row_buf(task, dst, 2);
        const float k = (float)((1.0 - eps) / cpu_ce_exp(x, ds, n));
        float *out = cpu_elem(dst, 0, i1, i2, i3);
        for (int64_t i = 0; i < n; i++) out[i] = ((ds[i] * k + (float)eps) - y[i]) * k_grad;
    }
}

static bool cpu_ce_back_supported(const struct tensor *dst) {
    return cpu_nn_f32_binary(dst) && dst->src[2]->type == GGML_TYPE_F32;
}

const struct cpu_op_desc cpu_desc_cross_entropy_loss_back = {
    .kernel = cpu_cross_entropy_loss_back, .work_size = cpu_row_buf_work, .supported = cpu_ce_back_supported,
};

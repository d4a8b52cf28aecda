/*
 * The 32-element block types: Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1.
 *
 * The reference quantizers reproduce b1892's quantize_row_*_reference bit for
 * bit (same operations in the same order, float arithmetic, no contraction).
 * The dot products follow b1892's x86 (AVX2) code (quant_lanes.h).
 */
#include <float.h>
#include <math.h>

#include "quant_impl.h"
#include "quant_lanes.h"

/* (int)v clamped to [lo, hi], NaN -> lo. Equals ggml's truncating casts
 * followed by MIN/MAX for every finite value those produce. */
static inline int trunc_clamp(float v, int lo, int hi) {
    if (!(v >= (float)lo)) return lo;
    if (v >= (float)hi) return hi;
    return (int)v;
}

/* The quant's sign follows the sign of the largest magnitude (first one on ties). */
static float signed_absmax(const float *x, int n) {
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < n; j++) {
        if (amax < fabsf(x[j])) {
            amax = fabsf(x[j]);
            max = x[j];
        }
    }
    return max;
}

static void min_max(const float *x, int n, float *min_out, float *max_out) {
    float min = FLT_MAX, max = -FLT_MAX;
    for (int j = 0; j < n; j++) {
        if (x[j] < min) min = x[j];
        if (x[j] > max) max = x[j];
    }
    *min_out = min;
    *max_out = max;
}

static float abs_max(const float *x, int n) {
    float amax = 0.0f;
    for (int j = 0; j < n; j++) {
        const float a = fabsf(x[j]);
        amax = amax > a ? amax : a;
    }
    return amax;
}

/* ---- quantize -------------------------------------------------------------- */

void quant_q4_0_quantize_ref(const float *x, void *vy, int64_t n) {
    block_q4_0 *y = vy;
    for (int64_t i = 0; i < n / QK4_0; i++, x += QK4_0) {
        const float d = signed_absmax(x, QK4_0) / -8;
        const float id = d ? 1.0f / d : 0.0f;
        y[i].d = fp32_to_fp16(d);
        for (int j = 0; j < QK4_0 / 2; j++) {
            const int q0 = trunc_clamp(fmaf(x[j], id, 8.5f), 0, 15);
            const int q1 = trunc_clamp(fmaf(x[QK4_0 / 2 + j], id, 8.5f), 0, 15);
            y[i].qs[j] = (uint8_t)(q0 | (q1 << 4));
        }
    }
}

void quant_q4_1_quantize_ref(const float *x, void *vy, int64_t n) {
    block_q4_1 *y = vy;
    for (int64_t i = 0; i < n / QK4_1; i++, x += QK4_1) {
        float min, max;
        min_max(x, QK4_1, &min, &max);
        const float d = (max - min) / ((1 << 4) - 1);
        const float id = d ? 1.0f / d : 0.0f;
        y[i].d = fp32_to_fp16(d);
        y[i].m = fp32_to_fp16(min);
        for (int j = 0; j < QK4_1 / 2; j++) {
            const int q0 = trunc_clamp(fmaf(x[j] - min, id, 0.5f), 0, 15);
            const int q1 = trunc_clamp(fmaf(x[QK4_1 / 2 + j] - min, id, 0.5f), 0, 15);
            y[i].qs[j] = (uint8_t)(q0 | (q1 << 4));
        }
    }
}

/* Low nibbles into qs, fifth bits into qh (element j -> bit j). */
static void pack_q5(const int *q, uint8_t qs[16], uint8_t qh_out[4]) {
    uint32_t qh = 0;
    for (int j = 0; j < 16; j++) {
        qs[j] = (uint8_t)((q[j] & 0x0F) | ((q[j + 16] & 0x0F) << 4));
        qh |= ((uint32_t)(q[j] & 0x10) >> 4) << j;
        qh |= ((uint32_t)(q[j + 16] & 0x10) >> 4) << (j + 16);
    }
    memcpy(qh_out, &qh, 4);
}

void quant_q5_0_quantize_ref(const float *x, void *vy, int64_t n) {
    block_q5_0 *y = vy;
    for (int64_t i = 0; i < n / QK5_0; i++, x += QK5_0) {
        const float d = signed_absmax(x, QK5_0) / -16;
        const float id = d ? 1.0f / d : 0.0f;
        y[i].d = fp32_to_fp16(d);
        int q[QK5_0];
        for (int j = 0; j < QK5_0; j++) q[j] = trunc_clamp(fmaf(x[j], id, 16.5f), 0, 31);
        pack_q5(q, y[i].qs, y[i].qh);
    }
}

void quant_q5_1_quantize_ref(const float *x, void *vy, int64_t n) {
    block_q5_1 *y = vy;
    for (int64_t i = 0; i < n / QK5_1; i++, x += QK5_1) {
        float min, max;
        min_max(x, QK5_1, &min, &max);
        const float d = (max - min) / ((1 << 5) - 1);
        const float id = d ? 1.0f / d : 0.0f;
        y[i].d = fp32_to_fp16(d);
        y[i].m = fp32_to_fp16(min);
        int q[QK5_1];
        for (int j = 0; j < QK5_1; j++) q[j] = trunc_clamp(fmaf(x[j] - min, id, 0.5f), 0, 31);
        pack_q5(q, y[i].qs, y[i].qh);
    }
}

static inline int8_t round_away_i8(float v) { return (int8_t)trunc_clamp(roundf(v), -128, 127); }

void quant_q8_0_quantize_ref(const float *x, void *vy, int64_t n) {
    block_q8_0 *y = vy;
    for (int64_t i = 0; i < n / QK8_0; i++, x += QK8_0) {
        const float d = abs_max(x, QK8_0) / ((1 << 7) - 1);
        const float id = d ? 1.0f / d : 0.0f;
        y[i].d = fp32_to_fp16(d);
        for (int j = 0; j < QK8_0; j++) y[i].qs[j] = round_away_i8(x[j] * id);
    }
}

void quant_q8_1_quantize_ref(const float *x, void *vy, int64_t n) {
    block_q8_1 *y = vy;
    for (int64_t i = 0; i < n / QK8_1; i++, x += QK8_1) {
        const float d = abs_max(x, QK8_1) / ((1 << 7) - 1);
        const float id = d ? 1.0f / d : 0.0f;
        y[i].d = d;
        int sum = 0;
        for (int j = 0; j < QK8_1; j++) {
            y[i].qs[j] = round_away_i8(x[j] * id);
            sum += y[i].qs[j];
        }
        y[i].s = (float)sum * d;
    }
}

/* Activations: what b1892 computes on x86 (its AVX quantize_row_q8_0/q8_1,
 * which the reference outputs were made with): the multiplier is 127/amax
 * rather than 1/(amax/127), and halves round to even. */
static inline int8_t round_even_i8(float v) { return (int8_t)trunc_clamp(rintf(v), -128, 127); }

void quant_q8_0_quantize_act(const float *x, void *vy, int64_t n) {
    block_q8_0 *y = vy;
    for (int64_t i = 0; i < n / QK8_0; i++, x += QK8_0) {
        const float amax = abs_max(x, QK8_0);
        y[i].d = fp32_to_fp16(amax / 127.f);
        const float id = amax != 0.0f ? 127.f / amax : 0.0f;
        for (int j = 0; j < QK8_0; j++) y[i].qs[j] = round_even_i8(x[j] * id);
    }
}

void quant_q8_1_quantize_act(const float *x, void *vy, int64_t n) {
    block_q8_1 *y = vy;
    for (int64_t i = 0; i < n / QK8_1; i++, x += QK8_1) {
        const float amax = abs_max(x, QK8_1);
        const float d = amax / 127.f;
        const float id = amax != 0.0f ? 127.f / amax : 0.0f;
        int sum = 0;
        for (int j = 0; j < QK8_1; j++) {
            y[i].qs[j] = round_even_i8(x[j] * id);
            sum += y[i].qs[j];
        }
        y[i].d = d;
        y[i].s = d * (float)sum;
    }
}

/* ---- dequantize ------------------------------------------------------------ */

void quant_q4_0_dequantize(const void *vx, float *y, int64_t n) {
    const block_q4_0 *x = vx;
    for (int64_t i = 0; i < n / QK4_0; i++, y += QK4_0) {
        const float d = fp16_to_fp32(x[i].d);
        for (int j = 0; j < QK4_0 / 2; j++) {
            y[j] = (float)((x[i].qs[j] & 0x0F) - 8) * d;
            y[j + QK4_0 / 2] = (float)((x[i].qs[j] >> 4) - 8) * d;
        }
    }
}

void quant_q4_1_dequantize(const void *vx, float *y, int64_t n) {
    const block_q4_1 *x = vx;
    for (int64_t i = 0; i < n / QK4_1; i++, y += QK4_1) {
        const float d = fp16_to_fp32(x[i].d);
        const float m = fp16_to_fp32(x[i].m);
        for (int j = 0; j < QK4_1 / 2; j++) {
            y[j] = (float)(x[i].qs[j] & 0x0F) * d + m;
            y[j + QK4_1 / 2] = (float)(x[i].qs[j] >> 4) * d + m;
        }
    }
}

/* The 32 five-bit quants of a Q5 block (0..31). */
static void unpack_q5(const uint8_t qs[16], const uint8_t qh_bytes[4], int q[32]) {
    uint32_t qh;
    memcpy(&qh, qh_bytes, 4);
    for (int j = 0; j < 16; j++) {
        q[j] = (qs[j] & 0x0F) | (int)(((qh >> j) << 4) & 0x10);
        q[j + 16] = (qs[j] >> 4) | (int)((qh >> (j + 12)) & 0x10);
    }
}

void quant_q5_0_dequantize(const void *vx, float *y, int64_t n) {
    const block_q5_0 *x = vx;
    for (int64_t i = 0; i < n / QK5_0; i++, y += QK5_0) {
        const float d = fp16_to_fp32(x[i].d);
        int q[QK5_0];
        unpack_q5(x[i].qs, x[i].qh, q);
        for (int j = 0; j < QK5_0; j++) y[j] = (float)(q[j] - 16) * d;
    }
}

void quant_q5_1_dequantize(const void *vx, float *y, int64_t n) {
    const block_q5_1 *x = vx;
    for (int64_t i = 0; i < n / QK5_1; i++, y += QK5_1) {
        const float d = fp16_to_fp32(x[i].d);
        const float m = fp16_to_fp32(x[i].m);
        int q[QK5_1];
        unpack_q5(x[i].qs, x[i].qh, q);
        for (int j = 0; j < QK5_1; j++) y[j] = (float)q[j] * d + m;
    }
}

void quant_q8_0_dequantize(const void *vx, float *y, int64_t n) {
    const block_q8_0 *x = vx;
    for (int64_t i = 0; i < n / QK8_0; i++, y += QK8_0) {
        const float d = fp16_to_fp32(x[i].d);
        for (int j = 0; j < QK8_0; j++) y[j] = (float)x[i].qs[j] * d;
    }
}

void quant_q8_1_dequantize(const void *vx, float *y, int64_t n) {
    const block_q8_1 *x = vx;
    for (int64_t i = 0; i < n / QK8_1; i++, y += QK8_1) {
        for (int j = 0; j < QK8_1; j++) y[j] = (float)x[i].qs[j] * x[i].d;
    }
}

/* ---- dot products ------------------------------------------------------------ */

/*
 * b1892's x86 (AVX2) dot products for the 32-element blocks (quant_lanes.h):
 * per block, the signed quants times the activations in 8 integer lanes of 4,
 * fused into 8 float sums with the block's scale d_x*d_y, hsum_float_8 at the
 * end. The types with a min (Q4_1, Q5_1) fuse m_x*s_y per block into a
 * separate scalar sum, which comes last: hsum + summs.
 */
void quant_q4_0_dot_q8_0(int64_t n, float *s, const void *vx, const void *vy) {
    const block_q4_0 *x = vx;
    const block_q8_0 *y = vy;
    float acc[QUANT_LANES] = { 0 };
    for (int64_t i = 0; i < n / QK8_0; i++) {
        int8_t q[QK8_0]; /* low nibbles are elements 0..15, high nibbles 16..31 */
        for (int j = 0; j < QK8_0 / 2; j++) {
            q[j] = (int8_t)((x[i].qs[j] & 0x0F) - 8);
            q[j + QK8_0 / 2] = (int8_t)((x[i].qs[j] >> 4) - 8);
        }
        quant_lanes_block32(acc, q, y[i].qs, fp16_to_fp32(x[i].d) * fp16_to_fp32(y[i].d));
    }
    *s = quant_lanes_hsum(acc);
}

void quant_q4_1_dot_q8_1(int64_t n, float *s, const void *vx, const void *vy) {
    const block_q4_1 *x = vx;
    const block_q8_1 *y = vy;
    float acc[QUANT_LANES] = { 0 };
    float summs = 0.0f;
    for (int64_t i = 0; i < n / QK8_1; i++) {
        summs = fmaf(fp16_to_fp32(x[i].m), y[i].s, summs);
        int8_t q[QK8_1];
        for (int j = 0; j < QK8_1 / 2; j++) {
            q[j] = (int8_t)(x[i].qs[j] & 0x0F);
            q[j + QK8_1 / 2] = (int8_t)(x[i].qs[j] >> 4);
        }
        quant_lanes_block32(acc, q, y[i].qs, fp16_to_fp32(x[i].d) * y[i].d);
    }
    *s = quant_lanes_hsum(acc) + summs;
}

void quant_q5_0_dot_q8_0(int64_t n, float *s, const void *vx, const void *vy) {
    const block_q5_0 *x = vx;
    const block_q8_0 *y = vy;
    float acc[QUANT_LANES] = { 0 };
    for (int64_t i = 0; i < n / QK8_0; i++) {
        int q[QK5_0];
        unpack_q5(x[i].qs, x[i].qh, q);
        int8_t qs[QK5_0];
        for (int j = 0; j < QK5_0; j++) qs[j] = (int8_t)(q[j] - 16);
        quant_lanes_block32(acc, qs, y[i].qs, fp16_to_fp32(x[i].d) * fp16_to_fp32(y[i].d));
    }
    *s = quant_lanes_hsum(acc);
}

void quant_q5_1_dot_q8_1(int64_t n, float *s, const void *vx, const void *vy) {
    const block_q5_1 *x = vx;
    const block_q8_1 *y = vy;
    float acc[QUANT_LANES] = { 0 };
    float summs = 0.0f;
    for (int64_t i = 0; i < n / QK8_1; i++) {
        summs = fmaf(fp16_to_fp32(x[i].m), y[i].s, summs);
        int q[QK5_1];
        unpack_q5(x[i].qs, x[i].qh, q);
        int8_t qs[QK5_1];
        for (int j = 0; j < QK5_1; j++) qs[j] = (int8_t)q[j];
        quant_lanes_block32(acc, qs, y[i].qs, fp16_to_fp32(x[i].d) * y[i].d);
    }
    *s = quant_lanes_hsum(acc) + summs;
}

void quant_q8_0_dot_q8_0(int64_t n, float *s, const void *vx, const void *vy) {
    const block_q8_0 *x = vx;
    const block_q8_0 *y = vy;
    float acc[QUANT_LANES] = { 0 };
    for (int64_t i = 0; i < n / QK8_0; i++) {
        quant_lanes_block32(acc, x[i].qs, y[i].qs, fp16_to_fp32(x[i].d) * fp16_to_fp32(y[i].d));
    }
    *s = quant_lanes_hsum(acc);
}

/* ---- histogram --------------------------------------------------------------- */

void quant_legacy_histogram(enum ggml_type type, const void *blocks, int64_t nblocks, int64_t hist[16]) {
    for (int64_t i = 0; i < nblocks; i++) {
        int q[32];
        switch (type) {
        case GGML_TYPE_Q4_0:
        case GGML_TYPE_Q4_1: {
            const uint8_t *qs = type == GGML_TYPE_Q4_0 ? ((const block_q4_0 *)blocks)[i].qs
                                                       : ((const block_q4_1 *)blocks)[i].qs;
            for (int j = 0; j < 16; j++) {
                hist[qs[j] & 0x0F]++;
                hist[qs[j] >> 4]++;
            }
            break;
        }
        case GGML_TYPE_Q5_0:
        case GGML_TYPE_Q5_1:
            if (type == GGML_TYPE_Q5_0) {
                unpack_q5(((const block_q5_0 *)blocks)[i].qs, ((const block_q5_0 *)blocks)[i].qh, q);
            } else {
                unpack_q5(((const block_q5_1 *)blocks)[i].qs, ((const block_q5_1 *)blocks)[i].qh, q);
            }
            for (int j = 0; j < 32; j++) hist[q[j] / 2]++;   /* 32 levels into 16 bins */
            break;
        case GGML_TYPE_Q8_0:
            for (int j = 0; j < QK8_0; j++) hist[((const block_q8_0 *)blocks)[i].qs[j] / 16 + 8]++;
            break;
        default:
            return;
        }
    }
}

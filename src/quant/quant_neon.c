/*
 * aarch64 NEON variants of the most used row functions (quant_simd.h):
 * F32/F16 dot products, Q4_0/Q8_0 against Q8_0 and the Q8_0 activation
 * quantizer. NEON is part of every aarch64 CPU, so these are compiled only
 * there and need no run-time check; the sdot instruction is used when the
 * build targets it (__ARM_FEATURE_DOTPROD). Same float operations as the
 * scalar definitions: a 32-bit lane still sums 4 consecutive elements, one
 * fused multiply-add per lane and block, b1892's hsum_float_8 at the end.
 */
#include "quant_simd.h"

#if defined(__aarch64__) && defined(__ARM_NEON)
#include <arm_neon.h>
#include <math.h>

#include "quant_impl.h"

bool quant_neon_isa_supported(void) { return true; }

static void neon_f32_dot(int64_t n, float *s, const void *vx, const void *vy) {
    const float *x = vx, *y = vy;
    float32x4_t a[8];
    for (int k = 0; k < 8; k++) a[k] = vdupq_n_f32(0.0f);
    for (int64_t i = 0; i + QUANT_DOT_STEP <= n; i += QUANT_DOT_STEP) {
        for (int k = 0; k < 8; k++) a[k] = vfmaq_f32(a[k], vld1q_f32(x + i + 4 * k), vld1q_f32(y + i + 4 * k));
    }
    float acc[4][QUANT_DOT_LANES];
    for (int k = 0; k < 8; k++) vst1q_f32(&acc[k / 2][4 * (k % 2)], a[k]);
    *s = quant_f32_dot_finish(acc, x, y, n);
}

static void neon_f16_dot(int64_t n, float *s, const void *vx, const void *vy) {
    const fp16_t *x = vx, *y = vy;
    float32x4_t a[8];
    for (int k = 0; k < 8; k++) a[k] = vdupq_n_f32(0.0f);
    for (int64_t i = 0; i + QUANT_DOT_STEP <= n; i += QUANT_DOT_STEP) {
        for (int k = 0; k < 8; k++) {
            const float32x4_t xv = vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(x + i + 4 * k)));
            const float32x4_t yv = vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(y + i + 4 * k)));
            a[k] = vfmaq_f32(a[k], xv, yv);
        }
    }
    float acc[4][QUANT_DOT_LANES];
    for (int k = 0; k < 8; k++) vst1q_f32(&acc[k / 2][4 * (k % 2)], a[k]);
    *s = quant_f16_dot_finish(acc, x, y, n);
}

/* Lanes 0-3 (elements 0..15) and 4-7 (16..31): sums of 4 consecutive products. */
static inline int32x4_t neon_dot4(int8x16_t a, int8x16_t b) {
#if defined(__ARM_FEATURE_DOTPROD)
    return vdotq_s32(vdupq_n_s32(0), a, b);
#else
    const int16x8_t lo = vmull_s8(vget_low_s8(a), vget_low_s8(b));
    const int16x8_t hi = vmull_s8(vget_high_s8(a), vget_high_s8(b));
    return vpaddq_s32(vpaddlq_s16(lo), vpaddlq_s16(hi));
#endif
}

static inline float neon_hsum(float32x4_t lo, float32x4_t hi) {
    const float32x4_t r = vaddq_f32(lo, hi);                           /* lane k onto k + 4 */
    const float32x2_t t = vadd_f32(vget_low_f32(r), vget_high_f32(r)); /* l0 + l2, l1 + l3 */
    return vget_lane_f32(t, 0) + vget_lane_f32(t, 1);
}

static inline void neon_block(float32x4_t *lo, float32x4_t *hi, int8x16_t a0, int8x16_t a1, const int8_t *yq, float d) {
    const float32x4_t vd = vdupq_n_f32(d);
    *lo = vfmaq_f32(*lo, vcvtq_f32_s32(neon_dot4(a0, vld1q_s8(yq))), vd);
    *hi = vfmaq_f32(*hi, vcvtq_f32_s32(neon_dot4(a1, vld1q_s8(yq + 16))), vd);
}

static void neon_q4_0_dot(int64_t n, float *s, const void *vx, const void *vy) {
    const block_q4_0 *x = vx;
    const block_q8_0 *y = vy;
    float32x4_t lo = vdupq_n_f32(0.0f), hi = lo;
    for (int64_t i = 0; i < n / QK8_0; i++) {
        const uint8x16_t q = vld1q_u8(x[i].qs);
        const int8x16_t a0 = vsubq_s8(vreinterpretq_s8_u8(vandq_u8(q, vdupq_n_u8(0x0F))), vdupq_n_s8(8));
        const int8x16_t a1 = vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(q, 4)), vdupq_n_s8(8));
        neon_block(&lo, &hi, a0, a1, y[i].qs, fp16_to_fp32(x[i].d) * fp16_to_fp32(y[i].d));
    }
    *s = neon_hsum(lo, hi);
}

static void neon_q8_0_dot(int64_t n, float *s, const void *vx, const void *vy) {
    const block_q8_0 *x = vx;
    const block_q8_0 *y = vy;
    float32x4_t lo = vdupq_n_f32(0.0f), hi = lo;
    for (int64_t i = 0; i < n / QK8_0; i++) {
        neon_block(&lo, &hi, vld1q_s8(x[i].qs), vld1q_s8(x[i].qs + 16), y[i].qs,
                   fp16_to_fp32(x[i].d) * fp16_to_fp32(y[i].d));
    }
    *s = neon_hsum(lo, hi);
}

/* quant_q8_0_quantize_act: vcvtnq rounds to nearest even like rintf; blocks
 * with a NaN (the scalar amax depends on where it is) or an infinity (inf * 0
 * gives NaN, which vcvtnq makes 0 and the scalar code -128) take the scalar path. */
static void neon_q8_0_from_float(const float *x, void *vy, int64_t n) {
    block_q8_0 *y = vy;
    for (int64_t i = 0; i < n / QK8_0; i++, x += QK8_0) {
        float32x4_t v[8];
        uint32x4_t nan = vdupq_n_u32(0);
        float32x4_t m = vdupq_n_f32(0.0f);
        for (int k = 0; k < 8; k++) {
            v[k] = vld1q_f32(x + 4 * k);
            nan = vorrq_u32(nan, vmvnq_u32(vceqq_f32(v[k], v[k])));
            m = vmaxq_f32(m, vabsq_f32(v[k]));
        }
        const float amax = vmaxvq_f32(m);
        if (vmaxvq_u32(nan) || amax == INFINITY) {
            quant_q8_0_quantize_act(x, &y[i], QK8_0);
            continue;
        }
        y[i].d = fp32_to_fp16(amax / 127.f);
        const float id = amax != 0.0f ? 127.f / amax : 0.0f;
        for (int k = 0; k < 8; k += 2) {
            const int32x4_t q0 = vcvtnq_s32_f32(vmulq_n_f32(v[k], id)), q1 = vcvtnq_s32_f32(vmulq_n_f32(v[k + 1], id));
            const int16x8_t q16 = vcombine_s16(vqmovn_s32(q0), vqmovn_s32(q1));
            vst1_s8(y[i].qs + 4 * k, vqmovn_s16(q16));
        }
    }
}

struct quant_kernels quant_neon_kernels(enum ggml_type type) {
    switch (type) {
        case GGML_TYPE_F32: return (struct quant_kernels){ .vec_dot = neon_f32_dot };
        case GGML_TYPE_F16: return (struct quant_kernels){ .vec_dot = neon_f16_dot };
        case GGML_TYPE_Q4_0: return (struct quant_kernels){ .vec_dot = neon_q4_0_dot };
        case GGML_TYPE_Q8_0: return (struct quant_kernels){ .vec_dot = neon_q8_0_dot, .from_float = neon_q8_0_from_float };
        default: return (struct quant_kernels){ 0 };
    }
}

#else

bool quant_neon_isa_supported(void) { return false; }

struct quant_kernels quant_neon_kernels(enum ggml_type type) {
    (void)type;
    return (struct quant_kernels){ 0 };
}

#endif

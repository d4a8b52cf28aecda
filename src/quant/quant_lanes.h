/*
 * Internal to src/quant/: the summation order of b1892's x86 dot products.
 *
 * The reference outputs were computed by the AVX2 branches of b1892's
 * ggml_vec_dot_* (ggml-quants.c). Those multiply bytes with
 * _mm256_maddubs_epi16 (adds neighbouring products) and _mm256_madd_epi16
 * (adds neighbouring pairs, times a 16-bit scale), so each of the 8 int32
 * lanes of a 256-bit register collects elements 4k..4k+3 of every 32-element
 * chunk. Integer sums are exact (no 16-bit saturation is reachable with these
 * quant ranges), so only that partition matters. Each block then converts its
 * lanes to float and fuses them into 8 float accumulators with its scale
 * (_mm256_fmadd_ps); hsum_float_8 reduces the accumulators at the end.
 *
 * The scalar sums of the mins next to those loops (`summs += m * s` in Q4_1,
 * Q5_1, Q5_K) were fused by b1892's compiler; the callers say fmaf() (the
 * end-to-end tests tell the two apart: unfused moves logits by ~1e-6).
 */
#ifndef LLAMAC_QUANT_QUANT_LANES_H
#define LLAMAC_QUANT_QUANT_LANES_H

#include <math.h>
#include <stdint.h>

#define QUANT_LANES 8

/* lanes[k] += scales[e / group] * a[e] * b[e] over the n elements e with
 * (e % 32) / 4 == k (n a multiple of 32, group of 4). */
static inline void quant_lanes_add(int32_t lanes[QUANT_LANES], const int8_t *a, const int8_t *b, int n,
                                   const int32_t *scales, int group) {
    for (int c = 0; c < n; c += 32) {
        for (int k = 0; k < QUANT_LANES; k++) {
            const int e = c + 4 * k;
            const int32_t quad = a[e] * b[e] + a[e + 1] * b[e + 1] + a[e + 2] * b[e + 2] + a[e + 3] * b[e + 3];
            lanes[k] += scales[e / group] * quad;
        }
    }
}

/* acc[k] = fmaf(d, (float)lanes[k], acc[k]): one block's _mm256_fmadd_ps. */
static inline void quant_lanes_fma(float acc[QUANT_LANES], float d, const int32_t lanes[QUANT_LANES]) {
    for (int k = 0; k < QUANT_LANES; k++) acc[k] = fmaf(d, (float)lanes[k], acc[k]);
}

/* b1892's hsum_float_8: lane k onto k + 4, then (l0 + l2) + (l1 + l3). */
static inline float quant_lanes_hsum(const float acc[QUANT_LANES]) {
    float r[4];
    for (int k = 0; k < 4; k++) r[k] = acc[k] + acc[k + 4];
    return (r[0] + r[2]) + (r[1] + r[3]);
}

/* One 32-element block with one scale: 8 lanes of 4, fused into acc with d. */
static inline void quant_lanes_block32(float acc[QUANT_LANES], const int8_t *a, const int8_t *b, float d) {
    static const int32_t unit = 1;
    int32_t lanes[QUANT_LANES] = { 0 };
    quant_lanes_add(lanes, a, b, 32, &unit, 32);
    quant_lanes_fma(acc, d, lanes);
}

#endif

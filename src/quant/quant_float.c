/* F32 and F16 rows: conversion and dot products (scalar definitions). */
#include <math.h>

#include "quant_impl.h"

void quant_f32_copy(const void *src, float *dst, int64_t n) {
    memcpy(dst, src, (size_t)n * sizeof(float));
}

void quant_f32_from_float(const float *src, void *dst, int64_t n) {
    memcpy(dst, src, (size_t)n * sizeof(float));
}

/*
 * The F32 and F16 dot products in the order b1892 sums them on x86. Its
 * ggml.c has no AVX-512 mapping, so the golden data's AVX-512 machine ran the
 * AVX path: 4 accumulators of 8 lanes, one fused multiply-add per element of
 * each 32-element step; the accumulators are added (a0+a2)+(a1+a3) lane-wise,
 * the upper 4 lanes onto the lower 4, then (l0+l1)+(l2+l3). GCC vectorized
 * the F32 leftover loop `sum += x*y`: whole groups of 8 are multiplied, then
 * added one by one (two roundings), the last n % 8 are contracted into fmaf.
 * F16 leftovers are added in double. This reproduces b1892's logits bit for
 * bit; a faster kernel must keep this order.
 */
static float dot_reduce(const float acc[4][QUANT_DOT_LANES]) {
    float a[QUANT_DOT_LANES], t[4];
    for (int l = 0; l < QUANT_DOT_LANES; l++) a[l] = (acc[0][l] + acc[2][l]) + (acc[1][l] + acc[3][l]);
    for (int l = 0; l < 4; l++) t[l] = a[l] + a[4 + l];
    return (t[0] + t[1]) + (t[2] + t[3]);
}

float quant_f32_dot_finish(const float acc[4][QUANT_DOT_LANES], const float *x, const float *y, int64_t n) {
    const int64_t n_steps = n - n % QUANT_DOT_STEP;
    float sum = dot_reduce(acc);
    const int64_t n_groups = n - (n - n_steps) % QUANT_DOT_LANES;
    for (int64_t i = n_steps; i < n_groups; i++) {
        const float p = x[i] * y[i];
        sum += p;
    }
    for (int64_t i = n_groups; i < n; i++) sum = fmaf(x[i], y[i], sum);
    return sum;
}

void quant_f32_dot(int64_t n, float *s, const void *vx, const void *vy) {
    const float *x = vx;
    const float *y = vy;
    const int64_t n_steps = n - n % QUANT_DOT_STEP;
    float acc[4][QUANT_DOT_LANES] = { { 0 } };
    for (int64_t i = 0; i < n_steps; i += QUANT_DOT_STEP) {
        for (int j = 0; j < 4; j++) {
            for (int l = 0; l < QUANT_DOT_LANES; l++) {
                const int64_t k = i + j * QUANT_DOT_LANES + l;
                acc[j][l] = fmaf(x[k], y[k], acc[j][l]);
            }
        }
    }
    *s = quant_f32_dot_finish(acc, x, y, n);
}

void quant_f16_to_float(const void *src, float *dst, int64_t n) {
    const fp16_t *x = src;
    for (int64_t i = 0; i < n; i++) dst[i] = fp16_to_fp32(x[i]);
}

void quant_f16_from_float(const float *src, void *dst, int64_t n) {
    fp16_t *y = dst;
    for (int64_t i = 0; i < n; i++) y[i] = fp32_to_fp16(src[i]);
}

float quant_f16_dot_finish(const float acc[4][QUANT_DOT_LANES], const fp16_t *x, const fp16_t *y, int64_t n) {
    double sum = dot_reduce(acc);
    for (int64_t i = n - n % QUANT_DOT_STEP; i < n; i++) sum += (double)(fp16_to_fp32(x[i]) * fp16_to_fp32(y[i]));
    return (float)sum;
}

void quant_f16_dot(int64_t n, float *s, const void *vx, const void *vy) {
    const fp16_t *x = vx;
    const fp16_t *y = vy;
    const int64_t n_steps = n - n % QUANT_DOT_STEP;
    float acc[4][QUANT_DOT_LANES] = { { 0 } };
    for (int64_t i = 0; i < n_steps; i += QUANT_DOT_STEP) {
        for (int j = 0; j < 4; j++) {
            for (int l = 0; l < QUANT_DOT_LANES; l++) {
                const int64_t k = i + j * QUANT_DOT_LANES + l;
                acc[j][l] = fmaf(fp16_to_fp32(x[k]), fp16_to_fp32(y[k]), acc[j][l]);
            }
        }
    }
    *s = quant_f16_dot_finish(acc, x, y, n);
}

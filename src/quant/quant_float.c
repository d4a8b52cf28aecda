/* F32 and F16 rows: conversion and dot products (scalar definitions). */
#include "quant_impl.h"

void quant_f32_copy(const void *src, float *dst, int64_t n) {
    memcpy(dst, src, (size_t)n * sizeof(float));
}

void quant_f32_from_float(const float *src, void *dst, int64_t n) {
    memcpy(dst, src, (size_t)n * sizeof(float));
}

/* b1892: float products summed in double, the total rounded to float once. */
void quant_f32_dot(int64_t n, float *s, const void *vx, const void *vy) {
    const float *x = vx;
    const float *y = vy;
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++) sum += (double)(x[i] * y[i]);
    *s = (float)sum;
}

void quant_f16_to_float(const void *src, float *dst, int64_t n) {
    const fp16_t *x = src;
    for (int64_t i = 0; i < n; i++) dst[i] = fp16_to_fp32(x[i]);
}

void quant_f16_from_float(const float *src, void *dst, int64_t n) {
    fp16_t *y = dst;
    for (int64_t i = 0; i < n; i++) y[i] = fp32_to_fp16(src[i]);
}

void quant_f16_dot(int64_t n, float *s, const void *vx, const void *vy) {
    const fp16_t *x = vx;
    const fp16_t *y = vy;
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++) sum += (double)(fp16_to_fp32(x[i]) * fp16_to_fp32(y[i]));
    *s = (float)sum;
}

/*
 * Row helpers of the element-wise kernels with SIMD variants (AVX2 + F16C,
 * chosen at run time; the scalar loops otherwise and under
 * LLAMAC_SIMD=scalar). Every variant gives the scalar helper's bits for
 * every input: these are b1892's F16 table lookups, whose results must not
 * move by an ulp (see cpu_convert.c).
 */
#ifndef LLAMAC_BACKEND_CPU_CPU_VEC_H
#define LLAMAC_BACKEND_CPU_CPU_VEC_H

#include <stdbool.h>
#include <stdint.h>

#include "core/fp16.h"

/* The F16 tables of cpu_convert.c hold CPU_TABLE_PAD entries past the 65536
 * (copies of nothing: zeros), so a 32-bit gather of the last entry stays inside. */
#define CPU_TABLE_PAD 2

/* y[i] = fp16_to_fp32(table[fp32_to_fp16(x[i])]) (x and y may be the same). */
void cpu_vec_table_f16(const fp16_t *table, const float *x, float *y, int64_t n);

/* Softmax exponentials as b1892 forms them, for a row w: max = the largest
 * w[i] (NaNs ignored, as `w > max ? w : max` from -inf does), then y[i] = 0 where w[i]
 * is -inf, else the exp table's value at w[i] - max; returns their sum in
 * double. (Those values are halves in [0, 1], multiples of 2^-24, so the
 * double sum is exact in any order for rows shorter than 2^29.) The scalar
 * definition is cpu_vec_soft_max_exp_scalar; cpu_vec_soft_max_row takes it
 * or its SIMD variant. */

/* b1892's soft_max of a row s: w = s * scale (+ m, when not NULL), each
 * product and sum rounded on its own; y = the exponentials of w (above), each
 * times the float of 1 / their sum, and with round_f16 rounded to F16 and
 * back (fp32_to_fp16: as an F16 product converts its activations). y may be
 * s. (A row with a NaN or an infinity normalizes by a NaN; which NaN comes
 * out is not specified.) */
void cpu_vec_soft_max_row(const fp16_t *exp_table, const float *s, const float *m, float scale, float *w, float *y,
                          int64_t n, bool round_f16);

/* Scalar definitions (the reference the SIMD variants are compared with in tests). */
void cpu_vec_table_f16_scalar(const fp16_t *table, const float *x, float *y, int64_t n);
double cpu_vec_soft_max_exp_scalar(const fp16_t *exp_table, const float *w, float *y, int64_t n);
void cpu_vec_soft_max_row_scalar(const fp16_t *exp_table, const float *s, const float *m, float scale, float *w,
                                 float *y, int64_t n, bool round_f16);
/* The SIMD variants, NULL where the CPU has none (tests call them directly). */
typedef void (*cpu_vec_table_f16_fn)(const fp16_t *table, const float *x, float *y, int64_t n);
typedef double (*cpu_vec_soft_max_exp_fn)(const fp16_t *exp_table, const float *w, float *y, int64_t n);
typedef void (*cpu_vec_soft_max_row_fn)(const fp16_t *exp_table, const float *s, const float *m, float scale, float *w,
                                        float *y, int64_t n, bool round_f16);
cpu_vec_table_f16_fn cpu_vec_table_f16_simd(void);
cpu_vec_soft_max_exp_fn cpu_vec_soft_max_exp_simd(void);
cpu_vec_soft_max_row_fn cpu_vec_soft_max_row_simd(void);

#endif

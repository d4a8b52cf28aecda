/*
 * Internal to src/quant/: the scalar row functions that type_traits.c
 * assembles into the trait table (block layouts: quant_blocks.h).
 *
 * Row functions take `n` elements, a multiple of the type's block size.
 */
#ifndef LLAMAC_QUANT_QUANT_IMPL_H
#define LLAMAC_QUANT_QUANT_IMPL_H

#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "core/fp16.h"
#include "ggml.h"
#include "quant_blocks.h"

/*
 * Rounding is part of the format contract here: the quantizers reproduce the
 * bytes of b1892's files. Those were made by an x86-64 build whose compiler
 * fused some multiply-adds into one rounding (GCC's FMA contraction, with the
 * AMD Zen tuning that keeps loop-carried sums unfused). The quantizers spell
 * each of those fusions out with fmaf(), so every build, with or without FMA
 * hardware, gives the same bytes; the compiler must fuse nothing else.
 */
#if defined(__clang__)
#pragma clang fp contract(off)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

/* Round to nearest, ties to even, for |f| < 2^22 (ggml's nearest_int: adding
 * 1.5*2^23 leaves the integer in the low mantissa bits). */
static inline int quant_int_of_biased(float biased) {
    int32_t bits;
    memcpy(&bits, &biased, sizeof bits);
    return (bits & 0x007fffff) - 0x00400000;
}
static inline int quant_nearest_int(float f) { return quant_int_of_biased(f + 12582912.f); }
/* nearest_int(a * b) with the product not rounded first (fused, as b1892's build). */
static inline int quant_nearest_int_fma(float a, float b) { return quant_int_of_biased(fmaf(a, b, 12582912.f)); }

/* The scale searches' inner loops call fmaf: on x86-64 each also has a clone
 * built for FMA, which the loader picks where the CPU has it (ifunc), so
 * that those are one instruction instead of a libm call. The bytes are the
 * same: fmaf rounds once either way. */
#if defined(__x86_64__) && defined(__has_attribute)
#if __has_attribute(target_clones)
#define QUANT_FMA_CLONES __attribute__((target_clones("fma", "default")))
#endif
#endif
#ifndef QUANT_FMA_CLONES
#define QUANT_FMA_CLONES
#endif

/* ---- SIMD variants by instruction set (quant_simd.h): quant_x86.c, quant_neon.c -- */
struct quant_kernels;
enum quant_isa;
bool quant_x86_isa_supported(enum quant_isa isa);
struct quant_kernels quant_x86_isa_kernels(enum quant_isa isa, enum ggml_type type);
bool quant_neon_isa_supported(void);
struct quant_kernels quant_neon_kernels(enum ggml_type type);

/* ---- F32, F16 (quant_float.c) ---------------------------------------------- */
void quant_f32_copy(const void *src, float *dst, int64_t n);
void quant_f32_from_float(const float *src, void *dst, int64_t n);
void quant_f32_dot(int64_t n, float *s, const void *x, const void *y);
void quant_f16_to_float(const void *src, float *dst, int64_t n);
void quant_f16_from_float(const float *src, void *dst, int64_t n);
void quant_f16_dot(int64_t n, float *s, const void *x, const void *y);
/* The F32/F16 dot products' accumulators: acc[j][l] collects the products of
 * elements 32i + 8j + l (fused); the finish reduces them in b1892's order and
 * adds the n % 32 leftovers as b1892 does. SIMD variants fill acc and call
 * these, so only the accumulation is theirs. */
#define QUANT_DOT_LANES 8
#define QUANT_DOT_STEP (4 * QUANT_DOT_LANES)
float quant_f32_dot_finish(const float acc[4][QUANT_DOT_LANES], const float *x, const float *y, int64_t n);
float quant_f16_dot_finish(const float acc[4][QUANT_DOT_LANES], const fp16_t *x, const fp16_t *y, int64_t n);

/* ---- 32-element blocks (quant_legacy.c) ------------------------------------ */
void quant_q4_0_quantize_ref(const float *x, void *y, int64_t n);
void quant_q4_1_quantize_ref(const float *x, void *y, int64_t n);
void quant_q5_0_quantize_ref(const float *x, void *y, int64_t n);
void quant_q5_1_quantize_ref(const float *x, void *y, int64_t n);
void quant_q8_0_quantize_ref(const float *x, void *y, int64_t n);
void quant_q8_1_quantize_ref(const float *x, void *y, int64_t n);
void quant_q8_0_quantize_act(const float *x, void *y, int64_t n);
void quant_q8_1_quantize_act(const float *x, void *y, int64_t n);

void quant_q4_0_dequantize(const void *x, float *y, int64_t n);
void quant_q4_1_dequantize(const void *x, float *y, int64_t n);
void quant_q5_0_dequantize(const void *x, float *y, int64_t n);
void quant_q5_1_dequantize(const void *x, float *y, int64_t n);
void quant_q8_0_dequantize(const void *x, float *y, int64_t n);
void quant_q8_1_dequantize(const void *x, float *y, int64_t n);

void quant_q4_0_dot_q8_0(int64_t n, float *s, const void *x, const void *y);
void quant_q4_1_dot_q8_1(int64_t n, float *s, const void *x, const void *y);
void quant_q5_0_dot_q8_0(int64_t n, float *s, const void *x, const void *y);
void quant_q5_1_dot_q8_1(int64_t n, float *s, const void *x, const void *y);
void quant_q8_0_dot_q8_0(int64_t n, float *s, const void *x, const void *y);

/* Adds the 16-bin histogram of the quants of `nblocks` quantized blocks
 * (what b1892's quantize tool prints for the 32-element types). */
void quant_legacy_histogram(enum ggml_type type, const void *blocks, int64_t nblocks, int64_t hist[16]);

/* ---- k-quants (quant_k.c) --------------------------------------------------- */
void quant_q2_K_quantize_ref(const float *x, void *y, int64_t n);
void quant_q3_K_quantize_ref(const float *x, void *y, int64_t n);
void quant_q4_K_quantize_ref(const float *x, void *y, int64_t n);
void quant_q5_K_quantize_ref(const float *x, void *y, int64_t n);
void quant_q6_K_quantize_ref(const float *x, void *y, int64_t n);
void quant_q8_K_quantize_ref(const float *x, void *y, int64_t n);

/* One row with an importance matrix `qw` (n weights, one per column). */
void quant_q2_K_quantize_imatrix(const float *x, void *y, int64_t n, const float *qw);
void quant_q3_K_quantize_imatrix(const float *x, void *y, int64_t n, const float *qw);
void quant_q4_K_quantize_imatrix(const float *x, void *y, int64_t n, const float *qw);
void quant_q5_K_quantize_imatrix(const float *x, void *y, int64_t n, const float *qw);
void quant_q6_K_quantize_imatrix(const float *x, void *y, int64_t n, const float *qw);

void quant_q2_K_dequantize(const void *x, float *y, int64_t n);
void quant_q3_K_dequantize(const void *x, float *y, int64_t n);
void quant_q4_K_dequantize(const void *x, float *y, int64_t n);
void quant_q5_K_dequantize(const void *x, float *y, int64_t n);
void quant_q6_K_dequantize(const void *x, float *y, int64_t n);
void quant_q8_K_dequantize(const void *x, float *y, int64_t n);

void quant_q2_K_dot_q8_K(int64_t n, float *s, const void *x, const void *y);
void quant_q3_K_dot_q8_K(int64_t n, float *s, const void *x, const void *y);
void quant_q4_K_dot_q8_K(int64_t n, float *s, const void *x, const void *y);
void quant_q5_K_dot_q8_K(int64_t n, float *s, const void *x, const void *y);
void quant_q6_K_dot_q8_K(int64_t n, float *s, const void *x, const void *y);

/* ---- IQ2 (quant_iq2.c, codebooks in iq2_tables.c) --------------------------- */
void quant_iq2_xxs_dequantize(const void *x, float *y, int64_t n);
void quant_iq2_xs_dequantize(const void *x, float *y, int64_t n);
void quant_iq2_xxs_dot_q8_K(int64_t n, float *s, const void *x, const void *y);
void quant_iq2_xs_dot_q8_K(int64_t n, float *s, const void *x, const void *y);
/* One row with an importance matrix (required). False (error_set) when the
 * search tables could not be built (out of memory). */
bool quant_iq2_xxs_quantize_imatrix(const float *x, void *y, int64_t n, const float *qw);
bool quant_iq2_xs_quantize_imatrix(const float *x, void *y, int64_t n, const float *qw);

#endif

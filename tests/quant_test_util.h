/*
 * Shared by the kernel tests: quantized rows of random bytes whose scale
 * fields are finite (every quant value of the format occurs, e.g. -128 in
 * Q8_0, which quantizing floats never produces).
 */
#ifndef LLAMAC_TESTS_QUANT_TEST_UTIL_H
#define LLAMAC_TESTS_QUANT_TEST_UTIL_H

#include <math.h>

#include "core/fp16.h"
#include "quant/quant.h"
#include "test_util.h"

/* A random finite half in [2^-14, 2^3) with a random sign. */
static inline fp16_t quant_test_rand_scale(uint64_t *rng) {
    return fp32_to_fp16(test_rand_uniform(rng, -1.0f, 1.0f) * exp2f(test_rand_uniform(rng, -14.0f, 3.0f)));
}

/* Overwrites the scale fields of random-byte blocks with finite values (the
 * bytes elsewhere stay random: every quant value of the format occurs). */
static inline void quant_test_fix_scales(enum ggml_type type, uint8_t *row, int64_t n, uint64_t *rng) {
    const struct type_traits *tt = type_traits_scalar_get(type);
    const int64_t nb = n / tt->blck_size;
    for (int64_t i = 0; i < nb; i++) {
        uint8_t *b = row + i * tt->type_size;
        fp16_t h[2] = { quant_test_rand_scale(rng), quant_test_rand_scale(rng) };
        switch (type) {
            case GGML_TYPE_Q4_0: case GGML_TYPE_Q5_0: case GGML_TYPE_Q8_0: case GGML_TYPE_IQ2_XXS: case GGML_TYPE_IQ2_XS:
                memcpy(b, h, 2);
                break;
            case GGML_TYPE_Q4_1: case GGML_TYPE_Q5_1: case GGML_TYPE_Q4_K: case GGML_TYPE_Q5_K:
                memcpy(b, h, 4);
                break;
            case GGML_TYPE_Q2_K:
                memcpy(b + 80, h, 4);
                break;
            case GGML_TYPE_Q3_K:
                memcpy(b + 108, h, 2);
                break;
            case GGML_TYPE_Q6_K:
                memcpy(b + 208, h, 2);
                break;
            default:
                break;
        }
    }
}

#endif

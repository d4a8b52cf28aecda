/*
 * Tensor element types: the per-type trait table.
 *
 * Every element type of the GGUF/ggml numbering has an entry: how many
 * elements a block holds, how many bytes a block takes, and the numeric
 * functions on rows of blocks. The scalar C functions are the definition;
 * faster variants (chosen at run time from cpu_features) must agree with them.
 *
 * Row functions take `n` elements, a multiple of blck_size.
 */
#ifndef LLAMAC_QUANT_QUANT_H
#define LLAMAC_QUANT_QUANT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ggml.h"

typedef void (*type_to_float_fn)(const void *src, float *dst, int64_t n);
typedef void (*type_from_float_fn)(const float *src, void *dst, int64_t n);
/* *s = dot(x, y) over n elements; x is a row of this type, y a row of vec_dot_type. */
typedef void (*type_vec_dot_fn)(int64_t n, float *s, const void *x, const void *y);

struct type_traits {
    const char *name;                 /* "q4_0", as ggml names it */
    int64_t blck_size;                /* elements per block */
    size_t type_size;                 /* bytes per block */
    bool is_quantized;
    type_to_float_fn to_float;        /* dequantize (NULL for integer types) */
    type_from_float_fn from_float;    /* quantize activations (may be SIMD) */
    type_from_float_fn from_float_reference; /* quantize, scalar: the definition */
    type_vec_dot_fn vec_dot;          /* NULL where the type is never a matmul weight */
    enum ggml_type vec_dot_type;      /* type the other operand of vec_dot is converted to */
};

/* NULL when `type` is not a valid element type (out of range, or a removed number). */
const struct type_traits *type_traits_get(enum ggml_type type);
bool type_is_valid(int type);
const char *type_name(enum ggml_type type);   /* "?" for invalid types */

/* Bytes of a row of `ne0` elements; false if ne0 is not a multiple of the
 * block size or the result overflows. */
bool type_row_size(enum ggml_type type, int64_t ne0, size_t *out);

#endif

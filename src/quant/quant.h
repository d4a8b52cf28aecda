/*
 * Tensor element types: the per-type trait table, and quantization of whole
 * tensors.
 *
 * Every element type of the GGUF/ggml numbering has an entry: how many
 * elements a block holds, how many bytes a block takes, and the numeric
 * functions on rows of blocks. The block layouts are ggml b1892's, byte for
 * byte. The scalar C functions are the definition (type_traits_scalar_get);
 * the table the engine uses (type_traits_get) starts as a copy of them and is
 * where faster variants chosen at run time from cpu_features replace entries,
 * so they must agree with the scalar ones.
 *
 * Row functions take `n` elements, a multiple of blck_size, and buffers that
 * hold whole blocks (rows of a GGUF tensor or of a tensor buffer).
 *
 * Matrix products take a weight row of type T and an activation row first
 * converted with traits(T)->vec_dot_type's from_float, as b1892 pairs them:
 * F32.F32, F16.F16, Q4_0/Q5_0/Q8_0 . Q8_0, Q4_1/Q5_1 . Q8_1, and the
 * k-quants and IQ2 types . Q8_K.
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
    /* Quantize activations (the vec_dot_type side of a matrix product). For
     * Q8_0 and Q8_1 this is what b1892 does on x86 (multiplier 127/amax,
     * ties to even), which differs from the reference in rare last-bit cases;
     * elsewhere it equals from_float_reference. NULL for IQ2 (those need an
     * importance matrix: use quant_quantize_chunk) and integer types. */
    type_from_float_fn from_float;
    /* Quantize, byte-identical with b1892's quantize_row_*_reference. */
    type_from_float_fn from_float_reference;
    type_vec_dot_fn vec_dot;          /* NULL where the type is never a matmul weight */
    enum ggml_type vec_dot_type;      /* type the other operand of vec_dot is converted to */
};

/* The table the engine runs with. NULL when `type` is not a valid element
 * type (out of range, or a removed number). Thread-safe. */
const struct type_traits *type_traits_get(enum ggml_type type);
/* The scalar reference table (the definition); tests compare against it. */
const struct type_traits *type_traits_scalar_get(enum ggml_type type);
bool type_is_valid(int type);
const char *type_name(enum ggml_type type);   /* "?" for invalid types */

/* Bytes of a row of `ne0` elements; false if ne0 is not a multiple of the
 * block size or the result overflows. */
bool type_row_size(enum ggml_type type, int64_t ne0, size_t *out);

/* Types that quant_quantize_chunk refuses without an importance matrix
 * (IQ2_XXS, IQ2_XS, as b1892's quantize does). */
bool quant_requires_imatrix(enum ggml_type type);

/*
 * Quantizes rows of a tensor, as b1892's ggml_quantize_chunk: `src` and `dst`
 * are the whole tensor (F32 source, destination of `type`); the chunk is the
 * `nrows` rows of `n_per_row` elements starting at element `start` (a
 * multiple of n_per_row). Returns the bytes written at dst + row size * start
 * row, or 0 with error_set() (type that cannot be a quantization target,
 * misaligned sizes, missing importance matrix, out of memory).
 *
 * imatrix: NULL, or n_per_row importance weights (one per column, b1892's
 * imatrix file entry divided by its call count). With it the k-quants use
 * b1892's importance-weighted quantizers, without it their reference ones;
 * the 32-element types ignore it (b1892 does too).
 * hist: NULL, or 16 counters to which the 32-element types add the histogram
 * of their quants (b1892's quantize tool prints it); others leave it.
 * Chunks can be quantized concurrently from several threads.
 */
size_t quant_quantize_chunk(enum ggml_type type, const float *src, void *dst, int64_t start,
                            int64_t nrows, int64_t n_per_row, int64_t *hist, const float *imatrix);

#endif

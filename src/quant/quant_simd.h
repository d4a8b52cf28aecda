/*
 * The SIMD variants of the trait table's row functions, by instruction set.
 *
 * Each variant computes exactly what the scalar definition computes (same
 * floats, bit for bit): the integer parts of the quantized dot products are
 * exact in any order, and every float operation (the per-block fused
 * multiply-add of each of the 8 lanes, the reductions) is done in the scalar
 * order. type_traits.c installs the best set the CPU has; tests call every
 * set the CPU has and compare it with the scalar table.
 *
 * Preconditions the scalar code does not have: the activation operand of a
 * quantized dot product (the vec_dot_type row) has quants in [-127, 127],
 * which every from_float produces (weights may hold any bytes).
 * The activation quantizers (from_float) equal the scalar ones for all inputs.
 */
#ifndef LLAMAC_QUANT_QUANT_SIMD_H
#define LLAMAC_QUANT_QUANT_SIMD_H

#include <stdbool.h>

#include "quant.h"

enum quant_isa {
    QUANT_ISA_SCALAR,
    QUANT_ISA_AVX2,         /* x86-64: AVX2, FMA, F16C */
    QUANT_ISA_AVX_VNNI,     /* ... and AVX-VNNI (VEX vpdpbusd) */
    QUANT_ISA_AVX512_VNNI,  /* ... and AVX512F/BW/VL/VNNI (EVEX vpdpbusd on 256 bits) */
    QUANT_ISA_NEON,         /* aarch64: NEON (compiled only there) */
    QUANT_ISA_COUNT
};

/* The functions a set replaces; NULL where it has no variant (the scalar one is used). */
struct quant_kernels {
    type_vec_dot_fn vec_dot;
    type_from_float_fn from_float;
    type_to_float_fn to_float;
};

const char *quant_isa_name(enum quant_isa isa);
/* Whether this CPU runs the set (none but scalar under LLAMAC_SIMD=scalar). */
bool quant_isa_supported(enum quant_isa isa);
/* The set's variants for `type` (all NULL for QUANT_ISA_SCALAR, an unknown type,
 * or a set not compiled into this build). */
struct quant_kernels quant_isa_kernels(enum quant_isa isa, enum ggml_type type);
/* The set type_traits_get() uses: the best supported one, or scalar under LLAMAC_SIMD=scalar. */
enum quant_isa quant_isa_active(void);

#endif

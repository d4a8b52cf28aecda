/*
 * Internal to cpu_packed*.c: the packed layouts and the micro-kernel table.
 *
 * Packed weights: rows in groups of PK_ROWS = 4 (the last group padded with
 * zero rows), group g at data + g * group_bytes. Within a group, per block
 * of the type, the 4 rows side by side so that a 512-bit register holds the
 * same 16 elements of the 4 rows:
 *
 *   Q4_0  scales: nb x 4 halves (d of rows 0..3), padded to 64 bytes; then
 *         per block 64 bytes: row r's 16 quant bytes at 16 r (low nibble:
 *         element j, high nibble: element 16 + j, as in the file).
 *   Q8_0  scales as Q4_0; then per block 128 bytes: elements 0..15 of rows
 *         0..3, then elements 16..31 of rows 0..3, each quant + 128 (so the
 *         unsigned operand of vpdpbusd; the activations' sums correct it).
 *
 * Dword lane 4 r + k of such a register then holds elements 4k..4k+3 (or
 * 16 + 4k..) of row r: b1892's lane k (or 4 + k) of row r.
 *
 * Activations for Q4_0/Q8_0 (PK_ACT_Q8), per column: nb records of 64 bytes
 * {int8 qs[32]; int32 corr[8]} (corr[k] = -bias * sum of qs[4k..4k+3], bias 8
 * for Q4_0, 128 for Q8_0: the integer lanes start from it), then nb floats
 * d, padded to 64 bytes. For F16 weights (PK_ACT_F32): the column rounded
 * through F16 (what the reference dot product reads), as floats.
 */
#ifndef LLAMAC_BACKEND_CPU_CPU_PACKED_IMPL_H
#define LLAMAC_BACKEND_CPU_CPU_PACKED_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ggml.h"

#define PK_ROWS 4
#define PK_MAX_COLS 8      /* columns per micro-kernel call */
#define PK_F16_ROWS 2      /* F16 tiles: rows x columns per call */
#define PK_F16_COLS 6

static inline size_t pk_pad64(size_t n) { return (n + 63) & ~(size_t)63; }

/* One call of a quantized micro-kernel: a group's rows x ncols columns. */
struct pk_tile {
    const uint8_t *w;          /* the packed group */
    int64_t nb;                /* blocks per row */
    const uint8_t *act;        /* first column, activation layout */
    size_t act_stride;         /* bytes per column */
    int ncols;                 /* 1..PK_MAX_COLS */
    int nrows;                 /* 1..PK_ROWS rows of the group to store */
    float *dst;                /* output of the group's first row, first column */
    size_t dst_stride;         /* floats per column of dst */
};

/* One call of the F16 micro-kernel: nrows x ncols outputs over k elements (32 | k). */
struct pk_tile_f16 {
    const void *w;             /* first row: halves (w_f16) or floats */
    size_t w_stride;           /* elements per row */
    bool w_f16;
    int nrows;                 /* 1..PK_F16_ROWS */
    const float *act;          /* first column */
    size_t act_stride;         /* floats per column */
    int ncols;                 /* 1..PK_F16_COLS */
    int64_t k;
    float *dst;
    size_t dst_stride;         /* floats per column of dst */
};

typedef void (*pk_tile_fn)(const struct pk_tile *t);
typedef void (*pk_tile_f16_fn)(const struct pk_tile_f16 *t);

struct pk_kernels {
    pk_tile_fn q4_0, q8_0;
    pk_tile_f16_fn f16;
};

/* The micro-kernels this CPU runs, or NULL (cpu_packed_x86.c). */
const struct pk_kernels *pk_kernels_x86(void);

#endif

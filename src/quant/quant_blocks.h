/*
 * The block layouts of the quantized types: byte for byte ggml b1892's
 * block_* structs, the on-disk contract of GGUF tensor data (little-endian;
 * halves stored as IEEE binary16 bits; sizes checked at compile time).
 * Besides src/quant/, the CPU backend's packed weights read them.
 */
#ifndef LLAMAC_QUANT_QUANT_BLOCKS_H
#define LLAMAC_QUANT_QUANT_BLOCKS_H

#include <stdint.h>
#include <string.h>

#include "core/fp16.h"

#define QK4_0 32
#define QK4_1 32
#define QK5_0 32
#define QK5_1 32
#define QK8_0 32
#define QK8_1 32
#define QK_K 256
#define K_SCALE_SIZE 12

typedef struct { fp16_t d; uint8_t qs[QK4_0 / 2]; } block_q4_0;
typedef struct { fp16_t d; fp16_t m; uint8_t qs[QK4_1 / 2]; } block_q4_1;
typedef struct { fp16_t d; uint8_t qh[4]; uint8_t qs[QK5_0 / 2]; } block_q5_0;
typedef struct { fp16_t d; fp16_t m; uint8_t qh[4]; uint8_t qs[QK5_1 / 2]; } block_q5_1;
typedef struct { fp16_t d; int8_t qs[QK8_0]; } block_q8_0;
typedef struct { float d; float s; int8_t qs[QK8_1]; } block_q8_1;   /* s = d * sum(qs) */

/* Super-blocks of 256. */
typedef struct {
    uint8_t scales[QK_K / 16];  /* low nibble scale, high nibble min, per 16 */
    uint8_t qs[QK_K / 4];       /* 2-bit quants */
    fp16_t d;                   /* scale of the scales */
    fp16_t dmin;                /* scale of the mins */
} block_q2_K;
typedef struct {
    uint8_t hmask[QK_K / 8];    /* high bit of each quant */
    uint8_t qs[QK_K / 4];       /* low 2 bits */
    uint8_t scales[12];         /* 16 six-bit scales */
    fp16_t d;
} block_q3_K;
typedef struct {
    fp16_t d;
    fp16_t dmin;
    uint8_t scales[K_SCALE_SIZE]; /* 8 six-bit scales and 8 six-bit mins */
    uint8_t qs[QK_K / 2];
} block_q4_K;
typedef struct {
    fp16_t d;
    fp16_t dmin;
    uint8_t scales[K_SCALE_SIZE];
    uint8_t qh[QK_K / 8];       /* fifth bit */
    uint8_t qs[QK_K / 2];       /* low 4 bits */
} block_q5_K;
typedef struct {
    uint8_t ql[QK_K / 2];       /* low 4 bits */
    uint8_t qh[QK_K / 4];       /* high 2 bits */
    int8_t scales[QK_K / 16];   /* 8-bit scales per 16 */
    fp16_t d;
} block_q6_K;
typedef struct {
    float d;
    int8_t qs[QK_K];
    int16_t bsums[QK_K / 16];   /* sum of each 16 quants */
} block_q8_K;
typedef struct {
    fp16_t d;
    uint16_t qs[QK_K / 8];      /* per 32: 4 grid bytes, then 4x7 sign bits + 4-bit scale */
} block_iq2_xxs;
typedef struct {
    fp16_t d;
    uint16_t qs[QK_K / 8];      /* 9-bit grid index + 7 sign bits per 8 values */
    uint8_t scales[QK_K / 32];  /* two 4-bit scales per 32 */
} block_iq2_xs;

_Static_assert(sizeof(block_q4_0) == 18, "block_q4_0 layout");
_Static_assert(sizeof(block_q4_1) == 20, "block_q4_1 layout");
_Static_assert(sizeof(block_q5_0) == 22, "block_q5_0 layout");
_Static_assert(sizeof(block_q5_1) == 24, "block_q5_1 layout");
_Static_assert(sizeof(block_q8_0) == 34, "block_q8_0 layout");
_Static_assert(sizeof(block_q8_1) == 40, "block_q8_1 layout");
_Static_assert(sizeof(block_q2_K) == 84, "block_q2_K layout");
_Static_assert(sizeof(block_q3_K) == 110, "block_q3_K layout");
_Static_assert(sizeof(block_q4_K) == 144, "block_q4_K layout");
_Static_assert(sizeof(block_q5_K) == 176, "block_q5_K layout");
_Static_assert(sizeof(block_q6_K) == 210, "block_q6_K layout");
_Static_assert(sizeof(block_q8_K) == 292, "block_q8_K layout");
_Static_assert(sizeof(block_iq2_xxs) == 66, "block_iq2_xxs layout");
_Static_assert(sizeof(block_iq2_xs) == 74, "block_iq2_xs layout");

/* The 8 six-bit scales and 8 six-bit mins of a Q4_K/Q5_K block from its 12
 * packed bytes (as get_scale_min_k4 reads them one at a time). */
static inline void quant_k4_scales_mins(const uint8_t *q, uint8_t sc[8], uint8_t mn[8]) {
    uint32_t u0, u1, u2;
    memcpy(&u0, q, 4);
    memcpy(&u1, q + 4, 4);
    memcpy(&u2, q + 8, 4);
    const uint32_t s_lo = u0 & 0x3f3f3f3fu, m_lo = u1 & 0x3f3f3f3fu;
    const uint32_t s_hi = (u2 & 0x0f0f0f0fu) | ((u0 >> 2) & 0x30303030u);
    const uint32_t m_hi = ((u2 >> 4) & 0x0f0f0f0fu) | ((u1 >> 2) & 0x30303030u);
    memcpy(sc, &s_lo, 4);
    memcpy(sc + 4, &s_hi, 4);
    memcpy(mn, &m_lo, 4);
    memcpy(mn + 4, &m_hi, 4);
}

/* The 256 quants of a Q6_K block minus 32 (-32..31), in element order: per
 * 128 elements, ql[l] (l < 64) holds the low 4 bits of element l (low
 * nibble) and l + 64 (high nibble), qh[l] (l < 32) in bits 2 k..2 k + 1 the
 * high 2 bits of element l + 32 k. */
static inline void quant_q6_K_quants(const block_q6_K *x, int8_t *a) {
    const uint8_t *ql = x->ql, *qh = x->qh;
    for (int n = 0; n < QK_K; n += 128, a += 128, ql += 64, qh += 32) {
        for (int l = 0; l < 32; l++) {
            a[l + 0] = (int8_t)(((ql[l + 0] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32);
            a[l + 32] = (int8_t)(((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32);
            a[l + 64] = (int8_t)(((ql[l + 0] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32);
            a[l + 96] = (int8_t)(((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32);
        }
    }
}

/* The 16 six-bit scales of a Q3_K block (0..63, bias 32 not removed): low 4
 * bits from the first 8 bytes (scales 8..15 in the high nibbles), high 2 bits
 * from the last 4 (scale j: byte 8 + j % 4, bits 2 (j / 4)). */
static inline void quant_q3_K_scales(const uint8_t *in, int8_t out[16]) {
    uint32_t a0, a1, a2;
    memcpy(&a0, in, 4);
    memcpy(&a1, in + 4, 4);
    memcpy(&a2, in + 8, 4);
    const uint32_t w[4] = {
        (a0 & 0x0f0f0f0fu) | ((a2 & 0x03030303u) << 4),
        (a1 & 0x0f0f0f0fu) | (((a2 >> 2) & 0x03030303u) << 4),
        ((a0 >> 4) & 0x0f0f0f0fu) | (((a2 >> 4) & 0x03030303u) << 4),
        ((a1 >> 4) & 0x0f0f0f0fu) | (((a2 >> 6) & 0x03030303u) << 4),
    };
    memcpy(out, w, 16);
}

#endif

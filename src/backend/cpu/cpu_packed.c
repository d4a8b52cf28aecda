/*
 * Packed weights and the fast matrix products (cpu_packed.h): packing,
 * activation layouts, work split. The micro-kernels are per instruction set
 * (cpu_packed_x86.c); layouts are described in cpu_packed_impl.h.
 */
#define _GNU_SOURCE /* MAP_ANONYMOUS, MADV_HUGEPAGE */
#include "backend/cpu/cpu_packed.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/cpu_packed_impl.h"
#include "core/cpu_features.h"
#include "core/fp16.h"
#include "core/log.h"
#include "quant/quant.h"
#include "quant/quant_blocks.h"

/* Smallest chunk of a matrix-vector product's tails (bytes of weights; pk_vec_next). */
#define PK_VEC_MIN_CHUNK_BYTES (16 << 10)

struct cpu_packed_weight {
    const void *src;     /* w->data when packed */
    uint8_t *data;       /* `size` bytes */
    size_t size;
    bool owned;          /* data is this copy's own arena (else the caller's memory) */
};

_Static_assert(CPU_CHUNK_ROW_ALIGN % PK_ROWS == 0 && CPU_CHUNK_ROW_ALIGN % PK_FAST_ROWS == 0,
               "row chunks cut at group boundaries");

/* The kernels and the mode, fixed at the first use (weights are packed for one mode). */
static const struct pk_kernels *g_kernels;
static bool g_fast;
static pthread_once_t g_kernels_once = PTHREAD_ONCE_INIT;

static void pk_kernels_init(void) {
    const struct cpu_features *f = cpu_features_get();
    g_kernels = f->force_scalar ? NULL : pk_kernels_x86(f->fast_matmul);
    g_fast = g_kernels && g_kernels->fast && f->fast_matmul;
}

static const struct pk_kernels *pk_kernels(void) {
    pthread_once(&g_kernels_once, pk_kernels_init);
    return g_kernels;
}

bool cpu_fast_matmul_active(void) {
    pk_kernels();
    return g_fast;
}

bool cpu_fast_mode_type(enum ggml_type type) {
    if (!cpu_fast_matmul_active()) return false;
    return type == GGML_TYPE_Q4_0 || type == GGML_TYPE_Q8_0 || type == GGML_TYPE_Q4_K || type == GGML_TYPE_Q6_K;
}

bool cpu_fast_matmul_amx(void) {
    const struct pk_kernels *k = pk_kernels();
    return g_fast && k->q4_0_amx;
}

/* Q4_K: per super-block the scaled sub-block sums and the mins' sum, exact. */
static float pk_fast_dot_q4_K(int64_t k, const block_q4_K *x, const block_q8_K *y) {
    float acc = 0.0f;
    for (int64_t i = 0; i < k / 256; i++) {
        uint8_t sc[8], mn[8];
        quant_k4_scales_mins(x[i].scales, sc, mn);
        int32_t isum = 0, imin = 0;
        for (int j = 0; j < 8; j++) {
            const uint8_t *q = x[i].qs + 32 * (j / 2);
            int32_t s = 0;
            for (int e = 0; e < 32; e++) s += (j % 2 ? q[e] >> 4 : q[e] & 0x0F) * y[i].qs[32 * j + e];
            isum += sc[j] * s;
            imin += mn[j] * (y[i].bsums[2 * j] + y[i].bsums[2 * j + 1]);
        }
        acc = fmaf(fp16_to_fp32(x[i].d) * y[i].d, (float)isum, acc);
        acc = fmaf(-(fp16_to_fp32(x[i].dmin) * y[i].d), (float)imin, acc);
    }
    return acc;
}

/* Q6_K: per super-block the sub-blocks' exact sums of (q - 32) q_a times their scales. */
static float pk_fast_dot_q6_K(int64_t k, const block_q6_K *x, const block_q8_K *y) {
    float acc = 0.0f;
    for (int64_t i = 0; i < k / 256; i++) {
        int8_t q[256];
        quant_q6_K_quants(&x[i], q);
        int32_t isum = 0;
        for (int j = 0; j < 16; j++) {
            int32_t s = 0;
            for (int e = 16 * j; e < 16 * j + 16; e++) s += q[e] * y[i].qs[e];
            isum += x[i].scales[j] * s;
        }
        acc = fmaf(fp16_to_fp32(x[i].d) * y[i].d, (float)isum, acc);
    }
    return acc;
}

float cpu_fast_mode_dot(enum ggml_type type, int64_t k, const void *row, const void *col) {
    if (type == GGML_TYPE_Q4_K) return pk_fast_dot_q4_K(k, row, col);
    if (type == GGML_TYPE_Q6_K) return pk_fast_dot_q6_K(k, row, col);
    const block_q8_0 *y = col;
    float acc = 0.0f;
    for (int64_t i = 0; i < k / 32; i++) {
        int32_t isum = 0;
        fp16_t dw;
        if (type == GGML_TYPE_Q4_0) {
            const block_q4_0 *b = (const block_q4_0 *)row + i;
            for (int j = 0; j < 16; j++) {
                isum += ((b->qs[j] & 0x0F) - 8) * y[i].qs[j] + ((b->qs[j] >> 4) - 8) * y[i].qs[16 + j];
            }
            dw = b->d;
        } else {
            const block_q8_0 *b = (const block_q8_0 *)row + i;
            for (int j = 0; j < 32; j++) isum += b->qs[j] * y[i].qs[j];
            dw = b->d;
        }
        acc = fmaf(fp16_to_fp32(dw) * fp16_to_fp32(y[i].d), (float)isum, acc);
    }
    return acc;
}

/* ---- packed types --------------------------------------------------------------------------- */

enum pk_act { PK_ACT_Q8, PK_ACT_Q8X, PK_ACT_Q8F, PK_ACT_AMX, PK_ACT_AMX_K, PK_ACT_Q8K, PK_ACT_Q8KX, PK_ACT_Q8K6F, PK_ACT_IQ2, PK_ACT_F32 };

typedef void (*pk_pack_fn)(const void *block, int r, uint8_t *hdr, uint8_t *q);

struct pk_type {
    int rows;              /* rows per group */
    int blck;              /* elements per block */
    size_t hdr_bytes;      /* per block of a group */
    size_t q_bytes;
    enum pk_act act;
    int max_cols;          /* the kernel's column tile */
    pk_pack_fn pack;       /* row r's block into the group's block */
    int bias;              /* what the packed quants carry over the file's (unsigned: Q4_0 8, Q5_0 16,
                            * Q8_0 128), which the activations' corrections take back out */
};

/* A Q5 block's fifth bits: elements 0..15 of row r at 2 r, 16..31 at 8 + 2 r. */
static void pk_pack_fifth_bits(const uint8_t qh[4], int r, uint8_t *bits) {
    memcpy(bits + 2 * r, qh, 2);
    memcpy(bits + 8 + 2 * r, qh + 2, 2);
}

static void pk_pack_q5_0(const void *block, int r, uint8_t *hdr, uint8_t *q) {
    const block_q5_0 *b = block;
    memcpy(hdr + 2 * r, &b->d, 2);
    pk_pack_fifth_bits(b->qh, r, hdr + 8);
    memcpy(q + 16 * r, b->qs, 16);
}

static void pk_pack_q4_1(const void *block, int r, uint8_t *hdr, uint8_t *q) {
    const block_q4_1 *b = block;
    memcpy(hdr + 2 * r, &b->d, 2);
    memcpy(hdr + 8 + 2 * r, &b->m, 2);
    memcpy(q + 16 * r, b->qs, 16);
}

static void pk_pack_q5_1(const void *block, int r, uint8_t *hdr, uint8_t *q) {
    const block_q5_1 *b = block;
    memcpy(hdr + 2 * r, &b->d, 2);
    memcpy(hdr + 8 + 2 * r, &b->m, 2);
    pk_pack_fifth_bits(b->qh, r, hdr + 16);
    memcpy(q + 16 * r, b->qs, 16);
}

/* Q4_0 in groups of 4 rows (AVX2): the file's nibbles. */
static void pk_pack_q4_0(const void *block, int r, uint8_t *hdr, uint8_t *q) {
    const block_q4_0 *b = block;
    memcpy(hdr + 2 * r, &b->d, 2);
    memcpy(q + 16 * r, b->qs, 16);
}

/* Q8_0 for AVX2: signed, as in the file. */
static void pk_pack_q8_0_signed(const void *block, int r, uint8_t *hdr, uint8_t *q) {
    const block_q8_0 *b = block;
    memcpy(hdr + 2 * r, &b->d, 2);
    memcpy(q + 16 * r, b->qs, 16);
    memcpy(q + 64 + 16 * r, b->qs + 16, 16);
}

/* Q4_0 in groups of 16 rows (both modes). */
static void pk_pack_q4_0_16(const void *block, int r, uint8_t *hdr, uint8_t *q) {
    const block_q4_0 *b = block;
    memcpy(hdr + 2 * r, &b->d, 2);
    for (int j = 0; j < 4; j++) memcpy(q + 64 * j + 4 * r, b->qs + 4 * j, 4);
}

/* Q8_0 in groups of 16 rows (both modes), each quant + 128. */
static void pk_pack_q8_0_16(const void *block, int r, uint8_t *hdr, uint8_t *q) {
    const block_q8_0 *b = block;
    memcpy(hdr + 2 * r, &b->d, 2);
    for (int s = 0; s < 8; s++) {
        for (int e = 0; e < 4; e++) q[64 * s + 4 * r + e] = (uint8_t)(b->qs[4 * s + e] + 128);
    }
}

static void pk_pack_q4_K_fast(const void *block, int r, uint8_t *hdr, uint8_t *q) {
    const block_q4_K *b = block;
    uint8_t sc[8], mn[8];
    quant_k4_scales_mins(b->scales, sc, mn);
    memcpy(hdr + 2 * r, &b->d, 2);
    memcpy(hdr + 32 + 2 * r, &b->dmin, 2);
    for (int j = 0; j < 8; j++) hdr[64 + 16 * j + r] = sc[j];
    for (int p = 0; p < 4; p++) {
        hdr[192 + 32 * p + 2 * r] = mn[2 * p];
        hdr[192 + 32 * p + 2 * r + 1] = mn[2 * p + 1];
    }
    for (int s = 0; s < 32; s++) memcpy(q + 64 * s + 4 * r, b->qs + 4 * s, 4);
}

/* Q4_K's header and nibbles (Q5_K's are the same) of row r. */
static void pk_pack_k4(const fp16_t *d, const fp16_t *dmin, const uint8_t *scales, const uint8_t *qs, int r,
                       uint8_t *hdr, uint8_t *q) {
    uint8_t sc[8], mn[8];
    quant_k4_scales_mins(scales, sc, mn);
    memcpy(hdr + 2 * r, d, 2);
    memcpy(hdr + 8 + 2 * r, dmin, 2);
    for (int c = 0; c < 8; c++) hdr[16 + 4 * c + r] = sc[c];
    memcpy(hdr + 48 + 8 * r, mn, 8);
    for (int j = 0; j < 4; j++) {
        for (int h = 0; h < 2; h++) memcpy(q + 64 * (2 * j + h) + 16 * r, qs + 32 * j + 16 * h, 16);
    }
}

static void pk_pack_q4_K(const void *block, int r, uint8_t *hdr, uint8_t *q) {
    const block_q4_K *b = block;
    pk_pack_k4(&b->d, &b->dmin, b->scales, b->qs, r, hdr, q);
}

static void pk_pack_q5_K(const void *block, int r, uint8_t *hdr, uint8_t *q) {
    const block_q5_K *b = block;
    pk_pack_k4(&b->d, &b->dmin, b->scales, b->qs, r, hdr, q);
    for (int h = 0; h < 2; h++) memcpy(q + 512 + 64 * h + 16 * r, b->qh + 16 * h, 16);
}

static void pk_pack_q2_K(const void *block, int r, uint8_t *hdr, uint8_t *q) {
    const block_q2_K *b = block;
    memcpy(hdr + 2 * r, &b->d, 2);
    for (int j = 0; j < 16; j++) hdr[8 + 4 * j + r] = b->scales[j];
    memcpy(hdr + 72 + 2 * r, &b->dmin, 2);
    for (int n = 0; n < 2; n++) {
        for (int h = 0; h < 2; h++) memcpy(q + 64 * (2 * n + h) + 16 * r, b->qs + 32 * n + 16 * h, 16);
    }
}

/* Q6_K's header (d, the scales less their bias 32 as int8), the file's
 * 2-bit quants and high bits in 64-byte row slices. */
static void pk_pack_q3_K(const void *block, int r, uint8_t *hdr, uint8_t *q) {
    const block_q3_K *b = block;
    int8_t sc[16];
    quant_q3_K_scales(b->scales, sc);
    memcpy(hdr + 2 * r, &b->d, 2);
    for (int j = 0; j < 16; j++) hdr[8 + 4 * j + r] = (uint8_t)(sc[j] - 32);
    for (int n = 0; n < 2; n++) {
        for (int h = 0; h < 2; h++) memcpy(q + 64 * (2 * n + h) + 16 * r, b->qs + 32 * n + 16 * h, 16);
    }
    for (int h = 0; h < 2; h++) memcpy(q + 256 + 64 * h + 16 * r, b->hmask + 16 * h, 16);
}

static void pk_pack_q6_K(const void *block, int r, uint8_t *hdr, uint8_t *q) {
    const block_q6_K *b = block;
    memcpy(hdr + 2 * r, &b->d, 2);
    for (int j = 0; j < 16; j++) hdr[8 + 4 * j + r] = (uint8_t)b->scales[j];
    for (int n = 0; n < 2; n++) {
        for (int h = 0; h < 2; h++) {
            uint8_t *z = q + 192 * (2 * n + h) + 16 * r;
            memcpy(z, b->ql + 64 * n + 16 * h, 16);
            memcpy(z + 64, b->ql + 64 * n + 32 + 16 * h, 16);
            memcpy(z + 128, b->qh + 32 * n + 16 * h, 16);
        }
    }
}

static void pk_pack_q6_K_fast(const void *block, int r, uint8_t *hdr, uint8_t *q) {
    const block_q6_K *b = block;
    int8_t v[256];
    quant_q6_K_quants(b, v);
    uint8_t u[256]; /* the quants 0..63 */
    for (int e = 0; e < 256; e++) u[e] = (uint8_t)(v[e] + 32);
    memcpy(hdr + 2 * r, &b->d, 2);
    for (int j = 0; j < 16; j++) hdr[32 + 16 * j + r] = (uint8_t)b->scales[j];
    for (int j = 0; j < 16; j++) {
        const uint8_t *uj = u + 16 * j;
        uint8_t *z = q + 192 * j + 4 * r;
        for (int e = 0; e < 4; e++) {
            for (int h = 0; h < 2; h++) z[64 * h + e] = (uint8_t)((uj[8 * h + e] & 0x0F) | (uj[8 * h + 4 + e] & 0x0F) << 4);
            uint8_t hi = 0;
            for (int k = 0; k < 4; k++) hi |= (uint8_t)((uj[4 * k + e] >> 4) << (2 * k));
            z[128 + e] = hi;
        }
    }
}

static const struct pk_type *pk_type_get(enum ggml_type type) {
    static const struct pk_type q4_0 = { PK_FAST_ROWS, 32, 32, 256, PK_ACT_Q8, PK_COLS_Q8, pk_pack_q4_0_16, 8 };
    static const struct pk_type q8_0 = { PK_FAST_ROWS, 32, 32, 512, PK_ACT_Q8, PK_COLS_Q8, pk_pack_q8_0_16, 128 };
    static const struct pk_type q4_0_avx2 = { PK_ROWS, 32, 8, 64, PK_ACT_Q8X, PK_COLS_Q8, pk_pack_q4_0, 8 };
    static const struct pk_type q8_0_avx2 = { PK_ROWS, 32, 8, 128, PK_ACT_Q8X, PK_COLS_Q8, pk_pack_q8_0_signed, 0 };
    static const struct pk_type q5_0 = { PK_ROWS, 32, 24, 64, PK_ACT_Q8, PK_COLS_Q8, pk_pack_q5_0, 16 };
    static const struct pk_type q4_1 = { PK_ROWS, 32, 16, 64, PK_ACT_Q8, PK_COLS_Q8, pk_pack_q4_1, 0 };
    static const struct pk_type q5_1 = { PK_ROWS, 32, 32, 64, PK_ACT_Q8, PK_COLS_Q8, pk_pack_q5_1, 0 };
    static const struct pk_type q5_0_avx2 = { PK_ROWS, 32, 24, 64, PK_ACT_Q8X, PK_COLS_Q8, pk_pack_q5_0, 16 };
    static const struct pk_type q4_1_avx2 = { PK_ROWS, 32, 16, 64, PK_ACT_Q8X, PK_COLS_Q8, pk_pack_q4_1, 0 };
    static const struct pk_type q5_1_avx2 = { PK_ROWS, 32, 32, 64, PK_ACT_Q8X, PK_COLS_Q8, pk_pack_q5_1, 0 };
    static const struct pk_type q4_0_fast = { PK_FAST_ROWS, 32, 32, 256, PK_ACT_Q8F, PK_COLS_FAST, pk_pack_q4_0_16, 8 };
    static const struct pk_type q8_0_fast = { PK_FAST_ROWS, 32, 32, 512, PK_ACT_Q8F, PK_COLS_FAST, pk_pack_q8_0_16,
                                              128 };
    static const struct pk_type q4_K = { PK_ROWS, 256, 80, 512, PK_ACT_Q8K, PK_COLS_K, pk_pack_q4_K, 0 };
    static const struct pk_type q4_K_fast = { PK_FAST_ROWS, 256, 320, 2048, PK_ACT_Q8K, PK_COLS_FAST_K,
                                              pk_pack_q4_K_fast, 0 };
    static const struct pk_type q2_K = { PK_ROWS, 256, 80, 256, PK_ACT_Q8K, PK_COLS_K, pk_pack_q2_K, 0 };
    static const struct pk_type q3_K = { PK_ROWS, 256, 72, 384, PK_ACT_Q8K, PK_COLS_K, pk_pack_q3_K, 0 };
    static const struct pk_type q5_K = { PK_ROWS, 256, 80, 640, PK_ACT_Q8K, PK_COLS_K, pk_pack_q5_K, 0 };
    static const struct pk_type q6_K = { PK_ROWS, 256, 72, 768, PK_ACT_Q8K, PK_COLS_K, pk_pack_q6_K, 0 };
    static const struct pk_type q2_K_avx2 = { PK_ROWS, 256, 80, 256, PK_ACT_Q8KX, PK_COLS_K, pk_pack_q2_K, 0 };
    static const struct pk_type q3_K_avx2 = { PK_ROWS, 256, 72, 384, PK_ACT_Q8KX, PK_COLS_K, pk_pack_q3_K, 0 };
    static const struct pk_type q4_K_avx2 = { PK_ROWS, 256, 80, 512, PK_ACT_Q8KX, PK_COLS_K, pk_pack_q4_K, 0 };
    static const struct pk_type q5_K_avx2 = { PK_ROWS, 256, 80, 640, PK_ACT_Q8KX, PK_COLS_K, pk_pack_q5_K, 0 };
    static const struct pk_type q6_K_avx2 = { PK_ROWS, 256, 72, 768, PK_ACT_Q8KX, PK_COLS_K, pk_pack_q6_K, 0 };
    static const struct pk_type q6_K_fast = { PK_FAST_ROWS, 256, 288, 3072, PK_ACT_Q8K6F, PK_COLS_FAST_K,
                                              pk_pack_q6_K_fast, 0 };
    /* not packed: decoded per work item (pk_iq2_compute) */
    static const struct pk_type iq2 = { PK_IQ2_ROWS, 256, 0, 0, PK_ACT_IQ2, PK_COLS_IQ2, NULL, 0 };
    const bool fast = cpu_fast_matmul_active();
    const bool avx2 = pk_kernels() && pk_kernels()->isa == PK_ISA_AVX2;
    switch (type) {
        case GGML_TYPE_Q4_0: return fast ? &q4_0_fast : avx2 ? &q4_0_avx2 : &q4_0;
        case GGML_TYPE_Q8_0: return fast ? &q8_0_fast : avx2 ? &q8_0_avx2 : &q8_0;
        case GGML_TYPE_Q5_0: return avx2 ? &q5_0_avx2 : &q5_0;
        case GGML_TYPE_Q4_1: return avx2 ? &q4_1_avx2 : &q4_1;
        case GGML_TYPE_Q5_1: return avx2 ? &q5_1_avx2 : &q5_1;
        case GGML_TYPE_Q2_K: return avx2 ? &q2_K_avx2 : &q2_K;
        case GGML_TYPE_Q3_K: return avx2 ? &q3_K_avx2 : &q3_K;
        case GGML_TYPE_Q4_K: return fast ? &q4_K_fast : avx2 ? &q4_K_avx2 : &q4_K;
        case GGML_TYPE_Q5_K: return avx2 ? &q5_K_avx2 : &q5_K;
        case GGML_TYPE_Q6_K: return fast ? &q6_K_fast : avx2 ? &q6_K_avx2 : &q6_K;
        case GGML_TYPE_IQ2_XXS:
        case GGML_TYPE_IQ2_XS: return &iq2;
        default: return NULL;
    }
}

static pk_tile_fn pk_quant_kernel(enum ggml_type type) {
    const struct pk_kernels *k = pk_kernels();
    if (!k) return NULL;
    switch (type) {
        case GGML_TYPE_Q4_0: return k->q4_0;
        case GGML_TYPE_Q8_0: return k->q8_0;
        case GGML_TYPE_Q5_0: return k->q5_0;
        case GGML_TYPE_Q4_1: return k->q4_1;
        case GGML_TYPE_Q5_1: return k->q5_1;
        case GGML_TYPE_Q2_K: return k->q2_K;
        case GGML_TYPE_Q3_K: return k->q3_K;
        case GGML_TYPE_Q4_K: return k->q4_K;
        case GGML_TYPE_Q5_K: return k->q5_K;
        case GGML_TYPE_Q6_K: return k->q6_K;
        default: return NULL;
    }
}

bool cpu_packed_type(enum ggml_type type) { return pk_quant_kernel(type) != NULL; }

bool cpu_packed_iq2_available(void) { return pk_kernels() && pk_kernels()->iq2; }

/* The AMX kernel of a product of w with ncols columns, or NULL: fast
 * mode, Q4_0, Q8_0, Q4_K or Q6_K, and enough columns. A thread makes each
 * group's blocks over before its tiles (pk_amx_prepare*), which the AVX-512
 * kernels, streaming the weights as they compute, do not: with few columns
 * they are faster. Where the tiles start to win (bench_matmul
 * --prompt-only -t 2 -k 2048 -n 5632, Sapphire Rapids): Q4_0 at 48-64
 * columns (64: 1.22 against 1.34 ms), Q8_0 at 64-96 (96: 1.86 against
 * 2.08), Q4_K at 32-48 (48: 1.02 against 1.18), Q6_K at 24-32 (32: 0.80
 * against 0.89); at 16 columns they take 1.2-1.6x the time. */
static pk_tile_fn pk_amx_kernel(const struct tensor *w, int64_t ncols) {
    const struct pk_kernels *k = pk_kernels();
    if (!k) return NULL;
    switch (w->type) {
        case GGML_TYPE_Q4_0: return ncols >= 64 ? k->q4_0_amx : NULL;
        case GGML_TYPE_Q8_0: return ncols >= 96 ? k->q8_0_amx : NULL;
        case GGML_TYPE_Q4_K: return ncols >= 48 ? k->q4_K_amx : NULL;
        case GGML_TYPE_Q6_K: return ncols >= 32 ? k->q6_K_amx : NULL;
        default: return NULL;
    }
}

/* The layout and kernel of a product of w with ncols columns: the type's,
 * or on AMX the same packed groups with the AMX kernels' column tiles
 * (pk_act_amx, pk_act_amx_k). */
static const struct pk_type *pk_product_type(const struct tensor *w, int64_t ncols) {
    /* (the AMX records carry no corrections: the bias comes out through the weights' sums) */
    static const struct pk_type q4_0_amx = { PK_FAST_ROWS, 32, 32, 256, PK_ACT_AMX, PK_COLS_AMX, pk_pack_q4_0_16, 8 };
    static const struct pk_type q8_0_amx = { PK_FAST_ROWS, 32, 32, 512, PK_ACT_AMX, PK_COLS_AMX, pk_pack_q8_0_16,
                                             128 };
    static const struct pk_type q4_K_amx = { PK_FAST_ROWS, 256, 320, 2048, PK_ACT_AMX_K, PK_COLS_AMX,
                                             pk_pack_q4_K_fast, 0 };
    static const struct pk_type q6_K_amx = { PK_FAST_ROWS, 256, 288, 3072, PK_ACT_AMX_K, PK_COLS_AMX,
                                             pk_pack_q6_K_fast, 0 };
    if (!pk_amx_kernel(w, ncols)) return pk_type_get(w->type);
    switch (w->type) {
        case GGML_TYPE_Q4_0: return &q4_0_amx;
        case GGML_TYPE_Q8_0: return &q8_0_amx;
        case GGML_TYPE_Q4_K: return &q4_K_amx;
        default: return &q6_K_amx;
    }
}

static pk_tile_fn pk_product_kernel(const struct tensor *w, int64_t ncols) {
    const pk_tile_fn amx = pk_amx_kernel(w, ncols);
    return amx ? amx : pk_quant_kernel(w->type);
}

/* The two-group kernel of a product of w with ncols columns, if its type
 * has one and the product runs on the type's own kernel (not AMX's). */
static pk_tile_fn pk_pair_kernel(const struct tensor *w, int64_t ncols) {
    const struct pk_kernels *k = pk_kernels();
    if (!k || pk_amx_kernel(w, ncols)) return NULL;
    switch (w->type) {
        case GGML_TYPE_Q4_0: return k->q4_0_pair;
        case GGML_TYPE_Q8_0: return k->q8_0_pair;
        default: return NULL;
    }
}

/* ---- packing ------------------------------------------------------------------------------- */

static int64_t pk_blocks_per_row(const struct tensor *w) { return w->ne[0] / pk_type_get(w->type)->blck; }

static int64_t pk_groups(const struct tensor *w) {
    const int rows = pk_type_get(w->type)->rows;
    return (w->ne[1] + rows - 1) / rows;
}

static size_t pk_group_bytes(const struct pk_type *pt, int64_t nb) {
    return pk_group_size(nb, pt->hdr_bytes, pt->q_bytes);
}

/* F16 matrices the kernels take (32 | k) are copied as they are: their
 * kernels read rows in the file's layout, but from the mapped file they
 * read 4 KiB pages, and matrix-vector products then stream about a third
 * slower than from the copy's huge pages (tg 64 on the TinyLlama-shaped F16
 * model, 2 threads, in a KVM guest: 11.4-12.1 -> 18.5-19.0 t/s). */
static bool pk_f16_copied(const struct tensor *w) {
    return w->type == GGML_TYPE_F16 && w->ne[0] % 32 == 0 && pk_kernels() && pk_kernels()->f16;
}

size_t cpu_repack_size(const struct tensor *w) {
    if (w->ne[2] != 1 || w->ne[3] != 1 || !tensor_is_contiguous(w)) return 0;
    if (pk_f16_copied(w)) return pk_pad64(tensor_nbytes(w));
    if (!cpu_packed_type(w->type)) return 0;
    return (size_t)pk_groups(w) * pk_group_bytes(pk_type_get(w->type), pk_blocks_per_row(w));
}

/* Group g of w into out (rows past the end stay zeros). */
static void pk_pack_group(const struct tensor *w, int64_t g, uint8_t *out) {
    const struct pk_type *pt = pk_type_get(w->type);
    const size_t block_bytes = type_traits_get(w->type)->type_size;
    const int64_t nb = pk_blocks_per_row(w);
    for (int r = 0; r < pt->rows && g * pt->rows + r < w->ne[1]; r++) {
        const uint8_t *src = (const uint8_t *)w->data + (g * pt->rows + r) * w->nb[1];
        for (int64_t i = 0; i < nb; i++) {
            const uint8_t *hdr;
            const uint8_t *q = pk_block(out, i, pt->hdr_bytes, pt->q_bytes, &hdr);
            pt->pack(src + i * block_bytes, r, out + (hdr - out), out + (q - out));
        }
    }
}

void cpu_repack_release(struct tensor *w) {
    struct cpu_packed_weight *p = w->extra;
    if (!p) return;
    if (p->owned) munmap(p->data, p->size);
    free(p);
    w->extra = NULL;
}

static void pk_pack_all(const struct tensor *w, uint8_t *data) {
    if (pk_f16_copied(w)) {
        memcpy(data, w->data, tensor_nbytes(w));
        return;
    }
    const size_t gb = pk_group_bytes(pk_type_get(w->type), pk_blocks_per_row(w));
    const int64_t groups = pk_groups(w);
    for (int64_t g = 0; g < groups; g++) pk_pack_group(w, g, data + (size_t)g * gb);
}

/* Packs w into data and points w->extra at a new descriptor of it. */
static bool pk_attach(struct tensor *w, uint8_t *data, size_t size, bool owned) {
    struct cpu_packed_weight *p = malloc(sizeof *p);
    if (!p) {
        error_set("out of memory packing '%s'", w->name);
        return false;
    }
    *p = (struct cpu_packed_weight){ .src = w->data, .data = data, .size = size, .owned = owned };
    pk_pack_all(w, data);
    w->extra = p;
    return true;
}

/* Anonymous memory advised for huge pages (fewer TLB misses, and the
 * hardware prefetchers run on across 4 KiB boundaries while weights stream),
 * aligned to 2 MiB so that they can be used. */
#define PK_HUGE_PAGE ((size_t)2 << 20)

void *cpu_packed_arena_new(size_t size, bool lock) {
    const size_t span = size + PK_HUGE_PAGE;
    uint8_t *base = mmap(NULL, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (base == MAP_FAILED) {
        error_set("cannot allocate %zu bytes for packed weights", size);
        return NULL;
    }
    uint8_t *arena = (uint8_t *)(((uintptr_t)base + PK_HUGE_PAGE - 1) & ~(uintptr_t)(PK_HUGE_PAGE - 1));
    if (arena > base) munmap(base, (size_t)(arena - base));
    const size_t tail = (size_t)(base + span - (arena + size));
    if (tail) munmap(arena + size, tail);
#ifdef MADV_HUGEPAGE
    madvise(arena, size, MADV_HUGEPAGE); /* a hint */
#endif
    if (lock && mlock(arena, size) != 0) {
        LOG_WARN("warning: cannot lock %zu bytes of packed weights in memory (%s); continuing without mlock\n",
                 size, strerror(errno));
    }
    return arena;
}

void cpu_packed_arena_free(void *arena, size_t size) {
    if (arena) munmap(arena, size);
}

bool cpu_repack_weight(struct tensor *w) {
    const size_t size = cpu_repack_size(w);
    struct cpu_packed_weight *p = w->extra;
    if (p && p->size == size && w->data) { /* the data changed: pack again in the same memory */
        p->src = w->data;
        pk_pack_all(w, p->data);
        return true;
    }
    cpu_repack_release(w);
    if (size == 0 || !w->data) return true;
    uint8_t *data = cpu_packed_arena_new(size, false);
    if (!data) return false;
    if (!pk_attach(w, data, size, true)) {
        cpu_packed_arena_free(data, size);
        return false;
    }
    return true;
}

bool cpu_repack_weight_at(struct tensor *w, void *mem) {
    cpu_repack_release(w);
    const size_t size = cpu_repack_size(w);
    if (size == 0 || !w->data) return true;
    return pk_attach(w, mem, size, false);
}

bool cpu_packed_current(const struct tensor *w) {
    const struct cpu_packed_weight *p = w->extra;
    return p && p->src == w->data;
}

/* ---- which products take this path ------------------------------------------------------- */

enum pk_kind { PK_NONE, PK_QUANT, PK_F16, PK_IQ2 };

static enum pk_kind pk_kind_of(const struct tensor *dst) {
    const struct tensor *w = dst->src[0], *x = dst->src[1];
    if (!pk_kernels()) return PK_NONE;
    if (x->type != GGML_TYPE_F32 || x->nb[0] != sizeof(float)) return PK_NONE;
    if (dst->type != GGML_TYPE_F32 || !tensor_is_contiguous(dst)) return PK_NONE;
    if (dst->op_params[0] != MUL_MAT_ORDER_REFERENCE && dst->op_params[0] != MUL_MAT_ORDER_ANY) return PK_NONE;
    if (w->type == GGML_TYPE_F16) {
        return w->nb[0] == sizeof(fp16_t) && w->ne[0] % 32 == 0 && pk_kernels()->f16 ? PK_F16 : PK_NONE;
    }
    if (w->type == GGML_TYPE_IQ2_XXS || w->type == GGML_TYPE_IQ2_XS) {
        /* one column (generation) needs the VBMI kernel; without it the row kernels' vec_dot is as
         * fast as anything tried (decoding rows first: 2.5 GB/s against its 3.9; a fused decode
         * with one gather per 8 grid words: 3.8) */
        const bool shape = w->ne[2] == 1 && w->ne[3] == 1 && x->ne[2] == 1 && x->ne[3] == 1 &&
                           (x->ne[1] > 1 || pk_kernels()->iq2_vec);
        return shape && tensor_is_contiguous(w) && cpu_packed_iq2_available() ? PK_IQ2 : PK_NONE;
    }
    return pk_quant_kernel(w->type) && cpu_packed_current(w) ? PK_QUANT : PK_NONE;
}

bool cpu_fast_mul_mat_applies(const struct tensor *dst) { return pk_kind_of(dst) != PK_NONE; }

/* Whether an IQ2 product with columns x (not grouped by expert) runs on
 * the matrix-vector kernel, which shares its grid lookups among a tile's
 * PK_IQ2_VEC_COLS columns: up to PK_IQ2_VEC_TILES tiles. IQ2_XXS 2048 x
 * 5632, 2 threads: 1 / 2 / 4 / 6 / 8 / 12 columns 105 / 154 / 203 / 227 /
 * 170 / 227 GOP/s; decoding rows first, 114 / 199 at 8 / 12, 207 at 16. */
#define PK_IQ2_VEC_TILES 2
static bool pk_iq2_vec_takes(const struct tensor *x) {
    return tensor_nrows(x) <= PK_IQ2_VEC_TILES * PK_IQ2_VEC_COLS && pk_kernels()->iq2_vec;
}

/* ---- activations ------------------------------------------------------------------------------ */

static enum pk_act pk_act_of(const struct tensor *dst) {
    const struct tensor *w = dst->src[0];
    return w->type == GGML_TYPE_F16 ? PK_ACT_F32 : pk_product_type(w, tensor_nrows(dst->src[1]))->act;
}

/* Bytes of one column's record for one block (quantized kinds). */
static size_t pk_act_record(enum pk_act act) {
    switch (act) {
        case PK_ACT_Q8: return sizeof(struct pk_act_q8);
        case PK_ACT_Q8X: return sizeof(struct pk_act_q8x);
        case PK_ACT_Q8F: return sizeof(struct pk_act_q8f);
        case PK_ACT_AMX: return sizeof(struct pk_act_amx) / PK_COLS_AMX;
        case PK_ACT_AMX_K: return sizeof(struct pk_act_amx_k) / PK_COLS_AMX;
        case PK_ACT_Q8K6F: return sizeof(struct pk_act_q8k6f);
        case PK_ACT_Q8KX: return sizeof(struct pk_act_q8kx);
        case PK_ACT_IQ2: return sizeof(struct pk_act_iq2);
        default: return sizeof(struct pk_act_q8k);
    }
}

/* How an F16 product is cut into work items (slice, block of rows, block of
 * columns): matrix-vector products (fewer than PK_F16_MIN_COLS columns) in
 * 16-row units, others in pk_f16_rows(k) rows. */
struct pk_f16_grid {
    int64_t rows_per_item, row_blocks, col_blocks;
};

static struct pk_f16_grid pk_f16_grid_of(const struct tensor *dst) {
    const struct tensor *w = dst->src[0], *x = dst->src[1];
    struct pk_f16_grid g;
    g.rows_per_item = x->ne[1] < PK_F16_MIN_COLS ? 16 : pk_f16_rows(w->ne[0]);
    g.row_blocks = (w->ne[1] + g.rows_per_item - 1) / g.rows_per_item;
    g.col_blocks = (x->ne[1] + PK_F16_COL_BLOCK - 1) / PK_F16_COL_BLOCK;
    return g;
}

/* A masked F16 product's (op_mul_mat_masked) open columns per row block and
 * column block, [first, end) as two ints: the mask is shared by every slice,
 * so INIT scans it once instead of once per slice. */
static size_t pk_mask_table_bytes(const struct tensor *dst) {
    if (dst->src[0]->type != GGML_TYPE_F16 || !dst->src[2]) return 0;
    const struct pk_f16_grid g = pk_f16_grid_of(dst);
    return pk_pad64((size_t)(g.row_blocks * g.col_blocks) * 2 * sizeof(int));
}

/* Bytes of the converted activations: tiles of max_cols columns, or float rows. */
static size_t pk_act_bytes(const struct tensor *dst) {
    const struct tensor *w = dst->src[0], *x = dst->src[1];
    const int64_t k = x->ne[0], ncols = tensor_nrows(x);
    if (w->type == GGML_TYPE_F16) return pk_pad64(pk_f16_stride(k) * (size_t)ncols * sizeof(float));
    const struct pk_type *pt = pk_product_type(w, ncols);
    const int64_t tiles = (ncols + pt->max_cols - 1) / pt->max_cols;
    return pk_pad64((size_t)(tiles * (k / pt->blck) * pt->max_cols) * pk_act_record(pt->act));
}

/* Per-thread scratch after the activations (64-byte aligned): the quantized
 * row (INIT); for F16 the rounded row (INIT), then an item's scratch
 * (COMPUTE); for AMX the quantized row, then a group's pk_amx_blocks. */
static size_t pk_scratch_bytes(const struct tensor *dst) {
    const struct tensor *w = dst->src[0];
    const int64_t k = w->ne[0];
    switch (pk_act_of(dst)) {
        case PK_ACT_F32: {
            const size_t init = pk_pad64((size_t)k * sizeof(fp16_t));
            const size_t compute = pk_pad64(pk_f16_scratch_floats(k) * sizeof(float));
            return init > compute ? init : compute;
        }
        case PK_ACT_Q8:
        case PK_ACT_Q8X: return pk_pad64((size_t)(k / 32) * sizeof(block_q8_1)); /* the larger */
        case PK_ACT_Q8F: return pk_pad64((size_t)(k / 32) * sizeof(block_q8_0));
        case PK_ACT_AMX: return pk_pad64((size_t)(k / 32) * sizeof(struct pk_amx_block)); /* the larger */
        case PK_ACT_AMX_K: return pk_pad64((size_t)(k / 256) * sizeof(struct pk_amx_kblock));
        case PK_ACT_IQ2: { /* the quantized row (INIT), then the decoded rows (COMPUTE) */
            const size_t init = pk_pad64((size_t)(k / 256) * sizeof(block_q8_K));
            const size_t compute = (size_t)(PK_IQ2_DECODE_ROWS / PK_IQ2_ROWS * (k / 256)) * PK_IQ2_SB_BYTES;
            return init > compute ? init : compute;
        }
        default: return pk_pad64((size_t)(k / 256) * sizeof(block_q8_K));
    }
}

/* Work memory: the converted activations, the mask table, then each thread's scratch. */
size_t cpu_fast_mul_mat_work(const struct tensor *dst, int n_threads) {
    return pk_act_bytes(dst) + pk_mask_table_bytes(dst) + (size_t)n_threads * pk_scratch_bytes(dst);
}

static int *pk_mask_table(const struct cpu_task *task, const struct tensor *dst) {
    return (int *)(task->wdata + pk_act_bytes(dst));
}

static void *pk_thread_scratch(const struct cpu_task *task, const struct tensor *dst) {
    return task->wdata + pk_act_bytes(dst) + pk_mask_table_bytes(dst) + (size_t)task->ith * pk_scratch_bytes(dst);
}

/* Where column `col`'s record of block i goes: its tile, then block i's row of records. */
static uint8_t *pk_act_at(uint8_t *act, const struct pk_type *pt, int64_t nb, int64_t col, int64_t i) {
    const int64_t tile = col / pt->max_cols, slot = col % pt->max_cols;
    return act + (size_t)((tile * nb + i) * pt->max_cols + slot) * pk_act_record(pt->act);
}

/* Bytes from a column's record of block i to its record of block i + 1:
 * the 32-element conversions step by it instead of taking pk_act_at's
 * division per block (a product whose time is mostly its conversion,
 * 2048 x 32 x 512 on one thread: exact +8%, fast +6%, in-process A/B). */
static size_t pk_act_step(const struct pk_type *pt) {
    return (size_t)pt->max_cols * pk_act_record(pt->act);
}

/* Blocks [b0, b1) of one column as Q8_0 records (the trait table's Q8_0
 * activation quantizer; a block's record depends on its elements only),
 * pk_act_q8 or (AVX2) pk_act_q8x. */
static void pk_act_q8(const float *x, int64_t k, int64_t b0, int64_t b1, int bias, bool q8_1, void *tmp,
                      uint8_t *act, const struct pk_type *pt, int64_t col) {
    type_traits_get(q8_1 ? GGML_TYPE_Q8_1 : GGML_TYPE_Q8_0)->from_float(x + 32 * b0, tmp, 32 * (b1 - b0));
    const size_t step = pk_act_step(pt);
    uint8_t *at = pk_act_at(act, pt, k / 32, col, b0);
    for (int64_t i = b0; i < b1; i++, at += step) {
        struct pk_act_q8 a;
        memset(&a, 0, sizeof a);
        if (q8_1) {
            const block_q8_1 *b = (const block_q8_1 *)tmp + (i - b0);
            memcpy(a.qs, b->qs, 32);
            a.d = b->d;
            a.s = b->s;
        } else {
            const block_q8_0 *b = (const block_q8_0 *)tmp + (i - b0);
            memcpy(a.qs, b->qs, 32);
            a.d = fp16_to_fp32(b->d);
        }
        for (int l = 0; l < 8; l++) {
            const int8_t *q = a.qs + 4 * l;
            a.corr[l] = -bias * (q[0] + q[1] + q[2] + q[3]);
        }
        if (pt->act == PK_ACT_Q8) {
            memcpy(at, &a, sizeof a);
            continue;
        }
        struct pk_act_q8x *ax = (struct pk_act_q8x *)at;
        for (int h = 0; h < 2; h++) {
            for (int r = 0; r < 2; r++) {
                memcpy(ax->qs[h] + 16 * r, a.qs + 16 * h, 16);
                memcpy(ax->corr[h] + 4 * r, a.corr + 4 * h, 4 * sizeof(int32_t));
            }
        }
        for (int l = 0; l < 8; l++) {
            ax->d[l] = a.d;
            ax->s[l] = a.s;
        }
    }
}

/* The same for the fast kernels: one correction per block. */
static void pk_act_q8f(const float *x, int64_t k, int64_t b0, int64_t b1, int bias, block_q8_0 *tmp, uint8_t *act,
                       const struct pk_type *pt, int64_t col) {
    type_traits_get(GGML_TYPE_Q8_0)->from_float(x + 32 * b0, tmp, 32 * (b1 - b0));
    const size_t step = pk_act_step(pt);
    uint8_t *at = pk_act_at(act, pt, k / 32, col, b0);
    for (int64_t i = b0; i < b1; i++, at += step) {
        const block_q8_0 *b = &tmp[i - b0];
        struct pk_act_q8f *a = (struct pk_act_q8f *)at;
        int32_t sum = 0;
        for (int l = 0; l < 32; l++) sum += b->qs[l];
        memcpy(a->qs, b->qs, 32);
        a->corr = -bias * sum;
        a->d = fp16_to_fp32(b->d);
    }
}

/* The same for the AMX kernels: column `col`'s slot in the tile's blocks,
 * its quants made unsigned. */
static void pk_act_amx(const float *x, int64_t k, int64_t b0, int64_t b1, block_q8_0 *tmp, uint8_t *act,
                       const struct pk_type *pt, int64_t col) {
    type_traits_get(GGML_TYPE_Q8_0)->from_float(x + 32 * b0, tmp, 32 * (b1 - b0));
    const int64_t slot = col % PK_COLS_AMX;
    for (int64_t i = b0; i < b1; i++) {
        const block_q8_0 *b = &tmp[i - b0];
        struct pk_act_amx *a = (struct pk_act_amx *)pk_act_at(act, pt, k / 32, col - slot, i);
        for (int l = 0; l < 32; l++) a->qs[slot][l] = (uint8_t)(b->qs[l] + 128);
        a->d[slot] = fp16_to_fp32(b->d);
    }
}

/* A Q8_K block as the k-quant kernels' record. */
static void pk_record_q8k(const block_q8_K *b, struct pk_act_q8k *a) {
    memcpy(a->qs, b->qs, sizeof a->qs);
    a->d = b->d;
    for (int j = 0; j < 8; j++) a->bpairs[j] = (int16_t)(b->bsums[2 * j] + b->bsums[2 * j + 1]);
    memcpy(a->bsums, b->bsums, sizeof a->bsums);
    for (int n = 0; n < 2; n++)
        for (int h = 0; h < 2; h++)
            for (int p = 0; p < 2; p++)
                for (int l = 0; l < 4; l++)
                    for (int w = 0; w < 2; w++) {
                        const int8_t *q = b->qs + 32 * (4 * n + 2 * p + w) + 16 * h + 4 * l;
                        a->corr6[n][h][p][l][w] = (int16_t)(-32 * (q[0] + q[1] + q[2] + q[3]));
                    }
}

/* The same for the AVX2 kernels: halves of 16 quants twice, the Q6_K
 * offset's pair sums, the mins' pair sums twice, d 8 times. */
static void pk_record_q8kx(const block_q8_K *b, struct pk_act_q8kx *a) {
    for (int c = 0; c < 8; c++) {
        for (int h = 0; h < 2; h++) {
            const int8_t *q = b->qs + 32 * c + 16 * h;
            for (int r = 0; r < 2; r++) {
                memcpy(a->qs[c][h] + 16 * r, q, 16);
                for (int e = 0; e < 8; e++) a->m32[c][h][8 * r + e] = (int16_t)(32 * (q[2 * e] + q[2 * e + 1]));
            }
        }
    }
    for (int j = 0; j < 16; j++) a->bpairs[j] = (int16_t)(b->bsums[2 * (j % 8)] + b->bsums[2 * (j % 8) + 1]);
    for (int h = 0; h < 2; h++) {
        for (int j = 0; j < 16; j++) a->bsums[h][j] = b->bsums[8 * h + j % 8];
    }
    for (int l = 0; l < 8; l++) a->d[l] = b->d;
}

/* The same for the fast Q6_K kernel: the half sub-blocks' corrections. */
static void pk_record_q8k6f(const block_q8_K *b, struct pk_act_q8k6f *a) {
    memcpy(a->qs, b->qs, sizeof a->qs);
    a->d = b->d;
    for (int h = 0; h < 32; h++) {
        int32_t sum = 0;
        for (int e = 0; e < 8; e++) sum += b->qs[8 * h + e];
        a->corr[h] = -32 * sum - 1;
    }
    for (int j = 0; j < 16; j++) {
        for (int w = 0; w < 2; w++) {
            int32_t sum = 0;
            for (int m = 0; m < 4; m++) sum += b->qs[16 * j + 4 * m + 2 * w] + b->qs[16 * j + 4 * m + 2 * w + 1];
            a->corr_words[j][w] = (int16_t)(-32 * sum - 1);
        }
    }
}

/* The same for the IQ2 kernel: the quants as int16, each lane's pairs together. */
static void pk_record_iq2(const block_q8_K *b, struct pk_act_iq2 *a) {
    for (int j = 0; j < 8; j++)
        for (int h = 0; h < 2; h++)
            for (int l = 0; l < 8; l++)
                for (int t = 0; t < 2; t++) a->qs[16 * (2 * j + h) + 2 * l + t] = b->qs[32 * j + 4 * l + 2 * h + t];
    a->d = b->d;
}

/* The same for the IQ2 matrix-vector kernel: the quants in its order. */
static void pk_record_iq2v(const block_q8_K *b, struct pk_act_iq2v *a) {
    for (int h = 0; h < 2; h++)
        for (int m = 0; m < 2; m++)
            for (int t = 0; t < 2; t++)
                for (int L = 0; L < 4; L++)
                    for (int u = 0; u < 8; u++)
                        for (int e = 0; e < 2; e++)
                            a->qs[h][m][t][16 * L + 2 * u + e] = b->qs[32 * u + 8 * (2 * (L % 2) + t) + 4 * h + 2 * m + e];
    a->d = b->d;
}

/* Blocks [b0, b1) of one column quantized to Q8_K (the trait table's
 * quantizer) as the records of pt's kernels (IQ2: of the matrix-vector
 * kernel when `vec`, pk_iq2_vec_takes). */
/* A Q8_K block as column `slot` of the K-quant AMX kernels' tile block:
 * the quants made unsigned. */
static void pk_record_amx_k(const block_q8_K *b, struct pk_act_amx_k *a, int slot) {
    for (int c = 0; c < 4; c++) {
        for (int e = 0; e < 64; e++) a->qs[c][slot][e] = (uint8_t)(b->qs[64 * c + e] + 128);
    }
    for (int j = 0; j < 8; j++) a->bpairs[slot][j] = (int16_t)(b->bsums[2 * j] + b->bsums[2 * j + 1]);
    a->d[slot] = b->d;
}

static void pk_act_q8k(const float *x, int64_t k, int64_t b0, int64_t b1, block_q8_K *tmp, uint8_t *act,
                       const struct pk_type *pt, int64_t col, bool vec) {
    type_traits_get(GGML_TYPE_Q8_K)->from_float(x + 256 * b0, tmp, 256 * (b1 - b0));
    for (int64_t i = b0; i < b1; i++) {
        if (pt->act == PK_ACT_AMX_K) {
            const int64_t slot = col % PK_COLS_AMX;
            pk_record_amx_k(&tmp[i - b0], (struct pk_act_amx_k *)pk_act_at(act, pt, k / 256, col - slot, i), (int)slot);
            continue;
        }
        void *a = pk_act_at(act, pt, k / 256, col, i);
        memset(a, 0, pk_act_record(pt->act));
        switch (pt->act) {
            case PK_ACT_Q8K6F: pk_record_q8k6f(&tmp[i - b0], a); break;
            case PK_ACT_Q8KX: pk_record_q8kx(&tmp[i - b0], a); break;
            case PK_ACT_IQ2:
                if (vec) pk_record_iq2v(&tmp[i - b0], a);
                else pk_record_iq2(&tmp[i - b0], a);
                break;
            default: pk_record_q8k(&tmp[i - b0], a); break;
        }
    }
}

/* x's rows (columns of the product) converted for weights like w into
 * `act`, the threads sharing the work (scratch: this thread's). Column r
 * goes to slot slot_of[r] of the tiles (skipped when -1), or to slot r
 * without a map. */
static void pk_convert_x(const struct cpu_task *task, const struct tensor *w, const struct tensor *x, uint8_t *act,
                         void *scratch, const int32_t *slot_of) {
    const int64_t k = x->ne[0];
    const int64_t nrows = tensor_nrows(x);
    const struct pk_type *pt = w->type == GGML_TYPE_F16 ? NULL : pk_product_type(w, nrows);
    const int64_t blk = pt ? pt->blck : 16, nb = k / blk; /* F16: elements in 16s */
    /* rows shared out; one row (generation) has its blocks shared out
     * instead, so that no thread waits while another quantizes all of it */
    int64_t r0 = 0, r1 = 1, b0 = 0, b1 = nb;
    if (nrows == 1) {
        b0 = nb * task->ith / task->nth;
        b1 = nb * (task->ith + 1) / task->nth;
        if (b0 == b1) return;
    } else {
        cpu_task_rows(task, nrows, &r0, &r1);
    }
    for (int64_t r = r0; r < r1; r++) {
        const int64_t slot = slot_of ? slot_of[r] : r;
        if (slot < 0) continue;
        int64_t i1, i2, i3;
        cpu_row_index(x, r, &i1, &i2, &i3);
        const float *src = cpu_elem(x, 0, i1, i2, i3);
        if (!pt) {
            /* the reference rounds the activations to F16 */
            const int64_t e0 = blk * b0, n = blk * (b1 - b0);
            type_traits_get(GGML_TYPE_F16)->from_float(src + e0, scratch, n);
            type_traits_get(GGML_TYPE_F16)->to_float(scratch, (float *)act + slot * pk_f16_stride(k) + e0, n);
            continue;
        }
        if (pt->act == PK_ACT_Q8 || pt->act == PK_ACT_Q8X) {
            const bool q8_1 = type_traits_get(w->type)->vec_dot_type == GGML_TYPE_Q8_1;
            pk_act_q8(src, k, b0, b1, pt->bias, q8_1, scratch, act, pt, slot);
        } else if (pt->act == PK_ACT_Q8F) {
            pk_act_q8f(src, k, b0, b1, pt->bias, scratch, act, pt, slot);
        } else if (pt->act == PK_ACT_AMX) {
            pk_act_amx(src, k, b0, b1, scratch, act, pt, slot);
        } else {
            pk_act_q8k(src, k, b0, b1, scratch, act, pt, slot, !slot_of && pk_iq2_vec_takes(x));
        }
    }
}

/* ---- products --------------------------------------------------------------------------------- */

/* Matrix-vector products, which have no reuse to block for, stream their
 * weights. The n units are cut into one contiguous region per thread: each
 * thread streams the first PK_OWN_PERCENT of its own region (one stream for
 * the prefetchers: a jump costs a restart, and the prefetches past a chunk's
 * end fetch rows that another thread reads), then the regions' tails, in up
 * to PK_TAIL_CHUNKS chunks of at least `min` units each, are claimed from
 * the shared counter in the order region 0's first, region 1's first, ...,
 * region 0's second, ...: threads that keep pace claim the continuations of
 * their own streams, and one that was held up gets help with its tail.
 * Q4_0 tg 128 +3% against guided chunks (TinyLlama shape, 2 threads). With
 * more threads than CPUs, threads take turns and a region would wait for
 * its descheduled owner, so every chunk is claimed (8% faster than own
 * regions at 3 threads on 2 CPUs).
 * *own is true before a thread's first call. False when nothing is left. */
#define PK_OWN_PERCENT 75
#define PK_TAIL_CHUNKS 4
static int64_t pk_vec_own_len(int64_t n, int nth) {
    return nth <= cpu_usable_cpus() ? n / nth * PK_OWN_PERCENT / 100 : 0;
}

static bool pk_vec_next(const struct cpu_task *task, int64_t n, int64_t min, bool *own, int64_t *a, int64_t *b) {
    const int nth = task->nth;
    const int64_t shortest = n / nth, own_len = pk_vec_own_len(n, nth);
    if (*own) {
        *own = false;
        *a = n * task->ith / nth;
        *b = *a + own_len;
        if (*a < *b) return true;
    }
    /* the same number of chunks in every region (their lengths differ by one at most) */
    int64_t chunks = (shortest - own_len) / (min > 0 ? min : 1);
    chunks = chunks < 1 ? 1 : chunks > PK_TAIL_CHUNKS ? PK_TAIL_CHUNKS : chunks;
    const int64_t claim = cpu_task_next_chunk(task);
    if (claim >= chunks * nth) return false;
    const int64_t region = claim % nth, j = claim / nth;
    const int64_t r0 = n * region / nth, r1 = n * (region + 1) / nth, tail = r1 - (r0 + own_len);
    *a = r0 + own_len + tail * j / chunks;
    *b = r0 + own_len + tail * (j + 1) / chunks;
    return *a < *b || pk_vec_next(task, n, min, own, a, b);
}

/* The weights this thread streams first in a matrix-vector product
 * (cpu_fast_mul_mat_first_bytes): units [u0, u0 + own) of unit_bytes each
 * from base, u0 its own region's start. */
static bool pk_vec_own_bytes(const uint8_t *base, int64_t units, size_t unit_bytes, int ith, int nth, const uint8_t **p,
                             size_t *n) {
    const int64_t own = pk_vec_own_len(units, nth);
    *p = base + (size_t)(units * ith / nth) * unit_bytes;
    *n = (size_t)own * unit_bytes;
    return own > 0;
}

/* A prompt's columns of mul_mat_id grouped by expert: each expert's columns
 * fill tiles of their own (its last one partly), so that a tile's columns
 * share one weight matrix and the tiled kernels reuse its rows across them
 * as in mul_mat. slot_of[c]: column c's slot in the tiles (-1: its id is
 * out of range); col_of[s]: the column in slot s (-1: padding);
 * expert_of[t]: tile t's expert. */
struct pk_expert_groups {
    int64_t tiles;
    int32_t *slot_of, *col_of, *expert_of;
};

/* The products' tiles: x's columns in order (eg NULL), or grouped by expert
 * (dst a mul_mat_id, eg its groups; a tile's outputs go through this
 * thread's tile_out, max_cols x rows floats, to their columns). */
struct pk_tiles {
    const uint8_t *act;                  /* the converted columns (pk_act_at) */
    const struct pk_expert_groups *eg;
    float *tile_out;
    uint8_t *decoded;                    /* this thread's scratch: IQ2's decoded rows, F16's item scratch */
};

/* Columns of tile `tile` (padding at the end of an expert's last tile). */
static int pk_tile_cols(const struct pk_tiles *tl, const struct pk_type *pt, int64_t ncols, int64_t tile) {
    const int64_t first = tile * pt->max_cols;
    if (!tl->eg) return (int)(ncols - first < pt->max_cols ? ncols - first : pt->max_cols);
    int n = 0;
    while (n < pt->max_cols && tl->eg->col_of[first + n] >= 0) n++;
    return n;
}

/* Where the kernel writes the outputs of `rows` rows from `row` x tile
 * `tile`: in place, or (grouped by expert) into tile_out, rows floats per
 * column; *stride: floats per column. */
static float *pk_tile_dst(const struct pk_tiles *tl, struct tensor *dst, int64_t tile, int max_cols, int64_t row,
                          int rows, size_t *stride) {
    *stride = tl->eg ? (size_t)rows : (size_t)dst->ne[0];
    return tl->eg ? tl->tile_out : (float *)dst->data + tile * max_cols * dst->ne[0] + row;
}

/* Grouped by expert: the tile's outputs (nrows of each of its ncols
 * columns) from tile_out to their columns. */
static void pk_tile_scatter(const struct pk_tiles *tl, struct tensor *dst, int64_t tile, int max_cols, int ncols,
                            int64_t row, int nrows, int rows) {
    for (int j = 0; tl->eg && j < ncols; j++) {
        float *out = cpu_elem(dst, row, tl->eg->col_of[tile * max_cols + j], 0, 0);
        memcpy(out, tl->tile_out + (size_t)j * rows, (size_t)nrows * sizeof(float));
    }
}

/* The runs of tiles that share a weight, run n = [start[n], start[n + 1]):
 * the `tiles` tiles of mul_mat (eg NULL), or one run per expert with
 * columns. Returns the number of runs. */
static int pk_tile_runs(const struct pk_expert_groups *eg, int64_t tiles, int64_t start[TENSOR_MAX_SRC + 1]) {
    start[0] = 0;
    if (!eg) {
        start[1] = tiles;
        return 1;
    }
    int runs = 0;
    for (int64_t t = 0; t < eg->tiles; t++) {
        if (t == 0 || eg->expert_of[t] != eg->expert_of[t - 1]) start[runs++] = t;
    }
    start[runs] = eg->tiles;
    return runs;
}

/* Quantized weights (2-d, packed): with one column tile, row groups as
 * pk_vec_next hands them out; else chunks of rows x column tiles sized to
 * the L2 cache (cpu_chunks_plan), in which each group's rows stay in L1
 * while they pass over the chunk's tiles. Threads claim chunks as they go.
 * Where the type has a two-group kernel (pk_pair_kernel) the groups of a
 * range go to it in pairs, an odd last one alone. */
static void pk_quant_compute(const struct cpu_task *task, struct tensor *dst, const struct pk_tiles *tl) {
    const struct pk_expert_groups *eg = tl->eg;
    const struct tensor *w = eg ? dst->src[2] : dst->src[0], *x = dst->src[1]; /* experts: one type and shape */
    const int64_t nb = pk_blocks_per_row(w), ncols = tensor_nrows(x);
    const struct pk_type *pt = pk_product_type(w, ncols);
    const pk_tile_fn kernel = pk_product_kernel(w, ncols);
    const pk_tile_fn pair = eg ? NULL : pk_pair_kernel(w, ncols); /* (experts' tiles go through tile_out) */
    const int64_t tiles = eg ? eg->tiles : (ncols + pt->max_cols - 1) / pt->max_cols;
    const int64_t groups = pk_groups(w), rows = pt->rows;
    const size_t gb = pk_group_bytes(pt, nb);
    const size_t tile_bytes = (size_t)(nb * pt->max_cols) * pk_act_record(pt->act);
    /* with a two-group kernel, chunks of whole pairs: Q8_0 k = 2048 rows
     * fit the L2 budget 112 (7 groups) at a time, and every seventh group
     * went alone (fast Q8_0 2048 x 2048 x 512 +5%, Q4_0 5632 x 2048 +2%) */
    const int64_t align = pair ? 2 * CPU_CHUNK_ROW_ALIGN : CPU_CHUNK_ROW_ALIGN;
    const struct cpu_chunks ch = cpu_chunks_plan(w->ne[1], gb / (size_t)rows, align, tiles, tile_bytes, task->nth);
    const bool vec = tiles == 1 && !eg;
    bool own = true;
    const uint8_t *amx_group = NULL; /* whose blocks tl->decoded holds for the AMX kernels */
    for (;;) {
        int64_t g0, g1, t0 = 0, t1 = 1;
        if (vec) {
            if (!pk_vec_next(task, groups, PK_VEC_MIN_CHUNK_BYTES / (int64_t)gb + 1, &own, &g0, &g1)) break;
        } else {
            const int64_t chunk = cpu_task_next_chunk(task);
            if (chunk >= cpu_chunks_count(&ch)) break;
            int64_t r0, r1;
            cpu_chunks_range(&ch, chunk, &r0, &r1, &t0, &t1);
            g0 = r0 / rows;
            g1 = (r1 + rows - 1) / rows;
        }
        for (int64_t g = g0; g < g1;) {
            const int64_t rows_left = w->ne[1] - g * rows;
            const int nrows = (int)(rows_left < rows ? rows_left : rows);
            const bool two = pair && g + 1 < g1; /* the range's groups in pairs */
            const int nrows2 = two ? (int)(rows_left - rows < rows ? rows_left - rows : rows) : 0;
            for (int64_t tile = t0; tile < t1; tile++) {
                const struct tensor *wt = eg ? dst->src[2 + eg->expert_of[tile]] : w;
                const uint8_t *group = ((const struct cpu_packed_weight *)wt->extra)->data + (size_t)g * gb;
                struct pk_tile t = {
                    .w = group, .nb = nb, .group_bytes = gb,
                    .act = tl->act + (size_t)tile * tile_bytes, .ncols = pk_tile_cols(tl, pt, ncols, tile),
                    .nrows = nrows, .nrows2 = nrows2, .amx = (struct pk_amx_block *)tl->decoded,
                    .amx_k = (struct pk_amx_kblock *)tl->decoded, .amx_ready = group == amx_group,
                };
                amx_group = group;
                t.dst = pk_tile_dst(tl, dst, tile, pt->max_cols, g * rows, (int)rows, &t.dst_stride);
                (two ? pair : kernel)(&t);
                pk_tile_scatter(tl, dst, tile, pt->max_cols, t.ncols, g * rows, nrows, (int)rows);
            }
            g += two ? 2 : 1;
        }
    }
}

/* IQ2 weights: work units of PK_IQ2_DECODE_ROWS rows of one weight (with
 * experts: of one expert that has columns), claimed as the threads go; a
 * unit's rows are decoded once (pk_iq2_decode) and then run against every
 * column tile of that weight, group by group. */
static void pk_iq2_compute(const struct cpu_task *task, struct tensor *dst, const struct pk_tiles *tl) {
    const struct pk_expert_groups *eg = tl->eg;
    const struct tensor *w = eg ? dst->src[2] : dst->src[0], *x = dst->src[1]; /* experts: one type and shape */
    const struct pk_type *pt = pk_type_get(w->type);
    const struct pk_kernels *kn = pk_kernels();
    const int64_t nb = w->ne[0] / 256, ncols = x->ne[1], nrows = w->ne[1];
    const int64_t row_units = (nrows + PK_IQ2_DECODE_ROWS - 1) / PK_IQ2_DECODE_ROWS;
    const size_t tile_bytes = (size_t)(nb * pt->max_cols) * sizeof(struct pk_act_iq2);
    const size_t group_bytes = (size_t)nb * PK_IQ2_SB_BYTES;
    int64_t run_start[TENSOR_MAX_SRC + 1];
    const int runs = pk_tile_runs(eg, (ncols + pt->max_cols - 1) / pt->max_cols, run_start);
    for (int64_t u = cpu_task_next_chunk(task); u < runs * row_units; u = cpu_task_next_chunk(task)) {
        const int64_t run = u / row_units, r0 = u % row_units * PK_IQ2_DECODE_ROWS;
        const int64_t r1 = r0 + PK_IQ2_DECODE_ROWS < nrows ? r0 + PK_IQ2_DECODE_ROWS : nrows;
        const struct tensor *wt = eg ? dst->src[2 + eg->expert_of[run_start[run]]] : w;
        for (int64_t r = r0; r < r1; r += PK_IQ2_ROWS) {
            const int n = (int)(r1 - r < PK_IQ2_ROWS ? r1 - r : PK_IQ2_ROWS);
            kn->iq2_decode((const uint8_t *)wt->data + r * wt->nb[1], wt->nb[1], n, nb, w->type == GGML_TYPE_IQ2_XS,
                           tl->decoded + (r - r0) / PK_IQ2_ROWS * group_bytes);
        }
        for (int64_t tile = run_start[run]; tile < run_start[run + 1]; tile++) {
            for (int64_t r = r0; r < r1; r += PK_IQ2_ROWS) {
                struct pk_iq2_tile t = {
                    .w = tl->decoded + (r - r0) / PK_IQ2_ROWS * group_bytes, .nb = nb,
                    .act = tl->act + (size_t)tile * tile_bytes, .ncols = pk_tile_cols(tl, pt, ncols, tile),
                    .nrows = (int)(r1 - r < PK_IQ2_ROWS ? r1 - r : PK_IQ2_ROWS),
                };
                t.dst = pk_tile_dst(tl, dst, tile, pt->max_cols, r, PK_IQ2_ROWS, &t.dst_stride);
                kn->iq2(&t);
                pk_tile_scatter(tl, dst, tile, pt->max_cols, t.ncols, r, t.nrows, PK_IQ2_ROWS);
            }
        }
    }
}

/* IQ2 weights times a few columns (pk_iq2_vec_takes): pairs of rows as
 * pk_vec_next hands them out, read in place by the VBMI kernel; with more
 * than one column tile, blocks of PK_IQ2_VEC_BLOCK_ROWS rows pass over
 * every tile while they are in cache. */
#define PK_IQ2_VEC_BLOCK_ROWS 64
static void pk_iq2_vec_compute(const struct cpu_task *task, struct tensor *dst) {
    const struct tensor *w = dst->src[0];
    const struct pk_type *pt = pk_type_get(w->type);
    const int64_t pairs = (w->ne[1] + 1) / 2, ncols = dst->src[1]->ne[1];
    const int64_t tiles = (ncols + PK_IQ2_VEC_COLS - 1) / PK_IQ2_VEC_COLS, nb = w->ne[0] / 256;
    bool own = true;
    int64_t p0, p1;
    while (pk_vec_next(task, pairs, PK_VEC_MIN_CHUNK_BYTES / (2 * (int64_t)w->nb[1]) + 1, &own, &p0, &p1)) {
        const int64_t end = 2 * p1 < w->ne[1] ? 2 * p1 : w->ne[1];
        const int64_t step = tiles == 1 ? end : PK_IQ2_VEC_BLOCK_ROWS;
        for (int64_t r0 = 2 * p0; r0 < end; r0 += step) {
            const int64_t r1 = end - r0 < step ? end : r0 + step;
            for (int64_t tile = 0; tile < tiles; tile++) {
                const int64_t col0 = tile * PK_IQ2_VEC_COLS;
                const struct pk_iq2_vec v = {
                    .rows = (const uint8_t *)w->data + r0 * w->nb[1], .row_bytes = w->nb[1], .nrows = r1 - r0, .nb = nb,
                    .xs = w->type == GGML_TYPE_IQ2_XS,
                    .act = (const uint8_t *)task->wdata + (size_t)(tile * nb * pt->max_cols) * sizeof(struct pk_act_iq2v),
                    .act_stride = (size_t)pt->max_cols * sizeof(struct pk_act_iq2v),
                    .ncols = (int)(ncols - col0 < PK_IQ2_VEC_COLS ? ncols - col0 : PK_IQ2_VEC_COLS),
                    .dst = (float *)dst->data + col0 * dst->ne[0] + r0, .dst_stride = (size_t)dst->ne[0],
                };
                pk_kernels()->iq2_vec(&v);
            }
        }
    }
}

/* INIT of a masked F16 product: the mask table, entries shared out among the threads. */
static void pk_mask_scan(const struct cpu_task *task, const struct tensor *dst) {
    const struct tensor *mask = dst->src[2];
    const struct pk_f16_grid g = pk_f16_grid_of(dst);
    const int64_t nrows = dst->src[0]->ne[1], ncols = dst->src[1]->ne[1];
    int *table = pk_mask_table(task, dst);
    for (int64_t e = task->ith; e < g.row_blocks * g.col_blocks; e += task->nth) {
        const int64_t row0 = e % g.row_blocks * g.rows_per_item, col0 = e / g.row_blocks * PK_F16_COL_BLOCK;
        const int rows = (int)(nrows - row0 < g.rows_per_item ? nrows - row0 : g.rows_per_item);
        const int cols = (int)(ncols - col0 < PK_F16_COL_BLOCK ? ncols - col0 : PK_F16_COL_BLOCK);
        cpu_mask_columns(mask, row0, rows, col0, cols, &table[2 * e], &table[2 * e + 1]);
    }
}

/* Row `row` of F16 weights w in slice (i2, i3): in w's copy where it has a
 * current one (pk_f16_copied), else in place. */
static const fp16_t *pk_f16_row(const struct tensor *w, int64_t row, int64_t i2, int64_t i3) {
    const uint8_t *at = cpu_elem(w, 0, row, i2, i3);
    if (!cpu_packed_current(w)) return (const fp16_t *)at;
    return (const fp16_t *)(((const struct cpu_packed_weight *)w->extra)->data + (at - (const uint8_t *)w->data));
}

/* F16 weights (any slices, broadcast as mul_mat allows): work items (slice,
 * block of rows, block of columns; cpu_packed_impl.h) claimed as the threads
 * go; matrix-vector products take 16-row units (pk_vec_next) instead. A
 * masked product (op_mul_mat_masked) computes only the columns between the
 * first and the last that its mask leaves open in the item's rows. */
static void pk_f16_compute(const struct cpu_task *task, struct tensor *dst) {
    const struct tensor *w = dst->src[0], *x = dst->src[1];
    const pk_f16_item_fn kernel = pk_kernels()->f16;
    const int64_t k = w->ne[0], nrows = w->ne[1], ncols = x->ne[1], slices = x->ne[2] * x->ne[3];
    const int64_t r2 = x->ne[2] / w->ne[2], r3 = x->ne[3] / w->ne[3];
    const bool vec = ncols < PK_F16_MIN_COLS;
    const struct pk_f16_grid g = pk_f16_grid_of(dst);
    const int64_t rows_per_item = g.rows_per_item, row_blocks = g.row_blocks, col_blocks = g.col_blocks;
    const bool masked = dst->src[2] != NULL; /* op_mul_mat_masked's (shape checked there) */
    const int *mask_table = pk_mask_table(task, dst);
    const int64_t items = slices * row_blocks * col_blocks;
    const int64_t min_units = PK_VEC_MIN_CHUNK_BYTES / (rows_per_item * k * (int64_t)sizeof(fp16_t)) + 1;
    float *scratch = pk_thread_scratch(task, dst);
    bool own = true;
    for (;;) {
        int64_t i0, i1;
        if (vec) {
            if (!pk_vec_next(task, items, min_units, &own, &i0, &i1)) break;
        } else {
            i0 = cpu_task_next_chunk(task);
            i1 = i0 + 1;
            if (i0 >= items) break;
        }
        for (int64_t item = i0; item < i1; item++) {
            /* consecutive items share their columns (which stay in L2) */
            const int64_t rb = item % row_blocks, cb = item / row_blocks % col_blocks;
            const int64_t slice = item / row_blocks / col_blocks, i12 = slice % x->ne[2], i13 = slice / x->ne[2];
            const int64_t row0 = rb * rows_per_item, col0 = cb * PK_F16_COL_BLOCK;
            struct pk_f16_item it = {
                .w = pk_f16_row(w, row0, i12 / r2, i13 / r3), .w_stride = w->nb[1] / sizeof(fp16_t),
                .nrows = (int)(nrows - row0 < rows_per_item ? nrows - row0 : rows_per_item),
                .act = (const float *)task->wdata + (size_t)(slice * ncols + col0) * pk_f16_stride(k),
                .act_stride = pk_f16_stride(k),
                .ncols = (int)(ncols - col0 < PK_F16_COL_BLOCK ? ncols - col0 : PK_F16_COL_BLOCK),
                .k = k, .scratch = scratch, .dst = cpu_elem(dst, row0, col0, i12, i13),
                .dst_stride = (size_t)dst->ne[0],
            };
            if (masked) {
                const int first = mask_table[2 * (cb * row_blocks + rb)], end = mask_table[2 * (cb * row_blocks + rb) + 1];
                for (int c = 0; c < it.ncols; c++) {
                    if (c < first || c >= end) memset(it.dst + (size_t)c * it.dst_stride, 0, (size_t)it.nrows * sizeof(float));
                }
                it.act += (size_t)first * pk_f16_stride(k);
                it.dst += (size_t)first * it.dst_stride;
                it.ncols = end - first;
                if (it.ncols == 0) continue;
            }
            kernel(&it);
        }
    }
}

/* F16 experts with their columns grouped by expert (a tile per column):
 * work items of pk_f16_rows(k) rows of one expert x up to
 * PK_F16_COL_BLOCK of its columns, the outputs through this thread's
 * tile_out to their columns. */
static void pk_f16_experts_compute(const struct cpu_task *task, struct tensor *dst, const struct pk_tiles *tl) {
    const struct pk_expert_groups *eg = tl->eg;
    const int64_t k = dst->src[2]->ne[0], nrows = dst->src[2]->ne[1]; /* experts: one type and shape */
    const int64_t rows_per_item = pk_f16_rows(k), row_blocks = (nrows + rows_per_item - 1) / rows_per_item;
    int64_t start[TENSOR_MAX_SRC + 1], first_item[TENSOR_MAX_SRC + 1] = { 0 };
    const int runs = pk_tile_runs(eg, 0, start);
    for (int n = 0; n < runs; n++) {
        first_item[n + 1] = first_item[n] + (start[n + 1] - start[n] + PK_F16_COL_BLOCK - 1) / PK_F16_COL_BLOCK * row_blocks;
    }
    for (int64_t item = cpu_task_next_chunk(task); item < first_item[runs]; item = cpu_task_next_chunk(task)) {
        int n = 0;
        while (item >= first_item[n + 1]) n++;
        const int64_t rb = (item - first_item[n]) % row_blocks, cb = (item - first_item[n]) / row_blocks;
        const int64_t row0 = rb * rows_per_item, slot0 = start[n] + cb * PK_F16_COL_BLOCK;
        const struct tensor *w = dst->src[2 + eg->expert_of[start[n]]];
        const struct pk_f16_item it = {
            .w = pk_f16_row(w, row0, 0, 0), .w_stride = w->nb[1] / sizeof(fp16_t),
            .nrows = (int)(nrows - row0 < rows_per_item ? nrows - row0 : rows_per_item),
            .act = (const float *)tl->act + (size_t)slot0 * pk_f16_stride(k), .act_stride = pk_f16_stride(k),
            .ncols = (int)(start[n + 1] - slot0 < PK_F16_COL_BLOCK ? start[n + 1] - slot0 : PK_F16_COL_BLOCK),
            .k = k, .scratch = (float *)tl->decoded, .dst = tl->tile_out, .dst_stride = (size_t)rows_per_item,
        };
        pk_kernels()->f16(&it);
        for (int j = 0; j < it.ncols; j++) {
            memcpy(cpu_elem(dst, row0, eg->col_of[slot0 + j], 0, 0), it.dst + (size_t)j * it.dst_stride,
                   (size_t)it.nrows * sizeof(float));
        }
    }
}

bool cpu_packed_f16_available(int64_t k) { return pk_kernels() && pk_kernels()->f16 && k % 32 == 0; }
size_t cpu_packed_f16_col_stride(int64_t k) { return pk_f16_stride(k); }
size_t cpu_packed_f16_scratch_floats(int64_t k) {
    /* Not monotonic in k: a shorter k may take more rows per item
     * (pk_f16_rows: a multiple of 16). For each count of rows the largest k
     * that takes it needs the most, so the candidates are k and the largest
     * k' <= k taking at least 32, 48, ... rows (stride <= floats / rows). */
    size_t most = pk_f16_scratch_floats(k);
    for (int rows = 32; rows <= PK_F16_MAX_ROWS; rows += 16) {
        int64_t kk = ((int64_t)((PK_F16_ROWS_BYTES / sizeof(float)) / (size_t)rows) - 16) / 32 * 32;
        if (kk > k) kk = k;
        if (kk < 32) continue;
        const size_t n = pk_f16_scratch_floats(kk);
        most = n > most ? n : most;
    }
    return most;
}

void cpu_packed_f16_product(const uint16_t *w, size_t w_stride, int64_t nrows, const float *act, size_t act_stride,
                            int64_t ncols, int64_t k, float *scratch, float *dst, size_t dst_stride) {
    const pk_f16_item_fn kernel = pk_kernels()->f16;
    const int64_t rows_per_item = ncols < PK_F16_MIN_COLS ? 16 : pk_f16_rows(k);
    for (int64_t col0 = 0; col0 < ncols; col0 += PK_F16_COL_BLOCK) {
        for (int64_t row0 = 0; row0 < nrows; row0 += rows_per_item) {
            const struct pk_f16_item it = {
                .w = w + row0 * w_stride, .w_stride = w_stride,
                .nrows = (int)(nrows - row0 < rows_per_item ? nrows - row0 : rows_per_item),
                .act = act + col0 * act_stride, .act_stride = act_stride,
                .ncols = (int)(ncols - col0 < PK_F16_COL_BLOCK ? ncols - col0 : PK_F16_COL_BLOCK),
                .k = k, .scratch = scratch, .dst = dst + col0 * dst_stride + row0, .dst_stride = dst_stride,
            };
            kernel(&it);
        }
    }
}

/* Whether the previous node left this product's activations in the work
 * memory: a product on this path of the same x with weights of the same
 * type (the same records, corrections included) and no mask. Q, K and V,
 * and an FFN's gate and up, follow one another in the graph (llama_graph.c). */
static bool pk_act_ready(const struct tensor *prev, const struct tensor *dst) {
    return prev && prev->op == OP_MUL_MAT && dst->op == OP_MUL_MAT && !prev->src[2] && !dst->src[2] &&
           prev->src[1] == dst->src[1] && prev->src[0]->type == dst->src[0]->type && pk_kind_of(prev) != PK_NONE;
}

/* mul_mat_id as the mul_mat of expert e (its weight, the same x and
 * output): a node of its own, which the functions above take. */
static struct tensor pk_expert_product(const struct tensor *dst, int e) {
    struct tensor node = *dst;
    node.op = OP_MUL_MAT;
    node.op_params[0] = MUL_MAT_ORDER_REFERENCE;
    node.src[0] = dst->src[2 + e];
    for (int i = 2; i < TENSOR_MAX_SRC; i++) node.src[i] = NULL;
    return node;
}

bool cpu_fast_mul_mat_id_applies(const struct tensor *dst) {
    const int n_as = dst->op_params[1];
    const struct tensor *x = dst->src[1];
    if (x->ne[2] != 1 || x->ne[3] != 1) return false;
    for (int e = 0; e < n_as; e++) {
        const struct tensor node = pk_expert_product(dst, e);
        const enum pk_kind kind = pk_kind_of(&node);
        if (kind == PK_NONE) return false;
    }
    return true;
}

/* Column c's expert, or -1 (the computation fails) when its id is out of range. */
static int pk_expert_of(const struct cpu_task *task, const struct tensor *dst, int64_t c) {
    int32_t id;
    memcpy(&id, cpu_elem(dst->src[0], dst->op_params[0], c, 0, 0), sizeof id);
    if (id >= 0 && id < dst->op_params[1]) return id;
    cpu_kernel_fail(task, CPU_ERR_EXPERT_INDEX);
    return -1;
}

/* Work memory of mul_mat_id with more than one column: the columns
 * converted into up to tiles_max tiles of max_cols slots (grouped by
 * expert; F16: float rows, a tile per column), then per thread the
 * converter's and kernel's scratch, the groups (pk_expert_groups) and one
 * tile's outputs (F16: one work item's). */
struct pk_expert_work {
    int max_cols;
    int64_t tiles_max;
    size_t act, scratch, groups, tile_out;
};

static struct pk_expert_work pk_expert_work_of(const struct tensor *dst) {
    const struct tensor node = pk_expert_product(dst, 0);
    const struct tensor *w = node.src[0];
    const int64_t ncols = dst->src[1]->ne[1], k = w->ne[0];
    const struct pk_type *pt = w->type == GGML_TYPE_F16 ? NULL : pk_product_type(w, ncols);
    struct pk_expert_work z = { .max_cols = pt ? pt->max_cols : 1 };
    z.tiles_max = (ncols + z.max_cols - 1) / z.max_cols + dst->op_params[1];
    const size_t slots = (size_t)(z.tiles_max * z.max_cols);
    z.act = pk_pad64(pt ? slots * (size_t)pk_blocks_per_row(w) * pk_act_record(pt->act)
                        : slots * pk_f16_stride(k) * sizeof(float));
    z.scratch = pk_scratch_bytes(&node);
    z.groups = pk_pad64((size_t)(ncols + z.tiles_max * (z.max_cols + 1)) * sizeof(int32_t));
    z.tile_out = pk_pad64((pt ? (size_t)(pt->max_cols * pt->rows) : (size_t)pk_f16_rows(k) * PK_F16_COL_BLOCK) *
                          sizeof(float));
    return z;
}

size_t cpu_fast_mul_mat_id_work(const struct tensor *dst, int n_threads) {
    if (dst->src[1]->ne[1] == 1) {
        const struct tensor node = pk_expert_product(dst, 0);
        return cpu_fast_mul_mat_work(&node, n_threads);
    }
    const struct pk_expert_work z = pk_expert_work_of(dst);
    return z.act + (size_t)n_threads * (z.scratch + z.groups + z.tile_out);
}

/* Fills eg (its arrays set) from the ids: experts in order, each one's
 * columns in order. Every thread computes the same groups in each phase. */
static void pk_group_experts(const struct cpu_task *task, const struct tensor *dst, int max_cols,
                             struct pk_expert_groups *eg) {
    const int64_t ncols = dst->src[1]->ne[1];
    int64_t next[TENSOR_MAX_SRC] = { 0 }; /* columns per expert, then its next slot */
    for (int64_t c = 0; c < ncols; c++) {
        const int e = pk_expert_of(task, dst, c);
        eg->slot_of[c] = e; /* the expert until its slot is known */
        if (e >= 0) next[e]++;
    }
    eg->tiles = 0;
    for (int e = 0; e < dst->op_params[1]; e++) {
        const int64_t tiles = (next[e] + max_cols - 1) / max_cols;
        next[e] = eg->tiles * max_cols;
        for (int64_t t = 0; t < tiles; t++) eg->expert_of[eg->tiles++] = e;
    }
    for (int64_t s = 0; s < eg->tiles * max_cols; s++) eg->col_of[s] = -1;
    for (int64_t c = 0; c < ncols; c++) {
        const int e = eg->slot_of[c];
        if (e < 0) continue;
        eg->slot_of[c] = (int32_t)next[e]++;
        eg->col_of[eg->slot_of[c]] = (int32_t)c;
    }
}

/* One column (generation): the selected expert's product, the threads
 * sharing its rows. More columns (a prompt): the columns grouped by expert
 * into tiles, which run as mul_mat's do (F16: each expert's columns in
 * work items of its rows). */
void cpu_fast_mul_mat_id(const struct cpu_task *task, struct tensor *dst) {
    const int64_t ncols = dst->src[1]->ne[1];
    if (ncols == 1) {
        /* INIT: the experts share one type, so one layout of the activations */
        const int e = task->phase == CPU_PHASE_INIT ? 0 : pk_expert_of(task, dst, 0);
        if (e < 0) return;
        struct tensor node = pk_expert_product(dst, e);
        cpu_fast_mul_mat(task, &node);
        return;
    }
    const struct pk_expert_work z = pk_expert_work_of(dst);
    uint8_t *own = (uint8_t *)task->wdata + z.act + (size_t)task->ith * (z.scratch + z.groups + z.tile_out);
    struct pk_expert_groups eg = { .slot_of = (int32_t *)(own + z.scratch) };
    eg.col_of = eg.slot_of + ncols;
    eg.expert_of = eg.col_of + z.tiles_max * z.max_cols;
    pk_group_experts(task, dst, z.max_cols, &eg);
    if (task->phase == CPU_PHASE_INIT) {
        pk_convert_x(task, dst->src[2], dst->src[1], (uint8_t *)task->wdata, own, eg.slot_of);
    } else {
        const struct pk_tiles tl = {
            .act = (const uint8_t *)task->wdata, .eg = &eg, .tile_out = (float *)(own + z.scratch + z.groups),
            .decoded = own,
        };
        if (dst->src[2]->type == GGML_TYPE_F16) pk_f16_experts_compute(task, dst, &tl);
        else if (pk_type_get(dst->src[2]->type)->act == PK_ACT_IQ2) pk_iq2_compute(task, dst, &tl);
        else pk_quant_compute(task, dst, &tl);
    }
}

void cpu_fast_mul_mat(const struct cpu_task *task, struct tensor *dst) {
    if (task->phase == CPU_PHASE_INIT) {
        if (!pk_act_ready(task->prev, dst)) {
            pk_convert_x(task, dst->src[0], dst->src[1], (uint8_t *)task->wdata, pk_thread_scratch(task, dst), NULL);
        }
        if (pk_mask_table_bytes(dst)) pk_mask_scan(task, dst);
    } else if (dst->src[0]->type == GGML_TYPE_F16) {
        pk_f16_compute(task, dst);
    } else {
        const struct pk_tiles tl = { .act = (const uint8_t *)task->wdata, .decoded = pk_thread_scratch(task, dst) };
        if (pk_kind_of(dst) != PK_IQ2) pk_quant_compute(task, dst, &tl);
        else if (pk_iq2_vec_takes(dst->src[1])) pk_iq2_vec_compute(task, dst);
        else pk_iq2_compute(task, dst, &tl);
    }
}

bool cpu_fast_mul_mat_first_bytes(const struct tensor *dst, int ith, int nth, const uint8_t **p, size_t *n) {
    const struct tensor *w = dst->src[0], *x = dst->src[1];
    const int64_t ncols = tensor_nrows(x);
    switch (pk_kind_of(dst)) {
        case PK_QUANT: {
            const struct pk_type *pt = pk_product_type(w, ncols);
            if (ncols > pt->max_cols) return false; /* not pk_quant_compute's vec */
            const uint8_t *packed = ((const struct cpu_packed_weight *)w->extra)->data;
            return pk_vec_own_bytes(packed, pk_groups(w), pk_group_bytes(pt, pk_blocks_per_row(w)), ith, nth, p, n);
        }
        case PK_F16: {
            const struct pk_f16_grid g = pk_f16_grid_of(dst);
            if (ncols >= PK_F16_MIN_COLS || dst->src[2] || !tensor_is_contiguous(w) || tensor_nrows(w) != w->ne[1] ||
                x->ne[1] != ncols) {
                return false; /* not pk_f16_compute's vec, or items not in one run of rows */
            }
            return pk_vec_own_bytes(w->data, g.row_blocks, (size_t)g.rows_per_item * w->nb[1], ith, nth, p, n);
        }
        default: return false;
    }
}

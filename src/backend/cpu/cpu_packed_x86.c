/*
 * AVX-512 (F, BW, VL, DQ, VNNI) micro-kernels of the packed matrix products
 * (cpu_packed.h, layouts in cpu_packed_impl.h).
 *
 * Quantized tiles: a 512-bit register holds the lanes of 4 rows (dword 4r + k
 * = b1892's lane k of row r), so every instruction works on 4 outputs of one
 * column: vpdpbusd forms the integer lanes of a block (starting from the
 * activations' bias correction), vcvtdq2ps and one vfmadd231ps with the
 * rows' scales times the column's fuse them into the float lanes, block by
 * block. Lanes 0-3 and 4-7 of a row sit in two accumulators; at the end they
 * are added (lane k onto k + 4) and reduced per row as hsum_float_8.
 * Two kernels serve the legacy types Q5_0, Q4_1, Q5_1 (pk_q8fam_*), two
 * families the k-quants (Q4_K, Q5_K: pk_q4_K_tile_c; Q2_K, Q3_K, Q6_K:
 * pk_q6_K_tile_c); what each type adds is said there.
 *
 * Q4_0 and Q8_0 (exact) in groups of 16 rows: dword lane r of a register is
 * row r, its 4 bytes b1892's lane j of a block in step j, so a block takes
 * per column 8 vpdpbusd, 8 conversions and 8 FMAs into 8 lane accumulators,
 * reduced at the end by vertical adds in hsum_float_8's order
 * (pk_lanes16_tile_c).
 *
 * Fast-mode tiles (Q4_0, Q8_0 in groups of 16 rows, up to 12 columns):
 * dword lane r of a register is row r, so a block takes 8 vpdpbusd per
 * column (each with 4 activation bytes broadcast by the instruction's own
 * memory operand, from the column's correction on), then one vcvtdq2ps, one
 * vmulps (the 16 rows' scales times the column's) and one vfmadd231ps. The
 * 8 steps go across the columns, one weight register (4 elements of the 16
 * rows; Q4_0 nibbles unpacked once) feeding every column's independent
 * chain; the float accumulators are the outputs (no reduction).
 *
 * Fast-mode tiles on AMX (32-96 columns or more, 16 columns x 16 rows): Q4_0
 * and Q8_0 per block one tdpbusd, its int32 sums stored and taken through
 * the same conversion, multiply and FMA (pk_amx_run); Q4_K and Q6_K per
 * super-block 8 tdpbusd over two byte planes of the quants times their
 * scales, whose sums make the super-block's integer sum (pk_amx_kq_run).
 *
 * Fast-mode k-quants (Q4_K, Q6_K in groups of 16 rows, up to 8 columns):
 * the same chains per 16 elements (Q6_K: per 8, two to a register of word
 * pairs), each scaled by its sub-block's scale into an exact integer sum
 * with one vpdpwssd, then per super-block one conversion and one FMA (Q4_K:
 * two, with the mins).
 *
 * IQ2 tiles (IQ2_XXS, IQ2_XS; 4 decoded rows x up to 6 columns): two rows
 * to a register, each row's 8 lanes as b1892's, fed by vpdpwssd with the
 * weights already times their scales (int16, exact), then per super-block
 * one vcvtdq2ps and one vfmadd231ps as in the exact k-quant tiles.
 *
 * IQ2 matrix-vector products (pk_iq2_vec; also AVX-512 VBMI and GFNI; up
 * to 6 columns, which share the lookups and masks below):
 * the file's rows two at a time, a byte per group of 8 values (64 groups a
 * super-block): vpermi2b looks up the grid's level codes of all 64 groups
 * at once, an affine transform over GF(2) maps two levels to magnitudes,
 * the activations take the groups' signs (vptestmb + a masked vpsubb), and
 * vpmaddubsw + vpmaddwd with the odd scales give b1892's integer lanes,
 * transposed into place; then one vcvtdq2ps and one vfmadd231ps. About 80
 * vector instructions per 512 weights: compute-bound, at 3.5x the row
 * kernels' speed.
 *
 * F16 tiles: each output keeps b1892's 4 x 8 float accumulators as two
 * registers (accumulators 0,1 and 2,3) fed by one vfmadd231ps per 16
 * elements; the reduction is quant_float.c's.
 */
#define _GNU_SOURCE /* syscall */
#include "backend/cpu/cpu_packed_impl.h"

#include "core/cpu_features.h"

#if defined(__x86_64__)
#include <immintrin.h>

#include <errno.h>
#include <stddef.h>
#include <string.h>
#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

#include "core/fp16.h"
#include "core/log.h"
#include "quant/iq2_tables.h"
#include "quant/quant_blocks.h"

#define PK_TARGET "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq,avx512vnni"
#define PK_FN static inline __attribute__((target(PK_TARGET), always_inline))
#define PK_KERNEL static __attribute__((target(PK_TARGET)))
/* Loops over a tile's rows, columns and a block's chunks are unrolled even
 * at -O2 (the Ruby gem's build): their accumulators must live in registers. */
#define PK_UNROLL _Pragma("GCC unroll 16")

/* The 4 rows' float scales (halves at p) spread to the rows' 4 lanes each. */
PK_FN __m512 pk_row_scales(const void *p) {
    const __m128 d = _mm_cvtph_ps(_mm_loadl_epi64((const __m128i *)p));
    return _mm512_permutexvar_ps(_mm512_set_epi32(3, 3, 3, 3, 2, 2, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0),
                                 _mm512_castps128_ps512(d));
}

PK_FN __m512i pk_bcast128(const void *p) { return _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)p)); }

/* Row r's hsum_float_8 of lanes lo (0-3) and hi (4-7) for the 4 rows: lane k
 * onto k + 4, then (l0 + l2) + (l1 + l3); with `mins` (Q4_K) plus the row's 4
 * min lanes in m reduced as (m0 + m2) + (m1 + m3). The 4 results to
 * dst[0..nrows). */
PK_FN void pk_store_rows(__m512 lo, __m512 hi, __m512 m, float *dst, int nrows, bool mins) {
    const __m512 s = _mm512_add_ps(lo, hi);
    const __m512 t = _mm512_add_ps(s, _mm512_permute_ps(s, _MM_SHUFFLE(1, 0, 3, 2)));
    __m512 u = _mm512_add_ps(t, _mm512_permute_ps(t, _MM_SHUFFLE(2, 3, 0, 1)));
    if (mins) {
        const __m512 tm = _mm512_add_ps(m, _mm512_permute_ps(m, _MM_SHUFFLE(1, 0, 3, 2)));
        u = _mm512_add_ps(u, _mm512_add_ps(tm, _mm512_permute_ps(tm, _MM_SHUFFLE(2, 3, 0, 1))));
    }
    const __m128 r = _mm512_castps512_ps128(
        _mm512_permutexvar_ps(_mm512_set_epi32(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 12, 8, 4, 0), u));
    _mm_mask_storeu_ps(dst, (__mmask8)((1u << nrows) - 1), r);
}

/* The legacy types on PK_ACT_Q8 columns in groups of 4 rows (Q4_0, Q8_0:
 * pk_q4_0_tile, pk_q8_0_tile in groups of 16). */
enum pk_legacy { PK_Q5_0, PK_Q4_1, PK_Q5_1 };

static inline size_t pk_legacy_hdr(enum pk_legacy kind) {
    return kind == PK_Q5_1 ? 32 : kind == PK_Q5_0 ? 24 : 16;
}

/* A block's weight registers for 4 rows (elements 0..15 and 16..31): the
 * nibbles unpacked; with the fifth bits (row r's 16 bits at 2 r of each
 * 8-byte mask: bit l is byte 16 r + l) adding 16. */
PK_FN void pk_legacy_weights(enum pk_legacy kind, const uint8_t *q, const uint8_t *hdr, __m512i *lo, __m512i *hi) {
    const __m512i z = _mm512_loadu_si512(q), m4 = _mm512_set1_epi8(0x0F);
    *lo = _mm512_and_si512(z, m4);
    *hi = _mm512_and_si512(_mm512_srli_epi16(z, 4), m4);
    if (kind == PK_Q5_0 || kind == PK_Q5_1) {
        const uint8_t *bits = hdr + (kind == PK_Q5_1 ? 16 : 8);
        uint64_t klo, khi;
        memcpy(&klo, bits, 8);
        memcpy(&khi, bits + 8, 8);
        *lo = _mm512_mask_add_epi8(*lo, (__mmask64)klo, *lo, _mm512_set1_epi8(16));
        *hi = _mm512_mask_add_epi8(*hi, (__mmask64)khi, *hi, _mm512_set1_epi8(16));
    }
}

/* Q4_1 / Q5_1: the row's min times the column's s (d_a x its sum), fused
 * into the row's first min lane alone (the reduction adds b1892's scalar
 * sum of them). */
PK_FN __m512 pk_legacy_mins(const uint8_t *hdr, float s, __m512 acc_m) {
    return _mm512_mask3_fmadd_ps(pk_row_scales(hdr + 8), _mm512_set1_ps(s), acc_m, (__mmask16)0x1111);
}

/* Legacy rows against PK_ACT_Q8 columns; C is a constant after inlining.
 * With one column the call streams its weights (prefetched). */
PK_FN void pk_q8fam_tile(const struct pk_tile *t, const int C, const enum pk_legacy kind) {
    const int64_t nb = t->nb;
    const size_t qbytes = 64, hbytes = pk_legacy_hdr(kind);
    const bool mins = kind == PK_Q4_1 || kind == PK_Q5_1;
    const size_t ahead = pk_vec_ahead(t); /* used with one column */
    __m512 acc_lo[PK_COLS_Q8], acc_hi[PK_COLS_Q8], acc_m[PK_COLS_Q8];
    PK_UNROLL
    for (int c = 0; c < C; c++) acc_lo[c] = acc_hi[c] = acc_m[c] = _mm512_setzero_ps();
    for (int64_t i = 0; i < nb; i++) {
        const uint8_t *hdr;
        const uint8_t *q = pk_group_block(t, i, hbytes, qbytes, C == 1, ahead, &hdr);
        __m512i lo, hi;
        pk_legacy_weights(kind, q, hdr, &lo, &hi);
        const __m512 dx = pk_row_scales(hdr);
        PK_UNROLL
        for (int c = 0; c < C; c++) {
            const struct pk_act_q8 *a = (const struct pk_act_q8 *)t->act + i * PK_COLS_Q8 + c;
            const __m512i ilo = _mm512_dpbusd_epi32(pk_bcast128(a->corr), lo, pk_bcast128(a->qs));
            const __m512i ihi = _mm512_dpbusd_epi32(pk_bcast128(a->corr + 4), hi, pk_bcast128(a->qs + 16));
            const __m512 d = _mm512_mul_ps(dx, _mm512_set1_ps(a->d));
            acc_lo[c] = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(ilo), acc_lo[c]);
            acc_hi[c] = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(ihi), acc_hi[c]);
            if (mins) acc_m[c] = pk_legacy_mins(hdr, a->s, acc_m[c]);
        }
    }
    PK_UNROLL
    for (int c = 0; c < C; c++) pk_store_rows(acc_lo[c], acc_hi[c], acc_m[c], t->dst + c * t->dst_stride, t->nrows, mins);
}

/* acc += vpdpbusd(w, the 4 bytes at y in every lane), the bytes read by the
 * instruction itself ({1to16}): one fused uop where GCC would emit a
 * separate vpbroadcastd. */
PK_FN void pk_dpbusd_bcast(__m512i *acc, __m512i w, const int8_t *y) {
    __asm__("vpdpbusd %2%{1to16%}, %1, %0" : "+v"(*acc) : "v"(w), "m"(*(const int32_t *)y));
}

_Static_assert(PK_COLS_FAST == 12, "PK_DISPATCH_FAST covers the fast column tile");

/* Step j (elements 4 j ..4 j + 3 of 16 rows) of a 16-row Q4_0 (q4: the
 * nibbles, low for j < 4) or Q8_0 block as unsigned bytes. */
PK_FN __m512i pk_step16(const uint8_t *q, const int j, const bool q4) {
    if (!q4) return _mm512_loadu_si512(q + 64 * j);
    const __m512i z = _mm512_loadu_si512(q + 64 * (j % 4));
    return _mm512_and_si512(j < 4 ? z : _mm512_srli_epi16(z, 4), _mm512_set1_epi8(0x0F));
}

/* The second group of a two-group call as a call of its own. */
PK_FN struct pk_tile pk_tile_second(const struct pk_tile *t) {
    struct pk_tile s = *t;
    s.w += t->group_bytes;
    s.dst += PK_FAST_ROWS;
    s.nrows = t->nrows2;
    s.nrows2 = 0;
    return s;
}

/* Stores a fast tile's outputs: 16 rows (lane = row, lanes past t->nrows
 * masked off) x C columns. */
PK_FN void pk_fast_store(const struct pk_tile *t, const __m512 *acc, const int C) {
    const __mmask16 m = (__mmask16)((1u << t->nrows) - 1);
    PK_UNROLL
    for (int c = 0; c < C; c++) _mm512_mask_storeu_ps(t->dst + c * t->dst_stride, m, acc[c]);
}

/* Fast mode: 16 rows x C columns (C <= PK_COLS_FAST). Each output follows
 * cpu_fast_mode_dot's operations: the block's exact integer sum (the
 * unsigned weights' products plus the activations' correction), converted,
 * times d_w d_a rounded, fused into the output's accumulator in block
 * order. With one column the block's sum is one chain of 8 vpdpbusd, as
 * with many: split into two (even and odd steps) it streamed 5% slower
 * (Q4_0 2048 x 5632, one and two threads; Q8_0 even; in-process A/B, Zen
 * 5), and fast Q4_0 generation fell behind the exact kernel's. */
PK_FN void pk_fast_tile_c(const struct pk_tile *t, const int C, const bool q4) {
    const size_t ahead = pk_vec_ahead(t); /* used with one column */
    const size_t qbytes = q4 ? 256 : 512;
    __m512 acc[PK_COLS_FAST];
    PK_UNROLL
    for (int c = 0; c < C; c++) acc[c] = _mm512_setzero_ps();
    for (int64_t i = 0; i < t->nb; i++) {
        const struct pk_act_q8f *a = (const struct pk_act_q8f *)t->act + i * PK_COLS_FAST;
        const uint8_t *hdr;
        const uint8_t *q = pk_group_block(t, i, 32, qbytes, C == 1, ahead, &hdr);
        /* step by step across the columns: C independent vpdpbusd chains in
         * flight, each step's weights (4 elements of the 16 rows) in one
         * register */
        __m512i isum[PK_COLS_FAST];
        PK_UNROLL
        for (int c = 0; c < C; c++) isum[c] = _mm512_set1_epi32(a[c].corr);
        PK_UNROLL
        for (int j = 0; j < 8; j++) {
            const __m512i w = pk_step16(q, j, q4);
            PK_UNROLL
            for (int c = 0; c < C; c++) pk_dpbusd_bcast(&isum[c], w, a[c].qs + 4 * j);
        }
        const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)hdr));
        PK_UNROLL
        for (int c = 0; c < C; c++) {
            const __m512 d = _mm512_mul_ps(dw, _mm512_set1_ps(a[c].d));
            acc[c] = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(isum[c]), acc[c]);
        }
    }
    pk_fast_store(t, acc, C);
}

#define PK_DISPATCH_8(body)                   \
    switch (t->ncols) {                       \
        case 1: body(1); break;               \
        case 2: body(2); break;               \
        case 3: body(3); break;               \
        case 4: body(4); break;               \
        case 5: body(5); break;               \
        case 6: body(6); break;               \
        case 7: body(7); break;               \
        default: body(8); break;              \
    }

/* The legacy tiles: up to 8 columns. */
#define PK_LEGACY_TILE(name, KIND)                                     \
    PK_KERNEL void name(const struct pk_tile *t) {                     \
        const enum pk_legacy kind = KIND;                              \
        PK_DISPATCH_8(PK_LEGACY_COLS)                                  \
    }
#define PK_LEGACY_COLS(C) pk_q8fam_tile(t, C, kind)
PK_LEGACY_TILE(pk_q5_0_tile, PK_Q5_0)
PK_LEGACY_TILE(pk_q4_1_tile, PK_Q4_1)
PK_LEGACY_TILE(pk_q5_1_tile, PK_Q5_1)
#undef PK_LEGACY_COLS
#undef PK_LEGACY_TILE

/* Q4_0 and Q8_0, exact, in groups of 16 rows (the fast mode's layouts):
 * fast step j (elements 4 j ..4 j + 3 of the 16 rows, dword lane = row) is
 * b1892's lane j of the block's dot product (x86: dword j of
 * mul_sum_i8_pairs_float), so one register holds lane j of 16 rows. Per
 * block and column: 8 vpdpbusd (each from the lane's bias correction), 8
 * conversions and 8 FMAs into the output's 8 lane accumulators, whose
 * hsum_float_8 at the end is vertical adds. Fewer operations per weight
 * byte than the 4-row layout's (one scale conversion and product per 16
 * rows, no lane shuffles): Q4_0 (Xeon, bench_matmul -t 2 -k 2048 -n 5632)
 * --gen-only 28.9 -> 32.1-32.9 GB/s, --prompt-only -m 512 420-428 ->
 * 458-460 GOP/s; Q8_0 (Zen 5, once generation's prefetches reached the
 * next call's groups) -m 512 430-496 -> 586-669 GOP/s, -t 1 -n 512 -m 256
 * 200-232 -> 290-298, generation unchanged. C columns from c0, C <=
 * PK_LANES16_COLS (8 accumulators an output); q4: Q4_0's nibbles, else
 * Q8_0's bytes. */
#define PK_LANES16_COLS 3
PK_FN void pk_lanes16_tile_c(const struct pk_tile *t, const int C, const int c0, const bool q4) {
    const size_t ahead = pk_vec_ahead(t); /* used with one column */
    const size_t qbytes = q4 ? 256 : 512;
    __m512 acc[PK_LANES16_COLS][8];
    PK_UNROLL
    for (int c = 0; c < C; c++) {
        PK_UNROLL
        for (int l = 0; l < 8; l++) acc[c][l] = _mm512_setzero_ps();
    }
    for (int64_t i = 0; i < t->nb; i++) {
        const struct pk_act_q8 *a = (const struct pk_act_q8 *)t->act + i * PK_COLS_Q8 + c0;
        const uint8_t *hdr;
        const uint8_t *q = pk_group_block(t, i, 32, qbytes, C == 1, ahead, &hdr);
        const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)hdr));
        __m512 d[PK_LANES16_COLS];
        PK_UNROLL
        for (int c = 0; c < C; c++) d[c] = _mm512_mul_ps(dw, _mm512_set1_ps(a[c].d));
        PK_UNROLL
        for (int j = 0; j < 8; j++) {
            const __m512i w = pk_step16(q, j, q4);
            PK_UNROLL
            for (int c = 0; c < C; c++) {
                __m512i lane = _mm512_set1_epi32(a[c].corr[j]);
                pk_dpbusd_bcast(&lane, w, a[c].qs + 4 * j);
                acc[c][j] = _mm512_fmadd_ps(d[c], _mm512_cvtepi32_ps(lane), acc[c][j]);
            }
        }
    }
    __m512 out[PK_LANES16_COLS];
    PK_UNROLL
    for (int c = 0; c < C; c++) {
        const __m512 *l = acc[c];
        out[c] = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(l[0], l[4]), _mm512_add_ps(l[2], l[6])),
                               _mm512_add_ps(_mm512_add_ps(l[1], l[5]), _mm512_add_ps(l[3], l[7])));
    }
    struct pk_tile from_c0 = *t;
    from_c0.dst += c0 * t->dst_stride;
    pk_fast_store(&from_c0, out, C);
}

/* The tile's columns PK_LANES16_COLS at a time. */
PK_FN void pk_lanes16_tile(const struct pk_tile *t, const bool q4) {
    for (int c0 = 0; c0 < t->ncols; c0 += PK_LANES16_COLS) {
        const int left = t->ncols - c0;
        if (left >= 3) pk_lanes16_tile_c(t, 3, c0, q4);
        else if (left == 2) pk_lanes16_tile_c(t, 2, c0, q4);
        else pk_lanes16_tile_c(t, 1, c0, q4);
    }
}
PK_KERNEL void pk_q4_0_tile(const struct pk_tile *t) { pk_lanes16_tile(t, true); }
PK_KERNEL void pk_q8_0_tile(const struct pk_tile *t) { pk_lanes16_tile(t, false); }
_Static_assert(PK_LANES16_COLS == 3, "pk_lanes16_tile's cases");

/* Exact Q8_0, two groups a call (pk_kernels.q8_0_pair): one column streams
 * both groups side by side, each output as pk_lanes16_tile_c's, the
 * column's broadcasts in registers for both; more columns take the groups
 * one after the other (there the weights are the loads to share, and two
 * groups x one column ran 22% slower). Two streams a thread instead of one,
 * against the single groups interleaved in one process (the host's
 * bandwidth moves too much between processes), 2 threads: 2048 x 5632
 * +5-13%, 2048 x 2048 +6%, 2048 x 32000 +15%, 5632 x 2048 +2-5%, 2048 x
 * 256 -1% (Zen 5). Q4_0 did not gain (two threads even, one +13%), nor the
 * fast mode's one column (+3%). */
PK_KERNEL void pk_q8_0_pair(const struct pk_tile *t) {
    if (t->ncols > 1) {
        const struct pk_tile second = pk_tile_second(t);
        pk_lanes16_tile(t, false);
        pk_lanes16_tile(&second, false);
        return;
    }
    const size_t qbytes = 512, ahead = pk_stream_ahead(2 * t->group_bytes);
    const uint8_t *w2 = t->w + t->group_bytes;
    __m512 acc0[8], acc1[8];
    PK_UNROLL
    for (int l = 0; l < 8; l++) acc0[l] = acc1[l] = _mm512_setzero_ps();
    for (int64_t i = 0; i < t->nb; i++) {
        const struct pk_act_q8 *a = (const struct pk_act_q8 *)t->act + i * PK_COLS_Q8;
        const uint8_t *hdr0, *hdr1;
        const uint8_t *q0 = pk_block(t->w, i, 32, qbytes, &hdr0), *q1 = pk_block(w2, i, 32, qbytes, &hdr1);
        pk_prefetch_hdr(hdr0, 32, ahead);
        pk_prefetch_hdr(hdr1, 32, ahead);
        const __m512 da = _mm512_set1_ps(a->d);
        const __m512 d0 = _mm512_mul_ps(_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)hdr0)), da);
        const __m512 d1 = _mm512_mul_ps(_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)hdr1)), da);
        PK_UNROLL
        for (int j = 0; j < 8; j++) {
            /* each step's line of both groups as the step reaches it: the 16
             * lines asked for at the block's start stalled there (+6-9%,
             * 2048 x 5632 and 5632 x 2048, one and two threads, Zen 5) */
            pk_prefetch(q0 + 64 * j, 64, ahead, false);
            pk_prefetch(q1 + 64 * j, 64, ahead, false);
            __m512i y = _mm512_set1_epi32(*(const int32_t *)(a->qs + 4 * j));
            PK_KEEP_IN_REGISTER(y); /* one load for both groups */
            const __m512i corr = _mm512_set1_epi32(a->corr[j]);
            const __m512i l0 = _mm512_dpbusd_epi32(corr, pk_step16(q0, j, false), y);
            const __m512i l1 = _mm512_dpbusd_epi32(corr, pk_step16(q1, j, false), y);
            acc0[j] = _mm512_fmadd_ps(d0, _mm512_cvtepi32_ps(l0), acc0[j]);
            acc1[j] = _mm512_fmadd_ps(d1, _mm512_cvtepi32_ps(l1), acc1[j]);
        }
    }
    __m512 out[2];
    PK_UNROLL
    for (int g = 0; g < 2; g++) {
        const __m512 *l = g ? acc1 : acc0;
        out[g] = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(l[0], l[4]), _mm512_add_ps(l[2], l[6])),
                               _mm512_add_ps(_mm512_add_ps(l[1], l[5]), _mm512_add_ps(l[3], l[7])));
    }
    _mm512_storeu_ps(t->dst, out[0]);
    _mm512_mask_storeu_ps(t->dst + PK_FAST_ROWS, (__mmask16)((1u << t->nrows2) - 1), out[1]);
}

#define PK_DISPATCH_FAST(body)            \
    switch (t->ncols) {                   \
        case 1: body(1); break;           \
        case 2: body(2); break;           \
        case 3: body(3); break;           \
        case 4: body(4); break;           \
        case 5: body(5); break;           \
        case 6: body(6); break;           \
        case 7: body(7); break;           \
        case 8: body(8); break;           \
        case 9: body(9); break;           \
        case 10: body(10); break;         \
        case 11: body(11); break;         \
        default: body(12); break;         \
    }

PK_KERNEL void pk_q4_0_fast_tile(const struct pk_tile *t) {
#define PK_Q4_0_FAST(C) pk_fast_tile_c(t, C, true)
    PK_DISPATCH_FAST(PK_Q4_0_FAST)
#undef PK_Q4_0_FAST
}

PK_KERNEL void pk_q8_0_fast_tile(const struct pk_tile *t) {
#define PK_Q8_0_FAST(C) pk_fast_tile_c(t, C, false)
    PK_DISPATCH_FAST(PK_Q8_0_FAST)
#undef PK_Q8_0_FAST
}

/* Fast mode, Q4_0 (q4) and Q8_0, two groups a call (pk_kernels.q4_0_pair
 * and q8_0_pair), several columns: the group at t->w and the next one
 * (t->w + t->group_bytes, t->nrows2 of its rows stored, at t->dst +
 * PK_FAST_ROWS) x C columns from c0 (C <= PK_FAST_PAIR_COLS), each output
 * as pk_fast_tile_c's. An activation
 * broadcast, loaded into a register once, feeds both groups' vpdpbusd. Zen
 * 5 loads two vectors a cycle, as many as it runs vpdpbusd, and 16 rows x
 * 12 columns take a load per vpdpbusd (its embedded broadcast) besides the
 * corrections', scales' and weights': about 1.3 a vpdpbusd, against 0.8
 * here. bench_matmul -t 1 --prompt-only -k 2048 -n 5632 -m 512, best of
 * 10, six rounds: 616-636 -> 650-669 GOP/s; llamac bench --fast-matmul pp
 * 512 on the TinyLlama-shaped Q8_0 +5% (Zen 5). Q4_0 first lost 3-4%: its
 * high nibbles' lines, held in registers since the low ones', spilled two
 * accumulators to the stack. Loaded again, and against its single group
 * interleaved in one process (-k 2048 -n 5632 -m 512): one thread +3% (736
 * -> 755 GOP/s), two +1-4%. (Zen 5 runs vpdpbusd, vmulps and vfmadd on the
 * same two pipes: the epilogue's multiply and FMA per 8 vpdpbusd cap a
 * tile at 0.8 of the vpdpbusd peak.) */
#define PK_FAST_PAIR_COLS (PK_COLS_FAST / 2)
PK_FN void pk_fast_pair_c(const struct pk_tile *t, const int C, const int c0, const bool q4) {
    const size_t qbytes = q4 ? 256 : 512;
    const uint8_t *second = t->w + t->group_bytes;
    __m512 acc0[PK_FAST_PAIR_COLS], acc1[PK_FAST_PAIR_COLS];
    PK_UNROLL
    for (int c = 0; c < C; c++) acc0[c] = acc1[c] = _mm512_setzero_ps();
    for (int64_t i = 0; i < t->nb; i++) {
        const struct pk_act_q8f *a = (const struct pk_act_q8f *)t->act + i * PK_COLS_FAST + c0;
        const uint8_t *hdr0, *hdr1;
        const uint8_t *q0 = pk_block(t->w, i, 32, qbytes, &hdr0), *q1 = pk_block(second, i, 32, qbytes, &hdr1);
        __m512i isum0[PK_FAST_PAIR_COLS], isum1[PK_FAST_PAIR_COLS];
        PK_UNROLL
        for (int c = 0; c < C; c++) isum0[c] = isum1[c] = _mm512_set1_epi32(a[c].corr);
        PK_UNROLL
        for (int j = 0; j < 8; j++) {
            /* Q4_0: the high nibbles' steps load their lines again (an
             * opaque pointer): held in registers since the low nibbles'
             * steps, those 8 registers spilled accumulators */
            if (q4 && j == 4) __asm__("" : "+r"(q0), "+r"(q1));
            const __m512i w0 = pk_step16(q0, j, q4), w1 = pk_step16(q1, j, q4);
            PK_UNROLL
            for (int c = 0; c < C; c++) {
                __m512i y = _mm512_set1_epi32(*(const int32_t *)(a[c].qs + 4 * j));
                PK_KEEP_IN_REGISTER(y); /* one load for both groups, not one embedded in each */
                isum0[c] = _mm512_dpbusd_epi32(isum0[c], w0, y);
                isum1[c] = _mm512_dpbusd_epi32(isum1[c], w1, y);
            }
        }
        const __m512 dw0 = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)hdr0));
        const __m512 dw1 = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)hdr1));
        PK_UNROLL
        for (int c = 0; c < C; c++) {
            const __m512 da = _mm512_set1_ps(a[c].d);
            acc0[c] = _mm512_fmadd_ps(_mm512_mul_ps(dw0, da), _mm512_cvtepi32_ps(isum0[c]), acc0[c]);
            acc1[c] = _mm512_fmadd_ps(_mm512_mul_ps(dw1, da), _mm512_cvtepi32_ps(isum1[c]), acc1[c]);
        }
    }
    const __mmask16 m1 = (__mmask16)((1u << t->nrows2) - 1);
    PK_UNROLL
    for (int c = 0; c < C; c++) {
        float *dst = t->dst + (c0 + c) * t->dst_stride;
        _mm512_storeu_ps(dst, acc0[c]);
        _mm512_mask_storeu_ps(dst + PK_FAST_ROWS, m1, acc1[c]);
    }
}

/* The tile's columns PK_FAST_PAIR_COLS at a time; one column (generation)
 * streams the groups one after the other (side by side, even +3%). */
PK_FN void pk_fast_pair(const struct pk_tile *t, const bool q4) {
    if (t->ncols == 1) {
        const struct pk_tile second = pk_tile_second(t);
        pk_fast_tile_c(t, 1, q4);
        pk_fast_tile_c(&second, 1, q4);
        return;
    }
    for (int c0 = 0; c0 < t->ncols; c0 += PK_FAST_PAIR_COLS) {
        switch (t->ncols - c0) {
            case 1: pk_fast_pair_c(t, 1, c0, q4); break;
            case 2: pk_fast_pair_c(t, 2, c0, q4); break;
            case 3: pk_fast_pair_c(t, 3, c0, q4); break;
            case 4: pk_fast_pair_c(t, 4, c0, q4); break;
            case 5: pk_fast_pair_c(t, 5, c0, q4); break;
            default: pk_fast_pair_c(t, 6, c0, q4); break;
        }
    }
}
PK_KERNEL void pk_q4_0_fast_pair(const struct pk_tile *t) { pk_fast_pair(t, true); }
PK_KERNEL void pk_q8_0_fast_pair(const struct pk_tile *t) { pk_fast_pair(t, false); }
_Static_assert(PK_FAST_PAIR_COLS == 6, "pk_fast_pair's cases");

/* ---- fast mode on AMX tiles ---------------------------------------------------------------- */

/* The tile configurations (palette 1). Blocks (Q4_0, Q8_0): tiles 0-3
 * the int32 sums of four blocks in flight (16 columns x 16 rows), 4-5 the
 * columns' bytes (16 x 32), 6-7 the weights (8 x 64). K-quants: every
 * tile 16 x 64 (sums, columns, weight planes). */
enum pk_amx_config_kind { PK_AMX_CONFIG_NONE, PK_AMX_CONFIG_BLOCKS, PK_AMX_CONFIG_KQ };

struct pk_amx_config {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
};
_Static_assert(sizeof(struct pk_amx_config) == 64, "ldtilecfg reads 64 bytes");

/* A thread's tile configuration stays loaded once set (nothing else here
 * configures tiles), so each thread loads one when it changes kind. */
static _Thread_local enum pk_amx_config_kind pk_amx_loaded;

static void pk_amx_configure(enum pk_amx_config_kind kind) {
    if (pk_amx_loaded == kind) return;
    struct pk_amx_config c;
    memset(&c, 0, sizeof c);
    c.palette = 1;
    for (int i = 0; i < 8; i++) {
        c.rows[i] = 16;
        c.colsb[i] = 64;
    }
    if (kind == PK_AMX_CONFIG_BLOCKS) {
        c.colsb[4] = c.colsb[5] = 32;
        c.rows[6] = c.rows[7] = 8;
    }
    __asm__ volatile("ldtilecfg %0" : : "m"(c));
    pk_amx_loaded = kind;
}

/* The tile instructions as inline assembly (GCC's intrinsics neither order
 * memory around them nor build without -mamx-*), AT&T operand order. The
 * memory clobbers keep the compiler's loads and stores of the operands on
 * their side of the tile loads and stores. */
#define PK_TILEZERO(c) __asm__ volatile("tilezero %%tmm" #c ::)
#define PK_TILELOAD(t, base, stride) \
    __asm__ volatile("tileloadd (%0,%1,1), %%tmm" #t : : "r"(base), "r"((ptrdiff_t)(stride)) : "memory")
#define PK_TILESTORE(t, base, stride) \
    __asm__ volatile("tilestored %%tmm" #t ", (%0,%1,1)" : : "r"(base), "r"((ptrdiff_t)(stride)) : "memory")
/* c += a (unsigned bytes, rows = columns of the product) x b (signed, 4-byte groups) */
#define PK_TDPBUSD(c, a, b) __asm__ volatile("tdpbusd %%tmm" #b ", %%tmm" #a ", %%tmm" #c ::)

/* The group's blocks as the tiles read them (struct pk_amx_block): the
 * fast layout's steps made signed (Q4_0: nibble - 8; Q8_0: byte - 128),
 * -128 x each row's sum of them (the columns carry +128), the scales as
 * floats. */
PK_FN void pk_amx_prepare(const struct pk_tile *t, const bool q4) {
    const size_t qbytes = q4 ? 256 : 512;
    const __m512i m4 = _mm512_set1_epi8(0x0F), eight = _mm512_set1_epi8(8), ones = _mm512_set1_epi8(1);
    const __m512i flip = _mm512_set1_epi8((char)0x80);
    for (int64_t i = 0; i < t->nb; i++) {
        const uint8_t *hdr;
        const uint8_t *q = pk_group_block(t, i, 32, qbytes, false, 0, &hdr);
        struct pk_amx_block *b = t->amx + i;
        __m512i sum = _mm512_setzero_si512();
        PK_UNROLL
        for (int j = 0; j < 8; j++) {
            __m512i w;
            if (q4) {
                const __m512i z = _mm512_loadu_si512(q + 64 * (j % 4));
                w = _mm512_sub_epi8(_mm512_and_si512(j < 4 ? z : _mm512_srli_epi16(z, 4), m4), eight);
            } else {
                w = _mm512_xor_si512(_mm512_loadu_si512(q + 64 * j), flip);
            }
            _mm512_store_si512(b->w[j], w);
            sum = _mm512_dpbusd_epi32(sum, ones, w);
        }
        _mm512_store_si512(b->corr, _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_slli_epi32(sum, 7)));
        _mm512_store_ps(b->d, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)hdr)));
    }
}

/* The column scales of a tile's block, read through dm (columns past
 * t->ncols as 0, their records not being written) in a partial tile. */
PK_FN const float *pk_amx_col_scales(const float *d, const bool partial, __mmask16 cols, float *dm) {
    if (!partial) return d;
    _mm512_store_ps(dm, _mm512_maskz_loadu_ps(cols, d));
    return dm;
}

/* A tile's integer sums into the outputs: column n's 16 rows at sums + 16 n
 * (K-quants: the high plane's, the low plane's at lo + 16 n; the sum is hi
 * 2^s + lo), plus the rows' correction, then cpu_fast_mode_dot's
 * operations: the product of the rows' scales (row_d) and the column's
 * (col_d) first, one FMA; Q4_K (mins: the column's bpairs and b's mins and
 * dmin) then the mins' FMA, as pk_fast_q4_K_c. */
PK_FN void pk_amx_sums_done(const int32_t *sums, const int32_t *lo, const bool q6, const float *col_d,
                            const float *row_d, const int32_t *corr_p, const int16_t (*bpairs)[8],
                            const struct pk_amx_kblock *mins, const bool partial, __mmask16 cols, __m512 *acc) {
    _Alignas(64) float dm[PK_COLS_AMX];
    const float *d = pk_amx_col_scales(col_d, partial, cols, dm);
    const __m512 dw = _mm512_load_ps(row_d);
    const __m512i corr = _mm512_load_si512(corr_p);
    PK_UNROLL
    for (int n = 0; n < PK_COLS_AMX; n++) {
        __m512i isum = _mm512_load_si512(sums + 16 * n);
        if (lo) {
            isum = _mm512_add_epi32(q6 ? _mm512_slli_epi32(isum, 6) : _mm512_slli_epi32(isum, 5),
                                    _mm512_load_si512(lo + 16 * n));
        }
        isum = _mm512_add_epi32(isum, corr);
        const __m512 da = _mm512_set1_ps(d[n]);
        acc[n] = _mm512_fmadd_ps(_mm512_mul_ps(dw, da), _mm512_cvtepi32_ps(isum), acc[n]);
        if (mins) {
            __m512i imin = _mm512_setzero_si512();
            PK_UNROLL
            for (int p = 0; p < 4; p++) {
                int32_t pair;
                memcpy(&pair, bpairs[n] + 2 * p, 4);
                imin = _mm512_dpwssd_epi32(imin, _mm512_load_si512(mins->mins[p]), _mm512_set1_epi32(pair));
            }
            acc[n] = _mm512_fnmadd_ps(_mm512_mul_ps(_mm512_load_ps(mins->dmin), da), _mm512_cvtepi32_ps(imin), acc[n]);
        }
    }
}

/* Block u's sums, stored to buf, into the outputs. */
#define PK_AMX_BLOCK_DONE(u, buf) \
    pk_amx_sums_done(buf, NULL, false, act[u].d, blk[u].d, blk[u].corr, NULL, NULL, partial, cols, acc)

/* Block u's product into sums tile C: columns into A, weights into B. */
#define PK_AMX_PRODUCT(u, C, A, B)              \
    do {                                        \
        PK_TILEZERO(C);                         \
        PK_TILELOAD(A, act[u].qs, 32);          \
        PK_TILELOAD(B, blk[u].w, 64);           \
        PK_TDPBUSD(C, A, B);                    \
    } while (0)

/* Q4_0 / Q8_0: a group of 16 rows x a tile of up to 16 columns. The tile
 * unit and the vector units work side by side: while block u's sums are
 * taken in, block u + 1's are stored and block u + 3's product is issued,
 * each tile store a step after its product (Sapphire Rapids, one thread, k
 * = 2048: 15.8 ns a block against 17.9 storing at once and 22 with one
 * block ahead). */
PK_FN void pk_amx_run(const struct pk_tile *t, const bool partial) {
    const struct pk_act_amx *act = (const struct pk_act_amx *)t->act;
    const struct pk_amx_block *blk = t->amx;
    const int64_t nb = t->nb;
    const __mmask16 cols = (__mmask16)((1u << t->ncols) - 1);
    _Alignas(64) int32_t sums[4][256];
    __m512 acc[PK_COLS_AMX];
    PK_UNROLL
    for (int n = 0; n < PK_COLS_AMX; n++) acc[n] = _mm512_setzero_ps();
    /* block u in tile u % 4, its operands in 4 + u % 2 and 6 + u % 2 */
    PK_AMX_PRODUCT(0, 0, 4, 6);
    if (nb > 1) PK_AMX_PRODUCT(1, 1, 5, 7);
    PK_TILESTORE(0, sums[0], 64);
    if (nb > 2) PK_AMX_PRODUCT(2, 2, 4, 6);
    for (int64_t u = 0; u < nb; u += 4) {
        if (u + 1 < nb) PK_TILESTORE(1, sums[1], 64);
        if (u + 3 < nb) PK_AMX_PRODUCT(u + 3, 3, 5, 7);
        PK_AMX_BLOCK_DONE(u, sums[0]);
        if (u + 1 >= nb) break;
        if (u + 2 < nb) PK_TILESTORE(2, sums[2], 64);
        if (u + 4 < nb) PK_AMX_PRODUCT(u + 4, 0, 4, 6);
        PK_AMX_BLOCK_DONE(u + 1, sums[1]);
        if (u + 2 >= nb) break;
        if (u + 3 < nb) PK_TILESTORE(3, sums[3], 64);
        if (u + 5 < nb) PK_AMX_PRODUCT(u + 5, 1, 5, 7);
        PK_AMX_BLOCK_DONE(u + 2, sums[2]);
        if (u + 3 >= nb) break;
        if (u + 4 < nb) PK_TILESTORE(0, sums[0], 64);
        if (u + 6 < nb) PK_AMX_PRODUCT(u + 6, 2, 4, 6);
        PK_AMX_BLOCK_DONE(u + 3, sums[3]);
    }
    pk_fast_store(t, acc, t->ncols);
}
#undef PK_AMX_PRODUCT
#undef PK_AMX_BLOCK_DONE

/* K-quants on AMX (Q4_K, Q6_K). A super-block's integer sum is sum_e a_e
 * v_e with v_e = the quant (Q6_K: less 32) times its sub-block's scale,
 * which does not fit a byte; v = hi 2^s + lo with 0 <= lo < 2^s (Q4_K: s
 * = 5, v <= 945; Q6_K: s = 6, -4064 <= v <= 4096) puts it in two byte
 * planes, so the whole super-block takes two sums of 4 full tdpbusd (64
 * elements each) and one pass of vector work, where a product per
 * sub-block would take 8 (16) stores and integer multiplies. */
PK_FN void pk_amx_planes(__m512i w, __m512i scw, const bool q6, __m512i *hi, __m512i *lo) {
    /* w: signed bytes, dword lane = row; scw: the row's scale in both words of its lane */
    const __m512i ve = _mm512_mullo_epi16(_mm512_srai_epi16(_mm512_slli_epi16(w, 8), 8), scw);
    const __m512i vo = _mm512_mullo_epi16(_mm512_srai_epi16(w, 8), scw);
    const __m512i m = _mm512_set1_epi16(q6 ? 63 : 31), byte = _mm512_set1_epi16(0xFF);
    *lo = _mm512_or_si512(_mm512_and_si512(ve, m), _mm512_slli_epi16(_mm512_and_si512(vo, m), 8));
    const __m512i he = q6 ? _mm512_srai_epi16(ve, 6) : _mm512_srai_epi16(ve, 5);
    const __m512i ho = q6 ? _mm512_srai_epi16(vo, 6) : _mm512_srai_epi16(vo, 5);
    *hi = _mm512_or_si512(_mm512_and_si512(he, byte), _mm512_slli_epi16(ho, 8));
}

/* A row scale per dword lane (the low byte of each) in both of its words. */
PK_FN __m512i pk_amx_scale_words(__m512i sc) {
    return _mm512_or_si512(_mm512_and_si512(sc, _mm512_set1_epi32(0xFFFF)), _mm512_slli_epi32(sc, 16));
}

/* Stores B row r of chunk c of both planes and adds the row sums of v to *vsum. */
PK_FN void pk_amx_put_planes(struct pk_amx_kblock *b, int c, int r, __m512i w, __m512i scw, const bool q6,
                             __m512i *sum_hi, __m512i *sum_lo) {
    const __m512i ones = _mm512_set1_epi8(1);
    __m512i hi, lo;
    pk_amx_planes(w, scw, q6, &hi, &lo);
    _mm512_store_si512(b->hi[c][r], hi);
    _mm512_store_si512(b->lo[c][r], lo);
    *sum_hi = _mm512_dpbusd_epi32(*sum_hi, ones, hi);
    *sum_lo = _mm512_dpbusd_epi32(*sum_lo, ones, lo);
}

/* The group's super-blocks as the tiles read them (struct pk_amx_kblock).
 * B row r of chunk c holds elements 64 c + 4 r ..+3 of the 16 rows: Q4_K
 * sub-block 2 c + r / 8 (the low or high nibbles of fast step 8 c + r % 8),
 * Q6_K sub-block 4 c + r / 4, its elements 4 (r % 4) ..+3. */
PK_FN void pk_amx_prepare_kq(const struct pk_tile *t, const bool q6) {
    const __m512i m4 = _mm512_set1_epi8(0x0F), m2 = _mm512_set1_epi8(0x03);
    for (int64_t i = 0; i < t->nb; i++) {
        struct pk_amx_kblock *b = t->amx_k + i;
        __m512i sum_hi = _mm512_setzero_si512(), sum_lo = _mm512_setzero_si512();
        if (q6) {
            const uint8_t *hdr;
            const uint8_t *q = pk_group_block(t, i, 288, 3072, false, 0, &hdr);
            for (int j = 0; j < 16; j++) {
                const __m512i scw =
                    pk_amx_scale_words(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(hdr + 32 + 16 * j))));
                const uint8_t *z = q + 192 * j;
                const __m512i hb = _mm512_loadu_si512(z + 128);
                PK_UNROLL
                for (int k = 0; k < 4; k++) {
                    const __m512i nib = _mm512_loadu_si512(z + 64 * (k / 2));
                    const __m512i low = _mm512_and_si512(k % 2 ? _mm512_srli_epi16(nib, 4) : nib, m4);
                    __m512i high = hb;
                    if (k == 1) high = _mm512_srli_epi16(hb, 2);
                    if (k == 2) high = _mm512_srli_epi16(hb, 4);
                    if (k == 3) high = _mm512_srli_epi16(hb, 6);
                    const __m512i quant = _mm512_or_si512(low, _mm512_slli_epi16(_mm512_and_si512(high, m2), 4));
                    pk_amx_put_planes(b, j / 4, 4 * (j % 4) + k, _mm512_sub_epi8(quant, _mm512_set1_epi8(32)), scw,
                                      true, &sum_hi, &sum_lo);
                }
            }
            _mm512_store_ps(b->d, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)hdr)));
        } else {
            const uint8_t *hdr;
            const uint8_t *q = pk_group_block(t, i, 320, 2048, false, 0, &hdr);
            for (int j = 0; j < 8; j++) {
                const __m512i scw =
                    pk_amx_scale_words(_mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(hdr + 64 + 16 * j))));
                PK_UNROLL
                for (int st = 0; st < 8; st++) {
                    const __m512i z = _mm512_loadu_si512(q + 64 * (8 * (j / 2) + st));
                    const __m512i w = _mm512_and_si512(j % 2 ? _mm512_srli_epi16(z, 4) : z, m4);
                    pk_amx_put_planes(b, j / 2, 8 * (j % 2) + st, w, scw, false, &sum_hi, &sum_lo);
                }
            }
            _mm512_store_ps(b->d, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)hdr)));
            _mm512_store_ps(b->dmin, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(hdr + 32))));
            PK_UNROLL
            for (int p = 0; p < 4; p++) {
                _mm512_store_si512(b->mins[p],
                                   _mm512_cvtepu8_epi16(_mm256_loadu_si256((const __m256i *)(hdr + 192 + 32 * p))));
            }
        }
        /* -128 x the rows' sums of v = hi 2^s + lo (the columns carry +128) */
        const __m512i vsum = _mm512_add_epi32(q6 ? _mm512_slli_epi32(sum_hi, 6) : _mm512_slli_epi32(sum_hi, 5), sum_lo);
        _mm512_store_si512(b->corr, _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_slli_epi32(vsum, 7)));
    }
}

/* Super-block i's products into sums tiles CH (high plane) and CL (low):
 * for each chunk of 64 elements the columns into tile 4 or 7, the planes
 * into 5 and 6. */
#define PK_AMX_KQ_CHUNK(i, c, CH, CL, A)                 \
    do {                                                 \
        PK_TILELOAD(A, act_k[i].qs[c], 64);              \
        PK_TILELOAD(5, blk_k[i].hi[c], 64);              \
        PK_TDPBUSD(CH, A, 5);                            \
        PK_TILELOAD(6, blk_k[i].lo[c], 64);              \
        PK_TDPBUSD(CL, A, 6);                            \
    } while (0)
#define PK_AMX_KQ_PRODUCTS(i, CH, CL)                    \
    do {                                                 \
        PK_TILEZERO(CH);                                 \
        PK_TILEZERO(CL);                                 \
        PK_AMX_KQ_CHUNK(i, 0, CH, CL, 4);                \
        PK_AMX_KQ_CHUNK(i, 1, CH, CL, 7);                \
        PK_AMX_KQ_CHUNK(i, 2, CH, CL, 4);                \
        PK_AMX_KQ_CHUNK(i, 3, CH, CL, 7);                \
    } while (0)

/* Super-block i's sums (high and low plane at buf[0], buf[1]) into the outputs. */
#define PK_AMX_SUPER_BLOCK_DONE(i, buf)                                                                         \
    pk_amx_sums_done(buf[0], buf[1], q6, act_k[i].d, blk_k[i].d, blk_k[i].corr, act_k[i].bpairs,               \
                     q6 ? NULL : blk_k + (i), partial, cols, acc)

/* Q4_K / Q6_K: a group of 16 rows x a tile of up to 16 columns, super-block
 * i + 1's products issued before super-block i's sums are stored and taken
 * in (tiles 0, 1 for even super-blocks, 2, 3 for odd ones). */
PK_FN void pk_amx_kq_run(const struct pk_tile *t, const bool q6, const bool partial) {
    const struct pk_act_amx_k *act_k = (const struct pk_act_amx_k *)t->act;
    const struct pk_amx_kblock *blk_k = t->amx_k;
    const int64_t nb = t->nb;
    const __mmask16 cols = (__mmask16)((1u << t->ncols) - 1);
    _Alignas(64) int32_t sums[2][2][256];
    __m512 acc[PK_COLS_AMX];
    PK_UNROLL
    for (int n = 0; n < PK_COLS_AMX; n++) acc[n] = _mm512_setzero_ps();
    PK_AMX_KQ_PRODUCTS(0, 0, 1);
    for (int64_t i = 0; i < nb; i += 2) {
        if (i + 1 < nb) PK_AMX_KQ_PRODUCTS(i + 1, 2, 3);
        PK_TILESTORE(0, sums[0][0], 64);
        PK_TILESTORE(1, sums[0][1], 64);
        PK_AMX_SUPER_BLOCK_DONE(i, sums[0]);
        if (i + 1 >= nb) break;
        if (i + 2 < nb) PK_AMX_KQ_PRODUCTS(i + 2, 0, 1);
        PK_TILESTORE(2, sums[1][0], 64);
        PK_TILESTORE(3, sums[1][1], 64);
        PK_AMX_SUPER_BLOCK_DONE(i + 1, sums[1]);
    }
    pk_fast_store(t, acc, t->ncols);
}
#undef PK_AMX_KQ_PRODUCTS
#undef PK_AMX_SUPER_BLOCK_DONE
#undef PK_AMX_KQ_CHUNK

/* kind: Q4_0, Q8_0, Q4_K or Q6_K. */
PK_FN void pk_amx_tile(const struct pk_tile *t, const enum ggml_type kind) {
    const bool kq = kind == GGML_TYPE_Q4_K || kind == GGML_TYPE_Q6_K, q6 = kind == GGML_TYPE_Q6_K;
    if (!t->amx_ready) {
        if (kq) pk_amx_prepare_kq(t, q6);
        else pk_amx_prepare(t, kind == GGML_TYPE_Q4_0);
    }
    pk_amx_configure(kq ? PK_AMX_CONFIG_KQ : PK_AMX_CONFIG_BLOCKS);
    const bool partial = t->ncols < PK_COLS_AMX;
    if (kq) {
        if (partial) pk_amx_kq_run(t, q6, true);
        else pk_amx_kq_run(t, q6, false);
    } else {
        if (partial) pk_amx_run(t, true);
        else pk_amx_run(t, false);
    }
}

PK_KERNEL void pk_q4_0_amx_tile(const struct pk_tile *t) { pk_amx_tile(t, GGML_TYPE_Q4_0); }
PK_KERNEL void pk_q8_0_amx_tile(const struct pk_tile *t) { pk_amx_tile(t, GGML_TYPE_Q8_0); }
PK_KERNEL void pk_q4_K_amx_tile(const struct pk_tile *t) { pk_amx_tile(t, GGML_TYPE_Q4_K); }
PK_KERNEL void pk_q6_K_amx_tile(const struct pk_tile *t) { pk_amx_tile(t, GGML_TYPE_Q6_K); }

/* Linux gives a process AMX's tile data state (8 KiB more per thread to
 * save) only when it asks, once for all its threads; refused, for example,
 * when a thread's signal stack is too small for it. */
static bool pk_amx_permitted(void) {
#if defined(__linux__)
    enum { ARCH_REQ_XCOMP_PERM = 0x1023, XFEATURE_XTILEDATA = 18 };
    if (syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0) return true;
    LOG_INFO("AMX tiles refused by the kernel (%s); the fast mode keeps its AVX-512 kernels\n", strerror(errno));
#endif
    return false;
}

/* Fast-mode Q4_K: 16 rows x C columns (C <= PK_COLS_FAST_K),
 * cpu_fast_mode_dot's operations. A super-block runs in 16 pieces of 16
 * elements (4 vpdpbusd steps from zero: |sum| <= 16 x 15 x 128 fits a
 * word), each added to the integer sum times its sub-block's scale by
 * vpdpwssd (the scale zero-extended to a dword: the high word's product is
 * zero); the mins' sum takes 4 vpdpwssd of the rows' min pairs with the
 * column's sub-block sums. */
PK_FN void pk_fast_q4_K_c(const struct pk_tile *t, const int C) {
    const size_t ahead = pk_vec_ahead(t); /* used with one column */
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    __m512 acc[PK_COLS_FAST_K];
    PK_UNROLL
    for (int c = 0; c < C; c++) acc[c] = _mm512_setzero_ps();
    for (int64_t i = 0; i < t->nb; i++) {
        const struct pk_act_q8k *a = (const struct pk_act_q8k *)t->act + i * PK_COLS_FAST_K;
        const uint8_t *hdr;
        const uint8_t *q = pk_group_block_large(t, i, 320, 2048, C == 1, ahead, &hdr);
        __m512i isum[PK_COLS_FAST_K];
        PK_UNROLL
        for (int c = 0; c < C; c++) isum[c] = _mm512_setzero_si512();
        for (int jj = 0; jj < 4; jj++) {
            if (C == 1) pk_prefetch(q + 512 * jj, 512, ahead, true);
            PK_UNROLL
            for (int odd = 0; odd < 2; odd++) {
            const int j = 2 * jj + odd; /* sub-block: the low (even) or high (odd) nibbles of chunk jj */
            const __m512i sc = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(hdr + 64 + 16 * j)));
            PK_UNROLL
            for (int h = 0; h < 2; h++) {
                __m512i part[PK_COLS_FAST_K];
                PK_UNROLL
                for (int c = 0; c < C; c++) part[c] = _mm512_setzero_si512();
                PK_UNROLL
                for (int s = 4 * h; s < 4 * h + 4; s++) {
                    const __m512i z = _mm512_loadu_si512(q + 64 * (8 * jj + s));
                    const __m512i w = _mm512_and_si512(odd ? _mm512_srli_epi16(z, 4) : z, m4);
                    PK_UNROLL
                    for (int c = 0; c < C; c++) pk_dpbusd_bcast(&part[c], w, a[c].qs + 32 * j + 4 * s);
                }
                PK_UNROLL
                for (int c = 0; c < C; c++) isum[c] = _mm512_dpwssd_epi32(isum[c], part[c], sc);
            }
            }
        }
        const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)hdr));
        PK_UNROLL
        for (int c = 0; c < C; c++) {
            const __m512 d = _mm512_mul_ps(dw, _mm512_set1_ps(a[c].d));
            acc[c] = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(isum[c]), acc[c]);
            isum[c] = _mm512_setzero_si512(); /* now the mins' sum */
        }
        PK_UNROLL
        for (int p = 0; p < 4; p++) {
            const __m512i mn = _mm512_cvtepu8_epi16(_mm256_loadu_si256((const __m256i *)(hdr + 192 + 32 * p)));
            PK_UNROLL
            for (int c = 0; c < C; c++) {
                int32_t pair;
                memcpy(&pair, a[c].bpairs + 2 * p, 4);
                isum[c] = _mm512_dpwssd_epi32(isum[c], mn, _mm512_set1_epi32(pair));
            }
        }
        const __m512 dmw = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(hdr + 32)));
        PK_UNROLL
        for (int c = 0; c < C; c++) {
            const __m512 dm = _mm512_mul_ps(dmw, _mm512_set1_ps(a[c].d));
            acc[c] = _mm512_fnmadd_ps(dm, _mm512_cvtepi32_ps(isum[c]), acc[c]);
        }
    }
    pk_fast_store(t, acc, C);
}

PK_KERNEL void pk_q4_K_fast_tile(const struct pk_tile *t) {
#define PK_Q4_K_FAST(C) pk_fast_q4_K_c(t, C)
    PK_DISPATCH_8(PK_Q4_K_FAST)
#undef PK_Q4_K_FAST
}

/* acc += vpdpwssd(a, b) in place: with the intrinsic GCC copies each
 * column's loop-carried sum to another register and back every iteration
 * (about 5% of the fast Q6_K tile). */
PK_FN void pk_dpwssd(__m512i *acc, __m512i a, __m512i b) {
    __asm__("vpdpwssd %2, %1, %0" : "+v"(*acc) : "v"(a), "v"(b));
}

/* Fast-mode Q6_K: 16 rows x C columns (C <= PK_COLS_FAST_K),
 * cpu_fast_mode_dot's operations. Per sub-block j of 16 elements the 4
 * weight registers (4 elements of the 16 rows, quants 0..63) are unpacked
 * once for all columns: low or high nibbles selected under the 0x0F mask
 * with the high bits, which one AND and one shift put at bits 4-5
 * (cpu_packed_impl.h). For each column two dword chains of 2 vpdpbusd, the
 * halves' sums (q - 32) x a minus 1, start from the record's corrections;
 * both fit a word (|sum| <= 8 x 32 x 128), so a byte shuffle merges the
 * second into the high words of the first and one vpdpwssd adds the pair
 * times the rows' scale (s in both words) to the exact integer sum: s x
 * (the sub-block's sum) - 2 s. 2 x the scales' sum, added at the end, takes
 * the -2 s back. */
PK_FN void pk_fast_q6_K_c(const struct pk_tile *t, const int C) {
    const size_t ahead = pk_vec_ahead(t); /* used with one column */
    const __m512i m4 = _mm512_set1_epi8(0x0F), m33 = _mm512_set1_epi8(0x33), mcc = _mm512_set1_epi8((char)0xCC);
    /* bytes 0, 1 of each dword to bytes 2, 3 (the high word) */
    const __m512i to_high = _mm512_set4_epi32(0x0D0C8080, 0x09088080, 0x05048080, 0x01008080);
    const __mmask64 high_words = 0xCCCCCCCCCCCCCCCCull;
    /* row r's scale word (r) to both words of dword r */
    const __m512i dup = _mm512_set_epi16(15, 15, 14, 14, 13, 13, 12, 12, 11, 11, 10, 10, 9, 9, 8, 8, 7, 7, 6, 6, 5, 5, 4,
                                         4, 3, 3, 2, 2, 1, 1, 0, 0);
    __m512 acc[PK_COLS_FAST_K];
    PK_UNROLL
    for (int c = 0; c < C; c++) acc[c] = _mm512_setzero_ps();
    for (int64_t i = 0; i < t->nb; i++) {
        const struct pk_act_q8k6f *a = (const struct pk_act_q8k6f *)t->act + i * PK_COLS_FAST_K;
        const uint8_t *hdr;
        const uint8_t *q = pk_group_block_large(t, i, 288, 3072, C == 1, ahead, &hdr);
        __m512i isum[PK_COLS_FAST_K], ssum = _mm512_setzero_si512();
        PK_UNROLL
        for (int c = 0; c < C; c++) isum[c] = _mm512_setzero_si512();
        for (int j = 0; j < 16; j++) {
            const uint8_t *z = q + 192 * j;
            if (C == 1) pk_prefetch(z, 192, ahead, true);
            const __m512i z0 = _mm512_loadu_si512(z), z1 = _mm512_loadu_si512(z + 64);
            const __m512i h = _mm512_loadu_si512(z + 128);
            const __m512i h02 = _mm512_and_si512(h, m33), h13 = _mm512_and_si512(h, mcc);
            /* 0xE4: the first operand where the mask (third) is set, else the second */
            const __m512i u0 = _mm512_ternarylogic_epi32(z0, _mm512_slli_epi16(h02, 4), m4, 0xE4);
            const __m512i u1 = _mm512_ternarylogic_epi32(_mm512_srli_epi16(z0, 4), _mm512_slli_epi16(h13, 2), m4, 0xE4);
            const __m512i u2 = _mm512_ternarylogic_epi32(z1, h02, m4, 0xE4);
            const __m512i u3 = _mm512_ternarylogic_epi32(_mm512_srli_epi16(z1, 4), _mm512_srli_epi16(h13, 2), m4, 0xE4);
            const __m512i sc = _mm512_permutexvar_epi16(
                dup, _mm512_castsi256_si512(_mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(hdr + 32 + 16 * j)))));
            ssum = _mm512_add_epi16(ssum, sc);
            PK_UNROLL
            for (int c = 0; c < C; c++) {
                const int8_t *y = a[c].qs + 16 * j;
                __m512i lo = _mm512_set1_epi32(a[c].corr[2 * j]), hi = _mm512_set1_epi32(a[c].corr[2 * j + 1]);
                pk_dpbusd_bcast(&lo, u0, y);
                pk_dpbusd_bcast(&lo, u1, y + 4);
                pk_dpbusd_bcast(&hi, u2, y + 8);
                pk_dpbusd_bcast(&hi, u3, y + 12);
                pk_dpwssd(&isum[c], _mm512_mask_shuffle_epi8(lo, high_words, hi, to_high), sc);
            }
        }
        /* the scales' sums, twice: each scale word pair (s, s) times (1, 1) */
        const __m512i back = _mm512_madd_epi16(ssum, _mm512_set1_epi16(1));
        const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)hdr));
        PK_UNROLL
        for (int c = 0; c < C; c++) {
            const __m512 d = _mm512_mul_ps(dw, _mm512_set1_ps(a[c].d));
            acc[c] = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(_mm512_add_epi32(isum[c], back)), acc[c]);
        }
    }
    pk_fast_store(t, acc, C);
}

PK_KERNEL void pk_q6_K_fast_tile(const struct pk_tile *t) {
#define PK_Q6_K_FAST(C) pk_fast_q6_K_c(t, C)
    PK_DISPATCH_8(PK_Q6_K_FAST)
#undef PK_Q6_K_FAST
}

/* ---- k-quants ------------------------------------------------------------------------------
 * The integer lanes of a 256-block take a scale per 16 or 32 elements: the
 * byte products become 16-bit pair sums (vpmaddubsw, exact for these ranges)
 * and vpdpwssd multiplies them by the rows' scales (each row's scale in all
 * words of its 128-bit lane) into the lanes. */

/* The rows' unsigned byte scales s[0..3] (at p) as words, row r's in lane r. */
PK_FN __m512i pk_scale_words_u8(const uint8_t *p) {
    uint32_t v;
    memcpy(&v, p, 4);
    const __m512i ctrl = _mm512_set_epi64(0x8003800380038003LL, 0x8003800380038003LL, 0x8002800280028002LL,
                                          0x8002800280028002LL, 0x8001800180018001LL, 0x8001800180018001LL,
                                          0x8000800080008000LL, 0x8000800080008000LL);
    return _mm512_shuffle_epi8(_mm512_set1_epi32((int)v), ctrl);
}

/* The same for signed byte scales: placed in the high byte, then shifted down. */
PK_FN __m512i pk_scale_words_i8(const uint8_t *p) {
    uint32_t v;
    memcpy(&v, p, 4);
    const __m512i ctrl = _mm512_set_epi64(0x0380038003800380LL, 0x0380038003800380LL, 0x0280028002800280LL,
                                          0x0280028002800280LL, 0x0180018001800180LL, 0x0180018001800180LL,
                                          0x0080008000800080LL, 0x0080008000800080LL);
    return _mm512_srai_epi16(_mm512_shuffle_epi8(_mm512_set1_epi32((int)v), ctrl), 8);
}

PK_FN __m512i pk_pairs(__m512i u, const int8_t *y) { return _mm512_maddubs_epi16(u, pk_bcast128(y)); }

/* The k-quant tiles take one group x C columns (C <= PK_COLS_K). */

/* Q4_K and Q5_K: lanes from the 8 per-32 scales, and the mins. Q4_K: per
 * row 4 lanes mn[2k] (bs[4k] + bs[4k+1]) + mn[2k+1] (bs[4k+2] + bs[4k+3])
 * fused with -d_y dmin into their own accumulator, added after the lanes'
 * reduction. Q5_K (bits 5): the quants' fifth bits (q + 512: the file's qh[16 h
 * ..+15] of each row, bit 2 j for chunk 2 j, 2 j + 1 for chunk 2 j + 1) add
 * 16 where set, and the mins are one integer sum per block (the 4 lanes
 * added) fused into the row's first min lane alone, so that the reduction
 * adds b1892's scalar sum of them. With one column the weights are asked
 * for twice pk_vec_ahead's distance ahead (at k = 2048 eight 4-row groups,
 * 38 KiB, instead of four): Q4_K 2048 x 5632 +3-4% with one and two threads,
 * TinyLlama-shaped Q4_K_M tg +1% (in-process A/B, Zen 5; four times as
 * far: even; Q6_K twice as far: even). */
PK_FN void pk_q4_K_tile_c(const struct pk_tile *t, const int C, const int bits) {
    const size_t ahead = 2 * pk_vec_ahead(t); /* used with one column */
    const bool q5 = bits == 5;
    const size_t qbytes = q5 ? 640 : 512;
    __m512 acc_lo[PK_COLS_K], acc_hi[PK_COLS_K], acc_m[PK_COLS_K];
    PK_UNROLL
    for (int c = 0; c < C; c++) acc_lo[c] = acc_hi[c] = acc_m[c] = _mm512_setzero_ps();
    const __m512i m4 = _mm512_set1_epi8(0x0F), sixteen = _mm512_set1_epi8(16);
    for (int64_t i = 0; i < t->nb; i++) {
        const uint8_t *hdr;
        const uint8_t *q = pk_group_block_large(t, i, 80, qbytes, C == 1, ahead, &hdr);
        if (C == 1 && q5) pk_prefetch(q + 512, 128, ahead, false);
        __m512i l0[PK_COLS_K], l1[PK_COLS_K];
        PK_UNROLL
        for (int c = 0; c < C; c++) l0[c] = l1[c] = _mm512_setzero_si512();
        PK_UNROLL
        for (int j = 0; j < 4; j++) {
            const __m512i s_lo = pk_scale_words_u8(hdr + 16 + 8 * j), s_hi = pk_scale_words_u8(hdr + 20 + 8 * j);
            PK_UNROLL
            for (int h = 0; h < 2; h++) {
                if (C == 1) pk_prefetch(q + 64 * (2 * j + h), 64, ahead, false);
                const __m512i z = _mm512_loadu_si512(q + 64 * (2 * j + h));
                __m512i lo = _mm512_and_si512(z, m4), hi = _mm512_and_si512(_mm512_srli_epi16(z, 4), m4);
                if (q5) {
                    const __m512i qh = _mm512_loadu_si512(q + 512 + 64 * h);
                    lo = _mm512_mask_add_epi8(lo, _mm512_test_epi8_mask(qh, _mm512_set1_epi8((char)(1 << 2 * j))),
                                              lo, sixteen);
                    hi = _mm512_mask_add_epi8(
                        hi, _mm512_test_epi8_mask(qh, _mm512_set1_epi8((char)(2 << 2 * j))), hi, sixteen);
                }
                PK_UNROLL
                for (int c = 0; c < C; c++) {
                    const struct pk_act_q8k *a = (const struct pk_act_q8k *)t->act + i * PK_COLS_K + c;
                    __m512i *l = h ? &l1[c] : &l0[c];
                    *l = _mm512_dpwssd_epi32(*l, pk_pairs(lo, a->qs + 64 * j + 16 * h), s_lo);
                    *l = _mm512_dpwssd_epi32(*l, pk_pairs(hi, a->qs + 64 * j + 32 + 16 * h), s_hi);
                }
            }
        }
        const __m512 dx = pk_row_scales(hdr), dmx = pk_row_scales(hdr + 8);
        const __m512i mn = _mm512_cvtepu8_epi16(_mm256_loadu_si256((const __m256i *)(hdr + 48)));
        PK_UNROLL
        for (int c = 0; c < C; c++) {
            const struct pk_act_q8k *a = (const struct pk_act_q8k *)t->act + i * PK_COLS_K + c;
            __m512i m = _mm512_madd_epi16(mn, pk_bcast128(a->bpairs));
            const __m512 dm = _mm512_mul_ps(dmx, _mm512_set1_ps(-a->d));
            if (q5) {
                m = _mm512_add_epi32(m, _mm512_shuffle_epi32(m, _MM_PERM_BADC));
                m = _mm512_add_epi32(m, _mm512_shuffle_epi32(m, _MM_PERM_CDAB));
                acc_m[c] = _mm512_mask3_fmadd_ps(dm, _mm512_cvtepi32_ps(m), acc_m[c],
                                                           (__mmask16)0x1111);
            } else {
                acc_m[c] = _mm512_fmadd_ps(dm, _mm512_cvtepi32_ps(m), acc_m[c]);
            }
            const __m512 d = _mm512_mul_ps(dx, _mm512_set1_ps(a->d));
            acc_lo[c] = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(l0[c]), acc_lo[c]);
            acc_hi[c] = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(l1[c]), acc_hi[c]);
        }
    }
    PK_UNROLL
    for (int c = 0; c < C; c++) pk_store_rows(acc_lo[c], acc_hi[c], acc_m[c], t->dst + c * t->dst_stride, t->nrows, true);
}

/* Q6_K (bits 6): quants 0..63 (the -32 offset comes back through the
 * activations' corr6 sums, weighted by the same scales), signed scale per
 * 16. Q3_K (bits 3) takes the same path with 8 (q + 4) for its quants q
 * (-4..3: the 2 low bits at 3-4, the high bit at 5), so the lanes come out
 * as 8 times its own, exactly, and are shifted back before they turn into
 * floats. Q2_K (bits 2): quants 0..3 as they are, no offset, its 4-bit
 * scales the low nibbles of the file's bytes; per block first its mins
 * (the high nibbles) (lane k of a row: its mins 2 k, 2 k + 1
 * times the column's 16-sums) fused with -d_y dmin into the same
 * accumulators, as b1892 does. */
PK_FN void pk_q6_K_tile_c(const struct pk_tile *t, const int C, const int bits) {
    const size_t ahead = pk_vec_ahead(t); /* used with one column */
    const bool q3 = bits == 3, q2 = bits == 2;
    const size_t qbytes = q2 ? 256 : q3 ? 384 : 768, hbytes = q2 ? 80 : 72;
    /* Q2_K: the bytes of 8 sub-blocks' scales (sc[j][row]) as words, row r's 8 to its 128-bit lane */
    const __m512i by_row = _mm512_set_epi16(31, 27, 23, 19, 15, 11, 7, 3, 30, 26, 22, 18, 14, 10, 6, 2, 29, 25, 21, 17, 13,
                                            9, 5, 1, 28, 24, 20, 16, 12, 8, 4, 0);
    __m512 acc_lo[PK_COLS_K], acc_hi[PK_COLS_K];
    PK_UNROLL
    for (int c = 0; c < C; c++) acc_lo[c] = acc_hi[c] = _mm512_setzero_ps();
    const __m512i m4 = _mm512_set1_epi8(0x0F), m30 = _mm512_set1_epi8(0x30);
    const __m512i m18 = _mm512_set1_epi8(0x18), m20 = _mm512_set1_epi8(0x20), m3 = _mm512_set1_epi8(3);
    for (int64_t i = 0; i < t->nb; i++) {
        const uint8_t *hdr;
        const uint8_t *q = pk_group_block_large(t, i, hbytes, qbytes, C == 1, ahead, &hdr);
        __m512i l0[PK_COLS_K], l1[PK_COLS_K];
        PK_UNROLL
        for (int c = 0; c < C; c++) l0[c] = l1[c] = _mm512_setzero_si512();
        PK_UNROLL
        for (int n = 0; n < 2; n++) {
            PK_UNROLL
            for (int h = 0; h < 2; h++) {
                /* streaming: this quarter's lines, a call or more ahead */
                if (C == 1) pk_prefetch(q + (qbytes / 4) * (2 * n + h), qbytes / 4, ahead, false);
                __m512i u[4];
                if (q2) {
                    const __m512i z = _mm512_loadu_si512(q + 64 * (2 * n + h));
                    PK_UNROLL
                    for (int k = 0; k < 4; k++) u[k] = _mm512_and_si512(_mm512_srli_epi16(z, 2 * k), m3);
                } else if (q3) {
                    const __m512i z = _mm512_loadu_si512(q + 64 * (2 * n + h));
                    const __m512i hm = _mm512_loadu_si512(q + 256 + 64 * h);
                    PK_UNROLL
                    for (int k = 0; k < 4; k++) {
                        /* bits 2 k, 2 k + 1 to 3, 4 (word shifts; the mask keeps each byte's own) */
                        const __m512i lo2 = _mm512_and_si512(
                            2 * k <= 3 ? _mm512_slli_epi16(z, 3 - 2 * k) : _mm512_srli_epi16(z, 2 * k - 3), m18);
                        u[k] = _mm512_mask_add_epi8(
                            lo2, _mm512_test_epi8_mask(hm, _mm512_set1_epi8((char)(1 << (4 * n + k)))), lo2, m20);
                    }
                } else {
                    const uint8_t *z = q + 192 * (2 * n + h);
                    const __m512i n02 = _mm512_loadu_si512(z), n13 = _mm512_loadu_si512(z + 64);
                    const __m512i qh = _mm512_loadu_si512(z + 128);
                    /* (a & 0x0F) | (b & 0x30): vpternlogd with the 0x0F mask, b masked first */
                    u[0] = _mm512_ternarylogic_epi32(n02, _mm512_and_si512(_mm512_slli_epi16(qh, 4), m30), m4, 0xEC);
                    u[1] = _mm512_ternarylogic_epi32(n13, _mm512_and_si512(_mm512_slli_epi16(qh, 2), m30), m4, 0xEC);
                    u[2] = _mm512_ternarylogic_epi32(_mm512_srli_epi16(n02, 4), _mm512_and_si512(qh, m30), m4, 0xEC);
                    u[3] = _mm512_ternarylogic_epi32(_mm512_srli_epi16(n13, 4),
                                                     _mm512_and_si512(_mm512_srli_epi16(qh, 2), m30), m4, 0xEC);
                }
                __m512i s[4];
                PK_UNROLL
                for (int k = 0; k < 4; k++) {
                    const uint8_t *sc = hdr + 8 + 4 * (2 * (4 * n + k) + h);
                    s[k] = q2 ? _mm512_and_si512(pk_scale_words_u8(sc), _mm512_set1_epi16(0x0F)) : pk_scale_words_i8(sc);
                }
                const __m512i sp0 = _mm512_mask_blend_epi16(0xAAAAAAAAu, s[0], s[1]);
                const __m512i sp1 = _mm512_mask_blend_epi16(0xAAAAAAAAu, s[2], s[3]);
                PK_UNROLL
                for (int c = 0; c < C; c++) {
                    const struct pk_act_q8k *a = (const struct pk_act_q8k *)t->act + i * PK_COLS_K + c;
                    __m512i l = h ? l1[c] : l0[c];
                    PK_UNROLL
                    for (int k = 0; k < 4; k++) {
                        l = _mm512_dpwssd_epi32(l, pk_pairs(u[k], a->qs + 32 * (4 * n + k) + 16 * h), s[k]);
                    }
                    if (!q2) {
                        l = _mm512_dpwssd_epi32(l, sp0, pk_bcast128(a->corr6[n][h][0]));
                        l = _mm512_dpwssd_epi32(l, sp1, pk_bcast128(a->corr6[n][h][1]));
                    }
                    if (h) l1[c] = l; else l0[c] = l;
                }
            }
        }
        const __m512 dx = pk_row_scales(hdr);
        PK_UNROLL
        for (int c = 0; c < C; c++) {
            const struct pk_act_q8k *a = (const struct pk_act_q8k *)t->act + i * PK_COLS_K + c;
            const __m512 d = _mm512_mul_ps(dx, _mm512_set1_ps(a->d));
            if (q2) {
                const __m512 dm = _mm512_mul_ps(pk_row_scales(hdr + 72), _mm512_set1_ps(-a->d));
                PK_UNROLL
                for (int half = 0; half < 2; half++) {
                    const __m512i mn = _mm512_srli_epi16(
                        _mm512_permutexvar_epi16(
                            by_row, _mm512_cvtepu8_epi16(_mm256_loadu_si256((const __m256i *)(hdr + 8 + 32 * half)))),
                        4);
                    const __m512 m = _mm512_cvtepi32_ps(_mm512_madd_epi16(mn, pk_bcast128(a->bsums + 8 * half)));
                    __m512 *acc = half ? &acc_hi[c] : &acc_lo[c];
                    *acc = _mm512_fmadd_ps(dm, m, *acc);
                }
            }
            if (q3) {
                l0[c] = _mm512_srai_epi32(l0[c], 3);
                l1[c] = _mm512_srai_epi32(l1[c], 3);
            }
            acc_lo[c] = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(l0[c]), acc_lo[c]);
            acc_hi[c] = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(l1[c]), acc_hi[c]);
        }
    }
    PK_UNROLL
    for (int c = 0; c < C; c++) pk_store_rows(acc_lo[c], acc_hi[c], acc_lo[c], t->dst + c * t->dst_stride, t->nrows, false);
}

/* The k-quant tiles: up to 8 columns, each on the kernel of its family
 * (Q4_K's or Q6_K's) with its bits. */
#define PK_KQUANT_TILE(name, BITS, COLS)                               \
    PK_KERNEL void name(const struct pk_tile *t) {                     \
        const int bits = BITS;                                         \
        PK_DISPATCH_8(COLS)                                            \
    }
#define PK_Q4_K_COLS(C) pk_q4_K_tile_c(t, C, bits)
#define PK_Q6_K_COLS(C) pk_q6_K_tile_c(t, C, bits)
PK_KQUANT_TILE(pk_q5_K_tile, 5, PK_Q4_K_COLS)
PK_KQUANT_TILE(pk_q2_K_tile, 2, PK_Q6_K_COLS)
PK_KQUANT_TILE(pk_q3_K_tile, 3, PK_Q6_K_COLS)
PK_KQUANT_TILE(pk_q6_K_tile, 6, PK_Q6_K_COLS)

/* Exact Q4_K takes at most PK_Q4_K_CALL_COLS columns a call, a tile's
 * others in a second: 5 accumulators a column, for 8 columns more
 * registers than AVX-512 has, spilled to the stack. 2048 x 5632 x 512,
 * against 8 a call interleaved in one process, one and two threads: +7-8%
 * (Zen 5). Not the other k-quants: Q5_K and Q2_K +1%, Q6_K -1%, Q3_K -4%. */
#define PK_Q4_K_CALL_COLS 4
PK_FN void pk_q4_K_call(const struct pk_tile *t) {
    const int bits = 4;
    switch (t->ncols) {
        case 1: PK_Q4_K_COLS(1); break;
        case 2: PK_Q4_K_COLS(2); break;
        case 3: PK_Q4_K_COLS(3); break;
        default: PK_Q4_K_COLS(4); break;
    }
}
_Static_assert(PK_Q4_K_CALL_COLS == 4, "pk_q4_K_call's cases");

PK_KERNEL void pk_q4_K_tile(const struct pk_tile *t) {
    if (t->ncols <= PK_Q4_K_CALL_COLS) {
        pk_q4_K_call(t);
        return;
    }
    struct pk_tile first = *t, rest = *t;
    first.ncols = PK_Q4_K_CALL_COLS;
    rest.ncols = t->ncols - PK_Q4_K_CALL_COLS;
    rest.act += PK_Q4_K_CALL_COLS * sizeof(struct pk_act_q8k);
    rest.dst += PK_Q4_K_CALL_COLS * t->dst_stride;
    pk_q4_K_call(&first);
    pk_q4_K_call(&rest);
}
#undef PK_Q4_K_COLS
#undef PK_Q6_K_COLS
#undef PK_KQUANT_TILE

/* ---- F16 ------------------------------------------------------------------------------- */

PK_FN __m512 pk_load_w(const void *w, bool f16, size_t i) {
    if (f16) return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)((const fp16_t *)w + i)));
    return _mm512_loadu_ps((const float *)w + i);
}

/* quant_float.c's reduction of the accumulators [a0 | a1] and [a2 | a3]:
 * lane-wise (a0 + a2) + (a1 + a3), upper 4 lanes onto the lower 4, then
 * (l0 + l1) + (l2 + l3). */
PK_FN float pk_f16_reduce(__m512 a01, __m512 a23) {
    const __m512 s = _mm512_add_ps(a01, a23);
    const __m256 a = _mm256_add_ps(_mm512_castps512_ps256(s), _mm512_extractf32x8_ps(s, 1));
    const __m128 t = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    const __m128 p = _mm_add_ps(t, _mm_movehdup_ps(t));
    return _mm_cvtss_f32(_mm_add_ss(p, _mm_movehl_ps(p, p)));
}

/* Tiles of PK_F16_TR rows x up to PK_F16_TC columns; with one column (a
 * matrix-vector product, which streams the weights) PK_F16_VEC_ROWS rows,
 * each a stream of its own, the lines of each asked for twice (a call and
 * 2 KiB ahead). Against two rows and the far prefetch only, interleaved in
 * one process (the host's bandwidth moves too much between processes), 2
 * threads, weights of 40-400 matrices: 2048 x 5632 +24%, 2048 x 2048 +23%,
 * 2048 x 32000 +24%, 5632 x 2048 +3-10%, 4096 x 4096 +15%, 11008 x 4096
 * +20%, 4096 x 11008 +12% (Zen 5; eight rows won at some shapes and lost
 * at others). */
#define PK_F16_TR 2
#define PK_F16_VEC_ROWS 4
#define PK_F16_TC PK_F16_TILE_COLS

/* An R x C tile over n elements (a multiple of 32): row r of the weights at
 * w + r ws (halves if f16, else floats), column c at act + c as. The outputs'
 * lanes start at zero (first) or from acc, and end reduced into dst (last)
 * or back in acc; output (r, c) at acc + (r PK_F16_TC + c) 32. */
PK_FN void pk_f16_tile(const void *w, bool f16, size_t ws, const float *act, size_t as, int64_t n, float *acc,
                       bool first, bool last, float *dst, size_t ds, const int R, const int C) {
    const size_t far = pk_stream_ahead((size_t)R * ws * sizeof(fp16_t)); /* used with f16 */
    __m512 a01[PK_F16_VEC_ROWS][PK_F16_TC], a23[PK_F16_VEC_ROWS][PK_F16_TC];
    PK_UNROLL
    for (int r = 0; r < R; r++) {
        PK_UNROLL
        for (int c = 0; c < C; c++) {
            if (first) {
                a01[r][c] = a23[r][c] = _mm512_setzero_ps();
            } else {
                a01[r][c] = _mm512_load_ps(acc + (r * PK_F16_TC + c) * 32);
                a23[r][c] = _mm512_load_ps(acc + (r * PK_F16_TC + c) * 32 + 16);
            }
        }
    }
    for (int64_t k = 0; k < n; k += 32) {
        __m512 x0[PK_F16_VEC_ROWS], x1[PK_F16_VEC_ROWS];
        PK_UNROLL
        for (int r = 0; r < R; r++) {
            if (f16) pk_prefetch((const uint8_t *)((const fp16_t *)w + r * ws + k), 64, far, C == 1); /* read in place: streaming */
            x0[r] = pk_load_w(w, f16, r * ws + k);
            x1[r] = pk_load_w(w, f16, r * ws + k + 16);
        }
        PK_UNROLL
        for (int c = 0; c < C; c++) {
            /* one load per column vector, shared by the rows (not folded into each fma) */
            __m512 y0 = _mm512_loadu_ps(act + c * as + k), y1 = _mm512_loadu_ps(act + c * as + k + 16);
            __asm__("" : "+v"(y0), "+v"(y1));
            PK_UNROLL
            for (int r = 0; r < R; r++) a01[r][c] = _mm512_fmadd_ps(x0[r], y0, a01[r][c]);
            PK_UNROLL
            for (int r = 0; r < R; r++) a23[r][c] = _mm512_fmadd_ps(x1[r], y1, a23[r][c]);
        }
    }
    PK_UNROLL
    for (int c = 0; c < C; c++) {
        PK_UNROLL
        for (int r = 0; r < R; r++) {
            if (last) {
                dst[c * ds + r] = pk_f16_reduce(a01[r][c], a23[r][c]);
            } else {
                _mm512_store_ps(acc + (r * PK_F16_TC + c) * 32, a01[r][c]);
                _mm512_store_ps(acc + (r * PK_F16_TC + c) * 32 + 16, a23[r][c]);
            }
        }
    }
}

/* The tile with R and C as constants (full tiles take the first case). */
PK_FN void pk_f16_tile_any(const void *w, bool f16, size_t ws, const float *act, size_t as, int64_t n, float *acc,
                           bool first, bool last, float *dst, size_t ds, int R, int C) {
#define PK_F16_T(r, c) pk_f16_tile(w, f16, ws, act, as, n, acc, first, last, dst, ds, r, c)
    _Static_assert(PK_F16_VEC_ROWS == 4, "pk_f16_tile_any's cases");
    if (C == 1 && R > 2) {
        if (R == 4) PK_F16_T(4, 1);
        else PK_F16_T(3, 1);
    } else if (R == 2) {
        switch (C) {
            case 6: PK_F16_T(2, 6); break;
            case 5: PK_F16_T(2, 5); break;
            case 4: PK_F16_T(2, 4); break;
            case 3: PK_F16_T(2, 3); break;
            case 2: PK_F16_T(2, 2); break;
            default: PK_F16_T(2, 1); break;
        }
    } else {
        switch (C) {
            case 6: PK_F16_T(1, 6); break;
            case 5: PK_F16_T(1, 5); break;
            case 4: PK_F16_T(1, 4); break;
            case 3: PK_F16_T(1, 3); break;
            case 2: PK_F16_T(1, 2); break;
            default: PK_F16_T(1, 1); break;
        }
    }
#undef PK_F16_T
}

/* How much of k the columns [act, act + C * ks) need: up to their last
 * element that is not +0, rounded up to 32 (at least 32). The products past
 * it add only zeros, and they change no accumulator (accumulators start at
 * +0 and an exact float sum is never -0 unless both terms are, so x * 0 adds
 * nothing): attention's values x probabilities stop at the last key a token
 * sees. */
PK_FN int64_t pk_f16_extent(const float *act, size_t ks, int C, int64_t k) {
    int64_t extent = 32;
    for (int c = 0; c < C; c++) {
        /* 16 elements at a time from the end: the first group with a nonzero bit pattern */
        const __m512i *v = (const __m512i *)(act + c * ks);
        int64_t e = k / 16;
        while (e > extent / 16) {
            const __m512i x = _mm512_loadu_si512(v + e - 1);
            if (_mm512_test_epi32_mask(x, x)) break;
            e--;
        }
        extent = 16 * e;
    }
    return (extent + 31) & ~(int64_t)31;
}

/* ---- F16 with a short k (attention's scores) ----------------------------------------------
 * At a short k an output of pk_f16_tile takes as many operations in
 * its reduction as in its products. Here a register holds one of b1892's 32
 * lane accumulators for 16 rows (lane = row): the item's rows are transposed
 * once into 16-row groups, accumulator (i, l) of an output (elements 32 s +
 * 8 i + l, s = 0, 1, ...) is a chain of k / 32 FMAs from +0, and
 * pk_f16_reduce's additions become vertical ones, 31 for 16 outputs, in the
 * same order: (a0 + a2) + (a1 + a3) per lane l, then lane m onto m + 4, then
 * (l0 + l1) + (l2 + l3). */
/* The transposition pays up to k = 192, with at least k / 16 columns
 * (Zen 5, one thread, items of 64 rows against pk_f16_tile interleaved in
 * one process): 64 columns at k = 224 ran 25% slower, at 256 (the
 * transposed rows no longer in L1) 44%; 8 columns 40% at k = 192, 2.1x at
 * 256, and even at 128. Those are attention's values x probabilities over
 * 128-256 keys, with 64 tokens a block in prompts and the 8 query heads
 * of a KV head in generation (the node at 192 keys +6-15%, at 256 +25%). */
#define PK_F16_SHORT_K 192
#define PK_F16_SHORT_COLS_PER_K 16

/* r[j] = column j of the 16 x 16 matrix whose rows were r[0..16). */
PK_FN void pk_transpose16(__m512 r[16]) {
    __m512 a[16], b[16];
    PK_UNROLL
    for (int i = 0; i < 8; i++) {
        a[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        a[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    /* b[4 i + j], 128-bit lane L: rows 4 i .. 4 i + 3 of column 4 L + j */
    PK_UNROLL
    for (int i = 0; i < 4; i++) {
        const __m512d a0 = _mm512_castps_pd(a[4 * i]), a1 = _mm512_castps_pd(a[4 * i + 1]);
        const __m512d a2 = _mm512_castps_pd(a[4 * i + 2]), a3 = _mm512_castps_pd(a[4 * i + 3]);
        b[4 * i] = _mm512_castpd_ps(_mm512_unpacklo_pd(a0, a2));
        b[4 * i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a0, a2));
        b[4 * i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(a1, a3));
        b[4 * i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(a1, a3));
    }
    /* column 4 L + j: lane L of b[j], b[4 + j], b[8 + j], b[12 + j] */
    PK_UNROLL
    for (int j = 0; j < 4; j++) {
        const __m512 p = _mm512_shuffle_f32x4(b[j], b[4 + j], 0x44), q = _mm512_shuffle_f32x4(b[j], b[4 + j], 0xEE);
        const __m512 u = _mm512_shuffle_f32x4(b[8 + j], b[12 + j], 0x44), v = _mm512_shuffle_f32x4(b[8 + j], b[12 + j], 0xEE);
        r[j] = _mm512_shuffle_f32x4(p, u, 0x88);
        r[4 + j] = _mm512_shuffle_f32x4(p, u, 0xDD);
        r[8 + j] = _mm512_shuffle_f32x4(q, v, 0x88);
        r[12 + j] = _mm512_shuffle_f32x4(q, v, 0xDD);
    }
}

/* The item's rows as floats, transposed: element e of row 16 g + lane at
 * wt[(g k + e) 16 + lane]; rows past the item's are zeros. The next group's
 * rows are asked for ahead: in generation they are keys in the KV cache, a
 * head's slice of each cache row, which the hardware prefetchers miss. */
PK_FN void pk_f16_transpose_rows(const struct pk_f16_item *it, float *wt) {
    for (int g = 0; 16 * g < it->nrows; g++) {
        for (int j = 16 * g + 16; j < 16 * g + 32 && j < it->nrows; j++) {
            for (int64_t o = 0; o < it->k * (int64_t)sizeof(fp16_t); o += 64) {
                _mm_prefetch((const char *)(it->w + (size_t)j * it->w_stride) + o, _MM_HINT_T0);
            }
        }
        for (int64_t e0 = 0; e0 < it->k; e0 += 16) {
            __m512 r[16];
            PK_UNROLL
            for (int j = 0; j < 16; j++) {
                r[j] = 16 * g + j < it->nrows ? pk_load_w(it->w, true, (size_t)(16 * g + j) * it->w_stride + e0)
                                              : _mm512_setzero_ps();
            }
            pk_transpose16(r);
            PK_UNROLL
            for (int j = 0; j < 16; j++) _mm512_store_ps(wt + ((size_t)g * it->k + e0 + j) * 16, r[j]);
        }
    }
}

/* C columns (act, ks apart) against G transposed 16-row groups (wt, k 16
 * floats apart); outputs to dst + c ds, the first `rows` of the G 16 rows.
 * Each activation broadcast feeds G groups and each row load C columns.
 * The lanes l run 0, 4, 1, 5, 2, 6, 3, 7, so that t_m = x_m + x_{m+4} is
 * complete after its pair and the sums (t0 + t1) + (t2 + t3) are formed as
 * soon as their terms are: fewer registers live than the 4 t_m. */
PK_FN void pk_f16_short_cols(const float *wt, int64_t k, const float *act, size_t ks, float *dst, size_t ds, int rows,
                             const int G, const int C) {
    __m512 pend[2][2], t01[2][2], t2[2][2];
    PK_UNROLL
    for (int li = 0; li < 8; li++) {
        const int l = li % 2 ? li / 2 + 4 : li / 2;
        __m512 p[2][2][4];
        PK_UNROLL
        for (int g = 0; g < G; g++) {
            PK_UNROLL
            for (int c = 0; c < C; c++) {
                PK_UNROLL
                for (int i = 0; i < 4; i++) p[g][c][i] = _mm512_setzero_ps();
            }
        }
        for (int64_t s = 0; s < k; s += 32) {
            PK_UNROLL
            for (int i = 0; i < 4; i++) {
                const int64_t e = s + 8 * i + l;
                __m512 w[2];
                PK_UNROLL
                for (int g = 0; g < G; g++) {
                    w[g] = _mm512_load_ps(wt + ((size_t)g * k + e) * 16);
                    /* loaded once for the C columns: GCC folded the load into
                     * each column's FMA, 1.5 loads an FMA where the core does
                     * two loads and two FMAs a cycle (Zen 5, 64 keys x 64 x
                     * 64 queries: +20%, 168 -> 199 GFLOP/s on one thread) */
                    if (C > 1) PK_KEEP_IN_REGISTER(w[g]);
                }
                PK_UNROLL
                for (int c = 0; c < C; c++) {
                    const __m512 y = _mm512_set1_ps(act[c * ks + e]);
                    PK_UNROLL
                    for (int g = 0; g < G; g++) p[g][c][i] = _mm512_fmadd_ps(w[g], y, p[g][c][i]);
                }
            }
        }
        PK_UNROLL
        for (int g = 0; g < G; g++) {
            PK_UNROLL
            for (int c = 0; c < C; c++) {
                const __m512 x = _mm512_add_ps(_mm512_add_ps(p[g][c][0], p[g][c][2]), _mm512_add_ps(p[g][c][1], p[g][c][3]));
                if (li % 2 == 0) {
                    pend[g][c] = x;                                   /* x_m */
                } else {
                    const __m512 tm = _mm512_add_ps(pend[g][c], x);   /* t_m = x_m + x_{m+4} */
                    if (l == 4) t01[g][c] = tm;
                    else if (l == 5) t01[g][c] = _mm512_add_ps(t01[g][c], tm);
                    else if (l == 6) t2[g][c] = tm;
                    else t2[g][c] = _mm512_add_ps(t2[g][c], tm);
                }
            }
        }
    }
    PK_UNROLL
    for (int g = 0; g < G; g++) {
        const int left = rows - 16 * g;
        const __mmask16 m = (__mmask16)(left >= 16 ? 0xFFFF : (1u << left) - 1);
        PK_UNROLL
        for (int c = 0; c < C; c++) _mm512_mask_storeu_ps(dst + c * ds + 16 * g, m, _mm512_add_ps(t01[g][c], t2[g][c]));
    }
}

/* A short-k item: columns two at a time over every pair of groups (the
 * transposed rows, k x 64 floats at most, stay in L1). */
PK_FN void pk_f16_short_item(const struct pk_f16_item *it) {
    const size_t ks = it->act_stride;
    float *wt = it->scratch;
    pk_f16_transpose_rows(it, wt);
    for (int c = 0; c < it->ncols; c += 2) {
        const bool two_cols = it->ncols - c >= 2;
        for (int g = 0; 16 * g < it->nrows; g += 2) {
            const int rows = it->nrows - 16 * g < 32 ? it->nrows - 16 * g : 32;
            const float *wg = wt + (size_t)g * it->k * 16;
            const float *act = it->act + c * ks;
            float *dst = it->dst + (size_t)c * it->dst_stride + 16 * g;
            if (rows > 16) {
                if (two_cols) pk_f16_short_cols(wg, it->k, act, ks, dst, it->dst_stride, rows, 2, 2);
                else pk_f16_short_cols(wg, it->k, act, ks, dst, it->dst_stride, rows, 2, 1);
            } else {
                if (two_cols) pk_f16_short_cols(wg, it->k, act, ks, dst, it->dst_stride, rows, 1, 2);
                else pk_f16_short_cols(wg, it->k, act, ks, dst, it->dst_stride, rows, 1, 1);
            }
        }
    }
}

PK_KERNEL void pk_f16_item(const struct pk_f16_item *it) {
    const int64_t k = it->k;
    const size_t ks = it->act_stride, ws = pk_f16_stride(k); /* columns; converted rows */
    if (it->ncols >= PK_F16_MIN_COLS && k <= PK_F16_SHORT_K && PK_F16_SHORT_COLS_PER_K * it->ncols >= k) {
        pk_f16_short_item(it);
        return;
    }
    if (it->ncols <= PK_F16_INPLACE_COLS) {  /* the halves in place, a pass per tile column */
        const int rows = it->ncols == 1 ? PK_F16_VEC_ROWS : PK_F16_TR;
        for (int r = 0; r < it->nrows; r += rows) {
            const int R = it->nrows - r < rows ? it->nrows - r : rows;
            for (int c = 0; c < it->ncols; c += PK_F16_TC) {
                const int C = it->ncols - c < PK_F16_TC ? it->ncols - c : PK_F16_TC;
                pk_f16_tile_any(it->w + r * it->w_stride, true, it->w_stride, it->act + c * ks, ks, k, NULL, true,
                                true, it->dst + c * it->dst_stride + r, it->dst_stride, R, C);
            }
        }
        return;
    }
    /* the rows as floats once, as far as any column needs them; then per tile
     * column, k blocks over all row pairs (the column tile's accumulators and
     * k block stay in L1) */
    float *wf = it->scratch, *acc = it->scratch + (size_t)it->nrows * ws;
    const int64_t kmax = pk_f16_extent(it->act, ks, it->ncols, k);
    for (int r = 0; r < it->nrows; r++) {
        for (int64_t e = 0; e < kmax; e += 16) _mm512_store_ps(wf + r * ws + e, pk_load_w(it->w, true, r * it->w_stride + e));
    }
    for (int c = 0; c < it->ncols; c += PK_F16_TC) {
        const int C = it->ncols - c < PK_F16_TC ? it->ncols - c : PK_F16_TC;
        const int64_t kc = pk_f16_extent(it->act + c * ks, ks, C, k);
        for (int64_t k0 = 0; k0 < kc; k0 += PK_F16_KB) {
            const int64_t n = kc - k0 < PK_F16_KB ? kc - k0 : PK_F16_KB;
            for (int r = 0; r < it->nrows; r += PK_F16_TR) {
                const int R = it->nrows - r < PK_F16_TR ? it->nrows - r : PK_F16_TR;
                pk_f16_tile_any(wf + r * ws + k0, false, ws, it->act + c * ks + k0, ks, n,
                                acc + r * PK_F16_TC * 32, k0 == 0, k0 + n == kc, it->dst + c * it->dst_stride + r,
                                it->dst_stride, R, C);
            }
        }
    }
}

/* ---- IQ2_XXS, IQ2_XS (prompts; layouts in cpu_packed_impl.h) ---------------- */

/* One row's chunk of 32 values as int16 times their odd scales (scale:
 * elements 0-15 in the low half), regrouped into the halves h = 0 (dword
 * pairs 0, 2, ..., 14) and h = 1 (pairs 1, 3, ..., 15) of the result. The
 * grid words give the magnitudes, bit e of `signs` negates element e. */
PK_FN __m512i pk_iq2_chunk(const uint64_t grid[4], uint32_t signs, __m512i scale) {
    const __m256i mag = _mm256_set_epi64x((long long)grid[3], (long long)grid[2], (long long)grid[1],
                                          (long long)grid[0]);
    const __m256i val = _mm256_mask_sub_epi8(mag, (__mmask32)signs, _mm256_setzero_si256(), mag);
    const __m512i w = _mm512_mullo_epi16(_mm512_cvtepi8_epi16(val), scale);
    return _mm512_permutexvar_epi32(_mm512_set_epi32(15, 13, 11, 9, 7, 5, 3, 1, 14, 12, 10, 8, 6, 4, 2, 0), w);
}

/* The 4 sign bytes of a chunk's groups as one mask, element e at bit e. */
PK_FN uint32_t pk_iq2_signs(unsigned i0, unsigned i1, unsigned i2, unsigned i3) {
    return (uint32_t)iq2_sign_byte(i0) | (uint32_t)iq2_sign_byte(i1) << 8 | (uint32_t)iq2_sign_byte(i2) << 16 |
           (uint32_t)iq2_sign_byte(i3) << 24;
}

PK_KERNEL void pk_iq2_decode(const uint8_t *rows, size_t row_bytes, int nrows, int64_t nb, bool xs, uint8_t *out) {
    for (int64_t i = 0; i < nb; i++) {
        uint8_t *sb = out + i * PK_IQ2_SB_BYTES;
        float d[PK_IQ2_ROWS];
        for (int r = 0; r < PK_IQ2_ROWS; r++) {
            uint8_t *row_at = sb + (r / 2) * 64 + (r % 2) * 32; /* + 128 (2 j + h) */
            if (r >= nrows) {
                d[r] = 0;
                for (int jh = 0; jh < 16; jh++) _mm256_storeu_si256((__m256i *)(row_at + 128 * jh), _mm256_setzero_si256());
                continue;
            }
            for (int j = 0; j < 8; j++) {
                uint64_t grid[4];
                uint32_t signs;
                __m512i scale;
                if (xs) {
                    const block_iq2_xs *b = (const block_iq2_xs *)(rows + r * row_bytes) + i;
                    const uint16_t *q = b->qs + 4 * j;
                    for (int l = 0; l < 4; l++) grid[l] = iq2_xs_grid[q[l] & 511];
                    signs = pk_iq2_signs(q[0] >> 9, q[1] >> 9, q[2] >> 9, q[3] >> 9);
                    scale = _mm512_inserti64x4(_mm512_set1_epi16((short)(2 * (b->scales[j] & 0xf) + 1)),
                                               _mm256_set1_epi16((short)(2 * (b->scales[j] >> 4) + 1)), 1);
                    d[r] = fp16_to_fp32(b->d);
                } else {
                    const block_iq2_xxs *b = (const block_iq2_xxs *)(rows + r * row_bytes) + i;
                    const uint16_t *q = b->qs + 4 * j;
                    const uint32_t idx = (uint32_t)q[0] | (uint32_t)q[1] << 16, ss = (uint32_t)q[2] | (uint32_t)q[3] << 16;
                    for (int l = 0; l < 4; l++) grid[l] = iq2_xxs_grid[(idx >> (8 * l)) & 0xFF];
                    signs = pk_iq2_signs(ss & 127, (ss >> 7) & 127, (ss >> 14) & 127, (ss >> 21) & 127);
                    scale = _mm512_set1_epi16((short)(2 * (ss >> 28) + 1));
                    d[r] = fp16_to_fp32(b->d);
                }
                const __m512i v = pk_iq2_chunk(grid, signs, scale);
                _mm256_storeu_si256((__m256i *)(row_at + 128 * (2 * j)), _mm512_castsi512_si256(v));
                _mm256_storeu_si256((__m256i *)(row_at + 128 * (2 * j + 1)), _mm512_extracti64x4_epi64(v, 1));
            }
        }
        for (int p = 0; p < 2; p++) {
            const __m512 dp = _mm512_insertf32x8(_mm512_set1_ps(d[2 * p]), _mm256_set1_ps(d[2 * p + 1]), 1);
            _mm512_storeu_ps(sb + 2048 + 64 * p, dp);
        }
    }
}

/* A decoded group x C columns: per super-block each row's 8 lanes (two rows
 * to a register) from 16 vpdpwssd steps per column, exact; then one
 * vcvtdq2ps and one vfmadd231ps with d_w d_a, b1892's float operations; at
 * the end hsum_float_8 per row and the 1/8. */
PK_FN void pk_iq2_tile_c(const struct pk_iq2_tile *t, const int C) {
    __m512 acc[2][PK_COLS_IQ2];
    PK_UNROLL
    for (int c = 0; c < C; c++) acc[0][c] = acc[1][c] = _mm512_setzero_ps();
    for (int64_t i = 0; i < t->nb; i++) {
        const uint8_t *w = t->w + i * PK_IQ2_SB_BYTES;
        const struct pk_act_iq2 *a = (const struct pk_act_iq2 *)t->act + i * PK_COLS_IQ2;
        __m512i lanes[2][PK_COLS_IQ2];
        PK_UNROLL
        for (int c = 0; c < C; c++) lanes[0][c] = lanes[1][c] = _mm512_setzero_si512();
        PK_UNROLL
        for (int jh = 0; jh < 16; jh++) {
            const __m512i w0 = _mm512_loadu_si512(w + 128 * jh), w1 = _mm512_loadu_si512(w + 128 * jh + 64);
            PK_UNROLL
            for (int c = 0; c < C; c++) {
                const __m512i y = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(a[c].qs + 16 * jh)));
                lanes[0][c] = _mm512_dpwssd_epi32(lanes[0][c], w0, y);
                lanes[1][c] = _mm512_dpwssd_epi32(lanes[1][c], w1, y);
            }
        }
        const __m512 d0 = _mm512_loadu_ps(w + 2048), d1 = _mm512_loadu_ps(w + 2048 + 64);
        PK_UNROLL
        for (int c = 0; c < C; c++) {
            const __m512 dy = _mm512_set1_ps(a[c].d);
            acc[0][c] = _mm512_fmadd_ps(_mm512_mul_ps(d0, dy), _mm512_cvtepi32_ps(lanes[0][c]), acc[0][c]);
            acc[1][c] = _mm512_fmadd_ps(_mm512_mul_ps(d1, dy), _mm512_cvtepi32_ps(lanes[1][c]), acc[1][c]);
        }
    }
    PK_UNROLL
    for (int c = 0; c < C; c++) {
        for (int p = 0; p < 2; p++) {
            float l[16];
            _mm512_storeu_ps(l, acc[p][c]);
            for (int h = 0; h < 2 && 2 * p + h < t->nrows; h++) {
                const float *k = l + 8 * h;
                const float r0 = k[0] + k[4], r1 = k[1] + k[5], r2 = k[2] + k[6], r3 = k[3] + k[7];
                t->dst[c * t->dst_stride + 2 * p + h] = 0.125f * ((r0 + r2) + (r1 + r3));
            }
        }
    }
}

PK_KERNEL void pk_iq2_tile(const struct pk_iq2_tile *t) {
    switch (t->ncols) {
        case 1: pk_iq2_tile_c(t, 1); break;
        case 2: pk_iq2_tile_c(t, 2); break;
        case 3: pk_iq2_tile_c(t, 3); break;
        case 4: pk_iq2_tile_c(t, 4); break;
        case 5: pk_iq2_tile_c(t, 5); break;
        default: pk_iq2_tile_c(t, 6); break;
    }
}

/* ---- IQ2_XXS, IQ2_XS matrix-vector products (AVX-512 VBMI, GFNI; layout at pk_act_iq2v) ---- */

#define PK_VBMI_TARGET PK_TARGET ",avx512vbmi,gfni"
#define PK_VBMI_FN static inline __attribute__((target(PK_VBMI_TARGET), always_inline))

/* Tables built once (pk_iq2v_init): the grids' level codes of positions
 * 4 h..4 h + 3 per grid index, the sign bytes per 7-bit sign index, and the
 * byte and word orders below. */
static struct {
    _Alignas(64) uint8_t levels_xxs[2][256];
    _Alignas(64) uint8_t levels_xs[2][512];
    _Alignas(64) uint8_t signs[128];
    _Alignas(64) uint8_t idx_xxs[64];  /* group j's index byte in the two rows' qs (vpermi2b) */
    _Alignas(64) uint8_t idx_xs[64];   /* group j's index word's low byte; + 1 its high byte */
    _Alignas(64) uint8_t idx_xs_hi[64];
    _Alignas(64) uint8_t sign_fields[64]; /* IQ2_XXS: 7-bit sign fields at 0, 7, 14, 21 of each dword (vpmultishiftqb) */
    _Alignas(64) uint8_t sign_order[64];  /* IQ2_XXS: those fields (32 r + 4 s + g) to group order */
    _Alignas(64) uint32_t sign_words[16]; /* IQ2_XXS: the two rows' sign-and-scale dwords, 8 r + s */
    _Alignas(64) uint16_t scale_xxs[32];  /* word (L, u): dword 8 (L / 2) + u's low word */
    _Alignas(64) uint8_t scale_xs[64];    /* word (L, u): scale byte 8 (L / 2) + u */
    _Alignas(64) uint16_t nibble_xs[32];  /* its nibble: shift 4 (L % 2) */
} pk_iq2v;

static void pk_iq2v_init(void) {
    for (int h = 0; h < 2; h++) {
        for (int i = 0; i < 256; i++) pk_iq2v.levels_xxs[h][i] = (uint8_t)(iq2_xxs_codes[i] >> (8 * h));
        for (int i = 0; i < 512; i++) pk_iq2v.levels_xs[h][i] = (uint8_t)(iq2_xs_codes[i] >> (8 * h));
    }
    for (int i = 0; i < 128; i++) pk_iq2v.signs[i] = iq2_sign_byte((unsigned)i);
    for (int r = 0; r < 2; r++)
        for (int g = 0; g < 4; g++)
            for (int s = 0; s < 8; s++) {
                const int j = 32 * r + 8 * g + s;
                pk_iq2v.idx_xxs[j] = (uint8_t)(64 * r + 8 * s + g);
                pk_iq2v.idx_xs[j] = (uint8_t)(64 * r + 2 * (4 * s + g));
                pk_iq2v.idx_xs_hi[j] = (uint8_t)(64 * r + 2 * (4 * s + g) + 1);
                pk_iq2v.sign_order[j] = (uint8_t)(32 * r + 4 * s + g);
            }
    for (int q = 0; q < 8; q++)
        for (int b = 0; b < 8; b++) pk_iq2v.sign_fields[8 * q + b] = (uint8_t)(32 * (b / 4) + 7 * (b % 4));
    for (int d = 0; d < 16; d++) pk_iq2v.sign_words[d] = (uint32_t)(16 * (d / 8) + 2 * (d % 8) + 1);
    for (int L = 0; L < 4; L++)
        for (int u = 0; u < 8; u++) {
            pk_iq2v.scale_xxs[8 * L + u] = (uint16_t)(2 * (8 * (L / 2) + u));
            pk_iq2v.scale_xs[2 * (8 * L + u)] = (uint8_t)(8 * (L / 2) + u);
            pk_iq2v.nibble_xs[8 * L + u] = (uint16_t)(4 * (L % 2));
        }
}

PK_VBMI_FN __m512i pk_iq2v_load(const void *p) { return _mm512_load_si512(p); }

/* The level codes of positions 4 h..4 h + 3 for the 64 groups (idx: the
 * indices' low 8 bits; quarter[n]: the groups whose index lies in the n-th
 * 128 entries). Each lookup writes only its quarter's bytes, so the later
 * ones still find their indices in the others'. */
PK_VBMI_FN __m512i pk_iq2v_levels(const uint8_t *tab, __m512i idx, const __mmask64 quarter[4], const bool xs) {
    __m512i c = idx;
    for (int n = 0; n < (xs ? 4 : 2); n++) {
        c = _mm512_mask2_permutex2var_epi8(pk_iq2v_load(tab + 128 * n), c, quarter[n], pk_iq2v_load(tab + 128 * n + 64));
    }
    return c;
}

/* The magnitudes (8, 25, 43) of the levels at bits b, b + 1 of each byte:
 * one affine transform over GF(2) (8 xor 17 level bit 0 xor 35 level bit 1;
 * row i of the matrix, byte 7 - i, picks the input bits of output bit i). */
PK_VBMI_FN __m512i pk_iq2v_magnitudes(__m512i levels, const int b) {
    const uint64_t lo = 1ull << b, hi = 2ull << b;
    const uint64_t matrix = (lo | hi) << 56 | hi << 48 | lo << 24 | hi << 16; /* output bits 0, 1, 4, 5 */
    return _mm512_gf2p8affine_epi64_epi8(levels, _mm512_set1_epi64((long long)matrix), 0x08);
}

/* Rows row0 and row1 (the same row twice for an odd last one) x C
 * columns: per super-block the groups' indices, signs and the words'
 * scales from both rows' blocks, the magnitudes and sign masks once for
 * all columns, then per column, half h and part t b1892's lanes as word
 * pairs of sub-blocks s = 2 v, 2 v + 1 (vpmaddwd with the scales),
 * transposed and added into dword 8 r + l (row r's lane l = 2 g + h,
 * exact); then vcvtdq2ps and one FMA with d_w d_a, as b1892. */
PK_VBMI_FN void pk_iq2v_pair(const struct pk_iq2_vec *v, const uint8_t *row0, const uint8_t *row1,
                             float out[PK_IQ2_VEC_COLS][2], const bool xs, const int C) {
    const size_t bb = xs ? sizeof(block_iq2_xs) : sizeof(block_iq2_xxs);
    const uint8_t *levels = xs ? pk_iq2v.levels_xs[0] : pk_iq2v.levels_xxs[0];
    const __m512i zero = _mm512_setzero_si512();
    __m512 acc[PK_IQ2_VEC_COLS];
    PK_UNROLL
    for (int c = 0; c < C; c++) acc[c] = _mm512_setzero_ps();
    for (int64_t i = 0; i < v->nb; i++) {
        const uint8_t *b0 = row0 + bb * (size_t)i, *b1 = row1 + bb * (size_t)i;
        const struct pk_act_iq2v *a = (const struct pk_act_iq2v *)(v->act + v->act_stride * (size_t)i); /* a[c] */
        pk_prefetch(b0, bb, PK_PREFETCH_BYTES, true);
        pk_prefetch(b1, bb, PK_PREFETCH_BYTES, true);
        /* the 64 bytes of qs (the same offset in both block types) */
        _Static_assert(offsetof(block_iq2_xxs, qs) == offsetof(block_iq2_xs, qs) &&
                           offsetof(block_iq2_xxs, d) == offsetof(block_iq2_xs, d), "IQ2 blocks: d, then qs");
        const __m512i q0 = _mm512_loadu_si512(b0 + offsetof(block_iq2_xxs, qs));
        const __m512i q1 = _mm512_loadu_si512(b1 + offsetof(block_iq2_xxs, qs));
        __m512i idx, sb, scale;
        __mmask64 k8 = 0;
        if (xs) {
            idx = _mm512_permutex2var_epi8(q0, pk_iq2v_load(pk_iq2v.idx_xs), q1);
            const __m512i hi = _mm512_permutex2var_epi8(q0, pk_iq2v_load(pk_iq2v.idx_xs_hi), q1);
            k8 = _mm512_test_epi8_mask(hi, _mm512_set1_epi8(1));
            sb = _mm512_permutex2var_epi8(pk_iq2v_load(pk_iq2v.signs), _mm512_srli_epi16(hi, 1),
                                          pk_iq2v_load(pk_iq2v.signs + 64));
            uint64_t s0, s1;
            memcpy(&s0, b0 + offsetof(block_iq2_xs, scales), 8);
            memcpy(&s1, b1 + offsetof(block_iq2_xs, scales), 8);
            const __m512i bytes = _mm512_broadcast_i32x4(_mm_set_epi64x((long long)s1, (long long)s0));
            const __m512i w = _mm512_maskz_permutexvar_epi8(0x5555555555555555ULL, pk_iq2v_load(pk_iq2v.scale_xs), bytes);
            const __m512i nib = _mm512_and_si512(_mm512_srlv_epi16(w, pk_iq2v_load(pk_iq2v.nibble_xs)),
                                                 _mm512_set1_epi16(0x0F));
            scale = _mm512_add_epi16(_mm512_add_epi16(nib, nib), _mm512_set1_epi16(1));
        } else {
            idx = _mm512_permutex2var_epi8(q0, pk_iq2v_load(pk_iq2v.idx_xxs), q1);
            const __m512i words = _mm512_permutex2var_epi32(q0, pk_iq2v_load(pk_iq2v.sign_words), q1);
            const __m512i fields = _mm512_permutexvar_epi8(
                pk_iq2v_load(pk_iq2v.sign_order), _mm512_multishift_epi64_epi8(pk_iq2v_load(pk_iq2v.sign_fields), words));
            sb = _mm512_permutex2var_epi8(pk_iq2v_load(pk_iq2v.signs), fields, pk_iq2v_load(pk_iq2v.signs + 64));
            const __m512i s = _mm512_srli_epi32(words, 28);
            scale = _mm512_permutexvar_epi16(pk_iq2v_load(pk_iq2v.scale_xxs),
                                             _mm512_add_epi32(_mm512_add_epi32(s, s), _mm512_set1_epi32(1)));
        }
        const __mmask64 k7 = _mm512_movepi8_mask(idx);
        const __mmask64 quarter[4] = { _kandn_mask64(k7, _knot_mask64(k8)), _kandn_mask64(k8, k7), _kandn_mask64(k7, k8),
                                       _kand_mask64(k7, k8) };
        const __m512i signs2[2] = { _mm512_unpacklo_epi8(sb, sb), _mm512_unpackhi_epi8(sb, sb) };
        __m512i levels_h[2], shifted[2];
        PK_UNROLL
        for (int h = 0; h < 2; h++) {
            levels_h[h] = pk_iq2v_levels(levels + (xs ? 512 : 256) * h, idx, quarter, xs);
            /* byte pairs (c, c >> 2): positions 2 m and 2 m + 1 at the same bits 4 m, 4 m + 1 */
            shifted[h] = _mm512_srli_epi16(levels_h[h], 2);
        }
        /* per part t: lane L's dwords v = 0..3 (sub-block pairs) of h = 0 and 1 added pairwise */
        __m512i part[2][PK_IQ2_VEC_COLS];
        PK_UNROLL
        for (int t = 0; t < 2; t++) {
            __m512i half[2][PK_IQ2_VEC_COLS];
            PK_UNROLL
            for (int h = 0; h < 2; h++) {
                const __m512i pairs = t ? _mm512_unpackhi_epi8(levels_h[h], shifted[h])
                                        : _mm512_unpacklo_epi8(levels_h[h], shifted[h]);
                __m512i sum[PK_IQ2_VEC_COLS];
                PK_UNROLL
                for (int m = 0; m < 2; m++) {
                    const int p = 4 * h + 2 * m;
                    const __m512i mag = pk_iq2v_magnitudes(pairs, 4 * m);
                    const __mmask64 neg = _mm512_test_epi8_mask(signs2[t], _mm512_set1_epi16((short)((1 << p) | (2 << p) << 8)));
                    PK_UNROLL
                    for (int col = 0; col < C; col++) {
                        const __m512i y = pk_iq2v_load(a[col].qs[h][m][t]);
                        const __m512i prod = _mm512_maddubs_epi16(mag, _mm512_mask_sub_epi8(y, neg, zero, y));
                        sum[col] = m ? _mm512_add_epi16(sum[col], prod) : prod;
                    }
                }
                PK_UNROLL
                for (int col = 0; col < C; col++) half[h][col] = _mm512_madd_epi16(sum[col], scale);
            }
            PK_UNROLL
            for (int col = 0; col < C; col++) {
                part[t][col] = _mm512_add_epi32(_mm512_unpacklo_epi32(half[0][col], half[1][col]),
                                                _mm512_unpackhi_epi32(half[0][col], half[1][col]));
            }
        }
        fp16_t h0, h1;
        memcpy(&h0, b0 + offsetof(block_iq2_xxs, d), sizeof h0); /* the same offset in block_iq2_xs */
        memcpy(&h1, b1 + offsetof(block_iq2_xxs, d), sizeof h1);
        const __m128 dw = _mm_cvtph_ps(_mm_cvtsi32_si128((int)((uint32_t)h1 << 16 | h0)));
        PK_UNROLL
        for (int col = 0; col < C; col++) {
            /* lane L: (h, t) = (0, 0), (1, 0), (0, 1), (1, 1), each added over v */
            const __m512i lanes = _mm512_add_epi32(_mm512_unpacklo_epi64(part[0][col], part[1][col]),
                                                   _mm512_unpackhi_epi64(part[0][col], part[1][col]));
            const __m128 d01 = _mm_mul_ps(dw, _mm_set1_ps(a[col].d));
            const __m512 d = _mm512_permutexvar_ps(_mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0),
                                                   _mm512_castps128_ps512(d01));
            acc[col] = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(lanes), acc[col]);
        }
    }
    PK_UNROLL
    for (int col = 0; col < C; col++) {
        float l[16];
        _mm512_storeu_ps(l, acc[col]);
        for (int r = 0; r < 2; r++) {
            const float *k = l + 8 * r;
            const float r0 = k[0] + k[4], r1 = k[1] + k[5], r2 = k[2] + k[6], r3 = k[3] + k[7];
            out[col][r] = 0.125f * ((r0 + r2) + (r1 + r3));
        }
    }
}

#define PK_IQ2V_COLS(C)                                   \
    if (v->xs) pk_iq2v_pair(v, row0, row1, out, true, C); \
    else pk_iq2v_pair(v, row0, row1, out, false, C);

_Static_assert(PK_IQ2_VEC_COLS == 6, "pk_iq2_vec dispatches 1..6 columns");

static __attribute__((target(PK_VBMI_TARGET))) void pk_iq2_vec(const struct pk_iq2_vec *v) {
    for (int64_t r = 0; r < v->nrows; r += 2) {
        const uint8_t *row0 = v->rows + (size_t)r * v->row_bytes;
        const uint8_t *row1 = r + 1 < v->nrows ? row0 + v->row_bytes : row0;
        float out[PK_IQ2_VEC_COLS][2];
        switch (v->ncols) {
            case 1: PK_IQ2V_COLS(1) break;
            case 2: PK_IQ2V_COLS(2) break;
            case 3: PK_IQ2V_COLS(3) break;
            case 4: PK_IQ2V_COLS(4) break;
            case 5: PK_IQ2V_COLS(5) break;
            default: PK_IQ2V_COLS(6) break;
        }
        for (int c = 0; c < v->ncols; c++) {
            v->dst[c * v->dst_stride + r] = out[c][0];
            if (r + 1 < v->nrows) v->dst[c * v->dst_stride + r + 1] = out[c][1];
        }
    }
}
#undef PK_IQ2V_COLS

static const struct pk_kernels pk_avx512 = {
    .isa = PK_ISA_AVX512, .fast = false,
    .q4_0 = pk_q4_0_tile, .q8_0 = pk_q8_0_tile, .q8_0_pair = pk_q8_0_pair, .q5_0 = pk_q5_0_tile,
    .q4_1 = pk_q4_1_tile, .q5_1 = pk_q5_1_tile, .q2_K = pk_q2_K_tile, .q3_K = pk_q3_K_tile, .q4_K = pk_q4_K_tile,
    .q5_K = pk_q5_K_tile, .q6_K = pk_q6_K_tile, .f16 = pk_f16_item, .iq2_decode = pk_iq2_decode, .iq2 = pk_iq2_tile,
};

static const struct pk_kernels pk_avx512_fast = {
    .isa = PK_ISA_AVX512, .fast = true,
    .q4_0 = pk_q4_0_fast_tile, .q8_0 = pk_q8_0_fast_tile,
    .q4_0_pair = pk_q4_0_fast_pair, .q8_0_pair = pk_q8_0_fast_pair,
    .q5_0 = pk_q5_0_tile, .q4_1 = pk_q4_1_tile,
    .q5_1 = pk_q5_1_tile, .q2_K = pk_q2_K_tile, .q3_K = pk_q3_K_tile, .q4_K = pk_q4_K_fast_tile,
    .q5_K = pk_q5_K_tile,
    .q6_K = pk_q6_K_fast_tile, .f16 = pk_f16_item, .iq2_decode = pk_iq2_decode, .iq2 = pk_iq2_tile,
};

const struct pk_kernels *pk_kernels_x86(bool fast) {
    const struct cpu_features *f = cpu_features_get();
    const bool ok = f->avx2 && f->fma && f->f16c && f->avx512f && f->avx512bw && f->avx512vl && f->avx512dq &&
                    f->avx512vnni;
    if (!ok) return pk_kernels_avx2(fast);
    static struct pk_kernels kernels; /* called once (pk_kernels in cpu_packed.c) */
    kernels = fast ? pk_avx512_fast : pk_avx512;
    if (fast && f->amx_int8 && pk_amx_permitted()) {
        kernels.q4_0_amx = pk_q4_0_amx_tile;
        kernels.q8_0_amx = pk_q8_0_amx_tile;
        kernels.q4_K_amx = pk_q4_K_amx_tile;
        kernels.q6_K_amx = pk_q6_K_amx_tile;
    }
    if (f->avx512vbmi && f->gfni) {
        pk_iq2v_init();
        kernels.iq2_vec = pk_iq2_vec;
    }
    return &kernels;
}

#else

const struct pk_kernels *pk_kernels_x86(bool fast) {
    (void)fast;
    return NULL;
}

#endif

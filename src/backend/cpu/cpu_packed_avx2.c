/*
 * AVX2 (+ FMA, F16C) micro-kernels of the packed matrix products
 * (cpu_packed.h), for x86-64 CPUs without AVX-512 VNNI: layouts in
 * cpu_packed_impl.h (PK_ISA_AVX2).
 *
 * Quantized tiles: a 256-bit register holds the lanes of a row pair (dword
 * 4 h + k = b1892's lane k of row 2 p + h, or lane 4 + k in the register of
 * a block's elements 16..31), so every instruction works on 2 outputs of one
 * column. Without vpdpbusd a block's integer lanes take vpmaddubsw (byte
 * pairs into words) and vpmaddwd with ones (word pairs into the dwords);
 * they are exact (no word can saturate with these operands). Then, as in
 * the reference, one vcvtdq2ps and one vfmadd231ps per lane register and
 * block (k-quants: per super-block, their sub-block scales applied to the
 * integer lanes by vpmaddwd), with the rows' scales times the column's, and
 * at the end lane k onto k + 4 and hsum_float_8 per row: the reference's
 * float operations, so the results are its bits. The fast mode's Q4_0 and
 * Q8_0 tiles (its own arithmetic, cpu_packed.h) hold 8 rows a register
 * instead. Each section says what its types add.
 *
 * Zen 3, for which these were tuned: 16 ymm registers, vpmaddubsw and
 * vpmaddwd on the same two pipes, FMAs on two others, and about two loads
 * a cycle (plain, memory operands and broadcasts alike): the column records
 * hold every operand as a whole 256-bit load, and each tile keeps as many
 * accumulators as the registers allow without spilling.
 */
#include "backend/cpu/cpu_packed_impl.h"

#if defined(__x86_64__)
#include <immintrin.h>
#include <string.h>

#include "core/cpu_features.h"

#define PA_TARGET "avx2,fma,f16c"
#define PA_FN static inline __attribute__((target(PA_TARGET), always_inline))
#define PA_KERNEL static __attribute__((target(PA_TARGET)))
/* Loops over a tile's rows and columns are unrolled even at -O2 (the Ruby
 * gem's build): their accumulators must live in registers. */
#define PA_UNROLL _Pragma("GCC unroll 16")

PA_FN __m256i pa_load(const void *p) { return _mm256_loadu_si256((const __m256i *)p); }

/* Dword lanes of 4 byte products: u unsigned, s signed, |u s| 2 < 32768. */
PA_FN __m256i pa_dot4(__m256i u, __m256i s) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
}

/* The scales of row pair p of a group (4 halves at h): row 2 p in the low
 * 4 lanes, 2 p + 1 in the high; the halves spread before they are
 * converted (vpshufb: vpermps on the floats costs a pipe the products
 * need; Q4_0 generation 2-3% faster). */
PA_FN __m256 pa_pair_scales(const uint8_t *h, int p) {
    const char a0 = (char)(4 * p), a1 = (char)(4 * p + 1), b0 = (char)(4 * p + 2), b1 = (char)(4 * p + 3);
    const __m128i spread = _mm_setr_epi8(a0, a1, a0, a1, a0, a1, a0, a1, b0, b1, b0, b1, b0, b1, b0, b1);
    return _mm256_cvtph_ps(_mm_shuffle_epi8(_mm_loadl_epi64((const __m128i *)h), spread));
}

/* hsum_float_8 of both rows of a pair, lanes 0-3 in lo and 4-7 in hi: lane
 * k onto k + 4, then (l0 + l2) + (l1 + l3) in each half; the two rows'
 * results in dwords 0 and 4. */
PA_FN __m256 pa_pair_hsum(__m256 lo, __m256 hi) {
    const __m256 s = _mm256_add_ps(lo, hi);
    const __m256 t = _mm256_add_ps(s, _mm256_permute_ps(s, _MM_SHUFFLE(1, 0, 3, 2)));
    return _mm256_add_ps(t, _mm256_permute_ps(t, _MM_SHUFFLE(2, 3, 0, 1)));
}

/* Row 2 p and 2 p + 1 of a group's outputs (pa_pair_hsum's) to dst[2 p ..],
 * rows at or past nrows left alone. */
PA_FN void pa_store_pair(__m256 u, float *dst, int p, int nrows) {
    if (2 * p < nrows) dst[2 * p] = _mm256_cvtss_f32(u);
    if (2 * p + 1 < nrows) dst[2 * p + 1] = _mm256_cvtss_f32(_mm256_permute2f128_ps(u, u, 1));
}

/* ---- the legacy types (exact) ---------------------------------------------------------------- */

enum pa_legacy { PA_Q4_0, PA_Q5_0, PA_Q4_1, PA_Q5_1, PA_Q8_0 };

/* Bytes of a block's header and quants in a group of 4 rows. */
static inline size_t pa_legacy_hdr(enum pa_legacy kind) {
    return kind == PA_Q5_1 ? 32 : kind == PA_Q5_0 ? 24 : kind == PA_Q4_1 ? 16 : 8;
}
static inline size_t pa_legacy_q(enum pa_legacy kind) { return kind == PA_Q8_0 ? 128 : 64; }

/* Byte j = 0xFF where bit j of the 32 bits at p is set, else 0. */
PA_FN __m256i pa_bits_to_bytes(const uint8_t *p) {
    int32_t bits;
    memcpy(&bits, p, 4);
    const __m256i spread = _mm256_shuffle_epi8(
        _mm256_set1_epi32(bits),
        _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0101010101010101, 0x0000000000000000));
    const __m256i sel = _mm256_set1_epi64x((long long)0x8040201008040201ULL);
    return _mm256_cmpeq_epi8(_mm256_and_si256(spread, sel), sel);
}

/* Row pair p's registers of a block (elements 0..15 in *lo, 16..31 in
 * *hi): the nibbles, unsigned, with the fifth bits adding 16 (Q5_0, Q5_1:
 * row r's 16 bits for each half at 2 r of the header's 8-byte masks);
 * Q4_0's 8 and Q5_0's 16 come back out through the activations'
 * corrections. Q8_0: |q| in *lo, *hi and q itself in *slo, *shi, whose
 * signs the activations take. */
PA_FN void pa_legacy_weights(enum pa_legacy kind, const uint8_t *q, const uint8_t *hdr, int p, __m256i *lo,
                             __m256i *hi, __m256i *slo, __m256i *shi) {
    *slo = *shi = _mm256_setzero_si256();
    if (kind == PA_Q8_0) {
        *slo = pa_load(q + 32 * p);
        *shi = pa_load(q + 64 + 32 * p);
        *lo = _mm256_sign_epi8(*slo, *slo);
        *hi = _mm256_sign_epi8(*shi, *shi);
        return;
    }
    const __m256i z = pa_load(q + 32 * p), m4 = _mm256_set1_epi8(0x0F);
    *lo = _mm256_and_si256(z, m4);
    *hi = _mm256_and_si256(_mm256_srli_epi16(z, 4), m4);
    if (kind == PA_Q5_0 || kind == PA_Q5_1) {
        const uint8_t *bits = hdr + (kind == PA_Q5_1 ? 16 : 8) + 4 * p;
        const __m256i sixteen = _mm256_set1_epi8(16);
        *lo = _mm256_or_si256(*lo, _mm256_and_si256(pa_bits_to_bytes(bits), sixteen));
        *hi = _mm256_or_si256(*hi, _mm256_and_si256(pa_bits_to_bytes(bits + 8), sixteen));
    }
}

/* The integer lanes of one register (w: pa_legacy_weights' unsigned, sw:
 * the signed ones) against half h of a column's record. */
PA_FN __m256i pa_legacy_lanes(enum pa_legacy kind, __m256i w, __m256i sw, const struct pk_act_q8x *a, int h) {
    if (kind == PA_Q8_0) return pa_dot4(w, _mm256_sign_epi8(pa_load(a->qs[h]), sw));
    const __m256i l = pa_dot4(w, pa_load(a->qs[h]));
    return kind == PA_Q4_0 || kind == PA_Q5_0 ? _mm256_add_epi32(l, pa_load(a->corr[h])) : l;
}

/* Both row pairs x C columns from column c0 of the tile. Each output
 * follows the reference's float operations: per block its lanes, converted,
 * times d_w d_a rounded, fused into its 8 accumulators; then hsum_float_8.
 * Q4_1 and Q5_1 add b1892's scalar sum of each block's min times the
 * column's s (fused in block order into every lane of acc_m; dword 0 of
 * each half is the row's). */
PA_FN void pa_legacy_run(const struct pk_tile *t, const enum pa_legacy kind, const int C, const int c0) {
    const size_t qbytes = pa_legacy_q(kind), hbytes = pa_legacy_hdr(kind);
    const bool mins = kind == PA_Q4_1 || kind == PA_Q5_1;
    const bool stream = t->ncols == 1;
    const size_t ahead = pk_vec_ahead(t); /* used when streaming */
    __m256 acc_lo[2][2], acc_hi[2][2], acc_m[2][2]; /* [pair][column] */
    PA_UNROLL
    for (int p = 0; p < 2; p++) {
        PA_UNROLL
        for (int c = 0; c < C; c++) acc_lo[p][c] = acc_hi[p][c] = acc_m[p][c] = _mm256_setzero_ps();
    }
    for (int64_t i = 0; i < t->nb; i++) {
        const struct pk_act_q8x *a = (const struct pk_act_q8x *)t->act + i * PK_COLS_Q8 + c0;
        const uint8_t *hdr;
        const uint8_t *q = pk_group_block(t, i, hbytes, qbytes, stream, ahead, &hdr);
        PA_UNROLL
        for (int p = 0; p < 2; p++) {
            __m256i lo, hi, slo, shi;
            pa_legacy_weights(kind, q, hdr, p, &lo, &hi, &slo, &shi);
            const __m256 dw = pa_pair_scales(hdr, p);
            PA_UNROLL
            for (int c = 0; c < C; c++) {
                const __m256 d = _mm256_mul_ps(dw, _mm256_loadu_ps(a[c].d));
                const __m256i ilo = pa_legacy_lanes(kind, lo, slo, &a[c], 0);
                const __m256i ihi = pa_legacy_lanes(kind, hi, shi, &a[c], 1);
                acc_lo[p][c] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(ilo), acc_lo[p][c]);
                acc_hi[p][c] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(ihi), acc_hi[p][c]);
                if (mins) {
                    acc_m[p][c] = _mm256_fmadd_ps(pa_pair_scales(hdr + 8, p), _mm256_loadu_ps(a[c].s),
                                                  acc_m[p][c]);
                }
            }
        }
    }
    PA_UNROLL
    for (int p = 0; p < 2; p++) {
        PA_UNROLL
        for (int c = 0; c < C; c++) {
            __m256 u = pa_pair_hsum(acc_lo[p][c], acc_hi[p][c]);
            if (mins) u = _mm256_add_ps(u, acc_m[p][c]);
            float *dst = t->dst + (size_t)(c0 + c) * t->dst_stride;
            pa_store_pair(u, dst, p, t->nrows);
        }
    }
}

/* Both row pairs against 2 columns at a time, so that each record serves 4
 * rows (one row pair against 4 columns measured slower: bench_matmul -t 2
 * --prompt-only, 2048 x 5632 x 512, Zen 3, Q4_0: 98 against 120 GOP/s). */
PA_FN void pa_legacy_tile(const struct pk_tile *t, const enum pa_legacy kind) {
    for (int c0 = 0; c0 < t->ncols; c0 += 2) {
        if (t->ncols - c0 >= 2) pa_legacy_run(t, kind, 2, c0);
        else pa_legacy_run(t, kind, 1, c0);
    }
}

PA_KERNEL void pa_q4_0_tile(const struct pk_tile *t) { pa_legacy_tile(t, PA_Q4_0); }
PA_KERNEL void pa_q8_0_tile(const struct pk_tile *t) { pa_legacy_tile(t, PA_Q8_0); }
PA_KERNEL void pa_q5_0_tile(const struct pk_tile *t) { pa_legacy_tile(t, PA_Q5_0); }
PA_KERNEL void pa_q4_1_tile(const struct pk_tile *t) { pa_legacy_tile(t, PA_Q4_1); }
PA_KERNEL void pa_q5_1_tile(const struct pk_tile *t) { pa_legacy_tile(t, PA_Q5_1); }

/* ---- k-quants (exact) -------------------------------------------------------------------------
 * b1892's AVX2 dot products keep one set of 8 lanes per output for a whole
 * super-block: each 32 elements' byte pair sums (vpmaddubsw) are multiplied
 * by their sub-block's scale into the lanes (vpmaddwd) and added, and only
 * then converted and fused with d_w d_a. Row pair p of a group: the low
 * 128 bits of a register row 2 p, the high ones row 2 p + 1; the register of
 * half h of a chunk's 32 elements holds lanes 4 h ..4 h + 3. What each type
 * adds is said at pa_kq_quants and pa_kq_run. */

enum pa_kq { PA_Q2_K, PA_Q3_K, PA_Q4_K, PA_Q5_K, PA_Q6_K };

/* Columns a k-quant kernel pass takes (pa_kq_tile). */
#define PA_KQ_COLS 2

static inline size_t pa_kq_hdr(enum pa_kq kind) { return kind == PA_Q3_K || kind == PA_Q6_K ? 72 : 80; }
static inline size_t pa_kq_q(enum pa_kq kind) {
    return kind == PA_Q2_K ? 256 : kind == PA_Q3_K ? 384 : kind == PA_Q4_K ? 512 : kind == PA_Q5_K ? 640 : 768;
}

/* The rows' byte scales at sc (sc[row], 4 bytes: the layouts' sc[chunk][row])
 * as words for row pair p: row 2 p's in the low 8 words, 2 p + 1's in the
 * high ones; signed bytes sign-extended. */
PA_FN __m256i pa_pair_scale_words(const uint8_t *sc, int p, bool is_signed) {
    int32_t v;
    memcpy(&v, sc, 4);
    const char r0 = (char)(2 * p), r1 = (char)(2 * p + 1), z = (char)0x80;
    const __m256i w = is_signed ? _mm256_shuffle_epi8(_mm256_set1_epi32(v),
                                                      _mm256_setr_epi8(z, r0, z, r0, z, r0, z, r0, z, r0, z, r0, z, r0, z, r0,
                                                                       z, r1, z, r1, z, r1, z, r1, z, r1, z, r1, z, r1, z, r1))
                                : _mm256_shuffle_epi8(_mm256_set1_epi32(v),
                                                      _mm256_setr_epi8(r0, z, r0, z, r0, z, r0, z, r0, z, r0, z, r0, z, r0, z,
                                                                       r1, z, r1, z, r1, z, r1, z, r1, z, r1, z, r1, z, r1, z));
    return is_signed ? _mm256_srai_epi16(w, 8) : w;
}

/* Bit b of every byte of v moved to bit `to` (word shifts: the mask keeps each byte's own). */
PA_FN __m256i pa_bit_to(__m256i v, int b, int to, __m256i mask) {
    const __m256i m = b < to ? _mm256_slli_epi16(v, to - b) : b > to ? _mm256_srli_epi16(v, b - to) : v;
    return _mm256_and_si256(m, mask);
}

/* Row pair p's unsigned quants of chunks ch = 4 n + k (k = 0..3), elements
 * 16 h ..16 h + 15 of each:
 *   Q4_K, Q5_K: the nibbles of pieces 2 j + h, j = 2 n, 2 n + 1 (low:
 *     chunk 2 j, high: 2 j + 1); Q5_K adds 16 where bit ch of its high
 *     bits (q + 512 + 64 h) is set.
 *   Q6_K: 0..63, the nibbles and high bits of piece 2 n + h joined (the -32
 *     comes back through the activations' m32).
 *   Q3_K: 8 (q + 4), q = -4..3 (its 2 low bits of piece 2 n + h, and the
 *     high bit ch of q + 256 + 64 h, set for q >= 0): with m32 taken off,
 *     the lanes come out as 8 times b1892's, exactly, shifted back later.
 *   Q2_K: 0..3, the 2-bit fields of piece 2 n + h. */
PA_FN void pa_kq_quants(enum pa_kq kind, const uint8_t *q, int n, int h, int p, __m256i u[4]) {
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    if (kind == PA_Q4_K || kind == PA_Q5_K) {
        PA_UNROLL
        for (int jj = 0; jj < 2; jj++) {
            const __m256i z = pa_load(q + 64 * (2 * (2 * n + jj) + h) + 32 * p);
            u[2 * jj] = _mm256_and_si256(z, m4);
            u[2 * jj + 1] = _mm256_and_si256(_mm256_srli_epi16(z, 4), m4);
        }
        if (kind == PA_Q5_K) {
            const __m256i qh = pa_load(q + 512 + 64 * h + 32 * p), bit4 = _mm256_set1_epi8(0x10);
            PA_UNROLL
            for (int k = 0; k < 4; k++) u[k] = _mm256_or_si256(u[k], pa_bit_to(qh, 4 * n + k, 4, bit4));
        }
    } else if (kind == PA_Q6_K) {
        const uint8_t *piece = q + 192 * (2 * n + h);
        const __m256i m30 = _mm256_set1_epi8(0x30);
        const __m256i n02 = pa_load(piece + 32 * p), n13 = pa_load(piece + 64 + 32 * p);
        const __m256i qh = pa_load(piece + 128 + 32 * p);
        u[0] = _mm256_or_si256(_mm256_and_si256(n02, m4), _mm256_and_si256(_mm256_slli_epi16(qh, 4), m30));
        u[1] = _mm256_or_si256(_mm256_and_si256(n13, m4), _mm256_and_si256(_mm256_slli_epi16(qh, 2), m30));
        u[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(n02, 4), m4), _mm256_and_si256(qh, m30));
        u[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(n13, 4), m4),
                               _mm256_and_si256(_mm256_srli_epi16(qh, 2), m30));
    } else {
        const __m256i z = pa_load(q + 64 * (2 * n + h) + 32 * p);
        if (kind == PA_Q2_K) {
            PA_UNROLL
            for (int k = 0; k < 4; k++) u[k] = _mm256_and_si256(_mm256_srli_epi16(z, 2 * k), _mm256_set1_epi8(3));
        } else {
            const __m256i hm = pa_load(q + 256 + 64 * h + 32 * p);
            PA_UNROLL
            for (int k = 0; k < 4; k++) {
                u[k] = _mm256_or_si256(pa_bit_to(z, 2 * k, 3, _mm256_set1_epi8(0x18)),
                                       pa_bit_to(hm, 4 * n + k, 5, _mm256_set1_epi8(0x20)));
            }
        }
    }
}

/* The scale words of chunk ch, half h for row pair p: Q4_K, Q5_K 6-bit
 * per 32 elements; Q6_K, Q3_K signed per 16 (Q3_K's less its bias 32 in
 * the layout); Q2_K the low nibbles per 16. */
PA_FN __m256i pa_kq_scales(enum pa_kq kind, const uint8_t *hdr, int ch, int h, int p) {
    if (kind == PA_Q4_K || kind == PA_Q5_K) return pa_pair_scale_words(hdr + 16 + 4 * ch, p, false);
    const uint8_t *sc = hdr + 8 + 4 * (2 * ch + h);
    if (kind == PA_Q2_K) return _mm256_and_si256(pa_pair_scale_words(sc, p, false), _mm256_set1_epi16(0x0F));
    return pa_pair_scale_words(sc, p, true);
}

/* Q2_K's min lanes of a block for row pair p, lanes 4 h ..4 h + 3 (its
 * 16-groups 8 h ..8 h + 7): lane k of a row, mins 2 k, 2 k + 1 (the high
 * nibbles of the scale bytes) times the column's 16-sums. */
PA_FN __m256i pa_q2_K_mins(const uint8_t *hdr, int p, int h, const struct pk_act_q8kx *a) {
    /* the groups' bytes of rows 2 p, 2 p + 1 (sc[j][row] at 8 + 4 j), row by row, as words */
    const __m256i sc = pa_load(hdr + 8 + 32 * h);
    const char r0 = (char)(2 * p), r1 = (char)(2 * p + 1);
    const __m256i rows = _mm256_shuffle_epi8(
        sc, _mm256_setr_epi8(r0, r0 + 4, r0 + 8, r0 + 12, r1, r1 + 4, r1 + 8, r1 + 12, 0, 0, 0, 0, 0, 0, 0, 0, r0, r0 + 4,
                             r0 + 8, r0 + 12, r1, r1 + 4, r1 + 8, r1 + 12, 0, 0, 0, 0, 0, 0, 0, 0));
    const __m256i ordered = _mm256_permutevar8x32_epi32(rows, _mm256_setr_epi32(0, 4, 1, 5, 2, 3, 6, 7));
    const __m256i mins = _mm256_srli_epi16(_mm256_cvtepu8_epi16(_mm256_castsi256_si128(ordered)), 4);
    return _mm256_madd_epi16(mins, pa_load(a->bsums[h]));
}

/* Q4_K's and Q5_K's mins of row pair p against tile column c,
 * in dwords 0 and 4: per row 4 lanes (lane k: mins 2 k, 2 k + 1 times the
 * column's pair sums) fused with -(d_a dmin) per super-block and reduced
 * as (m0 + m2) + (m1 + m3) (Q4_K), or their integer sum fused into a
 * scalar (Q5_K); b1892 adds either to the lanes' sum last. */
PA_FN __m256 pa_k4_mins(const struct pk_tile *t, enum pa_kq kind, int p, int c) {
    __m256 acc_m = _mm256_setzero_ps();
    for (int64_t i = 0; i < t->nb; i++) {
        const struct pk_act_q8kx *a = (const struct pk_act_q8kx *)t->act + i * PK_COLS_K + c;
        const uint8_t *hdr;
        pk_group_block(t, i, 80, pa_kq_q(kind), false, 0, &hdr);
        const __m256i mn = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)(hdr + 48 + 16 * p)));
        __m256i m = _mm256_madd_epi16(mn, pa_load(a->bpairs));
        if (kind == PA_Q5_K) {
            m = _mm256_add_epi32(m, _mm256_shuffle_epi32(m, _MM_SHUFFLE(1, 0, 3, 2)));
            m = _mm256_add_epi32(m, _mm256_shuffle_epi32(m, _MM_SHUFFLE(2, 3, 0, 1)));
        }
        const __m256 dm = _mm256_mul_ps(pa_pair_scales(hdr + 8, p), _mm256_loadu_ps(a->d));
        acc_m = _mm256_fnmadd_ps(dm, _mm256_cvtepi32_ps(m), acc_m);
    }
    if (kind == PA_Q5_K) return acc_m;
    const __m256 s = _mm256_add_ps(acc_m, _mm256_permute_ps(acc_m, _MM_SHUFFLE(1, 0, 3, 2)));
    return _mm256_add_ps(s, _mm256_permute_ps(s, _MM_SHUFFLE(2, 3, 0, 1)));
}

/* Row pairs [P0, P0 + NP) x C columns from c0. Per super-block
 * each output's integer lanes l[h] (lanes 4 h ..), then as b1892:
 * fmaf(d_w d_a, lanes, acc) into acc_lo / acc_hi (Q2_K: first its min
 * lanes fused with -(d_a dmin), as b1892 does). Q4_K's and Q5_K's mins
 * read only the header, so they run as a pass of their own after the
 * lanes' (pa_k4_mins: fewer registers live in the main loop). */
PA_FN void pa_kq_run(const struct pk_tile *t, const enum pa_kq kind, const int P0, const int NP, const int C,
                     const int c0) {
    const size_t qbytes = pa_kq_q(kind), hbytes = pa_kq_hdr(kind);
    const bool offset = kind == PA_Q6_K || kind == PA_Q3_K; /* the activations' m32 comes off */
    const bool stream = t->ncols == 1;
    const size_t ahead = pk_vec_ahead(t); /* used when streaming */
    __m256 acc_lo[2][PA_KQ_COLS], acc_hi[2][PA_KQ_COLS];
    PA_UNROLL
    for (int p = 0; p < NP; p++) {
        PA_UNROLL
        for (int c = 0; c < C; c++) acc_lo[p][c] = acc_hi[p][c] = _mm256_setzero_ps();
    }
    for (int64_t i = 0; i < t->nb; i++) {
        const struct pk_act_q8kx *a = (const struct pk_act_q8kx *)t->act + i * PK_COLS_K + c0;
        const uint8_t *hdr;
        const uint8_t *q = pk_group_block_large(t, i, hbytes, qbytes, stream, ahead, &hdr);
        __m256i l[2][PA_KQ_COLS][2];
        PA_UNROLL
        for (int p = 0; p < NP; p++) {
            PA_UNROLL
            for (int c = 0; c < C; c++) l[p][c][0] = l[p][c][1] = _mm256_setzero_si256();
        }
        PA_UNROLL
        for (int n = 0; n < 2; n++) {
            PA_UNROLL
            for (int h = 0; h < 2; h++) {
                /* streaming: this quarter's lines, far and near (without the near
                 * ones Q6_K streamed 6-9% slower; a block's lines asked for
                 * at once instead: Q4_K -5-8%, Q6_K -0-7%, Zen 5) */
                if (stream) pk_prefetch(q + (qbytes / 4) * (2 * n + h), qbytes / 4, ahead, true);
                PA_UNROLL
                for (int p = 0; p < NP; p++) {
                    __m256i u[4];
                    pa_kq_quants(kind, q, n, h, P0 + p, u);
                    PA_UNROLL
                    for (int k = 0; k < 4; k++) {
                        const int ch = 4 * n + k;
                        const __m256i sw = pa_kq_scales(kind, hdr, ch, h, P0 + p);
                        PA_UNROLL
                        for (int c = 0; c < C; c++) {
                            __m256i pairs = _mm256_maddubs_epi16(u[k], pa_load(a[c].qs[ch][h]));
                            if (offset) pairs = _mm256_sub_epi16(pairs, pa_load(a[c].m32[ch][h]));
                            l[p][c][h] = _mm256_add_epi32(l[p][c][h], _mm256_madd_epi16(pairs, sw));
                            PK_KEEP_IN_REGISTER(l[p][c][h]);
                        }
                    }
                }
            }
        }
        PA_UNROLL
        for (int p = 0; p < NP; p++) {
            const __m256 dw = pa_pair_scales(hdr, P0 + p);
            PA_UNROLL
            for (int c = 0; c < C; c++) {
                const __m256 dy = _mm256_loadu_ps(a[c].d);
                if (kind == PA_Q2_K) {
                    const __m256 dm = _mm256_mul_ps(pa_pair_scales(hdr + 72, P0 + p), dy);
                    acc_lo[p][c] = _mm256_fnmadd_ps(dm, _mm256_cvtepi32_ps(pa_q2_K_mins(hdr, P0 + p, 0, &a[c])),
                                                    acc_lo[p][c]);
                    acc_hi[p][c] = _mm256_fnmadd_ps(dm, _mm256_cvtepi32_ps(pa_q2_K_mins(hdr, P0 + p, 1, &a[c])),
                                                    acc_hi[p][c]);
                }
                if (kind == PA_Q3_K) {
                    l[p][c][0] = _mm256_srai_epi32(l[p][c][0], 3);
                    l[p][c][1] = _mm256_srai_epi32(l[p][c][1], 3);
                }
                const __m256 d = _mm256_mul_ps(dw, dy);
                acc_lo[p][c] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(l[p][c][0]), acc_lo[p][c]);
                acc_hi[p][c] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(l[p][c][1]), acc_hi[p][c]);
            }
        }
    }
    PA_UNROLL
    for (int p = 0; p < NP; p++) {
        const int P = P0 + p;
        PA_UNROLL
        for (int c = 0; c < C; c++) {
            __m256 u = pa_pair_hsum(acc_lo[p][c], acc_hi[p][c]);
            if (kind == PA_Q4_K || kind == PA_Q5_K) u = _mm256_add_ps(u, pa_k4_mins(t, kind, P, c0 + c));
            pa_store_pair(u, t->dst + (size_t)(c0 + c) * t->dst_stride, P, t->nrows);
        }
    }
}

/* One column: the row pairs one after the other (the second reads the
 * group from L1; both at once spilled registers: bench_matmul -t 2
 * --gen-only 2048 x 5632, Zen 3, Q4_K 25.4-26.5 against 26.5-28.4 GB/s);
 * more: a row pair against PA_KQ_COLS columns at a time (--prompt-only, 512
 * columns: Q4_K 156-183 GOP/s; both pairs x 1 column 147-158, a pair x 3
 * columns 156-171). */
PA_FN void pa_kq_tile(const struct pk_tile *t, const enum pa_kq kind) {
    if (t->ncols == 1) {
        pa_kq_run(t, kind, 0, 1, 1, 0);
        pa_kq_run(t, kind, 1, 1, 1, 0);
        return;
    }
    for (int c0 = 0; c0 < t->ncols; c0 += PA_KQ_COLS) {
        for (int p = 0; p < 2 && 2 * p < t->nrows; p++) {
            if (t->ncols - c0 >= 2) pa_kq_run(t, kind, p, 1, 2, c0);
            else pa_kq_run(t, kind, p, 1, 1, c0);
        }
    }
}

PA_KERNEL void pa_q2_K_tile(const struct pk_tile *t) { pa_kq_tile(t, PA_Q2_K); }
PA_KERNEL void pa_q3_K_tile(const struct pk_tile *t) { pa_kq_tile(t, PA_Q3_K); }
PA_KERNEL void pa_q4_K_tile(const struct pk_tile *t) { pa_kq_tile(t, PA_Q4_K); }
PA_KERNEL void pa_q5_K_tile(const struct pk_tile *t) { pa_kq_tile(t, PA_Q5_K); }
PA_KERNEL void pa_q6_K_tile(const struct pk_tile *t) { pa_kq_tile(t, PA_Q6_K); }

/* ---- fast mode: Q4_0, Q8_0 (cpu_packed.h; groups of 16 rows) ------------------------------
 * A register holds 4 quants of each of 8 rows (half hh of the layout's
 * 64-byte step: rows 8 hh ..8 hh + 7), against the column's 4 activation
 * bytes in every dword. Q4_0: vpmaddubsw's word pair sums of all 8 steps
 * of a block are added as words (at most 8 x 2 x 15 x 127 = 30480), then
 * one vpmaddwd with ones gives each row's block sum of the unsigned
 * nibbles, the column's correction takes the 8 back out. Q8_0 (stored +
 * 128): the signed quants (xor 0x80), |q| against the activations with q's
 * sign as b1892 does (a word pair can reach 2 x 128 x 127, so each step
 * goes to dwords). Then, per block, cpu_fast_mode_dot's convert, d_w d_a
 * and FMA; the accumulators are the outputs. */

/* Columns a fast-mode pass takes: every register but the step's weights
 * and one broadcast holds a row half's sums or accumulator of a column. */
#define PA_FAST_COLS_Q4 3
#define PA_FAST_COLS_Q8 2

/* A fast tile's outputs, acc[hh][c] rows 8 hh ..8 hh + 7,
 * column c0 + c, to dst (rows at or past nrows left alone). */
PA_FN void pa_fast_store(const struct pk_tile *t, __m256 acc[2][PA_FAST_COLS_Q4], int C, int c0) {
    PA_UNROLL
    for (int hh = 0; hh < 2; hh++) {
        const int row0 = 8 * hh, left = t->nrows - row0;
        if (left <= 0) continue;
        const __m256i mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(left), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
        PA_UNROLL
        for (int c = 0; c < C; c++) _mm256_maskstore_ps(t->dst + (size_t)(c0 + c) * t->dst_stride + row0, mask, acc[hh][c]);
    }
}

PA_FN void pa_fast_run(const struct pk_tile *t, const bool q4, const int C, const int c0) {
    const size_t qbytes = q4 ? 256 : 512;
    const bool stream = t->ncols == 1;
    const size_t ahead = pk_vec_ahead(t); /* used when streaming */
    const __m256i m4 = _mm256_set1_epi8(0x0F), sign = _mm256_set1_epi8((char)0x80), ones = _mm256_set1_epi16(1);
    __m256 acc[2][PA_FAST_COLS_Q4];
    PA_UNROLL
    for (int c = 0; c < C; c++) acc[0][c] = acc[1][c] = _mm256_setzero_ps();
    for (int64_t i = 0; i < t->nb; i++) {
        const struct pk_act_q8f *a = (const struct pk_act_q8f *)t->act + i * PK_COLS_FAST + c0;
        const uint8_t *hdr;
        const uint8_t *q = pk_group_block(t, i, 32, qbytes, stream, ahead, &hdr);
        __m256i sum[2][PA_FAST_COLS_Q4];
        PA_UNROLL
        for (int c = 0; c < C; c++) sum[0][c] = sum[1][c] = _mm256_setzero_si256();
        PA_UNROLL
        for (int j = 0; j < 8; j++) {
            __m256i w[2], ws[2];
            PA_UNROLL
            for (int hh = 0; hh < 2; hh++) {
                if (q4) {
                    const __m256i z = pa_load(q + 64 * (j % 4) + 32 * hh);
                    w[hh] = _mm256_and_si256(j < 4 ? z : _mm256_srli_epi16(z, 4), m4);
                } else {
                    ws[hh] = _mm256_xor_si256(pa_load(q + 64 * j + 32 * hh), sign);
                    w[hh] = _mm256_sign_epi8(ws[hh], ws[hh]);
                }
            }
            PA_UNROLL
            for (int c = 0; c < C; c++) {
                int32_t y4;
                memcpy(&y4, a[c].qs + 4 * j, 4);
                const __m256i y = _mm256_set1_epi32(y4);
                PA_UNROLL
                for (int hh = 0; hh < 2; hh++) {
                    if (q4) {
                        sum[hh][c] = _mm256_add_epi16(sum[hh][c], _mm256_maddubs_epi16(w[hh], y));
                    } else {
                        const __m256i p = _mm256_maddubs_epi16(w[hh], _mm256_sign_epi8(y, ws[hh]));
                        sum[hh][c] = _mm256_add_epi32(sum[hh][c], _mm256_madd_epi16(p, ones));
                    }
                    PK_KEEP_IN_REGISTER(sum[hh][c]);
                }
            }
        }
        PA_UNROLL
        for (int hh = 0; hh < 2; hh++) {
            const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(hdr + 16 * hh)));
            PA_UNROLL
            for (int c = 0; c < C; c++) {
                const __m256i isum = q4 ? _mm256_add_epi32(_mm256_madd_epi16(sum[hh][c], ones), _mm256_set1_epi32(a[c].corr))
                                        : sum[hh][c];
                const __m256 d = _mm256_mul_ps(dw, _mm256_set1_ps(a[c].d));
                acc[hh][c] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(isum), acc[hh][c]);
            }
        }
    }
    pa_fast_store(t, acc, C, c0);
}

/* The tile's columns PA_FAST_COLS_Q4 (Q8_0: PA_FAST_COLS_Q8) at a time. */
PA_FN void pa_fast_tile(const struct pk_tile *t, const bool q4) {
    const int step = q4 ? PA_FAST_COLS_Q4 : PA_FAST_COLS_Q8;
    for (int c0 = 0; c0 < t->ncols; c0 += step) {
        const int left = t->ncols - c0;
        if (q4 && left >= 3) pa_fast_run(t, q4, 3, c0);
        else if (left >= 2) pa_fast_run(t, q4, 2, c0);
        else pa_fast_run(t, q4, 1, c0);
    }
}
_Static_assert(PA_FAST_COLS_Q4 == 3 && PA_FAST_COLS_Q8 == 2, "pa_fast_tile's cases");

PA_KERNEL void pa_q4_0_fast_tile(const struct pk_tile *t) { pa_fast_tile(t, true); }
PA_KERNEL void pa_q8_0_fast_tile(const struct pk_tile *t) { pa_fast_tile(t, false); }

/* Columns a fast k-quant pass takes (pa_fast_k_tile). */
#define PA_FAST_COLS_K 2

/* The 8 signed byte scales at p (Q4_K's unsigned ones are below 64), s_r
 * in both words of dword r. */
PA_FN __m256i pa_scale_word_pairs(const uint8_t *p) {
    const __m256i s = _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)p));
    return _mm256_blend_epi16(s, _mm256_slli_epi32(s, 16), 0xAA);
}

/* Fast-mode Q4_K (the PK_FAST_ROWS layout as two halves of 8 rows),
 * cpu_fast_mode_dot's operations: per sub-block j and half hh the 8
 * steps' vpmaddubsw word pairs are added as words (at most 8 x 2 x 15 x
 * 128 = 30720), then one vpmaddwd with the rows' scale in both words of
 * their dword adds the exact sub-block sums times the scales; the mins'
 * sum takes 4 vpmaddwd of the rows' min pairs with the column's sub-block
 * pair sums. Per super-block the two FMAs of the reference. */
PA_FN void pa_fast_q4_K_run(const struct pk_tile *t, const int C, const int c0) {
    const bool stream = t->ncols == 1;
    const size_t ahead = pk_vec_ahead(t); /* used when streaming */
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    __m256 acc[2][PA_FAST_COLS_Q4]; /* pa_fast_store's shape */
    PA_UNROLL
    for (int c = 0; c < C; c++) acc[0][c] = acc[1][c] = _mm256_setzero_ps();
    for (int64_t i = 0; i < t->nb; i++) {
        const struct pk_act_q8k *a = (const struct pk_act_q8k *)t->act + i * PK_COLS_FAST_K + c0;
        const uint8_t *hdr;
        const uint8_t *q = pk_group_block_large(t, i, 320, 2048, stream, ahead, &hdr);
        __m256i isum[2][PA_FAST_COLS_K];
        PA_UNROLL
        for (int c = 0; c < C; c++) isum[0][c] = isum[1][c] = _mm256_setzero_si256();
        for (int jj = 0; jj < 4; jj++) {
            if (stream) pk_prefetch(q + 512 * jj, 512, ahead, true);
            PA_UNROLL
            for (int odd = 0; odd < 2; odd++) {
            const int j = 2 * jj + odd; /* sub-block: the low (even) or high (odd) nibbles of chunk jj */
            __m256i sum[2][PA_FAST_COLS_K];
            PA_UNROLL
            for (int s = 0; s < 8; s++) {
                __m256i w[2];
                PA_UNROLL
                for (int hh = 0; hh < 2; hh++) {
                    const __m256i z = pa_load(q + 64 * (8 * jj + s) + 32 * hh);
                    w[hh] = _mm256_and_si256(odd ? _mm256_srli_epi16(z, 4) : z, m4);
                }
                PA_UNROLL
                for (int c = 0; c < C; c++) {
                    int32_t y4;
                    memcpy(&y4, a[c].qs + 32 * j + 4 * s, 4);
                    const __m256i y = _mm256_set1_epi32(y4);
                    PA_UNROLL
                    for (int hh = 0; hh < 2; hh++) {
                        const __m256i p = _mm256_maddubs_epi16(w[hh], y);
                        sum[hh][c] = s == 0 ? p : _mm256_add_epi16(sum[hh][c], p);
                        PK_KEEP_IN_REGISTER(sum[hh][c]);
                    }
                }
            }
            PA_UNROLL
            for (int hh = 0; hh < 2; hh++) {
                const __m256i sw = pa_scale_word_pairs(hdr + 64 + 16 * j + 8 * hh);
                PA_UNROLL
                for (int c = 0; c < C; c++) {
                    isum[hh][c] = _mm256_add_epi32(isum[hh][c], _mm256_madd_epi16(sum[hh][c], sw));
                    PK_KEEP_IN_REGISTER(isum[hh][c]);
                }
            }
            }
        }
        PA_UNROLL
        for (int hh = 0; hh < 2; hh++) {
            __m256i imin[PA_FAST_COLS_K];
            PA_UNROLL
            for (int c = 0; c < C; c++) imin[c] = _mm256_setzero_si256();
            PA_UNROLL
            for (int p = 0; p < 4; p++) {
                const __m256i mn = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)(hdr + 192 + 32 * p + 16 * hh)));
                PA_UNROLL
                for (int c = 0; c < C; c++) {
                    int32_t pair;
                    memcpy(&pair, a[c].bpairs + 2 * p, 4);
                    imin[c] = _mm256_add_epi32(imin[c], _mm256_madd_epi16(mn, _mm256_set1_epi32(pair)));
                }
            }
            const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(hdr + 16 * hh)));
            const __m256 dmw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(hdr + 32 + 16 * hh)));
            PA_UNROLL
            for (int c = 0; c < C; c++) {
                const __m256 dy = _mm256_set1_ps(a[c].d);
                acc[hh][c] = _mm256_fmadd_ps(_mm256_mul_ps(dw, dy), _mm256_cvtepi32_ps(isum[hh][c]), acc[hh][c]);
                acc[hh][c] = _mm256_fnmadd_ps(_mm256_mul_ps(dmw, dy), _mm256_cvtepi32_ps(imin[c]), acc[hh][c]);
            }
        }
    }
    pa_fast_store(t, acc, C, c0);
}

/* Fast-mode Q6_K (the PK_FAST_ROWS layout as two halves of 8 rows),
 * cpu_fast_mode_dot's operations. Per sub-block j and half hh the 4 quant
 * registers (0..63: 4 elements of the 8 rows, as pa_kq_quants joins them)
 * take one vpmaddubsw each against the column's 4 activation bytes; their
 * words add up, from the record's corr_words, to the sums of 8 products
 * (q - 32) x a less 1 (in [-32513, 32767]: exact in words, which may wrap
 * on the way), and one vpmaddwd with the rows' scale in both words of
 * their dword adds the sub-block's s x (sum - 2) to the integer sum; 2 x
 * the rows' scale sums come back at the end. */
PA_FN void pa_fast_q6_K_run(const struct pk_tile *t, const int C, const int c0) {
    const bool stream = t->ncols == 1;
    const size_t ahead = pk_vec_ahead(t); /* used when streaming */
    const __m256i m4 = _mm256_set1_epi8(0x0F), m30 = _mm256_set1_epi8(0x30);
    __m256 acc[2][PA_FAST_COLS_Q4]; /* pa_fast_store's shape */
    PA_UNROLL
    for (int c = 0; c < C; c++) acc[0][c] = acc[1][c] = _mm256_setzero_ps();
    for (int64_t i = 0; i < t->nb; i++) {
        const struct pk_act_q8k6f *a = (const struct pk_act_q8k6f *)t->act + i * PK_COLS_FAST_K + c0;
        const uint8_t *hdr;
        const uint8_t *q = pk_group_block_large(t, i, 288, 3072, stream, ahead, &hdr);
        __m256i isum[2][PA_FAST_COLS_K];
        PA_UNROLL
        for (int c = 0; c < C; c++) isum[0][c] = isum[1][c] = _mm256_setzero_si256();
        for (int j = 0; j < 16; j++) {
            const uint8_t *z = q + 192 * j;
            if (stream) pk_prefetch(z, 192, ahead, true);
            PA_UNROLL
            for (int hh = 0; hh < 2; hh++) {
                const __m256i z0 = pa_load(z + 32 * hh), z1 = pa_load(z + 64 + 32 * hh), hb = pa_load(z + 128 + 32 * hh);
                const __m256i u[4] = {
                    _mm256_or_si256(_mm256_and_si256(z0, m4), _mm256_and_si256(_mm256_slli_epi16(hb, 4), m30)),
                    _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(z0, 4), m4),
                                    _mm256_and_si256(_mm256_slli_epi16(hb, 2), m30)),
                    _mm256_or_si256(_mm256_and_si256(z1, m4), _mm256_and_si256(hb, m30)),
                    _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(z1, 4), m4),
                                    _mm256_and_si256(_mm256_srli_epi16(hb, 2), m30)),
                };
                const __m256i sw = pa_scale_word_pairs(hdr + 32 + 16 * j + 8 * hh);
                PA_UNROLL
                for (int c = 0; c < C; c++) {
                    int32_t corr;
                    memcpy(&corr, a[c].corr_words[j], 4);
                    __m256i w = _mm256_set1_epi32(corr);
                    PA_UNROLL
                    for (int m = 0; m < 4; m++) {
                        int32_t y4;
                        memcpy(&y4, a[c].qs + 16 * j + 4 * m, 4);
                        w = _mm256_add_epi16(w, _mm256_maddubs_epi16(u[m], _mm256_set1_epi32(y4)));
                    }
                    isum[hh][c] = _mm256_add_epi32(isum[hh][c], _mm256_madd_epi16(w, sw));
                    PK_KEEP_IN_REGISTER(isum[hh][c]);
                }
            }
        }
        PA_UNROLL
        for (int hh = 0; hh < 2; hh++) {
            /* the scales' sums, twice: each scale word pair (s, s) times (1, 1) */
            __m256i ssum = _mm256_setzero_si256();
            for (int j = 0; j < 16; j++) ssum = _mm256_add_epi16(ssum, pa_scale_word_pairs(hdr + 32 + 16 * j + 8 * hh));
            const __m256i back = _mm256_madd_epi16(ssum, _mm256_set1_epi16(1));
            const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(hdr + 16 * hh)));
            PA_UNROLL
            for (int c = 0; c < C; c++) {
                const __m256 d = _mm256_mul_ps(dw, _mm256_set1_ps(a[c].d));
                acc[hh][c] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(_mm256_add_epi32(isum[hh][c], back)), acc[hh][c]);
            }
        }
    }
    pa_fast_store(t, acc, C, c0);
}

PA_FN void pa_fast_k_run(const struct pk_tile *t, const bool q6, const int C, const int c0) {
    if (q6) pa_fast_q6_K_run(t, C, c0);
    else pa_fast_q4_K_run(t, C, c0);
}

/* The tile's columns PA_FAST_COLS_K at a time. */
PA_FN void pa_fast_k_tile(const struct pk_tile *t, const bool q6) {
    for (int c0 = 0; c0 < t->ncols; c0 += PA_FAST_COLS_K) {
        if (t->ncols - c0 >= 2) pa_fast_k_run(t, q6, 2, c0);
        else pa_fast_k_run(t, q6, 1, c0);
    }
}
_Static_assert(PA_FAST_COLS_K == 2 && PA_FAST_COLS_K <= PA_FAST_COLS_Q4, "pa_fast_k_tile's cases");

PA_KERNEL void pa_q4_K_fast_tile(const struct pk_tile *t) { pa_fast_k_tile(t, false); }
PA_KERNEL void pa_q6_K_fast_tile(const struct pk_tile *t) { pa_fast_k_tile(t, true); }

static const struct pk_kernels pa_kernels = {
    .isa = PK_ISA_AVX2,
    .fast = false,
    .f16 = pk_f16_item_avx2,
    .q4_0 = pa_q4_0_tile,
    .q8_0 = pa_q8_0_tile,
    .q5_0 = pa_q5_0_tile,
    .q4_1 = pa_q4_1_tile,
    .q5_1 = pa_q5_1_tile,
    .q2_K = pa_q2_K_tile,
    .q3_K = pa_q3_K_tile,
    .q4_K = pa_q4_K_tile,
    .q5_K = pa_q5_K_tile,
    .q6_K = pa_q6_K_tile,
};

/* The fast mode: Q4_0, Q8_0, Q4_K and Q6_K on their fast kernels, the other k-quants on the exact ones. */
const struct pk_kernels *pk_kernels_avx2(bool fast) {
    const struct cpu_features *f = cpu_features_get();
    if (!f->avx2 || !f->fma || !f->f16c) return NULL;
    static struct pk_kernels kernels; /* called once (pk_kernels in cpu_packed.c) */
    kernels = pa_kernels;
    if (fast) {
        kernels.fast = true;
        kernels.q4_0 = pa_q4_0_fast_tile;
        kernels.q8_0 = pa_q8_0_fast_tile;
        kernels.q4_K = pa_q4_K_fast_tile;
        kernels.q6_K = pa_q6_K_fast_tile;
    }
    return &kernels;
}

#else

const struct pk_kernels *pk_kernels_avx2(bool fast) {
    (void)fast;
    return NULL;
}

#endif

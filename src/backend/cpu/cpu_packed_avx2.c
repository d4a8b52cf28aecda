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
 * block, with the rows' scales times the column's, and at the end lane k
 * onto k + 4 and hsum_float_8 per row: the reference's float operations,
 * so the results are its bits.
 */
#include "backend/cpu/cpu_packed_impl.h"

#if defined(__x86_64__)
#include <immintrin.h>
#include <string.h>

#include "core/cpu_features.h"
#include "quant/quant_blocks.h"

#define PA_TARGET "avx2,fma,f16c"
#define PA_FN static inline __attribute__((target(PA_TARGET), always_inline))
#define PA_KERNEL static __attribute__((target(PA_TARGET)))
/* Loops over a tile's rows and columns are unrolled even at -O2 (the Ruby
 * gem's build): their accumulators must live in registers. */
#define PA_UNROLL _Pragma("GCC unroll 16")

/* Columns a k-quant kernel pass takes (pa_kq_tile). */
#define PA_KQ_COLS 2

PA_FN __m256i pa_load(const void *p) { return _mm256_loadu_si256((const __m256i *)p); }

/* Dword lanes of 4 byte products: u unsigned, s signed, |u s| 2 < 32768. */
PA_FN __m256i pa_dot4(__m256i u, __m256i s) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
}

/* The scales of row pair p of a group (4 halves at hdr): row 2 p in the
 * low 4 lanes, 2 p + 1 in the high. */
PA_FN __m256 pa_pair_scales(__m128 d4, int p) {
    const __m256i idx = p == 0 ? _mm256_set_epi32(1, 1, 1, 1, 0, 0, 0, 0) : _mm256_set_epi32(3, 3, 3, 3, 2, 2, 2, 2);
    return _mm256_permutevar8x32_ps(_mm256_castps128_ps256(d4), idx);
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

enum pa_legacy { PA_Q4_0, PA_Q8_0 };

/* Row pair p's registers of a block: for Q4_0 the nibbles, unsigned (the
 * activations' corrections take the 8 back out); for Q8_0 |q| in *lo, *hi
 * and q itself in *slo, *shi (whose signs the activations take). */
PA_FN void pa_legacy_weights(enum pa_legacy kind, const uint8_t *q, int p, __m256i *lo, __m256i *hi, __m256i *slo,
                             __m256i *shi) {
    if (kind == PA_Q8_0) {
        *slo = _mm256_loadu_si256((const __m256i *)(q + 32 * p));
        *shi = _mm256_loadu_si256((const __m256i *)(q + 64 + 32 * p));
        *lo = _mm256_sign_epi8(*slo, *slo);
        *hi = _mm256_sign_epi8(*shi, *shi);
        return;
    }
    const __m256i z = _mm256_loadu_si256((const __m256i *)(q + 32 * p)), m4 = _mm256_set1_epi8(0x0F);
    *lo = _mm256_and_si256(z, m4);
    *hi = _mm256_and_si256(_mm256_srli_epi16(z, 4), m4);
    *slo = *shi = _mm256_setzero_si256();
}

/* The integer lanes of one register (w: pa_legacy_weights' unsigned, sw:
 * the signed ones) against half h of a column's record. */
PA_FN __m256i pa_legacy_lanes(enum pa_legacy kind, __m256i w, __m256i sw, const struct pk_act_q8x *a, int h) {
    if (kind == PA_Q8_0) return pa_dot4(w, _mm256_sign_epi8(pa_load(a->qs[h]), sw));
    return _mm256_add_epi32(pa_dot4(w, pa_load(a->qs[h])), pa_load(a->corr[h]));
}

/* G groups' row pairs [P0, P0 + NP) x C columns from column c0 of the tile
 * (G = 2 only with one column). Each output follows the reference's float
 * operations: per block its lanes, converted, times d_w d_a rounded, fused
 * into its 8 accumulators; then hsum_float_8. */
PA_FN void pa_legacy_run(const struct pk_tile *t, const enum pa_legacy kind, const int G, const int P0, const int NP,
                         const int C, const int c0) {
    const size_t qbytes = kind == PA_Q8_0 ? 128 : 64, hbytes = 8;
    const bool stream = t->ncols == 1;
    const size_t hdr_ahead = pk_hdr_ahead(t, G); /* used when streaming */
    __m256 acc_lo[2][2][4], acc_hi[2][2][4];     /* [group][pair][column] */
    PA_UNROLL
    for (int g = 0; g < G; g++) {
        PA_UNROLL
        for (int p = 0; p < NP; p++) {
            PA_UNROLL
            for (int c = 0; c < C; c++) acc_lo[g][p][c] = acc_hi[g][p][c] = _mm256_setzero_ps();
        }
    }
    for (int64_t i = 0; i < t->nb; i++) {
        const struct pk_act_q8x *a = (const struct pk_act_q8x *)t->act + i * PK_COLS_Q8 + c0;
        PA_UNROLL
        for (int g = 0; g < G; g++) {
            const uint8_t *hdr;
            const uint8_t *q = pk_group_block(t, g, i, hbytes, qbytes, stream, hdr_ahead, &hdr);
            const __m128 d4 = _mm_cvtph_ps(_mm_loadl_epi64((const __m128i *)hdr));
            PA_UNROLL
            for (int p = 0; p < NP; p++) {
                __m256i lo, hi, slo, shi;
                pa_legacy_weights(kind, q, P0 + p, &lo, &hi, &slo, &shi);
                const __m256 dw = pa_pair_scales(d4, P0 + p);
                PA_UNROLL
                for (int c = 0; c < C; c++) {
                    const __m256 d = _mm256_mul_ps(dw, _mm256_loadu_ps(a[c].d));
                    const __m256i ilo = pa_legacy_lanes(kind, lo, slo, &a[c], 0);
                    const __m256i ihi = pa_legacy_lanes(kind, hi, shi, &a[c], 1);
                    acc_lo[g][p][c] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(ilo), acc_lo[g][p][c]);
                    acc_hi[g][p][c] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(ihi), acc_hi[g][p][c]);
                }
            }
        }
    }
    PA_UNROLL
    for (int g = 0; g < G; g++) {
        PA_UNROLL
        for (int p = 0; p < NP; p++) {
            PA_UNROLL
            for (int c = 0; c < C; c++) {
                float *dst = t->dst + (size_t)(c0 + c) * t->dst_stride + PK_ROWS * g;
                pa_store_pair(pa_pair_hsum(acc_lo[g][p][c], acc_hi[g][p][c]), dst, P0 + p, t->nrows - PK_ROWS * g);
            }
        }
    }
}

/* Matrix-vector: G groups against one column, the column's registers
 * loaded once per block for all their row pairs; the same operations as
 * pa_legacy_run. */
PA_FN void pa_legacy_vec(const struct pk_tile *t, const enum pa_legacy kind, const int G) {
    const size_t qbytes = kind == PA_Q8_0 ? 128 : 64, hbytes = 8;
    const size_t hdr_ahead = pk_hdr_ahead(t, G);
    __m256 acc_lo[2][2], acc_hi[2][2];
    PA_UNROLL
    for (int g = 0; g < G; g++) acc_lo[g][0] = acc_lo[g][1] = acc_hi[g][0] = acc_hi[g][1] = _mm256_setzero_ps();
    for (int64_t i = 0; i < t->nb; i++) {
        const struct pk_act_q8x *a = (const struct pk_act_q8x *)t->act + i * PK_COLS_Q8;
        const __m256i ylo = pa_load(a->qs[0]), yhi = pa_load(a->qs[1]);
        const __m256i clo = pa_load(a->corr[0]), chi = pa_load(a->corr[1]);
        const __m256 dy = _mm256_loadu_ps(a->d);
        PA_UNROLL
        for (int g = 0; g < G; g++) {
            const uint8_t *hdr;
            const uint8_t *q = pk_group_block(t, g, i, hbytes, qbytes, true, hdr_ahead, &hdr);
            const __m128 d4 = _mm_cvtph_ps(_mm_loadl_epi64((const __m128i *)hdr));
            PA_UNROLL
            for (int p = 0; p < 2; p++) {
                __m256i lo, hi, slo, shi;
                pa_legacy_weights(kind, q, p, &lo, &hi, &slo, &shi);
                __m256i ilo, ihi;
                if (kind == PA_Q8_0) {
                    ilo = pa_dot4(lo, _mm256_sign_epi8(ylo, slo));
                    ihi = pa_dot4(hi, _mm256_sign_epi8(yhi, shi));
                } else {
                    ilo = _mm256_add_epi32(pa_dot4(lo, ylo), clo);
                    ihi = _mm256_add_epi32(pa_dot4(hi, yhi), chi);
                }
                const __m256 d = _mm256_mul_ps(pa_pair_scales(d4, p), dy);
                acc_lo[g][p] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(ilo), acc_lo[g][p]);
                acc_hi[g][p] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(ihi), acc_hi[g][p]);
            }
        }
    }
    PA_UNROLL
    for (int g = 0; g < G; g++) {
        PA_UNROLL
        for (int p = 0; p < 2; p++) {
            pa_store_pair(pa_pair_hsum(acc_lo[g][p], acc_hi[g][p]), t->dst + PK_ROWS * g, p, t->nrows - PK_ROWS * g);
        }
    }
}

/* One column: the call's groups at once; more: both row pairs against 2
 * columns at a time (each record then serves 4 rows; more columns or one
 * row pair at a time measured slower: bench_matmul -t 2 --prompt-only,
 * 2048 x 5632 x 512, Zen 3: 98 GOP/s with 4 columns of a pair, 120 with
 * 2 of both). */
PA_FN void pa_legacy_tile(const struct pk_tile *t, const enum pa_legacy kind) {
    if (t->ncols == 1) {
        if (t->ngroups == 2) pa_legacy_vec(t, kind, 2);
        else pa_legacy_vec(t, kind, 1);
        return;
    }
    for (int c0 = 0; c0 < t->ncols; c0 += 2) {
        if (t->ncols - c0 >= 2) pa_legacy_run(t, kind, 1, 0, 2, 2, c0);
        else pa_legacy_run(t, kind, 1, 0, 2, 1, c0);
    }
}

PA_KERNEL void pa_q4_0_tile(const struct pk_tile *t) { pa_legacy_tile(t, PA_Q4_0); }
PA_KERNEL void pa_q8_0_tile(const struct pk_tile *t) { pa_legacy_tile(t, PA_Q8_0); }

/* ---- k-quants (exact): Q4_K, Q6_K ----------------------------------------------------------
 * b1892's AVX2 dot products keep one set of 8 lanes per output for a whole
 * super-block: each 32 elements' byte pair sums (vpmaddubsw) are multiplied
 * by their sub-block's scale into the lanes (vpmaddwd) and added, and only
 * then converted and fused with d_w d_a. Row pair p of a group: the low
 * 128 bits of a register row 2 p, the high ones row 2 p + 1; the register of
 * half h of a chunk's 32 elements holds lanes 4 h ..4 h + 3. */

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

/* Q6_K: row pair p's quants (0..63, unsigned) of chunks 4 n + k, k =
 * 0..3, elements 16 h ..16 h + 15, from the layout's piece 2 n + h: the
 * nibbles and the high bits joined. */
PA_FN void pa_q6_K_quants(const uint8_t *piece, int p, __m256i u[4]) {
    const __m256i m4 = _mm256_set1_epi8(0x0F), m30 = _mm256_set1_epi8(0x30);
    const __m256i n02 = pa_load(piece + 32 * p), n13 = pa_load(piece + 64 + 32 * p), qh = pa_load(piece + 128 + 32 * p);
    u[0] = _mm256_or_si256(_mm256_and_si256(n02, m4), _mm256_and_si256(_mm256_slli_epi16(qh, 4), m30));
    u[1] = _mm256_or_si256(_mm256_and_si256(n13, m4), _mm256_and_si256(_mm256_slli_epi16(qh, 2), m30));
    u[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(n02, 4), m4), _mm256_and_si256(qh, m30));
    u[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(n13, 4), m4),
                           _mm256_and_si256(_mm256_srli_epi16(qh, 2), m30));
}

/* Q4_K's mins of row pair p of group g against tile column c: per row
 * 4 lanes (lane k: mins 2 k, 2 k + 1 times the column's pair sums) fused
 * with -(d_a dmin) per super-block, then (m0 + m2) + (m1 + m3), which b1892
 * adds to the lanes' sum last (in dwords 0 and 4). */
PA_FN __m256 pa_q4_K_mins(const struct pk_tile *t, int g, int p, int c) {
    __m256 acc_m = _mm256_setzero_ps();
    for (int64_t i = 0; i < t->nb; i++) {
        const struct pk_act_q8kx *a = (const struct pk_act_q8kx *)t->act + i * PK_COLS_K + c;
        const uint8_t *hdr = t->hdr + (size_t)g * t->group_bytes + 80 * (size_t)i;
        const __m256i mn = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)(hdr + 48 + 16 * p)));
        const __m128 dmin = _mm_cvtph_ps(_mm_loadl_epi64((const __m128i *)(hdr + 8)));
        const __m256 dm = _mm256_mul_ps(pa_pair_scales(dmin, p), _mm256_loadu_ps(a->d));
        acc_m = _mm256_fnmadd_ps(dm, _mm256_cvtepi32_ps(_mm256_madd_epi16(mn, pa_load(a->bpairs))), acc_m);
    }
    const __m256 s = _mm256_add_ps(acc_m, _mm256_permute_ps(acc_m, _MM_SHUFFLE(1, 0, 3, 2)));
    return _mm256_add_ps(s, _mm256_permute_ps(s, _MM_SHUFFLE(2, 3, 0, 1)));
}

/* Row pairs [P0, P0 + NP) of group g x C columns from c0 (q6: Q6_K, else
 * Q4_K). Per super-block each output's integer lanes l[h] (lanes 4 h ..),
 * then as b1892: fmaf(d_w d_a, lanes, acc) into acc_lo / acc_hi. Q4_K's
 * mins go through their own accumulator acc_m (lane k of a row: mins 2 k,
 * 2 k + 1 times the column's pair sums, fused with -d_a dmin); they read
 * only the header, so they run as a pass of their own after the lanes'
 * (pa_q4_K_mins: fewer registers live in the main loop). */
PA_FN void pa_kq_run(const struct pk_tile *t, const bool q6, const int g, const int P0, const int NP, const int C,
                     const int c0) {
    const size_t qbytes = q6 ? 768 : 512, hbytes = q6 ? 72 : 80;
    const bool stream = t->ncols == 1;
    const size_t hdr_ahead = pk_hdr_ahead(t, t->ngroups); /* used when streaming */
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    __m256 acc_lo[2][PA_KQ_COLS], acc_hi[2][PA_KQ_COLS];
    PA_UNROLL
    for (int p = 0; p < NP; p++) {
        PA_UNROLL
        for (int c = 0; c < C; c++) acc_lo[p][c] = acc_hi[p][c] = _mm256_setzero_ps();
    }
    for (int64_t i = 0; i < t->nb; i++) {
        const struct pk_act_q8kx *a = (const struct pk_act_q8kx *)t->act + i * PK_COLS_K + c0;
        const uint8_t *hdr;
        const uint8_t *q = pk_group_block(t, g, i, hbytes, qbytes, stream, hdr_ahead, &hdr);
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
                PA_UNROLL
                for (int p = 0; p < NP; p++) {
                    const int P = P0 + p;
                    /* chunks ch[k] of this half (Q4_K: pieces 2 j + h for j = 2 n, 2 n + 1, low and high
                     * nibbles: chunks 4 n ..4 n + 3 in order; Q6_K: chunks 4 n + k of piece 2 n + h) */
                    __m256i u[4];
                    if (q6) {
                        pa_q6_K_quants(q + 192 * (2 * n + h), P, u);
                    } else {
                        PA_UNROLL
                        for (int jj = 0; jj < 2; jj++) {
                            const __m256i z = pa_load(q + 64 * (2 * (2 * n + jj) + h) + 32 * P);
                            u[2 * jj] = _mm256_and_si256(z, m4);
                            u[2 * jj + 1] = _mm256_and_si256(_mm256_srli_epi16(z, 4), m4);
                        }
                    }
                    PA_UNROLL
                    for (int k = 0; k < 4; k++) {
                        const int ch = 4 * n + k;
                        /* Q6_K: a scale per 16 elements (group 2 ch + h); Q4_K: per 32 (chunk ch) */
                        const __m256i sw = q6 ? pa_pair_scale_words(hdr + 8 + 4 * (2 * ch + h), P, true)
                                              : pa_pair_scale_words(hdr + 16 + 4 * ch, P, false);
                        PA_UNROLL
                        for (int c = 0; c < C; c++) {
                            __m256i pairs = _mm256_maddubs_epi16(u[k], pa_load(a[c].qs[ch][h]));
                            if (q6) pairs = _mm256_sub_epi16(pairs, pa_load(a[c].m32[ch][h]));
                            l[p][c][h] = _mm256_add_epi32(l[p][c][h], _mm256_madd_epi16(pairs, sw));
                        }
                    }
                }
            }
        }
        const __m128 d4 = _mm_cvtph_ps(_mm_loadl_epi64((const __m128i *)hdr));
        PA_UNROLL
        for (int p = 0; p < NP; p++) {
            const __m256 dw = pa_pair_scales(d4, P0 + p);
            PA_UNROLL
            for (int c = 0; c < C; c++) {
                const __m256 d = _mm256_mul_ps(dw, _mm256_loadu_ps(a[c].d));
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
            if (!q6) u = _mm256_add_ps(u, pa_q4_K_mins(t, g, P, c0 + c));
            pa_store_pair(u, t->dst + (size_t)(c0 + c) * t->dst_stride + PK_ROWS * g, P, t->nrows - PK_ROWS * g);
        }
    }
}

/* One column: each group's both row pairs at once; more: a row pair
 * against PA_KQ_COLS columns at a time (bench_matmul -t 2 --prompt-only,
 * 2048 x 5632 x 512, Zen 3: Q4_K 156-183 GOP/s; both pairs x 1 column
 * 147-158, a pair x 3 columns 156-171). */
PA_FN void pa_kq_tile(const struct pk_tile *t, const bool q6) {
    if (t->ncols == 1) {
        for (int g = 0; g < t->ngroups; g++) pa_kq_run(t, q6, g, 0, 2, 1, 0);
        return;
    }
    for (int c0 = 0; c0 < t->ncols; c0 += PA_KQ_COLS) {
        for (int p = 0; p < 2 && 2 * p < t->nrows; p++) {
            if (t->ncols - c0 >= 2) pa_kq_run(t, q6, 0, p, 1, 2, c0);
            else pa_kq_run(t, q6, 0, p, 1, 1, c0);
        }
    }
}

PA_KERNEL void pa_q4_K_tile(const struct pk_tile *t) { pa_kq_tile(t, false); }
PA_KERNEL void pa_q6_K_tile(const struct pk_tile *t) { pa_kq_tile(t, true); }

static const struct pk_kernels pa_kernels = {
    .isa = PK_ISA_AVX2,
    .fast = false,
    .q4_0 = pa_q4_0_tile,
    .q8_0 = pa_q8_0_tile,
    .q4_K = pa_q4_K_tile,
    .q6_K = pa_q6_K_tile,
};

const struct pk_kernels *pk_kernels_avx2(void) {
    const struct cpu_features *f = cpu_features_get();
    return f->avx2 && f->fma && f->f16c ? &pa_kernels : NULL;
}

#else

const struct pk_kernels *pk_kernels_avx2(void) { return NULL; }

#endif

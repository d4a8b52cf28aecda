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

#include "core/cpu_features.h"
#include "quant/quant_blocks.h"

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

static const struct pk_kernels pa_kernels = {
    .isa = PK_ISA_AVX2, .fast = false, .q4_0 = pa_q4_0_tile, .q8_0 = pa_q8_0_tile,
};

const struct pk_kernels *pk_kernels_avx2(void) {
    const struct cpu_features *f = cpu_features_get();
    return f->avx2 && f->fma && f->f16c ? &pa_kernels : NULL;
}

#else

const struct pk_kernels *pk_kernels_avx2(void) { return NULL; }

#endif

/*
 * AVX2 (+ FMA, F16C) F16 work items of the packed matrix products
 * (pk_f16_item_avx2; items in cpu_packed_impl.h): dst[c][r] = quant_f16_dot
 * of row r and column c, bit for bit. Each output has b1892's 4 x 8 float
 * accumulators acc[j] (elements 32 s + 8 j + l), chains of fmaf in element
 * order, then quant_float.c's dot_reduce.
 *
 * The 32 chains of an output are independent, which is what the tiles use.
 * With 16 ymm registers a tile that keeps all 4 accumulators of each output
 * holds 3 outputs and needs 4 loads for 3 FMAs (Zen 3: at most 2 loads a
 * cycle, so 75% of the 2 FMA pipes at best). Instead a pass computes one
 * accumulator j of a 2-row x 6-column tile: 12 registers, each step 2 row
 * loads and 6 column loads for 12 FMAs, so the FMA pipes bound it (in L1:
 * 92 of the 105 GFLOP/s a thread peaks at). The accumulators wait in
 * scratch between passes and k blocks.
 *
 *   matrix-vector products (fewer than PK_F16_MIN_COLS columns): the halves
 *     read in place in one pass and prefetched, 2 rows x 1 column or 1 row x
 *     2 or 3 columns with all 4 accumulators in registers; memory-bound.
 *   long k (prompts): the rows converted to floats once, in the order the
 *     passes read them (pa_f16_convert_rows): a pass reads a row pair as one
 *     run and a k block's passes over all row pairs as one stream, which the
 *     hardware prefetchers follow (on Zen 3 an item's rows, up to 1 MiB,
 *     come from L3; with a run per row and accumulator instead a thread ran
 *     at 53 GFLOP/s, as one stream at 70). Per column tile, k blocks of
 *     PK_F16_KB (the 6 columns' block stays in L1) over all row pairs, then
 *     the tile's outputs reduced 8 rows at a time.
 *   short k (<= PA_F16_SHORT_K: attention's scores, k = head size) as
 *     cpu_packed_x86.c's short path, since per output the reduction would
 *     cost as much as the products: the rows transposed once into 8-row
 *     groups, a register one chain of 8 rows (a lane each), tiles of 16 rows
 *     x 2 columns with the columns' elements broadcast.
 *
 * Zen 3, 2 threads, the reference path -> this: bench_matmul (k 2048, 5632
 * rows) generation 22 -> 27-31 GB/s (a plain load loop over the same 16-row
 * units: 27-31), 512-column prompts 68 -> 131-147 GOP/s (fp32 FMA peak
 * ~200); TinyLlama F16 pp512 29 -> 68 t/s, tg128 10 -> 14.3-14.7 t/s;
 * TinyLlama Q4_0 pp512 (attention) 54-56 -> 61-62 t/s.
 */
#include "backend/cpu/cpu_packed_impl.h"

#if defined(__x86_64__)
#include <immintrin.h>

#include <string.h>

#define PA_F16_TARGET "avx2,fma,f16c"
#define PA_F16_FN static inline __attribute__((target(PA_F16_TARGET), always_inline))
/* Loops over a tile's rows, columns and accumulators are unrolled even at
 * -O2 (the Ruby gem's build): their accumulators must live in registers. */
#define PA_F16_UNROLL _Pragma("GCC unroll 16")

/* Long-k tiles: PA_F16_TR rows x PK_F16_TILE_COLS columns (the accumulators
 * of a tile column in scratch: pk_f16_scratch_floats). */
#define PA_F16_TR 2
#define PA_F16_TC PK_F16_TILE_COLS
#define PA_F16_SHORT_K 256

PA_F16_FN __m256 pa_f16_load8(const uint16_t *h) { return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)h)); }

/* 8 floats for the FMAs of several rows or columns: loaded once into a
 * register (the compiler would fold the load into each FMA, a load each). */
PA_F16_FN __m256 pa_f16_load_shared(const float *p) {
    __m256 y = _mm256_loadu_ps(p);
    __asm__("" : "+x"(y));
    return y;
}

/* dst[0..n) = the first n lanes of v (n <= 8). */
PA_F16_FN void pa_f16_store_n(float *dst, __m256 v, int n) {
    if (n >= 8) {
        _mm256_storeu_ps(dst, v);
    } else {
        float out[8];
        _mm256_storeu_ps(out, v);
        memcpy(dst, out, (size_t)n * sizeof(float));
    }
}

/* dot_reduce of one output's accumulators a[0..3]: lane-wise (a0 + a2) +
 * (a1 + a3), lane l + 4 onto l, then (l0 + l1) + (l2 + l3). */
PA_F16_FN float pa_f16_reduce(const __m256 a[4]) {
    const __m256 s = _mm256_add_ps(_mm256_add_ps(a[0], a[2]), _mm256_add_ps(a[1], a[3]));
    const __m128 t = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
    const __m128 p = _mm_add_ps(t, _mm_movehdup_ps(t));
    return _mm_cvtss_f32(_mm_add_ss(p, _mm_movehl_ps(p, p)));
}

/* dot_reduce of 8 outputs at once, output i's accumulator j at acc[i] + 8 j:
 * the lane-wise sums s_i, then s_i's and s_{i+4}'s halves added in one
 * register (t_i low, t_{i+4} high), and two rounds of pair sums give
 * (t0 + t1) + (t2 + t3) of each, in output order. */
PA_F16_FN __m256 pa_f16_reduce8(const float *const acc[8]) {
    __m256 s[8], u[4];
    PA_F16_UNROLL
    for (int i = 0; i < 8; i++) {
        s[i] = _mm256_add_ps(_mm256_add_ps(_mm256_load_ps(acc[i]), _mm256_load_ps(acc[i] + 16)),
                             _mm256_add_ps(_mm256_load_ps(acc[i] + 8), _mm256_load_ps(acc[i] + 24)));
    }
    PA_F16_UNROLL
    for (int i = 0; i < 4; i++) {
        u[i] = _mm256_add_ps(_mm256_permute2f128_ps(s[i], s[i + 4], 0x20),
                             _mm256_permute2f128_ps(s[i], s[i + 4], 0x31));
    }
    return _mm256_hadd_ps(_mm256_hadd_ps(u[0], u[1]), _mm256_hadd_ps(u[2], u[3]));
}

/* How much of k the columns [act, act + C as) need: up to their last element
 * that is not +0, rounded up to 32 (at least 32). The products past it
 * change no accumulator (cpu_packed_x86.c's pk_f16_extent): attention's
 * values x probabilities stop at the last key a token sees. */
PA_F16_FN int64_t pa_f16_extent(const float *act, size_t as, int C, int64_t k) {
    int64_t extent = 32;
    for (int c = 0; c < C; c++) {
        /* 8 elements at a time from the end: the first group with a nonzero bit pattern */
        const float *col = act + c * as;
        int64_t e = k / 8;
        while (e > extent / 8) {
            const __m256i x = _mm256_loadu_si256((const __m256i *)(col + 8 * (e - 1)));
            if (!_mm256_testz_si256(x, x)) break;
            e--;
        }
        extent = 8 * e;
    }
    return (extent + 31) & ~(int64_t)31;
}

/* ---- matrix-vector products --------------------------------------------------------------- */

/* R rows (halves at w, ws apart) x C columns (act, as apart) over all of k,
 * every accumulator in a register (4 R C <= 12), the weights streamed. */
PA_F16_FN void pa_f16_vec_tile(const uint16_t *w, size_t ws, const float *act, size_t as, int64_t k, float *dst,
                               size_t ds, const int R, const int C) {
    const size_t far = pk_stream_ahead((size_t)R * ws * sizeof(uint16_t));
    __m256 acc[2][3][4];
    PA_F16_UNROLL
    for (int r = 0; r < R; r++) {
        PA_F16_UNROLL
        for (int c = 0; c < C; c++) {
            PA_F16_UNROLL
            for (int j = 0; j < 4; j++) acc[r][c][j] = _mm256_setzero_ps();
        }
    }
    for (int64_t s = 0; s < k; s += 32) {
        PA_F16_UNROLL
        for (int r = 0; r < R; r++) pk_prefetch((const uint8_t *)(w + r * ws + s), 64, far, true);
        PA_F16_UNROLL
        for (int j = 0; j < 4; j++) {
            __m256 x[2];
            PA_F16_UNROLL
            for (int r = 0; r < R; r++) x[r] = pa_f16_load8(w + r * ws + s + 8 * j);
            PA_F16_UNROLL
            for (int c = 0; c < C; c++) {
                const __m256 y = pa_f16_load_shared(act + c * as + s + 8 * j);
                PA_F16_UNROLL
                for (int r = 0; r < R; r++) acc[r][c][j] = _mm256_fmadd_ps(x[r], y, acc[r][c][j]);
            }
        }
    }
    PA_F16_UNROLL
    for (int r = 0; r < R; r++) {
        PA_F16_UNROLL
        for (int c = 0; c < C; c++) dst[c * ds + r] = pa_f16_reduce(acc[r][c]);
    }
}

/* One column: row pairs (8 chains in flight); two or three: single rows. */
PA_F16_FN void pa_f16_vec_item(const struct pk_f16_item *it) {
    const size_t ws = it->w_stride, as = it->act_stride, ds = it->dst_stride;
    for (int r = 0; r < it->nrows;) {
        const uint16_t *w = it->w + r * ws;
        float *dst = it->dst + r;
        if (it->ncols == 1 && it->nrows - r >= 2) {
            pa_f16_vec_tile(w, ws, it->act, as, it->k, dst, ds, 2, 1);
            r += 2;
            continue;
        }
        switch (it->ncols) {
            case 3: pa_f16_vec_tile(w, ws, it->act, as, it->k, dst, ds, 1, 3); break;
            case 2: pa_f16_vec_tile(w, ws, it->act, as, it->k, dst, ds, 1, 2); break;
            default: pa_f16_vec_tile(w, ws, it->act, as, it->k, dst, ds, 1, 1); break;
        }
        r++;
    }
}

/* ---- long k ------------------------------------------------------------------------------- */

/* The item's rows as floats up to kmax, in the order the passes read them:
 * per k block (from k0, nb = PK_F16_KB or what is left of k), per row pair,
 * per accumulator j, per step s of the block, the pair's first row's
 * elements k0 + 32 s + 8 j ..+7, then its second row's: element k0 + 32 s +
 * 8 j + l of row 2 t + h at wf[npad k0 + 2 t nb + j nb / 2 + 16 s + 8 h + l]
 * (npad: the rows rounded up to a pair). A pass reads one contiguous run,
 * and a k block's passes over all row pairs one stream. */
PA_F16_FN void pa_f16_convert_rows(const struct pk_f16_item *it, int64_t kmax, float *wf) {
    const int64_t k = it->k, npad = (it->nrows + 1) & ~1;
    for (int r = 0; r < it->nrows; r++) {
        const uint16_t *src = it->w + r * it->w_stride;
        for (int64_t k0 = 0; k0 < kmax; k0 += PK_F16_KB) {
            const int64_t nb = k - k0 < PK_F16_KB ? k - k0 : PK_F16_KB, n = kmax - k0 < nb ? kmax - k0 : nb;
            float *run = wf + npad * k0 + (r & ~1) * nb + 8 * (r & 1);
            for (int64_t s = 0; s < n / 32; s++) {
                PA_F16_UNROLL
                for (int j = 0; j < 4; j++) {
                    _mm256_store_ps(run + j * nb / 2 + 16 * s, pa_f16_load8(src + k0 + 32 * s + 8 * j));
                }
            }
        }
    }
}

/* One accumulator j of an R x C tile over `steps` steps of 32 elements: row
 * r's 8 elements of step s at run + 16 s + 8 r (pa_f16_convert_rows),
 * column c's at aj + c as + 32 s. The chains start at +0 (first) or from
 * acc, output (r, c)'s at acc + (r PA_F16_TC + c) 32, and go back there. */
PA_F16_FN void pa_f16_pass(const float *run, const float *aj, size_t as, int64_t steps, float *acc, bool first,
                           const int R, const int C) {
    __m256 a[PA_F16_TR][PA_F16_TC];
    PA_F16_UNROLL
    for (int r = 0; r < R; r++) {
        PA_F16_UNROLL
        for (int c = 0; c < C; c++) {
            a[r][c] = first ? _mm256_setzero_ps() : _mm256_load_ps(acc + (r * PA_F16_TC + c) * 32);
        }
    }
    for (int64_t s = 0; s < steps; s++) {
        __m256 x[PA_F16_TR];
        PA_F16_UNROLL
        for (int r = 0; r < R; r++) x[r] = _mm256_load_ps(run + 16 * s + 8 * r);
        PA_F16_UNROLL
        for (int c = 0; c < C; c++) {
            const __m256 y = pa_f16_load_shared(aj + c * as + 32 * s);
            PA_F16_UNROLL
            for (int r = 0; r < R; r++) a[r][c] = _mm256_fmadd_ps(x[r], y, a[r][c]);
        }
    }
    PA_F16_UNROLL
    for (int r = 0; r < R; r++) {
        PA_F16_UNROLL
        for (int c = 0; c < C; c++) _mm256_store_ps(acc + (r * PA_F16_TC + c) * 32, a[r][c]);
    }
}

/* The pass with R and C as constants. */
PA_F16_FN void pa_f16_pass_any(const float *run, const float *aj, size_t as, int64_t steps, float *acc, bool first,
                               int R, int C) {
#define PA_F16_PASS(r, c) pa_f16_pass(run, aj, as, steps, acc, first, r, c)
    if (R == 2) {
        switch (C) {
            case 6: PA_F16_PASS(2, 6); break;
            case 5: PA_F16_PASS(2, 5); break;
            case 4: PA_F16_PASS(2, 4); break;
            case 3: PA_F16_PASS(2, 3); break;
            case 2: PA_F16_PASS(2, 2); break;
            default: PA_F16_PASS(2, 1); break;
        }
    } else {
        switch (C) {
            case 6: PA_F16_PASS(1, 6); break;
            case 5: PA_F16_PASS(1, 5); break;
            case 4: PA_F16_PASS(1, 4); break;
            case 3: PA_F16_PASS(1, 3); break;
            case 2: PA_F16_PASS(1, 2); break;
            default: PA_F16_PASS(1, 1); break;
        }
    }
#undef PA_F16_PASS
}

PA_F16_FN void pa_f16_long_item(const struct pk_f16_item *it) {
    const int64_t k = it->k, npad = (it->nrows + 1) & ~1;
    const size_t as = it->act_stride;
    float *wf = it->scratch, *acc = it->scratch + (size_t)(npad * k);
    pa_f16_convert_rows(it, pa_f16_extent(it->act, as, it->ncols, k), wf);
    for (int c0 = 0; c0 < it->ncols; c0 += PA_F16_TC) {
        const int C = it->ncols - c0 < PA_F16_TC ? it->ncols - c0 : PA_F16_TC;
        const float *act = it->act + c0 * as;
        const int64_t kc = pa_f16_extent(act, as, C, k);
        for (int64_t k0 = 0; k0 < kc; k0 += PK_F16_KB) {
            const int64_t nb = k - k0 < PK_F16_KB ? k - k0 : PK_F16_KB;
            const int64_t steps = (kc - k0 < nb ? kc - k0 : nb) / 32;
            for (int r = 0; r < it->nrows; r += PA_F16_TR) {
                const int R = it->nrows - r < PA_F16_TR ? it->nrows - r : PA_F16_TR;
                PA_F16_UNROLL
                for (int j = 0; j < 4; j++) {
                    pa_f16_pass_any(wf + npad * k0 + r * nb + j * nb / 2, act + k0 + 8 * j, as, steps,
                                    acc + (r * PA_F16_TC) * 32 + 8 * j, k0 == 0, R, C);
                }
            }
        }
        /* the tile column's outputs, 8 rows at a time (past the last row the last again) */
        for (int c = 0; c < C; c++) {
            for (int r0 = 0; r0 < it->nrows; r0 += 8) {
                const float *out[8];
                for (int i = 0; i < 8; i++) {
                    const int r = r0 + i < it->nrows ? r0 + i : it->nrows - 1;
                    out[i] = acc + (r * PA_F16_TC + c) * 32;
                }
                pa_f16_store_n(it->dst + (size_t)(c0 + c) * it->dst_stride + r0, pa_f16_reduce8(out), it->nrows - r0);
            }
        }
    }
}

/* ---- short k (attention's scores) ----------------------------------------------------------
 * At k <= PA_F16_SHORT_K a register holds one of b1892's 32 accumulators for
 * 8 rows (lane = row): accumulator (i, l) of an output (elements 32 s + 8 i +
 * l) is a chain of k / 32 FMAs with the column's element broadcast, and
 * dot_reduce's additions are vertical ones, 31 for 8 outputs. */

/* r[j] = column j of the 8 x 8 matrix whose rows were r[0..8). */
PA_F16_FN void pa_f16_transpose8(__m256 r[8]) {
    __m256 t[8], u[8];
    PA_F16_UNROLL
    for (int i = 0; i < 4; i++) {
        t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    /* u[4 h + 2 m + n], 128-bit lane L: rows 4 h ..4 h + 3 of column 4 L + 2 m + n */
    PA_F16_UNROLL
    for (int h = 0; h < 2; h++) {
        PA_F16_UNROLL
        for (int m = 0; m < 2; m++) {
            u[4 * h + 2 * m] = _mm256_shuffle_ps(t[4 * h + m], t[4 * h + 2 + m], 0x44);
            u[4 * h + 2 * m + 1] = _mm256_shuffle_ps(t[4 * h + m], t[4 * h + 2 + m], 0xEE);
        }
    }
    PA_F16_UNROLL
    for (int j = 0; j < 4; j++) {
        r[j] = _mm256_permute2f128_ps(u[j], u[4 + j], 0x20);
        r[4 + j] = _mm256_permute2f128_ps(u[j], u[4 + j], 0x31);
    }
}

/* The item's rows as floats, transposed: element e of row 8 g + lane at
 * wt[(g k + e) 8 + lane]; rows past the item's are zeros. The next group's
 * rows are asked for ahead: they are keys in the KV cache, a head's slice of
 * each cache row, which the hardware prefetchers miss. */
PA_F16_FN void pa_f16_transpose_rows(const struct pk_f16_item *it, float *wt) {
    for (int g = 0; 8 * g < it->nrows; g++) {
        for (int r = 8 * g + 8; r < 8 * g + 16 && r < it->nrows; r++) {
            for (int64_t o = 0; o < it->k * (int64_t)sizeof(uint16_t); o += 64) {
                _mm_prefetch((const char *)(it->w + r * it->w_stride) + o, _MM_HINT_T0);
            }
        }
        for (int64_t e0 = 0; e0 < it->k; e0 += 8) {
            __m256 r[8];
            PA_F16_UNROLL
            for (int j = 0; j < 8; j++) {
                const int row = 8 * g + j;
                r[j] = row < it->nrows ? pa_f16_load8(it->w + row * it->w_stride + e0) : _mm256_setzero_ps();
            }
            pa_f16_transpose8(r);
            PA_F16_UNROLL
            for (int j = 0; j < 8; j++) _mm256_store_ps(wt + ((size_t)g * it->k + e0 + j) * 8, r[j]);
        }
    }
}

/* For G transposed groups (wt, k 8 floats apart) x C columns: lane l's
 * accumulators i0 and i1, added (dot_reduce's acc[0] + acc[2] and acc[1] +
 * acc[3]). Each row load feeds C columns, each broadcast G groups. */
PA_F16_FN void pa_f16_short_pair(const float *wt, int64_t k, const float *act, size_t as, int l, int i0, int i1,
                                 __m256 sum[2][2], const int G, const int C) {
    __m256 p[2][2][2];
    PA_F16_UNROLL
    for (int g = 0; g < G; g++) {
        PA_F16_UNROLL
        for (int c = 0; c < C; c++) p[g][c][0] = p[g][c][1] = _mm256_setzero_ps();
    }
    for (int64_t s = 0; s < k; s += 32) {
        PA_F16_UNROLL
        for (int m = 0; m < 2; m++) {
            const int64_t e = s + 8 * (m ? i1 : i0) + l;
            __m256 w[2];
            PA_F16_UNROLL
            for (int g = 0; g < G; g++) w[g] = pa_f16_load_shared(wt + ((size_t)g * k + e) * 8);
            PA_F16_UNROLL
            for (int c = 0; c < C; c++) {
                const __m256 y = _mm256_broadcast_ss(act + c * as + e);
                PA_F16_UNROLL
                for (int g = 0; g < G; g++) p[g][c][m] = _mm256_fmadd_ps(w[g], y, p[g][c][m]);
            }
        }
    }
    PA_F16_UNROLL
    for (int g = 0; g < G; g++) {
        PA_F16_UNROLL
        for (int c = 0; c < C; c++) sum[g][c] = _mm256_add_ps(p[g][c][0], p[g][c][1]);
    }
}

/* G groups x C columns: per lane l, x_l = (acc0 + acc2) + (acc1 + acc3)
 * (kept in memory: the registers hold the chains), then t_m = x_m + x_{m+4}
 * and (t0 + t1) + (t2 + t3); outputs to dst + c ds, the first `rows` of the
 * G 8 rows. */
PA_F16_FN void pa_f16_short_tile(const float *wt, int64_t k, const float *act, size_t as, float *dst, size_t ds,
                                 int rows, const int G, const int C) {
    __m256 x[2][2][8];
    for (int l = 0; l < 8; l++) {
        __m256 a02[2][2], a13[2][2];
        pa_f16_short_pair(wt, k, act, as, l, 0, 2, a02, G, C);
        pa_f16_short_pair(wt, k, act, as, l, 1, 3, a13, G, C);
        PA_F16_UNROLL
        for (int g = 0; g < G; g++) {
            PA_F16_UNROLL
            for (int c = 0; c < C; c++) x[g][c][l] = _mm256_add_ps(a02[g][c], a13[g][c]);
        }
    }
    PA_F16_UNROLL
    for (int g = 0; g < G; g++) {
        PA_F16_UNROLL
        for (int c = 0; c < C; c++) {
            const __m256 *xs = x[g][c];
            const __m256 t01 = _mm256_add_ps(_mm256_add_ps(xs[0], xs[4]), _mm256_add_ps(xs[1], xs[5]));
            const __m256 t23 = _mm256_add_ps(_mm256_add_ps(xs[2], xs[6]), _mm256_add_ps(xs[3], xs[7]));
            pa_f16_store_n(dst + c * ds + 8 * g, _mm256_add_ps(t01, t23), rows - 8 * g);
        }
    }
}

/* A short-k item: per pair of groups (their rows, 16 k floats, stay in L1)
 * the columns two at a time. */
PA_F16_FN void pa_f16_short_item(const struct pk_f16_item *it) {
    const size_t as = it->act_stride, ds = it->dst_stride;
    float *wt = it->scratch;
    pa_f16_transpose_rows(it, wt);
    for (int g = 0; 8 * g < it->nrows; g += 2) {
        const int rows = it->nrows - 8 * g < 16 ? it->nrows - 8 * g : 16;
        const float *wg = wt + (size_t)g * it->k * 8;
        for (int c = 0; c < it->ncols; c += 2) {
            const float *act = it->act + c * as;
            float *dst = it->dst + c * ds + 8 * g;
            const bool two_cols = it->ncols - c >= 2;
            if (rows > 8) {
                if (two_cols) pa_f16_short_tile(wg, it->k, act, as, dst, ds, rows, 2, 2);
                else pa_f16_short_tile(wg, it->k, act, as, dst, ds, rows, 2, 1);
            } else {
                if (two_cols) pa_f16_short_tile(wg, it->k, act, as, dst, ds, rows, 1, 2);
                else pa_f16_short_tile(wg, it->k, act, as, dst, ds, rows, 1, 1);
            }
        }
    }
}

__attribute__((target(PA_F16_TARGET))) void pk_f16_item_avx2(const struct pk_f16_item *it) {
    if (it->ncols < PK_F16_MIN_COLS) pa_f16_vec_item(it);
    else if (it->k <= PA_F16_SHORT_K) pa_f16_short_item(it);
    else pa_f16_long_item(it);
}

#endif

/*
 * Tiled F32 products with AVX-512F or AVX2+FMA: see cpu_gemm.h.
 *
 * A tile is TILE0 values of i0 (two vectors) by TILE1 values of i1, kept in
 * registers while j runs over the whole product: per j, two vector loads of
 * A's panel, TILE1 scalar broadcasts of B and 2 * TILE1 fused multiply-adds.
 * Edge tiles mask the i0 lanes past n0 and repeat a valid B row for the
 * missing i1 (computed, not stored), so every element follows the same
 * chain of operations as in a full tile.
 */
#include "backend/cpu/cpu_gemm.h"

#include <stdatomic.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "core/cpu_features.h"

enum cpu_gemm_isa { GEMM_NONE, GEMM_AVX2, GEMM_AVX512 };

static _Atomic bool g_prefer_avx2;

void cpu_gemm_f32_prefer_avx2(bool prefer) { g_prefer_avx2 = prefer; }

static enum cpu_gemm_isa cpu_gemm_isa(void) {
    const struct cpu_features *f = cpu_features_get();
    if (f->force_scalar) return GEMM_NONE;
    if (f->avx512f && !g_prefer_avx2) return GEMM_AVX512;
    if (f->avx2 && f->fma) return GEMM_AVX2;
    return GEMM_NONE;
}

bool cpu_gemm_f32_available(void) { return cpu_gemm_isa() != GEMM_NONE; }

static void cpu_gemm_tile_size(int *t0, int *t1) {
    if (cpu_gemm_isa() == GEMM_AVX512) {
        *t0 = 32;
        *t1 = 8;
    } else {
        *t0 = 16;
        *t1 = 6;
    }
}

int64_t cpu_gemm_f32_n_tiles(const struct cpu_gemm_f32 *g) {
    int t0, t1;
    cpu_gemm_tile_size(&t0, &t1);
    return ((g->n0 + t0 - 1) / t0) * ((g->n1 + t1 - 1) / t1);
}

#if defined(__x86_64__)

/* B row pointers of a tile: rows past n1 repeat row i1 (computed, never stored). */
#define GEMM_B_ROWS(T1)                                                                     \
    const char *b[T1];                                                                      \
    for (int r = 0; r < (T1); r++) b[r] = g->b + (size_t)(i1 + (r < n1 ? r : 0)) * g->b_s1

__attribute__((target("avx512f"))) static void cpu_gemm_tile_avx512(const struct cpu_gemm_f32 *g, int64_t i0,
                                                                     int64_t i1) {
    const int64_t n0 = g->n0 - i0 < 32 ? g->n0 - i0 : 32, n1 = g->n1 - i1 < 8 ? g->n1 - i1 : 8;
    const __mmask16 m0 = n0 >= 16 ? 0xFFFF : (__mmask16)((1u << n0) - 1);
    const __mmask16 m1 = n0 >= 32 ? 0xFFFF : n0 <= 16 ? 0 : (__mmask16)((1u << (n0 - 16)) - 1);
    GEMM_B_ROWS(8);
    const char *a = g->a + (size_t)i0 * sizeof(float);
    __m512 c00 = _mm512_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00, c30 = c00, c31 = c00;
    __m512 c40 = c00, c41 = c00, c50 = c00, c51 = c00, c60 = c00, c61 = c00, c70 = c00, c71 = c00;
    size_t ob = 0;
    for (int64_t j = 0; j < g->nj; j++, a += g->a_sj, ob += g->b_sj) {
        const __m512 x0 = _mm512_maskz_loadu_ps(m0, a), x1 = _mm512_maskz_loadu_ps(m1, a + 64);
#define GEMM_ROW512(r)                                                  \
    {                                                                   \
        const __m512 y = _mm512_set1_ps(*(const float *)(b[r] + ob));   \
        c##r##0 = _mm512_fmadd_ps(x0, y, c##r##0);                      \
        c##r##1 = _mm512_fmadd_ps(x1, y, c##r##1);                      \
    }
        GEMM_ROW512(0) GEMM_ROW512(1) GEMM_ROW512(2) GEMM_ROW512(3)
        GEMM_ROW512(4) GEMM_ROW512(5) GEMM_ROW512(6) GEMM_ROW512(7)
#undef GEMM_ROW512
    }
    const __m512 acc[8][2] = { { c00, c01 }, { c10, c11 }, { c20, c21 }, { c30, c31 },
                               { c40, c41 }, { c50, c51 }, { c60, c61 }, { c70, c71 } };
    for (int64_t r = 0; r < n1; r++) {
        char *c = g->c + (size_t)(i1 + r) * g->c_s1 + (size_t)i0 * sizeof(float);
        _mm512_mask_storeu_ps(c, m0, acc[r][0]);
        _mm512_mask_storeu_ps(c + 64, m1, acc[r][1]);
    }
}

__attribute__((target("avx2,fma"))) static void cpu_gemm_tile_avx2(const struct cpu_gemm_f32 *g, int64_t i0,
                                                                   int64_t i1) {
    const int64_t n0 = g->n0 - i0 < 16 ? g->n0 - i0 : 16, n1 = g->n1 - i1 < 6 ? g->n1 - i1 : 6;
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    const __m256i m0 = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)n0), lane);
    const __m256i m1 = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)n0 - 8), lane);
    GEMM_B_ROWS(6);
    const char *a = g->a + (size_t)i0 * sizeof(float);
    __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00;
    __m256 c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
    size_t ob = 0;
    for (int64_t j = 0; j < g->nj; j++, a += g->a_sj, ob += g->b_sj) {
        const __m256 x0 = _mm256_maskload_ps((const float *)a, m0);
        const __m256 x1 = _mm256_maskload_ps((const float *)(a + 32), m1);
#define GEMM_ROW256(r)                                                  \
    {                                                                   \
        const __m256 y = _mm256_broadcast_ss((const float *)(b[r] + ob)); \
        c##r##0 = _mm256_fmadd_ps(x0, y, c##r##0);                      \
        c##r##1 = _mm256_fmadd_ps(x1, y, c##r##1);                      \
    }
        GEMM_ROW256(0) GEMM_ROW256(1) GEMM_ROW256(2) GEMM_ROW256(3) GEMM_ROW256(4) GEMM_ROW256(5)
#undef GEMM_ROW256
    }
    const __m256 acc[6][2] = { { c00, c01 }, { c10, c11 }, { c20, c21 }, { c30, c31 }, { c40, c41 }, { c50, c51 } };
    for (int64_t r = 0; r < n1; r++) {
        char *c = g->c + (size_t)(i1 + r) * g->c_s1 + (size_t)i0 * sizeof(float);
        _mm256_maskstore_ps((float *)c, m0, acc[r][0]);
        _mm256_maskstore_ps((float *)(c + 32), m1, acc[r][1]);
    }
}

void cpu_gemm_f32_run(const struct cpu_gemm_f32 *g, int64_t tile0, int64_t tile1) {
    const enum cpu_gemm_isa isa = cpu_gemm_isa();
    int t0, t1;
    cpu_gemm_tile_size(&t0, &t1);
    const int64_t nb1 = (g->n1 + t1 - 1) / t1;
    for (int64_t t = tile0; t < tile1; t++) {
        const int64_t i0 = (t / nb1) * t0, i1 = (t % nb1) * t1;
        if (isa == GEMM_AVX512) {
            cpu_gemm_tile_avx512(g, i0, i1);
        } else {
            cpu_gemm_tile_avx2(g, i0, i1);
        }
    }
}

#else

/* No tiled kernels off x86-64 yet: cpu_gemm_f32_available() keeps callers on the reference. */
void cpu_gemm_f32_run(const struct cpu_gemm_f32 *g, int64_t tile0, int64_t tile1) {
    (void)g;
    (void)tile0;
    (void)tile1;
}

#endif

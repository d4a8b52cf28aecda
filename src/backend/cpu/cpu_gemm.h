/*
 * Register-tiled F32 matrix products for the CPU kernels (internal to cpu/):
 *
 *     C(i0, i1) = sum over j < nj of A(i0, j) * B(i1, j)
 *
 * with A contiguous along i0 (a column panel per j) and B read one scalar
 * at a time (any strides). out_prod is this product directly; mul_mat is
 * it with the weight transposed into a panel first (cpu_matmul.c).
 *
 * Each C element is one chain of fused multiply-adds over j = 0, 1, ...
 * starting from 0, whatever tile, ISA (AVX-512F, AVX2+FMA) or thread
 * computes it, so results do not depend on the thread count or the CPU
 * model; they differ from the scalar reference kernels (double sums,
 * separate multiply and add) by float rounding. Not used when
 * LLAMAC_SIMD=scalar or the CPU has neither ISA.
 */
#ifndef LLAMAC_BACKEND_CPU_CPU_GEMM_H
#define LLAMAC_BACKEND_CPU_CPU_GEMM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct cpu_gemm_f32 {
    int64_t n0, n1, nj;
    const char *a;  /* A(i0, j) at a + 4 i0 + j a_sj */
    size_t a_sj;
    const char *b;  /* B(i1, j) at b + i1 b_s1 + j b_sj */
    size_t b_s1, b_sj;
    char *c;        /* C(i0, i1) at c + 4 i0 + i1 c_s1 */
    size_t c_s1;
};

/* Whether this CPU runs the tiled products. */
bool cpu_gemm_f32_available(void);

/* Tests: use AVX2 even where AVX-512 exists (true), or the best ISA again (false). */
void cpu_gemm_f32_prefer_avx2(bool prefer);

/* The product is cut into tiles (blocks of i0 by blocks of i1, i1 fastest);
 * threads take ranges of tile indices. */
int64_t cpu_gemm_f32_n_tiles(const struct cpu_gemm_f32 *g);
void cpu_gemm_f32_run(const struct cpu_gemm_f32 *g, int64_t tile0, int64_t tile1);

#endif

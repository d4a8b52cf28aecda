/*
 * Fast matrix products of the CPU backend: weights repacked into interleaved
 * layouts, register-tiled micro-kernels (several weight rows x several
 * activation columns) for batches and matrix-vector kernels for one column.
 *
 * Results are bit-identical with the reference path (one vec_dot per output,
 * b1892's order, see cpu_matmul.c): every output keeps its own 8 lanes, the
 * integer lane sums are exact, and the float operations per output (one
 * fused multiply-add per lane and block, in block order, then b1892's
 * reduction) are the scalar ones. The tiles only compute many outputs at
 * once: a 512-bit register holds the lanes of several rows (a 256-bit one
 * those of a row pair).
 *
 * Packed weights (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K,
 * Q6_K; on x86-64 with AVX-512 VNNI, or with AVX2 + FMA + F16C: two tables
 * of kernels, cpu_packed_x86.c and cpu_packed_avx2.c): rows in groups of 4
 * (with AVX-512 16 for Q4_0, and in the fast mode, below), each block's
 * rows side by side so that one load feeds vpdpbusd (AVX2: vpmaddubsw)
 * without shuffles (see cpu_packed_impl.h). The packed copy lives in
 * anonymous memory (its own, or a model's arena), described by the
 * tensor's `extra`; the file's layout on disk is unchanged. F16 weights
 * (32 | k) keep the file's layout but are copied as they are into the same
 * kind of memory: huge pages, which stream faster than the mapped file's
 * 4 KiB pages. IQ2_XXS / IQ2_XS weights are not packed (and without AVX-512
 * keep the row kernels): products of more than one column decode 32 rows at
 * a time into scaled 16-bit values, and with AVX-512 VBMI and GFNI products
 * of one to 12 columns look up the grid for 64 groups at once, both with
 * b1892's integer lanes and float operations (cpu_packed_impl.h).
 * Under LLAMAC_SIMD=scalar nothing is packed and every product takes the
 * reference path.
 *
 * Fast mode (opt-in, LLAMAC_MATMUL=fast; see cpu_features.h): Q4_0, Q8_0,
 * Q4_K and Q6_K products (AVX-512 VNNI or AVX2: cpu_fast_mode_type) drop
 * b1892's 8 float lanes per output, whose float operations per block
 * cap prompts at a quarter of the int8-dot peak. Its
 * arithmetic, for output (row, column) with the column quantized to Q8_0 as
 * on the exact path (same blocks, same scales):
 *
 *     acc = 0
 *     for each block i in order:
 *         isum = sum over the block's 32 elements of q_w * q_a    (exact, int32)
 *         acc  = fmaf(d_w[i] * d_a[i], (float)isum, acc)          (d_w * d_a rounded to float)
 *     output = acc
 *
 * with q_w the weight's signed quants (Q4_0: nibble - 8) and d_w, d_a the
 * blocks' F16 scales as floats. isum is exactly representable in a float
 * (|isum| < 2^24), so the only roundings are one product and one fused
 * multiply-add per block: results differ from b1892's only in float rounding
 * (they are if anything more accurate). Q4_K, against Q8_K columns, per
 * super-block of 256 in order, with sc_j, m_j its 6-bit scales and mins and
 * bs_j the column's sum of sub-block j's quants:
 *
 *     isum = sum_j sc_j * (sum of sub-block j's 32 q_w * q_a)   (exact, int32)
 *     imin = sum_j m_j * bs_j                                     (exact, int32)
 *     acc  = fmaf(d_w * d_a, (float)isum, acc)
 *     acc  = fmaf(-(dmin_w * d_a), (float)imin, acc)
 *
 * ((float)isum may round: |isum| < 2^25.) Q6_K, against Q8_K columns, per
 * super-block of 256 in order, with s_j its 16 int8 scales and q its quants
 * (0..63):
 *
 *     isum = sum_j s_j * (sum of sub-block j's 16 (q - 32) * q_a)   (exact, int32)
 *     acc  = fmaf(d_w * d_a, (float)isum, acc)
 *
 * (|isum| <= 16 x 128 x 16 x 32 x 128 < 2^31.) cpu_fast_mode_dot is this definition
 * in scalar C; the fast kernels reproduce it bit for bit (on Intel's AMX
 * tiles too, which take these types' products of many columns unless
 * LLAMAC_AMX=0). The mode is fixed
 * at the first use of this module: the two modes pack differently, and a
 * model holds one packed copy. Other weight types are unaffected (the other
 * packed types keep their exact kernels).
 */
#ifndef LLAMAC_BACKEND_CPU_CPU_PACKED_H
#define LLAMAC_BACKEND_CPU_CPU_PACKED_H

#include <stdbool.h>
#include <stddef.h>

#include "tensor/tensor.h"

struct cpu_task;

/* Whether the fast mode is on: asked for (LLAMAC_MATMUL=fast) and this CPU
 * has its kernels. */
bool cpu_fast_matmul_active(void);
/* Whether products of `type` take the fast mode's arithmetic: the mode is
 * on and covers the type (Q4_0, Q8_0, Q4_K, Q6_K). */
bool cpu_fast_mode_type(enum ggml_type type);
/* Whether the fast mode runs its products of many columns on AMX tiles
 * (Intel, not LLAMAC_AMX=0, the kernel permitting). */
bool cpu_fast_matmul_amx(void);
/* The fast mode's output for one weight row (Q4_0, Q8_0, Q4_K or Q6_K; k
 * elements) and one activation column quantized to the type's vec_dot_type
 * (Q8_0 blocks; Q8_K for Q4_K and Q6_K). */
float cpu_fast_mode_dot(enum ggml_type type, int64_t k, const void *row, const void *col);

/* Whether weights of `type` are packed on this CPU. */
bool cpu_packed_type(enum ggml_type type);
/* Whether IQ2_XXS / IQ2_XS products of more than one column (which keep no
 * packed copy) have kernels on this CPU. */
bool cpu_packed_iq2_available(void);
/* Bytes of w's packed copy (0 when w is not packed: type, shape, or CPU). */
size_t cpu_repack_size(const struct tensor *w);
/* Packs w (a matrix weight whose data is set) into new memory and points
 * w->extra at it; true also when there is nothing to pack (see
 * cpu_repack_size). False with error_set() when memory runs out. Packing
 * again after w's data changed (LoRA) replaces the copy. */
bool cpu_repack_weight(struct tensor *w);
/* The same into caller memory: `mem` holds cpu_repack_size(w) bytes,
 * 64-byte aligned, and outlives the copy (packing again after a change of
 * w's data reuses it). For many weights in one cpu_packed_arena_new. */
bool cpu_repack_weight_at(struct tensor *w, void *mem);
/* Anonymous memory for packed weights, aligned to and advised for huge
 * pages (fewer TLB misses, prefetchers running across 4 KiB boundaries),
 * locked in RAM when `lock` is set (a warning when the system refuses).
 * NULL with error_set() when it cannot be had. */
void *cpu_packed_arena_new(size_t size, bool lock);
void cpu_packed_arena_free(void *arena, size_t size);
/* Frees w's packed copy, if any (its own memory; w->extra = NULL). */
void cpu_repack_release(struct tensor *w);
/* Whether w's packed copy is current: made from w->data (a weight whose data
 * pointer changed since, e.g. copied by LoRA, is not). */
bool cpu_packed_current(const struct tensor *w);

/* F16 products outside mul_mat (op_attention's scores and values): whether
 * this CPU has the kernels for rows of k halves (32 | k); the floats between
 * consecutive columns; the scratch floats a call needs for any k' <= k. */
bool cpu_packed_f16_available(int64_t k);
size_t cpu_packed_f16_col_stride(int64_t k);
size_t cpu_packed_f16_scratch_floats(int64_t k);
/* dst[c dst_stride + r] = b1892's F16 dot of row r (k halves at w + r
 * w_stride) and column c (k floats already rounded to F16, at act + c
 * act_stride: cpu_packed_f16_col_stride(k) is the best stride; a longer one
 * serves for the first k elements of longer columns), for r < nrows, c <
 * ncols: the bits of the reference vec_dot. scratch:
 * cpu_packed_f16_scratch_floats(k or more), 64-byte aligned. */
void cpu_packed_f16_product(const uint16_t *w, size_t w_stride, int64_t nrows, const float *act, size_t act_stride,
                            int64_t ncols, int64_t k, float *scratch, float *dst, size_t dst_stride);

/* mul_mat on this path: dst = w x x with w packed (or F16 with 32 | K, or
 * IQ2: with more than one column, or with one where the CPU has AVX-512
 * VBMI and GFNI), x F32 rows, dst F32. cpu_matmul.c asks
 * cpu_fast_mul_mat_applies() and hands the node over; work memory and
 * phases as any op (INIT converts x). */
bool cpu_fast_mul_mat_applies(const struct tensor *dst);
size_t cpu_fast_mul_mat_work(const struct tensor *dst, int n_threads);
void cpu_fast_mul_mat(const struct cpu_task *task, struct tensor *dst);
/* Matrix-vector products (generation): the weights thread ith of nth
 * streams first, [*p, *p + *n), for it to ask for ahead (false: none). */
bool cpu_fast_mul_mat_first_bytes(const struct tensor *dst, int ith, int nth, const uint8_t **p, size_t *n);

/* mul_mat_id on this path when every expert is (as for mul_mat): each
 * column the product of the expert its id selects; one column as that
 * expert's mul_mat, more grouped by expert into the tiles of mul_mat (F16:
 * into its work items). */
bool cpu_fast_mul_mat_id_applies(const struct tensor *dst);
size_t cpu_fast_mul_mat_id_work(const struct tensor *dst, int n_threads);
void cpu_fast_mul_mat_id(const struct cpu_task *task, struct tensor *dst);

#endif

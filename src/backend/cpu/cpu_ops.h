/*
 * Internals of the CPU compute engine: how a kernel is called, the per-op
 * table (kernel, phases, work memory, support check) and the helpers the
 * kernels share. Not for other modules: use cpu_compute.h.
 *
 * A node runs in up to three phases, each on every thread of the pool with a
 * barrier after it: INIT (e.g. converting src1 for a matrix product),
 * COMPUTE, FINALIZE (e.g. a reduction over rows). Kernels split their work by
 * rows so that every output value is computed the same way whatever the
 * number of threads: results do not depend on the thread count.
 */
#ifndef LLAMAC_BACKEND_CPU_CPU_OPS_H
#define LLAMAC_BACKEND_CPU_CPU_OPS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tensor/tensor.h"

enum cpu_phase { CPU_PHASE_INIT, CPU_PHASE_COMPUTE, CPU_PHASE_FINALIZE };

struct cpu_task {
    int ith, nth;              /* this thread, number of threads */
    enum cpu_phase phase;
    char *wdata;               /* work memory shared by the threads (see cpu_op_desc.work_size) */
    size_t wsize;
    atomic_int *error;         /* set to a nonzero code when the data is bad (see cpu_kernel_fail) */
    atomic_int *stop_after;    /* index of the node after which all threads stop */
    int node;                  /* index of the node being computed */
    const struct tensor *prev; /* the node computed before it (NULL for the first) */
    atomic_int *chunk_next;    /* this node and phase's work counter, 0 when the phase starts */
};

typedef void (*cpu_kernel_fn)(const struct cpu_task *task, struct tensor *dst);

struct cpu_op_desc {
    cpu_kernel_fn kernel;      /* NULL: no compute (views) */
    bool has_init, has_finalize;
    /* bytes of work memory for n_threads threads (NULL: none) */
    size_t (*work_size)(const struct tensor *dst, int n_threads);
    /* whether the kernel handles these types and layouts (NULL: always) */
    bool (*supported)(const struct tensor *dst);
    /* the weights thread ith of nth streams first in the compute phase, for
     * it to ask for while it waits at the barriers before (NULL or false:
     * none) */
    bool (*first_bytes)(const struct tensor *dst, int ith, int nth, const uint8_t **p, size_t *n);
};

/* The descriptor of an op; NULL for an unknown op. */
const struct cpu_op_desc *cpu_op_desc_get(enum tensor_op op);

/* Errors a kernel can find in the data (not in the shapes, checked before). */
enum cpu_kernel_error {
    CPU_ERR_NONE = 0,
    CPU_ERR_ROW_INDEX,       /* get_rows index out of range */
    CPU_ERR_EXPERT_INDEX,    /* mul_mat_id expert id out of range */
};
void cpu_task_stop_after(const struct cpu_task *task);
static inline void cpu_kernel_fail(const struct cpu_task *task, enum cpu_kernel_error err) {
    int expected = CPU_ERR_NONE;
    atomic_compare_exchange_strong(task->error, &expected, (int)err);
    cpu_task_stop_after(task);
}

/* Rows [*r0, *r1) of nr for this thread. */
static inline void cpu_task_rows(const struct cpu_task *task, int64_t nr, int64_t *r0, int64_t *r1) {
    const int64_t dr = (nr + task->nth - 1) / task->nth;
    const int64_t a = dr * task->ith;
    *r0 = a < nr ? a : nr;
    *r1 = a + dr < nr ? a + dr : nr;
}

/* Elements [*e0, *e1) of one row of n for this thread, in whole cache
 * lines of floats: element-wise ops on a single row (generation's) share
 * it out instead of leaving it to the first thread while the others wait
 * (TinyLlama shape, 2 threads: the second thread waited 2-6 us at each
 * add, mul and silu). */
static inline void cpu_task_elems(const struct cpu_task *task, int64_t n, int64_t *e0, int64_t *e1) {
    const int64_t lines = (n + 15) / 16, per = (lines + task->nth - 1) / task->nth;
    const int64_t a = per * 16 * task->ith, b = a + per * 16;
    *e0 = a < n ? a : n;
    *e1 = b < n ? b : n;
}

/* Dynamic work sharing: threads claim chunk indices 0, 1, 2, ... of the
 * current phase from a shared counter until they run past the last, so a
 * thread that runs faster (or is not preempted) takes more chunks. Which
 * thread computes a chunk never changes the result. */
static inline int cpu_task_next_chunk(const struct cpu_task *task) {
    return atomic_fetch_add_explicit(task->chunk_next, 1, memory_order_relaxed);
}

/* A matrix product's output cut into chunks of rows (of the weight) x columns
 * (of the activations): a chunk's weight rows fill about a quarter of the L2
 * cache and its activation columns another quarter, so the weight block is
 * read from memory once and reused for every column of the chunk. When that
 * gives fewer than CPU_CHUNKS_PER_THREAD chunks per thread the blocks are cut
 * smaller, so the threads can balance. Row blocks are multiples of
 * row_align rows (except the last), for kernels that take several rows at
 * a time: CPU_CHUNK_ROW_ALIGN, or twice that for the packed kernels that
 * take two 16-row groups a call. Chunk k covers row block k / n_col_chunks
 * and column block k % n_col_chunks: consecutive chunks share their weight
 * rows. */
#define CPU_CHUNK_ROW_ALIGN 16
#define CPU_CHUNKS_PER_THREAD 4

struct cpu_chunks {
    int64_t nr0, nr1;          /* rows, columns */
    int64_t rows, cols;        /* per chunk (the last block of each may be smaller) */
    int64_t n_row_chunks, n_col_chunks;
};

struct cpu_chunks cpu_chunks_plan(int64_t nr0, size_t row_bytes, int64_t row_align, int64_t nr1, size_t col_bytes,
                                  int n_threads);
static inline int64_t cpu_chunks_count(const struct cpu_chunks *c) { return c->n_row_chunks * c->n_col_chunks; }
/* Rows [*r0, *r1) and columns [*c0, *c1) of chunk k (0 <= k < count). */
static inline void cpu_chunks_range(const struct cpu_chunks *c, int64_t k, int64_t *r0, int64_t *r1, int64_t *c0,
                                    int64_t *c1) {
    const int64_t rb = k / c->n_col_chunks, cb = k % c->n_col_chunks;
    *r0 = rb * c->rows;
    *r1 = *r0 + c->rows < c->nr0 ? *r0 + c->rows : c->nr0;
    *c0 = cb * c->cols;
    *c1 = *c0 + c->cols < c->nr1 ? *c0 + c->cols : c->nr1;
}

/* Per-thread scratch of `per_thread` bytes (rounded to 64) in the work memory after `offset`. */
static inline size_t cpu_scratch_stride(size_t per_thread) { return (per_thread + 63) & ~(size_t)63; }
static inline void *cpu_task_scratch(const struct cpu_task *task, size_t offset, size_t per_thread) {
    return task->wdata + offset + (size_t)task->ith * cpu_scratch_stride(per_thread);
}

/* Address of element (i0, i1, i2, i3). */
static inline void *cpu_elem(const struct tensor *t, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
    return (char *)t->data + i0 * t->nb[0] + i1 * t->nb[1] + i2 * t->nb[2] + i3 * t->nb[3];
}

/* Row r (r = i1 + ne1*(i2 + ne2*i3)) as indices i1, i2, i3. */
static inline void cpu_row_index(const struct tensor *t, int64_t r, int64_t *i1, int64_t *i2, int64_t *i3) {
    *i1 = r % t->ne[1];
    r /= t->ne[1];
    *i2 = r % t->ne[2];
    *i3 = r / t->ne[2];
}

/* Converts ne elements starting at src (element stride `stride` bytes for F32,
 * F16 and I32; packed blocks for quantized types) to floats. */
void cpu_row_to_float(enum ggml_type type, const void *src, size_t stride, float *dst, int64_t ne);
/* Whether cpu_row_to_float can convert this type (quantized: to_float present). */
bool cpu_type_to_float_ok(enum ggml_type type);
/* Whether rows of floats can be stored as this type (F32, F16, or from_float present). */
bool cpu_type_from_float_ok(enum ggml_type type);
/* Stores ne floats as a packed row of `type` (F16 rounds to nearest even). */
void cpu_row_from_float(enum ggml_type type, const float *src, void *dst, int64_t ne);

/* b1892's F16 lookup tables (value of f at every half-precision input, stored
 * as half precision): GGML_GELU_FP16, GGML_GELU_QUICK_FP16, GGML_SILU_FP16 and
 * the exp table used by soft_max. Filled once (cpu_tables_init). */
void cpu_tables_init(void);
enum cpu_table_id { CPU_TABLE_EXP, CPU_TABLE_SILU, CPU_TABLE_GELU, CPU_TABLE_GELU_QUICK };
/* A table's 65536 entries (and cpu_vec.h's padding), for row lookups with cpu_vec_table_f16. */
const uint16_t *cpu_table_data(enum cpu_table_id id);
float cpu_table_exp(float x);
float cpu_table_silu(float x);
float cpu_table_gelu(float x);
float cpu_table_gelu_quick(float x);

/* b1892's soft_max of one row of nc (ggml_compute_forward_soft_max_f32): w =
 * s * scale (+ the mask row m, when not NULL) in wp, then dp = its
 * exponentials over their sum (the F16 exp table; cpu_vec.h), with round_f16
 * rounded to F16 values. dp may be s. */
void cpu_soft_max_row(const float *s, const float *m, float scale, float *wp, float *dp, int64_t nc, bool round_f16);

/* For masked products (op_mul_mat_masked, op_attention): the first and one
 * past the last of columns [col0, col0 + ncols) whose mask row (mask rows
 * are columns of the product) is not -inf somewhere in [row0, row0 + nrows),
 * relative to col0 (first == end when there is none). */
void cpu_mask_columns(const struct tensor *mask, int64_t row0, int nrows, int64_t col0, int ncols, int *first,
                      int *end);

/* Kernel groups (one file each). */
extern const struct cpu_op_desc cpu_desc_dup, cpu_desc_add, cpu_desc_add1, cpu_desc_acc, cpu_desc_sub,
    cpu_desc_mul, cpu_desc_div, cpu_desc_sqr, cpu_desc_sqrt, cpu_desc_log, cpu_desc_sum, cpu_desc_sum_rows,
    cpu_desc_mean, cpu_desc_repeat, cpu_desc_repeat_back, cpu_desc_concat, cpu_desc_norm, cpu_desc_rms_norm,
    cpu_desc_rms_norm_back, cpu_desc_mul_mat, cpu_desc_mul_mat_id, cpu_desc_out_prod, cpu_desc_scale,
    cpu_desc_set, cpu_desc_get_rows, cpu_desc_get_rows_back, cpu_desc_diag, cpu_desc_diag_mask,
    cpu_desc_soft_max, cpu_desc_soft_max_back, cpu_desc_rope, cpu_desc_alibi, cpu_desc_clamp, cpu_desc_argsort,
    cpu_desc_pad, cpu_desc_unary, cpu_desc_silu_back, cpu_desc_cross_entropy_loss,
    cpu_desc_cross_entropy_loss_back, cpu_desc_attention;

#endif

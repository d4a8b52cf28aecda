/*
 * Packed weights and the fast matrix products (cpu_packed.h): packing,
 * activation layouts, work split. The micro-kernels are per instruction set
 * (cpu_packed_x86.c); layouts are described in cpu_packed_impl.h.
 */
#define _GNU_SOURCE /* MAP_ANONYMOUS, MADV_HUGEPAGE */
#include "backend/cpu/cpu_packed.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/cpu_packed_impl.h"
#include "core/cpu_features.h"
#include "core/fp16.h"
#include "core/log.h"
#include "quant/quant.h"

/* Layout of quantized blocks we read (the GGUF block structs, see quant_impl.h). */
struct pk_block_q4_0 { fp16_t d; uint8_t qs[16]; };
struct pk_block_q8_0 { fp16_t d; int8_t qs[32]; };
_Static_assert(sizeof(struct pk_block_q4_0) == 18 && sizeof(struct pk_block_q8_0) == 34, "block layouts");

/* Rows of F16 weights converted to floats at a time (prompt products). */
#define PK_F16_ROW_BLOCK 16
/* Columns below which F16 weights are read in place (matrix-vector). */
#define PK_F16_MIN_COLS_CONVERT 4

struct cpu_packed_weight {
    const void *src;     /* w->data when packed */
    uint8_t *data;       /* anonymous mapping of `size` bytes */
    size_t size;
};

static const struct pk_kernels *g_kernels;
static pthread_once_t g_kernels_once = PTHREAD_ONCE_INIT;

static void pk_kernels_init(void) {
    g_kernels = cpu_features_get()->force_scalar ? NULL : pk_kernels_x86();
}

static const struct pk_kernels *pk_kernels(void) {
    pthread_once(&g_kernels_once, pk_kernels_init);
    return g_kernels;
}

static pk_tile_fn pk_quant_kernel(enum ggml_type type) {
    const struct pk_kernels *k = pk_kernels();
    if (!k) return NULL;
    switch (type) {
        case GGML_TYPE_Q4_0: return k->q4_0;
        case GGML_TYPE_Q8_0: return k->q8_0;
        default: return NULL;
    }
}

bool cpu_packed_type(enum ggml_type type) { return pk_quant_kernel(type) != NULL; }

/* ---- packing ------------------------------------------------------------------------------- */

static size_t pk_group_bytes(enum ggml_type type, int64_t nb) {
    switch (type) {
        case GGML_TYPE_Q4_0: return pk_pad64((size_t)nb * 8) + (size_t)nb * 64;
        case GGML_TYPE_Q8_0: return pk_pad64((size_t)nb * 8) + (size_t)nb * 128;
        default: return 0;
    }
}

static int64_t pk_blocks_per_row(const struct tensor *w) {
    const struct type_traits *tt = type_traits_get(w->type);
    return w->ne[0] / tt->blck_size;
}

size_t cpu_repack_size(const struct tensor *w) {
    if (!cpu_packed_type(w->type) || w->ne[2] != 1 || w->ne[3] != 1 || !tensor_is_contiguous(w)) return 0;
    const int64_t groups = (w->ne[1] + PK_ROWS - 1) / PK_ROWS;
    return (size_t)groups * pk_group_bytes(w->type, pk_blocks_per_row(w));
}

/* Group g of w into out (rows past the end are zeros). */
static void pk_pack_group(const struct tensor *w, int64_t g, uint8_t *out) {
    const int64_t nb = pk_blocks_per_row(w);
    fp16_t *d = (fp16_t *)out;
    uint8_t *q = out + pk_pad64((size_t)nb * 8);
    memset(out, 0, pk_group_bytes(w->type, nb));
    for (int r = 0; r < PK_ROWS; r++) {
        const int64_t row = g * PK_ROWS + r;
        if (row >= w->ne[1]) break;
        const char *src = (const char *)w->data + row * w->nb[1];
        for (int64_t i = 0; i < nb; i++) {
            if (w->type == GGML_TYPE_Q4_0) {
                const struct pk_block_q4_0 *b = (const struct pk_block_q4_0 *)src + i;
                d[PK_ROWS * i + r] = b->d;
                memcpy(q + 64 * i + 16 * r, b->qs, 16);
            } else {
                const struct pk_block_q8_0 *b = (const struct pk_block_q8_0 *)src + i;
                d[PK_ROWS * i + r] = b->d;
                for (int j = 0; j < 16; j++) {
                    q[128 * i + 16 * r + j] = (uint8_t)(b->qs[j] + 128);
                    q[128 * i + 64 + 16 * r + j] = (uint8_t)(b->qs[16 + j] + 128);
                }
            }
        }
    }
}

void cpu_repack_release(struct tensor *w) {
    struct cpu_packed_weight *p = w->extra;
    if (!p) return;
    munmap(p->data, p->size);
    free(p);
    w->extra = NULL;
}

bool cpu_repack_weight(struct tensor *w) {
    const size_t size = cpu_repack_size(w);
    cpu_repack_release(w);
    if (size == 0 || !w->data) return true;
    struct cpu_packed_weight *p = malloc(sizeof *p);
    void *data = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (!p || data == MAP_FAILED) {
        free(p);
        if (data != MAP_FAILED) munmap(data, size);
        error_set("cannot allocate %zu bytes for the packed copy of '%s'", size, w->name);
        return false;
    }
#ifdef MADV_HUGEPAGE
    madvise(data, size, MADV_HUGEPAGE); /* fewer TLB misses while streaming; a hint */
#endif
    *p = (struct cpu_packed_weight){ .src = w->data, .data = data, .size = size };
    const size_t gb = pk_group_bytes(w->type, pk_blocks_per_row(w));
    const int64_t groups = (w->ne[1] + PK_ROWS - 1) / PK_ROWS;
    for (int64_t g = 0; g < groups; g++) pk_pack_group(w, g, p->data + (size_t)g * gb);
    w->extra = p;
    return true;
}

bool cpu_packed_current(const struct tensor *w) {
    const struct cpu_packed_weight *p = w->extra;
    return p && p->src == w->data;
}

/* ---- which products take this path ------------------------------------------------------- */

enum pk_kind { PK_NONE, PK_QUANT, PK_F16 };

static enum pk_kind pk_kind_of(const struct tensor *dst) {
    const struct tensor *w = dst->src[0], *x = dst->src[1];
    if (!pk_kernels()) return PK_NONE;
    if (x->type != GGML_TYPE_F32 || x->nb[0] != sizeof(float)) return PK_NONE;
    if (dst->type != GGML_TYPE_F32 || !tensor_is_contiguous(dst)) return PK_NONE;
    if (dst->op_params[0] != MUL_MAT_ORDER_REFERENCE && dst->op_params[0] != MUL_MAT_ORDER_ANY) return PK_NONE;
    if (w->type == GGML_TYPE_F16) {
        return w->nb[0] == sizeof(fp16_t) && w->ne[0] % 32 == 0 ? PK_F16 : PK_NONE;
    }
    return pk_quant_kernel(w->type) && cpu_packed_current(w) ? PK_QUANT : PK_NONE;
}

bool cpu_fast_mul_mat_applies(const struct tensor *dst) { return pk_kind_of(dst) != PK_NONE; }

/* ---- activations ------------------------------------------------------------------------------ */

static size_t pk_act_stride(const struct tensor *dst) {
    const struct tensor *w = dst->src[0], *x = dst->src[1];
    if (w->type == GGML_TYPE_F16) return (size_t)x->ne[0] * sizeof(float);
    const int64_t nb = x->ne[0] / 32;
    return (size_t)nb * 64 + pk_pad64((size_t)nb * sizeof(float));
}

/* Per-thread scratch after the activations: the Q8_0 row, or the F16 row and
 * the F32 weight rows. */
static size_t pk_scratch_bytes(const struct tensor *dst) {
    const struct tensor *w = dst->src[0];
    const int64_t k = w->ne[0];
    if (w->type == GGML_TYPE_F16) {
        return pk_pad64((size_t)k * sizeof(fp16_t)) + pk_pad64((size_t)PK_F16_ROW_BLOCK * k * sizeof(float));
    }
    return pk_pad64((size_t)(k / 32) * sizeof(struct pk_block_q8_0));
}

size_t cpu_fast_mul_mat_work(const struct tensor *dst, int n_threads) {
    return pk_pad64(pk_act_stride(dst) * (size_t)tensor_nrows(dst->src[1])) +
           (size_t)n_threads * pk_scratch_bytes(dst);
}

static void *pk_thread_scratch(const struct cpu_task *task, const struct tensor *dst) {
    return task->wdata + pk_pad64(pk_act_stride(dst) * (size_t)tensor_nrows(dst->src[1])) +
           (size_t)task->ith * pk_scratch_bytes(dst);
}

/* One F32 column in the PK_ACT_Q8 layout: quantized as the reference path
 * does (the trait table's Q8_0 activation quantizer), then the lanes' bias
 * corrections and the scales as floats. */
static void pk_act_q8(const float *x, int64_t k, int bias, struct pk_block_q8_0 *tmp, uint8_t *out) {
    type_traits_get(GGML_TYPE_Q8_0)->from_float(x, tmp, k);
    const int64_t nb = k / 32;
    float *d = (float *)(out + (size_t)nb * 64);
    for (int64_t i = 0; i < nb; i++) {
        uint8_t *rec = out + 64 * i;
        memcpy(rec, tmp[i].qs, 32);
        int32_t corr[8];
        for (int l = 0; l < 8; l++) {
            const int8_t *q = tmp[i].qs + 4 * l;
            corr[l] = -bias * (q[0] + q[1] + q[2] + q[3]);
        }
        memcpy(rec + 32, corr, sizeof corr);
        d[i] = fp16_to_fp32(tmp[i].d);
    }
}

static void pk_convert_x(const struct cpu_task *task, const struct tensor *dst) {
    const struct tensor *w = dst->src[0], *x = dst->src[1];
    const size_t stride = pk_act_stride(dst);
    void *scratch = pk_thread_scratch(task, dst);
    int64_t r0, r1;
    cpu_task_rows(task, tensor_nrows(x), &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        int64_t i1, i2, i3;
        cpu_row_index(x, r, &i1, &i2, &i3);
        const float *src = cpu_elem(x, 0, i1, i2, i3);
        uint8_t *out = (uint8_t *)task->wdata + (size_t)r * stride;
        if (w->type == GGML_TYPE_F16) {
            /* the reference rounds the activations to F16 */
            type_traits_get(GGML_TYPE_F16)->from_float(src, scratch, x->ne[0]);
            type_traits_get(GGML_TYPE_F16)->to_float(scratch, (float *)out, x->ne[0]);
        } else {
            pk_act_q8(src, x->ne[0], w->type == GGML_TYPE_Q4_0 ? 8 : 128, scratch, out);
        }
    }
}

/* ---- products --------------------------------------------------------------------------------- */

/* Quantized weights (2-d, packed): groups split between the threads, all columns. */
static void pk_quant_compute(const struct cpu_task *task, struct tensor *dst) {
    const struct tensor *w = dst->src[0], *x = dst->src[1];
    const struct cpu_packed_weight *p = w->extra;
    const pk_tile_fn kernel = pk_quant_kernel(w->type);
    const int64_t nb = pk_blocks_per_row(w), ncols = tensor_nrows(x);
    const size_t gb = pk_group_bytes(w->type, nb), stride = pk_act_stride(dst);
    const int64_t groups = (w->ne[1] + PK_ROWS - 1) / PK_ROWS;
    int64_t g0, g1;
    cpu_task_rows(task, groups, &g0, &g1);
    /* column blocks that stay in L2 while the rows of a few groups pass over them */
    const int64_t col_block = 64, group_block = 16;
    for (int64_t gb0 = g0; gb0 < g1; gb0 += group_block) {
        const int64_t gb1 = gb0 + group_block < g1 ? gb0 + group_block : g1;
        for (int64_t c0 = 0; c0 < ncols; c0 += col_block) {
            const int64_t c1 = c0 + col_block < ncols ? c0 + col_block : ncols;
            for (int64_t g = gb0; g < gb1; g++) {
                const int64_t rows_left = w->ne[1] - g * PK_ROWS;
                for (int64_t c = c0; c < c1; c += PK_MAX_COLS) {
                    const struct pk_tile t = {
                        .w = p->data + (size_t)g * gb, .nb = nb,
                        .act = (const uint8_t *)task->wdata + (size_t)c * stride, .act_stride = stride,
                        .ncols = (int)(c1 - c < PK_MAX_COLS ? c1 - c : PK_MAX_COLS),
                        .nrows = (int)(rows_left < PK_ROWS ? rows_left : PK_ROWS),
                        .dst = (float *)dst->data + c * dst->ne[0] + g * PK_ROWS, .dst_stride = (size_t)dst->ne[0],
                    };
                    kernel(&t);
                }
            }
        }
    }
}

/* F16 weights (any slices, broadcast as mul_mat allows): work items are
 * (slice, block of rows), all columns of the slice each. With enough columns
 * the block's rows are converted to floats once. */
static void pk_f16_compute(const struct cpu_task *task, struct tensor *dst) {
    const struct tensor *w = dst->src[0], *x = dst->src[1];
    const pk_tile_f16_fn kernel = pk_kernels()->f16;
    const int64_t k = w->ne[0], nrows = w->ne[1], ncols = x->ne[1];
    const int64_t r2 = x->ne[2] / w->ne[2], r3 = x->ne[3] / w->ne[3];
    const int64_t row_blocks = (nrows + PK_F16_ROW_BLOCK - 1) / PK_F16_ROW_BLOCK;
    const int64_t slices = x->ne[2] * x->ne[3];
    const bool convert = ncols >= PK_F16_MIN_COLS_CONVERT;
    float *wf = (float *)((char *)pk_thread_scratch(task, dst) + pk_pad64((size_t)k * sizeof(fp16_t)));
    const size_t stride = pk_act_stride(dst) / sizeof(float);
    int64_t i0, i1;
    cpu_task_rows(task, slices * row_blocks, &i0, &i1);
    for (int64_t item = i0; item < i1; item++) {
        const int64_t slice = item / row_blocks, rb = item % row_blocks;
        const int64_t i12 = slice % x->ne[2], i13 = slice / x->ne[2];
        const int64_t row0 = rb * PK_F16_ROW_BLOCK;
        const int64_t nr = nrows - row0 < PK_F16_ROW_BLOCK ? nrows - row0 : PK_F16_ROW_BLOCK;
        const char *wrow = cpu_elem(w, 0, row0, i12 / r2, i13 / r3);
        if (convert) {
            for (int64_t r = 0; r < nr; r++) {
                type_traits_get(GGML_TYPE_F16)->to_float(wrow + r * w->nb[1], wf + r * k, k);
            }
        }
        const float *act = (const float *)task->wdata + (size_t)(slice * ncols) * stride;
        float *out = cpu_elem(dst, row0, 0, i12, i13);
        for (int64_t c = 0; c < ncols; c += PK_F16_COLS) {
            for (int64_t r = 0; r < nr; r += PK_F16_ROWS) {
                const struct pk_tile_f16 t = {
                    .w = convert ? (const void *)(wf + r * k) : (const void *)(wrow + r * w->nb[1]),
                    .w_stride = convert ? (size_t)k : w->nb[1] / sizeof(fp16_t), .w_f16 = !convert,
                    .nrows = (int)(nr - r < PK_F16_ROWS ? nr - r : PK_F16_ROWS),
                    .act = act + c * stride, .act_stride = stride,
                    .ncols = (int)(ncols - c < PK_F16_COLS ? ncols - c : PK_F16_COLS),
                    .k = k, .dst = out + c * dst->ne[0] + r, .dst_stride = (size_t)dst->ne[0],
                };
                kernel(&t);
            }
        }
    }
}

void cpu_fast_mul_mat(const struct cpu_task *task, struct tensor *dst) {
    if (task->phase == CPU_PHASE_INIT) {
        pk_convert_x(task, dst);
    } else if (dst->src[0]->type == GGML_TYPE_F16) {
        pk_f16_compute(task, dst);
    } else {
        pk_quant_compute(task, dst);
    }
}

/*
 * op_attention: causal attention in one node. Per head and block of query
 * columns: the scores K x Q (blocks the mask closes skipped, as
 * op_mul_mat_masked does), each column's soft_max (cpu_soft_max_row), the
 * probabilities rounded to F16 (as mul_mat rounds its activations for F16
 * weights) and V x P, written with a token's heads side by side. Every
 * output takes the arithmetic of the three nodes it replaces (b1892's F16
 * dot products, soft_max and roundings), so the results are the same bits;
 * a block's scores stay in this thread's cache instead of going through
 * memory three times (write, soft_max, convert).
 *
 * Where the packed F16 kernels run (cpu_packed_f16_available: AVX-512), the
 * columns are kept as F16-rounded floats for them; elsewhere they are halves
 * for the trait table's vec_dot.
 */
#include <string.h>

#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/cpu_packed.h"
#include "quant/quant.h"

/* Keys per block of the mask table: a block whose keys a column cannot see
 * is not computed for that column. */
#define ATTN_KV_ROWS 64
/* Bytes of one work item's scores: its query columns are as many as fit. */
#define ATTN_SCORE_BYTES ((int64_t)256 << 10)
/* Below this many tokens, heads that share a KV head share work items
 * (as many as KV heads x tokens) when there are enough of them for the
 * threads: the heads' queries are the columns of one product, which reads
 * the keys and values once and takes the packed kernels' many-column paths.
 * The node alone, 32 heads on 4 KV heads, one token, 2 threads, cache in
 * L2 (Zen 5): 11 -> 4 us at 32 keys, 24 -> 14 at 128, 47 -> 23 at 416,
 * 135 -> 66 at 1024. */
#define ATTN_GROUPED_MAX_TOKENS 4

struct attn_shape {
    int64_t d_k, d_v, n_kv, n_tok, n_head, heads_per_kv;
    /* With few tokens and grouped heads (generation), an
     * item is one token and the heads of one KV head, whose keys and values
     * it reads once; else one head and a block of tok_cols tokens. */
    bool grouped;
    int64_t tok_cols;             /* tokens per column block of the mask table */
    int64_t cols;                 /* query columns per work item */
    int64_t row_blocks, col_blocks, n_items;
    bool packed;                  /* on cpu_packed_f16_product */
    size_t q_stride, s_stride;    /* between columns of the queries and of the scores */
};

static struct attn_shape attn_shape_of(const struct tensor *dst, int n_threads) {
    const struct tensor *k = dst->src[0], *q = dst->src[1], *v = dst->src[3];
    struct attn_shape s = {
        .d_k = k->ne[0], .d_v = v->ne[1], .n_kv = k->ne[1], .n_tok = q->ne[1], .n_head = q->ne[2],
        .heads_per_kv = q->ne[2] / k->ne[2],
    };
    s.grouped = s.heads_per_kv > 1 && s.n_tok < ATTN_GROUPED_MAX_TOKENS && k->ne[2] * s.n_tok >= n_threads;
    if (s.grouped) {
        s.tok_cols = 1;
        s.cols = s.heads_per_kv;
    } else {
        s.tok_cols = ATTN_SCORE_BYTES / (s.n_kv * (int64_t)sizeof(float));
        s.tok_cols = s.tok_cols < 8 ? 8 : s.tok_cols > 64 ? 64 : s.tok_cols;
        if (s.tok_cols > s.n_tok) s.tok_cols = s.n_tok;
        s.cols = s.tok_cols;
    }
    s.row_blocks = (s.n_kv + ATTN_KV_ROWS - 1) / ATTN_KV_ROWS;
    s.col_blocks = (s.n_tok + s.tok_cols - 1) / s.tok_cols;
    s.n_items = s.grouped ? k->ne[2] * s.n_tok : s.n_head * s.col_blocks;
    s.packed = cpu_packed_f16_available(s.d_k) && cpu_packed_f16_available(s.n_kv);
    s.q_stride = s.packed ? cpu_packed_f16_col_stride(s.d_k) : (size_t)s.d_k;
    s.s_stride = s.packed ? cpu_packed_f16_col_stride(s.n_kv) : (size_t)s.n_kv;
    return s;
}

/* Work memory: the mask table ([first, end) per key block and column block),
 * then per thread: queries, scores, the soft_max row, halves for rounding
 * (reference: the probabilities as halves), the packed kernels' scratch and
 * the columns' key extents (attn_extent). */
struct attn_scratch {
    void *queries;    /* floats (packed) or halves */
    float *scores;
    float *row;
    uint16_t *halves;
    float *kernel;
    int64_t *extent;
};

static size_t attn_pad(size_t bytes) { return (bytes + 63) & ~(size_t)63; }

static size_t attn_table_bytes(const struct attn_shape *s) {
    return attn_pad((size_t)(s->row_blocks * s->col_blocks) * 2 * sizeof(int));
}

static size_t attn_thread_bytes(const struct attn_shape *s, struct attn_scratch *layout, char *base) {
    const size_t cols = (size_t)s->cols;
    const size_t q = attn_pad(cols * s->q_stride * (s->packed ? sizeof(float) : sizeof(uint16_t)));
    const size_t sc = attn_pad(cols * s->s_stride * sizeof(float));
    const size_t row = attn_pad((size_t)s->n_kv * sizeof(float));
    const size_t longest = (size_t)(s->n_kv > s->d_k ? s->n_kv : s->d_k);
    const size_t halves = attn_pad((s->packed ? longest : cols * (size_t)s->n_kv) * sizeof(uint16_t));
    size_t kernel = 0;
    if (s->packed) {
        const size_t a = cpu_packed_f16_scratch_floats(s->d_k), b = cpu_packed_f16_scratch_floats(s->n_kv);
        kernel = attn_pad((a > b ? a : b) * sizeof(float));
    }
    const size_t extent = attn_pad(cols * sizeof(int64_t));
    if (layout) {
        layout->queries = base;
        layout->scores = (float *)(base + q);
        layout->row = (float *)(base + q + sc);
        layout->halves = (uint16_t *)(base + q + sc + row);
        layout->kernel = (float *)(base + q + sc + row + halves);
        layout->extent = (int64_t *)(base + q + sc + row + halves + kernel);
    }
    return q + sc + row + halves + kernel + extent;
}

static size_t cpu_attention_work(const struct tensor *dst, int n_threads) {
    const struct attn_shape s = attn_shape_of(dst, n_threads);
    return attn_table_bytes(&s) + (size_t)n_threads * attn_thread_bytes(&s, NULL, NULL);
}

/* INIT: the mask table, shared by every head, entries shared out among the threads. */
static void attn_mask_table(const struct cpu_task *task, const struct tensor *dst, const struct attn_shape *s) {
    int *table = (int *)task->wdata;
    for (int64_t e = task->ith; e < s->row_blocks * s->col_blocks; e += task->nth) {
        const int64_t row0 = e % s->row_blocks * ATTN_KV_ROWS, col0 = e / s->row_blocks * s->tok_cols;
        const int rows = (int)(s->n_kv - row0 < ATTN_KV_ROWS ? s->n_kv - row0 : ATTN_KV_ROWS);
        const int cols = (int)(s->n_tok - col0 < s->tok_cols ? s->n_tok - col0 : s->tok_cols);
        cpu_mask_columns(dst->src[2], row0, rows, col0, cols, &table[2 * e], &table[2 * e + 1]);
    }
}

/* A column of n floats rounded to F16 and back, in place (halves: n of scratch). */
static void attn_round_f16(float *x, uint16_t *halves, int64_t n) {
    cpu_row_from_float(GGML_TYPE_F16, x, halves, n);
    cpu_row_to_float(GGML_TYPE_F16, halves, sizeof(uint16_t), x, n);
}

/* A work item's query columns: column c is head h0 + c dh at token t0 + c dt. */
struct attn_cols {
    int64_t h0, dh, t0, dt, n;
    int64_t cb;           /* the mask table's column block */
};

static struct attn_cols attn_cols_of(const struct attn_shape *s, int64_t item) {
    if (s->grouped) {
        const int64_t t = item % s->n_tok;
        return (struct attn_cols){ item / s->n_tok * s->heads_per_kv, 1, t, 0, s->heads_per_kv, t };
    }
    const int64_t cb = item % s->col_blocks, t0 = cb * s->tok_cols;
    return (struct attn_cols){ item / s->col_blocks, 0, t0, 1, s->n_tok - t0 < s->tok_cols ? s->n_tok - t0 : s->tok_cols, cb };
}

/* The keys column c of an item needs: up to the end of the last key block
 * the mask leaves open for it. Past it every key is masked, so its scores
 * are not needed and its probabilities are 0; a soft_max over the keys
 * before it is the whole row's, bit for bit (the masked keys change
 * neither the max nor the sum). A column with no open block takes all
 * n_kv keys (b1892's result for a row masked throughout). */
static int64_t attn_extent(const struct attn_shape *s, const int *table, const struct attn_cols *ac, int64_t c) {
    const int64_t col = s->grouped ? 0 : c; /* its column in the table's column block */
    for (int64_t rb = s->row_blocks - 1; rb >= 0; rb--) {
        const int *e = &table[2 * (ac->cb * s->row_blocks + rb)];
        if (col >= e[0] && col < e[1]) return (rb + 1) * ATTN_KV_ROWS < s->n_kv ? (rb + 1) * ATTN_KV_ROWS : s->n_kv;
    }
    return s->n_kv;
}

/* One work item (attn_cols_of). */
static void attn_item(const struct tensor *dst, const struct attn_shape *s, const int *table,
                      const struct attn_scratch *w, const struct attn_cols *ac) {
    const struct tensor *k = dst->src[0], *q = dst->src[1], *mask = dst->src[2], *v = dst->src[3];
    const type_vec_dot_fn dot = type_traits_get(GGML_TYPE_F16)->vec_dot;
    const float scale = tensor_op_param_f32(dst, 0);
    const int64_t hk = ac->h0 / s->heads_per_kv, nc = ac->n;
    const char *keys = (const char *)k->data + hk * k->nb[2], *values = (const char *)v->data + hk * v->nb[2];
    float *queries = w->queries;
    uint16_t *queries_h = w->queries;

    for (int64_t c = 0; c < nc; c++) {
        const float *src = cpu_elem(q, 0, ac->t0 + c * ac->dt, ac->h0 + c * ac->dh, 0);
        if (s->packed) {
            memcpy(queries + c * s->q_stride, src, (size_t)s->d_k * sizeof(float));
            attn_round_f16(queries + c * s->q_stride, w->halves, s->d_k);
        } else {
            cpu_row_from_float(GGML_TYPE_F16, src, queries_h + c * s->q_stride, s->d_k);
        }
    }

    for (int64_t c = 0; c < nc; c++) w->extent[c] = attn_extent(s, table, ac, c);

    /* scores: column c at w->scores + c s_stride, key j at [j] (up to its extent) */
    for (int64_t rb = 0; rb < s->row_blocks; rb++) {
        const int64_t row0 = rb * ATTN_KV_ROWS;
        const int64_t nr = s->n_kv - row0 < ATTN_KV_ROWS ? s->n_kv - row0 : ATTN_KV_ROWS;
        int first = table[2 * (ac->cb * s->row_blocks + rb)], end = table[2 * (ac->cb * s->row_blocks + rb) + 1];
        if (s->grouped && end > first) { /* one token: its columns are all open */
            first = 0;
            end = (int)nc;
        }
        for (int64_t c = 0; c < nc; c++) {
            if ((c < first || c >= end) && row0 < w->extent[c]) {
                memset(w->scores + c * s->s_stride + row0, 0, (size_t)nr * sizeof(float));
            }
        }
        if (first == end) continue;
        const char *rows = keys + row0 * k->nb[1];
        /* the next block's keys (a head's slice of each cache row, which the
         * hardware prefetchers miss) are asked for while this one computes */
        for (int64_t r = row0 + ATTN_KV_ROWS; r < row0 + 2 * ATTN_KV_ROWS && r < s->n_kv; r++) {
            for (int64_t o = 0; o < s->d_k * (int64_t)sizeof(uint16_t); o += 64) {
                __builtin_prefetch(keys + r * k->nb[1] + o);
            }
        }
        if (s->packed) {
            cpu_packed_f16_product((const uint16_t *)rows, k->nb[1] / sizeof(uint16_t), nr,
                                   queries + first * s->q_stride, s->q_stride, end - first, s->d_k, w->kernel,
                                   w->scores + first * s->s_stride + row0, s->s_stride);
            continue;
        }
        for (int64_t c = first; c < end; c++) {
            for (int64_t r = 0; r < nr; r++) {
                dot(s->d_k, w->scores + c * s->s_stride + row0 + r, rows + r * k->nb[1], queries_h + c * s->q_stride);
            }
        }
    }

    /* probabilities, rounded to F16 as the values' product takes them; zeros
     * past a column's extent (as far as the values' product reads: the
     * longest extent, or all n_kv halves for the reference dot) */
    int64_t k_values = 0;
    for (int64_t c = 0; c < nc; c++) k_values = w->extent[c] > k_values ? w->extent[c] : k_values;
    for (int64_t c = 0; c < nc; c++) {
        float *p = w->scores + c * s->s_stride;
        const int64_t e = w->extent[c];
        cpu_soft_max_row(p, cpu_elem(mask, 0, ac->t0 + c * ac->dt, 0, 0), scale, w->row, p, e, s->packed);
        if (s->packed) {
            memset(p + e, 0, (size_t)(k_values - e) * sizeof(float));
        } else {
            cpu_row_from_float(GGML_TYPE_F16, p, w->halves + c * s->n_kv, e);
            memset(w->halves + c * s->n_kv + e, 0, (size_t)(s->n_kv - e) * sizeof(uint16_t));
        }
    }

    float *out = cpu_elem(dst, 0, ac->h0, ac->t0, 0); /* [d_v, n_head, n_tok] */
    const size_t out_stride = (ac->dh ? dst->nb[1] : dst->nb[2]) / sizeof(float);
    if (s->packed) {
        /* k_values is a multiple of 32: the key blocks' ends are, and n_kv is here */
        cpu_packed_f16_product((const uint16_t *)values, v->nb[1] / sizeof(uint16_t), s->d_v, w->scores, s->s_stride,
                               nc, k_values, w->kernel, out, out_stride);
        return;
    }
    for (int64_t c = 0; c < nc; c++) {
        for (int64_t d = 0; d < s->d_v; d++) {
            dot(s->n_kv, out + c * out_stride + d, values + d * v->nb[1], w->halves + c * s->n_kv);
        }
    }
}

static void cpu_attention(const struct cpu_task *task, struct tensor *dst) {
    const struct attn_shape s = attn_shape_of(dst, task->nth);
    if (task->phase == CPU_PHASE_INIT) {
        attn_mask_table(task, dst, &s);
        return;
    }
    struct attn_scratch w;
    const size_t per_thread = attn_thread_bytes(&s, NULL, NULL);
    attn_thread_bytes(&s, &w, task->wdata + attn_table_bytes(&s) + (size_t)task->ith * per_thread);
    /* items head-major: consecutive items share their keys and values */
    for (int64_t item = cpu_task_next_chunk(task); item < s.n_items; item = cpu_task_next_chunk(task)) {
        const struct attn_cols ac = attn_cols_of(&s, item);
        attn_item(dst, &s, (const int *)task->wdata, &w, &ac);
    }
}

static bool cpu_attention_supported(const struct tensor *dst) {
    return dst->type == GGML_TYPE_F32 && dst->nb[0] == sizeof(float) && dst->src[1]->nb[0] == sizeof(float) &&
           type_traits_get(GGML_TYPE_F16)->vec_dot != NULL;
}

const struct cpu_op_desc cpu_desc_attention = {
    .kernel = cpu_attention, .has_init = true, .work_size = cpu_attention_work, .supported = cpu_attention_supported,
};

/* ---- mask helpers (also for op_mul_mat_masked's packed path) ------------------------------- */

/* Whether any of m[0..n) is not -inf; compares the bits (-inf has one
 * pattern), 16 at a time without a branch, so that the compiler vectorizes. */
static bool cpu_mask_open(const float *m, int n) {
    const uint32_t *bits = (const uint32_t *)m, neg_inf = 0xff800000u;
    int r = 0;
    for (; r + 16 <= n; r += 16) {
        uint32_t open = 0;
        for (int i = 0; i < 16; i++) open |= bits[r + i] ^ neg_inf;
        if (open) return true;
    }
    for (; r < n; r++) {
        if (bits[r] != neg_inf) return true;
    }
    return false;
}

void cpu_mask_columns(const struct tensor *mask, int64_t row0, int nrows, int64_t col0, int ncols, int *first,
                      int *end) {
    *first = *end = 0;
    for (int c = 0; c < ncols; c++) {
        const float *m = (const float *)((const char *)mask->data + (size_t)(col0 + c) * mask->nb[1]) + row0;
        if (!cpu_mask_open(m, nrows)) continue;
        if (*end == *first) *first = c;
        *end = c + 1;
    }
}

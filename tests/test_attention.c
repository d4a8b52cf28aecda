/*
 * op_attention (one node) against the nodes it replaces, bit for bit:
 * cont(permute(mul_mat(v, soft_max(mul_mat_masked(k, q, mask), mask, scale)))),
 * on operands laid out as the model graph lays them out (keys and values as
 * views of F16 caches, queries a permuted view), causal masks with a second
 * sequence's cells closed (every fifth cell, or whole spans of 64 cells, with
 * a token that sees no cell at all: NaNs, as b1892 gives them), grouped-query
 * heads, one query column (generation), a few (with at least as many KV heads
 * x tokens as threads, the heads of a KV head in one work item; else a head
 * an item) and many (several column blocks), head sizes that the packed
 * kernels take (32 | d) and that they do not, 1-3 threads. Shapes that do
 * not fit are refused with an error.
 */
#include "test_util.h"

#include <math.h>

#include "backend/cpu/cpu_compute.h"
#include "core/fp16.h"
#include "tensor/tensor.h"

static uint64_t g_rng = 2024;

struct case_shape {
    int64_t d, n_kv, n_tok, n_head, h_kv;
    bool spans; /* two sequences in alternate spans of 64 cells, and token 1 sees none */
};

/* Whether token t (at position n_kv - n_tok + t) sees cell j. */
static bool cell_open(const struct case_shape *cs, int64_t t, int64_t j) {
    const int64_t pos = cs->n_kv - cs->n_tok + t;
    if (!cs->spans) return j <= pos && (j % 5 != 3 || j == pos); /* every fifth cell another sequence's */
    return t != 1 && j <= pos && j / 64 % 2 == t % 2;
}

/* The same bits, or NaN both (which NaN a product passes on is not fixed). */
static bool same_or_nans(float a, float b) { return memcmp(&a, &b, sizeof a) == 0 || (isnan(a) && isnan(b)); }

static void check_case(struct cpu_threadpool *pool, const struct case_shape *cs) {
    const int64_t d = cs->d, n_kv = cs->n_kv, n_tok = cs->n_tok, n_head = cs->n_head, h_kv = cs->h_kv;
    const int64_t n_ctx = n_kv + 8; /* cache rows past n_kv: the views stride over them */
    struct tensor_ctx *ctx = tensor_ctx_new(64, (size_t)(64 << 20));
    struct tensor *k_cache = tensor_new_2d(ctx, GGML_TYPE_F16, d * h_kv, n_ctx);
    struct tensor *v_cache = tensor_new_2d(ctx, GGML_TYPE_F16, n_ctx, d * h_kv);
    struct tensor *q_rows = tensor_new_3d(ctx, GGML_TYPE_F32, d, n_head, n_tok);
    struct tensor *mask = tensor_new_2d(ctx, GGML_TYPE_F32, n_kv, n_tok);
    uint16_t *kh = k_cache->data, *vh = v_cache->data;
    for (int64_t i = 0; i < tensor_nelements(k_cache); i++) kh[i] = fp32_to_fp16(test_rand_uniform(&g_rng, -1, 1));
    for (int64_t i = 0; i < tensor_nelements(v_cache); i++) vh[i] = fp32_to_fp16(test_rand_uniform(&g_rng, -1, 1));
    for (int64_t i = 0; i < tensor_nelements(q_rows); i++) ((float *)q_rows->data)[i] = test_rand_uniform(&g_rng, -2, 2);
    for (int64_t t = 0; t < n_tok; t++) {
        for (int64_t j = 0; j < n_kv; j++) ((float *)mask->data)[t * n_kv + j] = cell_open(cs, t, j) ? 0.0f : -INFINITY;
    }
    struct tensor *k = tensor_view_3d(ctx, k_cache, d, n_kv, h_kv, k_cache->nb[1], d * sizeof(uint16_t), 0);
    struct tensor *v = tensor_view_3d(ctx, v_cache, n_kv, d, h_kv, v_cache->nb[1], d * v_cache->nb[1], 0);
    struct tensor *q = tensor_permute(ctx, q_rows, 0, 2, 1, 3);
    const float scale = 1.0f / sqrtf((float)d);

    struct tensor *kq = op_soft_max(ctx, op_mul_mat_masked(ctx, k, q, mask), mask, scale);
    struct tensor *three = op_cont(ctx, tensor_permute(ctx, op_mul_mat(ctx, v, kq), 0, 2, 1, 3));
    struct tensor *one = op_attention(ctx, k, q, v, mask, scale);
    CHECK(three != NULL && one != NULL);
    if (!three || !one) {
        tensor_ctx_free(ctx);
        return;
    }
    CHECK(tensor_same_shape(one, three));
    struct graph *g3 = graph_new(ctx, 16), *g1 = graph_new(ctx, 16);
    CHECK(graph_build_forward(g3, three) && graph_build_forward(g1, one));
    CHECK(cpu_graph_compute(pool, g3, 2, NULL, NULL));
    int bad = 0;
    for (int nt = 1; nt <= 3; nt++) {
        memset(one->data, 0xff, tensor_nbytes(one));
        CHECK(cpu_graph_compute(pool, g1, nt, NULL, NULL));
        for (int64_t i = 0; i < tensor_nelements(one); i++) {
            const float a = ((const float *)one->data)[i], b = ((const float *)three->data)[i];
            if (!same_or_nans(a, b) && bad++ < 3) {
                fprintf(stderr, "d %lld n_kv %lld n_tok %lld, %d threads, [%lld]: %.9g, three nodes %.9g\n",
                        (long long)d, (long long)n_kv, (long long)n_tok, nt, (long long)i, a, b);
            }
        }
    }
    CHECK_MSG(bad == 0, "d %lld n_kv %lld n_tok %lld heads %lld/%lld: %d outputs differ", (long long)d,
              (long long)n_kv, (long long)n_tok, (long long)n_head, (long long)h_kv, bad);
    tensor_ctx_free(ctx);
}

/* Operands that do not fit: NULL and an error, nothing built. */
static void check_refused(void) {
    struct tensor_ctx *ctx = tensor_ctx_new(16, 1 << 20);
    struct tensor *k = tensor_new_3d(ctx, GGML_TYPE_F16, 32, 40, 2);
    struct tensor *v = tensor_new_3d(ctx, GGML_TYPE_F16, 40, 32, 2);
    struct tensor *q = tensor_new_3d(ctx, GGML_TYPE_F32, 32, 5, 4);
    struct tensor *mask = tensor_new_2d(ctx, GGML_TYPE_F32, 40, 5);
    CHECK(op_attention(ctx, k, q, v, mask, 1.0f) != NULL);
    CHECK(op_attention(ctx, k, q, v, tensor_new_2d(ctx, GGML_TYPE_F32, 40, 6), 1.0f) == NULL);
    CHECK(op_attention(ctx, k, tensor_new_3d(ctx, GGML_TYPE_F32, 32, 5, 3), v, mask, 1.0f) == NULL); /* 3 % 2 */
    CHECK(op_attention(ctx, k, tensor_new_3d(ctx, GGML_TYPE_F32, 16, 5, 4), v, mask, 1.0f) == NULL);
    CHECK(op_attention(ctx, tensor_new_3d(ctx, GGML_TYPE_F32, 32, 40, 2), q, v, mask, 1.0f) == NULL);
    CHECK(op_attention(ctx, k, q, tensor_new_3d(ctx, GGML_TYPE_F16, 41, 32, 2), mask, 1.0f) == NULL);
    CHECK(op_attention(ctx, k, q, v, NULL, 1.0f) == NULL);
    tensor_ctx_free(ctx);
}

int main(void) {
    struct cpu_threadpool *pool = cpu_threadpool_new(3);
    static const struct case_shape cases[] = {
        { 64, 96, 40, 8, 2, false },     /* one column block, two key blocks */
        { 64, 1088, 300, 4, 1, false },  /* several column blocks (scores of 1088 keys) */
        { 64, 2048, 512, 4, 1, false },
        { 64, 160, 1, 8, 2, false },     /* generation: one query (grouped with 1-2 threads, not 3) */
        { 64, 1056, 1, 8, 2, false },    /* generation at depth */
        { 64, 1088, 3, 8, 2, false },    /* a few queries at depth: grouped per token */
        { 8, 1030, 2, 8, 2, false },     /* grouped on the reference kernels */
        { 128, 64, 7, 4, 4, false },     /* no grouping, fewer queries than a tile */
        { 8, 50, 20, 8, 8, false },      /* head size 8 (stories260K): the reference kernels */
        { 64, 100, 30, 2, 1, false },    /* 32 does not divide n_kv: the reference kernels */
        /* spans of another sequence's cells: closed key blocks before a
         * column's last open one, and a column with none open */
        { 64, 320, 40, 8, 2, true },
        { 64, 1088, 3, 8, 2, true },
        { 64, 1056, 1, 8, 2, true },
        { 8, 200, 20, 8, 8, true },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) check_case(pool, &cases[i]);
    check_refused();
    cpu_threadpool_free(pool);
    return test_finish("test_attention");
}

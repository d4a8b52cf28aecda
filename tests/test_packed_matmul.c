/*
 * The fast matrix products (backend/cpu/cpu_packed.h) against the reference
 * definition, bit for bit: every output of mul_mat must equal the scalar
 * vec_dot of the weight row and the activation column converted by the
 * scalar vec_dot_type quantizer (what b1892 computes). Weights are quantized
 * random floats or random quant bytes (every quant value) with finite
 * scales. Shapes cover
 * partial row groups and column tiles, one column (generation) and many
 * (prompts), 1-3 threads (and one more than the CPUs, where that is more),
 * long matrix-vector products, F16 weights with broadcast slices and strided rows,
 * products of one x one after another in a graph (which share its
 * quantization when their weights have the same type), a weight whose packed
 * copy went stale (its data pointer changed), the F16 scratch size
 * serving every shorter k, and attention's direct F16 products on both
 * sides of the short-k path's bound; and which weights a thread asks for
 * ahead of a matrix-vector product.
 * Under LLAMAC_SIMD=scalar nothing is packed and the same comparisons check
 * the reference path; ctest runs it again under LLAMAC_SIMD=avx2, so that
 * the AVX2 kernels are checked on CPUs with AVX-512 too.
 */
#include "test_util.h"
#include "quant_test_util.h"

#include "backend/cpu/cpu_compute.h"
#include "backend/cpu/cpu_packed.h"
#include "backend/cpu/cpu_packed_impl.h"
#include "core/cpu_features.h"
#include "quant/quant.h"
#include "tensor/tensor.h"

static uint64_t g_rng = 777;

/* Quantized random floats, or (random_bytes) any quant bytes with finite scales. */
static void fill_weight(struct tensor *w, bool random_bytes) {
    const int64_t k = w->ne[0], rows = tensor_nrows(w);
    if (random_bytes && type_traits_get(w->type)->is_quantized) {
        for (size_t i = 0; i < tensor_nbytes(w); i++) ((uint8_t *)w->data)[i] = (uint8_t)test_rand_u64(&g_rng);
        for (int64_t r = 0; r < rows; r++) quant_test_fix_scales(w->type, (uint8_t *)w->data + r * w->nb[1], k, &g_rng);
        return;
    }
    float *src = malloc((size_t)(k * rows) * sizeof(float));
    float *imatrix = malloc((size_t)k * sizeof(float));
    for (int64_t i = 0; i < k * rows; i++) src[i] = test_rand_uniform(&g_rng, -1.0f, 1.0f);
    for (int64_t i = 0; i < k; i++) imatrix[i] = test_rand_uniform(&g_rng, 0.5f, 1.5f);
    if (w->type == GGML_TYPE_F32) {
        memcpy(w->data, src, (size_t)(k * rows) * sizeof(float));
    } else {
        CHECK(quant_quantize_chunk(w->type, src, w->data, 0, rows, k, NULL, imatrix) > 0);
    }
    free(src);
    free(imatrix);
}

/* The reference value of out[i0, i1, i2, i3]. */
static float reference(const struct tensor *w, const struct tensor *x, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
    const struct type_traits *wt = type_traits_scalar_get(w->type);
    const struct type_traits *at = type_traits_scalar_get(wt->vec_dot_type);
    const int64_t k = w->ne[0];
    uint8_t *col = malloc((size_t)k * 4 + 64);
    const float *xc = (const float *)((const char *)x->data + i1 * x->nb[1] + i2 * x->nb[2] + i3 * x->nb[3]);
    at->from_float(xc, col, k);
    const char *row = (const char *)w->data + i0 * w->nb[1] + (i2 / (x->ne[2] / w->ne[2])) * w->nb[2] +
                      (i3 / (x->ne[3] / w->ne[3])) * w->nb[3];
    float s;
    wt->vec_dot(k, &s, row, col);
    free(col);
    return s;
}

/* Thread counts every product runs with: 1, 2, 3 and, where the machine
 * has 3 CPUs or more, one more thread than it has CPUs (matrix-vector
 * products schedule differently when threads must take turns: pk_vec_next). */
static int g_thread_counts[4] = { 1, 2, 3 }, g_n_thread_counts = 3;

/* Whether IQ2 matrix-vector products have their kernel (AVX-512 VBMI and GFNI). */
static bool iq2_vec_kernel(void) {
    return cpu_packed_iq2_available() && cpu_features_get()->avx512vbmi && cpu_features_get()->gfni;
}

/* Whether products of `type` (k elements a row) have this machine's
 * kernels: a packed type, F16 rows, IQ2 (more than one column, or one with
 * the vector kernel). */
static bool has_kernels(enum ggml_type type, int64_t k, int64_t ncols) {
    if (type == GGML_TYPE_F16) return cpu_packed_f16_available(k);
    if (type == GGML_TYPE_IQ2_XXS || type == GGML_TYPE_IQ2_XS) {
        return cpu_packed_iq2_available() && (ncols > 1 || iq2_vec_kernel());
    }
    return cpu_packed_type(type);
}

/* Products check_product saw take the fast path (cpu_fast_mul_mat_applies). */
static int g_fast_products;

static int check_product(struct cpu_threadpool *pool, struct tensor_ctx *ctx, struct tensor *w, struct tensor *x,
                         const char *what) {
    struct tensor *out = op_mul_mat(ctx, w, x);
    struct graph *g = graph_new(ctx, 8);
    CHECK(graph_build_forward(g, out));
    g_fast_products += cpu_fast_mul_mat_applies(out);
    int bad = 0;
    for (int t = 0; t < g_n_thread_counts; t++) {
        const int nt = g_thread_counts[t];
        memset(out->data, 0xff, tensor_nbytes(out));
        CHECK(cpu_graph_compute(pool, g, nt, NULL, NULL));
        for (int64_t i3 = 0; i3 < out->ne[3]; i3++)
            for (int64_t i2 = 0; i2 < out->ne[2]; i2++)
                for (int64_t i1 = 0; i1 < out->ne[1]; i1++)
                    for (int64_t i0 = 0; i0 < out->ne[0]; i0++) {
                        float got;
                        memcpy(&got, (char *)out->data + i0 * 4 + i1 * out->nb[1] + i2 * out->nb[2] + i3 * out->nb[3], 4);
                        const float want = reference(w, x, i0, i1, i2, i3);
                        if (memcmp(&got, &want, 4) != 0 && bad++ < 3) {
                            fprintf(stderr,
                                    "%s %s (%lld x %lld x %lld, %d threads) [%lld %lld %lld %lld]: %.9g, reference %.9g\n",
                                    what, type_name(w->type), (long long)w->ne[0], (long long)w->ne[1], (long long)x->ne[1],
                                    nt, (long long)i0, (long long)i1, (long long)i2, (long long)i3, got, want);
                        }
                    }
    }
    CHECK_MSG(bad == 0, "%s %s: %d outputs differ from the reference", what, type_name(w->type), bad);
    return bad;
}

static void check_type(struct cpu_threadpool *pool, enum ggml_type type) {
    static const int64_t ks[] = { 32, 96, 256, 768, 2048 };
    static const int64_t ns[] = { 1, 4, 7, 18 };
    static const int64_t ms[] = { 1, 3, 8, 13 };
    int n_checked = 0, n_packed = 0;
    const int fast_before = g_fast_products;
    for (size_t a = 0; a < sizeof ks / sizeof ks[0]; a++) {
        if (ks[a] % type_traits_get(type)->blck_size != 0) continue;
        for (size_t b = 0; b < sizeof ns / sizeof ns[0]; b++) {
            for (size_t c = 0; c < sizeof ms / sizeof ms[0]; c++) {
                struct tensor_ctx *ctx = tensor_ctx_new(16, 8 << 20);
                struct tensor *w = tensor_new_2d(ctx, type, ks[a], ns[b]);
                struct tensor *x = tensor_new_2d(ctx, GGML_TYPE_F32, ks[a], ms[c]);
                fill_weight(w, c % 2 == 1);
                for (int64_t i = 0; i < tensor_nelements(x); i++) ((float *)x->data)[i] = test_rand_uniform(&g_rng, -2, 2);
                CHECK(cpu_repack_weight(w));
                n_packed += w->extra != NULL;
                check_product(pool, ctx, w, x, "2-d");
                n_checked++;
                cpu_repack_release(w);
                tensor_ctx_free(ctx);
            }
        }
    }
    printf("  %-7s %d shapes, %d with packed weights%s, %d on the fast path\n", type_name(type), n_checked, n_packed,
           type == GGML_TYPE_F16 ? " (copied as they are)" : cpu_packed_type(type) ? "" : " (type not packed here)",
           g_fast_products - fast_before);
    /* F16 weights are copied (into huge pages) wherever their kernels run */
    if (type == GGML_TYPE_F16 && cpu_packed_f16_available(32)) CHECK(n_packed == n_checked);
    /* IQ2 products are read in place, not packed: with more than one column
     * decoded per work item, with one by the VBMI kernel where the CPU has it */
    const bool iq2 = type == GGML_TYPE_IQ2_XXS || type == GGML_TYPE_IQ2_XS;
    if (iq2 && cpu_packed_iq2_available()) {
        CHECK(g_fast_products > fast_before);
        if (iq2_vec_kernel()) CHECK(g_fast_products - fast_before == n_checked);
    }
}

/* mul_mat_id takes the packed path when every expert has it (IQ2 experts:
 * for one column only with AVX-512 VBMI and GFNI): each column the product of the expert its id
 * selects, bit for bit, one column (generation, the threads sharing the
 * rows) or several (grouped by expert into tiles: here half the experts
 * unused, the others with columns for several tiles and a partial one); an
 * id out of range fails the computation instead of reading past the experts. */
static void check_mul_mat_id(struct cpu_threadpool *pool) {
    static const enum ggml_type types[] = { GGML_TYPE_Q4_0, GGML_TYPE_Q5_K, GGML_TYPE_IQ2_XXS, GGML_TYPE_F16 };
    enum { N_AS = 4 };
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        static const int64_t col_counts[] = { 1, 5, 37 };
        for (size_t n = 0; n < sizeof col_counts / sizeof col_counts[0]; n++) {
            const int64_t ncols = col_counts[n];
            struct tensor_ctx *ctx = tensor_ctx_new(32, 16 << 20);
            struct tensor *as[N_AS];
            for (int e = 0; e < N_AS; e++) {
                as[e] = tensor_new_2d(ctx, types[i], 512, 203);
                fill_weight(as[e], e % 2 == 1);
                CHECK(cpu_repack_weight(as[e]));
            }
            struct tensor *x = tensor_new_2d(ctx, GGML_TYPE_F32, 512, ncols);
            struct tensor *ids = tensor_new_2d(ctx, GGML_TYPE_I32, 2, ncols);
            for (int64_t e = 0; e < tensor_nelements(x); e++) ((float *)x->data)[e] = test_rand_uniform(&g_rng, -2, 2);
            struct tensor *out = op_mul_mat_id(ctx, as, N_AS, ids, 1, x);
            struct graph *g = graph_new(ctx, 8);
            CHECK(graph_build_forward(g, out));
            /* the packed path wherever it runs */
            CHECK(cpu_fast_mul_mat_id_applies(out) == has_kernels(types[i], 512, ncols));
            int bad = 0;
            for (int32_t e = 0; e < N_AS; e++) {
                for (int64_t c = 0; c < ncols; c++) {
                    const int32_t sel[2] = { (e + 1) % N_AS, (int32_t)((e + c * c) % N_AS) };
                    memcpy((int32_t *)ids->data + 2 * c, sel, sizeof sel);
                }
                for (int t = 0; t < g_n_thread_counts; t++) {
                    memset(out->data, 0xff, tensor_nbytes(out));
                    CHECK(cpu_graph_compute(pool, g, g_thread_counts[t], NULL, NULL));
                    for (int64_t c = 0; c < ncols; c++) {
                        for (int64_t r = 0; r < out->ne[0]; r++) {
                            const float want = reference(as[(e + c * c) % N_AS], x, r, c, 0, 0);
                            bad += memcmp((const float *)out->data + c * out->ne[0] + r, &want, 4) != 0;
                        }
                    }
                }
            }
            CHECK_MSG(bad == 0, "mul_mat_id %s, %lld columns: %d outputs differ from the reference", type_name(types[i]),
                      (long long)ncols, bad);
            const int32_t wrong[2] = { 0, N_AS };
            memcpy((int32_t *)ids->data + 2 * (ncols - 1), wrong, sizeof wrong);
            CHECK(!cpu_graph_compute(pool, g, 2, NULL, NULL));
            for (int e = 0; e < N_AS; e++) cpu_repack_release(as[e]);
            tensor_ctx_free(ctx);
        }
    }
}

/* Matrix-vector products long enough that each thread streams its own
 * region and the tails are claimed in chunks (pk_vec_next): every row
 * computed once, with each of g_thread_counts (the last takes the
 * chunks-only schedule of more threads than CPUs). An odd row count gives
 * regions of different lengths (and Q8_0's groups, streamed two at a time
 * with AVX-512, odd ones alone). */
static void check_long_matvec(struct cpu_threadpool *pool) {
    static const enum ggml_type types[] = { GGML_TYPE_Q4_0, GGML_TYPE_Q8_0, GGML_TYPE_Q4_1, GGML_TYPE_Q5_0,
                                            GGML_TYPE_Q5_1, GGML_TYPE_Q2_K, GGML_TYPE_Q3_K, GGML_TYPE_Q4_K,
                                            GGML_TYPE_Q5_K, GGML_TYPE_IQ2_XXS, GGML_TYPE_IQ2_XS, GGML_TYPE_F16 };
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        struct tensor_ctx *ctx = tensor_ctx_new(16, 16 << 20);
        struct tensor *w = tensor_new_2d(ctx, types[i], 512, 2003);
        struct tensor *x = tensor_new_2d(ctx, GGML_TYPE_F32, 512, 1);
        fill_weight(w, false);
        for (int64_t e = 0; e < tensor_nelements(x); e++) ((float *)x->data)[e] = test_rand_uniform(&g_rng, -2, 2);
        CHECK(cpu_repack_weight(w));
        check_product(pool, ctx, w, x, "long matrix-vector");
        cpu_repack_release(w);
        tensor_ctx_free(ctx);
    }
}

/* F16 weights as attention uses them: slices broadcast over the heads, rows strided. */
static void check_f16_slices(struct cpu_threadpool *pool) {
    struct tensor_ctx *ctx = tensor_ctx_new(16, 8 << 20);
    struct tensor *base = tensor_new_4d(ctx, GGML_TYPE_F16, 96, 11, 2, 1);
    fill_weight(base, false);
    struct tensor *w = tensor_view_4d(ctx, base, 64, 11, 2, 1, base->nb[1], base->nb[2], base->nb[3], 0);
    struct tensor *x = tensor_new_4d(ctx, GGML_TYPE_F32, 64, 9, 4, 1);
    for (int64_t i = 0; i < tensor_nelements(x); i++) ((float *)x->data)[i] = test_rand_uniform(&g_rng, -2, 2);
    check_product(pool, ctx, w, x, "f16 slices, strided rows");
    tensor_ctx_free(ctx);
}

/* op_mul_mat_masked as causal attention uses it (F16 keys broadcast over
 * heads, a mask [n_kv, n_tokens] of 0 and -inf): open entries are the
 * reference's bits, masked ones the reference's or 0, and the fast path
 * skips whole blocks of them (its table of open columns per row and column
 * block is made once per product). A mask of the wrong shape is refused. */
static void check_masked(struct cpu_threadpool *pool, int64_t n_kv, int64_t n_tok) {
    struct tensor_ctx *ctx = tensor_ctx_new(16, 24 << 20);
    struct tensor *w = tensor_new_3d(ctx, GGML_TYPE_F16, 64, n_kv, 2);
    struct tensor *x = tensor_new_3d(ctx, GGML_TYPE_F32, 64, n_tok, 4);
    struct tensor *mask = tensor_new_2d(ctx, GGML_TYPE_F32, n_kv, n_tok);
    fill_weight(w, false);
    for (int64_t i = 0; i < tensor_nelements(x); i++) ((float *)x->data)[i] = test_rand_uniform(&g_rng, -2, 2);
    for (int64_t t = 0; t < n_tok; t++) {
        for (int64_t j = 0; j < n_kv; j++) {
            /* token t at position 50 + t; token 3 sees nothing, token 7 one scattered cell */
            const bool open = t == 3 ? false : t == 7 ? j == 150 : j <= 50 + t;
            ((float *)mask->data)[t * n_kv + j] = open ? 0.0f : -INFINITY;
        }
    }
    CHECK(op_mul_mat_masked(ctx, w, x, tensor_new_2d(ctx, GGML_TYPE_F32, n_kv, n_tok + 1)) == NULL);
    struct tensor *out = op_mul_mat_masked(ctx, w, x, mask);
    CHECK(out != NULL);
    if (!out) {
        tensor_ctx_free(ctx);
        return;
    }
    struct graph *g = graph_new(ctx, 8);
    CHECK(graph_build_forward(g, out));
    int bad = 0;
    long skipped = 0;
    for (int t = 0; t < g_n_thread_counts; t++) {
        const int nt = g_thread_counts[t];
        memset(out->data, 0xff, tensor_nbytes(out));
        CHECK(cpu_graph_compute(pool, g, nt, NULL, NULL));
        for (int64_t h = 0; h < x->ne[2]; h++)
            for (int64_t t = 0; t < n_tok; t++)
                for (int64_t j = 0; j < n_kv; j++) {
                    const float got = ((const float *)out->data)[(h * n_tok + t) * n_kv + j];
                    const float want = reference(w, x, j, t, h, 0);
                    const bool open = ((const float *)mask->data)[t * n_kv + j] == 0.0f;
                    if (!open && got == 0.0f && want != 0.0f) {
                        skipped++;
                    } else if (memcmp(&got, &want, 4) != 0 && bad++ < 3) {
                        fprintf(stderr, "masked f16 [%lld %lld %lld] (%s, %d threads): %.9g, reference %.9g\n",
                                (long long)j, (long long)t, (long long)h, open ? "open" : "masked", nt, got, want);
                    }
                }
    }
    CHECK_MSG(bad == 0, "masked f16: %d outputs differ from the reference", bad);
    if (cpu_fast_mul_mat_applies(out)) CHECK_MSG(skipped > 0, "masked f16: no masked block was skipped");
    printf("  masked f16, %lld keys x %lld tokens: %ld masked outputs skipped (%d thread counts)\n", (long long)n_kv,
           (long long)n_tok, skipped, g_n_thread_counts);
    tensor_ctx_free(ctx);
}

/* F16 products over activations with zero tails of every length (attention's
 * probabilities after the last visible key), incl. all-zero columns and -0
 * entries: the kernels stop early and must still give the reference's bits. */
static void check_zero_tails(struct cpu_threadpool *pool) {
    struct tensor_ctx *ctx = tensor_ctx_new(16, 8 << 20);
    struct tensor *w = tensor_new_2d(ctx, GGML_TYPE_F16, 256, 70);
    struct tensor *x = tensor_new_2d(ctx, GGML_TYPE_F32, 256, 24);
    fill_weight(w, false);
    for (int64_t c = 0; c < x->ne[1]; c++) {
        float *col = (float *)x->data + c * x->ne[0];
        for (int64_t e = 0; e < x->ne[0]; e++) col[e] = e < 11 * c ? test_rand_uniform(&g_rng, 0, 1) : 0.0f;
    }
    ((float *)x->data)[5 * 256 + 200] = -0.0f;     /* a -0 in a tail */
    ((float *)x->data)[6 * 256 + 255] = 0.5f;      /* a lone value at the very end */
    check_product(pool, ctx, w, x, "f16 zero tails");
    tensor_ctx_free(ctx);
}

/* Products of one x one after another, as Q, K, V and gate, up follow one
 * another in a model graph: a product whose predecessor's weights have the
 * same type takes the activations it left; one whose weights differ in type
 * (other records) or whose x differs must convert its own. */
static void check_shared_x(struct cpu_threadpool *pool) {
    static const enum ggml_type types[] = { GGML_TYPE_Q4_0, GGML_TYPE_Q4_0, GGML_TYPE_Q8_0, GGML_TYPE_Q8_0,
                                            GGML_TYPE_F16,  GGML_TYPE_F16,  GGML_TYPE_F16 };
    enum { N = sizeof types / sizeof types[0] };
    for (int64_t m = 1; m <= 13; m += 12) {
        struct tensor_ctx *ctx = tensor_ctx_new(64, 16 << 20);
        struct tensor *x = tensor_new_2d(ctx, GGML_TYPE_F32, 256, m), *x2 = tensor_new_2d(ctx, GGML_TYPE_F32, 256, m);
        for (int64_t i = 0; i < tensor_nelements(x); i++) ((float *)x->data)[i] = test_rand_uniform(&g_rng, -2, 2);
        for (int64_t i = 0; i < tensor_nelements(x2); i++) ((float *)x2->data)[i] = test_rand_uniform(&g_rng, -2, 2);
        struct tensor *w[N], *out[N];
        struct graph *g = graph_new(ctx, 32);
        for (int i = 0; i < N; i++) {
            w[i] = tensor_new_2d(ctx, types[i], 256, 40);
            fill_weight(w[i], i % 2 == 1);
            CHECK(cpu_repack_weight(w[i]));
            out[i] = op_mul_mat(ctx, w[i], i == N - 1 ? x2 : x); /* the last: another x */
            CHECK(graph_build_forward(g, out[i]));
        }
        CHECK(g->n_nodes == N);
        int bad = 0;
        for (int t = 0; t < g_n_thread_counts; t++) {
            const int nt = g_thread_counts[t];
            for (int i = 0; i < N; i++) memset(out[i]->data, 0xff, tensor_nbytes(out[i]));
            CHECK(cpu_graph_compute(pool, g, nt, NULL, NULL));
            for (int i = 0; i < N; i++) {
                for (int64_t c = 0; c < m; c++) {
                    for (int64_t r = 0; r < 40; r++) {
                        const float got = ((const float *)out[i]->data)[c * 40 + r];
                        const float want = reference(w[i], i == N - 1 ? x2 : x, r, c, 0, 0);
                        if (memcmp(&got, &want, sizeof got) != 0 && bad++ < 3) {
                            fprintf(stderr, "shared x: product %d (%s), %lld columns, %d threads [%lld %lld]: %.9g, reference %.9g\n",
                                    i, type_name(types[i]), (long long)m, nt, (long long)r, (long long)c, got, want);
                        }
                    }
                }
            }
        }
        CHECK_MSG(bad == 0, "shared x: %d outputs differ from the reference", bad);
        for (int i = 0; i < N; i++) cpu_repack_release(w[i]);
        tensor_ctx_free(ctx);
    }
}

/* F16 experts in a prompt: one expert with more columns than a work item
 * takes (PK_F16_COL_BLOCK), another with a few, the rest none. */
static void check_f16_experts_wide(struct cpu_threadpool *pool) {
    enum { N_AS = 3, K = 64, ROWS = 40, NCOLS = PK_F16_COL_BLOCK + 40 };
    struct tensor_ctx *ctx = tensor_ctx_new(32, 16 << 20);
    struct tensor *as[N_AS];
    for (int e = 0; e < N_AS; e++) {
        as[e] = tensor_new_2d(ctx, GGML_TYPE_F16, K, ROWS);
        fill_weight(as[e], false);
    }
    struct tensor *x = tensor_new_2d(ctx, GGML_TYPE_F32, K, NCOLS);
    struct tensor *ids = tensor_new_2d(ctx, GGML_TYPE_I32, 1, NCOLS);
    for (int64_t e = 0; e < tensor_nelements(x); e++) ((float *)x->data)[e] = test_rand_uniform(&g_rng, -2, 2);
    for (int64_t c = 0; c < NCOLS; c++) ((int32_t *)ids->data)[c] = c % 97 == 5 ? 2 : 0;
    struct tensor *out = op_mul_mat_id(ctx, as, N_AS, ids, 0, x);
    struct graph *g = graph_new(ctx, 8);
    CHECK(graph_build_forward(g, out));
    CHECK(cpu_fast_mul_mat_id_applies(out) == has_kernels(GGML_TYPE_F16, K, NCOLS));
    int bad = 0;
    for (int t = 0; t < g_n_thread_counts; t++) {
        memset(out->data, 0xff, tensor_nbytes(out));
        CHECK(cpu_graph_compute(pool, g, g_thread_counts[t], NULL, NULL));
        for (int64_t c = 0; c < NCOLS; c++) {
            for (int64_t r = 0; r < ROWS; r++) {
                const float want = reference(as[((int32_t *)ids->data)[c]], x, r, c, 0, 0);
                bad += memcmp((const float *)out->data + c * ROWS + r, &want, 4) != 0;
            }
        }
    }
    CHECK_MSG(bad == 0, "f16 experts, %d columns: %d outputs differ from the reference", NCOLS, bad);
    tensor_ctx_free(ctx);
}

/* IQ2 products decode PK_IQ2_DECODE_ROWS rows per work item: several items,
 * a partial one, column tiles with a partial one, any quant bytes. Up to
 * two tiles of columns take the matrix-vector kernel instead, in blocks of
 * 64 rows over both tiles: several blocks, a partial one, a partial tile. */
static void check_iq2_units(struct cpu_threadpool *pool) {
    static const enum ggml_type types[] = { GGML_TYPE_IQ2_XXS, GGML_TYPE_IQ2_XS };
    static const int64_t col_counts[] = { 3 * PK_COLS_IQ2 + 2, 2 * PK_COLS_IQ2 - 1 };
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        for (size_t n = 0; n < sizeof col_counts / sizeof col_counts[0]; n++) {
            struct tensor_ctx *ctx = tensor_ctx_new(16, 8 << 20);
            struct tensor *w = tensor_new_2d(ctx, types[i], 512, 2 * PK_IQ2_DECODE_ROWS + 75);
            struct tensor *x = tensor_new_2d(ctx, GGML_TYPE_F32, 512, col_counts[n]);
            fill_weight(w, true);
            for (int64_t e = 0; e < tensor_nelements(x); e++) ((float *)x->data)[e] = test_rand_uniform(&g_rng, -2, 2);
            check_product(pool, ctx, w, x, n == 0 ? "decode units" : "matrix-vector kernel, two column tiles");
            tensor_ctx_free(ctx);
        }
    }
}

/* The scratch op_attention sizes for its keys serves every shorter k too
 * (a shorter k may take more rows per item). */
static void check_f16_scratch_bound(void) {
    size_t need = 0;
    int bad = 0;
    for (int64_t k = 32; k <= 16384; k += 32) {
        need = pk_f16_scratch_floats(k) > need ? pk_f16_scratch_floats(k) : need;
        bad += cpu_packed_f16_scratch_floats(k) < need;
    }
    CHECK_MSG(bad == 0, "F16 scratch: %d sizes below a shorter k's need", bad);
}

/* A packed weight (an F16 one: copied) whose data moved (LoRA copies it)
 * must not use the stale copy. */
static void check_stale(struct cpu_threadpool *pool, enum ggml_type type) {
    if (!has_kernels(type, 64, 1)) return;
    struct tensor_ctx *ctx = tensor_ctx_new(16, 8 << 20);
    struct tensor *w = tensor_new_2d(ctx, type, 64, 8);
    struct tensor *w2 = tensor_new_2d(ctx, type, 64, 8);
    struct tensor *x = tensor_new_2d(ctx, GGML_TYPE_F32, 64, 3);
    fill_weight(w, false);
    fill_weight(w2, true);
    for (int64_t i = 0; i < tensor_nelements(x); i++) ((float *)x->data)[i] = test_rand_uniform(&g_rng, -2, 2);
    CHECK(cpu_repack_weight(w));
    CHECK(cpu_packed_current(w));
    void *orig = w->data;
    w->data = w2->data;
    CHECK(!cpu_packed_current(w));
    check_product(pool, ctx, w, x, "stale packed copy");
    CHECK(cpu_repack_weight(w));   /* packing again follows the new data */
    CHECK(cpu_packed_current(w));
    check_product(pool, ctx, w, x, "repacked");
    w->data = orig;
    cpu_repack_release(w);
    CHECK(w->extra == NULL);
    tensor_ctx_free(ctx);
}

/* cpu_packed_f16_product as op_attention calls it, at the k and column
 * counts around where the transposed short-k path gives way to the tiles
 * (k <= 192 with at least k / 16 columns), against the scalar F16 dot. */
static void check_f16_direct(void) {
    if (!cpu_packed_f16_available(64)) return;
    const struct type_traits *f16 = type_traits_scalar_get(GGML_TYPE_F16);
    static const int64_t ks[] = { 64, 128, 160, 192, 224, 256 };
    static const int64_t col_counts[] = { 1, 3, 4, 8, 11, 12, 13, 16, 64 };
    const int64_t nrows = 40;
    int bad = 0, cases = 0;
    for (size_t ki = 0; ki < sizeof ks / sizeof ks[0]; ki++) {
        const int64_t k = ks[ki];
        const size_t as = cpu_packed_f16_col_stride(k), ws = (size_t)k + 32;
        uint16_t *w = malloc((size_t)nrows * ws * sizeof(uint16_t)), *colh = malloc((size_t)k * sizeof(uint16_t));
        float *act = aligned_alloc(64, (64 * as * sizeof(float) + 63) & ~(size_t)63);
        float *scratch = aligned_alloc(64, (cpu_packed_f16_scratch_floats(k) * sizeof(float) + 63) & ~(size_t)63);
        float *dst = malloc((size_t)(64 * nrows) * sizeof(float));
        for (size_t i = 0; i < (size_t)nrows * ws; i++) w[i] = fp32_to_fp16(test_rand_uniform(&g_rng, -1, 1));
        for (size_t i = 0; i < 64 * as; i++) act[i] = fp16_round(test_rand_uniform(&g_rng, -1, 1));
        for (size_t ci = 0; ci < sizeof col_counts / sizeof col_counts[0]; ci++) {
            const int64_t nc = col_counts[ci];
            cpu_packed_f16_product(w, ws, nrows, act, as, nc, k, scratch, dst, nrows);
            for (int64_t c = 0; c < nc; c++) {
                for (int64_t e = 0; e < k; e++) colh[e] = fp32_to_fp16(act[c * as + e]);
                for (int64_t r = 0; r < nrows; r++) {
                    float want;
                    f16->vec_dot(k, &want, w + r * ws, colh);
                    bad += memcmp(&want, &dst[c * nrows + r], sizeof want) != 0;
                }
            }
            cases++;
        }
        free(w);
        free(colh);
        free(act);
        free(scratch);
        free(dst);
    }
    CHECK_MSG(bad == 0, "F16 products around the short-k bound: %d outputs differ (%d shapes)", bad, cases);
}

/* The weights each thread streams first in a matrix-vector product
 * (cpu_fast_mul_mat_first_bytes, asked for at the barriers before it): its
 * own region's start (near ith/nth of the weights: whole row groups of the
 * packed copy, F16's rows in place), most of a 1/nth share, the threads'
 * ranges apart; none for a prompt's columns or with more threads than
 * CPUs. */
static void check_first_bytes(void) {
    static const enum ggml_type types[] = { GGML_TYPE_Q4_0, GGML_TYPE_Q8_0, GGML_TYPE_Q4_K, GGML_TYPE_F16 };
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        struct tensor_ctx *ctx = tensor_ctx_new(16, 16 << 20);
        struct tensor *w = tensor_new_2d(ctx, types[i], 512, 2003);
        struct tensor *x1 = tensor_new_2d(ctx, GGML_TYPE_F32, 512, 1), *x64 = tensor_new_2d(ctx, GGML_TYPE_F32, 512, 64);
        fill_weight(w, false);
        CHECK(cpu_repack_weight(w));
        const struct tensor *vec = op_mul_mat(ctx, w, x1), *prompt = op_mul_mat(ctx, w, x64);
        const uint8_t *p, *base;
        size_t n;
        const bool f16 = w->type == GGML_TYPE_F16;
        if (!cpu_fast_mul_mat_applies(vec)) { /* LLAMAC_SIMD=scalar: nothing packed */
            CHECK(!cpu_fast_mul_mat_first_bytes(vec, 0, 1, &p, &n));
        } else {
            /* thread 0 starts at the start: of the rows in place (F16) or of the packed copy */
            CHECK(cpu_fast_mul_mat_first_bytes(vec, 0, 1, &base, &n));
            CHECK(f16 ? base == w->data : base != w->data);
            const size_t size = f16 ? tensor_nbytes(w) : cpu_repack_size(w);
            const int nth = cpu_usable_cpus() >= 2 ? 2 : 1;
            const uint8_t *prev_end = base;
            for (int ith = 0; ith < nth; ith++) {
                CHECK(cpu_fast_mul_mat_first_bytes(vec, ith, nth, &p, &n));
                const size_t share = size / (size_t)nth, start = (size_t)(p - base);
                const size_t expected = share * (size_t)ith; /* within an eighth of a share: whole units */
                CHECK_MSG(p >= prev_end && start <= expected + share / 8 && start + share / 8 >= expected,
                          "%s thread %d of %d: starts at %zu of %zu", type_name(w->type), ith, nth, start, size);
                CHECK_MSG(n >= share / 2 && n <= share && start + n <= size, "%s thread %d of %d: %zu bytes of %zu",
                          type_name(w->type), ith, nth, n, size);
                prev_end = p + n;
            }
            CHECK(!cpu_fast_mul_mat_first_bytes(vec, 0, cpu_usable_cpus() + 1, &p, &n));
        }
        CHECK(!cpu_fast_mul_mat_first_bytes(prompt, 0, 1, &p, &n));
        cpu_repack_release(w);
        tensor_ctx_free(ctx);
    }
}

int main(void) {
    unsetenv("LLAMAC_MATMUL"); /* the exact kernels (test_fast_matmul has the fast mode's) */
    const int over = cpu_usable_cpus() + 1 < 512 ? cpu_usable_cpus() + 1 : 512;
    if (over > 3) g_thread_counts[g_n_thread_counts++] = over;
    struct cpu_threadpool *pool = cpu_threadpool_new(over > 3 ? over : 3);
    static const enum ggml_type types[] = { GGML_TYPE_Q4_0, GGML_TYPE_Q4_1, GGML_TYPE_Q5_0, GGML_TYPE_Q5_1,
                                            GGML_TYPE_Q8_0, GGML_TYPE_Q2_K, GGML_TYPE_Q3_K, GGML_TYPE_Q4_K,
                                            GGML_TYPE_Q5_K, GGML_TYPE_Q6_K, GGML_TYPE_IQ2_XXS, GGML_TYPE_IQ2_XS,
                                            GGML_TYPE_F16 };
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) check_type(pool, types[i]);
    check_long_matvec(pool);
    check_iq2_units(pool);
    check_mul_mat_id(pool);
    check_f16_experts_wide(pool);
    check_f16_slices(pool);
    check_masked(pool, 200, 150); /* row blocks of pk_f16_rows(64) */
    check_masked(pool, 600, 530); /* two column blocks */
    check_masked(pool, 90, 2);    /* matrix-vector: 16-row units */
    check_zero_tails(pool);
    check_shared_x(pool);
    check_f16_scratch_bound();
    check_f16_direct();
    check_first_bytes();
    check_stale(pool, GGML_TYPE_Q4_0);
    check_stale(pool, GGML_TYPE_F16);
    cpu_threadpool_free(pool);
    return test_finish("test_packed_matmul");
}

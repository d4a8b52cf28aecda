/*
 * The fast matrix-product mode (LLAMAC_MATMUL=fast, backend/cpu/cpu_packed.h)
 * against its scalar definition, bit for bit: every output of mul_mat with
 * Q4_0, Q8_0, Q4_K or Q6_K weights must equal cpu_fast_mode_dot of the weight row
 * and the activation column quantized to Q8_0 (Q8_K) by the scalar quantizer;
 * the other packed types keep the reference's bits in this mode; mul_mat_id
 * (one column and several) gives each column its expert's product.
 * Random shapes (rows 1..40: partial 16-row groups, and with several
 * columns Q4_0's and Q8_0's groups in pairs, an odd one alone; columns
 * 1..20: partial column tiles; k from one block), 100
 * and 143 columns (the AMX kernels' from 32-96 on), a few long rows; weights
 * quantized from random floats or random quant bytes (every quant value) or
 * at the extremes (the integer sums at their bounds),
 * 1-3 threads; with AMX (the products of enough columns) or without
 * (LLAMAC_AMX=0, a second ctest entry); on AVX2 (without AVX-512 VNNI, or
 * under LLAMAC_SIMD=avx2: a third), with its own kernels for all four.
 * The mode is set here before anything reads it; without its kernels
 * (neither set, or LLAMAC_SIMD=scalar) the test is skipped.
 */
#include "test_util.h"
#include "quant_test_util.h"

#include "backend/cpu/cpu_compute.h"
#include "backend/cpu/cpu_packed.h"
#include "core/cpu_features.h"
#include "quant/quant.h"
#include "quant/quant_blocks.h"
#include "tensor/tensor.h"

static uint64_t g_rng = 4242;

/* How a test's weights and activations are made. FILL_EXTREME: every row's
 * quants all the lowest or all the highest value (bytes 0x00 or 0xFF), Q6_K
 * scales -128 or 127, and each activation column constant +-2 (quantized to
 * +-127 throughout), so the integer sums reach their bounds. */
enum fill { FILL_FLOATS, FILL_BYTES, FILL_EXTREME };

static void fill_weight(struct tensor *w, enum fill fill) {
    const int64_t k = w->ne[0], rows = w->ne[1];
    if (fill == FILL_EXTREME) {
        for (int64_t r = 0; r < rows; r++) {
            uint8_t *row = (uint8_t *)w->data + r * w->nb[1];
            memset(row, (r / 2) % 2 ? 0xFF : 0x00, w->nb[1]);
            quant_test_fix_scales(w->type, row, k, &g_rng);
            for (int64_t i = 0; w->type == GGML_TYPE_Q6_K && i < k / 256; i++) {
                block_q6_K *b = (block_q6_K *)row + i;
                for (int j = 0; j < 16; j++) b->scales[j] = (int8_t)((r + j) % 2 ? -128 : 127);
            }
        }
        return;
    }
    if (fill == FILL_BYTES) {
        for (size_t i = 0; i < tensor_nbytes(w); i++) ((uint8_t *)w->data)[i] = (uint8_t)test_rand_u64(&g_rng);
        for (int64_t r = 0; r < rows; r++) quant_test_fix_scales(w->type, (uint8_t *)w->data + r * w->nb[1], k, &g_rng);
        return;
    }
    float *src = malloc((size_t)(k * rows) * sizeof(float));
    for (int64_t i = 0; i < k * rows; i++) src[i] = test_rand_uniform(&g_rng, -1.0f, 1.0f);
    CHECK(quant_quantize_chunk(w->type, src, w->data, 0, rows, k, NULL, NULL) > 0);
    free(src);
}

/* What an output must be in the fast mode: cpu_fast_mode_dot for the
 * types it changes, the scalar reference (b1892's) for the others, whose
 * exact kernels run in this mode too. */
static float mode_dot(enum ggml_type type, int64_t k, const void *row, const void *colq) {
    if (cpu_fast_mode_type(type)) {
        return cpu_fast_mode_dot(type, k, row, colq);
    }
    float s;
    type_traits_scalar_get(type)->vec_dot(k, &s, row, colq);
    return s;
}

/* Runs w x x (fast mode) with 1-3 threads and compares every output. */
static void check_shape(struct cpu_threadpool *pool, enum ggml_type type, int64_t k, int64_t rows, int64_t cols,
                        enum fill fill) {
    struct tensor_ctx *ctx = tensor_ctx_new(16, (size_t)(k * (rows + cols) * 4 + rows * cols * 4) + (1 << 20));
    struct tensor *w = tensor_new_2d(ctx, type, k, rows);
    struct tensor *x = tensor_new_2d(ctx, GGML_TYPE_F32, k, cols);
    fill_weight(w, fill);
    for (int64_t i = 0; i < tensor_nelements(x); i++) {
        ((float *)x->data)[i] = fill == FILL_EXTREME ? (i / k % 2 ? 2.0f : -2.0f) : test_rand_uniform(&g_rng, -2, 2);
    }
    CHECK(cpu_repack_weight(w));
    CHECK(w->extra != NULL);
    struct tensor *out = op_mul_mat(ctx, w, x);
    struct graph *g = graph_new(ctx, 8);
    CHECK(graph_build_forward(g, out));

    /* the reference: columns quantized by the scalar quantizer of the type's vec_dot_type */
    const struct type_traits *at = type_traits_scalar_get(type_traits_scalar_get(type)->vec_dot_type);
    void *colq = malloc((size_t)(k / at->blck_size) * at->type_size);
    float *want = malloc((size_t)(rows * cols) * sizeof(float));
    for (int64_t c = 0; c < cols; c++) {
        at->from_float((const float *)x->data + c * k, colq, k);
        for (int64_t r = 0; r < rows; r++) {
            want[c * rows + r] = mode_dot(type, k, (const uint8_t *)w->data + r * w->nb[1], colq);
        }
    }
    int bad = 0;
    for (int nt = 1; nt <= 3; nt++) {
        memset(out->data, 0xff, tensor_nbytes(out));
        CHECK(cpu_graph_compute(pool, g, nt, NULL, NULL));
        const float *got = out->data;
        for (int64_t i = 0; i < rows * cols; i++) {
            if (memcmp(&got[i], &want[i], 4) != 0 && bad++ < 3) {
                fprintf(stderr, "%s k %lld rows %lld cols %lld, %d threads, [%lld %lld]: %.9g, reference %.9g\n",
                        type_name(type), (long long)k, (long long)rows, (long long)cols, nt, (long long)(i % rows),
                        (long long)(i / rows), got[i], want[i]);
            }
        }
    }
    CHECK_MSG(bad == 0, "%s k %lld rows %lld cols %lld: %d outputs differ", type_name(type), (long long)k,
              (long long)rows, (long long)cols, bad);
    free(want);
    free(colq);
    cpu_repack_release(w);
    tensor_ctx_free(ctx);
}

/* mul_mat_id in the fast mode (experts in its layouts; one column shares
 * the selected expert's rows among the threads, more columns are grouped
 * by expert into tiles: with 30 and 200, expert 0 has none and the others
 * several tiles, with 200 enough columns for AMX): each column the mode's
 * product with its expert. */
static void check_mul_mat_id(struct cpu_threadpool *pool, enum ggml_type type) {
    enum { N_AS = 3, K = 512, ROWS = 45 };
    static const int64_t col_counts[] = { 1, 7, 30, 200 };
    for (size_t n = 0; n < sizeof col_counts / sizeof col_counts[0]; n++) {
        const int64_t cols = col_counts[n];
        struct tensor_ctx *ctx = tensor_ctx_new(32, 8 << 20);
        struct tensor *as[N_AS];
        for (int e = 0; e < N_AS; e++) {
            as[e] = tensor_new_2d(ctx, type, K, ROWS);
            fill_weight(as[e], e % 2 ? FILL_BYTES : FILL_FLOATS);
            CHECK(cpu_repack_weight(as[e]));
        }
        struct tensor *x = tensor_new_2d(ctx, GGML_TYPE_F32, K, cols), *ids = tensor_new_2d(ctx, GGML_TYPE_I32, 1, cols);
        for (int64_t i = 0; i < tensor_nelements(x); i++) ((float *)x->data)[i] = test_rand_uniform(&g_rng, -2, 2);
        for (int64_t c = 0; c < cols; c++) ((int32_t *)ids->data)[c] = (int32_t)(cols < 30 ? (c * 2 + 1) % N_AS : 1 + c * c % 2);
        struct tensor *out = op_mul_mat_id(ctx, as, N_AS, ids, 0, x);
        struct graph *g = graph_new(ctx, 8);
        CHECK(graph_build_forward(g, out));
        CHECK(cpu_fast_mul_mat_id_applies(out));
        const struct type_traits *at = type_traits_scalar_get(type_traits_scalar_get(type)->vec_dot_type);
        void *colq = malloc((size_t)(K / at->blck_size) * at->type_size);
        int bad = 0;
        for (int nt = 1; nt <= 3; nt++) {
            memset(out->data, 0xff, tensor_nbytes(out));
            CHECK(cpu_graph_compute(pool, g, nt, NULL, NULL));
            for (int64_t c = 0; c < cols; c++) {
                const struct tensor *w = as[((int32_t *)ids->data)[c]];
                at->from_float((const float *)x->data + c * K, colq, K);
                for (int64_t r = 0; r < ROWS; r++) {
                    const float want = mode_dot(type, K, (const uint8_t *)w->data + r * w->nb[1], colq);
                    bad += memcmp((const float *)out->data + c * ROWS + r, &want, 4) != 0;
                }
            }
        }
        CHECK_MSG(bad == 0, "mul_mat_id %s, %lld columns: %d outputs differ", type_name(type), (long long)cols, bad);
        free(colq);
        for (int e = 0; e < N_AS; e++) cpu_repack_release(as[e]);
        tensor_ctx_free(ctx);
    }
}

/* The fast mode's arithmetic itself, on one block: exact integer sum, one
 * rounding of d_w d_a, one fused multiply-add (not b1892's 8 lanes). */
static void check_definition(void) {
    block_q8_0 wq, yq;
    memset(&wq, 0, sizeof wq);
    memset(&yq, 0, sizeof yq);
    for (int j = 0; j < 32; j++) {
        wq.qs[j] = (int8_t)(j % 2 ? -127 : 127);
        yq.qs[j] = (int8_t)(j < 16 ? 127 : -128);
    }
    wq.d = fp32_to_fp16(0.1f);
    yq.d = fp32_to_fp16(0.3f);
    int32_t isum = 0;
    for (int j = 0; j < 32; j++) isum += wq.qs[j] * yq.qs[j];
    const float d = fp16_to_fp32(wq.d) * fp16_to_fp32(yq.d);
    CHECK(cpu_fast_mode_dot(GGML_TYPE_Q8_0, 32, &wq, &yq) == d * (float)isum);
    block_q4_0 w4;
    w4.d = wq.d;
    for (int j = 0; j < 16; j++) w4.qs[j] = (uint8_t)(j | (15 - j) << 4);
    isum = 0;
    for (int j = 0; j < 16; j++) isum += (j - 8) * yq.qs[j] + (15 - j - 8) * yq.qs[16 + j];
    CHECK(cpu_fast_mode_dot(GGML_TYPE_Q4_0, 32, &w4, &yq) == d * (float)isum);
}

int main(void) {
    setenv("LLAMAC_MATMUL", "fast", 1);
    check_definition();
    if (!cpu_fast_matmul_active()) {
        printf("fast matrix-product mode not available here (needs AVX2 or AVX-512 VNNI, not LLAMAC_SIMD=scalar)\n");
        test_finish("test_fast_matmul");
        return 77;
    }
    /* on an AMX machine its kernels take the products of enough columns;
     * ctest runs this again with LLAMAC_AMX=0 for the AVX-512 ones */
    printf("  products of many columns on %s\n", cpu_fast_matmul_amx()                  ? "AMX tiles"
                                                 : cpu_features_get()->avx512vnni ? "AVX-512"
                                                                                  : "AVX2");
    struct cpu_threadpool *pool = cpu_threadpool_new(3);
    static const enum ggml_type types[] = { GGML_TYPE_Q4_0, GGML_TYPE_Q8_0, GGML_TYPE_Q4_K, GGML_TYPE_Q6_K };
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
        const int64_t blck = type_traits_get(types[t])->blck_size;
        int n = 0;
        /* every row count with one and with many columns, then random shapes */
        for (int64_t rows = 1; rows <= 40; rows++) {
            check_shape(pool, types[t], blck * (1 + rows % 3), rows, 1 + (rows % 2) * 19, rows % 4 == 1 ? FILL_BYTES : FILL_FLOATS);
            n++;
        }
        for (int64_t cols = 1; cols <= 20; cols++) {
            check_shape(pool, types[t], 2 * blck, 16 + cols % 5, cols, cols % 2 == 0 ? FILL_BYTES : FILL_FLOATS);
            n++;
        }
        for (int s = 0; s < 40; s++) {
            const int64_t k = blck * (1 + (int64_t)(test_rand_u64(&g_rng) % (blck == 32 ? 12 : 4)));
            const int64_t rows = 1 + (int64_t)(test_rand_u64(&g_rng) % 40);
            const int64_t cols = 1 + (int64_t)(test_rand_u64(&g_rng) % 20);
            check_shape(pool, types[t], k, rows, cols, s % 2 == 0 ? FILL_BYTES : FILL_FLOATS);
            n++;
        }
        /* enough columns for the AMX kernels (from 32 to 96 by type), partial tiles */
        check_shape(pool, types[t], 3 * blck, 37, 100, FILL_BYTES);
        check_shape(pool, types[t], 5 * blck, 16, 143, FILL_FLOATS);
        n += 2;
        /* long rows: large integer sums, many blocks */
        check_shape(pool, types[t], 2048, 37, 1, FILL_BYTES);
        check_shape(pool, types[t], blck == 32 ? 5632 : 5376, 19, 11, FILL_BYTES);
        check_shape(pool, types[t], 2048, 64, 9, FILL_FLOATS);
        /* the integer sums at their bounds */
        check_shape(pool, types[t], 2048, 37, 1, FILL_EXTREME);
        check_shape(pool, types[t], 5376, 35, 11, FILL_EXTREME);
        n += 5;
        printf("  %-5s %d shapes checked against %s\n", type_name(types[t]), n,
               cpu_fast_mode_type(types[t]) ? "cpu_fast_mode_dot" : "the reference (its exact kernels here)");
    }
    /* the types this mode leaves exact, on their kernels in a fast-mode process; and mixtures of experts */
    static const enum ggml_type exact[] = { GGML_TYPE_Q4_1, GGML_TYPE_Q5_0, GGML_TYPE_Q5_1,
                                            GGML_TYPE_Q2_K, GGML_TYPE_Q3_K, GGML_TYPE_Q5_K };
    for (size_t t = 0; t < sizeof exact / sizeof exact[0]; t++) {
        const int64_t blck = type_traits_get(exact[t])->blck_size;
        check_shape(pool, exact[t], 2 * blck, 37, 1, FILL_BYTES);
        check_shape(pool, exact[t], 4 * blck, 19, 11, FILL_FLOATS);
    }
    printf("  %zu exactly computed types checked in the fast mode\n", sizeof exact / sizeof exact[0]);
    static const enum ggml_type moe[] = { GGML_TYPE_Q4_0, GGML_TYPE_Q8_0, GGML_TYPE_Q4_K, GGML_TYPE_Q6_K, GGML_TYPE_Q5_K };
    for (size_t t = 0; t < sizeof moe / sizeof moe[0]; t++) check_mul_mat_id(pool, moe[t]);
    cpu_threadpool_free(pool);
    return test_finish("test_fast_matmul");
}

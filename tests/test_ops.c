/*
 * CPU kernels: every op against a plain reference written here, on random
 * inputs, contiguous and not (permuted, transposed, strided views), with odd
 * sizes and broadcasting. Each graph is computed with 1 and with 3 threads
 * by two persistent pools that are reused for every graph, and the two
 * results must be bit-identical.
 */
#include "test_util.h"

#include "backend/cpu/cpu_compute.h"
#include "backend/cpu/cpu_ops.h"
#include "core/cpu_features.h"
#include "core/fp16.h"
#include "core/log.h"
#include "quant/quant.h"
#include "tensor/tensor.h"

static struct cpu_threadpool *g_pool1, *g_pool3;
static uint64_t g_rng = 0x1234567;
static int g_graphs;

static void quiet_log(enum ggml_log_level level, const char *text, void *user_data) {
    (void)level, (void)text, (void)user_data;
}

static struct tensor_ctx *new_ctx(void) { return tensor_ctx_new(256, 8 << 20); }

/* ---- inputs in several memory layouts ------------------------------------------------ */

enum layout { CONT, PERMUTED, TRANSPOSED, STRIDED, N_LAYOUTS };

static void fill(struct tensor *t, float lo, float hi) {
    for (int64_t i = 0; i < tensor_nelements(t); i++) tensor_set_f32_1d(t, i, test_rand_uniform(&g_rng, lo, hi));
}

/* A tensor of logical shape ne whose memory is laid out as `layout`, filled with random values. */
static struct tensor *input(struct tensor_ctx *ctx, enum ggml_type type, const int64_t ne[4], enum layout layout,
                            float lo, float hi) {
    struct tensor *t = NULL;
    switch (layout) {
        case CONT: t = tensor_new_4d(ctx, type, ne[0], ne[1], ne[2], ne[3]); break;
        case PERMUTED: {
            /* base [ne1, ne2, ne0, ne3]: base dims 0,1,2 become dims 1,2,0 */
            struct tensor *base = tensor_new_4d(ctx, type, ne[1], ne[2], ne[0], ne[3]);
            t = tensor_permute(ctx, base, 1, 2, 0, 3);
            break;
        }
        case TRANSPOSED: t = tensor_transpose(ctx, tensor_new_4d(ctx, type, ne[1], ne[0], ne[2], ne[3])); break;
        case STRIDED: {
            struct tensor *base = tensor_new_4d(ctx, type, ne[0] + 3, ne[1], ne[2] + 1, ne[3]);
            t = tensor_view_4d(ctx, base, ne[0], ne[1], ne[2], ne[3], base->nb[1], base->nb[2], base->nb[3],
                               base->nb[0]);
            break;
        }
        default: break;
    }
    if (t) fill(t, lo, hi);
    return t;
}

static struct tensor *input_f32(struct tensor_ctx *ctx, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3,
                                enum layout layout) {
    const int64_t ne[4] = { ne0, ne1, ne2, ne3 };
    return input(ctx, GGML_TYPE_F32, ne, layout, -2.0f, 2.0f);
}

static const void *elem_ptr(const struct tensor *t, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
    return (const char *)t->data + i0 * t->nb[0] + i1 * t->nb[1] + i2 * t->nb[2] + i3 * t->nb[3];
}

/* Element (i0, i1, i2, i3) of an F32/F16/I32 tensor. */
static float at(const struct tensor *t, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
    const char *p = (const char *)t->data + i0 * t->nb[0] + i1 * t->nb[1] + i2 * t->nb[2] + i3 * t->nb[3];
    if (t->type == GGML_TYPE_F16) return fp16_to_fp32(*(const fp16_t *)p);
    if (t->type == GGML_TYPE_I32) return (float)*(const int32_t *)p;
    return *(const float *)p;
}

#define FOR_EACH(t) \
    for (int64_t i3 = 0; i3 < (t)->ne[3]; i3++) \
        for (int64_t i2 = 0; i2 < (t)->ne[2]; i2++) \
            for (int64_t i1 = 0; i1 < (t)->ne[1]; i1++) \
                for (int64_t i0 = 0; i0 < (t)->ne[0]; i0++)

/* ---- computing ------------------------------------------------------------------------ */

/* Computes out with 1 thread and again with 3; the results must be identical. */
static bool compute(struct tensor_ctx *ctx, struct tensor *out) {
    struct graph *g = graph_new(ctx, 256);
    if (!out || !g || !graph_build_forward(g, out)) return false;
    if (!cpu_graph_compute(g_pool1, g, 1, NULL, NULL)) return false;
    const size_t n = tensor_nbytes(out);
    char *first = malloc(n);
    memcpy(first, out->data, n);
    if (out->op != OP_CPY) memset(out->data, 0x7f, n);
    const bool ok = cpu_graph_compute(g_pool3, g, 3, NULL, NULL);
    CHECK_MSG(ok && memcmp(first, out->data, n) == 0, "%s: 3 threads differ from 1", tensor_op_name(out->op));
    free(first);
    g_graphs += 2;
    return ok;
}

static float max_err;
static int64_t n_bad;

static void expect_begin(void) { max_err = 0.0f, n_bad = 0; }

static void expect(float got, double want, double tol) {
    const double err = fabs((double)got - want);
    const bool same_inf = isinf(want) && (double)got == want;
    if (!(err <= tol * (1.0 + fabs(want))) && !same_inf) n_bad++;
    if (err > max_err && !same_inf) max_err = (float)err;
}

#define EXPECT_END(what) CHECK_MSG(n_bad == 0, "%s: %lld values off (max err %g)", what, (long long)n_bad, max_err)

/* ---- element-wise -------------------------------------------------------------------- */

static void test_binary(void) {
    /* (one row of 100: the threads share its elements, cpu_task_elems) */
    const int64_t shapes[][4] = { { 7, 5, 3, 2 }, { 1, 1, 1, 1 }, { 33, 4, 1, 3 }, { 100, 1, 1, 1 } };
    for (size_t s = 0; s < 4; s++) {
        const int64_t *ne = shapes[s];
        /* b broadcasts along dims 1 and 3; also a full-shape b */
        const int64_t bne[2][4] = { { ne[0], 1, ne[2], 1 }, { ne[0], ne[1], ne[2], ne[3] } };
        for (int la = 0; la < N_LAYOUTS; la++) {
            for (int bb = 0; bb < 2; bb++) {
                for (enum tensor_op op = OP_ADD; op <= OP_DIV; op++) {
                    if (op == OP_ADD1 || op == OP_ACC || op == OP_SQR || op == OP_SQRT || op == OP_LOG) continue;
                    struct tensor_ctx *ctx = new_ctx();
                    struct tensor *a = input_f32(ctx, ne[0], ne[1], ne[2], ne[3], (enum layout)la);
                    struct tensor *b = input(ctx, GGML_TYPE_F32, bne[bb], (enum layout)((la + 1) % N_LAYOUTS), 0.5f, 2.0f);
                    struct tensor *out = op == OP_ADD ? op_add(ctx, a, b) : op == OP_SUB ? op_sub(ctx, a, b)
                                       : op == OP_MUL ? op_mul(ctx, a, b) : op_div(ctx, a, b);
                    CHECK(compute(ctx, out));
                    expect_begin();
                    FOR_EACH(out) {
                        const float x = at(a, i0, i1, i2, i3);
                        const float y = at(b, i0 % b->ne[0], i1 % b->ne[1], i2 % b->ne[2], i3 % b->ne[3]);
                        const float want = op == OP_ADD ? x + y : op == OP_SUB ? x - y : op == OP_MUL ? x * y : x / y;
                        expect(at(out, i0, i1, i2, i3), want, 0.0);
                    }
                    EXPECT_END(tensor_op_name(op));
                    tensor_ctx_free(ctx);
                }
            }
        }
    }
    /* F16 + F32 -> F16, rounded once */
    struct tensor_ctx *ctx = new_ctx();
    const int64_t ne[4] = { 9, 4, 2, 1 };
    struct tensor *a = input(ctx, GGML_TYPE_F16, ne, CONT, -3.0f, 3.0f);
    struct tensor *b = input(ctx, GGML_TYPE_F32, ne, TRANSPOSED, -3.0f, 3.0f);
    struct tensor *out = op_add(ctx, a, b);
    CHECK(out && out->type == GGML_TYPE_F16 && compute(ctx, out));
    expect_begin();
    FOR_EACH(out) expect(at(out, i0, i1, i2, i3), fp16_round(at(a, i0, i1, i2, i3) + at(b, i0, i1, i2, i3)), 0.0);
    EXPECT_END("add f16");
    /* add1 */
    struct tensor *s = tensor_new_1d(ctx, GGML_TYPE_F32, 1);
    tensor_set_f32_1d(s, 0, 0.25f);
    struct tensor *c = input_f32(ctx, 5, 3, 2, 1, PERMUTED);
    out = op_add1(ctx, c, s);
    CHECK(compute(ctx, out));
    expect_begin();
    FOR_EACH(out) expect(at(out, i0, i1, i2, i3), at(c, i0, i1, i2, i3) + 0.25f, 0.0);
    EXPECT_END("add1");
    tensor_ctx_free(ctx);
}

static float ref_unary(enum tensor_unary_op op, float x) {
    const float h = fp16_round(x);
    switch (op) {
        case UNARY_ABS: return fabsf(x);
        case UNARY_SGN: return x > 0 ? 1.0f : x < 0 ? -1.0f : 0.0f;
        case UNARY_NEG: return -x;
        case UNARY_STEP: return x > 0 ? 1.0f : 0.0f;
        case UNARY_TANH: return tanhf(x);
        case UNARY_ELU: return x > 0 ? x : expf(x) - 1.0f;
        case UNARY_RELU: return x > 0 ? x : 0.0f;
        /* b1892 evaluates these at x rounded to half and rounds the result to half */
        case UNARY_GELU: return fp16_round(0.5f * h * (1.0f + tanhf(0.7978845608f * h * (1.0f + 0.044715f * h * h))));
        case UNARY_GELU_QUICK: return fp16_round(h / (1.0f + expf(-1.702f * h)));
        case UNARY_SILU: return fp16_round(h / (1.0f + expf(-h)));
        default: return NAN;
    }
}

static void test_unary(void) {
    for (int la = 0; la < N_LAYOUTS; la++) {
        for (int u = 0; u < 2 * UNARY_COUNT; u++) {
            struct tensor_ctx *ctx = new_ctx();
            /* each op on 13 x 3 x 2 x 2, then on one row of 100 (shared out by elements) */
            struct tensor *a = u < UNARY_COUNT ? input_f32(ctx, 13, 3, 2, 2, (enum layout)la)
                                               : input_f32(ctx, 100, 1, 1, 1, (enum layout)la);
            tensor_set_f32_1d(a, 0, 0.0f);
            const enum tensor_unary_op op = (enum tensor_unary_op)(u % UNARY_COUNT);
            struct tensor *out = op_unary(ctx, a, op);
            CHECK(compute(ctx, out));
            expect_begin();
            FOR_EACH(out) expect(at(out, i0, i1, i2, i3), ref_unary(op, at(a, i0, i1, i2, i3)), 1e-6);
            EXPECT_END("unary");
            tensor_ctx_free(ctx);
        }
        struct tensor_ctx *ctx = new_ctx();
        const int64_t ne[4] = { 11, 3, 2, 1 };
        struct tensor *a = input(ctx, GGML_TYPE_F32, ne, (enum layout)la, 0.1f, 4.0f);
        struct tensor *outs[5] = { op_sqr(ctx, a), op_sqrt(ctx, a), op_log(ctx, a), op_scale(ctx, a, -1.5f),
                                   op_clamp(ctx, a, 0.5f, 2.0f) };
        for (int k = 0; k < 5; k++) {
            CHECK(compute(ctx, outs[k]));
            expect_begin();
            FOR_EACH(outs[k]) {
                const float x = at(a, i0, i1, i2, i3);
                const float want = k == 0 ? x * x : k == 1 ? sqrtf(x) : k == 2 ? logf(x) : k == 3 ? x * -1.5f
                                 : fminf(fmaxf(x, 0.5f), 2.0f);
                expect(at(outs[k], i0, i1, i2, i3), want, 0.0);
            }
            EXPECT_END(tensor_op_name(outs[k]->op));
        }
        /* silu_back at the half-rounded input */
        struct tensor *g = input_f32(ctx, 11, 3, 2, 1, (enum layout)((la + 2) % N_LAYOUTS));
        struct tensor *sb = op_silu_back(ctx, a, g);
        CHECK(compute(ctx, sb));
        expect_begin();
        FOR_EACH(sb) {
            const float x = fp16_round(at(a, i0, i1, i2, i3));
            const double s = 1.0 / (1.0 + exp(-(double)x));
            expect(at(sb, i0, i1, i2, i3), at(g, i0, i1, i2, i3) * s * (1.0 + x * (1.0 - s)), 1e-5);
        }
        EXPECT_END("silu_back");
        tensor_ctx_free(ctx);
    }
}

/* ---- reductions and shapes ---------------------------------------------------------------- */

static void test_reductions(void) {
    for (int la = 0; la < N_LAYOUTS; la++) {
        struct tensor_ctx *ctx = new_ctx();
        struct tensor *a = input_f32(ctx, 17, 5, 3, 2, (enum layout)la);
        struct tensor *sum = op_sum(ctx, a), *rows = op_sum_rows(ctx, a), *mean = op_mean(ctx, a);
        CHECK(compute(ctx, sum) && compute(ctx, rows) && compute(ctx, mean));
        double total = 0.0;
        expect_begin();
        for (int64_t i3 = 0; i3 < 2; i3++)
            for (int64_t i2 = 0; i2 < 3; i2++)
                for (int64_t i1 = 0; i1 < 5; i1++) {
                    double r = 0.0;
                    for (int64_t i0 = 0; i0 < 17; i0++) r += at(a, i0, i1, i2, i3);
                    total += r;
                    expect(at(rows, 0, i1, i2, i3), r, 1e-6);
                    expect(at(mean, 0, i1, i2, i3), r / 17.0, 1e-6);
                }
        expect(at(sum, 0, 0, 0, 0), total, 1e-6);
        EXPECT_END("sum/sum_rows/mean");

        /* repeat and repeat_back are each other's adjoint */
        struct tensor *small = input_f32(ctx, 3, 2, 1, 2, (enum layout)la);
        struct tensor *big = tensor_new_4d(ctx, GGML_TYPE_F32, 6, 4, 3, 2);
        struct tensor *rep = op_repeat(ctx, small, big);
        CHECK(compute(ctx, rep));
        expect_begin();
        FOR_EACH(rep) expect(at(rep, i0, i1, i2, i3), at(small, i0 % 3, i1 % 2, 0, i3 % 2), 0.0);
        EXPECT_END("repeat");
        struct tensor *src = input_f32(ctx, 6, 4, 3, 2, (enum layout)la);
        struct tensor *back = op_repeat_back(ctx, src, small);
        CHECK(compute(ctx, back));
        expect_begin();
        FOR_EACH(back) {
            double want = 0.0;
            for (int64_t j3 = i3; j3 < 2; j3 += 2)
                for (int64_t j2 = i2; j2 < 3; j2 += 1)
                    for (int64_t j1 = i1; j1 < 4; j1 += 2)
                        for (int64_t j0 = i0; j0 < 6; j0 += 3) want += at(src, j0, j1, j2, j3);
            expect(at(back, i0, i1, i2, i3), want, 1e-6);
        }
        EXPECT_END("repeat_back");

        struct tensor *b = input_f32(ctx, 17, 5, 2, 2, (enum layout)((la + 1) % N_LAYOUTS));
        struct tensor *cat = op_concat(ctx, a, b);
        CHECK(compute(ctx, cat));
        expect_begin();
        FOR_EACH(cat) expect(at(cat, i0, i1, i2, i3), i2 < 3 ? at(a, i0, i1, i2, i3) : at(b, i0, i1, i2 - 3, i3), 0.0);
        EXPECT_END("concat");

        struct tensor *pad = op_pad(ctx, a, 2, 1, 0, 1);
        CHECK(compute(ctx, pad));
        expect_begin();
        FOR_EACH(pad) {
            const bool in = i0 < 17 && i1 < 5 && i3 < 2;
            expect(at(pad, i0, i1, i2, i3), in ? at(a, i0, i1, i2, i3) : 0.0f, 0.0);
        }
        EXPECT_END("pad");
        tensor_ctx_free(ctx);
    }
}

static void test_copies(void) {
    for (int la = 0; la < N_LAYOUTS; la++) {
        struct tensor_ctx *ctx = new_ctx();
        struct tensor *a = input_f32(ctx, 10, 6, 3, 1, (enum layout)la);
        /* cont, dup */
        struct tensor *c = op_cont(ctx, a), *d = op_dup(ctx, a);
        CHECK(compute(ctx, c) && compute(ctx, d) && tensor_is_contiguous(c));
        expect_begin();
        FOR_EACH(c) {
            expect(at(c, i0, i1, i2, i3), at(a, i0, i1, i2, i3), 0.0);
            expect(at(d, i0, i1, i2, i3), at(a, i0, i1, i2, i3), 0.0);
        }
        EXPECT_END("cont/dup");
        /* F32 -> F16 rounds to nearest even; F16 -> F32 is exact */
        struct tensor *h = tensor_new_3d(ctx, GGML_TYPE_F16, 10, 6, 3);
        struct tensor *ch = op_cpy(ctx, a, h);
        CHECK(compute(ctx, ch));
        expect_begin();
        FOR_EACH(h) expect(at(h, i0, i1, i2, i3), fp16_round(at(a, i0, i1, i2, i3)), 0.0);
        EXPECT_END("cpy f32->f16");
        struct tensor *back = tensor_new_1d(ctx, GGML_TYPE_F32, 180);
        struct tensor *cb = op_cpy(ctx, tensor_transpose(ctx, h), back);
        CHECK(compute(ctx, cb));
        expect_begin();
        /* logical order of the transposed view: element (i0, i1) of it is h[i1, i0] */
        for (int64_t i2 = 0; i2 < 3; i2++)
            for (int64_t i1 = 0; i1 < 10; i1++)
                for (int64_t i0 = 0; i0 < 6; i0++) expect(at(back, i0 + 6 * (i1 + 10 * i2), 0, 0, 0), at(h, i1, i0, i2, 0), 0.0);
        EXPECT_END("cpy f16->f32 transposed");
        tensor_ctx_free(ctx);
    }
    /* the KV-cache pattern: a transposed V written into a strided view of a cache */
    struct tensor_ctx *ctx = new_ctx();
    const int n_ctx = 16, n_embd = 6, n_tok = 3, kv_head = 5;
    struct tensor *cache = tensor_new_1d(ctx, GGML_TYPE_F16, n_ctx * n_embd);
    for (int i = 0; i < n_ctx * n_embd; i++) tensor_set_f32_1d(cache, i, -1.0f);
    struct tensor *v = input_f32(ctx, n_embd, n_tok, 1, 1, CONT);
    struct tensor *dst = tensor_view_2d(ctx, cache, n_tok, n_embd, n_ctx * sizeof(fp16_t), kv_head * sizeof(fp16_t));
    struct tensor *cp = op_cpy(ctx, tensor_transpose(ctx, v), dst);
    CHECK(compute(ctx, cp));
    expect_begin();
    for (int e = 0; e < n_embd; e++)
        for (int p = 0; p < n_ctx; p++) {
            const bool written = p >= kv_head && p < kv_head + n_tok;
            expect(tensor_get_f32_1d(cache, e * n_ctx + p), written ? fp16_round(at(v, e, p - kv_head, 0, 0)) : -1.0f, 0.0);
        }
    EXPECT_END("cpy into cache view");

    /* I32 copies keep the bits; F32 -> I32 is not a supported conversion */
    struct tensor *ia = tensor_new_2d(ctx, GGML_TYPE_I32, 3, 2), *ib = tensor_new_2d(ctx, GGML_TYPE_I32, 2, 3);
    for (int i = 0; i < 6; i++) tensor_set_f32_1d(ia, i, (float)(i * 1000003));
    CHECK(compute(ctx, op_cpy(ctx, ia, ib)));
    CHECK(tensor_get_f32_1d(ib, 5) == 5000015.0f);
    /* F32 -> Q8_0 / Q4_0 (a quantized KV cache): each row quantized with the type's
     * from_float, also from a transposed source; and back to F32 by dequantizing */
    const enum ggml_type qtypes[2] = { GGML_TYPE_Q8_0, GGML_TYPE_Q4_0 };
    for (int q = 0; q < 2; q++) {
        const struct type_traits *tt = type_traits_get(qtypes[q]);
        for (int tr = 0; tr < 2; tr++) {
            struct tensor *src = tr ? tensor_transpose(ctx, input_f32(ctx, 3, 64, 1, 1, CONT))
                                    : input_f32(ctx, 64, 3, 1, 1, CONT);
            struct tensor *qd = tensor_new_2d(ctx, qtypes[q], 64, 3);
            struct tensor *deq32 = op_cpy(ctx, op_cpy(ctx, src, qd), tensor_new_2d(ctx, GGML_TYPE_F32, 64, 3));
            CHECK(compute(ctx, deq32));
            float row[64], deq[64];
            char bytes[128];
            expect_begin();
            for (int64_t r = 0; r < 3; r++) {
                for (int64_t i = 0; i < 64; i++) row[i] = at(src, i, r, 0, 0);
                tt->from_float(row, bytes, 64);
                CHECK(memcmp(bytes, (const char *)qd->data + r * qd->nb[1], tensor_row_size(qd)) == 0);
                tt->to_float(bytes, deq, 64);
                for (int64_t i = 0; i < 64; i++) expect(at(deq32, i, r, 0, 0), deq[i], 0.0);
            }
            EXPECT_END("cpy quantized");
        }
    }

    struct tensor *bad = op_cpy(ctx, v, tensor_new_1d(ctx, GGML_TYPE_I32, n_embd * n_tok));
    CHECK(bad && !cpu_op_supported(bad));
    CHECK(!compute(ctx, bad) && strstr(error_last(), "not supported") != NULL);
    tensor_ctx_free(ctx);
}

static void test_acc_set(void) {
    struct tensor_ctx *ctx = new_ctx();
    struct tensor *a = input_f32(ctx, 8, 6, 2, 1, CONT);
    struct tensor *b = input_f32(ctx, 3, 2, 2, 1, TRANSPOSED);
    const size_t nb1 = a->nb[1], nb2 = a->nb[2], off = 2 * a->nb[1] + 3 * sizeof(float);
    struct tensor *acc = op_acc(ctx, a, b, nb1, nb2, a->nb[3], off);
    struct tensor *set = op_set(ctx, a, b, nb1, nb2, a->nb[3], off);
    CHECK(compute(ctx, acc) && compute(ctx, set));
    expect_begin();
    FOR_EACH(a) {
        const int64_t j0 = i0 - 3, j1 = i1 - 2;
        const bool in = j0 >= 0 && j0 < 3 && j1 >= 0 && j1 < 2;
        const float x = at(a, i0, i1, i2, i3), y = in ? at(b, j0, j1, i2, i3) : 0.0f;
        expect(at(acc, i0, i1, i2, i3), in ? x + y : x, 0.0);
        expect(at(set, i0, i1, i2, i3), in ? y : x, 0.0);
    }
    EXPECT_END("acc/set");
    CHECK(op_acc(ctx, a, b, nb1, nb2, a->nb[3], tensor_nbytes(a) - 4) == NULL); /* reaches past a */
    tensor_ctx_free(ctx);
}

/* ---- rows, masks, sorting ------------------------------------------------------------------- */

static void test_rows(void) {
    const enum ggml_type types[] = { GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_I32 };
    for (int t = 0; t < 3; t++) {
        for (int la = 0; la < N_LAYOUTS; la++) {
            if (types[t] == GGML_TYPE_I32 && la != CONT) continue;
            struct tensor_ctx *ctx = new_ctx();
            const int64_t ne[4] = { 7, 9, 2, 1 };
            struct tensor *a = input(ctx, types[t], ne, (enum layout)la, -50.0f, 50.0f);
            struct tensor *idx = tensor_new_2d(ctx, GGML_TYPE_I32, 5, 2);
            for (int i = 0; i < 10; i++) tensor_set_f32_1d(idx, i, (float)((i * 7 + 3) % 9));
            struct tensor *out = op_get_rows(ctx, a, idx);
            CHECK(compute(ctx, out));
            expect_begin();
            FOR_EACH(out) expect(at(out, i0, i1, i2, i3), at(a, i0, (int64_t)at(idx, i1, i2, 0, 0), i2, i3), 0.0);
            EXPECT_END("get_rows");
            tensor_set_f32_1d(idx, 4, 9.0f); /* out of range: an error, not a crash */
            struct graph *g = graph_new(ctx, 8);
            CHECK(graph_build_forward(g, out) && !cpu_graph_compute(g_pool3, g, 3, NULL, NULL));
            CHECK(strstr(error_last(), "index") != NULL);
            tensor_ctx_free(ctx);
        }
    }
    struct tensor_ctx *ctx = new_ctx();
    struct tensor *grad = input_f32(ctx, 6, 8, 1, 1, STRIDED);
    struct tensor *idx = tensor_new_1d(ctx, GGML_TYPE_I32, 8);
    for (int i = 0; i < 8; i++) tensor_set_f32_1d(idx, i, (float)((i * 3) % 5));
    struct tensor *shape = tensor_new_2d(ctx, GGML_TYPE_F32, 6, 5);
    struct tensor *back = op_get_rows_back(ctx, grad, idx, shape);
    CHECK(compute(ctx, back));
    expect_begin();
    FOR_EACH(back) {
        float want = 0.0f;
        for (int i = 0; i < 8; i++) {
            if ((i * 3) % 5 == i1) want += at(grad, i0, i, 0, 0);
        }
        expect(at(back, i0, i1, 0, 0), want, 0.0);
    }
    EXPECT_END("get_rows_back");

    struct tensor *v = input_f32(ctx, 5, 1, 3, 1, CONT);
    struct tensor *diag = op_diag(ctx, v);
    CHECK(compute(ctx, diag));
    expect_begin();
    FOR_EACH(diag) expect(at(diag, i0, i1, i2, i3), i0 == i1 ? at(v, i0, 0, i2, 0) : 0.0f, 0.0);
    EXPECT_END("diag");

    for (int la = 0; la < N_LAYOUTS; la++) {
        struct tensor *m = input_f32(ctx, 9, 4, 3, 1, (enum layout)la);
        struct tensor *inf = op_diag_mask_inf(ctx, m, 2), *zero = op_diag_mask_zero(ctx, m, 5);
        CHECK(compute(ctx, inf) && compute(ctx, zero));
        expect_begin();
        FOR_EACH(inf) {
            expect(at(inf, i0, i1, i2, i3), i0 > 2 + i1 ? -INFINITY : at(m, i0, i1, i2, i3), 0.0);
            expect(at(zero, i0, i1, i2, i3), i0 > 5 + i1 ? 0.0f : at(m, i0, i1, i2, i3), 0.0);
        }
        EXPECT_END("diag_mask");

        struct tensor *s = input_f32(ctx, 11, 3, 2, 1, (enum layout)la);
        tensor_set_f32_1d(s, 3, tensor_get_f32_1d(s, 5)); /* a tie */
        for (int order = 0; order < 2; order++) {
            struct tensor *sorted = op_argsort(ctx, s, (enum tensor_sort_order)order);
            CHECK(compute(ctx, sorted));
            bool ok = true;
            for (int64_t r = 0; r < 6; r++) {
                bool seen[11] = { false };
                for (int64_t i = 0; i < 11; i++) {
                    const int64_t k = (int64_t)at(sorted, i, r % 3, r / 3, 0);
                    ok = ok && k >= 0 && k < 11 && !seen[k];
                    if (k >= 0 && k < 11) seen[k] = true;
                    if (i > 0 && ok) {
                        const float prev = at(s, (int64_t)at(sorted, i - 1, r % 3, r / 3, 0), r % 3, r / 3, 0);
                        const float cur = at(s, k, r % 3, r / 3, 0);
                        ok = ok && (order == SORT_ASC ? prev <= cur : prev >= cur);
                    }
                }
            }
            CHECK_MSG(ok, "argsort order %d", order);
        }
        struct tensor *top = op_top_k(ctx, s, 4);
        CHECK(compute(ctx, top));
        for (int64_t r = 0; r < 6; r++) {
            float kth = at(s, (int64_t)at(top, 3, r % 3, r / 3, 0), r % 3, r / 3, 0);
            int larger = 0;
            for (int64_t i = 0; i < 11; i++) larger += at(s, i, r % 3, r / 3, 0) > kth;
            CHECK(larger <= 3);
        }
    }
    /* argsort's exchange sort puts equal keys in b1892's order */
    struct tensor *eq = tensor_new_1d(ctx, GGML_TYPE_F32, 4);
    const float vals[4] = { 1.0f, 2.0f, 1.0f, 2.0f };
    for (int i = 0; i < 4; i++) tensor_set_f32_1d(eq, i, vals[i]);
    struct tensor *eqs = op_argsort(ctx, eq, SORT_DESC);
    CHECK(compute(ctx, eqs));
    CHECK(at(eqs, 0, 0, 0, 0) == 1 && at(eqs, 1, 0, 0, 0) == 3 && at(eqs, 2, 0, 0, 0) == 2 && at(eqs, 3, 0, 0, 0) == 0);
    tensor_ctx_free(ctx);
}

/* ---- norms, softmax, rope ---------------------------------------------------------------------- */

static void test_norms(void) {
    for (int la = 0; la < N_LAYOUTS; la++) {
        struct tensor_ctx *ctx = new_ctx();
        struct tensor *a = input_f32(ctx, 31, 4, 3, 1, (enum layout)la);
        const float eps = 1e-5f;
        struct tensor *n = op_norm(ctx, a, eps), *r = op_rms_norm(ctx, a, eps);
        struct tensor *dz = input_f32(ctx, 31, 4, 3, 1, (enum layout)((la + 3) % N_LAYOUTS));
        struct tensor *rb = op_rms_norm_back(ctx, a, dz, eps);
        CHECK(compute(ctx, n) && compute(ctx, r) && compute(ctx, rb));
        expect_begin();
        for (int64_t i2 = 0; i2 < 3; i2++)
            for (int64_t i1 = 0; i1 < 4; i1++) {
                double mean = 0, var = 0, ss = 0, xdz = 0;
                for (int64_t i = 0; i < 31; i++) mean += at(a, i, i1, i2, 0) / 31.0;
                for (int64_t i = 0; i < 31; i++) {
                    const double x = at(a, i, i1, i2, 0);
                    var += (x - mean) * (x - mean) / 31.0;
                    ss += x * x / 31.0;
                    xdz += x * at(dz, i, i1, i2, 0);
                }
                for (int64_t i = 0; i < 31; i++) {
                    const double x = at(a, i, i1, i2, 0);
                    expect(at(n, i, i1, i2, 0), (x - mean) / sqrt(var + eps), 1e-5);
                    expect(at(r, i, i1, i2, 0), x / sqrt(ss + eps), 1e-5);
                    /* d/dx of x / rms(x), applied to dz */
                    const double want = (at(dz, i, i1, i2, 0) - x * xdz / (31.0 * (ss + eps))) / sqrt(ss + eps);
                    expect(at(rb, i, i1, i2, 0), want, 1e-4);
                }
            }
        EXPECT_END("norm/rms_norm/rms_norm_back");
        tensor_ctx_free(ctx);
    }
    /* rms_norm bit for bit as b1892 computes it, on enough rows that the
     * kernel takes them several at a time (and one at a time at the end) */
    struct tensor_ctx *ctx = new_ctx();
    struct tensor *a = input_f32(ctx, 517, 29, 1, 1, CONT);
    struct tensor *r = op_rms_norm(ctx, a, 1e-6f);
    CHECK(compute(ctx, r));
    int64_t differ = 0;
    for (int64_t i1 = 0; i1 < 29; i1++) {
        double sum = 0.0;
        for (int64_t i = 0; i < 517; i++) sum += (double)(at(a, i, i1, 0, 0) * at(a, i, i1, 0, 0));
        const float scale = 1.0f / sqrtf((float)(sum / 517.0) + 1e-6f);
        for (int64_t i = 0; i < 517; i++) differ += at(r, i, i1, 0, 0) != at(a, i, i1, 0, 0) * scale;
    }
    CHECK_MSG(differ == 0, "rms_norm: %lld values differ from b1892's arithmetic", (long long)differ);
    tensor_ctx_free(ctx);
}

/* Rope on contiguous F32 rows (LLaMA's queries and keys, their own loop)
 * against the same values in a permuted layout (the general one), bit for
 * bit, over many positions. */
static void test_rope_f32_rows(void) {
    struct tensor_ctx *ctx = tensor_ctx_new(16, 16 << 20);
    const int64_t heads = 32, n_tok = 256;
    struct tensor *q = input_f32(ctx, 64, heads, n_tok, 1, PERMUTED);
    struct tensor *qc = tensor_new_3d(ctx, GGML_TYPE_F32, 64, heads, n_tok);
    FOR_EACH(qc) *(float *)((char *)qc->data + i0 * qc->nb[0] + i1 * qc->nb[1] + i2 * qc->nb[2]) = at(q, i0, i1, i2, i3);
    struct tensor *pos = tensor_new_1d(ctx, GGML_TYPE_I32, n_tok);
    for (int64_t t = 0; t < n_tok; t++) tensor_set_f32_1d(pos, t, (float)(3 * t + 1));
    struct tensor *rq = op_rope(ctx, q, pos, 64, 0, 0, 0, 10000.0f, 1.0f, 0.0f, 1.0f, 32.0f, 1.0f);
    struct tensor *rqc = op_rope(ctx, qc, pos, 64, 0, 0, 0, 10000.0f, 1.0f, 0.0f, 1.0f, 32.0f, 1.0f);
    CHECK(compute(ctx, rq) && compute(ctx, rqc));
    int64_t differ = 0;
    FOR_EACH(rq) differ += at(rq, i0, i1, i2, i3) != at(rqc, i0, i1, i2, i3);
    CHECK_MSG(differ == 0, "rope: %lld contiguous values differ from the permuted layout's", (long long)differ);
    tensor_ctx_free(ctx);
}

static void test_soft_max(void) {
    const int64_t shapes[][3] = { { 37, 5, 4 }, { 1, 3, 2 }, { 64, 1, 1 } };
    for (int s = 0; s < 3; s++) {
        for (int with_mask = 0; with_mask < 2; with_mask++) {
            struct tensor_ctx *ctx = new_ctx();
            const int64_t nc = shapes[s][0], nr = shapes[s][1], nh = shapes[s][2];
            struct tensor *a = input_f32(ctx, nc, nr, nh, 1, CONT);
            struct tensor *mask = NULL;
            if (with_mask) {
                /* a causal mask, repeated for every head (rows r use mask row r % nr) */
                mask = tensor_new_2d(ctx, GGML_TYPE_F32, nc, nr);
                for (int64_t j = 0; j < nr; j++)
                    for (int64_t i = 0; i < nc; i++) tensor_set_f32_1d(mask, j * nc + i, i > j + (nc > nr ? nc - nr : 0) ? -INFINITY : 0.0f);
            }
            const float scale = 0.7f;
            struct tensor *out = op_soft_max(ctx, a, mask, scale);
            CHECK(compute(ctx, out));
            expect_begin();
            double worst_plain = 0.0;
            for (int64_t h = 0; h < nh; h++)
                for (int64_t j = 0; j < nr; j++) {
                    float w[64];
                    float max = -INFINITY;
                    for (int64_t i = 0; i < nc; i++) {
                        w[i] = at(a, i, j, h, 0) * scale + (mask ? at(mask, i, j, 0, 0) : 0.0f);
                        max = fmaxf(max, w[i]);
                    }
                    /* b1892: exp of the F16-rounded difference, rounded to F16, double sum */
                    double sum = 0.0, plain_sum = 0.0;
                    float e[64];
                    for (int64_t i = 0; i < nc; i++) {
                        e[i] = w[i] == -INFINITY ? 0.0f : fp16_round(expf(fp16_round(w[i] - max)));
                        sum += e[i];
                        plain_sum += exp((double)w[i] - max);
                    }
                    for (int64_t i = 0; i < nc; i++) {
                        const float got = at(out, i, j, h, 0);
                        expect(got, e[i] * (float)(1.0 / sum), 0.0);
                        worst_plain = fmax(worst_plain, fabs(got - exp((double)w[i] - max) / plain_sum));
                    }
                }
            EXPECT_END("soft_max");
            CHECK(worst_plain < 2e-3);
            /* soft_max_back: dx = y * (dy - dot(y, dy)) */
            struct tensor *dy = input_f32(ctx, nc, nr, nh, 1, STRIDED);
            struct tensor *dx = op_soft_max_back(ctx, dy, out);
            CHECK(compute(ctx, dx));
            expect_begin();
            for (int64_t h = 0; h < nh; h++)
                for (int64_t j = 0; j < nr; j++) {
                    double dot = 0.0;
                    for (int64_t i = 0; i < nc; i++) dot += (double)at(out, i, j, h, 0) * at(dy, i, j, h, 0);
                    for (int64_t i = 0; i < nc; i++) {
                        expect(at(dx, i, j, h, 0), at(out, i, j, h, 0) * (at(dy, i, j, h, 0) - dot), 1e-5);
                    }
                }
            EXPECT_END("soft_max_back");
            tensor_ctx_free(ctx);
        }
    }
}

/* RoPE written from the formulas: pairs (2i, 2i+1) (normal) or (i, i + n_dims/2)
 * (NeoX) rotated by theta_i = p * base^(-2i/n_dims) (scaled, YaRN-blended). */
static void ref_rope(const float *x, float *y, int64_t ne0, int n_dims, int mode, int p, float base, float fscale,
                     float ext, float attn, const float corr[2]) {
    for (int64_t i = 0; i < ne0; i++) y[i] = x[i];
    const bool neox = mode & ROPE_MODE_NEOX;
    const int64_t n_pairs = neox ? n_dims / 2 : ne0 / 2;
    for (int64_t i = 0; i < n_pairs; i++) {
        const double extrap = p * pow(base, -2.0 * i / n_dims) * (neox ? fscale : 1.0f);
        double theta = fscale * extrap, mscale = attn;
        if (ext != 0.0f) {
            const int64_t ramp_i = neox ? 0 : 2 * i;
            const double yv = (ramp_i / 2 - corr[0]) / fmax(0.001, corr[1] - corr[0]);
            const double mix = (1.0 - fmin(1.0, fmax(0.0, yv))) * ext;
            theta = theta * (1 - mix) + extrap * mix;
            mscale *= 1.0 + 0.1 * log(1.0 / fscale);
        }
        const int64_t j0 = neox ? i : 2 * i, j1 = neox ? i + n_dims / 2 : 2 * i + 1;
        const double c = cos(theta) * mscale, s = sin(theta) * mscale;
        y[j0] = (float)(x[j0] * c - x[j1] * s);
        y[j1] = (float)(x[j0] * s + x[j1] * c);
    }
}

static void test_rope(void) {
    const int modes[2] = { ROPE_MODE_NORMAL, ROPE_MODE_NEOX };
    const float fscales[2] = { 1.0f, 0.25f };
    const float exts[2] = { 0.0f, 1.0f };
    for (int m = 0; m < 2; m++)
        for (int f = 0; f < 2; f++)
            for (int e = 0; e < 2; e++)
                for (int t = 0; t < 2; t++) {
                    struct tensor_ctx *ctx = new_ctx();
                    const enum ggml_type type = t ? GGML_TYPE_F16 : GGML_TYPE_F32;
                    const int64_t ne[4] = { 12, 3, 5, 1 };
                    const int n_dims = m ? 8 : 12;
                    struct tensor *a = input(ctx, type, ne, t ? CONT : PERMUTED, -1.0f, 1.0f);
                    struct tensor *pos = tensor_new_1d(ctx, GGML_TYPE_I32, 5);
                    const int p_vals[5] = { 0, 1, 7, 100, 2047 };
                    for (int i = 0; i < 5; i++) tensor_set_f32_1d(pos, i, (float)p_vals[i]);
                    const float base = 10000.0f, attn = 1.0f;
                    struct tensor *out = op_rope(ctx, a, pos, n_dims, modes[m], 0, 512, base, fscales[f], exts[e], attn,
                                                 32.0f, 1.0f);
                    struct tensor *inv = op_rope_back(ctx, out, pos, n_dims, modes[m], 0, 512, base, fscales[f],
                                                      exts[e], attn, 32.0f, 1.0f);
                    CHECK(compute(ctx, out) && compute(ctx, inv));
                    /* YaRN correction dims for base 10000, 512 original positions */
                    float corr[2];
                    const double c0 = n_dims * log(512.0 / (32.0 * 2 * 3.14159265358979)) / (2 * log(10000.0));
                    const double c1 = n_dims * log(512.0 / (1.0 * 2 * 3.14159265358979)) / (2 * log(10000.0));
                    corr[0] = fmaxf(0.0f, floorf((float)c0));
                    corr[1] = fminf((float)(n_dims - 1), ceilf((float)c1));
                    expect_begin();
                    for (int64_t i2 = 0; i2 < 5; i2++)
                        for (int64_t i1 = 0; i1 < 3; i1++) {
                            float x[12], y[12];
                            for (int64_t i = 0; i < 12; i++) x[i] = at(a, i, i1, i2, 0);
                            ref_rope(x, y, 12, n_dims, modes[m], p_vals[i2], base, fscales[f], exts[e], attn, corr);
                            /* float theta products drift from the double reference at large p */
                            for (int64_t i = 0; i < 12; i++) expect(at(out, i, i1, i2, 0), y[i], t ? 4e-3 : 2e-3);
                        }
                    EXPECT_END("rope");
                    /* rope_back undoes rope when the rotation keeps lengths (no YaRN magnitude scaling) */
                    if (exts[e] == 0.0f) {
                        expect_begin();
                        FOR_EACH(a) expect(at(inv, i0, i1, i2, i3), at(a, i0, i1, i2, i3), t ? 4e-3 : 1e-5);
                        EXPECT_END("rope_back");
                    }
                    tensor_ctx_free(ctx);
                }
    /* the b1892 rule for normal mode: theta *= powf(base, -2/n_dims) in float, from theta = p */
    struct tensor_ctx *ctx = new_ctx();
    struct tensor *a = tensor_new_3d(ctx, GGML_TYPE_F32, 4, 1, 1);
    const float xs[4] = { 1.0f, 0.0f, 0.0f, 1.0f };
    for (int i = 0; i < 4; i++) tensor_set_f32_1d(a, i, xs[i]);
    struct tensor *pos = tensor_new_1d(ctx, GGML_TYPE_I32, 1);
    tensor_set_f32_1d(pos, 0, 3.0f);
    struct tensor *out = op_rope(ctx, a, pos, 4, 0, 0, 0, 10000.0f, 1.0f, 0.0f, 1.0f, 32.0f, 1.0f);
    CHECK(compute(ctx, out));
    const float theta1 = 3.0f * powf(10000.0f, -2.0f / 4.0f);
    CHECK(tensor_get_f32_1d(out, 0) == cosf(3.0f) && tensor_get_f32_1d(out, 1) == sinf(3.0f));
    CHECK(tensor_get_f32_1d(out, 2) == -sinf(theta1) && tensor_get_f32_1d(out, 3) == cosf(theta1));
    tensor_ctx_free(ctx);
}

static void test_alibi(void) {
    struct tensor_ctx *ctx = new_ctx();
    struct tensor *a = input_f32(ctx, 6, 3, 5, 1, PERMUTED);
    struct tensor *out = op_alibi(ctx, a, 0, 5, 8.0f);
    CHECK(compute(ctx, out));
    expect_begin();
    FOR_EACH(out) {
        /* slopes 2^(-8 k / 4) for the first 4 heads, then the odd powers of 2^(-4/4) */
        const double m = i2 < 4 ? pow(2.0, -8.0 * (i2 + 1) / 4.0) : pow(pow(2.0, -4.0 / 4.0), 2 * (i2 - 4) + 1);
        expect(at(out, i0, i1, i2, i3), at(a, i0, i1, i2, i3) + i0 * m, 1e-6);
    }
    EXPECT_END("alibi");
    tensor_ctx_free(ctx);
}

static void test_cross_entropy(void) {
    struct tensor_ctx *ctx = new_ctx();
    struct tensor *logits = input_f32(ctx, 10, 6, 1, 1, STRIDED);
    struct tensor *targets = tensor_new_2d(ctx, GGML_TYPE_F32, 10, 6);
    for (int64_t r = 0; r < 6; r++)
        for (int64_t i = 0; i < 10; i++) tensor_set_f32_1d(targets, r * 10 + i, i == (r * 3) % 10 ? 1.0f : 0.0f);
    struct tensor *loss = op_cross_entropy_loss(ctx, logits, targets);
    struct tensor *d = tensor_new_1d(ctx, GGML_TYPE_F32, 1);
    tensor_set_f32_1d(d, 0, 2.0f);
    struct tensor *grad = op_cross_entropy_loss_back(ctx, logits, targets, d);
    CHECK(compute(ctx, loss) && compute(ctx, grad));
    double want = 0.0;
    expect_begin();
    for (int64_t r = 0; r < 6; r++) {
        double max = -INFINITY, sum = 0.0;
        for (int64_t i = 0; i < 10; i++) max = fmax(max, at(logits, i, r, 0, 0));
        for (int64_t i = 0; i < 10; i++) sum += exp(at(logits, i, r, 0, 0) - max);
        for (int64_t i = 0; i < 10; i++) {
            const double p = exp(at(logits, i, r, 0, 0) - max) / sum;
            want -= at(targets, i, r, 0, 0) * log(p) / 6.0;
            expect(at(grad, i, r, 0, 0), (p - at(targets, i, r, 0, 0)) * 2.0 / 6.0, 1e-5);
        }
    }
    expect(at(loss, 0, 0, 0, 0), want, 1e-5);
    EXPECT_END("cross_entropy_loss");
    tensor_ctx_free(ctx);
}

/* ---- matrix products ------------------------------------------------------------------------- */

/* Quantizes w (F32, contiguous) into a new tensor of `type` (IQ2 with a flat importance matrix). */
static struct tensor *quantize_copy(struct tensor_ctx *ctx, const struct tensor *w, enum ggml_type type) {
    struct tensor *q = tensor_new_4d(ctx, type, w->ne[0], w->ne[1], w->ne[2], w->ne[3]);
    float imatrix[1024];
    for (int i = 0; i < 1024; i++) imatrix[i] = 1.0f;
    const size_t n = quant_quantize_chunk(type, w->data, q->data, 0, tensor_nrows(w), w->ne[0], NULL,
                                          quant_requires_imatrix(type) ? imatrix : NULL);
    CHECK_MSG(n == tensor_nbytes(q), "quantizing to %s: %s", type_name(type), error_last());
    return q;
}

static void test_mul_mat_f32_f16(void) {
    /* (k, n, m, b2, b3) with broadcast of the weight over dims 2 and 3 (GQA) */
    const int64_t cases[][6] = { { 16, 7, 5, 2, 1, 1 }, { 33, 9, 1, 4, 3, 2 }, { 64, 3, 11, 1, 1, 1 } };
    for (int c = 0; c < 3; c++) {
        const int64_t k = cases[c][0], n = cases[c][1], m = cases[c][2];
        const int64_t w2 = cases[c][4], w3 = cases[c][5], b2 = cases[c][3] * w2, b3 = w3;
        for (int wt = 0; wt < 2; wt++) {
            for (int lb = 0; lb < N_LAYOUTS; lb++) {
                if (lb == PERMUTED || lb == TRANSPOSED) continue; /* rows of src1 must be packed */
                struct tensor_ctx *ctx = new_ctx();
                const int64_t wne[4] = { k, n, w2, w3 };
                struct tensor *w = input(ctx, wt ? GGML_TYPE_F16 : GGML_TYPE_F32, wne, lb == STRIDED ? STRIDED : CONT,
                                         -1.0f, 1.0f);
                /* src1 permuted in dims 1 and 2, as the attention's q is */
                struct tensor *xb = input_f32(ctx, k, b2, m, b3, CONT);
                struct tensor *x = lb == STRIDED ? tensor_permute(ctx, xb, 0, 2, 1, 3) : input_f32(ctx, k, m, b2, b3, CONT);
                struct tensor *out = op_mul_mat(ctx, w, x);
                CHECK(compute(ctx, out));
                expect_begin();
                FOR_EACH(out) {
                    const int64_t j2 = i2 / (b2 / w2), j3 = i3 / (b3 / w3);
                    double sum = 0.0;
                    for (int64_t i = 0; i < k; i++) {
                        const float xv = at(x, i, i1, i2, i3);
                        /* F16 weights: b1892 rounds the activations to F16 first */
                        sum += (double)at(w, i, i0, j2, j3) * (wt ? fp16_round(xv) : xv);
                    }
                    expect(at(out, i0, i1, i2, i3), sum, 1e-6);
                }
                EXPECT_END(wt ? "mul_mat f16" : "mul_mat f32");
                tensor_ctx_free(ctx);
            }
        }
    }
    /* the attention pattern: K from an F16 cache view, V transposed in the cache */
    struct tensor_ctx *ctx = new_ctx();
    const int64_t hd = 8, n_kv = 6, n_head = 4, n_head_kv = 2, n_tok = 3, n_ctx = 10;
    struct tensor *kc = tensor_new_1d(ctx, GGML_TYPE_F16, hd * n_head_kv * n_ctx);
    fill(kc, -1.0f, 1.0f);
    struct tensor *k = tensor_view_3d(ctx, kc, hd, n_kv, n_head_kv, hd * n_head_kv * 2, hd * 2, 0);
    struct tensor *q = tensor_permute(ctx, input_f32(ctx, hd, n_head, n_tok, 1, CONT), 0, 2, 1, 3);
    struct tensor *kq = op_soft_max(ctx, op_mul_mat(ctx, k, q), NULL, 0.35f);
    struct tensor *vc = tensor_new_1d(ctx, GGML_TYPE_F16, hd * n_head_kv * n_ctx);
    fill(vc, -1.0f, 1.0f);
    struct tensor *v = tensor_view_3d(ctx, vc, n_kv, hd, n_head_kv, n_ctx * 2, n_ctx * hd * 2, 0);
    struct tensor *kqv = op_mul_mat(ctx, v, kq);
    CHECK(compute(ctx, kqv));
    expect_begin();
    FOR_EACH(kqv) {
        double sum = 0.0;
        for (int64_t j = 0; j < n_kv; j++) sum += (double)at(v, j, i0, i2 / 2, 0) * fp16_round(at(kq, j, i1, i2, 0));
        expect(at(kqv, i0, i1, i2, i3), sum, 1e-6);
    }
    EXPECT_END("attention kq/kqv");
    tensor_ctx_free(ctx);
}

static void test_mul_mat_quantized(void) {
    int n_types = 0;
    for (int t = 0; t < GGML_TYPE_COUNT; t++) {
        const struct type_traits *tt = type_traits_get((enum ggml_type)t);
        if (!tt || !tt->is_quantized || t == GGML_TYPE_Q8_K || t == GGML_TYPE_Q8_1) continue;
        struct tensor_ctx *ctx = new_ctx();
        const int64_t k = 2 * tt->blck_size, n = 5, m = 3;
        struct tensor *wf = input_f32(ctx, k, n, 2, 1, CONT);
        struct tensor *x = input_f32(ctx, k, m, 4, 1, CONT);
        if (!tt->vec_dot) {
            /* never a matmul weight: the CPU backend must refuse it cleanly */
            struct tensor *w = tensor_new_4d(ctx, (enum ggml_type)t, k, n, 2, 1);
            struct tensor *out = op_mul_mat(ctx, w, x);
            CHECK(out && !cpu_op_supported(out));
            tensor_ctx_free(ctx);
            continue;
        }
        n_types++;
        struct tensor *w = quantize_copy(ctx, wf, (enum ggml_type)t);
        struct tensor *out = op_mul_mat(ctx, w, x);
        struct tensor *rows = op_get_rows(ctx, w, tensor_new_3d(ctx, GGML_TYPE_I32, 2, 2, 1));
        for (int i = 0; i < 4; i++) tensor_set_f32_1d(rows->src[1], i, (float)(4 - i));
        CHECK(compute(ctx, out) && compute(ctx, rows));
        /* each value is vec_dot(weight row, column quantized to the vec_dot type) */
        const struct type_traits *vt = type_traits_get(tt->vec_dot_type);
        char xq[4096];
        float deq[1024];
        expect_begin();
        int64_t far = 0;
        FOR_EACH(out) {
            const char *wrow = (const char *)w->data + i0 * w->nb[1] + (i2 / 2) * w->nb[2];
            vt->from_float((const float *)elem_ptr(x, 0, i1, i2, i3), xq, k);
            float s;
            tt->vec_dot(k, &s, wrow, xq);
            expect(at(out, i0, i1, i2, i3), s, 0.0);
            /* and close to the dequantized weights times the unrounded activations */
            tt->to_float(wrow, deq, k);
            double exact = 0.0, mag = 0.0;
            for (int64_t i = 0; i < k; i++) {
                exact += (double)deq[i] * at(x, i, i1, i2, i3);
                mag += fabs((double)deq[i] * at(x, i, i1, i2, i3));
            }
            far += fabs(at(out, i0, i1, i2, i3) - exact) > 0.02 * mag;
        }
        EXPECT_END(tt->name);
        CHECK_MSG(far == 0, "%s: %lld products far from the dequantized ones", tt->name, (long long)far);
        expect_begin();
        FOR_EACH(rows) {
            tt->to_float((const char *)w->data + (4 - (i1 + 2 * i2)) * w->nb[1] + i2 * w->nb[2], deq, k);
            expect(at(rows, i0, i1, i2, i3), deq[i0], 0.0);
        }
        EXPECT_END("get_rows quantized");
        tensor_ctx_free(ctx);
    }
    printf("quantized mul_mat checked for %d types\n", n_types);
}

/* The chunk grid of matrix products: every output exactly once, row blocks
 * in whole multiples of the alignment asked for, weight blocks within the
 * L2 budget, and enough chunks for the threads to balance. */
static void test_chunks_plan(void) {
    const size_t budget = cpu_l2_cache_bytes() / 4;
    /* (rows, row bytes, row alignment, columns, column bytes, threads) */
    const int64_t cases[][6] = {
        { 5632, 1152, 16, 1, 2176, 2 },     /* TinyLlama ffn_gate Q4_0, one token */
        { 256, 1152, 16, 1, 2176, 2 },      /* attn_k: small, cut for balance */
        { 5632, 4096, 16, 512, 4096, 3 },   /* F16 prompt batch */
        { 32000, 1680, 16, 1, 2176, 1 },    /* output Q6_K, one thread */
        { 64, 256, 16, 32, 256, 2 },        /* attention kq: 64 cells x 32 heads */
        { 7, 100, 16, 3, 100, 4 },          /* tiny */
        { 100, 100, 16, 1, 100, 8 },
        { 2048, 2176, 32, 43, 30720, 2 },   /* Q8_0 prompt in pairs of 16-row groups */
        { 2048, 3168, 32, 43, 30720, 2 },   /* Q4_0 ffn_down, the same */
        { 100, 100, 32, 5, 100, 3 },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const int64_t nr0 = cases[i][0], align = cases[i][2], nr1 = cases[i][3];
        const int nth = (int)cases[i][5];
        const struct cpu_chunks ch = cpu_chunks_plan(nr0, (size_t)cases[i][1], align, nr1, (size_t)cases[i][4], nth);
        const int64_t n = cpu_chunks_count(&ch);
        unsigned char *seen = calloc((size_t)(nr0 * nr1), 1);
        bool aligned = true;
        for (int64_t k = 0; k < n; k++) {
            int64_t r0, r1, c0, c1;
            cpu_chunks_range(&ch, k, &r0, &r1, &c0, &c1);
            aligned &= r0 % align == 0 && (r1 == nr0 || (r1 - r0) % align == 0);
            for (int64_t r = r0; r < r1; r++)
                for (int64_t c = c0; c < c1; c++) seen[r * nr1 + c]++;
        }
        int64_t wrong = 0;
        for (int64_t j = 0; j < nr0 * nr1; j++) wrong += seen[j] != 1;
        free(seen);
        CHECK_MSG(wrong == 0 && aligned, "case %zu: %lld outputs not covered exactly once, aligned %d", i,
                  (long long)wrong, aligned);
        CHECK_MSG(ch.rows <= align || (size_t)ch.rows * (size_t)cases[i][1] <= budget,
                  "case %zu: %lld rows of %lld bytes exceed the L2 budget", i, (long long)ch.rows, (long long)cases[i][1]);
        const int64_t possible = ((nr0 + align - 1) / align) * nr1;
        const int64_t want = nth > 1 ? (int64_t)nth * CPU_CHUNKS_PER_THREAD : 1;
        CHECK_MSG(n >= (want < possible ? want : possible) / 2, "case %zu: only %lld chunks for %d threads", i,
                  (long long)n, nth);
    }
    /* one token through a 256-row weight on 2 threads: 8 blocks of 32 rows */
    const struct cpu_chunks ch = cpu_chunks_plan(256, 1152, CPU_CHUNK_ROW_ALIGN, 1, 2176, 2);
    CHECK_EQ_INT(ch.rows, 32);
    CHECK_EQ_INT(cpu_chunks_count(&ch), 8);
    const struct cpu_chunks none = cpu_chunks_plan(0, 100, CPU_CHUNK_ROW_ALIGN, 5, 100, 2);
    CHECK_EQ_INT(cpu_chunks_count(&none), 0);

    /* a product cut into many chunks in both dimensions: 1 and 3 threads agree
     * (compute() checks) and every value is right */
    struct tensor_ctx *ctx = tensor_ctx_new(16, 8 << 20);
    const int64_t k = 256, n = 300, m = 40;
    struct tensor *w = input(ctx, GGML_TYPE_F16, (const int64_t[4]){ k, n, 1, 1 }, CONT, -1.0f, 1.0f);
    struct tensor *x = input_f32(ctx, k, m, 1, 1, CONT);
    struct tensor *out = op_mul_mat(ctx, w, x);
    CHECK(compute(ctx, out));
    expect_begin();
    FOR_EACH(out) {
        double sum = 0.0;
        for (int64_t i = 0; i < k; i++) sum += (double)at(w, i, i0, 0, 0) * fp16_round(at(x, i, i1, 0, 0));
        expect(at(out, i0, i1, i2, i3), sum, 1e-5);
    }
    EXPECT_END("mul_mat in many chunks");
    tensor_ctx_free(ctx);
}

static void test_mul_mat_id(void) {
    struct tensor_ctx *ctx = new_ctx();
    const int n_as = 4;
    struct tensor *as[4];
    for (int e = 0; e < n_as; e++) as[e] = input_f32(ctx, 12, 5, 1, 1, e % 2 ? STRIDED : CONT);
    struct tensor *b = input_f32(ctx, 12, 6, 1, 1, CONT);
    struct tensor *ids_base = tensor_new_2d(ctx, GGML_TYPE_I32, 4, 6);
    for (int r = 0; r < 6; r++)
        for (int j = 0; j < 4; j++) tensor_set_f32_1d(ids_base, r * 4 + j, (float)((r + j * 3) % n_as));
    /* a strided view of the ids, like top_k's */
    struct tensor *ids = tensor_view_2d(ctx, ids_base, 2, 6, ids_base->nb[1], 0);
    for (int id = 0; id < 2; id++) {
        struct tensor *out = op_mul_mat_id(ctx, as, n_as, ids, id, b);
        CHECK(compute(ctx, out));
        expect_begin();
        FOR_EACH(out) {
            const struct tensor *w = as[(int)at(ids, id, i1, 0, 0)];
            double sum = 0.0;
            for (int64_t i = 0; i < 12; i++) sum += (double)at(w, i, i0, 0, 0) * at(b, i, i1, 0, 0);
            expect(at(out, i0, i1, i2, i3), sum, 1e-6);
        }
        EXPECT_END("mul_mat_id");
    }
    tensor_set_f32_1d(ids_base, 8, 7.0f);
    struct graph *g = graph_new(ctx, 8);
    CHECK(graph_build_forward(g, op_mul_mat_id(ctx, as, n_as, ids, 0, b)));
    CHECK(!cpu_graph_compute(g_pool3, g, 2, NULL, NULL) && strstr(error_last(), "expert") != NULL);

    struct tensor *pa = input_f32(ctx, 7, 9, 2, 1, TRANSPOSED), *pb = input_f32(ctx, 5, 9, 2, 1, STRIDED);
    struct tensor *op = op_out_prod(ctx, pa, pb);
    CHECK(compute(ctx, op));
    expect_begin();
    FOR_EACH(op) {
        double sum = 0.0;
        for (int64_t j = 0; j < 9; j++) sum += (double)at(pa, i0, j, i2, 0) * at(pb, i1, j, i2, 0);
        expect(at(op, i0, i1, i2, i3), sum, 1e-5);
    }
    EXPECT_END("out_prod");
    tensor_ctx_free(ctx);
}

/* ---- in place: the graph allocator may give an element-wise op its source's memory ---- */

static void test_inplace(void) {
    for (int k = 0; k < 12; k++) {
        struct tensor_ctx *ctx = new_ctx();
        struct tensor *a = input_f32(ctx, 16, 5, 3, 1, CONT), *b = input_f32(ctx, 16, 5, 3, 1, CONT);
        struct tensor *pos = tensor_new_1d(ctx, GGML_TYPE_I32, 3);
        for (int i = 0; i < 3; i++) tensor_set_f32_1d(pos, i, (float)(i * 5));
        struct tensor *one = tensor_new_1d(ctx, GGML_TYPE_F32, 1);
        tensor_set_f32_1d(one, 0, 0.5f);
        /* the same op twice: once into its own memory, once over its source's */
        struct tensor *outs[2];
        for (int twice = 0; twice < 2; twice++) {
            struct tensor *src = op_cont(ctx, twice ? b : a); /* a copy the op may overwrite */
            struct tensor *o = NULL;
            switch (k) {
                case 0: o = op_add(ctx, src, a); break;
                case 1: o = op_mul(ctx, a, src); break;
                case 2: o = op_add1(ctx, src, one); break;
                case 3: o = op_scale(ctx, src, 3.0f); break;
                case 4: o = op_sqr(ctx, src); break;
                case 5: o = op_silu(ctx, src); break;
                case 6: o = op_diag_mask_inf(ctx, src, 3); break;
                case 7: o = op_rope(ctx, src, pos, 16, 0, 0, 0, 10000.0f, 1.0f, 0.0f, 1.0f, 32.0f, 1.0f); break;
                case 8: o = op_rope(ctx, src, pos, 8, ROPE_MODE_NEOX, 0, 0, 10000.0f, 1.0f, 0.0f, 1.0f, 32.0f, 1.0f); break;
                case 9: o = op_rms_norm(ctx, src, 1e-6f); break;
                case 10: o = op_soft_max(ctx, src, NULL, 0.5f); break;
                default: o = op_sub(ctx, src, a); break;
            }
            if (twice) o->data = src->data;
            outs[twice] = o;
        }
        memcpy(b->data, a->data, tensor_nbytes(a));
        CHECK(compute(ctx, outs[0]) && compute(ctx, outs[1]));
        CHECK_MSG(memcmp(outs[0]->data, outs[1]->data, tensor_nbytes(outs[0])) == 0, "%s in place",
                  tensor_op_name(outs[0]->op));
        tensor_ctx_free(ctx);
    }
}

/* ---- the pool ------------------------------------------------------------------------------- */

static int g_abort_calls;
static bool abort_after_two(void *data) {
    (void)data;
    return ++g_abort_calls >= 2;
}

static void test_pool(void) {
    /* many small graphs through the same pools; a larger graph grows the work memory */
    struct tensor_ctx *ctx = new_ctx();
    struct tensor *x = input_f32(ctx, 64, 8, 1, 1, CONT);
    struct tensor *w = input_f32(ctx, 64, 64, 1, 1, CONT);
    struct tensor *y = x;
    for (int i = 0; i < 6; i++) y = op_soft_max(ctx, op_mul_mat(ctx, w, y), NULL, 0.1f);
    struct graph *g = graph_new(ctx, 64);
    CHECK(graph_build_forward(g, y));
    float first[64 * 8];
    CHECK(cpu_graph_compute(g_pool3, g, 3, NULL, NULL));
    memcpy(first, y->data, sizeof first);
    bool same = true;
    for (int rep = 0; rep < 200; rep++) {
        const int nt = 1 + rep % 3;
        CHECK(cpu_graph_compute(nt == 1 ? g_pool1 : g_pool3, g, nt, NULL, NULL));
        same = same && memcmp(first, y->data, sizeof first) == 0;
    }
    CHECK(same);
    /* more threads than the pool has are clamped */
    CHECK(cpu_graph_compute(g_pool1, g, 8, NULL, NULL));
    CHECK(cpu_threadpool_size(g_pool3) == 3);

    /* abort between nodes */
    g_abort_calls = 0;
    CHECK(!cpu_graph_compute(g_pool3, g, 3, abort_after_two, NULL));
    CHECK(g_abort_calls == 2 && strstr(error_last(), "abort") != NULL);
    CHECK(cpu_graph_compute(g_pool3, g, 3, NULL, NULL));

    /* tensors without memory are refused */
    struct tensor_ctx *nodata = tensor_ctx_new(8, 0);
    struct tensor *a = tensor_new_1d(nodata, GGML_TYPE_F32, 4);
    struct graph *g2 = graph_new(nodata, 8);
    CHECK(graph_build_forward(g2, op_sqr(nodata, a)));
    CHECK(!cpu_graph_compute(g_pool1, g2, 1, NULL, NULL) && strstr(error_last(), "memory") != NULL);
    tensor_ctx_free(nodata);
    tensor_ctx_free(ctx);

    /* pools come and go */
    for (int i = 0; i < 5; i++) {
        struct cpu_threadpool *p = cpu_threadpool_new(4);
        CHECK(p != NULL);
        cpu_threadpool_free(p);
    }
    CHECK(cpu_threadpool_new(0) == NULL);
}

int main(void) {
    log_set_callback(quiet_log, NULL);
    g_pool1 = cpu_threadpool_new(1);
    g_pool3 = cpu_threadpool_new(3);
    CHECK(g_pool1 && g_pool3);
    test_binary();
    test_unary();
    test_reductions();
    test_copies();
    test_acc_set();
    test_rows();
    test_norms();
    test_soft_max();
    test_rope();
    test_rope_f32_rows();
    test_alibi();
    test_cross_entropy();
    test_mul_mat_f32_f16();
    test_mul_mat_quantized();
    test_mul_mat_id();
    test_chunks_plan();
    test_inplace();
    test_pool();
    printf("%d graph computations\n", g_graphs);
    cpu_threadpool_free(g_pool1);
    cpu_threadpool_free(g_pool3);
    return test_finish("test_ops");
}

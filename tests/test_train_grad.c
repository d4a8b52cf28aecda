/*
 * Finite-difference checks of every backward rule of src/train/autograd.c.
 *
 * Each case builds a small F32 graph f(params), reduces it to a scalar loss
 * L = sum(f * R) with fixed random R (so every element of f matters and
 * errors cannot cancel), differentiates it with autograd_build_backward and
 * computes the graph on the CPU kernels (2 threads). Every element of every
 * parameter is then perturbed by +-eps and the central difference
 * (L(x+eps) - L(x-eps)) / 2eps, computed with the same forward kernels, must
 * match the analytic gradient element by element (|num - ana| <= atol +
 * rtol |num|) and as a whole (||num - ana|| <= norm_rtol ||num||).
 *
 * Tolerances: the forward pass runs in F32, so eps is 1e-2 and the element
 * tolerance ~1e-3 for smooth ops. silu and soft_max are b1892's F16 table
 * lookups (input rounded to F16, result stored in F16, relative error
 * ~5e-4): their inputs lie on a grid of 1/64 that F16 represents exactly and
 * eps = 1/16 keeps the perturbed inputs on it, which leaves the F16 rounding
 * of the results (~5e-4 / 2eps ~ 1e-2) as the error; the norm check still
 * catches a wrong factor such as a missing scale.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu_compute.h"
#include "core/log.h"
#include "tensor/tensor.h"
#include "test_util.h"
#include "train/autograd.h"

#define GC_MAX_PARAMS 4

struct gc_tol {
    float eps;
    double atol, rtol, norm_rtol;
};

static const struct gc_tol TOL_SMOOTH = { 1e-2f, 2e-3, 1e-2, 2e-3 };
static const struct gc_tol TOL_F16_TABLE = { 1.0f / 16, 2e-2, 3e-2, 1.5e-2 };

static struct cpu_threadpool *g_pool;
static uint64_t g_rng = 0x9E3779B97F4A7C15ull;

struct gc {
    struct tensor_ctx *ctx;
    struct tensor *params[GC_MAX_PARAMS];
    int n_params;
};

static void gc_init(struct gc *c) {
    memset(c, 0, sizeof *c);
    c->ctx = tensor_ctx_new(4096, 16u << 20);
}

static struct tensor *gc_tensor(struct gc *c, int n_dims, const int64_t *ne, float lo, float hi) {
    struct tensor *t = tensor_new(c->ctx, GGML_TYPE_F32, n_dims, ne);
    for (int64_t i = 0; i < tensor_nelements(t); i++) tensor_set_f32_1d(t, i, test_rand_uniform(&g_rng, lo, hi));
    return t;
}

/* A trainable input with values uniform in [lo, hi]. */
static struct tensor *gc_param(struct gc *c, const char *name, int n_dims, const int64_t *ne, float lo, float hi) {
    struct tensor *t = gc_tensor(c, n_dims, ne, lo, hi);
    t->flags |= TENSOR_FLAG_PARAM;
    tensor_set_name(t, "%s", name);
    c->params[c->n_params++] = t;
    return t;
}

/* A trainable input on the grid k/64, |x| <= 3 (exact in F16 with its +-1/16 neighbours). */
static struct tensor *gc_param_grid(struct gc *c, const char *name, int n_dims, const int64_t *ne) {
    struct tensor *t = gc_param(c, name, n_dims, ne, 0, 0);
    for (int64_t i = 0; i < tensor_nelements(t); i++) {
        tensor_set_f32_1d(t, i, (float)((int)test_rand_uniform(&g_rng, -192, 192)) / 64.0f);
    }
    return t;
}

static struct tensor *gc_rows(struct gc *c, int n, const int32_t *rows) {
    struct tensor *t = tensor_new_1d(c->ctx, GGML_TYPE_I32, n);
    memcpy(t->data, rows, (size_t)n * sizeof *rows);
    return t;
}

static float gc_eval(struct graph *gf, struct tensor *loss) {
    CHECK(cpu_graph_compute(g_pool, gf, 2, NULL, NULL));
    return tensor_get_f32_1d(loss, 0);
}

/* Differentiates L = sum(f * R) (or f itself when it is a scalar) and compares
 * with central differences. seed_value scales the analytic gradient. */
static void gc_check_seeded(struct gc *c, const char *name, struct tensor *f, struct gc_tol tol, float seed_value) {
    CHECK_MSG(f != NULL, "%s: building the forward graph failed: %s", name, error_last());
    if (!f) {
        tensor_ctx_free(c->ctx);
        return;
    }
    struct tensor *loss = f;
    if (tensor_nelements(f) != 1) {
        const int64_t ne[4] = { f->ne[0], f->ne[1], f->ne[2], f->ne[3] };
        struct tensor *r = gc_tensor(c, 4, ne, -1.0f, 1.0f);
        loss = op_sum(c->ctx, op_mul(c->ctx, f, r));
    }
    struct tensor *seed = tensor_new_1d(c->ctx, GGML_TYPE_F32, 1);
    tensor_set_f32_1d(seed, 0, seed_value);

    struct graph *gf = graph_new(c->ctx, 1024);
    struct graph *gb = graph_new(c->ctx, 1024);
    CHECK(graph_build_forward(gf, loss));
    CHECK(graph_build_forward(gb, loss));
    const bool built = autograd_build_backward(c->ctx, gb, loss, seed);
    CHECK_MSG(built, "%s: autograd failed: %s", name, error_last());
    if (!built) {
        tensor_ctx_free(c->ctx);
        return;
    }
    CHECK(cpu_graph_compute(g_pool, gb, 2, NULL, NULL));

    double worst = 0.0;
    for (int p = 0; p < c->n_params; p++) {
        struct tensor *x = c->params[p];
        CHECK_MSG(x->grad && tensor_same_shape(x->grad, x) && tensor_is_contiguous(x->grad), "%s: gradient of %s",
                  name, x->name);
        if (!x->grad) continue;
        const int64_t n = tensor_nelements(x);
        double err2 = 0.0, num2 = 0.0;
        int bad = 0;
        for (int64_t i = 0; i < n; i++) {
            const float x0 = tensor_get_f32_1d(x, i);
            tensor_set_f32_1d(x, i, x0 + tol.eps);
            const double lp = gc_eval(gf, loss);
            tensor_set_f32_1d(x, i, x0 - tol.eps);
            const double lm = gc_eval(gf, loss);
            tensor_set_f32_1d(x, i, x0);
            const double num = (lp - lm) / (2.0 * tol.eps) * seed_value;
            const double ana = tensor_get_f32_1d(x->grad, i);
            const double err = fabs(num - ana);
            err2 += err * err;
            num2 += num * num;
            if (err > tol.atol + tol.rtol * fabs(num) && bad++ < 3) {
                fprintf(stderr, "%s: d/d%s[%lld]: numeric %.6g, analytic %.6g\n", name, x->name, (long long)i, num,
                        ana);
            }
            if (err > worst) worst = err;
        }
        CHECK_MSG(bad == 0, "%s: %d of %lld elements of d/d%s out of tolerance", name, bad, (long long)n, x->name);
        const double rel = sqrt(err2) / (sqrt(num2) > 1e-12 ? sqrt(num2) : 1e-12);
        CHECK_MSG(rel <= tol.norm_rtol, "%s: d/d%s relative error %.3g > %.3g", name, x->name, rel, tol.norm_rtol);
        CHECK_MSG(num2 > 0.0, "%s: d/d%s is zero: the case checks nothing", name, x->name);
    }
    printf("  %-28s max |num - ana| = %.2e\n", name, worst);
    tensor_ctx_free(c->ctx);
}

static void gc_check(struct gc *c, const char *name, struct tensor *f, struct gc_tol tol) {
    gc_check_seeded(c, name, f, tol, 1.0f);
}

/* ---- cases ------------------------------------------------------------------------------ */

static void test_elementwise(void) {
    struct gc c;
    const int64_t ne43[2] = { 4, 3 }, ne41[2] = { 4, 1 }, ne1[1] = { 1 };

    gc_init(&c);
    struct tensor *a = gc_param(&c, "a", 2, ne43, -1, 1), *b = gc_param(&c, "b", 2, ne43, -1, 1);
    gc_check(&c, "add", op_add(c.ctx, a, b), TOL_SMOOTH);

    gc_init(&c);
    a = gc_param(&c, "a", 2, ne43, -1, 1);
    b = gc_param(&c, "b", 2, ne41, -1, 1);
    gc_check(&c, "add (broadcast)", op_add(c.ctx, a, b), TOL_SMOOTH);

    gc_init(&c);
    a = gc_param(&c, "a", 2, ne43, -1, 1);
    b = gc_param(&c, "b", 2, ne41, -1, 1);
    gc_check(&c, "sub (broadcast)", op_sub(c.ctx, a, b), TOL_SMOOTH);

    gc_init(&c);
    a = gc_param(&c, "a", 2, ne43, -1, 1);
    b = gc_param(&c, "b", 1, ne1, -1, 1);
    gc_check(&c, "add1", op_add1(c.ctx, a, b), TOL_SMOOTH);

    gc_init(&c);
    a = gc_param(&c, "a", 2, ne43, -1, 1);
    b = gc_param(&c, "b", 2, ne41, -1, 1);
    gc_check(&c, "mul (broadcast)", op_mul(c.ctx, a, b), TOL_SMOOTH);

    gc_init(&c);
    a = gc_param(&c, "a", 2, ne43, -1, 1);
    gc_check(&c, "mul (a * a, reuse)", op_mul(c.ctx, a, a), TOL_SMOOTH);

    gc_init(&c);
    a = gc_param(&c, "a", 2, ne43, -1, 1);
    gc_check(&c, "scale", op_scale(c.ctx, a, -0.37f), TOL_SMOOTH);

    gc_init(&c);
    a = gc_param(&c, "a", 2, ne43, -1, 1);
    gc_check(&c, "sqr", op_sqr(c.ctx, a), TOL_SMOOTH);

    gc_init(&c);
    a = gc_param_grid(&c, "a", 2, ne43);
    gc_check(&c, "silu", op_silu(c.ctx, a), TOL_F16_TABLE);
}

static void test_reductions_and_shapes(void) {
    struct gc c;
    const int64_t ne43[2] = { 4, 3 }, ne312[3] = { 3, 1, 2 }, ne234[3] = { 2, 3, 4 }, ne64[2] = { 6, 4 };

    gc_init(&c);
    struct tensor *a = gc_param(&c, "a", 2, ne43, -1, 1);
    gc_check(&c, "sum", op_mul(c.ctx, op_sum(c.ctx, a), op_sum(c.ctx, a)), TOL_SMOOTH);

    gc_init(&c);
    a = gc_param(&c, "a", 2, ne43, -1, 1);
    gc_check(&c, "sum_rows", op_sqr(c.ctx, op_sum_rows(c.ctx, a)), TOL_SMOOTH);

    gc_init(&c);
    a = gc_param(&c, "a", 3, ne312, -1, 1);
    struct tensor *shape = tensor_new_3d(c.ctx, GGML_TYPE_F32, 6, 4, 2);
    gc_check(&c, "repeat", op_repeat(c.ctx, a, shape), TOL_SMOOTH);

    gc_init(&c);
    a = gc_param(&c, "a", 2, ne64, -1, 1);
    gc_check(&c, "cont (of a transpose)", op_cont(c.ctx, tensor_transpose(c.ctx, a)), TOL_SMOOTH);

    gc_init(&c);
    a = gc_param(&c, "a", 2, ne64, -1, 1);
    gc_check(&c, "dup", op_dup(c.ctx, a), TOL_SMOOTH);

    gc_init(&c);
    a = gc_param(&c, "a", 2, ne64, -1, 1);
    gc_check(&c, "reshape", tensor_reshape_3d(c.ctx, op_sqr(c.ctx, a), 4, 3, 2), TOL_SMOOTH);

    gc_init(&c);
    a = gc_param(&c, "a", 2, ne64, -1, 1);
    /* rows 1..2, columns 2..5 of a: strided, offset */
    gc_check(&c, "view", op_sqr(c.ctx, tensor_view_2d(c.ctx, a, 4, 2, a->nb[1], a->nb[1] + 2 * sizeof(float))),
             TOL_SMOOTH);

    gc_init(&c);
    a = gc_param(&c, "a", 3, ne234, -1, 1);
    gc_check(&c, "permute", op_sqr(c.ctx, tensor_permute(c.ctx, a, 2, 0, 1, 3)), TOL_SMOOTH);

    gc_init(&c);
    a = gc_param(&c, "a", 3, ne234, -1, 1);
    gc_check(&c, "transpose", op_sqr(c.ctx, tensor_transpose(c.ctx, a)), TOL_SMOOTH);

    gc_init(&c);
    a = gc_param(&c, "a", 3, ne234, -1, 1);
    /* permute then reshape: the reshape's gradient is not contiguous until made so */
    gc_check(&c, "permute + cont + reshape",
             tensor_reshape_2d(c.ctx, op_cont(c.ctx, tensor_permute(c.ctx, a, 1, 0, 2, 3)), 12, 2), TOL_SMOOTH);
}

static void test_nn_ops(void) {
    struct gc c;

    gc_init(&c);
    const int64_t ne57[2] = { 5, 7 };
    struct tensor *a = gc_param(&c, "embd", 2, ne57, -1, 1);
    const int32_t rows[6] = { 3, 0, 6, 3, 3, 1 };
    gc_check(&c, "get_rows (repeated rows)", op_get_rows(c.ctx, a, gc_rows(&c, 6, rows)), TOL_SMOOTH);

    gc_init(&c);
    const int64_t ne83[2] = { 8, 3 }, ne8[1] = { 8 };
    a = gc_param(&c, "x", 2, ne83, -2, 2);
    struct tensor *w = gc_param(&c, "norm", 1, ne8, 0.5f, 1.5f);
    gc_check(&c, "rms_norm * weight", op_mul(c.ctx, op_rms_norm(c.ctx, a, 1e-5f), w), TOL_SMOOTH);

    gc_init(&c);
    const int64_t ne65[2] = { 6, 5 }, ne64[2] = { 6, 4 };
    a = gc_param(&c, "w", 2, ne65, -1, 1);
    struct tensor *b = gc_param(&c, "x", 2, ne64, -1, 1);
    gc_check(&c, "mul_mat", op_mul_mat(c.ctx, a, b), TOL_SMOOTH);

    gc_init(&c);
    const int64_t ne6542[4] = { 6, 5, 4, 2 }, ne6342[4] = { 6, 3, 4, 2 };
    a = gc_param(&c, "k", 4, ne6542, -1, 1);
    b = gc_param(&c, "q", 4, ne6342, -1, 1);
    gc_check(&c, "mul_mat (4-d batch)", op_mul_mat(c.ctx, a, b), TOL_SMOOTH);

    gc_init(&c);
    const int64_t ne6522[4] = { 6, 5, 2, 2 };
    a = gc_param(&c, "k", 4, ne6522, -1, 1);
    b = gc_param(&c, "q", 4, ne6342, -1, 1);
    gc_check(&c, "mul_mat (GQA broadcast)", op_mul_mat(c.ctx, a, b), TOL_SMOOTH);

    gc_init(&c);
    const int64_t ne643[3] = { 6, 4, 3 };
    a = gc_param(&c, "w", 2, ne65, -1, 1);
    b = gc_param(&c, "x", 3, ne643, -1, 1);
    gc_check(&c, "mul_mat (shared weight)", op_mul_mat(c.ctx, a, b), TOL_SMOOTH);

    const int32_t pos[3] = { 0, 5, 11 };
    for (int mode = 0; mode <= ROPE_MODE_NEOX; mode += ROPE_MODE_NEOX) {
        gc_init(&c);
        const int64_t ne8232[4] = { 8, 2, 3, 2 };
        a = gc_param(&c, "x", 4, ne8232, -1, 1);
        struct tensor *r = op_rope(c.ctx, a, gc_rows(&c, 3, pos), 8, mode, 0, 0, 10000.0f, 1.0f, 0.0f, 1.0f, 0.0f, 0.0f);
        gc_check(&c, mode ? "rope (neox)" : "rope", r, TOL_SMOOTH);
    }

    /* soft_max: scale 0.5 keeps the inputs on the F16 grid */
    gc_init(&c);
    const int64_t ne54[2] = { 5, 4 };
    a = gc_param_grid(&c, "x", 2, ne54);
    gc_check(&c, "soft_max (scale)", op_soft_max(c.ctx, a, NULL, 0.5f), TOL_F16_TABLE);

    gc_init(&c);
    const int64_t ne443[3] = { 4, 4, 3 };
    a = gc_param_grid(&c, "x", 3, ne443);
    struct tensor *mask = tensor_new_2d(c.ctx, GGML_TYPE_F32, 4, 4);
    for (int i = 0; i < 16; i++) tensor_set_f32_1d(mask, i, i % 4 > i / 4 ? -INFINITY : 0.0f);
    gc_check(&c, "soft_max (causal mask)", op_soft_max(c.ctx, a, mask, 1.0f), TOL_F16_TABLE);

    gc_init(&c);
    a = gc_param_grid(&c, "x", 3, ne443);
    gc_check(&c, "diag_mask_inf + soft_max",
             op_soft_max(c.ctx, op_diag_mask_inf(c.ctx, op_scale(c.ctx, a, 0.5f), 0), NULL, 1.0f), TOL_F16_TABLE);

    gc_init(&c);
    const int64_t ne75[2] = { 7, 5 };
    a = gc_param(&c, "logits", 2, ne75, -2, 2);
    struct tensor *targets = tensor_new_2d(c.ctx, GGML_TYPE_F32, 7, 5);
    for (int r = 0; r < 5; r++) {
        for (int i = 0; i < 7; i++) tensor_set_f32_1d(targets, r * 7 + i, i == (r * 3) % 7 ? 0.75f : 0.25f / 6);
    }
    gc_check(&c, "cross_entropy_loss", op_cross_entropy_loss(c.ctx, a, targets), (struct gc_tol){ 1e-2f, 1e-4, 1e-2, 1e-3 });

    gc_init(&c);
    a = gc_param(&c, "a", 2, ne64, -1, 1);
    gc_check_seeded(&c, "seed 0.25 scales the gradient", op_sqr(c.ctx, a), TOL_SMOOTH, 0.25f);
}

static void test_errors(void) {
    struct tensor_ctx *ctx = tensor_ctx_new(64, 1 << 16);
    struct tensor *a = tensor_new_1d(ctx, GGML_TYPE_F32, 4);
    for (int i = 0; i < 4; i++) tensor_set_f32_1d(a, i, 1.0f + (float)i);
    struct tensor *seed = tensor_new_1d(ctx, GGML_TYPE_F32, 1);
    tensor_set_f32_1d(seed, 0, 1.0f);

    /* no parameter on the way to the loss */
    struct graph *g = graph_new(ctx, 64);
    struct tensor *loss = op_sum(ctx, a);
    CHECK(graph_build_forward(g, loss));
    CHECK(!autograd_build_backward(ctx, g, loss, seed));
    CHECK(strstr(error_last(), "does not depend") != NULL);

    /* an op without a backward rule */
    a->flags |= TENSOR_FLAG_PARAM;
    g = graph_new(ctx, 64);
    loss = op_sum(ctx, op_log(ctx, a));
    CHECK(graph_build_forward(g, loss));
    CHECK(!autograd_build_backward(ctx, g, loss, seed));
    CHECK(strstr(error_last(), "no backward rule for log") != NULL);

    /* a seed of the wrong shape */
    g = graph_new(ctx, 64);
    loss = op_sum(ctx, a);
    CHECK(graph_build_forward(g, loss));
    CHECK(!autograd_build_backward(ctx, g, loss, a));
    tensor_ctx_free(ctx);
}

static void quiet_log(enum ggml_log_level level, const char *text, void *user_data) {
    (void)level;
    (void)text;
    (void)user_data;
}

int main(void) {
    g_pool = cpu_threadpool_new(2);
    CHECK(g_pool != NULL);
    if (!g_pool) return test_finish("test_train_grad");
    test_elementwise();
    test_reductions_and_shapes();
    test_nn_ops();
    log_set_callback(quiet_log, NULL);
    test_errors();
    log_set_callback(NULL, NULL);
    cpu_threadpool_free(g_pool);
    return test_finish("test_train_grad");
}

/*
 * The tiled F32 products (src/backend/cpu/cpu_gemm.h) behind out_prod and
 * mul_mat marked MUL_MAT_ORDER_ANY (an unmarked mul_mat keeps b1892's dot
 * product bit for bit): results against a double-precision reference on shapes with
 * edge tiles, strided and transposed operands, 4-d batches and broadcast
 * weights; bit-identical results for 1, 2 and 3 threads. The program runs
 * itself a second time with LLAMAC_SIMD=scalar so the same checks cover the
 * reference kernels.
 */
#include "test_util.h"

#include <sys/wait.h>
#include <unistd.h>

#include "backend/cpu/cpu_compute.h"
#include "backend/cpu/cpu_gemm.h"
#include "core/cpu_features.h"
#include "quant/quant.h"
#include "tensor/tensor.h"

static uint64_t g_rng = 12345;

static struct tensor *rand_tensor(struct tensor_ctx *ctx, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3) {
    struct tensor *t = tensor_new_4d(ctx, GGML_TYPE_F32, ne0, ne1, ne2, ne3);
    for (int64_t i = 0; i < tensor_nelements(t); i++) tensor_set_f32_1d(t, i, test_rand_uniform(&g_rng, -1, 1));
    return t;
}

/* A product that may add in any order (the tiled kernels' condition). */
static struct tensor *mul_mat_any(struct tensor_ctx *ctx, struct tensor *w, struct tensor *x) {
    struct tensor *t = op_mul_mat(ctx, w, x);
    t->op_params[0] = MUL_MAT_ORDER_ANY;
    return t;
}

static double elem(const struct tensor *t, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
    float v;
    memcpy(&v, (const char *)t->data + i0 * t->nb[0] + i1 * t->nb[1] + i2 * t->nb[2] + i3 * t->nb[3], sizeof v);
    return v;
}

/* Computes out with 1, 2 and 3 threads (same bits) and compares each element
 * with ref(i0, i1, i2, i3) within 1e-5 * (sum of |products|). */
static void check_product(struct cpu_threadpool *pool, struct tensor_ctx *ctx, struct tensor *out, const char *name,
                          double (*ref)(const struct tensor *, int64_t, int64_t, int64_t, int64_t, double *)) {
    struct graph *g = graph_new(ctx, 16);
    CHECK(graph_build_forward(g, out));
    const size_t bytes = tensor_nbytes(out);
    float *first = malloc(bytes);
    for (int nt = 1; nt <= 3; nt++) {
        memset(out->data, 0xff, bytes);
        CHECK(cpu_graph_compute(pool, g, nt, NULL, NULL));
        if (nt == 1) {
            memcpy(first, out->data, bytes);
        } else {
            CHECK_MSG(memcmp(first, out->data, bytes) == 0, "%s: %d threads change the result", name, nt);
        }
    }
    int bad = 0;
    double worst = 0;
    for (int64_t i3 = 0; i3 < out->ne[3]; i3++)
        for (int64_t i2 = 0; i2 < out->ne[2]; i2++)
            for (int64_t i1 = 0; i1 < out->ne[1]; i1++)
                for (int64_t i0 = 0; i0 < out->ne[0]; i0++) {
                    double mag = 0;
                    const double want = ref(out, i0, i1, i2, i3, &mag);
                    const double err = fabs(elem(out, i0, i1, i2, i3) - want) / (mag > 1e-30 ? mag : 1e-30);
                    if (err > worst) worst = err;
                    if (err > 1e-5 && bad++ < 3) {
                        fprintf(stderr, "%s [%lld %lld %lld %lld]: %.9g, want %.9g\n", name, (long long)i0,
                                (long long)i1, (long long)i2, (long long)i3, elem(out, i0, i1, i2, i3), want);
                    }
                }
    CHECK_MSG(bad == 0, "%s: %d elements off", name, bad);
    printf("  %-40s max error %.2e (relative to the sum of |products|)\n", name, worst);
    free(first);
}

/* mul_mat: out[i0, i1, i2, i3] = sum_k w[k, i0, i2 / r2, i3 / r3] x[k, i1, i2, i3] */
static double ref_mul_mat(const struct tensor *out, int64_t i0, int64_t i1, int64_t i2, int64_t i3, double *mag) {
    const struct tensor *w = out->src[0], *x = out->src[1];
    const int64_t r2 = x->ne[2] / w->ne[2], r3 = x->ne[3] / w->ne[3];
    double s = 0;
    for (int64_t k = 0; k < w->ne[0]; k++) {
        const double p = elem(w, k, i0, i2 / r2, i3 / r3) * elem(x, k, i1, i2, i3);
        s += p;
        *mag += fabs(p);
    }
    return s;
}

/* out_prod: out[i0, i1, i2, i3] = sum_j a[i0, j, i2, i3] b[i1, j, i2, i3] */
static double ref_out_prod(const struct tensor *out, int64_t i0, int64_t i1, int64_t i2, int64_t i3, double *mag) {
    const struct tensor *a = out->src[0], *b = out->src[1];
    double s = 0;
    for (int64_t j = 0; j < a->ne[1]; j++) {
        const double p = elem(a, i0, j, i2, i3) * elem(b, i1, j, i2, i3);
        s += p;
        *mag += fabs(p);
    }
    return s;
}

static void run_checks(const char *isa) {
    struct cpu_threadpool *pool = cpu_threadpool_new(3);
    struct tensor_ctx *ctx = tensor_ctx_new(256, 64u << 20);
    printf("tiled kernels: %s\n", cpu_gemm_f32_available() ? isa : "no (reference kernels)");

    /* edge tiles in every direction, k not a multiple of the vector width */
    struct tensor *w = rand_tensor(ctx, 77, 45, 1, 1), *x = rand_tensor(ctx, 77, 39, 1, 1);
    check_product(pool, ctx, mul_mat_any(ctx, w, x), "mul_mat 77x45 * 77x39", ref_mul_mat);
    w = rand_tensor(ctx, 256, 96, 1, 1);
    x = rand_tensor(ctx, 256, 64, 1, 1);
    check_product(pool, ctx, mul_mat_any(ctx, w, x), "mul_mat 256x96 * 256x64", ref_mul_mat);
    /* without MUL_MAT_ORDER_ANY: b1892's dot product, bit for bit */
    struct tensor *ref = op_mul_mat(ctx, w, x);
    check_product(pool, ctx, ref, "mul_mat 256x96 * 256x64 (reference order)", ref_mul_mat);
    int differ = 0;
    for (int64_t c = 0; c < x->ne[1]; c++) {
        for (int64_t r = 0; r < w->ne[1]; r++) {
            float want;
            type_traits_get(GGML_TYPE_F32)->vec_dot(w->ne[0], &want, (const char *)w->data + r * w->nb[1],
                                                    (const char *)x->data + c * x->nb[1]);
            differ += memcmp(&want, (const char *)ref->data + r * 4 + c * ref->nb[1], 4) != 0;
        }
    }
    CHECK_EQ_INT(differ, 0);
    /* attention shapes: permuted operands, broadcast kv heads (GQA) */
    struct tensor *k = rand_tensor(ctx, 32, 2, 40, 3), *q = rand_tensor(ctx, 32, 4, 40, 3);
    check_product(pool, ctx,
                  mul_mat_any(ctx, tensor_permute(ctx, k, 0, 2, 1, 3), tensor_permute(ctx, q, 0, 2, 1, 3)),
                  "mul_mat permuted, GQA 2 -> 4 heads", ref_mul_mat);
    /* too small for the tiles: the reference path */
    w = rand_tensor(ctx, 16, 8, 1, 1);
    x = rand_tensor(ctx, 16, 3, 1, 1);
    check_product(pool, ctx, mul_mat_any(ctx, w, x), "mul_mat 16x8 * 16x3", ref_mul_mat);

    /* out_prod: weight gradient (b strided by rows) and input gradient (b transposed) */
    struct tensor *a = rand_tensor(ctx, 70, 100, 1, 1), *b = rand_tensor(ctx, 35, 100, 1, 1);
    check_product(pool, ctx, op_out_prod(ctx, a, b), "out_prod 70x100 (x) 35x100", ref_out_prod);
    struct tensor *g = rand_tensor(ctx, 100, 19, 1, 1);
    check_product(pool, ctx, op_out_prod(ctx, a, tensor_transpose(ctx, g)), "out_prod with b transposed",
                  ref_out_prod);
    a = rand_tensor(ctx, 33, 17, 3, 2);
    b = rand_tensor(ctx, 9, 17, 3, 2);
    check_product(pool, ctx, op_out_prod(ctx, a, b), "out_prod 4-d", ref_out_prod);
    /* a with strided rows: the reference path */
    a = rand_tensor(ctx, 20, 30, 1, 1);
    b = rand_tensor(ctx, 12, 20, 1, 1);
    check_product(pool, ctx, op_out_prod(ctx, tensor_transpose(ctx, a), b), "out_prod with a transposed",
                  ref_out_prod);

    tensor_ctx_free(ctx);
    cpu_threadpool_free(pool);
}

int main(int argc, char **argv) {
    (void)argc;
    run_checks(cpu_features_get()->avx512f ? "AVX-512" : "AVX2");
    if (cpu_features_get()->avx512f && cpu_features_get()->avx2 && cpu_features_get()->fma) {
        cpu_gemm_f32_prefer_avx2(true);
        run_checks("AVX2");
        cpu_gemm_f32_prefer_avx2(false);
    }
    const char *simd = getenv("LLAMAC_SIMD");
    if (!simd || strcmp(simd, "scalar") != 0) {
        /* again on the reference kernels (cpu_features is read once per process) */
        fflush(stdout);
        const pid_t pid = fork();
        if (pid == 0) {
            setenv("LLAMAC_SIMD", "scalar", 1);
            execl("/proc/self/exe", argv[0], (char *)NULL);
            _exit(127);
        }
        int status = 0;
        CHECK(pid > 0 && waitpid(pid, &status, 0) == pid);
        CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the LLAMAC_SIMD=scalar run failed");
    }
    return test_finish(simd ? "test_cpu_gemm (scalar)" : "test_cpu_gemm");
}

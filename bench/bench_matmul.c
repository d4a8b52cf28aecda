/*
 * bench_matmul: throughput of the CPU backend's matrix products per weight
 * type, the kernels alone (no model around them).
 *
 *   generation: one activation column against weights much larger than the
 *     caches (-s MiB in total, matrices of K x N), as a decode step streams
 *     the model: reported as weight bytes per second (GB/s), the figure the
 *     read-bandwidth target compares.
 *   prompt: M columns against one K x N matrix (a prompt's batch through one
 *     weight): reported as GOP/s (2 K N M operations) and tokens/s a model
 *     with W weights in its matrices would reach (-w, default TinyLlama's:
 *     t/s = M / time x K N / W).
 *
 * Weights are quantized from random floats; activations are random. Each
 * figure is the best of -r repetitions, wall clock, with the process CPU
 * time beside it (on a shared machine a wall time well above CPU time /
 * threads means another process had the cores). LLAMAC_SIMD=scalar runs the
 * reference kernels.
 *
 *   bench_matmul [-t THREADS] [-k K] [-n N] [-m M] [-s MIB] [-r REPS] [-w WEIGHTS]
 *                [--gen-only | --prompt-only] [TYPE ...]      (types as named by ggml: q4_0 f16 ...)
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/cpu/cpu_compute.h"
#include "backend/cpu/cpu_packed.h"
#include "core/cpu_features.h"
#include "quant/quant.h"
#include "quant/quant_simd.h"
#include "tensor/tensor.h"

struct bench_opts {
    int threads, reps;
    int64_t k, n, m;
    double gen_mib, model_weights;
    bool gen, prompt;
};

static double now_s(clockid_t clock) {
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static uint64_t g_rng = 42;
static float rand_unit(void) {
    g_rng = g_rng * 6364136223846793005ULL + 1442695040888963407ULL;
    return (float)((g_rng >> 40) & 0xFFFFFF) / (float)0x1000000 * 2.0f - 1.0f;
}

/* Fills a K x rows weight of `type` with quantized random values. */
static bool fill_weight(struct tensor *w) {
    const int64_t k = w->ne[0], rows = w->ne[1];
    float *src = malloc((size_t)k * 64 * sizeof(float));
    float *imatrix = malloc((size_t)k * sizeof(float));
    if (!src || !imatrix) return false;
    for (int64_t i = 0; i < k; i++) imatrix[i] = 1.0f;
    bool ok = true;
    for (int64_t r = 0; r < rows && ok; r += 64) {
        const int64_t nr = rows - r < 64 ? rows - r : 64;
        for (int64_t i = 0; i < k * nr; i++) src[i] = rand_unit();
        if (w->type == GGML_TYPE_F32) {
            memcpy((char *)w->data + r * w->nb[1], src, (size_t)(k * nr) * sizeof(float));
        } else {
            ok = quant_quantize_chunk(w->type, src, (char *)w->data + r * w->nb[1], 0, nr, k, NULL, imatrix) != 0;
        }
    }
    free(src);
    free(imatrix);
    return ok;
}

struct bench_result {
    double wall, cpu;
};

static bool run_graph(struct cpu_threadpool *pool, struct graph *g, const struct bench_opts *o, struct bench_result *best) {
    best->wall = 1e30;
    for (int r = 0; r <= o->reps; r++) {   /* repetition 0 warms up */
        const double w0 = now_s(CLOCK_MONOTONIC), c0 = now_s(CLOCK_PROCESS_CPUTIME_ID);
        if (!cpu_graph_compute(pool, g, o->threads, NULL, NULL)) return false;
        const double wall = now_s(CLOCK_MONOTONIC) - w0, cpu = now_s(CLOCK_PROCESS_CPUTIME_ID) - c0;
        if (r > 0 && wall < best->wall) *best = (struct bench_result){ wall, cpu };
    }
    return true;
}

static bool bench_type(struct cpu_threadpool *pool, enum ggml_type type, const struct bench_opts *o) {
    const struct type_traits *tt = type_traits_get(type);
    size_t row = 0;
    if (!tt || !tt->vec_dot || !type_row_size(type, o->k, &row)) {
        fprintf(stderr, "bench_matmul: %s cannot be a weight of %lld columns\n", type_name(type), (long long)o->k);
        return false;
    }
    const size_t mat_bytes = row * (size_t)o->n;
    bool ok = true;
    if (o->gen) {
        const int n_mats = (int)((o->gen_mib * 1048576.0 + (double)mat_bytes - 1) / (double)mat_bytes);
        struct tensor_ctx *ctx = tensor_ctx_new((size_t)n_mats * 2 + 8, mat_bytes * (size_t)n_mats + (size_t)o->k * 4 +
                                                                            (size_t)o->n * 4 * (size_t)n_mats + 1048576);
        if (!ctx) return false;
        struct tensor *x = tensor_new_2d(ctx, GGML_TYPE_F32, o->k, 1);
        for (int64_t i = 0; i < o->k; i++) ((float *)x->data)[i] = rand_unit();
        struct graph *g = graph_new(ctx, n_mats * 2 + 8);
        /* the first matrix quantized, the others its copies: the same bytes
         * to stream, without minutes of quantizing (k-quants search scales) */
        const struct tensor *first = NULL;
        for (int i = 0; i < n_mats && ok; i++) {
            struct tensor *w = tensor_new_2d(ctx, type, o->k, o->n);
            if (first) memcpy(w->data, first->data, mat_bytes);
            ok = (first || fill_weight(w)) && cpu_repack_weight(w) && graph_build_forward(g, op_mul_mat(ctx, w, x));
            if (!first) first = w;
        }
        struct bench_result r;
        ok = ok && run_graph(pool, g, o, &r);
        if (ok) {
            const double bytes = (double)mat_bytes * n_mats;
            const double cpu = r.cpu / o->threads;
            printf("%-8s gen    %3d x %lld x %lld  %7.2f ms  %6.2f GB/s   | cpu time/thread %7.2f ms  %6.2f GB/s\n",
                   type_name(type), n_mats, (long long)o->k, (long long)o->n, r.wall * 1e3, bytes / r.wall * 1e-9,
                   cpu * 1e3, bytes / cpu * 1e-9);
        }
        for (int i = 0; i < g->n_nodes; i++) cpu_repack_release(g->nodes[i]->src[0]);
        tensor_ctx_free(ctx);
    }
    if (o->prompt && ok) {
        struct tensor_ctx *ctx = tensor_ctx_new(8, mat_bytes + (size_t)(o->k + o->n) * (size_t)o->m * 4 + 1048576);
        if (!ctx) return false;
        struct tensor *w = tensor_new_2d(ctx, type, o->k, o->n);
        struct tensor *x = tensor_new_2d(ctx, GGML_TYPE_F32, o->k, o->m);
        for (int64_t i = 0; i < o->k * o->m; i++) ((float *)x->data)[i] = rand_unit();
        struct graph *g = graph_new(ctx, 8);
        ok = fill_weight(w) && cpu_repack_weight(w) && graph_build_forward(g, op_mul_mat(ctx, w, x));
        struct bench_result r;
        ok = ok && run_graph(pool, g, o, &r);
        if (ok) {
            const double ops = 2.0 * (double)o->k * (double)o->n * (double)o->m;
            const double cpu = r.cpu / o->threads, per_token = (double)o->k * (double)o->n / o->model_weights;
            printf("%-8s prompt %lld x %lld x %lld  %7.2f ms  %7.1f GOP/s  %6.1f t/s"
                   " | cpu time/thread %7.2f ms  %7.1f GOP/s  %6.1f t/s\n",
                   type_name(type), (long long)o->k, (long long)o->n, (long long)o->m, r.wall * 1e3, ops / r.wall * 1e-9,
                   (double)o->m / r.wall * per_token, cpu * 1e3, ops / cpu * 1e-9, (double)o->m / cpu * per_token);
        }
        cpu_repack_release(w);
        tensor_ctx_free(ctx);
    }
    return ok;
}

int main(int argc, char **argv) {
    struct bench_opts o = { .threads = 2, .reps = 3, .k = 2048, .n = 5632, .m = 512, .gen_mib = 512,
                            .model_weights = 1.034e9, .gen = true, .prompt = true };
    enum ggml_type types[GGML_TYPE_COUNT];
    int n_types = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const bool has = i + 1 < argc;
        if (!strcmp(a, "-t") && has) o.threads = atoi(argv[++i]);
        else if (!strcmp(a, "-r") && has) o.reps = atoi(argv[++i]);
        else if (!strcmp(a, "-k") && has) o.k = atoll(argv[++i]);
        else if (!strcmp(a, "-n") && has) o.n = atoll(argv[++i]);
        else if (!strcmp(a, "-m") && has) o.m = atoll(argv[++i]);
        else if (!strcmp(a, "-s") && has) o.gen_mib = atof(argv[++i]);
        else if (!strcmp(a, "-w") && has) o.model_weights = atof(argv[++i]);
        else if (!strcmp(a, "--gen-only")) o.prompt = false;
        else if (!strcmp(a, "--prompt-only")) o.gen = false;
        else if (a[0] != '-') {
            int t = 0;
            while (t < GGML_TYPE_COUNT && (!type_is_valid(t) || strcmp(type_name((enum ggml_type)t), a) != 0)) t++;
            if (t == GGML_TYPE_COUNT || n_types == GGML_TYPE_COUNT) {
                fprintf(stderr, "bench_matmul: unknown type '%s'\n", a);
                return 2;
            }
            types[n_types++] = (enum ggml_type)t;
        } else {
            fprintf(stderr, "usage: bench_matmul [-t THREADS] [-k K] [-n N] [-m M] [-s MIB] [-r REPS] [-w WEIGHTS]\n"
                            "                    [--gen-only | --prompt-only] [TYPE ...]\n");
            return 2;
        }
    }
    if (n_types == 0) {
        const enum ggml_type def[] = { GGML_TYPE_Q4_0, GGML_TYPE_Q8_0, GGML_TYPE_Q4_K, GGML_TYPE_Q6_K, GGML_TYPE_F16 };
        for (size_t i = 0; i < sizeof def / sizeof def[0]; i++) types[n_types++] = def[i];
    }
    struct cpu_threadpool *pool = cpu_threadpool_new(o.threads);
    if (!pool) return 1;
    printf("kernels: %s, %d threads\n", quant_isa_name(quant_isa_active()), o.threads);
    int rc = 0;
    for (int i = 0; i < n_types; i++) {
        if (!bench_type(pool, types[i], &o)) rc = 1;
    }
    cpu_threadpool_free(pool);
    return rc;
}

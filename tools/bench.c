/*
 * llamac bench: prompt processing and text generation speed, as b1892's
 * llama-bench measures them, plus what issue 6's targets need: peak resident
 * memory, model load time, and the ratio of each figure to the machine's
 * limits (read bandwidth, int8-dot and fp32-FMA peaks) measured by the
 * probes in bench/.
 *
 * The tests (b1892's definitions):
 *   pp N  N tokens (BOS) decoded from an empty cache, in batches of n_batch
 *         (b1892 passes all N in one call, which needs N <= n_batch; the
 *         two agree then), only the last token's logits; t/s = N / time.
 *   tg N  N single-token decodes from an empty cache (positions 0 .. N-1,
 *         no prompt before them, as b1892's llama-bench); t/s = N / time.
 * Each test is warmed up once (pp: min(n_batch, N, 32) tokens; tg: one
 * token), then run -r times, each time from a cleared cache; the figure is
 * the mean +- sample standard deviation of the per-run tokens/s. The context
 * has n_ctx = N, as b1892 sizes it (n_prompt + n_gen with the other 0).
 *
 * Each test runs in a child process that loads the model, creates the
 * context and runs the test, so its peak resident set (VmHWM, which cannot
 * be reset within a process) covers that test alone: for tg, the peak during
 * generation, mapped model pages included.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "cli.h"
#include "backend/cpu/cpu_packed.h"
#include "context/context.h"
#include "core/cpu_features.h"
#include "core/log.h"
#include "core/timer.h"
#include "gguf/gguf.h"
#include "llama.h"
#include "model/model.h"

#define BENCH_MAX_LIST 16
#define BENCH_MAX_REPS 100

enum bench_format { BENCH_MD, BENCH_CSV, BENCH_JSON };

struct bench_list {
    int v[BENCH_MAX_LIST];
    int n;
};

struct bench_params {
    const char *models[BENCH_MAX_LIST];
    int n_models;
    struct bench_list n_prompt, n_gen, n_batch, n_threads;
    int reps;
    enum bench_format format;
    const char *limits_path;
    bool probe;
    bool probe_each;  /* the test's probe right before and after each test */
    bool verbose;
};

/* ---- machine limits ------------------------------------------------------------------ */

enum limit_kind { LIMIT_READ_BW, LIMIT_INT8_DOT, LIMIT_FP32_FMA, LIMIT_KINDS };
static const char *const k_limit_names[LIMIT_KINDS] = { "read_bandwidth", "int8_dot", "fp32_fma" };
static const char *const k_limit_units[LIMIT_KINDS] = { "GB/s", "GOP/s", "GFLOP/s" };

/* Figures of the probes by thread count (0: not measured). */
struct bench_limits {
    int threads[BENCH_MAX_LIST * 2];
    double value[BENCH_MAX_LIST * 2][LIMIT_KINDS];
    int n;
};

static double *limits_slot(struct bench_limits *l, int threads) {
    for (int i = 0; i < l->n; i++) {
        if (l->threads[i] == threads) return l->value[i];
    }
    if (l->n == BENCH_MAX_LIST * 2) return NULL;
    l->threads[l->n] = threads;
    memset(l->value[l->n], 0, sizeof l->value[l->n]);
    return l->value[l->n++];
}

static double limits_get(const struct bench_limits *l, enum limit_kind kind, int threads) {
    for (int i = 0; i < l->n; i++) {
        if (l->threads[i] == threads) return l->value[i][kind];
    }
    return 0.0;
}

static double json_number(const cJSON *obj, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    return cJSON_IsNumber(v) ? v->valuedouble : 0.0;
}

/* One probe's JSON object (bench/probe_membw --json or bench/probe_peak --json). */
static bool limits_add_probe(struct bench_limits *l, const cJSON *obj) {
    const cJSON *probe = cJSON_GetObjectItemCaseSensitive(obj, "probe");
    const int threads = (int)json_number(obj, "threads");
    if (!cJSON_IsString(probe) || threads < 1) return false;
    double *slot = limits_slot(l, threads);
    if (!slot) return false;
    if (strcmp(probe->valuestring, "membw") == 0) {
        slot[LIMIT_READ_BW] = json_number(obj, "best_gbps");
        return slot[LIMIT_READ_BW] > 0;
    }
    if (strcmp(probe->valuestring, "peak") == 0) {
        const cJSON *n = cJSON_GetObjectItemCaseSensitive(obj, "peak_gops_nthreads");
        const cJSON *one = cJSON_GetObjectItemCaseSensitive(obj, "peak_gops_1thread");
        slot[LIMIT_INT8_DOT] = json_number(n, "int8_dot");
        slot[LIMIT_FP32_FMA] = json_number(n, "fp32_fma");
        double *single = limits_slot(l, 1);
        if (single && threads != 1) {
            single[LIMIT_INT8_DOT] = json_number(one, "int8_dot");
            single[LIMIT_FP32_FMA] = json_number(one, "fp32_fma");
        }
        return true;
    }
    return false;
}

/* Text holding one or more probe objects, one after the other or in an array. */
static bool limits_parse(struct bench_limits *l, const char *text, const char *what) {
    const char *p = text;
    int n = 0;
    for (;;) {
        while (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t') p++;
        if (!*p) break;
        const char *end = NULL;
        cJSON *doc = cJSON_ParseWithOpts(p, &end, false);
        if (!doc) {
            cli_fail("bench", "%s: not JSON near byte %ld", what, (long)(p - text));
            return false;
        }
        bool ok = true;
        if (cJSON_IsArray(doc)) {
            const cJSON *item;
            cJSON_ArrayForEach(item, doc) ok = ok && limits_add_probe(l, item);
        } else {
            ok = limits_add_probe(l, doc);
        }
        cJSON_Delete(doc);
        if (!ok) {
            cli_fail("bench", "%s: expected the JSON of probe_membw --json or probe_peak --json", what);
            return false;
        }
        n++;
        p = end;
    }
    if (n == 0) cli_fail("bench", "%s: no probe results", what);
    return n > 0;
}

static char *read_stream(FILE *f) {
    size_t cap = 4096, len = 0, got;
    char *buf = malloc(cap);
    while (buf && (got = fread(buf + len, 1, cap - len - 1, f)) > 0) {
        len += got;
        if (cap - len < 2) {
            char *bigger = realloc(buf, cap * 2);
            if (!bigger) {
                free(buf);
                return NULL;
            }
            buf = bigger;
            cap *= 2;
        }
    }
    if (buf) buf[len] = '\0';
    return buf;
}

static bool limits_load_file(struct bench_limits *l, const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) {
        cli_fail("bench", "cannot open limits file '%s': %s", path, strerror(errno));
        return false;
    }
    char *text = read_stream(f);
    fclose(f);
    bool ok = text && limits_parse(l, text, path);
    free(text);
    return ok;
}

/* Runs one probe (probe_membw or probe_peak, built beside this binary, or
 * in $LLAMAC_PROBE_DIR) with `threads` into l. */
static bool limits_run_probe(struct bench_limits *l, const char *probe, int threads) {
    char dir[4096];
    const char *env = getenv("LLAMAC_PROBE_DIR");
    if (env && *env) {
        snprintf(dir, sizeof dir, "%s", env);
    } else {
        ssize_t n = readlink("/proc/self/exe", dir, sizeof dir - 1);
        if (n <= 0) {
            cli_fail("bench", "cannot find this program's directory; set LLAMAC_PROBE_DIR");
            return false;
        }
        dir[n] = '\0';
        char *slash = strrchr(dir, '/');
        if (slash) *slash = '\0';
    }
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "'%s/%s' --json -t %d", dir, probe, threads);
    fprintf(stderr, "llamac bench: running %s -t %d\n", probe, threads);
    fflush(NULL);
    FILE *p = popen(cmd, "r");
    char *out = p ? read_stream(p) : NULL;
    const int status = p ? pclose(p) : -1;
    const bool ok = out && status == 0 && limits_parse(l, out, probe);
    free(out);
    if (!ok) {
        cli_fail("bench", "running %s/%s failed (build it: cmake --build build --target %s, or use --limits)", dir,
                 probe, probe);
    }
    return ok;
}

/* Both probes with `threads`. */
static bool limits_probe(struct bench_limits *l, int threads) {
    return limits_run_probe(l, "probe_membw", threads) && limits_run_probe(l, "probe_peak", threads);
}

/* ---- one test, in a child process ------------------------------------------------------ */

struct bench_result {
    int ok;
    char error[512];
    char model_type[128];
    uint64_t model_size;      /* bytes of tensor data (llama_model_size) */
    uint64_t model_n_params;
    uint64_t file_bytes;
    uint64_t kv_bytes;
    uint64_t ops_per_token;   /* 2 x weights in matrix products (experts: the used share) */
    uint64_t bytes_per_token; /* model bytes (experts: the used share) */
    int is_float;             /* F32/F16 weights: fp32 FMA is the compute limit, else int8 dot */
    double load_ms;
    uint64_t peak_rss;        /* VmHWM of the test's process */
    int n_samples;
    uint64_t samples_ns[BENCH_MAX_REPS];
};

struct bench_test {
    const char *model;
    int n_prompt, n_gen, n_batch, n_threads;
};

/* A "VmHWM:   1234 kB" line of /proc/self/status, in bytes (0 if unknown). */
static uint64_t proc_status_bytes(const char *field) {
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return 0;
    char line[256];
    unsigned long long kb = 0;
    const size_t len = strlen(field);
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, field, len) == 0 && line[len] == ':' && sscanf(line + len + 1, "%llu", &kb) == 1) break;
    }
    fclose(f);
    return (uint64_t)kb * 1024;
}

/* Weights in matrix products and the bytes a generated token streams, from the file's tensor table. */
static void model_work(const struct llama_model *model, struct bench_result *r) {
    const struct gguf_reader *g = model->gguf;
    const struct llama_hparams *hp = &model->hparams;
    uint64_t matmul = 0, expert_elems = 0, expert_bytes = 0, embd = 0;
    bool has_output = false;
    for (int64_t i = 0; i < gguf_n_tensors(g); i++) {
        const struct gguf_tensor_info *t = gguf_tensor(g, i);
        const uint64_t n = (uint64_t)(t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3]);
        if (strcmp(t->name, "token_embd.weight") == 0) {
            embd = n; /* looked up by row, not multiplied */
            continue;
        }
        if (t->n_dims < 2) continue;
        has_output |= strcmp(t->name, "output.weight") == 0;
        unsigned layer, expert;
        char kind[16];
        if (sscanf(t->name, "blk.%u.ffn_%15[a-z].%u.weight", &layer, kind, &expert) == 3) {
            expert_elems += n;
            expert_bytes += t->size;
        } else {
            matmul += n;
        }
    }
    if (!has_output) matmul += embd; /* tied: the embedding is also the output matrix */
    const double used = hp->n_expert ? (double)hp->n_expert_used / hp->n_expert : 1.0;
    r->ops_per_token = 2 * (matmul + (uint64_t)((double)expert_elems * used));
    r->bytes_per_token = r->model_size - (uint64_t)((double)expert_bytes * (1.0 - used));
    const enum llama_ftype ft = (enum llama_ftype)(model->ftype & ~LLAMA_FTYPE_GUESSED);
    r->is_float = ft == LLAMA_FTYPE_ALL_F32 || ft == LLAMA_FTYPE_MOSTLY_F16;
    r->file_bytes = gguf_file_size(g);
}

static bool bench_decode_prompt(struct llama_context *ctx, llama_token *tokens, int n, int n_batch) {
    for (int i = 0; i < n; i += n_batch) {
        const int m = n - i < n_batch ? n - i : n_batch;
        if (llama_decode(ctx, llama_batch_get_one(tokens + i, m, i, 0)) != 0) return false;
    }
    return true;
}

static bool bench_decode_gen(struct llama_context *ctx, llama_token token, int n) {
    for (int i = 0; i < n; i++) {
        if (llama_decode(ctx, llama_batch_get_one(&token, 1, i, 0)) != 0) return false;
    }
    return true;
}

static void bench_quiet_log(enum ggml_log_level level, const char *text, void *user_data) {
    (void)level, (void)text, (void)user_data;
}

static void bench_run_test(const struct bench_test *t, int reps, struct bench_result *r) {
    struct llama_model_params mp = llama_model_default_params();
    const int64_t t0 = time_us();
    struct llama_model *model = llama_load_model_from_file(t->model, mp);
    r->load_ms = (double)(time_us() - t0) / 1000.0;
    if (!model) {
        snprintf(r->error, sizeof r->error, "cannot load model '%s': %s", t->model, error_last());
        return;
    }
    llama_model_desc(model, r->model_type, sizeof r->model_type);
    r->model_size = llama_model_size(model);
    r->model_n_params = llama_model_n_params(model);
    model_work(model, r);

    const int n_tokens = t->n_prompt + t->n_gen;
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = (uint32_t)n_tokens;
    cp.n_batch = (uint32_t)t->n_batch;
    cp.n_threads = cp.n_threads_batch = (uint32_t)t->n_threads;
    struct llama_context *ctx = llama_new_context_with_model(model, cp);
    llama_token *tokens = malloc((size_t)n_tokens * sizeof *tokens);
    if (!ctx || !tokens) {
        snprintf(r->error, sizeof r->error, "cannot create a context: %s", ctx ? "out of memory" : error_last());
        goto done;
    }
    r->kv_bytes = context_kv_buf_size(ctx);
    const llama_token bos = llama_token_bos(model);
    for (int i = 0; i < n_tokens; i++) tokens[i] = bos;

    bool ok = true;
    if (t->n_prompt > 0) {
        int warm = t->n_prompt < 32 ? t->n_prompt : 32;
        if (warm > t->n_batch) warm = t->n_batch;
        ok = bench_decode_prompt(ctx, tokens, warm, t->n_batch);
    } else {
        ok = bench_decode_gen(ctx, bos, 1);
    }
    for (int i = 0; ok && i < reps; i++) {
        llama_kv_cache_clear(ctx);
        const int64_t start = time_us();
        ok = t->n_prompt > 0 ? bench_decode_prompt(ctx, tokens, t->n_prompt, t->n_batch)
                             : bench_decode_gen(ctx, bos, t->n_gen);
        (void)llama_get_logits(ctx);
        r->samples_ns[r->n_samples++] = (uint64_t)(time_us() - start) * 1000;
    }
    if (!ok) {
        snprintf(r->error, sizeof r->error, "decoding failed: %s", error_last());
        goto done;
    }
    r->peak_rss = proc_status_bytes("VmHWM");
    r->ok = 1;
done:
    free(tokens);
    llama_free(ctx);
    llama_free_model(model);
}

static bool write_all(int fd, const void *data, size_t size) {
    const char *p = data;
    while (size > 0) {
        const ssize_t n = write(fd, p, size);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return false;
        p += n;
        size -= (size_t)n;
    }
    return true;
}

static size_t read_all(int fd, void *data, size_t size) {
    char *p = data;
    size_t got = 0;
    while (got < size) {
        const ssize_t n = read(fd, p + got, size - got);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        got += (size_t)n;
    }
    return got;
}

/* Runs the test in a child process; false (r->error set) when it failed. */
static bool bench_fork_test(const struct bench_test *t, const struct bench_params *bp, struct bench_result *r) {
    memset(r, 0, sizeof *r);
    int fds[2];
    if (pipe(fds) != 0) {
        snprintf(r->error, sizeof r->error, "pipe: %s", strerror(errno));
        return false;
    }
    fflush(NULL); /* the child must not write the parent's buffered output again */
    const pid_t pid = fork();
    if (pid < 0) {
        snprintf(r->error, sizeof r->error, "fork: %s", strerror(errno));
        close(fds[0]);
        close(fds[1]);
        return false;
    }
    if (pid == 0) {
        close(fds[0]);
        if (!bp->verbose) llama_log_set(bench_quiet_log, NULL);
        struct bench_result *res = calloc(1, sizeof *res);
        if (res) bench_run_test(t, bp->reps, res);
        const bool sent = res && write_all(fds[1], res, sizeof *res);
        free(res);
        close(fds[1]);
        _exit(sent ? 0 : 1);
    }
    close(fds[1]);
    const size_t got = read_all(fds[0], r, sizeof *r);
    close(fds[0]);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (got != sizeof *r) {
        memset(r, 0, sizeof *r);
        if (WIFSIGNALED(status)) {
            snprintf(r->error, sizeof r->error, "the test process died (signal %d)", WTERMSIG(status));
        } else {
            snprintf(r->error, sizeof r->error, "the test process exited with status %d", WEXITSTATUS(status));
        }
        return false;
    }
    r->error[sizeof r->error - 1] = '\0';
    r->model_type[sizeof r->model_type - 1] = '\0';
    return r->ok != 0;
}

/* ---- statistics and output ------------------------------------------------------------ */

struct bench_stats {
    double avg_ns, stddev_ns, avg_ts, stddev_ts;
};

/* Mean and sample standard deviation (0 for one sample). */
static void mean_sd(const double *x, int n, double *mean, double *sd) {
    double s = 0.0, q = 0.0;
    for (int i = 0; i < n; i++) s += x[i];
    *mean = n ? s / n : 0.0;
    for (int i = 0; i < n; i++) q += (x[i] - *mean) * (x[i] - *mean);
    *sd = n > 1 ? sqrt(q / (n - 1)) : 0.0;
}

static int test_tokens(const struct bench_test *t) {
    return t->n_prompt + t->n_gen;
}

static struct bench_stats bench_stats(const struct bench_test *t, const struct bench_result *r) {
    double ns[BENCH_MAX_REPS], ts[BENCH_MAX_REPS];
    for (int i = 0; i < r->n_samples; i++) {
        ns[i] = (double)r->samples_ns[i];
        ts[i] = ns[i] > 0 ? 1e9 * test_tokens(t) / ns[i] : 0.0;
    }
    struct bench_stats s;
    mean_sd(ns, r->n_samples, &s.avg_ns, &s.stddev_ns);
    mean_sd(ts, r->n_samples, &s.avg_ts, &s.stddev_ts);
    return s;
}

/* The limit a test is measured against and how close it came: generation
 * streams the weights (bytes x t/s vs read bandwidth), prompt processing
 * computes (ops x t/s vs the int8-dot or fp32-FMA peak). */
struct bench_vs_limit {
    enum limit_kind kind;
    double limit;    /* GB/s or GOP/s; 0 when not measured for these threads */
    double achieved; /* same unit */
};

static struct bench_vs_limit bench_vs_limit(const struct bench_test *t, const struct bench_result *r,
                                            const struct bench_stats *s, const struct bench_limits *l) {
    struct bench_vs_limit v;
    if (t->n_gen > 0) {
        v.kind = LIMIT_READ_BW;
        v.achieved = (double)r->bytes_per_token * s->avg_ts / 1e9;
    } else {
        v.kind = r->is_float ? LIMIT_FP32_FMA : LIMIT_INT8_DOT;
        v.achieved = (double)r->ops_per_token * s->avg_ts / 1e9;
    }
    v.limit = limits_get(l, v.kind, t->n_threads);
    return v;
}

/* b1892's peak-memory target: 1.1 x (file + KV cache) + 64 MiB. */
static uint64_t rss_budget(const struct bench_result *r) {
    return (uint64_t)(1.1 * (double)(r->file_bytes + r->kv_bytes)) + (64ull << 20);
}

static void test_name(const struct bench_test *t, char *buf, size_t size) {
    if (t->n_prompt > 0) snprintf(buf, size, "pp %d", t->n_prompt);
    else snprintf(buf, size, "tg %d", t->n_gen);
}

static void cpu_model_name(char *buf, size_t size) {
    snprintf(buf, size, "unknown");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "model name", 10) != 0) continue;
        const char *p = strchr(line, ':');
        if (!p) break;
        p++;
        while (*p == ' ' || *p == '\t') p++;
        snprintf(buf, size, "%s", p);
        buf[strcspn(buf, "\n")] = '\0';
        break;
    }
    fclose(f);
}

/* A limit measured around one test (--probe-each): the readings before and after it. */
struct bench_around {
    const struct bench_limits *before, *after;
};

/* The fields of one test, in output order (JSON and CSV); `around` NULL
 * without --probe-each. */
static cJSON *bench_json(const struct bench_test *t, const struct bench_result *r, const struct bench_limits *l,
                         const struct bench_around *around) {
    const struct bench_stats s = bench_stats(t, r);
    const struct bench_vs_limit v = bench_vs_limit(t, r, &s, l);
    char cpu[256], when[64];
    cpu_model_name(cpu, sizeof cpu);
    const time_t now = time(NULL);
    strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "cpu_info", cpu);
    cJSON_AddStringToObject(o, "backend", "CPU");
    cJSON_AddStringToObject(o, "model_filename", t->model);
    cJSON_AddStringToObject(o, "model_type", r->model_type);
    cJSON_AddNumberToObject(o, "model_size", (double)r->model_size);
    cJSON_AddNumberToObject(o, "model_n_params", (double)r->model_n_params);
    cJSON_AddNumberToObject(o, "n_batch", t->n_batch);
    cJSON_AddNumberToObject(o, "n_threads", t->n_threads);
    cJSON_AddStringToObject(o, "type_k", "f16");
    cJSON_AddStringToObject(o, "type_v", "f16");
    cJSON_AddNumberToObject(o, "n_prompt", t->n_prompt);
    cJSON_AddNumberToObject(o, "n_gen", t->n_gen);
    cJSON_AddStringToObject(o, "test_time", when);
    cJSON_AddNumberToObject(o, "avg_ns", round(s.avg_ns));
    cJSON_AddNumberToObject(o, "stddev_ns", round(s.stddev_ns));
    cJSON_AddNumberToObject(o, "avg_ts", s.avg_ts);
    cJSON_AddNumberToObject(o, "stddev_ts", s.stddev_ts);
    cJSON_AddNumberToObject(o, "load_ms", r->load_ms);
    cJSON_AddNumberToObject(o, "peak_rss_bytes", (double)r->peak_rss);
    cJSON_AddNumberToObject(o, "model_file_bytes", (double)r->file_bytes);
    cJSON_AddNumberToObject(o, "kv_bytes", (double)r->kv_bytes);
    cJSON_AddNumberToObject(o, "rss_budget_bytes", (double)rss_budget(r));
    cJSON_AddNumberToObject(o, "ops_per_token", (double)r->ops_per_token);
    cJSON_AddNumberToObject(o, "bytes_per_token", (double)r->bytes_per_token);
    cJSON_AddStringToObject(o, "limit_kind", k_limit_names[v.kind]);
    cJSON_AddStringToObject(o, "limit_unit", k_limit_units[v.kind]);
    cJSON_AddNumberToObject(o, "achieved", v.achieved);
    if (v.limit > 0) {
        cJSON_AddNumberToObject(o, "limit", v.limit);
        cJSON_AddNumberToObject(o, "limit_ratio", v.achieved / v.limit);
    } else {
        cJSON_AddNullToObject(o, "limit");
        cJSON_AddNullToObject(o, "limit_ratio");
    }
    const char *const edge_names[2] = { "limit_before", "limit_after" };
    for (int e = 0; e < 2; e++) {
        const double x = around ? limits_get(e ? around->after : around->before, v.kind, t->n_threads) : 0;
        if (x > 0) cJSON_AddNumberToObject(o, edge_names[e], x);
        else cJSON_AddNullToObject(o, edge_names[e]);
    }
    cJSON_AddStringToObject(o, "matmul", cpu_fast_matmul_amx() ? "fast-amx" : cpu_fast_matmul_active() ? "fast" : "exact");
    double ts[BENCH_MAX_REPS];
    for (int i = 0; i < r->n_samples; i++) ts[i] = 1e9 * test_tokens(t) / (double)r->samples_ns[i];
    cJSON *ns = cJSON_AddArrayToObject(o, "samples_ns");
    for (int i = 0; i < r->n_samples; i++) cJSON_AddItemToArray(ns, cJSON_CreateNumber((double)r->samples_ns[i]));
    cJSON_AddItemToObject(o, "samples_ts", cJSON_CreateDoubleArray(ts, r->n_samples));
    return o;
}

static void csv_field(const cJSON *v) {
    if (cJSON_IsString(v)) {
        putchar('"');
        for (const char *p = v->valuestring; *p; p++) {
            if (*p == '"') putchar('"');
            putchar(*p);
        }
        putchar('"');
    } else if (cJSON_IsNumber(v)) {
        const double d = v->valuedouble;
        if (d == floor(d) && fabs(d) < 1e18) printf("%.0f", d);
        else printf("%.6g", d);
    }
}

static void print_csv(const cJSON *o, bool header) {
    const cJSON *f;
    bool first = true;
    if (header) {
        cJSON_ArrayForEach(f, o) {
            if (cJSON_IsArray(f)) continue;
            printf("%s%s", first ? "" : ",", f->string);
            first = false;
        }
        putchar('\n');
        first = true;
    }
    cJSON_ArrayForEach(f, o) {
        if (cJSON_IsArray(f)) continue;
        if (!first) putchar(',');
        csv_field(f);
        first = false;
    }
    putchar('\n');
}

static void print_md_header(bool non_default_batch) {
    printf("| %-30s | %10s | %10s | %-7s | %7s |%s %-8s | %16s | %8s | %9s | %10s | %-26s |\n", "model", "size",
           "params", "backend", "threads", non_default_batch ? "  n_batch |" : "", "test", "t/s", "load ms", "peak RSS",
           "RSS/budget", "vs machine limit");
    printf("| %s: | %s: | %s: | %s | %s: |%s %s | %s: | %s: | %s: | %s: | %s |\n", "-----------------------------",
           "---------", "---------", "-------", "------", non_default_batch ? " --------: |" : "", "--------",
           "---------------", "-------", "--------", "---------", "--------------------------");
}

static void print_md_row(const struct bench_test *t, const struct bench_result *r, const struct bench_limits *l,
                         bool non_default_batch) {
    const struct bench_stats s = bench_stats(t, r);
    const struct bench_vs_limit v = bench_vs_limit(t, r, &s, l);
    char size[32], params[32], name[32], ts[48], rss[32], lim[64], batch[32] = "";
    if (r->model_size < (1ull << 30)) snprintf(size, sizeof size, "%.2f MiB", r->model_size / 1048576.0);
    else snprintf(size, sizeof size, "%.2f GiB", r->model_size / 1073741824.0);
    if (r->model_n_params < 1000000000ull) snprintf(params, sizeof params, "%.2f M", r->model_n_params / 1e6);
    else snprintf(params, sizeof params, "%.2f B", r->model_n_params / 1e9);
    test_name(t, name, sizeof name);
    snprintf(ts, sizeof ts, "%.2f ± %.2f", s.avg_ts, s.stddev_ts);
    snprintf(rss, sizeof rss, "%.0f MiB", r->peak_rss / 1048576.0);
    if (v.limit > 0) {
        snprintf(lim, sizeof lim, "%.3f of %s", v.achieved / v.limit, k_limit_names[v.kind]);
    } else {
        snprintf(lim, sizeof lim, "%.1f %s", v.achieved, k_limit_units[v.kind]);
    }
    if (non_default_batch) snprintf(batch, sizeof batch, " %8d |", t->n_batch);
    /* "±" is two bytes but one column */
    printf("| %-30s | %10s | %10s | %-7s | %7d |%s %-8s | %17s | %8.1f | %9s | %10.2f | %-26s |\n", r->model_type,
           size, params, "CPU", t->n_threads, batch, name, ts, r->load_ms, rss,
           (double)r->peak_rss / (double)rss_budget(r), lim);
    fflush(stdout);
}

static void print_md_footer(const struct bench_params *bp, const struct bench_limits *l) {
    printf("\n");
    for (int i = 0; i < l->n; i++) {
        bool used = false;
        for (int j = 0; j < bp->n_threads.n; j++) used |= bp->n_threads.v[j] == l->threads[i];
        if (!used) continue;
        printf("machine limits, %d thread%s:", l->threads[i], l->threads[i] == 1 ? "" : "s");
        for (int k = 0; k < LIMIT_KINDS; k++) {
            if (l->value[i][k] > 0) printf(" %s %.1f %s;", k_limit_names[k], l->value[i][k], k_limit_units[k]);
        }
        printf("\n");
    }
    if (bp->probe_each) printf("limits: each test's probe run right before and after it, the mean of the two\n");
    printf("tg: bytes_per_token x t/s vs read bandwidth; pp: 2 x matmul weights x t/s vs the int8-dot peak "
           "(fp32 FMA for F32/F16 models)\n"
           "peak RSS: VmHWM of the test's own process; budget: 1.1 x (model file + KV cache) + 64 MiB\n");
    if (cpu_fast_matmul_active()) {
        printf("matrix products: fast mode (LLAMAC_MATMUL=fast: Q4_0/Q8_0/Q4_K/Q6_K within float tolerance of "
               "b1892)%s\n",
               cpu_fast_matmul_amx() ? "; prompts on AMX tiles" : "");
    } else {
        printf("matrix products: exact (b1892's arithmetic)\n");
    }
}

/* ---- options ------------------------------------------------------------------------------ */

static void bench_usage(void) {
    printf("usage: llamac bench -m MODEL [options]\n\n"
           "Measures prompt processing (pp) and text generation (tg) like b1892's llama-bench.\n"
           "Lists: give a value several times or separate values with commas (-t 1,2).\n\n"
           "  -m, --model FILE        model (list; default none)\n"
           "  -p, --n-prompt N        prompt tokens (list, default 512; 0 skips pp)\n"
           "  -n, --n-gen N           generated tokens (list, default 128; 0 skips tg)\n"
           "  -b, --batch-size N      tokens per decode call in pp (list, default 512)\n"
           "  -t, --threads N         threads (list, default: physical cores, here %d)\n"
           "  -r, --repetitions N     timed runs per test after one warm-up (default 5, at most %d)\n"
           "  -o, --output FORMAT     md (default), csv or json\n"
           "  --limits FILE           machine limits: the output of bench/probe_membw --json and\n"
           "                          probe_peak --json (concatenated, or a JSON array)\n"
           "  --probe                 run those probes now, for each thread count\n"
           "  --probe-each            run a test's probe (tg: probe_membw, pp: probe_peak) right\n"
           "                          before and after it; its limit is the mean of the two\n"
           "  --fast-matmul           the fast matrix-product mode (sets LLAMAC_MATMUL=fast)\n"
           "  -v, --verbose           the engine's log on stderr\n\n"
           "Each test runs in its own process: \"peak RSS\" is that process's VmHWM (mapped model\n"
           "pages included); tg runs no prompt, so for tg it is the peak during generation.\n",
           cpu_physical_cores(), BENCH_MAX_REPS);
}

static bool parse_list(const char *opt, const char *s, int min, struct bench_list *l) {
    char buf[256];
    snprintf(buf, sizeof buf, "%s", s);
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        long long v;
        if (!cli_parse_int(tok, min, 1 << 20, &v)) {
            cli_fail("bench", "%s expects integers >= %d, got '%s'", opt, min, tok);
            return false;
        }
        if (l->n == BENCH_MAX_LIST) {
            cli_fail("bench", "%s: at most %d values", opt, BENCH_MAX_LIST);
            return false;
        }
        l->v[l->n++] = (int)v;
    }
    return true;
}

/* 0, or 1 after printing what is wrong (for `return cli_fail(...)`). */
static int bench_parse(int argc, char **argv, struct bench_params *p) {
    memset(p, 0, sizeof *p);
    p->reps = 5;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        const bool has = v != NULL;
        if ((!strcmp(a, "-m") || !strcmp(a, "--model")) && has) {
            char *s = argv[++i];
            for (char *save = NULL, *tok = strtok_r(s, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
                if (p->n_models == BENCH_MAX_LIST) return cli_fail("bench", "at most %d models", BENCH_MAX_LIST);
                p->models[p->n_models++] = tok;
            }
        } else if ((!strcmp(a, "-p") || !strcmp(a, "--n-prompt")) && has) {
            if (!parse_list(a, argv[++i], 0, &p->n_prompt)) return 1;
        } else if ((!strcmp(a, "-n") || !strcmp(a, "--n-gen")) && has) {
            if (!parse_list(a, argv[++i], 0, &p->n_gen)) return 1;
        } else if ((!strcmp(a, "-b") || !strcmp(a, "--batch-size")) && has) {
            if (!parse_list(a, argv[++i], 1, &p->n_batch)) return 1;
        } else if ((!strcmp(a, "-t") || !strcmp(a, "--threads")) && has) {
            if (!parse_list(a, argv[++i], 1, &p->n_threads)) return 1;
        } else if ((!strcmp(a, "-r") || !strcmp(a, "--repetitions")) && has) {
            long long r;
            if (!cli_parse_int(argv[++i], 1, BENCH_MAX_REPS, &r)) {
                return cli_fail("bench", "%s expects 1..%d, got '%s'", a, BENCH_MAX_REPS, argv[i]);
            }
            p->reps = (int)r;
        } else if ((!strcmp(a, "-o") || !strcmp(a, "--output")) && has) {
            i++;
            if (!strcmp(v, "md")) p->format = BENCH_MD;
            else if (!strcmp(v, "csv")) p->format = BENCH_CSV;
            else if (!strcmp(v, "json")) p->format = BENCH_JSON;
            else return cli_fail("bench", "-o expects md, csv or json, got '%s'", v);
        } else if (!strcmp(a, "--limits") && has) {
            p->limits_path = argv[++i];
        } else if (!strcmp(a, "--probe")) {
            p->probe = true;
        } else if (!strcmp(a, "--probe-each")) {
            p->probe_each = true;
        } else if (!strcmp(a, "--fast-matmul")) {
            /* read once, at the first load: set before any */
            setenv("LLAMAC_MATMUL", "fast", 1);
        } else if (!strcmp(a, "-v") || !strcmp(a, "--verbose")) {
            p->verbose = true;
        } else {
            return cli_fail("bench", "unknown or incomplete option '%s' (see llamac bench --help)", a);
        }
    }
    if (p->n_models == 0) return cli_fail("bench", "no model given (-m FILE)");
    if (p->n_prompt.n == 0) p->n_prompt = (struct bench_list){ { 512 }, 1 };
    if (p->n_gen.n == 0) p->n_gen = (struct bench_list){ { 128 }, 1 };
    if (p->n_batch.n == 0) p->n_batch = (struct bench_list){ { 512 }, 1 };
    if (p->n_threads.n == 0) p->n_threads = (struct bench_list){ { cpu_physical_cores() }, 1 };
    return 0;
}

/* ---- the command ------------------------------------------------------------------------ */

int cmd_bench(int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            bench_usage();
            return 0;
        }
    }
    struct bench_params bp;
    if (bench_parse(argc, argv, &bp) != 0) return 1;
    struct bench_limits limits = { .n = 0 };
    if (bp.limits_path && !limits_load_file(&limits, bp.limits_path)) return 1;
    for (int i = 0; bp.probe && i < bp.n_threads.n; i++) {
        if (!limits_probe(&limits, bp.n_threads.v[i])) return 1;
    }
    const bool non_default_batch = bp.n_batch.n > 1 || bp.n_batch.v[0] != 512;

    if (bp.format == BENCH_MD) print_md_header(non_default_batch);
    if (bp.format == BENCH_JSON) printf("[\n");
    int status = 0, n_done = 0;
    /* b1892's order: per model, batch size and thread count, the pp tests then the tg tests */
    for (int m = 0; m < bp.n_models; m++)
    for (int b = 0; b < bp.n_batch.n; b++)
    for (int th = 0; th < bp.n_threads.n; th++)
    for (int kind = 0; kind < 2; kind++) {
        const struct bench_list *sizes = kind == 0 ? &bp.n_prompt : &bp.n_gen;
        for (int s = 0; s < sizes->n; s++) {
            if (sizes->v[s] == 0) continue;
            const struct bench_test t = {
                .model = bp.models[m], .n_prompt = kind == 0 ? sizes->v[s] : 0, .n_gen = kind == 1 ? sizes->v[s] : 0,
                .n_batch = bp.n_batch.v[b], .n_threads = bp.n_threads.v[th],
            };
            /* --probe-each: this test's limit measured around it (the global ones kept for the others) */
            struct bench_limits before = { .n = 0 }, after = { .n = 0 }, around = limits;
            const char *probe = t.n_gen > 0 ? "probe_membw" : "probe_peak";
            if (bp.probe_each && !limits_run_probe(&before, probe, t.n_threads)) goto probe_failed;
            struct bench_result r;
            const bool ran = bench_fork_test(&t, &bp, &r);
            if (bp.probe_each) {
                if (!limits_run_probe(&after, probe, t.n_threads)) goto probe_failed;
                double *slot = limits_slot(&around, t.n_threads);
                for (int k = 0; slot && k < LIMIT_KINDS; k++) {
                    const double b = limits_get(&before, k, t.n_threads), a = limits_get(&after, k, t.n_threads);
                    if (b > 0 && a > 0) slot[k] = (b + a) / 2;
                }
            }
            if (!ran) {
                char name[32];
                test_name(&t, name, sizeof name);
                cli_fail("bench", "%s, %s, %d threads: %s", t.model, name, t.n_threads, r.error);
                status = 1;
                continue;
            }
            const struct bench_limits *tl = bp.probe_each ? &around : &limits;
            if (bp.probe_each) {
                const struct bench_stats st = bench_stats(&t, &r);
                const struct bench_vs_limit v = bench_vs_limit(&t, &r, &st, tl);
                fprintf(stderr, "llamac bench: %s %s around the test: %.1f before, %.1f after\n",
                        k_limit_names[v.kind], k_limit_units[v.kind], limits_get(&before, v.kind, t.n_threads),
                        limits_get(&after, v.kind, t.n_threads));
            }
            if (bp.format == BENCH_MD) {
                print_md_row(&t, &r, tl, non_default_batch);
            } else {
                const struct bench_around edges = { &before, &after };
                cJSON *o = bench_json(&t, &r, tl, bp.probe_each ? &edges : NULL);
                if (bp.format == BENCH_CSV) {
                    print_csv(o, n_done == 0);
                } else {
                    char *text = cJSON_Print(o);
                    printf("%s%s", n_done ? ",\n" : "", text ? text : "{}");
                    free(text);
                }
                cJSON_Delete(o);
                fflush(stdout);
            }
            n_done++;
        }
    }
    if (bp.format == BENCH_JSON) printf("\n]\n");
    if (bp.format == BENCH_MD) print_md_footer(&bp, &limits);
    return status;
probe_failed: /* (said why) the output so far closed, no more tests */
    if (bp.format == BENCH_JSON) printf("\n]\n");
    return 1;
}

/*
 * The benchmark tools stay working (no timing assertions):
 *   - `llamac bench` on stories260K: the JSON and CSV shapes, the model
 *     figures it derives (ops and bytes per token, KV bytes), the ratios to
 *     machine limits read with --limits or probed around each test
 *     (--probe-each, with stand-in probes), errors;
 *   - `llamac make-model`: tiny dense and MoE models that load and decode,
 *     with the preset's shape, weights drawn from N(0, 0.02^2), norms 1, and
 *     the same file for the same seed.
 */
#include <cjson/cJSON.h>
#include <sys/stat.h>
#include <unistd.h>

#include "test_util.h"

#include "cli_test_util.h"
#include "core/fp16.h"
#include "llama.h"
#include "tensor/tensor.h"

static double num(const cJSON *o, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    CHECK_MSG(cJSON_IsNumber(v), "field '%s' is not a number", key);
    return cJSON_IsNumber(v) ? v->valuedouble : -1.0;
}

static const char *str(const cJSON *o, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    CHECK_MSG(cJSON_IsString(v), "field '%s' is not a string", key);
    return cJSON_IsString(v) ? v->valuestring : "";
}

/* stories260K: 5 layers of q 64x64, k and v 64x32, o 64x64, three 64x172 ffn
 * matrices, plus the 64x512 output matrix; tied to nothing. */
static const double k_stories_ops = 2.0 * (5 * (4096 + 2048 + 2048 + 4096 + 3 * 64 * 172) + 64 * 512);

static void check_test_object(const cJSON *o, int n_prompt, int n_gen, int n_threads) {
    CHECK(cJSON_IsObject(o));
    CHECK_STR_EQ(str(o, "backend"), "CPU");
    CHECK(strstr(str(o, "model_filename"), "stories260K.gguf") != NULL);
    CHECK(strncmp(str(o, "model_type"), "llama", 5) == 0);
    CHECK_EQ_INT(num(o, "n_prompt"), n_prompt);
    CHECK_EQ_INT(num(o, "n_gen"), n_gen);
    CHECK_EQ_INT(num(o, "n_threads"), n_threads);
    CHECK_EQ_INT(num(o, "n_batch"), 512);
    CHECK_EQ_INT(num(o, "model_n_params"), 292800);
    CHECK_EQ_INT(num(o, "model_size"), 1171200);
    CHECK_EQ_INT(num(o, "model_file_bytes"), 1185376);
    CHECK_EQ_INT(num(o, "ops_per_token"), k_stories_ops);
    CHECK_EQ_INT(num(o, "bytes_per_token"), 1171200);
    /* the F16 cache: n_ctx cells x 5 layers x (32 + 32) x 2 bytes, in a
     * buffer of PAD64(size) + 64 bytes (b1892's host buffer arithmetic) */
    const int n_ctx = n_prompt + n_gen;
    CHECK_EQ_INT(num(o, "kv_bytes"), (n_ctx * 5 * 64 * 2 + 63) / 64 * 64 + 64);
    CHECK(num(o, "avg_ts") > 0 && num(o, "avg_ns") > 0 && num(o, "stddev_ts") >= 0);
    CHECK(num(o, "load_ms") >= 0);
    /* the process held at least the mapped model */
    CHECK(num(o, "peak_rss_bytes") >= 1185376);
    CHECK(num(o, "rss_budget_bytes") > num(o, "model_file_bytes"));
    CHECK_STR_EQ(str(o, "limit_kind"), n_gen ? "read_bandwidth" : "fp32_fma");
    const cJSON *ns = cJSON_GetObjectItemCaseSensitive(o, "samples_ns");
    const cJSON *ts = cJSON_GetObjectItemCaseSensitive(o, "samples_ts");
    CHECK(cJSON_IsArray(ns) && cJSON_IsArray(ts) && cJSON_GetArraySize(ns) == 1 && cJSON_GetArraySize(ts) == 1);
    /* achieved = ops (pp) or bytes (tg) per token x tokens/s */
    const double per_token = n_gen ? 1171200.0 : k_stories_ops;
    CHECK_NEAR(num(o, "achieved"), per_token * num(o, "avg_ts") / 1e9, 1e-9 * per_token);
}

static void test_bench_json(const char *model) {
    struct cli_result r = cli_run((const char *[]){ "bench", "-m", model, "-p", "16", "-n", "4", "-r", "1", "-t", "2",
                                                    "-o", "json", NULL },
                                  NULL, 300);
    CHECK_MSG(r.status == 0, "%s", r.err);
    cJSON *doc = cJSON_Parse(r.out);
    CHECK_MSG(cJSON_IsArray(doc) && cJSON_GetArraySize(doc) == 2, "bench -o json:\n%s", r.out);
    if (cJSON_IsArray(doc) && cJSON_GetArraySize(doc) == 2) {
        check_test_object(cJSON_GetArrayItem(doc, 0), 16, 0, 2);
        check_test_object(cJSON_GetArrayItem(doc, 1), 0, 4, 2);
        /* no limits given */
        CHECK(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(doc, 0), "limit_ratio")));
    }
    cJSON_Delete(doc);
    cli_result_free(&r);
}

static void test_bench_limits_and_csv(const char *model) {
    /* probe output for 1 thread: a membw object then a peak object */
    char limits[512];
    snprintf(limits, sizeof limits, "%s", test_tmp_path("limits.json"));
    const char *probes =
        "{\"probe\": \"membw\", \"threads\": 1, \"best_gbps\": 20.0, \"mean_gbps\": 19.0}\n"
        "{\"probe\": \"peak\", \"threads\": 1, \"reps\": 1, \"kernels\": [],\n"
        " \"peak_gops_1thread\": {\"fp32_fma\": 100.0, \"bf16_dot\": 50.0, \"int8_dot\": 400.0},\n"
        " \"peak_gops_nthreads\": {\"fp32_fma\": 100.0, \"bf16_dot\": 50.0, \"int8_dot\": 400.0}}\n";
    CHECK(test_write_file(limits, probes, strlen(probes)));
    struct cli_result r = cli_run((const char *[]){ "bench", "-m", model, "-p", "8", "-n", "2", "-r", "2", "-t", "1",
                                                    "--limits", limits, "-o", "json", NULL },
                                  NULL, 300);
    CHECK_MSG(r.status == 0, "%s", r.err);
    cJSON *doc = cJSON_Parse(r.out);
    CHECK(cJSON_GetArraySize(doc) == 2);
    for (int i = 0; i < cJSON_GetArraySize(doc); i++) {
        const cJSON *o = cJSON_GetArrayItem(doc, i);
        const double limit = i == 0 ? 100.0 : 20.0; /* F32 model: fp32 FMA; tg: bandwidth */
        CHECK_NEAR(num(o, "limit"), limit, 0.0);
        CHECK_NEAR(num(o, "limit_ratio"), num(o, "achieved") / limit, 1e-12);
        CHECK_EQ_INT(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(o, "samples_ns")), 2);
    }
    cJSON_Delete(doc);
    cli_result_free(&r);

    /* CSV: a header and one row per test, the same number of fields */
    r = cli_run((const char *[]){ "bench", "-m", model, "-p", "8", "-n", "2", "-r", "1", "-t", "1", "--limits", limits,
                                  "-o", "csv", NULL },
                NULL, 300);
    CHECK_MSG(r.status == 0, "%s", r.err);
    int lines = 0, fields[3] = { 0 };
    bool quoted = false;
    for (const char *p = r.out; *p; p++) {
        if (*p == '"') quoted = !quoted;
        if (*p == ',' && !quoted && lines < 3) fields[lines]++;
        if (*p == '\n') lines++;
    }
    CHECK_EQ_INT(lines, 3);
    CHECK(fields[0] > 20 && fields[0] == fields[1] && fields[1] == fields[2]);
    CHECK(strncmp(r.out, "cpu_info,backend,model_filename,", 32) == 0);
    cli_result_free(&r);

    /* markdown: the table and the limits under it */
    r = cli_run((const char *[]){ "bench", "-m", model, "-p", "8", "-n", "2", "-r", "1", "-t", "1", "--limits", limits,
                                  NULL },
                NULL, 300);
    CHECK(r.status == 0 && strstr(r.out, "| pp 8 ") && strstr(r.out, "| tg 2 ") && strstr(r.out, "of fp32_fma") &&
          strstr(r.out, "of read_bandwidth") && strstr(r.out, "read_bandwidth 20.0 GB/s"));
    cli_result_free(&r);

    /* errors: one line and a non-zero status */
    r = cli_run((const char *[]){ "bench", "-m", "/nonexistent.gguf", "-p", "8", "-n", "0", "-r", "1", NULL }, NULL, 300);
    CHECK(r.status != 0 && strstr(r.err, "llamac bench: /nonexistent.gguf, pp 8") && strstr(r.err, "cannot load"));
    cli_result_free(&r);
    r = cli_run((const char *[]){ "bench", "-m", model, "-t", "0", NULL }, NULL, 300);
    CHECK(r.status != 0 && strstr(r.err, "-t expects"));
    cli_result_free(&r);
    const char *other = "{\"probe\": \"other\"}";
    CHECK(test_write_file(limits, other, strlen(other)));
    r = cli_run((const char *[]){ "bench", "-m", model, "--limits", limits, NULL }, NULL, 300);
    CHECK(r.status != 0 && strstr(r.err, "probe_membw --json"));
    cli_result_free(&r);
    remove(limits);
}

/* Writes an executable script. */
static bool write_script(const char *path, const char *text) {
    return test_write_file(path, text, strlen(text)) && chmod(path, 0755) == 0;
}

/* --probe-each: a test's probe right before and after it (stand-in probes
 * in $LLAMAC_PROBE_DIR that read 40 then 60 GB/s, 100 then 300 GFLOP/s),
 * the limit their mean, both readings in the JSON. */
static void test_bench_probe_each(const char *model) {
    char dir[512], membw[600], peak[600];
    snprintf(dir, sizeof dir, "%s", test_tmp_path("probes"));
    CHECK(mkdir(dir, 0755) == 0);
    snprintf(membw, sizeof membw, "%s/probe_membw", dir);
    snprintf(peak, sizeof peak, "%s/probe_peak", dir);
    CHECK(write_script(membw, "#!/bin/sh\n"
                              "f=\"$(dirname \"$0\")/membw_calls\"; n=$(cat \"$f\" 2>/dev/null || echo 0); echo $((n + 1)) > \"$f\"\n"
                              "v=$((40 + 20 * (n % 2)))\n"
                              "echo \"{\\\"probe\\\": \\\"membw\\\", \\\"threads\\\": 1, \\\"best_gbps\\\": $v, \\\"mean_gbps\\\": $v}\"\n"));
    CHECK(write_script(peak, "#!/bin/sh\n"
                             "f=\"$(dirname \"$0\")/peak_calls\"; n=$(cat \"$f\" 2>/dev/null || echo 0); echo $((n + 1)) > \"$f\"\n"
                             "v=$((100 + 200 * (n % 2)))\n"
                             "echo \"{\\\"probe\\\": \\\"peak\\\", \\\"threads\\\": 1, \\\"peak_gops_1thread\\\": "
                             "{\\\"fp32_fma\\\": $v, \\\"int8_dot\\\": $v}, \\\"peak_gops_nthreads\\\": "
                             "{\\\"fp32_fma\\\": $v, \\\"int8_dot\\\": $v}}\"\n"));
    setenv("LLAMAC_PROBE_DIR", dir, 1);
    struct cli_result r = cli_run((const char *[]){ "bench", "-m", model, "-p", "8", "-n", "2", "-r", "1", "-t", "1",
                                                    "--probe-each", "-o", "json", NULL },
                                  NULL, 300);
    unsetenv("LLAMAC_PROBE_DIR");
    CHECK_MSG(r.status == 0, "%s", r.err);
    cJSON *doc = cJSON_Parse(r.out);
    CHECK(cJSON_GetArraySize(doc) == 2);
    for (int i = 0; i < cJSON_GetArraySize(doc); i++) {
        const cJSON *o = cJSON_GetArrayItem(doc, i);
        const double before = i == 0 ? 100.0 : 40.0, after = i == 0 ? 300.0 : 60.0; /* pp: fp32 FMA; tg: bandwidth */
        CHECK_NEAR(num(o, "limit_before"), before, 0.0);
        CHECK_NEAR(num(o, "limit_after"), after, 0.0);
        CHECK_NEAR(num(o, "limit"), (before + after) / 2, 0.0);
        CHECK_NEAR(num(o, "limit_ratio"), num(o, "achieved") / ((before + after) / 2), 1e-12);
    }
    CHECK(strstr(r.err, "around the test: 100.0 before, 300.0 after") && strstr(r.err, "40.0 before, 60.0 after"));
    cJSON_Delete(doc);
    cli_result_free(&r);
    /* a probe that cannot run: an error, and the output so far still a JSON array */
    setenv("LLAMAC_PROBE_DIR", "/nonexistent", 1);
    r = cli_run((const char *[]){ "bench", "-m", model, "-p", "8", "-n", "0", "-r", "1", "-t", "1", "--probe-each",
                                  "-o", "json", NULL },
                NULL, 300);
    unsetenv("LLAMAC_PROBE_DIR");
    CHECK(r.status != 0 && strstr(r.err, "llamac bench: running /nonexistent/probe_peak failed"));
    doc = cJSON_Parse(r.out);
    CHECK(cJSON_IsArray(doc) && cJSON_GetArraySize(doc) == 0);
    cJSON_Delete(doc);
    cli_result_free(&r);
    /* without it the readings are null */
    r = cli_run((const char *[]){ "bench", "-m", model, "-p", "0", "-n", "2", "-r", "1", "-t", "1", "-o", "json", NULL },
                NULL, 300);
    doc = cJSON_Parse(r.out);
    CHECK(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(doc, 0), "limit_before")));
    cJSON_Delete(doc);
    cli_result_free(&r);
    remove(membw);
    remove(peak);
    char f[600];
    snprintf(f, sizeof f, "%s/membw_calls", dir);
    remove(f);
    snprintf(f, sizeof f, "%s/peak_calls", dir);
    remove(f);
    rmdir(dir);
}

/* Mean and standard deviation of an F16 or F32 tensor's values. */
static void tensor_stats(const struct tensor *t, double *mean, double *sd) {
    const int64_t n = tensor_nelements(t);
    double s = 0, q = 0;
    for (int64_t i = 0; i < n; i++) {
        const double v = t->type == GGML_TYPE_F16 ? fp16_to_fp32(((const fp16_t *)t->data)[i]) : ((const float *)t->data)[i];
        s += v;
        q += v * v;
    }
    *mean = s / (double)n;
    *sd = sqrt(q / (double)n - *mean * *mean);
}

static void test_make_model(const char *vocab) {
    const char *presets[2] = { "tiny", "tiny-moe" };
    for (int p = 0; p < 2; p++) {
        char path[512], name[64];
        snprintf(name, sizeof name, "%s.gguf", presets[p]);
        snprintf(path, sizeof path, "%s", test_tmp_path(name));
        struct cli_result r = cli_run((const char *[]){ "make-model", "--preset", presets[p], "--seed", "7", "--vocab",
                                                        vocab, "-o", path, NULL },
                                      NULL, 300);
        CHECK_MSG(r.status == 0, "make-model %s: %s", presets[p], r.err);
        cli_result_free(&r);

        struct llama_model *model = llama_load_model_from_file(path, llama_model_default_params());
        CHECK(model != NULL);
        if (!model) continue;
        CHECK_EQ_INT(llama_n_vocab(model), 32000);
        CHECK_EQ_INT(llama_n_embd(model), 64);
        char buf[64];
        CHECK(llama_model_meta_val_str(model, "llama.block_count", buf, sizeof buf) > 0 && strcmp(buf, "2") == 0);
        CHECK((llama_model_meta_val_str(model, "llama.expert_count", buf, sizeof buf) > 0) == (p == 1));
        /* the vocabulary is the shared SPM one */
        llama_token toks[16];
        CHECK_EQ_INT(llama_tokenize(model, "Hello world", 11, toks, 16, true, false), 3);
        CHECK_EQ_INT(toks[1], 15043); /* "▁Hello" */

        const struct tensor *w = (const struct tensor *)llama_get_model_tensor(model, "blk.0.attn_q.weight");
        const struct tensor *norm = (const struct tensor *)llama_get_model_tensor(model, "blk.1.ffn_norm.weight");
        CHECK(w && norm && w->type == GGML_TYPE_F16 && norm->type == GGML_TYPE_F32);
        if (w && norm) {
            double mean, sd;
            tensor_stats(w, &mean, &sd);
            CHECK_MSG(fabs(mean) < 0.002 && fabs(sd - 0.02) < 0.002, "attn_q: mean %g, sd %g", mean, sd);
            tensor_stats(norm, &mean, &sd);
            CHECK(mean == 1.0 && sd == 0.0);
        }

        struct llama_context_params cp = llama_context_default_params();
        cp.n_ctx = 64;
        cp.n_threads = cp.n_threads_batch = 2;
        struct llama_context *ctx = llama_new_context_with_model(model, cp);
        CHECK(ctx != NULL);
        if (ctx) {
            CHECK(llama_decode(ctx, llama_batch_get_one(toks, 3, 0, 0)) == 0);
            llama_token next = 100;
            CHECK(llama_decode(ctx, llama_batch_get_one(&next, 1, 3, 0)) == 0);
            const float *logits = llama_get_logits(ctx);
            int finite = 0;
            for (int i = 0; i < 32000; i++) finite += isfinite(logits[i]) != 0;
            CHECK_EQ_INT(finite, 32000);
            llama_free(ctx);
        }
        llama_free_model(model);

        /* the same seed writes the same file; another seed another one */
        char again[600];
        snprintf(again, sizeof again, "%s.again", path);
        for (int seed = 7; seed <= 8; seed++) {
            char seed_arg[16];
            snprintf(seed_arg, sizeof seed_arg, "%d", seed);
            r = cli_run((const char *[]){ "make-model", "--preset", presets[p], "--seed", seed_arg, "--vocab", vocab,
                                          "-o", again, NULL },
                        NULL, 300);
            CHECK(r.status == 0);
            cli_result_free(&r);
            CHECK(test_files_equal(path, again) == (seed == 7));
        }
        remove(again);
        remove(path);
    }
    /* errors */
    struct cli_result r = cli_run((const char *[]){ "make-model", "--preset", "huge", "-o", "/dev/null", NULL }, NULL, 300);
    CHECK(r.status != 0 && strstr(r.err, "unknown model preset 'huge'"));
    cli_result_free(&r);
    r = cli_run((const char *[]){ "make-model", "--preset", "tiny", "--vocab", "/nonexistent.gguf", "-o", "/dev/null",
                                  NULL },
                NULL, 300);
    CHECK(r.status != 0 && strstr(r.err, "llamac make-model:") && strchr(r.err, '\n') == r.err + strlen(r.err) - 1 &&
          r.out[0] == '\0');
    cli_result_free(&r);
}

int main(void) {
    const char *model = test_require_shared("models/stories260K.gguf");
    const char *vocab = test_require_shared("models/ggml-vocab-llama.gguf");
    test_tmp_dir_create("test_bench_smoke");
    test_bench_json(model);
    test_bench_limits_and_csv(model);
    test_bench_probe_each(model);
    test_make_model(vocab);
    test_tmp_dir_remove();
    return test_finish("test_bench_smoke");
}

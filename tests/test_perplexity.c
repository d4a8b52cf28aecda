/*
 * `llamac perplexity` and the scoring arithmetic behind it (api/eval.h)
 * against b1892 (golden/perplexity-stories260K.json, golden/eval-synth-k.json):
 *
 * - stories260K, all four files, n_ctx 128 and 256: the tool's stdout is
 *   b1892's perplexity tool's stdout, character for character (the running
 *   perplexity after each chunk to 5 significant digits, the final estimate
 *   and its error); the single window (BOS + 255 tokens, every next token
 *   scored) gives b1892's mean NLL, and its strided-tool form
 *   (-c 129 --ppl-stride 255 --chunks 1) prints b1892's perplexity.
 * - synth-k: synth-k-F32.gguf quantized by llama_model_quantize to every type
 *   b1892 made (with the shared imatrix where b1892 needed one), each result
 *   measured on the first chunk of n_ctx 128 and compared with b1892's figure
 *   for that file after its first chunk (running_ppl_after_each_chunk[0]):
 *   within 1e-4 relative (every type's logits match b1892's to the printed
 *   precision, test_eval_synth.c). A quantized file
 *   that differs from the shared one byte-wise is measured too, since then it
 *   is not the file b1892 measured. Only the first chunk by default: a
 *   synth-k chunk costs ~0.3 s, all six chunks of 27 files would not fit the
 *   test's budget; LLAMAC_TEST_ALL=1 measures all six (b1892's final figures).
 * - Monotone in bits per weight: b1892's own perplexities of this random model
 *   are not (Q3_K_S scores best of all), because a random model's perplexity
 *   moves either way under a perturbation. What must grow as bits go down is
 *   how far the quantized model is from the F32 one: the mean KL divergence of
 *   its next-token distributions from F32's over the chunk. Checked along the
 *   single-type ("pure") chains F16 > Q8_0 > Q6_K > Q5_K > Q4_K > Q3_K > Q2_K
 *   and Q8_0 > Q5_1 > Q5_0 > Q4_1 > Q4_0 (bits per weight 16, 8.5, 6.56,
 *   5.5, 4.5, 3.44, 2.63 and 8.5, 6, 5.5, 5, 4.5); mixed files are left out
 *   (b1892's own Q4_K_M is farther from F32 than its smaller Q4_K_S).
 * - --hellaswag on a small task file written here: the printed running
 *   accuracy equals an independent computation (each ending decoded with its
 *   context in one piece) in b1892's task order.
 * - Errors: too little text, a task file of the wrong shape.
 * Under AddressSanitizer the synth-k part runs on a subset unless
 * LLAMAC_TEST_ALL=1.
 */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <unistd.h>

#include "api/eval.h"
#include "cli_test_util.h"
#include "core/log.h"
#include "golden_eval.h"
#include "quantize/quantize.h"
#include "sample/rng.h"

#define SYNTH_N_CTX 128
#define SYNTH_REL_TOL 1e-4

static double rel_diff(double a, double b) {
    return fabs(a - b) / fabs(b);
}

/* ---- stories260K: the tool's own output ---------------------------------------------- */

static void check_stories_cli(const cJSON *golden, const char *text_path) {
    const cJSON *variant;
    cJSON_ArrayForEach(variant, cJSON_GetObjectItem(golden, "variants")) {
        char rel[256];
        snprintf(rel, sizeof rel, "models/%s", cJSON_GetObjectItem(variant, "model")->valuestring);
        const char *model = test_require_shared(rel);
        const cJSON *runs = cJSON_GetObjectItem(variant, "runs");
        const cJSON *stdout_by_ctx = cJSON_GetObjectItem(variant, "perplexity_tool_stdout");
        for (int r = 0; r < 2; r++) {
            const cJSON *run = cJSON_GetArrayItem(runs, r);
            const int n_ctx = cJSON_GetObjectItem(run, "n_ctx")->valueint;
            char key[16], ctx_arg[16];
            snprintf(key, sizeof key, "%d", n_ctx);
            snprintf(ctx_arg, sizeof ctx_arg, "%d", n_ctx);
            const cJSON *lines = cJSON_GetObjectItem(stdout_by_ctx, key);
            char want[1024];
            snprintf(want, sizeof want, "%s\n%s\n", cJSON_GetArrayItem(lines, 0)->valuestring,
                     cJSON_GetArrayItem(lines, 1)->valuestring);
            struct cli_result r = cli_run((const char *[]){ "perplexity", "-m", model, "-f", text_path, "-c", ctx_arg,
                                                            "-b", ctx_arg, "-t", "1", NULL },
                                          NULL, 300);
            CHECK_MSG(r.status == 0, "%s", r.err);
            CHECK_MSG(strcmp(r.out, want) == 0, "%s n_ctx %d:\n got: %s\nwant: %s", rel, n_ctx, r.out, want);
            /* and the final number to 4 significant digits, said explicitly */
            const char *fin = strstr(r.out, "PPL = ");
            const double ppl = cJSON_GetObjectItem(run, "ppl")->valuedouble;
            CHECK(fin && rel_diff(atof(fin + 6), ppl) < 5e-4);
            printf("%-22s n_ctx %3d  PPL %.4f (b1892 %.4f)\n", rel + 7, n_ctx, fin ? atof(fin + 6) : NAN, ppl);
            cli_result_free(&r);
        }
        /* the single window through the strided variant of the tool */
        const cJSON *window = cJSON_GetArrayItem(runs, 2);
        char want[64];
        snprintf(want, sizeof want, "[1]%.4f,\n", cJSON_GetObjectItem(window, "ppl")->valuedouble);
        struct cli_result r = cli_run((const char *[]){ "perplexity", "-m", model, "-f", text_path, "-c", "129",
                                                        "--ppl-stride", "255", "--chunks", "1", "-t", "1", NULL },
                                      NULL, 300);
        CHECK_MSG(r.status == 0, "%s", r.err);
        CHECK_MSG(strcmp(r.out, want) == 0, "%s single window: got %s want %s", rel, r.out, want);
        cli_result_free(&r);
    }
}

/* Chunks decoded in several batches give the same numbers; --ppl-output-type 1's lines. */
static void check_stories_cli_variants(const cJSON *golden, const char *text_path) {
    const cJSON *variant = cJSON_GetArrayItem(cJSON_GetObjectItem(golden, "variants"), 0);
    const char *model = test_require_shared("models/stories260K.gguf");
    const cJSON *lines = cJSON_GetObjectItem(cJSON_GetObjectItem(variant, "perplexity_tool_stdout"), "128");
    char want[1024];
    snprintf(want, sizeof want, "%s\n%s\n", cJSON_GetArrayItem(lines, 0)->valuestring,
             cJSON_GetArrayItem(lines, 1)->valuestring);
    struct cli_result r = cli_run((const char *[]){ "perplexity", "-m", model, "-f", text_path, "-c", "128", "-b", "48",
                                                    "-t", "2", NULL },
                                  NULL, 300);
    CHECK_MSG(r.status == 0 && strcmp(r.out, want) == 0, "-b 48:\n got: %s\nwant: %s", r.out, want);
    cli_result_free(&r);

    r = cli_run((const char *[]){ "perplexity", "-m", model, "-f", text_path, "-c", "128", "--ppl-output-type", "1",
                                  "-t", "1", NULL },
                NULL, 300);
    CHECK_MSG(r.status == 0, "%s", r.err);
    const cJSON *running = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(variant, "runs"), 0),
                                               "running_ppl_after_each_chunk");
    const char *line = r.out;
    for (int i = 0; i < cJSON_GetArraySize(running); i++) {
        int pos;
        double ppl, mean, sd;
        CHECK_MSG(sscanf(line, "%d %lf %lf %lf", &pos, &ppl, &mean, &sd) == 4, "line %d: %s", i, line);
        CHECK_EQ_INT(pos, i * 128);
        CHECK(fabs(ppl - cJSON_GetArrayItem(running, i)->valuedouble) < 6e-5);
        CHECK(fabs(exp(mean) - ppl) < 1e-3 * ppl && (i == 0 || sd > 0));
        line = strchr(line, '\n');
        if (!line) break;
        line++;
    }
    CHECK(strstr(r.out, "Final estimate: PPL = 3.3379 +/- 0.25871"));
    cli_result_free(&r);
}

/* The single window's mean NLL through the library, to the golden file's 10 digits. */
static void check_stories_window(const cJSON *golden, const llama_token *tokens) {
    const cJSON *variant;
    cJSON_ArrayForEach(variant, cJSON_GetObjectItem(golden, "variants")) {
        char rel[256];
        snprintf(rel, sizeof rel, "models/%s", cJSON_GetObjectItem(variant, "model")->valuestring);
        struct llama_model *model = golden_load_model(rel);
        CHECK(model != NULL);
        if (!model) continue;
        struct llama_context *ctx = golden_scoring_context(model, 256);
        const int32_t n_vocab = llama_n_vocab(model), n = 256;
        float *logits = malloc((size_t)n * n_vocab * sizeof *logits);
        CHECK(ctx && logits && eval_decode_logits(ctx, tokens, n, 0, n, logits) == 0);
        struct eval_nll nll = { 0 };
        for (int32_t j = 0; j + 1 < n; j++) eval_nll_add(&nll, eval_token_nll(logits + (size_t)j * n_vocab, n_vocab, tokens[j + 1]));
        const cJSON *window = cJSON_GetArrayItem(cJSON_GetObjectItem(variant, "runs"), 2);
        const double want = cJSON_GetObjectItem(window, "mean_nll")->valuedouble;
        CHECK_EQ_INT(nll.count, cJSON_GetObjectItem(window, "scored_tokens")->valueint);
        CHECK_MSG(rel_diff(nll.sum / nll.count, want) < 1e-7, "%s single window mean NLL %.10f, b1892 %.10f", rel,
                  nll.sum / nll.count, want);
        free(logits);
        llama_free(ctx);
        llama_free_model(model);
    }
}

/* ---- synth-k: quantized, then measured ---------------------------------------------------- */

struct synth_result {
    char file[64];
    float *logits; /* the first chunk's logits (SYNTH_N_CTX rows) */
};

/* The running perplexity after each of the first n_chunks chunks; the first
 * chunk's logits are left in first_logits (scratch: room for another chunk). */
static bool measure_chunks(const char *path, llama_token *tokens, int n_chunks, float *first_logits, float *scratch,
                           double *running) {
    struct llama_model *model = llama_load_model_from_file(path, llama_model_default_params());
    struct llama_context *ctx = model ? golden_scoring_context(model, SYNTH_N_CTX) : NULL;
    struct eval_nll nll = { 0 };
    bool ok = ctx != NULL;
    for (int i = 0; ok && i < n_chunks; i++) {
        ok = eval_chunk_nll(ctx, tokens + (size_t)i * SYNTH_N_CTX, SYNTH_N_CTX, SYNTH_N_CTX, true,
                            i == 0 ? first_logits : scratch, &nll) == 0;
        running[i] = eval_nll_ppl(&nll);
    }
    llama_free(ctx);
    llama_free_model(model);
    return ok;
}

static bool in_asan_subset(const char *file) {
    static const char *const subset[] = { "synth-k-F32.gguf", "synth-k-F16.gguf", "synth-k-Q8_0.gguf",
                                          "synth-k-Q4_K_M.gguf", "synth-k-Q5_1-pure.gguf" };
    for (size_t i = 0; i < sizeof subset / sizeof subset[0]; i++) {
        if (strcmp(file, subset[i]) == 0) return true;
    }
    return false;
}

/* Quantizes synth-k-F32 as the golden file's recipe says; the path of the result, or NULL. */
static const char *quantize_like(const cJSON *model, const char *src, const struct quantize_imatrix *im) {
    const char *file = cJSON_GetObjectItem(model, "file")->valuestring;
    const char *recipe = cJSON_GetObjectItem(model, "recipe")->valuestring;
    llama_model_quantize_params p = llama_model_quantize_default_params();
    p.ftype = (enum llama_ftype)cJSON_GetObjectItem(model, "general.file_type")->valueint;
    p.nthread = 2;
    p.pure = strstr(recipe, "--pure") != NULL;
    p.imatrix = strstr(recipe, "--imatrix") ? (void *)im : NULL;
    const char *out = test_tmp_path(file);
    const uint32_t rc = llama_model_quantize(src, out, &p);
    CHECK_MSG(rc == 0, "quantizing to %s: %s", file, error_last());
    return rc == 0 ? out : NULL;
}

/* Mean KL divergence of q's next-token distributions from p's over n rows. */
static double mean_kl(const float *p, const float *q, int32_t n_rows, int32_t n_vocab) {
    double total = 0;
    for (int32_t r = 0; r < n_rows; r++) {
        const float *pr = p + (size_t)r * n_vocab, *qr = q + (size_t)r * n_vocab;
        double pmax = pr[0], qmax = qr[0], ps = 0, qs = 0, kl = 0;
        for (int32_t i = 1; i < n_vocab; i++) {
            pmax = fmax(pmax, pr[i]);
            qmax = fmax(qmax, qr[i]);
        }
        for (int32_t i = 0; i < n_vocab; i++) {
            ps += exp(pr[i] - pmax);
            qs += exp(qr[i] - qmax);
        }
        for (int32_t i = 0; i < n_vocab; i++) {
            const double lp = pr[i] - pmax - log(ps), lq = qr[i] - qmax - log(qs);
            kl += exp(lp) * (lp - lq);
        }
        total += kl;
    }
    return total / n_rows;
}

static const struct synth_result *find_result(const struct synth_result *res, int n, const char *file) {
    for (int i = 0; i < n; i++) {
        if (strcmp(res[i].file, file) == 0) return &res[i];
    }
    return NULL;
}

/* Along a chain ordered by decreasing bits per weight, the KL from F32 must grow. */
static void check_kl_chain(const struct synth_result *res, int n, const float *f32_logits, const char *const *chain,
                           int n_chain, int32_t n_vocab) {
    double prev = -1;
    const char *prev_file = NULL;
    for (int i = 0; i < n_chain; i++) {
        const struct synth_result *r = find_result(res, n, chain[i]);
        if (!r) continue; /* not measured (subset) */
        const double kl = mean_kl(f32_logits, r->logits, SYNTH_N_CTX, n_vocab);
        printf("  KL(F32 || %-24s) = %.3e\n", chain[i], kl);
        CHECK_MSG(kl > prev, "%s is not farther from F32 (KL %.3e) than %s (KL %.3e)", chain[i], kl,
                  prev_file ? prev_file : "-", prev);
        prev = kl;
        prev_file = chain[i];
    }
}

/* Our result against b1892's running perplexity after each chunk measured. */
static double compare_running(const char *what, const double *ours, const cJSON *golden_running, int n_chunks) {
    double worst = 0;
    for (int i = 0; i < n_chunks; i++) {
        const double want = cJSON_GetArrayItem(golden_running, i)->valuedouble, d = rel_diff(ours[i], want);
        CHECK_MSG(d <= SYNTH_REL_TOL, "%s after chunk %d: PPL %.6f vs b1892 %.6f (relative %.2e > %.0e)", what, i + 1,
                  ours[i], want, d, SYNTH_REL_TOL);
        if (d > worst) worst = d;
    }
    return worst;
}

static void check_synth(llama_token *tokens, int n_tokens) {
    cJSON *golden = golden_load("golden/eval-synth-k.json");
    const char *src = test_require_shared("models/synth-k/synth-k-F32.gguf");
    char src_path[512];
    snprintf(src_path, sizeof src_path, "%s", src);
    struct quantize_imatrix *im = quantize_imatrix_load(test_require_shared("models/synth-k/synth-k.imatrix"));
    CHECK(im != NULL);
    const bool all = test_run_all();
    const bool subset = TEST_UNDER_ASAN && !all;
    /* every chunk of the text with LLAMAC_TEST_ALL=1, else the first */
    const int n_chunks = all ? n_tokens / SYNTH_N_CTX : 1;
    const int32_t n_vocab = 512;
    struct synth_result res[32];
    float *scratch = malloc((size_t)SYNTH_N_CTX * n_vocab * sizeof *scratch);
    double running[16];
    int n_res = 0, n_identical = 0, n_quantized = 0;
    double worst = 0;
    const cJSON *model;
    CHECK(scratch && n_chunks <= 16);
    cJSON_ArrayForEach(model, cJSON_GetObjectItem(golden, "models")) {
        const char *file = cJSON_GetObjectItem(model, "file")->valuestring;
        if ((subset && !in_asan_subset(file)) || n_res == 32 || !scratch) continue;
        char rel[256];
        snprintf(rel, sizeof rel, "models/synth-k/%s", file);
        const char *shared = test_require_shared(rel);
        const cJSON *run0 = cJSON_GetArrayItem(cJSON_GetObjectItem(cJSON_GetObjectItem(model, "perplexity"), "runs"), 0);
        CHECK_EQ_INT(cJSON_GetObjectItem(run0, "n_ctx")->valueint, SYNTH_N_CTX);
        const cJSON *golden_running = cJSON_GetObjectItem(run0, "running_ppl_after_each_chunk");
        CHECK_EQ_INT(cJSON_GetArraySize(golden_running), n_tokens / SYNTH_N_CTX);

        struct synth_result *r = &res[n_res++];
        snprintf(r->file, sizeof r->file, "%s", file);
        r->logits = malloc((size_t)SYNTH_N_CTX * n_vocab * sizeof *r->logits);
        const bool is_source = strcmp(file, "synth-k-F32.gguf") == 0;
        const char *ours = is_source ? shared : quantize_like(model, src_path, im);
        if (!r->logits || !ours) continue;
        bool identical = true;
        if (!is_source) {
            n_quantized++;
            identical = test_files_equal(ours, shared);
            n_identical += identical;
        }
        CHECK_MSG(measure_chunks(ours, tokens, n_chunks, r->logits, scratch, running), "%s: %s", file, error_last());
        const double d = compare_running(file, running, golden_running, n_chunks);
        printf("%-24s%s PPL after %d chunk(s) %10.4f  b1892 %10.4f  worst rel diff %.2e%s\n", file,
               is_source ? " " : "*", n_chunks, running[n_chunks - 1], cJSON_GetArrayItem(golden_running, n_chunks - 1)->valuedouble,
               d, identical ? "" : "  (file differs from b1892's)");
        if (d > worst) worst = d;
        if (!identical) {
            /* not the file b1892 measured: measure that one as well */
            float *first = malloc((size_t)SYNTH_N_CTX * n_vocab * sizeof *first);
            CHECK(first && measure_chunks(shared, tokens, n_chunks, first, scratch, running));
            compare_running(rel, running, golden_running, n_chunks);
            free(first);
        }
        if (!is_source) remove(ours);
    }
    free(scratch);
    printf("(* = our quantization of synth-k-F32; %d of %d byte-identical to b1892's files)\n", n_identical, n_quantized);
    printf("worst relative difference: %.2e\n", worst);

    const struct synth_result *f32 = find_result(res, n_res, "synth-k-F32.gguf");
    CHECK(f32 != NULL);
    if (f32) {
        static const char *const k_chain[] = { "synth-k-F16.gguf", "synth-k-Q8_0.gguf", "synth-k-Q6_K.gguf",
                                               "synth-k-Q5_K-pure.gguf", "synth-k-Q4_K-pure.gguf",
                                               "synth-k-Q3_K-pure.gguf", "synth-k-Q2_K-pure.gguf" };
        static const char *const legacy_chain[] = { "synth-k-Q8_0.gguf", "synth-k-Q5_1-pure.gguf",
                                                    "synth-k-Q5_0-pure.gguf", "synth-k-Q4_1-pure.gguf",
                                                    "synth-k-Q4_0-pure.gguf" };
        printf("distance from F32 along decreasing bits per weight:\n");
        check_kl_chain(res, n_res, f32->logits, k_chain, 7, n_vocab);
        check_kl_chain(res, n_res, f32->logits, legacy_chain, 5, n_vocab);
    }
    for (int i = 0; i < n_res; i++) free(res[i].logits);
    quantize_imatrix_free(im);
    cJSON_Delete(golden);
}

/* ---- HellaSwag -------------------------------------------------------------------------- */

#define HS_TASKS 5
static const char *const k_hs_text =
    "Once upon a time, there was a little girl named Lily. She loved to play\n0\n"
    "outside with her friends in the park.\nthe car engine was red and it made a loud computer noise.\n"
    "quantum physics is hard to understand for many people.\nseven hundred and twelve blue numbers went to sleep.\n"
    "Tom had a big red ball. He liked to\n2\n"
    "sing the tax forms every Tuesday at noon.\nbake purple mountains with a spoon.\n"
    "play with his ball every day.\ndance with the refrigerator in the dark.\n"
    "The sun was shining and the birds were singing. Sam went to the\n0\n"
    "moon with a hammer and a violin.\npark to play with his dog.\n"
    "algebra class to solve the equation.\nstock market to buy some shares.\n"
    "One day, a cat saw a little bird in the tree. The cat wanted to\n3\n"
    "file a patent for the new engine.\ncompute the integral of the function.\n"
    "repair the satellite in orbit.\nplay with the bird.\n"
    "Mom said, \"Let's go to the store.\" Lily was very\n2\n"
    "happy and she smiled.\nelectric and the wires were blue.\n"
    "seventeen kilometers of asphalt.\na database with many rows.\n";

/* Mean log-probability of the ending's tokens after the context, decoding context + ending in one piece. */
static double hs_reference_logprob(struct llama_context *ctx, const struct llama_model *model, const char *context,
                                   const char *ending) {
    llama_token ctx_tok[256], all[256];
    char text[1024];
    snprintf(text, sizeof text, "%s %s", context, ending);
    const int32_t n_ctx_tok = llama_tokenize(model, context, (int32_t)strlen(context), ctx_tok, 256, true, false);
    const int32_t n = llama_tokenize(model, text, (int32_t)strlen(text), all, 256, true, false);
    const int32_t n_vocab = llama_n_vocab(model);
    float *logits = malloc((size_t)n * n_vocab * sizeof *logits);
    llama_kv_cache_clear(ctx);
    CHECK(logits && n > n_ctx_tok && eval_decode_logits(ctx, all, n, 0, n, logits) == 0);
    double sum = 0;
    for (int32_t j = n_ctx_tok - 1; j + 1 < n; j++) sum += logf(eval_token_prob(logits + (size_t)j * n_vocab, n_vocab, all[j + 1]));
    free(logits);
    return sum / (n - n_ctx_tok);
}

static void check_hellaswag(void) {
    const char *model_path = test_require_shared("models/stories260K.gguf");
    const char *tasks_path = test_tmp_path("tasks.txt");
    CHECK(test_write_file(tasks_path, k_hs_text, strlen(k_hs_text)));

    /* expected: the task order of b1892 (mt19937 seeded with 1), each task scored independently */
    char lines[HS_TASKS * 6][128];
    const char *text = k_hs_text;
    for (int i = 0; i < HS_TASKS * 6; i++) {
        const char *nl = strchr(text, '\n');
        snprintf(lines[i], sizeof lines[i], "%.*s", (int)(nl - text), text);
        text = nl + 1;
    }
    int order[HS_TASKS], left[HS_TASKS];
    for (int i = 0; i < HS_TASKS; i++) left[i] = i;
    struct rng_mt19937 rng;
    rng_mt19937_seed(&rng, 1);
    for (int i = 0, n_left = HS_TASKS; i < HS_TASKS; i++, n_left--) {
        const uint32_t k = rng_uniform_below(&rng, (uint32_t)n_left);
        order[i] = left[k];
        memmove(&left[k], &left[k + 1], (size_t)(n_left - k - 1) * sizeof *left);
    }
    struct llama_model *model = llama_load_model_from_file(model_path, llama_model_default_params());
    struct llama_context *ctx = model ? golden_scoring_context(model, 128) : NULL;
    CHECK(ctx != NULL);
    if (!ctx) return;
    char want[1024] = "\ntask\tacc_norm\n";
    double acc = 0;
    int n_solved = 0;
    for (int i = 0; i < HS_TASKS; i++) {
        char (*t)[128] = &lines[order[i] * 6];
        int best = 0;
        double best_lp = -INFINITY;
        for (int e = 0; e < 4; e++) {
            const double lp = hs_reference_logprob(ctx, model, t[0], t[2 + e]);
            if (lp > best_lp) {
                best_lp = lp;
                best = e;
            }
        }
        const int solved = best == atoi(t[1]);
        acc += solved;
        n_solved += solved;
        const size_t len = strlen(want);
        snprintf(want + len, sizeof want - len, "%d\t%.8f\n", i + 1, acc / (i + 1) * 100.0);
    }
    strcat(want, "\n");
    llama_free(ctx);
    llama_free_model(model);
    /* a test that can fail: some tasks must be solved and some not */
    CHECK_MSG(n_solved > 0 && n_solved < HS_TASKS, "%d of %d tasks solved", n_solved, HS_TASKS);

    struct cli_result r = cli_run((const char *[]){ "perplexity", "-m", model_path, "-f", tasks_path, "--hellaswag",
                                                    "-c", "128", "-t", "1", NULL },
                                  NULL, 300);
    CHECK_MSG(r.status == 0, "%s", r.err);
    CHECK_MSG(strcmp(r.out, want) == 0, "hellaswag:\n got: %s\nwant: %s", r.out, want);
    printf("hellaswag: %d of %d tasks solved, order %d %d %d %d %d\n", n_solved, HS_TASKS, order[0], order[1],
           order[2], order[3], order[4]);
    cli_result_free(&r);

    /* --hellaswag-tasks 2: the first two of the same order */
    r = cli_run((const char *[]){ "perplexity", "-m", model_path, "-f", tasks_path, "--hellaswag", "--hellaswag-tasks",
                                  "2", "-c", "128", "-t", "1", NULL },
                NULL, 300);
    char *third = strstr(want, "\n3\t");
    if (third) strcpy(third + 1, "\n");
    CHECK_MSG(r.status == 0 && strcmp(r.out, want) == 0, "hellaswag-tasks 2:\n got: %s\nwant: %s", r.out, want);
    cli_result_free(&r);

    /* a file whose lines are not a multiple of 6 */
    const char *bad = "context\n0\na\nb\nc\n";
    CHECK(test_write_file(tasks_path, bad, strlen(bad)));
    r = cli_run((const char *[]){ "perplexity", "-m", model_path, "-f", tasks_path, "--hellaswag", "-c", "128", NULL },
                NULL, 300);
    CHECK(r.status != 0 && strstr(r.err, "not a multiple of 6"));
    cli_result_free(&r);
    remove(tasks_path);
}

static void check_errors(const char *text_path) {
    const char *model = test_require_shared("models/stories260K.gguf");
    struct cli_result r = cli_run((const char *[]){ "perplexity", "-m", model, "-f", text_path, "-c", "512", NULL },
                                  NULL, 300);
    CHECK_MSG(r.status != 0 && strstr(r.err, "you need at least 1024 tokens"), "%s", r.err);
    cli_result_free(&r);
    r = cli_run((const char *[]){ "perplexity", "-m", model, NULL }, NULL, 300);
    CHECK(r.status != 0 && strstr(r.err, "no text given"));
    cli_result_free(&r);
    r = cli_run((const char *[]){ "perplexity", "-m", model, "-f", "/nonexistent.txt", NULL }, NULL, 300);
    CHECK(r.status != 0 && strstr(r.err, "cannot read prompt file"));
    cli_result_free(&r);
}

int main(void) {
    llama_backend_init(false);
    test_tmp_dir_create("llamac-ppl");
    cJSON *golden = golden_load("golden/perplexity-stories260K.json");
    const char *text = cJSON_GetObjectItem(golden, "text")->valuestring;
    char text_file[512];
    snprintf(text_file, sizeof text_file, "%s", test_tmp_path("text.txt"));
    CHECK(test_write_file(text_file, text, strlen(text)));

    /* our tokenizer gives the golden tokens */
    struct llama_model *vocab = golden_load_model("models/stories260K.gguf");
    llama_token tokens[1024];
    const int32_t n_tokens = vocab ? llama_tokenize(vocab, text, (int32_t)strlen(text), tokens, 1024, true, false) : -1;
    int32_t golden_tokens[1024];
    const int n_golden = golden_int_array(cJSON_GetObjectItem(golden, "tokens"), golden_tokens, 1024);
    CHECK_EQ_INT(n_tokens, n_golden);
    CHECK(n_tokens == n_golden && memcmp(tokens, golden_tokens, (size_t)n_golden * sizeof *tokens) == 0);
    llama_free_model(vocab);

    check_stories_cli(golden, text_file);
    check_stories_cli_variants(golden, text_file);
    check_stories_window(golden, tokens);
    check_errors(text_file);
    check_hellaswag();
    check_synth(tokens, n_tokens);

    test_tmp_dir_remove();
    cJSON_Delete(golden);
    llama_backend_free();
    return test_finish("test_perplexity");
}

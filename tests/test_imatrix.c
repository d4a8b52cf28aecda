/*
 * `llamac imatrix`, the importance-matrix collector and the context's graph
 * observer (context_set_eval_callback):
 *
 * - the imatrix of synth-k-F32 over the perplexity text, made as b1892 made
 *   the shared synth-k.imatrix (-c 128 -b 128: six chunks, one product per
 *   matrix each), has its entries, their ncall and every value bit for bit;
 * - quantizing synth-k-F32 to IQ2_XXS with our imatrix gives b1892's file;
 * - an observed decode gives the same logits as an unobserved one, and an
 *   observer that fails stops the decode with its message;
 * - the writer's file reads back through quantize_imatrix_load; bad records
 *   and unwritable paths are errors;
 * - a mixture-of-experts model: each expert used by a batch gets an entry.
 * Under AddressSanitizer the IQ2_XXS quantization is left out unless
 * LLAMAC_TEST_ALL=1.
 */
#include <cjson/cJSON.h>
#include <math.h>
#include <unistd.h>

#include "api/eval.h"
#include "cli_test_util.h"
#include "context/context.h"
#include "core/log.h"
#include "golden_eval.h"
#include "quantize/quantize.h"

/* A raw imatrix file: entries as stored (sums, not divided by ncall). */
struct raw_entry {
    char name[128];
    int32_t ncall, n;
    const float *values;
};

static int raw_parse(const char *data, size_t size, struct raw_entry *out, int cap) {
    size_t o = 0;
    int32_t n;
    if (size < 4) return -1;
    memcpy(&n, data, 4);
    o = 4;
    if (n < 0 || n > cap) return -1;
    for (int32_t i = 0; i < n; i++) {
        int32_t len;
        if (o + 4 > size) return -1;
        memcpy(&len, data + o, 4);
        o += 4;
        if (len <= 0 || len >= 128 || o + (size_t)len + 8 > size) return -1;
        snprintf(out[i].name, sizeof out[i].name, "%.*s", (int)len, data + o);
        o += (size_t)len;
        memcpy(&out[i].ncall, data + o, 4);
        memcpy(&out[i].n, data + o + 4, 4);
        o += 8;
        if (out[i].n <= 0 || o + (size_t)out[i].n * 4 > size) return -1;
        out[i].values = (const float *)(data + o);
        o += (size_t)out[i].n * 4;
    }
    return o == size ? n : -1;
}

/* llamac imatrix as b1892's recipe ran it, compared with the shared file. */
static void check_cli_against_b1892(const char *text_path, const char *ours) {
    const char *model = test_require_shared("models/synth-k/synth-k-F32.gguf");
    const char *shared = test_require_shared("models/synth-k/synth-k.imatrix");
    struct cli_result r = cli_run((const char *[]){ "imatrix", "-m", model, "-f", text_path, "-o", ours, "-c", "128",
                                                    "-b", "128", "-t", "2", NULL },
                                  NULL, 300);
    CHECK_MSG(r.status == 0, "%s", r.err);
    /* it prints the perplexity as b1892's imatrix does (golden/eval-synth-k.json: 1119.08 over six chunks) */
    CHECK_MSG(r.out && strstr(r.out, "[6]1119.0811,") && strstr(r.out, "Final estimate: PPL = 1119.0811"), "%s",
              r.out);
    cli_result_free(&r);

    size_t n_ours = 0, n_theirs = 0;
    char *a = test_read_file(ours, &n_ours), *b = test_read_file(shared, &n_theirs);
    struct raw_entry ea[64], eb[64];
    const int na = a ? raw_parse(a, n_ours, ea, 64) : -1, nb = b ? raw_parse(b, n_theirs, eb, 64) : -1;
    CHECK_EQ_INT(nb, 14);
    CHECK_EQ_INT(na, nb);
    int n_values = 0, n_exact = 0;
    for (int i = 0; i < nb; i++) {
        const struct raw_entry *m = NULL;
        for (int j = 0; j < na; j++) {
            if (strcmp(ea[j].name, eb[i].name) == 0) m = &ea[j];
        }
        CHECK_MSG(m != NULL, "entry %s missing", eb[i].name);
        if (!m) continue;
        CHECK_EQ_INT(m->ncall, eb[i].ncall);
        CHECK_EQ_INT(m->n, eb[i].n);
        if (m->n != eb[i].n) continue;
        for (int32_t k = 0; k < m->n; k++) {
            n_values++;
            n_exact += memcmp(&m->values[k], &eb[i].values[k], sizeof(float)) == 0;
        }
    }
    printf("imatrix: %d entries, %d of %d values bit-identical to b1892's synth-k.imatrix\n", na, n_exact, n_values);
    CHECK_EQ_INT(n_exact, n_values);
    free(a);
    free(b);
}

static void check_quantize_with_ours(const char *ours) {
    if (TEST_UNDER_ASAN && !test_run_all()) return;
    struct quantize_imatrix *im = quantize_imatrix_load(ours);
    CHECK(im != NULL);
    llama_model_quantize_params p = llama_model_quantize_default_params();
    p.ftype = LLAMA_FTYPE_MOSTLY_IQ2_XXS;
    p.nthread = 2;
    p.imatrix = im;
    char src[512];
    snprintf(src, sizeof src, "%s", test_require_shared("models/synth-k/synth-k-F32.gguf"));
    const char *out = test_tmp_path("iq2_xxs.gguf");
    CHECK_MSG(llama_model_quantize(src, out, &p) == 0, "%s", error_last());
    const bool same = test_files_equal(out, test_require_shared("models/synth-k/synth-k-IQ2_XXS.gguf"));
    printf("IQ2_XXS with our imatrix: %s b1892's synth-k-IQ2_XXS.gguf\n", same ? "identical to" : "DIFFERS from");
    CHECK(same);
    remove(out);
    quantize_imatrix_free(im);
}

static bool observe_fail(struct tensor *node, bool ask, void *data) {
    (void)node;
    int *calls = data;
    if (ask) return true;
    if (++*calls == 3) {
        error_set("observer says stop");
        return false;
    }
    return true;
}

/* Observed and unobserved decodes agree; a failing observer stops the decode cleanly. */
static void check_observer(const llama_token *tokens) {
    struct llama_model *model = golden_load_model("models/stories260K.gguf");
    struct llama_context *ctx = model ? golden_scoring_context(model, 64) : NULL;
    CHECK(ctx != NULL);
    if (!ctx) return;
    const int32_t n_vocab = llama_n_vocab(model), n = 64;
    float *plain = malloc((size_t)n * n_vocab * sizeof *plain), *observed = malloc((size_t)n * n_vocab * sizeof *observed);
    llama_kv_cache_clear(ctx);
    CHECK(eval_decode_logits(ctx, tokens, n, 0, n, plain) == 0);
    struct imatrix_collector *c = imatrix_collector_new(true);
    context_set_eval_callback(ctx, imatrix_collector_observe, c);
    llama_kv_cache_clear(ctx);
    CHECK(eval_decode_logits(ctx, tokens, n, 0, n, observed) == 0);
    CHECK_MSG(memcmp(plain, observed, (size_t)n * n_vocab * sizeof *plain) == 0, "observed logits differ");
    /* stories260K: 5 layers x 7 matrices, and output.weight (asked for) */
    CHECK_EQ_INT(imatrix_collector_count(c), 5 * 7 + 1);
    CHECK_EQ_INT(imatrix_collector_ncall(c), 1);
    /* one token at a time: too few rows, nothing collected */
    llama_kv_cache_seq_rm(ctx, 0, n - 1, -1);
    llama_token last = tokens[n - 1];
    CHECK(llama_decode(ctx, llama_batch_get_one(&last, 1, n - 1, 0)) == 0);
    CHECK_EQ_INT(imatrix_collector_ncall(c), 1);

    int calls = 0;
    context_set_eval_callback(ctx, observe_fail, &calls);
    llama_kv_cache_clear(ctx);
    CHECK(eval_decode_logits(ctx, tokens, n, 0, n, observed) != 0);
    CHECK(strstr(error_last(), "observer says stop") != NULL);
    CHECK_EQ_INT(llama_get_kv_cache_used_cells(ctx), 0); /* the failed decode gave its cells back */
    context_set_eval_callback(ctx, NULL, NULL);
    llama_kv_cache_clear(ctx);
    CHECK(eval_decode_logits(ctx, tokens, n, 0, n, observed) == 0);
    CHECK(memcmp(plain, observed, (size_t)n * n_vocab * sizeof *plain) == 0);

    /* the writer, read back by the quantizer's reader (which divides by ncall) */
    const char *path = test_tmp_path("stories.imatrix");
    CHECK(imatrix_collector_write(c, path));
    struct quantize_imatrix *im = quantize_imatrix_load(path);
    CHECK(im && quantize_imatrix_count(im) == 36);
    int64_t n_values = 0;
    const float *w = im ? quantize_imatrix_find(im, "blk.0.ffn_down.weight", &n_values) : NULL;
    CHECK(w && n_values == 172 && w[0] > 0);
    CHECK(im && quantize_imatrix_find(im, "output.weight", &n_values) && n_values == 64);
    quantize_imatrix_free(im);
    remove(path);
    CHECK(!imatrix_collector_write(c, "/nonexistent-dir/x.imatrix") && strstr(error_last(), "cannot create"));
    if (access("/dev/full", W_OK) == 0) { /* a write that fails at the end; the device itself stays */
        CHECK(!imatrix_collector_write(c, "/dev/full") && strstr(error_last(), "cannot write"));
        CHECK(access("/dev/full", F_OK) == 0);
    }
    struct quantize_imatrix_record bad = { .name = "", .ncall = 1, .n_values = 1, .sums = plain };
    CHECK(!quantize_imatrix_write(path, &bad, 1) && access(path, F_OK) != 0);
    CHECK(!quantize_imatrix_write(path, &bad, 0));
    imatrix_collector_free(c);
    free(plain);
    free(observed);
    llama_free(ctx);
    llama_free_model(model);
}

/* Experts: every expert some token is routed to gets the whole batch. */
static void check_moe(const llama_token *tokens) {
    struct llama_model *model = golden_load_model("models/synth-moe/synth-moe-F32.gguf");
    struct llama_context *ctx = model ? golden_scoring_context(model, 64) : NULL;
    CHECK(ctx != NULL);
    if (!ctx) return;
    struct imatrix_collector *c = imatrix_collector_new(false);
    context_set_eval_callback(ctx, imatrix_collector_observe, c);
    float *logits = malloc((size_t)64 * llama_n_vocab(model) * sizeof *logits);
    CHECK(eval_decode_logits(ctx, tokens, 64, 0, 64, logits) == 0);
    const char *path = test_tmp_path("moe.imatrix");
    CHECK(imatrix_collector_write(c, path));
    struct quantize_imatrix *im = quantize_imatrix_load(path);
    CHECK(im != NULL);
    int64_t n_router = 0, n_up = 0;
    const float *router = im ? quantize_imatrix_find(im, "blk.0.ffn_gate_inp.weight", &n_router) : NULL;
    CHECK(router && n_router == 256);
    int n_experts_seen = 0;
    for (int e = 0; im && e < 4; e++) {
        char name[64];
        snprintf(name, sizeof name, "blk.0.ffn_up.%d.weight", e);
        const float *up = quantize_imatrix_find(im, name, &n_up);
        if (!up) continue;
        n_experts_seen++;
        /* the router's input, whole: per product the same sums (an expert chosen in both
         * slots adds the batch twice, so only up to rounding) */
        double worst = 0;
        for (int k = 0; n_up == 256 && router && k < 256; k++) {
            const double d = fabs(up[k] - router[k]) / router[k];
            if (d > worst) worst = d;
        }
        CHECK_MSG(n_up == 256 && worst < 1e-5, "%s: differs from the router's input by %g", name, worst);
    }
    printf("synth-moe: %zu entries, %d of 4 experts of layer 0 used by the batch\n", imatrix_collector_count(c),
           n_experts_seen);
    CHECK(n_experts_seen >= 2);
    quantize_imatrix_free(im);
    remove(path);
    imatrix_collector_free(c);
    free(logits);
    llama_free(ctx);
    llama_free_model(model);
}

int main(void) {
    llama_backend_init(false);
    test_tmp_dir_create("llamac-imatrix");
    cJSON *golden = golden_load("golden/perplexity-stories260K.json");
    const char *text = cJSON_GetObjectItem(golden, "text")->valuestring;
    char text_path[256], ours[256];
    snprintf(text_path, sizeof text_path, "%s", test_tmp_path("text.txt"));
    snprintf(ours, sizeof ours, "%s", test_tmp_path("synth-k.imatrix"));
    CHECK(test_write_file(text_path, text, strlen(text)));
    int32_t tokens[1024];
    const int n_tokens = golden_int_array(cJSON_GetObjectItem(golden, "tokens"), tokens, 1024);
    CHECK(n_tokens > 128);

    check_cli_against_b1892(text_path, ours);
    check_quantize_with_ours(ours);
    check_observer(tokens);
    check_moe(tokens);

    test_tmp_dir_remove();
    cJSON_Delete(golden);
    llama_backend_free();
    return test_finish("test_imatrix");
}

/* `llamac run` across the context: the prompt cache (--prompt-cache,
 * b1892's session files) and context shifting.
 *  - a first run writes the cache, a second loads it and prints the same
 *    text (seeded sampling: the RNG is reseeded after loading); a longer or
 *    a shorter prompt reuses the common prefix and prints what a run without
 *    the cache prints; --prompt-cache-all then a run without a prompt
 *    continues the saved text; a corrupted cache is a one-line error;
 *  - generating 200 tokens in a 64-token context (and with --keep) prints
 *    exactly what b1892 main's shifting computes, written here against
 *    llama.h; -n -2 stops when the context is full. */
#include <math.h>

#include "cli_test_util.h"
#include "llama.h"
#include "test_util.h"

static const char *g_model;

static struct cli_result run_llamac(const char *const *extra) {
    const char *args[48];
    const char *const *lists[] = { (const char *[]){ "run", "-m", g_model, "-t", "1", NULL }, extra, NULL };
    return cli_run(cli_args_join(args, 48, lists), NULL, 300);
}

static void check_prompt_cache(void) {
    const char *cache = "test_cli_session.cache";
    remove(cache);
    const char *first[] = { "-p", "Once upon a time", "-n", "24", "-s", "5", "--prompt-cache", cache, NULL };
    struct cli_result a = run_llamac(first);
    CHECK_MSG(a.status == 0, "%s", a.err);
    CHECK(a.err && strstr(a.err, "will be created"));
    size_t size = 0;
    char *bytes = test_read_file(cache, &size);
    CHECK(bytes && size > 8 && memcmp(bytes, "nsgg", 4) == 0);
    free(bytes);

    struct cli_result b = run_llamac(first);
    CHECK_MSG(b.status == 0, "%s", b.err);
    CHECK(b.err && strstr(b.err, "loaded a prompt cache of 5 tokens") && strstr(b.err, "holds the whole prompt"));
    CHECK_MSG(a.out && b.out && strcmp(a.out, b.out) == 0, "cached run differs:\n%s\n%s", a.out, b.out);

    /* a longer and a shorter prompt than the cache holds: same text as without the cache */
    const char *prompts[2] = { "Once upon a time, there was a dog", "Once upon" };
    for (int k = 0; k < 2; k++) {
        const char *with[] = { "-p", prompts[k], "-n", "24", "-s", "9", "--prompt-cache", cache, "--prompt-cache-ro", NULL };
        const char *without[] = { "-p", prompts[k], "-n", "24", "-s", "9", NULL };
        struct cli_result c = run_llamac(with), d = run_llamac(without);
        CHECK_MSG(c.status == 0 && d.status == 0, "%s / %s", c.err, d.err);
        CHECK(c.err && strstr(c.err, k == 0 ? "matches 5 of" : "holds the whole prompt"));
        CHECK_MSG(c.out && d.out && strcmp(c.out, d.out) == 0, "prompt '%s':\n%s\n%s", prompts[k], c.out, d.out);
        cli_result_free(&c);
        cli_result_free(&d);
    }
    /* --prompt-cache-ro left the file as it was: it still holds the 5 prompt tokens */
    struct cli_result e = run_llamac(first);
    CHECK(e.err && strstr(e.err, "loaded a prompt cache of 5 tokens"));
    cli_result_free(&e);

    /* --prompt-cache-all keeps the generated text; without a prompt the cache is the prompt */
    remove(cache);
    const char *save_all[] = { "-p", "Once upon a time", "-n", "16", "--temp", "0", "--prompt-cache", cache,
                               "--prompt-cache-all", NULL };
    const char *resume[] = { "-n", "16", "--temp", "0", "--prompt-cache", cache, NULL };
    const char *straight[] = { "-p", "Once upon a time", "-n", "31", "--temp", "0", NULL };
    struct cli_result f = run_llamac(save_all), g = run_llamac(resume), h = run_llamac(straight);
    CHECK(f.status == 0 && g.status == 0 && h.status == 0);
    /* 5 prompt tokens + the 15 generated tokens that were evaluated (the 16th only sampled) */
    CHECK_MSG(g.err && strstr(g.err, "loaded a prompt cache of 20 tokens"), "%s", g.err);
    CHECK_MSG(g.out && h.out && strcmp(g.out, h.out) == 0, "resumed:\n%s\nstraight:\n%s", g.out, h.out);
    cli_result_free(&f);
    cli_result_free(&g);
    cli_result_free(&h);

    /* a damaged cache: one error line */
    const char *damaged = "nsgg this is not a session file";
    CHECK(test_write_file(cache, damaged, strlen(damaged)));
    struct cli_result bad = run_llamac(first);
    CHECK(bad.status == 1);
    CHECK_MSG(bad.err && strncmp(bad.err, "llamac run: cannot load the prompt cache", 40) == 0 &&
              strchr(bad.err, '\n') == bad.err + strlen(bad.err) - 1, "%s", bad.err);
    cli_result_free(&bad);
    remove(cache);
    cli_result_free(&a);
    cli_result_free(&b);
}

static void append_piece(const struct llama_model *model, llama_token id, char *text, size_t cap) {
    char piece[64];
    int32_t n = llama_token_to_piece(model, id, piece, sizeof piece);
    size_t len = strlen(text);
    if (n > 0 && len + (size_t)n < cap) {
        memcpy(text + len, piece, (size_t)n);
        text[len + (size_t)n] = '\0';
    }
}

/* What `llamac run -p PROMPT -c n_ctx --keep keep -n n_gen --temp 0
 * --repeat-penalty 1 --ignore-eos` prints: b1892 main's loop, greedy with
 * EOS banned; when a token does not fit, keep BOS and n_keep tokens, drop half
 * of the rest and move the remainder down. */
static char *reference_generation(struct llama_model *model, const char *prompt, int n_ctx, int keep, int n_gen) {
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = (uint32_t)n_ctx;
    cp.n_threads = cp.n_threads_batch = 1;
    struct llama_context *ctx = llama_new_context_with_model(model, cp);
    const int n_vocab = llama_n_vocab(model);
    llama_token tokens[64];
    const int n_prompt = llama_tokenize(model, prompt, (int)strlen(prompt), tokens, 64, true, true);
    const int n_keep = keep < 0 || keep > n_prompt ? n_prompt : keep;
    size_t cap = 16384;
    char *text = calloc(cap, 1);
    for (int i = 0; i < n_prompt; i++) append_piece(model, tokens[i], text, cap);
    CHECK(llama_decode(ctx, llama_batch_get_one(tokens, n_prompt, 0, 0)) == 0);
    int n_past = n_prompt;
    llama_token_data *cand = malloc((size_t)n_vocab * sizeof *cand);
    for (int i = 0; i < n_gen; i++) {
        const float *logits = llama_get_logits_ith(ctx, 0);
        for (int t = 0; t < n_vocab; t++) cand[t] = (llama_token_data){ t, logits[t], 0.0f };
        cand[llama_token_eos(model)].logit = -INFINITY;
        llama_token_data_array arr = { cand, (size_t)n_vocab, false };
        llama_token id = llama_sample_token_greedy(ctx, &arr);
        append_piece(model, id, text, cap);
        if (i == n_gen - 1) break; /* the last token is printed, not evaluated */
        if (n_past + 1 > n_ctx) {
            const int n_discard = (n_past - n_keep - 1) / 2;
            llama_kv_cache_seq_rm(ctx, 0, n_keep + 1, n_keep + n_discard + 1);
            llama_kv_cache_seq_shift(ctx, 0, n_keep + 1 + n_discard, n_past, -n_discard);
            n_past -= n_discard;
        }
        CHECK(llama_decode(ctx, llama_batch_get_one(&id, 1, n_past, 0)) == 0);
        n_past++;
    }
    strcat(text, "\n");
    free(cand);
    llama_free(ctx);
    return text;
}

static void check_context_shift(void) {
    struct llama_model *model = llama_load_model_from_file(g_model, llama_model_default_params());
    static const struct {
        const char *ctx, *keep, *n;
    } cases[] = { { "64", "0", "200" }, { "48", "3", "150" }, { "32", "-1", "100" } };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        const char *args[] = { "-p", "Once upon a time", "-c", cases[k].ctx, "--keep", cases[k].keep, "-n", cases[k].n,
                               "--temp", "0", "--repeat-penalty", "1", "--ignore-eos", NULL };
        struct cli_result r = run_llamac(args);
        char *want = reference_generation(model, "Once upon a time", atoi(cases[k].ctx), atoi(cases[k].keep),
                                          atoi(cases[k].n));
        CHECK_MSG(r.status == 0, "-c %s: %s", cases[k].ctx, r.err);
        CHECK_EQ_INT(cli_generated_tokens(r.err), atoi(cases[k].n));
        CHECK_MSG(r.out && strcmp(r.out, want) == 0, "-c %s --keep %s:\n got: %s\nwant: %s", cases[k].ctx,
                  cases[k].keep, r.out, want);
        free(want);
        cli_result_free(&r);
    }
    llama_free_model(model);

    /* -n -2: stop when the context is full (5 prompt tokens + 59 evaluated, the 60th sampled) */
    const char *full[] = { "-p", "Once upon a time", "-c", "64", "-n", "-2", "--temp", "0", "--ignore-eos", NULL };
    struct cli_result r = run_llamac(full);
    CHECK_MSG(r.status == 0, "%s", r.err);
    CHECK_EQ_INT(cli_generated_tokens(r.err), 60);
    CHECK(r.err && strstr(r.err, "context full"));
    cli_result_free(&r);

    /* classifier-free guidance across shifts: both contexts move, nothing fails */
    const char *cfg[] = { "-p", "Once upon a time", "-c", "32", "-n", "100", "-s", "11", "--ignore-eos",
                          "--cfg-negative-prompt", "The dog was sad", "--cfg-scale", "1.5", NULL };
    r = run_llamac(cfg);
    CHECK_MSG(r.status == 0, "%s", r.err);
    CHECK_EQ_INT(cli_generated_tokens(r.err), 100);
    cli_result_free(&r);
}

int main(void) {
    g_model = test_require_shared("models/stories260K.gguf");
    check_prompt_cache();
    check_context_shift();
    return test_finish("test_cli_session");
}

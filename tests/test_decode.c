/*
 * llama_decode on stories260K: several sequences in one batch, the KV cache
 * sequence operations, a full cache, invalid input, the deprecated paths.
 */
#include "golden_eval.h"
#include "test_util.h"

#include "llama.h"
#include "tensor/tensor.h"

static struct llama_model *g_model;
static int g_n_vocab;

static struct llama_context *new_ctx(uint32_t n_ctx, uint32_t n_batch) {
    struct llama_context_params cp = llama_context_default_params();
    cp.seed = 1;
    cp.n_ctx = n_ctx;
    cp.n_batch = n_batch;
    cp.n_threads = cp.n_threads_batch = 2;
    return llama_new_context_with_model(g_model, cp);
}

static int tokenize(const char *text, llama_token *out, int cap) {
    return llama_tokenize(g_model, text, (int32_t)strlen(text), out, cap, true, false);
}

static double max_diff(const float *a, const float *b) {
    double m = 0;
    for (int i = 0; i < g_n_vocab; i++) {
        double d = fabs((double)a[i] - b[i]);
        if (!(d <= m)) m = d;
    }
    return m;
}

/* Logits of the last token of `text` decoded alone in a fresh context. */
static void logits_alone(const char *text, float *out) {
    struct llama_context *ctx = new_ctx(128, 64);
    llama_token toks[64];
    int n = tokenize(text, toks, 64);
    CHECK(llama_decode(ctx, llama_batch_get_one(toks, n, 0, 0)) == 0);
    memcpy(out, llama_get_logits(ctx), sizeof(float) * (size_t)g_n_vocab);
    llama_free(ctx);
}

static void test_three_sequences_in_one_batch(void) {
    const char *texts[3] = { "Once upon a time", "The cat sat on the mat", "Lily and Tom went to the park to play" };
    float *alone = malloc(sizeof(float) * (size_t)g_n_vocab * 3);
    for (int s = 0; s < 3; s++) logits_alone(texts[s], alone + (size_t)s * g_n_vocab);

    struct llama_context *ctx = new_ctx(128, 64);
    struct llama_batch batch = llama_batch_init(64, 0, 1);
    int last[3];
    batch.n_tokens = 0;
    for (int s = 0; s < 3; s++) {
        llama_token toks[64];
        int n = tokenize(texts[s], toks, 64);
        for (int i = 0; i < n; i++) {
            int k = batch.n_tokens++;
            batch.token[k] = toks[i];
            batch.pos[k] = i;
            batch.n_seq_id[k] = 1;
            batch.seq_id[k][0] = s;
            batch.logits[k] = i == n - 1;
        }
        last[s] = batch.n_tokens - 1;
    }
    CHECK(llama_decode(ctx, batch) == 0);
    /* Batched, the attention rows span more cells (the other sequences' are
     * masked to exactly 0), which regroups the F16 dot product's lanes: a
     * rounding can then land differently in the F16 exp table, as in b1892. */
    for (int s = 0; s < 3; s++) {
        double d = max_diff(llama_get_logits_ith(ctx, last[s]), alone + (size_t)s * g_n_vocab);
        printf("sequence %d: max |dlogit| batched vs alone = %g\n", s, d);
        CHECK_MSG(d < 1e-2, "sequence %d differs by %g when batched", s, d);
    }
    CHECK_EQ_INT(llama_get_kv_cache_token_count(ctx), batch.n_tokens);

    /* seq_cp + seq_rm: continue sequence 0 as sequence 3 after dropping sequences 1 and 2 */
    llama_kv_cache_seq_cp(ctx, 0, 3, -1, -1);
    llama_kv_cache_seq_rm(ctx, 1, -1, -1);
    llama_kv_cache_seq_rm(ctx, 2, -1, -1);
    llama_token toks[64];
    int n0 = tokenize(texts[0], toks, 64);
    CHECK_EQ_INT(llama_get_kv_cache_used_cells(ctx), n0);
    llama_token next = 261;
    float cont3[4096], cont0[4096];
    CHECK(llama_decode(ctx, llama_batch_get_one(&next, 1, n0, 3)) == 0);
    memcpy(cont3, llama_get_logits(ctx), sizeof(float) * (size_t)g_n_vocab);
    llama_kv_cache_seq_rm(ctx, 3, n0, -1);
    CHECK(llama_decode(ctx, llama_batch_get_one(&next, 1, n0, 0)) == 0);
    memcpy(cont0, llama_get_logits(ctx), sizeof(float) * (size_t)g_n_vocab);
    CHECK_MSG(max_diff(cont3, cont0) < 1e-5, "copied sequence continues differently");

    /* seq_keep */
    llama_kv_cache_seq_keep(ctx, 3);
    CHECK_EQ_INT(llama_get_kv_cache_token_count(ctx), n0);
    llama_batch_free(batch);
    llama_free(ctx);
    free(alone);
}

/* Shifting a sequence's positions re-rotates its keys: the continuation
 * matches a context that saw the same tokens at the shifted positions. */
static void test_seq_shift(void) {
    llama_token toks[64];
    int n = tokenize("Once upon a time, there was a little dog", toks, 64);
    struct llama_context *a = new_ctx(128, 64), *b = new_ctx(128, 64);
    /* a: tokens at positions 10.., then shifted by -10 */
    CHECK(llama_decode(a, llama_batch_get_one(toks, n, 10, 0)) == 0);
    llama_kv_cache_seq_shift(a, 0, 0, -1, -10);
    llama_token next = 261;
    CHECK(llama_decode(a, llama_batch_get_one(&next, 1, n, 0)) == 0);
    /* b: the same tokens at positions 0.. */
    CHECK(llama_decode(b, llama_batch_get_one(toks, n, 0, 0)) == 0);
    CHECK(llama_decode(b, llama_batch_get_one(&next, 1, n, 0)) == 0);
    double d = max_diff(llama_get_logits(a), llama_get_logits(b));
    printf("seq_shift: max |dlogit| vs unshifted = %g\n", d);
    CHECK_MSG(d < 2e-2, "shifted continuation differs by %g", d); /* F16 keys are rounded again after rotation */

    /* seq_div halves positions */
    llama_kv_cache_seq_div(a, 0, 0, -1, 2);
    struct llama_kv_cache_view view = llama_kv_cache_view_init(a, 1);
    llama_kv_cache_view_update(a, &view);
    CHECK_EQ_INT(view.used_cells, n + 1);
    CHECK_EQ_INT(view.cells[2].pos, 1);
    llama_kv_cache_view_free(&view);
    llama_free(a);
    llama_free(b);
}

static void test_full_cache_and_bad_input(void) {
    struct llama_context *ctx = new_ctx(32, 32);
    llama_token toks[40];
    for (int i = 0; i < 40; i++) toks[i] = 300 + i;
    CHECK(llama_decode(ctx, llama_batch_get_one(toks, 30, 0, 0)) == 0);
    CHECK_EQ_INT(llama_decode(ctx, llama_batch_get_one(toks, 3, 30, 0)), 1); /* no room: 1, nothing changed */
    CHECK_EQ_INT(llama_get_kv_cache_used_cells(ctx), 30);
    CHECK(llama_decode(ctx, llama_batch_get_one(toks, 2, 30, 0)) == 0);     /* exactly fits */

    llama_kv_cache_clear(ctx);
    CHECK(llama_decode(ctx, llama_batch_get_one(toks, 33, 0, 0)) < 0);     /* beyond n_batch */
    CHECK(llama_decode(ctx, llama_batch_get_one(toks, 0, 0, 0)) < 0);      /* empty */
    llama_token bad = g_n_vocab;
    CHECK(llama_decode(ctx, llama_batch_get_one(&bad, 1, 0, 0)) < 0);      /* outside the vocabulary */
    bad = -5;
    CHECK(llama_decode(ctx, llama_batch_get_one(&bad, 1, 0, 0)) < 0);
    CHECK(llama_decode(ctx, llama_batch_get_one(toks, 1, -3, 0)) < 0);     /* negative position */
    CHECK(llama_decode(ctx, llama_batch_get_one(toks, 1, 0, 100000)) < 0); /* sequence id out of range */
    CHECK_EQ_INT(llama_get_kv_cache_used_cells(ctx), 0);                   /* nothing was claimed */
    CHECK(llama_get_logits_ith(ctx, 5) == NULL);
    CHECK(llama_decode(ctx, llama_batch_get_one(toks, 4, 0, 0)) == 0);     /* still usable */

    /* deprecated llama_eval: same logits as decode from the same state */
    float ref[4096];
    memcpy(ref, llama_get_logits(ctx), sizeof(float) * (size_t)g_n_vocab);
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
    CHECK(llama_eval(ctx, toks, 4, 0) == 0);
#pragma GCC diagnostic pop
    CHECK(max_diff(ref, llama_get_logits(ctx)) == 0);
    llama_free(ctx);
}

static void test_vocab_only(void) {
    struct llama_model_params mp = llama_model_default_params();
    mp.vocab_only = true;
    struct llama_model *m = llama_load_model_from_file(test_require_shared("models/ggml-vocab-llama.gguf"), mp);
    CHECK(m != NULL);
    CHECK_EQ_INT(llama_n_vocab(m), 32000);
    struct llama_context *ctx = llama_new_context_with_model(m, llama_context_default_params());
    CHECK(ctx != NULL);
    llama_token t = 1;
    CHECK(llama_decode(ctx, llama_batch_get_one(&t, 1, 0, 0)) < 0); /* no weights: an error, not a crash */
    llama_token_data cand[2] = { { 0, 1.0f, 0 }, { 1, 2.0f, 0 } };
    llama_token_data_array arr = { cand, 2, false };
    CHECK_EQ_INT(llama_sample_token_greedy(ctx, &arr), 1);
    llama_free(ctx);
    llama_free_model(m);
}

/* logits_all, embeddings as input (llama_eval_embd), RoPE overrides. */
static void test_params_and_embd_input(void) {
    llama_token toks[64];
    int n = tokenize("Once upon a time", toks, 64);
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = 64;
    cp.logits_all = true;
    cp.embedding = true;
    struct llama_context *all = llama_new_context_with_model(g_model, cp);
    CHECK(llama_decode(all, llama_batch_get_one(toks, n, 0, 0)) == 0);
    for (int i = 0; i < n; i++) CHECK(llama_get_logits_ith(all, i) != NULL); /* every row with logits_all */
    float last[512];
    memcpy(last, llama_get_logits_ith(all, n - 1), sizeof last);

    /* the same prompt given as embedding rows (token_embd is F32 here) */
    const struct ggml_tensor *emb_t = llama_get_model_tensor(g_model, "token_embd.weight");
    CHECK(emb_t != NULL);
    const int n_embd = llama_n_embd(g_model);
    float *embd = malloc(sizeof(float) * (size_t)(n * n_embd));
    struct llama_context_params ep = llama_context_default_params();
    ep.n_ctx = 64;
    struct llama_context *ectx = llama_new_context_with_model(g_model, ep);
    const float *table = ((const struct tensor *)emb_t)->data; /* llama.h's opaque tensor is ours */
    for (int i = 0; i < n; i++) memcpy(embd + (size_t)i * n_embd, table + (size_t)toks[i] * n_embd, sizeof(float) * (size_t)n_embd);
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
    CHECK(llama_eval_embd(ectx, embd, n, 0) == 0);
#pragma GCC diagnostic pop
    CHECK_MSG(max_diff(llama_get_logits(ectx), last) == 0, "embedding input differs from token input");
    free(embd);
    llama_free(ectx);
    llama_free(all);

    /* RoPE overrides change the result; YaRN runs */
    struct llama_context_params rp = llama_context_default_params();
    rp.n_ctx = 64;
    rp.rope_freq_base = 500000.0f;
    struct llama_context *rctx = llama_new_context_with_model(g_model, rp);
    CHECK(llama_decode(rctx, llama_batch_get_one(toks, n, 0, 0)) == 0);
    CHECK(max_diff(llama_get_logits(rctx), last) > 1e-3);
    llama_free(rctx);
    rp.rope_freq_base = 0.0f;
    rp.rope_scaling_type = LLAMA_ROPE_SCALING_YARN;
    rp.rope_freq_scale = 0.5f;
    rctx = llama_new_context_with_model(g_model, rp);
    CHECK(llama_decode(rctx, llama_batch_get_one(toks, n, 0, 0)) == 0);
    const float *y = llama_get_logits(rctx);
    bool finite = true;
    for (int i = 0; i < g_n_vocab; i++) finite = finite && isfinite(y[i]);
    CHECK(finite);
    llama_free(rctx);
    rp.rope_scaling_type = 7; /* invalid */
    CHECK(llama_new_context_with_model(g_model, rp) == NULL);
}

struct beam_result {
    llama_token tokens[64];
    size_t n;
    int calls;
    bool saw_last;
};

/* Collects committed prefixes, as b1892's beam-search example does. */
static void on_beams(void *data, struct llama_beams_state st) {
    struct beam_result *r = data;
    r->calls++;
    if (st.last_call) {
        r->saw_last = true;
        for (size_t i = 0; i < st.beam_views[0].n_tokens && r->n < 64; i++) r->tokens[r->n++] = st.beam_views[0].tokens[i];
        return;
    }
    for (size_t i = 0; i < st.common_prefix_length && r->n < 64; i++) r->tokens[r->n++] = st.beam_views[0].tokens[i];
}

/* One beam is greedy decoding; more beams find a sequence at least as likely. */
static void test_beam_search(void) {
    llama_token toks[64];
    int n = tokenize("Once upon a time", toks, 64);
    struct llama_context *ctx = new_ctx(128, 64);
    CHECK(llama_decode(ctx, llama_batch_get_one(toks, n, 0, 0)) == 0);
    struct beam_result one = { .n = 0 };
    llama_beam_search(ctx, on_beams, &one, 1, n, 12);
    CHECK(one.saw_last && one.calls >= 12);
    CHECK_EQ_INT(one.n, 12);

    /* greedy reference */
    llama_kv_cache_clear(ctx);
    CHECK(llama_decode(ctx, llama_batch_get_one(toks, n, 0, 0)) == 0);
    llama_token greedy[12];
    for (int i = 0; i < 12; i++) {
        llama_token_data cand[512];
        const float *lg = llama_get_logits(ctx);
        for (int t = 0; t < g_n_vocab; t++) cand[t] = (llama_token_data){ t, lg[t], 0 };
        llama_token_data_array arr = { cand, (size_t)g_n_vocab, false };
        greedy[i] = llama_sample_token_greedy(ctx, &arr);
        CHECK(llama_decode(ctx, llama_batch_get_one(&greedy[i], 1, n + i, 0)) == 0);
    }
    CHECK(memcmp(greedy, one.tokens, sizeof greedy) == 0);

    llama_kv_cache_clear(ctx);
    CHECK(llama_decode(ctx, llama_batch_get_one(toks, n, 0, 0)) == 0);
    struct beam_result three = { .n = 0 };
    llama_beam_search(ctx, on_beams, &three, 3, n, 12);
    CHECK(three.saw_last && three.n >= 1);
    llama_beam_search(NULL, on_beams, &three, 3, n, 12); /* invalid: an error, no crash */
    llama_beam_search(ctx, on_beams, &three, 0, n, 12);
    llama_free(ctx);
}

int main(void) {
    llama_backend_init(false);
    g_model = golden_load_model("models/stories260K.gguf");
    CHECK(g_model != NULL);
    if (!g_model) return test_finish("test_decode");
    g_n_vocab = llama_n_vocab(g_model);
    test_three_sequences_in_one_batch();
    test_seq_shift();
    test_full_cache_and_bad_input();
    test_vocab_only();
    test_beam_search();
    test_params_and_embd_input();
    llama_free_model(g_model);
    llama_backend_free();
    return test_finish("test_decode");
}

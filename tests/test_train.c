/*
 * Training (src/train/trainer.h) end to end on a tiny built-in corpus:
 *  - the loss falls: 60 updates take the mean training loss from about
 *    ln(n_vocab) to below TRAIN_LOSS_TARGET, and the validation loss falls too;
 *  - llama.h loads the written model, its loss on the validation windows is
 *    the training graph's, and its greedy continuation uses corpus words;
 *  - a run interrupted by a checkpoint and resumed in a new session continues
 *    bit for bit (same losses, same weights) as the uninterrupted run, and the
 *    thread count does not change any bit;
 *  - checkpoints refuse a session of another shape;
 *  - the written model is a llama GGUF with the expected keys, vocabulary and
 *    tensor shapes (F32, F16, Q8_0);
 *  - `llamac train`: progress, log, checkpoint, resume, one-line errors.
 *
 * The corpus is tokenized line by line (train_tokenize_lines) with a
 * vocabulary learned from it by tokenizer_train, read back through the SPM
 * tokenizer of src/vocab, as `llamac train` does.
 */
#include "test_util.h"

#include <unistd.h>

#include "cli_test_util.h"
#include "core/log.h"
#include "gguf/gguf.h"
#include "llama.h"
#include "quant/quant.h"
#include "train/tokenizer_train.h"
#include "train/train_data.h"
#include "train/trainer.h"
#include "vocab/vocab.h"

#define TRAIN_LOSS_TARGET 3.0f

static const char *const g_corpus =
    "the cat sat on the mat and the dog sat on the log.\n"
    "the dog saw the cat and the cat saw the dog.\n"
    "a bird sang in the tree and the cat looked up at the bird.\n"
    "the sun rose over the hill and the bird sang again.\n"
    "the dog ran to the hill and the cat ran to the tree.\n"
    "in the morning the cat sat on the mat and the dog slept.\n"
    "the bird flew over the mat and the log and the hill.\n"
    "the cat and the dog and the bird sat in the sun.\n"
    "at night the moon rose over the tree and the hill.\n"
    "the dog barked at the moon and the cat slept on the mat.\n";

static const char *const g_valid = "the cat sat on the log and the dog sat on the mat.\n"
                                   "the bird sang in the sun and the moon rose over the tree.\n";

/* ---- tokens ------------------------------------------------------------------------ */

struct data {
    struct tokenizer_vocab *vocab;
    int32_t *train, *valid;
    size_t n_train, n_valid;
    char vocab_path[256];
};

static bool data_init(struct data *d) {
    struct tokenizer_train_params tp;
    tokenizer_train_params_default(&tp);
    tp.vocab_size = 320;
    tp.character_coverage = 1.0;
    d->vocab = tokenizer_train(g_corpus, strlen(g_corpus), &tp);
    if (!d->vocab) return false;
    snprintf(d->vocab_path, sizeof d->vocab_path, "test_train_vocab_%d.gguf", (int)getpid());
    if (!tokenizer_vocab_write_gguf(d->vocab, "tiny", d->vocab_path)) return false;
    struct gguf_reader *r = gguf_open_file(d->vocab_path, true);
    struct vocab *v = r ? vocab_load_gguf(r) : NULL;
    if (v) {
        d->train = train_tokenize_lines(v, g_corpus, strlen(g_corpus), &d->n_train);
        d->valid = train_tokenize_lines(v, g_valid, strlen(g_valid), &d->n_valid);
        /* each line: its tokens, then <0x0A>; the first word has its "\u2581" piece */
        CHECK(d->train && d->train[d->n_train - 1] == TOKENIZER_TRAIN_N_SPECIAL + '\n');
        CHECK(d->train && strncmp(d->vocab->tokens[d->train[0]], "\xe2\x96\x81the", 6) == 0);
        size_t n_lines = 0;
        for (size_t i = 0; d->train && i < d->n_train; i++) n_lines += d->train[i] == vocab_nl(v);
        CHECK_EQ_INT(n_lines, 10);
        size_t n_empty = 1;
        int32_t *none = train_tokenize_lines(v, "\r\n\n", 3, &n_empty);
        CHECK(none != NULL && n_empty == 0);
        free(none);
    }
    vocab_free(v);
    gguf_close(r);
    return d->train && d->valid;
}

static void data_free(struct data *d) {
    remove(d->vocab_path);
    tokenizer_vocab_free(d->vocab);
    free(d->train);
    free(d->valid);
}

static void params_tiny(struct train_params *p, const struct data *d) {
    train_params_default(p);
    p->hp.n_vocab = d->vocab->n_tokens;
    p->hp.n_ctx = 16;
    p->hp.n_embd = 32;
    p->hp.n_layer = 2;
    p->hp.n_head = 4;
    p->hp.n_head_kv = 2; /* grouped-query attention */
    p->hp.n_ff = 64;
    p->n_batch = 4;
    p->n_accum = 2;
    p->n_threads = 2;
    p->seed = 42;
    p->opt.lr = 1e-2f;
    p->opt.lr_min = 1e-3f;
    p->opt.warmup = 5;
    p->opt.n_steps = 60;
}

/* ---- the trained file through llama.h -------------------------------------------------- */

/* Loads the session's model (written as F32) with llama.h: its loss on the
 * session's validation windows equals the training graph's, and greedy
 * generation continues a prompt with words of the corpus. */
static void check_llama_h(const struct data *d, const struct train_session *s, float val_loss) {
    char path[256];
    snprintf(path, sizeof path, "test_train_llama_%d.gguf", (int)getpid());
    struct gguf_reader *vr = gguf_open_file(d->vocab_path, true);
    CHECK(vr && train_session_write_model(s, vr, "tiny", GGML_TYPE_F32, path));
    gguf_close(vr);
    const struct train_hparams *hp = &train_session_model(s)->hp;
    llama_backend_init(false);
    struct llama_model *model = llama_load_model_from_file(path, llama_model_default_params());
    CHECK_MSG(model != NULL, "llama.h cannot load the trained model");
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = (uint32_t)hp->n_ctx;
    cp.n_batch = (uint32_t)hp->n_ctx;
    cp.n_threads = cp.n_threads_batch = 2;
    cp.seed = 1;
    struct llama_context *ctx = model ? llama_new_context_with_model(model, cp) : NULL;
    CHECK(ctx != NULL);
    if (!ctx) {
        llama_free_model(model);
        remove(path);
        return;
    }
    CHECK_EQ_INT(llama_n_ctx_train(model), hp->n_ctx);
    CHECK_EQ_INT(llama_n_vocab(model), hp->n_vocab);

    /* the validation windows of train_session_eval: BOS, then n_ctx - 1 tokens */
    const int64_t n_windows = train_session_eval_windows(s);
    const size_t last = d->n_valid - (size_t)hp->n_ctx;
    struct llama_batch batch = llama_batch_init(hp->n_ctx, 0, 1);
    double nll = 0.0;
    for (int64_t w = 0; w < n_windows; w++) {
        const size_t start = n_windows > 1 ? last * (size_t)w / (size_t)(n_windows - 1) : 0;
        llama_kv_cache_clear(ctx);
        batch.n_tokens = hp->n_ctx;
        for (int i = 0; i < hp->n_ctx; i++) {
            batch.token[i] = i == 0 ? llama_token_bos(model) : d->valid[start + (size_t)i - 1];
            batch.pos[i] = i;
            batch.n_seq_id[i] = 1;
            batch.seq_id[i][0] = 0;
            batch.logits[i] = 1;
        }
        CHECK(llama_decode(ctx, batch) == 0);
        for (int i = 0; i < hp->n_ctx; i++) {
            const float *logits = llama_get_logits_ith(ctx, i);
            double max = -INFINITY, sum = 0.0;
            for (int v = 0; v < hp->n_vocab; v++) max = logits[v] > max ? logits[v] : max;
            for (int v = 0; v < hp->n_vocab; v++) sum += exp(logits[v] - max);
            nll -= logits[d->valid[start + (size_t)i]] - max - log(sum);
        }
    }
    const double loss = nll / (double)(n_windows * hp->n_ctx);
    printf("  llama.h on the trained file: validation loss %.5f (training graph %.5f)\n", loss, val_loss);
    CHECK_NEAR(loss, val_loss, 1e-3);

    /* greedy continuation: only words of the corpus */
    llama_kv_cache_clear(ctx);
    int32_t prompt[16];
    const int32_t n_prompt = llama_tokenize(model, "the cat", 7, prompt, 16, true, false);
    CHECK(n_prompt > 1);
    batch.n_tokens = n_prompt;
    for (int i = 0; i < n_prompt; i++) {
        batch.token[i] = prompt[i];
        batch.pos[i] = i;
        batch.n_seq_id[i] = 1;
        batch.seq_id[i][0] = 0;
        batch.logits[i] = i == n_prompt - 1;
    }
    char text[512] = "the cat";
    size_t len = strlen(text);
    for (int pos = n_prompt; pos < hp->n_ctx && llama_decode(ctx, batch) == 0; pos++) {
        const float *logits = llama_get_logits_ith(ctx, batch.n_tokens - 1);
        int32_t best = 0;
        for (int v = 1; v < hp->n_vocab; v++) best = logits[v] > logits[best] ? v : best;
        char piece[64];
        const int32_t n = llama_token_to_piece(model, best, piece, sizeof piece);
        if (n > 0 && len + (size_t)n < sizeof text) {
            memcpy(text + len, piece, (size_t)n);
            len += (size_t)n;
            text[len] = '\0';
        }
        batch.n_tokens = 1;
        batch.token[0] = best;
        batch.pos[0] = pos;
        batch.logits[0] = 1;
    }
    printf("  greedy: \"%s\"\n", text);
    int unknown = 0;
    for (char *word = strtok(text, " .\n"); word; word = strtok(NULL, " .\n")) {
        char padded[80];
        snprintf(padded, sizeof padded, " %s", word);
        unknown += strstr(g_corpus, padded) == NULL && strncmp(g_corpus, word, strlen(word)) != 0;
    }
    CHECK_MSG(unknown == 0, "%d generated words are not in the corpus", unknown);
    llama_batch_free(batch);
    llama_free(ctx);
    llama_free_model(model);
    llama_backend_free();
    remove(path);
}

/* ---- the loss falls --------------------------------------------------------------- */

static void test_loss_falls(const struct data *d) {
    struct train_params p;
    params_tiny(&p, d);
    struct train_session *s = train_session_new(&p, d->train, d->n_train, d->valid, d->n_valid, 1);
    CHECK_MSG(s != NULL, "%s", error_last());
    if (!s) return;
    float val0 = 0, val1 = 0;
    CHECK(train_session_eval(s, &val0));
    struct train_step_info info = { 0 }, first = { 0 };
    for (int i = 0; i < p.opt.n_steps; i++) {
        CHECK(train_session_step(s, &info));
        if (i == 0) first = info;
    }
    CHECK(train_session_eval(s, &val1));
    printf("  loss %.4f -> %.4f (ln(n_vocab) = %.4f), validation %.4f -> %.4f\n", first.loss, info.loss,
           log((double)p.hp.n_vocab), val0, val1);
    check_llama_h(d, s, val1);
    CHECK_NEAR(first.loss, log((double)p.hp.n_vocab), 0.3);
    CHECK_MSG(info.loss < TRAIN_LOSS_TARGET, "final training loss %.4f", info.loss);
    CHECK_MSG(val1 < val0 - 1.5f, "validation loss %.4f -> %.4f", val0, val1);
    CHECK_EQ_INT(info.step, p.opt.n_steps);
    CHECK_EQ_INT(info.n_tokens, p.n_batch * p.n_accum * p.hp.n_ctx);
    CHECK(info.grad_norm > 0.0 && isfinite(info.grad_norm));
    train_session_free(s);
}

/* ---- exact resume -------------------------------------------------------------------- */

static void weights_copy(const struct train_session *s, float *out) {
    const struct train_model *m = train_session_model(s);
    for (int i = 0; i < m->n_tensors; i++) {
        const int64_t n = tensor_nelements(m->tensors[i]);
        memcpy(out, m->tensors[i]->data, (size_t)n * sizeof(float));
        out += n;
    }
}

static void test_resume_exact(const struct data *d) {
    enum { N_STEPS = 12, N_FIRST = 5 };
    struct train_params p;
    params_tiny(&p, d);
    p.opt.n_steps = N_STEPS;
    char ckpt[256];
    snprintf(ckpt, sizeof ckpt, "test_train_ckpt_%d.gguf", (int)getpid());

    /* uninterrupted, 2 threads */
    struct train_session *s = train_session_new(&p, d->train, d->n_train, d->valid, d->n_valid, 1);
    CHECK(s != NULL);
    if (!s) return;
    const int64_t n_params = train_model_n_params(train_session_model(s));
    float loss_a[N_STEPS], loss_b[N_STEPS], loss_c[N_STEPS];
    struct train_step_info info;
    for (int i = 0; i < N_STEPS; i++) {
        CHECK(train_session_step(s, &info));
        loss_a[i] = info.loss;
    }
    float val_a = 0, val_b = 0;
    CHECK(train_session_eval(s, &val_a));
    float *w_a = malloc((size_t)n_params * sizeof(float)), *w_b = malloc((size_t)n_params * sizeof(float));
    weights_copy(s, w_a);
    train_session_free(s);

    /* interrupted after N_FIRST updates, resumed in a new session with 1 thread */
    s = train_session_new(&p, d->train, d->n_train, d->valid, d->n_valid, 1);
    for (int i = 0; i < N_FIRST; i++) {
        CHECK(train_session_step(s, &info));
        loss_b[i] = info.loss;
    }
    CHECK_MSG(train_session_save_checkpoint(s, ckpt), "%s", error_last());
    train_session_free(s);
    p.n_threads = 1;
    p.seed = 7; /* the checkpoint's RNG state wins over a fresh seed (a warning says so) */
    s = train_session_new(&p, d->train, d->n_train, d->valid, d->n_valid, 1);
    CHECK_MSG(train_session_load_checkpoint(s, ckpt), "%s", error_last());
    CHECK_EQ_INT(train_session_step_count(s), N_FIRST);
    for (int i = N_FIRST; i < N_STEPS; i++) {
        CHECK(train_session_step(s, &info));
        loss_b[i] = info.loss;
    }
    CHECK(train_session_eval(s, &val_b));
    weights_copy(s, w_b);
    CHECK_MSG(memcmp(loss_a, loss_b, sizeof loss_a) == 0, "losses differ after resuming");
    CHECK_MSG(memcmp(w_a, w_b, (size_t)n_params * sizeof(float)) == 0, "weights differ after resuming");
    CHECK_MSG(memcmp(&val_a, &val_b, sizeof val_a) == 0, "validation loss %.9g vs %.9g", val_a, val_b);
    train_session_free(s);

    /* the same run without accumulation differs (the test can tell runs apart) */
    p.n_accum = 1;
    p.n_threads = 2;
    p.seed = 42;
    s = train_session_new(&p, d->train, d->n_train, d->valid, d->n_valid, 1);
    for (int i = 0; i < N_STEPS; i++) {
        CHECK(train_session_step(s, &info));
        loss_c[i] = info.loss;
    }
    CHECK(memcmp(loss_a, loss_c, sizeof loss_a) != 0);

    /* a checkpoint of another batch geometry is refused and changes nothing */
    weights_copy(s, w_a);
    CHECK(!train_session_load_checkpoint(s, ckpt));
    CHECK(strstr(error_last(), "n_accum") != NULL);
    weights_copy(s, w_b);
    CHECK(memcmp(w_a, w_b, (size_t)n_params * sizeof(float)) == 0);
    CHECK_EQ_INT(train_session_step_count(s), N_STEPS);
    train_session_free(s);

    free(w_a);
    free(w_b);
    remove(ckpt);
}

/* ---- the model file -------------------------------------------------------------------- */

static void check_model_file(const struct data *d, const struct train_params *p, const char *path,
                             enum ggml_type type) {
    struct gguf_reader *r = gguf_open_file(path, true);
    CHECK_MSG(r != NULL, "%s", error_last());
    if (!r) return;
    const char *s = NULL;
    uint32_t u = 0;
    float f = 0;
    CHECK(gguf_get_str(r, "general.architecture", &s) && strcmp(s, "llama") == 0);
    CHECK(gguf_get_str(r, "general.name", &s) && strcmp(s, "tiny test") == 0);
    CHECK(gguf_get_str(r, "tokenizer.ggml.model", &s) && strcmp(s, "llama") == 0);
    const int64_t tokens = gguf_find_key(r, "tokenizer.ggml.tokens");
    CHECK(tokens >= 0 && gguf_arr_n(r, tokens) == (uint64_t)d->vocab->n_tokens);
    CHECK(tokens >= 0 && strcmp(gguf_arr_str(r, tokens, 300), d->vocab->tokens[300]) == 0);
    CHECK(gguf_find_key(r, "tokenizer.ggml.scores") >= 0 && gguf_find_key(r, "tokenizer.ggml.token_type") >= 0);
    CHECK(gguf_get_u32(r, "llama.context_length", &u) && u == 16);
    CHECK(gguf_get_u32(r, "llama.embedding_length", &u) && u == 32);
    CHECK(gguf_get_u32(r, "llama.block_count", &u) && u == 2);
    CHECK(gguf_get_u32(r, "llama.feed_forward_length", &u) && u == 64);
    CHECK(gguf_get_u32(r, "llama.attention.head_count", &u) && u == 4);
    CHECK(gguf_get_u32(r, "llama.attention.head_count_kv", &u) && u == 2);
    CHECK(gguf_get_u32(r, "llama.rope.dimension_count", &u) && u == 8);
    CHECK(gguf_get_f32(r, "llama.attention.layer_norm_rms_epsilon", &f) && f == 1e-5f);
    CHECK(gguf_get_u32(r, "general.file_type", &u) &&
          u == (type == GGML_TYPE_F32 ? 0u : type == GGML_TYPE_F16 ? 1u : 7u));
    CHECK_EQ_INT(gguf_n_tensors(r), 3 + 9 * p->hp.n_layer);
    static const struct {
        const char *name;
        int64_t ne0, ne1;
    } want[] = {
        { "token_embd.weight", 32, 0 },        { "blk.0.attn_norm.weight", 32, 1 },
        { "blk.1.attn_q.weight", 32, 32 },     { "blk.1.attn_k.weight", 32, 16 },
        { "blk.1.attn_v.weight", 32, 16 },     { "blk.0.attn_output.weight", 32, 32 },
        { "blk.1.ffn_norm.weight", 32, 1 },    { "blk.0.ffn_gate.weight", 32, 64 },
        { "blk.0.ffn_down.weight", 64, 32 },   { "blk.1.ffn_up.weight", 32, 64 },
        { "output_norm.weight", 32, 1 },       { "output.weight", 32, 0 },
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        const int64_t ti = gguf_find_tensor(r, want[i].name);
        CHECK_MSG(ti >= 0, "tensor %s missing", want[i].name);
        if (ti < 0) continue;
        const struct gguf_tensor_info *t = gguf_tensor(r, ti);
        const int64_t ne1 = want[i].ne1 ? want[i].ne1 : d->vocab->n_tokens;
        CHECK_MSG(t->ne[0] == want[i].ne0 && t->ne[1] == ne1, "%s: [%lld, %lld]", want[i].name,
                  (long long)t->ne[0], (long long)t->ne[1]);
        CHECK_EQ_INT(t->n_dims, ne1 == 1 ? 1 : 2);
        CHECK_EQ_INT(t->type, ne1 == 1 ? GGML_TYPE_F32 : type);
    }
    gguf_close(r);
}

static void test_model_file(const struct data *d) {
    struct train_params p;
    params_tiny(&p, d);
    p.opt.n_steps = 2;
    p.opt.warmup = 1;
    struct train_session *s = train_session_new(&p, d->train, d->n_train, NULL, 0, 1);
    CHECK_MSG(s != NULL, "%s", error_last());
    if (!s) return;
    CHECK(train_session_step(s, NULL));
    struct gguf_reader *vocab = gguf_open_file(d->vocab_path, true);
    CHECK(vocab != NULL);
    char path[256];
    snprintf(path, sizeof path, "test_train_model_%d.gguf", (int)getpid());

    CHECK_MSG(train_session_write_model(s, vocab, "tiny test", GGML_TYPE_F32, path), "%s", error_last());
    check_model_file(d, &p, path, GGML_TYPE_F32);
    /* the F32 file holds the weights exactly */
    struct gguf_reader *r = gguf_open_file(path, true);
    const struct tensor *wq = train_session_model(s)->layers[1].wq;
    const int64_t ti = r ? gguf_find_tensor(r, "blk.1.attn_q.weight") : -1;
    CHECK(ti >= 0 && memcmp(gguf_tensor(r, ti)->data, wq->data, tensor_nbytes(wq)) == 0);
    gguf_close(r);

    CHECK_MSG(train_session_write_model(s, vocab, "tiny test", GGML_TYPE_F16, path), "%s", error_last());
    check_model_file(d, &p, path, GGML_TYPE_F16);

    if (type_traits_get(GGML_TYPE_Q8_0)->from_float_reference) {
        CHECK_MSG(train_session_write_model(s, vocab, "tiny test", GGML_TYPE_Q8_0, path), "%s", error_last());
        check_model_file(d, &p, path, GGML_TYPE_Q8_0);
    } else {
        CHECK(!train_session_write_model(s, vocab, "tiny test", GGML_TYPE_Q8_0, path));
        CHECK(strstr(error_last(), "no quantizer") != NULL);
    }
    /* k-quants need rows of 256 */
    CHECK(!train_session_write_model(s, vocab, "tiny test", GGML_TYPE_Q4_K, path));
    CHECK(strstr(error_last(), "no quantizer") || strstr(error_last(), "whole q4_K blocks"));
    CHECK(!train_session_eval(s, &(float){ 0 }));
    remove(path);
    gguf_close(vocab);
    train_session_free(s);
}

static void test_bad_params(const struct data *d) {
    struct train_params p;
    params_tiny(&p, d);
    p.hp.n_head_kv = 3;
    CHECK(train_session_new(&p, d->train, d->n_train, NULL, 0, 1) == NULL);
    CHECK(strstr(error_last(), "n_head_kv") != NULL);
    params_tiny(&p, d);
    CHECK(train_session_new(&p, d->train, 10, NULL, 0, 1) == NULL);
    CHECK(strstr(error_last(), "fewer than one window") != NULL);
    params_tiny(&p, d);
    p.opt.warmup = 100;
    CHECK(train_session_new(&p, d->train, d->n_train, NULL, 0, 1) == NULL);
    /* a token outside the vocabulary is found when the batch is made */
    params_tiny(&p, d);
    int32_t *bad = malloc(d->n_train * sizeof *bad);
    for (size_t i = 0; i < d->n_train; i++) bad[i] = p.hp.n_vocab;
    struct train_session *s = train_session_new(&p, bad, d->n_train, NULL, 0, 1);
    CHECK_MSG(s != NULL, "%s", error_last());
    CHECK(s && !train_session_step(s, NULL));
    CHECK(strstr(error_last(), "outside the vocabulary") != NULL);
    train_session_free(s);
    free(bad);
}

/* ---- the command line -------------------------------------------------------------------- */

static void test_cli(const struct data *d) {
    char train[512], valid[512], model[512], model2[512], log[512], ckpt[512];
    snprintf(train, sizeof train, "%s", test_tmp_path("train.txt"));
    snprintf(valid, sizeof valid, "%s", test_tmp_path("valid.txt"));
    snprintf(model, sizeof model, "%s", test_tmp_path("model.gguf"));
    snprintf(model2, sizeof model2, "%s", test_tmp_path("model2.gguf"));
    snprintf(log, sizeof log, "%s", test_tmp_path("train.log"));
    snprintf(ckpt, sizeof ckpt, "%s", test_tmp_path("train.ckpt"));
    CHECK(test_write_file(train, g_corpus, strlen(g_corpus)));
    CHECK(test_write_file(valid, g_valid, strlen(g_valid)));
    const char *const data[] = { "train", "--vocab", d->vocab_path, "--train-data", train, "--valid-data", valid, NULL };
    const char *const shape[] = { "--n-embd", "32", "--n-layer", "2", "--n-head", "4", "--n-head-kv", "2", "--n-ff",
                                  "64", "--n-ctx", "16", "--batch", "4", "--steps", "6", "--warmup", "2", "--lr",
                                  "1e-2", "--seed", "5", "-t", "2", NULL };
    const char *args[64];
    struct cli_result r = cli_run(cli_args_join(args, 64, (const char *const *[]){
                                      data, shape,
                                      (const char *[]){ "--eval-interval", "3", "--log-interval", "2", "--log", log,
                                                        "--checkpoint", ckpt, "--checkpoint-interval", "3", "-o",
                                                        model, NULL },
                                      NULL }),
                                  NULL, 300);
    CHECK_EQ_INT(r.status, 0);
    const char *out = r.out;
    CHECK_MSG(strstr(out, "data:     209 training tokens, 41 validation tokens") != NULL, "%s", out);
    CHECK_MSG(strstr(out, "step      0/6  val_loss") != NULL, "%s", out);
    CHECK_MSG(strstr(out, "step      3/6  loss") != NULL && strstr(out, "step      6/6  loss") != NULL, "%s", out);
    CHECK(strstr(out, "tok/s") != NULL && strstr(out, "ETA") != NULL);
    CHECK_MSG(strstr(out, "saved checkpoint") != NULL && strstr(out, "wrote ") != NULL, "%s", out);
    cli_result_free(&r);
    /* the log: a header, step 0 (validation only), then every update */
    size_t n_log = 0;
    char *text = test_read_file(log, &n_log);
    CHECK(text && strncmp(text, "step\ttokens\tseconds\tlr\tloss\tval_loss\n0\t0\t0\t\t\t", 41) == 0);
    int lines = 0, with_val = 0;
    for (char *p = text; p && *p; p++) {
        if (*p != '\n') continue;
        lines++;
        with_val += p[-1] != '\t';
    }
    CHECK_EQ_INT(lines, 8);
    CHECK_EQ_INT(with_val, 1 + 3); /* the header, steps 0, 3 and 6 */
    free(text);
    struct gguf_reader *gr = gguf_open_file(model, true);
    const char *name = NULL;
    CHECK(gr && gguf_get_str(gr, "general.name", &name) && strcmp(name, "llamac model") == 0);
    gguf_close(gr);

    /* resuming the finished run writes the same model without training */
    r = cli_run(cli_args_join(args, 64, (const char *const *[]){
                    data, shape, (const char *[]){ "--resume", ckpt, "-o", model2, NULL }, NULL }),
                NULL, 300);
    CHECK_EQ_INT(r.status, 0);
    CHECK_MSG(strstr(r.out, "resumed:  ") != NULL && strstr(r.out, "step ") == NULL, "%s", r.out);
    cli_result_free(&r);
    CHECK(test_files_equal(model, model2));

    /* errors are one line */
    r = cli_run((const char *[]){ "train", "--vocab", d->vocab_path, "--train-data", train, "--n-embd", "64", "--n-ctx",
                                  "16", "--valid-fraction", "0", "--resume", ckpt, "-o", model2, NULL },
                NULL, 300);
    CHECK_EQ_INT(r.status, 1);
    CHECK_MSG(strstr(r.err, "llamac train: checkpoint: llamac.train.n_embd is 32, this run has 64\n") != NULL, "%s",
              r.err);
    cli_result_free(&r);
    r = cli_run((const char *[]){ "train", "--train-data", train, "-o", model2, NULL }, NULL, 300);
    CHECK_EQ_INT(r.status, 1);
    CHECK_STR_EQ(r.err, "llamac train: expected --vocab FILE, --train-data FILE and -o FILE (see llamac train --help)\n");
    cli_result_free(&r);
    r = cli_run((const char *[]){ "train", "--quantize", "q9_9", NULL }, NULL, 300);
    CHECK_EQ_INT(r.status, 1);
    CHECK_STR_EQ(r.err, "llamac train: --quantize: unknown type 'q9_9'\n");
    cli_result_free(&r);
}

static void quiet_log(enum ggml_log_level level, const char *text, void *user_data) {
    (void)level;
    (void)text;
    (void)user_data;
}

int main(void) {
    struct data d;
    memset(&d, 0, sizeof d);
    log_set_callback(quiet_log, NULL);
    test_tmp_dir_create("test_train");
    CHECK_MSG(data_init(&d), "%s", error_last());
    printf("  corpus: %zu training tokens, %zu validation tokens, %d in the vocabulary\n", d.n_train, d.n_valid,
           d.vocab ? d.vocab->n_tokens : 0);
    if (d.vocab) {
        test_loss_falls(&d);
        test_resume_exact(&d);
        test_model_file(&d);
        test_bad_params(&d);
        test_cli(&d);
    }
    data_free(&d);
    test_tmp_dir_remove();
    log_set_callback(NULL, NULL);
    return test_finish("test_train");
}

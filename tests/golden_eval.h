/*
 * Shared by the end-to-end tests: running a model through llama.h the way the
 * golden data was recorded (../shared/golden/README.md) and comparing.
 */
#ifndef LLAMAC_TEST_GOLDEN_EVAL_H
#define LLAMAC_TEST_GOLDEN_EVAL_H

#include <cjson/cJSON.h>
#include <float.h>

#include "backend/cpu/cpu_packed.h"
#include "gguf/gguf.h"
#include "llama.h"
#include "test_util.h"

/* The fast matrix-product mode (LLAMAC_MATMUL=fast, backend/cpu/cpu_packed.h)
 * rounds Q4_0, Q8_0, Q4_K and Q6_K products differently from b1892 (fewer float
 * operations per block), so for models with such weights the logits agree
 * within a float tolerance instead of to the printed digits; each test
 * states its own, measured. Greedy tokens must still be b1892's, except at a
 * near tie: a step may pick another token only where b1892's own logits of
 * the two tokens are within that tolerance. Models without such weights stay
 * bit-exact, and so, to the exact tolerance, do models where only the output
 * matrix has one of these types (most k-quant files: Q6_K): its products are
 * the logits, which its roundings move by a few ulps (measured: 2e-6), not
 * amplified by any layer after it. */
static inline bool golden_fast_affects(const char *model_path) {
    if (!cpu_fast_matmul_active()) return false;
    struct gguf_reader *r = gguf_open_file(model_path, true);
    bool affected = false;
    for (int64_t i = 0; r && i < gguf_n_tensors(r); i++) {
        if (!strcmp(gguf_tensor(r, i)->name, "output.weight")) continue;
        const enum ggml_type t = gguf_tensor(r, i)->type;
        affected |= cpu_fast_mode_type(t);
    }
    if (r) gguf_close(r);
    return affected;
}

/* The recording's context: defaults with seed 1234, n_ctx 256, n_batch 256, given threads. */
static inline struct llama_context *golden_context(struct llama_model *model, int n_threads, bool embedding) {
    struct llama_context_params cp = llama_context_default_params();
    cp.seed = 1234;
    cp.n_ctx = 256;
    cp.n_batch = 256;
    cp.n_threads = cp.n_threads_batch = (uint32_t)n_threads;
    cp.embedding = embedding;
    return llama_new_context_with_model(model, cp);
}

/* A model under the shared data directory (the test skips when it is
 * absent) with default parameters; NULL when it does not load. */
static inline struct llama_model *golden_load_model(const char *rel) {
    return llama_load_model_from_file(test_require_shared(rel), llama_model_default_params());
}

/* A context that keeps the logits of every position (for scoring text): n_ctx = n_batch = n, 2 threads. */
static inline struct llama_context *golden_scoring_context(struct llama_model *model, uint32_t n) {
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = cp.n_batch = n;
    cp.n_threads = cp.n_threads_batch = 2;
    cp.logits_all = true;
    return llama_new_context_with_model(model, cp);
}

static inline int golden_int_array(const cJSON *arr, int32_t *out, int cap) {
    int n = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, arr) {
        if (n < cap) out[n] = (int32_t)it->valuedouble;
        n++;
    }
    return n;
}

/* Largest |ours - theirs| over a row of logits. */
static inline double golden_row_diff(const float *ours, const cJSON *row, int n_vocab) {
    double worst = 0;
    int i = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, row) {
        if (i >= n_vocab) break;
        double d = fabs((double)ours[i] - it->valuedouble);
        if (!(d <= worst)) worst = d; /* NaN counts as worst */
        i++;
    }
    return worst;
}

static inline llama_token golden_argmax(const float *logits, int n) {
    int best = 0;
    for (int i = 1; i < n; i++) {
        if (logits[i] > logits[best]) best = i;
    }
    return best;
}

/* How a prompt is fed. */
enum golden_feed { FEED_ONE_BATCH, FEED_TOKEN_BY_TOKEN, FEED_BATCHES_OF_7 };

struct golden_result {
    double max_prompt_diff;  /* over every position's logits */
    double max_greedy_diff;  /* over the top-5 logits of every greedy step */
    int greedy_mismatch;     /* first greedy step whose token differs (beyond a near tie), -1 if none */
    int n_near_ties;         /* greedy steps that differ within a near tie */
    int n_greedy;
};

/* b1892's logit of token `id` at a greedy step (its top-5 entry), or -inf when not among them. */
static inline double golden_top5_logit(const cJSON *entries, llama_token id) {
    const cJSON *entry;
    cJSON_ArrayForEach(entry, entries) {
        if ((llama_token)cJSON_GetArrayItem(entry, 0)->valuedouble == id) {
            return cJSON_GetArrayItem(entry, 1)->valuedouble;
        }
    }
    return -INFINITY;
}

/* Decodes the prompt (logits for every position), compares, then generates
 * greedily n steps, each token decoded alone, comparing tokens and top-5
 * logits. A step whose token differs where b1892's logits of its token and
 * ours are within tie_tol counts as a near tie, not a mismatch (0: exact). */
static inline bool golden_run_prompt(struct llama_context *ctx, const cJSON *prompt, enum golden_feed feed,
                                     double tie_tol, struct golden_result *res) {
    const struct llama_model *model = llama_get_model(ctx);
    const int n_vocab = llama_n_vocab(model);
    int32_t tokens[512];
    const int n = golden_int_array(cJSON_GetObjectItem(prompt, "tokens"), tokens, 512);
    const cJSON *logits = cJSON_GetObjectItem(prompt, "logits");
    memset(res, 0, sizeof *res);
    res->greedy_mismatch = -1;
    llama_kv_cache_clear(ctx);

    struct llama_batch batch = llama_batch_init(n, 0, 1);
    int step = feed == FEED_ONE_BATCH ? n : feed == FEED_TOKEN_BY_TOKEN ? 1 : 7;
    for (int start = 0; start < n; start += step) {
        int m = n - start < step ? n - start : step;
        batch.n_tokens = m;
        for (int i = 0; i < m; i++) {
            batch.token[i] = tokens[start + i];
            batch.pos[i] = start + i;
            batch.n_seq_id[i] = 1;
            batch.seq_id[i][0] = 0;
            batch.logits[i] = 1;
        }
        if (llama_decode(ctx, batch) != 0) {
            llama_batch_free(batch);
            return false;
        }
        for (int i = 0; i < m; i++) {
            double d = golden_row_diff(llama_get_logits_ith(ctx, i), cJSON_GetArrayItem(logits, start + i), n_vocab);
            if (!(d <= res->max_prompt_diff)) res->max_prompt_diff = d;
        }
    }
    llama_batch_free(batch);

    const cJSON *greedy = cJSON_GetObjectItem(prompt, "greedy");
    const cJSON *gtokens = cJSON_GetObjectItem(greedy, "tokens");
    const cJSON *top5 = cJSON_GetObjectItem(greedy, "top5");
    res->n_greedy = cJSON_GetArraySize(gtokens);
    const float *cur = llama_get_logits_ith(ctx, (n - 1) % step);
    for (int s = 0; s < res->n_greedy; s++) {
        llama_token id = golden_argmax(cur, n_vocab);
        const cJSON *entry;
        cJSON_ArrayForEach(entry, cJSON_GetArrayItem(top5, s)) {
            int tid = (int)cJSON_GetArrayItem(entry, 0)->valuedouble;
            double d = fabs(cur[tid] - cJSON_GetArrayItem(entry, 1)->valuedouble);
            if (!(d <= res->max_greedy_diff)) res->max_greedy_diff = d;
        }
        const llama_token want = (llama_token)cJSON_GetArrayItem(gtokens, s)->valuedouble;
        if (id != want) {
            const cJSON *entries = cJSON_GetArrayItem(top5, s);
            if (golden_top5_logit(entries, want) - golden_top5_logit(entries, id) <= tie_tol) {
                res->n_near_ties++;
            } else if (res->greedy_mismatch < 0) {
                res->greedy_mismatch = s;
            }
        }
        /* follow the reference's tokens so later steps stay comparable */
        llama_token next = (llama_token)cJSON_GetArrayItem(gtokens, s)->valuedouble;
        if (llama_decode(ctx, llama_batch_get_one(&next, 1, n + s, 0)) != 0) return false;
        cur = llama_get_logits(ctx);
    }
    return true;
}

#endif

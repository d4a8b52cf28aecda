/* llama.h: the samplers. Each wraps src/sample/ with b1892's bookkeeping:
 * time spent (t_sample_us) and, for the functions that pick a token, n_sample.
 * Functions that need the context's RNG or vocabulary return -1 with an error
 * when it is NULL (b1892 asserts). */
#include "context/context.h"
#include "core/log.h"
#include "core/timer.h"
#include "llama.h"
#include "sample/sampling.h"

static void account(struct llama_context *ctx, int64_t t_start, bool picked) {
    if (!ctx) return;
    ctx->t_sample_us += time_us() - t_start;
    if (picked) ctx->n_sample++;
}

static bool cand_ok(const llama_token_data_array *c, const char *fn) {
    if (c && (c->data || c->size == 0)) return true;
    error_set("%s: candidates are required", fn);
    return false;
}

void llama_set_rng_seed(struct llama_context *ctx, uint32_t seed) {
    if (ctx) rng_mt19937_seed(&ctx->rng, rng_seed_resolve(seed));
}

void llama_sample_repetition_penalties(struct llama_context *ctx, llama_token_data_array *candidates,
                                       const llama_token *last_tokens, size_t penalty_last_n, float penalty_repeat,
                                       float penalty_freq, float penalty_present) {
    if (!cand_ok(candidates, __func__) || (penalty_last_n > 0 && !last_tokens)) return;
    int64_t t = time_us();
    sample_repetition_penalties(candidates, last_tokens, penalty_last_n, penalty_repeat, penalty_freq,
                                penalty_present, ctx ? &ctx->sample_ws : NULL);
    account(ctx, t, false);
}

void llama_sample_apply_guidance(struct llama_context *ctx, float *logits, float *logits_guidance, float scale) {
    if (!ctx || !logits || !logits_guidance) {
        error_set("%s: context, logits and guidance logits are required", __func__);
        return;
    }
    int64_t t = time_us();
    sample_apply_guidance(logits, logits_guidance, (size_t)ctx->model->hparams.n_vocab, scale);
    account(ctx, t, false);
}

void llama_sample_classifier_free_guidance(struct llama_context *ctx, llama_token_data_array *candidates,
                                           struct llama_context *guidance_ctx, float scale) {
    if (!ctx || !guidance_ctx || !cand_ok(candidates, __func__)) {
        error_set("%s: context, guidance context and candidates are required", __func__);
        return;
    }
    float *guidance = llama_get_logits_ith(guidance_ctx, guidance_ctx->n_logit_rows - 1);
    if (!guidance || guidance_ctx->model->hparams.n_vocab != ctx->model->hparams.n_vocab) {
        error_set("%s: the guidance context has no logits for this vocabulary", __func__);
        return;
    }
    int64_t t = time_us();
    sample_classifier_free_guidance(candidates, guidance, ctx->model->hparams.n_vocab, scale, &ctx->sample_ws);
    account(ctx, t, false);
}

void llama_sample_softmax(struct llama_context *ctx, llama_token_data_array *candidates) {
    if (!cand_ok(candidates, __func__)) return;
    int64_t t = time_us();
    sample_softmax(candidates);
    account(ctx, t, false);
}

void llama_sample_top_k(struct llama_context *ctx, llama_token_data_array *candidates, int32_t k, size_t min_keep) {
    if (!cand_ok(candidates, __func__)) return;
    int64_t t = time_us();
    sample_top_k(candidates, k, min_keep);
    account(ctx, t, false);
}

void llama_sample_top_p(struct llama_context *ctx, llama_token_data_array *candidates, float p, size_t min_keep) {
    if (!cand_ok(candidates, __func__)) return;
    int64_t t = time_us();
    sample_top_p(candidates, p, min_keep);
    account(ctx, t, false);
}

void llama_sample_min_p(struct llama_context *ctx, llama_token_data_array *candidates, float p, size_t min_keep) {
    if (!cand_ok(candidates, __func__)) return;
    int64_t t = time_us();
    sample_min_p(candidates, p, min_keep);
    account(ctx, t, false);
}

void llama_sample_tail_free(struct llama_context *ctx, llama_token_data_array *candidates, float z, size_t min_keep) {
    if (!cand_ok(candidates, __func__)) return;
    int64_t t = time_us();
    sample_tail_free(candidates, z, min_keep);
    account(ctx, t, false);
}

void llama_sample_typical(struct llama_context *ctx, llama_token_data_array *candidates, float p, size_t min_keep) {
    if (!cand_ok(candidates, __func__)) return;
    int64_t t = time_us();
    sample_typical(candidates, p, min_keep, ctx ? &ctx->sample_ws : NULL);
    account(ctx, t, false);
}

void llama_sample_temp(struct llama_context *ctx, llama_token_data_array *candidates, float temp) {
    if (!cand_ok(candidates, __func__)) return;
    int64_t t = time_us();
    sample_temp(candidates, temp);
    account(ctx, t, false);
}

void llama_sample_temperature(struct llama_context *ctx, llama_token_data_array *candidates, float temp) {
    llama_sample_temp(ctx, candidates, temp);
}

llama_token llama_sample_token_mirostat(struct llama_context *ctx, llama_token_data_array *candidates, float tau,
                                        float eta, int32_t m, float *mu) {
    if (!ctx || !mu || !cand_ok(candidates, __func__)) {
        error_set("%s: context, candidates and mu are required", __func__);
        return -1;
    }
    int64_t t = time_us();
    llama_token id = sample_token_mirostat(candidates, &ctx->rng, (int32_t)ctx->model->hparams.n_vocab, tau, eta, m,
                                           mu, NULL);
    account(ctx, t, true);
    return id;
}

llama_token llama_sample_token_mirostat_v2(struct llama_context *ctx, llama_token_data_array *candidates, float tau,
                                           float eta, float *mu) {
    if (!ctx || !mu || !cand_ok(candidates, __func__)) {
        error_set("%s: context, candidates and mu are required", __func__);
        return -1;
    }
    int64_t t = time_us();
    llama_token id = sample_token_mirostat_v2(candidates, &ctx->rng, tau, eta, mu, NULL);
    account(ctx, t, true);
    return id;
}

llama_token llama_sample_token_greedy(struct llama_context *ctx, llama_token_data_array *candidates) {
    if (!cand_ok(candidates, __func__)) return -1;
    int64_t t = time_us();
    llama_token id = sample_token_greedy(candidates, NULL);
    account(ctx, t, true);
    return id;
}

llama_token llama_sample_token(struct llama_context *ctx, llama_token_data_array *candidates) {
    if (!ctx || !cand_ok(candidates, __func__)) {
        error_set("%s: a context (for its random generator) and candidates are required", __func__);
        return -1;
    }
    int64_t t = time_us();
    llama_token id = sample_token(candidates, &ctx->rng, NULL);
    account(ctx, t, true);
    return id;
}

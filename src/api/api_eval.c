/* b1892's text scoring arithmetic (api/eval.h). */
#include "api/eval.h"

#include <math.h>
#include <string.h>

static float eval_max_logit(const float *logits, int32_t n_vocab) {
    float max = logits[0];
    for (int32_t i = 1; i < n_vocab; i++) {
        if (logits[i] > max) max = logits[i];
    }
    return max;
}

static double eval_sum_exp(const float *logits, int32_t n_vocab, float max) {
    double sum = 0.0;
    for (int32_t i = 0; i < n_vocab; i++) sum += expf(logits[i] - max);
    return sum;
}

double eval_token_nll(const float *logits, int32_t n_vocab, llama_token tok) {
    const float max = eval_max_logit(logits, n_vocab);
    const double sum = eval_sum_exp(logits, n_vocab, max);
    return -((double)(logits[tok] - max) - log(sum));
}

float eval_token_prob(const float *logits, int32_t n_vocab, llama_token tok) {
    const float max = eval_max_logit(logits, n_vocab);
    const double sum = eval_sum_exp(logits, n_vocab, max);
    return (float)(expf(logits[tok] - max) / sum);
}

void eval_nll_add(struct eval_nll *s, double nll) {
    s->sum += nll;
    s->sum2 += nll * nll;
    s->count++;
}

double eval_nll_ppl(const struct eval_nll *s) {
    return exp(s->sum / s->count);
}

bool eval_nll_ppl_stderr(const struct eval_nll *s, double *err) {
    const double mean = s->sum / s->count;
    const double var = s->sum2 / s->count - mean * mean;
    if (!(var > 0) || s->count < 2) return false;
    *err = sqrt(var / (s->count - 1)) * exp(mean);
    return true;
}

int32_t eval_decode_logits(struct llama_context *ctx, const llama_token *tokens, int32_t n, int32_t n_past,
                           int32_t n_batch, float *logits_out) {
    const size_t n_vocab = (size_t)llama_n_vocab(llama_get_model(ctx));
    for (int32_t i = 0; i < n; i += n_batch) {
        const int32_t n_tokens = n - i < n_batch ? n - i : n_batch;
        llama_kv_cache_seq_rm(ctx, 0, n_past + i, -1);
        const int32_t status = llama_decode(ctx, llama_batch_get_one((llama_token *)tokens + i, n_tokens, n_past + i, 0));
        if (status != 0) return status;
        memcpy(logits_out + (size_t)i * n_vocab, llama_get_logits(ctx), (size_t)n_tokens * n_vocab * sizeof(float));
    }
    return 0;
}

int32_t eval_chunk_nll(struct llama_context *ctx, llama_token *tokens, int32_t n_ctx, int32_t n_batch, bool add_bos,
                       float *logits_out, struct eval_nll *nll) {
    const struct llama_model *model = llama_get_model(ctx);
    const int32_t n_vocab = llama_n_vocab(model);
    llama_kv_cache_clear(ctx);
    const llama_token first = tokens[0];
    if (add_bos) tokens[0] = llama_token_bos(model);
    const int32_t status = eval_decode_logits(ctx, tokens, n_ctx, 0, n_batch, logits_out);
    tokens[0] = first;
    if (status != 0) return status;
    for (int32_t j = n_ctx / 2; j < n_ctx - 1; j++) {
        eval_nll_add(nll, eval_token_nll(logits_out + (size_t)j * n_vocab, n_vocab, tokens[j + 1]));
    }
    return 0;
}

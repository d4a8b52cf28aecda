/*
 * Scoring text with a model the way b1892's perplexity, hellaswag and imatrix
 * tools do, over the public API: `llamac perplexity`, `llamac imatrix` and the
 * tests share these so that every number is computed one way.
 *
 * Numerics are b1892's: the largest logit and the logit differences in float,
 * expf of each difference summed in double, left to right.
 */
#ifndef LLAMAC_API_EVAL_H
#define LLAMAC_API_EVAL_H

#include <stdbool.h>
#include <stdint.h>

#include "llama.h"

/* -log p(tok) from one row of logits (b1892's log_softmax):
 * -((logit[tok] - max) - log(sum_i expf(logit[i] - max))). */
double eval_token_nll(const float *logits, int32_t n_vocab, llama_token tok);

/* p(tok) as the float b1892's softmax() stores: expf(logit[tok] - max) divided
 * by the double sum, rounded to float (strided perplexity and HellaSwag use it). */
float eval_token_prob(const float *logits, int32_t n_vocab, llama_token tok);

/* Running sums of per-token negative log-likelihoods. */
struct eval_nll {
    double sum;
    double sum2;
    int32_t count;
};

void eval_nll_add(struct eval_nll *s, double nll);
/* exp(mean NLL). */
double eval_nll_ppl(const struct eval_nll *s);
/* The perplexity's standard error as b1892 prints it: ppl * sqrt(var / (count - 1))
 * with var = mean(nll^2) - mean(nll)^2. False when var <= 0 or count < 2
 * (b1892 then prints "Unexpected negative standard deviation"). */
bool eval_nll_ppl_stderr(const struct eval_nll *s, double *err);

/* Decodes tokens[0..n) as sequence 0 from position n_past in batches of
 * n_batch (llama_batch_get_one), each after removing what the cache holds for
 * sequence 0 from its position on, and copies the logits of every position to
 * logits_out (n * n_vocab floats). The context must be made with logits_all.
 * Returns llama_decode's status (0 on success). */
int32_t eval_decode_logits(struct llama_context *ctx, const llama_token *tokens, int32_t n, int32_t n_past,
                           int32_t n_batch, float *logits_out);

/* One chunk of b1892's perplexity: decodes tokens[0..n_ctx) from an empty
 * cache with tokens[0] replaced by BOS when add_bos (restored afterwards),
 * leaves every position's logits in logits_out (n_ctx * n_vocab), and adds
 * the NLL of each token of the second half (predicted from positions
 * n_ctx/2 .. n_ctx-2) to *nll. Returns llama_decode's status. */
int32_t eval_chunk_nll(struct llama_context *ctx, llama_token *tokens, int32_t n_ctx, int32_t n_batch, bool add_bos,
                       float *logits_out, struct eval_nll *nll);

#endif

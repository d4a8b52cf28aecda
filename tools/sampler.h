/*
 * b1892's sampling chain (common/sampling.cpp) as the generating tools use it:
 * logit bias, guidance, penalties over a window of recent tokens, grammar,
 * then greedy, mirostat, or the samplers in the configured order and a
 * random draw.
 */
#ifndef LLAMAC_TOOLS_SAMPLER_H
#define LLAMAC_TOOLS_SAMPLER_H

#include "common.h"
#include "llama.h"

struct sampler;

/* NULL (reported through common_fail: "llamac CMD: ..." on stderr, or with
 * cmd NULL the last error) if the grammar does not parse, a
 * logit bias names a token outside the vocabulary, or memory runs out. */
struct sampler *sampler_new(const char *cmd, const struct sampling_params *params, const struct llama_model *model);
void sampler_free(struct sampler *s);

/* b1892's llama_sampling_reset: the grammar starts over and the penalty
 * window is zeros again (mirostat's mu is kept, as b1892 keeps it). */
void sampler_reset(struct sampler *s);

/* Picks the next token from row idx of ctx's logits (ctx_cfg: the guidance
 * context for classifier-free guidance, or NULL). The logit bias is added to
 * ctx's logits in place, as b1892 does. Returns -1 with error_set() when the
 * logits are missing or the grammar allows no token at all. */
llama_token sampler_sample(struct sampler *s, struct llama_context *ctx, struct llama_context *ctx_cfg, int32_t idx);

/* Records a token (prompt or sampled) in the penalty window; with
 * apply_grammar the grammar advances over it. */
void sampler_accept(struct sampler *s, struct llama_context *ctx, llama_token id, bool apply_grammar);

/* The candidates as the last sampler_sample left them (b1892's
 * ctx_sampling->cur, what the server's n_probs reports): after the penalties,
 * the grammar and the samplers that ran, sorted with probabilities where a
 * sampler computed them. Valid until the next sampler_sample. */
llama_token_data_array *sampler_candidates(struct sampler *s);

/* The most recent token of the window (b1892's llama_sampling_last). */
llama_token sampler_last(const struct sampler *s);

/* The pieces of the last n tokens of the window, concatenated into buf
 * (b1892's llama_sampling_prev_str, truncated to cap - 1 bytes from the
 * front so the end is kept); returns the length. */
size_t sampler_prev_str(const struct sampler *s, int32_t n, char *buf, size_t cap);

#endif

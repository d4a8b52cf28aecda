/*
 * b1892's sampling chain (common/sampling.cpp) as the generating tools use it:
 * guidance, penalties over a window of recent tokens, grammar, then greedy,
 * mirostat, or the samplers in the configured order and a random draw.
 */
#ifndef LLAMAC_TOOLS_SAMPLER_H
#define LLAMAC_TOOLS_SAMPLER_H

#include "common.h"
#include "llama.h"

struct sampler;

/* NULL (with a message on stderr) if the grammar does not parse or memory runs out. */
struct sampler *sampler_new(const struct sampling_params *params, const struct llama_model *model);
void sampler_free(struct sampler *s);

/* Picks the next token from row idx of ctx's logits (ctx_cfg: the guidance
 * context for classifier-free guidance, or NULL). */
llama_token sampler_sample(struct sampler *s, struct llama_context *ctx, struct llama_context *ctx_cfg, int32_t idx);

/* Records a token (prompt or sampled) in the penalty window; with
 * apply_grammar the grammar advances over it. */
void sampler_accept(struct sampler *s, struct llama_context *ctx, llama_token id, bool apply_grammar);

#endif

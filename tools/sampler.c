#include "sampler.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"

struct sampler {
    struct sampling_params params;
    const struct llama_model *model;
    int32_t n_vocab;
    llama_token *prev;        /* n_prev most recent tokens, oldest first */
    llama_token_data *cand;   /* n_vocab candidates, rebuilt per token */
    llama_token_data_array cur; /* cand as the last sampler_sample left it */
    float mirostat_mu;
    struct llama_grammar *grammar_initial; /* as parsed, for sampler_reset */
    struct llama_grammar *grammar;         /* the state during generation */
};

struct sampler *sampler_new(const char *cmd, const struct sampling_params *params, const struct llama_model *model) {
    const int32_t n_vocab = llama_n_vocab(model);
    for (int32_t i = 0; i < params->n_logit_bias; i++) {
        if (params->logit_bias[i].token >= n_vocab) {
            common_fail(cmd, "--logit-bias: token %d is outside the vocabulary (%d tokens)", params->logit_bias[i].token,
                     n_vocab);
            return NULL;
        }
    }
    struct sampler *s = calloc(1, sizeof *s);
    if (!s) {
        common_fail(cmd, "out of memory creating the sampler");
        return NULL;
    }
    s->params = *params;
    if (s->params.n_prev < 1) s->params.n_prev = 1;
    s->model = model;
    s->n_vocab = n_vocab;
    s->prev = calloc((size_t)s->params.n_prev, sizeof *s->prev); /* b1892 starts from n_prev zeros */
    s->cand = malloc((size_t)s->n_vocab * sizeof *s->cand);
    /* b1892's common starts mirostat at mu = 0 (it never sets 2 * tau) */
    s->mirostat_mu = 0.0f;
    if (!s->prev || !s->cand) {
        sampler_free(s);
        common_fail(cmd, "out of memory creating the sampler");
        return NULL;
    }
    if (params->grammar && params->grammar[0]) {
        s->grammar_initial = common_grammar_load(cmd, "grammar", params->grammar, NULL);
        s->grammar = s->grammar_initial ? llama_grammar_copy(s->grammar_initial) : NULL;
        if (!s->grammar) {
            if (s->grammar_initial) common_fail(cmd, "out of memory creating the grammar");
            sampler_free(s);
            return NULL;
        }
    }
    return s;
}

void sampler_free(struct sampler *s) {
    if (!s) return;
    llama_grammar_free(s->grammar);
    llama_grammar_free(s->grammar_initial);
    free(s->prev);
    free(s->cand);
    free(s);
}

void sampler_reset(struct sampler *s) {
    if (s->grammar_initial) {
        struct llama_grammar *fresh = llama_grammar_copy(s->grammar_initial);
        if (fresh) { /* on allocation failure the grammar keeps its state */
            llama_grammar_free(s->grammar);
            s->grammar = fresh;
        }
    }
    memset(s->prev, 0, (size_t)s->params.n_prev * sizeof *s->prev);
}

static void apply_sampler(struct llama_context *ctx, llama_token_data_array *cur, char which,
                          const struct sampling_params *p, int32_t n_vocab) {
    const size_t min_keep = 1;
    switch (which) {
    case 'k': llama_sample_top_k(ctx, cur, p->top_k <= 0 ? n_vocab : p->top_k, min_keep); break;
    case 'f': llama_sample_tail_free(ctx, cur, p->tfs_z, min_keep); break;
    case 'y': llama_sample_typical(ctx, cur, p->typical_p, min_keep); break;
    case 'p': llama_sample_top_p(ctx, cur, p->top_p, min_keep); break;
    case 'm': llama_sample_min_p(ctx, cur, p->min_p, min_keep); break;
    case 't': llama_sample_temp(ctx, cur, p->temp); break;
    default: break;
    }
}

llama_token sampler_sample(struct sampler *s, struct llama_context *ctx, struct llama_context *ctx_cfg, int32_t idx) {
    const struct sampling_params *p = &s->params;
    float *logits = llama_get_logits_ith(ctx, idx);
    if (!logits) return -1;
    for (int32_t i = 0; i < p->n_logit_bias; i++) logits[p->logit_bias[i].token] += p->logit_bias[i].bias;
    if (ctx_cfg) {
        float *guidance = llama_get_logits_ith(ctx_cfg, idx);
        if (!guidance) return -1;
        llama_sample_apply_guidance(ctx, logits, guidance, p->cfg_scale);
    }
    for (int32_t i = 0; i < s->n_vocab; i++) s->cand[i] = (llama_token_data){ i, logits[i], 0.0f };
    s->cur = (llama_token_data_array){ s->cand, (size_t)s->n_vocab, false };
    llama_token_data_array *cur = &s->cur;

    const int32_t last_n = p->penalty_last_n < 0 ? p->n_prev : p->penalty_last_n;
    const int32_t n_pen = last_n < p->n_prev ? last_n : p->n_prev;
    if (n_pen > 0) {
        const llama_token nl = llama_token_nl(s->model);
        const float nl_logit = nl >= 0 && nl < s->n_vocab ? logits[nl] : 0.0f;
        llama_sample_repetition_penalties(ctx, cur, s->prev + p->n_prev - n_pen, (size_t)n_pen, p->penalty_repeat,
                                          p->penalty_freq, p->penalty_present);
        if (!p->penalize_nl) {
            for (size_t i = 0; i < cur->size; i++) {
                if (cur->data[i].id == nl) {
                    cur->data[i].logit = nl_logit;
                    break;
                }
            }
        }
    }

    if (s->grammar) {
        llama_sample_grammar(ctx, cur, s->grammar);
        /* b1892 would go on and abort when accepting whatever it drew */
        size_t allowed = 0;
        while (allowed < cur->size && cur->data[allowed].logit == -INFINITY) allowed++;
        if (allowed == cur->size) {
            error_set("the grammar allows no further token");
            return -1;
        }
    }

    if (p->temp < 0.0f) {
        llama_sample_softmax(ctx, cur);
        return cur->data[0].id;
    }
    if (p->temp == 0.0f) return llama_sample_token_greedy(ctx, cur);
    if (p->mirostat == 1) {
        llama_sample_temp(ctx, cur, p->temp);
        return llama_sample_token_mirostat(ctx, cur, p->mirostat_tau, p->mirostat_eta, 100, &s->mirostat_mu);
    }
    if (p->mirostat == 2) {
        llama_sample_temp(ctx, cur, p->temp);
        return llama_sample_token_mirostat_v2(ctx, cur, p->mirostat_tau, p->mirostat_eta, &s->mirostat_mu);
    }
    for (const char *c = p->samplers; *c; c++) apply_sampler(ctx, cur, *c, p, s->n_vocab);
    return llama_sample_token(ctx, cur);
}

void sampler_accept(struct sampler *s, struct llama_context *ctx, llama_token id, bool apply_grammar) {
    memmove(s->prev, s->prev + 1, (size_t)(s->params.n_prev - 1) * sizeof *s->prev);
    s->prev[s->params.n_prev - 1] = id;
    if (apply_grammar && s->grammar) llama_grammar_accept_token(ctx, s->grammar, id);
}

llama_token_data_array *sampler_candidates(struct sampler *s) {
    return &s->cur;
}

llama_token sampler_last(const struct sampler *s) {
    return s->prev[s->params.n_prev - 1];
}

size_t sampler_prev_str(const struct sampler *s, int32_t n, char *buf, size_t cap) {
    if (n > s->params.n_prev) n = s->params.n_prev;
    size_t len = 0;
    for (int32_t i = s->params.n_prev - n; i < s->params.n_prev; i++) {
        char piece[256];
        int32_t plen = llama_token_to_piece(s->model, s->prev[i], piece, sizeof piece);
        if (plen <= 0) continue;
        size_t add = (size_t)plen < cap - 1 ? (size_t)plen : cap - 1;
        if (len + add > cap - 1) { /* keep the end */
            size_t drop = len + add - (cap - 1);
            memmove(buf, buf + drop, len - drop);
            len -= drop;
        }
        memcpy(buf + len, piece + (size_t)plen - add, add);
        len += add;
    }
    buf[len] = '\0';
    return len;
}

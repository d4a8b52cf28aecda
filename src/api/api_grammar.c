/* llama.h: grammars. The matcher (src/sample/grammar.h) works on the model's
 * token pieces; where b1892 aborts (no stack survives a token, EOS while the
 * grammar is incomplete) the grammar is left unchanged and an error is logged. */
#include "context/context.h"
#include "core/log.h"
#include "core/timer.h"
#include "llama.h"
#include "sample/grammar.h"

struct llama_grammar *llama_grammar_init(const llama_grammar_element **rules, size_t n_rules, size_t start_rule_index) {
    if (!rules || n_rules == 0) {
        error_set("llama_grammar_init: no rules given");
        return NULL;
    }
    return grammar_create(rules, n_rules, start_rule_index);
}

void llama_grammar_free(struct llama_grammar *grammar) {
    grammar_free(grammar);
}

struct llama_grammar *llama_grammar_copy(const struct llama_grammar *grammar) {
    return grammar ? grammar_copy(grammar) : NULL;
}

/* The matcher keeps caches inside the grammar, hence the cast: its language is unchanged. */
void llama_sample_grammar(struct llama_context *ctx, llama_token_data_array *candidates,
                          const struct llama_grammar *grammar) {
    if (!ctx || !candidates || !grammar) {
        error_set("llama_sample_grammar: context, candidates and grammar are required");
        return;
    }
    const int64_t t = time_us();
    const struct grammar_vocab *gv = model_grammar_vocab((struct llama_model *)ctx->model);
    if (gv) grammar_sample((struct llama_grammar *)grammar, gv, candidates);
    ctx->t_sample_us += time_us() - t;
}

void llama_grammar_accept_token(struct llama_context *ctx, struct llama_grammar *grammar, llama_token token) {
    if (!ctx || !grammar) {
        error_set("llama_grammar_accept_token: context and grammar are required");
        return;
    }
    const int64_t t = time_us();
    const struct grammar_vocab *gv = model_grammar_vocab((struct llama_model *)ctx->model);
    if (gv) grammar_accept(grammar, gv, token); /* on failure it logs why and keeps its state */
    ctx->t_sample_us += time_us() - t;
}

/* llama.h: vocabulary queries and tokenization. */
#include "core/log.h"
#include "llama.h"
#include "model/model.h"
#include "vocab/vocab.h"

static bool token_valid(const struct llama_model *model, llama_token token) {
    return model && token >= 0 && token < vocab_n_tokens(model->vocab);
}

enum llama_vocab_type llama_vocab_type(const struct llama_model *model) {
    return model ? vocab_type(model->vocab) : LLAMA_VOCAB_TYPE_SPM;
}

/* Out-of-range ids give "" / 0 / UNDEFINED (b1892 reads out of bounds). */
const char *llama_token_get_text(const struct llama_model *model, llama_token token) {
    return token_valid(model, token) ? vocab_token_text(model->vocab, token) : "";
}

float llama_token_get_score(const struct llama_model *model, llama_token token) {
    return token_valid(model, token) ? vocab_token_score(model->vocab, token) : 0.0f;
}

enum llama_token_type llama_token_get_type(const struct llama_model *model, llama_token token) {
    return token_valid(model, token) ? vocab_token_type(model->vocab, token) : LLAMA_TOKEN_TYPE_UNDEFINED;
}

llama_token llama_token_bos(const struct llama_model *model) { return model ? vocab_bos(model->vocab) : -1; }
llama_token llama_token_eos(const struct llama_model *model) { return model ? vocab_eos(model->vocab) : -1; }
llama_token llama_token_nl(const struct llama_model *model) { return model ? vocab_nl(model->vocab) : -1; }
int32_t llama_add_bos_token(const struct llama_model *model) { return model ? vocab_add_bos(model->vocab) : -1; }
int32_t llama_add_eos_token(const struct llama_model *model) { return model ? vocab_add_eos(model->vocab) : -1; }
llama_token llama_token_prefix(const struct llama_model *model) { return model ? vocab_prefix(model->vocab) : -1; }
llama_token llama_token_middle(const struct llama_model *model) { return model ? vocab_middle(model->vocab) : -1; }
llama_token llama_token_suffix(const struct llama_model *model) { return model ? vocab_suffix(model->vocab) : -1; }
llama_token llama_token_eot(const struct llama_model *model) { return model ? vocab_eot(model->vocab) : -1; }

/* Invalid arguments (NULL model, negative length, NULL text with a length)
 * return INT32_MIN with the reason logged; b1892 would crash. */
int32_t llama_tokenize(const struct llama_model *model, const char *text, int32_t text_len, llama_token *tokens,
                       int32_t n_max_tokens, bool add_bos, bool special) {
    if (!model || text_len < 0 || n_max_tokens < 0 || (n_max_tokens > 0 && !tokens)) {
        error_set("llama_tokenize: invalid arguments (model %p, text_len %d, n_max_tokens %d)", (const void *)model,
                  text_len, n_max_tokens);
        return INT32_MIN;
    }
    return vocab_tokenize(model->vocab, text, (size_t)text_len, add_bos, special, tokens, n_max_tokens);
}

int32_t llama_token_to_piece(const struct llama_model *model, llama_token token, char *buf, int32_t length) {
    if (!model || length < 0 || (length > 0 && !buf)) return 0;
    return vocab_token_to_piece(model->vocab, token, buf, length);
}

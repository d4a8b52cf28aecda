/* llama.h: state blobs and session files. */
#include <stdint.h>

#include "context/state.h"
#include "core/log.h"
#include "llama.h"

size_t llama_get_state_size(const struct llama_context *ctx) {
    return ctx && ctx->kv.cells ? state_size(ctx) : 0;
}

size_t llama_copy_state_data(struct llama_context *ctx, uint8_t *dst) {
    if (!ctx || !dst || !ctx->kv.cells) {
        error_set("llama_copy_state_data: a context with a KV cache and a destination are required");
        return 0;
    }
    return state_save(ctx, dst);
}

/* The blob carries its own sizes; each is checked against this context. */
size_t llama_set_state_data(struct llama_context *ctx, uint8_t *src) {
    if (!ctx || !src) {
        error_set("llama_set_state_data: context and source are required");
        return 0;
    }
    return state_load(ctx, src, SIZE_MAX);
}

bool llama_load_session_file(struct llama_context *ctx, const char *path_session, llama_token *tokens_out,
                             size_t n_token_capacity, size_t *n_token_count_out) {
    if (!ctx || !path_session || (n_token_capacity > 0 && !tokens_out)) {
        error_set("llama_load_session_file: invalid arguments");
        return false;
    }
    return session_load(ctx, path_session, tokens_out, n_token_capacity, n_token_count_out);
}

bool llama_save_session_file(struct llama_context *ctx, const char *path_session, const llama_token *tokens,
                             size_t n_token_count) {
    if (!ctx || !path_session) {
        error_set("llama_save_session_file: invalid arguments");
        return false;
    }
    return session_save(ctx, path_session, tokens, n_token_count);
}

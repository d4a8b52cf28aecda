/*
 * Context state and session files in b1892's format (LLAMA_SESSION_VERSION 4):
 * the RNG as libstdc++ text, the logits, the embedding, and the KV cache
 * (data of cells 0..head-1, then every cell's position and sequences).
 * A session file is a header (magic, version, the model's hyperparameters,
 * the prompt tokens) followed by that state blob.
 *
 * Loading validates everything before changing anything: a blob from another
 * model or context size, a truncated or corrupted file leaves the context as
 * it was and returns an error.
 */
#ifndef LLAMAC_CONTEXT_STATE_H
#define LLAMAC_CONTEXT_STATE_H

#include <stdbool.h>
#include <stddef.h>

#include "context/context.h"

/* An upper bound of state_save's output (b1892's formula, or more when the
 * cache's sequence bookkeeping needs it). */
size_t state_size(const struct llama_context *ctx);
/* Writes the state blob into dst (state_size() bytes); returns the bytes written. */
size_t state_save(struct llama_context *ctx, uint8_t *dst);
/* Restores from a blob of at most `size` bytes (SIZE_MAX: trust the blob's own
 * sizes, for llama_set_state_data). Returns the bytes read, 0 on error. */
size_t state_load(struct llama_context *ctx, const uint8_t *src, size_t size);

bool session_save(struct llama_context *ctx, const char *path, const llama_token *tokens, size_t n_tokens);
bool session_load(struct llama_context *ctx, const char *path, llama_token *tokens_out, size_t capacity,
                  size_t *n_out);

#endif

/*
 * Corpus tokenization for training: see train_data.h.
 */
#include "train/train_data.h"

#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "vocab/vocab.h"

/* Makes room for `more` tokens. */
static bool train_tokens_reserve(int32_t **tokens, size_t *cap, size_t n, size_t more) {
    if (n + more <= *cap) return true;
    size_t want = *cap ? *cap : 4096;
    while (want < n + more) want *= 2;
    int32_t *grown = realloc(*tokens, want * sizeof *grown);
    if (!grown) {
        error_set("tokenizing the corpus: out of memory for %zu tokens", want);
        return false;
    }
    *tokens = grown;
    *cap = want;
    return true;
}

int32_t *train_tokenize_lines(const struct vocab *v, const char *text, size_t size, size_t *n_tokens) {
    const int32_t nl = vocab_nl(v);
    if (nl < 0) {
        error_set("tokenizing the corpus: the vocabulary has no newline token");
        return NULL;
    }
    int32_t *tokens = NULL;
    size_t n = 0, cap = 0;
    for (size_t pos = 0; pos < size;) {
        const char *line = text + pos;
        const char *end = memchr(line, '\n', size - pos);
        size_t len = end ? (size_t)(end - line) : size - pos;
        pos += len + (end ? 1 : 0);
        if (len > 0 && line[len - 1] == '\r') len--;
        if (len == 0) continue;
        /* a line's tokens are at most its bytes + 1 (byte fallback, leading space) */
        if (len >= (size_t)INT32_MAX - 2) {
            error_set("tokenizing the corpus: a line of %zu bytes", len);
            free(tokens);
            return NULL;
        }
        if (!train_tokens_reserve(&tokens, &cap, n, len + 2)) {
            free(tokens);
            return NULL;
        }
        const int32_t k = vocab_tokenize(v, line, len, false, false, tokens + n, (int32_t)(len + 1));
        if (k < 0) {
            if (k != VOCAB_TOKENIZE_ERROR) error_set("tokenizing the corpus: a line needs %d tokens", -k);
            free(tokens);
            return NULL;
        }
        n += (size_t)k;
        tokens[n++] = nl;
    }
    *n_tokens = n;
    if (!tokens) tokens = malloc(sizeof *tokens); /* an empty corpus is an empty stream, not a failure */
    if (!tokens) error_set("tokenizing the corpus: out of memory");
    return tokens;
}

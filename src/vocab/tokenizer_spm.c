/*
 * The SPM tokenizer as b1892 runs it on one raw-text fragment.
 *
 * Spaces become U+2581 (plus one in front when add_space_prefix). The text is
 * cut into UTF-8 characters by their first byte only (no validation), then
 * the adjacent pair whose concatenation is the highest-scoring token is
 * merged, again and again (ties: leftmost pair), using a priority queue of
 * candidate pairs: O(n log n). What is left is looked up; a piece that is not
 * a token is emitted byte by byte as <0xXX> tokens.
 *
 * b1892 also keeps a "reverse merge" map to re-split such pieces, but a piece
 * only grows by a merge that forms a token, so a piece that is not a token is
 * a single character and that map never applies.
 */
#include "vocab/vocab_internal.h"

#include "core/log.h"
#include "vocab/unicode.h"

#include <stdlib.h>
#include <string.h>

/* Merge order: the higher the score of the token the pair forms, the sooner. */
static bool token_score_key(const struct vocab *v, const char *left, uint32_t left_n, const char *right,
                            uint32_t right_n, double *key) {
    (void)right; /* it follows left in the text */
    size_t n = (size_t)left_n + right_n;
    int32_t id = vocab_lookup_hashed(v, vocab_hash(left, n), left, n);
    if (id < 0) {
        return false;
    }
    *key = -(double)v->tokens[id].score;
    return true;
}

static char *escape_spaces(const char *text, size_t len, bool add_space_prefix, size_t *out_len) {
    size_t n_spaces = 0;
    for (size_t i = 0; i < len; i++) {
        n_spaces += text[i] == ' ';
    }
    /* len <= VOCAB_MAX_TEXT_LEN, so this cannot overflow */
    size_t n = len + 2 * n_spaces + (add_space_prefix ? 3 : 0);
    char *out = malloc(n ? n : 1);
    if (!out) {
        error_set("vocab: out of memory while tokenizing");
        return NULL;
    }
    size_t o = 0;
    if (add_space_prefix) {
        memcpy(out, "\xE2\x96\x81", 3);
        o = 3;
    }
    for (size_t i = 0; i < len; i++) {
        if (text[i] == ' ') {
            memcpy(out + o, "\xE2\x96\x81", 3);
            o += 3;
        } else {
            out[o++] = text[i];
        }
    }
    *out_len = n;
    return out;
}

bool spm_tokenize(const struct vocab *v, const char *raw, size_t raw_len, bool add_space_prefix,
                  struct token_buf *out) {
    size_t len;
    char *text = escape_spaces(raw, raw_len, add_space_prefix, &len);
    if (!text) {
        return false;
    }
    struct symbol_merge st = { .v = v, .text = text, .pair_key = token_score_key };
    bool ok = false;

    /* one symbol per (first-byte-sized) character */
    size_t n_symbols = 0;
    for (size_t off = 0; off < len; off += utf8_seq_len((uint8_t)text[off])) {
        n_symbols++;
    }
    st.symbols = malloc((n_symbols ? n_symbols : 1) * sizeof *st.symbols);
    if (!st.symbols) {
        error_set("vocab: out of memory while tokenizing");
        goto done;
    }
    size_t off = 0;
    for (size_t i = 0; i < n_symbols; i++) {
        size_t n = utf8_seq_len((uint8_t)text[off]);
        if (n > len - off) {
            n = len - off;
        }
        st.symbols[i] = (struct vocab_symbol){
            .prev = (int32_t)i - 1,
            .next = off + n == len ? -1 : (int32_t)i + 1,
            .off = (uint32_t)off,
            .n = (uint32_t)n,
        };
        off += n;
    }

    if (!symbol_merge_run(&st, n_symbols)) {
        goto done;
    }

    for (int32_t i = n_symbols ? 0 : -1; i >= 0; i = st.symbols[i].next) {
        const struct vocab_symbol *sym = &st.symbols[i];
        const char *s = text + sym->off;
        int32_t id = vocab_lookup_hashed(v, vocab_hash(s, sym->n), s, sym->n);
        if (id >= 0) {
            if (!token_buf_push(out, id)) {
                goto done;
            }
            continue;
        }
        for (uint32_t j = 0; j < sym->n; j++) {
            if (!token_buf_push_or_unk(out, v, v->byte_tokens[(uint8_t)s[j]])) {
                goto done;
            }
        }
    }
    ok = true;

done:
    free(st.symbols);
    symbol_merge_free(&st);
    free(text);
    return ok;
}

/*
 * The GPT-2 byte-level BPE tokenizer as b1892 runs it on one raw-text fragment.
 *
 * 1. Pre-split into words with b1892's hand-written state machine (its
 *    approximation of GPT-2's regex 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+|
 *    ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+ , quirks included: the last character
 *    always joins the word before it, a character that ends a word starts the
 *    next one without deciding its kind, so "a1b" gives "a" and "1b").
 * 2. Map each word's bytes through GPT-2's byte -> code point table.
 * 3. Merge adjacent symbols by lowest merge rank (ties: leftmost), with a
 *    priority queue: O(m log m) per word.
 * 4. Look up the resulting symbols; one that is not a token is emitted byte
 *    by byte as single-byte tokens.
 *
 * Code points are decoded as b1892 decodes them and re-encoded (so overlong
 * forms are normalised, as there). Where b1892 would throw (invalid UTF-8, a
 * value above U+10FFFF) each offending byte stands alone as an "other" char.
 */
#include "vocab/vocab_internal.h"

#include "core/log.h"
#include "vocab/unicode.h"

#include <stdlib.h>
#include <string.h>

struct bpe_char {
    uint32_t off; /* into the normalised text (len <= VOCAB_MAX_TEXT_LEN) */
    uint8_t len;
    uint8_t cls;  /* enum unicode_class */
};

/* Scratch reused across the words of one fragment. */
struct bpe_state {
    const struct vocab *v;
    char *word;                 /* the encoded word */
    size_t word_cap;
    struct vocab_symbol *symbols;
    size_t symbols_cap;
    struct symbol_merge merge;
};

/* Merge order: lower merge rank first. */
static bool merge_rank_key(const struct vocab *v, const char *left, uint32_t left_n, const char *right,
                           uint32_t right_n, double *key) {
    int32_t rank = vocab_merge_rank(v, left, left_n, right, right_n);
    *key = rank;
    return rank >= 0;
}

static bool grow(void **p, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) {
        return true;
    }
    size_t cap2 = *cap ? *cap : 64;
    while (cap2 < need) {
        cap2 *= 2;
    }
    void *grown = realloc(*p, cap2 * elem);
    if (!grown) {
        error_set("vocab: out of memory while tokenizing");
        return false;
    }
    *p = grown;
    *cap = cap2;
    return true;
}

/* Encodes bytes through GPT-2's map, merges, and emits the tokens. */
static bool bpe_word(struct bpe_state *st, const char *bytes, size_t n, struct token_buf *out) {
    if (!grow((void **)&st->word, &st->word_cap, 2 * n, 1) ||
        !grow((void **)&st->symbols, &st->symbols_cap, n, sizeof *st->symbols)) {
        return false;
    }
    size_t len = 0;
    for (size_t i = 0; i < n; i++) {
        uint8_t enc[4];
        size_t k = unicode_encode(unicode_byte_to_bpe_cpt((uint8_t)bytes[i]), enc);
        st->symbols[i] = (struct vocab_symbol){
            .prev = (int32_t)i - 1,
            .next = i + 1 == n ? -1 : (int32_t)i + 1,
            .off = (uint32_t)len,
            .n = (uint32_t)k,
        };
        memcpy(st->word + len, enc, k);
        len += k;
    }

    st->merge.text = st->word;
    st->merge.symbols = st->symbols;
    if (!symbol_merge_run(&st->merge, n)) {
        return false;
    }

    for (size_t i = 0; i < n; i++) {
        const struct vocab_symbol *sym = &st->symbols[i];
        if (sym->n == 0) {
            continue;
        }
        const char *s = st->word + sym->off;
        int32_t id = vocab_find(st->v, s, sym->n);
        if (id >= 0) {
            if (!token_buf_push(out, id)) {
                return false;
            }
            continue;
        }
        for (uint32_t j = 0; j < sym->n; j++) {
            if (!token_buf_push_or_unk(out, st->v, vocab_find(st->v, s + j, 1))) {
                return false;
            }
        }
    }
    return true;
}

/* Decodes text into characters (normalised UTF-8 in *norm) with their classes. */
static bool split_chars(const char *text, size_t len, struct bpe_char **chars_out, size_t *n_out,
                        char **norm_out) {
    struct bpe_char *chars = malloc((len ? len : 1) * sizeof *chars);
    char *norm = malloc(len ? len : 1); /* re-encoding never lengthens a char */
    if (!chars || !norm) {
        free(chars);
        free(norm);
        error_set("vocab: out of memory while tokenizing");
        return false;
    }
    size_t n = 0, o = 0;
    for (size_t i = 0; i < len;) {
        uint32_t cp;
        uint8_t enc[4];
        size_t used = unicode_decode_b1892((const uint8_t *)text + i, len - i, &cp);
        size_t k = used ? unicode_encode(cp, enc) : 0;
        if (k == 0) {
            used = 1;
            k = 1;
            enc[0] = (uint8_t)text[i];
            cp = UINT32_MAX; /* class "other" */
        }
        memcpy(norm + o, enc, k);
        chars[n++] = (struct bpe_char){
            .off = (uint32_t)o,
            .len = (uint8_t)k,
            .cls = (uint8_t)(cp == UINT32_MAX ? UNICODE_CLASS_OTHER : unicode_cpt_class(cp)),
        };
        o += k;
        i += used;
    }
    *chars_out = chars;
    *n_out = n;
    *norm_out = norm;
    return true;
}

static bool char_is(const char *norm, const struct bpe_char *c, char ascii) {
    return c->len == 1 && norm[c->off] == ascii;
}

struct word_sink {
    struct bpe_state *st;
    const struct bpe_char *chars;
    const char *norm;
    struct token_buf *out;
};

/* Tokenizes the word made of chars [first, first + count). */
static bool emit_word(struct word_sink *w, size_t first, size_t count) {
    if (count == 0) {
        return true;
    }
    const struct bpe_char *a = &w->chars[first], *b = &w->chars[first + count - 1];
    return bpe_word(w->st, w->norm + a->off, b->off + b->len - a->off, w->out);
}

bool bpe_tokenize(const struct vocab *v, const char *text, size_t len, struct token_buf *out) {
    struct bpe_char *chars;
    char *norm;
    size_t n;
    if (!split_chars(text, len, &chars, &n, &norm)) {
        return false;
    }
    struct bpe_state st = { .v = v, .merge = { .v = v, .pair_key = merge_rank_key } };
    struct word_sink w = { &st, chars, norm, out };
    bool ok = false;

    /* the word being collected: chars [tok_start, tok_start + tok_len) */
    size_t tok_start = 0, tok_len = 0;
    bool collecting = false, letter = false, numeric = false, special = false, ws_lookahead = false;

    for (size_t i = 0; i < n; i++) {
        const struct bpe_char *c = &chars[i];
        const struct bpe_char *next = i + 1 < n ? &chars[i + 1] : NULL;
        const struct bpe_char *next2 = i + 2 < n ? &chars[i + 2] : NULL;
        int cls = c->cls;
        int next_cls = next ? next->cls : UNICODE_CLASS_OTHER;
        bool split = false;

        /* contractions 's 't 'm 'd, then 're 've 'll */
        if (next && char_is(norm, c, '\'') &&
            (char_is(norm, next, 's') || char_is(norm, next, 't') || char_is(norm, next, 'm') ||
             char_is(norm, next, 'd'))) {
            if (!emit_word(&w, tok_start, tok_len) || !emit_word(&w, i, 2)) {
                goto done;
            }
            tok_len = 0;
            i += 1;
            continue;
        }
        if (next2 && char_is(norm, c, '\'') &&
            ((char_is(norm, next, 'r') && char_is(norm, next2, 'e')) ||
             (char_is(norm, next, 'v') && char_is(norm, next2, 'e')) ||
             (char_is(norm, next, 'l') && char_is(norm, next2, 'l')))) {
            if (!emit_word(&w, tok_start, tok_len) || !emit_word(&w, i, 3)) {
                goto done;
            }
            tok_len = 0;
            i += 2;
            continue;
        }

        bool lone_space = tok_len == 0 && char_is(norm, c, ' ');
        if (!collecting) {
            if (cls == UNICODE_CLASS_LETTER || (lone_space && next_cls == UNICODE_CLASS_LETTER)) {
                collecting = letter = true;
            } else if (cls == UNICODE_CLASS_DIGIT || (lone_space && next_cls == UNICODE_CLASS_DIGIT)) {
                collecting = numeric = true;
            } else if (cls == UNICODE_CLASS_OTHER || (lone_space && next_cls == UNICODE_CLASS_OTHER)) {
                collecting = special = true;
            } else if (cls == UNICODE_CLASS_WHITESPACE && next_cls == UNICODE_CLASS_WHITESPACE) {
                collecting = ws_lookahead = true;
            } else if (cls == UNICODE_CLASS_WHITESPACE) {
                split = true;
            }
        } else if (letter) {
            split = cls != UNICODE_CLASS_LETTER;
        } else if (numeric) {
            split = cls != UNICODE_CLASS_DIGIT;
        } else if (special) {
            split = cls != UNICODE_CLASS_OTHER;
        } else if (ws_lookahead) {
            split = next_cls == UNICODE_CLASS_LETTER || next_cls == UNICODE_CLASS_DIGIT;
        }

        if (!next) {
            /* the last character joins the current word, which is then cut */
            if (tok_len == 0) {
                tok_start = i;
            }
            tok_len++;
            split = true;
        }
        if (split) {
            if (!emit_word(&w, tok_start, tok_len)) {
                goto done;
            }
            tok_start = i;
            tok_len = 1;
            collecting = letter = numeric = special = ws_lookahead = false;
        } else {
            if (tok_len == 0) {
                tok_start = i;
            }
            tok_len++;
        }
    }
    ok = true;

done:
    symbol_merge_free(&st.merge);
    free(st.symbols);
    free(st.word);
    free(chars);
    free(norm);
    return ok;
}

/*
 * vocab_tokenize(): BOS, special-token partitioning, the tokenizer per
 * fragment, and the "negative required size" contract of llama_tokenize.
 */
#define _GNU_SOURCE /* memmem */
#include "vocab/vocab_internal.h"

#include "core/log.h"

#include <stdlib.h>
#include <string.h>

/* A piece of the input: raw text [off, off + len), or a special token (id >= 0). */
struct fragment {
    size_t off;
    size_t len;
    int32_t id;
};

struct fragment_list {
    struct fragment *items;
    size_t n;
    size_t cap;
};

static bool fragment_push(struct fragment_list *l, struct fragment f) {
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 16;
        struct fragment *grown = realloc(l->items, cap * sizeof *grown);
        if (!grown) {
            error_set("vocab: out of memory while tokenizing");
            return false;
        }
        l->items = grown;
        l->cap = cap;
    }
    l->items[l->n++] = f;
    return true;
}

/* Cuts every occurrence of special token `id` out of the raw fragments of
 * `in` (leftmost first, not overlapping), as b1892's tokenizer_st_partition
 * does for one token, writing the result to `out`. */
static bool partition_one(const struct vocab *v, const char *text, int32_t id,
                          const struct fragment_list *in, struct fragment_list *out) {
    const char *s = v->text_pool + v->tokens[id].text_off;
    size_t slen = v->tokens[id].text_len;
    out->n = 0;
    for (size_t k = 0; k < in->n; k++) {
        struct fragment f = in->items[k];
        if (f.id >= 0) {
            if (!fragment_push(out, f)) {
                return false;
            }
            continue;
        }
        size_t pos = f.off, end = f.off + f.len;
        const char *hit;
        while (pos < end && (hit = memmem(text + pos, end - pos, s, slen)) != NULL) {
            size_t at = (size_t)(hit - text);
            if (at > pos && !fragment_push(out, (struct fragment){ pos, at - pos, -1 })) {
                return false;
            }
            if (!fragment_push(out, (struct fragment){ at, slen, id })) {
                return false;
            }
            pos = at + slen;
        }
        if (pos < end && !fragment_push(out, (struct fragment){ pos, end - pos, -1 })) {
            return false;
        }
    }
    return true;
}

/* Splits text into raw and special-token fragments (tokens in cache order). */
static bool partition(const struct vocab *v, const char *text, size_t len, struct fragment_list *frags) {
    bool present[256] = { false };
    for (size_t i = 0; i < len; i++) {
        present[(uint8_t)text[i]] = true;
    }
    struct fragment_list other = { 0 };
    bool ok = true;
    for (int32_t k = 0; k < v->n_special && ok; k++) {
        int32_t id = v->special[k];
        const char *s = v->text_pool + v->tokens[id].text_off;
        size_t slen = v->tokens[id].text_len;
        if (!present[(uint8_t)s[0]] || !memmem(text, len, s, slen)) {
            continue; /* cannot occur in any fragment */
        }
        ok = partition_one(v, text, id, frags, &other);
        struct fragment_list t = *frags;
        *frags = other;
        other = t;
    }
    free(other.items);
    return ok;
}

int32_t vocab_tokenize(const struct vocab *v, const char *text, size_t len,
                       bool add_bos, bool special, int32_t *out, int32_t n_max) {
    if (len > VOCAB_MAX_TEXT_LEN) {
        error_set("vocab: text of %zu bytes is too long to tokenize (at most %zu)", len, VOCAB_MAX_TEXT_LEN);
        return VOCAB_TOKENIZE_ERROR;
    }
    if (!text && len > 0) {
        error_set("vocab: no text to tokenize");
        return VOCAB_TOKENIZE_ERROR;
    }
    struct token_buf buf = { 0 };
    struct fragment_list frags = { 0 };
    bool ok = true;
    int32_t bos = v->special_ids[VOCAB_SPECIAL_BOS];

    if (add_bos && bos >= 0) {
        ok = token_buf_push(&buf, bos);
    }
    if (ok && len > 0) {
        ok = fragment_push(&frags, (struct fragment){ 0, len, -1 });
        if (ok && special) {
            ok = partition(v, text, len, &frags);
        }
        for (size_t k = 0; ok && k < frags.n; k++) {
            const struct fragment *f = &frags.items[k];
            if (f->id >= 0) {
                ok = token_buf_push(&buf, f->id);
            } else if (v->type == LLAMA_VOCAB_TYPE_SPM) {
                /* b1892: only the very first fragment, if it is raw text, gets the space */
                ok = spm_tokenize(v, text + f->off, f->len, k == 0, &buf);
            } else {
                ok = bpe_tokenize(v, text + f->off, f->len, &buf);
            }
        }
    }
    free(frags.items);

    int32_t result;
    if (!ok) {
        result = VOCAB_TOKENIZE_ERROR;
    } else if (buf.n > (size_t)(n_max < 0 || !out ? 0 : n_max)) {
        result = -(int32_t)buf.n;
    } else {
        if (buf.n) {
            memcpy(out, buf.ids, buf.n * sizeof *out);
        }
        result = (int32_t)buf.n;
    }
    free(buf.ids);
    return result;
}

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

struct spm_symbol {
    int32_t prev;
    int32_t next;
    uint32_t off; /* into the escaped text */
    uint32_t n;   /* bytes; 0 once merged into its left neighbour */
};

struct spm_bigram {
    float score;
    int32_t left;
    int32_t right;
    uint32_t size; /* bytes of left + right when queued */
};

struct spm_heap {
    struct spm_bigram *items;
    size_t n;
    size_t cap;
};

/* The order b1892's queue pops: higher score first, then the leftmost pair. */
static int bigram_before(const struct spm_bigram *a, const struct spm_bigram *b) {
    return a->score > b->score || (a->score == b->score && a->left < b->left);
}

static bool heap_push(struct spm_heap *h, struct spm_bigram item) {
    if (h->n == h->cap) {
        size_t cap = h->cap ? 2 * h->cap : 64;
        struct spm_bigram *grown = realloc(h->items, cap * sizeof *grown);
        if (!grown) {
            error_set("vocab: out of memory while tokenizing");
            return false;
        }
        h->items = grown;
        h->cap = cap;
    }
    size_t i = h->n++;
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (!bigram_before(&item, &h->items[parent])) {
            break;
        }
        h->items[i] = h->items[parent];
        i = parent;
    }
    h->items[i] = item;
    return true;
}

static struct spm_bigram heap_pop(struct spm_heap *h) {
    struct spm_bigram top = h->items[0];
    struct spm_bigram last = h->items[--h->n];
    size_t i = 0;
    for (;;) {
        size_t child = 2 * i + 1;
        if (child >= h->n) {
            break;
        }
        if (child + 1 < h->n && bigram_before(&h->items[child + 1], &h->items[child])) {
            child++;
        }
        if (!bigram_before(&h->items[child], &last)) {
            break;
        }
        h->items[i] = h->items[child];
        i = child;
    }
    if (h->n > 0) {
        h->items[i] = last;
    }
    return top;
}

struct spm_state {
    const struct vocab *v;
    const char *text;
    struct spm_symbol *symbols;
    struct spm_heap heap;
};

/* Queues (left, right) if their concatenation is a token. */
static bool try_add_bigram(struct spm_state *st, int32_t left, int32_t right) {
    if (left < 0 || right < 0) {
        return true;
    }
    const struct spm_symbol *l = &st->symbols[left], *r = &st->symbols[right];
    size_t n = (size_t)l->n + r->n;
    const char *s = st->text + l->off;
    int32_t id = vocab_lookup_hashed(st->v, vocab_hash(s, n), s, n);
    if (id < 0) {
        return true;
    }
    struct spm_bigram b = { st->v->tokens[id].score, left, right, (uint32_t)n };
    return heap_push(&st->heap, b);
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
    struct spm_state st = { .v = v, .text = text };
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
        st.symbols[i] = (struct spm_symbol){
            .prev = (int32_t)i - 1,
            .next = off + n == len ? -1 : (int32_t)i + 1,
            .off = (uint32_t)off,
            .n = (uint32_t)n,
        };
        off += n;
    }

    for (size_t i = 1; i < n_symbols; i++) {
        if (!try_add_bigram(&st, (int32_t)i - 1, (int32_t)i)) {
            goto done;
        }
    }
    while (st.heap.n > 0) {
        struct spm_bigram b = heap_pop(&st.heap);
        struct spm_symbol *l = &st.symbols[b.left], *r = &st.symbols[b.right];
        if (l->n == 0 || r->n == 0 || l->n + r->n != b.size) {
            continue; /* stale: one side was merged since */
        }
        l->n += r->n;
        r->n = 0;
        l->next = r->next;
        if (r->next >= 0) {
            st.symbols[r->next].prev = b.left;
        }
        if (!try_add_bigram(&st, l->prev, b.left) || !try_add_bigram(&st, b.left, l->next)) {
            goto done;
        }
    }

    for (int32_t i = n_symbols ? 0 : -1; i >= 0; i = st.symbols[i].next) {
        const struct spm_symbol *sym = &st.symbols[i];
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
    free(st.heap.items);
    free(st.symbols);
    free(text);
    return ok;
}

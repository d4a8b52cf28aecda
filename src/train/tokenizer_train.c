#include "tokenizer_train.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/checked.h"
#include "core/log.h"
#include "gguf/gguf.h"

/*
 * How it works (see the header for what it does):
 *
 * 1. Every line is cut into words, and equal words are counted once with a
 *    frequency (a corpus of 800k words has some 30k distinct ones).
 * 2. Characters are counted over the distinct words; the kept ones become
 *    the first symbols. Each word becomes a doubly linked list of symbol
 *    positions in three flat arrays (sym/next/prev); a character that is not
 *    kept is the symbol -1, which never pairs.
 * 3. Every adjacent pair of symbols that may merge is counted (weighted by
 *    word frequency) and remembers, in a linked list of nodes, the words it
 *    occurs in. A max-heap orders the pairs; its entries carry the count
 *    they were pushed with, and an entry whose count is out of date is
 *    dropped or re-pushed when it reaches the top, so each merge touches
 *    only the words that hold the pair and the pairs next to it.
 */

enum tt_class {
    TT_CLS_NONE,   /* only "▁": may be followed by anything */
    TT_CLS_LETTER,
    TT_CLS_PUNCT,  /* punctuation, symbols, control characters */
    TT_CLS_DIGIT,  /* ASCII digits: always a piece of their own */
};

struct tt_word {
    uint32_t off, len;  /* bytes in the word arena */
    int64_t count;
    int32_t first;      /* position of the first symbol */
};

struct tt_char {
    uint8_t bytes[4];
    uint8_t len;
    bool valid;         /* well-formed UTF-8, not NUL */
    uint8_t cls;
    int64_t count;
    int32_t symbol;     /* -1: not kept */
};

struct tt_symbol {
    uint32_t off, len;  /* bytes in the piece arena */
    uint16_t n_chars;
    uint8_t cls;        /* of the characters after a leading "▁" */
};

struct tt_pair {
    int32_t a, b;
    int64_t count;
    int32_t head;       /* first node of the list of words holding the pair */
    uint32_t touched;   /* stamp of the last step that raised the count */
    bool merged;
};

struct tt_node {
    int32_t word, next;
};

struct tt_heap_entry {
    int32_t pair;
    int64_t count;
};

/* Open addressing over ids; the key of an id is found through callbacks. */
struct tt_table {
    int32_t *slots;     /* -1 = empty */
    size_t cap, n;      /* cap: a power of two */
};

struct trainer {
    char *warena;
    size_t warena_n, warena_cap;
    struct tt_word *words;
    size_t n_words, words_cap;
    struct tt_table word_table;
    char *wbuf;         /* the word being read */
    size_t wbuf_n, wbuf_cap;

    struct tt_char *chars;
    size_t n_chars, chars_cap;
    struct tt_table char_table;

    char *parena;
    size_t parena_n, parena_cap;
    struct tt_symbol *symbols;
    size_t n_symbols, symbols_cap;
    struct tt_table symbol_table;
    size_t n_kept;      /* symbols 0 .. n_kept-1 are the kept characters */

    int32_t *sym, *next, *prev;
    uint32_t *word_stamp;

    struct tt_pair *pairs;
    size_t n_pairs, pairs_cap;
    struct tt_table pair_table;
    struct tt_node *nodes;
    size_t n_nodes, nodes_cap;
    struct tt_heap_entry *heap;
    size_t heap_n, heap_cap;
    int32_t *touched;
    size_t n_touched, touched_cap;
    uint32_t stamp;

    int32_t *merges;    /* symbols created by merges, in order */
    size_t n_merges, merges_cap;

    int64_t n_sentences, n_word_occurrences, n_char_occurrences;
};

/* ---- memory ---------------------------------------------------------------- */

/* A grown copy of `arr` with room for `need` elements, or NULL (arr intact). */
static void *tt_grow(void *arr, size_t *cap, size_t need, size_t elem) {
    size_t n = *cap ? *cap : 16, bytes;
    while (n < need) {
        if (!ck_mul_size(n, 2, &n)) return NULL;
    }
    if (!ck_mul_size(n, elem, &bytes)) return NULL;
    void *p = realloc(arr, bytes);
    if (p) *cap = n;
    return p;
}

/* Makes room for `need` elements in `arr` (capacity `cap`); runs `on_fail`
 * (a statement, e.g. `return false`) when memory runs out. */
#define TT_RESERVE(arr, cap, need, on_fail)                                   \
    do {                                                                      \
        if ((size_t)(need) > (cap)) {                                         \
            void *grown_ = tt_grow((arr), &(cap), (size_t)(need), sizeof *(arr)); \
            if (!grown_) { on_fail; }                                         \
            (arr) = grown_;                                                   \
        }                                                                     \
    } while (0)

static bool tt_oom(void) {
    error_set("tokenizer_train: out of memory");
    return false;
}

static int32_t tt_oom_id(void) {
    tt_oom();
    return -1;
}

/* ---- hashing and tables ------------------------------------------------------ */

static uint64_t tt_hash_bytes(const void *data, size_t n) {
    const uint8_t *p = data;
    uint64_t h = 0xcbf29ce484222325ULL; /* FNV-1a */
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001b3ULL;
    return h;
}

static uint64_t tt_hash_u64(uint64_t x) { /* splitmix64 finaliser */
    x ^= x >> 30; x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27; x *= 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

struct tt_bytes {
    const char *p;
    size_t n;
};

typedef uint64_t (*tt_hash_id_fn)(const struct trainer *t, int32_t id);
typedef bool (*tt_eq_fn)(const struct trainer *t, int32_t id, const void *key);

static bool tt_word_eq(const struct trainer *t, int32_t id, const void *key) {
    const struct tt_bytes *k = key;
    return t->words[id].len == k->n && memcmp(t->warena + t->words[id].off, k->p, k->n) == 0;
}
static uint64_t tt_word_hash(const struct trainer *t, int32_t id) {
    return tt_hash_bytes(t->warena + t->words[id].off, t->words[id].len);
}
static bool tt_char_eq(const struct trainer *t, int32_t id, const void *key) {
    const struct tt_bytes *k = key;
    return t->chars[id].len == k->n && memcmp(t->chars[id].bytes, k->p, k->n) == 0;
}
static uint64_t tt_char_hash(const struct trainer *t, int32_t id) {
    return tt_hash_bytes(t->chars[id].bytes, t->chars[id].len);
}
static bool tt_symbol_eq(const struct trainer *t, int32_t id, const void *key) {
    const struct tt_bytes *k = key;
    return t->symbols[id].len == k->n && memcmp(t->parena + t->symbols[id].off, k->p, k->n) == 0;
}
static uint64_t tt_symbol_hash(const struct trainer *t, int32_t id) {
    return tt_hash_bytes(t->parena + t->symbols[id].off, t->symbols[id].len);
}
static uint64_t tt_pair_key(int32_t a, int32_t b) { return (uint64_t)(uint32_t)a << 32 | (uint32_t)b; }
static bool tt_pair_eq(const struct trainer *t, int32_t id, const void *key) {
    return tt_pair_key(t->pairs[id].a, t->pairs[id].b) == *(const uint64_t *)key;
}
static uint64_t tt_pair_hash(const struct trainer *t, int32_t id) {
    return tt_hash_u64(tt_pair_key(t->pairs[id].a, t->pairs[id].b));
}

/* Keeps the table at most half full, so a free slot always exists. */
static bool tt_table_reserve(const struct trainer *t, struct tt_table *tab, tt_hash_id_fn hash_of) {
    if ((tab->n + 1) * 2 <= tab->cap) return true;
    size_t cap = tab->cap ? tab->cap * 2 : 1024;
    int32_t *slots = malloc(cap * sizeof *slots);
    if (!slots) return tt_oom();
    memset(slots, 0xff, cap * sizeof *slots);
    for (size_t i = 0; i < tab->cap; i++) {
        int32_t id = tab->slots[i];
        if (id < 0) continue;
        size_t s = (size_t)hash_of(t, id) & (cap - 1);
        while (slots[s] >= 0) s = (s + 1) & (cap - 1);
        slots[s] = id;
    }
    free(tab->slots);
    tab->slots = slots;
    tab->cap = cap;
    return true;
}

/* The slot holding the id whose key is `key`, or the empty slot for it. */
static int32_t *tt_table_slot(const struct trainer *t, const struct tt_table *tab, uint64_t hash,
                              tt_eq_fn eq, const void *key) {
    size_t s = (size_t)hash & (tab->cap - 1);
    while (tab->slots[s] >= 0 && !eq(t, tab->slots[s], key)) s = (s + 1) & (tab->cap - 1);
    return &tab->slots[s];
}

/* ---- characters ---------------------------------------------------------------- */

/* Bytes in the character starting with `lead`, from the high nibble, exactly
 * as b1892's tokenizer splits text (so a stray byte is one character). */
static size_t tt_char_len(uint8_t lead) {
    static const uint8_t lens[16] = { 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4 };
    return lens[lead >> 4];
}

/* Decodes a well-formed UTF-8 character other than NUL; false otherwise. */
static bool tt_utf8_decode(const uint8_t *s, size_t n, uint32_t *cp) {
    if (n == 1) {
        *cp = s[0];
        return s[0] != 0 && s[0] < 0x80;
    }
    for (size_t i = 1; i < n; i++) {
        if ((s[i] & 0xC0) != 0x80) return false;
    }
    if (n == 2) {
        *cp = (uint32_t)(s[0] & 0x1F) << 6 | (s[1] & 0x3F);
        return *cp >= 0x80;
    }
    if (n == 3) {
        *cp = (uint32_t)(s[0] & 0x0F) << 12 | (uint32_t)(s[1] & 0x3F) << 6 | (s[2] & 0x3F);
        return *cp >= 0x800 && (*cp < 0xD800 || *cp > 0xDFFF);
    }
    if (n == 4 && s[0] <= 0xF4) {
        *cp = (uint32_t)(s[0] & 0x07) << 18 | (uint32_t)(s[1] & 0x3F) << 12 | (uint32_t)(s[2] & 0x3F) << 6 | (s[3] & 0x3F);
        return *cp >= 0x10000 && *cp <= 0x10FFFF;
    }
    return false;
}

/* Non-ASCII characters count as letters, except the common punctuation and
 * symbol blocks (Latin-1 signs, general punctuation through miscellaneous
 * symbols and arrows, CJK and fullwidth punctuation). */
static uint8_t tt_char_class(uint32_t cp) {
    if (cp == 0x2581) return TT_CLS_NONE;
    if (cp < 0x80) {
        if ((cp | 0x20) >= 'a' && (cp | 0x20) <= 'z') return TT_CLS_LETTER;
        if (cp >= '0' && cp <= '9') return TT_CLS_DIGIT;
        return TT_CLS_PUNCT;
    }
    if ((cp >= 0xA0 && cp <= 0xBF) || cp == 0xD7 || cp == 0xF7 || (cp >= 0x2000 && cp <= 0x2BFF) ||
        (cp >= 0x3000 && cp <= 0x303F) || (cp >= 0xFE30 && cp <= 0xFE4F) || (cp >= 0xFF01 && cp <= 0xFF0F)) {
        return TT_CLS_PUNCT;
    }
    return TT_CLS_LETTER;
}

/* The id of the character `bytes`, added (count 0) if new; -1 on failure. */
static int32_t tt_char_id(struct trainer *t, const char *bytes, size_t n) {
    struct tt_bytes key = { bytes, n };
    if (!tt_table_reserve(t, &t->char_table, tt_char_hash)) return -1;
    int32_t *slot = tt_table_slot(t, &t->char_table, tt_hash_bytes(bytes, n), tt_char_eq, &key);
    if (*slot >= 0) return *slot;
    TT_RESERVE(t->chars, t->chars_cap, t->n_chars + 1, return tt_oom_id());
    struct tt_char *c = &t->chars[t->n_chars];
    memset(c, 0, sizeof *c);
    memcpy(c->bytes, bytes, n);
    c->len = (uint8_t)n;
    uint32_t cp = 0;
    c->valid = tt_utf8_decode(c->bytes, n, &cp);
    c->cls = c->valid ? tt_char_class(cp) : TT_CLS_PUNCT;
    c->symbol = -1;
    *slot = (int32_t)t->n_chars;
    t->char_table.n++;
    return (int32_t)t->n_chars++;
}

/* ---- words ------------------------------------------------------------------ */

static bool tt_word_add(struct trainer *t) {
    if (t->wbuf_n > UINT32_MAX) {
        error_set("tokenizer_train: a word longer than 4 GiB");
        return false;
    }
    struct tt_bytes key = { t->wbuf, t->wbuf_n };
    if (!tt_table_reserve(t, &t->word_table, tt_word_hash)) return false;
    int32_t *slot = tt_table_slot(t, &t->word_table, tt_hash_bytes(t->wbuf, t->wbuf_n), tt_word_eq, &key);
    t->n_word_occurrences++;
    if (*slot >= 0) {
        t->words[*slot].count++;
        return true;
    }
    if (t->n_words >= INT32_MAX || t->warena_n + t->wbuf_n > UINT32_MAX) {
        error_set("tokenizer_train: the corpus has too many distinct words");
        return false;
    }
    TT_RESERVE(t->words, t->words_cap, t->n_words + 1, return tt_oom());
    TT_RESERVE(t->warena, t->warena_cap, t->warena_n + t->wbuf_n, return tt_oom());
    memcpy(t->warena + t->warena_n, t->wbuf, t->wbuf_n);
    t->words[t->n_words] = (struct tt_word){ (uint32_t)t->warena_n, (uint32_t)t->wbuf_n, 1, -1 };
    t->warena_n += t->wbuf_n;
    *slot = (int32_t)t->n_words++;
    t->word_table.n++;
    return true;
}

static const char tt_space_mark[] = "\xe2\x96\x81"; /* U+2581 "▁" */

static bool tt_wbuf_append(struct trainer *t, const char *s, size_t n) {
    TT_RESERVE(t->wbuf, t->wbuf_cap, t->wbuf_n + n, return tt_oom());
    memcpy(t->wbuf + t->wbuf_n, s, n);
    t->wbuf_n += n;
    return true;
}

/* One sentence: "▁" + text with spaces as "▁", cut before every "▁". */
static bool tt_read_sentence(struct trainer *t, const char *s, size_t n) {
    t->wbuf_n = 0;
    if (!tt_wbuf_append(t, tt_space_mark, 3)) return false;
    size_t i = 0;
    while (i < n) {
        size_t mark = s[i] == ' ' ? 1 : (n - i >= 3 && memcmp(s + i, tt_space_mark, 3) == 0) ? 3 : 0;
        if (mark) {
            if (!tt_word_add(t)) return false;
            t->wbuf_n = 0;
            if (!tt_wbuf_append(t, tt_space_mark, 3)) return false;
            i += mark;
            continue;
        }
        size_t run = i + 1;
        while (run < n && s[run] != ' ' && (unsigned char)s[run] != 0xe2) run++;
        if (!tt_wbuf_append(t, s + i, run - i)) return false;
        i = run;
    }
    return tt_word_add(t);
}

static bool tt_read_text(struct trainer *t, const char *text, size_t size) {
    const char *p = text, *end = text + size;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *line_end = nl ? nl : end;
        size_t n = (size_t)(line_end - p);
        if (n > 0 && p[n - 1] == '\r') n--;
        if (n > 0) {
            t->n_sentences++;
            if (!tt_read_sentence(t, p, n)) return false;
        }
        p = nl ? nl + 1 : end;
    }
    return true;
}

/* ---- symbols ---------------------------------------------------------------- */

/* The symbol for bytes (n_chars characters, class cls), created if new. */
static int32_t tt_symbol_get(struct trainer *t, const char *bytes, size_t n, uint16_t n_chars, uint8_t cls, bool *created) {
    struct tt_bytes key = { bytes, n };
    *created = false;
    if (!tt_table_reserve(t, &t->symbol_table, tt_symbol_hash)) return -1;
    int32_t *slot = tt_table_slot(t, &t->symbol_table, tt_hash_bytes(bytes, n), tt_symbol_eq, &key);
    if (*slot >= 0) return *slot;
    TT_RESERVE(t->symbols, t->symbols_cap, t->n_symbols + 1, return tt_oom_id());
    TT_RESERVE(t->parena, t->parena_cap, t->parena_n + n, return tt_oom_id());
    memcpy(t->parena + t->parena_n, bytes, n);
    t->symbols[t->n_symbols] = (struct tt_symbol){ (uint32_t)t->parena_n, (uint32_t)n, n_chars, cls };
    t->parena_n += n;
    *slot = (int32_t)t->n_symbols;
    t->symbol_table.n++;
    *created = true;
    return (int32_t)t->n_symbols++;
}

static int tt_char_order(const struct tt_char *x, const struct tt_char *y) {
    if (x->count != y->count) return x->count > y->count ? -1 : 1;
    int c = memcmp(x->bytes, y->bytes, x->len < y->len ? x->len : y->len);
    return c ? c : (int)x->len - (int)y->len;
}

static int tt_char_ptr_order(const void *x, const void *y) {
    return tt_char_order(*(const struct tt_char *const *)x, *(const struct tt_char *const *)y);
}

/* Counts characters over the distinct words and makes the kept ones the
 * first symbols, most frequent first. */
static bool tt_choose_chars(struct trainer *t, double coverage) {
    for (size_t w = 0; w < t->n_words; w++) {
        const char *s = t->warena + t->words[w].off;
        size_t n = t->words[w].len;
        for (size_t i = 0; i < n;) {
            size_t len = tt_char_len((uint8_t)s[i]);
            if (len > n - i) len = n - i;
            int32_t id = tt_char_id(t, s + i, len);
            if (id < 0) return false;
            t->chars[id].count += t->words[w].count;
            t->n_char_occurrences += t->words[w].count;
            i += len;
        }
    }
    struct tt_char **order = malloc((t->n_chars ? t->n_chars : 1) * sizeof *order);
    if (!order) return tt_oom();
    for (size_t i = 0; i < t->n_chars; i++) order[i] = &t->chars[i];
    qsort(order, t->n_chars, sizeof *order, tt_char_ptr_order);
    int64_t covered = 0;
    bool ok = true;
    for (size_t i = 0; i < t->n_chars && ok; i++) {
        struct tt_char *c = order[i];
        bool space = c->len == 3 && memcmp(c->bytes, tt_space_mark, 3) == 0;
        bool wanted = (double)covered < coverage * (double)t->n_char_occurrences;
        if (!c->valid || !(wanted || space)) continue;
        covered += c->count;
        bool created;
        c->symbol = tt_symbol_get(t, (const char *)c->bytes, c->len, 1, c->cls, &created);
        ok = c->symbol >= 0;
    }
    free(order);
    t->n_kept = t->n_symbols;
    return ok;
}

/* Lays every distinct word out as a linked list of symbol positions. */
static bool tt_layout_words(struct trainer *t) {
    size_t n_pos = 0;
    for (size_t w = 0; w < t->n_words; w++) {
        const uint8_t *s = (const uint8_t *)t->warena + t->words[w].off;
        for (size_t i = 0, n = t->words[w].len; i < n; n_pos++) i += tt_char_len(s[i]);
    }
    if (n_pos > INT32_MAX) {
        error_set("tokenizer_train: the corpus has more than 2^31 characters in distinct words");
        return false;
    }
    size_t alloc = n_pos ? n_pos : 1;
    t->sym = malloc(alloc * sizeof *t->sym);
    t->next = malloc(alloc * sizeof *t->next);
    t->prev = malloc(alloc * sizeof *t->prev);
    t->word_stamp = calloc(t->n_words ? t->n_words : 1, sizeof *t->word_stamp);
    if (!t->sym || !t->next || !t->prev || !t->word_stamp) return tt_oom();
    int32_t pos = 0;
    for (size_t w = 0; w < t->n_words; w++) {
        const char *s = t->warena + t->words[w].off;
        size_t n = t->words[w].len;
        t->words[w].first = pos;
        for (size_t i = 0; i < n; pos++) {
            size_t len = tt_char_len((uint8_t)s[i]);
            if (len > n - i) len = n - i;
            struct tt_bytes key = { s + i, len };
            int32_t cid = *tt_table_slot(t, &t->char_table, tt_hash_bytes(s + i, len), tt_char_eq, &key);
            t->sym[pos] = t->chars[cid].symbol;
            t->prev[pos] = i == 0 ? -1 : pos - 1;
            i += len;
            t->next[pos] = i < n ? pos + 1 : -1;
        }
    }
    return true;
}

/* ---- pairs ------------------------------------------------------------------ */

/* Whether a and b may merge: both kept, at most MAX_PIECE characters, no
 * digit, and after an optional leading "▁" one character class. (b never
 * starts with "▁": words are cut before every "▁".) */
static bool tt_pair_allowed(const struct trainer *t, int32_t a, int32_t b) {
    if (a < 0 || b < 0) return false;
    const struct tt_symbol *sa = &t->symbols[a], *sb = &t->symbols[b];
    assert(sb->cls != TT_CLS_NONE);
    if (sa->n_chars + sb->n_chars > TOKENIZER_TRAIN_MAX_PIECE) return false;
    if (sa->cls == TT_CLS_DIGIT || sb->cls == TT_CLS_DIGIT) return false;
    return sa->cls == TT_CLS_NONE || sa->cls == sb->cls;
}

/* Adds delta occurrences of the pair (a, b) in word w. Raising a count
 * records w in the pair's word list and marks the pair for re-pushing. */
static bool tt_pair_add(struct trainer *t, int32_t a, int32_t b, int64_t delta, int32_t w) {
    if (!tt_pair_allowed(t, a, b)) return true;
    uint64_t key = tt_pair_key(a, b);
    if (!tt_table_reserve(t, &t->pair_table, tt_pair_hash)) return false;
    int32_t *slot = tt_table_slot(t, &t->pair_table, tt_hash_u64(key), tt_pair_eq, &key);
    if (*slot < 0) {
        assert(delta > 0);
        if (t->n_pairs >= INT32_MAX) {
            error_set("tokenizer_train: too many distinct pairs");
            return false;
        }
        TT_RESERVE(t->pairs, t->pairs_cap, t->n_pairs + 1, return tt_oom());
        t->pairs[t->n_pairs] = (struct tt_pair){ a, b, 0, -1, 0, false };
        *slot = (int32_t)t->n_pairs++;
        t->pair_table.n++;
    }
    int32_t id = *slot;
    struct tt_pair *p = &t->pairs[id];
    p->count += delta;
    if (delta <= 0) return true;
    if (p->head < 0 || t->nodes[p->head].word != w) {
        if (t->n_nodes >= INT32_MAX) {
            error_set("tokenizer_train: too many pair occurrences");
            return false;
        }
        TT_RESERVE(t->nodes, t->nodes_cap, t->n_nodes + 1, return tt_oom());
        p = &t->pairs[id];
        t->nodes[t->n_nodes] = (struct tt_node){ w, p->head };
        p->head = (int32_t)t->n_nodes++;
    }
    if (p->touched != t->stamp) {
        TT_RESERVE(t->touched, t->touched_cap, t->n_touched + 1, return tt_oom());
        p->touched = t->stamp;
        t->touched[t->n_touched++] = id;
    }
    return true;
}

/* Byte k of the concatenation of symbols a and b. */
static uint8_t tt_concat_byte(const struct trainer *t, int32_t a, int32_t b, size_t k) {
    const struct tt_symbol *sa = &t->symbols[a], *sb = &t->symbols[b];
    return (uint8_t)(k < sa->len ? t->parena[sa->off + k] : t->parena[sb->off + k - sa->len]);
}

/* Merge order between two pairs of equal count: the shorter piece (in
 * characters), then the lower bytes, then the shorter left part. */
static bool tt_piece_before(const struct trainer *t, const struct tt_pair *p, const struct tt_pair *q) {
    int lp = t->symbols[p->a].n_chars + t->symbols[p->b].n_chars;
    int lq = t->symbols[q->a].n_chars + t->symbols[q->b].n_chars;
    if (lp != lq) return lp < lq;
    size_t np = (size_t)t->symbols[p->a].len + t->symbols[p->b].len;
    size_t nq = (size_t)t->symbols[q->a].len + t->symbols[q->b].len;
    for (size_t k = 0; k < np && k < nq; k++) {
        uint8_t x = tt_concat_byte(t, p->a, p->b, k), y = tt_concat_byte(t, q->a, q->b, k);
        if (x != y) return x < y;
    }
    if (np != nq) return np < nq;
    return t->symbols[p->a].len < t->symbols[q->a].len;
}

static bool tt_entry_before(const struct trainer *t, const struct tt_heap_entry *x, const struct tt_heap_entry *y) {
    if (x->count != y->count) return x->count > y->count;
    if (x->pair == y->pair) return false;
    return tt_piece_before(t, &t->pairs[x->pair], &t->pairs[y->pair]);
}

static bool tt_heap_push(struct trainer *t, int32_t pair, int64_t count) {
    TT_RESERVE(t->heap, t->heap_cap, t->heap_n + 1, return tt_oom());
    struct tt_heap_entry e = { pair, count };
    size_t i = t->heap_n++;
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (!tt_entry_before(t, &e, &t->heap[parent])) break;
        t->heap[i] = t->heap[parent];
        i = parent;
    }
    t->heap[i] = e;
    return true;
}

static struct tt_heap_entry tt_heap_pop(struct trainer *t) {
    struct tt_heap_entry top = t->heap[0], last = t->heap[--t->heap_n];
    size_t i = 0, n = t->heap_n;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && tt_entry_before(t, &t->heap[c + 1], &t->heap[c])) c++;
        if (!tt_entry_before(t, &t->heap[c], &last)) break;
        t->heap[i] = t->heap[c];
        i = c;
    }
    if (n > 0) t->heap[i] = last;
    return top;
}

/* Pushes the pairs whose counts rose in this step, with their new counts. */
static bool tt_push_touched(struct trainer *t) {
    for (size_t i = 0; i < t->n_touched; i++) {
        const struct tt_pair *p = &t->pairs[t->touched[i]];
        if (!p->merged && p->count > 0 && !tt_heap_push(t, t->touched[i], p->count)) return false;
    }
    t->n_touched = 0;
    return true;
}

/* The best pair to merge next, or -1 when none is left. An entry whose pair
 * lost occurrences since it was pushed is re-pushed with the current count;
 * one whose pair gained some has a fresher entry and is dropped. */
static int32_t tt_best_pair(struct trainer *t, bool *failed) {
    while (t->heap_n > 0) {
        struct tt_heap_entry e = tt_heap_pop(t);
        const struct tt_pair *p = &t->pairs[e.pair];
        if (p->merged || p->count <= 0) continue;
        if (p->count == e.count) return e.pair;
        if (p->count < e.count && !tt_heap_push(t, e.pair, p->count)) {
            *failed = true;
            return -1;
        }
    }
    return -1;
}

/* Replaces every (a, b) in word w by c, left to right, keeping the pair
 * counts of the neighbours right. */
static bool tt_merge_in_word(struct trainer *t, int32_t w, int32_t a, int32_t b, int32_t c) {
    int64_t freq = t->words[w].count;
    int32_t i = t->words[w].first;
    while (i >= 0) {
        int32_t j = t->next[i];
        if (j < 0) break;
        if (t->sym[i] != a || t->sym[j] != b) {
            i = j;
            continue;
        }
        int32_t before = t->prev[i], after = t->next[j];
        if (before >= 0 && !tt_pair_add(t, t->sym[before], a, -freq, w)) return false;
        if (!tt_pair_add(t, a, b, -freq, w)) return false;
        if (after >= 0 && !tt_pair_add(t, b, t->sym[after], -freq, w)) return false;
        t->sym[i] = c;
        t->next[i] = after;
        if (after >= 0) t->prev[after] = i;
        if (before >= 0 && !tt_pair_add(t, t->sym[before], c, freq, w)) return false;
        if (after >= 0 && !tt_pair_add(t, c, t->sym[after], freq, w)) return false;
        i = after;
    }
    return true;
}

static bool tt_count_pairs(struct trainer *t) {
    t->stamp = 1;
    for (size_t w = 0; w < t->n_words; w++) {
        for (int32_t i = t->words[w].first; i >= 0 && t->next[i] >= 0; i = t->next[i]) {
            if (!tt_pair_add(t, t->sym[i], t->sym[t->next[i]], t->words[w].count, (int32_t)w)) return false;
        }
    }
    return tt_push_touched(t);
}

/* Merges until `target` new pieces exist or no pair is left. */
static bool tt_learn_merges(struct trainer *t, size_t target) {
    char piece[4 * 2 * TOKENIZER_TRAIN_MAX_PIECE];
    while (t->n_merges < target) {
        bool failed = false;
        int32_t best = tt_best_pair(t, &failed);
        if (failed) return false;
        if (best < 0) break;
        t->stamp++;
        struct tt_pair *p = &t->pairs[best];
        int32_t a = p->a, b = p->b;
        const struct tt_symbol *sa = &t->symbols[a], *sb = &t->symbols[b];
        size_t n = (size_t)sa->len + sb->len;
        assert(n <= sizeof piece);
        memcpy(piece, t->parena + sa->off, sa->len);
        memcpy(piece + sa->len, t->parena + sb->off, sb->len);
        bool created;
        int32_t c = tt_symbol_get(t, piece, n, (uint16_t)(sa->n_chars + sb->n_chars), sb->cls, &created);
        if (c < 0) return false;
        if (created) {
            TT_RESERVE(t->merges, t->merges_cap, t->n_merges + 1, return tt_oom());
            t->merges[t->n_merges++] = c;
        }
        t->pairs[best].merged = true;
        for (int32_t node = t->pairs[best].head; node >= 0; node = t->nodes[node].next) {
            int32_t w = t->nodes[node].word;
            if (t->word_stamp[w] == t->stamp) continue;
            t->word_stamp[w] = t->stamp;
            if (!tt_merge_in_word(t, w, a, b, c)) return false;
        }
        if (!tt_push_touched(t)) return false;
    }
    return true;
}

/* ---- the vocabulary ----------------------------------------------------------- */

static char *tt_strndup(const char *s, size_t n) {
    char *d = malloc(n + 1);
    if (!d) return NULL;
    memcpy(d, s, n);
    d[n] = '\0';
    return d;
}

static struct tokenizer_vocab *tt_make_vocab(const struct trainer *t) {
    struct tokenizer_vocab *v = calloc(1, sizeof *v);
    if (!v) {
        tt_oom();
        return NULL;
    }
    v->n_merges = (int32_t)t->n_merges;
    v->n_chars = (int32_t)t->n_kept;
    v->n_tokens = TOKENIZER_TRAIN_FIRST_PIECE + v->n_merges + v->n_chars;
    v->tokens = calloc((size_t)v->n_tokens, sizeof *v->tokens);
    v->scores = calloc((size_t)v->n_tokens, sizeof *v->scores);
    v->types = calloc((size_t)v->n_tokens, sizeof *v->types);
    if (!v->tokens || !v->scores || !v->types) goto oom;
    static const char *const specials[TOKENIZER_TRAIN_N_SPECIAL] = { "<unk>", "<s>", "</s>" };
    static const int32_t special_types[TOKENIZER_TRAIN_N_SPECIAL] = {
        TOKENIZER_TOKEN_UNKNOWN, TOKENIZER_TOKEN_CONTROL, TOKENIZER_TOKEN_CONTROL
    };
    for (int i = 0; i < TOKENIZER_TRAIN_N_SPECIAL; i++) {
        if (!(v->tokens[i] = tt_strndup(specials[i], strlen(specials[i])))) goto oom;
        v->types[i] = special_types[i];
    }
    for (int i = 0; i < TOKENIZER_TRAIN_N_BYTES; i++) {
        char name[8];
        snprintf(name, sizeof name, "<0x%02X>", i);
        if (!(v->tokens[TOKENIZER_TRAIN_N_SPECIAL + i] = tt_strndup(name, 6))) goto oom;
        v->types[TOKENIZER_TRAIN_N_SPECIAL + i] = TOKENIZER_TOKEN_BYTE;
    }
    /* Merged pieces in learning order, then the characters: rank k scores -k. */
    for (int32_t k = 0; k < v->n_merges + v->n_chars; k++) {
        int32_t s = k < v->n_merges ? t->merges[k] : k - v->n_merges;
        int32_t id = TOKENIZER_TRAIN_FIRST_PIECE + k;
        if (!(v->tokens[id] = tt_strndup(t->parena + t->symbols[s].off, t->symbols[s].len))) goto oom;
        v->scores[id] = (float)(-k);
        v->types[id] = TOKENIZER_TOKEN_NORMAL;
    }
    v->n_sentences = t->n_sentences;
    v->n_words = t->n_word_occurrences;
    v->n_unique_words = (int64_t)t->n_words;
    v->n_char_occurrences = t->n_char_occurrences;
    v->n_chars_seen = (int64_t)t->n_chars;
    for (size_t i = 0; i < t->n_chars; i++) {
        if (t->chars[i].symbol >= 0) v->n_char_occurrences_kept += t->chars[i].count;
    }
    return v;
oom:
    tokenizer_vocab_free(v);
    tt_oom();
    return NULL;
}

static void tt_free(struct trainer *t) {
    free(t->warena);
    free(t->words);
    free(t->word_table.slots);
    free(t->wbuf);
    free(t->chars);
    free(t->char_table.slots);
    free(t->parena);
    free(t->symbols);
    free(t->symbol_table.slots);
    free(t->sym);
    free(t->next);
    free(t->prev);
    free(t->word_stamp);
    free(t->pairs);
    free(t->pair_table.slots);
    free(t->nodes);
    free(t->heap);
    free(t->touched);
    free(t->merges);
}

void tokenizer_train_params_default(struct tokenizer_train_params *params) {
    params->vocab_size = 4096;
    params->character_coverage = 0.9995;
}

struct tokenizer_vocab *tokenizer_train(const char *text, size_t size, const struct tokenizer_train_params *params) {
    if (!text && size > 0) {
        error_set("tokenizer_train: no text");
        return NULL;
    }
    if (params->vocab_size <= TOKENIZER_TRAIN_FIRST_PIECE || params->vocab_size > (1 << 24)) {
        error_set("tokenizer_train: vocabulary size %d out of range (%d .. %d)", (int)params->vocab_size,
                  TOKENIZER_TRAIN_FIRST_PIECE + 1, 1 << 24);
        return NULL;
    }
    if (!(params->character_coverage > 0.0 && params->character_coverage <= 1.0)) {
        error_set("tokenizer_train: character coverage %g is not in (0, 1]", params->character_coverage);
        return NULL;
    }
    struct trainer t;
    memset(&t, 0, sizeof t);
    struct tokenizer_vocab *v = NULL;
    if (!tt_read_text(&t, text, size) || !tt_choose_chars(&t, params->character_coverage)) goto done;
    if (TOKENIZER_TRAIN_FIRST_PIECE + t.n_kept > (size_t)params->vocab_size) {
        error_set("tokenizer_train: %zu characters are kept but the vocabulary has room for %d: "
                  "raise the vocabulary size or lower the character coverage",
                  t.n_kept, params->vocab_size - TOKENIZER_TRAIN_FIRST_PIECE);
        goto done;
    }
    size_t target = (size_t)params->vocab_size - TOKENIZER_TRAIN_FIRST_PIECE - t.n_kept;
    if (!tt_layout_words(&t) || !tt_count_pairs(&t) || !tt_learn_merges(&t, target)) goto done;
    if (t.n_merges < target) {
        LOG_WARN("tokenizer_train: the corpus ran out of pairs to merge after %zu merges: %zu tokens instead of %d\n",
                 t.n_merges, TOKENIZER_TRAIN_FIRST_PIECE + t.n_kept + t.n_merges, (int)params->vocab_size);
    }
    v = tt_make_vocab(&t);
done:
    tt_free(&t);
    return v;
}

void tokenizer_vocab_free(struct tokenizer_vocab *vocab) {
    if (!vocab) return;
    if (vocab->tokens) {
        for (int32_t i = 0; i < vocab->n_tokens; i++) free(vocab->tokens[i]);
    }
    free(vocab->tokens);
    free(vocab->scores);
    free(vocab->types);
    free(vocab);
}

bool tokenizer_vocab_set_gguf(const struct tokenizer_vocab *vocab, struct gguf_writer *w) {
    return gguf_set_str(w, "tokenizer.ggml.model", "llama") &&
           gguf_set_arr_str(w, "tokenizer.ggml.tokens", (const char *const *)vocab->tokens, (uint64_t)vocab->n_tokens) &&
           gguf_set_arr_data(w, "tokenizer.ggml.scores", GGUF_TYPE_FLOAT32, vocab->scores, (uint64_t)vocab->n_tokens) &&
           gguf_set_arr_data(w, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, vocab->types, (uint64_t)vocab->n_tokens) &&
           gguf_set_u32(w, "tokenizer.ggml.bos_token_id", 1) &&
           gguf_set_u32(w, "tokenizer.ggml.eos_token_id", 2) &&
           gguf_set_u32(w, "tokenizer.ggml.unknown_token_id", 0) &&
           gguf_set_bool(w, "tokenizer.ggml.add_bos_token", true) &&
           gguf_set_bool(w, "tokenizer.ggml.add_eos_token", false);
}

bool tokenizer_vocab_write_gguf(const struct tokenizer_vocab *vocab, const char *name, const char *path) {
    struct gguf_writer *w = gguf_writer_new();
    if (!w) return false;
    bool ok = gguf_set_str(w, "general.architecture", "llama") && gguf_set_str(w, "general.name", name) &&
              tokenizer_vocab_set_gguf(vocab, w) && gguf_write_file(w, path);
    gguf_writer_free(w);
    return ok;
}

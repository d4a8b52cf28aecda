/*
 * Building a vocabulary: validation, the token and merge hash tables, the
 * special-token cache, token pieces. Queries.
 */
#include "vocab/vocab_internal.h"

#include "core/checked.h"
#include "core/log.h"
#include "vocab/unicode.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* b1892's fixed CodeLlama infill ids */
#define VOCAB_ID_PREFIX 32007
#define VOCAB_ID_MIDDLE 32009
#define VOCAB_ID_SUFFIX 32008
#define VOCAB_ID_EOT    32010

static const char *const k_special_names[VOCAB_SPECIAL_COUNT] = {
    "bos", "eos", "unknown", "separator", "padding",
};

void vocab_desc_init(struct vocab_desc *desc) {
    memset(desc, 0, sizeof *desc);
    desc->type = LLAMA_VOCAB_TYPE_SPM;
    for (int i = 0; i < VOCAB_SPECIAL_COUNT; i++) {
        desc->special_ids[i] = VOCAB_ID_DEFAULT;
    }
    desc->add_bos = -1;
    desc->add_eos = -1;
}

void vocab_free(struct vocab *v) {
    if (!v) {
        return;
    }
    free(v->tokens);
    free(v->text_pool);
    free(v->piece_pool);
    free(v->token_slots);
    free(v->merges);
    free(v->merge_pool);
    free(v->merge_slots);
    free(v->special);
    free(v);
}

/* ---- validation helpers -------------------------------------------------- */

/* Whether s[0..n) is a non-empty string b1892's decoder accepts, without NUL. */
static bool text_is_acceptable(const char *s, size_t n, const char **why) {
    if (n == 0) {
        *why = "is empty";
        return false;
    }
    if (memchr(s, '\0', n)) {
        *why = "contains a NUL byte";
        return false;
    }
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        size_t used = unicode_decode_b1892((const uint8_t *)s + i, n - i, &cp);
        if (used == 0) {
            *why = "is not valid UTF-8";
            return false;
        }
        i += used;
    }
    return true;
}

static size_t slots_for(size_t n) {
    size_t slots = 16;
    while (slots < 2 * n) {
        slots *= 2;
    }
    return slots;
}

/* ---- token table ----------------------------------------------------------- */

int32_t vocab_lookup_hashed(const struct vocab *v, uint64_t h, const char *s, size_t n) {
    for (size_t slot = vocab_hash_slot(h) & v->token_mask;; slot = (slot + 1) & v->token_mask) {
        int32_t id = v->token_slots[slot];
        if (id < 0) {
            return -1;
        }
        const struct vocab_token *t = &v->tokens[id];
        if (t->hash == h && t->text_len == n && memcmp(v->text_pool + t->text_off, s, n) == 0) {
            return id;
        }
    }
}

int32_t vocab_find(const struct vocab *v, const char *text, size_t len) {
    if (len > VOCAB_MAX_TOKEN_LEN) {
        return -1;
    }
    return vocab_lookup_hashed(v, vocab_hash(text, len), text, len);
}

static bool build_token_table(struct vocab *v, const struct vocab_desc *d) {
    size_t pool_size = 0;
    for (uint32_t i = 0; i < d->n_tokens; i++) {
        const char *text = d->texts[i];
        if (!text) {
            error_set("vocab: token %u has no text", i);
            return false;
        }
        size_t len = d->text_lens ? d->text_lens[i] : strlen(text);
        const char *why;
        if (len > VOCAB_MAX_TOKEN_LEN) {
            error_set("vocab: token %u is %zu bytes long (at most %d accepted)", i, len, VOCAB_MAX_TOKEN_LEN);
            return false;
        }
        if (!text_is_acceptable(text, len, &why)) {
            error_set("vocab: the text of token %u %s", i, why);
            return false;
        }
        if (d->types && (d->types[i] < LLAMA_TOKEN_TYPE_UNDEFINED || d->types[i] > LLAMA_TOKEN_TYPE_BYTE)) {
            error_set("vocab: token %u has an invalid type %d", i, d->types[i]);
            return false;
        }
        if (d->scores && isnan(d->scores[i])) {
            error_set("vocab: token %u has a NaN score", i);
            return false;
        }
        if (!ck_add_size(pool_size, len + 1, &pool_size)) {
            error_set("vocab: token texts too large");
            return false;
        }
    }

    size_t n_slots = slots_for(d->n_tokens);
    v->tokens = calloc(d->n_tokens, sizeof *v->tokens);
    v->text_pool = malloc(pool_size);
    v->token_slots = malloc(n_slots * sizeof *v->token_slots);
    if (!v->tokens || !v->text_pool || !v->token_slots) {
        error_set("vocab: out of memory for %u tokens", d->n_tokens);
        return false;
    }
    memset(v->token_slots, 0xFF, n_slots * sizeof *v->token_slots);
    v->token_mask = n_slots - 1;
    v->n_tokens = (int32_t)d->n_tokens;

    size_t off = 0;
    for (uint32_t i = 0; i < d->n_tokens; i++) {
        size_t len = d->text_lens ? d->text_lens[i] : strlen(d->texts[i]);
        struct vocab_token *t = &v->tokens[i];
        memcpy(v->text_pool + off, d->texts[i], len);
        v->text_pool[off + len] = '\0';
        t->text_off = off;
        t->text_len = (uint32_t)len;
        t->hash = vocab_hash(d->texts[i], len);
        t->score = d->scores ? d->scores[i] : 0.0f;
        t->type = d->types ? d->types[i] : LLAMA_TOKEN_TYPE_NORMAL;
        off += len + 1;

        size_t slot = vocab_hash_slot(t->hash) & v->token_mask;
        for (; v->token_slots[slot] >= 0; slot = (slot + 1) & v->token_mask) {
            const struct vocab_token *o = &v->tokens[v->token_slots[slot]];
            if (o->hash == t->hash && o->text_len == len &&
                memcmp(v->text_pool + o->text_off, v->text_pool + t->text_off, len) == 0) {
                /* b1892 asserts here (its text -> id map would lose one) */
                error_set("vocab: tokens %d and %u have the same text", v->token_slots[slot], i);
                return false;
            }
        }
        v->token_slots[slot] = (int32_t)i;
    }
    return true;
}

/* ---- BPE merges ------------------------------------------------------------- */

int32_t vocab_merge_rank(const struct vocab *v, const char *left, size_t left_len,
                         const char *right, size_t right_len) {
    if (v->n_merge_keys == 0) {
        return -1;
    }
    uint64_t h = vocab_hash_extend(vocab_hash_extend(vocab_hash(left, left_len), " ", 1), right, right_len);
    for (size_t slot = vocab_hash_slot(h) & v->merge_mask;; slot = (slot + 1) & v->merge_mask) {
        int32_t k = v->merge_slots[slot];
        if (k < 0) {
            return -1;
        }
        const struct vocab_merge *m = &v->merges[k];
        const char *line = v->merge_pool + m->off;
        if (m->hash == h && m->left_len == left_len && m->right_len == right_len &&
            memcmp(line, left, left_len) == 0 && memcmp(line + left_len + 1, right, right_len) == 0) {
            return m->rank;
        }
    }
}

/*
 * b1892 splits each line at its first space from index 1 on into (first,
 * second) and keeps the first rank of a repeated pair. A line without such a
 * space, or with nothing after it, gives a pair no two symbols can form; it
 * still takes up its rank.
 */
static bool build_merge_table(struct vocab *v, const struct vocab_desc *d) {
    v->n_merges = (int32_t)d->n_merges;
    if (d->n_merges == 0) {
        return true;
    }
    size_t pool_size = 0;
    for (uint32_t i = 0; i < d->n_merges; i++) {
        const char *line = d->merges[i];
        if (!line) {
            error_set("vocab: merge %u has no text", i);
            return false;
        }
        size_t len = d->merge_lens ? d->merge_lens[i] : strlen(line);
        const char *why;
        if (len > 2 * (size_t)VOCAB_MAX_TOKEN_LEN + 1) {
            error_set("vocab: merge %u is %zu bytes long", i, len);
            return false;
        }
        if (!text_is_acceptable(line, len, &why)) {
            error_set("vocab: merge %u %s", i, why);
            return false;
        }
        if (!ck_add_size(pool_size, len, &pool_size)) {
            error_set("vocab: merges too large");
            return false;
        }
    }

    size_t n_slots = slots_for(d->n_merges);
    v->merges = malloc(d->n_merges * sizeof *v->merges);
    v->merge_pool = malloc(pool_size ? pool_size : 1);
    v->merge_slots = malloc(n_slots * sizeof *v->merge_slots);
    if (!v->merges || !v->merge_pool || !v->merge_slots) {
        error_set("vocab: out of memory for %u merges", d->n_merges);
        return false;
    }
    memset(v->merge_slots, 0xFF, n_slots * sizeof *v->merge_slots);
    v->merge_mask = n_slots - 1;

    size_t off = 0;
    for (uint32_t i = 0; i < d->n_merges; i++) {
        const char *line = d->merges[i];
        size_t len = d->merge_lens ? d->merge_lens[i] : strlen(line);
        const char *space = len > 1 ? memchr(line + 1, ' ', len - 1) : NULL;
        if (!space || (size_t)(space - line) + 1 == len) {
            continue;
        }
        struct vocab_merge m = {
            .off = off,
            .left_len = (uint32_t)(space - line),
            .right_len = (uint32_t)(len - (size_t)(space - line) - 1),
            .hash = vocab_hash(line, len),
            .rank = (int32_t)i,
        };
        memcpy(v->merge_pool + off, line, len);

        size_t slot = vocab_hash_slot(m.hash) & v->merge_mask;
        bool repeated = false;
        for (; v->merge_slots[slot] >= 0; slot = (slot + 1) & v->merge_mask) {
            const struct vocab_merge *o = &v->merges[v->merge_slots[slot]];
            if (o->hash == m.hash && o->left_len == m.left_len && o->right_len == m.right_len &&
                memcmp(v->merge_pool + o->off, line, len) == 0) {
                repeated = true;
                break;
            }
        }
        if (repeated) {
            continue;
        }
        v->merges[v->n_merge_keys] = m;
        v->merge_slots[slot] = v->n_merge_keys++;
        off += len;
    }
    return true;
}

/* ---- pieces ----------------------------------------------------------------- */

/* Writes token id's piece to out (room for text_len + 3 bytes); returns its length. */
static size_t piece_of(const struct vocab *v, int32_t id, char *out) {
    const struct vocab_token *t = &v->tokens[id];
    const char *text = v->text_pool + t->text_off;
    size_t len = t->text_len;

    if (v->type == LLAMA_VOCAB_TYPE_SPM) {
        switch (t->type) {
        case LLAMA_TOKEN_TYPE_NORMAL: {
            size_t n = 0;
            for (size_t i = 0; i < len;) {
                if (i + 3 <= len && memcmp(text + i, "\xE2\x96\x81", 3) == 0) {
                    out[n++] = ' ';
                    i += 3;
                } else {
                    out[n++] = text[i++];
                }
            }
            return n;
        }
        case LLAMA_TOKEN_TYPE_USER_DEFINED:
            memcpy(out, text, len);
            return len;
        case LLAMA_TOKEN_TYPE_UNKNOWN:
            memcpy(out, "\xE2\x96\x85", 3);
            return 3;
        case LLAMA_TOKEN_TYPE_BYTE: {
            /* b1892: strtol(text.substr(3, 2), 16); it throws below 3 bytes */
            if (len < 3) {
                return 0;
            }
            char hex[3] = { 0 };
            memcpy(hex, text + 3, len - 3 < 2 ? len - 3 : 2);
            out[0] = (char)(uint8_t)strtol(hex, NULL, 16);
            return 1;
        }
        default: /* control, unused, undefined: suppressed */
            return 0;
        }
    }

    if (t->type != LLAMA_TOKEN_TYPE_NORMAL) {
        return 0;
    }
    size_t n = 0;
    for (size_t i = 0; i < len;) {
        uint32_t cp;
        size_t used = unicode_decode_b1892((const uint8_t *)text + i, len - i, &cp);
        int byte = unicode_bpe_cpt_to_byte(cp);
        if (byte >= 0) {
            out[n++] = (char)byte;
        } else {
            memcpy(out + n, text + i, used); /* outside GPT-2's map: b1892 throws */
            n += used;
        }
        i += used;
    }
    return n;
}

static bool build_pieces(struct vocab *v) {
    size_t pool_size = 0;
    for (int32_t id = 0; id < v->n_tokens; id++) {
        if (!ck_add_size(pool_size, (size_t)v->tokens[id].text_len + 3, &pool_size)) {
            error_set("vocab: token pieces too large");
            return false;
        }
    }
    v->piece_pool = malloc(pool_size);
    if (!v->piece_pool) {
        error_set("vocab: out of memory for token pieces");
        return false;
    }
    size_t off = 0;
    for (int32_t id = 0; id < v->n_tokens; id++) {
        size_t n = piece_of(v, id, v->piece_pool + off);
        v->tokens[id].piece_off = off;
        v->tokens[id].piece_len = (uint32_t)n;
        off += n;
    }
    return true;
}

/* ---- special tokens ------------------------------------------------------- */

static void resolve_special_ids(struct vocab *v, const struct vocab_desc *d) {
    static const int32_t spm_defaults[VOCAB_SPECIAL_COUNT] = { 1, 2, 0, -1, -1 };
    static const int32_t bpe_defaults[VOCAB_SPECIAL_COUNT] = { 11, 11, -1, -1, -1 };
    const int32_t *defaults = v->type == LLAMA_VOCAB_TYPE_BPE ? bpe_defaults : spm_defaults;

    for (int i = 0; i < VOCAB_SPECIAL_COUNT; i++) {
        int32_t id = defaults[i];
        int64_t given = d->special_ids[i];
        if (given != VOCAB_ID_DEFAULT) {
            if (given == -1 || given == 0xFFFFFFFFll) {
                id = -1; /* u32 -1: "no such token", as b1892 reads it */
            } else if (given >= 0 && given < v->n_tokens) {
                id = (int32_t)given;
            } else {
                LOG_WARN("vocab: bad %s token id %lld, using the default %d\n", k_special_names[i],
                         (long long)given, id);
            }
        }
        if (id >= v->n_tokens) {
            LOG_WARN("vocab: default %s token id %d is not in the vocabulary of %d, none used\n",
                     k_special_names[i], id, v->n_tokens);
            id = -1;
        }
        v->special_ids[i] = id;
    }
}

struct special_entry {
    uint32_t len;
    int32_t id;
};

static int special_entry_cmp(const void *a, const void *b) {
    const struct special_entry *x = a, *y = b;
    if (x->len != y->len) {
        return x->len > y->len ? -1 : 1;
    }
    return (x->id > y->id) - (x->id < y->id);
}

/*
 * b1892's special-token cache: every token of more than one byte that cannot
 * be written as two tokens (split only after a byte whose b1892 sequence
 * length is 1, or inside a multi-byte sequence as its skipping allows) and
 * that is more than one character long.
 */
static bool build_special_cache(struct vocab *v) {
    uint32_t max_len = 0;
    for (int32_t id = 0; id < v->n_tokens; id++) {
        if (v->tokens[id].text_len > max_len) {
            max_len = v->tokens[id].text_len;
        }
    }
    uint64_t *pow = malloc(((size_t)max_len + 1) * sizeof *pow);
    struct special_entry *entries = NULL;
    size_t n_entries = 0, cap = 0;
    if (!pow) {
        error_set("vocab: out of memory");
        return false;
    }
    pow[0] = 1;
    for (uint32_t k = 1; k <= max_len; k++) {
        pow[k] = pow[k - 1] * VOCAB_HASH_BASE;
    }

    uint32_t n_by_type = 0;
    bool mismatch = false;
    for (int32_t id = 0; id < v->n_tokens; id++) {
        const struct vocab_token *t = &v->tokens[id];
        const char *s = v->text_pool + t->text_off;
        size_t len = t->text_len;
        if (t->type != LLAMA_TOKEN_TYPE_NORMAL) {
            n_by_type++;
        }
        if (len <= 1) {
            continue;
        }
        bool splittable = false;
        uint64_t prefix_hash = 0;
        size_t hashed = 0;
        for (size_t i = 1; i < len;) {
            size_t seq = utf8_seq_len((uint8_t)s[i - 1]);
            if (seq != 1) {
                i += seq - 1;
                continue;
            }
            prefix_hash = vocab_hash_extend(prefix_hash, s + hashed, i - hashed);
            hashed = i;
            uint64_t suffix_hash = t->hash - prefix_hash * pow[len - i];
            if (vocab_lookup_hashed(v, prefix_hash, s, i) >= 0 &&
                vocab_lookup_hashed(v, suffix_hash, s + i, len - i) >= 0) {
                splittable = true;
                break;
            }
            i++;
        }
        if (splittable) {
            continue;
        }
        size_t n_chars = 0;
        for (size_t i = 0; i < len; i += utf8_seq_len((uint8_t)s[i])) {
            n_chars++;
        }
        if (n_chars <= 1) {
            continue;
        }
        if (n_entries == cap) {
            size_t new_cap = cap ? 2 * cap : 64;
            struct special_entry *grown = realloc(entries, new_cap * sizeof *grown);
            if (!grown) {
                free(entries);
                free(pow);
                error_set("vocab: out of memory");
                return false;
            }
            entries = grown;
            cap = new_cap;
        }
        entries[n_entries++] = (struct special_entry){ (uint32_t)len, id };
        if (t->type == LLAMA_TOKEN_TYPE_NORMAL) {
            mismatch = true;
        }
    }
    free(pow);

    if (mismatch || n_entries != n_by_type) {
        LOG_INFO("vocab: mismatch in special tokens definition ( %zu/%d vs %u/%d )\n", n_entries, v->n_tokens,
                 n_by_type, v->n_tokens);
    }
    if (n_entries) {
        qsort(entries, n_entries, sizeof *entries, special_entry_cmp);
        v->special = malloc(n_entries * sizeof *v->special);
        if (!v->special) {
            free(entries);
            error_set("vocab: out of memory");
            return false;
        }
        for (size_t i = 0; i < n_entries; i++) {
            v->special[i] = entries[i].id;
        }
    }
    v->n_special = (int32_t)n_entries;
    free(entries);
    return true;
}

/* ---- newline and byte tokens ------------------------------------------------ */

static bool find_byte_and_newline_tokens(struct vocab *v) {
    for (int b = 0; b < 256; b++) {
        char name[8];
        snprintf(name, sizeof name, "<0x%02X>", b);
        v->byte_tokens[b] = v->type == LLAMA_VOCAB_TYPE_SPM ? vocab_find(v, name, 6) : -1;
    }
    if (v->type == LLAMA_VOCAB_TYPE_SPM) {
        v->nl_id = v->byte_tokens['\n'];
        if (v->nl_id < 0) {
            error_set("vocab: the SPM vocabulary has no <0x0A> token");
            return false;
        }
        return true;
    }
    /* b1892 takes the first token of the text U+010A (GPT-2's image of '\n') */
    struct token_buf buf = { 0 };
    if (!bpe_tokenize(v, "\xC4\x8A", 2, &buf)) {
        return false;
    }
    v->nl_id = buf.n ? buf.ids[0] : -1;
    free(buf.ids);
    if (v->nl_id < 0) {
        error_set("vocab: the BPE vocabulary has no newline token");
        return false;
    }
    return true;
}

bool token_buf_push(struct token_buf *b, int32_t id) {
    if (b->n == b->cap) {
        size_t new_cap = b->cap ? 2 * b->cap : 64;
        if (new_cap > (size_t)INT32_MAX) {
            new_cap = (size_t)INT32_MAX;
        }
        if (b->n >= new_cap) {
            error_set("vocab: more than %d tokens", INT32_MAX);
            return false;
        }
        int32_t *grown = realloc(b->ids, new_cap * sizeof *grown);
        if (!grown) {
            error_set("vocab: out of memory for %zu tokens", new_cap);
            return false;
        }
        b->ids = grown;
        b->cap = new_cap;
    }
    b->ids[b->n++] = id;
    return true;
}

bool token_buf_push_or_unk(struct token_buf *b, const struct vocab *v, int32_t id) {
    if (id < 0) {
        id = v->special_ids[VOCAB_SPECIAL_UNK];
        if (id < 0) {
            return true;
        }
    }
    return token_buf_push(b, id);
}

/* ---- create ------------------------------------------------------------------ */

struct vocab *vocab_create(const struct vocab_desc *d) {
    if (d->type != LLAMA_VOCAB_TYPE_SPM && d->type != LLAMA_VOCAB_TYPE_BPE) {
        error_set("vocab: unknown vocabulary type %d", (int)d->type);
        return NULL;
    }
    if (d->n_tokens == 0 || d->n_tokens > (uint32_t)INT32_MAX || !d->texts) {
        error_set("vocab: invalid number of tokens %u", d->n_tokens);
        return NULL;
    }
    if (d->n_merges > (uint32_t)INT32_MAX || (d->n_merges && !d->merges)) {
        error_set("vocab: invalid number of merges %u", d->n_merges);
        return NULL;
    }
    struct vocab *v = calloc(1, sizeof *v);
    if (!v) {
        error_set("vocab: out of memory");
        return NULL;
    }
    v->type = d->type;
    v->add_bos = d->add_bos < 0 ? -1 : d->add_bos != 0;
    v->add_eos = d->add_eos < 0 ? -1 : d->add_eos != 0;

    if (!build_token_table(v, d) ||
        (v->type == LLAMA_VOCAB_TYPE_BPE && !build_merge_table(v, d))) {
        vocab_free(v);
        return NULL;
    }
    resolve_special_ids(v, d);
    if (!find_byte_and_newline_tokens(v) || !build_pieces(v) || !build_special_cache(v)) {
        vocab_free(v);
        return NULL;
    }
    return v;
}

/* ---- queries ------------------------------------------------------------------ */

static bool id_valid(const struct vocab *v, int32_t id) {
    return id >= 0 && id < v->n_tokens;
}

enum llama_vocab_type vocab_type(const struct vocab *v) { return v->type; }
int32_t vocab_n_tokens(const struct vocab *v) { return v->n_tokens; }
int32_t vocab_n_merges(const struct vocab *v) { return v->n_merges; }

const char *vocab_token_text(const struct vocab *v, int32_t id) {
    return id_valid(v, id) ? v->text_pool + v->tokens[id].text_off : NULL;
}

size_t vocab_token_text_len(const struct vocab *v, int32_t id) {
    return id_valid(v, id) ? v->tokens[id].text_len : 0;
}

float vocab_token_score(const struct vocab *v, int32_t id) {
    return id_valid(v, id) ? v->tokens[id].score : 0.0f;
}

enum llama_token_type vocab_token_type(const struct vocab *v, int32_t id) {
    return id_valid(v, id) ? (enum llama_token_type)v->tokens[id].type : LLAMA_TOKEN_TYPE_UNDEFINED;
}

int32_t vocab_bos(const struct vocab *v) { return v->special_ids[VOCAB_SPECIAL_BOS]; }
int32_t vocab_eos(const struct vocab *v) { return v->special_ids[VOCAB_SPECIAL_EOS]; }
int32_t vocab_unk(const struct vocab *v) { return v->special_ids[VOCAB_SPECIAL_UNK]; }
int32_t vocab_sep(const struct vocab *v) { return v->special_ids[VOCAB_SPECIAL_SEP]; }
int32_t vocab_pad(const struct vocab *v) { return v->special_ids[VOCAB_SPECIAL_PAD]; }
int32_t vocab_nl(const struct vocab *v) { return v->nl_id; }
int32_t vocab_prefix(const struct vocab *v) { (void)v; return VOCAB_ID_PREFIX; }
int32_t vocab_middle(const struct vocab *v) { (void)v; return VOCAB_ID_MIDDLE; }
int32_t vocab_suffix(const struct vocab *v) { (void)v; return VOCAB_ID_SUFFIX; }
int32_t vocab_eot(const struct vocab *v) { (void)v; return VOCAB_ID_EOT; }
int32_t vocab_add_bos(const struct vocab *v) { return v->add_bos; }
int32_t vocab_add_eos(const struct vocab *v) { return v->add_eos; }

const int32_t *vocab_special_tokens(const struct vocab *v, int32_t *n) {
    *n = v->n_special;
    return v->special;
}

const char *vocab_token_piece(const struct vocab *v, int32_t id, size_t *len) {
    if (!id_valid(v, id)) {
        *len = 0;
        return "";
    }
    *len = v->tokens[id].piece_len;
    return v->piece_pool + v->tokens[id].piece_off;
}

int32_t vocab_token_to_piece(const struct vocab *v, int32_t id, char *buf, int32_t size) {
    size_t len;
    const char *piece = vocab_token_piece(v, id, &len);
    if ((size_t)(size < 0 || !buf ? 0 : size) < len) {
        return -(int32_t)len;
    }
    if (len) memcpy(buf, piece, len); /* buf may be NULL when the piece is empty */
    return (int32_t)len;
}

/*
 * The layout of struct vocab and the helpers its .c files share.
 * Not for use outside src/vocab/ (use vocab.h).
 */
#ifndef LLAMAC_VOCAB_VOCAB_INTERNAL_H
#define LLAMAC_VOCAB_VOCAB_INTERNAL_H

#include "vocab/vocab.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * Strings are found through a polynomial hash, h = sum (byte + 1) * B^(n-1-i)
 * (mod 2^64), so the hash of a string's prefix extends to the whole string
 * and the hash of a suffix is whole - prefix * B^len(suffix): the special
 * token check tests every split of a token in linear time. Lookups compare
 * the bytes, so collisions only cost time.
 */
#define VOCAB_HASH_BASE 0x100000001B3ULL

static inline uint64_t vocab_hash_extend(uint64_t h, const char *s, size_t n) {
    for (size_t i = 0; i < n; i++) {
        h = h * VOCAB_HASH_BASE + (uint64_t)(uint8_t)s[i] + 1;
    }
    return h;
}

static inline uint64_t vocab_hash(const char *s, size_t n) {
    return vocab_hash_extend(0, s, n);
}

struct vocab_token {
    size_t text_off;  /* into text_pool (NUL-terminated there) */
    size_t piece_off; /* into piece_pool */
    uint32_t text_len;
    uint32_t piece_len;
    uint64_t hash;
    float score;
    int32_t type;     /* enum llama_token_type */
};

/* A BPE merge "left right", found by the pair (left, right). */
struct vocab_merge {
    size_t off;       /* into merge_pool: left, one space, right */
    uint32_t left_len;
    uint32_t right_len;
    uint64_t hash;    /* vocab_hash of the whole line */
    int32_t rank;     /* index of the line in tokenizer.ggml.merges */
};

struct vocab {
    enum llama_vocab_type type;
    int32_t n_tokens;
    struct vocab_token *tokens;
    char *text_pool;
    char *piece_pool;

    /* open addressing: slot -> token id, -1 = empty */
    int32_t *token_slots;
    size_t token_mask;

    int32_t n_merges;     /* lines in the file */
    int32_t n_merge_keys; /* distinct usable (left, right) pairs */
    struct vocab_merge *merges;
    char *merge_pool;
    int32_t *merge_slots; /* slot -> index into merges, -1 = empty */
    size_t merge_mask;

    int32_t *special;     /* the special-token cache, in cutting order */
    int32_t n_special;

    int32_t byte_tokens[256]; /* SPM: id of <0xXX>, -1 if missing */

    int32_t special_ids[VOCAB_SPECIAL_COUNT];
    int32_t nl_id;
    int32_t add_bos;
    int32_t add_eos;
};

static inline uint64_t vocab_hash_slot(uint64_t h) {
    /* splitmix64's finaliser spreads the polynomial hash over the slots */
    h ^= h >> 30;
    h *= 0xBF58476D1CE4E5B9ULL;
    h ^= h >> 27;
    h *= 0x94D049BB133111EBULL;
    h ^= h >> 31;
    return h;
}

/* Token id with text s[0..n) whose vocab_hash is h, or -1. */
int32_t vocab_lookup_hashed(const struct vocab *v, uint64_t h, const char *s, size_t n);

/* Rank of the merge (left, right), or -1. */
int32_t vocab_merge_rank(const struct vocab *v, const char *left, size_t left_len,
                         const char *right, size_t right_len);

/* A growing list of token ids. */
struct token_buf {
    int32_t *ids;
    size_t n;
    size_t cap;
};

/* Appends id; false (with error_set) when memory runs out or the list would
 * exceed INT32_MAX entries. */
bool token_buf_push(struct token_buf *b, int32_t id);

/* Appends id, or for id < 0 (a byte without a token of its own) the UNK
 * token; a vocabulary without UNK drops the byte. b1892 throws there. */
bool token_buf_push_or_unk(struct token_buf *b, const struct vocab *v, int32_t id);

/*
 * Pair merging, shared by both tokenizers (symbol_merge.c). The symbols are
 * adjacent byte ranges of text, linked in order; symbol_merge_run() merges
 * the pair with the lowest key again and again (ties: the leftmost pair)
 * until no pair can merge. A merged-away symbol keeps n = 0 and leaves the
 * list.
 */
struct vocab_symbol {
    int32_t prev;
    int32_t next;
    uint32_t off; /* into the text */
    uint32_t n;   /* bytes; 0 once merged into its left neighbour */
};

/* The key of merging left (left_n bytes) with the right piece that follows
 * it; false when the pair cannot merge. */
typedef bool (*symbol_pair_key_fn)(const struct vocab *v, const char *left, uint32_t left_n,
                                   const char *right, uint32_t right_n, double *key);

struct symbol_merge {
    const struct vocab *v;
    const char *text;
    struct vocab_symbol *symbols;
    symbol_pair_key_fn pair_key;
    struct symbol_pair *pairs; /* the queue, kept between runs */
    size_t n_pairs;
    size_t pairs_cap;
};

/* Merges symbols[0..n_symbols) (the first n_symbols of m->symbols, linked
 * 0 -> 1 -> ...); false (with error_set) when memory runs out. */
bool symbol_merge_run(struct symbol_merge *m, size_t n_symbols);
void symbol_merge_free(struct symbol_merge *m);

/*
 * The two tokenizers, each on one raw-text fragment; false only when memory
 * runs out (error_set). spm_tokenize() escapes spaces as U+2581 and prefixes
 * one when add_space_prefix.
 */
bool spm_tokenize(const struct vocab *v, const char *text, size_t len, bool add_space_prefix,
                  struct token_buf *out);
bool bpe_tokenize(const struct vocab *v, const char *text, size_t len, struct token_buf *out);

#endif

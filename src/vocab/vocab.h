/*
 * Vocabulary and tokenizers, as llama.cpp b1892 defines them.
 *
 * A `struct vocab` is built once (from a GGUF file or from arrays) and is
 * read-only afterwards, so any number of threads may tokenize with it at the
 * same time. Everything read from a file is validated when the vocabulary is
 * built: array types and lengths, token texts (non-empty, no NUL byte, valid
 * UTF-8 as b1892's decoder understands it, at most VOCAB_MAX_TOKEN_LEN bytes,
 * no duplicates), token types, special token ids.
 *
 * Two tokenizers:
 *  - SPM (tokenizer.ggml.model "llama"): SentencePiece-style merging of the
 *    highest-scoring adjacent pair, byte fallback to <0xXX> tokens; spaces
 *    become U+2581 and the first raw-text fragment gets one leading space.
 *  - BPE (tokenizer.ggml.model "gpt2"): b1892's GPT-2 pre-split, byte-level
 *    encoding, merges by rank.
 * With `special`, texts of the special tokens (b1892's "special token cache":
 * multi-character tokens that cannot be split into two tokens, e.g. <s>,
 * </s>, <0x0A>) are cut out of the text first and emitted as their ids.
 *
 * Where b1892 would throw or read out of bounds, this module does something
 * defined instead (documented at each function); it never aborts on input.
 */
#ifndef LLAMAC_VOCAB_VOCAB_H
#define LLAMAC_VOCAB_VOCAB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "llama.h"

struct gguf_reader;
struct vocab;

/* Longest token text accepted (bytes). */
#define VOCAB_MAX_TOKEN_LEN 65536
/* Longest text vocab_tokenize() accepts (bytes). */
#define VOCAB_MAX_TEXT_LEN ((size_t)1 << 29)
/* vocab_tokenize()'s return value when it fails (see there). */
#define VOCAB_TOKENIZE_ERROR INT32_MIN

/* Special token ids: a value read from the file, or VOCAB_ID_DEFAULT for the
 * tokenizer's default (SPM: bos 1, eos 2, unk 0, sep/pad none; BPE: bos = eos
 * = 11, unk/sep/pad none). */
#define VOCAB_ID_DEFAULT (-2)

enum vocab_special {
    VOCAB_SPECIAL_BOS,
    VOCAB_SPECIAL_EOS,
    VOCAB_SPECIAL_UNK,
    VOCAB_SPECIAL_SEP,
    VOCAB_SPECIAL_PAD,
    VOCAB_SPECIAL_COUNT
};

/* A vocabulary described by arrays (copied by vocab_create, not kept). */
struct vocab_desc {
    enum llama_vocab_type type;
    uint32_t n_tokens;
    const char *const *texts;  /* n_tokens strings ... */
    const size_t *text_lens;   /* ... of these lengths (NULL: strlen) */
    const float *scores;       /* NULL: all 0 */
    const int32_t *types;      /* enum llama_token_type values; NULL: all NORMAL */
    uint32_t n_merges;         /* BPE only: "left right" lines, rank = index */
    const char *const *merges;
    const size_t *merge_lens;  /* NULL: strlen */
    int64_t special_ids[VOCAB_SPECIAL_COUNT]; /* VOCAB_ID_DEFAULT or the file's value */
    int32_t add_bos;           /* tokenizer.ggml.add_bos_token: 1, 0, or -1 if absent */
    int32_t add_eos;
};

/* Initialises a description: everything empty, ids default, add_bos/eos -1. */
void vocab_desc_init(struct vocab_desc *desc);

/*
 * Builds a vocabulary. NULL with error_set() when the description is
 * invalid or memory runs out. Like b1892, a special id that is not a valid
 * token id is ignored with a warning (the default is kept); a default that
 * is not a valid id either (tiny vocabularies) becomes -1. The newline token
 * is SPM's <0x0A> byte token (required, as in b1892) or, for BPE, the first
 * token of BPE-tokenizing U+010A (b1892's choice).
 */
struct vocab *vocab_create(const struct vocab_desc *desc);

/*
 * Reads the vocabulary of a GGUF file: tokenizer.ggml.model (required;
 * "llama" = SPM, "gpt2" = BPE, anything else = SPM with a warning, as b1892),
 * tokenizer.ggml.tokens (required string array), .scores (optional f32 array
 * of the same length), .token_type (optional i32 array of the same length),
 * .merges (string array, required for BPE), .bos_token_id, .eos_token_id,
 * .unknown_token_id, .seperator_token_id, .padding_token_id (optional u32),
 * .add_bos_token, .add_eos_token (optional bool). A key of the wrong type is
 * an error, as in b1892.
 */
struct vocab *vocab_load_gguf(const struct gguf_reader *r);

void vocab_free(struct vocab *v);

/* ---- queries (ids outside [0, n_tokens) give NULL / 0 / UNDEFINED) ---------- */

enum llama_vocab_type vocab_type(const struct vocab *v);
int32_t vocab_n_tokens(const struct vocab *v);
int32_t vocab_n_merges(const struct vocab *v); /* BPE: lines of tokenizer.ggml.merges; SPM: 0 */
const char *vocab_token_text(const struct vocab *v, int32_t id); /* NUL-terminated */
size_t vocab_token_text_len(const struct vocab *v, int32_t id);
float vocab_token_score(const struct vocab *v, int32_t id);
enum llama_token_type vocab_token_type(const struct vocab *v, int32_t id);
/* The id of the token whose text is exactly text[0..len), or -1. */
int32_t vocab_find(const struct vocab *v, const char *text, size_t len);

/* Special ids (-1 = none). */
int32_t vocab_bos(const struct vocab *v);
int32_t vocab_eos(const struct vocab *v);
int32_t vocab_unk(const struct vocab *v);
int32_t vocab_sep(const struct vocab *v);
int32_t vocab_pad(const struct vocab *v);
int32_t vocab_nl(const struct vocab *v);
/* CodeLlama infill ids: b1892 returns these constants (32007, 32009, 32008,
 * 32010) for every model, whatever its vocabulary size. */
int32_t vocab_prefix(const struct vocab *v);
int32_t vocab_middle(const struct vocab *v);
int32_t vocab_suffix(const struct vocab *v);
int32_t vocab_eot(const struct vocab *v);
/* tokenizer.ggml.add_bos_token / add_eos_token: 1, 0, or -1 when absent. */
int32_t vocab_add_bos(const struct vocab *v);
int32_t vocab_add_eos(const struct vocab *v);

/* The special-token cache: ids in the order vocab_tokenize() cuts them out
 * (longest text first, then lower id; b1892 iterates a hash map here, an
 * order that only matters when two special texts overlap in the input). */
const int32_t *vocab_special_tokens(const struct vocab *v, int32_t *n);

/* ---- tokenization ----------------------------------------------------------- */

/*
 * Tokenizes text[0..len) (any bytes, NUL included). With add_bos the BOS id
 * comes first (if the vocabulary has one). Returns the number of tokens and
 * writes them to out when n_max is large enough; otherwise (also when out is
 * NULL) writes nothing and returns minus the number needed. Returns VOCAB_TOKENIZE_ERROR (with
 * error_set) when len > VOCAB_MAX_TEXT_LEN, text is NULL with len > 0, or
 * memory runs out.
 *
 * Cost: O(n log n) in the text length, plus one pass over the text per
 * special token that can occur in it when `special` is set.
 *
 * Beyond b1892: a byte with no byte token (SPM) or no single-byte token
 * (BPE fallback) becomes the UNK token, or is dropped when there is none
 * (b1892 throws); BPE input that is not valid UTF-8 is split byte by byte
 * where it is invalid (b1892 throws).
 */
int32_t vocab_tokenize(const struct vocab *v, const char *text, size_t len,
                       bool add_bos, bool special, int32_t *out, int32_t n_max);

/*
 * The text of one token as b1892's llama_token_to_piece gives it.
 * SPM: normal -> text with U+2581 turned into spaces; user-defined -> text;
 * unknown -> U+2585; control -> empty; byte <0xXX> -> that byte.
 * BPE: normal -> text mapped back through GPT-2's byte map (a character
 * outside the map is kept as is, where b1892 throws); others -> empty.
 * Out-of-range id -> empty. The bytes are not NUL-terminated; they live as
 * long as the vocabulary.
 */
const char *vocab_token_piece(const struct vocab *v, int32_t id, size_t *len);

/* Copies the piece into buf without a NUL: returns its length, or minus its
 * length (writing nothing) when `size` is smaller or buf is NULL. */
int32_t vocab_token_to_piece(const struct vocab *v, int32_t id, char *buf, int32_t size);

#endif

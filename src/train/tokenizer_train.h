/*
 * Learning a SentencePiece-style BPE vocabulary from a text corpus, for the
 * llama (SPM) tokenizer of b1892.
 *
 * The corpus is read as SentencePiece reads it for llama: every line is a
 * sentence (a trailing "\r" is dropped, empty lines are skipped); the text is
 * not normalised beyond escaping spaces: each ' ' becomes U+2581 "▁" and a
 * "▁" is put in front of every sentence (the dummy prefix that b1892 adds as
 * a leading space). Sentences are split into words before every "▁", so a
 * piece never spans two words and "▁" only ever starts a piece.
 *
 * Characters are UTF-8 sequences, split the way b1892's tokenizer splits
 * them (length from the lead byte). The most frequent characters that cover
 * `character_coverage` of all character occurrences are kept, plus "▁"
 * always; the rest (and anything that is not valid UTF-8) are left to the
 * 256 byte-fallback tokens and never take part in merges.
 *
 * Merges: repeatedly the most frequent adjacent pair of symbols is merged
 * into one symbol, in every word at once (left to right, without overlap).
 * Ties go to the shorter piece (in characters), then to the piece whose
 * bytes compare lower, then to the pair whose left part is shorter. A pair is
 * only a candidate if the merged piece has at most TOKENIZER_TRAIN_MAX_PIECE
 * characters and does not mix character classes: apart from its leading
 * "▁", a piece holds only letters or only punctuation/symbols, and a digit is
 * always a piece of its own (as llama's vocabulary has it). A merge whose
 * piece already exists (the same string reached by another split) is
 * applied but adds no token. Merging stops when the vocabulary is full or no
 * candidate pair is left.
 *
 * The vocabulary is laid out like llama's:
 *   0 <unk> (UNKNOWN), 1 <s> (CONTROL), 2 </s> (CONTROL),
 *   3..258 <0x00>..<0xFF> (BYTE), all with score 0,
 *   then the merged pieces in the order they were learned, then the kept
 *   characters by falling frequency (NORMAL), the k-th of these with score
 *   -k. So b1892's SPM tokenizer, which merges the adjacent pair whose
 *   concatenation is the token with the highest score, leftmost first,
 *   replays the merges in the order they were learned, and the characters
 *   (never the result of a merge) score below every merge.
 */
#ifndef LLAMAC_TRAIN_TOKENIZER_TRAIN_H
#define LLAMAC_TRAIN_TOKENIZER_TRAIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TOKENIZER_TRAIN_MAX_PIECE 16 /* characters; SentencePiece's default */
#define TOKENIZER_TRAIN_N_SPECIAL 3  /* <unk> <s> </s> */
#define TOKENIZER_TRAIN_N_BYTES 256
#define TOKENIZER_TRAIN_FIRST_PIECE (TOKENIZER_TRAIN_N_SPECIAL + TOKENIZER_TRAIN_N_BYTES)

/* llama_token_type values as b1892 stores them in tokenizer.ggml.token_type. */
enum tokenizer_token_type {
    TOKENIZER_TOKEN_NORMAL = 1,
    TOKENIZER_TOKEN_UNKNOWN = 2,
    TOKENIZER_TOKEN_CONTROL = 3,
    TOKENIZER_TOKEN_BYTE = 6,
};

struct tokenizer_train_params {
    int32_t vocab_size;        /* all tokens, specials and bytes included (default 4096) */
    double character_coverage; /* in (0, 1] (default 0.9995, SentencePiece's) */
};

void tokenizer_train_params_default(struct tokenizer_train_params *params);

/* A learned vocabulary. Token strings are NUL-terminated UTF-8 with "▁" for
 * spaces (none contains a NUL byte). */
struct tokenizer_vocab {
    int32_t n_tokens;
    char **tokens;
    float *scores;
    int32_t *types;    /* enum tokenizer_token_type */
    int32_t n_merges;  /* tokens made by merges: ids FIRST_PIECE .. FIRST_PIECE + n_merges - 1 */
    int32_t n_chars;   /* kept characters: the n_chars ids after the merges */
    /* Statistics of the corpus. */
    int64_t n_sentences, n_words, n_unique_words;
    int64_t n_char_occurrences, n_chars_seen;
    int64_t n_char_occurrences_kept; /* occurrences of the kept characters */
};

/* Learns a vocabulary from `size` bytes of text. NULL with error_set() on
 * bad parameters, a vocabulary size too small for the kept characters, or
 * out of memory. The result may have fewer than vocab_size tokens when the
 * corpus runs out of pairs to merge (a warning is logged). */
struct tokenizer_vocab *tokenizer_train(const char *text, size_t size, const struct tokenizer_train_params *params);
void tokenizer_vocab_free(struct tokenizer_vocab *vocab);

struct gguf_writer;

/* Sets the llama tokenizer keys of b1892 in `w`: tokenizer.ggml.model
 * "llama", .tokens, .scores (f32), .token_type (i32), .bos_token_id 1,
 * .eos_token_id 2, .unknown_token_id 0 (u32), .add_bos_token true,
 * .add_eos_token false. For a model file, call it on the model's writer. */
bool tokenizer_vocab_set_gguf(const struct tokenizer_vocab *vocab, struct gguf_writer *w);

/* Writes a vocabulary-only GGUF: general.architecture "llama", general.name
 * `name`, and the keys above. (b1892 loads a model's hyperparameters even
 * for vocab_only, so to load this file there, add the llama.* keys; the
 * model that `llamac train` writes has them.) */
bool tokenizer_vocab_write_gguf(const struct tokenizer_vocab *vocab, const char *name, const char *path);

#endif

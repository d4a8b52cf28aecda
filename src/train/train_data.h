/*
 * Turning a text corpus into the token stream that training samples windows
 * from.
 *
 * Every line is a sentence (as `llamac train-tokenizer` learned the
 * vocabulary from them): a trailing "\r" is dropped, empty lines are skipped,
 * each line is tokenized on its own the way llama.cpp tokenizes a prompt
 * (SPM: one leading space, so its first word gets its "▁" piece; no BOS),
 * and the vocabulary's newline token follows it. A model trained on the
 * stream continues a prompt line by line, ending each line with a newline.
 */
#ifndef LLAMAC_TRAIN_TRAIN_DATA_H
#define LLAMAC_TRAIN_TRAIN_DATA_H

#include <stddef.h>
#include <stdint.h>

struct vocab;

/* The tokens of text[0..size) (malloc'ed; *n_tokens set). NULL (error_set)
 * when the vocabulary has no newline token, a line is too long to tokenize,
 * or memory runs out. */
int32_t *train_tokenize_lines(const struct vocab *v, const char *text, size_t size, size_t *n_tokens);

#endif

/*
 * b1892's chunked perplexity loop with its output, shared by `llamac
 * perplexity` and `llamac imatrix` (b1892's imatrix tool prints the same
 * numbers while it collects).
 */
#ifndef LLAMAC_TOOLS_PERPLEXITY_H
#define LLAMAC_TOOLS_PERPLEXITY_H

#include <stdbool.h>
#include <stdint.h>

#include "common.h"
#include "llama.h"

/* The options both tools take beyond common_params: the text and how much of it. */
struct ppl_text_options {
    const char *text_file; /* NULL: the prompt (-p) is the text */
    int32_t n_chunks;      /* < 0: every whole chunk */
};

/* True when option a (its value v, NULL if none) is one of them: -f/--file
 * FILE or --chunks N, stored in o; the caller then skips the value. */
bool ppl_parse_text_option(const char *a, const char *v, struct ppl_text_options *o);

/* What both tools require once every option is read: a text and a context
 * size. 0 when given, else 1 with the error printed. */
int ppl_check_options(const char *cmd, const struct ppl_text_options *o, const struct common_params *p);

/* The text as a malloc'ed string (the file's, or a copy of the prompt);
 * NULL when the file cannot be read (the error printed) or memory runs out. */
char *ppl_read_text(const char *cmd, const struct ppl_text_options *o, const struct common_params *p);

struct ppl_chunks_params {
    const char *cmd;     /* for messages: "llamac CMD: ..." */
    int32_t n_chunks;    /* < 0: every whole chunk of the text */
    int32_t n_batch;
    int output_type;     /* 0: "[i]ppl," after each chunk; 1: one line per chunk */
    bool add_bos;        /* each chunk starts with BOS instead of its first token */
    /* (may be NULL) runs after chunk i (0-based); false stops with a failure */
    bool (*after_chunk)(int32_t i, void *data);
    void *data;
};

/* Cuts tokens into chunks of the context's n_ctx, scores the second half of
 * each (api/eval.h: eval_chunk_nll) and prints the running perplexity to
 * stdout, then "Final estimate: PPL = X +/- Y". The context needs logits_all.
 * Returns the command's exit status (errors are printed). */
int ppl_run_chunks(struct llama_context *ctx, llama_token *tokens, int32_t n_tokens, const struct ppl_chunks_params *p);

#endif

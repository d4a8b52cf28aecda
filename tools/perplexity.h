/*
 * b1892's chunked perplexity loop with its output, shared by `llamac
 * perplexity` and `llamac imatrix` (b1892's imatrix tool prints the same
 * numbers while it collects).
 */
#ifndef LLAMAC_TOOLS_PERPLEXITY_H
#define LLAMAC_TOOLS_PERPLEXITY_H

#include <stdbool.h>
#include <stdint.h>

#include "llama.h"

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

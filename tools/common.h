/*
 * What several `llamac` subcommands share: model/context options, loading a
 * model and context from them, and b1892's sampling chain (common/sampling.cpp)
 * for the generating tools.
 */
#ifndef LLAMAC_TOOLS_COMMON_H
#define LLAMAC_TOOLS_COMMON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "llama.h"

#define SAMPLING_MAX_LOGIT_BIAS 64

/* One --logit-bias entry: added to the token's logit before sampling. */
struct logit_bias_entry {
    llama_token token;
    float bias;
};

/* b1892's llama_sampling_params, same defaults. */
struct sampling_params {
    int32_t n_prev;           /* tokens remembered for the penalties */
    int32_t top_k;            /* <= 0: the whole vocabulary */
    float top_p;
    float min_p;
    float tfs_z;
    float typical_p;
    float temp;               /* 0: greedy; < 0: greedy with probabilities */
    int32_t penalty_last_n;   /* < 0: n_prev */
    float penalty_repeat;
    float penalty_freq;
    float penalty_present;
    int32_t mirostat;         /* 0 off, 1 v1, 2 v2 */
    float mirostat_tau;
    float mirostat_eta;
    bool penalize_nl;
    const char *samplers;     /* order of k f y p m t, default "kfypmt" */
    const char *grammar;      /* GBNF text or NULL */
    const char *cfg_negative_prompt;
    float cfg_scale;
    int32_t n_logit_bias;     /* b1892 keeps a map: a token given twice keeps its last bias */
    struct logit_bias_entry logit_bias[SAMPLING_MAX_LOGIT_BIAS];
};

struct common_params {
    const char *model_path;
    const char *prompt;
    int32_t n_predict;        /* -1: until end of text, -2: until the context is full */
    int32_t n_ctx;
    int32_t n_batch;
    int32_t n_threads;
    int32_t n_threads_batch;
    uint32_t seed;
    bool use_mmap;
    bool use_mlock;
    enum ggml_type type_k, type_v;
    const char *lora_path;      /* LoRA adapter applied after loading */
    float lora_scale;
    const char *lora_base_path; /* higher-precision model the adapter is added to */
    bool logits_all;            /* keep the logits of every batch position */
    bool embedding;             /* keep the last position's embedding */
    struct sampling_params sampling;
};

void common_params_default(struct common_params *p);

/* Parses the option at argv[*i] if it is a common one, advancing *i past its
 * value. Returns 1 if consumed, 0 if not a common option, -1 on a bad value
 * (message printed as "llamac CMD: ..."). */
int common_parse_option(const char *cmd, int argc, char **argv, int *i, struct common_params *p);
/* Help text for the common options. */
void common_print_options(void);

/* Library errors reach the user once, inside the tool's one-line failure
 * (cli_fail with error_last()); warnings still go to stderr. */
void common_log_warnings_only(void);

/* Loads the model and creates a context from p; prints one error line and returns false on failure. */
bool common_init(const char *cmd, const struct common_params *p, struct llama_model **model, struct llama_context **ctx);

/* A context for model from p's settings (also the guidance context); NULL with one error line. */
struct llama_context *common_context_new(const char *cmd, const struct common_params *p, struct llama_model *model);

/* Whether text for this model starts with BOS (b1892's llama_should_add_bos_token:
 * the model's tokenizer.ggml.add_bos_token, else true for SPM vocabularies). */
bool common_should_add_bos(const struct llama_model *model);

/* The text of a prompt file as b1892's -f reads it (one trailing newline dropped);
 * malloc'ed, NULL (with a message) on failure. */
char *common_read_prompt_file(const char *cmd, const char *path);

/* Tokenizes text into a malloc'ed array; NULL (with a message) on failure. */
llama_token *common_tokenize(const struct llama_model *model, const char *text, bool add_bos, bool special, int32_t *n_out);

/* Reports a failure: with cmd prints "llamac CMD: message" (cli_fail); with
 * cmd NULL (a server answering a request) records it as the last error
 * (error_set) for the caller to pass on. Returns 1. */
int common_fail(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* A growable token array (free data when done); the functions return false when memory runs out. */
struct tokens {
    llama_token *data;
    size_t n, cap;
};
bool tokens_append(struct tokens *t, const llama_token *src, size_t n);
bool tokens_push(struct tokens *t, llama_token id);
/* Appends the tokens of text (common_tokenize); false if it cannot be tokenized. */
bool tokens_tokenize(struct tokens *t, const struct llama_model *model, const char *text, bool add_bos, bool special);

/* Parses GBNF text (b1892's syntax) and builds the grammar from its "root"
 * rule. On failure reports "NAME: reason" through common_fail (line and
 * column for a syntax error; an undefined rule, no root, left recursion) and
 * returns NULL.
 * With printed, *printed receives b1892's print_grammar text (malloc'ed). */
struct llama_grammar *common_grammar_load(const char *cmd, const char *name, const char *text, char **printed);

/* The length of text[0, n) without a trailing UTF-8 sequence that is still
 * incomplete (the bytes a streaming tool holds back until the next piece). */
size_t common_utf8_complete_len(const char *text, size_t n);

/* Reads a whole file ("-" = stdin) into a malloc'ed NUL-terminated string; NULL if it cannot be read. */
char *common_read_file(const char *path);

#endif

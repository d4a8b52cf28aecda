/*
 * llamac server: b1892's examples/server over one model and one context.
 * server.c has the command line, the accept loop, the routing and the small
 * endpoints; server_completion.c has POST /completion (request fields,
 * prompt cache, the generation loop with stop words and streaming, the
 * response). Requests are served one at a time, in the order they arrive.
 */
#ifndef LLAMAC_TOOLS_SERVER_H
#define LLAMAC_TOOLS_SERVER_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "common.h"
#include "llama.h"

struct server {
    struct common_params p;    /* the defaults of every request (command line) */
    const char *alias;         /* "model" in the responses */
    bool embedding;            /* POST /embedding allowed (--embedding) */
    struct llama_model *model;
    struct llama_context *ctx;
    int32_t n_ctx, n_batch, n_vocab;
    bool add_bos;
    llama_token *cache;        /* the tokens whose KV cells sit at positions 0 .. n_cache-1 (n_ctx entries) */
    int32_t n_cache;
};

/* Set by SIGINT/SIGTERM: the current request ends, then the server exits. */
extern volatile sig_atomic_t g_server_stop;

/* Sends {"error": message} with status. */
void server_send_error(int fd, int status, const char *message);
/* Sends json (then frees it) with status 200. */
void server_send_json(int fd, cJSON *json);
/* Parses a request body that must be a JSON object; NULL after answering 400. */
cJSON *server_parse_body(int fd, const char *body, size_t len);

/* Adds a float as b1892 prints it (shortest form of the float, not of the
 * double; infinities become null). */
void server_add_float(cJSON *obj, const char *key, float value);
cJSON *server_float(float value);

/* b1892's tokenize for a "prompt": a string, or an array of token ids and
 * strings; BOS (with add_bos) only when the first element is a string.
 * Special tokens are parsed (b1892's TMP_FORCE_SPECIAL). False with a
 * message in err (a wrong type, a token id outside the vocabulary). */
bool server_tokenize_prompt(const struct server *s, const cJSON *prompt, bool add_bos, struct tokens *out, char *err,
                            size_t err_cap);

/* Puts toks[0, n) into the KV cache: with reuse keeps the cells of the
 * prefix it shares with the tokens already there, evaluates the rest (at
 * least the last token, for its logits). *n_evaluated: tokens decoded.
 * False with a message in err when decoding fails (the cache is cleared). */
bool server_load_prompt(struct server *s, const llama_token *toks, int32_t n, bool reuse, int32_t *n_evaluated,
                        char *err, size_t err_cap);

/* GET /props and /model.json: the default generation settings. */
cJSON *server_default_settings(const struct server *s);

/* POST /completion; answers on fd itself (JSON or an event stream). */
void server_handle_completion(struct server *s, int fd, const char *body, size_t body_len);

#endif

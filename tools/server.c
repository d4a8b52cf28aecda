/*
 * llamac server: an HTTP completion server like b1892's examples/server
 * (GET /health, /props, /model.json; POST /completion, /tokenize,
 * /detokenize, /embedding; OPTIONS preflight). One model, one context, one
 * request at a time in arrival order: connections that come while a
 * request is served wait in the listen queue. See server.h.
 */
#include "server.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "core/log.h"
#include "http.h"
#include "sampler.h"

#define SERVER_READ_TIMEOUT_MS 30000 /* a client that sends nothing for this long gets 408 */
#define SERVER_SEND_TIMEOUT_MS 30000 /* a client that reads nothing for this long is dropped */

volatile sig_atomic_t g_server_stop;

static void server_on_signal(int signo) {
    (void)signo;
    g_server_stop = 1;
}

static void server_usage(void) {
    printf("usage: llamac server -m MODEL [options]\n\n"
           "Serves completions over HTTP like b1892's server (see README.md, \"Server\"):\n"
           "GET /health, /props; POST /completion, /tokenize, /detokenize, /embedding.\n"
           "Prints \"llamac server listening on http://HOST:PORT\" once it accepts requests;\n"
           "SIGINT or SIGTERM ends the current request and exits.\n\n"
           "  --host HOST               address to listen on (default 127.0.0.1)\n"
           "  --port N                  port (default 8080; 0 = any free port, printed)\n"
           "  --embedding               allow POST /embedding\n"
           "  -a, --alias NAME          the model's name in responses (default: the model path)\n"
           "  -n, --n-predict N         default tokens per completion (default -1 = until end of text)\n"
           "The sampling options below are the defaults of every request.\n");
    common_print_options();
}

/* ---- JSON helpers ---- */

cJSON *server_float(float value) {
    if (isinf(value) || isnan(value)) return cJSON_CreateNull();
    char text[32];
    snprintf(text, sizeof text, "%.7g", (double)value);
    return cJSON_CreateNumber(strtod(text, NULL));
}

void server_add_float(cJSON *obj, const char *key, float value) {
    cJSON_AddItemToObject(obj, key, server_float(value));
}

static void server_send_text_json(int fd, int status, cJSON *json) {
    char *text = json ? cJSON_PrintUnformatted(json) : NULL;
    if (text) {
        http_send_response(fd, status, "application/json; charset=utf-8", text, strlen(text));
    } else {
        static const char oom[] = "{\"error\":\"out of memory\"}";
        http_send_response(fd, 500, "application/json; charset=utf-8", oom, sizeof oom - 1);
    }
    free(text);
    cJSON_Delete(json);
}

void server_send_json(int fd, cJSON *json) {
    server_send_text_json(fd, 200, json);
}

void server_send_error(int fd, int status, const char *message) {
    cJSON *json = cJSON_CreateObject();
    if (json) cJSON_AddStringToObject(json, "error", message);
    server_send_text_json(fd, status, json);
}

cJSON *server_parse_body(int fd, const char *body, size_t len) {
    cJSON *json = len ? cJSON_ParseWithLength(body, len) : NULL;
    if (!json) {
        server_send_error(fd, 400, len ? "the request body is not valid JSON" : "the request body is empty (send JSON)");
        return NULL;
    }
    if (!cJSON_IsObject(json)) {
        cJSON_Delete(json);
        server_send_error(fd, 400, "the request body must be a JSON object");
        return NULL;
    }
    return json;
}

/* ---- prompt and KV cache, shared by /completion and /embedding ---- */

bool server_tokenize_prompt(const struct server *s, const cJSON *prompt, bool add_bos, struct tokens *out, char *err,
                            size_t err_cap) {
    if (cJSON_IsString(prompt)) {
        if (!tokens_tokenize(out, s->model, prompt->valuestring, add_bos, true)) {
            snprintf(err, err_cap, "cannot tokenize the prompt");
            return false;
        }
        return true;
    }
    if (!cJSON_IsArray(prompt)) {
        snprintf(err, err_cap, "\"prompt\" must be a string or an array of token ids and strings");
        return false;
    }
    int index = 0;
    for (const cJSON *el = prompt->child; el; el = el->next, index++) {
        if (cJSON_IsString(el)) {
            if (!tokens_tokenize(out, s->model, el->valuestring, index == 0 && add_bos, true)) {
                snprintf(err, err_cap, "cannot tokenize the prompt");
                return false;
            }
        } else if (cJSON_IsNumber(el) && el->valuedouble == floor(el->valuedouble) && el->valuedouble >= 0 &&
                   el->valuedouble < s->n_vocab) {
            if (!tokens_push(out, (llama_token)el->valuedouble)) {
                snprintf(err, err_cap, "out of memory");
                return false;
            }
        } else {
            snprintf(err, err_cap, "prompt element %d must be a string or a token id in 0..%d", index,
                     s->n_vocab - 1);
            return false;
        }
    }
    return true;
}

bool server_load_prompt(struct server *s, const llama_token *toks, int32_t n, bool reuse, int32_t *n_evaluated,
                        char *err, size_t err_cap) {
    int32_t keep = 0;
    if (reuse) {
        while (keep < s->n_cache && keep < n && s->cache[keep] == toks[keep]) keep++;
    }
    if (keep == n) keep = n - 1; /* the last token is evaluated again for its logits */
    llama_kv_cache_seq_rm(s->ctx, -1, keep, -1);
    s->n_cache = keep;
    for (int32_t i = keep; i < n; i += s->n_batch) {
        const int32_t n_eval = n - i < s->n_batch ? n - i : s->n_batch;
        if (llama_decode(s->ctx, llama_batch_get_one((llama_token *)toks + i, n_eval, i, 0)) != 0) {
            snprintf(err, err_cap, "failed to evaluate the prompt: %s", error_last());
            llama_kv_cache_clear(s->ctx);
            s->n_cache = 0;
            return false;
        }
        memcpy(s->cache + i, toks + i, (size_t)n_eval * sizeof *toks);
        s->n_cache = i + n_eval;
    }
    *n_evaluated = n - keep;
    return true;
}

/* ---- the small endpoints ---- */

static void handle_props(struct server *s, int fd) {
    cJSON *json = cJSON_CreateObject();
    cJSON_AddStringToObject(json, "user_name", "");
    cJSON_AddStringToObject(json, "assistant_name", "");
    cJSON_AddItemToObject(json, "default_generation_settings", server_default_settings(s));
    cJSON_AddNumberToObject(json, "n_ctx", s->n_ctx);
    server_send_json(fd, json);
}

/* POST /tokenize {"content": "text"} -> {"tokens": [...]} (no BOS, special tokens parsed, as b1892). */
static void handle_tokenize(struct server *s, int fd, const char *body, size_t len) {
    cJSON *req = server_parse_body(fd, body, len);
    if (!req) return;
    const cJSON *content = cJSON_GetObjectItemCaseSensitive(req, "content");
    struct tokens toks = { 0 };
    if (content && !cJSON_IsNull(content) && !cJSON_IsString(content)) {
        server_send_error(fd, 400, "\"content\" must be a string");
    } else if (cJSON_IsString(content) && !tokens_tokenize(&toks, s->model, content->valuestring, false, true)) {
        server_send_error(fd, 500, "cannot tokenize the content");
    } else {
        cJSON *json = cJSON_CreateObject();
        cJSON *arr = cJSON_AddArrayToObject(json, "tokens");
        for (size_t i = 0; i < toks.n; i++) cJSON_AddItemToArray(arr, cJSON_CreateNumber(toks.data[i]));
        server_send_json(fd, json);
    }
    free(toks.data);
    cJSON_Delete(req);
}

/* POST /detokenize {"tokens": [...]} -> {"content": "text"}: the pieces concatenated. */
static void handle_detokenize(struct server *s, int fd, const char *body, size_t len) {
    cJSON *req = server_parse_body(fd, body, len);
    if (!req) return;
    const cJSON *tokens = cJSON_GetObjectItemCaseSensitive(req, "tokens");
    size_t text_len = 0, text_cap = 256;
    char *text = malloc(text_cap); /* never NULL to llama_token_to_piece, even for an empty piece */
    const char *problem = text ? NULL : "out of memory";
    if (tokens && !cJSON_IsNull(tokens) && !cJSON_IsArray(tokens)) problem = "\"tokens\" must be an array of token ids";
    for (const cJSON *el = cJSON_IsArray(tokens) ? tokens->child : NULL; el && !problem; el = el->next) {
        if (!cJSON_IsNumber(el) || el->valuedouble != floor(el->valuedouble) || el->valuedouble < 0 ||
            el->valuedouble >= s->n_vocab) {
            problem = "\"tokens\" must hold token ids inside the vocabulary";
            break;
        }
        /* the piece goes straight into the text; a negative length is the room it needs */
        const llama_token id = (llama_token)el->valuedouble;
        int32_t n = llama_token_to_piece(s->model, id, text + text_len, (int32_t)(text_cap - text_len));
        if (n < 0 || text_len + (size_t)n + 1 > text_cap) {
            const size_t need = text_len + (size_t)(n < 0 ? -n : n) + 1;
            size_t cap = text_cap * 2;
            while (cap < need) cap *= 2;
            char *grown = realloc(text, cap);
            if (!grown) {
                problem = "out of memory";
                break;
            }
            text = grown;
            text_cap = cap;
            n = llama_token_to_piece(s->model, id, text + text_len, (int32_t)(text_cap - text_len));
        }
        if (n > 0) text_len += (size_t)n;
    }
    if (problem) {
        server_send_error(fd, 400, problem);
    } else {
        text[text_len] = '\0';
        cJSON *json = cJSON_CreateObject();
        cJSON_AddStringToObject(json, "content", text);
        server_send_json(fd, json);
    }
    free(text);
    cJSON_Delete(req);
}

/* POST /embedding {"content": ...} -> {"embedding": [n_embd floats]}: the
 * last token's embedding (with BOS, like llamac embedding). */
static void handle_embedding(struct server *s, int fd, const char *body, size_t len) {
    if (!s->embedding) {
        server_send_error(fd, 501, "embeddings are off: start the server with --embedding");
        return;
    }
    cJSON *req = server_parse_body(fd, body, len);
    if (!req) return;
    const cJSON *content = cJSON_GetObjectItemCaseSensitive(req, "content");
    cJSON *empty = NULL; /* no content: b1892 embeds the empty prompt */
    if (!content || cJSON_IsNull(content)) content = empty = cJSON_CreateString("");
    struct tokens toks = { 0 };
    char err[256];
    int32_t n_evaluated = 0;
    if (!server_tokenize_prompt(s, content, s->add_bos, &toks, err, sizeof err)) {
        server_send_error(fd, 400, err);
    } else if (toks.n == 0) {
        server_send_error(fd, 400, "\"content\" has no tokens");
    } else if ((int32_t)toks.n > s->n_ctx) {
        snprintf(err, sizeof err, "the content is %zu tokens, longer than the context (%d)", toks.n, s->n_ctx);
        server_send_error(fd, 400, err);
    } else if (!server_load_prompt(s, toks.data, (int32_t)toks.n, true, &n_evaluated, err, sizeof err)) {
        server_send_error(fd, 500, err);
    } else {
        const float *embd = llama_get_embeddings(s->ctx);
        cJSON *json = cJSON_CreateObject();
        cJSON *arr = cJSON_AddArrayToObject(json, "embedding");
        for (int32_t i = 0; embd && i < llama_n_embd(s->model); i++) cJSON_AddItemToArray(arr, server_float(embd[i]));
        server_send_json(fd, json);
    }
    free(toks.data);
    cJSON_Delete(empty);
    cJSON_Delete(req);
}

/* Reads one request from fd and answers it. */
static void server_serve(struct server *s, int fd) {
    struct http_request req;
    const int status = http_read_request(fd, &req, SERVER_READ_TIMEOUT_MS, &g_server_stop);
    if (status != 0) {
        if (status > 0) {
            char msg[128];
            snprintf(msg, sizeof msg, "%s%s", http_status_text(status),
                     status == 400 ? ": malformed HTTP request" :
                     status == 411 ? ": send the body with Content-Length, not chunked" :
                     status == 413 ? ": the body is over 16 MiB" : "");
            server_send_error(fd, status, msg);
            fprintf(stderr, "llamac server: bad request: %d\n", status);
        }
        http_request_free(&req);
        return;
    }
    const char *m = req.method, *path = req.path;
    const bool get = strcmp(m, "GET") == 0, post = strcmp(m, "POST") == 0;
    int known = 1;
    if (strcmp(m, "OPTIONS") == 0) {
        http_send_response(fd, 200, "application/json", "", 0); /* CORS preflight: the headers say it */
    } else if (!strcmp(path, "/health")) {
        if (get) {
            static const char ok[] = "{\"status\":\"ok\"}";
            http_send_response(fd, 200, "application/json; charset=utf-8", ok, sizeof ok - 1);
        } else known = -1;
    } else if (!strcmp(path, "/props")) {
        if (get) handle_props(s, fd);
        else known = -1;
    } else if (!strcmp(path, "/model.json")) {
        if (get) server_send_json(fd, server_default_settings(s));
        else known = -1;
    } else if (!strcmp(path, "/completion")) {
        if (post) server_handle_completion(s, fd, req.body, req.body_len);
        else known = -1;
    } else if (!strcmp(path, "/tokenize")) {
        if (post) handle_tokenize(s, fd, req.body, req.body_len);
        else known = -1;
    } else if (!strcmp(path, "/detokenize")) {
        if (post) handle_detokenize(s, fd, req.body, req.body_len);
        else known = -1;
    } else if (!strcmp(path, "/embedding")) {
        if (post) handle_embedding(s, fd, req.body, req.body_len);
        else known = -1;
    } else {
        known = 0;
    }
    if (known <= 0) {
        char msg[2200];
        snprintf(msg, sizeof msg, known ? "%s is not allowed on %s" : "no such endpoint: %s %s", m, path);
        server_send_error(fd, known ? 405 : 404, msg);
    }
    fprintf(stderr, "llamac server: %s %s\n", m, path);
    http_request_free(&req);
}

/* ---- command line ---- */

struct server_options {
    const char *host;
    int port;
};

/* 1: go on, 0: --help printed, -1: bad option (message printed). */
static int parse_options(int argc, char **argv, struct server *s, struct server_options *o) {
    const char *cmd = "server";
    for (int i = 1; i < argc; i++) {
        const int r = common_parse_option(cmd, argc, argv, &i, &s->p);
        if (r < 0) return -1;
        if (r > 0) continue;
        const char *a = argv[i];
        long long v;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            server_usage();
            return 0;
        } else if (!strcmp(a, "--embedding")) {
            s->embedding = true;
        } else if (!strcmp(a, "--host") || !strcmp(a, "--port") || !strcmp(a, "-a") || !strcmp(a, "--alias")) {
            if (i + 1 >= argc) {
                cli_fail(cmd, "option %s needs a value", a);
                return -1;
            }
            const char *value = argv[++i];
            if (!strcmp(a, "--host")) o->host = value;
            else if (strcmp(a, "--port") != 0) s->alias = value;
            else if (cli_parse_int(value, 0, 65535, &v)) o->port = (int)v;
            else {
                cli_fail(cmd, "--port expects a port number 0..65535, got '%s'", value);
                return -1;
            }
        } else {
            cli_fail(cmd, "unknown option '%s' (see llamac server --help)", a);
            return -1;
        }
    }
    if (s->p.prompt) {
        cli_fail(cmd, "-p has no meaning here: every request sends its prompt");
        return -1;
    }
    if (s->p.sampling.cfg_negative_prompt || s->p.sampling.cfg_scale != 1.0f) {
        cli_fail(cmd, "classifier-free guidance is not supported by the server");
        return -1;
    }
    if (s->p.n_predict < -1) {
        cli_fail(cmd, "-n must be -1 (until end of text) or more");
        return -1;
    }
    return 1;
}

int cmd_server(int argc, char **argv) {
    const char *cmd = "server";
    struct server s;
    memset(&s, 0, sizeof s);
    common_params_default(&s.p);
    s.p.n_predict = -1; /* b1892's server: until end of text unless a request says otherwise */
    struct server_options o = { "127.0.0.1", 8080 };
    const int parsed = parse_options(argc, argv, &s, &o);
    if (parsed <= 0) return parsed < 0 ? 1 : 0;
    if (!s.alias) s.alias = s.p.model_path;
    s.p.embedding = s.embedding;
    common_log_warnings_only();

    int status = 1, listen_fd = -1;
    if (!common_init(cmd, &s.p, &s.model, &s.ctx)) goto done;
    s.n_ctx = (int32_t)llama_n_ctx(s.ctx);
    s.n_batch = (int32_t)llama_n_batch(s.ctx);
    s.n_vocab = llama_n_vocab(s.model);
    s.add_bos = common_should_add_bos(s.model);
    if (!(s.cache = malloc((size_t)s.n_ctx * sizeof *s.cache))) {
        cli_fail(cmd, "out of memory");
        goto done;
    }
    struct sampler *check = sampler_new(cmd, &s.p.sampling, s.model); /* the defaults' grammar and logit bias */
    if (!check) goto done;
    sampler_free(check);

    int port = 0;
    if ((listen_fd = http_listen(o.host, o.port, &port)) < 0) {
        cli_fail(cmd, "%s", error_last());
        goto done;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = server_on_signal; /* no SA_RESTART: a wait returns at once */
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    const bool v6 = strchr(o.host, ':') != NULL;
    printf("llamac server listening on http://%s%s%s:%d\n", v6 ? "[" : "", o.host, v6 ? "]" : "", port);
    fflush(stdout);

    while (!g_server_stop) {
        /* the signal may land on a compute thread: wake up now and then to look at the flag */
        const int fd = http_accept(listen_fd, 250, SERVER_SEND_TIMEOUT_MS);
        if (fd < 0) continue;
        server_serve(&s, fd);
        http_close(fd);
    }
    fprintf(stderr, "llamac server: stopped by a signal\n");
    status = 0;

done:
    if (listen_fd >= 0) close(listen_fd);
    free(s.cache);
    llama_free(s.ctx);
    llama_free_model(s.model);
    return status;
}

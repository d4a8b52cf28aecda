/* `llamac server` end to end on stories260K: started with --port 0, driven
 * over real sockets. Greedy completions against b1892 main's golden text and
 * against `llamac run`, the prompt cache, streaming, stop words, grammar,
 * n_probs, tokenize/detokenize against the library, embeddings against the
 * golden ones, bad requests, a client leaving mid-stream, queued
 * connections, and a clean exit on SIGTERM. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <cjson/cJSON.h>

#include "cli_test_util.h"
#include "llama.h"
#include "test_util.h"

static const char PROMPT[] = "Once upon a time";

struct reply {
    int status;
    char *raw;        /* the whole response */
    const char *body; /* inside raw */
    cJSON *json;      /* the body parsed, or NULL */
};

static int server_connect(int port) {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in addr;
    memset(&addr, 0, sizeof addr);
    addr.sin_family = AF_INET;
    addr.sin_port = htons((uint16_t)port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    struct timeval tv = { 120, 0 };
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    if (connect(fd, (struct sockaddr *)&addr, sizeof addr) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static bool send_text(int fd, const char *data, size_t len) {
    while (len) {
        const ssize_t w = send(fd, data, len, MSG_NOSIGNAL);
        if (w <= 0) return false;
        data += w;
        len -= (size_t)w;
    }
    return true;
}

/* Reads until the server closes the connection. */
static struct reply read_reply(int fd) {
    struct cli_buf b = { 0 };
    cli_buf_add(&b, "", 0);
    char chunk[8192];
    ssize_t got;
    while ((got = recv(fd, chunk, sizeof chunk, 0)) > 0) cli_buf_add(&b, chunk, (size_t)got);
    close(fd);
    struct reply r = { -1, b.data, "", NULL };
    if (sscanf(b.data, "HTTP/1.1 %d", &r.status) != 1) r.status = -1;
    const char *end = strstr(b.data, "\r\n\r\n");
    if (end) r.body = end + 4;
    r.json = cJSON_Parse(r.body);
    return r;
}

static struct reply request_raw(int port, const char *text, size_t len) {
    const int fd = server_connect(port);
    if (fd < 0 || !send_text(fd, text, len)) {
        if (fd >= 0) close(fd);
        return (struct reply){ -1, NULL, "", NULL };
    }
    return read_reply(fd);
}

static char *format_request(const char *method, const char *path, const char *body) {
    const size_t len = body ? strlen(body) : 0;
    char *text = malloc(len + strlen(path) + 128);
    sprintf(text, "%s %s HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n\r\n%s",
            method, path, len, body ? body : "");
    return text;
}

static struct reply request(int port, const char *method, const char *path, const char *body) {
    char *text = format_request(method, path, body);
    struct reply r = request_raw(port, text, strlen(text));
    free(text);
    return r;
}

static void reply_free(struct reply *r) {
    free(r->raw);
    cJSON_Delete(r->json);
}

static const cJSON *get(const struct reply *r, const char *key) {
    return cJSON_GetObjectItemCaseSensitive(r->json, key);
}

static const char *get_str(const struct reply *r, const char *key) {
    const cJSON *v = get(r, key);
    return cJSON_IsString(v) ? v->valuestring : "(none)";
}

static double get_num(const struct reply *r, const char *key) {
    const cJSON *v = get(r, key);
    return cJSON_IsNumber(v) ? v->valuedouble : -1e9;
}

/* POST /completion with body; returns the reply (status checked by the caller). */
static struct reply complete(int port, const char *body) {
    return request(port, "POST", "/completion", body);
}

/* Starts the server and reads its port from the first stdout line; 0 on failure. */
static int server_start(struct cli_proc *proc, const char *const *args) {
    if (!cli_spawn(proc, args)) return 0;
    const double end = cli_now() + 120;
    while (!strchr(proc->stdout_text.data, '\n') && cli_now() < end) {
        if (!cli_pump(proc, 0.1, 0) && !strchr(proc->stdout_text.data, '\n')) break;
    }
    const char *at = strstr(proc->stdout_text.data, "llamac server listening on http://127.0.0.1:");
    if (!at) {
        fprintf(stderr, "server did not start: %s\n", proc->stderr_text.data);
        return 0;
    }
    return atoi(at + strlen("llamac server listening on http://127.0.0.1:"));
}

/* The SSE events of a streamed reply, each parsed; returns how many (at most cap). */
static int parse_events(const char *body, cJSON **events, int cap) {
    int n = 0;
    for (const char *p = body; (p = strstr(p, "data: ")) && n < cap;) {
        p += 6;
        const char *end = strstr(p, "\n\n");
        if (!end) break;
        events[n++] = cJSON_ParseWithLength(p, (size_t)(end - p));
        p = end + 2;
    }
    return n;
}

/* Whether text is one or more " yes"/" no" followed by ".". */
static bool matches_yes_no(const char *text) {
    int words = 0;
    for (;;) {
        if (!strncmp(text, " yes", 4)) text += 4;
        else if (!strncmp(text, " no", 3)) text += 3;
        else break;
        words++;
    }
    return words > 0 && strcmp(text, ".") == 0;
}

static void test_tokenizer(int port, const char *model_path) {
    struct llama_model_params mp = llama_model_default_params();
    mp.vocab_only = true;
    struct llama_model *vocab = llama_load_model_from_file(model_path, mp);
    CHECK(vocab != NULL);
    if (!vocab) return;
    const char *text = "Once upon a time, <s> there was a caf\xc3\xa9.";
    llama_token want[64];
    const int32_t n_want = llama_tokenize(vocab, text, (int32_t)strlen(text), want, 64, false, true);
    char body[256];
    snprintf(body, sizeof body, "{\"content\": \"Once upon a time, <s> there was a caf\xc3\xa9.\"}");
    struct reply r = request(port, "POST", "/tokenize", body);
    CHECK_EQ_INT(r.status, 200);
    const cJSON *toks = get(&r, "tokens");
    CHECK_EQ_INT(cJSON_GetArraySize(toks), n_want);
    int i = 0;
    for (const cJSON *t = toks ? toks->child : NULL; t && i < n_want; t = t->next, i++) {
        CHECK_EQ_INT(t->valueint, want[i]);
    }
    /* detokenize: the pieces concatenated, as the library gives them */
    char *detok_req = cJSON_PrintUnformatted(r.json);
    struct reply d = request(port, "POST", "/detokenize", detok_req);
    char pieces[512] = "";
    for (int32_t k = 0; k < n_want; k++) {
        char piece[64];
        const int32_t n = llama_token_to_piece(vocab, want[k], piece, sizeof piece - 1);
        piece[n > 0 ? n : 0] = '\0';
        strcat(pieces, piece);
    }
    CHECK_EQ_INT(d.status, 200);
    CHECK_STR_EQ(get_str(&d, "content"), pieces);
    CHECK_STR_EQ(get_str(&d, "content"), " Once upon a time,  there was a caf\xc3\xa9.");
    free(detok_req);
    reply_free(&d);
    reply_free(&r);
    llama_free_model(vocab);
}

/* Greedy text = b1892 main's (golden, -n 64 --temp 0, with and without the repetition penalty). */
static void test_golden_greedy(int port, char **greedy64) {
    cJSON *golden = golden_load("golden/cli-main-stories260K.json");
    const char *bodies[2] = { "{\"prompt\": \"Once upon a time\", \"n_predict\": 64, \"temperature\": 0}",
                              "{\"prompt\": \"Once upon a time\", \"n_predict\": 64, \"temperature\": 0, "
                              "\"repeat_penalty\": 1.0}" };
    for (int i = 0; i < 2; i++) {
        const char *want = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(golden, "runs"), i), "stdout")
                               ->valuestring;
        struct reply r = complete(port, bodies[i]);
        CHECK_EQ_INT(r.status, 200);
        char got[4096];
        snprintf(got, sizeof got, " %s%s", PROMPT, get_str(&r, "content"));
        CHECK_MSG(strcmp(got, want) == 0, "run %d:\n got: %s\nwant: %s", i, got, want);
        CHECK_EQ_INT(get_num(&r, "tokens_predicted"), 64);
        CHECK_EQ_INT(get_num(&r, "tokens_evaluated"), 5);
        CHECK(cJSON_IsTrue(get(&r, "stopped_limit")) && cJSON_IsFalse(get(&r, "stopped_eos")));
        CHECK_STR_EQ(get_str(&r, "prompt"), PROMPT);
        const cJSON *settings = get(&r, "generation_settings");
        CHECK_EQ_INT(cJSON_GetObjectItem(settings, "n_ctx")->valueint, 256);
        CHECK_EQ_INT(cJSON_GetObjectItem(settings, "n_predict")->valueint, 64);
        const cJSON *timings = get(&r, "timings");
        CHECK_EQ_INT(cJSON_GetObjectItem(timings, "predicted_n")->valueint, 64);
        CHECK(cJSON_IsNumber(cJSON_GetObjectItem(timings, "prompt_per_second")));
        if (i == 0) *greedy64 = strdup(get_str(&r, "content"));
        reply_free(&r);
    }
    cJSON_Delete(golden);
}

/* The same text as `llamac run` with the same settings (top-k 1, default temperature and penalty). */
static void test_same_as_run(int port, const char *model) {
    struct cli_result run = cli_run((const char *[]){ "run", "-m", model, "-p", PROMPT, "-n", "32", "--top-k", "1",
                                                      "-c", "256", "-t", "1", "--no-display-prompt", NULL },
                                    NULL, 300);
    CHECK_MSG(run.status == 0, "%s", run.err);
    size_t len = strlen(run.out);
    if (len && run.out[len - 1] == '\n') run.out[len - 1] = '\0';
    struct reply r = complete(port, "{\"prompt\": \"Once upon a time\", \"n_predict\": 32, \"top_k\": 1}");
    CHECK_EQ_INT(r.status, 200);
    CHECK_MSG(strcmp(get_str(&r, "content"), run.out) == 0, "\nserver: %s\n   run: %s", get_str(&r, "content"), run.out);
    CHECK(strlen(run.out) > 50);
    reply_free(&r);
    cli_result_free(&run);
}

static void test_prompt_cache(int port) {
    const char *first = "{\"prompt\": \"Once upon a time, there was a girl\", \"n_predict\": 16, \"temperature\": 0, "
                        "\"cache_prompt\": true}";
    struct reply a = complete(port, first), b = complete(port, first);
    CHECK_EQ_INT(a.status, 200);
    CHECK_EQ_INT(b.status, 200);
    CHECK_STR_EQ(get_str(&b, "content"), get_str(&a, "content"));
    CHECK(get_num(&b, "tokens_cached") > 0);
    const double n_prompt = get_num(&b, "tokens_evaluated");
    CHECK_EQ_INT(cJSON_GetObjectItem(get(&b, "timings"), "prompt_n")->valueint, 1); /* only the last token again */
    CHECK_EQ_INT(get_num(&b, "tokens_cached"), n_prompt + 15);
    /* a longer prompt with the same start: only the new part is evaluated, and the text is as without the cache */
    const char *longer = "{\"prompt\": \"Once upon a time, there was a girl named Lily. She\", \"n_predict\": 16, "
                         "\"temperature\": 0, \"cache_prompt\": %s}";
    char body[256];
    snprintf(body, sizeof body, longer, "true");
    struct reply c = complete(port, body);
    snprintf(body, sizeof body, longer, "false");
    struct reply d = complete(port, body);
    CHECK_EQ_INT(c.status, 200);
    CHECK_STR_EQ(get_str(&c, "content"), get_str(&d, "content"));
    const int prompt_n_cached = cJSON_GetObjectItem(get(&c, "timings"), "prompt_n")->valueint;
    CHECK_MSG(prompt_n_cached > 0 && prompt_n_cached <= get_num(&c, "tokens_evaluated") - n_prompt,
              "prompt_n %d of %g tokens", prompt_n_cached, get_num(&c, "tokens_evaluated"));
    CHECK_EQ_INT(cJSON_GetObjectItem(get(&d, "timings"), "prompt_n")->valueint, get_num(&d, "tokens_evaluated"));
    reply_free(&a);
    reply_free(&b);
    reply_free(&c);
    reply_free(&d);
}

/* Streams body and checks that the events add up to want; returns the number of events. */
static int check_stream(int port, const char *body, const char *want) {
    struct reply r = complete(port, body);
    CHECK_EQ_INT(r.status, 200);
    CHECK(strstr(r.raw, "Content-Type: text/event-stream") != NULL);
    cJSON *events[256];
    const int n = parse_events(r.body, events, 256);
    char text[4096] = "";
    bool stops_last = n > 0;
    for (int i = 0; i < n; i++) {
        const cJSON *content = cJSON_GetObjectItem(events[i], "content");
        CHECK(cJSON_IsString(content));
        if (cJSON_IsString(content)) strncat(text, content->valuestring, sizeof text - strlen(text) - 1);
        if (cJSON_IsTrue(cJSON_GetObjectItem(events[i], "stop")) != (i == n - 1)) stops_last = false;
    }
    CHECK(stops_last);
    CHECK_MSG(strcmp(text, want) == 0, "\nstreamed: %s\n    want: %s", text, want);
    if (n > 0) CHECK(cJSON_GetObjectItem(events[n - 1], "timings") != NULL);
    for (int i = 0; i < n; i++) cJSON_Delete(events[i]);
    reply_free(&r);
    return n;
}

static void test_stream_and_stop(int port, const char *greedy64) {
    const int n = check_stream(port, "{\"prompt\": \"Once upon a time\", \"n_predict\": 64, \"temperature\": 0, "
                                     "\"stream\": true}", greedy64);
    CHECK_MSG(n > 10, "%d events", n);
    /* stop word: the text ends where it starts */
    const char *at = strstr(greedy64, "park with");
    CHECK(at != NULL);
    char want[512];
    snprintf(want, sizeof want, "%.*s", (int)(at - greedy64), greedy64);
    struct reply r = complete(port, "{\"prompt\": \"Once upon a time\", \"n_predict\": 64, \"temperature\": 0, "
                                    "\"stop\": [\"xyz\", \"park with\"]}");
    CHECK_STR_EQ(get_str(&r, "content"), want);
    CHECK(cJSON_IsTrue(get(&r, "stopped_word")));
    CHECK_STR_EQ(get_str(&r, "stopping_word"), "park with");
    reply_free(&r);
    /* streamed, the text that could begin a stop word is held back, never lost */
    check_stream(port, "{\"prompt\": \"Once upon a time\", \"n_predict\": 64, \"temperature\": 0, "
                       "\"stop\": [\"park with\", \"plan\"], \"stream\": true}", want);
    /* a stop word that never comes: the whole text */
    check_stream(port, "{\"prompt\": \"Once upon a time\", \"n_predict\": 64, \"temperature\": 0, "
                       "\"stop\": [\"pa!\", \"Lily.\\n\"], \"stream\": true}", greedy64);
}

static void test_sampling_options(int port, const char *greedy64) {
    /* grammar: the text matches it */
    struct reply r = complete(port, "{\"prompt\": \"Once upon a time\", \"n_predict\": 32, \"seed\": 7, "
                                    "\"grammar\": \"root ::= (\\\" yes\\\" | \\\" no\\\")+ \\\".\\\"\"}");
    CHECK_EQ_INT(r.status, 200);
    CHECK_MSG(matches_yes_no(get_str(&r, "content")), "'%s'", get_str(&r, "content"));
    CHECK(cJSON_IsTrue(get(&r, "stopped_eos")));
    reply_free(&r);
    r = complete(port, "{\"prompt\": \"Once upon a time\", \"grammar\": \"root ::= undefined\"}");
    CHECK_EQ_INT(r.status, 400);
    CHECK(strstr(get_str(&r, "error"), "undefined") != NULL);
    reply_free(&r);
    /* n_probs: the greedy token is the most probable one, probabilities in order */
    r = complete(port, "{\"prompt\": \"Once upon a time\", \"n_predict\": 8, \"temperature\": 0, \"n_probs\": 3}");
    const cJSON *probs = get(&r, "completion_probabilities");
    CHECK_EQ_INT(cJSON_GetArraySize(probs), 8);
    char text[512] = "";
    for (const cJSON *e = probs ? probs->child : NULL; e; e = e->next) {
        const cJSON *top = cJSON_GetObjectItem(e, "probs");
        CHECK_EQ_INT(cJSON_GetArraySize(top), 3);
        const char *content = cJSON_GetObjectItem(e, "content")->valuestring;
        strcat(text, content);
        CHECK_STR_EQ(cJSON_GetObjectItem(cJSON_GetArrayItem(top, 0), "tok_str")->valuestring, content);
        const double p0 = cJSON_GetObjectItem(cJSON_GetArrayItem(top, 0), "prob")->valuedouble;
        const double p1 = cJSON_GetObjectItem(cJSON_GetArrayItem(top, 1), "prob")->valuedouble;
        CHECK(p0 >= p1 && p0 <= 1.0 && p1 > 0.0);
    }
    CHECK(strncmp(text, greedy64, strlen(text)) == 0 && strlen(text) > 10);
    reply_free(&r);
    /* logit_bias false bans a token; ignore_eos with a long n_predict shifts the context (n_ctx 256) */
    r = complete(port, "{\"prompt\": \"Once upon a time\", \"n_predict\": 300, \"temperature\": 0, \"ignore_eos\": true, "
                       "\"logit_bias\": [[432, false]]}");
    CHECK_EQ_INT(r.status, 200);
    CHECK_EQ_INT(get_num(&r, "tokens_predicted"), 300);
    CHECK(cJSON_IsTrue(get(&r, "truncated")));
    CHECK(strchr(get_str(&r, "content"), ',') == NULL); /* token 432 is "," */
    reply_free(&r);
}

static void test_embedding(int port) {
    cJSON *golden = golden_load("golden/eval-stories260K-F32.json");
    const cJSON *prompt0 = cJSON_GetArrayItem(cJSON_GetObjectItem(golden, "prompts"), 0);
    const cJSON *want = cJSON_GetArrayItem(cJSON_GetObjectItem(cJSON_GetObjectItem(golden, "embeddings"), "per_prompt"), 0);
    cJSON *body = cJSON_CreateObject();
    cJSON_AddStringToObject(body, "content", cJSON_GetObjectItem(prompt0, "text")->valuestring);
    char *text = cJSON_PrintUnformatted(body);
    struct reply r = request(port, "POST", "/embedding", text);
    CHECK_EQ_INT(r.status, 200);
    const cJSON *got = get(&r, "embedding");
    CHECK_EQ_INT(cJSON_GetArraySize(got), cJSON_GetArraySize(want));
    double max_diff = 0;
    for (int i = 0; i < cJSON_GetArraySize(want) && i < cJSON_GetArraySize(got); i++) {
        const double diff = fabs(cJSON_GetArrayItem(got, i)->valuedouble - cJSON_GetArrayItem(want, i)->valuedouble);
        if (diff > max_diff) max_diff = diff;
    }
    CHECK_MSG(max_diff < 1e-4, "max |diff| %g", max_diff);
    free(text);
    cJSON_Delete(body);
    reply_free(&r);
    cJSON_Delete(golden);
}

static void check_error(int port, const char *method, const char *path, const char *body, int status,
                        const char *message) {
    struct reply r = request(port, method, path, body);
    CHECK_MSG(r.status == status, "%s %s %s: status %d, want %d", method, path, body ? body : "", r.status, status);
    CHECK_MSG(strstr(get_str(&r, "error"), message) != NULL, "%s %s: error '%s', want '%s'", method, path,
              get_str(&r, "error"), message);
    CHECK(strstr(r.raw ? r.raw : "", "Access-Control-Allow-Origin: *") != NULL);
    reply_free(&r);
}

static void check_raw_status(int port, const char *text, size_t len, int status) {
    struct reply r = request_raw(port, text, len);
    CHECK_MSG(r.status == status, "raw request '%.40s': status %d, want %d", text, r.status, status);
    reply_free(&r);
}

static void test_errors(int port) {
    check_error(port, "POST", "/completion", "{\"prompt\": ", 400, "not valid JSON");
    check_error(port, "POST", "/completion", "[1, 2]", 400, "JSON object");
    check_error(port, "POST", "/completion", "", 400, "empty");
    check_error(port, "POST", "/completion", "{\"prompt\": 5}", 400, "\"prompt\"");
    check_error(port, "POST", "/completion", "{\"prompt\": [1, 100000]}", 400, "token id");
    check_error(port, "POST", "/completion", "{\"prompt\": \"a\", \"n_predict\": -2}", 400, "\"n_predict\"");
    check_error(port, "POST", "/completion", "{\"prompt\": \"a\", \"top_k\": \"40\"}", 400, "\"top_k\"");
    check_error(port, "POST", "/completion", "{\"prompt\": \"a\", \"temperature\": 1e999}", 400, "\"temperature\"");
    check_error(port, "POST", "/completion", "{\"prompt\": \"a\", \"stop\": \"x\"}", 400, "\"stop\"");
    check_error(port, "POST", "/completion", "{\"prompt\": \"a\", \"logit_bias\": [[600, 1]]}", 400, "logit_bias");
    check_error(port, "POST", "/completion", "{\"prompt\": \"a\", \"stream\": 1}", 400, "\"stream\"");
    check_error(port, "POST", "/tokenize", "{\"content\": 3}", 400, "\"content\"");
    check_error(port, "POST", "/detokenize", "{\"tokens\": [1, -1]}", 400, "\"tokens\"");
    check_error(port, "GET", "/nowhere", NULL, 404, "no such endpoint");
    check_error(port, "GET", "/completion", NULL, 405, "not allowed");
    /* a prompt longer than the context (256) */
    char *long_prompt = malloc(8192);
    strcpy(long_prompt, "{\"prompt\": \"");
    for (int i = 0; i < 300; i++) strcat(long_prompt, "once upon ");
    strcat(long_prompt, "\"}");
    check_error(port, "POST", "/completion", long_prompt, 400, "shorter than the context");
    free(long_prompt);
    /* malformed HTTP, a body over the limit, a chunked body, another HTTP version */
    const char *bad[] = { "GARBAGE\r\n\r\n", "GET /health\r\n\r\n", "GET /health HTTP/1.1\r\nNo colon here\r\n\r\n",
                          "POST /completion HTTP/1.1\r\nContent-Length: 12x\r\n\r\n",
                          "GET health HTTP/1.1\r\n\r\n", "GET http://localhost/health HTTP/1.1\r\n\r\n" };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) check_raw_status(port, bad[i], strlen(bad[i]), 400);
    const char *big = "POST /completion HTTP/1.1\r\nContent-Length: 17000000\r\n\r\n{\"prompt\": \"a\"";
    check_raw_status(port, big, strlen(big), 413);
    const char *chunked = "POST /completion HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n{\"a\":\r\n0\r\n\r\n";
    check_raw_status(port, chunked, strlen(chunked), 411);
    char *huge = malloc(70000); /* headers that never end */
    memcpy(huge, "GET /health HTTP/1.1\r\nX: ", 26);
    memset(huge + 26, 'x', 70000 - 26);
    check_raw_status(port, huge, 70000, 431);
    free(huge);
    const char *v2 = "GET /health HTTP/2.0\r\n\r\n";
    check_raw_status(port, v2, strlen(v2), 505);
    /* CORS preflight */
    struct reply r = request(port, "OPTIONS", "/completion", NULL);
    CHECK_EQ_INT(r.status, 200);
    CHECK(r.raw && strstr(r.raw, "Access-Control-Allow-Headers: content-type"));
    reply_free(&r);
}

/* A client that leaves mid-stream stops the generation; the server goes on.
 * A connection made while a request is served waits its turn. */
static void test_connections(int port, struct cli_proc *proc) {
    char *text = format_request("POST", "/completion",
                                "{\"prompt\": \"Once upon a time\", \"n_predict\": 100000, \"ignore_eos\": true, "
                                "\"stream\": true}");
    int fd = server_connect(port);
    CHECK(fd >= 0 && send_text(fd, text, strlen(text)));
    char buf[256];
    const ssize_t got = recv(fd, buf, sizeof buf, 0); /* the head and the first event, at least begun */
    CHECK(got > 0);
    close(fd);
    struct reply h = request(port, "GET", "/health", NULL);
    CHECK_EQ_INT(h.status, 200);
    CHECK_STR_EQ(get_str(&h, "status"), "ok");
    reply_free(&h);
    cli_pump(proc, 0.3, 0);
    CHECK_MSG(strstr(proc->stderr_text.data, "the client went away") != NULL, "%s", proc->stderr_text.data);

    /* two connections at once: the second is served after the first */
    free(text);
    text = format_request("POST", "/completion", "{\"prompt\": \"Once upon a time\", \"n_predict\": 64, "
                                                 "\"temperature\": 0, \"stream\": true}");
    const int first = server_connect(port);
    CHECK(first >= 0 && send_text(first, text, strlen(text)));
    char *health = format_request("GET", "/health", NULL);
    const int second = server_connect(port);
    CHECK(second >= 0 && send_text(second, health, strlen(health)));
    struct reply a = read_reply(first), b = read_reply(second);
    CHECK_EQ_INT(a.status, 200);
    CHECK_EQ_INT(b.status, 200);
    CHECK(strstr(a.body, "\"stop\":true") != NULL);
    reply_free(&a);
    reply_free(&b);
    free(health);
    free(text);
}

static void stop_server(struct cli_proc *proc) {
    kill(proc->pid, SIGTERM);
    bool timed_out;
    const int status = cli_wait(proc, 60, &timed_out);
    CHECK_MSG(status == 0 && !timed_out, "exit status %d; stderr:\n%s", status, proc->stderr_text.data);
    free(proc->stdout_text.data);
    free(proc->stderr_text.data);
}

int main(void) {
    const char *model = test_require_shared("models/stories260K.gguf");
    struct cli_proc proc;
    const int port = server_start(&proc, (const char *[]){ "server", "-m", model, "--port", "0", "-c", "256", "-t", "1",
                                                           "--embedding", NULL });
    CHECK(port > 0);
    if (port <= 0) return test_finish("test_cli_server");

    struct reply r = request(port, "GET", "/health", NULL);
    CHECK_EQ_INT(r.status, 200);
    CHECK_STR_EQ(get_str(&r, "status"), "ok");
    reply_free(&r);
    r = request(port, "GET", "/props", NULL);
    const cJSON *defaults = get(&r, "default_generation_settings");
    CHECK_EQ_INT(cJSON_GetObjectItem(defaults, "n_ctx")->valueint, 256);
    CHECK_NEAR(cJSON_GetObjectItem(defaults, "temp")->valuedouble, 0.8, 1e-9);
    CHECK_EQ_INT(cJSON_GetObjectItem(defaults, "top_k")->valueint, 40);
    reply_free(&r);

    char *greedy64 = NULL;
    test_tokenizer(port, model);
    test_golden_greedy(port, &greedy64);
    test_same_as_run(port, model);
    test_prompt_cache(port);
    if (greedy64) {
        test_stream_and_stop(port, greedy64);
        test_sampling_options(port, greedy64);
    }
    test_embedding(port);
    test_errors(port);
    test_connections(port, &proc);
    free(greedy64);
    stop_server(&proc);

    /* bad options: one line, status 1 */
    struct cli_result bad = cli_run((const char *[]){ "server", "-m", model, "--port", "70000", NULL }, NULL, 60);
    CHECK(bad.status == 1 && strstr(bad.err, "llamac server: --port expects"));
    cli_result_free(&bad);
    bad = cli_run((const char *[]){ "server", "-m", model, "--host", "192.0.2.1", NULL }, NULL, 60);
    CHECK(bad.status == 1 && strstr(bad.err, "llamac server: cannot listen on 192.0.2.1"));
    cli_result_free(&bad);

    /* without --embedding, /embedding is refused */
    const int port2 = server_start(&proc, (const char *[]){ "server", "-m", model, "--port", "0", "-t", "1", NULL });
    CHECK(port2 > 0);
    if (port2 > 0) {
        check_error(port2, "POST", "/embedding", "{\"content\": \"hi\"}", 501, "--embedding");
        stop_server(&proc);
    }
    return test_finish("test_cli_server");
}

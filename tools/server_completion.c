/*
 * POST /completion: b1892's request fields and defaults (launch_slot_with_data),
 * the prompt cache, the generation loop with stop words and streaming
 * (process_token), and the response (send_final_response). Sampling is
 * tools/sampler.c, the chain `llamac run` uses.
 *
 * Where b1892's server is wrong we do what it means to do:
 *  - n_predict N gives N tokens (b1892 gives N + 1 once N > 2);
 *  - the prompt always enters the repetition-penalty window, as in llamac run
 *    (b1892 only puts it there with cache_prompt);
 *  - "seed" reseeds the random generator (b1892 reads it and ignores it);
 *  - a stream ends with any text held back for a partial stop word (b1892
 *    drops it), so the events add up to the non-streamed content;
 *  - the prompt cache holds exactly what the KV cells hold (b1892 also
 *    counts the last sampled token, which was never decoded);
 *  - a prompt that does not fit the context is refused (400) rather than cut.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "http.h"
#include "sampler.h"
#include "server.h"

#define SERVER_MAX_STOP 64

struct completion_request {
    struct sampling_params sp;
    int32_t n_predict, n_keep, n_probs;
    uint32_t seed;           /* LLAMA_DEFAULT_SEED: the generator goes on from the last request */
    bool stream, cache_prompt, ignore_eos;
    const char *stop[SERVER_MAX_STOP];
    int32_t n_stop;
    const cJSON *prompt;     /* NULL: none given */
};

/* ---- request fields: absent or null keeps the default ---- */

struct fields {
    const cJSON *obj;
    char err[256];
};

static const cJSON *field(const struct fields *f, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(f->obj, key);
    return v && !cJSON_IsNull(v) ? v : NULL;
}

static bool field_bool(struct fields *f, const char *key, bool *out) {
    const cJSON *v = field(f, key);
    if (!v) return true;
    if (!cJSON_IsBool(v)) {
        snprintf(f->err, sizeof f->err, "\"%s\" must be true or false", key);
        return false;
    }
    *out = cJSON_IsTrue(v);
    return true;
}

static bool field_int(struct fields *f, const char *key, double lo, double hi, double *out) {
    const cJSON *v = field(f, key);
    if (!v) return true;
    if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) || v->valuedouble < lo || v->valuedouble > hi) {
        snprintf(f->err, sizeof f->err, "\"%s\" must be an integer in %.0f..%.0f", key, lo, hi);
        return false;
    }
    *out = v->valuedouble;
    return true;
}

static bool field_i32(struct fields *f, const char *key, int32_t lo, int32_t hi, int32_t *out) {
    double v = *out;
    if (!field_int(f, key, lo, hi, &v)) return false;
    *out = (int32_t)v;
    return true;
}

static bool field_float(struct fields *f, const char *key, float *out) {
    const cJSON *v = field(f, key);
    if (!v) return true;
    if (!cJSON_IsNumber(v) || !isfinite((float)v->valuedouble)) {
        snprintf(f->err, sizeof f->err, "\"%s\" must be a number", key);
        return false;
    }
    *out = (float)v->valuedouble;
    return true;
}

static bool field_string(struct fields *f, const char *key, const char **out) {
    const cJSON *v = field(f, key);
    if (!v) return true;
    if (!cJSON_IsString(v)) {
        snprintf(f->err, sizeof f->err, "\"%s\" must be a string", key);
        return false;
    }
    *out = v->valuestring;
    return true;
}

/* A token given twice keeps its last bias (b1892 keeps a map). */
static bool set_logit_bias(struct fields *f, struct sampling_params *sp, llama_token token, float bias) {
    int32_t k = 0;
    while (k < sp->n_logit_bias && sp->logit_bias[k].token != token) k++;
    if (k == SAMPLING_MAX_LOGIT_BIAS) {
        snprintf(f->err, sizeof f->err, "at most %d tokens can have a logit bias", SAMPLING_MAX_LOGIT_BIAS);
        return false;
    }
    sp->logit_bias[k] = (struct logit_bias_entry){ token, bias };
    if (k == sp->n_logit_bias) sp->n_logit_bias++;
    return true;
}

/* "logit_bias": [[token, bias], ...]; a bias of false bans the token. */
static bool parse_logit_bias(const struct server *s, struct fields *f, struct completion_request *c) {
    const cJSON *v = field(f, "logit_bias");
    if (!v) return true;
    if (!cJSON_IsArray(v)) {
        snprintf(f->err, sizeof f->err, "\"logit_bias\" must be an array of [token, bias] pairs");
        return false;
    }
    for (const cJSON *el = v->child; el; el = el->next) {
        const cJSON *tok = cJSON_GetArrayItem(el, 0), *bias = cJSON_GetArrayItem(el, 1);
        const bool ok = cJSON_IsArray(el) && cJSON_GetArraySize(el) == 2 && cJSON_IsNumber(tok) &&
                        tok->valuedouble == floor(tok->valuedouble) && tok->valuedouble >= 0 &&
                        tok->valuedouble < s->n_vocab &&
                        ((cJSON_IsNumber(bias) && isfinite((float)bias->valuedouble)) || cJSON_IsFalse(bias));
        if (!ok) {
            snprintf(f->err, sizeof f->err,
                     "\"logit_bias\" entries must be [token, bias] with a token in 0..%d and a number or false",
                     s->n_vocab - 1);
            return false;
        }
        const float b = cJSON_IsFalse(bias) ? -INFINITY : (float)bias->valuedouble;
        if (!set_logit_bias(f, &c->sp, (llama_token)tok->valuedouble, b)) return false;
    }
    return true;
}

static bool parse_stop(struct fields *f, struct completion_request *c) {
    const cJSON *v = field(f, "stop");
    if (!v) return true;
    if (!cJSON_IsArray(v)) {
        snprintf(f->err, sizeof f->err, "\"stop\" must be an array of strings");
        return false;
    }
    for (const cJSON *el = v->child; el; el = el->next) {
        if (!cJSON_IsString(el)) {
            snprintf(f->err, sizeof f->err, "\"stop\" must be an array of strings");
            return false;
        }
        if (!el->valuestring[0]) continue; /* b1892 skips empty words */
        if (c->n_stop == SERVER_MAX_STOP) {
            snprintf(f->err, sizeof f->err, "at most %d stop words", SERVER_MAX_STOP);
            return false;
        }
        c->stop[c->n_stop++] = el->valuestring;
    }
    return true;
}

/* The request's settings over the server's defaults; false with a message in err. */
static bool parse_request(const struct server *s, const cJSON *body, struct completion_request *c, char *err,
                          size_t err_cap) {
    memset(c, 0, sizeof *c);
    c->sp = s->p.sampling;
    c->n_predict = s->p.n_predict;
    c->seed = LLAMA_DEFAULT_SEED;
    struct fields f = { body, "" };
    struct sampling_params *sp = &c->sp;
    double seed = -1;
    bool ok = field_bool(&f, "stream", &c->stream) && field_bool(&f, "cache_prompt", &c->cache_prompt) &&
              field_i32(&f, "n_predict", -1, INT32_MAX, &c->n_predict) &&
              field_i32(&f, "n_keep", -1, INT32_MAX, &c->n_keep) && field_float(&f, "temperature", &sp->temp) &&
              field_i32(&f, "top_k", INT32_MIN, INT32_MAX, &sp->top_k) && field_float(&f, "top_p", &sp->top_p) &&
              field_float(&f, "min_p", &sp->min_p) && field_float(&f, "tfs_z", &sp->tfs_z) &&
              field_float(&f, "typical_p", &sp->typical_p) &&
              field_i32(&f, "repeat_last_n", -1, INT32_MAX, &sp->penalty_last_n) &&
              field_float(&f, "repeat_penalty", &sp->penalty_repeat) &&
              field_float(&f, "frequency_penalty", &sp->penalty_freq) &&
              field_float(&f, "presence_penalty", &sp->penalty_present) &&
              field_bool(&f, "penalize_nl", &sp->penalize_nl) && field_i32(&f, "mirostat", 0, 2, &sp->mirostat) &&
              field_float(&f, "mirostat_tau", &sp->mirostat_tau) &&
              field_float(&f, "mirostat_eta", &sp->mirostat_eta) && field_int(&f, "seed", -1, UINT32_MAX, &seed) &&
              field_string(&f, "grammar", &sp->grammar) && field_i32(&f, "n_probs", 0, INT32_MAX, &c->n_probs) &&
              field_bool(&f, "ignore_eos", &c->ignore_eos);
    /* b1892: ignore_eos is a bias of -inf on EOS, which "logit_bias" may then change */
    ok = ok && (!c->ignore_eos || set_logit_bias(&f, sp, llama_token_eos(s->model), -INFINITY));
    ok = ok && parse_logit_bias(s, &f, c) && parse_stop(&f, c);
    const cJSON *prompt = field(&f, "prompt");
    if (ok && prompt && !cJSON_IsString(prompt) && !cJSON_IsArray(prompt)) {
        snprintf(f.err, sizeof f.err, "\"prompt\" must be a string or an array of token ids and strings");
        ok = false;
    }
    if (!ok) {
        snprintf(err, err_cap, "%s", f.err);
        return false;
    }
    c->prompt = prompt;
    if (seed >= 0) c->seed = (uint32_t)seed;
    if (c->n_probs > s->n_vocab) c->n_probs = s->n_vocab;
    return true;
}

/* b1892's get_formated_generation. */
static cJSON *settings_json(const struct server *s, const struct completion_request *c) {
    const struct sampling_params *sp = &c->sp;
    cJSON *j = cJSON_CreateObject();
    cJSON_AddNumberToObject(j, "n_ctx", s->n_ctx);
    cJSON_AddStringToObject(j, "model", s->alias);
    cJSON_AddNumberToObject(j, "seed", c->seed);
    server_add_float(j, "temp", sp->temp);
    cJSON_AddNumberToObject(j, "top_k", sp->top_k);
    server_add_float(j, "top_p", sp->top_p);
    server_add_float(j, "min_p", sp->min_p);
    server_add_float(j, "tfs_z", sp->tfs_z);
    server_add_float(j, "typical_p", sp->typical_p);
    cJSON_AddNumberToObject(j, "repeat_last_n", sp->penalty_last_n);
    server_add_float(j, "repeat_penalty", sp->penalty_repeat);
    server_add_float(j, "presence_penalty", sp->penalty_present);
    server_add_float(j, "frequency_penalty", sp->penalty_freq);
    cJSON_AddNumberToObject(j, "mirostat", sp->mirostat);
    server_add_float(j, "mirostat_tau", sp->mirostat_tau);
    server_add_float(j, "mirostat_eta", sp->mirostat_eta);
    cJSON_AddBoolToObject(j, "penalize_nl", sp->penalize_nl);
    cJSON *stop = cJSON_AddArrayToObject(j, "stop");
    for (int32_t i = 0; i < c->n_stop; i++) cJSON_AddItemToArray(stop, cJSON_CreateString(c->stop[i]));
    cJSON_AddNumberToObject(j, "n_predict", c->n_predict);
    cJSON_AddNumberToObject(j, "n_keep", c->n_keep);
    cJSON_AddBoolToObject(j, "ignore_eos", c->ignore_eos);
    cJSON_AddBoolToObject(j, "stream", c->stream);
    cJSON *bias = cJSON_AddArrayToObject(j, "logit_bias");
    for (int32_t i = 0; i < sp->n_logit_bias; i++) {
        cJSON *pair = cJSON_CreateArray();
        cJSON_AddItemToArray(pair, cJSON_CreateNumber(sp->logit_bias[i].token));
        cJSON_AddItemToArray(pair, server_float(sp->logit_bias[i].bias));
        cJSON_AddItemToArray(bias, pair);
    }
    cJSON_AddNumberToObject(j, "n_probs", c->n_probs);
    cJSON_AddStringToObject(j, "grammar", sp->grammar ? sp->grammar : "");
    return j;
}

cJSON *server_default_settings(const struct server *s) {
    struct completion_request c;
    cJSON *empty = cJSON_CreateObject();
    char err[256];
    parse_request(s, empty, &c, err, sizeof err); /* no fields: cannot fail */
    cJSON *j = settings_json(s, &c);
    cJSON_Delete(empty);
    return j;
}

/* ---- generation ---- */

/* A generated token and its piece's place in the text, for n_probs. */
struct token_record {
    llama_token id;
    size_t text_start, text_end;
};

struct generation {
    struct server *s;
    const struct completion_request *c;
    int fd;
    struct sampler *smp;
    struct tokens prompt;
    char *text;                  /* what was generated, NUL-terminated */
    size_t len, cap;
    size_t sent;                 /* bytes of text already streamed */
    char *piece;                 /* the current token's piece */
    size_t piece_cap;
    struct token_record *recs;   /* with n_probs > 0: every generated token */
    llama_token_data *probs;     /* n_probs candidates per record (id -1 past the candidates) */
    size_t n_recs, recs_sent, recs_cap, probs_cap; /* capacities in records */
    int32_t n_decoded;           /* tokens generated */
    int32_t n_prompt_eval;       /* prompt tokens decoded (the rest came from the cache) */
    bool truncated, stopped_eos, stopped_word, stopped_limit, client_gone;
    const char *stopping_word;
    const char *error;           /* generation failed: the reason */
    char error_buf[256];
    int64_t t_start_us, t_prompt_us, t_end_us;
};

static bool grow(void **data, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) return true;
    size_t cap2 = *cap ? *cap : 16;
    while (cap2 < need) cap2 *= 2;
    void *grown = realloc(*data, cap2 * elem);
    if (!grown) return false;
    *data = grown;
    *cap = cap2;
    return true;
}

/* The token's piece into g->piece; returns its length. */
static size_t token_piece(struct generation *g, llama_token id) {
    if (!g->piece && !grow((void **)&g->piece, &g->piece_cap, 64, 1)) return 0; /* never a NULL buffer */
    int32_t n = llama_token_to_piece(g->s->model, id, g->piece, (int32_t)g->piece_cap);
    if (n < 0 && grow((void **)&g->piece, &g->piece_cap, (size_t)-n, 1)) {
        n = llama_token_to_piece(g->s->model, id, g->piece, (int32_t)g->piece_cap);
    }
    return n > 0 ? (size_t)n : 0;
}

/* Appends the token's piece to the text and, with n_probs, records the
 * candidates it was chosen from (b1892 sorts them first when greedy). */
static bool add_token(struct generation *g, llama_token id, size_t *piece_len) {
    const size_t n = token_piece(g, id);
    if (!grow((void **)&g->text, &g->cap, g->len + n + 1, 1)) return false;
    memcpy(g->text + g->len, g->piece, n);
    g->len += n;
    g->text[g->len] = '\0';
    *piece_len = n;
    const int32_t n_probs = g->c->n_probs;
    if (n_probs <= 0) return true;
    if (!grow((void **)&g->recs, &g->recs_cap, g->n_recs + 1, sizeof *g->recs) ||
        !grow((void **)&g->probs, &g->probs_cap, g->n_recs + 1, (size_t)n_probs * sizeof *g->probs)) {
        return false;
    }
    g->recs[g->n_recs] = (struct token_record){ id, g->len - n, g->len };
    llama_token_data_array *cur = sampler_candidates(g->smp);
    if (g->c->sp.temp <= 0.0f) llama_sample_softmax(g->s->ctx, cur);
    llama_token_data *out = g->probs + g->n_recs * (size_t)n_probs;
    for (int32_t i = 0; i < n_probs; i++) {
        out[i] = (size_t)i < cur->size ? cur->data[i] : (llama_token_data){ -1, 0.0f, 0.0f };
    }
    g->n_recs++;
    return true;
}

/* b1892's find_stopping_strings (STOP_FULL): a stop word that ends in the
 * new piece ends the text where it starts. */
static void find_stop_word(struct generation *g, size_t piece_len) {
    const char *unsent = g->text + g->sent;
    const size_t n = g->len - g->sent;
    size_t best = SIZE_MAX;
    for (int32_t i = 0; i < g->c->n_stop; i++) {
        const char *w = g->c->stop[i];
        const size_t wl = strlen(w), from = n > wl + piece_len ? n - wl - piece_len : 0;
        const char *hit = memmem(unsent + from, n - from, w, wl);
        if (hit && (size_t)(hit - unsent) < best) {
            best = (size_t)(hit - unsent);
            g->stopping_word = w;
        }
    }
    if (best == SIZE_MAX) return;
    g->len = g->sent + best;
    g->text[g->len] = '\0';
    g->stopped_word = true;
}

static cJSON *string_n(const char *text, size_t n) {
    char *copy = malloc(n + 1);
    if (!copy) return cJSON_CreateString("");
    memcpy(copy, text, n);
    copy[n] = '\0';
    cJSON *j = cJSON_CreateString(copy);
    free(copy);
    return j;
}

/* b1892's tokens_to_output_formatted_string: a lone byte of a multibyte
 * character is shown as "byte: \xHH". */
static cJSON *token_string(struct generation *g, llama_token id) {
    if (id < 0) return cJSON_CreateString("");
    const size_t n = token_piece(g, id);
    if (n == 1 && ((unsigned char)g->piece[0] & 0x80)) {
        char text[16];
        snprintf(text, sizeof text, "byte: \\x%x", (unsigned char)g->piece[0]);
        return cJSON_CreateString(text);
    }
    return string_n(g->piece, n);
}

/* b1892's probs_vector_to_json for records [from, to). */
static cJSON *probs_json(struct generation *g, size_t from, size_t to) {
    cJSON *arr = cJSON_CreateArray();
    for (size_t r = from; r < to; r++) {
        cJSON *entry = cJSON_CreateObject(), *probs = cJSON_CreateArray();
        cJSON_AddItemToObject(entry, "content", token_string(g, g->recs[r].id));
        const llama_token_data *cand = g->probs + r * (size_t)g->c->n_probs;
        for (int32_t i = 0; i < g->c->n_probs && cand[i].id >= 0; i++) {
            cJSON *p = cJSON_CreateObject();
            cJSON_AddItemToObject(p, "tok_str", token_string(g, cand[i].id));
            server_add_float(p, "prob", cand[i].p);
            cJSON_AddItemToArray(probs, p);
        }
        cJSON_AddItemToObject(entry, "probs", probs);
        cJSON_AddItemToArray(arr, entry);
    }
    return arr;
}

static bool send_event(int fd, cJSON *json) {
    char *text = cJSON_PrintUnformatted(json);
    cJSON_Delete(json);
    if (!text) return false;
    const bool ok = http_send_all(fd, "data: ", 6) && http_send_all(fd, text, strlen(text)) &&
                    http_send_all(fd, "\n\n", 2);
    free(text);
    return ok;
}

/* Streams the text that is safe to show: not what could still become a stop
 * word, not an incomplete UTF-8 character. False if the client is gone. */
static bool stream_partial(struct generation *g) {
    if (g->stopped_word) return true; /* the final event carries the rest */
    const char *unsent = g->text + g->sent;
    const size_t n = g->len - g->sent;
    size_t hold = 0; /* b1892's find_partial_stop_string */
    for (int32_t i = 0; i < g->c->n_stop; i++) {
        const char *w = g->c->stop[i];
        const size_t wl = strlen(w);
        for (size_t k = wl - 1 < n ? wl - 1 : n; k > hold; k--) {
            if (memcmp(unsent + n - k, w, k) == 0) {
                hold = k;
                break;
            }
        }
    }
    const size_t end = g->sent + common_utf8_complete_len(unsent, n - hold);
    if (end == g->sent) return true;
    cJSON *ev = cJSON_CreateObject();
    cJSON_AddItemToObject(ev, "content", string_n(unsent, end - g->sent));
    cJSON_AddBoolToObject(ev, "stop", false);
    cJSON_AddNumberToObject(ev, "slot_id", 0);
    cJSON_AddBoolToObject(ev, "multimodal", false);
    if (g->c->n_probs > 0) {
        size_t to = g->recs_sent;
        while (to < g->n_recs && g->recs[to].text_end <= end) to++;
        cJSON_AddItemToObject(ev, "completion_probabilities", probs_json(g, g->recs_sent, to));
        g->recs_sent = to;
    }
    g->sent = end;
    return send_event(g->fd, ev);
}

/* b1892's context shift: keep BOS and n_keep tokens, drop half of the rest. */
static bool shift_context(struct generation *g, int32_t n_keep) {
    struct server *s = g->s;
    const int32_t n_discard = (s->n_cache - n_keep - 1) / 2;
    if (n_discard <= 0) return false;
    llama_kv_cache_seq_rm(s->ctx, 0, n_keep + 1, n_keep + n_discard + 1);
    llama_kv_cache_seq_shift(s->ctx, 0, n_keep + 1 + n_discard, s->n_cache, -n_discard);
    memmove(s->cache + n_keep + 1, s->cache + n_keep + 1 + n_discard,
            (size_t)(s->n_cache - n_keep - 1 - n_discard) * sizeof *s->cache);
    s->n_cache -= n_discard;
    g->truncated = true;
    return true;
}

static void generate(struct generation *g) {
    struct server *s = g->s;
    const struct completion_request *c = g->c;
    const llama_token eos = llama_token_eos(s->model);
    g->t_start_us = llama_time_us();
    for (size_t i = 0; i < g->prompt.n; i++) sampler_accept(g->smp, s->ctx, g->prompt.data[i], false);
    if (!server_load_prompt(s, g->prompt.data, (int32_t)g->prompt.n, c->cache_prompt, &g->n_prompt_eval,
                            g->error_buf, sizeof g->error_buf)) {
        g->error = g->error_buf;
        return;
    }
    g->t_prompt_us = llama_time_us();
    int32_t n_keep = c->n_keep < 0 ? (int32_t)g->prompt.n : c->n_keep;
    if (n_keep > s->n_ctx - 4) n_keep = s->n_ctx - 4;
    if (n_keep < 0) n_keep = 0; /* a context of fewer than 4 tokens */
    g->stopped_limit = c->n_predict == 0;
    while (!g->stopped_limit) {
        llama_token id = sampler_sample(g->smp, s->ctx, NULL, 0);
        if (id < 0) break; /* the grammar allows nothing more: the text ends here */
        sampler_accept(g->smp, s->ctx, id, true);
        g->n_decoded++;
        size_t piece_len = 0;
        if (!add_token(g, id, &piece_len)) {
            g->error = "out of memory";
            break;
        }
        if (id == eos) {
            g->stopped_eos = true;
            break;
        }
        if (c->n_stop) find_stop_word(g, piece_len);
        if ((c->stream && !stream_partial(g)) || http_peer_closed(g->fd)) {
            g->client_gone = true;
            break;
        }
        if (g->stopped_word || g_server_stop) break;
        if (c->n_predict >= 0 && g->n_decoded >= c->n_predict) {
            g->stopped_limit = true;
            break;
        }
        if (s->n_cache >= s->n_ctx && !shift_context(g, n_keep)) {
            g->stopped_limit = true; /* n_keep leaves nothing to drop */
            break;
        }
        if (llama_decode(s->ctx, llama_batch_get_one(&id, 1, s->n_cache, 0)) != 0) {
            snprintf(g->error_buf, sizeof g->error_buf, "failed to evaluate a token: %s", error_last());
            g->error = g->error_buf;
            llama_kv_cache_clear(s->ctx);
            s->n_cache = 0;
            break;
        }
        s->cache[s->n_cache++] = id;
    }
    g->t_end_us = llama_time_us();
}

static cJSON *timings_json(const struct generation *g) {
    const double prompt_ms = g->t_prompt_us > 0 ? (double)(g->t_prompt_us - g->t_start_us) / 1e3 : 0.0;
    const double predicted_ms = g->t_end_us > g->t_prompt_us && g->t_prompt_us > 0
                                    ? (double)(g->t_end_us - g->t_prompt_us) / 1e3 : 0.0;
    const double np = g->n_prompt_eval, nd = g->n_decoded;
    cJSON *t = cJSON_CreateObject();
    cJSON_AddNumberToObject(t, "prompt_n", g->n_prompt_eval);
    cJSON_AddNumberToObject(t, "prompt_ms", prompt_ms);
    cJSON_AddNumberToObject(t, "prompt_per_token_ms", np > 0 ? prompt_ms / np : 0.0);
    cJSON_AddNumberToObject(t, "prompt_per_second", prompt_ms > 0 ? 1e3 * np / prompt_ms : 0.0);
    cJSON_AddNumberToObject(t, "predicted_n", g->n_decoded);
    cJSON_AddNumberToObject(t, "predicted_ms", predicted_ms);
    cJSON_AddNumberToObject(t, "predicted_per_token_ms", nd > 0 ? predicted_ms / nd : 0.0);
    cJSON_AddNumberToObject(t, "predicted_per_second", predicted_ms > 0 ? 1e3 * nd / predicted_ms : 0.0);
    return t;
}

/* b1892's send_final_response; streamed, content is what was not sent yet. */
static cJSON *final_json(struct generation *g) {
    const struct server *s = g->s;
    const size_t from = g->c->stream ? g->sent : 0;
    cJSON *j = cJSON_CreateObject();
    cJSON_AddItemToObject(j, "content", string_n(g->text ? g->text + from : "", g->len - from));
    cJSON_AddNumberToObject(j, "slot_id", 0);
    cJSON_AddBoolToObject(j, "stop", true);
    cJSON_AddStringToObject(j, "model", s->alias);
    cJSON_AddNumberToObject(j, "tokens_predicted", g->n_decoded);
    cJSON_AddNumberToObject(j, "tokens_evaluated", (double)g->prompt.n);
    cJSON_AddItemToObject(j, "generation_settings", settings_json(s, g->c));
    cJSON_AddItemToObject(j, "prompt", g->c->prompt ? cJSON_Duplicate(g->c->prompt, true) : cJSON_CreateString(""));
    cJSON_AddBoolToObject(j, "truncated", g->truncated);
    cJSON_AddBoolToObject(j, "stopped_eos", g->stopped_eos);
    cJSON_AddBoolToObject(j, "stopped_word", g->stopped_word);
    cJSON_AddBoolToObject(j, "stopped_limit", g->stopped_limit);
    cJSON_AddStringToObject(j, "stopping_word", g->stopping_word ? g->stopping_word : "");
    cJSON_AddNumberToObject(j, "tokens_cached", s->n_cache);
    cJSON_AddItemToObject(j, "timings", timings_json(g));
    if (g->c->n_probs > 0) {
        /* the tokens of a stop word are not part of the text */
        size_t to = g->n_recs;
        while (to > g->recs_sent && g->stopped_word && g->recs[to - 1].text_start >= g->len) to--;
        const size_t first = g->c->stream ? g->recs_sent : 0;
        cJSON_AddItemToObject(j, "completion_probabilities", probs_json(g, first, to));
    }
    if (g->error) cJSON_AddStringToObject(j, "error", g->error);
    return j;
}

void server_handle_completion(struct server *s, int fd, const char *body, size_t body_len) {
    cJSON *req = server_parse_body(fd, body, body_len);
    if (!req) return;
    struct completion_request c;
    struct generation g;
    memset(&g, 0, sizeof g);
    g.s = s;
    g.c = &c;
    g.fd = fd;
    char err[320];
    if (!parse_request(s, req, &c, err, sizeof err)) {
        server_send_error(fd, 400, err);
        goto done;
    }
    /* b1892: an empty prompt gives an empty completion */
    const bool has_prompt = c.prompt && !(cJSON_IsString(c.prompt) && !c.prompt->valuestring[0]) &&
                            !(cJSON_IsArray(c.prompt) && !c.prompt->child);
    if (has_prompt && !server_tokenize_prompt(s, c.prompt, s->add_bos, &g.prompt, err, sizeof err)) {
        server_send_error(fd, 400, err);
        goto done;
    }
    if ((int32_t)g.prompt.n >= s->n_ctx) {
        snprintf(err, sizeof err,
                 "the prompt is %zu tokens, it must be shorter than the context (%d tokens; start the server "
                 "with a larger -c)", g.prompt.n, s->n_ctx);
        server_send_error(fd, 400, err);
        goto done;
    }
    if (!(g.smp = sampler_new(NULL, &c.sp, s->model))) {
        server_send_error(fd, 400, error_last());
        goto done;
    }
    if (c.seed != LLAMA_DEFAULT_SEED) llama_set_rng_seed(s->ctx, c.seed);
    if (c.stream && !http_send_stream_head(fd)) goto done;
    if (g.prompt.n) generate(&g);
    if (g.client_gone) {
        fprintf(stderr, "llamac server: the client went away; generation stopped after %d tokens\n", g.n_decoded);
        goto done;
    }
    if (c.stream) {
        send_event(fd, final_json(&g));
    } else if (g.error) {
        server_send_error(fd, 500, g.error);
    } else {
        server_send_json(fd, final_json(&g));
    }

done:
    sampler_free(g.smp);
    free(g.prompt.data);
    free(g.text);
    free(g.piece);
    free(g.recs);
    free(g.probs);
    cJSON_Delete(req);
}

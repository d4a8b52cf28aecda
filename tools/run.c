/*
 * llamac run (and llamac chat, see chat.c): generate text from a prompt,
 * streaming it as it is produced. The loop is b1892's examples/main: prompt
 * cache (session file), context shifting, classifier-free guidance, reverse
 * prompts and interactive mode, with the sampling chain of tools/sampler.c.
 *
 * Where b1892's main is wrong we do what it means to do, and say so below:
 * the guidance context is shifted with the main one, it never receives
 * prompt tokens, and a reused session keeps no stale KV cells.
 */
#include <errno.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "common.h"
#include "core/log.h"
#include "sampler.h"

int run_main(const char *cmd, int argc, char **argv);

struct run_options {
    struct common_params p;
    const char *prompt_file;
    const char *grammar_file;
    const char *prompt_cache;   /* session file */
    bool prompt_cache_all;      /* save the generated tokens too, at the end */
    bool prompt_cache_ro;       /* load but never save */
    int32_t n_keep;             /* prompt tokens kept (after BOS) when the context shifts; -1: all */
    bool ignore_eos;
    bool interactive;
    bool interactive_first;
    bool multiline_input;
    bool display_prompt;
    bool in_prefix_bos;
    const char *in_prefix, *in_suffix;
    const char **antiprompts;   /* -r, in order; argc entries allocated */
    int32_t n_antiprompts;
};

static void run_usage(const char *cmd) {
    if (strcmp(cmd, "chat") == 0) {
        printf("usage: llamac chat -m MODEL [options]\n\n"
               "Interactive chat: reads a line from stdin, answers it as \"Assistant:\" and waits at the\n"
               "next \"User:\" (same as llamac run -i -r 'User:' --in-prefix ' ' --in-suffix 'Assistant:'\n"
               "with a short dialogue as the prompt). Ctrl-C interrupts an answer, a second Ctrl-C or\n"
               "end of input exits. Every option of llamac run applies:\n\n");
    } else {
        printf("usage: llamac run -m MODEL -p PROMPT [options]\n\n"
               "Generates text after PROMPT and streams it to stdout; timings go to stderr.\n\n");
    }
    printf("  -p, --prompt TEXT         the prompt\n"
           "  -f, --file FILE           read the prompt from FILE\n"
           "  -n, --n-predict N         tokens to generate (default 128; -1 = until end of text,\n"
           "                            -2 = until the context is full)\n"
           "  --keep N                  prompt tokens kept when the context fills up (default 0, -1 = all);\n"
           "                            then half of the rest is dropped and generation goes on\n"
           "  --ignore-eos              never generate the end-of-text token (its logit is -inf)\n"
           "  --grammar-file FILE       like --grammar, the grammar read from FILE\n"
           "  --prompt-cache FILE       session file: reuse the prompt's evaluated prefix from FILE\n"
           "                            if it exists, save the evaluated prompt to it otherwise\n"
           "  --prompt-cache-all        also save the generated tokens (at the end; not with -i)\n"
           "  --prompt-cache-ro         use the prompt cache but do not update it\n"
           "  --no-display-prompt       do not echo the prompt\n"
           "interactive mode:\n"
           "  -i, --interactive         after the prompt, alternate between generating and reading a\n"
           "                            line from stdin (Ctrl-C interrupts generation; a second Ctrl-C\n"
           "                            or end of input exits)\n"
           "  --interactive-first       like -i, but read input before generating\n"
           "  -r, --reverse-prompt TEXT stop generating at TEXT and wait for input (repeatable; without\n"
           "                            -i generation stops there)\n"
           "  --in-prefix TEXT, --in-suffix TEXT   added before / after every input line\n"
           "  --in-prefix-bos           start every input with the BOS token\n"
           "  --multiline-input         a line ending in '\\' ends the input, others continue it\n"
           "                            (default: the reverse; '/' at the end ends it without a newline)\n");
    common_print_options();
}

/* ---- output: pieces are streamed, an incomplete UTF-8 character is held back ---- */

#define RUN_OUT_BUF 64 /* pending output bytes: a few pieces */

struct run_output {
    char buf[RUN_OUT_BUF];
    size_t len;
};

/* Prints the complete UTF-8 characters of the buffer (all of it with flush). */
static void output_emit(struct run_output *o, bool flush) {
    const size_t n = o->len, complete = flush ? n : common_utf8_complete_len(o->buf, n);
    fwrite(o->buf, 1, complete, stdout);
    fflush(stdout);
    memmove(o->buf, o->buf + complete, n - complete);
    o->len = n - complete;
}

static void output_piece(struct run_output *o, const struct llama_model *model, llama_token id) {
    char piece[256];
    int32_t len = llama_token_to_piece(model, id, piece, sizeof piece);
    if (len <= 0) return;
    if (o->len + (size_t)len > RUN_OUT_BUF) output_emit(o, true);
    if ((size_t)len > RUN_OUT_BUF) {
        fwrite(piece, 1, (size_t)len, stdout);
        return;
    }
    memcpy(o->buf + o->len, piece, (size_t)len);
    o->len += (size_t)len;
    output_emit(o, false);
}

static void output_text(struct run_output *o, const char *text) {
    output_emit(o, true);
    fputs(text, stdout);
    fflush(stdout);
}

/* ---- interactive input ---- */

/* Ctrl-C: 1 = interrupt generation, 2 = quit. Checked between tokens and
 * while waiting for input (poll with a timeout, so it does not matter which
 * thread the signal lands on). */
static volatile sig_atomic_t g_sigint;

static void run_on_sigint(int signo) {
    (void)signo;
    if (g_sigint < 2) g_sigint = g_sigint + 1;
}

struct line_reader {
    char *buf;
    size_t len, cap;
    bool eof;
};

enum read_status { READ_LINE, READ_EOF, READ_INTERRUPTED, READ_ERROR };

/* Reads the next line from stdin (without its newline) into a malloc'ed *line. */
static enum read_status reader_next_line(struct line_reader *r, char **line) {
    for (;;) {
        char *nl = r->len ? memchr(r->buf, '\n', r->len) : NULL;
        if (nl || (r->eof && r->len)) {
            size_t n = nl ? (size_t)(nl - r->buf) : r->len;
            *line = malloc(n + 1);
            if (!*line) return READ_ERROR;
            memcpy(*line, r->buf, n);
            (*line)[n] = '\0';
            if (n && (*line)[n - 1] == '\r') (*line)[n - 1] = '\0';
            size_t used = nl ? n + 1 : n;
            memmove(r->buf, r->buf + used, r->len - used);
            r->len -= used;
            return READ_LINE;
        }
        if (r->eof) return READ_EOF;
        if (g_sigint) return READ_INTERRUPTED;
        struct pollfd pfd = { STDIN_FILENO, POLLIN, 0 };
        int ready = poll(&pfd, 1, 100);
        if (ready < 0 && errno != EINTR) return READ_ERROR;
        if (ready <= 0) continue;
        if (r->cap - r->len < 4096) {
            size_t cap = r->cap ? r->cap * 2 : 8192;
            char *grown = realloc(r->buf, cap);
            if (!grown) return READ_ERROR;
            r->buf = grown;
            r->cap = cap;
        }
        ssize_t got = read(STDIN_FILENO, r->buf + r->len, r->cap - r->len);
        if (got > 0) r->len += (size_t)got;
        else if (got == 0) r->eof = true;
        else if (errno != EINTR && errno != EAGAIN) return READ_ERROR;
    }
}

/* b1892's console::readline, appended to *text: a line gets its newline back
 * and ends the input, unless it ends in '\\' (which flips that, like
 * --multiline-input does for every line); a final '/' ends the input without
 * the newline. READ_EOF only when nothing was read. */
static enum read_status read_user_input(struct line_reader *r, bool multiline, bool echo, char **text, size_t *len) {
    bool another;
    bool any = false;
    do {
        char *line = NULL;
        enum read_status st = reader_next_line(r, &line);
        if (st == READ_EOF && any) return READ_LINE;
        if (st != READ_LINE) return st;
        any = true;
        if (echo) {
            fputs(line, stdout);
            fputc('\n', stdout);
            fflush(stdout);
        }
        size_t n = strlen(line);
        another = multiline;
        bool newline = true;
        if (n && line[n - 1] == '/') {
            line[--n] = '\0';
            another = false;
            newline = false;
        } else if (n && line[n - 1] == '\\') {
            line[--n] = '\0';
            another = !multiline;
        }
        char *grown = realloc(*text, *len + n + 2);
        if (!grown) {
            free(line);
            return READ_ERROR;
        }
        *text = grown;
        memcpy(*text + *len, line, n);
        *len += n;
        if (newline) (*text)[(*len)++] = '\n';
        (*text)[*len] = '\0';
        free(line);
    } while (another);
    return READ_LINE;
}

/* ---- options ---- */

static int parse_options(const char *cmd, int argc, char **argv, struct run_options *o) {
    for (int i = 1; i < argc; i++) {
        int r = common_parse_option(cmd, argc, argv, &i, &o->p);
        if (r < 0) return -1;
        if (r > 0) continue;
        const char *a = argv[i];
        const bool has_value = i + 1 < argc;
        long long v;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            run_usage(cmd);
            return 0;
        } else if (!strcmp(a, "-f") || !strcmp(a, "--file") || !strcmp(a, "--grammar-file") ||
                   !strcmp(a, "--prompt-cache") || !strcmp(a, "--in-prefix") || !strcmp(a, "--in-suffix") ||
                   !strcmp(a, "-r") || !strcmp(a, "--reverse-prompt") || !strcmp(a, "--keep")) {
            if (!has_value) {
                cli_fail(cmd, "option %s needs a value", a);
                return -1;
            }
            const char *value = argv[++i];
            if (!strcmp(a, "-f") || !strcmp(a, "--file")) o->prompt_file = value;
            else if (!strcmp(a, "--grammar-file")) o->grammar_file = value;
            else if (!strcmp(a, "--prompt-cache")) o->prompt_cache = value;
            else if (!strcmp(a, "--in-prefix")) o->in_prefix = value;
            else if (!strcmp(a, "--in-suffix")) o->in_suffix = value;
            else if (!strcmp(a, "-r") || !strcmp(a, "--reverse-prompt")) o->antiprompts[o->n_antiprompts++] = value;
            else if (cli_parse_int(value, -1, INT32_MAX, &v)) o->n_keep = (int32_t)v;
            else {
                cli_fail(cmd, "--keep expects an integer >= -1, got '%s'", value);
                return -1;
            }
        } else if (!strcmp(a, "--ignore-eos")) {
            o->ignore_eos = true;
        } else if (!strcmp(a, "--prompt-cache-all")) {
            o->prompt_cache_all = true;
        } else if (!strcmp(a, "--prompt-cache-ro")) {
            o->prompt_cache_ro = true;
        } else if (!strcmp(a, "-i") || !strcmp(a, "--interactive")) {
            o->interactive = true;
        } else if (!strcmp(a, "--interactive-first")) {
            o->interactive_first = true;
        } else if (!strcmp(a, "--multiline-input")) {
            o->multiline_input = true;
        } else if (!strcmp(a, "--in-prefix-bos")) {
            o->in_prefix_bos = true;
        } else if (!strcmp(a, "--no-display-prompt")) {
            o->display_prompt = false;
        } else {
            cli_fail(cmd, "unknown option '%s' (see llamac %s --help)", a, cmd);
            return -1;
        }
    }
    return 1;
}

/* ---- the generation loop ---- */

struct run_state {
    const char *cmd;
    struct run_options *o;
    struct llama_model *model;
    struct llama_context *ctx, *ctx_cfg;
    struct sampler *smp;
    struct run_output out;
    struct tokens embd_inp, embd, session, guidance_inp;
    int32_t n_ctx, n_batch;
    int32_t n_past, n_past_guidance;
    int32_t n_prompt_orig;     /* the prompt's tokens (the guidance context gets the negative prompt instead) */
    int32_t n_tokens_seen;     /* tokens decoded or reused so far, to tell prompt from what follows */
    int32_t guidance_offset;   /* negative prompt tokens minus prompt tokens (b1892's guidance_offset) */
    bool guidance_started;
    const char *path_session;  /* NULL once caching stops (context shift) */
    int32_t n_session_consumed;
    size_t n_session_match;    /* prompt tokens found in the loaded session */
    int32_t n_gen;
    int64_t t_prompt_us, t_gen_us;
};

static bool decode_tokens(struct run_state *st, struct llama_context *ctx, const llama_token *toks, int32_t n,
                          int32_t *n_past) {
    for (int32_t i = 0; i < n; i += st->n_batch) {
        int32_t n_eval = n - i < st->n_batch ? n - i : st->n_batch;
        if (llama_decode(ctx, llama_batch_get_one((llama_token *)toks + i, n_eval, *n_past, 0)) != 0) {
            output_emit(&st->out, true);
            cli_fail(st->cmd, "failed to evaluate %d tokens at position %d: %s", n_eval, *n_past, error_last());
            return false;
        }
        *n_past += n_eval;
    }
    return true;
}

/* b1892's context shift: keep BOS and n_keep tokens, drop half of the rest,
 * move the remainder down. b1892 only rewinds the guidance context's position,
 * so its cache fills with stale cells; here its cells move the same way (the
 * negative prompt stands where the prompt stands in the main context). */
static bool shift_context(struct run_state *st) {
    const int32_t n_keep = st->o->n_keep;
    const int32_t n_left = st->n_past - n_keep - 1;
    const int32_t n_discard = n_left / 2;
    if (n_discard <= 0) {
        output_emit(&st->out, true);
        cli_fail(st->cmd, "the context (%d tokens) is full and --keep %d leaves nothing to discard", st->n_ctx, n_keep);
        return false;
    }
    llama_kv_cache_seq_rm(st->ctx, 0, n_keep + 1, n_keep + n_discard + 1);
    llama_kv_cache_seq_shift(st->ctx, 0, n_keep + 1 + n_discard, st->n_past, -n_discard);
    st->n_past -= n_discard;
    if (st->ctx_cfg) {
        int32_t p0 = n_keep + 1 + st->guidance_offset;
        if (p0 < 1) p0 = 1;
        int32_t drop = st->n_past_guidance - p0 < n_discard ? st->n_past_guidance - p0 : n_discard;
        if (drop > 0) {
            llama_kv_cache_seq_rm(st->ctx_cfg, 0, p0, p0 + drop);
            llama_kv_cache_seq_shift(st->ctx_cfg, 0, p0 + drop, st->n_past_guidance, -drop);
            st->n_past_guidance -= drop;
        }
    }
    st->path_session = NULL; /* the cache no longer holds a prefix of the text */
    return true;
}

enum eval_result { EVAL_OK, EVAL_CONTEXT_FULL, EVAL_ERROR };

/* Evaluates st->embd: context shift if needed, tokens reused from the session
 * file, the guidance context, then the main context. */
static enum eval_result evaluate_embd(struct run_state *st) {
    const int32_t max_embd = st->n_ctx - 4; /* b1892: the same limit as for the prompt */
    if ((int32_t)st->embd.n > max_embd) {
        const int32_t skipped = (int32_t)st->embd.n - max_embd;
        st->embd.n = (size_t)max_embd;
        char msg[64];
        snprintf(msg, sizeof msg, "<<input too long: skipped %d token%s>>", skipped, skipped != 1 ? "s" : "");
        output_text(&st->out, msg);
    }
    const int32_t g_extra = st->ctx_cfg && st->guidance_offset > 0 ? st->guidance_offset : 0;
    if (st->n_past + (int32_t)st->embd.n + g_extra > st->n_ctx) {
        if (st->o->p.n_predict == -2) {
            output_emit(&st->out, true);
            fprintf(stderr, "\n\nllamac %s: context full and -n -2: stopping\n", st->cmd);
            return EVAL_CONTEXT_FULL;
        }
        if (!shift_context(st)) return EVAL_ERROR;
    }

    /* reuse the matching prefix of the loaded session instead of evaluating it */
    if (st->n_session_consumed < (int32_t)st->session.n) {
        size_t i = 0;
        for (; i < st->embd.n; i++) {
            if (st->embd.data[i] != st->session.data[st->n_session_consumed]) {
                st->session.n = (size_t)st->n_session_consumed;
                break;
            }
            st->n_past++;
            st->n_session_consumed++;
            if (st->n_session_consumed >= (int32_t)st->session.n) {
                i++;
                break;
            }
        }
        if (i > 0) {
            memmove(st->embd.data, st->embd.data + i, (st->embd.n - i) * sizeof *st->embd.data);
            st->embd.n -= i;
            st->n_tokens_seen += (int32_t)i;
        }
    }

    if (st->ctx_cfg) {
        if (!st->guidance_started) {
            if (!decode_tokens(st, st->ctx_cfg, st->guidance_inp.data, (int32_t)st->guidance_inp.n,
                               &st->n_past_guidance)) {
                return EVAL_ERROR;
            }
            st->guidance_started = true;
        }
        /* b1892 feeds the guidance context prompt tokens when the prompt is longer than a batch */
        int32_t skip = st->n_prompt_orig - st->n_tokens_seen;
        if (skip < 0) skip = 0;
        if (skip < (int32_t)st->embd.n &&
            !decode_tokens(st, st->ctx_cfg, st->embd.data + skip, (int32_t)st->embd.n - skip, &st->n_past_guidance)) {
            return EVAL_ERROR;
        }
    }
    if (!decode_tokens(st, st->ctx, st->embd.data, (int32_t)st->embd.n, &st->n_past)) return EVAL_ERROR;
    st->n_tokens_seen += (int32_t)st->embd.n;

    if (st->embd.n && st->path_session) {
        if (!tokens_append(&st->session, st->embd.data, st->embd.n)) {
            cli_fail(st->cmd, "out of memory");
            return EVAL_ERROR;
        }
        st->n_session_consumed = (int32_t)st->session.n;
    }
    return EVAL_OK;
}

/* b1892's reverse-prompt check: does one of them end the last 32 tokens' text
 * (allowing two more characters after it when not interactive, as the reverse
 * prompt may have been tokenized together with what follows)? */
static bool ends_with_antiprompt(const struct run_state *st) {
    if (st->o->n_antiprompts == 0) return false;
    char last[2048];
    const size_t len = sampler_prev_str(st->smp, 32, last, sizeof last);
    for (int32_t k = 0; k < st->o->n_antiprompts; k++) {
        const char *ap = st->o->antiprompts[k];
        const size_t ap_len = strlen(ap);
        const size_t window = ap_len + (st->o->interactive ? 0 : 2);
        const size_t start = len > window ? len - window : 0;
        if (memmem(last + start, len - start, ap, ap_len)) return true;
    }
    return false;
}

static bool save_session(struct run_state *st) {
    if (!llama_save_session_file(st->ctx, st->path_session, st->session.data, st->session.n)) {
        cli_fail(st->cmd, "cannot save the prompt cache '%s': %s", st->path_session, error_last());
        return false;
    }
    return true;
}

/* Loads the prompt cache if it exists (b1892: an unreadable one is an error). */
static bool load_session(struct run_state *st) {
    const char *path = st->o->prompt_cache;
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "llamac %s: prompt cache '%s' does not exist yet, it will be created\n", st->cmd, path);
        return true;
    }
    fclose(f);
    st->session.data = malloc((size_t)st->n_ctx * sizeof *st->session.data);
    if (!st->session.data) return cli_fail(st->cmd, "out of memory"), false;
    st->session.cap = (size_t)st->n_ctx;
    size_t n = 0;
    if (!llama_load_session_file(st->ctx, path, st->session.data, st->session.cap, &n)) {
        cli_fail(st->cmd, "cannot load the prompt cache '%s': %s", path, error_last());
        return false;
    }
    st->session.n = n;
    llama_set_rng_seed(st->ctx, st->o->p.seed);
    fprintf(stderr, "llamac %s: loaded a prompt cache of %zu tokens\n", st->cmd, n);
    return true;
}

/* Reports how much of the prompt the session holds and drops the rest of it. */
static void match_session(struct run_state *st) {
    if (!st->session.n) return;
    size_t n_match = 0;
    while (n_match < st->session.n && n_match < st->embd_inp.n && st->session.data[n_match] == st->embd_inp.data[n_match]) {
        n_match++;
    }
    const size_t n_inp = st->embd_inp.n;
    st->n_session_match = n_match;
    if (n_match == n_inp) {
        fprintf(stderr, "llamac %s: the prompt cache holds the whole prompt\n", st->cmd);
    } else if (n_match < n_inp / 2) {
        fprintf(stderr, "llamac %s: the prompt cache matches only %zu of %zu prompt tokens; most will be evaluated\n",
                st->cmd, n_match, n_inp);
    } else {
        fprintf(stderr, "llamac %s: the prompt cache matches %zu of %zu prompt tokens\n", st->cmd, n_match, n_inp);
    }
    /* the whole prompt is cached but the session goes on: evaluate the last
     * prompt token again to get its logits */
    if (n_match == n_inp && st->session.n > n_inp) st->session.n = n_inp - 1;
    /* drop what the cache holds beyond the part that will be reused (b1892
     * keeps the cell of that re-evaluated token, so it appears twice) */
    const size_t n_reuse = n_match < st->session.n ? n_match : st->session.n;
    llama_kv_cache_seq_rm(st->ctx, -1, (llama_pos)n_reuse, -1);
}

/* Reads the user's input and queues its tokens. Returns 1 when the loop goes
 * on, 0 at the end of input, -1 on Ctrl-C (quit), -2 on an error. */
static int interact(struct run_state *st, struct line_reader *reader, int32_t *n_remain) {
    const struct run_options *o = st->o;
    output_emit(&st->out, true);
    if (o->in_prefix_bos && !tokens_push(&st->embd_inp, llama_token_bos(st->model))) return -2;
    size_t len = o->in_prefix ? strlen(o->in_prefix) : 0;
    char *buffer = malloc(len + 1);
    if (!buffer) return -2;
    memcpy(buffer, o->in_prefix ? o->in_prefix : "", len + 1);
    if (len) output_text(&st->out, buffer);
    /* on a terminal the user's typing is already on the screen; from a pipe echo it */
    const bool echo = !isatty(STDIN_FILENO);
    enum read_status rs = read_user_input(reader, o->multiline_input, echo, &buffer, &len);
    if (rs != READ_LINE) {
        free(buffer);
        if (rs == READ_ERROR) cli_fail(st->cmd, "cannot read the input: %s", strerror(errno));
        return rs == READ_EOF ? 0 : rs == READ_INTERRUPTED ? -1 : -2;
    }
    int status = 1;
    if (len > 1) { /* an empty line hands control back without input */
        if (o->in_suffix) {
            char *grown = realloc(buffer, len + strlen(o->in_suffix) + 1);
            if (!grown) {
                free(buffer);
                return -2;
            }
            buffer = grown;
            strcpy(buffer + len, o->in_suffix);
            output_text(&st->out, o->in_suffix);
        }
        const size_t before = st->embd_inp.n;
        if (!tokens_tokenize(&st->embd_inp, st->model, buffer, false, false)) status = -2;
        *n_remain -= (int32_t)(st->embd_inp.n - before);
    }
    free(buffer);
    return status;
}

static int generate(struct run_state *st) {
    struct run_options *o = st->o;
    const llama_token eos = llama_token_eos(st->model);
    struct line_reader reader = { 0 };
    bool is_interacting = o->interactive_first;
    bool is_antiprompt = false;
    bool input_echo = true;
    bool display = o->display_prompt;
    bool need_to_save_session = st->path_session && st->n_session_match < st->embd_inp.n;
    int32_t n_remain = o->p.n_predict;
    size_t n_consumed = 0;
    int status = 0;
    int64_t t_start = llama_time_us(), t_first_sample = 0;

    while ((n_remain != 0 && !is_antiprompt) || o->interactive) {
        if (st->embd.n > 0) {
            const enum eval_result r = evaluate_embd(st);
            if (r != EVAL_OK) {
                status = r == EVAL_CONTEXT_FULL ? 0 : 1;
                break;
            }
        }
        st->embd.n = 0;

        if (st->embd_inp.n <= n_consumed && !is_interacting) {
            if (st->path_session && need_to_save_session && !o->prompt_cache_ro) {
                need_to_save_session = false;
                if (!save_session(st)) {
                    status = 1;
                    break;
                }
            }
            if (!t_first_sample) {
                t_first_sample = llama_time_us();
                st->t_prompt_us = t_first_sample - t_start;
            }
            const llama_token id = sampler_sample(st->smp, st->ctx, st->ctx_cfg, 0);
            if (id < 0) {
                output_emit(&st->out, true);
                cli_fail(st->cmd, "cannot sample: %s", error_last());
                status = 1;
                break;
            }
            sampler_accept(st->smp, st->ctx, id, true);
            if (!tokens_push(&st->embd, id)) {
                status = cli_fail(st->cmd, "out of memory");
                break;
            }
            input_echo = true;
            st->n_gen++;
            n_remain--;
        } else {
            /* queued input (the prompt or the user's line): evaluate it in batches */
            while (st->embd_inp.n > n_consumed) {
                const llama_token id = st->embd_inp.data[n_consumed++];
                if (!tokens_push(&st->embd, id)) {
                    status = cli_fail(st->cmd, "out of memory");
                    break;
                }
                sampler_accept(st->smp, st->ctx, id, false); /* penalties see the prompt, the grammar does not */
                if ((int32_t)st->embd.n >= st->n_batch) break;
            }
            if (status) break;
        }

        if (input_echo && display) {
            for (size_t i = 0; i < st->embd.n; i++) output_piece(&st->out, st->model, st->embd.data[i]);
        }
        if (input_echo && st->embd_inp.n == n_consumed) display = true;

        if (st->embd_inp.n <= n_consumed) {
            is_antiprompt = ends_with_antiprompt(st);
            if (is_antiprompt && o->interactive) is_interacting = true;

            if (sampler_last(st->smp) == eos) {
                if (o->interactive) {
                    if (o->n_antiprompts > 0) { /* answer with the first reverse prompt */
                        if (!tokens_tokenize(&st->embd_inp, st->model, o->antiprompts[0], false, true)) {
                            status = cli_fail(st->cmd, "out of memory");
                            break;
                        }
                        is_antiprompt = true;
                    }
                    is_interacting = true;
                    output_text(&st->out, "\n");
                }
            }

            /* b1892's handler: Ctrl-C interrupts generation; when already headed for input it quits */
            if (o->interactive && g_sigint) {
                if (g_sigint > 1 || is_interacting) {
                    status = 130;
                    break;
                }
                g_sigint = 0;
                is_interacting = true;
            }

            if (st->n_past > 0 && is_interacting) {
                int r = interact(st, &reader, &n_remain);
                if (r <= 0) {
                    status = r == 0 ? 0 : r == -1 ? 130 : 1;
                    break;
                }
                input_echo = false; /* the input is on the screen already */
            }
            if (st->n_past > 0) {
                if (is_interacting) sampler_reset(st->smp);
                is_interacting = false;
            }
        }

        if (st->embd.n && st->embd.data[st->embd.n - 1] == eos && !o->interactive) {
            output_emit(&st->out, true);
            fprintf(stderr, " [end of text]\n");
            break;
        }
        /* interactive: after n_predict tokens hand control back (not with -1 / -2) */
        if (o->interactive && n_remain <= 0 && o->p.n_predict >= 0) {
            n_remain = o->p.n_predict;
            is_interacting = true;
        }
    }
    output_emit(&st->out, true);
    if (status == 0 && st->path_session && o->prompt_cache_all && !o->prompt_cache_ro && !save_session(st)) status = 1;
    st->t_gen_us = t_first_sample ? llama_time_us() - t_first_sample : 0;
    free(reader.buf);
    return status;
}

int run_main(const char *cmd, int argc, char **argv) {
    struct run_options o;
    memset(&o, 0, sizeof o);
    common_params_default(&o.p);
    o.display_prompt = true;
    o.antiprompts = calloc((size_t)argc, sizeof *o.antiprompts);
    if (!o.antiprompts) return cli_fail(cmd, "out of memory");
    int parsed = parse_options(cmd, argc, argv, &o);
    if (parsed <= 0) {
        free(o.antiprompts);
        return parsed < 0 ? 1 : 0;
    }

    struct run_state st;
    memset(&st, 0, sizeof st);
    st.cmd = cmd;
    st.o = &o;
    char *file_prompt = NULL, *file_grammar = NULL;
    int status = 1;
    common_log_warnings_only();

    if (o.interactive_first) o.interactive = true;
    if (o.prompt_cache_all && o.interactive) {
        cli_fail(cmd, "--prompt-cache-all is not supported in interactive mode");
        goto done;
    }
    if (o.prompt_file) {
        if (!(file_prompt = common_read_prompt_file(cmd, o.prompt_file))) goto done;
        o.p.prompt = file_prompt;
    }
    if (o.grammar_file) {
        if (!(file_grammar = common_read_file(o.grammar_file))) {
            cli_fail(cmd, "cannot read grammar file '%s'", o.grammar_file);
            goto done;
        }
        o.p.sampling.grammar = file_grammar;
    }
    if (!o.p.prompt) o.p.prompt = "";
    if (o.p.seed == LLAMA_DEFAULT_SEED) o.p.seed = (uint32_t)time(NULL); /* as b1892's main, so a cache reload can reseed */

    if (!common_init(cmd, &o.p, &st.model, &st.ctx)) goto done;
    if (o.p.sampling.cfg_scale > 1.0f && !(st.ctx_cfg = common_context_new(cmd, &o.p, st.model))) goto done;
    if (o.ignore_eos) { /* b1892: --ignore-eos is a logit bias of -inf on EOS */
        struct sampling_params *sp = &o.p.sampling;
        const llama_token eos = llama_token_eos(st.model);
        int32_t k = 0;
        while (k < sp->n_logit_bias && sp->logit_bias[k].token != eos) k++;
        if (k == SAMPLING_MAX_LOGIT_BIAS) {
            cli_fail(cmd, "at most %d tokens can have a logit bias", SAMPLING_MAX_LOGIT_BIAS);
            goto done;
        }
        sp->logit_bias[k] = (struct logit_bias_entry){ eos, -INFINITY };
        if (k == sp->n_logit_bias) sp->n_logit_bias++;
    }
    if (!(st.smp = sampler_new(cmd, &o.p.sampling, st.model))) goto done;

    st.n_ctx = (int32_t)llama_n_ctx(st.ctx);
    st.n_batch = (int32_t)llama_n_batch(st.ctx);
    st.path_session = o.prompt_cache;
    if (o.prompt_cache && !load_session(&st)) goto done;

    /* b1892's llama_should_add_bos_token */
    const int32_t add_bos_meta = llama_add_bos_token(st.model);
    const bool add_bos = add_bos_meta != -1 ? add_bos_meta != 0 : llama_vocab_type(st.model) == LLAMA_VOCAB_TYPE_SPM;
    bool ok;
    if (o.interactive_first || o.p.prompt[0] || st.session.n == 0) {
        ok = tokens_tokenize(&st.embd_inp, st.model, o.p.prompt, add_bos, true);
    } else { /* no prompt: the cached session is the prompt */
        ok = tokens_append(&st.embd_inp, st.session.data, st.session.n);
    }
    if (ok && st.embd_inp.n == 0) ok = tokens_push(&st.embd_inp, llama_token_bos(st.model));
    if (!ok) {
        cli_fail(cmd, "cannot tokenize the prompt");
        goto done;
    }
    st.n_prompt_orig = (int32_t)st.embd_inp.n;
    if (st.ctx_cfg) {
        const char *neg = o.p.sampling.cfg_negative_prompt ? o.p.sampling.cfg_negative_prompt : "";
        if (!tokens_tokenize(&st.guidance_inp, st.model, neg, add_bos, true)) {
            cli_fail(cmd, "cannot tokenize the negative prompt");
            goto done;
        }
        st.guidance_offset = (int32_t)st.guidance_inp.n - st.n_prompt_orig;
    }
    if ((int32_t)st.embd_inp.n > st.n_ctx - 4) {
        cli_fail(cmd, "prompt is too long (%zu tokens, at most %d for context size %d)", st.embd_inp.n, st.n_ctx - 4,
                 st.n_ctx);
        goto done;
    }
    if (st.ctx_cfg && (int32_t)st.guidance_inp.n > st.n_ctx - 4) {
        cli_fail(cmd, "negative prompt is too long (%zu tokens, at most %d)", st.guidance_inp.n, st.n_ctx - 4);
        goto done;
    }
    match_session(&st);
    if (o.n_keep < 0 || o.n_keep > (int32_t)st.embd_inp.n) o.n_keep = (int32_t)st.embd_inp.n;

    if (o.interactive) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = run_on_sigint;
        sa.sa_flags = SA_RESTART; /* output and decoding go on; the input wait polls with a timeout */
        sigemptyset(&sa.sa_mask);
        sigaction(SIGINT, &sa, NULL);
        fprintf(stderr, "llamac %s: interactive mode: Ctrl-C interrupts generation, a second Ctrl-C or end of "
                        "input (Ctrl-D) exits; Return hands control back, end a line with '\\' to continue it\n",
                cmd);
        for (int32_t k = 0; k < o.n_antiprompts; k++) fprintf(stderr, "reverse prompt: '%s'\n", o.antiprompts[k]);
    }

    status = generate(&st);
    if (status == 0 || status == 130) {
        putchar('\n');
        const double t_p = (double)st.t_prompt_us, t_g = (double)st.t_gen_us;
        fprintf(stderr, "\nload: %.1f ms | prompt: %d tokens, %.1f tokens/s | generation: %d tokens, %.1f tokens/s\n",
                llama_get_timings(st.ctx).t_load_ms, st.n_prompt_orig, t_p > 0 ? 1e6 * (double)st.n_prompt_orig / t_p : 0.0,
                st.n_gen, t_g > 0 ? 1e6 * st.n_gen / t_g : 0.0);
    }

done:
    free(st.embd_inp.data);
    free(st.embd.data);
    free(st.session.data);
    free(st.guidance_inp.data);
    free(file_prompt);
    free(file_grammar);
    free(o.antiprompts);
    sampler_free(st.smp);
    llama_free(st.ctx_cfg);
    llama_free(st.ctx);
    llama_free_model(st.model);
    return status;
}

int cmd_run(int argc, char **argv) {
    return run_main("run", argc, argv);
}

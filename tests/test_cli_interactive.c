/* Interactive `llamac run -i` and `llamac chat` with stdin from a pipe:
 *  - two user lines: the transcript is exactly b1892 main's (greedy answers
 *    of n_predict tokens minus the line's tokens, input echoed since stdin is
 *    not a terminal), computed here against llama.h, and a clean exit at EOF;
 *  - chat: two lines, two answers, exit 0;
 *  - Ctrl-C stops endless generation and returns to the input; the line
 *    typed then is answered; end of input exits with 0; Ctrl-C while waiting
 *    for input exits with 130;
 *  - a reverse prompt without -i stops generation where it appears. */
#include "cli_test_util.h"
#include "llama.h"
#include "test_util.h"

static const char *g_model;

struct text {
    char buf[16384];
};

static void text_add(struct text *t, const char *s, size_t n) {
    size_t len = strlen(t->buf);
    if (len + n < sizeof t->buf) {
        memcpy(t->buf + len, s, n);
        t->buf[len + n] = '\0';
    }
}

static void text_piece(struct text *t, const struct llama_model *model, llama_token id) {
    char piece[64];
    int32_t n = llama_token_to_piece(model, id, piece, sizeof piece);
    if (n > 0) text_add(t, piece, (size_t)n);
}

/* Greedy tokens (no penalty) generated one by one; the last one is printed
 * but evaluated only with what follows it, as b1892 main does. */
static llama_token generate(struct llama_context *ctx, const struct llama_model *model, int n, int *n_past,
                            struct text *out) {
    const int n_vocab = llama_n_vocab(model);
    llama_token id = -1;
    for (int i = 0; i < n; i++) {
        if (i > 0) {
            CHECK(llama_decode(ctx, llama_batch_get_one(&id, 1, *n_past, 0)) == 0);
            (*n_past)++;
        }
        const float *logits = llama_get_logits_ith(ctx, 0);
        id = 0;
        for (int t = 1; t < n_vocab; t++) {
            if (logits[t] > logits[id]) id = t;
        }
        text_piece(out, model, id);
    }
    return id;
}

/* The transcript of `llamac run -i -p PROMPT -n N --temp 0 --repeat-penalty 1`
 * with the given lines on stdin: n_remain counts generated tokens and input
 * tokens; when it runs out control returns to the user and it restarts at N. */
static int reference_transcript(const char *prompt, const char *const *lines, int n_lines, int n_predict,
                                struct text *out) {
    struct llama_model *model = llama_load_model_from_file(g_model, llama_model_default_params());
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = 512;
    cp.n_threads = cp.n_threads_batch = 1;
    struct llama_context *ctx = llama_new_context_with_model(model, cp);
    llama_token toks[256];
    int n = llama_tokenize(model, prompt, (int)strlen(prompt), toks, 256, true, true);
    for (int i = 0; i < n; i++) text_piece(out, model, toks[i]);
    CHECK(llama_decode(ctx, llama_batch_get_one(toks, n, 0, 0)) == 0);
    int n_past = n;
    llama_token last = generate(ctx, model, n_predict, &n_past, out);
    int n_generated = n_predict;
    for (int k = 0; k < n_lines; k++) {
        text_add(out, lines[k], strlen(lines[k])); /* the echo */
        /* the last answer token, then the line (with its newline), evaluated before the next answer */
        CHECK(llama_decode(ctx, llama_batch_get_one(&last, 1, n_past, 0)) == 0);
        n_past++;
        n = llama_tokenize(model, lines[k], (int)strlen(lines[k]), toks, 256, false, false);
        CHECK(llama_decode(ctx, llama_batch_get_one(toks, n, n_past, 0)) == 0);
        n_past += n;
        last = generate(ctx, model, n_predict - n, &n_past, out);
        n_generated += n_predict - n;
    }
    text_add(out, "\n", 1);
    llama_free(ctx);
    llama_free_model(model);
    return n_generated;
}

static void check_two_lines(void) {
    const char *lines[2] = { "Tom went to the park.\n", "The end.\n" };
    struct text want = { { 0 } };
    const int n_generated = reference_transcript("Once upon a time", lines, 2, 24, &want);
    const char *args[] = { "run", "-m", g_model, "-t", "1", "-i", "-p", "Once upon a time", "-n", "24", "--temp", "0",
                           "--repeat-penalty", "1", NULL };
    struct cli_result r = cli_run(args, "Tom went to the park.\nThe end.\n", 120);
    CHECK_MSG(r.status == 0 && !r.timed_out, "status %d: %s", r.status, r.err);
    CHECK_MSG(r.out && strcmp(r.out, want.buf) == 0, "\n got: %s\nwant: %s", r.out, want.buf);
    CHECK_EQ_INT(cli_generated_tokens(r.err), n_generated);
    CHECK(n_generated > 40);
    cli_result_free(&r);
}

static void check_chat(void) {
    const char *args[] = { "chat", "-m", g_model, "-t", "1", "-n", "32", "--temp", "0", NULL };
    struct cli_result r = cli_run(args, "Hi there.\nWhat is your name?\n", 120);
    CHECK_MSG(r.status == 0 && !r.timed_out, "status %d: %s", r.status, r.err);
    const char *first = r.out ? strstr(r.out, "User: Hi there.\nAssistant:") : NULL;
    const char *second = first ? strstr(first, " What is your name?\n") : NULL;
    CHECK_MSG(first && second, "%s", r.out);
    /* an answer after each line */
    CHECK(first && second && second - first > (long)strlen("User: Hi there.\nAssistant:") + 4);
    CHECK(second && strlen(second) > strlen(" What is your name?\nAssistant:") + 4);
    CHECK(cli_generated_tokens(r.err) > 8);
    cli_result_free(&r);
}

/* Waits until stdout has stopped growing for quiet_s; returns its length. */
static size_t wait_quiet(struct cli_proc *p, double quiet_s, double limit_s) {
    const double end = cli_now() + limit_s;
    size_t len = p->stdout_text.len;
    while (cli_now() < end) {
        cli_pump(p, quiet_s, 0);
        if (p->stdout_text.len == len) break;
        len = p->stdout_text.len;
    }
    return len;
}

static void check_ctrl_c(void) {
    /* endless generation (-n -1, context shifting), interrupted twice */
    const char *args[] = { "run", "-m", g_model, "-t", "1", "-i", "-p", "Once upon a time", "-n", "-1", "-c", "64",
                           "--temp", "0", "--repeat-penalty", "1", NULL };
    struct cli_proc p;
    CHECK(cli_spawn(&p, args));
    cli_pump(&p, 60, 300);
    CHECK(p.stdout_text.len >= 300);
    kill(p.pid, SIGINT);
    const size_t stopped = wait_quiet(&p, 0.5, 30);
    cli_pump(&p, 0.5, 0);
    CHECK_MSG(p.stdout_text.len == stopped, "output went on after Ctrl-C");
    CHECK(waitpid(p.pid, NULL, WNOHANG) == 0); /* still running, waiting for input */
    CHECK(cli_write(&p, "The end.\n"));
    cli_pump(&p, 60, stopped + 200);
    CHECK_MSG(p.stdout_text.len >= stopped + 200, "no answer after the input");
    CHECK(strncmp(p.stdout_text.data + stopped, "The end.\n", 9) == 0);
    kill(p.pid, SIGINT);
    wait_quiet(&p, 0.5, 30);
    cli_close_stdin(&p); /* end of input at the prompt: exit 0 */
    bool timed_out;
    int status = cli_wait(&p, 30, &timed_out);
    CHECK_MSG(status == 0 && !timed_out, "status %d", status);
    free(p.stdout_text.data);
    free(p.stderr_text.data);

    /* Ctrl-C while waiting for the first input: exit 130 */
    const char *first[] = { "run", "-m", g_model, "-t", "1", "--interactive-first", "-p", "Once upon a time", NULL };
    CHECK(cli_spawn(&p, first));
    cli_pump(&p, 60, strlen(" Once upon a time"));
    CHECK_STR_EQ(p.stdout_text.data, " Once upon a time");
    kill(p.pid, SIGINT);
    status = cli_wait(&p, 30, &timed_out);
    CHECK_MSG(status == 130 && !timed_out, "status %d", status);
    free(p.stdout_text.data);
    free(p.stderr_text.data);
}

static void check_reverse_prompt(void) {
    const char *args[] = { "run", "-m", g_model, "-t", "1", "-p", "Once upon a time", "-n", "64", "--temp", "0",
                           "-r", "Lily", NULL };
    struct cli_result r = cli_run(args, NULL, 120);
    CHECK_MSG(r.status == 0, "%s", r.err);
    CHECK_STR_EQ(r.out, " Once upon a time, there was a little girl named Lily\n");
    cli_result_free(&r);
}

int main(void) {
    g_model = test_require_shared("models/stories260K.gguf");
    check_two_lines();
    check_chat();
    check_ctrl_c();
    check_reverse_prompt();
    return test_finish("test_cli_interactive");
}

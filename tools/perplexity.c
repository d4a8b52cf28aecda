/*
 * llamac perplexity: b1892's examples/perplexity.
 *
 *   llamac perplexity -m MODEL -f TEXT [-c N] [-b N] [-t N] [--chunks N]
 *
 * The text's tokens are cut into chunks of n_ctx; each chunk is decoded alone
 * (empty cache) with its first token replaced by BOS, and the second half of
 * it is scored: positions n_ctx/2 .. n_ctx-2 predicting the next token. The
 * running perplexity goes to stdout after each chunk ("[1]x,[2]y,...") and
 * then "Final estimate: PPL = X +/- Y"; progress and timings go to stderr.
 *
 * --ppl-stride S is b1892's strided variant: windows of n_ctx + S/2 tokens
 * every S tokens, the last S positions of each scored (its BOS replacement
 * happens after the decode in b1892, so it changes nothing; neither here).
 * With -c 129 --ppl-stride 255 --chunks 1 it scores every next token of BOS
 * plus the first 255 tokens.
 *
 * --hellaswag scores HellaSwag-style tasks (b1892's format: 6 lines per task,
 * the context, the index of the right ending, four endings): for each ending
 * the mean log-probability of its tokens after the context; a task counts as
 * solved when the right ending has the highest. --hellaswag-tasks N (default
 * 400) tasks are drawn at random with b1892's generator (std::mt19937 seeded
 * with 1), and the running accuracy is printed after each.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/eval.h"
#include "cli.h"
#include "common.h"
#include "core/timer.h"
#include "perplexity.h"
#include "sample/rng.h"

#define HELLASWAG_LINES_PER_TASK 6
#define HELLASWAG_ENDINGS 4
#define HELLASWAG_MIN_QUERY 32 /* b1892 pads the first query to at least this many tokens */

struct ppl_options {
    struct common_params common;
    struct ppl_text_options text;
    int32_t stride;       /* > 0: the strided variant */
    int32_t output_type;  /* 0: "[i]ppl,"; 1: one line per chunk */
    bool hellaswag;
    int32_t hellaswag_tasks;
};

static void ppl_usage(void) {
    printf("usage: llamac perplexity -m MODEL -f TEXT [options]\n\n"
           "Perplexity of MODEL over TEXT as b1892's perplexity tool measures it.\n\n"
           "  -f, --file FILE           the text (one trailing newline is dropped)\n"
           "  --chunks N                score only the first N chunks (default: all)\n"
           "  --ppl-stride S            strided windows of n_ctx + S/2 tokens every S tokens\n"
           "  --ppl-output-type 0|1     0: [i]ppl, ...  1: one line per chunk\n"
           "  --hellaswag               score HellaSwag tasks from FILE (6 lines per task)\n"
           "  --hellaswag-tasks N       tasks to score (default 400)\n");
    common_print_options();
}

static int ppl_parse(int argc, char **argv, struct ppl_options *o) {
    const char *cmd = "perplexity";
    common_params_default(&o->common);
    o->text.n_chunks = -1;
    o->hellaswag_tasks = 400;
    for (int i = 1; i < argc; i++) {
        int r = common_parse_option(cmd, argc, argv, &i, &o->common);
        if (r < 0) return 1;
        if (r > 0) continue;
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        long long n;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            ppl_usage();
            return -1;
        } else if (ppl_parse_text_option(a, v, &o->text)) {
            /* -f FILE or --chunks N */
        } else if (!strcmp(a, "--ppl-stride") && v && cli_parse_int(v, 0, 1 << 22, &n)) {
            o->stride = (int32_t)n;
        } else if (!strcmp(a, "--ppl-output-type") && v && cli_parse_int(v, 0, 1, &n)) {
            o->output_type = (int32_t)n;
        } else if (!strcmp(a, "--hellaswag")) {
            o->hellaswag = true;
            continue;
        } else if (!strcmp(a, "--hellaswag-tasks") && v && cli_parse_int(v, 0, INT32_MAX, &n)) {
            o->hellaswag_tasks = (int32_t)n;
        } else {
            return cli_fail(cmd, "unknown or incomplete option '%s' (see llamac perplexity --help)", a);
        }
        i++;
    }
    return ppl_check_options(cmd, &o->text, &o->common);
}

bool ppl_parse_text_option(const char *a, const char *v, struct ppl_text_options *o) {
    long long n;
    if ((!strcmp(a, "-f") || !strcmp(a, "--file")) && v) {
        o->text_file = v;
    } else if (!strcmp(a, "--chunks") && v && cli_parse_int(v, -1, INT32_MAX, &n)) {
        o->n_chunks = (int32_t)n;
    } else {
        return false;
    }
    return true;
}

int ppl_check_options(const char *cmd, const struct ppl_text_options *o, const struct common_params *p) {
    if (!o->text_file && !p->prompt) return cli_fail(cmd, "no text given (-f FILE)");
    if (p->n_ctx <= 0) return cli_fail(cmd, "needs a context size (-c N)");
    return 0;
}

char *ppl_read_text(const char *cmd, const struct ppl_text_options *o, const struct common_params *p) {
    return o->text_file ? common_read_prompt_file(cmd, o->text_file) : strdup(p->prompt);
}

static void print_eta(const char *cmd, double seconds_per_pass, int32_t n_passes) {
    fprintf(stderr, "%s: %.2f seconds per pass - ETA ", cmd, seconds_per_pass);
    int total = (int)(seconds_per_pass * n_passes);
    if (total >= 3600) {
        fprintf(stderr, "%d hours ", total / 3600);
        total %= 3600;
    }
    fprintf(stderr, "%.2f minutes\n", total / 60.0);
}

static int too_few_tokens(const char *cmd, int32_t n_tokens, int32_t n_ctx) {
    return cli_fail(cmd, "you need at least %d tokens to evaluate perplexity with a context of %d (the text has %d)",
                    2 * n_ctx, n_ctx, n_tokens);
}

int ppl_run_chunks(struct llama_context *ctx, llama_token *tokens, int32_t n_tokens, const struct ppl_chunks_params *p) {
    const int32_t n_ctx = (int32_t)llama_n_ctx(ctx), n_vocab = llama_n_vocab(llama_get_model(ctx));
    if (n_tokens < 2 * n_ctx) return too_few_tokens(p->cmd, n_tokens, n_ctx);
    const int32_t n_chunk_max = n_tokens / n_ctx;
    const int32_t n_chunk = p->n_chunks < 0 || p->n_chunks > n_chunk_max ? n_chunk_max : p->n_chunks;
    float *logits = malloc((size_t)n_ctx * (size_t)n_vocab * sizeof *logits);
    if (!logits) return cli_fail(p->cmd, "out of memory for %d x %d logits", n_ctx, n_vocab);
    fprintf(stderr, "%s: calculating perplexity over %d chunks, batch_size=%d\n", p->cmd, n_chunk, p->n_batch);
    struct eval_nll nll = { 0 };
    for (int32_t i = 0; i < n_chunk; i++) {
        const int64_t t0 = llama_time_us();
        if (eval_chunk_nll(ctx, tokens + (size_t)i * n_ctx, n_ctx, p->n_batch, p->add_bos, logits, &nll) != 0) {
            free(logits);
            return cli_fail(p->cmd, "failed to evaluate chunk %d", i + 1);
        }
        if (i == 0) print_eta(p->cmd, (llama_time_us() - t0) / 1e6, n_chunk);
        if (p->output_type == 0) {
            printf("[%d]%.4f,", i + 1, eval_nll_ppl(&nll));
        } else {
            const double mean = nll.sum / nll.count;
            double sd = nll.sum2 / nll.count - mean * mean;
            if (sd > 0) sd = sqrt(sd / (nll.count - 1));
            printf("%8d  %.4f  %4f  %4f\n", i * n_ctx, eval_nll_ppl(&nll), mean, sd);
        }
        fflush(stdout);
        if (p->after_chunk && !p->after_chunk(i, p->data)) {
            free(logits);
            return 1;
        }
    }
    free(logits);
    printf("\n");
    double err;
    if (eval_nll_ppl_stderr(&nll, &err)) {
        printf("Final estimate: PPL = %.4f +/- %.5f\n", eval_nll_ppl(&nll), err);
    } else {
        printf("Unexpected negative standard deviation of log(prob)\n");
    }
    return 0;
}

/* What the strided and HellaSwag modes share. */
struct ppl_run {
    struct llama_context *ctx;
    const struct llama_model *model;
    int32_t n_ctx, n_batch, n_vocab;
    int output_type;
    bool add_bos;
    float *logits; /* n_ctx rows of n_vocab */
};

/* b1892's perplexity_v2(): windows of n_ctx (already widened by stride/2)
 * every `stride` tokens, the last `stride` predictions of each scored from
 * the float softmax probability. */
static int ppl_strided(struct ppl_run *r, const llama_token *tokens, int32_t n_tokens, int32_t n_chunks,
                       int32_t stride) {
    const int32_t n_ctx = r->n_ctx;
    if (n_tokens < 2 * n_ctx) return too_few_tokens("perplexity", n_tokens, n_ctx);
    if (n_ctx - stride - 1 < 0) {
        return cli_fail("perplexity", "a stride of %d does not fit a context of %d", stride, n_ctx);
    }
    const int32_t n_chunk_max = (n_tokens - n_ctx + stride - 1) / stride;
    const int32_t n_chunk = n_chunks < 0 || n_chunks > n_chunk_max ? n_chunk_max : n_chunks;
    fprintf(stderr, "perplexity: calculating perplexity over %d chunks, batch_size=%d\n", n_chunk, r->n_batch);
    struct eval_nll nll = { 0 };
    for (int32_t i = 0; i < n_chunk; i++) {
        const llama_token *window = tokens + (size_t)i * stride;
        const int64_t t0 = llama_time_us();
        llama_kv_cache_clear(r->ctx);
        if (eval_decode_logits(r->ctx, window, n_ctx, 0, r->n_batch, r->logits) != 0) {
            return cli_fail("perplexity", "failed to evaluate window %d", i + 1);
        }
        if (i == 0) print_eta("perplexity", (llama_time_us() - t0) / 1e6, n_chunk);
        for (int32_t j = n_ctx - stride - 1; j < n_ctx - 1; j++) {
            const float prob = eval_token_prob(r->logits + (size_t)j * r->n_vocab, r->n_vocab, window[j + 1]);
            eval_nll_add(&nll, -logf(prob));
        }
        if (r->output_type == 0) {
            printf("[%d]%.4f,", i + 1, eval_nll_ppl(&nll));
        } else {
            printf("%8d  %.4f\n", i * stride, eval_nll_ppl(&nll));
        }
        fflush(stdout);
    }
    printf("\n");
    return 0;
}

/* ---- HellaSwag ------------------------------------------------------------------------ */

struct hs_task {
    const char *context;
    const char *endings[HELLASWAG_ENDINGS];
    int gold;
};

/* Splits text into lines in place (as std::getline: a final newline ends the
 * last line, it does not start an empty one). */
static char **split_lines(char *text, size_t *n_out) {
    size_t n = 0, cap = 64;
    char **lines = malloc(cap * sizeof *lines);
    for (char *p = text; lines && *p;) {
        if (n == cap) {
            char **bigger = realloc(lines, 2 * cap * sizeof *lines);
            if (!bigger) {
                free(lines);
                return NULL;
            }
            lines = bigger;
            cap *= 2;
        }
        lines[n++] = p;
        char *nl = strchr(p, '\n');
        if (!nl) break;
        *nl = '\0';
        p = nl + 1;
    }
    *n_out = n;
    return lines;
}

/* std::stoi: optional leading whitespace and sign, then digits. */
static bool parse_gold(const char *s, int *out) {
    char *end;
    long v = strtol(s, &end, 10);
    if (end == s || v < 0 || v >= HELLASWAG_ENDINGS) return false;
    *out = (int)v;
    return true;
}

/* A task's tokens: the context, and context + " " + ending for each ending. */
struct hs_tokens {
    llama_token *context;
    int32_t n_context;
    llama_token *ending[HELLASWAG_ENDINGS];
    int32_t n_ending[HELLASWAG_ENDINGS];
};

static void hs_tokens_free(struct hs_tokens *t) {
    free(t->context);
    for (int e = 0; e < HELLASWAG_ENDINGS; e++) free(t->ending[e]);
}

static bool hs_tokens_make(const struct ppl_run *r, const struct hs_task *task, int task_no, struct hs_tokens *t) {
    *t = (struct hs_tokens){ 0 };
    t->context = common_tokenize(r->model, task->context, r->add_bos, false, &t->n_context);
    if (!t->context) return false;
    for (int e = 0; e < HELLASWAG_ENDINGS; e++) {
        const size_t len = strlen(task->context) + strlen(task->endings[e]) + 2;
        char *text = malloc(len);
        if (!text) return false;
        snprintf(text, len, "%s %s", task->context, task->endings[e]);
        t->ending[e] = common_tokenize(r->model, text, r->add_bos, false, &t->n_ending[e]);
        free(text);
        if (!t->ending[e]) return false;
        /* b1892 warns and goes on when context + ending does not start with the context's tokens */
        for (int32_t k = 0; k < t->n_context; k++) {
            if (k >= t->n_ending[e] || t->ending[e][k] != t->context[k]) {
                fprintf(stderr, "Oops: ending %d of task %d differs from context at position %d\n", e, task_no, k);
                break;
            }
        }
        if (t->n_ending[e] <= t->n_context) {
            cli_fail("perplexity", "task %d: ending %d adds no tokens to the context", task_no + 1, e);
            return false;
        }
        if (t->n_ending[e] > r->n_ctx) {
            cli_fail("perplexity", "number of tokens in query %d > n_ctx %d", t->n_ending[e], r->n_ctx);
            return false;
        }
    }
    return true;
}

/* Mean log-probability (b1892: float probabilities, float logs, a double sum)
 * of the n tokens e[]: e[0] from first_logits, e[j + 1] from logits row j. */
static double hs_mean_logprob(const struct ppl_run *r, const float *first_logits, const llama_token *e, int32_t n,
                              const float *logits) {
    double sum = logf(eval_token_prob(first_logits, r->n_vocab, e[0]));
    for (int32_t j = 0; j + 1 < n; j++) {
        sum += logf(eval_token_prob(logits + (size_t)j * r->n_vocab, r->n_vocab, e[j + 1]));
    }
    return sum / n;
}

/* Decodes ending 0 with its context (padded with token 0 to at least 32
 * tokens, as b1892 does), keeps the logits after the context in first_logits,
 * and scores it. */
static bool hs_first_ending(struct ppl_run *r, const struct hs_tokens *t, float *first_logits, double *logprob) {
    const int32_t n_query = t->n_ending[0];
    const int32_t n_eval = n_query < HELLASWAG_MIN_QUERY ? HELLASWAG_MIN_QUERY : n_query;
    if (n_eval > r->n_ctx) {
        cli_fail("perplexity", "a query padded to %d tokens does not fit n_ctx %d", n_eval, r->n_ctx);
        return false;
    }
    llama_token *query = calloc((size_t)n_eval, sizeof *query);
    if (!query) return false;
    memcpy(query, t->ending[0], (size_t)n_query * sizeof *query);
    llama_kv_cache_clear(r->ctx);
    const int32_t status = eval_decode_logits(r->ctx, query, n_eval, 0, r->n_batch, r->logits);
    free(query);
    if (status != 0) return false;
    const size_t row = (size_t)r->n_vocab;
    memcpy(first_logits, r->logits + (size_t)(t->n_context - 1) * row, row * sizeof *first_logits);
    *logprob = hs_mean_logprob(r, first_logits, t->ending[0] + t->n_context, n_query - t->n_context,
                               r->logits + (size_t)t->n_context * row);
    return true;
}

/* One task: 1 when the gold ending has the highest mean log-probability, 0 when not, -1 on failure. */
static int hs_score_task(struct ppl_run *r, const struct hs_task *task, int task_no, float *first_logits) {
    struct hs_tokens t;
    double logprob[HELLASWAG_ENDINGS];
    bool ok = hs_tokens_make(r, task, task_no, &t) && hs_first_ending(r, &t, first_logits, &logprob[0]);
    /* the other endings continue the cached context from position n_context */
    for (int e = 1; ok && e < HELLASWAG_ENDINGS; e++) {
        const int32_t n_tail = t.n_ending[e] - t.n_context;
        ok = eval_decode_logits(r->ctx, t.ending[e] + t.n_context, n_tail, t.n_context, r->n_batch, r->logits) == 0;
        if (ok) logprob[e] = hs_mean_logprob(r, first_logits, t.ending[e] + t.n_context, n_tail, r->logits);
    }
    hs_tokens_free(&t);
    if (!ok) {
        cli_fail("perplexity", "cannot score task %d", task_no + 1);
        return -1;
    }
    int best = 0;
    for (int e = 1; e < HELLASWAG_ENDINGS; e++) {
        if (logprob[e] > logprob[best]) best = e;
    }
    return best == task->gold;
}

/* b1892's hellaswag_score(). */
static int ppl_hellaswag(struct ppl_run *r, char *text, int32_t max_tasks) {
    const char *cmd = "perplexity";
    size_t n_lines = 0;
    char **lines = split_lines(text, &n_lines);
    if (!lines) return cli_fail(cmd, "out of memory");
    int status = 1;
    struct hs_task *tasks = NULL;
    float *first_logits = NULL; /* after the context, shared by the four endings */
    if (n_lines % HELLASWAG_LINES_PER_TASK != 0) {
        cli_fail(cmd, "number of lines in the task file (%zu) is not a multiple of 6", n_lines);
        goto done;
    }
    size_t n_left = n_lines / HELLASWAG_LINES_PER_TASK;
    fprintf(stderr, "hellaswag_score : loaded %zu tasks from prompt.\n", n_left);
    const size_t n_tasks = (size_t)max_tasks < n_left ? (size_t)max_tasks : n_left;
    fprintf(stderr, "hellaswag_score : selecting %zu randomized tasks.\n", n_tasks);
    tasks = calloc(n_tasks ? n_tasks : 1, sizeof *tasks);
    first_logits = malloc((size_t)r->n_vocab * sizeof *first_logits);
    if (!tasks || !first_logits) {
        cli_fail(cmd, "out of memory");
        goto done;
    }
    /* b1892 draws each task from those left, seed fixed at 1 */
    struct rng_mt19937 rng;
    rng_mt19937_seed(&rng, 1);
    for (size_t i = 0; i < n_tasks; i++, n_left--) {
        const size_t idx = rng_uniform_below(&rng, (uint32_t)n_left);
        char **task = lines + idx * HELLASWAG_LINES_PER_TASK;
        tasks[i].context = task[0];
        if (!parse_gold(task[1], &tasks[i].gold)) {
            cli_fail(cmd, "task line '%s' is not an ending index (0 to 3)", task[1]);
            goto done;
        }
        for (int e = 0; e < HELLASWAG_ENDINGS; e++) tasks[i].endings[e] = task[2 + e];
        memmove(task, task + HELLASWAG_LINES_PER_TASK,
                (n_left - idx - 1) * HELLASWAG_LINES_PER_TASK * sizeof *lines);
    }
    fprintf(stderr, "hellaswag_score : calculating hellaswag score over selected tasks.\n");
    printf("\ntask\tacc_norm\n");
    double acc = 0.0;
    for (size_t i = 0; i < n_tasks; i++) {
        const int solved = hs_score_task(r, &tasks[i], (int)i, first_logits);
        if (solved < 0) goto done;
        acc += solved;
        printf("%zu\t%.8f\n", i + 1, acc / (double)(i + 1) * 100.0);
        fflush(stdout);
    }
    printf("\n");
    status = 0;

done:
    free(first_logits);
    free(tasks);
    free(lines);
    return status;
}

int cmd_perplexity(int argc, char **argv) {
    const char *cmd = "perplexity";
    struct ppl_options o = { 0 };
    const int parsed = ppl_parse(argc, argv, &o);
    if (parsed != 0) return parsed < 0 ? 0 : parsed;
    struct common_params *p = &o.common;
    p->logits_all = true;
    if (p->n_batch > p->n_ctx) p->n_batch = p->n_ctx;
    if (o.stride > 0) {
        fprintf(stderr, "Will perform strided perplexity calculation -> adjusting context size from %d to %d\n",
                p->n_ctx, p->n_ctx + o.stride / 2);
        p->n_ctx += o.stride / 2;
    }

    char *text = NULL;
    llama_token *tokens = NULL;
    struct llama_model *model = NULL;
    struct ppl_run r = { .output_type = o.output_type };
    int status = 1;
    text = ppl_read_text(cmd, &o.text, p);
    if (!text || !common_init(cmd, p, &model, &r.ctx)) goto done;
    r.model = model;
    r.n_ctx = (int32_t)llama_n_ctx(r.ctx);
    r.n_batch = p->n_batch;
    r.n_vocab = llama_n_vocab(model);
    r.add_bos = common_should_add_bos(model);
    fprintf(stderr, "system_info: n_threads = %d | %s\n", p->n_threads, llama_print_system_info());
    if (o.hellaswag || o.stride > 0) {
        r.logits = malloc((size_t)r.n_ctx * (size_t)r.n_vocab * sizeof *r.logits);
        if (!r.logits) {
            cli_fail(cmd, "out of memory for %d x %d logits", r.n_ctx, r.n_vocab);
            goto done;
        }
    }
    if (o.hellaswag) {
        status = ppl_hellaswag(&r, text, o.hellaswag_tasks);
    } else {
        fprintf(stderr, "perplexity: tokenizing the input ..\n");
        int32_t n_tokens = 0;
        tokens = common_tokenize(model, text, r.add_bos, false, &n_tokens);
        if (!tokens) {
            cli_fail(cmd, "cannot tokenize the text");
            goto done;
        }
        if (o.stride > 0) {
            status = ppl_strided(&r, tokens, n_tokens, o.text.n_chunks, o.stride);
        } else {
            const struct ppl_chunks_params cp = {
                .cmd = cmd, .n_chunks = o.text.n_chunks, .n_batch = r.n_batch, .output_type = o.output_type,
                .add_bos = r.add_bos,
            };
            status = ppl_run_chunks(r.ctx, tokens, n_tokens, &cp);
        }
    }
    llama_print_timings(r.ctx);

done:
    free(r.logits);
    free(tokens);
    free(text);
    llama_free(r.ctx);
    llama_free_model(model);
    return status;
}

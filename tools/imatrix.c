/*
 * llamac imatrix: b1892's imatrix tool.
 *
 *   llamac imatrix -m MODEL -f TEXT [-o OUT] [-c N] [-b N] [--chunks N]
 *                  [-ofreq N] [-ow 0|1] [--verbosity N]
 *
 * Runs the model over TEXT exactly as `llamac perplexity` does (chunks of
 * n_ctx starting with BOS, printing the running perplexity) while observing
 * every matrix product (quantize.h: imatrix_collector), and writes the
 * importance matrix in b1892's binary format to OUT (default imatrix.dat),
 * also every N chunks on the way (-ofreq, default 10). -ow 1 includes
 * output.weight. `llamac quantize --imatrix OUT` reads it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "common.h"
#include "context/context.h"
#include "core/log.h"
#include "perplexity.h"
#include "quantize/quantize.h"

struct imatrix_options {
    struct common_params common;
    struct ppl_text_options text;
    const char *out_file;
    int32_t save_every;
    bool collect_output;
    int32_t verbosity;
};

static void imatrix_usage(void) {
    printf("usage: llamac imatrix -m MODEL -f TEXT [options]\n\n"
           "Collects an importance matrix (b1892's format) for `llamac quantize --imatrix`.\n\n"
           "  -f, --file FILE              the text (one trailing newline is dropped)\n"
           "  -o, --output-file FILE       where to write it (default imatrix.dat)\n"
           "  --chunks N                   use only the first N chunks of n_ctx tokens\n"
           "  -ofreq, --output-frequency N also write it every N chunks (default 10)\n"
           "  -ow, --output-weight 0|1     include output.weight (default 0)\n"
           "  --verbosity N                0: quiet, 1: say when the file is written (default)\n");
    common_print_options();
}

static int imatrix_parse(int argc, char **argv, struct imatrix_options *o) {
    const char *cmd = "imatrix";
    common_params_default(&o->common);
    o->out_file = "imatrix.dat";
    o->text.n_chunks = -1;
    o->save_every = 10;
    o->verbosity = 1;
    for (int i = 1; i < argc; i++) {
        int r = common_parse_option(cmd, argc, argv, &i, &o->common);
        if (r < 0) return 1;
        if (r > 0) continue;
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        long long n;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            imatrix_usage();
            return -1;
        } else if (ppl_parse_text_option(a, v, &o->text)) {
            /* -f FILE or --chunks N */
        } else if ((!strcmp(a, "-o") || !strcmp(a, "--output-file")) && v) {
            o->out_file = v;
        } else if ((!strcmp(a, "-ofreq") || !strcmp(a, "--output-frequency")) && v &&
                   cli_parse_int(v, 1, INT32_MAX, &n)) {
            o->save_every = (int32_t)n;
        } else if ((!strcmp(a, "-ow") || !strcmp(a, "--output-weight")) && v && cli_parse_int(v, 0, 1, &n)) {
            o->collect_output = n != 0;
        } else if (!strcmp(a, "--verbosity") && v && cli_parse_int(v, 0, INT32_MAX, &n)) {
            o->verbosity = (int32_t)n;
        } else {
            return cli_fail(cmd, "unknown or incomplete option '%s' (see llamac imatrix --help)", a);
        }
        i++;
    }
    return ppl_check_options(cmd, &o->text, &o->common);
}

struct imatrix_saver {
    const struct imatrix_collector *collector;
    const char *path;
    int32_t save_every;
    int32_t verbosity;
    int32_t saved_at; /* the product count of the last write */
};

static bool imatrix_save(struct imatrix_saver *s) {
    if (!imatrix_collector_write(s->collector, s->path)) {
        cli_fail("imatrix", "%s", error_last());
        return false;
    }
    s->saved_at = imatrix_collector_ncall(s->collector);
    if (s->verbosity > 0) {
        fprintf(stderr, "\nimatrix: stored collected data after %d chunks in %s\n", s->saved_at, s->path);
    }
    return true;
}

/* Writes the file whenever the product count has passed another multiple of save_every. */
static bool imatrix_after_chunk(int32_t chunk, void *data) {
    (void)chunk;
    struct imatrix_saver *s = data;
    const int32_t ncall = imatrix_collector_ncall(s->collector);
    if (ncall / s->save_every == s->saved_at / s->save_every) return true;
    return imatrix_save(s);
}

int cmd_imatrix(int argc, char **argv) {
    const char *cmd = "imatrix";
    struct imatrix_options o = { 0 };
    const int parsed = imatrix_parse(argc, argv, &o);
    if (parsed != 0) return parsed < 0 ? 0 : parsed;
    struct common_params *p = &o.common;
    p->logits_all = true;
    if (p->n_batch > p->n_ctx) p->n_batch = p->n_ctx;

    char *text = NULL;
    llama_token *tokens = NULL;
    struct llama_model *model = NULL;
    struct llama_context *ctx = NULL;
    struct imatrix_collector *collector = NULL;
    int status = 1;
    text = ppl_read_text(cmd, &o.text, p);
    if (!text || !common_init(cmd, p, &model, &ctx)) goto done;
    collector = imatrix_collector_new(o.collect_output);
    if (!collector) goto done;
    context_set_eval_callback(ctx, imatrix_collector_observe, collector);

    fprintf(stderr, "imatrix: tokenizing the input ..\n");
    const bool add_bos = common_should_add_bos(model);
    int32_t n_tokens = 0;
    tokens = common_tokenize(model, text, add_bos, false, &n_tokens);
    if (!tokens) {
        cli_fail(cmd, "cannot tokenize the text");
        goto done;
    }
    struct imatrix_saver saver = {
        .collector = collector, .path = o.out_file, .save_every = o.save_every, .verbosity = o.verbosity,
    };
    const struct ppl_chunks_params cp = {
        .cmd = cmd, .n_chunks = o.text.n_chunks, .n_batch = p->n_batch, .add_bos = add_bos,
        .after_chunk = imatrix_after_chunk, .data = &saver,
    };
    status = ppl_run_chunks(ctx, tokens, n_tokens, &cp);
    if (status == 0 && !imatrix_save(&saver)) status = 1;
    llama_print_timings(ctx);

done:
    if (ctx) context_set_eval_callback(ctx, NULL, NULL);
    imatrix_collector_free(collector);
    free(tokens);
    free(text);
    llama_free(ctx);
    llama_free_model(model);
    return status;
}

/*
 * llamac make-model: write a random-weight LLaMA GGUF of a preset shape, for
 * benchmarks (see bench/README.md). `llamac quantize` converts it further.
 *
 *   llamac make-model --preset tinyllama|llama7b|mixtral|tiny|tiny-moe -o OUT.gguf
 *                     [--type f32|f16] [--seed N] [--layers N] [--vocab FILE]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "core/log.h"
#include "core/timer.h"
#include "model/model_random.h"

#ifndef LLAMAC_DEFAULT_SHARED
#define LLAMAC_DEFAULT_SHARED "../shared"
#endif

static void make_model_usage(void) {
    printf("usage: llamac make-model --preset NAME -o OUT.gguf [options]\n\n"
           "Writes a LLaMA model of the preset's shape with random weights, N(0, 0.02^2) (norms 1),\n"
           "and the vocabulary of a vocabulary-only GGUF, streaming it to disk.\n\n"
           "  --preset NAME     ");
    for (const char *const *n = model_random_preset_names(); *n; n++) printf("%s%s", n == model_random_preset_names() ? "" : ", ", *n);
    printf("\n"
           "                    tinyllama: n_embd 2048, 22 layers, 32 heads, 4 KV heads, n_ff 5632\n"
           "                    llama7b:   n_embd 4096, 32 layers, 32 heads, n_ff 11008\n"
           "                    mixtral:   n_embd 4096, 32 layers, 32 heads, 8 KV heads, n_ff 14336, 8 experts, top 2\n"
           "  -o, --output FILE the model to write\n"
           "  --type f32|f16    type of the matrices (default f16; norms are always f32)\n"
           "  --seed N          random seed (default 1)\n"
           "  --layers N        override the preset's number of layers\n"
           "  --vocab FILE      vocabulary GGUF (default $LLAMAC_SHARED/models/ggml-vocab-llama.gguf,\n"
           "                    else %s/models/ggml-vocab-llama.gguf)\n",
           LLAMAC_DEFAULT_SHARED);
}

/* errors are printed once, by cli_fail */
static void make_model_quiet_log(enum ggml_log_level level, const char *text, void *user_data) {
    (void)level, (void)text, (void)user_data;
}

int cmd_make_model(int argc, char **argv) {
    const char *cmd = "make-model";
    const char *preset = NULL, *out = NULL, *vocab = NULL;
    struct model_random_params p = { .type = GGML_TYPE_F16, .seed = 1 };
    long long layers = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        long long n;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            make_model_usage();
            return 0;
        } else if (!strcmp(a, "--preset") && v) {
            preset = argv[++i];
        } else if ((!strcmp(a, "-o") || !strcmp(a, "--output")) && v) {
            out = argv[++i];
        } else if (!strcmp(a, "--vocab") && v) {
            vocab = argv[++i];
        } else if (!strcmp(a, "--type") && v) {
            i++;
            if (!strcmp(v, "f16") || !strcmp(v, "F16")) p.type = GGML_TYPE_F16;
            else if (!strcmp(v, "f32") || !strcmp(v, "F32")) p.type = GGML_TYPE_F32;
            else return cli_fail(cmd, "--type expects f32 or f16, got '%s'", v);
        } else if (!strcmp(a, "--seed") && v) {
            if (!cli_parse_int(v, 0, INT64_MAX, &n)) return cli_fail(cmd, "--seed expects a non-negative integer, got '%s'", v);
            p.seed = (uint64_t)n;
            i++;
        } else if (!strcmp(a, "--layers") && v) {
            if (!cli_parse_int(v, 1, 512, &layers)) return cli_fail(cmd, "--layers expects 1..512, got '%s'", v);
            i++;
        } else {
            return cli_fail(cmd, "unknown or incomplete option '%s' (see llamac make-model --help)", a);
        }
    }
    if (!preset) return cli_fail(cmd, "no preset given (--preset NAME)");
    if (!out) return cli_fail(cmd, "no output file given (-o FILE)");
    if (!model_random_preset(preset, &p.shape)) return cli_fail(cmd, "%s", error_last());
    if (layers) p.shape.n_layer = (uint32_t)layers;

    char vocab_buf[4096];
    if (!vocab) {
        const char *shared = getenv("LLAMAC_SHARED");
        snprintf(vocab_buf, sizeof vocab_buf, "%s/models/ggml-vocab-llama.gguf",
                 shared && *shared ? shared : LLAMAC_DEFAULT_SHARED);
        vocab = vocab_buf;
    }
    p.vocab_path = vocab;
    log_set_callback(make_model_quiet_log, NULL);
    const int64_t t0 = time_us();
    if (!model_random_write(&p, out)) return cli_fail(cmd, "%s", error_last());
    fprintf(stderr, "llamac make-model: wrote %s (%s, %u layers) in %.1f s\n", out, preset, p.shape.n_layer,
            (double)(time_us() - t0) / 1e6);
    return 0;
}

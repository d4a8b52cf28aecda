/*
 * llamac quantize: b1892's `quantize` tool.
 *
 *   llamac quantize [options] IN [OUT] TYPE [NTHREADS]
 *
 * TYPE is a name from the table below (any case) or its file type number.
 * Without OUT the result goes next to IN as ggml-model-TYPE.gguf, as b1892
 * names it. Per-tensor progress and the size summary are printed on stderr.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "core/log.h"
#include "core/timer.h"
#include "llama.h"
#include "quantize/quantize.h"

struct quant_option {
    const char *name;
    enum llama_ftype ftype;
    const char *desc;
};

/* b1892's list, in its order; COPY must follow F32 so that 0 means F32. */
static const struct quant_option k_options[] = {
    { "Q4_0",    LLAMA_FTYPE_MOSTLY_Q4_0,    "4.5 bits per weight, 32-value blocks, one scale" },
    { "Q4_1",    LLAMA_FTYPE_MOSTLY_Q4_1,    "5.0 bpw, 32-value blocks, scale and minimum" },
    { "Q5_0",    LLAMA_FTYPE_MOSTLY_Q5_0,    "5.5 bpw, 32-value blocks, one scale" },
    { "Q5_1",    LLAMA_FTYPE_MOSTLY_Q5_1,    "6.0 bpw, 32-value blocks, scale and minimum" },
    { "IQ2_XXS", LLAMA_FTYPE_MOSTLY_IQ2_XXS, "2.06 bpw, needs an importance matrix" },
    { "IQ2_XS",  LLAMA_FTYPE_MOSTLY_IQ2_XS,  "2.31 bpw, needs an importance matrix" },
    { "Q2_K",    LLAMA_FTYPE_MOSTLY_Q2_K,    "k-quant mix around 2.6 bpw" },
    { "Q2_K_S",  LLAMA_FTYPE_MOSTLY_Q2_K_S,  "smaller Q2_K mix, needs an importance matrix" },
    { "Q3_K",    LLAMA_FTYPE_MOSTLY_Q3_K_M,  "alias for Q3_K_M" },
    { "Q3_K_S",  LLAMA_FTYPE_MOSTLY_Q3_K_S,  "k-quant mix, Q3_K throughout" },
    { "Q3_K_M",  LLAMA_FTYPE_MOSTLY_Q3_K_M,  "Q3_K with more bits for attn_v, attn_output, ffn_down" },
    { "Q3_K_L",  LLAMA_FTYPE_MOSTLY_Q3_K_L,  "Q3_K with Q5_K for attn_v, attn_output, ffn_down" },
    { "Q4_K",    LLAMA_FTYPE_MOSTLY_Q4_K_M,  "alias for Q4_K_M" },
    { "Q4_K_S",  LLAMA_FTYPE_MOSTLY_Q4_K_S,  "k-quant mix, mostly Q4_K" },
    { "Q4_K_M",  LLAMA_FTYPE_MOSTLY_Q4_K_M,  "Q4_K with Q6_K for some attn_v and ffn_down" },
    { "Q5_K",    LLAMA_FTYPE_MOSTLY_Q5_K_M,  "alias for Q5_K_M" },
    { "Q5_K_S",  LLAMA_FTYPE_MOSTLY_Q5_K_S,  "k-quant mix, Q5_K throughout" },
    { "Q5_K_M",  LLAMA_FTYPE_MOSTLY_Q5_K_M,  "Q5_K with Q6_K for some attn_v and ffn_down" },
    { "Q6_K",    LLAMA_FTYPE_MOSTLY_Q6_K,    "6.56 bpw k-quant" },
    { "Q8_0",    LLAMA_FTYPE_MOSTLY_Q8_0,    "8.5 bpw, 32-value blocks" },
    { "F16",     LLAMA_FTYPE_MOSTLY_F16,     "16-bit floats" },
    { "F32",     LLAMA_FTYPE_ALL_F32,        "32-bit floats" },
    { "COPY",    LLAMA_FTYPE_ALL_F32,        "only copy tensors, no quantizing" },
};
#define N_OPTIONS (sizeof k_options / sizeof k_options[0])

static void usage(void) {
    printf("usage: llamac quantize [--allow-requantize] [--leave-output-tensor] [--pure] [--imatrix FILE]\n"
           "                       [--include-weights NAME | --exclude-weights NAME] IN [OUT] TYPE [NTHREADS]\n\n"
           "  --allow-requantize     quantize tensors that are already quantized (loses quality)\n"
           "  --leave-output-tensor  keep output.weight as it is\n"
           "  --pure                 every 2-D weight in TYPE's base type, no k-quant mix\n"
           "  --imatrix FILE         importance matrix (b1892 imatrix format) for the quantizers\n"
           "  --include-weights NAME use the importance matrix only for tensors whose name contains NAME\n"
           "  --exclude-weights NAME do not use it for tensors whose name contains NAME\n"
           "(--include-weights and --exclude-weights may repeat but not be mixed)\n\n"
           "Without OUT the result is written next to IN as ggml-model-TYPE.gguf.\n\n"
           "Types:\n");
    for (size_t i = 0; i < N_OPTIONS; i++) {
        if (strcmp(k_options[i].name, "COPY") != 0) {
            printf("  %2d  or  ", (int)k_options[i].ftype);
        } else {
            printf("          ");
        }
        printf("%-7s : %s\n", k_options[i].name, k_options[i].desc);
    }
}

/* A type name (any case) or a file type number; NULL when neither. */
static const struct quant_option *parse_type(const char *s) {
    char upper[16];
    size_t n = strlen(s);
    if (n < sizeof upper) {
        for (size_t i = 0; i <= n; i++) upper[i] = (char)toupper((unsigned char)s[i]);
        for (size_t i = 0; i < N_OPTIONS; i++) {
            if (strcmp(k_options[i].name, upper) == 0) return &k_options[i];
        }
    }
    long long v;
    if (cli_parse_int(s, 0, 1 << 20, &v)) {
        for (size_t i = 0; i < N_OPTIONS; i++) {
            if ((long long)k_options[i].ftype == v) return &k_options[i];
        }
    }
    return NULL;
}

/* The library's log on stderr, INFO included: the per-tensor progress lines. */
static void log_to_stderr(enum ggml_log_level level, const char *text, void *user_data) {
    (void)level;
    (void)user_data;
    fputs(text, stderr);
}

struct quantize_args {
    llama_model_quantize_params params;
    const char *imatrix_file;
    const char **include, **exclude;
    size_t n_include, n_exclude;
    const char *in, *out;
    const struct quant_option *type;
    char *default_out;   /* owned when OUT was not given */
};

/* Returns 0 on success, 1 on a bad command line (already reported), 2 after --help. */
static int parse_args(int argc, char **argv, struct quantize_args *a) {
    memset(&a->params, 0, sizeof a->params);
    a->params.quantize_output_tensor = true;
    int i = 1;
    for (; i < argc && strncmp(argv[i], "--", 2) == 0; i++) {
        const char *opt = argv[i];
        const bool has_value = i + 1 < argc;
        if (strcmp(opt, "--help") == 0) {
            usage();
            return 2;
        } else if (strcmp(opt, "--allow-requantize") == 0) {
            a->params.allow_requantize = true;
        } else if (strcmp(opt, "--leave-output-tensor") == 0) {
            a->params.quantize_output_tensor = false;
        } else if (strcmp(opt, "--pure") == 0) {
            a->params.pure = true;
        } else if (strcmp(opt, "--imatrix") == 0 && has_value) {
            a->imatrix_file = argv[++i];
        } else if (strcmp(opt, "--include-weights") == 0 && has_value) {
            a->include[a->n_include++] = argv[++i];
        } else if (strcmp(opt, "--exclude-weights") == 0 && has_value) {
            a->exclude[a->n_exclude++] = argv[++i];
        } else {
            return cli_fail("quantize", "unknown or incomplete option '%s' (see llamac quantize --help)", opt);
        }
    }
    if (a->n_include && a->n_exclude) {
        return cli_fail("quantize", "--include-weights and --exclude-weights cannot be used together");
    }
    if (argc - i < 2) return cli_fail("quantize", "expected IN [OUT] TYPE [NTHREADS] (see llamac quantize --help)");
    a->in = argv[i++];
    a->type = parse_type(argv[i]);
    if (a->type) {
        /* no OUT: [directory of IN]/ggml-model-TYPE.gguf */
        const char *slash = strrchr(a->in, '/');
        const int dir_len = slash ? (int)(slash - a->in + 1) : 0;
        size_t size = (size_t)dir_len + strlen(a->type->name) + 32;
        if (!(a->default_out = malloc(size))) return cli_fail("quantize", "out of memory");
        snprintf(a->default_out, size, "%.*sggml-model-%s.gguf", dir_len, a->in, a->type->name);
        a->out = a->default_out;
        i++;
    } else {
        a->out = argv[i++];
        if (i >= argc) return cli_fail("quantize", "missing TYPE");
        if (!(a->type = parse_type(argv[i]))) {
            return cli_fail("quantize", "invalid type '%s' (see llamac quantize --help for the types)", argv[i]);
        }
        i++;
    }
    a->params.ftype = a->type->ftype;
    a->params.only_copy = strcmp(a->type->name, "COPY") == 0;
    if (i < argc) {
        long long n;
        if (!cli_parse_int(argv[i], 0, 4096, &n)) return cli_fail("quantize", "invalid thread count '%s'", argv[i]);
        a->params.nthread = (int32_t)n;
        i++;
    }
    if (i < argc) return cli_fail("quantize", "unexpected argument '%s'", argv[i]);
    return 0;
}

/* --imatrix with the include/exclude filters; NULL without a file or on error (*ok false). */
static struct quantize_imatrix *load_imatrix(const struct quantize_args *a, bool *ok) {
    *ok = true;
    if (!a->imatrix_file) return NULL;
    struct quantize_imatrix *im = quantize_imatrix_load(a->imatrix_file);
    if (!im) {
        *ok = false;
        return NULL;
    }
    for (size_t i = 0; i < a->n_exclude; i++) quantize_imatrix_exclude(im, a->exclude[i]);
    if (a->n_include) quantize_imatrix_keep_only(im, a->include, a->n_include);
    fprintf(stderr, "quantize: %zu importance matrix entries from %s\n", quantize_imatrix_count(im),
            a->imatrix_file);
    if (quantize_imatrix_count(im) == 0) {
        quantize_imatrix_free(im);
        return NULL;
    }
    return im;
}

int cmd_quantize(int argc, char **argv) {
    struct quantize_args a = { 0 };
    /* every option could be a filter: room for all of them */
    a.include = calloc((size_t)argc + 1, sizeof *a.include);
    a.exclude = calloc((size_t)argc + 1, sizeof *a.exclude);
    if (!a.include || !a.exclude) {
        free(a.include);
        free(a.exclude);
        return cli_fail("quantize", "out of memory");
    }
    int rc = parse_args(argc, argv, &a);
    struct quantize_imatrix *im = NULL;
    if (rc == 0) {
        bool ok;
        im = load_imatrix(&a, &ok);
        a.params.imatrix = im;
        const enum llama_ftype f = a.params.ftype;
        if (!ok) {
            rc = cli_fail("quantize", "%s", error_last());
        } else if (!im && (f == LLAMA_FTYPE_MOSTLY_IQ2_XXS || f == LLAMA_FTYPE_MOSTLY_IQ2_XS ||
                           f == LLAMA_FTYPE_MOSTLY_Q2_K_S)) {
            rc = cli_fail("quantize", "IQ2_XXS, IQ2_XS and Q2_K_S need an importance matrix (--imatrix FILE)");
        }
    }
    if (rc == 0) {
        fprintf(stderr, "quantize: quantizing '%s' to '%s' as %s", a.in, a.out, a.type->name);
        if (a.params.nthread > 0) fprintf(stderr, " using %d threads", (int)a.params.nthread);
        fprintf(stderr, "\n");
        log_set_callback(log_to_stderr, NULL);
        const int64_t t0 = time_us();
        const uint32_t failed = llama_model_quantize(a.in, a.out, &a.params);
        const int64_t t1 = time_us();
        log_set_callback(NULL, NULL);
        if (failed) {
            rc = cli_fail("quantize", "failed to quantize '%s': %s", a.in, error_last());
        } else {
            fprintf(stderr, "quantize: quantize time = %8.2f ms\n", (double)(t1 - t0) / 1000.0);
        }
    }
    quantize_imatrix_free(im);
    free(a.default_out);
    free(a.include);
    free(a.exclude);
    return rc == 2 ? 0 : rc;
}

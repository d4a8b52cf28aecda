#include "common.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "core/log.h"

void common_params_default(struct common_params *p) {
    memset(p, 0, sizeof *p);
    p->n_predict = 128;
    p->n_ctx = 512;
    p->n_batch = 512;
    p->n_threads = 0;       /* physical cores */
    p->n_threads_batch = 0; /* same as n_threads */
    p->seed = LLAMA_DEFAULT_SEED;
    p->use_mmap = true;
    p->type_k = p->type_v = GGML_TYPE_F16;
    p->lora_scale = 1.0f;
    struct sampling_params *s = &p->sampling;
    s->n_prev = 64;
    s->top_k = 40;
    s->top_p = 0.95f;
    s->min_p = 0.05f;
    s->tfs_z = 1.0f;
    s->typical_p = 1.0f;
    s->temp = 0.8f;
    s->penalty_last_n = 64;
    s->penalty_repeat = 1.1f;
    s->penalty_freq = 0.0f;
    s->penalty_present = 0.0f;
    s->mirostat = 0;
    s->mirostat_tau = 5.0f;
    s->mirostat_eta = 0.1f;
    s->penalize_nl = true;
    s->samplers = "kfypmt";
    s->cfg_scale = 1.0f;
}

static const char *option_value(const char *cmd, int argc, char **argv, int *i) {
    if (*i + 1 >= argc) {
        cli_fail(cmd, "option %s needs a value", argv[*i]);
        return NULL;
    }
    return argv[++*i];
}

static int parse_int_opt(const char *cmd, int argc, char **argv, int *i, long long lo, long long hi, int32_t *out) {
    const char *name = argv[*i];
    const char *v = option_value(cmd, argc, argv, i);
    long long x;
    if (!v) return -1;
    if (!cli_parse_int(v, lo, hi, &x)) {
        cli_fail(cmd, "%s expects an integer in %lld..%lld, got '%s'", name, lo, hi, v);
        return -1;
    }
    *out = (int32_t)x;
    return 1;
}

static int parse_float_opt(const char *cmd, int argc, char **argv, int *i, float *out) {
    const char *name = argv[*i];
    const char *v = option_value(cmd, argc, argv, i);
    double x;
    if (!v) return -1;
    if (!cli_parse_float(v, &x)) {
        cli_fail(cmd, "%s expects a number, got '%s'", name, v);
        return -1;
    }
    *out = (float)x;
    return 1;
}

static int parse_kv_type(const char *cmd, int argc, char **argv, int *i, enum ggml_type *out) {
    const char *name = argv[*i];
    const char *v = option_value(cmd, argc, argv, i);
    if (!v) return -1;
    if (strcmp(v, "f16") == 0) *out = GGML_TYPE_F16;
    else if (strcmp(v, "f32") == 0) *out = GGML_TYPE_F32;
    else {
        cli_fail(cmd, "%s expects f16 or f32, got '%s'", name, v);
        return -1;
    }
    return 1;
}

/* b1892's --logit-bias TOKEN(+|-)BIAS, e.g. 15043+1 or 2-inf; a token given again replaces its bias. */
static int parse_logit_bias(const char *cmd, int argc, char **argv, int *i, struct sampling_params *s) {
    const char *name = argv[*i];
    const char *v = option_value(cmd, argc, argv, i);
    if (!v) return -1;
    char *end;
    errno = 0;
    long token = strtol(v, &end, 10);
    double bias;
    if (errno || end == v || token < 0 || token > INT32_MAX || (*end != '+' && *end != '-') ||
        !cli_parse_float(end + 1, &bias)) {
        cli_fail(cmd, "%s expects TOKEN_ID+BIAS or TOKEN_ID-BIAS, got '%s'", name, v);
        return -1;
    }
    const float value = (float)(*end == '-' ? -bias : bias);
    for (int32_t k = 0; k < s->n_logit_bias; k++) {
        if (s->logit_bias[k].token == (llama_token)token) {
            s->logit_bias[k].bias = value;
            return 1;
        }
    }
    if (s->n_logit_bias == SAMPLING_MAX_LOGIT_BIAS) {
        cli_fail(cmd, "at most %d tokens can have a logit bias", SAMPLING_MAX_LOGIT_BIAS);
        return -1;
    }
    s->logit_bias[s->n_logit_bias++] = (struct logit_bias_entry){ (llama_token)token, value };
    return 1;
}

int common_parse_option(const char *cmd, int argc, char **argv, int *i, struct common_params *p) {
    const char *a = argv[*i];
    struct sampling_params *s = &p->sampling;
    if (!strcmp(a, "-m") || !strcmp(a, "--model")) return (p->model_path = option_value(cmd, argc, argv, i)) ? 1 : -1;
    if (!strcmp(a, "-p") || !strcmp(a, "--prompt")) return (p->prompt = option_value(cmd, argc, argv, i)) ? 1 : -1;
    if (!strcmp(a, "-n") || !strcmp(a, "--n-predict")) return parse_int_opt(cmd, argc, argv, i, -2, INT32_MAX, &p->n_predict);
    if (!strcmp(a, "-c") || !strcmp(a, "--ctx-size")) return parse_int_opt(cmd, argc, argv, i, 0, 1 << 22, &p->n_ctx);
    if (!strcmp(a, "-b") || !strcmp(a, "--batch-size")) return parse_int_opt(cmd, argc, argv, i, 1, 1 << 22, &p->n_batch);
    if (!strcmp(a, "-t") || !strcmp(a, "--threads")) return parse_int_opt(cmd, argc, argv, i, 1, 512, &p->n_threads);
    if (!strcmp(a, "-tb") || !strcmp(a, "--threads-batch")) return parse_int_opt(cmd, argc, argv, i, 1, 512, &p->n_threads_batch);
    if (!strcmp(a, "-s") || !strcmp(a, "--seed")) {
        int32_t seed = -1;
        int r = parse_int_opt(cmd, argc, argv, i, -1, UINT32_MAX >> 1, &seed);
        p->seed = seed < 0 ? LLAMA_DEFAULT_SEED : (uint32_t)seed;
        return r;
    }
    if (!strcmp(a, "--no-mmap")) { p->use_mmap = false; return 1; }
    if (!strcmp(a, "--mlock")) { p->use_mlock = true; return 1; }
    if (!strcmp(a, "--cache-type-k") || !strcmp(a, "-ctk")) return parse_kv_type(cmd, argc, argv, i, &p->type_k);
    if (!strcmp(a, "--cache-type-v") || !strcmp(a, "-ctv")) return parse_kv_type(cmd, argc, argv, i, &p->type_v);
    if (!strcmp(a, "--lora")) return (p->lora_path = option_value(cmd, argc, argv, i)) ? 1 : -1;
    if (!strcmp(a, "--lora-scaled")) {
        if (!(p->lora_path = option_value(cmd, argc, argv, i))) return -1;
        return parse_float_opt(cmd, argc, argv, i, &p->lora_scale);
    }
    if (!strcmp(a, "--lora-base")) return (p->lora_base_path = option_value(cmd, argc, argv, i)) ? 1 : -1;
    if (!strcmp(a, "--temp")) return parse_float_opt(cmd, argc, argv, i, &s->temp);
    if (!strcmp(a, "--top-k")) return parse_int_opt(cmd, argc, argv, i, INT32_MIN, INT32_MAX, &s->top_k);
    if (!strcmp(a, "--top-p")) return parse_float_opt(cmd, argc, argv, i, &s->top_p);
    if (!strcmp(a, "--min-p")) return parse_float_opt(cmd, argc, argv, i, &s->min_p);
    if (!strcmp(a, "--tfs")) return parse_float_opt(cmd, argc, argv, i, &s->tfs_z);
    if (!strcmp(a, "--typical")) return parse_float_opt(cmd, argc, argv, i, &s->typical_p);
    if (!strcmp(a, "--repeat-last-n")) return parse_int_opt(cmd, argc, argv, i, -1, INT32_MAX, &s->penalty_last_n);
    if (!strcmp(a, "--repeat-penalty")) return parse_float_opt(cmd, argc, argv, i, &s->penalty_repeat);
    if (!strcmp(a, "--frequency-penalty")) return parse_float_opt(cmd, argc, argv, i, &s->penalty_freq);
    if (!strcmp(a, "--presence-penalty")) return parse_float_opt(cmd, argc, argv, i, &s->penalty_present);
    if (!strcmp(a, "--mirostat")) return parse_int_opt(cmd, argc, argv, i, 0, 2, &s->mirostat);
    if (!strcmp(a, "--mirostat-lr")) return parse_float_opt(cmd, argc, argv, i, &s->mirostat_eta);
    if (!strcmp(a, "--mirostat-ent")) return parse_float_opt(cmd, argc, argv, i, &s->mirostat_tau);
    if (!strcmp(a, "--grammar")) return (s->grammar = option_value(cmd, argc, argv, i)) ? 1 : -1;
    if (!strcmp(a, "--cfg-negative-prompt")) return (s->cfg_negative_prompt = option_value(cmd, argc, argv, i)) ? 1 : -1;
    if (!strcmp(a, "--cfg-scale")) return parse_float_opt(cmd, argc, argv, i, &s->cfg_scale);
    if (!strcmp(a, "-l") || !strcmp(a, "--logit-bias")) return parse_logit_bias(cmd, argc, argv, i, s);
    return 0;
}

void common_print_options(void) {
    printf("model and context:\n"
           "  -m, --model FILE          GGUF model file\n"
           "  -c, --ctx-size N          context size (default 512, 0 = the model's)\n"
           "  -b, --batch-size N        tokens per decode call (default 512)\n"
           "  -t, --threads N           threads (default: physical cores)\n"
           "  -tb, --threads-batch N    threads for prompt batches (default: as -t)\n"
           "  -s, --seed N              random seed (default: from the clock)\n"
           "  -ctk, -ctv TYPE           KV cache types, f16 (default) or f32\n"
           "  --no-mmap, --mlock        read the model instead of mapping it; lock it in RAM\n"
           "  --lora FILE, --lora-scaled FILE S   apply a LoRA adapter (ggla), optionally scaled\n"
           "  --lora-base FILE          the higher-precision model the adapter is added to\n"
           "sampling (b1892 defaults):\n"
           "  --temp T (0.8, 0 = greedy) --top-k N (40) --top-p P (0.95) --min-p P (0.05)\n"
           "  --tfs Z (1.0) --typical P (1.0) --repeat-penalty R (1.1) --repeat-last-n N (64)\n"
           "  --frequency-penalty F (0) --presence-penalty P (0)\n"
           "  --mirostat 0|1|2 --mirostat-lr ETA (0.1) --mirostat-ent TAU (5.0)\n"
           "  --grammar GBNF            constrain the output to a GBNF grammar (rule 'root')\n"
           "  --cfg-negative-prompt TEXT, --cfg-scale S (1.0)   classifier-free guidance (S > 1)\n"
           "  -l, --logit-bias ID+B     add B to token ID's logit (ID-inf bans it)\n");
}

int common_fail(const char *cmd, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap); /* first, as an argument may be error_last() */
    va_end(ap);
    if (cmd) return cli_fail(cmd, "%s", msg);
    error_set("%s", msg);
    return 1;
}

static void log_sink_warnings(enum ggml_log_level level, const char *text, void *user_data) {
    (void)user_data;
    if (level == GGML_LOG_LEVEL_WARN) fputs(text, stderr);
}

void common_log_warnings_only(void) {
    log_set_callback(log_sink_warnings, NULL);
}

bool common_init(const char *cmd, const struct common_params *p, struct llama_model **model, struct llama_context **ctx) {
    if (!p->model_path) {
        cli_fail(cmd, "no model given (-m FILE)");
        return false;
    }
    struct llama_model_params mp = llama_model_default_params();
    mp.use_mmap = p->use_mmap;
    mp.use_mlock = p->use_mlock;
    *model = llama_load_model_from_file(p->model_path, mp);
    if (!*model) {
        cli_fail(cmd, "cannot load model '%s': %s", p->model_path, error_last());
        return false;
    }
    if (p->lora_path && llama_model_apply_lora_from_file(*model, p->lora_path, p->lora_scale, p->lora_base_path,
                                                         p->n_threads > 0 ? p->n_threads : 2) != 0) {
        cli_fail(cmd, "cannot apply the LoRA adapter '%s': %s", p->lora_path, error_last());
        llama_free_model(*model);
        *model = NULL;
        return false;
    }
    *ctx = common_context_new(cmd, p, *model);
    if (!*ctx) {
        llama_free_model(*model);
        *model = NULL;
        return false;
    }
    return true;
}

struct llama_context *common_context_new(const char *cmd, const struct common_params *p, struct llama_model *model) {
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = (uint32_t)p->n_ctx;
    cp.n_batch = (uint32_t)p->n_batch;
    cp.n_threads = (uint32_t)p->n_threads;
    cp.n_threads_batch = (uint32_t)(p->n_threads_batch ? p->n_threads_batch : p->n_threads);
    cp.seed = p->seed;
    cp.type_k = p->type_k;
    cp.type_v = p->type_v;
    cp.logits_all = p->logits_all;
    cp.embedding = p->embedding;
    struct llama_context *ctx = llama_new_context_with_model(model, cp);
    if (!ctx) cli_fail(cmd, "cannot create a context for '%s': %s", p->model_path, error_last());
    return ctx;
}

llama_token *common_tokenize(const struct llama_model *model, const char *text, bool add_bos, bool special, int32_t *n_out) {
    int32_t len = (int32_t)strlen(text);
    int32_t cap = len + 2;
    llama_token *tokens = malloc((size_t)cap * sizeof *tokens);
    if (!tokens) return NULL;
    int32_t n = llama_tokenize(model, text, len, tokens, cap, add_bos, special);
    if (n < 0) {
        cap = -n;
        llama_token *bigger = realloc(tokens, (size_t)cap * sizeof *tokens);
        if (!bigger) {
            free(tokens);
            return NULL;
        }
        tokens = bigger;
        n = llama_tokenize(model, text, len, tokens, cap, add_bos, special);
    }
    if (n < 0) {
        free(tokens);
        return NULL;
    }
    *n_out = n;
    return tokens;
}

char *common_read_file(const char *path) {
    FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    for (size_t got; buf && (got = fread(buf + n, 1, cap - n - 1, f)) > 0;) {
        n += got;
        if (n + 1 == cap) {
            char *grown = realloc(buf, cap * 2);
            if (!grown) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = grown;
            cap *= 2;
        }
    }
    if (buf && ferror(f)) {
        free(buf);
        buf = NULL;
    }
    if (f != stdin) fclose(f);
    if (buf) buf[n] = '\0';
    return buf;
}

bool common_should_add_bos(const struct llama_model *model) {
    const int32_t add_bos = llama_add_bos_token(model);
    return add_bos != -1 ? add_bos != 0 : llama_vocab_type(model) == LLAMA_VOCAB_TYPE_SPM;
}

char *common_read_prompt_file(const char *cmd, const char *path) {
    char *text = common_read_file(path);
    if (!text) {
        cli_fail(cmd, "cannot read prompt file '%s'", path);
        return NULL;
    }
    size_t len = strlen(text);
    if (len > 0 && text[len - 1] == '\n') text[len - 1] = '\0';
    return text;
}

size_t common_utf8_complete_len(const char *text, size_t n) {
    /* find the start of a trailing, possibly incomplete sequence */
    for (size_t back = 1; back <= 4 && back <= n; back++) {
        const unsigned char c = (unsigned char)text[n - back];
        if ((c & 0xC0) == 0x80) continue; /* continuation byte */
        const size_t need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
        return need > back ? n - back : n;
    }
    return n;
}

bool tokens_append(struct tokens *t, const llama_token *src, size_t n) {
    if (t->n + n > t->cap) {
        size_t cap = t->cap ? t->cap : 64;
        while (cap < t->n + n) cap *= 2;
        llama_token *grown = realloc(t->data, cap * sizeof *grown);
        if (!grown) return false;
        t->data = grown;
        t->cap = cap;
    }
    if (n) memcpy(t->data + t->n, src, n * sizeof *src);
    t->n += n;
    return true;
}

bool tokens_push(struct tokens *t, llama_token id) {
    return tokens_append(t, &id, 1);
}

bool tokens_tokenize(struct tokens *t, const struct llama_model *model, const char *text, bool add_bos, bool special) {
    int32_t n = 0;
    llama_token *toks = common_tokenize(model, text, add_bos, special, &n);
    bool ok = toks && tokens_append(t, toks, (size_t)n);
    free(toks);
    return ok;
}

/*
 * llamac run: generate text from a prompt, streaming it as it is produced.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "common.h"
#include "sampler.h"

static void run_usage(void) {
    printf("usage: llamac run -m MODEL -p PROMPT [options]\n\n"
           "Generates text after PROMPT and streams it to stdout; timings go to stderr.\n\n"
           "  -p, --prompt TEXT         the prompt\n"
           "  -f, --file FILE           read the prompt from FILE\n"
           "  -n, --n-predict N         tokens to generate (default 128, -1 = until end of text)\n"
           "  --keep N                  prompt tokens kept when the context fills up (default 0)\n"
           "  --ignore-eos              keep generating after the end-of-text token\n");
    common_print_options();
}

/* Prints the complete UTF-8 characters of buf and keeps an incomplete tail for later. */
static void emit_utf8(char *buf, size_t *len, bool flush) {
    size_t n = *len, complete = n;
    if (!flush) {
        /* find the start of a trailing, possibly incomplete sequence */
        for (size_t back = 1; back <= 4 && back <= n; back++) {
            unsigned char c = (unsigned char)buf[n - back];
            if ((c & 0xC0) == 0x80) continue; /* continuation byte */
            size_t need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
            if (need > back) complete = n - back;
            break;
        }
    }
    fwrite(buf, 1, complete, stdout);
    fflush(stdout);
    memmove(buf, buf + complete, n - complete);
    *len = n - complete;
}

#define RUN_OUT_BUF 64 /* pending output bytes: a few pieces */

/* Streams a token's text, holding back an incomplete UTF-8 character in out[RUN_OUT_BUF]. */
static void emit_piece(const struct llama_model *model, llama_token id, char *out, size_t *out_len) {
    char piece[256];
    int32_t len = llama_token_to_piece(model, id, piece, sizeof piece);
    if (len <= 0) return;
    if (*out_len + (size_t)len > RUN_OUT_BUF) emit_utf8(out, out_len, true);
    if ((size_t)len > RUN_OUT_BUF) {
        fwrite(piece, 1, (size_t)len, stdout);
        return;
    }
    memcpy(out + *out_len, piece, (size_t)len);
    *out_len += (size_t)len;
    emit_utf8(out, out_len, false);
}

static char *read_text_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    size_t n;
    while (buf && (n = fread(buf + len, 1, cap - len - 1, f)) > 0) {
        len += n;
        if (cap - len < 2) {
            char *bigger = realloc(buf, cap * 2);
            if (!bigger) { free(buf); buf = NULL; break; }
            buf = bigger;
            cap *= 2;
        }
    }
    fclose(f);
    if (buf) buf[len] = '\0';
    return buf;
}

int cmd_run(int argc, char **argv) {
    const char *cmd = "run";
    struct common_params p;
    common_params_default(&p);
    const char *prompt_file = NULL;
    int32_t n_keep = 0;
    bool ignore_eos = false;
    for (int i = 1; i < argc; i++) {
        int r = common_parse_option(cmd, argc, argv, &i, &p);
        if (r < 0) return 1;
        if (r > 0) continue;
        long long v;
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            run_usage();
            return 0;
        } else if ((!strcmp(argv[i], "-f") || !strcmp(argv[i], "--file")) && i + 1 < argc) {
            prompt_file = argv[++i];
        } else if (!strcmp(argv[i], "--keep") && i + 1 < argc && cli_parse_int(argv[i + 1], 0, INT32_MAX, &v)) {
            n_keep = (int32_t)v;
            i++;
        } else if (!strcmp(argv[i], "--ignore-eos")) {
            ignore_eos = true;
        } else {
            return cli_fail(cmd, "unknown or incomplete option '%s' (see llamac run --help)", argv[i]);
        }
    }
    char *file_prompt = NULL;
    if (prompt_file) {
        file_prompt = read_text_file(prompt_file);
        if (!file_prompt) return cli_fail(cmd, "cannot read prompt file '%s'", prompt_file);
        p.prompt = file_prompt;
    }
    if (!p.prompt) p.prompt = "";

    struct llama_model *model = NULL;
    struct llama_context *ctx = NULL;
    struct sampler *smp = NULL;
    llama_token *tokens = NULL;
    int status = 1;
    if (!common_init(cmd, &p, &model, &ctx)) goto done;
    smp = sampler_new(&p.sampling, model);
    if (!smp) goto done;

    const int32_t n_ctx = (int32_t)llama_n_ctx(ctx), n_batch = (int32_t)llama_n_batch(ctx);
    const bool add_bos = llama_add_bos_token(model) != 0 && llama_vocab_type(model) == LLAMA_VOCAB_TYPE_SPM;
    int32_t n_prompt = 0;
    tokens = common_tokenize(model, p.prompt, add_bos, true, &n_prompt);
    if (!tokens) {
        cli_fail(cmd, "cannot tokenize the prompt");
        goto done;
    }
    if (n_prompt > n_ctx - 4) {
        cli_fail(cmd, "prompt is too long (%d tokens, at most %d for context size %d)", n_prompt, n_ctx - 4, n_ctx);
        goto done;
    }
    if (n_keep > n_prompt) n_keep = n_prompt;

    /* echo the prompt as its tokens read back (as b1892's main does) */
    char out[RUN_OUT_BUF];
    size_t out_len = 0;
    for (int32_t i = 0; i < n_prompt; i++) emit_piece(model, tokens[i], out, &out_len);
    int64_t t0 = llama_time_us();
    for (int32_t i = 0; i < n_prompt; i += n_batch) {
        int32_t n = n_prompt - i < n_batch ? n_prompt - i : n_batch;
        if (llama_decode(ctx, llama_batch_get_one(tokens + i, n, i, 0)) != 0) {
            cli_fail(cmd, "failed to evaluate the prompt");
            goto done;
        }
    }
    for (int32_t i = 0; i < n_prompt; i++) sampler_accept(smp, ctx, tokens[i], false);
    int64_t t_prompt = llama_time_us() - t0;

    int32_t n_past = n_prompt, n_gen = 0;
    const llama_token eos = llama_token_eos(model);
    t0 = llama_time_us();
    while (p.n_predict < 0 || n_gen < p.n_predict) {
        llama_token id = sampler_sample(smp, ctx, NULL, 0);
        sampler_accept(smp, ctx, id, true);
        n_gen++;
        if (id == eos && !ignore_eos) break;
        emit_piece(model, id, out, &out_len);
        if (n_past + 1 > n_ctx) {
            /* context full: keep the first n_keep tokens (after BOS), drop half of the rest */
            int32_t keep = n_keep + (add_bos ? 1 : 0);
            int32_t n_discard = (n_past - keep) / 2;
            if (n_discard <= 0) break;
            llama_kv_cache_seq_rm(ctx, 0, keep, keep + n_discard);
            llama_kv_cache_seq_shift(ctx, 0, keep + n_discard, n_past, -n_discard);
            n_past -= n_discard;
        }
        if (llama_decode(ctx, llama_batch_get_one(&id, 1, n_past, 0)) != 0) {
            emit_utf8(out, &out_len, true);
            cli_fail(cmd, "failed to evaluate token %d", id);
            goto done;
        }
        n_past++;
    }
    emit_utf8(out, &out_len, true);
    putchar('\n');
    int64_t t_gen = llama_time_us() - t0;
    struct llama_timings t = llama_get_timings(ctx);
    fprintf(stderr, "\nload: %.1f ms | prompt: %d tokens, %.1f tokens/s | generation: %d tokens, %.1f tokens/s\n",
            t.t_load_ms, n_prompt, t_prompt > 0 ? 1e6 * n_prompt / t_prompt : 0.0, n_gen,
            t_gen > 0 ? 1e6 * n_gen / t_gen : 0.0);
    status = 0;

done:
    free(tokens);
    free(file_prompt);
    sampler_free(smp);
    llama_free(ctx);
    llama_free_model(model);
    return status;
}

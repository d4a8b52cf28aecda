/*
 * llamac embedding: b1892's examples/embedding. The prompt (with BOS) is
 * decoded in batches of n_batch by a context made with embedding = true, and
 * the embedding of its last token (the final norm's output, before the
 * output matrix) is printed as n_embd numbers, "%f " each, on one line.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "common.h"

static void embedding_usage(void) {
    printf("usage: llamac embedding -m MODEL -p TEXT [options]\n\n"
           "Prints the embedding of TEXT's last token.\n\n"
           "  -p, --prompt TEXT         the text\n"
           "  -f, --file FILE           read the text from FILE (one trailing newline is dropped)\n");
    common_print_options();
}

int cmd_embedding(int argc, char **argv) {
    const char *cmd = "embedding";
    struct common_params p;
    common_params_default(&p);
    const char *text_file = NULL;
    for (int i = 1; i < argc; i++) {
        int r = common_parse_option(cmd, argc, argv, &i, &p);
        if (r < 0) return 1;
        if (r > 0) continue;
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            embedding_usage();
            return 0;
        } else if ((!strcmp(argv[i], "-f") || !strcmp(argv[i], "--file")) && i + 1 < argc) {
            text_file = argv[++i];
        } else {
            return cli_fail(cmd, "unknown or incomplete option '%s' (see llamac embedding --help)", argv[i]);
        }
    }
    p.embedding = true;

    char *file_text = NULL;
    llama_token *tokens = NULL;
    struct llama_model *model = NULL;
    struct llama_context *ctx = NULL;
    int status = 1;
    if (text_file && !(file_text = common_read_prompt_file(cmd, text_file))) goto done;
    const char *text = file_text ? file_text : p.prompt ? p.prompt : "";
    if (!common_init(cmd, &p, &model, &ctx)) goto done;
    int32_t n_tokens = 0;
    tokens = common_tokenize(model, text, true, false, &n_tokens);
    if (!tokens) {
        cli_fail(cmd, "cannot tokenize the prompt");
        goto done;
    }
    const int32_t n_ctx = (int32_t)llama_n_ctx(ctx), n_batch = (int32_t)llama_n_batch(ctx);
    if (n_tokens > n_ctx) {
        cli_fail(cmd, "prompt is longer than the context window (%d tokens, n_ctx = %d)", n_tokens, n_ctx);
        goto done;
    }
    if (n_tokens == 0) {
        cli_fail(cmd, "the prompt has no tokens");
        goto done;
    }
    for (int32_t i = 0; i < n_tokens; i += n_batch) {
        const int32_t n = n_tokens - i < n_batch ? n_tokens - i : n_batch;
        if (llama_decode(ctx, llama_batch_get_one(tokens + i, n, i, 0)) != 0) {
            cli_fail(cmd, "failed to evaluate the prompt");
            goto done;
        }
    }
    const float *embd = llama_get_embeddings(ctx);
    for (int32_t i = 0; i < llama_n_embd(model); i++) printf("%f ", embd[i]);
    printf("\n");
    llama_print_timings(ctx);
    status = 0;

done:
    free(tokens);
    free(file_text);
    llama_free(ctx);
    llama_free_model(model);
    return status;
}

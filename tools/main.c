#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>

#include "cli.h"

int cmd_info(int argc, char **argv);
int cmd_grammar(int argc, char **argv);
int cmd_train(int argc, char **argv);
int cmd_train_tokenizer(int argc, char **argv);
int cmd_quantize(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_chat(int argc, char **argv);
int cmd_perplexity(int argc, char **argv);
int cmd_imatrix(int argc, char **argv);
int cmd_embedding(int argc, char **argv);
int cmd_make_model(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_server(int argc, char **argv);

/* One row per subcommand; the implementations live in tools/<name>.c. */
static const struct cli_command g_commands[] = {
    { "run", cmd_run, "generate text from a prompt" },
    { "chat", cmd_chat, "interactive chat on stdin (llamac run -i with a dialogue prompt)" },
    { "info", cmd_info, "print a GGUF file's metadata and tensor table" },
    { "grammar", cmd_grammar, "check a GBNF grammar and print its rules" },
    { "train", cmd_train, "train a LLaMA model from scratch on a text corpus (CPU)" },
    { "train-tokenizer", cmd_train_tokenizer, "learn a SentencePiece-style BPE vocabulary from text" },
    { "quantize", cmd_quantize, "convert a GGUF model to another file type (Q4_0 ... Q8_0, k-quants, IQ2, F16)" },
    { "perplexity", cmd_perplexity, "measure a model's perplexity on a text (or its HellaSwag score)" },
    { "imatrix", cmd_imatrix, "collect an importance matrix for quantization from a text" },
    { "server", cmd_server, "serve completions over HTTP (b1892's server: /completion, /tokenize, ...)" },
    { "embedding", cmd_embedding, "print the embedding of a prompt's last token" },
    { "make-model", cmd_make_model, "write a random-weight LLaMA GGUF of a preset shape (benchmark models)" },
    { "bench", cmd_bench, "measure prompt processing and generation speed (like llama-bench)" },
    { NULL, NULL, NULL }
};

int cli_fail(const char *command, const char *fmt, ...) {
    va_list ap;
    fprintf(stderr, "llamac %s: ", command);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    return 1;
}

bool cli_parse_int(const char *s, long long min, long long max, long long *out) {
    if (!s || !*s) return false;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || *end || v < min || v > max) return false;
    *out = v;
    return true;
}

bool cli_parse_float(const char *s, double *out) {
    if (!s || !*s) return false;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || *end) return false;
    *out = v;
    return true;
}

static void usage(FILE *f) {
    fprintf(f, "usage: llamac COMMAND [options]\n\ncommands:\n");
    for (const struct cli_command *c = g_commands; c->name; c++) {
        fprintf(f, "  %-16s %s\n", c->name, c->summary);
    }
    fprintf(f, "\n`llamac COMMAND --help` describes a command's options.\n");
}

/* Exit status 1 for a missing or unknown command, as for every command's errors. */
int main(int argc, char **argv) {
    if (argc < 2 || strcmp(argv[1], "help") == 0 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 1 : 0;
    }
    for (const struct cli_command *c = g_commands; c->name; c++) {
        if (strcmp(argv[1], c->name) == 0) return c->run(argc - 1, argv + 1);
    }
    fprintf(stderr, "llamac: unknown command '%s' (see llamac --help)\n", argv[1]);
    return 1;
}

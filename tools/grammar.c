/* `llamac grammar FILE`: checks a GBNF grammar the way generation would use it
 * (b1892's parser, every rule defined, a root rule, no left recursion) and
 * prints it as b1892's print_grammar does. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "core/log.h"
#include "sample/gbnf.h"
#include "sample/grammar.h"

/* Errors reach the user once, as the command's one-line failure. */
static void grammar_log_sink(enum ggml_log_level level, const char *text, void *user_data) {
    (void)user_data;
    if (level == GGML_LOG_LEVEL_WARN) fputs(text, stderr);
}

static char *read_all(const char *path) {
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
    if (f != stdin) fclose(f);
    if (buf) buf[n] = '\0';
    return buf;
}

int cmd_grammar(int argc, char **argv) {
    if (argc != 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        fprintf(argc == 2 ? stdout : stderr,
                "usage: llamac grammar FILE   (- for stdin)\n"
                "Parses a GBNF grammar as b1892 does and prints its rules (print_grammar);\n"
                "fails with the line and column of a syntax error, an undefined rule,\n"
                "a missing root rule or left recursion.\n");
        return argc == 2 ? 0 : 2;
    }
    log_set_callback(grammar_log_sink, NULL);
    char *text = read_all(argv[1]);
    if (!text) return cli_fail("grammar", "cannot read %s", argv[1]);
    struct gbnf_grammar g;
    if (!gbnf_parse(text, &g)) {
        free(text);
        return cli_fail("grammar", "%s: %s", argv[1], error_last());
    }
    int status = 0;
    const int32_t root = gbnf_symbol_id(&g, "root");
    if (!gbnf_check_defined(&g, text)) {
        status = cli_fail("grammar", "%s: %s", argv[1], error_last());
    } else if (root < 0) {
        status = cli_fail("grammar", "%s: no rule named 'root'", argv[1]);
    } else {
        struct llama_grammar *lg = grammar_create((const llama_grammar_element **)g.rules, g.n_rules, (size_t)root);
        char *printed = lg ? gbnf_print(&g) : NULL;
        unsigned rule;
        if (!lg && sscanf(error_last(), "grammar: rule %u is left-recursive", &rule) == 1 && rule < g.n_symbols) {
            status = cli_fail("grammar", "%s: rule '%s' is left-recursive (b1892 would recurse forever)", argv[1],
                              g.symbol_names[rule]);
        } else if (!printed) {
            status = cli_fail("grammar", "%s: %s", argv[1], error_last());
        } else {
            fputs(printed, stdout);
        }
        free(printed);
        grammar_free(lg);
    }
    gbnf_grammar_free(&g);
    free(text);
    return status;
}

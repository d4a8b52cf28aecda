/* `llamac grammar FILE`: checks a GBNF grammar the way generation would use it
 * (b1892's parser, every rule defined, a root rule, no left recursion) and
 * prints it as b1892's print_grammar does. common_grammar_load() is the same
 * check for the generating tools (--grammar). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "common.h"
#include "core/log.h"
#include "sample/gbnf.h"
#include "sample/grammar.h"

/* The library's grammar errors start with "grammar: "; NAME says that already. */
static const char *grammar_error(void) {
    const char *msg = error_last();
    return strncmp(msg, "grammar: ", 9) == 0 ? msg + 9 : msg;
}

struct llama_grammar *common_grammar_load(const char *cmd, const char *name, const char *text, char **printed) {
    struct gbnf_grammar g;
    if (!gbnf_parse(text, &g)) {
        common_fail(cmd, "%s: %s", name, grammar_error());
        return NULL;
    }
    struct llama_grammar *lg = NULL;
    const int32_t root = gbnf_symbol_id(&g, "root");
    if (!gbnf_check_defined(&g, text)) {
        common_fail(cmd, "%s: %s", name, grammar_error());
    } else if (root < 0) {
        common_fail(cmd, "%s: no rule named 'root'", name);
    } else {
        lg = grammar_create((const llama_grammar_element **)g.rules, g.n_rules, (size_t)root);
        unsigned rule;
        if (!lg && sscanf(error_last(), "grammar: rule %u is left-recursive", &rule) == 1 && rule < g.n_symbols) {
            common_fail(cmd, "%s: rule '%s' is left-recursive (b1892 would recurse forever)", name, g.symbol_names[rule]);
        } else if (!lg) {
            common_fail(cmd, "%s: %s", name, grammar_error());
        } else if (printed && !(*printed = gbnf_print(&g))) {
            common_fail(cmd, "%s: %s", name, grammar_error());
            grammar_free(lg);
            lg = NULL;
        }
    }
    gbnf_grammar_free(&g);
    return lg;
}

int cmd_grammar(int argc, char **argv) {
    if (argc == 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
        printf("usage: llamac grammar FILE   (- for stdin)\n"
               "Parses a GBNF grammar as b1892 does and prints its rules (print_grammar);\n"
               "fails with the line and column of a syntax error, an undefined rule,\n"
               "a missing root rule or left recursion.\n");
        return 0;
    }
    if (argc != 2) return cli_fail("grammar", "expected one file name (usage: llamac grammar FILE, - for stdin)");
    common_log_warnings_only();
    char *text = common_read_file(argv[1]);
    if (!text) return cli_fail("grammar", "cannot read %s", argv[1]);
    char *printed = NULL;
    struct llama_grammar *lg = common_grammar_load("grammar", argv[1], text, &printed);
    if (lg) fputs(printed, stdout);
    free(printed);
    grammar_free(lg);
    free(text);
    return lg ? 0 : 1;
}

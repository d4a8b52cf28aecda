/* sample/gbnf: the GBNF parser against b1892's test-grammar-parser vectors
 * (../shared/spec/reference-tests.md §3) and every grammar of
 * golden/grammar-stories260K.json (symbol ids, rule arrays, print_grammar
 * text, rejected grammars), error positions, and a mutation fuzz. */
#include "test_util.h"

#include <cjson/cJSON.h>

#include "core/log.h"
#include "sample/gbnf.h"

enum { END = 0, ALT = 1, REF = 2, CHR = 3, NOT = 4, RNG = 5, CALT = 6 };

struct want_rule {
    int n;
    int elems[24][2];
};

static void check_rule(const struct gbnf_grammar *g, uint32_t id, const struct want_rule *w, const char *what) {
    CHECK_MSG(id < g->n_rules && g->rules[id], "%s: rule %u missing", what, id);
    if (id >= g->n_rules || !g->rules[id]) {
        return;
    }
    CHECK_MSG(g->rule_lengths[id] == (size_t)w->n, "%s: rule %u has %zu elements, want %d", what, id,
              g->rule_lengths[id], w->n);
    for (int i = 0; i < w->n && (size_t)i < g->rule_lengths[id]; i++) {
        CHECK_MSG((int)g->rules[id][i].type == w->elems[i][0] && (int)g->rules[id][i].value == w->elems[i][1],
                  "%s: rule %u element %d is (%d, %u), want (%d, %d)", what, id, i, (int)g->rules[id][i].type,
                  g->rules[id][i].value, w->elems[i][0], w->elems[i][1]);
    }
}

static void check_symbols(const struct gbnf_grammar *g, const char *const *names, size_t n, const char *what) {
    CHECK_MSG(g->n_symbols == n, "%s: %zu symbols, want %zu", what, g->n_symbols, n);
    for (size_t i = 0; i < n && i < g->n_symbols; i++) {
        CHECK_MSG(strcmp(g->symbol_names[i], names[i]) == 0, "%s: symbol %zu is '%s', want '%s'", what, i,
                  g->symbol_names[i], names[i]);
    }
}

static void test_upstream_grammar_1(void) {
    const char *text = "root  ::= (expr \"=\" term \"\\n\")+\n"
                       "expr  ::= term ([-+*/] term)*\n"
                       "term  ::= [0-9]+\n";
    struct gbnf_grammar g;
    CHECK(gbnf_parse(text, &g));
    const char *names[] = {"root", "root_1", "expr", "term", "root_4", "expr_5", "expr_6", "term_7"};
    check_symbols(&g, names, 8, "grammar 1");
    const struct want_rule rules[] = {
        {2, {{REF, 4}, {END, 0}}},
        {5, {{REF, 2}, {CHR, 61}, {REF, 3}, {CHR, 10}, {END, 0}}},
        {3, {{REF, 3}, {REF, 6}, {END, 0}}},
        {2, {{REF, 7}, {END, 0}}},
        {5, {{REF, 1}, {REF, 4}, {ALT, 0}, {REF, 1}, {END, 0}}},
        {6, {{CHR, 45}, {CALT, 43}, {CALT, 42}, {CALT, 47}, {REF, 3}, {END, 0}}},
        {4, {{REF, 5}, {REF, 6}, {ALT, 0}, {END, 0}}},
        {7, {{CHR, 48}, {RNG, 57}, {REF, 7}, {ALT, 0}, {CHR, 48}, {RNG, 57}, {END, 0}}},
    };
    CHECK_EQ_INT(g.n_rules, 8);
    for (uint32_t i = 0; i < 8; i++) {
        check_rule(&g, i, &rules[i], "grammar 1");
    }
    gbnf_grammar_free(&g);
}

static void test_upstream_grammar_2(void) {
    const char *text = "root  ::= (expr \"=\" ws term \"\\n\")+\n"
                       "expr  ::= term ([-+*/] term)*\n"
                       "term  ::= ident | num | \"(\" ws expr \")\" ws\n"
                       "ident ::= [a-z] [a-z0-9_]* ws\n"
                       "num   ::= [0-9]+ ws\n"
                       "ws    ::= [ \\t\\n]*\n";
    struct gbnf_grammar g;
    CHECK(gbnf_parse(text, &g));
    const char *names[] = {"root", "root_1", "expr", "ws", "term", "root_5", "expr_6",
                           "expr_7", "ident", "num", "ident_10", "num_11", "ws_12"};
    check_symbols(&g, names, 13, "grammar 2");
    const struct want_rule rules[] = {
        {2, {{REF, 5}, {END, 0}}},
        {6, {{REF, 2}, {CHR, 61}, {REF, 3}, {REF, 4}, {CHR, 10}, {END, 0}}},
        {3, {{REF, 4}, {REF, 7}, {END, 0}}},
        {2, {{REF, 12}, {END, 0}}},
        {10, {{REF, 8}, {ALT, 0}, {REF, 9}, {ALT, 0}, {CHR, 40}, {REF, 3}, {REF, 2}, {CHR, 41}, {REF, 3}, {END, 0}}},
        {5, {{REF, 1}, {REF, 5}, {ALT, 0}, {REF, 1}, {END, 0}}},
        {6, {{CHR, 45}, {CALT, 43}, {CALT, 42}, {CALT, 47}, {REF, 4}, {END, 0}}},
        {4, {{REF, 6}, {REF, 7}, {ALT, 0}, {END, 0}}},
        {5, {{CHR, 97}, {RNG, 122}, {REF, 10}, {REF, 3}, {END, 0}}},
        {3, {{REF, 11}, {REF, 3}, {END, 0}}},
        {8, {{CHR, 97}, {RNG, 122}, {CALT, 48}, {RNG, 57}, {CALT, 95}, {REF, 10}, {ALT, 0}, {END, 0}}},
        {7, {{CHR, 48}, {RNG, 57}, {REF, 11}, {ALT, 0}, {CHR, 48}, {RNG, 57}, {END, 0}}},
        {6, {{CHR, 32}, {CALT, 9}, {CALT, 10}, {REF, 12}, {ALT, 0}, {END, 0}}},
    };
    CHECK_EQ_INT(g.n_rules, 13);
    for (uint32_t i = 0; i < 13; i++) {
        check_rule(&g, i, &rules[i], "grammar 2");
    }
    gbnf_grammar_free(&g);
}

/* ---- golden/grammar-stories260K.json ---- */

static void test_golden(void) {
    cJSON *root = golden_load("golden/grammar-stories260K.json");
    int n_ok = 0, n_err = 0, n_printed = 0;
    const cJSON *gr;
    cJSON_ArrayForEach(gr, cJSON_GetObjectItemCaseSensitive(root, "grammars")) {
        const char *name = cJSON_GetObjectItemCaseSensitive(gr, "name")->valuestring;
        const char *text = cJSON_GetObjectItemCaseSensitive(gr, "text")->valuestring;
        const bool want_ok = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(gr, "parse_ok"));
        struct gbnf_grammar g;
        error_clear();
        const bool ok = gbnf_parse(text, &g);
        CHECK_MSG(ok == want_ok, "%s: parse %s, golden %s", name, ok ? "ok" : "failed", want_ok ? "ok" : "failed");
        if (!ok) {
            /* rejected with a position, and nothing left behind */
            CHECK_MSG(strstr(error_last(), "line ") && strstr(error_last(), "column "), "%s: '%s'", name,
                      error_last());
            CHECK(g.n_symbols == 0 && g.n_rules == 0 && g.rules == NULL);
            n_err++;
            continue;
        }
        const cJSON *ids = cJSON_GetObjectItemCaseSensitive(gr, "symbol_ids");
        CHECK_MSG(g.n_symbols == (size_t)cJSON_GetArraySize(ids), "%s: %zu symbols, golden %d", name, g.n_symbols,
                  cJSON_GetArraySize(ids));
        const cJSON *id;
        cJSON_ArrayForEach(id, ids) {
            CHECK_MSG(gbnf_symbol_id(&g, id->string) == id->valueint, "%s: symbol %s is %d, golden %d", name,
                      id->string, gbnf_symbol_id(&g, id->string), id->valueint);
        }
        const cJSON *rules = cJSON_GetObjectItemCaseSensitive(gr, "rules");
        CHECK_MSG(g.n_rules == (size_t)cJSON_GetArraySize(rules), "%s: %zu rules, golden %d", name, g.n_rules,
                  cJSON_GetArraySize(rules));
        int rid = 0;
        const cJSON *rule;
        cJSON_ArrayForEach(rule, rules) {
            struct want_rule w = {0};
            const cJSON *el;
            cJSON_ArrayForEach(el, rule) {
                if (w.n < 24) {
                    w.elems[w.n][0] = cJSON_GetArrayItem(el, 0)->valueint;
                    w.elems[w.n][1] = cJSON_GetArrayItem(el, 1)->valueint;
                }
                w.n++;
            }
            if (w.n <= 24) {
                check_rule(&g, (uint32_t)rid, &w, name);
            } else { /* long rules: compare directly */
                CHECK(g.rule_lengths[rid] == (size_t)w.n);
                int i = 0;
                cJSON_ArrayForEach(el, rule) {
                    CHECK((int)g.rules[rid][i].type == cJSON_GetArrayItem(el, 0)->valueint &&
                          (int)g.rules[rid][i].value == cJSON_GetArrayItem(el, 1)->valueint);
                    i++;
                }
            }
            rid++;
        }
        const cJSON *printed = cJSON_GetObjectItemCaseSensitive(gr, "print_grammar");
        if (cJSON_IsString(printed)) {
            char *ours = gbnf_print(&g);
            CHECK_MSG(ours && strcmp(ours, printed->valuestring) == 0, "%s: print_grammar\n%s\ngolden\n%s", name,
                      ours ? ours : "(null)", printed->valuestring);
            free(ours);
            n_printed++;
        }
        /* every referenced rule is defined, except in the grammar that is about that */
        const bool defined = gbnf_check_defined(&g, text);
        CHECK_MSG(defined == (strcmp(name, "p_undefined_rule") != 0), "%s: check_defined %d", name, defined);
        if (!defined) {
            CHECK_MSG(strstr(error_last(), "'undefined-rule'") && strstr(error_last(), "line 1, column 12"), "%s",
                      error_last());
        }
        gbnf_grammar_free(&g);
        n_ok++;
    }
    CHECK_EQ_INT(n_ok, 9);
    CHECK_EQ_INT(n_err, 8);
    CHECK_EQ_INT(n_printed, 8);
    cJSON_Delete(root);
}

/* ---- errors: where they are reported ---- */

static void expect_error(const char *text, const char *where, const char *what) {
    struct gbnf_grammar g;
    error_clear();
    CHECK_MSG(!gbnf_parse(text, &g), "parsed: %s", text);
    CHECK_MSG(strstr(error_last(), where) && strstr(error_last(), what), "'%s' for %s (want %s, %s)", error_last(),
              text, where, what);
}

static void test_errors(void) {
    expect_error("root \"a\"\n", "line 1, column 6", "expecting '::='");
    expect_error("my_rule ::= \"a\"\nroot ::= my_rule\n", "line 1, column 3", "expecting '::='");
    expect_error("a ::= \"a\" |\nroot ::= a\n", "line 2, column 6", "expecting newline or end");
    expect_error("root ::= ( x | y )* z\nx ::= \"x\"\n  | \"xx\"\n", "line 3, column 3", "expecting name");
    expect_error("root ::= \"\\q\"\n", "line 1, column 11", "unknown escape");
    expect_error("root ::= * \"a\"\n", "line 1, column 10", "expecting preceding item");
    expect_error("root ::= \"abc\n", "line 2, column 1", "unexpected end of input");
    expect_error("root ::= ( \"a\" | \"b\"\n", "line 2, column 1", "expecting ')'");
    expect_error("root ::= [a-", "line 1, column 13", "unexpected end of input");
    expect_error("root ::= \"\\x4\"", "line 1, column 13", "expecting 2 hex chars");
    expect_error("root ::= \"\\u12G4\"", "line 1, column 13", "expecting 4 hex chars");
    expect_error("# c\r\nroot ::= \"a\"\r\n  b ::= \"x\" ]\r\n", "line 3, column 13", "expecting newline or end");
    expect_error("::= \"a\"", "line 1, column 1", "expecting name");

    /* groups nest up to the limit, beyond it an error instead of a stack overflow */
    size_t depth = GBNF_MAX_NESTING + 5;
    char *deep = malloc(2 * depth + 32);
    strcpy(deep, "root ::= ");
    size_t n = strlen(deep);
    for (size_t i = 0; i < depth; i++) deep[n++] = '(';
    deep[n++] = '"';
    deep[n++] = 'a';
    deep[n++] = '"';
    for (size_t i = 0; i < depth; i++) deep[n++] = ')';
    deep[n] = '\0';
    struct gbnf_grammar g;
    CHECK(!gbnf_parse(deep, &g));
    CHECK(strstr(error_last(), "nested") != NULL);
    /* 200 levels parse fine */
    char *shallow = deep + (depth - 200);
    memcpy(shallow, "root ::= ", 9);
    shallow[9 + 200 + 3 + 200] = '\0';
    memmove(shallow + 9 + 200 + 3, deep + n - depth, 200);
    shallow[9 + 200 + 3 + 200] = '\0';
    CHECK(gbnf_parse(shallow, &g));
    CHECK_EQ_INT(g.n_symbols, 201);
    gbnf_grammar_free(&g);
    free(deep);

    /* an empty text is an empty grammar; long names work */
    CHECK(gbnf_parse("  # nothing\n\n", &g));
    CHECK(g.n_symbols == 0 && g.n_rules == 0);
    char *printed = gbnf_print(&g);
    CHECK(printed && printed[0] == '\0');
    free(printed);
    gbnf_grammar_free(&g);
    char longname[3000];
    memset(longname, 'x', 2000);
    strcpy(longname + 2000, " ::= \"a\"*\n");
    CHECK(gbnf_parse(longname, &g));
    CHECK_EQ_INT(g.n_symbols, 2);
    CHECK(strlen(g.symbol_names[1]) == 2002 && strcmp(g.symbol_names[1] + 2000, "_1") == 0);
    gbnf_grammar_free(&g);

    /* a rule defined twice keeps the last definition (b1892's add_rule) */
    CHECK(gbnf_parse("root ::= \"a\"\nroot ::= \"b\"\n", &g));
    CHECK(g.n_rules == 1 && g.rule_lengths[0] == 2 && g.rules[0][0].value == 'b');
    gbnf_grammar_free(&g);

    /* an undefined rule below the largest defined id leaves a hole, which print refuses */
    CHECK(gbnf_parse("root ::= x y\ny ::= \"a\"\n", &g));
    CHECK(g.n_rules == 3 && g.rules[1] == NULL && g.rules[2] != NULL);
    CHECK(gbnf_print(&g) == NULL);
    CHECK(!gbnf_check_defined(&g, "root ::= x y\ny ::= \"a\"\n"));
    CHECK(strstr(error_last(), "'x'") != NULL);
    gbnf_grammar_free(&g);
}

/* ---- mutation fuzz: never crash, and whatever parses is well formed ---- */

static void check_well_formed(const struct gbnf_grammar *g) {
    for (size_t r = 0; r < g->n_rules; r++) {
        if (!g->rules[r]) {
            continue;
        }
        const size_t len = g->rule_lengths[r];
        CHECK(len >= 1 && g->rules[r][len - 1].type == LLAMA_GRETYPE_END);
        for (size_t i = 0; i + 1 < len; i++) {
            const llama_grammar_element e = g->rules[r][i];
            CHECK(e.type != LLAMA_GRETYPE_END);
            if (e.type == LLAMA_GRETYPE_RULE_REF) {
                CHECK(e.value < g->n_symbols);
            }
        }
    }
}

static void log_quiet(enum ggml_log_level level, const char *text, void *user) {
    (void)level, (void)text, (void)user;
}

static void test_fuzz(void) {
    log_set_callback(log_quiet, NULL);
    static const char *seeds[] = {
        "root ::= (expr \"=\" ws term \"\\n\")+\nexpr ::= term ([-+*/] term)*\nterm ::= ident | num | \"(\" ws expr \")\" ws\n"
        "ident ::= [a-z] [a-z0-9_]* ws\nnum ::= [0-9]+ ws\nws ::= [ \\t\\n]*\n",
        "# c\r\nroot ::= \"a\\x41\\u00e9\\U0001F600\\\\\\\"\" ( b | ( c d )? )+  # t\r\nb ::= [\\]a-] [^\\[\\]]\r\n",
        "root ::= ( x |\n    y\n  )* z\nx ::= \"x\" | \"xx\"\ny ::= ( \"y\" | )\nz ::= x? y+\n",
    };
    static const char alphabet[] = "()[]|*+?\"\\#-^:= \n\r\tabxyzu0123456789_\xc3\xa9\xff";
    uint64_t rs = 2024;
    char buf[512];
    int parsed = 0, rejected = 0;
    for (int iter = 0; iter < 20000; iter++) {
        const char *seed = seeds[iter % 3];
        size_t n = strlen(seed);
        memcpy(buf, seed, n + 1);
        int edits = 1 + (int)(test_rand_u64(&rs) % 4);
        for (int e = 0; e < edits && n > 0; e++) {
            size_t at = test_rand_u64(&rs) % n;
            char c = alphabet[test_rand_u64(&rs) % (sizeof alphabet - 1)];
            switch (test_rand_u64(&rs) % 3) {
            case 0: buf[at] = c; break;                                          /* replace */
            case 1: memmove(buf + at, buf + at + 1, n - at); n--; break;         /* delete */
            default:                                                             /* insert */
                if (n + 2 < sizeof buf) {
                    memmove(buf + at + 1, buf + at, n - at + 1);
                    buf[at] = c;
                    n++;
                }
            }
        }
        struct gbnf_grammar g;
        if (gbnf_parse(buf, &g)) {
            check_well_formed(&g);
            free(gbnf_print(&g));
            gbnf_grammar_free(&g);
            parsed++;
        } else {
            rejected++;
        }
    }
    log_set_callback(NULL, NULL);
    CHECK(parsed > 1000 && rejected > 1000);
    printf("fuzz: %d mutated grammars parsed, %d rejected\n", parsed, rejected);
}

int main(void) {
    test_upstream_grammar_1();
    test_upstream_grammar_2();
    test_golden();
    test_errors();
    test_fuzz();
    return test_finish("test_gbnf");
}

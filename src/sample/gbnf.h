/*
 * GBNF grammar text -> llama_grammar_element rules, exactly as b1892's
 * common/grammar-parser.cpp produces them (same symbol ids, same generated
 * rules, same element arrays), plus its print_grammar text.
 *
 *   struct gbnf_grammar g;
 *   if (!gbnf_parse(text, &g)) { puts(error_last()); ... }   // "line 3, column 7: expecting '::='"
 *   int32_t root = gbnf_symbol_id(&g, "root");
 *   struct llama_grammar *lg = llama_grammar_init((const llama_grammar_element **)g.rules, g.n_rules, root);
 *   gbnf_grammar_free(&g);
 *
 * The syntax and its b1892 quirks, all kept:
 *  - rule:  name ::= alternatives, ended by a newline or the end of the text;
 *    names are [a-zA-Z0-9-]+ ('_' is not a name character);
 *  - a sequence is made of "literals", [character classes] ([^...] negated,
 *    a-z ranges), rule names and ( groups ), each optionally followed by *, +
 *    or ?; escapes \x.. \u.... \U........ \t \r \n \\ \" \[ \];
 *  - # starts a comment up to the end of the line;
 *  - inside ( ) newlines are free; at the top level an alternative cannot
 *    continue on the next line, but a '|' at the end of a line continues on
 *    the next one (so "a ::= x |\nb ::= y" is an error);
 *  - x* becomes R ::= x R | (empty), x+ becomes R ::= x R | x, x? becomes
 *    R ::= x | (empty); a group becomes its own rule; generated rules are named
 *    <rule>_<id>; ids are given in order of first appearance;
 *  - defining a rule twice keeps the last definition;
 *  - references to undefined rules are not errors for the parser (b1892 does
 *    not detect them); gbnf_check_defined() reports them, and
 *    llama_grammar_init() refuses rule arrays that miss them.
 * Invalid UTF-8 in the text is decoded the way b1892 decodes it (no
 * validation). Nesting of groups is limited to GBNF_MAX_NESTING levels (b1892
 * recurses without a limit); the text must be NUL-terminated.
 */
#ifndef LLAMAC_SAMPLE_GBNF_H
#define LLAMAC_SAMPLE_GBNF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "llama.h"

#define GBNF_MAX_NESTING 1000

struct gbnf_grammar {
    size_t n_symbols;
    char **symbol_names;       /* [n_symbols]: the name of each symbol id */
    size_t *symbol_first_use;  /* [n_symbols]: byte offset of the symbol's first appearance in the text */
    size_t n_rules;            /* 1 + the largest id with a rule (b1892's rules.size()) */
    llama_grammar_element **rules; /* [n_rules]: each ends with END; NULL for an id without a rule */
    size_t *rule_lengths;      /* [n_rules]: elements including the END, 0 where rules[i] is NULL */
};

/* Parses NUL-terminated text into *out. On a syntax error returns false,
 * leaves *out empty (all zero; b1892 returns an empty parse_state) and
 * error_set()s "line L, column C: <what was expected>" (1-based, the column
 * in bytes). */
bool gbnf_parse(const char *text, struct gbnf_grammar *out);

void gbnf_grammar_free(struct gbnf_grammar *g);

/* The id of the named symbol, or -1. */
int32_t gbnf_symbol_id(const struct gbnf_grammar *g, const char *name);

/* True when every symbol that is referenced has a rule; otherwise false with
 * error_set() naming the first undefined symbol and where it is used (text is
 * the text that was parsed, for the line and column). */
bool gbnf_check_defined(const struct gbnf_grammar *g, const char *text);

/* b1892's print_grammar output ("name ::= [a] ref | [^x-z] \n" per rule) as
 * a malloc'ed string. NULL with error_set() where b1892 would stop with
 * "error printing grammar" (an id below n_rules without a rule). */
char *gbnf_print(const struct gbnf_grammar *g);

/* 1-based line and byte column of offset in text ("\n", "\r\n" and "\r" end lines). */
void gbnf_text_position(const char *text, size_t offset, int *line, int *column);

#endif

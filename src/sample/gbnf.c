#include "sample/gbnf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"

/* ---- growable arrays ---- */

struct elem_vec {
    llama_grammar_element *v;
    size_t n, cap;
};

struct parser {
    const char *text;
    struct gbnf_grammar *g;
    size_t rules_cap, symbols_cap;
    /* symbol name -> id, open addressing over ids+1 (0 = empty) */
    uint32_t *table;
    size_t table_cap;
    bool failed;
    int depth;
};

/* Records the first error (with its position) and marks the parse failed. */
static const char *parse_fail(struct parser *ps, const char *pos, const char *fmt, ...) LC_PRINTF(3, 4);
static const char *parse_fail(struct parser *ps, const char *pos, const char *fmt, ...) {
    if (!ps->failed) {
        char what[256];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(what, sizeof what, fmt, ap);
        va_end(ap);
        int line, column;
        gbnf_text_position(ps->text, (size_t)(pos - ps->text), &line, &column);
        error_set("grammar: line %d, column %d: %s", line, column, what);
        ps->failed = true;
    }
    return NULL;
}

static bool grow(struct parser *ps, void **ptr, size_t *cap, size_t need, size_t elem_size) {
    if (need <= *cap) {
        return true;
    }
    size_t new_cap = *cap ? *cap * 2 : 16;
    while (new_cap < need) {
        new_cap *= 2;
    }
    void *p = realloc(*ptr, new_cap * elem_size);
    if (!p) {
        parse_fail(ps, ps->text, "out of memory");
        return false;
    }
    *ptr = p;
    *cap = new_cap;
    return true;
}

static bool vec_push(struct parser *ps, struct elem_vec *v, enum llama_gretype type, uint32_t value) {
    if (!grow(ps, (void **)&v->v, &v->cap, v->n + 1, sizeof *v->v)) {
        return false;
    }
    v->v[v->n].type = type;
    v->v[v->n].value = value;
    v->n++;
    return true;
}

static bool vec_append(struct parser *ps, struct elem_vec *v, const llama_grammar_element *src, size_t n) {
    if (!grow(ps, (void **)&v->v, &v->cap, v->n + n, sizeof *v->v)) {
        return false;
    }
    memcpy(v->v + v->n, src, n * sizeof *src);
    v->n += n;
    return true;
}

/* ---- symbols ---- */

static uint64_t name_hash(const char *s, size_t len) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < len; i++) {
        h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
    }
    return h;
}

/* Slot of the name in the table: holds its id+1, or 0 where it would go. */
static size_t symbol_slot(const struct parser *ps, const char *name, size_t len) {
    size_t mask = ps->table_cap - 1;
    size_t i = (size_t)name_hash(name, len) & mask;
    while (ps->table[i] != 0) {
        const char *s = ps->g->symbol_names[ps->table[i] - 1];
        if (strncmp(s, name, len) == 0 && s[len] == '\0') {
            break;
        }
        i = (i + 1) & mask;
    }
    return i;
}

static bool table_rehash(struct parser *ps) {
    size_t cap = ps->table_cap ? ps->table_cap * 2 : 64;
    uint32_t *t = calloc(cap, sizeof *t);
    if (!t) {
        parse_fail(ps, ps->text, "out of memory");
        return false;
    }
    free(ps->table);
    ps->table = t;
    ps->table_cap = cap;
    for (size_t id = 0; id < ps->g->n_symbols; id++) {
        const char *s = ps->g->symbol_names[id];
        ps->table[symbol_slot(ps, s, strlen(s))] = (uint32_t)id + 1;
    }
    return true;
}

/* Adds a new symbol with the next id; -1 on allocation failure. */
static int64_t symbol_add(struct parser *ps, const char *name, size_t len, size_t first_use) {
    struct gbnf_grammar *g = ps->g;
    if ((g->n_symbols + 1) * 2 > ps->table_cap && !table_rehash(ps)) {
        return -1;
    }
    if (g->n_symbols >= ps->symbols_cap) {
        size_t cap = ps->symbols_cap ? ps->symbols_cap * 2 : 16;
        char **names = realloc(g->symbol_names, cap * sizeof *names);
        if (names) {
            g->symbol_names = names;
        }
        size_t *uses = names ? realloc(g->symbol_first_use, cap * sizeof *uses) : NULL;
        if (!uses) {
            parse_fail(ps, ps->text, "out of memory");
            return -1;
        }
        g->symbol_first_use = uses;
        ps->symbols_cap = cap;
    }
    char *copy = malloc(len + 1);
    if (!copy) {
        parse_fail(ps, ps->text, "out of memory");
        return -1;
    }
    memcpy(copy, name, len);
    copy[len] = '\0';
    const uint32_t id = (uint32_t)g->n_symbols;
    g->symbol_names[id] = copy;
    g->symbol_first_use[id] = first_use;
    g->n_symbols++;
    ps->table[symbol_slot(ps, copy, len)] = id + 1;
    return id;
}

/* b1892 get_symbol_id: the existing id of the name, or a new one. */
static int64_t symbol_get(struct parser *ps, const char *name, size_t len) {
    if (ps->table_cap) {
        size_t slot = symbol_slot(ps, name, len);
        if (ps->table[slot] != 0) {
            return ps->table[slot] - 1;
        }
    }
    return symbol_add(ps, name, len, (size_t)(name - ps->text));
}

/* b1892 generate_symbol_id: "<base>_<next id>"; such names never collide
 * with parsed ones because '_' is not a name character. */
static int64_t symbol_generate(struct parser *ps, const char *base, const char *at) {
    const size_t cap = strlen(base) + 24;
    char *name = malloc(cap);
    if (!name) {
        parse_fail(ps, at, "out of memory");
        return -1;
    }
    int len = snprintf(name, cap, "%s_%zu", base, ps->g->n_symbols);
    int64_t id = symbol_add(ps, name, (size_t)len, (size_t)(at - ps->text));
    free(name);
    return id;
}

/* b1892 add_rule: rules grows to id+1, the rule replaces what was there. */
static bool rule_set(struct parser *ps, uint32_t id, struct elem_vec *rule) {
    struct gbnf_grammar *g = ps->g;
    if (id >= g->n_rules) {
        size_t cap = ps->rules_cap;
        if (id >= cap) {
            cap = cap ? cap : 16;
            while (cap <= id) {
                cap *= 2;
            }
            llama_grammar_element **rules = realloc(g->rules, cap * sizeof *rules);
            if (rules) {
                g->rules = rules;
            }
            size_t *lengths = rules ? realloc(g->rule_lengths, cap * sizeof *lengths) : NULL;
            if (!lengths) {
                parse_fail(ps, ps->text, "out of memory");
                return false;
            }
            g->rule_lengths = lengths;
            ps->rules_cap = cap;
        }
        for (size_t i = g->n_rules; i <= id; i++) {
            g->rules[i] = NULL;
            g->rule_lengths[i] = 0;
        }
        g->n_rules = (size_t)id + 1;
    }
    free(g->rules[id]);
    g->rules[id] = rule->v;
    g->rule_lengths[id] = rule->n;
    rule->v = NULL;
    rule->n = rule->cap = 0;
    return true;
}

/* ---- lexical helpers (b1892's) ---- */

static bool is_digit_char(char c) {
    return c >= '0' && c <= '9';
}

static bool is_word_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '-' || is_digit_char(c);
}

static const char *skip_space(const char *pos, bool newline_ok) {
    while (*pos == ' ' || *pos == '\t' || *pos == '#' || (newline_ok && (*pos == '\r' || *pos == '\n'))) {
        if (*pos == '#') {
            while (*pos && *pos != '\r' && *pos != '\n') {
                pos++;
            }
        } else {
            pos++;
        }
    }
    return pos;
}

static const char *parse_name(struct parser *ps, const char *src) {
    const char *pos = src;
    while (is_word_char(*pos)) {
        pos++;
    }
    if (pos == src) {
        return parse_fail(ps, src, "expecting name");
    }
    return pos;
}

/* The parser's UTF-8 decoding: length from the lead byte's high bits (a stray
 * continuation byte counts as a 1-byte sequence), no validation, stops at NUL. */
static const char *decode_utf8(const char *src, uint32_t *out) {
    static const int lookup[] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
    const uint8_t first = (uint8_t)*src;
    const int len = lookup[first >> 4];
    uint32_t value = first & ((1u << (8 - len)) - 1);
    const char *end = src + len;
    const char *pos = src + 1;
    for (; pos < end && *pos; pos++) {
        value = (value << 6) + ((uint8_t)*pos & 0x3F);
    }
    *out = value;
    return pos;
}

static const char *parse_hex(struct parser *ps, const char *src, int size, uint32_t *out) {
    const char *pos = src;
    const char *end = src + size;
    uint32_t value = 0;
    for (; pos < end && *pos; pos++) {
        value <<= 4;
        char c = *pos;
        if (c >= 'a' && c <= 'f') {
            value += (uint32_t)(c - 'a' + 10);
        } else if (c >= 'A' && c <= 'F') {
            value += (uint32_t)(c - 'A' + 10);
        } else if (c >= '0' && c <= '9') {
            value += (uint32_t)(c - '0');
        } else {
            break;
        }
    }
    if (pos != end) {
        return parse_fail(ps, src, "expecting %d hex chars", size);
    }
    *out = value;
    return pos;
}

static const char *parse_char(struct parser *ps, const char *src, uint32_t *out) {
    if (*src == '\\') {
        switch (src[1]) {
        case 'x': return parse_hex(ps, src + 2, 2, out);
        case 'u': return parse_hex(ps, src + 2, 4, out);
        case 'U': return parse_hex(ps, src + 2, 8, out);
        case 't': *out = '\t'; return src + 2;
        case 'r': *out = '\r'; return src + 2;
        case 'n': *out = '\n'; return src + 2;
        case '\\':
        case '"':
        case '[':
        case ']': *out = (uint8_t)src[1]; return src + 2;
        default: return parse_fail(ps, src, "unknown escape");
        }
    }
    if (*src) {
        return decode_utf8(src, out);
    }
    return parse_fail(ps, src, "unexpected end of input");
}

/* ---- the grammar ---- */

static const char *parse_alternates(struct parser *ps, const char *src, const char *rule_name, uint32_t rule_id,
                                    bool is_nested);

/* x* -> R ::= x R | ; x+ -> R ::= x R | x ; x? -> R ::= x | ; x replaced by R. */
static bool apply_repetition(struct parser *ps, const char *pos, const char *rule_name, struct elem_vec *out,
                             size_t last_sym_start) {
    const char op = *pos;
    if (last_sym_start == out->n) {
        parse_fail(ps, pos, "expecting preceding item to */+/?");
        return false;
    }
    int64_t sub_id = symbol_generate(ps, rule_name, pos);
    if (sub_id < 0) {
        return false;
    }
    const llama_grammar_element *item = out->v + last_sym_start;
    const size_t item_len = out->n - last_sym_start;
    struct elem_vec sub = {0};
    bool ok = vec_append(ps, &sub, item, item_len);
    if (ok && (op == '*' || op == '+')) {
        ok = vec_push(ps, &sub, LLAMA_GRETYPE_RULE_REF, (uint32_t)sub_id);
    }
    ok = ok && vec_push(ps, &sub, LLAMA_GRETYPE_ALT, 0);
    if (ok && op == '+') {
        ok = vec_append(ps, &sub, item, item_len);
    }
    ok = ok && vec_push(ps, &sub, LLAMA_GRETYPE_END, 0) && rule_set(ps, (uint32_t)sub_id, &sub);
    free(sub.v);
    if (!ok) {
        return false;
    }
    out->n = last_sym_start;
    return vec_push(ps, out, LLAMA_GRETYPE_RULE_REF, (uint32_t)sub_id);
}

static const char *parse_sequence(struct parser *ps, const char *src, const char *rule_name, struct elem_vec *out,
                                  bool is_nested) {
    size_t last_sym_start = out->n;
    const char *pos = src;
    while (*pos) {
        if (*pos == '"') { /* literal string */
            pos++;
            last_sym_start = out->n;
            while (*pos != '"') {
                uint32_t c;
                pos = parse_char(ps, pos, &c);
                if (!pos || !vec_push(ps, out, LLAMA_GRETYPE_CHAR, c)) {
                    return NULL;
                }
            }
            pos = skip_space(pos + 1, is_nested);
        } else if (*pos == '[') { /* character class */
            pos++;
            enum llama_gretype start_type = LLAMA_GRETYPE_CHAR;
            if (*pos == '^') {
                pos++;
                start_type = LLAMA_GRETYPE_CHAR_NOT;
            }
            last_sym_start = out->n;
            while (*pos != ']') {
                uint32_t c;
                pos = parse_char(ps, pos, &c);
                if (!pos) {
                    return NULL;
                }
                enum llama_gretype type = last_sym_start < out->n ? LLAMA_GRETYPE_CHAR_ALT : start_type;
                if (!vec_push(ps, out, type, c)) {
                    return NULL;
                }
                if (pos[0] == '-' && pos[1] != ']') {
                    uint32_t upper;
                    pos = parse_char(ps, pos + 1, &upper);
                    if (!pos || !vec_push(ps, out, LLAMA_GRETYPE_CHAR_RNG_UPPER, upper)) {
                        return NULL;
                    }
                }
            }
            pos = skip_space(pos + 1, is_nested);
        } else if (is_word_char(*pos)) { /* rule reference */
            const char *name_end = parse_name(ps, pos);
            int64_t ref = name_end ? symbol_get(ps, pos, (size_t)(name_end - pos)) : -1;
            if (ref < 0) {
                return NULL;
            }
            pos = skip_space(name_end, is_nested);
            last_sym_start = out->n;
            if (!vec_push(ps, out, LLAMA_GRETYPE_RULE_REF, (uint32_t)ref)) {
                return NULL;
            }
        } else if (*pos == '(') { /* group: its alternatives become a generated rule */
            if (ps->depth >= GBNF_MAX_NESTING) {
                return parse_fail(ps, pos, "groups nested more than %d levels deep", GBNF_MAX_NESTING);
            }
            const char *open = pos;
            pos = skip_space(pos + 1, true);
            int64_t sub_id = symbol_generate(ps, rule_name, open);
            if (sub_id < 0) {
                return NULL;
            }
            ps->depth++;
            pos = parse_alternates(ps, pos, rule_name, (uint32_t)sub_id, true);
            ps->depth--;
            if (!pos) {
                return NULL;
            }
            last_sym_start = out->n;
            if (!vec_push(ps, out, LLAMA_GRETYPE_RULE_REF, (uint32_t)sub_id)) {
                return NULL;
            }
            if (*pos != ')') {
                return parse_fail(ps, pos, "expecting ')'");
            }
            pos = skip_space(pos + 1, is_nested);
        } else if (*pos == '*' || *pos == '+' || *pos == '?') {
            if (!apply_repetition(ps, pos, rule_name, out, last_sym_start)) {
                return NULL;
            }
            pos = skip_space(pos + 1, is_nested);
        } else {
            break;
        }
    }
    return pos;
}

static const char *parse_alternates(struct parser *ps, const char *src, const char *rule_name, uint32_t rule_id,
                                    bool is_nested) {
    struct elem_vec rule = {0};
    const char *pos = parse_sequence(ps, src, rule_name, &rule, is_nested);
    while (pos && *pos == '|') {
        if (!vec_push(ps, &rule, LLAMA_GRETYPE_ALT, 0)) {
            pos = NULL;
            break;
        }
        pos = skip_space(pos + 1, true);
        pos = parse_sequence(ps, pos, rule_name, &rule, is_nested);
    }
    if (pos && !(vec_push(ps, &rule, LLAMA_GRETYPE_END, 0) && rule_set(ps, rule_id, &rule))) {
        pos = NULL;
    }
    free(rule.v);
    return pos;
}

static const char *parse_rule(struct parser *ps, const char *src) {
    const char *name_end = parse_name(ps, src);
    if (!name_end) {
        return NULL;
    }
    const char *pos = skip_space(name_end, false);
    const size_t name_len = (size_t)(name_end - src);
    int64_t rule_id = symbol_get(ps, src, name_len);
    if (rule_id < 0) {
        return NULL;
    }
    if (!(pos[0] == ':' && pos[1] == ':' && pos[2] == '=')) {
        return parse_fail(ps, pos, "expecting '::='");
    }
    pos = skip_space(pos + 3, true);
    /* the name as a string for generated rule names; the symbol table owns one */
    pos = parse_alternates(ps, pos, ps->g->symbol_names[rule_id], (uint32_t)rule_id, false);
    if (!pos) {
        return NULL;
    }
    if (*pos == '\r') {
        pos += pos[1] == '\n' ? 2 : 1;
    } else if (*pos == '\n') {
        pos++;
    } else if (*pos) {
        return parse_fail(ps, pos, "expecting newline or end");
    }
    return skip_space(pos, true);
}

bool gbnf_parse(const char *text, struct gbnf_grammar *out) {
    memset(out, 0, sizeof *out);
    struct parser ps = {.text = text, .g = out};
    const char *pos = skip_space(text, true);
    while (pos && *pos) {
        pos = parse_rule(&ps, pos);
    }
    free(ps.table);
    if (!pos) {
        gbnf_grammar_free(out);
        return false;
    }
    return true;
}

void gbnf_grammar_free(struct gbnf_grammar *g) {
    for (size_t i = 0; i < g->n_symbols; i++) {
        free(g->symbol_names[i]);
    }
    for (size_t i = 0; i < g->n_rules; i++) {
        free(g->rules[i]);
    }
    free(g->symbol_names);
    free(g->symbol_first_use);
    free(g->rules);
    free(g->rule_lengths);
    memset(g, 0, sizeof *g);
}

int32_t gbnf_symbol_id(const struct gbnf_grammar *g, const char *name) {
    for (size_t i = 0; i < g->n_symbols; i++) {
        if (strcmp(g->symbol_names[i], name) == 0) {
            return (int32_t)i;
        }
    }
    return -1;
}

bool gbnf_check_defined(const struct gbnf_grammar *g, const char *text) {
    for (size_t id = 0; id < g->n_symbols; id++) {
        if (id < g->n_rules && g->rules[id]) {
            continue;
        }
        int line, column;
        gbnf_text_position(text, g->symbol_first_use[id], &line, &column);
        error_set("grammar: line %d, column %d: rule '%s' is used but never defined", line, column,
                  g->symbol_names[id]);
        return false;
    }
    return true;
}

void gbnf_text_position(const char *text, size_t offset, int *line, int *column) {
    int l = 1, c = 1;
    for (size_t i = 0; i < offset && text[i]; i++) {
        if (text[i] == '\n' || (text[i] == '\r' && text[i + 1] != '\n')) {
            l++;
            c = 1;
        } else if (text[i] != '\r') {
            c++;
        }
    }
    *line = l;
    *column = c;
}

/* ---- print_grammar ---- */

struct strbuf {
    char *s;
    size_t n, cap;
    bool oom;
};

static void sb_printf(struct strbuf *b, const char *fmt, ...) LC_PRINTF(2, 3);
static void sb_printf(struct strbuf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int len = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (b->oom || len < 0) {
        b->oom = true;
        return;
    }
    if (b->n + (size_t)len + 1 > b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 256;
        while (cap < b->n + (size_t)len + 1) {
            cap *= 2;
        }
        char *s = realloc(b->s, cap);
        if (!s) {
            b->oom = true;
            return;
        }
        b->s = s;
        b->cap = cap;
    }
    va_start(ap, fmt);
    vsnprintf(b->s + b->n, b->cap - b->n, fmt, ap);
    va_end(ap);
    b->n += (size_t)len;
}

static void print_char(struct strbuf *b, uint32_t c) {
    if (c >= 0x20 && c <= 0x7f) {
        sb_printf(b, "%c", (char)c);
    } else {
        sb_printf(b, "<U+%04X>", c);
    }
}

static bool is_char_element(llama_grammar_element e) {
    return e.type == LLAMA_GRETYPE_CHAR || e.type == LLAMA_GRETYPE_CHAR_NOT || e.type == LLAMA_GRETYPE_CHAR_ALT ||
           e.type == LLAMA_GRETYPE_CHAR_RNG_UPPER;
}

static const char *symbol_name(const struct gbnf_grammar *g, uint32_t id) {
    return id < g->n_symbols ? g->symbol_names[id] : NULL;
}

/* One rule; false (with error_set) where b1892's print_rule throws. */
static bool print_rule(struct strbuf *b, const struct gbnf_grammar *g, uint32_t id) {
    const llama_grammar_element *rule = g->rules[id];
    const size_t len = g->rule_lengths[id];
    if (!rule || len == 0 || rule[len - 1].type != LLAMA_GRETYPE_END) {
        error_set("print grammar: malformed rule, does not end with END: %u", id);
        return false;
    }
    const char *name = symbol_name(g, id);
    if (!name) {
        error_set("print grammar: rule %u has no name", id);
        return false;
    }
    sb_printf(b, "%s ::= ", name);
    for (size_t i = 0; i + 1 < len; i++) {
        const llama_grammar_element e = rule[i];
        switch (e.type) {
        case LLAMA_GRETYPE_END:
            error_set("print grammar: unexpected end of rule: %u,%zu", id, i);
            return false;
        case LLAMA_GRETYPE_ALT:
            sb_printf(b, "| ");
            break;
        case LLAMA_GRETYPE_RULE_REF: {
            const char *ref = symbol_name(g, e.value);
            if (!ref) {
                error_set("print grammar: reference to unknown symbol %u in rule %u", e.value, id);
                return false;
            }
            sb_printf(b, "%s ", ref);
            break;
        }
        case LLAMA_GRETYPE_CHAR:
            sb_printf(b, "[");
            print_char(b, e.value);
            break;
        case LLAMA_GRETYPE_CHAR_NOT:
            sb_printf(b, "[^");
            print_char(b, e.value);
            break;
        case LLAMA_GRETYPE_CHAR_RNG_UPPER:
        case LLAMA_GRETYPE_CHAR_ALT:
            if (i == 0 || !is_char_element(rule[i - 1])) {
                error_set("print grammar: %s without preceding char: %u,%zu",
                          e.type == LLAMA_GRETYPE_CHAR_ALT ? "CHAR_ALT" : "CHAR_RNG_UPPER", id, i);
                return false;
            }
            if (e.type == LLAMA_GRETYPE_CHAR_RNG_UPPER) {
                sb_printf(b, "-");
            }
            print_char(b, e.value);
            break;
        default:
            error_set("print grammar: unknown element type %d in rule %u", (int)e.type, id);
            return false;
        }
        if (is_char_element(e) && rule[i + 1].type != LLAMA_GRETYPE_CHAR_ALT &&
            rule[i + 1].type != LLAMA_GRETYPE_CHAR_RNG_UPPER) {
            sb_printf(b, "] ");
        }
    }
    sb_printf(b, "\n");
    return true;
}

char *gbnf_print(const struct gbnf_grammar *g) {
    struct strbuf b = {0};
    sb_printf(&b, "%s", "");
    for (size_t id = 0; id < g->n_rules; id++) {
        if (!print_rule(&b, g, (uint32_t)id)) {
            free(b.s);
            return NULL;
        }
    }
    if (b.oom) {
        free(b.s);
        error_set("print grammar: out of memory");
        return NULL;
    }
    return b.s;
}

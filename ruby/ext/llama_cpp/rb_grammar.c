/*
 * LLaMACpp::GrammarElement and LLaMACpp::Grammar (rules given as element
 * arrays, the format b1892's GBNF parser produces, or GBNF text parsed by
 * the engine's parser: Grammar.parse).
 *
 * The element arrays handed to llama_grammar_init stay alive as long as the
 * grammar and every copy of it (b1892 keeps pointers into them), and they are
 * checked first: every rule ends with END, types are known, references name
 * existing rules.
 */
#include "rb_llama_cpp.h"

#include <string.h>

#include "core/log.h"
#include "sample/gbnf.h"

VALUE rb_cLLaMAGrammarElement;
VALUE rb_cLLaMAGrammar;

/* ---- GrammarElement ---------------------------------------------------------------------- */

RBLLAMA_STRUCT_CLASS(element, llama_grammar_element, "LLaMACpp::GrammarElement")

/* GrammarElement.new(type: 0, value: 0) — 0.12.2 ignored both keywords */
static VALUE element_initialize(int argc, VALUE *argv, VALUE self) {
    static const char *const names[] = { "type", "value" };
    VALUE kw[2];
    rbllama_scan_kwargs(argc, argv, names, 0, 2, kw);
    if (kw[0] != Qundef) rbllama_expect_integer(kw[0], "type must be an integer");
    if (kw[1] != Qundef) rbllama_expect_integer(kw[1], "value must be an integer");
    llama_grammar_element *e = element_get(self);
    e->type = kw[0] == Qundef ? LLAMA_GRETYPE_END : (enum llama_gretype)NUM2INT(kw[0]);
    e->value = kw[1] == Qundef ? 0 : NUM2UINT(kw[1]);
    return self;
}

ENUM_FIELD(element, element_get, type, enum llama_gretype)
UINT_FIELD(element, element_get, value)

/* ---- Grammar ------------------------------------------------------------------------------- */

struct rb_grammar {
    struct llama_grammar *grammar;
    llama_grammar_element *elements; /* every rule, back to back (NULL in copies) */
    const llama_grammar_element **rules;
    VALUE rules_owner;               /* copies: the Grammar whose element arrays they use */
};

static void grammar_mark(void *p) {
    rb_gc_mark(((struct rb_grammar *)p)->rules_owner);
}

static void grammar_free(void *p) {
    struct rb_grammar *g = p;
    if (g->grammar) llama_grammar_free(g->grammar);
    xfree(g->rules);
    xfree(g->elements);
    xfree(g);
}

static size_t grammar_memsize(const void *p) {
    return sizeof(struct rb_grammar);
}

static const rb_data_type_t grammar_type = {
    "LLaMACpp::Grammar", { grammar_mark, grammar_free, grammar_memsize, }, NULL, NULL, RUBY_TYPED_FREE_IMMEDIATELY
};

static VALUE grammar_alloc(VALUE klass) {
    struct rb_grammar *g;
    VALUE obj = TypedData_Make_Struct(klass, struct rb_grammar, &grammar_type, g);
    g->rules_owner = Qnil;
    return obj;
}

struct llama_grammar *rbllama_grammar_get(VALUE self) {
    struct rb_grammar *g = rb_check_typeddata(self, &grammar_type);
    if (!g->grammar) rb_raise(rb_eRuntimeError, "Grammar is not initialized");
    return g->grammar;
}

/* The library's last error without its "grammar: " prefix. */
static const char *grammar_error(void) {
    const char *msg = error_last();
    return strncmp(msg, "grammar: ", 9) == 0 ? msg + 9 : msg;
}

/* Initialises g from rules it takes ownership of (freed here on failure). */
static void grammar_take(struct rb_grammar *g, llama_grammar_element *elements, const llama_grammar_element **rules,
                         size_t n_rules, size_t start) {
    error_clear();
    struct llama_grammar *grammar = llama_grammar_init(rules, n_rules, start);
    if (!grammar) {
        xfree(elements);
        xfree(rules);
        rbllama_raise_library_error(rb_eArgError, "Failed to initialize grammar", grammar_error());
    }
    g->grammar = grammar;
    g->elements = elements;
    g->rules = rules;
}

static void check_rules(VALUE rules, long start) {
    const long n_rules = RARRAY_LEN(rules);
    if (n_rules == 0) rb_raise(rb_eArgError, "rules must not be empty");
    if (start < 0 || start >= n_rules) {
        rb_raise(rb_eIndexError, "start_rule_index %ld is out of range (0...%ld)", start, n_rules);
    }
    for (long r = 0; r < n_rules; r++) {
        VALUE rule = RARRAY_AREF(rules, r);
        const long n = RARRAY_LEN(rule);
        for (long i = 0; i < n; i++) {
            const llama_grammar_element *e = element_get(RARRAY_AREF(rule, i));
            if ((int)e->type < LLAMA_GRETYPE_END || e->type > LLAMA_GRETYPE_CHAR_ALT) {
                rb_raise(rb_eArgError, "rule %ld element %ld has an unknown type %d", r, i, (int)e->type);
            }
            if (e->type == LLAMA_GRETYPE_RULE_REF && e->value >= (uint32_t)n_rules) {
                rb_raise(rb_eArgError, "rule %ld element %ld refers to rule %u, which does not exist", r, i, e->value);
            }
            if (e->type == LLAMA_GRETYPE_END && i != n - 1) {
                rb_raise(rb_eArgError, "rule %ld has an END element before its last element", r);
            }
        }
        if (n == 0 || element_get(RARRAY_AREF(rule, n - 1))->type != LLAMA_GRETYPE_END) {
            rb_raise(rb_eArgError, "rule %ld must end with an END element", r);
        }
    }
}

/* Grammar.new(rules:, start_rule_index:) */
static VALUE grammar_initialize(int argc, VALUE *argv, VALUE self) {
    static const char *const names[] = { "rules", "start_rule_index" };
    VALUE kw[2];
    rbllama_scan_kwargs(argc, argv, names, 2, 0, kw);
    if (!RB_TYPE_P(kw[0], T_ARRAY)) rb_raise(rb_eArgError, "rules must be an array");
    rbllama_expect_integer(kw[1], "start_rule_index must be an integer");
    VALUE rules = rb_ary_dup(kw[0]); /* a snapshot: the caller may change theirs meanwhile */
    const long n_rules = RARRAY_LEN(rules);
    long n_elements = 0;
    for (long r = 0; r < n_rules; r++) {
        VALUE rule = RARRAY_AREF(rules, r);
        if (!RB_TYPE_P(rule, T_ARRAY)) rb_raise(rb_eArgError, "element of rules must be an array");
        rule = rb_ary_dup(rule);
        rb_ary_store(rules, r, rule);
        for (long i = 0; i < RARRAY_LEN(rule); i++) {
            if (!rb_obj_is_kind_of(RARRAY_AREF(rule, i), rb_cLLaMAGrammarElement)) {
                rb_raise(rb_eArgError, "element of rule must be an instance of GrammarElement");
            }
        }
        n_elements += RARRAY_LEN(rule);
    }
    const long start = NUM2LONG(kw[1]);
    check_rules(rules, start);
    struct rb_grammar *g = rb_check_typeddata(self, &grammar_type);
    if (g->grammar) rb_raise(rb_eRuntimeError, "Grammar is already initialized");

    llama_grammar_element *elements = ALLOC_N(llama_grammar_element, n_elements);
    const llama_grammar_element **rule_ptrs = ALLOC_N(const llama_grammar_element *, n_rules);
    long k = 0;
    for (long r = 0; r < n_rules; r++) {
        VALUE rule = RARRAY_AREF(rules, r);
        rule_ptrs[r] = elements + k;
        for (long i = 0; i < RARRAY_LEN(rule); i++) elements[k++] = *element_get(RARRAY_AREF(rule, i));
    }
    grammar_take(g, elements, rule_ptrs, (size_t)n_rules, (size_t)start);
    return self;
}

/* Grammar.parse(text, root: "root") — an addition: GBNF text, parsed as
 * b1892's common/grammar-parser.cpp does. ArgumentError with the line and
 * column of a syntax error, or naming an undefined rule. */
static VALUE grammar_s_parse(int argc, VALUE *argv, VALUE klass) {
    static const char *const names[] = { "root" };
    VALUE text = Qnil, kwargs = Qnil, kw[1];
    rb_scan_args(argc, argv, "1:", &text, &kwargs);
    rbllama_get_kwargs(kwargs, names, 0, 1, kw);
    if (!RB_TYPE_P(text, T_STRING)) rb_raise(rb_eArgError, "text must be a String");
    VALUE root = kw[0] == Qundef ? rb_str_new_cstr("root") : kw[0];
    if (!RB_TYPE_P(root, T_STRING)) rb_raise(rb_eArgError, "root must be a String");
    const char *source = StringValueCStr(text), *root_name = StringValueCStr(root);

    struct gbnf_grammar parsed;
    error_clear();
    /* the parser's messages read "grammar: line L, column C: ..." */
    if (!gbnf_parse(source, &parsed)) rbllama_raise_library_error(rb_eArgError, "grammar", grammar_error());
    const int32_t start = gbnf_symbol_id(&parsed, root_name);
    if (start < 0 || (size_t)start >= parsed.n_rules || !parsed.rules[start]) {
        gbnf_grammar_free(&parsed);
        rb_raise(rb_eArgError, "grammar: no rule named %s", root_name);
    }
    if (!gbnf_check_defined(&parsed, source)) {
        gbnf_grammar_free(&parsed);
        rbllama_raise_library_error(rb_eArgError, "grammar", grammar_error());
    }
    size_t n_elements = 0;
    for (size_t r = 0; r < parsed.n_rules; r++) n_elements += parsed.rule_lengths[r];
    llama_grammar_element *elements = ruby_xmalloc2(n_elements, sizeof *elements);
    const llama_grammar_element **rule_ptrs = ruby_xmalloc2(parsed.n_rules, sizeof *rule_ptrs);
    size_t k = 0;
    for (size_t r = 0; r < parsed.n_rules; r++) {
        rule_ptrs[r] = elements + k;
        memcpy(elements + k, parsed.rules[r], parsed.rule_lengths[r] * sizeof *elements);
        k += parsed.rule_lengths[r];
    }
    const size_t n_rules = parsed.n_rules;
    gbnf_grammar_free(&parsed);
    VALUE obj = grammar_alloc(klass);
    grammar_take(rb_check_typeddata(obj, &grammar_type), elements, rule_ptrs, n_rules, (size_t)start);
    return obj;
}

/* Grammar#dup / #clone: an independent parse state (llama_grammar_copy). */
static VALUE grammar_initialize_copy(VALUE self, VALUE source) {
    if (self == source) return self;
    struct rb_grammar *src = rb_check_typeddata(source, &grammar_type);
    struct rb_grammar *g = rb_check_typeddata(self, &grammar_type);
    if (g->grammar) rb_raise(rb_eRuntimeError, "Grammar is already initialized");
    if (!src->grammar) return self;
    struct llama_grammar *copy = llama_grammar_copy(src->grammar);
    if (!copy) rbllama_raise_library_error(rb_eRuntimeError, "Failed to copy grammar", error_last());
    g->grammar = copy;
    RB_OBJ_WRITE(self, &g->rules_owner, NIL_P(src->rules_owner) ? source : src->rules_owner);
    return self;
}

void rbllama_init_grammar(void) {
    VALUE k = rb_cLLaMAGrammarElement = rb_define_class_under(rb_mLLaMACpp, "GrammarElement", rb_cObject);
    rb_define_alloc_func(k, element_alloc);
    rb_define_method(k, "initialize", element_initialize, -1);
    DEFINE_ACCESSOR(k, element, type, "type");
    DEFINE_ACCESSOR(k, element, value, "value");

    k = rb_cLLaMAGrammar = rb_define_class_under(rb_mLLaMACpp, "Grammar", rb_cObject);
    rb_define_alloc_func(k, grammar_alloc);
    rb_define_method(k, "initialize", grammar_initialize, -1);
    rb_define_method(k, "initialize_copy", grammar_initialize_copy, 1);
    rb_define_singleton_method(k, "parse", grammar_s_parse, -1);
}

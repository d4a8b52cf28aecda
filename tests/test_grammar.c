/* sample/grammar: the matcher against b1892's test-llama-grammar (initial
 * stacks, rejection; ../shared/spec/reference-tests.md §4), a replay of every
 * recorded generation of golden/grammar-stories260K.json (allowed candidates
 * per step, then the recorded token), partial UTF-8, pathological grammars,
 * malformed rule arrays, and the agreement of the three strategies. */
#include "test_util.h"

#include <cjson/cJSON.h>

#include "core/log.h"
#include "sample/gbnf.h"
#include "sample/grammar.h"

static void log_quiet(enum ggml_log_level level, const char *text, void *user) {
    (void)level, (void)text, (void)user;
}

/* ---- small helpers ---- */

struct test_vocab {
    struct grammar_vocab *v;
    int32_t n;
};

/* A vocabulary from NUL-free C strings (NULL = empty piece); eos is the last id. */
static struct test_vocab vocab_from_strings(const char *const *pieces, int32_t n) {
    size_t *lengths = calloc((size_t)n + 1, sizeof *lengths);
    const char **all = calloc((size_t)n + 1, sizeof *all);
    for (int32_t i = 0; i < n; i++) {
        all[i] = pieces[i];
        lengths[i] = pieces[i] ? strlen(pieces[i]) : 0;
    }
    struct test_vocab tv = {grammar_vocab_create(all, lengths, n + 1, n), n + 1};
    free(lengths);
    free(all);
    return tv;
}

static struct llama_grammar *grammar_from_text(const char *text) {
    struct gbnf_grammar g;
    if (!gbnf_parse(text, &g)) {
        return NULL;
    }
    struct llama_grammar *lg = NULL;
    int32_t root = gbnf_symbol_id(&g, "root");
    if (root >= 0) {
        lg = grammar_create((const llama_grammar_element **)g.rules, g.n_rules, (size_t)root);
    }
    gbnf_grammar_free(&g);
    return lg;
}

/* Runs grammar_sample_with over the whole vocabulary; returns the allowed
 * ids as a bit mask in `allowed` (n bytes, 1 = allowed) and their count. */
static int allowed_set(struct llama_grammar *g, const struct test_vocab *tv, enum grammar_strategy s,
                       uint8_t *allowed) {
    llama_token_data *d = malloc((size_t)tv->n * sizeof *d);
    for (int32_t i = 0; i < tv->n; i++) {
        d[i].id = i;
        d[i].logit = 0.0f;
        d[i].p = 0.0f;
    }
    llama_token_data_array arr = {d, (size_t)tv->n, false};
    CHECK(grammar_sample_with(g, tv->v, &arr, s));
    int count = 0;
    for (int32_t i = 0; i < tv->n; i++) {
        allowed[i] = d[i].logit != -INFINITY;
        count += allowed[i];
    }
    free(d);
    return count;
}

/* Asserts that the three strategies agree and returns the count. */
static int allowed_checked(struct llama_grammar *g, const struct test_vocab *tv, uint8_t *allowed) {
    uint8_t *b = malloc((size_t)tv->n), *c = malloc((size_t)tv->n);
    int n_auto = allowed_set(g, tv, GRAMMAR_STRATEGY_AUTO, allowed);
    int n_tok = allowed_set(g, tv, GRAMMAR_STRATEGY_PER_TOKEN, b);
    int n_trie = allowed_set(g, tv, GRAMMAR_STRATEGY_TRIE, c);
    CHECK(n_auto == n_tok && n_auto == n_trie);
    CHECK(memcmp(allowed, b, (size_t)tv->n) == 0 && memcmp(allowed, c, (size_t)tv->n) == 0);
    free(b);
    free(c);
    return n_auto;
}

/* ---- b1892 tests/test-llama-grammar.cpp ---- */

#define E(t, v) {LLAMA_GRETYPE_##t, v}

static const llama_grammar_element G2_R0[] = {E(RULE_REF, 5), E(END, 0)};
static const llama_grammar_element G2_R1[] = {E(RULE_REF, 2), E(CHAR, 61), E(RULE_REF, 3), E(RULE_REF, 4),
                                              E(CHAR, 10), E(END, 0)};
static const llama_grammar_element G2_R2[] = {E(RULE_REF, 4), E(RULE_REF, 7), E(END, 0)};
static const llama_grammar_element G2_R3[] = {E(RULE_REF, 12), E(END, 0)};
static const llama_grammar_element G2_R4[] = {E(RULE_REF, 8), E(ALT, 0), E(RULE_REF, 9), E(ALT, 0), E(CHAR, 40),
                                              E(RULE_REF, 3), E(RULE_REF, 2), E(CHAR, 41), E(RULE_REF, 3),
                                              E(END, 0)};
static const llama_grammar_element G2_R5[] = {E(RULE_REF, 1), E(RULE_REF, 5), E(ALT, 0), E(RULE_REF, 1),
                                              E(END, 0)};
static const llama_grammar_element G2_R6[] = {E(CHAR, 45), E(CHAR_ALT, 43), E(CHAR_ALT, 42), E(CHAR_ALT, 47),
                                              E(RULE_REF, 4), E(END, 0)};
static const llama_grammar_element G2_R7[] = {E(RULE_REF, 6), E(RULE_REF, 7), E(ALT, 0), E(END, 0)};
static const llama_grammar_element G2_R8[] = {E(CHAR, 97), E(CHAR_RNG_UPPER, 122), E(RULE_REF, 10),
                                              E(RULE_REF, 3), E(END, 0)};
static const llama_grammar_element G2_R9[] = {E(RULE_REF, 11), E(RULE_REF, 3), E(END, 0)};
static const llama_grammar_element G2_R10[] = {E(CHAR, 97), E(CHAR_RNG_UPPER, 122), E(CHAR_ALT, 48),
                                               E(CHAR_RNG_UPPER, 57), E(CHAR_ALT, 95), E(RULE_REF, 10), E(ALT, 0),
                                               E(END, 0)};
static const llama_grammar_element G2_R11[] = {E(CHAR, 48), E(CHAR_RNG_UPPER, 57), E(RULE_REF, 11), E(ALT, 0),
                                               E(CHAR, 48), E(CHAR_RNG_UPPER, 57), E(END, 0)};
static const llama_grammar_element G2_R12[] = {E(CHAR, 32), E(CHAR_ALT, 9), E(CHAR_ALT, 10), E(RULE_REF, 12),
                                               E(ALT, 0), E(END, 0)};
static const llama_grammar_element *G2[] = {G2_R0, G2_R1, G2_R2, G2_R3, G2_R4,  G2_R5, G2_R6,
                                            G2_R7, G2_R8, G2_R9, G2_R10, G2_R11, G2_R12};

static void test_upstream_stacks(void) {
    struct llama_grammar *g = grammar_create(G2, 13, 0);
    CHECK(g != NULL);
    if (!g) {
        return;
    }
    /* bottom -> top, as (type, value) */
    static const int want[8][5][2] = {
        {{2, 5}, {3, 61}, {2, 7}, {3, 97}},
        {{2, 5}, {3, 61}, {2, 7}, {2, 3}, {3, 48}},
        {{2, 5}, {3, 61}, {2, 7}, {2, 3}, {3, 48}},
        {{2, 5}, {3, 61}, {2, 7}, {3, 40}},
        {{3, 61}, {2, 7}, {3, 97}},
        {{3, 61}, {2, 7}, {2, 3}, {3, 48}},
        {{3, 61}, {2, 7}, {2, 3}, {3, 48}},
        {{3, 61}, {2, 7}, {3, 40}},
    };
    static const size_t want_depth[8] = {4, 5, 5, 4, 3, 4, 4, 3};
    CHECK_EQ_INT(grammar_stack_count(g), 8);
    for (size_t i = 0; i < 8 && i < grammar_stack_count(g); i++) {
        llama_grammar_element el[8];
        size_t depth = grammar_stack_elements(g, i, el, 8);
        CHECK_MSG(depth == want_depth[i], "stack %zu depth %zu", i, depth);
        for (size_t k = 0; k < depth && k < want_depth[i]; k++) {
            CHECK_MSG((int)el[k].type == want[i][k][0] && (int)el[k].value == want[i][k][1],
                      "stack %zu element %zu is (%d, %u)", i, k, (int)el[k].type, el[k].value);
        }
    }
    /* rejection: candidates '%' (37) ... '<' (60); the stacks accept '0'-'9' and '(' */
    const char *pieces[24];
    char chars[24][2];
    for (int i = 0; i < 24; i++) {
        chars[i][0] = (char)(37 + i);
        chars[i][1] = '\0';
        pieces[i] = chars[i];
    }
    struct test_vocab tv = vocab_from_strings(pieces, 24);
    uint8_t allowed[25];
    allowed_checked(g, &tv, allowed);
    for (int i = 0; i < 24; i++) {
        const bool want_ok = i == 3 || (i >= 11 && i <= 20);
        CHECK_MSG(allowed[i] == want_ok, "candidate %d ('%c')", i, 37 + i);
    }
    CHECK(!allowed[24]); /* EOS: no stack is empty */
    grammar_vocab_free(tv.v);
    grammar_free(g);
}

/* ---- golden/grammar-stories260K.json generations ---- */

static uint8_t *hex_decode(const char *hex, size_t *len) {
    size_t n = strlen(hex) / 2;
    uint8_t *out = malloc(n + 1);
    for (size_t i = 0; i < n; i++) {
        unsigned b;
        sscanf(hex + 2 * i, "%2x", &b);
        out[i] = (uint8_t)b;
    }
    *len = n;
    return out;
}

static struct test_vocab load_stories_vocab(void) {
    struct test_vocab tv = {NULL, 0};
    cJSON *root = golden_load("golden/tokenizer-stories260K.json");
    const cJSON *vocab = cJSON_GetObjectItemCaseSensitive(root, "vocab");
    const int n = cJSON_GetArraySize(vocab);
    const int eos = cJSON_GetObjectItemCaseSensitive(root, "eos")->valueint;
    char **pieces = calloc((size_t)n, sizeof *pieces);
    size_t *lengths = calloc((size_t)n, sizeof *lengths);
    const cJSON *entry;
    cJSON_ArrayForEach(entry, vocab) {
        int id = cJSON_GetArrayItem(entry, 0)->valueint;
        pieces[id] = (char *)hex_decode(cJSON_GetArrayItem(entry, 4)->valuestring, &lengths[id]);
    }
    tv.v = grammar_vocab_create((const char *const *)pieces, lengths, n, eos);
    tv.n = n;
    for (int i = 0; i < n; i++) {
        free(pieces[i]);
    }
    free(pieces);
    free(lengths);
    cJSON_Delete(root);
    return tv;
}

static void test_golden_generations(void) {
    struct test_vocab tv = load_stories_vocab();
    CHECK(tv.v != NULL);
    if (!tv.v) return;
    cJSON *root = golden_load("golden/grammar-stories260K.json");
    const llama_token eos = 2;
    uint8_t *allowed = malloc((size_t)tv.n);
    int n_grammars = 0, n_steps = 0;
    const cJSON *gr;
    cJSON_ArrayForEach(gr, cJSON_GetObjectItemCaseSensitive(root, "grammars")) {
        const cJSON *gen = cJSON_GetObjectItemCaseSensitive(gr, "generation");
        if (!gen) {
            continue;
        }
        const char *name = cJSON_GetObjectItemCaseSensitive(gr, "name")->valuestring;
        struct llama_grammar *g = grammar_from_text(cJSON_GetObjectItemCaseSensitive(gr, "text")->valuestring);
        CHECK_MSG(g != NULL, "%s: %s", name, error_last());
        if (!g) {
            continue;
        }
        const cJSON *tokens = cJSON_GetObjectItemCaseSensitive(gen, "tokens");
        const cJSON *counts = cJSON_GetObjectItemCaseSensitive(gen, "allowed_candidates_per_step");
        CHECK(cJSON_GetArraySize(tokens) == cJSON_GetArraySize(counts));
        struct llama_grammar *half = NULL;
        const int n = cJSON_GetArraySize(tokens);
        for (int i = 0; i < n; i++) {
            const llama_token tok = cJSON_GetArrayItem(tokens, i)->valueint;
            const int want = cJSON_GetArrayItem(counts, i)->valueint;
            const int got = allowed_checked(g, &tv, allowed);
            CHECK_MSG(got == want, "%s step %d: %d allowed, golden %d", name, i, got, want);
            CHECK_MSG(allowed[tok], "%s step %d: recorded token %d not allowed", name, i, tok);
            if (half) { /* a copy taken midway behaves the same */
                uint8_t *other = malloc((size_t)tv.n);
                CHECK(allowed_checked(half, &tv, other) == got && memcmp(other, allowed, (size_t)tv.n) == 0);
                free(other);
                CHECK(grammar_accept(half, tv.v, tok));
            }
            if (tok == eos) {
                CHECK(grammar_allows_eos(g));
                break;
            }
            CHECK_MSG(grammar_accept(g, tv.v, tok), "%s step %d: %s", name, i, error_last());
            if (i == n / 2) {
                half = grammar_copy(g);
                CHECK(half != NULL);
            }
            n_steps++;
        }
        const bool eos_at_end = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(gen, "eos_allowed_at_end"));
        CHECK_MSG(grammar_allows_eos(g) == eos_at_end, "%s: eos at end", name);
        grammar_free(half);
        grammar_free(g);
        n_grammars++;
    }
    CHECK_EQ_INT(n_grammars, 6);
    printf("golden grammar generations: %d grammars, %d steps replayed\n", n_grammars, n_steps);
    free(allowed);
    cJSON_Delete(root);
    grammar_vocab_free(tv.v);
}

/* ---- partial UTF-8 across tokens ---- */

static void test_partial_utf8(void) {
    /* ids: 0 "\xC3", 1 "\xA9", 2 "\xA9x", 3 "x", 4 "é", 5 "\xC3\xA8" (è), 6 "\xC1", 7 "a\0b" (NUL inside), 8 "\0a", 9 "" ; 10 EOS */
    const char *const raw[] = {"\xC3", "\xA9", "\xA9x", "x", "\xC3\xA9", "\xC3\xA8", "\xC1", "a\0b", "\0a", "", ""};
    const size_t raw_len[] = {1, 1, 2, 1, 2, 2, 1, 3, 2, 0, 0};
    struct grammar_vocab *v = grammar_vocab_create(raw, raw_len, 11, 10);
    struct test_vocab tv = {v, 11};
    uint8_t a[11];

    struct llama_grammar *g = grammar_from_text("root ::= \"\xC3\xA9\" \"x\" \"a\"\n");
    CHECK(g != NULL);
    allowed_checked(g, &tv, a);
    CHECK(a[0] && !a[1] && !a[2] && !a[3] && a[4] && !a[5] && !a[6] && !a[7] && !a[8] && !a[9] && !a[10]);
    CHECK(grammar_accept(g, v, 0)); /* first byte of é */
    allowed_checked(g, &tv, a);
    CHECK(!a[0] && a[1] && a[2] && !a[3] && !a[4] && !a[10]);
    struct llama_grammar *mid = grammar_copy(g);
    CHECK(grammar_accept(g, v, 2)); /* rest of é, then x */
    allowed_checked(g, &tv, a);
    CHECK(a[7] && !a[8] && !a[3]); /* "a\0b" is seen as "a" */
    CHECK(grammar_accept(g, v, 7));
    allowed_checked(g, &tv, a);
    CHECK(a[10] && !a[7]);
    CHECK(grammar_accept(g, v, 10)); /* EOS when complete */
    /* "x" where the rest of é is expected: b1892 accepts it without moving the
     * stacks and forgets the partial character (the token is invalid UTF-8) */
    allowed_checked(mid, &tv, a);
    CHECK(a[1] && !a[3]);
    CHECK(grammar_accept(mid, v, 3));
    allowed_checked(mid, &tv, a);
    CHECK(a[0] && a[4] && !a[1] && !a[3]);
    grammar_free(mid);
    grammar_free(g);

    /* negated class: b1892 rejects a partial whose possible completions touch an excluded char */
    g = grammar_from_text("root ::= [^\xC3\xA9]\n");
    allowed_checked(g, &tv, a);
    CHECK(!a[0]);          /* "\xC3" could become é -> rejected (b1892's conservative check) */
    CHECK(a[5] && !a[4]);  /* è allowed, é not */
    CHECK(!a[6]);          /* "\xC1": overlong 2-byte lead, rejected */
    CHECK(a[3] && a[7]);
    grammar_free(g);

    /* empty and NUL-first pieces: never allowed; accepting them changes nothing */
    g = grammar_from_text("root ::= \"x\"\n");
    allowed_checked(g, &tv, a);
    CHECK(a[3] && !a[8] && !a[9] && !a[10]);
    CHECK(grammar_accept(g, v, 9) && grammar_accept(g, v, 8));
    allowed_checked(g, &tv, a);
    CHECK(a[3]);
    grammar_free(g);
    grammar_vocab_free(v);
}

/* ---- errors, limits ---- */

static void test_errors_and_limits(void) {
    log_set_callback(log_quiet, NULL);
    const char *pieces[] = {"a", "b", "c", "(", ")"};
    struct test_vocab tv = vocab_from_strings(pieces, 5);
    uint8_t a[6];

    /* accept: a token that does not match leaves the grammar as it was */
    struct llama_grammar *g = grammar_from_text("root ::= \"ab\"\n");
    CHECK(!grammar_accept(g, tv.v, 1));
    CHECK(strstr(error_last(), "does not match") != NULL);
    CHECK(!grammar_accept(g, tv.v, 5)); /* EOS before the end */
    CHECK(!grammar_accept(g, tv.v, 99)); /* not a token */
    allowed_checked(g, &tv, a);
    CHECK(a[0] && !a[1]);
    CHECK(grammar_accept(g, tv.v, 0) && grammar_accept(g, tv.v, 1));
    CHECK(grammar_allows_eos(g) && grammar_accept(g, tv.v, 5));
    /* out-of-vocabulary candidates are rejected */
    llama_token_data d[2] = {{-1, 0.0f, 0.0f}, {1000, 0.0f, 0.0f}};
    llama_token_data_array arr = {d, 2, false};
    CHECK(grammar_sample(g, tv.v, &arr));
    CHECK(d[0].logit == -INFINITY && d[1].logit == -INFINITY);
    grammar_free(g);

    /* left recursion, direct, indirect and through a nullable prefix */
    CHECK(grammar_from_text("root ::= root \"a\" | \"a\"\n") == NULL);
    CHECK(strstr(error_last(), "left-recursive") != NULL);
    CHECK(grammar_from_text("root ::= x \"a\"\nx ::= y | \"b\"\ny ::= root \"c\"\n") == NULL);
    CHECK(grammar_from_text("root ::= e root \"a\" | \"b\"\ne ::= \"\" | \"c\"\n") == NULL);
    CHECK(grammar_from_text("root ::= e* root \"a\" | \"b\"\ne ::= \"c\"\n") == NULL);
    /* right recursion and an unreachable left-recursive rule are fine */
    g = grammar_from_text("root ::= \"a\" root | \"b\"\nunused ::= unused \"x\"\n");
    CHECK(g != NULL);
    grammar_free(g);

    /* exponentially ambiguous: refused once more than GRAMMAR_MAX_STACKS stacks are needed */
    g = grammar_from_text("root ::= \"a\" root \"b\" root | \"a\" root \"c\" root |\n");
    CHECK(g != NULL);
    int accepted = 0;
    while (accepted < 40 && grammar_accept(g, tv.v, 0)) {
        accepted++;
    }
    CHECK(accepted > 5 && accepted < 40);
    CHECK(strstr(error_last(), "parse stacks") != NULL);
    size_t stacks = grammar_stack_count(g);
    CHECK(stacks <= GRAMMAR_MAX_STACKS);
    allowed_checked(g, &tv, a);
    CHECK(!a[0] && a[1] && a[2]); /* sampling rejects what accepting would refuse */
    CHECK(grammar_stack_count(g) == stacks);
    CHECK(grammar_accept(g, tv.v, 1));
    grammar_free(g);

    /* an exponential number of initial stacks */
    char text[2048] = "root ::= r0\n";
    for (int i = 0; i < 16; i++) {
        char line[96];
        snprintf(line, sizeof line, "r%d ::= r%d \"x\" | r%d \"y\"\n", i, i + 1, i + 1);
        strcat(text, line);
    }
    strcat(text, "r16 ::= \"z\"\n");
    CHECK(grammar_from_text(text) == NULL);
    CHECK(strstr(error_last(), "initial parse stacks") != NULL);

    /* malformed rule arrays */
    const llama_grammar_element ok_rule[] = {E(CHAR, 'a'), E(END, 0)};
    const llama_grammar_element bad_ref[] = {E(RULE_REF, 7), E(END, 0)};
    const llama_grammar_element alt_first[] = {E(CHAR_ALT, 'a'), E(END, 0)};
    const llama_grammar_element rng_rng[] = {E(CHAR, 'a'), E(CHAR_RNG_UPPER, 'b'), E(CHAR_RNG_UPPER, 'c'), E(END, 0)};
    const llama_grammar_element bad_type[] = {{(enum llama_gretype)9, 0}, E(END, 0)};
    const llama_grammar_element *rules[2] = {ok_rule, NULL};
    CHECK(grammar_create(rules, 0, 0) == NULL);
    CHECK(grammar_create(NULL, 1, 0) == NULL);
    CHECK(grammar_create(rules, 1, 1) == NULL);
    CHECK(grammar_create(rules, 2, 0) == NULL); /* rule 1 missing (b1892's parser leaves such holes) */
    rules[1] = bad_ref;
    CHECK(grammar_create(rules, 2, 0) == NULL);
    rules[1] = alt_first;
    CHECK(grammar_create(rules, 2, 0) == NULL);
    rules[1] = rng_rng;
    CHECK(grammar_create(rules, 2, 0) == NULL);
    rules[1] = bad_type;
    CHECK(grammar_create(rules, 2, 0) == NULL);
    rules[1] = ok_rule;
    g = grammar_create(rules, 2, 1);
    CHECK(g != NULL && grammar_stack_count(g) == 1);
    grammar_free(g);

    /* the parser's undefined rule becomes an init error, not a crash */
    struct gbnf_grammar pg;
    CHECK(gbnf_parse("root ::= a undefined-rule\na ::= \"a\"\n", &pg));
    CHECK(grammar_create((const llama_grammar_element **)pg.rules, pg.n_rules, 0) == NULL);
    gbnf_grammar_free(&pg);

    grammar_vocab_free(tv.v);
    log_set_callback(NULL, NULL);
}

/* ---- long runs: the pool is compacted, results stay the same ---- */

static void test_long_run(void) {
    const char *pieces[] = {"(", ")", "[", "]", "a", "))", "(a", "{", "}"};
    struct test_vocab tv = vocab_from_strings(pieces, 9);
    struct llama_grammar *g = grammar_from_text(
        "root ::= item*\nitem ::= \"(\" item* \")\" | \"[\" item* \"]\" | \"{\" item* \"}\" | \"a\"\n");
    CHECK(g != NULL);
    uint8_t a[10], want[10];
    char open[512];
    int depth = 0, mismatches = 0, compactions = 0, steps = 0, since = 0;
    bool sweeping_down = false;
    size_t last_nodes = grammar_node_count(g);
    uint64_t rs = 99;
    for (; steps < 3000000 && since < 20000; steps++) {
        allowed_set(g, &tv, (steps & 1) ? GRAMMAR_STRATEGY_AUTO : GRAMMAR_STRATEGY_PER_TOKEN, a);
        const char top = depth > 0 ? open[depth - 1] : 0;
        want[0] = want[2] = want[4] = want[6] = want[7] = 1;
        want[1] = top == '(';
        want[3] = top == '[';
        want[5] = top == '(' && depth >= 2 && open[depth - 2] == '(';
        want[8] = top == '{';
        want[9] = depth == 0;
        mismatches += memcmp(a, want, 10) != 0;
        /* sweep between depth 100 and 400 with random brackets, so that new
         * stacks keep appearing; sometimes a random allowed token */
        static const int pushes[4] = {0, 2, 6, 7};
        if (depth >= 400) {
            sweeping_down = true;
        } else if (depth <= 100) {
            sweeping_down = false;
        }
        int choice = sweeping_down ? (top == '(' ? 1 : top == '[' ? 3 : 8) : pushes[test_rand_u64(&rs) % 4];
        if (test_rand_u64(&rs) % 8 == 0) {
            do {
                choice = (int)(test_rand_u64(&rs) % 9);
            } while (!a[choice] || (depth >= 400 && (choice == 0 || choice == 2 || choice == 6 || choice == 7)));
        }
        CHECK(grammar_accept(g, tv.v, choice));
        switch (choice) {
        case 0: case 6: open[depth++] = '('; break;
        case 2: open[depth++] = '['; break;
        case 7: open[depth++] = '{'; break;
        case 1: case 3: case 8: depth--; break;
        case 5: depth -= 2; break;
        default: break;
        }
        size_t nodes = grammar_node_count(g);
        compactions += nodes < last_nodes;
        since += compactions > 0;
        last_nodes = nodes;
    }
    CHECK_EQ_INT(mismatches, 0);
    CHECK_MSG(compactions >= 1, "no compaction in %d steps (%zu nodes)", steps, last_nodes);
    printf("long run: %d steps, %d compactions, %zu nodes at the end\n", steps, compactions, last_nodes);
    grammar_free(g);
    grammar_vocab_free(tv.v);
}

int main(void) {
    test_upstream_stacks();
    test_golden_generations();
    test_partial_utf8();
    test_errors_and_limits();
    test_long_run();
    return test_finish("test_grammar");
}

/* sample/grammar against a plain reimplementation of b1892's llama_grammar
 * algorithm (stacks as arrays, llama_grammar_advance_stack, per-candidate
 * rejection, decode_utf8 with partial sequences), on random grammars and a
 * random vocabulary full of multi-byte, split and invalid UTF-8: at every
 * step the allowed set must be identical, then both accept the same token. */
#include "test_util.h"

#include "core/log.h"
#include "sample/gbnf.h"
#include "sample/grammar.h"

/* ======================= the reference (b1892's algorithm) ======================= */

#define REF_MAX_STACKS 1000
#define REF_MAX_DEPTH  400

struct ref_stack {
    uint32_t *pos;
    size_t n;
};

struct ref_stacks {
    struct ref_stack *s;
    size_t n, cap;
    bool overflow; /* more than REF_MAX_STACKS or too deep: the case is skipped */
};

struct ref_grammar {
    llama_grammar_element *el;
    uint32_t *rule_start;
    struct ref_stacks stacks;
    uint32_t partial_value;
    int partial_n_remain;
};

static bool ref_is_end(const struct ref_grammar *g, uint32_t p) {
    return g->el[p].type == LLAMA_GRETYPE_END || g->el[p].type == LLAMA_GRETYPE_ALT;
}

static void ref_push(struct ref_stacks *out, const uint32_t *pos, size_t n) {
    if (out->n >= REF_MAX_STACKS || n > REF_MAX_DEPTH) {
        out->overflow = true;
        return;
    }
    if (out->n == out->cap) {
        out->cap = out->cap ? out->cap * 2 : 16;
        out->s = realloc(out->s, out->cap * sizeof *out->s);
    }
    out->s[out->n].pos = malloc((n + 1) * sizeof *pos);
    memcpy(out->s[out->n].pos, pos, n * sizeof *pos);
    out->s[out->n].n = n;
    out->n++;
}

static void ref_stacks_free(struct ref_stacks *st) {
    for (size_t i = 0; i < st->n; i++) free(st->s[i].pos);
    free(st->s);
    memset(st, 0, sizeof *st);
}

/* llama_grammar_advance_stack */
static void ref_advance(const struct ref_grammar *g, const uint32_t *stack, size_t n, struct ref_stacks *out,
                        int depth) {
    if (out->overflow) return;
    if (depth > 2000) { /* only a left-recursive grammar gets here */
        out->overflow = true;
        CHECK_MSG(false, "reference recursion: left recursion was not refused");
        return;
    }
    if (n == 0) {
        ref_push(out, stack, 0);
        return;
    }
    const uint32_t top = stack[n - 1];
    if (g->el[top].type == LLAMA_GRETYPE_RULE_REF) {
        uint32_t *next = malloc((n + 2) * sizeof *next);
        for (uint32_t alt = g->rule_start[g->el[top].value];;) {
            memcpy(next, stack, (n - 1) * sizeof *next);
            size_t m = n - 1;
            if (!ref_is_end(g, top + 1)) next[m++] = top + 1;
            if (!ref_is_end(g, alt)) next[m++] = alt;
            ref_advance(g, next, m, out, depth + 1);
            while (!ref_is_end(g, alt)) alt++;
            if (g->el[alt].type != LLAMA_GRETYPE_ALT) break;
            alt++;
        }
        free(next);
    } else {
        ref_push(out, stack, n);
    }
}

/* Explores llama_grammar_advance_stack from a stack without keeping the
 * results: 1 if the recursion goes past 2000 levels (b1892 would overflow
 * its stack), 0 if it finishes, -1 if it is too big to tell. */
static int ref_diverges(const struct ref_grammar *g, const uint32_t *stack, size_t n, int depth, long *budget) {
    if (depth > 2000) return 1;
    if (--*budget < 0) return -1;
    if (n == 0 || g->el[stack[n - 1]].type != LLAMA_GRETYPE_RULE_REF) return 0;
    const uint32_t top = stack[n - 1];
    uint32_t *next = malloc((n + 2) * sizeof *next);
    int result = 0;
    for (uint32_t alt = g->rule_start[g->el[top].value]; result == 0;) {
        memcpy(next, stack, (n - 1) * sizeof *next);
        size_t m = n - 1;
        if (!ref_is_end(g, top + 1)) next[m++] = top + 1;
        if (!ref_is_end(g, alt)) next[m++] = alt;
        result = ref_diverges(g, next, m, depth + 1, budget);
        while (!ref_is_end(g, alt)) alt++;
        if (g->el[alt].type != LLAMA_GRETYPE_ALT) break;
        alt++;
    }
    free(next);
    return result;
}

/* llama_grammar_match_char: (matched, position after the class) */
static bool ref_match_char(const struct ref_grammar *g, uint32_t pos, uint32_t chr, uint32_t *after) {
    const bool positive = g->el[pos].type == LLAMA_GRETYPE_CHAR;
    bool found = false;
    do {
        if (g->el[pos + 1].type == LLAMA_GRETYPE_CHAR_RNG_UPPER) {
            found = found || (g->el[pos].value <= chr && chr <= g->el[pos + 1].value);
            pos += 2;
        } else {
            found = found || g->el[pos].value == chr;
            pos += 1;
        }
    } while (g->el[pos].type == LLAMA_GRETYPE_CHAR_ALT);
    *after = pos;
    return found == positive;
}

static bool ref_match_partial(const struct ref_grammar *g, uint32_t pos, uint32_t value, int n_remain) {
    const bool positive = g->el[pos].type == LLAMA_GRETYPE_CHAR;
    if (n_remain < 0 || (n_remain == 1 && value < 2)) return false;
    uint32_t low = value << (n_remain * 6);
    uint32_t high = low | ((1u << (n_remain * 6)) - 1);
    if (low == 0) {
        if (n_remain == 2) low = 1u << 11;
        else if (n_remain == 3) low = 1u << 16;
    }
    do {
        if (g->el[pos + 1].type == LLAMA_GRETYPE_CHAR_RNG_UPPER) {
            if (g->el[pos].value <= high && low <= g->el[pos + 1].value) return positive;
            pos += 2;
        } else {
            if (low <= g->el[pos].value && g->el[pos].value <= high) return positive;
            pos += 1;
        }
    } while (g->el[pos].type == LLAMA_GRETYPE_CHAR_ALT);
    return !positive;
}

/* decode_utf8 of llama.cpp: code points plus a terminating 0, and the final partial state */
static size_t ref_decode(const char *src, uint32_t pv, int pn, uint32_t *cps, uint32_t *out_v, int *out_n) {
    static const int lookup[] = {1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 2, 2, 3, 4};
    const char *pos = src;
    size_t n_cp = 0;
    uint32_t value = pv;
    int n_remain = pn;
    while (*pos != 0 && n_remain > 0) {
        uint8_t b = (uint8_t)*pos;
        if ((b >> 6) != 2) {
            cps[0] = 0;
            *out_v = 0;
            *out_n = -1;
            return 1;
        }
        value = (value << 6) + (b & 0x3F);
        ++pos;
        --n_remain;
    }
    if (pn > 0 && n_remain == 0) cps[n_cp++] = value;
    while (*pos != 0) {
        uint8_t first = (uint8_t)*pos;
        n_remain = lookup[first >> 4] - 1;
        if (n_remain < 0) {
            cps[0] = 0;
            *out_v = 0;
            *out_n = n_remain;
            return 1;
        }
        value = first & ((1u << (7 - n_remain)) - 1);
        ++pos;
        while (*pos != 0 && n_remain > 0) {
            value = (value << 6) + ((uint8_t)*pos & 0x3F);
            ++pos;
            --n_remain;
        }
        if (n_remain == 0) cps[n_cp++] = value;
    }
    cps[n_cp++] = 0;
    *out_v = value;
    *out_n = n_remain;
    return n_cp;
}

/* does this stack accept cps[i..] ending in the partial state? (llama_grammar_reject_candidates_for_stack) */
static bool ref_stack_accepts(const struct ref_grammar *g, const uint32_t *stack, size_t n, const uint32_t *cps,
                              uint32_t pv, int pn, bool *overflow) {
    if (n == 0) return cps[0] == 0 && pn == 0;
    const uint32_t top = stack[n - 1];
    if (cps[0] == 0) return pn == 0 || ref_match_partial(g, top, pv, pn);
    uint32_t after;
    if (!ref_match_char(g, top, cps[0], &after)) return false;
    uint32_t *next = malloc((n + 1) * sizeof *next);
    memcpy(next, stack, (n - 1) * sizeof *next);
    size_t m = n - 1;
    if (!ref_is_end(g, after)) next[m++] = after;
    struct ref_stacks adv = {0};
    ref_advance(g, next, m, &adv, 0);
    free(next);
    bool ok = false;
    *overflow = *overflow || adv.overflow;
    for (size_t i = 0; i < adv.n && !ok; i++) {
        ok = ref_stack_accepts(g, adv.s[i].pos, adv.s[i].n, cps + 1, pv, pn, overflow);
    }
    ref_stacks_free(&adv);
    return ok;
}

static bool ref_allowed(const struct ref_grammar *g, const char *piece, bool is_eos, bool *overflow) {
    if (is_eos) {
        for (size_t i = 0; i < g->stacks.n; i++) {
            if (g->stacks.s[i].n == 0) return true;
        }
        return false;
    }
    if (piece[0] == 0) return false;
    uint32_t cps[64], v;
    int n;
    ref_decode(piece, g->partial_value, g->partial_n_remain, cps, &v, &n);
    for (size_t i = 0; i < g->stacks.n; i++) {
        if (ref_stack_accepts(g, g->stacks.s[i].pos, g->stacks.s[i].n, cps, v, n, overflow)) return true;
    }
    return false;
}

/* llama_grammar_accept_token for a non-EOS token */
static void ref_accept(struct ref_grammar *g, const char *piece) {
    uint32_t cps[64], v;
    int n;
    size_t n_cp = ref_decode(piece, g->partial_value, g->partial_n_remain, cps, &v, &n);
    for (size_t c = 0; c + 1 < n_cp; c++) {
        struct ref_stacks next = {0};
        for (size_t i = 0; i < g->stacks.n; i++) {
            const struct ref_stack *s = &g->stacks.s[i];
            if (s->n == 0) continue;
            uint32_t after;
            if (!ref_match_char(g, s->pos[s->n - 1], cps[c], &after)) continue;
            uint32_t *st = malloc((s->n + 1) * sizeof *st);
            memcpy(st, s->pos, (s->n - 1) * sizeof *st);
            size_t m = s->n - 1;
            if (!ref_is_end(g, after)) st[m++] = after;
            ref_advance(g, st, m, &next, 0);
            free(st);
        }
        bool overflow = g->stacks.overflow || next.overflow;
        ref_stacks_free(&g->stacks);
        g->stacks = next;
        g->stacks.overflow = overflow;
    }
    g->partial_value = v;
    g->partial_n_remain = n;
}

static void ref_load(struct ref_grammar *g, const struct gbnf_grammar *pg) {
    memset(g, 0, sizeof *g);
    size_t total = 0;
    for (size_t r = 0; r < pg->n_rules; r++) total += pg->rule_lengths[r];
    g->el = malloc(total * sizeof *g->el);
    g->rule_start = malloc(pg->n_rules * sizeof *g->rule_start);
    size_t at = 0;
    for (size_t r = 0; r < pg->n_rules; r++) {
        g->rule_start[r] = (uint32_t)at;
        memcpy(g->el + at, pg->rules[r], pg->rule_lengths[r] * sizeof *g->el);
        at += pg->rule_lengths[r];
    }
}

static bool ref_init(struct ref_grammar *g, const struct gbnf_grammar *pg, uint32_t start) {
    ref_load(g, pg);
    for (uint32_t alt = g->rule_start[start];;) {
        uint32_t st[1] = {alt};
        ref_advance(g, st, ref_is_end(g, alt) ? 0 : 1, &g->stacks, 0);
        while (!ref_is_end(g, alt)) alt++;
        if (g->el[alt].type != LLAMA_GRETYPE_ALT) break;
        alt++;
    }
    return !g->stacks.overflow;
}

static void ref_free(struct ref_grammar *g) {
    ref_stacks_free(&g->stacks);
    free(g->el);
    free(g->rule_start);
}

/* ======================= random grammars and vocabulary ======================= */

static const char *const ATOMS[] = {"a", "b", "c", "x", "0", "1", " ", "\\n", "\\\"", "\xc3\xa9", "\xe2\x82\xac",
                                    "\xf0\x9f\x98\x80", "\\x41", "\\u00e8"};
static const char *const CLASSES[] = {"[abc]", "[^a]", "[a-c]", "[0-9]", "[^0-9 ]", "[\xc3\xa9-\xc3\xaa]",
                                      "[^\xe2\x82\xac]", "[a\xf0\x9f\x98\x80]", "[^\"\\\\]", "[ \\t\\n]"};

static void gen_item(uint64_t *rs, int rule, int n_rules, int depth, char *out);

/* An empty sequence is written as "" (an empty alternative at the end of a
 * line would make b1892's parser continue on the next line). */
static void gen_seq(uint64_t *rs, int rule, int n_rules, int depth, char *out) {
    int n_items = test_rand_u64(rs) % 8 == 0 ? 0 : 1 + (int)(test_rand_u64(rs) % 3);
    if (n_items == 0) {
        strcat(out, "\"\" ");
    }
    for (int i = 0; i < n_items; i++) {
        gen_item(rs, rule, n_rules, depth, out);
        strcat(out, " ");
    }
}

/* References mostly go to later rules (no cycles); one in eight goes
 * anywhere, which makes recursion (and some left recursion, refused). */
static void gen_item(uint64_t *rs, int rule, int n_rules, int depth, char *out) {
    switch (test_rand_u64(rs) % (depth < 2 ? 5 : 3)) {
    case 0: {
        strcat(out, "\"");
        int n = 1 + (int)(test_rand_u64(rs) % 3);
        for (int i = 0; i < n; i++) strcat(out, ATOMS[test_rand_u64(rs) % (sizeof ATOMS / sizeof ATOMS[0])]);
        strcat(out, "\"");
        break;
    }
    case 1: strcat(out, CLASSES[test_rand_u64(rs) % (sizeof CLASSES / sizeof CLASSES[0])]); break;
    case 2: {
        char ref[16];
        int r = (int)(test_rand_u64(rs) % (uint64_t)n_rules);
        if (test_rand_u64(rs) % 8 != 0) {
            if (rule + 1 >= n_rules) {
                strcat(out, "\"x\"");
                break;
            }
            r = rule + 1 + (int)(test_rand_u64(rs) % (uint64_t)(n_rules - rule - 1));
        }
        snprintf(ref, sizeof ref, r == 0 ? "root" : "r%d", r);
        strcat(out, ref);
        break;
    }
    default:
        strcat(out, "( ");
        gen_seq(rs, rule, n_rules, depth + 1, out);
        strcat(out, "| ");
        gen_seq(rs, rule, n_rules, depth + 1, out);
        strcat(out, ")");
    }
    static const char *const suffix[] = {"", "", "", "*", "+", "?"};
    strcat(out, suffix[test_rand_u64(rs) % 6]);
}

static void gen_grammar(uint64_t *rs, char *out) {
    int n_rules = 1 + (int)(test_rand_u64(rs) % 4);
    out[0] = '\0';
    for (int r = 0; r < n_rules; r++) {
        char head[32];
        snprintf(head, sizeof head, r == 0 ? "root ::= " : "r%d ::= ", r);
        strcat(out, head);
        int n_alts = 1 + (int)(test_rand_u64(rs) % 3);
        for (int a = 0; a < n_alts; a++) {
            if (a) strcat(out, "| ");
            gen_seq(rs, r, n_rules, 0, out);
        }
        strcat(out, "\n");
    }
}

/* pieces: the atoms' bytes, their splits, pairs, and some invalid bytes */
static int gen_vocab(uint64_t *rs, char pieces[][24]) {
    static const char *const base[] = {"a", "b", "c", "x", "0", "1", " ", "\n", "\"", "\\", "A", "\xc3\xa9", "\xc3\xa8",
                                       "\xc3\xaa", "\xe2\x82\xac", "\xf0\x9f\x98\x80", "\xc3", "\xa9", "\xe2\x82",
                                       "\xac", "\xf0\x9f", "\x98\x80", "\x80", "\xff", "\xc1", "\t", "ab", "\"a"};
    const int n_base = (int)(sizeof base / sizeof base[0]);
    int n = 0;
    for (int i = 0; i < n_base; i++) strcpy(pieces[n++], base[i]);
    while (n < 150) {
        pieces[n][0] = '\0';
        int parts = 2 + (int)(test_rand_u64(rs) % 3);
        for (int p = 0; p < parts; p++) strcat(pieces[n], base[test_rand_u64(rs) % (uint64_t)n_base]);
        n++;
    }
    pieces[n][0] = '\0'; /* an empty (control) token */
    n++;
    return n; /* EOS is id n */
}

/* ======================= the comparison ======================= */

static void log_quiet(enum ggml_log_level level, const char *text, void *user) {
    (void)level, (void)text, (void)user;
}

static void test_random_grammars(void) {
    uint64_t rs = 77;
    static char pieces[200][24];
    const int n_pieces = gen_vocab(&rs, pieces);
    const int n_vocab = n_pieces + 1;
    const char *ptrs[201];
    size_t lens[201];
    for (int i = 0; i < n_pieces; i++) {
        ptrs[i] = pieces[i];
        lens[i] = strlen(pieces[i]);
    }
    ptrs[n_pieces] = "";
    lens[n_pieces] = 0;
    struct grammar_vocab *v = grammar_vocab_create(ptrs, lens, n_vocab, n_pieces);
    llama_token_data *cand = malloc((size_t)n_vocab * sizeof *cand);
    uint8_t *ours = malloc((size_t)n_vocab);

    int confirmed_divergent = 0;
    int compared = 0, skipped_refused = 0, skipped_ambiguous = 0, steps = 0, mismatches = 0;
    char text[8192];
    int history[32];
    log_set_callback(NULL, NULL);
    log_set_callback(log_quiet, NULL);
    for (int iter = 0; iter < 2500; iter++) {
        gen_grammar(&rs, text);
        struct gbnf_grammar pg;
        if (!gbnf_parse(text, &pg)) {
            CHECK_MSG(false, "generated grammar does not parse: %s\n%s", error_last(), text);
            continue;
        }
        struct llama_grammar *g = grammar_create((const llama_grammar_element **)pg.rules, pg.n_rules, 0);
        if (!g) {
            /* refused as left-recursive: b1892 must indeed recurse forever when it expands that rule */
            unsigned rule;
            if (sscanf(error_last(), "grammar: rule %u is left-recursive", &rule) == 1) {
                struct ref_grammar probe;
                ref_load(&probe, &pg);
                int verdict = 0;
                for (uint32_t r = 0, pos = 0; r < pg.n_rules && verdict == 0; r++) {
                    for (pos = 0; pos < pg.rule_lengths[r]; pos++) {
                        if (pg.rules[r][pos].type == LLAMA_GRETYPE_RULE_REF && pg.rules[r][pos].value == rule) {
                            uint32_t st[1] = {probe.rule_start[r] + pos};
                            long budget = 100000;
                            verdict = ref_diverges(&probe, st, 1, 0, &budget);
                            break;
                        }
                    }
                }
                CHECK_MSG(verdict != 0, "refused, but b1892's expansion of rule %u terminates:\n%s", rule, text);
                confirmed_divergent += verdict == 1;
                ref_free(&probe);
            }
            skipped_refused++;
            gbnf_grammar_free(&pg);
            continue;
        }
        struct ref_grammar ref;
        bool usable = ref_init(&ref, &pg, 0);
        for (int step = 0; usable && step < 25; step++) {
            if (ref.stacks.overflow) {
                skipped_ambiguous++; /* the reference lost stacks: no longer comparable */
                break;
            }
            for (int i = 0; i < n_vocab; i++) {
                cand[i].id = i;
                cand[i].logit = 0.0f;
                cand[i].p = 0.0f;
            }
            llama_token_data_array arr = {cand, (size_t)n_vocab, false};
            const enum grammar_strategy s = (enum grammar_strategy)(step % 3);
            CHECK(grammar_sample_with(g, v, &arr, s));
            int n_allowed = 0, pick = -1;
            bool overflow = false;
            for (int i = 0; i < n_vocab; i++) {
                ours[i] = cand[i].logit != -INFINITY;
                const bool want = ref_allowed(&ref, ptrs[i], i == n_pieces, &overflow);
                if (ours[i] != want && !overflow && !ours[i]) {
                    /* our limit on parse stacks (b1892 has none) rejects it? then not comparable */
                    struct llama_grammar *probe = grammar_copy(g);
                    if (!grammar_accept(probe, v, i) && strstr(error_last(), "parse stacks")) {
                        overflow = true;
                    }
                    grammar_free(probe);
                }
                if (ours[i] != want && !overflow) {
                    if (mismatches++ < 1) {
                        fprintf(stderr, "grammar:\n%s\nstep %d token %d ('%s'): ours %d, b1892 %d; after", text, step, i,
                                ptrs[i], ours[i], want);
                        for (int h = 0; h < step; h++) fprintf(stderr, " %d", history[h]);
                        fprintf(stderr, "\n");
                    }
                }
                n_allowed += ours[i];
            }
            if (overflow) {
                skipped_ambiguous++;
                break;
            }
            if (n_allowed == 0) {
                break;
            }
            int k = (int)(test_rand_u64(&rs) % (uint64_t)n_allowed);
            for (int i = 0; i < n_vocab; i++) {
                if (ours[i] && k-- == 0) {
                    pick = i;
                    break;
                }
            }
            if (pick == n_pieces) {
                CHECK(grammar_accept(g, v, pick));
                break; /* EOS ends the text */
            }
            CHECK_MSG(grammar_accept(g, v, pick), "%s", error_last());
            ref_accept(&ref, ptrs[pick]);
            history[step] = pick;
            steps++;
        }
        if (usable) {
            compared++;
        } else {
            skipped_ambiguous++;
        }
        ref_free(&ref);
        grammar_free(g);
        gbnf_grammar_free(&pg);
    }
    log_set_callback(NULL, NULL);
    CHECK_EQ_INT(mismatches, 0);
    CHECK(compared > 800 && steps > 4000);
    printf("random grammars: %d compared over %d steps (%d refused at init, %d of them checked to make b1892 "
           "recurse forever; %d too ambiguous to compare)\n",
           compared, steps, skipped_refused, confirmed_divergent, skipped_ambiguous);
    free(cand);
    free(ours);
    grammar_vocab_free(v);
}

int main(void) {
    test_random_grammars();
    return test_finish("test_grammar_reference");
}

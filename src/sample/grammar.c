#include "sample/grammar.h"

#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"

#define GRAMMAR_RULE_MAX_LEN   (1u << 24)
#define GRAMMAR_CACHE_ENTRIES  8
/* Nodes one closure may visit (raw stacks included) before it counts as blown up. */
#define GRAMMAR_CLOSURE_VISITS (16u * GRAMMAR_MAX_STACKS)

#define NODE_EMPTY  0u          /* node 0 is the empty stack */
#define NODE_NONE   UINT32_MAX  /* no node (allocation failed) */
#define SUCC_UNSET  UINT32_MAX  /* successor list not computed yet */
#define SUCC_FAILED (UINT32_MAX - 1) /* successor closure exceeded the stack limit */

enum step_status { STEP_OK, STEP_TOO_MANY, STEP_POOL_FULL };

/* ======================================================================== */
/* UTF-8 decoding as b1892's decode_utf8 (llama.cpp) does it                */
/* ======================================================================== */

struct partial_utf8 {
    uint32_t value;
    int n_remain; /* bytes still expected; -1 after an invalid sequence */
};

struct utf8_decoder {
    uint32_t value;
    int n_remain;
    bool continuing; /* finishing a sequence a previous token started */
};

enum utf8_result { UTF8_MORE, UTF8_CODE_POINT, UTF8_INVALID };

static struct utf8_decoder utf8_start(struct partial_utf8 p) {
    struct utf8_decoder d = {p.value, 0, false};
    if (p.n_remain > 0) {
        d.n_remain = p.n_remain;
        d.continuing = true;
    }
    return d;
}

/* Continuation bytes are only validated when finishing the previous token's
 * sequence; inside a token any byte continues a sequence (b1892's behaviour). */
static enum utf8_result utf8_feed(struct utf8_decoder *d, uint8_t byte, uint32_t *cp) {
    static const int lookup[16] = {1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 2, 2, 3, 4};
    if (d->continuing) {
        if ((byte >> 6) != 2) {
            return UTF8_INVALID;
        }
    } else if (d->n_remain == 0) {
        const int n = lookup[byte >> 4] - 1;
        if (n < 0) {
            return UTF8_INVALID;
        }
        d->value = byte & ((1u << (7 - n)) - 1);
        d->n_remain = n;
        if (n == 0) {
            *cp = d->value;
            return UTF8_CODE_POINT;
        }
        return UTF8_MORE;
    }
    d->value = (d->value << 6) + (byte & 0x3Fu);
    if (--d->n_remain == 0) {
        d->continuing = false;
        *cp = d->value;
        return UTF8_CODE_POINT;
    }
    return UTF8_MORE;
}

/* ======================================================================== */
/* the vocabulary as a prefix tree                                          */
/* ======================================================================== */

struct trie_node {
    uint32_t end;       /* index just past this node's subtree (preorder) */
    uint32_t depth;     /* bytes from the root; the root itself is not stored */
    uint32_t tok_first; /* tokens whose piece ends here: vocab->node_tokens[tok_first ..] */
    uint32_t tok_count;
    uint8_t byte;
};

struct grammar_vocab {
    int32_t n_vocab;
    llama_token eos;
    uint64_t serial;       /* identifies this vocabulary in grammar caches */
    char *bytes;           /* all usable pieces, truncated at their first NUL */
    uint32_t *piece_off;   /* [n_vocab] */
    uint32_t *piece_len;   /* [n_vocab]; 0 = never allowed (empty or NUL-first piece) */
    struct trie_node *nodes;
    uint32_t n_nodes;
    uint32_t max_depth;
    llama_token *node_tokens;
};

struct piece_ref {
    const uint8_t *p;
    uint32_t len;
    llama_token id;
};

static int piece_ref_compare(const void *a, const void *b) {
    const struct piece_ref *x = a, *y = b;
    uint32_t n = x->len < y->len ? x->len : y->len;
    int c = memcmp(x->p, y->p, n);
    if (c != 0) {
        return c;
    }
    if (x->len != y->len) {
        return x->len < y->len ? -1 : 1;
    }
    return (x->id > y->id) - (x->id < y->id);
}

void grammar_vocab_free(struct grammar_vocab *v) {
    if (!v) {
        return;
    }
    free(v->bytes);
    free(v->piece_off);
    free(v->piece_len);
    free(v->nodes);
    free(v->node_tokens);
    free(v);
}

/* Builds the preorder node array from the pieces sorted bytewise: a piece
 * shares the nodes of its common prefix with the previous one. */
static bool vocab_build_trie(struct grammar_vocab *v, struct piece_ref *refs, uint32_t n_refs, size_t total) {
    v->nodes = malloc((total ? total : 1) * sizeof *v->nodes);
    v->node_tokens = malloc((n_refs ? n_refs : 1) * sizeof *v->node_tokens);
    uint32_t *path = malloc(((size_t)v->max_depth + 1) * sizeof *path);
    if (!v->nodes || !v->node_tokens || !path) {
        free(path);
        return false;
    }
    uint32_t n_nodes = 0;
    for (uint32_t i = 0; i < n_refs; i++) {
        const struct piece_ref *r = &refs[i];
        uint32_t common = 0;
        if (i > 0) {
            const struct piece_ref *prev = &refs[i - 1];
            while (common < r->len && common < prev->len && r->p[common] == prev->p[common]) {
                common++;
            }
        }
        for (uint32_t d = common; d < r->len; d++) {
            struct trie_node *node = &v->nodes[n_nodes];
            node->byte = r->p[d];
            node->depth = d + 1;
            node->tok_first = 0;
            node->tok_count = 0;
            node->end = 0;
            path[d + 1] = n_nodes++;
        }
        struct trie_node *leaf = &v->nodes[path[r->len]];
        if (leaf->tok_count == 0) {
            leaf->tok_first = i;
        }
        leaf->tok_count++;
        v->node_tokens[i] = r->id;
    }
    /* subtree ends: a node's subtree ends at the next node that is not deeper */
    uint32_t *open = path; /* reused as a stack of node indices */
    uint32_t n_open = 0;
    for (uint32_t k = 0; k < n_nodes; k++) {
        while (n_open > 0 && v->nodes[open[n_open - 1]].depth >= v->nodes[k].depth) {
            v->nodes[open[--n_open]].end = k;
        }
        open[n_open++] = k;
    }
    while (n_open > 0) {
        v->nodes[open[--n_open]].end = n_nodes;
    }
    free(path);
    v->n_nodes = n_nodes;
    return true;
}

struct grammar_vocab *grammar_vocab_create(const char *const *pieces, const size_t *lengths, int32_t n_vocab,
                                           llama_token eos) {
    static atomic_uint_fast64_t next_serial = 1;
    if (n_vocab <= 0 || !pieces || !lengths) {
        error_set("grammar vocab: no tokens");
        return NULL;
    }
    struct grammar_vocab *v = calloc(1, sizeof *v);
    struct piece_ref *refs = malloc((size_t)n_vocab * sizeof *refs);
    if (!v || !refs) {
        goto oom;
    }
    v->n_vocab = n_vocab;
    v->eos = eos;
    v->serial = atomic_fetch_add(&next_serial, 1);
    v->piece_off = calloc((size_t)n_vocab, sizeof *v->piece_off);
    v->piece_len = calloc((size_t)n_vocab, sizeof *v->piece_len);
    if (!v->piece_off || !v->piece_len) {
        goto oom;
    }
    size_t total = 0;
    for (int32_t i = 0; i < n_vocab; i++) {
        size_t len = pieces[i] ? lengths[i] : 0;
        const char *nul = len ? memchr(pieces[i], '\0', len) : NULL;
        if (nul) {
            len = (size_t)(nul - pieces[i]);
        }
        if (len > UINT32_MAX / 2 || total + len > UINT32_MAX / 2) {
            error_set("grammar vocab: pieces too long");
            grammar_vocab_free(v);
            free(refs);
            return NULL;
        }
        v->piece_len[i] = (uint32_t)len;
        v->piece_off[i] = (uint32_t)total;
        total += len;
    }
    v->bytes = malloc(total ? total : 1);
    if (!v->bytes) {
        goto oom;
    }
    uint32_t n_refs = 0;
    for (int32_t i = 0; i < n_vocab; i++) {
        if (v->piece_len[i] > 0) {
            memcpy(v->bytes + v->piece_off[i], pieces[i], v->piece_len[i]);
        }
        if (v->piece_len[i] > v->max_depth) {
            v->max_depth = v->piece_len[i];
        }
        /* EOS is decided by the stacks alone, never by its piece */
        if (i != eos && v->piece_len[i] > 0) {
            refs[n_refs].p = (const uint8_t *)v->bytes + v->piece_off[i];
            refs[n_refs].len = v->piece_len[i];
            refs[n_refs].id = i;
            n_refs++;
        }
    }
    qsort(refs, n_refs, sizeof *refs, piece_ref_compare);
    if (!vocab_build_trie(v, refs, n_refs, total)) {
        goto oom;
    }
    free(refs);
    return v;
oom:
    error_set("grammar vocab: out of memory");
    grammar_vocab_free(v);
    free(refs);
    return NULL;
}

/* ======================================================================== */
/* interned parse stacks                                                    */
/* ======================================================================== */

/* A growable array of node ids (or code points). */
struct u32vec {
    uint32_t *v;
    size_t n, cap;
};

static bool vec_reserve(struct u32vec *a, size_t need) {
    if (need <= a->cap) {
        return true;
    }
    size_t c = a->cap ? a->cap : 64;
    while (c < need) {
        c *= 2;
    }
    uint32_t *p = realloc(a->v, c * sizeof *p);
    if (!p) {
        return false;
    }
    a->v = p;
    a->cap = c;
    return true;
}

static inline bool vec_push(struct u32vec *a, uint32_t x) {
    if (a->n == a->cap && !vec_reserve(a, a->n + 1)) {
        return false;
    }
    a->v[a->n++] = x;
    return true;
}

/* A stack is a node: its top element (an index into the grammar's flat
 * element array) and the node below it. Nodes are unique per (top, below),
 * so a node id identifies a whole stack. */
struct stack_pool {
    uint32_t *top;       /* element index, UINT32_MAX for the empty stack */
    uint32_t *below;
    uint32_t *succ_off;  /* successors (stacks after matching a char at top) in lists */
    uint32_t *succ_len;  /* SUCC_UNSET / SUCC_FAILED or the count */
    uint32_t *mark_closure;
    uint32_t *mark_union;
    uint32_t n, cap;
    uint32_t *table;     /* hash of (top, below) -> node id; 0 = free slot */
    uint32_t table_mask;
    struct u32vec lists;
    uint32_t stamp_closure, stamp_union;
};

/* Stack sets, interned: a set id stands for a sequence of distinct stack
 * nodes. Each set remembers where each ASCII character leads (another set
 * id), so walking text through the grammar is mostly table lookups. */
struct set_store {
    struct u32vec members;   /* the sets' node ids, concatenated */
    uint32_t *off, *len;     /* per set id */
    uint32_t **ascii_next;   /* per set id: NULL or [128] set ids (SET_UNKNOWN until computed) */
    uint32_t n, cap;
    uint32_t *table;         /* hash of the members -> set id; 0 = free slot */
    uint32_t table_mask;
    /* steps over other code points: (set << 32 | code point) -> set id */
    uint64_t *step_keys;     /* STEP_KEY_FREE = free slot */
    uint32_t *step_vals;
    uint32_t step_mask, n_steps;
};

#define SET_EMPTY    0u            /* set 0: no stack (the text cannot continue) */
#define SET_NONE     UINT32_MAX    /* allocation failed */
#define SET_UNKNOWN  UINT32_MAX    /* in ascii_next: not computed yet */
#define SET_TOO_MANY (UINT32_MAX - 1) /* in ascii_next: the step exceeds GRAMMAR_MAX_STACKS */
#define SETS_COMPACT (1u << 12)    /* sets kept before the store starts over */
#define SETS_MAX     (1u << 15)    /* sets one operation may create */
#define SET_MEMBERS_MAX (1u << 22) /* their members, all together */
#define STEPS_MEMO_MAX (1u << 18)  /* non-ASCII steps remembered */
#define STEP_KEY_FREE UINT64_MAX

struct cache_entry {
    bool valid;
    uint32_t set;      /* the current stacks' set id */
    struct partial_utf8 partial;
    uint64_t *bits;    /* allowed tokens */
};

/* Per depth of the prefix-tree walk: the stack set and the decoder there. */
struct walk_level {
    uint32_t set;
    struct utf8_decoder dec;
};

struct llama_grammar {
    llama_grammar_element *elems;
    uint32_t n_elems;
    uint32_t *rule_start;
    uint32_t n_rules;
    uint32_t *class_end;      /* [n_elems]: for a character element, the element after its class */
    uint64_t (*ascii)[2];     /* [n_elems]: for a character element, its class members below 128 */

    struct stack_pool pool;
    struct set_store sets;
    struct u32vec stacks;     /* the current stacks (node ids, distinct) */
    struct partial_utf8 partial;

    struct u32vec work;       /* closure work list */
    struct u32vec scratch;    /* the set being built by a step */
    struct u32vec cps;        /* code points of the token being accepted */
    struct walk_level *levels;
    size_t n_levels;

    struct cache_entry cache[GRAMMAR_CACHE_ENTRIES];
    unsigned cache_next;
    uint64_t cache_vocab;     /* serial of the vocabulary the cache and walk_bits are for */
    uint64_t *walk_bits;      /* allowed set of an uncached walk */
};

static void pool_free(struct stack_pool *p) {
    free(p->top);
    free(p->below);
    free(p->succ_off);
    free(p->succ_len);
    free(p->mark_closure);
    free(p->mark_union);
    free(p->table);
    free(p->lists.v);
    memset(p, 0, sizeof *p);
}

static bool pool_reserve(struct stack_pool *p, uint32_t need) {
    if (need <= p->cap) {
        return true;
    }
    if (need > GRAMMAR_POOL_MAX) {
        return false;
    }
    uint32_t c = p->cap ? p->cap : 256;
    while (c < need) {
        c *= 2;
    }
    uint32_t **arrays[] = {&p->top, &p->below, &p->succ_off, &p->succ_len, &p->mark_closure, &p->mark_union};
    for (size_t i = 0; i < sizeof arrays / sizeof arrays[0]; i++) {
        uint32_t *a = realloc(*arrays[i], (size_t)c * sizeof(uint32_t));
        if (!a) {
            return false;
        }
        *arrays[i] = a;
    }
    memset(p->mark_closure + p->cap, 0, (size_t)(c - p->cap) * sizeof(uint32_t));
    memset(p->mark_union + p->cap, 0, (size_t)(c - p->cap) * sizeof(uint32_t));
    p->cap = c;
    return true;
}

static inline uint32_t pool_hash(uint32_t top, uint32_t below) {
    uint64_t h = ((uint64_t)top << 32 | below) * 0x9E3779B97F4A7C15ull;
    return (uint32_t)(h >> 32);
}

static bool pool_rehash(struct stack_pool *p, uint32_t slots) {
    uint32_t *t = calloc(slots, sizeof *t);
    if (!t) {
        return false;
    }
    free(p->table);
    p->table = t;
    p->table_mask = slots - 1;
    for (uint32_t id = 1; id < p->n; id++) {
        uint32_t i = pool_hash(p->top[id], p->below[id]) & p->table_mask;
        while (t[i] != 0) {
            i = (i + 1) & p->table_mask;
        }
        t[i] = id;
    }
    return true;
}

static bool pool_init(struct stack_pool *p) {
    memset(p, 0, sizeof *p);
    if (!pool_reserve(p, 256) || !pool_rehash(p, 512)) {
        pool_free(p);
        return false;
    }
    p->top[NODE_EMPTY] = UINT32_MAX;
    p->below[NODE_EMPTY] = NODE_EMPTY;
    p->succ_len[NODE_EMPTY] = 0;
    p->succ_off[NODE_EMPTY] = 0;
    p->n = 1;
    return true;
}

/* The node for stack `below` with `top` pushed; NODE_NONE when the pool is full. */
static uint32_t pool_intern(struct stack_pool *p, uint32_t top, uint32_t below) {
    uint32_t i = pool_hash(top, below) & p->table_mask;
    for (uint32_t id; (id = p->table[i]) != 0; i = (i + 1) & p->table_mask) {
        if (p->top[id] == top && p->below[id] == below) {
            return id;
        }
    }
    if (!pool_reserve(p, p->n + 1)) {
        return NODE_NONE;
    }
    const uint32_t id = p->n++;
    p->top[id] = top;
    p->below[id] = below;
    p->succ_len[id] = SUCC_UNSET;
    p->succ_off[id] = 0;
    p->table[i] = id;
    if ((uint64_t)p->n * 2 > (uint64_t)p->table_mask + 1 && !pool_rehash(p, (p->table_mask + 1) * 2)) {
        p->n--; /* keep the table consistent: forget the node */
        p->table[i] = 0;
        return NODE_NONE;
    }
    return id;
}

static uint32_t next_stamp(uint32_t *stamp, uint32_t *marks, uint32_t n) {
    if (++*stamp == 0) {
        memset(marks, 0, (size_t)n * sizeof *marks);
        *stamp = 1;
    }
    return *stamp;
}

/* ======================================================================== */
/* rules                                                                    */
/* ======================================================================== */

static inline bool is_end_of_alt(const struct llama_grammar *g, uint32_t pos) {
    return g->elems[pos].type == LLAMA_GRETYPE_END || g->elems[pos].type == LLAMA_GRETYPE_ALT;
}

static inline bool is_char_type(enum llama_gretype t) {
    return t == LLAMA_GRETYPE_CHAR || t == LLAMA_GRETYPE_CHAR_NOT || t == LLAMA_GRETYPE_CHAR_ALT ||
           t == LLAMA_GRETYPE_CHAR_RNG_UPPER;
}

/* b1892's llama_grammar_match_char on the class starting at pos. */
static bool match_char(const struct llama_grammar *g, uint32_t pos, uint32_t chr) {
    const bool positive = g->elems[pos].type == LLAMA_GRETYPE_CHAR;
    if (chr < 128) {
        return ((g->ascii[pos][chr >> 6] >> (chr & 63)) & 1) == positive;
    }
    const llama_grammar_element *e = g->elems + pos;
    bool found = false;
    do {
        if (e[1].type == LLAMA_GRETYPE_CHAR_RNG_UPPER) {
            found = found || (e->value <= chr && chr <= e[1].value);
            e += 2;
        } else {
            found = found || e->value == chr;
            e += 1;
        }
    } while (e->type == LLAMA_GRETYPE_CHAR_ALT);
    return found == positive;
}

/* b1892's llama_grammar_match_partial_char: can a sequence that starts with
 * these bytes complete to a code point the class at pos accepts? */
static bool match_partial_char(const struct llama_grammar *g, uint32_t pos, struct partial_utf8 partial) {
    const bool positive = g->elems[pos].type == LLAMA_GRETYPE_CHAR;
    const int n_remain = partial.n_remain;
    if (n_remain < 0 || (n_remain == 1 && partial.value < 2)) {
        return false; /* invalid, or an overlong 2-byte form of a 7-bit char */
    }
    uint32_t low = partial.value << (n_remain * 6);
    const uint32_t high = low | ((1u << (n_remain * 6)) - 1);
    if (low == 0) {
        if (n_remain == 2) {
            low = 1u << 11;
        } else if (n_remain == 3) {
            low = 1u << 16;
        }
    }
    const llama_grammar_element *e = g->elems + pos;
    do {
        if (e[1].type == LLAMA_GRETYPE_CHAR_RNG_UPPER) {
            if (e->value <= high && low <= e[1].value) {
                return positive;
            }
            e += 2;
        } else {
            if (low <= e->value && e->value <= high) {
                return positive;
            }
            e += 1;
        }
    } while (e->type == LLAMA_GRETYPE_CHAR_ALT);
    return !positive;
}

/* Checks the caller's rule arrays and copies them into one flat array. */
static bool grammar_load_rules(struct llama_grammar *g, const llama_grammar_element **rules, size_t n_rules,
                               size_t start) {
    if (!rules || n_rules == 0) {
        error_set("grammar: no rules");
        return false;
    }
    if (n_rules > GRAMMAR_RULE_MAX_LEN) {
        error_set("grammar: too many rules (%zu)", n_rules);
        return false;
    }
    if (start >= n_rules) {
        error_set("grammar: start rule %zu out of range (%zu rules)", start, n_rules);
        return false;
    }
    size_t total = 0;
    for (size_t r = 0; r < n_rules; r++) {
        if (!rules[r]) {
            error_set("grammar: rule %zu is missing", r);
            return false;
        }
        size_t len = 0;
        while (rules[r][len].type != LLAMA_GRETYPE_END) {
            if (++len >= GRAMMAR_RULE_MAX_LEN) {
                error_set("grammar: rule %zu has no END within %u elements", r, GRAMMAR_RULE_MAX_LEN);
                return false;
            }
        }
        total += len + 1;
        if (total >= UINT32_MAX / 2) {
            error_set("grammar: too many elements");
            return false;
        }
    }
    g->n_rules = (uint32_t)n_rules;
    g->n_elems = (uint32_t)total;
    g->elems = malloc(total * sizeof *g->elems);
    g->rule_start = malloc(n_rules * sizeof *g->rule_start);
    g->class_end = calloc(total, sizeof *g->class_end);
    g->ascii = calloc(total, sizeof *g->ascii);
    if (!g->elems || !g->rule_start || !g->class_end || !g->ascii) {
        error_set("grammar: out of memory");
        return false;
    }
    uint32_t at = 0;
    for (size_t r = 0; r < n_rules; r++) {
        g->rule_start[r] = at;
        enum llama_gretype prev = LLAMA_GRETYPE_ALT;
        for (size_t i = 0;; i++) {
            const llama_grammar_element e = rules[r][i];
            switch (e.type) {
            case LLAMA_GRETYPE_END:
            case LLAMA_GRETYPE_ALT:
            case LLAMA_GRETYPE_CHAR:
            case LLAMA_GRETYPE_CHAR_NOT:
                break;
            case LLAMA_GRETYPE_RULE_REF:
                if (e.value >= n_rules) {
                    error_set("grammar: rule %zu element %zu refers to rule %u of %zu", r, i, e.value, n_rules);
                    return false;
                }
                break;
            case LLAMA_GRETYPE_CHAR_RNG_UPPER:
                if (prev != LLAMA_GRETYPE_CHAR && prev != LLAMA_GRETYPE_CHAR_NOT && prev != LLAMA_GRETYPE_CHAR_ALT) {
                    error_set("grammar: rule %zu element %zu: CHAR_RNG_UPPER must follow a character", r, i);
                    return false;
                }
                break;
            case LLAMA_GRETYPE_CHAR_ALT:
                if (!is_char_type(prev)) {
                    error_set("grammar: rule %zu element %zu: CHAR_ALT must follow a character", r, i);
                    return false;
                }
                break;
            default:
                error_set("grammar: rule %zu element %zu has unknown type %d", r, i, (int)e.type);
                return false;
            }
            g->elems[at++] = e;
            prev = e.type;
            if (e.type == LLAMA_GRETYPE_END) {
                break;
            }
        }
    }
    /* each character class: where it ends, and its members below 128 */
    for (uint32_t p = 0; p < g->n_elems; p++) {
        if (g->elems[p].type != LLAMA_GRETYPE_CHAR && g->elems[p].type != LLAMA_GRETYPE_CHAR_NOT) {
            continue;
        }
        const llama_grammar_element *e = g->elems + p;
        do {
            uint32_t lo = e->value, hi = e->value;
            if (e[1].type == LLAMA_GRETYPE_CHAR_RNG_UPPER) {
                hi = e[1].value;
                e += 2;
            } else {
                e += 1;
            }
            for (uint32_t c = lo; c <= hi && c < 128; c++) {
                g->ascii[p][c >> 6] |= 1ull << (c & 63);
            }
        } while (e->type == LLAMA_GRETYPE_CHAR_ALT);
        g->class_end[p] = (uint32_t)(e - g->elems);
    }
    return true;
}

/* Refuses left recursion reachable from the start rule: a rule that can
 * reach itself through first elements (after nullable rule references)
 * would make b1892's stack expansion recurse forever. */
static bool grammar_check_left_recursion(const struct llama_grammar *g, uint32_t start) {
    const uint32_t n = g->n_rules;
    bool ok = false;
    uint8_t *nullable = calloc(n, 1);
    uint8_t *state = calloc(n, 1); /* 0 unreached, 1 reachable, 2 on the DFS path, 3 done */
    uint32_t *todo = malloc((size_t)n * sizeof *todo);
    uint32_t *edge_start = malloc(((size_t)n + 1) * sizeof *edge_start);
    uint32_t *edges = malloc(((size_t)g->n_elems + 1) * sizeof *edges);
    uint32_t *cursor = malloc((size_t)n * sizeof *cursor);
    if (!nullable || !state || !todo || !edge_start || !edges || !cursor) {
        error_set("grammar: out of memory");
        goto done;
    }
    /* nullable rules: some alternative made only of nullable references */
    for (bool changed = true; changed;) {
        changed = false;
        for (uint32_t r = 0; r < n; r++) {
            bool alt_nullable = true;
            for (uint32_t p = g->rule_start[r]; !nullable[r]; p++) {
                const llama_grammar_element e = g->elems[p];
                if (e.type == LLAMA_GRETYPE_END || e.type == LLAMA_GRETYPE_ALT) {
                    if (alt_nullable) {
                        nullable[r] = 1;
                        changed = true;
                    }
                    if (e.type == LLAMA_GRETYPE_END) {
                        break;
                    }
                    alt_nullable = true;
                } else if (e.type != LLAMA_GRETYPE_RULE_REF || !nullable[e.value]) {
                    alt_nullable = false;
                }
            }
        }
    }
    /* rules reachable from start */
    uint32_t n_todo = 0;
    todo[n_todo++] = start;
    state[start] = 1;
    while (n_todo > 0) {
        const uint32_t r = todo[--n_todo];
        for (uint32_t p = g->rule_start[r]; g->elems[p].type != LLAMA_GRETYPE_END; p++) {
            const llama_grammar_element e = g->elems[p];
            if (e.type == LLAMA_GRETYPE_RULE_REF && !state[e.value]) {
                state[e.value] = 1;
                todo[n_todo++] = e.value;
            }
        }
    }
    /* left-corner edges r -> s: s referenced after a nullable prefix of an alternative of r */
    uint32_t n_edges = 0;
    for (uint32_t r = 0; r < n; r++) {
        edge_start[r] = n_edges;
        bool in_prefix = true;
        for (uint32_t p = g->rule_start[r]; state[r] && g->elems[p].type != LLAMA_GRETYPE_END; p++) {
            const llama_grammar_element e = g->elems[p];
            if (e.type == LLAMA_GRETYPE_ALT) {
                in_prefix = true;
            } else if (in_prefix && e.type == LLAMA_GRETYPE_RULE_REF) {
                edges[n_edges++] = e.value;
                in_prefix = nullable[e.value] != 0;
            } else {
                in_prefix = false;
            }
        }
    }
    edge_start[n] = n_edges;
    /* a cycle among them is left recursion */
    for (uint32_t root = 0; root < n; root++) {
        if (state[root] != 1) {
            continue;
        }
        uint32_t depth = 0;
        todo[depth++] = root; /* todo is now the DFS path */
        state[root] = 2;
        cursor[root] = edge_start[root];
        while (depth > 0) {
            const uint32_t r = todo[depth - 1];
            if (cursor[r] == edge_start[r + 1]) {
                state[r] = 3;
                depth--;
                continue;
            }
            const uint32_t s = edges[cursor[r]++];
            if (state[s] == 2) {
                error_set("grammar: rule %u is left-recursive", s);
                goto done;
            }
            if (state[s] == 1) {
                state[s] = 2;
                cursor[s] = edge_start[s];
                todo[depth++] = s;
            }
        }
    }
    ok = true;
done:
    free(nullable);
    free(state);
    free(todo);
    free(edge_start);
    free(edges);
    free(cursor);
    return ok;
}

/* ======================================================================== */
/* stack expansion and steps                                                */
/* ======================================================================== */

/* b1892's llama_grammar_advance_stack from `root` (a stack whose top may be a
 * rule reference): appends to *out, once each, the stacks whose top is a
 * character element (or the empty stack), in b1892's order. Nodes marked
 * with `stamp` were expanded already in this session and are skipped, which
 * is what removes b1892's duplicate stacks. */
static enum step_status closure_add(struct llama_grammar *g, uint32_t root, struct u32vec *out, size_t out_base,
                                    uint32_t stamp, uint32_t *visits) {
    struct stack_pool *p = &g->pool;
    g->work.n = 0;
    if (!vec_push(&g->work, root)) {
        return STEP_POOL_FULL;
    }
    while (g->work.n > 0) {
        const uint32_t node = g->work.v[--g->work.n];
        if (p->mark_closure[node] == stamp) {
            continue;
        }
        p->mark_closure[node] = stamp;
        if (++*visits > GRAMMAR_CLOSURE_VISITS) {
            return STEP_TOO_MANY;
        }
        if (node == NODE_EMPTY || g->elems[p->top[node]].type != LLAMA_GRETYPE_RULE_REF) {
            if (!vec_push(out, node)) {
                return STEP_POOL_FULL;
            }
            if (out->n - out_base > GRAMMAR_MAX_STACKS) {
                return STEP_TOO_MANY;
            }
            continue;
        }
        /* replace the reference by each alternative of the rule, the element
         * after the reference (if any) going below it */
        const uint32_t pos = p->top[node];
        uint32_t base = p->below[node];
        if (!is_end_of_alt(g, pos + 1)) {
            base = pool_intern(p, pos + 1, base);
            if (base == NODE_NONE) {
                return STEP_POOL_FULL;
            }
        }
        const size_t first_child = g->work.n;
        for (uint32_t alt = g->rule_start[g->elems[pos].value];;) {
            uint32_t child = base;
            if (!is_end_of_alt(g, alt)) {
                child = pool_intern(p, alt, base);
                if (child == NODE_NONE) {
                    return STEP_POOL_FULL;
                }
            }
            if (!vec_push(&g->work, child)) {
                return STEP_POOL_FULL;
            }
            while (!is_end_of_alt(g, alt)) {
                alt++;
            }
            if (g->elems[alt].type != LLAMA_GRETYPE_ALT) {
                break;
            }
            alt++;
        }
        /* the first alternative is expanded first */
        for (size_t i = first_child, j = g->work.n - 1; i < j; i++, j--) {
            uint32_t t = g->work.v[i];
            g->work.v[i] = g->work.v[j];
            g->work.v[j] = t;
        }
    }
    return STEP_OK;
}

/* Makes sure node s (top = a character class) knows the stacks that follow
 * a match of its top: the class popped, then expanded. */
static enum step_status node_successors(struct llama_grammar *g, uint32_t s) {
    struct stack_pool *p = &g->pool;
    if (p->succ_len[s] != SUCC_UNSET) {
        return p->succ_len[s] == SUCC_FAILED ? STEP_TOO_MANY : STEP_OK;
    }
    const uint32_t after = g->class_end[p->top[s]];
    uint32_t raw = p->below[s];
    if (!is_end_of_alt(g, after)) {
        raw = pool_intern(p, after, raw);
        if (raw == NODE_NONE) {
            return STEP_POOL_FULL;
        }
    }
    const uint32_t stamp = next_stamp(&p->stamp_closure, p->mark_closure, p->n);
    const size_t off = p->lists.n;
    uint32_t visits = 0;
    enum step_status st = closure_add(g, raw, &p->lists, off, stamp, &visits);
    if (st == STEP_OK && p->lists.n > 4 * (size_t)GRAMMAR_POOL_MAX) {
        st = STEP_POOL_FULL;
    }
    if (st != STEP_OK) {
        p->lists.n = off;
        if (st == STEP_TOO_MANY) {
            p->succ_len[s] = SUCC_FAILED;
        }
        return st;
    }
    p->succ_off[s] = (uint32_t)off;
    p->succ_len[s] = (uint32_t)(p->lists.n - off);
    return STEP_OK;
}

static void set_store_free(struct set_store *st) {
    for (uint32_t i = 0; i < st->n; i++) {
        free(st->ascii_next[i]);
    }
    free(st->members.v);
    free(st->off);
    free(st->len);
    free(st->ascii_next);
    free(st->table);
    free(st->step_keys);
    free(st->step_vals);
    memset(st, 0, sizeof *st);
}

static uint32_t set_hash(const uint32_t *ids, size_t n) {
    uint64_t h = 1469598103934665603ull ^ n;
    for (size_t i = 0; i < n; i++) {
        h = (h ^ ids[i]) * 1099511628211ull;
    }
    return (uint32_t)(h ^ (h >> 32));
}

static bool set_store_rehash(struct set_store *st, uint32_t slots) {
    uint32_t *t = calloc(slots, sizeof *t);
    if (!t) {
        return false;
    }
    free(st->table);
    st->table = t;
    st->table_mask = slots - 1;
    for (uint32_t id = 1; id < st->n; id++) {
        uint32_t i = set_hash(st->members.v + st->off[id], st->len[id]) & st->table_mask;
        while (t[i] != 0) {
            i = (i + 1) & st->table_mask;
        }
        t[i] = id;
    }
    return true;
}

/* An empty store holding only SET_EMPTY. */
static bool set_store_init(struct set_store *st) {
    memset(st, 0, sizeof *st);
    st->cap = 64;
    st->off = calloc(st->cap, sizeof *st->off);
    st->len = calloc(st->cap, sizeof *st->len);
    st->ascii_next = calloc(st->cap, sizeof *st->ascii_next);
    if (!st->off || !st->len || !st->ascii_next || !set_store_rehash(st, 128)) {
        set_store_free(st);
        return false;
    }
    st->n = 1;
    return true;
}

/* The id of the set with these members (in this order); SET_NONE when out of room. */
static uint32_t set_intern(struct set_store *st, const uint32_t *ids, size_t n) {
    if (n == 0) {
        return SET_EMPTY;
    }
    uint32_t i = set_hash(ids, n) & st->table_mask;
    for (uint32_t id; (id = st->table[i]) != 0; i = (i + 1) & st->table_mask) {
        if (st->len[id] == n && memcmp(st->members.v + st->off[id], ids, n * sizeof *ids) == 0) {
            return id;
        }
    }
    if (st->n >= SETS_MAX || st->members.n + n > SET_MEMBERS_MAX || !vec_reserve(&st->members, st->members.n + n)) {
        return SET_NONE;
    }
    if (st->n == st->cap) {
        const uint32_t cap = st->cap * 2;
        uint32_t *off = realloc(st->off, cap * sizeof *off);
        if (off) {
            st->off = off;
        }
        uint32_t *len = off ? realloc(st->len, cap * sizeof *len) : NULL;
        if (len) {
            st->len = len;
        }
        uint32_t **next = len ? realloc(st->ascii_next, cap * sizeof *next) : NULL;
        if (!next) {
            return SET_NONE;
        }
        st->ascii_next = next;
        st->cap = cap;
    }
    const uint32_t id = st->n++;
    st->off[id] = (uint32_t)st->members.n;
    st->len[id] = (uint32_t)n;
    st->ascii_next[id] = NULL;
    memcpy(st->members.v + st->members.n, ids, n * sizeof *ids);
    st->members.n += n;
    st->table[i] = id;
    if ((uint64_t)st->n * 2 > (uint64_t)st->table_mask + 1 && !set_store_rehash(st, (st->table_mask + 1) * 2)) {
        st->table[i] = 0;
        st->n--;
        st->members.n -= n;
        return SET_NONE;
    }
    return id;
}

static inline uint32_t step_slot(uint64_t key, uint32_t mask) {
    return (uint32_t)((key * 0x9E3779B97F4A7C15ull) >> 32) & mask;
}

/* The remembered step for key, or SET_UNKNOWN. */
static uint32_t step_memo_get(const struct set_store *st, uint64_t key) {
    if (!st->step_keys) {
        return SET_UNKNOWN;
    }
    for (uint32_t i = step_slot(key, st->step_mask);; i = (i + 1) & st->step_mask) {
        if (st->step_keys[i] == key) {
            return st->step_vals[i];
        }
        if (st->step_keys[i] == STEP_KEY_FREE) {
            return SET_UNKNOWN;
        }
    }
}

/* Remembers a step (best effort: a full or failed table just forgets). */
static void step_memo_put(struct set_store *st, uint64_t key, uint32_t value) {
    if (st->n_steps >= STEPS_MEMO_MAX) {
        return;
    }
    if (!st->step_keys || (st->n_steps + 1) * 2 > st->step_mask + 1) {
        const uint32_t slots = st->step_keys ? (st->step_mask + 1) * 2 : 1024;
        uint64_t *keys = malloc(slots * sizeof *keys);
        uint32_t *vals = malloc(slots * sizeof *vals);
        if (!keys || !vals) {
            free(keys);
            free(vals);
            return;
        }
        memset(keys, 0xFF, slots * sizeof *keys);
        for (uint32_t i = 0; st->step_keys && i <= st->step_mask; i++) {
            if (st->step_keys[i] != STEP_KEY_FREE) {
                uint32_t j = step_slot(st->step_keys[i], slots - 1);
                while (keys[j] != STEP_KEY_FREE) {
                    j = (j + 1) & (slots - 1);
                }
                keys[j] = st->step_keys[i];
                vals[j] = st->step_vals[i];
            }
        }
        free(st->step_keys);
        free(st->step_vals);
        st->step_keys = keys;
        st->step_vals = vals;
        st->step_mask = slots - 1;
    }
    uint32_t i = step_slot(key, st->step_mask);
    while (st->step_keys[i] != STEP_KEY_FREE) {
        i = (i + 1) & st->step_mask;
    }
    st->step_keys[i] = key;
    st->step_vals[i] = value;
    st->n_steps++;
}

/* The stacks after matching chr from the stacks in[0..n_in) (which must not
 * live in g->scratch), distinct, in g->scratch. */
static enum step_status step_union(struct llama_grammar *g, const uint32_t *in, size_t n_in, uint32_t chr) {
    struct stack_pool *p = &g->pool;
    const uint32_t stamp = next_stamp(&p->stamp_union, p->mark_union, p->n);
    g->scratch.n = 0;
    for (size_t i = 0; i < n_in; i++) {
        const uint32_t s = in[i];
        if (s == NODE_EMPTY || !match_char(g, p->top[s], chr)) {
            continue;
        }
        enum step_status st = node_successors(g, s);
        if (st != STEP_OK) {
            return st;
        }
        const uint32_t off = p->succ_off[s], len = p->succ_len[s];
        for (uint32_t j = 0; j < len; j++) {
            const uint32_t t = p->lists.v[off + j];
            if (p->mark_union[t] == stamp) {
                continue;
            }
            p->mark_union[t] = stamp;
            if (!vec_push(&g->scratch, t)) {
                return STEP_POOL_FULL;
            }
            if (g->scratch.n > GRAMMAR_MAX_STACKS) {
                return STEP_TOO_MANY;
            }
        }
    }
    return STEP_OK;
}

/* The set after matching chr from set `set` (SET_EMPTY when no stack
 * survives); steps are remembered (a table per set for ASCII, a hash for
 * the rest). */
static enum step_status step_set(struct llama_grammar *g, uint32_t set, uint32_t chr, uint32_t *out) {
    struct set_store *st = &g->sets;
    if (set == SET_EMPTY) {
        *out = SET_EMPTY;
        return STEP_OK;
    }
    uint32_t *next = NULL;
    const uint64_t key = (uint64_t)set << 32 | chr;
    uint32_t known;
    if (chr < 128) {
        next = st->ascii_next[set];
        if (!next) {
            next = malloc(128 * sizeof *next);
            if (!next) {
                return STEP_POOL_FULL;
            }
            memset(next, 0xFF, 128 * sizeof *next); /* SET_UNKNOWN */
            st->ascii_next[set] = next;
        }
        known = next[chr];
    } else {
        known = step_memo_get(st, key);
    }
    if (known == SET_TOO_MANY) {
        return STEP_TOO_MANY;
    }
    if (known != SET_UNKNOWN) {
        *out = known;
        return STEP_OK;
    }
    enum step_status status = step_union(g, st->members.v + st->off[set], st->len[set], chr);
    uint32_t id = SET_TOO_MANY;
    if (status == STEP_OK) {
        id = set_intern(st, g->scratch.v, g->scratch.n);
        if (id == SET_NONE) {
            return STEP_POOL_FULL;
        }
    } else if (status != STEP_TOO_MANY) {
        return status;
    }
    if (next) {
        next[chr] = id;
    } else {
        step_memo_put(st, key, id);
    }
    *out = id;
    return status;
}

/* Whether some non-empty stack of the set accepts a sequence that starts
 * with the partial bytes (b1892's check for a token ending mid-character). */
static bool set_matches_partial(const struct llama_grammar *g, uint32_t set, struct partial_utf8 partial) {
    const uint32_t *ids = g->sets.members.v + g->sets.off[set];
    for (uint32_t i = 0; i < g->sets.len[set]; i++) {
        if (ids[i] != NODE_EMPTY && match_partial_char(g, g->pool.top[ids[i]], partial)) {
            return true;
        }
    }
    return false;
}

static void pool_full_error(void) {
    error_set("grammar: parse stacks need more than %u nodes or %u sets (or memory ran out)", GRAMMAR_POOL_MAX,
              SETS_MAX);
}

bool grammar_allows_eos(const struct llama_grammar *g) {
    for (size_t i = 0; i < g->stacks.n; i++) {
        if (g->stacks.v[i] == NODE_EMPTY) {
            return true;
        }
    }
    return false;
}

/* Does the grammar accept this token's piece (not EOS, piece not empty),
 * starting from the current stacks (set `current`)? */
static enum step_status token_check(struct llama_grammar *g, const struct grammar_vocab *v, uint32_t current,
                                    llama_token id, bool *allowed) {
    *allowed = false;
    uint32_t set = current;
    struct utf8_decoder dec = utf8_start(g->partial);
    const uint8_t *bytes = (const uint8_t *)v->bytes + v->piece_off[id];
    for (uint32_t i = 0; i < v->piece_len[id]; i++) {
        uint32_t cp;
        enum utf8_result r = utf8_feed(&dec, bytes[i], &cp);
        if (r == UTF8_INVALID) {
            return STEP_OK;
        }
        if (r == UTF8_CODE_POINT) {
            enum step_status st = step_set(g, set, cp, &set);
            if (st != STEP_OK || set == SET_EMPTY) {
                return st == STEP_TOO_MANY ? STEP_OK : st;
            }
        }
    }
    const struct partial_utf8 end = {dec.value, dec.n_remain};
    *allowed = dec.n_remain == 0 || set_matches_partial(g, set, end);
    return STEP_OK;
}

/* Walks the whole prefix tree once, setting bits[id] for every allowed token
 * (EOS and never-allowed pieces are not in the tree). */
static enum step_status walk_trie(struct llama_grammar *g, const struct grammar_vocab *v, uint32_t current,
                                  uint64_t *bits) {
    memset(bits, 0, ((size_t)v->n_vocab + 63) / 64 * sizeof *bits);
    const size_t need_levels = (size_t)v->max_depth + 1;
    if (g->n_levels < need_levels) {
        struct walk_level *l = realloc(g->levels, need_levels * sizeof *l);
        if (!l) {
            return STEP_POOL_FULL;
        }
        g->levels = l;
        g->n_levels = need_levels;
    }
    struct walk_level *lv = g->levels;
    lv[0].set = current;
    lv[0].dec = utf8_start(g->partial);
    for (uint32_t k = 0; k < v->n_nodes;) {
        const struct trie_node *node = &v->nodes[k];
        const struct walk_level *up = &lv[node->depth - 1];
        struct walk_level *here = &lv[node->depth];
        here->dec = up->dec;
        here->set = up->set;
        uint32_t cp;
        const enum utf8_result r = utf8_feed(&here->dec, node->byte, &cp);
        if (r == UTF8_INVALID) {
            k = node->end;
            continue;
        }
        if (r == UTF8_CODE_POINT) {
            /* the common case inline: an ASCII step this set has taken before */
            const uint32_t *next = cp < 128 ? g->sets.ascii_next[up->set] : NULL;
            if (next && next[cp] < SET_TOO_MANY) {
                here->set = next[cp];
            } else {
                enum step_status st = step_set(g, up->set, cp, &here->set);
                if (st == STEP_POOL_FULL) {
                    return st;
                }
                if (st == STEP_TOO_MANY) {
                    here->set = SET_EMPTY;
                }
            }
            if (here->set == SET_EMPTY) {
                k = node->end; /* no stack survives: nothing below is allowed */
                continue;
            }
        }
        if (node->tok_count > 0) {
            /* at a character boundary the (non-empty) set accepts; mid-character
             * some stack must accept a completion of the partial bytes */
            const struct partial_utf8 end = {here->dec.value, here->dec.n_remain};
            if (here->dec.n_remain == 0 || set_matches_partial(g, here->set, end)) {
                for (uint32_t t = 0; t < node->tok_count; t++) {
                    const llama_token id = v->node_tokens[node->tok_first + t];
                    bits[id >> 6] |= 1ull << (id & 63);
                }
            }
        }
        k++;
    }
    return STEP_OK;
}

/* ======================================================================== */
/* the allowed-set cache                                                    */
/* ======================================================================== */

static struct partial_utf8 partial_key(struct partial_utf8 p) {
    if (p.n_remain <= 0) {
        p.value = 0;
        p.n_remain = 0; /* an invalid state decodes like a fresh one */
    }
    return p;
}

static void cache_clear(struct llama_grammar *g) {
    for (int i = 0; i < GRAMMAR_CACHE_ENTRIES; i++) {
        g->cache[i].valid = false;
    }
}

/* Switches the cache and walk scratch to this vocabulary (bit sets sized for it). */
static bool cache_bind(struct llama_grammar *g, const struct grammar_vocab *v) {
    if (g->cache_vocab == v->serial) {
        return true;
    }
    const size_t bytes = ((size_t)v->n_vocab + 63) / 64 * sizeof(uint64_t);
    for (int i = 0; i < GRAMMAR_CACHE_ENTRIES; i++) {
        free(g->cache[i].bits);
        g->cache[i].bits = NULL;
        g->cache[i].valid = false;
    }
    free(g->walk_bits);
    g->walk_bits = malloc(bytes);
    g->cache_vocab = g->walk_bits ? v->serial : 0;
    return g->walk_bits != NULL;
}

static const uint64_t *cache_lookup(const struct llama_grammar *g, uint32_t set) {
    const struct partial_utf8 pk = partial_key(g->partial);
    for (int i = 0; i < GRAMMAR_CACHE_ENTRIES; i++) {
        const struct cache_entry *e = &g->cache[i];
        if (e->valid && e->set == set && e->partial.value == pk.value && e->partial.n_remain == pk.n_remain) {
            return e->bits;
        }
    }
    return NULL;
}

static void cache_store(struct llama_grammar *g, const struct grammar_vocab *v, uint32_t set, const uint64_t *bits) {
    struct cache_entry *e = &g->cache[g->cache_next];
    g->cache_next = (g->cache_next + 1) % GRAMMAR_CACHE_ENTRIES;
    const size_t bytes = ((size_t)v->n_vocab + 63) / 64 * sizeof(uint64_t);
    e->valid = false;
    if (!e->bits && !(e->bits = malloc(bytes))) {
        return;
    }
    e->set = set;
    e->partial = partial_key(g->partial);
    memcpy(e->bits, bits, bytes);
    e->valid = true;
}

/* ======================================================================== */
/* lifecycle                                                                */
/* ======================================================================== */

/* Interns the stacks ids[0..n) of pool `from` into pool `to`, writing the new
 * ids to out[0..n). false when `to` is full. */
static bool pool_import(struct stack_pool *to, const struct stack_pool *from, const uint32_t *ids, size_t n,
                        uint32_t *out, struct u32vec *scratch) {
    for (size_t i = 0; i < n; i++) {
        scratch->n = 0;
        for (uint32_t s = ids[i]; s != NODE_EMPTY; s = from->below[s]) {
            if (!vec_push(scratch, from->top[s])) {
                return false;
            }
        }
        uint32_t node = NODE_EMPTY;
        while (scratch->n > 0) {
            node = pool_intern(to, scratch->v[--scratch->n], node);
            if (node == NODE_NONE) {
                return false;
            }
        }
        out[i] = node;
    }
    return true;
}

/* Keeps memory proportional to what is in use: past GRAMMAR_POOL_COMPACT
 * nodes the pool is rebuilt with only the current stacks (the successor
 * lists are recomputed as needed); the set store starts over past
 * SETS_COMPACT sets or whenever node ids change; the cache follows it. */
static void grammar_compact(struct llama_grammar *g) {
    bool reset_sets = g->sets.n > SETS_COMPACT || g->sets.members.n > SET_MEMBERS_MAX / 4;
    if (g->pool.n > GRAMMAR_POOL_COMPACT) {
        struct stack_pool fresh;
        if (pool_init(&fresh) && vec_reserve(&g->scratch, g->stacks.n) &&
            pool_import(&fresh, &g->pool, g->stacks.v, g->stacks.n, g->scratch.v, &g->work)) {
            memcpy(g->stacks.v, g->scratch.v, g->stacks.n * sizeof *g->stacks.v);
            pool_free(&g->pool);
            g->pool = fresh;
            reset_sets = true;
        } else {
            pool_free(&fresh);
        }
    }
    if (reset_sets) {
        struct set_store fresh;
        if (set_store_init(&fresh)) {
            set_store_free(&g->sets);
            g->sets = fresh;
            cache_clear(g);
        }
    }
}

void grammar_free(struct llama_grammar *g) {
    if (!g) {
        return;
    }
    free(g->elems);
    free(g->rule_start);
    free(g->class_end);
    free(g->ascii);
    pool_free(&g->pool);
    set_store_free(&g->sets);
    free(g->stacks.v);
    free(g->work.v);
    free(g->scratch.v);
    free(g->cps.v);
    free(g->levels);
    for (int i = 0; i < GRAMMAR_CACHE_ENTRIES; i++) {
        free(g->cache[i].bits);
    }
    free(g->walk_bits);
    free(g);
}

struct llama_grammar *grammar_create(const llama_grammar_element **rules, size_t n_rules, size_t start) {
    struct llama_grammar *g = calloc(1, sizeof *g);
    if (!g) {
        error_set("grammar: out of memory");
        return NULL;
    }
    if (!grammar_load_rules(g, rules, n_rules, start) || !grammar_check_left_recursion(g, (uint32_t)start)) {
        grammar_free(g);
        return NULL;
    }
    if (!pool_init(&g->pool) || !set_store_init(&g->sets)) {
        error_set("grammar: out of memory");
        grammar_free(g);
        return NULL;
    }
    /* one stack per alternative of the start rule, expanded */
    struct stack_pool *p = &g->pool;
    const uint32_t stamp = next_stamp(&p->stamp_closure, p->mark_closure, p->n);
    uint32_t visits = 0;
    for (uint32_t alt = g->rule_start[start];;) {
        uint32_t root = is_end_of_alt(g, alt) ? NODE_EMPTY : pool_intern(p, alt, NODE_EMPTY);
        enum step_status st = root == NODE_NONE ? STEP_POOL_FULL : closure_add(g, root, &g->stacks, 0, stamp, &visits);
        if (st != STEP_OK) {
            if (st == STEP_TOO_MANY) {
                error_set("grammar: more than %u initial parse stacks", GRAMMAR_MAX_STACKS);
            } else {
                pool_full_error();
            }
            grammar_free(g);
            return NULL;
        }
        while (!is_end_of_alt(g, alt)) {
            alt++;
        }
        if (g->elems[alt].type != LLAMA_GRETYPE_ALT) {
            break;
        }
        alt++;
    }
    return g;
}

struct llama_grammar *grammar_copy(const struct llama_grammar *src) {
    struct llama_grammar *g = calloc(1, sizeof *g);
    if (!g) {
        error_set("grammar: out of memory");
        return NULL;
    }
    g->n_elems = src->n_elems;
    g->n_rules = src->n_rules;
    g->partial = src->partial;
    g->elems = malloc((size_t)g->n_elems * sizeof *g->elems);
    g->rule_start = malloc((size_t)g->n_rules * sizeof *g->rule_start);
    g->class_end = malloc((size_t)g->n_elems * sizeof *g->class_end);
    g->ascii = malloc((size_t)g->n_elems * sizeof *g->ascii);
    if (!g->elems || !g->rule_start || !g->class_end || !g->ascii || !pool_init(&g->pool) ||
        !set_store_init(&g->sets) || !vec_reserve(&g->stacks, src->stacks.n) ||
        !pool_import(&g->pool, &src->pool, src->stacks.v, src->stacks.n, g->stacks.v, &g->work)) {
        error_set("grammar: out of memory");
        grammar_free(g);
        return NULL;
    }
    memcpy(g->elems, src->elems, (size_t)g->n_elems * sizeof *g->elems);
    memcpy(g->rule_start, src->rule_start, (size_t)g->n_rules * sizeof *g->rule_start);
    memcpy(g->class_end, src->class_end, (size_t)g->n_elems * sizeof *g->class_end);
    memcpy(g->ascii, src->ascii, (size_t)g->n_elems * sizeof *g->ascii);
    g->stacks.n = src->stacks.n;
    return g;
}

/* ======================================================================== */
/* sampling and accepting                                                   */
/* ======================================================================== */

static void reject_all(llama_token_data_array *cand) {
    for (size_t i = 0; i < cand->size; i++) {
        cand->data[i].logit = -INFINITY;
    }
}

bool grammar_sample(struct llama_grammar *g, const struct grammar_vocab *v, llama_token_data_array *cand) {
    return grammar_sample_with(g, v, cand, GRAMMAR_STRATEGY_AUTO);
}

bool grammar_sample_with(struct llama_grammar *g, const struct grammar_vocab *v, llama_token_data_array *cand,
                         enum grammar_strategy strategy) {
    grammar_compact(g);
    const bool allow_eos = grammar_allows_eos(g);
    const uint32_t current = set_intern(&g->sets, g->stacks.v, g->stacks.n);
    const uint64_t *bits = NULL;
    if (current == SET_NONE) {
        goto fail;
    }
    if (strategy != GRAMMAR_STRATEGY_PER_TOKEN) {
        if (!cache_bind(g, v)) {
            goto fail;
        }
        if (strategy == GRAMMAR_STRATEGY_AUTO) {
            bits = cache_lookup(g, current);
        }
        /* a walk costs about one step per tree node; per-token checks cost
         * the pieces' lengths: walk when many candidates are asked about */
        if (!bits && (strategy == GRAMMAR_STRATEGY_TRIE || cand->size * 4 >= (size_t)v->n_vocab)) {
            if (walk_trie(g, v, current, g->walk_bits) != STEP_OK) {
                goto fail;
            }
            bits = g->walk_bits;
            if (strategy == GRAMMAR_STRATEGY_AUTO) {
                cache_store(g, v, current, bits);
            }
        }
    }
    for (size_t i = 0; i < cand->size; i++) {
        const llama_token id = cand->data[i].id;
        bool allowed;
        if (id < 0 || id >= v->n_vocab) {
            allowed = false;
        } else if (id == v->eos) {
            allowed = allow_eos;
        } else if (v->piece_len[id] == 0) {
            allowed = false;
        } else if (bits) {
            allowed = (bits[id >> 6] >> (id & 63)) & 1;
        } else if (token_check(g, v, current, id, &allowed) != STEP_OK) {
            goto fail;
        }
        if (!allowed) {
            cand->data[i].logit = -INFINITY;
        }
    }
    return true;
fail:
    reject_all(cand);
    pool_full_error();
    return false;
}

bool grammar_accept(struct llama_grammar *g, const struct grammar_vocab *v, llama_token token) {
    if (token < 0 || token >= v->n_vocab) {
        error_set("grammar: token %d is not in the vocabulary (%d tokens)", token, v->n_vocab);
        return false;
    }
    grammar_compact(g);
    if (token == v->eos) {
        if (grammar_allows_eos(g)) {
            return true;
        }
        error_set("grammar: end of generation (token %d) is not allowed before the grammar is complete", token);
        return false;
    }
    /* decode the whole piece first: an invalid sequence anywhere cancels all
     * its code points and leaves the stacks alone (b1892) */
    struct utf8_decoder dec = utf8_start(g->partial);
    const uint8_t *bytes = (const uint8_t *)v->bytes + v->piece_off[token];
    g->cps.n = 0;
    for (uint32_t i = 0; i < v->piece_len[token]; i++) {
        uint32_t cp;
        enum utf8_result r = utf8_feed(&dec, bytes[i], &cp);
        if (r == UTF8_INVALID) {
            g->partial.value = 0;
            g->partial.n_remain = -1;
            return true;
        }
        if (r == UTF8_CODE_POINT && !vec_push(&g->cps, cp)) {
            pool_full_error();
            return false;
        }
    }
    uint32_t set = set_intern(&g->sets, g->stacks.v, g->stacks.n);
    for (size_t i = 0; i < g->cps.n && set != SET_NONE; i++) {
        enum step_status st = step_set(g, set, g->cps.v[i], &set);
        if (st == STEP_POOL_FULL) {
            set = SET_NONE;
        } else if (st == STEP_TOO_MANY) {
            error_set("grammar: token %d would need more than %u parse stacks (grammar too ambiguous)", token,
                      GRAMMAR_MAX_STACKS);
            return false;
        } else if (set == SET_EMPTY) {
            error_set("grammar: token %d does not match the grammar here", token);
            return false;
        }
    }
    if (set == SET_NONE || !vec_reserve(&g->stacks, g->sets.len[set])) {
        pool_full_error();
        return false;
    }
    memcpy(g->stacks.v, g->sets.members.v + g->sets.off[set], g->sets.len[set] * sizeof *g->stacks.v);
    g->stacks.n = g->sets.len[set];
    g->partial.value = dec.value;
    g->partial.n_remain = dec.n_remain;
    return true;
}

/* ======================================================================== */
/* inspection                                                               */
/* ======================================================================== */

size_t grammar_stack_count(const struct llama_grammar *g) {
    return g->stacks.n;
}

size_t grammar_stack_elements(const struct llama_grammar *g, size_t i, llama_grammar_element *out, size_t cap) {
    if (i >= g->stacks.n) {
        return 0;
    }
    size_t depth = 0;
    for (uint32_t s = g->stacks.v[i]; s != NODE_EMPTY; s = g->pool.below[s]) {
        depth++;
    }
    size_t k = depth;
    for (uint32_t s = g->stacks.v[i]; s != NODE_EMPTY; s = g->pool.below[s]) {
        k--;
        if (k < cap) {
            out[k] = g->elems[g->pool.top[s]];
        }
    }
    return depth;
}

size_t grammar_node_count(const struct llama_grammar *g) {
    return g->pool.n;
}

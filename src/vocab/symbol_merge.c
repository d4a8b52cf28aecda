/*
 * The pair-merging loop both tokenizers share: adjacent symbols of one text
 * are merged, best pair first, with a priority queue of candidate pairs
 * (O(n log n)). A queued pair goes stale when either side is merged into
 * something else before it is popped; its recorded size tells.
 */
#include "vocab/vocab_internal.h"

#include "core/log.h"

#include <stdlib.h>

struct symbol_pair {
    double key;    /* lower merges first */
    int32_t left;
    int32_t right;
    uint32_t size; /* bytes of left + right when queued */
};

/* The pop order of b1892's queues: lower key first, then the leftmost pair. */
static int pair_before(const struct symbol_pair *a, const struct symbol_pair *b) {
    return a->key < b->key || (a->key == b->key && a->left < b->left);
}

static bool heap_push(struct symbol_merge *m, struct symbol_pair item) {
    if (m->n_pairs == m->pairs_cap) {
        size_t cap = m->pairs_cap ? 2 * m->pairs_cap : 64;
        struct symbol_pair *grown = realloc(m->pairs, cap * sizeof *grown);
        if (!grown) {
            error_set("vocab: out of memory while tokenizing");
            return false;
        }
        m->pairs = grown;
        m->pairs_cap = cap;
    }
    size_t i = m->n_pairs++;
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (!pair_before(&item, &m->pairs[parent])) {
            break;
        }
        m->pairs[i] = m->pairs[parent];
        i = parent;
    }
    m->pairs[i] = item;
    return true;
}

static struct symbol_pair heap_pop(struct symbol_merge *m) {
    struct symbol_pair top = m->pairs[0];
    struct symbol_pair last = m->pairs[--m->n_pairs];
    size_t i = 0;
    for (;;) {
        size_t child = 2 * i + 1;
        if (child >= m->n_pairs) {
            break;
        }
        if (child + 1 < m->n_pairs && pair_before(&m->pairs[child + 1], &m->pairs[child])) {
            child++;
        }
        if (!pair_before(&m->pairs[child], &last)) {
            break;
        }
        m->pairs[i] = m->pairs[child];
        i = child;
    }
    if (m->n_pairs > 0) {
        m->pairs[i] = last;
    }
    return top;
}

/* Queues (left, right) if the pair can merge. */
static bool try_add_pair(struct symbol_merge *m, int32_t left, int32_t right) {
    if (left < 0 || right < 0) {
        return true;
    }
    const struct vocab_symbol *l = &m->symbols[left], *r = &m->symbols[right];
    double key;
    if (!m->pair_key(m->v, m->text + l->off, l->n, m->text + r->off, r->n, &key)) {
        return true;
    }
    struct symbol_pair p = { key, left, right, l->n + r->n };
    return heap_push(m, p);
}

bool symbol_merge_run(struct symbol_merge *m, size_t n_symbols) {
    m->n_pairs = 0;
    for (size_t i = 1; i < n_symbols; i++) {
        if (!try_add_pair(m, (int32_t)i - 1, (int32_t)i)) {
            return false;
        }
    }
    while (m->n_pairs > 0) {
        struct symbol_pair p = heap_pop(m);
        struct vocab_symbol *l = &m->symbols[p.left], *r = &m->symbols[p.right];
        if (l->n == 0 || r->n == 0 || l->n + r->n != p.size) {
            continue; /* stale: one side was merged since */
        }
        l->n += r->n;
        r->n = 0;
        l->next = r->next;
        if (r->next >= 0) {
            m->symbols[r->next].prev = p.left;
        }
        if (!try_add_pair(m, l->prev, p.left) || !try_add_pair(m, p.left, l->next)) {
            return false;
        }
    }
    return true;
}

void symbol_merge_free(struct symbol_merge *m) {
    free(m->pairs);
    m->pairs = NULL;
    m->n_pairs = m->pairs_cap = 0;
}

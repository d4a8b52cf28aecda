/*
 * The grammar matcher behind llama_grammar_* and llama_sample_grammar: the
 * same language and the same allowed tokens as b1892's llama_grammar, with a
 * different engine.
 *
 * b1892 keeps a list of parse stacks (pointers into the rules) and, for every
 * token, checks every candidate's text against every stack, rebuilding stacks
 * as vectors as it goes. Here:
 *  - stacks are interned, persistent linked lists (node = top element +
 *    parent node), so equal stacks are one node and duplicates vanish;
 *  - the stacks that follow "stack s matched a character" are computed once
 *    per node and remembered, so a step over a code point is a lookup;
 *  - the vocabulary is a prefix tree of token pieces (struct grammar_vocab,
 *    built once per vocabulary and shared), walked once per step: a shared
 *    prefix is matched once for all tokens under it, and a subtree no stack
 *    accepts is skipped whole;
 *  - the allowed set is cached for recent (stack set, partial UTF-8) states,
 *    so repetitive grammars cost a bit-set lookup.
 * The result is exact: a candidate is rejected iff b1892 rejects it (EOS only
 * when some stack is empty, pieces that are empty or start with a NUL byte
 * never, partial UTF-8 sequences across tokens as b1892 decodes them).
 *
 * Bounded where b1892 is not:
 *  - grammar_create() refuses left recursion (b1892 recurses forever) and
 *    malformed rule arrays (b1892 crashes);
 *  - a step that would need more than GRAMMAR_MAX_STACKS parse stacks fails:
 *    grammar_accept() returns false, grammar_sample() rejects that token (so
 *    what sampling allows can always be accepted); creation fails likewise;
 *  - a failed grammar_accept() leaves the grammar unchanged (b1892 aborts the
 *    process when no stack survives).
 * Memory stays proportional to the stacks in use: the node pool is compacted
 * when it grows past GRAMMAR_POOL_COMPACT nodes (the set store likewise), and
 * an operation that would need more than GRAMMAR_POOL_MAX nodes (or too many
 * stack sets) fails with an error, so even an adversarial grammar holds
 * below about 100 MB. A JSON grammar on a 32000-token vocabulary uses under
 * a hundred nodes.
 *
 * Thread safety: a grammar is used by one thread at a time, including
 * grammar_sample() (it updates the caches inside the grammar). A
 * grammar_vocab is read-only after creation and can be shared.
 */
#ifndef LLAMAC_SAMPLE_GRAMMAR_H
#define LLAMAC_SAMPLE_GRAMMAR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "llama.h"

#define GRAMMAR_MAX_STACKS   4096
#define GRAMMAR_POOL_COMPACT (1u << 16)
#define GRAMMAR_POOL_MAX     (1u << 20)

/* ---- the vocabulary ---- */

struct grammar_vocab;

/* Builds the prefix tree from every token's piece (llama_token_to_piece's
 * bytes: pieces[i] with lengths[i] bytes, i < n_vocab). Only the bytes before
 * a piece's first NUL count (b1892 sees pieces as C strings). eos is the id
 * that is allowed exactly when the grammar is complete. NULL with error_set()
 * on bad arguments or out of memory. */
struct grammar_vocab *grammar_vocab_create(const char *const *pieces, const size_t *lengths, int32_t n_vocab,
                                           llama_token eos);
void grammar_vocab_free(struct grammar_vocab *vocab);

/* ---- the grammar (the object behind llama.h's struct llama_grammar) ---- */

/* llama_grammar_init: copies the rules (rules[i] up to and including its END)
 * and builds the initial stacks from the alternatives of rule start. NULL
 * with error_set() when: n_rules is 0, start >= n_rules, a rule is NULL or has
 * no END within 2^24 elements, an element type is unknown, a rule reference is
 * out of range, CHAR_ALT / CHAR_RNG_UPPER do not follow a character element,
 * a rule reachable from start is left-recursive, or the initial stacks exceed
 * GRAMMAR_MAX_STACKS. */
struct llama_grammar *grammar_create(const llama_grammar_element **rules, size_t n_rules, size_t start);

/* llama_grammar_copy: an independent grammar in the same state; NULL on
 * allocation failure. */
struct llama_grammar *grammar_copy(const struct llama_grammar *grammar);

void grammar_free(struct llama_grammar *grammar);

/* How grammar_sample_with() finds the allowed candidates; AUTO picks by the
 * number of candidates and uses the cache. The others exist for tests and
 * benchmarks; every strategy gives the same result. */
enum grammar_strategy {
    GRAMMAR_STRATEGY_AUTO,
    GRAMMAR_STRATEGY_PER_TOKEN, /* walk each candidate's piece through the stacks */
    GRAMMAR_STRATEGY_TRIE,      /* walk the whole prefix tree, no cache */
};

/* llama_sample_grammar: sets logit = -INFINITY for every candidate the
 * grammar rejects (also ids outside the vocabulary). Returns false with
 * error_set() only when the node pool limit is hit, and then rejects every
 * candidate. */
bool grammar_sample(struct llama_grammar *grammar, const struct grammar_vocab *vocab, llama_token_data_array *cand);
bool grammar_sample_with(struct llama_grammar *grammar, const struct grammar_vocab *vocab,
                         llama_token_data_array *cand, enum grammar_strategy strategy);

/* llama_grammar_accept_token: advances over the token's piece. EOS is
 * accepted (without change) only when some stack is empty. false with
 * error_set() and no change when the grammar does not allow the token. */
bool grammar_accept(struct llama_grammar *grammar, const struct grammar_vocab *vocab, llama_token token);

/* Whether the grammar is complete here, i.e. EOS would be allowed. */
bool grammar_allows_eos(const struct llama_grammar *grammar);

/* The current parse stacks, for inspection and tests: their number, and
 * stack i's elements from bottom to top (the top is the element to match
 * next; returns the depth and writes min(depth, cap) elements). */
size_t grammar_stack_count(const struct llama_grammar *grammar);
size_t grammar_stack_elements(const struct llama_grammar *grammar, size_t i, llama_grammar_element *out, size_t cap);

/* Stack nodes the grammar holds now (memory diagnostics; drops on compaction). */
size_t grammar_node_count(const struct llama_grammar *grammar);

#endif

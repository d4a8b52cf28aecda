/*
 * Sorting candidates exactly as b1892 does with libstdc++ (GCC 12).
 *
 * b1892 orders candidates with std::sort / std::partial_sort and the
 * comparator "a.logit > b.logit". Neither is stable, so the order of equal
 * logits (and which of several equal logits survive a top-k cut) is whatever
 * libstdc++'s algorithms produce; a reproduction of seeded draws needs the
 * same order. These functions follow the same steps (introsort with
 * median-of-three pivots, depth limit 2*floor(log2 n), heapsort fallback and a
 * final insertion sort with threshold 16; partial sort = heap select + sort
 * heap), so they give the same permutation. O(n log n), no allocation.
 */
#ifndef LLAMAC_SAMPLE_SORT_H
#define LLAMAC_SAMPLE_SORT_H

#include <stddef.h>

#include "llama.h"

/* std::sort(data, data + n, logit descending). */
void sample_sort_desc(llama_token_data *data, size_t n);

/* std::partial_sort(data, data + k, data + n, logit descending): the k
 * largest, sorted, at the front (k <= n). O(n log k). */
void sample_partial_sort_desc(llama_token_data *data, size_t k, size_t n);

#endif

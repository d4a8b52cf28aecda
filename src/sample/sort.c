#include "sample/sort.h"

#include <stdint.h>

/* The comparator of every b1892 sort on candidates. */
static inline int before(const llama_token_data *a, const llama_token_data *b) {
    return a->logit > b->logit;
}

static inline void swap_entries(llama_token_data *a, llama_token_data *b) {
    llama_token_data t = *a;
    *a = *b;
    *b = t;
}

/* ---- heap operations (libstdc++ stl_heap.h order of moves and comparisons) ---- */

static void heap_push(llama_token_data *first, ptrdiff_t hole, ptrdiff_t top, llama_token_data value) {
    ptrdiff_t parent = (hole - 1) / 2;
    while (hole > top && before(&first[parent], &value)) {
        first[hole] = first[parent];
        hole = parent;
        parent = (hole - 1) / 2;
    }
    first[hole] = value;
}

static void heap_adjust(llama_token_data *first, ptrdiff_t hole, ptrdiff_t len, llama_token_data value) {
    const ptrdiff_t top = hole;
    ptrdiff_t child = hole;
    while (child < (len - 1) / 2) {
        child = 2 * (child + 1);
        if (before(&first[child], &first[child - 1])) {
            child--;
        }
        first[hole] = first[child];
        hole = child;
    }
    if ((len & 1) == 0 && child == (len - 2) / 2) {
        child = 2 * (child + 1);
        first[hole] = first[child - 1];
        hole = child - 1;
    }
    heap_push(first, hole, top, value);
}

static void heap_make(llama_token_data *first, ptrdiff_t len) {
    if (len < 2) {
        return;
    }
    for (ptrdiff_t parent = (len - 2) / 2;; parent--) {
        heap_adjust(first, parent, len, first[parent]);
        if (parent == 0) {
            return;
        }
    }
}

/* Moves the heap top to *result and re-heaps [first, first + len) with *result's old value. */
static void heap_pop_into(llama_token_data *first, ptrdiff_t len, llama_token_data *result) {
    llama_token_data value = *result;
    *result = first[0];
    heap_adjust(first, 0, len, value);
}

void sample_partial_sort_desc(llama_token_data *data, size_t k, size_t n) {
    const ptrdiff_t middle = (ptrdiff_t)k;
    heap_make(data, middle);
    for (ptrdiff_t i = middle; i < (ptrdiff_t)n; i++) {
        if (before(&data[i], &data[0])) {
            heap_pop_into(data, middle, &data[i]);
        }
    }
    for (ptrdiff_t last = middle; last > 1;) {
        last--;
        heap_pop_into(data, last, &data[last]);
    }
}

/* ---- introsort (libstdc++ stl_algo.h) ---- */

enum { SORT_THRESHOLD = 16 };

static void move_median_to_first(llama_token_data *result, llama_token_data *a, llama_token_data *b,
                                 llama_token_data *c) {
    if (before(a, b)) {
        if (before(b, c)) {
            swap_entries(result, b);
        } else if (before(a, c)) {
            swap_entries(result, c);
        } else {
            swap_entries(result, a);
        }
    } else if (before(a, c)) {
        swap_entries(result, a);
    } else if (before(b, c)) {
        swap_entries(result, c);
    } else {
        swap_entries(result, b);
    }
}

/* Hoare partition of [first, last) around *pivot (which lies just before first).
 * The bounds checks never trigger for a consistent order (the median of three
 * is a sentinel); they only keep NaN logits from running off the array. */
static llama_token_data *partition_unguarded(llama_token_data *first, llama_token_data *last,
                                             const llama_token_data *pivot) {
    llama_token_data *const end = last;
    for (;;) {
        while (first < end && before(first, pivot)) {
            first++;
        }
        last--;
        while (last > pivot && before(pivot, last)) {
            last--;
        }
        if (!(first < last)) {
            return first;
        }
        swap_entries(first, last);
        first++;
    }
}

static void introsort_loop(llama_token_data *first, llama_token_data *last, int depth_limit) {
    while (last - first > SORT_THRESHOLD) {
        if (depth_limit == 0) {
            sample_partial_sort_desc(first, (size_t)(last - first), (size_t)(last - first));
            return;
        }
        depth_limit--;
        llama_token_data *mid = first + (last - first) / 2;
        move_median_to_first(first, first + 1, mid, last - 1);
        llama_token_data *cut = partition_unguarded(first + 1, last, first);
        introsort_loop(cut, last, depth_limit);
        last = cut;
    }
}

/* Inserts *pos into the sorted run that ends before it; stops at `floor`. */
static void linear_insert(llama_token_data *floor, llama_token_data *pos) {
    llama_token_data value = *pos;
    llama_token_data *next = pos - 1;
    while (pos > floor && before(&value, next)) {
        *pos = *next;
        pos = next;
        next--;
    }
    *pos = value;
}

static void insertion_sort(llama_token_data *first, llama_token_data *last) {
    if (first == last) {
        return;
    }
    for (llama_token_data *i = first + 1; i != last; i++) {
        if (before(i, first)) {
            llama_token_data value = *i;
            for (llama_token_data *j = i; j != first; j--) {
                *j = *(j - 1);
            }
            *first = value;
        } else {
            linear_insert(first, i);
        }
    }
}

void sample_sort_desc(llama_token_data *data, size_t n) {
    if (n == 0) {
        return;
    }
    int lg = 63 - __builtin_clzll((unsigned long long)n);
    introsort_loop(data, data + n, 2 * lg);
    if (n > SORT_THRESHOLD) {
        insertion_sort(data, data + SORT_THRESHOLD);
        for (llama_token_data *i = data + SORT_THRESHOLD; i != data + n; i++) {
            linear_insert(data, i);
        }
    } else {
        insertion_sort(data, data + n);
    }
}

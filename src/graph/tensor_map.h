/*
 * A set of tensor pointers with stable slot numbers (open addressing, linear
 * probing), for per-tensor bookkeeping in arrays indexed by slot. Used by the
 * graph allocator and the scheduler; sized once for the largest graph, then
 * cleared per graph without allocating.
 */
#ifndef LLAMAC_GRAPH_TENSOR_MAP_H
#define LLAMAC_GRAPH_TENSOR_MAP_H

#include <stdbool.h>
#include <stddef.h>

struct tensor;

#define TENSOR_MAP_NONE ((size_t)-1)

struct tensor_map {
    size_t capacity;            /* slots: a power of two, or 0 */
    size_t count;               /* keys present */
    const struct tensor **keys; /* NULL = empty slot */
};

/* Makes room for n_keys keys (capacity >= 2 * n_keys) and empties the map.
 * The capacity only grows; false (error_set) on out of memory. */
bool tensor_map_reserve(struct tensor_map *m, size_t n_keys);
void tensor_map_clear(struct tensor_map *m);
void tensor_map_free(struct tensor_map *m);
/* The slot of t, inserting it if absent (*inserted says which; may be NULL).
 * TENSOR_MAP_NONE when the map is full. */
size_t tensor_map_insert(struct tensor_map *m, const struct tensor *t, bool *inserted);
/* The slot of t, or TENSOR_MAP_NONE. */
size_t tensor_map_find(const struct tensor_map *m, const struct tensor *t);

#endif

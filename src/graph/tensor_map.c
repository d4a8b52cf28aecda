#include "graph/tensor_map.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"

bool tensor_map_reserve(struct tensor_map *m, size_t n_keys) {
    size_t want = 16;
    while (want < 2 * n_keys) {
        if (want > SIZE_MAX / 4) {
            error_set("tensor map for %zu tensors: too large", n_keys);
            return false;
        }
        want *= 2;
    }
    if (want > m->capacity) {
        const struct tensor **keys = malloc(want * sizeof *keys);
        if (!keys) {
            error_set("out of memory for a map of %zu tensors", n_keys);
            return false;
        }
        free(m->keys);
        m->keys = keys;
        m->capacity = want;
    }
    tensor_map_clear(m);
    return true;
}

void tensor_map_clear(struct tensor_map *m) {
    if (m->keys) memset(m->keys, 0, m->capacity * sizeof *m->keys);
    m->count = 0;
}

void tensor_map_free(struct tensor_map *m) {
    free(m->keys);
    m->keys = NULL;
    m->capacity = 0;
    m->count = 0;
}

static size_t tensor_map_hash(const struct tensor *t, size_t capacity) {
    /* tensors are at least 8-byte aligned; mix the address with a Fibonacci multiplier */
    uint64_t h = (uint64_t)(uintptr_t)t >> 3;
    h *= 0x9E3779B97F4A7C15ULL;
    return (size_t)(h >> 32) & (capacity - 1);
}

size_t tensor_map_insert(struct tensor_map *m, const struct tensor *t, bool *inserted) {
    if (inserted) *inserted = false;
    if (m->capacity == 0) return TENSOR_MAP_NONE;
    size_t i = tensor_map_hash(t, m->capacity);
    for (size_t n = 0; n < m->capacity; n++, i = (i + 1) & (m->capacity - 1)) {
        if (m->keys[i] == t) return i;
        if (!m->keys[i]) {
            m->keys[i] = t;
            m->count++;
            if (inserted) *inserted = true;
            return i;
        }
    }
    return TENSOR_MAP_NONE;
}

size_t tensor_map_find(const struct tensor_map *m, const struct tensor *t) {
    if (m->capacity == 0) return TENSOR_MAP_NONE;
    size_t i = tensor_map_hash(t, m->capacity);
    for (size_t n = 0; n < m->capacity; n++, i = (i + 1) & (m->capacity - 1)) {
        if (m->keys[i] == t) return i;
        if (!m->keys[i]) return TENSOR_MAP_NONE;
    }
    return TENSOR_MAP_NONE;
}

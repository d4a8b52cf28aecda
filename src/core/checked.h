/*
 * Overflow-checked arithmetic for sizes that come from files or callers.
 * Each returns false (and leaves *out unspecified) when the result does not fit.
 */
#ifndef LLAMAC_CORE_CHECKED_H
#define LLAMAC_CORE_CHECKED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

static inline bool ck_add_size(size_t a, size_t b, size_t *out) { return !__builtin_add_overflow(a, b, out); }
static inline bool ck_mul_size(size_t a, size_t b, size_t *out) { return !__builtin_mul_overflow(a, b, out); }
static inline bool ck_add_u64(uint64_t a, uint64_t b, uint64_t *out) { return !__builtin_add_overflow(a, b, out); }
static inline bool ck_mul_u64(uint64_t a, uint64_t b, uint64_t *out) { return !__builtin_mul_overflow(a, b, out); }
static inline bool ck_add_i64(int64_t a, int64_t b, int64_t *out) { return !__builtin_add_overflow(a, b, out); }
static inline bool ck_mul_i64(int64_t a, int64_t b, int64_t *out) { return !__builtin_mul_overflow(a, b, out); }

/* Rounds n up to a multiple of align (a power of two). */
static inline bool ck_align_up(size_t n, size_t align, size_t *out) {
    size_t sum;
    if (!ck_add_size(n, align - 1, &sum)) return false;
    *out = sum & ~(align - 1);
    return true;
}

static inline bool is_pow2(uint64_t x) { return x != 0 && (x & (x - 1)) == 0; }

#endif

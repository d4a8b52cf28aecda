#include "sample/rng.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "core/log.h"

/* MT19937 parameters (Matsumoto & Nishimura), as std::mt19937 fixes them. */
enum { MT_M = 397 };
#define MT_MATRIX_A   0x9908b0dfu
#define MT_UPPER_MASK 0x80000000u
#define MT_LOWER_MASK 0x7fffffffu
#define MT_INIT_MULT  1812433253u

uint32_t rng_seed_resolve(uint32_t seed) {
    return seed == LLAMA_DEFAULT_SEED ? (uint32_t)time(NULL) : seed;
}

void rng_mt19937_seed(struct rng_mt19937 *rng, uint32_t seed) {
    rng->state[0] = seed;
    for (uint32_t i = 1; i < RNG_MT19937_N; i++) {
        uint32_t prev = rng->state[i - 1];
        rng->state[i] = MT_INIT_MULT * (prev ^ (prev >> 30)) + i;
    }
    rng->index = RNG_MT19937_N;
}

/* Regenerates all 624 words (the "twist"). */
static void mt_twist(struct rng_mt19937 *rng) {
    uint32_t *x = rng->state;
    for (int i = 0; i < RNG_MT19937_N; i++) {
        uint32_t y = (x[i] & MT_UPPER_MASK) | (x[(i + 1) % RNG_MT19937_N] & MT_LOWER_MASK);
        x[i] = x[(i + MT_M) % RNG_MT19937_N] ^ (y >> 1) ^ ((y & 1u) ? MT_MATRIX_A : 0u);
    }
    rng->index = 0;
}

uint32_t rng_mt19937_next(struct rng_mt19937 *rng) {
    if (rng->index >= RNG_MT19937_N) {
        mt_twist(rng);
    }
    uint32_t z = rng->state[rng->index++];
    z ^= z >> 11;
    z ^= (z << 7) & 0x9d2c5680u;
    z ^= (z << 15) & 0xefc60000u;
    z ^= z >> 18;
    return z;
}

double rng_mt19937_canonical(struct rng_mt19937 *rng) {
    const double two32 = 4294967296.0;
    double sum = (double)rng_mt19937_next(rng);
    sum += (double)rng_mt19937_next(rng) * two32;
    double u = sum / (two32 * two32);
    if (u >= 1.0) {
        u = nextafter(1.0, 0.0);
    }
    return u;
}

size_t rng_mt19937_write_text(const struct rng_mt19937 *rng, char *buf, size_t cap) {
    char tmp[RNG_MT19937_TEXT_MAX + 1];
    size_t len = 0;
    for (int i = 0; i < RNG_MT19937_N; i++) {
        len += (size_t)snprintf(tmp + len, sizeof tmp - len, "%u ", rng->state[i]);
    }
    len += (size_t)snprintf(tmp + len, sizeof tmp - len, "%u", rng->index);
    if (buf && len < cap) {
        memcpy(buf, tmp, len + 1);
    }
    return len;
}

static bool rng_is_space(char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
}

bool rng_mt19937_read_text(struct rng_mt19937 *rng, const char *text, size_t len) {
    uint32_t words[RNG_MT19937_N + 1];
    size_t pos = 0;
    for (int w = 0; w <= RNG_MT19937_N; w++) {
        while (pos < len && rng_is_space(text[pos])) {
            pos++;
        }
        if (pos == len || text[pos] < '0' || text[pos] > '9') {
            error_set("rng state: expected number %d of %d at byte %zu", w + 1, RNG_MT19937_N + 1, pos);
            return false;
        }
        uint64_t value = 0;
        while (pos < len && text[pos] >= '0' && text[pos] <= '9') {
            value = value * 10 + (uint64_t)(text[pos] - '0');
            if (value > UINT32_MAX) {
                error_set("rng state: number %d is larger than 2^32-1", w + 1);
                return false;
            }
            pos++;
        }
        if (pos < len && !rng_is_space(text[pos])) {
            error_set("rng state: unexpected character 0x%02x at byte %zu", (unsigned char)text[pos], pos);
            return false;
        }
        words[w] = (uint32_t)value;
    }
    while (pos < len && rng_is_space(text[pos])) {
        pos++;
    }
    if (pos != len) {
        error_set("rng state: trailing data at byte %zu", pos);
        return false;
    }
    if (words[RNG_MT19937_N] > RNG_MT19937_N) {
        error_set("rng state: index %u is larger than %d", words[RNG_MT19937_N], RNG_MT19937_N);
        return false;
    }
    memcpy(rng->state, words, sizeof rng->state);
    rng->index = words[RNG_MT19937_N];
    return true;
}

size_t rng_discrete_draw(struct rng_mt19937 *rng, const llama_token_data *cand, size_t n, double *u_out) {
    if (n < 2) {
        if (u_out) {
            *u_out = -1.0;
        }
        return 0;
    }
    double sum = 0.0;
    for (size_t i = 0; i < n; i++) {
        sum += (double)cand[i].p;
    }
    const double u = rng_mt19937_canonical(rng);
    if (u_out) {
        *u_out = u;
    }
    double cumulative = 0.0;
    for (size_t i = 0; i + 1 < n; i++) {
        cumulative += (double)cand[i].p / sum;
        if (!(cumulative < u)) {
            return i;
        }
    }
    return n - 1; /* the last cumulative value is 1.0 > u */
}

uint32_t rng_uniform_below(struct rng_mt19937 *rng, uint32_t n) {
    uint64_t m = (uint64_t)rng_mt19937_next(rng) * n;
    if ((uint32_t)m < n) {
        const uint32_t threshold = (uint32_t)(0u - n) % n; /* 2^32 mod n */
        while ((uint32_t)m < threshold) m = (uint64_t)rng_mt19937_next(rng) * n;
    }
    return (uint32_t)(m >> 32);
}

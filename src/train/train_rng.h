/*
 * The training's random numbers: xoshiro256** (Blackman and Vigna), seeded
 * through splitmix64. Its whole state is four integers, saved in checkpoints
 * so that a resumed run draws the same batches as an uninterrupted one.
 */
#ifndef LLAMAC_TRAIN_TRAIN_RNG_H
#define LLAMAC_TRAIN_TRAIN_RNG_H

#include <math.h>
#include <stdint.h>

struct train_rng {
    uint64_t s[4];
};

static inline uint64_t train_rng_splitmix(uint64_t *x) {
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static inline void train_rng_seed(struct train_rng *r, uint64_t seed) {
    for (int i = 0; i < 4; i++) r->s[i] = train_rng_splitmix(&seed);
}

static inline uint64_t train_rng_next(struct train_rng *r) {
    uint64_t *s = r->s;
    const uint64_t x = s[1] * 5;
    const uint64_t result = ((x << 7) | (x >> 57)) * 9;
    const uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = (s[3] << 45) | (s[3] >> 19);
    return result;
}

/* Uniform in [0, 1) with 53 random bits. */
static inline double train_rng_uniform(struct train_rng *r) {
    return (double)(train_rng_next(r) >> 11) * (1.0 / 9007199254740992.0);
}

/* Uniform integer in [0, n), n >= 1 (rejection keeps it unbiased). */
static inline uint64_t train_rng_below(struct train_rng *r, uint64_t n) {
    const uint64_t limit = UINT64_MAX - UINT64_MAX % n;
    uint64_t x;
    do {
        x = train_rng_next(r);
    } while (x >= limit);
    return x % n;
}

/* Standard normal (Box-Muller, one value per call so the state alone says where we are). */
static inline double train_rng_normal(struct train_rng *r) {
    const double u1 = 1.0 - train_rng_uniform(r); /* (0, 1] */
    const double u2 = train_rng_uniform(r);
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

#endif

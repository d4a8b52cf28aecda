/*
 * The sampling random number generator: std::mt19937 bit for bit, its text
 * form as libstdc++ writes it (the session files carry it), and the draw that
 * libstdc++'s std::discrete_distribution makes from it (what b1892's
 * llama_sample_token does).
 *
 *   struct rng_mt19937 rng;
 *   rng_mt19937_seed(&rng, rng_seed_resolve(seed));   // LLAMA_DEFAULT_SEED -> clock
 *   size_t idx = rng_discrete_draw(&rng, cand, n, NULL);
 *
 * Not thread-safe: one generator per context, used by one thread at a time.
 */
#ifndef LLAMAC_SAMPLE_RNG_H
#define LLAMAC_SAMPLE_RNG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "llama.h"

#define RNG_MT19937_N 624

/* Longest text rng_mt19937_write_text() produces: 625 numbers of at most 10
 * digits and 624 separating spaces. b1892 reserves 64 KiB for it in a state
 * blob; a reader must not accept more than that either. */
#define RNG_MT19937_TEXT_MAX (625 * 10 + 624)

struct rng_mt19937 {
    uint32_t state[RNG_MT19937_N];
    uint32_t index; /* next word to temper; RNG_MT19937_N means "regenerate first" */
};

/* The seed b1892 uses for `seed`: LLAMA_DEFAULT_SEED (0xFFFFFFFF) means the
 * current time in seconds (time(NULL)), any other value is itself. */
uint32_t rng_seed_resolve(uint32_t seed);

/* std::mt19937(seed): w0 = seed, w_i = 1812433253 * (w_{i-1} ^ (w_{i-1} >> 30)) + i, index 624. */
void rng_mt19937_seed(struct rng_mt19937 *rng, uint32_t seed);

/* The next 32-bit output (the engine's operator()). */
uint32_t rng_mt19937_next(struct rng_mt19937 *rng);

/* libstdc++'s generate_canonical<double, 53>: u = (a + b * 2^32) / 2^64 with a
 * then b the next two outputs; a result >= 1 becomes the largest double below 1. */
double rng_mt19937_canonical(struct rng_mt19937 *rng);

/* Writes libstdc++'s operator<< text ("w0 w1 ... w623 index", single spaces,
 * no trailing space or newline) into buf when it fits in cap bytes including a
 * terminating NUL. Returns the text length without the NUL, like snprintf. */
size_t rng_mt19937_write_text(const struct rng_mt19937 *rng, char *buf, size_t cap);

/* Parses that text (len bytes, need not be NUL-terminated): exactly 625
 * unsigned decimal numbers separated by whitespace, optional whitespace
 * around them, every state word <= 2^32-1, the index <= 624. Anything else
 * returns false with error_set() and leaves *rng unchanged. */
bool rng_mt19937_read_text(struct rng_mt19937 *rng, const char *text, size_t len);

/* std::uniform_int_distribution<size_t>(0, n - 1)(rng) as libstdc++ (GCC 11 and
 * later, 64-bit size_t) draws it from a 32-bit engine: Lemire's method,
 * m = next * n (64-bit); while the low 32 bits of m are below 2^32 mod n, draw
 * again; the result is m >> 32. Always draws at least once, even for n = 1.
 * b1892's HellaSwag picks its tasks with it. n >= 1. */
uint32_t rng_uniform_below(struct rng_mt19937 *rng, uint32_t n);

/* std::discrete_distribution<int>(p_0..p_{n-1})(rng) over the candidates' p
 * fields, in array order: fewer than 2 candidates -> 0 without touching the
 * generator; otherwise weights as double, divided by their left-to-right
 * double sum, cumulative sums with the last forced to 1.0, u from
 * rng_mt19937_canonical(), result = first index whose cumulative value is
 * >= u (lower_bound: identical to a scan since the p are >= 0). *u_out (may be
 * NULL) receives u, or -1 when nothing was drawn. n must be > 0. */
size_t rng_discrete_draw(struct rng_mt19937 *rng, const llama_token_data *cand, size_t n, double *u_out);

#endif

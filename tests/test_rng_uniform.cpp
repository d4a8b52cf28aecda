// sample/rng.h's rng_uniform_below against libstdc++'s
// std::uniform_int_distribution<size_t> on std::mt19937 (what b1892's
// HellaSwag uses to pick its tasks), for small and awkward ranges.
#include <cstdint>
#include <cstdio>
#include <random>

extern "C" {
#include "test_util.h"
#include "sample/rng.h"
}

int main() {
    static const uint32_t ranges[] = { 1, 2, 3, 5, 6, 7, 10, 400, 1000, 10042, 65537, 1u << 31, 3000000019u, 4294967295u };
    for (uint32_t seed : { 1u, 42u, 1234u }) {
        std::mt19937 ref(seed);
        struct rng_mt19937 ours;
        rng_mt19937_seed(&ours, seed);
        int mismatches = 0;
        for (int i = 0; i < 20000; i++) {
            const uint32_t n = ranges[i % (sizeof ranges / sizeof ranges[0])];
            std::uniform_int_distribution<size_t> dist(0, n - 1);
            const size_t want = dist(ref);
            const uint32_t got = rng_uniform_below(&ours, n);
            if (got != want && mismatches++ < 5) fprintf(stderr, "seed %u draw %d n %u: %u vs %zu\n", seed, i, n, got, want);
        }
        CHECK_EQ_INT(mismatches, 0);
        // the generators stay in step (same number of draws consumed)
        CHECK_EQ_INT(rng_mt19937_next(&ours), ref());
    }
    // b1892's task selection: shrinking ranges from one generator seeded with 1
    std::mt19937 ref(1);
    struct rng_mt19937 ours;
    rng_mt19937_seed(&ours, 1);
    for (uint32_t left = 10042; left > 0; left--) {
        std::uniform_int_distribution<size_t> dist(0, left - 1);
        const size_t want = dist(ref);
        if (rng_uniform_below(&ours, left) != want) {
            CHECK_MSG(false, "task draw with %u left differs", left);
            break;
        }
    }
    return test_finish("test_rng_uniform");
}

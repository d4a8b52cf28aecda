// sample/: the C replicas of libstdc++'s std::mt19937 (and its text form),
// std::sort / std::partial_sort and std::discrete_distribution, checked
// against libstdc++ itself (GCC 12's, the library b1892 was built with).
// b1892 sorts candidates and draws tokens with these; equal logits make the
// sort order observable, so the checks use arrays full of ties.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <random>
#include <sstream>
#include <string>
#include <vector>

extern "C" {
#include "test_util.h"
#include "sample/rng.h"
#include "sample/sort.h"
}

static bool by_logit_desc(const llama_token_data &a, const llama_token_data &b) { return a.logit > b.logit; }

static std::vector<llama_token_data> random_candidates(uint64_t *seed, size_t n, int n_distinct) {
    std::vector<llama_token_data> v(n);
    for (size_t i = 0; i < n; i++) {
        v[i].id = (llama_token)i;
        v[i].logit = (float)(test_rand_u64(seed) % (uint64_t)n_distinct) * 0.5f - 3.0f;
        v[i].p = 0.0f;
    }
    return v;
}

static bool same_order(const std::vector<llama_token_data> &a, const std::vector<llama_token_data> &b, size_t n) {
    for (size_t i = 0; i < n; i++) {
        if (a[i].id != b[i].id || a[i].logit != b[i].logit) return false;
    }
    return true;
}

static void test_sorts() {
    uint64_t seed = 12345;
    const size_t sizes[] = {0, 1, 2, 3, 15, 16, 17, 33, 100, 512, 1000, 4097, 32000};
    const int distinct[] = {1, 2, 5, 50, 100000};
    int mismatched_sort = 0, mismatched_partial = 0, runs = 0;
    for (size_t n : sizes) {
        for (int d : distinct) {
            for (int rep = 0; rep < 3; rep++) {
                std::vector<llama_token_data> ref = random_candidates(&seed, n, d);
                std::vector<llama_token_data> ours = ref;
                std::sort(ref.begin(), ref.end(), by_logit_desc);
                sample_sort_desc(ours.data(), ours.size());
                if (!same_order(ref, ours, n)) mismatched_sort++;

                const size_t ks[] = {0, 1, 2, 10, 40, n / 2, n ? n - 1 : 0};
                for (size_t k : ks) {
                    if (k > n) continue;
                    std::vector<llama_token_data> pref = random_candidates(&seed, n, d);
                    std::vector<llama_token_data> pours = pref;
                    std::partial_sort(pref.begin(), pref.begin() + k, pref.end(), by_logit_desc);
                    sample_partial_sort_desc(pours.data(), k, n);
                    // the whole array, not just the first k: top-k keeps the prefix, but a
                    // later sampler may see the rest through a larger size
                    if (!same_order(pref, pours, n)) mismatched_partial++;
                }
                runs++;
            }
        }
    }
    // a reversed and an already sorted array exercise the depth limit / heap sort paths
    for (int shape = 0; shape < 3; shape++) {
        std::vector<llama_token_data> ref(5000);
        for (size_t i = 0; i < ref.size(); i++) {
            ref[i].id = (llama_token)i;
            ref[i].logit = shape == 0 ? (float)i : shape == 1 ? -(float)i : (float)((i * 7919) % 13);
            ref[i].p = 0;
        }
        std::vector<llama_token_data> ours = ref;
        std::sort(ref.begin(), ref.end(), by_logit_desc);
        sample_sort_desc(ours.data(), ours.size());
        if (!same_order(ref, ours, ref.size())) mismatched_sort++;
    }
    // median-of-3 killer style input drives introsort into its heap-sort fallback
    {
        const size_t n = 4096;
        std::vector<llama_token_data> ref(n);
        for (size_t i = 0; i < n; i++) {
            ref[i].id = (llama_token)i;
            ref[i].logit = (i % 2) ? (float)(n + i) : (float)(i / 2);
            ref[i].p = 0;
        }
        std::vector<llama_token_data> ours = ref;
        std::sort(ref.begin(), ref.end(), by_logit_desc);
        sample_sort_desc(ours.data(), ours.size());
        if (!same_order(ref, ours, n)) mismatched_sort++;
    }
    CHECK_EQ_INT(mismatched_sort, 0);
    CHECK_EQ_INT(mismatched_partial, 0);
    CHECK(runs > 100);
}

static void test_mt19937() {
    for (uint32_t s : {0u, 1u, 42u, 5489u, 1234u, 0xFFFFFFFEu}) {
        std::mt19937 ref(s);
        struct rng_mt19937 ours;
        rng_mt19937_seed(&ours, s);
        int mismatches = 0;
        for (int i = 0; i < 2000; i++) {
            if (ref() != rng_mt19937_next(&ours)) mismatches++;
        }
        CHECK_EQ_INT(mismatches, 0);

        // text form, mid-way through a block and then after reading it back
        std::ostringstream os;
        os << ref;
        char buf[RNG_MT19937_TEXT_MAX + 1];
        size_t len = rng_mt19937_write_text(&ours, buf, sizeof buf);
        CHECK(len == os.str().size());
        CHECK(os.str() == std::string(buf, len));

        std::mt19937 back;
        std::istringstream is(std::string(buf, len));
        is >> back;
        CHECK(!is.fail());
        CHECK(back == ref);
    }
}

static void test_discrete() {
    uint64_t seed = 777;
    std::mt19937 ref(99);
    struct rng_mt19937 ours;
    rng_mt19937_seed(&ours, 99);
    int mismatches = 0, draws = 0;
    for (int trial = 0; trial < 20000; trial++) {
        size_t n = 1 + test_rand_u64(&seed) % 12;
        std::vector<llama_token_data> cand(n);
        std::vector<float> probs(n);
        for (size_t i = 0; i < n; i++) {
            // some zero weights and some tiny ones, as truncated softmax output has
            uint64_t r = test_rand_u64(&seed);
            float p = (r % 5 == 0) ? 0.0f : (r % 7 == 0) ? 1e-9f : test_rand_uniform(&seed, 0.0f, 1.0f);
            cand[i].id = (llama_token)i;
            cand[i].logit = 0;
            cand[i].p = p;
            probs[i] = p;
        }
        bool all_zero = std::all_of(probs.begin(), probs.end(), [](float p) { return p == 0.0f; });
        if (all_zero) continue;
        std::discrete_distribution<> dist(probs.begin(), probs.end());
        int want = dist(ref);
        double u;
        size_t got = rng_discrete_draw(&ours, cand.data(), n, &u);
        if ((size_t)want != got) mismatches++;
        draws++;
    }
    CHECK_EQ_INT(mismatches, 0);
    CHECK(draws > 15000);
    // the generators stayed in step: a single candidate consumed nothing on both sides
    CHECK(ref() == rng_mt19937_next(&ours));
}

int main() {
    test_sorts();
    test_mt19937();
    test_discrete();
    return test_finish("test_sample_libstdcxx");
}

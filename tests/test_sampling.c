/* sample/: the samplers against b1892's test-sampling vectors and the derived
 * ones (../shared/spec/reference-tests.md §2), mt19937 facts, the RNG text
 * form, and the draw arithmetic of golden/sampling-stories260K.json. */
#include "test_util.h"

#include <cjson/cJSON.h>

#include "sample/rng.h"
#include "sample/sampling.h"

#define MAX_CAND 16

struct cands {
    llama_token_data data[MAX_CAND];
    llama_token_data_array arr;
};

/* b1892's set-up: ids 0..n-1, logit = ln(prob), p = 0, unsorted. */
static void cands_from_probs(struct cands *c, const float *probs, size_t n) {
    for (size_t i = 0; i < n; i++) {
        c->data[i].id = (llama_token)i;
        c->data[i].logit = logf(probs[i]);
        c->data[i].p = 0.0f;
    }
    c->arr.data = c->data;
    c->arr.size = n;
    c->arr.sorted = false;
}

static void cands_from_logits(struct cands *c, const float *logits, size_t n) {
    for (size_t i = 0; i < n; i++) {
        c->data[i].id = (llama_token)i;
        c->data[i].logit = logits[i];
        c->data[i].p = 0.0f;
    }
    c->arr.data = c->data;
    c->arr.size = n;
    c->arr.sorted = false;
}

static void check_probs(const char *what, const llama_token_data_array *a, const float *want, size_t n, float tol) {
    CHECK_MSG(a->size == n, "%s: %zu candidates left, want %zu", what, a->size, n);
    for (size_t i = 0; i < n && i < a->size; i++) {
        CHECK_MSG(fabsf(a->data[i].p - want[i]) <= tol, "%s: p[%zu] = %.7g, want %.7g", what, i, a->data[i].p, want[i]);
    }
}

static void check_ids(const char *what, const llama_token_data_array *a, const llama_token *ids, size_t n) {
    CHECK_MSG(a->size == n, "%s: %zu candidates left, want %zu", what, a->size, n);
    for (size_t i = 0; i < n && i < a->size; i++) {
        CHECK_MSG(a->data[i].id == ids[i], "%s: id[%zu] = %d, want %d", what, i, a->data[i].id, ids[i]);
    }
}

static const float P4[] = {0.1f, 0.2f, 0.3f, 0.4f};
static const float P5_TFS[] = {0.1f, 0.15f, 0.2f, 0.25f, 0.3f};
static const float P5_FLAT[] = {0.2f, 0.2f, 0.2f, 0.2f, 0.2f};

/* ---- b1892 tests/test-sampling.cpp ---- */

static void test_upstream_vectors(void) {
    struct cands c;
    struct sample_workspace ws = {0};

    cands_from_probs(&c, P4, 4);
    sample_softmax(&c.arr);
    sample_top_k(&c.arr, 1, 1);
    check_probs("top_k 1", &c.arr, (float[]){0.4f}, 1, 1e-5f);
    cands_from_probs(&c, P4, 4);
    sample_softmax(&c.arr);
    sample_top_k(&c.arr, 3, 1);
    check_probs("top_k 3", &c.arr, (float[]){0.4f, 0.3f, 0.2f}, 3, 1e-5f);

    const struct { float p; size_t n; } top_p[] = {{0.0f, 1}, {0.7f, 2}, {0.8f, 3}, {1.0f, 4}};
    for (size_t t = 0; t < 4; t++) {
        cands_from_probs(&c, P4, 4);
        sample_softmax(&c.arr);
        sample_top_p(&c.arr, top_p[t].p, 1);
        check_probs("top_p", &c.arr, (float[]){0.4f, 0.3f, 0.2f, 0.1f}, top_p[t].n, 1e-3f);
    }

    const struct { float z; size_t n; } tfs[] = {{0.25f, 1}, {0.75f, 2}, {0.99f, 2}};
    for (size_t t = 0; t < 3; t++) {
        cands_from_probs(&c, P5_TFS, 5);
        sample_tail_free(&c.arr, tfs[t].z, 1);
        check_probs("tail_free", &c.arr, (float[]){0.3f, 0.25f}, tfs[t].n, 1e-3f);
    }

    cands_from_probs(&c, (float[]){0.97f, 0.01f, 0.01f, 0.01f}, 4);
    CHECK(sample_typical(&c.arr, 0.5f, 1, &ws));
    check_probs("typical a", &c.arr, (float[]){0.97f}, 1, 1e-3f);
    cands_from_probs(&c, (float[]){0.4f, 0.2f, 0.2f, 0.2f}, 4);
    CHECK(sample_typical(&c.arr, 0.5f, 1, &ws));
    check_probs("typical b", &c.arr, (float[]){0.2f, 0.2f, 0.2f}, 3, 1e-3f);

    const struct {
        llama_token last[5];
        size_t n_last;
        float repeat, freq, present;
        float want[5];
    } pen[] = {
        {{0}, 1, 50.0f, 0.0f, 0.0f, {0.25f, 0.25f, 0.25f, 0.25f, 0.0f}},
        {{0, 1, 2}, 3, 50.0f, 0.0f, 0.0f, {0.5f, 0.5f, 0.0f, 0.0f, 0.0f}},
        {{0, 1, 2, 0, 0}, 5, 50.0f, 0.0f, 0.0f, {0.5f, 0.5f, 0.0f, 0.0f, 0.0f}},
        {{0}, 1, 1.0f, 5.0f, 5.0f, {0.249997f, 0.249997f, 0.249997f, 0.249997f, 0.000011f}},
        {{0, 1, 2}, 3, 1.0f, 5.0f, 5.0f, {0.499966f, 0.499966f, 0.000023f, 0.000023f, 0.000023f}},
        {{0, 1, 2, 0, 0}, 5, 1.0f, 5.0f, 5.0f, {0.499977f, 0.499977f, 0.000023f, 0.000023f, 0.0f}},
    };
    for (size_t t = 0; t < sizeof pen / sizeof pen[0]; t++) {
        cands_from_probs(&c, P5_FLAT, 5);
        sample_softmax(&c.arr);
        CHECK(sample_repetition_penalties(&c.arr, pen[t].last, pen[t].n_last, pen[t].repeat, pen[t].freq,
                                          pen[t].present, &ws));
        sample_softmax(&c.arr);
        check_probs("penalties", &c.arr, pen[t].want, 5, 1e-3f);
    }
    sample_workspace_free(&ws);
}

/* ---- derived vectors (reference-tests.md §2, second table) ---- */

static void test_derived_vectors(void) {
    struct cands c;
    struct sample_workspace ws = {0};

    cands_from_probs(&c, P4, 4);
    sample_softmax(&c.arr);
    check_ids("softmax", &c.arr, (llama_token[]){3, 2, 1, 0}, 4);
    check_probs("softmax", &c.arr, (float[]){0.4f, 0.3f, 0.2f, 0.1f}, 4, 1e-6f);
    CHECK(c.arr.sorted);

    cands_from_probs(&c, P4, 4);
    sample_softmax(&c.arr);
    sample_top_k(&c.arr, 0, 1);
    check_ids("top_k 0", &c.arr, (llama_token[]){3}, 1);
    cands_from_probs(&c, P4, 4);
    sample_softmax(&c.arr);
    sample_top_k(&c.arr, 5, 1);
    check_ids("top_k 5", &c.arr, (llama_token[]){3, 2, 1, 0}, 4);
    cands_from_probs(&c, P4, 4);
    sample_top_k(&c.arr, 2, 1);
    check_ids("top_k no softmax", &c.arr, (llama_token[]){3, 2}, 2);
    CHECK(c.arr.sorted && c.data[0].p == 0.0f && c.data[1].p == 0.0f);

    const struct { float p; size_t n; } sweep[] = {{0.3f, 1}, {0.4f, 1}, {0.5f, 2}, {0.7f, 2},
                                                   {0.8f, 3}, {0.9f, 3}, {0.95f, 4}};
    for (size_t t = 0; t < sizeof sweep / sizeof sweep[0]; t++) {
        cands_from_probs(&c, P4, 4);
        sample_softmax(&c.arr);
        sample_top_p(&c.arr, sweep[t].p, 1);
        CHECK_MSG(c.arr.size == sweep[t].n, "top_p %.2f kept %zu, want %zu", sweep[t].p, c.arr.size, sweep[t].n);
    }
    cands_from_probs(&c, P4, 4);
    sample_softmax(&c.arr);
    sample_top_p(&c.arr, 0.0f, 3);
    check_ids("top_p min_keep", &c.arr, (llama_token[]){3, 2, 1}, 3);

    cands_from_probs(&c, P4, 4);
    sample_min_p(&c.arr, 0.0f, 1);
    check_ids("min_p 0", &c.arr, (llama_token[]){0, 1, 2, 3}, 4);
    CHECK(!c.arr.sorted && c.data[0].p == 0.0f);
    const struct { float p; size_t n; } minp[] = {{0.05f, 4}, {0.25f, 4}, {0.5f, 2}, {0.6f, 2},
                                                  {0.74f, 2}, {0.76f, 1}, {0.8f, 1}, {1.0f, 1}};
    for (size_t t = 0; t < sizeof minp / sizeof minp[0]; t++) {
        cands_from_probs(&c, P4, 4);
        sample_min_p(&c.arr, minp[t].p, 1);
        CHECK_MSG(c.arr.size == minp[t].n, "min_p %.2f kept %zu, want %zu", minp[t].p, c.arr.size, minp[t].n);
        check_probs("min_p not renormalised", &c.arr, (float[]){0.4f, 0.3f, 0.2f, 0.1f}, minp[t].n, 1e-6f);
    }
    cands_from_probs(&c, P4, 4);
    sample_min_p(&c.arr, 1.0f, 3);
    check_ids("min_p min_keep", &c.arr, (llama_token[]){3, 2, 1}, 3);
    check_probs("min_p min_keep", &c.arr, (float[]){0.4f, 0.3f, 0.2f}, 3, 1e-6f);

    cands_from_probs(&c, P5_TFS, 5);
    sample_tail_free(&c.arr, 0.5f, 1);
    check_ids("tail_free 0.5", &c.arr, (llama_token[]){4}, 1);
    cands_from_probs(&c, P5_TFS, 5);
    sample_tail_free(&c.arr, 1.0f, 1);
    check_ids("tail_free 1", &c.arr, (llama_token[]){0, 1, 2, 3, 4}, 5);
    CHECK(!c.arr.sorted && c.data[0].p == 0.0f);

    cands_from_probs(&c, P4, 4);
    CHECK(sample_typical(&c.arr, 0.9f, 1, &ws));
    check_ids("typical 0.9", &c.arr, (llama_token[]){2, 1, 3, 0}, 4);
    check_probs("typical 0.9", &c.arr, (float[]){0.3f, 0.2f, 0.4f, 0.1f}, 4, 1e-6f);
    CHECK(!c.arr.sorted);
    cands_from_probs(&c, (float[]){0.97f, 0.01f, 0.01f, 0.01f}, 4);
    CHECK(sample_typical(&c.arr, 0.5f, 1, NULL));
    check_ids("typical 0.97", &c.arr, (llama_token[]){0}, 1);
    cands_from_probs(&c, (float[]){0.4f, 0.2f, 0.2f, 0.2f}, 4);
    CHECK(sample_typical(&c.arr, 0.5f, 1, &ws));
    check_ids("typical ties", &c.arr, (llama_token[]){1, 2, 3}, 3);

    cands_from_probs(&c, P5_FLAT, 5);
    sample_softmax(&c.arr);
    CHECK(sample_repetition_penalties(&c.arr, (llama_token[]){0}, 1, 50.0f, 0.0f, 0.0f, NULL));
    CHECK(!c.arr.sorted);
    for (size_t i = 0; i < 5; i++) {
        float want = c.data[i].id == 0 ? -80.471893f : -1.609438f;
        CHECK_NEAR(c.data[i].logit, want, 1e-5);
    }
    cands_from_logits(&c, (float[]){2.0f, -2.0f, 0.0f}, 3);
    CHECK(sample_repetition_penalties(&c.arr, (llama_token[]){0, 1, 2}, 3, 2.0f, 0.0f, 0.0f, &ws));
    CHECK(c.data[0].logit == 1.0f && c.data[1].logit == -4.0f && c.data[2].logit == 0.0f);
    /* no-op settings leave even the sorted flag alone */
    cands_from_probs(&c, P4, 4);
    sample_softmax(&c.arr);
    CHECK(sample_repetition_penalties(&c.arr, (llama_token[]){3}, 1, 1.0f, 0.0f, 0.0f, &ws));
    CHECK(c.arr.sorted && c.data[0].logit == logf(0.4f));

    cands_from_probs(&c, P4, 4);
    sample_temp(&c.arr, 0.5f);
    const float temp_want[] = {-4.605170f, -3.218876f, -2.407946f, -1.832581f};
    for (size_t i = 0; i < 4; i++) {
        CHECK_NEAR(c.data[i].logit, temp_want[i], 1e-5);
        CHECK(c.data[i].p == 0.0f);
    }

    const float miro_logits[10] = {30.0f};
    struct rng_mt19937 rng;
    rng_mt19937_seed(&rng, 1234);
    float mu = 10.0f;
    cands_from_logits(&c, miro_logits, 10);
    CHECK_EQ_INT(sample_token_mirostat_v2(&c.arr, &rng, 5.0f, 0.1f, &mu, NULL), 0);
    CHECK_NEAR(mu, 10.5f, 1e-5);
    mu = 10.0f;
    cands_from_logits(&c, miro_logits, 10);
    CHECK_EQ_INT(sample_token_mirostat(&c.arr, &rng, 32000, 5.0f, 0.1f, 100, &mu, NULL), 0);
    CHECK_NEAR(mu, 10.5f, 1e-5);

    sample_workspace_free(&ws);
}

static void test_edge_cases(void) {
    struct cands c;
    struct rng_mt19937 rng;
    rng_mt19937_seed(&rng, 5);
    struct sample_draw draw;

    /* empty arrays: transforms are no-ops, token functions fail cleanly */
    llama_token_data_array empty = {c.data, 0, false};
    sample_softmax(&empty);
    sample_top_k(&empty, 5, 1);
    sample_top_p(&empty, 0.5f, 1);
    sample_min_p(&empty, 0.5f, 1);
    sample_tail_free(&empty, 0.5f, 1);
    CHECK(sample_typical(&empty, 0.5f, 1, NULL));
    CHECK(empty.size == 0);
    CHECK_EQ_INT(sample_token(&empty, &rng, NULL), -1);
    CHECK_EQ_INT(sample_token_greedy(&empty, NULL), -1);
    float mu = 10.0f;
    CHECK_EQ_INT(sample_token_mirostat(&empty, &rng, 10, 5.0f, 0.1f, 100, &mu, NULL), -1);
    CHECK_EQ_INT(sample_token_mirostat_v2(&empty, &rng, 5.0f, 0.1f, &mu, NULL), -1);

    /* greedy: first of equal maxima, no softmax, array untouched */
    cands_from_logits(&c, (float[]){1.0f, 3.0f, 3.0f, -1.0f}, 4);
    CHECK_EQ_INT(sample_token_greedy(&c.arr, &draw), 1);
    CHECK(!c.arr.sorted && c.data[1].p == 0.0f && draw.index == 1 && draw.u == -1.0);

    /* a single candidate is returned without touching the generator */
    struct rng_mt19937 before = rng;
    cands_from_logits(&c, (float[]){0.5f}, 1);
    CHECK_EQ_INT(sample_token(&c.arr, &rng, &draw), 0);
    CHECK(memcmp(&before, &rng, sizeof rng) == 0 && draw.u == -1.0 && draw.p == 1.0f);

    /* two candidates: u from two outputs, index = first cumulative >= u */
    struct rng_mt19937 shadow = rng;
    uint32_t a = rng_mt19937_next(&shadow), b = rng_mt19937_next(&shadow);
    double u = ((double)a + (double)b * 4294967296.0) / 18446744073709551616.0;
    cands_from_probs(&c, (float[]){0.5f, 0.5f}, 2);
    llama_token got = sample_token(&c.arr, &rng, &draw);
    CHECK(draw.u == u);
    CHECK_EQ_INT(got, c.data[u <= (double)c.data[0].p / ((double)c.data[0].p + c.data[1].p) ? 0 : 1].id);
    CHECK(memcmp(&shadow, &rng, sizeof rng) == 0);

    /* classifier-free guidance wants the unsorted full vocabulary */
    float guidance[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    cands_from_probs(&c, P4, 4);
    CHECK(!sample_classifier_free_guidance(&c.arr, guidance, 5, 1.5f, NULL));
    c.arr.sorted = true;
    CHECK(!sample_classifier_free_guidance(&c.arr, guidance, 4, 1.5f, NULL));
    /* uniform guidance: logits become scale * log_softmax(logits) + (1 - scale) * log(1/4) */
    c.arr.sorted = false;
    CHECK(sample_classifier_free_guidance(&c.arr, guidance, 4, 1.5f, NULL));
    for (size_t i = 0; i < 4; i++) {
        CHECK_NEAR(guidance[i], logf(0.25f), 1e-6);
        CHECK_NEAR(c.data[i].logit, 1.5f * logf(P4[i]) - 0.5f * logf(0.25f), 1e-5);
    }
    /* apply_guidance on raw arrays gives the same numbers */
    float logits[4], g2[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (size_t i = 0; i < 4; i++) {
        logits[i] = logf(P4[i]) + 7.0f; /* a shift does not change log-softmax */
    }
    sample_apply_guidance(logits, g2, 4, 1.5f);
    for (size_t i = 0; i < 4; i++) {
        CHECK_NEAR(logits[i], c.data[i].logit, 1e-5);
    }

    /* mirostat v1 with mu 0: k < 1 becomes one candidate, no draw */
    cands_from_probs(&c, P4, 4);
    mu = 0.0f;
    before = rng;
    CHECK_EQ_INT(sample_token_mirostat(&c.arr, &rng, 4, 5.0f, 0.1f, 100, &mu, &draw), 3);
    CHECK(c.arr.size == 1 && draw.u == -1.0 && memcmp(&before, &rng, sizeof rng) == 0);
    CHECK_NEAR(mu, 0.1f * (5.0f - 0.0f), 1e-6); /* surprise of p = 1 is 0 */
}

/* ---- the generator ---- */

static void test_rng(void) {
    struct rng_mt19937 rng;
    rng_mt19937_seed(&rng, 5489);
    uint32_t x = 0;
    for (int i = 0; i < 10000; i++) {
        x = rng_mt19937_next(&rng);
    }
    CHECK_EQ_INT(x, 4123659995u);

    static char text[RNG_MT19937_TEXT_MAX + 1];
    rng_mt19937_seed(&rng, 42);
    size_t len = rng_mt19937_write_text(&rng, text, sizeof text);
    CHECK_EQ_INT(len, 6714);
    CHECK(strncmp(text, "42 3107752595 1895908407 3900362577 ", 36) == 0);
    CHECK(len > 4 && strcmp(text + len - 4, " 624") == 0);
    CHECK_EQ_INT(rng_mt19937_write_text(&rng, NULL, 0), 6714);
    char small[10] = "unchanged";
    CHECK_EQ_INT(rng_mt19937_write_text(&rng, small, sizeof small), 6714);
    CHECK_STR_EQ(small, "unchanged");

    /* round trip mid-block: the copy continues the same sequence */
    for (int i = 0; i < 1000; i++) {
        rng_mt19937_next(&rng);
    }
    len = rng_mt19937_write_text(&rng, text, sizeof text);
    struct rng_mt19937 copy;
    rng_mt19937_seed(&copy, 0);
    CHECK(rng_mt19937_read_text(&copy, text, len));
    CHECK(memcmp(&copy, &rng, sizeof rng) == 0);
    int diverged = 0;
    for (int i = 0; i < 700; i++) {
        diverged += rng_mt19937_next(&copy) != rng_mt19937_next(&rng);
    }
    CHECK_EQ_INT(diverged, 0);

    /* whitespace between numbers is accepted as operator>> does */
    rng_mt19937_seed(&rng, 7);
    len = rng_mt19937_write_text(&rng, text, sizeof text);
    text[1] = '\n';
    char *spaced = malloc(len + 3);
    spaced[0] = ' ';
    memcpy(spaced + 1, text, len);
    spaced[len + 1] = '\n';
    CHECK(rng_mt19937_read_text(&copy, spaced, len + 2));
    CHECK(memcmp(&copy, &rng, sizeof rng) == 0);
    free(spaced);

    /* malformed text: rejected, state unchanged */
    rng_mt19937_seed(&rng, 7);
    len = rng_mt19937_write_text(&rng, text, sizeof text);
    struct rng_mt19937 keep;
    rng_mt19937_seed(&keep, 99);
    struct rng_mt19937 probe = keep;
    char *bad = malloc(len + 32);
    CHECK(!rng_mt19937_read_text(&probe, "", 0));
    CHECK(!rng_mt19937_read_text(&probe, text, len - 4)); /* index missing */
    memcpy(bad, text, len);
    memcpy(bad + len, " 1", 2);
    CHECK(!rng_mt19937_read_text(&probe, bad, len + 2)); /* 626 numbers */
    memcpy(bad, text, len);
    bad[len - 1] = '5'; /* index 625 */
    CHECK(!rng_mt19937_read_text(&probe, bad, len));
    memcpy(bad, text, len);
    bad[0] = '-';
    CHECK(!rng_mt19937_read_text(&probe, bad, len));
    memcpy(bad, text, len);
    bad[1] = 'x';
    CHECK(!rng_mt19937_read_text(&probe, bad, len));
    memcpy(bad, text, len);
    memcpy(bad + len, " x", 2);
    CHECK(!rng_mt19937_read_text(&probe, bad, len + 2));
    const char *big = "4294967296";
    memcpy(bad, big, 10);
    memcpy(bad + 10, text + 1, len - 1);
    CHECK(!rng_mt19937_read_text(&probe, bad, len + 9));
    CHECK(memcmp(&probe, &keep, sizeof keep) == 0);
    free(bad);

    CHECK_EQ_INT(rng_seed_resolve(1234), 1234);
    CHECK(rng_seed_resolve(LLAMA_DEFAULT_SEED) != LLAMA_DEFAULT_SEED);
}

/* ---- golden/sampling-stories260K.json: the draw arithmetic ---- */

static double json_num(const cJSON *obj, const char *key) {
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(obj, key);
    return cJSON_IsNumber(it) ? it->valuedouble : NAN;
}

static void test_golden_draws(void) {
    cJSON *root = golden_load("golden/sampling-stories260K.json");
    int n_draws = 0, n_mu = 0, n_cases = 0;
    const cJSON *cases = cJSON_GetObjectItemCaseSensitive(root, "cases");
    const cJSON *cs;
    cJSON_ArrayForEach(cs, cases) {
        const char *name = cJSON_GetObjectItemCaseSensitive(cs, "name")->valuestring;
        const char *mode = cJSON_GetObjectItemCaseSensitive(cs, "mode")->valuestring;
        const cJSON *params = cJSON_GetObjectItemCaseSensitive(cs, "params");
        const bool mirostat = strncmp(mode, "mirostat", 8) == 0;
        const float eta = (float)json_num(params, "mirostat_eta");
        const float tau = (float)json_num(params, "mirostat_tau");
        float mu = (float)json_num(cs, "mirostat_mu_initial");
        struct rng_mt19937 rng;
        rng_mt19937_seed(&rng, (uint32_t)json_num(cs, "context_seed"));
        n_cases++;

        const cJSON *step;
        int i = 0;
        cJSON_ArrayForEach(step, cJSON_GetObjectItemCaseSensitive(cs, "trace")) {
            const cJSON *used = cJSON_GetObjectItemCaseSensitive(step, "rng_used");
            if (strcmp(mode, "greedy") == 0) {
                CHECK(used == NULL); /* greedy never draws */
                continue;
            }
            const int n_cand = (int)json_num(step, "n_cand");
            const int idx = (int)json_num(step, "idx");
            const double p = json_num(step, "p");
            /* the generator is used exactly when two or more candidates are left */
            CHECK_MSG(cJSON_IsTrue(used) == (n_cand >= 2), "%s step %d", name, i);
            if (cJSON_IsTrue(used)) {
                double u = rng_mt19937_canonical(&rng);
                CHECK_MSG(u == json_num(step, "u"), "%s step %d: u %.17g, golden %.17g", name, i, u,
                          json_num(step, "u"));
                if (n_cand == 2) {
                    /* two candidates: index 0 iff u <= its normalised p (7 printed digits) */
                    double boundary = idx == 0 ? p : 1.0 - p;
                    if (fabs(u - boundary) > 1e-6) {
                        CHECK_MSG((idx == 0) == (u <= boundary), "%s step %d: u %.9f idx %d p %.7f", name, i, u,
                                  idx, p);
                    }
                }
                n_draws++;
            }
            if (mirostat) {
                /* mu -= eta * (surprise - tau), surprise of the chosen p */
                mu = fmaf(-eta, -log2f((float)p) - tau, mu);
                const double want = json_num(step, "mu_after");
                CHECK_MSG(fabs(mu - want) <= 2e-5 * fmax(1.0, fabs(want)), "%s step %d: mu %.7g, golden %.7g", name,
                          i, mu, want);
                mu = (float)want;
                n_mu++;
            }
            i++;
        }
    }
    CHECK_EQ_INT(n_cases, 11);
    CHECK(n_draws > 300);
    CHECK_EQ_INT(n_mu, 4 * 64);
    printf("golden sampling traces: %d draws and %d mirostat updates checked\n", n_draws, n_mu);
    cJSON_Delete(root);
}

int main(void) {
    test_upstream_vectors();
    test_derived_vectors();
    test_edge_cases();
    test_rng();
    test_golden_draws();
    return test_finish("test_sampling");
}

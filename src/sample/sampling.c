#include "sample/sampling.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "sample/sort.h"

void sample_workspace_free(struct sample_workspace *ws) {
    if (ws) {
        free(ws->buf);
        ws->buf = NULL;
        ws->cap = 0;
    }
}

/* Grows ws to at least `bytes`; NULL (with error_set) when memory runs out. */
static void *workspace_reserve(struct sample_workspace *ws, size_t bytes) {
    if (ws->cap < bytes) {
        void *grown = realloc(ws->buf, bytes);
        if (!grown) {
            error_set("sampling: out of memory for %zu bytes of scratch", bytes);
            return NULL;
        }
        ws->buf = grown;
        ws->cap = bytes;
    }
    return ws->buf;
}

void sample_softmax(llama_token_data_array *cand) {
    if (cand->size == 0) {
        return;
    }
    if (!cand->sorted) {
        sample_sort_desc(cand->data, cand->size);
        cand->sorted = true;
    }
    const float max_l = cand->data[0].logit;
    float sum = 0.0f;
    for (size_t i = 0; i < cand->size; i++) {
        float p = expf(cand->data[i].logit - max_l);
        cand->data[i].p = p;
        sum += p;
    }
    for (size_t i = 0; i < cand->size; i++) {
        cand->data[i].p /= sum;
    }
}

void sample_top_k(llama_token_data_array *cand, int32_t k, size_t min_keep) {
    /* b1892 clamps in int: k = min(max(k, (int)min_keep), (int)size) */
    if (k < (int32_t)min_keep) {
        k = (int32_t)min_keep;
    }
    if (k > (int32_t)cand->size) {
        k = (int32_t)cand->size;
    }
    if (k < 0) {
        k = 0; /* only reachable with min_keep beyond INT_MAX; b1892 would misbehave */
    }
    if (!cand->sorted) {
        if ((size_t)k == cand->size) {
            sample_sort_desc(cand->data, cand->size);
        } else {
            sample_partial_sort_desc(cand->data, (size_t)k, cand->size);
        }
        cand->sorted = true;
    }
    cand->size = (size_t)k;
}

void sample_top_p(llama_token_data_array *cand, float p, size_t min_keep) {
    if (p >= 1.0f || cand->size == 0) {
        return;
    }
    sample_softmax(cand);
    float cum = 0.0f;
    size_t last = cand->size;
    for (size_t i = 0; i < cand->size; i++) {
        cum += cand->data[i].p;
        if (cum >= p && i + 1 >= min_keep) {
            last = i + 1;
            break;
        }
    }
    cand->size = last;
}

void sample_min_p(llama_token_data_array *cand, float p, size_t min_keep) {
    if (p <= 0.0f || cand->size == 0) {
        return;
    }
    sample_softmax(cand);
    const float scale = cand->data[0].p;
    size_t i = 1;
    for (; i < cand->size; i++) {
        if (cand->data[i].p < p * scale && i >= min_keep) {
            break;
        }
    }
    cand->size = i;
}

/* |second derivative| of the sorted probabilities at i, computed as b1892
 * does (first differences in float, then their difference). */
static inline float tail_free_d2(const llama_token_data *d, size_t i) {
    const float d1_i = d[i].p - d[i + 1].p;
    const float d1_next = d[i + 1].p - d[i + 2].p;
    return fabsf(d1_i - d1_next);
}

void sample_tail_free(llama_token_data_array *cand, float z, size_t min_keep) {
    if (z >= 1.0f || cand->size <= 2) {
        return;
    }
    sample_softmax(cand);
    const size_t n_d2 = cand->size - 2;
    float sum = 0.0f;
    for (size_t i = 0; i < n_d2; i++) {
        sum += tail_free_d2(cand->data, i);
    }
    const bool uniform = !(sum > 1e-6f);
    const float uniform_value = 1.0f / (float)n_d2;
    float cum = 0.0f;
    size_t last = cand->size;
    for (size_t i = 0; i < n_d2; i++) {
        cum += uniform ? uniform_value : tail_free_d2(cand->data, i) / sum;
        if (cum > z && i >= min_keep) {
            last = i;
            break;
        }
    }
    cand->size = last;
}

bool sample_typical(llama_token_data_array *cand, float p, size_t min_keep, struct sample_workspace *ws) {
    if (p >= 1.0f || cand->size == 0) {
        return true;
    }
    const size_t n = cand->size;
    struct sample_workspace local = {0};
    struct sample_workspace *w = ws ? ws : &local;
    llama_token_data *scratch = workspace_reserve(w, 2 * n * sizeof(llama_token_data));
    if (!scratch) {
        return false;
    }
    sample_softmax(cand);

    float entropy = 0.0f;
    for (size_t i = 0; i < n; i++) {
        entropy = fmaf(-cand->data[i].p, logf(cand->data[i].p), entropy);
    }
    /* b1892 std::sorts indices by |-log p - H| ascending; sorting (index,
     * -score) pairs descending makes the same comparisons and moves. */
    llama_token_data *keys = scratch;
    llama_token_data *saved = scratch + n;
    for (size_t i = 0; i < n; i++) {
        keys[i].id = (llama_token)i;
        keys[i].logit = -fabsf(-logf(cand->data[i].p) - entropy);
        keys[i].p = 0.0f;
    }
    sample_sort_desc(keys, n);

    float cum = 0.0f;
    size_t last = n;
    for (size_t i = 0; i < n; i++) {
        cum += cand->data[keys[i].id].p;
        if (cum > p && i >= min_keep - 1) { /* size_t arithmetic, as b1892 */
            last = i + 1;
            break;
        }
    }
    memcpy(saved, cand->data, n * sizeof(llama_token_data));
    for (size_t i = 0; i < last; i++) {
        cand->data[i] = saved[keys[i].id];
    }
    cand->size = last;
    cand->sorted = false;
    if (!ws) {
        sample_workspace_free(&local);
    }
    return true;
}

void sample_temp(llama_token_data_array *cand, float temp) {
    for (size_t i = 0; i < cand->size; i++) {
        cand->data[i].logit /= temp;
    }
}

static int compare_tokens(const void *a, const void *b) {
    llama_token x = *(const llama_token *)a, y = *(const llama_token *)b;
    return (x > y) - (x < y);
}

/* Occurrences of id in the sorted array (binary search for the first). */
static size_t count_sorted(const llama_token *sorted, size_t n, llama_token id) {
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (sorted[mid] < id) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    size_t count = 0;
    while (lo + count < n && sorted[lo + count] == id) {
        count++;
    }
    return count;
}

bool sample_repetition_penalties(llama_token_data_array *cand, const llama_token *last, size_t n_last,
                                 float repeat, float freq, float present, struct sample_workspace *ws) {
    if (n_last == 0 || (repeat == 1.0f && freq == 0.0f && present == 0.0f)) {
        return true;
    }
    struct sample_workspace local = {0};
    struct sample_workspace *w = ws ? ws : &local;
    llama_token *sorted = workspace_reserve(w, n_last * sizeof(llama_token));
    if (!sorted) {
        return false;
    }
    memcpy(sorted, last, n_last * sizeof(llama_token));
    qsort(sorted, n_last, sizeof(llama_token), compare_tokens);

    for (size_t i = 0; i < cand->size; i++) {
        const size_t count = count_sorted(sorted, n_last, cand->data[i].id);
        if (count == 0) {
            continue;
        }
        float *logit = &cand->data[i].logit;
        if (*logit <= 0) {
            *logit *= repeat;
        } else {
            *logit /= repeat;
        }
        *logit -= fmaf((float)(int)count, freq, present);
    }
    cand->sorted = false;
    if (!ws) {
        sample_workspace_free(&local);
    }
    return true;
}

void sample_log_softmax(float *x, size_t n) {
    if (n == 0) {
        return;
    }
    float max_l = x[0];
    for (size_t i = 1; i < n; i++) {
        if (max_l < x[i]) {
            max_l = x[i];
        }
    }
    float sum = 0.0f;
    for (size_t i = 0; i < n; i++) {
        float p = expf(x[i] - max_l);
        sum += p;
        x[i] = p;
    }
    for (size_t i = 0; i < n; i++) {
        x[i] = logf(x[i] / sum);
    }
}

void sample_apply_guidance(float *logits, float *guidance, size_t n_vocab, float scale) {
    sample_log_softmax(logits, n_vocab);
    sample_log_softmax(guidance, n_vocab);
    for (size_t i = 0; i < n_vocab; i++) {
        logits[i] = fmaf(scale, logits[i] - guidance[i], guidance[i]);
    }
}

bool sample_classifier_free_guidance(llama_token_data_array *cand, float *guidance, size_t n_vocab, float scale,
                                     struct sample_workspace *ws) {
    if (cand->size != n_vocab || cand->sorted) {
        error_set("classifier-free guidance needs the unsorted full vocabulary (%zu candidates, n_vocab %zu%s)",
                  cand->size, n_vocab, cand->sorted ? ", sorted" : "");
        return false;
    }
    struct sample_workspace local = {0};
    struct sample_workspace *w = ws ? ws : &local;
    float *base = workspace_reserve(w, n_vocab * sizeof(float));
    if (!base) {
        return false;
    }
    for (size_t i = 0; i < n_vocab; i++) {
        base[i] = cand->data[i].logit;
    }
    sample_log_softmax(base, n_vocab);
    sample_log_softmax(guidance, n_vocab);
    for (size_t i = 0; i < n_vocab; i++) {
        cand->data[i].logit = fmaf(scale, base[i] - guidance[i], guidance[i]);
    }
    if (!ws) {
        sample_workspace_free(&local);
    }
    return true;
}

static void draw_record(struct sample_draw *draw, const llama_token_data_array *cand, size_t index, double u) {
    if (draw) {
        draw->n_cand = cand->size;
        draw->index = index;
        draw->u = u;
        draw->p = cand->data[index].p;
    }
}

llama_token sample_token_greedy(const llama_token_data_array *cand, struct sample_draw *draw) {
    if (cand->size == 0) {
        error_set("sampling: no candidates");
        return -1;
    }
    size_t best = 0;
    for (size_t i = 1; i < cand->size; i++) {
        if (cand->data[best].logit < cand->data[i].logit) {
            best = i;
        }
    }
    draw_record(draw, cand, best, -1.0);
    return cand->data[best].id;
}

llama_token sample_token(llama_token_data_array *cand, struct rng_mt19937 *rng, struct sample_draw *draw) {
    if (cand->size == 0) {
        error_set("sampling: no candidates");
        return -1;
    }
    sample_softmax(cand);
    double u;
    size_t index = rng_discrete_draw(rng, cand->data, cand->size, &u);
    draw_record(draw, cand, index, u);
    return cand->data[index].id;
}

/* int(k) as b1892's x86-64 build converts it: truncation, and INT_MIN (the
 * "integer indefinite" of cvttss2si) for NaN and out-of-range values. */
static int32_t float_to_int_x86(float k) {
    if (!(k > -2147483904.0f && k < 2147483648.0f)) {
        return INT32_MIN;
    }
    return (int32_t)k;
}

/* The surprise update both mirostat versions end with; the chosen token is
 * looked up by id as b1892 does. */
static void mirostat_update_mu(const llama_token_data_array *cand, llama_token x, float tau, float eta, float *mu) {
    size_t idx = 0;
    while (idx < cand->size && cand->data[idx].id != x) {
        idx++;
    }
    const float observed_surprise = -log2f(cand->data[idx].p);
    const float e = observed_surprise - tau;
    *mu = fmaf(-eta, e, *mu);
}

llama_token sample_token_mirostat(llama_token_data_array *cand, struct rng_mt19937 *rng, int32_t n_vocab,
                                  float tau, float eta, int32_t m, float *mu, struct sample_draw *draw) {
    if (cand->size == 0) {
        error_set("sampling: no candidates");
        return -1;
    }
    const float N = (float)n_vocab;
    sample_softmax(cand);

    float sum_ti_bi = 0.0f;
    float sum_ti_sq = 0.0f;
    const size_t m_limit = (size_t)((int64_t)m - 1); /* size_t(m - 1), as b1892 */
    for (size_t i = 0; i < m_limit && i < cand->size - 1; i++) {
        const float t_i = logf((float)(i + 2) / (float)(i + 1));
        const float b_i = logf(cand->data[i].p / cand->data[i + 1].p);
        sum_ti_bi = fmaf(t_i, b_i, sum_ti_bi);
        sum_ti_sq = fmaf(t_i, t_i, sum_ti_sq);
    }
    const float s_hat = sum_ti_bi / sum_ti_sq;
    const float epsilon_hat = s_hat - 1;
    const float k = powf((epsilon_hat * powf(2.0f, *mu)) / (1 - powf(N, -epsilon_hat)), 1 / s_hat);

    sample_top_k(cand, float_to_int_x86(k), 1);
    const llama_token x = sample_token(cand, rng, draw);
    mirostat_update_mu(cand, x, tau, eta, mu);
    return x;
}

llama_token sample_token_mirostat_v2(llama_token_data_array *cand, struct rng_mt19937 *rng,
                                     float tau, float eta, float *mu, struct sample_draw *draw) {
    if (cand->size == 0) {
        error_set("sampling: no candidates");
        return -1;
    }
    sample_softmax(cand);
    size_t keep = 0;
    while (keep < cand->size && !(-log2f(cand->data[keep].p) > *mu)) {
        keep++;
    }
    cand->size = keep == 0 ? 1 : keep;
    sample_softmax(cand);
    const llama_token x = sample_token(cand, rng, draw);
    mirostat_update_mu(cand, x, tau, eta, mu);
    return x;
}

/*
 * The samplers of b1892's llama.h, on a llama_token_data_array, without a
 * context: each does what the llama_sample_* function of the same name does
 * (same order of operations, same in-place sorting and trimming, same
 * float/double arithmetic), so seeded runs reproduce b1892's tokens.
 *
 * What the llama.h wrappers (src/api/) add: the context's RNG and n_vocab,
 * the timing counters (t_sample_us around each call, n_sample++ in
 * llama_sample_token / _greedy / the mirostat ones), a per-context
 * sample_workspace, and NULL-context checks (b1892 asserts ctx where it needs
 * the RNG or the vocabulary size).
 *
 * b1892's build contracts a*b+c into a fused multiply-add (GCC, gnu++11,
 * -march=native); the few places where that changes a result (guidance,
 * penalties, typical's entropy, mirostat) use fmaf() to round the same way.
 *
 * Empty arrays: b1892 asserts size > 0 in softmax; here every transform is a
 * no-op on an empty array and the token-returning functions return -1 with
 * error_set().
 */
#ifndef LLAMAC_SAMPLE_SAMPLING_H
#define LLAMAC_SAMPLE_SAMPLING_H

#include <stdbool.h>
#include <stddef.h>

#include "llama.h"
#include "sample/rng.h"

/* Scratch memory for the samplers that need it (typical, penalties,
 * classifier-free guidance); it grows to the largest request and
 * is reused, so a context that keeps one allocates nothing per token. Zero-
 * initialise it; free with sample_workspace_free(). Functions taking one
 * accept NULL and then allocate for the call. */
struct sample_workspace {
    void *buf;
    size_t cap;
};
void sample_workspace_free(struct sample_workspace *ws);

/* What a draw did, for traces (golden/sampling-stories260K.json records the
 * same fields). */
struct sample_draw {
    size_t n_cand;  /* candidates left when the token was chosen */
    size_t index;   /* index of the chosen entry in the (sorted) array */
    double u;       /* the uniform variate, -1 when the generator was not used */
    float p;        /* probability of the chosen entry */
};

/* Sorts by logit descending (unless already sorted) and sets p = softmax. */
void sample_softmax(llama_token_data_array *cand);

/* Keeps the k largest logits (k raised to min_keep, capped at size); sorts
 * them (partial sort when k < size) unless sorted. p is not touched. */
void sample_top_k(llama_token_data_array *cand, int32_t k, size_t min_keep);

/* p >= 1: no-op. Else softmax and keep the shortest prefix whose cumulative p
 * reaches p (at least min_keep). */
void sample_top_p(llama_token_data_array *cand, float p, size_t min_keep);

/* p <= 0 or empty: no-op. Else softmax and keep entries with p_i >= p * p_0
 * (stops at the first smaller one at index >= min_keep); p not renormalised. */
void sample_min_p(llama_token_data_array *cand, float p, size_t min_keep);

/* Tail-free sampling; z >= 1 or size <= 2: no-op. */
void sample_tail_free(llama_token_data_array *cand, float z, size_t min_keep);

/* Locally typical sampling; p >= 1: no-op. Leaves the array ordered by
 * closeness to the entropy and sorted = false. false on allocation failure. */
bool sample_typical(llama_token_data_array *cand, float p, size_t min_keep, struct sample_workspace *ws);

/* logit /= temp for every candidate. */
void sample_temp(llama_token_data_array *cand, float temp);

/* Repetition, frequency and presence penalties over last[0..n_last). No-op
 * when n_last == 0 or (repeat == 1 and freq == 0 and present == 0). false on
 * allocation failure. */
bool sample_repetition_penalties(llama_token_data_array *cand, const llama_token *last, size_t n_last,
                                 float repeat, float freq, float present, struct sample_workspace *ws);

/* In place: x := log(softmax(x)) (max-subtracted expf, float sum, logf(p/sum)). */
void sample_log_softmax(float *x, size_t n);

/* llama_sample_apply_guidance: both arrays (n_vocab floats) are log-softmaxed
 * in place, then logits[i] = scale * (logits[i] - guidance[i]) + guidance[i]. */
void sample_apply_guidance(float *logits, float *guidance, size_t n_vocab, float scale);

/* llama_sample_classifier_free_guidance: the same on the candidates' logits,
 * which must be the unsorted full vocabulary in id order (candidate i pairs
 * with guidance[i]); guidance (n_vocab floats, the guidance context's logits)
 * is log-softmaxed in place. false with error_set() when cand->size !=
 * n_vocab, cand->sorted, or on allocation failure. */
bool sample_classifier_free_guidance(llama_token_data_array *cand, float *guidance, size_t n_vocab, float scale,
                                     struct sample_workspace *ws);

/* The id of the largest logit (first of equals); no softmax; -1 if empty. */
llama_token sample_token_greedy(const llama_token_data_array *cand, struct sample_draw *draw);

/* Softmax, then rng_discrete_draw(); -1 if empty. draw may be NULL. */
llama_token sample_token(llama_token_data_array *cand, struct rng_mt19937 *rng, struct sample_draw *draw);

/* Mirostat 1.0: estimate s_hat from the top m probabilities, top-k with the k
 * that targets surprise tau (N = n_vocab), draw, update *mu. */
llama_token sample_token_mirostat(llama_token_data_array *cand, struct rng_mt19937 *rng, int32_t n_vocab,
                                  float tau, float eta, int32_t m, float *mu, struct sample_draw *draw);

/* Mirostat 2.0: truncate where the surprise -log2 p exceeds *mu (keep >= 1),
 * renormalise, draw, update *mu. */
llama_token sample_token_mirostat_v2(llama_token_data_array *cand, struct rng_mt19937 *rng,
                                     float tau, float eta, float *mu, struct sample_draw *draw);

#endif

/*
 * llama_beam_search as b1892 defines it: beams carry the tokens generated
 * since the last common prefix and a probability; each step every live beam
 * is extended by its n_beams most likely next tokens, the n_beams best
 * candidates survive (a min-heap on p), probabilities are renormalised, and
 * the callback sees the beams (and may end some with eob). Tokens shared by
 * all beams are committed to the context as a prefix.
 *
 * Unlike b1892, a beam's tokens are decoded after removing sequence 0's
 * positions from n_past on, so beams never attend to each other's tokens.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "context/context.h"
#include "core/log.h"
#include "core/timer.h"

#define BEAM_MAX 256

struct beam {
    llama_token *tokens;
    size_t n_tokens, cap;
    float p;
    bool eob;
};

struct beam_search {
    struct llama_context *ctx;
    size_t n_beams;
    int32_t n_past;
    struct beam *beams, *next;
    size_t n_cur, n_next;
    struct llama_beam_view *views;
    llama_token_data *top;  /* n_beams best tokens of one beam's logits */
    bool failed;
};

static bool beam_copy(struct beam *dst, const struct beam *src, size_t extra) {
    size_t need = src->n_tokens + extra;
    if (dst->cap < need) {
        size_t cap = need < 16 ? 16 : need * 2;
        llama_token *t = realloc(dst->tokens, cap * sizeof *t);
        if (!t) return false;
        dst->tokens = t;
        dst->cap = cap;
    }
    if (src->n_tokens) memcpy(dst->tokens, src->tokens, src->n_tokens * sizeof *dst->tokens);
    dst->n_tokens = src->n_tokens;
    dst->p = src->p;
    dst->eob = src->eob;
    return true;
}

/* min-heap on p over bs->next[0..n_next) */
static void heap_sift_down(struct beam *h, size_t n, size_t i) {
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < n && h[l].p < h[m].p) m = l;
        if (r < n && h[r].p < h[m].p) m = r;
        if (m == i) return;
        struct beam t = h[i];
        h[i] = h[m];
        h[m] = t;
        i = m;
    }
}

static void heap_make(struct beam *h, size_t n) {
    for (size_t i = n / 2; i-- > 0;) heap_sift_down(h, n, i);
}

/* Puts (beam + token, p) into the next generation, replacing its worst member when full. */
static void offer(struct beam_search *bs, const struct beam *beam, llama_token token, bool extend, float p) {
    struct beam *slot;
    if (bs->n_next < bs->n_beams) {
        slot = &bs->next[bs->n_next++];
    } else if (bs->next[0].p < p) {
        slot = &bs->next[0];
    } else {
        return;
    }
    if (!beam_copy(slot, beam, 1)) {
        bs->failed = true;
        return;
    }
    if (extend) slot->tokens[slot->n_tokens++] = token;
    slot->p = p;
    if (bs->n_next == bs->n_beams) heap_make(bs->next, bs->n_next);
}

static int cmp_logit_desc(const void *a, const void *b) {
    float x = ((const llama_token_data *)a)->logit, y = ((const llama_token_data *)b)->logit;
    return (x < y) - (x > y);
}

static void extend_beam(struct beam_search *bs, const struct beam *beam) {
    if (beam->eob) {
        offer(bs, beam, 0, false, beam->p);
        return;
    }
    struct llama_context *ctx = bs->ctx;
    if (beam->n_tokens) {
        llama_kv_cache_seq_rm(ctx, 0, bs->n_past, -1);
        if (llama_decode(ctx, llama_batch_get_one(beam->tokens, (int32_t)beam->n_tokens, bs->n_past, 0)) != 0) {
            bs->failed = true;
            return;
        }
    }
    const int32_t n_vocab = (int32_t)ctx->model->hparams.n_vocab;
    const float *logits = llama_get_logits_ith(ctx, ctx->n_logit_rows - 1);
    float max = -INFINITY;
    for (int32_t i = 0; i < n_vocab; i++) max = logits[i] > max ? logits[i] : max;
    float norm = 0.0f;
    for (int32_t i = 0; i < n_vocab; i++) norm += expf(logits[i] - max);
    /* the n_beams largest logits: a bounded insertion list (n_beams is small) */
    size_t n_top = 0;
    for (int32_t i = 0; i < n_vocab; i++) {
        if (n_top == bs->n_beams && logits[i] <= bs->top[n_top - 1].logit) continue;
        size_t j = n_top < bs->n_beams ? n_top++ : n_top - 1;
        while (j > 0 && bs->top[j - 1].logit < logits[i]) {
            bs->top[j] = bs->top[j - 1];
            j--;
        }
        bs->top[j] = (llama_token_data){ i, logits[i], 0.0f };
    }
    qsort(bs->top, n_top, sizeof *bs->top, cmp_logit_desc);
    for (size_t i = 0; i < n_top; i++) {
        float p = beam->p * expf(bs->top[i].logit - max) / norm;
        offer(bs, beam, bs->top[i].id, true, p);
    }
}

static size_t common_prefix(const struct beam_search *bs) {
    size_t n = bs->beams[0].n_tokens;
    for (size_t i = 1; i < bs->n_cur; i++) {
        if (bs->beams[i].n_tokens < n) n = bs->beams[i].n_tokens;
        for (size_t j = 0; j < n; j++) {
            if (bs->beams[0].tokens[j] != bs->beams[i].tokens[j]) {
                n = j;
                break;
            }
        }
    }
    return n;
}

static struct llama_beams_state beams_state(struct beam_search *bs, bool last_call) {
    for (size_t i = 0; i < bs->n_cur; i++) {
        const struct beam *b = &bs->beams[i];
        bs->views[i] = (struct llama_beam_view){ b->tokens, b->n_tokens, b->p, b->eob };
    }
    return (struct llama_beams_state){ bs->views, bs->n_cur, common_prefix(bs), last_call };
}

static size_t top_beam(const struct beam_search *bs) {
    size_t best = 0;
    for (size_t i = 1; i < bs->n_cur; i++) {
        if (bs->beams[i].p > bs->beams[best].p) best = i;
    }
    return best;
}

static bool any_live(const struct beam_search *bs) {
    for (size_t i = 0; i < bs->n_cur; i++) {
        if (!bs->beams[i].eob) return true;
    }
    return false;
}

static void beam_search_free(struct beam_search *bs) {
    for (size_t i = 0; i < bs->n_beams; i++) {
        if (bs->beams) free(bs->beams[i].tokens);
        if (bs->next) free(bs->next[i].tokens);
    }
    free(bs->beams);
    free(bs->next);
    free(bs->views);
    free(bs->top);
}

void llama_beam_search(struct llama_context *ctx, llama_beam_search_callback_fn_t callback, void *callback_data,
                       size_t n_beams, int32_t n_past, int32_t n_predict) {
    if (!ctx || !callback || n_beams == 0 || n_beams > BEAM_MAX || n_past < 0 || !ctx->kv.cells) {
        error_set("llama_beam_search: a context with a KV cache, a callback, 1..%d beams and n_past >= 0 are required",
                  BEAM_MAX);
        return;
    }
    const int64_t t_start = time_us();
    struct beam_search bs = { .ctx = ctx, .n_beams = n_beams, .n_past = n_past };
    bs.beams = calloc(n_beams, sizeof *bs.beams);
    bs.next = calloc(n_beams, sizeof *bs.next);
    bs.views = calloc(n_beams, sizeof *bs.views);
    bs.top = calloc(n_beams, sizeof *bs.top);
    if (!bs.beams || !bs.next || !bs.views || !bs.top) {
        error_set("llama_beam_search: out of memory");
        beam_search_free(&bs);
        return;
    }
    bs.beams[0].p = 1.0f; /* one empty beam */
    bs.n_cur = 1;
    for (int32_t step = 0; step < n_predict && any_live(&bs) && !bs.beams[top_beam(&bs)].eob && !bs.failed; step++) {
        struct llama_beams_state st = beams_state(&bs, false);
        callback(callback_data, st);
        for (size_t i = 0; i < bs.n_cur; i++) { /* the callback may set p and eob */
            bs.beams[i].p = bs.views[i].p;
            bs.beams[i].eob = bs.views[i].eob;
        }
        const size_t prefix = st.common_prefix_length;
        if (prefix) {
            llama_kv_cache_seq_rm(ctx, 0, bs.n_past, -1);
            if (llama_decode(ctx, llama_batch_get_one(bs.beams[0].tokens, (int32_t)prefix, bs.n_past, 0)) != 0) break;
            bs.n_past += (int32_t)prefix;
            for (size_t i = 0; i < bs.n_cur; i++) {
                struct beam *b = &bs.beams[i];
                memmove(b->tokens, b->tokens + prefix, (b->n_tokens - prefix) * sizeof *b->tokens);
                b->n_tokens -= prefix;
            }
        }
        bs.n_next = 0;
        for (size_t i = 0; i < bs.n_cur && !bs.failed; i++) extend_beam(&bs, &bs.beams[i]);
        if (bs.failed || bs.n_next == 0) break;
        struct beam *t = bs.beams;
        bs.beams = bs.next;
        bs.next = t;
        bs.n_cur = bs.n_next;
        float sum = 0.0f;
        for (size_t i = 0; i < bs.n_cur; i++) sum += bs.beams[i].p;
        for (size_t i = 0; i < bs.n_cur && sum > 0.0f; i++) bs.beams[i].p /= sum;
    }
    if (bs.failed) error_set("llama_beam_search: decoding a beam failed");
    size_t best = top_beam(&bs);
    if (best != 0) {
        struct beam t = bs.beams[0];
        bs.beams[0] = bs.beams[best];
        bs.beams[best] = t;
    }
    bs.n_cur = 1;
    callback(callback_data, beams_state(&bs, true));
    beam_search_free(&bs);
    ctx->t_sample_us += time_us() - t_start;
    ctx->n_sample++;
}

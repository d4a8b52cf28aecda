/*
 * Training sessions: batches, the step (forward, backward, accumulation,
 * AdamW), validation and checkpoints. See trainer.h.
 */
#include "train/trainer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_compute.h"
#include "core/log.h"
#include "gguf/gguf.h"
#include "graph/alloc.h"
#include "train/autograd.h"
#include "train/train_rng.h"

#define TRAIN_CKPT_FORMAT 1

struct train_session {
    struct train_params p;
    struct train_model *model;
    struct train_adamw *opt;
    struct train_rng rng;
    int32_t bos;

    const int32_t *train_tokens, *valid_tokens;
    size_t n_train, n_valid;
    uint64_t train_hash;
    int64_t n_eval_windows;

    /* graph: tensors in gctx, placed by ga; inputs and the seed in their own buffer */
    struct tensor_ctx *gctx, *ictx;
    struct backend_buffer *ibuf;
    struct graph_allocr *ga;
    struct train_inputs in;
    struct tensor *seed, *loss;
    struct graph *gf, *gb;
    struct cpu_threadpool *pool;

    float *grad;          /* accumulated gradient, parameters in file order */
    int32_t *windows;     /* n_batch windows of n_ctx + 1 tokens */
    const int32_t **rows; /* [n_batch]: the windows */
    size_t *starts;       /* [n_batch]: where they start in the stream */
};

void train_params_default(struct train_params *p) {
    memset(p, 0, sizeof *p);
    train_hparams_default(&p->hp);
    train_opt_params_default(&p->opt);
    p->n_batch = 16;
    p->n_accum = 1;
    p->seed = 1;
    p->n_threads = 1;
    p->eval_batches = 0;
}

/* FNV-1a over the token values: tells a checkpoint which data it was trained on. */
static uint64_t train_tokens_hash(const int32_t *tokens, size_t n) {
    uint64_t h = 0xcbf29ce484222325ull;
    const unsigned char *p = (const unsigned char *)tokens;
    for (size_t i = 0; i < n * sizeof *tokens; i++) h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

/* Stream tokens a window needs: n_ctx with BOS in front, n_ctx + 1 without. */
static size_t train_window_span(const struct train_session *s) {
    return (size_t)s->p.hp.n_ctx + (s->bos >= 0 ? 0 : 1);
}

static void train_window_fill(const struct train_session *s, const int32_t *stream, size_t start, int32_t *w) {
    const size_t span = train_window_span(s);
    if (s->bos >= 0) *w++ = s->bos;
    memcpy(w, stream + start, span * sizeof *w);
}

/* Builds the graph once: forward (kept as gf for validation), backward, memory. */
static bool train_session_build(struct train_session *s) {
    const struct train_hparams *hp = &s->p.hp;
    const size_t capacity = 512 * (size_t)hp->n_layer + 1024;
    s->gctx = tensor_ctx_new(capacity * 2, 0);
    s->ictx = tensor_ctx_new(8, 0);
    if (!s->gctx || !s->ictx) return false;
    if (!train_inputs_new(s->ictx, hp, s->p.n_batch, &s->in)) return false;
    s->seed = tensor_set_name(tensor_new_1d(s->ictx, GGML_TYPE_F32, 1), "loss_seed");
    if (!s->seed) return false;
    s->ibuf = backend_alloc_ctx_tensors(s->ictx, backend_cpu_buffer_type());
    if (!s->ibuf) return false;
    train_inputs_set_constants(&s->in);
    /* the gradient of the update is the mean over its micro-batches */
    *(float *)s->seed->data = 1.0f / (float)s->p.n_accum;

    s->loss = train_model_build_loss(s->model, s->gctx, &s->in);
    if (!s->loss) return false;
    s->loss->flags |= TENSOR_FLAG_OUTPUT;
    s->gf = graph_new(s->gctx, (int)capacity);
    s->gb = graph_new(s->gctx, (int)capacity);
    if (!s->gf || !s->gb || !graph_build_forward(s->gf, s->loss) || !graph_build_forward(s->gb, s->loss)) return false;
    if (!autograd_build_backward(s->gctx, s->gb, s->loss, s->seed)) return false;
    for (int i = 0; i < s->model->n_tensors; i++) {
        if (!s->model->tensors[i]->grad) {
            error_set("training: the loss does not depend on '%s'", s->model->tensors[i]->name);
            return false;
        }
    }
    s->ga = graph_allocr_new(backend_cpu_buffer_type());
    return s->ga && graph_allocr_alloc_graph(s->ga, s->gb);
}

static bool train_session_check(const struct train_params *p, size_t n_train, size_t n_valid, int32_t bos) {
    if (!train_opt_params_validate(&p->opt)) return false;
    if (p->n_batch < 1 || p->n_accum < 1 || p->n_threads < 1 || p->eval_batches < 0) {
        error_set("training: n_batch %d, n_accum %d, n_threads %d must be >= 1", p->n_batch, p->n_accum,
                  p->n_threads);
        return false;
    }
    if (bos >= p->hp.n_vocab) {
        error_set("training: BOS id %d outside the vocabulary", bos);
        return false;
    }
    const size_t span = (size_t)p->hp.n_ctx + (bos >= 0 ? 0 : 1);
    if (n_train < span) {
        error_set("training data: %zu tokens, fewer than one window of %zu", n_train, span);
        return false;
    }
    if (n_valid > 0 && n_valid < span) {
        error_set("validation data: %zu tokens, fewer than one window of %zu", n_valid, span);
        return false;
    }
    return true;
}

struct train_session *train_session_new(const struct train_params *p, const int32_t *train_tokens, size_t n_train,
                                        const int32_t *valid_tokens, size_t n_valid, int32_t bos) {
    if (!train_hparams_validate(&p->hp) || !train_session_check(p, n_train, n_valid, bos)) return NULL;
    struct train_session *s = calloc(1, sizeof *s);
    if (!s) {
        error_set("training: out of memory");
        return NULL;
    }
    s->p = *p;
    s->bos = bos;
    s->train_tokens = train_tokens;
    s->n_train = n_train;
    s->valid_tokens = valid_tokens;
    s->n_valid = n_valid;
    s->train_hash = train_tokens_hash(train_tokens, n_train);
    train_rng_seed(&s->rng, p->seed);

    s->model = train_model_new(&p->hp);
    if (!s->model) goto fail;
    train_model_init_weights(s->model, &s->rng);
    s->opt = train_adamw_new(s->model->tensors, s->model->n_tensors);
    s->grad = malloc((size_t)train_model_n_params(s->model) * sizeof(float));
    s->windows = malloc((size_t)p->n_batch * ((size_t)p->hp.n_ctx + 1) * sizeof(int32_t));
    s->rows = malloc((size_t)p->n_batch * sizeof *s->rows);
    s->starts = malloc((size_t)p->n_batch * sizeof *s->starts);
    s->pool = cpu_threadpool_new(p->n_threads);
    if (!s->opt || !s->pool) goto fail;
    if (!s->grad || !s->windows || !s->rows || !s->starts) {
        error_set("training: out of memory");
        goto fail;
    }
    if (!train_session_build(s)) goto fail;

    if (n_valid > 0) {
        const int64_t n_windows = (int64_t)(n_valid / train_window_span(s));
        int64_t n_batches = n_windows / p->n_batch;
        if (n_batches < 1) n_batches = 1;
        if (p->eval_batches > 0 && n_batches > p->eval_batches) n_batches = p->eval_batches;
        s->n_eval_windows = n_batches * p->n_batch;
    }
    return s;
fail:
    train_session_free(s);
    return NULL;
}

void train_session_free(struct train_session *s) {
    if (!s) return;
    graph_allocr_free(s->ga);
    backend_buffer_free(s->ibuf);
    tensor_ctx_free(s->gctx);
    tensor_ctx_free(s->ictx);
    cpu_threadpool_free(s->pool);
    train_adamw_free(s->opt);
    train_model_free(s->model);
    free(s->grad);
    free(s->windows);
    free(s->rows);
    free(s->starts);
    free(s);
}

int64_t train_session_step_count(const struct train_session *s) { return s->opt->t; }
const struct train_model *train_session_model(const struct train_session *s) { return s->model; }
int64_t train_session_eval_windows(const struct train_session *s) { return s->n_eval_windows; }

/* Writes the n_batch windows starting at s->starts into the inputs. */
static bool train_session_set_windows(struct train_session *s, const int32_t *stream) {
    const size_t stride = (size_t)s->p.hp.n_ctx + 1;
    for (int b = 0; b < s->p.n_batch; b++) {
        train_window_fill(s, stream, s->starts[b], s->windows + b * stride);
        s->rows[b] = s->windows + b * stride;
    }
    return train_inputs_set_batch(&s->in, &s->p.hp, s->rows);
}

static bool train_session_compute(struct train_session *s, struct graph *g, float *loss) {
    if (!cpu_graph_compute(s->pool, g, s->p.n_threads, NULL, NULL)) return false;
    *loss = *(const float *)s->loss->data;
    return true;
}

bool train_session_step(struct train_session *s, struct train_step_info *info) {
    const size_t n_starts = s->n_train - train_window_span(s) + 1;
    double loss_sum = 0.0;
    for (int micro = 0; micro < s->p.n_accum; micro++) {
        for (int b = 0; b < s->p.n_batch; b++) s->starts[b] = (size_t)train_rng_below(&s->rng, n_starts);
        float loss;
        if (!train_session_set_windows(s, s->train_tokens) || !train_session_compute(s, s->gb, &loss)) {
            return false;
        }
        loss_sum += loss;
        int64_t off = 0;
        for (int i = 0; i < s->model->n_tensors; i++) {
            const struct tensor *g = s->model->tensors[i]->grad;
            const float *src = g->data;
            const int64_t n = tensor_nelements(g);
            float *dst = s->grad + off;
            if (micro == 0) {
                memcpy(dst, src, (size_t)n * sizeof *dst);
            } else {
                for (int64_t j = 0; j < n; j++) dst[j] += src[j];
            }
            off += n;
        }
    }
    const float lr = train_opt_lr(&s->p.opt, s->opt->t);
    const double norm = train_adamw_update(s->opt, &s->p.opt, s->grad);
    if (info) {
        info->step = s->opt->t;
        info->loss = (float)(loss_sum / s->p.n_accum);
        info->lr = lr;
        info->grad_norm = norm;
        info->n_tokens = (int64_t)s->p.n_accum * s->p.n_batch * s->p.hp.n_ctx;
    }
    return true;
}

bool train_session_eval(struct train_session *s, float *loss) {
    if (s->n_eval_windows == 0) {
        error_set("training: no validation data");
        return false;
    }
    /* windows spread evenly from the first to the last possible start (the
     * product fits: last < 2^40 tokens, w < 2^24 windows) */
    const uint64_t last = s->n_valid - train_window_span(s);
    double sum = 0.0;
    for (int64_t w0 = 0; w0 < s->n_eval_windows; w0 += s->p.n_batch) {
        for (int b = 0; b < s->p.n_batch; b++) {
            const uint64_t w = (uint64_t)(w0 + b);
            s->starts[b] = s->n_eval_windows > 1 ? (size_t)(last * w / (uint64_t)(s->n_eval_windows - 1)) : 0;
        }
        float l;
        if (!train_session_set_windows(s, s->valid_tokens) || !train_session_compute(s, s->gf, &l)) {
            return false;
        }
        sum += l;
    }
    *loss = (float)(sum / (double)(s->n_eval_windows / s->p.n_batch));
    return true;
}

/* ---- checkpoints ------------------------------------------------------------------------- */

#define CK(key) "llamac.train." key

static bool train_ckpt_set_keys(const struct train_session *s, struct gguf_writer *w) {
    const struct train_params *p = &s->p;
    const struct train_opt_params *o = &p->opt;
    const uint64_t rng[4] = { s->rng.s[0], s->rng.s[1], s->rng.s[2], s->rng.s[3] };
    return gguf_set_u32(w, CK("format"), TRAIN_CKPT_FORMAT) && gguf_set_u32(w, CK("n_vocab"), (uint32_t)p->hp.n_vocab) &&
           gguf_set_u32(w, CK("n_ctx"), (uint32_t)p->hp.n_ctx) && gguf_set_u32(w, CK("n_embd"), (uint32_t)p->hp.n_embd) &&
           gguf_set_u32(w, CK("n_layer"), (uint32_t)p->hp.n_layer) &&
           gguf_set_u32(w, CK("n_head"), (uint32_t)p->hp.n_head) &&
           gguf_set_u32(w, CK("n_head_kv"), (uint32_t)p->hp.n_head_kv) &&
           gguf_set_u32(w, CK("n_ff"), (uint32_t)p->hp.n_ff) && gguf_set_f32(w, CK("norm_eps"), p->hp.norm_eps) &&
           gguf_set_f32(w, CK("rope_freq_base"), p->hp.rope_freq_base) &&
           gguf_set_u32(w, CK("n_batch"), (uint32_t)p->n_batch) && gguf_set_u32(w, CK("n_accum"), (uint32_t)p->n_accum) &&
           gguf_set_i32(w, CK("bos"), s->bos) && gguf_set_u64(w, CK("seed"), p->seed) &&
           gguf_set_f32(w, CK("lr"), o->lr) && gguf_set_f32(w, CK("lr_min"), o->lr_min) &&
           gguf_set_u64(w, CK("warmup"), (uint64_t)o->warmup) && gguf_set_u64(w, CK("n_steps"), (uint64_t)o->n_steps) &&
           gguf_set_f32(w, CK("beta1"), o->beta1) && gguf_set_f32(w, CK("beta2"), o->beta2) &&
           gguf_set_f32(w, CK("eps"), o->eps) && gguf_set_f32(w, CK("weight_decay"), o->weight_decay) &&
           gguf_set_f32(w, CK("grad_clip"), o->grad_clip) && gguf_set_u64(w, CK("step"), (uint64_t)s->opt->t) &&
           gguf_set_arr_data(w, CK("rng"), GGUF_TYPE_UINT64, rng, 4) &&
           gguf_set_u64(w, CK("n_train_tokens"), (uint64_t)s->n_train) &&
           gguf_set_u64(w, CK("train_tokens_hash"), s->train_hash);
}

static bool train_ckpt_add(struct gguf_writer *w, const char *prefix, const struct tensor *t, const float *data) {
    char name[TENSOR_MAX_NAME + 16];
    snprintf(name, sizeof name, "%s%s", prefix, t->name);
    return gguf_add_tensor(w, name, GGML_TYPE_F32, (uint32_t)tensor_n_dims(t), t->ne, data,
                           (size_t)tensor_nelements(t) * sizeof(float));
}

bool train_session_save_checkpoint(const struct train_session *s, const char *path) {
    struct gguf_writer *w = gguf_writer_new();
    if (!w) return false;
    bool ok = train_ckpt_set_keys(s, w);
    int64_t off = 0;
    for (int i = 0; ok && i < s->model->n_tensors; i++) {
        const struct tensor *t = s->model->tensors[i];
        ok = train_ckpt_add(w, "", t, t->data) && train_ckpt_add(w, "opt.m.", t, s->opt->m + off) &&
             train_ckpt_add(w, "opt.v.", t, s->opt->v + off);
        off += tensor_nelements(t);
    }
    const size_t len = strlen(path) + 5;
    char *tmp = malloc(len);
    if (ok && !tmp) error_set("checkpoint: out of memory");
    ok = ok && tmp;
    if (ok) {
        snprintf(tmp, len, "%s.tmp", path);
        ok = gguf_write_file(w, tmp);
        if (ok && rename(tmp, path) != 0) {
            error_set("checkpoint: cannot rename %s to %s", tmp, path);
            remove(tmp);
            ok = false;
        }
    }
    free(tmp);
    gguf_writer_free(w);
    return ok;
}

/* Reads key `key` (type-checked by the getters) and compares it with `want`. */
static bool train_ckpt_expect_u32(const struct gguf_reader *r, const char *key, uint32_t want) {
    uint32_t v;
    if (!gguf_get_u32(r, key, &v)) return false;
    if (v != want) {
        error_set("checkpoint: %s is %u, this run has %u", key, v, want);
        return false;
    }
    return true;
}

/* Warns when a setting differs: the run continues, but not as the uninterrupted one. */
static void train_ckpt_compare_f32(const struct gguf_reader *r, const char *key, float want) {
    float v;
    if (gguf_get_f32(r, key, &v) && v != want) LOG_WARN("checkpoint: %s was %g, now %g\n", key, v, want);
}

static void train_ckpt_compare_u64(const struct gguf_reader *r, const char *key, uint64_t want) {
    uint64_t v;
    if (gguf_get_u64(r, key, &v) && v != want) {
        LOG_WARN("checkpoint: %s was %llu, now %llu\n", key, (unsigned long long)v, (unsigned long long)want);
    }
}

/* Checks tensor PREFIX+t->name of r (type, shape) and copies it into data unless data is NULL. */
static bool train_ckpt_read(const struct gguf_reader *r, const char *prefix, const struct tensor *t, float *data) {
    char name[TENSOR_MAX_NAME + 16];
    snprintf(name, sizeof name, "%s%s", prefix, t->name);
    const int64_t i = gguf_find_tensor(r, name);
    if (i < 0) {
        error_set("checkpoint: tensor '%s' missing", name);
        return false;
    }
    const struct gguf_tensor_info *ti = gguf_tensor(r, i);
    if (ti->type != GGML_TYPE_F32 || ti->ne[0] != t->ne[0] || ti->ne[1] != t->ne[1] || ti->ne[2] != 1 ||
        ti->ne[3] != 1) {
        error_set("checkpoint: tensor '%s' has another type or shape than the model's", name);
        return false;
    }
    if (data) memcpy(data, ti->data, (size_t)tensor_nelements(t) * sizeof(float));
    return true;
}

bool train_session_load_checkpoint(struct train_session *s, const char *path) {
    struct gguf_reader *r = gguf_open_file(path, true);
    if (!r) return false;
    const struct train_params *p = &s->p;
    const struct train_opt_params *o = &p->opt;
    uint32_t format = 0;
    bool ok = gguf_get_u32(r, CK("format"), &format);
    if (ok && format != TRAIN_CKPT_FORMAT) {
        error_set("checkpoint %s: format %u (this build reads %d)", path, format, TRAIN_CKPT_FORMAT);
        ok = false;
    }
    int32_t bos = 0;
    ok = ok && train_ckpt_expect_u32(r, CK("n_vocab"), (uint32_t)p->hp.n_vocab) &&
         train_ckpt_expect_u32(r, CK("n_ctx"), (uint32_t)p->hp.n_ctx) &&
         train_ckpt_expect_u32(r, CK("n_embd"), (uint32_t)p->hp.n_embd) &&
         train_ckpt_expect_u32(r, CK("n_layer"), (uint32_t)p->hp.n_layer) &&
         train_ckpt_expect_u32(r, CK("n_head"), (uint32_t)p->hp.n_head) &&
         train_ckpt_expect_u32(r, CK("n_head_kv"), (uint32_t)p->hp.n_head_kv) &&
         train_ckpt_expect_u32(r, CK("n_ff"), (uint32_t)p->hp.n_ff) &&
         train_ckpt_expect_u32(r, CK("n_batch"), (uint32_t)p->n_batch) &&
         train_ckpt_expect_u32(r, CK("n_accum"), (uint32_t)p->n_accum) && gguf_get_i32(r, CK("bos"), &bos);
    if (ok && bos != s->bos) {
        error_set("checkpoint: BOS id %d, this run has %d", bos, s->bos);
        ok = false;
    }
    uint64_t step = 0;
    const int64_t rng_key = gguf_find_key(r, CK("rng"));
    ok = ok && gguf_get_u64(r, CK("step"), &step);
    if (ok && (rng_key < 0 || gguf_kv_type(r, rng_key) != GGUF_TYPE_ARRAY ||
               gguf_arr_type(r, rng_key) != GGUF_TYPE_UINT64 || gguf_arr_n(r, rng_key) != 4)) {
        error_set("checkpoint %s: %s must be an array of 4 u64", path, CK("rng"));
        ok = false;
    }
    if (ok && step > (uint64_t)INT64_MAX) {
        error_set("checkpoint %s: step %llu", path, (unsigned long long)step);
        ok = false;
    }
    /* check everything before changing anything: a failed load leaves the session as it was */
    for (int i = 0; ok && i < s->model->n_tensors; i++) {
        const struct tensor *t = s->model->tensors[i];
        ok = train_ckpt_read(r, "", t, NULL) && train_ckpt_read(r, "opt.m.", t, NULL) &&
             train_ckpt_read(r, "opt.v.", t, NULL);
    }
    int64_t off = 0;
    for (int i = 0; ok && i < s->model->n_tensors; i++) {
        struct tensor *t = s->model->tensors[i];
        train_ckpt_read(r, "", t, t->data);
        train_ckpt_read(r, "opt.m.", t, s->opt->m + off);
        train_ckpt_read(r, "opt.v.", t, s->opt->v + off);
        off += tensor_nelements(t);
    }
    if (ok) {
        memcpy(s->rng.s, gguf_arr_data(r, rng_key), sizeof s->rng.s);
        s->opt->t = (int64_t)step;
        train_ckpt_compare_u64(r, CK("seed"), p->seed);
        train_ckpt_compare_f32(r, CK("lr"), o->lr);
        train_ckpt_compare_f32(r, CK("lr_min"), o->lr_min);
        train_ckpt_compare_u64(r, CK("warmup"), (uint64_t)o->warmup);
        train_ckpt_compare_u64(r, CK("n_steps"), (uint64_t)o->n_steps);
        train_ckpt_compare_f32(r, CK("beta1"), o->beta1);
        train_ckpt_compare_f32(r, CK("beta2"), o->beta2);
        train_ckpt_compare_f32(r, CK("eps"), o->eps);
        train_ckpt_compare_f32(r, CK("weight_decay"), o->weight_decay);
        train_ckpt_compare_f32(r, CK("grad_clip"), o->grad_clip);
        train_ckpt_compare_u64(r, CK("n_train_tokens"), (uint64_t)s->n_train);
        train_ckpt_compare_u64(r, CK("train_tokens_hash"), s->train_hash);
    }
    gguf_close(r);
    return ok;
}

bool train_session_write_model(const struct train_session *s, const struct gguf_reader *vocab_file,
                               const char *name, enum ggml_type type, const char *path) {
    return train_model_write_gguf(s->model, vocab_file, name, type, path);
}

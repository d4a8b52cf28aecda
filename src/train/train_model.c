/*
 * The trainable LLaMA: weights, initialisation, the training graph and the
 * GGUF output. See train_model.h.
 */
#include "train/train_model.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/cpu/cpu_backend.h"
#include "core/fp16.h"
#include "core/log.h"
#include "gguf/gguf.h"
#include "llama.h"
#include "quant/quant.h"

void train_hparams_default(struct train_hparams *hp) {
    *hp = (struct train_hparams){
        .n_vocab = 0,
        .n_ctx = 128,
        .n_embd = 256,
        .n_layer = 4,
        .n_head = 8,
        .n_head_kv = 8,
        .n_ff = 768,
        .norm_eps = 1e-5f,
        .rope_freq_base = 10000.0f,
    };
}

bool train_hparams_validate(const struct train_hparams *hp) {
    /* caps keep every product below 2^62 */
    if (hp->n_vocab < 4 || hp->n_vocab > (1 << 24)) {
        error_set("model: vocabulary of %d tokens (4 to %d supported)", hp->n_vocab, 1 << 24);
        return false;
    }
    if (hp->n_ctx < 2 || hp->n_ctx > (1 << 16)) {
        error_set("model: n_ctx %d (2 to %d)", hp->n_ctx, 1 << 16);
        return false;
    }
    if (hp->n_embd < 2 || hp->n_embd > (1 << 16) || hp->n_ff < 1 || hp->n_ff > (1 << 18)) {
        error_set("model: n_embd %d (2 to %d), n_ff %d (1 to %d)", hp->n_embd, 1 << 16, hp->n_ff, 1 << 18);
        return false;
    }
    if (hp->n_layer < 1 || hp->n_layer > TRAIN_MAX_LAYERS) {
        error_set("model: %d layers (1 to %d)", hp->n_layer, TRAIN_MAX_LAYERS);
        return false;
    }
    if (hp->n_head < 1 || hp->n_embd % hp->n_head != 0 || (hp->n_embd / hp->n_head) % 2 != 0) {
        error_set("model: n_head %d must divide n_embd %d into heads of an even size (RoPE rotates pairs)",
                  hp->n_head, hp->n_embd);
        return false;
    }
    if (hp->n_head_kv < 1 || hp->n_head % hp->n_head_kv != 0) {
        error_set("model: n_head_kv %d must divide n_head %d", hp->n_head_kv, hp->n_head);
        return false;
    }
    if (!(hp->norm_eps > 0.0f) || !(hp->rope_freq_base > 0.0f)) {
        error_set("model: norm_eps and rope_freq_base must be positive");
        return false;
    }
    return true;
}

/* ---- weights ----------------------------------------------------------------------- */

static struct tensor *train_model_weight(struct train_model *m, int n_dims, int64_t ne0, int64_t ne1,
                                         const char *name) {
    const int64_t ne[2] = { ne0, ne1 };
    struct tensor *t = tensor_new(m->ctx, GGML_TYPE_F32, n_dims, ne);
    if (!t) return NULL;
    tensor_set_name(t, "%s", name);
    t->flags |= TENSOR_FLAG_PARAM;
    m->tensors[m->n_tensors++] = t;
    return t;
}

struct train_model *train_model_new(const struct train_hparams *hp) {
    if (!train_hparams_validate(hp)) return NULL;
    struct train_model *m = calloc(1, sizeof *m);
    if (!m) {
        error_set("model: out of memory");
        return NULL;
    }
    m->hp = *hp;
    const int n_max = 3 + 9 * hp->n_layer;
    m->layers = calloc((size_t)hp->n_layer, sizeof *m->layers);
    m->tensors = calloc((size_t)n_max, sizeof *m->tensors);
    m->ctx = tensor_ctx_new((size_t)n_max, 0);
    if (!m->layers || !m->tensors || !m->ctx) {
        error_set("model: out of memory");
        train_model_free(m);
        return NULL;
    }
    const int64_t E = hp->n_embd, E_kv = (int64_t)hp->n_embd / hp->n_head * hp->n_head_kv, F = hp->n_ff;
    bool ok = (m->tok_embd = train_model_weight(m, 2, E, hp->n_vocab, "token_embd.weight")) != NULL;
    for (int il = 0; ok && il < hp->n_layer; il++) {
        struct train_layer *l = &m->layers[il];
        char name[TENSOR_MAX_NAME];
#define TRAIN_LAYER_WEIGHT(field, nd, a, b, suffix)                        \
    snprintf(name, sizeof name, "blk.%d." suffix ".weight", il);          \
    ok = ok && (l->field = train_model_weight(m, nd, a, b, name)) != NULL
        TRAIN_LAYER_WEIGHT(attn_norm, 1, E, 1, "attn_norm");
        TRAIN_LAYER_WEIGHT(wq, 2, E, E, "attn_q");
        TRAIN_LAYER_WEIGHT(wk, 2, E, E_kv, "attn_k");
        TRAIN_LAYER_WEIGHT(wv, 2, E, E_kv, "attn_v");
        TRAIN_LAYER_WEIGHT(wo, 2, E, E, "attn_output");
        TRAIN_LAYER_WEIGHT(ffn_norm, 1, E, 1, "ffn_norm");
        TRAIN_LAYER_WEIGHT(ffn_gate, 2, E, F, "ffn_gate");
        TRAIN_LAYER_WEIGHT(ffn_down, 2, F, E, "ffn_down");
        TRAIN_LAYER_WEIGHT(ffn_up, 2, E, F, "ffn_up");
#undef TRAIN_LAYER_WEIGHT
    }
    ok = ok && (m->output_norm = train_model_weight(m, 1, E, 1, "output_norm.weight")) != NULL;
    ok = ok && (m->output = train_model_weight(m, 2, E, hp->n_vocab, "output.weight")) != NULL;
    if (ok) m->buf = backend_alloc_ctx_tensors(m->ctx, backend_cpu_buffer_type());
    if (!ok || !m->buf) {
        train_model_free(m);
        return NULL;
    }
    return m;
}

void train_model_free(struct train_model *m) {
    if (!m) return;
    backend_buffer_free(m->buf);
    tensor_ctx_free(m->ctx);
    free(m->tensors);
    free(m->layers);
    free(m);
}

void train_model_init_weights(struct train_model *m, struct train_rng *rng) {
    const float resid_scale = 1.0f / sqrtf(2.0f * (float)m->hp.n_layer);
    for (int i = 0; i < m->n_tensors; i++) {
        struct tensor *t = m->tensors[i];
        float *w = t->data;
        const int64_t n = tensor_nelements(t);
        if (tensor_n_dims(t) == 1) {
            for (int64_t j = 0; j < n; j++) w[j] = 1.0f;
            continue;
        }
        const bool resid = strstr(t->name, "attn_output") || strstr(t->name, "ffn_down");
        const float std = 0.02f * (resid ? resid_scale : 1.0f);
        for (int64_t j = 0; j < n; j++) w[j] = (float)train_rng_normal(rng) * std;
    }
}

int64_t train_model_n_params(const struct train_model *m) {
    int64_t n = 0;
    for (int i = 0; i < m->n_tensors; i++) n += tensor_nelements(m->tensors[i]);
    return n;
}

/* ---- inputs ------------------------------------------------------------------------ */

bool train_inputs_new(struct tensor_ctx *ctx, const struct train_hparams *hp, int n_batch, struct train_inputs *in) {
    if (n_batch < 1 || (int64_t)n_batch * hp->n_ctx > (1 << 24)) {
        error_set("training batch of %d sequences of %d tokens", n_batch, hp->n_ctx);
        return false;
    }
    const int64_t n_tokens = (int64_t)hp->n_ctx * n_batch;
    in->n_batch = n_batch;
    in->tokens = tensor_set_name(tensor_new_1d(ctx, GGML_TYPE_I32, n_tokens), "inp_tokens");
    in->targets = tensor_set_name(tensor_new_2d(ctx, GGML_TYPE_F32, hp->n_vocab, n_tokens), "inp_targets");
    in->pos = tensor_set_name(tensor_new_1d(ctx, GGML_TYPE_I32, hp->n_ctx), "inp_pos");
    in->kq_mask = tensor_set_name(tensor_new_2d(ctx, GGML_TYPE_F32, hp->n_ctx, hp->n_ctx), "inp_kq_mask");
    if (!in->tokens || !in->targets || !in->pos || !in->kq_mask) return false;
    in->tokens->flags |= TENSOR_FLAG_INPUT;
    in->targets->flags |= TENSOR_FLAG_INPUT;
    in->pos->flags |= TENSOR_FLAG_INPUT;
    in->kq_mask->flags |= TENSOR_FLAG_INPUT;
    return true;
}

void train_inputs_set_constants(const struct train_inputs *in) {
    const int64_t n_ctx = in->pos->ne[0];
    int32_t *pos = in->pos->data;
    float *mask = in->kq_mask->data;
    for (int64_t i = 0; i < n_ctx; i++) pos[i] = (int32_t)i;
    for (int64_t q = 0; q < n_ctx; q++) {
        for (int64_t k = 0; k < n_ctx; k++) mask[q * n_ctx + k] = k <= q ? 0.0f : -INFINITY;
    }
}

bool train_inputs_set_batch(const struct train_inputs *in, const struct train_hparams *hp,
                            const int32_t *const *windows) {
    const int64_t n_ctx = hp->n_ctx, n_vocab = hp->n_vocab;
    int32_t *tokens = in->tokens->data;
    float *targets = in->targets->data;
    memset(targets, 0, (size_t)(n_vocab * n_ctx * in->n_batch) * sizeof(float));
    for (int b = 0; b < in->n_batch; b++) {
        for (int64_t i = 0; i <= n_ctx; i++) {
            const int32_t t = windows[b][i];
            if (t < 0 || t >= hp->n_vocab) {
                error_set("training data: token %d outside the vocabulary of %d", t, hp->n_vocab);
                return false;
            }
            if (i < n_ctx) tokens[b * n_ctx + i] = t;
            if (i > 0) targets[(b * n_ctx + i - 1) * n_vocab + t] = 1.0f;
        }
    }
    return true;
}

/* ---- the graph ----------------------------------------------------------------------- */

/* Training's products may add in any order (the tiled kernels). */
static struct tensor *train_mul_mat(struct tensor_ctx *ctx, struct tensor *a, struct tensor *b) {
    struct tensor *t = op_mul_mat(ctx, a, b);
    if (t) t->op_params[0] = MUL_MAT_ORDER_ANY;
    return t;
}

static struct tensor *train_norm(struct tensor_ctx *ctx, struct tensor *x, struct tensor *w, float eps) {
    return op_mul(ctx, op_rms_norm(ctx, x, eps), w);
}

/* Self-attention of one layer over cur [n_embd, n_ctx * n_batch]. */
static struct tensor *train_attention(struct train_model *m, struct tensor_ctx *ctx, const struct train_layer *l,
                                      struct tensor *cur, const struct train_inputs *in) {
    const struct train_hparams *hp = &m->hp;
    const int64_t hd = hp->n_embd / hp->n_head, T = hp->n_ctx, B = in->n_batch;
    /* [head_dim, n_head, T, B], rotated, then [head_dim, T, n_head, B] */
    struct tensor *q = tensor_reshape_4d(ctx, train_mul_mat(ctx, l->wq, cur), hd, hp->n_head, T, B);
    struct tensor *k = tensor_reshape_4d(ctx, train_mul_mat(ctx, l->wk, cur), hd, hp->n_head_kv, T, B);
    struct tensor *v = tensor_reshape_4d(ctx, train_mul_mat(ctx, l->wv, cur), hd, hp->n_head_kv, T, B);
    q = op_rope(ctx, q, in->pos, (int)hd, ROPE_MODE_NORMAL, 0, 0, hp->rope_freq_base, 1.0f, 0.0f, 1.0f, 0.0f, 0.0f);
    k = op_rope(ctx, k, in->pos, (int)hd, ROPE_MODE_NORMAL, 0, 0, hp->rope_freq_base, 1.0f, 0.0f, 1.0f, 0.0f, 0.0f);
    struct tensor *Q = tensor_permute(ctx, q, 0, 2, 1, 3);
    struct tensor *K = tensor_permute(ctx, k, 0, 2, 1, 3);
    /* kq [T keys, T queries, n_head, B]; with GQA the kv heads broadcast */
    struct tensor *kq = train_mul_mat(ctx, K, Q);
    kq = op_soft_max(ctx, kq, in->kq_mask, 1.0f / sqrtf((float)hd));
    /* V^T [T, head_dim, n_head_kv, B] */
    struct tensor *vt = op_cont(ctx, tensor_permute(ctx, v, 1, 2, 0, 3));
    struct tensor *kqv = train_mul_mat(ctx, vt, kq); /* [head_dim, T, n_head, B] */
    struct tensor *merged = op_cont(ctx, tensor_permute(ctx, kqv, 0, 2, 1, 3));
    cur = tensor_reshape_2d(ctx, merged, hp->n_embd, T * B);
    return train_mul_mat(ctx, l->wo, cur);
}

struct tensor *train_model_build_loss(struct train_model *m, struct tensor_ctx *ctx, const struct train_inputs *in) {
    const struct train_hparams *hp = &m->hp;
    struct tensor *x = op_get_rows(ctx, m->tok_embd, in->tokens);
    for (int il = 0; il < hp->n_layer; il++) {
        const struct train_layer *l = &m->layers[il];
        struct tensor *cur = train_norm(ctx, x, l->attn_norm, hp->norm_eps);
        x = op_add(ctx, x, train_attention(m, ctx, l, cur, in));
        cur = train_norm(ctx, x, l->ffn_norm, hp->norm_eps);
        struct tensor *gate = op_silu(ctx, train_mul_mat(ctx, l->ffn_gate, cur));
        struct tensor *up = train_mul_mat(ctx, l->ffn_up, cur);
        x = op_add(ctx, x, train_mul_mat(ctx, l->ffn_down, op_mul(ctx, gate, up)));
    }
    x = train_norm(ctx, x, m->output_norm, hp->norm_eps);
    struct tensor *logits = train_mul_mat(ctx, m->output, x);
    struct tensor *loss = op_cross_entropy_loss(ctx, logits, in->targets);
    return tensor_set_name(loss, "loss");
}

/* ---- GGUF output ------------------------------------------------------------------------ */

bool train_hparams_set_gguf(const struct train_hparams *hp, struct gguf_writer *w) {
    return gguf_set_u32(w, "llama.context_length", (uint32_t)hp->n_ctx) &&
           gguf_set_u32(w, "llama.embedding_length", (uint32_t)hp->n_embd) &&
           gguf_set_u32(w, "llama.block_count", (uint32_t)hp->n_layer) &&
           gguf_set_u32(w, "llama.feed_forward_length", (uint32_t)hp->n_ff) &&
           gguf_set_u32(w, "llama.rope.dimension_count", (uint32_t)(hp->n_embd / hp->n_head)) &&
           gguf_set_u32(w, "llama.attention.head_count", (uint32_t)hp->n_head) &&
           gguf_set_u32(w, "llama.attention.head_count_kv", (uint32_t)hp->n_head_kv) &&
           gguf_set_f32(w, "llama.attention.layer_norm_rms_epsilon", hp->norm_eps) &&
           gguf_set_f32(w, "llama.rope.freq_base", hp->rope_freq_base);
}

/* llama_ftype of a file whose matrices are all `type`; -1 if there is none. */
static int train_ftype(enum ggml_type type) {
    switch (type) {
        case GGML_TYPE_F32: return LLAMA_FTYPE_ALL_F32;
        case GGML_TYPE_F16: return LLAMA_FTYPE_MOSTLY_F16;
        case GGML_TYPE_Q4_0: return LLAMA_FTYPE_MOSTLY_Q4_0;
        case GGML_TYPE_Q4_1: return LLAMA_FTYPE_MOSTLY_Q4_1;
        case GGML_TYPE_Q5_0: return LLAMA_FTYPE_MOSTLY_Q5_0;
        case GGML_TYPE_Q5_1: return LLAMA_FTYPE_MOSTLY_Q5_1;
        case GGML_TYPE_Q8_0: return LLAMA_FTYPE_MOSTLY_Q8_0;
        case GGML_TYPE_Q2_K: return LLAMA_FTYPE_MOSTLY_Q2_K;
        case GGML_TYPE_Q3_K: return LLAMA_FTYPE_MOSTLY_Q3_K_S;
        case GGML_TYPE_Q4_K: return LLAMA_FTYPE_MOSTLY_Q4_K_S;
        case GGML_TYPE_Q5_K: return LLAMA_FTYPE_MOSTLY_Q5_K_S;
        case GGML_TYPE_Q6_K: return LLAMA_FTYPE_MOSTLY_Q6_K;
        default: return -1;
    }
}

/* The rows of t converted to `type` in out (row by row). */
static void train_convert_rows(const struct tensor *t, enum ggml_type type, void *out) {
    const float *src = t->data;
    const int64_t n = tensor_nelements(t);
    if (type == GGML_TYPE_F32) {
        memcpy(out, src, (size_t)n * sizeof(float));
    } else if (type == GGML_TYPE_F16) {
        fp16_t *dst = out;
        for (int64_t i = 0; i < n; i++) dst[i] = fp32_to_fp16(src[i]);
    } else {
        const struct type_traits *tt = type_traits_get(type);
        size_t row_size = 0;
        type_row_size(type, t->ne[0], &row_size);
        for (int64_t r = 0; r < tensor_nrows(t); r++) {
            tt->from_float_reference(src + r * t->ne[0], (char *)out + (size_t)r * row_size, t->ne[0]);
        }
    }
}

bool train_model_write_gguf(const struct train_model *m, const struct gguf_reader *vocab_file, const char *name,
                            enum ggml_type type, const char *path) {
    const struct type_traits *tt = type_traits_get(type);
    const int ftype = train_ftype(type);
    if (!tt || ftype < 0 || (tt->is_quantized && !tt->from_float_reference)) {
        error_set("model output: no quantizer for type %s", tt ? tt->name : "?");
        return false;
    }
    for (int i = 0; i < m->n_tensors; i++) {
        const struct tensor *t = m->tensors[i];
        if (tensor_n_dims(t) == 2 && t->ne[0] % tt->blck_size != 0) {
            error_set("model output: rows of %lld elements of '%s' are not whole %s blocks of %lld", (long long)t->ne[0],
                      t->name, tt->name, (long long)tt->blck_size);
            return false;
        }
    }
    struct gguf_writer *w = gguf_writer_from_reader(vocab_file);
    if (!w) return false;
    bool ok = gguf_set_str(w, "general.architecture", "llama") && gguf_set_str(w, "general.name", name) &&
              train_hparams_set_gguf(&m->hp, w) && gguf_set_u32(w, "general.file_type", (uint32_t)ftype);
    if (ok && tt->is_quantized) ok = gguf_set_u32(w, "general.quantization_version", 2);
    size_t max_size = 0;
    for (int i = 0; ok && i < m->n_tensors; i++) {
        const struct tensor *t = m->tensors[i];
        const int n_dims = tensor_n_dims(t);
        const enum ggml_type tt_i = n_dims == 1 ? GGML_TYPE_F32 : type;
        size_t row = 0;
        ok = type_row_size(tt_i, t->ne[0], &row) && gguf_add_tensor_info(w, t->name, tt_i, (uint32_t)n_dims, t->ne);
        if (row * (size_t)tensor_nrows(t) > max_size) max_size = row * (size_t)tensor_nrows(t);
    }
    void *scratch = ok ? malloc(max_size) : NULL;
    struct gguf_stream *s = scratch ? gguf_stream_open(w, path) : NULL;
    if (ok && !scratch) error_set("model output: out of memory");
    ok = s != NULL;
    for (int i = 0; ok && i < m->n_tensors; i++) {
        const struct tensor *t = m->tensors[i];
        const enum ggml_type tt_i = tensor_n_dims(t) == 1 ? GGML_TYPE_F32 : type;
        size_t row = 0;
        type_row_size(tt_i, t->ne[0], &row);
        train_convert_rows(t, tt_i, scratch);
        ok = gguf_stream_write(s, scratch, row * (size_t)tensor_nrows(t));
    }
    if (s && !gguf_stream_close(s)) ok = false;
    free(scratch);
    gguf_writer_free(w);
    return ok;
}

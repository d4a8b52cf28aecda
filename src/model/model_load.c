/*
 * Loading a LLaMA-family model from GGUF the way b1892 reads it: the
 * hyperparameter keys (with caller overrides), the vocabulary, and the weight
 * table, every tensor checked for name, type and shape before use.
 */
#include "model.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu_packed.h"
#include "core/cpu_features.h"
#include "core/log.h"
#include "core/timer.h"
#include "gguf/gguf.h"
#include "quant/quant.h"
#include "sample/grammar.h"
#include "vocab/vocab.h"

/* ---- names ------------------------------------------------------------------ */

const char *model_arch_name(enum llm_arch arch) {
    switch (arch) {
    case LLM_ARCH_LLAMA: return "llama";
    default: return "(unknown)";
    }
}

const char *model_type_name(enum llm_model_type type) {
    switch (type) {
    case MODEL_1B: return "1B";
    case MODEL_3B: return "3B";
    case MODEL_7B: return "7B";
    case MODEL_8x7B: return "8x7B";
    case MODEL_13B: return "13B";
    case MODEL_30B: return "30B";
    case MODEL_34B: return "34B";
    case MODEL_65B: return "65B";
    case MODEL_70B: return "70B";
    default: return "?B";
    }
}

const char *model_ftype_name(enum llama_ftype ftype) {
    switch ((int)ftype & ~LLAMA_FTYPE_GUESSED) {
    case LLAMA_FTYPE_ALL_F32: return "all F32";
    case LLAMA_FTYPE_MOSTLY_F16: return "F16";
    case LLAMA_FTYPE_MOSTLY_Q4_0: return "Q4_0";
    case LLAMA_FTYPE_MOSTLY_Q4_1: return "Q4_1";
    case LLAMA_FTYPE_MOSTLY_Q4_1_SOME_F16: return "Q4_1, some F16";
    case LLAMA_FTYPE_MOSTLY_Q5_0: return "Q5_0";
    case LLAMA_FTYPE_MOSTLY_Q5_1: return "Q5_1";
    case LLAMA_FTYPE_MOSTLY_Q8_0: return "Q8_0";
    case LLAMA_FTYPE_MOSTLY_Q2_K: return "Q2_K - Medium";
    case LLAMA_FTYPE_MOSTLY_Q2_K_S: return "Q2_K - Small";
    case LLAMA_FTYPE_MOSTLY_Q3_K_S: return "Q3_K - Small";
    case LLAMA_FTYPE_MOSTLY_Q3_K_M: return "Q3_K - Medium";
    case LLAMA_FTYPE_MOSTLY_Q3_K_L: return "Q3_K - Large";
    case LLAMA_FTYPE_MOSTLY_Q4_K_S: return "Q4_K - Small";
    case LLAMA_FTYPE_MOSTLY_Q4_K_M: return "Q4_K - Medium";
    case LLAMA_FTYPE_MOSTLY_Q5_K_S: return "Q5_K - Small";
    case LLAMA_FTYPE_MOSTLY_Q5_K_M: return "Q5_K - Medium";
    case LLAMA_FTYPE_MOSTLY_Q6_K: return "Q6_K";
    case LLAMA_FTYPE_MOSTLY_IQ2_XXS: return "IQ2_XSS - 2.0625 bpw"; /* sic: b1892's spelling */
    case LLAMA_FTYPE_MOSTLY_IQ2_XS: return "IQ2_XS - 2.3125 bpw";
    default: return "unknown, may not work";
    }
}

/* ---- metadata with overrides ---------------------------------------------------- */

struct hparam_reader {
    const struct gguf_reader *gguf;
    const struct llama_model_kv_override *overrides;
    char arch_prefix[32];
};

static const struct llama_model_kv_override *find_override(const struct hparam_reader *hr, const char *key) {
    if (!hr->overrides) return NULL;
    for (const struct llama_model_kv_override *o = hr->overrides; o->key[0]; o++) {
        if (strncmp(o->key, key, sizeof o->key) == 0) return o;
    }
    return NULL;
}

/* Builds "<arch>.<suffix>" keys. */
static const char *arch_key(const struct hparam_reader *hr, const char *suffix, char *buf, size_t size) {
    snprintf(buf, size, "%s.%s", hr->arch_prefix, suffix);
    return buf;
}

enum key_need { KEY_OPTIONAL, KEY_REQUIRED };

/* Each reader returns false only on error (wrong type, missing required key). */
static bool read_u32(const struct hparam_reader *hr, const char *key, enum key_need need, uint32_t *out) {
    const struct llama_model_kv_override *o = find_override(hr, key);
    if (o) {
        if (o->tag != LLAMA_KV_OVERRIDE_INT || o->int_value < 0 || o->int_value > UINT32_MAX) {
            error_set("override for '%s' must be an integer in 0..4294967295", key);
            return false;
        }
        LOG_INFO("overriding %s = %lld\n", key, (long long)o->int_value);
        *out = (uint32_t)o->int_value;
        return true;
    }
    if (gguf_find_key(hr->gguf, key) < 0) {
        if (need == KEY_OPTIONAL) return true;
        error_set("model file lacks the required key '%s'", key);
        return false;
    }
    return gguf_get_u32(hr->gguf, key, out);
}

static bool read_f32(const struct hparam_reader *hr, const char *key, enum key_need need, float *out) {
    const struct llama_model_kv_override *o = find_override(hr, key);
    if (o) {
        if (o->tag != LLAMA_KV_OVERRIDE_FLOAT) {
            error_set("override for '%s' must be a float", key);
            return false;
        }
        LOG_INFO("overriding %s = %g\n", key, o->float_value);
        *out = (float)o->float_value;
        return true;
    }
    if (gguf_find_key(hr->gguf, key) < 0) {
        if (need == KEY_OPTIONAL) return true;
        error_set("model file lacks the required key '%s'", key);
        return false;
    }
    return gguf_get_f32(hr->gguf, key, out);
}

static bool read_bool(const struct hparam_reader *hr, const char *key, bool *out) {
    const struct llama_model_kv_override *o = find_override(hr, key);
    if (o) {
        if (o->tag != LLAMA_KV_OVERRIDE_BOOL) {
            error_set("override for '%s' must be a bool", key);
            return false;
        }
        *out = o->bool_value;
        return true;
    }
    if (gguf_find_key(hr->gguf, key) < 0) return true;
    return gguf_get_bool(hr->gguf, key, out);
}

static bool read_arch_u32(const struct hparam_reader *hr, const char *suffix, enum key_need need, uint32_t *out) {
    char key[160];
    return read_u32(hr, arch_key(hr, suffix, key, sizeof key), need, out);
}

static bool read_arch_f32(const struct hparam_reader *hr, const char *suffix, enum key_need need, float *out) {
    char key[160];
    return read_f32(hr, arch_key(hr, suffix, key, sizeof key), need, out);
}

static enum llm_model_type llama_model_type(const struct llama_hparams *hp) {
    switch (hp->n_layer) {
    case 22: return MODEL_1B;
    case 26: return MODEL_3B;
    case 32: return hp->n_expert == 8 ? MODEL_8x7B : MODEL_7B;
    case 40: return MODEL_13B;
    case 48: return MODEL_34B;
    case 60: return MODEL_30B;
    case 80: return hp->n_head == hp->n_head_kv ? MODEL_65B : MODEL_70B;
    default: return MODEL_UNKNOWN;
    }
}

static bool load_hparams(struct llama_model *model, const struct hparam_reader *hr) {
    struct llama_hparams *hp = &model->hparams;
    const struct gguf_reader *g = hr->gguf;

    int64_t tok_key = gguf_find_key(g, "tokenizer.ggml.tokens");
    if (tok_key < 0 || gguf_kv_type(g, tok_key) != GGUF_TYPE_ARRAY) {
        error_set("model file has no vocabulary (tokenizer.ggml.tokens)");
        return false;
    }
    uint64_t n_vocab = gguf_arr_n(g, tok_key);
    if (n_vocab == 0 || n_vocab > INT32_MAX) {
        error_set("invalid vocabulary size %llu", (unsigned long long)n_vocab);
        return false;
    }
    hp->n_vocab = (uint32_t)n_vocab;

    if (!read_arch_u32(hr, "context_length", KEY_REQUIRED, &hp->n_ctx_train) ||
        !read_arch_u32(hr, "embedding_length", KEY_REQUIRED, &hp->n_embd) ||
        !read_arch_u32(hr, "feed_forward_length", KEY_REQUIRED, &hp->n_ff) ||
        !read_arch_u32(hr, "attention.head_count", KEY_REQUIRED, &hp->n_head) ||
        !read_arch_u32(hr, "block_count", KEY_REQUIRED, &hp->n_layer) ||
        !read_arch_u32(hr, "expert_count", KEY_OPTIONAL, &hp->n_expert) ||
        !read_arch_u32(hr, "expert_used_count", KEY_OPTIONAL, &hp->n_expert_used)) {
        return false;
    }
    if (hp->n_embd == 0 || hp->n_head == 0 || hp->n_layer == 0 || hp->n_ctx_train == 0) {
        error_set("invalid hyperparameters: embedding_length %u, head_count %u, block_count %u, context_length %u",
                  hp->n_embd, hp->n_head, hp->n_layer, hp->n_ctx_train);
        return false;
    }
    if (hp->n_layer > LLAMA_MAX_LAYERS) {
        error_set("block_count %u exceeds the supported maximum %d", hp->n_layer, LLAMA_MAX_LAYERS);
        return false;
    }
    if (hp->n_expert > LLAMA_MAX_EXPERTS) {
        error_set("expert_count %u exceeds the supported maximum %d", hp->n_expert, LLAMA_MAX_EXPERTS);
        return false;
    }
    if (hp->n_expert > 0 && (hp->n_expert_used == 0 || hp->n_expert_used > hp->n_expert)) {
        error_set("expert_used_count %u must be in 1..expert_count (%u)", hp->n_expert_used, hp->n_expert);
        return false;
    }
    if (hp->n_expert == 0 && hp->n_expert_used != 0) {
        error_set("expert_used_count %u given without experts", hp->n_expert_used);
        return false;
    }

    hp->n_head_kv = hp->n_head;
    if (!read_arch_u32(hr, "attention.head_count_kv", KEY_OPTIONAL, &hp->n_head_kv)) return false;
    if (hp->n_head_kv == 0 || hp->n_head % hp->n_head_kv != 0) {
        error_set("head_count_kv %u must divide head_count %u", hp->n_head_kv, hp->n_head);
        return false;
    }
    if (hp->n_embd % hp->n_head != 0) {
        error_set("embedding_length %u is not a multiple of head_count %u", hp->n_embd, hp->n_head);
        return false;
    }

    hp->rope_freq_base_train = 10000.0f;
    if (!read_arch_f32(hr, "rope.freq_base", KEY_OPTIONAL, &hp->rope_freq_base_train)) return false;

    hp->rope_scaling_type_train = LLAMA_ROPE_SCALING_LINEAR;
    {
        char key[160];
        arch_key(hr, "rope.scaling.type", key, sizeof key);
        if (gguf_find_key(g, key) >= 0) {
            const char *s;
            if (!gguf_get_str(g, key, &s)) return false;
            if (strcmp(s, "none") == 0) hp->rope_scaling_type_train = LLAMA_ROPE_SCALING_NONE;
            else if (strcmp(s, "linear") == 0) hp->rope_scaling_type_train = LLAMA_ROPE_SCALING_LINEAR;
            else if (strcmp(s, "yarn") == 0) hp->rope_scaling_type_train = LLAMA_ROPE_SCALING_YARN;
            else {
                error_set("unknown RoPE scaling type '%s'", s);
                return false;
            }
        }
    }

    /* rope.scaling.factor wins over the older rope.scale_linear; 0 means none */
    float ropescale = 0.0f;
    char key[160];
    if (gguf_find_key(g, arch_key(hr, "rope.scaling.factor", key, sizeof key)) >= 0 || find_override(hr, key)) {
        if (!read_f32(hr, key, KEY_REQUIRED, &ropescale)) return false;
    } else if (!read_arch_f32(hr, "rope.scale_linear", KEY_OPTIONAL, &ropescale)) {
        return false;
    }
    if (ropescale < 0.0f) {
        error_set("invalid RoPE scaling factor %g", ropescale);
        return false;
    }
    hp->rope_freq_scale_train = ropescale == 0.0f ? 1.0f : 1.0f / ropescale;

    hp->n_yarn_orig_ctx = hp->n_ctx_train;
    if (!read_arch_u32(hr, "rope.scaling.original_context_length", KEY_OPTIONAL, &hp->n_yarn_orig_ctx)) return false;
    if (!read_bool(hr, arch_key(hr, "rope.scaling.finetuned", key, sizeof key), &hp->rope_finetuned)) return false;

    hp->n_rot = hp->n_embd / hp->n_head;
    if (!read_arch_u32(hr, "rope.dimension_count", KEY_OPTIONAL, &hp->n_rot)) return false;
    if (model->arch == LLM_ARCH_LLAMA && hp->n_rot != hp->n_embd / hp->n_head) {
        error_set("invalid rope.dimension_count %u: LLaMA needs embedding_length / head_count = %u",
                  hp->n_rot, hp->n_embd / hp->n_head);
        return false;
    }
    hp->n_embd_head_k = hp->n_embd / hp->n_head;
    hp->n_embd_head_v = hp->n_embd / hp->n_head;
    if (!read_arch_u32(hr, "attention.key_length", KEY_OPTIONAL, &hp->n_embd_head_k) ||
        !read_arch_u32(hr, "attention.value_length", KEY_OPTIONAL, &hp->n_embd_head_v)) {
        return false;
    }
    if (hp->n_embd_head_k == 0 || hp->n_embd_head_v == 0 || hp->n_embd_head_k % 2 != 0 || hp->n_rot > hp->n_embd_head_k) {
        error_set("invalid head dimensions: key %u, value %u, rope %u", hp->n_embd_head_k, hp->n_embd_head_v, hp->n_rot);
        return false;
    }

    if (!read_arch_f32(hr, "attention.layer_norm_rms_epsilon", KEY_REQUIRED, &hp->f_norm_rms_eps)) return false;
    model->type = llama_model_type(hp);
    return true;
}

/* general.file_type, or a guess from the most common weight type (as b1892). */
static void load_ftype(struct llama_model *model, const struct gguf_reader *g) {
    uint32_t ftype;
    if (gguf_find_key(g, "general.file_type") >= 0 && gguf_get_u32(g, "general.file_type", &ftype)) {
        model->ftype = (enum llama_ftype)ftype;
        return;
    }
    error_clear();
    int64_t counts[GGML_TYPE_COUNT] = {0};
    for (int64_t i = 0; i < gguf_n_tensors(g); i++) counts[gguf_tensor(g, i)->type]++;
    int best = GGML_TYPE_F32;
    for (int t = 0; t < GGML_TYPE_COUNT; t++) {
        if (counts[t] > counts[best]) best = t;
    }
    enum llama_ftype guess;
    switch (best) {
    case GGML_TYPE_F32: guess = LLAMA_FTYPE_ALL_F32; break;
    case GGML_TYPE_F16: guess = LLAMA_FTYPE_MOSTLY_F16; break;
    case GGML_TYPE_Q4_0: guess = LLAMA_FTYPE_MOSTLY_Q4_0; break;
    case GGML_TYPE_Q4_1: guess = LLAMA_FTYPE_MOSTLY_Q4_1; break;
    case GGML_TYPE_Q5_0: guess = LLAMA_FTYPE_MOSTLY_Q5_0; break;
    case GGML_TYPE_Q5_1: guess = LLAMA_FTYPE_MOSTLY_Q5_1; break;
    case GGML_TYPE_Q8_0: guess = LLAMA_FTYPE_MOSTLY_Q8_0; break;
    case GGML_TYPE_Q2_K: guess = LLAMA_FTYPE_MOSTLY_Q2_K; break;
    case GGML_TYPE_Q3_K: guess = LLAMA_FTYPE_MOSTLY_Q3_K_M; break;
    case GGML_TYPE_Q4_K: guess = LLAMA_FTYPE_MOSTLY_Q4_K_M; break;
    case GGML_TYPE_Q5_K: guess = LLAMA_FTYPE_MOSTLY_Q5_K_M; break;
    case GGML_TYPE_Q6_K: guess = LLAMA_FTYPE_MOSTLY_Q6_K; break;
    case GGML_TYPE_IQ2_XXS: guess = LLAMA_FTYPE_MOSTLY_IQ2_XXS; break;
    case GGML_TYPE_IQ2_XS: guess = LLAMA_FTYPE_MOSTLY_IQ2_XS; break;
    default: guess = LLAMA_FTYPE_ALL_F32; break;
    }
    model->ftype = (enum llama_ftype)(guess | LLAMA_FTYPE_GUESSED);
}

/* ---- weights ---------------------------------------------------------------------- */

struct weight_loader {
    struct llama_model *model;
    const struct gguf_reader *gguf;
    bool *used;          /* per file tensor: claimed by the weight table */
    int64_t n_used;
    uint64_t bytes_done; /* for the progress callback */
    const struct llama_model_params *params;
};

enum weight_need { WEIGHT_OPTIONAL, WEIGHT_REQUIRED };

static bool report_progress(struct weight_loader *wl) {
    if (!wl->params->progress_callback) return true;
    float progress = wl->model->n_bytes ? (float)((double)wl->bytes_done / (double)wl->model->n_bytes) : 1.0f;
    if (!wl->params->progress_callback(progress, wl->params->progress_callback_user_data)) {
        error_set("model loading cancelled by the progress callback");
        return false;
    }
    return true;
}

/* Finds `name`, checks its shape, and makes a weight tensor over its data.
 * Returns false on error; *out stays NULL for an absent optional weight. */
static bool load_weight(struct weight_loader *wl, struct tensor **out, enum weight_need need,
                        int64_t ne0, int64_t ne1, const char *fmt, ...) __attribute__((format(printf, 6, 7)));

static bool load_weight(struct weight_loader *wl, struct tensor **out, enum weight_need need,
                        int64_t ne0, int64_t ne1, const char *fmt, ...) {
    char name[TENSOR_MAX_NAME];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(name, sizeof name, fmt, ap);
    va_end(ap);
    *out = NULL;

    int64_t idx = gguf_find_tensor(wl->gguf, name);
    if (idx < 0) {
        if (need == WEIGHT_OPTIONAL) return true;
        error_set("model file lacks the tensor '%s'", name);
        return false;
    }
    const struct gguf_tensor_info *info = gguf_tensor(wl->gguf, idx);
    int want_dims = ne1 > 0 ? 2 : 1;
    int64_t want_ne1 = ne1 > 0 ? ne1 : 1;
    bool shape_ok = info->ne[0] == ne0 && info->ne[1] == want_ne1 && info->ne[2] == 1 && info->ne[3] == 1 &&
                    (int)info->n_dims <= want_dims;
    if (!shape_ok) {
        error_set("tensor '%s' has shape [%lld, %lld, %lld, %lld]; expected [%lld, %lld]", name,
                  (long long)info->ne[0], (long long)info->ne[1], (long long)info->ne[2], (long long)info->ne[3],
                  (long long)ne0, (long long)want_ne1);
        return false;
    }
    if (wl->used[idx]) {
        error_set("tensor '%s' is used twice", name);
        return false;
    }
    struct tensor *t = tensor_new_2d(wl->model->weights_ctx, info->type, ne0, want_ne1);
    if (!t) {
        error_set("out of memory creating tensor '%s'", name);
        return false;
    }
    tensor_set_name(t, "%s", name);
    t->data = (void *)info->data;
    wl->used[idx] = true;
    wl->n_used++;
    wl->bytes_done += info->size;
    *out = t;
    return report_progress(wl);
}

static bool load_llama_weights(struct weight_loader *wl) {
    struct llama_model *m = wl->model;
    const struct llama_hparams *hp = &m->hparams;
    const int64_t n_embd = hp->n_embd, n_vocab = hp->n_vocab, n_ff = hp->n_ff;
    const int64_t n_embd_q = (int64_t)hp->n_embd_head_k * hp->n_head;
    const int64_t n_embd_o = (int64_t)hp->n_embd_head_v * hp->n_head;
    const int64_t n_embd_k_gqa = hparams_n_embd_k_gqa(hp), n_embd_v_gqa = hparams_n_embd_v_gqa(hp);

    if (!load_weight(wl, &m->tok_embd, WEIGHT_REQUIRED, n_embd, n_vocab, "token_embd.weight") ||
        !load_weight(wl, &m->output_norm, WEIGHT_REQUIRED, n_embd, 0, "output_norm.weight") ||
        !load_weight(wl, &m->output, WEIGHT_OPTIONAL, n_embd, n_vocab, "output.weight")) {
        return false;
    }
    if (!m->output) m->output = m->tok_embd; /* tied embeddings */

    for (uint32_t i = 0; i < hp->n_layer; i++) {
        struct llama_layer *l = &m->layers[i];
        if (!load_weight(wl, &l->attn_norm, WEIGHT_REQUIRED, n_embd, 0, "blk.%u.attn_norm.weight", i) ||
            !load_weight(wl, &l->wq, WEIGHT_REQUIRED, n_embd, n_embd_q, "blk.%u.attn_q.weight", i) ||
            !load_weight(wl, &l->wk, WEIGHT_REQUIRED, n_embd, n_embd_k_gqa, "blk.%u.attn_k.weight", i) ||
            !load_weight(wl, &l->wv, WEIGHT_REQUIRED, n_embd, n_embd_v_gqa, "blk.%u.attn_v.weight", i) ||
            !load_weight(wl, &l->wo, WEIGHT_REQUIRED, n_embd_o, n_embd, "blk.%u.attn_output.weight", i) ||
            !load_weight(wl, &l->bq, WEIGHT_OPTIONAL, n_embd_q, 0, "blk.%u.attn_q.bias", i) ||
            !load_weight(wl, &l->bk, WEIGHT_OPTIONAL, n_embd_k_gqa, 0, "blk.%u.attn_k.bias", i) ||
            !load_weight(wl, &l->bv, WEIGHT_OPTIONAL, n_embd_v_gqa, 0, "blk.%u.attn_v.bias", i) ||
            !load_weight(wl, &l->bo, WEIGHT_OPTIONAL, n_embd, 0, "blk.%u.attn_output.bias", i) ||
            !load_weight(wl, &l->ffn_norm, WEIGHT_REQUIRED, n_embd, 0, "blk.%u.ffn_norm.weight", i)) {
            return false;
        }
        if (hp->n_expert == 0) {
            if (!load_weight(wl, &l->ffn_gate, WEIGHT_REQUIRED, n_embd, n_ff, "blk.%u.ffn_gate.weight", i) ||
                !load_weight(wl, &l->ffn_down, WEIGHT_REQUIRED, n_ff, n_embd, "blk.%u.ffn_down.weight", i) ||
                !load_weight(wl, &l->ffn_up, WEIGHT_REQUIRED, n_embd, n_ff, "blk.%u.ffn_up.weight", i)) {
                return false;
            }
            continue;
        }
        if (!load_weight(wl, &l->ffn_gate_inp, WEIGHT_REQUIRED, n_embd, hp->n_expert, "blk.%u.ffn_gate_inp.weight", i)) {
            return false;
        }
        for (uint32_t x = 0; x < hp->n_expert; x++) {
            if (!load_weight(wl, &l->ffn_gate_exp[x], WEIGHT_REQUIRED, n_embd, n_ff, "blk.%u.ffn_gate.%u.weight", i, x) ||
                !load_weight(wl, &l->ffn_down_exp[x], WEIGHT_REQUIRED, n_ff, n_embd, "blk.%u.ffn_down.%u.weight", i, x) ||
                !load_weight(wl, &l->ffn_up_exp[x], WEIGHT_REQUIRED, n_embd, n_ff, "blk.%u.ffn_up.%u.weight", i, x)) {
                return false;
            }
        }
        /* the experts of a layer are picked by one index: they must agree in type */
        for (uint32_t x = 1; x < hp->n_expert; x++) {
            if (l->ffn_gate_exp[x]->type != l->ffn_gate_exp[0]->type ||
                l->ffn_down_exp[x]->type != l->ffn_down_exp[0]->type ||
                l->ffn_up_exp[x]->type != l->ffn_up_exp[0]->type) {
                error_set("layer %u: experts have different tensor types", i);
                return false;
            }
        }
    }
    if (wl->n_used != gguf_n_tensors(wl->gguf)) {
        for (int64_t i = 0; i < gguf_n_tensors(wl->gguf); i++) {
            if (!wl->used[i]) {
                error_set("model file has an unexpected tensor '%s'", gguf_tensor(wl->gguf, i)->name);
                return false;
            }
        }
    }
    return true;
}

/* Packing shared by threads: each takes the next weight in the list. */
struct pack_job {
    struct llama_model *model;
    struct tensor **list;
    size_t *offset;      /* of each weight's copy in model->packed */
    int n;
    atomic_int next;
    atomic_bool failed;
    char error[256];     /* the first failure's message */
    pthread_mutex_t lock;
};

static void *pack_worker(void *arg) {
    struct pack_job *job = arg;
    for (int i = atomic_fetch_add(&job->next, 1); i < job->n && !atomic_load(&job->failed);
         i = atomic_fetch_add(&job->next, 1)) {
        struct tensor *t = job->list[i];
        if (!cpu_repack_weight_at(t, (char *)job->model->packed + job->offset[i])) {
            pthread_mutex_lock(&job->lock);
            if (!atomic_exchange(&job->failed, true)) snprintf(job->error, sizeof job->error, "%s", error_last());
            pthread_mutex_unlock(&job->lock);
            break;
        }
        gguf_release_pages(job->model->gguf, t->data, tensor_nbytes(t));
    }
    return NULL;
}

/* The matrices the graph multiplies by with mul_mat get the CPU backend's
 * packed copy where it has one (cpu_packed.h), all in one arena, and their
 * pages of the mapped file leave the resident set, so the copies replace
 * them rather than adding to them (each weight's pages go as soon as it is
 * packed, so the peak is the copies plus one weight). Not packed: the
 * experts (mul_mat_id reads them in place), an output tied to the token
 * embeddings (get_rows reads those pages), and anything when the file is
 * read into memory (its buffer cannot give pages back, so a copy would
 * double the memory). One thread per core. The packed weights' list, in
 * `packed` (the caller frees it), tells lock_weights what to leave out. */
static bool pack_weights(struct llama_model *model, const struct llama_model_params *params,
                         struct tensor ***packed, int *n_packed) {
    *packed = NULL;
    *n_packed = 0;
    if (!params->use_mmap) return true;
    enum { N_DENSE = 7, N_PER_LAYER = N_DENSE + 3 * LLAMA_MAX_EXPERTS };
    const uint32_t n_layer = model->hparams.n_layer;
    const size_t cap = (size_t)n_layer * N_PER_LAYER + 1;
    struct pack_job job = { .model = model };
    job.list = calloc(cap, sizeof *job.list);
    job.offset = calloc(cap, sizeof *job.offset);
    if (!job.list || !job.offset) {
        free(job.list);
        free(job.offset);
        error_set("out of memory packing the weights");
        return false;
    }
    size_t total = 0;
    for (uint32_t i = 0; i <= n_layer; i++) {
        struct tensor *mats[N_PER_LAYER] = { 0 };
        if (i == n_layer) {
            if (model->output != model->tok_embd) mats[0] = model->output;
        } else {
            const struct llama_layer *l = &model->layers[i];
            struct tensor *m[N_DENSE] = { l->wq, l->wk, l->wv, l->wo, l->ffn_gate, l->ffn_down, l->ffn_up };
            memcpy(mats, m, sizeof m);
            /* experts (mul_mat_id runs on their packed copies) */
            for (int e = 0; e < LLAMA_MAX_EXPERTS; e++) {
                mats[N_DENSE + 3 * e] = l->ffn_gate_exp[e];
                mats[N_DENSE + 3 * e + 1] = l->ffn_down_exp[e];
                mats[N_DENSE + 3 * e + 2] = l->ffn_up_exp[e];
            }
        }
        for (int j = 0; j < N_PER_LAYER; j++) {
            const size_t size = mats[j] ? cpu_repack_size(mats[j]) : 0;
            if (size == 0) continue;
            job.list[job.n] = mats[j];
            job.offset[job.n++] = total;
            total += size;   /* a multiple of 64 */
        }
    }
    bool ok = true;
    if (job.n > 0) {
        model->packed = cpu_packed_arena_new(total, params->use_mlock);
        model->packed_size = total;
        ok = model->packed != NULL;
    }
    if (ok && job.n > 0) {
        pthread_mutex_init(&job.lock, NULL);
        enum { MAX_PACK_THREADS = 16 };
        pthread_t threads[MAX_PACK_THREADS];
        int n_threads = cpu_physical_cores();
        if (n_threads > MAX_PACK_THREADS) n_threads = MAX_PACK_THREADS;
        if (n_threads > job.n) n_threads = job.n;
        int started = 0;
        while (started + 1 < n_threads && pthread_create(&threads[started], NULL, pack_worker, &job) == 0) started++;
        pack_worker(&job);
        for (int i = 0; i < started; i++) pthread_join(threads[i], NULL);
        pthread_mutex_destroy(&job.lock);
        if (atomic_load(&job.failed)) {
            error_set("%s", job.error);
            ok = false;
        }
    }
    free(job.offset);
    *packed = job.list;
    *n_packed = job.n;
    return ok;
}

static int compare_tensor_data(const void *a, const void *b) {
    const uintptr_t x = (uintptr_t)(*(struct tensor *const *)a)->data, y = (uintptr_t)(*(struct tensor *const *)b)->data;
    return (x > y) - (x < y);
}

/* use_mlock: pins the file's pages but those of the packed weights (their
 * copies were locked when made), so that locking neither reads the packed
 * weights' pages back nor doubles the memory. */
static void lock_weights(struct llama_model *model, struct tensor **packed, int n_packed) {
    struct gguf_reader *g = model->gguf;
    const uint8_t *pos = gguf_file_data(g), *end = pos + gguf_file_size(g);
    if (n_packed > 0) qsort(packed, (size_t)n_packed, sizeof *packed, compare_tensor_data);
    for (int i = 0; i < n_packed; i++) {
        const uint8_t *p = packed[i]->data;
        if (p > pos) gguf_lock_range(g, pos, (size_t)(p - pos));
        if (p + tensor_nbytes(packed[i]) > pos) pos = p + tensor_nbytes(packed[i]);
    }
    if (end > pos) gguf_lock_range(g, pos, (size_t)(end - pos));
}

static bool load_weights(struct llama_model *model, const struct llama_model_params *params) {
    const struct gguf_reader *g = model->gguf;
    int64_t n_tensors = gguf_n_tensors(g);
    struct weight_loader wl = { .model = model, .gguf = g, .params = params };
    wl.used = calloc((size_t)n_tensors + 1, sizeof *wl.used);
    model->layers = calloc(model->hparams.n_layer, sizeof *model->layers);
    model->weights_ctx = tensor_ctx_new((size_t)n_tensors + 1, 0);
    if (!wl.used || !model->layers || !model->weights_ctx) {
        free(wl.used);
        error_set("out of memory loading the weight table");
        return false;
    }
    if (!report_progress(&wl)) {
        free(wl.used);
        return false;
    }
    struct tensor **packed = NULL;
    int n_packed = 0;
    bool ok = load_llama_weights(&wl) && pack_weights(model, params, &packed, &n_packed);
    if (ok && params->use_mlock) lock_weights(model, packed, n_packed);
    free(packed);
    free(wl.used);
    return ok;
}

/* ---- the model ---------------------------------------------------------------------- */

const struct grammar_vocab *model_grammar_vocab(struct llama_model *model) {
    pthread_mutex_lock(&model->grammar_vocab_lock);
    if (!model->grammar_vocab) {
        const int32_t n = vocab_n_tokens(model->vocab);
        const char **pieces = malloc((size_t)n * sizeof *pieces);
        size_t *lengths = malloc((size_t)n * sizeof *lengths);
        if (pieces && lengths) {
            for (int32_t i = 0; i < n; i++) pieces[i] = vocab_token_piece(model->vocab, i, &lengths[i]);
            model->grammar_vocab = grammar_vocab_create(pieces, lengths, n, vocab_eos(model->vocab));
        } else {
            error_set("out of memory building the grammar vocabulary");
        }
        free(pieces);
        free(lengths);
    }
    pthread_mutex_unlock(&model->grammar_vocab_lock);
    return model->grammar_vocab;
}

void model_free(struct llama_model *model) {
    if (!model) return;
    grammar_vocab_free(model->grammar_vocab);
    pthread_mutex_destroy(&model->grammar_vocab_lock);
    vocab_free(model->vocab);
    for (size_t i = 0; i < model->n_lora_buffers; i++) free(model->lora_buffers[i]);
    free(model->lora_buffers);
    if (model->weights_ctx) {
        for (struct tensor *t = tensor_ctx_first(model->weights_ctx); t; t = tensor_ctx_next(model->weights_ctx, t)) {
            cpu_repack_release(t);
        }
    }
    cpu_packed_arena_free(model->packed, model->packed_size);
    tensor_ctx_free(model->weights_ctx);
    free(model->layers);
    gguf_close(model->gguf);
    free(model);
}

struct llama_model *model_load(const char *path, const struct llama_model_params *params) {
    int64_t t_start = time_us();
    struct llama_model *model = calloc(1, sizeof *model);
    if (!model) {
        error_set("out of memory");
        return NULL;
    }
    model->t_start_us = t_start;
    pthread_mutex_init(&model->grammar_vocab_lock, NULL);
    model->gguf = gguf_open_file(path, params->use_mmap);
    if (!model->gguf) goto fail;
    const struct gguf_reader *g = model->gguf;

    const char *arch_name;
    if (!gguf_get_str(g, "general.architecture", &arch_name)) goto fail;
    if (strcmp(arch_name, "llama") != 0) {
        error_set("unsupported model architecture '%s'", arch_name);
        goto fail;
    }
    model->arch = LLM_ARCH_LLAMA;
    const char *name = "n/a";
    if (gguf_find_key(g, "general.name") >= 0 && !gguf_get_str(g, "general.name", &name)) goto fail;
    snprintf(model->name, sizeof model->name, "%s", name);

    struct hparam_reader hr = { .gguf = g, .overrides = params->kv_overrides };
    snprintf(hr.arch_prefix, sizeof hr.arch_prefix, "%s", arch_name);
    if (!load_hparams(model, &hr)) goto fail;
    model->hparams.vocab_only = params->vocab_only;
    load_ftype(model, g);

    model->vocab = vocab_load_gguf(g);
    if (!model->vocab) goto fail;

    for (int64_t i = 0; i < gguf_n_tensors(g); i++) {
        const struct gguf_tensor_info *info = gguf_tensor(g, i);
        model->n_bytes += info->size;
        model->n_elements += (uint64_t)(info->ne[0] * info->ne[1] * info->ne[2] * info->ne[3]);
    }

    if (!params->vocab_only) {
        if (!load_weights(model, params)) goto fail;
    }
    model->t_load_us = time_us() - t_start;
    return model;

fail:
    model_free(model);
    return NULL;
}

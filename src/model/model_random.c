#include "model/model_random.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/fp16.h"
#include "core/log.h"
#include "gguf/gguf.h"
#include "model/model.h"

/* ---- presets ------------------------------------------------------------------------ */

static const struct {
    const char *key;
    struct model_random_shape shape;
} k_presets[] = {
    /* TinyLlama-1.1B */
    { "tinyllama", { "TinyLlama-1.1B shape, random weights", 2048, 22, 32, 4, 5632, 2048, 0, 0, 10000.0f, 1e-5f } },
    /* LLaMA-2 7B */
    { "llama7b", { "LLaMA-7B shape, random weights", 4096, 32, 32, 32, 11008, 4096, 0, 0, 10000.0f, 1e-5f } },
    /* Mixtral-8x7B: 8 experts, 2 used per token */
    { "mixtral", { "Mixtral-8x7B shape, random weights", 4096, 32, 32, 8, 14336, 32768, 8, 2, 1000000.0f, 1e-5f } },
    /* small enough for tests */
    { "tiny", { "tiny LLaMA shape, random weights", 64, 2, 4, 2, 128, 256, 0, 0, 10000.0f, 1e-5f } },
    { "tiny-moe", { "tiny MoE shape, random weights", 64, 2, 4, 2, 96, 256, 4, 2, 10000.0f, 1e-5f } },
};
#define N_PRESETS (sizeof k_presets / sizeof k_presets[0])

bool model_random_preset(const char *name, struct model_random_shape *out) {
    for (size_t i = 0; i < N_PRESETS; i++) {
        if (name && strcmp(name, k_presets[i].key) == 0) {
            *out = k_presets[i].shape;
            return true;
        }
    }
    error_set("unknown model preset '%s'", name ? name : "(null)");
    return false;
}

const char *const *model_random_preset_names(void) {
    static const char *names[N_PRESETS + 1];
    for (size_t i = 0; i < N_PRESETS; i++) names[i] = k_presets[i].key;
    return names;
}

/* ---- random numbers ---------------------------------------------------------------------- */

struct rng {
    uint64_t s[4];
};

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* One independent stream per (seed, tensor index). */
static void rng_init(struct rng *r, uint64_t seed, uint64_t stream) {
    uint64_t x = seed ^ (stream * 0xD1B54A32D192ED03ull);
    for (int i = 0; i < 4; i++) r->s[i] = splitmix64(&x);
}

static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

/* xoshiro256+ */
static inline uint64_t rng_next(struct rng *r) {
    const uint64_t result = r->s[0] + r->s[3];
    const uint64_t t = r->s[1] << 17;
    r->s[2] ^= r->s[0];
    r->s[3] ^= r->s[1];
    r->s[1] ^= r->s[2];
    r->s[0] ^= r->s[3];
    r->s[2] ^= t;
    r->s[3] = rotl(r->s[3], 45);
    return result;
}

/* n values from N(0, sigma^2) by Box-Muller (two per pair of uniforms). */
static void rng_normal(struct rng *r, float sigma, float *out, size_t n) {
    const double two_pi = 6.283185307179586;
    for (size_t i = 0; i < n; i += 2) {
        const uint64_t bits = rng_next(r);
        /* two 32-bit uniforms; u1 in (0, 1] so the log is finite */
        const double u1 = ((double)(bits >> 32) + 1.0) * 0x1.0p-32;
        const double u2 = (double)(bits & 0xFFFFFFFFu) * 0x1.0p-32;
        const double rad = sigma * sqrt(-2.0 * log(u1));
        out[i] = (float)(rad * cos(two_pi * u2));
        if (i + 1 < n) out[i + 1] = (float)(rad * sin(two_pi * u2));
    }
}

/* ---- the tensor list ------------------------------------------------------------------ */

struct rand_tensor {
    char name[64];
    int64_t ne0, ne1; /* ne1 == 0: a norm vector */
};

struct rand_list {
    struct rand_tensor *t;
    size_t n, cap;
};

static bool list_add(struct rand_list *l, int64_t ne0, int64_t ne1, const char *fmt, unsigned a, unsigned b) {
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 64;
        struct rand_tensor *t = realloc(l->t, cap * sizeof *t);
        if (!t) {
            error_set("out of memory listing the tensors");
            return false;
        }
        l->t = t;
        l->cap = cap;
    }
    struct rand_tensor *t = &l->t[l->n++];
    snprintf(t->name, sizeof t->name, fmt, a, b);
    t->ne0 = ne0;
    t->ne1 = ne1;
    return true;
}

/* The tensors in the order convert.py writes them. */
static bool list_tensors(const struct model_random_shape *s, int64_t n_vocab, struct rand_list *l) {
    const int64_t n_embd = s->n_embd, n_ff = s->n_ff;
    const int64_t n_embd_kv = (int64_t)s->n_embd / s->n_head * s->n_head_kv;
    bool ok = list_add(l, n_embd, n_vocab, "token_embd.weight", 0, 0);
    for (unsigned i = 0; ok && i < s->n_layer; i++) {
        ok = list_add(l, n_embd, 0, "blk.%u.attn_norm.weight", i, 0) &&
             list_add(l, n_embd, n_embd, "blk.%u.attn_q.weight", i, 0) &&
             list_add(l, n_embd, n_embd_kv, "blk.%u.attn_k.weight", i, 0) &&
             list_add(l, n_embd, n_embd_kv, "blk.%u.attn_v.weight", i, 0) &&
             list_add(l, n_embd, n_embd, "blk.%u.attn_output.weight", i, 0) &&
             list_add(l, n_embd, 0, "blk.%u.ffn_norm.weight", i, 0);
        if (ok && s->n_expert == 0) {
            ok = list_add(l, n_embd, n_ff, "blk.%u.ffn_gate.weight", i, 0) &&
                 list_add(l, n_ff, n_embd, "blk.%u.ffn_down.weight", i, 0) &&
                 list_add(l, n_embd, n_ff, "blk.%u.ffn_up.weight", i, 0);
        } else if (ok) {
            ok = list_add(l, n_embd, s->n_expert, "blk.%u.ffn_gate_inp.weight", i, 0);
            for (unsigned x = 0; ok && x < s->n_expert; x++) {
                ok = list_add(l, n_embd, n_ff, "blk.%u.ffn_gate.%u.weight", i, x) &&
                     list_add(l, n_ff, n_embd, "blk.%u.ffn_down.%u.weight", i, x) &&
                     list_add(l, n_embd, n_ff, "blk.%u.ffn_up.%u.weight", i, x);
            }
        }
    }
    return ok && list_add(l, n_embd, 0, "output_norm.weight", 0, 0) &&
           list_add(l, n_embd, n_vocab, "output.weight", 0, 0);
}

static bool shape_check(const struct model_random_shape *s, enum ggml_type type) {
    if (type != GGML_TYPE_F32 && type != GGML_TYPE_F16) {
        error_set("random models are written as F32 or F16 (quantize them afterwards)");
        return false;
    }
    if (s->n_layer < 1 || s->n_layer > LLAMA_MAX_LAYERS || s->n_embd < 1 || s->n_head < 1 || s->n_head_kv < 1 ||
        s->n_ff < 1 || s->n_ctx_train < 1 || s->n_embd % s->n_head != 0 || s->n_head % s->n_head_kv != 0 ||
        (s->n_embd / s->n_head) % 2 != 0) {
        error_set("invalid model shape: n_embd %u, n_layer %u, n_head %u, n_head_kv %u, n_ff %u", s->n_embd,
                  s->n_layer, s->n_head, s->n_head_kv, s->n_ff);
        return false;
    }
    if (s->n_expert > LLAMA_MAX_EXPERTS || (s->n_expert > 0) != (s->n_expert_used > 0) ||
        s->n_expert_used > s->n_expert) {
        error_set("invalid experts: %u, %u used (at most %d)", s->n_expert, s->n_expert_used, LLAMA_MAX_EXPERTS);
        return false;
    }
    return true;
}

/* ---- writing ------------------------------------------------------------------------------ */

/* The metadata: the vocabulary's tokenizer.* keys, then the model's. */
static bool set_metadata(struct gguf_writer *w, const struct gguf_reader *vocab, const struct model_random_params *p) {
    for (int64_t i = gguf_n_kv(vocab) - 1; i >= 0; i--) {
        const char *key = gguf_key(vocab, i);
        if (strncmp(key, "tokenizer.", 10) != 0 && !gguf_remove_key(w, key)) return false;
    }
    const struct model_random_shape *s = &p->shape;
    bool ok = gguf_set_str(w, "general.architecture", "llama") && gguf_set_str(w, "general.name", s->name) &&
              gguf_set_u32(w, "general.file_type", p->type == GGML_TYPE_F16 ? LLAMA_FTYPE_MOSTLY_F16 : LLAMA_FTYPE_ALL_F32) &&
              gguf_set_u32(w, "llama.context_length", s->n_ctx_train) &&
              gguf_set_u32(w, "llama.embedding_length", s->n_embd) &&
              gguf_set_u32(w, "llama.block_count", s->n_layer) &&
              gguf_set_u32(w, "llama.feed_forward_length", s->n_ff) &&
              gguf_set_u32(w, "llama.rope.dimension_count", s->n_embd / s->n_head) &&
              gguf_set_u32(w, "llama.attention.head_count", s->n_head) &&
              gguf_set_u32(w, "llama.attention.head_count_kv", s->n_head_kv) &&
              gguf_set_f32(w, "llama.attention.layer_norm_rms_epsilon", s->norm_rms_eps) &&
              gguf_set_f32(w, "llama.rope.freq_base", s->rope_freq_base);
    if (ok && s->n_expert > 0) {
        ok = gguf_set_u32(w, "llama.expert_count", s->n_expert) &&
             gguf_set_u32(w, "llama.expert_used_count", s->n_expert_used);
    }
    return ok;
}

#define RAND_CHUNK (1u << 18) /* values generated and written at a time */

/* Streams one tensor's values: ones for a norm, else N(0, 0.02^2). */
static bool write_tensor(struct gguf_stream *st, const struct rand_tensor *t, enum ggml_type type, struct rng *r,
                         float *vals, fp16_t *halves) {
    const bool norm = t->ne1 == 0;
    size_t left = (size_t)t->ne0 * (size_t)(norm ? 1 : t->ne1);
    while (left > 0) {
        const size_t n = left < RAND_CHUNK ? left : RAND_CHUNK;
        if (norm) {
            for (size_t i = 0; i < n; i++) vals[i] = 1.0f;
        } else {
            rng_normal(r, 0.02f, vals, n);
        }
        bool ok;
        if (type == GGML_TYPE_F16 && !norm) {
            for (size_t i = 0; i < n; i++) halves[i] = fp32_to_fp16(vals[i]);
            ok = gguf_stream_write(st, halves, n * sizeof *halves);
        } else {
            ok = gguf_stream_write(st, vals, n * sizeof *vals);
        }
        if (!ok) return false;
        left -= n;
    }
    return true;
}

bool model_random_write(const struct model_random_params *p, const char *out_path) {
    if (!shape_check(&p->shape, p->type)) return false;
    struct gguf_reader *vocab = gguf_open_file(p->vocab_path, true);
    if (!vocab) return false;
    const int64_t tok = gguf_find_key(vocab, "tokenizer.ggml.tokens");
    if (tok < 0 || gguf_arr_type(vocab, tok) != GGUF_TYPE_STRING || gguf_arr_n(vocab, tok) == 0) {
        error_set("'%s' has no vocabulary (tokenizer.ggml.tokens)", p->vocab_path);
        gguf_close(vocab);
        return false;
    }
    const int64_t n_vocab = (int64_t)gguf_arr_n(vocab, tok);

    struct rand_list list = { 0 };
    struct gguf_writer *w = gguf_writer_from_reader(vocab);
    struct gguf_stream *st = NULL;
    float *vals = malloc(RAND_CHUNK * sizeof *vals);
    fp16_t *halves = malloc(RAND_CHUNK * sizeof *halves);
    bool ok = w && vals && halves;
    if (!ok) error_set("out of memory");
    ok = ok && set_metadata(w, vocab, p) && list_tensors(&p->shape, n_vocab, &list);
    for (size_t i = 0; ok && i < list.n; i++) {
        const struct rand_tensor *t = &list.t[i];
        const int64_t ne[2] = { t->ne0, t->ne1 };
        ok = gguf_add_tensor_info(w, t->name, t->ne1 ? p->type : GGML_TYPE_F32, t->ne1 ? 2 : 1, ne);
    }
    if (ok) {
        st = gguf_stream_open(w, out_path);
        ok = st != NULL;
    }
    for (size_t i = 0; ok && i < list.n; i++) {
        struct rng r;
        rng_init(&r, p->seed, i);
        ok = write_tensor(st, &list.t[i], p->type, &r, vals, halves);
    }
    /* closing early abandons (removes) the file */
    if (st && !gguf_stream_close(st)) ok = false;
    free(vals);
    free(halves);
    free(list.t);
    gguf_writer_free(w);
    gguf_close(vocab);
    return ok;
}

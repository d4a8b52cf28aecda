/*
 * A loaded model: hyperparameters, vocabulary, and weights.
 *
 * Weights are tensors whose data points into the mapped GGUF file when
 * use_mmap is set (nothing copied), or into one host buffer the loader
 * fills otherwise. A model is read-only once loaded and may be shared by
 * any number of contexts on any threads.
 */
#ifndef LLAMAC_MODEL_MODEL_H
#define LLAMAC_MODEL_MODEL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "llama.h"
#include "tensor/tensor.h"

#define LLAMA_MAX_LAYERS 512
#define LLAMA_MAX_EXPERTS 8

enum llm_arch {
    LLM_ARCH_LLAMA,
    LLM_ARCH_UNKNOWN,
};

/* Model size classes, only for llama_model_desc (b1892's names). */
enum llm_model_type {
    MODEL_UNKNOWN, MODEL_1B, MODEL_3B, MODEL_7B, MODEL_8x7B, MODEL_13B,
    MODEL_30B, MODEL_34B, MODEL_65B, MODEL_70B,
};

/* Field order and types as b1892's llama_hparams: the session file stores them. */
struct llama_hparams {
    bool vocab_only;
    uint32_t n_vocab;
    uint32_t n_ctx_train;   /* context size the model was trained on */
    uint32_t n_embd;
    uint32_t n_head;
    uint32_t n_head_kv;
    uint32_t n_layer;
    uint32_t n_rot;         /* RoPE dimensions per head */
    uint32_t n_embd_head_k; /* dimension of a key head */
    uint32_t n_embd_head_v; /* dimension of a value head */
    uint32_t n_ff;
    uint32_t n_expert;
    uint32_t n_expert_used;

    float f_norm_eps;
    float f_norm_rms_eps;

    float rope_freq_base_train;
    float rope_freq_scale_train;
    uint32_t n_yarn_orig_ctx;
    int8_t rope_scaling_type_train; /* enum llama_rope_scaling_type */
    bool rope_finetuned;

    float f_clamp_kqv;
    float f_max_alibi_bias;
};

static inline uint32_t hparams_n_embd_k_gqa(const struct llama_hparams *hp) { return hp->n_embd_head_k * hp->n_head_kv; }
static inline uint32_t hparams_n_embd_v_gqa(const struct llama_hparams *hp) { return hp->n_embd_head_v * hp->n_head_kv; }
static inline uint32_t hparams_n_gqa(const struct llama_hparams *hp) { return hp->n_head / hp->n_head_kv; }

/* One transformer block's weights (shapes as ne[0], ne[1]). */
struct llama_layer {
    struct tensor *attn_norm;  /* [n_embd] */
    struct tensor *wq;         /* [n_embd, n_embd_head_k * n_head] */
    struct tensor *wk;         /* [n_embd, n_embd_k_gqa] */
    struct tensor *wv;         /* [n_embd, n_embd_v_gqa] */
    struct tensor *wo;         /* [n_embd_head_v * n_head, n_embd] */
    struct tensor *bq, *bk, *bv, *bo; /* optional biases */

    struct tensor *ffn_norm;   /* [n_embd] */
    /* dense feed-forward (n_expert == 0) */
    struct tensor *ffn_gate;   /* [n_embd, n_ff] */
    struct tensor *ffn_down;   /* [n_ff, n_embd] */
    struct tensor *ffn_up;     /* [n_embd, n_ff] */
    /* mixture of experts */
    struct tensor *ffn_gate_inp;                  /* router [n_embd, n_expert] */
    struct tensor *ffn_gate_exp[LLAMA_MAX_EXPERTS]; /* [n_embd, n_ff] each */
    struct tensor *ffn_down_exp[LLAMA_MAX_EXPERTS]; /* [n_ff, n_embd] each */
    struct tensor *ffn_up_exp[LLAMA_MAX_EXPERTS];   /* [n_embd, n_ff] each */
};

struct gguf_reader;
struct vocab;
struct grammar_vocab;
struct backend_buffer;

struct llama_model {
    enum llm_arch arch;
    enum llm_model_type type;
    enum llama_ftype ftype;
    char name[128];

    struct llama_hparams hparams;
    struct vocab *vocab;

    struct gguf_reader *gguf;          /* the file: metadata queries, mapped weights */
    struct tensor_ctx *weights_ctx;    /* the weight tensors' metadata */
    struct backend_buffer *weights_buf;/* where the weights live (the mapping or a copy) */

    struct tensor *tok_embd;    /* [n_embd, n_vocab] */
    struct tensor *output_norm; /* [n_embd] */
    struct tensor *output;      /* [n_embd, n_vocab]; token_embd when the file ties them */
    struct llama_layer *layers; /* n_layer */

    uint64_t n_elements; /* all tensors of the file */
    uint64_t n_bytes;

    int64_t t_load_us;
    int64_t t_start_us;

    /* the packed copies of the mul_mat weights (backend/cpu/cpu_packed.h), one arena */
    void *packed;
    size_t packed_size;

    /* weights a LoRA adapter changed, copied out of the (read-only) file */
    void **lora_buffers;
    size_t n_lora_buffers;

    /* the vocabulary as the grammar matcher wants it, built on first use */
    pthread_mutex_t grammar_vocab_lock;
    struct grammar_vocab *grammar_vocab;
};

/* The model's grammar vocabulary (created once, thread-safe); NULL on allocation failure. */
const struct grammar_vocab *model_grammar_vocab(struct llama_model *model);

/* Loads a model; NULL with error_set() on failure (and nothing leaked). */
struct llama_model *model_load(const char *path, const struct llama_model_params *params);
void model_free(struct llama_model *model);

const char *model_arch_name(enum llm_arch arch);
const char *model_type_name(enum llm_model_type type);
const char *model_ftype_name(enum llama_ftype ftype);

#endif

/*
 * The model that `llamac train` trains: a LLaMA (RMSNorm, rotary attention
 * with grouped-query heads, SwiGLU feed-forward, untied output matrix) with
 * exactly the tensors, names and shapes that the llama loader reads from a
 * GGUF file, so the trained weights are written as an ordinary model.
 *
 *     token_embd.weight          [n_embd, n_vocab]
 *     blk.N.attn_norm.weight     [n_embd]
 *     blk.N.attn_q.weight        [n_embd, n_embd]
 *     blk.N.attn_k.weight        [n_embd, n_embd_kv]     n_embd_kv = head_dim * n_head_kv
 *     blk.N.attn_v.weight        [n_embd, n_embd_kv]
 *     blk.N.attn_output.weight   [n_embd, n_embd]
 *     blk.N.ffn_norm.weight      [n_embd]
 *     blk.N.ffn_gate.weight      [n_embd, n_ff]
 *     blk.N.ffn_down.weight      [n_ff, n_embd]
 *     blk.N.ffn_up.weight        [n_embd, n_ff]
 *     output_norm.weight         [n_embd]
 *     output.weight              [n_embd, n_vocab]
 *
 * The training graph computes, for n_batch sequences of n_ctx tokens at
 * once, the same function as b1892's llama graph (RoPE mode 0 with theta
 * base rope_freq_base, softmax of K^T Q / sqrt(head_dim) with a causal mask,
 * silu(gate) * up), then the mean cross-entropy against the next tokens. Its
 * products are marked MUL_MAT_ORDER_ANY (fast tiled kernels), so its values
 * differ from llama.h's on the written file by float rounding only.
 */
#ifndef LLAMAC_TRAIN_TRAIN_MODEL_H
#define LLAMAC_TRAIN_TRAIN_MODEL_H

#include <stdbool.h>
#include <stdint.h>

#include "ggml.h"
#include "tensor/tensor.h"
#include "train/train_rng.h"

struct gguf_reader;
struct gguf_writer;
struct backend_buffer;

#define TRAIN_MAX_LAYERS 512

struct train_hparams {
    int32_t n_vocab;
    int32_t n_ctx;         /* tokens per training sequence; llama.context_length */
    int32_t n_embd;
    int32_t n_layer;
    int32_t n_head;
    int32_t n_head_kv;     /* divides n_head; < n_head is grouped-query attention */
    int32_t n_ff;
    float norm_eps;        /* llama.attention.layer_norm_rms_epsilon */
    float rope_freq_base;  /* llama.rope.freq_base */
};

/* A small default shape (n_vocab 0: taken from the vocabulary). */
void train_hparams_default(struct train_hparams *hp);
/* False (error_set) when the shape is not a valid LLaMA (sizes, head divisibility). */
bool train_hparams_validate(const struct train_hparams *hp);

struct train_layer {
    struct tensor *attn_norm, *wq, *wk, *wv, *wo;
    struct tensor *ffn_norm, *ffn_gate, *ffn_down, *ffn_up;
};

struct train_model {
    struct train_hparams hp;
    struct tensor *tok_embd, *output_norm, *output;
    struct train_layer *layers;    /* [n_layer] */
    int n_tensors;
    struct tensor **tensors;       /* every weight, in file order (flagged TENSOR_FLAG_PARAM) */
    struct tensor_ctx *ctx;
    struct backend_buffer *buf;    /* the weights' host memory */
};

/* Creates the weights (F32, uninitialised, in host memory). NULL (error_set)
 * on an invalid shape or out of memory. */
struct train_model *train_model_new(const struct train_hparams *hp);
void train_model_free(struct train_model *m);

/* GPT-2 style initialisation: matrices ~ N(0, 0.02), the two projections
 * into the residual stream (attn_output, ffn_down) scaled by 1/sqrt(2 n_layer),
 * norm weights 1. Draws from rng in file order. */
void train_model_init_weights(struct train_model *m, struct train_rng *rng);

int64_t train_model_n_params(const struct train_model *m);

/* The graph's inputs for n_batch sequences (created by train_model_inputs_new
 * in a context of the caller's; give them memory before computing). */
struct train_inputs {
    int n_batch;
    struct tensor *tokens;   /* I32 [n_ctx * n_batch]: sequence b is tokens [b*n_ctx, (b+1)*n_ctx) */
    struct tensor *targets;  /* F32 [n_vocab, n_ctx * n_batch]: one-hot next tokens */
    struct tensor *pos;      /* I32 [n_ctx]: 0 .. n_ctx-1 */
    struct tensor *kq_mask;  /* F32 [n_ctx, n_ctx]: 0 where key <= query, -inf above */
};

bool train_inputs_new(struct tensor_ctx *ctx, const struct train_hparams *hp, int n_batch, struct train_inputs *in);
/* Writes pos and kq_mask (they never change). */
void train_inputs_set_constants(const struct train_inputs *in);
/* Writes one batch: windows[b] holds the n_ctx + 1 tokens of sequence b
 * (inputs are tokens 0..n_ctx-1, targets tokens 1..n_ctx). False
 * (error_set) on a token outside the vocabulary. */
bool train_inputs_set_batch(const struct train_inputs *in, const struct train_hparams *hp,
                            const int32_t *const *windows);

/* Builds the forward graph's loss (a scalar F32 tensor) in ctx. NULL
 * (error_set) if an op refuses its operands. */
struct tensor *train_model_build_loss(struct train_model *m, struct tensor_ctx *ctx, const struct train_inputs *in);

/* Sets the llama.* hyperparameter keys of the model in w. */
bool train_hparams_set_gguf(const struct train_hparams *hp, struct gguf_writer *w);

/*
 * Writes the model as a GGUF that the llama loader reads: the keys of
 * vocab_file (its tokenizer.* keys: the SPM vocabulary; general.name is
 * replaced by `name`), the llama.* keys, general.file_type, and the weights:
 * 1-D tensors F32, matrices converted to `type` (F32, F16, or a quantized
 * type with a reference quantizer and rows of whole blocks). False
 * (error_set) if the type is unsuitable or writing fails.
 */
bool train_model_write_gguf(const struct train_model *m, const struct gguf_reader *vocab_file, const char *name,
                            enum ggml_type type, const char *path);

#endif

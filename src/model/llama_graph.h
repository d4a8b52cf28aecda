/*
 * The LLaMA forward pass as a compute graph (b1892's build_llama), for one
 * batch of tokens against the KV cache.
 */
#ifndef LLAMAC_MODEL_LLAMA_GRAPH_H
#define LLAMAC_MODEL_LLAMA_GRAPH_H

#include <stdbool.h>
#include <stdint.h>

#include "model/model.h"
#include "tensor/tensor.h"

/* Context-level settings resolved from llama_context_params and the model. */
struct llm_cparams {
    uint32_t n_ctx;
    uint32_t n_orig_ctx;     /* YaRN original context */
    float rope_freq_base;
    float rope_freq_scale;
    float yarn_ext_factor;
    float yarn_attn_factor;
    float yarn_beta_fast;
    float yarn_beta_slow;
};

/* The cache tensors, one K and one V per layer: K[il] holds n_ctx cells of
 * n_embd_k_gqa values (cell-major), V[il] is stored transposed, n_embd_v_gqa
 * rows of n_ctx values, so a head's values for all cells are contiguous. */
struct llm_kv_tensors {
    struct tensor **k; /* n_layer x [n_embd_k_gqa * n_ctx] */
    struct tensor **v; /* n_layer x [n_embd_v_gqa * n_ctx] */
};

/* The shape of one decode. */
struct llm_batch_shape {
    uint32_t n_tokens;  /* tokens in the batch */
    uint32_t n_outputs; /* rows of logits/embeddings wanted (<= n_tokens) */
    uint32_t n_kv;      /* cache cells attended (a multiple of 32, <= n_ctx) */
    uint32_t kv_head;   /* first cache cell the batch is written to */
    bool use_embd;      /* input is embeddings, not token ids */
};

/* Graph inputs to fill before computing, and results to read after. */
struct llm_graph {
    struct graph *graph;
    struct tensor *inp_tokens;  /* I32 [n_tokens], or NULL with use_embd */
    struct tensor *inp_embd;    /* F32 [n_embd, n_tokens] with use_embd */
    struct tensor *inp_pos;     /* I32 [n_tokens] */
    struct tensor *inp_mask;    /* F32 [n_kv, n_tokens]: 0 or -inf */
    struct tensor *inp_out_ids; /* I32 [n_outputs]: batch rows whose outputs are kept; NULL if all */
    struct tensor *result_norm; /* F32 [n_embd, n_outputs]: final hidden state (embeddings) */
    struct tensor *result;      /* F32 [n_vocab, n_outputs]: logits */
};

/* Builds the forward graph into ctx. False (error_set) if ctx runs out of room. */
bool llm_build_llama(struct tensor_ctx *ctx, const struct llama_model *model, const struct llm_cparams *cp,
                     const struct llm_kv_tensors *kv, const struct llm_batch_shape *shape, struct llm_graph *out);

/* The graph that re-rotates every cached key by its cell's pending delta
 * (after llama_kv_cache_seq_shift/div). inp_shift: I32 [n_ctx]. */
struct llm_shift_graph {
    struct graph *graph;
    struct tensor *inp_shift;
};
bool llm_build_k_shift(struct tensor_ctx *ctx, const struct llama_model *model, const struct llm_cparams *cp,
                       const struct llm_kv_tensors *kv, struct llm_shift_graph *out);

/* Upper bound of graph nodes for a model (sizing tensor contexts). */
int llm_graph_max_nodes(const struct llama_model *model);

#endif

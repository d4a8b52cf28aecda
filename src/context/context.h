/*
 * An inference context: a KV cache, the compute resources to run the model's
 * graph on a batch, and the outputs (logits, embeddings) of the last decode.
 * A context belongs to one thread at a time; its model may be shared.
 */
#ifndef LLAMAC_CONTEXT_CONTEXT_H
#define LLAMAC_CONTEXT_CONTEXT_H

#include <stdbool.h>
#include <stdint.h>

#include "context/kv_cells.h"
#include "llama.h"
#include "model/llama_graph.h"
#include "model/model.h"
#include "sample/rng.h"
#include "sample/sampling.h"

struct context_compute; /* backend, allocator and graph arena (context/compute.c) */

/* An observer of the graphs a context computes (what b1892 later added as
 * cb_eval): for every node, cb(node, true, data) asks whether the observer
 * wants it; each wanted node is passed again as cb(node, false, data) right
 * after it was computed, when it and its sources hold their values (host
 * memory). The graph is then computed in parts, one per wanted node, with
 * results identical to an unobserved run. Returning false from the second
 * call stops the decode, which fails. Used by `llamac imatrix`. */
typedef bool (*context_eval_cb)(struct tensor *node, bool ask, void *data);

/* Per-token arrays (n_batch each), allocated once, for expanding batches that
 * use the legacy all_* fields and for the list of output rows. */
struct batch_scratch {
    llama_pos *pos;
    int32_t *n_seq_id;
    llama_seq_id **seq_id;
    llama_seq_id seq;
    int32_t *out_ids;
};

struct llama_context {
    const struct llama_model *model;

    /* resolved parameters */
    struct llm_cparams cparams;
    uint32_t n_batch;
    uint32_t n_threads;
    uint32_t n_threads_batch;
    uint32_t seed;
    bool logits_all;
    bool embedding;
    enum ggml_type type_k, type_v;

    /* KV cache: cells plus one K and one V tensor per layer in kv_buf */
    struct kv_cells kv;
    struct tensor_ctx *kv_ctx;
    struct llm_kv_tensors kv_tensors;
    struct backend_buffer *kv_buf;

    struct context_compute *compute;
    struct batch_scratch scratch;

    /* outputs of the last decode */
    float *logits;          /* capacity n_vocab * n_batch */
    size_t logits_size;     /* floats currently valid (b1892's logits.size()) */
    int32_t n_logit_rows;   /* rows addressable by llama_get_logits_ith */
    bool *logit_row_valid;  /* n_batch: row i was computed in the last decode */
    float *embedding_out;   /* n_embd when `embedding`, else NULL */

    struct rng_mt19937 rng;
    struct sample_workspace sample_ws; /* scratch for the samplers, reused */

    /* optional: polled during compute; true stops the decode */
    bool (*abort_callback)(void *data);
    void *abort_callback_data;

    /* optional: sees the nodes of every graph computed (context_eval_cb) */
    context_eval_cb eval_callback;
    void *eval_callback_data;

    /* timings (b1892's llama_timings) */
    int64_t t_start_us;
    int64_t t_load_us;
    int64_t t_sample_us;
    int64_t t_p_eval_us;
    int64_t t_eval_us;
    int32_t n_sample;
    int32_t n_p_eval;
    int32_t n_eval;
};

struct llama_context *context_new(const struct llama_model *model, const struct llama_context_params *params);
void context_free(struct llama_context *ctx);

/* llama_decode: 0 ok, 1 no KV slot, < 0 invalid input or compute failure. */
int32_t context_decode(struct llama_context *ctx, const struct llama_batch *batch);

/* Sets (or with NULL removes) the context's graph observer. */
void context_set_eval_callback(struct llama_context *ctx, context_eval_cb cb, void *data);

/* Bytes of the KV buffer as b1892 reports it (the session format stores it). */
size_t context_kv_buf_size(const struct llama_context *ctx);

#endif

#include "context/context.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/backend.h"
#include "backend/cpu/cpu_backend.h"
#include "context/compute.h"
#include "core/cpu_features.h"
#include "core/log.h"
#include "core/timer.h"
#include "quant/quant.h"

/* Context sizes beyond this are refused up front (a 4M-cell KV cache is far
 * beyond any b1892 model's training context). */
#define CONTEXT_MAX_N_CTX (1u << 22)

static bool resolve_params(struct llama_context *ctx, const struct llama_model *model,
                           const struct llama_context_params *p) {
    const struct llama_hparams *hp = &model->hparams;
    struct llm_cparams *cp = &ctx->cparams;

    cp->n_ctx = p->n_ctx == 0 ? hp->n_ctx_train : p->n_ctx;
    ctx->n_batch = p->n_batch;
    if (cp->n_ctx > CONTEXT_MAX_N_CTX) {
        error_set("n_ctx %u is too large (at most %u)", cp->n_ctx, CONTEXT_MAX_N_CTX);
        return false;
    }
    if (ctx->n_batch == 0) {
        error_set("n_batch must be at least 1");
        return false;
    }
    /* 0 threads: one per physical core (b1892 would fail) */
    ctx->n_threads = p->n_threads ? p->n_threads : (uint32_t)cpu_physical_cores();
    ctx->n_threads_batch = p->n_threads_batch ? p->n_threads_batch : (uint32_t)cpu_physical_cores();
    if (ctx->n_threads > 512 || ctx->n_threads_batch > 512) {
        error_set("too many threads (%u, %u): at most 512", ctx->n_threads, ctx->n_threads_batch);
        return false;
    }

    int scaling = p->rope_scaling_type;
    if (scaling == LLAMA_ROPE_SCALING_UNSPECIFIED) scaling = hp->rope_scaling_type_train;
    if (scaling < LLAMA_ROPE_SCALING_NONE || scaling > LLAMA_ROPE_SCALING_MAX_VALUE) {
        error_set("invalid rope_scaling_type %d", p->rope_scaling_type);
        return false;
    }
    cp->rope_freq_base = p->rope_freq_base == 0.0f ? hp->rope_freq_base_train : p->rope_freq_base;
    cp->rope_freq_scale = p->rope_freq_scale == 0.0f ? hp->rope_freq_scale_train : p->rope_freq_scale;
    if (scaling == LLAMA_ROPE_SCALING_NONE) cp->rope_freq_scale = 1.0f;
    cp->n_orig_ctx = p->yarn_orig_ctx ? p->yarn_orig_ctx : hp->n_yarn_orig_ctx ? hp->n_yarn_orig_ctx : hp->n_ctx_train;
    cp->yarn_ext_factor = p->yarn_ext_factor;
    if (cp->yarn_ext_factor < 0.0f) cp->yarn_ext_factor = scaling == LLAMA_ROPE_SCALING_YARN ? 1.0f : 0.0f;
    cp->yarn_attn_factor = p->yarn_attn_factor;
    cp->yarn_beta_fast = p->yarn_beta_fast;
    cp->yarn_beta_slow = p->yarn_beta_slow;
    if (!(cp->rope_freq_base > 0.0f) || !(cp->rope_freq_scale > 0.0f)) {
        error_set("invalid RoPE parameters: freq_base %g, freq_scale %g", cp->rope_freq_base, cp->rope_freq_scale);
        return false;
    }

    if ((p->type_k != GGML_TYPE_F16 && p->type_k != GGML_TYPE_F32) ||
        (p->type_v != GGML_TYPE_F16 && p->type_v != GGML_TYPE_F32)) {
        error_set("unsupported KV cache types %s/%s: use f16 or f32", type_name(p->type_k), type_name(p->type_v));
        return false;
    }
    ctx->type_k = p->type_k;
    ctx->type_v = p->type_v;
    ctx->logits_all = p->logits_all;
    ctx->embedding = p->embedding;
    ctx->seed = rng_seed_resolve(p->seed);
    return true;
}

static bool kv_cache_init(struct llama_context *ctx) {
    const struct llama_hparams *hp = &ctx->model->hparams;
    const uint32_t n_layer = hp->n_layer, n_ctx = ctx->cparams.n_ctx;
    if (!kv_cells_init(&ctx->kv, n_ctx)) return false;
    ctx->kv_ctx = tensor_ctx_new(2 * (size_t)n_layer, 0);
    ctx->kv_tensors.k = calloc(n_layer, sizeof *ctx->kv_tensors.k);
    ctx->kv_tensors.v = calloc(n_layer, sizeof *ctx->kv_tensors.v);
    if (!ctx->kv_ctx || !ctx->kv_tensors.k || !ctx->kv_tensors.v) {
        error_set("out of memory creating the KV cache");
        return false;
    }
    for (uint32_t il = 0; il < n_layer; il++) {
        ctx->kv_tensors.k[il] = tensor_new_1d(ctx->kv_ctx, ctx->type_k, (int64_t)hparams_n_embd_k_gqa(hp) * n_ctx);
        ctx->kv_tensors.v[il] = tensor_new_1d(ctx->kv_ctx, ctx->type_v, (int64_t)hparams_n_embd_v_gqa(hp) * n_ctx);
        tensor_set_name(ctx->kv_tensors.k[il], "cache_k_l%u", il);
        tensor_set_name(ctx->kv_tensors.v[il], "cache_v_l%u", il);
    }
    ctx->kv_buf = backend_alloc_ctx_tensors(ctx->kv_ctx, backend_cpu_buffer_type());
    if (!ctx->kv_buf) return false;
    /* empty cells are masked out, but 0 * garbage could still be NaN */
    backend_buffer_clear(ctx->kv_buf, 0);
    LOG_INFO("KV cache: %u cells, %.2f MiB\n", n_ctx, backend_buffer_size(ctx->kv_buf) / 1048576.0);
    return true;
}

void context_set_eval_callback(struct llama_context *ctx, context_eval_cb cb, void *data) {
    ctx->eval_callback = cb;
    ctx->eval_callback_data = data;
}

size_t context_kv_buf_size(const struct llama_context *ctx) {
    return ctx->kv_buf ? backend_buffer_size(ctx->kv_buf) : 0;
}

/* Sizes the compute buffer for the largest batch against a full cache. */
static bool compute_init(struct llama_context *ctx) {
    const struct llama_model *model = ctx->model;
    uint32_t n_threads = ctx->n_threads > ctx->n_threads_batch ? ctx->n_threads : ctx->n_threads_batch;
    ctx->compute = compute_new((size_t)llm_graph_max_nodes(model) * 4, (int)n_threads);
    if (!ctx->compute) return false;
    uint32_t n_tokens = ctx->n_batch < ctx->cparams.n_ctx ? ctx->n_batch : ctx->cparams.n_ctx;
    struct llm_batch_shape worst = {
        .n_tokens = n_tokens, .n_outputs = n_tokens, .n_kv = ctx->cparams.n_ctx, .kv_head = 0,
    };
    struct llm_graph g;
    if (!llm_build_llama(compute_arena(ctx->compute), model, &ctx->cparams, &ctx->kv_tensors, &worst, &g) ||
        !compute_reserve(ctx->compute, g.graph)) {
        return false;
    }
    struct llm_shift_graph sg;
    if (!llm_build_k_shift(compute_arena(ctx->compute), model, &ctx->cparams, &ctx->kv_tensors, &sg) ||
        !compute_reserve(ctx->compute, sg.graph)) {
        return false;
    }
    LOG_INFO("compute buffer: %.2f MiB\n", compute_buffer_size(ctx->compute) / 1048576.0);
    return true;
}

struct llama_context *context_new(const struct llama_model *model, const struct llama_context_params *params) {
    if (!model) {
        error_set("llama_new_context_with_model: model is NULL");
        return NULL;
    }
    struct llama_context *ctx = calloc(1, sizeof *ctx);
    if (!ctx) {
        error_set("out of memory");
        return NULL;
    }
    ctx->model = model;
    ctx->t_start_us = model->t_start_us;
    ctx->t_load_us = model->t_load_us;
    if (!resolve_params(ctx, model, params)) goto fail;
    rng_mt19937_seed(&ctx->rng, ctx->seed);

    if (!model->hparams.vocab_only) {
        const size_t n_vocab = model->hparams.n_vocab;
        ctx->logits = malloc(n_vocab * ctx->n_batch * sizeof *ctx->logits);
        ctx->logit_row_valid = calloc(ctx->n_batch, sizeof *ctx->logit_row_valid);
        if (ctx->embedding) ctx->embedding_out = calloc(model->hparams.n_embd, sizeof *ctx->embedding_out);
        struct batch_scratch *s = &ctx->scratch;
        s->pos = malloc(ctx->n_batch * sizeof *s->pos);
        s->n_seq_id = malloc(ctx->n_batch * sizeof *s->n_seq_id);
        s->seq_id = malloc(ctx->n_batch * sizeof *s->seq_id);
        s->out_ids = malloc(ctx->n_batch * sizeof *s->out_ids);
        if (!ctx->logits || !ctx->logit_row_valid || (ctx->embedding && !ctx->embedding_out) ||
            !s->pos || !s->n_seq_id || !s->seq_id || !s->out_ids) {
            error_set("out of memory allocating the logits buffer (%zu x %u floats)", n_vocab, ctx->n_batch);
            goto fail;
        }
        if (!kv_cache_init(ctx) || !compute_init(ctx)) goto fail;
    }
    return ctx;

fail:
    context_free(ctx);
    return NULL;
}

void context_free(struct llama_context *ctx) {
    if (!ctx) return;
    compute_free(ctx->compute);
    backend_buffer_free(ctx->kv_buf);
    tensor_ctx_free(ctx->kv_ctx);
    free(ctx->kv_tensors.k);
    free(ctx->kv_tensors.v);
    kv_cells_free(&ctx->kv);
    free(ctx->logits);
    free(ctx->logit_row_valid);
    free(ctx->embedding_out);
    free(ctx->scratch.pos);
    free(ctx->scratch.n_seq_id);
    free(ctx->scratch.seq_id);
    free(ctx->scratch.out_ids);
    sample_workspace_free(&ctx->sample_ws);
    free(ctx);
}

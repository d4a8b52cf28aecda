#include "llama_graph.h"

#include <math.h>

#include "core/log.h"
#include "quant/quant.h"

int llm_graph_max_nodes(const struct llama_model *model) {
    const struct llama_hparams *hp = &model->hparams;
    /* ~30 nodes per layer for attention and a dense FFN, ~10 per routed expert */
    return 64 + (int)hp->n_layer * (48 + 12 * (int)hp->n_expert_used);
}

static struct tensor *build_norm(struct tensor_ctx *ctx, struct tensor *x, struct tensor *weight, float eps) {
    return op_mul(ctx, op_rms_norm(ctx, x, eps), weight);
}

static struct tensor *build_linear(struct tensor_ctx *ctx, struct tensor *w, struct tensor *bias, struct tensor *x) {
    struct tensor *y = op_mul_mat(ctx, w, x);
    return bias ? op_add(ctx, y, bias) : y;
}

/* SwiGLU: down(silu(gate(x)) * up(x)). The two products of x go into the
 * graph one after the other, so that the CPU backend quantizes x once for
 * both (NULL when the graph is full). */
static struct tensor *build_ffn(struct tensor_ctx *ctx, struct graph *gf, const struct llama_layer *l, struct tensor *x) {
    struct tensor *up = op_mul_mat(ctx, l->ffn_up, x), *gate = op_mul_mat(ctx, l->ffn_gate, x);
    if (!graph_build_forward(gf, gate) || !graph_build_forward(gf, up)) return NULL;
    return op_mul_mat(ctx, l->ffn_down, op_mul(ctx, op_silu(ctx, gate), up));
}

/* Mixtral-style experts as b1892: softmax over the router, the top n_expert_used
 * experts, their probabilities renormalised, weighted sum of expert FFNs. */
static struct tensor *build_moe(struct tensor_ctx *ctx, const struct llama_hparams *hp, const struct llama_layer *l,
                                struct tensor *x, int64_t n_tokens) {
    const int n_expert = (int)hp->n_expert, n_used = (int)hp->n_expert_used;
    struct tensor *logits = op_mul_mat(ctx, l->ffn_gate_inp, x);         /* [n_expert, n_tokens] */
    struct tensor *probs = op_soft_max(ctx, logits, NULL, 1.0f);
    struct tensor *selected = op_top_k(ctx, probs, n_used);               /* I32 [n_used, n_tokens] */
    struct tensor *weights = op_get_rows(ctx, tensor_reshape_3d(ctx, probs, 1, n_expert, n_tokens), selected);
    weights = tensor_reshape_2d(ctx, weights, n_used, n_tokens);          /* [n_used, n_tokens] */
    weights = op_div(ctx, weights, op_sum_rows(ctx, weights));

    struct tensor *out = NULL;
    for (int i = 0; i < n_used; i++) {
        struct tensor *up = op_mul_mat_id(ctx, l->ffn_up_exp, n_expert, selected, i, x);
        struct tensor *gate = op_silu(ctx, op_mul_mat_id(ctx, l->ffn_gate_exp, n_expert, selected, i, x));
        struct tensor *y = op_mul_mat_id(ctx, l->ffn_down_exp, n_expert, selected, i, op_mul(ctx, up, gate));
        struct tensor *w = tensor_view_2d(ctx, weights, 1, n_tokens, weights->nb[1], (size_t)i * weights->nb[0]);
        y = op_mul(ctx, y, w);
        out = out ? op_add(ctx, out, y) : y;
    }
    return out;
}

bool llm_build_llama(struct tensor_ctx *ctx, const struct llama_model *model, const struct llm_cparams *cp,
                     const struct llm_kv_tensors *kv, const struct llm_batch_shape *shape, struct llm_graph *out) {
    const struct llama_hparams *hp = &model->hparams;
    const int64_t n_embd = hp->n_embd, n_head = hp->n_head, n_head_kv = hp->n_head_kv;
    const int64_t head_k = hp->n_embd_head_k, head_v = hp->n_embd_head_v;
    const int64_t n_embd_k_gqa = hparams_n_embd_k_gqa(hp), n_embd_v_gqa = hparams_n_embd_v_gqa(hp);
    const int64_t n_tokens = shape->n_tokens, n_kv = shape->n_kv, n_ctx = cp->n_ctx;
    const float kq_scale = 1.0f / sqrtf((float)head_v);
    const float eps = hp->f_norm_rms_eps;

    struct graph *gf = graph_new(ctx, llm_graph_max_nodes(model));
    if (!gf) return false;
    *out = (struct llm_graph){ .graph = gf };

    struct tensor *inpL;
    if (shape->use_embd) {
        out->inp_embd = tensor_new_2d(ctx, GGML_TYPE_F32, n_embd, n_tokens);
        inpL = out->inp_embd;
    } else {
        out->inp_tokens = tensor_new_1d(ctx, GGML_TYPE_I32, n_tokens);
        inpL = op_get_rows(ctx, model->tok_embd, out->inp_tokens);
    }
    out->inp_pos = tensor_new_1d(ctx, GGML_TYPE_I32, n_tokens);
    out->inp_mask = tensor_new_2d(ctx, GGML_TYPE_F32, n_kv, n_tokens);
    struct tensor *inputs[] = { out->inp_tokens, out->inp_embd, out->inp_pos, out->inp_mask };
    for (size_t i = 0; i < sizeof inputs / sizeof inputs[0]; i++) {
        if (inputs[i]) inputs[i]->flags |= TENSOR_FLAG_INPUT;
    }

    for (uint32_t il = 0; il < hp->n_layer; il++) {
        const struct llama_layer *l = &model->layers[il];
        struct tensor *k_cache = kv->k[il], *v_cache = kv->v[il];
        struct tensor *inpSA = inpL;

        struct tensor *cur = build_norm(ctx, inpL, l->attn_norm, eps);
        struct tensor *q = build_linear(ctx, l->wq, l->bq, cur);
        struct tensor *k = build_linear(ctx, l->wk, l->bk, cur);
        struct tensor *v = build_linear(ctx, l->wv, l->bv, cur);
        /* consecutive in the graph: the CPU backend quantizes cur once for the three */
        if (!graph_build_forward(gf, q) || !graph_build_forward(gf, k) || !graph_build_forward(gf, v)) return false;
        q = op_rope(ctx, tensor_reshape_3d(ctx, q, head_k, n_head, n_tokens), out->inp_pos, (int)hp->n_rot,
                    ROPE_MODE_NORMAL, 0, (int)cp->n_orig_ctx, cp->rope_freq_base, cp->rope_freq_scale,
                    cp->yarn_ext_factor, cp->yarn_attn_factor, cp->yarn_beta_fast, cp->yarn_beta_slow);
        k = op_rope(ctx, tensor_reshape_3d(ctx, k, head_k, n_head_kv, n_tokens), out->inp_pos, (int)hp->n_rot,
                    ROPE_MODE_NORMAL, 0, (int)cp->n_orig_ctx, cp->rope_freq_base, cp->rope_freq_scale,
                    cp->yarn_ext_factor, cp->yarn_attn_factor, cp->yarn_beta_fast, cp->yarn_beta_slow);

        /* store this batch's keys and values in its cache cells (before attention reads them) */
        size_t k_row, v_elem = tensor_element_size(v_cache);
        if (!type_row_size(k_cache->type, n_embd_k_gqa, &k_row)) return false;
        struct tensor *k_dst = tensor_view_1d(ctx, k_cache, n_tokens * n_embd_k_gqa, k_row * shape->kv_head);
        struct tensor *v_dst = tensor_view_2d(ctx, v_cache, n_tokens, n_embd_v_gqa, (size_t)n_ctx * v_elem,
                                              shape->kv_head * v_elem);
        struct tensor *v_t = tensor_transpose(ctx, tensor_reshape_2d(ctx, v, n_embd_v_gqa, n_tokens));
        if (!graph_build_forward(gf, op_cpy(ctx, k, k_dst)) || !graph_build_forward(gf, op_cpy(ctx, v_t, v_dst))) {
            return false;
        }

        /* attention over the first n_kv cells; heads broadcast over KV heads (GQA) */
        size_t k_head_row;
        if (!type_row_size(k_cache->type, head_k, &k_head_row)) return false;
        struct tensor *qp = tensor_permute(ctx, q, 0, 2, 1, 3);                    /* [head_k, n_tokens, n_head] */
        struct tensor *kc = tensor_view_3d(ctx, k_cache, head_k, n_kv, n_head_kv, k_row, k_head_row, 0);
        struct tensor *vc = tensor_view_3d(ctx, v_cache, n_kv, head_v, n_head_kv, (size_t)n_ctx * v_elem,
                                           (size_t)n_ctx * head_v * v_elem, 0);
        if (k_cache->type == GGML_TYPE_F16 && v_cache->type == GGML_TYPE_F16) {
            /* the nodes below in one, same bits (scores stay in cache) */
            cur = op_attention(ctx, kc, qp, vc, out->inp_mask, kq_scale);          /* [head_v, n_head, n_tokens] */
        } else {
            struct tensor *kq = op_mul_mat_masked(ctx, kc, qp, out->inp_mask);     /* [n_kv, n_tokens, n_head] */
            kq = op_soft_max(ctx, kq, out->inp_mask, kq_scale);
            struct tensor *kqv = op_mul_mat(ctx, vc, kq);                          /* [head_v, n_tokens, n_head] */
            cur = op_cont(ctx, tensor_permute(ctx, kqv, 0, 2, 1, 3));             /* [head_v, n_head, n_tokens] */
        }
        cur = tensor_reshape_2d(ctx, cur, head_v * n_head, n_tokens);
        cur = build_linear(ctx, l->wo, l->bo, cur);

        struct tensor *ffn_inp = op_add(ctx, cur, inpSA);
        cur = build_norm(ctx, ffn_inp, l->ffn_norm, eps);
        cur = hp->n_expert == 0 ? build_ffn(ctx, gf, l, cur) : build_moe(ctx, hp, l, cur, n_tokens);
        if (!cur) return false;
        inpL = op_add(ctx, cur, ffn_inp);
    }

    /* only the rows whose outputs are wanted go through the output layer */
    if (shape->n_outputs < shape->n_tokens) {
        out->inp_out_ids = tensor_new_1d(ctx, GGML_TYPE_I32, shape->n_outputs);
        out->inp_out_ids->flags |= TENSOR_FLAG_INPUT;
        inpL = op_get_rows(ctx, inpL, out->inp_out_ids);
    }
    out->result_norm = build_norm(ctx, inpL, model->output_norm, eps);
    out->result = op_mul_mat(ctx, model->output, out->result_norm);
    out->result_norm->flags |= TENSOR_FLAG_OUTPUT;
    out->result->flags |= TENSOR_FLAG_OUTPUT;
    tensor_set_name(out->result_norm, "result_norm");
    tensor_set_name(out->result, "result_output");
    if (!graph_build_forward(gf, out->result)) {
        error_set("compute graph too large");
        return false;
    }
    return true;
}

bool llm_build_k_shift(struct tensor_ctx *ctx, const struct llama_model *model, const struct llm_cparams *cp,
                       const struct llm_kv_tensors *kv, struct llm_shift_graph *out) {
    const struct llama_hparams *hp = &model->hparams;
    const int64_t head_k = hp->n_embd_head_k, n_head_kv = hp->n_head_kv, n_ctx = cp->n_ctx;
    struct graph *gf = graph_new(ctx, 8 * (int)hp->n_layer + 8);
    if (!gf) return false;
    out->graph = gf;
    out->inp_shift = tensor_new_1d(ctx, GGML_TYPE_I32, n_ctx);
    out->inp_shift->flags |= TENSOR_FLAG_INPUT;
    for (uint32_t il = 0; il < hp->n_layer; il++) {
        struct tensor *k_cache = kv->k[il];
        size_t head_row, row;
        if (!type_row_size(k_cache->type, head_k, &head_row) || !type_row_size(k_cache->type, head_k * n_head_kv, &row)) {
            return false;
        }
        struct tensor *view = tensor_view_3d(ctx, k_cache, head_k, n_head_kv, n_ctx, head_row, row, 0);
        struct tensor *rotated = op_rope(ctx, view, out->inp_shift, (int)hp->n_rot, ROPE_MODE_NORMAL, 0,
                                         (int)cp->n_orig_ctx, cp->rope_freq_base, cp->rope_freq_scale,
                                         cp->yarn_ext_factor, cp->yarn_attn_factor, cp->yarn_beta_fast,
                                         cp->yarn_beta_slow);
        if (!graph_build_forward(gf, op_cpy(ctx, rotated, view))) {
            error_set("compute graph too large");
            return false;
        }
    }
    return true;
}

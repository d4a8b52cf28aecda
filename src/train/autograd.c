/*
 * Reverse-mode differentiation of a graph: see autograd.h for the rules.
 */
#include "train/autograd.h"

#include <stdint.h>
#include <stdlib.h>

#include "backend/backend.h"
#include "core/log.h"

/* ---- the set of tensors whose gradient is wanted ------------------------------ */

struct ag_set {
    struct tensor **slots;
    size_t size;
};

static bool ag_set_init(struct ag_set *s, size_t n) {
    s->size = n * 2 + 1;
    s->slots = calloc(s->size, sizeof *s->slots);
    if (!s->slots) error_set("autograd: out of memory");
    return s->slots != NULL;
}

static size_t ag_set_slot(const struct ag_set *s, const struct tensor *t) {
    size_t i = (size_t)(((uintptr_t)t >> 4) % s->size);
    while (s->slots[i] && s->slots[i] != t) i = (i + 1) % s->size;
    return i;
}

static void ag_set_add(struct ag_set *s, struct tensor *t) { s->slots[ag_set_slot(s, t)] = t; }
static bool ag_set_has(const struct ag_set *s, const struct tensor *t) { return t && s->slots[ag_set_slot(s, t)] == t; }

/* ---- helpers ------------------------------------------------------------------- */

/* Adds contribution c to src's gradient (c NULL: a constructor failed). */
static bool ag_accumulate(struct tensor_ctx *ctx, struct tensor *src, struct tensor *c) {
    if (!c) return false;
    src->grad = src->grad ? op_add(ctx, src->grad, c) : c;
    return src->grad != NULL;
}

static struct tensor *ag_contiguous(struct tensor_ctx *ctx, struct tensor *t) {
    return t && !tensor_is_contiguous(t) ? op_cont(ctx, t) : t;
}

/* g summed down to the shape of `like` where `like` was broadcast (repeated). */
static struct tensor *ag_reduce_to(struct tensor_ctx *ctx, struct tensor *g, struct tensor *like) {
    if (!g || tensor_same_shape(g, like)) return g;
    return op_repeat_back(ctx, g, like);
}

/* A zero tensor of a's shape, made from one element of g (finite, unlike a). */
static struct tensor *ag_zeros_like(struct tensor_ctx *ctx, struct tensor *a, struct tensor *g) {
    return op_repeat(ctx, op_scale(ctx, tensor_view_1d(ctx, g, 1, 0), 0.0f), a);
}

/* mul_mat's weight a broadcast over dimension 2 of b (GQA: slice i of b uses
 * slice i / r of a): the out_prod of shape [k, n, r * q, m3] summed over each
 * group of r consecutive slices. */
static struct tensor *ag_mul_mat_weight_grad(struct tensor_ctx *ctx, struct tensor *a, struct tensor *op) {
    if (!op || tensor_same_shape(op, a)) return op;
    if (a->ne[2] == 1 && a->ne[3] == 1) return op_repeat_back(ctx, op, a);
    if (a->ne[3] != op->ne[3]) {
        error_set("autograd: mul_mat with '%s' broadcast over dimension 3 has no backward rule", a->name);
        return NULL;
    }
    const int64_t r = op->ne[2] / a->ne[2];
    struct tensor *groups = tensor_reshape_4d(ctx, op, a->ne[0] * a->ne[1], r, a->ne[2], a->ne[3]);
    if (!groups) return NULL;
    /* only the shape of `like` is used */
    struct tensor *like = tensor_new_4d(ctx, GGML_TYPE_F32, a->ne[0] * a->ne[1], 1, a->ne[2], a->ne[3]);
    struct tensor *sum = op_repeat_back(ctx, groups, like);
    return tensor_reshape_4d(ctx, sum, a->ne[0], a->ne[1], a->ne[2], a->ne[3]);
}

/* ---- one node ------------------------------------------------------------------ */

/* Passes node->grad to the sources of node that are in `want`. */
static bool ag_backward_node(struct tensor_ctx *ctx, struct tensor *node, const struct ag_set *want) {
    struct tensor *a = node->src[0], *b = node->src[1];
    struct tensor *g = node->grad;
    const bool need_a = ag_set_has(want, a), need_b = ag_set_has(want, b);

    switch (node->op) {
        case OP_ADD:
            if (need_a && !ag_accumulate(ctx, a, g)) return false;
            if (need_b && !ag_accumulate(ctx, b, ag_reduce_to(ctx, g, b))) return false;
            return true;
        case OP_SUB:
            if (need_a && !ag_accumulate(ctx, a, g)) return false;
            if (need_b) {
                struct tensor *c = ag_reduce_to(ctx, g, b);
                b->grad = b->grad ? op_sub(ctx, b->grad, c) : op_scale(ctx, c, -1.0f);
                if (!b->grad) return false;
            }
            return true;
        case OP_ADD1:
            if (need_a && !ag_accumulate(ctx, a, g)) return false;
            if (need_b && !ag_accumulate(ctx, b, tensor_reshape_4d(ctx, op_sum(ctx, g), b->ne[0], b->ne[1],
                                                                   b->ne[2], b->ne[3]))) {
                return false;
            }
            return true;
        case OP_MUL:
            if (need_a && !ag_accumulate(ctx, a, op_mul(ctx, g, b))) return false;
            if (need_b && !ag_accumulate(ctx, b, ag_reduce_to(ctx, op_mul(ctx, g, a), b))) return false;
            return true;
        case OP_SCALE:
            return !need_a || ag_accumulate(ctx, a, op_scale(ctx, g, tensor_op_param_f32(node, 0)));
        case OP_SQR:
            return !need_a || ag_accumulate(ctx, a, op_scale(ctx, op_mul(ctx, a, g), 2.0f));
        case OP_SUM:
        case OP_SUM_ROWS:
            return !need_a || ag_accumulate(ctx, a, op_repeat(ctx, g, a));
        case OP_REPEAT:
            return !need_a || ag_accumulate(ctx, a, op_repeat_back(ctx, g, a));
        case OP_DUP:
        case OP_CONT:
            return !need_a || ag_accumulate(ctx, a, g);
        case OP_RESHAPE:
            return !need_a || ag_accumulate(ctx, a, tensor_reshape_4d(ctx, ag_contiguous(ctx, g), a->ne[0], a->ne[1],
                                                                      a->ne[2], a->ne[3]));
        case OP_VIEW: {
            if (!need_a) return true;
            if (!tensor_is_contiguous(a)) {
                error_set("autograd: view of the non-contiguous '%s' has no backward rule", a->name);
                return false;
            }
            size_t offset;
            __builtin_memcpy(&offset, node->op_params, sizeof offset);
            struct tensor *base = a->grad ? a->grad : ag_zeros_like(ctx, a, g);
            a->grad = op_acc(ctx, ag_contiguous(ctx, base), g, node->nb[1], node->nb[2], node->nb[3], offset);
            return a->grad != NULL;
        }
        case OP_PERMUTE:
        case OP_TRANSPOSE: {
            if (!need_a) return true;
            /* node dim axes[i] is a's dim i: permute it back */
            int inv[4];
            for (int i = 0; i < 4; i++) inv[node->op_params[i]] = i;
            return ag_accumulate(ctx, a, tensor_permute(ctx, g, inv[0], inv[1], inv[2], inv[3]));
        }
        case OP_GET_ROWS:
            if (need_b) break;
            return !need_a || ag_accumulate(ctx, a, op_get_rows_back(ctx, ag_contiguous(ctx, g), b, a));
        case OP_RMS_NORM:
            return !need_a || ag_accumulate(ctx, a, op_rms_norm_back(ctx, a, g, tensor_op_param_f32(node, 0)));
        case OP_MUL_MAT: {
            /* node = a^T b: [n, m] from a [k, n] and b [k, m] */
            if (need_a && !ag_accumulate(ctx, a, ag_mul_mat_weight_grad(ctx, a, op_out_prod(ctx, b, g)))) {
                return false;
            }
            if (need_b) {
                struct tensor *c;
                if (a->ne[2] == b->ne[2] && a->ne[3] == b->ne[3]) {
                    c = op_out_prod(ctx, a, tensor_transpose(ctx, g));
                } else {
                    /* mul_mat broadcasts a the same way in the product with the gradient */
                    struct tensor *gp = g && g->nb[0] != sizeof(float) ? op_cont(ctx, g) : g;
                    c = op_mul_mat(ctx, op_cont(ctx, tensor_transpose(ctx, a)), gp);
                    if (c) c->op_params[0] = node->op_params[0]; /* the forward product's summation order */
                }
                if (!ag_accumulate(ctx, b, c)) return false;
            }
            return true;
        }
        case OP_ROPE: {
            if (need_b) break;
            if (!need_a) return true;
            const int32_t *p = node->op_params;
            return ag_accumulate(ctx, a, op_rope_back(ctx, g, b, p[1], p[2], p[3], p[4], tensor_op_param_f32(node, 5),
                                                      tensor_op_param_f32(node, 6), tensor_op_param_f32(node, 7),
                                                      tensor_op_param_f32(node, 8), tensor_op_param_f32(node, 9),
                                                      tensor_op_param_f32(node, 10)));
        }
        case OP_SOFT_MAX: {
            if (need_b) break;
            if (!need_a) return true;
            const float scale = tensor_op_param_f32(node, 0);
            struct tensor *c = op_soft_max_back(ctx, g, node);
            return ag_accumulate(ctx, a, scale == 1.0f ? c : op_scale(ctx, c, scale));
        }
        case OP_DIAG_MASK_INF:
            return !need_a || ag_accumulate(ctx, a, op_diag_mask_zero(ctx, g, node->op_params[0]));
        case OP_UNARY:
            if (node->op_params[0] != UNARY_SILU) break;
            return !need_a || ag_accumulate(ctx, a, op_silu_back(ctx, a, g));
        case OP_CROSS_ENTROPY_LOSS:
            if (need_b) break;
            return !need_a || ag_accumulate(ctx, a, op_cross_entropy_loss_back(ctx, a, b, g));
        default:
            break;
    }
    error_set("autograd: no backward rule for %s ('%s') on the way from a parameter to the loss",
              tensor_op_name(node->op), node->name);
    return false;
}

/* ---- the graph ------------------------------------------------------------------ */

bool autograd_build_backward(struct tensor_ctx *ctx, struct graph *g, struct tensor *loss, struct tensor *seed) {
    if (!loss || !seed) {
        error_set("autograd: no loss or seed tensor");
        return false;
    }
    if (!tensor_same_shape(loss, seed) || seed->type != GGML_TYPE_F32 || !seed->data) {
        error_set("autograd: the seed must be an F32 tensor with data, shaped like the loss");
        return false;
    }
    const int n_nodes = g->n_nodes, n_leafs = g->n_leafs;
    struct ag_set want;
    if (!ag_set_init(&want, (size_t)n_nodes + (size_t)n_leafs)) return false;

    /* the tensors that depend on a parameter, in the graph's (topological) order */
    for (int i = 0; i < n_leafs; i++) {
        g->leafs[i]->grad = NULL;
        if (g->leafs[i]->flags & TENSOR_FLAG_PARAM) ag_set_add(&want, g->leafs[i]);
    }
    for (int i = 0; i < n_nodes; i++) {
        struct tensor *node = g->nodes[i];
        node->grad = NULL;
        for (int s = 0; s < TENSOR_MAX_SRC; s++) {
            if (ag_set_has(&want, node->src[s])) {
                ag_set_add(&want, node);
                break;
            }
        }
    }
    bool ok = true;
    if (!ag_set_has(&want, loss)) {
        error_set("autograd: '%s' does not depend on any parameter (TENSOR_FLAG_PARAM) of the graph", loss->name);
        ok = false;
    }
    if (ok) loss->grad = seed;
    for (int i = n_nodes - 1; ok && i >= 0; i--) {
        struct tensor *node = g->nodes[i];
        if (node->grad && ag_set_has(&want, node)) ok = ag_backward_node(ctx, node, &want);
    }
    free(want.slots);
    if (!ok) return false;

    for (int i = 0; i < n_leafs; i++) {
        struct tensor *p = g->leafs[i];
        if (!(p->flags & TENSOR_FLAG_PARAM) || !p->grad) continue;
        /* the caller reads the gradient's bytes: give it memory of its own */
        if (backend_op_is_view(p->grad->op) || p->grad->op == OP_NONE || !tensor_is_contiguous(p->grad)) {
            p->grad = op_cont(ctx, p->grad);
            if (!p->grad) return false;
        }
        p->grad->flags |= TENSOR_FLAG_OUTPUT;
        tensor_set_name(p->grad, "grad %s", p->name);
        if (!graph_build_forward(g, p->grad)) return false;
    }
    return true;
}

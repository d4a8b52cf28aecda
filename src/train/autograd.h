/*
 * Reverse-mode differentiation of a compute graph (the role of b1892's
 * ggml_build_backward): given a graph that computes a scalar loss from
 * trainable parameters, append the ops that compute the loss's gradient with
 * respect to every parameter.
 *
 *     // params: leafs flagged TENSOR_FLAG_PARAM (weights with data)
 *     struct graph *g = graph_new(ctx, capacity);
 *     graph_build_forward(g, loss);
 *     autograd_build_backward(ctx, g, loss, seed);  // seed: scalar with data, e.g. 1.0
 *     // allocate and compute g; then each param p holds dLoss/dp * seed in p->grad
 *
 * How: the nodes of g are visited in reverse order; each node that depends on
 * a parameter passes its gradient to its sources with the expressions below
 * (built from tensor.h's ops, so the backward pass runs on the same kernels
 * and allocator as the forward pass). A tensor used several times gets the
 * sum of the contributions. The gradient of each tensor is recorded in its
 * `grad` field; tensors that do not depend on a parameter get none.
 *
 *   add, sub      da = G, db = +/- G summed over b's broadcast (repeat_back)
 *   add1          da = G, db = sum(G)
 *   mul           da = G * b, db = repeat_back(G * a)
 *   scale         da = s G
 *   sqr           da = 2 a G
 *   sum, sum_rows da = repeat(G)
 *   repeat        da = repeat_back(G)
 *   dup, cont     da = G
 *   reshape       da = G reshaped (made contiguous first)
 *   view          da = G added into a zero tensor at the view's place (acc)
 *   permute, transpose   da = G permuted back
 *   get_rows      da = get_rows_back(G)
 *   rms_norm      da = rms_norm_back(a, G)
 *   mul_mat       da = out_prod(b, G) (summed over broadcast slices),
 *                 db = out_prod(a, G^T), or mul_mat(a^T, G) when a broadcasts
 *                 (with the forward product's summation order)
 *   rope          da = rope_back(G) (the inverse rotation)
 *   soft_max      da = scale * soft_max_back(G, y) (the mask gets no gradient)
 *   diag_mask_inf da = diag_mask_zero(G)
 *   silu          da = silu_back(a, G)
 *   cross_entropy_loss   dlogits = cross_entropy_loss_back(logits, targets, G)
 *
 * Any other op on a path from a parameter to the loss is an error.
 */
#ifndef LLAMAC_TRAIN_AUTOGRAD_H
#define LLAMAC_TRAIN_AUTOGRAD_H

#include <stdbool.h>

#include "tensor/tensor.h"

/*
 * Appends the backward pass of `loss` to g, which must already hold loss's
 * forward pass (graph_build_forward). `seed` is the gradient of the loss (same
 * shape as loss, with data: typically 1.0, or 1/n to average accumulated
 * micro-batches); it is read when the graph is computed. New tensors are
 * created in ctx (without data: place them with the graph allocator).
 *
 * Afterwards every leaf of g flagged TENSOR_FLAG_PARAM that the loss depends
 * on has p->grad: a contiguous F32 tensor of p's shape, a node of g flagged
 * TENSOR_FLAG_OUTPUT (so allocators keep it). Parameters the loss does not
 * depend on keep grad == NULL.
 *
 * False (error_set) when an op on the way has no backward rule, an op
 * constructor refuses (shapes), or g's capacity is exceeded. Leaves the
 * `grad` fields of g's tensors set either way; rebuild the graph to retry.
 */
bool autograd_build_backward(struct tensor_ctx *ctx, struct graph *g, struct tensor *loss, struct tensor *seed);

#endif

/*
 * AdamW with a linear warm-up and cosine decay of the learning rate, and
 * clipping of the gradient by its global norm.
 *
 * For update t (1-based) with gradient g (the mean over the accumulated
 * micro-batches, scaled by min(1, grad_clip / ||g||) when grad_clip > 0):
 *     m = beta1 m + (1 - beta1) g          v = beta2 v + (1 - beta2) g^2
 *     w -= lr_t (m / (1 - beta1^t)) / (sqrt(v / (1 - beta2^t)) + eps)
 *     w -= lr_t weight_decay w             (matrices only; norm weights are not decayed)
 * lr_t rises linearly from lr / warmup to lr over the first `warmup` updates,
 * then follows a cosine from lr down to lr_min at update n_steps.
 *
 * Everything is computed in a fixed order in one thread, so the same inputs
 * give the same bits.
 */
#ifndef LLAMAC_TRAIN_TRAIN_OPT_H
#define LLAMAC_TRAIN_TRAIN_OPT_H

#include <stdbool.h>
#include <stdint.h>

#include "tensor/tensor.h"

struct train_opt_params {
    float lr;            /* peak learning rate */
    float lr_min;        /* at the end of the cosine */
    int64_t warmup;      /* updates of linear warm-up */
    int64_t n_steps;     /* updates in all (the cosine's length) */
    float beta1, beta2, eps;
    float weight_decay;
    float grad_clip;     /* global norm; 0: no clipping */
};

void train_opt_params_default(struct train_opt_params *p);
/* False (error_set) on values outside their ranges. */
bool train_opt_params_validate(const struct train_opt_params *p);

/* Learning rate of update `step` (0-based). */
float train_opt_lr(const struct train_opt_params *p, int64_t step);

/* AdamW state for a list of F32 parameters (contiguous, with host data). */
struct train_adamw {
    int n_params;
    struct tensor **params;  /* not owned */
    float *m, *v;            /* moments of all parameters, concatenated in order */
    int64_t n_elements;
    int64_t t;               /* updates done */
};

struct train_adamw *train_adamw_new(struct tensor **params, int n_params);
void train_adamw_free(struct train_adamw *o);

/* The L2 norm of a gradient laid out like the moments (computed in double). */
double train_grad_norm(const float *grad, int64_t n);

/* One update with gradient `grad` (n_elements floats, parameters in order;
 * scaled in place by the clipping). Returns the gradient's norm before clipping. */
double train_adamw_update(struct train_adamw *o, const struct train_opt_params *p, float *grad);

#endif

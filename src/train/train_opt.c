/*
 * AdamW, learning-rate schedule, gradient clipping: see train_opt.h.
 */
#include "train/train_opt.h"

#include <math.h>
#include <stdlib.h>

#include "core/log.h"

void train_opt_params_default(struct train_opt_params *p) {
    *p = (struct train_opt_params){
        .lr = 2e-3f,
        .lr_min = 1e-4f,
        .warmup = 100,
        .n_steps = 1000,
        .beta1 = 0.9f,
        .beta2 = 0.95f,
        .eps = 1e-8f,
        .weight_decay = 0.1f,
        .grad_clip = 1.0f,
    };
}

bool train_opt_params_validate(const struct train_opt_params *p) {
    if (!(p->lr > 0.0f) || !(p->lr_min >= 0.0f) || p->lr_min > p->lr) {
        error_set("optimizer: learning rate %g must be > 0 and >= the minimum %g", p->lr, p->lr_min);
        return false;
    }
    if (p->n_steps < 1 || p->warmup < 0 || p->warmup > p->n_steps) {
        error_set("optimizer: %lld steps with %lld warm-up steps", (long long)p->n_steps, (long long)p->warmup);
        return false;
    }
    if (!(p->beta1 >= 0.0f && p->beta1 < 1.0f) || !(p->beta2 >= 0.0f && p->beta2 < 1.0f) || !(p->eps > 0.0f)) {
        error_set("optimizer: beta1 %g and beta2 %g must be in [0, 1), eps %g > 0", p->beta1, p->beta2, p->eps);
        return false;
    }
    if (!(p->weight_decay >= 0.0f) || !(p->grad_clip >= 0.0f)) {
        error_set("optimizer: weight decay %g and gradient clip %g must be >= 0", p->weight_decay, p->grad_clip);
        return false;
    }
    return true;
}

float train_opt_lr(const struct train_opt_params *p, int64_t step) {
    if (step < p->warmup) return p->lr * (float)(step + 1) / (float)p->warmup;
    const int64_t decay_steps = p->n_steps - p->warmup;
    if (decay_steps <= 0) return p->lr;
    double progress = (double)(step - p->warmup) / (double)decay_steps;
    if (progress > 1.0) progress = 1.0;
    const double cosine = 0.5 * (1.0 + cos(3.14159265358979323846 * progress));
    return (float)(p->lr_min + (p->lr - p->lr_min) * cosine);
}

struct train_adamw *train_adamw_new(struct tensor **params, int n_params) {
    struct train_adamw *o = calloc(1, sizeof *o);
    if (!o) {
        error_set("optimizer: out of memory");
        return NULL;
    }
    o->params = params;
    o->n_params = n_params;
    for (int i = 0; i < n_params; i++) o->n_elements += tensor_nelements(params[i]);
    o->m = calloc((size_t)o->n_elements, sizeof(float));
    o->v = calloc((size_t)o->n_elements, sizeof(float));
    if (!o->m || !o->v) {
        error_set("optimizer: out of memory for the moments of %lld parameters", (long long)o->n_elements);
        train_adamw_free(o);
        return NULL;
    }
    return o;
}

void train_adamw_free(struct train_adamw *o) {
    if (!o) return;
    free(o->m);
    free(o->v);
    free(o);
}

double train_grad_norm(const float *grad, int64_t n) {
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++) sum += (double)grad[i] * (double)grad[i];
    return sqrt(sum);
}

double train_adamw_update(struct train_adamw *o, const struct train_opt_params *p, float *grad) {
    const double norm = train_grad_norm(grad, o->n_elements);
    const float clip = p->grad_clip > 0.0f && norm > p->grad_clip ? (float)(p->grad_clip / norm) : 1.0f;
    const float lr = train_opt_lr(p, o->t);
    o->t++;
    const float b1 = p->beta1, b2 = p->beta2;
    const float bc1 = 1.0f / (1.0f - powf(b1, (float)o->t)), bc2 = 1.0f / (1.0f - powf(b2, (float)o->t));
    int64_t off = 0;
    for (int i = 0; i < o->n_params; i++) {
        struct tensor *t = o->params[i];
        float *w = t->data;
        const int64_t n = tensor_nelements(t);
        const float decay = tensor_n_dims(t) >= 2 ? 1.0f - lr * p->weight_decay : 1.0f;
        float *m = o->m + off, *v = o->v + off, *g = grad + off;
        for (int64_t j = 0; j < n; j++) {
            const float gj = g[j] * clip;
            g[j] = gj;
            m[j] = b1 * m[j] + (1.0f - b1) * gj;
            v[j] = b2 * v[j] + (1.0f - b2) * gj * gj;
            const float step = (m[j] * bc1) / (sqrtf(v[j] * bc2) + p->eps);
            w[j] = w[j] * decay - lr * step;
        }
        off += n;
    }
    return norm;
}

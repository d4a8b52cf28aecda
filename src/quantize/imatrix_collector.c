/*
 * Collecting an importance matrix while a model runs (quantize.h): the
 * observer b1892's imatrix tool hooked into ggml's matrix products.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "core/log.h"
#include "quantize.h"
#include "tensor/tensor.h"

/* b1892 skips smaller products: generation one token at a time says little. */
#define IMATRIX_MIN_ROWS 16

struct imatrix_stat {
    char name[TENSOR_MAX_NAME];
    float *sums;     /* [n_values] */
    int32_t n_values;
    int32_t ncall;
};

struct imatrix_collector {
    bool collect_output;
    struct imatrix_stat *stats; /* in the order first seen */
    size_t n, cap;
};

struct imatrix_collector *imatrix_collector_new(bool collect_output) {
    struct imatrix_collector *c = calloc(1, sizeof *c);
    if (!c) {
        error_set("out of memory");
        return NULL;
    }
    c->collect_output = collect_output;
    return c;
}

void imatrix_collector_free(struct imatrix_collector *c) {
    if (!c) return;
    for (size_t i = 0; i < c->n; i++) free(c->stats[i].sums);
    free(c->stats);
    free(c);
}

size_t imatrix_collector_count(const struct imatrix_collector *c) {
    return c->n;
}

int32_t imatrix_collector_ncall(const struct imatrix_collector *c) {
    int32_t most = 0;
    for (size_t i = 0; i < c->n; i++) {
        if (c->stats[i].ncall > most) most = c->stats[i].ncall;
    }
    return most;
}

static bool imatrix_wants_weight(const struct imatrix_collector *c, const struct tensor *w) {
    return strncmp(w->name, "blk.", 4) == 0 || (c->collect_output && strcmp(w->name, "output.weight") == 0);
}

static bool imatrix_wants_input(const struct tensor *x) {
    return x->type == GGML_TYPE_F32 && x->ne[1] >= IMATRIX_MIN_ROWS && x->nb[0] == sizeof(float);
}

static struct imatrix_stat *imatrix_stat_get(struct imatrix_collector *c, const char *name, int64_t n_values) {
    for (size_t i = 0; i < c->n; i++) {
        struct imatrix_stat *s = &c->stats[i];
        if (strcmp(s->name, name) != 0) continue;
        if (s->n_values != n_values) {
            error_set("imatrix: '%s' was multiplied with %lld-wide inputs before, now %lld", name,
                      (long long)s->n_values, (long long)n_values);
            return NULL;
        }
        return s;
    }
    if (n_values > INT32_MAX) {
        error_set("imatrix: '%s' has %lld input columns, more than the file format holds", name, (long long)n_values);
        return NULL;
    }
    if (c->n == c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 64;
        struct imatrix_stat *bigger = realloc(c->stats, cap * sizeof *bigger);
        if (!bigger) {
            error_set("out of memory");
            return NULL;
        }
        c->stats = bigger;
        c->cap = cap;
    }
    struct imatrix_stat *s = &c->stats[c->n];
    *s = (struct imatrix_stat){ .n_values = (int32_t)n_values };
    snprintf(s->name, sizeof s->name, "%s", name);
    s->sums = calloc((size_t)n_values, sizeof *s->sums);
    if (!s->sums) {
        error_set("out of memory");
        return NULL;
    }
    c->n++;
    return s;
}

static bool imatrix_host_readable(const struct tensor *t) {
    if (t->data && (!t->buffer || backend_buffer_is_host(t->buffer))) return true;
    error_set("imatrix: '%s' is not in host memory", t->name);
    return false;
}

/* Adds one product: every row of x (ne[1] rows of ne[0] floats), squared, column by column. */
static bool imatrix_accumulate(struct imatrix_collector *c, const struct tensor *w, const struct tensor *x) {
    struct imatrix_stat *s = imatrix_stat_get(c, w->name, x->ne[0]);
    if (!s || !imatrix_host_readable(x)) return false;
    s->ncall++;
    for (int64_t row = 0; row < x->ne[1]; row++) {
        const float *v = (const float *)((const char *)x->data + row * x->nb[1]);
        /* b1892's build fused this multiply-add (the shared synth-k.imatrix is bit-exact only so) */
        for (int32_t j = 0; j < s->n_values; j++) s->sums[j] = fmaf(v[j], v[j], s->sums[j]);
    }
    return true;
}

/* Whether at least one row of a MUL_MAT_ID node uses `expert` (ids were checked host-readable). */
static bool imatrix_expert_used(const struct tensor *node, int expert) {
    const struct tensor *ids = node->src[0];
    const int id = node->op_params[0]; /* which of the ids columns this product uses */
    for (int64_t r = 0; r < ids->ne[1]; r++) {
        if (*(const int32_t *)((const char *)ids->data + r * ids->nb[1] + id * ids->nb[0]) == expert) return true;
    }
    return false;
}

bool imatrix_collector_observe(struct tensor *node, bool ask, void *collector) {
    struct imatrix_collector *c = collector;
    if (node->op == OP_MUL_MAT) {
        const bool wanted = imatrix_wants_weight(c, node->src[0]) && imatrix_wants_input(node->src[1]);
        return ask ? wanted : imatrix_accumulate(c, node->src[0], node->src[1]);
    }
    if (node->op == OP_MUL_MAT_ID) {
        const int n_as = node->op_params[1];
        bool wanted = imatrix_wants_input(node->src[1]);
        for (int e = 0; wanted && e < n_as; e++) wanted = imatrix_wants_weight(c, node->src[2 + e]);
        if (ask) return wanted;
        if (!imatrix_host_readable(node->src[0])) return false;
        for (int e = 0; e < n_as; e++) {
            if (imatrix_expert_used(node, e) && !imatrix_accumulate(c, node->src[2 + e], node->src[1])) return false;
        }
        return true;
    }
    return false;
}

bool imatrix_collector_write(const struct imatrix_collector *c, const char *path) {
    struct quantize_imatrix_record *records = calloc(c->n ? c->n : 1, sizeof *records);
    if (!records) {
        error_set("out of memory");
        return false;
    }
    for (size_t i = 0; i < c->n; i++) {
        const struct imatrix_stat *s = &c->stats[i];
        records[i] = (struct quantize_imatrix_record){
            .name = s->name, .ncall = s->ncall, .n_values = s->n_values, .sums = s->sums,
        };
    }
    const bool ok = quantize_imatrix_write(path, records, c->n);
    free(records);
    return ok;
}

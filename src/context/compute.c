#include "context/compute.h"

#include <stdlib.h>

#include "backend/backend.h"
#include "backend/cpu/cpu_backend.h"
#include "core/log.h"
#include "graph/alloc.h"

struct context_compute {
    size_t max_tensors;
    struct tensor_ctx *arena; /* the graph being built or run */
    struct backend *cpu;
    struct graph_allocr *alloc;
};

struct context_compute *compute_new(size_t max_tensors, int n_threads) {
    struct context_compute *cc = calloc(1, sizeof *cc);
    if (!cc) {
        error_set("out of memory");
        return NULL;
    }
    cc->max_tensors = max_tensors;
    cc->cpu = backend_cpu_new(n_threads);
    cc->alloc = cc->cpu ? graph_allocr_new(backend_cpu_buffer_type()) : NULL;
    if (!cc->alloc) {
        compute_free(cc);
        return NULL;
    }
    return cc;
}

void compute_free(struct context_compute *cc) {
    if (!cc) return;
    tensor_ctx_free(cc->arena);
    graph_allocr_free(cc->alloc);
    backend_free(cc->cpu);
    free(cc);
}

struct tensor_ctx *compute_arena(struct context_compute *cc) {
    if (cc->arena) {
        tensor_ctx_reset(cc->arena);
    } else {
        cc->arena = tensor_ctx_new(cc->max_tensors, 0);
    }
    return cc->arena;
}

bool compute_reserve(struct context_compute *cc, struct graph *g) {
    return graph_allocr_reserve(cc->alloc, g);
}

bool compute_alloc(struct context_compute *cc, struct graph *g) {
    return graph_allocr_alloc_graph(cc->alloc, g);
}

bool compute_run(struct context_compute *cc, struct graph *g, int n_threads, bool (*abort_cb)(void *data),
                 void *abort_data) {
    if (!backend_cpu_set_n_threads(cc->cpu, n_threads)) return false;
    backend_cpu_set_abort_callback(cc->cpu, abort_cb, abort_data);
    return backend_graph_compute(cc->cpu, g);
}

size_t compute_buffer_size(const struct context_compute *cc) {
    return graph_allocr_reserved_size(cc->alloc, 0);
}

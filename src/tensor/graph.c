/*
 * Compute graphs: the ops needed for an output, in dependency order.
 *
 * A tensor with an op (views included, so an allocator sees which memory a
 * view shares) is a node; a tensor without one (weights, inputs) is a leaf.
 * Each tensor appears once; a set of visited tensors (open addressing on the
 * pointer) makes building linear in the graph's size.
 */
#include "tensor/tensor_impl.h"

#include <assert.h>
#include <stdint.h>
#include <string.h>

#include "core/checked.h"
#include "core/log.h"

struct graph *graph_new(struct tensor_ctx *ctx, int capacity) {
    if (capacity <= 0) {
        error_set("graph_new: capacity %d", capacity);
        return NULL;
    }
    /* up to `capacity` nodes and as many leafs; the set stays at most half full */
    const size_t visited_size = (size_t)capacity * 4 + 1;
    size_t bytes = sizeof(struct graph);
    size_t lists, set;
    if (!ck_mul_size((size_t)capacity * 2, sizeof(struct tensor *), &lists) ||
        !ck_mul_size(visited_size, sizeof(struct tensor *), &set) || !ck_add_size(bytes, lists, &bytes) ||
        !ck_add_size(bytes, set, &bytes)) {
        error_set("graph_new: capacity %d too large", capacity);
        return NULL;
    }
    struct graph *g = tensor_ctx_alloc_block(ctx, bytes);
    if (!g) {
        error_set("graph_new: out of memory for %d nodes", capacity);
        return NULL;
    }
    struct tensor **p = (struct tensor **)(g + 1);
    g->capacity = capacity;
    g->nodes = p;
    g->leafs = p + capacity;
    g->visited = p + 2 * (size_t)capacity;
    g->visited_size = visited_size;
    return g;
}

void graph_reset(struct graph *g) {
    g->n_nodes = 0;
    g->n_leafs = 0;
    memset(g->visited, 0, g->visited_size * sizeof *g->visited);
}

struct graph graph_view(struct graph *g, int i0, int i1) {
    assert(0 <= i0 && i0 <= i1 && i1 <= g->n_nodes);
    return (struct graph){ .n_nodes = i1 - i0, .capacity = i1 - i0, .nodes = g->nodes + i0 };
}

/* Inserts t into the visited set; false if it was already there. */
static bool graph_visit(struct graph *g, struct tensor *t) {
    size_t i = (size_t)(((uintptr_t)t >> 4) % g->visited_size);
    while (g->visited[i]) {
        if (g->visited[i] == t) return false;
        i = (i + 1) % g->visited_size;
    }
    g->visited[i] = t;
    return true;
}

static bool graph_add(struct graph *g, struct tensor *t) {
    if (!graph_visit(g, t)) return true;
    for (int i = 0; i < TENSOR_MAX_SRC; i++) {
        if (t->src[i] && !graph_add(g, t->src[i])) return false;
    }
    if ((t->op == OP_NONE ? g->n_leafs : g->n_nodes) >= g->capacity) {
        error_set("graph capacity of %d %s exceeded", g->capacity, t->op == OP_NONE ? "leafs" : "nodes");
        return false;
    }
    if (t->op == OP_NONE) {
        if (!t->name[0]) tensor_set_name(t, "leaf_%d", g->n_leafs);
        g->leafs[g->n_leafs++] = t;
    } else {
        if (!t->name[0]) tensor_set_name(t, "node_%d", g->n_nodes);
        g->nodes[g->n_nodes++] = t;
    }
    return true;
}

bool graph_build_forward(struct graph *g, struct tensor *out) {
    if (!out) {
        /* a failed op constructor already said why (error_last) */
        if (!error_last()[0]) error_set("graph_build_forward: no output tensor");
        return false;
    }
    return graph_add(g, out);
}

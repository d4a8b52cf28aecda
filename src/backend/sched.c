#include "backend/sched.h"

#include <assert.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "graph/alloc.h"
#include "graph/tensor_map.h"

/* A run of consecutive nodes on one backend. In the scheduler's graph its
 * input copies come first, then its nodes. */
struct sched_split {
    int backend_id;
    int first_copy, n_copies; /* into sg_nodes */
    int first_node, n_nodes;  /* into sg_nodes */
};

/* node->src[j] pointed at orig before the copy replaced it. */
struct sched_rewrite {
    struct tensor *node;
    int j;
    struct tensor *orig;
};

struct backend_sched {
    int n_backends;
    struct backend *backends[SCHED_MAX_BACKENDS];
    struct graph_allocr *galloc;

    /* per tensor of the current graph, by map slot */
    struct tensor_map map;
    int *backend_of;        /* backend id, -1 while unassigned */
    struct tensor **copies; /* [slot * n_backends + b]: its copy on backend b */
    size_t slot_capacity;

    struct { struct tensor *node; int backend_id; } *pins;
    int n_pins, cap_pins;

    struct sched_split *splits;
    int n_splits, cap_splits;
    struct tensor *copy_pool; /* the copy tensors */
    int n_copies, cap_copies;
    struct sched_rewrite *rewrites;
    int n_rewrites, cap_rewrites;

    /* the graph given to the allocator: copies and nodes, split by split */
    struct graph sgraph;
    int *sg_node_ids, *sg_leaf_ids;
    int cap_sg_nodes, cap_sg_node_ids, cap_sg_leafs;

    struct graph *prepared; /* the graph alloc_graph last placed */
};

struct backend_sched *backend_sched_new(struct backend *const *backends, int n_backends) {
    if (n_backends < 1 || n_backends > SCHED_MAX_BACKENDS) {
        error_set("scheduler: %d backends (1 to %d supported)", n_backends, SCHED_MAX_BACKENDS);
        return NULL;
    }
    struct backend_sched *sched = calloc(1, sizeof *sched);
    if (!sched) {
        error_set("out of memory creating a scheduler");
        return NULL;
    }
    struct backend_buffer_type *bufts[SCHED_MAX_BACKENDS];
    sched->n_backends = n_backends;
    for (int i = 0; i < n_backends; i++) {
        sched->backends[i] = backends[i];
        bufts[i] = backend_default_buffer_type(backends[i]);
    }
    sched->galloc = graph_allocr_new_n(bufts, n_backends);
    if (!sched->galloc) {
        free(sched);
        return NULL;
    }
    return sched;
}

void backend_sched_free(struct backend_sched *sched) {
    if (!sched) return;
    graph_allocr_free(sched->galloc);
    tensor_map_free(&sched->map);
    free(sched->backend_of);
    free(sched->copies);
    free(sched->pins);
    free(sched->splits);
    free(sched->copy_pool);
    free(sched->rewrites);
    free(sched->sgraph.nodes);
    free(sched->sg_node_ids);
    free(sched->sg_leaf_ids);
    free(sched);
}

static int sched_backend_id(const struct backend_sched *sched, const struct backend *backend) {
    for (int i = 0; i < sched->n_backends; i++) {
        if (sched->backends[i] == backend) return i;
    }
    return -1;
}

bool backend_sched_set_tensor_backend(struct backend_sched *sched, struct tensor *node, struct backend *backend) {
    int id = sched_backend_id(sched, backend);
    if (id < 0) {
        error_set("scheduler: backend %s is not one of the scheduler's", backend_name(backend));
        return false;
    }
    if (!backend_op_is_view(node->op) && !backend_supports_op(backend, node)) {
        error_set("scheduler: backend %s cannot compute %s node '%s'", backend_name(backend),
                  tensor_op_name(node->op), node->name);
        return false;
    }
    if (sched->n_pins == sched->cap_pins) {
        int cap = sched->cap_pins ? 2 * sched->cap_pins : 16;
        void *pins = realloc(sched->pins, (size_t)cap * sizeof *sched->pins);
        if (!pins) {
            error_set("out of memory pinning a node to a backend");
            return false;
        }
        sched->pins = pins;
        sched->cap_pins = cap;
    }
    sched->pins[sched->n_pins].node = node;
    sched->pins[sched->n_pins].backend_id = id;
    sched->n_pins++;
    return true;
}

/* ---- growing the per-graph arrays (only when a graph is larger than any before) ---- */

static bool grow(void **p, int *cap, int need, size_t elem) {
    if (need <= *cap) return true;
    void *q = malloc((size_t)need * elem);
    if (!q) {
        error_set("scheduler: out of memory for a graph of this size");
        return false;
    }
    free(*p);
    *p = q;
    *cap = need;
    return true;
}

static bool sched_make_room(struct backend_sched *sched, const struct graph *g) {
    size_t n_keys = 2 * (size_t)g->n_nodes + (size_t)g->n_leafs;
    if (!tensor_map_reserve(&sched->map, n_keys)) return false;
    if (sched->slot_capacity < sched->map.capacity) {
        size_t cap = sched->map.capacity;
        int *backend_of = malloc(cap * sizeof *backend_of);
        struct tensor **copies = malloc(cap * (size_t)sched->n_backends * sizeof *copies);
        if (!backend_of || !copies) {
            free(backend_of);
            free(copies);
            error_set("scheduler: out of memory for a graph of %d nodes", g->n_nodes);
            return false;
        }
        free(sched->backend_of);
        free(sched->copies);
        sched->backend_of = backend_of;
        sched->copies = copies;
        sched->slot_capacity = cap;
    }
    return grow((void **)&sched->splits, &sched->cap_splits, g->n_nodes + 1, sizeof *sched->splits) &&
           grow((void **)&sched->sg_leaf_ids, &sched->cap_sg_leafs, g->n_leafs + 1, sizeof *sched->sg_leaf_ids);
}

static size_t sched_slot(struct backend_sched *sched, const struct tensor *t) {
    bool inserted;
    size_t slot = tensor_map_insert(&sched->map, t, &inserted);
    assert(slot != TENSOR_MAP_NONE); /* sched_make_room counted every tensor */
    if (inserted) {
        sched->backend_of[slot] = -1;
        for (int b = 0; b < sched->n_backends; b++) sched->copies[slot * (size_t)sched->n_backends + b] = NULL;
    }
    return slot;
}

static int *sched_backend_of(struct backend_sched *sched, const struct tensor *t) {
    return &sched->backend_of[sched_slot(sched, t)];
}

/* ---- step 1: assigning backends ----------------------------------------------------- */

/* The memory a tensor reads: its view source's, or its own. */
static const struct tensor *tensor_root(const struct tensor *t) {
    return t->view_src ? t->view_src : t;
}

/* Whether backend id can read t's memory, t having had data before the graph. */
static bool sched_can_use_memory(const struct backend_sched *sched, int id, const struct tensor *t) {
    struct backend_buffer *buf = backend_tensor_buffer(t);
    if (buf) return backend_buft_supports_backend(backend_buffer_get_type(buf), sched->backends[id]);
    return backend_buft_is_host(backend_default_buffer_type(sched->backends[id]));
}

/* The first backend that can use the memory of t (which has data), or -1 with an error. */
static int sched_backend_for_memory(const struct backend_sched *sched, const struct tensor *t) {
    for (int i = 0; i < sched->n_backends; i++) {
        if (sched_can_use_memory(sched, i, t)) return i;
    }
    error_set("scheduler: tensor '%s' is in memory none of the backends can use", t->name);
    return -1;
}

static bool sched_can_read(struct backend_sched *sched, int id, const struct tensor *src) {
    const struct tensor *root = tensor_root(src);
    if (root->data) return sched_can_use_memory(sched, id, root);
    return *sched_backend_of(sched, src) == id;
}

static int sched_pick_backend(struct backend_sched *sched, struct tensor *node) {
    /* writes into memory that exists already (op_cpy into the KV cache): compute there */
    if (node->data || node->view_src) {
        const struct tensor *root = tensor_root(node);
        int id = root->data ? sched_backend_for_memory(sched, root) : *sched_backend_of(sched, root);
        if (root->data && id < 0) return -1;
        if (id >= 0) {
            if (!backend_supports_op(sched->backends[id], node)) {
                error_set("scheduler: backend %s holds the memory %s node '%s' writes into but cannot compute it",
                          backend_name(sched->backends[id]), tensor_op_name(node->op), node->name);
                return -1;
            }
            return id;
        }
        /* an input not placed yet: the rules below pick, and the input follows */
    }
    /* where its weights are */
    for (int j = 0; j < TENSOR_MAX_SRC; j++) {
        const struct tensor *src = node->src[j];
        if (!src) continue;
        const struct tensor *root = tensor_root(src);
        struct backend_buffer *buf = backend_tensor_buffer(root);
        if (!root->data || !buf || backend_buffer_get_usage(buf) != BUFFER_USAGE_WEIGHTS) continue;
        int id = sched_backend_for_memory(sched, root);
        if (id >= 0 && backend_supports_op(sched->backends[id], node)) return id;
    }
    for (int i = 0; i < sched->n_backends; i++) {
        if (backend_supports_op(sched->backends[i], node)) return i;
    }
    error_set("scheduler: no backend can compute %s node '%s'", tensor_op_name(node->op), node->name);
    return -1;
}

static bool sched_assign_backends(struct backend_sched *sched, struct graph *g) {
    for (int i = 0; i < sched->n_pins; i++) {
        *sched_backend_of(sched, sched->pins[i].node) = sched->pins[i].backend_id;
    }
    for (int i = 0; i < g->n_leafs; i++) {
        struct tensor *leaf = g->leafs[i];
        if (leaf->data && (*sched_backend_of(sched, leaf) = sched_backend_for_memory(sched, leaf)) < 0) return false;
    }
    for (int i = 0; i < g->n_nodes; i++) {
        struct tensor *node = g->nodes[i];
        if (backend_op_is_view(node->op)) continue;
        int *id = sched_backend_of(sched, node);
        if (*id < 0 && (*id = sched_pick_backend(sched, node)) < 0) return false;
        /* inputs live where they are first read */
        for (int j = 0; j < TENSOR_MAX_SRC; j++) {
            if (!node->src[j]) continue;
            const struct tensor *root = tensor_root(node->src[j]);
            int *root_id = sched_backend_of(sched, root);
            if (!root->data && root->op == OP_NONE && *root_id < 0) *root_id = *id;
        }
    }
    /* views compute nothing: they are where their memory is */
    for (int i = 0; i < g->n_nodes; i++) {
        struct tensor *node = g->nodes[i];
        if (!backend_op_is_view(node->op)) continue;
        int *id = sched_backend_of(sched, node);
        if (*id >= 0) continue;
        const struct tensor *root = tensor_root(node);
        if (root->data) {
            if ((*id = sched_backend_for_memory(sched, root)) < 0) return false;
        } else {
            int *root_id = sched_backend_of(sched, root);
            if (*root_id < 0) *root_id = sched->n_backends - 1; /* an input nothing computes with */
            *id = *root_id;
        }
    }
    for (int i = 0; i < g->n_leafs; i++) {
        int *id = sched_backend_of(sched, g->leafs[i]);
        if (*id < 0) *id = sched->n_backends - 1;
    }
    return true;
}

/* ---- steps 2 and 3: splits and copies ------------------------------------------------- */

/* A split starts at each compute node whose backend differs from the one
 * before; views join the split they are in (leading ones the first). */
static void sched_cut_splits(struct backend_sched *sched, struct graph *g) {
    sched->n_splits = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        struct tensor *node = g->nodes[i];
        if (backend_op_is_view(node->op)) continue;
        int id = *sched_backend_of(sched, node);
        if (sched->n_splits == 0) {
            sched->splits[sched->n_splits++] = (struct sched_split){ .backend_id = id, .first_node = 0 };
        } else if (sched->splits[sched->n_splits - 1].backend_id != id) {
            sched->splits[sched->n_splits++] = (struct sched_split){ .backend_id = id, .first_node = i };
        }
    }
    if (sched->n_splits == 0 && g->n_nodes > 0) { /* nothing but views */
        sched->splits[sched->n_splits++] =
            (struct sched_split){ .backend_id = *sched_backend_of(sched, g->nodes[0]), .first_node = 0 };
    }
    for (int s = 0; s < sched->n_splits; s++) {
        int end = s + 1 < sched->n_splits ? sched->splits[s + 1].first_node : g->n_nodes;
        sched->splits[s].n_nodes = end - sched->splits[s].first_node;
    }
}

static struct tensor *sched_new_copy(struct backend_sched *sched, struct tensor *src, int id) {
    assert(sched->n_copies < sched->cap_copies);
    struct tensor *c = &sched->copy_pool[sched->n_copies++];
    memset(c, 0, sizeof *c);
    c->type = src->type;
    memcpy(c->ne, src->ne, sizeof c->ne);
    memcpy(c->nb, src->nb, sizeof c->nb);
    c->op = OP_NONE;
    c->src[0] = src; /* keeps the source alive until the copy is made */
    snprintf(c->name, sizeof c->name, "%.40s#%s", src->name, backend_name(sched->backends[id]));
    return c;
}

static bool sched_add_copies(struct backend_sched *sched, struct graph *g) {
    /* an upper bound first, so the pools are sized before any pointer into them is handed out */
    int need = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        struct tensor *node = g->nodes[i];
        if (backend_op_is_view(node->op)) continue;
        int id = *sched_backend_of(sched, node);
        for (int j = 0; j < TENSOR_MAX_SRC; j++) {
            if (node->src[j] && !sched_can_read(sched, id, node->src[j])) need++;
        }
    }
    int n_sg_max = g->n_nodes + need + 1;
    if (!grow((void **)&sched->copy_pool, &sched->cap_copies, need, sizeof *sched->copy_pool) ||
        !grow((void **)&sched->rewrites, &sched->cap_rewrites, need, sizeof *sched->rewrites) ||
        !grow((void **)&sched->sgraph.nodes, &sched->cap_sg_nodes, n_sg_max, sizeof *sched->sgraph.nodes) ||
        !grow((void **)&sched->sg_node_ids, &sched->cap_sg_node_ids, n_sg_max, sizeof *sched->sg_node_ids)) {
        return false;
    }

    sched->n_copies = 0;
    sched->n_rewrites = 0;
    int n_sg = 0;
    for (int s = 0; s < sched->n_splits; s++) {
        struct sched_split *split = &sched->splits[s];
        int id = split->backend_id;
        split->first_copy = n_sg;
        for (int i = split->first_node; i < split->first_node + split->n_nodes; i++) {
            struct tensor *node = g->nodes[i];
            if (backend_op_is_view(node->op)) continue;
            for (int j = 0; j < TENSOR_MAX_SRC; j++) {
                struct tensor *src = node->src[j];
                if (!src || sched_can_read(sched, id, src)) continue;
                struct tensor **copy = &sched->copies[sched_slot(sched, src) * (size_t)sched->n_backends + id];
                if (!*copy) {
                    *copy = sched_new_copy(sched, src, id);
                    sched->sg_node_ids[n_sg] = id;
                    sched->sgraph.nodes[n_sg++] = *copy;
                }
                sched->rewrites[sched->n_rewrites++] = (struct sched_rewrite){ node, j, src };
                node->src[j] = *copy;
            }
        }
        split->n_copies = n_sg - split->first_copy;
        int first_node = n_sg;
        for (int i = split->first_node; i < split->first_node + split->n_nodes; i++) {
            sched->sg_node_ids[n_sg] = id;
            sched->sgraph.nodes[n_sg++] = g->nodes[i];
        }
        split->first_node = first_node;
    }
    sched->sgraph.n_nodes = n_sg;
    sched->sgraph.capacity = sched->cap_sg_nodes;
    sched->sgraph.leafs = g->leafs;
    sched->sgraph.n_leafs = g->n_leafs;
    for (int i = 0; i < g->n_leafs; i++) sched->sg_leaf_ids[i] = *sched_backend_of(sched, g->leafs[i]);
    return true;
}

static void sched_undo_rewrites(struct backend_sched *sched) {
    for (int i = sched->n_rewrites - 1; i >= 0; i--) {
        sched->rewrites[i].node->src[sched->rewrites[i].j] = sched->rewrites[i].orig;
    }
    sched->n_rewrites = 0;
}

static bool sched_split_graph(struct backend_sched *sched, struct graph *g) {
    sched->prepared = NULL;
    bool ok = sched_make_room(sched, g) && sched_assign_backends(sched, g);
    sched->n_pins = 0;
    if (!ok) return false;
    sched_cut_splits(sched, g);
    return sched_add_copies(sched, g);
}

bool backend_sched_reserve(struct backend_sched *sched, struct graph *g) {
    if (!sched_split_graph(sched, g)) return false;
    bool ok = graph_allocr_reserve_n(sched->galloc, &sched->sgraph, sched->sg_node_ids, sched->sg_leaf_ids);
    sched_undo_rewrites(sched);
    return ok;
}

bool backend_sched_alloc_graph(struct backend_sched *sched, struct graph *g) {
    if (!sched_split_graph(sched, g)) return false;
    if (!graph_allocr_alloc_graph_n(sched->galloc, &sched->sgraph, sched->sg_node_ids, sched->sg_leaf_ids)) {
        sched_undo_rewrites(sched);
        return false;
    }
    sched->prepared = g;
    return true;
}

bool backend_sched_graph_compute(struct backend_sched *sched, struct graph *g) {
    if (sched->prepared != g) {
        error_set("scheduler: compute a graph after backend_sched_alloc_graph placed it");
        return false;
    }
    for (int s = 0; s < sched->n_splits; s++) {
        const struct sched_split *split = &sched->splits[s];
        struct backend *backend = sched->backends[split->backend_id];
        for (int i = split->first_copy; i < split->first_copy + split->n_copies; i++) {
            struct tensor *copy = sched->sgraph.nodes[i];
            if (!backend_tensor_copy(copy->src[0], copy)) return false;
        }
        struct graph part = {
            .n_nodes = split->n_nodes,
            .capacity = split->n_nodes,
            .nodes = sched->sgraph.nodes + split->first_node,
        };
        if (!backend_graph_compute(backend, &part)) return false;
        /* the next split's copies read what this one wrote */
        backend_synchronize(backend);
    }
    return true;
}

int backend_sched_n_splits(const struct backend_sched *sched) {
    return sched->n_splits;
}

int backend_sched_n_copies(const struct backend_sched *sched) {
    return sched->n_copies;
}

struct backend *backend_sched_tensor_backend(const struct backend_sched *sched, const struct tensor *t) {
    size_t slot = tensor_map_find(&sched->map, t);
    if (slot == TENSOR_MAP_NONE || sched->backend_of[slot] < 0) return NULL;
    return sched->backends[sched->backend_of[slot]];
}

size_t backend_sched_buffer_size(const struct backend_sched *sched, struct backend *backend) {
    int id = sched_backend_id(sched, backend);
    return id < 0 ? 0 : graph_allocr_reserved_size(sched->galloc, id);
}

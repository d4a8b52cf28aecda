#include "graph/alloc.h"

#include <assert.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/checked.h"
#include "core/log.h"
#include "graph/tensor_map.h"

/* ---- one buffer's address space: a best-fit free list ------------------------------- */

struct arena_block {
    size_t offset, size;
};

/* Free blocks sorted by offset; the last one is the unbounded tail past
 * everything handed out so far. */
struct arena {
    size_t alignment;
    struct arena_block *free_blocks;
    int n_free;
    int cap_free;
    size_t max_size; /* the high-water mark of this plan */
};

static void arena_reset(struct arena *a) {
    a->free_blocks[0] = (struct arena_block){ 0, SIZE_MAX / 2 };
    a->n_free = 1;
    a->max_size = 0;
}

/* size is already a multiple of the alignment. */
static size_t arena_alloc(struct arena *a, size_t size) {
    int best = a->n_free - 1;
    size_t best_size = SIZE_MAX;
    for (int i = 0; i < a->n_free - 1; i++) {
        if (a->free_blocks[i].size >= size && a->free_blocks[i].size < best_size) {
            best = i;
            best_size = a->free_blocks[i].size;
        }
    }
    struct arena_block *b = &a->free_blocks[best];
    size_t offset = b->offset;
    b->offset += size;
    b->size -= size;
    if (b->size == 0 && best != a->n_free - 1) {
        memmove(b, b + 1, (size_t)(a->n_free - best - 1) * sizeof *b);
        a->n_free--;
    }
    if (offset + size > a->max_size) a->max_size = offset + size;
    return offset;
}

static void arena_free(struct arena *a, size_t offset, size_t size) {
    if (size == 0) return;
    int i = 0;
    while (i < a->n_free && a->free_blocks[i].offset < offset) i++;
    bool merge_prev = i > 0 && a->free_blocks[i - 1].offset + a->free_blocks[i - 1].size == offset;
    bool merge_next = i < a->n_free && offset + size == a->free_blocks[i].offset;
    if (merge_prev && merge_next) {
        a->free_blocks[i - 1].size += size + a->free_blocks[i].size;
        memmove(&a->free_blocks[i], &a->free_blocks[i + 1], (size_t)(a->n_free - i - 1) * sizeof *a->free_blocks);
        a->n_free--;
    } else if (merge_prev) {
        a->free_blocks[i - 1].size += size;
    } else if (merge_next) {
        a->free_blocks[i].offset = offset;
        a->free_blocks[i].size += size;
    } else {
        assert(a->n_free < a->cap_free);
        memmove(&a->free_blocks[i + 1], &a->free_blocks[i], (size_t)(a->n_free - i) * sizeof *a->free_blocks);
        a->free_blocks[i] = (struct arena_block){ offset, size };
        a->n_free++;
    }
}

/* ---- the allocator ----------------------------------------------------------------------- */

/* What the plan knows about one tensor (indexed by its tensor_map slot). */
struct alloc_info {
    int n_children;  /* consumers (nodes with it as a source) not yet run */
    int n_views;     /* views of it whose consumers have not all run */
    int buffer_id;
    bool placed;     /* given an address by this plan */
    bool owns_block; /* its block is still to be freed by it */
    size_t offset;
    size_t size;     /* the block's size (padded) */
};

struct graph_allocr {
    int n_bufs;
    struct backend_buffer_type **bufts;
    struct backend_buffer **buffers;
    size_t *reserved;
    struct arena *arenas;

    struct tensor_map map;
    struct alloc_info *info; /* map.capacity entries */
    size_t info_capacity;
};

struct graph_allocr *graph_allocr_new_n(struct backend_buffer_type *const *bufts, int n_bufs) {
    assert(n_bufs >= 1);
    struct graph_allocr *ga = calloc(1, sizeof *ga);
    if (!ga) goto oom;
    ga->n_bufs = n_bufs;
    ga->bufts = calloc((size_t)n_bufs, sizeof *ga->bufts);
    ga->buffers = calloc((size_t)n_bufs, sizeof *ga->buffers);
    ga->reserved = calloc((size_t)n_bufs, sizeof *ga->reserved);
    ga->arenas = calloc((size_t)n_bufs, sizeof *ga->arenas);
    if (!ga->bufts || !ga->buffers || !ga->reserved || !ga->arenas) goto oom;
    for (int i = 0; i < n_bufs; i++) {
        ga->bufts[i] = bufts[i];
        ga->arenas[i].alignment = backend_buft_alignment(bufts[i]);
        assert(is_pow2(ga->arenas[i].alignment));
    }
    return ga;
oom:
    error_set("out of memory creating a graph allocator");
    graph_allocr_free(ga);
    return NULL;
}

struct graph_allocr *graph_allocr_new(struct backend_buffer_type *buft) {
    return graph_allocr_new_n(&buft, 1);
}

void graph_allocr_free(struct graph_allocr *ga) {
    if (!ga) return;
    for (int i = 0; ga->buffers && i < ga->n_bufs; i++) backend_buffer_free(ga->buffers[i]);
    for (int i = 0; ga->arenas && i < ga->n_bufs; i++) free(ga->arenas[i].free_blocks);
    free(ga->bufts);
    free(ga->buffers);
    free(ga->reserved);
    free(ga->arenas);
    tensor_map_free(&ga->map);
    free(ga->info);
    free(ga);
}

/* Room for a graph's tensors: its nodes and leafs plus view sources outside it. */
static bool allocr_make_room(struct graph_allocr *ga, const struct graph *g) {
    size_t n_keys = 2 * (size_t)g->n_nodes + (size_t)g->n_leafs;
    if (!tensor_map_reserve(&ga->map, n_keys)) return false;
    if (ga->info_capacity < ga->map.capacity) {
        struct alloc_info *info = malloc(ga->map.capacity * sizeof *info);
        if (!info) goto oom;
        free(ga->info);
        ga->info = info;
        ga->info_capacity = ga->map.capacity;
    }
    for (int b = 0; b < ga->n_bufs; b++) {
        struct arena *a = &ga->arenas[b];
        if ((size_t)a->cap_free < n_keys + 2) {
            if (n_keys + 2 > INT32_MAX) goto oom;
            struct arena_block *blocks = malloc((n_keys + 2) * sizeof *blocks);
            if (!blocks) goto oom;
            free(a->free_blocks);
            a->free_blocks = blocks;
            a->cap_free = (int)(n_keys + 2);
        }
        arena_reset(a);
    }
    return true;
oom:
    error_set("out of memory planning a graph of %d nodes", g->n_nodes);
    return false;
}

static struct alloc_info *allocr_info(struct graph_allocr *ga, const struct tensor *t) {
    bool inserted;
    size_t slot = tensor_map_insert(&ga->map, t, &inserted);
    assert(slot != TENSOR_MAP_NONE); /* allocr_make_room counted every tensor */
    struct alloc_info *info = &ga->info[slot];
    if (inserted) memset(info, 0, sizeof *info);
    return info;
}

static bool tensor_same_layout(const struct tensor *a, const struct tensor *b) {
    if (a->type != b->type) return false;
    for (int i = 0; i < TENSOR_MAX_DIMS; i++) {
        if (a->ne[i] != b->ne[i] || a->nb[i] != b->nb[i]) return false;
    }
    return true;
}

/* Ops whose kernels may write their result over a source (element by element
 * or row by row); binary ones over either source. */
static int op_inplace_sources(enum tensor_op op) {
    switch (op) {
    case OP_ADD: case OP_SUB: case OP_MUL: case OP_DIV:
        return 2;
    case OP_ADD1: case OP_SCALE: case OP_SQR: case OP_SQRT: case OP_LOG: case OP_UNARY:
    case OP_DIAG_MASK_INF: case OP_DIAG_MASK_ZERO: case OP_ROPE: case OP_RMS_NORM: case OP_SOFT_MAX:
        return 1;
    default:
        return 0;
    }
}

/* Memory that must keep its contents: the caller's inputs and outputs, and leafs. */
static bool tensor_is_pinned(const struct tensor *t) {
    return t->op == OP_NONE || (t->flags & (TENSOR_FLAG_INPUT | TENSOR_FLAG_OUTPUT));
}

/* Hands node the block of one of its sources, if the rules in alloc.h allow. */
static bool allocr_take_over_source(struct graph_allocr *ga, struct tensor *node, struct alloc_info *info,
                                    int buffer_id) {
    int n_src = op_inplace_sources(node->op);
    for (int j = 0; j < n_src; j++) {
        struct tensor *p = node->src[j];
        if (!p || tensor_is_pinned(p) || !tensor_same_layout(node, p)) continue;
        struct alloc_info *pi = allocr_info(ga, p);
        if (pi->n_children != 1 || pi->n_views != 0) continue;
        struct tensor *owner = p;
        struct alloc_info *oi = pi;
        if (p->view_src) {
            owner = p->view_src;
            oi = allocr_info(ga, owner);
            if (tensor_is_pinned(owner) || p->view_offs != 0 || oi->n_views != 1 || oi->n_children != 0) continue;
        }
        if (!oi->owns_block || oi->buffer_id != buffer_id) continue;
        info->placed = info->owns_block = true;
        info->buffer_id = buffer_id;
        info->offset = oi->offset;
        info->size = oi->size;
        oi->owns_block = false;
        return true;
    }
    return false;
}

static bool allocr_place(struct graph_allocr *ga, struct tensor *t, int buffer_id) {
    struct alloc_info *info = allocr_info(ga, t);
    if (t->data || t->view_src || info->placed) return true;
    if (allocr_take_over_source(ga, t, info, buffer_id)) return true;
    struct arena *a = &ga->arenas[buffer_id];
    /* an empty tensor still gets an address of its own, inside the buffer */
    size_t need = backend_buft_alloc_size(ga->bufts[buffer_id], t);
    size_t size;
    if (!ck_align_up(need ? need : 1, a->alignment, &size) || size > SIZE_MAX / 4) {
        error_set("tensor '%s' is too large to allocate", t->name);
        return false;
    }
    info->placed = info->owns_block = true;
    info->buffer_id = buffer_id;
    info->size = size;
    info->offset = arena_alloc(a, size);
    return true;
}

static void allocr_release(struct graph_allocr *ga, struct tensor *t) {
    struct alloc_info *info = allocr_info(ga, t);
    if (!info->owns_block || (t->flags & TENSOR_FLAG_OUTPUT)) return;
    arena_free(&ga->arenas[info->buffer_id], info->offset, info->size);
    info->owns_block = false;
}

static bool allocr_plan(struct graph_allocr *ga, struct graph *g, const int *node_ids, const int *leaf_ids) {
    if (!allocr_make_room(ga, g)) return false;

    for (int i = 0; i < g->n_nodes; i++) {
        struct tensor *node = g->nodes[i];
        if (node->view_src) allocr_info(ga, node->view_src)->n_views++;
        for (int j = 0; j < TENSOR_MAX_SRC; j++) {
            if (node->src[j]) allocr_info(ga, node->src[j])->n_children++;
        }
    }

    /* inputs first: the caller writes them before anything is computed */
    for (int i = 0; i < g->n_leafs; i++) {
        if (!allocr_place(ga, g->leafs[i], leaf_ids ? leaf_ids[i] : 0)) return false;
    }
    for (int i = 0; i < g->n_nodes; i++) {
        if ((g->nodes[i]->flags & TENSOR_FLAG_INPUT) && !allocr_place(ga, g->nodes[i], node_ids ? node_ids[i] : 0)) {
            return false;
        }
    }

    for (int i = 0; i < g->n_nodes; i++) {
        struct tensor *node = g->nodes[i];
        assert(!node_ids || (node_ids[i] >= 0 && node_ids[i] < ga->n_bufs));
        if (!allocr_place(ga, node, node_ids ? node_ids[i] : 0)) return false;
        for (int j = 0; j < TENSOR_MAX_SRC; j++) {
            struct tensor *p = node->src[j];
            if (!p) continue;
            struct alloc_info *pi = allocr_info(ga, p);
            if (--pi->n_children > 0 || pi->n_views > 0) continue;
            if (p->view_src) {
                struct alloc_info *vi = allocr_info(ga, p->view_src);
                if (--vi->n_views == 0 && vi->n_children == 0) allocr_release(ga, p->view_src);
            } else {
                allocr_release(ga, p);
            }
        }
    }

    for (int b = 0; b < ga->n_bufs; b++) {
        if (ga->arenas[b].max_size > ga->reserved[b]) ga->reserved[b] = ga->arenas[b].max_size;
    }
    return true;
}

/* Makes every buffer at least as large as the plans need. */
static bool allocr_size_buffers(struct graph_allocr *ga) {
    for (int b = 0; b < ga->n_bufs; b++) {
        size_t have = ga->buffers[b] ? backend_buffer_size(ga->buffers[b]) : 0;
        if (ga->reserved[b] <= have) continue;
        if (ga->buffers[b]) {
            LOG_INFO("graph allocator: %s compute buffer grows from %zu to %zu bytes\n",
                     backend_buft_name(ga->bufts[b]), have, ga->reserved[b]);
        }
        backend_buffer_free(ga->buffers[b]);
        ga->buffers[b] = backend_buft_alloc_buffer(ga->bufts[b], ga->reserved[b]);
        if (!ga->buffers[b]) return false;
        backend_buffer_set_usage(ga->buffers[b], BUFFER_USAGE_COMPUTE);
    }
    return true;
}

bool graph_allocr_reserve_n(struct graph_allocr *ga, struct graph *g, const int *node_buffer_ids,
                            const int *leaf_buffer_ids) {
    return allocr_plan(ga, g, node_buffer_ids, leaf_buffer_ids) && allocr_size_buffers(ga);
}

bool graph_allocr_reserve(struct graph_allocr *ga, struct graph *g) {
    return graph_allocr_reserve_n(ga, g, NULL, NULL);
}

static bool allocr_apply(struct graph_allocr *ga, struct tensor *t) {
    size_t slot = tensor_map_find(&ga->map, t);
    if (slot == TENSOR_MAP_NONE || !ga->info[slot].placed) return true;
    const struct alloc_info *info = &ga->info[slot];
    struct backend_buffer *buf = ga->buffers[info->buffer_id];
    return backend_buffer_place_tensor(buf, t, (char *)backend_buffer_base(buf) + info->offset);
}

bool graph_allocr_alloc_graph_n(struct graph_allocr *ga, struct graph *g, const int *node_buffer_ids,
                                const int *leaf_buffer_ids) {
    if (!graph_allocr_reserve_n(ga, g, node_buffer_ids, leaf_buffer_ids)) return false;
    for (int i = 0; i < g->n_leafs; i++) {
        if (!allocr_apply(ga, g->leafs[i])) return false;
    }
    for (int i = 0; i < g->n_nodes; i++) {
        if (!allocr_apply(ga, g->nodes[i])) return false;
    }
    /* views last: their sources are in place now (view_src is never itself a view) */
    for (int i = 0; i < g->n_nodes; i++) {
        struct tensor *node = g->nodes[i];
        if (node->view_src && !node->data && !backend_view_init(node)) return false;
    }
    return true;
}

bool graph_allocr_alloc_graph(struct graph_allocr *ga, struct graph *g) {
    return graph_allocr_alloc_graph_n(ga, g, NULL, NULL);
}

size_t graph_allocr_reserved_size(const struct graph_allocr *ga, int buffer_id) {
    assert(buffer_id >= 0 && buffer_id < ga->n_bufs);
    return ga->reserved[buffer_id];
}

struct backend_buffer *graph_allocr_buffer(const struct graph_allocr *ga, int buffer_id) {
    assert(buffer_id >= 0 && buffer_id < ga->n_bufs);
    return ga->buffers[buffer_id];
}

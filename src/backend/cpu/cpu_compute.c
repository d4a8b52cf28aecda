/*
 * The persistent thread pool and the graph loop.
 *
 * Workers are created once. Between graphs they spin briefly (about a
 * millisecond, so the next token's graph finds them awake) and then sleep on
 * a condition variable; a graph wakes them (one broadcast), every thread
 * walks the same node list and meets the others at a spinning barrier after
 * each phase of each node (spinning, then yielding the core: on a machine
 * shared with other processes a preempted thread must get to run). The
 * calling thread is thread 0.
 *
 * Within a phase, kernels either split rows evenly (cpu_task_rows) or claim
 * chunks from a counter (cpu_task_next_chunk, cpu_chunks_plan): matrix
 * products, where most of the time goes, use chunks sized to the L2 cache.
 * A thread waiting at a barrier asks for the weights it will stream first
 * in the next matrix-vector product (struct cpu_warm).
 */
#define _GNU_SOURCE /* sched_yield */
#include "backend/cpu/cpu_compute.h"

#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu_ops.h"
#include "core/cpu_features.h"
#include "core/log.h"
#include "quant/quant.h"

/* Spins before a waiting thread yields (barrier) or sleeps (between graphs). */
#define CPU_SPIN_BARRIER 2000
#define CPU_SPIN_IDLE 20000

struct cpu_worker {
    struct cpu_threadpool *pool;
    int ith;
};

struct cpu_threadpool {
    int n_threads;
    pthread_t *threads;           /* [n_threads - 1] */
    struct cpu_worker *workers;   /* [n_threads - 1] */
    int n_started;

    pthread_mutex_t mutex;
    pthread_cond_t cond;
    atomic_int job_gen;           /* bumped (under mutex) for each graph and for shutdown */
    bool stop;

    /* the current graph (written under mutex before job_gen is bumped) */
    struct graph *graph;
    int n_active;
    bool (*abort_cb)(void *);
    void *abort_data;

    atomic_int barrier_count;
    atomic_int barrier_gen;
    /* Stopping early: the index of the last node to finish. A thread can be
     * one node ahead of another, so a flag would be seen at different nodes;
     * a node index is the same decision for everyone. */
    atomic_int stop_after;
    atomic_bool aborted;
    atomic_int kernel_error;
    /* Chunk counters per phase, for even and odd steps (computed nodes):
     * thread 0 zeroes the next step's set when it starts a step, when every
     * thread is past the previous one and none can be past this one. */
    atomic_int chunk_next[2][3];

    char *wdata;                  /* work memory, grows only */
    size_t wsize;
};

static void cpu_pause(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

static bool cpu_op_is_view(enum tensor_op op) {
    return op == OP_NONE || op == OP_VIEW || op == OP_RESHAPE || op == OP_PERMUTE || op == OP_TRANSPOSE;
}

/* Weights a thread asks for while it waits at barriers: the first ones it
 * will stream in the next node that says which (cpu_op_desc.first_bytes,
 * generation's matrix-vector products), up to CPU_WARM_BYTES of them. The
 * memory would otherwise idle while a thread waits for the others to end a
 * product's tail or a single-row op, and the next product then starts in
 * L2 instead of at the far end of a stream. Which weights is found out at
 * the first barrier where the thread waits (the search and the node's
 * answer took 0.5% of generation's time when every thread made them after
 * every product). */
struct cpu_warm {
    const struct graph *g;
    int ith, nth;
    int after;                 /* to find out: the search starts after this node; CPU_WARM_KNOWN: found */
    const uint8_t *next, *end; /* what is still to ask for */
};
#define CPU_WARM_BYTES(l2) ((l2) / 8)
#define CPU_WARM_KNOWN INT_MIN

/* The next node after warm->after that says which weights it streams, and
 * what this thread asks for of them. */
static void cpu_warm_find(struct cpu_warm *warm) {
    const struct graph *g = warm->g;
    for (int j = warm->after + 1; j < g->n_nodes; j++) {
        const struct tensor *node = g->nodes[j];
        const struct cpu_op_desc *desc = cpu_op_desc_get(node->op);
        if (cpu_op_is_view(node->op) || !desc->first_bytes) continue;
        size_t n;
        const uint8_t *p;
        if (desc->first_bytes(node, warm->ith, warm->nth, &p, &n)) {
            const size_t budget = CPU_WARM_BYTES(cpu_l2_cache_bytes());
            warm->next = p;
            warm->end = p + (n < budget ? n : budget);
        }
        break;
    }
    warm->after = CPU_WARM_KNOWN;
}

static void cpu_barrier(struct cpu_threadpool *pool, int n, struct cpu_warm *warm) {
    if (n == 1) return;
    const int gen = atomic_load(&pool->barrier_gen);
    if (atomic_fetch_add(&pool->barrier_count, 1) == n - 1) {
        atomic_store(&pool->barrier_count, 0);
        atomic_fetch_add(&pool->barrier_gen, 1);
        return;
    }
    if (warm && warm->after != CPU_WARM_KNOWN) cpu_warm_find(warm);
    for (int spins = 0; atomic_load(&pool->barrier_gen) == gen; spins++) {
        if (warm && warm->next < warm->end) {
            __builtin_prefetch(warm->next, 0, 2); /* into L2 */
            __builtin_prefetch(warm->next + 64, 0, 2);
            warm->next += 128;
        } else if (spins < CPU_SPIN_BARRIER) {
            cpu_pause();
        } else {
            sched_yield();
        }
    }
}

void cpu_task_stop_after(const struct cpu_task *task) {
    int cur = atomic_load(task->stop_after);
    while (task->node < cur && !atomic_compare_exchange_weak(task->stop_after, &cur, task->node)) {
    }
}

static int64_t cpu_ceil_div(int64_t a, int64_t b) {
    return (a + b - 1) / b;
}

/* n items in blocks for about n_blocks pieces, block sizes multiples of align. */
static void cpu_chunks_split(int64_t n, int64_t n_blocks, int64_t align, int64_t *per, int64_t *count) {
    int64_t p = cpu_ceil_div(cpu_ceil_div(n, n_blocks), align) * align;
    if (p > n) p = n;
    *per = p;
    *count = cpu_ceil_div(n, p);
}

struct cpu_chunks cpu_chunks_plan(int64_t nr0, size_t row_bytes, int64_t row_align, int64_t nr1, size_t col_bytes,
                                  int n_threads) {
    struct cpu_chunks c = { .nr0 = nr0, .nr1 = nr1, .rows = 1, .cols = 1 };
    if (nr0 <= 0 || nr1 <= 0) return c; /* no chunks */
    const size_t budget = cpu_l2_cache_bytes() / 4;
    int64_t max_rows = (int64_t)(budget / (row_bytes ? row_bytes : 1)) / row_align * row_align;
    int64_t max_cols = (int64_t)(budget / (col_bytes ? col_bytes : 1));
    if (max_rows < row_align) max_rows = row_align;
    if (max_cols < 1) max_cols = 1;
    int64_t n0 = cpu_ceil_div(nr0, max_rows), n1 = cpu_ceil_div(nr1, max_cols);
    const int64_t n0_max = cpu_ceil_div(nr0, row_align), n1_max = nr1;
    const int64_t want = n_threads > 1 ? (int64_t)n_threads * CPU_CHUNKS_PER_THREAD : 1;
    /* too few chunks to balance: cut the dimension whose blocks are larger
     * (in units of its smallest block) */
    while (n0 * n1 < want && (n0 < n0_max || n1 < n1_max)) {
        const bool cut_rows = n0 < n0_max && (n1 >= n1_max || nr0 / (n0 * row_align) >= nr1 / n1);
        if (cut_rows) n0++;
        else n1++;
    }
    cpu_chunks_split(nr0, n0, row_align, &c.rows, &c.n_row_chunks);
    cpu_chunks_split(nr1, n1, 1, &c.cols, &c.n_col_chunks);
    return c;
}

/* Every thread runs this for the current graph. */
static void cpu_graph_run(struct cpu_threadpool *pool, int ith) {
    const struct graph *g = pool->graph;
    const int nth = pool->n_active;
    struct cpu_task task = {
        .ith = ith, .nth = nth, .wdata = pool->wdata, .wsize = pool->wsize, .error = &pool->kernel_error,
        .stop_after = &pool->stop_after,
    };
    int step = 0;
    struct cpu_warm warm = { .g = g, .ith = ith, .nth = nth, .after = -1 };
    for (int i = 0; i < g->n_nodes; i++) {
        struct tensor *node = g->nodes[i];
        if (cpu_op_is_view(node->op)) continue;
        task.prev = step > 0 ? g->nodes[task.node] : NULL;
        task.node = i;
        if (ith == 0) {
            for (int ph = 0; ph < 3; ph++) atomic_store_explicit(&pool->chunk_next[(step + 1) & 1][ph], 0, memory_order_relaxed);
        }
        atomic_int *chunks = pool->chunk_next[step & 1];
        step++;
        const struct cpu_op_desc *desc = cpu_op_desc_get(node->op);
        if (desc->has_init) {
            task.phase = CPU_PHASE_INIT;
            task.chunk_next = &chunks[CPU_PHASE_INIT];
            desc->kernel(&task, node);
            cpu_barrier(pool, nth, &warm);
        }
        task.phase = CPU_PHASE_COMPUTE;
        task.chunk_next = &chunks[CPU_PHASE_COMPUTE];
        desc->kernel(&task, node);
        if (desc->first_bytes) { /* the weights asked for were this node's: on to the next one's */
            warm.after = i;
            warm.next = warm.end = NULL;
        }
        if (desc->has_finalize) {
            cpu_barrier(pool, nth, &warm);
            task.phase = CPU_PHASE_FINALIZE;
            task.chunk_next = &chunks[CPU_PHASE_FINALIZE];
            desc->kernel(&task, node);
        }
        /* thread 0 asks before the barrier, so all threads see the answer after it */
        if (ith == 0 && pool->abort_cb && pool->abort_cb(pool->abort_data)) {
            atomic_store(&pool->aborted, true);
            cpu_task_stop_after(&task);
        }
        cpu_barrier(pool, nth, &warm);
        if (atomic_load(&pool->stop_after) <= i) break;
    }
    /* nobody may still read the graph when the caller returns */
    cpu_barrier(pool, nth, NULL);
}

static void *cpu_worker_main(void *arg) {
    struct cpu_worker *w = arg;
    struct cpu_threadpool *pool = w->pool;
    int seen = 0;
    for (;;) {
        for (int spins = 0; spins < CPU_SPIN_IDLE && atomic_load(&pool->job_gen) == seen; spins++) cpu_pause();
        pthread_mutex_lock(&pool->mutex);
        while (atomic_load(&pool->job_gen) == seen && !pool->stop) pthread_cond_wait(&pool->cond, &pool->mutex);
        seen = atomic_load(&pool->job_gen);
        const bool stop = pool->stop;
        const bool active = w->ith < pool->n_active;
        pthread_mutex_unlock(&pool->mutex);
        if (stop) break;
        if (active) cpu_graph_run(pool, w->ith);
    }
    return NULL;
}

struct cpu_threadpool *cpu_threadpool_new(int n_threads) {
    if (n_threads < 1 || n_threads > 512) {
        error_set("cpu_threadpool_new: %d threads (1 to 512 allowed)", n_threads);
        return NULL;
    }
    cpu_tables_init();
    struct cpu_threadpool *pool = calloc(1, sizeof *pool);
    if (!pool) {
        error_set("cpu_threadpool_new: out of memory");
        return NULL;
    }
    pool->n_threads = n_threads;
    pthread_mutex_init(&pool->mutex, NULL);
    pthread_cond_init(&pool->cond, NULL);
    if (n_threads > 1) {
        pool->threads = calloc((size_t)n_threads - 1, sizeof *pool->threads);
        pool->workers = calloc((size_t)n_threads - 1, sizeof *pool->workers);
        if (!pool->threads || !pool->workers) {
            error_set("cpu_threadpool_new: out of memory");
            cpu_threadpool_free(pool);
            return NULL;
        }
        for (int i = 0; i < n_threads - 1; i++) {
            pool->workers[i] = (struct cpu_worker){ .pool = pool, .ith = i + 1 };
            if (pthread_create(&pool->threads[i], NULL, cpu_worker_main, &pool->workers[i]) != 0) {
                error_set("cpu_threadpool_new: cannot start thread %d of %d", i + 2, n_threads);
                cpu_threadpool_free(pool);
                return NULL;
            }
            pool->n_started++;
        }
    }
    return pool;
}

void cpu_threadpool_free(struct cpu_threadpool *pool) {
    if (!pool) return;
    pthread_mutex_lock(&pool->mutex);
    pool->stop = true;
    atomic_fetch_add(&pool->job_gen, 1);
    pthread_cond_broadcast(&pool->cond);
    pthread_mutex_unlock(&pool->mutex);
    for (int i = 0; i < pool->n_started; i++) pthread_join(pool->threads[i], NULL);
    pthread_cond_destroy(&pool->cond);
    pthread_mutex_destroy(&pool->mutex);
    free(pool->threads);
    free(pool->workers);
    free(pool->wdata);
    free(pool);
}

int cpu_threadpool_size(const struct cpu_threadpool *pool) {
    return pool->n_threads;
}

bool cpu_op_supported(const struct tensor *node) {
    if (cpu_op_is_view(node->op)) return true;
    const struct cpu_op_desc *desc = cpu_op_desc_get(node->op);
    if (!desc || !desc->kernel) return false;
    return !desc->supported || desc->supported(node);
}

/* Checks every node before anything runs and sizes the work memory. */
static bool cpu_graph_plan(struct cpu_threadpool *pool, const struct graph *g, int n_threads) {
    size_t wsize = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        const struct tensor *node = g->nodes[i];
        if (cpu_op_is_view(node->op)) continue;
        if (!cpu_op_supported(node)) {
            const struct tensor *s0 = node->src[0], *s1 = node->src[1];
            error_set("CPU backend: %s of '%s' (%s%s%s -> %s) is not supported", tensor_op_name(node->op),
                      node->name, s0 ? type_name(s0->type) : "", s1 ? ", " : "", s1 ? type_name(s1->type) : "",
                      type_name(node->type));
            return false;
        }
        if (!node->data) {
            error_set("CPU backend: '%s' has no memory", node->name);
            return false;
        }
        for (int s = 0; s < TENSOR_MAX_SRC; s++) {
            if (node->src[s] && !node->src[s]->data) {
                error_set("CPU backend: '%s' (input of '%s') has no memory", node->src[s]->name, node->name);
                return false;
            }
        }
        const struct cpu_op_desc *desc = cpu_op_desc_get(node->op);
        if (desc->work_size) {
            const size_t w = desc->work_size(node, n_threads);
            if (w > wsize) wsize = w;
        }
    }
    if (wsize > pool->wsize) {
        const size_t rounded = (wsize + 63) & ~(size_t)63;
        char *p = aligned_alloc(64, rounded);
        if (!p) {
            error_set("CPU backend: cannot allocate %zu bytes of work memory", rounded);
            return false;
        }
        free(pool->wdata);
        pool->wdata = p;
        pool->wsize = rounded;
    }
    return true;
}

bool cpu_graph_compute(struct cpu_threadpool *pool, struct graph *g, int n_threads,
                       bool (*abort_cb)(void *data), void *abort_data) {
    if (n_threads < 1) n_threads = 1;
    if (n_threads > pool->n_threads) n_threads = pool->n_threads;
    if (!cpu_graph_plan(pool, g, n_threads)) return false;

    atomic_store(&pool->aborted, false);
    atomic_store(&pool->stop_after, INT_MAX);
    atomic_store(&pool->kernel_error, CPU_ERR_NONE);
    atomic_store(&pool->barrier_count, 0);
    for (int ph = 0; ph < 3; ph++) atomic_store(&pool->chunk_next[0][ph], 0);
    pthread_mutex_lock(&pool->mutex);
    pool->graph = g;
    pool->n_active = n_threads;
    pool->abort_cb = abort_cb;
    pool->abort_data = abort_data;
    if (n_threads > 1) {
        atomic_fetch_add(&pool->job_gen, 1);
        pthread_cond_broadcast(&pool->cond);
    }
    pthread_mutex_unlock(&pool->mutex);

    cpu_graph_run(pool, 0);

    switch (atomic_load(&pool->kernel_error)) {
        case CPU_ERR_NONE: break;
        case CPU_ERR_ROW_INDEX: error_set("CPU backend: get_rows index out of range"); return false;
        case CPU_ERR_EXPERT_INDEX: error_set("CPU backend: mul_mat_id expert id out of range"); return false;
        default: error_set("CPU backend: kernel error"); return false;
    }
    if (atomic_load(&pool->aborted)) {
        error_set("CPU backend: computation aborted");
        return false;
    }
    return true;
}

const struct cpu_op_desc *cpu_op_desc_get(enum tensor_op op) {
    static const struct cpu_op_desc *const table[OP_COUNT] = {
        [OP_DUP] = &cpu_desc_dup,
        [OP_ADD] = &cpu_desc_add,
        [OP_ADD1] = &cpu_desc_add1,
        [OP_ACC] = &cpu_desc_acc,
        [OP_SUB] = &cpu_desc_sub,
        [OP_MUL] = &cpu_desc_mul,
        [OP_DIV] = &cpu_desc_div,
        [OP_SQR] = &cpu_desc_sqr,
        [OP_SQRT] = &cpu_desc_sqrt,
        [OP_LOG] = &cpu_desc_log,
        [OP_SUM] = &cpu_desc_sum,
        [OP_SUM_ROWS] = &cpu_desc_sum_rows,
        [OP_MEAN] = &cpu_desc_mean,
        [OP_REPEAT] = &cpu_desc_repeat,
        [OP_REPEAT_BACK] = &cpu_desc_repeat_back,
        [OP_CONCAT] = &cpu_desc_concat,
        [OP_NORM] = &cpu_desc_norm,
        [OP_RMS_NORM] = &cpu_desc_rms_norm,
        [OP_RMS_NORM_BACK] = &cpu_desc_rms_norm_back,
        [OP_MUL_MAT] = &cpu_desc_mul_mat,
        [OP_MUL_MAT_ID] = &cpu_desc_mul_mat_id,
        [OP_OUT_PROD] = &cpu_desc_out_prod,
        [OP_SCALE] = &cpu_desc_scale,
        [OP_SET] = &cpu_desc_set,
        [OP_CPY] = &cpu_desc_dup,
        [OP_CONT] = &cpu_desc_dup,
        [OP_GET_ROWS] = &cpu_desc_get_rows,
        [OP_GET_ROWS_BACK] = &cpu_desc_get_rows_back,
        [OP_DIAG] = &cpu_desc_diag,
        [OP_DIAG_MASK_INF] = &cpu_desc_diag_mask,
        [OP_DIAG_MASK_ZERO] = &cpu_desc_diag_mask,
        [OP_SOFT_MAX] = &cpu_desc_soft_max,
        [OP_SOFT_MAX_BACK] = &cpu_desc_soft_max_back,
        [OP_ROPE] = &cpu_desc_rope,
        [OP_ROPE_BACK] = &cpu_desc_rope,
        [OP_ALIBI] = &cpu_desc_alibi,
        [OP_CLAMP] = &cpu_desc_clamp,
        [OP_ARGSORT] = &cpu_desc_argsort,
        [OP_PAD] = &cpu_desc_pad,
        [OP_UNARY] = &cpu_desc_unary,
        [OP_SILU_BACK] = &cpu_desc_silu_back,
        [OP_CROSS_ENTROPY_LOSS] = &cpu_desc_cross_entropy_loss,
        [OP_CROSS_ENTROPY_LOSS_BACK] = &cpu_desc_cross_entropy_loss_back,
        [OP_ATTENTION] = &cpu_desc_attention,
    };
    return (int)op >= 0 && op < OP_COUNT ? table[op] : NULL;
}

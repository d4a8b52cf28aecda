#include "backend/cpu/cpu_backend.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu_compute.h"
#include "core/checked.h"
#include "core/log.h"

/* ---- host buffers ------------------------------------------------------------------ */

static void cpu_buffer_free(struct backend_buffer *buf) {
    free(buf->context);
}

static void *cpu_buffer_base(struct backend_buffer *buf) {
    return buf->context;
}

static void cpu_buffer_set_tensor(struct backend_buffer *buf, struct tensor *t, const void *data, size_t offset,
                                  size_t size) {
    (void)buf;
    memcpy((char *)t->data + offset, data, size);
}

static void cpu_buffer_get_tensor(struct backend_buffer *buf, const struct tensor *t, void *data, size_t offset,
                                  size_t size) {
    (void)buf;
    memcpy(data, (const char *)t->data + offset, size);
}

static bool cpu_buffer_cpy_tensor(struct backend_buffer *buf, const struct tensor *src, struct tensor *dst) {
    (void)buf;
    struct backend_buffer *src_buf = backend_tensor_buffer(src);
    if (src_buf && !backend_buffer_is_host(src_buf)) return false;
    memcpy(dst->data, src->data, tensor_nbytes(src));
    return true;
}

static void cpu_buffer_clear(struct backend_buffer *buf, uint8_t value) {
    memset(buf->context, value, buf->size);
}

static const struct backend_buffer_i cpu_buffer_iface = {
    .free = cpu_buffer_free,
    .base = cpu_buffer_base,
    .set_tensor = cpu_buffer_set_tensor,
    .get_tensor = cpu_buffer_get_tensor,
    .cpy_tensor = cpu_buffer_cpy_tensor,
    .clear = cpu_buffer_clear,
};

/* The same, over memory someone else owns. */
static const struct backend_buffer_i cpu_buffer_from_ptr_iface = {
    .base = cpu_buffer_base,
    .set_tensor = cpu_buffer_set_tensor,
    .get_tensor = cpu_buffer_get_tensor,
    .cpy_tensor = cpu_buffer_cpy_tensor,
    .clear = cpu_buffer_clear,
};

static const char *cpu_buft_name(struct backend_buffer_type *buft) {
    (void)buft;
    return "CPU";
}

static struct backend_buffer *cpu_buft_alloc_buffer(struct backend_buffer_type *buft, size_t size) {
    /* b1892 adds one alignment of slack to every CPU buffer (for aligning a
     * malloc'ed base); we keep it so buffer sizes, which session files
     * record, come out the same. aligned_alloc wants a multiple of the alignment. */
    size_t total;
    if (!ck_align_up(size, CPU_BUFFER_ALIGNMENT, &total) || !ck_add_size(total, CPU_BUFFER_ALIGNMENT, &total)) {
        error_set("CPU buffer of %zu bytes: size too large", size);
        return NULL;
    }
    void *mem = aligned_alloc(CPU_BUFFER_ALIGNMENT, total);
    if (!mem) {
        error_set("out of memory allocating a %zu-byte CPU buffer", total);
        return NULL;
    }
    struct backend_buffer *buf = backend_buffer_init(buft, cpu_buffer_iface, mem, total);
    if (!buf) free(mem);
    return buf;
}

static size_t cpu_buft_alignment(struct backend_buffer_type *buft) {
    (void)buft;
    return CPU_BUFFER_ALIGNMENT;
}

static bool cpu_buft_supports_backend(struct backend_buffer_type *buft, struct backend *backend) {
    (void)buft;
    return backend_is_cpu(backend);
}

static bool cpu_buft_is_host(struct backend_buffer_type *buft) {
    (void)buft;
    return true;
}

static struct backend_buffer_type g_cpu_buffer_type = {
    .iface = {
        .name = cpu_buft_name,
        .alloc_buffer = cpu_buft_alloc_buffer,
        .alignment = cpu_buft_alignment,
        .supports_backend = cpu_buft_supports_backend,
        .is_host = cpu_buft_is_host,
    },
};

struct backend_buffer_type *backend_cpu_buffer_type(void) {
    return &g_cpu_buffer_type;
}

struct backend_buffer *backend_cpu_buffer_from_ptr(void *ptr, size_t size) {
    if (!ptr) {
        error_set("CPU buffer from a NULL pointer");
        return NULL;
    }
    return backend_buffer_init(&g_cpu_buffer_type, cpu_buffer_from_ptr_iface, ptr, size);
}

/* ---- the backend ---------------------------------------------------------------------- */

struct cpu_backend {
    struct cpu_threadpool *pool;
    int n_threads;
    bool (*abort_cb)(void *data);
    void *abort_data;
};

static const char *cpu_backend_name(struct backend *backend) {
    (void)backend;
    return "CPU";
}

static void cpu_backend_free(struct backend *backend) {
    struct cpu_backend *cpu = backend->context;
    cpu_threadpool_free(cpu->pool);
    free(cpu);
    free(backend);
}

static struct backend_buffer_type *cpu_backend_default_buffer_type(struct backend *backend) {
    (void)backend;
    return &g_cpu_buffer_type;
}

static bool cpu_backend_graph_compute(struct backend *backend, struct graph *g) {
    struct cpu_backend *cpu = backend->context;
    return cpu_graph_compute(cpu->pool, g, cpu->n_threads, cpu->abort_cb, cpu->abort_data);
}

static bool cpu_backend_supports_op(struct backend *backend, const struct tensor *node) {
    (void)backend;
    return cpu_op_supported(node);
}

static const struct backend_i cpu_backend_iface = {
    .name = cpu_backend_name,
    .free = cpu_backend_free,
    .default_buffer_type = cpu_backend_default_buffer_type,
    .graph_compute = cpu_backend_graph_compute,
    .supports_op = cpu_backend_supports_op,
};

struct backend *backend_cpu_new(int n_threads) {
    if (n_threads < 1) {
        error_set("CPU backend: %d threads (at least 1 needed)", n_threads);
        return NULL;
    }
    struct backend *backend = malloc(sizeof *backend);
    struct cpu_backend *cpu = calloc(1, sizeof *cpu);
    struct cpu_threadpool *pool = backend && cpu ? cpu_threadpool_new(n_threads) : NULL;
    if (!pool) {
        if (!backend || !cpu) error_set("out of memory creating the CPU backend");
        free(cpu);
        free(backend);
        return NULL;
    }
    cpu->pool = pool;
    cpu->n_threads = n_threads;
    backend->iface = cpu_backend_iface;
    backend->context = cpu;
    return backend;
}

bool backend_is_cpu(const struct backend *backend) {
    return backend && backend->iface.graph_compute == cpu_backend_graph_compute;
}

bool backend_cpu_set_n_threads(struct backend *backend, int n_threads) {
    assert(backend_is_cpu(backend));
    struct cpu_backend *cpu = backend->context;
    if (n_threads < 1) {
        error_set("CPU backend: %d threads (at least 1 needed)", n_threads);
        return false;
    }
    if (n_threads > cpu_threadpool_size(cpu->pool)) {
        struct cpu_threadpool *pool = cpu_threadpool_new(n_threads);
        if (!pool) return false;
        cpu_threadpool_free(cpu->pool);
        cpu->pool = pool;
    }
    cpu->n_threads = n_threads;
    return true;
}

void backend_cpu_set_abort_callback(struct backend *backend, bool (*abort_cb)(void *data), void *abort_data) {
    assert(backend_is_cpu(backend));
    struct cpu_backend *cpu = backend->context;
    cpu->abort_cb = abort_cb;
    cpu->abort_data = abort_data;
}

#include "backend/backend.h"

#include <stdlib.h>
#include <string.h>

#include "core/checked.h"
#include "core/log.h"

/* ---- buffer types -------------------------------------------------------------- */

const char *backend_buft_name(struct backend_buffer_type *buft) {
    return buft->iface.name(buft);
}

struct backend_buffer *backend_buft_alloc_buffer(struct backend_buffer_type *buft, size_t size) {
    return buft->iface.alloc_buffer(buft, size);
}

size_t backend_buft_alignment(struct backend_buffer_type *buft) {
    return buft->iface.alignment(buft);
}

size_t backend_buft_alloc_size(struct backend_buffer_type *buft, const struct tensor *t) {
    if (buft->iface.alloc_size) {
        return buft->iface.alloc_size(buft, t);
    }
    return tensor_nbytes(t);
}

bool backend_buft_supports_backend(struct backend_buffer_type *buft, struct backend *backend) {
    return buft->iface.supports_backend(buft, backend);
}

bool backend_buft_is_host(struct backend_buffer_type *buft) {
    return buft->iface.is_host && buft->iface.is_host(buft);
}

/* ---- buffers ------------------------------------------------------------------- */

struct backend_buffer *backend_buffer_init(struct backend_buffer_type *buft, struct backend_buffer_i iface,
                                           void *context, size_t size) {
    struct backend_buffer *buf = malloc(sizeof *buf);
    if (!buf) {
        error_set("out of memory for a backend buffer");
        return NULL;
    }
    buf->iface = iface;
    buf->buft = buft;
    buf->context = context;
    buf->size = size;
    buf->usage = BUFFER_USAGE_ANY;
    return buf;
}

void backend_buffer_free(struct backend_buffer *buf) {
    if (!buf) return;
    if (buf->iface.free) buf->iface.free(buf);
    free(buf);
}

void *backend_buffer_base(struct backend_buffer *buf) {
    return buf->iface.base(buf);
}

size_t backend_buffer_size(const struct backend_buffer *buf) {
    return buf->size;
}

struct backend_buffer_type *backend_buffer_get_type(const struct backend_buffer *buf) {
    return buf->buft;
}

bool backend_buffer_is_host(const struct backend_buffer *buf) {
    return backend_buft_is_host(buf->buft);
}

void backend_buffer_set_usage(struct backend_buffer *buf, enum backend_buffer_usage usage) {
    buf->usage = usage;
}

enum backend_buffer_usage backend_buffer_get_usage(const struct backend_buffer *buf) {
    return buf->usage;
}

void backend_buffer_clear(struct backend_buffer *buf, uint8_t value) {
    buf->iface.clear(buf, value);
}

void backend_buffer_reset(struct backend_buffer *buf) {
    if (buf->iface.reset) buf->iface.reset(buf);
}

bool backend_buffer_place_tensor(struct backend_buffer *buf, struct tensor *t, void *addr) {
    if (t->view_src) {
        error_set("tensor '%s' is a view: it uses its source's memory", t->name);
        return false;
    }
    if (t->data) {
        error_set("tensor '%s' already has data", t->name);
        return false;
    }
    uintptr_t base = (uintptr_t)backend_buffer_base(buf);
    uintptr_t at = (uintptr_t)addr;
    size_t need = backend_buft_alloc_size(buf->buft, t);
    if (at < base || at - base > buf->size || need > buf->size - (at - base)) {
        error_set("tensor '%s' (%zu bytes) does not fit at offset %td of a %zu-byte buffer",
                  t->name, need, (ptrdiff_t)(at - base), buf->size);
        return false;
    }
    t->data = addr;
    t->buffer = buf;
    if (buf->iface.init_tensor) buf->iface.init_tensor(buf, t);
    return true;
}

bool backend_view_init(struct tensor *view) {
    struct tensor *src = view->view_src;
    if (!src || !src->data) {
        error_set("view '%s' has no source memory to point at", view->name);
        return false;
    }
    view->data = (char *)src->data + view->view_offs;
    view->buffer = src->buffer;
    if (view->buffer && view->buffer->iface.init_tensor) view->buffer->iface.init_tensor(view->buffer, view);
    return true;
}

bool backend_ctx_tensors_size(struct tensor_ctx *ctx, struct backend_buffer_type *buft, size_t *size_out) {
    size_t align = backend_buft_alignment(buft);
    size_t total = 0;
    for (struct tensor *t = tensor_ctx_first(ctx); t; t = tensor_ctx_next(ctx, t)) {
        if (t->data || t->view_src) continue;
        size_t padded;
        if (!ck_align_up(backend_buft_alloc_size(buft, t), align, &padded) || !ck_add_size(total, padded, &total)) {
            error_set("tensors of a context need more than SIZE_MAX bytes");
            return false;
        }
    }
    *size_out = total;
    return true;
}

struct backend_buffer *backend_alloc_ctx_tensors(struct tensor_ctx *ctx, struct backend_buffer_type *buft) {
    size_t size;
    if (!backend_ctx_tensors_size(ctx, buft, &size)) return NULL;
    if (size == 0) {
        error_set("no tensor of the context needs memory");
        return NULL;
    }
    struct backend_buffer *buf = backend_buft_alloc_buffer(buft, size);
    if (!buf) return NULL;

    size_t align = backend_buft_alignment(buft);
    char *at = backend_buffer_base(buf);
    for (struct tensor *t = tensor_ctx_first(ctx); t; t = tensor_ctx_next(ctx, t)) {
        if (t->data || t->view_src) continue;
        size_t need = backend_buft_alloc_size(buft, t);
        if (!backend_buffer_place_tensor(buf, t, at)) {
            backend_buffer_free(buf);
            return NULL;
        }
        at += (need + align - 1) & ~(align - 1); /* cannot overflow: the sum was checked */
    }
    for (struct tensor *t = tensor_ctx_first(ctx); t; t = tensor_ctx_next(ctx, t)) {
        if (!t->data && t->view_src && !backend_view_init(t)) {
            backend_buffer_free(buf);
            return NULL;
        }
    }
    return buf;
}

/* ---- tensor data ---------------------------------------------------------------- */

struct backend_buffer *backend_tensor_buffer(const struct tensor *t) {
    return t->view_src ? t->view_src->buffer : t->buffer;
}

/* Host memory: a host buffer, or data outside any buffer (a tensor context's arena). */
static bool tensor_is_host(const struct tensor *t) {
    struct backend_buffer *buf = backend_tensor_buffer(t);
    return !buf || backend_buffer_is_host(buf);
}

static bool tensor_check_range(const struct tensor *t, size_t offset, size_t size, const char *what) {
    if (!t->data) {
        error_set("%s tensor '%s': it has no memory", what, t->name);
        return false;
    }
    size_t nbytes = tensor_nbytes(t);
    if (offset > nbytes || size > nbytes - offset) {
        error_set("%s tensor '%s': bytes [%zu, +%zu) outside its %zu bytes", what, t->name, offset, size, nbytes);
        return false;
    }
    return true;
}

bool backend_tensor_set(struct tensor *t, const void *data, size_t offset, size_t size) {
    if (!tensor_check_range(t, offset, size, "writing")) return false;
    if (size == 0) return true;
    struct backend_buffer *buf = backend_tensor_buffer(t);
    if (buf) {
        buf->iface.set_tensor(buf, t, data, offset, size);
    } else {
        memcpy((char *)t->data + offset, data, size);
    }
    return true;
}

bool backend_tensor_get(const struct tensor *t, void *data, size_t offset, size_t size) {
    if (!tensor_check_range(t, offset, size, "reading")) return false;
    if (size == 0) return true;
    struct backend_buffer *buf = backend_tensor_buffer(t);
    if (buf) {
        buf->iface.get_tensor(buf, t, data, offset, size);
    } else {
        memcpy(data, (const char *)t->data + offset, size);
    }
    return true;
}

static bool tensor_same_layout(const struct tensor *a, const struct tensor *b) {
    if (a->type != b->type) return false;
    for (int i = 0; i < TENSOR_MAX_DIMS; i++) {
        if (a->ne[i] != b->ne[i] || a->nb[i] != b->nb[i]) return false;
    }
    return true;
}

bool backend_tensor_copy(const struct tensor *src, struct tensor *dst) {
    if (!tensor_same_layout(src, dst)) {
        error_set("copying tensor '%s' into '%s': different type, shape or strides", src->name, dst->name);
        return false;
    }
    if (src == dst) return true;
    if (!src->data) {
        error_set("copying tensor '%s': it has no memory", src->name);
        return false;
    }
    size_t nbytes = tensor_nbytes(src);
    if (tensor_is_host(src)) return backend_tensor_set(dst, src->data, 0, nbytes);
    if (!dst->data) {
        error_set("copying into tensor '%s': it has no memory", dst->name);
        return false;
    }
    if (tensor_is_host(dst)) return backend_tensor_get(src, dst->data, 0, nbytes);

    struct backend_buffer *dst_buf = backend_tensor_buffer(dst);
    if (dst_buf->iface.cpy_tensor && dst_buf->iface.cpy_tensor(dst_buf, src, dst)) return true;

    /* Two device buffers without a direct path: stage through host memory. */
    void *staging = malloc(nbytes ? nbytes : 1);
    if (!staging) {
        error_set("out of memory staging a %zu-byte copy of tensor '%s'", nbytes, src->name);
        return false;
    }
    bool ok = backend_tensor_get(src, staging, 0, nbytes) && backend_tensor_set(dst, staging, 0, nbytes);
    free(staging);
    return ok;
}

/* ---- backends -------------------------------------------------------------------- */

const char *backend_name(struct backend *backend) {
    return backend->iface.name(backend);
}

void backend_free(struct backend *backend) {
    if (backend) backend->iface.free(backend);
}

struct backend_buffer_type *backend_default_buffer_type(struct backend *backend) {
    return backend->iface.default_buffer_type(backend);
}

bool backend_tensor_set_async(struct backend *backend, struct tensor *t, const void *data, size_t offset, size_t size) {
    if (!backend->iface.set_tensor_async) return backend_tensor_set(t, data, offset, size);
    if (!tensor_check_range(t, offset, size, "writing")) return false;
    if (size) backend->iface.set_tensor_async(backend, t, data, offset, size);
    return true;
}

bool backend_tensor_get_async(struct backend *backend, const struct tensor *t, void *data, size_t offset, size_t size) {
    if (!backend->iface.get_tensor_async) return backend_tensor_get(t, data, offset, size);
    if (!tensor_check_range(t, offset, size, "reading")) return false;
    if (size) backend->iface.get_tensor_async(backend, t, data, offset, size);
    return true;
}

void backend_synchronize(struct backend *backend) {
    if (backend->iface.synchronize) backend->iface.synchronize(backend);
}

bool backend_graph_compute(struct backend *backend, struct graph *g) {
    return backend->iface.graph_compute(backend, g);
}

bool backend_supports_op(struct backend *backend, const struct tensor *node) {
    return backend->iface.supports_op(backend, node);
}

bool backend_op_is_view(enum tensor_op op) {
    return op == OP_VIEW || op == OP_RESHAPE || op == OP_PERMUTE || op == OP_TRANSPOSE;
}

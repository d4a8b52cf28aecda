#include "model/lora.h"

#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu_compute.h"
#include "backend/cpu/cpu_packed.h"
#include "core/checked.h"
#include "core/file_map.h"
#include "core/log.h"
#include "gguf/gguf.h"
#include "llama.h"
#include "quant/quant.h"

struct lora_tensor {
    char name[TENSOR_MAX_NAME];
    enum ggml_type type;
    int64_t ne[2];
    const void *data;
};

struct lora_pair {
    struct tensor *dest;         /* the model's weight */
    const struct lora_tensor *a; /* [r, n_in], F32 */
    const struct lora_tensor *b; /* [r, n_out] */
};

struct lora_file {
    struct file_map map;
    int32_t r, alpha;
    struct lora_tensor *tensors;
    size_t n_tensors;
};

static bool read_i32(const struct file_map *fm, size_t *pos, int32_t *out) {
    if (fm->size - *pos < 4) return false;
    memcpy(out, (const uint8_t *)fm->data + *pos, 4);
    *pos += 4;
    return true;
}

static bool lora_parse(struct lora_file *lf, const char *path) {
    if (!file_map_open(&lf->map, path, true)) return false;
    const struct file_map *fm = &lf->map;
    size_t pos = 0;
    int32_t magic = 0, version = 0;
    if (!read_i32(fm, &pos, &magic) || (uint32_t)magic != LLAMA_FILE_MAGIC_GGLA) {
        error_set("'%s' is not a LoRA adapter (bad magic)", path);
        return false;
    }
    if (!read_i32(fm, &pos, &version) || version != 1) {
        error_set("'%s': unsupported LoRA file version %d", path, version);
        return false;
    }
    if (!read_i32(fm, &pos, &lf->r) || !read_i32(fm, &pos, &lf->alpha) || lf->r <= 0) {
        error_set("'%s': invalid LoRA rank", path);
        return false;
    }
    size_t cap = 0;
    while (pos < fm->size) {
        int32_t n_dims, name_len, ftype;
        if (!read_i32(fm, &pos, &n_dims) || !read_i32(fm, &pos, &name_len) || !read_i32(fm, &pos, &ftype)) {
            error_set("'%s' is truncated (tensor header)", path);
            return false;
        }
        if (n_dims < 1 || n_dims > 2 || name_len <= 0 || name_len >= TENSOR_MAX_NAME || (ftype != 0 && ftype != 1)) {
            error_set("'%s': invalid tensor header (dims %d, name length %d, type %d)", path, n_dims, name_len, ftype);
            return false;
        }
        if (lf->n_tensors == cap) {
            cap = cap ? cap * 2 : 16;
            struct lora_tensor *grown = realloc(lf->tensors, cap * sizeof *grown);
            if (!grown) {
                error_set("out of memory reading '%s'", path);
                return false;
            }
            lf->tensors = grown;
        }
        struct lora_tensor *t = &lf->tensors[lf->n_tensors];
        t->ne[0] = t->ne[1] = 1;
        for (int d = 0; d < n_dims; d++) {
            int32_t v;
            if (!read_i32(fm, &pos, &v) || v <= 0) {
                error_set("'%s': invalid tensor shape", path);
                return false;
            }
            t->ne[d] = v;
        }
        if (fm->size - pos < (size_t)name_len) {
            error_set("'%s' is truncated (tensor name)", path);
            return false;
        }
        memcpy(t->name, (const uint8_t *)fm->data + pos, (size_t)name_len);
        t->name[name_len] = '\0';
        pos += (size_t)name_len;
        t->type = ftype == 0 ? GGML_TYPE_F32 : GGML_TYPE_F16;
        size_t bytes, aligned;
        if (!ck_mul_size((size_t)t->ne[0] * (size_t)t->ne[1], ftype == 0 ? 4 : 2, &bytes) ||
            !ck_align_up(pos, 32, &aligned) || aligned > fm->size || fm->size - aligned < bytes) {
            error_set("'%s' is truncated (data of '%s')", path, t->name);
            return false;
        }
        t->data = (const uint8_t *)fm->data + aligned;
        pos = aligned + bytes;
        lf->n_tensors++;
    }
    return true;
}

static void lora_file_close(struct lora_file *lf) {
    free(lf->tensors);
    file_map_close(&lf->map);
}

static const struct lora_tensor *find_lora(const struct lora_file *lf, const char *base, const char *suffix) {
    char name[TENSOR_MAX_NAME * 2];
    snprintf(name, sizeof name, "%s%s", base, suffix);
    for (size_t i = 0; i < lf->n_tensors; i++) {
        if (strcmp(lf->tensors[i].name, name) == 0) return &lf->tensors[i];
    }
    return NULL;
}

static struct tensor *find_weight(struct llama_model *model, const char *name) {
    for (struct tensor *t = tensor_ctx_first(model->weights_ctx); t; t = tensor_ctx_next(model->weights_ctx, t)) {
        if (strcmp(t->name, name) == 0) return t;
    }
    return NULL;
}

/* Pairs every A with its B and its weight, checking names, types and shapes. */
static bool lora_pairs(struct llama_model *model, const struct lora_file *lf, struct lora_pair *pairs, size_t *n_pairs) {
    *n_pairs = 0;
    for (size_t i = 0; i < lf->n_tensors; i++) {
        const char *name = lf->tensors[i].name;
        size_t len = strlen(name);
        bool is_a = len > 6 && strcmp(name + len - 6, ".loraA") == 0;
        bool is_b = len > 6 && strcmp(name + len - 6, ".loraB") == 0;
        if (!is_a && !is_b) {
            error_set("'%s' is not a LoRA tensor (expected a .loraA or .loraB suffix)", name);
            return false;
        }
        char base[TENSOR_MAX_NAME];
        snprintf(base, sizeof base, "%.*s", (int)(len - 6), name);
        struct tensor *dest = find_weight(model, base);
        if (!dest) {
            error_set("unknown tensor '%s' in the LoRA adapter", base);
            return false;
        }
        const struct lora_tensor *a = find_lora(lf, base, ".loraA"), *b = find_lora(lf, base, ".loraB");
        if (!a || !b) {
            error_set("the LoRA adapter lacks %s for '%s'", a ? "loraB" : "loraA", base);
            return false;
        }
        if (!is_a) continue; /* each pair once */
        if (a->type != GGML_TYPE_F32 || a->ne[0] != b->ne[0] || dest->ne[0] != a->ne[1] || dest->ne[1] != b->ne[1] ||
            dest->ne[2] != 1 || dest->ne[3] != 1) {
            error_set("incompatible tensor dimensions for '%s' (%lld and %lld); is the adapter for this model?", base,
                      (long long)a->ne[1], (long long)b->ne[1]);
            return false;
        }
        const struct type_traits *tt = type_traits_get(dest->type);
        if (!tt->to_float || !tt->from_float) {
            error_set("cannot apply a LoRA adapter to '%s' of type %s", base, tt->name);
            return false;
        }
        pairs[(*n_pairs)++] = (struct lora_pair){ dest, a, b };
    }
    return true;
}

/* BA = loraA x loraB -> F32 [n_in, n_out], on the CPU kernels. */
static bool compute_ba(const struct lora_pair *p, struct cpu_threadpool *pool, int n_threads, float *ba) {
    const int64_t r = p->a->ne[0], n_in = p->a->ne[1], n_out = p->b->ne[1];
    size_t b_bytes = (size_t)(r * n_out) * (p->b->type == GGML_TYPE_F32 ? 4 : 2);
    size_t arena = (size_t)(r * n_in) * 4 + b_bytes + (size_t)(n_in * n_out) * 4 + tensor_ctx_data_overhead(4);
    struct tensor_ctx *ctx = tensor_ctx_new(8, arena);
    if (!ctx) return false;
    struct tensor *a = tensor_new_2d(ctx, GGML_TYPE_F32, r, n_in);
    struct tensor *b = tensor_new_2d(ctx, p->b->type, r, n_out);
    struct tensor *out = a && b ? op_mul_mat(ctx, a, b) : NULL;
    struct graph *g = out ? graph_new(ctx, 8) : NULL;
    bool ok = g && graph_build_forward(g, out);
    if (ok) {
        memcpy(a->data, p->a->data, (size_t)(r * n_in) * 4);
        memcpy(b->data, p->b->data, b_bytes);
        ok = cpu_graph_compute(pool, g, n_threads, NULL, NULL);
    }
    if (ok) memcpy(ba, out->data, (size_t)(n_in * n_out) * 4);
    tensor_ctx_free(ctx);
    return ok;
}

/* The weight's data in memory the model owns (copied out of the file once). */
static void *writable_data(struct llama_model *model, struct tensor *t) {
    const uint8_t *file = gguf_file_data(model->gguf);
    const uint8_t *p = t->data;
    if (p < file || p >= file + gguf_file_size(model->gguf)) return t->data; /* already ours */
    void **grown = realloc(model->lora_buffers, (model->n_lora_buffers + 1) * sizeof *grown);
    if (!grown) return NULL;
    model->lora_buffers = grown;
    void *copy = malloc(tensor_nbytes(t));
    if (!copy) return NULL;
    memcpy(copy, t->data, tensor_nbytes(t));
    model->lora_buffers[model->n_lora_buffers++] = copy;
    t->data = copy;
    return copy;
}

int lora_apply(struct llama_model *model, const char *lora_path, float scale, const char *base_path, int n_threads) {
    if (!model->weights_ctx) {
        error_set("cannot apply a LoRA adapter to a vocab-only model");
        return 1;
    }
    if (n_threads <= 0) n_threads = 1;
    struct lora_file lf = { 0 };
    struct llama_model *base = NULL;
    struct lora_pair *pairs = NULL;
    struct cpu_threadpool *pool = NULL;
    float *ba = NULL, *row = NULL;
    int status = 1;
    if (!lora_parse(&lf, lora_path)) goto done;
    pairs = malloc((lf.n_tensors / 2 + 1) * sizeof *pairs);
    size_t n_pairs = 0;
    if (!pairs || !lora_pairs(model, &lf, pairs, &n_pairs)) goto done;
    if (base_path) {
        struct llama_model_params bp = llama_model_default_params();
        base = model_load(base_path, &bp);
        if (!base) goto done;
    }
    int64_t max_elems = 0, max_row = 0;
    for (size_t i = 0; i < n_pairs; i++) {
        struct tensor *w = pairs[i].dest;
        if (base) {
            struct tensor *bw = find_weight(base, w->name);
            if (!bw || bw->ne[0] != w->ne[0] || bw->ne[1] != w->ne[1] || !type_traits_get(bw->type)->to_float) {
                error_set("the base model has no usable tensor '%s' of the same shape", w->name);
                goto done;
            }
        }
        if (w->ne[0] * w->ne[1] > max_elems) max_elems = w->ne[0] * w->ne[1];
        if (w->ne[0] > max_row) max_row = w->ne[0];
        if (!writable_data(model, w)) {
            error_set("out of memory copying '%s' for the LoRA adapter", w->name);
            goto done;
        }
    }
    if (type_traits_get(pairs[0].dest->type)->is_quantized) {
        LOG_WARN("warning: applying a LoRA adapter to a quantized model may lower quality; "
                 "use an F16 or F32 base model (path_base_model)\n");
    }
    const float scaling = scale * (float)lf.alpha / (float)lf.r;
    ba = malloc((size_t)max_elems * sizeof *ba);
    row = malloc((size_t)max_row * sizeof *row);
    pool = cpu_threadpool_new(n_threads);
    if (!ba || !row || !pool) goto done;
    for (size_t i = 0; i < n_pairs; i++) {
        struct tensor *w = pairs[i].dest;
        const struct tensor *src = base ? find_weight(base, w->name) : w;
        if (!compute_ba(&pairs[i], pool, n_threads, ba)) goto done;
        const struct type_traits *st = type_traits_get(src->type), *dt = type_traits_get(w->type);
        for (int64_t r = 0; r < w->ne[1]; r++) {
            st->to_float((const uint8_t *)src->data + r * src->nb[1], row, w->ne[0]);
            const float *d = ba + r * w->ne[0];
            for (int64_t c = 0; c < w->ne[0]; c++) row[c] += scaling * d[c];
            dt->from_float(row, (uint8_t *)w->data + r * w->nb[1], w->ne[0]);
        }
        /* a packed copy of the weight (cpu_packed.h) must follow the change */
        if (w->extra && !cpu_repack_weight(w)) goto done;
    }
    status = 0;
done:
    cpu_threadpool_free(pool);
    free(ba);
    free(row);
    free(pairs);
    model_free(base);
    lora_file_close(&lf);
    return status;
}

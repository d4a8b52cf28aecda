/* llama.h: model loading and queries. */
#include <stdio.h>
#include <string.h>

#include "core/log.h"
#include "gguf/gguf.h"
#include "llama.h"
#include "model/lora.h"
#include "model/model.h"
#include "context/context.h"

struct llama_model *llama_load_model_from_file(const char *path_model, struct llama_model_params params) {
    return model_load(path_model, &params);
}

void llama_free_model(struct llama_model *model) {
    model_free(model);
}

int32_t llama_n_vocab(const struct llama_model *model) {
    return model ? (int32_t)model->hparams.n_vocab : 0;
}

int32_t llama_n_ctx_train(const struct llama_model *model) {
    return model ? (int32_t)model->hparams.n_ctx_train : 0;
}

int32_t llama_n_embd(const struct llama_model *model) {
    return model ? (int32_t)model->hparams.n_embd : 0;
}

float llama_rope_freq_scale_train(const struct llama_model *model) {
    return model ? model->hparams.rope_freq_scale_train : 0.0f;
}

/* snprintf's contract (length that would have been written) with an empty
 * string and -1 for failures, as b1892. */
static int32_t write_str(char *buf, size_t size, const char *s) {
    if (!s) {
        if (buf && size > 0) buf[0] = '\0';
        return -1;
    }
    return snprintf(buf, buf ? size : 0, "%s", s);
}

/* Metadata indices count only scalar keys (b1892 does not list arrays). */
static int64_t meta_index(const struct llama_model *model, int32_t i) {
    if (!model || i < 0) return -1;
    const struct gguf_reader *g = model->gguf;
    for (int64_t k = 0, n = 0; k < gguf_n_kv(g); k++) {
        if (gguf_kv_type(g, k) == GGUF_TYPE_ARRAY) continue;
        if (n++ == i) return k;
    }
    return -1;
}

int32_t llama_model_meta_val_str(const struct llama_model *model, const char *key, char *buf, size_t buf_size) {
    int64_t k = model && key ? gguf_find_key(model->gguf, key) : -1;
    if (k < 0 || gguf_kv_type(model->gguf, k) == GGUF_TYPE_ARRAY) return write_str(buf, buf_size, NULL);
    return gguf_kv_to_str(model->gguf, k, buf, buf_size);
}

int32_t llama_model_meta_count(const struct llama_model *model) {
    if (!model) return 0;
    int32_t n = 0;
    for (int64_t k = 0; k < gguf_n_kv(model->gguf); k++) n += gguf_kv_type(model->gguf, k) != GGUF_TYPE_ARRAY;
    return n;
}

int32_t llama_model_meta_key_by_index(const struct llama_model *model, int32_t i, char *buf, size_t buf_size) {
    int64_t k = meta_index(model, i);
    return write_str(buf, buf_size, k < 0 ? NULL : gguf_key(model->gguf, k));
}

int32_t llama_model_meta_val_str_by_index(const struct llama_model *model, int32_t i, char *buf, size_t buf_size) {
    int64_t k = meta_index(model, i);
    if (k < 0) return write_str(buf, buf_size, NULL);
    return gguf_kv_to_str(model->gguf, k, buf, buf_size);
}

int32_t llama_model_desc(const struct llama_model *model, char *buf, size_t buf_size) {
    if (!model) return write_str(buf, buf_size, NULL);
    const bool guessed = (model->ftype & LLAMA_FTYPE_GUESSED) != 0;
    return snprintf(buf, buf ? buf_size : 0, "%s %s %s%s", model_arch_name(model->arch), model_type_name(model->type),
                    model_ftype_name(model->ftype), guessed ? " (guessed)" : "");
}

uint64_t llama_model_size(const struct llama_model *model) {
    return model ? model->n_bytes : 0;
}

uint64_t llama_model_n_params(const struct llama_model *model) {
    return model ? model->n_elements : 0;
}

struct ggml_tensor *llama_get_model_tensor(struct llama_model *model, const char *name) {
    if (!model || !name || !model->weights_ctx) return NULL;
    for (struct tensor *t = tensor_ctx_first(model->weights_ctx); t; t = tensor_ctx_next(model->weights_ctx, t)) {
        if (strcmp(t->name, name) == 0) return (struct ggml_tensor *)t;
    }
    return NULL;
}

/* b1892 takes the model as const and changes its weights anyway; so do we. */
int32_t llama_model_apply_lora_from_file(const struct llama_model *model, const char *path_lora, float scale,
                                         const char *path_base_model, int32_t n_threads) {
    if (!model || !path_lora) {
        error_set("llama_model_apply_lora_from_file: model and adapter path are required");
        return 1;
    }
    return lora_apply((struct llama_model *)model, path_lora, scale, path_base_model, n_threads);
}

int32_t llama_apply_lora_from_file(struct llama_context *ctx, const char *path_lora, float scale,
                                   const char *path_base_model, int32_t n_threads) {
    if (!ctx) {
        error_set("llama_apply_lora_from_file: context is NULL");
        return 1;
    }
    return llama_model_apply_lora_from_file(ctx->model, path_lora, scale, path_base_model, n_threads);
}

/*
 * LoRA adapters in b1892's `ggla` format, applied to a loaded model's weights:
 * W += (alpha / r) * scale * B·A for every adapted weight.
 *
 * File: u32 magic 'ggla', u32 version 1, i32 r, i32 alpha, then per tensor
 * i32 n_dims, i32 name length, i32 type (0 = F32, 1 = F16), n_dims i32
 * shape values, the name "<weight name>.loraA" or ".loraB", padding to 32
 * bytes, the data. A is [r, n_in] (F32), B is [r, n_out].
 *
 * The whole file is validated before any weight changes. Weights that live
 * in the model file's memory are copied first (the mapping is read-only).
 */
#ifndef LLAMAC_MODEL_LORA_H
#define LLAMAC_MODEL_LORA_H

#include "model/model.h"

/* 0 on success; 1 with error_set() on failure (the model is then unchanged).
 * base_path, when not NULL, is a model of the same shape whose (higher
 * precision) weights the adapter is added to before storing into ours. */
int lora_apply(struct llama_model *model, const char *lora_path, float scale, const char *base_path, int n_threads);

#endif

/*
 * Random-weight LLaMA models for benchmarks and tests: a GGUF file of a
 * given shape (presets for the shapes the performance targets name) whose
 * vocabulary is copied from a vocabulary-only GGUF (the 32000-token SPM
 * vocabulary of ggml-vocab-llama.gguf), with every matrix drawn from
 * N(0, 0.02^2) and every norm weight 1.
 *
 * The file is streamed to disk tensor by tensor (gguf_stream_*): a 7B F16
 * model (13 GB) is never held in memory. Values come from a seeded
 * xoshiro256+ generator per tensor through Box-Muller, so the same seed and
 * shape give the same file.
 */
#ifndef LLAMAC_MODEL_MODEL_RANDOM_H
#define LLAMAC_MODEL_MODEL_RANDOM_H

#include <stdbool.h>
#include <stdint.h>

#include "ggml.h"

struct model_random_shape {
    const char *name;        /* general.name */
    uint32_t n_embd;
    uint32_t n_layer;
    uint32_t n_head;
    uint32_t n_head_kv;
    uint32_t n_ff;
    uint32_t n_ctx_train;
    uint32_t n_expert;       /* 0: dense feed-forward */
    uint32_t n_expert_used;
    float rope_freq_base;
    float norm_rms_eps;
};

/* The preset called `name` ("tinyllama", "llama7b", "mixtral", "tiny",
 * "tiny-moe"); false (error_set) for an unknown name. */
bool model_random_preset(const char *name, struct model_random_shape *out);
/* The preset names, NULL-terminated (for help texts). */
const char *const *model_random_preset_names(void);

struct model_random_params {
    struct model_random_shape shape;
    enum ggml_type type;     /* of the matrices: GGML_TYPE_F32 or GGML_TYPE_F16 (norms stay F32) */
    uint64_t seed;
    const char *vocab_path;  /* GGUF whose tokenizer.* keys are copied */
};

/* Writes the model to out_path. False (error_set, partial file removed) on a
 * bad shape or type, an unreadable vocabulary, or a write error. */
bool model_random_write(const struct model_random_params *p, const char *out_path);

#endif

/*
 * ggml.h — the few ggml names that llama.h uses.
 *
 * llama.cpp's llama.h includes ggml.h for the tensor element types, the log
 * callback and an opaque tensor type. llamac is not ggml: this header carries
 * exactly those names, with ggml's numbering, so programs written against
 * llama.cpp b1892 compile unchanged.
 */
#ifndef GGML_H
#define GGML_H

#ifdef __cplusplus
extern "C" {
#endif

/* Tensor element types, numbered as in GGUF files (a file format contract). */
enum ggml_type {
    GGML_TYPE_F32     = 0,
    GGML_TYPE_F16     = 1,
    GGML_TYPE_Q4_0    = 2,
    GGML_TYPE_Q4_1    = 3,
    /* 4 and 5 (Q4_2, Q4_3) were removed before GGUF existed */
    GGML_TYPE_Q5_0    = 6,
    GGML_TYPE_Q5_1    = 7,
    GGML_TYPE_Q8_0    = 8,
    GGML_TYPE_Q8_1    = 9,
    GGML_TYPE_Q2_K    = 10,
    GGML_TYPE_Q3_K    = 11,
    GGML_TYPE_Q4_K    = 12,
    GGML_TYPE_Q5_K    = 13,
    GGML_TYPE_Q6_K    = 14,
    GGML_TYPE_Q8_K    = 15,
    GGML_TYPE_IQ2_XXS = 16,
    GGML_TYPE_IQ2_XS  = 17,
    GGML_TYPE_I8      = 18,
    GGML_TYPE_I16     = 19,
    GGML_TYPE_I32     = 20,
    GGML_TYPE_COUNT   = 21
};

enum ggml_log_level {
    GGML_LOG_LEVEL_ERROR = 2,
    GGML_LOG_LEVEL_WARN  = 3,
    GGML_LOG_LEVEL_INFO  = 4
};

typedef void (*ggml_log_callback)(enum ggml_log_level level, const char *text, void *user_data);

/* Opaque: llama_get_model_tensor() hands one out; its layout is private. */
struct ggml_tensor;

#ifdef __cplusplus
}
#endif

#endif /* GGML_H */

/* llama.h: default parameters, library set-up, system information, logging. */
#include <stdio.h>

#include "core/cpu_features.h"
#include "core/file_map.h"
#include "core/log.h"
#include "core/timer.h"
#include "llama.h"

struct llama_model_params llama_model_default_params(void) {
    struct llama_model_params p = {
        .n_gpu_layers = 0,
        .split_mode = LLAMA_SPLIT_LAYER,
        .main_gpu = 0,
        .tensor_split = NULL,
        .progress_callback = NULL,
        .progress_callback_user_data = NULL,
        .kv_overrides = NULL,
        .vocab_only = false,
        .use_mmap = true,
        .use_mlock = false,
    };
    return p;
}

struct llama_context_params llama_context_default_params(void) {
    struct llama_context_params p = {
        .seed = LLAMA_DEFAULT_SEED,
        .n_ctx = 512,
        .n_batch = 512,
        .n_threads = 4,
        .n_threads_batch = 4,
        .rope_scaling_type = LLAMA_ROPE_SCALING_UNSPECIFIED,
        .rope_freq_base = 0.0f,
        .rope_freq_scale = 0.0f,
        .yarn_ext_factor = -1.0f,
        .yarn_attn_factor = 1.0f,
        .yarn_beta_fast = 32.0f,
        .yarn_beta_slow = 1.0f,
        .yarn_orig_ctx = 0,
        .type_k = GGML_TYPE_F16,
        .type_v = GGML_TYPE_F16,
        .mul_mat_q = true,
        .logits_all = false,
        .embedding = false,
        .offload_kqv = true,
    };
    return p;
}

struct llama_model_quantize_params llama_model_quantize_default_params(void) {
    struct llama_model_quantize_params p = {
        .nthread = 0,
        .ftype = LLAMA_FTYPE_MOSTLY_Q5_1,
        .allow_requantize = false,
        .quantize_output_tensor = true,
        .only_copy = false,
        .pure = false,
        .imatrix = NULL,
    };
    return p;
}

void llama_backend_init(bool numa) {
    (void)numa; /* a single NUMA node is all llamac schedules for */
    cpu_features_get();
}

void llama_backend_free(void) {
}

int64_t llama_time_us(void) {
    return time_us();
}

int32_t llama_max_devices(void) {
    return LLAMA_MAX_DEVICES;
}

bool llama_mmap_supported(void) {
    return file_map_mmap_supported();
}

bool llama_mlock_supported(void) {
    return file_map_mlock_supported();
}

/* b1892's format; the flags say which kernels this process uses (chosen at run time). */
const char *llama_print_system_info(void) {
    static char buf[512];
    const struct cpu_features *f = cpu_features_get();
    snprintf(buf, sizeof buf,
             "AVX = %d | AVX_VNNI = %d | AVX2 = %d | AVX512 = %d | AVX512_VBMI = %d | AVX512_VNNI = %d | "
             "FMA = %d | NEON = %d | ARM_FMA = %d | F16C = %d | FP16_VA = %d | WASM_SIMD = %d | BLAS = %d | "
             "SSE3 = %d | SSSE3 = %d | VSX = %d | ",
             f->avx, f->avx_vnni, f->avx2, f->avx512f, f->avx512vbmi, f->avx512vnni, f->fma, f->neon, f->arm_fma,
             f->f16c, 0, 0, 0, f->sse3, f->ssse3, 0);
    return buf;
}

void llama_log_set(ggml_log_callback log_callback, void *user_data) {
    log_set_callback(log_callback, user_data);
}

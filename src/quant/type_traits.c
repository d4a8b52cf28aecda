#include "quant.h"

#include <pthread.h>

#include "core/checked.h"
#include "quant_impl.h"
#include "quant_simd.h"

/* Block sizes and byte sizes are the on-disk contract (ggml's block structs);
 * the functions are the scalar definitions. */
static const struct type_traits g_scalar[GGML_TYPE_COUNT] = {
    [GGML_TYPE_F32] = {
        .name = "f32", .blck_size = 1, .type_size = 4,
        .to_float = quant_f32_copy, .from_float = quant_f32_from_float,
        .from_float_reference = quant_f32_from_float,
        .vec_dot = quant_f32_dot, .vec_dot_type = GGML_TYPE_F32,
    },
    [GGML_TYPE_F16] = {
        .name = "f16", .blck_size = 1, .type_size = 2,
        .to_float = quant_f16_to_float, .from_float = quant_f16_from_float,
        .from_float_reference = quant_f16_from_float,
        .vec_dot = quant_f16_dot, .vec_dot_type = GGML_TYPE_F16,
    },
    [GGML_TYPE_Q4_0] = {
        .name = "q4_0", .blck_size = QK4_0, .type_size = sizeof(block_q4_0), .is_quantized = true,
        .to_float = quant_q4_0_dequantize, .from_float = quant_q4_0_quantize_ref,
        .from_float_reference = quant_q4_0_quantize_ref,
        .vec_dot = quant_q4_0_dot_q8_0, .vec_dot_type = GGML_TYPE_Q8_0,
    },
    [GGML_TYPE_Q4_1] = {
        .name = "q4_1", .blck_size = QK4_1, .type_size = sizeof(block_q4_1), .is_quantized = true,
        .to_float = quant_q4_1_dequantize, .from_float = quant_q4_1_quantize_ref,
        .from_float_reference = quant_q4_1_quantize_ref,
        .vec_dot = quant_q4_1_dot_q8_1, .vec_dot_type = GGML_TYPE_Q8_1,
    },
    [GGML_TYPE_Q5_0] = {
        .name = "q5_0", .blck_size = QK5_0, .type_size = sizeof(block_q5_0), .is_quantized = true,
        .to_float = quant_q5_0_dequantize, .from_float = quant_q5_0_quantize_ref,
        .from_float_reference = quant_q5_0_quantize_ref,
        .vec_dot = quant_q5_0_dot_q8_0, .vec_dot_type = GGML_TYPE_Q8_0,
    },
    [GGML_TYPE_Q5_1] = {
        .name = "q5_1", .blck_size = QK5_1, .type_size = sizeof(block_q5_1), .is_quantized = true,
        .to_float = quant_q5_1_dequantize, .from_float = quant_q5_1_quantize_ref,
        .from_float_reference = quant_q5_1_quantize_ref,
        .vec_dot = quant_q5_1_dot_q8_1, .vec_dot_type = GGML_TYPE_Q8_1,
    },
    [GGML_TYPE_Q8_0] = {
        .name = "q8_0", .blck_size = QK8_0, .type_size = sizeof(block_q8_0), .is_quantized = true,
        .to_float = quant_q8_0_dequantize, .from_float = quant_q8_0_quantize_act,
        .from_float_reference = quant_q8_0_quantize_ref,
        .vec_dot = quant_q8_0_dot_q8_0, .vec_dot_type = GGML_TYPE_Q8_0,
    },
    [GGML_TYPE_Q8_1] = {
        .name = "q8_1", .blck_size = QK8_1, .type_size = sizeof(block_q8_1), .is_quantized = true,
        .to_float = quant_q8_1_dequantize, .from_float = quant_q8_1_quantize_act,
        .from_float_reference = quant_q8_1_quantize_ref,
        .vec_dot_type = GGML_TYPE_Q8_1,
    },
    [GGML_TYPE_Q2_K] = {
        .name = "q2_K", .blck_size = QK_K, .type_size = sizeof(block_q2_K), .is_quantized = true,
        .to_float = quant_q2_K_dequantize, .from_float = quant_q2_K_quantize_ref,
        .from_float_reference = quant_q2_K_quantize_ref,
        .vec_dot = quant_q2_K_dot_q8_K, .vec_dot_type = GGML_TYPE_Q8_K,
    },
    [GGML_TYPE_Q3_K] = {
        .name = "q3_K", .blck_size = QK_K, .type_size = sizeof(block_q3_K), .is_quantized = true,
        .to_float = quant_q3_K_dequantize, .from_float = quant_q3_K_quantize_ref,
        .from_float_reference = quant_q3_K_quantize_ref,
        .vec_dot = quant_q3_K_dot_q8_K, .vec_dot_type = GGML_TYPE_Q8_K,
    },
    [GGML_TYPE_Q4_K] = {
        .name = "q4_K", .blck_size = QK_K, .type_size = sizeof(block_q4_K), .is_quantized = true,
        .to_float = quant_q4_K_dequantize, .from_float = quant_q4_K_quantize_ref,
        .from_float_reference = quant_q4_K_quantize_ref,
        .vec_dot = quant_q4_K_dot_q8_K, .vec_dot_type = GGML_TYPE_Q8_K,
    },
    [GGML_TYPE_Q5_K] = {
        .name = "q5_K", .blck_size = QK_K, .type_size = sizeof(block_q5_K), .is_quantized = true,
        .to_float = quant_q5_K_dequantize, .from_float = quant_q5_K_quantize_ref,
        .from_float_reference = quant_q5_K_quantize_ref,
        .vec_dot = quant_q5_K_dot_q8_K, .vec_dot_type = GGML_TYPE_Q8_K,
    },
    [GGML_TYPE_Q6_K] = {
        .name = "q6_K", .blck_size = QK_K, .type_size = sizeof(block_q6_K), .is_quantized = true,
        .to_float = quant_q6_K_dequantize, .from_float = quant_q6_K_quantize_ref,
        .from_float_reference = quant_q6_K_quantize_ref,
        .vec_dot = quant_q6_K_dot_q8_K, .vec_dot_type = GGML_TYPE_Q8_K,
    },
    [GGML_TYPE_Q8_K] = {
        .name = "q8_K", .blck_size = QK_K, .type_size = sizeof(block_q8_K), .is_quantized = true,
        .to_float = quant_q8_K_dequantize, .from_float = quant_q8_K_quantize_ref,
        .from_float_reference = quant_q8_K_quantize_ref,
        .vec_dot_type = GGML_TYPE_Q8_K,
    },
    [GGML_TYPE_IQ2_XXS] = {
        .name = "iq2_xxs", .blck_size = QK_K, .type_size = sizeof(block_iq2_xxs), .is_quantized = true,
        .to_float = quant_iq2_xxs_dequantize,
        .vec_dot = quant_iq2_xxs_dot_q8_K, .vec_dot_type = GGML_TYPE_Q8_K,
    },
    [GGML_TYPE_IQ2_XS] = {
        .name = "iq2_xs", .blck_size = QK_K, .type_size = sizeof(block_iq2_xs), .is_quantized = true,
        .to_float = quant_iq2_xs_dequantize,
        .vec_dot = quant_iq2_xs_dot_q8_K, .vec_dot_type = GGML_TYPE_Q8_K,
    },
    [GGML_TYPE_I8]  = { .name = "i8",  .blck_size = 1, .type_size = 1 },
    [GGML_TYPE_I16] = { .name = "i16", .blck_size = 1, .type_size = 2 },
    [GGML_TYPE_I32] = { .name = "i32", .blck_size = 1, .type_size = 4 },
};

/* The engine's table: the scalar one with the functions of the best SIMD set
 * this CPU has put in (none under LLAMAC_SIMD=scalar). */
static struct type_traits g_active[GGML_TYPE_COUNT];
static enum quant_isa g_active_isa;
static pthread_once_t g_active_once = PTHREAD_ONCE_INIT;

static const char *const k_isa_names[QUANT_ISA_COUNT] = {
    [QUANT_ISA_SCALAR] = "scalar", [QUANT_ISA_AVX2] = "avx2", [QUANT_ISA_AVX_VNNI] = "avxvnni",
    [QUANT_ISA_AVX512_VNNI] = "avx512vnni", [QUANT_ISA_NEON] = "neon",
};

const char *quant_isa_name(enum quant_isa isa) {
    return (int)isa >= 0 && isa < QUANT_ISA_COUNT ? k_isa_names[isa] : "?";
}

bool quant_isa_supported(enum quant_isa isa) {
    switch (isa) {
        case QUANT_ISA_SCALAR: return true;
        case QUANT_ISA_NEON: return quant_neon_isa_supported();
        default: return quant_x86_isa_supported(isa);
    }
}

struct quant_kernels quant_isa_kernels(enum quant_isa isa, enum ggml_type type) {
    switch (isa) {
        case QUANT_ISA_SCALAR: return (struct quant_kernels){ 0 };
        case QUANT_ISA_NEON: return quant_neon_kernels(type);
        default: return quant_x86_isa_kernels(isa, type);
    }
}

static void active_init(void) {
    memcpy(g_active, g_scalar, sizeof g_active);
    g_active_isa = QUANT_ISA_SCALAR;
    for (int isa = QUANT_ISA_COUNT - 1; isa > QUANT_ISA_SCALAR; isa--) {
        if (quant_isa_supported((enum quant_isa)isa)) {
            g_active_isa = (enum quant_isa)isa;
            break;
        }
    }
    for (int t = 0; t < GGML_TYPE_COUNT; t++) {
        const struct quant_kernels k = quant_isa_kernels(g_active_isa, (enum ggml_type)t);
        if (k.vec_dot) g_active[t].vec_dot = k.vec_dot;
        if (k.from_float) g_active[t].from_float = k.from_float;
        if (k.to_float) g_active[t].to_float = k.to_float;
    }
}

enum quant_isa quant_isa_active(void) {
    pthread_once(&g_active_once, active_init);
    return g_active_isa;
}

bool type_is_valid(int type) {
    return type >= 0 && type < GGML_TYPE_COUNT && g_scalar[type].blck_size != 0;
}

const struct type_traits *type_traits_scalar_get(enum ggml_type type) {
    return type_is_valid((int)type) ? &g_scalar[type] : NULL;
}

const struct type_traits *type_traits_get(enum ggml_type type) {
    if (!type_is_valid((int)type)) return NULL;
    pthread_once(&g_active_once, active_init);
    return &g_active[type];
}

const char *type_name(enum ggml_type type) {
    return type_is_valid((int)type) ? g_scalar[type].name : "?";
}

bool type_row_size(enum ggml_type type, int64_t ne0, size_t *out) {
    const struct type_traits *tt = type_traits_scalar_get(type);
    if (!tt || ne0 < 0 || ne0 % tt->blck_size != 0) return false;
    return ck_mul_size((size_t)(ne0 / tt->blck_size), tt->type_size, out);
}

#include "quant.h"

#include "core/checked.h"

/* Block sizes and byte sizes are the on-disk contract (ggml's block structs). */
static struct type_traits g_traits[GGML_TYPE_COUNT] = {
    [GGML_TYPE_F32]     = { .name = "f32",     .blck_size = 1,   .type_size = 4 },
    [GGML_TYPE_F16]     = { .name = "f16",     .blck_size = 1,   .type_size = 2 },
    [GGML_TYPE_Q4_0]    = { .name = "q4_0",    .blck_size = 32,  .type_size = 18,  .is_quantized = true },
    [GGML_TYPE_Q4_1]    = { .name = "q4_1",    .blck_size = 32,  .type_size = 20,  .is_quantized = true },
    [GGML_TYPE_Q5_0]    = { .name = "q5_0",    .blck_size = 32,  .type_size = 22,  .is_quantized = true },
    [GGML_TYPE_Q5_1]    = { .name = "q5_1",    .blck_size = 32,  .type_size = 24,  .is_quantized = true },
    [GGML_TYPE_Q8_0]    = { .name = "q8_0",    .blck_size = 32,  .type_size = 34,  .is_quantized = true },
    [GGML_TYPE_Q8_1]    = { .name = "q8_1",    .blck_size = 32,  .type_size = 40,  .is_quantized = true },
    [GGML_TYPE_Q2_K]    = { .name = "q2_K",    .blck_size = 256, .type_size = 84,  .is_quantized = true },
    [GGML_TYPE_Q3_K]    = { .name = "q3_K",    .blck_size = 256, .type_size = 110, .is_quantized = true },
    [GGML_TYPE_Q4_K]    = { .name = "q4_K",    .blck_size = 256, .type_size = 144, .is_quantized = true },
    [GGML_TYPE_Q5_K]    = { .name = "q5_K",    .blck_size = 256, .type_size = 176, .is_quantized = true },
    [GGML_TYPE_Q6_K]    = { .name = "q6_K",    .blck_size = 256, .type_size = 210, .is_quantized = true },
    [GGML_TYPE_Q8_K]    = { .name = "q8_K",    .blck_size = 256, .type_size = 292, .is_quantized = true },
    [GGML_TYPE_IQ2_XXS] = { .name = "iq2_xxs", .blck_size = 256, .type_size = 66,  .is_quantized = true },
    [GGML_TYPE_IQ2_XS]  = { .name = "iq2_xs",  .blck_size = 256, .type_size = 74,  .is_quantized = true },
    [GGML_TYPE_I8]      = { .name = "i8",      .blck_size = 1,   .type_size = 1 },
    [GGML_TYPE_I16]     = { .name = "i16",     .blck_size = 1,   .type_size = 2 },
    [GGML_TYPE_I32]     = { .name = "i32",     .blck_size = 1,   .type_size = 4 },
};

bool type_is_valid(int type) {
    return type >= 0 && type < GGML_TYPE_COUNT && g_traits[type].blck_size != 0;
}

const struct type_traits *type_traits_get(enum ggml_type type) {
    return type_is_valid((int)type) ? &g_traits[type] : NULL;
}

const char *type_name(enum ggml_type type) {
    return type_is_valid((int)type) ? g_traits[type].name : "?";
}

bool type_row_size(enum ggml_type type, int64_t ne0, size_t *out) {
    const struct type_traits *tt = type_traits_get(type);
    if (!tt || ne0 < 0 || ne0 % tt->blck_size != 0) return false;
    return ck_mul_size((size_t)(ne0 / tt->blck_size), tt->type_size, out);
}

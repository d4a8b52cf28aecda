/*
 * Row conversions between element types, and b1892's F16 function tables.
 */
#include <math.h>
#include <pthread.h>
#include <string.h>

#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/cpu_vec.h"
#include "core/fp16.h"
#include "quant/quant.h"

bool cpu_type_to_float_ok(enum ggml_type type) {
    if (type == GGML_TYPE_F32 || type == GGML_TYPE_F16 || type == GGML_TYPE_I32) return true;
    const struct type_traits *tt = type_traits_get(type);
    return tt && tt->is_quantized && tt->to_float;
}

bool cpu_type_from_float_ok(enum ggml_type type) {
    if (type == GGML_TYPE_F32 || type == GGML_TYPE_F16) return true;
    const struct type_traits *tt = type_traits_get(type);
    return tt && tt->is_quantized && tt->from_float;
}

void cpu_row_to_float(enum ggml_type type, const void *src, size_t stride, float *dst, int64_t ne) {
    const char *p = src;
    switch (type) {
        case GGML_TYPE_F32:
            for (int64_t i = 0; i < ne; i++) memcpy(&dst[i], p + i * stride, sizeof(float));
            return;
        case GGML_TYPE_F16:
            if (stride == sizeof(fp16_t)) {
                type_traits_get(type)->to_float(src, dst, ne);
                return;
            }
            for (int64_t i = 0; i < ne; i++) {
                fp16_t h;
                memcpy(&h, p + i * stride, sizeof h);
                dst[i] = fp16_to_fp32(h);
            }
            return;
        case GGML_TYPE_I32:
            for (int64_t i = 0; i < ne; i++) {
                int32_t v;
                memcpy(&v, p + i * stride, sizeof v);
                dst[i] = (float)v;
            }
            return;
        default:
            type_traits_get(type)->to_float(src, dst, ne);
            return;
    }
}

void cpu_row_from_float(enum ggml_type type, const float *src, void *dst, int64_t ne) {
    switch (type) {
        case GGML_TYPE_F32:
            memcpy(dst, src, (size_t)ne * sizeof(float));
            return;
        default: /* F16 and the quantized types */
            type_traits_get(type)->from_float(src, dst, ne);
            return;
    }
}

/* ---- F16 tables ---------------------------------------------------------------
 *
 * b1892 (ggml.c, ggml_init) fills, for every half-precision bit pattern h,
 * table[h] = fp16(f(fp32(h))) for f = gelu, gelu_quick, silu and expf, and
 * with GGML_GELU_FP16, GGML_GELU_QUICK_FP16 and GGML_SILU_FP16 defined its
 * element-wise gelu/gelu_quick/silu and soft_max's exp are lookups of the
 * input rounded to F16. The outputs are therefore F16 values; we reproduce
 * this because silu and soft_max feed every LLaMA layer and the golden logits
 * carry these roundings.
 */
static fp16_t g_table_exp[(1 << 16) + CPU_TABLE_PAD];
static fp16_t g_table_silu[(1 << 16) + CPU_TABLE_PAD];
static fp16_t g_table_gelu[(1 << 16) + CPU_TABLE_PAD];
static fp16_t g_table_gelu_quick[(1 << 16) + CPU_TABLE_PAD];
static pthread_once_t g_tables_once = PTHREAD_ONCE_INIT;

static const float GELU_COEF_A = 0.044715f;
static const float GELU_QUICK_COEF = -1.702f;
static const float SQRT_2_OVER_PI = 0.79788456080286535587989211986876f;

static void cpu_tables_fill(void) {
    for (uint32_t h = 0; h < (1u << 16); h++) {
        const float x = fp16_to_fp32((fp16_t)h);
        g_table_exp[h] = fp32_to_fp16(expf(x));
        g_table_silu[h] = fp32_to_fp16(x / (1.0f + expf(-x)));
        g_table_gelu[h] = fp32_to_fp16(0.5f * x * (1.0f + tanhf(SQRT_2_OVER_PI * x * (1.0f + GELU_COEF_A * x * x))));
        g_table_gelu_quick[h] = fp32_to_fp16(x * (1.0f / (1.0f + expf(GELU_QUICK_COEF * x))));
    }
}

void cpu_tables_init(void) {
    pthread_once(&g_tables_once, cpu_tables_fill);
}

const fp16_t *cpu_table_data(enum cpu_table_id id) {
    switch (id) {
        case CPU_TABLE_EXP: return g_table_exp;
        case CPU_TABLE_SILU: return g_table_silu;
        case CPU_TABLE_GELU: return g_table_gelu;
        default: return g_table_gelu_quick;
    }
}

float cpu_table_exp(float x) { return fp16_to_fp32(g_table_exp[fp32_to_fp16(x)]); }
float cpu_table_silu(float x) { return fp16_to_fp32(g_table_silu[fp32_to_fp16(x)]); }
float cpu_table_gelu(float x) { return fp16_to_fp32(g_table_gelu[fp32_to_fp16(x)]); }
float cpu_table_gelu_quick(float x) { return fp16_to_fp32(g_table_gelu_quick[fp32_to_fp16(x)]); }

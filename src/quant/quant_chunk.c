/* Quantizing whole rows of a tensor (b1892's ggml_quantize_chunk). */
#include "quant.h"

#include "core/checked.h"
#include "core/log.h"
#include "quant_impl.h"

bool quant_requires_imatrix(enum ggml_type type) {
    return type == GGML_TYPE_IQ2_XXS || type == GGML_TYPE_IQ2_XS;
}

typedef void (*row_imatrix_fn)(const float *x, void *y, int64_t n, const float *qw);

static row_imatrix_fn k_quant_imatrix_fn(enum ggml_type type) {
    switch (type) {
    case GGML_TYPE_Q2_K: return quant_q2_K_quantize_imatrix;
    case GGML_TYPE_Q3_K: return quant_q3_K_quantize_imatrix;
    case GGML_TYPE_Q4_K: return quant_q4_K_quantize_imatrix;
    case GGML_TYPE_Q5_K: return quant_q5_K_quantize_imatrix;
    case GGML_TYPE_Q6_K: return quant_q6_K_quantize_imatrix;
    default: return NULL;
    }
}

static bool is_quantization_target(enum ggml_type type) {
    switch (type) {
    case GGML_TYPE_F32: case GGML_TYPE_F16:
    case GGML_TYPE_Q4_0: case GGML_TYPE_Q4_1: case GGML_TYPE_Q5_0: case GGML_TYPE_Q5_1: case GGML_TYPE_Q8_0:
    case GGML_TYPE_Q2_K: case GGML_TYPE_Q3_K: case GGML_TYPE_Q4_K: case GGML_TYPE_Q5_K: case GGML_TYPE_Q6_K:
    case GGML_TYPE_IQ2_XXS: case GGML_TYPE_IQ2_XS:
        return true;
    default:
        return false;
    }
}

size_t quant_quantize_chunk(enum ggml_type type, const float *src, void *dst, int64_t start,
                            int64_t nrows, int64_t n_per_row, int64_t *hist, const float *imatrix) {
    const struct type_traits *tt = type_traits_scalar_get(type);
    if (!tt || !is_quantization_target(type)) {
        error_set("quantize: %s is not a quantization target type", type_name(type));
        return 0;
    }
    size_t row_size, total;
    if (n_per_row <= 0 || nrows < 0 || start < 0 || start % n_per_row != 0 ||
        !type_row_size(type, n_per_row, &row_size) || !ck_mul_size(row_size, (size_t)nrows, &total)) {
        error_set("quantize: bad chunk for %s (start %lld, %lld rows of %lld)", tt->name, (long long)start,
                  (long long)nrows, (long long)n_per_row);
        return 0;
    }
    if (quant_requires_imatrix(type) && !imatrix) {
        error_set("quantize: %s needs an importance matrix", tt->name);
        return 0;
    }
    const float *x = src + start;
    char *y = (char *)dst + (size_t)(start / n_per_row) * row_size;
    const row_imatrix_fn k_imatrix = imatrix ? k_quant_imatrix_fn(type) : NULL;
    for (int64_t r = 0; r < nrows; r++, x += n_per_row, y += row_size) {
        if (type == GGML_TYPE_IQ2_XXS || type == GGML_TYPE_IQ2_XS) {
            const bool ok = type == GGML_TYPE_IQ2_XXS ? quant_iq2_xxs_quantize_imatrix(x, y, n_per_row, imatrix)
                                                      : quant_iq2_xs_quantize_imatrix(x, y, n_per_row, imatrix);
            if (!ok) return 0;
        } else if (k_imatrix) {
            k_imatrix(x, y, n_per_row, imatrix);
        } else {
            tt->from_float_reference(x, y, n_per_row);
            if (hist) quant_legacy_histogram(type, y, n_per_row / tt->blck_size, hist);
        }
    }
    return total;
}

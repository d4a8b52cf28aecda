/*
 * Element types on synthetic data: layouts, quantize -> dequantize error and
 * dot-product error within b1892's budgets (measured the way b1892's
 * tests/test-quantize-fns.cpp measures them), dot products equal to the dot
 * of the dequantized rows, the chunk API, and the IQ2 codebooks.
 */
#include "test_util.h"

#include "core/log.h"
#include "quant/iq2_tables.h"
#include "quant/quant.h"

/* b1892 test-quantize-fns.cpp budgets. */
#define MAX_QUANTIZATION_TOTAL_ERROR 0.002f
#define MAX_QUANTIZATION_TOTAL_ERROR_3BITS 0.004f
#define MAX_QUANTIZATION_TOTAL_ERROR_2BITS 0.0075f
#define MAX_QUANTIZATION_REFERENCE_ERROR 0.0001f
#define MAX_DOT_PRODUCT_ERROR 0.02f
/* b1892's test has no IQ2 case (those types have no from_float there); on
 * its data IQ2_XXS, at 2.06 bits, measures 0.043 (our quantizer gives b1892's
 * bytes on real tensors, see test_quant_files), so it gets a low-bit budget. */
#define MAX_DOT_PRODUCT_ERROR_IQ2_XXS 0.05f

#define TEST_SIZE (32 * 128)

static const enum ggml_type k_weight_types[] = {
    GGML_TYPE_F16, GGML_TYPE_Q4_0, GGML_TYPE_Q4_1, GGML_TYPE_Q5_0, GGML_TYPE_Q5_1, GGML_TYPE_Q8_0,
    GGML_TYPE_Q2_K, GGML_TYPE_Q3_K, GGML_TYPE_Q4_K, GGML_TYPE_Q5_K, GGML_TYPE_Q6_K,
    GGML_TYPE_IQ2_XXS, GGML_TYPE_IQ2_XS,
};

/* b1892's synthetic rows. */
static void generate_data(float offset, float *dst, int n) {
    for (int i = 0; i < n; i++) dst[i] = 0.1f + 2 * cosf((float)i + offset);
}

/* b1892's "rmse": sqrt(sum of squared differences) / n. */
static float array_rmse(const float *a, const float *b, int n) {
    double sum = 0;
    for (int i = 0; i < n; i++) {
        const double diff = (double)a[i] - b[i];
        sum += diff * diff;
    }
    return (float)(sqrt(sum) / n);
}

static float budget_for(enum ggml_type type) {
    switch (type) {
    case GGML_TYPE_Q2_K: case GGML_TYPE_IQ2_XXS: case GGML_TYPE_IQ2_XS: return MAX_QUANTIZATION_TOTAL_ERROR_2BITS;
    case GGML_TYPE_Q3_K: return MAX_QUANTIZATION_TOTAL_ERROR_3BITS;
    default: return MAX_QUANTIZATION_TOTAL_ERROR;
    }
}

static uint8_t g_q1[TEST_SIZE * 4], g_q2[TEST_SIZE * 4];
static float g_imatrix[TEST_SIZE];

/* Quantizes a weight row: from_float where the type has one, else (IQ2) the
 * chunk API with a uniform importance matrix. */
static bool quantize_weights(enum ggml_type type, const float *src, void *dst, int n) {
    const struct type_traits *tt = type_traits_get(type);
    if (tt->from_float) {
        tt->from_float(src, dst, n);
        return true;
    }
    size_t row_size;
    if (!type_row_size(type, n, &row_size)) return false;
    return quant_quantize_chunk(type, src, dst, 0, 1, n, NULL, g_imatrix) == row_size;
}

static double dot_f64(const float *a, const float *b, int n) {
    double sum = 0;
    for (int i = 0; i < n; i++) sum += (double)a[i] * b[i];
    return sum;
}

static void test_layouts(void) {
    static const struct { enum ggml_type type; int64_t blck; size_t size; const char *name; } expect[] = {
        { GGML_TYPE_F32, 1, 4, "f32" },         { GGML_TYPE_F16, 1, 2, "f16" },
        { GGML_TYPE_Q4_0, 32, 18, "q4_0" },     { GGML_TYPE_Q4_1, 32, 20, "q4_1" },
        { GGML_TYPE_Q5_0, 32, 22, "q5_0" },     { GGML_TYPE_Q5_1, 32, 24, "q5_1" },
        { GGML_TYPE_Q8_0, 32, 34, "q8_0" },     { GGML_TYPE_Q8_1, 32, 40, "q8_1" },
        { GGML_TYPE_Q2_K, 256, 84, "q2_K" },    { GGML_TYPE_Q3_K, 256, 110, "q3_K" },
        { GGML_TYPE_Q4_K, 256, 144, "q4_K" },   { GGML_TYPE_Q5_K, 256, 176, "q5_K" },
        { GGML_TYPE_Q6_K, 256, 210, "q6_K" },   { GGML_TYPE_Q8_K, 256, 292, "q8_K" },
        { GGML_TYPE_IQ2_XXS, 256, 66, "iq2_xxs" }, { GGML_TYPE_IQ2_XS, 256, 74, "iq2_xs" },
        { GGML_TYPE_I8, 1, 1, "i8" },           { GGML_TYPE_I16, 1, 2, "i16" },
        { GGML_TYPE_I32, 1, 4, "i32" },
    };
    for (size_t i = 0; i < sizeof expect / sizeof expect[0]; i++) {
        const struct type_traits *tt = type_traits_get(expect[i].type);
        CHECK(tt != NULL);
        if (!tt) continue;
        CHECK_EQ_INT(tt->blck_size, expect[i].blck);
        CHECK_EQ_INT(tt->type_size, expect[i].size);
        CHECK_STR_EQ(tt->name, expect[i].name);
        CHECK(type_traits_scalar_get(expect[i].type) != NULL);
    }
    CHECK(!type_is_valid(4) && !type_is_valid(5) && !type_is_valid(-1) && !type_is_valid(GGML_TYPE_COUNT));
    CHECK(type_traits_get((enum ggml_type)4) == NULL);
    CHECK_STR_EQ(type_name((enum ggml_type)5), "?");
    size_t rs;
    CHECK(type_row_size(GGML_TYPE_Q4_K, 512, &rs) && rs == 288);
    CHECK(!type_row_size(GGML_TYPE_Q4_K, 500, &rs));
    /* b1892's pairings of weights and activations. */
    CHECK_EQ_INT(type_traits_get(GGML_TYPE_Q4_1)->vec_dot_type, GGML_TYPE_Q8_1);
    CHECK_EQ_INT(type_traits_get(GGML_TYPE_Q5_0)->vec_dot_type, GGML_TYPE_Q8_0);
    CHECK_EQ_INT(type_traits_get(GGML_TYPE_IQ2_XS)->vec_dot_type, GGML_TYPE_Q8_K);
    CHECK_EQ_INT(type_traits_get(GGML_TYPE_F16)->vec_dot_type, GGML_TYPE_F16);
}

/* Quantization and dot-product error per type, and vec_dot == dot of the
 * dequantized operands. */
static void test_errors(void) {
    float *data1 = malloc(TEST_SIZE * sizeof(float)), *data2 = malloc(TEST_SIZE * sizeof(float));
    float *out1 = malloc(TEST_SIZE * sizeof(float)), *out2 = malloc(TEST_SIZE * sizeof(float));
    generate_data(0.0f, data1, TEST_SIZE);
    generate_data(1.0f, data2, TEST_SIZE);
    for (int i = 0; i < TEST_SIZE; i++) g_imatrix[i] = 1.0f;
    const double dot_ref = dot_f64(data1, data2, TEST_SIZE);

    printf("%-8s %12s %12s %12s\n", "type", "quant err", "ref err", "dot err");
    for (size_t t = 0; t < sizeof k_weight_types / sizeof k_weight_types[0]; t++) {
        const enum ggml_type type = k_weight_types[t];
        const struct type_traits *tt = type_traits_get(type);
        const struct type_traits *vt = type_traits_get(tt->vec_dot_type);

        CHECK(quantize_weights(type, data1, g_q1, TEST_SIZE));
        tt->to_float(g_q1, out1, TEST_SIZE);
        const float quant_err = array_rmse(data1, out1, TEST_SIZE);
        CHECK_MSG(quant_err < budget_for(type), "%s quantization error %g", tt->name, quant_err);

        float ref_err = 0;
        if (tt->from_float_reference) {
            tt->from_float_reference(data1, g_q2, TEST_SIZE);
            tt->to_float(g_q2, out2, TEST_SIZE);
            ref_err = array_rmse(out1, out2, TEST_SIZE);
            CHECK_MSG(ref_err < MAX_QUANTIZATION_REFERENCE_ERROR, "%s reference error %g", tt->name, ref_err);
        }

        vt->from_float(data2, g_q2, TEST_SIZE);
        float result = INFINITY;
        tt->vec_dot(TEST_SIZE, &result, g_q1, g_q2);
        const float dot_err = (float)(fabs(result - dot_ref) / TEST_SIZE);
        const float dot_budget = type == GGML_TYPE_IQ2_XXS ? MAX_DOT_PRODUCT_ERROR_IQ2_XXS : MAX_DOT_PRODUCT_ERROR;
        CHECK_MSG(dot_err < dot_budget, "%s dot product error %g", tt->name, dot_err);
        printf("%-8s %12.6f %12.6f %12.6f\n", tt->name, quant_err, ref_err, dot_err);

        /* vec_dot is the dot of what the two rows dequantize to. */
        vt->to_float(g_q2, out2, TEST_SIZE);
        double exact = 0, magnitude = 0;
        for (int i = 0; i < TEST_SIZE; i++) {
            exact += (double)out1[i] * out2[i];
            magnitude += fabs((double)out1[i] * out2[i]);
        }
        CHECK_MSG(fabs(result - exact) <= 1e-5 * magnitude, "%s vec_dot %.9g vs dequantized dot %.9g",
                  tt->name, result, exact);
    }
    free(data1);
    free(data2);
    free(out1);
    free(out2);
}

/* Random rows with outliers and zero blocks: dot == dequantized dot for every
 * weight type, and every activation type round-trips within its precision. */
static void test_random_rows(void) {
    const int n = 1024;
    float *a = malloc(n * sizeof(float)), *b = malloc(n * sizeof(float));
    float *da = malloc(n * sizeof(float)), *db = malloc(n * sizeof(float));
    uint64_t rng = 0x1234567;
    for (int trial = 0; trial < 4; trial++) {
        for (int i = 0; i < n; i++) {
            a[i] = test_rand_uniform(&rng, -1.0f, 1.0f);
            b[i] = test_rand_uniform(&rng, -3.0f, 3.0f);
        }
        if (trial == 1) a[17] = 40.0f;                          /* an outlier */
        if (trial == 2) memset(a + 256, 0, 256 * sizeof(float)); /* an all-zero super-block */
        if (trial == 3) for (int i = 0; i < n; i++) a[i] = fabsf(a[i]) + 2.0f; /* one-signed */
        for (int i = 0; i < n; i++) g_imatrix[i] = test_rand_uniform(&rng, 0.1f, 2.0f);
        for (size_t t = 0; t < sizeof k_weight_types / sizeof k_weight_types[0]; t++) {
            const enum ggml_type type = k_weight_types[t];
            const struct type_traits *tt = type_traits_get(type);
            const struct type_traits *vt = type_traits_get(tt->vec_dot_type);
            CHECK(quantize_weights(type, a, g_q1, n));
            vt->from_float(b, g_q2, n);
            tt->to_float(g_q1, da, n);
            vt->to_float(g_q2, db, n);
            for (int i = 0; i < n; i++) CHECK_MSG(isfinite(da[i]), "%s trial %d element %d", tt->name, trial, i);
            if (trial == 2) {
                double zero_err = 0;
                for (int i = 256; i < 512; i++) zero_err += fabs(da[i]);
                CHECK_MSG(zero_err == 0, "%s: zero block dequantizes to %g", tt->name, zero_err);
            }
            float result;
            tt->vec_dot(n, &result, g_q1, g_q2);
            double exact = 0, magnitude = 0;
            for (int i = 0; i < n; i++) {
                exact += (double)da[i] * db[i];
                magnitude += fabs((double)da[i] * db[i]);
            }
            CHECK_MSG(fabs(result - exact) <= 1e-5 * magnitude + 1e-6, "%s trial %d: %.9g vs %.9g", tt->name,
                      trial, result, exact);
        }
    }
    /* Activation types: half a quant step of error (plus the F16 rounding of d). */
    const enum ggml_type acts[] = { GGML_TYPE_Q8_0, GGML_TYPE_Q8_1, GGML_TYPE_Q8_K };
    for (size_t t = 0; t < 3; t++) {
        const struct type_traits *tt = type_traits_get(acts[t]);
        tt->from_float(b, g_q1, n);
        tt->to_float(g_q1, db, n);
        float max_err = 0;
        for (int i = 0; i < n; i++) max_err = fmaxf(max_err, fabsf(db[i] - b[i]));
        CHECK_MSG(max_err <= 0.6f * 3.0f / 127, "%s max error %g", tt->name, max_err);
    }
    /* Q8_K activations are its reference quantizer. */
    type_traits_get(GGML_TYPE_Q8_K)->from_float(b, g_q1, n);
    type_traits_get(GGML_TYPE_Q8_K)->from_float_reference(b, g_q2, n);
    CHECK(memcmp(g_q1, g_q2, (size_t)n / 256 * 292) == 0);
    free(a);
    free(b);
    free(da);
    free(db);
}

/* Exact values of a few hand-made blocks. */
static void test_known_blocks(void) {
    /* Q4_0: max magnitude -8 maps to quant 0, d = max/-8. */
    float x[32], y[32];
    for (int i = 0; i < 32; i++) x[i] = (float)(i - 16) / 2;   /* -8 .. 7.5 */
    uint8_t q[34];
    type_traits_get(GGML_TYPE_Q4_0)->from_float_reference(x, q, 32);
    CHECK_EQ_INT(q[0] | (q[1] << 8), 0x3c00);                    /* d = -8 / -8 = 1.0 */
    CHECK_EQ_INT(q[2] & 0xF, 0);                                  /* x[0] = -8 -> 0 */
    CHECK_EQ_INT(q[2] >> 4, 8);                                   /* x[16] = 0 -> 8 */
    type_traits_get(GGML_TYPE_Q4_0)->to_float(q, y, 32);
    CHECK_NEAR(y[0], -8.0f, 0);
    CHECK_NEAR(y[31], 7.0f, 0);                                   /* 7.5 rounds up to 8 -> clamps to 15 */
    /* Q8_0 reference rounds halves away from zero; the activation path to even. */
    float h[32] = { 0 };
    h[0] = 127.0f;
    h[1] = 2.5f;
    h[2] = -2.5f;
    type_traits_get(GGML_TYPE_Q8_0)->from_float_reference(h, q, 32);
    CHECK_EQ_INT((int8_t)q[3], 3);
    CHECK_EQ_INT((int8_t)q[4], -3);
    type_traits_get(GGML_TYPE_Q8_0)->from_float(h, q, 32);
    CHECK_EQ_INT((int8_t)q[2], 127);
    CHECK_EQ_INT((int8_t)q[3], 2);
    CHECK_EQ_INT((int8_t)q[4], -2);
}

static void test_chunk_api(void) {
    const int n_per_row = 512, nrows = 3;
    float *src = malloc((size_t)n_per_row * nrows * sizeof(float));
    uint64_t rng = 99;
    for (int i = 0; i < n_per_row * nrows; i++) src[i] = test_rand_uniform(&rng, -1.0f, 1.0f);
    for (int i = 0; i < n_per_row; i++) g_imatrix[i] = 1.0f;
    static uint8_t whole[4096], parts[4096];

    /* Row-by-row chunks write the same bytes as one chunk, at their rows. */
    const enum ggml_type types[] = { GGML_TYPE_Q4_1, GGML_TYPE_Q5_K, GGML_TYPE_F16, GGML_TYPE_IQ2_XS };
    for (size_t t = 0; t < 4; t++) {
        size_t row_size;
        CHECK(type_row_size(types[t], n_per_row, &row_size));
        const float *im = quant_requires_imatrix(types[t]) ? g_imatrix : NULL;
        memset(whole, 0xAA, sizeof whole);
        memset(parts, 0x55, sizeof parts);
        CHECK_EQ_INT(quant_quantize_chunk(types[t], src, whole, 0, nrows, n_per_row, NULL, im), row_size * nrows);
        for (int r = 0; r < nrows; r++) {
            CHECK_EQ_INT(quant_quantize_chunk(types[t], src, parts, (int64_t)r * n_per_row, 1, n_per_row, NULL, im),
                         row_size);
        }
        CHECK(memcmp(whole, parts, row_size * nrows) == 0);
    }

    /* Histograms count every quant of the 32-element types. */
    int64_t hist[16] = { 0 };
    CHECK(quant_quantize_chunk(GGML_TYPE_Q8_0, src, whole, 0, 2, n_per_row, hist, NULL) > 0);
    int64_t total = 0;
    for (int i = 0; i < 16; i++) total += hist[i];
    CHECK_EQ_INT(total, 2 * n_per_row);
    CHECK_EQ_INT(hist[0], 0);   /* Q8_0 quants are within -127..127: bins 1..15 */

    /* Errors, not aborts. */
    error_clear();
    CHECK_EQ_INT(quant_quantize_chunk(GGML_TYPE_IQ2_XXS, src, whole, 0, 1, n_per_row, NULL, NULL), 0);
    CHECK(strstr(error_last(), "importance matrix") != NULL);
    CHECK_EQ_INT(quant_quantize_chunk(GGML_TYPE_Q8_K, src, whole, 0, 1, n_per_row, NULL, NULL), 0);
    CHECK_EQ_INT(quant_quantize_chunk(GGML_TYPE_Q4_0, src, whole, 7, 1, n_per_row, NULL, NULL), 0);
    CHECK_EQ_INT(quant_quantize_chunk(GGML_TYPE_Q4_K, src, whole, 0, 1, 100, NULL, NULL), 0);
    CHECK_EQ_INT(quant_quantize_chunk((enum ggml_type)4, src, whole, 0, 1, n_per_row, NULL, NULL), 0);
    free(src);
}

/* The codebooks: sorted, levels 0..2 only, and the magnitude words agree
 * with the level codes. */
static void test_iq2_codebooks(void) {
    const struct { const uint16_t *codes; const uint64_t *grid; int size; } books[] = {
        { iq2_xxs_codes, iq2_xxs_grid, IQ2_XXS_GRID_SIZE },
        { iq2_xs_codes, iq2_xs_grid, IQ2_XS_GRID_SIZE },
    };
    static const uint8_t magnitude[3] = { 0x08, 0x19, 0x2b };
    for (int b = 0; b < 2; b++) {
        int bad = 0;
        uint64_t hash = 1469598103934665603ull;
        for (int k = 0; k < books[b].size; k++) {
            if (k > 0 && books[b].codes[k] <= books[b].codes[k - 1]) bad++;
            for (int i = 0; i < 8; i++) {
                const int level = (books[b].codes[k] >> (2 * i)) & 3;
                if (level == 3 || ((books[b].grid[k] >> (8 * i)) & 0xFF) != magnitude[level]) bad++;
            }
            hash = (hash ^ books[b].grid[k]) * 1099511628211ull;
        }
        CHECK_EQ_INT(bad, 0);
        /* Pins the tables that reproduced every IQ2 block of b1892's files. */
        CHECK(hash == (b == 0 ? 0xb5c65adf794765a6ull : 0xc171de346ccb1d28ull));
    }
    /* Spot values from b1892's iq2xxs_grid / iq2xs_grid. */
    CHECK(iq2_xxs_grid[100] == 0x08192b0808081908ull);
    CHECK(iq2_xxs_grid[255] == 0x2b2b2b1908081908ull);
    CHECK(iq2_xs_grid[100] == 0x0808192b08081908ull);
    CHECK(iq2_xs_grid[511] == 0x2b2b2b2b2b2b2b2bull);
    CHECK_EQ_INT(iq2_sign_byte(1), 129);
    CHECK_EQ_INT(iq2_sign_byte(3), 3);
    CHECK_EQ_INT(iq2_sign_byte(127), 255);
}

int main(void) {
    test_layouts();
    test_known_blocks();
    test_errors();
    test_random_rows();
    test_chunk_api();
    test_iq2_codebooks();
    return test_finish("test_quant");
}

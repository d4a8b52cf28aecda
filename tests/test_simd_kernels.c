/*
 * Every SIMD row function this CPU can run (quant_simd.h, all instruction
 * sets, not only the one the engine picked) against the scalar definition:
 * bit-identical results required.
 *
 * - vec_dot for every weight type: weights quantized from random floats and
 *   weights of random bytes (any quant values, e.g. -128 in Q8_0) with finite
 *   random scales, activations from the scalar quantizer of vec_dot_type;
 *   row lengths from one block to 4096 + one block, F32/F16 also with every
 *   leftover count.
 * - from_float (Q8_0, Q8_1, Q8_K activations; F32 -> F16 rows): random
 *   values at several magnitudes, zero blocks, infinities, NaNs, denormals,
 *   largest magnitudes tied with opposite signs.
 * - F16 -> F32 for all 65536 halves.
 */
#include "test_util.h"
#include "quant_test_util.h"

#include <math.h>

#include "core/fp16.h"
#include "quant/quant.h"
#include "quant/quant_simd.h"

static uint64_t g_rng = 0x5eed5eed;

static const enum ggml_type k_types[] = {
    GGML_TYPE_F32,  GGML_TYPE_F16,  GGML_TYPE_Q4_0, GGML_TYPE_Q4_1, GGML_TYPE_Q5_0,    GGML_TYPE_Q5_1,
    GGML_TYPE_Q8_0, GGML_TYPE_Q8_1, GGML_TYPE_Q2_K, GGML_TYPE_Q3_K, GGML_TYPE_Q4_K,    GGML_TYPE_Q5_K,
    GGML_TYPE_Q6_K, GGML_TYPE_Q8_K, GGML_TYPE_IQ2_XXS, GGML_TYPE_IQ2_XS,
};

#define MAX_N (4096 + 256)

static float g_src[MAX_N], g_src2[MAX_N];
static uint8_t g_w[MAX_N * 4], g_a[MAX_N * 4], g_out1[MAX_N * 4], g_out2[MAX_N * 4];

static void fill_floats(float *x, int n, float scale) {
    for (int i = 0; i < n; i++) x[i] = scale * test_rand_uniform(&g_rng, -1.0f, 1.0f);
}

static size_t row_bytes(enum ggml_type type, int n) {
    size_t b = 0;
    type_row_size(type, n, &b);
    return b;
}

/* Weights of `type`: quantized from floats (IQ2 with an importance matrix) or random bytes. */
static bool make_weights(enum ggml_type type, int n, bool random_bytes) {
    const struct type_traits *tt = type_traits_scalar_get(type);
    if (type == GGML_TYPE_F32 || type == GGML_TYPE_F16) {
        fill_floats(g_src, n, 2.0f);
        if (type == GGML_TYPE_F32) {
            memcpy(g_w, g_src, (size_t)n * 4);
        } else {
            tt->from_float_reference(g_src, g_w, n);
        }
        return true;
    }
    if (random_bytes) {
        for (size_t i = 0; i < row_bytes(type, n); i++) g_w[i] = (uint8_t)test_rand_u64(&g_rng);
        quant_test_fix_scales(type, g_w, n, &g_rng);
        return true;
    }
    fill_floats(g_src, n, 1.0f);
    float imatrix[MAX_N];
    for (int i = 0; i < n; i++) imatrix[i] = test_rand_uniform(&g_rng, 0.1f, 2.0f);
    return quant_quantize_chunk(type, g_src, g_w, 0, 1, n, NULL, imatrix) != 0;
}

static bool same_bits(float a, float b) { return memcmp(&a, &b, sizeof a) == 0; }

static void check_vec_dot(enum quant_isa isa, enum ggml_type type, type_vec_dot_fn fn) {
    const struct type_traits *tt = type_traits_scalar_get(type);
    const struct type_traits *at = type_traits_scalar_get(tt->vec_dot_type);
    static const int small[] = { 1, 2, 7, 8, 9, 15, 16, 17, 31, 32, 33, 40, 63, 64, 65, 95, 96, 100, 127, 128, 129 };
    int sizes[64], n_sizes = 0;
    if (tt->blck_size == 1) {
        for (size_t i = 0; i < sizeof small / sizeof small[0]; i++) sizes[n_sizes++] = small[i];
        sizes[n_sizes++] = 4096 + 37;
    } else {
        for (int k = 1; k <= 4; k++) sizes[n_sizes++] = (int)tt->blck_size * k;
        sizes[n_sizes++] = 4096;
        sizes[n_sizes++] = 4096 + (int)tt->blck_size;
    }
    int bad = 0, count = 0;
    for (int si = 0; si < n_sizes; si++) {
        const int n = sizes[si];
        for (int rep = 0; rep < 6; rep++) {
            if (!make_weights(type, n, rep % 2 == 1)) {
                CHECK_MSG(false, "%s: cannot make weights", type_name(type));
                return;
            }
            fill_floats(g_src2, n, rep < 2 ? 1.0f : rep < 4 ? 1e-3f : 300.0f);
            at->from_float(g_src2, g_a, n);
            float want, got;
            tt->vec_dot(n, &want, g_w, g_a);
            fn(n, &got, g_w, g_a);
            count++;
            if (!same_bits(want, got) && bad++ < 3) {
                fprintf(stderr, "%s %s vec_dot n=%d rep %d: %.9g, scalar %.9g\n", quant_isa_name(isa), type_name(type), n,
                        rep, got, want);
            }
        }
    }
    CHECK_MSG(bad == 0, "%s %s vec_dot: %d of %d differ", quant_isa_name(isa), type_name(type), bad, count);
}

/* Inputs for the quantizers: random blocks at several magnitudes and special ones. */
static int make_quantizer_input(float *x, int n, int rep) {
    fill_floats(x, n, rep == 0 ? 1.0f : rep == 1 ? 1e-30f : rep == 2 ? 1e30f : 40.0f);
    if (rep == 3) {
        for (int i = 0; i < 32 && i < n; i++) x[i] = 0.0f;                 /* a zero block */
        if (n > 40) x[40] = INFINITY;                                     /* an infinity */
        if (n > 70) x[70] = NAN;                                          /* a NaN */
        if (n > 100) { x[97] = -NAN; x[100] = 1e-40f; }                   /* NaN sign, denormal */
        if (n > 300) { x[290] = -1000.0f; x[300] = 1000.0f; }             /* tie, negative first */
        if (n > 600) { x[520] = 1000.0f; x[530] = -1000.0f; }             /* tie, positive first */
        for (int i = 700; i < 800 && i < n; i++) x[i] = (float)(i % 7) - 3.5f; /* halves */
        if (n > 1100) x[1100] = -NAN;
        if (n > 1200) x[1200] = fp32_from_bits(0x7FC12345u);              /* NaN with a payload */
        if (n > 1300) x[1300] = 65520.0f;                                 /* rounds to inf as F16 */
    }
    return n;
}

static void check_from_float(enum quant_isa isa, enum ggml_type type, type_from_float_fn fn) {
    const struct type_traits *tt = type_traits_scalar_get(type);
    const int b = (int)tt->blck_size;
    const int sizes[] = { b, 2 * b, b == 1 ? 7 : 3 * b, b == 1 ? 4097 : 4096 + b };
    int bad = 0;
    for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
        const int n = sizes[si];
        for (int rep = 0; rep < 4; rep++) {
            make_quantizer_input(g_src, n, rep);
            const size_t bytes = row_bytes(type, n);
            memset(g_out1, 0xAB, bytes);
            memset(g_out2, 0xCD, bytes);
            tt->from_float(g_src, g_out1, n);
            fn(g_src, g_out2, n);
            if (memcmp(g_out1, g_out2, bytes) != 0 && bad++ < 3) {
                size_t at = 0;
                while (g_out1[at] == g_out2[at]) at++;
                fprintf(stderr, "%s %s from_float n=%d rep %d: byte %zu differs\n", quant_isa_name(isa), type_name(type),
                        n, rep, at);
            }
        }
    }
    CHECK_MSG(bad == 0, "%s %s from_float differs", quant_isa_name(isa), type_name(type));
}

static void check_to_float(enum quant_isa isa, enum ggml_type type, type_to_float_fn fn) {
    const struct type_traits *tt = type_traits_scalar_get(type);
    CHECK(type == GGML_TYPE_F16);
    static fp16_t all[65536 + 3];
    static float want[65536 + 3], got[65536 + 3];
    for (int i = 0; i < 65536 + 3; i++) all[i] = (fp16_t)(i * 40503u);   /* every half, permuted, plus 3 */
    tt->to_float(all, want, 65536 + 3);
    fn(all, got, 65536 + 3);
    CHECK_MSG(memcmp(want, got, sizeof want) == 0, "%s %s to_float differs", quant_isa_name(isa), type_name(type));
}

int main(void) {
    int n_sets = 0;
    for (int isa = QUANT_ISA_SCALAR + 1; isa < QUANT_ISA_COUNT; isa++) {
        if (!quant_isa_supported((enum quant_isa)isa)) {
            printf("  %-11s not supported by this CPU or build\n", quant_isa_name((enum quant_isa)isa));
            continue;
        }
        n_sets++;
        int n_fns = 0;
        for (size_t ti = 0; ti < sizeof k_types / sizeof k_types[0]; ti++) {
            const enum ggml_type type = k_types[ti];
            const struct quant_kernels k = quant_isa_kernels((enum quant_isa)isa, type);
            if (k.vec_dot) { check_vec_dot((enum quant_isa)isa, type, k.vec_dot); n_fns++; }
            if (k.from_float) { check_from_float((enum quant_isa)isa, type, k.from_float); n_fns++; }
            if (k.to_float) { check_to_float((enum quant_isa)isa, type, k.to_float); n_fns++; }
        }
        printf("  %-11s %d functions checked\n", quant_isa_name((enum quant_isa)isa), n_fns);
    }
    /* the engine's table holds the active set's functions */
    const enum quant_isa active = quant_isa_active();
    printf("  active set: %s\n", quant_isa_name(active));
    for (size_t ti = 0; ti < sizeof k_types / sizeof k_types[0]; ti++) {
        const struct quant_kernels k = quant_isa_kernels(active, k_types[ti]);
        const struct type_traits *tt = type_traits_get(k_types[ti]);
        if (k.vec_dot) CHECK(tt->vec_dot == k.vec_dot);
        if (k.from_float) CHECK(tt->from_float == k.from_float);
    }
    if (n_sets == 0) printf("  (no SIMD set on this CPU: nothing to compare)\n");
    return test_finish("test_simd_kernels");
}

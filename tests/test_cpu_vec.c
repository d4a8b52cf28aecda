/*
 * The SIMD row helpers of the element-wise kernels (backend/cpu/cpu_vec.h)
 * against their scalar definitions, bit for bit: the F16 table lookups
 * (silu, gelu, gelu_quick), softmax's exponentials and sum, and whole
 * softmax rows (scale, mask, normalization, with and without the rounding
 * to F16), on random
 * rows at several magnitudes, every length up to 40 and long rows, with
 * -inf (masked positions), +inf, NaNs with payloads, signed zeros and
 * values that round to F16 infinities.
 */
#include "test_util.h"

#include <math.h>

#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/cpu_vec.h"

static uint64_t g_rng = 99;

static bool same_floats(const float *a, const float *b, int64_t n) { return memcmp(a, b, (size_t)n * sizeof(float)) == 0; }

/* The same bits, or NaN both: a row holding a NaN or an infinity normalizes
 * by a NaN, and which operand's NaN a multiplication passes on is the
 * compiler's choice of operand order. */
static bool same_floats_or_nans(const float *a, const float *b, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        if (memcmp(&a[i], &b[i], sizeof a[i]) != 0 && !(isnan(a[i]) && isnan(b[i]))) return false;
    }
    return true;
}

static void fill_row(float *x, int64_t n, int kind) {
    const float scale = kind == 0 ? 1.0f : kind == 1 ? 30.0f : kind == 2 ? 1e-4f : 70000.0f;
    for (int64_t i = 0; i < n; i++) x[i] = scale * test_rand_uniform(&g_rng, -1.0f, 1.0f);
    if (kind == 3) {
        for (int64_t i = 0; i < n; i += 7) x[i] = -INFINITY;              /* masked */
        if (n > 5) x[5] = -0.0f;
        if (n > 9) x[9] = 0.0f;
        if (n > 13) x[13] = fp32_from_bits(0x7FC12345u);                  /* NaN with a payload */
        if (n > 30) x[30] = INFINITY;
        if (n > 33) x[33] = -NAN;
    }
}

int main(void) {
    cpu_tables_init();
    const cpu_vec_table_f16_fn table_simd = cpu_vec_table_f16_simd();
    const cpu_vec_soft_max_exp_fn soft_max_simd = cpu_vec_soft_max_exp_simd();
    if (!table_simd || !soft_max_simd || !cpu_vec_soft_max_row_simd()) {
        test_skip_unsupported("no SIMD variant of the row helpers on this CPU");
    }
    static float x[5000], want[5000], got[5000];
    int lengths[48], n_lengths = 0;
    for (int n = 1; n <= 40; n++) lengths[n_lengths++] = n;
    lengths[n_lengths++] = 512;
    lengths[n_lengths++] = 4999;
    int bad_table = 0, bad_soft_max = 0, cases = 0;
    for (int li = 0; li < n_lengths; li++) {
        const int64_t n = lengths[li];
        for (int kind = 0; kind < 4; kind++) {
            for (int t = CPU_TABLE_EXP; t <= CPU_TABLE_GELU_QUICK; t++) {
                fill_row(x, n, kind);
                cpu_vec_table_f16_scalar(cpu_table_data((enum cpu_table_id)t), x, want, n);
                table_simd(cpu_table_data((enum cpu_table_id)t), x, got, n);
                bad_table += !same_floats(want, got, n);
            }
            /* softmax rows (NaNs in the kind-3 rows: the scalar loop's NaN, bit for bit) */
            fill_row(x, n, kind);
            const double sw = cpu_vec_soft_max_exp_scalar(cpu_table_data(CPU_TABLE_EXP), x, want, n);
            const double sg = soft_max_simd(cpu_table_data(CPU_TABLE_EXP), x, got, n);
            bad_soft_max += !same_floats(want, got, n) || memcmp(&sw, &sg, sizeof sw) != 0;
            cases++;
        }
    }
    CHECK_MSG(bad_table == 0, "table lookups: %d rows differ", bad_table);
    CHECK_MSG(bad_soft_max == 0, "softmax exponentials: %d of %d rows differ", bad_soft_max, cases);
    /* rows of a causal mask's first positions: all -inf but one */
    for (int64_t n = 1; n <= 40; n++) {
        for (int64_t i = 0; i < n; i++) x[i] = -INFINITY;
        x[n / 2] = 1.5f;
        const double sw = cpu_vec_soft_max_exp_scalar(cpu_table_data(CPU_TABLE_EXP), x, want, n);
        const double sg = soft_max_simd(cpu_table_data(CPU_TABLE_EXP), x, got, n);
        CHECK(same_floats(want, got, n) && sw == sg);
    }
    /* causal rows: an open prefix, then -inf to the end (whole groups of
     * masked positions are skipped), and rows masked throughout */
    const int64_t prefixes[] = { 0, 1, 7, 8, 9, 100, 511, 512 };
    for (size_t pi = 0; pi < sizeof prefixes / sizeof prefixes[0]; pi++) {
        fill_row(x, 512, 1);
        for (int64_t i = prefixes[pi]; i < 512; i++) x[i] = -INFINITY;
        const double sw = cpu_vec_soft_max_exp_scalar(cpu_table_data(CPU_TABLE_EXP), x, want, 512);
        const double sg = soft_max_simd(cpu_table_data(CPU_TABLE_EXP), x, got, 512);
        CHECK_MSG(same_floats(want, got, 512) && memcmp(&sw, &sg, sizeof sw) == 0, "open prefix %lld",
                  (long long)prefixes[pi]);
    }
    /* whole rows: scale, a mask with -inf (closed positions), the normalization */
    const cpu_vec_soft_max_row_fn row_simd = cpu_vec_soft_max_row_simd();
    static float mask[5000], w[5000];
    int bad_row = 0;
    for (int li = 0; li < n_lengths; li++) {
        const int64_t n = lengths[li];
        for (int kind = 0; kind < 4; kind++) {
            fill_row(x, n, kind);
            for (int64_t i = 0; i < n; i++) mask[i] = i % 3 == 1 || i > n / 2 + 3 ? -INFINITY : 0.25f * (float)(i % 4);
            for (int variant = 0; variant < 4; variant++) {
                const bool masked = variant & 1, round = variant & 2;
                cpu_vec_soft_max_row_scalar(cpu_table_data(CPU_TABLE_EXP), x, masked ? mask : NULL, 0.125f, w, want, n,
                                            round);
                row_simd(cpu_table_data(CPU_TABLE_EXP), x, masked ? mask : NULL, 0.125f, w, got, n, round);
                bad_row += !same_floats_or_nans(want, got, n);
                if (round) {
                    for (int64_t i = 0; i < n; i++) bad_row += !isnan(got[i]) && fp16_round(got[i]) != got[i];
                }
            }
        }
    }
    CHECK_MSG(bad_row == 0, "softmax rows: %d differ", bad_row);
    return test_finish("test_cpu_vec");
}

/*
 * Row helpers of the element-wise kernels (cpu_vec.h): the scalar
 * definitions, an AVX2 + F16C variant of each, and the run-time choice.
 */
#include "backend/cpu/cpu_vec.h"

#include <math.h>
#include <pthread.h>

#include "core/cpu_features.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

void cpu_vec_table_f16_scalar(const fp16_t *table, const float *x, float *y, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = fp16_to_fp32(table[fp32_to_fp16(x[i])]);
}

static float vec_max_scalar(const float *w, int64_t n, float max) {
    for (int64_t i = 0; i < n; i++) max = w[i] > max ? w[i] : max;
    return max;
}

/* The exponentials of w[0..n) against max into y, and their sum. */
static double vec_exp_scalar(const fp16_t *exp_table, const float *w, float max, float *y, int64_t n) {
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++) {
        if (w[i] == -INFINITY) {
            y[i] = 0.0f;
        } else {
            const float val = fp16_to_fp32(exp_table[fp32_to_fp16(w[i] - max)]);
            sum += (double)val;
            y[i] = val;
        }
    }
    return sum;
}

double cpu_vec_soft_max_exp_scalar(const fp16_t *exp_table, const float *w, float *y, int64_t n) {
    return vec_exp_scalar(exp_table, w, vec_max_scalar(w, n, -INFINITY), y, n);
}

void cpu_vec_soft_max_row_scalar(const fp16_t *exp_table, const float *s, const float *m, float scale, float *w,
                                 float *y, int64_t n, bool round_f16) {
    for (int64_t i = 0; i < n; i++) w[i] = s[i] * scale;
    if (m) {
        for (int64_t i = 0; i < n; i++) w[i] += m[i];
    }
    const float inv = (float)(1.0 / cpu_vec_soft_max_exp_scalar(exp_table, w, y, n));
    for (int64_t i = 0; i < n; i++) y[i] = round_f16 ? fp16_round(y[i] * inv) : y[i] * inv;
}

#if defined(__x86_64__)

#define VEC_TARGET __attribute__((target("avx2,fma,f16c")))

/* Table entries at the halves of v (8 lanes): a 32-bit gather at 2-byte
 * steps, whose low halves are the entries. */
VEC_TARGET static inline __m256 vec_lookup(const fp16_t *table, __m256 v) {
    const __m256i idx = _mm256_cvtepu16_epi32(_mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
    const __m256i g = _mm256_and_si256(_mm256_i32gather_epi32((const int *)table, idx, 2), _mm256_set1_epi32(0xFFFF));
    return _mm256_cvtph_ps(_mm_packus_epi32(_mm256_castsi256_si128(g), _mm256_extracti128_si256(g, 1)));
}

VEC_TARGET static inline bool vec_has_nan(__m256 v) { return _mm256_movemask_ps(_mm256_cmp_ps(v, v, _CMP_UNORD_Q)) != 0; }

/* vcvtps2ph keeps a NaN's payload where fp32_to_fp16 writes 0x7E00: groups
 * with a NaN take the scalar path. */
VEC_TARGET static void vec_table_f16_avx2(const fp16_t *table, const float *x, float *y, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 v = _mm256_loadu_ps(x + i);
        if (vec_has_nan(v)) {
            cpu_vec_table_f16_scalar(table, x + i, y + i, 8);
        } else {
            _mm256_storeu_ps(y + i, vec_lookup(table, v));
        }
    }
    /* (only when there is a tail: a call into code without VEX encoding,
     * with the upper halves of the ymm registers in use, stalls) */
    if (i < n) cpu_vec_table_f16_scalar(table, x + i, y + i, n - i);
}

/* The max of w[0..n) given the largest of its first n - n % 8 elements per
 * lane (vmaxps returns its second operand when either is NaN: NaNs in w are
 * skipped), the lanes first, then the tail. */
VEC_TARGET static float vec_max_finish(__m256 m, const float *w, int64_t n) {
    float lanes[8];
    _mm256_storeu_ps(lanes, m);
    const int64_t i = n - n % 8;
    return vec_max_scalar(w + i, n - i, vec_max_scalar(lanes, 8, -INFINITY));
}

/* The exponentials of w[0..n) against max into y, and their sum. */
VEC_TARGET static double vec_exp_avx2(const fp16_t *exp_table, const float *w, float max, float *y, int64_t n) {
    const __m256 vmax = _mm256_set1_ps(max), ninf = _mm256_set1_ps(-INFINITY);
    __m256d s0 = _mm256_setzero_pd(), s1 = _mm256_setzero_pd();
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 v = _mm256_loadu_ps(w + i);
        const __m256 masked = _mm256_cmp_ps(v, ninf, _CMP_EQ_OQ);
        /* 8 masked positions (a causal mask's tail): zeros, and nothing to add */
        if (_mm256_movemask_ps(masked) == 0xFF) {
            _mm256_storeu_ps(y + i, _mm256_setzero_ps());
            continue;
        }
        const __m256 d = _mm256_sub_ps(v, vmax);
        /* a NaN makes the sum NaN, and which NaN depends on the order: the scalar loop decides */
        if (vec_has_nan(d)) return vec_exp_scalar(exp_table, w, max, y, n);
        const __m256 e = _mm256_andnot_ps(masked, vec_lookup(exp_table, d));
        _mm256_storeu_ps(y + i, e);
        s0 = _mm256_add_pd(s0, _mm256_cvtps_pd(_mm256_castps256_ps128(e)));
        s1 = _mm256_add_pd(s1, _mm256_cvtps_pd(_mm256_extractf128_ps(e, 1)));
    }
    for (int64_t j = i; j < n; j++) {
        if (isnan(w[j] - max)) return vec_exp_scalar(exp_table, w, max, y, n);
    }
    const double tail = i < n ? vec_exp_scalar(exp_table, w + i, max, y + i, n - i) : 0.0;
    double s[4];
    _mm256_storeu_pd(s, _mm256_add_pd(s0, s1));
    return ((s[0] + s[1]) + (s[2] + s[3])) + tail;
}

VEC_TARGET static double vec_soft_max_exp_avx2(const fp16_t *exp_table, const float *w, float *y, int64_t n) {
    __m256 m = _mm256_set1_ps(-INFINITY);
    for (int64_t i = 0; i + 8 <= n; i += 8) m = _mm256_max_ps(_mm256_loadu_ps(w + i), m);
    return vec_exp_avx2(exp_table, w, vec_max_finish(m, w, n), y, n);
}

/* The scalar row's passes 8 at a time, in three: w and its max, the
 * exponentials, the normalization (and rounding); the same multiplications
 * and additions (separate roundings, never fused) element by element. */
VEC_TARGET static void vec_soft_max_row_avx2(const fp16_t *exp_table, const float *s, const float *m, float scale,
                                             float *w, float *y, int64_t n, bool round_f16) {
    const __m256 vs = _mm256_set1_ps(scale);
    __m256 mx = _mm256_set1_ps(-INFINITY);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_mul_ps(_mm256_loadu_ps(s + i), vs);
        if (m) v = _mm256_add_ps(v, _mm256_loadu_ps(m + i));
        _mm256_storeu_ps(w + i, v);
        mx = _mm256_max_ps(v, mx);
    }
    for (; i < n; i++) {
        w[i] = s[i] * scale; /* a statement each: no contraction into an FMA */
        if (m) w[i] += m[i];
    }
    const float inv = (float)(1.0 / vec_exp_avx2(exp_table, w, vec_max_finish(mx, w, n), y, n));
    const __m256 vi = _mm256_set1_ps(inv);
    for (i = 0; i + 8 <= n; i += 8) {
        const __m256 v = _mm256_mul_ps(_mm256_loadu_ps(y + i), vi);
        if (!round_f16) {
            _mm256_storeu_ps(y + i, v);
        } else if (vec_has_nan(v)) { /* fp32_to_fp16 writes one NaN, vcvtps2ph keeps the payload */
            for (int j = 0; j < 8; j++) y[i + j] = fp16_round(y[i + j] * inv);
        } else {
            _mm256_storeu_ps(y + i, _mm256_cvtph_ps(_mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT)));
        }
    }
    for (; i < n; i++) y[i] = round_f16 ? fp16_round(y[i] * inv) : y[i] * inv;
}

static bool vec_avx2(void) {
    const struct cpu_features *f = cpu_features_get();
    return f->avx2 && f->fma && f->f16c;
}

cpu_vec_table_f16_fn cpu_vec_table_f16_simd(void) { return vec_avx2() ? vec_table_f16_avx2 : NULL; }
cpu_vec_soft_max_exp_fn cpu_vec_soft_max_exp_simd(void) { return vec_avx2() ? vec_soft_max_exp_avx2 : NULL; }
cpu_vec_soft_max_row_fn cpu_vec_soft_max_row_simd(void) { return vec_avx2() ? vec_soft_max_row_avx2 : NULL; }

#else

cpu_vec_table_f16_fn cpu_vec_table_f16_simd(void) { return NULL; }
cpu_vec_soft_max_exp_fn cpu_vec_soft_max_exp_simd(void) { return NULL; }
cpu_vec_soft_max_row_fn cpu_vec_soft_max_row_simd(void) { return NULL; }

#endif

static cpu_vec_table_f16_fn g_table_f16 = cpu_vec_table_f16_scalar;
static cpu_vec_soft_max_row_fn g_soft_max_row = cpu_vec_soft_max_row_scalar;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void vec_init(void) {
    if (cpu_vec_table_f16_simd()) g_table_f16 = cpu_vec_table_f16_simd();
    if (cpu_vec_soft_max_row_simd()) g_soft_max_row = cpu_vec_soft_max_row_simd();
}

void cpu_vec_table_f16(const fp16_t *table, const float *x, float *y, int64_t n) {
    pthread_once(&g_once, vec_init);
    g_table_f16(table, x, y, n);
}


void cpu_vec_soft_max_row(const fp16_t *exp_table, const float *s, const float *m, float scale, float *w, float *y,
                          int64_t n, bool round_f16) {
    pthread_once(&g_once, vec_init);
    g_soft_max_row(exp_table, s, m, scale, w, y, n, round_f16);
}

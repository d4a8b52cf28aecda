/*
 * IQ2_XXS (2.0625 bits per weight) and IQ2_XS (2.3125 bpw).
 *
 * Each group of 8 values is one codebook point (iq2_tables.c) times 8 signs
 * (7 stored, the eighth makes the count of negatives even) times a scale.
 *   IQ2_XXS, per 32 values: 4 one-byte grid indices, then a 32-bit word with
 *     4 x 7 sign bits and a 4-bit scale s (bits 28..31): value scale d*(0.5+s)/4.
 *   IQ2_XS, per 8 values: a 16-bit word, 9-bit grid index and 7 sign bits;
 *     per 16 values a 4-bit scale (two per byte of `scales`).
 *
 * Quantization needs an importance matrix (as in b1892, which refuses these
 * types without one) and follows b1892's quantize_row_iq2_*_impl: for each
 * group it searches 19 scales, snapping points that are not on the grid to
 * the best of their nearest grid neighbours. The neighbour lists are built on
 * first use (once per grid) as b1892's q2xs_init_impl builds them.
 */
#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>

#include "core/log.h"
#include "iq2_tables.h"
#include "quant_impl.h"
#include "quant_lanes.h"

#define MIN(a, b) ((a) < (b) ? (a) : (b))
#define MAX(a, b) ((a) > (b) ? (a) : (b))

static inline uint8_t grid_byte(uint64_t word, int j) { return (uint8_t)(word >> (8 * j)); }
static inline float sign_of(uint8_t signs, int j) { return (signs >> j) & 1 ? -1.f : 1.f; }

/* ---- dequantize --------------------------------------------------------------- */

void quant_iq2_xxs_dequantize(const void *vx, float *y, int64_t n) {
    const block_iq2_xxs *x = vx;
    for (int64_t i = 0; i < n / QK_K; i++) {
        const float d = fp16_to_fp32(x[i].d);
        for (int ib32 = 0; ib32 < QK_K / 32; ib32++) {
            const uint16_t *q = x[i].qs + 4 * ib32;
            const uint32_t grid_idx = (uint32_t)q[0] | ((uint32_t)q[1] << 16);
            const uint32_t signs_scale = (uint32_t)q[2] | ((uint32_t)q[3] << 16);
            const float db = d * (0.5f + (float)(signs_scale >> 28)) * 0.25f;
            for (int l = 0; l < 4; l++, y += 8) {
                const uint64_t grid = iq2_xxs_grid[(grid_idx >> (8 * l)) & 0xFF];
                const uint8_t signs = iq2_sign_byte((signs_scale >> (7 * l)) & 127);
                for (int j = 0; j < 8; j++) y[j] = db * grid_byte(grid, j) * sign_of(signs, j);
            }
        }
    }
}

void quant_iq2_xs_dequantize(const void *vx, float *y, int64_t n) {
    const block_iq2_xs *x = vx;
    for (int64_t i = 0; i < n / QK_K; i++) {
        const float d = fp16_to_fp32(x[i].d);
        for (int ib32 = 0; ib32 < QK_K / 32; ib32++) {
            const float db[2] = {
                d * (0.5f + (float)(x[i].scales[ib32] & 0xf)) * 0.25f,
                d * (0.5f + (float)(x[i].scales[ib32] >> 4)) * 0.25f,
            };
            for (int l = 0; l < 4; l++, y += 8) {
                const uint16_t q = x[i].qs[4 * ib32 + l];
                const uint64_t grid = iq2_xs_grid[q & 511];
                const uint8_t signs = iq2_sign_byte(q >> 9);
                for (int j = 0; j < 8; j++) y[j] = db[l / 2] * grid_byte(grid, j) * sign_of(signs, j);
            }
        }
    }
}

/* ---- dot products against Q8_K ----------------------------------------------- */

/* The 8 signed values of one group: grid magnitudes with their signs. */
static inline void group_values(uint64_t grid, uint8_t signs, int8_t *out) {
    for (int j = 0; j < 8; j++) out[j] = (int8_t)((signs >> j) & 1 ? -grid_byte(grid, j) : grid_byte(grid, j));
}

/*
 * b1892's AVX2 ggml_vec_dot_iq2_xxs_q8_K / _iq2_xs_q8_K (quant_lanes.h): the
 * signed grid values times the activations in lanes, each 32 (IQ2_XXS) or 16
 * (IQ2_XS) weighted by its odd scale 2s+1; the lanes fused per block with
 * d_x*d_y; 1/8 (the 0.25 of the scale times the 0.5 of 2s+1) applied to the
 * reduced sum.
 */
void quant_iq2_xxs_dot_q8_K(int64_t n, float *s, const void *vx, const void *vy) {
    const block_iq2_xxs *x = vx;
    const block_q8_K *y = vy;
    float acc[QUANT_LANES] = { 0 };
    for (int64_t i = 0; i < n / QK_K; i++) {
        int8_t a[QK_K];
        int32_t scales[QK_K / 32];
        for (int ib32 = 0; ib32 < QK_K / 32; ib32++) {
            const uint16_t *q = x[i].qs + 4 * ib32;
            const uint32_t grid_idx = (uint32_t)q[0] | ((uint32_t)q[1] << 16);
            const uint32_t signs_scale = (uint32_t)q[2] | ((uint32_t)q[3] << 16);
            scales[ib32] = 2 * (int32_t)(signs_scale >> 28) + 1;
            for (int l = 0; l < 4; l++) {
                group_values(iq2_xxs_grid[(grid_idx >> (8 * l)) & 0xFF], iq2_sign_byte((signs_scale >> (7 * l)) & 127),
                             a + 32 * ib32 + 8 * l);
            }
        }
        int32_t lanes[QUANT_LANES] = { 0 };
        quant_lanes_add(lanes, a, y[i].qs, QK_K, scales, 32);
        quant_lanes_fma(acc, fp16_to_fp32(x[i].d) * y[i].d, lanes);
    }
    *s = 0.125f * quant_lanes_hsum(acc);
}

void quant_iq2_xs_dot_q8_K(int64_t n, float *s, const void *vx, const void *vy) {
    const block_iq2_xs *x = vx;
    const block_q8_K *y = vy;
    float acc[QUANT_LANES] = { 0 };
    for (int64_t i = 0; i < n / QK_K; i++) {
        int8_t a[QK_K];
        int32_t scales[QK_K / 16];
        for (int j = 0; j < QK_K / 16; j++) scales[j] = 2 * ((x[i].scales[j / 2] >> (4 * (j % 2))) & 0xf) + 1;
        for (int g = 0; g < QK_K / 8; g++) {
            group_values(iq2_xs_grid[x[i].qs[g] & 511], iq2_sign_byte(x[i].qs[g] >> 9), a + 8 * g);
        }
        int32_t lanes[QUANT_LANES] = { 0 };
        quant_lanes_add(lanes, a, y[i].qs, QK_K, scales, 16);
        quant_lanes_fma(acc, fp16_to_fp32(x[i].d) * y[i].d, lanes);
    }
    *s = 0.125f * quant_lanes_hsum(acc);
}

/* ---- quantization search tables ------------------------------------------------ */

/* Level codes: 2 bits per value, so 8 values index 4^8 codes; the quantizer
 * only forms codes with levels 0..2. */
#define IQ2_CODE_COUNT 65536

struct iq2_search {
    const uint16_t *codes;       /* the codebook (level codes) */
    int grid_size;
    /* code -> grid index (>= 0), or -(offset + 1) of the code's neighbour list
     * in `neighbours` (count, then grid indices). */
    int32_t map[IQ2_CODE_COUNT];
    uint16_t *neighbours;
    bool ok;
};

static struct iq2_search g_xxs = { .codes = iq2_xxs_codes, .grid_size = IQ2_XXS_GRID_SIZE };
static struct iq2_search g_xs = { .codes = iq2_xs_codes, .grid_size = IQ2_XS_GRID_SIZE };
static pthread_once_t g_xxs_once = PTHREAD_ONCE_INIT;
static pthread_once_t g_xs_once = PTHREAD_ONCE_INIT;

static inline int code_level(uint16_t code, int i) { return (code >> (2 * i)) & 3; }

static bool code_is_reachable(int code) {
    for (int i = 0; i < 8; i++) {
        if (code_level((uint16_t)code, i) == 3) return false;
    }
    return true;
}

/* Squared distances (in the 1,3,5 coordinates) from `code` to every grid
 * point; returns the two smallest distinct distances. */
static void neighbour_distances(const struct iq2_search *t, int code, int *d2, int *first, int *second) {
    *first = INT32_MAX;
    *second = INT32_MAX;
    for (int j = 0; j < t->grid_size; j++) {
        int dist = 0;
        for (int i = 0; i < 8; i++) {
            const int diff = 2 * (code_level(t->codes[j], i) - code_level((uint16_t)code, i));
            dist += diff * diff;
        }
        d2[j] = dist;
        if (dist < *first) {
            *second = *first;
            *first = dist;
        } else if (dist > *first && dist < *second) {
            *second = dist;
        }
    }
}

/* b1892's neighbour list of an off-grid code: every grid point at the
 * smallest and at the second smallest distance, ordered by (distance, index). */
static int neighbour_list(const struct iq2_search *t, int code, int *d2, uint16_t *out) {
    int first, second;
    neighbour_distances(t, code, d2, &first, &second);
    int count = 0;
    for (int pass = 0; pass < 2; pass++) {
        const int want = pass == 0 ? first : second;
        for (int j = 0; j < t->grid_size; j++) {
            if (d2[j] == want) {
                if (out) out[count] = (uint16_t)j;
                count++;
            }
        }
    }
    return count;
}

static void iq2_search_build(struct iq2_search *t) {
    int d2[IQ2_XS_GRID_SIZE];
    for (int c = 0; c < IQ2_CODE_COUNT; c++) t->map[c] = INT32_MIN;
    for (int k = 0; k < t->grid_size; k++) t->map[t->codes[k]] = k;
    size_t total = 0;
    for (int c = 0; c < IQ2_CODE_COUNT; c++) {
        if (t->map[c] == INT32_MIN && code_is_reachable(c)) total += 1 + (size_t)neighbour_list(t, c, d2, NULL);
    }
    t->neighbours = malloc(total * sizeof *t->neighbours);
    if (!t->neighbours) return;
    size_t offset = 0;
    for (int c = 0; c < IQ2_CODE_COUNT; c++) {
        if (t->map[c] != INT32_MIN || !code_is_reachable(c)) continue;
        const int count = neighbour_list(t, c, d2, t->neighbours + offset + 1);
        t->neighbours[offset] = (uint16_t)count;
        t->map[c] = -(int32_t)(offset + 1);
        offset += 1 + (size_t)count;
    }
    t->ok = true;
}

static void build_xxs(void) { iq2_search_build(&g_xxs); }
static void build_xs(void) { iq2_search_build(&g_xs); }

static const struct iq2_search *iq2_search_get(bool xs) {
    pthread_once(xs ? &g_xs_once : &g_xxs_once, xs ? build_xs : build_xxs);
    const struct iq2_search *t = xs ? &g_xs : &g_xxs;
    if (!t->ok) {
        error_set("IQ2 quantization: out of memory building the neighbour tables");
        return NULL;
    }
    return t;
}

/* Grid point k in the quantizer's coordinates 1, 3, 5. */
static inline int grid_odd(const struct iq2_search *t, int k, int i) { return 2 * code_level(t->codes[k], i) + 1; }

static uint16_t levels_code(const int8_t *L) {
    uint16_t u = 0;
    for (int i = 0; i < 8; i++) u |= (uint16_t)(L[i] << (2 * i));
    return u;
}

/* Levels of 8 values at inverse scale id, clamped to 0..2. */
static void levels_at(float id, const float *xval, int8_t *L) {
    for (int i = 0; i < 8; i++) {
        const int l = quant_nearest_int(0.5f * fmaf(id, xval[i], -1.f));
        L[i] = (int8_t)MAX(0, MIN(2, l));
    }
}

/* The neighbour of an off-grid code closest to xval/scale under weights
 * `weight`; writes its levels to L. (b1892 iq2_find_best_neighbour.) */
static int best_neighbour(const struct iq2_search *t, uint16_t code, const float *xval, const float *weight,
                          float scale, int8_t *L) {
    const uint16_t *nb = t->neighbours + (-t->map[code] - 1);
    float best_d2 = FLT_MAX;
    int grid_index = nb[1];
    for (int j = 1; j <= nb[0]; j++) {
        float d2 = 0;
        for (int i = 0; i < 8; i++) {
            const float q = (float)grid_odd(t, nb[j], i);
            const float diff = fmaf(scale, q, -xval[i]);
            d2 = fmaf(weight[i] * diff, diff, d2);
        }
        if (d2 < best_d2) {
            best_d2 = d2;
            grid_index = nb[j];
        }
    }
    for (int i = 0; i < 8; i++) L[i] = (int8_t)((grid_odd(t, grid_index, i) - 1) / 2);
    return grid_index;
}

/* Makes every value of each group of 8 non-negative, recording the flips as
 * 7 sign bits; an odd number of flips is made even by un-flipping the value
 * that matters least (smallest weight * x^2). */
static void fold_signs(const float *xb, const float *weight, int ngroups, float *xval, uint8_t *block_signs) {
    for (int k = 0; k < ngroups; k++) {
        int nflip = 0;
        uint8_t s = 0;
        for (int i = 0; i < 8; i++) {
            if (xb[8 * k + i] >= 0) {
                xval[8 * k + i] = xb[8 * k + i];
            } else {
                xval[8 * k + i] = -xb[8 * k + i];
                nflip++;
                s |= (uint8_t)(1 << i);
            }
        }
        if (nflip % 2) {
            int imin = 0;
            float min = weight[8 * k] * xb[8 * k] * xb[8 * k];
            for (int i = 1; i < 8; i++) {
                const float ax = weight[8 * k + i] * xb[8 * k + i] * xb[8 * k + i];
                if (ax < min) {
                    min = ax;
                    imin = i;
                }
            }
            xval[8 * k + imin] = -xval[8 * k + imin];
            s ^= (uint8_t)(1 << imin);
        }
        block_signs[k] = s & 127;
    }
}

/*
 * Scale search for one group of n = 8*ngroups values (b1892's inner loop,
 * shared by both types). L and is_on_grid carry over between calls exactly as
 * b1892's arrays do. `snap_levels_from_grid`: IQ2_XXS re-reads the levels of
 * a snapped group from its grid point, IQ2_XS keeps the rounded levels when
 * they are on the grid (the two b1892 functions differ there).
 * Returns the group scale (>= 0); flips the signs when it came out negative.
 */
static float search_group(const struct iq2_search *t, int ngroups, const float *xval, const float *weight,
                          const float *waux, int8_t *L, bool *is_on_grid, uint8_t *block_signs,
                          bool snap_levels_from_grid) {
    const int n = 8 * ngroups;
    const int kMaxQ = 3;
    int8_t Laux[32];
    bool is_on_grid_aux[4];
    float max = xval[0];
    for (int i = 1; i < n; i++) max = MAX(max, xval[i]);
    float best = 0;
    float scale = max / (2 * kMaxQ - 1);
    for (int is = -9; is <= 9; is++) {
        const float id = fmaf((float)is, 0.1f, (float)(2 * kMaxQ - 1)) / max;
        const float this_scale = 1 / id;
        for (int k = 0; k < ngroups; k++) {
            levels_at(id, xval + 8 * k, Laux + 8 * k);
            const uint16_t u = levels_code(Laux + 8 * k);
            is_on_grid_aux[k] = t->map[u] >= 0;
            if (!is_on_grid_aux[k]) best_neighbour(t, u, xval + 8 * k, waux + 8 * k, this_scale, Laux + 8 * k);
        }
        float sumqx = 0, sumq2 = 0;
        for (int i = 0; i < n; i++) {
            const float w = weight[i];
            const float q = 2 * Laux[i] + 1;
            sumqx = fmaf(w * xval[i], q, sumqx);
            sumq2 = fmaf(w * q, q, sumq2);
        }
        if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
            scale = sumqx / sumq2;
            best = scale * sumqx;
            memcpy(L, Laux, (size_t)n);
            memcpy(is_on_grid, is_on_grid_aux, (size_t)ngroups * sizeof *is_on_grid);
        }
    }
    int n_not_ongrid = 0;
    for (int k = 0; k < ngroups; k++) n_not_ongrid += !is_on_grid[k];
    if (n_not_ongrid > 0 && scale > 0) {
        const float id = 1 / scale;
        for (int k = 0; k < ngroups; k++) {
            if (is_on_grid[k]) continue;
            int8_t levels[8];
            levels_at(id, xval + 8 * k, levels);
            const uint16_t u = levels_code(levels);
            if (!snap_levels_from_grid) memcpy(L + 8 * k, levels, 8);
            int grid_index = t->map[u];
            if (grid_index < 0) grid_index = best_neighbour(t, u, xval + 8 * k, waux + 8 * k, scale, L + 8 * k);
            if (snap_levels_from_grid) {
                for (int i = 0; i < 8; i++) L[8 * k + i] = (int8_t)((grid_odd(t, grid_index, i) - 1) / 2);
            }
        }
        float sumqx = 0, sumq2 = 0;
        for (int i = 0; i < n; i++) {
            const float w = weight[i];
            const float q = 2 * L[i] + 1;
            sumqx = fmaf(w * xval[i], q, sumqx);
            sumq2 = fmaf(w * q, q, sumq2);
        }
        if (sumq2 > 0) scale = sumqx / sumq2;
    }
    if (scale < 0) {
        /* Never expected; the stored scale is unsigned, so flip the signs. */
        scale = -scale;
        for (int k = 0; k < ngroups; k++) block_signs[k] = (~block_signs[k]) & 127;
    }
    return scale;
}

static void importance_weights(const float *xb, const float *qw, float sigma2, int n, float *weight, float *waux) {
    for (int i = 0; i < n; i++) weight[i] = qw[i] * sqrtf(fmaf(xb[i], xb[i], sigma2));
    if (waux) {
        for (int i = 0; i < n; i++) waux[i] = sqrtf(weight[i]);
    }
}

static float block_sigma2(const float *xbl) {
    float sumx2 = 0;
    for (int i = 0; i < QK_K; i++) sumx2 += xbl[i] * xbl[i];
    return sumx2 / QK_K;
}

static bool grid_index_of(const struct iq2_search *t, const int8_t *L, int *index) {
    const int32_t g = t->map[levels_code(L)];
    if (g < 0) {
        error_set("IQ2 quantization: internal error, a group left the grid");
        return false;
    }
    *index = g;
    return true;
}

/* IQ2_XXS: after the scales are rounded to 4 bits, each group's grid point is
 * searched again over the whole codebook at its final scale, and d refitted. */
static void xxs_refine_block(const struct iq2_search *t, const float *xbl, const float *qwbl, float sigma2,
                             const float *scales, float d, uint32_t *q2, block_iq2_xxs *y) {
    const float id = 1 / d;
    float weight[32];
    float sumqx = 0, sumq2 = 0;
    for (int ib = 0; ib < QK_K / 32; ib++) {
        int l = quant_nearest_int(0.5f * fmaf(id, scales[ib], -1.f));
        l = MAX(0, MIN(15, l));
        q2[2 * ib + 1] |= (uint32_t)l << 28;
        const float *xb = xbl + 32 * ib;
        importance_weights(xb, qwbl + 32 * ib, sigma2, 32, weight, NULL);
        const float db = d * (1 + 2 * l);
        uint32_t u = 0;
        for (int k = 0; k < 4; k++) {
            const uint8_t signs = iq2_sign_byte((q2[2 * ib + 1] >> (7 * k)) & 127);
            const float *xk = xb + 8 * k;
            const float *wk = weight + 8 * k;
            const int current = (int)((q2[2 * ib] >> (8 * k)) & 0xFF);
            int best_index = current;
            float best_mse = 0;
            for (int j = 0; j < 8; j++) {
                const float diff = db * grid_odd(t, current, j) * sign_of(signs, j) - xk[j];
                best_mse = fmaf(wk[j] * diff, diff, best_mse);
            }
            for (int idx = 0; idx < t->grid_size; idx++) {
                float mse = 0;
                for (int j = 0; j < 8; j++) {
                    const float diff = db * grid_odd(t, idx, j) * sign_of(signs, j) - xk[j];
                    mse = fmaf(wk[j] * diff, diff, mse);
                }
                if (mse < best_mse) {
                    best_mse = mse;
                    best_index = idx;
                }
            }
            u |= (uint32_t)best_index << (8 * k);
            for (int j = 0; j < 8; j++) {
                const float q = db * grid_odd(t, best_index, j) * sign_of(signs, j);
                sumqx = fmaf(wk[j] * q, xk[j], sumqx);
                sumq2 = fmaf(wk[j] * q, q, sumq2);
            }
        }
        q2[2 * ib] = u;
        if (sumq2 > 0) y->d = fp32_to_fp16(d * sumqx / sumq2);
    }
}

bool quant_iq2_xxs_quantize_imatrix(const float *x, void *vy, int64_t n, const float *qw) {
    const struct iq2_search *t = iq2_search_get(false);
    if (!t) return false;
    block_iq2_xxs *y = vy;
    float scales[QK_K / 32], weight[32], xval[32], waux[32];
    int8_t L[32] = { 0 };
    bool is_on_grid[4] = { false };
    uint8_t block_signs[4];
    uint32_t q2[2 * (QK_K / 32)];
    for (int64_t ibl = 0; ibl < n / QK_K; ibl++) {
        const float *xbl = x + QK_K * ibl;
        const float *qwbl = qw + QK_K * ibl;
        y[ibl].d = fp32_to_fp16(0.f);
        memset(q2, 0, sizeof q2);
        float max_scale = 0;
        const float sigma2 = block_sigma2(xbl);
        for (int ib = 0; ib < QK_K / 32; ib++) {
            const float *xb = xbl + 32 * ib;
            importance_weights(xb, qwbl + 32 * ib, sigma2, 32, weight, waux);
            fold_signs(xb, weight, 4, xval, block_signs);
            float max = xval[0];
            for (int i = 1; i < 32; i++) max = MAX(max, xval[i]);
            if (!max) {
                scales[ib] = 0;
                memset(L, 0, sizeof L);
                continue;
            }
            const float scale = search_group(t, 4, xval, weight, waux, L, is_on_grid, block_signs, true);
            for (int k = 0; k < 4; k++) {
                int grid_index;
                if (!grid_index_of(t, L + 8 * k, &grid_index)) return false;
                q2[2 * ib + 0] |= (uint32_t)grid_index << (8 * k);
                q2[2 * ib + 1] |= (uint32_t)block_signs[k] << (7 * k);
            }
            scales[ib] = scale;
            max_scale = MAX(max_scale, scale);
        }
        if (!max_scale) {
            memset(y[ibl].qs, 0, sizeof y[ibl].qs);
            continue;
        }
        const float d = max_scale / 31;
        y[ibl].d = fp32_to_fp16(d);
        xxs_refine_block(t, xbl, qwbl, sigma2, scales, d, q2, &y[ibl]);
        memcpy(y[ibl].qs, q2, sizeof y[ibl].qs);
    }
    return true;
}

bool quant_iq2_xs_quantize_imatrix(const float *x, void *vy, int64_t n, const float *qw) {
    const struct iq2_search *t = iq2_search_get(true);
    if (!t) return false;
    block_iq2_xs *y = vy;
    float scales[QK_K / 16], weight[16], xval[16], waux[16];
    int8_t L[16] = { 0 };
    bool is_on_grid[2];
    uint8_t block_signs[2];
    uint16_t q2[2 * (QK_K / 16)];
    for (int64_t ibl = 0; ibl < n / QK_K; ibl++) {
        const float *xbl = x + QK_K * ibl;
        const float *qwbl = qw + QK_K * ibl;
        y[ibl].d = fp32_to_fp16(0.f);
        memset(q2, 0, sizeof q2);
        memset(y[ibl].scales, 0, sizeof y[ibl].scales);
        float max_scale = 0;
        const float sigma2 = block_sigma2(xbl);
        for (int ib = 0; ib < QK_K / 16; ib++) {
            const float *xb = xbl + 16 * ib;
            importance_weights(xb, qwbl + 16 * ib, sigma2, 16, weight, waux);
            fold_signs(xb, weight, 2, xval, block_signs);
            float max = xval[0];
            for (int i = 1; i < 16; i++) max = MAX(max, xval[i]);
            if (!max) {
                scales[ib] = 0;
                memset(L, 0, sizeof L);
                continue;
            }
            is_on_grid[0] = is_on_grid[1] = true;
            const float scale = search_group(t, 2, xval, weight, waux, L, is_on_grid, block_signs, false);
            for (int k = 0; k < 2; k++) {
                int grid_index;
                if (!grid_index_of(t, L + 8 * k, &grid_index)) return false;
                q2[2 * ib + k] = (uint16_t)(grid_index | (block_signs[k] << 9));
            }
            scales[ib] = scale;
            max_scale = MAX(max_scale, scale);
        }
        if (!max_scale) {
            memset(y[ibl].qs, 0, sizeof y[ibl].qs);
            continue;
        }
        const float d = max_scale / 31;
        y[ibl].d = fp32_to_fp16(d);
        const float id = 1 / d;
        for (int ib = 0; ib < QK_K / 16; ib++) {
            int l = quant_nearest_int(0.5f * fmaf(id, scales[ib], -1.f));
            l = MAX(0, MIN(15, l));
            y[ibl].scales[ib / 2] |= (uint8_t)(l << (4 * (ib % 2)));
        }
        memcpy(y[ibl].qs, q2, sizeof y[ibl].qs);
    }
    return true;
}

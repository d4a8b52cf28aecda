/*
 * The k-quants: Q2_K, Q3_K, Q4_K, Q5_K, Q6_K (weights) and Q8_K (their
 * activation type), in super-blocks of 256.
 *
 * Quantizers follow b1892's ggml-quants.c operation for operation so that the
 * bytes agree: the reference ones (quantize_row_*_reference, used when no
 * importance matrix is given) and the importance-matrix ones
 * (quantize_row_*_impl). The helpers below search scales the way b1892's
 * make_*_quants do; float expressions keep b1892's evaluation order.
 */
#include <math.h>

#include "quant_impl.h"
#include "quant_lanes.h"

#define MIN(a, b) ((a) < (b) ? (a) : (b))
#define MAX(a, b) ((a) > (b) ? (a) : (b))

/* ---- scale search helpers ---------------------------------------------------- */

/* Symmetric quants L[i] in [0, 2*nmax) (offset by nmax) with the
 * weighted-least-squares scale over 19 trial scales; weights NULL = x^2.
 * (b1892 make_qx_quants, rmse_type 1.) */
QUANT_FMA_CLONES static float make_qx_quants(int n, int nmax, const float *x, int8_t *L, const float *weights) {
    float max = 0, amax = 0;
    for (int i = 0; i < n; i++) {
        const float ax = fabsf(x[i]);
        if (ax > amax) { amax = ax; max = x[i]; }
    }
    if (amax < 1e-30f) {
        memset(L, 0, (size_t)n);
        return 0.f;
    }
    float iscale = -nmax / max;
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; i++) {
        int l = quant_nearest_int_fma(iscale, x[i]);
        l = MAX(-nmax, MIN(nmax - 1, l));
        L[i] = (int8_t)(l + nmax);
        const float w = weights ? weights[i] : x[i] * x[i];
        sumlx = fmaf(w * x[i], (float)l, sumlx);
        suml2 = fmaf(w * l, (float)l, suml2);
    }
    float scale = sumlx / suml2;
    float best = scale * sumlx;
    for (int is = -9; is <= 9; is++) {
        if (is == 0) continue;
        iscale = -fmaf(0.1f, (float)is, (float)nmax) / max;
        sumlx = suml2 = 0;
        for (int i = 0; i < n; i++) {
            int l = quant_nearest_int_fma(iscale, x[i]);
            l = MAX(-nmax, MIN(nmax - 1, l));
            const float w = weights ? weights[i] : x[i] * x[i];
            /* b1892's compiler vectorized this loop for nmax 32 (products
             * rounded, then summed in order) and fused it otherwise. */
            if (nmax == 32) {
                sumlx += w * x[i] * l;
                suml2 += w * l * l;
            } else {
                sumlx = fmaf(w * x[i], (float)l, sumlx);
                suml2 = fmaf(w * l, (float)l, suml2);
            }
        }
        if (suml2 > 0 && sumlx * sumlx > best * suml2) {
            for (int i = 0; i < n; i++) {
                const int l = quant_nearest_int_fma(iscale, x[i]);
                L[i] = (int8_t)(nmax + MAX(-nmax, MIN(nmax - 1, l)));
            }
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    return scale;
}

/* Symmetric 3-bit quants refined one element at a time (weights x^2),
 * L[i] in [0, 2*nmax). (b1892 make_q3_quants with do_rmse.) */
QUANT_FMA_CLONES static float make_q3_quants(int n, int nmax, const float *x, int8_t *L) {
    float max = 0, amax = 0;
    for (int i = 0; i < n; i++) {
        const float ax = fabsf(x[i]);
        if (ax > amax) { amax = ax; max = x[i]; }
    }
    if (!amax) {
        memset(L, 0, (size_t)n);
        return 0.f;
    }
    const float iscale = -nmax / max;
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; i++) {
        int l = quant_nearest_int_fma(iscale, x[i]);
        l = MAX(-nmax, MIN(nmax - 1, l));
        L[i] = (int8_t)l;
        const float w = x[i] * x[i];
        sumlx = fmaf(w * x[i], (float)l, sumlx);
        suml2 = fmaf(w * l, (float)l, suml2);
    }
    for (int itry = 0; itry < 5; itry++) {
        int n_changed = 0;
        for (int i = 0; i < n; i++) {
            const float w = x[i] * x[i];
            float slx = fmaf(-(w * x[i]), (float)L[i], sumlx);
            if (slx > 0) {
                float sl2 = fmaf(-(w * L[i]), (float)L[i], suml2);
                int new_l = quant_nearest_int(x[i] * sl2 / slx);
                new_l = MAX(-nmax, MIN(nmax - 1, new_l));
                if (new_l != L[i]) {
                    slx = fmaf(w * x[i], (float)new_l, slx);
                    sl2 = fmaf(w * new_l, (float)new_l, sl2);
                    if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
                        L[i] = (int8_t)new_l;
                        sumlx = slx;
                        suml2 = sl2;
                        n_changed++;
                    }
                }
            }
        }
        if (!n_changed) break;
    }
    for (int i = 0; i < n; i++) L[i] = (int8_t)(L[i] + nmax);
    return sumlx / suml2;
}

/* Asymmetric quants L[i] in [0, nmax] with a min: x ~ scale*L - the_min.
 * Tries nstep+1 scales around nmax/(max-min) and keeps the one with the
 * smallest weighted error (absolute when use_mad, else squared).
 * (b1892 make_qkx2_quants; make_qkx3_quants is the same with weights given.) */
QUANT_FMA_CLONES static float make_qkx_quants(int n, int nmax, const float *x, const float *weights, uint8_t *L,
                             float *the_min, uint8_t *Laux, float rmin, float rdelta, int nstep,
                             bool use_mad) {
    float min = x[0], max = x[0];
    float sum_w = weights[0];
    float sum_x = sum_w * x[0];
    for (int i = 1; i < n; i++) {
        if (x[i] < min) min = x[i];
        if (x[i] > max) max = x[i];
        const float w = weights[i];
        sum_w += w;
        /* b1892's compiler fused this sum only where it unrolled the loop (n = 16). */
        sum_x = n <= 16 ? fmaf(w, x[i], sum_x) : sum_x + w * x[i];
    }
    if (min > 0) min = 0;
    if (max == min) {
        memset(L, 0, (size_t)n);
        *the_min = -min;
        return 0.f;
    }
    float iscale = nmax / (max - min);
    float scale = 1 / iscale;
    float best_mad = 0;
    for (int i = 0; i < n; i++) {
        const int l = quant_nearest_int_fma(iscale, (x[i] - min));
        L[i] = (uint8_t)MAX(0, MIN(nmax, l));
        float diff = fmaf(scale, (float)L[i], min) - x[i];
        diff = use_mad ? fabsf(diff) : diff * diff;
        best_mad = fmaf(weights[i], diff, best_mad);
    }
    for (int is = 0; is <= nstep; is++) {
        iscale = (fmaf(rdelta, (float)is, rmin) + nmax) / (max - min);
        float sum_l = 0, sum_l2 = 0, sum_xl = 0;
        for (int i = 0; i < n; i++) {
            int l = quant_nearest_int_fma(iscale, (x[i] - min));
            l = MAX(0, MIN(nmax, l));
            Laux[i] = (uint8_t)l;
            const float wl = weights[i] * l;
            sum_l += wl;
            sum_l2 = fmaf(wl, (float)l, sum_l2);
            sum_xl = fmaf(wl, x[i], sum_xl);
        }
        const float D = fmaf(sum_w, sum_l2, -(sum_l * sum_l));
        if (D > 0) {
            float this_scale = fmaf(-sum_x, sum_l, sum_w * sum_xl) / D;
            float this_min = fmaf(sum_l2, sum_x, -(sum_l * sum_xl)) / D;
            if (this_min > 0) {
                this_min = 0;
                this_scale = sum_xl / sum_l2;
            }
            float mad = 0;
            for (int i = 0; i < n; i++) {
                float diff = fmaf(this_scale, (float)Laux[i], this_min) - x[i];
                diff = use_mad ? fabsf(diff) : diff * diff;
                mad = fmaf(weights[i], diff, mad);
            }
            if (mad < best_mad) {
                memcpy(L, Laux, (size_t)n);
                best_mad = mad;
                scale = this_scale;
                min = this_min;
            }
        }
    }
    *the_min = -min;
    return scale;
}

/* Non-negative quants L[i] in [0, nmax] for non-negative x (the sub-block
 * scales and mins of Q2_K), weighted by quant_weights. (b1892 make_qp_quants.) */
QUANT_FMA_CLONES static float make_qp_quants(int n, int nmax, const float *x, uint8_t *L, const float *quant_weights) {
    float max = 0;
    for (int i = 0; i < n; i++) max = MAX(max, x[i]);
    if (!max) {
        memset(L, 0, (size_t)n);
        return 0.f;
    }
    float iscale = nmax / max;
    for (int i = 0; i < n; i++) L[i] = (uint8_t)quant_nearest_int_fma(iscale, x[i]);
    const float scale = 1 / iscale;
    float best_mse = 0;
    for (int i = 0; i < n; i++) {
        const float diff = fmaf(-scale, (float)L[i], x[i]);
        best_mse = fmaf(quant_weights[i] * diff, diff, best_mse);
    }
    for (int is = -4; is <= 4; is++) {
        if (is == 0) continue;
        const float iscale_is = fmaf(0.1f, (float)is, (float)nmax) / max;
        const float scale_is = 1 / iscale_is;
        float mse = 0;
        for (int i = 0; i < n; i++) {
            int l = quant_nearest_int_fma(iscale_is, x[i]);
            l = MIN(nmax, l);
            const float diff = fmaf(-scale_is, (float)l, x[i]);
            mse = fmaf(quant_weights[i] * diff, diff, mse);
        }
        if (mse < best_mse) {
            best_mse = mse;
            iscale = iscale_is;
        }
    }
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; i++) {
        int l = quant_nearest_int_fma(iscale, x[i]);
        l = MIN(nmax, l);
        L[i] = (uint8_t)l;
        const float w = quant_weights[i];
        sumlx = fmaf(w * x[i], (float)l, sumlx);
        suml2 = fmaf(w * l, (float)l, suml2);
    }
    for (int itry = 0; itry < 5; itry++) {
        int n_changed = 0;
        for (int i = 0; i < n; i++) {
            const float w = quant_weights[i];
            float slx = fmaf(-(w * x[i]), (float)L[i], sumlx);
            float sl2 = fmaf(-(w * L[i]), (float)L[i], suml2);
            if (slx > 0 && sl2 > 0) {
                int new_l = quant_nearest_int(x[i] * sl2 / slx);
                new_l = MIN(nmax, new_l);
                if (new_l != L[i]) {
                    slx = fmaf(w * x[i], (float)new_l, slx);
                    sl2 = fmaf(w * new_l, (float)new_l, sl2);
                    if (slx * slx * suml2 > sumlx * sumlx * sl2) {
                        L[i] = (uint8_t)new_l;
                        sumlx = slx;
                        suml2 = sl2;
                        n_changed++;
                    }
                }
            }
        }
        if (!n_changed) break;
    }
    return sumlx / suml2;
}

/* Scale and min j (0..7) of a Q4_K/Q5_K block: 6 bits each, packed in 12 bytes. */
static inline void get_scale_min_k4(int j, const uint8_t *q, uint8_t *d, uint8_t *m) {
    if (j < 4) {
        *d = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *d = (uint8_t)((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
        *m = (uint8_t)((q[j + 4] >> 4) | ((q[j - 0] >> 6) << 4));
    }
}

/* Packs 6-bit values ls[j], lm[j] (j < 8) as get_scale_min_k4 reads them. */
static void set_scales_mins_k4(const uint8_t *ls, const uint8_t *lm, uint8_t *scales) {
    for (int j = 0; j < QK_K / 32; j++) {
        if (j < 4) {
            scales[j] = ls[j];
            scales[j + 4] = lm[j];
        } else {
            scales[j + 4] = (uint8_t)((ls[j] & 0xF) | ((lm[j] & 0xF) << 4));
            scales[j - 4] |= (uint8_t)((ls[j] >> 4) << 6);
            scales[j - 0] |= (uint8_t)((lm[j] >> 4) << 6);
        }
    }
}

static void q3_K_pack_scales(const int *l6, uint8_t *scales) {
    memset(scales, 0, 12);
    for (int j = 0; j < QK_K / 16; j++) {
        const int l = l6[j];
        if (j < 8) {
            scales[j] = (uint8_t)(l & 0xF);
        } else {
            scales[j - 8] |= (uint8_t)((l & 0xF) << 4);
        }
        scales[j % 4 + 8] |= (uint8_t)((l >> 4) << (2 * (j / 4)));
    }
}

/* 2-bit values L[0..255]: byte l of each 32 holds elements l, l+32, l+64, l+96. */
static void pack_2bit(const uint8_t *L, uint8_t *qs) {
    for (int j = 0; j < QK_K; j += 128) {
        for (int l = 0; l < 32; l++) {
            qs[j / 4 + l] = (uint8_t)(L[j + l] | (L[j + l + 32] << 2) | (L[j + l + 64] << 4) | (L[j + l + 96] << 6));
        }
    }
}

/* The inverse of pack_2bit. */
static void unpack_2bit(const uint8_t *qs, int8_t *L) {
    for (int j = 0; j < QK_K; j += 128) {
        for (int shift = 0; shift < 4; shift++) {
            for (int l = 0; l < 32; l++) L[j + 32 * shift + l] = (int8_t)((qs[j / 4 + l] >> (2 * shift)) & 3);
        }
    }
}

/* ---- Q2_K -------------------------------------------------------------------- */

/* Final 2-bit quants from the stored (rounded) scales; sub-blocks with a zero
 * scale keep the quants of the search. */
static void q2_K_requantize(const float *x, const block_q2_K *y, float dm, float mm, uint8_t *L) {
    for (int j = 0; j < QK_K / 16; j++) {
        const float d = dm * (y->scales[j] & 0xF);
        if (!d) continue;
        const float m = mm * (y->scales[j] >> 4);
        for (int ii = 0; ii < 16; ii++) {
            const int l = quant_nearest_int((x[16 * j + ii] + m) / d);
            L[16 * j + ii] = (uint8_t)MAX(0, MIN(3, l));
        }
    }
}

void quant_q2_K_quantize_ref(const float *x, void *vy, int64_t n) {
    block_q2_K *y = vy;
    uint8_t L[QK_K], Laux[16];
    float weights[16], mins[QK_K / 16], scales[QK_K / 16];
    const float q4scale = 15.f;
    for (int64_t i = 0; i < n / QK_K; i++, x += QK_K) {
        float max_scale = 0, max_min = 0;
        for (int j = 0; j < QK_K / 16; j++) {
            for (int l = 0; l < 16; l++) weights[l] = fabsf(x[16 * j + l]);
            scales[j] = make_qkx_quants(16, 3, x + 16 * j, weights, L + 16 * j, &mins[j], Laux, -0.5f, 0.1f, 15, true);
            if (scales[j] > max_scale) max_scale = scales[j];
            if (mins[j] > max_min) max_min = mins[j];
        }
        if (max_scale > 0) {
            const float iscale = q4scale / max_scale;
            for (int j = 0; j < QK_K / 16; j++) y[i].scales[j] = (uint8_t)quant_nearest_int_fma(iscale, scales[j]);
            y[i].d = fp32_to_fp16(max_scale / q4scale);
        } else {
            memset(y[i].scales, 0, sizeof y[i].scales);
            y[i].d = fp32_to_fp16(0.f);
        }
        if (max_min > 0) {
            const float iscale = q4scale / max_min;
            for (int j = 0; j < QK_K / 16; j++) {
                y[i].scales[j] |= (uint8_t)(quant_nearest_int_fma(iscale, mins[j]) << 4);
            }
            y[i].dmin = fp32_to_fp16(max_min / q4scale);
        } else {
            y[i].dmin = fp32_to_fp16(0.f);
        }
        q2_K_requantize(x, &y[i], fp16_to_fp32(y[i].d), fp16_to_fp32(y[i].dmin), L);
        pack_2bit(L, y[i].qs);
    }
}

void quant_q2_K_quantize_imatrix(const float *x, void *vy, int64_t n, const float *qw) {
    block_q2_K *y = vy;
    uint8_t L[QK_K], Laux[16], Ls[QK_K / 16], Lm[QK_K / 16];
    float mins[QK_K / 16], scales[QK_K / 16], sw[QK_K / 16], weight[16];
    for (int64_t i = 0; i < n / QK_K; i++, x += QK_K) {
        float sumx2 = 0;
        for (int j = 0; j < QK_K; j++) sumx2 += x[j] * x[j];
        const float sigma2 = sumx2 / QK_K;
        for (int j = 0; j < QK_K / 16; j++) {
            const float *w = qw + QK_K * i + 16 * j;
            for (int l = 0; l < 16; l++) weight[l] = w[l] * sqrtf(fmaf(x[16 * j + l], x[16 * j + l], sigma2));
            sw[j] = 0;
            for (int l = 0; l < 16; l++) sw[j] += weight[l];
            scales[j] = make_qkx_quants(16, 3, x + 16 * j, weight, L + 16 * j, &mins[j], Laux, -0.9f, 0.05f, 36, false);
        }
        const float dm = make_qp_quants(QK_K / 16, 15, scales, Ls, sw);
        const float mm = make_qp_quants(QK_K / 16, 15, mins, Lm, sw);
        y[i].d = fp32_to_fp16(dm);
        y[i].dmin = fp32_to_fp16(mm);
        for (int j = 0; j < QK_K / 16; j++) y[i].scales[j] = (uint8_t)(Ls[j] | (Lm[j] << 4));
        q2_K_requantize(x, &y[i], fp16_to_fp32(y[i].d), fp16_to_fp32(y[i].dmin), L);
        pack_2bit(L, y[i].qs);
    }
}

void quant_q2_K_dequantize(const void *vx, float *y, int64_t n) {
    const block_q2_K *x = vx;
    for (int64_t i = 0; i < n / QK_K; i++) {
        const float d = fp16_to_fp32(x[i].d);
        const float min = fp16_to_fp32(x[i].dmin);
        const uint8_t *q = x[i].qs;
        int is = 0;
        for (int half = 0; half < QK_K; half += 128, q += 32) {
            for (int shift = 0; shift < 8; shift += 2) {
                for (int part = 0; part < 2; part++) {
                    const uint8_t sc = x[i].scales[is++];
                    const float dl = d * (sc & 0xF), ml = min * (sc >> 4);
                    for (int l = 0; l < 16; l++) *y++ = dl * ((q[16 * part + l] >> shift) & 3) - ml;
                }
            }
        }
    }
}

/* b1892's AVX2 ggml_vec_dot_q2_K_q8_K (quant_lanes.h): per block, first the
 * 4-bit mins against the 16-sums of Q8_K, lane k taking sums 2k and 2k+1
 * (_mm256_madd_epi16), fused with -d_y*dmin; then the quants times their 4-bit
 * scales in lanes, fused with d_y*d. */
void quant_q2_K_dot_q8_K(int64_t n, float *s, const void *vx, const void *vy) {
    const block_q2_K *x = vx;
    const block_q8_K *y = vy;
    float acc[QUANT_LANES] = { 0 };
    for (int64_t i = 0; i < n / QK_K; i++) {
        const uint8_t *sc = x[i].scales;
        const float d = y[i].d * fp16_to_fp32(x[i].d);
        const float dmin = -y[i].d * fp16_to_fp32(x[i].dmin);
        int32_t mins[QUANT_LANES];
        for (int k = 0; k < QUANT_LANES; k++) {
            mins[k] = (sc[2 * k] >> 4) * y[i].bsums[2 * k] + (sc[2 * k + 1] >> 4) * y[i].bsums[2 * k + 1];
        }
        quant_lanes_fma(acc, dmin, mins);
        int32_t scales[QK_K / 16];
        for (int j = 0; j < QK_K / 16; j++) scales[j] = sc[j] & 0xF;
        int8_t a[QK_K];
        unpack_2bit(x[i].qs, a);
        int32_t lanes[QUANT_LANES] = { 0 };
        quant_lanes_add(lanes, a, y[i].qs, QK_K, scales, 16);
        quant_lanes_fma(acc, d, lanes);
    }
    *s = quant_lanes_hsum(acc);
}

/* ---- Q3_K -------------------------------------------------------------------- */

/* Final 3-bit quants from the stored scales, then the high-bit mask and low
 * bits. Sub-blocks whose stored scale is zero keep the quants of the search. */
static void q3_K_finish(const float *x, block_q3_K *y, int8_t *L) {
    int8_t sc[QK_K / 16];
    quant_q3_K_scales(y->scales, sc);
    for (int j = 0; j < QK_K / 16; j++) {
        const float d = fp16_to_fp32(y->d) * (sc[j] - 32);
        if (!d) continue;
        for (int ii = 0; ii < 16; ii++) {
            const int l = quant_nearest_int(x[16 * j + ii] / d);
            L[16 * j + ii] = (int8_t)(MAX(-4, MIN(3, l)) + 4);
        }
    }
    /* High bit of element j goes to hmask[j % 32], bit j / 32. */
    memset(y->hmask, 0, QK_K / 8);
    uint8_t low[QK_K];
    for (int j = 0; j < QK_K; j++) {
        low[j] = (uint8_t)L[j];
        if (L[j] > 3) {
            y->hmask[j % 32] |= (uint8_t)(1u << (j / 32));
            low[j] = (uint8_t)(L[j] - 4);
        }
    }
    pack_2bit(low, y->qs);
}

void quant_q3_K_quantize_ref(const float *x, void *vy, int64_t n) {
    block_q3_K *y = vy;
    int8_t L[QK_K];
    float scales[QK_K / 16];
    for (int64_t i = 0; i < n / QK_K; i++, x += QK_K) {
        float max_scale = 0, amax = 0;
        for (int j = 0; j < QK_K / 16; j++) {
            scales[j] = make_q3_quants(16, 4, x + 16 * j, L + 16 * j);
            const float scale = fabsf(scales[j]);
            if (scale > amax) {
                amax = scale;
                max_scale = scales[j];
            }
        }
        if (max_scale) {
            const float iscale = -32.f / max_scale;
            int l6[QK_K / 16];
            for (int j = 0; j < QK_K / 16; j++) {
                /* b1892 keeps this in an int8_t before clamping. */
                const int8_t l = (int8_t)quant_nearest_int_fma(iscale, scales[j]);
                l6[j] = MAX(-32, MIN(31, l)) + 32;
            }
            q3_K_pack_scales(l6, y[i].scales);
            y[i].d = fp32_to_fp16(1 / iscale);
        } else {
            memset(y[i].scales, 0, sizeof y[i].scales);
            y[i].d = fp32_to_fp16(0.f);
        }
        q3_K_finish(x, &y[i], L);
    }
}

void quant_q3_K_quantize_imatrix(const float *x, void *vy, int64_t n, const float *qw) {
    block_q3_K *y = vy;
    int8_t L[QK_K], Ls[QK_K / 16];
    float scales[QK_K / 16], weight[16], sw[QK_K / 16];
    for (int64_t i = 0; i < n / QK_K; i++, x += QK_K) {
        float sumx2 = 0;
        for (int j = 0; j < QK_K; j++) sumx2 += x[j] * x[j];
        const float sigma2 = 2 * sumx2 / QK_K;
        for (int j = 0; j < QK_K / 16; j++) {
            const float *w = qw + QK_K * i + 16 * j;
            for (int l = 0; l < 16; l++) weight[l] = w[l] * sqrtf(fmaf(x[16 * j + l], x[16 * j + l], sigma2));
            float sumw = 0;
            for (int l = 0; l < 16; l++) sumw += weight[l];
            sw[j] = sumw;
            scales[j] = make_qx_quants(16, 4, x + 16 * j, L + 16 * j, weight);
        }
        const float d_block = make_qx_quants(QK_K / 16, 32, scales, Ls, sw);
        int l6[QK_K / 16];
        for (int j = 0; j < QK_K / 16; j++) l6[j] = Ls[j];
        q3_K_pack_scales(l6, y[i].scales);
        y[i].d = fp32_to_fp16(d_block);
        q3_K_finish(x, &y[i], L);
    }
}

void quant_q3_K_dequantize(const void *vx, float *y, int64_t n) {
    const block_q3_K *x = vx;
    for (int64_t i = 0; i < n / QK_K; i++) {
        const float d_all = fp16_to_fp32(x[i].d);
        int8_t scales[QK_K / 16];
        quant_q3_K_scales(x[i].scales, scales);
        const uint8_t *q = x[i].qs;
        const uint8_t *hm = x[i].hmask;
        uint8_t m = 1;
        int is = 0;
        for (int half = 0; half < QK_K; half += 128, q += 32) {
            for (int shift = 0; shift < 8; shift += 2, m <<= 1) {
                for (int part = 0; part < 2; part++) {
                    const float dl = d_all * (scales[is++] - 32);
                    for (int l = 16 * part; l < 16 * part + 16; l++) {
                        *y++ = dl * (((q[l] >> shift) & 3) - ((hm[l] & m) ? 0 : 4));
                    }
                }
            }
        }
    }
}

/* The 256 quants of a Q3_K block as signed values -4..3: the low 2 bits,
 * minus 4 where the high bit (hmask[j % 32], bit j / 32) is clear. */
static void q3_K_unpack_quants(const block_q3_K *x, int8_t *a) {
    unpack_2bit(x->qs, a);
    for (int j = 0; j < QK_K; j++) {
        if (!(x->hmask[j % 32] & (1u << (j / 32)))) a[j] = (int8_t)(a[j] - 4);
    }
}

/* b1892's AVX2 ggml_vec_dot_q3_K_q8_K: the quants times their 6-bit scales
 * (bias 32 removed) in lanes, fused per block with d_y*d (quant_lanes.h). */
void quant_q3_K_dot_q8_K(int64_t n, float *s, const void *vx, const void *vy) {
    const block_q3_K *x = vx;
    const block_q8_K *y = vy;
    float acc[QUANT_LANES] = { 0 };
    for (int64_t i = 0; i < n / QK_K; i++) {
        int8_t a[QK_K], sc[QK_K / 16];
        q3_K_unpack_quants(&x[i], a);
        quant_q3_K_scales(x[i].scales, sc);
        int32_t scales[QK_K / 16];
        for (int j = 0; j < QK_K / 16; j++) scales[j] = sc[j] - 32;
        int32_t lanes[QUANT_LANES] = { 0 };
        quant_lanes_add(lanes, a, y[i].qs, QK_K, scales, 16);
        quant_lanes_fma(acc, y[i].d * fp16_to_fp32(x[i].d), lanes);
    }
    *s = quant_lanes_hsum(acc);
}

/* ---- Q4_K, Q5_K --------------------------------------------------------------- */

/* Rounds the 8 sub-block scales and mins to 6 bits against their maxima,
 * stores them with d and dmin, and computes the final quants L[] in [0, nmax]
 * from the stored values (sub-blocks with a zero scale keep the search's). */
static void k4_store_scales_and_requantize(const float *x, const float *scales, const float *mins,
                                           float max_scale, float max_min, int nmax,
                                           uint8_t *scales_out, fp16_t *d_out, fp16_t *dmin_out,
                                           uint8_t *L) {
    const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
    const float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
    uint8_t ls[QK_K / 32], lm[QK_K / 32];
    for (int j = 0; j < QK_K / 32; j++) {
        ls[j] = (uint8_t)MIN(63, (uint8_t)quant_nearest_int_fma(inv_scale, scales[j]));
        lm[j] = (uint8_t)MIN(63, (uint8_t)quant_nearest_int_fma(inv_min, mins[j]));
    }
    set_scales_mins_k4(ls, lm, scales_out);
    *d_out = fp32_to_fp16(max_scale / 63.f);
    *dmin_out = fp32_to_fp16(max_min / 63.f);
    for (int j = 0; j < QK_K / 32; j++) {
        uint8_t sc, m;
        get_scale_min_k4(j, scales_out, &sc, &m);
        const float d = fp16_to_fp32(*d_out) * sc;
        if (!d) continue;
        const float dm = fp16_to_fp32(*dmin_out) * m;
        for (int ii = 0; ii < 32; ii++) {
            const int l = quant_nearest_int((x[32 * j + ii] + dm) / d);
            L[32 * j + ii] = (uint8_t)MAX(0, MIN(nmax, l));
        }
    }
}

/* Scale search of the 8 sub-blocks of 32: reference weights are
 * rms(sub-block) + |x|; with an importance matrix qw * sqrt(sigma^2 + x^2). */
static void k4_search(const float *x, const float *qw, int nmax, uint8_t *L, float *scales, float *mins,
                      float *max_scale, float *max_min) {
    uint8_t Laux[32];
    float weights[32];
    float sigma2 = 0;
    if (qw) {
        float sum_x2 = 0;
        for (int l = 0; l < QK_K; l++) sum_x2 += x[l] * x[l];
        sigma2 = sum_x2 / QK_K;
    }
    *max_scale = 0;
    *max_min = 0;
    for (int j = 0; j < QK_K / 32; j++) {
        const float *xb = x + 32 * j;
        if (qw) {
            for (int l = 0; l < 32; l++) weights[l] = qw[32 * j + l] * sqrtf(fmaf(xb[l], xb[l], sigma2));
            scales[j] = make_qkx_quants(32, nmax, xb, weights, L + 32 * j, &mins[j], Laux, -0.9f, 0.05f, 36, false);
        } else {
            float sum_x2 = 0;
            for (int l = 0; l < 32; l++) sum_x2 += xb[l] * xb[l];
            const float av_x = sqrtf(sum_x2 / 32);
            for (int l = 0; l < 32; l++) weights[l] = av_x + fabsf(xb[l]);
            if (nmax == 15) {
                scales[j] = make_qkx_quants(32, 15, xb, weights, L + 32 * j, &mins[j], Laux, -1.f, 0.1f, 20, false);
            } else {
                scales[j] = make_qkx_quants(32, 31, xb, weights, L + 32 * j, &mins[j], Laux, -0.5f, 0.1f, 15, false);
            }
        }
        if (scales[j] > *max_scale) *max_scale = scales[j];
        if (mins[j] > *max_min) *max_min = mins[j];
    }
}

static void q4_K_quantize_block(const float *x, block_q4_K *y, const float *qw) {
    uint8_t L[QK_K];
    float scales[QK_K / 32], mins[QK_K / 32], max_scale, max_min;
    k4_search(x, qw, 15, L, scales, mins, &max_scale, &max_min);
    k4_store_scales_and_requantize(x, scales, mins, max_scale, max_min, 15, y->scales, &y->d, &y->dmin, L);
    uint8_t *q = y->qs;
    for (int j = 0; j < QK_K; j += 64, q += 32) {
        for (int l = 0; l < 32; l++) q[l] = (uint8_t)(L[j + l] | (L[j + l + 32] << 4));
    }
}

static void q5_K_quantize_block(const float *x, block_q5_K *y, const float *qw) {
    uint8_t L[QK_K];
    float scales[QK_K / 32], mins[QK_K / 32], max_scale, max_min;
    k4_search(x, qw, 31, L, scales, mins, &max_scale, &max_min);
    k4_store_scales_and_requantize(x, scales, mins, max_scale, max_min, 31, y->scales, &y->d, &y->dmin, L);
    uint8_t *qh = y->qh, *ql = y->qs;
    memset(qh, 0, QK_K / 8);
    uint8_t m1 = 1, m2 = 2;
    for (int b = 0; b < QK_K; b += 64, ql += 32, m1 <<= 2, m2 <<= 2) {
        for (int j = 0; j < 32; j++) {
            int l1 = L[b + j], l2 = L[b + j + 32];
            if (l1 > 15) { l1 -= 16; qh[j] |= m1; }
            if (l2 > 15) { l2 -= 16; qh[j] |= m2; }
            ql[j] = (uint8_t)(l1 | (l2 << 4));
        }
    }
}

void quant_q4_K_quantize_ref(const float *x, void *vy, int64_t n) {
    block_q4_K *y = vy;
    for (int64_t i = 0; i < n / QK_K; i++) q4_K_quantize_block(x + QK_K * i, &y[i], NULL);
}

void quant_q4_K_quantize_imatrix(const float *x, void *vy, int64_t n, const float *qw) {
    block_q4_K *y = vy;
    for (int64_t i = 0; i < n / QK_K; i++) q4_K_quantize_block(x + QK_K * i, &y[i], qw + QK_K * i);
}

void quant_q5_K_quantize_ref(const float *x, void *vy, int64_t n) {
    block_q5_K *y = vy;
    for (int64_t i = 0; i < n / QK_K; i++) q5_K_quantize_block(x + QK_K * i, &y[i], NULL);
}

void quant_q5_K_quantize_imatrix(const float *x, void *vy, int64_t n, const float *qw) {
    block_q5_K *y = vy;
    for (int64_t i = 0; i < n / QK_K; i++) q5_K_quantize_block(x + QK_K * i, &y[i], qw + QK_K * i);
}

void quant_q4_K_dequantize(const void *vx, float *y, int64_t n) {
    const block_q4_K *x = vx;
    for (int64_t i = 0; i < n / QK_K; i++) {
        const float d = fp16_to_fp32(x[i].d);
        const float min = fp16_to_fp32(x[i].dmin);
        const uint8_t *q = x[i].qs;
        for (int is = 0; is < QK_K / 32; is += 2, q += 32) {
            uint8_t sc, m;
            get_scale_min_k4(is + 0, x[i].scales, &sc, &m);
            const float d1 = d * sc, m1 = min * m;
            get_scale_min_k4(is + 1, x[i].scales, &sc, &m);
            const float d2 = d * sc, m2 = min * m;
            for (int l = 0; l < 32; l++) *y++ = d1 * (q[l] & 0xF) - m1;
            for (int l = 0; l < 32; l++) *y++ = d2 * (q[l] >> 4) - m2;
        }
    }
}

void quant_q5_K_dequantize(const void *vx, float *y, int64_t n) {
    const block_q5_K *x = vx;
    for (int64_t i = 0; i < n / QK_K; i++) {
        const float d = fp16_to_fp32(x[i].d);
        const float min = fp16_to_fp32(x[i].dmin);
        const uint8_t *ql = x[i].qs;
        const uint8_t *qh = x[i].qh;
        uint8_t u1 = 1, u2 = 2;
        for (int is = 0; is < QK_K / 32; is += 2, ql += 32, u1 <<= 2, u2 <<= 2) {
            uint8_t sc, m;
            get_scale_min_k4(is + 0, x[i].scales, &sc, &m);
            const float d1 = d * sc, m1 = min * m;
            get_scale_min_k4(is + 1, x[i].scales, &sc, &m);
            const float d2 = d * sc, m2 = min * m;
            for (int l = 0; l < 32; l++) *y++ = d1 * ((ql[l] & 0xF) + (qh[l] & u1 ? 16 : 0)) - m1;
            for (int l = 0; l < 32; l++) *y++ = d2 * ((ql[l] >> 4) + (qh[l] & u2 ? 16 : 0)) - m2;
        }
    }
}

/* Q4_K/Q5_K blocks against Q8_K: the quants `a` times their 6-bit scales in
 * lanes (quant_lanes.h), and mins[k] = min k times the sum of the 32
 * activations of sub-block k (b1892 forms those sums with _mm_hadd_epi16 of
 * the 16-sums). */
static void k4_block_lanes(const uint8_t *packed_scales, const int8_t *a, const block_q8_K *y,
                           int32_t lanes[QUANT_LANES], int32_t mins[QK_K / 32]) {
    int32_t scales[QK_K / 32];
    for (int j = 0; j < QK_K / 32; j++) {
        uint8_t sc, m;
        get_scale_min_k4(j, packed_scales, &sc, &m);
        scales[j] = sc;
        mins[j] = m * (y->bsums[2 * j] + y->bsums[2 * j + 1]);
    }
    quant_lanes_add(lanes, a, y->qs, QK_K, scales, 32);
}

/* b1892's AVX2 ggml_vec_dot_q4_K_q8_K: the lanes fused per block with d_y*d;
 * the mins in a 4-lane accumulator (lane k: mins 2k and 2k+1, _mm_madd_epi16)
 * fused with -d_y*dmin and reduced as (m0 + m2) + (m1 + m3), added last. */
void quant_q4_K_dot_q8_K(int64_t n, float *s, const void *vx, const void *vy) {
    const block_q4_K *x = vx;
    const block_q8_K *y = vy;
    float acc[QUANT_LANES] = { 0 }, acc_m[4] = { 0 };
    for (int64_t i = 0; i < n / QK_K; i++) {
        int8_t a[QK_K];
        const uint8_t *q4 = x[i].qs;
        for (int j = 0; j < QK_K; j += 64, q4 += 32) {
            for (int l = 0; l < 32; l++) a[j + l] = (int8_t)(q4[l] & 0xF);
            for (int l = 0; l < 32; l++) a[j + 32 + l] = (int8_t)(q4[l] >> 4);
        }
        int32_t lanes[QUANT_LANES] = { 0 }, mins[QK_K / 32];
        k4_block_lanes(x[i].scales, a, &y[i], lanes, mins);
        const float dmin = -y[i].d * fp16_to_fp32(x[i].dmin);
        for (int k = 0; k < 4; k++) acc_m[k] = fmaf(dmin, (float)(mins[2 * k] + mins[2 * k + 1]), acc_m[k]);
        quant_lanes_fma(acc, y[i].d * fp16_to_fp32(x[i].d), lanes);
    }
    *s = quant_lanes_hsum(acc) + ((acc_m[0] + acc_m[2]) + (acc_m[1] + acc_m[3]));
}

/* b1892's AVX2 ggml_vec_dot_q5_K_q8_K: as Q4_K, but the mins are one integer
 * sum per block, fused into a scalar sum with -d_y*dmin and added last. */
void quant_q5_K_dot_q8_K(int64_t n, float *s, const void *vx, const void *vy) {
    const block_q5_K *x = vx;
    const block_q8_K *y = vy;
    float acc[QUANT_LANES] = { 0 };
    float summs = 0;
    for (int64_t i = 0; i < n / QK_K; i++) {
        int8_t a[QK_K];
        const uint8_t *q4 = x[i].qs;
        const uint8_t *hm = x[i].qh;
        uint8_t m = 1;
        for (int j = 0; j < QK_K; j += 64, q4 += 32) {
            for (int l = 0; l < 32; l++) a[j + l] = (int8_t)((q4[l] & 0xF) + (hm[l] & m ? 16 : 0));
            m <<= 1;
            for (int l = 0; l < 32; l++) a[j + 32 + l] = (int8_t)((q4[l] >> 4) + (hm[l] & m ? 16 : 0));
            m <<= 1;
        }
        int32_t lanes[QUANT_LANES] = { 0 }, mins[QK_K / 32];
        k4_block_lanes(x[i].scales, a, &y[i], lanes, mins);
        int32_t sum_mins = 0;
        for (int j = 0; j < QK_K / 32; j++) sum_mins += mins[j];
        summs = fmaf(-y[i].d * fp16_to_fp32(x[i].dmin), (float)sum_mins, summs);
        quant_lanes_fma(acc, y[i].d * fp16_to_fp32(x[i].d), lanes);
    }
    *s = quant_lanes_hsum(acc) + summs;
}

/* ---- Q6_K -------------------------------------------------------------------- */

static void q6_K_quantize_block(const float *x, block_q6_K *y, const float *qw) {
    int8_t L[QK_K];
    float scales[QK_K / 16];
    float max_scale = 0, max_abs_scale = 0;
    for (int ib = 0; ib < QK_K / 16; ib++) {
        const float scale = make_qx_quants(16, 32, x + 16 * ib, L + 16 * ib, qw ? qw + 16 * ib : NULL);
        scales[ib] = scale;
        const float abs_scale = fabsf(scale);
        if (abs_scale > max_abs_scale) {
            max_abs_scale = abs_scale;
            max_scale = scale;
        }
    }
    if (!max_abs_scale) {
        memset(y, 0, sizeof *y);
        return;
    }
    const float iscale = -128.f / max_scale;
    y->d = fp32_to_fp16(1 / iscale);
    for (int ib = 0; ib < QK_K / 16; ib++) y->scales[ib] = (int8_t)MIN(127, quant_nearest_int_fma(iscale, scales[ib]));
    for (int j = 0; j < QK_K / 16; j++) {
        const float d = fp16_to_fp32(y->d) * y->scales[j];
        if (!d) continue;
        for (int ii = 0; ii < 16; ii++) {
            const int l = quant_nearest_int(x[16 * j + ii] / d);
            L[16 * j + ii] = (int8_t)(MAX(-32, MIN(31, l)) + 32);
        }
    }
    uint8_t *ql = y->ql, *qh = y->qh;
    for (int j = 0; j < QK_K; j += 128, ql += 64, qh += 32) {
        for (int l = 0; l < 32; l++) {
            const int q1 = L[j + l], q2 = L[j + l + 32], q3 = L[j + l + 64], q4 = L[j + l + 96];
            ql[l] = (uint8_t)((q1 & 0xF) | ((q3 & 0xF) << 4));
            ql[l + 32] = (uint8_t)((q2 & 0xF) | ((q4 & 0xF) << 4));
            qh[l] = (uint8_t)((q1 >> 4) | ((q2 >> 4) << 2) | ((q3 >> 4) << 4) | ((q4 >> 4) << 6));
        }
    }
}

void quant_q6_K_quantize_ref(const float *x, void *vy, int64_t n) {
    block_q6_K *y = vy;
    for (int64_t i = 0; i < n / QK_K; i++) q6_K_quantize_block(x + QK_K * i, &y[i], NULL);
}

void quant_q6_K_quantize_imatrix(const float *x, void *vy, int64_t n, const float *qw) {
    block_q6_K *y = vy;
    for (int64_t i = 0; i < n / QK_K; i++) q6_K_quantize_block(x + QK_K * i, &y[i], qw + QK_K * i);
}

void quant_q6_K_dequantize(const void *vx, float *y, int64_t n) {
    const block_q6_K *x = vx;
    for (int64_t i = 0; i < n / QK_K; i++, y += QK_K) {
        const float d = fp16_to_fp32(x[i].d);
        int8_t a[QK_K];
        quant_q6_K_quants(&x[i], a);
        for (int j = 0; j < QK_K; j++) y[j] = d * x[i].scales[j / 16] * a[j];
    }
}

/* b1892's AVX2 ggml_vec_dot_q6_K_q8_K: the quants times their 8-bit scales
 * in lanes, fused per block with d_y*d (quant_lanes.h). */
void quant_q6_K_dot_q8_K(int64_t n, float *s, const void *vx, const void *vy) {
    const block_q6_K *x = vx;
    const block_q8_K *y = vy;
    float acc[QUANT_LANES] = { 0 };
    for (int64_t i = 0; i < n / QK_K; i++) {
        int8_t a[QK_K];
        quant_q6_K_quants(&x[i], a);
        int32_t scales[QK_K / 16];
        for (int j = 0; j < QK_K / 16; j++) scales[j] = x[i].scales[j];
        int32_t lanes[QUANT_LANES] = { 0 };
        quant_lanes_add(lanes, a, y[i].qs, QK_K, scales, 16);
        quant_lanes_fma(acc, y[i].d * fp16_to_fp32(x[i].d), lanes);
    }
    *s = quant_lanes_hsum(acc);
}

/* ---- Q8_K -------------------------------------------------------------------- */

void quant_q8_K_quantize_ref(const float *x, void *vy, int64_t n) {
    block_q8_K *y = vy;
    for (int64_t i = 0; i < n / QK_K; i++, x += QK_K) {
        float max = 0, amax = 0;
        for (int j = 0; j < QK_K; j++) {
            const float ax = fabsf(x[j]);
            if (ax > amax) { amax = ax; max = x[j]; }
        }
        if (!amax) {
            memset(&y[i], 0, sizeof y[i]);
            continue;
        }
        /* -127 (not -128) keeps every quant in [-127, 127], as IQ2 needs. */
        const float iscale = -127.f / max;
        for (int j = 0; j < QK_K; j++) y[i].qs[j] = (int8_t)MIN(127, quant_nearest_int_fma(iscale, x[j]));
        for (int j = 0; j < QK_K / 16; j++) {
            int sum = 0;
            for (int ii = 0; ii < 16; ii++) sum += y[i].qs[16 * j + ii];
            y[i].bsums[j] = (int16_t)sum;
        }
        y[i].d = 1 / iscale;
    }
}

void quant_q8_K_dequantize(const void *vx, float *y, int64_t n) {
    const block_q8_K *x = vx;
    for (int64_t i = 0; i < n / QK_K; i++) {
        for (int j = 0; j < QK_K; j++) *y++ = x[i].d * x[i].qs[j];
    }
}

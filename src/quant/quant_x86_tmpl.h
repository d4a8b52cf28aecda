/*
 * x86 SIMD row functions of one instruction-set tier; quant_x86.c includes
 * this once per tier after defining
 *   QX_TARGET   the tier's target attribute string,
 *   QX(name)    name with the tier's suffix,
 *   QX_DPBUSD   0: byte products with vpmaddubsw + vpmaddwd (AVX2),
 *               1: VEX vpdpbusd / vpdpwssd (AVX-VNNI),
 *               2: EVEX vpdpbusd / vpdpwssd on 256 bits (AVX512-VNNI + VL).
 *
 * Every function computes what its scalar definition computes, bit for bit.
 * A 256-bit register of 32-bit lanes is exactly quant_lanes.h's layout: lane
 * k holds elements 4k..4k+3 of a 32-element chunk, and the integer products
 * land there whatever instruction forms them (they are exact: with the
 * operand ranges below no 16-bit pair sum can saturate). Each block's lanes
 * are then converted and fused into the float accumulator with one
 * vfmadd231ps, in block order, and reduced as hsum_float_8: the scalar
 * code's float operations one for one.
 */

#define QX_FN static inline __attribute__((target(QX_TARGET), always_inline))
#define QX_ROW static __attribute__((target(QX_TARGET)))
/* Loops over a block's chunks are unrolled even at -O2 (the Ruby gem's build). */
#define QX_UNROLL _Pragma("GCC unroll 8")

/* ---- integer lanes ------------------------------------------------------------ */

/* acc + a[4k]*b[4k] + ... + a[4k+3]*b[4k+3] per lane; a unsigned, b signed bytes,
 * |a| * |b| * 2 < 32768 for the AVX2 form. */
QX_FN __m256i QX(dot4)(__m256i acc, __m256i a, __m256i b) {
#if QX_DPBUSD == 1
    return _mm256_dpbusd_avx_epi32(acc, a, b);
#elif QX_DPBUSD == 2
    return _mm256_dpbusd_epi32(acc, a, b);
#else
    return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(a, b), _mm256_set1_epi16(1)));
#endif
}

/* The same with signed a: |a| against b carrying a's sign (b != -128). */
QX_FN __m256i QX(dot4_signed)(__m256i acc, __m256i a, __m256i b) {
    return QX(dot4)(acc, _mm256_abs_epi8(a), _mm256_sign_epi8(b, a));
}

/* acc + s * (p[2k] + p[2k+1]) per lane: p the 16-bit pair sums of
 * vpmaddubsw, s a scale repeated in both 16-bit halves of each lane. */
QX_FN __m256i QX(dot_pairs)(__m256i acc, __m256i p, __m256i s) {
#if QX_DPBUSD == 1
    return _mm256_dpwssd_avx_epi32(acc, p, s);
#elif QX_DPBUSD == 2
    return _mm256_dpwssd_epi32(acc, p, s);
#else
    return _mm256_add_epi32(acc, _mm256_madd_epi16(p, s));
#endif
}

QX_FN __m256i QX(load)(const void *p) { return _mm256_loadu_si256((const __m256i *)p); }

/* 16 bytes of nibbles as 32 bytes: low nibbles (elements 0..15), then high ones (16..31). */
QX_FN __m256i QX(nibbles16)(const uint8_t *p) {
    const __m128i q = _mm_loadu_si128((const __m128i *)p), m = _mm_set1_epi8(0x0F);
    return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(q, 4), m), _mm_and_si128(q, m));
}
QX_FN __m256i QX(lo4)(__m256i q) { return _mm256_and_si256(q, _mm256_set1_epi8(0x0F)); }
QX_FN __m256i QX(hi4)(__m256i q) { return _mm256_and_si256(_mm256_srli_epi16(q, 4), _mm256_set1_epi8(0x0F)); }

/* Byte j = 0xFF where bit j of `bits` is set, else 0. */
QX_FN __m256i QX(bits_to_bytes)(uint32_t bits) {
    const __m256i spread = _mm256_shuffle_epi8(
        _mm256_set1_epi32((int)bits),
        _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0101010101010101, 0x0000000000000000));
    const __m256i sel = _mm256_set1_epi64x((long long)0x8040201008040201ULL);
    return _mm256_cmpeq_epi8(_mm256_and_si256(spread, sel), sel);
}

/* Sixteen per-16 scales (signed bytes) as dot_pairs scale vectors: out[c / 4]
 * holds scales 8 (c / 4) .. +7, each in both halves of a 32-bit lane;
 * QX(scale_chunk) picks chunk c's pair (lanes 0-3: scale 2c, 4-7: 2c+1). */
QX_FN void QX(scales16)(__m128i s8, __m256i out[2]) {
    const __m256i a = _mm256_cvtepi8_epi32(s8), b = _mm256_cvtepi8_epi32(_mm_srli_si128(s8, 8));
    const __m256i lo = _mm256_set1_epi32(0xFFFF);
    out[0] = _mm256_or_si256(_mm256_and_si256(a, lo), _mm256_slli_epi32(a, 16));
    out[1] = _mm256_or_si256(_mm256_and_si256(b, lo), _mm256_slli_epi32(b, 16));
}
QX_FN __m256i QX(scale_chunk)(const __m256i s[2], int c) {
    const int j = 2 * (c & 3);
    return _mm256_permutevar8x32_epi32(s[c >> 2], _mm256_set_epi32(j + 1, j + 1, j + 1, j + 1, j, j, j, j));
}

/* ---- float lanes ------------------------------------------------------------------ */

/* acc = fmaf(d, (float)lanes, acc) per lane: quant_lanes_fma. */
QX_FN __m256 QX(fma_lanes)(__m256 acc, float d, __m256i lanes) {
    return _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(lanes), acc);
}

/* b1892's hsum_float_8 (quant_lanes_hsum): lane k onto k + 4, then (l0 + l2) + (l1 + l3). */
QX_FN float QX(hsum)(__m256 acc) {
    __m128 r = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
    r = _mm_add_ps(r, _mm_movehl_ps(r, r));
    return _mm_cvtss_f32(_mm_add_ss(r, _mm_movehdup_ps(r)));
}

QX_FN float QX(h2f)(fp16_t h) { return _cvtsh_ss(h); }

/* ---- F32, F16 ----------------------------------------------------------------------- */

/* The 4 x 8 accumulators of quant_float.c, one register each; the reduction
 * and the leftovers are the scalar code's. */
QX_ROW void QX(f32_dot)(int64_t n, float *s, const void *vx, const void *vy) {
    const float *x = vx, *y = vy;
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    for (int64_t i = 0; i + QUANT_DOT_STEP <= n; i += QUANT_DOT_STEP) {
        a0 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i), a0);
        a1 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 8), _mm256_loadu_ps(y + i + 8), a1);
        a2 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 16), _mm256_loadu_ps(y + i + 16), a2);
        a3 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 24), _mm256_loadu_ps(y + i + 24), a3);
    }
    float acc[4][QUANT_DOT_LANES];
    _mm256_storeu_ps(acc[0], a0);
    _mm256_storeu_ps(acc[1], a1);
    _mm256_storeu_ps(acc[2], a2);
    _mm256_storeu_ps(acc[3], a3);
    *s = quant_f32_dot_finish(acc, x, y, n);
}

QX_FN __m256 QX(load_f16)(const fp16_t *p) { return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p)); }

QX_ROW void QX(f16_dot)(int64_t n, float *s, const void *vx, const void *vy) {
    const fp16_t *x = vx, *y = vy;
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    for (int64_t i = 0; i + QUANT_DOT_STEP <= n; i += QUANT_DOT_STEP) {
        a0 = _mm256_fmadd_ps(QX(load_f16)(x + i), QX(load_f16)(y + i), a0);
        a1 = _mm256_fmadd_ps(QX(load_f16)(x + i + 8), QX(load_f16)(y + i + 8), a1);
        a2 = _mm256_fmadd_ps(QX(load_f16)(x + i + 16), QX(load_f16)(y + i + 16), a2);
        a3 = _mm256_fmadd_ps(QX(load_f16)(x + i + 24), QX(load_f16)(y + i + 24), a3);
    }
    float acc[4][QUANT_DOT_LANES];
    _mm256_storeu_ps(acc[0], a0);
    _mm256_storeu_ps(acc[1], a1);
    _mm256_storeu_ps(acc[2], a2);
    _mm256_storeu_ps(acc[3], a3);
    *s = quant_f16_dot_finish(acc, x, y, n);
}

/* vcvtph2ps equals fp16_to_fp32 for every half (NaNs keep their payload, quieted, in both). */
QX_ROW void QX(f16_to_float)(const void *vx, float *y, int64_t n) {
    const fp16_t *x = vx;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, QX(load_f16)(x + i));
    quant_f16_to_float(x + i, y + i, n - i);
}

/* vcvtps2ph rounds to nearest even like fp32_to_fp16, but keeps NaN payloads
 * where fp32_to_fp16 writes 0x7E00: groups with a NaN take the scalar path. */
QX_ROW void QX(f16_from_float)(const float *x, void *vy, int64_t n) {
    fp16_t *y = vy;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 v = _mm256_loadu_ps(x + i);
        if (_mm256_movemask_ps(_mm256_cmp_ps(v, v, _CMP_UNORD_Q))) {
            quant_f16_from_float(x + i, y + i, 8);
        } else {
            _mm_storeu_si128((__m128i *)(y + i), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
        }
    }
    quant_f16_from_float(x + i, y + i, n - i);
}

/* ---- activation quantizers ---------------------------------------------------------- */

/* Four int32 vectors (elements 0-7, 8-15, 16-23, 24-31) as 32 bytes in order (saturating). */
QX_FN __m256i QX(pack_i8)(__m256i i0, __m256i i1, __m256i i2, __m256i i3) {
    const __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(i0, i1), _mm256_packs_epi32(i2, i3));
    return _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

QX_FN float QX(hmax)(__m256 v) {
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    return _mm_cvtss_f32(_mm_max_ss(m, _mm_movehdup_ps(m)));
}

/* One 32-element block of b1892's x86 Q8_0/Q8_1 activation quantizer: amax,
 * then rint(x * 127/amax) (vcvtps2dq rounds to nearest even like rintf; NaN
 * from inf * 0 becomes -128 in both). False when the block has a NaN: the
 * scalar amax depends on where it is, so the caller runs the scalar code. */
QX_FN bool QX(q8_block)(const float *x, int8_t *qs, float *amax_out, int *sum) {
    const __m256 v0 = _mm256_loadu_ps(x), v1 = _mm256_loadu_ps(x + 8);
    const __m256 v2 = _mm256_loadu_ps(x + 16), v3 = _mm256_loadu_ps(x + 24);
    const __m256 nan = _mm256_or_ps(_mm256_or_ps(_mm256_cmp_ps(v0, v0, _CMP_UNORD_Q), _mm256_cmp_ps(v1, v1, _CMP_UNORD_Q)),
                                    _mm256_or_ps(_mm256_cmp_ps(v2, v2, _CMP_UNORD_Q), _mm256_cmp_ps(v3, v3, _CMP_UNORD_Q)));
    if (_mm256_movemask_ps(nan)) return false;
    const __m256 sign = _mm256_set1_ps(-0.0f);
    const __m256 m = _mm256_max_ps(_mm256_max_ps(_mm256_andnot_ps(sign, v0), _mm256_andnot_ps(sign, v1)),
                                   _mm256_max_ps(_mm256_andnot_ps(sign, v2), _mm256_andnot_ps(sign, v3)));
    const float amax = QX(hmax)(m);
    const __m256 id = _mm256_set1_ps(amax != 0.0f ? 127.f / amax : 0.0f);
    const __m256i i0 = _mm256_cvtps_epi32(_mm256_mul_ps(v0, id)), i1 = _mm256_cvtps_epi32(_mm256_mul_ps(v1, id));
    const __m256i i2 = _mm256_cvtps_epi32(_mm256_mul_ps(v2, id)), i3 = _mm256_cvtps_epi32(_mm256_mul_ps(v3, id));
    const __m256i q = QX(pack_i8)(i0, i1, i2, i3);
    _mm256_storeu_si256((__m256i *)qs, q);
    if (sum) {
        const __m256i s16 = _mm256_maddubs_epi16(_mm256_set1_epi8(1), q);
        const __m256i s32 = _mm256_madd_epi16(s16, _mm256_set1_epi16(1));
        __m128i t = _mm_add_epi32(_mm256_castsi256_si128(s32), _mm256_extracti128_si256(s32, 1));
        t = _mm_add_epi32(t, _mm_srli_si128(t, 8));
        t = _mm_add_epi32(t, _mm_srli_si128(t, 4));
        *sum = _mm_cvtsi128_si32(t);
    }
    *amax_out = amax;
    return true;
}

QX_ROW void QX(q8_0_from_float)(const float *x, void *vy, int64_t n) {
    block_q8_0 *y = vy;
    for (int64_t i = 0; i < n / QK8_0; i++, x += QK8_0) {
        float amax;
        if (!QX(q8_block)(x, y[i].qs, &amax, NULL)) {
            quant_q8_0_quantize_act(x, &y[i], QK8_0);
            continue;
        }
        y[i].d = fp32_to_fp16(amax / 127.f);
    }
}

QX_ROW void QX(q8_1_from_float)(const float *x, void *vy, int64_t n) {
    block_q8_1 *y = vy;
    for (int64_t i = 0; i < n / QK8_1; i++, x += QK8_1) {
        float amax;
        int sum;
        if (!QX(q8_block)(x, y[i].qs, &amax, &sum)) {
            quant_q8_1_quantize_act(x, &y[i], QK8_1);
            continue;
        }
        const float d = amax / 127.f;
        y[i].d = d;
        y[i].s = d * (float)sum;
    }
}

/* quant_q8_K_quantize_ref: the first element of largest magnitude sets the
 * sign (vmaxps keeps the running maximum when the new value is NaN, as the
 * scalar `ax > amax` does), quants by the fused nearest_int. */
QX_ROW void QX(q8_K_from_float)(const float *x, void *vy, int64_t n) {
    block_q8_K *y = vy;
    const __m256 sign = _mm256_set1_ps(-0.0f);
    for (int64_t i = 0; i < n / QK_K; i++, x += QK_K) {
        __m256 m = _mm256_setzero_ps();
        for (int j = 0; j < QK_K; j += 8) m = _mm256_max_ps(_mm256_andnot_ps(sign, _mm256_loadu_ps(x + j)), m);
        const float amax = QX(hmax)(m);
        if (!amax) {
            memset(&y[i], 0, sizeof y[i]);
            continue;
        }
        const __m256 va = _mm256_set1_ps(amax);
        float max = 0;
        for (int j = 0; j < QK_K; j += 8) {
            const __m256 ax = _mm256_andnot_ps(sign, _mm256_loadu_ps(x + j));
            const int hit = _mm256_movemask_ps(_mm256_cmp_ps(ax, va, _CMP_EQ_OQ));
            if (hit) {
                max = x[j + __builtin_ctz((unsigned)hit)];
                break;
            }
        }
        const float iscale = -127.f / max;
        const __m256 vs = _mm256_set1_ps(iscale), magic = _mm256_set1_ps(12582912.f);
        const __m256i mant = _mm256_set1_epi32(0x007fffff), bias = _mm256_set1_epi32(0x00400000);
        const __m256i top = _mm256_set1_epi32(127);
        __m256i sums[QK_K / 32];
        for (int j = 0; j < QK_K; j += 32) {
            __m256i q[4];
            QX_UNROLL
            for (int k = 0; k < 4; k++) {
                const __m256 b = _mm256_fmadd_ps(vs, _mm256_loadu_ps(x + j + 8 * k), magic);
                q[k] = _mm256_min_epi32(_mm256_sub_epi32(_mm256_and_si256(_mm256_castps_si256(b), mant), bias), top);
            }
            _mm256_storeu_si256((__m256i *)(y[i].qs + j), QX(pack_i8)(q[0], q[1], q[2], q[3]));
            /* the 16-sums of this 32: lanes 0, 1, 4, 5 add to the first, 2, 3, 6, 7 to the second */
            sums[j / 32] = _mm256_hadd_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3]));
        }
        QX_UNROLL
        for (int c = 0; c < QK_K / 32; c++) {
            int32_t t[8];
            _mm256_storeu_si256((__m256i *)t, sums[c]);
            y[i].bsums[2 * c] = (int16_t)(t[0] + t[1] + t[4] + t[5]);
            y[i].bsums[2 * c + 1] = (int16_t)(t[2] + t[3] + t[6] + t[7]);
        }
        y[i].d = 1 / iscale;
    }
}

/* ---- 32-element blocks ---------------------------------------------------------------- */

QX_ROW void QX(q4_0_dot)(int64_t n, float *s, const void *vx, const void *vy) {
    const block_q4_0 *x = vx;
    const block_q8_0 *y = vy;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / QK8_0; i++) {
        const __m256i w = _mm256_sub_epi8(QX(nibbles16)(x[i].qs), _mm256_set1_epi8(8));
        const __m256i lanes = QX(dot4_signed)(_mm256_setzero_si256(), w, QX(load)(y[i].qs));
        acc = QX(fma_lanes)(acc, QX(h2f)(x[i].d) * QX(h2f)(y[i].d), lanes);
    }
    *s = QX(hsum)(acc);
}

QX_ROW void QX(q4_1_dot)(int64_t n, float *s, const void *vx, const void *vy) {
    const block_q4_1 *x = vx;
    const block_q8_1 *y = vy;
    __m256 acc = _mm256_setzero_ps();
    float summs = 0.0f;
    for (int64_t i = 0; i < n / QK8_1; i++) {
        summs = fmaf(QX(h2f)(x[i].m), y[i].s, summs);
        const __m256i lanes = QX(dot4)(_mm256_setzero_si256(), QX(nibbles16)(x[i].qs), QX(load)(y[i].qs));
        acc = QX(fma_lanes)(acc, QX(h2f)(x[i].d) * y[i].d, lanes);
    }
    *s = QX(hsum)(acc) + summs;
}

/* The 32 five-bit quants of a Q5 block (0..31), element j in byte j. */
QX_FN __m256i QX(q5_quants)(const uint8_t *qs, const uint8_t *qh) {
    uint32_t bits;
    memcpy(&bits, qh, 4);
    return _mm256_or_si256(QX(nibbles16)(qs), _mm256_and_si256(QX(bits_to_bytes)(bits), _mm256_set1_epi8(0x10)));
}

QX_ROW void QX(q5_0_dot)(int64_t n, float *s, const void *vx, const void *vy) {
    const block_q5_0 *x = vx;
    const block_q8_0 *y = vy;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / QK8_0; i++) {
        const __m256i w = _mm256_sub_epi8(QX(q5_quants)(x[i].qs, x[i].qh), _mm256_set1_epi8(16));
        const __m256i lanes = QX(dot4_signed)(_mm256_setzero_si256(), w, QX(load)(y[i].qs));
        acc = QX(fma_lanes)(acc, QX(h2f)(x[i].d) * QX(h2f)(y[i].d), lanes);
    }
    *s = QX(hsum)(acc);
}

QX_ROW void QX(q5_1_dot)(int64_t n, float *s, const void *vx, const void *vy) {
    const block_q5_1 *x = vx;
    const block_q8_1 *y = vy;
    __m256 acc = _mm256_setzero_ps();
    float summs = 0.0f;
    for (int64_t i = 0; i < n / QK8_1; i++) {
        summs = fmaf(QX(h2f)(x[i].m), y[i].s, summs);
        const __m256i lanes = QX(dot4)(_mm256_setzero_si256(), QX(q5_quants)(x[i].qs, x[i].qh), QX(load)(y[i].qs));
        acc = QX(fma_lanes)(acc, QX(h2f)(x[i].d) * y[i].d, lanes);
    }
    *s = QX(hsum)(acc) + summs;
}

QX_ROW void QX(q8_0_dot)(int64_t n, float *s, const void *vx, const void *vy) {
    const block_q8_0 *x = vx;
    const block_q8_0 *y = vy;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / QK8_0; i++) {
        const __m256i lanes = QX(dot4_signed)(_mm256_setzero_si256(), QX(load)(x[i].qs), QX(load)(y[i].qs));
        acc = QX(fma_lanes)(acc, QX(h2f)(x[i].d) * QX(h2f)(y[i].d), lanes);
    }
    *s = QX(hsum)(acc);
}

/* ---- k-quants ------------------------------------------------------------------------------
 * A 256-block is 8 chunks of 32; the per-16 scales (Q2_K, Q3_K, Q6_K) go to
 * lanes 0-3 and 4-7 of a chunk, the per-32 ones (Q4_K, Q5_K) to all 8. */

QX_ROW void QX(q2_K_dot)(int64_t n, float *s, const void *vx, const void *vy) {
    const block_q2_K *x = vx;
    const block_q8_K *y = vy;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / QK_K; i++) {
        const __m128i sc = _mm_loadu_si128((const __m128i *)x[i].scales);
        const __m128i m4 = _mm_set1_epi8(0x0F);
        /* lane k: mins 2k, 2k+1 against the 16-sums 2k, 2k+1 */
        const __m256i mins = _mm256_madd_epi16(_mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(sc, 4), m4)),
                                               QX(load)(y[i].bsums));
        acc = QX(fma_lanes)(acc, -y[i].d * QX(h2f)(x[i].dmin), mins);
        __m256i scales[2];
        QX(scales16)(_mm_and_si128(sc, m4), scales);
        __m256i lanes = _mm256_setzero_si256();
        QX_UNROLL
        for (int h = 0; h < 2; h++) {
            const __m256i q = QX(load)(x[i].qs + 32 * h);
            QX_UNROLL
            for (int sh = 0; sh < 4; sh++) {
                const int c = 4 * h + sh;
                const __m256i a = _mm256_and_si256(_mm256_srli_epi16(q, 2 * sh), _mm256_set1_epi8(3));
                const __m256i p = _mm256_maddubs_epi16(a, QX(load)(y[i].qs + 32 * c));
                lanes = QX(dot_pairs)(lanes, p, QX(scale_chunk)(scales, c));
            }
        }
        acc = QX(fma_lanes)(acc, y[i].d * QX(h2f)(x[i].d), lanes);
    }
    *s = QX(hsum)(acc);
}

QX_ROW void QX(q3_K_dot)(int64_t n, float *s, const void *vx, const void *vy) {
    const block_q3_K *x = vx;
    const block_q8_K *y = vy;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / QK_K; i++) {
        int8_t sc[QK_K / 16];
        quant_q3_K_scales(x[i].scales, sc);
        __m256i scales[2];
        QX(scales16)(_mm_sub_epi8(_mm_loadu_si128((const __m128i *)sc), _mm_set1_epi8(32)), scales);
        const __m256i hm = QX(load)(x[i].hmask);
        __m256i lanes = _mm256_setzero_si256();
        QX_UNROLL
        for (int h = 0; h < 2; h++) {
            const __m256i q = QX(load)(x[i].qs + 32 * h);
            QX_UNROLL
            for (int sh = 0; sh < 4; sh++) {
                const int c = 4 * h + sh;
                const __m256i bit = _mm256_set1_epi8((char)(1 << c));
                const __m256i low = _mm256_cmpeq_epi8(_mm256_and_si256(hm, bit), _mm256_setzero_si256());
                const __m256i a = _mm256_sub_epi8(_mm256_and_si256(_mm256_srli_epi16(q, 2 * sh), _mm256_set1_epi8(3)),
                                                  _mm256_and_si256(low, _mm256_set1_epi8(4)));
                const __m256i b = QX(load)(y[i].qs + 32 * c);
                const __m256i p = _mm256_maddubs_epi16(_mm256_abs_epi8(a), _mm256_sign_epi8(b, a));
                lanes = QX(dot_pairs)(lanes, p, QX(scale_chunk)(scales, c));
            }
        }
        acc = QX(fma_lanes)(acc, y[i].d * QX(h2f)(x[i].d), lanes);
    }
    *s = QX(hsum)(acc);
}

/* The 8 per-32 sums of the mins times the activations' 32-sums, two per lane:
 * lane k = m[2k] (b[4k] + b[4k+1]) + m[2k+1] (b[4k+2] + b[4k+3]). */
QX_FN __m128i QX(k4_mins)(const uint8_t mn[8], const int16_t *bsums) {
    const __m128i b = _mm_hadd_epi16(_mm_loadu_si128((const __m128i *)bsums), _mm_loadu_si128((const __m128i *)(bsums + 8)));
    return _mm_madd_epi16(_mm_cvtepu8_epi16(_mm_loadl_epi64((const __m128i *)mn)), b);
}

QX_ROW void QX(q4_K_dot)(int64_t n, float *s, const void *vx, const void *vy) {
    const block_q4_K *x = vx;
    const block_q8_K *y = vy;
    __m256 acc = _mm256_setzero_ps();
    __m128 acc_m = _mm_setzero_ps();
    for (int64_t i = 0; i < n / QK_K; i++) {
        uint8_t sc[8], mn[8];
        quant_k4_scales_mins(x[i].scales, sc, mn);
        const float dmin = -y[i].d * QX(h2f)(x[i].dmin);
        acc_m = _mm_fmadd_ps(_mm_set1_ps(dmin), _mm_cvtepi32_ps(QX(k4_mins)(mn, y[i].bsums)), acc_m);
        __m256i lanes = _mm256_setzero_si256();
        QX_UNROLL
        for (int j = 0; j < 4; j++) {
            const __m256i q = QX(load)(x[i].qs + 32 * j);
            const __m256i p0 = _mm256_maddubs_epi16(QX(lo4)(q), QX(load)(y[i].qs + 64 * j));
            const __m256i p1 = _mm256_maddubs_epi16(QX(hi4)(q), QX(load)(y[i].qs + 64 * j + 32));
            lanes = QX(dot_pairs)(lanes, p0, _mm256_set1_epi16(sc[2 * j]));
            lanes = QX(dot_pairs)(lanes, p1, _mm256_set1_epi16(sc[2 * j + 1]));
        }
        acc = QX(fma_lanes)(acc, y[i].d * QX(h2f)(x[i].d), lanes);
    }
    const __m128 m = _mm_add_ps(acc_m, _mm_movehl_ps(acc_m, acc_m));
    *s = QX(hsum)(acc) + _mm_cvtss_f32(_mm_add_ss(m, _mm_movehdup_ps(m)));
}

QX_ROW void QX(q5_K_dot)(int64_t n, float *s, const void *vx, const void *vy) {
    const block_q5_K *x = vx;
    const block_q8_K *y = vy;
    __m256 acc = _mm256_setzero_ps();
    float summs = 0;
    for (int64_t i = 0; i < n / QK_K; i++) {
        uint8_t sc[8], mn[8];
        quant_k4_scales_mins(x[i].scales, sc, mn);
        __m128i m = QX(k4_mins)(mn, y[i].bsums);
        m = _mm_add_epi32(m, _mm_srli_si128(m, 8));
        m = _mm_add_epi32(m, _mm_srli_si128(m, 4));
        summs = fmaf(-y[i].d * QX(h2f)(x[i].dmin), (float)_mm_cvtsi128_si32(m), summs);
        const __m256i hb = QX(load)(x[i].qh);
        __m256i lanes = _mm256_setzero_si256();
        QX_UNROLL
        for (int j = 0; j < 4; j++) {
            const __m256i q = QX(load)(x[i].qs + 32 * j);
            const __m256i b0 = _mm256_set1_epi8((char)(1 << (2 * j))), b1 = _mm256_set1_epi8((char)(2 << (2 * j)));
            const __m256i h0 = _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(hb, b0), b0), _mm256_set1_epi8(16));
            const __m256i h1 = _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(hb, b1), b1), _mm256_set1_epi8(16));
            const __m256i p0 = _mm256_maddubs_epi16(_mm256_or_si256(QX(lo4)(q), h0), QX(load)(y[i].qs + 64 * j));
            const __m256i p1 = _mm256_maddubs_epi16(_mm256_or_si256(QX(hi4)(q), h1), QX(load)(y[i].qs + 64 * j + 32));
            lanes = QX(dot_pairs)(lanes, p0, _mm256_set1_epi16(sc[2 * j]));
            lanes = QX(dot_pairs)(lanes, p1, _mm256_set1_epi16(sc[2 * j + 1]));
        }
        acc = QX(fma_lanes)(acc, y[i].d * QX(h2f)(x[i].d), lanes);
    }
    *s = QX(hsum)(acc) + summs;
}

QX_ROW void QX(q6_K_dot)(int64_t n, float *s, const void *vx, const void *vy) {
    const block_q6_K *x = vx;
    const block_q8_K *y = vy;
    __m256 acc = _mm256_setzero_ps();
    const __m256i m4 = _mm256_set1_epi8(0x0F), m2 = _mm256_set1_epi8(0x30), k32 = _mm256_set1_epi8(32);
    for (int64_t i = 0; i < n / QK_K; i++) {
        __m256i scales[2];
        QX(scales16)(_mm_loadu_si128((const __m128i *)x[i].scales), scales);
        __m256i lanes = _mm256_setzero_si256();
        QX_UNROLL
        for (int h = 0; h < 2; h++) {
            const __m256i l0 = QX(load)(x[i].ql + 64 * h), l1 = QX(load)(x[i].ql + 64 * h + 32);
            const __m256i qh = QX(load)(x[i].qh + 32 * h);
            const __m256i u[4] = {
                _mm256_or_si256(_mm256_and_si256(l0, m4), _mm256_and_si256(_mm256_slli_epi16(qh, 4), m2)),
                _mm256_or_si256(_mm256_and_si256(l1, m4), _mm256_and_si256(_mm256_slli_epi16(qh, 2), m2)),
                _mm256_or_si256(QX(hi4)(l0), _mm256_and_si256(qh, m2)),
                _mm256_or_si256(QX(hi4)(l1), _mm256_and_si256(_mm256_srli_epi16(qh, 2), m2)),
            };
            QX_UNROLL
            for (int k = 0; k < 4; k++) {
                const int c = 4 * h + k;
                const __m256i b = QX(load)(y[i].qs + 32 * c);
                const __m256i p = _mm256_sub_epi16(_mm256_maddubs_epi16(u[k], b), _mm256_maddubs_epi16(k32, b));
                lanes = QX(dot_pairs)(lanes, p, QX(scale_chunk)(scales, c));
            }
        }
        acc = QX(fma_lanes)(acc, y[i].d * QX(h2f)(x[i].d), lanes);
    }
    *s = QX(hsum)(acc);
}

/* ---- IQ2 ----------------------------------------------------------------------------------- */

/* One chunk's 4 groups: grid magnitudes (unsigned) and the activations with the groups' signs. */
QX_FN __m256i QX(iq2_pairs)(uint64_t g0, uint64_t g1, uint64_t g2, uint64_t g3, uint32_t signs, const int8_t *yq) {
    const __m256i grid = _mm256_set_epi64x((long long)g3, (long long)g2, (long long)g1, (long long)g0);
    const __m256i sgn = _mm256_or_si256(QX(bits_to_bytes)(signs), _mm256_set1_epi8(1));
    return _mm256_maddubs_epi16(grid, _mm256_sign_epi8(QX(load)(yq), sgn));
}

QX_ROW void QX(iq2_xxs_dot)(int64_t n, float *s, const void *vx, const void *vy) {
    const block_iq2_xxs *x = vx;
    const block_q8_K *y = vy;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / QK_K; i++) {
        __m256i lanes = _mm256_setzero_si256();
        QX_UNROLL
        for (int c = 0; c < QK_K / 32; c++) {
            const uint16_t *q = x[i].qs + 4 * c;
            const uint32_t idx = (uint32_t)q[0] | ((uint32_t)q[1] << 16);
            const uint32_t ss = (uint32_t)q[2] | ((uint32_t)q[3] << 16);
            uint32_t signs = 0;
            QX_UNROLL
            for (int l = 0; l < 4; l++) signs |= (uint32_t)iq2_sign_byte((ss >> (7 * l)) & 127) << (8 * l);
            const __m256i p = QX(iq2_pairs)(iq2_xxs_grid[idx & 0xFF], iq2_xxs_grid[(idx >> 8) & 0xFF],
                                            iq2_xxs_grid[(idx >> 16) & 0xFF], iq2_xxs_grid[idx >> 24], signs,
                                            y[i].qs + 32 * c);
            lanes = QX(dot_pairs)(lanes, p, _mm256_set1_epi16((short)(2 * (ss >> 28) + 1)));
        }
        acc = QX(fma_lanes)(acc, QX(h2f)(x[i].d) * y[i].d, lanes);
    }
    *s = 0.125f * QX(hsum)(acc);
}

QX_ROW void QX(iq2_xs_dot)(int64_t n, float *s, const void *vx, const void *vy) {
    const block_iq2_xs *x = vx;
    const block_q8_K *y = vy;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / QK_K; i++) {
        __m256i lanes = _mm256_setzero_si256();
        QX_UNROLL
        for (int c = 0; c < QK_K / 32; c++) {
            const uint16_t *q = x[i].qs + 4 * c;
            uint32_t signs = 0;
            QX_UNROLL
            for (int l = 0; l < 4; l++) signs |= (uint32_t)iq2_sign_byte(q[l] >> 9) << (8 * l);
            const __m256i p = QX(iq2_pairs)(iq2_xs_grid[q[0] & 511], iq2_xs_grid[q[1] & 511], iq2_xs_grid[q[2] & 511],
                                            iq2_xs_grid[q[3] & 511], signs, y[i].qs + 32 * c);
            const int sc = x[i].scales[c];
            const __m256i scale = _mm256_set_m128i(_mm_set1_epi16((short)(2 * (sc >> 4) + 1)),
                                                   _mm_set1_epi16((short)(2 * (sc & 0xF) + 1)));
            lanes = QX(dot_pairs)(lanes, p, scale);
        }
        acc = QX(fma_lanes)(acc, QX(h2f)(x[i].d) * y[i].d, lanes);
    }
    *s = 0.125f * QX(hsum)(acc);
}

/* ---- the tier's table ------------------------------------------------------------------------ */

static const struct quant_kernels QX(table)[GGML_TYPE_COUNT] = {
    [GGML_TYPE_F32] = { .vec_dot = QX(f32_dot) },
    [GGML_TYPE_F16] = { .vec_dot = QX(f16_dot), .from_float = QX(f16_from_float), .to_float = QX(f16_to_float) },
    [GGML_TYPE_Q4_0] = { .vec_dot = QX(q4_0_dot) },
    [GGML_TYPE_Q4_1] = { .vec_dot = QX(q4_1_dot) },
    [GGML_TYPE_Q5_0] = { .vec_dot = QX(q5_0_dot) },
    [GGML_TYPE_Q5_1] = { .vec_dot = QX(q5_1_dot) },
    [GGML_TYPE_Q8_0] = { .vec_dot = QX(q8_0_dot), .from_float = QX(q8_0_from_float) },
    [GGML_TYPE_Q8_1] = { .from_float = QX(q8_1_from_float) },
    [GGML_TYPE_Q2_K] = { .vec_dot = QX(q2_K_dot) },
    [GGML_TYPE_Q3_K] = { .vec_dot = QX(q3_K_dot) },
    [GGML_TYPE_Q4_K] = { .vec_dot = QX(q4_K_dot) },
    [GGML_TYPE_Q5_K] = { .vec_dot = QX(q5_K_dot) },
    [GGML_TYPE_Q6_K] = { .vec_dot = QX(q6_K_dot) },
    [GGML_TYPE_Q8_K] = { .from_float = QX(q8_K_from_float) },
    [GGML_TYPE_IQ2_XXS] = { .vec_dot = QX(iq2_xxs_dot) },
    [GGML_TYPE_IQ2_XS] = { .vec_dot = QX(iq2_xs_dot) },
};

#undef QX_FN
#undef QX_ROW
#undef QX_UNROLL

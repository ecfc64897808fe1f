/*
 * kernels/cpu/aquant_avx2.c - the activation quantizers of qidot.h (Q8_0, Q8_1, Q8_K) with AVX2:
 * aquant_avx512.c's operations on 8 lanes, for the CPUs without AVX-512 (and SQZ_QMM_ISA=avx2).
 * The same codes, scales and sums as the scalar reference (qidot_ref.c) bit for bit
 * (tests/unit/test_qidot.c: test_quantize_fast; tests/cli/test_ggml_oracle.sh against ggml's
 * from_float). The scalar quantizer was 7% of eval --activations q8's profile with the AVX2
 * kernels.
 *
 * Exactness: the products x * (127 / amax) and iscale * x are single f32 multiplications (no FMA:
 * -ffp-contract=off), rounded half to even by vcvtps2dq under the default MXCSR, as rintf is;
 * the clamps are the reference's, and the codes (then in [-128, 127]) narrow to bytes with the
 * saturating packs exactly; the maximum of |x| is exact in any order. A block holding a NaN or
 * an infinity goes to the reference.
 */
#include "kernels/cpu/qidot.h"

#if SQZ__QMM_X86
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "sqz/dtype.h"

#define AVX2 __attribute__((target("avx2")))

AVX2 static inline __m256 abs8(__m256 v) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), v); }

/* The largest of 8 floats (all finite). */
AVX2 static inline float hmax8(__m256 v) {
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_shuffle_ps(m, m, 1));
    return _mm_cvtss_f32(m);
}

/* The sum of 8 int32. */
AVX2 static inline int32_t hsum8(__m256i v) {
    __m128i h = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    h = _mm_add_epi32(h, _mm_shuffle_epi32(h, _MM_SHUFFLE(1, 0, 3, 2)));
    h = _mm_add_epi32(h, _mm_shuffle_epi32(h, _MM_SHUFFLE(2, 3, 0, 1)));
    return _mm_cvtsi128_si32(h);
}

/* max |x| over 32 floats at x, and whether all are finite. */
AVX2 static inline float amax32(const float *x, bool *finite) {
    const __m256 inf = _mm256_set1_ps(INFINITY);
    __m256 m = _mm256_setzero_ps();
    int ok = 0xFF;
    for (int i = 0; i < 32; i += 8) {
        const __m256 a = abs8(_mm256_loadu_ps(x + i));
        ok &= _mm256_movemask_ps(_mm256_cmp_ps(a, inf, _CMP_LT_OQ)); /* false for NaN and infinities */
        m = _mm256_max_ps(m, a);
    }
    *finite = ok == 0xFF;
    return hmax8(m);
}

/* The 8 codes round(v * s) of 8 floats as int32, clamped to [lo, 127]. */
AVX2 static inline __m256i codes8(const float *x, __m256 s, int lo) {
    const __m256i q = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x), s));
    return _mm256_max_epi32(_mm256_min_epi32(q, _mm256_set1_epi32(127)), _mm256_set1_epi32(lo));
}

/* 32 codes (int32 in [-128, 127], 4 vectors of 8 in element order) stored as bytes at qs. */
AVX2 static inline void store32(int8_t *qs, __m256i q0, __m256i q1, __m256i q2, __m256i q3) {
    const __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(q0, q1), _mm256_packs_epi32(q2, q3));
    /* the packs work per 128-bit lane: bytes in 4-element groups 0 2 4 6 1 3 5 7 */
    _mm256_storeu_si256((__m256i *)(void *)qs, _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
}

/* One Q8_0 block (x86 ggml): *d_out the fp16-rounded d, 32 codes; returns d before rounding and
 * *sum = sum of the codes; false for a non-finite block (the caller takes the reference). */
AVX2 static inline bool block32(const float *x, float *d_out, int8_t *qs, float *d_raw, int32_t *sum) {
    bool finite;
    const float amax = amax32(x, &finite);
    if (!finite) return false;
    const float d = amax / 127.0f;
    float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    if (!isfinite(id)) id = 0.0f;
    *d_out = sqz_fp16_to_fp32(sqz_fp32_to_fp16(d));
    const __m256 s = _mm256_set1_ps(id);
    const __m256i q0 = codes8(x, s, -128), q1 = codes8(x + 8, s, -128), q2 = codes8(x + 16, s, -128),
                  q3 = codes8(x + 24, s, -128);
    store32(qs, q0, q1, q2, q3);
    *sum = hsum8(_mm256_add_epi32(_mm256_add_epi32(q0, q1), _mm256_add_epi32(q2, q3)));
    *d_raw = d;
    return true;
}

AVX2 static void quantize_q8_0(const float *x, sqz__aq8_0 *y, int64_t k) {
    for (int64_t b = 0; b < k / 32; b++) {
        float d;
        int32_t sum;
        if (!block32(x + 32 * b, &y[b].d, y[b].qs, &d, &sum)) sqz__aq_quantize(SQZ__AQ_Q8_0, x + 32 * b, &y[b], 32);
    }
}

AVX2 static void quantize_q8_1(const float *x, sqz__aq8_1 *y, int64_t k) {
    for (int64_t b = 0; b < k / 32; b++) {
        float d;
        int32_t sum;
        if (block32(x + 32 * b, &y[b].d, y[b].qs, &d, &sum)) y[b].s = d * (float)sum;
        else sqz__aq_quantize(SQZ__AQ_Q8_1, x + 32 * b, &y[b], 32);
    }
}

/* One Q8_K block of 256 (ggml's quantize_row_q8_K_ref): false for a block the reference takes
 * (a non-finite value, all zero, or a maximum so small that -127 / max is not finite). */
AVX2 static inline bool block256(const float *x, sqz__aq8_K *y) {
    float amax = 0.0f;
    bool finite = true;
    for (int i = 0; i < 256; i += 32) {
        bool f;
        const float a = amax32(x + i, &f);
        amax = a > amax ? a : amax;
        finite = finite && f;
    }
    if (!finite || amax == 0.0f) return false;
    /* the first value whose magnitude is amax (the reference keeps the first strict maximum) */
    const __m256 m = _mm256_set1_ps(amax);
    int first = -1;
    for (int i = 0; i < 256 && first < 0; i += 8) {
        const int hit = _mm256_movemask_ps(_mm256_cmp_ps(abs8(_mm256_loadu_ps(x + i)), m, _CMP_EQ_OQ));
        if (hit) first = i + __builtin_ctz((unsigned)hit);
    }
    const float max = x[first], iscale = -127.0f / max;
    if (!isfinite(iscale)) return false;
    const __m256 s = _mm256_set1_ps(iscale);
    for (int i = 0; i < 256; i += 32) {
        __m256i q[4];
        for (int j = 0; j < 4; j++) q[j] = codes8(x + i + 8 * j, s, INT32_MIN);
        store32(y->qs + i, q[0], q[1], q[2], q[3]);
        y->bsums[i / 16] = (int16_t)hsum8(_mm256_add_epi32(q[0], q[1]));
        y->bsums[i / 16 + 1] = (int16_t)hsum8(_mm256_add_epi32(q[2], q[3]));
    }
    y->d = 1.0f / iscale;
    return true;
}

AVX2 static void quantize_q8_K(const float *x, sqz__aq8_K *y, int64_t k) {
    for (int64_t b = 0; b < k / 256; b++)
        if (!block256(x + 256 * b, &y[b])) sqz__aq_quantize(SQZ__AQ_Q8_K, x + 256 * b, &y[b], 256);
}

AVX2 static void quantize(sqz__aq_kind kind, const float *x, void *dst, int64_t k) {
    switch (kind) {
    case SQZ__AQ_Q8_0: quantize_q8_0(x, dst, k); break;
    case SQZ__AQ_Q8_1: quantize_q8_1(x, dst, k); break;
    case SQZ__AQ_Q8_K: quantize_q8_K(x, dst, k); break;
    default: sqz__aq_quantize(kind, x, dst, k);
    }
}

const sqz__aq_quantize_fn sqz__aq_quantize_avx2 = quantize;
#else
typedef int sqz__aquant_avx2_empty; /* ISO C: a translation unit is not empty */
#endif

/*
 * kernels/cpu/aquant_avx512.c - the activation quantizers of qidot.h (Q8_0, Q8_1, Q8_K) with
 * AVX-512F/BW: the same codes, scales and sums as the scalar reference (qidot_ref.c) bit for bit
 * (tests/unit/test_qidot.c). One product's input is quantized by one thread before the rows are
 * shared out, so at 2 threads its time counts twice; the reference's branchy search for the
 * value of largest magnitude and its per-element rintf took ~7 us for a row of 1536 (2.4% of
 * Qwen2.5-1.5B's generation at 1 thread, perf).
 *
 * Exactness: the products x * (127 / amax) and iscale * x are single f32 multiplications (no FMA:
 * -ffp-contract=off), rounded half to even by vcvtps2dq under the default MXCSR, as rintf is;
 * the clamps are the reference's. A block holding a NaN or an infinity goes to the reference.
 */
#include "kernels/cpu/qidot.h"

#if SQZ__QMM_X86
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "sqz/dtype.h"

#define AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx2,fma,f16c")))

/* max |x| over 32 floats at x, and whether all are finite. */
AVX512 static inline float amax32(const float *x, bool *finite) {
    const __m512 a = _mm512_loadu_ps(x), b = _mm512_loadu_ps(x + 16);
    const __m512 inf = _mm512_set1_ps(INFINITY);
    const __m512 aa = _mm512_abs_ps(a), ab = _mm512_abs_ps(b);
    /* |x| < inf is false for NaN and infinities */
    *finite = _mm512_cmp_ps_mask(aa, inf, _CMP_LT_OQ) == 0xFFFF && _mm512_cmp_ps_mask(ab, inf, _CMP_LT_OQ) == 0xFFFF;
    return _mm512_reduce_max_ps(_mm512_max_ps(aa, ab));
}

/* The 16 codes round(v * s) of 16 floats as int32, clamped to [lo, 127]. */
AVX512 static inline __m512i codes16(const float *x, __m512 s, int lo) {
    const __m512i q = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(x), s));
    return _mm512_max_epi32(_mm512_min_epi32(q, _mm512_set1_epi32(127)), _mm512_set1_epi32(lo));
}

/* One Q8_0 block (x86 ggml): *d_out the fp16-rounded d, 32 codes; returns d before rounding and
 * *sum = sum of the codes; false for a non-finite block (the caller takes the reference). */
AVX512 static inline bool block32(const float *x, float *d_out, int8_t *qs, float *d_raw, int32_t *sum) {
    bool finite;
    const float amax = amax32(x, &finite);
    if (!finite) return false;
    const float d = amax / 127.0f;
    float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    if (!isfinite(id)) id = 0.0f;
    *d_out = sqz_fp16_to_fp32(sqz_fp32_to_fp16(d));
    const __m512 s = _mm512_set1_ps(id);
    const __m512i q0 = codes16(x, s, -128), q1 = codes16(x + 16, s, -128);
    _mm_storeu_si128((__m128i *)(void *)qs, _mm512_cvtepi32_epi8(q0));
    _mm_storeu_si128((__m128i *)(void *)(qs + 16), _mm512_cvtepi32_epi8(q1));
    *sum = _mm512_reduce_add_epi32(_mm512_add_epi32(q0, q1));
    *d_raw = d;
    return true;
}

AVX512 static void quantize_q8_0(const float *x, sqz__aq8_0 *y, int64_t k) {
    for (int64_t b = 0; b < k / 32; b++) {
        float d;
        int32_t sum;
        if (!block32(x + 32 * b, &y[b].d, y[b].qs, &d, &sum)) sqz__aq_quantize(SQZ__AQ_Q8_0, x + 32 * b, &y[b], 32);
    }
}

AVX512 static void quantize_q8_1(const float *x, sqz__aq8_1 *y, int64_t k) {
    for (int64_t b = 0; b < k / 32; b++) {
        float d;
        int32_t sum;
        if (block32(x + 32 * b, &y[b].d, y[b].qs, &d, &sum)) y[b].s = d * (float)sum;
        else sqz__aq_quantize(SQZ__AQ_Q8_1, x + 32 * b, &y[b], 32);
    }
}

/* One Q8_K block of 256 (ggml's quantize_row_q8_K_ref): false for a block the reference takes
 * (a non-finite value, all zero, or a maximum so small that -127 / max is not finite). */
AVX512 static inline bool block256(const float *x, sqz__aq8_K *y) {
    __m512 m = _mm512_setzero_ps();
    bool finite = true;
    for (int i = 0; i < 256; i += 32) {
        bool f;
        m = _mm512_max_ps(m, _mm512_set1_ps(amax32(x + i, &f)));
        finite = finite && f;
    }
    const float amax = _mm512_cvtss_f32(m);
    if (!finite || amax == 0.0f) return false;
    /* the first value whose magnitude is amax (the reference keeps the first strict maximum) */
    int first = -1;
    for (int i = 0; i < 256 && first < 0; i += 16) {
        const __mmask16 hit = _mm512_cmp_ps_mask(_mm512_abs_ps(_mm512_loadu_ps(x + i)), m, _CMP_EQ_OQ);
        if (hit) first = i + __builtin_ctz(hit);
    }
    const float max = x[first], iscale = -127.0f / max;
    if (!isfinite(iscale)) return false;
    const __m512 s = _mm512_set1_ps(iscale);
    for (int i = 0; i < 256; i += 16) {
        const __m512i q = codes16(x + i, s, INT32_MIN);
        _mm_storeu_si128((__m128i *)(void *)(y->qs + i), _mm512_cvtepi32_epi8(q));
        y->bsums[i / 16] = (int16_t)_mm512_reduce_add_epi32(q);
    }
    y->d = 1.0f / iscale;
    return true;
}

AVX512 static void quantize_q8_K(const float *x, sqz__aq8_K *y, int64_t k) {
    for (int64_t b = 0; b < k / 256; b++)
        if (!block256(x + 256 * b, &y[b])) sqz__aq_quantize(SQZ__AQ_Q8_K, x + 256 * b, &y[b], 256);
}

AVX512 static void quantize(sqz__aq_kind kind, const float *x, void *dst, int64_t k) {
    switch (kind) {
    case SQZ__AQ_Q8_0: quantize_q8_0(x, dst, k); break;
    case SQZ__AQ_Q8_1: quantize_q8_1(x, dst, k); break;
    case SQZ__AQ_Q8_K: quantize_q8_K(x, dst, k); break;
    default: sqz__aq_quantize(kind, x, dst, k);
    }
}

const sqz__aq_quantize_fn sqz__aq_quantize_avx512 = quantize;
#else
typedef int sqz__aquant_avx512_empty; /* ISO C: a translation unit is not empty */
#endif

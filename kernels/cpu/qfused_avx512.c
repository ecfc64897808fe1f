/*
 * kernels/cpu/qfused_avx512.c - the fused one-token kernels of qfused_x86.c with AVX-512F: a
 * 32-element block is two 16-lane vectors (one widening each, where AVX2 needs four), Q6_K's
 * 16-element sub-blocks one vector with one scale each.
 *
 * The weights are formed exactly as core's scalar dequantizer forms them (code to float, times
 * the scale, plus the minimum: separate roundings; compiled with -ffp-contract=off) and then
 * multiplied into the sums with FMAs: the same values as the AVX2 and scalar paths, summed in
 * another order. tests/unit/test_qmatmul.c checks them against sqz_matmul_ref.
 */
#include "kernels/cpu/qmatmul.h"

#if SQZ__QMM_X86
#include <immintrin.h>

#include "core/blocks.h"
#include "core/dequant.h"

#define AVX512 __attribute__((target("avx512f,avx2,fma,f16c")))
#define H2F(h) _cvtsh_ss(h)
#define I8F(v) _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(v))
#define U8F(v) _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(v))
#define LD128(p) _mm_loadu_si128((const __m128i *)(const void *)(p))

AVX512 static inline float hsum4(__m512 a, __m512 b, __m512 c, __m512 d) {
    return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a, b), _mm512_add_ps(c, d)));
}

/* Low and high nibbles of 16 bytes: elements 0..15 and 16..31 of a Q4 block. */
AVX512 static inline void nib(const uint8_t *qs, __m128i *lo, __m128i *hi) {
    const __m128i b = LD128(qs), m = _mm_set1_epi8(0x0F);
    *lo = _mm_and_si128(b, m);
    *hi = _mm_and_si128(_mm_srli_epi16(b, 4), m);
}

AVX512 float sqz__qdot1_q8_0_avx512(const void *vx, const float *x, int64_t k) {
    const sqz_block_q8_0 *b = vx;
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    const int64_t nb = k / SQZ_QK8_0;
    int64_t i = 0;
    for (; i + 2 <= nb; i += 2, x += 64) {
        const __m512 d0 = _mm512_set1_ps(H2F(b[i].d)), d1 = _mm512_set1_ps(H2F(b[i + 1].d));
        a0 = _mm512_fmadd_ps(_mm512_mul_ps(I8F(LD128(b[i].qs)), d0), _mm512_loadu_ps(x), a0);
        a1 = _mm512_fmadd_ps(_mm512_mul_ps(I8F(LD128(b[i].qs + 16)), d0), _mm512_loadu_ps(x + 16), a1);
        a2 = _mm512_fmadd_ps(_mm512_mul_ps(I8F(LD128(b[i + 1].qs)), d1), _mm512_loadu_ps(x + 32), a2);
        a3 = _mm512_fmadd_ps(_mm512_mul_ps(I8F(LD128(b[i + 1].qs + 16)), d1), _mm512_loadu_ps(x + 48), a3);
    }
    for (; i < nb; i++, x += 32) {
        const __m512 d0 = _mm512_set1_ps(H2F(b[i].d));
        a0 = _mm512_fmadd_ps(_mm512_mul_ps(I8F(LD128(b[i].qs)), d0), _mm512_loadu_ps(x), a0);
        a1 = _mm512_fmadd_ps(_mm512_mul_ps(I8F(LD128(b[i].qs + 16)), d0), _mm512_loadu_ps(x + 16), a1);
    }
    return hsum4(a0, a1, a2, a3);
}

AVX512 float sqz__qdot1_q4_0_avx512(const void *vx, const float *x, int64_t k) {
    const sqz_block_q4_0 *b = vx;
    const __m128i eight = _mm_set1_epi8(8);
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    for (int64_t i = 0; i < k / SQZ_QK4_0; i++, x += 32) {
        __m128i lo, hi;
        nib(b[i].qs, &lo, &hi);
        const __m512 d = _mm512_set1_ps(H2F(b[i].d));
        const __m512 w0 = _mm512_mul_ps(I8F(_mm_sub_epi8(lo, eight)), d);
        const __m512 w1 = _mm512_mul_ps(I8F(_mm_sub_epi8(hi, eight)), d);
        if (i & 1) {
            a2 = _mm512_fmadd_ps(w0, _mm512_loadu_ps(x), a2);
            a3 = _mm512_fmadd_ps(w1, _mm512_loadu_ps(x + 16), a3);
        } else {
            a0 = _mm512_fmadd_ps(w0, _mm512_loadu_ps(x), a0);
            a1 = _mm512_fmadd_ps(w1, _mm512_loadu_ps(x + 16), a1);
        }
    }
    return hsum4(a0, a1, a2, a3);
}

AVX512 float sqz__qdot1_q4_1_avx512(const void *vx, const float *x, int64_t k) {
    const sqz_block_q4_1 *b = vx;
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    for (int64_t i = 0; i < k / SQZ_QK4_1; i++, x += 32) {
        __m128i lo, hi;
        nib(b[i].qs, &lo, &hi);
        const __m512 d = _mm512_set1_ps(H2F(b[i].d)), m = _mm512_set1_ps(H2F(b[i].m));
        const __m512 w0 = _mm512_add_ps(_mm512_mul_ps(U8F(lo), d), m);
        const __m512 w1 = _mm512_add_ps(_mm512_mul_ps(U8F(hi), d), m);
        if (i & 1) {
            a2 = _mm512_fmadd_ps(w0, _mm512_loadu_ps(x), a2);
            a3 = _mm512_fmadd_ps(w1, _mm512_loadu_ps(x + 16), a3);
        } else {
            a0 = _mm512_fmadd_ps(w0, _mm512_loadu_ps(x), a0);
            a1 = _mm512_fmadd_ps(w1, _mm512_loadu_ps(x + 16), a1);
        }
    }
    return hsum4(a0, a1, a2, a3);
}

AVX512 float sqz__qdot1_q4_K_avx512(const void *vx, const float *x, int64_t k) {
    const sqz_block_q4_K *b = vx;
    const __m128i m4 = _mm_set1_epi8(0x0F);
    __m512 a[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
    for (int64_t i = 0; i < k / SQZ_QK_K; i++) {
        const uint8_t *q = b[i].qs;
        const float d = H2F(b[i].d), min = H2F(b[i].dmin);
        for (int j = 0, is = 0; j < SQZ_QK_K; j += 64, is += 2, q += 32, x += 64) {
            uint8_t sc, m;
            sqz__get_scale_min_k4(is + 0, b[i].scales, &sc, &m);
            const __m512 d1 = _mm512_set1_ps(d * sc), m1 = _mm512_set1_ps(min * m);
            sqz__get_scale_min_k4(is + 1, b[i].scales, &sc, &m);
            const __m512 d2 = _mm512_set1_ps(d * sc), m2 = _mm512_set1_ps(min * m);
            for (int h = 0; h < 2; h++) { /* bytes 16h..16h+15: elements 16h.. (low) and 32+16h.. (high) */
                const __m128i v = LD128(q + 16 * h);
                const __m512 wl = _mm512_sub_ps(_mm512_mul_ps(d1, U8F(_mm_and_si128(v, m4))), m1);
                const __m512 wh = _mm512_sub_ps(_mm512_mul_ps(d2, U8F(_mm_and_si128(_mm_srli_epi16(v, 4), m4))), m2);
                a[h] = _mm512_fmadd_ps(wl, _mm512_loadu_ps(x + 16 * h), a[h]);
                a[2 + h] = _mm512_fmadd_ps(wh, _mm512_loadu_ps(x + 32 + 16 * h), a[2 + h]);
            }
        }
    }
    return hsum4(a[0], a[1], a[2], a[3]);
}

AVX512 float sqz__qdot1_q6_K_avx512(const void *vx, const float *x, int64_t k) {
    const sqz_block_q6_K *b = vx;
    const __m128i m4 = _mm_set1_epi8(0x0F), m2 = _mm_set1_epi8(3), off = _mm_set1_epi8(32);
    __m512 a[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
    for (int64_t i = 0; i < k / SQZ_QK_K; i++) {
        const float d = H2F(b[i].d);
        const uint8_t *ql = b[i].ql, *qh = b[i].qh;
        const int8_t *sc = b[i].scales;
        for (int nn = 0; nn < SQZ_QK_K; nn += 128, ql += 64, qh += 32, sc += 8, x += 128) {
            for (int h = 0; h < 2; h++) { /* l in [16h, 16h + 16): sub-block scale index is = h */
                const __m128i l0 = LD128(ql + 16 * h), l1 = LD128(ql + 32 + 16 * h), hb = LD128(qh + 16 * h);
                const __m128i lows[4] = {_mm_and_si128(l0, m4), _mm_and_si128(l1, m4),
                                         _mm_and_si128(_mm_srli_epi16(l0, 4), m4),
                                         _mm_and_si128(_mm_srli_epi16(l1, 4), m4)};
                for (int r = 0; r < 4; r++) {
                    const __m128i hi2 = _mm_and_si128(_mm_srli_epi16(hb, 2 * r), m2);
                    const __m128i q = _mm_sub_epi8(_mm_or_si128(lows[r], _mm_slli_epi16(hi2, 4)), off);
                    const __m512 w = _mm512_mul_ps(_mm512_set1_ps(d * sc[2 * r + h]), I8F(q));
                    a[r] = _mm512_fmadd_ps(w, _mm512_loadu_ps(x + 32 * r + 16 * h), a[r]);
                }
            }
        }
    }
    return hsum4(a[0], a[1], a[2], a[3]);
}

#else
typedef int sqz__qfused_avx512_unused; /* ISO C: a translation unit is not empty */
#endif

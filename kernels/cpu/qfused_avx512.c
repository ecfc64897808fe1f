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
#include <string.h>

#include "core/blocks.h"
#include "core/dequant.h"

#define AVX512 __attribute__((target("avx512f,avx512bw,avx2,fma,f16c")))
#define H2F(h) _cvtsh_ss(h)
/* Fully unrolled loops keep the accumulators a[] in registers. */
#if defined(__clang__)
#define SQZ__UNROLL(n) _Pragma("clang loop unroll(full)")
#else
#define SQZ__PRAGMA(x) _Pragma(#x)
#define SQZ__UNROLL(n) SQZ__PRAGMA(GCC unroll n)
#endif
#define I8F(v) _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(v))
#define U8F(v) _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(v))
#define LD128(p) _mm_loadu_si128((const __m128i *)(const void *)(p))

AVX512 static inline float hsum4(__m512 a, __m512 b, __m512 c, __m512 d) {
    return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a, b), _mm512_add_ps(c, d)));
}

AVX512 static inline float hsum8(__m256 v) {
    __m128 h = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    h = _mm_add_ps(h, _mm_movehl_ps(h, h));
    return _mm_cvtss_f32(_mm_add_ss(h, _mm_movehdup_ps(h)));
}

/* 8 unsigned bytes to 8 floats. */
AVX512 static inline __m256 U8F8(const uint8_t *p) {
    int64_t v;
    memcpy(&v, p, 8);
    return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_cvtsi64_si128(v)));
}

/* Low and high nibbles of 16 bytes: elements 0..15 and 16..31 of a Q4 block. */
AVX512 static inline void nib(const uint8_t *qs, __m128i *lo, __m128i *hi) {
    const __m128i b = LD128(qs), m = _mm_set1_epi8(0x0F);
    *lo = _mm_and_si128(b, m);
    *hi = _mm_and_si128(_mm_srli_epi16(b, 4), m);
}

AVX512 float sqz__qdot1_q8_0_avx512(const void *vx, const float *x, const float *xs, int64_t k) {
    (void)xs;
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

AVX512 float sqz__qdot1_q4_0_avx512(const void *vx, const float *x, const float *xs, int64_t k) {
    (void)xs;
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

AVX512 float sqz__qdot1_q4_1_avx512(const void *vx, const float *x, const float *xs, int64_t k) {
    (void)xs;
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

/* Q4_K: w = (d sc_j) q - (dmin m_j) for sub-block j of 32. Per sub-block t_j = sum q x (codes
 * widened to floats, no per-weight scale), then acc += (d sc_j) t_j; the minima once per
 * super-block as a vector of 8: (dmin m) . xs. Scales unpacked as llama.cpp's kernels do. */
AVX512 float sqz__qdot1_q4_K_avx512(const void *vx, const float *x, const float *xs, int64_t k) {
    const sqz_block_q4_K *b = vx;
    const __m512i m4 = _mm512_set1_epi32(15);
    __m512 a[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
    __m256 mins = _mm256_setzero_ps();
    for (int64_t i = 0; i < k / SQZ_QK_K; i++, x += SQZ_QK_K, xs += 8) {
        uint8_t sc[8], mn[8];
        sqz__k4_scales_mins(b[i].scales, sc, mn);
        float ds[8] __attribute__((aligned(32)));
        _mm256_store_ps(ds, _mm256_mul_ps(U8F8(sc), _mm256_set1_ps(H2F(b[i].d))));
        mins = _mm256_fmadd_ps(_mm256_mul_ps(U8F8(mn), _mm256_set1_ps(H2F(b[i].dmin))), _mm256_loadu_ps(xs), mins);
        const uint8_t *q = b[i].qs;
        SQZ__UNROLL(4)
        for (int j = 0; j < 4; j++, q += 32) { /* bytes 32j..: sub-blocks 2j (low nibbles), 2j + 1 */
            const __m512i r0 = _mm512_cvtepu8_epi32(LD128(q)), r1 = _mm512_cvtepu8_epi32(LD128(q + 16));
            const float *xj = x + 64 * j;
            __m512 t0 = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_and_si512(r0, m4)), _mm512_loadu_ps(xj));
            t0 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_and_si512(r1, m4)), _mm512_loadu_ps(xj + 16), t0);
            __m512 t1 = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_srli_epi32(r0, 4)), _mm512_loadu_ps(xj + 32));
            t1 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_srli_epi32(r1, 4)), _mm512_loadu_ps(xj + 48), t1);
            const int h = 2 * (j & 1);
            a[h] = _mm512_fmadd_ps(_mm512_set1_ps(ds[2 * j]), t0, a[h]);
            a[h + 1] = _mm512_fmadd_ps(_mm512_set1_ps(ds[2 * j + 1]), t1, a[h + 1]);
        }
    }
    return hsum4(a[0], a[1], a[2], a[3]) - hsum8(mins);
}

/* Q6_K: the 128 signed codes of each half super-block formed with 64-byte operations and
 * stored, then widened 16 at a time, times (d sc) for their sub-block of 16, into the sums. */
AVX512 float sqz__qdot1_q6_K_avx512(const void *vx, const float *x, const float *xs, int64_t k) {
    (void)xs;
    const sqz_block_q6_K *b = vx;
    const __m512i m4 = _mm512_set1_epi8(0x0F), m2 = _mm512_set1_epi8(0x30), off = _mm512_set1_epi8(32);
    __m512 a[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
    for (int64_t i = 0; i < k / SQZ_QK_K; i++) {
        float ds[16] __attribute__((aligned(64)));
        const __m512 sc = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(LD128(b[i].scales)));
        _mm512_store_ps(ds, _mm512_mul_ps(_mm512_set1_ps(H2F(b[i].d)), sc)); /* (d * sc) as the scalar */
        for (int half = 0; half < 2; half++, x += 128) {
            const __m512i L = _mm512_loadu_si512(b[i].ql + 64 * half);
            const __m256i h = _mm256_loadu_si256((const __m256i *)(const void *)(b[i].qh + 32 * half));
            /* bits 4-5 of each byte: qh's pair for elements 0..31 | 32..63 (H01), 64..95 | 96..127 (H23) */
            const __m512i H01 = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_slli_epi16(h, 4)), _mm256_slli_epi16(h, 2), 1);
            const __m512i H23 = _mm512_inserti64x4(_mm512_castsi256_si512(h), _mm256_srli_epi16(h, 2), 1);
            int8_t c[128] __attribute__((aligned(64)));
            _mm512_store_si512(c, _mm512_sub_epi8(_mm512_or_si512(_mm512_and_si512(L, m4), _mm512_and_si512(H01, m2)), off));
            _mm512_store_si512(c + 64, _mm512_sub_epi8(_mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(L, 4), m4),
                                                                       _mm512_and_si512(H23, m2)), off));
            /* widen from memory (the load ports), not by extracting 16-byte lanes (shuffles) */
            __asm__ volatile("" : : "r"(c) : "memory");
            SQZ__UNROLL(8)
            for (int g = 0; g < 8; g++) { /* elements 16g..16g+15: sub-block 8 half + g */
                const __m512 w = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(LD128(c + 16 * g))),
                                               _mm512_set1_ps(ds[8 * half + g]));
                a[g & 3] = _mm512_fmadd_ps(w, _mm512_loadu_ps(x + 16 * g), a[g & 3]);
            }
        }
    }
    return hsum4(a[0], a[1], a[2], a[3]);
}

#else
typedef int sqz__qfused_avx512_unused; /* ISO C: a translation unit is not empty */
#endif

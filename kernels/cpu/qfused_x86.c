/*
 * kernels/cpu/qfused_x86.c - fused dequantize-and-dot kernels (AVX2 + FMA) for one token: the
 * generation step's y[j] = W[j] . x read straight from the blocks, each block once, its values
 * never stored (qmatmul.h's dot1 slot).
 *
 * Each weight is formed exactly as core's scalar dequantizer forms it (the code converted to
 * float, times the scale, plus the minimum: separate roundings, no fusion - this file is
 * compiled with -ffp-contract=off) and only then multiplied into the sum with an FMA, so the
 * result is the dot product of the GGUF-defined weights with x, summed in another order (four
 * 8-lane accumulators). tests/unit/test_qmatmul.c checks each against sqz_matmul_ref.
 */
#include "kernels/cpu/qmatmul.h"

#if SQZ__QMM_X86
#include <immintrin.h>
#include <string.h>

#include "core/blocks.h"
#include "core/dequant.h"

#define AVX2 __attribute__((target("avx2,fma,f16c")))
#define H2F(h) _cvtsh_ss(h)

/* 8 codes (the low 8 bytes of v) to floats, signed or unsigned. */
#define I8F(v) _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(v))
#define U8F(v) _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(v))

/* acc[g] += (code * d) * x[8g..8g+8) for the 32 signed codes of q; groups 0-1 scaled by da,
 * 2-3 by db (Q6_K's sub-blocks of 16). */
AVX2 static inline void fma32_i8(__m256i q, __m256 da, __m256 db, const float *x, __m256 acc[4]) {
    const __m128i lo = _mm256_castsi256_si128(q), hi = _mm256_extracti128_si256(q, 1);
    acc[0] = _mm256_fmadd_ps(_mm256_mul_ps(I8F(lo), da), _mm256_loadu_ps(x), acc[0]);
    acc[1] = _mm256_fmadd_ps(_mm256_mul_ps(I8F(_mm_srli_si128(lo, 8)), da), _mm256_loadu_ps(x + 8), acc[1]);
    acc[2] = _mm256_fmadd_ps(_mm256_mul_ps(I8F(hi), db), _mm256_loadu_ps(x + 16), acc[2]);
    acc[3] = _mm256_fmadd_ps(_mm256_mul_ps(I8F(_mm_srli_si128(hi, 8)), db), _mm256_loadu_ps(x + 24), acc[3]);
}

/* acc[g] += (code * d + m) * x for 32 unsigned codes (Q4_1, Q5_1). */
AVX2 static inline void fma32_u8_add(__m256i q, __m256 d, __m256 m, const float *x, __m256 acc[4]) {
    const __m128i h[2] = {_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1)};
    for (int g = 0; g < 4; g++) {
        const __m128i v = g % 2 ? _mm_srli_si128(h[g / 2], 8) : h[g / 2];
        acc[g] = _mm256_fmadd_ps(_mm256_add_ps(_mm256_mul_ps(U8F(v), d), m), _mm256_loadu_ps(x + 8 * g), acc[g]);
    }
}

/* acc[g] += (d1 * code - m1) * x for 32 unsigned codes (Q4_K's sub-block). */
AVX2 static inline void fma32_u8_sub(__m256i q, __m256 d1, __m256 m1, const float *x, __m256 acc[4]) {
    const __m128i h[2] = {_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1)};
    for (int g = 0; g < 4; g++) {
        const __m128i v = g % 2 ? _mm_srli_si128(h[g / 2], 8) : h[g / 2];
        acc[g] = _mm256_fmadd_ps(_mm256_sub_ps(_mm256_mul_ps(d1, U8F(v)), m1), _mm256_loadu_ps(x + 8 * g), acc[g]);
    }
}

AVX2 static inline float hsum(const __m256 acc[4]) {
    const __m256 s = _mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3]));
    __m128 h = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
    h = _mm_add_ps(h, _mm_movehl_ps(h, h));
    h = _mm_add_ss(h, _mm_movehdup_ps(h));
    return _mm_cvtss_f32(h);
}

/* The 16 nibble bytes of a 32-element block: low nibbles (elements 0..15), then high. */
AVX2 static inline __m256i nibbles32(const uint8_t *qs) {
    const __m128i b = _mm_loadu_si128((const __m128i *)(const void *)qs), m = _mm_set1_epi8(0x0F);
    return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(b, 4), m), _mm_and_si128(b, m));
}

/* Byte j = 0x10 where bit j of the 32 bits at p is set (Q5's fifth bits). */
AVX2 static inline __m256i fifth_bits(const uint8_t *p) {
    uint32_t v;
    memcpy(&v, p, 4);
    const __m256i shuf = _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0101010101010101, 0);
    __m256i b = _mm256_shuffle_epi8(_mm256_set1_epi32((int)v), shuf);
    b = _mm256_or_si256(b, _mm256_set1_epi64x(0x7fbfdfeff7fbfdfe));
    return _mm256_and_si256(_mm256_cmpeq_epi8(b, _mm256_set1_epi64x(-1)), _mm256_set1_epi8(0x10));
}

#define ACC0 {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()}

AVX2 float sqz__qdot1_q8_0_avx2(const void *vx, const float *x, const float *xs, int64_t k) {
    (void)xs;
    const sqz_block_q8_0 *b = vx;
    __m256 acc[4] = ACC0;
    for (int64_t i = 0; i < k / SQZ_QK8_0; i++, x += SQZ_QK8_0) {
        const __m256 d = _mm256_set1_ps(H2F(b[i].d));
        fma32_i8(_mm256_loadu_si256((const __m256i *)(const void *)b[i].qs), d, d, x, acc);
    }
    return hsum(acc);
}

AVX2 float sqz__qdot1_q4_0_avx2(const void *vx, const float *x, const float *xs, int64_t k) {
    (void)xs;
    const sqz_block_q4_0 *b = vx;
    __m256 acc[4] = ACC0;
    for (int64_t i = 0; i < k / SQZ_QK4_0; i++, x += SQZ_QK4_0) {
        const __m256 d = _mm256_set1_ps(H2F(b[i].d));
        fma32_i8(_mm256_sub_epi8(nibbles32(b[i].qs), _mm256_set1_epi8(8)), d, d, x, acc);
    }
    return hsum(acc);
}

AVX2 float sqz__qdot1_q4_1_avx2(const void *vx, const float *x, const float *xs, int64_t k) {
    (void)xs;
    const sqz_block_q4_1 *b = vx;
    __m256 acc[4] = ACC0;
    for (int64_t i = 0; i < k / SQZ_QK4_1; i++, x += SQZ_QK4_1)
        fma32_u8_add(nibbles32(b[i].qs), _mm256_set1_ps(H2F(b[i].d)), _mm256_set1_ps(H2F(b[i].m)), x, acc);
    return hsum(acc);
}

AVX2 float sqz__qdot1_q5_0_avx2(const void *vx, const float *x, const float *xs, int64_t k) {
    (void)xs;
    const sqz_block_q5_0 *b = vx;
    __m256 acc[4] = ACC0;
    for (int64_t i = 0; i < k / SQZ_QK5_0; i++, x += SQZ_QK5_0) {
        const __m256 d = _mm256_set1_ps(H2F(b[i].d));
        const __m256i q = _mm256_or_si256(nibbles32(b[i].qs), fifth_bits(b[i].qh));
        fma32_i8(_mm256_sub_epi8(q, _mm256_set1_epi8(16)), d, d, x, acc);
    }
    return hsum(acc);
}

AVX2 float sqz__qdot1_q5_1_avx2(const void *vx, const float *x, const float *xs, int64_t k) {
    (void)xs;
    const sqz_block_q5_1 *b = vx;
    __m256 acc[4] = ACC0;
    for (int64_t i = 0; i < k / SQZ_QK5_1; i++, x += SQZ_QK5_1) {
        const __m256i q = _mm256_or_si256(nibbles32(b[i].qs), fifth_bits(b[i].qh));
        fma32_u8_add(q, _mm256_set1_ps(H2F(b[i].d)), _mm256_set1_ps(H2F(b[i].m)), x, acc);
    }
    return hsum(acc);
}

AVX2 float sqz__qdot1_q4_K_avx2(const void *vx, const float *x, const float *xs, int64_t k) {
    (void)xs;
    const sqz_block_q4_K *b = vx;
    const __m256i lo = _mm256_set1_epi8(0x0F);
    __m256 acc[4] = ACC0;
    for (int64_t i = 0; i < k / SQZ_QK_K; i++) {
        const uint8_t *q = b[i].qs;
        const float d = H2F(b[i].d), min = H2F(b[i].dmin);
        for (int j = 0, is = 0; j < SQZ_QK_K; j += 64, is += 2, q += 32, x += 64) {
            uint8_t sc, m;
            sqz__get_scale_min_k4(is + 0, b[i].scales, &sc, &m);
            const __m256 d1 = _mm256_set1_ps(d * sc), m1 = _mm256_set1_ps(min * m);
            sqz__get_scale_min_k4(is + 1, b[i].scales, &sc, &m);
            const __m256 d2 = _mm256_set1_ps(d * sc), m2 = _mm256_set1_ps(min * m);
            const __m256i v = _mm256_loadu_si256((const __m256i *)(const void *)q);
            fma32_u8_sub(_mm256_and_si256(v, lo), d1, m1, x, acc);
            fma32_u8_sub(_mm256_and_si256(_mm256_srli_epi16(v, 4), lo), d2, m2, x + 32, acc);
        }
    }
    return hsum(acc);
}

AVX2 float sqz__qdot1_q6_K_avx2(const void *vx, const float *x, const float *xs, int64_t k) {
    (void)xs;
    const sqz_block_q6_K *b = vx;
    const __m256i m4 = _mm256_set1_epi8(0x0F), m2 = _mm256_set1_epi8(3), off = _mm256_set1_epi8(32);
    __m256 acc[4] = ACC0;
    for (int64_t i = 0; i < k / SQZ_QK_K; i++) {
        const float d = H2F(b[i].d);
        const uint8_t *ql = b[i].ql, *qh = b[i].qh;
        const int8_t *sc = b[i].scales;
        for (int nn = 0; nn < SQZ_QK_K; nn += 128, ql += 64, qh += 32, sc += 8, x += 128) {
            const __m256i l0 = _mm256_loadu_si256((const __m256i *)(const void *)ql);
            const __m256i l1 = _mm256_loadu_si256((const __m256i *)(const void *)(ql + 32));
            const __m256i h = _mm256_loadu_si256((const __m256i *)(const void *)qh);
            const __m256i lows[4] = {_mm256_and_si256(l0, m4), _mm256_and_si256(l1, m4),
                                     _mm256_and_si256(_mm256_srli_epi16(l0, 4), m4),
                                     _mm256_and_si256(_mm256_srli_epi16(l1, 4), m4)};
            for (int r = 0; r < 4; r++) {
                const __m256i hb = _mm256_and_si256(_mm256_srli_epi16(h, 2 * r), m2);
                const __m256i q = _mm256_sub_epi8(_mm256_or_si256(lows[r], _mm256_slli_epi16(hb, 4)), off);
                /* element l of sub-row r: d * sc[2r + l / 16] * q, (d * sc) first as the scalar */
                fma32_i8(q, _mm256_set1_ps(d * sc[2 * r]), _mm256_set1_ps(d * sc[2 * r + 1]), x + 32 * r, acc);
            }
        }
    }
    return hsum(acc);
}

#else
typedef int sqz__qfused_x86_unused; /* ISO C: a translation unit is not empty */
#endif

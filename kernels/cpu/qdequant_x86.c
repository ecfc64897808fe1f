/*
 * kernels/cpu/qdequant_x86.c - AVX2 dequantizers of the stored weight types the matrix
 * products read most (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q6_K, IQ4_NL, MXFP4, F16,
 * BF16).
 *
 * Each gives bit for bit what core's scalar dequantizer (core/dequant*.c, llama.cpp's
 * dequantize_row_*) gives: the integer codes are formed exactly, converted to float (exact),
 * and scaled with the same float operations in the same order (a multiply, then an add or
 * a subtract: no fused multiply-add, and this file is compiled with -ffp-contract=off so the
 * compiler does not fuse them either). tests/unit/test_qmatmul.c checks every one against
 * the scalar dequantizer on random and real blocks. Other types use the scalar dequantizer.
 */
#include "kernels/cpu/qmatmul.h"

#if SQZ__QMM_X86
#include <immintrin.h>
#include <string.h>

#include "core/blocks.h"
#include "core/dequant.h"
#include "core/internal.h"

#define AVX2 __attribute__((target("avx2,fma,f16c")))
/* fp16 scale to f32 with F16C: exact, as core's sqz_fp16_to_fp32 (scales are finite numbers) */
#define H2F(h) _cvtsh_ss(h)

/* 8 bytes at p, as signed (EPI8) or unsigned (EPU8) integers, to 8 floats. */
#define CVT8_EPI8(p) _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)(p))))
#define CVT8_EPU8(p) _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)(p))))

/* 32 signed bytes q (element order) times d into y[0..32). */
AVX2 static inline void store32_mul(const int8_t q[32], __m256 d, float *y) {
    for (int g = 0; g < 4; g++) _mm256_storeu_ps(y + 8 * g, _mm256_mul_ps(CVT8_EPI8(q + 8 * g), d));
}

/* 32 unsigned bytes q times d, plus m. */
AVX2 static inline void store32_mul_add(const uint8_t q[32], __m256 d, __m256 m, float *y) {
    for (int g = 0; g < 4; g++) _mm256_storeu_ps(y + 8 * g, _mm256_add_ps(_mm256_mul_ps(CVT8_EPU8(q + 8 * g), d), m));
}

/* The 16 bytes of a 32-element nibble block as 32 bytes: low nibbles (elements 0..15), then
 * high nibbles (elements 16..31). */
AVX2 static inline __m256i nibbles32(const uint8_t *qs) {
    const __m128i b = _mm_loadu_si128((const __m128i *)(const void *)qs), m = _mm_set1_epi8(0x0F);
    return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(b, 4), m), _mm_and_si128(b, m));
}

/* Byte j = 0xFF where bit j of the 32 bits at p is set (llama.cpp's bytes_from_bits_32). */
AVX2 static inline __m256i bits32(const uint8_t *p) {
    uint32_t v;
    memcpy(&v, p, 4);
    const __m256i shuf = _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0101010101010101, 0);
    __m256i b = _mm256_shuffle_epi8(_mm256_set1_epi32((int)v), shuf);
    b = _mm256_or_si256(b, _mm256_set1_epi64x(0x7fbfdfeff7fbfdfe));
    return _mm256_cmpeq_epi8(b, _mm256_set1_epi64x(-1));
}

AVX2 void sqz__dequant_q8_0_avx2(const void *vx, float *y, int64_t n) {
    const sqz_block_q8_0 *x = vx;
    for (int64_t i = 0; i < n / SQZ_QK8_0; i++, y += SQZ_QK8_0)
        store32_mul(x[i].qs, _mm256_set1_ps(H2F(x[i].d)), y);
}

AVX2 void sqz__dequant_q4_0_avx2(const void *vx, float *y, int64_t n) {
    const sqz_block_q4_0 *x = vx;
    int8_t q[32];
    for (int64_t i = 0; i < n / SQZ_QK4_0; i++, y += SQZ_QK4_0) {
        _mm256_storeu_si256((__m256i *)(void *)q, _mm256_sub_epi8(nibbles32(x[i].qs), _mm256_set1_epi8(8)));
        store32_mul(q, _mm256_set1_ps(H2F(x[i].d)), y);
    }
}

AVX2 void sqz__dequant_q4_1_avx2(const void *vx, float *y, int64_t n) {
    const sqz_block_q4_1 *x = vx;
    uint8_t q[32];
    for (int64_t i = 0; i < n / SQZ_QK4_1; i++, y += SQZ_QK4_1) {
        _mm256_storeu_si256((__m256i *)(void *)q, nibbles32(x[i].qs));
        store32_mul_add(q, _mm256_set1_ps(H2F(x[i].d)), _mm256_set1_ps(H2F(x[i].m)), y);
    }
}

/* The 5-bit codes of a Q5_0/Q5_1 block: nibble | (bit j of qh) << 4. */
AVX2 static inline __m256i q5_codes(const uint8_t *qs, const uint8_t *qh) {
    return _mm256_or_si256(nibbles32(qs), _mm256_and_si256(bits32(qh), _mm256_set1_epi8(0x10)));
}

AVX2 void sqz__dequant_q5_0_avx2(const void *vx, float *y, int64_t n) {
    const sqz_block_q5_0 *x = vx;
    int8_t q[32];
    for (int64_t i = 0; i < n / SQZ_QK5_0; i++, y += SQZ_QK5_0) {
        _mm256_storeu_si256((__m256i *)(void *)q, _mm256_sub_epi8(q5_codes(x[i].qs, x[i].qh), _mm256_set1_epi8(16)));
        store32_mul(q, _mm256_set1_ps(H2F(x[i].d)), y);
    }
}

AVX2 void sqz__dequant_q5_1_avx2(const void *vx, float *y, int64_t n) {
    const sqz_block_q5_1 *x = vx;
    uint8_t q[32];
    for (int64_t i = 0; i < n / SQZ_QK5_1; i++, y += SQZ_QK5_1) {
        _mm256_storeu_si256((__m256i *)(void *)q, q5_codes(x[i].qs, x[i].qh));
        store32_mul_add(q, _mm256_set1_ps(H2F(x[i].d)), _mm256_set1_ps(H2F(x[i].m)), y);
    }
}

AVX2 void sqz__dequant_iq4_nl_avx2(const void *vx, float *y, int64_t n) {
    const sqz_block_iq4_nl *x = vx;
    const __m128i t = _mm_loadu_si128((const __m128i *)(const void *)sqz__kvalues_iq4nl);
    const __m256i table = _mm256_set_m128i(t, t);
    int8_t q[32];
    for (int64_t i = 0; i < n / SQZ_QK4_NL; i++, y += SQZ_QK4_NL) {
        _mm256_storeu_si256((__m256i *)(void *)q, _mm256_shuffle_epi8(table, nibbles32(x[i].qs)));
        /* scalar: d * kvalue, the same product as kvalue * d */
        store32_mul(q, _mm256_set1_ps(H2F(x[i].d)), y);
    }
}

/* MXFP4: the E2M1 table (doubled) looked up as IQ4_NL's, times the block's power of two. */
AVX2 void sqz__dequant_mxfp4_avx2(const void *vx, float *y, int64_t n) {
    const sqz_block_mxfp4 *x = vx;
    const __m128i t = _mm_loadu_si128((const __m128i *)(const void *)sqz__kvalues_fp4);
    const __m256i table = _mm256_set_m128i(t, t);
    int8_t q[32];
    for (int64_t i = 0; i < n / SQZ_QK_MXFP4; i++, y += SQZ_QK_MXFP4) {
        _mm256_storeu_si256((__m256i *)(void *)q, _mm256_shuffle_epi8(table, nibbles32(x[i].qs)));
        store32_mul(q, _mm256_set1_ps(sqz__e8m0_half(x[i].e)), y); /* scalar: kvalue * d */
    }
}

/* 8 unsigned bytes times d1, minus m1 (Q4_K's d1 * q - m1). */
AVX2 static inline void store8_mul_sub(const uint8_t *q, __m256 d1, __m256 m1, float *y) {
    _mm256_storeu_ps(y, _mm256_sub_ps(_mm256_mul_ps(d1, CVT8_EPU8(q)), m1));
}

AVX2 void sqz__dequant_q4_K_avx2(const void *vx, float *y, int64_t n) {
    const sqz_block_q4_K *x = vx;
    const __m256i lo = _mm256_set1_epi8(0x0F);
    uint8_t ql[32], qh[32];
    for (int64_t i = 0; i < n / SQZ_QK_K; i++) {
        const uint8_t *q = x[i].qs;
        const float d = H2F(x[i].d), min = H2F(x[i].dmin);
        for (int j = 0, is = 0; j < SQZ_QK_K; j += 64, is += 2, q += 32, y += 64) {
            uint8_t sc, m;
            sqz__get_scale_min_k4(is + 0, x[i].scales, &sc, &m);
            const __m256 d1 = _mm256_set1_ps(d * sc), m1 = _mm256_set1_ps(min * m);
            sqz__get_scale_min_k4(is + 1, x[i].scales, &sc, &m);
            const __m256 d2 = _mm256_set1_ps(d * sc), m2 = _mm256_set1_ps(min * m);
            const __m256i b = _mm256_loadu_si256((const __m256i *)(const void *)q);
            _mm256_storeu_si256((__m256i *)(void *)ql, _mm256_and_si256(b, lo));
            _mm256_storeu_si256((__m256i *)(void *)qh, _mm256_and_si256(_mm256_srli_epi16(b, 4), lo));
            for (int g = 0; g < 4; g++) store8_mul_sub(ql + 8 * g, d1, m1, y + 8 * g);
            for (int g = 0; g < 4; g++) store8_mul_sub(qh + 8 * g, d2, m2, y + 32 + 8 * g);
        }
    }
}

AVX2 void sqz__dequant_q6_K_avx2(const void *vx, float *y, int64_t n) {
    const sqz_block_q6_K *x = vx;
    const __m256i m4 = _mm256_set1_epi8(0x0F), m2 = _mm256_set1_epi8(3), off = _mm256_set1_epi8(32);
    int8_t q[4][32];
    for (int64_t i = 0; i < n / SQZ_QK_K; i++) {
        const float d = H2F(x[i].d);
        const uint8_t *ql = x[i].ql, *qh = x[i].qh;
        const int8_t *sc = x[i].scales;
        for (int nn = 0; nn < SQZ_QK_K; nn += 128, ql += 64, qh += 32, sc += 8, y += 128) {
            const __m256i l0 = _mm256_loadu_si256((const __m256i *)(const void *)ql);
            const __m256i l1 = _mm256_loadu_si256((const __m256i *)(const void *)(ql + 32));
            const __m256i h = _mm256_loadu_si256((const __m256i *)(const void *)qh);
            const __m256i lows[4] = {_mm256_and_si256(l0, m4), _mm256_and_si256(l1, m4),
                                     _mm256_and_si256(_mm256_srli_epi16(l0, 4), m4),
                                     _mm256_and_si256(_mm256_srli_epi16(l1, 4), m4)};
            for (int r = 0; r < 4; r++) {
                const __m256i hb = _mm256_and_si256(_mm256_srli_epi16(h, 2 * r), m2);
                const __m256i v = _mm256_or_si256(lows[r], _mm256_slli_epi16(hb, 4)); /* < 64: no carry */
                _mm256_storeu_si256((__m256i *)(void *)q[r], _mm256_sub_epi8(v, off));
            }
            /* y[l + 32 r] = d * sc[is + 2 r] * q_r[l], is = l / 16: (d * sc) first, as the scalar */
            for (int r = 0; r < 4; r++) {
                const __m256 s0 = _mm256_set1_ps(d * sc[2 * r]), s1 = _mm256_set1_ps(d * sc[2 * r + 1]);
                for (int g = 0; g < 4; g++)
                    _mm256_storeu_ps(y + 32 * r + 8 * g, _mm256_mul_ps(g < 2 ? s0 : s1, CVT8_EPI8(q[r] + 8 * g)));
            }
        }
    }
}

AVX2 void sqz__dequant_f16_avx2(const void *vx, float *y, int64_t n) {
    const uint16_t *x = vx;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(x + i))));
    for (; i < n; i++) y[i] = H2F(x[i]);
}

AVX2 void sqz__dequant_bf16_avx2(const void *vx, float *y, int64_t n) {
    const uint16_t *x = vx;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(x + i)));
        _mm256_storeu_ps(y + i, _mm256_castsi256_ps(_mm256_slli_epi32(w, 16)));
    }
    for (; i < n; i++) y[i] = sqz_bf16_to_fp32(x[i]);
}

#else
typedef int sqz__qdequant_x86_unused; /* ISO C: a translation unit is not empty */
#endif

/*
 * kernels/cpu/qfused_x86.c - fused dequantize-and-dot kernels (AVX2 + FMA) for one token: the
 * generation step's y[j] = W[j] . x read straight from the blocks, each block once, its values
 * never stored (qmatmul.h's dot1 slot).
 *
 * Each weight is formed exactly as core's scalar dequantizer forms it (the code converted to
 * float, times the scale, plus the minimum: separate roundings, no fusion - this file is
 * compiled with -ffp-contract=off) and only then multiplied into the sum with an FMA, so the
 * result is the dot product of the GGUF-defined weights with x, summed in another order (four
 * 8-lane accumulators). tests/unit/test_qmatmul.c checks each against sqz__matmul_ref.
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

/* One Q4_K / Q5_K super-block into acc: w = (d sc) q - (dmin m) per sub-block of 32, q plus 16
 * where bit `is` (low nibbles) or `is + 1` (high) of qh[l] is set (Q5_K; qh NULL: Q4_K). */
AVX2 static inline void fma_k_super(const uint8_t *scales, float d, float min, const uint8_t *q, const uint8_t *qh,
                                    const float *x, __m256 acc[4]) {
    const __m256i lo = _mm256_set1_epi8(0x0F), b4 = _mm256_set1_epi8(0x10);
    const __m256i h = qh ? _mm256_loadu_si256((const __m256i *)(const void *)qh) : _mm256_setzero_si256();
    for (int j = 0, is = 0; j < SQZ_QK_K; j += 64, is += 2, q += 32, x += 64) {
        uint8_t sc, m;
        sqz__get_scale_min_k4(is + 0, scales, &sc, &m);
        const __m256 d1 = _mm256_set1_ps(d * sc), m1 = _mm256_set1_ps(min * m);
        sqz__get_scale_min_k4(is + 1, scales, &sc, &m);
        const __m256 d2 = _mm256_set1_ps(d * sc), m2 = _mm256_set1_ps(min * m);
        const __m256i v = _mm256_loadu_si256((const __m256i *)(const void *)q);
        __m256i ql = _mm256_and_si256(v, lo), qhi = _mm256_and_si256(_mm256_srli_epi16(v, 4), lo);
        if (qh) { /* bit `is` of each qh byte to bit 4 (16-bit shifts: the masked bit stays in its byte) */
            ql = _mm256_or_si256(ql, _mm256_and_si256(_mm256_slli_epi16(_mm256_srli_epi16(h, is), 4), b4));
            qhi = _mm256_or_si256(qhi, _mm256_and_si256(_mm256_slli_epi16(_mm256_srli_epi16(h, is + 1), 4), b4));
        }
        fma32_u8_sub(ql, d1, m1, x, acc);
        fma32_u8_sub(qhi, d2, m2, x + 32, acc);
    }
}

AVX2 float sqz__qdot1_q4_K_avx2(const void *vx, const float *x, const float *xs, int64_t k) {
    (void)xs;
    const sqz_block_q4_K *b = vx;
    __m256 acc[4] = ACC0;
    for (int64_t i = 0; i < k / SQZ_QK_K; i++, x += SQZ_QK_K)
        fma_k_super(b[i].scales, H2F(b[i].d), H2F(b[i].dmin), b[i].qs, NULL, x, acc);
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

/* acc[g] += (d * code - m) * x for 32 unsigned codes, groups 0-1 with (da, ma), 2-3 with (db, mb)
 * (Q2_K's sub-blocks of 16). */
AVX2 static inline void fma32_u8_sub2(__m256i q, __m256 da, __m256 ma, __m256 db, __m256 mb, const float *x,
                                      __m256 acc[4]) {
    const __m128i h[2] = {_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1)};
    for (int g = 0; g < 4; g++) {
        const __m128i v = g % 2 ? _mm_srli_si128(h[g / 2], 8) : h[g / 2];
        const __m256 d = g < 2 ? da : db, m = g < 2 ? ma : mb;
        acc[g] = _mm256_fmadd_ps(_mm256_sub_ps(_mm256_mul_ps(d, U8F(v)), m), _mm256_loadu_ps(x + 8 * g), acc[g]);
    }
}

/* The IQ4 table in both 128-bit lanes, for a byte shuffle of the codes. */
AVX2 static inline __m256i iq4_table(void) {
    const __m128i t = _mm_loadu_si128((const __m128i *)(const void *)sqz__kvalues_iq4nl);
    return _mm256_set_m128i(t, t);
}

AVX2 float sqz__qdot1_iq4_nl_avx2(const void *vx, const float *x, const float *xs, int64_t k) {
    (void)xs;
    const sqz_block_iq4_nl *b = vx;
    const __m256i lut = iq4_table();
    __m256 acc[4] = ACC0;
    for (int64_t i = 0; i < k / SQZ_QK4_NL; i++, x += SQZ_QK4_NL) {
        const __m256 d = _mm256_set1_ps(H2F(b[i].d));
        fma32_i8(_mm256_shuffle_epi8(lut, nibbles32(b[i].qs)), d, d, x, acc);
    }
    return hsum(acc);
}

AVX2 float sqz__qdot1_mxfp4_avx2(const void *vx, const float *x, const float *xs, int64_t k) {
    (void)xs;
    const sqz_block_mxfp4 *b = vx;
    const __m128i t = _mm_loadu_si128((const __m128i *)(const void *)sqz__kvalues_fp4);
    const __m256i lut = _mm256_set_m128i(t, t);
    __m256 acc[4] = ACC0;
    for (int64_t i = 0; i < k / SQZ_QK_MXFP4; i++, x += SQZ_QK_MXFP4) {
        const __m256 d = _mm256_set1_ps(sqz__e8m0_half(b[i].e));
        fma32_i8(_mm256_shuffle_epi8(lut, nibbles32(b[i].qs)), d, d, x, acc);
    }
    return hsum(acc);
}

AVX2 float sqz__qdot1_iq4_xs_avx2(const void *vx, const float *x, const float *xs, int64_t k) {
    (void)xs;
    const sqz_block_iq4_xs *b = vx;
    const __m256i lut = iq4_table();
    __m256 acc[4] = ACC0;
    for (int64_t i = 0; i < k / SQZ_QK_K; i++) {
        const float d = H2F(b[i].d);
        for (int ib = 0; ib < SQZ_QK_K / 32; ib++, x += 32) {
            const int ls = ((b[i].scales_l[ib / 2] >> 4 * (ib % 2)) & 0xf) | (((b[i].scales_h >> 2 * ib) & 3) << 4);
            const __m256 dl = _mm256_set1_ps(d * (float)(ls - 32));
            fma32_i8(_mm256_shuffle_epi8(lut, nibbles32(b[i].qs + 16 * ib)), dl, dl, x, acc);
        }
    }
    return hsum(acc);
}

/* IQ3_S: each sub-block of 32 is 8 codewords of 4 odd magnitudes from the 512-entry grid (index:
 * a qs byte and bit k of qh[sub-block]) with one sign bit a weight; w = db * level * sign, db =
 * d (1 + 2 s) formed as the dequantizer forms it. The 8 codewords are gathered as 32 level bytes,
 * the sign bits spread to one byte each (byte j takes sign byte j / 8, tested against bit j % 8)
 * and applied with a byte sign. */
AVX2 float sqz__qdot1_iq3_s_avx2(const void *vx, const float *x, const float *xs, int64_t k) {
    (void)xs;
    const sqz_block_iq3_s *b = vx;
    const __m256i bits = _mm256_set1_epi64x((long long)0x8040201008040201ull);
    const __m256i spread = _mm256_set_epi64x(0x0303030303030303ll, 0x0202020202020202ll, 0x0101010101010101ll, 0);
    const __m256i one = _mm256_set1_epi8(1);
    const uint32_t *grid = sqz__iq3s_grid;
    __m256 acc[4] = ACC0;
    for (int64_t i = 0; i < k / SQZ_QK_K; i++) {
        const float d = H2F(b[i].d);
        for (int ib = 0; ib < SQZ_QK_K / 32; ib++, x += 32) {
            const uint8_t *qs = b[i].qs + 8 * ib;
            const int qh = b[i].qh[ib];
            const __m256i lv = _mm256_set_epi32(
                (int)grid[qs[7] | ((qh << 1) & 256)], (int)grid[qs[6] | ((qh << 2) & 256)],
                (int)grid[qs[5] | ((qh << 3) & 256)], (int)grid[qs[4] | ((qh << 4) & 256)],
                (int)grid[qs[3] | ((qh << 5) & 256)], (int)grid[qs[2] | ((qh << 6) & 256)],
                (int)grid[qs[1] | ((qh << 7) & 256)], (int)grid[qs[0] | ((qh << 8) & 256)]);
            int32_t sg;
            memcpy(&sg, b[i].signs + 4 * ib, 4);
            const __m256i set = _mm256_and_si256(_mm256_shuffle_epi8(_mm256_set1_epi32(sg), spread), bits);
            const __m256i q = _mm256_sign_epi8(lv, _mm256_or_si256(_mm256_cmpeq_epi8(set, bits), one));
            const __m256 db = _mm256_set1_ps(d * (1 + 2 * ((b[i].scales[ib / 2] >> 4 * (ib % 2)) & 0xf)));
            fma32_i8(q, db, db, x, acc);
        }
    }
    return hsum(acc);
}

/* Q5_K: Q4_K's nibbles plus 16 where bit 2j (low nibbles) or 2j + 1 (high) of qh[l] is set. */
AVX2 float sqz__qdot1_q5_K_avx2(const void *vx, const float *x, const float *xs, int64_t k) {
    (void)xs;
    const sqz_block_q5_K *b = vx;
    __m256 acc[4] = ACC0;
    for (int64_t i = 0; i < k / SQZ_QK_K; i++, x += SQZ_QK_K)
        fma_k_super(b[i].scales, H2F(b[i].d), H2F(b[i].dmin), b[i].qs, b[i].qh, x, acc);
    return hsum(acc);
}

/* Q2_K: per half super-block of 128, element 32j + l in bits 2j..2j+1 of byte l; sub-block of 16
 * 8 half + 2j + l / 16 with w = (d sc) q - (dmin m). */
AVX2 float sqz__qdot1_q2_K_avx2(const void *vx, const float *x, const float *xs, int64_t k) {
    (void)xs;
    const sqz_block_q2_K *b = vx;
    const __m256i m3 = _mm256_set1_epi8(3);
    __m256 acc[4] = ACC0;
    for (int64_t i = 0; i < k / SQZ_QK_K; i++) {
        const float d = H2F(b[i].d), dmin = H2F(b[i].dmin);
        const uint8_t *sc = b[i].scales;
        for (int half = 0; half < 2; half++) {
            const __m256i q = _mm256_loadu_si256((const __m256i *)(const void *)(b[i].qs + 32 * half));
            for (int j = 0; j < 4; j++, sc += 2, x += 32) {
                const __m256 da = _mm256_set1_ps(d * (float)(sc[0] & 0xF));
                const __m256 ma = _mm256_set1_ps(dmin * (float)(sc[0] >> 4));
                const __m256 db = _mm256_set1_ps(d * (float)(sc[1] & 0xF));
                const __m256 mb = _mm256_set1_ps(dmin * (float)(sc[1] >> 4));
                fma32_u8_sub2(_mm256_and_si256(_mm256_srli_epi16(q, 2 * j), m3), da, ma, db, mb, x, acc);
            }
        }
    }
    return hsum(acc);
}

/* Q3_K: w = d (sc - 32) (q - 4 + 4 h), q the 2 bits as Q2_K's, h bit 4 half + j of hmask[l]. */
AVX2 float sqz__qdot1_q3_K_avx2(const void *vx, const float *x, const float *xs, int64_t k) {
    (void)xs;
    const sqz_block_q3_K *b = vx;
    const __m256i m3 = _mm256_set1_epi8(3), one = _mm256_set1_epi8(1);
    __m256 acc[4] = ACC0;
    for (int64_t i = 0; i < k / SQZ_QK_K; i++) {
        const float d = H2F(b[i].d);
        int8_t sc[16];
        sqz__q3_K_scales(b[i].scales, sc);
        const __m256i hm = _mm256_loadu_si256((const __m256i *)(const void *)b[i].hmask);
        for (int half = 0, s = 0; half < 2; half++) {
            const __m256i q = _mm256_loadu_si256((const __m256i *)(const void *)(b[i].qs + 32 * half));
            for (int j = 0; j < 4; j++, s += 2, x += 32) {
                const __m256i q2 = _mm256_and_si256(_mm256_srli_epi16(q, 2 * j), m3);
                const __m256i nh = _mm256_andnot_si256(_mm256_srli_epi16(hm, 4 * half + j), one); /* 1: no high bit */
                const __m256 da = _mm256_set1_ps(d * (float)(sc[s] - 32));
                const __m256 db = _mm256_set1_ps(d * (float)(sc[s + 1] - 32));
                fma32_i8(_mm256_sub_epi8(q2, _mm256_slli_epi16(nh, 2)), da, db, x, acc);
            }
        }
    }
    return hsum(acc);
}

#else
typedef int sqz__qfused_x86_unused; /* ISO C: a translation unit is not empty */
#endif

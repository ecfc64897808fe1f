/*
 * kernels/cpu/qidot_kcodes.h - the codes of one block as bytes, for the panel GEMMs
 * (qidot_gemm_vnni.c, qidot_gemm_avx2.c): each form packs them into its own panel layout and
 * stores them its own way (VNNI: unsigned, the signed values + 128; AVX2: small unsigned codes or
 * signed values for the sign trick), so what is shared is the decoding of a type's bits. AVX2 is
 * enough for every function here; the VNNI file calls them from its wider target.
 */
#ifndef SQZ_KERNELS_CPU_QIDOT_KCODES_H
#define SQZ_KERNELS_CPU_QIDOT_KCODES_H

#include <immintrin.h>
#include <string.h>

#include "core/blocks.h"
#include "core/dequant.h"
#include "sqz/dtype.h"

#define KC static inline __attribute__((target("avx2"), always_inline))
#define KC_LD128(p) _mm_loadu_si128((const __m128i *)(const void *)(p))
#define KC_LD256(p) _mm256_loadu_si256((const __m256i *)(const void *)(p))

/* The 32 nibbles of 16 bytes as bytes (elements 0..15 the low nibbles, 16..31 the high). */
KC __m256i kc_nibbles(const uint8_t *qs) {
    const __m128i q = KC_LD128(qs), f = _mm_set1_epi8(15);
    return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(q, 4), f), _mm_and_si128(q, f));
}

KC void kc_store(uint8_t *c, __m256i v) { _mm256_storeu_si256((__m256i *)(void *)c, v); }

/* Q6_K's codes 0..63: element 128 hh + 32 j + l is ql[64 hh + 32 (j % 2) + l]'s nibble j / 2 and
 * qh's bits 2j. */
KC void kc_q6(const sqz_block_q6_K *w, uint8_t c[256]) {
    const __m256i f = _mm256_set1_epi8(15);
    for (int hh = 0; hh < 2; hh++) {
        const __m256i qh = KC_LD256(w->qh + 32 * hh), l0 = KC_LD256(w->ql + 64 * hh), l1 = KC_LD256(w->ql + 64 * hh + 32);
        for (int j = 0; j < 4; j++) {
            const __m256i ql = j % 2 ? l1 : l0;
            const __m256i lo = j < 2 ? _mm256_and_si256(ql, f) : _mm256_and_si256(_mm256_srli_epi16(ql, 4), f);
            const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(qh, 2 * j), _mm256_set1_epi8(3));
            kc_store(c + 128 * hh + 32 * j, _mm256_or_si256(lo, _mm256_slli_epi16(hi, 4)));
        }
    }
}

/* Q4_K / Q5_K's codes 0..15 / 0..31: sub-blocks 2p (low nibbles of bytes 32p..) and 2p + 1 (high);
 * Q5_K (qh non-NULL): bit s of qh[l] adds 16. */
KC void kc_q45(const uint8_t *qs, const uint8_t *qh_or_null, uint8_t c[256]) {
    const __m256i f = _mm256_set1_epi8(15), b4 = _mm256_set1_epi8(16);
    const __m256i qh = qh_or_null ? KC_LD256(qh_or_null) : _mm256_setzero_si256();
    for (int p = 0; p < 4; p++) {
        const __m256i q = KC_LD256(qs + 32 * p);
        __m256i lo = _mm256_and_si256(q, f), hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), f);
        lo = _mm256_or_si256(lo, _mm256_and_si256(_mm256_slli_epi16(_mm256_srli_epi16(qh, 2 * p), 4), b4));
        hi = _mm256_or_si256(hi, _mm256_and_si256(_mm256_slli_epi16(_mm256_srli_epi16(qh, 2 * p + 1), 4), b4));
        kc_store(c + 64 * p, lo);
        kc_store(c + 64 * p + 32, hi);
    }
}

/* Q2_K and Q3_K's 2 low bits: element 128 h + 32 j + l is bits 2j of qs[32 h + l]; Q3_K (hmask
 * non-NULL) adds 4 where bit 4h + j of hmask[l] is set (its code q - 4 stored as q: 0..7). */
KC void kc_q23(const uint8_t *qs, const uint8_t *hmask, uint8_t c[256]) {
    const __m256i three = _mm256_set1_epi8(3), one = _mm256_set1_epi8(1);
    const __m256i hm = hmask ? KC_LD256(hmask) : _mm256_setzero_si256();
    for (int h = 0; h < 2; h++) {
        const __m256i q = KC_LD256(qs + 32 * h);
        for (int j = 0; j < 4; j++) {
            __m256i u = _mm256_and_si256(_mm256_srli_epi16(q, 2 * j), three);
            u = _mm256_or_si256(u, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hm, 4 * h + j), one), 2));
            kc_store(c + 128 * h + 32 * j, u);
        }
    }
}

/* Q3_K's 16 six-bit scales less 32: 4 bits from scales[i % 8] (the high nibble from 8 on), 2 from
 * scales[8 + i % 4]. */
KC void kc_q3_scales(const uint8_t *scales, int32_t sc[16]) {
    for (int i = 0; i < 16; i++) {
        const int lo = i < 8 ? scales[i] & 15 : scales[i - 8] >> 4;
        sc[i] = (lo | ((scales[8 + i % 4] >> (2 * (i / 4))) & 3) << 4) - 32;
    }
}

/* IQ4_XS's signed values: sub-block s of 32 is IQ4_NL's 16 bytes at 16 s; its scale 6 bits less 32. */
KC void kc_iq4xs(const sqz_block_iq4_xs *w, uint8_t c[256]) {
    const __m256i lut = _mm256_broadcastsi128_si256(KC_LD128(sqz__kvalues_iq4nl));
    for (int s = 0; s < 8; s++) kc_store(c + 32 * s, _mm256_shuffle_epi8(lut, kc_nibbles(w->qs + 16 * s)));
}
KC int kc_iq4xs_scale(const sqz_block_iq4_xs *w, int s) {
    uint16_t sh;
    memcpy(&sh, &w->scales_h, 2);
    return (((w->scales_l[s / 2] >> (4 * (s % 2))) & 15) | ((sh >> (2 * s)) & 3) << 4) - 32;
}

/* IQ3_S's signed values: sub-block s of 32 has 8 groups of 4 grid magnitudes (9-bit index) and a
 * sign bit per weight; plain C (decoded once per panel). Its scale: 2 ls + 1. */
KC void kc_iq3s(const sqz_block_iq3_s *w, uint8_t c[256]) {
    for (int s = 0; s < 8; s++)
        for (int g = 0; g < 8; g++) {
            const int idx = w->qs[8 * s + g] | (((w->qh[s] >> g) & 1) << 8);
            for (int j = 0; j < 4; j++) {
                const int e = 4 * g + j, mag = (int)((sqz__iq3s_grid[idx] >> (8 * j)) & 255);
                const int neg = (w->signs[4 * s + e / 8] >> (e % 8)) & 1;
                c[32 * s + e] = (uint8_t)(int8_t)(neg ? -mag : mag);
            }
        }
}
KC int kc_iq3s_scale(const sqz_block_iq3_s *w, int s) { return 2 * ((w->scales[s / 2] >> (4 * (s % 2))) & 15) + 1; }

#endif

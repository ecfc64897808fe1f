/*
 * kernels/cpu/qfused_avx512.c - the fused one-token kernels of qfused_x86.c with AVX-512F/BW/VL:
 * a 32-element block is two 16-lane vectors (one widening each, where AVX2 needs four).
 *
 * Where a block or sub-block of 32 has one scale (Q8_0, Q4_0/1, Q5_0/1, Q4_K, Q5_K, IQ4), the
 * scale and the minimum are factored out: sum w x = d (sum q x) + m (sum x), the codes widened to
 * floats and multiplied into a per-block sum, which is then scaled once, and the sums of x (xs)
 * formed once per product for every row. That is three vector operations per 16 weights instead
 * of five, and the same dot product as the scalar dequantizer's weights up to float rounding
 * (another order and grouping of the same sums). The 16-element sub-blocks (Q2_K, Q3_K, Q6_K)
 * form each weight as the scalar dequantizer does (code times scale, minus the minimum) and FMA
 * it. tests/unit/test_qmatmul.c checks every kernel against sqz__matmul_ref within 1e-5 of the
 * sum of |w x|.
 */
#include "kernels/cpu/qmatmul.h"

#if SQZ__QMM_X86
#include <immintrin.h>
#include <stdbool.h>
#include <string.h>

#include "core/blocks.h"
#include "core/dequant.h"

#define AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx2,fma,f16c")))
#define H2F(h) _cvtsh_ss(h)
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

/* sum q x over one 32-element block of nibble codes (16 bytes: low nibbles elements 0..15, high
 * 16..31) plus 16 where bit j of qh is set (Q5's fifth bits; five = false: none), as 16 lanes. */
AVX512 static inline __m512 t32_nib(const uint8_t *qs, bool five, uint32_t qh, const float *x) {
    const __m512i r = _mm512_cvtepu8_epi32(LD128(qs)), sixteen = _mm512_set1_epi32(16);
    __m512i lo = _mm512_and_si512(r, _mm512_set1_epi32(15)), hi = _mm512_srli_epi32(r, 4);
    if (five) {
        lo = _mm512_mask_add_epi32(lo, (__mmask16)(qh & 0xFFFF), lo, sixteen);
        hi = _mm512_mask_add_epi32(hi, (__mmask16)(qh >> 16), hi, sixteen);
    }
    const __m512 t = _mm512_mul_ps(_mm512_cvtepi32_ps(lo), _mm512_loadu_ps(x));
    return _mm512_fmadd_ps(_mm512_cvtepi32_ps(hi), _mm512_loadu_ps(x + 16), t);
}

/* The 32-element nibble types: w = d q + c with c = off * d (Q4_0: -8, Q5_0: -16) or the block's
 * m (Q4_1, Q5_1): sum w x = d (sum q x) + c (sum x), the sums of x from xs. Blocks of `bs` bytes
 * hold d at 0, m at 2 (with_min), the 5th bits after them (five), then the 16 nibble bytes. */
AVX512 static inline float dot_nib32(const uint8_t *b, size_t bs, bool with_min, bool five, float off,
                                     const float *x, const float *xs, int64_t k) {
    const size_t qo = (with_min ? 4 : 2) + (five ? 4 : 0);
    __m512 a0 = _mm512_setzero_ps(), a1 = a0;
    float c = 0.0f;
    int64_t i = 0;
    for (; i + 2 <= k / 32; i += 2, b += 2 * bs, x += 64) {
        uint32_t h0 = 0, h1 = 0;
        if (five) { memcpy(&h0, b + qo - 4, 4); memcpy(&h1, b + bs + qo - 4, 4); }
        uint16_t d0, d1;
        memcpy(&d0, b, 2);
        memcpy(&d1, b + bs, 2);
        a0 = _mm512_fmadd_ps(_mm512_set1_ps(H2F(d0)), t32_nib(b + qo, five, h0, x), a0);
        a1 = _mm512_fmadd_ps(_mm512_set1_ps(H2F(d1)), t32_nib(b + bs + qo, five, h1, x + 32), a1);
        if (with_min) {
            uint16_t m0, m1;
            memcpy(&m0, b + 2, 2);
            memcpy(&m1, b + bs + 2, 2);
            c += H2F(m0) * xs[i] + H2F(m1) * xs[i + 1];
        } else {
            c += H2F(d0) * xs[i] + H2F(d1) * xs[i + 1];
        }
    }
    for (; i < k / 32; i++, b += bs, x += 32) {
        uint32_t h0 = 0;
        if (five) memcpy(&h0, b + qo - 4, 4);
        uint16_t d0, m0;
        memcpy(&d0, b, 2);
        memcpy(&m0, b + (with_min ? 2 : 0), 2);
        a0 = _mm512_fmadd_ps(_mm512_set1_ps(H2F(d0)), t32_nib(b + qo, five, h0, x), a0);
        c += H2F(m0) * xs[i];
    }
    return _mm512_reduce_add_ps(_mm512_add_ps(a0, a1)) + (with_min ? c : off * c);
}

AVX512 float sqz__qdot1_q4_0_avx512(const void *vx, const float *x, const float *xs, int64_t k) {
    return dot_nib32(vx, sizeof(sqz_block_q4_0), false, false, -8.0f, x, xs, k);
}

AVX512 float sqz__qdot1_q4_1_avx512(const void *vx, const float *x, const float *xs, int64_t k) {
    return dot_nib32(vx, sizeof(sqz_block_q4_1), true, false, 0.0f, x, xs, k);
}

AVX512 float sqz__qdot1_q5_0_avx512(const void *vx, const float *x, const float *xs, int64_t k) {
    return dot_nib32(vx, sizeof(sqz_block_q5_0), false, true, -16.0f, x, xs, k);
}

AVX512 float sqz__qdot1_q5_1_avx512(const void *vx, const float *x, const float *xs, int64_t k) {
    return dot_nib32(vx, sizeof(sqz_block_q5_1), true, true, 0.0f, x, xs, k);
}

/* Q8_0: w = d q; sum q x per block (codes widened to floats), then times d. */
AVX512 float sqz__qdot1_q8_0_avx512(const void *vx, const float *x, const float *xs, int64_t k) {
    (void)xs;
    const sqz_block_q8_0 *b = vx;
    __m512 a0 = _mm512_setzero_ps(), a1 = a0;
    for (int64_t i = 0; i < k / SQZ_QK8_0; i++, x += SQZ_QK8_0) {
        __m512 t = _mm512_mul_ps(I8F(LD128(b[i].qs)), _mm512_loadu_ps(x));
        t = _mm512_fmadd_ps(I8F(LD128(b[i].qs + 16)), _mm512_loadu_ps(x + 16), t);
        if (i & 1) a1 = _mm512_fmadd_ps(_mm512_set1_ps(H2F(b[i].d)), t, a1);
        else a0 = _mm512_fmadd_ps(_mm512_set1_ps(H2F(b[i].d)), t, a0);
    }
    return _mm512_reduce_add_ps(_mm512_add_ps(a0, a1));
}

/* One Q4_K / Q5_K super-block: w = (d sc_j) q - (dmin m_j) for sub-block j of 32, q plus 16 where
 * the 5th bit is set (qh: Q5_K; NULL: Q4_K). Per sub-block t_j = sum q x (codes widened to
 * floats, no per-weight scale), then a += (d sc_j) t_j; the minima once per super-block as a
 * vector of 8, (dmin m) . xs. Scales unpacked as llama.cpp's kernels do. */
AVX512 static inline void k_super(const uint8_t *scales, float d, float dmin, const uint8_t *q, const uint8_t *qh,
                                  const float *x, const float *xs, __m512 a[4], __m256 *mins) {
    const __m512i m4 = _mm512_set1_epi32(15), sixteen = _mm512_set1_epi32(16);
    uint8_t sc[8], mn[8];
    sqz__k4_scales_mins(scales, sc, mn);
    float ds[8] __attribute__((aligned(32)));
    _mm256_store_ps(ds, _mm256_mul_ps(U8F8(sc), _mm256_set1_ps(d)));
    *mins = _mm256_fmadd_ps(_mm256_mul_ps(U8F8(mn), _mm256_set1_ps(dmin)), _mm256_loadu_ps(xs), *mins);
    const __m256i h = qh ? _mm256_loadu_si256((const __m256i *)(const void *)qh) : _mm256_setzero_si256();
    SQZ__UNROLL(4)
    for (int j = 0; j < 4; j++, q += 32) { /* bytes 32j..: sub-blocks 2j (low nibbles), 2j + 1 */
        __m512i r0 = _mm512_cvtepu8_epi32(LD128(q)), r1 = _mm512_cvtepu8_epi32(LD128(q + 16));
        __m512i l0 = _mm512_and_si512(r0, m4), l1 = _mm512_and_si512(r1, m4);
        __m512i h0 = _mm512_srli_epi32(r0, 4), h1 = _mm512_srli_epi32(r1, 4);
        if (qh) { /* bit 2j of qh[l]: element l of sub-block 2j; bit 2j + 1: of sub-block 2j + 1 */
            const __mmask32 kl = _mm256_test_epi8_mask(h, _mm256_set1_epi8((char)(1 << (2 * j))));
            const __mmask32 kh = _mm256_test_epi8_mask(h, _mm256_set1_epi8((char)(1 << (2 * j + 1))));
            l0 = _mm512_mask_add_epi32(l0, (__mmask16)kl, l0, sixteen);
            l1 = _mm512_mask_add_epi32(l1, (__mmask16)(kl >> 16), l1, sixteen);
            h0 = _mm512_mask_add_epi32(h0, (__mmask16)kh, h0, sixteen);
            h1 = _mm512_mask_add_epi32(h1, (__mmask16)(kh >> 16), h1, sixteen);
        }
        const float *xj = x + 64 * j;
        __m512 t0 = _mm512_mul_ps(_mm512_cvtepi32_ps(l0), _mm512_loadu_ps(xj));
        t0 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(l1), _mm512_loadu_ps(xj + 16), t0);
        __m512 t1 = _mm512_mul_ps(_mm512_cvtepi32_ps(h0), _mm512_loadu_ps(xj + 32));
        t1 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(h1), _mm512_loadu_ps(xj + 48), t1);
        const int p = 2 * (j & 1);
        a[p] = _mm512_fmadd_ps(_mm512_set1_ps(ds[2 * j]), t0, a[p]);
        a[p + 1] = _mm512_fmadd_ps(_mm512_set1_ps(ds[2 * j + 1]), t1, a[p + 1]);
    }
}

AVX512 float sqz__qdot1_q4_K_avx512(const void *vx, const float *x, const float *xs, int64_t k) {
    const sqz_block_q4_K *b = vx;
    __m512 a[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
    __m256 mins = _mm256_setzero_ps();
    for (int64_t i = 0; i < k / SQZ_QK_K; i++, x += SQZ_QK_K, xs += 8)
        k_super(b[i].scales, H2F(b[i].d), H2F(b[i].dmin), b[i].qs, NULL, x, xs, a, &mins);
    return hsum4(a[0], a[1], a[2], a[3]) - hsum8(mins);
}

AVX512 float sqz__qdot1_q5_K_avx512(const void *vx, const float *x, const float *xs, int64_t k) {
    const sqz_block_q5_K *b = vx;
    __m512 a[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
    __m256 mins = _mm256_setzero_ps();
    for (int64_t i = 0; i < k / SQZ_QK_K; i++, x += SQZ_QK_K, xs += 8)
        k_super(b[i].scales, H2F(b[i].d), H2F(b[i].dmin), b[i].qs, b[i].qh, x, xs, a, &mins);
    return hsum4(a[0], a[1], a[2], a[3]) - hsum8(mins);
}

/* a += w . x over 128 elements whose signed codes are stored at c (widened from memory: the load
 * ports, not 16-byte lane extracts on the shuffle port), in 8 sub-blocks of 16:
 * w = c * ds[g] (- ms[g] when ms: Q2_K's minima), formed as the scalar dequantizer forms it. */
AVX512 static inline void codes128_dot(int8_t *c, const float *ds, const float *ms, const float *x, __m512 a[4]) {
    __asm__ volatile("" : "+m"(*(int8_t(*)[128])(uintptr_t)c)); /* the codes are in memory: load them */
    SQZ__UNROLL(8)
    for (int g = 0; g < 8; g++) { /* elements 16g..16g+15 */
        __m512 w = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(LD128(c + 16 * g))), _mm512_set1_ps(ds[g]));
        if (ms) w = _mm512_sub_ps(w, _mm512_set1_ps(ms[g]));
        a[g & 3] = _mm512_fmadd_ps(w, _mm512_loadu_ps(x + 16 * g), a[g & 3]);
    }
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
            const __m512i H01 =
                _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_slli_epi16(h, 4)), _mm256_slli_epi16(h, 2), 1);
            const __m512i H23 = _mm512_inserti64x4(_mm512_castsi256_si512(h), _mm256_srli_epi16(h, 2), 1);
            int8_t c[128] __attribute__((aligned(64)));
            const __m512i lo = _mm512_and_si512(L, m4), hi = _mm512_and_si512(_mm512_srli_epi16(L, 4), m4);
            _mm512_store_si512(c, _mm512_sub_epi8(_mm512_or_si512(lo, _mm512_and_si512(H01, m2)), off));
            _mm512_store_si512(c + 64, _mm512_sub_epi8(_mm512_or_si512(hi, _mm512_and_si512(H23, m2)), off));
            codes128_dot(c, ds + 8 * half, NULL, x, a);
        }
    }
    return hsum4(a[0], a[1], a[2], a[3]);
}

/* The 2-bit K types: per half super-block of 128, 32 bytes of codes, element 32j + l (l < 32)
 * in bits 2j..2j+1 of byte l; sub-block of 16: 8 half + 2j + l / 16. Q2_K: w = (d sc) q - (dmin m),
 * scale and minimum nibbles of one byte per sub-block. */
AVX512 float sqz__qdot1_q2_K_avx512(const void *vx, const float *x, const float *xs, int64_t k) {
    (void)xs;
    const sqz_block_q2_K *b = vx;
    const __m256i m3 = _mm256_set1_epi8(3);
    __m512 a[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
    for (int64_t i = 0; i < k / SQZ_QK_K; i++) {
        const float d = H2F(b[i].d), dmin = H2F(b[i].dmin);
        float ds[16] __attribute__((aligned(64))), ms[16] __attribute__((aligned(64)));
        const __m512i sm = _mm512_cvtepu8_epi32(LD128(b[i].scales));
        const __m512i s4 = _mm512_and_si512(sm, _mm512_set1_epi32(15));
        _mm512_store_ps(ds, _mm512_mul_ps(_mm512_set1_ps(d), _mm512_cvtepi32_ps(s4)));
        _mm512_store_ps(ms, _mm512_mul_ps(_mm512_set1_ps(dmin), _mm512_cvtepi32_ps(_mm512_srli_epi32(sm, 4))));
        for (int half = 0; half < 2; half++, x += 128) {
            const __m256i q = _mm256_loadu_si256((const __m256i *)(const void *)(b[i].qs + 32 * half));
            int8_t c[128] __attribute__((aligned(64)));
            for (int j = 0; j < 4; j++)
                _mm256_store_si256((__m256i *)(void *)(c + 32 * j), _mm256_and_si256(_mm256_srli_epi16(q, 2 * j), m3));
            codes128_dot(c, ds + 8 * half, ms + 8 * half, x, a);
        }
    }
    return hsum4(a[0], a[1], a[2], a[3]);
}

/* Q3_K: w = d (sc - 32) (q - 4 + 4 h), q the 2 bits as Q2_K's, h bit 4 half + j of hmask[l]. */
AVX512 float sqz__qdot1_q3_K_avx512(const void *vx, const float *x, const float *xs, int64_t k) {
    (void)xs;
    const sqz_block_q3_K *b = vx;
    const __m256i m3 = _mm256_set1_epi8(3), four = _mm256_set1_epi8(4);
    __m512 a[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
    for (int64_t i = 0; i < k / SQZ_QK_K; i++) {
        const float d = H2F(b[i].d);
        int8_t sc[16];
        sqz__q3_K_scales(b[i].scales, sc);
        float ds[16] __attribute__((aligned(64)));
        const __m512i s32 = _mm512_sub_epi32(_mm512_cvtepi8_epi32(LD128(sc)), _mm512_set1_epi32(32));
        _mm512_store_ps(ds, _mm512_mul_ps(_mm512_set1_ps(d), _mm512_cvtepi32_ps(s32)));
        const __m256i hm = _mm256_loadu_si256((const __m256i *)(const void *)b[i].hmask);
        for (int half = 0; half < 2; half++, x += 128) {
            const __m256i q = _mm256_loadu_si256((const __m256i *)(const void *)(b[i].qs + 32 * half));
            int8_t c[128] __attribute__((aligned(64)));
            for (int j = 0; j < 4; j++) {
                const __mmask32 h = _mm256_test_epi8_mask(hm, _mm256_set1_epi8((char)(1 << (4 * half + j))));
                const __m256i q2 = _mm256_and_si256(_mm256_srli_epi16(q, 2 * j), m3);
                _mm256_store_si256((__m256i *)(void *)(c + 32 * j), _mm256_mask_sub_epi8(q2, (__mmask32)~h, q2, four));
            }
            codes128_dot(c, ds + 8 * half, NULL, x, a);
        }
    }
    return hsum4(a[0], a[1], a[2], a[3]);
}

/* sum kvalues[q] x over one 32-element block of IQ4 nibble codes (16 bytes: low nibbles elements
 * 0..15, high 16..31): the table is 16 float lanes and vpermps looks the codes up (it reads
 * only an index's low 4 bits, so the low nibbles need no mask). */
AVX512 static inline __m512 t32_iq4(const uint8_t *qs, __m512 lut, const float *x) {
    const __m512i r = _mm512_cvtepu8_epi32(LD128(qs));
    const __m512 t = _mm512_mul_ps(_mm512_permutexvar_ps(r, lut), _mm512_loadu_ps(x));
    return _mm512_fmadd_ps(_mm512_permutexvar_ps(_mm512_srli_epi32(r, 4), lut), _mm512_loadu_ps(x + 16), t);
}

AVX512 static inline __m512 iq4_table(void) {
    return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(LD128(sqz__kvalues_iq4nl)));
}

/* IQ4_NL: w = d kvalues[q]; per block sum kvalues[q] x, then times d. */
AVX512 float sqz__qdot1_iq4_nl_avx512(const void *vx, const float *x, const float *xs, int64_t k) {
    (void)xs;
    const sqz_block_iq4_nl *b = vx;
    const __m512 lut = iq4_table();
    __m512 a0 = _mm512_setzero_ps(), a1 = a0;
    for (int64_t i = 0; i < k / SQZ_QK4_NL; i++, x += SQZ_QK4_NL) {
        const __m512 t = t32_iq4(b[i].qs, lut, x);
        if (i & 1) a1 = _mm512_fmadd_ps(_mm512_set1_ps(H2F(b[i].d)), t, a1);
        else a0 = _mm512_fmadd_ps(_mm512_set1_ps(H2F(b[i].d)), t, a0);
    }
    return _mm512_reduce_add_ps(_mm512_add_ps(a0, a1));
}

/* MXFP4: w = 2^(e-128) kvalues_fp4[q]; IQ4_NL's kernel with the E2M1 table. */
AVX512 float sqz__qdot1_mxfp4_avx512(const void *vx, const float *x, const float *xs, int64_t k) {
    (void)xs;
    const sqz_block_mxfp4 *b = vx;
    const __m512 lut = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(LD128(sqz__kvalues_fp4)));
    __m512 a0 = _mm512_setzero_ps(), a1 = a0;
    for (int64_t i = 0; i < k / SQZ_QK_MXFP4; i++, x += SQZ_QK_MXFP4) {
        const __m512 t = t32_iq4(b[i].qs, lut, x);
        if (i & 1) a1 = _mm512_fmadd_ps(_mm512_set1_ps(sqz__e8m0_half(b[i].e)), t, a1);
        else a0 = _mm512_fmadd_ps(_mm512_set1_ps(sqz__e8m0_half(b[i].e)), t, a0);
    }
    return _mm512_reduce_add_ps(_mm512_add_ps(a0, a1));
}

/* IQ4_XS: w = d (ls_j - 32) kvalues[q] for sub-block j of 32 (6-bit ls_j: 4 low bits in
 * scales_l, 2 high in scales_h). */
AVX512 float sqz__qdot1_iq4_xs_avx512(const void *vx, const float *x, const float *xs, int64_t k) {
    (void)xs;
    const sqz_block_iq4_xs *b = vx;
    const __m512 lut = iq4_table();
    __m512 a0 = _mm512_setzero_ps(), a1 = a0;
    for (int64_t i = 0; i < k / SQZ_QK_K; i++) {
        const float d = H2F(b[i].d);
        SQZ__UNROLL(8)
        for (int ib = 0; ib < SQZ_QK_K / 32; ib++, x += 32) {
            const int ls = ((b[i].scales_l[ib / 2] >> 4 * (ib % 2)) & 0xf) | (((b[i].scales_h >> 2 * ib) & 3) << 4);
            const __m512 t = t32_iq4(b[i].qs + 16 * ib, lut, x);
            if (ib & 1) a1 = _mm512_fmadd_ps(_mm512_set1_ps(d * (float)(ls - 32)), t, a1);
            else a0 = _mm512_fmadd_ps(_mm512_set1_ps(d * (float)(ls - 32)), t, a0);
        }
    }
    return _mm512_reduce_add_ps(_mm512_add_ps(a0, a1));
}

#else
typedef int sqz__qfused_avx512_unused; /* ISO C: a translation unit is not empty */
#endif

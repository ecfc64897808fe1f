/*
 * kernels/cpu/qidot_vnni.c - the integer products of qidot.h with AVX-512F/BW/VL and VNNI
 * (vpdpbusd: unsigned bytes times signed bytes, summed by four into int32 lanes, no saturation).
 *
 * The unsigned operand is the weights' side. Q8_0 takes the sign trick (|w| times x with w's
 * sign, |w| <= 128, |x| <= 127); the others are made non-negative by an offset whose product is
 * subtracted exactly: sum (u - c) x = dpbusd(u, x) - dpbusd(c, x) for the 32-element blocks
 * (Q4_0: the nibble, c = 8; Q5_0: the 5-bit code, c = 16; IQ4_NL: the table value + 128), and
 * through the activation sums (bsums) for the super-blocks. Every sum is an exact int32, equal
 * to the scalar reference's (qidot_ref.c); only the f32 sums across blocks are in another order.
 *
 * 32-element blocks (as llama.cpp's ggml_vec_dot): one block per 256-bit register, its 8 int32
 * lane sums to f32 and FMA'd with the broadcast d_w d_a into two 8-lane accumulators (blocks
 * alternating), reduced once per row; Q4_1/Q5_1's m_w s_a summed apart in two scalars. Any
 * block count, no gathers (on Zen 4 this beats two blocks per 512-bit register: 512-bit
 * operations are double-pumped and the pair's scales cost more to build than they save).
 * Super-blocks: codes of at most 63 go through maddubs (int16, no saturation at these sizes)
 * and vpdpwssd against the sub-block scales as int16; IQ4_XS's table values (up to 241 with the
 * offset) through dpbusd times the scales in int32 lanes. A super-block's int32 lanes (each an
 * exact sum) are not reduced: they go to f32 and, times the super-block's scale (d d_a, and
 * dmin d_a for the minimums' lanes), into f32 lane accumulators (as llama.cpp does), summed
 * across lanes once per row. Q4_K/Q5_K keep S's 16 lanes and M's 8 apart, Q6_K takes 32 M off
 * S in lanes; the others fold S to 8 lanes beside M's 8 in one register. With unit scales the
 * result is still a sum of exact integers.
 */
#include "kernels/cpu/qidot.h"

#if SQZ__QMM_X86
#include <immintrin.h>
#include <string.h>

#include "core/dequant.h"

#define VNNI __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")))
#define H2F(h) _cvtsh_ss(h)
#define LD128(p) _mm_loadu_si128((const __m128i *)(const void *)(p))
#define LD256(p) _mm256_loadu_si256((const __m256i *)(const void *)(p))
#define LD512(p) _mm512_loadu_si512((const void *)(p))
#define BCAST256(p) _mm512_broadcast_i64x4(LD256(p))

VNNI static inline float hsum8f(__m256 v) {
    __m128 h = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    h = _mm_add_ps(h, _mm_movehl_ps(h, h));
    return _mm_cvtss_f32(_mm_add_ss(h, _mm_movehdup_ps(h)));
}

/* ---- 32-element blocks: one per 256-bit register ----------------------------------------- */

enum t32 { T_Q8_0, T_Q4_0, T_Q5_0, T_IQ4_NL, T_MXFP4, T_Q4_1, T_Q5_1 };

/* The 32 nibbles at p (low nibbles elements 0..15, high 16..31) as bytes in element order. */
VNNI static inline __m256i nib32(const uint8_t *p) {
    const __m128i b = LD128(p);
    return _mm256_and_si256(_mm256_inserti128_si256(_mm256_castsi128_si256(b), _mm_srli_epi16(b, 4), 1),
                            _mm256_set1_epi8(15));
}

/* The mask of Q5's fifth bits (4 bytes at qh, bit j: element j). */
VNNI static inline __mmask32 bits5(const uint8_t *qh) {
    uint32_t h;
    memcpy(&h, qh, 4);
    return (__mmask32)h;
}

/* sum w x by lanes for signed w (>= -128) and x (>= -127): dpbusd(|w|, x with w's sign), exact. */
VNNI static inline __m256i sdot(__m256i w, __m256i x) {
    return _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_sign_epi8(w, w), _mm256_sign_epi8(x, w));
}

/* sum (u - c) x by lanes for unsigned u: dpbusd(u, x) - dpbusd(c, x), exact. */
VNNI static inline __m256i dot_off(__m256i u, __m256i x, __m256i c) {
    const __m256i z = _mm256_setzero_si256();
    return _mm256_sub_epi32(_mm256_dpbusd_epi32(z, u, x), _mm256_dpbusd_epi32(z, c, x));
}

/* The 8 int32 lane sums of the block at w against the activation codes at x. */
VNNI static inline __m256i blk32(enum t32 t, const uint8_t *w, const int8_t *x, __m256i lut) {
    const __m256i xv = LD256(x);
    switch (t) {
    case T_Q8_0: return sdot(LD256(w + 2), xv);
    case T_Q4_0: return dot_off(nib32(w + 2), xv, _mm256_set1_epi8(8));
    case T_Q5_0: {
        const __m256i u = nib32(w + 6);
        return dot_off(_mm256_mask_add_epi8(u, bits5(w + 2), u, _mm256_set1_epi8(16)), xv, _mm256_set1_epi8(16));
    }
    case T_IQ4_NL: return dot_off(_mm256_shuffle_epi8(lut, nib32(w + 2)), xv, _mm256_set1_epi8((char)0x80));
    case T_MXFP4: return dot_off(_mm256_shuffle_epi8(lut, nib32(w + 1)), xv, _mm256_set1_epi8((char)0x80));
    case T_Q4_1: return _mm256_dpbusd_epi32(_mm256_setzero_si256(), nib32(w + 4), xv);
    default: { /* T_Q5_1 */
        const __m256i u = nib32(w + 8);
        const __m256i q = _mm256_mask_add_epi8(u, bits5(w + 4), u, _mm256_set1_epi8(16));
        return _mm256_dpbusd_epi32(_mm256_setzero_si256(), q, xv);
    }
    }
}

/* acc + the block's lane sums times d_w d_a (w, a: the block and its activation block); with
 * minimums (Q4_1, Q5_1), *ms + m_w s_a. */
VNNI static inline __m256 fma1(enum t32 t, const uint8_t *w, const uint8_t *a, __m256i lut, __m256 acc, float *ms) {
    const int mins = t >= T_Q4_1;
    uint16_t h;
    float da;
    memcpy(&h, w, 2);
    memcpy(&da, a, 4);
    const size_t qo = mins ? offsetof(sqz__aq8_1, qs) : offsetof(sqz__aq8_0, qs);
    const __m256i s = blk32(t, w, (const int8_t *)(a + qo), lut);
    if (t == T_MXFP4) /* the E8M0 exponent: 2^(e - 128) with the doubled E2M1 table */
        return _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_set1_ps(sqz__e8m0_half(w[0]) * da), acc);
    if (mins) {
        float sa;
        memcpy(&h, w + 2, 2);
        memcpy(&sa, a + offsetof(sqz__aq8_1, s), 4);
        *ms += H2F(h) * sa;
        memcpy(&h, w, 2);
    }
    return _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_set1_ps(H2F(h) * da), acc);
}

/* sum over nb blocks of (d_w d_a) s_b (+ m_w s_a: Q4_1, Q5_1): one block per 256-bit register
 * (as llama.cpp), two blocks a step into two accumulators, reduced once. */
VNNI static inline float dot32(enum t32 t, const uint8_t *w, const uint8_t *a, int64_t nb) {
    static const size_t sizes[] = {sizeof(sqz_block_q8_0),   sizeof(sqz_block_q4_0),  sizeof(sqz_block_q5_0),
                                   sizeof(sqz_block_iq4_nl), sizeof(sqz_block_mxfp4), sizeof(sqz_block_q4_1),
                                   sizeof(sqz_block_q5_1)};
    const size_t bs = sizes[t], as = t >= T_Q4_1 ? sizeof(sqz__aq8_1) : sizeof(sqz__aq8_0);
    const int8_t *table = t == T_MXFP4 ? sqz__kvalues_fp4 : sqz__kvalues_iq4nl;
    const __m128i t16 = _mm_xor_si128(LD128(table), _mm_set1_epi8((char)0x80));
    const __m256i lut = _mm256_broadcastsi128_si256(t16); /* IQ4_NL's / MXFP4's table + 128 (unsigned), both halves */
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    float ms0 = 0.0f, ms1 = 0.0f;
    int64_t b = 0;
    for (; b + 2 <= nb; b += 2, w += 2 * bs, a += 2 * as) {
        sqz__idot_ahead(w, 2 * bs);
        acc0 = fma1(t, w, a, lut, acc0, &ms0);
        acc1 = fma1(t, w + bs, a + as, lut, acc1, &ms1);
    }
    if (b < nb) acc0 = fma1(t, w, a, lut, acc0, &ms0);
    return hsum8f(_mm256_add_ps(acc0, acc1)) + (ms0 + ms1);
}

VNNI static float idot_q8_0(const void *row, const void *xq, int64_t k) { return dot32(T_Q8_0, row, xq, k / 32); }
VNNI static float idot_q4_0(const void *row, const void *xq, int64_t k) { return dot32(T_Q4_0, row, xq, k / 32); }
VNNI static float idot_q5_0(const void *row, const void *xq, int64_t k) { return dot32(T_Q5_0, row, xq, k / 32); }
VNNI static float idot_iq4_nl(const void *row, const void *xq, int64_t k) { return dot32(T_IQ4_NL, row, xq, k / 32); }
VNNI static float idot_q4_1(const void *row, const void *xq, int64_t k) { return dot32(T_Q4_1, row, xq, k / 32); }
VNNI static float idot_mxfp4(const void *row, const void *xq, int64_t k) { return dot32(T_MXFP4, row, xq, k / 32); }
VNNI static float idot_q5_1(const void *row, const void *xq, int64_t k) { return dot32(T_Q5_1, row, xq, k / 32); }

/* ---- 256-element super-blocks against Q8_K ------------------------------------------------ */

/* The nibble codes of two blocks (16 bytes at p and p + stride; low nibbles are elements 0..15,
 * high 16..31) in element order: bytes 0..31 the first block, 32..63 the second. */
VNNI static inline __m512i nib2(const uint8_t *p, size_t stride) {
    const __m512i y = _mm512_castsi256_si512(_mm256_inserti128_si256(_mm256_castsi128_si256(LD128(p)),
                                                                     LD128(p + stride), 1));
    const __m512i z = _mm512_shuffle_i64x2(y, y, _MM_SHUFFLE(1, 1, 0, 0)); /* [p, p, p+s, p+s] */
    return _mm512_and_si512(_mm512_srlv_epi64(z, _mm512_set_epi64(4, 4, 0, 0, 4, 4, 0, 0)), _mm512_set1_epi8(15));
}

/* Each super-block gives [s | m] (8 int32 lanes each): s sums to the integer product of the codes
 * as stored (with the sub-block scales), m to the minimums' or the offsets' product with the
 * bsums. */

/* [the 16 lanes of s folded to 8 | m]. */
VNNI static inline __m512i fold_sm(__m512i s, __m256i m) {
    const __m256i s8 = _mm256_add_epi32(_mm512_castsi512_si256(s), _mm512_extracti64x4_epi64(s, 1));
    return _mm512_inserti64x4(_mm512_castsi256_si512(s8), m, 1);
}

/* int16 lanes 0..31 of a register from int16 lanes of t: lane l takes lane first + l / per. */
VNNI static inline __m512i spread16(__m512i t, int first, int per) {
    const __m512i l = _mm512_set_epi16(31, 30, 29, 28, 27, 26, 25, 24, 23, 22, 21, 20, 19, 18, 17, 16, 15, 14, 13,
                                       12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
    const __m512i idx = per == 16 ? _mm512_srli_epi16(l, 4) : _mm512_srli_epi16(l, 3);
    return _mm512_permutexvar_epi16(_mm512_add_epi16(idx, _mm512_set1_epi16((short)first)), t);
}

/* s += sum over 64 codes u (0..63) times activations x, each pair times the int16 scale of its
 * lane (maddubs: at most 2 * 63 * 128 per int16, no saturation). */
VNNI static inline __m512i mac64(__m512i s, __m512i u, const int8_t *x, __m512i sc) {
    return _mm512_dpwssd_epi32(s, _mm512_maddubs_epi16(u, LD512(x)), sc);
}

/* Q4_K's or Q5_K's 8 scales (bytes 0..7) and 8 minimums (8..15) from their 12 bytes at q (16
 * bytes read: the block goes on after them). Scale i < 4: q[i] & 63, minimum i: q[4 + i] & 63;
 * scale 4 + i: q[8 + i] & 15 | (q[i] >> 6) << 4, minimum 4 + i: q[8 + i] >> 4 | (q[4 + i] >> 6) << 4. */
VNNI static inline __m128i k4_scales(const uint8_t *q) {
    const __m128i v = LD128(q);
    const __m128i lo = _mm_shuffle_epi8(v, _mm_setr_epi8(0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, 8, 9, 10, 11));
    const __m128i hi = _mm_shuffle_epi8(v, _mm_setr_epi8(-1, -1, -1, -1, 0, 1, 2, 3, -1, -1, -1, -1, 4, 5, 6, 7));
    const __m128i l = _mm_mask_blend_epi8(0xF000, lo, _mm_srli_epi16(lo, 4)); /* bytes 12..15: the high nibbles */
    const __m128i keep = _mm_setr_epi32(0x3f3f3f3f, 0x0f0f0f0f, 0x3f3f3f3f, 0x0f0f0f0f);
    const __m128i h = _mm_and_si128(_mm_srli_epi16(hi, 2), _mm_set1_epi8(0x30)); /* bits 6, 7 to 4, 5 */
    return _mm_ternarylogic_epi32(l, keep, h, 0xEA); /* (l & keep) | h */
}

/* Q4_K / Q5_K (qh: the fifth bits, NULL for Q4_K): sub-blocks of 32, bytes 32j.. of qs hold
 * sub-block 2j in the low nibbles and 2j + 1 in the high ones. Returns the 16 int32 lanes of S
 * (the codes with their scales); *m: the 8 lanes of M (the minimums times the bsums). */
VNNI static inline __m512i sb_q45k(const uint8_t *scales, const uint8_t *qs, const uint8_t *qh, const sqz__aq8_K *a,
                                   __m256i *m) {
    const __m256i sc16 = _mm256_cvtepu8_epi16(k4_scales(scales)); /* 8 scales, 8 minimums */
    const __m512i sc = _mm512_castsi256_si512(sc16), m4 = _mm512_set1_epi8(15);
    const __m512i hh = qh ? BCAST256(qh) : _mm512_setzero_si512(), c16 = _mm512_set1_epi8(16);
    __m512i s = _mm512_setzero_si512();
    SQZ__UNROLL(4)
    for (int j = 0; j < 4; j++) {
        const __m512i sh = _mm512_set_epi64(4, 4, 4, 4, 0, 0, 0, 0);
        __m512i u = _mm512_and_si512(_mm512_srlv_epi64(BCAST256(qs + 32 * j), sh), m4);
        if (qh) { /* bit i of qh[l]: element l of sub-block i */
            const __m512i bits = _mm512_inserti64x4(_mm512_set1_epi8((char)(1 << 2 * j)),
                                                    _mm256_set1_epi8((char)(2 << 2 * j)), 1);
            u = _mm512_mask_add_epi8(u, _mm512_test_epi8_mask(hh, bits), u, c16);
        }
        s = mac64(s, u, a->qs + 64 * j, spread16(sc, 2 * j, 16));
    }
    /* minimum j (int16 lane 8 + j) against the two sums of 16 of sub-block j */
    const __m256i dup = _mm256_setr_epi16(8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13, 14, 14, 15, 15);
    *m = _mm256_madd_epi16(LD256(a->bsums), _mm256_permutexvar_epi16(dup, sc16));
    return s;
}

/* Q4_K / Q5_K rows: sum over nb super-blocks (bs bytes; qs at qso, qh at qho or none) of
 * (d d_a) S - (dmin d_a) M, S's and M's int32 lanes (exact) into f32 lane accumulators. */
VNNI static inline float dot_q45k(const uint8_t *w, const sqz__aq8_K *a, int64_t nb, size_t bs, int qso, int qho) {
    __m512 acc = _mm512_setzero_ps();
    __m256 accm = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++, w += bs) {
        sqz__idot_ahead(w, bs);
        __m256i m;
        const __m512i s = sb_q45k(w + 4, w + qso, qho ? w + qho : NULL, &a[b], &m);
        uint16_t h[2];
        memcpy(h, w, 4);
        acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_set1_ps(H2F(h[0]) * a[b].d), acc);
        accm = _mm256_fmadd_ps(_mm256_cvtepi32_ps(m), _mm256_set1_ps(H2F(h[1]) * a[b].d), accm);
    }
    return _mm512_reduce_add_ps(acc) - hsum8f(accm);
}

/* Q6_K: codes q (0..63; m: the offset 32's product, scales times bsums) in 16-element
 * sub-blocks with int8 scales; element 128h + 32j + l: ql[64h + 32(j%2) + l], qh[32h + l] >> 2j. */
VNNI static inline __m512i sb_q6_K(const sqz_block_q6_K *w, const sqz__aq8_K *a) {
    const __m512i m4 = _mm512_set1_epi8(15), m30 = _mm512_set1_epi8(0x30);
    const __m256i sc16 = _mm256_cvtepi8_epi16(LD128(w->scales));
    const __m512i sc = _mm512_castsi256_si512(sc16);
    __m512i s = _mm512_setzero_si512();
    SQZ__UNROLL(2)
    for (int h = 0; h < 2; h++) {
        const __m512i l = LD512(w->ql + 64 * h), qh = BCAST256(w->qh + 32 * h);
        const __m512i hA = _mm512_and_si512(_mm512_sllv_epi64(qh, _mm512_set_epi64(2, 2, 2, 2, 4, 4, 4, 4)), m30);
        const __m512i hB = _mm512_and_si512(_mm512_srlv_epi64(qh, _mm512_set_epi64(2, 2, 2, 2, 0, 0, 0, 0)), m30);
        const __m512i uA = _mm512_ternarylogic_epi32(l, m4, hA, 0xEA); /* (l & 15) | hA: j = 0, 1 */
        const __m512i uB = _mm512_ternarylogic_epi32(_mm512_srli_epi16(l, 4), m4, hB, 0xEA); /* j = 2, 3 */
        s = mac64(s, uA, a->qs + 128 * h, spread16(sc, 8 * h, 8));
        s = mac64(s, uB, a->qs + 128 * h + 64, spread16(sc, 8 * h + 4, 8));
    }
    return s;
}

/* Q6_K rows: sum over nb super-blocks of (d d_a) (S - 32 M), M the scales times the bsums; the
 * exact int32 lanes of S - 32 M into f32 lane accumulators. */
VNNI static inline float dot_q6k(const sqz_block_q6_K *w, const sqz__aq8_K *a, int64_t nb) {
    __m512 acc = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        sqz__idot_ahead(&w[b], sizeof w[b]);
        const __m256i m = _mm256_madd_epi16(LD256(a[b].bsums), _mm256_cvtepi8_epi16(LD128(w[b].scales)));
        const __m512i v = _mm512_sub_epi32(sb_q6_K(&w[b], &a[b]), _mm512_zextsi256_si512(_mm256_slli_epi32(m, 5)));
        acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(v), _mm512_set1_ps(H2F(w[b].d) * a[b].d), acc);
    }
    return _mm512_reduce_add_ps(acc);
}

/* Q2_K and Q3_K (hmask: the third bits; u = q + 4 in 0..7): the 2-bit codes of element
 * 128h + 32j + l are bits 2j of qs[32h + l]. sc: the 16 int16 scales. */
VNNI static inline __m512i k2bits(const uint8_t *qs, const uint8_t *hmask, __m512i sc, const int8_t *x) {
    const __m512i m3 = _mm512_set1_epi8(3), hm = hmask ? BCAST256(hmask) : _mm512_setzero_si512();
    __m512i s = _mm512_setzero_si512();
    SQZ__UNROLL(4)
    for (int z = 0; z < 4; z++) { /* elements 64z..: j = 2(z%2) in bytes 0..31, j + 1 in 32..63 */
        const int j = 2 * (z % 2);
        const __m512i sh = _mm512_set_epi64(2 * j + 2, 2 * j + 2, 2 * j + 2, 2 * j + 2, 2 * j, 2 * j, 2 * j, 2 * j);
        __m512i u = _mm512_and_si512(_mm512_srlv_epi64(BCAST256(qs + 32 * (z / 2)), sh), m3);
        if (hmask) { /* bit i of hmask[l]: element 32i + l */
            const __m512i bits = _mm512_inserti64x4(_mm512_set1_epi8((char)(1 << 2 * z)),
                                                    _mm256_set1_epi8((char)(2 << 2 * z)), 1);
            u = _mm512_mask_add_epi8(u, _mm512_test_epi8_mask(hm, bits), u, _mm512_set1_epi8(4));
        }
        s = mac64(s, u, x + 64 * z, spread16(sc, 4 * z, 8));
    }
    return s;
}

/* Q2_K: scales in the low nibbles, minimums in the high ones (m: minimums times bsums). */
VNNI static inline __m512i sb_q2_K(const sqz_block_q2_K *w, const sqz__aq8_K *a) {
    const __m128i raw = LD128(w->scales), m4 = _mm_set1_epi8(15);
    const __m256i sc = _mm256_cvtepu8_epi16(_mm_and_si128(raw, m4));
    const __m256i mn = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(raw, 4), m4));
    const __m512i s = k2bits(w->qs, NULL, _mm512_castsi256_si512(sc), a->qs);
    return fold_sm(s, _mm256_madd_epi16(LD256(a->bsums), mn));
}

/* Q3_K's 16 scales (6 bits, offset 32 taken off) from their 12 bytes, as int8. */
VNNI static inline __m128i q3k_scales(const uint8_t *p) {
    uint32_t u[3];
    memcpy(u, p, 12);
    const uint32_t k1 = 0x03030303, k2 = 0x0f0f0f0f, t = u[2];
    const __m128i v = _mm_setr_epi32((int)((u[0] & k2) | ((t & k1) << 4)), (int)((u[1] & k2) | (((t >> 2) & k1) << 4)),
                                     (int)(((u[0] >> 4) & k2) | (((t >> 4) & k1) << 4)),
                                     (int)(((u[1] >> 4) & k2) | (((t >> 6) & k1) << 4)));
    return _mm_sub_epi8(v, _mm_set1_epi8(32));
}

/* Q3_K (m: the offset 4's product, scales times bsums). */
VNNI static inline __m512i sb_q3_K(const sqz_block_q3_K *w, const sqz__aq8_K *a) {
    const __m256i sc = _mm256_cvtepi8_epi16(q3k_scales(w->scales));
    const __m512i s = k2bits(w->qs, w->hmask, _mm512_castsi256_si512(sc), a->qs);
    return fold_sm(s, _mm256_madd_epi16(LD256(a->bsums), sc));
}

/* The 8 4-bit values of 4 bytes (low nibble first) as int16 lanes. */
VNNI static inline __m128i nibs8(const uint8_t *p) {
    uint32_t v;
    memcpy(&v, p, 4);
    const __m128i x = _mm_cvtsi32_si128((int)v), m4 = _mm_set1_epi8(15);
    return _mm_cvtepu8_epi16(_mm_unpacklo_epi8(_mm_and_si128(x, m4), _mm_and_si128(_mm_srli_epi16(x, 4), m4)));
}

/* [v0, v0, v1, v1, ..., v7, v7] of 8 int16 lanes: per sub-block of 32, one for each bsum. */
VNNI static inline __m256i dup16(__m128i v) {
    return _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_unpacklo_epi16(v, v)), _mm_unpackhi_epi16(v, v), 1);
}

/* IQ4_XS: table values + 128 (1..241) by dpbusd, times the scales (ls - 32) as int32 lanes
 * (m: the offset 128's product, scales times bsums). */
VNNI static inline __m512i sb_iq4_xs(const sqz_block_iq4_xs *w, const sqz__aq8_K *a, __m512i lut) {
    const __m128i sh = _mm_setr_epi16(0, 2, 4, 6, 8, 10, 12, 14); /* scale i's high bits: 2i of scales_h */
    const __m128i hi = _mm_and_si128(_mm_srlv_epi16(_mm_set1_epi16((short)w->scales_h), sh), _mm_set1_epi16(3));
    const __m128i ls = _mm_sub_epi16(_mm_or_si128(nibs8(w->scales_l), _mm_slli_epi16(hi, 4)), _mm_set1_epi16(32));
    const __m512i ls32 = _mm512_castsi256_si512(_mm256_cvtepi16_epi32(ls));
    __m512i s = _mm512_setzero_si512();
    SQZ__UNROLL(4)
    for (int z = 0; z < 4; z++) { /* sub-blocks 2z, 2z + 1 */
        const __m512i u = _mm512_shuffle_epi8(lut, nib2(w->qs + 32 * z, 16));
        const __m512i t = _mm512_dpbusd_epi32(_mm512_setzero_si512(), u, LD512(a->qs + 64 * z));
        const __m512i half = _mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);
        const __m512i f = _mm512_permutexvar_epi32(_mm512_add_epi32(half, _mm512_set1_epi32(2 * z)), ls32);
        s = _mm512_add_epi32(s, _mm512_mullo_epi32(t, f));
    }
    return fold_sm(s, _mm256_madd_epi16(LD256(a->bsums), dup16(ls)));
}

/* IQ3_S: magnitudes gathered from the grid (16 groups of 4 per register), u = 16 +- magnitude
 * (1..31); scales 2 s + 1 as int16 (m: the offset 16's product, scales times bsums). */
VNNI static inline __m512i sb_iq3_s(const sqz_block_iq3_s *w, const sqz__aq8_K *a) {
    const __m512i c16 = _mm512_set1_epi8(16), c256 = _mm512_set1_epi32(256);
    const __m128i ls = _mm_add_epi16(_mm_slli_epi16(nibs8(w->scales), 1), _mm_set1_epi16(1));
    const __m512i sc = _mm512_castsi128_si512(ls);
    __m512i s = _mm512_setzero_si512();
    SQZ__UNROLL(4)
    for (int z = 0; z < 4; z++) { /* sub-blocks 2z, 2z + 1: groups qs[16z..16z + 15] */
        uint16_t h;
        uint64_t sg;
        memcpy(&h, w->qh + 2 * z, 2);
        memcpy(&sg, w->signs + 8 * z, 8);
        __m512i idx = _mm512_cvtepu8_epi32(LD128(w->qs + 16 * z));
        idx = _mm512_mask_or_epi32(idx, (__mmask16)h, idx, c256);
        const __m512i mag = _mm512_i32gather_epi32(idx, (const void *)sqz__iq3s_grid, 4);
        const __m512i u = _mm512_mask_sub_epi8(_mm512_add_epi8(mag, c16), (__mmask64)sg, c16, mag);
        s = mac64(s, u, a->qs + 64 * z, spread16(sc, 2 * z, 16));
    }
    return fold_sm(s, _mm256_madd_epi16(LD256(a->bsums), dup16(ls)));
}

enum tk { K_Q2, K_Q3, K_Q4, K_Q5, K_Q6, K_IQ4_XS, K_IQ3_S };

VNNI static inline __m512i superblock(enum tk t, const uint8_t *w, const sqz__aq8_K *a, __m512i lut) {
    switch (t) {
    case K_Q2: return sb_q2_K((const sqz_block_q2_K *)(const void *)w, a);
    case K_Q3: return sb_q3_K((const sqz_block_q3_K *)(const void *)w, a);
    case K_IQ4_XS: return sb_iq4_xs((const sqz_block_iq4_xs *)(const void *)w, a, lut);
    default: return sb_iq3_s((const sqz_block_iq3_s *)(const void *)w, a);
    }
}

/* sum over nb super-blocks of (d d_a) S - (dmin d_a) M where the type has minimums (shift < 0),
 * else (d d_a) (S - M << shift); d at dofs in each block (bs bytes), dmin after it. Each
 * super-block's [S | M] int32 lanes (exact) go to f32 and into f32 lane accumulators, times
 * [d d_a | dmin d_a]: lanes 0..7 sum the terms of S, 8..15 those of M. */
VNNI static inline float dotK(enum tk t, const uint8_t *w, const sqz__aq8_K *a, int64_t nb) {
    static const size_t sizes[] = {sizeof(sqz_block_q2_K), sizeof(sqz_block_q3_K), sizeof(sqz_block_q4_K),
                                   sizeof(sqz_block_q5_K), sizeof(sqz_block_q6_K), sizeof(sqz_block_iq4_xs),
                                   sizeof(sqz_block_iq3_s)};
    static const int dofs[] = {offsetof(sqz_block_q2_K, d), offsetof(sqz_block_q3_K, d), 0, 0,
                               offsetof(sqz_block_q6_K, d), 0, 0};
    static const int shift[] = {-1, 2, -1, -1, 5, 7, 4}; /* the offsets 4, 32, 128, 16 */
    const size_t bs = sizes[t];
    /* IQ4_XS's table + 128 (unsigned), in each 128-bit chunk */
    const __m512i lut = _mm512_broadcast_i32x4(_mm_xor_si128(LD128(sqz__kvalues_iq4nl), _mm_set1_epi8((char)0x80)));
    __m512 acc = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; b++, w += bs) {
        sqz__idot_ahead(w, bs);
        __m512i v = superblock(t, w, &a[b], lut);
        uint16_t hd, hm = 0;
        memcpy(&hd, w + dofs[t], 2);
        if (shift[t] >= 0) /* S - M << shift in lanes 0..7, M = 0 */
            v = _mm512_maskz_sub_epi32(0x00FF, v, _mm512_slli_epi32(_mm512_shuffle_i64x2(v, v, _MM_SHUFFLE(1, 0, 3, 2)), (unsigned)shift[t]));
        else
            memcpy(&hm, w + dofs[t] + 2, 2);
        const __m512 sv = _mm512_mask_blend_ps(0xFF00, _mm512_set1_ps(H2F(hd) * a[b].d), _mm512_set1_ps(H2F(hm) * a[b].d));
        acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(v), sv, acc);
    }
    return hsum8f(_mm512_castps512_ps256(acc)) - hsum8f(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(acc), 1)));
}

#define IDOT_K(name, t) \
    VNNI static float idot_##name(const void *row, const void *xq, int64_t k) { return dotK(t, row, xq, k / 256); }
IDOT_K(q2_K, K_Q2)
IDOT_K(q3_K, K_Q3)
VNNI static float idot_q4_K(const void *row, const void *xq, int64_t k) {
    return dot_q45k(row, xq, k / 256, sizeof(sqz_block_q4_K), offsetof(sqz_block_q4_K, qs), 0);
}
VNNI static float idot_q5_K(const void *row, const void *xq, int64_t k) {
    return dot_q45k(row, xq, k / 256, sizeof(sqz_block_q5_K), offsetof(sqz_block_q5_K, qs), offsetof(sqz_block_q5_K, qh));
}
VNNI static float idot_q6_K(const void *row, const void *xq, int64_t k) { return dot_q6k(row, xq, k / 256); }
IDOT_K(iq4_xs, K_IQ4_XS)
IDOT_K(iq3_s, K_IQ3_S)

const sqz__idot_fn sqz__idot_vnni[SQZ_DTYPE_COUNT] = {
    [SQZ_DTYPE_Q8_0] = idot_q8_0,   [SQZ_DTYPE_Q4_0] = idot_q4_0,     [SQZ_DTYPE_Q4_1] = idot_q4_1,
    [SQZ_DTYPE_Q5_0] = idot_q5_0,   [SQZ_DTYPE_Q5_1] = idot_q5_1,     [SQZ_DTYPE_IQ4_NL] = idot_iq4_nl,
    [SQZ_DTYPE_Q2_K] = idot_q2_K,   [SQZ_DTYPE_Q3_K] = idot_q3_K,     [SQZ_DTYPE_Q4_K] = idot_q4_K,
    [SQZ_DTYPE_Q5_K] = idot_q5_K,   [SQZ_DTYPE_Q6_K] = idot_q6_K,     [SQZ_DTYPE_IQ4_XS] = idot_iq4_xs,
    [SQZ_DTYPE_IQ3_S] = idot_iq3_s,
    [SQZ_DTYPE_MXFP4] = idot_mxfp4,
};
#else
typedef int sqz__qidot_vnni_empty; /* ISO C: a translation unit is not empty */
#endif

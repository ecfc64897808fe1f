/*
 * kernels/cpu/qidot4_vnni.c - the 4-token integer products of qidot.h with AVX-512 VNNI: one
 * weight row against 4 activation rows (prompts, perplexity), each weight block decoded once
 * (nibbles, fifth bits, sub-block scales) and multiplied against the 4 rows, 4 sets of
 * accumulators. The helpers follow qidot_vnni.c's (the one-token kernels); every integer sum is
 * the scalar reference's (qidot_ref.c) bit for bit, only the f32 sums are in another order.
 *
 * 32-element blocks: the weights' side is signed here (Q8_0 as stored, Q4_0 q - 8, Q5_0 q - 16,
 * IQ4_NL the table) and the activations made unsigned: dpbusd(x + 128, w) = sum x w + 128 sum w,
 * the second term (weights only) taken off once for the 4 rows by starting each row's
 * accumulator at -128 sum w. Q4_1 / Q5_1's codes are unsigned: dpbusd(q, x) directly. Eight
 * blocks per step, reduced per row to 8 block sums (hsum4x2) times the scales as in
 * qidot_vnni.c; blocks past the last group of 8 take its one-token kernel, token by token.
 * Super-blocks: codes of at most 63 through maddubs and vpdpwssd against the int16 sub-block
 * scales (per row: a load, maddubs, dpwssd per 64 codes); an offset's product (Q3_K 4, Q6_K 32,
 * IQ3_S 16) is taken off in the same int32 lanes by one more dpwssd of the row's bsums with the
 * scales times -offset; the minimums (Q2_K, Q4_K, Q5_K) against the bsums in their own lanes.
 * IQ4_XS: signed table values against x + 128 (as the 32-blocks), times the scales in int32.
 * The 4 rows' super-block sums are reduced together (one hsum4x2: [S0..S3 | M0..M3]), and
 * each term formed as the reference forms it: (d d_a) (float)S, (dmin d_a) (float)M.
 */
#include "kernels/cpu/qidot.h"

#if SQZ__QMM_X86
#include <immintrin.h>
#include <string.h>

#include "core/dequant.h"

#define VNNI __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")))
#define INL VNNI static inline __attribute__((always_inline))
#define H2F(h) _cvtsh_ss(h)
#define LD128(p) _mm_loadu_si128((const __m128i *)(const void *)(p))
#define LD256(p) _mm256_loadu_si256((const __m256i *)(const void *)(p))
#define LD512(p) _mm512_loadu_si512((const void *)(p))
#define BCAST256(p) _mm512_broadcast_i64x4(LD256(p))
/* Row r's activation block at byte offset a (rows st bytes apart). */
#define AK(a, r, st) ((const sqz__aq8_K *)(const void *)((a) + (size_t)(r) * (st)))

/* ---- shared helpers (as qidot_vnni.c's) -------------------------------------------------- */

/* The 32 bytes at p and at p + stride as one register. */
INL __m512i ld2x32(const void *p, size_t stride) {
    const uint8_t *b = p;
    return _mm512_inserti64x4(_mm512_castsi256_si512(LD256(b)), LD256(b + stride), 1);
}

/* The nibble codes of two blocks (16 bytes at p and p + stride) in element order. */
INL __m512i nib2(const uint8_t *p, size_t stride) {
    const __m512i y = _mm512_castsi256_si512(_mm256_inserti128_si256(_mm256_castsi128_si256(LD128(p)),
                                                                     LD128(p + stride), 1));
    const __m512i z = _mm512_shuffle_i64x2(y, y, _MM_SHUFFLE(1, 1, 0, 0)); /* [p, p, p+s, p+s] */
    return _mm512_and_si512(_mm512_srlv_epi64(z, _mm512_set_epi64(4, 4, 0, 0, 4, 4, 0, 0)), _mm512_set1_epi8(15));
}

/* Q5's fifth bits (4 bytes at qh and qh + stride, bit j: element j) added as 16. */
INL __m512i five2(__m512i u, const uint8_t *qh, size_t stride) {
    uint32_t h0, h1;
    memcpy(&h0, qh, 4);
    memcpy(&h1, qh + stride, 4);
    return _mm512_mask_add_epi8(u, (__mmask64)h0 | (__mmask64)h1 << 32, u, _mm512_set1_epi8(16));
}

/* The lane sums of each 256-bit half of v0..v3, in the order v0.lo, v1.lo, v2.lo, v3.lo,
 * v0.hi, v1.hi, v2.hi, v3.hi. */
INL __m256i hsum4x2(__m512i v0, __m512i v1, __m512i v2, __m512i v3) {
    const __m512i a = _mm512_add_epi32(_mm512_unpacklo_epi32(v0, v1), _mm512_unpackhi_epi32(v0, v1));
    const __m512i b = _mm512_add_epi32(_mm512_unpacklo_epi32(v2, v3), _mm512_unpackhi_epi32(v2, v3));
    const __m512i c = _mm512_add_epi32(_mm512_unpacklo_epi64(a, b), _mm512_unpackhi_epi64(a, b));
    const __m512i d = _mm512_add_epi32(c, _mm512_shuffle_i64x2(c, c, _MM_SHUFFLE(2, 3, 0, 1)));
    return _mm512_castsi512_si256(_mm512_shuffle_i64x2(d, d, _MM_SHUFFLE(2, 0, 2, 0)));
}

/* The byte offsets of the 8 blocks of a group in hsum4x2's order (blocks 0, 2, 4, 6, 1, 3, 5, 7). */
INL __m256i order8(int bytes) {
    return _mm256_mullo_epi32(_mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7), _mm256_set1_epi32(bytes));
}

INL __m256 gather_h(const uint8_t *p, __m256i off) {
    const __m256i h = _mm256_i32gather_epi32((const int *)(const void *)p, off, 1);
    return _mm256_cvtph_ps(_mm256_cvtepi32_epi16(h));
}

INL __m256 gather_f(const uint8_t *p, __m256i off) {
    return _mm256_i32gather_ps((const float *)(const void *)p, off, 1);
}

INL float hsum8f(__m256 v) {
    __m128 h = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    h = _mm_add_ps(h, _mm_movehl_ps(h, h));
    return _mm_cvtss_f32(_mm_add_ss(h, _mm_movehdup_ps(h)));
}

/* ---- 32-element blocks ------------------------------------------------------------------- */

enum t32 { T_Q8_0, T_Q4_0, T_Q5_0, T_IQ4_NL, T_Q4_1, T_Q5_1 };

/* The codes of blocks w[0], w[1] (bs bytes each): signed values (Q8_0, Q4_0, Q5_0, IQ4_NL; lut:
 * the IQ4_NL table in each 128-bit chunk) or unsigned ones (Q4_1, Q5_1). */
INL __m512i wpair(enum t32 t, const uint8_t *w, size_t bs, __m512i lut) {
    switch (t) {
    case T_Q8_0: return ld2x32(w + 2, bs);
    case T_Q4_0: return _mm512_sub_epi8(nib2(w + 2, bs), _mm512_set1_epi8(8));
    case T_Q5_0: return _mm512_sub_epi8(five2(nib2(w + 6, bs), w + 2, bs), _mm512_set1_epi8(16));
    case T_IQ4_NL: return _mm512_shuffle_epi8(lut, nib2(w + 2, bs));
    case T_Q4_1: return nib2(w + 4, bs);
    default: return five2(nib2(w + 8, bs), w + 4, bs); /* T_Q5_1 */
    }
}

/* out[r] = sum over nb blocks of (d_w d_a) s_b (+ m_w s_a: Q4_1, Q5_1) for the rows at a + r st. */
INL void dot32x4(enum t32 t, const uint8_t *w, const uint8_t *a, size_t st, int64_t nb,
                                float *out) {
    static const size_t sizes[] = {sizeof(sqz_block_q8_0), sizeof(sqz_block_q4_0), sizeof(sqz_block_q5_0),
                                   sizeof(sqz_block_iq4_nl), sizeof(sqz_block_q4_1), sizeof(sqz_block_q5_1)};
    const size_t bs = sizes[t], as = t >= T_Q4_1 ? sizeof(sqz__aq8_1) : sizeof(sqz__aq8_0);
    const size_t qo = t >= T_Q4_1 ? offsetof(sqz__aq8_1, qs) : offsetof(sqz__aq8_0, qs);
    const __m256i ow = order8((int)bs), oa = order8((int)as);
    const __m512i lut = _mm512_broadcast_i32x4(LD128(sqz__kvalues_iq4nl)), c80 = _mm512_set1_epi8((char)0x80);
    const __m512i z = _mm512_setzero_si512();
    __m256 acc[4], accm[4];
    SQZ__UNROLL(4)
    for (int r = 0; r < 4; r++) acc[r] = accm[r] = _mm256_setzero_ps();
    int64_t b = 0;
    for (; b + 8 <= nb; b += 8, w += 8 * bs, a += 8 * as) {
        sqz__idot_ahead(w, 8 * bs);
        __m512i p[4][4]; /* [row][pair] */
        SQZ__UNROLL(4)
        for (int i = 0; i < 4; i++) {
            const __m512i ws = wpair(t, w + 2 * i * bs, bs, lut);
            const uint8_t *x = a + 2 * i * as + qo;
            if (t >= T_Q4_1) {
                SQZ__UNROLL(4)
                for (int r = 0; r < 4; r++) p[r][i] = _mm512_dpbusd_epi32(z, ws, ld2x32(x + r * st, as));
            } else { /* dpbusd(x + 128, w) - 128 sum w */
                const __m512i nc = _mm512_sub_epi32(z, _mm512_dpbusd_epi32(z, c80, ws));
                SQZ__UNROLL(4)
                for (int r = 0; r < 4; r++)
                    p[r][i] = _mm512_dpbusd_epi32(nc, _mm512_xor_si512(ld2x32(x + r * st, as), c80), ws);
            }
        }
        const __m256 dw = gather_h(w, ow);
        SQZ__UNROLL(4)
        for (int r = 0; r < 4; r++) {
            const __m256i s = hsum4x2(p[r][0], p[r][1], p[r][2], p[r][3]);
            const __m256 dd = _mm256_mul_ps(dw, gather_f(a + r * st, oa));
            acc[r] = _mm256_add_ps(acc[r], _mm256_mul_ps(dd, _mm256_cvtepi32_ps(s)));
        }
        if (t >= T_Q4_1) {
            const __m256 mw = gather_h(w + 2, ow);
            SQZ__UNROLL(4)
            for (int r = 0; r < 4; r++)
                accm[r] = _mm256_add_ps(accm[r], _mm256_mul_ps(mw, gather_f(a + r * st + offsetof(sqz__aq8_1, s), oa)));
        }
    }
    /* the last 1..7 blocks: the one-token VNNI kernel per token (the same integers) */
    static const sqz_dtype dt[] = {SQZ_DTYPE_Q8_0, SQZ_DTYPE_Q4_0, SQZ_DTYPE_Q5_0,
                                   SQZ_DTYPE_IQ4_NL, SQZ_DTYPE_Q4_1, SQZ_DTYPE_Q5_1};
    const sqz__idot_fn tail = sqz__idot_vnni[dt[t]];
    SQZ__UNROLL(4)
    for (int r = 0; r < 4; r++) {
        out[r] = hsum8f(_mm256_add_ps(acc[r], accm[r]));
        if (b < nb) out[r] += tail(w, a + r * st, 32 * (nb - b));
    }
}

#define IDOT4_32(name, t)                                                                          \
    VNNI static void idot4_##name(const void *row, const void *xq, size_t stride, int64_t k, float *out) { \
        dot32x4(t, row, xq, stride, k / 32, out);                                                   \
    }
IDOT4_32(q8_0, T_Q8_0)
IDOT4_32(q4_0, T_Q4_0)
IDOT4_32(q5_0, T_Q5_0)
IDOT4_32(iq4_nl, T_IQ4_NL)
IDOT4_32(q4_1, T_Q4_1)
IDOT4_32(q5_1, T_Q5_1)

/* ---- 256-element super-blocks against Q8_K --------------------------------------------------- */

/* int16 lanes 0..31 of a register from int16 lanes of t: lane l takes lane first + l / per. */
INL __m512i spread16(__m512i t, int first, int per) {
    const __m512i l = _mm512_set_epi16(31, 30, 29, 28, 27, 26, 25, 24, 23, 22, 21, 20, 19, 18, 17, 16, 15, 14, 13,
                                       12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
    const __m512i idx = per == 16 ? _mm512_srli_epi16(l, 4) : _mm512_srli_epi16(l, 3);
    return _mm512_permutexvar_epi16(_mm512_add_epi16(idx, _mm512_set1_epi16((short)first)), t);
}

/* s[r] += the 64 codes u (0..63) times row r's activations at x + r st, each pair times the
 * int16 scale of its lane (maddubs: at most 2 * 63 * 128 per int16, no saturation). */
INL void mac64x4(__m512i s[4], __m512i u, const int8_t *x, size_t st, __m512i sc) {
    SQZ__UNROLL(4)
    for (int r = 0; r < 4; r++)
        s[r] = _mm512_dpwssd_epi32(s[r], _mm512_maddubs_epi16(u, LD512(x + (size_t)r * st)), sc);
}

/* s[r] = the offset's product of row r: its 16 bsums times neg (the 16 scales times -offset). */
INL void offset4(__m512i s[4], const uint8_t *a, size_t st, __m256i neg) {
    const __m512i n = _mm512_zextsi256_si512(neg);
    SQZ__UNROLL(4)
    for (int r = 0; r < 4; r++)
        s[r] = _mm512_dpwssd_epi32(_mm512_setzero_si512(), _mm512_zextsi256_si512(LD256(AK(a, r, st)->bsums)), n);
}

/* [S0..S3 | 0]: the lane sums of s[0..3]. */
INL __m256i sums4(const __m512i s[4]) {
    const __m256i h = hsum4x2(s[0], s[1], s[2], s[3]);
    return _mm256_zextsi128_si256(_mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1)));
}

/* [S0..S3 | M0..M3]: the lane sums of s[r] and of the minimums' products m[r]. */
INL __m256i sums4m(const __m512i s[4], const __m256i m[4]) {
    __m512i v[4];
    SQZ__UNROLL(4)
    for (int r = 0; r < 4; r++) {
        const __m256i s8 = _mm256_add_epi32(_mm512_castsi512_si256(s[r]), _mm512_extracti64x4_epi64(s[r], 1));
        v[r] = _mm512_inserti64x4(_mm512_castsi256_si512(s8), m[r], 1);
    }
    return hsum4x2(v[0], v[1], v[2], v[3]);
}

/* Q4_K's or Q5_K's 8 scales (bytes 0..7) and 8 minimums (8..15) from their 12 bytes. */
INL __m128i k4_scales(const uint8_t *q) {
    uint32_t u[3];
    memcpy(u, q, 12);
    const uint32_t k1 = 0x3f3f3f3f, k2 = 0x0f0f0f0f, k3 = 0x03030303;
    return _mm_setr_epi32((int)(u[0] & k1), (int)((u[2] & k2) | (((u[0] >> 6) & k3) << 4)), (int)(u[1] & k1),
                          (int)(((u[2] >> 4) & k2) | (((u[1] >> 6) & k3) << 4)));
}

/* Q4_K / Q5_K (qh: the fifth bits, NULL for Q4_K). */
INL __m256i sb_q45k(const uint8_t *scales, const uint8_t *qs, const uint8_t *qh, const uint8_t *a,
                                   size_t st) {
    const __m128i sm = k4_scales(scales);
    const __m512i sc = _mm512_castsi256_si512(_mm256_cvtepu8_epi16(sm)), m4 = _mm512_set1_epi8(15);
    const __m512i hh = qh ? BCAST256(qh) : _mm512_setzero_si512(), c16 = _mm512_set1_epi8(16);
    __m512i s[4] = {_mm512_setzero_si512(), _mm512_setzero_si512(), _mm512_setzero_si512(), _mm512_setzero_si512()};
    SQZ__UNROLL(4)
    for (int j = 0; j < 4; j++) {
        const __m512i sh = _mm512_set_epi64(4, 4, 4, 4, 0, 0, 0, 0);
        __m512i u = _mm512_and_si512(_mm512_srlv_epi64(BCAST256(qs + 32 * j), sh), m4);
        if (qh) { /* bit i of qh[l]: element l of sub-block i */
            const __m512i bits = _mm512_inserti64x4(_mm512_set1_epi8((char)(1 << 2 * j)),
                                                    _mm256_set1_epi8((char)(2 << 2 * j)), 1);
            u = _mm512_mask_add_epi8(u, _mm512_test_epi8_mask(hh, bits), u, c16);
        }
        mac64x4(s, u, AK(a, 0, st)->qs + 64 * j, st, spread16(sc, 2 * j, 16));
    }
    const __m128i dup = _mm_setr_epi8(8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13, 14, 14, 15, 15);
    const __m256i mins = _mm256_cvtepu8_epi16(_mm_shuffle_epi8(sm, dup));
    __m256i m[4];
    SQZ__UNROLL(4)
    for (int r = 0; r < 4; r++) m[r] = _mm256_madd_epi16(LD256(AK(a, r, st)->bsums), mins);
    return sums4m(s, m);
}

/* Q6_K: codes q + 32 (0..63), the offset 32 through the bsums. */
INL __m256i sb_q6_K(const sqz_block_q6_K *w, const uint8_t *a, size_t st) {
    const __m512i m4 = _mm512_set1_epi8(15), m30 = _mm512_set1_epi8(0x30);
    const __m256i sc16 = _mm256_cvtepi8_epi16(LD128(w->scales));
    const __m512i sc = _mm512_castsi256_si512(sc16);
    __m512i s[4];
    offset4(s, a, st, _mm256_sub_epi16(_mm256_setzero_si256(), _mm256_slli_epi16(sc16, 5)));
    SQZ__UNROLL(2)
    for (int h = 0; h < 2; h++) {
        const __m512i l = LD512(w->ql + 64 * h), qh = BCAST256(w->qh + 32 * h);
        const __m512i hA = _mm512_and_si512(_mm512_sllv_epi64(qh, _mm512_set_epi64(2, 2, 2, 2, 4, 4, 4, 4)), m30);
        const __m512i hB = _mm512_and_si512(_mm512_srlv_epi64(qh, _mm512_set_epi64(2, 2, 2, 2, 0, 0, 0, 0)), m30);
        const __m512i uA = _mm512_ternarylogic_epi32(l, m4, hA, 0xEA); /* (l & 15) | hA: j = 0, 1 */
        const __m512i uB = _mm512_ternarylogic_epi32(_mm512_srli_epi16(l, 4), m4, hB, 0xEA); /* j = 2, 3 */
        mac64x4(s, uA, AK(a, 0, st)->qs + 128 * h, st, spread16(sc, 8 * h, 8));
        mac64x4(s, uB, AK(a, 0, st)->qs + 128 * h + 64, st, spread16(sc, 8 * h + 4, 8));
    }
    return sums4(s);
}

/* Q2_K and Q3_K (hmask: the third bits; u = q + 4 in 0..7): s[r] += the 2-bit codes times row
 * r's activations, sc: the 16 int16 scales. */
INL void k2bits4(__m512i s[4], const uint8_t *qs, const uint8_t *hmask, __m512i sc, const uint8_t *a,
                                size_t st) {
    const __m512i m3 = _mm512_set1_epi8(3), hm = hmask ? BCAST256(hmask) : _mm512_setzero_si512();
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
        mac64x4(s, u, AK(a, 0, st)->qs + 64 * z, st, spread16(sc, 4 * z, 8));
    }
}

/* Q2_K: scales in the low nibbles, minimums in the high ones. */
INL __m256i sb_q2_K(const sqz_block_q2_K *w, const uint8_t *a, size_t st) {
    const __m128i raw = LD128(w->scales), m4 = _mm_set1_epi8(15);
    const __m256i sc = _mm256_cvtepu8_epi16(_mm_and_si128(raw, m4));
    const __m256i mn = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(raw, 4), m4));
    __m512i s[4] = {_mm512_setzero_si512(), _mm512_setzero_si512(), _mm512_setzero_si512(), _mm512_setzero_si512()};
    k2bits4(s, w->qs, NULL, _mm512_castsi256_si512(sc), a, st);
    __m256i m[4];
    SQZ__UNROLL(4)
    for (int r = 0; r < 4; r++) m[r] = _mm256_madd_epi16(LD256(AK(a, r, st)->bsums), mn);
    return sums4m(s, m);
}

/* Q3_K's 16 scales (6 bits, offset 32 taken off) from their 12 bytes, as int8. */
INL __m128i q3k_scales(const uint8_t *p) {
    uint32_t u[3];
    memcpy(u, p, 12);
    const uint32_t k1 = 0x03030303, k2 = 0x0f0f0f0f, t = u[2];
    const __m128i v = _mm_setr_epi32((int)((u[0] & k2) | ((t & k1) << 4)), (int)((u[1] & k2) | (((t >> 2) & k1) << 4)),
                                     (int)(((u[0] >> 4) & k2) | (((t >> 4) & k1) << 4)),
                                     (int)(((u[1] >> 4) & k2) | (((t >> 6) & k1) << 4)));
    return _mm_sub_epi8(v, _mm_set1_epi8(32));
}

/* Q3_K: the offset 4 through the bsums. */
INL __m256i sb_q3_K(const sqz_block_q3_K *w, const uint8_t *a, size_t st) {
    const __m256i sc = _mm256_cvtepi8_epi16(q3k_scales(w->scales));
    __m512i s[4];
    offset4(s, a, st, _mm256_sub_epi16(_mm256_setzero_si256(), _mm256_slli_epi16(sc, 2)));
    k2bits4(s, w->qs, w->hmask, _mm512_castsi256_si512(sc), a, st);
    return sums4(s);
}

/* The 8 4-bit values of 4 bytes (low nibble first) as int16 lanes. */
INL __m128i nibs8(const uint8_t *p) {
    uint32_t v;
    memcpy(&v, p, 4);
    const __m128i x = _mm_cvtsi32_si128((int)v), m4 = _mm_set1_epi8(15);
    return _mm_cvtepu8_epi16(_mm_unpacklo_epi8(_mm_and_si128(x, m4), _mm_and_si128(_mm_srli_epi16(x, 4), m4)));
}

/* [v0, v0, v1, v1, ..., v7, v7] of 8 int16 lanes: per sub-block of 32, one for each bsum. */
INL __m256i dup16(__m128i v) {
    return _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_unpacklo_epi16(v, v)), _mm_unpackhi_epi16(v, v), 1);
}

/* IQ4_XS: the signed table values against x + 128 by dpbusd (the 128's product taken off as
 * for the 32-blocks), times the scales (ls - 32) as int32 lanes. */
INL __m256i sb_iq4_xs(const sqz_block_iq4_xs *w, const uint8_t *a, size_t st, __m512i lut) {
    const __m128i sh = _mm_setr_epi16(0, 2, 4, 6, 8, 10, 12, 14); /* scale i's high bits: 2i of scales_h */
    const __m128i hi = _mm_and_si128(_mm_srlv_epi16(_mm_set1_epi16((short)w->scales_h), sh), _mm_set1_epi16(3));
    const __m128i ls = _mm_sub_epi16(_mm_or_si128(nibs8(w->scales_l), _mm_slli_epi16(hi, 4)), _mm_set1_epi16(32));
    const __m512i ls32 = _mm512_castsi256_si512(_mm256_cvtepi16_epi32(ls)), c80 = _mm512_set1_epi8((char)0x80);
    const __m512i z = _mm512_setzero_si512();
    __m512i s[4] = {z, z, z, z};
    SQZ__UNROLL(4)
    for (int q = 0; q < 4; q++) { /* sub-blocks 2q, 2q + 1 */
        const __m512i ws = _mm512_shuffle_epi8(lut, nib2(w->qs + 32 * q, 16));
        const __m512i nc = _mm512_sub_epi32(z, _mm512_dpbusd_epi32(z, c80, ws));
        const __m512i half = _mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);
        const __m512i f = _mm512_permutexvar_epi32(_mm512_add_epi32(half, _mm512_set1_epi32(2 * q)), ls32);
        SQZ__UNROLL(4)
        for (int r = 0; r < 4; r++) {
            const __m512i x = _mm512_xor_si512(LD512(AK(a, r, st)->qs + 64 * q), c80);
            s[r] = _mm512_add_epi32(s[r], _mm512_mullo_epi32(_mm512_dpbusd_epi32(nc, x, ws), f));
        }
    }
    return sums4(s);
}

/* IQ3_S: magnitudes gathered from the grid, u = 16 +- magnitude (1..31); scales 2 s + 1 as
 * int16, the offset 16 through the bsums. */
INL __m256i sb_iq3_s(const sqz_block_iq3_s *w, const uint8_t *a, size_t st) {
    const __m512i c16 = _mm512_set1_epi8(16), c256 = _mm512_set1_epi32(256);
    const __m128i ls = _mm_add_epi16(_mm_slli_epi16(nibs8(w->scales), 1), _mm_set1_epi16(1));
    const __m512i sc = _mm512_castsi128_si512(ls);
    __m512i s[4];
    offset4(s, a, st, _mm256_sub_epi16(_mm256_setzero_si256(), _mm256_slli_epi16(dup16(ls), 4)));
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
        mac64x4(s, u, AK(a, 0, st)->qs + 64 * z, st, spread16(sc, 2 * z, 16));
    }
    return sums4(s);
}

enum tk { K_Q2, K_Q3, K_Q4, K_Q5, K_Q6, K_IQ4_XS, K_IQ3_S };

INL __m256i superblock4(enum tk t, const uint8_t *w, const uint8_t *a, size_t st, __m512i lut) {
    switch (t) {
    case K_Q2: return sb_q2_K((const sqz_block_q2_K *)(const void *)w, a, st);
    case K_Q3: return sb_q3_K((const sqz_block_q3_K *)(const void *)w, a, st);
    case K_Q4: return sb_q45k(w + 4, w + 16, NULL, a, st);
    case K_Q5: return sb_q45k(w + 4, w + 48, w + 16, a, st);
    case K_Q6: return sb_q6_K((const sqz_block_q6_K *)(const void *)w, a, st);
    case K_IQ4_XS: return sb_iq4_xs((const sqz_block_iq4_xs *)(const void *)w, a, st, lut);
    default: return sb_iq3_s((const sqz_block_iq3_s *)(const void *)w, a, st);
    }
}

/* out[r] = sum over nb super-blocks of (d d_a) S - (dmin d_a) M (M = 0 for the types without
 * minimums, whose S has the offset's product taken off); d at dofs in each block, dmin after.
 * G groups of 4 tokens (rows r st bytes apart, r < 4 G) in one pass over the weights: each
 * super-block is decoded once for all of them (the G inlined superblock4 calls read the same
 * bytes, and the compiler shares their decoding: eight tokens take 0.85x the time of twice four
 * on the 1.5 B's eval). Each group's sums and their order are those of G = 1. */
INL void dotK(enum tk t, const uint8_t *w, const uint8_t *a, size_t st, int64_t nb, float *out, int G) {
    static const size_t sizes[] = {sizeof(sqz_block_q2_K), sizeof(sqz_block_q3_K), sizeof(sqz_block_q4_K),
                                   sizeof(sqz_block_q5_K), sizeof(sqz_block_q6_K), sizeof(sqz_block_iq4_xs),
                                   sizeof(sqz_block_iq3_s)};
    static const int dofs[] = {offsetof(sqz_block_q2_K, d), offsetof(sqz_block_q3_K, d), 0, 0,
                               offsetof(sqz_block_q6_K, d), 0, 0};
    const bool mins = t == K_Q2 || t == K_Q4 || t == K_Q5;
    const size_t bs = sizes[t];
    const __m512i lut = _mm512_broadcast_i32x4(LD128(sqz__kvalues_iq4nl)); /* IQ4_XS's table, signed */
    __m256 acc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
    for (int64_t b = 0; b < nb; b++, w += bs, a += sizeof(sqz__aq8_K)) {
        sqz__idot_ahead(w, bs);
        uint16_t hd, hm = 0;
        memcpy(&hd, w + dofs[t], 2);
        if (mins) memcpy(&hm, w + dofs[t] + 2, 2);
        const __m256 dv = _mm256_set_m128(_mm_set1_ps(H2F(hm)), _mm_set1_ps(H2F(hd)));
        SQZ__UNROLL(2)
        for (int g = 0; g < G; g++) {
            const uint8_t *ag = a + (size_t)(4 * g) * st;
            const __m256i v = superblock4(t, w, ag, st, lut);
            const __m128 da = _mm_setr_ps(AK(ag, 0, st)->d, AK(ag, 1, st)->d, AK(ag, 2, st)->d, AK(ag, 3, st)->d);
            const __m256 sv = _mm256_mul_ps(dv, _mm256_set_m128(da, da)); /* [d d_a | dmin d_a] */
            if (mins) {
                acc[g] = _mm256_add_ps(acc[g], _mm256_mul_ps(sv, _mm256_cvtepi32_ps(v)));
            } else {
                const __m128 f = _mm_mul_ps(_mm256_castps256_ps128(sv), _mm_cvtepi32_ps(_mm256_castsi256_si128(v)));
                acc[g] = _mm256_add_ps(acc[g], _mm256_zextps128_ps256(f)); /* upper lanes stay 0 */
            }
        }
    }
    for (int g = 0; g < G; g++) {
        const __m128 lo = _mm256_castps256_ps128(acc[g]);
        _mm_storeu_ps(out + 4 * g, mins ? _mm_sub_ps(lo, _mm256_extractf128_ps(acc[g], 1)) : lo);
    }
}

/* Four and eight tokens of a super-block type. */
#define IDOT_K(name, t)                                                                            \
    VNNI static void idot4_##name(const void *row, const void *xq, size_t stride, int64_t k, float *out) { \
        dotK(t, row, xq, stride, k / 256, out, 1);                                                 \
    }                                                                                              \
    VNNI static void idot8_##name(const void *row, const void *xq, size_t stride, int64_t k, float *out) { \
        dotK(t, row, xq, stride, k / 256, out, 2);                                                 \
    }
IDOT_K(q2_K, K_Q2)
IDOT_K(q3_K, K_Q3)
IDOT_K(q4_K, K_Q4)
IDOT_K(q5_K, K_Q5)
IDOT_K(q6_K, K_Q6)
IDOT_K(iq4_xs, K_IQ4_XS)
IDOT_K(iq3_s, K_IQ3_S)

const sqz__idot4_fn sqz__idot8_vnni[SQZ_DTYPE_COUNT] = {
    [SQZ_DTYPE_Q2_K] = idot8_q2_K, [SQZ_DTYPE_Q3_K] = idot8_q3_K, [SQZ_DTYPE_Q4_K] = idot8_q4_K,
    [SQZ_DTYPE_Q5_K] = idot8_q5_K, [SQZ_DTYPE_Q6_K] = idot8_q6_K, [SQZ_DTYPE_IQ4_XS] = idot8_iq4_xs,
    [SQZ_DTYPE_IQ3_S] = idot8_iq3_s,
};

const sqz__idot4_fn sqz__idot4_vnni[SQZ_DTYPE_COUNT] = {
    [SQZ_DTYPE_Q8_0] = idot4_q8_0,   [SQZ_DTYPE_Q4_0] = idot4_q4_0,   [SQZ_DTYPE_Q4_1] = idot4_q4_1,
    [SQZ_DTYPE_Q5_0] = idot4_q5_0,   [SQZ_DTYPE_Q5_1] = idot4_q5_1,   [SQZ_DTYPE_IQ4_NL] = idot4_iq4_nl,
    [SQZ_DTYPE_Q2_K] = idot4_q2_K,   [SQZ_DTYPE_Q3_K] = idot4_q3_K,   [SQZ_DTYPE_Q4_K] = idot4_q4_K,
    [SQZ_DTYPE_Q5_K] = idot4_q5_K,   [SQZ_DTYPE_Q6_K] = idot4_q6_K,   [SQZ_DTYPE_IQ4_XS] = idot4_iq4_xs,
    [SQZ_DTYPE_IQ3_S] = idot4_iq3_s,
};
#else
typedef int sqz__qidot4_vnni_empty; /* ISO C: a translation unit is not empty */
#endif

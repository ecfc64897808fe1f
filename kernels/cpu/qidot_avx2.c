/*
 * kernels/cpu/qidot_avx2.c - the integer products of qidot.h with AVX2 (maddubs/madd).
 *
 * _mm256_maddubs_epi16 multiplies unsigned bytes by signed bytes and adds adjacent pairs into
 * int16 (saturating); _mm256_madd_epi16 then multiplies int16 pairs and adds them into int32.
 * Every pair sum here stays below 2^15 in magnitude, so nothing saturates and each block's (or
 * super-block's) int32 sum is the reference's integer exactly. Signed weights take one of two
 * routes to an unsigned operand:
 *   - the sign trick: |w| times (x with w's sign) (Q8_0, Q4_0, Q5_0, IQ4_NL, IQ4_XS; |w| <= 128
 *     and |x| <= 127, so a pair is at most 2 * 128 * 127 = 32512);
 *   - an offset: the codes as unsigned (Q3_K 0..7, Q6_K 0..63), minus offset * sum(scale *
 *     bsums) once per super-block from Q8_K's sums of 16 (the sums sqz__aq_quantize stores).
 * IQ3_S applies its sign bits to the activations instead, against unsigned grid magnitudes.
 *
 * The float side: per block (d_w d_x) times the 8 int32 lanes, FMA into 8-lane accumulators (two
 * for the 32-element types), summed at the end: the order differs from the reference, the
 * integers do not.
 */
#include "kernels/cpu/qidot.h"

#if SQZ__QMM_X86
#include <immintrin.h>
#include <string.h>

#include "core/dequant.h"

#define AVX2 __attribute__((target("avx2,fma,f16c")))
#define H2F(h) _cvtsh_ss(h)
#define LD(p) _mm256_loadu_si256((const __m256i *)(const void *)(p))
#define LD128(p) _mm_loadu_si128((const __m128i *)(const void *)(p))

/* ---- helpers ------------------------------------------------------------------------------ */

AVX2 static inline float hsum_ps(__m256 v) {
    __m128 h = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    h = _mm_add_ps(h, _mm_movehl_ps(h, h));
    h = _mm_add_ss(h, _mm_movehdup_ps(h));
    return _mm_cvtss_f32(h);
}

AVX2 static inline int32_t hsum_epi32_128(__m128i v) {
    v = _mm_add_epi32(v, _mm_unpackhi_epi64(v, v));
    v = _mm_add_epi32(v, _mm_shuffle_epi32(v, 0xB1));
    return _mm_cvtsi128_si32(v);
}

AVX2 static inline int32_t hsum_epi32(__m256i v) {
    return hsum_epi32_128(_mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1)));
}

/* Sums of 4 products of unsigned u and signed s bytes: 8 int32. */
AVX2 static inline __m256i dot_u8i8(__m256i u, __m256i s) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
}

/* The same for signed w (>= -128) and x (>= -127): |w| times x with w's sign. */
AVX2 static inline __m256i dot_i8i8(__m256i w, __m256i x) {
    return dot_u8i8(_mm256_sign_epi8(w, w), _mm256_sign_epi8(x, w));
}

/* The 32 nibbles of a 32-element block as bytes: low nibbles (elements 0..15), then high. */
AVX2 static inline __m256i nib32(const uint8_t *qs) {
    const __m128i b = LD128(qs);
    return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(b, 4), b), _mm256_set1_epi8(0x0F));
}

/* Byte j = 0xFF where bit j of the 32 bits at p is set, else 0 (Q5's fifth bits). */
AVX2 static inline __m256i bits32(const uint8_t *p) {
    uint32_t v;
    memcpy(&v, p, 4);
    const __m256i shuf = _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0101010101010101, 0);
    const __m256i b = _mm256_shuffle_epi8(_mm256_set1_epi32((int)v), shuf);
    return _mm256_cmpeq_epi8(_mm256_or_si256(b, _mm256_set1_epi64x(0x7fbfdfeff7fbfdfe)), _mm256_set1_epi64x(-1));
}

/* Bit `from` of every byte of v moved to bit `to`, all other bits cleared (16-bit shifts: the
 * bit never crosses into the neighbouring byte). from and to are constants once inlined. */
AVX2 static inline __m256i bit_to(__m256i v, int from, int to) {
    const __m256i s = from > to ? _mm256_srli_epi16(v, from - to) : _mm256_slli_epi16(v, to - from);
    return _mm256_and_si256(s, _mm256_set1_epi8((char)(1 << to)));
}

/* Shuffle control that broadcasts int16 lane i (0..7) of each 128-bit half. */
AVX2 static inline __m256i bcast16(int i) { return _mm256_set1_epi16((short)((2 * i + 1) << 8 | 2 * i)); }

/* Shuffle control for the 16-element sub-blocks (Q2_K, Q3_K, Q6_K): from 8 int16 scales in both
 * halves, scale 2j in the low half's 8 lanes and scale 2j + 1 in the high half's, matching the
 * int16 lanes maddubs makes of 32 bytes (16 elements per half). */
AVX2 static inline __m256i pair16(int j) {
    return _mm256_add_epi8(_mm256_set_epi64x(0x0302030203020302, 0x0302030203020302, 0x0100010001000100,
                                             0x0100010001000100),
                           _mm256_set1_epi8((char)(4 * j)));
}

/* ---- 32-element blocks against Q8_0 / Q8_1 ----------------------------------------------- */

/* The row loop of a 32-element type: BLK(w, a) is the block's 8 int32 partial sums, MIN(i) the
 * block's minimum term (Q4_1, Q5_1) or 0. Two accumulators, blocks in pairs. */
#define BLKFMA(BLK, SC, i, acc) \
    _mm256_fmadd_ps(_mm256_set1_ps(SC(i) * a[i].d), _mm256_cvtepi32_ps(BLK(&w[i], &a[i])), acc)
/* the weight block's scale: an fp16 d, or MXFP4's E8M0 exponent as 2^(e - 128) */
#define D16(i) H2F(w[i].d)
#define DE8(i) sqz__e8m0_half(w[i].e)
#define DOT32(WT, AT, BLK, MIN) DOT32S(WT, AT, BLK, MIN, D16)
#define DOT32S(WT, AT, BLK, MIN, SC)                             \
    const WT *w = row;                                           \
    const AT *a = xq;                                            \
    const int64_t nb = k / 32;                                   \
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps(); \
    float ms = 0.0f;                                             \
    int64_t b = 0;                                               \
    for (; b + 1 < nb; b += 2) {                                 \
        sqz__idot_ahead(&w[b], 2 * sizeof *w);                   \
        acc0 = BLKFMA(BLK, SC, b, acc0);                         \
        acc1 = BLKFMA(BLK, SC, b + 1, acc1);                     \
        MIN(b);                                                  \
        MIN(b + 1);                                              \
    }                                                            \
    if (b < nb) {                                                \
        acc0 = BLKFMA(BLK, SC, b, acc0);                         \
        MIN(b);                                                  \
    }                                                            \
    return hsum_ps(_mm256_add_ps(acc0, acc1)) + ms
#define NOMIN(i) (void)0
#define MIN1(i) (ms += H2F(w[i].m) * a[i].s)

AVX2 static inline __m256i blk_q8_0(const sqz_block_q8_0 *w, const sqz__aq8_0 *a) {
    return dot_i8i8(LD(w->qs), LD(a->qs));
}

AVX2 static inline __m256i blk_q4_0(const sqz_block_q4_0 *w, const sqz__aq8_0 *a) {
    return dot_i8i8(_mm256_sub_epi8(nib32(w->qs), _mm256_set1_epi8(8)), LD(a->qs));
}

AVX2 static inline __m256i blk_q4_1(const sqz_block_q4_1 *w, const sqz__aq8_1 *a) {
    return dot_u8i8(nib32(w->qs), LD(a->qs));
}

/* q - 16: the nibble where the fifth bit is set, else the nibble | 0xF0 (as int8, nibble - 16). */
AVX2 static inline __m256i blk_q5_0(const sqz_block_q5_0 *w, const sqz__aq8_0 *a) {
    const __m256i hi = _mm256_andnot_si256(bits32(w->qh), _mm256_set1_epi8((char)0xF0));
    const __m256i q = _mm256_or_si256(nib32(w->qs), hi);
    return dot_i8i8(q, LD(a->qs));
}

AVX2 static inline __m256i blk_q5_1(const sqz_block_q5_1 *w, const sqz__aq8_1 *a) {
    const __m256i q = _mm256_or_si256(nib32(w->qs), _mm256_and_si256(bits32(w->qh), _mm256_set1_epi8(0x10)));
    return dot_u8i8(q, LD(a->qs));
}

/* The IQ4_NL table in both halves, for _mm256_shuffle_epi8. */
AVX2 static inline __m256i iq4_table(void) {
    return _mm256_broadcastsi128_si256(LD128(sqz__kvalues_iq4nl));
}

AVX2 static inline __m256i blk_iq4_nl(const sqz_block_iq4_nl *w, const sqz__aq8_0 *a) {
    return dot_i8i8(_mm256_shuffle_epi8(iq4_table(), nib32(w->qs)), LD(a->qs));
}

/* MXFP4: IQ4_NL's lookup with the E2M1 table (doubled: |w| <= 12, the sign trick holds). */
AVX2 static inline __m256i blk_mxfp4(const sqz_block_mxfp4 *w, const sqz__aq8_0 *a) {
    return dot_i8i8(_mm256_shuffle_epi8(_mm256_broadcastsi128_si256(LD128(sqz__kvalues_fp4)), nib32(w->qs)), LD(a->qs));
}

AVX2 static float idot_mxfp4_avx2(const void *row, const void *xq, int64_t k) {
    DOT32S(sqz_block_mxfp4, sqz__aq8_0, blk_mxfp4, NOMIN, DE8);
}

AVX2 float sqz__idot_q8_0_avx2(const void *row, const void *xq, int64_t k) {
    DOT32(sqz_block_q8_0, sqz__aq8_0, blk_q8_0, NOMIN);
}

AVX2 float sqz__idot_q4_0_avx2(const void *row, const void *xq, int64_t k) {
    DOT32(sqz_block_q4_0, sqz__aq8_0, blk_q4_0, NOMIN);
}

AVX2 float sqz__idot_q4_1_avx2(const void *row, const void *xq, int64_t k) {
    DOT32(sqz_block_q4_1, sqz__aq8_1, blk_q4_1, MIN1);
}

AVX2 float sqz__idot_q5_0_avx2(const void *row, const void *xq, int64_t k) {
    DOT32(sqz_block_q5_0, sqz__aq8_0, blk_q5_0, NOMIN);
}

AVX2 float sqz__idot_q5_1_avx2(const void *row, const void *xq, int64_t k) {
    DOT32(sqz_block_q5_1, sqz__aq8_1, blk_q5_1, MIN1);
}

AVX2 float sqz__idot_iq4_nl_avx2(const void *row, const void *xq, int64_t k) {
    DOT32(sqz_block_iq4_nl, sqz__aq8_0, blk_iq4_nl, NOMIN);
}

/* ---- 256-element super-blocks against Q8_K -------------------------------------------------- */

/* sum(scale16 * bsums) over the 16 sub-blocks of 16: 8 int32 (16 scales as int16, |s| <= 128). */
AVX2 static inline __m256i scaled_bsums(__m256i sc16, const sqz__aq8_K *a) {
    return _mm256_madd_epi16(sc16, LD(a->bsums));
}

/* One quarter (32 elements, sub-blocks of 16 2j and 2j + 1 of a half) of unsigned codes q
 * against x, each sub-block's int16 pair sums times its scale from sch (the half's 8 int16
 * scales in both 128-bit halves). */
AVX2 static inline __m256i quarter16(__m256i q, const int8_t *x, __m256i sch, int j) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(q, LD(x)), _mm256_shuffle_epi8(sch, pair16(j)));
}

/* Q2_K: element 32 j + l of half h is bits 2j..2j+1 of qs[32 h + l]; scale low nibble, min high. */
AVX2 static inline __m256i q2k_isum(const sqz_block_q2_K *w, const sqz__aq8_K *a, __m256i sc) {
    const __m256i m3 = _mm256_set1_epi8(3);
    __m256i s0 = _mm256_setzero_si256(), s1 = _mm256_setzero_si256();
    for (int h = 0; h < 2; h++) {
        const __m256i v = LD(w->qs + 32 * h);
        const __m256i sch = h ? _mm256_permute2x128_si256(sc, sc, 0x11) : _mm256_permute2x128_si256(sc, sc, 0x00);
        const int8_t *x = a->qs + 128 * h;
        s0 = _mm256_add_epi32(s0, quarter16(_mm256_and_si256(v, m3), x, sch, 0));
        s1 = _mm256_add_epi32(s1, quarter16(_mm256_and_si256(_mm256_srli_epi16(v, 2), m3), x + 32, sch, 1));
        s0 = _mm256_add_epi32(s0, quarter16(_mm256_and_si256(_mm256_srli_epi16(v, 4), m3), x + 64, sch, 2));
        s1 = _mm256_add_epi32(s1, quarter16(_mm256_and_si256(_mm256_srli_epi16(v, 6), m3), x + 96, sch, 3));
    }
    return _mm256_add_epi32(s0, s1);
}

AVX2 float sqz__idot_q2_K_avx2(const void *row, const void *xq, int64_t k) {
    const sqz_block_q2_K *w = row;
    const sqz__aq8_K *a = xq;
    const __m128i m4 = _mm_set1_epi8(0x0F);
    __m256 acc = _mm256_setzero_ps();
    float accm = 0.0f;
    for (int64_t b = 0; b < k / 256; b++) {
        sqz__idot_ahead(&w[b], sizeof w[b]);
        const __m128i s8 = LD128(w[b].scales);
        const __m256i sc = _mm256_cvtepu8_epi16(_mm_and_si128(s8, m4));
        const __m256i mn = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(s8, 4), m4));
        const int32_t msum = hsum_epi32(scaled_bsums(mn, &a[b]));
        const __m256i isum = q2k_isum(&w[b], &a[b], sc);
        acc = _mm256_fmadd_ps(_mm256_set1_ps(H2F(w[b].d) * a[b].d), _mm256_cvtepi32_ps(isum), acc);
        accm += (H2F(w[b].dmin) * a[b].d) * (float)msum;
    }
    return hsum_ps(acc) - accm;
}

/* Q3_K's 16 scales (6 bits, offset 32 removed) as int8, from its 12 bytes. */
AVX2 static inline __m128i q3k_scales8(const uint8_t *p) {
    uint32_t u[3];
    memcpy(u, p, 12);
    const uint32_t m4 = 0x0F0F0F0F, m2 = 0x03030303;
    const __m128i s = _mm_set_epi32((int)(((u[1] >> 4) & m4) | ((u[2] >> 6) & m2) << 4),  /* 12..15 */
                                    (int)(((u[0] >> 4) & m4) | ((u[2] >> 4) & m2) << 4),  /* 8..11 */
                                    (int)((u[1] & m4) | ((u[2] >> 2) & m2) << 4),         /* 4..7 */
                                    (int)((u[0] & m4) | (u[2] & m2) << 4));               /* 0..3 */
    return _mm_sub_epi8(s, _mm_set1_epi8(32));
}

/* Q3_K: the code as unsigned 0..7 (2 low bits | hmask bit << 2) is q + 4; sum(sc * (q + 4) x),
 * the -4 offset comes off in the caller. Element 32 j + l of half h: bits 2j of qs[32 h + l],
 * bit 4 h + j of hmask[l]. */
AVX2 static inline __m256i q3k_isum(const sqz_block_q3_K *w, const sqz__aq8_K *a, __m256i sc) {
    const __m256i m3 = _mm256_set1_epi8(3), hm = LD(w->hmask);
    __m256i s0 = _mm256_setzero_si256(), s1 = _mm256_setzero_si256();
    for (int h = 0; h < 2; h++) {
        const __m256i v = LD(w->qs + 32 * h);
        const __m256i sch = h ? _mm256_permute2x128_si256(sc, sc, 0x11) : _mm256_permute2x128_si256(sc, sc, 0x00);
        const int8_t *x = a->qs + 128 * h;
        const int m = 4 * h; /* constant per unrolled iteration */
        const __m256i q0 = _mm256_or_si256(_mm256_and_si256(v, m3), bit_to(hm, m, 2));
        const __m256i q1 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(v, 2), m3), bit_to(hm, m + 1, 2));
        const __m256i q2 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(v, 4), m3), bit_to(hm, m + 2, 2));
        const __m256i q3 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(v, 6), m3), bit_to(hm, m + 3, 2));
        s0 = _mm256_add_epi32(s0, quarter16(q0, x, sch, 0));
        s1 = _mm256_add_epi32(s1, quarter16(q1, x + 32, sch, 1));
        s0 = _mm256_add_epi32(s0, quarter16(q2, x + 64, sch, 2));
        s1 = _mm256_add_epi32(s1, quarter16(q3, x + 96, sch, 3));
    }
    return _mm256_add_epi32(s0, s1);
}

AVX2 float sqz__idot_q3_K_avx2(const void *row, const void *xq, int64_t k) {
    const sqz_block_q3_K *w = row;
    const sqz__aq8_K *a = xq;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t b = 0; b < k / 256; b++) {
        sqz__idot_ahead(&w[b], sizeof w[b]);
        const __m256i sc = _mm256_cvtepi8_epi16(q3k_scales8(w[b].scales));
        const __m256i off = _mm256_slli_epi32(scaled_bsums(sc, &a[b]), 2); /* 4 sum(sc * bsums) */
        const __m256i isum = _mm256_sub_epi32(q3k_isum(&w[b], &a[b], sc), off);
        acc = _mm256_fmadd_ps(_mm256_set1_ps(H2F(w[b].d) * a[b].d), _mm256_cvtepi32_ps(isum), acc);
    }
    return hsum_ps(acc);
}

/* Q4_K / Q5_K's 8 scales (bytes 0..7) and minimums (bytes 8..15), as sqz__k4_scales_mins. */
AVX2 static inline __m128i k4_scales_mins(const uint8_t *q) {
    uint32_t u[3];
    memcpy(u, q, 12);
    const uint32_t k1 = 0x3f3f3f3f, k2 = 0x0f0f0f0f, k3 = 0x03030303;
    return _mm_set_epi32((int)(((u[2] >> 4) & k2) | (((u[1] >> 6) & k3) << 4)), (int)(u[1] & k1),
                         (int)((u[2] & k2) | (((u[0] >> 6) & k3) << 4)), (int)(u[0] & k1));
}

/* sum(min * (bsums[2s] + bsums[2s + 1])) of a Q4_K / Q5_K super-block: the minimums' integer. */
AVX2 static inline int32_t k4_msum(__m128i sm, const sqz__aq8_K *a) {
    const __m128i mins = _mm_cvtepu8_epi16(_mm_unpackhi_epi64(sm, sm));
    const __m128i pairs = _mm_hadd_epi16(LD128(a->bsums), LD128(a->bsums + 8)); /* |sum of 32| <= 4064 */
    return hsum_epi32_128(_mm_madd_epi16(mins, pairs));
}

/* Sub-blocks 2j (low nibbles of qs[32 j ..]) and 2j + 1 (high nibbles) of a Q4_K / Q5_K
 * super-block: scale * sum(q x), Q5_K's bit s of qh[l] adding 16 (hb: the 32 qh bytes, or NULL
 * for Q4_K). sc: the 8 int16 scales in both halves. j is a constant once inlined. */
AVX2 static inline __m256i k45_pair(const uint8_t *qs, const __m256i *hb, __m256i sc, const int8_t *x, int j) {
    const __m256i m4 = _mm256_set1_epi8(0x0F), v = LD(qs + 32 * j);
    __m256i lo = _mm256_and_si256(v, m4), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
    if (hb) {
        lo = _mm256_or_si256(lo, bit_to(*hb, 2 * j, 4));
        hi = _mm256_or_si256(hi, bit_to(*hb, 2 * j + 1, 4));
    }
    const __m256i plo = _mm256_maddubs_epi16(lo, LD(x + 64 * j)), phi = _mm256_maddubs_epi16(hi, LD(x + 64 * j + 32));
    return _mm256_add_epi32(_mm256_madd_epi16(plo, _mm256_shuffle_epi8(sc, bcast16(2 * j))),
                            _mm256_madd_epi16(phi, _mm256_shuffle_epi8(sc, bcast16(2 * j + 1))));
}

/* sum over the 8 sub-blocks of 32 of scale * sum(q x) for Q4_K (qh NULL) or Q5_K. */
AVX2 static inline __m256i k45_isum(const uint8_t *qs, const uint8_t *qh, __m128i sm, const sqz__aq8_K *a) {
    const __m256i sc = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(sm)); /* 8 int16 scales, both halves */
    const __m256i h = qh ? LD(qh) : _mm256_setzero_si256(), *hb = qh ? &h : NULL;
    const __m256i s0 = _mm256_add_epi32(k45_pair(qs, hb, sc, a->qs, 0), k45_pair(qs, hb, sc, a->qs, 1));
    const __m256i s1 = _mm256_add_epi32(k45_pair(qs, hb, sc, a->qs, 2), k45_pair(qs, hb, sc, a->qs, 3));
    return _mm256_add_epi32(s0, s1);
}

AVX2 float sqz__idot_q4_K_avx2(const void *row, const void *xq, int64_t k) {
    const sqz_block_q4_K *w = row;
    const sqz__aq8_K *a = xq;
    __m256 acc = _mm256_setzero_ps();
    float accm = 0.0f;
    for (int64_t b = 0; b < k / 256; b++) {
        sqz__idot_ahead(&w[b], sizeof w[b]);
        const __m128i sm = k4_scales_mins(w[b].scales);
        const int32_t msum = k4_msum(sm, &a[b]);
        const __m256i isum = k45_isum(w[b].qs, NULL, sm, &a[b]);
        acc = _mm256_fmadd_ps(_mm256_set1_ps(H2F(w[b].d) * a[b].d), _mm256_cvtepi32_ps(isum), acc);
        accm += (H2F(w[b].dmin) * a[b].d) * (float)msum;
    }
    return hsum_ps(acc) - accm;
}

AVX2 float sqz__idot_q5_K_avx2(const void *row, const void *xq, int64_t k) {
    const sqz_block_q5_K *w = row;
    const sqz__aq8_K *a = xq;
    __m256 acc = _mm256_setzero_ps();
    float accm = 0.0f;
    for (int64_t b = 0; b < k / 256; b++) {
        sqz__idot_ahead(&w[b], sizeof w[b]);
        const __m128i sm = k4_scales_mins(w[b].scales);
        const int32_t msum = k4_msum(sm, &a[b]);
        const __m256i isum = k45_isum(w[b].qs, w[b].qh, sm, &a[b]);
        acc = _mm256_fmadd_ps(_mm256_set1_ps(H2F(w[b].d) * a[b].d), _mm256_cvtepi32_ps(isum), acc);
        accm += (H2F(w[b].dmin) * a[b].d) * (float)msum;
    }
    return hsum_ps(acc) - accm;
}

/* Q6_K: the code as unsigned 0..63 is q + 32; sum(sc * (q + 32) x), the offset comes off in the
 * caller. Half h, quarter j, position l: the low nibble (j < 2) or high nibble of
 * ql[64 h + 32 (j % 2) + l], bits 2j..2j+1 of qh[32 h + l] on top. */
AVX2 static inline __m256i q6k_isum(const sqz_block_q6_K *w, const sqz__aq8_K *a, __m256i sc) {
    const __m256i m4 = _mm256_set1_epi8(0x0F), m30 = _mm256_set1_epi8(0x30);
    __m256i s0 = _mm256_setzero_si256(), s1 = _mm256_setzero_si256();
    for (int h = 0; h < 2; h++) {
        const __m256i l0 = LD(w->ql + 64 * h), l1 = LD(w->ql + 64 * h + 32), hb = LD(w->qh + 32 * h);
        const __m256i sch = h ? _mm256_permute2x128_si256(sc, sc, 0x11) : _mm256_permute2x128_si256(sc, sc, 0x00);
        const int8_t *x = a->qs + 128 * h;
        const __m256i q0 = _mm256_or_si256(_mm256_and_si256(l0, m4), _mm256_and_si256(_mm256_slli_epi16(hb, 4), m30));
        const __m256i q1 = _mm256_or_si256(_mm256_and_si256(l1, m4), _mm256_and_si256(_mm256_slli_epi16(hb, 2), m30));
        const __m256i q2 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4), _mm256_and_si256(hb, m30));
        const __m256i q3 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4),
                                           _mm256_and_si256(_mm256_srli_epi16(hb, 2), m30));
        s0 = _mm256_add_epi32(s0, quarter16(q0, x, sch, 0));
        s1 = _mm256_add_epi32(s1, quarter16(q1, x + 32, sch, 1));
        s0 = _mm256_add_epi32(s0, quarter16(q2, x + 64, sch, 2));
        s1 = _mm256_add_epi32(s1, quarter16(q3, x + 96, sch, 3));
    }
    return _mm256_add_epi32(s0, s1);
}

AVX2 float sqz__idot_q6_K_avx2(const void *row, const void *xq, int64_t k) {
    const sqz_block_q6_K *w = row;
    const sqz__aq8_K *a = xq;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t b = 0; b < k / 256; b++) {
        sqz__idot_ahead(&w[b], sizeof w[b]);
        const __m256i sc = _mm256_cvtepi8_epi16(LD128(w[b].scales));
        const __m256i off = _mm256_slli_epi32(scaled_bsums(sc, &a[b]), 5); /* 32 sum(sc * bsums) */
        const __m256i isum = _mm256_sub_epi32(q6k_isum(&w[b], &a[b], sc), off);
        acc = _mm256_fmadd_ps(_mm256_set1_ps(H2F(w[b].d) * a[b].d), _mm256_cvtepi32_ps(isum), acc);
    }
    return hsum_ps(acc);
}

/* IQ4_XS: sub-block s of 32 is an IQ4_NL block's nibbles (qs[16 s ..]) with scale ls - 32. */
AVX2 static inline __m256i iq4xs_isum(const sqz_block_iq4_xs *w, const sqz__aq8_K *a) {
    const __m256i tab = iq4_table();
    __m256i s0 = _mm256_setzero_si256(), s1 = _mm256_setzero_si256();
    for (int s = 0; s < 8; s += 2) {
        const int ls0 = (((w->scales_l[s / 2] & 15) | ((w->scales_h >> (2 * s)) & 3) << 4)) - 32;
        const int ls1 = (((w->scales_l[s / 2] >> 4) | ((w->scales_h >> (2 * s + 2)) & 3) << 4)) - 32;
        const __m256i q0 = _mm256_shuffle_epi8(tab, nib32(w->qs + 16 * s));
        const __m256i q1 = _mm256_shuffle_epi8(tab, nib32(w->qs + 16 * s + 16));
        const __m256i x0 = LD(a->qs + 32 * s), x1 = LD(a->qs + 32 * s + 32);
        const __m256i p0 = _mm256_maddubs_epi16(_mm256_sign_epi8(q0, q0), _mm256_sign_epi8(x0, q0));
        const __m256i p1 = _mm256_maddubs_epi16(_mm256_sign_epi8(q1, q1), _mm256_sign_epi8(x1, q1));
        s0 = _mm256_add_epi32(s0, _mm256_madd_epi16(p0, _mm256_set1_epi16((short)ls0)));
        s1 = _mm256_add_epi32(s1, _mm256_madd_epi16(p1, _mm256_set1_epi16((short)ls1)));
    }
    return _mm256_add_epi32(s0, s1);
}

AVX2 float sqz__idot_iq4_xs_avx2(const void *row, const void *xq, int64_t k) {
    const sqz_block_iq4_xs *w = row;
    const sqz__aq8_K *a = xq;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t b = 0; b < k / 256; b++) {
        sqz__idot_ahead(&w[b], sizeof w[b]);
        const __m256i isum = iq4xs_isum(&w[b], &a[b]);
        acc = _mm256_fmadd_ps(_mm256_set1_ps(H2F(w[b].d) * a[b].d), _mm256_cvtepi32_ps(isum), acc);
    }
    return hsum_ps(acc);
}

/* IQ3_S sub-block s: the 8 grid words (4 magnitudes each) of its groups, index qs[8 s + g] plus
 * bit g of qh[s] as the ninth bit. The indices in a vector, the words by scalar loads (as fast
 * as a gather on Zen 4, and no gather penalty on older AMD cores). */
AVX2 static inline __m256i iq3s_mags(const uint8_t *qs, unsigned qh) {
    const __m256i lo = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)qs));
    const __m256i shift = _mm256_set_epi32(1, 2, 3, 4, 5, 6, 7, 8); /* bit g to bit 8 in lane g */
    const __m256i hi = _mm256_and_si256(_mm256_sllv_epi32(_mm256_set1_epi32((int)qh), shift), _mm256_set1_epi32(256));
    uint32_t ix[8];
    _mm256_storeu_si256((__m256i *)(void *)ix, _mm256_or_si256(lo, hi));
    const uint32_t *g = sqz__iq3s_grid;
    return _mm256_set_epi32((int)g[ix[7]], (int)g[ix[6]], (int)g[ix[5]], (int)g[ix[4]], (int)g[ix[3]], (int)g[ix[2]],
                            (int)g[ix[1]], (int)g[ix[0]]);
}

/* x negated where the sub-block's sign bit is set (bit e % 8 of signs[e / 8] for element e). */
AVX2 static inline __m256i iq3s_signed_x(const uint8_t *signs, __m256i x) {
    uint32_t v;
    memcpy(&v, signs, 4);
    const __m256i bytes = _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0101010101010101, 0);
    const __m256i bits = _mm256_set1_epi64x((long long)0x8040201008040201ULL);
    const __m256i s = _mm256_shuffle_epi8(_mm256_set1_epi32((int)v), bytes);
    const __m256i neg = _mm256_cmpeq_epi8(_mm256_and_si256(s, bits), bits);
    return _mm256_sub_epi8(_mm256_xor_si256(x, neg), neg);
}

AVX2 static inline __m256i iq3s_isum(const sqz_block_iq3_s *w, const sqz__aq8_K *a) {
    __m256i s0 = _mm256_setzero_si256(), s1 = _mm256_setzero_si256();
    for (int s = 0; s < 8; s += 2) {
        const int ls0 = 2 * (w->scales[s / 2] & 15) + 1, ls1 = 2 * (w->scales[s / 2] >> 4) + 1;
        const __m256i x0 = iq3s_signed_x(w->signs + 4 * s, LD(a->qs + 32 * s));
        const __m256i x1 = iq3s_signed_x(w->signs + 4 * s + 4, LD(a->qs + 32 * s + 32));
        const __m256i p0 = _mm256_maddubs_epi16(iq3s_mags(w->qs + 8 * s, w->qh[s]), x0);
        const __m256i p1 = _mm256_maddubs_epi16(iq3s_mags(w->qs + 8 * s + 8, w->qh[s + 1]), x1);
        s0 = _mm256_add_epi32(s0, _mm256_madd_epi16(p0, _mm256_set1_epi16((short)ls0)));
        s1 = _mm256_add_epi32(s1, _mm256_madd_epi16(p1, _mm256_set1_epi16((short)ls1)));
    }
    return _mm256_add_epi32(s0, s1);
}

AVX2 float sqz__idot_iq3_s_avx2(const void *row, const void *xq, int64_t k) {
    const sqz_block_iq3_s *w = row;
    const sqz__aq8_K *a = xq;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t b = 0; b < k / 256; b++) {
        sqz__idot_ahead(&w[b], sizeof w[b]);
        const __m256i isum = iq3s_isum(&w[b], &a[b]);
        acc = _mm256_fmadd_ps(_mm256_set1_ps(H2F(w[b].d) * a[b].d), _mm256_cvtepi32_ps(isum), acc);
    }
    return hsum_ps(acc);
}

const sqz__idot_fn sqz__idot_avx2[SQZ_DTYPE_COUNT] = {
    [SQZ_DTYPE_Q8_0] = sqz__idot_q8_0_avx2,     [SQZ_DTYPE_Q4_0] = sqz__idot_q4_0_avx2,
    [SQZ_DTYPE_Q4_1] = sqz__idot_q4_1_avx2,     [SQZ_DTYPE_Q5_0] = sqz__idot_q5_0_avx2,
    [SQZ_DTYPE_Q5_1] = sqz__idot_q5_1_avx2,     [SQZ_DTYPE_IQ4_NL] = sqz__idot_iq4_nl_avx2,
    [SQZ_DTYPE_MXFP4] = idot_mxfp4_avx2,
    [SQZ_DTYPE_Q2_K] = sqz__idot_q2_K_avx2,     [SQZ_DTYPE_Q3_K] = sqz__idot_q3_K_avx2,
    [SQZ_DTYPE_Q4_K] = sqz__idot_q4_K_avx2,     [SQZ_DTYPE_Q5_K] = sqz__idot_q5_K_avx2,
    [SQZ_DTYPE_Q6_K] = sqz__idot_q6_K_avx2,     [SQZ_DTYPE_IQ4_XS] = sqz__idot_iq4_xs_avx2,
    [SQZ_DTYPE_IQ3_S] = sqz__idot_iq3_s_avx2,
};
#else
typedef int sqz__qidot_avx2_empty; /* ISO C: a translation unit is not empty */
#endif

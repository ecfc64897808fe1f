/*
 * kernels/cpu/qidot_gemm_avx2.c - the panel GEMM of qidot_gemm_vnni.c with AVX2 (qidot.h:
 * sqz__qgemm_avx2_rows): many tokens against Q8_0, Q4_0, Q5_0, IQ4_NL, MXFP4 (Q8_0 activations),
 * Q4_1, Q5_1 (Q8_1), Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS, IQ3_S (Q8_K): the 14 types of the VNNI
 * form, for the CPUs without AVX-512 VNNI.
 *
 * The weights of 8 rows are interleaved 4 bytes at a time (lane r of a 32-byte vector holds 4
 * codes of row r), so that one _mm256_maddubs_epi16 against 4 activation bytes broadcast to every
 * lane gives 8 rows' partial sums (two int16 per row), and a block's sums are whole with no
 * reduction across lanes, as with dpbusd. maddubs multiplies unsigned by signed bytes and adds
 * pairs into int16 with saturation; nothing here saturates, so every block's (or super-block's)
 * int32 sum is the scalar reference's (qidot_ref.c) exactly:
 *   - the codes stored unsigned and small: Q4_0 / Q4_1 / Q4_K 0..15, Q5_0 / Q5_1 / Q5_K 0..31,
 *     Q6_K 0..63. A maddubs pair is then at most 2 * 63 * 128 in magnitude, and the int16 pair
 *     sums of G groups are added in int16 before one _mm256_madd_epi16 widens them (times ones,
 *     or the rows' sub-block scales): G = 8 for 0..15 (16 products of at most 15 * 128 = 30720),
 *     4 for 0..31 (31744), 2 for 0..63 (32256); the activations are >= -127 (sqz__aq_quantize),
 *     the bounds hold for -128 as well. The offsets come off per block: Q4_0 -8 sum(x), Q5_0
 *     -16 sum(x) (from the xs of qidot.h: -128 sum(x), divided exactly), Q6_K -32 sum(sc bsums)
 *     (Q8_K's sums of 16); Q4_1 / Q5_1 add m s, Q4_K / Q5_K subtract dmin sum(m bsums), as the
 *     reference.
 *   - the sign trick for the types whose codes span int8 (Q8_0 as stored, IQ4_NL's table, and
 *     MXFP4's, -12..12): |w| unsigned times x with w's sign; a pair is at most 2 * 128 * 127 =
 *     32512 (x >= -127), widened to int32 after every maddubs.
 *   - the other super-block types (Q2_K codes 0..3, Q3_K q + 4 in 0..7, IQ4_XS's signed table
 *     and IQ3_S's odd -15..15 with the sign trick): their bounds at the super-block section.
 * The int32 sums cannot overflow where the reference's do not: a K super-block's sum of
 * sc * q_u * x (q_u the unsigned code) is at most 16 * 128 * 63 * 16 * 127 < 2^28, and every
 * other partial sum is smaller.
 *
 * The f32 side, per block and token: the 8 rows' int32 sums converted, times dw (8 rows) times the
 * token's d, one fma into 8 lanes, blocks in order (the float order may differ from the
 * reference's, as qidot.h says). Tokens go 4 at a time (4 int16 sums, 4 int32 sums, 4 f32
 * accumulators and the codes fit the 16 registers), then one at a time. The loops over groups
 * are unrolled 4 times, not 8: gcc 12 turns 8 unrolled int16 sums of 4 tokens into a tree of 32
 * live products and spills them (Q4_K / Q4_0 at 1 thread on Zen 4: 160-165 G ops/s, 195-210
 * unrolled by 4).
 *
 * A panel is packed once per call, per 8 rows, and multiplied against all the call's tokens.
 * qmatmul.c hands out units of 16 rows: two panels each.
 */
#include "kernels/cpu/qidot.h"

#if SQZ__QMM_X86
#include <immintrin.h>
#include <string.h>

#include "core/dequant.h"
#include "kernels/cpu/qidot_kcodes.h"

#define AVX2 __attribute__((target("avx2,fma,f16c")))
#define INL AVX2 static inline __attribute__((always_inline))
#define LD128(p) _mm_loadu_si128((const __m128i *)(const void *)(p))
#define LD256(p) _mm256_loadu_si256((const __m256i *)(const void *)(p))

enum { PR = 8 }; /* rows per panel */

/* How a type's codes meet the activations: signed (the sign trick), or unsigned of at most 15,
 * 31 or 63 (G_OF: groups of 4 codes whose int16 sums add up without overflow). */
typedef enum codes { SIGNED, U4, U5, U6 } codes;
#define G_OF(c) ((c) == U4 ? 8 : (c) == U5 ? 4 : (c) == U6 ? 2 : 1)

/* 4 activation bytes at p, broadcast to every lane. */
INL __m256i bcast4(const int8_t *p) {
    int32_t v;
    memcpy(&v, p, 4);
    return _mm256_set1_epi32(v);
}

/* The lanes of the rows present: all 8, or the first `rows` (maskload / maskstore). */
INL __m256i row_mask(int rows) { return _mm256_cmpgt_epi32(_mm256_set1_epi32(rows), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)); }

/* y[0..rows) = v + bias[0..rows) (bias NULL: none). */
INL void store_rows(float *y, const float *bias, __m256 v, int rows) {
    if (rows == PR) {
        _mm256_storeu_ps(y, bias ? _mm256_add_ps(v, _mm256_loadu_ps(bias)) : v);
    } else {
        const __m256i m = row_mask(rows);
        _mm256_maskstore_ps(y, m, bias ? _mm256_add_ps(v, _mm256_maskload_ps(bias, m)) : v);
    }
}

/* ---- 32-element blocks against Q8_0 / Q8_1 ------------------------------------------------ */

/* u plus 16 where bit j of the 32 bits at qh is set (Q5's fifth bits). */
INL __m256i fifth(__m256i u, const uint8_t *qh) {
    uint32_t v;
    memcpy(&v, qh, 4);
    const __m256i shuf = _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0101010101010101, 0);
    const __m256i b = _mm256_shuffle_epi8(_mm256_set1_epi32((int)v), shuf);
    const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ULL);
    return _mm256_add_epi8(u, _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(b, bit), bit), _mm256_set1_epi8(16)));
}
/* One block's 32 codes as stored in the panel (signed for Q8_0 / IQ4_NL / MXFP4, else unsigned), d, m. */
INL __m256i decode(sqz_dtype t, const uint8_t *blk, float *d, float *m) {
    if (t == SQZ_DTYPE_MXFP4) { /* e, then E2M1 codes: w = 2^(e-128) kvalues_fp4[q], -12..12 */
        *d = sqz__e8m0_half(blk[0]);
        *m = 0.0f;
        return _mm256_shuffle_epi8(_mm256_broadcastsi128_si256(LD128(sqz__kvalues_fp4)), kc_nibbles(blk + 1));
    }
    uint16_t h;
    memcpy(&h, blk, 2);
    *d = _cvtsh_ss(h);
    *m = 0.0f;
    if (t == SQZ_DTYPE_Q4_1 || t == SQZ_DTYPE_Q5_1) {
        memcpy(&h, blk + 2, 2);
        *m = _cvtsh_ss(h);
    }
    switch (t) {
    case SQZ_DTYPE_Q8_0: return LD256(blk + 2);
    case SQZ_DTYPE_Q4_0: return kc_nibbles(blk + 2);
    case SQZ_DTYPE_Q5_0: return fifth(kc_nibbles(blk + 6), blk + 2);
    case SQZ_DTYPE_IQ4_NL: return _mm256_shuffle_epi8(_mm256_broadcastsi128_si256(LD128(sqz__kvalues_iq4nl)), kc_nibbles(blk + 2));
    case SQZ_DTYPE_Q4_1: return kc_nibbles(blk + 4);
    default: return fifth(kc_nibbles(blk + 8), blk + 4); /* Q5_1 */
    }
}

/* The panel of rows [j0, j0 + rows): codes[b][g] (32 bytes: lane r = codes 4g..4g+3 of row r's
 * block b), dw[b][r], mw[b][r]; rows past the end have zero codes and scales. */
typedef struct panel {
    uint8_t *codes;
    float *dw, *mw;
} panel;

AVX2 static void pack(sqz_dtype t, const sqz__qgemm_args *a, int64_t j0, int rows, const panel *p) {
    const int64_t nb = a->k / 32;
    const size_t bs = sqz_dtype_info(t)->type_size;
    if (rows < PR) {
        memset(p->codes, 0, (size_t)nb * 8 * 32);
        memset(p->dw, 0, (size_t)nb * PR * sizeof(float));
        memset(p->mw, 0, (size_t)nb * PR * sizeof(float));
    }
    for (int r = 0; r < rows; r++) {
        const uint8_t *w = (const uint8_t *)a->w + (size_t)(j0 + r) * a->row_bytes;
        for (int64_t b = 0; b < nb; b++, w += bs) {
            uint32_t u[8];
            _mm256_storeu_si256((__m256i *)(void *)u, decode(t, w, &p->dw[b * PR + r], &p->mw[b * PR + r]));
            uint8_t *c = p->codes + (size_t)b * 256 + 4 * r;
            for (int g = 0; g < 8; g++) memcpy(c + 32 * g, &u[g], 4);
        }
    }
}

/* T tokens from t0 against the packed panel: y[(t0 + i) n + j0 + r], r < rows. c: the codes'
 * kind; div: xs / div is the block's offset (Q4_0 16: -8 sum(x); Q5_0 8: -16 sum(x)), 0 none;
 * q81: Q8_1 activations and the minimum's m s. */
INL void tokens(const sqz__qgemm_args *a, const panel *p, codes c, int div, bool q81, int64_t t0, int T, int64_t j0,
                int rows) {
    const int64_t nb = a->k / 32;
    const int G = G_OF(c);
    const size_t bsz = q81 ? sizeof(sqz__aq8_1) : sizeof(sqz__aq8_0);
    const size_t qo = q81 ? offsetof(sqz__aq8_1, qs) : offsetof(sqz__aq8_0, qs);
    const __m256i ones = _mm256_set1_epi16(1);
    const uint8_t *x[4];
    __m256 acc[4];
    for (int i = 0; i < T; i++) {
        x[i] = a->xq + (size_t)(t0 + i) * a->xq_bytes;
        acc[i] = _mm256_setzero_ps();
    }
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *cb = p->codes + (size_t)b * 256;
        __m256i s[4];
        for (int i = 0; i < T; i++) s[i] = div ? _mm256_set1_epi32(a->xs[(t0 + i) * nb + b] / div) : _mm256_setzero_si256();
        for (int g0 = 0; g0 < 8; g0 += G) {
            __m256i h[4];
            for (int i = 0; i < T; i++) h[i] = _mm256_setzero_si256();
#pragma GCC unroll 4
            for (int g = g0; g < g0 + G; g++) {
                const __m256i w = LD256(cb + 32 * g);
                const __m256i aw = c == SIGNED ? _mm256_abs_epi8(w) : w;
                for (int i = 0; i < T; i++) {
                    const __m256i xb = bcast4((const int8_t *)(x[i] + (size_t)b * bsz + qo + 4 * g));
                    if (c == SIGNED)
                        s[i] = _mm256_add_epi32(s[i], _mm256_madd_epi16(_mm256_maddubs_epi16(aw, _mm256_sign_epi8(xb, w)), ones));
                    else
                        h[i] = _mm256_add_epi16(h[i], _mm256_maddubs_epi16(w, xb));
                }
            }
            for (int i = 0; c != SIGNED && i < T; i++) s[i] = _mm256_add_epi32(s[i], _mm256_madd_epi16(h[i], ones));
        }
        const __m256 dw = _mm256_load_ps(p->dw + b * PR);
        for (int i = 0; i < T; i++) {
            float da;
            memcpy(&da, x[i] + (size_t)b * bsz, 4);
            acc[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s[i]), _mm256_mul_ps(dw, _mm256_set1_ps(da)), acc[i]);
        }
        if (q81) {
            const __m256 mw = _mm256_load_ps(p->mw + b * PR);
            for (int i = 0; i < T; i++) {
                float sa;
                memcpy(&sa, x[i] + (size_t)b * bsz + offsetof(sqz__aq8_1, s), 4);
                acc[i] = _mm256_fmadd_ps(mw, _mm256_set1_ps(sa), acc[i]);
            }
        }
    }
    for (int i = 0; i < T; i++) store_rows(a->y + (t0 + i) * a->n + j0, a->bias ? a->bias + j0 : NULL, acc[i], rows);
}

/* Every token against a panel, 4 at a time, then one at a time: one function per kind of codes. */
#define PANEL_TOKENS(name, C, DIV, Q81)                                                          \
    AVX2 static void name(const sqz__qgemm_args *a, const panel *p, int64_t j0, int rows) {     \
        int64_t t = 0;                                                                           \
        for (; t + 4 <= a->m; t += 4) tokens(a, p, C, DIV, Q81, t, 4, j0, rows);                 \
        for (; t < a->m; t++) tokens(a, p, C, DIV, Q81, t, 1, j0, rows);                         \
    }
PANEL_TOKENS(tokens_signed, SIGNED, 0, false) /* Q8_0, IQ4_NL, MXFP4 */
PANEL_TOKENS(tokens_q4_0, U4, 16, false)
PANEL_TOKENS(tokens_q5_0, U5, 8, false)
PANEL_TOKENS(tokens_q4_1, U4, 0, true)
PANEL_TOKENS(tokens_q5_1, U5, 0, true)

/* ---- 256-element super-blocks against Q8_K ------------------------------------------------------
 *   Q4_K, Q5_K: 8 sub-blocks of 32, a scale and a minimum each, codes 0..15 / 0..31;
 *   Q6_K, Q3_K: 16 sub-blocks of 16, signed scales, codes q + 32 (0..63) / q + 4 (0..7) stored;
 *   Q2_K: 16 sub-blocks of 16, a scale and a minimum each, codes 0..3;
 *   IQ4_XS, IQ3_S: 8 sub-blocks of 32, signed scales, signed values stored as they are (IQ4_XS
 *   -127..113, IQ3_S odd, -15..15), multiplied with the sign trick.
 * Per super-block and panel: codes[64][32 bytes] (element order), sc[16][8] int32 (each the row's
 * sub-block scale twice as int16: _mm256_madd_epi16 times the int16 sums of a row's two halves),
 * mn[8][8] int32 (Q4_K / Q5_K: minimums 2j and 2j + 1 as int16, against the Q8_K sums of 32
 * elements 2j and 2j + 1; Q2_K: minimums 2j and 2j + 1 against bsums 2j and 2j + 1; Q6_K / Q3_K:
 * scales 2j and 2j + 1, against bsums 2j and 2j + 1, times the offset), d[8], dmin[8].
 * int16 bounds of a lane's sum of G maddubs (2G products, activations >= -128 in magnitude):
 * Q4_K G 8: 16 * 15 * 128 = 30720; Q5_K G 4: 8 * 31 * 128 = 31744; Q6_K G 2: 4 * 63 * 128 = 32256;
 * Q3_K G 4: 8 * 7 * 128 = 7168; Q2_K G 4: 8 * 3 * 128 = 3072 (G 4: a sub-block of 16 is 4 groups);
 * IQ4_XS G 1: 2 * 127 * 128 = 32512; IQ3_S G 8: 16 * 15 * 128 = 30720. */
enum { KB_CODES = 2048, KB_SC = 16 * PR * 4, KB_MN = 8 * PR * 4, KB_F = 2 * PR * 4 };
enum { KB_BYTES = KB_CODES + KB_SC + KB_MN + KB_F };

static int32_t pair16(int lo, int hi) { return (int32_t)((uint32_t)(uint16_t)lo | (uint32_t)(uint16_t)hi << 16); }

/* One row's super-block: its 256 codes, the sc and mn words of its lane, d, dmin. */
typedef struct kblock {
    uint8_t c[256];
    int32_t sc[16], mn[8];
    float d, dmin;
} kblock;

INL float h2f(const uint16_t *p) {
    uint16_t h;
    memcpy(&h, p, 2);
    return _cvtsh_ss(h);
}

AVX2 static void kdecode_q6(const sqz_block_q6_K *w, kblock *o) {
    kc_q6(w, o->c);
    for (int s = 0; s < 16; s++) o->sc[s] = pair16(w->scales[s], w->scales[s]);
    for (int j = 0; j < 8; j++) o->mn[j] = pair16(w->scales[2 * j], w->scales[2 * j + 1]);
    o->d = h2f(&w->d);
}

/* Q4_K / Q5_K: a scale per sub-block of 32, the minimums of sub-blocks 2j and 2j + 1 paired. */
AVX2 static void kdecode_q45(sqz_dtype t, const uint8_t *blk, kblock *o) {
    const sqz_block_q4_K *w4 = (const sqz_block_q4_K *)(const void *)blk;
    const sqz_block_q5_K *w5 = (const sqz_block_q5_K *)(const void *)blk;
    const bool five = t == SQZ_DTYPE_Q5_K;
    kc_q45(five ? w5->qs : w4->qs, five ? w5->qh : NULL, o->c);
    uint8_t s8[8], m8[8];
    for (int s = 0; s < 8; s++) sqz__get_scale_min_k4(s, five ? w5->scales : w4->scales, &s8[s], &m8[s]);
    for (int s = 0; s < 8; s++) o->sc[s] = pair16(s8[s], s8[s]);
    for (int j = 0; j < 4; j++) o->mn[j] = pair16(m8[2 * j], m8[2 * j + 1]);
    o->d = h2f(&w4->d);
    o->dmin = h2f(&w4->dmin);
}

AVX2 static void kdecode_q2(const sqz_block_q2_K *w, kblock *o) {
    kc_q23(w->qs, NULL, o->c);
    for (int s = 0; s < 16; s++) o->sc[s] = pair16(w->scales[s] & 15, w->scales[s] & 15);
    for (int j = 0; j < 8; j++) o->mn[j] = pair16(w->scales[2 * j] >> 4, w->scales[2 * j + 1] >> 4);
    o->d = h2f(&w->d);
    o->dmin = h2f(&w->dmin);
}

AVX2 static void kdecode_q3(const sqz_block_q3_K *w, kblock *o) {
    int32_t sc[16];
    kc_q23(w->qs, w->hmask, o->c);
    kc_q3_scales(w->scales, sc);
    for (int s = 0; s < 16; s++) o->sc[s] = pair16(sc[s], sc[s]);
    for (int j = 0; j < 8; j++) o->mn[j] = pair16(sc[2 * j], sc[2 * j + 1]);
    o->d = h2f(&w->d);
}

/* IQ4_XS and IQ3_S: the signed values stored (the sign trick), a scale per sub-block of 32. */
AVX2 static void kdecode_iq4xs(const sqz_block_iq4_xs *w, kblock *o) {
    kc_iq4xs(w, o->c);
    for (int s = 0; s < 8; s++) o->sc[s] = pair16(kc_iq4xs_scale(w, s), kc_iq4xs_scale(w, s));
    o->d = h2f(&w->d);
}

AVX2 static void kdecode_iq3s(const sqz_block_iq3_s *w, kblock *o) {
    kc_iq3s(w, o->c);
    for (int s = 0; s < 8; s++) o->sc[s] = pair16(kc_iq3s_scale(w, s), kc_iq3s_scale(w, s));
    o->d = h2f(&w->d);
}

AVX2 static void kdecode(sqz_dtype t, const uint8_t *blk, kblock *o) {
    memset(o->sc, 0, sizeof o->sc);
    memset(o->mn, 0, sizeof o->mn);
    o->dmin = 0.0f;
    switch (t) {
    case SQZ_DTYPE_Q6_K: kdecode_q6((const sqz_block_q6_K *)(const void *)blk, o); break;
    case SQZ_DTYPE_Q3_K: kdecode_q3((const sqz_block_q3_K *)(const void *)blk, o); break;
    case SQZ_DTYPE_Q2_K: kdecode_q2((const sqz_block_q2_K *)(const void *)blk, o); break;
    case SQZ_DTYPE_IQ4_XS: kdecode_iq4xs((const sqz_block_iq4_xs *)(const void *)blk, o); break;
    case SQZ_DTYPE_IQ3_S: kdecode_iq3s((const sqz_block_iq3_s *)(const void *)blk, o); break;
    default: kdecode_q45(t, blk, o); /* Q4_K, Q5_K */
    }
}

AVX2 static void kpack(sqz_dtype t, const sqz__qgemm_args *a, int64_t j0, int rows, uint8_t *p) {
    const int64_t nb = a->k / 256;
    const size_t bs = sqz_dtype_info(t)->type_size;
    if (rows < PR) memset(p, 0, (size_t)nb * KB_BYTES);
    for (int r = 0; r < rows; r++) {
        const uint8_t *w = (const uint8_t *)a->w + (size_t)(j0 + r) * a->row_bytes;
        for (int64_t b = 0; b < nb; b++, w += bs) {
            uint8_t *P = p + (size_t)b * KB_BYTES;
            kblock o;
            float *f = (float *)(void *)(P + KB_CODES + KB_SC + KB_MN);
            kdecode(t, w, &o);
            f[r] = o.d, f[PR + r] = o.dmin;
            for (int g = 0; g < 64; g++) memcpy(P + 32 * g + 4 * r, o.c + 4 * g, 4);
            for (int s = 0; s < 16; s++) memcpy(P + KB_CODES + 4 * (PR * s + r), &o.sc[s], 4);
            for (int s = 0; s < 8; s++) memcpy(P + KB_CODES + KB_SC + 4 * (PR * s + r), &o.mn[s], 4);
        }
    }
}

/* How a super-block type's codes are multiplied: G groups of 4 codes add up in int16 (the bounds
 * above), S groups share a scale, signed (the sign trick) or not; its mn words: 4 (Q4_K / Q5_K's
 * minimums against sums of 32), 8 (against bsums pairs), 0; the codes' offset as a shift of the
 * mn sum (Q6_K 32: 5, Q3_K 4: 2), -1 for none; dmin: the mn sum is a minimum's, times dmin. */
typedef struct kkind {
    int G, S, pairs, shift;
    bool sign, dmin;
} kkind;

static inline kkind kkind_of(sqz_dtype t) {
    switch (t) {
    case SQZ_DTYPE_Q4_K: return (kkind){8, 8, 4, -1, false, true};
    case SQZ_DTYPE_Q5_K: return (kkind){4, 8, 4, -1, false, true};
    case SQZ_DTYPE_Q6_K: return (kkind){2, 4, 8, 5, false, false};
    case SQZ_DTYPE_Q3_K: return (kkind){4, 4, 8, 2, false, false};
    case SQZ_DTYPE_Q2_K: return (kkind){4, 4, 8, -1, false, true};
    case SQZ_DTYPE_IQ4_XS: return (kkind){1, 8, 0, -1, true, false};
    default: return (kkind){8, 8, 0, -1, true, false}; /* IQ3_S */
    }
}

/* T tokens from t0 against a super-block panel of type t: groups of G codes add up in int16, then
 * times the sub-block's scale into isum; the mn words against the activation's sums into msum. */
INL void ktokens(const sqz__qgemm_args *a, const uint8_t *p, sqz_dtype t, int64_t t0, int T, int64_t j0, int rows) {
    const int64_t nb = a->k / 256;
    const kkind K = kkind_of(t);
    const sqz__aq8_K *x[4];
    __m256 acc[4];
    for (int i = 0; i < T; i++) {
        x[i] = (const sqz__aq8_K *)(const void *)(a->xq + (size_t)(t0 + i) * a->xq_bytes);
        acc[i] = _mm256_setzero_ps();
    }
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *P = p + (size_t)b * KB_BYTES;
        __m256i isum[4], msum[4];
        for (int i = 0; i < T; i++) isum[i] = msum[i] = _mm256_setzero_si256();
        for (int g0 = 0; g0 < 64; g0 += K.G) {
            __m256i h[4];
            for (int i = 0; i < T; i++) h[i] = _mm256_setzero_si256();
#pragma GCC unroll 4
            for (int g = g0; g < g0 + K.G; g++) {
                const __m256i w = LD256(P + 32 * g), aw = K.sign ? _mm256_abs_epi8(w) : w;
                for (int i = 0; i < T; i++) {
                    const __m256i xb = bcast4(x[i][b].qs + 4 * g);
                    h[i] = _mm256_add_epi16(h[i], _mm256_maddubs_epi16(aw, K.sign ? _mm256_sign_epi8(xb, w) : xb));
                }
            }
            const __m256i sc = _mm256_load_si256((const __m256i *)(const void *)(P + KB_CODES + 32 * (g0 / K.S)));
            for (int i = 0; i < T; i++) isum[i] = _mm256_add_epi32(isum[i], _mm256_madd_epi16(h[i], sc));
        }
        for (int j = 0; j < K.pairs; j++) { /* 8: mn against bsums 2j, 2j + 1; 4: against the sums of 32 */
            const __m256i mn = _mm256_load_si256((const __m256i *)(const void *)(P + KB_CODES + KB_SC + 32 * j));
            for (int i = 0; i < T; i++) {
                int32_t pr;
                if (K.pairs == 8) {
                    memcpy(&pr, &x[i][b].bsums[2 * j], 4);
                } else {
                    const int16_t *bs = x[i][b].bsums + 4 * j;
                    pr = pair16(bs[0] + bs[1], bs[2] + bs[3]);
                }
                msum[i] = _mm256_add_epi32(msum[i], _mm256_madd_epi16(mn, _mm256_set1_epi32(pr)));
            }
        }
        const float *f = (const float *)(const void *)(P + KB_CODES + KB_SC + KB_MN);
        const __m256 d = _mm256_load_ps(f), dmin = _mm256_load_ps(f + PR);
        for (int i = 0; i < T; i++) {
            const __m256 da = _mm256_set1_ps(x[i][b].d);
            if (K.shift >= 0) isum[i] = _mm256_sub_epi32(isum[i], _mm256_slli_epi32(msum[i], K.shift)); /* the offset */
            acc[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[i]), _mm256_mul_ps(d, da), acc[i]);
            if (K.dmin) acc[i] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(msum[i]), _mm256_mul_ps(dmin, da), acc[i]);
        }
    }
    for (int i = 0; i < T; i++) store_rows(a->y + (t0 + i) * a->n + j0, a->bias ? a->bias + j0 : NULL, acc[i], rows);
}

#define KPANEL_TOKENS(name, TYPE)                                                                \
    AVX2 static void name(const sqz__qgemm_args *a, const uint8_t *p, int64_t j0, int rows) {  \
        int64_t t = 0;                                                                           \
        for (; t + 4 <= a->m; t += 4) ktokens(a, p, TYPE, t, 4, j0, rows);                       \
        for (; t < a->m; t++) ktokens(a, p, TYPE, t, 1, j0, rows);                               \
    }
KPANEL_TOKENS(ktokens_q2_K, SQZ_DTYPE_Q2_K)
KPANEL_TOKENS(ktokens_q3_K, SQZ_DTYPE_Q3_K)
KPANEL_TOKENS(ktokens_q4_K, SQZ_DTYPE_Q4_K)
KPANEL_TOKENS(ktokens_q5_K, SQZ_DTYPE_Q5_K)
KPANEL_TOKENS(ktokens_q6_K, SQZ_DTYPE_Q6_K)
KPANEL_TOKENS(ktokens_iq4_xs, SQZ_DTYPE_IQ4_XS)
KPANEL_TOKENS(ktokens_iq3_s, SQZ_DTYPE_IQ3_S)

static bool is_k(sqz_dtype t) {
    return t == SQZ_DTYPE_Q4_K || t == SQZ_DTYPE_Q5_K || t == SQZ_DTYPE_Q6_K || t == SQZ_DTYPE_Q3_K ||
           t == SQZ_DTYPE_Q2_K || t == SQZ_DTYPE_IQ4_XS || t == SQZ_DTYPE_IQ3_S;
}

/* Every token against a super-block panel of type t. */
AVX2 static void kpanel_tokens(sqz_dtype t, const sqz__qgemm_args *a, const uint8_t *p, int64_t j0, int rows) {
    switch (t) {
    case SQZ_DTYPE_Q2_K: ktokens_q2_K(a, p, j0, rows); break;
    case SQZ_DTYPE_Q3_K: ktokens_q3_K(a, p, j0, rows); break;
    case SQZ_DTYPE_Q4_K: ktokens_q4_K(a, p, j0, rows); break;
    case SQZ_DTYPE_Q5_K: ktokens_q5_K(a, p, j0, rows); break;
    case SQZ_DTYPE_Q6_K: ktokens_q6_K(a, p, j0, rows); break;
    case SQZ_DTYPE_IQ4_XS: ktokens_iq4_xs(a, p, j0, rows); break;
    default: ktokens_iq3_s(a, p, j0, rows); /* IQ3_S */
    }
}

size_t sqz__qgemm_avx2_scratch_bytes(int64_t k) {
    const size_t b32 = (size_t)(k / 32) * (8 * 32 + 2 * PR * sizeof(float)), bk = (size_t)(k / 256) * KB_BYTES;
    return (b32 > bk ? b32 : bk) + 32;
}

bool sqz__qgemm_avx2_has(sqz_dtype t) {
    return t == SQZ_DTYPE_Q8_0 || t == SQZ_DTYPE_Q4_0 || t == SQZ_DTYPE_Q5_0 || t == SQZ_DTYPE_IQ4_NL ||
           t == SQZ_DTYPE_Q4_1 || t == SQZ_DTYPE_Q5_1 || t == SQZ_DTYPE_MXFP4 || is_k(t);
}

AVX2 void sqz__qgemm_avx2_rows(sqz_dtype t, const sqz__qgemm_args *a, int64_t j0, int64_t j1, void *scratch) {
    const int64_t nb = a->k / 32;
    uint8_t *base = (uint8_t *)(((uintptr_t)scratch + 31) & ~(uintptr_t)31);
    const panel p = {.codes = base, .dw = (float *)(void *)(base + (size_t)nb * 256),
                     .mw = (float *)(void *)(base + (size_t)nb * 256) + nb * PR};
    for (int64_t j = j0; j < j1; j += PR) {
        const int rows = j1 - j < PR ? (int)(j1 - j) : PR;
        if (is_k(t)) {
            kpack(t, a, j, rows, base);
            kpanel_tokens(t, a, base, j, rows);
            continue;
        }
        pack(t, a, j, rows, &p);
        switch (t) {
        case SQZ_DTYPE_Q4_0: tokens_q4_0(a, &p, j, rows); break;
        case SQZ_DTYPE_Q5_0: tokens_q5_0(a, &p, j, rows); break;
        case SQZ_DTYPE_Q4_1: tokens_q4_1(a, &p, j, rows); break;
        case SQZ_DTYPE_Q5_1: tokens_q5_1(a, &p, j, rows); break;
        default: tokens_signed(a, &p, j, rows); /* Q8_0, IQ4_NL, MXFP4 */
        }
    }
}

/* xs[t nb + b] = -128 sum of token t's block b: sqz__qgemm_xsums's values, with AVX2. */
AVX2 void sqz__qgemm_xsums_avx2(const uint8_t *xq, size_t xq_bytes, int64_t t0, int64_t t1, int64_t k, int32_t *xs) {
    const int64_t nb = k / 32;
    const __m256i ones8 = _mm256_set1_epi8(1), ones16 = _mm256_set1_epi16(1);
    for (int64_t t = t0; t < t1; t++) {
        const sqz__aq8_0 *x = (const sqz__aq8_0 *)(const void *)(xq + (size_t)t * xq_bytes);
        for (int64_t b = 0; b < nb; b++) {
            const __m256i s = _mm256_madd_epi16(_mm256_maddubs_epi16(ones8, LD256(x[b].qs)), ones16);
            __m128i h = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
            h = _mm_add_epi32(h, _mm_shuffle_epi32(h, _MM_SHUFFLE(1, 0, 3, 2)));
            h = _mm_add_epi32(h, _mm_shuffle_epi32(h, _MM_SHUFFLE(2, 3, 0, 1)));
            xs[t * nb + b] = -128 * _mm_cvtsi128_si32(h);
        }
    }
}

#else
typedef int sqz__qidot_gemm_avx2_empty; /* ISO C: a translation unit is not empty */
#endif

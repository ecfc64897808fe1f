/*
 * kernels/cpu/qidot_gemm_vnni.c - many tokens against the 32-element block types (Q8_0, Q4_0, Q5_0,
 * IQ4_NL, MXFP4 against Q8_0 activations; Q4_1, Q5_1 against Q8_1) and the super-block types
 * (Q2_K .. Q6_K, IQ4_XS, IQ3_S against Q8_K) with AVX-512 VNNI, packed in panels of 16 weight rows
 * (qidot.h: sqz__qgemm_vnni_rows).
 *
 * The several-token kernels of qidot4_vnni.c read one weight row against 4 or 8 tokens: each
 * dpbusd gives the partial sums of one row and one token, and every block's sum must be reduced
 * across lanes before its scales apply. Here, as in llama.cpp's repacked GEMMs, the weights of 16
 * rows are interleaved 4 bytes at a time (lane r of a 64-byte vector holds 4 weights of row r),
 * so one dpbusd against 4 activation bytes broadcast to every lane gives 16 rows' partial sums,
 * and a block's 16 sums are whole after 8 of them: no reduction, the scales applied as a vector
 * (dw of 16 rows times the token's d), one convert and one fma per block, 16 rows and a token.
 *
 * dpbusd multiplies unsigned bytes by signed ones, and the broadcast operand is the signed one:
 * the activations (int8 as quantized) are broadcast, and the weights stored unsigned, w + 128 for
 * the signed types (Q8_0 as stored, Q4_0 q - 8, Q5_0 q - 16, IQ4_NL's and MXFP4's tables), so each row's
 * block sum starts at -128 sum(x) (sqz__qgemm_xsums, once per token and block) and ends at the
 * reference's integer sum(w x) exactly. Q4_1 / Q5_1 store q (0..15, 0..31) as it is, and add
 * m sum(x) d_x from the activation's s, as the reference does. Every integer block sum is the
 * scalar reference's (qidot_ref.c); the f32 sums run over the blocks in order, each term an fma
 * where the reference rounds the product first (the float order may differ, as qidot.h says).
 *
 * A panel is packed once per call (per 16 rows: decode each block, store its 8 groups of 4 bytes
 * in their lanes) and then multiplied against all the call's tokens, 8, then 4, then 1 at a time.
 */
#include "kernels/cpu/qidot.h"

#if SQZ__QMM_X86
#include <immintrin.h>
#include <stdlib.h>
#include <string.h>

#include "core/dequant.h"
#include "kernels/cpu/qidot_kcodes.h"

#define VNNI __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")))
#define INL VNNI static inline __attribute__((always_inline))
#define LD128(p) _mm_loadu_si128((const __m128i *)(const void *)(p))
#define LD256(p) _mm256_loadu_si256((const __m256i *)(const void *)(p))

enum { PR = 16 }; /* rows per panel */

/* The 32 codes of one block as unsigned bytes (w + 128, or Q4_1 / Q5_1's q), its d and m. */
INL __m256i fifth(__m256i u, const uint8_t *qh) {
    uint32_t h;
    memcpy(&h, qh, 4);
    return _mm256_mask_add_epi8(u, (__mmask32)h, u, _mm256_set1_epi8(16));
}
INL __m256i decode(sqz_dtype t, const uint8_t *blk, float *d, float *m) {
    if (t == SQZ_DTYPE_MXFP4) { /* e, then E2M1 codes: w = 2^(e-128) kvalues_fp4[q] */
        *d = sqz__e8m0_half(blk[0]);
        *m = 0.0f;
        const __m256i lut = _mm256_broadcastsi128_si256(LD128(sqz__kvalues_fp4));
        return _mm256_xor_si256(_mm256_shuffle_epi8(lut, kc_nibbles(blk + 1)), _mm256_set1_epi8((char)0x80));
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
    case SQZ_DTYPE_Q8_0: return _mm256_xor_si256(LD256(blk + 2), _mm256_set1_epi8((char)0x80));
    case SQZ_DTYPE_Q4_0: return _mm256_add_epi8(kc_nibbles(blk + 2), _mm256_set1_epi8(120));
    case SQZ_DTYPE_Q5_0: return _mm256_add_epi8(fifth(kc_nibbles(blk + 6), blk + 2), _mm256_set1_epi8(112));
    case SQZ_DTYPE_IQ4_NL: {
        const __m256i lut = _mm256_broadcastsi128_si256(LD128(sqz__kvalues_iq4nl));
        return _mm256_xor_si256(_mm256_shuffle_epi8(lut, kc_nibbles(blk + 2)), _mm256_set1_epi8((char)0x80));
    }
    case SQZ_DTYPE_Q4_1: return kc_nibbles(blk + 4);
    default: return fifth(kc_nibbles(blk + 8), blk + 4); /* Q5_1 */
    }
}

/* The panel of rows [j0, j0 + rows): codes[b][s] (64 bytes: lane r = weights 4s..4s+3 of row r's
 * block b), dw[b][r], mw[b][r]; rows past the end have zero scales (their lanes are not stored). */
typedef struct panel {
    uint8_t *codes;
    float *dw, *mw;
} panel;

VNNI static void pack(sqz_dtype t, const sqz__qgemm_args *a, int64_t j0, int rows, const panel *p) {
    const int64_t nb = a->k / 32;
    const size_t bs = sqz_dtype_info(t)->type_size;
    if (rows < PR) {
        memset(p->codes, 0x80, (size_t)nb * 8 * 64);
        memset(p->dw, 0, (size_t)nb * PR * sizeof(float));
        memset(p->mw, 0, (size_t)nb * PR * sizeof(float));
    }
    for (int r = 0; r < rows; r++) {
        const uint8_t *w = (const uint8_t *)a->w + (size_t)(j0 + r) * a->row_bytes;
        for (int64_t b = 0; b < nb; b++, w += bs) {
            uint32_t u[8];
            _mm256_storeu_si256((__m256i *)(void *)u, decode(t, w, &p->dw[b * PR + r], &p->mw[b * PR + r]));
            uint8_t *c = p->codes + (size_t)b * 512 + 4 * r;
            for (int s = 0; s < 8; s++) memcpy(c + 64 * s, &u[s], 4);
        }
    }
}

/* T tokens from t0 against the packed panel: y[(t0 + i) n + j0 + r] for the lanes in mask. */
INL void tokens(const sqz__qgemm_args *a, const panel *p, bool q81, int64_t t0, int T, int64_t j0,
                __mmask16 mask) {
    const int64_t nb = a->k / 32;
    const size_t bsz = q81 ? sizeof(sqz__aq8_1) : sizeof(sqz__aq8_0);
    const size_t qo = q81 ? offsetof(sqz__aq8_1, qs) : offsetof(sqz__aq8_0, qs);
    const uint8_t *x[8];
    __m512 acc[8];
    for (int i = 0; i < T; i++) {
        x[i] = a->xq + (size_t)(t0 + i) * a->xq_bytes;
        acc[i] = _mm512_setzero_ps();
    }
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *c = p->codes + (size_t)b * 512;
        __m512i s[8];
        for (int i = 0; i < T; i++)
            s[i] = q81 ? _mm512_setzero_si512() : _mm512_set1_epi32(a->xs[(t0 + i) * nb + b]);
        for (int g = 0; g < 8; g++) {
            const __m512i w = _mm512_loadu_si512((const void *)(c + 64 * g));
            for (int i = 0; i < T; i++) {
                int32_t q4;
                memcpy(&q4, x[i] + (size_t)b * bsz + qo + 4 * g, 4);
                s[i] = _mm512_dpbusd_epi32(s[i], w, _mm512_set1_epi32(q4));
            }
        }
        const __m512 dw = _mm512_loadu_ps(p->dw + b * PR);
        for (int i = 0; i < T; i++) {
            float da;
            memcpy(&da, x[i] + (size_t)b * bsz, 4);
            acc[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s[i]), _mm512_mul_ps(dw, _mm512_set1_ps(da)), acc[i]);
        }
        if (q81) {
            const __m512 mw = _mm512_loadu_ps(p->mw + b * PR);
            for (int i = 0; i < T; i++) {
                float sa;
                memcpy(&sa, x[i] + (size_t)b * bsz + offsetof(sqz__aq8_1, s), 4);
                acc[i] = _mm512_fmadd_ps(mw, _mm512_set1_ps(sa), acc[i]);
            }
        }
    }
    const __m512 bias = a->bias ? _mm512_maskz_loadu_ps(mask, a->bias + j0) : _mm512_setzero_ps();
    for (int i = 0; i < T; i++) _mm512_mask_storeu_ps(a->y + (t0 + i) * a->n + j0, mask, _mm512_add_ps(acc[i], bias));
}

VNNI static void panel_tokens(const sqz__qgemm_args *a, const panel *p, bool q81, int64_t j0, __mmask16 mask) {
    int64_t t = 0;
    for (; t + 8 <= a->m; t += 8) tokens(a, p, q81, t, 8, j0, mask);
    for (; t + 4 <= a->m; t += 4) tokens(a, p, q81, t, 4, j0, mask);
    for (; t < a->m; t++) tokens(a, p, q81, t, 1, j0, mask);
}

/* ---- 256-element super-blocks against Q8_K: Q4_K, Q5_K (8 sub-blocks of 32, scale and minimum
 * each), Q6_K and Q3_K (16 sub-blocks of 16, signed scales, codes q - 32 and q - 4), Q2_K (16 of 16,
 * scale and minimum each), IQ4_XS and IQ3_S (8 of 32, signed values stored + 128) -----------------
 * A sub-block's 16 row sums come whole out of its dpbusds as for the 32-blocks; they are multiplied
 * by the rows' integer scales (vpmulld) and summed in int32 over the super-block, as the reference
 * forms isum. The minimums take the Q8_K's 16-element sums in pairs (vpdpwssd: m_2j and m_2j+1
 * times bsum[2j] and bsum[2j + 1]; Q4_K / Q5_K's m_j twice); a type whose codes are stored with an
 * offset (Q6_K 32, Q3_K 4, the IQ types 128) starts each sub-block of 16 at -offset bsum. Per
 * super-block and panel: codes[64][64 bytes], sc[16][16] int32, mn[8][16] (two int16), d[16],
 * dmin[16]. */
enum { KB_CODES = 4096, KB_SC = 16 * PR * 4, KB_MN = 8 * PR * 4, KB_F = 2 * PR * 4 };
enum { KB_BYTES = KB_CODES + KB_SC + KB_MN + KB_F };

/* One row's super-block: its 256 codes (unsigned), a scale per sub-block of 16, the minimums in
 * pairs (low half m_2j, high half m_2j+1), d and dmin. */
typedef struct kblock {
    uint8_t c[256];
    int32_t sc[16], mn[8];
    float d, dmin;
} kblock;

/* The code offset of a super-block type: 0 where it has minimums instead. */
static int koffset(sqz_dtype t) {
    switch (t) {
    case SQZ_DTYPE_Q6_K: return 32;
    case SQZ_DTYPE_Q3_K: return 4;
    case SQZ_DTYPE_IQ4_XS: case SQZ_DTYPE_IQ3_S: return 128;
    default: return 0; /* Q2_K, Q4_K, Q5_K */
    }
}

INL float h2f(const uint16_t *p) {
    uint16_t h;
    memcpy(&h, p, 2);
    return _cvtsh_ss(h);
}

/* The IQ types' signed values stored + 128. */
INL void plus128(uint8_t c[256]) {
    for (int i = 0; i < 256; i += 32) kc_store(c + i, _mm256_xor_si256(LD256(c + i), _mm256_set1_epi8((char)0x80)));
}

VNNI static void kdecode_q6(const sqz_block_q6_K *w, kblock *o) {
    kc_q6(w, o->c);
    for (int s = 0; s < 16; s++) o->sc[s] = w->scales[s];
    o->d = h2f(&w->d);
}

/* Q4_K / Q5_K: 8 sub-blocks of 32, a scale and a minimum each (the minimum twice in its pair). */
VNNI static void kdecode_q45(sqz_dtype t, const uint8_t *blk, kblock *o) {
    const sqz_block_q4_K *w4 = (const sqz_block_q4_K *)(const void *)blk;
    const sqz_block_q5_K *w5 = (const sqz_block_q5_K *)(const void *)blk;
    const bool five = t == SQZ_DTYPE_Q5_K;
    kc_q45(five ? w5->qs : w4->qs, five ? w5->qh : NULL, o->c);
    for (int s = 0; s < 8; s++) {
        uint8_t a, m;
        sqz__get_scale_min_k4(s, five ? w5->scales : w4->scales, &a, &m);
        o->sc[2 * s] = o->sc[2 * s + 1] = a;
        o->mn[s] = m | m << 16;
    }
    o->d = h2f(&w4->d);
    o->dmin = h2f(&w4->dmin);
}

VNNI static void kdecode_q2(const sqz_block_q2_K *w, kblock *o) {
    kc_q23(w->qs, NULL, o->c);
    for (int s = 0; s < 16; s++) o->sc[s] = w->scales[s] & 15;
    for (int j = 0; j < 8; j++) o->mn[j] = (w->scales[2 * j] >> 4) | (w->scales[2 * j + 1] >> 4) << 16;
    o->d = h2f(&w->d);
    o->dmin = h2f(&w->dmin);
}

VNNI static void kdecode_q3(const sqz_block_q3_K *w, kblock *o) {
    kc_q23(w->qs, w->hmask, o->c);
    kc_q3_scales(w->scales, o->sc);
    o->d = h2f(&w->d);
}

VNNI static void kdecode_iq4xs(const sqz_block_iq4_xs *w, kblock *o) {
    kc_iq4xs(w, o->c);
    plus128(o->c);
    for (int s = 0; s < 8; s++) o->sc[2 * s] = o->sc[2 * s + 1] = kc_iq4xs_scale(w, s);
    o->d = h2f(&w->d);
}

VNNI static void kdecode_iq3s(const sqz_block_iq3_s *w, kblock *o) {
    kc_iq3s(w, o->c);
    plus128(o->c);
    for (int s = 0; s < 8; s++) o->sc[2 * s] = o->sc[2 * s + 1] = kc_iq3s_scale(w, s);
    o->d = h2f(&w->d);
}

VNNI static void kdecode(sqz_dtype t, const uint8_t *blk, kblock *o) {
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

VNNI static void kpack(sqz_dtype t, const sqz__qgemm_args *a, int64_t j0, int rows, uint8_t *p) {
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
            for (int g = 0; g < 64; g++) memcpy(P + 64 * g + 4 * r, o.c + 4 * g, 4);
            for (int s = 0; s < 16; s++) memcpy(P + KB_CODES + 4 * (PR * s + r), &o.sc[s], 4);
            for (int s = 0; s < 8; s++) memcpy(P + KB_CODES + KB_SC + 4 * (PR * s + r), &o.mn[s], 4);
        }
    }
}

/* T tokens from t0 against a super-block panel; off: the codes' offset (0: minimums instead). */
INL void ktokens(const sqz__qgemm_args *a, const uint8_t *p, int off, int64_t t0, int T, int64_t j0,
                 __mmask16 mask) {
    const int64_t nb = a->k / 256;
    const sqz__aq8_K *x[8];
    __m512 acc[8];
    for (int i = 0; i < T; i++) {
        x[i] = (const sqz__aq8_K *)(const void *)(a->xq + (size_t)(t0 + i) * a->xq_bytes);
        acc[i] = _mm512_setzero_ps();
    }
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *P = p + (size_t)b * KB_BYTES;
        __m512i isum[8], msum[8];
        for (int i = 0; i < T; i++) isum[i] = msum[i] = _mm512_setzero_si512();
        for (int s = 0; s < 16; s++) { /* sub-blocks of 16: 4 groups of 4 codes */
            const __m512i sc = _mm512_loadu_si512((const void *)(P + KB_CODES + 64 * s));
            __m512i t[8];
            for (int i = 0; i < T; i++) t[i] = _mm512_set1_epi32(-off * x[i][b].bsums[s]);
            for (int g = 0; g < 4; g++) {
                const __m512i w = _mm512_loadu_si512((const void *)(P + 64 * (4 * s + g)));
                for (int i = 0; i < T; i++) {
                    int32_t q4;
                    memcpy(&q4, x[i][b].qs + 16 * s + 4 * g, 4);
                    t[i] = _mm512_dpbusd_epi32(t[i], w, _mm512_set1_epi32(q4));
                }
            }
            for (int i = 0; i < T; i++) isum[i] = _mm512_add_epi32(isum[i], _mm512_mullo_epi32(t[i], sc));
        }
        const float *f = (const float *)(const void *)(P + KB_CODES + KB_SC + KB_MN);
        const __m512 d = _mm512_loadu_ps(f), dmin = _mm512_loadu_ps(f + PR);
        for (int j = 0; !off && j < 8; j++) {
            const __m512i mn = _mm512_loadu_si512((const void *)(P + KB_CODES + KB_SC + 64 * j));
            for (int i = 0; i < T; i++) {
                int32_t bs2;
                memcpy(&bs2, &x[i][b].bsums[2 * j], 4);
                msum[i] = _mm512_dpwssd_epi32(msum[i], mn, _mm512_set1_epi32(bs2));
            }
        }
        for (int i = 0; i < T; i++) {
            const __m512 da = _mm512_set1_ps(x[i][b].d);
            acc[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[i]), _mm512_mul_ps(d, da), acc[i]);
            if (!off) acc[i] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(msum[i]), _mm512_mul_ps(dmin, da), acc[i]);
        }
    }
    const __m512 bias = a->bias ? _mm512_maskz_loadu_ps(mask, a->bias + j0) : _mm512_setzero_ps();
    for (int i = 0; i < T; i++) _mm512_mask_storeu_ps(a->y + (t0 + i) * a->n + j0, mask, _mm512_add_ps(acc[i], bias));
}

VNNI static void kpanel_tokens(const sqz__qgemm_args *a, const uint8_t *p, int off, int64_t j0, __mmask16 mask) {
    int64_t t = 0;
    for (; t + 8 <= a->m; t += 8) ktokens(a, p, off, t, 8, j0, mask);
    for (; t + 4 <= a->m; t += 4) ktokens(a, p, off, t, 4, j0, mask);
    for (; t < a->m; t++) ktokens(a, p, off, t, 1, j0, mask);
}

static bool is_k(sqz_dtype t) {
    return t == SQZ_DTYPE_Q4_K || t == SQZ_DTYPE_Q5_K || t == SQZ_DTYPE_Q6_K || t == SQZ_DTYPE_Q3_K ||
           t == SQZ_DTYPE_Q2_K || t == SQZ_DTYPE_IQ4_XS || t == SQZ_DTYPE_IQ3_S;
}

size_t sqz__qgemm_scratch_bytes(int64_t k) {
    const size_t b32 = (size_t)(k / 32) * (8 * 64 + 2 * PR * sizeof(float)), bk = (size_t)(k / 256) * KB_BYTES;
    return (b32 > bk ? b32 : bk) + 64;
}

bool sqz__qgemm_vnni_has(sqz_dtype t) {
    return t == SQZ_DTYPE_Q8_0 || t == SQZ_DTYPE_Q4_0 || t == SQZ_DTYPE_Q5_0 || t == SQZ_DTYPE_IQ4_NL ||
           t == SQZ_DTYPE_Q4_1 || t == SQZ_DTYPE_Q5_1 || t == SQZ_DTYPE_MXFP4 || is_k(t);
}

void sqz__qgemm_vnni_rows(sqz_dtype t, const sqz__qgemm_args *a, int64_t j0, int64_t j1, void *scratch) {
    const int64_t nb = a->k / 32;
    uint8_t *base = (uint8_t *)(((uintptr_t)scratch + 63) & ~(uintptr_t)63);
    const panel p = {.codes = base, .dw = (float *)(void *)(base + (size_t)nb * 512),
                     .mw = (float *)(void *)(base + (size_t)nb * 512) + nb * PR};
    const bool q81 = t == SQZ_DTYPE_Q4_1 || t == SQZ_DTYPE_Q5_1;
    for (int64_t j = j0; j < j1; j += PR) {
        const int rows = j1 - j < PR ? (int)(j1 - j) : PR;
        const __mmask16 mask = (__mmask16)((1u << rows) - 1u);
        if (is_k(t)) {
            kpack(t, a, j, rows, base);
            kpanel_tokens(a, base, koffset(t), j, mask);
        } else {
            pack(t, a, j, rows, &p);
            panel_tokens(a, &p, q81, j, mask);
        }
    }
}

/* xs[t nb + b] = -128 sum of token t's block b (the signed types' correction). */
VNNI void sqz__qgemm_xsums(const uint8_t *xq, size_t xq_bytes, int64_t t0, int64_t t1, int64_t k, int32_t *xs) {
    const int64_t nb = k / 32;
    const __m256i ones = _mm256_set1_epi8(1);
    for (int64_t t = t0; t < t1; t++) {
        const sqz__aq8_0 *x = (const sqz__aq8_0 *)(const void *)(xq + (size_t)t * xq_bytes);
        for (int64_t b = 0; b < nb; b++) {
            const __m256i s = _mm256_dpbusd_epi32(_mm256_setzero_si256(), ones, LD256(x[b].qs));
            __m128i h = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
            h = _mm_add_epi32(h, _mm_shuffle_epi32(h, _MM_SHUFFLE(1, 0, 3, 2)));
            h = _mm_add_epi32(h, _mm_shuffle_epi32(h, _MM_SHUFFLE(2, 3, 0, 1)));
            xs[t * nb + b] = -128 * _mm_cvtsi128_si32(h);
        }
    }
}

#endif

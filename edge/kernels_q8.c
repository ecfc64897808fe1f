/*
 * edge/kernels_q8.c - --activations q8: matrix products with the input vector quantized as
 * llama.cpp's ggml-cpu quantizes it (sqz's kernels/cpu/qidot.h, the rules copied for this C99
 * runtime), then multiplied in integers:
 *   - per 32 values: amax = max |x|, d = amax / 127 rounded to fp16 (RNE) and back, codes
 *     q = rintf(x * (127 / amax)) (half to even); a block holding a NaN or an infinity gets
 *     d = NaN (its products are NaN, as the float path's); s = (amax / 127) * sum(q) in f32;
 *   - q8_0 / q4_0 weights: per block d_w d_x sum(w_q q), the sum an exact int32;
 *     q4_1 (w = d_w q_w + m_w): d_w d_x sum(q_w q) + m_w s;
 *   - f16 weights: x rounded to fp16 (RNE), then the float product of edge/kernels.c;
 *     f32 weights and sqz's int8 / int4 schemes: the float product, x as it is.
 * The integer sums are the same in every variant; the variants differ only in the order of
 * the float sums across blocks. q4_0 in 8-row groups (bundle dtype 64, edge/q4x8.c) has a kernel
 * of its own on x86 (idot_x8: a block column of 8 rows per pass), in the reference's order. Variants, chosen when compiling: AVX2 (maddubs + madd),
 * AVX-512 VNNI (dpbusd, with SQZE_AVX512 where the compiler targets avx512vnni + avx512vl),
 * NEON (vmull; sdot with __ARM_FEATURE_DOTPROD), plain C (the reference) otherwise.
 */
#include <math.h>
#include <string.h>

#include "edge/simd.h"

#if USE_AVX2 && defined(SQZE_AVX512) && defined(__AVX512VNNI__) && defined(__AVX512VL__)
#define Q8_VNNI 1
#define Q8_KERNELS "avx512vnni"
#elif USE_AVX2
#define Q8_KERNELS "avx2"
#elif USE_NEON && defined(__ARM_FEATURE_DOTPROD)
#define Q8_KERNELS "neon-dot"
#elif USE_NEON
#define Q8_KERNELS "neon"
#else
#define Q8_KERNELS "scalar"
#endif

const char *sqze_kernels_q8(void) { return Q8_KERNELS; }

static float bits_f(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* fp32 to fp16, round to nearest even (sqz's core/fp16.c, FP16 library's scheme) */
uint16_t sqze__fp32_to_fp16(float f) {
    float base = (fabsf(f) * 0x1.0p+112f) * 0x1.0p-110f;
    uint32_t w;
    memcpy(&w, &f, 4);
    const uint32_t shl1_w = w + w, sign = w & 0x80000000u;
    uint32_t bias = shl1_w & 0xFF000000u;
    if (bias < 0x71000000u) bias = 0x71000000u;
    base = bits_f((bias >> 1) + 0x07800000u) + base;
    uint32_t bits;
    memcpy(&bits, &base, 4);
    const uint32_t nonsign = ((bits >> 13) & 0x7C00u) + (bits & 0x0FFFu);
    return (uint16_t)((sign >> 16) | (shl1_w > 0xFF000000u ? 0x7E00u : nonsign));
}


/* One block of 32 (qidot_ref.c's q8_block32): the codes, d (fp16's value); returns s. */
static float q8_block32(const float *x, int8_t *qs, float *d_out) {
    float amax = 0.0f;
    int finite = 1;
    for (int j = 0; j < 32; j++) {
        finite &= isfinite(x[j]) != 0;
        if (fabsf(x[j]) > amax) amax = fabsf(x[j]);
    }
    if (!finite) {
        *d_out = NAN;
        memset(qs, 0, 32);
        return NAN;
    }
    const float d = amax / 127.0f;
    float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    if (!isfinite(id)) id = 0.0f; /* amax below 127 / FLT_MAX: d is fp16 zero, so are the codes */
    *d_out = sqze__fp16_to_f32(sqze__fp32_to_fp16(d));
    int32_t sum = 0;
    for (int j = 0; j < 32; j++) {
        const float v = rintf(x[j] * id); /* the default rounding mode: half to even */
        qs[j] = (int8_t)(v > 127.0f ? 127 : v < -128.0f ? -128 : (int)v);
        sum += qs[j];
    }
    return d * (float)sum;
}

void sqze__xin_init(sqze_xin *in, const sqze_model *m, const float *x, uint32_t k) {
    in->x = x;
    in->k = k;
    in->q8 = m->acts == SQZE_ACTS_Q8;
    in->have_q = in->have_h = 0;
    in->qs = m->xq;
    in->d = m->xq_d;
    in->s = m->xq_s;
    in->h = m->xh;
    in->c = m->xq_c;
    in->cb = m->xq_cb;
}

/* ---- one row against the quantized x, per weight type ---- */

#if USE_AVX2
/* acc + 8 int32 sums of 4 products u8 x s8 each: exact, since the unsigned side here is at most
 * 128 (|q8_0 code|) and x's codes at most 127, so maddubs' int16 pairs (<= 32512) never saturate */
static __m256i dot_us(__m256i acc, __m256i u, __m256i s) {
#if Q8_VNNI
    return _mm256_dpbusd_epi32(acc, u, s);
#else
    return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1)));
#endif
}
/* a q4 block's 16 bytes as 32 nibbles in element order (low nibbles 0..15, high 16..31) */
static __m256i nibbles(const uint8_t *p) {
    const __m128i r = _mm_loadu_si128((const __m128i *)(const void *)p);
    const __m256i v = _mm256_inserti128_si256(_mm256_castsi128_si256(r), _mm_srli_epi16(r, 4), 1);
    return _mm256_and_si256(v, _mm256_set1_epi8(0x0F));
}
/* the fp16 at p in 8 lanes */
static __m256 h2f8(const uint8_t *p) { return _mm256_cvtph_ps(_mm_set1_epi16((short)rd16(p))); }

/* Rows w + i rb (i < nr <= 4) against the quantized x, into out[i]; t: 0 q8_0, 1 q4_0, 2 q4_1.
 * q8_0: |w| . (x with w's sign); q4_0: the unsigned nibbles . x plus -8 sum(x) per lane (c,
 * computed with the codes); q4_1: the nibbles . x, and m s. Per block the lanes are exact int32
 * sums, then scaled by d_w d_x in f32. */
static inline void idot_avx2(const uint8_t *w, size_t rb, uint32_t nr, const sqze_xin *in, uint32_t nb, int t, float *out) {
    const uint32_t bs = t == 0 ? 34 : t == 1 ? 18 : 20, qo = t == 2 ? 4 : 2;
    __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    float m[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (uint32_t b = 0; b < nb; b++) {
        const __m256i x = _mm256_loadu_si256((const __m256i *)(const void *)(in->qs + 32 * b));
        const __m256i c = t == 1 ? _mm256_loadu_si256((const __m256i *)(const void *)(in->c + 8 * b))
                                 : _mm256_setzero_si256();
        const __m256 dx = _mm256_set1_ps(in->d[b]);
        /* the rows ahead, a line per block (two for q8_0): from DRAM 12.5 -> 17 GB/s on the
         * q4_0 embedding's shape (49152 x 576 x 8, EPYC, AVX-512 VNNI), where the hardware's
         * prefetch alone leaves the loads waiting (a prefetch never faults) */
        const char *pf = (const char *)(w + 4096 + (size_t)b * nr * bs);
        _mm_prefetch(pf, _MM_HINT_T0);
        if (t == 0) _mm_prefetch(pf + 64, _MM_HINT_T0);
        for (uint32_t i = 0; i < nr; i++) {
            const uint8_t *p = w + i * rb + (size_t)b * bs;
            __m256i dot;
            if (t == 0) {
                const __m256i q = _mm256_loadu_si256((const __m256i *)(const void *)(p + qo));
                dot = dot_us(_mm256_setzero_si256(), _mm256_sign_epi8(q, q), _mm256_sign_epi8(x, q));
            } else {
                dot = dot_us(c, nibbles(p + qo), x);
            }
            acc[i] = _mm256_fmadd_ps(_mm256_mul_ps(h2f8(p), dx), _mm256_cvtepi32_ps(dot), acc[i]);
            if (t == 2) m[i] += h2f(p + 2) * in->s[b];
        }
    }
    for (uint32_t i = 0; i < nr; i++) out[i] = hsum(acc[i]) + m[i];
}

/* Rows 8g..8g+7 of a q4_0 matrix in 8-row groups (grp: the group's first block column) against the
 * quantized x. Per block column the 8 rows' exact int32 sums come out of one pass over 128 code
 * bytes: each 8 code bytes of a row meet the same 8 codes of x (broadcast to every row), so a row's
 * sum gathers in two adjacent lanes. Then, per row, sum += (d_w d_x) s in f32 in block order:
 * idot_ref's arithmetic exactly, only 8 rows at a time. */
static void idot_x8(const uint8_t *grp, const sqze_xin *in, uint32_t nb, float *out) {
    __m256 acc = _mm256_setzero_ps();
    for (uint32_t b = 0; b < nb; b++, grp += 144) {
        const int8_t *xq = in->qs + 32 * b;
        long long x0, x1, x2, x3; /* codes 0..7, 8..15, 16..23, 24..31 */
        memcpy(&x0, xq, 8);
        memcpy(&x1, xq + 8, 8);
        memcpy(&x2, xq + 16, 8);
        memcpy(&x3, xq + 24, 8);
        _mm_prefetch((const char *)grp + 2048, _MM_HINT_T0);
        _mm_prefetch((const char *)grp + 2048 + 64, _MM_HINT_T0);
        const __m256i m4 = _mm256_set1_epi8(0x0F);
        const __m256i X0 = _mm256_set1_epi64x(x0), X1 = _mm256_set1_epi64x(x1), X2 = _mm256_set1_epi64x(x2),
                      X3 = _mm256_set1_epi64x(x3);
        __m256i s4[2];
        for (int h = 0; h < 2; h++) { /* rows 0..3, then 4..7 */
            const __m256i A = _mm256_loadu_si256((const __m256i *)(const void *)(grp + 16 + 32 * h));
            const __m256i B = _mm256_loadu_si256((const __m256i *)(const void *)(grp + 80 + 32 * h));
            __m256i t = dot_us(_mm256_setzero_si256(), _mm256_and_si256(A, m4), X0);
            t = dot_us(t, _mm256_and_si256(_mm256_srli_epi16(A, 4), m4), X2);
            t = dot_us(t, _mm256_and_si256(B, m4), X1);
            s4[h] = dot_us(t, _mm256_and_si256(_mm256_srli_epi16(B, 4), m4), X3);
        }
        /* lanes (r0 r0 r1 r1 | r2 r2 r3 r3) and (r4 .. r7): pairs added, then put in row order */
        __m256i s8 = _mm256_permutevar8x32_epi32(_mm256_hadd_epi32(s4[0], s4[1]),
                                                 _mm256_setr_epi32(0, 1, 4, 5, 2, 3, 6, 7));
        s8 = _mm256_add_epi32(s8, _mm256_set1_epi32(in->cb[b]));
        const __m256 sc = _mm256_mul_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)grp)),
                                        _mm256_set1_ps(in->d[b]));
        acc = _mm256_add_ps(acc, _mm256_mul_ps(sc, _mm256_cvtepi32_ps(s8)));
    }
    _mm256_storeu_ps(out, acc);
}
#endif

#if USE_NEON
/* 4 int32 sums of products of 16 + 16 int8 pairs */
static int32x4_t dot16x2(int8x16_t w0, int8x16_t x0, int8x16_t w1, int8x16_t x1) {
#if defined(__ARM_FEATURE_DOTPROD)
    return vdotq_s32(vdotq_s32(vdupq_n_s32(0), w0, x0), w1, x1);
#else
    const int16x8_t p0 = vmull_s8(vget_low_s8(w0), vget_low_s8(x0)), p1 = vmull_s8(vget_high_s8(w0), vget_high_s8(x0));
    const int16x8_t p2 = vmull_s8(vget_low_s8(w1), vget_low_s8(x1)), p3 = vmull_s8(vget_high_s8(w1), vget_high_s8(x1));
    return vaddq_s32(vaddq_s32(vpaddlq_s16(p0), vpaddlq_s16(p1)), vaddq_s32(vpaddlq_s16(p2), vpaddlq_s16(p3)));
#endif
}

static float idot_neon(sqze_q4row g, const sqze_xin *in, uint32_t nb, int t) {
    const uint8x16_t m4 = vdupq_n_u8(0x0F);
    const int8x16_t off = vdupq_n_s8(t == 1 ? 8 : 0);
    float32x4_t a0 = vdupq_n_f32(0), a1 = vdupq_n_f32(0);
    float m = 0.0f;
    const uint8_t *w = g.base;
    for (uint32_t b = 0; b < nb; b++, w += g.stride) {
        const int8x16_t x0 = vld1q_s8(in->qs + 32 * b), x1 = vld1q_s8(in->qs + 32 * b + 16);
        int8x16_t w0, w1;
        if (t == 0) {
            w0 = vld1q_s8((const int8_t *)(w + 2));
            w1 = vld1q_s8((const int8_t *)(w + 18));
        } else {
            const uint8x16_t r = vcombine_u8(vld1_u8(w + g.qa), vld1_u8(w + g.qb));
            w0 = vsubq_s8(vreinterpretq_s8_u8(vandq_u8(r, m4)), off);
            w1 = vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(r, 4)), off);
        }
        const float32x4_t p = vcvtq_f32_s32(dot16x2(w0, x0, w1, x1));
        if (b & 1) a1 = vfmaq_n_f32(a1, p, h2f(w + g.d) * in->d[b]);
        else a0 = vfmaq_n_f32(a0, p, h2f(w + g.d) * in->d[b]);
        if (t == 2) m += h2f(w + g.m) * in->s[b];
    }
    return vaddvq_f32(vaddq_f32(a0, a1)) + m;
}
#endif

#if !USE_AVX2 && !USE_NEON
/* the reference: per block the exact int32 sum, times d_w d_x (qidot_ref.c); q8_0 rows have
 * their 32 codes at +2 of each 34-byte block (g from q8_row) */
static float idot_ref(sqze_q4row g, const sqze_xin *in, uint32_t nb, int t) {
    float sum = 0.0f;
    const uint8_t *w = g.base;
    for (uint32_t b = 0; b < nb; b++, w += g.stride) {
        const int8_t *x = in->qs + 32 * b;
        int32_t s = 0;
        if (t == 0) {
            for (int j = 0; j < 32; j++) s += (int8_t)w[2 + j] * x[j];
        } else {
            uint8_t q[16];
            memcpy(q, w + g.qa, 8);
            memcpy(q + 8, w + g.qb, 8);
            const int o = t == 1 ? 8 : 0;
            for (int j = 0; j < 16; j++) s += ((q[j] & 0x0F) - o) * x[j] + ((q[j] >> 4) - o) * x[j + 16];
        }
        sum += (h2f(w + g.d) * in->d[b]) * (float)s;
        if (t == 2) sum += h2f(w + g.m) * in->s[b];
    }
    return sum;
}
#endif

#if !USE_AVX2
/* row r's blocks: q4 rows through sqze__q4row; q8_0 rows plainly (stride 34, d at 0) */
static sqze_q4row row_geo(const sqze_w *w, uint32_t r, int t) {
    if (t != 0) return sqze__q4row(w->data, w->dtype, r, w->cols);
    sqze_q4row g = {w->data + (size_t)r * (w->cols / 32) * 34, 34, 0, 0, 2, 18};
    return g;
}
#endif

void sqze__matvec_x(const sqze_w *w, sqze_xin *in, float *y) {
    const uint32_t dt = w->dtype;
    const int t = dt == SQZB_DT_Q8_0 ? 0 : dt == SQZB_DT_Q4_0 || dt == SQZB_DT_Q4_0_X8 ? 1 : dt == SQZB_DT_Q4_1 ? 2 : -1;
    if (!in->q8 || (t < 0 && dt != SQZB_DT_F16)) { /* f32 weights, sqz's schemes: x as it is */
        sqze__matvec(w, in->x, y);
        return;
    }
    if (t < 0) { /* f16: x rounded to fp16 */
        if (!in->have_h)
            for (uint32_t i = 0; i < in->k; i++) in->h[i] = sqze__fp16_to_f32(sqze__fp32_to_fp16(in->x[i]));
        in->have_h = 1;
        sqze__matvec(w, in->h, y);
        return;
    }
    const uint32_t nb = in->k / 32;
    if (!in->have_q) {
        for (uint32_t b = 0; b < nb; b++) in->s[b] = q8_block32(in->x + 32 * b, in->qs + 32 * b, &in->d[b]);
        for (uint32_t i = 0; i < in->k / 4; i++) /* q4_0's offset: -8 x each 4 codes' sum */
            in->c[i] = -8 * (in->qs[4 * i] + in->qs[4 * i + 1] + in->qs[4 * i + 2] + in->qs[4 * i + 3]);
        for (uint32_t b = 0; b < nb; b++) {
            int32_t c = 0;
            for (int i = 0; i < 8; i++) c += in->c[8 * b + i];
            in->cb[b] = c;
        }
    }
    in->have_q = 1;
#if USE_AVX2
    const size_t rb = (size_t)sqze_dtype_bytes(dt, in->k);
    const uint8_t *row = w->data;
    if (dt == SQZB_DT_Q4_0_X8) {
        for (uint32_t g = 0; g < w->rows / 8; g++) idot_x8(row + (size_t)g * 8 * rb, in, nb, y + 8 * g);
        return;
    }
    uint32_t r = 0;
    for (; r + 4 <= w->rows; r += 4, row += 4 * rb) { /* four rows share each block of x */
        if (t == 0) idot_avx2(row, rb, 4, in, nb, 0, y + r);
        else if (t == 1) idot_avx2(row, rb, 4, in, nb, 1, y + r);
        else idot_avx2(row, rb, 4, in, nb, 2, y + r);
    }
    for (; r < w->rows; r++, row += rb) {
        if (t == 0) idot_avx2(row, rb, 1, in, nb, 0, y + r);
        else if (t == 1) idot_avx2(row, rb, 1, in, nb, 1, y + r);
        else idot_avx2(row, rb, 1, in, nb, 2, y + r);
    }
#else
    for (uint32_t r = 0; r < w->rows; r++) {
#if USE_NEON
        y[r] = idot_neon(row_geo(w, r, t), in, nb, t);
#else
        y[r] = idot_ref(row_geo(w, r, t), in, nb, t);
#endif
    }
#endif
}


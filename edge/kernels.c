/*
 * edge/kernels.c - matrix-vector products over weights in their stored dtype: each block's
 * integers are multiplied with the float activations and scaled once per block, so a q4_0
 * matrix is read as 4.5 bits per weight and never expanded. The instruction set is chosen
 * when compiling (the runtime is built for the device it ships to): NEON on aarch64, AVX2 +
 * FMA + F16C on x86-64 when SQZE_AVX2 is defined (edge/CMakeLists.txt), with AVX-512F/BW for
 * f32, f16, q8_0, q4_0 and q4_1 when SQZE_AVX512 is defined too, plain C otherwise.
 * Block layouts are GGML's: q8_0 = fp16 d + 32 int8 (x = d q); q4_0 = fp16 d + 16 bytes, low
 * nibbles elements 0..15, high nibbles 16..31 (x = d (q - 8)); q4_1 = fp16 d, fp16 m + 16 bytes
 * (x = d q + m).
 */
#include <string.h>

#include "edge/simd.h"

#if USE_AVX512
#define SQZE_KERNELS "avx512"
#elif USE_AVX2
#define SQZE_KERNELS "avx2"
#elif USE_NEON
#define SQZE_KERNELS "neon"
#else
#define SQZE_KERNELS "scalar"
#endif

const char *sqze_kernels(void) { return SQZE_KERNELS; }

float sqze__fp16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1F, man = h & 0x3FF, u;
    if (exp == 0) {
        if (man == 0) {
            u = sign;
        } else { /* subnormal: normalise */
            exp = 127 - 15 + 1;
            while (!(man & 0x400)) {
                man <<= 1;
                exp--;
            }
            u = sign | exp << 23 | (man & 0x3FF) << 13;
        }
    } else if (exp == 31) {
        u = sign | 0x7F800000u | man << 13;
    } else {
        u = sign | (exp + 127 - 15) << 23 | man << 13;
    }
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* Cephes-style expf, bit for bit as sqz's kernels/cpu/fwd_vec.c vexp (inputs clamped to [-87.3, 88]) */
float sqze__expf(float x) {
    const float magic = 12582912.0f;
    x = x < -87.33654f ? -87.33654f : x;
    x = x > 88.0f ? 88.0f : x;
    float t = x * 1.44269504088896341f + magic;
    float n = t - magic;
    float r = x - n * 0.693359375f + n * 2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    float e = p * r * r + r + 1.0f;
    uint32_t tb, mb;
    memcpy(&tb, &t, 4);
    memcpy(&mb, &magic, 4);
    uint32_t sb = (tb - mb + 127u) << 23;
    float s;
    memcpy(&s, &sb, 4);
    return e * s;
}


/* ---- one row . x, per dtype ---- */

#if USE_AVX2
/* 8 int8 (low 8 bytes of v) as floats */
static __m256 i8x8(__m128i v) { return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(v)); }
/* a q4 block's 16 code bytes (one load where they are contiguous) */
static inline __m128i q4_codes(const uint8_t *w, const sqze_q4row *g) {
    if (g->qb == g->qa + 8) return _mm_loadu_si128((const __m128i *)(const void *)(w + g->qa));
    return _mm_unpacklo_epi64(_mm_loadl_epi64((const __m128i *)(const void *)(w + g->qa)),
                              _mm_loadl_epi64((const __m128i *)(const void *)(w + g->qb)));
}
#endif

static float dot_f32(const uint8_t *w, const float *x, uint32_t k) {
    const float *r = (const float *)w;
    uint32_t i = 0;
    float s = 0.0f;
#if USE_AVX2
    __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
    for (; i + 16 <= k; i += 16) {
        a0 = _mm256_fmadd_ps(_mm256_loadu_ps(r + i), _mm256_loadu_ps(x + i), a0);
        a1 = _mm256_fmadd_ps(_mm256_loadu_ps(r + i + 8), _mm256_loadu_ps(x + i + 8), a1);
    }
    s = hsum(_mm256_add_ps(a0, a1));
#elif USE_NEON
    float32x4_t a0 = vdupq_n_f32(0), a1 = vdupq_n_f32(0);
    for (; i + 8 <= k; i += 8) {
        a0 = vfmaq_f32(a0, vld1q_f32(r + i), vld1q_f32(x + i));
        a1 = vfmaq_f32(a1, vld1q_f32(r + i + 4), vld1q_f32(x + i + 4));
    }
    s = vaddvq_f32(vaddq_f32(a0, a1));
#endif
    for (; i < k; i++) s += r[i] * x[i];
    return s;
}

static float dot_f16(const uint8_t *w, const float *x, uint32_t k) {
    uint32_t i = 0;
    float s = 0.0f;
#if USE_AVX2
    __m256 a = _mm256_setzero_ps();
    for (; i + 8 <= k; i += 8)
        a = _mm256_fmadd_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(w + 2 * i))), _mm256_loadu_ps(x + i), a);
    s = hsum(a);
#elif USE_NEON
    float32x4_t a = vdupq_n_f32(0);
    for (; i + 4 <= k; i += 4) {
        uint16x4_t h = vld1_u16((const uint16_t *)(const void *)(w + 2 * i));
        a = vfmaq_f32(a, vcvt_f32_f16(vreinterpret_f16_u16(h)), vld1q_f32(x + i));
    }
    s = vaddvq_f32(a);
#endif
    for (; i < k; i++) s += h2f(w + 2 * i) * x[i];
    return s;
}

static float dot_q8_0(const uint8_t *w, const float *x, uint32_t k) {
    float s = 0.0f;
#if USE_AVX2
    __m256 acc = _mm256_setzero_ps();
    for (uint32_t b = 0; b < k / 32; b++, w += 34, x += 32) {
        const __m128i q0 = _mm_loadu_si128((const __m128i *)(w + 2)), q1 = _mm_loadu_si128((const __m128i *)(w + 18));
        __m256 t = _mm256_mul_ps(i8x8(q0), _mm256_loadu_ps(x));
        t = _mm256_fmadd_ps(i8x8(_mm_srli_si128(q0, 8)), _mm256_loadu_ps(x + 8), t);
        t = _mm256_fmadd_ps(i8x8(q1), _mm256_loadu_ps(x + 16), t);
        t = _mm256_fmadd_ps(i8x8(_mm_srli_si128(q1, 8)), _mm256_loadu_ps(x + 24), t);
        acc = _mm256_fmadd_ps(_mm256_set1_ps(h2f(w)), t, acc);
    }
    s = hsum(acc);
#elif USE_NEON
    float32x4_t acc = vdupq_n_f32(0);
    for (uint32_t b = 0; b < k / 32; b++, w += 34, x += 32) {
        float32x4_t t = vdupq_n_f32(0);
        for (int h = 0; h < 2; h++) {
            int8x16_t q = vld1q_s8((const int8_t *)(w + 2 + 16 * h));
            int16x8_t lo = vmovl_s8(vget_low_s8(q)), hi = vmovl_s8(vget_high_s8(q));
            const float *xs = x + 16 * h;
            t = vfmaq_f32(t, vcvtq_f32_s32(vmovl_s16(vget_low_s16(lo))), vld1q_f32(xs));
            t = vfmaq_f32(t, vcvtq_f32_s32(vmovl_s16(vget_high_s16(lo))), vld1q_f32(xs + 4));
            t = vfmaq_f32(t, vcvtq_f32_s32(vmovl_s16(vget_low_s16(hi))), vld1q_f32(xs + 8));
            t = vfmaq_f32(t, vcvtq_f32_s32(vmovl_s16(vget_high_s16(hi))), vld1q_f32(xs + 12));
        }
        acc = vfmaq_n_f32(acc, t, h2f(w));
    }
    s = vaddvq_f32(acc);
#else
    for (uint32_t b = 0; b < k / 32; b++, w += 34, x += 32) {
        const int8_t *q = (const int8_t *)(w + 2);
        float t = 0.0f;
        for (int i = 0; i < 32; i++) t += (float)q[i] * x[i];
        s += h2f(w) * t;
    }
#endif
    return s;
}

/* q4_0 (offset 8) and q4_1 (plus m * sum(x)) share the nibble loop; g says where the row's blocks
 * lie (plain rows, or q4_0's 8-row groups: the same arithmetic on the same values) */
static float dot_q4(sqze_q4row g, const float *x, uint32_t k, int with_min) {
    const uint8_t *w = g.base;
    float s = 0.0f;
#if USE_AVX2
    __m256 acc = _mm256_setzero_ps(), accm = _mm256_setzero_ps();
    const __m128i mask = _mm_set1_epi8(0x0F), off = _mm_set1_epi8(with_min ? 0 : 8);
    for (uint32_t b = 0; b < k / 32; b++, w += g.stride, x += 32) {
        const __m128i raw = q4_codes(w, &g);
        const __m128i lo = _mm_sub_epi8(_mm_and_si128(raw, mask), off);
        const __m128i hi = _mm_sub_epi8(_mm_and_si128(_mm_srli_epi16(raw, 4), mask), off);
        const __m256 x0 = _mm256_loadu_ps(x), x1 = _mm256_loadu_ps(x + 8), x2 = _mm256_loadu_ps(x + 16),
                     x3 = _mm256_loadu_ps(x + 24);
        __m256 t = _mm256_mul_ps(i8x8(lo), x0);
        t = _mm256_fmadd_ps(i8x8(_mm_srli_si128(lo, 8)), x1, t);
        t = _mm256_fmadd_ps(i8x8(hi), x2, t);
        t = _mm256_fmadd_ps(i8x8(_mm_srli_si128(hi, 8)), x3, t);
        acc = _mm256_fmadd_ps(_mm256_set1_ps(h2f(w + g.d)), t, acc);
        if (with_min)
            accm = _mm256_fmadd_ps(_mm256_set1_ps(h2f(w + g.m)),
                                   _mm256_add_ps(_mm256_add_ps(x0, x1), _mm256_add_ps(x2, x3)), accm);
    }
    s = hsum(_mm256_add_ps(acc, accm));
#elif USE_NEON
    float32x4_t acc = vdupq_n_f32(0), accm = vdupq_n_f32(0);
    const uint8x16_t mask = vdupq_n_u8(0x0F);
    const int8x16_t off = vdupq_n_s8(with_min ? 0 : 8);
    for (uint32_t b = 0; b < k / 32; b++, w += g.stride, x += 32) {
        uint8x16_t raw = vcombine_u8(vld1_u8(w + g.qa), vld1_u8(w + g.qb));
        int8x16_t half[2] = {vsubq_s8(vreinterpretq_s8_u8(vandq_u8(raw, mask)), off),
                             vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(raw, 4)), off)};
        float32x4_t t = vdupq_n_f32(0), sx = vdupq_n_f32(0);
        for (int h = 0; h < 2; h++) {
            int16x8_t lo = vmovl_s8(vget_low_s8(half[h])), hi = vmovl_s8(vget_high_s8(half[h]));
            const float *xs = x + 16 * h;
            float32x4_t xa = vld1q_f32(xs), xb = vld1q_f32(xs + 4), xc = vld1q_f32(xs + 8), xd = vld1q_f32(xs + 12);
            t = vfmaq_f32(t, vcvtq_f32_s32(vmovl_s16(vget_low_s16(lo))), xa);
            t = vfmaq_f32(t, vcvtq_f32_s32(vmovl_s16(vget_high_s16(lo))), xb);
            t = vfmaq_f32(t, vcvtq_f32_s32(vmovl_s16(vget_low_s16(hi))), xc);
            t = vfmaq_f32(t, vcvtq_f32_s32(vmovl_s16(vget_high_s16(hi))), xd);
            sx = vaddq_f32(sx, vaddq_f32(vaddq_f32(xa, xb), vaddq_f32(xc, xd)));
        }
        acc = vfmaq_n_f32(acc, t, h2f(w + g.d));
        if (with_min) accm = vfmaq_n_f32(accm, sx, h2f(w + g.m));
    }
    s = vaddvq_f32(vaddq_f32(acc, accm));
#else
    const int o = with_min ? 0 : 8;
    for (uint32_t b = 0; b < k / 32; b++, w += g.stride, x += 32) {
        uint8_t q[16];
        memcpy(q, w + g.qa, 8);
        memcpy(q + 8, w + g.qb, 8);
        float t = 0.0f, sx = 0.0f;
        for (int i = 0; i < 16; i++) {
            t += (float)((q[i] & 0x0F) - o) * x[i] + (float)((q[i] >> 4) - o) * x[i + 16];
            sx += x[i] + x[i + 16];
        }
        s += h2f(w + g.d) * t;
        if (with_min) s += h2f(w + g.m) * sx;
    }
#endif
    return s;
}

/* sqz's int8 row: the int8 codes . x (the row's scale is applied by the caller) */
static float dot_i8(const uint8_t *w, const float *x, uint32_t k) {
    const int8_t *q = (const int8_t *)w;
    uint32_t i = 0;
    float s = 0.0f;
#if USE_AVX2
    __m256 a = _mm256_setzero_ps();
    for (; i + 16 <= k; i += 16) {
        const __m128i v = _mm_loadu_si128((const __m128i *)(q + i));
        a = _mm256_fmadd_ps(i8x8(v), _mm256_loadu_ps(x + i), a);
        a = _mm256_fmadd_ps(i8x8(_mm_srli_si128(v, 8)), _mm256_loadu_ps(x + i + 8), a);
    }
    s = hsum(a);
#elif USE_NEON
    float32x4_t a = vdupq_n_f32(0);
    for (; i + 8 <= k; i += 8) {
        int16x8_t v = vmovl_s8(vld1_s8(q + i));
        a = vfmaq_f32(a, vcvtq_f32_s32(vmovl_s16(vget_low_s16(v))), vld1q_f32(x + i));
        a = vfmaq_f32(a, vcvtq_f32_s32(vmovl_s16(vget_high_s16(v))), vld1q_f32(x + i + 4));
    }
    s = vaddvq_f32(a);
#endif
    for (; i < k; i++) s += (float)q[i] * x[i];
    return s;
}

/* sqz's int4 codes (element 2i low nibble, 2i+1 high) minus the zero point, . x, over n elements */
static float dot_u4(const uint8_t *w, const float *x, uint32_t n, int z) {
    uint32_t i = 0;
    float s = 0.0f;
#if USE_AVX2
    __m256 a = _mm256_setzero_ps();
    const __m128i mask = _mm_set1_epi8(0x0F), zz = _mm_set1_epi8((char)z);
    for (; i + 32 <= n; i += 32) {
        const __m128i raw = _mm_loadu_si128((const __m128i *)(w + i / 2));
        const __m128i lo = _mm_and_si128(raw, mask), hi = _mm_and_si128(_mm_srli_epi16(raw, 4), mask);
        const __m128i e0 = _mm_sub_epi8(_mm_unpacklo_epi8(lo, hi), zz), e1 = _mm_sub_epi8(_mm_unpackhi_epi8(lo, hi), zz);
        a = _mm256_fmadd_ps(i8x8(e0), _mm256_loadu_ps(x + i), a);
        a = _mm256_fmadd_ps(i8x8(_mm_srli_si128(e0, 8)), _mm256_loadu_ps(x + i + 8), a);
        a = _mm256_fmadd_ps(i8x8(e1), _mm256_loadu_ps(x + i + 16), a);
        a = _mm256_fmadd_ps(i8x8(_mm_srli_si128(e1, 8)), _mm256_loadu_ps(x + i + 24), a);
    }
    s = hsum(a);
#elif USE_NEON
    float32x4_t a = vdupq_n_f32(0);
    const uint8x16_t mask = vdupq_n_u8(0x0F);
    const int8x16_t zz = vdupq_n_s8((int8_t)z);
    for (; i + 32 <= n; i += 32) {
        uint8x16_t raw = vld1q_u8(w + i / 2);
        uint8x16x2_t e = vzipq_u8(vandq_u8(raw, mask), vshrq_n_u8(raw, 4)); /* elements in order */
        for (int h = 0; h < 2; h++) {
            int8x16_t v = vsubq_s8(vreinterpretq_s8_u8(e.val[h]), zz);
            int16x8_t lo = vmovl_s8(vget_low_s8(v)), hi = vmovl_s8(vget_high_s8(v));
            const float *xs = x + i + 16 * h;
            a = vfmaq_f32(a, vcvtq_f32_s32(vmovl_s16(vget_low_s16(lo))), vld1q_f32(xs));
            a = vfmaq_f32(a, vcvtq_f32_s32(vmovl_s16(vget_high_s16(lo))), vld1q_f32(xs + 4));
            a = vfmaq_f32(a, vcvtq_f32_s32(vmovl_s16(vget_low_s16(hi))), vld1q_f32(xs + 8));
            a = vfmaq_f32(a, vcvtq_f32_s32(vmovl_s16(vget_high_s16(hi))), vld1q_f32(xs + 12));
        }
    }
    s = vaddvq_f32(a);
#endif
    for (; i < n; i += 2) {
        uint8_t b = w[i / 2];
        s += (float)((b & 0x0F) - z) * x[i] + (float)((b >> 4) - z) * x[i + 1];
    }
    return s;
}

#if USE_AVX512
/* The same products with 16 lanes: a block of 32 is two vectors. */
static float dot_f32_512(const uint8_t *w, const float *x, uint32_t k) {
    const float *r = (const float *)w;
    __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps();
    uint32_t i = 0;
    for (; i + 32 <= k; i += 32) {
        a0 = _mm512_fmadd_ps(_mm512_loadu_ps(r + i), _mm512_loadu_ps(x + i), a0);
        a1 = _mm512_fmadd_ps(_mm512_loadu_ps(r + i + 16), _mm512_loadu_ps(x + i + 16), a1);
    }
    float s = _mm512_reduce_add_ps(_mm512_add_ps(a0, a1));
    for (; i < k; i++) s += r[i] * x[i];
    return s;
}

static float dot_f16_512(const uint8_t *w, const float *x, uint32_t k) {
    __m512 a = _mm512_setzero_ps();
    uint32_t i = 0;
    for (; i + 16 <= k; i += 16)
        a = _mm512_fmadd_ps(_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)(w + 2 * i))),
                            _mm512_loadu_ps(x + i), a);
    float s = _mm512_reduce_add_ps(a);
    for (; i < k; i++) s += h2f(w + 2 * i) * x[i];
    return s;
}

static float dot_q8_0_512(const uint8_t *w, const float *x, uint32_t k) {
    __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps();
    for (uint32_t b = 0; b < k / 32; b++, w += 34, x += 32) {
        const __m128i q0 = _mm_loadu_si128((const __m128i *)(const void *)(w + 2));
        const __m128i q1 = _mm_loadu_si128((const __m128i *)(const void *)(w + 18));
        __m512 t = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q0)), _mm512_loadu_ps(x));
        t = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q1)), _mm512_loadu_ps(x + 16), t);
        if (b & 1) a1 = _mm512_fmadd_ps(_mm512_set1_ps(h2f(w)), t, a1);
        else a0 = _mm512_fmadd_ps(_mm512_set1_ps(h2f(w)), t, a0);
    }
    return _mm512_reduce_add_ps(_mm512_add_ps(a0, a1));
}

/* q4_0 / q4_1 with the offset or minimum factored out: sum w x = d (sum q x) + c (sum x) with the
 * codes q unsigned and c = -8 d (q4_0) or m (q4_1); xs[b] = the sum of x over block b. */
static float dot_q4_512(sqze_q4row g, const float *x, const float *xs, uint32_t k, int with_min) {
    const uint8_t *w = g.base;
    const __m512i m4 = _mm512_set1_epi32(15);
    __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps();
    float c = 0.0f;
    for (uint32_t b = 0; b < k / 32; b++, w += g.stride, x += 32) {
        const __m512i r = _mm512_cvtepu8_epi32(q4_codes(w, &g));
        __m512 t = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_and_si512(r, m4)), _mm512_loadu_ps(x));
        t = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_srli_epi32(r, 4)), _mm512_loadu_ps(x + 16), t);
        const float d = h2f(w + g.d);
        if (b & 1) a1 = _mm512_fmadd_ps(_mm512_set1_ps(d), t, a1);
        else a0 = _mm512_fmadd_ps(_mm512_set1_ps(d), t, a0);
        c += (with_min ? h2f(w + g.m) : -8.0f * d) * xs[b];
    }
    return _mm512_reduce_add_ps(_mm512_add_ps(a0, a1)) + c;
}

/* The 512-lane rows; 0 when the dtype has none (or its sums of x do not fit the stack). */
static int matvec_512(const sqze_w *wt, const float *x, float *y) {
    enum { MAX_XS = 4096 }; /* rows of up to 131072 elements */
    const uint32_t dtype = wt->dtype, n_rows = wt->rows, k = wt->cols;
    const int q4 = dtype == SQZB_DT_Q4_0 || dtype == SQZB_DT_Q4_1 || dtype == SQZB_DT_Q4_0_X8;
    if (dtype > SQZB_DT_Q4_1 && dtype != SQZB_DT_Q8_0 && dtype != SQZB_DT_Q4_0_X8) return 0;
    if (q4 && k / 32 > MAX_XS) return 0;
    float xs[MAX_XS];
    for (uint32_t b = 0; q4 && b < k / 32; b++) { /* once for every row */
        const __m512 v = _mm512_add_ps(_mm512_loadu_ps(x + 32 * b), _mm512_loadu_ps(x + 32 * b + 16));
        xs[b] = _mm512_reduce_add_ps(v);
    }
    const uint8_t *w = wt->data;
    const size_t rb = (size_t)sqze_dtype_bytes(dtype, k);
    for (uint32_t r = 0; r < n_rows; r++, w += rb) {
        switch (dtype) {
        case SQZB_DT_F32: y[r] = dot_f32_512(w, x, k); break;
        case SQZB_DT_F16: y[r] = dot_f16_512(w, x, k); break;
        case SQZB_DT_Q8_0: y[r] = dot_q8_0_512(w, x, k); break;
        default: y[r] = dot_q4_512(sqze__q4row(wt->data, dtype, r, k), x, xs, k, dtype == SQZB_DT_Q4_1); break;
        }
    }
    return 1;
}
#endif

static void matvec_scheme(const sqze_w *w, const float *x, float *y) {
    uint32_t k = w->cols, gs = w->group_size, ng = w->n_groups;
    if (w->dtype == SQZB_DT_I8_ROW) {
        for (uint32_t r = 0; r < w->rows; r++) y[r] = w->scales[r] * dot_i8(w->data + (size_t)r * k, x, k);
        return;
    }
    for (uint32_t r = 0; r < w->rows; r++) {
        const uint8_t *row = w->data + (size_t)r * (k / 2);
        float s = 0.0f;
        for (uint32_t g = 0; g < ng; g++) {
            int z = w->zeros ? w->zeros[(size_t)r * ng + g] : 8;
            s += w->scales[(size_t)r * ng + g] * dot_u4(row + (size_t)g * gs / 2, x + (size_t)g * gs, gs, z);
        }
        y[r] = s;
    }
}

float sqze__dot(const float *a, const float *b, uint32_t n) {
#if USE_AVX512
    if (n >= 32) return dot_f32_512((const uint8_t *)a, b, n);
#endif
    return dot_f32((const uint8_t *)a, b, n);
}

void sqze__matvec(const sqze_w *wt, const float *x, float *y) {
    if (wt->dtype >= SQZB_DT_I8_ROW) {
        matvec_scheme(wt, x, y);
        return;
    }
#if USE_AVX512
    if (matvec_512(wt, x, y)) return;
#endif
    const uint8_t *w = wt->data;
    uint32_t dtype = wt->dtype, n_rows = wt->rows, k = wt->cols;
    size_t rb = (size_t)sqze_dtype_bytes(dtype, k);
    for (uint32_t r = 0; r < n_rows; r++, w += rb) {
        switch (dtype) {
        case SQZB_DT_F32: y[r] = dot_f32(w, x, k); break;
        case SQZB_DT_F16: y[r] = dot_f16(w, x, k); break;
        case SQZB_DT_Q8_0: y[r] = dot_q8_0(w, x, k); break;
        default: /* q4_0, its 8-row groups, q4_1: model.c admits nothing else */
            y[r] = dot_q4(sqze__q4row(wt->data, dtype, r, k), x, k, dtype == SQZB_DT_Q4_1);
            break;
        }
    }
}

void sqze__row_f32(const void *wv, uint32_t dtype, uint32_t r, uint32_t k, float *out) {
    if (dtype != SQZB_DT_F32 && dtype != SQZB_DT_F16 && dtype != SQZB_DT_Q8_0) { /* q4_0, q4_1, q4_0 x8 */
        const sqze_q4row g = sqze__q4row(wv, dtype, r, k);
        const int m1 = dtype == SQZB_DT_Q4_1, o = m1 ? 0 : 8;
        for (uint32_t b = 0; b < k / 32; b++, out += 32) {
            const uint8_t *p = g.base + (size_t)b * g.stride;
            uint8_t q[16];
            memcpy(q, p + g.qa, 8);
            memcpy(q + 8, p + g.qb, 8);
            const float d = h2f(p + g.d), mn = m1 ? h2f(p + g.m) : 0.0f;
            for (int i = 0; i < 16; i++) {
                out[i] = (float)((q[i] & 0x0F) - o) * d + mn;
                out[i + 16] = (float)((q[i] >> 4) - o) * d + mn;
            }
        }
        return;
    }
    const uint8_t *w = (const uint8_t *)wv + (size_t)r * (size_t)sqze_dtype_bytes(dtype, k);
    if (dtype == SQZB_DT_F32) {
        memcpy(out, w, (size_t)k * 4);
        return;
    }
    if (dtype == SQZB_DT_F16) {
        for (uint32_t i = 0; i < k; i++) out[i] = h2f(w + 2 * i);
        return;
    }
    for (uint32_t b = 0; b < k / 32; b++, out += 32) { /* q8_0 */
        const uint8_t *p = w + 34 * b;
        float d = h2f(p);
        for (int i = 0; i < 32; i++) out[i] = (float)(int8_t)p[2 + i] * d;
    }
}

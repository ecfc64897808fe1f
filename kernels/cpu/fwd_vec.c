/*
 * kernels/cpu/fwd_vec.c - the exp-heavy row kernels (softmax, SiLU gate, GELU) written so that the
 * compiler vectorizes them, with an AVX2+FMA variant chosen at run time on x86 (the build
 * targets the baseline ISA; CPU features are detected when first used, never at build time).
 *
 * exp uses Cephes' expf scheme: x = n ln2 + r with |r| <= ln2/2, e^r by a degree-6 polynomial,
 * 2^n put into the exponent bits; relative error ~2 ulp for x in [-87, 88] (inputs are clamped to that range). The rounding of
 * x log2(e) to n uses the 1.5 * 2^23 trick, so everything stays in float lanes (no float to int
 * conversion: NaN in gives NaN out).
 */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "kernels/cpu/fwd_ops.h"

#if defined(__GNUC__) || defined(__clang__)
#define SQZ__ALWAYS_INLINE inline __attribute__((always_inline))
#else
#define SQZ__ALWAYS_INLINE inline
#endif

static SQZ__ALWAYS_INLINE float vexp(float x) {
    const float magic = 12582912.0f; /* 1.5 * 2^23: adding it rounds to an integer in the low bits */
    x = x < -87.33654f ? -87.33654f : x;
    x = x > 88.0f ? 88.0f : x; /* keeps 2^n finite */
    float t = x * 1.44269504088896341f + magic;
    float n = t - magic;
    float r = x - n * 0.693359375f + n * 2.12194440e-4f; /* ln2 in two parts (Cephes C1, C2) */
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
    uint32_t sb = (tb - mb + 127u) << 23; /* 2^n */
    float s;
    memcpy(&s, &sb, 4);
    return e * s;
}

/* softmax of row[0..len) scaled by `scale`, zeros up to width. The max and the sum run in 8
 * independent lanes (a float reduction is vectorized only when its order is spelled out). */
static SQZ__ALWAYS_INLINE void softmax_body(float *row, int64_t len, int64_t width, float scale) {
    float lm[8], ls[8];
    for (int k = 0; k < 8; k++) {
        lm[k] = -INFINITY;
        ls[k] = 0.0f;
    }
    int64_t i = 0, n8 = len & ~(int64_t)7;
    for (; i < n8; i += 8) {
        for (int k = 0; k < 8; k++) {
            float v = row[i + k] * scale;
            row[i + k] = v;
            lm[k] = v > lm[k] ? v : lm[k];
        }
    }
    float mx = -INFINITY;
    for (; i < len; i++) {
        row[i] *= scale;
        mx = row[i] > mx ? row[i] : mx;
    }
    for (int k = 0; k < 8; k++) mx = lm[k] > mx ? lm[k] : mx;
    for (i = 0; i < len; i++) row[i] = vexp(row[i] - mx);
    for (i = 0; i < n8; i += 8) {
        for (int k = 0; k < 8; k++) ls[k] += row[i + k];
    }
    float sum = 0.0f;
    for (; i < len; i++) sum += row[i];
    for (int k = 0; k < 8; k++) sum += ls[k];
    float inv = 1.0f / sum;
    for (i = 0; i < len; i++) row[i] *= inv;
    for (i = len; i < width; i++) row[i] = 0.0f;
}

static SQZ__ALWAYS_INLINE void silu_mul_body(float *g, const float *u, int64_t n) {
    for (int64_t i = 0; i < n; i++) g[i] = g[i] / (1.0f + vexp(-g[i])) * u[i];
}

/* gelu(x) = x/2 (1 + erf(x / sqrt 2)); erf by Abramowitz & Stegun 7.1.26 (|error| <= 1.5e-7). */
static SQZ__ALWAYS_INLINE void gelu_body(float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        float z = x[i] * 0.70710678118654752f, az = fabsf(z);
        float t = 1.0f / (1.0f + 0.3275911f * az);
        float p = t * (0.254829592f + t * (-0.284496736f + t * (1.421413741f + t * (-1.453152027f + t * 1.061405429f))));
        float e = 1.0f - p * vexp(-az * az);
        x[i] = 0.5f * x[i] * (1.0f + (z < 0 ? -e : e));
    }
}

static void softmax_base(float *row, int64_t len, int64_t width, float scale) {
    softmax_body(row, len, width, scale);
}
static void silu_mul_base(float *g, const float *u, int64_t n) { silu_mul_body(g, u, n); }
static void gelu_base(float *x, int64_t n) { gelu_body(x, n); }

#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
#define SQZ__HAVE_AVX2_PATH 1
__attribute__((target("avx2,fma"))) static void softmax_avx2(float *row, int64_t len, int64_t width, float scale) {
    softmax_body(row, len, width, scale);
}
__attribute__((target("avx2,fma"))) static void silu_mul_avx2(float *g, const float *u, int64_t n) {
    silu_mul_body(g, u, n);
}
__attribute__((target("avx2,fma"))) static void gelu_avx2(float *x, int64_t n) { gelu_body(x, n); }
#endif

#ifdef SQZ__HAVE_AVX2_PATH
static bool have_avx2_fma(void) {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}
#define SQZ__PICK(avx2, base) (have_avx2_fma() ? (avx2) : (base))
#else
#define SQZ__PICK(avx2, base) (base)
#endif

/* Each kernel is chosen once, on first use (a benign race: every thread picks the same). */
void sqz__softmax_row(float *row, int64_t len, int64_t width, float scale) {
    static void (*f)(float *, int64_t, int64_t, float);
    if (!f) f = SQZ__PICK(softmax_avx2, softmax_base);
    f(row, len, width, scale);
}

void sqz__silu_mul_span(float *g, const float *u, int64_t n) {
    static void (*f)(float *, const float *, int64_t);
    if (!f) f = SQZ__PICK(silu_mul_avx2, silu_mul_base);
    f(g, u, n);
}

void sqz__gelu_span(float *x, int64_t n) {
    static void (*f)(float *, int64_t);
    if (!f) f = SQZ__PICK(gelu_avx2, gelu_base);
    f(x, n);
}

float sqz__expf(float x) { return vexp(x); }

/* GeGLU's gate with GELU's tanh form, in float as torch's gelu(approximate="tanh") (scalar: the
 * families that use it are small, and tanhf is the reference's). */
void sqz__gelu_tanh_mul_span(float *g, const float *u, int64_t n) {
    const float k = 0.7978845608028654f; /* sqrt(2 / pi) */
    for (int64_t i = 0; i < n; i++) {
        const float x = g[i];
        g[i] = 0.5f * x * (1.0f + tanhf(k * (x + 0.044715f * x * x * x))) * u[i];
    }
}

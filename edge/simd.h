/*
 * edge/simd.h - the instruction set the edge kernels are built for, one rule for kernels.c (f32
 * activations) and kernels_q8.c (quantized ones), and the small helpers both inline.
 *   USE_AVX2    with SQZE_AVX2 and a compiler targeting AVX2 + FMA + F16C
 *   USE_AVX512  with SQZE_AVX512 too and AVX-512F/BW
 *   USE_NEON    on aarch64
 */
#ifndef SQZE_SIMD_H
#define SQZE_SIMD_H

#include <stdint.h>

#include "edge/edge_internal.h"

#if defined(SQZE_AVX2) && defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#include <immintrin.h>
#define USE_AVX2 1
#if defined(SQZE_AVX512) && defined(__AVX512F__) && defined(__AVX512BW__)
#define USE_AVX512 1
#endif
#elif defined(__aarch64__) && defined(__ARM_NEON)
#include <arm_neon.h>
#define USE_NEON 1
#endif

static inline uint16_t rd16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }

/* the fp16 at p as a float: F16C's conversion where the kernels are x86's (the same value) */
static inline float h2f(const uint8_t *p) {
#if USE_AVX2
    return _cvtsh_ss(rd16(p));
#else
    return sqze__fp16_to_f32(rd16(p));
#endif
}

#if USE_AVX2
static inline float hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}
#endif

#endif

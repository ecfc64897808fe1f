/*
 * kernels/cpu/fgemm_x86.c - the register tiles of the f32 GEMM (fgemm.h) on x86-64:
 *   - AVX-512F: 12 weight rows x 2 vectors of 16 tokens = 24 accumulators, per column 2 token
 *     loads and 12 broadcasts (folded into the FMAs) for 24 FMAs;
 *   - AVX2+FMA: 6 rows x 2 vectors of 8 tokens = 12 accumulators (of 16 registers).
 * Each accumulator lane is one fma chain in column order, as the scalar reference's: the same bits.
 */
#include "kernels/cpu/fgemm.h"

#if SQZ__QMM_X86
#include <immintrin.h>

#define AVX512 __attribute__((target("avx512f")))
#define AVX2 __attribute__((target("avx2,fma")))

enum { NR512 = 12, NR2 = 6 };

AVX512 static void tile512_2(const float *xp, const float *w, int64_t ldw, int64_t kc, float *ct, int64_t ldc) {
    __m512 a0[NR512], a1[NR512];
    SQZ__UNROLL(12)
    for (int r = 0; r < NR512; r++) {
        a0[r] = _mm512_loadu_ps(ct + r * ldc);
        a1[r] = _mm512_loadu_ps(ct + r * ldc + 16);
    }
    for (int64_t kk = 0; kk < kc; kk++) {
        const __m512 x0 = _mm512_loadu_ps(xp + kk * 32), x1 = _mm512_loadu_ps(xp + kk * 32 + 16);
        SQZ__UNROLL(12)
        for (int r = 0; r < NR512; r++) {
            const __m512 b = _mm512_set1_ps(w[r * ldw + kk]);
            a0[r] = _mm512_fmadd_ps(x0, b, a0[r]);
            a1[r] = _mm512_fmadd_ps(x1, b, a1[r]);
        }
    }
    SQZ__UNROLL(12)
    for (int r = 0; r < NR512; r++) {
        _mm512_storeu_ps(ct + r * ldc, a0[r]);
        _mm512_storeu_ps(ct + r * ldc + 16, a1[r]);
    }
}

AVX512 static void tile512_1(const float *xp, const float *w, int64_t ldw, int64_t kc, float *ct, int64_t ldc) {
    __m512 a0[NR512];
    SQZ__UNROLL(12)
    for (int r = 0; r < NR512; r++) a0[r] = _mm512_loadu_ps(ct + r * ldc);
    for (int64_t kk = 0; kk < kc; kk++) {
        const __m512 x0 = _mm512_loadu_ps(xp + kk * 16);
        SQZ__UNROLL(12)
        for (int r = 0; r < NR512; r++) a0[r] = _mm512_fmadd_ps(x0, _mm512_set1_ps(w[r * ldw + kk]), a0[r]);
    }
    SQZ__UNROLL(12)
    for (int r = 0; r < NR512; r++) _mm512_storeu_ps(ct + r * ldc, a0[r]);
}

AVX2 static void tile2_2(const float *xp, const float *w, int64_t ldw, int64_t kc, float *ct, int64_t ldc) {
    __m256 a0[NR2], a1[NR2];
    SQZ__UNROLL(6)
    for (int r = 0; r < NR2; r++) {
        a0[r] = _mm256_loadu_ps(ct + r * ldc);
        a1[r] = _mm256_loadu_ps(ct + r * ldc + 8);
    }
    for (int64_t kk = 0; kk < kc; kk++) {
        const __m256 x0 = _mm256_loadu_ps(xp + kk * 16), x1 = _mm256_loadu_ps(xp + kk * 16 + 8);
        SQZ__UNROLL(6)
        for (int r = 0; r < NR2; r++) {
            const __m256 b = _mm256_broadcast_ss(w + r * ldw + kk);
            a0[r] = _mm256_fmadd_ps(x0, b, a0[r]);
            a1[r] = _mm256_fmadd_ps(x1, b, a1[r]);
        }
    }
    SQZ__UNROLL(6)
    for (int r = 0; r < NR2; r++) {
        _mm256_storeu_ps(ct + r * ldc, a0[r]);
        _mm256_storeu_ps(ct + r * ldc + 8, a1[r]);
    }
}

AVX2 static void tile2_1(const float *xp, const float *w, int64_t ldw, int64_t kc, float *ct, int64_t ldc) {
    __m256 a0[NR2];
    SQZ__UNROLL(6)
    for (int r = 0; r < NR2; r++) a0[r] = _mm256_loadu_ps(ct + r * ldc);
    for (int64_t kk = 0; kk < kc; kk++) {
        const __m256 x0 = _mm256_loadu_ps(xp + kk * 8);
        SQZ__UNROLL(6)
        for (int r = 0; r < NR2; r++) a0[r] = _mm256_fmadd_ps(x0, _mm256_broadcast_ss(w + r * ldw + kk), a0[r]);
    }
    SQZ__UNROLL(6)
    for (int r = 0; r < NR2; r++) _mm256_storeu_ps(ct + r * ldc, a0[r]);
}

const sqz__fgemm_impl sqz__fgemm_avx512 = {"avx512", 16, NR512, {tile512_1, tile512_2}};
const sqz__fgemm_impl sqz__fgemm_avx2 = {"avx2", 8, NR2, {tile2_1, tile2_2}};
#endif

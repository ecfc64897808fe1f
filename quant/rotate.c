/*
 * quant/rotate.c - the orthogonal matrices of offline rotations (QuaRot, Ashkboos et al. 2024;
 * SpinQuant, Liu et al. 2024): a randomized Hadamard transform of any width, and the products
 * that fold it into a weight. compress/pass_rotate.c decides where each one folds.
 *
 * Width n = 2^k * m with m odd. The matrix is
 *     Q = diag(s) (H_{2^k} (x) C_m)
 * H_{2^k} the Sylvester Hadamard matrix scaled by 2^{-k/2}, C_m the orthonormal DCT-II matrix of
 * size m (C_1 = [1]), (x) the Kronecker product, s a vector of signs drawn from `seed` (all +1 for
 * seed 0). Every factor is orthogonal, so Q is: Q Q^T = I. For a power of two this is QuaRot's
 * randomized Hadamard; for SmolLM2's 576 = 64 * 9 the DCT spreads each Hadamard block's output
 * over the nine blocks, so every output mixes every input (a block-diagonal Hadamard would mix
 * only within blocks of 64). Built in double, rounded once to float.
 */
#include <cblas.h>
#include <math.h>
#include <stdlib.h>

#include "quant/quant_internal.h"

/* splitmix64: the signs, reproducible on every platform. */
static uint64_t mix64(uint64_t *x) {
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static int popcount64(uint64_t v) {
    int c = 0;
    for (; v; v &= v - 1) c++;
    return c;
}

sqz_status sqz__rotation_make(int64_t n, uint64_t seed, float **out) {
    *out = NULL;
    SQZ_RETURN_IF(n < 1 || n > 65536, SQZ_ERR_INVALID_ARG, "rotation: width %lld (1 to 65536)", (long long)n);
    int64_t p = 1;
    while (n % (2 * p) == 0) p *= 2;
    const int64_t m = n / p;
    float *q = sqz__malloc((size_t)n * (size_t)n * sizeof(float));
    double *c = sqz__malloc((size_t)m * (size_t)m * sizeof(double));
    double *sign = sqz__malloc((size_t)n * sizeof(double));
    if (!q || !c || !sign) {
        free(q);
        free(c);
        free(sign);
        return SQZ_ERR_NOMEM;
    }
    const double pi = 3.14159265358979323846;
    for (int64_t i = 0; i < m; i++) /* orthonormal DCT-II: row i is frequency i */
        for (int64_t j = 0; j < m; j++)
            c[i * m + j] = sqrt((i ? 2.0 : 1.0) / (double)m) *
                           cos(pi * (double)i * (2.0 * (double)j + 1.0) / (2.0 * (double)m));
    uint64_t st = seed;
    for (int64_t i = 0; i < n; i++) sign[i] = seed == 0 || (mix64(&st) & 1) ? 1.0 : -1.0;
    const double hs = 1.0 / sqrt((double)p);
    for (int64_t i = 0; i < n; i++) { /* (H (x) C)[i][j] = H[i / m][j / m] * C[i % m][j % m] */
        const int64_t hi = i / m, ci = i % m;
        for (int64_t j = 0; j < n; j++) {
            const int64_t hj = j / m, cj = j % m;
            const double h = popcount64((uint64_t)(hi & hj)) & 1 ? -hs : hs;
            q[i * n + j] = (float)(sign[i] * h * c[ci * m + cj]);
        }
    }
    free(c);
    free(sign);
    *out = q;
    return SQZ_OK;
}

void sqz__rotate_right(const float *w, int64_t rows, int64_t n, const float *q, float *out) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)rows, (int)n, (int)n, 1.0f, w, (int)n, q, (int)n, 0.0f,
                out, (int)n);
}

void sqz__rotate_left_t(const float *q, int64_t n, const float *w, int64_t cols, float *out) {
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)n, (int)cols, (int)n, 1.0f, q, (int)n, w, (int)cols, 0.0f,
                out, (int)cols);
}

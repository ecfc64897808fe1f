/*
 * kernels/cpu/chol.c - the factor GPTQ needs: U upper triangular with U^T U = H^-1 (what
 * torch.linalg.cholesky(torch.cholesky_inverse(torch.linalg.cholesky(H)), upper=True) gives in
 * the reference implementation), computed in double with level-3 BLAS.
 *
 * With J the exchange (reversal) matrix, J H J = L L^T (lower Cholesky) gives H = R R^T with
 * R = J L J upper, so H^-1 = (R^-1)^T R^-1 and U = R^-1 is upper with a positive diagonal: the
 * Cholesky factor of H^-1, by uniqueness. Cost: one Cholesky (n^3/3) and one triangular
 * inverse, instead of Cholesky + inverse + Cholesky, in place (n^2 doubles plus a 64-column
 * panel). Reversing both indices of a row-major square matrix is reversing its flat array.
 */
#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "kernels/cpu/linalg.h"

static void reverse(double *a, int64_t nn) {
    for (int64_t i = 0, j = nn - 1; i < j; i++, j--) {
        const double t = a[i];
        a[i] = a[j];
        a[j] = t;
    }
}

/* In-place lower Cholesky of a (n, n) row-major (leading dimension lda), right-looking with 64-column
 * panels (trsm + syrk on the trailing matrix). False on a pivot that is not positive (or NaN). The
 * strictly upper part is left as it was. */
bool sqz__chol_lower(double *a, int64_t n, int64_t lda) {
    enum { NB = 64 };
    for (int64_t k0 = 0; k0 < n; k0 += NB) {
        const int64_t kb = n - k0 < NB ? n - k0 : NB;
        for (int64_t j = k0; j < k0 + kb; j++) {
            double d = a[j * lda + j];
            for (int64_t p = k0; p < j; p++) d -= a[j * lda + p] * a[j * lda + p];
            if (!(d > 0)) return false;
            d = sqrt(d);
            a[j * lda + j] = d;
            for (int64_t i = j + 1; i < k0 + kb; i++) {
                double s = a[i * lda + j];
                for (int64_t p = k0; p < j; p++) s -= a[i * lda + p] * a[j * lda + p];
                a[i * lda + j] = s / d;
            }
        }
        const int64_t rem = n - k0 - kb;
        if (rem > 0) {
            double *a21 = a + (k0 + kb) * lda + k0;
            cblas_dtrsm(CblasRowMajor, CblasRight, CblasLower, CblasTrans, CblasNonUnit, (int)rem, (int)kb, 1.0,
                        a + k0 * lda + k0, (int)lda, a21, (int)lda);
            cblas_dsyrk(CblasRowMajor, CblasLower, CblasNoTrans, (int)rem, (int)kb, -1.0, a21, (int)lda, 1.0,
                        a + (k0 + kb) * lda + (k0 + kb), (int)lda);
        }
    }
    return true;
}

sqz_status sqz__chol_inverse_upper(double *h, int64_t n) {
    const int64_t nn = n * n;
    reverse(h, nn);
    if (!sqz__chol_lower(h, n, n)) return SQZ_ERROR(SQZ_ERR_NUMERIC, "Hessian is not positive definite");
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = i + 1; j < n; j++) h[i * n + j] = 0;
    reverse(h, nn); /* R = J L J: upper */
    /* U = R^-1 in place, by column panels from the right: panel [c0, c1) of R^-1 solves
     * R[0:c1, 0:c1] X = I[0:c1, c0:c1] and only needs columns < c1 of R, which panels further
     * right have not overwritten. Scratch: c1 x 64 doubles. */
    enum { PB = 64 };
    double *x = sqz__malloc((size_t)n * PB * sizeof(double));
    if (!x) return SQZ_ERR_NOMEM;
    for (int64_t c1 = n; c1 > 0; c1 -= PB) {
        const int64_t c0 = c1 - PB > 0 ? c1 - PB : 0, nb = c1 - c0;
        memset(x, 0, (size_t)(c1 * nb) * sizeof(double));
        for (int64_t j = 0; j < nb; j++) x[(c0 + j) * nb + j] = 1.0;
        cblas_dtrsm(CblasRowMajor, CblasLeft, CblasUpper, CblasNoTrans, CblasNonUnit, (int)c1, (int)nb, 1.0, h,
                    (int)n, x, (int)nb);
        for (int64_t i = 0; i < c1; i++) memcpy(h + i * n + c0, x + i * nb, (size_t)nb * sizeof(double));
    }
    free(x);
    for (int64_t i = 0; i < nn; i++)
        if (!isfinite(h[i])) return SQZ_ERROR(SQZ_ERR_NUMERIC, "inverse Hessian factor is not finite");
    return SQZ_OK;
}

/*
 * kernels/cpu/backend_calib.c - the CPU backend's slots for the calibration loop (sqz/backend.h:
 * sgemm, xtx, to_f32; chol_inv_upper is chol.c): the arithmetic the calibration observers and
 * GPTQ always did, moved behind the backend table so that `--device cpu` gives the same bits
 * and a device backend can take the same calls.
 */
#include <cblas.h>
#include <string.h>

#include "core/internal.h"
#include "kernels/cpu/linalg.h"

void sqz__xtx_panel(const double *d, int64_t nr, int64_t n, int64_t a, int64_t b, double *h) {
    cblas_dsyrk(CblasRowMajor, CblasUpper, CblasTrans, (int)(b - a), (int)nr, 1.0, d + a, (int)n, 1.0, h + a, (int)n);
    if (b < n)
        cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)(b - a), (int)(n - b), (int)nr, 1.0, d + a, (int)n,
                    d + b, (int)n, 1.0, h + b, (int)n);
}

void sqz__xtx_host(const sqz_xtx_args *a, double *dbuf) {
    const int64_t k = a->k;
    if (a->beta == 0.0)
        for (int64_t r = 0; r < k; r++) memset(a->h + r * k + r, 0, (size_t)(k - r) * sizeof(double));
    for (int64_t t0 = 0; t0 < a->m; t0 += SQZ_XTX_CHUNK) {
        const int64_t nr = a->m - t0 < SQZ_XTX_CHUNK ? a->m - t0 : SQZ_XTX_CHUNK;
        const float *src = a->x + t0 * k;
        for (int64_t i = 0; i < nr * k; i++) dbuf[i] = (double)src[i];
        for (int64_t p = 0; p < k; p += SQZ__XTX_PANEL)
            sqz__xtx_panel(dbuf, nr, k, p, p + SQZ__XTX_PANEL < k ? p + SQZ__XTX_PANEL : k, a->h + p * k);
    }
}

void sqz__sgemm_host(const sqz_sgemm_args *a) {
    cblas_sgemm(CblasRowMajor, a->trans_a ? CblasTrans : CblasNoTrans, a->trans_b ? CblasTrans : CblasNoTrans,
                (int)a->m, (int)a->n, (int)a->k, a->alpha, a->a, (int)a->lda, a->b, (int)a->ldb, a->beta, a->c,
                (int)a->ldc);
}

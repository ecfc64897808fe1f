/*
 * kernels/cpu/backend_calib.c - the CPU backend's slots for the calibration loop (sqz/backend.h:
 * sgemm, xtx, to_f32; chol_inv_upper is chol.c): the arithmetic the calibration observers and
 * GPTQ always did, moved behind the backend table so that `--device cpu` gives the same bits
 * and a device backend can take the same calls.
 */
#include <cblas.h>
#include <math.h>
#include <string.h>

#include "kernels/cpu/backend_impl.h"
#include "core/internal.h"
#include "kernels/cpu/linalg.h"

_Static_assert(SQZ__XTX_PANEL == SQZ_XTX_PANEL_ALIGN, "a row panel starts where the whole matrix's products do");

void sqz__xtx_panel_ld(const double *d, int64_t nr, int64_t n, int64_t a, int64_t b, double *h, int64_t ldh) {
    cblas_dsyrk(CblasRowMajor, CblasUpper, CblasTrans, (int)(b - a), (int)nr, 1.0, d + a, (int)n, 1.0, h,
                (int)ldh);
    if (b < n)
        cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)(b - a), (int)(n - b), (int)nr, 1.0, d + a, (int)n,
                    d + b, (int)n, 1.0, h + (b - a), (int)ldh);
}

void sqz__xtx_panel(const double *d, int64_t nr, int64_t n, int64_t a, int64_t b, double *h) {
    sqz__xtx_panel_ld(d, nr, n, a, b, h + a, n);
}

void sqz__xtx_host(const sqz_xtx_args *a, double *dbuf) {
    const int64_t k = a->k;
    const bool whole = a->r1 <= 0;
    const int64_t r0 = whole ? 0 : a->r0, r1 = whole ? k : a->r1, ld = whole ? k : a->ldh;
    double *h = a->h; /* element (r0, r0); (i, j) at h + (i - r0) * ld + (j - r0) */
    if (a->beta == 0.0)
        for (int64_t r = r0; r < r1; r++) memset(h + (r - r0) * ld + (r - r0), 0, (size_t)(k - r) * sizeof(double));
    for (int64_t t0 = 0; t0 < a->m; t0 += SQZ_XTX_CHUNK) {
        const int64_t nr = a->m - t0 < SQZ_XTX_CHUNK ? a->m - t0 : SQZ_XTX_CHUNK;
        const float *src = a->x + t0 * k;
        for (int64_t i = 0; i < nr; i++) /* only the columns the rows [r0, r1) of H read */
            for (int64_t j = r0; j < k; j++) dbuf[i * k + j] = (double)src[i * k + j];
        for (int64_t p = r0; p < r1; p += SQZ__XTX_PANEL) {
            const int64_t pe = p + SQZ__XTX_PANEL < r1 ? p + SQZ__XTX_PANEL : r1;
            sqz__xtx_panel_ld(dbuf, nr, k, p, pe, h + (p - r0) * ld + (p - r0), ld);
        }
    }
}

sqz_status sqz__xtx_check_panel(const sqz_xtx_args *a, const char *who) {
    if (a->r1 <= 0 && a->r0 == 0) return SQZ_OK;
    SQZ_RETURN_IF(a->r0 < 0 || a->r0 >= a->r1 || a->r1 > a->k || a->r0 % SQZ_XTX_PANEL_ALIGN ||
                      (a->r1 != a->k && a->r1 % SQZ_XTX_PANEL_ALIGN) || a->ldh < a->k - a->r0,
                  SQZ_ERR_INVALID_ARG, "%s xtx: row panel [%lld, %lld) of %lld (row stride %lld) out of range", who,
                  (long long)a->r0, (long long)a->r1, (long long)a->k, (long long)a->ldh);
    return SQZ_OK;
}

void sqz__sgemm_host(const sqz_sgemm_args *a) {
    cblas_sgemm(CblasRowMajor, a->trans_a ? CblasTrans : CblasNoTrans, a->trans_b ? CblasTrans : CblasNoTrans,
                (int)a->m, (int)a->n, (int)a->k, a->alpha, a->a, (int)a->lda, a->b, (int)a->ldb, a->beta, a->c,
                (int)a->ldc);
}

void sqz__dgemm_host(const sqz_dgemm_args *a) {
    cblas_dgemm(CblasRowMajor, a->trans_a ? CblasTrans : CblasNoTrans, a->trans_b ? CblasTrans : CblasNoTrans,
                (int)a->m, (int)a->n, (int)a->k, a->alpha, a->a, (int)a->lda, a->b, (int)a->ldb, a->beta, a->c,
                (int)a->ldc);
}

void sqz__dtrsm_host(const sqz_dtrsm_args *a) {
    cblas_dtrsm(CblasRowMajor, a->right ? CblasRight : CblasLeft, CblasLower, a->trans ? CblasTrans : CblasNoTrans,
                CblasNonUnit, (int)a->m, (int)a->n, a->alpha, a->a, (int)a->lda, a->b, (int)a->ldb);
}

void sqz__colstats_host(const sqz_colstats_args *a) {
    const int64_t k = a->k;
    for (int64_t t = 0; t < a->n; t++) {
        const float *r = a->x + t * k;
        if (a->sum_x2)
            for (int64_t j = 0; j < k; j++) a->sum_x2[j] += (double)r[j] * (double)r[j];
        if (a->sum_abs)
            for (int64_t j = 0; j < k; j++) a->sum_abs[j] += fabs((double)r[j]);
        if (a->sum_x)
            for (int64_t j = 0; j < k; j++) a->sum_x[j] += (double)r[j];
        if (a->absmax)
            for (int64_t j = 0; j < k; j++) {
                const float v = fabsf(r[j]);
                if (v > a->absmax[j]) a->absmax[j] = v;
            }
    }
}

double sqz__cosine_row(const float *a, const float *b, int64_t d) {
    double ab = 0, aa = 0, bb = 0;
    for (int64_t j = 0; j < d; j++) {
        ab += (double)a[j] * b[j];
        aa += (double)a[j] * a[j];
        bb += (double)b[j] * b[j];
    }
    return aa > 0 && bb > 0 ? ab / sqrt(aa * bb) : 1.0;
}

void sqz__cosine_host(const sqz_cosine_args *a) {
    for (int64_t t = 0; t < a->n; t++) a->out[t] = sqz__cosine_row(a->a + t * a->d, a->b + t * a->d, a->d);
}

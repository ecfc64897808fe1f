/*
 * quant/gptaq.c - GPTAQ's correction matrix (Li et al., "GPTAQ: Efficient Finetuning-Free
 * Quantization for Asymmetric Calibration", ICML 2025; GPTQModel's gptaq.py, from GPTQv2).
 *
 * GPTQ fits Q X~ to W X~, X~ the layer's input in the partly compressed model. GPTAQ fits it to
 * the original model's output W X: with dXX^T = sum_t (x_t - x~_t) x~_t^T and U the upper
 * Cholesky factor of H^-1 (what GPTQ's sweep uses, damped, in processing order),
 *
 *   P = alpha * triu1(dXX^T . U^T) . U          (n x n, strictly upper: P_ii = 0)
 *
 * and the sweep adds w_i * P[i, i+1..] to the columns after column i, w_i the column's value
 * before it was quantized: the least-squares share of column i's asymmetry w_i (x_i - x~_i)
 * that the later columns can take over (row i of P are the coefficients of projecting
 * (x_i - x~_i) onto the later columns of X~ through (H_later)^-1 = U_later^T U_later).
 * Dead columns (H_jj = 0) have zero rows and columns in dXX^T as in GPTQModel's
 * _neutralize_dead_columns. dXX^T and H may share any positive scale: P does not change.
 */
#include <cblas.h>
#include <stdlib.h>
#include <string.h>

#include "quant/gptq_internal.h"

sqz_status sqz__gptaq_p(const double *dxxt, const int64_t *perm, const uint8_t *dead, const double *u, int64_t n,
                        double alpha, float **p_out) {
    *p_out = NULL;
    size_t nn;
    SQZ_RETURN_IF(!sqz__mul_size((size_t)n, (size_t)n, &nn) || n > (1 << 30), SQZ_ERR_INVALID_ARG,
                  "gptaq: %lld input columns are too many", (long long)n);
    SQZ_RETURN_IF(!(alpha >= 0) || !isfinite(alpha), SQZ_ERR_INVALID_ARG, "gptaq: alpha %g", alpha);
    double *d = sqz__malloc(nn * sizeof(double));
    double *m = sqz__malloc(nn * sizeof(double));
    float *p = sqz__malloc(nn * sizeof(float));
    if (!d || !m || !p) {
        free(d); free(m); free(p);
        return SQZ_ERR_NOMEM;
    }
    sqz_status s = SQZ_OK;
    for (int64_t a = 0; a < n; a++) { /* dXX^T[perm][perm], dead rows and columns zero */
        const int64_t ia = perm[a];
        for (int64_t b = 0; b < n; b++) {
            const int64_t ib = perm[b];
            const double v = dead[ia] || dead[ib] ? 0.0 : dxxt[ia * n + ib];
            if (!isfinite(v)) {
                s = SQZ_ERROR(SQZ_ERR_NUMERIC, "gptaq: dXX^T[%lld, %lld] is %g", (long long)ia, (long long)ib, v);
                goto done;
            }
            d[a * n + b] = v;
        }
    }
    /* m = d . U^T, then its diagonal and lower triangle cleared, then p = alpha * m . U */
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)n, (int)n, (int)n, 1.0, d, (int)n, u, (int)n, 0.0, m,
                (int)n);
    for (int64_t a = 0; a < n; a++) memset(m + a * n, 0, (size_t)(a + 1) * sizeof(double));
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)n, (int)n, (int)n, alpha, m, (int)n, u, (int)n, 0.0,
                d, (int)n);
    for (size_t i = 0; i < nn; i++) p[i] = (float)d[i];
    *p_out = p;
    p = NULL;
done:
    free(d);
    free(m);
    free(p);
    return s;
}

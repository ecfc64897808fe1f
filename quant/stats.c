/*
 * quant/stats.c - the statistics of a layer's input computed from rows at once (tests, tools,
 * small drivers; calib/ accumulates the same quantities while streaming).
 */
#include <cblas.h>
#include <stdlib.h>
#include <string.h>

#include "quant/quant_internal.h"

void sqz_qstats_buf_free(sqz_qstats_buf *b) {
    if (!b) return;
    free(b->xtx);
    free(b->x2);
    free(b->absmax);
    free(b->absmean);
    free(b->x);
    sqz_act_hist_free(&b->hist);
    memset(b, 0, sizeof *b);
}

/* xtx += X^T X over rows in double, chunk by chunk (dsyrk on the upper triangle). */
static sqz_status accumulate_xtx(const float *x, int64_t n, int64_t n_in, double *xtx) {
    enum { CHUNK = 256 };
    double *xd = sqz__malloc((size_t)CHUNK * (size_t)n_in * sizeof(double));
    if (!xd) return SQZ_ERR_NOMEM;
    for (int64_t r0 = 0; r0 < n; r0 += CHUNK) {
        const int64_t rows = n - r0 < CHUNK ? n - r0 : CHUNK;
        for (int64_t i = 0; i < rows * n_in; i++) xd[i] = (double)x[r0 * n_in + i];
        cblas_dsyrk(CblasRowMajor, CblasUpper, CblasTrans, (int)n_in, (int)rows, 1.0, xd, (int)n_in, 1.0, xtx,
                    (int)n_in);
    }
    free(xd);
    for (int64_t i = 0; i < n_in; i++)
        for (int64_t j = 0; j < i; j++) xtx[i * n_in + j] = xtx[j * n_in + i];
    return SQZ_OK;
}

sqz_status sqz_qstats_compute(const float *x, int64_t n, int64_t n_in, unsigned needs, int64_t max_sample,
                              sqz_qstats_buf *out) {
    memset(out, 0, sizeof *out);
    sqz_act_hist_init(&out->hist);
    SQZ_RETURN_IF(n < 1 || n_in < 1 || n_in > (1 << 20) || !x, SQZ_ERR_INVALID_ARG,
                  "statistics of %lld rows of %lld columns", (long long)n, (long long)n_in);
    size_t ne;
    SQZ_RETURN_IF(!sqz__mul_size((size_t)n, (size_t)n_in, &ne), SQZ_ERR_INVALID_ARG, "statistics: too many rows");
    sqz_status st = SQZ_ERR_NOMEM;
    out->s.n_in = n_in;
    out->s.n_tokens = n;
    if (needs & SQZ_QSTAT_XTX) {
        out->xtx = sqz__calloc((size_t)n_in * (size_t)n_in, sizeof(double));
        if (!out->xtx || (st = accumulate_xtx(x, n, n_in, out->xtx)) != SQZ_OK) goto fail;
        out->s.xtx = out->xtx;
    }
    if (needs & (SQZ_QSTAT_X2 | SQZ_QSTAT_ABSMAX | SQZ_QSTAT_ABSMEAN)) {
        double *s2 = sqz__calloc((size_t)n_in * 2, sizeof(double));
        out->x2 = sqz__malloc((size_t)n_in * sizeof(float));
        out->absmax = sqz__calloc((size_t)n_in, sizeof(float));
        out->absmean = sqz__malloc((size_t)n_in * sizeof(float));
        if (!s2 || !out->x2 || !out->absmax || !out->absmean) { free(s2); st = SQZ_ERR_NOMEM; goto fail; }
        double *s1 = s2 + n_in;
        for (int64_t r = 0; r < n; r++) {
            const float *row = x + r * n_in;
            for (int64_t j = 0; j < n_in; j++) {
                const float a = fabsf(row[j]);
                s2[j] += (double)row[j] * row[j];
                s1[j] += a;
                if (a > out->absmax[j]) out->absmax[j] = a;
            }
        }
        for (int64_t j = 0; j < n_in; j++) {
            out->x2[j] = (float)(s2[j] / (double)n);
            out->absmean[j] = (float)(s1[j] / (double)n);
        }
        free(s2);
        if (needs & SQZ_QSTAT_X2) out->s.x2 = out->x2;
        if (needs & SQZ_QSTAT_ABSMAX) out->s.absmax = out->absmax;
        if (needs & SQZ_QSTAT_ABSMEAN) out->s.absmean = out->absmean;
    }
    if (needs & SQZ_QSTAT_SAMPLE) {
        const int64_t k = max_sample > 0 && max_sample < n ? max_sample : n;
        out->x = sqz__malloc((size_t)k * (size_t)n_in * sizeof(float));
        if (!out->x) goto fail;
        memcpy(out->x, x, (size_t)k * (size_t)n_in * sizeof(float));
        out->s.x = out->x;
        out->s.n_x = k;
    }
    if (needs & SQZ_QSTAT_HIST) {
        if ((st = sqz_act_hist_add(&out->hist, x, (int64_t)ne)) != SQZ_OK) goto fail;
        out->s.hist = &out->hist;
    }
    return SQZ_OK;
fail:
    sqz_qstats_buf_free(out);
    return st;
}

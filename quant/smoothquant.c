/*
 * quant/smoothquant.c - SmoothQuant (Xiao et al. 2023): migrate activation outliers into the
 * weights with a per-input-channel scale s_j = max|X_j|^alpha / max|W_j|^(1 - alpha), then
 * W8A8 (INT8 weights per output channel, INT8 activations per tensor or per token).
 *
 * alpha is searched per call (one call = the layers reading one input) on the sample rows:
 * every candidate runs the exact W8A8 GEMM the runtime would run (kernels/cpu/gemm_i8.c) and
 * is scored by the squared error against the float output X . W^T; "no smoothing" (s = 1) is
 * a candidate too. The static activation scale of each candidate is computed for the smoothed
 * input (actscale.c) on one half of the sample and scored on the other half (see below); the
 * final scale uses all the statistics (per-channel absmax over every calibration token).
 */
#include <cblas.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/gemm_i8.h"
#include "kernels/cpu/gemm_ref.h"
#include "quant/quant_internal.h"
#include "sqz/progress.h"

void sqz_smoothquant_scales(const sqz_qlinear *lin, int n_lin, int64_t n_in, const float *absmax, float alpha,
                            float *s) {
    for (int64_t j = 0; j < n_in; j++) s[j] = 0;
    for (int i = 0; i < n_lin; i++)
        for (int64_t r = 0; r < lin[i].n_out; r++)
            for (int64_t j = 0; j < n_in; j++) {
                const float a = fabsf(lin[i].w[r * n_in + j]);
                s[j] = a > s[j] ? a : s[j];
            }
    for (int64_t j = 0; j < n_in; j++) {
        const float wmax = s[j];
        if (!(absmax[j] > 0) || !(wmax > 0)) { s[j] = 1.0f; continue; }
        float v = powf(absmax[j], alpha) / powf(wmax, 1.0f - alpha);
        s[j] = v < 1e-5f ? 1e-5f : v;
    }
}

typedef struct sq_buf {
    float *ws;     /* (max_out, n) scaled weight */
    int8_t *wq;    /* (max_out, n) */
    float *wsc;    /* (max_out) */
    float *xs;     /* (nx, n) smoothed input */
    int8_t *xq;    /* (nx, n) */
    float *xsc;    /* (nx) */
    float *y;      /* (nx, max_out) */
} sq_buf;

/* W8A8 output error of all layers for smoothing s (NULL = none). */
static sqz_status w8a8_err(const sqz_qlinear *lin, int n_lin, const sqz_qstats *st, const sqz_quant_opts *o,
                           const float *x, int64_t nx, const float *s, float *const *yref, sq_buf *b, double *err) {
    const int64_t n = st->n_in;
    for (int64_t r = 0; r < nx; r++)
        for (int64_t j = 0; j < n; j++) b->xs[r * n + j] = s ? x[r * n + j] / s[j] : x[r * n + j];
    if (o->act_mode == SQZ_ACT_DYNAMIC_TOKEN) {
        sqz__quantize_rows_i8_ref(b->xs, nx, n, b->xq, b->xsc);
    } else {
        float sc;
        SQZ_TRY(sqz__act_scale_for(st, o, s, &sc));
        sqz_quantize_act_static(b->xs, nx, n, sc, b->xq);
        for (int64_t r = 0; r < nx; r++) b->xsc[r] = sc;
    }
    double e = 0;
    for (int i = 0; i < n_lin; i++) {
        const int64_t no = lin[i].n_out;
        memcpy(b->ws, lin[i].w, (size_t)no * (size_t)n * sizeof(float));
        if (s) sqz_scale_columns(b->ws, no, n, s);
        sqz__quantize_rows_i8_ref(b->ws, no, n, b->wq, b->wsc);
        SQZ_TRY(sqz__gemm_i8_cpu(SQZ_I8_PATH_AUTO, nx, no, n, b->xq, b->xsc, b->wq, b->wsc, b->y, SQZ_DTYPE_F32));
        for (int64_t t = 0; t < nx * no; t++) {
            const double d = (double)b->y[t] - (double)yref[i][t];
            e += d * d;
        }
    }
    *err = e;
    return SQZ_OK;
}

sqz_status sqz_quant_smoothquant(const sqz_qlinear *lin, int n_lin, const sqz_qstats *st,
                                 const sqz_quant_opts *o, sqz_qmatrix *out, float *smooth) {
    SQZ_TRY(sqz__check_method_args("smoothquant", lin, n_lin, st, o, SQZ_QSTAT_SAMPLE | SQZ_QSTAT_ABSMAX, smooth,
                                   true));
    SQZ_RETURN_IF(o->target.fmt != SQZ_QFMT_I8, SQZ_ERR_UNSUPPORTED, "smoothquant: W8A8 needs the i8 target, not %s",
                  sqz_qformat_name(o->target.fmt));
    SQZ_RETURN_IF(o->act_mode == SQZ_ACT_FLOAT, SQZ_ERR_INVALID_ARG,
                  "smoothquant: set an activation mode (dynamic per token or static per tensor)");
    SQZ_RETURN_IF(o->sq_alpha < 0 && !(o->sq_alpha_step > 0 && o->sq_alpha_min <= o->sq_alpha_max &&
                                       (o->sq_alpha_max - o->sq_alpha_min) / o->sq_alpha_step < 10000),
                  SQZ_ERR_INVALID_ARG, "smoothquant: alpha grid [%g, %g] step %g", (double)o->sq_alpha_min,
                  (double)o->sq_alpha_max, (double)o->sq_alpha_step);
    const double t0 = sqz_now_seconds();
    const int64_t n = st->n_in;
    int64_t nx;
    float *rows_owned;
    const float *x = sqz__search_rows(st, o, &nx, &rows_owned);
    if (!x) return SQZ_ERR_NOMEM;
    int64_t max_out = 0;
    for (int i = 0; i < n_lin; i++) max_out = lin[i].n_out > max_out ? lin[i].n_out : max_out;
    sq_buf b = {0};
    b.ws = sqz__malloc((size_t)max_out * (size_t)n * sizeof(float));
    b.wq = sqz__malloc((size_t)max_out * (size_t)n);
    b.wsc = sqz__malloc((size_t)max_out * sizeof(float));
    b.xs = sqz__malloc((size_t)nx * (size_t)n * sizeof(float));
    b.xq = sqz__malloc((size_t)nx * (size_t)n);
    b.xsc = sqz__malloc((size_t)nx * sizeof(float));
    b.y = sqz__malloc((size_t)nx * (size_t)max_out * sizeof(float));
    float *cand = sqz__malloc((size_t)n * sizeof(float));
    float **yref = sqz__calloc((size_t)n_lin, sizeof(float *));
    float *absmax_cal = NULL;
    sqz_status s = SQZ_ERR_NOMEM;
    int done = 0;
    if (!b.ws || !b.wq || !b.wsc || !b.xs || !b.xq || !b.xsc || !b.y || !cand || !yref) goto cleanup;
    /* Static scales are calibrated (both the smoothing vector's max|x| and the activation scale)
     * on the first half of the search rows and scored on the second: scored on the rows they were
     * calibrated on, they never clip, and the search favours alpha near 1 (every channel's
     * calibration maximum at the full range), which clips on unseen tokens. Dynamic per-token
     * scales need no split. */
    const bool split = o->act_mode == SQZ_ACT_STATIC_TENSOR && nx >= 2;
    const int64_t n_cal = split ? nx / 2 : 0;
    const sqz_qstats cal = {.n_in = n, .n_tokens = n_cal, .x = x, .n_x = n_cal};
    const sqz_qstats *scale_from = split ? &cal : st;
    const float *absmax = st->absmax;
    if (split) {
        if (!(absmax_cal = sqz__calloc((size_t)n, sizeof(float)))) goto cleanup;
        for (int64_t r = 0; r < n_cal; r++)
            for (int64_t j = 0; j < n; j++) {
                const float v = fabsf(x[r * n + j]);
                absmax_cal[j] = v > absmax_cal[j] ? v : absmax_cal[j];
            }
        absmax = absmax_cal;
    }
    const float *xe = x + n_cal * n;
    const int64_t ne = nx - n_cal;
    for (int i = 0; i < n_lin; i++) {
        yref[i] = sqz__malloc((size_t)ne * (size_t)lin[i].n_out * sizeof(float));
        if (!yref[i]) goto cleanup;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)ne, (int)lin[i].n_out, (int)n, 1.0f, xe, (int)n,
                    lin[i].w, (int)n, 0.0f, yref[i], (int)lin[i].n_out);
    }
    double best;
    float alpha = -1.0f; /* -1: no smoothing won */
    if ((s = w8a8_err(lin, n_lin, scale_from, o, xe, ne, NULL, yref, &b, &best)) != SQZ_OK) goto cleanup;
    for (int64_t j = 0; j < n; j++) smooth[j] = 1.0f;
    const int n_cand = o->sq_alpha >= 0 ? 1 : (int)((o->sq_alpha_max - o->sq_alpha_min) / o->sq_alpha_step + 1.5f);
    for (int k = 0; k < n_cand; k++) {
        const float a = o->sq_alpha >= 0 ? o->sq_alpha : o->sq_alpha_min + (float)k * o->sq_alpha_step;
        if (a > 1.0f + 1e-6f) break;
        sqz_smoothquant_scales(lin, n_lin, n, absmax, a, cand);
        double e;
        if ((s = w8a8_err(lin, n_lin, scale_from, o, xe, ne, cand, yref, &b, &e)) != SQZ_OK) goto cleanup;
        if (e < best || (o->sq_alpha >= 0 && k == 0)) {
            best = e;
            alpha = a;
        }
    }
    if (alpha >= 0) sqz_smoothquant_scales(lin, n_lin, n, st->absmax, alpha, smooth); /* all the statistics */
    float act_scale = 0.0f;
    if (o->act_mode == SQZ_ACT_STATIC_TENSOR && (s = sqz__act_scale_for(st, o, smooth, &act_scale)) != SQZ_OK)
        goto cleanup;
    const double t_search = sqz_now_seconds() - t0;
    for (; done < n_lin; done++) {
        const double t1 = sqz_now_seconds();
        memcpy(b.ws, lin[done].w, (size_t)lin[done].n_out * (size_t)n * sizeof(float));
        sqz_scale_columns(b.ws, lin[done].n_out, n, smooth);
        if ((s = sqz_quant_rtn_one(b.ws, lin[done].n_out, n, &o->target, &out[done])) != SQZ_OK) goto cleanup;
        out[done].qp.act_mode = o->act_mode;
        out[done].qp.act_scale = act_scale;
        out[done].alpha = alpha;
        out[done].seconds = sqz_now_seconds() - t1 + t_search / n_lin;
    }
    s = SQZ_OK;
cleanup:
    if (s != SQZ_OK) {
        for (int j = 0; j < done; j++) sqz_qmatrix_free(&out[j]);
    }
    for (int i = 0; yref && i < n_lin; i++) free(yref[i]);
    free(yref); free(cand); free(rows_owned); free(absmax_cal);
    free(b.ws); free(b.wq); free(b.wsc); free(b.xs); free(b.xq); free(b.xsc); free(b.y);
    return s;
}

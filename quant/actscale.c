/*
 * quant/actscale.c - W8A8 activation scales: the |x| histogram (constant bin width, grown on
 * demand, as pytorch-quantization's HistogramCalibrator), the three static calibrations of
 * TensorRT (max, percentile, entropy/KL: "8-bit Inference with TensorRT", Migacz 2017, as
 * implemented by pytorch-quantization's _compute_amax_entropy), and static quantization.
 */
#include <float.h>
#include <stdlib.h>
#include <string.h>

#include "quant/quant_internal.h"

void sqz_act_hist_init(sqz_act_hist *h) { memset(h, 0, sizeof *h); }

void sqz_act_hist_free(sqz_act_hist *h) {
    if (!h) return;
    free(h->counts);
    memset(h, 0, sizeof *h);
}

/* Doubles the bin width (pairs merge) until n bins cover `need` bins of the old width. */
static void coarsen(sqz_act_hist *h) {
    const int32_t n2 = (h->n_bins + 1) / 2;
    for (int32_t b = 0; b < n2; b++) {
        double c = h->counts[2 * b];
        if (2 * b + 1 < h->n_bins) c += h->counts[2 * b + 1];
        h->counts[b] = c;
    }
    memset(h->counts + n2, 0, (size_t)(h->n_bins - n2) * sizeof(double));
    h->n_bins = n2;
    h->width *= 2;
}

/* Makes the histogram cover [0, amax]. */
static sqz_status cover(sqz_act_hist *h, float amax) {
    if (amax <= 0.0f) return SQZ_OK;
    if (h->width == 0) {
        h->counts = sqz__calloc(SQZ_HIST_BINS, sizeof(double));
        if (!h->counts) return SQZ_ERR_NOMEM;
        h->n_bins = SQZ_HIST_BINS;
        h->width = (double)amax / SQZ_HIST_BINS;
        h->counts[0] += (double)h->n_zero;
        h->n_zero = 0;
        return SQZ_OK;
    }
    while ((double)amax > h->width * (double)SQZ_HIST_MAX_BINS) coarsen(h);
    if ((double)amax <= h->width * h->n_bins) return SQZ_OK;
    int64_t need = (int64_t)ceil((double)amax / h->width);
    if (need > SQZ_HIST_MAX_BINS) need = SQZ_HIST_MAX_BINS;
    double *c = sqz__realloc(h->counts, (size_t)need * sizeof(double));
    if (!c) return SQZ_ERR_NOMEM;
    memset(c + h->n_bins, 0, (size_t)(need - h->n_bins) * sizeof(double));
    h->counts = c;
    h->n_bins = (int32_t)need;
    return SQZ_OK;
}

static inline int32_t bin_of(const sqz_act_hist *h, float a) {
    int64_t b = (int64_t)((double)a / h->width);
    return (int32_t)(b >= h->n_bins ? h->n_bins - 1 : b);
}

sqz_status sqz_act_hist_add(sqz_act_hist *h, const float *x, int64_t n) {
    float amax = 0.0f;
    for (int64_t i = 0; i < n; i++) {
        const float a = fabsf(x[i]);
        if (a <= FLT_MAX && a > amax) amax = a;
    }
    SQZ_TRY(cover(h, amax));
    if (amax > h->absmax) h->absmax = amax;
    for (int64_t i = 0; i < n; i++) {
        const float a = fabsf(x[i]);
        if (!(a <= FLT_MAX)) continue; /* NaN, inf */
        h->total += 1;
        if (h->width == 0) h->n_zero++;
        else h->counts[bin_of(h, a)] += 1;
    }
    return SQZ_OK;
}

sqz_status sqz_act_hist_merge(sqz_act_hist *dst, const sqz_act_hist *src) {
    if (src->total == 0) return SQZ_OK;
    if (src->width == 0) {
        if (dst->width == 0) dst->n_zero += src->n_zero;
        else dst->counts[0] += (double)src->n_zero;
        dst->total += src->total;
        return SQZ_OK;
    }
    if (dst->width == 0) { /* adopt src's bins */
        const int64_t z = dst->n_zero;
        double *c = sqz__malloc((size_t)src->n_bins * sizeof(double));
        if (!c) return SQZ_ERR_NOMEM;
        memcpy(c, src->counts, (size_t)src->n_bins * sizeof(double));
        c[0] += (double)z;
        free(dst->counts);
        dst->counts = c;
        dst->n_bins = src->n_bins;
        dst->width = src->width;
        dst->total += src->total;
        dst->n_zero = 0;
        dst->absmax = src->absmax > dst->absmax ? src->absmax : dst->absmax;
        return SQZ_OK;
    }
    while (dst->width < src->width) coarsen(dst); /* widths are a first width times powers of two */
    SQZ_TRY(cover(dst, src->absmax));
    for (int32_t b = 0; b < src->n_bins; b++) {
        if (src->counts[b] == 0) continue;
        const float centre = (float)(((double)b + 0.5) * src->width);
        dst->counts[bin_of(dst, centre)] += src->counts[b];
    }
    dst->total += src->total;
    dst->absmax = src->absmax > dst->absmax ? src->absmax : dst->absmax;
    return SQZ_OK;
}

/* KL(P || Q) of the entropy calibration for the first i bins (see sqz/quant.h). */
static double kl_at(const double *bins, int32_t n_bins, int32_t i, double *q, double *qc, int32_t *cnt) {
    enum { LEVELS = 128 };
    memset(qc, 0, LEVELS * sizeof(double));
    memset(cnt, 0, LEVELS * sizeof(int32_t));
    for (int32_t idx = 0; idx < i; idx++) {
        if (bins[idx] == 0) continue;
        const int32_t lv = (int32_t)(((int64_t)idx * LEVELS) / i);
        qc[lv] += bins[idx];
        cnt[lv]++;
    }
    double qsum = 0, outliers = 0, psum = 0;
    for (int32_t idx = 0; idx < i; idx++) {
        const int32_t lv = (int32_t)(((int64_t)idx * LEVELS) / i);
        q[idx] = bins[idx] == 0 ? 0 : qc[lv] / cnt[lv];
        qsum += q[idx];
    }
    for (int32_t idx = i; idx < n_bins; idx++) outliers += bins[idx];
    for (int32_t idx = 0; idx < i; idx++) psum += bins[idx];
    psum += outliers;
    if (qsum <= 0 || psum <= 0) return INFINITY;
    double kl = 0;
    for (int32_t idx = 0; idx < i; idx++) {
        const double p = (bins[idx] + (idx == i - 1 ? outliers : 0)) / psum;
        if (p <= 0) continue;
        const double qq = q[idx] / qsum;
        if (qq <= 0) return INFINITY;
        kl += p * log(p / qq);
    }
    return kl;
}

static sqz_status threshold_kl(const sqz_act_hist *h, float *threshold) {
    enum { START = 128 };
    if (h->n_bins < START + 1) { *threshold = h->absmax; return SQZ_OK; }
    /* A histogram that grew is searched at TensorRT's resolution: bins merge in pairs until at
     * most SQZ_HIST_BINS remain (the search is quadratic in the bins). */
    int32_t n = h->n_bins;
    double width = h->width;
    double *bins = sqz__malloc((size_t)n * 2 * sizeof(double) + 128 * (sizeof(double) + sizeof(int32_t)));
    if (!bins) return SQZ_ERR_NOMEM;
    memcpy(bins, h->counts, (size_t)n * sizeof(double));
    while (n > SQZ_HIST_BINS) {
        const int32_t n2 = (n + 1) / 2;
        for (int32_t b = 0; b < n2; b++) bins[b] = bins[2 * b] + (2 * b + 1 < n ? bins[2 * b + 1] : 0);
        n = n2;
        width *= 2;
    }
    double *q = bins + n, *qc = q + n;
    int32_t *cnt = (int32_t *)(void *)(qc + 128);
    bins[0] = bins[1]; /* pytorch-quantization ignores the spike of exact zeros this way */
    double best = INFINITY;
    int32_t best_i = n;
    for (int32_t i = START; i <= n; i++) {
        const double kl = kl_at(bins, n, i, q, qc, cnt);
        if (kl <= best) { best = kl; best_i = i; } /* the last minimum */
    }
    free(bins);
    *threshold = (float)((double)best_i * width);
    return SQZ_OK;
}

sqz_status sqz_act_threshold(const sqz_act_hist *h, sqz_act_calib c, double percentile, float *threshold) {
    *threshold = 0;
    SQZ_RETURN_IF(!h || h->total <= 0, SQZ_ERR_INVALID_ARG, "activation calibration: empty histogram");
    if (h->width == 0 || c == SQZ_ACT_CALIB_MINMAX) { *threshold = h->absmax; return SQZ_OK; }
    if (c == SQZ_ACT_CALIB_PERCENTILE) {
        SQZ_RETURN_IF(!(percentile > 0 && percentile <= 100), SQZ_ERR_INVALID_ARG, "percentile %g outside (0, 100]",
                      percentile);
        const double want = percentile / 100.0 * h->total;
        double cum = 0;
        int32_t b = 0;
        for (; b < h->n_bins; b++) {
            cum += h->counts[b];
            if (cum >= want) break;
        }
        double t = (double)(b + 1) * h->width;
        *threshold = (float)(t < h->absmax ? t : h->absmax);
        return SQZ_OK;
    }
    SQZ_RETURN_IF(c != SQZ_ACT_CALIB_KL, SQZ_ERR_INVALID_ARG, "unknown activation calibration %d", (int)c);
    return threshold_kl(h, threshold);
}

void sqz_quantize_act_static(const float *x, int64_t m, int64_t k, float scale, int8_t *q) {
    for (int64_t i = 0; i < m * k; i++) {
        float v = rintf(x[i] / scale);
        if (!(v == v)) v = 0;
        q[i] = (int8_t)(v > 127.0f ? 127 : (v < -127.0f ? -127 : v));
    }
}

sqz_status sqz__act_scale_for(const sqz_qstats *st, const sqz_quant_opts *o, const float *smooth, float *scale) {
    const int64_t n_in = st->n_in;
    float thr = 0.0f;
    if (o->act_calib == SQZ_ACT_CALIB_MINMAX && st->absmax) {
        for (int64_t j = 0; j < n_in; j++) {
            const float a = smooth ? st->absmax[j] / smooth[j] : st->absmax[j];
            thr = a > thr ? a : thr;
        }
    } else if (!smooth && st->hist && st->hist->total > 0) {
        SQZ_TRY(sqz_act_threshold(st->hist, o->act_calib, o->act_percentile, &thr));
    } else {
        SQZ_RETURN_IF(!st->x || st->n_x < 1, SQZ_ERR_INVALID_ARG,
                      "static activation scale: needs per-channel absmax, a histogram or sample rows");
        sqz_act_hist h;
        sqz_act_hist_init(&h);
        float *row = sqz__malloc((size_t)n_in * sizeof(float));
        if (!row) return SQZ_ERR_NOMEM;
        sqz_status s = SQZ_OK;
        for (int64_t r = 0; r < st->n_x && s == SQZ_OK; r++) {
            for (int64_t j = 0; j < n_in; j++) row[j] = smooth ? st->x[r * n_in + j] / smooth[j] : st->x[r * n_in + j];
            s = sqz_act_hist_add(&h, row, n_in);
        }
        free(row);
        if (s == SQZ_OK) s = sqz_act_threshold(&h, o->act_calib, o->act_percentile, &thr);
        sqz_act_hist_free(&h);
        SQZ_TRY(s);
    }
    if (!(thr > 0.0f) || !isfinite(thr)) thr = 1.0f; /* an all-zero input: any scale is exact */
    *scale = thr / (o->target.fmt == SQZ_QFMT_FP8 ? 448.0f : 127.0f); /* FP8 E4M3's largest value, or INT8's */
    return SQZ_OK;
}

/*
 * quant/auto.c - mixed precision to a size budget (`--quant auto:bpw=X`): per-tensor
 * sensitivities and the allocation.
 *
 * Sensitivity of matrix W (n_out, n_in) to type T: the output error of the layer on its
 * calibration inputs under the diagonal approximation of the Hessian,
 *   err(W, T) = sum_r sum_j E[x_j^2] (W - Q_T(W))[r, j]^2 / sum_r sum_j E[x_j^2] W[r, j]^2
 *            ~ E ||x (W - Q_T(W))^T||^2 / E ||x W^T||^2 (the relative output error: on SmolLM2 at
 *              Q4_K_M's size it measured mean KLD 0.0213 against 0.0251 for the absolute error),
 * with Q_T llama.cpp's quantizer for T (importance-weighted with E[x^2] when asked, where
 * llama.cpp has one; RTN otherwise). Allocation: TensorRT Model Optimizer's auto_quantize
 * solves the same problem as a knapsack over per-layer candidate formats; here each tensor's
 * (bytes, err) points are reduced to their lower convex hull and the steps of all hulls are
 * taken greedily by decreasing error saved per byte while they fit the budget (the Lagrangian
 * solution of the knapsack up to one step per tensor), then smaller steps fill what is left.
 */
#include <stdlib.h>
#include <string.h>

#include "quant/quant_internal.h"

/* The candidate types, a row each: every GGUF type sqz writes that llama.cpp runs, from 2.6 to
 * 8.5 bits; those whose block does not divide a tensor's width are skipped for it. IQ3_S has
 * Q3_K's size (110 bytes per 256): the one with the lower error of the two is on the hull.
 * Q4_1 (5.0) and Q5_1 (6.0) fill the steps between Q4_0/IQ4_NL (4.5), Q5_0 (5.5) and Q8_0 (8.5)
 * for the widths that hold only blocks of 32 (SmolLM2's 576, Qwen2.5-0.5B's 896), and are
 * lossless for weights that already sit on their grid. */
static const sqz_qformat candidates[SQZ_QAUTO_MAX_CAND] = {
    SQZ_QFMT_Q2_K, SQZ_QFMT_Q3_K, SQZ_QFMT_IQ3_S, SQZ_QFMT_IQ4_XS, SQZ_QFMT_Q4_0, SQZ_QFMT_IQ4_NL, SQZ_QFMT_Q4_K,
    SQZ_QFMT_Q4_1, SQZ_QFMT_Q5_0, SQZ_QFMT_Q5_K, SQZ_QFMT_Q5_1,   SQZ_QFMT_Q6_K,  SQZ_QFMT_Q8_0,
};

int sqz_qauto_candidates(const sqz_qformat **out) {
    *out = candidates;
    return SQZ_QAUTO_MAX_CAND;
}

sqz_status sqz__qauto_quantize(const float *w, int64_t n_out, int64_t n_in, const float *x2, bool imatrix,
                               bool refine, const sqz_qtarget *t, sqz_qmatrix *q) {
    sqz_quant_opts o = sqz_quant_default_opts();
    o.target = *t;
    o.refine = refine;
    o.threads = 1; /* auto measures its (matrix, type) pairs on a pool of its own */
    const bool imx = imatrix && x2 && (sqz_qmethod_find("imatrix")->formats & (1u << t->fmt));
    if (!imx && !refine) return sqz_quant_rtn_one(w, n_out, n_in, t, q);
    const sqz_qstats s = {.n_in = n_in, .x2 = imx ? x2 : NULL};
    const sqz_qlinear lin = {w, n_out, "auto", false};
    return imx ? sqz_quant_imatrix(&lin, 1, &s, &o, q, NULL) : sqz_quant_rtn(&lin, 1, &s, &o, q, NULL);
}

sqz_status sqz_qauto_measure_one(const float *w, int64_t n_out, int64_t n_in, const float *x2, bool imatrix,
                                 sqz_qformat f, float *deq, double *bytes, double *err) {
    return sqz__qauto_measure(w, n_out, n_in, x2, imatrix, false, f, deq, bytes, err);
}

sqz_status sqz__qauto_measure(const float *w, int64_t n_out, int64_t n_in, const float *x2, bool imatrix, bool refine,
                              sqz_qformat f, float *deq, double *bytes, double *err) {
    *bytes = -1.0;
    *err = 0.0;
    sqz_qtarget t = {f, 0};
    SQZ_TRY(sqz_qtarget_check(&t));
    if (!sqz_qtarget_fits(&t, n_in)) return SQZ_OK;
    sqz_qmatrix q;
    sqz_status st = sqz__qauto_quantize(w, n_out, n_in, x2, imatrix, refine, &t, &q);
    if (st == SQZ_OK) st = sqz_qmatrix_to_f32(&q, deq);
    if (st == SQZ_OK) {
        double e = 0, y = 0;
        for (int64_t r = 0; r < n_out; r++) {
            const float *a = w + r * n_in, *b = deq + r * n_in;
            for (int64_t j = 0; j < n_in; j++) {
                const double d = (double)a[j] - (double)b[j], h = x2 ? (double)x2[j] : 1.0;
                e += h * d * d;
                y += h * (double)a[j] * (double)a[j];
            }
        }
        *err = y > 0 ? e / y : e; /* relative: each layer's error as a fraction of its output energy */
        *bytes = (double)q.nbytes;
    }
    sqz_qmatrix_free(&q);
    return st;
}

sqz_status sqz_qauto_measure(const float *w, int64_t n_out, int64_t n_in, const float *x2, bool imatrix,
                             sqz_qauto_tensor *out) {
    memset(out, 0, sizeof *out);
    float *deq = sqz__malloc((size_t)n_out * (size_t)n_in * sizeof(float));
    if (!deq) return SQZ_ERR_NOMEM;
    sqz_status st = SQZ_OK;
    for (int k = 0; k < SQZ_QAUTO_MAX_CAND && st == SQZ_OK; k++) {
        double bytes, err;
        st = sqz_qauto_measure_one(w, n_out, n_in, x2, imatrix, candidates[k], deq, &bytes, &err);
        if (st == SQZ_OK && bytes >= 0) sqz__qauto_add(out, candidates[k], bytes, err);
    }
    free(deq);
    return st;
}

void sqz__qauto_add(sqz_qauto_tensor *t, sqz_qformat f, double bytes, double err) {
    t->fmt[t->n] = f;
    t->bytes[t->n] = bytes;
    t->err[t->n] = err;
    t->n++;
}

/* Indices of t's candidates on the lower convex hull of (bytes, err), by increasing bytes. */
static int hull(const sqz_qauto_tensor *t, int *h) {
    int idx[SQZ_QAUTO_MAX_CAND], n = 0;
    for (int i = 0; i < t->n; i++) idx[n++] = i;
    for (int i = 1; i < n; i++) /* insertion sort by bytes, then err */
        for (int j = i; j > 0; j--) {
            const int a = idx[j - 1], b = idx[j];
            if (t->bytes[a] < t->bytes[b] || (t->bytes[a] == t->bytes[b] && t->err[a] <= t->err[b])) break;
            idx[j - 1] = b;
            idx[j] = a;
        }
    int m = 0;
    for (int k = 0; k < n; k++) {
        const int i = idx[k];
        if (m > 0 && t->err[i] >= t->err[h[m - 1]]) continue; /* costs more, no better */
        while (m >= 2) { /* drop h[m-1] if it lies above the segment h[m-2] -> i */
            const int a = h[m - 2], b = h[m - 1];
            const double s1 = (t->err[a] - t->err[b]) / (t->bytes[b] - t->bytes[a]);
            const double s2 = (t->err[b] - t->err[i]) / (t->bytes[i] - t->bytes[b]);
            if (s2 < s1) break;
            m--;
        }
        h[m++] = i;
    }
    return m;
}

sqz_status sqz_qauto_solve(sqz_qauto_tensor *t, int64_t n, double budget, double *used) {
    int(*h)[SQZ_QAUTO_MAX_CAND] = sqz__malloc((size_t)(n ? n : 1) * sizeof *h);
    int *nh = sqz__malloc((size_t)(n ? n : 1) * sizeof(int)), *at = sqz__calloc((size_t)(n ? n : 1), sizeof(int));
    if (!h || !nh || !at) {
        free(h);
        free(nh);
        free(at);
        return SQZ_ERR_NOMEM;
    }
    double total = 0;
    for (int64_t i = 0; i < n; i++) {
        nh[i] = hull(&t[i], h[i]);
        if (nh[i] > 0) total += t[i].bytes[h[i][0]];
    }
    for (;;) { /* the step saving the most error per byte that still fits */
        int64_t best = -1;
        double best_s = 0;
        for (int64_t i = 0; i < n; i++) {
            if (at[i] + 1 >= nh[i]) continue;
            const int a = h[i][at[i]], b = h[i][at[i] + 1];
            const double db = t[i].bytes[b] - t[i].bytes[a];
            if (total + db > budget) continue;
            const double s = (t[i].err[a] - t[i].err[b]) / db;
            if (best < 0 || s > best_s) best = i, best_s = s;
        }
        if (best < 0) break;
        const int a = h[best][at[best]], b = h[best][at[best] + 1];
        total += t[best].bytes[b] - t[best].bytes[a];
        at[best]++;
    }
    for (int64_t i = 0; i < n; i++) t[i].chosen = nh[i] > 0 ? h[i][at[i]] : -1;
    *used = total;
    free(h);
    free(nh);
    free(at);
    return SQZ_OK;
}

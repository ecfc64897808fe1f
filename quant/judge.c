/*
 * quant/judge.c - a quantized layer judged on calibration rows (quant/judge.h): the validation
 * against the float layer, and GPTQ-or-imatrix with its held-out judge. Numbers in, numbers out:
 * the compress pass writes them into its report rows.
 */
#include <cblas.h>
#include <stdlib.h>
#include <string.h>

#include "quant/judge.h"

void sqz__sample_products_free(sqz__sample_products *p) {
    free(p->yr);
    free(p->yq);
    memset(p, 0, sizeof *p);
}

/* The relative output error of q against the float layer's yr (n_x, n_out) on the sample rows x;
 * *yq_out (the caller's to free) its products, by the kernel. */
static sqz_status sample_err(sqz_backend *be, const sqz_qmatrix *q, const float *yr, const float *x, int64_t n_x,
                             double *err, float **yq_out, char by[24]) {
    const size_t n = (size_t)n_x * (size_t)q->n_out;
    float *yq = sqz__malloc(n * sizeof(float));
    sqz_status st = yq ? sqz__validate_quant(be, q, x, n_x, NULL, yq, by) : SQZ_ERR_NOMEM;
    if (st == SQZ_OK) *err = sqz__rel_err(yq, yr, (int64_t)n);
    if (st == SQZ_OK) *yq_out = yq;
    else free(yq);
    return st;
}

/* The statistics with the sample rows x (n_x, n) taken out: X^T X - x^T x (dsyrk in double on the
 * upper triangle, mirrored) and E[x^2] from its diagonal over the tokens left. The sample rows are
 * a stride of the tokens X^T X was summed over (calib/observe.c), so this is X^T X of the others.
 * *xtx_out and *x2_out are the caller's to free. */
static sqz_status heldout_stats(const sqz_qstats *st, const float *x, int64_t n_x, sqz_qstats *ho, double **xtx_out,
                                float **x2_out) {
    enum { CHUNK = 128 };
    const int64_t n = st->n_in;
    const size_t nn = (size_t)n * (size_t)n;
    double *h = sqz__malloc(nn * sizeof(double)), *xd = sqz__malloc((size_t)CHUNK * (size_t)n * sizeof(double));
    float *x2 = sqz__malloc((size_t)n * sizeof(float));
    if (!h || !xd || !x2) {
        free(h); free(xd); free(x2);
        return SQZ_ERR_NOMEM;
    }
    memcpy(h, st->xtx, nn * sizeof(double));
    for (int64_t r0 = 0; r0 < n_x; r0 += CHUNK) {
        const int64_t rows = n_x - r0 < CHUNK ? n_x - r0 : CHUNK;
        for (int64_t i = 0; i < rows * n; i++) xd[i] = (double)x[r0 * n + i];
        cblas_dsyrk(CblasRowMajor, CblasUpper, CblasTrans, (int)n, (int)rows, -1.0, xd, (int)n, 1.0, h, (int)n);
    }
    free(xd);
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < i; j++) h[i * n + j] = h[j * n + i];
    const int64_t left = st->n_tokens - n_x;
    bool summed = true; /* the rows were summed into X^T X as they are (not scaled): else no judge */
    for (int64_t j = 0; j < n; j++) {
        const double d = h[j * n + j];
        summed = summed && d >= -1e-6 * st->xtx[j * n + j];
        h[j * n + j] = d > 0 ? d : 0; /* rounding: never below 0 */
        x2[j] = (float)(h[j * n + j] / (double)left);
    }
    if (!summed) {
        free(h);
        free(x2);
        return SQZ_ERR_UNSUPPORTED;
    }
    *ho = *st;
    ho->xtx = h;
    ho->x2 = x2;
    ho->n_tokens = left;
    ho->dxxt = NULL; /* the judge is plain GPTQ's fit */
    *xtx_out = h;
    *x2_out = x2;
    return SQZ_OK;
}

/* Which of GPTQ and imatrix rounds lin better on rows neither was fitted to: both fitted to the
 * statistics without the sample rows, judged on the sample rows (*gptq_wins). */
static sqz_status heldout_judge(sqz_backend *be, const sqz_qlinear *lin, const sqz_qstats *in_st, const float *in_x,
                                const sqz_quant_opts *qo, const sqz_qmethod *gq, const sqz_qmethod *im,
                                const float *yr, bool *gptq_wins, double *eg_out, double *ei_out) {
    sqz_qstats ho;
    double *h = NULL;
    float *x2 = NULL;
    SQZ_TRY(heldout_stats(in_st, in_x, in_st->n_x, &ho, &h, &x2));
    sqz_quant_opts o2 = *qo;
    o2.factors = NULL; /* another matrix than the members' shared factor */
    o2.gptaq = false;
    sqz_qmatrix g, i;
    memset(&g, 0, sizeof g);
    memset(&i, 0, sizeof i);
    float *yq = NULL;
    char by[24];
    double eg = 0, ei = 0;
    sqz_status st = gq->run(lin, 1, &ho, &o2, &g, NULL);
    if (st == SQZ_OK) st = im->run(lin, 1, &ho, &o2, &i, NULL);
    free(h);
    free(x2);
    if (st == SQZ_OK) st = sample_err(be, &g, yr, in_x, in_st->n_x, &eg, &yq, by);
    free(yq);
    yq = NULL;
    if (st == SQZ_OK) st = sample_err(be, &i, yr, in_x, in_st->n_x, &ei, &yq, by);
    free(yq);
    sqz_qmatrix_free(&g);
    sqz_qmatrix_free(&i);
    *gptq_wins = eg <= ei;
    *eg_out = eg;
    *ei_out = ei;
    return st;
}

/* GPTQ's sweep can lose to importance-weighted rounding where the target grid nearly holds the
 * weights already: a Q4_K source onto Q4_1 (the same 32-blocks with a scale and a minimum) kept
 * 0.07-0.12% relative output error by imatrix and 1.0-2.9% by GPTQ on Qwen2.5-Coder-1.5B, its
 * first errors spread over later columns that then leave the grid. So a gptq matrix is also
 * rounded by imatrix and one of the two is kept (*used says which). Only where imatrix produces the
 * type and sample rows are at hand; E[x^2] is the diagonal of GPTQ's X^T X over its tokens.
 *
 * The judge is held out: judged on the sample rows that it was fitted to, GPTQ had 1.5-4x lower
 * error than imatrix on Qwen2.5-Coder-1.5B's IQ3_S/Q3_K/Q2_K matrices, yet the files it chose
 * were 32-40% worse on held-out text (2026-11-29). So both candidates are fitted once more to X^T X
 * without the sample rows (HELDOUT_MIN of them at least, leaving as many tokens again) and the one
 * with the lower error on those rows wins; the winner is then the full-data fit. */
enum { HELDOUT_MIN = 64 };
sqz_status sqz__judge_gptq_or_imatrix(sqz_backend *be, const sqz_qlinear *lin, const sqz_qstats *st_in, const float *x,
                                      const sqz_quant_opts *qo, sqz_qmatrix *out, const sqz_qmethod **used,
                                      sqz__sample_products *kept, double *heldout_gptq, double *heldout_imatrix) {
    const sqz_qmethod *im = sqz_qmethod_find("imatrix");
    if (!(*used)->hessian || !st_in || !x || st_in->n_x < 1 || (!st_in->x2 && !st_in->xtx) || !im ||
        !(im->formats & (1u << qo->target.fmt)))
        return SQZ_OK;
    /* GPTQ's statistics hold X^T X, whose diagonal over the tokens is E[x^2] */
    const int64_t n = st_in->n_in;
    sqz_qstats st2 = *st_in;
    float *x2 = st2.x2 ? NULL : sqz__malloc((size_t)n * sizeof(float));
    if (!st2.x2 && !x2) return SQZ_ERR_NOMEM;
    for (int64_t j = 0; x2 && j < n; j++)
        x2[j] = (float)(st_in->xtx[j * n + j] / (double)(st_in->n_tokens > 0 ? st_in->n_tokens : 1));
    if (x2) st2.x2 = x2;
    sqz_qmatrix alt;
    memset(&alt, 0, sizeof alt);
    double eg = 0, ei = 0;
    sqz_status st = im->run(lin, 1, &st2, qo, &alt, NULL);
    free(x2);
    /* the float layer's products, once for both candidates; the kept one's for the validation */
    sqz__sample_products g = {0}, i = {0};
    g.yr = st == SQZ_OK ? sqz__malloc((size_t)st_in->n_x * (size_t)lin->n_out * sizeof(float)) : NULL;
    if (st == SQZ_OK && !g.yr) st = SQZ_ERR_NOMEM;
    if (st == SQZ_OK) st = sqz__validate_float(be, lin->w, lin->n_out, n, x, st_in->n_x, g.yr);
    if (st == SQZ_OK) st = sample_err(be, out, g.yr, x, st_in->n_x, &eg, &g.yq, g.by);
    if (st == SQZ_OK) st = sample_err(be, &alt, g.yr, x, st_in->n_x, &ei, &i.yq, i.by);
    bool imatrix_wins = ei < eg; /* in-sample: only where too few rows are left to hold out */
    const bool heldout = st_in->xtx && st_in->n_x >= HELDOUT_MIN && st_in->n_tokens >= 2 * st_in->n_x;
    if (st == SQZ_OK && heldout) {
        bool gw = true;
        double egh = 0, eih = 0;
        st = heldout_judge(be, lin, st_in, x, qo, *used, im, g.yr, &gw, &egh, &eih);
        if (st == SQZ_ERR_UNSUPPORTED) { /* statistics not summed from these rows: in-sample */
            sqz_clear_error();
            st = SQZ_OK;
            gw = !imatrix_wins;
        }
        imatrix_wins = !gw;
        if (st == SQZ_OK && (egh > 0 || eih > 0)) { /* the report's heldout_gptq / heldout_imatrix */
            *heldout_gptq = egh;
            *heldout_imatrix = eih;
        }
    }
    if (st == SQZ_OK && imatrix_wins) {
        alt.seconds += out->seconds;
        sqz_qmatrix_free(out);
        *out = alt;
        *used = im;
        free(g.yq);
        g.yq = i.yq; /* the float products stay */
        memcpy(g.by, i.by, sizeof g.by);
        *kept = g;
        return SQZ_OK;
    }
    sqz_qmatrix_free(&alt);
    free(i.yq);
    if (st == SQZ_OK) *kept = g;
    else sqz__sample_products_free(&g);
    return st;
}

sqz_status sqz__judge_validate(sqz_backend *be, const sqz_qmatrix *q, const float *w, const float *x, const float *xs,
                               int64_t n_x, const float *smooth, const sqz__sample_products *known, int threads,
                               sqz__layer_check *row) {
    const int64_t no = q->n_out, ni = q->n_in;
    const bool have = known && known->yr && known->yq;
    float *deq = sqz__malloc((size_t)no * (size_t)ni * sizeof(float));
    float *ws = sqz__malloc((size_t)no * (size_t)ni * sizeof(float));
    float *yr = n_x && !have ? sqz__malloc((size_t)n_x * (size_t)no * sizeof(float)) : NULL;
    float *yq = n_x && !have ? sqz__malloc((size_t)n_x * (size_t)no * sizeof(float)) : NULL;
    sqz_status st = (!deq || !ws || (n_x && !have && (!yr || !yq))) ? SQZ_ERR_NOMEM : SQZ_OK;
    if (st == SQZ_OK) st = sqz__qmatrix_to_f32_par(q, deq, threads); /* the serial bits, on every core */
    if (st == SQZ_OK) {
        memcpy(ws, w, (size_t)no * (size_t)ni * sizeof(float));
        if (smooth) sqz_scale_columns(ws, no, ni, smooth);
        row->weight_err = sqz__rel_err(deq, ws, no * ni);
    }
    if (st == SQZ_OK && n_x && have) { /* GPTQ-or-imatrix formed both products on these rows */
        snprintf(row->by, sizeof row->by, "%s", known->by);
        row->out_err = sqz__rel_err(known->yq, known->yr, n_x * no);
    } else if (st == SQZ_OK && n_x) {
        /* the float layer on the original input, the compressed one as it would run */
        st = sqz__validate_float(be, w, no, ni, x, n_x, yr);
        if (st == SQZ_OK) st = sqz__validate_quant(be, q, xs, n_x, deq, yq, row->by);
        if (st == SQZ_OK) row->out_err = sqz__rel_err(yq, yr, n_x * no);
    }
    free(deq);
    free(ws);
    free(yr);
    free(yq);
    return st;
}

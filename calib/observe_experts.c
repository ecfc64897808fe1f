/*
 * calib/observe_experts.c - a mixture's experts observed one expert at a time: the runtime gathers the
 * rows of the tokens routed to expert e and reports them (sqz_hook_event.in_expert = e + 1) for the
 * experts' gate|up input and for their down input. Per expert: the tokens it saw, E[x^2] and, when
 * the observer collects X^T X, that expert's X^T X, summed in double on the host (dsyrk). An expert's rows are
 * kept as they come until it has seen as many tokens as it has inputs, and only then summed into an X^T X (the
 * rule of compress/pass_quant_experts.c runs GPTQ only from there: below, E[x^2] decides), so a short
 * calibration of a wide mixture does not hold a Hessian per expert (128 x 2048^2 doubles: 4.3 GB a block).
 *
 * The block's statistics then hold one sqz_calib_input per input with n_mat experts one after another
 * (x2 (n_mat, n_in), mat_xtx (n_mat) of (n_in, n_in) or NULL, mat_tokens (n_mat)); an expert no token reached
 * has mat_tokens 0, no X^T X and, as llama-imatrix writes it, an all-ones E[x^2]: compress/pass_quant_experts.c
 * applies its rule to it, never a zero Hessian.
 * Sample rows, histograms and GPTAQ's dXX^T are not kept for experts. The experts' outputs (EXPERT_OUT events,
 * with each row's routing weight) give REAP's score (Lasby et al., Cerebras 2025): per expert the mean over its
 * tokens of g_e(x) ||f_e(x)||_2, for expert pruning.
 */
#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "calib/observe_internal.h"

static void experts_free(obs_experts *x) {
    for (int64_t e = 0; e < x->n_mat; e++) {
        free(x->sum_x2[e]);
        if (x->xtx) free(x->xtx[e]);
        if (x->rows) free(x->rows[e]);
    }
    free(x->sum_x2);
    free(x->xtx);
    free(x->rows);
    free(x->n_tokens);
    memset(x, 0, sizeof *x);
}

void sqz__calib_experts_free(sqz_calib_observer *ob) {
    for (int i = 0; i < ob->n_xin; i++) experts_free(&ob->xin[i]);
    free(ob->xbuf);
    free(ob->reap);
    ob->n_xin = 0;
}

sqz_status sqz__calib_expert_out(sqz_calib_observer *ob, const sqz_hook_event *ev) {
    const int64_t e = ev->in_expert - 1, d = ev->dim;
    if (e < 0 || !ev->weights) return SQZ_OK;
    if (e >= ob->n_reap) {
        double *r = sqz__realloc(ob->reap, (size_t)(e + 1) * sizeof *r);
        if (!r) return SQZ_ERR_NOMEM;
        for (int64_t k = ob->n_reap; k <= e; k++) r[k] = 0;
        ob->reap = r;
        ob->n_reap = e + 1;
    }
    for (int64_t t = 0; t < ev->n_tokens; t++) { /* REAP: g_e(x) ||f_e(x)||_2 */
        double s = 0;
        for (int64_t j = 0; j < d; j++) s += (double)ev->x[t * d + j] * (double)ev->x[t * d + j];
        ob->reap[e] += (double)ev->weights[t] * sqrt(s);
    }
    return SQZ_OK;
}

/* REAP's means onto the experts' gate|up input d (n_mat experts, mat_tokens set). */
static sqz_status attach_reap(const sqz_calib_observer *ob, sqz_calib_input *d) {
    if (!ob->reap || !(d->roles & (1u << SQZ_ROLE_FFN_GATE_EXPS))) return SQZ_OK;
    if (!(d->mat_reap = sqz__calloc((size_t)d->n_mat, sizeof(float)))) return SQZ_ERR_NOMEM;
    for (int64_t e = 0; e < d->n_mat && e < ob->n_reap; e++)
        d->mat_reap[e] = d->mat_tokens[e] > 0 ? (float)(ob->reap[e] / (double)d->mat_tokens[e]) : 0.0f;
    return SQZ_OK;
}

/* Room for expert e (arrays grown to e + 1) and its sums allocated. */
static sqz_status expert_slot(const sqz_calib_observer *ob, obs_experts *x, int64_t e) {
    if (e >= x->n_mat) {
        const size_t n = (size_t)e + 1;
        double **s = sqz__realloc(x->sum_x2, n * sizeof *s);
        if (s) x->sum_x2 = s;
        int64_t *t = sqz__realloc(x->n_tokens, n * sizeof *t);
        if (t) x->n_tokens = t;
        const bool h_on = (ob->o.needs & SQZ_QSTAT_XTX) != 0;
        double **h = h_on ? sqz__realloc(x->xtx, n * sizeof *h) : NULL;
        if (h) x->xtx = h;
        float **rw = h_on ? sqz__realloc(x->rows, n * sizeof *rw) : NULL;
        if (rw) x->rows = rw;
        if (!s || !t || (h_on && (!h || !rw))) return SQZ_ERR_NOMEM;
        for (int64_t k = x->n_mat; k <= e; k++) {
            x->sum_x2[k] = NULL;
            x->n_tokens[k] = 0;
            if (x->xtx) x->xtx[k] = NULL, x->rows[k] = NULL;
        }
        x->n_mat = e + 1;
    }
    if (!x->sum_x2[e] && !(x->sum_x2[e] = sqz__calloc((size_t)x->n_in, sizeof(double)))) return SQZ_ERR_NOMEM;
    return SQZ_OK;
}

/* rows (r, k) of expert e summed into its X^T X (upper triangle), in chunks of XTX_CHUNK rows in double. */
static sqz_status xtx_add(sqz_calib_observer *ob, double *h, const float *rows, int64_t r, int64_t k) {
    if (ob->xbuf_n < XTX_CHUNK * k) {
        free(ob->xbuf);
        ob->xbuf_n = 0;
        if (!(ob->xbuf = sqz__malloc((size_t)(XTX_CHUNK * k) * sizeof(double)))) return SQZ_ERR_NOMEM;
        ob->xbuf_n = XTX_CHUNK * k;
    }
    for (int64_t t0 = 0; t0 < r; t0 += XTX_CHUNK) {
        const int64_t n = r - t0 < XTX_CHUNK ? r - t0 : XTX_CHUNK;
        for (int64_t i = 0; i < n * k; i++) ob->xbuf[i] = (double)rows[t0 * k + i];
        cblas_dsyrk(CblasRowMajor, CblasUpper, CblasTrans, (int)k, (int)n, 1.0, ob->xbuf, (int)k, 1.0, h, (int)k);
    }
    return SQZ_OK;
}

/* Expert e's new rows x (n, k), its earlier count `had`: kept while it has seen fewer than k tokens, then
 * its X^T X made from them and summed on. */
static sqz_status hessian_add(sqz_calib_observer *ob, obs_experts *x, int64_t e, const float *rows, int64_t n,
                              int64_t had) {
    const int64_t k = x->n_in;
    if (!x->xtx[e] && had + n < k) { /* kept, in a buffer grown by doubling up to k - 1 rows */
        int64_t cap = had ? had : 16;
        while (cap < had + n) cap *= 2;
        cap = cap < k ? cap : k;
        if (cap > had || !x->rows[e]) {
            float *r = sqz__realloc(x->rows[e], (size_t)(cap * k) * sizeof(float));
            if (!r) return SQZ_ERR_NOMEM;
            x->rows[e] = r;
        }
        memcpy(x->rows[e] + had * k, rows, (size_t)(n * k) * sizeof(float));
        return SQZ_OK;
    }
    if (!x->xtx[e]) {
        if (!(x->xtx[e] = sqz__calloc((size_t)(k * k), sizeof(double))))
            return SQZ_ERROR(SQZ_ERR_NOMEM, "calibration: block %d: no memory for expert %lld's Hessian (%lld "
                             "inputs)", (int)ob->layer, (long long)e, (long long)k);
        SQZ_TRY(xtx_add(ob, x->xtx[e], x->rows[e], had, k));
        free(x->rows[e]);
        x->rows[e] = NULL;
    }
    return xtx_add(ob, x->xtx[e], rows, n, k);
}

static sqz_status find(sqz_calib_observer *ob, uint32_t roles, int64_t n_in, obs_experts **out) {
    for (int i = 0; i < ob->n_xin; i++) {
        if (ob->xin[i].roles != roles) continue;
        SQZ_RETURN_IF(ob->xin[i].n_in != n_in, SQZ_ERR_INVALID_ARG, "calibration: block %d: an expert input changed "
                      "width from %lld to %lld", (int)ob->layer, (long long)ob->xin[i].n_in, (long long)n_in);
        *out = &ob->xin[i];
        return SQZ_OK;
    }
    SQZ_RETURN_IF(ob->n_xin == SQZ__MAX_EXPERT_INPUTS || n_in < 1 || n_in > SQZ_CALIB_MAX_N_IN, SQZ_ERR_INVALID_ARG,
                  "calibration: block %d: more than %d expert inputs, or a width of %lld", (int)ob->layer,
                  SQZ__MAX_EXPERT_INPUTS, (long long)n_in);
    obs_experts *x = &ob->xin[ob->n_xin++];
    memset(x, 0, sizeof *x);
    x->roles = roles;
    x->n_in = n_in;
    *out = x;
    return SQZ_OK;
}

sqz_status sqz__calib_expert_add(sqz_calib_observer *ob, const sqz_hook_event *ev) {
    obs_experts *x = NULL;
    const int64_t k = ev->dim, e = ev->in_expert - 1;
    SQZ_TRY(find(ob, ev->roles, k, &x));
    SQZ_TRY(expert_slot(ob, x, e));
    double *s = x->sum_x2[e];
    for (int64_t t = 0; t < ev->n_tokens; t++)
        for (int64_t j = 0; j < k; j++) s[j] += (double)ev->x[t * k + j] * (double)ev->x[t * k + j];
    const int64_t had = x->n_tokens[e];
    x->n_tokens[e] += ev->n_tokens;
    return x->xtx ? hessian_add(ob, x, e, ev->x, ev->n_tokens, had) : SQZ_OK;
}

/* x's sums as one block input of x->n_mat experts (the per-expert buffers freed on the way). */
static sqz_status finish_one(obs_experts *x, sqz_calib_input *d) {
    const int64_t E = x->n_mat, k = x->n_in;
    d->roles = x->roles;
    d->st.n_in = k;
    d->n_mat = E;
    d->x2 = sqz__calloc((size_t)(E * k), sizeof(float));
    d->mat_tokens = sqz__calloc((size_t)E, sizeof(float));
    if (x->xtx) d->mat_xtx = sqz__calloc((size_t)E, sizeof *d->mat_xtx);
    if (!d->x2 || !d->mat_tokens || (x->xtx && !d->mat_xtx)) return SQZ_ERR_NOMEM;
    for (int64_t e = 0; e < E; e++) {
        const int64_t n = x->n_tokens[e];
        d->mat_tokens[e] = (float)n;
        d->st.n_tokens += n;
        for (int64_t j = 0; j < k; j++) /* no token: llama-imatrix's all-ones importance */
            d->x2[e * k + j] = n && x->sum_x2[e] ? (float)(x->sum_x2[e][j] / (double)n) : 1.0f;
        double *h = x->xtx && x->xtx[e] ? x->xtx[e] : NULL; /* moved: both triangles */
        for (int64_t r = 0; h && r < k; r++)
            for (int64_t c = r + 1; c < k; c++) h[c * k + r] = h[r * k + c];
        if (h) d->mat_xtx[e] = h, x->xtx[e] = NULL;
    }
    d->have = SQZ_QSTAT_X2 | (d->mat_xtx ? SQZ_QSTAT_XTX : 0u);
    d->st.x2 = d->x2;
    return SQZ_OK;
}

sqz_status sqz__calib_experts_finish(sqz_calib_observer *ob, sqz_calib_block *out) {
    for (int i = 0; i < ob->n_xin; i++) {
        SQZ_RETURN_IF(out->n_inputs >= SQZ_CALIB_MAX_INPUTS, SQZ_ERR_INVALID_ARG,
                      "calibration: block %d has more than %d distinct linear inputs", (int)ob->layer,
                      SQZ_CALIB_MAX_INPUTS);
        sqz_calib_input *d = &out->in[out->n_inputs++];
        SQZ_TRY(finish_one(&ob->xin[i], d));
        SQZ_TRY(attach_reap(ob, d));
        if (d->st.n_tokens > out->n_tokens) out->n_tokens = d->st.n_tokens;
    }
    return SQZ_OK;
}

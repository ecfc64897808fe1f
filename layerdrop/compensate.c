/*
 * layerdrop/compensate.c - training-free compensation of removed blocks (the idea of
 * ReplaceMe, 2025): for each run of removed blocks [a, b] after a kept block p, a linear map
 * T fitted by least squares on the calibration windows takes p's MLP output M to what the
 * run would have added, and is folded into p's down projection (W <- T^T W), so the model
 * keeps its architecture. Normal equations in double, a ridge towards the identity, a
 * Cholesky solve; the fitted error comes from the same sums.
 */
#include <cblas.h>
#include <stdlib.h>
#include <string.h>

#include "layerdrop/layerdrop_internal.h"
#include "sqz/edit.h"

/* One run's fit: sums over the windows and the captured input of p's down projection. */
typedef struct fit {
    int32_t p, a, b;          /* kept block, removed run [a, b] */
    int64_t ctx, d, dff;
    float *W;                 /* p's down projection (d, dff) as f32 */
    float *bias;              /* its bias (d) or NULL */
    float *D;                 /* (ctx, dff) input of the down projection, from the hook */
    bool got;
    float *O, *L, *M;         /* (ctx, d) each */
    double *Md, *Rd;          /* (ctx, d) each */
    double *A, *B;            /* (d, d): sum M^T M, sum M^T R */
    double rr, ll, ob;        /* sum ||R||^2, ||L||^2, ||O - L||^2 */
} fit;

static sqz_status capture(void *user, const sqz_hook_event *e) {
    fit *F = user;
    if (e->point != SQZ_HOOK_LINEAR_IN || e->layer != F->p || !(e->roles & (1u << SQZ_ROLE_FFN_DOWN))) return SQZ_OK;
    SQZ_RETURN_IF(e->dim != F->dff || e->n_tokens != F->ctx, SQZ_ERR_SHAPE,
                  "layerdrop: block %d's down projection reads %lld x %lld, expected %lld x %lld", (int)F->p,
                  (long long)e->n_tokens, (long long)e->dim, (long long)F->ctx, (long long)F->dff);
    memcpy(F->D, e->x, (size_t)(F->ctx * F->dff) * sizeof(float));
    F->got = true;
    return SQZ_OK;
}

/* The window's contribution: O = p(x), L = blocks a..b (O), M = D W^T + bias, R = L - O + M. */
static sqz_status window_sums(fit *F, sqz_session *s, const int32_t *tok, const bool *removed) {
    const int64_t n = F->ctx, d = F->d;
    SQZ_TRY(sqz_session_embed(s, tok, NULL, n, 0, F->O));
    for (int32_t l = 0; l < F->p; l++)
        if (!removed[l]) SQZ_TRY(sqz_session_block(s, l, F->O, n, 0));
    F->got = false;
    sqz_session_set_hook(s, capture, F);
    sqz_status st = sqz_session_block(s, F->p, F->O, n, 0);
    sqz_session_set_hook(s, NULL, NULL);
    SQZ_TRY(st);
    SQZ_RETURN_IF(!F->got, SQZ_ERR_UNSUPPORTED, "layerdrop: block %d showed no down-projection input", (int)F->p);
    memcpy(F->L, F->O, (size_t)(n * d) * sizeof(float));
    for (int32_t l = F->a; l <= F->b; l++) SQZ_TRY(sqz_session_block(s, l, F->L, n, 0));
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)n, (int)d, (int)F->dff, 1.0f, F->D, (int)F->dff, F->W,
                (int)F->dff, 0.0f, F->M, (int)d);
    for (int64_t t = 0; t < n; t++)
        for (int64_t k = 0; k < d; k++) {
            const int64_t i = t * d + k;
            const double m = (double)F->M[i] + (F->bias ? F->bias[k] : 0.0), o = F->O[i], l = F->L[i];
            F->Md[i] = m;
            F->Rd[i] = l - o + m;
            F->rr += F->Rd[i] * F->Rd[i];
            F->ll += l * l;
            F->ob += (o - l) * (o - l);
        }
    cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)d, (int)d, (int)n, 1.0, F->Md, (int)d, F->Md, (int)d,
                1.0, F->A, (int)d);
    cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)d, (int)d, (int)n, 1.0, F->Md, (int)d, F->Rd, (int)d,
                1.0, F->B, (int)d);
    return SQZ_OK;
}

/* Solves G X = Y in place (G (n, n) symmetric positive definite, overwritten by its Cholesky
 * factor; Y (n, n) becomes X). */
static sqz_status cholesky_solve(double *G, double *Y, int64_t n, int32_t p) {
    for (int64_t j = 0; j < n; j++) {
        double s = G[j * n + j];
        for (int64_t k = 0; k < j; k++) s -= G[j * n + k] * G[j * n + k];
        SQZ_RETURN_IF(!(s > 0), SQZ_ERR_NUMERIC, "layerdrop: the compensation system of block %d is not positive "
                      "definite (column %lld)", (int)p, (long long)j);
        const double r = sqrt(s);
        G[j * n + j] = r;
        for (int64_t i = j + 1; i < n; i++) {
            double v = G[i * n + j];
            for (int64_t k = 0; k < j; k++) v -= G[i * n + k] * G[j * n + k];
            G[i * n + j] = v / r;
        }
    }
    for (int64_t c = 0; c < n; c++) {  /* L z = y, then L^T x = z, column by column */
        for (int64_t i = 0; i < n; i++) {
            double v = Y[i * n + c];
            for (int64_t k = 0; k < i; k++) v -= G[i * n + k] * Y[k * n + c];
            Y[i * n + c] = v / G[i * n + i];
        }
        for (int64_t i = n - 1; i >= 0; i--) {
            double v = Y[i * n + c];
            for (int64_t k = i + 1; k < n; k++) v -= G[k * n + i] * Y[k * n + c];
            Y[i * n + c] = v / G[i * n + i];
        }
    }
    return SQZ_OK;
}

/* T = (A + lam I)^-1 (B + lam I) into F->B; the fitted error ||M T - R||^2 into *after. */
static sqz_status solve(fit *F, double ridge, double *after) {
    const int64_t d = F->d;
    double tr = 0;
    for (int64_t i = 0; i < d; i++) tr += F->A[i * d + i];
    const double lam = ridge * tr / (double)d;
    double *A0 = sqz__malloc((size_t)(d * d) * sizeof(double)), *AT = sqz__malloc((size_t)(d * d) * sizeof(double));
    double *B0 = sqz__malloc((size_t)(d * d) * sizeof(double));
    sqz_status st = A0 && AT && B0 ? SQZ_OK : SQZ_ERR_NOMEM;
    if (st == SQZ_OK) {
        memcpy(A0, F->A, (size_t)(d * d) * sizeof(double));
        memcpy(B0, F->B, (size_t)(d * d) * sizeof(double));
        for (int64_t i = 0; i < d; i++) {
            F->A[i * d + i] += lam;
            F->B[i * d + i] += lam;
        }
        st = cholesky_solve(F->A, F->B, d, F->p);
    }
    if (st == SQZ_OK) { /* tr(T^T A T) - 2 tr(T^T B) + sum ||R||^2 */
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)d, (int)d, (int)d, 1.0, A0, (int)d, F->B, (int)d,
                    0.0, AT, (int)d);
        double q = 0, c = 0;
        for (int64_t k = 0; k < d * d; k++) {
            q += F->B[k] * AT[k];
            c += F->B[k] * B0[k];
        }
        *after = q - 2 * c + F->rr;
        if (*after < 0) *after = 0;
    }
    free(A0);
    free(AT);
    free(B0);
    return st;
}

/* W <- T^T W (and bias <- T^T bias), stored as F32. */
static sqz_status fold(sqz_model *m, fit *F) {
    const int64_t d = F->d, dff = F->dff;
    float *Tf = sqz__malloc((size_t)(d * d) * sizeof(float)), *Wn = sqz__malloc((size_t)(d * dff) * sizeof(float));
    if (!Tf || !Wn) {
        free(Tf);
        free(Wn);
        return SQZ_ERR_NOMEM;
    }
    for (int64_t k = 0; k < d * d; k++) Tf[k] = (float)F->B[k];
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)d, (int)dff, (int)d, 1.0f, Tf, (int)d, F->W, (int)dff,
                0.0f, Wn, (int)dff);
    const int64_t shape[2] = {d, dff};
    sqz_status st = sqz_tensor_replace(m, sqz_model_get(m, SQZ_ROLE_FFN_DOWN, F->p, SQZ_PARAM_WEIGHT), SQZ_DTYPE_F32,
                                       2, shape, Wn, (size_t)(d * dff) * sizeof(float), true);
    sqz_tensor *bt = sqz_model_get(m, SQZ_ROLE_FFN_DOWN, F->p, SQZ_PARAM_BIAS);
    if (st == SQZ_OK && bt && F->bias) {
        float *bn = sqz__malloc((size_t)d * sizeof(float));
        if (!bn) st = SQZ_ERR_NOMEM;
        if (bn) cblas_sgemv(CblasRowMajor, CblasTrans, (int)d, (int)d, 1.0f, Tf, (int)d, F->bias, 1, 0.0f, bn, 1);
        const int64_t bs[1] = {d};
        if (bn) st = sqz_tensor_replace(m, bt, SQZ_DTYPE_F32, 1, bs, bn, (size_t)d * sizeof(float), true);
    }
    free(Tf);
    return st;
}

static sqz_status fit_alloc(fit *F, const sqz_model *m) {
    const sqz_tensor *w = sqz_model_get(m, SQZ_ROLE_FFN_DOWN, F->p, SQZ_PARAM_WEIGHT);
    const sqz_tensor *b = sqz_model_get(m, SQZ_ROLE_FFN_DOWN, F->p, SQZ_PARAM_BIAS);
    SQZ_RETURN_IF(!w || w->ndim != 2 || w->shape[0] != m->hp.d_model, SQZ_ERR_SHAPE,
                  "layerdrop: block %d has no down projection of %lld rows", (int)F->p, (long long)m->hp.d_model);
    F->d = w->shape[0];
    F->dff = w->shape[1];
    const size_t nd = (size_t)(F->ctx * F->d);
    F->W = sqz__malloc((size_t)(F->d * F->dff) * sizeof(float));
    F->bias = b ? sqz__malloc((size_t)F->d * sizeof(float)) : NULL;
    F->D = sqz__malloc((size_t)(F->ctx * F->dff) * sizeof(float));
    F->O = sqz__malloc(nd * sizeof(float));
    F->L = sqz__malloc(nd * sizeof(float));
    F->M = sqz__malloc(nd * sizeof(float));
    F->Md = sqz__malloc(nd * sizeof(double));
    F->Rd = sqz__malloc(nd * sizeof(double));
    F->A = sqz__calloc((size_t)(F->d * F->d), sizeof(double));
    F->B = sqz__calloc((size_t)(F->d * F->d), sizeof(double));
    if (!F->W || (b && !F->bias) || !F->D || !F->O || !F->L || !F->M || !F->Md || !F->Rd || !F->A || !F->B)
        return SQZ_ERR_NOMEM;
    SQZ_TRY(sqz_tensor_to_f32(w, F->W));
    if (b) SQZ_TRY(sqz_tensor_to_f32(b, F->bias));
    return SQZ_OK;
}

static void fit_free(fit *F) {
    free(F->W);
    free(F->bias);
    free(F->D);
    free(F->O);
    free(F->L);
    free(F->M);
    free(F->Md);
    free(F->Rd);
    free(F->A);
    free(F->B);
}

/* Fits and folds the map of one run; appends its row to res->comp. */
static sqz_status one_run(sqz_model *m, sqz_session *s, const sqz_calib_windows *w, const bool *removed, fit *F,
                          double ridge, sqz_layerdrop_result *res) {
    SQZ_TRY(fit_alloc(F, m));
    for (int64_t win = 0; win < w->n_windows; win++) SQZ_TRY(window_sums(F, s, w->tokens + win * w->ctx, removed));
    double after = 0;
    SQZ_TRY(solve(F, ridge, &after));
    SQZ_TRY(fold(m, F));
    sqz_session_invalidate(s, F->p);
    sqz_layerdrop_comp *c = sqz__realloc(res->comp, (size_t)(res->n_comp + 1) * sizeof *c);
    if (!c) return SQZ_ERR_NOMEM;
    res->comp = c;
    c[res->n_comp++] = (sqz_layerdrop_comp){.into = F->p, .first = F->a, .last = F->b,
                                            .err_before = F->ll > 0 ? sqrt(F->ob / F->ll) : 0,
                                            .err_after = F->ll > 0 ? sqrt(after / F->ll) : 0};
    return SQZ_OK;
}

static void note_block0(sqz_layerdrop_result *res, int32_t b) {
    snprintf(res->note, sizeof res->note, "blocks 0-%d: a run starting at block 0 has no block before it: not "
             "compensated", (int)b);
}

sqz_status sqz_layerdrop_compensate(sqz_model *m, const sqz_calib_windows *w, const sqz_session_opts *so,
                                    const int32_t *removed, int32_t n, double ridge, sqz_layerdrop_result *res) {
    SQZ_RETURN_IF(!m || !w || w->n_windows < 1 || !res || (n > 0 && !removed), SQZ_ERR_INVALID_ARG,
                  "layerdrop: compensation needs the model, calibration windows and the removed blocks");
    SQZ_TRY(sqz__ld_check_decoder(m, "layerdrop compensation"));
    const int32_t Lc = (int32_t)m->hp.n_layers;
    bool *gone = sqz__calloc((size_t)Lc, sizeof(bool));
    if (!gone) return SQZ_ERR_NOMEM;
    sqz_status st = SQZ_OK;
    for (int32_t i = 0; i < n && st == SQZ_OK; i++) {
        if (removed[i] < 0 || removed[i] >= Lc || (i && removed[i] <= removed[i - 1]))
            st = SQZ_ERROR(SQZ_ERR_INVALID_ARG, "layerdrop: removed blocks must increase within 0..%d", (int)Lc - 1);
        else gone[removed[i]] = true;
    }
    const double t0 = sqz_now_seconds();
    sqz_session *s = NULL;
    if (st == SQZ_OK) st = sqz__ld_session(m, w, so, &s);
    for (int32_t a = 0; a < Lc && st == SQZ_OK; a++) {
        if (!gone[a] || (a > 0 && gone[a - 1])) continue;
        int32_t b = a;
        while (b + 1 < Lc && gone[b + 1]) b++;
        if (a == 0) {
            note_block0(res, b);
            continue;
        }
        fit F = {.p = a - 1, .a = a, .b = b, .ctx = w->ctx};
        st = one_run(m, s, w, gone, &F, ridge > 0 ? ridge : 1e-4, res);
        fit_free(&F);
    }
    res->compensated = st == SQZ_OK && res->n_comp > 0;
    res->seconds_comp += sqz_now_seconds() - t0;
    sqz_session_free(s);
    free(gone);
    return st;
}

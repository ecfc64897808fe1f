/*
 * calib/observe_dx.c - GPTAQ's statistic dXX^T = sum_t (x_t - x~_t) x~_t^T of every linear input
 * (quant/gptaq.c): x_t the row the ORIGINAL model gives the input, x~_t the row the partly
 * compressed model gives it (the rows the Hessian X~^T X~ sums), paired token by token.
 *
 * The driver (driver.c) carries a second residual stream through the original blocks. For each
 * window it first runs that stream through block l (still holding its original weights) with
 * sqz__calib_capture_hook, which keeps the window's rows of every linear input; then the
 * compressed model's stream goes through the same block with the observer, whose linear inputs
 * are paired with the captured rows of the same input in the same order (observe.c calls
 * sqz__calib_dxxt_add). Sums in double, SQZ_XTX_CHUNK rows at a time by one dgemm each.
 */
#include <cblas.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/backend_impl.h"
#include "calib/observe_internal.h"

void sqz__calib_capture_reset(sqz__calib_capture *c, int32_t layer) {
    c->layer = layer;
    for (int i = 0; i < c->n_inputs; i++) c->in[i].n_tokens = c->in[i].used = 0;
}

void sqz__calib_capture_free(sqz__calib_capture *c) {
    if (!c) return;
    for (int i = 0; i < c->n_inputs; i++) free(c->in[i].x);
    free(c->dd);
    free(c->dx);
    memset(c, 0, sizeof *c);
}

/* The capture slot of input `roles` (a new one the first time it is met). */
static sqz_status slot(sqz__calib_capture *c, uint32_t roles, int64_t n_in, sqz__calib_captured **out) {
    for (int i = 0; i < c->n_inputs; i++)
        if (c->in[i].roles == roles) {
            SQZ_RETURN_IF(c->in[i].n_in != n_in, SQZ_ERR_INVALID_ARG,
                          "gptaq: block %d: an input changed width from %lld to %lld", (int)c->layer,
                          (long long)c->in[i].n_in, (long long)n_in);
            *out = &c->in[i];
            return SQZ_OK;
        }
    SQZ_RETURN_IF(c->n_inputs == SQZ_CALIB_MAX_INPUTS, SQZ_ERR_INVALID_ARG,
                  "gptaq: block %d has more than %d distinct linear inputs", (int)c->layer, SQZ_CALIB_MAX_INPUTS);
    sqz__calib_captured *s = &c->in[c->n_inputs++];
    memset(s, 0, sizeof *s);
    s->roles = roles;
    s->n_in = n_in;
    *out = s;
    return SQZ_OK;
}

sqz_status sqz__calib_capture_hook(void *user, const sqz_hook_event *e) {
    sqz__calib_capture *c = user;
    if (e->point != SQZ_HOOK_LINEAR_IN || !e->roles || e->layer != c->layer || e->in_expert) return SQZ_OK;
    sqz__calib_captured *s = NULL;
    SQZ_TRY(slot(c, e->roles, e->dim, &s));
    size_t need;
    SQZ_RETURN_IF(!sqz__mul_size((size_t)(s->n_tokens + e->n_tokens), (size_t)e->dim, &need), SQZ_ERR_NOMEM,
                  "gptaq: captured rows overflow");
    if (need > s->cap) {
        float *x = realloc(s->x, need * sizeof(float));
        if (!x) return SQZ_ERROR(SQZ_ERR_NOMEM, "gptaq: %zu floats of the float model's rows", need);
        s->x = x;
        s->cap = need;
    }
    memcpy(s->x + (size_t)s->n_tokens * (size_t)e->dim, e->x, (size_t)e->n_tokens * (size_t)e->dim * sizeof(float));
    s->n_tokens += e->n_tokens;
    return SQZ_OK;
}

sqz_status sqz__calib_dxxt_add(sqz_calib_observer *ob, obs_input *in, const float *x, int64_t n) {
    sqz__calib_capture *c = ob->pair;
    sqz__calib_captured *f = NULL;
    for (int i = 0; c && i < c->n_inputs; i++)
        if (c->in[i].roles == in->roles) f = &c->in[i];
    SQZ_RETURN_IF(!f || f->n_in != in->n_in || f->used + n > f->n_tokens, SQZ_ERR_INVALID_ARG,
                  "gptaq: block %d: the float model's stream has no rows for an input of width %lld (%lld of %lld "
                  "used)", (int)ob->layer, (long long)in->n_in, f ? (long long)f->used : 0LL,
                  f ? (long long)f->n_tokens : 0LL);
    const int64_t k = in->n_in;
    if (!c->dd || c->d_cap < k) {
        free(c->dd);
        free(c->dx);
        c->dd = sqz__malloc((size_t)SQZ_XTX_CHUNK * (size_t)k * sizeof(double));
        c->dx = sqz__malloc((size_t)SQZ_XTX_CHUNK * (size_t)k * sizeof(double));
        c->d_cap = c->dd && c->dx ? k : 0;
        if (!c->d_cap) return SQZ_ERR_NOMEM;
    }
    const float *xf = f->x + (size_t)f->used * (size_t)k;
    for (int64_t t0 = 0; t0 < n; t0 += SQZ_XTX_CHUNK) {
        const int64_t nr = n - t0 < SQZ_XTX_CHUNK ? n - t0 : SQZ_XTX_CHUNK;
        for (int64_t i = 0; i < nr * k; i++) {
            const double q = (double)x[t0 * k + i];
            c->dx[i] = q;
            c->dd[i] = (double)xf[t0 * k + i] - q;
        }
        cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)k, (int)k, (int)nr, 1.0, c->dd, (int)k, c->dx,
                    (int)k, 1.0, in->dxxt, (int)k);
    }
    f->used += n;
    return SQZ_OK;
}

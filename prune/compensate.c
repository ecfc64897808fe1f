/*
 * prune/compensate.c - removing heads / FFN neurons with a correction of what stays
 * (sqz/prune.h): FLAP's bias compensation (b += W_S E[x_S], An et al. 2024, eq. 8) and the
 * least-squares reconstruction of the kept columns from the Hessian of the output layer's
 * input (W_K += W_S H_SK H_KK^-1, the normal equations of min ||X W^T - X_K W_K'^T||_F;
 * H_KK^-1 through quant/cholesky.c's factor, as GPTQ uses it), then the coupled edit of
 * sqz/family.h.
 */
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "prune/prune_internal.h"
#include "quant/quant_internal.h"
#include "sqz/edit.h"

/* An F32 zero bias for weight w (its name with ".bias" for ".weight"), appended to m. */
static sqz_status add_bias(sqz_model *m, const sqz_tensor *w) {
    char name[256];
    const size_t n = strlen(w->name);
    if (n > 7 && !strcmp(w->name + n - 7, ".weight")) snprintf(name, sizeof name, "%.*s.bias", (int)(n - 7), w->name);
    else snprintf(name, sizeof name, "blk.%d.%s.bias", (int)w->layer, sqz_role_name(w->role));
    const int64_t d = w->shape[0];
    float *z = sqz__calloc((size_t)d, sizeof(float));
    if (!z) return SQZ_ERR_NOMEM;
    sqz_tensor t = {.name = name, .role = w->role, .param = SQZ_PARAM_BIAS, .layer = w->layer,
                    .dtype = SQZ_DTYPE_F32, .ndim = 1, .shape = {d}, .data = z,
                    .nbytes = (size_t)d * sizeof(float), .owned = true};
    if (!sqz_model_add_tensor(m, &t)) {
        free(z);
        return SQZ_ERROR(SQZ_ERR_NOMEM, "prune: cannot add the bias of '%s'", w->name);
    }
    return SQZ_OK;
}

/* The output layer's bias and, where the family's HF config ties biases together (llama:
 * attention_bias puts them on q, k, v and o; mlp_bias on gate, up and down), zero biases for
 * the siblings, so that GGUF and HF both express the model. */
static sqz_status add_layer_biases(sqz_model *m, int32_t layer, sqz_role out) {
    static const sqz_role attn[] = {SQZ_ROLE_ATTN_OUT, SQZ_ROLE_ATTN_Q, SQZ_ROLE_ATTN_K, SQZ_ROLE_ATTN_V};
    static const sqz_role ffn[] = {SQZ_ROLE_FFN_DOWN, SQZ_ROLE_FFN_GATE, SQZ_ROLE_FFN_UP};
    const bool is_attn = out == SQZ_ROLE_ATTN_OUT, siblings = sqz_family_get(m->hp.family)->bias_siblings;
    const int n = !siblings ? 1 : is_attn ? 4 : 3;
    for (int i = 0; i < n; i++) {
        const sqz_role r = is_attn ? attn[i] : ffn[i];
        if (sqz_model_get(m, r, layer, SQZ_PARAM_BIAS)) continue;
        const sqz_tensor *w = sqz_model_get(m, r, layer, SQZ_PARAM_WEIGHT);
        if (w) SQZ_TRY(add_bias(m, w));
    }
    if (siblings && is_attn) m->hp.attn_bias = true;
    return SQZ_OK;
}

sqz_status sqz_prune_add_biases(sqz_model *m, bool attn_out, bool ffn_down, int64_t *added) {
    const int64_t before = m->n_tensors;
    for (int32_t l = 0; l < m->hp.n_layers; l++) {
        if (attn_out) SQZ_TRY(add_layer_biases(m, l, SQZ_ROLE_ATTN_OUT));
        if (ffn_down) SQZ_TRY(add_layer_biases(m, l, SQZ_ROLE_FFN_DOWN));
    }
    *added = m->n_tensors - before;
    return SQZ_OK;
}

/* Replaces t's data by `v` (its float values, copied) as F32. */
static sqz_status set_f32(sqz_model *m, sqz_tensor *t, const float *v) {
    const int64_t n = sqz_tensor_nelements(t);
    float *d = sqz__malloc((size_t)n * sizeof(float));
    if (!d) return SQZ_ERR_NOMEM;
    memcpy(d, v, (size_t)n * sizeof(float));
    return sqz_tensor_replace(m, t, SQZ_DTYPE_F32, t->ndim, t->shape, d, (size_t)n * sizeof(float), true);
}

/* Columns of the output layer: kept (K) and removed (S), each structure `width` columns. */
typedef struct cols {
    int64_t *k, *s;
    int64_t nk, ns;
} cols;

static sqz_status split_cols(int64_t n_in, int64_t width, const int64_t *keep, int64_t n_keep, cols *c) {
    c->k = sqz__malloc((size_t)n_in * sizeof(int64_t));
    c->s = sqz__malloc((size_t)n_in * sizeof(int64_t));
    if (!c->k || !c->s) return SQZ_ERR_NOMEM;
    c->nk = c->ns = 0;
    for (int64_t st = 0, i = 0; st < n_in / width; st++) {
        const bool kept = i < n_keep && keep[i] == st;
        if (kept) i++;
        for (int64_t j = st * width; j < (st + 1) * width; j++) {
            if (kept) c->k[c->nk++] = j;
            else c->s[c->ns++] = j;
        }
    }
    return SQZ_OK;
}

/* delta (n_out, nk) = W_S H_SK H_KK^-1 (H_KK damped). */
static sqz_status lsq_delta(const float *w, int64_t n_out, int64_t n_in, const double *h, const cols *c, double damp,
                            double *delta) {
    double *u = sqz__prune_damped(h, n_in, c->k, c->nk, damp);
    double *ws = sqz__malloc((size_t)(n_out * c->ns) * sizeof(double));
    double *hsk = sqz__malloc((size_t)(c->ns * c->nk) * sizeof(double));
    sqz_status st = SQZ_ERR_NOMEM;
    if (!u || !ws || !hsk) goto done;
    if ((st = sqz__chol_inverse_upper(u, c->nk)) != SQZ_OK) goto done; /* H_KK^-1 = U^T U */
    for (int64_t i = 0; i < n_out; i++)
        for (int64_t j = 0; j < c->ns; j++) ws[i * c->ns + j] = w[i * n_in + c->s[j]];
    for (int64_t i = 0; i < c->ns; i++)
        for (int64_t j = 0; j < c->nk; j++) hsk[i * c->nk + j] = h[c->s[i] * n_in + c->k[j]];
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)n_out, (int)c->nk, (int)c->ns, 1.0, ws, (int)c->ns,
                hsk, (int)c->nk, 0.0, delta, (int)c->nk);
    cblas_dtrmm(CblasRowMajor, CblasRight, CblasUpper, CblasTrans, CblasNonUnit, (int)n_out, (int)c->nk, 1.0, u,
                (int)c->nk, delta, (int)c->nk);
    cblas_dtrmm(CblasRowMajor, CblasRight, CblasUpper, CblasNoTrans, CblasNonUnit, (int)n_out, (int)c->nk, 1.0, u,
                (int)c->nk, delta, (int)c->nk);
    for (int64_t i = 0; i < n_out * c->nk; i++)
        if (!isfinite(delta[i])) {
            st = SQZ_ERROR(SQZ_ERR_NUMERIC, "prune: the least-squares correction is not finite");
            break;
        }
done:
    free(u);
    free(ws);
    free(hsk);
    return st;
}

/* b += W_S mean_S - delta mean_K (delta NULL: bias compensation alone). */
static sqz_status bias_update(sqz_model *m, sqz_tensor *w, const float *wv, int64_t n_in, const cols *c,
                              const double *delta, const float *mean) {
    sqz_tensor *b = sqz_model_get(m, w->role, w->layer, SQZ_PARAM_BIAS);
    SQZ_RETURN_IF(!b, SQZ_ERR_INVALID_ARG, "prune: '%s' has no bias to compensate into", w->name);
    const int64_t n_out = w->shape[0];
    float *bv;
    SQZ_TRY(sqz__prune_load(b, &bv));
    for (int64_t i = 0; i < n_out; i++) {
        double s = 0;
        for (int64_t j = 0; j < c->ns; j++) s += (double)wv[i * n_in + c->s[j]] * mean[c->s[j]];
        if (delta)
            for (int64_t j = 0; j < c->nk; j++) s -= delta[i * c->nk + j] * mean[c->k[j]];
        bv[i] = (float)((double)bv[i] + s);
    }
    sqz_status st = set_f32(m, b, bv);
    free(bv);
    return st;
}

static sqz_status check_comp(const sqz_tensor *t, int32_t layer, sqz_prune_comp comp, const sqz_qstats *st) {
    const unsigned need = sqz_prune_comp_needs(comp);
    SQZ_RETURN_IF(need && (!st || st->n_in != t->shape[1] || ((need & SQZ_QSTAT_XTX) && !st->xtx) ||
                           ((need & SQZ_QSTAT_MEAN) && !st->mean)),
                  SQZ_ERR_INVALID_ARG, "prune: layer %d: the %s compensation needs %s of the input of '%s'",
                  (int)layer, sqz_prune_comp_name(comp),
                  need == SQZ_QSTAT_MEAN ? "E[x]" : need == SQZ_QSTAT_XTX ? "the Hessian" : "E[x] and the Hessian",
                  t->name);
    return SQZ_OK;
}

/* Applies the compensation to the output layer t (and its bias), leaving it F32. */
static sqz_status compensate(sqz_model *m, sqz_tensor *t, const cols *c, sqz_prune_comp comp, const sqz_qstats *st,
                             double damp) {
    const int64_t n_out = t->shape[0], n_in = t->shape[1];
    float *w;
    SQZ_TRY(sqz__prune_load(t, &w));
    double *delta = NULL;
    sqz_status rc = SQZ_OK;
    if (comp == SQZ_PRUNE_COMP_LSQ || comp == SQZ_PRUNE_COMP_BOTH) {
        delta = sqz__malloc((size_t)(n_out * (c->nk ? c->nk : 1)) * sizeof(double));
        rc = delta ? lsq_delta(w, n_out, n_in, st->xtx, c, damp, delta) : SQZ_ERR_NOMEM;
    }
    if (rc == SQZ_OK && comp != SQZ_PRUNE_COMP_LSQ)
        rc = bias_update(m, t, w, n_in, c, comp == SQZ_PRUNE_COMP_BOTH ? delta : NULL, st->mean);
    if (rc == SQZ_OK && delta)
        for (int64_t i = 0; i < n_out; i++)
            for (int64_t j = 0; j < c->nk; j++) w[i * n_in + c->k[j]] += (float)delta[i * c->nk + j];
    if (rc == SQZ_OK) rc = set_f32(m, t, w);
    free(w);
    free(delta);
    return rc;
}

sqz_status sqz_prune_apply(sqz_model *m, int32_t layer, sqz_structure k, const int64_t *keep, int64_t n_keep,
                           sqz_prune_comp comp, const sqz_qstats *st, double damp) {
    SQZ_RETURN_IF(k != SQZ_STRUCT_HEAD && k != SQZ_STRUCT_NEURON, SQZ_ERR_INVALID_ARG,
                  "prune: heads or FFN neurons are removed per layer");
    SQZ_RETURN_IF(layer < 0 || layer >= m->hp.n_layers, SQZ_ERR_INVALID_ARG, "prune: layer %d out of range",
                  (int)layer);
    int64_t width;
    sqz_tensor *t = sqz__prune_out_layer(m, layer, k, &width);
    SQZ_RETURN_IF(!t || t->ndim != 2, SQZ_ERR_INVALID_ARG, "prune: layer %d has no %s weight", (int)layer,
                  k == SQZ_STRUCT_HEAD ? "attn_output" : "ffn_down");
    SQZ_TRY(check_comp(t, layer, comp, st));
    if ((comp == SQZ_PRUNE_COMP_BIAS || comp == SQZ_PRUNE_COMP_BOTH) && !sqz_model_get(m, t->role, layer, SQZ_PARAM_BIAS)) {
        SQZ_TRY(add_layer_biases(m, layer, t->role));
        t = sqz__prune_out_layer(m, layer, k, &width); /* the tensor array may have moved */
    }
    cols c = {0};
    sqz_status rc = split_cols(t->shape[1], width, keep, n_keep, &c);
    if (rc == SQZ_OK && comp != SQZ_PRUNE_COMP_NONE && c.ns) rc = compensate(m, t, &c, comp, st, damp);
    const sqz_dtype_traits *tr = sqz_dtype_info(t->dtype);
    if (rc == SQZ_OK && (t->qp || !tr || tr->is_quantized)) { /* columns of blocks cannot be cut */
        float *v;
        rc = sqz__prune_load(t, &v);
        if (rc == SQZ_OK) rc = set_f32(m, t, v);
        free(v);
    }
    free(c.k);
    free(c.s);
    SQZ_TRY(rc);
    return k == SQZ_STRUCT_HEAD ? sqz_model_keep_heads(m, layer, keep, n_keep)
                                : sqz_model_keep_neurons(m, layer, keep, n_keep);
}

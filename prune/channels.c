/*
 * prune/channels.c - `--prune channels=R`: removes hidden (d_model) channels across the
 * whole model, as NVIDIA Minitron's width pruning does (Muralidharan et al. 2024): a channel's
 * importance is the activation it carries into the blocks, summed over every layer, measured
 * on the normalized residual stream that q|k|v and gate|up read (Minitron: the LayerNorm
 * outputs), sqrt(E[x_c^2]) per layer; `magnitude` uses the weights instead (the squared
 * norms of the channel's columns of q, k, v, gate, up and rows of o, down). The edit is
 * sqz_model_keep_channels (sqz/family.h, which documents what it does to RMSNorm: the
 * statistics are taken over the kept channels, no rescaling). A whole-model decision: one
 * calibration pass on the model as it is, before the block steps.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "prune/prune_internal.h"
#include "sqz/edit.h"

typedef struct acc {
    double *score; /* d_model */
    int64_t d;
} acc;

static sqz_status on_block(void *user, sqz_session *s, int32_t layer, const sqz_calib_block *b) {
    (void)s;
    (void)layer;
    acc *a = user;
    for (int r = 0; r < 2; r++) {
        const sqz_calib_input *in = sqz_calib_block_input(b, r ? SQZ_ROLE_FFN_UP : SQZ_ROLE_ATTN_Q);
        if (!in || !in->x2 || in->st.n_in != a->d) continue;
        for (int64_t c = 0; c < a->d; c++) a->score[c] += sqrt((double)in->x2[c]);
    }
    return SQZ_OK;
}

/* The squared norms of every channel's weights (magnitude). */
static sqz_status weight_scores(const sqz_model *m, double *score) {
    static const sqz_role cols[] = {SQZ_ROLE_ATTN_Q, SQZ_ROLE_ATTN_K, SQZ_ROLE_ATTN_V, SQZ_ROLE_FFN_GATE,
                                    SQZ_ROLE_FFN_UP};
    static const sqz_role rows[] = {SQZ_ROLE_ATTN_OUT, SQZ_ROLE_FFN_DOWN};
    const int64_t d = m->hp.d_model;
    for (int32_t l = 0; l < m->hp.n_layers; l++)
        for (int i = 0; i < 7; i++) {
            const bool col = i < 5;
            const sqz_tensor *t = sqz_model_get(m, col ? cols[i] : rows[i - 5], l, SQZ_PARAM_WEIGHT);
            if (!t) continue;
            float *v;
            SQZ_TRY(sqz__prune_load(t, &v));
            const int64_t n0 = t->shape[0], n1 = t->shape[1];
            for (int64_t r = 0; r < n0; r++)
                for (int64_t c = 0; c < n1; c++) score[col ? c : r] += (double)v[r * n1 + c] * v[r * n1 + c];
            free(v);
        }
    (void)d;
    return SQZ_OK;
}

static sqz_status activation_scores(sqz_model *m, const sqz__prune_env *e, double *score) {
    SQZ_RETURN_IF(!e->w || !e->session_opts, SQZ_ERR_INVALID_ARG,
                  "--prune '%s': part 'channels=' measures every layer first: give --calib FILE", e->spec);
    sqz_session_opts so = *e->session_opts;
    so.max_tokens = e->w->ctx;
    sqz_session *s;
    SQZ_TRY(sqz_session_new(m, &so, &s));
    acc a = {score, m->hp.d_model};
    sqz_calib_run_opts ro;
    memset(&ro, 0, sizeof ro);
    ro.observe.needs = SQZ_QSTAT_X2;
    ro.on_block = on_block;
    ro.user = &a;
    ro.progress = e->progress;
    ro.progress_user = e->progress_user;
    sqz_status st = sqz_calib_run(s, e->w, &ro);
    sqz_session_free(s);
    return st;
}

/* Members whose columns are channels and whose dtype cannot lose columns become F32. */
static sqz_status columns_to_f32(sqz_model *m) {
    const sqz_coupled *cp = &sqz_family_get(m->hp.family)->structures[SQZ_STRUCT_CHANNEL];
    for (int i = 0; i < cp->n_members; i++) {
        if (cp->members[i].axis != 1) continue;
        const bool per_layer = sqz_role_per_layer(cp->members[i].role);
        for (int32_t l = per_layer ? 0 : -1; l < (per_layer ? (int32_t)m->hp.n_layers : 0); l++) {
            sqz_tensor *t = sqz_model_get(m, cp->members[i].role, l, cp->members[i].param);
            const sqz_dtype_traits *tr = t ? sqz_dtype_info(t->dtype) : NULL;
            if (!t || (!t->qp && tr && !tr->is_quantized)) continue;
            float *v;
            SQZ_TRY(sqz__prune_load(t, &v));
            const size_t nb = (size_t)sqz_tensor_nelements(t) * sizeof(float);
            SQZ_TRY(sqz_tensor_replace(m, t, SQZ_DTYPE_F32, t->ndim, t->shape, v, nb, true));
        }
    }
    return SQZ_OK;
}

int64_t sqz__prune_channels_remove(const sqz__prune_opts *a, int64_t d) {
    const int64_t r = (int64_t)llround(a->channels * (double)d);
    if (a->align <= 1 || d % a->align || d <= a->align) return r;
    int64_t keep = (d - r + a->align / 2) / a->align * a->align;
    return d - (keep < a->align ? a->align : keep);
}

sqz_status sqz__prune_channels(sqz_model *m, const sqz__prune_opts *a, const sqz__prune_env *e) {
    const int64_t d = m->hp.d_model, remove = sqz__prune_channels_remove(a, d);
    if (remove <= 0) return SQZ_OK;
    double *score = sqz__calloc((size_t)d, sizeof(double));
    int64_t *keep = sqz__malloc((size_t)d * sizeof(int64_t));
    sqz_status st = score && keep ? SQZ_OK : SQZ_ERR_NOMEM;
    if (st == SQZ_OK)
        st = a->score == SQZ_PRUNE_MAGNITUDE ? weight_scores(m, score) : activation_scores(m, e, score);
    if (st == SQZ_OK) sqz_prune_choose_top(d, score, remove, keep);
    if (st == SQZ_OK) st = columns_to_f32(m);
    if (st == SQZ_OK) st = sqz_model_keep_channels(m, keep, d - remove);
    free(score);
    free(keep);
    return st;
}

/*
 * prune/uniform.c - `heads=R:uniform`: the one shape (KV groups kept x query heads kept in
 * each) every layer keeps, so that layers stay alike and a plain HF config.json holds the
 * result. Where more than one shape keeps the same number of heads (GQA: 6 of 9 heads in 3
 * groups is 2 groups x 3 or 3 groups x 2), every layer is scored on the unpruned model in one
 * calibration pass (budget.c's scan), its head scores standardized (z = (s - mean) / std, so
 * layers weigh alike), and the shape whose kept heads' z summed over all layers is highest
 * wins. The block steps then choose which heads each layer keeps in that shape, on the
 * sequentially calibrated statistics.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "prune/prune_internal.h"

#define MAX_SHAPES 64

typedef struct voter {
    const sqz__prune_opts *a;
    const sqz_model *m;
    int64_t n_keep;                   /* heads every layer keeps */
    int n_shapes;
    int64_t kv[MAX_SHAPES];           /* the candidate shapes: kv[i] groups x n_keep / kv[i] heads */
    double total[MAX_SHAPES];         /* their kept z summed over the layers scored so far */
} voter;

/* Standardizes s[0..n) in place. */
static void standardize(double *s, int64_t n) {
    double mean = 0, var = 0;
    for (int64_t i = 0; i < n; i++) mean += s[i];
    mean /= (double)n;
    for (int64_t i = 0; i < n; i++) var += (s[i] - mean) * (s[i] - mean);
    const double sd = sqrt(var / (double)n);
    for (int64_t i = 0; i < n; i++) s[i] = sd > 0 ? (s[i] - mean) / sd : 0.0;
}

static sqz_status vote_layer(voter *v, int32_t l, const sqz_calib_block *b) {
    const sqz_layer_dims *ld = &v->m->layers[l];
    const sqz_calib_input *in = b ? sqz_calib_block_input(b, SQZ_ROLE_ATTN_OUT) : NULL;
    double *s = sqz__malloc((size_t)ld->n_heads * sizeof *s);
    int64_t *keep = sqz__malloc((size_t)ld->n_heads * sizeof *keep);
    sqz_status rc = s && keep ? SQZ_OK : SQZ_ERR_NOMEM;
    if (rc == SQZ_OK)
        rc = sqz_prune_scores(v->m, l, SQZ_STRUCT_HEAD, (sqz_prune_score)v->a->score, in ? &in->st : NULL,
                              v->a->damp, s);
    if (rc == SQZ_OK) standardize(s, ld->n_heads);
    for (int i = 0; rc == SQZ_OK && i < v->n_shapes; i++) {
        rc = sqz_prune_choose_heads_shape(ld->n_heads, ld->n_kv_heads, s, v->kv[i], v->n_keep / v->kv[i], keep);
        for (int64_t h = 0; rc == SQZ_OK && h < v->n_keep; h++) v->total[i] += s[keep[h]];
    }
    free(s);
    free(keep);
    return rc;
}

static sqz_status on_block(void *user, sqz_session *s, int32_t layer, const sqz_calib_block *b) {
    (void)s;
    return vote_layer(user, layer, b);
}

sqz_status sqz__prune_uniform_shape(sqz_model *m, const sqz__prune_opts *a, const sqz__prune_env *e,
                                    int64_t remove, int64_t *kv_keep, int64_t *per_keep) {
    const sqz_layer_dims *l0 = &m->layers[0];
    voter v = {.a = a, .m = m};
    SQZ_TRY(sqz_prune_heads_shapes(l0->n_heads, l0->n_kv_heads, remove, &v.n_keep, &v.n_shapes));
    const int64_t g = l0->n_heads / l0->n_kv_heads;
    v.n_shapes = 0;
    for (int64_t kv = 1; kv <= l0->n_kv_heads && v.n_shapes < MAX_SHAPES; kv++)
        if (v.n_keep % kv == 0 && v.n_keep / kv <= g) v.kv[v.n_shapes++] = kv;
    if (v.n_shapes > 1) {
        const unsigned need = sqz_prune_score_needs((sqz_prune_score)a->score);
        if (!need)
            for (int32_t l = 0; l < m->hp.n_layers; l++) SQZ_TRY(vote_layer(&v, l, NULL));
        else {
            SQZ_RETURN_IF(!e->w || !e->session_opts, SQZ_ERR_INVALID_ARG,
                          "--prune '%s': part 'uniform' scores every layer first: give --calib FILE", e->spec);
            SQZ_TRY(sqz_calib_scan(m, e->session_opts, e->w, need, false, on_block, &v, e->progress, e->progress_user));
        }
    }
    int best = 0; /* ties: the first, fewer KV groups kept */
    for (int i = 1; i < v.n_shapes; i++)
        if (v.total[i] > v.total[best]) best = i;
    *kv_keep = v.kv[best];
    *per_keep = v.n_keep / v.kv[best];
    return SQZ_OK;
}

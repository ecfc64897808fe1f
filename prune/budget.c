/*
 * prune/budget.c - the global budget `--prune params=R` (FLAP's adaptive structure search,
 * An et al. 2024, sec. 3.3): score every head and FFN neuron of every layer on the unpruned
 * model in one calibration pass, standardize the scores within each layer and structure
 * kind (z = (s - mean) / std, so scores of different layers and kinds compare), and remove
 * the structures of lowest z across the whole model until R of the attention+FFN parameters
 * are gone. The result is a number to remove per layer and kind; the block steps then choose
 * which ones on the sequentially calibrated statistics, as for uniform ratios.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "prune/prune_internal.h"

typedef struct item {
    double z;
    int32_t layer;
    int8_t head;    /* 1: a head, 0: a neuron */
} item;

typedef struct scorer {
    const sqz__prune_opts *a;
    const sqz_model *m;
    double **scores; /* [layer * 2 + kind]: n_heads or d_ff scores */
} scorer;

static sqz_status score_layer(scorer *sc, int32_t l, const sqz_calib_block *b) {
    for (int kind = 0; kind < 2; kind++) {
        const sqz_layer_dims *ld = &sc->m->layers[l];
        const int64_t n = kind ? ld->n_heads : ld->d_ff;
        const sqz_calib_input *in = sqz_calib_block_input(b, kind ? SQZ_ROLE_ATTN_OUT : SQZ_ROLE_FFN_DOWN);
        double *s = sqz__malloc((size_t)n * sizeof(double));
        if (!s) return SQZ_ERR_NOMEM;
        sc->scores[l * 2 + kind] = s;
        SQZ_TRY(sqz_prune_scores(sc->m, l, kind ? SQZ_STRUCT_HEAD : SQZ_STRUCT_NEURON, (sqz_prune_score)sc->a->score,
                                 in ? &in->st : NULL, sc->a->damp, s));
    }
    return SQZ_OK;
}

static sqz_status on_block(void *user, sqz_session *s, int32_t layer, const sqz_calib_block *b) {
    (void)s;
    return score_layer(user, layer, b);
}

/* Scores of every layer: one calibration pass on the model as it is (no recompute: nothing
 * changes), or from the weights alone when the score reads no statistics. */
static sqz_status score_all(sqz_model *m, const sqz__prune_env *e, scorer *sc) {
    const unsigned need = sqz_prune_score_needs((sqz_prune_score)sc->a->score);
    if (!need) {
        for (int32_t l = 0; l < m->hp.n_layers; l++) SQZ_TRY(score_layer(sc, l, NULL));
        return SQZ_OK;
    }
    SQZ_RETURN_IF(!e->w || !e->session_opts, SQZ_ERR_INVALID_ARG,
                  "--prune '%s': part 'params=' scores every layer first: give --calib FILE", e->spec);
    return sqz_calib_scan(m, e->session_opts, e->w, need, false, on_block, sc, e->progress,
                          e->progress_user);
}

static int by_z(const void *x, const void *y) {
    const item *a = x, *b = y;
    if (a->z != b->z) return a->z < b->z ? -1 : 1;
    return a->layer != b->layer ? (a->layer > b->layer) - (a->layer < b->layer) : (a->head > b->head) - (a->head < b->head);
}

/* Appends the standardized scores of one layer and kind to it[]. */
static void standardize(const double *s, int64_t n, int32_t layer, int8_t head, item *it, int64_t *k) {
    double mean = 0, var = 0;
    for (int64_t i = 0; i < n; i++) mean += s[i];
    mean /= (double)n;
    for (int64_t i = 0; i < n; i++) var += (s[i] - mean) * (s[i] - mean);
    const double sd = sqrt(var / (double)n);
    for (int64_t i = 0; i < n; i++) it[(*k)++] = (item){sd > 0 ? (s[i] - mean) / sd : 0.0, layer, head};
}

/* Walks the structures by increasing z, removing each while its layer keeps a head and
 * `align` neurons, until `target` parameters are gone. */
static void allocate(const sqz_model *m, const sqz__prune_opts *a, const item *it, int64_t n, int32_t *rm_heads,
                     int32_t *rm_ffn) {
    const int64_t d = m->hp.d_model, hd = m->hp.head_dim;
    const bool gated = sqz_family_get(m->hp.family)->gated_ffn;
    const int64_t head_cost = 2 * d * hd, neuron_cost = (gated ? 3 : 2) * d;
    int64_t total = 0;
    for (int64_t l = 0; l < m->hp.n_layers; l++) {
        const sqz_layer_dims *ld = &m->layers[l];
        total += ld->n_heads * head_cost + 2 * ld->n_kv_heads * d * hd + ld->d_ff * neuron_cost;
    }
    const double target = a->params * (double)total;
    double removed = 0;
    for (int64_t i = 0; i < n && removed < target; i++) {
        const sqz_layer_dims *ld = &m->layers[it[i].layer];
        if (it[i].head && rm_heads[it[i].layer] + 1 < ld->n_heads) {
            rm_heads[it[i].layer]++;
            removed += (double)head_cost + 2.0 * (double)(d * hd) / (double)(ld->n_heads / ld->n_kv_heads);
        } else if (!it[i].head && ld->d_ff - rm_ffn[it[i].layer] - 1 >= (a->align < ld->d_ff ? a->align : 1)) {
            rm_ffn[it[i].layer]++;
            removed += (double)neuron_cost;
        }
    }
}

sqz_status sqz__prune_plan(sqz_model *m, const sqz__prune_opts *a, const sqz__prune_env *e,
                           int32_t *plan_heads, int32_t *plan_ffn) {
    const int32_t nl = (int32_t)m->hp.n_layers;
    SQZ_RETURN_IF(nl > SQZ__PRUNE_MAX_LAYERS, SQZ_ERR_INVALID_ARG, "--prune '%s': params= supports up to %d layers",
                  e->spec, SQZ__PRUNE_MAX_LAYERS);
    scorer sc = {a, m, sqz__calloc((size_t)nl * 2, sizeof(double *))};
    if (!sc.scores) return SQZ_ERR_NOMEM;
    sqz_status st = score_all(m, e, &sc);
    int64_t n = 0;
    for (int32_t l = 0; l < nl; l++) n += m->layers[l].n_heads + m->layers[l].d_ff;
    item *it = st == SQZ_OK ? sqz__malloc((size_t)n * sizeof *it) : NULL;
    if (st == SQZ_OK && !it) st = SQZ_ERR_NOMEM;
    if (st == SQZ_OK) {
        int64_t k = 0;
        for (int32_t l = 0; l < nl; l++) {
            standardize(sc.scores[l * 2 + 1], m->layers[l].n_heads, l, 1, it, &k);
            standardize(sc.scores[l * 2], m->layers[l].d_ff, l, 0, it, &k);
        }
        qsort(it, (size_t)n, sizeof *it, by_z);
        memset(plan_heads, 0, (size_t)nl * sizeof *plan_heads);
        memset(plan_ffn, 0, (size_t)nl * sizeof *plan_ffn);
        allocate(m, a, it, n, plan_heads, plan_ffn);
    }
    for (int32_t i = 0; i < nl * 2; i++) free(sc.scores[i]);
    free(sc.scores);
    free(it);
    return st;
}

/*
 * prune/record.c - what a `--prune` stage removed, per layer, and the importance scores it
 * chose by: the compress report's "prune" section (compress/report.c) and its plots
 * (cli/report_prune.c). The pass (pass_prune.c) opens the record in its model step and fills
 * one layer per block as it prunes it.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "prune/prune_internal.h"

void sqz_prune_record_free(sqz_prune_record *r) {
    if (!r) return;
    for (int32_t i = 0; r->layers && i < r->n_layers; i++) {
        free(r->layers[i].head_score);
        free(r->layers[i].head_removed);
    }
    free(r->layers);
    memset(r, 0, sizeof *r);
}

sqz_status sqz__prune_record_open(sqz_prune_record *r, const sqz_model *m, sqz_prune_score score,
                                  sqz_prune_comp comp, const char *spec, int64_t d_before) {
    sqz_prune_record_free(r);
    r->layers = sqz__calloc((size_t)m->hp.n_layers, sizeof *r->layers);
    SQZ_RETURN_IF(!r->layers, SQZ_ERR_NOMEM, "--prune '%s': out of memory for the report", spec);
    r->score = score;
    r->comp = comp;
    snprintf(r->spec, sizeof r->spec, "%s", spec);
    r->d_before = d_before;
    r->d_after = m->hp.d_model;
    r->n_layers = (int32_t)m->hp.n_layers;
    for (int32_t l = 0; l < r->n_layers; l++) {
        sqz_prune_layer *e = &r->layers[l];
        const sqz_layer_dims *ld = &m->layers[l];
        e->layer = l;
        e->heads_before = e->heads_after = ld->n_heads;
        e->kv_before = e->kv_after = ld->n_kv_heads;
        e->ffn_before = e->ffn_after = ld->d_ff;
        for (int k = 0; k < 5; k++) e->ffn_q[k] = NAN;
        e->ffn_cut = e->ffn_removed_mean = e->ffn_kept_mean = NAN;
    }
    return SQZ_OK;
}

/* removed[i] = 1 for every i in [0, n) not in keep[0..n_keep) (increasing). */
static void removed_flags(int64_t n, const int64_t *keep, int64_t n_keep, uint8_t *removed) {
    memset(removed, 1, (size_t)n);
    for (int64_t i = 0; i < n_keep; i++) removed[keep[i]] = 0;
}

void sqz__prune_record_heads(sqz_prune_record *r, const sqz_model *m, int32_t layer, const double *scores,
                             const int64_t *keep, int64_t n_keep) {
    if (!r || !r->layers || layer >= r->n_layers) return;
    sqz_prune_layer *e = &r->layers[layer];
    const int64_t n = e->heads_before;
    free(e->head_score);
    free(e->head_removed);
    e->head_score = sqz__malloc((size_t)n * sizeof *e->head_score);
    e->head_removed = sqz__malloc((size_t)n);
    if (!e->head_score || !e->head_removed) { /* the report loses the scores, not the run */
        free(e->head_score);
        free(e->head_removed);
        e->head_score = NULL;
        e->head_removed = NULL;
    } else {
        memcpy(e->head_score, scores, (size_t)n * sizeof *scores);
        removed_flags(n, keep, n_keep, e->head_removed);
    }
    e->heads_after = m->layers[layer].n_heads;
    e->kv_after = m->layers[layer].n_kv_heads;
}

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

void sqz__prune_record_ffn(sqz_prune_record *r, const sqz_model *m, int32_t layer, const double *scores, int64_t n,
                           const int64_t *keep, int64_t n_keep) {
    if (!r || !r->layers || layer >= r->n_layers) return;
    sqz_prune_layer *e = &r->layers[layer];
    e->ffn_after = m->layers[layer].d_ff;
    double *s = sqz__malloc((size_t)n * sizeof *s);
    uint8_t *rm = sqz__malloc((size_t)n);
    if (s && rm) {
        memcpy(s, scores, (size_t)n * sizeof *s);
        qsort(s, (size_t)n, sizeof *s, cmp_double);
        for (int k = 0; k < 5; k++) e->ffn_q[k] = s[(size_t)llround((double)(n - 1) * k / 4.0)];
        removed_flags(n, keep, n_keep, rm);
        double sr = 0, sk = 0, cut = -INFINITY;
        for (int64_t j = 0; j < n; j++) {
            if (rm[j]) sr += scores[j], cut = scores[j] > cut ? scores[j] : cut;
            else sk += scores[j];
        }
        e->ffn_cut = n > n_keep ? cut : NAN;
        e->ffn_removed_mean = n > n_keep ? sr / (double)(n - n_keep) : NAN;
        e->ffn_kept_mean = n_keep ? sk / (double)n_keep : NAN;
    }
    free(s);
    free(rm);
}

/*
 * prune/score.c - importance scores of attention heads and FFN neurons (sqz/prune.h):
 * weight magnitude, Wanda-sp, FLAP's fluctuation, and the OBS reconstruction error, all
 * computed on the output layer (o or down) and its input's calibration statistics.
 */
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "prune/prune_internal.h"
#include "quant/quant_internal.h"

static const char *score_names[SQZ_PRUNE_SCORE_COUNT] = {"magnitude", "wanda", "flap", "obs"};
static const char *comp_names[] = {"none", "bias", "lsq", "both"};

const char *sqz_prune_score_name(sqz_prune_score s) {
    return (unsigned)s < SQZ_PRUNE_SCORE_COUNT ? score_names[s] : "?";
}

const char *sqz_prune_comp_name(sqz_prune_comp c) { return (unsigned)c < 4 ? comp_names[c] : "?"; }

unsigned sqz_prune_score_needs(sqz_prune_score s) {
    switch (s) {
    case SQZ_PRUNE_MAGNITUDE: return 0;
    case SQZ_PRUNE_WANDA: return SQZ_QSTAT_X2;
    case SQZ_PRUNE_FLAP: return SQZ_QSTAT_X2 | SQZ_QSTAT_MEAN;
    case SQZ_PRUNE_OBS: return SQZ_QSTAT_XTX;
    default: return 0;
    }
}

unsigned sqz_prune_comp_needs(sqz_prune_comp c) {
    switch (c) {
    case SQZ_PRUNE_COMP_BIAS: return SQZ_QSTAT_MEAN;
    case SQZ_PRUNE_COMP_LSQ: return SQZ_QSTAT_XTX;
    case SQZ_PRUNE_COMP_BOTH: return SQZ_QSTAT_XTX | SQZ_QSTAT_MEAN;
    default: return 0;
    }
}

sqz_status sqz__prune_load(const sqz_tensor *t, float **out) {
    *out = NULL;
    const int64_t n = sqz_tensor_nelements(t);
    float *v = sqz__malloc((size_t)n * sizeof(float));
    if (!v) return SQZ_ERR_NOMEM;
    sqz_status st = sqz_tensor_to_f32(t, v);
    if (st != SQZ_OK) {
        free(v);
        return st;
    }
    *out = v;
    return SQZ_OK;
}

sqz_tensor *sqz__prune_out_layer(const sqz_model *m, int32_t layer, sqz_structure k, int64_t *width) {
    *width = k == SQZ_STRUCT_HEAD ? m->hp.head_dim : 1;
    return sqz_model_get(m, k == SQZ_STRUCT_HEAD ? SQZ_ROLE_ATTN_OUT : SQZ_ROLE_FFN_DOWN, layer, SQZ_PARAM_WEIGHT);
}

double *sqz__prune_damped(const double *h, int64_t n_in, const int64_t *idx, int64_t n, double damp) {
    double *a = sqz__malloc((size_t)(n * n) * sizeof(double));
    if (!a) return NULL;
    double diag = 0;
    for (int64_t i = 0; i < n; i++) {
        for (int64_t j = 0; j < n; j++) a[i * n + j] = h[idx[i] * n_in + idx[j]];
        diag += a[i * n + i];
    }
    const double lambda = damp * (n ? diag / (double)n : 0.0);
    for (int64_t i = 0; i < n; i++) {
        if (a[i * n + i] == 0) a[i * n + i] = 1.0;
        a[i * n + i] += lambda;
    }
    return a;
}

/* Per input column j of w (n_out, n_in): sum_i w_ij^2 and sum_i |w_ij|. */
static void column_norms(const float *w, int64_t n_out, int64_t n_in, double *sq, double *ab) {
    for (int64_t j = 0; j < n_in; j++) sq[j] = ab[j] = 0;
    for (int64_t i = 0; i < n_out; i++)
        for (int64_t j = 0; j < n_in; j++) {
            const double v = w[i * n_in + j];
            sq[j] += v * v;
            ab[j] += fabs(v);
        }
}

/* The weights a structure owns besides its output-layer columns: q rows of a head, gate and
 * up rows of a neuron (k and v rows are shared by a KV group: not counted). */
static sqz_status own_rows(const sqz_model *m, int32_t layer, sqz_structure k, int64_t n, int64_t width,
                           double *out) {
    const sqz_role roles[2] = {k == SQZ_STRUCT_HEAD ? SQZ_ROLE_ATTN_Q : SQZ_ROLE_FFN_GATE,
                               k == SQZ_STRUCT_HEAD ? SQZ_ROLE_COUNT : SQZ_ROLE_FFN_UP};
    for (int r = 0; r < 2; r++) {
        const sqz_tensor *t = roles[r] == SQZ_ROLE_COUNT ? NULL : sqz_model_get(m, roles[r], layer, SQZ_PARAM_WEIGHT);
        if (!t) continue;
        float *v;
        SQZ_TRY(sqz__prune_load(t, &v));
        const int64_t c = t->shape[1];
        for (int64_t s = 0; s < n; s++)
            for (int64_t i = s * width * c; i < (s + 1) * width * c; i++) out[s] += (double)v[i] * v[i];
        free(v);
    }
    return SQZ_OK;
}

/* OBS: out[s] = tr(W_S [(H^-1)_SS]^-1 W_S^T) for the n structures of `width` columns. */
static sqz_status obs_scores(const float *w, int64_t n_out, int64_t n_in, const double *h, double damp, int64_t n,
                             int64_t width, double *out) {
    int64_t *all = sqz__malloc((size_t)n_in * sizeof(int64_t));
    double *u = NULL, *a = sqz__malloc((size_t)(width * width) * sizeof(double)),
           *ws = sqz__malloc((size_t)(width * n_out) * sizeof(double));
    sqz_status st = SQZ_ERR_NOMEM;
    if (!all || !a || !ws) goto done;
    for (int64_t j = 0; j < n_in; j++) all[j] = j;
    if (!(u = sqz__prune_damped(h, n_in, all, n_in, damp))) goto done;
    if ((st = sqz__chol_inverse_upper(u, n_in)) != SQZ_OK) goto done; /* H^-1 = U^T U */
    for (int64_t s = 0; s < n && st == SQZ_OK; s++) {
        const int64_t c0 = s * width;
        /* A = (H^-1)_SS = U[:, S]^T U[:, S] (U is upper: rows < c0 + width suffice) */
        cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)width, (int)width, (int)(c0 + width), 1.0, u + c0,
                    (int)n_in, u + c0, (int)n_in, 0.0, a, (int)width);
        if ((st = sqz__chol_inverse_upper(a, width)) != SQZ_OK) break; /* A^-1 = V^T V */
        for (int64_t j = 0; j < width; j++)
            for (int64_t i = 0; i < n_out; i++) ws[j * n_out + i] = w[i * n_in + c0 + j];
        /* ws = V W_S^T (width, n_out); score = ||ws||_F^2 */
        cblas_dtrmm(CblasRowMajor, CblasLeft, CblasUpper, CblasNoTrans, CblasNonUnit, (int)width, (int)n_out, 1.0, a,
                    (int)width, ws, (int)n_out);
        double sc = 0;
        for (int64_t i = 0; i < width * n_out; i++) sc += ws[i] * ws[i];
        out[s] = sc;
    }
done:
    free(all);
    free(u);
    free(a);
    free(ws);
    return st;
}

static sqz_status check_stats(const sqz_tensor *t, int32_t layer, sqz_prune_score score, const sqz_qstats *st) {
    const unsigned need = sqz_prune_score_needs(score);
    if (!need) return SQZ_OK;
    SQZ_RETURN_IF(!st || st->n_in != t->shape[1], SQZ_ERR_INVALID_ARG,
                  "prune: layer %d: no statistics of the input of '%s' for the %s score", (int)layer, t->name,
                  sqz_prune_score_name(score));
    SQZ_RETURN_IF(((need & SQZ_QSTAT_X2) && !st->x2) || ((need & SQZ_QSTAT_MEAN) && !st->mean) ||
                      ((need & SQZ_QSTAT_XTX) && !st->xtx),
                  SQZ_ERR_INVALID_ARG, "prune: layer %d: the %s score needs %s of the input of '%s'", (int)layer,
                  sqz_prune_score_name(score),
                  (need & SQZ_QSTAT_XTX) ? "the Hessian" : (need & SQZ_QSTAT_MEAN) ? "E[x] and E[x^2]" : "E[x^2]",
                  t->name);
    return SQZ_OK;
}

/* Sums per-column values v over each structure's columns into out. */
static void per_structure(const double *v, int64_t n, int64_t width, double *out) {
    for (int64_t s = 0; s < n; s++)
        for (int64_t j = s * width; j < (s + 1) * width; j++) out[s] += v[j];
}

sqz_status sqz_prune_scores(const sqz_model *m, int32_t layer, sqz_structure k, sqz_prune_score score,
                            const sqz_qstats *st, double damp, double *out) {
    SQZ_RETURN_IF(k != SQZ_STRUCT_HEAD && k != SQZ_STRUCT_NEURON, SQZ_ERR_INVALID_ARG,
                  "prune: scores are per head or per FFN neuron");
    SQZ_RETURN_IF(layer < 0 || layer >= m->hp.n_layers || (unsigned)score >= SQZ_PRUNE_SCORE_COUNT,
                  SQZ_ERR_INVALID_ARG, "prune: layer %d or score %d out of range", (int)layer, (int)score);
    int64_t width;
    const sqz_tensor *t = sqz__prune_out_layer(m, layer, k, &width);
    SQZ_RETURN_IF(!t || t->ndim != 2, SQZ_ERR_INVALID_ARG, "prune: layer %d has no %s weight", (int)layer,
                  k == SQZ_STRUCT_HEAD ? "attn_output" : "ffn_down");
    SQZ_TRY(check_stats(t, layer, score, st));
    const int64_t n_out = t->shape[0], n_in = t->shape[1], n = n_in / width;
    for (int64_t s = 0; s < n; s++) out[s] = 0;
    float *w;
    SQZ_TRY(sqz__prune_load(t, &w));
    double *sq = sqz__malloc((size_t)n_in * 2 * sizeof(double));
    sqz_status rc = SQZ_OK;
    if (!sq) rc = SQZ_ERR_NOMEM;
    double *ab = sq ? sq + n_in : NULL;
    if (rc == SQZ_OK) column_norms(w, n_out, n_in, sq, ab);
    if (rc == SQZ_OK && score == SQZ_PRUNE_MAGNITUDE) {
        per_structure(sq, n, width, out);
        rc = own_rows(m, layer, k, n, width, out);
    } else if (rc == SQZ_OK && score == SQZ_PRUNE_WANDA) {
        for (int64_t j = 0; j < n_in; j++) sq[j] = ab[j] * sqrt((double)st->x2[j] * (double)st->n_tokens);
        per_structure(sq, n, width, out);
    } else if (rc == SQZ_OK && score == SQZ_PRUNE_FLAP) {
        for (int64_t j = 0; j < n_in; j++) {
            const double var = (double)st->x2[j] - (double)st->mean[j] * st->mean[j];
            sq[j] *= var > 0 ? var : 0;
        }
        per_structure(sq, n, width, out);
    } else if (rc == SQZ_OK) {
        rc = obs_scores(w, n_out, n_in, st->xtx, damp, n, width, out);
    }
    free(w);
    free(sq);
    return rc;
}

/* ---- choosing what to keep ----------------------------------------------------------- */

typedef struct ranked {
    double v;
    int64_t i;
} ranked;

static int by_score_desc(const void *a, const void *b) {
    const ranked *x = a, *y = b;
    if (x->v != y->v) return x->v < y->v ? 1 : -1;
    return (x->i > y->i) - (x->i < y->i);
}

static int by_index(const void *a, const void *b) {
    const int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

void sqz_prune_choose_top(int64_t n, const double *scores, int64_t remove, int64_t *keep) {
    ranked *r = malloc((size_t)n * sizeof *r);
    const int64_t nk = n - remove;
    if (!r) { /* out of memory: keep the first ones (never happens in practice; still valid) */
        for (int64_t i = 0; i < nk; i++) keep[i] = i;
        return;
    }
    for (int64_t i = 0; i < n; i++) r[i] = (ranked){scores[i], i};
    qsort(r, (size_t)n, sizeof *r, by_score_desc);
    for (int64_t i = 0; i < nk; i++) keep[i] = r[i].i;
    qsort(keep, (size_t)nk, sizeof *keep, by_index);
    free(r);
}

/* Keeps the `per` best heads of each group, then the kv best groups by their kept sum;
 * returns the kept score sum, fills keep (unsorted, kv * per entries). */
static double plan_groups(int64_t n_kv, int64_t g, const double *scores, int64_t kv, int64_t per, int64_t *keep,
                          ranked *tmp, ranked *grp) {
    for (int64_t q = 0; q < n_kv; q++) {
        for (int64_t h = 0; h < g; h++) tmp[q * g + h] = (ranked){scores[q * g + h], q * g + h};
        qsort(tmp + q * g, (size_t)g, sizeof *tmp, by_score_desc);
        double s = 0;
        for (int64_t h = 0; h < per; h++) s += tmp[q * g + h].v;
        grp[q] = (ranked){s, q};
    }
    qsort(grp, (size_t)n_kv, sizeof *grp, by_score_desc);
    double total = 0;
    for (int64_t i = 0; i < kv; i++) {
        total += grp[i].v;
        for (int64_t h = 0; h < per; h++) keep[i * per + h] = tmp[grp[i].i * g + h].i;
    }
    return total;
}

/* The feasible kept count nearest to n_heads - remove (ties: more); *n_shapes gets how many
 * (kv', per) give it. g = n_heads / n_kv, target >= 1. */
static int64_t best_count(int64_t n_kv, int64_t g, int64_t target, int *n_shapes) {
    int64_t best = 0;
    for (int64_t kv = 1; kv <= n_kv; kv++)
        for (int64_t per = 1; per <= g; per++) {
            const int64_t c = kv * per, d = llabs(c - target), db = llabs(best - target);
            if (!best || d < db || (d == db && c > best)) best = c;
        }
    *n_shapes = 0;
    for (int64_t kv = 1; kv <= n_kv; kv++) *n_shapes += best % kv == 0 && best / kv <= g;
    return best;
}

static sqz_status check_counts(int64_t n_heads, int64_t n_kv, int64_t remove) {
    SQZ_RETURN_IF(n_kv < 1 || n_heads % n_kv || remove < 0 || remove > n_heads, SQZ_ERR_INVALID_ARG,
                  "prune: bad head counts (%lld heads, %lld KV heads, remove %lld)", (long long)n_heads,
                  (long long)n_kv, (long long)remove);
    SQZ_RETURN_IF(n_heads - remove < 1, SQZ_ERR_INVALID_ARG, "prune: removing %lld of %lld heads removes every head",
                  (long long)remove, (long long)n_heads);
    return SQZ_OK;
}

sqz_status sqz_prune_heads_shapes(int64_t n_heads, int64_t n_kv, int64_t remove, int64_t *n_keep, int *n_shapes) {
    SQZ_TRY(check_counts(n_heads, n_kv, remove));
    *n_keep = best_count(n_kv, n_heads / n_kv, n_heads - remove, n_shapes);
    return SQZ_OK;
}

sqz_status sqz_prune_choose_heads_shape(int64_t n_heads, int64_t n_kv, const double *scores, int64_t kv_keep,
                                        int64_t per_keep, int64_t *keep) {
    SQZ_RETURN_IF(n_kv < 1 || n_heads % n_kv || kv_keep < 1 || kv_keep > n_kv || per_keep < 1 ||
                      per_keep > n_heads / n_kv, SQZ_ERR_INVALID_ARG,
                  "prune: cannot keep %lld KV groups of %lld query heads in a layer of %lld heads, %lld KV heads",
                  (long long)kv_keep, (long long)per_keep, (long long)n_heads, (long long)n_kv);
    ranked *tmp = sqz__malloc((size_t)(n_heads + n_kv) * sizeof *tmp);
    if (!tmp) return SQZ_ERR_NOMEM;
    (void)plan_groups(n_kv, n_heads / n_kv, scores, kv_keep, per_keep, keep, tmp, tmp + n_heads);
    qsort(keep, (size_t)(kv_keep * per_keep), sizeof *keep, by_index);
    free(tmp);
    return SQZ_OK;
}

sqz_status sqz_prune_choose_heads(int64_t n_heads, int64_t n_kv, const double *scores, int64_t remove, int64_t *keep,
                                  int64_t *n_keep) {
    SQZ_TRY(check_counts(n_heads, n_kv, remove));
    const int64_t g = n_heads / n_kv;
    int n_shapes;
    const int64_t best = best_count(n_kv, g, n_heads - remove, &n_shapes);
    ranked *tmp = sqz__malloc((size_t)(n_heads + n_kv) * sizeof *tmp);
    int64_t *cand = sqz__malloc((size_t)n_heads * sizeof *cand);
    if (!tmp || !cand) {
        free(tmp);
        free(cand);
        return SQZ_ERR_NOMEM;
    }
    double best_sum = -HUGE_VAL;
    for (int64_t kv = 1; kv <= n_kv; kv++) {
        if (best % kv || best / kv > g) continue;
        const double s = plan_groups(n_kv, g, scores, kv, best / kv, cand, tmp, tmp + n_heads);
        if (s > best_sum) {
            best_sum = s;
            for (int64_t i = 0; i < best; i++) keep[i] = cand[i];
        }
    }
    qsort(keep, (size_t)best, sizeof *keep, by_index);
    *n_keep = best;
    free(tmp);
    free(cand);
    return SQZ_OK;
}

/*
 * layerdrop/select.c - choosing the blocks (by score, iteratively, or the baselines),
 * compensating, removing; the result rows the report and the plot read.
 */
#include <stdlib.h>
#include <string.h>

#include "layerdrop/layerdrop_internal.h"
#include "sqz/edit.h"

static const char *const method_names[] = {
#define SQZ__LD_NAME(name, word, help) word,
    SQZ_LAYERDROP_METHOD_MAP(SQZ__LD_NAME)
#undef SQZ__LD_NAME
};

const char *sqz_layerdrop_method_name(sqz_layerdrop_method m) {
    return (unsigned)m < SQZ_LAYERDROP_METHOD_COUNT ? method_names[m] : "invalid";
}

sqz_layerdrop_opts sqz_layerdrop_default_opts(void) {
    sqz_layerdrop_opts o;
    memset(&o, 0, sizeof o);
    o.method = SQZ_LAYERDROP_LIST;
    o.seed = 1;
    o.kld_windows = 8;
    o.ridge = 1e-4;
    return o;
}

void sqz_layerdrop_result_free(sqz_layerdrop_result *r) {
    if (!r) return;
    free(r->layers);
    free(r->removed);
    free(r->comp);
    memset(r, 0, sizeof *r);
}

static bool needs_windows(const sqz_layerdrop_opts *o) {
    return o->method == SQZ_LAYERDROP_BI || o->method == SQZ_LAYERDROP_ANGULAR || o->method == SQZ_LAYERDROP_KLD ||
           o->compensate;
}

static sqz_status check_opts(const sqz_model *m, const sqz_calib_windows *w, const sqz_layerdrop_opts *o) {
    const int32_t L = (int32_t)m->hp.n_layers;
    const char *name = sqz_layerdrop_method_name(o->method);
    SQZ_RETURN_IF((unsigned)o->method >= SQZ_LAYERDROP_METHOD_COUNT, SQZ_ERR_INVALID_ARG, "layerdrop: bad method %d",
                  (int)o->method);
    if (o->method == SQZ_LAYERDROP_LIST) {
        SQZ_RETURN_IF(o->n_list < 1 || o->n_list >= L || !o->list, SQZ_ERR_INVALID_ARG,
                      "layerdrop: %d blocks listed; the model has %d and keeps at least one", (int)o->n_list, (int)L);
        for (int32_t i = 0; i < o->n_list; i++)
            SQZ_RETURN_IF(o->list[i] < 0 || o->list[i] >= L || (i && o->list[i] <= o->list[i - 1]),
                          SQZ_ERR_INVALID_ARG, "layerdrop: block %d does not exist or is out of order (blocks 0..%d)",
                          (int)o->list[i], (int)L - 1);
    } else {
        SQZ_RETURN_IF(o->count < 1 || o->count >= L, SQZ_ERR_INVALID_ARG,
                      "layerdrop: cannot remove %d of %d blocks (1 to %d)", (int)o->count, (int)L, (int)L - 1);
    }
    SQZ_RETURN_IF(o->iterative && (o->method == SQZ_LAYERDROP_LIST || o->method == SQZ_LAYERDROP_LAST ||
                                   o->method == SQZ_LAYERDROP_RANDOM),
                  SQZ_ERR_INVALID_ARG, "layerdrop: iterative needs a scored method (bi, angular, kld), not %s", name);
    SQZ_RETURN_IF(needs_windows(o) && (!w || w->n_windows < 1), SQZ_ERR_INVALID_ARG,
                  "layerdrop: %s%s needs calibration windows (--calib FILE)", name,
                  o->compensate ? " with compensation" : "");
    if (needs_windows(o) || w) SQZ_TRY(sqz__ld_check_decoder(m, "layerdrop"));
    return SQZ_OK;
}

/* splitmix64 */
static uint64_t mix(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* The active block (not yet chosen) of lowest v[l]; -1 if none is finite. */
static int32_t lowest(const double *v, const sqz_layerdrop_layer *rows, int32_t L) {
    int32_t best = -1;
    for (int32_t l = 0; l < L; l++)
        if (!rows[l].step && isfinite(v[l]) && (best < 0 || v[l] < v[best])) best = l;
    return best;
}

/* The first scoring run: the rows of the report. */
static void fill_rows(sqz_layerdrop_result *res, const sqz_layerdrop_scores *sc, int32_t count) {
    for (int32_t i = 0; i < sc->n_active; i++) {
        sqz_layerdrop_layer *r = &res->layers[sc->active[i]];
        r->bi = sc->bi[sc->active[i]];
        r->angular = sqz_layerdrop_ang(sc, i, count);
        r->kld = sc->kld[sc->active[i]];
        r->top1 = sc->top1[sc->active[i]];
    }
    res->n_windows = sc->n_windows;
    res->n_tokens = sc->n_tokens;
    res->kld_windows = sc->kld_windows;
    res->kld_tokens = sc->kld_tokens;
    res->seconds_score += sc->seconds;
}

/* Marks blocks of one step by the scores of the current model (sc). Returns how many. */
static int32_t choose(sqz_layerdrop_result *res, const sqz_layerdrop_scores *sc, sqz_layerdrop_method method,
                      int32_t n, int32_t step) {
    const int32_t L = res->n_layers;
    if (method == SQZ_LAYERDROP_ANGULAR) {
        int32_t bi = -1;
        double bv = INFINITY;
        for (int32_t i = 0; i + n <= sc->n_active; i++) {
            const double v = sqz_layerdrop_ang(sc, i, n);
            if (v < bv) bv = v, bi = i;
        }
        for (int32_t k = 0; bi >= 0 && k < n; k++) res->layers[sc->active[bi + k]].step = step;
        return bi >= 0 ? n : 0;
    }
    const double *v = method == SQZ_LAYERDROP_KLD ? sc->kld : sc->bi;
    int32_t got = 0;
    for (; got < n; got++) {
        const int32_t l = lowest(v, res->layers, L);
        if (l < 0) break;
        res->layers[l].step = step;
    }
    return got;
}

static void baseline(sqz_layerdrop_result *res, const sqz_layerdrop_opts *o) {
    const int32_t L = res->n_layers;
    if (o->method == SQZ_LAYERDROP_LIST) {
        for (int32_t i = 0; i < o->n_list; i++) res->layers[o->list[i]].step = 1;
    } else if (o->method == SQZ_LAYERDROP_LAST) {
        for (int32_t l = L - o->count; l < L; l++) res->layers[l].step = 1;
    } else { /* random: a partial Fisher-Yates shuffle */
        int32_t *p = malloc((size_t)L * sizeof *p);
        uint64_t s = o->seed;
        for (int32_t l = 0; l < L && p; l++) p[l] = l;
        for (int32_t k = 0; k < o->count && p; k++) {
            const int32_t j = k + (int32_t)(mix(&s) % (uint64_t)(L - k)), t = p[k];
            p[k] = p[j];
            p[j] = t;
            res->layers[p[k]].step = 1;
        }
        free(p);
    }
}

static sqz_status score(sqz_session *s, const sqz_calib_windows *w, const sqz_layerdrop_opts *o, const bool *skip,
                        bool kld, sqz_layerdrop_scores *sc) {
    sqz_layerdrop_score_opts so = {.skip = skip, .kld = kld, .kld_windows = o->kld_windows,
                                   .progress = o->progress, .progress_user = o->progress_user};
    return sqz_layerdrop_score(s, w, &so, sc);
}

/* The choice: scores of the whole model into the rows, then the method's blocks. */
static sqz_status select_blocks(const sqz_model *m, const sqz_calib_windows *w, const sqz_session_opts *sso,
                                const sqz_layerdrop_opts *o, sqz_layerdrop_result *res) {
    const int32_t L = res->n_layers;
    const bool scored = o->method == SQZ_LAYERDROP_BI || o->method == SQZ_LAYERDROP_ANGULAR ||
                        o->method == SQZ_LAYERDROP_KLD;
    if (!w) {
        baseline(res, o);
        return SQZ_OK;
    }
    sqz_session *s = NULL;
    bool *skip = sqz__calloc((size_t)L, sizeof(bool));
    sqz_layerdrop_scores sc = {0};
    sqz_status st = skip ? sqz__ld_session(m, w, sso, &s) : SQZ_ERR_NOMEM;
    const bool kld = o->method == SQZ_LAYERDROP_KLD || o->all_scores;
    if (st == SQZ_OK) st = score(s, w, o, NULL, kld, &sc);
    if (st == SQZ_OK) fill_rows(res, &sc, o->method == SQZ_LAYERDROP_LIST ? o->n_list : o->count);
    if (st == SQZ_OK && !scored) baseline(res, o);
    if (st == SQZ_OK && scored && !o->iterative) choose(res, &sc, o->method, o->count, 1);
    for (int32_t step = 1; st == SQZ_OK && scored && o->iterative && step <= o->count; step++) {
        if (step > 1) {
            for (int32_t l = 0; l < L; l++) skip[l] = res->layers[l].step != 0;
            sqz_layerdrop_scores_free(&sc);
            st = score(s, w, o, skip, o->method == SQZ_LAYERDROP_KLD, &sc);
            if (st == SQZ_OK) res->seconds_score += sc.seconds;
        }
        if (st == SQZ_OK && choose(res, &sc, o->method, 1, step) != 1)
            st = SQZ_ERROR(SQZ_ERR_NUMERIC, "layerdrop: no finite %s score left at step %d",
                           sqz_layerdrop_method_name(o->method), (int)step);
    }
    sqz_layerdrop_scores_free(&sc);
    sqz_session_free(s);
    free(skip);
    return st;
}

static sqz_status result_init(const sqz_model *m, const sqz_layerdrop_opts *o, sqz_layerdrop_result *res) {
    memset(res, 0, sizeof *res);
    const int32_t L = (int32_t)m->hp.n_layers;
    res->method = o->method;
    res->iterative = o->iterative;
    res->n_layers = L;
    res->layers = sqz__calloc((size_t)L, sizeof *res->layers);
    res->removed = sqz__calloc((size_t)L, sizeof *res->removed);
    if (!res->layers || !res->removed) return SQZ_ERR_NOMEM;
    for (int32_t l = 0; l < L; l++)
        res->layers[l] = (sqz_layerdrop_layer){.layer = l, .bi = NAN, .angular = NAN, .kld = NAN, .top1 = NAN};
    return SQZ_OK;
}

sqz_status sqz_layerdrop_run(sqz_model *m, const sqz_calib_windows *w, const sqz_session_opts *so,
                             const sqz_layerdrop_opts *o, sqz_layerdrop_result *res) {
    SQZ_RETURN_IF(!m || !o || !res, SQZ_ERR_INVALID_ARG, "layerdrop: no model, options or result");
    SQZ_TRY(result_init(m, o, res));
    SQZ_TRY(check_opts(m, w, o));
    if (w && w->n_windows < 1) w = NULL;
    SQZ_TRY(select_blocks(m, w, so, o, res));
    for (int32_t l = 0; l < res->n_layers; l++)
        if (res->layers[l].step) res->removed[res->count++] = l;
    if (o->compensate) SQZ_TRY(sqz_layerdrop_compensate(m, w, so, res->removed, res->count, o->ridge, res));
    return sqz_model_remove_layers(m, res->removed, res->count);
}

sqz_status sqz_layerdrop_choose(const sqz_layerdrop_scores *sc, int32_t n_layers, const sqz_layerdrop_opts *o,
                                int32_t *out) {
    const bool scored = o->method == SQZ_LAYERDROP_BI || o->method == SQZ_LAYERDROP_ANGULAR ||
                        o->method == SQZ_LAYERDROP_KLD;
    SQZ_RETURN_IF(o->iterative || o->method == SQZ_LAYERDROP_LIST || o->count < 1 || o->count >= n_layers ||
                      (scored && (!sc || sc->n_layers != n_layers || sc->n_active != n_layers)),
                  SQZ_ERR_INVALID_ARG, "layerdrop: choose %d of %d blocks by %s needs scores of every block and no "
                  "iteration", (int)o->count, (int)n_layers, sqz_layerdrop_method_name(o->method));
    sqz_layerdrop_result r = {.n_layers = n_layers};
    r.layers = sqz__calloc((size_t)n_layers, sizeof *r.layers);
    if (!r.layers) return SQZ_ERR_NOMEM;
    int32_t got = o->count;
    if (scored) got = choose(&r, sc, o->method, o->count, 1);
    else baseline(&r, o);
    for (int32_t l = 0, k = 0; l < n_layers; l++)
        if (r.layers[l].step) out[k++] = l;
    free(r.layers);
    SQZ_RETURN_IF(got != o->count, SQZ_ERR_NUMERIC, "layerdrop: only %d finite %s scores for %d blocks", (int)got,
                  sqz_layerdrop_method_name(o->method), (int)o->count);
    return SQZ_OK;
}

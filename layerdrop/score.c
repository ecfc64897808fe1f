/*
 * layerdrop/score.c - block importance in one run over the calibration windows: every window
 * is run through the active blocks keeping each block's input (the residual stream), from
 * which block influence (1 - cos of a block's input and output) and the angular distance of
 * every run of consecutive blocks follow; with kld, each block is then skipped in turn from
 * its kept input onwards and the next-token distributions compared with the full ones.
 */
#include <stdlib.h>
#include <string.h>

#include "layerdrop/layerdrop_internal.h"
#include "sqz/family.h"

sqz_status sqz__ld_check_decoder(const sqz_model *m, const char *what) {
    const sqz_family_info *fi = sqz_family_get(m->hp.family);
    SQZ_RETURN_IF(!fi || !fi->lm_head, SQZ_ERR_UNSUPPORTED,
                  "%s: needs a decoder (llama family); %s is an encoder", what, m->hp.arch);
    return SQZ_OK;
}

sqz_status sqz__ld_session(const sqz_model *m, const sqz_calib_windows *w, const sqz_session_opts *so,
                           sqz_session **out) {
    sqz_session_opts o = so ? *so : sqz_session_default_opts();
    o.max_tokens = w->ctx;
    return sqz_session_new(m, &o, out);
}

sqz_status sqz__ld_blocks(sqz_session *s, const int32_t *active, int32_t from, int32_t to, float *x, int64_t n) {
    for (int32_t k = from; k < to; k++) SQZ_TRY(sqz_session_block(s, active[k], x, n, 0));
    return SQZ_OK;
}

void sqz_layerdrop_scores_free(sqz_layerdrop_scores *s) {
    if (!s) return;
    free(s->active);
    free(s->bi);
    free(s->ang);
    free(s->kld);
    free(s->top1);
    memset(s, 0, sizeof *s);
}

double sqz_layerdrop_ang(const sqz_layerdrop_scores *s, int32_t i, int32_t n) {
    if (!s->ang || i < 0 || n < 1 || i + n > s->n_active) return NAN;
    return s->ang[(int64_t)i * (s->n_active + 1) + i + n];
}

/* What one run holds: the states of one window and the sums over windows. */
typedef struct run {
    sqz_session *s;
    const sqz_calib_windows *w;
    const sqz_layerdrop_score_opts *o;
    int32_t A;               /* active blocks */
    const int32_t *active;
    int64_t ctx, d, V, half; /* half: first scored position of the KLD */
    float *states;           /* (A + 1) x ctx x d: the input of every active block, then the output */
    double *norm;            /* (A + 1) x ctx */
    double *ang_sum;         /* (A + 1)^2, pairs i < j */
    float *lp, *pp, *lq, *x; /* KLD: base log-probs and probs, the other's logits, a window copy */
    double *kld_sum, *top1_sum; /* per active block */
    int64_t done, total;
} run;

static float *state(const run *R, int32_t i) { return R->states + (int64_t)i * R->ctx * R->d; }

static void tick(run *R, int64_t k) {
    R->done += k;
    if (R->o->progress) R->o->progress(R->o->progress_user, R->done, R->total);
}

/* The input of every active block (and the last output) of window `win`, and their norms. */
static sqz_status forward_states(run *R, int64_t win) {
    const int32_t *tok = R->w->tokens + win * R->ctx;
    SQZ_TRY(sqz_session_embed(R->s, tok, NULL, R->ctx, 0, state(R, 0)));
    for (int32_t i = 0; i < R->A; i++) {
        memcpy(state(R, i + 1), state(R, i), (size_t)(R->ctx * R->d) * sizeof(float));
        SQZ_TRY(sqz_session_block(R->s, R->active[i], state(R, i + 1), R->ctx, 0));
        tick(R, 1);
    }
    for (int32_t i = 0; i <= R->A; i++)
        for (int64_t t = 0; t < R->ctx; t++) {
            const float *a = state(R, i) + t * R->d;
            double s = 0;
            for (int64_t k = 0; k < R->d; k++) s += (double)a[k] * a[k];
            R->norm[(int64_t)i * R->ctx + t] = sqrt(s);
        }
    return SQZ_OK;
}

/* cos of the residual stream at token t between states i and j; 1 when either is zero. */
static double cos_at(const run *R, int32_t i, int32_t j, int64_t t) {
    const double ni = R->norm[(int64_t)i * R->ctx + t], nj = R->norm[(int64_t)j * R->ctx + t];
    if (ni == 0 || nj == 0) return 1.0;
    const float *a = state(R, i) + t * R->d, *b = state(R, j) + t * R->d;
    double s = 0;
    for (int64_t k = 0; k < R->d; k++) s += (double)a[k] * b[k];
    const double c = s / (ni * nj);
    return c > 1 ? 1 : c < -1 ? -1 : c;
}

/* Angular distances of every pair of states of this window, summed over tokens (the
 * adjacent pairs give block influence too: bi = 1 - mean cos, ang = mean acos / pi). */
static void accumulate_pairs(run *R, double *cos_adj) {
    const int32_t S = R->A + 1;
    for (int32_t i = 0; i < S; i++)
        for (int32_t j = i + 1; j < S; j++) {
            double sa = 0, sc = 0;
            for (int64_t t = 0; t < R->ctx; t++) {
                const double c = cos_at(R, i, j, t);
                sa += acos(c) / M_PI;
                sc += c;
            }
            R->ang_sum[(int64_t)i * S + j] += sa;
            if (j == i + 1) cos_adj[i] += sc;
        }
}

/* Rows [0, n) of V logits into log-probabilities, in place. */
static void log_softmax(float *z, int64_t n, int64_t V) {
    for (int64_t r = 0; r < n; r++) {
        float *row = z + r * V, mx = row[0];
        for (int64_t v = 1; v < V; v++) mx = row[v] > mx ? row[v] : mx;
        double s = 0;
        for (int64_t v = 0; v < V; v++) s += exp((double)(row[v] - mx));
        const float lse = mx + (float)log(s);
        for (int64_t v = 0; v < V; v++) row[v] -= lse;
    }
}

static int64_t argmax(const float *row, int64_t V) {
    int64_t b = 0;
    for (int64_t v = 1; v < V; v++)
        if (row[v] > row[b]) b = v;
    return b;
}

/* KL(full || without active block i) and top-1 agreement over the scored rows of this window. */
static sqz_status kld_one(run *R, int32_t i) {
    const int64_t n = R->ctx - R->half;
    memcpy(R->x, state(R, i), (size_t)(R->ctx * R->d) * sizeof(float));
    SQZ_TRY(sqz__ld_blocks(R->s, R->active, i + 1, R->A, R->x, R->ctx));
    SQZ_TRY(sqz_session_head(R->s, R->x, R->ctx, R->half, R->lq));
    log_softmax(R->lq, n, R->V);
    double kl = 0, same = 0;
    for (int64_t r = 0; r < n; r++) {
        const float *lp = R->lp + r * R->V, *pp = R->pp + r * R->V, *lq = R->lq + r * R->V;
        double s = 0;
        for (int64_t v = 0; v < R->V; v++) s += (double)pp[v] * ((double)lp[v] - (double)lq[v]);
        kl += s;
        same += argmax(lp, R->V) == argmax(lq, R->V);
    }
    R->kld_sum[i] += kl;
    R->top1_sum[i] += same;
    tick(R, R->A - i - 1);
    return SQZ_OK;
}

static sqz_status kld_window(run *R) {
    const int64_t n = R->ctx - R->half;
    SQZ_TRY(sqz_session_head(R->s, state(R, R->A), R->ctx, R->half, R->lp));
    log_softmax(R->lp, n, R->V);
    for (int64_t k = 0; k < n * R->V; k++) R->pp[k] = expf(R->lp[k]);
    for (int32_t i = 0; i < R->A; i++) SQZ_TRY(kld_one(R, i));
    return SQZ_OK;
}

/* The active blocks of m (those not skipped) into out->active. */
static sqz_status active_blocks(const sqz_model *m, const bool *skip, sqz_layerdrop_scores *out) {
    const int32_t L = (int32_t)m->hp.n_layers;
    out->n_layers = L;
    out->active = sqz__calloc((size_t)L, sizeof *out->active);
    out->bi = sqz__calloc((size_t)L, sizeof *out->bi);
    out->kld = sqz__calloc((size_t)L, sizeof *out->kld);
    out->top1 = sqz__calloc((size_t)L, sizeof *out->top1);
    if (!out->active || !out->bi || !out->kld || !out->top1) return SQZ_ERR_NOMEM;
    for (int32_t l = 0; l < L; l++) {
        out->bi[l] = out->kld[l] = out->top1[l] = NAN;
        if (!skip || !skip[l]) out->active[out->n_active++] = l;
    }
    SQZ_RETURN_IF(out->n_active < 1, SQZ_ERR_INVALID_ARG, "layerdrop: every block is skipped");
    return SQZ_OK;
}

static sqz_status run_alloc(run *R, bool kld) {
    const int64_t S = R->A + 1, n = R->ctx - R->half;
    R->states = sqz__malloc((size_t)(S * R->ctx * R->d) * sizeof(float));
    R->norm = sqz__malloc((size_t)(S * R->ctx) * sizeof(double));
    R->ang_sum = sqz__calloc((size_t)(S * S), sizeof(double));
    R->kld_sum = sqz__calloc((size_t)S, sizeof(double));
    R->top1_sum = sqz__calloc((size_t)S, sizeof(double));
    if (kld) {
        R->lp = sqz__malloc((size_t)(n * R->V) * sizeof(float));
        R->pp = sqz__malloc((size_t)(n * R->V) * sizeof(float));
        R->lq = sqz__malloc((size_t)(n * R->V) * sizeof(float));
        R->x = sqz__malloc((size_t)(R->ctx * R->d) * sizeof(float));
    }
    SQZ_RETURN_IF(!R->states || !R->norm || !R->ang_sum || !R->kld_sum || !R->top1_sum ||
                      (kld && (!R->lp || !R->pp || !R->lq || !R->x)),
                  SQZ_ERR_NOMEM, "layerdrop: out of memory for %lld states of %lld x %lld floats",
                  (long long)S, (long long)R->ctx, (long long)R->d);
    return SQZ_OK;
}

static void run_free(run *R) {
    free(R->states);
    free(R->norm);
    free(R->kld_sum);
    free(R->top1_sum);
    free(R->lp);
    free(R->pp);
    free(R->lq);
    free(R->x);
}

/* Means over the windows into out. */
static void finish(run *R, const double *cos_adj, int64_t kw, sqz_layerdrop_scores *out) {
    const int32_t S = R->A + 1;
    const double T = (double)(R->w->n_windows * R->ctx);
    for (int64_t k = 0; k < (int64_t)S * S; k++) R->ang_sum[k] /= T;
    out->ang = R->ang_sum;
    R->ang_sum = NULL;
    for (int32_t i = 0; i < R->A; i++) {
        const int32_t l = R->active[i];
        out->bi[l] = 1.0 - cos_adj[i] / T;
        if (kw) {
            out->kld[l] = R->kld_sum[i] / (double)(kw * (R->ctx - R->half));
            out->top1[l] = R->top1_sum[i] / (double)(kw * (R->ctx - R->half));
        }
    }
    out->n_windows = R->w->n_windows;
    out->n_tokens = R->w->n_windows * R->ctx;
    out->kld_windows = kw;
    out->kld_tokens = kw * (R->ctx - R->half);
}

static sqz_status score_windows(run *R, int64_t kw, double *cos_adj) {
    for (int64_t win = 0; win < R->w->n_windows; win++) {
        SQZ_TRY(forward_states(R, win));
        accumulate_pairs(R, cos_adj);
        if (win < kw) SQZ_TRY(kld_window(R));
    }
    return SQZ_OK;
}

sqz_status sqz_layerdrop_score(sqz_session *s, const sqz_calib_windows *w, const sqz_layerdrop_score_opts *o,
                               sqz_layerdrop_scores *out) {
    memset(out, 0, sizeof *out);
    const sqz_layerdrop_score_opts def = {0};
    if (!o) o = &def;
    SQZ_RETURN_IF(!s || !w || w->n_windows < 1, SQZ_ERR_INVALID_ARG, "layerdrop: no session or no windows");
    const sqz_model *m = sqz_session_model(s);
    SQZ_TRY(sqz__ld_check_decoder(m, "layerdrop scores"));
    SQZ_RETURN_IF(w->ctx > sqz_session_max_tokens(s) || w->ctx < 2, SQZ_ERR_INVALID_ARG,
                  "layerdrop: windows of %lld tokens, the session holds %lld", (long long)w->ctx,
                  (long long)sqz_session_max_tokens(s));
    const double t0 = sqz_now_seconds();
    sqz_status st = active_blocks(m, o->skip, out);
    const int64_t kw = !o->kld ? 0 : o->kld_windows > 0 && o->kld_windows < w->n_windows ? o->kld_windows : w->n_windows;
    run R = {.s = s, .w = w, .o = o, .A = out->n_active, .active = out->active, .ctx = w->ctx,
             .d = m->hp.d_model, .V = m->hp.vocab_size, .half = w->ctx / 2};
    R.total = w->n_windows * R.A + kw * (int64_t)R.A * (R.A - 1) / 2;
    double *cos_adj = sqz__calloc((size_t)R.A + 1, sizeof(double));
    if (st == SQZ_OK && !cos_adj) st = SQZ_ERR_NOMEM;
    if (st == SQZ_OK) st = run_alloc(&R, kw > 0);
    if (st == SQZ_OK) st = score_windows(&R, kw, cos_adj);
    if (st == SQZ_OK) finish(&R, cos_adj, kw, out);
    free(R.ang_sum);
    free(cos_adj);
    run_free(&R);
    if (st != SQZ_OK) sqz_layerdrop_scores_free(out);
    else out->seconds = sqz_now_seconds() - t0;
    return st;
}

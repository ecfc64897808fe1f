/*
 * compress/pass_quant_trial.c - the guard of `--quant auto:bpw=X`: a second candidate plan
 * built from llama.cpp's fixed mixes, and the end-to-end trial that picks between plans.
 *
 * The greedy plan minimises a proxy (each matrix's own relative output error, nothing
 * propagated through later layers). Where the proxy misjudges, llama.cpp's hand-made mixes
 * (attn_v / ffn_down promoted on the first, last and every third layer) can be better at the
 * same size (SmolLM2 at Q3_K_M's size: docs/quantization.md). The anchor plan starts from the
 * largest mix that fits the budget (its token embedding and output types included) and spends
 * what is left on the upgrades that save the most proxy error per byte, so it is never smaller
 * than that mix. The trial quantizes the model under each plan (the tensors swapped in place,
 * the originals put back after), runs it on calibration windows against the logits of the model
 * as it is (saved once to a temporary file, llama.cpp's format) and reports the mean KLD.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "compress/compress_internal.h"
#include "core/temps.h"
#include "quant/quant_internal.h"
#include "sqz/eval.h"

/* the anchor is the largest of these that fits; iq3_m, q3_k_s and q2_k give one below q3_k_m's size
 * (the 1.5 B at IQ3_M's size had none) without changing the anchor above it */
static const char *const mix_names[] = {"q3_k_m", "q4_k_m", "q5_k_m", "q4_0", "q8_0", "iq3_m", "q3_k_s", "q2_k"};
#define N_MIX ((int)(sizeof mix_names / sizeof mix_names[0]))
enum { TRIAL_WINDOWS = 8 };

static bool with_imatrix(const sqz_compress_spec *sp) { return sp->method->needs != 0; }

/* Every measured block matrix, the token embedding and the output in the mix's types. */
static sqz_qplan *mix_plan(const sqz_model *m, const sqz_compress_spec *sp, const sqz__qauto_measured *ms,
                           const sqz_qmix *mix) {
    sqz_qplan *p = sqz__qplan_new(ms->n_layers);
    if (!p) return NULL;
    for (int32_t l = 0; l < ms->n_layers; l++)
        for (int k = 0; k < ms->n_roles; k++) {
            const sqz_tensor *t = sqz_model_get(m, ms->roles[k], l, SQZ_PARAM_WEIGHT);
            if (t && t->ndim == 2 && ms->have[l * ms->n_roles + k])
                p->type[(int64_t)l * SQZ_ROLE_COUNT + ms->roles[k]] = sqz_qmix_type(mix, m, t, with_imatrix(sp));
        }
    const sqz_tensor *e = sqz_model_get(m, SQZ_ROLE_TOKEN_EMBD, -1, SQZ_PARAM_WEIGHT);
    const sqz_tensor *o = sqz_model_get(m, SQZ_ROLE_OUTPUT, -1, SQZ_PARAM_WEIGHT);
    if (e && e->ndim == 2) p->embd = sqz_qmix_type(mix, m, e, with_imatrix(sp));
    if (o && o->ndim == 2) p->out = sqz_qmix_type(mix, m, o, with_imatrix(sp));
    snprintf(p->label, sizeof p->label, "%s+", sqz_qmix_name(mix));
    return p;
}

/* Index of dtype d among t's measured candidates, -1 if it was not measured (F16, or a width it does not fit). */
static int measured_index(const sqz_qauto_tensor *t, sqz_dtype d) {
    for (int j = 0; j < t->n; j++)
        if (sqz_qformat_dtype(t->fmt[j]) == d) return j;
    return -1;
}

/* Spends `left` bytes on the upgrades saving the most proxy error per byte, one at a time. */
static sqz_status upgrade(sqz_qplan *p, const sqz__qauto_measured *ms, double left) {
    const int64_t n = (int64_t)ms->n_layers * ms->n_roles;
    int *cur = sqz__malloc((size_t)(n > 0 ? n : 1) * sizeof(int));
    if (!cur) return SQZ_ERR_NOMEM;
    for (int64_t i = 0; i < n; i++)
        cur[i] = ms->have[i] ? measured_index(&ms->t[i], p->type[(i / ms->n_roles) * SQZ_ROLE_COUNT +
                                                                 ms->roles[i % ms->n_roles]])
                             : -1;
    for (;;) {
        int64_t bi = -1;
        int bj = -1;
        double bs = 0;
        for (int64_t i = 0; i < n; i++) {
            if (cur[i] < 0) continue;
            const sqz_qauto_tensor *t = &ms->t[i];
            for (int j = 0; j < t->n; j++) {
                const double db = t->bytes[j] - t->bytes[cur[i]], de = t->err[cur[i]] - t->err[j];
                if (db <= 0 || de <= 0 || db > left) continue;
                if (de / db > bs) bi = i, bj = j, bs = de / db;
            }
        }
        if (bi < 0) break;
        left -= ms->t[bi].bytes[bj] - ms->t[bi].bytes[cur[bi]];
        cur[bi] = bj;
        p->type[(bi / ms->n_roles) * SQZ_ROLE_COUNT + ms->roles[bi % ms->n_roles]] = sqz_qformat_dtype(ms->t[bi].fmt[bj]);
    }
    free(cur);
    return SQZ_OK;
}

sqz_status sqz__qplan_anchor(const sqz_model *m, const sqz_compress_spec *sp, const sqz__qauto_measured *ms,
                             double target, sqz_qplan **out) {
    *out = NULL;
    sqz_qplan *best = NULL;
    for (int i = 0; i < N_MIX; i++) {
        const sqz_qmix *mix = sqz_qmix_find(mix_names[i]);
        sqz_qplan *p = mix ? mix_plan(m, sp, ms, mix) : NULL;
        if (!p) {
            sqz__qplan_free(best);
            return SQZ_ERR_NOMEM;
        }
        p->bytes_planned = sqz__qplan_bytes(m, sp, p);
        if (p->bytes_planned <= target && (!best || p->bytes_planned > best->bytes_planned)) {
            sqz__qplan_free(best);
            best = p;
        } else {
            sqz__qplan_free(p);
        }
    }
    if (!best) return SQZ_OK;
    sqz_status st = upgrade(best, ms, target - best->bytes_planned);
    if (st != SQZ_OK) {
        sqz__qplan_free(best);
        return st;
    }
    best->bytes_target = target;
    best->bytes_planned = sqz__qplan_bytes(m, sp, best);
    *out = best;
    return SQZ_OK;
}

/* ---- the trial ---------------------------------------------------------------------------- */

typedef struct swap {
    sqz_tensor *t;
    sqz_tensor saved; /* the tensor as it was; put back by restore() */
    void *data;       /* the trial's quantized bytes (ours) */
} swap;

static void restore(swap *sv, int64_t n) {
    for (int64_t i = n - 1; i >= 0; i--) {
        *sv[i].t = sv[i].saved;
        free(sv[i].data);
    }
}

/* t's E[x^2] as measured, for a block matrix and the output; NULL otherwise. */
static const float *x2_of(const sqz__qauto_measured *ms, const sqz_tensor *t) {
    if (t->layer < 0 && t->role == SQZ_ROLE_OUTPUT) return ms->x2_out;
    if (t->layer < 0 || t->layer >= ms->n_layers) return NULL;
    for (int k = 0; k < ms->n_roles; k++)
        if (ms->roles[k] == t->role) return ms->x2[t->layer * ms->n_roles + k];
    return NULL;
}

/* q: t quantized to d as auto measured it (sqz__qauto_quantize); q->data stays NULL for a float d. */
static sqz_status quantize(const sqz_tensor *t, sqz_dtype d, const float *x2, bool imatrix, bool refine,
                           sqz_qmatrix *q) {
    memset(q, 0, sizeof *q);
    sqz_qtarget target = {SQZ_QFMT_Q8_0, 0};
    if (!sqz_qformat_from_dtype(d, &target.fmt)) return SQZ_OK;
    SQZ_TRY(sqz_qtarget_check(&target));
    const int64_t n = sqz_tensor_nelements(t);
    float *w = sqz__malloc((size_t)n * sizeof(float));
    if (!w) return SQZ_ERR_NOMEM;
    sqz_status st = sqz_tensor_to_f32(t, w);
    if (st == SQZ_OK) st = sqz__qauto_quantize(w, t->shape[0], t->shape[1], x2, imatrix, refine, &target, q);
    free(w);
    return st;
}

/* Swaps every tensor the plan (or the mix, for what it leaves) types differently into that type. */
static sqz_status apply(sqz_model *m, const sqz_compress_spec *sp, const sqz__qauto_measured *ms, const sqz_qplan *p,
                        swap *sv, int64_t *n_sv) {
    *n_sv = 0;
    const bool imatrix = with_imatrix(sp); /* as the plan measured it (pass_quant_plan.c) */
    for (int64_t i = 0; i < m->n_tensors; i++) {
        sqz_tensor *t = &m->tensors[i];
        if (t->ndim != 2 || t->param != SQZ_PARAM_WEIGHT || t->qp) continue;
        sqz_dtype d = sqz__qplan_type(p, t);
        if (d == SQZ_DTYPE_COUNT && t->layer < 0 && (t->role == SQZ_ROLE_TOKEN_EMBD || t->role == SQZ_ROLE_OUTPUT))
            d = sqz_qmix_type(sp->mix, m, t, with_imatrix(sp));
        if (d == SQZ_DTYPE_COUNT || d == t->dtype) continue;
        sqz_qmatrix q;
        sqz_status st = quantize(t, d, x2_of(ms, t), imatrix, sp->q.refine, &q);
        if (st != SQZ_OK) {
            sqz__error_prefix("auto trial: %s", t->name);
            return st;
        }
        if (!q.data) continue;
        sv[*n_sv] = (swap){t, *t, q.data};
        (*n_sv)++;
        t->data = q.data;
        t->dtype = q.dtype;
        t->nbytes = q.nbytes;
        t->owned = false; /* the swap owns it */
        t->qp = NULL;
        q.data = NULL;
        sqz_qmatrix_free(&q);
    }
    return SQZ_OK;
}

/* The trial's progress through the run's callback, in windows run through the whole model: the
 * reference and every plan, each over the same windows. */
typedef struct trial_progress {
    const sqz_compress_opts *o;
    int64_t ctx, done, total; /* windows before the current run, all of them */
} trial_progress;

static void trial_cb(void *user, int64_t tokens, int64_t total) {
    (void)total;
    const trial_progress *t = user;
    t->o->progress(t->o->progress_user, t->done + tokens / t->ctx, t->total);
}

/* Mean KLD of the model as it stands against the saved base logits (or, with save, saves them). */
static sqz_status run_eval(sqz_pass_ctx *pc, const int32_t *ids, int64_t n, int64_t ctx, const char *path, bool save,
                           trial_progress *tp, double *kld) {
    sqz_session_opts so = *pc->session_opts;
    so.max_tokens = ctx;
    so.weights = SQZ_WEIGHTS_STREAM; /* the compressor streams: no f32 copy of the whole model */
    sqz_session *s = NULL;
    SQZ_TRY(sqz_session_new(pc->m, &so, &s));
    sqz_eval_opts eo = sqz_eval_default_opts();
    eo.ctx = ctx;
    eo.save_base = save ? path : NULL;
    eo.save_base_scratch = save;
    eo.base_logits = save ? NULL : path;
    if (pc->o->progress) {
        eo.progress = trial_cb;
        eo.progress_user = tp;
    }
    sqz_eval_result r;
    memset(&r, 0, sizeof r);
    sqz_status st = sqz_eval_perplexity(s, ids, n, &eo, &r);
    if (st == SQZ_OK && !save) *kld = r.kld_mean;
    sqz_eval_result_free(&r);
    sqz_session_free(s);
    tp->done += n / ctx;
    return st;
}

/* The trial's windows: up to TRIAL_WINDOWS spread over the calibration windows, end to end. */
static int32_t *trial_ids(const sqz_calib_windows *w, int64_t *n) {
    const int64_t k = w->n_windows < TRIAL_WINDOWS ? w->n_windows : TRIAL_WINDOWS;
    int32_t *ids = sqz__malloc((size_t)(k * w->ctx) * sizeof(int32_t));
    for (int64_t i = 0; ids && i < k; i++)
        memcpy(ids + i * w->ctx, w->tokens + (i * w->n_windows / k) * w->ctx, (size_t)w->ctx * sizeof(int32_t));
    *n = k * w->ctx;
    return ids;
}

static sqz_status base_path(char **out, int *slot) {
    const char *dir = getenv("TMPDIR");
    char where[4096];
    snprintf(where, sizeof where, "%s/sqz-auto-base", dir && *dir ? dir : "/tmp");
    char *path = sqz__temp_template(where);
    if (!path) return SQZ_ERR_NOMEM;
    const int fd = mkstemp(path);
    if (fd < 0) {
        free(path);
        return SQZ_ERROR(SQZ_ERR_IO, "auto trial: cannot create a temporary file in %s (TMPDIR)",
                         dir && *dir ? dir : "/tmp");
    }
    close(fd);
    *slot = sqz__temp_register(path, 0);
    *out = path;
    return SQZ_OK;
}

sqz_status sqz__qplan_trial(sqz_pass_ctx *pc, const sqz_compress_spec *sp, const sqz__qauto_measured *ms,
                            sqz_qplan *const *plans, int n, double *kld) {
    for (int i = 0; i < n; i++) kld[i] = NAN;
    if (!pc->w || pc->w->n_windows < 2) return SQZ_OK; /* llama.cpp's protocol needs two windows */
    int64_t n_ids = 0;
    int32_t *ids = trial_ids(pc->w, &n_ids);
    swap *sv = sqz__malloc((size_t)(pc->m->n_tensors > 0 ? pc->m->n_tensors : 1) * sizeof *sv);
    int slot = -1;
    char *path = NULL;
    sqz_status st = !ids || !sv ? SQZ_ERR_NOMEM : base_path(&path, &slot);
    trial_progress tp = {pc->o, pc->w->ctx, 0, (int64_t)(n + 1) * (n_ids / pc->w->ctx)};
    if (st == SQZ_OK) st = run_eval(pc, ids, n_ids, pc->w->ctx, path, true, &tp, NULL);
    for (int i = 0; i < n && st == SQZ_OK; i++) {
        int64_t n_sv = 0;
        st = apply(pc->m, sp, ms, plans[i], sv, &n_sv);
        if (st == SQZ_OK) st = run_eval(pc, ids, n_ids, pc->w->ctx, path, false, &tp, &kld[i]);
        restore(sv, n_sv);
    }
    if (path) {
        unlink(path);
        sqz__temp_unregister(slot);
    }
    free(path);
    free(sv);
    free(ids);
    return st;
}

/*
 * compress/pass_quant_plan.c - the plan of `--quant auto:bpw=X`: one calibration pass over the
 * model as it is (E[x^2] of every linear input, no recompute), the sensitivity of every
 * block matrix to every candidate type (quant/auto.c), and the allocation to the size budget.
 * The token embedding and the output take Q4_K_M's types (Q6_K / Q8_0, llama.cpp's choice), or
 * one or two rungs below them in the "lighter heads" candidates, and count as fixed bytes, as do
 * norms and biases; the block matrices share the rest:
 *   budget = bpw * parameters / 8 - fixed bytes.
 * The plan is made when the quant stage reaches block 0 and freed after the last block.
 *
 * The proxy (each matrix's own output error, nothing propagated) can misjudge: on SmolLM2 at
 * Q3_K_M's size its plan measured worse than llama.cpp's mix. So the plan is guarded: the
 * greedy plan without Q2_K, the largest llama.cpp mix that fits, upgraded with what is left
 * (pass_quant_trial.c), and the greedy plan with lighter heads are candidates too; all are
 * measured end to end (mean KLD on calibration windows) and the best within the size is kept:
 * auto is never worse than the fixed mix of its size on the calibration text.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compress/compress_internal.h"
#include "quant/quant_internal.h"
#include "kernels/cpu/pool.h"

static const sqz_role linear_roles[] = {SQZ_ROLE_ATTN_Q,   SQZ_ROLE_ATTN_K, SQZ_ROLE_ATTN_V,  SQZ_ROLE_ATTN_OUT,
                                        SQZ_ROLE_FFN_GATE, SQZ_ROLE_FFN_UP, SQZ_ROLE_FFN_DOWN};
#define N_LIN ((int)(sizeof linear_roles / sizeof linear_roles[0]))

typedef struct collector {
    sqz_model *m;
    bool imatrix;
    bool refine;         /* the SPEC's search=refine: IQ3_S measured as the stage will write it */
    sqz_qauto_tensor *t; /* [n_layers * N_LIN] */
    bool *have;
    float **x2;          /* [n_layers * N_LIN]: a copy of the input's E[x^2], or NULL */
    sqz__pool *pool;     /* the block's (matrix, candidate) measurements run on it */
    float *x2_out;       /* the classifier input's E[x^2] (layer -1), or NULL */
} collector;

/* One block's measurements: job j is matrix j % N_LIN to candidate j / N_LIN, so that each
 * claimed run of jobs mixes large and small matrices. */
typedef struct block_jobs {
    const collector *c;
    float *w[N_LIN];     /* the matrices in f32 (NULL: absent) */
    int64_t rows[N_LIN], cols[N_LIN];
    sqz_dtype stored[N_LIN]; /* each matrix's type in the model */
    const float *x2[N_LIN];
    const sqz_qformat *cand;
    float **deq;         /* a scratch per thread, the largest matrix */
    double bytes[N_LIN * SQZ_QAUTO_MAX_CAND], err[N_LIN * SQZ_QAUTO_MAX_CAND];
    sqz_status st[N_LIN * SQZ_QAUTO_MAX_CAND];
} block_jobs;

static void measure_jobs(void *ctx, int64_t begin, int64_t end, int thread) {
    block_jobs *J = ctx;
    for (int64_t j = begin; j < end; j++) {
        const int k = (int)(j % N_LIN);
        J->bytes[j] = -1.0;
        J->st[j] = SQZ_OK;
        if (!J->w[k]) continue;
        J->st[j] = sqz__qauto_measure(J->w[k], J->rows[k], J->cols[k], J->x2[k], J->c->imatrix, J->c->refine,
                                      J->cand[j / N_LIN], J->deq[thread], &J->bytes[j], &J->err[j]);
        /* the type it is stored in costs nothing: the quant stage copies its bytes */
        if (sqz_qformat_dtype(J->cand[j / N_LIN]) == J->stored[k]) J->err[j] = 0.0;
    }
}

static void jobs_free(block_jobs *J, int n_threads) {
    for (int k = 0; k < N_LIN; k++) free(J->w[k]);
    for (int i = 0; J->deq && i < n_threads; i++) free(J->deq[i]);
    free(J->deq);
}

/* The classifier input's E[x^2], kept for the trial's rounding of the output (as the quant stage
 * rounds it: pass_quant_globals.c). */
static sqz_status keep_head(collector *c, const sqz_calib_block *b) {
    const sqz_calib_input *in = b ? sqz_calib_block_input(b, SQZ_ROLE_OUTPUT) : NULL;
    if (!in || !in->x2) return SQZ_OK;
    free(c->x2_out);
    if (!(c->x2_out = sqz__malloc((size_t)in->st.n_in * sizeof(float)))) return SQZ_ERR_NOMEM;
    memcpy(c->x2_out, in->x2, (size_t)in->st.n_in * sizeof(float));
    return SQZ_OK;
}

static sqz_status measure_block(void *user, sqz_session *s, int32_t layer, const sqz_calib_block *b) {
    (void)s;
    collector *c = user;
    if (layer < 0) return keep_head(c, b);
    if (layer >= c->m->hp.n_layers) return SQZ_OK;
    block_jobs J;
    memset(&J, 0, sizeof J);
    J.c = c;
    const int n_cand = sqz_qauto_candidates(&J.cand), nt = sqz__pool_threads(c->pool);
    int64_t most = 0;
    sqz_status st = SQZ_OK;
    for (int k = 0; k < N_LIN && st == SQZ_OK; k++) {
        const sqz_tensor *t = sqz_model_get(c->m, linear_roles[k], layer, SQZ_PARAM_WEIGHT);
        if (!t || t->ndim != 2) continue;
        const sqz_calib_input *in = b ? sqz_calib_block_input(b, linear_roles[k]) : NULL;
        const float *x2 = in && in->x2 && in->st.n_in == t->shape[1] ? in->x2 : NULL;
        if (x2) { /* kept for the trial's quantization */
            float *keep = sqz__malloc((size_t)t->shape[1] * sizeof(float));
            if (!keep) { st = SQZ_ERR_NOMEM; break; }
            memcpy(keep, x2, (size_t)t->shape[1] * sizeof(float));
            free(c->x2[layer * N_LIN + k]);
            c->x2[layer * N_LIN + k] = keep;
            J.x2[k] = keep;
        }
        const int64_t n = sqz_tensor_nelements(t);
        J.rows[k] = t->shape[0];
        J.stored[k] = t->qp ? SQZ_DTYPE_COUNT : t->dtype;
        J.cols[k] = t->shape[1];
        most = n > most ? n : most;
        if (!(J.w[k] = sqz__malloc((size_t)n * sizeof(float)))) st = SQZ_ERR_NOMEM;
        else st = sqz_tensor_to_f32(t, J.w[k]);
    }
    if (st == SQZ_OK && !(J.deq = sqz__calloc((size_t)nt, sizeof *J.deq))) st = SQZ_ERR_NOMEM;
    for (int i = 0; st == SQZ_OK && i < nt; i++)
        if (!(J.deq[i] = sqz__malloc((size_t)(most > 0 ? most : 1) * sizeof(float)))) st = SQZ_ERR_NOMEM;
    if (st == SQZ_OK) sqz__pool_for(c->pool, (int64_t)N_LIN * n_cand, 1, measure_jobs, &J);
    for (int64_t j = 0; st == SQZ_OK && j < (int64_t)N_LIN * n_cand; j++) {
        const int k = (int)(j % N_LIN);
        st = J.st[j] == SQZ_OK ? SQZ_OK
                               : SQZ_ERROR(J.st[j], "auto: block %d %s as %s could not be measured", (int)layer,
                                           sqz_role_name(linear_roles[k]), sqz_qformat_name(J.cand[j / N_LIN]));
        if (st == SQZ_OK && J.bytes[j] >= 0)
            sqz__qauto_add(&c->t[layer * N_LIN + k], J.cand[j / N_LIN], J.bytes[j], J.err[j]);
    }
    for (int k = 0; st == SQZ_OK && k < N_LIN; k++) c->have[layer * N_LIN + k] = J.w[k] != NULL;
    jobs_free(&J, nt);
    return st;
}

sqz_qplan *sqz__qplan_new(int32_t n_layers) {
    sqz_qplan *p = sqz__calloc(1, sizeof *p);
    if (!p) return NULL;
    p->n_layers = n_layers;
    p->type = sqz__malloc((size_t)(n_layers > 0 ? n_layers : 1) * SQZ_ROLE_COUNT * sizeof(sqz_dtype));
    if (!p->type) {
        free(p);
        return NULL;
    }
    for (int64_t i = 0; i < (int64_t)n_layers * SQZ_ROLE_COUNT; i++) p->type[i] = SQZ_DTYPE_COUNT;
    p->embd = p->out = SQZ_DTYPE_COUNT;
    return p;
}

void sqz__qplan_free(sqz_qplan *p) {
    if (!p) return;
    free(p->type);
    free(p);
}

double sqz__qplan_bytes(const sqz_model *m, const sqz_compress_spec *sp, const sqz_qplan *p) {
    double b = 0;
    for (int64_t i = 0; i < m->n_tensors; i++) {
        const sqz_tensor *t = &m->tensors[i];
        size_t nb = t->nbytes;
        sqz_dtype d = sqz__qplan_type(p, t);
        if (d == SQZ_DTYPE_COUNT && t->ndim == 2 && (t->role == SQZ_ROLE_TOKEN_EMBD || t->role == SQZ_ROLE_OUTPUT) &&
            sp->mix)
            d = sqz_qmix_type(sp->mix, m, t, sp->method->needs != 0);
        if (d != SQZ_DTYPE_COUNT) (void)sqz_dtype_nbytes(d, sqz_tensor_nelements(t), &nb);
        b += (double)nb;
    }
    return b;
}

/* The type `steps` rungs below the mix's for the token embedding or output (role), on the ladder
 * of its width (K-quants where 256 divides it, else the blocks of 32), its last rung at most;
 * SQZ_DTYPE_COUNT when the model has no such matrix or the mix's type is not on the ladder. */
static sqz_dtype head_type(const sqz_model *m, const sqz_compress_spec *sp, sqz_role role, int steps) {
    static const sqz_dtype k_ladder[] = {SQZ_DTYPE_Q8_0, SQZ_DTYPE_Q6_K, SQZ_DTYPE_Q5_K, SQZ_DTYPE_Q4_K, SQZ_DTYPE_Q3_K};
    static const sqz_dtype b_ladder[] = {SQZ_DTYPE_Q8_0, SQZ_DTYPE_Q5_1, SQZ_DTYPE_Q5_0, SQZ_DTYPE_Q4_1, SQZ_DTYPE_Q4_0};
    const sqz_tensor *t = sqz_model_get(m, role, -1, SQZ_PARAM_WEIGHT);
    if (!t || t->ndim != 2 || !sp->mix) return SQZ_DTYPE_COUNT;
    const sqz_dtype d = sqz_qmix_type(sp->mix, m, t, sp->method->needs != 0);
    const sqz_dtype *ladder = t->shape[1] % 256 ? b_ladder : k_ladder;
    int at = -1;
    for (int i = 0; i < 5; i++)
        if (ladder[i] == d) at = i;
    return at < 0 ? SQZ_DTYPE_COUNT : ladder[at + steps < 5 ? at + steps : 4];
}

/* The token embedding and output of a plan: their types, SQZ_DTYPE_COUNT for the mix's. */
typedef struct heads {
    sqz_dtype embd, out;
} heads;
static const heads mix_heads = {SQZ_DTYPE_COUNT, SQZ_DTYPE_COUNT};

/* The greedy plan over the measured matrices (their bytes are the budget left by the rest),
 * without the candidates of format `skip` (SQZ_QFMT_COUNT: none skipped), with the token
 * embedding and output in h's types. */
static sqz_status greedy_plan(const sqz_model *m, const sqz_compress_spec *sp, const collector *c, int64_t nt,
                              double target, sqz_qformat skip, heads h, sqz_qplan **out) {
    sqz_qplan *p = sqz__qplan_new(m->hp.n_layers);
    sqz_qauto_tensor *t = sqz__malloc((size_t)(nt > 0 ? nt : 1) * sizeof *t);
    if (!p || !t) {
        sqz__qplan_free(p);
        free(t);
        return SQZ_ERR_NOMEM;
    }
    p->embd = h.embd;
    p->out = h.out;
    const bool head = h.embd != SQZ_DTYPE_COUNT || h.out != SQZ_DTYPE_COUNT;
    double fixed = sqz__qplan_bytes(m, sp, p), used = 0; /* the planned matrices as they are, then out */
    for (int64_t i = 0; i < nt; i++) {
        const sqz_tensor *w = sqz_model_get(m, linear_roles[i % N_LIN], (int32_t)(i / N_LIN), SQZ_PARAM_WEIGHT);
        if (c->have[i] && w) fixed -= (double)w->nbytes;
        t[i] = c->t[i];
        t[i].n = 0;
        for (int j = 0; j < c->t[i].n; j++) { /* the candidates kept, in order */
            if (c->t[i].fmt[j] == skip) continue;
            t[i].fmt[t[i].n] = c->t[i].fmt[j];
            t[i].bytes[t[i].n] = c->t[i].bytes[j];
            t[i].err[t[i].n++] = c->t[i].err[j];
        }
    }
    sqz_status st = sqz_qauto_solve(t, nt, target - fixed, &used);
    for (int64_t i = 0; st == SQZ_OK && i < nt; i++)
        if (c->have[i] && t[i].chosen >= 0)
            p->type[(i / N_LIN) * SQZ_ROLE_COUNT + linear_roles[i % N_LIN]] = sqz_qformat_dtype(t[i].fmt[t[i].chosen]);
    free(t);
    if (head && p->embd != SQZ_DTYPE_COUNT && p->out != SQZ_DTYPE_COUNT) /* untied: both types */
        snprintf(p->label, sizeof p->label, "greedy-head-%s-%s", sqz_dtype_name(p->embd), sqz_dtype_name(p->out));
    else if (head)
        snprintf(p->label, sizeof p->label, "greedy-head-%s",
                 sqz_dtype_name(p->embd != SQZ_DTYPE_COUNT ? p->embd : p->out));
    else
        snprintf(p->label, sizeof p->label, skip == SQZ_QFMT_COUNT ? "greedy" : "greedy-no-%s",
                 sqz_qformat_name(skip));
    p->bytes_target = target;
    p->bytes_planned = sqz__qplan_bytes(m, sp, p);
    if (st != SQZ_OK) {
        sqz__qplan_free(p);
        return st;
    }
    *out = p;
    return SQZ_OK;
}

/* Whether plans a and b give every tensor the same type. */
static bool same_plan(const sqz_qplan *a, const sqz_qplan *b) {
    return a->embd == b->embd && a->out == b->out && a->n_layers == b->n_layers &&
           !memcmp(a->type, b->type, (size_t)a->n_layers * SQZ_ROLE_COUNT * sizeof *a->type);
}


/* The stage's note: the size, the types chosen, and the trial. */
/* The parameters the size asked counts. */
static double auto_params(const sqz_compress_spec *sp, const sqz_model *m) {
    return sp->auto_params > 0 ? sp->auto_params : (double)sqz_model_param_count(m);
}

/* Whether plan p is within the size asked (to the byte). */
static bool fits(const sqz_qplan *p) { return p->bytes_planned <= p->bytes_target + 0.5; }

static void note_plan(sqz_pass_ctx *pc, const sqz_compress_spec *sp, const sqz_qplan *p, sqz_qplan *const *cand,
                      const double *kld, int n_cand) {
    const sqz_model *m = pc->m;
    int counts[SQZ_DTYPE_COUNT] = {0};
    for (int64_t i = 0; i < (int64_t)p->n_layers * SQZ_ROLE_COUNT; i++)
        if (p->type[i] != SQZ_DTYPE_COUNT) counts[p->type[i]]++;
    char *b = pc->stage->note;
    const size_t cap = sizeof pc->stage->note;
    /* over the size asked only when no plan fits (pick_plan): say so */
    const bool over = !fits(p);
    size_t k = (size_t)snprintf(b, cap, "auto: %.3f bpw asked, %.3f planned (%.0f bytes of %.0f%s), %s:", sp->auto_bpw,
                                8.0 * p->bytes_planned / auto_params(sp, m), p->bytes_planned, p->bytes_target,
                                over ? ": OVER the size asked: the smallest plan, every block matrix at the "
                                       "smallest type that fits its width"
                                     : "",
                                p->label);
    for (int d = 0; d < SQZ_DTYPE_COUNT && k < cap; d++)
        if (counts[d]) k += (size_t)snprintf(b + k, cap - k, " %d %s", counts[d], sqz_dtype_name((sqz_dtype)d));
    for (int i = 0; i < n_cand && k < cap; i++)
        k += (size_t)snprintf(b + k, cap - k, "%s %s KLD %.5f", i ? "," : "; calibration trial:", cand[i]->label,
                              kld[i]);
}

/* Adds p to the candidates unless it is NULL or one of them already. */
static void add_candidate(sqz_qplan *p, sqz_qplan **cand, int *n) {
    bool dup = !p;
    for (int i = 0; p && i < *n; i++) dup = dup || same_plan(p, cand[i]);
    if (dup) sqz__qplan_free(p);
    else cand[(*n)++] = p;
}

/* The candidates: the greedy plan; the greedy plan without Q2_K (the proxy favours it where it
 * hurts most; on SmolLM2 at Q4_K_M's size leaving it out measured 0.0165 against 0.0213); the
 * largest mix that fits, upgraded; and the greedy plan with the token embedding and output one
 * and two rungs below q4_k_m's types (the proxy does not see them, and where they are a large
 * part of the model, SmolLM2's tied 28 M of 135 M in Q8_0, their bytes may do more in the
 * blocks; a third rung for an output rounded with importance), and an untied embedding that ended
 * on Q3_K at Q2_K. Duplicates are dropped; with two
 * or more left, the trial decides. *n gets their number; the greedy plan is first. */
enum { N_CAND = 7 };
static sqz_status candidates(sqz_pass_ctx *pc, const sqz_compress_spec *sp, const collector *c,
                             const sqz__qauto_measured *ms, double target, sqz_qplan **cand, int *n) {
    *n = 0;
    const int64_t nt = (int64_t)ms->n_layers * N_LIN;
    SQZ_TRY(greedy_plan(pc->m, sp, c, nt, target, SQZ_QFMT_COUNT, mix_heads, &cand[(*n)++]));
    sqz_qplan *p = NULL;
    SQZ_TRY(greedy_plan(pc->m, sp, c, nt, target, SQZ_QFMT_Q2_K, mix_heads, &p));
    add_candidate(p, cand, n);
    p = NULL;
    SQZ_TRY(sqz__qplan_anchor(pc->m, sp, ms, target, &p));
    add_candidate(p, cand, n);
    heads h = mix_heads, h2 = mix_heads;
    /* a third rung only for an output rounded with its input's importance (pass_quant_globals.c:
     * on the 1.5 B its Q4_K output cost 0.0089 so, 0.0146 without) */
    const int rungs = c->imatrix && ms->x2_out && sqz_model_get(pc->m, SQZ_ROLE_OUTPUT, -1, SQZ_PARAM_WEIGHT) ? 3 : 2;
    for (int head = 1; head <= rungs; head++) {
        h = (heads){head_type(pc->m, sp, SQZ_ROLE_TOKEN_EMBD, head), head_type(pc->m, sp, SQZ_ROLE_OUTPUT, head)};
        if (h.embd == SQZ_DTYPE_COUNT && h.out == SQZ_DTYPE_COUNT) break;
        if (head == 2) h2 = h;
        p = NULL;
        SQZ_TRY(greedy_plan(pc->m, sp, c, nt, target, SQZ_QFMT_COUNT, h, &p));
        add_candidate(p, cand, n);
    }
    /* an untied token embedding at the foot of the K ladder goes one rung further, to Q2_K: it is
     * looked up, not multiplied, and llama.cpp's IQ2 mixes store it so; the output stays */
    if (h2.embd == SQZ_DTYPE_Q3_K && h2.out != SQZ_DTYPE_COUNT) {
        p = NULL;
        SQZ_TRY(greedy_plan(pc->m, sp, c, nt, target, SQZ_QFMT_COUNT, (heads){SQZ_DTYPE_Q2_K, h2.out}, &p));
        add_candidate(p, cand, n);
    }
    return SQZ_OK;
}

/* The plan kept: the lowest KLD measured among the plans within the size (the greedy plan when
 * nothing was measured); when none is (the smallest types that fit every width are over it), the
 * smallest plan. */
static int pick_plan(sqz_qplan *const *cand, const double *kld, int n) {
    bool any_fits = false;
    for (int i = 0; i < n; i++) any_fits = any_fits || fits(cand[i]);
    int pick = 0;
    for (int i = 1; i < n; i++) {
        if (!any_fits) {
            if (cand[i]->bytes_planned < cand[pick]->bytes_planned) pick = i;
        } else if (fits(cand[i])) {
            if (!fits(cand[pick]) || (!isnan(kld[i]) && (isnan(kld[pick]) || kld[i] < kld[pick]))) pick = i;
        }
    }
    return pick;
}

sqz_status sqz__quant_auto_plan(sqz_pass_ctx *pc, sqz_compress_spec *sp, double *kld_out) {
    sqz_model *m = pc->m;
    SQZ_RETURN_IF(!pc->w || !pc->session_opts, SQZ_ERR_INVALID_ARG,
                  "--quant '%s': auto measures every layer's sensitivity on calibration text first: give --calib "
                  "FILE", sp->text);
    const int64_t nl = m->hp.n_layers, nt = nl * N_LIN;
    /* a method that reads the activations (imatrix, gptq, awq) is measured by importance-weighted
     * rounding, the nearest of the reference quantizers to what it writes; rtn by rtn */
    collector c = {m, sp->method->needs != 0, sp->q.refine, sqz__calloc((size_t)nt, sizeof(sqz_qauto_tensor)),
                   sqz__calloc((size_t)nt, sizeof(bool)), sqz__calloc((size_t)nt, sizeof(float *)), NULL, NULL};
    sqz_status st = c.t && c.have && c.x2 ? SQZ_OK : SQZ_ERR_NOMEM;
    if (st == SQZ_OK) st = sqz__pool_new(pc->session_opts->n_threads, &c.pool);
    if (st == SQZ_OK)
        st = sqz_calib_scan(m, pc->session_opts, pc->w, SQZ_QSTAT_X2, true, measure_block, &c, pc->o->progress,
                            pc->o->progress_user);
    const double target = sp->auto_bpw * auto_params(sp, m) / 8.0;
    const sqz__qauto_measured ms = {c.t, c.x2, c.have, linear_roles, N_LIN, (int32_t)nl, c.x2_out};
    sqz_qplan *cand[N_CAND] = {NULL};
    double kld[N_CAND] = {NAN, NAN, NAN, NAN, NAN, NAN, NAN};
    int n_cand = 0;
    if (st == SQZ_OK) st = candidates(pc, sp, &c, &ms, target, cand, &n_cand);
    /* the trial picks between plans; try-rotate (kld_out) compares its KLD across models, so one plan is
     * measured too */
    if (st == SQZ_OK && (n_cand > 1 || (kld_out && n_cand == 1))) st = sqz__qplan_trial(pc, sp, &ms, cand, n_cand, kld);
    const int pick = st == SQZ_OK ? pick_plan(cand, kld, n_cand) : 0;
    if (st == SQZ_OK) note_plan(pc, sp, cand[pick], cand, kld, isnan(kld[pick]) ? 0 : n_cand);
    sqz__pool_free(c.pool);
    for (int64_t i = 0; c.x2 && i < nt; i++) free(c.x2[i]);
    free(c.x2);
    free(c.x2_out);
    free(c.t);
    free(c.have);
    for (int i = 0; i < N_CAND; i++)
        if (i != pick || st != SQZ_OK) sqz__qplan_free(cand[i]);
    if (st != SQZ_OK) return st;
    sp->plan = cand[pick];
    if (kld_out) *kld_out = kld[pick];
    return SQZ_OK;
}

sqz_dtype sqz__qplan_type(const sqz_qplan *p, const sqz_tensor *t) {
    if (!p || t->param != SQZ_PARAM_WEIGHT) return SQZ_DTYPE_COUNT;
    if (t->layer < 0 && t->ndim == 2) return t->role == SQZ_ROLE_TOKEN_EMBD ? p->embd : t->role == SQZ_ROLE_OUTPUT ? p->out
                                                                                                         : SQZ_DTYPE_COUNT;
    if (t->layer < 0 || t->layer >= p->n_layers) return SQZ_DTYPE_COUNT;
    return p->type[(int64_t)t->layer * SQZ_ROLE_COUNT + t->role];
}

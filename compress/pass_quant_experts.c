/*
 * compress/pass_quant_experts.c - a mixture's experts in one block: each stacked FFN_*_EXPS tensor
 * (n_expert, rows, cols) quantized one expert at a time onto one GGUF type (the mix's for its
 * category, as llama-quantize picks it, or the SPEC's), and attached as one stacked tensor of blocks,
 * as llama-quantize writes ffn_*_exps.
 *
 * Each expert is weighed by its own statistics where the method weighs by any: an importance matrix
 * from llama-imatrix (--imatrix) holds E[x^2] per expert over the tokens routed to it, and the imatrix
 * method rounds each expert with its slice (an expert no token reached has the all-ones importance
 * llama-quantize gives it: plain weighted rounding). sqz's own calibration does not yet route its
 * statistics to the experts: with it, and for methods that need more than E[x^2] (GPTQ's X^T X, AWQ's
 * rows), the experts are rounded by RTN and the report row says so; the router (ffn_gate_inp) is never
 * quantized, as in llama-quantize. Experts onto sqz's own int8/int4 layouts are refused before any work
 * (sqz__experts_check).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compress/compress_internal.h"
#include "quant/quant_internal.h"
#include "sqz/dist.h"
#include "sqz/edit.h"

static bool is_exps(sqz_role r) {
    return r == SQZ_ROLE_FFN_GATE_EXPS || r == SQZ_ROLE_FFN_UP_EXPS || r == SQZ_ROLE_FFN_DOWN_EXPS;
}

sqz_status sqz__experts_check(const sqz_model *m, const sqz_compress_spec *sp) {
    const sqz_family_info *fi = sqz_family_get(m->hp.family);
    if (!fi || !fi->experts || !sp->method) return SQZ_OK;
    SQZ_RETURN_IF(!sp->mix && !sqz_qformat_is_gguf(sp->q.target.fmt), SQZ_ERR_INVALID_ARG,
                  "--quant '%s': %s is a mixture of experts: its experts are quantized onto GGUF types only (q4_k_m, "
                  "q8_0:mix, q4_k, ...), not %s", sp->text, fi->name, sqz_qformat_name(sp->q.target.fmt));
    SQZ_RETURN_IF(sqz_dist_size() > 1 && sp->method->needs, SQZ_ERR_INVALID_ARG, "--quant '%s': %s is a mixture of "
                  "experts: an MPI job does not merge the per-expert statistics yet (run one process)", sp->text,
                  fi->name);
    SQZ_RETURN_IF(sp->auto_bpw > 0, SQZ_ERR_INVALID_ARG, "--quant '%s': %s is a mixture of experts: auto:bpw does "
                  "not plan the experts yet (give a mix: q4_k_m, q3_k_m, ...)", sp->text, fi->name);
    return SQZ_OK;
}

/* Matrix e of stacked tensor t as a 2-D view. */
static sqz_tensor expert_view(const sqz_tensor *t, int64_t e) {
    sqz_tensor v = *t;
    v.nbytes = t->nbytes / (size_t)t->shape[0];
    v.data = (uint8_t *)t->data + (size_t)e * v.nbytes;
    v.ndim = 2;
    v.shape[0] = t->shape[1];
    v.shape[1] = t->shape[2];
    v.shape[2] = 1;
    return v;
}

/* The type of t; *why: a reason it stays as it is. */
static sqz_status plan_tensor(const sqz_model *m, const sqz_compress_opts *o, const sqz_keep_float *keep,
                              const sqz_tensor *t, sqz_qtarget *target, const char **why) {
    const sqz_compress_spec *sp = &o->spec;
    *target = sp->q.target;
    *why = NULL;
    if (sp->mix) {
        sqz_dtype d, want;
        SQZ_TRY(sqz__mix_type(sp, o->overrides, m, t, &d, &want));
        if (!sqz_qformat_from_dtype(d, &target->fmt)) {
            *why = "no block of the mix's type or its fallback fits";
            return SQZ_OK;
        }
        (void)sqz_qtarget_check(target);
    }
    const sqz_tensor v = expert_view(t, 0);
    if (sqz_keep_float_match(keep, t)) *why = "kept float (--keep-float)";
    else if (t->qp) *why = "already quantized by sqz";
    else (void)sqz_quant_policy_wants(&v, target, &o->policy, why); /* sets *why when it does not */
    return SQZ_OK;
}

/* How often each rule was taken over a tensor's experts, and the tokens they saw. */
typedef struct expert_tally {
    int64_t gptq, imatrix, ones, rtn;
    float lo, hi; /* tokens per expert; lo > hi: not known */
} expert_tally;

/*
 * The method expert e of input `in` is rounded with, and its statistics in *qs (the rule, docs/moe.md):
 *   - the SPEC's method is RTN, or no statistics reach the experts: RTN;
 *   - the expert saw no token: an all-ones importance, llama-quantize's rule for an expert llama-imatrix
 *     never reached (plain weighted rounding; never a zero Hessian);
 *   - GPTQ with X^T X of at least as many tokens as the expert has inputs: GPTQ on the expert's own X^T X;
 *     fewer (a Hessian short of full rank, carried by the damping alone): its E[x^2] by imatrix;
 *   - any other method that weighs by statistics (imatrix; AWQ, whose search rows the experts do not keep):
 *     imatrix with the expert's E[x^2].
 * A type the imatrix method does not produce (Q8_0) is rounded plainly, as llama-quantize does.
 */
static const sqz_qmethod *expert_method(const sqz_compress_spec *sp, const sqz_calib_input *in, int64_t e,
                                        sqz_qformat fmt, int64_t n_in, sqz_qstats *qs, expert_tally *tl) {
    const sqz_qmethod *im = sqz_qmethod_find("imatrix"), *rtn = sqz_qmethod_find("rtn");
    *qs = (sqz_qstats){.n_in = n_in};
    const bool have = in && in->st.x2 && e < (in->n_mat ? in->n_mat : 1);
    if (!sp->method->needs || !have || !(im->formats & (1u << fmt))) {
        tl->rtn++;
        return rtn;
    }
    const float tok = in->mat_tokens ? in->mat_tokens[e] : -1.0f; /* -1: a file without counts */
    tl->lo = tok >= 0 && tok < tl->lo ? tok : tl->lo;
    tl->hi = tok > tl->hi ? tok : tl->hi;
    qs->x2 = in->x2 + e * n_in;
    qs->n_tokens = tok > 0 ? (int64_t)tok : in->st.n_tokens;
    if (tok == 0) { /* E[x^2] holds ones there (llama-imatrix's files and sqz's calibration alike) */
        tl->ones++;
        return im;
    }
    if (sp->method->hessian && in->mat_xtx && in->mat_xtx[e] && tok >= (float)n_in &&
        (sp->method->formats & (1u << fmt))) {
        qs->xtx = in->mat_xtx[e];
        tl->gptq++;
        return sp->method;
    }
    tl->imatrix++;
    return im;
}

/* Every expert of t onto target by method: one stacked tensor of blocks replaces t. */
static sqz_status quantize_tensor(sqz_model *m, const sqz_compress_opts *o, sqz_tensor *t, const sqz_calib_input *in,
                                  const sqz_qtarget *target, expert_tally *tl, sqz_layer_report *row) {
    const int64_t E = t->shape[0], rows = t->shape[1], cols = t->shape[2];
    float *w = sqz__malloc((size_t)(rows * cols) * sizeof(float)), *deq = sqz__malloc((size_t)(rows * cols) * 4);
    float *smooth = sqz__malloc((size_t)cols * sizeof(float));
    uint8_t *all = NULL;
    size_t each = 0;
    sqz_status st = w && deq && smooth ? SQZ_OK : SQZ_ERR_NOMEM;
    double err = 0, secs = 0;
    sqz_quant_opts qo = o->spec.q;
    qo.target = *target;
    qo.backend = o->backend;
    qo.threads = o->threads;
    for (int64_t e = 0; e < E && st == SQZ_OK; e++) {
        const sqz_tensor v = expert_view(t, e);
        st = sqz_tensor_to_f32(&v, w);
        sqz_qstats qs;
        const sqz_qmethod *method = expert_method(&o->spec, in, e, target->fmt, cols, &qs, tl);
        const sqz_qlinear lin = {w, rows, t->name, false};
        sqz_qmatrix q;
        memset(&q, 0, sizeof q);
        if (st == SQZ_OK) st = method->run(&lin, 1, &qs, &qo, &q, smooth);
        if (st == SQZ_OK && !all) {
            each = q.nbytes;
            all = sqz__malloc(each * (size_t)E);
            if (!all) st = SQZ_ERR_NOMEM;
        }
        if (st == SQZ_OK && q.nbytes != each) st = SQZ_ERROR(SQZ_ERR_SHAPE, "tensor '%s': expert sizes", t->name);
        if (st == SQZ_OK) memcpy(all + (size_t)e * each, q.data, each);
        if (st == SQZ_OK) st = sqz_qmatrix_to_f32(&q, deq);
        if (st == SQZ_OK) err += sqz__rel_err(deq, w, rows * cols) / (double)E;
        if (st == SQZ_OK) row->bits_per_weight = sqz_qmatrix_bits_per_weight(&q);
        if (st == SQZ_OK) snprintf(row->format, sizeof row->format, "%s", sqz_qformat_name(q.target.fmt));
        secs += q.seconds;
        sqz_qmatrix_free(&q);
    }
    const sqz_dtype dt = sqz_qformat_dtype(target->fmt);
    const int64_t shape[3] = {E, rows, cols};
    const void *old = t->data;
    const size_t old_n = t->nbytes;
    const bool borrowed = !t->owned;
    if (st == SQZ_OK) st = sqz_tensor_replace(m, t, dt, 3, shape, all, each * (size_t)E, true);
    if (st == SQZ_OK) {
        all = NULL;
        if (borrowed) sqz__release_pages(old, old_n);
        row->quantized = true;
        row->weight_err = err;
        row->seconds = secs;
    }
    free(all);
    free(w);
    free(deq);
    free(smooth);
    return st;
}

/* The row's method (the rule taken most: the SPEC's Hessian method, imatrix, imatrix of ones, rtn, as
 * expert_method takes them) and why: "gptq 6 imatrix 1 ones 1; 0..340 tokens". */
static void tally_text(const expert_tally *tl, const sqz_qmethod *spec_method, sqz_layer_report *row) {
    const int64_t c[4] = {tl->gptq, tl->imatrix, tl->ones, tl->rtn};
    const sqz_qmethod *im = sqz_qmethod_find("imatrix"), *rtn = sqz_qmethod_find("rtn");
    const sqz_qmethod *const rule[4] = {spec_method, im, im, rtn};
    int best = 0;
    for (int k = 1; k < 4; k++) best = c[k] > c[best] ? k : best;
    sqz__report_row_method(row, rule[best], "");
    char toks[32] = "";
    if (tl->lo <= tl->hi) snprintf(toks, sizeof toks, "; %.0f..%.0f tokens", (double)fminf(tl->lo, 1e9f), (double)fminf(tl->hi, 1e9f));
    if (c[best] == tl->rtn && tl->rtn && !tl->gptq && !tl->imatrix && !tl->ones) return;
    char buf[160];
    snprintf(buf, sizeof buf, "experts: gptq %lld imatrix %lld ones %lld rtn %lld%s", (long long)tl->gptq,
             (long long)tl->imatrix, (long long)tl->ones, (long long)tl->rtn, toks);
    snprintf(row->why, sizeof row->why, "%.63s", buf);
}

sqz_status sqz__compress_experts(sqz_model *m, int32_t layer, const sqz_calib_block *stats,
                                 const sqz_compress_opts *o, const sqz_keep_float *keep, sqz_compress_report *rep) {
    for (int r = 0; r < SQZ_ROLE_COUNT; r++) {
        sqz_tensor *t = is_exps((sqz_role)r) ? sqz_model_get(m, (sqz_role)r, layer, SQZ_PARAM_WEIGHT) : NULL;
        if (!t || t->ndim != 3) continue;
        const sqz_calib_input *in = stats ? sqz_calib_block_input(stats, (sqz_role)r) : NULL;
        sqz_layer_report row;
        sqz__report_row_init(&row, t);
        row.n_out = t->shape[0] * t->shape[1];
        row.n_in = t->shape[2];
        sqz_qtarget target;
        const char *why = NULL;
        SQZ_TRY(plan_tensor(m, o, keep, t, &target, &why));
        if (why) {
            snprintf(row.why, sizeof row.why, "%s", why);
            snprintf(row.method, sizeof row.method, "float");
            snprintf(row.format, sizeof row.format, "%s", sqz_dtype_name(t->dtype));
        } else {
            expert_tally tl = {.lo = INFINITY, .hi = -1};
            sqz_status st = quantize_tensor(m, o, t, in, &target, &tl, &row);
            tally_text(&tl, o->spec.method, &row);
            if (st == SQZ_OK && o->spec.method->needs && !in && target.fmt != SQZ_QFMT_Q8_0)
                snprintf(row.why, sizeof row.why, "rtn: no per-expert statistics");
            if (st != SQZ_OK) {
                sqz__error_prefix("block %d, %s", (int)layer, sqz_role_name((sqz_role)r));
                return st;
            }
        }
        SQZ_TRY(sqz__report_add(rep, &row));
    }
    return SQZ_OK;
}

/*
 * compress/pass_quant_block.c - compressing one block: the linear layers grouped by shared input, a
 * method of sqz/quant.h per group, smoothing vectors folded into the operation that
 * produces the input, every compressed layer validated on calibration rows, the results
 * attached to the model.
 *
 * Order (llama): o, down, q|k|v, gate|up. AWQ/SmoothQuant's vector s of o's input is folded
 * into v's rows (only when every head has its own v: n_heads == n_kv_heads) and down's into
 * up's rows (silu(g) * u / s = silu(g) * (u / s)); both must happen before v and up are
 * quantized, hence o and down first. q|k|v and gate|up fold into the RMSNorm weight before
 * them. (BERT: only v before o; down reads gelu(up), which does not commute with a scale.)
 * Where no fold is possible the vector stays as the layer's in_scale (sqz formats) or,
 * for GGUF blocks which cannot carry it, AWQ searches no scale (alpha 0, its clipping search
 * still runs). llm-awq's auto_scale_block makes the same choices.
 */
#include <cblas.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "compress/compress_internal.h"
#include "sqz/dist.h"
#include "quant/judge.h"
#include "quant/quant_internal.h"
#include "sqz/edit.h"
#include "sqz/family.h"

sqz_status sqz__tensor_set_f32(sqz_model *m, sqz_tensor *t, const float *values) {
    const int64_t n = sqz_tensor_nelements(t);
    float *d = sqz__malloc((size_t)n * sizeof(float));
    if (!d) return SQZ_ERR_NOMEM;
    memcpy(d, values, (size_t)n * sizeof(float));
    return sqz_tensor_replace(m, t, SQZ_DTYPE_F32, t->ndim, t->shape, d, (size_t)n * sizeof(float), true);
}

/* Drops the whole pages of [p, p + n) from the resident set: the source data of a tensor that
 * now holds its compressed version. Borrowed tensor data (owned == false) always lies in a
 * read-only private file mapping (sqz/tensor.h), whose clean pages MADV_DONTNEED only unmaps
 * (a later access reads them from the file again), so nothing is lost; it keeps the memory
 * of a compress run near one block of the source plus the compressed model instead of the
 * whole checkpoint. (MADV_PAGEOUT leaves page-cache pages resident on current kernels.) */
void sqz__release_pages(const void *p, size_t n) {
    const long pg = sysconf(_SC_PAGESIZE);
    if (pg <= 0 || !p) return;
    uintptr_t a = ((uintptr_t)p + (uintptr_t)pg - 1) & ~((uintptr_t)pg - 1);
    uintptr_t b = ((uintptr_t)p + n) & ~((uintptr_t)pg - 1);
    if (b > a) (void)madvise((void *)a, b - a, MADV_DONTNEED);
}

sqz_status sqz__report_add(sqz_compress_report *rep, const sqz_layer_report *row) {
    if (rep->n_layers % 64 == 0) {
        sqz_layer_report *n = sqz__realloc(rep->layers, (size_t)(rep->n_layers + 64) * sizeof *n);
        if (!n) return SQZ_ERR_NOMEM;
        rep->layers = n;
    }
    rep->layers[rep->n_layers++] = *row;
    return SQZ_OK;
}

void sqz__report_row_init(sqz_layer_report *r, const sqz_tensor *t) {
    memset(r, 0, sizeof *r);
    snprintf(r->tensor, sizeof r->tensor, "%s", t->name);
    r->layer = t->layer;
    r->role = t->role;
    r->n_out = t->shape[0];
    r->n_in = t->shape[1];
    r->out_err = NAN;
    r->weight_err = NAN;
    r->heldout_gptq = r->heldout_imatrix = NAN;
    r->qmethod = -1;
    snprintf(r->source_format, sizeof r->source_format, "%s", sqz_dtype_name(t->dtype));
}

void sqz__report_row_method(sqz_layer_report *r, const sqz_qmethod *mt, const char *suffix) {
    snprintf(r->method, sizeof r->method, "%s%s", mt->name, suffix);
    r->qmethod = (int32_t)(mt - sqz_qmethods(NULL));
}


/* The block's working state: f32 copies of the weights that a fold may change before they
 * are quantized. */
typedef struct block_ctx {
    sqz_model *m;
    int32_t layer;
    const sqz_compress_opts *o;
    const sqz_keep_float *keep; /* --keep-float, parsed */
    float *w[SQZ_ROLE_COUNT];   /* f32 copy, when made */
    bool dirty[SQZ_ROLE_COUNT]; /* changed by a fold and not quantized yet */
    bool quantized[SQZ_ROLE_COUNT];
    bool to_f16[SQZ_ROLE_COUNT]; /* does not fit the GGUF target's blocks: f16 (llama.cpp's fallback) */
} block_ctx;

/* A weight the policy would quantize but whose input width the GGUF target's blocks do not
 * divide (when pad-ffn could not help: d_model, attention widths) is stored f16 rather than
 * f32, as llama-quantize falls back; wider float dtypes only. */
static bool f16_fallback(const sqz_tensor *t, const sqz_compress_opts *o, const sqz_qtarget *target) {
    const sqz_dtype_traits *tr = sqz_dtype_info(t->dtype);
    return sqz_qformat_is_gguf(target->fmt) && tr->is_float && tr->type_size > 2 && t->dtype != SQZ_DTYPE_BF16 &&
           sqz_quant_policy_wants(t, NULL, &o->policy, NULL) && !sqz_qtarget_fits(target, t->shape[1]);
}

static sqz_status weight_f32(block_ctx *c, sqz_role r, float **out);

static sqz_status store_f16(block_ctx *c, sqz_role r) {
    sqz_tensor *t = sqz_model_get(c->m, r, c->layer, SQZ_PARAM_WEIGHT);
    float *w = NULL;
    SQZ_TRY(weight_f32(c, r, &w));
    const int64_t n = sqz_tensor_nelements(t);
    uint16_t *h = sqz__malloc((size_t)n * sizeof(uint16_t));
    if (!h) return SQZ_ERR_NOMEM;
    sqz_status st = sqz_convert(SQZ_DTYPE_F32, w, SQZ_DTYPE_F16, h, n, NULL);
    if (st != SQZ_OK) {
        free(h);
        return st;
    }
    int64_t shape[SQZ_MAX_DIMS];
    memcpy(shape, t->shape, sizeof shape);
    return sqz_tensor_replace(c->m, t, SQZ_DTYPE_F16, t->ndim, shape, h, (size_t)n * sizeof(uint16_t), true);
}

static sqz_status weight_f32(block_ctx *c, sqz_role r, float **out) {
    if (!c->w[r]) {
        sqz_tensor *t = sqz_model_get(c->m, r, c->layer, SQZ_PARAM_WEIGHT);
        c->w[r] = sqz__malloc((size_t)sqz_tensor_nelements(t) * sizeof(float));
        if (!c->w[r]) return SQZ_ERR_NOMEM;
        if (t->qp || t->ndim != 2) SQZ_TRY(sqz_tensor_to_f32(t, c->w[r]));
        else if (sqz__rows_to_f32(t->dtype, t->data, t->nbytes, t->shape[0], sqz_tensor_row_len(t), c->w[r],
                                  c->o->threads) != SQZ_OK) /* on every core; the serial path names a problem */
            SQZ_TRY(sqz_tensor_to_f32(t, c->w[r]));
    }
    *out = c->w[r];
    return SQZ_OK;
}

static bool all_ones(const float *s, int64_t n) {
    for (int64_t j = 0; j < n; j++)
        if (s[j] != 1.0f) return false;
    return true;
}

/* Divides a 1-D f32 copy of tensor t by s and writes it back. */
static sqz_status fold_vector(sqz_model *m, sqz_tensor *t, const float *s, int64_t n) {
    if (!t) return SQZ_OK;
    SQZ_RETURN_IF(sqz_tensor_nelements(t) != n, SQZ_ERR_SHAPE, "tensor '%s': %lld values, smoothing has %lld",
                  t->name, (long long)sqz_tensor_nelements(t), (long long)n);
    float *v = sqz__malloc((size_t)n * sizeof(float));
    if (!v) return SQZ_ERR_NOMEM;
    sqz_status st = sqz_tensor_to_f32(t, v);
    if (st == SQZ_OK) {
        for (int64_t j = 0; j < n; j++) v[j] /= s[j];
        st = sqz__tensor_set_f32(m, t, v);
    }
    free(v);
    return st;
}

/* Whether t already holds the GGUF type it is to be quantized to, its values untouched (a pass
 * that changes a tensor stores f32): its bytes are then the exact answer, and re-rounding them
 * would only move the values (by 0.03-0.36% of a matrix's norm on Qwen2.5-Coder-0.5B's Q4_K_M).
 * Not for a smoothing method: its scales change every member of the group. */
static bool same_type(const sqz_compress_spec *sp, const sqz_qtarget *target, const sqz_tensor *t) {
    return !sp->method->smooths && sqz_qformat_is_gguf(target->fmt) && !t->qp &&
           sqz_qformat_dtype(target->fmt) == t->dtype;
}





/* One group of linear layers sharing an input (q/k/v, gate/up, ...), on its way through
 * compress_group: its members, what each becomes, and the smoothing vector. */
typedef struct group_work {
    sqz_tensor *t[3];
    sqz_layer_report rows[3];
    sqz_qlinear lin[3];
    sqz_qtarget tgt[3]; /* each quantized member's target: sp->q.target, or the mix's type for it */
    int qidx[3], n_q;   /* the quantized members' indices in g */
    int64_t n_in;
    const sqz_calib_input *in; /* the group's input statistics (NULL: none) */
    const sqz_calib_input *own[3];
    bool shared, aq, no_fold, smoothed, folded;
    float *smooth;
    sqz_qmatrix out[3];
    const sqz_qmethod *used[3];
    sqz__sample_products known[3]; /* a member's products on in's rows, when formed before validation */
} group_work;

/* Which members are quantized (lin, tgt, qidx) and why the others are not (their report rows). */
static sqz_status select_members(block_ctx *c, const sqz_linear_group *g, group_work *w) {
    sqz_model *m = c->m;
    const sqz_compress_opts *o = c->o;
    const sqz_compress_spec *sp = &o->spec;
    for (int i = 0; i < g->n; i++) {
        sqz_tensor *ti = w->t[i] = sqz_model_get(m, g->roles[i], c->layer, SQZ_PARAM_WEIGHT);
        if (!ti) continue;
        sqz_layer_report *row = &w->rows[i];
        sqz__report_row_init(row, ti);
        w->n_in = ti->shape[1];
        const char *why = NULL;
        bool policy_refused = false, mix_f16 = false, copy = false;
        sqz_qtarget target = sp->q.target;
        if (sp->mix) { /* the plan's type (auto:bpw=), or llama.cpp's type in the mix (quant/mix.c) */
            sqz_dtype d = sqz__qplan_type(sp->plan, ti), want = SQZ_DTYPE_COUNT;
            if (d == SQZ_DTYPE_COUNT) SQZ_TRY(sqz__mix_type(sp, o->overrides, m, ti, &d, &want));
            if (want != SQZ_DTYPE_COUNT && want != d) /* the width fallback took another type */
                snprintf(row->fallback_from, sizeof row->fallback_from, "%s", sqz_dtype_name(want));
            if (!sqz_qformat_from_dtype(d, &target.fmt)) mix_f16 = true;
            else (void)sqz_qtarget_check(&target);
        }
        if (sqz_keep_float_match(c->keep, ti)) why = "kept float (--keep-float)";
        else if (mix_f16) why = "no block of the mix's type or its fallback fits: f16", policy_refused = true;
        else if (!sqz_quant_policy_wants(ti, &target, &o->policy, &why)) policy_refused = true;
        else if (ti->qp) why = "already quantized by sqz";
        else if ((copy = same_type(sp, &target, ti))) why = "the source's own type: its bytes copied, not re-rounded";
        if (why) {
            snprintf(row->why, sizeof row->why, "%s", why);
            snprintf(row->method, sizeof row->method, "%s", copy ? "copy" : "float");
            sqz_dtype kept = ti->dtype;
            if (policy_refused && (mix_f16 || f16_fallback(ti, o, &sp->q.target))) {
                c->to_f16[g->roles[i]] = true;
                kept = SQZ_DTYPE_F16;
                snprintf(row->why, sizeof row->why, "%lld columns, not a multiple of %d: f16",
                         (long long)(w->n_in % 1000000), mix_f16 ? 32 : (int)(sp->q.target.group % 10000));
            }
            snprintf(row->format, sizeof row->format, "%s", sqz_dtype_name(kept));
            const sqz_dtype_traits *tr = sqz_dtype_info(kept);
            row->bits_per_weight = 8.0 * (double)tr->type_size / (double)tr->block_size;
            continue;
        }
        float *wf = NULL;
        SQZ_TRY(weight_f32(c, g->roles[i], &wf));
        w->lin[w->n_q] = (sqz_qlinear){wf, ti->shape[0], ti->name,
                                       g->roles[i] == SQZ_ROLE_ATTN_Q || g->roles[i] == SQZ_ROLE_ATTN_K};
        w->tgt[w->n_q] = target;
        w->qidx[w->n_q++] = i;
    }
    return SQZ_OK;
}

/* The method on the quantized members: all at once where they share their statistics (and no mix
 * gives each its own type), else one at a time, each judged GPTQ-or-imatrix under a mix. */
static sqz_status quantize_members(block_ctx *c, const sqz_linear_group *g, const sqz_calib_block *stats,
                                   group_work *w) {
    const sqz_compress_spec *sp = &c->o->spec;
    const int64_t n_in = w->n_in;
    sqz_qstats qs = w->in ? w->in->st : (sqz_qstats){.n_in = n_in};
    SQZ_RETURN_IF(qs.n_in != n_in, SQZ_ERR_SHAPE, "block %d: statistics of %lld channels for %s (%lld)",
                  (int)c->layer, (long long)qs.n_in, w->t[w->qidx[0]]->name, (long long)n_in);
    sqz_quant_opts qo = sp->q;
    qo.backend = c->o->backend; /* --device: GPTQ's factor and updates */
    qo.threads = c->o->threads;
    /* whether GPTQ runs GPTAQ here (by default only where the statistics carry dXX^T) */
    w->aq = qo.gptaq && (!qo.gptaq_optional || qs.dxxt);
    const bool gguf = sqz_qformat_is_gguf(qo.target.fmt);
    w->no_fold = g->fold == SQZ_FOLD_NONE ||
                 (g->fold == SQZ_FOLD_LINEAR && !sqz_model_get(c->m, g->fold_role, c->layer, SQZ_PARAM_WEIGHT));
    if (sp->method->smooths && w->no_fold && gguf) qo.awq_grid = 1; /* alpha 0 only: s = 1 */
    w->smooth = sqz__malloc((size_t)n_in * sizeof(float));
    if (!w->smooth) return SQZ_ERR_NOMEM;
    for (int k = 0; k < 3; k++) w->used[k] = sp->method;
    /* each member's own statistics: an importance matrix of llama-imatrix names every layer, and
     * members whose values differ do not share an input there (calib/imatrix_read.c) */
    w->shared = true;
    for (int k = 0; k < 3; k++) w->own[k] = w->in;
    for (int k = 0; stats && k < w->n_q; k++) {
        w->own[k] = sqz_calib_block_input(stats, g->roles[w->qidx[k]]);
        w->shared = w->shared && w->own[k] == w->in;
    }
    const bool together = !sp->mix && (w->shared || sp->method->smooths);
    sqz_status st = SQZ_OK;
    if (together) st = sp->method->run(w->lin, w->n_q, &qs, &qo, w->out, w->smooth);
    /* members of one input quantized one at a time: GPTQ factors its Hessian once for them */
    qo.factors = w->n_q > 1 && w->shared ? sqz_gptq_factors_new() : NULL;
    for (int k = 0; !together && k < w->n_q && st == SQZ_OK; k++) {
        qo.target = sp->mix ? w->tgt[k] : sp->q.target; /* one type per layer; no smoothing */
        /* a type the method does not produce is rounded as llama.cpp does it (Q8_0: no imatrix) */
        if (!(sp->method->formats & (1u << qo.target.fmt))) w->used[k] = sqz_qmethod_find("rtn");
        const sqz_qstats qk = w->own[k] ? w->own[k]->st : (sqz_qstats){.n_in = n_in};
        st = qk.n_in == n_in ? w->used[k]->run(&w->lin[k], 1, &qk, &qo, &w->out[k], w->smooth)
                             : SQZ_ERROR(SQZ_ERR_SHAPE, "block %d: statistics of %lld channels for %s (%lld)",
                                         (int)c->layer, (long long)qk.n_in, w->lin[k].name, (long long)n_in);
        if (st == SQZ_OK && sp->mix)
            st = sqz__judge_gptq_or_imatrix(c->o->backend, &w->lin[k], w->own[k] ? &w->own[k]->st : NULL,
                                            w->own[k] ? w->own[k]->x : NULL, &qo, &w->out[k], &w->used[k],
                                            &w->known[k], &w->rows[w->qidx[k]].heldout_gptq,
                                            &w->rows[w->qidx[k]].heldout_imatrix);
        if (w->own[k] != w->in) sqz__sample_products_free(&w->known[k]); /* other rows than the validation's */
    }
    sqz_gptq_factors_free(qo.factors);
    return st;
}

/* A smoothing vector s that is not all ones: kept as the layers' in_scale where nothing can take
 * it, else folded into the norm or linear layer before them, and into the members kept float. */
static sqz_status apply_smoothing(block_ctx *c, const sqz_linear_group *g, group_work *w) {
    sqz_model *m = c->m;
    const int64_t n_in = w->n_in;
    const float *smooth = w->smooth;
    sqz_status st = SQZ_OK;
    w->smoothed = c->o->spec.method->smooths && !all_ones(smooth, n_in);
    if (w->smoothed && w->no_fold) { /* keep s as the layers' in_scale */
        for (int k = 0; k < w->n_q && st == SQZ_OK; k++) st = sqz_qmatrix_set_in_scale(&w->out[k], smooth);
    } else if (w->smoothed && g->fold == SQZ_FOLD_NORM) {
        w->folded = true;
        sqz_tensor *nw = sqz_model_get(m, g->fold_role, c->layer, SQZ_PARAM_WEIGHT);
        sqz_tensor *nb = sqz_model_get(m, g->fold_role, c->layer, SQZ_PARAM_BIAS);
        st = fold_vector(m, nw, smooth, n_in);
        if (st == SQZ_OK) st = fold_vector(m, nb, smooth, n_in);
    } else if (w->smoothed && g->fold == SQZ_FOLD_LINEAR) {
        w->folded = true;
        float *wp = NULL;
        sqz_tensor *tp = sqz_model_get(m, g->fold_role, c->layer, SQZ_PARAM_WEIGHT);
        st = tp->shape[0] == n_in ? weight_f32(c, g->fold_role, &wp)
                                  : SQZ_ERROR(SQZ_ERR_SHAPE, "block %d: %s has %lld rows, %s reads %lld",
                                              (int)c->layer, tp->name, (long long)tp->shape[0],
                                              w->t[w->qidx[0]]->name, (long long)n_in);
        if (st == SQZ_OK) {
            sqz_fold_smooth_into_linear(wp, NULL, tp->shape[0], tp->shape[1], smooth);
            c->dirty[g->fold_role] = true;
            st = fold_vector(m, sqz_model_get(m, g->fold_role, c->layer, SQZ_PARAM_BIAS), smooth, n_in);
        }
    }
    /* members kept float read x / s too: W := W diag(s) */
    for (int i = 0; w->folded && st == SQZ_OK && i < g->n; i++) {
        bool q = false;
        for (int k = 0; k < w->n_q; k++) q = q || w->qidx[k] == i;
        if (!w->t[i] || q) continue;
        float *wf = NULL;
        st = weight_f32(c, g->roles[i], &wf);
        if (st == SQZ_OK) {
            sqz_scale_columns(wf, w->t[i]->shape[0], n_in, smooth);
            c->dirty[g->roles[i]] = true;
        }
    }
    return st;
}

/* A mixture's block: the tokens each expert saw (the stacked experts' first input with counts). */
static sqz_status expert_tokens(const sqz_calib_block *stats, sqz_block_report *b) {
    for (int r = 0; stats && r < SQZ_ROLE_COUNT; r++) {
        const sqz_calib_input *in = sqz_calib_block_input(stats, (sqz_role)r);
        if (!in || in->n_mat < 2 || !in->mat_tokens) continue;
        if (!(b->expert_tokens = sqz__malloc((size_t)in->n_mat * sizeof(float)))) return SQZ_ERR_NOMEM;
        memcpy(b->expert_tokens, in->mat_tokens, (size_t)in->n_mat * sizeof(float));
        b->n_expert = in->n_mat;
        return SQZ_OK;
    }
    return SQZ_OK;
}

/* Each quantized member's report row, and its validation on the sample rows. */
static sqz_status validate_members(block_ctx *c, group_work *w) {
    const sqz_calib_input *in = w->in;
    const int64_t n_in = w->n_in, n_x = in && in->x ? in->st.n_x : 0;
    sqz_status st = SQZ_OK;
    float *xs = NULL;
    if (n_x && w->folded) {
        xs = sqz__malloc((size_t)n_x * (size_t)n_in * sizeof(float));
        if (!xs) return SQZ_ERR_NOMEM;
        for (int64_t r = 0; r < n_x; r++)
            for (int64_t j = 0; j < n_in; j++) xs[r * n_in + j] = in->x[r * n_in + j] / w->smooth[j];
    }
    for (int k = 0; k < w->n_q && st == SQZ_OK; k++) {
        sqz_layer_report *r = &w->rows[w->qidx[k]];
        r->quantized = true;
        sqz__report_row_method(r, w->used[k], w->aq && w->used[k]->hessian ? "+gptaq" : "");
        snprintf(r->format, sizeof r->format, "%s", sqz_qformat_name(w->out[k].target.fmt));
        r->bits_per_weight = sqz_qmatrix_bits_per_weight(&w->out[k]);
        r->seconds = w->out[k].seconds;
        r->alpha = w->out[k].alpha;
        r->act_scale = w->out[k].qp.act_scale;
        sqz__layer_check chk = {.weight_err = NAN, .out_err = NAN};
        st = sqz__judge_validate(c->o->backend, &w->out[k], w->lin[k].w, n_x ? in->x : NULL,
                                 xs ? xs : (n_x ? in->x : NULL), n_x, w->smoothed ? w->smooth : NULL,
                                 xs ? NULL : &w->known[k], c->o->threads, &chk);
        r->weight_err = chk.weight_err;
        r->out_err = chk.out_err;
        snprintf(r->validated_by, sizeof r->validated_by, "%s", chk.by);
    }
    free(xs);
    return st;
}

static sqz_status compress_group(block_ctx *c, const sqz_linear_group *g, const sqz_calib_block *stats,
                                 sqz_compress_report *rep, double *t_quant, double *t_valid) {
    group_work w;
    memset(&w, 0, sizeof w);
    SQZ_TRY(select_members(c, g, &w));
    w.in = stats ? sqz_calib_block_input(stats, g->roles[0]) : NULL;
    sqz_status st = SQZ_OK;
    if (w.n_q > 0) {
        const double t0 = sqz_now_seconds();
        st = quantize_members(c, g, stats, &w);
        *t_quant += sqz_now_seconds() - t0;
        if (st != SQZ_OK && w.smooth) sqz__error_prefix("block %d", (int)c->layer);
        if (st == SQZ_OK) st = apply_smoothing(c, g, &w);
        const double t1 = sqz_now_seconds();
        if (st == SQZ_OK) st = validate_members(c, &w);
        for (int k = 0; k < 3; k++) sqz__sample_products_free(&w.known[k]);
        *t_valid += sqz_now_seconds() - t1;
        for (int k = 0; k < w.n_q && st == SQZ_OK; k++) {
            sqz_tensor *tk = w.t[w.qidx[k]];
            const void *old = tk->data;
            const size_t old_n = tk->nbytes;
            const bool borrowed = !tk->owned;
            st = sqz_qmatrix_attach(c->m, tk, &w.out[k]);
            if (st == SQZ_OK && borrowed) sqz__release_pages(old, old_n);
            c->quantized[g->roles[w.qidx[k]]] = true;
            c->dirty[g->roles[w.qidx[k]]] = false;
        }
    }
    for (int k = 0; k < w.n_q; k++) sqz_qmatrix_free(&w.out[k]);
    free(w.smooth);
    for (int i = 0; i < g->n && st == SQZ_OK; i++)
        if (w.t[i]) st = sqz__report_add(rep, &w.rows[i]);
    return st;
}

sqz_status sqz_compress_block(sqz_model *m, int32_t layer, const sqz_calib_block *stats, const sqz_compress_opts *o,
                              sqz_compress_report *rep) {
    sqz_keep_float keep;
    SQZ_TRY(sqz_keep_float_parse(o->keep_float, NULL, &keep));
    return sqz__compress_block(m, layer, stats, o, &keep, rep);
}

sqz_status sqz__compress_block(sqz_model *m, int32_t layer, const sqz_calib_block *stats, const sqz_compress_opts *o,
                               const sqz_keep_float *keep, sqz_compress_report *rep) {
    SQZ_RETURN_IF(layer < 0 || layer >= m->hp.n_layers, SQZ_ERR_INVALID_ARG, "compress: block %d of %lld",
                  (int)layer, (long long)m->hp.n_layers);
    SQZ_RETURN_IF(!o->spec.method, SQZ_ERR_INVALID_ARG, "compress: no SPEC");
    const double t0 = sqz_now_seconds();
    block_ctx c;
    memset(&c, 0, sizeof c);
    c.m = m;
    c.layer = layer;
    c.o = o;
    c.keep = keep;
    sqz_linear_group g[SQZ_LINEAR_GROUPS_MAX];
    const int ng = sqz_family_linear_groups(m, layer, g);
    double tq = 0, tv = 0;
    sqz_status st = SQZ_OK;
    /* a partitioned solve: each input's owner quantizes its groups (all of them, before any
     * exchange: no rank waits for another's solve), then each group's result goes to every rank,
     * its report rows in group order */
    int owner[SQZ_LINEAR_GROUPS_MAX];
    sqz_compress_report mine[SQZ_LINEAR_GROUPS_MAX];
    memset(mine, 0, sizeof mine);
    for (int i = 0; i < ng && st == SQZ_OK; i++) {
        const sqz_calib_input *in = stats && stats->partitioned ? sqz_calib_block_input(stats, g[i].roles[0]) : NULL;
        owner[i] = in ? stats->owner[in - stats->in] : -1;
        if (owner[i] < 0) st = compress_group(&c, &g[i], stats, rep, &tq, &tv);
        else if (owner[i] == sqz_dist_rank()) st = compress_group(&c, &g[i], stats, &mine[i], &tq, &tv);
        if (st == SQZ_ERR_NOMEM) /* what it was allocating for: the layers of this group */
            sqz__error_prefix("block %d, quantizing %s%s%s%s%s", (int)layer, sqz_role_name(g[i].roles[0]),
                              g[i].n > 1 ? "|" : "", g[i].n > 1 ? sqz_role_name(g[i].roles[1]) : "",
                              g[i].n > 2 ? "|" : "", g[i].n > 2 ? sqz_role_name(g[i].roles[2]) : "");
    }
    for (int i = 0; i < ng && st == SQZ_OK; i++)
        if (owner[i] >= 0) st = sqz__share_group(m, layer, &g[i], owner[i], c.quantized, c.to_f16, &mine[i], rep);
    for (int i = 0; i < ng; i++) free(mine[i].layers);
    if (st == SQZ_OK) st = sqz__compress_experts(m, layer, stats, o, keep, rep);
    /* weights a fold changed but that stay float */
    for (int r = 0; r < SQZ_ROLE_COUNT && st == SQZ_OK; r++)
        if (c.dirty[r]) st = sqz__tensor_set_f32(m, sqz_model_get(m, (sqz_role)r, layer, SQZ_PARAM_WEIGHT), c.w[r]);
    for (int r = 0; r < SQZ_ROLE_COUNT && st == SQZ_OK; r++)
        if (c.to_f16[r]) st = store_f16(&c, (sqz_role)r);
    for (int r = 0; r < SQZ_ROLE_COUNT; r++) free(c.w[r]);
    rep->seconds_quant += tq;
    rep->seconds_validate += tv;
    if (st == SQZ_OK) {
        if (rep->n_blocks % 16 == 0) {
            sqz_block_report *nb = sqz__realloc(rep->blocks, (size_t)(rep->n_blocks + 16) * sizeof *nb);
            if (!nb) return SQZ_ERR_NOMEM;
            rep->blocks = nb;
        }
        rep->blocks[rep->n_blocks] = (sqz_block_report){layer, stats ? stats->cos_mean : NAN,
                                                        stats ? stats->cos_min : NAN, sqz_now_seconds() - t0, 0, NULL};
        st = expert_tokens(stats, &rep->blocks[rep->n_blocks]);
        rep->n_blocks++;
    }
    return st;
}

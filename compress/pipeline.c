/*
 * compress/pipeline.c - running a recipe: whole-model steps as barriers, consecutive block
 * stages fused into one sequential calibration loop (each block calibrated on the output of
 * the already compressed blocks), or fed from a statistics file, or run without statistics;
 * the totals of the report. sqz_compress_model is the one-stage recipe of a quantization SPEC.
 */
#include <stdlib.h>
#include <string.h>

#include "compress/compress_internal.h"
#include "sqz/prune.h"

sqz_compress_opts sqz_compress_default_opts(void) {
    sqz_compress_opts o;
    memset(&o, 0, sizeof o);
    (void)sqz_compress_spec_parse("int8", &o.spec);
    o.sample_rows = 512;
    return o;
}

void sqz_compress_report_free(sqz_compress_report *r) {
    if (!r) return;
    free(r->layers);
    for (int64_t i = 0; r->blocks && i < r->n_blocks; i++) free(r->blocks[i].expert_tokens);
    free(r->blocks);
    free(r->stages);
    sqz_layerdrop_result_free(r->layerdrop);
    free(r->layerdrop);
    sqz_prune_record_free(r->prune);
    free(r->prune);
    memset(r, 0, sizeof *r);
}

/* The names of the statistics in bits, into buf (cap 128). */
static const char *stat_names(unsigned bits, char *buf) {
    static const char *names[] = {"Hessian", "E[x^2]", "absmax", "E|x|", "sample rows", "histogram", "E[x]",
                                  "GPTAQ's dXX^T (the float model's stream: live calibration only)"};
    const size_t cap = 128;
    buf[0] = 0;
    for (int i = 0; i < 8; i++) {
        if (!(bits & (1u << i))) continue;
        if (buf[0]) strncat(buf, ", ", cap - strlen(buf) - 1);
        strncat(buf, names[i], cap - strlen(buf) - 1);
    }
    return buf;
}

static void totals(sqz_model *m, sqz_compress_report *rep) {
    int64_t after = sqz_model_data_bytes(m);
    double bits = 0;
    int64_t params_q = 0;
    for (int64_t i = 0; i < rep->n_layers; i++) {
        const sqz_layer_report *r = &rep->layers[i];
        if (!r->quantized) continue;
        const int64_t n = r->n_out * r->n_in;
        const int64_t idx = sqz_model_find(m, r->tensor);
        if (idx >= 0) after -= (int64_t)m->tensors[idx].nbytes;
        after += (int64_t)ceil(r->bits_per_weight * (double)n / 8.0);
        bits += r->bits_per_weight * (double)n;
        params_q += n;
    }
    rep->bytes_after = after;
    rep->params_quantized = params_q;
    rep->bits_quantized = bits;
    rep->bpw_quantized = params_q ? bits / (double)params_q : 0.0;
    rep->params_after = sqz_model_param_count(m);
    rep->bpw_model = rep->params_after ? 8.0 * (double)after / (double)rep->params_after : 0.0;
    rep->n_layers_after = m->hp.n_layers;
}

/* ---- one loop over the blocks for stages [first, last) ---------------------------------- */

/* One run's per-stage state and links, and --keep-float parsed. */
typedef struct run_state {
    void **state;          /* [stage]: pass->state_size bytes, or NULL */
    sqz_stage_link *links; /* [stage] */
    sqz_keep_float keep;
} run_state;

typedef struct loop {
    sqz_model *m;
    const sqz_recipe *r;
    const run_state *run;
    int first, last;
    const sqz_compress_opts *o;
    sqz_compress_report *rep;
    const sqz_calib_windows *w;
    sqz_stage_report *stage_rep; /* rows of stages [first, last) */
    const sqz_session_opts *session_opts;
    bool head_done; /* the stages' run_head ran */
} loop;

/* Block `layer` through every stage of the loop; layer -1: the stages' run_head, once, after the
 * last block (stats: the classifier's input, or NULL). */
static sqz_status loop_block(loop *L, int32_t layer, const sqz_calib_block *stats) {
    if (layer < 0) L->head_done = true;
    for (int k = L->first; k < L->last; k++) {
        const sqz_stage *s = &L->r->stages[k];
        if (L->run->links[k].absorbed) continue; /* another stage does its work (sqz_pass.link) */
        if (layer < 0 && !s->pass->run_head) continue;
        sqz_pass_ctx c = {L->m,           L->o,           L->rep, L->w, &L->stage_rep[k - L->first], L->session_opts,
                          L->run->state[k], L->run->links[k].joint, &L->run->keep, false};
        const double t0 = sqz_now_seconds();
        const sqz_status st =
            layer < 0 ? s->pass->run_head(&c, stats, s->args) : s->pass->run_block(&c, layer, stats, s->args);
        if (st == SQZ_ERR_NOMEM) sqz__error_prefix("--%s '%s'", s->pass->name, s->spec); /* which stage ran out */
        if (st != SQZ_OK) return st;
        c.stage->seconds += sqz_now_seconds() - t0;
    }
    return SQZ_OK;
}

static sqz_status on_block(void *user, sqz_session *s, int32_t layer, const sqz_calib_block *stats) {
    if (layer >= 0) sqz_session_invalidate(s, layer); /* its float copies of the old weights: not needed any more */
    return loop_block(user, layer, stats);
}

/* Whether a stage of the loop has a run_head (then the calibration also observes the classifier). */
static bool loop_heads(const loop *L) {
    for (int k = L->first; k < L->last; k++)
        if (L->r->stages[k].pass->run_head && !L->run->links[k].absorbed) return true;
    return false;
}

static unsigned loop_needs(const loop *L, unsigned *required) {
    unsigned need = 0;
    *required = 0;
    for (int k = L->first; k < L->last; k++) {
        const sqz_stage *s = &L->r->stages[k];
        unsigned req = 0;
        if (s->pass->needs) need |= s->pass->needs(s->args, &req);
        *required |= req;
    }
    return need;
}

/* Whether every stage of the loop can solve each linear input's layers on the input's owner rank
 * alone (compress/pass_quant_share.c): its row says so (quantization that folds nothing into other
 * layers) and no other stage does its work. */
static bool loop_partitions(const loop *L) {
    for (int k = L->first; k < L->last; k++) {
        const sqz_stage *s = &L->r->stages[k];
        if (!s->pass->partitions || !s->pass->partitions(s->args) || L->run->links[k].absorbed) return false;
    }
    return true;
}

static sqz_status loop_calibrated(loop *L, const sqz_compress_env *env, bool fresh) {
    unsigned required;
    sqz_calib_run_opts ro;
    memset(&ro, 0, sizeof ro);
    ro.observe.needs = loop_needs(L, &required);
    ro.observe.sample_rows = L->o->sample_rows;
    ro.observe.block_io = true;
    ro.observe.backend = env->session_opts.backend; /* --device: the Hessian sums */
    ro.recompute = true;
    ro.on_block = on_block;
    ro.user = L;
    ro.progress = L->o->progress;
    ro.progress_user = L->o->progress_user;
    ro.partition = L->o->stats_partition;
    ro.partitioned_solve = loop_partitions(L);
    ro.head = loop_heads(L);
    sqz_calib_run_info info = {0};
    ro.info = &info;
    sqz_session *s = fresh ? NULL : env->session, *own = NULL;
    if (!s) {
        sqz_session_opts so = env->session_opts;
        so.max_tokens = L->w->ctx;
        SQZ_TRY(sqz_session_new(L->m, &so, &own));
        s = own;
    }
    SQZ_RETURN_IF(sqz_session_model(s) != L->m, SQZ_ERR_INVALID_ARG, "compress: the session runs another model");
    L->rep->n_windows = L->w->n_windows;
    L->rep->ctx = L->w->ctx;
    L->rep->activation_bytes = L->w->n_windows * L->w->ctx * L->m->hp.d_model * (int64_t)sizeof(float);
    const double t0 = sqz_now_seconds(), q0 = L->rep->seconds_quant + L->rep->seconds_validate;
    sqz_status st = sqz_calib_run(s, L->w, &ro);
    if (st == SQZ_OK && !L->head_done) st = loop_block(L, -1, NULL);
    L->rep->ranks = info.ranks;
    if (info.stats_peak_bytes > L->rep->stats_peak_bytes) L->rep->stats_peak_bytes = info.stats_peak_bytes;
    if (info.stats_peak_max_bytes > L->rep->stats_peak_max_bytes)
        L->rep->stats_peak_max_bytes = info.stats_peak_max_bytes;
    L->rep->bytes_sent = info.bytes_sent;
    L->rep->seconds_forward += sqz_now_seconds() - t0 - (L->rep->seconds_quant + L->rep->seconds_validate - q0);
    sqz_session_free(own);
    return st;
}

static sqz_status loop_from_file(loop *L, const sqz_calib_stats *stats, bool reshaped) {
    unsigned required;
    const unsigned need = loop_needs(L, &required);
    char b1[128], b2[128];
    SQZ_RETURN_IF(reshaped && need, SQZ_ERR_INVALID_ARG,
                  "compress: a statistics file describes the model before its structure changed: stage '%s' needs "
                  "calibration after it (use --calib FILE)", L->r->stages[L->first].pass->name);
    SQZ_TRY(sqz_calib_stats_check_model(stats, L->m, "statistics"));
    SQZ_RETURN_IF(required & ~stats->have, SQZ_ERR_INVALID_ARG,
                  "compress: %s needs %s, which the statistics file lacks (it has: %s); run 'sqz compress' with "
                  "--calib, or 'sqz calibrate' with the statistics it needs",
                  L->r->stages[L->first].spec, stat_names(required & ~stats->have, b1), stat_names(stats->have, b2));
    L->rep->n_windows = stats->n_windows;
    L->rep->ctx = stats->ctx;
    sqz_status st = SQZ_OK;
    for (int32_t l = 0; l < L->m->hp.n_layers && st == SQZ_OK; l++) {
        const sqz_calib_block *b = sqz_calib_stats_block(stats, l);
        if (!b && required) st = SQZ_ERROR(SQZ_ERR_INVALID_ARG, "compress: the statistics file has no block %d", (int)l);
        if (st == SQZ_OK) st = loop_block(L, l, b);
        if (L->o->progress) L->o->progress(L->o->progress_user, l + 1, L->m->hp.n_layers);
    }
    /* the classifier's input where the file has it (an importance matrix of llama-imatrix
     * --process-output; sqz calibrate's files hold the blocks only) */
    return st == SQZ_OK ? loop_block(L, -1, sqz_calib_stats_block(stats, -1)) : st;
}

static sqz_status loop_plain(loop *L) {
    unsigned required;
    (void)loop_needs(L, &required);
    char b1[128];
    SQZ_RETURN_IF(required, SQZ_ERR_INVALID_ARG,
                  "compress: %s needs calibration statistics (%s): give --calib FILE or --stats FILE",
                  L->r->stages[L->first].spec, stat_names(required, b1));
    sqz_status st = SQZ_OK;
    for (int32_t l = 0; l < L->m->hp.n_layers && st == SQZ_OK; l++) {
        st = loop_block(L, l, NULL);
        if (L->o->progress) L->o->progress(L->o->progress_user, l + 1, L->m->hp.n_layers);
    }
    return st == SQZ_OK ? loop_block(L, -1, NULL) : st;
}

/* ---- the recipe -------------------------------------------------------------------------- */

static sqz_status stage_rows(const sqz_recipe *r, sqz_compress_report *rep) {
    rep->stages = sqz__calloc((size_t)(r->n ? r->n : 1), sizeof *rep->stages);
    if (!rep->stages) return SQZ_ERR_NOMEM;
    rep->n_stages = r->n;
    size_t k = 0;
    for (int i = 0; i < r->n; i++) {
        snprintf(rep->stages[i].pass, sizeof rep->stages[i].pass, "%s", r->stages[i].pass->name);
        snprintf(rep->stages[i].spec, sizeof rep->stages[i].spec, "%s", r->stages[i].spec);
        int w = snprintf(rep->recipe + k, sizeof rep->recipe - k, "%s%s %s", i ? ", " : "", r->stages[i].pass->name,
                         r->stages[i].spec);
        if (w > 0 && (size_t)w < sizeof rep->recipe - k) k += (size_t)w;
        const sqz_compress_spec *qs = sqz_stage_quant_spec(&r->stages[i]);
        if (qs && !rep->spec[0]) snprintf(rep->spec, sizeof rep->spec, "%s", qs->text);
        if (qs) { /* what the report's words ask of a quant stage, without reading its SPEC again */
            rep->stages[i].quantizes = true;
            rep->stages[i].qtarget = qs->q.target;
            rep->stages[i].qmix = qs->mix != NULL;
        }
    }
    return SQZ_OK;
}

/* The run's states (zeroed), links and --keep-float against the model (the caller's parse, or
 * parsed here). */
static sqz_status run_open(run_state *rs, sqz_model *m, const sqz_recipe *r, const sqz_compress_opts *o) {
    memset(rs, 0, sizeof *rs);
    rs->state = sqz__calloc((size_t)r->n, sizeof *rs->state);
    rs->links = sqz__calloc((size_t)r->n, sizeof *rs->links);
    if (!rs->state || !rs->links) return SQZ_ERR_NOMEM;
    for (int k = 0; k < r->n; k++) {
        const size_t n = r->stages[k].pass->state_size;
        if (n && !(rs->state[k] = sqz__calloc(1, n))) return SQZ_ERR_NOMEM;
    }
    if (o->keep_parsed)
        rs->keep = *o->keep_parsed;
    else
        SQZ_TRY(sqz_keep_float_parse(o->keep_float, m, &rs->keep));
    return sqz__recipe_link(r, rs->links);
}

static void run_close(run_state *rs, const sqz_recipe *r) {
    for (int k = 0; rs->state && k < r->n; k++) {
        if (rs->state[k] && r->stages[k].pass->fini) r->stages[k].pass->fini(rs->state[k]);
        free(rs->state[k]);
    }
    free(rs->state);
    free(rs->links);
}

/* Stages i.. that share one block loop (sqz__stage_joins_previous). */
static int loop_end(const sqz_recipe *r, int i) {
    int j = i + 1;
    while (j < r->n && sqz__stage_joins_previous(r, j)) j++;
    return j;
}

static sqz_status run_stages(sqz_model *m, const sqz_recipe *r, const run_state *rs, const sqz_compress_env *env,
                             const sqz_compress_opts *o, sqz_compress_report *rep) {
    sqz_status st = SQZ_OK;
    bool reshaped = false;
    for (int i = 0; i < r->n && st == SQZ_OK;) {
        const sqz_stage *s = &r->stages[i];
        bool changed = false;
        if (sqz__stage_steps(s)) {
            sqz_pass_ctx c = {m, o, rep, env->windows, &rep->stages[i], &env->session_opts,
                              rs->state[i], rs->links[i].joint, &rs->keep, false};
            const double ts = sqz_now_seconds();
            st = s->pass->model_step(&c, s->args);
            rep->stages[i].seconds += sqz_now_seconds() - ts;
            if (st != SQZ_OK) break;
            changed = c.changed;
        }
        reshaped = reshaped || changed;
        if (!s->pass->run_block) {
            reshaped = reshaped || s->pass->reshapes;
            i++;
            continue;
        }
        const int j = loop_end(r, i);
        loop L = {m, r, rs, i, j, o, rep, env->windows, &rep->stages[i], &env->session_opts, false};
        /* a whole-model step that reshapes (adds tensors) leaves the live session stale */
        const bool fresh = reshaped || (sqz__stage_steps(s) && s->pass->reshapes);
        if (env->windows) st = loop_calibrated(&L, env, fresh);
        else if (env->stats) st = loop_from_file(&L, env->stats, reshaped);
        else st = loop_plain(&L);
        for (int k = i; k < j; k++) reshaped = reshaped || r->stages[k].pass->reshapes;
        i = j;
    }
    return st;
}

sqz_status sqz_compress_run(sqz_model *m, const sqz_recipe *r, const sqz_compress_env *env,
                            const sqz_compress_opts *o, sqz_compress_report *rep) {
    memset(rep, 0, sizeof *rep);
    SQZ_RETURN_IF(!m || !r || !env || !o || r->n < 1, SQZ_ERR_INVALID_ARG, "compress: no model or no stages");
    const double t0 = sqz_now_seconds();
    run_state rs;
    sqz_status st = run_open(&rs, m, r, o);
    if (st == SQZ_OK) st = stage_rows(r, rep);
    if (st == SQZ_OK) {
        rep->bytes_before = sqz_model_data_bytes(m);
        rep->params = sqz_model_param_count(m);
        rep->n_layers_before = m->hp.n_layers;
        if (env->windows) { /* also when only a whole-model step (layer removal) reads them */
            rep->n_windows = env->windows->n_windows;
            rep->ctx = env->windows->ctx;
        }
        st = run_stages(m, r, &rs, env, o, rep);
        totals(m, rep);
        rep->seconds_total = sqz_now_seconds() - t0;
    }
    run_close(&rs, r);
    return st;
}

sqz_status sqz_compress_model(sqz_model *m, sqz_session *s, const sqz_calib_windows *w, const sqz_calib_stats *stats,
                              const sqz_compress_opts *o, sqz_compress_report *rep) {
    memset(rep, 0, sizeof *rep);
    SQZ_RETURN_IF(!m || !o || !o->spec.method, SQZ_ERR_INVALID_ARG, "compress: no model or SPEC");
    SQZ_RETURN_IF(w && !s, SQZ_ERR_INVALID_ARG, "compress: calibration windows without a session");
    sqz_recipe r = {0};
    SQZ_TRY(sqz_recipe_add(&r, sqz__pass_quant.name, o->spec.text));
    sqz__quant_args *a = r.stages[0].args;
    a->spec = o->spec; /* exactly the caller's SPEC, also when built by hand */
    sqz_compress_env env = {.windows = s ? w : NULL, .session = s, .session_opts = sqz_session_default_opts(),
                            .stats = stats};
    sqz_status st = sqz_compress_run(m, &r, &env, o, rep);
    sqz_recipe_free(&r);
    return st;
}

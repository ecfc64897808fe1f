/*
 * compress/pipeline.c - compressing a whole model: sequentially on calibration windows
 * (each block calibrated on the output of the compressed blocks before it), from a
 * statistics file, or without statistics; totals of the report.
 */
#include <stdlib.h>
#include <string.h>

#include "compress/compress_internal.h"

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
    free(r->blocks);
    memset(r, 0, sizeof *r);
}

typedef struct run_ctx {
    sqz_model *m;
    const sqz_compress_opts *o;
    sqz_compress_report *rep;
} run_ctx;

static sqz_status on_block(void *user, sqz_session *s, int32_t layer, const sqz_calib_block *stats) {
    run_ctx *c = user;
    sqz_session_invalidate(s, layer); /* its float copies of the old weights: not needed any more */
    return sqz_compress_block(c->m, layer, stats, c->o, c->rep);
}

/* The names of the statistics in bits, into buf (cap 128). */
static const char *stat_names(unsigned bits, char *buf) {
    static const char *names[] = {"Hessian", "E[x^2]", "absmax", "E|x|", "sample rows", "histogram"};
    const size_t cap = 128;
    buf[0] = 0;
    for (int i = 0; i < 6; i++) {
        if (!(bits & (1u << i))) continue;
        if (buf[0]) strncat(buf, ", ", cap - strlen(buf) - 1);
        strncat(buf, names[i], cap - strlen(buf) - 1);
    }
    return buf;
}

/* Statistics without which the method cannot run (sample rows only for validation otherwise). */
static unsigned required_stats(const sqz_compress_spec *sp) {
    unsigned need = sqz_compress_needs(sp);
    if (!(sp->method->needs & SQZ_QSTAT_SAMPLE)) need &= ~(unsigned)SQZ_QSTAT_SAMPLE;
    need &= ~(unsigned)SQZ_QSTAT_ABSMEAN; /* AWQ falls back to the sample rows */
    return need;
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
    rep->bpw_model = rep->params ? 8.0 * (double)after / (double)rep->params : 0.0;
}

sqz_status sqz_compress_model(sqz_model *m, sqz_session *s, const sqz_calib_windows *w, const sqz_calib_stats *stats,
                              const sqz_compress_opts *o, sqz_compress_report *rep) {
    memset(rep, 0, sizeof *rep);
    SQZ_RETURN_IF(!m || !o || !o->spec.method, SQZ_ERR_INVALID_ARG, "compress: no model or SPEC");
    const double t0 = sqz__calib_now();
    const sqz_compress_spec *sp = &o->spec;
    snprintf(rep->spec, sizeof rep->spec, "%s", sp->text);
    rep->bytes_before = sqz_model_data_bytes(m);
    rep->params = sqz_model_param_count(m);
    const unsigned need = required_stats(sp);
    run_ctx c = {m, o, rep};
    sqz_status st = SQZ_OK;
    if (s && w) {
        SQZ_RETURN_IF(sqz_session_model(s) != m, SQZ_ERR_INVALID_ARG, "compress: the session runs another model");
        sqz_calib_run_opts ro;
        memset(&ro, 0, sizeof ro);
        ro.observe.needs = sqz_compress_needs(sp);
        ro.observe.sample_rows = o->sample_rows;
        ro.observe.block_io = true;
        ro.recompute = true;
        ro.on_block = on_block;
        ro.user = &c;
        ro.progress = o->progress;
        ro.progress_user = o->progress_user;
        rep->n_windows = w->n_windows;
        rep->ctx = w->ctx;
        rep->activation_bytes = w->n_windows * w->ctx * m->hp.d_model * (int64_t)sizeof(float);
        st = sqz_calib_run(s, w, &ro);
        rep->seconds_forward = sqz__calib_now() - t0 - rep->seconds_quant - rep->seconds_validate;
    } else if (stats) {
        SQZ_TRY(sqz_calib_stats_check_model(stats, m, "statistics"));
        char b1[128], b2[128];
        SQZ_RETURN_IF(need & ~stats->have, SQZ_ERR_INVALID_ARG,
                      "compress: %s needs %s, which the statistics file lacks (it has: %s); run 'sqz compress' with "
                      "--calib, or 'sqz calibrate' with the statistics it needs",
                      sp->text, stat_names(need & ~stats->have, b1), stat_names(stats->have, b2));
        rep->n_windows = stats->n_windows;
        rep->ctx = stats->ctx;
        for (int32_t l = 0; l < m->hp.n_layers && st == SQZ_OK; l++) {
            const sqz_calib_block *b = sqz_calib_stats_block(stats, l);
            if (!b && need) st = SQZ_ERROR(SQZ_ERR_INVALID_ARG, "compress: the statistics file has no block %d", (int)l);
            if (st == SQZ_OK) st = sqz_compress_block(m, l, b, o, rep);
            if (o->progress) o->progress(o->progress_user, l + 1, m->hp.n_layers);
        }
    } else {
        char b1[128];
        SQZ_RETURN_IF(need, SQZ_ERR_INVALID_ARG,
                      "compress: %s needs calibration statistics (%s): give --calib FILE or --stats FILE", sp->text,
                      stat_names(need, b1));
        for (int32_t l = 0; l < m->hp.n_layers && st == SQZ_OK; l++) {
            st = sqz_compress_block(m, l, NULL, o, rep);
            if (o->progress) o->progress(o->progress_user, l + 1, m->hp.n_layers);
        }
    }
    totals(m, rep);
    rep->seconds_total = sqz__calib_now() - t0;
    return st;
}

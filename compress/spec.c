/*
 * compress/spec.c - the SPEC grammar of `sqz compress --quant` (documented in sqz/calib.h and
 * docs/quantization.md): a format, then options in any order. Every error names the part.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "compress/compress_internal.h"

#define FMT_BIT(f) (1u << (unsigned)(f))

static bool parse_num(const char *s, double lo, double hi, double *v) {
    char *end;
    errno = 0;
    double x = strtod(s, &end);
    if (errno || end == s || *end || !(x >= lo && x <= hi)) return false;
    *v = x;
    return true;
}

static const char *format_list(unsigned formats) {
    static const char *names[SQZ_QFMT_COUNT] = {"int8/w8a8", "int4", "int4:asym", "q8_0", "q4_0", "q4_1"};
    static _Thread_local char buf[96];
    buf[0] = 0;
    for (int f = 0; f < SQZ_QFMT_COUNT; f++) {
        if (!(formats & FMT_BIT(f)) || (f == SQZ_QFMT_I4_ASYM && (formats & FMT_BIT(SQZ_QFMT_I4_SYM)))) continue;
        if (buf[0]) strncat(buf, ", ", sizeof buf - strlen(buf) - 1);
        strncat(buf, names[f], sizeof buf - strlen(buf) - 1);
    }
    return buf;
}

sqz_status sqz_compress_spec_parse(const char *spec, sqz_compress_spec *out) {
    memset(out, 0, sizeof *out);
    SQZ_RETURN_IF(!spec || !*spec, SQZ_ERR_INVALID_ARG, "SPEC is empty (e.g. int8, w8a8:smoothquant, int4:gptq:g128, "
                  "q4_0:awq)");
    SQZ_RETURN_IF(strlen(spec) >= sizeof out->text, SQZ_ERR_INVALID_ARG, "SPEC '%.40s...' is too long", spec);
    snprintf(out->text, sizeof out->text, "%s", spec);
    char buf[sizeof out->text];
    snprintf(buf, sizeof buf, "%s", spec);
    sqz_quant_opts q = sqz_quant_default_opts();
    bool w8a8 = false, is_int4 = false;
    char *save = NULL, *part = strtok_r(buf, ":", &save);
    SQZ_RETURN_IF(!part, SQZ_ERR_INVALID_ARG, "SPEC '%s': no format", spec);
    char fmt_name[16];
    snprintf(fmt_name, sizeof fmt_name, "%s", part);
    if (!strcmp(part, "int8")) q.target.fmt = SQZ_QFMT_I8;
    else if (!strcmp(part, "w8a8")) {
        q.target.fmt = SQZ_QFMT_I8;
        q.act_mode = SQZ_ACT_STATIC_TENSOR;
        w8a8 = true;
    } else if (!strcmp(part, "int4")) {
        q.target = (sqz_qtarget){SQZ_QFMT_I4_SYM, 128};
        is_int4 = true;
    } else if (!strcmp(part, "q8_0")) q.target.fmt = SQZ_QFMT_Q8_0;
    else if (!strcmp(part, "q4_0")) q.target.fmt = SQZ_QFMT_Q4_0;
    else if (!strcmp(part, "q4_1")) q.target.fmt = SQZ_QFMT_Q4_1;
    else
        return SQZ_ERROR(SQZ_ERR_INVALID_ARG, "SPEC '%s': unknown format '%s' (int8, w8a8, int4, q8_0, q4_0, q4_1)",
                         spec, part);
    const char *method = NULL, *act = NULL;
    int act_order = -1; /* -1: the default (on for gptq), 0 off, 1 on */
    int static_groups = -1; /* -1: the default (static: no g_idx), 0 dynamic, 1 static */
    bool has_damp = false, has_alpha = false, has_pct = false;
    bool has_group = false, has_sym = false;
    while ((part = strtok_r(NULL, ":", &save))) {
        double v;
        if (sqz_qmethod_find(part)) {
            SQZ_RETURN_IF(method, SQZ_ERR_INVALID_ARG, "SPEC '%s': two methods ('%s' and '%s')", spec, method, part);
            method = sqz_qmethod_find(part)->name;
        } else if (!strcmp(part, "minmax") || !strcmp(part, "percentile") || !strcmp(part, "entropy") ||
                   !strcmp(part, "dynamic")) {
            SQZ_RETURN_IF(!w8a8, SQZ_ERR_INVALID_ARG,
                          "SPEC '%s': '%s' calibrates activations, which only w8a8 quantizes", spec, part);
            SQZ_RETURN_IF(act, SQZ_ERR_INVALID_ARG, "SPEC '%s': two activation modes ('%s' and '%s')", spec, act, part);
            act = part;
            if (!strcmp(part, "dynamic")) q.act_mode = SQZ_ACT_DYNAMIC_TOKEN;
            else q.act_calib = !strcmp(part, "minmax") ? SQZ_ACT_CALIB_MINMAX
                             : !strcmp(part, "percentile") ? SQZ_ACT_CALIB_PERCENTILE : SQZ_ACT_CALIB_KL;
        } else if (part[0] == 'g' && part[1] >= '0' && part[1] <= '9') {
            SQZ_RETURN_IF(!is_int4, SQZ_ERR_INVALID_ARG,
                          "SPEC '%s': group size '%s' applies to int4 only (GGUF formats use blocks of 32)", spec,
                          part);
            SQZ_RETURN_IF(strcmp(part, "g32") && strcmp(part, "g64") && strcmp(part, "g128"), SQZ_ERR_INVALID_ARG,
                          "SPEC '%s': unknown part '%s' (group sizes: g32, g64, g128)", spec, part);
            SQZ_RETURN_IF(has_group, SQZ_ERR_INVALID_ARG, "SPEC '%s': two group sizes", spec);
            has_group = true;
            q.target.group = atoi(part + 1);
        } else if (!strcmp(part, "sym") || !strcmp(part, "asym")) {
            SQZ_RETURN_IF(!is_int4, SQZ_ERR_INVALID_ARG, "SPEC '%s': '%s' applies to int4 only", spec, part);
            SQZ_RETURN_IF(has_sym, SQZ_ERR_INVALID_ARG, "SPEC '%s': sym and asym both given", spec);
            has_sym = true;
            q.target.fmt = !strcmp(part, "asym") ? SQZ_QFMT_I4_ASYM : SQZ_QFMT_I4_SYM;
        } else if (!strcmp(part, "act-order") || !strcmp(part, "no-act-order")) {
            SQZ_RETURN_IF(act_order >= 0, SQZ_ERR_INVALID_ARG, "SPEC '%s': act-order given twice", spec);
            act_order = part[0] == 'a';
        }
        else if (!strcmp(part, "static-groups") || !strcmp(part, "dynamic-groups")) {
            SQZ_RETURN_IF(static_groups >= 0, SQZ_ERR_INVALID_ARG, "SPEC '%s': static-groups and dynamic-groups "
                          "exclude each other", spec);
            static_groups = part[0] == 's';
        }
        else if (!strncmp(part, "damp=", 5)) {
            SQZ_RETURN_IF(!parse_num(part + 5, 0.0, 10.0, &v) || v <= 0, SQZ_ERR_INVALID_ARG,
                          "SPEC '%s': bad '%s' (a relative damping in (0, 10], default 0.01)", spec, part);
            q.percdamp = v;
            has_damp = true;
        } else if (!strncmp(part, "alpha=", 6)) {
            SQZ_RETURN_IF(!parse_num(part + 6, 0.0, 1.0, &v), SQZ_ERR_INVALID_ARG,
                          "SPEC '%s': bad '%s' (alpha in [0, 1])", spec, part);
            q.sq_alpha = (float)v;
            has_alpha = true;
        } else if (!strncmp(part, "pct=", 4)) {
            SQZ_RETURN_IF(!parse_num(part + 4, 50.0, 100.0, &v), SQZ_ERR_INVALID_ARG,
                          "SPEC '%s': bad '%s' (a percentile in [50, 100])", spec, part);
            q.act_percentile = v;
            has_pct = true;
        } else {
            return SQZ_ERROR(SQZ_ERR_INVALID_ARG,
                             "SPEC '%s': unknown part '%s' (methods: rtn, imatrix, gptq, awq, smoothquant; w8a8: "
                             "minmax, percentile, entropy, dynamic; int4: g32, g64, g128, sym, asym; gptq: act-order, "
                             "no-act-order, static-groups, dynamic-groups, damp=X)",
                             spec, part);
        }
    }
    out->method = sqz_qmethod_find(method ? method : "rtn");
    SQZ_RETURN_IF(!out->method, SQZ_ERR_INVALID_ARG, "SPEC '%s': method '%s' is not built in", spec,
                  method ? method : "rtn");
    const char *mn = out->method->name;
    SQZ_RETURN_IF(!(out->method->formats & FMT_BIT(q.target.fmt)), SQZ_ERR_INVALID_ARG,
                  "SPEC '%s': method '%s' does not produce %s (it supports %s)", spec, mn, fmt_name,
                  format_list(out->method->formats));
    SQZ_RETURN_IF(!strcmp(mn, "smoothquant") && !w8a8, SQZ_ERR_INVALID_ARG,
                  "SPEC '%s': smoothquant quantizes activations: use w8a8:smoothquant", spec);
    SQZ_RETURN_IF(!strcmp(mn, "awq") && w8a8, SQZ_ERR_INVALID_ARG,
                  "SPEC '%s': awq is weight-only (for w8a8 use smoothquant)", spec);
    SQZ_RETURN_IF((act_order >= 0 || static_groups >= 0 || has_damp) && strcmp(mn, "gptq"), SQZ_ERR_INVALID_ARG,
                  "SPEC '%s': '%s' is a GPTQ option (add ':gptq')", spec,
                  act_order >= 0 ? "act-order" : static_groups >= 0 ? "static-groups" : "damp=");
    SQZ_RETURN_IF(has_alpha && strcmp(mn, "smoothquant"), SQZ_ERR_INVALID_ARG,
                  "SPEC '%s': 'alpha=' is a SmoothQuant option", spec);
    SQZ_RETURN_IF(has_pct && !(act && !strcmp(act, "percentile")), SQZ_ERR_INVALID_ARG,
                  "SPEC '%s': 'pct=' needs the percentile activation calibration", spec);
    /* GPTQ processes columns by decreasing Hessian diagonal unless told not to (on SmolLM2-135M
     * it cuts the mean KLD of q4_0 from 0.23 to 0.14), with groups built from the original
     * weights, so that int4 needs no g_idx (dynamic groups measured no better: docs/quantization.md) */
    q.act_order = act_order < 0 ? !strcmp(mn, "gptq") : act_order == 1;
    q.static_groups = static_groups != 0;
    SQZ_TRY(sqz_qtarget_check(&q.target));
    out->q = q;
    return SQZ_OK;
}

unsigned sqz_compress_needs(const sqz_compress_spec *spec) {
    unsigned n = spec->method->needs | SQZ_QSTAT_SAMPLE;
    if (!strcmp(spec->method->name, "awq")) n |= SQZ_QSTAT_ABSMEAN;
    if (spec->q.act_mode == SQZ_ACT_STATIC_TENSOR)
        n |= spec->q.act_calib == SQZ_ACT_CALIB_MINMAX ? SQZ_QSTAT_ABSMAX : SQZ_QSTAT_HIST;
    return n;
}

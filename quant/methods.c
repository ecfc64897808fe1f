/*
 * quant/methods.c - the table of quantization methods (one row each: name, statistics it
 * needs, formats it supports, function), their default options and shared argument checks.
 */
#include <stdlib.h>
#include <string.h>

#include "quant/quant_internal.h"

#define FMT(f) (1u << (f))
#define ALL_FORMATS                                                                                      \
    (FMT(SQZ_QFMT_I8) | FMT(SQZ_QFMT_I4_SYM) | FMT(SQZ_QFMT_I4_ASYM) | FMT(SQZ_QFMT_Q8_0) | FMT(SQZ_QFMT_Q4_0) | \
     FMT(SQZ_QFMT_Q4_1))
#define K_FORMATS \
    (FMT(SQZ_QFMT_Q2_K) | FMT(SQZ_QFMT_Q3_K) | FMT(SQZ_QFMT_Q4_K) | FMT(SQZ_QFMT_Q5_K) | FMT(SQZ_QFMT_Q6_K))
#define Q5_FORMATS (FMT(SQZ_QFMT_Q5_0) | FMT(SQZ_QFMT_Q5_1)) /* the fallbacks of Q4_K/Q5_K in a mix */
#define IQ4_FORMATS (FMT(SQZ_QFMT_IQ4_NL) | FMT(SQZ_QFMT_IQ4_XS)) /* the non-linear grids */
#define IQ3_FORMATS FMT(SQZ_QFMT_IQ3_S) /* the lattice codebook (GPTQ: codewords of 4, not a mask) */
#define FP4_FORMATS FMT(SQZ_QFMT_MXFP4)  /* E2M1 values under a power-of-two scale */
#define FP8_FORMATS FMT(SQZ_QFMT_FP8)    /* E4M3 values under a scale per row */
#define NVFP4_FORMAT FMT(SQZ_QFMT_NVFP4) /* E2M1 values, E4M3 scales per 16, a global scale */

static const sqz_qmethod methods[] = {
    {.name = "rtn", .needs = 0, .optional = SQZ_QSTAT_ABSMAX | SQZ_QSTAT_HIST | SQZ_QSTAT_SAMPLE,
     .smooths = false,
     .formats = ALL_FORMATS | K_FORMATS | Q5_FORMATS | IQ4_FORMATS | IQ3_FORMATS | FP4_FORMATS | FP8_FORMATS | NVFP4_FORMAT,
     .summary = "round to nearest with each format's reference quantizer (W8A8: static or dynamic "
                "activation scales from the statistics)",
     .run = sqz_quant_rtn, .refines = true, .rowwise = true},
    {.name = "imatrix", .needs = SQZ_QSTAT_X2, .optional = 0, .smooths = false,
     .formats = FMT(SQZ_QFMT_Q4_0) | FMT(SQZ_QFMT_Q4_1) | K_FORMATS | Q5_FORMATS | IQ4_FORMATS | IQ3_FORMATS | FP4_FORMATS |
                NVFP4_FORMAT,
     .summary = "llama.cpp's importance-weighted Q4_0/Q4_1, Q5_0/Q5_1, Q2_K..Q6_K, IQ4_NL/IQ4_XS and IQ3_S (quant_weights = "
                "E[x^2]), byte-exact; MXFP4 / NVFP4: each block's power-of-two / E4M3 scale searched by the same weighted error",
     .run = sqz_quant_imatrix, .refines = true},
    {.name = "gptq", .needs = SQZ_QSTAT_XTX, .optional = SQZ_QSTAT_ABSMAX | SQZ_QSTAT_HIST | SQZ_QSTAT_SAMPLE,
     .smooths = false,
     .formats = ALL_FORMATS | K_FORMATS | Q5_FORMATS | IQ4_FORMATS | IQ3_FORMATS | FP4_FORMATS | FP8_FORMATS | NVFP4_FORMAT,
     .summary = "GPTQ: Hessian-based error feedback, blocked lazy updates, optional act-order and static "
                "groups; GGUF targets (Q8_0, Q4_0/Q4_1, Q5_0/Q5_1, Q2_K..Q6_K, IQ4_NL/IQ4_XS, IQ3_S codewords, MXFP4) stay on llama.cpp's exact grids",
     .run = sqz_quant_gptq, .hessian = true, .refines = true},
    {.name = "awq", .needs = SQZ_QSTAT_SAMPLE, .optional = SQZ_QSTAT_ABSMEAN, .smooths = true,
     .formats = ALL_FORMATS,
     .summary = "AWQ: per-input-channel scales mean|x|^alpha (alpha searched), optional clipping search; "
                "fold the returned scales into the previous op",
     .run = sqz_quant_awq, .weight_only = true},
    {.name = "smoothquant", .needs = SQZ_QSTAT_SAMPLE | SQZ_QSTAT_ABSMAX, .optional = SQZ_QSTAT_HIST,
     .smooths = true, .formats = FMT(SQZ_QFMT_I8),
     .summary = "SmoothQuant W8A8: s = max|x|^alpha / max|w|^(1-alpha), alpha searched by the W8A8 output "
                "error; fold the returned scales into the previous op",
     .run = sqz_quant_smoothquant, .quantizes_acts = true, .searches_alpha = true},
};

const sqz_qmethod *sqz_qmethods(int *n_out) {
    if (n_out) *n_out = (int)(sizeof methods / sizeof methods[0]);
    return methods;
}

const sqz_qmethod *sqz_qmethod_find(const char *name) {
    for (size_t i = 0; name && i < sizeof methods / sizeof methods[0]; i++)
        if (strcmp(methods[i].name, name) == 0) return &methods[i];
    return NULL;
}

sqz_quant_opts sqz_quant_default_opts(void) {
    sqz_quant_opts o;
    memset(&o, 0, sizeof o);
    o.target.fmt = SQZ_QFMT_I8;
    o.percdamp = 0.01;
    o.blocksize = 128;
    o.gptaq_alpha = 0.25;
    o.awq_grid = 20;
    o.awq_clip = true;
    o.awq_clip_grid = 20;
    o.awq_max_shrink = 0.5f;
    o.act_mode = SQZ_ACT_FLOAT;
    o.act_calib = SQZ_ACT_CALIB_MINMAX;
    o.act_percentile = 99.99;
    o.sq_alpha = -1.0f;
    o.sq_alpha_min = 0.0f;
    o.sq_alpha_max = 1.0f;
    o.sq_alpha_step = 0.05f;
    o.max_search_rows = 512;
    return o;
}

static const char *stat_name(unsigned bit) {
    switch (bit) {
    case SQZ_QSTAT_XTX: return "the Hessian x x^T";
    case SQZ_QSTAT_X2: return "E[x^2] (importance matrix)";
    case SQZ_QSTAT_ABSMAX: return "max |x| per channel";
    case SQZ_QSTAT_ABSMEAN: return "E|x| per channel";
    case SQZ_QSTAT_SAMPLE: return "a sample of input rows";
    case SQZ_QSTAT_DXXT: return "dXX^T (the float model's stream, live calibration only)";
    case SQZ_QSTAT_HIST: return "an |x| histogram";
    case SQZ_QSTAT_MEAN: return "E[x] per channel";
    default: return "an unknown statistic";
    }
}

static bool has_stat(const sqz_qstats *st, unsigned bit) {
    switch (bit) {
    case SQZ_QSTAT_XTX: return st->xtx != NULL;
    case SQZ_QSTAT_X2: return st->x2 != NULL;
    case SQZ_QSTAT_ABSMAX: return st->absmax != NULL;
    case SQZ_QSTAT_ABSMEAN: return st->absmean != NULL;
    case SQZ_QSTAT_SAMPLE: return st->x != NULL && st->n_x > 0;
    case SQZ_QSTAT_DXXT: return st->dxxt != NULL;
    case SQZ_QSTAT_HIST: return st->hist != NULL && st->hist->total > 0;
    case SQZ_QSTAT_MEAN: return st->mean != NULL;
    default: return false; /* a bit this function does not know: not there */
    }
}

bool sqz__qstats_has(const sqz_qstats *st, unsigned needs) {
    for (unsigned bit = 1; bit <= SQZ_QSTAT_DXXT; bit <<= 1)
        if ((needs & bit) && !has_stat(st, bit)) return false;
    return true;
}

sqz_status sqz__check_method_args(const char *method, const sqz_qlinear *lin, int n_lin, const sqz_qstats *st,
                                  const sqz_quant_opts *o, unsigned needs, float *smooth, bool smooths) {
    SQZ_RETURN_IF(!lin || n_lin < 1 || !st || !o, SQZ_ERR_INVALID_ARG, "%s: no layers, statistics or options",
                  method);
    SQZ_RETURN_IF(smooths && !smooth, SQZ_ERR_INVALID_ARG, "%s: needs room for the smoothing vector", method);
    sqz_qtarget t = o->target;
    SQZ_TRY(sqz_qtarget_check(&t));
    const sqz_qmethod *row = sqz_qmethod_find(method); /* the table's formats hold for direct calls too */
    SQZ_RETURN_IF(row && !(row->formats & FMT(t.fmt)), SQZ_ERR_UNSUPPORTED, "%s: does not produce %s", method,
                  sqz_qformat_name(t.fmt));
    SQZ_RETURN_IF(st->n_in < 1 || !sqz_qtarget_fits(&t, st->n_in), SQZ_ERR_SHAPE,
                  "%s: %lld input columns do not fit %s (group %d)", method, (long long)st->n_in,
                  sqz_qformat_name(t.fmt), (int)t.group);
    for (int i = 0; i < n_lin; i++)
        SQZ_RETURN_IF(!lin[i].w || lin[i].n_out < 1, SQZ_ERR_INVALID_ARG, "%s: layer %d (%s) has no weight", method,
                      i, lin[i].name ? lin[i].name : "?");
    for (unsigned bit = 1; bit <= SQZ_QSTAT_DXXT; bit <<= 1)
        SQZ_RETURN_IF((needs & bit) && !has_stat(st, bit), SQZ_ERR_INVALID_ARG,
                      "%s: needs %s of the input", method, stat_name(bit));
    SQZ_RETURN_IF(o->act_mode != SQZ_ACT_FLOAT && t.fmt != SQZ_QFMT_I8 && t.fmt != SQZ_QFMT_FP8,
                  SQZ_ERR_UNSUPPORTED, "%s: activation quantization needs the i8 target (W8A8) or fp8 (W8A8-FP8), "
                  "not %s", method, sqz_qformat_name(t.fmt));
    SQZ_RETURN_IF((unsigned)o->act_mode > SQZ_ACT_STATIC_TENSOR || (unsigned)o->act_calib > SQZ_ACT_CALIB_KL,
                  SQZ_ERR_INVALID_ARG, "%s: unknown activation mode or calibration", method);
    return SQZ_OK;
}

const float *sqz__search_rows(const sqz_qstats *st, const sqz_quant_opts *o, int64_t *nx, float **owned) {
    *owned = NULL;
    if (o->max_search_rows <= 0 || st->n_x <= o->max_search_rows) {
        *nx = st->n_x;
        return st->x;
    }
    const int64_t k = o->max_search_rows, n = st->n_in;
    float *b = sqz__malloc((size_t)k * (size_t)n * sizeof(float));
    if (!b) return NULL;
    for (int64_t i = 0; i < k; i++) /* row i * n_x / k: spread over the whole sample */
        memcpy(b + i * n, st->x + (i * st->n_x / k) * n, (size_t)n * sizeof(float));
    *owned = b;
    *nx = k;
    return b;
}

/*
 * quant/formats.c - format names and targets, and sqz_qmatrix (alloc, dequantize, size,
 * attach to a model). The qparams themselves (checks, dequantizers, U4 packing) are core's
 * (core/qparams.c, sqz/qparams.h).
 */
#include <stdlib.h>
#include <string.h>

#include "core/blocks.h"
#include "quant/quant_internal.h"

/* ---- formats and targets ----------------------------------------------------------------- */

static const struct {
    const char *name;
    sqz_dtype dtype;
    int32_t block; /* GGUF formats: elements per block (the group); 0 for sqz's layouts */
} fmt_table[SQZ_QFMT_COUNT] = {
    [SQZ_QFMT_I8] = {"i8", SQZ_DTYPE_I8, 0},          [SQZ_QFMT_I4_SYM] = {"i4_sym", SQZ_DTYPE_U4, 0},
    [SQZ_QFMT_I4_ASYM] = {"i4_asym", SQZ_DTYPE_U4, 0}, [SQZ_QFMT_Q8_0] = {"q8_0", SQZ_DTYPE_Q8_0, 32},
    [SQZ_QFMT_Q4_0] = {"q4_0", SQZ_DTYPE_Q4_0, 32},     [SQZ_QFMT_Q4_1] = {"q4_1", SQZ_DTYPE_Q4_1, 32},
    [SQZ_QFMT_Q2_K] = {"q2_k", SQZ_DTYPE_Q2_K, 256},    [SQZ_QFMT_Q3_K] = {"q3_k", SQZ_DTYPE_Q3_K, 256},
    [SQZ_QFMT_Q4_K] = {"q4_k", SQZ_DTYPE_Q4_K, 256},    [SQZ_QFMT_Q5_K] = {"q5_k", SQZ_DTYPE_Q5_K, 256},
    [SQZ_QFMT_Q6_K] = {"q6_k", SQZ_DTYPE_Q6_K, 256},    [SQZ_QFMT_Q5_0] = {"q5_0", SQZ_DTYPE_Q5_0, 32},
    [SQZ_QFMT_Q5_1] = {"q5_1", SQZ_DTYPE_Q5_1, 32},    [SQZ_QFMT_IQ4_NL] = {"iq4_nl", SQZ_DTYPE_IQ4_NL, 32},
    [SQZ_QFMT_IQ4_XS] = {"iq4_xs", SQZ_DTYPE_IQ4_XS, 256}, [SQZ_QFMT_IQ3_S] = {"iq3_s", SQZ_DTYPE_IQ3_S, 256},
    [SQZ_QFMT_MXFP4] = {"mxfp4", SQZ_DTYPE_MXFP4, 32},  [SQZ_QFMT_FP8] = {"fp8", SQZ_DTYPE_F8_E4M3, 0},
    [SQZ_QFMT_NVFP4] = {"nvfp4", SQZ_DTYPE_U4, 0},
};

bool sqz_qformat_from_dtype(sqz_dtype d, sqz_qformat *out) {
    for (int i = 0; i < SQZ_QFMT_COUNT; i++) {
        if (fmt_table[i].block > 0 && fmt_table[i].dtype == d) { *out = (sqz_qformat)i; return true; }
    }
    return false;
}

bool sqz_qformat_is_gguf(sqz_qformat f) { return (unsigned)f < SQZ_QFMT_COUNT && fmt_table[f].block > 0; }

const char *sqz_qformat_name(sqz_qformat f) {
    return (unsigned)f < SQZ_QFMT_COUNT ? fmt_table[f].name : "invalid";
}

bool sqz_qformat_from_name(const char *name, sqz_qformat *out) {
    for (int i = 0; i < SQZ_QFMT_COUNT; i++) {
        if (strcmp(name, fmt_table[i].name) == 0) { *out = (sqz_qformat)i; return true; }
    }
    return false;
}

sqz_dtype sqz_qformat_dtype(sqz_qformat f) {
    return (unsigned)f < SQZ_QFMT_COUNT ? fmt_table[f].dtype : SQZ_DTYPE_F32;
}

sqz_status sqz_qtarget_check(sqz_qtarget *t) {
    SQZ_RETURN_IF((unsigned)t->fmt >= SQZ_QFMT_COUNT, SQZ_ERR_INVALID_ARG, "unknown quantization format %d",
                  (int)t->fmt);
    if (t->fmt == SQZ_QFMT_I4_SYM || t->fmt == SQZ_QFMT_I4_ASYM) {
        SQZ_RETURN_IF(t->group != 32 && t->group != 64 && t->group != 128, SQZ_ERR_INVALID_ARG,
                      "%s: group size %d (32, 64 or 128)", sqz_qformat_name(t->fmt), (int)t->group);
    } else if (t->fmt == SQZ_QFMT_I8 || t->fmt == SQZ_QFMT_FP8) {
        t->group = 0;
    } else if (t->fmt == SQZ_QFMT_NVFP4) {
        t->group = 16;
    } else {
        t->group = fmt_table[t->fmt].block;
    }
    return SQZ_OK;
}

bool sqz_qtarget_fits(const sqz_qtarget *t, int64_t n_in) {
    if (n_in < 1 || (unsigned)t->fmt >= SQZ_QFMT_COUNT) return false;
    if (t->fmt == SQZ_QFMT_I8 || t->fmt == SQZ_QFMT_FP8) return true;
    const int64_t g = t->fmt == SQZ_QFMT_I4_SYM || t->fmt == SQZ_QFMT_I4_ASYM ? t->group
                      : t->fmt == SQZ_QFMT_NVFP4 ? 16 : fmt_table[t->fmt].block;
    return g > 0 && n_in % g == 0;
}

/* ---- sqz_qmatrix -------------------------------------------------------------------------- */

void sqz_qmatrix_free(sqz_qmatrix *q) {
    if (!q) return;
    free(q->data);
    free(q->scales_buf);
    free(q->zeros_buf);
    free(q->g_idx_buf);
    free(q->in_scale_buf);
    memset(q, 0, sizeof *q);
}

sqz_status sqz_qmatrix_alloc(sqz_qmatrix *q, const sqz_qtarget *target, int64_t n_out, int64_t n_in) {
    memset(q, 0, sizeof *q);
    sqz_qtarget t = *target;
    SQZ_TRY(sqz_qtarget_check(&t));
    SQZ_RETURN_IF(n_out < 1 || !sqz_qtarget_fits(&t, n_in), SQZ_ERR_SHAPE,
                  "a (%lld, %lld) weight cannot be quantized to %s (group %d)", (long long)n_out, (long long)n_in,
                  sqz_qformat_name(t.fmt), (int)t.group);
    int64_t ne;
    size_t nbytes;
    q->dtype = sqz_qformat_dtype(t.fmt);
    SQZ_RETURN_IF(!sqz__mul_i64(n_out, n_in, &ne) || !sqz_dtype_nbytes(q->dtype, ne, &nbytes), SQZ_ERR_SHAPE,
                  "weight (%lld, %lld) too large", (long long)n_out, (long long)n_in);
    q->target = t;
    q->n_out = n_out;
    q->n_in = n_in;
    q->nbytes = nbytes;
    q->data = sqz__malloc(nbytes ? nbytes : 1);
    if (!q->data) return SQZ_ERR_NOMEM;
    q->qp.n_out = n_out;
    q->qp.n_in = n_in;
    if (t.fmt == SQZ_QFMT_I8 || t.fmt == SQZ_QFMT_FP8 || t.fmt == SQZ_QFMT_I4_SYM || t.fmt == SQZ_QFMT_I4_ASYM ||
        t.fmt == SQZ_QFMT_NVFP4) {
        const bool i8 = t.fmt == SQZ_QFMT_I8 || t.fmt == SQZ_QFMT_FP8; /* one scale per row */
        q->qp.scheme = t.fmt == SQZ_QFMT_FP8     ? SQZ_QSCHEME_F8_ROW
                       : t.fmt == SQZ_QFMT_NVFP4 ? SQZ_QSCHEME_NVFP4
                       : i8                      ? SQZ_QSCHEME_I8_ROW
                                                 : SQZ_QSCHEME_U4_GROUP;
        q->qp.group_size = i8 ? (int32_t)n_in : t.group;
        q->qp.n_groups = i8 ? 1 : n_in / t.group;
        const size_t ns = (size_t)n_out * (size_t)q->qp.n_groups; /* <= ne: no overflow */
        q->scales_buf = sqz__calloc(ns, sizeof(float));
        if (!q->scales_buf) { sqz_qmatrix_free(q); return SQZ_ERR_NOMEM; }
        q->qp.scales = q->scales_buf;
        if (t.fmt == SQZ_QFMT_I4_ASYM) {
            q->zeros_buf = sqz__calloc(ns, 1);
            if (!q->zeros_buf) { sqz_qmatrix_free(q); return SQZ_ERR_NOMEM; }
            q->qp.zeros = q->zeros_buf;
        }
    }
    return SQZ_OK;
}

sqz_status sqz_qmatrix_to_f32(const sqz_qmatrix *q, float *out) {
    SQZ_RETURN_IF(!q->data, SQZ_ERR_INVALID_ARG, "quantized weight has no data");
    if (q->qp.scheme != SQZ_QSCHEME_NONE) return sqz_qparams_to_f32(&q->qp, q->dtype, q->data, q->nbytes, out);
    const sqz_dtype_traits *tr = sqz_dtype_info(q->dtype);
    SQZ_RETURN_IF(!tr || !tr->to_f32, SQZ_ERR_UNSUPPORTED, "dtype %s has no float view", sqz_dtype_name(q->dtype));
    tr->to_f32(q->data, out, q->n_out * q->n_in);
    return SQZ_OK;
}

double sqz_qmatrix_bits_per_weight(const sqz_qmatrix *q) {
    const double ne = (double)q->n_out * (double)q->n_in;
    if (ne <= 0) return 0;
    double bits = 8.0 * (double)q->nbytes;
    if (q->qp.scheme == SQZ_QSCHEME_I8_ROW || q->qp.scheme == SQZ_QSCHEME_F8_ROW)
        bits += 32.0 * (double)q->n_out; /* f32 scales */
    if (q->qp.scheme == SQZ_QSCHEME_NVFP4) bits += 8.0 * (double)q->n_out * (double)q->qp.n_groups + 32.0;
    if (q->qp.scheme == SQZ_QSCHEME_U4_GROUP) {
        const double ng = (double)q->n_out * (double)q->qp.n_groups;
        bits += 16.0 * ng;                                 /* fp16-exact scales */
        if (q->qp.zeros) bits += 4.0 * ng;                 /* packed 4-bit zero points */
        if (q->qp.g_idx) bits += 32.0 * (double)q->n_in;  /* int32 g_idx */
    }
    if (q->qp.in_scale) bits += 32.0 * (double)q->n_in;
    return bits / ne;
}

sqz_status sqz_qmatrix_set_in_scale(sqz_qmatrix *q, const float *s) {
    SQZ_RETURN_IF(q->qp.scheme == SQZ_QSCHEME_NONE, SQZ_ERR_UNSUPPORTED,
                  "%s blocks cannot carry an input scale: fold the smoothing vector into the previous op",
                  sqz_dtype_name(q->dtype));
    for (int64_t i = 0; i < q->n_in; i++)
        SQZ_RETURN_IF(!isfinite(s[i]) || s[i] == 0.0f, SQZ_ERR_INVALID_ARG, "input scale %lld is %g", (long long)i,
                      (double)s[i]);
    float *b = q->in_scale_buf ? q->in_scale_buf : sqz__malloc((size_t)q->n_in * sizeof(float));
    if (!b) return SQZ_ERR_NOMEM;
    memcpy(b, s, (size_t)q->n_in * sizeof(float));
    q->in_scale_buf = b;
    q->qp.in_scale = b;
    return SQZ_OK;
}

sqz_status sqz_qmatrix_attach(sqz_model *m, sqz_tensor *t, sqz_qmatrix *q) {
    SQZ_RETURN_IF(!q->data, SQZ_ERR_INVALID_ARG, "tensor '%s': nothing to attach", t->name);
    SQZ_RETURN_IF(t->ndim != 2 || t->shape[0] != q->n_out || t->shape[1] != q->n_in, SQZ_ERR_SHAPE,
                  "tensor '%s': quantized weight is (%lld, %lld), the tensor is not", t->name, (long long)q->n_out,
                  (long long)q->n_in);
    const int64_t idx = t - m->tensors;
    SQZ_RETURN_IF(idx < 0 || idx >= m->n_tensors, SQZ_ERR_INVALID_ARG, "tensor '%s' is not in this model", t->name);
    sqz_qparams *qp = NULL;
    if (q->qp.scheme != SQZ_QSCHEME_NONE) {
        SQZ_TRY(sqz_qparams_check(&q->qp, q->dtype, q->nbytes, t->name));
        qp = sqz__qparams_clone(&q->qp, NULL, 0);
        if (!qp) return SQZ_ERR_NOMEM;
        SQZ_TRY(sqz_model_keep(m, qp)); /* frees qp on failure */
    }
    if (t->owned) free(t->data);
    t->data = q->data;
    t->owned = true;
    t->nbytes = q->nbytes;
    t->dtype = q->dtype;
    t->qp = qp;
    q->data = NULL;
    sqz_qmatrix_free(q);
    return SQZ_OK;
}

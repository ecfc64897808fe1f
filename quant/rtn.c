/*
 * quant/rtn.c - round-to-nearest with each format's reference quantizer, and plain W8A8
 * (INT8 weights per channel + static or dynamic activation scales, no smoothing).
 *
 * Q8_0/Q4_0/Q4_1 and the K-quants call llama.cpp's reference quantizers
 * (quant/gguf/quant_ref.c, quant/gguf/kquant.c) so the bytes are exactly what llama-quantize
 * writes without an importance matrix (IQ4_NL / IQ4_XS: quantize_iq4_nl / _xs with no weights,
 * quant/gguf/iq4.c, which is what llama-quantize calls for them); I8 is sqz__quantize_rows_i8_ref, the weight quantizer of
 * the W8A8 GEMM; I4 groups follow the grids of grid.c (documented in sqz/quant.h).
 */
#include <stdlib.h>
#include <string.h>

#include "core/blocks.h"
#include "quant/gguf/quant_gguf.h"
#include "kernels/cpu/gemm_ref.h"
#include "kernels/cpu/pool.h"
#include "quant/quant_internal.h"
#include "sqz/progress.h"

/* FP8 per row, as compressed-tensors quantizes it: scale = absmax / 448 (f32), each value
 * fp8(clamp(w / scale, -448, 448)) rounded half to even (quant/grid.c's FP8 grid). */
static void rtn_fp8(const float *w, int64_t n_out, int64_t n_in, sqz_qmatrix *out) {
    uint8_t *q = out->data;
    for (int64_t r = 0; r < n_out; r++) {
        sqz__grid g;
        sqz__grid_make(SQZ_QFMT_FP8, w + r * n_in, (int)n_in, &g);
        for (int64_t c = 0; c < n_in; c++) q[r * n_in + c] = (uint8_t)sqz__grid_code(&g, SQZ_QFMT_FP8, w[r * n_in + c]);
        out->scales_buf[r] = g.d;
    }
}

static void rtn_i4(const float *w, int64_t n_out, int64_t n_in, sqz_qmatrix *q) {
    const sqz_qformat f = q->target.fmt;
    const int64_t gs = q->qp.group_size, ng = q->qp.n_groups;
    uint8_t *p = q->data;
    for (int64_t r = 0; r < n_out; r++) {
        const float *wr = w + r * n_in;
        uint8_t *pr = p + r * (n_in / 2);
        for (int64_t gi = 0; gi < ng; gi++) {
            sqz__grid g;
            sqz__grid_make(f, wr + gi * gs, (int)gs, &g);
            q->scales_buf[r * ng + gi] = g.d;
            if (q->zeros_buf) q->zeros_buf[r * ng + gi] = (uint8_t)g.zero;
            for (int64_t c = gi * gs; c < (gi + 1) * gs; c += 2) {
                const int c0 = sqz__grid_code(&g, f, wr[c]), c1 = sqz__grid_code(&g, f, wr[c + 1]);
                pr[c / 2] = (uint8_t)(c0 | (c1 << 4));
            }
        }
    }
}

/* llama.cpp's quantize_row_q8_0_ref, bit for bit, without a libm call per element: roundf
 * (half away from zero) of |v| <= 127 * (1 + 2^-23) is the truncation plus one when the
 * fraction is >= 0.5 (v - trunc(v) is exact). The test compares it with quant/gguf/quant_ref.c. */
static void q8_0_rows(const float *x, void *vy, int64_t n) {
    sqz_block_q8_0 *y = vy;
    for (int64_t i = 0; i < n / SQZ_QK8_0; i++) {
        const float *xb = x + i * SQZ_QK8_0;
        float amax = 0.0f;
        for (int j = 0; j < SQZ_QK8_0; j++) amax = fmaxf(amax, fabsf(xb[j]));
        const float d = amax / ((1 << 7) - 1);
        const float id = d ? 1.0f / d : 0.0f;
        y[i].d = sqz_fp32_to_fp16(d);
        for (int j = 0; j < SQZ_QK8_0; j++) {
            const float v = xb[j] * id;
            const int t = (int)v;
            const float frac = v - (float)t;
            y[i].qs[j] = (int8_t)(t + (frac >= 0.5f) - (frac <= -0.5f));
        }
    }
}

/* Rows [b, e) of a GGUF block format (each row whole blocks: the quantizers work row by row, so a
 * split over rows gives the same bytes). */
typedef struct rows_job {
    const float *w;
    uint8_t *dst;
    size_t row_bytes;
    int64_t n_in;
    sqz_qformat fmt;
    sqz_dtype dt;
} rows_job;

static void block_rows(void *ctx, int64_t b, int64_t e, int thread) {
    (void)thread;
    const rows_job *j = ctx;
    const float *w = j->w + b * j->n_in;
    uint8_t *d = j->dst + (size_t)b * j->row_bytes;
    const int64_t ne = (e - b) * j->n_in;
    switch (j->fmt) {
    case SQZ_QFMT_Q8_0: q8_0_rows(w, d, ne); break;
    case SQZ_QFMT_Q4_0: sqz__quantize_q4_0_ref(w, d, ne); break;
    case SQZ_QFMT_Q4_1: sqz__quantize_q4_1_ref(w, d, ne); break;
    case SQZ_QFMT_Q5_0: sqz__quantize_q5_0_ref(w, d, ne); break;
    case SQZ_QFMT_Q5_1: sqz__quantize_q5_1_ref(w, d, ne); break;
    case SQZ_QFMT_IQ4_NL: /* quantize_iq4_nl / _xs without weights: what llama-quantize writes */
    case SQZ_QFMT_IQ4_XS: sqz__quantize_iq4(j->dt, w, d, e - b, j->n_in, NULL); break;
    case SQZ_QFMT_IQ3_S: sqz__quantize_iq3_s(w, d, e - b, j->n_in, NULL); break; /* quantize_iq3_s, no weights */
    case SQZ_QFMT_MXFP4: sqz__quantize_mxfp4_ref(w, d, ne); break;
    default: sqz__quantize_k(j->dt, w, d, e - b, j->n_in, NULL); break; /* Q2_K .. Q6_K */
    }
}

/* A GGUF block format's rows, on every core when the matrix is large (the mixes' embedding and
 * output: 10^8 weights and more); SQZ_ERR_NOMEM only for the pool. */
static sqz_status gguf_rows(const float *w, int64_t n_out, int64_t n_in, sqz_qmatrix *out) {
    rows_job j = {w, out->data, out->nbytes / (size_t)n_out, n_in, out->target.fmt, out->dtype};
    sqz__pool *pool = NULL;
    if (n_out * n_in >= ((int64_t)1 << 22) && sqz__pool_new(0, &pool) == SQZ_OK) {
        sqz__pool_for(pool, n_out, 16, block_rows, &j);
        sqz__pool_free(pool);
        return SQZ_OK;
    }
    block_rows(&j, 0, n_out, 0);
    return SQZ_OK;
}

/* One matrix; gs > 0: NVFP4's global scale shared with the other matrices of the input, else its own. */
static sqz_status rtn_one(const float *w, int64_t n_out, int64_t n_in, const sqz_qtarget *t, float gs,
                          sqz_qmatrix *out) {
    const double t0 = sqz_now_seconds();
    memset(out, 0, sizeof *out);
    for (int64_t i = 0; i < n_out * n_in; i++)
        SQZ_RETURN_IF(!isfinite(w[i]), SQZ_ERR_NUMERIC, "rtn: the weight holds a NaN or an infinity (row %lld)",
                      (long long)(n_in > 0 ? i / n_in : 0));
    SQZ_TRY(sqz_qmatrix_alloc(out, t, n_out, n_in));
    switch (out->target.fmt) {
    case SQZ_QFMT_I8: sqz__quantize_rows_i8_ref(w, n_out, n_in, out->data, out->scales_buf); break;
    case SQZ_QFMT_FP8: rtn_fp8(w, n_out, n_in, out); break;
    case SQZ_QFMT_NVFP4:
        sqz__nvfp4_rows(w, n_out, n_in, gs > 0 ? gs : sqz__nvfp4_global_scale(sqz__nvfp4_amax(w, n_out * n_in)), out);
        break;
    case SQZ_QFMT_I4_SYM:
    case SQZ_QFMT_I4_ASYM: rtn_i4(w, n_out, n_in, out); break;
    case SQZ_QFMT_Q8_0:
    case SQZ_QFMT_Q4_0:
    case SQZ_QFMT_Q4_1:
    case SQZ_QFMT_Q5_0:
    case SQZ_QFMT_Q5_1:
    case SQZ_QFMT_Q2_K:
    case SQZ_QFMT_Q3_K:
    case SQZ_QFMT_Q4_K:
    case SQZ_QFMT_Q5_K:
    case SQZ_QFMT_Q6_K:
    case SQZ_QFMT_IQ4_NL:
    case SQZ_QFMT_IQ4_XS:
    case SQZ_QFMT_IQ3_S:
    case SQZ_QFMT_MXFP4: SQZ_TRY(gguf_rows(w, n_out, n_in, out)); break;
    default: sqz_qmatrix_free(out); return SQZ_ERROR(SQZ_ERR_INVALID_ARG, "rtn: unknown format");
    }
    for (int64_t r = 0; out->scales_buf && r < out->n_out * out->qp.n_groups; r++) {
        if (!isfinite(out->scales_buf[r])) {
            sqz_qmatrix_free(out);
            return SQZ_ERROR(SQZ_ERR_NUMERIC, "rtn: a scale overflows (weights beyond the fp16 range)");
        }
    }
    out->seconds = sqz_now_seconds() - t0;
    return SQZ_OK;
}

sqz_status sqz_quant_rtn_one(const float *w, int64_t n_out, int64_t n_in, const sqz_qtarget *t, sqz_qmatrix *out) {
    return rtn_one(w, n_out, n_in, t, 0.0f, out); /* NVFP4 alone: the matrix's own global scale */
}

sqz_status sqz_quant_rtn(const sqz_qlinear *lin, int n_lin, const sqz_qstats *st, const sqz_quant_opts *o,
                         sqz_qmatrix *out, float *smooth) {
    SQZ_TRY(sqz__check_method_args("rtn", lin, n_lin, st, o, 0, smooth, false));
    float act_scale = 0.0f;
    if (o->act_mode == SQZ_ACT_STATIC_TENSOR) SQZ_TRY(sqz__act_scale_for(st, o, NULL, &act_scale));
    float amax = 0.0f; /* NVFP4: one global scale for the matrices of this input (llm-compressor's fused one) */
    for (int i = 0; o->target.fmt == SQZ_QFMT_NVFP4 && i < n_lin; i++)
        amax = fmaxf(amax, sqz__nvfp4_amax(lin[i].w, lin[i].n_out * st->n_in));
    const float gs = o->target.fmt == SQZ_QFMT_NVFP4 ? sqz__nvfp4_global_scale(amax) : 0.0f;
    for (int i = 0; i < n_lin; i++) {
        sqz_status s = rtn_one(lin[i].w, lin[i].n_out, st->n_in, &o->target, gs, &out[i]);
        if (s == SQZ_OK && o->refine && o->target.fmt == SQZ_QFMT_IQ3_S) /* sqz's search, llama.cpp's weights x^2 */
            s = sqz__iq3s_refine_rows(lin[i].w, lin[i].n_out, st->n_in, NULL, out[i].data, o->threads);
        if (s != SQZ_OK) {
            sqz_qmatrix_free(&out[i]); /* NULL-safe: nothing when rtn_one failed */
            for (int j = 0; j < i; j++) sqz_qmatrix_free(&out[j]);
            if (lin[i].name) sqz__error_prefix("%s", lin[i].name);
            return s;
        }
        out[i].qp.act_mode = o->act_mode;
        out[i].qp.act_grid = sqz__act_grid_for(o->target.fmt, o->act_mode);
        out[i].qp.act_scale = act_scale;
    }
    if (smooth)
        for (int64_t j = 0; j < st->n_in; j++) smooth[j] = 1.0f;
    return SQZ_OK;
}

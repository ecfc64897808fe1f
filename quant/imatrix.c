/*
 * quant/imatrix.c - importance-weighted RTN for Q4_0 and Q4_1: llama.cpp's
 * quantize_row_q4_0_impl / quantize_row_q4_1_impl (ggml-quants.c) with quant_weights =
 * E[x^2] of the layer's input (what llama-imatrix collects), reproduced operation for
 * operation so that the bytes equal llama-quantize --imatrix's (tests/py checks against
 * libggml itself).
 *
 * Per row: sigma2 = mean(w^2); per 32-block the weights are qw[j] * sqrt(sigma2 + w[j]^2);
 * Q4_0 searches the scale among 19 candidates around -8/max (make_qx_quants, rmse_type 1),
 * Q4_1 the scale and minimum over 37 candidate ranges (make_qkx3_quants), each minimising the
 * weighted squared error. The K-quants (Q2_K ... Q6_K) are core's sqz__quantize_k, llama.cpp's
 * quantize_q*_K with the same quant_weights, IQ4_NL / IQ4_XS quant/gguf/iq4.c's quantize_iq4_nl /
 * quantize_iq4_xs.
 */
#include <float.h>
#include <string.h>

#include "core/blocks.h"
#include "quant/gguf/kquant_internal.h"
#include "quant/gguf/quant_gguf.h"
#include "kernels/cpu/pool.h"
#include "quant/quant_internal.h"
#include "sqz/progress.h"


/* sqz's IQ3_S search (sqz__iq3s_refine) over rows [b, e) of a matrix llama.cpp's quantizer wrote. */
typedef struct refine_job {
    const float *w, *qw;
    uint8_t *data;
    int64_t n_in;
} refine_job;

static void refine_fn(void *ctx, int64_t b, int64_t e, int thread) {
    (void)thread;
    const refine_job *j = ctx;
    const int64_t nsb = j->n_in / 256;
    for (int64_t r = b; r < e; r++)
        for (int64_t sb = 0; sb < nsb; sb++)
            sqz__iq3s_refine(j->w + r * j->n_in + sb * 256, j->qw ? j->qw + sb * 256 : NULL,
                             j->data + (size_t)(r * nsb + sb) * sizeof(sqz_block_iq3_s));
}

sqz_status sqz__iq3s_refine_rows(const float *w, int64_t n_out, int64_t n_in, const float *qw, void *data,
                                 int threads) {
    sqz__pool *pool = NULL;
    SQZ_TRY(sqz__pool_new(threads, &pool));
    refine_job j = {w, qw, data, n_in};
    sqz__pool_for(pool, n_out, 8, refine_fn, &j);
    sqz__pool_free(pool);
    return SQZ_OK;
}

static float row_sigma2(const float *x, int64_t n) {
    float sum_x2 = 0;
    for (int64_t j = 0; j < n; ++j) sum_x2 += x[j] * x[j];
    return sum_x2 / (float)n;
}

static void row_q4_0(const float *x, sqz_block_q4_0 *y, int64_t n_per_row, const float *quant_weights) {
    float weight[SQZ_QK4_0];
    int8_t L[SQZ_QK4_0];
    const float sigma2 = row_sigma2(x, n_per_row);
    for (int64_t ib = 0; ib < n_per_row / SQZ_QK4_0; ++ib) {
        const float *xb = x + SQZ_QK4_0 * ib;
        const float *qw = quant_weights + SQZ_QK4_0 * ib;
        for (int j = 0; j < SQZ_QK4_0; ++j) weight[j] = qw[j] * sqrtf(sigma2 + xb[j] * xb[j]);
        float d = sqz__make_qx_quants(SQZ_QK4_0, 8, xb, L, weight);
        y[ib].d = sqz_fp32_to_fp16(d);
        for (int j = 0; j < 16; ++j) y[ib].qs[j] = (uint8_t)(L[j] | (L[j + 16] << 4));
    }
}

static void row_q4_1(const float *x, sqz_block_q4_1 *y, int64_t n_per_row, const float *quant_weights) {
    float weight[SQZ_QK4_1];
    uint8_t L[SQZ_QK4_1], Laux[SQZ_QK4_1];
    const float sigma2 = row_sigma2(x, n_per_row);
    for (int64_t ib = 0; ib < n_per_row / SQZ_QK4_1; ++ib) {
        const float *xb = x + SQZ_QK4_1 * ib;
        const float *qw = quant_weights + SQZ_QK4_1 * ib;
        for (int j = 0; j < SQZ_QK4_1; ++j) weight[j] = qw[j] * sqrtf(sigma2 + xb[j] * xb[j]);
        float min;
        float d = sqz__make_qkx3_quants(SQZ_QK4_1, 15, xb, weight, L, &min, Laux, -0.9f, 0.05f, 36);
        y[ib].d = sqz_fp32_to_fp16(d);
        y[ib].m = sqz_fp32_to_fp16(-min);
        for (int j = 0; j < 16; ++j) y[ib].qs[j] = (uint8_t)(L[j] | (L[j + 16] << 4));
    }
}

/* quantize_row_q5_0_impl / quantize_row_q5_1_impl: as Q4_0/Q4_1 with 16 / 31 levels, packed by
 * sqz__pack_q5 (quant/gguf/quant_ref.c). */
static void row_q5_0(const float *x, sqz_block_q5_0 *y, int64_t n_per_row, const float *quant_weights) {
    float weight[SQZ_QK5_0];
    int8_t L[SQZ_QK5_0];
    uint8_t U[SQZ_QK5_0];
    const float sigma2 = row_sigma2(x, n_per_row);
    for (int64_t ib = 0; ib < n_per_row / SQZ_QK5_0; ++ib) {
        const float *xb = x + SQZ_QK5_0 * ib;
        const float *qw = quant_weights + SQZ_QK5_0 * ib;
        for (int j = 0; j < SQZ_QK5_0; ++j) weight[j] = qw[j] * sqrtf(sigma2 + xb[j] * xb[j]);
        float d = sqz__make_qx_quants(SQZ_QK5_0, 16, xb, L, weight);
        y[ib].d = sqz_fp32_to_fp16(d);
        for (int j = 0; j < SQZ_QK5_0; ++j) U[j] = (uint8_t)L[j];
        sqz__pack_q5(U, y[ib].qs, y[ib].qh);
    }
}

static void row_q5_1(const float *x, sqz_block_q5_1 *y, int64_t n_per_row, const float *quant_weights) {
    float weight[SQZ_QK5_1];
    uint8_t L[SQZ_QK5_1], Laux[SQZ_QK5_1];
    const float sigma2 = row_sigma2(x, n_per_row);
    for (int64_t ib = 0; ib < n_per_row / SQZ_QK5_1; ++ib) {
        const float *xb = x + SQZ_QK5_1 * ib;
        const float *qw = quant_weights + SQZ_QK5_1 * ib;
        for (int j = 0; j < SQZ_QK5_1; ++j) weight[j] = qw[j] * sqrtf(sigma2 + xb[j] * xb[j]);
        float min;
        float d = sqz__make_qkx3_quants(SQZ_QK5_1, 31, xb, weight, L, &min, Laux, -0.9f, 0.05f, 36);
        y[ib].d = sqz_fp32_to_fp16(d);
        y[ib].m = sqz_fp32_to_fp16(-min);
        sqz__pack_q5(L, y[ib].qs, y[ib].qh);
    }
}

sqz_status sqz_quant_imatrix(const sqz_qlinear *lin, int n_lin, const sqz_qstats *st, const sqz_quant_opts *o,
                             sqz_qmatrix *out, float *smooth) {
    SQZ_TRY(sqz__check_method_args("imatrix", lin, n_lin, st, o, SQZ_QSTAT_X2, smooth, false));
    const sqz_qformat f = o->target.fmt;
    const bool kquant = sqz__qfmt_kquant(f);
    const bool iq4 = f == SQZ_QFMT_IQ4_NL || f == SQZ_QFMT_IQ4_XS, iq3 = f == SQZ_QFMT_IQ3_S;
    const bool fp4 = f == SQZ_QFMT_MXFP4, nv = f == SQZ_QFMT_NVFP4;
    const bool whole = kquant || iq4 || iq3 || fp4 || nv; /* whole matrices at once */
    SQZ_RETURN_IF(f != SQZ_QFMT_Q4_0 && f != SQZ_QFMT_Q4_1 && f != SQZ_QFMT_Q5_0 && f != SQZ_QFMT_Q5_1 && !whole,
                  SQZ_ERR_UNSUPPORTED, "imatrix: target %s (q4_0, q4_1, q5_0, q5_1, q2_k ... q6_k, iq4_nl, iq4_xs, iq3_s, "
                  "mxfp4, nvfp4; llama.cpp ignores the importance matrix for q8_0)", sqz_qformat_name(f));
    const int64_t n_in = st->n_in;
    for (int64_t j = 0; j < n_in; j++)
        SQZ_RETURN_IF(!(st->x2[j] >= 0.0f) || !isfinite(st->x2[j]), SQZ_ERR_INVALID_ARG,
                      "imatrix: E[x^2] of channel %lld is %g", (long long)j, (double)st->x2[j]);
    float amax = 0.0f; /* NVFP4: the global scale shared by the matrices of this input, as RTN's */
    for (int i = 0; nv && i < n_lin; i++) amax = fmaxf(amax, sqz__nvfp4_amax(lin[i].w, lin[i].n_out * n_in));
    for (int i = 0; i < n_lin; i++) {
        const double t0 = sqz_now_seconds();
        sqz_status s = sqz_qmatrix_alloc(&out[i], &o->target, lin[i].n_out, n_in);
        if (s != SQZ_OK) {
            for (int j = 0; j < i; j++) sqz_qmatrix_free(&out[j]);
            return s;
        }
        const int64_t nb = n_in / 32;
        if (kquant) /* llama.cpp's quantize_q*_K with quant_weights (quant/gguf/kquant.c) */
            sqz__quantize_k(out[i].dtype, lin[i].w, out[i].data, lin[i].n_out, n_in, st->x2);
        if (iq4) /* quantize_iq4_nl / quantize_iq4_xs with quant_weights (quant/gguf/iq4.c) */
            sqz__quantize_iq4(out[i].dtype, lin[i].w, out[i].data, lin[i].n_out, n_in, st->x2);
        if (iq3) /* quantize_iq3_s with quant_weights (quant/gguf/iq3.c) */
            sqz__quantize_iq3_s(lin[i].w, out[i].data, lin[i].n_out, n_in, st->x2);
        if (nv) /* each group's E4M3 scale searched (quant/nvfp4.c) */
            sqz__nvfp4_rows_search(lin[i].w, lin[i].n_out, n_in, sqz__nvfp4_global_scale(amax), st->x2, &out[i]);
        if (fp4) /* sqz's search of each block's exponent (quant/gguf/fp4.c; llama.cpp has none) */
            sqz__quantize_mxfp4(lin[i].w, out[i].data, lin[i].n_out, n_in, st->x2);
        if (iq3 && o->refine) s = sqz__iq3s_refine_rows(lin[i].w, lin[i].n_out, n_in, st->x2, out[i].data, o->threads);
        if (s != SQZ_OK) {
            for (int j = 0; j <= i; j++) sqz_qmatrix_free(&out[j]);
            return s;
        }
        for (int64_t r = 0; !whole && r < lin[i].n_out; r++) {
            const float *x = lin[i].w + r * n_in;
            if (f == SQZ_QFMT_Q4_0) row_q4_0(x, (sqz_block_q4_0 *)out[i].data + r * nb, n_in, st->x2);
            else if (f == SQZ_QFMT_Q4_1) row_q4_1(x, (sqz_block_q4_1 *)out[i].data + r * nb, n_in, st->x2);
            else if (f == SQZ_QFMT_Q5_0) row_q5_0(x, (sqz_block_q5_0 *)out[i].data + r * nb, n_in, st->x2);
            else row_q5_1(x, (sqz_block_q5_1 *)out[i].data + r * nb, n_in, st->x2);
        }
        out[i].seconds = sqz_now_seconds() - t0;
    }
    if (smooth)
        for (int64_t j = 0; j < n_in; j++) smooth[j] = 1.0f;
    return SQZ_OK;
}

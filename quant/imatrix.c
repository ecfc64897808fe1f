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
 * weighted squared error. The K-quants (Q2_K ... Q6_K) are core's sqz_quantize_k, llama.cpp's
 * quantize_q*_K with the same quant_weights.
 */
#include <float.h>
#include <string.h>

#include "core/blocks.h"
#include "core/quant_ref.h"
#include "quant/quant_internal.h"

#define GROUP_MAX_EPS 1e-15f
#define MAXI(a, b) ((a) > (b) ? (a) : (b))
#define MINI(a, b) ((a) < (b) ? (a) : (b))

/* ggml's nearest_int: round half to even through the 1.5 * 2^23 trick (|v| <= 4194303). */
static inline int nearest_int(float fval) {
    float val = fval + 12582912.f;
    int i;
    memcpy(&i, &val, sizeof(int));
    return (i & 0x007fffff) - 0x00400000;
}

/* make_qx_quants(n, nmax, x, L, rmse_type = 1, qw) */
static float make_qx_quants(int n, int nmax, const float *x, int8_t *L, const float *qw) {
    float max = 0, amax = 0;
    for (int i = 0; i < n; ++i) {
        float ax = fabsf(x[i]);
        if (ax > amax) { amax = ax; max = x[i]; }
    }
    if (amax < GROUP_MAX_EPS) {
        for (int i = 0; i < n; ++i) L[i] = 0;
        return 0.f;
    }
    float iscale = -nmax / max;
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; ++i) {
        int l = nearest_int(iscale * x[i]);
        l = MAXI(-nmax, MINI(nmax - 1, l));
        L[i] = (int8_t)(l + nmax);
        float w = qw[i];
        sumlx += w * x[i] * l;
        suml2 += w * l * l;
    }
    float scale = suml2 ? sumlx / suml2 : 0.0f;
    float best = scale * sumlx;
    for (int is = -9; is <= 9; ++is) {
        if (is == 0) continue;
        iscale = -(nmax + 0.1f * is) / max;
        sumlx = suml2 = 0;
        for (int i = 0; i < n; ++i) {
            int l = nearest_int(iscale * x[i]);
            l = MAXI(-nmax, MINI(nmax - 1, l));
            float w = qw[i];
            sumlx += w * x[i] * l;
            suml2 += w * l * l;
        }
        if (suml2 > 0 && sumlx * sumlx > best * suml2) {
            for (int i = 0; i < n; ++i) {
                int l = nearest_int(iscale * x[i]);
                L[i] = (int8_t)(nmax + MAXI(-nmax, MINI(nmax - 1, l)));
            }
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    return scale;
}

/* make_qkx3_quants(n, nmax, x, weights, L, the_min, Laux, rmin, rdelta, nstep, use_mad = false) */
static float make_qkx3_quants(int n, int nmax, const float *x, const float *weights, uint8_t *L, float *the_min,
                              uint8_t *Laux, float rmin, float rdelta, int nstep) {
    float min = x[0], max = x[0];
    float sum_w = weights[0];
    float sum_x = sum_w * x[0];
    for (int i = 1; i < n; ++i) {
        if (x[i] < min) min = x[i];
        if (x[i] > max) max = x[i];
        float w = weights[i];
        sum_w += w;
        sum_x += w * x[i];
    }
    if (min > 0) min = 0;
    if (max <= min) {
        memset(L, 0, (size_t)n);
        *the_min = -min;
        return 0.f;
    }
    float iscale = nmax / (max - min);
    float scale = 1 / iscale;
    float best_mad = 0;
    for (int i = 0; i < n; ++i) {
        int l = nearest_int(iscale * (x[i] - min));
        L[i] = (uint8_t)MAXI(0, MINI(nmax, l));
        float diff = scale * L[i] + min - x[i];
        diff = diff * diff;
        best_mad += weights[i] * diff;
    }
    if (nstep < 1) {
        *the_min = -min;
        return scale;
    }
    for (int is = 0; is <= nstep; ++is) {
        iscale = (rmin + rdelta * is + nmax) / (max - min);
        float sum_l = 0, sum_l2 = 0, sum_xl = 0;
        for (int i = 0; i < n; ++i) {
            int l = nearest_int(iscale * (x[i] - min));
            l = MAXI(0, MINI(nmax, l));
            Laux[i] = (uint8_t)l;
            float w = weights[i];
            sum_l += w * l;
            sum_l2 += w * l * l;
            sum_xl += w * l * x[i];
        }
        float D = sum_w * sum_l2 - sum_l * sum_l;
        if (D > 0) {
            float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
            float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
            if (this_min > 0) {
                this_min = 0;
                this_scale = sum_xl / sum_l2;
            }
            float mad = 0;
            for (int i = 0; i < n; ++i) {
                float diff = this_scale * Laux[i] + this_min - x[i];
                diff = diff * diff;
                mad += weights[i] * diff;
            }
            if (mad < best_mad) {
                for (int i = 0; i < n; ++i) L[i] = Laux[i];
                best_mad = mad;
                scale = this_scale;
                min = this_min;
            }
        }
    }
    *the_min = -min;
    return scale;
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
        float d = make_qx_quants(SQZ_QK4_0, 8, xb, L, weight);
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
        float d = make_qkx3_quants(SQZ_QK4_1, 15, xb, weight, L, &min, Laux, -0.9f, 0.05f, 36);
        y[ib].d = sqz_fp32_to_fp16(d);
        y[ib].m = sqz_fp32_to_fp16(-min);
        for (int j = 0; j < 16; ++j) y[ib].qs[j] = (uint8_t)(L[j] | (L[j + 16] << 4));
    }
}

/* quantize_row_q5_0_impl / quantize_row_q5_1_impl: as Q4_0/Q4_1 with 16 / 31 levels, the
 * fifth bit of element j in bit j of qh (j + 16 for the upper half). */
static void put_q5(const uint8_t *L, uint8_t *qs, uint8_t qh_bytes[4]) {
    uint32_t qh = 0;
    for (int j = 0; j < 16; ++j) {
        qs[j] = (uint8_t)((L[j] & 0x0F) | ((L[j + 16] & 0x0F) << 4));
        qh |= ((L[j] & 0x10u) >> 4) << j;
        qh |= ((L[j + 16] & 0x10u) >> 4) << (j + 16);
    }
    memcpy(qh_bytes, &qh, sizeof qh);
}

static void row_q5_0(const float *x, sqz_block_q5_0 *y, int64_t n_per_row, const float *quant_weights) {
    float weight[SQZ_QK5_0];
    int8_t L[SQZ_QK5_0];
    uint8_t U[SQZ_QK5_0];
    const float sigma2 = row_sigma2(x, n_per_row);
    for (int64_t ib = 0; ib < n_per_row / SQZ_QK5_0; ++ib) {
        const float *xb = x + SQZ_QK5_0 * ib;
        const float *qw = quant_weights + SQZ_QK5_0 * ib;
        for (int j = 0; j < SQZ_QK5_0; ++j) weight[j] = qw[j] * sqrtf(sigma2 + xb[j] * xb[j]);
        float d = make_qx_quants(SQZ_QK5_0, 16, xb, L, weight);
        y[ib].d = sqz_fp32_to_fp16(d);
        for (int j = 0; j < SQZ_QK5_0; ++j) U[j] = (uint8_t)L[j];
        put_q5(U, y[ib].qs, y[ib].qh);
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
        float d = make_qkx3_quants(SQZ_QK5_1, 31, xb, weight, L, &min, Laux, -0.9f, 0.05f, 36);
        y[ib].d = sqz_fp32_to_fp16(d);
        y[ib].m = sqz_fp32_to_fp16(-min);
        put_q5(L, y[ib].qs, y[ib].qh);
    }
}

sqz_status sqz_quant_imatrix(const sqz_qlinear *lin, int n_lin, const sqz_qstats *st, const sqz_quant_opts *o,
                             sqz_qmatrix *out, float *smooth) {
    SQZ_TRY(sqz__check_method_args("imatrix", lin, n_lin, st, o, SQZ_QSTAT_X2, smooth, false));
    const sqz_qformat f = o->target.fmt;
    const bool kquant = sqz_qformat_is_gguf(f) && sqz_dtype_info(sqz_qformat_dtype(f))->block_size == SQZ_QK_K;
    SQZ_RETURN_IF(f != SQZ_QFMT_Q4_0 && f != SQZ_QFMT_Q4_1 && f != SQZ_QFMT_Q5_0 && f != SQZ_QFMT_Q5_1 && !kquant,
                  SQZ_ERR_UNSUPPORTED, "imatrix: target %s (q4_0, q4_1, q5_0, q5_1, q2_k ... q6_k; llama.cpp ignores the importance matrix for "
                  "q8_0)", sqz_qformat_name(f));
    const int64_t n_in = st->n_in;
    for (int64_t j = 0; j < n_in; j++)
        SQZ_RETURN_IF(!(st->x2[j] >= 0.0f) || !isfinite(st->x2[j]), SQZ_ERR_INVALID_ARG,
                      "imatrix: E[x^2] of channel %lld is %g", (long long)j, (double)st->x2[j]);
    for (int i = 0; i < n_lin; i++) {
        const double t0 = sqz__now();
        sqz_status s = sqz_qmatrix_alloc(&out[i], &o->target, lin[i].n_out, n_in);
        if (s != SQZ_OK) {
            for (int j = 0; j < i; j++) sqz_qmatrix_free(&out[j]);
            return s;
        }
        const int64_t nb = n_in / 32;
        if (kquant) /* llama.cpp's quantize_q*_K with quant_weights (core/kquant.c) */
            sqz_quantize_k(out[i].dtype, lin[i].w, out[i].data, lin[i].n_out, n_in, st->x2);
        for (int64_t r = 0; !kquant && r < lin[i].n_out; r++) {
            const float *x = lin[i].w + r * n_in;
            if (f == SQZ_QFMT_Q4_0) row_q4_0(x, (sqz_block_q4_0 *)out[i].data + r * nb, n_in, st->x2);
            else if (f == SQZ_QFMT_Q4_1) row_q4_1(x, (sqz_block_q4_1 *)out[i].data + r * nb, n_in, st->x2);
            else if (f == SQZ_QFMT_Q5_0) row_q5_0(x, (sqz_block_q5_0 *)out[i].data + r * nb, n_in, st->x2);
            else row_q5_1(x, (sqz_block_q5_1 *)out[i].data + r * nb, n_in, st->x2);
        }
        out[i].seconds = sqz__now() - t0;
    }
    if (smooth)
        for (int64_t j = 0; j < n_in; j++) smooth[j] = 1.0f;
    return SQZ_OK;
}

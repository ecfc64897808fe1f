/*
 * runtime/weights.c - getting weights into a form the backend multiplies.
 *
 * Float weights the backend supports (f32/f16/bf16 on the CPU) go to it as they are,
 * straight from the mapping. Others (GGUF blocks, sqz's I8/U4/FP8 schemes of sqz/qparams.h) are
 * dequantized to f32: once per matrix and kept (SQZ_WEIGHTS_CACHE), or in panels of
 * SQZ__PANEL_ROWS rows at every use (SQZ_WEIGHTS_STREAM; memory bounded by one panel).
 *
 * A scheme-quantized layer (t->qp) runs as sqz/qparams.h defines it: an unfolded smoothing
 * vector divides the input (y = (x / in_scale) . W^T), and a W8A8 layer quantizes its input
 * to int8 first (per token: scale absmax / 127; static: the calibrated act_scale; values
 * clamp(rint(x / scale), -127, 127); on compressed-tensors' grid, which its files declare,
 * absmax / 127.5 and [-128, 127], sqz/qparams.h's sqz_act_grid; W8A8-FP8: to FP8 E4M3 per token, absmax / 448).
 * The integer product is computed in float on the dequantized operands: x_q * scale and w_q * w_scale are exact in f32, so this equals the
 * backends' INT8 GEMM up to the rounding of the float accumulation.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/backend_impl.h"
#include "runtime/runtime_internal.h"
#include "sqz/qparams.h"

int64_t sqz__tensor_index(const sqz_session *s, const sqz_tensor *t) { return (int64_t)(t - s->m->tensors); }

static sqz_status check_data(const sqz_tensor *t) {
    SQZ_RETURN_IF(!t->data, SQZ_ERR_INVALID_ARG, "runtime: tensor '%s' has no data loaded", t->name);
    const sqz_dtype_traits *tr = sqz_dtype_info(t->dtype);
    SQZ_RETURN_IF(!tr || !tr->to_f32, SQZ_ERR_UNSUPPORTED, "runtime: tensor '%s' of dtype %s has no float view",
                  t->name, sqz_dtype_name(t->dtype));
    return SQZ_OK;
}

/* The cached f32 copy of a whole tensor, made on first use. */
static sqz_status cached_f32(sqz_session *s, const sqz_tensor *t, const float **out) {
    int64_t i = sqz__tensor_index(s, t);
    if (!s->wcache[i]) {
        SQZ_TRY(check_data(t));
        int64_t ne = sqz_tensor_nelements(t);
        size_t bytes;
        SQZ_RETURN_IF(!sqz__mul_size((size_t)ne, sizeof(float), &bytes), SQZ_ERR_NOMEM,
                      "runtime: tensor '%s' too large", t->name);
        float *f = sqz__malloc(bytes);
        if (!f) return SQZ_ERR_NOMEM;
        sqz_status st = sqz_tensor_to_f32(t, f);
        if (st != SQZ_OK) {
            free(f);
            sqz__error_prefix("runtime: tensor '%s'", t->name);
            return st;
        }
        s->wcache[i] = f;
        s->wcache_bytes += (int64_t)bytes;
    }
    *out = s->wcache[i];
    return SQZ_OK;
}

sqz_status sqz__vec(sqz_session *s, const sqz_tensor *t, const float **out) {
    *out = NULL;
    if (!t) return SQZ_OK;
    if (t->dtype == SQZ_DTYPE_F32 && t->data) {
        *out = t->data;
        return SQZ_OK;
    }
    return cached_f32(s, t, out);
}

sqz_status sqz__param(sqz_session *s, sqz_role role, int32_t layer, sqz_param param, const float **out) {
    return sqz__vec(s, sqz__st(s, role, layer, param), out);
}

/* Rows [row0, row0 + n) of a weight as f32 into out (n * row_len floats). */
static sqz_status rows_f32(const sqz_tensor *t, int64_t row0, int64_t n, float *out) {
    int64_t k = sqz_tensor_row_len(t);
    if (t->qp) { /* checked once by sqz_session_new (sqz__check_weights) */
        sqz_qparams_rows_to_f32(t->qp, t->data, row0, n, out);
        return SQZ_OK;
    }
    const sqz_dtype_traits *tr = sqz_dtype_info(t->dtype);
    size_t row_bytes = t->nbytes / (size_t)sqz_tensor_nrows(t);
    tr->to_f32((const uint8_t *)t->data + (size_t)row0 * row_bytes, out, n * k);
    return SQZ_OK;
}

sqz_status sqz__embed_rows(const sqz_tensor *t, const int32_t *tokens, int64_t n, float *out) {
    SQZ_TRY(check_data(t));
    int64_t d = sqz_tensor_row_len(t);
    for (int64_t i = 0; i < n; i++) SQZ_TRY(rows_f32(t, tokens[i], 1, out + i * d));
    return SQZ_OK;
}

static void add_bias(float *y, int64_t m, int64_t n, int64_t ldy, const float *bias) {
    for (int64_t i = 0; i < m; i++) {
        float *r = y + i * ldy;
        for (int64_t j = 0; j < n; j++) r[j] += bias[j];
    }
}

/* The input a scheme-quantized layer multiplies: x / in_scale, then (W8A8) quantized to int8
 * and expressed in float, into s->xq. Returns x itself when the layer takes it as it is. */
static sqz_status layer_input(sqz_session *s, const sqz_tensor *w, const float *x, int64_t m, int64_t k,
                              const float **out) {
    const sqz_qparams *qp = w->qp;
    *out = x;
    if (!qp || (!qp->in_scale && qp->act_mode == SQZ_ACT_FLOAT)) return SQZ_OK;
    if (!s->xq) {
        size_t n;
        SQZ_RETURN_IF(!sqz__mul_size((size_t)s->max_tokens, (size_t)s->max_k, &n) ||
                          !sqz__mul_size(n, sizeof(float), &n), SQZ_ERR_NOMEM, "runtime: input scratch too large");
        s->xq = sqz__malloc(n);
        if (!s->xq) return SQZ_ERR_NOMEM;
        s->scratch_bytes += (int64_t)n;
    }
    SQZ_RETURN_IF(k > s->max_k, SQZ_ERR_INVALID_ARG, "runtime: tensor '%s': %lld inputs exceed the scratch",
                  w->name, (long long)k);
    for (int64_t i = 0; i < m; i++) {
        const float *xr = x + i * k;
        float *q = s->xq + i * k;
        for (int64_t c = 0; c < k; c++) q[c] = qp->in_scale ? xr[c] / qp->in_scale[c] : xr[c];
        if (qp->act_mode == SQZ_ACT_FLOAT) continue;
        if (qp->act_grid == SQZ_ACT_GRID_FP8) {
            sqz__fp8_act_rows(q, 1, k, qp->act_mode == SQZ_ACT_STATIC_TENSOR ? qp->act_scale : 0.0f);
            continue;
        }
        /* the grid the layer's file declares: sqz's [-127, 127] and absmax / 127, or
         * compressed-tensors' [-128, 127] and absmax / 127.5 (x / s, clamp, round half to even) */
        const bool ct = qp->act_grid == SQZ_ACT_GRID_CTENSORS;
        const float lo = ct ? -128.0f : -127.0f;
        float sc = qp->act_scale;
        if (qp->act_mode == SQZ_ACT_DYNAMIC_TOKEN) {
            float amax = 0;
            bool finite = true;
            for (int64_t c = 0; c < k; c++) {
                finite = finite && isfinite(q[c]);
                if (fabsf(q[c]) > amax) amax = fabsf(q[c]);
            }
            sc = finite ? amax / (ct ? 127.5f : 127.0f) : NAN; /* a NaN/inf row gives NaN outputs, as the backends */
        }
        for (int64_t c = 0; c < k; c++) {
            float v = sc > 0 ? rintf(q[c] / sc) : 0.0f;
            v = v > 127.0f ? 127.0f : v < lo ? lo : v;
            q[c] = isnan(sc) ? NAN : (isnan(v) ? 0.0f : v * sc);
        }
    }
    *out = s->xq;
    return SQZ_OK;
}

static sqz_status linear(sqz_session *s, const float *x, int64_t m, const sqz_tensor *w, int64_t row0, int64_t n,
                         const float *bias, float *y);

sqz_status sqz__linear(sqz_session *s, const float *x, int64_t m, const sqz_tensor *w, const float *bias, float *y) {
    const double t0 = sqz__prof_begin();
    const sqz_status st = linear(s, x, m, w, 0, w->shape[0], bias, y);
    sqz__prof_end(SQZ__PROF_FWD_LINEAR, t0);
    return st;
}

sqz_status sqz__linear_slice(sqz_session *s, const float *x, int64_t m, const sqz_tensor *w, int64_t e, float *y) {
    SQZ_RETURN_IF(w->ndim != 3 || e < 0 || e >= w->shape[0] || w->qp || s->dcache, SQZ_ERR_INVALID_ARG,
                  "runtime: tensor '%s': no matrix %lld of a stacked float or block tensor on the host", w->name,
                  (long long)e);
    const double t0 = sqz__prof_begin();
    const sqz_status st = linear(s, x, m, w, e * w->shape[1], w->shape[1], NULL, y);
    sqz__prof_end(SQZ__PROF_FWD_LINEAR, t0);
    return st;
}

/* y (m, n) = x . rows [row0, row0 + n) of w ^T (+ bias): all of a matrix, or one matrix of a stacked
 * tensor (row0 > 0 only on the host, without qparams: sqz__linear_slice checks). */
static sqz_status linear(sqz_session *s, const float *x, int64_t m, const sqz_tensor *w, int64_t row0, int64_t n,
                         const float *bias, float *y) {
    const int64_t k = sqz_tensor_row_len(w);
    const size_t off = (size_t)row0 * (w->nbytes / (size_t)sqz_tensor_nrows(w));
    if (m == 0) return SQZ_OK;
    SQZ_TRY(layer_input(s, w, x, m, k, &x));
    if (s->dcache) { /* a device backend */
        SQZ_TRY(sqz__dev_linear(s, x, m, w, y));
        if (bias) add_bias(y, m, n, n, bias);
        return SQZ_OK;
    }
    sqz_matmul_args a = {.m = m, .n = n, .k = k, .x = x, .w = w->data, .w_dtype = w->dtype, .bias = bias, .y = y,
                         .acts = s->acts};
    if (!w->qp && sqz_backend_supports(s->be, SQZ_OP_MATMUL, w->dtype)) {
        SQZ_TRY(check_data(w));
        a.w = (const uint8_t *)sqz__resident(s, w, m) + off;
        return s->be->ops->matmul(s->be->ctx, &a);
    }
    SQZ_RETURN_IF(!sqz_backend_supports(s->be, SQZ_OP_MATMUL, SQZ_DTYPE_F32), SQZ_ERR_UNSUPPORTED,
                  "runtime: backend %s has no f32 matmul", s->be->ops->name);
    if (s->wmode == SQZ_WEIGHTS_CACHE) {
        const float *f = NULL;
        SQZ_TRY(cached_f32(s, w, &f));
        a.w = f + row0 * k;
        a.w_dtype = SQZ_DTYPE_F32;
        return s->be->ops->matmul(s->be->ctx, &a);
    }
    /* Stream: dequantize SQZ__PANEL_ROWS rows at a time, multiply into panel_out, scatter. */
    SQZ_TRY(check_data(w));
    SQZ_RETURN_IF(k > s->max_k, SQZ_ERR_INVALID_ARG, "runtime: tensor '%s': rows of %lld exceed the panel",
                  w->name, (long long)k);
    for (int64_t j0 = 0; j0 < n; j0 += SQZ__PANEL_ROWS) {
        int64_t nj = n - j0 < SQZ__PANEL_ROWS ? n - j0 : SQZ__PANEL_ROWS;
        SQZ_TRY(rows_f32(w, row0 + j0, nj, s->panel));
        sqz_matmul_args p = {.m = m, .n = nj, .k = k, .x = x, .w = s->panel, .w_dtype = SQZ_DTYPE_F32,
                             .bias = NULL, .y = s->panel_out};
        SQZ_TRY(s->be->ops->matmul(s->be->ctx, &p));
        for (int64_t i = 0; i < m; i++) memcpy(y + i * n + j0, s->panel_out + i * nj, (size_t)nj * sizeof(float));
    }
    if (bias) add_bias(y, m, n, n, bias);
    return SQZ_OK;
}

void sqz_session_invalidate(sqz_session *s, int32_t layer) {
    if (!s) return;
    if (s->dcache) sqz__dev_invalidate(s, layer);
    sqz__resident_invalidate(s, layer);
    for (int64_t i = 0; i < s->n_wcache && i < s->m->n_tensors; i++) {
        if (!s->wcache[i]) continue;
        if (layer == -2 || s->m->tensors[i].layer == layer) {
            s->wcache_bytes -= sqz_tensor_nelements(&s->m->tensors[i]) * (int64_t)sizeof(float);
            free(s->wcache[i]);
            s->wcache[i] = NULL;
        }
    }
}

sqz_status sqz__check_weights(const sqz_session *s) {
    const sqz_model *m = s->m;
    for (int64_t i = 0; i < m->n_tensors; i++) {
        const sqz_tensor *t = &m->tensors[i];
        if (t->qp) SQZ_TRY(sqz_qparams_check(t->qp, t->dtype, t->nbytes, t->name));
        if (t->qp && t->qp->in_scale) {
            for (int64_t c = 0; c < t->qp->n_in; c++) {
                SQZ_RETURN_IF(!(t->qp->in_scale[c] > 0) || !isfinite(t->qp->in_scale[c]), SQZ_ERR_INVALID_ARG,
                              "runtime: tensor '%s': in_scale[%lld] = %g is not a positive number", t->name,
                              (long long)c, (double)t->qp->in_scale[c]);
            }
        }
        const sqz_dtype_traits *tr = sqz_dtype_info(t->dtype);
        SQZ_RETURN_IF(!t->qp && (!tr || !tr->to_f32), SQZ_ERR_UNSUPPORTED,
                      "runtime: tensor '%s' of dtype %s has no float view", t->name, sqz_dtype_name(t->dtype));
    }
    return SQZ_OK;
}

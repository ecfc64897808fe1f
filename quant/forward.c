/*
 * quant/forward.c - running a quantized layer as it would run (weight-only in float, W8A8
 * through the exact INT8 GEMM), and the error helpers the searches and the report use.
 */
#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/gemm_i8.h"
#include "kernels/cpu/gemm_ref.h"
#include "quant/quant_internal.h"

double sqz__rel_err(const float *a, const float *b, int64_t n) {
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) {
        const double d = (double)a[i] - (double)b[i];
        num += d * d;
        den += (double)b[i] * (double)b[i];
    }
    return den > 0 ? sqrt(num / den) : (num > 0 ? INFINITY : 0.0);
}

double sqz__out_err2(const float *x, int64_t n_x, int64_t n_in, const float *a, const float *b, int64_t n_out,
                     float *ya, float *yb, bool have_ya) {
    if (!have_ya)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)n_x, (int)n_out, (int)n_in, 1.0f, x, (int)n_in, a,
                    (int)n_in, 0.0f, ya, (int)n_out);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)n_x, (int)n_out, (int)n_in, 1.0f, x, (int)n_in, b,
                (int)n_in, 0.0f, yb, (int)n_out);
    double e = 0;
    for (int64_t i = 0; i < n_x * n_out; i++) {
        const double d = (double)ya[i] - (double)yb[i];
        e += d * d;
    }
    return e;
}

sqz_status sqz_qmatrix_forward(const sqz_qmatrix *q, const float *x, int64_t m, float *y) {
    const int64_t n_in = q->n_in, n_out = q->n_out;
    SQZ_RETURN_IF(m < 0 || m > (1 << 30) || n_in > (1 << 30) || n_out > (1 << 30), SQZ_ERR_INVALID_ARG,
                  "quantized forward: sizes out of range");
    if (m == 0) return SQZ_OK;
    size_t xn, wn;
    SQZ_RETURN_IF(!sqz__mul_size((size_t)m, (size_t)n_in, &xn) || !sqz__mul_size((size_t)n_out, (size_t)n_in, &wn),
                  SQZ_ERR_INVALID_ARG, "quantized forward: sizes overflow");
    float *xs = NULL;
    const float *xin = x;
    if (q->qp.in_scale) {
        xs = sqz__malloc(xn * sizeof(float));
        if (!xs) return SQZ_ERR_NOMEM;
        for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < n_in; j++) xs[i * n_in + j] = x[i * n_in + j] / q->qp.in_scale[j];
        xin = xs;
    }
    sqz_status st = SQZ_OK;
    if (q->qp.act_grid == SQZ_ACT_GRID_FP8) { /* W8A8-FP8: the inputs on their FP8 grid, then the float product */
        float *xf = xs ? xs : sqz__malloc(xn * sizeof(float));
        if (!xf) return SQZ_ERR_NOMEM;
        if (!xs) memcpy(xf, x, xn * sizeof(float));
        sqz__fp8_act_rows(xf, m, n_in, q->qp.act_mode == SQZ_ACT_STATIC_TENSOR ? q->qp.act_scale : 0.0f);
        xin = xs = xf;
    }
    if (q->qp.act_mode == SQZ_ACT_FLOAT || q->qp.scheme != SQZ_QSCHEME_I8_ROW) {
        float *w = sqz__malloc(wn * sizeof(float));
        if (!w) { free(xs); return SQZ_ERR_NOMEM; }
        st = sqz_qmatrix_to_f32(q, w);
        if (st == SQZ_OK)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)m, (int)n_out, (int)n_in, 1.0f, xin, (int)n_in,
                        w, (int)n_in, 0.0f, y, (int)n_out);
        free(w);
    } else {
        int8_t *xq = sqz__malloc(xn);
        float *xsc = sqz__malloc((size_t)m * sizeof(float));
        if (!xq || !xsc) { free(xq); free(xsc); free(xs); return SQZ_ERR_NOMEM; }
        if (q->qp.act_mode == SQZ_ACT_DYNAMIC_TOKEN) {
            sqz__quantize_rows_i8_ref(xin, m, n_in, xq, xsc);
        } else {
            sqz_quantize_act_static(xin, m, n_in, q->qp.act_scale, xq);
            for (int64_t i = 0; i < m; i++) xsc[i] = q->qp.act_scale;
        }
        st = sqz__gemm_i8_cpu(SQZ_I8_PATH_AUTO, m, n_out, n_in, xq, xsc, q->data, q->qp.scales, y, SQZ_DTYPE_F32);
        free(xsc);
        free(xq);
    }
    free(xs);
    return st;
}

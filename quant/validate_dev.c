/*
 * quant/validate_dev.c - the products that validate a compressed layer on the calibration
 * sample rows: the float layer (yr = x . W^T) and the compressed one as it would run (yq), on
 * the host (the backend NULL or host memory: sgemm and the CPU INT8 GEMM, as always) or on a
 * device backend (`--device cuda`): the float layer by the device's f32 matmul, the compressed
 * one through the device kernel its format has (W8A8: the INT8 GEMM; Q4_0/Q4_1: the W4A16 GEMM,
 * inputs in fp16 as that kernel takes them), else dequantized on the host and multiplied by the
 * device's matmul. `by` names the kernel (the report's validated_by).
 */
#include <cblas.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/backend_impl.h"
#include "quant/judge.h"

typedef struct dev {
    sqz_backend *be;
    void *bufs[8];
    int n;
} dev;

static void *dev_put(dev *d, const void *host, size_t bytes) {
    if (d->n == 8) return NULL;
    void *p = d->be->ops->alloc(d->be->ctx, bytes ? bytes : 4);
    if (p && host && d->be->ops->upload(d->be->ctx, p, host, bytes) != SQZ_OK) {
        d->be->ops->free(d->be->ctx, p);
        return NULL;
    }
    if (p) d->bufs[d->n++] = p;
    return p;
}

static void dev_release(dev *d) {
    for (int i = 0; i < d->n; i++) d->be->ops->free(d->be->ctx, d->bufs[i]);
    d->n = 0;
}

/* y (n_x, no) f32 host = x (n_x, ni) host . w (no, ni) f32 host ^T, on the device. */
static sqz_status dev_matmul(dev *d, const float *x, int64_t n_x, const float *w, int64_t no, int64_t ni, float *y) {
    const size_t xb = (size_t)n_x * (size_t)ni * 4, wb = (size_t)no * (size_t)ni * 4, yb = (size_t)n_x * (size_t)no * 4;
    float *dx = dev_put(d, x, xb), *dw = dev_put(d, w, wb), *dy = dev_put(d, NULL, yb);
    if (!dx || !dw || !dy) return SQZ_ERR_NOMEM;
    const sqz_matmul_args a = {.m = n_x, .n = no, .k = ni, .x = dx, .w = dw, .w_dtype = SQZ_DTYPE_F32, .y = dy};
    SQZ_TRY(d->be->ops->matmul(d->be->ctx, &a));
    return d->be->ops->download(d->be->ctx, y, dy, yb);
}

/* W8A8 (I8 per row, int8 activations) through the device's INT8 GEMM; x already / in_scale. */
static sqz_status dev_i8(dev *d, const sqz_qmatrix *q, const float *x, int64_t n_x, float *y) {
    const int64_t no = q->n_out, ni = q->n_in;
    const size_t xb = (size_t)n_x * (size_t)ni, yb = (size_t)n_x * (size_t)no * 4;
    int8_t *xq = NULL;
    float *xsc = NULL;
    if (q->qp.act_mode != SQZ_ACT_DYNAMIC_TOKEN) { /* static: the calibrated scale, quantized here */
        xq = sqz__malloc(xb);
        xsc = sqz__malloc((size_t)n_x * sizeof(float));
        if (!xq || !xsc) { free(xq); free(xsc); return SQZ_ERR_NOMEM; }
        sqz_quantize_act_static(x, n_x, ni, q->qp.act_scale, xq);
        for (int64_t i = 0; i < n_x; i++) xsc[i] = q->qp.act_scale;
    }
    const bool dynamic = !xq; /* the kernel quantizes x itself */
    sqz_gemm_i8_args a = {.m = n_x, .n = no, .k = ni, .y_dtype = SQZ_DTYPE_F32};
    a.x_f32 = dynamic ? dev_put(d, x, xb * 4) : NULL;
    a.x = dev_put(d, xq, xb);
    a.x_scale = dev_put(d, xsc, (size_t)n_x * sizeof(float));
    a.w = dev_put(d, q->data, (size_t)no * (size_t)ni);
    a.w_scale = dev_put(d, q->qp.scales, (size_t)no * sizeof(float));
    a.y = dev_put(d, NULL, yb);
    free(xq);
    free(xsc);
    if ((dynamic && !a.x_f32) || !a.x || !a.x_scale || !a.w || !a.w_scale || !a.y) return SQZ_ERR_NOMEM;
    SQZ_TRY(d->be->ops->gemm_i8(d->be->ctx, &a));
    return d->be->ops->download(d->be->ctx, y, a.y, yb);
}

/* Q4_0 / Q4_1 through the device's W4A16 GEMM (x rounded to fp16, as that kernel takes it). */
static sqz_status dev_w4(dev *d, const sqz_qmatrix *q, const float *x, int64_t n_x, float *y) {
    const int64_t no = q->n_out, ni = q->n_in;
    uint16_t *xh = sqz__malloc((size_t)n_x * (size_t)ni * sizeof(uint16_t));
    if (!xh) return SQZ_ERR_NOMEM;
    for (int64_t i = 0; i < n_x * ni; i++) xh[i] = sqz_fp32_to_fp16(x[i]);
    void *prepared = NULL;
    sqz_status st = d->be->ops->prepare_w4(d->be->ctx, q->data, q->dtype, no, ni, &prepared);
    sqz_gemm_w4_args a = {.m = n_x, .n = no, .k = ni, .w = prepared, .y_dtype = SQZ_DTYPE_F32};
    if (st == SQZ_OK) {
        a.x = dev_put(d, xh, (size_t)n_x * (size_t)ni * sizeof(uint16_t));
        a.y = dev_put(d, NULL, (size_t)n_x * (size_t)no * 4);
        st = a.x && a.y ? d->be->ops->gemm_w4(d->be->ctx, &a) : SQZ_ERR_NOMEM;
    }
    if (st == SQZ_OK) st = d->be->ops->download(d->be->ctx, y, a.y, (size_t)n_x * (size_t)no * 4);
    if (prepared) d->be->ops->free(d->be->ctx, prepared);
    free(xh);
    return st;
}

/* The compressed layer on the device: the kernel its format has, else dequantized + matmul. */
static sqz_status dev_quant(dev *d, const sqz_qmatrix *q, const float *xs, int64_t n_x, const float *deq, float *yq,
                           char *by) {
    const int64_t no = q->n_out, ni = q->n_in;
    float *xin = NULL;
    if (q->qp.in_scale) { /* x / in_scale, as sqz_qmatrix_forward */
        if (!(xin = sqz__malloc((size_t)n_x * (size_t)ni * sizeof(float)))) return SQZ_ERR_NOMEM;
        for (int64_t i = 0; i < n_x; i++)
            for (int64_t j = 0; j < ni; j++) xin[i * ni + j] = xs[i * ni + j] / q->qp.in_scale[j];
    }
    const float *x = xin ? xin : xs;
    const char *name = d->be->ops->name;
    sqz_status st;
    if (q->qp.scheme == SQZ_QSCHEME_I8_ROW && q->qp.act_mode != SQZ_ACT_FLOAT &&
        sqz_backend_supports(d->be, SQZ_OP_GEMM_I8, SQZ_DTYPE_I8)) {
        snprintf(by, 24, "%s:gemm_i8", name);
        st = dev_i8(d, q, x, n_x, yq);
    } else if (q->qp.act_mode == SQZ_ACT_FLOAT && (q->dtype == SQZ_DTYPE_Q4_0 || q->dtype == SQZ_DTYPE_Q4_1) &&
               sqz_backend_supports(d->be, SQZ_OP_GEMM_W4A16, q->dtype)) {
        snprintf(by, 24, "%s:gemm_w4a16", name);
        st = dev_w4(d, q, x, n_x, yq);
    } else {
        snprintf(by, 24, "%s:matmul", name);
        float *w = deq ? NULL : sqz__malloc((size_t)no * (size_t)ni * sizeof(float));
        st = deq || w ? SQZ_OK : SQZ_ERR_NOMEM;
        if (st == SQZ_OK && w) st = sqz__qmatrix_to_f32_par(q, w, 0);
        if (st == SQZ_OK) st = dev_matmul(d, x, n_x, deq ? deq : w, no, ni, yq);
        free(w);
    }
    free(xin);
    return st;
}

sqz_status sqz__validate_float(sqz_backend *be, const float *w, int64_t no, int64_t ni, const float *x, int64_t n_x,
                               float *yr) {
    if (!be || sqz_backend_host_memory(be)) {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)n_x, (int)no, (int)ni, 1.0f, x, (int)ni, w, (int)ni,
                    0.0f, yr, (int)no);
        return SQZ_OK;
    }
    dev d = {.be = be};
    const sqz_status st = dev_matmul(&d, x, n_x, w, no, ni, yr);
    dev_release(&d);
    if (st != SQZ_OK) sqz__error_prefix("validating on %s", be->ops->name);
    return st;
}

sqz_status sqz__validate_quant(sqz_backend *be, const sqz_qmatrix *q, const float *xs, int64_t n_x, const float *deq,
                               float *yq, char by[24]) {
    if (!be || sqz_backend_host_memory(be)) {
        const bool i8 = q->qp.act_mode != SQZ_ACT_FLOAT && q->qp.scheme == SQZ_QSCHEME_I8_ROW;
        snprintf(by, 24, "cpu:%s", i8 ? "gemm_i8" : "sgemm");
        return sqz_qmatrix_forward(q, xs, n_x, yq);
    }
    dev d = {.be = be};
    const sqz_status st = dev_quant(&d, q, xs, n_x, deq, yq, by);
    dev_release(&d);
    if (st != SQZ_OK) sqz__error_prefix("validating on %s", be->ops->name);
    return st;
}

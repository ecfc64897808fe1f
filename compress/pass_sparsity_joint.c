/*
 * compress/pass_sparsity_joint.c - SparseGPT's joint mode (sparsity and quantization in one column
 * sweep, Frantar & Alistarh 2023 sec. 3.5): the quantized layers are checked (exact zeros,
 * N:M on every row), validated on the calibration sample rows, put in the report as the
 * quantization pass would, and attached to the model.
 */
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compress/compress_internal.h"
#include "sqz/family.h"

/* Zeros of the dequantized q (at least `want` when N:M holds) and the checks; deq: room for
 * n_out * n_in. */
static sqz_status check(const sqz__sparse_opts *a, const sqz_qmatrix *q, const char *name, float *deq,
                        int64_t *zeros) {
    SQZ_TRY(sqz_qmatrix_to_f32(q, deq));
    const int64_t ne = q->n_out * q->n_in;
    int64_t z = 0;
    for (int64_t i = 0; i < ne; i++) z += deq[i] == 0.0f;
    *zeros = z;
    SQZ_RETURN_IF(a->m && !sqz__sparsity_is_nm(deq, q->n_out, q->n_in, a->n, a->m), SQZ_ERR_NUMERIC,
                  "%s: a row breaks %d:%d after the joint quantization", name, a->n, a->m);
    return SQZ_OK;
}

static sqz_status validate(const sqz__sparse_opts *a, const sqz_qmatrix *q, const float *w, const float *deq,
                           const sqz_calib_input *in, sqz_layer_report *row) {
    row->weight_err = sqz__rel_err(deq, w, q->n_out * q->n_in);
    row->out_err = NAN;
    const int64_t nx = in && in->x ? in->st.n_x : 0;
    if (!nx) return SQZ_OK;
    float *yr = sqz__malloc((size_t)(nx * q->n_out) * sizeof(float));
    float *yq = sqz__malloc((size_t)(nx * q->n_out) * sizeof(float));
    sqz_status st = yr && yq ? SQZ_OK : SQZ_ERR_NOMEM;
    if (st == SQZ_OK) {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)nx, (int)q->n_out, (int)q->n_in, 1.0f, in->x,
                    (int)q->n_in, w, (int)q->n_in, 0.0f, yr, (int)q->n_out);
        st = sqz__sparsity_forward(a, q, in->x, nx, yq);
    }
    if (st == SQZ_OK) row->out_err = sqz__rel_err(yq, yr, nx * q->n_out);
    free(yr);
    free(yq);
    return st;
}

static void row_init(sqz_layer_report *r, const sqz_tensor *t, const sqz_qmatrix *q, const sqz__sparse_opts *a) {
    sqz__report_row_init(r, t);
    r->quantized = true;
    snprintf(r->method, sizeof r->method, "sparsegpt");
    snprintf(r->format, sizeof r->format, "%s", sqz_qformat_name(q->target.fmt));
    if (a->m) snprintf(r->why, sizeof r->why, "%d:%d jointly quantized", a->n, a->m);
    else snprintf(r->why, sizeof r->why, "sparse, jointly quantized");
    r->bits_per_weight = sqz_qmatrix_bits_per_weight(q);
    r->seconds = q->seconds;
}

sqz_status sqz__sparsity_joint(sqz_pass_ctx *c, const sqz__sparse_opts *a, const sqz_quant_opts *q,
                               const sqz_qlinear *lin, sqz_tensor **t, int n, const sqz_calib_input *in, double ratio,
                               int64_t *zeros) {
    sqz_qmatrix out[SQZ_LINEAR_GROUP_MAX];
    memset(out, 0, sizeof out);
    sqz_backend *be = c->session_opts ? c->session_opts->backend : NULL; /* --device */
    const int threads = c->session_opts ? c->session_opts->n_threads : 0;
    sqz_status st = sqz__sparsegpt(lin, n, &in->st, a, ratio, q, be, threads, out, NULL);
    for (int i = 0; i < n && st == SQZ_OK; i++) {
        float *deq = sqz__malloc((size_t)(out[i].n_out * out[i].n_in) * sizeof(float));
        int64_t z = 0;
        sqz_layer_report row;
        row_init(&row, t[i], &out[i], a);
        st = deq ? check(a, &out[i], t[i]->name, deq, &z) : SQZ_ERR_NOMEM;
        if (st == SQZ_OK) st = validate(a, &out[i], lin[i].w, deq, in, &row);
        free(deq);
        if (st == SQZ_OK) st = sqz__report_add(c->rep, &row);
        if (st == SQZ_OK) st = sqz_qmatrix_attach(c->m, t[i], &out[i]);
        *zeros += z;
    }
    for (int i = 0; i < n; i++) sqz_qmatrix_free(&out[i]);
    return st;
}

/*
 * sparse/forward.c - how a sparse quantized layer is validated: as it runs
 * (sqz_qmatrix_forward, the output error in the report), and, for a 2:4 INT8 layer, through
 * the 2:4 sparse INT8 kernel too: its weight packed into the sparse layout (sqz/sparse.h, which
 * also checks the pattern), the sample rows quantized per token, and the sparse GEMM's outputs
 * required to equal the dense INT8 GEMM's bit for bit. A float 2:4 layer (sparsity alone) is
 * checked the same way on its per-channel INT8 image: what a sparse INT8 deployment would run.
 */
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/gemm_ref.h"
#include "sparse/sparse_internal.h"
#include "sqz/sparse.h"

static sqz_status sparse_check(const sqz_qmatrix *q, const float *x, int64_t m) {
    const int64_t n = q->n_out, k = q->n_in;
    int8_t *vals = sqz__malloc((size_t)(n * k / 2)), *xq = sqz__malloc((size_t)(m * k));
    uint32_t *meta = sqz__malloc((size_t)(n * k / 32) * sizeof(uint32_t));
    float *xs = sqz__malloc((size_t)m * sizeof(float));
    float *ys = sqz__malloc((size_t)(m * n) * sizeof(float)), *yd = sqz__malloc((size_t)(m * n) * sizeof(float));
    sqz_status st = vals && xq && meta && xs && ys && yd ? SQZ_OK : SQZ_ERR_NOMEM;
    if (st == SQZ_OK) st = sqz_sp24_pack_i8(q->data, n, k, vals, meta);
    if (st == SQZ_OK) {
        sqz__quantize_rows_i8_ref(x, m, k, xq, xs);
        st = sqz_gemm_i8_sp24_ref(m, n, k, xq, xs, vals, meta, q->qp.scales, ys, SQZ_DTYPE_F32);
    }
    if (st == SQZ_OK) st = sqz__gemm_i8_ref(m, n, k, xq, xs, q->data, q->qp.scales, yd, SQZ_DTYPE_F32);
    if (st == SQZ_OK && memcmp(ys, yd, (size_t)(m * n) * sizeof(float)))
        st = SQZ_ERROR(SQZ_ERR_NUMERIC, "the 2:4 sparse INT8 kernel differs from the dense one");
    free(vals);
    free(xq);
    free(meta);
    free(xs);
    free(ys);
    free(yd);
    return st;
}

sqz_status sqz__sparsity_forward(const sqz__sparse_opts *a, const sqz_qmatrix *q, const float *x, int64_t m,
                                 float *y) {
    if (a->m == 4 && a->n == 2 && q->target.fmt == SQZ_QFMT_I8 && q->n_in % 32 == 0 && !q->qp.in_scale)
        SQZ_TRY(sparse_check(q, x, m));
    return sqz_qmatrix_forward(q, x, m, y);
}

sqz_status sqz__sparsity_check_f32(const sqz__sparse_opts *a, const float *w, int64_t n_out, int64_t n_in,
                                   const float *x, int64_t m) {
    if (!(a->m == 4 && a->n == 2) || n_in % 32 || !x || m < 1) return SQZ_OK;
    const sqz_qtarget t = {SQZ_QFMT_I8, 0};
    sqz_qmatrix q;
    memset(&q, 0, sizeof q);
    sqz_status st = sqz_quant_rtn_one(w, n_out, n_in, &t, &q);
    if (st == SQZ_OK) st = sparse_check(&q, x, m);
    sqz_qmatrix_free(&q);
    return st;
}

/*
 * quant/rows_f32.c - large matrices widened to f32 on every core (kernels/cpu/widen.c on a pool
 * of its own; the bytes are the serial conversion's). Used where one thread's conversion was a
 * visible share of a run: the mix's token embedding and output, each block's weights for the
 * methods, each compressed layer dequantized for its validation on a device.
 */
#include "kernels/cpu/widen.h"
#include "quant/quant_internal.h"

enum { MIN_PARALLEL = 1 << 22 };

sqz_status sqz__rows_to_f32(sqz_dtype from, const void *src, size_t nbytes, int64_t n_rows, int64_t n_in, float *dst,
                            int threads) {
    const int64_t n = n_rows * n_in;
    if (n_rows <= 0 || n_in <= 0) return SQZ_OK;
    sqz__pool *pool = NULL;
    if (n < MIN_PARALLEL || nbytes % (size_t)n_rows || sqz__pool_new(threads, &pool) != SQZ_OK)
        return sqz_convert(from, src, SQZ_DTYPE_F32, dst, n, NULL);
    const bool ok = sqz__widen_rows(pool, from, src, nbytes / (size_t)n_rows, n_rows, n_in, dst);
    sqz__pool_free(pool);
    return ok ? SQZ_OK : sqz_convert(from, src, SQZ_DTYPE_F32, dst, n, NULL); /* it names the problem */
}

sqz_status sqz__qmatrix_to_f32_par(const sqz_qmatrix *q, float *out, int threads) {
    if (q->qp.scheme != SQZ_QSCHEME_NONE || !q->data) return sqz_qmatrix_to_f32(q, out);
    return sqz__rows_to_f32(q->dtype, q->data, q->nbytes, q->n_out, q->n_in, out, threads);
}

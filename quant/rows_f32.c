/*
 * quant/rows_f32.c - large matrices widened to f32 on every core: the stored rows of a float or
 * GGUF block dtype are independent, so fixed chunks of rows go to a pool and the bytes are the
 * serial conversion's. Used where one thread's conversion was a visible share of a run (the mix's
 * token embedding and output, each compressed layer dequantized for its validation on a device).
 */
#include <stdatomic.h>

#include "kernels/cpu/pool.h"
#include "quant/quant_internal.h"

enum { CHUNK_ROWS = 256, MIN_PARALLEL = 1 << 22 };

typedef struct rows_job {
    sqz_dtype from;
    const uint8_t *src;
    size_t row_bytes;
    int64_t n_rows, n_in;
    float *dst;
    _Atomic int failed;
} rows_job;

static void rows_fn(void *ctx, int64_t b, int64_t e, int thread) {
    (void)thread;
    rows_job *j = ctx;
    for (int64_t c = b; c < e; c++) {
        const int64_t r0 = c * CHUNK_ROWS, nr = j->n_rows - r0 < CHUNK_ROWS ? j->n_rows - r0 : CHUNK_ROWS;
        if (sqz_convert(j->from, j->src + (size_t)r0 * j->row_bytes, SQZ_DTYPE_F32, j->dst + r0 * j->n_in,
                        nr * j->n_in, NULL) != SQZ_OK)
            j->failed = 1;
    }
}

sqz_status sqz__rows_to_f32(sqz_dtype from, const void *src, size_t nbytes, int64_t n_rows, int64_t n_in, float *dst,
                            int threads) {
    const int64_t n = n_rows * n_in;
    if (n_rows <= 0 || n_in <= 0) return SQZ_OK;
    rows_job j = {.from = from, .src = src, .row_bytes = nbytes / (size_t)n_rows, .n_rows = n_rows, .n_in = n_in,
                  .dst = dst};
    sqz__pool *pool = NULL;
    if (n < MIN_PARALLEL || nbytes % (size_t)n_rows || sqz__pool_new(threads, &pool) != SQZ_OK)
        return sqz_convert(from, src, SQZ_DTYPE_F32, dst, n, NULL);
    sqz__pool_for(pool, (n_rows + CHUNK_ROWS - 1) / CHUNK_ROWS, 1, rows_fn, &j);
    sqz__pool_free(pool);
    return j.failed ? sqz_convert(from, src, SQZ_DTYPE_F32, dst, n, NULL) : SQZ_OK; /* it names the problem */
}

sqz_status sqz__qmatrix_to_f32_par(const sqz_qmatrix *q, float *out, int threads) {
    if (q->qp.scheme != SQZ_QSCHEME_NONE || !q->data) return sqz_qmatrix_to_f32(q, out);
    return sqz__rows_to_f32(q->dtype, q->data, q->nbytes, q->n_out, q->n_in, out, threads);
}

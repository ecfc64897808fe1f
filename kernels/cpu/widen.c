/*
 * kernels/cpu/widen.c - sqz__widen_rows (widen.h): fixed chunks of 64 rows on the pool.
 */
#include "kernels/cpu/widen.h"

#include <stdatomic.h>

#include "sqz/tensor.h"

enum { CHUNK_ROWS = 64 };

typedef struct widen_job {
    sqz_dtype from;
    const uint8_t *src;
    size_t row_bytes;
    int64_t n_rows, n_in;
    float *dst;
    atomic_int failed;
} widen_job;

static void widen_fn(void *ctx, int64_t b, int64_t e, int thread) {
    (void)thread;
    widen_job *j = ctx;
    const int64_t r0 = b * CHUNK_ROWS, r1 = e * CHUNK_ROWS < j->n_rows ? e * CHUNK_ROWS : j->n_rows;
    if (sqz_convert(j->from, j->src + (size_t)r0 * j->row_bytes, SQZ_DTYPE_F32, j->dst + r0 * j->n_in,
                    (r1 - r0) * j->n_in, NULL) != SQZ_OK)
        atomic_store(&j->failed, 1);
}

bool sqz__widen_rows(sqz__pool *p, sqz_dtype from, const void *src, size_t row_bytes, int64_t n_rows, int64_t n_in,
                     float *dst) {
    widen_job j = {.from = from, .src = src, .row_bytes = row_bytes, .n_rows = n_rows, .n_in = n_in, .dst = dst};
    atomic_init(&j.failed, 0);
    if (n_rows > 0) sqz__pool_for(p, (n_rows + CHUNK_ROWS - 1) / CHUNK_ROWS, 1, widen_fn, &j);
    return !atomic_load(&j.failed);
}

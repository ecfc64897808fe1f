/* tests/unit/backend_ops.h - what test_backend_ops.c's rows share (backend_ops_*.c): a row of the
 * op x dtype table, its result (the largest error and its bound), the data every backend gets alike
 * (a seeded generator), and device buffers with a sentinel past their end.
 *
 * A row runs its op on one backend through the backend table only (alloc, upload, the op,
 * synchronize, download), so that the same code checks host and device memory, and checks every
 * output element against a reference the row computes itself, in double, from the inputs (the
 * weights dequantized by core's scalar dequantizers), never by calling a kernel. */
#ifndef SQZ_TESTS_BACKEND_OPS_H
#define SQZ_TESTS_BACKEND_OPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sqz/backend.h"

typedef struct bo_row bo_row;

/* What one (backend, row) gave: every output element checked with |got - ref| <= bound (bound 0:
 * the bits, NaN and the sign of zero included). */
typedef struct bo_res {
    int64_t checked;        /* elements compared */
    double max_err;         /* the largest |got - ref| */
    double worst_ratio;     /* the largest |got - ref| / bound (0 when every error is 0) */
    double worst_err, worst_bound; /* at that element */
    bool fail;
    char why[256];          /* the first failure */
} bo_res;

typedef void (*bo_run_fn)(const bo_row *r, const sqz_backend *b, bo_res *res);

struct bo_row {
    sqz_op op;
    sqz_dtype dtype;       /* the weight / source dtype; SQZ_DTYPE_F32 where the op ignores it */
    const char *shapes;    /* the cases it runs, in words */
    const char *bound;     /* the tolerance, in words */
    bo_run_fn run;
    int arg;               /* the runner's own parameter (e.g. the activations of a matmul) */
    bool cpu_only;         /* a case of the CPU backend's own (e.g. q8 activations): skipped elsewhere */
};

/* ---- data: every backend gets the same inputs for a row (bo_seed before building them) ---- */
void bo_seed(uint64_t seed);
uint32_t bo_rnd(void);
float bo_rndf(void); /* uniform in [-1, 1) */
/* malloc that never returns NULL (aborts: a test without memory proves nothing) */
void *bo_malloc(size_t bytes);
float *bo_rand(int64_t n, float scale);

/* ---- comparisons ---- */
void bo_check(bo_res *res, const char *what, int64_t i, double got, double ref, double bound);
void bo_fail(bo_res *res, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---- backend memory: each buffer has BO_GUARD bytes of sentinel past its end, checked when it is
 * read back; everything is freed by bo_dev_end. The first failing call is recorded and every later
 * one is a no-op (bo_dev_ok says whether to go on). ---- */
enum { BO_GUARD = 64, BO_MAX_BUFS = 24 };
typedef struct bo_dev {
    const sqz_backend *b;
    void *p[BO_MAX_BUFS];
    size_t bytes[BO_MAX_BUFS];
    int n;
    bo_res *res;
} bo_dev;
void bo_dev_begin(bo_dev *d, const sqz_backend *b, bo_res *res);
/* bytes of backend memory holding host's (NULL: 0xff bytes, NaN as floats), then the sentinel */
void *bo_put(bo_dev *d, const void *host, size_t bytes);
/* synchronize, then host = the buffer p (from bo_put) of bytes; checks its sentinel */
void bo_get(bo_dev *d, void *host, const void *p, size_t bytes);
/* records st (with sqz_last_error) when it is not SQZ_OK */
void bo_call(bo_dev *d, const char *what, sqz_status st);
bool bo_dev_ok(const bo_dev *d);
void bo_dev_free(bo_dev *d, void *p);
void bo_dev_end(bo_dev *d);

/* ---- the runners (backend_ops_gemm.c, backend_ops_linalg.c, backend_ops_fwd.c) ---- */
void bo_run_matmul(const bo_row *r, const sqz_backend *b, bo_res *res);
void bo_run_gemm_i8(const bo_row *r, const sqz_backend *b, bo_res *res);
void bo_run_gemm_w4(const bo_row *r, const sqz_backend *b, bo_res *res);
void bo_run_gemm_i8_sp24(const bo_row *r, const sqz_backend *b, bo_res *res);
void bo_run_sgemm(const bo_row *r, const sqz_backend *b, bo_res *res);
void bo_run_to_f32(const bo_row *r, const sqz_backend *b, bo_res *res);
void bo_run_xtx(const bo_row *r, const sqz_backend *b, bo_res *res);
void bo_run_chol(const bo_row *r, const sqz_backend *b, bo_res *res);
void bo_run_tiles(const bo_row *r, const sqz_backend *b, bo_res *res);
void bo_run_colstats(const bo_row *r, const sqz_backend *b, bo_res *res);
void bo_run_cosine(const bo_row *r, const sqz_backend *b, bo_res *res);
void bo_run_rmsnorm(const bo_row *r, const sqz_backend *b, bo_res *res);
void bo_run_layernorm(const bo_row *r, const sqz_backend *b, bo_res *res);
void bo_run_rope(const bo_row *r, const sqz_backend *b, bo_res *res);
void bo_run_attention(const bo_row *r, const sqz_backend *b, bo_res *res);
void bo_run_eltwise(const bo_row *r, const sqz_backend *b, bo_res *res);

#endif

/*
 * sqz/backend.h - the compute backend interface.
 *
 * A backend is a table of function pointers (sqz_backend_ops) plus its context. The
 * CPU backend is always present; the CUDA backend exists when libsqz was built with
 * SQZ_CUDA and a device is found at run time. Callers ask supports(op, dtype) before
 * dispatching instead of failing inside; optional slots may be NULL and the
 * dispatch helpers below check them.
 *
 * Memory: every pointer passed to an op lives in the backend's memory (host memory
 * for the CPU backend, device memory for CUDA), obtained from alloc() and moved with
 * upload()/download(). Ops run asynchronously on the backend's stream;
 * synchronize() waits for them. Errors come back as sqz_status with the device's own
 * error text in sqz_last_error().
 *
 * Conventions for the GEMM ops: row-major, Y(m, n) = X(m, k) . W(n, k)^T, i.e. W is
 * stored as a linear layer's weight (out_features, in_features), m is the number of
 * tokens.
 */
#ifndef SQZ_BACKEND_H
#define SQZ_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sqz/dtype.h"
#include "sqz/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum sqz_op {
    SQZ_OP_MATMUL = 0,     /* float X (f32) x W (f32/f16/bf16) -> f32 */
    SQZ_OP_GEMM_I8 = 1,    /* W8A8: int8 X with per-token scales x int8 W with per-channel scales */
    SQZ_OP_GEMM_W4A16 = 2, /* int4 W per group x fp16 X -> f16/f32 */
    SQZ_OP_COUNT
} sqz_op;

/* Y = X . W^T (+ bias). x: (m, k) f32; w: (n, k) of w_dtype; bias: (n) f32 or NULL; y: (m, n) f32. */
typedef struct sqz_matmul_args {
    int64_t m, n, k;
    const float *x;
    const void *w;
    sqz_dtype w_dtype;
    const float *bias;
    float *y;
} sqz_matmul_args;

/* Y[i][j] = x_scale[i] * w_scale[j] * sum_k X[i][k] * W[j][k], int32 accumulation.
 * When x_f32 is non-NULL the backend quantizes it per token (absmax / 127, round to
 * nearest even) into x / x_scale itself (fused prologue); otherwise x and x_scale are
 * given. y is f32 or f16 (y_dtype). */
typedef struct sqz_gemm_i8_args {
    int64_t m, n, k;
    const float *x_f32;    /* optional (m, k) */
    int8_t *x;             /* (m, k) */
    float *x_scale;        /* (m) */
    const int8_t *w;       /* (n, k) */
    const float *w_scale;  /* (n) */
    void *y;               /* (m, n) */
    sqz_dtype y_dtype;     /* SQZ_DTYPE_F32 or SQZ_DTYPE_F16 */
} sqz_gemm_i8_args;

/* Y = X . dequant(W)^T with W int4 per group along k, prepared by prepare_w4. */
typedef struct sqz_gemm_w4_args {
    int64_t m, n, k;
    const uint16_t *x;     /* (m, k) fp16 */
    const void *w;         /* prepared weights (backend layout) */
    void *y;               /* (m, n) */
    sqz_dtype y_dtype;     /* SQZ_DTYPE_F32 or SQZ_DTYPE_F16 */
} sqz_gemm_w4_args;

typedef struct sqz_backend_ops {
    const char *name;
    bool (*supports)(void *ctx, sqz_op op, sqz_dtype w_dtype);
    void *(*alloc)(void *ctx, size_t nbytes);            /* NULL on failure (error set) */
    void (*free)(void *ctx, void *p);                    /* NULL is fine */
    sqz_status (*upload)(void *ctx, void *dst, const void *src, size_t nbytes);
    sqz_status (*download)(void *ctx, void *dst, const void *src, size_t nbytes);
    sqz_status (*synchronize)(void *ctx);
    sqz_status (*matmul)(void *ctx, const sqz_matmul_args *a);    /* optional */
    sqz_status (*gemm_i8)(void *ctx, const sqz_gemm_i8_args *a);  /* optional */
    /* Re-lays out int4 weights (n, k) of dtype src_dtype (Q4_0, Q4_1) for gemm_w4;
     * returns backend memory freed with free(). optional */
    sqz_status (*prepare_w4)(void *ctx, const void *src_host, sqz_dtype src_dtype, int64_t n,
                             int64_t k, void **prepared);
    sqz_status (*gemm_w4)(void *ctx, const sqz_gemm_w4_args *a);  /* optional */
    void (*destroy)(void *ctx);
} sqz_backend_ops;

typedef struct sqz_backend {
    const sqz_backend_ops *ops;
    void *ctx;
} sqz_backend;

/* The CPU backend (always available). Free with sqz_backend_free. n_threads 0 = all cores. */
sqz_status sqz_backend_cpu(int n_threads, sqz_backend **out);
/* The CUDA backend on `device` (-1 = first). SQZ_ERR_UNSUPPORTED when built without CUDA,
 * SQZ_ERR_DEVICE when no usable device exists. */
sqz_status sqz_backend_cuda(int device, sqz_backend **out);
void sqz_backend_free(sqz_backend *b);

/* True if the backend has the op for that weight dtype (slot present and supports() says so). */
bool sqz_backend_supports(const sqz_backend *b, sqz_op op, sqz_dtype w_dtype);

#ifdef __cplusplus
}
#endif
#endif

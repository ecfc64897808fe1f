/*
 * kernels/cpu/backend_impl.h - a backend's table of operations, its argument structs beyond the
 * public products and the handle's layout (not public: sqz/backend.h gives clients an opaque
 * sqz_backend and the products they can run; ggml-backend-impl.h's way).
 *
 * The table starts with its version and size. Bump SQZ__BACKEND_OPS_VERSION whenever a slot or an
 * argument struct changes: the CUDA loader refuses a backend whose table is of another version or
 * size (a module from another build; kernels/cuda_loader), so a mismatch is an error, not a wrong call.
 */
#ifndef SQZ_KERNELS_CPU_BACKEND_IMPL_H
#define SQZ_KERNELS_CPU_BACKEND_IMPL_H

#include "sqz/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SQZ__BACKEND_OPS_VERSION 1u

/* C(m, n) = alpha . op(A) . op(B) + beta . C, f32, row-major with leading dimensions (elements);
 * op(A) is (m, k): A itself, or A^T of A stored (k, m) when trans_a. beta 0 ignores C's contents.
 * The CPU backend is cblas_sgemm (OpenBLAS); CUDA is cublasSgemm with TF32 off (full f32). */
typedef struct sqz_sgemm_args {
    bool trans_a, trans_b;
    int64_t m, n, k;
    float alpha;
    const float *a;
    int64_t lda;
    const float *b;
    int64_t ldb;
    float beta;
    float *c;
    int64_t ldc;
} sqz_sgemm_args;

/* The upper triangle (diagonal included) of H (k, k) f64 row-major becomes
 * beta . H + X^T X, X (m, k) f32 row-major: the rows are widened to f64 and multiplied in f64
 * (a symmetric rank-m update). The strictly lower triangle is not written. beta is 0 or 1.
 * A row panel (r1 > 0): only rows [r0, r1) of that upper triangle, h pointing at element (r0, r0)
 * and row r0 + i at h + i * ldh (its column j >= r0 + i at offset j - r0); r0 a multiple of
 * SQZ_XTX_PANEL_ALIGN and r1 one too or k. A panel's entries are the bits the same backend's
 * call on rows [0, k) of a panel store forms, so a Hessian kept as panels (on the device or
 * passing through it, --gpu-mem) has the same bits wherever its panels live.
 * The CPU backend converts and multiplies SQZ_XTX_CHUNK rows at a time with dsyrk/dgemm panels
 * of 128 columns (the bits the calibration observers always had, for the whole matrix and for
 * panels alike); CUDA widens a fixed number of rows at a time (not a function of free memory)
 * and uses cublasDsyrk on the diagonal block and cublasDgemm on the rest of a panel. */
#define SQZ_XTX_CHUNK 256
#define SQZ_XTX_PANEL_ALIGN 128
typedef struct sqz_xtx_args {
    int64_t m, k;
    const float *x;
    double *h;
    double beta;
    int64_t r0, r1, ldh; /* a row panel when r1 > 0; all 0: the whole matrix */
} sqz_xtx_args;

/* ---- the block forward (SQZ_OP_RMSNORM .. SQZ_OP_GELU). Row-major f32 in backend memory. The CPU
 * backend runs the runtime's own row kernels (kernels/cpu/fwd_ops.h: double accumulations, the
 * vectorized exp), so a session on it gives the host forward's bits; a device sums in its own
 * order (float rounding apart, the same definitions). ---- */

/* y (n, d) = x / sqrt(sum(x^2) / d + eps) * w, the sum in double; y may equal x. */
typedef struct sqz_rmsnorm_args {
    const float *x;
    const float *w;   /* (d) */
    float *y;
    float eps;
    int64_t n, d;
} sqz_rmsnorm_args;

/* y (n, d) = (x - mean) / sqrt(var + eps) * w + b (b may be NULL), mean and biased variance in
 * double, then in float: (x - (float)mean) * (float)(1 / sqrt(var + eps)) * w + b; y may equal x. */
typedef struct sqz_layernorm_args {
    const float *x;
    const float *w, *b; /* (d); b may be NULL */
    float *y;
    float eps;
    int64_t n, d;
} sqz_layernorm_args;

/* Rotates n rows of x (row stride ld floats) holding n_heads heads of head_dim each; row r is at
 * position pos + r and uses the tables' row pos + r: cos_t / sin_t (positions, head_dim / 2),
 * angle p * theta^(-2i / head_dim). Pairs (2i, 2i+1) (half false: llama2.c, GGUF's interleaved
 * layout) or (i, i + head_dim/2) (half true: HF's rotate_half). */
typedef struct sqz_rope_args {
    float *x;
    int64_t ld, n, n_heads, head_dim, pos;
    bool half;
    const float *cos_t, *sin_t;
} sqz_rope_args;

/* Scaled dot-product attention of n queries at positions [pos, pos + n) over keys / values at
 * positions [0, pos + n): q (n, n_heads * head_dim, row stride ldq), k and v (pos + n,
 * n_kv_heads * head_dim, row stride ldkv), out (n, n_heads * head_dim, row stride ldo). Query head
 * h reads key / value head h / (n_heads / n_kv_heads). causal: query i sees keys [0, pos + i].
 * Scores scaled by 1 / sqrt(head_dim) in f32, softmax with max subtraction. */
typedef struct sqz_attention_args {
    const float *q;
    int64_t ldq;
    const float *k, *v;
    int64_t ldkv;
    float *out;
    int64_t ldo;
    int64_t n, pos, n_heads, n_kv_heads, head_dim;
    bool causal;
    float scale;    /* of the scores; 0: 1 / sqrt(head_dim) (the CPU honours it; other backends refuse != 0) */
    int64_t window; /* sliding window: query i sees keys (pos + i - window, pos + i]; 0: all (CPU only) */
} sqz_attention_args;

/* n elements: silu_mul: x = silu(x) * y (silu(g) = g / (1 + e^-g)); add: x += y; gelu: x = x / 2
 * (1 + erf(x / sqrt 2)), y unused (the CPU's erf is Abramowitz & Stegun 7.1.26, |error| <= 1.5e-7). */
typedef struct sqz_eltwise_args {
    float *x;
    const float *y;
    int64_t n;
} sqz_eltwise_args;

/* ---- GPTQ's factor in tiles (SQZ_OP_TILES; quant/chol_tiles.c). f64, row-major with leading
 * dimensions, in backend memory. The CPU backend is OpenBLAS (cblas_dgemm, cblas_dtrsm) and its own
 * blocked Cholesky (kernels/cpu/chol.c); CUDA is cublasDgemm, cublasDtrsm and cusolverDnXpotrf. A
 * backend gives the same bits for the same operands wherever they sit in its memory. ---- */

/* C(m, n) = alpha . op(A) . op(B) + beta . C: sqz_sgemm_args's definition in double. */
typedef struct sqz_dgemm_args {
    bool trans_a, trans_b;
    int64_t m, n, k;
    double alpha;
    const double *a;
    int64_t lda;
    const double *b;
    int64_t ldb;
    double beta;
    double *c;
    int64_t ldc;
} sqz_dgemm_args;

/* B (m, n) becomes alpha . op(A)^-1 . B (right false; A is m x m) or alpha . B . op(A)^-1 (right
 * true; A is n x n), A lower triangular with a non-unit diagonal (its strictly upper part is not
 * read); op(A) is A or, when trans, A^T. */
typedef struct sqz_dtrsm_args {
    bool right, trans;
    int64_t m, n;
    double alpha;
    const double *a;
    int64_t lda;
    double *b;
    int64_t ldb;
} sqz_dtrsm_args;

/* ---- the observers' other statistics (SQZ_OP_COLSTATS, SQZ_OP_COSINE). f32 rows in, f64 sums, in
 * backend memory. Each sum adds its rows in order with products of the widened values (exact in
 * f64), so every backend gives the host's bits: a device sums a column (or a row) in one thread. ---- */

/* Accumulated in place over the rows t = 0 .. n-1 of x (n, k), each output optional (NULL):
 * sum_x2[j] += (double)x[t][j]^2, sum_abs[j] += |x[t][j]|, sum_x[j] += x[t][j] (f64, k each);
 * absmax[j] = max(absmax[j], |x[t][j]|) (f32, k). */
typedef struct sqz_colstats_args {
    const float *x;
    int64_t n, k;
    double *sum_x2, *sum_abs, *sum_x;
    float *absmax;
} sqz_colstats_args;

/* out[t] = ab / sqrt(aa * bb) with ab, aa, bb the f64 sums over j = 0 .. d-1 of a[t][j] b[t][j],
 * a[t][j]^2, b[t][j]^2 (1 when aa or bb is 0), for the rows t of a and b (n, d): the cosine of a
 * block's input and output rows, layer scoring's block influence. out (n) f64. */
typedef struct sqz_cosine_args {
    const float *a, *b;
    int64_t n, d;
    double *out;
} sqz_cosine_args;


typedef struct sqz_backend_ops {
    uint32_t version;   /* SQZ__BACKEND_OPS_VERSION: the layout of this table */
    uint32_t size;      /* sizeof(sqz_backend_ops) */
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
    sqz_status (*gemm_i8_sp24)(void *ctx, const sqz_gemm_i8_sp24_args *a); /* optional */

    /* ---- the calibration loop (sqz compress --device, docs/device.md). Optional; tables
     * written before these end above them (zero-filled). ---- */
    bool host_memory;   /* backend memory is host memory (the CPU backend): callers may pass
                           their own buffers and skip upload/download */
    sqz_status (*sgemm)(void *ctx, const sqz_sgemm_args *a);
    sqz_status (*xtx)(void *ctx, const sqz_xtx_args *a);
    /* In place on h (n, n) f64 row-major, symmetric positive definite (damping already added):
     * h becomes U, upper triangular with a positive diagonal and U^T U = H^-1 (the factor GPTQ
     * sweeps with), the strictly lower triangle 0. SQZ_ERR_NUMERIC (h unspecified) when H is not
     * positive definite or the factor is not finite. */
    sqz_status (*chol_inv_upper)(void *ctx, double *h, int64_t n);
    /* dst (n) f32 = src (n) of dtype (F32, F16, BF16), both in backend memory. */
    sqz_status (*to_f32)(void *ctx, const void *src, sqz_dtype dtype, int64_t n, float *dst);
    /* The memory accounting; cap 0 = no cap. set_mem_cap fails with SQZ_ERR_NOMEM when more than
     * cap is already in use; afterwards alloc() returns NULL (SQZ_ERR_NOMEM, naming the cap) for
     * any request that would exceed it. */
    void (*mem_stats)(void *ctx, sqz_backend_mem *out);
    sqz_status (*set_mem_cap)(void *ctx, size_t cap);
    /* Page-locks host memory [p, p + nbytes) so that copies to and from it run at the bus's
     * speed (CUDA: cudaHostRegister); host_unpin(p) before that memory is freed. Optional: a
     * caller whose pin fails carries on unpinned. */
    sqz_status (*host_pin)(void *ctx, void *p, size_t nbytes);
    void (*host_unpin)(void *ctx, void *p);

    /* ---- the block forward (optional, supports() asked first; a session takes its device block
     * path only when its family's are there: llama rmsnorm, rope, attention, silu_mul, add; BERT
     * layernorm, attention, gelu, add). ---- */
    sqz_status (*rmsnorm)(void *ctx, const sqz_rmsnorm_args *a);
    sqz_status (*rope)(void *ctx, const sqz_rope_args *a);
    sqz_status (*attention)(void *ctx, const sqz_attention_args *a);
    sqz_status (*silu_mul)(void *ctx, const sqz_eltwise_args *a);
    sqz_status (*add)(void *ctx, const sqz_eltwise_args *a);
    sqz_status (*layernorm)(void *ctx, const sqz_layernorm_args *a);
    sqz_status (*gelu)(void *ctx, const sqz_eltwise_args *a);

    /* ---- copies beside the computation (a block's weights while the block before it runs;
     * optional, both or neither). upload_async queues a copy of host memory into backend memory on
     * the backend's copy stream (CUDA: a second stream), so that it overlaps the ops queued before
     * and after it; src must stay valid and unchanged until copies_wait returns, and page-locked
     * (host_pin) for the copy to run asynchronously at all. copies_wait returns when every copy
     * queued so far has landed (the host waits; what is queued afterwards may read them). ---- */
    sqz_status (*upload_async)(void *ctx, void *dst, const void *src, size_t nbytes);
    sqz_status (*copies_wait)(void *ctx);

    /* ---- GPTQ's factor in tiles (SQZ_OP_TILES: all three or none). dpotrf: A (n, n) row-major,
     * leading dimension lda, becomes its lower Cholesky factor L (A = L L^T) in place, reading and
     * writing the lower triangle only; SQZ_ERR_NUMERIC when A is not positive definite (A
     * unspecified then). The host waits for the device's answer. ---- */
    sqz_status (*dgemm)(void *ctx, const sqz_dgemm_args *a);
    sqz_status (*dtrsm)(void *ctx, const sqz_dtrsm_args *a);
    sqz_status (*dpotrf)(void *ctx, double *a, int64_t n, int64_t lda);

    /* ---- the observers' other statistics (optional; supports() asked first) ---- */
    sqz_status (*colstats)(void *ctx, const sqz_colstats_args *a);
    sqz_status (*cosine)(void *ctx, const sqz_cosine_args *a);
} sqz_backend_ops;

struct sqz_backend {
    const sqz_backend_ops *ops;
    void *ctx;
};

/* Whether a table has this build's layout (version and size). */
static inline bool sqz__backend_ops_ok(const sqz_backend_ops *o) {
    return o && o->version == SQZ__BACKEND_OPS_VERSION && o->size == sizeof *o;
}

#ifdef __cplusplus
}
#endif
#endif

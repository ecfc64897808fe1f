/*
 * kernels/cuda/calib_cuda.cu - the CUDA backend's float slots: matmul on f32/f16/bf16 weights,
 * sgemm, xtx, chol_inv_upper and to_f32 (calib_cuda.cuh; contracts in sqz/backend.h).
 *
 * Row-major to cuBLAS's column-major: a row-major (r, c) buffer with leading dimension ld is the
 * column-major (c, r) matrix, its transpose, with the same ld. So row-major C = op(A) op(B) is
 * column-major C^T = op(B)^T op(A)^T: the operands swap places and keep their trans flags. A
 * row-major upper triangle is the column-major lower one of the same buffer.
 */
#include <cusolverDn.h>
#include <limits.h>
#include <math.h>

#include "kernels/cpu/backend_impl.h"
#include "kernels/cuda/calib_cuda.cuh"

/* Scratch panels: the widened weights of matmul and the f64 rows of xtx stay near this size. */
static const size_t PANEL_BYTES = (size_t)64 << 20;

static const char *cusolver_name(cusolverStatus_t e) {
    switch (e) {
    case CUSOLVER_STATUS_NOT_INITIALIZED: return "CUSOLVER_STATUS_NOT_INITIALIZED";
    case CUSOLVER_STATUS_ALLOC_FAILED: return "CUSOLVER_STATUS_ALLOC_FAILED";
    case CUSOLVER_STATUS_INVALID_VALUE: return "CUSOLVER_STATUS_INVALID_VALUE";
    case CUSOLVER_STATUS_ARCH_MISMATCH: return "CUSOLVER_STATUS_ARCH_MISMATCH";
    case CUSOLVER_STATUS_EXECUTION_FAILED: return "CUSOLVER_STATUS_EXECUTION_FAILED";
    case CUSOLVER_STATUS_INTERNAL_ERROR: return "CUSOLVER_STATUS_INTERNAL_ERROR";
    case CUSOLVER_STATUS_NOT_SUPPORTED: return "CUSOLVER_STATUS_NOT_SUPPORTED";
    default: return "cuSOLVER error";
    }
}

static sqz_status cusolver_error(cusolverStatus_t e, const char *stmt, const char *file, int line) {
    const sqz_status s = e == CUSOLVER_STATUS_ALLOC_FAILED ? SQZ_ERR_NOMEM : SQZ_ERR_DEVICE;
    return sqz__error(s, file, line, "%s: %s (%d)", stmt, cusolver_name(e), (int)e);
}

#define SQZ_CUSOLVER_TRY(stmt)                                                                   \
    do {                                                                                         \
        cusolverStatus_t sqz__ss = (stmt);                                                       \
        if (sqz__ss != CUSOLVER_STATUS_SUCCESS) return cusolver_error(sqz__ss, #stmt, __FILE__, __LINE__); \
    } while (0)

/* ---- kernels (grid-stride loops over int64 indices) ------------------------------- */
static unsigned grid_for(int64_t n) {
    const int64_t b = sqz__ceil_div(n, 256);
    return (unsigned)(b < 1 ? 1 : b > 8192 ? 8192 : b);
}

#define SQZ__FOR_EACH(i, n) \
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (int64_t)gridDim.x * blockDim.x)

/* f16 / bf16 bits -> f32, exactly (bf16 is the top half of an f32). */
__global__ void widen16_kernel(const uint16_t *src, int64_t n, int bf16, float *dst) {
    SQZ__FOR_EACH(i, n) {
        const uint16_t b = src[i];
        dst[i] = bf16 ? __uint_as_float((uint32_t)b << 16) : __half2float(__ushort_as_half(b));
    }
}

__global__ void f32_to_f64_kernel(const float *src, int64_t n, double *dst) {
    SQZ__FOR_EACH(i, n) dst[i] = (double)src[i];
}

/* Rounded to nearest, as the host's (float) cast. */
__global__ void f64_to_f32_kernel(const double *src, int64_t n, float *dst) {
    SQZ__FOR_EACH(i, n) dst[i] = __double2float_rn(src[i]);
}

/* C (m, n; ldc) = beta C, C not read when beta is 0: sgemm with k = 0. */
__global__ void scale_kernel(float *c, int64_t m, int64_t n, int64_t ldc, float beta) {
    SQZ__FOR_EACH(i, m * n) {
        float *p = c + (i / n) * ldc + i % n;
        *p = beta == 0.0f ? 0.0f : beta * *p;
    }
}

__global__ void add_bias_kernel(float *y, int64_t m, int64_t n, const float *bias) {
    SQZ__FOR_EACH(i, m * n) y[i] += bias[i % n];
}

/* Reverses the flat array a (nn): both indices of a row-major square matrix (J A J). */
__global__ void reverse_kernel(double *a, int64_t nn) {
    SQZ__FOR_EACH(i, nn / 2) {
        const double t = a[i];
        a[i] = a[nn - 1 - i];
        a[nn - 1 - i] = t;
    }
}

/* Zeroes the row-major upper triangle of a (n, n): strictly (j > i) or with the diagonal. */
__global__ void zero_upper_kernel(double *a, int64_t n, int with_diag) {
    SQZ__FOR_EACH(idx, n * n) {
        const int64_t i = idx / n, j = idx % n;
        if (j > i || (with_diag && j == i)) a[idx] = 0.0;
    }
}

/* *flag = 1 when a (nn) holds a NaN or an infinity. */
__global__ void nonfinite_kernel(const double *a, int64_t nn, int *flag) {
    SQZ__FOR_EACH(i, nn)
        if (!isfinite(a[i])) *flag = 1;
}

static sqz_status widen16(sqz_cuda_ctx *c, const void *src, sqz_dtype t, int64_t n, float *dst) {
    widen16_kernel<<<grid_for(n), 256, 0, c->stream>>>((const uint16_t *)src, n, t == SQZ_DTYPE_BF16, dst);
    SQZ_CUDA_LAUNCHED();
    return SQZ_OK;
}

/* ---- sgemm / matmul ---------------------------------------------------------------- */
static bool dims_ok(int64_t m, int64_t n, int64_t k) {
    return m >= 0 && n >= 0 && k >= 0 && m <= INT_MAX && n <= INT_MAX && k <= INT_MAX;
}

sqz_status sqz__cuda_sgemm(void *ctx, const sqz_sgemm_args *a) {
    sqz_cuda_ctx *c = (sqz_cuda_ctx *)ctx;
    SQZ_RETURN_IF(!dims_ok(a->m, a->n, a->k), SQZ_ERR_INVALID_ARG, "CUDA sgemm: dimensions (%lld, %lld, %lld) out of range",
                  (long long)a->m, (long long)a->n, (long long)a->k);
    if (a->m == 0 || a->n == 0) return SQZ_OK;
    const int64_t a_cols = a->trans_a ? a->m : a->k, b_cols = a->trans_b ? a->k : a->n;
    SQZ_RETURN_IF(a->lda < (a_cols > 1 ? a_cols : 1) || a->ldb < (b_cols > 1 ? b_cols : 1) || a->ldc < a->n ||
                      a->lda > INT_MAX || a->ldb > INT_MAX || a->ldc > INT_MAX,
                  SQZ_ERR_INVALID_ARG, "CUDA sgemm: leading dimensions (%lld, %lld, %lld) do not fit (%lld, %lld, %lld)",
                  (long long)a->lda, (long long)a->ldb, (long long)a->ldc, (long long)a->m, (long long)a->n,
                  (long long)a->k);
    SQZ_RETURN_IF(!a->c || (a->k > 0 && (!a->a || !a->b)), SQZ_ERR_INVALID_ARG, "CUDA sgemm: a NULL buffer");
    SQZ_TRY(sqz__cuda_enter(c));
    if (a->k == 0) { /* C = beta C, without relying on cuBLAS's handling of an empty sum */
        scale_kernel<<<grid_for(a->m * a->n), 256, 0, c->stream>>>(a->c, a->m, a->n, a->ldc, a->beta);
        SQZ_CUDA_LAUNCHED();
        return SQZ_OK;
    }
    /* cuBLAS does not read C when beta is 0 (documented for gemm) */
    SQZ_CUBLAS_TRY(cublasSgemm(c->blas, a->trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, a->trans_a ? CUBLAS_OP_T : CUBLAS_OP_N,
                               (int)a->n, (int)a->m, (int)a->k, &a->alpha, a->b, (int)a->ldb, a->a, (int)a->lda,
                               &a->beta, a->c, (int)a->ldc));
    return SQZ_OK;
}

/* Y[:, j0:j0+nb] = X . W[j0:j0+nb]^T for f32 rows w (nb, k): column-major Y^T rows j0.. = W X^T. */
static sqz_status matmul_panel(sqz_cuda_ctx *c, const sqz_matmul_args *a, const float *w, int64_t j0, int64_t nb) {
    const float one = 1.0f, zero = 0.0f;
    SQZ_CUBLAS_TRY(cublasSgemm(c->blas, CUBLAS_OP_T, CUBLAS_OP_N, (int)nb, (int)a->m, (int)a->k, &one, w, (int)a->k,
                               a->x, (int)a->k, &zero, a->y + j0, (int)a->n));
    return SQZ_OK;
}

sqz_status sqz__cuda_matmul(void *ctx, const sqz_matmul_args *a) {
    sqz_cuda_ctx *c = (sqz_cuda_ctx *)ctx;
    SQZ_RETURN_IF(!dims_ok(a->m, a->n, a->k), SQZ_ERR_INVALID_ARG, "CUDA matmul: dimensions (%lld, %lld, %lld) out of range",
                  (long long)a->m, (long long)a->n, (long long)a->k);
    SQZ_RETURN_IF(a->w_dtype != SQZ_DTYPE_F32 && a->w_dtype != SQZ_DTYPE_F16 && a->w_dtype != SQZ_DTYPE_BF16,
                  SQZ_ERR_UNSUPPORTED, "CUDA matmul: weights of dtype %s (f32, f16 or bf16 expected)",
                  sqz_dtype_name(a->w_dtype));
    if (a->m == 0 || a->n == 0) return SQZ_OK;
    SQZ_RETURN_IF(!a->y || (a->k > 0 && (!a->x || !a->w)), SQZ_ERR_INVALID_ARG, "CUDA matmul: a NULL buffer");
    SQZ_TRY(sqz__cuda_enter(c));
    if (a->k == 0) {
        SQZ_CUDA_TRY(cudaMemsetAsync(a->y, 0, (size_t)(a->m * a->n) * sizeof(float), c->stream));
    } else if (a->w_dtype == SQZ_DTYPE_F32) {
        SQZ_TRY(matmul_panel(c, a, (const float *)a->w, 0, a->n));
    } else {
        const size_t row = (size_t)a->k * sizeof(float);
        const size_t bytes = sqz__cuda_scratch_fit(c, PANEL_BYTES > row ? PANEL_BYTES : row, row);
        const int64_t rows = (int64_t)(bytes / row) < a->n ? (int64_t)(bytes / row) : a->n;
        void *scratch = NULL;
        SQZ_TRY(sqz__cuda_scratch(c, (size_t)rows * row, &scratch));
        for (int64_t j0 = 0; j0 < a->n; j0 += rows) { /* stream order keeps panels apart */
            const int64_t nb = a->n - j0 < rows ? a->n - j0 : rows;
            SQZ_TRY(widen16(c, (const uint16_t *)a->w + j0 * a->k, a->w_dtype, nb * a->k, (float *)scratch));
            SQZ_TRY(matmul_panel(c, a, (const float *)scratch, j0, nb));
        }
    }
    if (a->bias) {
        add_bias_kernel<<<grid_for(a->m * a->n), 256, 0, c->stream>>>(a->y, a->m, a->n, a->bias);
        SQZ_CUDA_LAUNCHED();
    }
    return SQZ_OK;
}

sqz_status sqz__cuda_to_f32(void *ctx, const void *src, sqz_dtype t, int64_t n, float *dst) {
    sqz_cuda_ctx *c = (sqz_cuda_ctx *)ctx;
    SQZ_RETURN_IF(t != SQZ_DTYPE_F32 && t != SQZ_DTYPE_F16 && t != SQZ_DTYPE_BF16 && t != SQZ_DTYPE_F64,
                  SQZ_ERR_UNSUPPORTED, "CUDA to_f32: dtype %s is not a float type", sqz_dtype_name(t));
    SQZ_RETURN_IF(n < 0, SQZ_ERR_INVALID_ARG, "CUDA to_f32: n = %lld", (long long)n);
    if (n == 0) return SQZ_OK;
    SQZ_RETURN_IF(!src || !dst, SQZ_ERR_INVALID_ARG, "CUDA to_f32: a NULL buffer");
    SQZ_TRY(sqz__cuda_enter(c));
    if (t == SQZ_DTYPE_F32) {
        SQZ_CUDA_TRY(cudaMemcpyAsync(dst, src, (size_t)n * sizeof(float), cudaMemcpyDeviceToDevice, c->stream));
        return SQZ_OK;
    }
    if (t == SQZ_DTYPE_F64) {
        f64_to_f32_kernel<<<grid_for(n), 256, 0, c->stream>>>((const double *)src, n, dst);
        SQZ_CUDA_LAUNCHED();
        return SQZ_OK;
    }
    return widen16(c, src, t, n, dst);
}

/* ---- xtx ---------------------------------------------------------------------------- */
/* Rows widened to f64 per product: a fixed size (not what the cap leaves free), so that the
 * products, and their bits, are the same under any --gpu-mem. */
static const size_t XTX_CHUNK_BYTES = (size_t)16 << 20;

/* Zeroes the entries (i, j), j >= i, of rows [r0, r1) of a row-major upper triangle of width k
 * stored as a panel (element (r0, r0) at h, row stride ld). */
__global__ void zero_panel_kernel(double *h, int64_t r0, int64_t r1, int64_t k, int64_t ld) {
    const int64_t w = k - r0;
    SQZ__FOR_EACH(idx, (r1 - r0) * w) {
        const int64_t i = idx / w, j = idx % w;
        if (j >= i) h[i * ld + j] = 0.0;
    }
}

/* The panel rows [r0, r1) += D^T D for the widened chunk d (nr rows of k). The chunk is
 * column-major D^T (k, nr); the row-major panel is column-major too: its diagonal block's
 * row-major upper is the column-major lower syrk writes, the rest (columns >= r1) the
 * column-major (k - r1, r1 - r0) matrix D^T[r1:] . D^T[r0:r1]^T at h + (r1 - r0). */
static sqz_status xtx_chunk(sqz_cuda_ctx *c, const double *d, int64_t nr, int64_t k, int64_t r0, int64_t r1,
                            double *h, int64_t ld) {
    const double one = 1.0;
    SQZ_CUBLAS_TRY(cublasDsyrk(c->blas, CUBLAS_FILL_MODE_LOWER, CUBLAS_OP_N, (int)(r1 - r0), (int)nr, &one, d + r0,
                               (int)k, &one, h, (int)ld));
    if (r1 < k)
        SQZ_CUBLAS_TRY(cublasDgemm(c->blas, CUBLAS_OP_N, CUBLAS_OP_T, (int)(k - r1), (int)(r1 - r0), (int)nr, &one,
                                   d + r1, (int)k, d + r0, (int)k, &one, h + (r1 - r0), (int)ld));
    return SQZ_OK;
}

sqz_status sqz__cuda_xtx(void *ctx, const sqz_xtx_args *a) {
    sqz_cuda_ctx *c = (sqz_cuda_ctx *)ctx;
    SQZ_RETURN_IF(a->m < 0 || a->k < 1 || a->k > INT_MAX || a->m > INT_MAX || (a->beta != 0.0 && a->beta != 1.0),
                  SQZ_ERR_INVALID_ARG, "CUDA xtx: m %lld, k %lld, beta %g out of range", (long long)a->m,
                  (long long)a->k, a->beta);
    SQZ_RETURN_IF(!a->h || (a->m > 0 && !a->x), SQZ_ERR_INVALID_ARG, "CUDA xtx: a NULL buffer");
    const bool whole = a->r1 <= 0 && a->r0 == 0;
    SQZ_RETURN_IF(!whole && (a->r0 < 0 || a->r0 >= a->r1 || a->r1 > a->k || a->r0 % SQZ_XTX_PANEL_ALIGN ||
                             (a->r1 != a->k && a->r1 % SQZ_XTX_PANEL_ALIGN) || a->ldh < a->k - a->r0 ||
                             a->ldh > INT_MAX),
                  SQZ_ERR_INVALID_ARG, "CUDA xtx: row panel [%lld, %lld) of %lld (row stride %lld) out of range",
                  (long long)a->r0, (long long)a->r1, (long long)a->k, (long long)a->ldh);
    SQZ_TRY(sqz__cuda_enter(c));
    const int64_t k = a->k, r0 = whole ? 0 : a->r0, r1 = whole ? k : a->r1, ld = whole ? k : a->ldh;
    if (a->beta == 0.0) { /* beta 0 must ignore H, NaN included: zero the triangle, then add */
        zero_panel_kernel<<<grid_for((r1 - r0) * (k - r0)), 256, 0, c->stream>>>(a->h, r0, r1, k, ld);
        SQZ_CUDA_LAUNCHED();
    }
    if (a->m == 0) return SQZ_OK;
    const size_t row = (size_t)k * sizeof(double);
    const int64_t fit = (int64_t)(XTX_CHUNK_BYTES / row) > 0 ? (int64_t)(XTX_CHUNK_BYTES / row) : 1;
    const int64_t rows = fit < a->m ? fit : a->m;
    void *scratch = NULL;
    SQZ_TRY(sqz__cuda_scratch(c, (size_t)rows * row, &scratch));
    double *d = (double *)scratch;
    for (int64_t t0 = 0; t0 < a->m; t0 += rows) {
        const int64_t nr = a->m - t0 < rows ? a->m - t0 : rows;
        f32_to_f64_kernel<<<grid_for(nr * k), 256, 0, c->stream>>>(a->x + t0 * k, nr * k, d);
        SQZ_CUDA_LAUNCHED();
        SQZ_TRY(xtx_chunk(c, d, nr, k, r0, r1, a->h, ld));
    }
    return SQZ_OK;
}

/* ---- chol_inv_upper --------------------------------------------------------------- */
void sqz__calib_free(sqz_cuda_ctx *c) {
    if (c->solver_params) cusolverDnDestroyParams(c->solver_params);
    if (c->solver) cusolverDnDestroy(c->solver);
    c->solver_params = NULL;
    c->solver = NULL;
}

sqz_status sqz__cuda_solver(sqz_cuda_ctx *c) {
    if (c->solver) return SQZ_OK;
    SQZ_CUSOLVER_TRY(cusolverDnCreate(&c->solver));
    SQZ_CUSOLVER_TRY(cusolverDnSetStream(c->solver, c->stream));
    SQZ_CUSOLVER_TRY(cusolverDnCreateParams(&c->solver_params));
    return SQZ_OK;
}

/* The device info words after the workspace: [0] potrf, [1] trtri, [2] the non-finite flag. */
typedef struct chol_work {
    void *dev;
    size_t dev_bytes;
    int *info;
    void *host;
    size_t host_bytes;
} chol_work;

static sqz_status chol_work_get(sqz_cuda_ctx *c, double *h, int64_t n, chol_work *w) {
    size_t pd = 0, ph = 0, td = 0, th = 0;
    /* the matrices as cuSOLVER sees them: potrf on the column-major upper of J H J, trtri on the
     * column-major lower of R (see sqz__cuda_chol_inv_upper) */
    SQZ_CUSOLVER_TRY(cusolverDnXpotrf_bufferSize(c->solver, c->solver_params, CUBLAS_FILL_MODE_UPPER, n, CUDA_R_64F, h,
                                                 n, CUDA_R_64F, &pd, &ph));
    SQZ_CUSOLVER_TRY(cusolverDnXtrtri_bufferSize(c->solver, CUBLAS_FILL_MODE_LOWER, CUBLAS_DIAG_NON_UNIT, n, CUDA_R_64F,
                                                 h, n, &td, &th));
    w->dev_bytes = ((pd > td ? pd : td) + 255) / 256 * 256;
    w->host_bytes = ph > th ? ph : th;
    void *scratch = NULL;
    SQZ_TRY(sqz__cuda_scratch(c, w->dev_bytes + 256, &scratch));
    w->dev = w->dev_bytes ? scratch : NULL;
    w->info = (int *)((char *)scratch + w->dev_bytes);
    SQZ_CUDA_TRY(cudaMemsetAsync(w->info, 0, 3 * sizeof(int), c->stream));
    w->host = NULL;
    if (w->host_bytes && !(w->host = sqz__malloc(w->host_bytes))) return SQZ_ERR_NOMEM;
    return SQZ_OK;
}

/* Waits for the stream and reads the info words. */
static sqz_status chol_info(sqz_cuda_ctx *c, const chol_work *w, int out[3]) {
    SQZ_CUDA_TRY(cudaMemcpyAsync(out, w->info, 3 * sizeof(int), cudaMemcpyDeviceToHost, c->stream));
    SQZ_CUDA_TRY(cudaStreamSynchronize(c->stream));
    return SQZ_OK;
}

/* J H J = L L^T (row-major L lower) and R = J L J: h holds R upper, strictly lower part 0. Only
 * H's row-major upper triangle is read (what xtx writes), as on the CPU. */
static sqz_status chol_reversed(sqz_cuda_ctx *c, double *h, int64_t n, chol_work *w) {
    const int64_t nn = n * n;
    reverse_kernel<<<grid_for(nn / 2), 256, 0, c->stream>>>(h, nn);
    SQZ_CUDA_LAUNCHED();
    /* row-major lower of J H J = column-major upper: potrf gives U_c with J H J = U_c^T U_c,
     * which read row-major is L = U_c^T */
    SQZ_CUSOLVER_TRY(cusolverDnXpotrf(c->solver, c->solver_params, CUBLAS_FILL_MODE_UPPER, n, CUDA_R_64F, h, n,
                                      CUDA_R_64F, w->dev, w->dev_bytes, w->host, w->host_bytes, w->info));
    int info[3];
    SQZ_TRY(chol_info(c, w, info));
    SQZ_RETURN_IF(info[0] > 0, SQZ_ERR_NUMERIC, "Hessian is not positive definite (CUDA potrf: minor %d of %lld)",
                  info[0], (long long)n);
    SQZ_RETURN_IF(info[0] < 0, SQZ_ERR_DEVICE, "CUDA potrf: parameter %d is invalid", -info[0]);
    zero_upper_kernel<<<grid_for(nn), 256, 0, c->stream>>>(h, n, 0);
    SQZ_CUDA_LAUNCHED();
    reverse_kernel<<<grid_for(nn / 2), 256, 0, c->stream>>>(h, nn);
    SQZ_CUDA_LAUNCHED();
    return SQZ_OK;
}

sqz_status sqz__cuda_chol_inv_upper(void *ctx, double *h, int64_t n) {
    sqz_cuda_ctx *c = (sqz_cuda_ctx *)ctx;
    SQZ_RETURN_IF(n < 1 || n > INT_MAX / 2, SQZ_ERR_INVALID_ARG, "CUDA Cholesky: n %lld", (long long)n);
    SQZ_RETURN_IF(!h, SQZ_ERR_INVALID_ARG, "CUDA Cholesky: a NULL buffer");
    SQZ_TRY(sqz__cuda_enter(c));
    SQZ_TRY(sqz__cuda_solver(c));
    chol_work w = {};
    sqz_status s = chol_work_get(c, h, n, &w);
    if (s == SQZ_OK) s = chol_reversed(c, h, n, &w);
    /* U = R^-1: h read column-major is R^T (lower), whose inverse U^T is U read row-major */
    cusolverStatus_t cs = CUSOLVER_STATUS_SUCCESS;
    if (s == SQZ_OK)
        cs = cusolverDnXtrtri(c->solver, CUBLAS_FILL_MODE_LOWER, CUBLAS_DIAG_NON_UNIT, n, CUDA_R_64F, h, n, w.dev,
                              w.dev_bytes, w.host, w.host_bytes, w.info + 1);
    if (s == SQZ_OK && cs != CUSOLVER_STATUS_SUCCESS) s = cusolver_error(cs, "cusolverDnXtrtri", __FILE__, __LINE__);
    int info[3] = {0, 0, 0};
    if (s == SQZ_OK) {
        nonfinite_kernel<<<grid_for(n * n), 256, 0, c->stream>>>(h, n * n, w.info + 2);
        const cudaError_t e = cudaGetLastError();
        s = e != cudaSuccess ? sqz__cuda_error(e, "nonfinite_kernel", __FILE__, __LINE__) : chol_info(c, &w, info);
    }
    free(w.host);
    SQZ_TRY(s);
    SQZ_RETURN_IF(info[1] != 0 || info[2] != 0, SQZ_ERR_NUMERIC,
                  "inverse Hessian factor is not finite (CUDA trtri info %d)", info[1]);
    return SQZ_OK;
}

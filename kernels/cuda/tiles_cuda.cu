/*
 * kernels/cuda/tiles_cuda.cu - the CUDA backend's tile slots for GPTQ's factor in tiles
 * (sqz/backend.h SQZ_OP_TILES; quant/chol_tiles.c): dgemm, dtrsm, dpotrf on row-major f64.
 *
 * Row-major to cuBLAS's column-major (as calib_cuda.cu): a row-major (r, c) buffer is the
 * column-major (c, r) matrix, its transpose. So
 *   - C = op(A) op(B) is C^T = op(B)^T op(A)^T: the operands swap and keep their trans flags;
 *   - op(A) X = B (left) is X^T op(A)^T = B^T: the right side in column-major, with the buffer of
 *     A read as A^T, whose triangle is the upper one; the trans flag stays (likewise right ->
 *     left);
 *   - the row-major lower triangle of a symmetric A is the column-major upper one, and potrf's
 *     upper factor U_c (A = U_c^T U_c) read row-major is the lower L with A = L L^T.
 * Everything is queued on the context's stream; dpotrf waits for its info word.
 */
#include <cusolverDn.h>
#include <limits.h>

#include "kernels/cpu/backend_impl.h"
#include "kernels/cuda/calib_cuda.cuh"

static bool dim_ok(int64_t v) { return v >= 0 && v <= INT_MAX; }

sqz_status sqz__cuda_dgemm(void *ctx, const sqz_dgemm_args *a) {
    sqz_cuda_ctx *c = (sqz_cuda_ctx *)ctx;
    SQZ_RETURN_IF(!dim_ok(a->m) || !dim_ok(a->n) || a->k < 1 || a->k > INT_MAX, SQZ_ERR_INVALID_ARG,
                  "CUDA dgemm: dimensions (%lld, %lld, %lld) out of range", (long long)a->m, (long long)a->n,
                  (long long)a->k);
    if (a->m == 0 || a->n == 0) return SQZ_OK;
    const int64_t a_cols = a->trans_a ? a->m : a->k, b_cols = a->trans_b ? a->k : a->n;
    SQZ_RETURN_IF(a->lda < a_cols || a->ldb < b_cols || a->ldc < a->n || !dim_ok(a->lda) || !dim_ok(a->ldb) ||
                      !dim_ok(a->ldc),
                  SQZ_ERR_INVALID_ARG, "CUDA dgemm: leading dimensions (%lld, %lld, %lld) do not fit",
                  (long long)a->lda, (long long)a->ldb, (long long)a->ldc);
    SQZ_RETURN_IF(!a->a || !a->b || !a->c, SQZ_ERR_INVALID_ARG, "CUDA dgemm: a NULL buffer");
    SQZ_TRY(sqz__cuda_enter(c));
    SQZ_CUBLAS_TRY(cublasDgemm(c->blas, a->trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, a->trans_a ? CUBLAS_OP_T : CUBLAS_OP_N,
                               (int)a->n, (int)a->m, (int)a->k, &a->alpha, a->b, (int)a->ldb, a->a, (int)a->lda,
                               &a->beta, a->c, (int)a->ldc));
    return SQZ_OK;
}

sqz_status sqz__cuda_dtrsm(void *ctx, const sqz_dtrsm_args *a) {
    sqz_cuda_ctx *c = (sqz_cuda_ctx *)ctx;
    SQZ_RETURN_IF(!dim_ok(a->m) || !dim_ok(a->n), SQZ_ERR_INVALID_ARG, "CUDA dtrsm: dimensions (%lld, %lld) out of range",
                  (long long)a->m, (long long)a->n);
    if (a->m == 0 || a->n == 0) return SQZ_OK;
    const int64_t na = a->right ? a->n : a->m;
    SQZ_RETURN_IF(a->lda < na || a->ldb < a->n || !dim_ok(a->lda) || !dim_ok(a->ldb), SQZ_ERR_INVALID_ARG,
                  "CUDA dtrsm: leading dimensions (%lld, %lld) do not fit", (long long)a->lda, (long long)a->ldb);
    SQZ_RETURN_IF(!a->a || !a->b, SQZ_ERR_INVALID_ARG, "CUDA dtrsm: a NULL buffer");
    SQZ_TRY(sqz__cuda_enter(c));
    SQZ_CUBLAS_TRY(cublasDtrsm(c->blas, a->right ? CUBLAS_SIDE_LEFT : CUBLAS_SIDE_RIGHT, CUBLAS_FILL_MODE_UPPER,
                               a->trans ? CUBLAS_OP_T : CUBLAS_OP_N, CUBLAS_DIAG_NON_UNIT, (int)a->n, (int)a->m,
                               &a->alpha, a->a, (int)a->lda, a->b, (int)a->ldb));
    return SQZ_OK;
}

sqz_status sqz__cuda_dpotrf(void *ctx, double *a, int64_t n, int64_t lda) {
    sqz_cuda_ctx *c = (sqz_cuda_ctx *)ctx;
    SQZ_RETURN_IF(n < 1 || n > INT_MAX || lda < n || lda > INT_MAX, SQZ_ERR_INVALID_ARG,
                  "CUDA dpotrf: n %lld, lda %lld out of range", (long long)n, (long long)lda);
    SQZ_RETURN_IF(!a, SQZ_ERR_INVALID_ARG, "CUDA dpotrf: a NULL buffer");
    SQZ_TRY(sqz__cuda_enter(c));
    SQZ_TRY(sqz__cuda_solver(c));
    size_t dev_bytes = 0, host_bytes = 0;
    cusolverStatus_t cs = cusolverDnXpotrf_bufferSize(c->solver, c->solver_params, CUBLAS_FILL_MODE_UPPER, n,
                                                      CUDA_R_64F, a, lda, CUDA_R_64F, &dev_bytes, &host_bytes);
    SQZ_RETURN_IF(cs != CUSOLVER_STATUS_SUCCESS, SQZ_ERR_DEVICE, "cusolverDnXpotrf_bufferSize: cuSOLVER error %d",
                  (int)cs);
    dev_bytes = (dev_bytes + 255) / 256 * 256;
    void *scratch = NULL;
    SQZ_TRY(sqz__cuda_scratch(c, dev_bytes + 256, &scratch));
    int *info = (int *)((char *)scratch + dev_bytes);
    void *host = host_bytes ? sqz__malloc(host_bytes) : NULL;
    if (host_bytes && !host) return SQZ_ERR_NOMEM;
    sqz_status s = SQZ_OK;
    const cudaError_t e0 = cudaMemsetAsync(info, 0, sizeof(int), c->stream);
    if (e0 != cudaSuccess) s = sqz__cuda_error(e0, "cudaMemsetAsync", __FILE__, __LINE__);
    if (s == SQZ_OK) {
        cs = cusolverDnXpotrf(c->solver, c->solver_params, CUBLAS_FILL_MODE_UPPER, n, CUDA_R_64F, a, lda, CUDA_R_64F,
                              dev_bytes ? scratch : NULL, dev_bytes, host, host_bytes, info);
        if (cs != CUSOLVER_STATUS_SUCCESS)
            s = SQZ_ERROR(cs == CUSOLVER_STATUS_ALLOC_FAILED ? SQZ_ERR_NOMEM : SQZ_ERR_DEVICE,
                          "cusolverDnXpotrf: cuSOLVER error %d", (int)cs);
    }
    int h_info = 0;
    if (s == SQZ_OK) {
        cudaError_t e = cudaMemcpyAsync(&h_info, info, sizeof(int), cudaMemcpyDeviceToHost, c->stream);
        if (e == cudaSuccess) e = cudaStreamSynchronize(c->stream);
        if (e != cudaSuccess) s = sqz__cuda_error(e, "cudaMemcpyAsync(potrf info)", __FILE__, __LINE__);
    }
    free(host);
    SQZ_TRY(s);
    SQZ_RETURN_IF(h_info > 0, SQZ_ERR_NUMERIC, "Hessian is not positive definite (CUDA potrf: minor %d of a %lld tile)",
                  h_info, (long long)n);
    SQZ_RETURN_IF(h_info < 0, SQZ_ERR_DEVICE, "CUDA potrf: parameter %d is invalid", -h_info);
    return SQZ_OK;
}

/*
 * kernels/cuda/calib_cuda.cuh - the CUDA backend's float slots (sqz/backend.h): matmul on
 * f32/f16/bf16 weights and the calibration loop's sgemm, xtx, chol_inv_upper and to_f32, with
 * the contracts of sqz_backend_ops. All in full precision: cuBLAS fp32 without TF32 (the
 * handle's CUBLAS_DEFAULT_MATH), f64 cublasDsyrk for the Hessian, cuSOLVER f64 for the factor.
 * Pointers are device memory; the ops are queued on the context's stream, except
 * chol_inv_upper, which waits for its result to check it.
 */
#ifndef SQZ_KERNELS_CUDA_CALIB_CUDA_CUH
#define SQZ_KERNELS_CUDA_CALIB_CUDA_CUH

#include "kernels/cpu/backend_impl.h"
#include "kernels/cuda/backend_cuda.cuh"

/* Y = X . W^T (+ bias), W f32 as is, f16/bf16 widened to f32 in scratch panels of rows. */
sqz_status sqz__cuda_matmul(void *ctx, const sqz_matmul_args *a);
/* C = alpha op(A) op(B) + beta C, row-major (cublasSgemm on the transposed problem). */
sqz_status sqz__cuda_sgemm(void *ctx, const sqz_sgemm_args *a);
/* Upper triangle of H = beta H + X^T X in f64: X widened in row chunks, cublasDsyrk. */
sqz_status sqz__cuda_xtx(void *ctx, const sqz_xtx_args *a);
/* h becomes U upper with U^T U = H^-1 (kernels/cpu/chol.c's reversal, cuSOLVER potrf + trtri). */
sqz_status sqz__cuda_chol_inv_upper(void *ctx, double *h, int64_t n);
/* dst = src widened to f32 (F32 copied, F16 / BF16 exactly). */
sqz_status sqz__cuda_to_f32(void *ctx, const void *src, sqz_dtype dtype, int64_t n, float *dst);
/* The context's cuSOLVER handle and parameters, created on first use on its stream. */
sqz_status sqz__cuda_solver(sqz_cuda_ctx *c);
/* GPTQ's factor in tiles (tiles_cuda.cu; sqz/backend.h SQZ_OP_TILES): row-major f64 through
 * cublasDgemm, cublasDtrsm and cusolverDnXpotrf on the transposed (column-major) problem. */
sqz_status sqz__cuda_dgemm(void *ctx, const sqz_dgemm_args *a);
sqz_status sqz__cuda_dtrsm(void *ctx, const sqz_dtrsm_args *a);
sqz_status sqz__cuda_dpotrf(void *ctx, double *a, int64_t n, int64_t lda);
/* The observers' column sums and layer scoring's row cosines (stats_cuda.cu), the CPU's bits. */
sqz_status sqz__cuda_colstats(void *ctx, const sqz_colstats_args *a);
sqz_status sqz__cuda_cosine(void *ctx, const sqz_cosine_args *a);
/* Releases the cuSOLVER handle (NULL-safe fields). */
void sqz__calib_free(sqz_cuda_ctx *c);

#endif

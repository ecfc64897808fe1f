/*
 * kernels/cuda/gemm_i8_lt.cuh - W8A8 through cuBLASLt's IMMA kernels (CUBLAS_COMPUTE_32I,
 * int8 x int8 -> int32), then a small epilogue kernel applying the per-token and
 * per-channel scales.
 *
 * cuBLAS is column-major: Y(m, n) row-major is C = Y^T (n x m) col-major = W . X^T, with
 * A = W stored (k x n) col-major, op(A) = T, and B = X stored (k x m), op(B) = N: the "TN"
 * format that the IMMA kernels require. Their other rules for the regular (non-COL32)
 * ordering (cuBLAS docs, cublasLtMatmul, "To use IMMA kernels"): pointers 4-byte aligned
 * (16 for speed), leading dimensions and the cuBLAS m (= our n) and k multiples of 4.
 */
#ifndef SQZ_KERNELS_CUDA_GEMM_I8_LT_CUH
#define SQZ_KERNELS_CUDA_GEMM_I8_LT_CUH

#include "kernels/cuda/backend_cuda.cuh"

/* True when the IMMA rules above hold for this problem and these pointers. */
bool sqz__i8_lt_can_run(int64_t m, int64_t n, int64_t k, const void *x, const void *w, const void *acc);

/* acc (m, n) int32 = X (m, k) int8 . W (n, k)^T on ctx's stream; SQZ_ERR_UNSUPPORTED when
 * the rules fail or cuBLASLt offers no algorithm. */
sqz_status sqz__i8_lt_matmul(sqz_cuda_ctx *c, int64_t m, int64_t n, int64_t k, const int8_t *x, const int8_t *w,
                             int32_t *acc);

/* y (m, n) = ((float)acc * x_scale[i]) * w_scale[j], f32 or f16 (y_f16). */
sqz_status sqz__i8_scale_epilogue(sqz_cuda_ctx *c, const int32_t *acc, int64_t m, int64_t n, const float *x_scale,
                                  const float *w_scale, void *y, int y_f16);

/* The whole path: optional quantization of x_f32, IMMA into scratch, epilogue. */
sqz_status sqz__i8_lt_gemm(sqz_cuda_ctx *c, const sqz_gemm_i8_args *a);

/* Releases the cached cuBLASLt plans. */
void sqz__i8_lt_plans_free(sqz_cuda_ctx *c);

#endif

/*
 * kernels/cpu/gemm_i8.h - the CPU's exact INT8 x INT8 -> INT32 GEMM (W8A8), vectorized.
 *
 * Same contract and the same bits as the scalar reference sqz__gemm_i8_ref (gemm_ref.h):
 * Y(m, n) = X(m, k) . W(n, k)^T accumulated exactly in int32, then
 * y = ((float)acc * x_scale[i]) * w_scale[j] (f32, or rounded to f16 RNE). Integer sums are
 * exact whatever their order, so the vector path agrees with the reference bit for bit on
 * every input (all int8 values, -128 included), every shape.
 *
 * Paths: AVX2 (x86-64 CPUs that report it at run time: __builtin_cpu_supports("avx2")) widens
 * int8 to int16 and uses vpmaddwd over tiles of 2 rows of X by 4 rows of W; the scalar
 * reference everywhere else. Single-threaded.
 */
#ifndef SQZ_KERNELS_CPU_GEMM_I8_H
#define SQZ_KERNELS_CPU_GEMM_I8_H

#include <stdbool.h>
#include <stdint.h>

#include "sqz/dtype.h"
#include "sqz/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum sqz_i8_path {
    SQZ_I8_PATH_AUTO = 0,   /* the fastest the CPU has */
    SQZ_I8_PATH_SCALAR = 1, /* the reference loop */
    SQZ_I8_PATH_AVX2 = 2,   /* SQZ_ERR_UNSUPPORTED where the CPU (or the build) has no AVX2 */
} sqz_i8_path;

/* True if the AVX2 path can run here. */
bool sqz__gemm_i8_has_avx2(void);

/* acc (m, n) = X (m, k) . W (n, k)^T in int32 (k <= SQZ_GEMM_I8_MAX_K). */
sqz_status sqz__gemm_i8_acc(sqz_i8_path path, int64_t m, int64_t n, int64_t k, const int8_t *x, const int8_t *w,
                           int32_t *acc);

/* The full W8A8 GEMM with scales (the contract of sqz__gemm_i8_ref). */
sqz_status sqz__gemm_i8_cpu(sqz_i8_path path, int64_t m, int64_t n, int64_t k, const int8_t *x,
                           const float *x_scale, const int8_t *w, const float *w_scale, void *y, sqz_dtype y_dtype);

#ifdef __cplusplus
}
#endif
#endif

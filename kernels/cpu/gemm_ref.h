/*
 * kernels/cpu/gemm_ref.h - scalar reference GEMMs every backend is checked against.
 *
 * Conventions of sqz/backend.h: row-major, Y(m, n) = X(m, k) . W(n, k)^T, W stored as a
 * linear layer's weight (out_features, in_features), m = tokens.
 *
 * W8A8 is exact: int32 accumulation, then y = ((float)acc * x_scale[i]) * w_scale[j]
 * with two IEEE multiplications in that order, so a backend that accumulates exactly
 * (the CUDA IMMA and mma.sync paths do) agrees bit for bit on f32 outputs.
 * Per-token quantization is equally exact: scale = absmax / 127 and q = rint(x / scale)
 * with IEEE division and round half to even (the CUDA kernels use __fdiv_rn and
 * __float2int_rn, no fast-math).
 * W4A16 dequantizes with the GGUF reference (core/dequant.h) and accumulates in double:
 * it is the accuracy yardstick; backends that round the dequantized weights to fp16 (the
 * tensor-core path) agree within a normalised-MSE tolerance.
 */
#ifndef SQZ_KERNELS_CPU_GEMM_REF_H
#define SQZ_KERNELS_CPU_GEMM_REF_H

#include <stdint.h>

#include "sqz/backend.h"
#include "sqz/dtype.h"
#include "sqz/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Quantizes the rows of x (m, k) f32 to q (m, k) int8 with one scale per row (see above):
 * scale[i] = absmax / 127; q = clamp(rint(x / scale), -127, 127); a zero row gets scale 0
 * and q = 0; a row holding a NaN or an infinity gets scale NaN and q = 0.
 * Also the per-channel weight quantizer (rows of W). */
void sqz__quantize_rows_i8_ref(const float *x, int64_t m, int64_t k, int8_t *q, float *scale);

/* y (m, n) of y_dtype (F32 or F16) = W8A8 GEMM of q x (m, k) and w (n, k) with their
 * scales. SQZ_ERR_INVALID_ARG on negative sizes, k > SQZ_GEMM_I8_MAX_K or another y_dtype. */
sqz_status sqz__gemm_i8_ref(int64_t m, int64_t n, int64_t k, const int8_t *x, const float *x_scale,
                           const int8_t *w, const float *w_scale, void *y, sqz_dtype y_dtype);

/* y (m, n) of y_dtype (F32 or F16) = x (m, k) fp16 . dequant(w)^T, w (n, k) Q4_0 or Q4_1
 * blocks (each row k / 32 blocks), double accumulation. SQZ_ERR_INVALID_ARG when k is not
 * a multiple of 32 or a dtype is not supported; SQZ_ERR_NOMEM. */
sqz_status sqz__gemm_w4a16_ref(int64_t m, int64_t n, int64_t k, const uint16_t *x, const void *w,
                              sqz_dtype w_dtype, void *y, sqz_dtype y_dtype);

/* The matmul op's reference (SQZ_OP_MATMUL): y = x . dequant(W)^T + bias for weights of any dtype
 * with a float view, every row dequantized by core's scalar dequantizer (exactly as GGUF
 * defines it) and every dot product summed in double, then rounded to f32. The stored-weight
 * kernels (qmatmul.h) must match it within float summation error. SQZ_ERR_UNSUPPORTED for a dtype
 * without a float view, SQZ_ERR_INVALID_ARG for k not a multiple of the block size, SQZ_ERR_NOMEM. */
sqz_status sqz__matmul_ref(const sqz_matmul_args *a);

#ifdef __cplusplus
}
#endif
#endif

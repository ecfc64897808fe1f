/*
 * kernels/cuda/quantize_i8.cuh - per-token int8 quantization of activations, bit-identical
 * to sqz__quantize_rows_i8_ref (kernels/cpu/gemm_ref.h): scale = absmax / 127, q =
 * clamp(rint(x / scale), -127, 127) with IEEE division (__fdiv_rn) and round half to
 * even; zero (or underflowing) rows get scale 0, rows with a NaN / infinity scale NaN,
 * both with q = 0.
 */
#ifndef SQZ_KERNELS_CUDA_QUANTIZE_I8_CUH
#define SQZ_KERNELS_CUDA_QUANTIZE_I8_CUH

#include "kernels/cuda/backend_cuda.cuh"

/* The row scale from the row's absmax and non-finite flag. */
__device__ __forceinline__ float sqz__i8_row_scale(float amax, bool nonfinite) {
    return nonfinite ? __int_as_float(0x7fc00000) : __fdiv_rn(amax, 127.0f);
}

/* One element; d is the row scale. */
__device__ __forceinline__ int8_t sqz__i8_quant(float x, float d) {
    if (!(d != 0.0f) || isnan(d)) return 0; /* zero row, underflow, or NaN scale */
    float v = rintf(__fdiv_rn(x, d));
    v = fminf(fmaxf(v, -127.0f), 127.0f);
    return (int8_t)(int)v;
}

/* x (m, k) f32 -> q (m, k) int8 and scale (m) on ctx's stream. */
sqz_status sqz__i8_quantize_rows(sqz_cuda_ctx *c, const float *x, int64_t m, int64_t k, int8_t *q, float *scale);

#endif

/*
 * kernels/cuda/quantize_i8.cu - per-token int8 quantization (see quantize_i8.cuh): one
 * CTA per row, two passes over the row (the second hits L1/L2).
 */
#include <float.h>

#include "kernels/cuda/quantize_i8.cuh"

namespace {

constexpr int QTHREADS = 256;

__global__ void __launch_bounds__(QTHREADS) quantize_rows_kernel(const float *__restrict__ x, int64_t m, int64_t k,
                                                                 int8_t *__restrict__ q, float *__restrict__ scale) {
    __shared__ float s_amax[QTHREADS / 32];
    __shared__ int s_nf[QTHREADS / 32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    for (int64_t row = blockIdx.x; row < m; row += gridDim.x) {
        const float *xr = x + row * k;
        float amax = 0.0f;
        int nf = 0;
        for (int64_t j = threadIdx.x; j < k; j += QTHREADS) {
            const float a = fabsf(xr[j]);
            if (!(a <= FLT_MAX)) nf = 1;
            else amax = fmaxf(amax, a);
        }
        for (int o = 16; o > 0; o >>= 1) {
            amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
            nf |= __shfl_xor_sync(0xffffffffu, nf, o);
        }
        if (lane == 0) { s_amax[warp] = amax; s_nf[warp] = nf; }
        __syncthreads();
        amax = 0.0f;
        nf = 0;
        for (int w = 0; w < QTHREADS / 32; w++) { amax = fmaxf(amax, s_amax[w]); nf |= s_nf[w]; }
        const float d = sqz__i8_row_scale(amax, nf != 0);
        if (threadIdx.x == 0) scale[row] = d;
        int8_t *qr = q + row * k;
        for (int64_t j = threadIdx.x; j < k; j += QTHREADS) qr[j] = sqz__i8_quant(xr[j], d);
        __syncthreads(); /* s_amax is reused by the next row */
    }
}

} // namespace

sqz_status sqz__i8_quantize_rows(sqz_cuda_ctx *c, const float *x, int64_t m, int64_t k, int8_t *q, float *scale) {
    if (m <= 0) return SQZ_OK;
    const int blocks = (int)(m < 65535 ? m : 65535);
    quantize_rows_kernel<<<blocks, QTHREADS, 0, c->stream>>>(x, m, k, q, scale);
    SQZ_CUDA_LAUNCHED();
    return SQZ_OK;
}

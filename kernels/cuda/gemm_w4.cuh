/*
 * kernels/cuda/gemm_w4.cuh - W4A16: int4 weights per group of 32 (GGUF Q4_0 / Q4_1)
 * re-laid out offline (kernels/cpu/w4_pack.h), fp16 activations, dequantized in
 * registers straight into mma.sync.m16n8k16 B fragments (HMMA, fp32 accumulation).
 *
 *   m <= 16        "small": memory-bound decode. A CTA of 8 warps owns one 64-column
 *                  tile; its warps and the grid's y dimension split k (deterministic
 *                  reduction through shared memory, then a partial buffer). Each lane
 *                  streams one 16-byte load per k step from DRAM (512 contiguous bytes
 *                  per warp), activations come from L1/L2.
 *   16 < m <= 256  "mid": CTA 64 x 128, 4 warps (2 x 2) of 32 x 64
 *   m > 256        "big": CTA 128 x 256, 8 warps (2 x 4) of 64 x 64
 *                  activations, packed weights and scales in a 4-stage (mid) / 3-stage
 *                  (big) cp.async ring;
 *                  A through ldmatrix from a swizzled tile; split-k when the grid is small.
 * And the reference path: dequantize to an fp16 (n, k) scratch with the same decoder,
 * then cuBLAS fp16 GEMM.
 */
#ifndef SQZ_KERNELS_CUDA_GEMM_W4_CUH
#define SQZ_KERNELS_CUDA_GEMM_W4_CUH

#include "kernels/cuda/backend_cuda.cuh"

/* Sets the kernels' shared-memory limits on ctx's device. */
sqz_status sqz__w4_init(sqz_cuda_ctx *c);
/* a checked by the caller; e is the registered layout of a->w. */
sqz_status sqz__w4_mma_gemm(sqz_cuda_ctx *c, const sqz_gemm_w4_args *a, const sqz__w4_entry *e);
sqz_status sqz__w4_dequant_gemm(sqz_cuda_ctx *c, const sqz_gemm_w4_args *a, const sqz__w4_entry *e);
/* y (m, n) f32 or f16 = x (m, k) fp16 . w (n, k) fp16 ^T through cuBLAS (fp32 accumulate). */
sqz_status sqz__f16_gemm(sqz_cuda_ctx *c, int64_t m, int64_t n, int64_t k, const void *x, const void *w, void *y,
                         sqz_dtype y_dtype);

#endif

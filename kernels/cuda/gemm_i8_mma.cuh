/*
 * kernels/cuda/gemm_i8_mma.cuh - W8A8 with our own tensor-core kernel:
 * mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 (IMMA, sm_80+), cp.async multi-stage
 * pipeline, swizzled shared memory read with ldmatrix, int32 accumulation, the scales
 * applied in the epilogue (or, with split-k, int32 atomics and gemm_i8_lt's epilogue
 * kernel: integer sums do not depend on their order, so split-k stays deterministic).
 * The fused variant quantizes f32 activations per token in its prologue (row absmax
 * over the whole k, read from L2) and while filling shared memory, writing x / x_scale
 * on the way: one launch for the decode case instead of two.
 */
#ifndef SQZ_KERNELS_CUDA_GEMM_I8_MMA_CUH
#define SQZ_KERNELS_CUDA_GEMM_I8_MMA_CUH

#include "kernels/cuda/backend_cuda.cuh"

/* Sets the kernels' shared-memory limits on ctx's device (once per context). */
sqz_status sqz__i8_mma_init(sqz_cuda_ctx *c);

/* Y = W8A8 GEMM of a (checked by the caller). fused: quantize a->x_f32 in the prologue
 * (a->x_f32 must be set); otherwise a->x_f32, when set, is quantized by a separate kernel. */
sqz_status sqz__i8_mma_gemm(sqz_cuda_ctx *c, const sqz_gemm_i8_args *a, bool fused);

#endif

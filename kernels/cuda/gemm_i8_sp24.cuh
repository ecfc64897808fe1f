/*
 * kernels/cuda/gemm_i8_sp24.cuh - the 2:4 sparse W8A8 GEMM on the sparse tensor cores:
 * mma.sp::ordered_metadata.m16n8k64 .s8 (sm_80+), W given in sqz/sparse.h's layout (kept values
 * + PTX metadata fields), int32 accumulation, gemm_i8's scale epilogue: bit for bit the CPU
 * reference (kernels/cpu/gemm_i8_sp24.c) since integer sums are exact in any order.
 */
#ifndef SQZ_KERNELS_CUDA_GEMM_I8_SP24_CUH
#define SQZ_KERNELS_CUDA_GEMM_I8_SP24_CUH

#include "kernels/cuda/backend_cuda.cuh"
#include "sqz/backend.h"

/* Y = the 2:4 W8A8 GEMM of a (device pointers; k a multiple of 64, else SQZ_ERR_UNSUPPORTED);
 * a->x_f32, when set, is quantized per token first (the gemm_i8 definition). */
sqz_status sqz__i8_sp24_gemm(sqz_cuda_ctx *c, const sqz_gemm_i8_sp24_args *a);

#endif

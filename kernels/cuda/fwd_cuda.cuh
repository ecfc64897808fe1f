/*
 * kernels/cuda/fwd_cuda.cuh - the CUDA backend's block-forward slots (sqz/backend.h: rmsnorm,
 * rope, attention, silu_mul, add), with the contracts of sqz_backend_ops. f32 in device memory,
 * queued on the context's stream. The definitions are the CPU backend's (kernels/cpu/fwd_ops.c,
 * fwd_vec.c, attn.c); the device sums in its own order and uses CUDA's expf (2 ulp) where the
 * CPU has its Cephes polynomial, so results agree to rounding, not bit for bit (add and rope,
 * one rounding per output, are the CPU's bits).
 */
#ifndef SQZ_KERNELS_CUDA_FWD_CUDA_CUH
#define SQZ_KERNELS_CUDA_FWD_CUDA_CUH

#include "kernels/cpu/backend_impl.h"
#include "kernels/cuda/backend_cuda.cuh"

enum { SQZ__CUDA_ATTN_MAX_HD = 512 }; /* the largest head_dim the attention kernel's registers hold */

/* y = x * (float)(1 / sqrt(sum(x^2) / d + eps)) * w per row, the sum in double; y may equal x. */
sqz_status sqz__cuda_rmsnorm(void *ctx, const sqz_rmsnorm_args *a);
/* Rotary embedding in place, interleaved pairs (2i, 2i+1) or rotate_half pairs (i, i + hd/2). */
sqz_status sqz__cuda_rope(void *ctx, const sqz_rope_args *a);
/* softmax(Q K^T / sqrt(hd)) V, grouped-query, causal or not; any key count (online softmax
 * over chunks of keys); head_dim above SQZ__CUDA_ATTN_MAX_HD: SQZ_ERR_UNSUPPORTED. */
sqz_status sqz__cuda_attention(void *ctx, const sqz_attention_args *a);
/* x = x / (1 + e^-x) * y. */
sqz_status sqz__cuda_silu_mul(void *ctx, const sqz_eltwise_args *a);
/* x += y. */
sqz_status sqz__cuda_add(void *ctx, const sqz_eltwise_args *a);
/* (x - mean) / sqrt(var + eps) * w + b per row, mean and variance in double; y may equal x. */
sqz_status sqz__cuda_layernorm(void *ctx, const sqz_layernorm_args *a);
/* x = x / 2 (1 + erf(x / sqrt 2)). */
sqz_status sqz__cuda_gelu(void *ctx, const sqz_eltwise_args *a);

#endif

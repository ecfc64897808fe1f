/*
 * kernels/cpu/backend_fwd.h - the CPU backend's block-forward slots (backend_fwd.c) on a given
 * pool (NULL: the calling thread), for the CPU and cpu-offload tables. Internal.
 */
#ifndef SQZ_KERNELS_CPU_BACKEND_FWD_H
#define SQZ_KERNELS_CPU_BACKEND_FWD_H

#include "kernels/cpu/backend_impl.h"
#include "kernels/cpu/pool.h"
#include "kernels/cpu/qmatmul.h"
#include "sqz/backend.h"

sqz_status sqz__cpu_rmsnorm(sqz__pool *p, const sqz_rmsnorm_args *a);
sqz_status sqz__cpu_rope(sqz__pool *p, const sqz_rope_args *a);
/* dot: the f32 dot product of the few-queries path (n < SQZ__QMM_TILE_M, split by head). */
sqz_status sqz__cpu_attention(sqz__pool *p, sqz__dot_fn dot, const sqz_attention_args *a);
sqz_status sqz__cpu_silu_mul(sqz__pool *p, const sqz_eltwise_args *a);
sqz_status sqz__cpu_add(sqz__pool *p, const sqz_eltwise_args *a);
sqz_status sqz__cpu_layernorm(sqz__pool *p, const sqz_layernorm_args *a);
sqz_status sqz__cpu_gelu(sqz__pool *p, const sqz_eltwise_args *a);
/* SQZ_OK when a's shapes, strides and buffers are valid; else SQZ_ERR_INVALID_ARG, `who` in the message. */
sqz_status sqz__attention_check(const char *who, const sqz_attention_args *a);

#endif

/*
 * kernels/cpu/fgemm.h - sqz's own f32 GEMM over stored weights (internal to the CPU backend and
 * its tests): Y(m, n) = X(m, k) . W(n, k)^T + bias with X f32 and W in any block or half type,
 * for many tokens (m >= SQZ__QMM_TILE_M) with f32 activations.
 *
 * Before, such products dequantized 1024-row panels of W into f32 and handed them to OpenBLAS's
 * sgemm, which copied each panel again into its own layout, zeroed Y, and ran on its own threads
 * beside this pool's (sched_yield was 6-8% of eval's time on 2 cores). Here:
 *   - X is copied once per product into tiles of 2 vectors of tokens (32 on AVX-512, 16 on AVX2,
 *     zero-padded), SQZ__FG_KC columns at a time: xp[kc block][token tile][kk][token];
 *   - each pool thread takes SQZ__FG_NC weight rows at a time, dequantizes them SQZ__FG_KC columns
 *     at a time into rows (the dequantizers' own layout: nothing is transposed) and multiplies
 *     them against every token tile with a register tile of `nr` rows x 2 vectors of tokens, each
 *     weight broadcast from its row;
 *   - the sums build up in a per-thread block ct[row][token] and are written to Y once.
 * Every output is sum over kc blocks in order of (sum over kk in order of fma(x, w, acc)) from 0,
 * then + bias: the order is fixed by the shape alone, so the AVX-512, AVX2 and scalar forms give
 * the same bits on any number of threads (tests/unit/test_fgemm.c). They differ from sgemm's
 * sums (and from each other's BLAS cores) by float rounding only.
 * SQZ_F32_GEMM=blas in the environment keeps the panels + sgemm path (for goldens recorded with
 * OpenBLAS's sums, and for comparison).
 */
#ifndef SQZ_KERNELS_CPU_FGEMM_H
#define SQZ_KERNELS_CPU_FGEMM_H

#include <stdint.h>

#include "kernels/cpu/pool.h"
#include "kernels/cpu/qmatmul.h"

enum {
    SQZ__FG_KC = 256, /* columns of W dequantized at a time (a multiple of every block size) */
    SQZ__FG_NC = 48,  /* weight rows a thread takes at a time (a multiple of every form's nr) */
};

/* One register tile: ct[r * ldc + t] += sum over kk < kc of xp[kk * (vecs * vec) + t] * w[r * ldw + kk]
 * for r < nr and t < vecs * vec, each sum an fma chain in kk order from ct's value. */
typedef void (*sqz__fg_tile_fn)(const float *xp, const float *w, int64_t ldw, int64_t kc, float *ct, int64_t ldc);

typedef struct sqz__fgemm_impl {
    const char *name;
    int vec;                   /* floats per vector: a token tile is 2 vectors (the last one may be 1) */
    int nr;                    /* weight rows per register tile (divides SQZ__FG_NC) */
    sqz__fg_tile_fn tile[2];   /* [0]: 1 vector of tokens, [1]: 2 vectors */
} sqz__fgemm_impl;

/* The form for isa (avx512, avx2; scalar: the reference), or NULL where it has none (NEON: sgemm). */
const sqz__fgemm_impl *sqz__fgemm_impl_for(sqz__qmm_isa isa);
/* The scalar reference form (the same sums as every other, slowly). */
const sqz__fgemm_impl *sqz__fgemm_scalar(void);
/* True unless SQZ_F32_GEMM=blas is set. */
bool sqz__fgemm_enabled(void);
/* The form that multiplies many tokens with isa's kernels: sqz__fgemm_impl_for(isa) unless isa is scalar
 * (sgemm beats the scalar form) or SQZ_F32_GEMM=blas; NULL: panels + sgemm. */
const sqz__fgemm_impl *sqz__fgemm_for(sqz__qmm_isa isa);

/* Y = X . W^T + bias with form G, dequantizing W's rows with dq. a->w_dtype has a float view and
 * is not F32; m >= 1, k a multiple of its block size (checked by sqz__qmatmul). */
sqz_status sqz__fgemm(sqz__pool *pool, const sqz__fgemm_impl *G, sqz__dequant_fn dq, const sqz_matmul_args *a);

#if SQZ__QMM_X86
extern const sqz__fgemm_impl sqz__fgemm_avx2, sqz__fgemm_avx512;
#endif

#endif

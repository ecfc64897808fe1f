/*
 * kernels/cpu/qmatmul.h - matrix products straight from stored weights (internal to the CPU
 * backend and its tests).
 *
 * Y(m, n) = X(m, k) . W(n, k)^T + bias with X f32 and W in any stored type that has a float
 * view (GGUF blocks Q8_0 ... IQ4_XS, F16, BF16, F32): the weights stay in their blocks (the
 * file's mapping) and are dequantized exactly as GGUF defines them (core/dequant*.c) into
 * small f32 tiles that are multiplied at once, so the result differs from multiplying a
 * whole f32 copy only by the order of the float sums.
 *   - few tokens (m < SQZ__QMM_TILE_M, generation): each thread takes a range of output rows;
 *     for one token, a fused dequantize-and-dot kernel reads the row's blocks into registers
 *     (Q8_0, Q4_0/1, Q5_0/1, Q2_K..Q6_K, IQ4_NL/XS, MXFP4 on AVX2, AVX-512 and NEON); otherwise the row is dequantized
 *     SQZ__QMM_CHUNK elements at a time into an L1 tile and dotted with every token (each
 *     weight block is read once per call);
 *   - many tokens: sqz's own GEMM (fgemm.h: the weights dequantized 48 rows x 256 columns at a
 *     time per thread into register tiles against packed tokens) on AVX2 and AVX-512; on other
 *     machines, or with SQZ_F32_GEMM=blas, SQZ__QMM_PANEL rows at a time are dequantized (split over
 *     the threads) into one f32 panel that sgemm multiplies (each block read once per call).
 *
 * The kernels are rows of one table per dtype (qmatmul.c): the dequantizer and the fused
 * one-token kernel for each instruction set (NULL: the scalar dequantizer of core's dtype table,
 * the tiled dot), and one f32 dot product per instruction set (qdot.c). The instruction set is picked at run time (sqz__qmm_isa_best);
 * every variant is compiled on x86-64 (AVX2+FMA, AVX-512F) and NEON on aarch64.
 */
#ifndef SQZ_KERNELS_CPU_QMATMUL_H
#define SQZ_KERNELS_CPU_QMATMUL_H

#include <stdbool.h>
#include <stdint.h>

#include "kernels/cpu/pool.h"
#include "sqz/backend.h"
#include "sqz/dtype.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define SQZ__QMM_X86 1
#else
#define SQZ__QMM_X86 0
#endif
#if defined(__aarch64__) && defined(__ARM_NEON)
#define SQZ__QMM_NEON 1
#else
#define SQZ__QMM_NEON 0
#endif

enum {
    SQZ__QMM_TILE_M = 8,   /* from this many tokens on, the GEMM (fgemm.h, or panels + sgemm) */
    SQZ__QMM_CHUNK = 512,  /* elements of a row dequantized at once (a multiple of every block size) */
    SQZ__QMM_PANEL = 1024,  /* rows of a dequantized panel (the CPU backend's f16 panel before) */
};

/* The fused kernels' fully unrolled loops keep their accumulator and code arrays in registers. */
#if defined(__clang__)
#define SQZ__UNROLL(n) _Pragma("clang loop unroll(full)")
#else
#define SQZ__PRAGMA(x) _Pragma(#x)
#define SQZ__UNROLL(n) SQZ__PRAGMA(GCC unroll n)
#endif

typedef enum sqz__qmm_isa {
    SQZ__ISA_SCALAR = 0,
    SQZ__ISA_AVX2 = 1,   /* AVX2 + FMA (+ F16C) */
    SQZ__ISA_AVX512 = 2, /* AVX-512F/BW/VL dots and fused kernels (Q8_0, Q4_0/1, Q5_0/1, Q2_K..Q6_K, IQ4) */
    SQZ__ISA_NEON = 3,   /* aarch64: the NEON dot and fused kernels (the scalar dequantizers) */
    SQZ__ISA_COUNT
} sqz__qmm_isa;

/* dst[0..n) = the float values of n elements (a multiple of the block size) at src. */
typedef void (*sqz__dequant_fn)(const void *src, float *dst, int64_t n);
/* sum_i a[i] * b[i] in float, in the variant's own order. */
typedef float (*sqz__dot_fn)(const float *a, const float *b, int64_t n);
/* The fused kernel of one token: sum_i w[i] * x[i] over the k weights (a multiple of the block
 * size) stored at `row`, the weights being exactly the scalar dequantizer's values. xs[c] is the
 * sum of x[32c .. 32c + 32) (k / 32 entries, formed once per product for every row): kernels
 * whose weights are d * q - m factor the minimum out (d * sum q x - m * sum x), so their sums
 * differ from the reference's by float rounding only. */
typedef float (*sqz__dot1_fn)(const void *row, const float *x, const float *xs, int64_t k);
enum { SQZ__XS_BLOCK = 32 }; /* elements per entry of a fused kernel's xs */

/* The best instruction set this CPU runs (x86: AVX-512F > AVX2+FMA+F16C > scalar; aarch64:
 * NEON). SQZ_QMM_ISA=scalar|avx2|avx512|neon in the environment lowers it (for tests and
 * benchmarks); asking for more than the CPU has gives the best it has. */
sqz__qmm_isa sqz__qmm_isa_best(void);
/* True if the CPU runs `isa`. */
bool sqz__qmm_isa_runs(sqz__qmm_isa isa);
const char *sqz__qmm_isa_name(sqz__qmm_isa isa);

/* True for the weight dtypes the kernels multiply (those with a float view, not raw codes). */
bool sqz__qmm_supports(sqz_dtype t);
/* The dequantizer of t for isa: its own variant, else the scalar one; NULL if unsupported. */
sqz__dequant_fn sqz__qmm_dequant(sqz_dtype t, sqz__qmm_isa isa);
/* The fused one-token kernel of t for isa; NULL when t has none for it (the tiled dot serves). */
sqz__dot1_fn sqz__qmm_dot1(sqz_dtype t, sqz__qmm_isa isa);
/* The f32 dot product of isa (scalar when isa is not compiled in). */
sqz__dot_fn sqz__qmm_dot(sqz__qmm_isa isa);

/* Y = X . W^T + bias on the pool (NULL: the calling thread only) with the kernels of isa.
 * a->w_dtype must be supported; m, n, k >= 0, k a multiple of the block size. Many tokens: fgemm.h
 * on AVX2/AVX-512, else sgemm (OpenBLAS, its own threads) on dequantized panels. Returns SQZ_ERR_NOMEM or
 * SQZ_ERR_INVALID_ARG (a bad shape), with the message set. */
sqz_status sqz__qmatmul(sqz__pool *pool, sqz__qmm_isa isa, const sqz_matmul_args *a);

/* ---- the variants (qdot.c, qdequant_x86.c, qfused_x86.c, qfused_avx512.c, qfused_neon.c) ---- */
float sqz__dot_f32_scalar(const float *a, const float *b, int64_t n);
#if SQZ__QMM_X86
float sqz__dot_f32_avx2(const float *a, const float *b, int64_t n);
float sqz__dot_f32_avx512(const float *a, const float *b, int64_t n);
void sqz__dequant_q8_0_avx2(const void *x, float *y, int64_t n);
void sqz__dequant_q4_0_avx2(const void *x, float *y, int64_t n);
void sqz__dequant_q4_1_avx2(const void *x, float *y, int64_t n);
void sqz__dequant_q5_0_avx2(const void *x, float *y, int64_t n);
void sqz__dequant_q5_1_avx2(const void *x, float *y, int64_t n);
void sqz__dequant_iq4_nl_avx2(const void *x, float *y, int64_t n);
void sqz__dequant_mxfp4_avx2(const void *x, float *y, int64_t n);
void sqz__dequant_q4_K_avx2(const void *x, float *y, int64_t n);
void sqz__dequant_q6_K_avx2(const void *x, float *y, int64_t n);
void sqz__dequant_f16_avx2(const void *x, float *y, int64_t n);
void sqz__dequant_bf16_avx2(const void *x, float *y, int64_t n);
float sqz__qdot1_q8_0_avx2(const void *row, const float *x, const float *xs, int64_t k);
float sqz__qdot1_q4_0_avx2(const void *row, const float *x, const float *xs, int64_t k);
float sqz__qdot1_q4_1_avx2(const void *row, const float *x, const float *xs, int64_t k);
float sqz__qdot1_q5_0_avx2(const void *row, const float *x, const float *xs, int64_t k);
float sqz__qdot1_q5_1_avx2(const void *row, const float *x, const float *xs, int64_t k);
float sqz__qdot1_q4_K_avx2(const void *row, const float *x, const float *xs, int64_t k);
float sqz__qdot1_q6_K_avx2(const void *row, const float *x, const float *xs, int64_t k);
float sqz__qdot1_q2_K_avx2(const void *row, const float *x, const float *xs, int64_t k);
float sqz__qdot1_q3_K_avx2(const void *row, const float *x, const float *xs, int64_t k);
float sqz__qdot1_q5_K_avx2(const void *row, const float *x, const float *xs, int64_t k);
float sqz__qdot1_iq4_nl_avx2(const void *row, const float *x, const float *xs, int64_t k);
float sqz__qdot1_mxfp4_avx2(const void *row, const float *x, const float *xs, int64_t k);
float sqz__qdot1_iq4_xs_avx2(const void *row, const float *x, const float *xs, int64_t k);
float sqz__qdot1_iq3_s_avx2(const void *row, const float *x, const float *xs, int64_t k); /* also on AVX-512 */
float sqz__qdot1_q8_0_avx512(const void *row, const float *x, const float *xs, int64_t k);
float sqz__qdot1_q4_0_avx512(const void *row, const float *x, const float *xs, int64_t k);
float sqz__qdot1_q4_1_avx512(const void *row, const float *x, const float *xs, int64_t k);
float sqz__qdot1_q4_K_avx512(const void *row, const float *x, const float *xs, int64_t k);
float sqz__qdot1_q5_0_avx512(const void *row, const float *x, const float *xs, int64_t k);
float sqz__qdot1_q5_1_avx512(const void *row, const float *x, const float *xs, int64_t k);
float sqz__qdot1_q5_K_avx512(const void *row, const float *x, const float *xs, int64_t k);
float sqz__qdot1_q2_K_avx512(const void *row, const float *x, const float *xs, int64_t k);
float sqz__qdot1_q3_K_avx512(const void *row, const float *x, const float *xs, int64_t k);
float sqz__qdot1_iq4_nl_avx512(const void *row, const float *x, const float *xs, int64_t k);
float sqz__qdot1_mxfp4_avx512(const void *row, const float *x, const float *xs, int64_t k);
float sqz__qdot1_iq4_xs_avx512(const void *row, const float *x, const float *xs, int64_t k);
float sqz__qdot1_q6_K_avx512(const void *row, const float *x, const float *xs, int64_t k);
#endif
#if SQZ__QMM_NEON
float sqz__dot_f32_neon(const float *a, const float *b, int64_t n);
float sqz__qdot1_q8_0_neon(const void *row, const float *x, const float *xs, int64_t k);
float sqz__qdot1_q4_0_neon(const void *row, const float *x, const float *xs, int64_t k);
float sqz__qdot1_q4_1_neon(const void *row, const float *x, const float *xs, int64_t k);
float sqz__qdot1_q5_0_neon(const void *row, const float *x, const float *xs, int64_t k);
float sqz__qdot1_q5_1_neon(const void *row, const float *x, const float *xs, int64_t k);
float sqz__qdot1_q4_K_neon(const void *row, const float *x, const float *xs, int64_t k);
float sqz__qdot1_q5_K_neon(const void *row, const float *x, const float *xs, int64_t k);
float sqz__qdot1_q6_K_neon(const void *row, const float *x, const float *xs, int64_t k);
float sqz__qdot1_q2_K_neon(const void *row, const float *x, const float *xs, int64_t k);
float sqz__qdot1_q3_K_neon(const void *row, const float *x, const float *xs, int64_t k);
float sqz__qdot1_iq4_nl_neon(const void *row, const float *x, const float *xs, int64_t k);
float sqz__qdot1_mxfp4_neon(const void *row, const float *x, const float *xs, int64_t k);
float sqz__qdot1_iq4_xs_neon(const void *row, const float *x, const float *xs, int64_t k);
float sqz__qdot1_iq3_s_neon(const void *row, const float *x, const float *xs, int64_t k);
#endif

#endif

/*
 * kernels/cpu/qidot.h - products of stored weights with activations quantized as ggml-cpu
 * quantizes them (sqz --activations q8; internal to the CPU backend and its tests).
 *
 * ggml-cpu multiplies a quantized weight row by an activation row first quantized to the weight
 * type's "vec_dot_type", in integers. sqz does the same on request, with the same rounding:
 *   - Q8_0 (weights Q4_0, Q5_0, Q8_0, IQ4_NL, MXFP4): per 32 values, amax = max |x|, d = amax / 127
 *     stored as fp16, q = round-half-even(x * (127 / amax)) (ggml's x86 quantize_row_q8_0);
 *   - Q8_1 (Q4_1, Q5_1): Q8_0's d and q, and s = d * sum(q) with d before its fp16 rounding,
 *     kept in f32 (ggml stores s in fp16, which overflows on some models: llama.cpp PR #22571);
 *   - Q8_K (Q2_K..Q6_K, IQ4_XS, IQ3_S): per 256 values, max = the value of largest magnitude
 *     (the first one), iscale = -127 / max, q = min(127, round-half-even(iscale * x)),
 *     d = 1 / iscale in f32, and the sums of each 16 q (ggml's quantize_row_q8_K_ref);
 *   - F16 and BF16 weights: the activations rounded to that type (RNE), then the f32 product;
 *     F32 weights: no rounding.
 * A block holding a NaN or an infinity gets d = NaN (its products are NaN, as the float path's).
 *
 * Each kernel returns sum over the row of w * x with w the weights' exact values and x the
 * quantized activations: per block (32) or super-block (256) an exact int32 sum of code products,
 * times the two scales in f32. The integer sums are the same bits in every variant; only the
 * order of the float sums across blocks differs (tests/unit/test_qidot.c).
 *
 * The variants (one table row per weight type, qidot.c): scalar (qidot_ref.c, the reference),
 * AVX2 (maddubs/madd, qidot_avx2.c), AVX-512 with VNNI (dpbusd, qidot_vnni.c), NEON with the
 * dot-product extension (sdot, qidot_neon.c). NULL entries fall back to the scalar kernel.
 */
#ifndef SQZ_KERNELS_CPU_QIDOT_H
#define SQZ_KERNELS_CPU_QIDOT_H

#include <stddef.h>
#include <stdint.h>

#include "core/blocks.h"
#include "kernels/cpu/qmatmul.h"

/* The activation block types. */
typedef enum sqz__aq_kind {
    SQZ__AQ_NONE = 0, /* f32, not rounded (F32 weights, or a type without integer kernels) */
    SQZ__AQ_Q8_0,
    SQZ__AQ_Q8_1,
    SQZ__AQ_Q8_K,
    SQZ__AQ_F16,      /* f32 values rounded to fp16 */
    SQZ__AQ_BF16,     /* f32 values rounded to bf16 */
} sqz__aq_kind;

typedef struct sqz__aq8_0 {
    float d;          /* the fp16 scale's value */
    int8_t qs[32];
} sqz__aq8_0;         /* 36 bytes */

typedef struct sqz__aq8_1 {
    float d;          /* the fp16 scale's value */
    float s;          /* d (before rounding) * sum(qs), f32 */
    int8_t qs[32];
} sqz__aq8_1;         /* 40 bytes */

typedef sqz_block_q8_K sqz__aq8_K; /* f32 d, 256 qs, 16 int16 sums: ggml's block_q8_K */

/* The activation type ggml-cpu pairs with weights of type t (its vec_dot_type). */
sqz__aq_kind sqz__aq_kind_of(sqz_dtype t);
/* Bytes of one quantized activation row of k values (k a multiple of the block size; for
 * NONE/F16/BF16 the f32 row: 4 k). */
size_t sqz__aq_row_bytes(sqz__aq_kind kind, int64_t k);
/* dst = the k values at x in the activation type (scalar; exactly the rules above). */
void sqz__aq_quantize(sqz__aq_kind kind, const float *x, void *dst, int64_t k);

/* A quantizer with sqz__aq_quantize's signature and results (bit for bit). */
typedef void (*sqz__aq_quantize_fn)(sqz__aq_kind kind, const float *x, void *dst, int64_t k);
/* The fastest such quantizer for isa on this CPU (AVX-512: aquant_avx512.c; AVX2, or AVX-512
 * without AVX-512BW: aquant_avx2.c), else sqz__aq_quantize itself. */
sqz__aq_quantize_fn sqz__qmm_aq_quantizer(sqz__qmm_isa isa);

/* sum_i w_i * x_i over k weights (a multiple of the block size) stored at row, against one
 * activation row of the type's kind at xq. */
typedef float (*sqz__idot_fn)(const void *row, const void *xq, int64_t k);

/* The kernel of t for isa: its own variant (AVX-512 uses the VNNI kernels where the CPU has
 * AVX512-VNNI, else the AVX2 ones; NEON needs the dot-product extension), else the scalar one;
 * NULL when t has no integer kernel (then t's kind is NONE/F16/BF16). */
sqz__idot_fn sqz__qmm_idot(sqz_dtype t, sqz__qmm_isa isa);
/* The name of the variant sqz__qmm_idot(t, isa) gives ("scalar", "avx2", "avx512vnni", "neon-dot"). */
const char *sqz__qmm_idot_name(sqz_dtype t, sqz__qmm_isa isa);

/* ---- the variants: one per weight type and instruction set ---------------------------- */
#define SQZ__IDOT_TYPES(X) \
    X(q8_0) X(q4_0) X(q4_1) X(q5_0) X(q5_1) X(iq4_nl) \
    X(q2_K) X(q3_K) X(q4_K) X(q5_K) X(q6_K) X(iq4_xs) X(iq3_s)

#define SQZ__IDOT_DECL(t, v) float sqz__idot_##t##_##v(const void *row, const void *xq, int64_t k);
#define SQZ__IDOT_REF(t) SQZ__IDOT_DECL(t, ref)
SQZ__IDOT_TYPES(SQZ__IDOT_REF)
SQZ__IDOT_REF(mxfp4) /* ggml_vec_dot_mxfp4_q8_0 (its AVX2, VNNI and NEON kernels: static in their files) */
/* Asks for the n weight bytes SQZ__IDOT_AHEAD past p: a kernel calls it once per block it
 * reads. Generation reads each weight once, from DRAM for a model larger than the caches, and
 * the hardware prefetcher alone leaves part of the bandwidth unused: Q4_K rows of 1536 from
 * DRAM at 1 thread, 27 G weights/s without, 32 with (4096 bytes ahead; 8192: the same; 16384:
 * worse). Reading past the matrix's end is a hint, never a fault. */
enum { SQZ__IDOT_AHEAD = 4096 };
static inline void sqz__idot_ahead(const void *p, size_t n) {
    const uintptr_t a = (uintptr_t)p + SQZ__IDOT_AHEAD;
    for (size_t o = 0; o < n; o += 64) __builtin_prefetch((const void *)(a + o), 0, 3);
}

/* Several tokens (eval chunks, prompts): out[r] = sum_i w_i * x_r,i for the 4 activation rows
 * x_r at (const uint8_t *)xq + r * stride, the weight row decoded once for the four. Each out[r]
 * has the one-row kernel's integer sums (the float order may differ). */
typedef void (*sqz__idot4_fn)(const void *row, const void *xq, size_t stride, int64_t k, float *out);
/* The 4-token kernel of t for isa, NULL where there is none (then the one-row kernel serves). */
sqz__idot4_fn sqz__qmm_idot4(sqz_dtype t, sqz__qmm_isa isa);
/* Eight tokens at a time (out[0..7], rows stride bytes apart; each out[r] has the one-row
 * kernel's integer sums): the weight row decoded once for the eight. NULL where there is none
 * (the K and IQ types with AVX-512 VNNI have one). */
sqz__idot4_fn sqz__qmm_idot8(sqz_dtype t, sqz__qmm_isa isa);

/* Many tokens against the 14 types of qidot.c's table (32-element blocks, super-blocks) with AVX-512 VNNI
 * (qidot_gemm_vnni.c: 16 weight rows a panel) or AVX2 (qidot_gemm_avx2.c: 8 rows a panel), each
 * panel packed once per call, interleaved 4 bytes a lane, against every token. y (m x n, rows of
 * n) = the products of the m activation rows at xq (xq_bytes apart, quantized for w's type)
 * with the n weight rows at w (row_bytes apart), plus bias (or NULL). xs: -128 times each
 * block's sum of codes (sqz__qgemm_xsums; m x k/32), for the types against Q8_0; NULL for
 * Q4_1 / Q5_1. Each product has the scalar reference's integer block sums; the float order
 * may differ. */
typedef struct sqz__qgemm_args {
    const void *w;
    size_t row_bytes;
    int64_t m, n, k;
    const uint8_t *xq;
    size_t xq_bytes;
    const int32_t *xs;
    float *y;
    const float *bias;
} sqz__qgemm_args;
/* A panel GEMM: rows(t, a, j0, j1, scratch) writes output rows [j0, j1) of every token, with
 * scratch_bytes(k) bytes of scratch; xsums writes the xs of args (sqz__qgemm_xsums's values). */
typedef struct sqz__qgemm_impl {
    void (*rows)(sqz_dtype t, const sqz__qgemm_args *a, int64_t j0, int64_t j1, void *scratch);
    size_t (*scratch_bytes)(int64_t k);
    void (*xsums)(const uint8_t *xq, size_t xq_bytes, int64_t t0, int64_t t1, int64_t k, int32_t *xs);
    const char *name; /* "avx512vnni", "avx2" */
} sqz__qgemm_impl;
/* The panel GEMM isa multiplies many tokens of t with: VNNI where isa takes the VNNI kernels
 * (sqz__qmm_idot), AVX2 where it takes the AVX2 ones; NULL where there is none. */
const sqz__qgemm_impl *sqz__qmm_qgemm_impl(sqz_dtype t, sqz__qmm_isa isa);
/* Whether isa multiplies many tokens of t through a panel GEMM (sqz__qmm_qgemm_impl not NULL). */
bool sqz__qmm_qgemm(sqz_dtype t, sqz__qmm_isa isa);
#if SQZ__QMM_X86
/* Whether t has the panel GEMM (Q8_0, Q4_0, Q5_0, IQ4_NL, Q4_1, Q5_1). */
bool sqz__qgemm_vnni_has(sqz_dtype t);
/* Output rows [j0, j1) of every token; scratch: sqz__qgemm_scratch_bytes(k) bytes. Needs VNNI. */
void sqz__qgemm_vnni_rows(sqz_dtype t, const sqz__qgemm_args *a, int64_t j0, int64_t j1, void *scratch);
size_t sqz__qgemm_scratch_bytes(int64_t k);
/* xs[t k/32 + b] = -128 sum of token t's block b (Q8_0 activation rows), tokens [t0, t1). */
void sqz__qgemm_xsums(const uint8_t *xq, size_t xq_bytes, int64_t t0, int64_t t1, int64_t k, int32_t *xs);
/* The AVX2 form (qidot_gemm_avx2.c), for the CPUs without VNNI: the same types, arguments and
 * results (every block's integer sum the reference's), panels of 8 rows, maddubs/madd with no
 * saturation (small unsigned codes, or the sign trick for Q8_0 / IQ4_NL / MXFP4 / IQ4_XS / IQ3_S). */
bool sqz__qgemm_avx2_has(sqz_dtype t);
/* Output rows [j0, j1) of every token; scratch: sqz__qgemm_avx2_scratch_bytes(k) bytes. Needs AVX2. */
void sqz__qgemm_avx2_rows(sqz_dtype t, const sqz__qgemm_args *a, int64_t j0, int64_t j1, void *scratch);
size_t sqz__qgemm_avx2_scratch_bytes(int64_t k);
/* sqz__qgemm_xsums with AVX2 (the same values). */
void sqz__qgemm_xsums_avx2(const uint8_t *xq, size_t xq_bytes, int64_t t0, int64_t t1, int64_t k, int32_t *xs);
#endif

/* Each variant file's table: the kernel of each weight type it has, NULL elsewhere. */
#if SQZ__QMM_X86
extern const sqz__idot_fn sqz__idot_avx2[SQZ_DTYPE_COUNT]; /* qidot_avx2.c */
extern const sqz__idot_fn sqz__idot_vnni[SQZ_DTYPE_COUNT]; /* qidot_vnni.c: AVX-512F/BW/VL + VNNI */
extern const sqz__idot4_fn sqz__idot4_vnni[SQZ_DTYPE_COUNT]; /* qidot4_vnni.c: 4 tokens at a time */
extern const sqz__idot4_fn sqz__idot8_vnni[SQZ_DTYPE_COUNT]; /* qidot4_vnni.c: 8 tokens at a time */
extern const sqz__aq_quantize_fn sqz__aq_quantize_avx512; /* aquant_avx512.c: AVX-512F/BW */
extern const sqz__aq_quantize_fn sqz__aq_quantize_avx2;   /* aquant_avx2.c: AVX2 */
#endif
#if SQZ__QMM_NEON
extern const sqz__idot_fn sqz__idot_neon[SQZ_DTYPE_COUNT]; /* qidot_neon.c: NEON + dotprod */
#endif

#endif

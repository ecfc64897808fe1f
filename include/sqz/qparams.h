/*
 * sqz/qparams.h - the storage of sqz's own quantized weights: the integer values stay in a
 * tensor's dtype (I8, U4) and the scales, zero points, groups and activation metadata in an
 * sqz_qparams the tensor points to (sqz_tensor.qp). Part of core: readers, writers, the
 * runtime and sqz_tensor_to_f32 use it without the quantization methods (sqz/quant.h, which
 * includes this header).
 *
 * ---- Storage ----------------------------------------------------------------------------
 * Formats that GGUF has (Q8_0, Q4_0, Q4_1) are plain block dtypes (sqz/dtype.h) and need
 * nothing else. sqz's own formats keep the integer values in a dtype and everything else in
 * an sqz_qparams that the tensor points to (sqz_tensor.qp, owned by the model):
 *
 *   SQZ_QSCHEME_I8_ROW    dtype SQZ_DTYPE_I8, (n_out, n_in) int8 in [-127, 127];
 *                         w[r][c] = (float)q[r][c] * scales[r]          (f32 scale per row)
 *                         = the weight side of the backends' W8A8 GEMM (sqz/backend.h).
 *   SQZ_QSCHEME_U4_GROUP  dtype SQZ_DTYPE_U4, (n_out, n_in) 4-bit codes 0..15, two per byte:
 *                         element 2i of a row in the LOW nibble of byte i, element 2i+1 in the
 *                         HIGH nibble (the order of GPTQ/AWQ int32 packing read little-endian);
 *                         each row is n_in / 2 bytes. With g = group_of(c):
 *                         w[r][c] = scales[r][g] * (float)(code - zero[r][g])
 *                         zero = 8 when zeros == NULL (symmetric), else zeros[r][g] in 0..15.
 *                         Scales are f32 values that are exactly representable in fp16, so
 *                         writing them as fp16 (GPTQ/AWQ checkpoints) loses nothing, and the
 *                         product above is exact in f32.
 *                         group_of(c) = g_idx ? g_idx[c] : c / group_size. g_idx is present
 *                         only after GPTQ with act-order and dynamic groups (AutoGPTQ's
 *                         desc_act): groups are then runs of group_size columns in the
 *                         processing order, and g_idx maps each column to its group.
 *   SQZ_QSCHEME_F8_ROW    dtype SQZ_DTYPE_F8_E4M3, (n_out, n_in) FP8 E4M3 values (compressed-tensors'
 *                         float-quantized weights); w[r][c] = fp8(q[r][c]) * scales[r] (f32 scale
 *                         per row, exact in f32: a 4-bit significand times the scale's). A file's
 *                         per-tensor scale is read as the same scale on every row.
 *   SQZ_QSCHEME_NVFP4     dtype SQZ_DTYPE_U4 holding E2M1 codes (bit 3 the sign, bits 0-2 index 0, 0.5, 1,
 *                         1.5, 2, 3, 4, 6), packed as U4; groups of 16 columns, each with an FP8 E4M3
 *                         scale (held in scales as its exact f32 value), and one f32 global_scale per
 *                         tensor (compressed-tensors' nvfp4-pack-quantized, NVIDIA's NVFP4):
 *                         w[r][c] = bf16(e2m1(code) * (scales[r][g] / global_scale)), the division
 *                         and the product in f32, the result rounded to bf16 (half to even): exactly
 *                         what compressed-tensors' decompressor gives.
 * Activation metadata (every scheme): act_mode says whether the layer quantizes its input
 * (W8A8) and how; in_scale, when not NULL, is a smoothing vector that was NOT folded into
 * the previous operation: the layer computes y = (x / in_scale) . W^T with W as stored.
 *
 * Dequantizing: sqz_tensor_to_f32 works for every format (it calls sqz_qparams_to_f32 when
 * t->qp is set); sqz_qparams_rows_to_f32 converts a panel of rows (for streaming).
 * Writers must look at t->qp: a tensor with qp set is NOT its raw dtype (I8/U4 values alone
 * mean nothing); write scales/zeros/g_idx beside it or dequantize it.
 */
#ifndef SQZ_QPARAMS_H
#define SQZ_QPARAMS_H

#include <stddef.h>
#include <stdint.h>

#include "sqz/api.h"
#include "sqz/dtype.h"
#include "sqz/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum sqz_qscheme {
    SQZ_QSCHEME_NONE = 0,     /* not quantized by a scheme (plain dtype, e.g. Q4_0 blocks) */
    SQZ_QSCHEME_I8_ROW = 1,   /* dtype I8, one f32 scale per output row */
    SQZ_QSCHEME_U4_GROUP = 2, /* dtype U4, scale (+ zero point) per (row, group) */
    SQZ_QSCHEME_F8_ROW = 3,   /* dtype F8_E4M3, one f32 scale per output row */
    SQZ_QSCHEME_NVFP4 = 4,    /* dtype U4 of E2M1 codes, an E4M3 scale per 16 columns, a global scale */
} sqz_qscheme;

/* How a layer quantizes its INPUT activations at run time. */
typedef enum sqz_act_mode {
    SQZ_ACT_FLOAT = 0,         /* weight-only (W8A16, W4A16): activations stay float */
    SQZ_ACT_DYNAMIC_TOKEN = 1, /* W8A8: per-token scale absmax/127 at run time (the x_f32 path of
                                  sqz_gemm_i8_args) */
    SQZ_ACT_STATIC_TENSOR = 2, /* W8A8: one calibrated scale for the whole tensor: x_q =
                                  clamp(rint(x / act_scale), -127, 127) (sqz_quantize_act_static) */
} sqz_act_mode;

/* The integer grid of quantized activations (act_mode != SQZ_ACT_FLOAT). The two differ only in
 * the lowest code and the dynamic scale, and a model whose static per-tensor W8A8 is fragile
 * (SmolLM2-135M) gives other tokens on each, so a layer keeps the grid its file declares. */
typedef enum sqz_act_grid {
    SQZ_ACT_GRID_SYM127 = 0,   /* sqz's: clamp(rint(x / s), -127, 127), dynamic s = absmax / 127 */
    SQZ_ACT_GRID_CTENSORS = 1, /* compressed-tensors' (what its int-quantized files declare and
                                  its fake quantization computes): clamp(rint(x / s), -128, 127),
                                  dynamic s = absmax / 127.5 (docs/formats.md, W8A8) */
    SQZ_ACT_GRID_FP8 = 2,      /* FP8 E4M3 activations (W8A8-FP8, SQZ_QSCHEME_F8_ROW only):
                                  x = fp8(clamp(x / s, -448, 448)) * s with s = absmax / 448 per token
                                  (dynamic) or s = act_scale (static per tensor), as compressed-tensors'
                                  float-quantized files declare and compute */
} sqz_act_grid;

typedef struct sqz_qparams {
    sqz_qscheme scheme;
    int64_t n_out, n_in;    /* the weight's shape (n_out, n_in) */
    int32_t group_size;     /* U4_GROUP: columns per group (32, 64, 128); I8_ROW: n_in */
    int64_t n_groups;       /* U4_GROUP: n_in / group_size; I8_ROW: 1 */
    const float *scales;    /* (n_out, n_groups) */
    const uint8_t *zeros;   /* (n_out, n_groups) zero points 0..15, or NULL (symmetric: 8 for U4,
                               0 for I8) */
    const int32_t *g_idx;   /* (n_in) group of every column, or NULL (column / group_size) */
    sqz_act_mode act_mode;
    float act_scale;        /* SQZ_ACT_STATIC_TENSOR: the activation scale (> 0); else 0 */
    const float *in_scale;  /* (n_in) unfolded smoothing vector: y = (x / in_scale) . W^T, or NULL */
    sqz_act_grid act_grid;  /* W8A8: the activations' integer grid (0: sqz's own) */
    float global_scale;     /* NVFP4: the tensor's global scale (> 0, a divisor); else 0 */
} sqz_qparams;

/* Checks a qparams against a tensor's dtype and byte count: scheme vs dtype (I8_ROW needs I8,
 * U4_GROUP needs U4), shapes, group_size dividing n_in, g_idx values < n_groups, zero points
 * <= 15, finite scales, act_scale > 0 exactly when static, a known act_grid (sqz's own when weight-only). SQZ_ERR_INVALID_ARG naming `what`. */
SQZ_API sqz_status sqz_qparams_check(const sqz_qparams *qp, sqz_dtype dtype, size_t nbytes, const char *what);

/* Dequantizes rows [row0, row0 + n_rows) of a scheme-quantized weight (data: the tensor's
 * bytes, all rows) into out ((n_rows, n_in) f32). in_scale is NOT applied (it scales the
 * input, not the weight). No checks beyond asserts: call sqz_qparams_check once first. */
SQZ_API void sqz_qparams_rows_to_f32(const sqz_qparams *qp, const void *data, int64_t row0, int64_t n_rows, float *out);
/* All rows. SQZ_ERR_INVALID_ARG if qp does not fit (sqz_qparams_check). */
SQZ_API sqz_status sqz_qparams_to_f32(const sqz_qparams *qp, sqz_dtype dtype, const void *data, size_t nbytes,
                                      float *out);

/* Packs n (even) codes 0..15 into n / 2 bytes (element 2i low nibble) and back. */
SQZ_API void sqz_u4_pack(const uint8_t *codes, int64_t n, uint8_t *packed);
SQZ_API void sqz_u4_unpack(const uint8_t *packed, int64_t n, uint8_t *codes);

#ifdef __cplusplus
}
#endif
#endif

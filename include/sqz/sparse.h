/*
 * sqz/sparse.h - sparse weights: how sparse a tensor is, and the 2:4 INT8 layout that NVIDIA's
 * sparse tensor cores (mma.sp, Ampere and later) multiply at up to twice the dense rate.
 *
 * ---- The 2:4 INT8 layout (docs/sparsity.md) ----------------------------------------------
 * A weight W (n, k) int8, row-major (a linear layer's (out, in)), in which every group of 4
 * consecutive columns of a row (columns 4g .. 4g+3) holds at most 2 non-zeros, k a multiple
 * of 32, is stored as
 *   values (n, k/2) int8     the group's two kept values, in increasing column order;
 *   meta   (n, k/32) uint32  per row, group g's two 2-bit column indices i0 < i1 (within the
 *                            group) as the 4-bit field i0 | i1 << 2 at bits 4 (g % 8) of word
 *                            g / 8 (PTX's sparse-mma metadata: 0x4, 0x8, 0xC, 0x9, 0xD, 0xE).
 * A group with fewer than 2 non-zeros keeps zeros at the lowest unused indices (all-zero: 0x4).
 * The CUDA kernel hands these words to mma.sp per PTX's metadata fragment layout; the CPU
 * reference reads them as they are.
 */
#ifndef SQZ_SPARSE_H
#define SQZ_SPARSE_H

#include <stdbool.h>
#include <stdint.h>

#include "sqz/api.h"
#include "sqz/dtype.h"
#include "sqz/status.h"
#include "sqz/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sqz_sparsity_info {
    int64_t count;  /* elements */
    int64_t zeros;  /* elements whose value (dequantized) is exactly 0 (-0 counts) */
    bool nm_2_4;    /* a 2-D tensor whose every row has at most 2 non-zeros in every 4 columns */
    bool nm_4_8;    /* ... at most 4 in every 8 */
} sqz_sparsity_info;

/* Reads every value of t (dequantized: this touches all of its data) and counts its zeros and
 * patterns. Errors: sqz_tensor_to_f32's, SQZ_ERR_NOMEM. */
SQZ_API sqz_status sqz_tensor_sparsity(const sqz_tensor *t, sqz_sparsity_info *out);

/* Compresses w (n, k) int8 into values (n, k/2) and meta (n, k/32) (layout above).
 * SQZ_ERR_INVALID_ARG when k % 32 != 0 or a group holds more than 2 non-zeros (naming the row
 * and column). */
SQZ_API sqz_status sqz_sp24_pack_i8(const int8_t *w, int64_t n, int64_t k, int8_t *values, uint32_t *meta);
/* The inverse: w (n, k) with the zeros put back. SQZ_ERR_INVALID_ARG on a bad metadata field. */
SQZ_API sqz_status sqz_sp24_unpack_i8(const int8_t *values, const uint32_t *meta, int64_t n, int64_t k, int8_t *w);

/* The 2:4 sparse W8A8 GEMM, CPU reference: y (m, n) = x (m, k) . W^T with W given compressed,
 * int32 accumulation over the kept values only, then y = ((float)acc * x_scale[i]) * w_scale[j]
 * rounded to y_dtype (F32 or F16): bit for bit the dense INT8 GEMM (sqz/backend.h's
 * definition) on the unpacked W, since integer sums are exact in any order. */
SQZ_API sqz_status sqz_gemm_i8_sp24_ref(int64_t m, int64_t n, int64_t k, const int8_t *x, const float *x_scale,
                                        const int8_t *values, const uint32_t *meta, const float *w_scale, void *y,
                                        sqz_dtype y_dtype);

#ifdef __cplusplus
}
#endif
#endif

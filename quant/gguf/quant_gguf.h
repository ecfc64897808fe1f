/* quant/gguf/quant_gguf.h - the GGUF block quantizers (module sqz_quant_gguf, depending on core
 * only): llama.cpp's scalar reference quantizers (quantize_row_*_ref) and its
 * importance-weighted K-quants (quantize_q*_K). They write the block layouts of core/blocks.h;
 * the dequantizers are core's (core/dequant.h). n is the number of elements, a multiple of the
 * block size. */
#ifndef SQZ_QUANT_GGUF_H
#define SQZ_QUANT_GGUF_H

#include <stdint.h>

#include "sqz/dtype.h"

/* quant/gguf/quant_ref.c */
void sqz_quantize_q8_0_ref(const float *x, void *y, int64_t n);
void sqz_quantize_q4_0_ref(const float *x, void *y, int64_t n);
void sqz_quantize_q4_1_ref(const float *x, void *y, int64_t n);
void sqz_quantize_q5_0_ref(const float *x, void *y, int64_t n);
void sqz_quantize_q5_1_ref(const float *x, void *y, int64_t n);
/* The 32 codes L (0..31) of a Q5_0 / Q5_1 block: low nibbles into qs[16] as Q4's, the fifth bit
 * of code j into bit j of qh[4] (a little-endian u32). */
void sqz__pack_q5(const uint8_t *L, uint8_t *qs, uint8_t *qh);

/* quant/gguf/kquant.c: llama.cpp's quantize_row_q*_K_ref */
void sqz_quantize_q2_K_ref(const float *x, void *y, int64_t n);
void sqz_quantize_q3_K_ref(const float *x, void *y, int64_t n);
void sqz_quantize_q4_K_ref(const float *x, void *y, int64_t n);
void sqz_quantize_q5_K_ref(const float *x, void *y, int64_t n);
void sqz_quantize_q6_K_ref(const float *x, void *y, int64_t n);
/* llama.cpp's quantize_q*_K: nrow rows of n_per_row (a multiple of 256) into type t (Q2_K ...
 * Q6_K); quant_weights (n_per_row, e.g. E[x^2] of the input) or NULL for the reference. */
void sqz_quantize_k(sqz_dtype t, const float *src, void *dst, int64_t nrow, int64_t n_per_row,
                    const float *quant_weights);

/* quant/gguf/dtype_ref.c: the reference from_f32 of t: the block quantizer of a GGUF type sqz
 * writes, core's converter of a float type (F32, F16, BF16, F64), NULL when sqz cannot produce
 * t. The same function as sqz_dtype_info(t)->from_f32. */
sqz_from_f32_fn sqz__dtype_from_f32(sqz_dtype t);

#endif

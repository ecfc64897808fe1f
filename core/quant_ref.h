/* core/quant_ref.h - scalar reference (de)quantizers of the GGUF block types.
 * n is the number of elements, a multiple of the block size. */
#ifndef SQZ_CORE_QUANT_REF_H
#define SQZ_CORE_QUANT_REF_H

#include <stdint.h>

#include "sqz/dtype.h"

void sqz_quantize_q8_0_ref(const float *x, void *y, int64_t n);
void sqz_dequantize_q8_0(const void *x, float *y, int64_t n);
void sqz_quantize_q4_0_ref(const float *x, void *y, int64_t n);
void sqz_dequantize_q4_0(const void *x, float *y, int64_t n);
void sqz_quantize_q4_1_ref(const float *x, void *y, int64_t n);
void sqz_dequantize_q4_1(const void *x, float *y, int64_t n);
void sqz_dequantize_q4_K(const void *x, float *y, int64_t n);
void sqz_dequantize_q6_K(const void *x, float *y, int64_t n);

/* core/kquant.c: llama.cpp's quantize_row_q*_K_ref */
void sqz_quantize_q2_K_ref(const float *x, void *y, int64_t n);
void sqz_quantize_q3_K_ref(const float *x, void *y, int64_t n);
void sqz_quantize_q4_K_ref(const float *x, void *y, int64_t n);
void sqz_quantize_q5_K_ref(const float *x, void *y, int64_t n);
void sqz_quantize_q6_K_ref(const float *x, void *y, int64_t n);
/* llama.cpp's quantize_q*_K: nrow rows of n_per_row (a multiple of 256) into type t (Q2_K ...
 * Q6_K); quant_weights (n_per_row, e.g. E[x^2] of the input) or NULL for the reference. */
void sqz_quantize_k(sqz_dtype t, const float *src, void *dst, int64_t nrow, int64_t n_per_row,
                    const float *quant_weights);

/* The 32 codes L (0..31) of a Q5_0 / Q5_1 block: low nibbles into qs[16] as Q4's, the fifth bit
 * of code j into bit j of qh[4] (a little-endian u32). */
void sqz__pack_q5(const uint8_t *L, uint8_t *qs, uint8_t *qh);
void sqz_quantize_q5_0_ref(const float *x, void *y, int64_t n);
void sqz_quantize_q5_1_ref(const float *x, void *y, int64_t n);

/* core/dequant_more.c */
void sqz_dequantize_q5_0(const void *x, float *y, int64_t n);
void sqz_dequantize_q5_1(const void *x, float *y, int64_t n);
void sqz_dequantize_q2_K(const void *x, float *y, int64_t n);
void sqz_dequantize_q3_K(const void *x, float *y, int64_t n);
void sqz_dequantize_q5_K(const void *x, float *y, int64_t n);
void sqz_dequantize_q8_K(const void *x, float *y, int64_t n);
void sqz_dequantize_iq4_nl(const void *x, float *y, int64_t n);
void sqz_dequantize_iq4_xs(const void *x, float *y, int64_t n);
extern const int8_t sqz__kvalues_iq4nl[16];

/* Scale and minimum j (0..7) of a Q4_K/Q5_K block's 12 packed bytes (6 bits each). */
void sqz__get_scale_min_k4(int j, const uint8_t *q, uint8_t *d, uint8_t *m);
/* The 16 scales of a Q3_K block, 0..63 (offset 32 not removed). */
void sqz__q3_K_scales(const uint8_t packed[12], int8_t scales[16]);

#endif

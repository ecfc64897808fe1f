/* core/quant_ref.h - scalar reference (de)quantizers of the GGUF block types.
 * n is the number of elements, a multiple of the block size. */
#ifndef SQZ_CORE_QUANT_REF_H
#define SQZ_CORE_QUANT_REF_H

#include <stdint.h>

void sqz_quantize_q8_0_ref(const float *x, void *y, int64_t n);
void sqz_dequantize_q8_0(const void *x, float *y, int64_t n);
void sqz_quantize_q4_0_ref(const float *x, void *y, int64_t n);
void sqz_dequantize_q4_0(const void *x, float *y, int64_t n);
void sqz_quantize_q4_1_ref(const float *x, void *y, int64_t n);
void sqz_dequantize_q4_1(const void *x, float *y, int64_t n);
void sqz_dequantize_q4_K(const void *x, float *y, int64_t n);
void sqz_dequantize_q6_K(const void *x, float *y, int64_t n);

#endif

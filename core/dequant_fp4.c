/*
 * core/dequant_fp4.c - the 4-bit floating-point block type MXFP4 (OCP microscaling, llama.cpp's
 * GGML_TYPE_MXFP4): 32 E2M1 values and one E8M0 scale. Transcribed from llama.cpp's
 * ggml-quants.c (dequantize_row_mxfp4) and ggml-impl.h (ggml_e8m0_to_fp32_half).
 *
 * E2M1 holds 0, 0.5, 1, 1.5, 2, 3, 4, 6 and their negatives (code bit 3 the sign); the table
 * keeps them doubled, as ggml's kvalues_mxfp4 does, so that they are integers, and the scale is
 * halved to match: w = kvalues[code] * 2^(e - 128).
 */
#include <stdint.h>
#include <string.h>

#include "core/blocks.h"
#include "core/dequant.h"

const int8_t sqz__kvalues_fp4[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

void sqz__dequantize_mxfp4(const void *vx, float *y, int64_t n) {
    const sqz_block_mxfp4 *x = vx;
    for (int64_t i = 0; i < n / SQZ_QK_MXFP4; i++) {
        const float d = sqz__e8m0_half(x[i].e);
        for (int j = 0; j < SQZ_QK_MXFP4 / 2; ++j) {
            y[j] = (float)sqz__kvalues_fp4[x[i].qs[j] & 0xf] * d;
            y[j + SQZ_QK_MXFP4 / 2] = (float)sqz__kvalues_fp4[x[i].qs[j] >> 4] * d;
        }
        y += SQZ_QK_MXFP4;
    }
}

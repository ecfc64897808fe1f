/* core/dequant.h - scalar reference dequantizers of the GGUF block types (the dtype table's
 * to_f32: every reader needs them) and the block-field helpers shared with the quantizers of
 * quant/gguf/. n is the number of elements, a multiple of the block size. */
#ifndef SQZ_CORE_DEQUANT_H
#define SQZ_CORE_DEQUANT_H

#include <stdint.h>
#include <string.h>

#include "sqz/dtype.h"

/* core/dequant.c */
void sqz__dequantize_q8_0(const void *x, float *y, int64_t n);
void sqz__dequantize_q4_0(const void *x, float *y, int64_t n);
void sqz__dequantize_q4_1(const void *x, float *y, int64_t n);
void sqz__dequantize_q4_K(const void *x, float *y, int64_t n);
void sqz__dequantize_q6_K(const void *x, float *y, int64_t n);

/* core/dequant_more.c */
void sqz__dequantize_q5_0(const void *x, float *y, int64_t n);
void sqz__dequantize_q5_1(const void *x, float *y, int64_t n);
void sqz__dequantize_q2_K(const void *x, float *y, int64_t n);
void sqz__dequantize_q3_K(const void *x, float *y, int64_t n);
void sqz__dequantize_q5_K(const void *x, float *y, int64_t n);
void sqz__dequantize_q8_K(const void *x, float *y, int64_t n);
void sqz__dequantize_iq4_nl(const void *x, float *y, int64_t n);
void sqz__dequantize_iq4_xs(const void *x, float *y, int64_t n);
extern const int8_t sqz__kvalues_iq4nl[16];

/* core/dequant_fp4.c: MXFP4. kvalues_fp4 are E2M1's values doubled (ggml's kvalues_mxfp4);
 * sqz__e8m0_half(e) = 2^(e - 128), the scale that goes with them. */
void sqz__dequantize_mxfp4(const void *x, float *y, int64_t n);
extern const int8_t sqz__kvalues_fp4[16];
/* inline: the MXFP4 kernels take it once per block of 32 (an out-of-line call cost the integer
 * product 40% of its speed) */
static inline float sqz__e8m0_half(uint8_t e) {
    /* 2^(e - 128): a subnormal for e < 2 (0x00200000 = 2^-128), else exponent field e - 1 */
    const uint32_t bits = e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

/* core/dequant_iq3.c */
void sqz__dequantize_iq3_s(const void *x, float *y, int64_t n);
/* llama.cpp's iq3s_grid: byte j (little-endian) of entry i is magnitude j (1, 3, ..., 15) of
 * IQ3_S codeword i. */
extern const uint32_t sqz__iq3s_grid[512];

/* Scale and minimum j (0..7) of a Q4_K/Q5_K block's 12 packed bytes (6 bits each). */
static inline void sqz__get_scale_min_k4(int j, const uint8_t *q, uint8_t *d, uint8_t *m) {
    /* inline: the fused Q4_K/Q5_K kernels call it twice per 64 weights (10% of the 1.5B's
     * generation time as an out-of-line call) */
    if (j < 4) {
        *d = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *d = (uint8_t)((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
        *m = (uint8_t)((q[j + 4] >> 4) | ((q[j - 0] >> 6) << 4));
    }
}
/* All 8 (scale, min) pairs of a Q4_K/Q5_K block at once: sc[j], m[j] are what
 * sqz__get_scale_min_k4(j, ...) gives, unpacked with 32-bit masks as llama.cpp's kernels do. */
static inline void sqz__k4_scales_mins(const uint8_t q[12], uint8_t sc[8], uint8_t m[8]) {
    uint32_t u[3], o[4];
    memcpy(u, q, 12);
    const uint32_t k1 = 0x3f3f3f3f, k2 = 0x0f0f0f0f, k3 = 0x03030303;
    o[0] = u[0] & k1;                                          /* scales 0..3 */
    o[1] = (u[2] & k2) | (((u[0] >> 6) & k3) << 4);            /* scales 4..7 */
    o[2] = u[1] & k1;                                          /* mins 0..3 */
    o[3] = ((u[2] >> 4) & k2) | (((u[1] >> 6) & k3) << 4);     /* mins 4..7 */
    memcpy(sc, o, 8);
    memcpy(m, o + 2, 8);
}
/* Finiteness of block-quantized weights from their fp16 scales alone (a block's weights are
 * finite exactly when its fp16 scales are): the index of the first of nblocks blocks of type t
 * (block_bytes apart) with a non-finite scale, -1 if none, -2 if t is not such a type (F16,
 * Q8_K's f32 scale, ...: dequantize and look). */
int64_t sqz__first_nonfinite_block(sqz_dtype t, const void *blocks, int64_t nblocks, size_t block_bytes);
/* The 16 scales of a Q3_K block, 0..63 (offset 32 not removed). */
void sqz__q3_K_scales(const uint8_t packed[12], int8_t scales[16]);

#endif

/*
 * quant/gguf/quant_ref.c - scalar reference quantizers of the GGUF block types Q8_0, Q4_0,
 * Q4_1, Q5_0, Q5_1, transcribed from llama.cpp's ggml-quants.c (quantize_row_*_ref) so that
 * sqz produces the same bytes. Their dequantizers are core's (core/dequant.h).
 */
#include <float.h>
#include <math.h>

#include "core/blocks.h"
#include "quant/gguf/quant_gguf.h"
#include "sqz/dtype.h"

void sqz__quantize_q8_0_ref(const float *x, void *vy, int64_t n) {
    sqz_block_q8_0 *y = vy;
    for (int64_t i = 0; i < n / SQZ_QK8_0; i++) {
        float amax = 0.0f;
        for (int j = 0; j < SQZ_QK8_0; j++) amax = fmaxf(amax, fabsf(x[i * SQZ_QK8_0 + j]));
        const float d = amax / ((1 << 7) - 1);
        const float id = d ? 1.0f / d : 0.0f;
        y[i].d = sqz_fp32_to_fp16(d);
        for (int j = 0; j < SQZ_QK8_0; j++) y[i].qs[j] = (int8_t)roundf(x[i * SQZ_QK8_0 + j] * id);
    }
}

void sqz__quantize_q4_0_ref(const float *x, void *vy, int64_t n) {
    sqz_block_q4_0 *y = vy;
    for (int64_t i = 0; i < n / SQZ_QK4_0; i++) {
        const float *xb = x + i * SQZ_QK4_0;
        float amax = 0.0f, max = 0.0f;
        for (int j = 0; j < SQZ_QK4_0; j++) {
            if (amax < fabsf(xb[j])) { amax = fabsf(xb[j]); max = xb[j]; }
        }
        const float d = max / -8;
        const float id = d ? 1.0f / d : 0.0f;
        y[i].d = sqz_fp32_to_fp16(d);
        for (int j = 0; j < SQZ_QK4_0 / 2; j++) {
            const float x0 = xb[j] * id;
            const float x1 = xb[SQZ_QK4_0 / 2 + j] * id;
            const uint8_t xi0 = (uint8_t)(((int8_t)(x0 + 8.5f)) < 15 ? (int8_t)(x0 + 8.5f) : 15);
            const uint8_t xi1 = (uint8_t)(((int8_t)(x1 + 8.5f)) < 15 ? (int8_t)(x1 + 8.5f) : 15);
            y[i].qs[j] = (uint8_t)(xi0 | (xi1 << 4));
        }
    }
}

void sqz__quantize_q4_1_ref(const float *x, void *vy, int64_t n) {
    sqz_block_q4_1 *y = vy;
    for (int64_t i = 0; i < n / SQZ_QK4_1; i++) {
        const float *xb = x + i * SQZ_QK4_1;
        float min = FLT_MAX, max = -FLT_MAX;
        for (int j = 0; j < SQZ_QK4_1; j++) {
            if (xb[j] < min) min = xb[j];
            if (xb[j] > max) max = xb[j];
        }
        const float d = (max - min) / ((1 << 4) - 1);
        const float id = d ? 1.0f / d : 0.0f;
        y[i].d = sqz_fp32_to_fp16(d);
        y[i].m = sqz_fp32_to_fp16(min);
        for (int j = 0; j < SQZ_QK4_1 / 2; j++) {
            const float x0 = (xb[j] - min) * id;
            const float x1 = (xb[SQZ_QK4_1 / 2 + j] - min) * id;
            const int8_t q0 = (int8_t)(x0 + 0.5f), q1 = (int8_t)(x1 + 0.5f);
            const uint8_t xi0 = (uint8_t)(q0 < 15 ? q0 : 15);
            const uint8_t xi1 = (uint8_t)(q1 < 15 ? q1 : 15);
            y[i].qs[j] = (uint8_t)(xi0 | (xi1 << 4));
        }
    }
}

void sqz__pack_q5(const uint8_t *L, uint8_t *qs, uint8_t *qh) {
    uint32_t h = 0;
    for (int j = 0; j < 16; ++j) {
        qs[j] = (uint8_t)((L[j] & 0x0F) | ((L[j + 16] & 0x0F) << 4));
        h |= ((L[j] & 0x10u) >> 4) << j;
        h |= ((L[j + 16] & 0x10u) >> 4) << (j + 16);
    }
    for (int b = 0; b < 4; b++) qh[b] = (uint8_t)(h >> (8 * b));
}

void sqz__quantize_q5_0_ref(const float *x, void *vy, int64_t n) {
    sqz_block_q5_0 *y = vy;
    for (int64_t i = 0; i < n / SQZ_QK5_0; i++) {
        const float *xb = x + i * SQZ_QK5_0;
        float amax = 0.0f, max = 0.0f;
        for (int j = 0; j < SQZ_QK5_0; j++) {
            if (amax < fabsf(xb[j])) { amax = fabsf(xb[j]); max = xb[j]; }
        }
        const float d = max / -16;
        const float id = d ? 1.0f / d : 0.0f;
        y[i].d = sqz_fp32_to_fp16(d);
        uint8_t L[SQZ_QK5_0];
        for (int j = 0; j < SQZ_QK5_0; ++j) {
            const int8_t t = (int8_t)(xb[j] * id + 16.5f);
            L[j] = (uint8_t)(t < 31 ? t : 31);
        }
        sqz__pack_q5(L, y[i].qs, y[i].qh);
    }
}

void sqz__quantize_q5_1_ref(const float *x, void *vy, int64_t n) {
    sqz_block_q5_1 *y = vy;
    for (int64_t i = 0; i < n / SQZ_QK5_1; i++) {
        const float *xb = x + i * SQZ_QK5_1;
        float min = FLT_MAX, max = -FLT_MAX;
        for (int j = 0; j < SQZ_QK5_1; j++) {
            if (xb[j] < min) min = xb[j];
            if (xb[j] > max) max = xb[j];
        }
        const float d = (max - min) / ((1 << 5) - 1);
        const float id = d ? 1.0f / d : 0.0f;
        y[i].d = sqz_fp32_to_fp16(d);
        y[i].m = sqz_fp32_to_fp16(min);
        uint8_t L[SQZ_QK5_1];
        for (int j = 0; j < SQZ_QK5_1; ++j) L[j] = (uint8_t)((xb[j] - min) * id + 0.5f);
        sqz__pack_q5(L, y[i].qs, y[i].qh);
    }
}

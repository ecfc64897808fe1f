/*
 * core/quant_ref.c - scalar reference quantizers and dequantizers of the GGUF block
 * types, transcribed from llama.cpp's ggml-quants.c (quantize_row_*_ref,
 * dequantize_row_*) so that sqz produces and reads the same bytes.
 */
#include <float.h>
#include <math.h>

#include "core/blocks.h"
#include "core/quant_ref.h"
#include "sqz/dtype.h"

#define FP16(x) sqz_fp16_to_fp32(x)

void sqz_quantize_q8_0_ref(const float *x, void *vy, int64_t n) {
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

void sqz_dequantize_q8_0(const void *vx, float *y, int64_t n) {
    const sqz_block_q8_0 *x = vx;
    for (int64_t i = 0; i < n / SQZ_QK8_0; i++) {
        const float d = FP16(x[i].d);
        for (int j = 0; j < SQZ_QK8_0; j++) y[i * SQZ_QK8_0 + j] = x[i].qs[j] * d;
    }
}

void sqz_quantize_q4_0_ref(const float *x, void *vy, int64_t n) {
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

void sqz_dequantize_q4_0(const void *vx, float *y, int64_t n) {
    const sqz_block_q4_0 *x = vx;
    for (int64_t i = 0; i < n / SQZ_QK4_0; i++) {
        const float d = FP16(x[i].d);
        for (int j = 0; j < SQZ_QK4_0 / 2; j++) {
            y[i * SQZ_QK4_0 + j] = ((x[i].qs[j] & 0x0F) - 8) * d;
            y[i * SQZ_QK4_0 + j + SQZ_QK4_0 / 2] = ((x[i].qs[j] >> 4) - 8) * d;
        }
    }
}

void sqz_quantize_q4_1_ref(const float *x, void *vy, int64_t n) {
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

void sqz_dequantize_q4_1(const void *vx, float *y, int64_t n) {
    const sqz_block_q4_1 *x = vx;
    for (int64_t i = 0; i < n / SQZ_QK4_1; i++) {
        const float d = FP16(x[i].d), m = FP16(x[i].m);
        for (int j = 0; j < SQZ_QK4_1 / 2; j++) {
            y[i * SQZ_QK4_1 + j] = (x[i].qs[j] & 0x0F) * d + m;
            y[i * SQZ_QK4_1 + j + SQZ_QK4_1 / 2] = (x[i].qs[j] >> 4) * d + m;
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

void sqz_quantize_q5_0_ref(const float *x, void *vy, int64_t n) {
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

void sqz_quantize_q5_1_ref(const float *x, void *vy, int64_t n) {
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

void sqz__get_scale_min_k4(int j, const uint8_t *q, uint8_t *d, uint8_t *m) {
    if (j < 4) {
        *d = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *d = (uint8_t)((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
        *m = (uint8_t)((q[j + 4] >> 4) | ((q[j - 0] >> 6) << 4));
    }
}

void sqz_dequantize_q4_K(const void *vx, float *y, int64_t n) {
    const sqz_block_q4_K *x = vx;
    for (int64_t i = 0; i < n / SQZ_QK_K; i++) {
        const uint8_t *q = x[i].qs;
        const float d = FP16(x[i].d), min = FP16(x[i].dmin);
        int is = 0;
        uint8_t sc, m;
        for (int j = 0; j < SQZ_QK_K; j += 64) {
            sqz__get_scale_min_k4(is + 0, x[i].scales, &sc, &m);
            const float d1 = d * sc, m1 = min * m;
            sqz__get_scale_min_k4(is + 1, x[i].scales, &sc, &m);
            const float d2 = d * sc, m2 = min * m;
            for (int l = 0; l < 32; ++l) *y++ = d1 * (q[l] & 0xF) - m1;
            for (int l = 0; l < 32; ++l) *y++ = d2 * (q[l] >> 4) - m2;
            q += 32;
            is += 2;
        }
    }
}

void sqz_dequantize_q6_K(const void *vx, float *y, int64_t n) {
    const sqz_block_q6_K *x = vx;
    for (int64_t i = 0; i < n / SQZ_QK_K; i++) {
        const float d = FP16(x[i].d);
        const uint8_t *ql = x[i].ql;
        const uint8_t *qh = x[i].qh;
        const int8_t *sc = x[i].scales;
        for (int nn = 0; nn < SQZ_QK_K; nn += 128) {
            for (int l = 0; l < 32; ++l) {
                const int is = l / 16;
                const int8_t q1 = (int8_t)((ql[l + 0] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
                const int8_t q2 = (int8_t)((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
                const int8_t q3 = (int8_t)((ql[l + 0] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
                const int8_t q4 = (int8_t)((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
                y[l + 0] = d * sc[is + 0] * q1;
                y[l + 32] = d * sc[is + 2] * q2;
                y[l + 64] = d * sc[is + 4] * q3;
                y[l + 96] = d * sc[is + 6] * q4;
            }
            y += 128;
            ql += 64;
            qh += 32;
            sc += 8;
        }
    }
}

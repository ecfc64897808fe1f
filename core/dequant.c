/*
 * core/dequant.c - scalar dequantizers of the GGUF block types Q8_0, Q4_0, Q4_1, Q4_K, Q6_K,
 * transcribed from llama.cpp's ggml-quants.c (dequantize_row_*) so that sqz reads the same
 * values; the other types' are in core/dequant_more.c. The quantizers that write these blocks
 * are quant/gguf's (quant/gguf/quant_ref.c, quant/gguf/kquant.c).
 */
#include "core/blocks.h"
#include "core/dequant.h"
#include "sqz/dtype.h"

#define FP16(x) sqz_fp16_to_fp32(x)

void sqz__dequantize_q8_0(const void *vx, float *y, int64_t n) {
    const sqz_block_q8_0 *x = vx;
    for (int64_t i = 0; i < n / SQZ_QK8_0; i++) {
        const float d = FP16(x[i].d);
        for (int j = 0; j < SQZ_QK8_0; j++) y[i * SQZ_QK8_0 + j] = x[i].qs[j] * d;
    }
}

void sqz__dequantize_q4_0(const void *vx, float *y, int64_t n) {
    const sqz_block_q4_0 *x = vx;
    for (int64_t i = 0; i < n / SQZ_QK4_0; i++) {
        const float d = FP16(x[i].d);
        for (int j = 0; j < SQZ_QK4_0 / 2; j++) {
            y[i * SQZ_QK4_0 + j] = ((x[i].qs[j] & 0x0F) - 8) * d;
            y[i * SQZ_QK4_0 + j + SQZ_QK4_0 / 2] = ((x[i].qs[j] >> 4) - 8) * d;
        }
    }
}

void sqz__dequantize_q4_1(const void *vx, float *y, int64_t n) {
    const sqz_block_q4_1 *x = vx;
    for (int64_t i = 0; i < n / SQZ_QK4_1; i++) {
        const float d = FP16(x[i].d), m = FP16(x[i].m);
        for (int j = 0; j < SQZ_QK4_1 / 2; j++) {
            y[i * SQZ_QK4_1 + j] = (x[i].qs[j] & 0x0F) * d + m;
            y[i * SQZ_QK4_1 + j + SQZ_QK4_1 / 2] = (x[i].qs[j] >> 4) * d + m;
        }
    }
}

void sqz__dequantize_q4_K(const void *vx, float *y, int64_t n) {
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

void sqz__dequantize_q6_K(const void *vx, float *y, int64_t n) {
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

/*
 * core/dequant_more.c - dequantizers of the GGUF types sqz reads beyond its own: Q5_0, Q5_1,
 * the K-quants Q2_K, Q3_K, Q5_K, Q8_K and the non-linear IQ4_NL, IQ4_XS. Transcribed from
 * llama.cpp's ggml-quants.c (dequantize_row_*), operation for operation, so every value is the
 * float llama.cpp computes (tests/py/test_gguf_types.py checks them against gguf-py and libggml).
 * Q8_0, Q4_0, Q4_1, Q4_K and Q6_K are in core/dequant.c.
 */
#include <stdbool.h>
#include <stddef.h>
#include <string.h>

#include "core/blocks.h"
#include "core/dequant.h"
#include "sqz/dtype.h"

#define FP16(x) sqz_fp16_to_fp32(x)

/* llama.cpp's kvalues_iq4nl (ggml-common.h). */
const int8_t sqz__kvalues_iq4nl[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

static uint32_t load_u32le(const uint8_t *p) {
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

void sqz__dequantize_q5_0(const void *vx, float *y, int64_t n) {
    const sqz_block_q5_0 *x = vx;
    for (int64_t i = 0; i < n / SQZ_QK5_0; i++) {
        const float d = FP16(x[i].d);
        const uint32_t qh = load_u32le(x[i].qh);
        for (int j = 0; j < SQZ_QK5_0 / 2; ++j) {
            const uint8_t xh_0 = (uint8_t)(((qh >> (j + 0)) << 4) & 0x10);
            const uint8_t xh_1 = (uint8_t)((qh >> (j + 12)) & 0x10);
            const int32_t x0 = ((x[i].qs[j] & 0x0F) | xh_0) - 16;
            const int32_t x1 = ((x[i].qs[j] >> 4) | xh_1) - 16;
            y[i * SQZ_QK5_0 + j] = (float)x0 * d;
            y[i * SQZ_QK5_0 + j + SQZ_QK5_0 / 2] = (float)x1 * d;
        }
    }
}

void sqz__dequantize_q5_1(const void *vx, float *y, int64_t n) {
    const sqz_block_q5_1 *x = vx;
    for (int64_t i = 0; i < n / SQZ_QK5_1; i++) {
        const float d = FP16(x[i].d), m = FP16(x[i].m);
        const uint32_t qh = load_u32le(x[i].qh);
        for (int j = 0; j < SQZ_QK5_1 / 2; ++j) {
            const uint8_t xh_0 = (uint8_t)(((qh >> (j + 0)) << 4) & 0x10);
            const uint8_t xh_1 = (uint8_t)((qh >> (j + 12)) & 0x10);
            const int x0 = (x[i].qs[j] & 0x0F) | xh_0;
            const int x1 = (x[i].qs[j] >> 4) | xh_1;
            y[i * SQZ_QK5_1 + j] = (float)x0 * d + m;
            y[i * SQZ_QK5_1 + j + SQZ_QK5_1 / 2] = (float)x1 * d + m;
        }
    }
}

void sqz__dequantize_q2_K(const void *vx, float *y, int64_t n) {
    const sqz_block_q2_K *x = vx;
    for (int64_t i = 0; i < n / SQZ_QK_K; i++) {
        const float d = FP16(x[i].d), min = FP16(x[i].dmin);
        const uint8_t *q = x[i].qs;
        int is = 0;
        for (int nn = 0; nn < SQZ_QK_K; nn += 128) {
            int shift = 0;
            for (int j = 0; j < 4; ++j) {
                uint8_t sc = x[i].scales[is++];
                float dl = d * (float)(sc & 0xF), ml = min * (float)(sc >> 4);
                for (int l = 0; l < 16; ++l) *y++ = dl * (float)((int8_t)((q[l] >> shift) & 3)) - ml;
                sc = x[i].scales[is++];
                dl = d * (float)(sc & 0xF);
                ml = min * (float)(sc >> 4);
                for (int l = 0; l < 16; ++l) *y++ = dl * (float)((int8_t)((q[l + 16] >> shift) & 3)) - ml;
                shift += 2;
            }
            q += 32;
        }
    }
}

/* The 16 signed 6-bit scales of a Q3_K block (bytes 0..7: low nibbles, 8..11: high pairs). */
void sqz__q3_K_scales(const uint8_t packed[12], int8_t scales[16]) {
    const uint32_t kmask1 = 0x03030303, kmask2 = 0x0f0f0f0f;
    uint32_t aux[4];
    memcpy(aux, packed, 12);
    const uint32_t tmp = aux[2];
    aux[2] = ((aux[0] >> 4) & kmask2) | (((tmp >> 4) & kmask1) << 4);
    aux[3] = ((aux[1] >> 4) & kmask2) | (((tmp >> 6) & kmask1) << 4);
    aux[0] = (aux[0] & kmask2) | (((tmp >> 0) & kmask1) << 4);
    aux[1] = (aux[1] & kmask2) | (((tmp >> 2) & kmask1) << 4);
    memcpy(scales, aux, 16);
}

void sqz__dequantize_q3_K(const void *vx, float *y, int64_t n) {
    const sqz_block_q3_K *x = vx;
    int8_t scales[16];
    for (int64_t i = 0; i < n / SQZ_QK_K; i++) {
        const float d_all = FP16(x[i].d);
        const uint8_t *q = x[i].qs, *hm = x[i].hmask;
        uint8_t m = 1;
        sqz__q3_K_scales(x[i].scales, scales);
        int is = 0;
        for (int nn = 0; nn < SQZ_QK_K; nn += 128) {
            int shift = 0;
            for (int j = 0; j < 4; ++j) {
                float dl = d_all * (float)(scales[is++] - 32);
                for (int l = 0; l < 16; ++l)
                    *y++ = dl * (float)((int8_t)((q[l + 0] >> shift) & 3) - ((hm[l + 0] & m) ? 0 : 4));
                dl = d_all * (float)(scales[is++] - 32);
                for (int l = 0; l < 16; ++l)
                    *y++ = dl * (float)((int8_t)((q[l + 16] >> shift) & 3) - ((hm[l + 16] & m) ? 0 : 4));
                shift += 2;
                m = (uint8_t)(m << 1);
            }
            q += 32;
        }
    }
}

void sqz__dequantize_q5_K(const void *vx, float *y, int64_t n) {
    const sqz_block_q5_K *x = vx;
    for (int64_t i = 0; i < n / SQZ_QK_K; i++) {
        const uint8_t *ql = x[i].qs, *qh = x[i].qh;
        const float d = FP16(x[i].d), min = FP16(x[i].dmin);
        int is = 0;
        uint8_t sc, m, u1 = 1, u2 = 2;
        for (int j = 0; j < SQZ_QK_K; j += 64) {
            sqz__get_scale_min_k4(is + 0, x[i].scales, &sc, &m);
            const float d1 = d * sc, m1 = min * m;
            sqz__get_scale_min_k4(is + 1, x[i].scales, &sc, &m);
            const float d2 = d * sc, m2 = min * m;
            for (int l = 0; l < 32; ++l) *y++ = d1 * (float)((ql[l] & 0xF) + (qh[l] & u1 ? 16 : 0)) - m1;
            for (int l = 0; l < 32; ++l) *y++ = d2 * (float)((ql[l] >> 4) + (qh[l] & u2 ? 16 : 0)) - m2;
            ql += 32;
            is += 2;
            u1 = (uint8_t)(u1 << 2);
            u2 = (uint8_t)(u2 << 2);
        }
    }
}

void sqz__dequantize_q8_K(const void *vx, float *y, int64_t n) {
    const sqz_block_q8_K *x = vx;
    for (int64_t i = 0; i < n / SQZ_QK_K; i++) {
        float d;
        memcpy(&d, &x[i].d, sizeof d);
        for (int j = 0; j < SQZ_QK_K; ++j) *y++ = d * x[i].qs[j];
    }
}

void sqz__dequantize_iq4_nl(const void *vx, float *y, int64_t n) {
    const sqz_block_iq4_nl *x = vx;
    for (int64_t i = 0; i < n / SQZ_QK4_NL; i++) {
        const uint8_t *qs = x[i].qs;
        const float d = FP16(x[i].d);
        for (int j = 0; j < SQZ_QK4_NL / 2; ++j) {
            y[j] = d * sqz__kvalues_iq4nl[qs[j] & 0xf];
            y[j + SQZ_QK4_NL / 2] = d * sqz__kvalues_iq4nl[qs[j] >> 4];
        }
        y += SQZ_QK4_NL;
    }
}

void sqz__dequantize_iq4_xs(const void *vx, float *y, int64_t n) {
    const sqz_block_iq4_xs *x = vx;
    for (int64_t i = 0; i < n / SQZ_QK_K; i++) {
        const uint8_t *qs = x[i].qs;
        const float d = FP16(x[i].d);
        for (int ib = 0; ib < SQZ_QK_K / 32; ++ib) {
            const int ls = ((x[i].scales_l[ib / 2] >> 4 * (ib % 2)) & 0xf) | (((x[i].scales_h >> 2 * ib) & 3) << 4);
            const float dl = d * (float)(ls - 32);
            for (int j = 0; j < 16; ++j) {
                y[j + 0] = dl * sqz__kvalues_iq4nl[qs[j] & 0xf];
                y[j + 16] = dl * sqz__kvalues_iq4nl[qs[j] >> 4];
            }
            y += 32;
            qs += 16;
        }
    }
}

/* Where each block type keeps its fp16 (or E8M0) scales: a block's weights are finite exactly when these
 * are (code times scale stays far below FLT_MAX for every type listed; Q8_K's f32 scale can
 * overflow, so it is not). */
typedef struct f16_fields {
    bool listed;
    int16_t at[2]; /* byte offsets; -1: none */
    int16_t e8m0;  /* byte offset of an E8M0 scale (0xFF is NaN), or 0: none (set with +1) */
} f16_fields;

static const f16_fields block_scales[SQZ_DTYPE_COUNT] = {
    [SQZ_DTYPE_Q8_0] = {.listed = true, .at = {offsetof(sqz_block_q8_0, d), -1}},
    [SQZ_DTYPE_Q4_0] = {.listed = true, .at = {offsetof(sqz_block_q4_0, d), -1}},
    [SQZ_DTYPE_Q4_1] = {.listed = true, .at = {offsetof(sqz_block_q4_1, d), offsetof(sqz_block_q4_1, m)}},
    [SQZ_DTYPE_Q5_0] = {.listed = true, .at = {offsetof(sqz_block_q5_0, d), -1}},
    [SQZ_DTYPE_Q5_1] = {.listed = true, .at = {offsetof(sqz_block_q5_1, d), offsetof(sqz_block_q5_1, m)}},
    [SQZ_DTYPE_Q2_K] = {.listed = true, .at = {offsetof(sqz_block_q2_K, d), offsetof(sqz_block_q2_K, dmin)}},
    [SQZ_DTYPE_Q3_K] = {.listed = true, .at = {offsetof(sqz_block_q3_K, d), -1}},
    [SQZ_DTYPE_Q4_K] = {.listed = true, .at = {offsetof(sqz_block_q4_K, d), offsetof(sqz_block_q4_K, dmin)}},
    [SQZ_DTYPE_Q5_K] = {.listed = true, .at = {offsetof(sqz_block_q5_K, d), offsetof(sqz_block_q5_K, dmin)}},
    [SQZ_DTYPE_Q6_K] = {.listed = true, .at = {offsetof(sqz_block_q6_K, d), -1}},
    [SQZ_DTYPE_IQ4_NL] = {.listed = true, .at = {offsetof(sqz_block_iq4_nl, d), -1}},
    [SQZ_DTYPE_IQ4_XS] = {.listed = true, .at = {offsetof(sqz_block_iq4_xs, d), -1}},
    [SQZ_DTYPE_IQ3_S] = {.listed = true, .at = {offsetof(sqz_block_iq3_s, d), -1}},
    [SQZ_DTYPE_MXFP4] = {.listed = true, .at = {-1, -1}, .e8m0 = offsetof(sqz_block_mxfp4, e) + 1},
};

int64_t sqz__first_nonfinite_block(sqz_dtype t, const void *blocks, int64_t nblocks, size_t block_bytes) {
    if ((unsigned)t >= SQZ_DTYPE_COUNT || !block_scales[t].listed) return -2;
    const uint8_t *p = blocks;
    for (int64_t b = 0; b < nblocks; b++, p += block_bytes) {
        if (block_scales[t].e8m0 && p[block_scales[t].e8m0 - 1] == 0xFF) return b;
        for (int f = 0; f < 2 && block_scales[t].at[f] >= 0; f++) {
            uint16_t h;
            memcpy(&h, p + block_scales[t].at[f], 2);
            if ((h & 0x7C00) == 0x7C00) return b; /* exponent all ones: inf or nan */
        }
    }
    return -1;
}

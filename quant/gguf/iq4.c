/*
 * quant/gguf/iq4.c - the 4-bit non-linear quantizers IQ4_NL and IQ4_XS: llama.cpp's
 * quantize_row_iq4_nl_impl (ggml-quants.c) and its three callers, transcribed operation for
 * operation so that the bytes are identical (tests/py/test_gguf_types.py compares them with
 * libggml's):
 *
 *   quantize_row_iq4_nl_ref  one scale per 32-block from the element of largest magnitude and a
 *                            weighted least-squares refit, no search (ntry -1; the dtype table's
 *                            reference from_f32)
 *   quantize_iq4_nl          the same with a search over 15 candidate scales (ntry 7), weights
 *                            qw * sqrt(sigma2 + x^2) with an importance matrix, x^2 without: what
 *                            llama-quantize writes for IQ4_NL with or without --imatrix
 *   quantize_iq4_xs          256-element super-blocks: the eight 32-block scales of the search
 *                            above quantized to 6 bits under one fp16 scale (d * (ls - 32)), then
 *                            every code re-chosen on the stored scale; the reference is the same
 *                            function without weights
 *
 * Codes index the 16 values of kvalues_iq4nl (core/dequant_more.c); a value is d * kvalues[code].
 * The dequantizers are core's.
 */
#include <math.h>
#include <string.h>

#include "core/blocks.h"
#include "core/dequant.h"
#include "quant/gguf/kquant_internal.h"
#include "quant/gguf/quant_gguf.h"

#define QK_K SQZ_QK_K

/* ggml's best_index_int8: the index of the table value nearest x (ties to the upper one only
 * when strictly nearer, as llama.cpp). */
int sqz__iq4_best_index(float x) {
    const int8_t *val = sqz__kvalues_iq4nl;
    if (x <= val[0]) return 0;
    if (x >= val[15]) return 15;
    int ml = 0, mu = 15;
    while (mu - ml > 1) {
        const int mav = (ml + mu) / 2;
        if (x < val[mav]) mu = mav;
        else ml = mav;
    }
    return x - val[mu - 1] < val[mu] - x ? mu - 1 : mu;
}

/* Sum over the block of w q x and w q^2 with codes chosen for inverse scale id (L: NULL or the codes). */
static void iq4_sums(const float *xb, const float *weight, int n, float id, uint8_t *L, float *sumqx, float *sumq2) {
    float sx = 0, s2 = 0;
    for (int j = 0; j < n; ++j) {
        const int l = sqz__iq4_best_index(id * xb[j]);
        if (L) L[j] = (uint8_t)l;
        const float q = sqz__kvalues_iq4nl[l];
        const float w = weight[j];
        sx += w * q * xb[j];
        s2 += w * q * q;
    }
    *sumqx = sx;
    *sumq2 = s2;
}

/* The scale of one 32-block (scales[ib] of quantize_row_iq4_nl_impl): 0 for an all-zero block
 * (its codes Lb are then left as they were). */
static float iq4_block_scale(const float *xb, const float *qw, float sigma2, uint8_t *Lb, int ntry) {
    float weight[32];
    const int8_t *values = sqz__kvalues_iq4nl;
    if (qw)
        for (int j = 0; j < 32; ++j) weight[j] = qw[j] * sqrtf(sigma2 + xb[j] * xb[j]);
    else
        for (int j = 0; j < 32; ++j) weight[j] = xb[j] * xb[j];
    float amax = 0, max = 0;
    for (int j = 0; j < 32; ++j) {
        const float ax = fabsf(xb[j]);
        if (ax > amax) {
            amax = ax;
            max = xb[j];
        }
    }
    if (amax < SQZ__GROUP_MAX_EPS) return 0;
    float d = ntry > 0 ? -max / values[0] : max / values[0];
    float sumqx, sumq2;
    iq4_sums(xb, weight, 32, 1 / d, Lb, &sumqx, &sumq2);
    d = sumq2 > 0 ? sumqx / sumq2 : 0.f;
    float best = d * sumqx;
    for (int itry = -ntry; itry <= ntry; ++itry) {
        const float id = (itry + values[0]) / max;
        iq4_sums(xb, weight, 32, id, NULL, &sumqx, &sumq2);
        if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
            d = sumqx / sumq2;
            best = d * sumqx;
        }
    }
    return d;
}

static void iq4_pack(const uint8_t *L, uint8_t *q4, int n) {
    for (int i = 0; i < n / 32; ++i)
        for (int j = 0; j < 16; ++j) q4[16 * i + j] = (uint8_t)(L[32 * i + j] | (L[32 * i + 16 + j] << 4));
}

static float iq4_sigma2(const float *x, int n) {
    float sigma2 = 0;
    for (int j = 0; j < n; ++j) sigma2 += x[j] * x[j];
    return sigma2 * (2.f / n);
}

/* quantize_row_iq4_nl_impl with super_block_size 32; L holds the previous block's codes (the
 * reference leaves an all-zero block's codes as they were). */
static void iq4_nl_block(const float *x, sqz_block_iq4_nl *y, const float *qw, uint8_t *L, int ntry) {
    const float sigma2 = iq4_sigma2(x, 32);
    const float d = iq4_block_scale(x, qw, sigma2, L, ntry);
    y->d = sqz_fp32_to_fp16(d);
    if (ntry > 0) {
        const float id = d ? 1 / d : 0;
        for (int j = 0; j < 32; ++j) L[j] = (uint8_t)sqz__iq4_best_index(id * x[j]);
    }
    iq4_pack(L, y->qs, 32);
}

/* quantize_row_iq4_nl_impl with super_block_size 256 (ntry 7). */
static void iq4_xs_block(const float *x, sqz_block_iq4_xs *y, const float *qw) {
    uint8_t L[QK_K];
    float scales[QK_K / 32];
    const float sigma2 = iq4_sigma2(x, QK_K);
    float max_scale = 0, amax_scale = 0;
    for (int ib = 0; ib < QK_K / 32; ++ib) {
        scales[ib] = iq4_block_scale(x + 32 * ib, qw ? qw + 32 * ib : NULL, sigma2, L + 32 * ib, 7);
        const float abs_d = fabsf(scales[ib]);
        if (abs_d > amax_scale) {
            amax_scale = abs_d;
            max_scale = scales[ib];
        }
    }
    y->scales_h = 0;
    const float d = -max_scale / 32;
    y->d = sqz_fp32_to_fp16(d);
    const float id = d ? 1 / d : 0.f;
    for (int ib = 0; ib < QK_K / 32; ++ib) {
        int l = sqz__nearest_int(id * scales[ib]);
        l = l < -32 ? -32 : l > 31 ? 31 : l;
        const float dl = d * l;
        const float idl = dl ? 1 / dl : 0.f;
        for (int j = 0; j < 32; ++j) L[32 * ib + j] = (uint8_t)sqz__iq4_best_index(idl * x[32 * ib + j]);
        l += 32;
        const uint8_t l_l = (uint8_t)(l & 0xf), l_h = (uint8_t)(l >> 4);
        if (ib % 2 == 0) y->scales_l[ib / 2] = l_l;
        else y->scales_l[ib / 2] |= (uint8_t)(l_l << 4);
        y->scales_h |= (uint16_t)(l_h << 2 * (ib % 8));
    }
    iq4_pack(L, y->qs, QK_K);
}

void sqz__quantize_iq4_nl_ref(const float *x, void *vy, int64_t n) {
    sqz_block_iq4_nl *y = vy;
    uint8_t L[32] = {0};
    for (int64_t i = 0; i < n / 32; ++i) iq4_nl_block(x + 32 * i, &y[i], NULL, L, -1);
}

void sqz__quantize_iq4_xs_ref(const float *x, void *vy, int64_t n) {
    sqz_block_iq4_xs *y = vy;
    for (int64_t i = 0; i < n / QK_K; ++i) iq4_xs_block(x + QK_K * i, &y[i], NULL);
}

void sqz__quantize_iq4(sqz_dtype t, const float *src, void *dst, int64_t nrow, int64_t n_per_row,
                      const float *quant_weights) {
    uint8_t L[32] = {0};
    for (int64_t r = 0; r < nrow; ++r) {
        const float *x = src + r * n_per_row;
        if (t == SQZ_DTYPE_IQ4_XS) {
            sqz_block_iq4_xs *y = (sqz_block_iq4_xs *)dst + r * (n_per_row / QK_K);
            for (int64_t i = 0; i < n_per_row / QK_K; ++i)
                iq4_xs_block(x + QK_K * i, &y[i], quant_weights ? quant_weights + QK_K * i : NULL);
        } else {
            sqz_block_iq4_nl *y = (sqz_block_iq4_nl *)dst + r * (n_per_row / 32);
            for (int64_t i = 0; i < n_per_row / 32; ++i)
                iq4_nl_block(x + 32 * i, &y[i], quant_weights ? quant_weights + 32 * i : NULL, L, 7);
        }
    }
}

int sqz__iq4_subscales(sqz_dtype t, const void *block, float *d) {
    if (t == SQZ_DTYPE_IQ4_NL) {
        d[0] = sqz_fp16_to_fp32(((const sqz_block_iq4_nl *)block)->d);
        return 1;
    }
    if (t != SQZ_DTYPE_IQ4_XS) return 0;
    const sqz_block_iq4_xs *x = block;
    const float dh = sqz_fp16_to_fp32(x->d);
    for (int ib = 0; ib < QK_K / 32; ++ib) {
        const int ls = ((x->scales_l[ib / 2] >> 4 * (ib % 2)) & 0xf) | (((x->scales_h >> 2 * ib) & 3) << 4);
        d[ib] = dh * (float)(ls - 32); /* as sqz__dequantize_iq4_xs */
    }
    return QK_K / 32;
}

void sqz__iq4_repack(sqz_dtype t, const uint8_t *L, void *block) {
    if (t == SQZ_DTYPE_IQ4_NL) iq4_pack(L, ((sqz_block_iq4_nl *)block)->qs, 32);
    else iq4_pack(L, ((sqz_block_iq4_xs *)block)->qs, QK_K);
}

/*
 * quant/gguf/kquant.c - the K-quant quantizers Q2_K, Q3_K, Q4_K, Q5_K, Q6_K: llama.cpp's reference
 * quantizers (quantize_row_q*_K_ref, what llama-quantize writes without an importance matrix)
 * and its importance-weighted ones (quantize_q*_K with quant_weights: quantize_row_q*_K_impl),
 * transcribed from ggml-quants.c so that the bytes are identical (tests/py/test_gguf_types.py
 * compares them with libggml's). The scale searches are in quant/gguf/kquant_search.c;
 * the dequantizers are core's (core/dequant.c, core/dequant_more.c).
 *
 * Every quantizer works on 256-element super-blocks; the importance-weighted ones per row
 * (quant_weights holds one weight per column, E[x^2] of the layer's input as llama-imatrix
 * collects it).
 */
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "core/blocks.h"
#include "core/dequant.h"
#include "quant/gguf/kquant_internal.h"
#include "quant/gguf/quant_gguf.h"
#include "sqz/dtype.h"

#define QK_K SQZ_QK_K
#define MAXI(a, b) ((a) > (b) ? (a) : (b))
#define MINI(a, b) ((a) < (b) ? (a) : (b))
#define FP16(x) sqz_fp16_to_fp32(x)
#define TO_FP16(x) sqz_fp32_to_fp16(x)

/* Four 2-bit codes per byte: elements l, l + 32, l + 64, l + 96 of each 128 (Q2_K, Q3_K). */
static void pack_2bit(const uint8_t *L, uint8_t *qs) {
    for (int j = 0; j < QK_K; j += 128)
        for (int l = 0; l < 32; ++l)
            qs[j / 4 + l] = (uint8_t)(L[j + l] | (L[j + l + 32] << 2) | (L[j + l + 64] << 4) | (L[j + l + 96] << 6));
}

/* 6-bit scale ls and minimum lm of sub-block j into the 12 bytes of Q4_K / Q5_K. */
static void put_scale_min_k4(uint8_t *scales, int j, uint8_t ls, uint8_t lm) {
    if (j < 4) {
        scales[j] = ls;
        scales[j + 4] = lm;
    } else {
        scales[j + 4] = (uint8_t)((ls & 0xF) | ((lm & 0xF) << 4));
        scales[j - 4] |= (uint8_t)((ls >> 4) << 6);
        scales[j - 0] |= (uint8_t)((lm >> 4) << 6);
    }
}

/* Signed 6-bit scale l (0..63, offset 32) of sub-block j into Q3_K's 12 bytes. */
static void put_scale_q3(uint8_t *scales, int j, int l) {
    if (j < 8) scales[j] = (uint8_t)(l & 0xF);
    else scales[j - 8] |= (uint8_t)((l & 0xF) << 4);
    l >>= 4;
    scales[j % 4 + 8] |= (uint8_t)(l << (2 * (j / 4)));
}

/* Codes L (0..7) of a Q3_K block: the high bits into hmask, the rest packed; L is changed. */
static void q3_K_pack(uint8_t *L, sqz_block_q3_K *y) {
    memset(y->hmask, 0, QK_K / 8);
    int m = 0;
    uint8_t hm = 1;
    for (int j = 0; j < QK_K; ++j) { /* high bit of the first 32 values in bit 0, the next in bit 1, ... */
        if (L[j] > 3) {
            y->hmask[m] |= hm;
            L[j] = (uint8_t)(L[j] - 4);
        }
        if (++m == QK_K / 8) {
            m = 0;
            hm = (uint8_t)(hm << 1);
        }
    }
    pack_2bit(L, y->qs);
}

/* Codes of x on the stored Q3_K grid, then the high bits into hmask and the rest packed. */
static void q3_K_finish(const float *x, sqz_block_q3_K *y, int8_t *L) {
    for (int j = 0; j < QK_K / 16; ++j) {
        int8_t sc = (int8_t)(j < 8 ? y->scales[j] & 0xF : y->scales[j - 8] >> 4);
        sc = (int8_t)((sc | (((y->scales[8 + j % 4] >> (2 * (j / 4))) & 3) << 4)) - 32);
        const float d = FP16(y->d) * sc;
        if (!d) continue;
        for (int ii = 0; ii < 16; ++ii) {
            int l = sqz__nearest_int(x[16 * j + ii] / d);
            l = MAXI(-4, MINI(3, l));
            L[16 * j + ii] = (int8_t)(l + 4);
        }
    }
    q3_K_pack((uint8_t *)L, y);
}

/* Codes of x on the stored Q4_K / Q5_K grid (nmax 15 or 31). */
static void k4_codes(const float *x, uint16_t d16, uint16_t dmin16, const uint8_t *scales, int nmax, uint8_t *L) {
    uint8_t sc, m;
    for (int j = 0; j < QK_K / 32; ++j) {
        sqz__get_scale_min_k4(j, scales, &sc, &m);
        const float d = FP16(d16) * sc;
        if (!d) continue;
        const float dm = FP16(dmin16) * m;
        for (int ii = 0; ii < 32; ++ii) {
            int l = sqz__nearest_int((x[32 * j + ii] + dm) / d);
            l = MAXI(0, MINI(nmax, l));
            L[32 * j + ii] = (uint8_t)l;
        }
    }
}

static void q4_K_pack(const uint8_t *L, uint8_t *q) {
    for (int j = 0; j < QK_K; j += 64) {
        for (int l = 0; l < 32; ++l) q[l] = (uint8_t)(L[j + l] | (L[j + l + 32] << 4));
        q += 32;
    }
}

static void q5_K_pack(const uint8_t *L, uint8_t *qh, uint8_t *ql) {
    memset(qh, 0, QK_K / 8);
    uint8_t m1 = 1, m2 = 2;
    for (int n = 0; n < QK_K; n += 64) {
        for (int j = 0; j < 32; ++j) {
            int l1 = L[n + j];
            if (l1 > 15) { l1 -= 16; qh[j] |= m1; }
            int l2 = L[n + j + 32];
            if (l2 > 15) { l2 -= 16; qh[j] |= m2; }
            ql[j] = (uint8_t)(l1 | (l2 << 4));
        }
        m1 = (uint8_t)(m1 << 2);
        m2 = (uint8_t)(m2 << 2);
        ql += 32;
    }
}

/* ---- Q2_K ---------------------------------------------------------------------------------- */

static void q2_K_finish(const float *x, sqz_block_q2_K *y, uint8_t *L) {
    for (int j = 0; j < QK_K / 16; ++j) {
        const float d = FP16(y->d) * (y->scales[j] & 0xF);
        if (!d) continue;
        const float dm = FP16(y->dmin) * (y->scales[j] >> 4);
        for (int ii = 0; ii < 16; ++ii) {
            int l = sqz__nearest_int((x[16 * j + ii] + dm) / d);
            l = MAXI(0, MINI(3, l));
            L[16 * j + ii] = (uint8_t)l;
        }
    }
    pack_2bit(L, y->qs);
}

void sqz__quantize_q2_K_ref(const float *x, void *vy, int64_t k) {
    sqz_block_q2_K *y = vy;
    uint8_t L[QK_K], Laux[16];
    float weights[16], mins[QK_K / 16], scales[QK_K / 16];
    const float q4scale = 15.f;
    for (int64_t i = 0; i < k / QK_K; i++) {
        float max_scale = 0, max_min = 0;
        for (int j = 0; j < QK_K / 16; ++j) {
            for (int l = 0; l < 16; ++l) weights[l] = fabsf(x[16 * j + l]);
            scales[j] = sqz__make_qkx2_quants(16, 3, x + 16 * j, weights, L + 16 * j, &mins[j], Laux, -0.5f, 0.1f, 15,
                                              true);
            if (scales[j] > max_scale) max_scale = scales[j];
            if (mins[j] > max_min) max_min = mins[j];
        }
        if (max_scale > 0) {
            const float iscale = q4scale / max_scale;
            for (int j = 0; j < QK_K / 16; ++j) y[i].scales[j] = (uint8_t)sqz__nearest_int(iscale * scales[j]);
            y[i].d = TO_FP16(max_scale / q4scale);
        } else {
            for (int j = 0; j < QK_K / 16; ++j) y[i].scales[j] = 0;
            y[i].d = TO_FP16(0.f);
        }
        if (max_min > 0) {
            const float iscale = q4scale / max_min;
            for (int j = 0; j < QK_K / 16; ++j) y[i].scales[j] |= (uint8_t)(sqz__nearest_int(iscale * mins[j]) << 4);
            y[i].dmin = TO_FP16(max_min / q4scale);
        } else {
            y[i].dmin = TO_FP16(0.f);
        }
        q2_K_finish(x, &y[i], L);
        x += QK_K;
    }
}

static void q2_K_row_impl(const float *x, sqz_block_q2_K *y, int64_t n_per_row, const float *quant_weights) {
    uint8_t L[QK_K], Laux[16], Ls[QK_K / 16], Lm[QK_K / 16];
    float mins[QK_K / 16], scales[QK_K / 16], sw[QK_K / 16], weight[16];
    for (int64_t i = 0; i < n_per_row / QK_K; i++) {
        memset(sw, 0, sizeof sw);
        float sumx2 = 0;
        for (int j = 0; j < QK_K; ++j) sumx2 += x[j] * x[j];
        const float sigma2 = sumx2 / QK_K;
        for (int j = 0; j < QK_K / 16; ++j) {
            const float *qw = quant_weights + QK_K * i + 16 * j;
            for (int l = 0; l < 16; ++l) weight[l] = qw[l] * sqrtf(sigma2 + x[16 * j + l] * x[16 * j + l]);
            for (int l = 0; l < QK_K / 16; ++l) sw[j] += weight[l];
            scales[j] = sqz__make_qkx3_quants(16, 3, x + 16 * j, weight, L + 16 * j, &mins[j], Laux, -0.9f, 0.05f, 36);
        }
        const float dm = sqz__make_qp_quants(QK_K / 16, 15, scales, Ls, sw);
        const float mm = sqz__make_qp_quants(QK_K / 16, 15, mins, Lm, sw);
        y[i].d = TO_FP16(dm);
        y[i].dmin = TO_FP16(mm);
        for (int j = 0; j < QK_K / 16; ++j) y[i].scales[j] = (uint8_t)(Ls[j] | (Lm[j] << 4));
        q2_K_finish(x, &y[i], L);
        x += QK_K;
    }
}

/* ---- Q3_K ---------------------------------------------------------------------------------- */

void sqz__quantize_q3_K_ref(const float *x, void *vy, int64_t k) {
    sqz_block_q3_K *y = vy;
    int8_t L[QK_K];
    float scales[QK_K / 16];
    for (int64_t i = 0; i < k / QK_K; i++) {
        float max_scale = 0, amax = 0;
        for (int j = 0; j < QK_K / 16; ++j) {
            scales[j] = sqz__make_q3_quants(16, 4, x + 16 * j, L + 16 * j);
            const float scale = fabsf(scales[j]);
            if (scale > amax) { amax = scale; max_scale = scales[j]; }
        }
        memset(y[i].scales, 0, 12);
        if (max_scale) {
            const float iscale = -32.f / max_scale;
            for (int j = 0; j < QK_K / 16; ++j) {
                int8_t l = (int8_t)sqz__nearest_int(iscale * scales[j]);
                l = (int8_t)(MAXI(-32, MINI(31, l)) + 32);
                put_scale_q3(y[i].scales, j, l);
            }
            y[i].d = TO_FP16(1 / iscale);
        } else {
            y[i].d = TO_FP16(0.f);
        }
        q3_K_finish(x, &y[i], L);
        x += QK_K;
    }
}

static void q3_K_row_impl(const float *x, sqz_block_q3_K *y, int64_t n_per_row, const float *quant_weights) {
    int8_t L[QK_K], Ls[QK_K / 16];
    float scales[QK_K / 16], weight[16], sw[QK_K / 16];
    for (int64_t i = 0; i < n_per_row / QK_K; i++) {
        float sumx2 = 0;
        for (int j = 0; j < QK_K; ++j) sumx2 += x[j] * x[j];
        const float sigma2 = 2 * sumx2 / QK_K;
        for (int j = 0; j < QK_K / 16; ++j) {
            const float *qw = quant_weights + QK_K * i + 16 * j;
            for (int l = 0; l < 16; ++l) weight[l] = qw[l] * sqrtf(sigma2 + x[16 * j + l] * x[16 * j + l]);
            float sumw = 0;
            for (int l = 0; l < 16; ++l) sumw += weight[l];
            sw[j] = sumw;
            scales[j] = sqz__make_qx_quants(16, 4, x + 16 * j, L + 16 * j, weight);
        }
        memset(y[i].scales, 0, 12);
        const float d_block = sqz__make_qx_quants(QK_K / 16, 32, scales, Ls, sw);
        for (int j = 0; j < QK_K / 16; ++j) put_scale_q3(y[i].scales, j, Ls[j]);
        y[i].d = TO_FP16(d_block);
        q3_K_finish(x, &y[i], L);
        x += QK_K;
    }
}

/* ---- Q4_K, Q5_K ---------------------------------------------------------------------------- */

/* The reference quantizers of Q4_K (nmax 15) and Q5_K (nmax 31) differ only in the search's
 * range (rmin, nstep) and the packing. */
static void k45_ref_block(const float *x, int nmax, float rmin, int nstep, uint8_t *scales_out, uint16_t *d,
                          uint16_t *dmin, uint8_t *L) {
    uint8_t Laux[32];
    float weights[QK_K], mins[QK_K / 32], scales[QK_K / 32];
    float max_scale = 0, max_min = 0;
    for (int j = 0; j < QK_K / 32; ++j) {
        float sum_x2 = 0;
        for (int l = 0; l < 32; ++l) sum_x2 += x[32 * j + l] * x[32 * j + l];
        const float av_x = sqrtf(sum_x2 / 32);
        for (int l = 0; l < 32; ++l) weights[32 * j + l] = av_x + fabsf(x[32 * j + l]);
    }
    /* make_qkx2_quants without MAD is make_qkx3_quants' search (its early return on max == min is
     * max <= min's, min never exceeding max): the 8 side by side where the CPU can, same bits */
    const bool x8 = sqz__make_qkx3_quants_x8(nmax, x, weights, L, scales, mins, rmin, 0.1f, nstep);
    for (int j = 0; j < QK_K / 32; ++j) {
        if (!x8)
            scales[j] = sqz__make_qkx2_quants(32, nmax, x + 32 * j, weights + 32 * j, L + 32 * j, &mins[j], Laux, rmin,
                                              0.1f, nstep, false);
        if (scales[j] > max_scale) max_scale = scales[j];
        if (mins[j] > max_min) max_min = mins[j];
    }
    const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
    const float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
    for (int j = 0; j < QK_K / 32; ++j) {
        uint8_t ls = (uint8_t)sqz__nearest_int(inv_scale * scales[j]);
        uint8_t lm = (uint8_t)sqz__nearest_int(inv_min * mins[j]);
        ls = MINI(63, ls);
        lm = MINI(63, lm);
        put_scale_min_k4(scales_out, j, ls, lm);
    }
    *d = TO_FP16(max_scale / 63.f);
    *dmin = TO_FP16(max_min / 63.f);
    k4_codes(x, *d, *dmin, scales_out, nmax, L);
}

/* clamp63: Q5_K clamps the scale codes to 63 again, Q4_K does not (a no-op for scales >= 0). */
static void k45_impl_block(const float *x, const float *qw_block, int nmax, bool clamp63, uint8_t *scales_out,
                           uint16_t *d, uint16_t *dmin, uint8_t *L) {
    uint8_t Laux[32], Ls[QK_K / 32], Lm[QK_K / 32];
    float weights[QK_K], sw[QK_K / 32], mins[QK_K / 32], scales[QK_K / 32];
    float sum_x2 = 0;
    for (int l = 0; l < QK_K; ++l) sum_x2 += x[l] * x[l];
    const float sigma2 = 2 * sum_x2 / QK_K;
    for (int j = 0; j < QK_K / 32; ++j) {
        const float *qw = qw_block + 32 * j;
        float *w = weights + 32 * j;
        for (int l = 0; l < 32; ++l) w[l] = qw[l] * sqrtf(sigma2 + x[32 * j + l] * x[32 * j + l]);
        float sumw = 0;
        for (int l = 0; l < 32; ++l) sumw += w[l];
        sw[j] = sumw;
    }
    /* the 8 searches side by side where the CPU can (the same bits), else one by one */
    if (!sqz__make_qkx3_quants_x8(nmax, x, weights, L, scales, mins, -0.9f, 0.05f, 36))
        for (int j = 0; j < QK_K / 32; ++j)
            scales[j] = sqz__make_qkx3_quants(32, nmax, x + 32 * j, weights + 32 * j, L + 32 * j, &mins[j], Laux,
                                              -0.9f, 0.05f, 36);
    const float d_block = sqz__make_qp_quants(QK_K / 32, 63, scales, Ls, sw);
    const float m_block = sqz__make_qp_quants(QK_K / 32, 63, mins, Lm, sw);
    for (int j = 0; j < QK_K / 32; ++j)
        put_scale_min_k4(scales_out, j, clamp63 ? MINI(63, Ls[j]) : Ls[j], clamp63 ? MINI(63, Lm[j]) : Lm[j]);
    *d = TO_FP16(d_block);
    *dmin = TO_FP16(m_block);
    k4_codes(x, *d, *dmin, scales_out, nmax, L);
}

void sqz__quantize_q4_K_ref(const float *x, void *vy, int64_t k) {
    sqz_block_q4_K *y = vy;
    uint8_t L[QK_K];
    for (int64_t i = 0; i < k / QK_K; i++, x += QK_K) {
        k45_ref_block(x, 15, -1.f, 20, y[i].scales, &y[i].d, &y[i].dmin, L);
        q4_K_pack(L, y[i].qs);
    }
}

void sqz__quantize_q5_K_ref(const float *x, void *vy, int64_t k) {
    sqz_block_q5_K *y = vy;
    uint8_t L[QK_K];
    for (int64_t i = 0; i < k / QK_K; i++, x += QK_K) {
        k45_ref_block(x, 31, -0.5f, 15, y[i].scales, &y[i].d, &y[i].dmin, L);
        q5_K_pack(L, y[i].qh, y[i].qs);
    }
}

/* ---- Q6_K ---------------------------------------------------------------------------------- */

/* quant_weights: NULL for the reference quantizer (weights x^2), else the row's block weights
 * (llama.cpp passes them unscaled to make_qx_quants for Q6_K). */
/* Codes L (0..63) of a Q6_K block into ql (low 4 bits) and qh (high 2). */
static void q6_K_pack(const uint8_t *L, sqz_block_q6_K *y) {
    uint8_t *ql = y->ql, *qh = y->qh;
    for (int j = 0; j < QK_K; j += 128) {
        for (int l = 0; l < 32; ++l) {
            const uint8_t q1 = L[j + l + 0] & 0xF, q2 = L[j + l + 32] & 0xF;
            const uint8_t q3 = L[j + l + 64] & 0xF, q4 = L[j + l + 96] & 0xF;
            ql[l + 0] = (uint8_t)(q1 | (q3 << 4));
            ql[l + 32] = (uint8_t)(q2 | (q4 << 4));
            qh[l] = (uint8_t)((L[j + l] >> 4) | ((L[j + l + 32] >> 4) << 2) | ((L[j + l + 64] >> 4) << 4) |
                              ((L[j + l + 96] >> 4) << 6));
        }
        ql += 64;
        qh += 32;
    }
}

static void q6_K_block(const float *x, sqz_block_q6_K *y, const float *qw_block) {
    int8_t L[QK_K];
    float scales[QK_K / 16];
    float max_scale = 0, max_abs_scale = 0;
    /* the 16 searches 8 at a time where the CPU can (the same bits), else one by one */
    for (int h = 0; h < 2; ++h)
        if (!sqz__make_qx_quants_x8(32, x + 128 * h, L + 128 * h, qw_block ? qw_block + 128 * h : NULL, scales + 8 * h))
            for (int ib = 8 * h; ib < 8 * h + 8; ++ib)
                scales[ib] = sqz__make_qx_quants(16, 32, x + 16 * ib, L + 16 * ib, qw_block ? qw_block + 16 * ib : NULL);
    for (int ib = 0; ib < QK_K / 16; ++ib) {
        const float scale = scales[ib];
        const float abs_scale = fabsf(scale);
        if (abs_scale > max_abs_scale) {
            max_abs_scale = abs_scale;
            max_scale = scale;
        }
    }
    if (max_abs_scale < SQZ__GROUP_MAX_EPS) {
        memset(y, 0, sizeof *y);
        y->d = TO_FP16(0.f);
        return;
    }
    const float iscale = -128.f / max_scale;
    y->d = TO_FP16(1 / iscale);
    for (int ib = 0; ib < QK_K / 16; ++ib) y->scales[ib] = (int8_t)MINI(127, sqz__nearest_int(iscale * scales[ib]));
    for (int j = 0; j < QK_K / 16; ++j) {
        const float d = FP16(y->d) * y->scales[j];
        if (!d) continue;
        for (int ii = 0; ii < 16; ++ii) {
            int l = sqz__nearest_int(x[16 * j + ii] / d);
            l = MAXI(-32, MINI(31, l));
            L[16 * j + ii] = (int8_t)(l + 32);
        }
    }
    q6_K_pack((const uint8_t *)L, y);
}

void sqz__quantize_q6_K_ref(const float *x, void *vy, int64_t k) {
    sqz_block_q6_K *y = vy;
    for (int64_t i = 0; i < k / QK_K; i++) q6_K_block(x + i * QK_K, &y[i], NULL);
}

/* ---- importance-weighted, per row (llama.cpp's quantize_q*_K) --------------------------------- */

void sqz__quantize_k(sqz_dtype t, const float *src, void *dst, int64_t nrow, int64_t n_per_row,
                    const float *quant_weights) {
    const sqz_dtype_traits *tr = sqz_dtype_info(t);
    if (!quant_weights) {
        tr->from_f32(src, dst, nrow * n_per_row);
        return;
    }
    const size_t row_size = (size_t)(n_per_row / QK_K) * tr->type_size;
    uint8_t *qrow = dst;
    for (int64_t row = 0; row < nrow; ++row, src += n_per_row, qrow += row_size) {
        switch (t) {
        case SQZ_DTYPE_Q2_K: q2_K_row_impl(src, (sqz_block_q2_K *)(void *)qrow, n_per_row, quant_weights); break;
        case SQZ_DTYPE_Q3_K: q3_K_row_impl(src, (sqz_block_q3_K *)(void *)qrow, n_per_row, quant_weights); break;
        case SQZ_DTYPE_Q4_K:
            for (int64_t i = 0; i < n_per_row / QK_K; i++) {
                sqz_block_q4_K *y = (sqz_block_q4_K *)(void *)qrow + i;
                uint8_t L[QK_K];
                k45_impl_block(src + i * QK_K, quant_weights + QK_K * i, 15, false, y->scales, &y->d, &y->dmin, L);
                q4_K_pack(L, y->qs);
            }
            break;
        case SQZ_DTYPE_Q5_K:
            for (int64_t i = 0; i < n_per_row / QK_K; i++) {
                sqz_block_q5_K *y = (sqz_block_q5_K *)(void *)qrow + i;
                uint8_t L[QK_K];
                k45_impl_block(src + i * QK_K, quant_weights + QK_K * i, 31, true, y->scales, &y->d, &y->dmin, L);
                q5_K_pack(L, y->qh, y->qs);
            }
            break;
        case SQZ_DTYPE_Q6_K:
            for (int64_t i = 0; i < n_per_row / QK_K; i++)
                q6_K_block(src + i * QK_K, (sqz_block_q6_K *)(void *)qrow + i, quant_weights + QK_K * i);
            break;
        default: tr->from_f32(src, qrow, n_per_row); break;
        }
    }
}

/* ---- a block's grids and codes (GPTQ onto the K-quant grids) ---------------------------------- */

int sqz__kquant_subgrids(sqz_dtype t, const void *block, float *d, float *m, int *zero, int *nmax) {
    uint8_t sc, mn;
    switch (t) {
    case SQZ_DTYPE_Q2_K: {
        const sqz_block_q2_K *x = block;
        for (int j = 0; j < QK_K / 16; j++) {
            d[j] = FP16(x->d) * (float)(x->scales[j] & 0xF);
            m[j] = -(FP16(x->dmin) * (float)(x->scales[j] >> 4));
        }
        *zero = 0, *nmax = 3;
        return 16;
    }
    case SQZ_DTYPE_Q3_K: {
        const sqz_block_q3_K *x = block;
        int8_t s16[16];
        sqz__q3_K_scales(x->scales, s16);
        for (int j = 0; j < QK_K / 16; j++) d[j] = FP16(x->d) * (float)(s16[j] - 32), m[j] = 0.0f;
        *zero = 4, *nmax = 7;
        return 16;
    }
    case SQZ_DTYPE_Q4_K:
    case SQZ_DTYPE_Q5_K: {
        const sqz_block_q4_K *x4 = block;
        const sqz_block_q5_K *x5 = block;
        const uint16_t d16 = t == SQZ_DTYPE_Q4_K ? x4->d : x5->d, m16 = t == SQZ_DTYPE_Q4_K ? x4->dmin : x5->dmin;
        const uint8_t *scales = t == SQZ_DTYPE_Q4_K ? x4->scales : x5->scales;
        for (int j = 0; j < QK_K / 32; j++) {
            sqz__get_scale_min_k4(j, scales, &sc, &mn);
            d[j] = FP16(d16) * (float)sc;
            m[j] = -(FP16(m16) * (float)mn);
        }
        *zero = 0, *nmax = t == SQZ_DTYPE_Q4_K ? 15 : 31;
        return 32;
    }
    case SQZ_DTYPE_Q6_K: {
        const sqz_block_q6_K *x = block;
        for (int j = 0; j < QK_K / 16; j++) d[j] = FP16(x->d) * (float)x->scales[j], m[j] = 0.0f;
        *zero = 32, *nmax = 63;
        return 16;
    }
    default: return 0;
    }
}

void sqz__kquant_repack(sqz_dtype t, uint8_t *L, void *block) {
    switch (t) {
    case SQZ_DTYPE_Q2_K: pack_2bit(L, ((sqz_block_q2_K *)block)->qs); break;
    case SQZ_DTYPE_Q3_K: q3_K_pack(L, block); break;
    case SQZ_DTYPE_Q4_K: q4_K_pack(L, ((sqz_block_q4_K *)block)->qs); break;
    case SQZ_DTYPE_Q5_K: q5_K_pack(L, ((sqz_block_q5_K *)block)->qh, ((sqz_block_q5_K *)block)->qs); break;
    case SQZ_DTYPE_Q6_K: q6_K_pack(L, block); break;
    default: break;
    }
}

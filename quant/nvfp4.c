/*
 * quant/nvfp4.c - RTN onto NVFP4 (SQZ_QFMT_NVFP4, sqz/qparams.h's SQZ_QSCHEME_NVFP4) as
 * compressed-tensors and llm-compressor compute it for a float32 weight, so that the bytes are
 * theirs (tests/py/test_hf_float.py compares them with the package's own compressor):
 *
 *   global scale  gs = (1 / amax) * 2688 (448 * 6: the largest E4M3 scale times the largest E2M1
 *                 value; torch's scalar-over-tensor division is a reciprocal and a product), amax
 *                 over every matrix that shares the input (q/k/v, gate/up: llm-compressor's fused
 *                 global scale, which vLLM's fused layers need), at least FLT_MIN; not finite: 1
 *   group scale   s = fp8(clamp(gs * (amax16 / 6), +-448)) per 16 columns, 0.125 where it is 0
 *   codes         e2m1(clamp(w / (s / gs), +-6)), round half to even
 *
 * With an importance matrix (imatrix, sqz's own: compressed-tensors has none) each group's E4M3 scale is
 * searched among the reference's and its 2 neighbours on either side by the error weighted as llama.cpp
 * weights its IQ4_NL search, qw * sqrt(sigma2 + x^2); the reference's scale wins ties.
 */
#include <float.h>
#include <math.h>
#include <string.h>

#include "quant/quant_internal.h"

float sqz__nvfp4_global_scale(float amax) {
    if (!(amax >= FLT_MIN)) amax = FLT_MIN;
    const float r = 1.0f / amax, gs = r * 2688.0f;
    return isfinite(gs) ? gs : 1.0f;
}

float sqz__nvfp4_amax(const float *w, int64_t n) {
    float a = 0.0f;
    for (int64_t i = 0; i < n; i++) a = fabsf(w[i]) > a ? fabsf(w[i]) : a;
    return a;
}

float sqz__nvfp4_group_scale(const float *x, float gs) {
    float amax = 0.0f;
    for (int j = 0; j < 16; j++) amax = fabsf(x[j]) > amax ? fabsf(x[j]) : amax;
    const float s = sqz_fp8_e4m3_to_fp32(sqz_fp32_to_fp8_e4m3(fminf(fmaxf(gs * (amax / 6.0f), -448.0f), 448.0f)));
    return s == 0.0f ? 0.125f : s;
}

/* Weighted squared error of group x at scale s under gs (w NULL: the codes only), codes into L. */
static float group_err(const float *x, const float *w, float s, float gs, uint8_t *L) {
    const float eff = s / gs;
    float e = 0.0f;
    for (int j = 0; j < 16; j++) {
        L[j] = sqz__e2m1_rne(x[j] / eff);
        const float r = x[j] - sqz_bf16_to_fp32(sqz_fp32_to_bf16(sqz__e2m1_value(L[j]) * eff));
        if (w) e += w[j] * r * r;
    }
    return e;
}

/* The searched scale of group x (importance qw, 16 values) under gs; its codes into L. */
static float search_group(const float *x, const float *qw, float gs, uint8_t *L) {
    float sumx2 = 0.0f, w[16];
    for (int j = 0; j < 16; j++) sumx2 += x[j] * x[j];
    const float sigma2 = sumx2 * (2.f / 16);
    for (int j = 0; j < 16; j++) w[j] = qw[j] * sqrtf(sigma2 + x[j] * x[j]);
    const float s0 = sqz__nvfp4_group_scale(x, gs);
    float best_s = s0, best = group_err(x, w, s0, gs, L);
    uint8_t T[16];
    const int b0 = sqz_fp32_to_fp8_e4m3(s0);
    for (int b = b0 - 2; b <= b0 + 2; b++) {
        if (b == b0 || b < 1 || b > 0x7E) continue;
        const float s = sqz_fp8_e4m3_to_fp32((uint8_t)b), e = group_err(x, w, s, gs, T);
        if (e < best) {
            best = e;
            best_s = s;
            memcpy(L, T, 16);
        }
    }
    return best_s;
}

void sqz__nvfp4_rows_search(const float *w, int64_t n_out, int64_t n_in, float gs, const float *qw, sqz_qmatrix *q) {
    const int64_t ng = n_in / 16;
    uint8_t *p = q->data, L[16];
    for (int64_t r = 0; r < n_out; r++)
        for (int64_t g = 0; g < ng; g++) {
            q->scales_buf[r * ng + g] = search_group(w + r * n_in + 16 * g, qw + 16 * g, gs, L);
            for (int j = 0; j < 16; j += 2) p[r * (n_in / 2) + 8 * g + j / 2] = (uint8_t)(L[j] | L[j + 1] << 4);
        }
    q->qp.global_scale = gs;
}

void sqz__nvfp4_grid(const float *x, float gs, sqz__grid *g) {
    memset(g, 0, sizeof *g);
    g->anchor[0] = g->anchor[1] = -1;
    g->m = sqz__nvfp4_group_scale(x, gs);
    g->d = g->m / gs;
}

void sqz__nvfp4_rows(const float *w, int64_t n_out, int64_t n_in, float gs, sqz_qmatrix *q) {
    const int64_t ng = n_in / 16;
    uint8_t *p = q->data;
    for (int64_t r = 0; r < n_out; r++) {
        const float *wr = w + r * n_in;
        uint8_t *pr = p + r * (n_in / 2);
        for (int64_t g = 0; g < ng; g++) {
            const float s = sqz__nvfp4_group_scale(wr + 16 * g, gs), eff = s / gs;
            q->scales_buf[r * ng + g] = s;
            for (int64_t c = 16 * g; c < 16 * g + 16; c += 2)
                pr[c / 2] = (uint8_t)(sqz__e2m1_rne(wr[c] / eff) | sqz__e2m1_rne(wr[c + 1] / eff) << 4);
        }
    }
    q->qp.global_scale = gs;
}

/*
 * quant/gguf/fp4.c - the MXFP4 quantizers (OCP microscaling FP4, llama.cpp's GGML_TYPE_MXFP4).
 *
 *   sqz__quantize_mxfp4_ref   llama.cpp's quantize_row_mxfp4_ref, operation for operation (the
 *                            bytes are identical: tests/py/test_gguf_types.py): the scale is the
 *                            power of two e = floor(log2 amax) - 2 (so that amax / 2^e lies in
 *                            [4, 8), and 6 is the largest E2M1 value), each value the nearest
 *                            E2M1 value at that scale. It is also quantize_mxfp4, which ignores
 *                            an importance matrix: what llama-quantize writes.
 *   sqz__quantize_mxfp4       with an importance matrix: sqz's own scale search (llama.cpp has
 *                            none), the exponent among e - 1 (clipping the largest values), e and
 *                            e + 1 whose block has the least error weighted as llama.cpp weights
 *                            IQ4_NL's search, qw * sqrt(sigma2 + x^2); the reference's block
 *                            wins ties, so it is kept unless another is strictly better.
 *
 * A value is kvalues_fp4[code] * 2^(e - 128) (core/dequant_fp4.c: E2M1 doubled, the scale halved).
 */
#include <math.h>
#include <string.h>

#include "core/blocks.h"
#include "core/dequant.h"
#include "quant/gguf/quant_gguf.h"

#define QK SQZ_QK_MXFP4

/* ggml's best_index_mxfp4: the first of the 16 codes with the least |kvalues[i] d - x|. The codes
 * of the other sign are never nearer (|x| < 16 d in a block), and on a tie the earlier code wins,
 * so only the 8 codes of x's sign (code 0 for 0 either way) need looking at, in ggml's order. */
int sqz__fp4_best_index(float x, float d) {
    const int first = x < 0 ? 8 : 0;
    int best = 0;
    float best_err = fabsf((float)sqz__kvalues_fp4[0] * d - x);
    for (int i = first == 0 ? 1 : 9; i < first + 8; i++) {
        const float err = fabsf((float)sqz__kvalues_fp4[i] * d - x);
        if (err < best_err) {
            best = i;
            best_err = err;
        }
    }
    return best;
}

/* The reference's exponent of a block of largest magnitude amax (0 for an all-zero block). */
static int ref_exponent(float amax) {
    if (!(amax > 0.0f)) return 0;
    const float e = floorf(log2f(amax)) - 2 + 127;
    return e < 0 ? 0 : e > 254 ? 254 : (int)e; /* ggml casts without a clamp: the same in range */
}

static void pack(const uint8_t *L, uint8_t *qs) {
    for (int j = 0; j < QK / 2; ++j) qs[j] = (uint8_t)(L[j] | (L[j + QK / 2] << 4));
}

/* Codes of block x at exponent e into L; returns the error weighted by w (NULL: not computed). */
static float block_codes(const float *x, int e, const float *w, uint8_t *L) {
    const float d = sqz__e8m0_half((uint8_t)e);
    float err = 0;
    for (int j = 0; j < QK; ++j) {
        L[j] = (uint8_t)sqz__fp4_best_index(x[j], d);
        if (w) {
            const float r = x[j] - (float)sqz__kvalues_fp4[L[j]] * d;
            err += w[j] * r * r;
        }
    }
    return err;
}

void sqz__quantize_mxfp4_ref(const float *x, void *vy, int64_t n) {
    sqz_block_mxfp4 *y = vy;
    uint8_t L[QK];
    for (int64_t i = 0; i < n / QK; i++) {
        const float *xb = x + i * QK;
        float amax = 0.0f;
        for (int j = 0; j < QK; j++)
            if (amax < fabsf(xb[j])) amax = fabsf(xb[j]);
        const int e = ref_exponent(amax);
        y[i].e = (uint8_t)e;
        block_codes(xb, e, NULL, L);
        pack(L, y[i].qs);
    }
}

/* One block with the search (qw: the block's 32 importances). */
static void search_block(const float *xb, const float *qw, sqz_block_mxfp4 *y) {
    float amax = 0.0f, sumx2 = 0.0f, w[QK];
    for (int j = 0; j < QK; j++) {
        if (amax < fabsf(xb[j])) amax = fabsf(xb[j]);
        sumx2 += xb[j] * xb[j];
    }
    const float sigma2 = sumx2 * (2.f / QK);
    for (int j = 0; j < QK; j++) w[j] = qw[j] * sqrtf(sigma2 + xb[j] * xb[j]);
    const int e0 = ref_exponent(amax);
    uint8_t L[QK], best_L[QK];
    float best = block_codes(xb, e0, w, best_L);
    int best_e = e0;
    for (int e = e0 - 1; amax > 0.0f && e <= e0 + 1; e += 2) {
        if (e < 0 || e > 254) continue;
        const float err = block_codes(xb, e, w, L);
        if (err < best) {
            best = err;
            best_e = e;
            memcpy(best_L, L, QK);
        }
    }
    y->e = (uint8_t)best_e;
    pack(best_L, y->qs);
}

void sqz__quantize_mxfp4(const float *src, void *dst, int64_t nrow, int64_t n_per_row, const float *quant_weights) {
    sqz_block_mxfp4 *y = dst;
    const int64_t nb = n_per_row / QK;
    for (int64_t r = 0; r < nrow; ++r) {
        const float *x = src + r * n_per_row;
        if (!quant_weights) {
            sqz__quantize_mxfp4_ref(x, y + r * nb, n_per_row);
            continue;
        }
        for (int64_t i = 0; i < nb; ++i) search_block(x + i * QK, quant_weights + i * QK, y + r * nb + i);
    }
}

float sqz__mxfp4_scale(const void *block) { return sqz__e8m0_half(((const sqz_block_mxfp4 *)block)->e); }

void sqz__mxfp4_repack(const uint8_t *L, void *block) { pack(L, ((sqz_block_mxfp4 *)block)->qs); }

/*
 * quant/grid.c - the grid of one group under each format (how the reference quantizer picks
 * d / m / zero), value <-> code on that grid, and encoding codes + grids into storage.
 *
 * GGUF formats follow quant/gguf/quant_ref.c (llama.cpp's quantize_row_*_ref) for the choice of d
 * and m, then keep the values as the blocks store them (fp16). The anchors (the elements
 * that defined the grid) let GPTQ pin them to the extreme codes so that re-quantizing the
 * dequantized result reproduces the same grid (sqz/quant.h, "the invariant").
 */
#include <float.h>
#include <stdlib.h>
#include <string.h>

#include "core/blocks.h"
#include "quant/gguf/quant_gguf.h"
#include "quant/quant_internal.h"

void sqz__grid_make(sqz_qformat f, const float *x, int n, sqz__grid *g) {
    memset(g, 0, sizeof *g);
    g->anchor[0] = g->anchor[1] = -1;
    switch (f) {
    case SQZ_QFMT_I8: { /* sqz__quantize_rows_i8_ref: absmax / 127 in f32 */
        float amax = 0.0f;
        for (int i = 0; i < n; i++) amax = fabsf(x[i]) > amax ? fabsf(x[i]) : amax;
        g->d = amax / 127.0f;
        g->lo = -127;
        g->hi = 127;
        break;
    }
    case SQZ_QFMT_FP8: { /* compressed-tensors' absmax / 448 in f32; an all-zero row keeps d 0 (codes +0) */
        float amax = 0.0f;
        for (int i = 0; i < n; i++) amax = fabsf(x[i]) > amax ? fabsf(x[i]) : amax;
        g->d = amax / 448.0f;
        break;
    }
    case SQZ_QFMT_I4_SYM:
    case SQZ_QFMT_Q4_0:
    case SQZ_QFMT_Q5_0: { /* the signed element of largest magnitude (first one) maps to -8 (-16) */
        float amax = 0.0f, max = 0.0f;
        int at = -1;
        for (int i = 0; i < n; i++) {
            if (amax < fabsf(x[i])) { amax = fabsf(x[i]); max = x[i]; at = i; }
        }
        const int half = f == SQZ_QFMT_Q5_0 ? 16 : 8;
        g->d = sqz__fp16_round(max / (float)-half);
        g->zero = half;
        g->lo = 0;
        g->hi = 2 * half - 1;
        if (f != SQZ_QFMT_I4_SYM && g->d != 0.0f) { g->anchor[0] = at; g->anchor_code[0] = 0; }
        break;
    }
    case SQZ_QFMT_I4_ASYM: { /* GPTQ's asymmetric quantizer with zero on the grid */
        float lo = 0.0f, hi = 0.0f;
        for (int i = 0; i < n; i++) {
            lo = x[i] < lo ? x[i] : lo;
            hi = x[i] > hi ? x[i] : hi;
        }
        g->d = sqz__fp16_round((hi - lo) / 15.0f);
        g->zero = g->d != 0.0f ? sqz__clampi(sqz__rint_sat(-lo / g->d), 0, 15) : 0;
        g->lo = 0;
        g->hi = 15;
        break;
    }
    case SQZ_QFMT_Q8_0: {
        float amax = 0.0f;
        for (int i = 0; i < n; i++) amax = fmaxf(amax, fabsf(x[i]));
        g->d = sqz__fp16_round(amax / ((1 << 7) - 1));
        g->lo = -127;
        g->hi = 127;
        if (g->d != 0.0f) {
            for (int i = 0; i < n; i++) {
                if (fabsf(x[i]) == amax) { g->anchor[0] = i; g->anchor_code[0] = x[i] < 0 ? -127 : 127; break; }
            }
        }
        break;
    }
    case SQZ_QFMT_Q4_1:
    case SQZ_QFMT_Q5_1: {
        float min = FLT_MAX, max = -FLT_MAX;
        int at_min = -1, at_max = -1;
        for (int i = 0; i < n; i++) {
            if (x[i] < min) { min = x[i]; at_min = i; }
            if (x[i] > max) { max = x[i]; at_max = i; }
        }
        const int top = f == SQZ_QFMT_Q5_1 ? 31 : 15;
        g->d = sqz__fp16_round((max - min) / (float)top);
        g->m = sqz__fp16_round(min);
        g->lo = 0;
        g->hi = top;
        if (g->d != 0.0f) {
            g->anchor[0] = at_min;
            g->anchor_code[0] = 0;
            g->anchor[1] = at_max;
            g->anchor_code[1] = top;
        }
        break;
    }
    default: break;
    }
}

void sqz__encode(sqz_qmatrix *q, const int8_t *codes, const sqz__grid *grids) {
    const sqz_qformat f = q->target.fmt;
    const int64_t n_in = q->n_in, n_out = q->n_out;
    if (f == SQZ_QFMT_I8 || f == SQZ_QFMT_FP8) { /* FP8: the codes are the E4M3 bytes */
        memcpy(q->data, codes, (size_t)(n_out * n_in));
        for (int64_t r = 0; r < n_out; r++) q->scales_buf[r] = grids[r].d;
        return;
    }
    if (f == SQZ_QFMT_NVFP4) { /* E2M1 codes packed as U4, the E4M3 scales (the grids' m) */
        const int64_t ng = q->qp.n_groups;
        uint8_t *p = q->data;
        for (int64_t r = 0; r < n_out; r++) {
            for (int64_t i = 0; i < n_in / 2; i++)
                p[r * (n_in / 2) + i] = (uint8_t)((codes[r * n_in + 2 * i] & 0x0F) | ((codes[r * n_in + 2 * i + 1] & 0x0F) << 4));
            for (int64_t gi = 0; gi < ng; gi++) q->scales_buf[r * ng + gi] = grids[r * ng + gi].m;
        }
        return;
    }
    if (f == SQZ_QFMT_I4_SYM || f == SQZ_QFMT_I4_ASYM) {
        const int64_t ng = q->qp.n_groups;
        uint8_t *p = q->data;
        for (int64_t r = 0; r < n_out; r++) {
            const int8_t *cr = codes + r * n_in;
            uint8_t *pr = p + r * (n_in / 2);
            for (int64_t i = 0; i < n_in / 2; i++)
                pr[i] = (uint8_t)((cr[2 * i] & 0x0F) | ((cr[2 * i + 1] & 0x0F) << 4));
            for (int64_t gi = 0; gi < ng; gi++) {
                q->scales_buf[r * ng + gi] = grids[r * ng + gi].d;
                if (q->zeros_buf) q->zeros_buf[r * ng + gi] = (uint8_t)grids[r * ng + gi].zero;
            }
        }
        return;
    }
    const int64_t nb = n_in / 32;
    for (int64_t r = 0; r < n_out; r++) {
        for (int64_t b = 0; b < nb; b++) {
            const int8_t *c = codes + r * n_in + b * 32;
            const sqz__grid *g = &grids[r * nb + b];
            if (f == SQZ_QFMT_Q8_0) {
                sqz_block_q8_0 *blk = (sqz_block_q8_0 *)q->data + r * nb + b;
                blk->d = sqz_fp32_to_fp16(g->d);
                memcpy(blk->qs, c, 32);
            } else if (f == SQZ_QFMT_Q4_0) {
                sqz_block_q4_0 *blk = (sqz_block_q4_0 *)q->data + r * nb + b;
                blk->d = sqz_fp32_to_fp16(g->d);
                for (int j = 0; j < 16; j++) blk->qs[j] = (uint8_t)((c[j] & 0x0F) | ((c[j + 16] & 0x0F) << 4));
            } else if (f == SQZ_QFMT_Q4_1) {
                sqz_block_q4_1 *blk = (sqz_block_q4_1 *)q->data + r * nb + b;
                blk->d = sqz_fp32_to_fp16(g->d);
                blk->m = sqz_fp32_to_fp16(g->m);
                for (int j = 0; j < 16; j++) blk->qs[j] = (uint8_t)((c[j] & 0x0F) | ((c[j + 16] & 0x0F) << 4));
            } else if (f == SQZ_QFMT_Q5_0) {
                sqz_block_q5_0 *blk = (sqz_block_q5_0 *)q->data + r * nb + b;
                blk->d = sqz_fp32_to_fp16(g->d);
                sqz__pack_q5((const uint8_t *)c, blk->qs, blk->qh);
            } else {
                sqz_block_q5_1 *blk = (sqz_block_q5_1 *)q->data + r * nb + b;
                blk->d = sqz_fp32_to_fp16(g->d);
                blk->m = sqz_fp32_to_fp16(g->m);
                sqz__pack_q5((const uint8_t *)c, blk->qs, blk->qh);
            }
        }
    }
}

sqz_status sqz__fake_quant(const float *w, int64_t n_out, int64_t n_in, const sqz_qtarget *t, float *out) {
    sqz_qmatrix q;
    SQZ_TRY(sqz_quant_rtn_one(w, n_out, n_in, t, &q));
    sqz_status st = sqz_qmatrix_to_f32(&q, out);
    sqz_qmatrix_free(&q);
    return st;
}

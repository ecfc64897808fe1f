/*
 * formats/st_blocks.c - GGUF block-quantized linear weights in an HF directory: written in the
 * layout exactly, or refused with the reason; never requantized (docs/formats.md, "GGUF block
 * types in an HF directory").
 *
 * A linear layer inside the blocks (sqz__st_is_linear, layer >= 0) stored in a GGUF block type,
 * written without a float dtype:
 *   Q4_0  w = d * (q - 8), q 0..15, d fp16, blocks of 32 along the input: exactly sqz's U4_GROUP
 *         symmetric with group 32 (codes q, scales d): a temporary U4 tensor written by the
 *         layout's own parts (compressed-tensors pack-quantized, GPTQ, sqz). GGUF keeps element
 *         j of a block in the low nibble of byte j and element j + 16 in its high nibble; sqz's
 *         U4 keeps element 2i in the low nibble of byte i (sqz/qparams.h): the codes are repacked.
 *   Q8_0  w = d * q, q int8, d fp16, blocks of 32: 8-bit codes in groups of 32 with one scale
 *   Q5_0  w = d * (q - 16), q 0..31: the same, q - 16 in [-16, 15] held in 8 bits (exact, wider)
 *         written by the layout's i8g_parts (compressed-tensors: pack-quantized 8 bits, group 32;
 *         GPTQ: 8 bits, group_size 32, fp16 scales = d); a layout without that slot (sqz's) refuses them.
 * Every other block type is refused before anything is written, naming the tensor, why it has
 * no exact integer form and the ways out. The token embedding and the classifier (lm_head) stay
 * float as before: dequantized exactly to F32.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/blocks.h"
#include "formats/formats_internal.h"
#include "sqz/qparams.h"

#define BL_FAIL(...) sqz__error(SQZ_ERR_UNSUPPORTED, __FILE__, __LINE__, __VA_ARGS__)

bool sqz__st_block_linear(const sqz_tensor *t) {
    return !t->qp && t->layer >= 0 && sqz__st_is_linear(t) && sqz_dtype_info(t->dtype)->is_quantized;
}

static bool is_i8g(sqz_dtype d) { return d == SQZ_DTYPE_Q8_0 || d == SQZ_DTYPE_Q5_0; }

/* Why a block type has no exact form among sqz's integer layouts (checked against core's
 * dequantizers, core/dequant*.c), or NULL when it has one. */
static const char *no_exact_form(sqz_dtype d) {
    switch (d) {
    case SQZ_DTYPE_Q4_0: case SQZ_DTYPE_Q8_0: case SQZ_DTYPE_Q5_0: return NULL;
    case SQZ_DTYPE_Q4_1: case SQZ_DTYPE_Q5_1:
        return "w = d * q + m keeps a float minimum m per block of 32, not an integer zero point";
    case SQZ_DTYPE_Q2_K:
        return "w = d * sc * q - dmin * m keeps a float minimum per 16-wide sub-block (4-bit sub-scales and minima "
               "on fp16 super-block scales)";
    case SQZ_DTYPE_Q4_K: case SQZ_DTYPE_Q5_K:
        return "w = d * sc * q - dmin * m keeps a float minimum per 32-wide sub-block (6-bit sub-scales and minima "
               "on fp16 super-block scales)";
    case SQZ_DTYPE_Q3_K: case SQZ_DTYPE_Q6_K:
        return "its scales are per 16-wide sub-block (a signed 6- or 8-bit sub-scale times an fp16 super-block "
               "scale): groups of 16 with f32 scales, which sqz neither writes nor reads back";
    case SQZ_DTYPE_Q8_K:
        return "one f32 scale per 256 values: a group of 256 with an f32 scale has no GGUF type to read it back";
    case SQZ_DTYPE_IQ4_NL: case SQZ_DTYPE_IQ4_XS:
        return "its 4-bit codes index a non-uniform table of 16 values, not an integer grid";
    case SQZ_DTYPE_IQ3_S:
        return "its groups of 4 weights index a 512-point lattice codebook, not an integer grid";
    case SQZ_DTYPE_MXFP4:
        return "its 4-bit codes are E2M1 floats (0, 0.5, 1, 1.5, 2, 3, 4, 6 and their negatives) under a "
               "power-of-two scale, not an integer grid";
    default: return "it has no exact integer form sqz writes";
    }
}

sqz_status sqz__st_block_check(const sqz__st_layout *L, const sqz_tensor *t) {
    SQZ_RETURN_IF(!L, SQZ_ERR_INVALID_ARG, "tensor '%s': no HF layout to write it in", t->name);
    const char *why = no_exact_form(t->dtype);
    if (!why && is_i8g(t->dtype) && !L->i8g_parts)
        return BL_FAIL("tensor '%s': GGUF %s is exactly 8-bit codes in groups of 32, which sqz writes in "
                       "compressed-tensors and GPTQ only, not %s: use --hf-format compressed-tensors, --dtype "
                       "f16|bf16|f32 to dequantize, or sqz compress ... --quant int4|int8|w8a8 from the float model", t->name,
                       sqz_dtype_name(t->dtype), sqz_hf_format_name(L->id));
    if (!why) return SQZ_OK;
    return BL_FAIL("tensor '%s': GGUF %s is not written to an HF directory quantized: %s, so no integer layout holds "
                   "it exactly and sqz does not requantize; use --dtype f16|bf16|f32 to dequantize, or sqz compress "
                   "... --quant int4|int8|w8a8 from the float model", t->name, sqz_dtype_name(t->dtype), why);
}

/* Q4_0 weight t as a U4_GROUP tensor (tmp, qtmp) whose codes and scales live in bufs. */
static sqz_status q4_0_as_u4(const sqz_tensor *t, sqz_tensor *tmp, sqz_qparams *qtmp, void *bufs[2]) {
    const int64_t no = t->shape[0], ni = t->shape[1], nb = no * ni / SQZ_QK4_0;
    uint8_t *codes = bufs[0] = sqz__malloc((size_t)(no * ni / 2));
    float *scales = bufs[1] = sqz__malloc((size_t)nb * sizeof(float));
    if (!codes || !scales) return SQZ_ERR_NOMEM;
    const sqz_block_q4_0 *b = t->data;
    for (int64_t i = 0; i < nb; i++) {
        scales[i] = sqz_fp16_to_fp32(b[i].d);
        uint8_t c[SQZ_QK4_0];
        for (int j = 0; j < SQZ_QK4_0 / 2; j++) {
            c[j] = b[i].qs[j] & 15;
            c[j + SQZ_QK4_0 / 2] = b[i].qs[j] >> 4;
        }
        sqz_u4_pack(c, SQZ_QK4_0, codes + i * (SQZ_QK4_0 / 2));
    }
    *qtmp = (sqz_qparams){.scheme = SQZ_QSCHEME_U4_GROUP, .n_out = no, .n_in = ni, .group_size = SQZ_QK4_0,
                          .n_groups = ni / SQZ_QK4_0, .scales = scales};
    *tmp = *t;
    tmp->dtype = SQZ_DTYPE_U4;
    tmp->data = codes;
    tmp->nbytes = (size_t)(no * ni / 2);
    tmp->owned = false;
    tmp->qp = qtmp;
    return sqz_qparams_check(qtmp, tmp->dtype, tmp->nbytes, t->name);
}

/* Q8_0 / Q5_0 weight t as 8-bit codes in groups of 32 (w's arrays live in bufs). */
static sqz_status as_i8g(const sqz_tensor *t, sqz__st_i8g *w, void *bufs[2]) {
    const int64_t no = t->shape[0], ni = t->shape[1], nb = no * ni / 32;
    int8_t *q = bufs[0] = sqz__malloc((size_t)(no * ni));
    float *s = bufs[1] = sqz__malloc((size_t)nb * sizeof(float));
    if (!q || !s) return SQZ_ERR_NOMEM;
    for (int64_t i = 0; i < nb; i++) {
        int8_t *qi = q + 32 * i;
        if (t->dtype == SQZ_DTYPE_Q8_0) {
            const sqz_block_q8_0 *b = (const sqz_block_q8_0 *)t->data + i;
            s[i] = sqz_fp16_to_fp32(b->d);
            memcpy(qi, b->qs, 32);
        } else { /* Q5_0: the 5th bit of element j is bit j of qh (little-endian) */
            const sqz_block_q5_0 *b = (const sqz_block_q5_0 *)t->data + i;
            const uint32_t qh = sqz__rd_u32(b->qh);
            s[i] = sqz_fp16_to_fp32(b->d);
            for (int j = 0; j < 16; j++) {
                qi[j] = (int8_t)(((b->qs[j] & 15) | ((qh >> j & 1) << 4)) - 16);
                qi[j + 16] = (int8_t)(((b->qs[j] >> 4) | ((qh >> (j + 16) & 1) << 4)) - 16);
            }
        }
        if (!isfinite(s[i]))
            return BL_FAIL("tensor '%s': block %lld has a scale that is not finite", t->name, (long long)i);
    }
    *w = (sqz__st_i8g){.n_out = no, .n_in = ni, .group = 32, .q = q, .scales = s};
    return SQZ_OK;
}

sqz_status sqz__st_block_parts(const sqz__st_layout *L, const sqz_tensor *t, sqz__st_part *p, int *n) {
    *n = 0;
    SQZ_TRY(sqz__st_block_check(L, t));
    void *bufs[2] = {NULL, NULL};
    sqz_status st;
    if (t->dtype == SQZ_DTYPE_Q4_0) {
        sqz_tensor tmp;
        sqz_qparams qtmp;
        st = q4_0_as_u4(t, &tmp, &qtmp, bufs);
        if (st == SQZ_OK) st = L->parts(L, &tmp, p, n);
        for (int k = 0; st == SQZ_OK && k < *n; k++) { /* parts borrowed from the temporary codes */
            if (p[k].owned || !p[k].nbytes) continue;
            void *c = sqz__malloc(p[k].nbytes);
            if (!c) { st = SQZ_ERR_NOMEM; break; }
            memcpy(c, p[k].data, p[k].nbytes);
            p[k].data = c;
            p[k].owned = true;
        }
        if (st != SQZ_OK) sqz__st_parts_free(p, *n);
    } else {
        sqz__st_i8g w;
        st = as_i8g(t, &w, bufs);
        if (st == SQZ_OK) st = L->i8g_parts(L, t, &w, p, n);
    }
    free(bufs[0]);
    free(bufs[1]);
    return st;
}

sqz_status sqz__st_block_config_model(const sqz_model *m, sqz_model *shadow, sqz_tensor **tensors,
                                      sqz_qparams **qps) {
    *shadow = *m;
    *tensors = sqz__malloc((size_t)(m->n_tensors ? m->n_tensors : 1) * sizeof **tensors);
    *qps = sqz__calloc((size_t)(m->n_tensors ? m->n_tensors : 1), sizeof **qps);
    if (!*tensors || !*qps) return SQZ_ERR_NOMEM;
    memcpy(*tensors, m->tensors, (size_t)m->n_tensors * sizeof **tensors);
    for (int64_t i = 0; i < m->n_tensors; i++) {
        sqz_tensor *t = &(*tensors)[i];
        if (!sqz__st_block_linear(t) || no_exact_form(t->dtype)) continue;
        sqz_qparams *qp = &(*qps)[i];
        const bool u4 = t->dtype == SQZ_DTYPE_Q4_0;
        *qp = (sqz_qparams){.scheme = u4 ? SQZ_QSCHEME_U4_GROUP : SQZ_QSCHEME_I8_ROW, .n_out = t->shape[0],
                            .n_in = t->shape[1], .group_size = 32, .n_groups = t->shape[1] / 32};
        t->qp = qp;
    }
    shadow->tensors = *tensors;
    return SQZ_OK;
}

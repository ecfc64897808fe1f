/* formats/onnx_plan.c - which ONNX initializers every tensor becomes, and their bytes.
 *
 * A linear weight W (out = N, in = K) is computed one of three ways (docs/onnx.md):
 *   float (f32/f16/bf16): W^T (K, N) in f32 or f16 for MatMul;
 *   MatMulNBits (com.microsoft): B (N, K/block, block*bits/8) codes packed along K, low nibble first,
 *     scales (N * K/block) f32, zero points (u8, packed for 4 bits) or none (the default 2^(bits-1));
 *     w = (code - zp) * scale;
 *   QDQ (opset 21 DequantizeLinear, block_size along K): W^T (K, N) int4/uint4/int8/uint8, scales and
 *     zero points (K/block, N);
 *   FP8 (sqz's f8_row scheme, whatever --onnx-ops says): W^T (K, N) FLOAT8E4M3FN as stored, the row scales
 *     (N) f32, DequantizeLinear along axis 1: w = fp8 * s exactly as the runtime dequantizes it.
 * Every quantized form goes through one intermediate: codes (N, K) 0..255, scales (N, kb) and zero
 * points (N, kb), which each source type fills so that (code - zp) * scale is its dequantized value:
 *   Q4_0 d*(q-8): codes q, zp 8 · Q5_0 d*(q-16): zp 16, 8 bits · Q8_0 d*q: code q+128, zp 128 ·
 *   sqz U4 s*(q-z): as it is · sqz I8 per row s*q: q+128, zp 128, the row's scale in every block ·
 *   Q4_1 / Q5_1 d*q+m: zp -m/d as f32 (MatMulNBits only: within one f32 rounding, not bit-exact).
 * Rows of q/k (and their biases) are written in rotate-half order (the graph's rotary form), moved
 * whole, so the values are the same. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "formats/onnx_internal.h"
#include "sqz/qparams.h"

static bool pow2(int64_t v) { return v > 0 && (v & (v - 1)) == 0; }

static void set_part(sqz__onnx_part *p, const char *stem, const char *suffix, int type, int ndim, int64_t d0,
                     int64_t d1, int64_t d2, uint64_t nbytes) {
    if ((size_t)snprintf(p->name, sizeof p->name, "%s%s", stem, suffix) >= sizeof p->name) p->name[0] = '\0';
    p->onnx_type = type;
    p->ndim = ndim;
    p->dims[0] = d0;
    p->dims[1] = d1;
    p->dims[2] = d2;
    p->nbytes = nbytes;
}

/* The quantized form of a linear weight in dtype d (or its sqz scheme): bits, block, zero points. */
static sqz_status quant_form(const sqz_tensor *t, sqz_dtype d, sqz__onnx_ops ops, sqz__onnx_entry *e,
                             bool *has_zp) {
    const sqz_qparams *qp = d == t->dtype ? t->qp : NULL; /* --dtype converts a scheme's values */
    *has_zp = false;
    if (qp) {
        SQZ_RETURN_IF(qp->g_idx, SQZ_ERR_UNSUPPORTED, "tensor '%s': act-order groups (g_idx) have no ONNX form here; "
                      "quantize without act-order, or export with --dtype f16", t->name);
        SQZ_RETURN_IF(qp->scheme == SQZ_QSCHEME_NVFP4, SQZ_ERR_UNSUPPORTED, "tensor '%s': NVFP4 has no ONNX form "
                      "onnxruntime runs (its CPU provider implements no FLOAT4E2M1); export with --dtype f16", t->name);
        SQZ_RETURN_IF(qp->in_scale || qp->act_mode != SQZ_ACT_FLOAT, SQZ_ERR_UNSUPPORTED, "tensor '%s': W8A8 "
                      "activations or an unfolded smoothing vector are not computed by the ONNX graph; quantize "
                      "weight-only, or export with --dtype f16", t->name);
        if (qp->scheme == SQZ_QSCHEME_U4_GROUP) {
            SQZ_RETURN_IF(!pow2(qp->group_size) || qp->group_size < 16, SQZ_ERR_UNSUPPORTED, "tensor '%s': group "
                          "size %d is not a power of 2 >= 16 (MatMulNBits' block_size)", t->name, qp->group_size);
            e->bits = 4;
            e->block = qp->group_size;
            *has_zp = qp->zeros != NULL;
        } else {
            e->bits = 8;
            e->block = 32;
        }
        return SQZ_OK;
    }
    e->block = 32;
    switch (d) {
    case SQZ_DTYPE_Q4_0: e->bits = 4; return SQZ_OK;
    case SQZ_DTYPE_Q8_0: e->bits = 8; return SQZ_OK;
    case SQZ_DTYPE_Q5_0: e->bits = 8; *has_zp = true; return SQZ_OK;
    case SQZ_DTYPE_Q4_1:
    case SQZ_DTYPE_Q5_1:
        SQZ_RETURN_IF(ops == SQZ__ONNX_OPS_QDQ, SQZ_ERR_UNSUPPORTED, "tensor '%s': %s's minimum has no integer zero "
                      "point for DequantizeLinear; use --onnx-ops matmulnbits, or --dtype q4_0 / q8_0 / f16",
                      t->name, sqz_dtype_name(d));
        e->bits = d == SQZ_DTYPE_Q4_1 ? 4 : 8;
        e->zp_float = true;
        *has_zp = true;
        return SQZ_OK;
    default:
        return SQZ_ERROR(SQZ_ERR_UNSUPPORTED, "tensor '%s': %s has no exact MatMulNBits / DequantizeLinear form; "
                         "export with --dtype f16 (or f32, q8_0, q4_0), or compress to q4_0, q8_0 or int4 first",
                         t->name, sqz_dtype_name(d));
    }
}

/* FP8 E4M3 rows with a scale each: W8A16-FP8, or W8A8-FP8 with FP8 activations, dynamic per token or
 * static. */
static sqz_status plan_fp8(const sqz_tensor *t, const char *stem, sqz__onnx_entry *e) {
    const sqz_qparams *qp = t->qp;
    const int64_t N = t->shape[0], K = t->shape[1];
    const bool act8 = qp->act_mode != SQZ_ACT_FLOAT && qp->act_grid == SQZ_ACT_GRID_FP8;
    SQZ_RETURN_IF(qp->in_scale || (qp->act_mode != SQZ_ACT_FLOAT && !act8), SQZ_ERR_UNSUPPORTED, "tensor '%s': "
                  "only weight-only FP8 and FP8 activations have an ONNX form here; export with --dtype f16", t->name);
    e->lin = SQZ__LIN_FP8;
    e->act_fp8 = act8;
    e->act_scale = qp->act_mode == SQZ_ACT_STATIC_TENSOR ? qp->act_scale : 0.0f;
    e->n_parts = 2;
    set_part(&e->part[0], stem, "_Q", SQZ__ONNX_FLOAT8E4M3FN, 2, K, N, 0, (uint64_t)(K * N));
    set_part(&e->part[1], stem, "_scales", SQZ__ONNX_FLOAT, 1, N, 0, 0, (uint64_t)N * 4u);
    return SQZ_OK;
}

/* The parts of a linear weight (out N, in K) stored as `d`. */
static sqz_status plan_linear(const sqz_tensor *t, sqz_dtype d, sqz__onnx_ops ops, const char *stem,
                              sqz__onnx_entry *e) {
    const int64_t N = t->shape[0], K = t->shape[1];
    e->is_linear = true;
    e->dtype = d;
    if (d == SQZ_DTYPE_F8_E4M3 && t->qp && t->qp->scheme == SQZ_QSCHEME_F8_ROW) return plan_fp8(t, stem, e);
    if (sqz_dtype_info(d)->is_float) {
        e->lin = SQZ__LIN_FLOAT;
        e->n_parts = 1;
        bool f16 = d == SQZ_DTYPE_F16;
        set_part(&e->part[0], stem, "", f16 ? SQZ__ONNX_FLOAT16 : SQZ__ONNX_FLOAT, 2, K, N, 0,
                 (uint64_t)(K * N) * (f16 ? 2u : 4u));
        return SQZ_OK;
    }
    bool zp;
    SQZ_TRY(quant_form(t, d, ops, e, &zp));
    const int64_t kb = (K + e->block - 1) / e->block;
    if (ops == SQZ__ONNX_OPS_MATMULNBITS) {
        e->lin = SQZ__LIN_NBITS;
        const int64_t blob = e->block * e->bits / 8;
        set_part(&e->part[0], stem, "_Q", SQZ__ONNX_UINT8, 3, N, kb, blob, (uint64_t)(N * kb * blob));
        set_part(&e->part[1], stem, "_scales", SQZ__ONNX_FLOAT, 1, N * kb, 0, 0, (uint64_t)(N * kb) * 4u);
        e->n_parts = 2;
        if (zp && e->zp_float)
            set_part(&e->part[2], stem, "_zp", SQZ__ONNX_FLOAT, 1, N * kb, 0, 0, (uint64_t)(N * kb) * 4u);
        else if (zp) {
            int64_t per_row = (kb * e->bits + 7) / 8;
            set_part(&e->part[2], stem, "_zp", SQZ__ONNX_UINT8, 1, N * per_row, 0, 0, (uint64_t)(N * per_row));
        }
        e->n_parts += zp;
        return SQZ_OK;
    }
    e->lin = SQZ__LIN_QDQ;
    SQZ_RETURN_IF(K % e->block != 0, SQZ_ERR_UNSUPPORTED, "tensor '%s': %lld columns are not whole blocks of %d",
                  t->name, (long long)K, e->block);
    /* signed types without a zero point where the zero point is the midpoint, else unsigned + zp */
    int xt = e->bits == 4 ? (zp ? SQZ__ONNX_UINT4 : SQZ__ONNX_INT4) : (zp ? SQZ__ONNX_UINT8 : SQZ__ONNX_INT8);
    uint64_t xbytes = e->bits == 4 ? (uint64_t)(K * N + 1) / 2 : (uint64_t)(K * N);
    uint64_t zbytes = e->bits == 4 ? (uint64_t)(kb * N + 1) / 2 : (uint64_t)(kb * N);
    set_part(&e->part[0], stem, "_Q", xt, 2, K, N, 0, xbytes);
    set_part(&e->part[1], stem, "_scales", SQZ__ONNX_FLOAT, 2, kb, N, 0, (uint64_t)(kb * N) * 4u);
    if (zp) set_part(&e->part[2], stem, "_zp", xt, 2, kb, N, 0, zbytes);
    e->n_parts = 2 + zp;
    return SQZ_OK;
}

static sqz_status plan_tensor(const sqz_model *m, const sqz_tensor *t, const sqz_save_opts *o, sqz__onnx_ops ops,
                              sqz__onnx_entry *e) {
    char stem[SQZ__ONNX_NAME];
    if (!sqz__hf_name_make(m->hp.family, t->role, t->layer, t->param, stem, sizeof stem))
        snprintf(stem, sizeof stem, "%s", t->name);
    e->t = t;
    SQZ_RETURN_IF(!t->data, SQZ_ERR_INVALID_ARG, "tensor '%s' has no data", t->name);
    bool linear = t->param == SQZ_PARAM_WEIGHT && t->ndim == 2 && t->role != SQZ_ROLE_TOKEN_EMBD;
    if (linear) {
        sqz_dtype d = t->qp && o->dtype < 0 ? t->dtype : sqz__export_dtype(t, o, SQZ_FORMAT_GGUF);
        if (d == SQZ_DTYPE_BF16) d = SQZ_DTYPE_F32;
        return plan_linear(t, d, ops, stem, e);
    }
    /* everything else in f32, as the runtime reads it; the embedding (a weight matrix) takes --dtype's
     * values first, as the other writers store it, so the graph computes what that model computes */
    e->dtype = t->role == SQZ_ROLE_TOKEN_EMBD && o->dtype >= 0 ? sqz__export_dtype(t, o, SQZ_FORMAT_GGUF) : t->dtype;
    e->n_parts = 1;
    set_part(&e->part[0], stem, "", SQZ__ONNX_FLOAT, t->ndim, t->shape[0], t->ndim > 1 ? t->shape[1] : 0, 0,
             (uint64_t)sqz_tensor_nelements(t) * 4u);
    return SQZ_OK;
}

void sqz__onnx_plan_free(sqz__onnx_plan *p) {
    free(p->e);
    memset(p, 0, sizeof *p);
}

sqz_status sqz__onnx_plan_make(const sqz_model *m, const sqz_save_opts *o, sqz__onnx_plan *p) {
    memset(p, 0, sizeof *p);
    p->ops = o->onnx_ops == 1 ? SQZ__ONNX_OPS_QDQ : SQZ__ONNX_OPS_MATMULNBITS;
    p->e = sqz__calloc((size_t)m->n_tensors + 1, sizeof *p->e);
    if (!p->e) return SQZ_ERR_NOMEM;
    sqz_status st = SQZ_OK;
    for (int64_t i = 0; i < m->n_tensors && st == SQZ_OK; i++) {
        const sqz_tensor *t = &m->tensors[i];
        if (t->role == SQZ_ROLE_OUTPUT && t->param == SQZ_PARAM_WEIGHT && m->hp.tied_embeddings) continue;
        st = plan_tensor(m, t, o, p->ops, &p->e[p->n]);
        for (int k = 0; st == SQZ_OK && k < p->e[p->n].n_parts; k++)
            if (!p->e[p->n].part[k].name[0])
                st = SQZ_ERROR(SQZ_ERR_UNSUPPORTED, "tensor '%s': name too long for an ONNX initializer", t->name);
        if (st == SQZ_OK) p->n++;
    }
    if (st != SQZ_OK) {
        sqz__onnx_plan_free(p);
        return st;
    }
    /* the rotary tables: cos and sin of every position up to the context (at most 32768), rotate-half order */
    p->rope_len = m->hp.ctx_len > 0 && m->hp.ctx_len < 32768 ? m->hp.ctx_len : 32768;
    sqz__onnx_entry *r = &p->e[p->n++];
    r->n_parts = 2;
    const uint64_t rb = (uint64_t)(p->rope_len * m->hp.head_dim) * 4u;
    set_part(&r->part[0], "rotary.cos", "", SQZ__ONNX_FLOAT, 2, p->rope_len, m->hp.head_dim, 0, rb);
    set_part(&r->part[1], "rotary.sin", "", SQZ__ONNX_FLOAT, 2, p->rope_len, m->hp.head_dim, 0, rb);
    uint64_t off = 0;
    for (int64_t i = 0; i < p->n; i++) {
        for (int k = 0; k < p->e[i].n_parts; k++) {
            p->e[i].part[k].offset = off;
            off += (p->e[i].part[k].nbytes + 63) & ~(uint64_t)63; /* 64-byte aligned parts */
        }
    }
    p->data_bytes = off;
    return SQZ_OK;
}

const sqz__onnx_entry *sqz__onnx_plan_find(const sqz__onnx_plan *p, sqz_role r, int32_t layer, sqz_param k) {
    for (int64_t i = 0; i < p->n; i++) {
        const sqz_tensor *t = p->e[i].t;
        if (t && t->role == r && t->layer == layer && t->param == k) return &p->e[i];
    }
    return NULL;
}

/* ---- bytes ---- */

static void rope_tables(const sqz_model *m, int64_t len, float *cos_t, float *sin_t) {
    const int64_t hd = m->hp.head_dim, half = hd / 2;
    for (int64_t i = 0; i < half; i++) {
        float inv = 1.0f / powf(m->hp.rope_theta, (float)(2 * i) / (float)hd); /* runtime/ops.c's tables */
        for (int64_t pos = 0; pos < len; pos++) {
            float a = (float)pos * inv;
            cos_t[pos * hd + i] = cos_t[pos * hd + half + i] = cosf(a);
            sin_t[pos * hd + i] = sin_t[pos * hd + half + i] = sinf(a);
        }
    }
}

static bool qk_rows(const sqz_tensor *t) { return t->role == SQZ_ROLE_ATTN_Q || t->role == SQZ_ROLE_ATTN_K; }

/* Rows of `src` (rows of row_bytes) in rotate-half order into dst (or copied when no move is needed). */
static void rows_half(const sqz_model *m, const sqz_tensor *t, const void *src, void *dst, size_t row_bytes) {
    const int64_t heads = t->role == SQZ_ROLE_ATTN_Q ? m->layers[t->layer].n_heads : m->layers[t->layer].n_kv_heads;
    if (qk_rows(t) && m->hp.rope_layout == SQZ_ROPE_INTERLEAVED)
        sqz__rope_permute_rows(src, dst, heads, m->hp.head_dim, row_bytes, SQZ_ROPE_INTERLEAVED, SQZ_ROPE_HALF);
    else memcpy(dst, src, row_bytes * (size_t)t->shape[0]);
}

/* The intermediate of a quantized weight: codes (N, K), scales (N, kb), zero points (N, kb) as u8 and f32. */
typedef struct qint {
    uint8_t *codes, *zp;
    float *scales, *zpf;
} qint;

static void qint_free(qint *q) { free(q->codes); free(q->zp); free(q->scales); free(q->zpf); }

static void unpack_scheme(const sqz_tensor *t, int64_t kb, qint *q, const uint8_t *data) {
    const sqz_qparams *qp = t->qp;
    const int64_t N = t->shape[0], K = t->shape[1];
    for (int64_t r = 0; r < N; r++) {
        for (int64_t c = 0; c < K; c++) {
            if (qp->scheme == SQZ_QSCHEME_U4_GROUP) {
                uint8_t b = data[(r * K + c) / 2];
                q->codes[r * K + c] = (uint8_t)(c % 2 ? b >> 4 : b & 15);
            } else {
                q->codes[r * K + c] = (uint8_t)(((const int8_t *)data)[r * K + c] + 128);
            }
        }
        for (int64_t g = 0; g < kb; g++) {
            bool u4 = qp->scheme == SQZ_QSCHEME_U4_GROUP;
            q->scales[r * kb + g] = u4 ? qp->scales[r * qp->n_groups + g] : qp->scales[r];
            q->zp[r * kb + g] = u4 ? (qp->zeros ? qp->zeros[r * qp->n_groups + g] : 8) : 128;
        }
    }
}

static void unpack_block(sqz_dtype d, const uint8_t *b, uint8_t *codes, float *scale, uint8_t *zp, float *zpf) {
    const float s = sqz_fp16_to_fp32((uint16_t)(b[0] | b[1] << 8));
    *scale = s;
    if (d == SQZ_DTYPE_Q4_0 || d == SQZ_DTYPE_Q4_1 || d == SQZ_DTYPE_Q5_0 || d == SQZ_DTYPE_Q5_1) {
        const bool has_min = d == SQZ_DTYPE_Q4_1 || d == SQZ_DTYPE_Q5_1, five = d == SQZ_DTYPE_Q5_0 || d == SQZ_DTYPE_Q5_1;
        const uint8_t *p = b + (has_min ? 4 : 2);
        uint32_t qh = 0;
        if (five) { qh = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; p += 4; }
        for (int j = 0; j < 16; j++) {
            codes[j] = (uint8_t)((p[j] & 15) | (five ? ((qh >> j) & 1) << 4 : 0));
            codes[j + 16] = (uint8_t)((p[j] >> 4) | (five ? ((qh >> (j + 16)) & 1) << 4 : 0));
        }
        *zp = five ? 16 : 8;
        if (has_min) {
            float mn = sqz_fp16_to_fp32((uint16_t)(b[2] | b[3] << 8));
            *zpf = s != 0.0f ? -mn / s : 0.0f;
        }
        return;
    }
    for (int j = 0; j < 32; j++) codes[j] = (uint8_t)((int8_t)b[2 + j] + 128); /* Q8_0 */
    *zp = 128;
}

static sqz_status unpack_blocks(const sqz_tensor *t, sqz_dtype d, const uint8_t *data, int64_t kb, qint *q) {
    const int64_t N = t->shape[0], K = t->shape[1];
    const size_t bb = sqz_dtype_info(d)->type_size;
    for (int64_t r = 0; r < N; r++) {
        for (int64_t g = 0; g < kb; g++) {
            const uint8_t *b = data + (size_t)(r * kb + g) * bb;
            size_t k = (size_t)(r * kb + g);
            unpack_block(d, b, q->codes + r * K + g * 32, &q->scales[k], &q->zp[k], &q->zpf[k]);
            bool has_min = d == SQZ_DTYPE_Q4_1 || d == SQZ_DTYPE_Q5_1;
            SQZ_RETURN_IF(has_min && q->scales[k] == 0.0f && sqz_fp16_to_fp32((uint16_t)(b[2] | b[3] << 8)) != 0.0f,
                          SQZ_ERR_UNSUPPORTED, "tensor '%s': row %lld block %lld has scale 0 and a minimum: no "
                          "zero point gives it; export with --dtype f16", t->name, (long long)r, (long long)g);
        }
    }
    return SQZ_OK;
}

/* The tensor's values in `d` (rows in rotate-half order) as the intermediate. */
static sqz_status to_qint(const sqz_model *m, const sqz__onnx_entry *e, sqz_dtype d, qint *q) {
    const sqz_tensor *t = e->t;
    const int64_t N = t->shape[0], K = t->shape[1], kb = (K + e->block - 1) / e->block;
    q->codes = sqz__calloc((size_t)(N * kb * e->block), 1);
    q->zp = sqz__malloc((size_t)(N * kb));
    q->scales = sqz__malloc((size_t)(N * kb) * sizeof(float));
    q->zpf = sqz__calloc((size_t)(N * kb), sizeof(float));
    if (!q->codes || !q->zp || !q->scales || !q->zpf) return SQZ_ERR_NOMEM;
    if (t->qp && d == t->dtype) {
        const size_t row_bytes = t->nbytes / (size_t)N;
        uint8_t *raw = sqz__malloc(t->nbytes);
        if (!raw) return SQZ_ERR_NOMEM;
        rows_half(m, t, t->data, raw, row_bytes);
        sqz_qparams qp = *t->qp; /* scales and zero points follow their rows */
        float *sc = sqz__malloc((size_t)(N * qp.n_groups) * sizeof(float));
        uint8_t *zs = qp.zeros ? sqz__malloc((size_t)(N * qp.n_groups)) : NULL;
        sqz_status st = sc && (zs || !qp.zeros) ? SQZ_OK : SQZ_ERR_NOMEM;
        if (st == SQZ_OK) {
            rows_half(m, t, qp.scales, sc, (size_t)qp.n_groups * sizeof(float));
            if (zs) rows_half(m, t, qp.zeros, zs, (size_t)qp.n_groups);
            qp.scales = sc;
            qp.zeros = zs;
            sqz_tensor tt = *t;
            tt.qp = &qp;
            unpack_scheme(&tt, kb, q, raw);
        }
        free(raw);
        free(sc);
        free(zs);
        return st;
    }
    size_t nb;
    SQZ_RETURN_IF(!sqz_dtype_nbytes(d, N * K, &nb), SQZ_ERR_SHAPE, "tensor '%s': shape does not fit %s", t->name,
                  sqz_dtype_name(d));
    uint8_t *raw = sqz__malloc(nb);
    if (!raw) return SQZ_ERR_NOMEM;
    sqz_status st = sqz__tensor_export(m, t, d, SQZ_ROPE_HALF, raw, nb, NULL);
    if (st == SQZ_OK) st = unpack_blocks(t, d, raw, kb, q);
    free(raw);
    return st;
}

static void put_nibble(uint8_t *dst, int64_t i, uint8_t v) {
    if (i % 2) dst[i / 2] = (uint8_t)(dst[i / 2] | (v & 15) << 4);
    else dst[i / 2] = (uint8_t)(v & 15);
}

static void pack_nbits(const sqz__onnx_entry *e, int64_t N, int64_t K, const qint *q, uint8_t *const bufs[]) {
    const int64_t kb = (K + e->block - 1) / e->block, per_row = (kb * e->bits + 7) / 8;
    for (int64_t r = 0; r < N; r++) {
        for (int64_t c = 0; c < kb * e->block; c++) {
            uint8_t v = c < K ? q->codes[r * K + c] : q->zp[r * kb + c / e->block];
            if (e->bits == 8) bufs[0][r * kb * e->block + c] = v;
            else put_nibble(bufs[0], r * kb * e->block + c, v);
        }
    }
    memcpy(bufs[1], q->scales, (size_t)(N * kb) * sizeof(float));
    if (e->n_parts < 3) return;
    if (e->zp_float) { memcpy(bufs[2], q->zpf, (size_t)(N * kb) * sizeof(float)); return; }
    for (int64_t r = 0; r < N; r++) {
        for (int64_t g = 0; g < kb; g++) {
            if (e->bits == 8) bufs[2][r * per_row + g] = q->zp[r * kb + g];
            else put_nibble(bufs[2] + r * per_row, g, q->zp[r * kb + g]);
        }
    }
}

/* QDQ: (K, N) values; signed types hold code - zp (the zp is the midpoint), unsigned the codes with zp. */
static void pack_qdq(const sqz__onnx_entry *e, int64_t N, int64_t K, const qint *q, uint8_t *const bufs[]) {
    const int64_t kb = K / e->block;
    const bool zp = e->n_parts == 3;
    for (int64_t c = 0; c < K; c++) {
        for (int64_t r = 0; r < N; r++) {
            int v = q->codes[r * K + c] - (zp ? 0 : q->zp[r * kb + c / e->block]);
            if (e->bits == 8) bufs[0][c * N + r] = (uint8_t)v;
            else put_nibble(bufs[0], c * N + r, (uint8_t)v);
        }
    }
    float *sc = (float *)(void *)bufs[1];
    for (int64_t g = 0; g < kb; g++) {
        for (int64_t r = 0; r < N; r++) {
            sc[g * N + r] = q->scales[r * kb + g];
            if (!zp) continue;
            if (e->bits == 8) bufs[2][g * N + r] = q->zp[r * kb + g];
            else put_nibble(bufs[2], g * N + r, q->zp[r * kb + g]);
        }
    }
}

/* A float weight: exported (rows in rotate-half order) and transposed to (K, N). */
static sqz_status float_linear(const sqz_model *m, const sqz__onnx_entry *e, uint8_t *dst) {
    const sqz_tensor *t = e->t;
    const int64_t N = t->shape[0], K = t->shape[1];
    const size_t es = e->part[0].onnx_type == SQZ__ONNX_FLOAT16 ? 2 : 4;
    uint8_t *tmp = sqz__malloc((size_t)(N * K) * es);
    if (!tmp) return SQZ_ERR_NOMEM;
    sqz_status st = sqz__tensor_export(m, t, es == 2 ? SQZ_DTYPE_F16 : SQZ_DTYPE_F32, SQZ_ROPE_HALF, tmp,
                                       (size_t)(N * K) * es, NULL);
    for (int64_t r = 0; r < N && st == SQZ_OK; r++)
        for (int64_t c = 0; c < K; c++) memcpy(dst + (size_t)(c * N + r) * es, tmp + (size_t)(r * K + c) * es, es);
    free(tmp);
    return st;
}

/* FP8 rows (rotate-half order for q/k) transposed to (K, N) as stored; their scales (N) follow the rows. */
static sqz_status fp8_linear(const sqz_model *m, const sqz__onnx_entry *e, uint8_t *const bufs[]) {
    const sqz_tensor *t = e->t;
    const int64_t N = t->shape[0], K = t->shape[1];
    uint8_t *tmp = sqz__malloc((size_t)(N * K));
    if (!tmp) return SQZ_ERR_NOMEM;
    rows_half(m, t, t->data, tmp, (size_t)K);
    for (int64_t r = 0; r < N; r++)
        for (int64_t c = 0; c < K; c++) bufs[0][c * N + r] = tmp[r * K + c];
    rows_half(m, t, t->qp->scales, bufs[1], sizeof(float));
    free(tmp);
    return SQZ_OK;
}

/* A tensor stored in f32 with the values of e->dtype (--dtype applied to the embedding). */
static sqz_status via_dtype(const sqz_model *m, const sqz__onnx_entry *e, uint8_t *dst) {
    const int64_t n = sqz_tensor_nelements(e->t);
    size_t nb;
    SQZ_RETURN_IF(!sqz_dtype_nbytes(e->dtype, n, &nb), SQZ_ERR_SHAPE, "tensor '%s': shape does not fit %s",
                  e->t->name, sqz_dtype_name(e->dtype));
    uint8_t *tmp = sqz__malloc(nb);
    if (!tmp) return SQZ_ERR_NOMEM;
    sqz_status st = sqz__tensor_export(m, e->t, e->dtype, SQZ_ROPE_HALF, tmp, nb, NULL);
    if (st == SQZ_OK) st = sqz_convert(e->dtype, tmp, SQZ_DTYPE_F32, dst, n, NULL);
    free(tmp);
    return st;
}

sqz_status sqz__onnx_entry_bytes(const sqz_model *m, const sqz__onnx_plan *p, const sqz__onnx_entry *e,
                                 uint8_t *const bufs[SQZ__ONNX_MAX_PARTS]) {
    if (!e->t) {
        rope_tables(m, p->rope_len, (float *)(void *)bufs[0], (float *)(void *)bufs[1]);
        return SQZ_OK;
    }
    const sqz_tensor *t = e->t;
    if (!e->is_linear && e->dtype != t->dtype && e->dtype != SQZ_DTYPE_F32) return via_dtype(m, e, bufs[0]);
    if (!e->is_linear) return sqz__tensor_export(m, t, SQZ_DTYPE_F32, SQZ_ROPE_HALF, bufs[0], e->part[0].nbytes, NULL);
    if (e->lin == SQZ__LIN_FLOAT) return float_linear(m, e, bufs[0]);
    if (e->lin == SQZ__LIN_FP8) return fp8_linear(m, e, bufs);
    qint q = {0};
    sqz_status st = to_qint(m, e, e->dtype, &q);
    if (st == SQZ_OK && e->lin == SQZ__LIN_NBITS) pack_nbits(e, t->shape[0], t->shape[1], &q, bufs);
    else if (st == SQZ_OK) pack_qdq(e, t->shape[0], t->shape[1], &q, bufs);
    qint_free(&q);
    return st;
}

/* formats/onnx_read_q.c - a quantized linear weight of an sqz ONNX export back to sqz's dtype and qparams
 * (docs/onnx.md, "Reading back"; the forms are onnx_plan.c's):
 *   MatMulNBits B (N, K/block, block*bits/8), scales (N*K/block) f32, zero points u8 (packed for 4 bits)
 *     or f32, or none (2^(bits-1));
 *   DequantizeLinear (axis 0, block_size) W^T (K, N) int4/uint4/int8/uint8, scales and zero points (K/block, N);
 *   DequantizeLinear (axis 1) W^T (K, N) FLOAT8E4M3FN, scales (N): sqz's FP8 per row, W8A8-FP8 when the
 *     MatMul's input is Cast to FLOAT8E4M3FN and back first (the graph's fp8_act), static when its scale
 *     is a one-value initializer (fp8_static).
 * Every integer form is read as codes 0..255 with a scale and a zero point per (row, block), w = (code - zp) *
 * scale, and becomes the sqz type with exactly those values:
 *   4 bits, no zero point:   Q4_0 when the blocks are 32 and every scale is an fp16 value (the same bytes as
 *                            the GGUF's), else sqz int4 symmetric (U4_GROUP, group = block). sqz's
 *                            int4:g32:sym has the same values as Q4_0 and comes back as Q4_0.
 *   4 bits, u8 zero points:  sqz int4 asymmetric (U4_GROUP with zeros).
 *   8 bits, no zero point:   Q8_0 when the blocks are 32 with fp16 scales, else sqz int8 per row (I8_ROW)
 *                            when every block of a row has the row's scale.
 *   8 bits, zero points 16:  Q5_0 (codes < 32, blocks of 32, fp16 scales).
 *   float zero points -m/d:  Q4_1 (4 bits) / Q5_1 (8 bits, codes < 32): m = fp16(-zp * d), accepted only when
 *                            the writer's -m / d gives the stored zero point again, so the block is the source's
 *                            bit for bit.
 * Anything else (a form sqz does not write) is refused naming the tensor. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/blocks.h"
#include "formats/onnx_internal.h"
#include "sqz/qparams.h"

/* One weight's parts as stored. */
typedef struct qsrc {
    const char *name;   /* the weight's HF name (messages) */
    int64_t N, K, kb, block;
    int bits;
    bool qdq;           /* codes (K, N) (DequantizeLinear); else MatMulNBits rows (N, kb * block * bits / 8) */
    bool sgn;           /* QDQ int4 / int8: stored code - 2^(bits-1), no zero point */
    const uint8_t *q, *sc, *zp; /* codes, f32 scales, zero points (u8, packed nibbles for 4 bits, or f32) */
    bool zp_float;
    int64_t zp_row;     /* MatMulNBits u8 zero points: bytes per row */
} qsrc;

static unsigned nib(const uint8_t *p, int64_t i) { return i % 2 ? p[i / 2] >> 4 : p[i / 2] & 15u; }

static unsigned code(const qsrc *s, int64_t r, int64_t c) {
    if (!s->qdq) return s->bits == 8 ? s->q[r * s->kb * s->block + c] : nib(s->q, r * s->kb * s->block + c);
    const int64_t i = c * s->N + r;
    unsigned v = s->bits == 8 ? s->q[i] : nib(s->q, i);
    return s->sgn ? v ^ (s->bits == 8 ? 0x80u : 8u) : v; /* two's complement + 2^(bits-1) */
}

static float scale(const qsrc *s, int64_t r, int64_t g) {
    return sqz__rd_f32(s->sc + 4 * (s->qdq ? g * s->N + r : r * s->kb + g));
}

static unsigned zp_u8(const qsrc *s, int64_t r, int64_t g) {
    if (!s->zp || s->zp_float) return 1u << (s->bits - 1);
    if (s->qdq) return s->bits == 8 ? s->zp[g * s->N + r] : nib(s->zp, g * s->N + r);
    return s->bits == 8 ? s->zp[r * s->zp_row + g] : nib(s->zp + r * s->zp_row, g);
}

static float zp_f32(const qsrc *s, int64_t r, int64_t g) { return sqz__rd_f32(s->zp + 4 * (r * s->kb + g)); }

static bool fp16_exact(float v) { return sqz_fp16_to_fp32(sqz_fp32_to_fp16(v)) == v; }

/* What the values allow; every scale (and float zero point) is finite, else SQZ_ERR_FORMAT. */
typedef struct facts {
    bool fp16, rows_uniform, all_zp16, codes_lt32;
} facts;

static sqz_status survey(const qsrc *s, facts *f) {
    *f = (facts){true, true, true, true};
    for (int64_t r = 0; r < s->N; r++) {
        for (int64_t g = 0; g < s->kb; g++) {
            const float v = scale(s, r, g);
            SQZ_RETURN_IF(!isfinite(v), SQZ_ERR_FORMAT, "tensor '%s': scale %g of row %lld block %lld is not finite",
                          s->name, (double)v, (long long)r, (long long)g);
            SQZ_RETURN_IF(s->zp_float && !isfinite(zp_f32(s, r, g)), SQZ_ERR_FORMAT, "tensor '%s': zero point of row "
                          "%lld block %lld is not finite", s->name, (long long)r, (long long)g);
            f->fp16 &= fp16_exact(v);
            f->rows_uniform &= v == scale(s, r, 0);
            f->all_zp16 &= zp_u8(s, r, g) == 16;
        }
        for (int64_t c = 0; c < s->K && f->codes_lt32; c++) f->codes_lt32 &= code(s, r, c) < 32;
    }
    return SQZ_OK;
}

/* ---- GGUF blocks of 32 ---- */

/* Q4_1 / Q5_1's minimum from the float zero point, checked to be the writer's (onnx_plan.c unpack_block). */
static bool minimum(float d, float zpf, uint16_t *m) {
    if (d == 0.0f) {
        *m = 0;
        return zpf == 0.0f;
    }
    *m = sqz_fp32_to_fp16(-zpf * d);
    return -sqz_fp16_to_fp32(*m) / d == zpf;
}

static sqz_status put_block(const qsrc *s, sqz_dtype dt, int64_t r, int64_t g, uint8_t *out) {
    uint8_t c[32];
    for (int j = 0; j < 32; j++) c[j] = (uint8_t)code(s, r, g * 32 + j);
    const float d = scale(s, r, g);
    sqz__wr_u16(out, sqz_fp32_to_fp16(d));
    uint8_t *qs = out + 2;
    if (dt == SQZ_DTYPE_Q8_0) {
        for (int j = 0; j < 32; j++) qs[j] = (uint8_t)(c[j] ^ 0x80); /* code - 128 */
        return SQZ_OK;
    }
    if (dt == SQZ_DTYPE_Q4_1 || dt == SQZ_DTYPE_Q5_1) {
        uint16_t m;
        SQZ_RETURN_IF(!minimum(d, zp_f32(s, r, g), &m), SQZ_ERR_FORMAT, "tensor '%s': row %lld block %lld: the float "
                      "zero point is not -m/d of an fp16 minimum m (sqz writes %s's minimum so)", s->name, (long long)r,
                      (long long)g, sqz_dtype_name(dt));
        sqz__wr_u16(out + 2, m);
        qs = out + 4;
    }
    if (dt == SQZ_DTYPE_Q5_0 || dt == SQZ_DTYPE_Q5_1) {
        uint32_t qh = 0;
        for (int j = 0; j < 32; j++) qh |= (uint32_t)(c[j] >> 4 & 1) << j;
        sqz__wr_u32(qs, qh);
        qs += 4;
    }
    for (int j = 0; j < 16; j++) qs[j] = (uint8_t)((c[j] & 15) | (c[j + 16] & 15) << 4);
    return SQZ_OK;
}

static sqz_status make_blocks(const qsrc *s, sqz_dtype dt, sqz_tensor *t) {
    SQZ_RETURN_IF(s->block != 32 || s->K % 32, SQZ_ERR_FORMAT, "tensor '%s': %s needs whole blocks of 32 (block %lld, "
                  "K %lld)", s->name, sqz_dtype_name(dt), (long long)s->block, (long long)s->K);
    const size_t bb = sqz_dtype_info(dt)->type_size;
    t->dtype = dt;
    t->nbytes = (size_t)(s->N * s->kb) * bb;
    uint8_t *b = sqz__malloc(t->nbytes);
    if (!b) return SQZ_ERR_NOMEM;
    sqz_status st = SQZ_OK;
    for (int64_t r = 0; r < s->N && st == SQZ_OK; r++)
        for (int64_t g = 0; g < s->kb && st == SQZ_OK; g++) st = put_block(s, dt, r, g, b + (size_t)(r * s->kb + g) * bb);
    if (st != SQZ_OK) {
        free(b);
        return st;
    }
    t->data = b;
    t->owned = true;
    return SQZ_OK;
}

/* ---- sqz's schemes ---- */

/* U4_GROUP or I8_ROW: codes into t (owned, or MatMulNBits' 4-bit rows as they are), qparams kept by m. */
static sqz_status make_scheme(sqz__onnx_rd *rd, const qsrc *s, bool u4, sqz_tensor *t) {
    const int64_t N = s->N, K = s->K, ng = u4 ? s->kb : 1;
    const bool asym = u4 && s->zp != NULL;
    const size_t off_s = (sizeof(sqz_qparams) + 15) & ~(size_t)15, off_z = off_s + (size_t)(N * ng) * sizeof(float);
    uint8_t *blk = sqz__calloc(off_z + (asym ? (size_t)(N * ng) : 0) + 1, 1);
    if (!blk) return SQZ_ERR_NOMEM;
    SQZ_TRY(sqz_model_keep(rd->m, blk));
    sqz_qparams *qp = (sqz_qparams *)(void *)blk;
    float *sc = (float *)(void *)(blk + off_s);
    *qp = (sqz_qparams){.scheme = u4 ? SQZ_QSCHEME_U4_GROUP : SQZ_QSCHEME_I8_ROW, .n_out = N, .n_in = K,
                        .group_size = (int32_t)(u4 ? s->block : K), .n_groups = ng, .scales = sc,
                        .zeros = asym ? blk + off_z : NULL};
    for (int64_t r = 0; r < N; r++)
        for (int64_t g = 0; g < ng; g++) {
            sc[r * ng + g] = scale(s, r, g);
            if (asym) blk[off_z + (size_t)(r * ng + g)] = (uint8_t)zp_u8(s, r, g);
        }
    t->dtype = u4 ? SQZ_DTYPE_U4 : SQZ_DTYPE_I8;
    t->nbytes = u4 ? (size_t)(N * K / 2) : (size_t)(N * K);
    if (u4 && !s->qdq && s->kb * s->block == K) {
        t->data = (void *)s->q; /* MatMulNBits packs a row's codes as sqz's U4 does: low nibble first */
    } else {
        uint8_t *w = sqz__calloc(t->nbytes + 1, 1);
        if (!w) return SQZ_ERR_NOMEM;
        for (int64_t r = 0; r < N; r++)
            for (int64_t c = 0; c < K; c++) {
                const unsigned v = code(s, r, c);
                if (!u4) w[r * K + c] = (uint8_t)(v ^ 0x80);
                else w[(r * K + c) / 2] |= (uint8_t)(c % 2 ? v << 4 : v);
            }
        t->data = w;
        t->owned = true;
    }
    t->qp = qp;
    if (sqz_qparams_check(qp, t->dtype, t->nbytes, t->name) != SQZ_OK) return SQZ_ERR_FORMAT;
    return SQZ_OK;
}

/* The sqz type of the weight's values (the table at the top of this file). */
static sqz_status place(sqz__onnx_rd *rd, const qsrc *s, sqz_tensor *t) {
    facts f;
    SQZ_TRY(survey(s, &f));
    const bool b32 = s->block == 32 && s->K % 32 == 0;
    if (s->zp_float) {
        SQZ_RETURN_IF(s->bits == 8 && !f.codes_lt32, SQZ_ERR_FORMAT, "tensor '%s': 8-bit codes with float zero points "
                      "above 31 (sqz writes Q5_1 so)", s->name);
        SQZ_RETURN_IF(!f.fp16, SQZ_ERR_FORMAT, "tensor '%s': float zero points with scales that are not fp16 values "
                      "(sqz writes Q4_1 / Q5_1 so)", s->name);
        return make_blocks(s, s->bits == 4 ? SQZ_DTYPE_Q4_1 : SQZ_DTYPE_Q5_1, t);
    }
    if (s->bits == 4) {
        if (!s->zp && b32 && f.fp16) return make_blocks(s, SQZ_DTYPE_Q4_0, t);
        return make_scheme(rd, s, true, t);
    }
    if (s->zp) {
        SQZ_RETURN_IF(!f.all_zp16 || !f.codes_lt32 || !b32 || !f.fp16, SQZ_ERR_FORMAT, "tensor '%s': 8-bit codes with "
                      "integer zero points are not GGUF Q5_0's (zero point 16, codes < 32, blocks of 32, fp16 scales), "
                      "the one such form sqz writes", s->name);
        return make_blocks(s, SQZ_DTYPE_Q5_0, t);
    }
    if (b32 && f.fp16) return make_blocks(s, SQZ_DTYPE_Q8_0, t);
    SQZ_RETURN_IF(!f.rows_uniform, SQZ_ERR_FORMAT, "tensor '%s': 8-bit blocks whose scales are neither fp16 values "
                  "(Q8_0) nor one per row (sqz int8)", s->name);
    for (int64_t r = 0; r < s->N; r++)
        for (int64_t c = 0; c < s->K; c++)
            SQZ_RETURN_IF(code(s, r, c) == 0, SQZ_ERR_FORMAT, "tensor '%s': row %lld column %lld is -128, outside sqz "
                          "int8's [-127, 127]", s->name, (long long)r, (long long)c);
    return make_scheme(rd, s, false, t);
}

/* ---- the parts ---- */

/* The companion initializer named by input `slot` of node nd, checked: type, element count; marked used. */
static sqz_status part(sqz__onnx_rd *rd, const sqz__onnx_node *nd, int slot, const char *what, int64_t type,
                       int64_t count, const sqz__onnx_init **out, const uint8_t **data) {
    *out = NULL;
    *data = NULL;
    if (slot >= nd->n_in || slot >= SQZ__ONNX_NODE_INPUTS || !nd->in[slot].n) return SQZ_OK;
    int64_t i;
    const sqz__onnx_init *x = sqz__onnx_rd_init(rd, nd->in[slot], &i);
    SQZ_RETURN_IF(!x || !rd->data[i], SQZ_ERR_FORMAT, "%s: tensor '%s': its %s '%.*s' is not an initializer of "
                  "model.onnx.data", rd->file, what, what, (int)(nd->in[slot].n > 200 ? 200 : nd->in[slot].n),
                  nd->in[slot].p);
    int64_t n = 1;
    for (int d = 0; d < x->ndim; d++) n *= x->dims[d]; /* checked not to overflow (check_init) */
    SQZ_RETURN_IF(x->data_type != type || n != count, SQZ_ERR_FORMAT, "%s: tensor '%.*s': ONNX type %lld with %lld "
                  "elements, expected type %lld with %lld", rd->file, (int)x->name.n, x->name.p,
                  (long long)x->data_type, (long long)n, (long long)type, (long long)count);
    rd->used[i] = true;
    *out = x;
    *data = rd->data[i];
    return SQZ_OK;
}

static bool attr(const sqz__onnx_node *nd, int a, int64_t *v) {
    *v = nd->attr[a];
    return nd->has_attr[a];
}

static sqz_status from_nbits(sqz__onnx_rd *rd, const sqz__onnx_node *nd, const sqz__onnx_init *x, int64_t i,
                             qsrc *s) {
    int64_t K, N, bits, block;
    SQZ_RETURN_IF(!attr(nd, SQZ__ONNX_ATTR_K, &K) || !attr(nd, SQZ__ONNX_ATTR_N, &N) ||
                  !attr(nd, SQZ__ONNX_ATTR_BITS, &bits) || !attr(nd, SQZ__ONNX_ATTR_BLOCK, &block), SQZ_ERR_FORMAT,
                  "%s: tensor '%s': MatMulNBits without K, N, bits and block_size", rd->file, s->name);
    SQZ_RETURN_IF((bits != 4 && bits != 8) || block < 16 || block > 4096 || (block & (block - 1)) || K < 1 || N < 1,
                  SQZ_ERR_FORMAT, "%s: tensor '%s': MatMulNBits bits %lld block_size %lld (sqz writes 4 or 8 bits, "
                  "blocks a power of 2 from 16)", rd->file, s->name, (long long)bits, (long long)block);
    const int64_t kb = (K + block - 1) / block;
    SQZ_RETURN_IF(x->data_type != SQZ__ONNX_UINT8 || x->ndim != 3 || x->dims[0] != N || x->dims[1] != kb ||
                  x->dims[2] != block * bits / 8, SQZ_ERR_FORMAT, "%s: tensor '%s': MatMulNBits' B must be uint8 (%lld, "
                  "%lld, %lld) for K %lld N %lld", rd->file, s->name, (long long)N, (long long)kb,
                  (long long)(block * bits / 8), (long long)K, (long long)N);
    *s = (qsrc){.name = s->name, .N = N, .K = K, .kb = kb, .block = block, .bits = (int)bits, .q = rd->data[i]};
    const sqz__onnx_init *sc, *zp;
    SQZ_TRY(part(rd, nd, 2, "scales", SQZ__ONNX_FLOAT, N * kb, &sc, &s->sc));
    SQZ_RETURN_IF(!sc, SQZ_ERR_FORMAT, "%s: tensor '%s': MatMulNBits without scales", rd->file, s->name);
    if (nd->n_in > 3 && nd->in[3].n) {
        int64_t j;
        const sqz__onnx_init *z = sqz__onnx_rd_init(rd, nd->in[3], &j);
        s->zp_float = z && z->data_type == SQZ__ONNX_FLOAT;
        s->zp_row = (kb * bits + 7) / 8;
        SQZ_TRY(part(rd, nd, 3, "zero points", s->zp_float ? SQZ__ONNX_FLOAT : SQZ__ONNX_UINT8,
                     s->zp_float ? N * kb : N * s->zp_row, &zp, &s->zp));
    }
    return SQZ_OK;
}

static sqz_status from_qdq(sqz__onnx_rd *rd, const sqz__onnx_node *nd, const sqz__onnx_init *x, int64_t i, qsrc *s) {
    int64_t axis = 1, block = 0;
    attr(nd, SQZ__ONNX_ATTR_AXIS, &axis);
    attr(nd, SQZ__ONNX_ATTR_BLOCK, &block);
    const int64_t dt = x->data_type;
    SQZ_RETURN_IF(x->ndim != 2 || axis != 0 || block < 1 || x->dims[0] < 1 || x->dims[1] < 1 || x->dims[0] % block,
                  SQZ_ERR_FORMAT, "%s: tensor '%s': DequantizeLinear of W^T (K, N) in blocks along K (axis 0, "
                  "block_size dividing K) is the form sqz writes (axis %lld, block_size %lld)", rd->file, s->name,
                  (long long)axis, (long long)block);
    const int64_t K = x->dims[0], N = x->dims[1], kb = K / block;
    *s = (qsrc){.name = s->name, .N = N, .K = K, .kb = kb, .block = block, .qdq = true, .q = rd->data[i],
                .bits = dt == SQZ__ONNX_INT4 || dt == SQZ__ONNX_UINT4 ? 4 : 8,
                .sgn = dt == SQZ__ONNX_INT4 || dt == SQZ__ONNX_INT8};
    const sqz__onnx_init *sc, *zp;
    SQZ_TRY(part(rd, nd, 1, "scales", SQZ__ONNX_FLOAT, kb * N, &sc, &s->sc));
    SQZ_RETURN_IF(!sc || sc->ndim != 2 || sc->dims[0] != kb, SQZ_ERR_FORMAT, "%s: tensor '%s': DequantizeLinear's "
                  "scales must be f32 (%lld, %lld)", rd->file, s->name, (long long)kb, (long long)N);
    SQZ_TRY(part(rd, nd, 2, "zero points", dt, kb * N, &zp, &s->zp));
    SQZ_RETURN_IF((zp != NULL) == s->sgn, SQZ_ERR_FORMAT, "%s: tensor '%s': sqz writes int4 / int8 without zero points "
                  "and uint4 / uint8 with them", rd->file, s->name);
    return SQZ_OK;
}

/* W8A8-FP8: the MatMul reading the dequantized weight takes Mul(Cast(Cast(x / s, FLOAT8E4M3FN), FLOAT), s);
 * *scale: s when it is an initializer (one f32: static, fp8_static), else 0 (per token). */
static bool fp8_input(const sqz__onnx_rd *rd, const sqz__onnx_node *dq, float *scale) {
    *scale = 0.0f;
    const sqz__onnx_node *mm = sqz__onnx_rd_consumer(rd, dq->out, 1, "MatMul");
    const sqz__onnx_node *mul = mm ? sqz__onnx_rd_producer(rd, mm->in[0]) : NULL;
    if (!mul || !sqz__pb_is(mul->op, "Mul")) return false;
    const sqz__onnx_node *back = sqz__onnx_rd_producer(rd, mul->in[0]);
    if (!back || !sqz__pb_is(back->op, "Cast") || back->attr[SQZ__ONNX_ATTR_TO] != SQZ__ONNX_FLOAT) return false;
    const sqz__onnx_node *to8 = sqz__onnx_rd_producer(rd, back->in[0]);
    if (!to8 || !sqz__pb_is(to8->op, "Cast") || to8->attr[SQZ__ONNX_ATTR_TO] != SQZ__ONNX_FLOAT8E4M3FN) return false;
    int64_t i;
    const sqz__onnx_init *s = sqz__onnx_rd_init(rd, mul->in[1], &i); /* a graph constant: raw_data inline */
    if (s && s->data_type == SQZ__ONNX_FLOAT && s->ndim == 0 && s->has_raw && s->raw_n == 4) *scale = sqz__rd_f32(s->raw);
    return true;
}

static sqz_status from_fp8(sqz__onnx_rd *rd, const sqz__onnx_node *nd, const sqz__onnx_init *x, int64_t i,
                           sqz_tensor *t) {
    int64_t axis = 1;
    attr(nd, SQZ__ONNX_ATTR_AXIS, &axis);
    SQZ_RETURN_IF(x->ndim != 2 || axis != 1, SQZ_ERR_FORMAT, "%s: tensor '%s': FP8 weights are W^T (K, N) scaled "
                  "along axis 1", rd->file, t->name);
    const int64_t K = x->dims[0], N = x->dims[1];
    const sqz__onnx_init *sc;
    const uint8_t *sd;
    SQZ_TRY(part(rd, nd, 1, "scales", SQZ__ONNX_FLOAT, N, &sc, &sd));
    SQZ_RETURN_IF(!sc, SQZ_ERR_FORMAT, "%s: tensor '%s': FP8 weight without scales", rd->file, t->name);
    float act = 0.0f;
    const bool act8 = fp8_input(rd, nd, &act);
    const size_t off_s = (sizeof(sqz_qparams) + 15) & ~(size_t)15;
    uint8_t *blk = sqz__malloc(off_s + (size_t)N * sizeof(float));
    if (!blk) return SQZ_ERR_NOMEM;
    SQZ_TRY(sqz_model_keep(rd->m, blk));
    float *s = (float *)(void *)(blk + off_s);
    for (int64_t r = 0; r < N; r++) s[r] = sqz__rd_f32(sd + 4 * r);
    sqz_qparams *qp = (sqz_qparams *)(void *)blk;
    *qp = (sqz_qparams){.scheme = SQZ_QSCHEME_F8_ROW, .n_out = N, .n_in = K, .n_groups = 1, .group_size = (int32_t)K,
                        .scales = s, .act_scale = act,
                        .act_mode = !act8 ? SQZ_ACT_FLOAT : act > 0 ? SQZ_ACT_STATIC_TENSOR : SQZ_ACT_DYNAMIC_TOKEN,
                        .act_grid = act8 ? SQZ_ACT_GRID_FP8 : SQZ_ACT_GRID_SYM127};
    t->dtype = SQZ_DTYPE_F8_E4M3;
    t->nbytes = (size_t)(N * K);
    uint8_t *w = sqz__malloc(t->nbytes + 1);
    if (!w) return SQZ_ERR_NOMEM;
    const uint8_t *q = rd->data[i];
    for (int64_t c = 0; c < K; c++)
        for (int64_t r = 0; r < N; r++) w[r * K + c] = q[c * N + r];
    t->data = w;
    t->owned = true;
    t->qp = qp;
    return sqz_qparams_check(qp, t->dtype, t->nbytes, t->name) == SQZ_OK ? SQZ_OK : SQZ_ERR_FORMAT;
}

static sqz_status read_quant(sqz__onnx_rd *rd, int64_t i, sqz_tensor *t) {
    const sqz__onnx_init *x = &rd->pb->init[i];
    const sqz__onnx_node *nb = sqz__onnx_rd_consumer(rd, x->name, 1, "MatMulNBits");
    const sqz__onnx_node *dq = sqz__onnx_rd_consumer(rd, x->name, 0, "DequantizeLinear");
    SQZ_RETURN_IF(!nb == !dq, SQZ_ERR_FORMAT, "%s: tensor '%s': its parts are read by %s", rd->file, t->name,
                  nb ? "both MatMulNBits and DequantizeLinear" : "neither MatMulNBits nor DequantizeLinear");
    t->ndim = 2;
    if (dq && x->data_type == SQZ__ONNX_FLOAT8E4M3FN) {
        t->shape[0] = x->ndim == 2 ? x->dims[1] : 0;
        t->shape[1] = x->ndim == 2 ? x->dims[0] : 0;
        return from_fp8(rd, dq, x, i, t);
    }
    qsrc s = {.name = t->name};
    if (nb) SQZ_TRY(from_nbits(rd, nb, x, i, &s));
    else {
        const int64_t dt = x->data_type;
        SQZ_RETURN_IF(dt != SQZ__ONNX_INT4 && dt != SQZ__ONNX_UINT4 && dt != SQZ__ONNX_INT8 && dt != SQZ__ONNX_UINT8,
                      SQZ_ERR_FORMAT, "%s: tensor '%s': DequantizeLinear of ONNX type %lld (sqz writes int4, uint4, "
                      "int8, uint8 and FLOAT8E4M3FN)", rd->file, t->name, (long long)dt);
        SQZ_TRY(from_qdq(rd, dq, x, i, &s));
    }
    t->shape[0] = s.N;
    t->shape[1] = s.K;
    return place(rd, &s, t);
}

sqz_status sqz__onnx_read_quant(sqz__onnx_rd *rd, int64_t i, sqz_tensor *t) {
    sqz_status st = read_quant(rd, i, t);
    if (st == SQZ_OK && !sqz_model_add_tensor(rd->m, t)) st = SQZ_ERR_NOMEM;
    if (st != SQZ_OK) {
        if (t->owned) free(t->data);
        if (st != SQZ_ERR_NOMEM && strncmp(sqz_last_error(), rd->file, strlen(rd->file)) != 0)
            sqz__error_prefix("%s", rd->file);
    }
    return st;
}

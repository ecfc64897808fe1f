/*
 * formats/st_ctensors_read.c - reading compressed-tensors checkpoints (st_ctensors.c has the
 * layout): "pack-quantized" 4-bit per group or per channel (symmetric or with zero points, with or
 * without g_idx) becomes sqz's U4_GROUP, "pack-quantized" 8-bit per channel symmetric and
 * "int-quantized" INT8 per channel become I8_ROW (W8A8 when the config quantizes the inputs, on
 * the activation grid the format declares: SQZ_ACT_GRID_CTENSORS, [-128, 127], absmax / 127.5),
 * "pack-quantized" 8-bit symmetric per group of 32 with fp16-valued scales becomes a GGUF Q8_0
 * tensor (what sqz writes for a GGUF Q8_0 / Q5_0 weight, st_blocks.c),
 * value-exact against compressed-tensors' dequantization (w = scale * (q - zp), scale[:, g_idx]).
 * sparse-24-bitmask weights (st_sparse24.c) come back dense, bit for bit. What sqz cannot hold
 * exactly (8-bit groups or zero points, other bit widths, other sparsity formats) is refused naming
 * the tensor. "float-quantized" / "naive-quantized" FP8 E4M3 weights with per-channel or per-tensor
 * scales become SQZ_QSCHEME_F8_ROW (W8A8-FP8 when the config quantizes the inputs dynamically:
 * SQZ_ACT_GRID_FP8, and with a static one when the layer has an input_scale: llm-compressor's FP8).
 * "nvfp4-pack-quantized" (U8 weight_packed,
 * F8_E4M3 weight_scale per 16, weight_global_scale) becomes SQZ_QSCHEME_NVFP4; W4A4's
 * input_global_scale is refused.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "core/blocks.h"
#include "formats/formats_internal.h"
#include "sqz/qparams.h"

#define CT_BAD(...) sqz__error(SQZ_ERR_FORMAT, __FILE__, __LINE__, __VA_ARGS__)

static const char *const CT_PART[] = {"weight_packed", "weight_scale", "weight_zero_point", "weight_g_idx",
                                      "weight_shape", "input_scale", "input_zero_point", "compressed", "bitmask",
                                      "shape", "weight_global_scale", "input_global_scale"};

bool sqz__ct_is_part(const char *name) {
    const char *dot = strrchr(name, '.');
    for (size_t i = 0; dot && i < sizeof CT_PART / sizeof CT_PART[0]; i++)
        if (strcmp(dot + 1, CT_PART[i]) == 0) return true;
    return false;
}

static bool is_float_view(const sqz__st_view *v) {
    return v->dtype == SQZ_DTYPE_F32 || v->dtype == SQZ_DTYPE_F16 || v->dtype == SQZ_DTYPE_BF16;
}

/* One heap block for a weight's qparams, scales, g_idx and zero points (owned by the model). */
static sqz_status make_qp(sqz_model *m, sqz_qparams *qp, const sqz__st_view *sc, const sqz__st_view *zp,
                          const sqz__st_view *gi, const sqz_qparams **out) {
    const size_t ns = (size_t)(qp->n_out * qp->n_groups), ni = (size_t)qp->n_in;
    const size_t off_s = (sizeof(sqz_qparams) + 15) & ~(size_t)15, off_g = off_s + ns * sizeof(float);
    const size_t off_z = off_g + (gi ? ni * sizeof(int32_t) : 0), total = off_z + (zp ? ns : 0);
    uint8_t *b = sqz__malloc(total);
    if (!b) return SQZ_ERR_NOMEM;
    float *s = (float *)(void *)(b + off_s);
    for (size_t i = 0; i < ns; i++) s[i] = sqz__st_view_f32(sc, i);
    qp->scales = s;
    if (gi) {
        int32_t *g = (int32_t *)(void *)(b + off_g);
        for (size_t c = 0; c < ni; c++) g[c] = (int32_t)sqz__rd_u32(gi->data + 4 * c);
        qp->g_idx = g;
    }
    if (zp) { /* packed eight per word along the output rows: row r of group g in word (r / 8, g) */
        uint8_t *z = b + off_z;
        for (size_t r = 0; r < (size_t)qp->n_out; r++)
            for (size_t g = 0; g < (size_t)qp->n_groups; g++)
                z[r * (size_t)qp->n_groups + g] =
                    (uint8_t)(sqz__rd_u32(zp->data + 4 * ((r / 8) * (size_t)qp->n_groups + g)) >> (4 * (r % 8)) & 15);
        qp->zeros = z;
    }
    memcpy(b, qp, sizeof *qp);
    SQZ_TRY(sqz_model_keep(m, b));
    *out = (const sqz_qparams *)(void *)b;
    return SQZ_OK;
}

/* 8 bits symmetric in groups of 32 (what sqz writes for a GGUF Q8_0 or Q5_0 weight) as a Q8_0
 * tensor t: value-exact when every scale is an fp16 value, refused naming the tensor otherwise. */
static sqz_status attach_q8_0(sqz_model *m, sqz_tensor *t, const sqz__st_view *w, const sqz__st_view *sc) {
    const int64_t nb = t->shape[0] * t->shape[1] / 32;
    for (int64_t i = 0; i < nb; i++) {
        const float s = sqz__st_view_f32(sc, (size_t)i);
        if (!isfinite(s) || sqz_fp16_to_fp32(sqz_fp32_to_fp16(s)) != s)
            return SQZ_ERROR(SQZ_ERR_UNSUPPORTED, "%s: tensor '%s': scale %g of group %lld is not an fp16 value: 8-bit "
                             "groups of 32 are read as GGUF Q8_0, whose scales are fp16", sc->file, sc->name,
                             (double)s, (long long)i);
    }
    t->dtype = SQZ_DTYPE_Q8_0;
    t->nbytes = (size_t)nb * sizeof(sqz_block_q8_0);
    sqz_block_q8_0 *b = sqz__malloc(t->nbytes);
    if (!b) return SQZ_ERR_NOMEM;
    for (int64_t i = 0; i < nb; i++) {
        b[i].d = sqz_fp32_to_fp16(sqz__st_view_f32(sc, (size_t)i));
        for (int j = 0; j < 32; j++) b[i].qs[j] = (int8_t)(w->data[32 * i + j] ^ 0x80); /* stored q + 128 */
    }
    t->data = b;
    t->owned = true;
    if (!sqz_model_add_tensor(m, t)) {
        free(b);
        return SQZ_ERR_NOMEM;
    }
    return SQZ_OK;
}

/* *t: the 2-D weight prefix + ".weight" (no, ni) of m's family, named in name[272]; v is the part
 * read (for the message). */
static sqz_status linear_tensor(const sqz_model *m, const sqz__st_view *v, const char *prefix, int64_t no, int64_t ni,
                                char name[272], sqz_tensor *t) {
    memset(t, 0, sizeof *t);
    snprintf(name, 272, "%s.weight", prefix);
    if (sqz__hf_name_parse(m->hp.family, name, &t->role, &t->layer, &t->param) != SQZ__HF_TENSOR)
        return CT_BAD("%s: tensor '%s': not a known %s tensor name", v->file, v->name, m->hp.arch);
    t->name = name;
    t->ndim = 2;
    t->shape[0] = no;
    t->shape[1] = ni;
    return SQZ_OK;
}

/* t (its data as read) with qparams qp made from the scale, zero point and g_idx views and checked,
 * added to m; on failure t's own data is freed. file: for the message. */
static sqz_status add_quantized(sqz_model *m, sqz_tensor *t, sqz_qparams *qp, const sqz__st_view *sc,
                                const sqz__st_view *zp, const sqz__st_view *gi, const char *file) {
    const sqz_qparams *kept = NULL;
    sqz_status st = make_qp(m, qp, sc, zp, gi, &kept);
    if (st == SQZ_OK && sqz_qparams_check(kept, t->dtype, t->nbytes, t->name) != SQZ_OK) {
        sqz__error_prefix("%s", file);
        st = SQZ_ERR_FORMAT;
    }
    t->qp = kept;
    if (st == SQZ_OK && !sqz_model_add_tensor(m, t)) st = SQZ_ERR_NOMEM;
    if (st != SQZ_OK && t->owned) free(t->data);
    return st;
}

/* nvfp4-pack-quantized: P.weight_packed U8 [n, k / 2], P.weight_scale F8_E4M3 [n, k / 16] and
 * P.weight_global_scale [1] as an NVFP4 weight P.weight (W4A4's input_global_scale is refused). */
static sqz_status attach_nvfp4(sqz_model *m, const sqz__st_view *w, const char *prefix, const sqz__st_view *v,
                               size_t n) {
    const sqz__st_view *sc = sqz__st_view_find(v, n, prefix, "weight_scale");
    const sqz__st_view *gs = sqz__st_view_find(v, n, prefix, "weight_global_scale");
    const int64_t no = w->shape[0], ni = w->ndim == 2 ? 2 * w->shape[1] : 0;
    if (w->ndim != 2 || no < 1 || ni < 16 || ni % 16 || !sc || !gs || !sqz__st_view_is(sc, SQZ_DTYPE_F8_E4M3, no, ni / 16) ||
        !is_float_view(gs) || !sqz__st_view_is(gs, gs->dtype, 1, 1))
        return CT_BAD("%s: tensor '%s': NVFP4 needs U8 weight_packed [n, k / 2] with k a multiple of 16, F8_E4M3 "
                      "weight_scale [n, k / 16] and a one-value weight_global_scale", w->file, w->name);
    SQZ_RETURN_IF(sqz__st_view_find(v, n, prefix, "input_global_scale"), SQZ_ERR_UNSUPPORTED, "%s: tensor '%s': NVFP4 "
                  "activations (W4A4, input_global_scale) are not run by sqz; it reads NVFP4A16", w->file, w->name);
    sqz_tensor t;
    char name[272];
    SQZ_TRY(linear_tensor(m, w, prefix, no, ni, name, &t));
    t.dtype = SQZ_DTYPE_U4;
    t.data = (void *)w->data; /* two E2M1 codes a byte, the even element low: sqz's U4 packing */
    t.nbytes = (size_t)(no * ni / 2);
    sqz_qparams qp = {.scheme = SQZ_QSCHEME_NVFP4, .n_out = no, .n_in = ni, .n_groups = ni / 16, .group_size = 16,
                      .global_scale = sqz__st_view_f32(gs, 0)};
    return add_quantized(m, &t, &qp, sc, NULL, NULL, w->file);
}

/* P.weight_packed (+ its side tensors) as the weight P.weight. */
static sqz_status attach_packed(sqz_model *m, const sqz__st_view *w, const sqz__st_view *v, size_t n) {
    char prefix[256];
    const size_t pl = strlen(w->name) - strlen(".weight_packed");
    SQZ_RETURN_IF(pl >= sizeof prefix - 8, SQZ_ERR_FORMAT, "%s: tensor '%s': name too long", w->file, w->name);
    memcpy(prefix, w->name, pl);
    prefix[pl] = 0;
    if (w->dtype == SQZ_DTYPE_U8) return attach_nvfp4(m, w, prefix, v, n);
    const sqz__st_view *sh = sqz__st_view_find(v, n, prefix, "weight_shape");
    const sqz__st_view *sc = sqz__st_view_find(v, n, prefix, "weight_scale");
    const sqz__st_view *zp = sqz__st_view_find(v, n, prefix, "weight_zero_point");
    const sqz__st_view *gi = sqz__st_view_find(v, n, prefix, "weight_g_idx");
    if (!sh || !sc || w->dtype != SQZ_DTYPE_I32 || w->ndim != 2 || !is_float_view(sc) || sc->ndim != 2 ||
        (sh->dtype != SQZ_DTYPE_I32 && sh->dtype != SQZ_DTYPE_I64) || sh->ndim != 1 || sh->shape[0] != 2)
        return CT_BAD("%s: tensor '%s': pack-quantized needs I32 weight_packed, a float 2-D weight_scale and a "
                      "weight_shape of 2", w->file, w->name);
    const bool i64 = sh->dtype == SQZ_DTYPE_I64;
    const int64_t no = (int64_t)(i64 ? sqz__rd_u64(sh->data) : sqz__rd_u32(sh->data));
    const int64_t ni = (int64_t)(i64 ? sqz__rd_u64(sh->data + 8) : sqz__rd_u32(sh->data + 4));
    const int bits = ni > 0 && w->shape[1] * 8 == ni ? 4 : ni > 0 && w->shape[1] * 4 == ni ? 8 : 0;
    if (!bits || w->shape[0] != no || no < 1)
        return CT_BAD("%s: tensor '%s': shape (%lld, %lld) packed as (%lld, %lld) is neither 4 nor 8 bits per value "
                      "(sqz reads widths that fill whole words)", w->file, w->name, (long long)no, (long long)ni,
                      (long long)w->shape[0], (long long)w->shape[1]);
    const int64_t ng = sc->shape[1];
    if (sc->shape[0] != no || ng < 1 || ni % ng)
        return CT_BAD("%s: tensor '%s.weight_scale': [%lld, %lld] does not fit the weight (%lld, %lld)", sc->file,
                      prefix, (long long)sc->shape[0], (long long)ng, (long long)no, (long long)ni);
    if (zp && !sqz__st_view_is(zp, SQZ_DTYPE_I32, (no + 7) / 8, ng))
        return CT_BAD("%s: tensor '%s.weight_zero_point': must be I32 [%lld, %lld]", zp->file, prefix,
                      (long long)(no + 7) / 8, (long long)ng);
    if (gi && !sqz__st_view_is(gi, SQZ_DTYPE_I32, ni, 1))
        return CT_BAD("%s: tensor '%s.weight_g_idx': must be I32 [%lld]", gi->file, prefix, (long long)ni);
    const bool q8_0 = bits == 8 && ng > 1 && ni == 32 * ng && !zp && !gi;
    if (bits == 8 && ng != 1 && !q8_0)
        return SQZ_ERROR(SQZ_ERR_UNSUPPORTED, "%s: tensor '%s': 8-bit weights with zero points, g_idx or groups other "
                         "than 32: sqz reads 8 bits symmetric per channel (INT8) or per group of 32 (Q8_0)", w->file,
                         w->name);
    sqz_tensor t;
    char name[272];
    SQZ_TRY(linear_tensor(m, w, prefix, no, ni, name, &t));
    if (q8_0) return attach_q8_0(m, &t, w, sc);
    sqz_qparams qp = {.n_out = no, .n_in = ni, .n_groups = ng, .group_size = (int32_t)(ni / ng)};
    if (bits == 4) {
        t.dtype = SQZ_DTYPE_U4;
        t.data = (void *)w->data; /* the words little-endian are sqz's U4 bytes */
        t.nbytes = (size_t)(no * ni / 2);
        qp.scheme = SQZ_QSCHEME_U4_GROUP;
    } else {
        t.dtype = SQZ_DTYPE_I8;
        t.nbytes = (size_t)(no * ni);
        int8_t *q = sqz__malloc(t.nbytes);
        if (!q) return SQZ_ERR_NOMEM;
        for (size_t i = 0; i < t.nbytes; i++) q[i] = (int8_t)(w->data[i] ^ 0x80); /* stored q + 128 */
        t.data = q;
        t.owned = true;
        qp.scheme = SQZ_QSCHEME_I8_ROW;
        qp.group_size = (int32_t)ni;
    }
    return add_quantized(m, &t, &qp, sc, zp, gi, w->file);
}

/* P.compressed + P.bitmask + P.shape (sparse-24-bitmask, st_sparse24.c) as the dense weight P.weight
 * of the values' dtype (an INT8 one gets its scales from attach_int8). */
static sqz_status attach_sparse24(sqz_model *m, const sqz__st_view *c, const sqz__st_view *v, size_t n) {
    char prefix[256], name[272];
    const size_t pl = strlen(c->name) - strlen(".compressed");
    SQZ_RETURN_IF(pl >= sizeof prefix, SQZ_ERR_FORMAT, "%s: tensor '%s': name too long", c->file, c->name);
    snprintf(prefix, sizeof prefix, "%.*s", (int)pl, c->name);
    const sqz__st_view *b = sqz__st_view_find(v, n, prefix, "bitmask"), *sh = sqz__st_view_find(v, n, prefix, "shape");
    if (!b || !sh || (sh->dtype != SQZ_DTYPE_I64 && sh->dtype != SQZ_DTYPE_I32) || !sqz__st_view_is(sh, sh->dtype, 2, 1))
        return CT_BAD("%s: tensor '%s': sparse-24-bitmask needs '%s.bitmask' and a 2-element '%s.shape'", c->file,
                      c->name, prefix, prefix);
    const bool i64 = sh->dtype == SQZ_DTYPE_I64;
    const int64_t no = (int64_t)(i64 ? sqz__rd_u64(sh->data) : sqz__rd_u32(sh->data));
    const int64_t ni = (int64_t)(i64 ? sqz__rd_u64(sh->data + 8) : sqz__rd_u32(sh->data + 4));
    if (!sqz__sp24_dtype_ok(c->dtype) || no < 1 || ni < 4 || ni % 4 || no > INT32_MAX || ni > INT32_MAX ||
        !sqz__st_view_is(c, c->dtype, no, ni / 2) || !sqz__st_view_is(b, SQZ_DTYPE_U8, no, (ni + 7) / 8))
        return CT_BAD("%s: tensor '%s': shape (%lld, %lld) needs F32/F16/BF16/I8 values [%lld, %lld] and a U8 bitmask "
                      "[%lld, %lld]", c->file, c->name, (long long)no, (long long)ni, (long long)no,
                      (long long)ni / 2, (long long)no, (long long)(ni + 7) / 8);
    sqz_tensor t;
    SQZ_TRY(linear_tensor(m, c, prefix, no, ni, name, &t));
    t.dtype = c->dtype;
    if (!sqz_dtype_nbytes(t.dtype, no * ni, &t.nbytes)) return SQZ_ERR_SHAPE;
    t.data = sqz__malloc(t.nbytes);
    if (!t.data) return SQZ_ERR_NOMEM;
    t.owned = true;
    sqz_status st = sqz__sp24_decompress(c, b, no, ni, t.data);
    if (st == SQZ_OK && !sqz_model_add_tensor(m, &t)) st = SQZ_ERR_NOMEM;
    if (st != SQZ_OK) free(t.data);
    return st;
}

/* Whether the config quantizes linear inputs dynamically (per token) in some group. */
static bool dynamic_inputs(const cJSON *root) {
    const cJSON *qc = cJSON_GetObjectItemCaseSensitive(root, "quantization_config");
    const cJSON *groups = cJSON_GetObjectItemCaseSensitive(qc, "config_groups"), *g;
    cJSON_ArrayForEach(g, groups) {
        const cJSON *a = cJSON_GetObjectItemCaseSensitive(g, "input_activations");
        if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(a, "dynamic"))) return true;
    }
    return false;
}

/* An int-quantized INT8 weight: t (I8, added as it is) with P.weight_scale (+ P.input_scale). */
static sqz_status attach_int8(sqz_model *m, sqz_tensor *t, const char *prefix, bool dyn, const sqz__st_view *v,
                              size_t n) {
    const sqz__st_view *sc = sqz__st_view_find(v, n, prefix, "weight_scale");
    const sqz__st_view *is = sqz__st_view_find(v, n, prefix, "input_scale");
    if (!sc) return SQZ_OK;
    if (t->ndim != 2 || !is_float_view(sc) || sc->shape[0] != t->shape[0] || !sqz__st_view_is(sc, sc->dtype, t->shape[0], 1))
        return CT_BAD("%s: tensor '%s.weight_scale': INT8 scales must be per channel [%lld, 1]", sc->file, prefix,
                      (long long)t->shape[0]);
    if (sqz__st_view_find(v, n, prefix, "weight_zero_point") || sqz__st_view_find(v, n, prefix, "input_zero_point"))
        return SQZ_ERROR(SQZ_ERR_UNSUPPORTED, "%s: tensor '%s': asymmetric INT8: sqz's INT8 is symmetric", sc->file,
                         t->name);
    if (is && (!is_float_view(is) || !sqz__st_view_is(is, is->dtype, 1, 1)))
        return CT_BAD("%s: tensor '%s.input_scale': a static scale is one value", is->file, prefix);
    sqz_qparams qp = {.scheme = SQZ_QSCHEME_I8_ROW, .n_out = t->shape[0], .n_in = t->shape[1], .n_groups = 1,
                      .group_size = (int32_t)t->shape[1]};
    if (is) {
        qp.act_mode = SQZ_ACT_STATIC_TENSOR;
        qp.act_scale = sqz__st_view_f32(is, 0);
    } else if (dyn) {
        qp.act_mode = SQZ_ACT_DYNAMIC_TOKEN;
    }
    if (qp.act_mode != SQZ_ACT_FLOAT) qp.act_grid = SQZ_ACT_GRID_CTENSORS; /* what the file declares */
    const sqz_qparams *kept = NULL;
    SQZ_TRY(make_qp(m, &qp, sc, NULL, NULL, &kept));
    if (sqz_qparams_check(kept, t->dtype, t->nbytes, t->name) != SQZ_OK) {
        sqz__error_prefix("%s", sc->file);
        return SQZ_ERR_FORMAT;
    }
    t->qp = kept;
    return SQZ_OK;
}

/* A float-quantized (or naive-quantized) FP8 weight: t (F8_E4M3, added as it is) with P.weight_scale per
 * channel [n, 1] or per tensor [1] (read as the same scale on every row); dyn: W8A8-FP8, activations
 * quantized to FP8 per token; a P.input_scale [1] (llm-compressor's FP8 scheme): W8A8-FP8 with that one
 * static activation scale. */
static sqz_status attach_fp8(sqz_model *m, sqz_tensor *t, const char *prefix, bool dyn, const sqz__st_view *v,
                             size_t n) {
    const sqz__st_view *sc = sqz__st_view_find(v, n, prefix, "weight_scale");
    SQZ_RETURN_IF(!sc, SQZ_ERR_FORMAT, "tensor '%s': FP8 E4M3 weight without '%s.weight_scale'", t->name, prefix);
    const int64_t no = t->shape[0];
    const bool per_row = sqz__st_view_is(sc, sc->dtype, no, 1), per_tensor = sqz__st_view_is(sc, sc->dtype, 1, 1);
    if (t->ndim != 2 || !is_float_view(sc) || (!per_row && !per_tensor))
        return CT_BAD("%s: tensor '%s.weight_scale': FP8 scales must be per channel [%lld, 1] or per tensor [1]",
                      sc->file, prefix, (long long)no);
    const sqz__st_view *is = sqz__st_view_find(v, n, prefix, "input_scale");
    float act = 0.0f;
    if (is) {
        if (!is_float_view(is) || !sqz__st_view_is(is, is->dtype, 1, 1))
            return CT_BAD("%s: tensor '%s.input_scale': a static FP8 activation scale is one value", is->file, prefix);
        act = sqz__st_view_f32(is, 0);
        if (!(act > 0.0f) || !isfinite(act))
            return CT_BAD("%s: tensor '%s.input_scale' = %g is not a scale (finite, > 0)", is->file, prefix,
                          (double)act);
        SQZ_RETURN_IF(dyn, SQZ_ERR_FORMAT, "%s: tensor '%s.input_scale': a static activation scale where config.json "
                      "declares dynamic activations", is->file, prefix);
    }
    float *s = sqz__malloc((size_t)no * sizeof(float));
    if (!s) return SQZ_ERR_NOMEM;
    for (int64_t r = 0; r < no; r++) s[r] = sqz__st_view_f32(sc, per_row ? (size_t)r : 0);
    const sqz__st_view one = {sc->name, SQZ_DTYPE_F32, 2, (const int64_t[2]){no, 1}, (const uint8_t *)s, sc->file};
    sqz_qparams qp = {.scheme = SQZ_QSCHEME_F8_ROW, .n_out = no, .n_in = t->shape[1], .n_groups = 1,
                      .group_size = (int32_t)t->shape[1],
                      .act_mode = is ? SQZ_ACT_STATIC_TENSOR : dyn ? SQZ_ACT_DYNAMIC_TOKEN : SQZ_ACT_FLOAT,
                      .act_scale = act, .act_grid = is || dyn ? SQZ_ACT_GRID_FP8 : SQZ_ACT_GRID_SYM127};
    const sqz_qparams *kept = NULL;
    sqz_status st = make_qp(m, &qp, &one, NULL, NULL, &kept);
    free(s);
    SQZ_TRY(st);
    if (sqz_qparams_check(kept, t->dtype, t->nbytes, t->name) != SQZ_OK) {
        sqz__error_prefix("%s", sc->file);
        return SQZ_ERR_FORMAT;
    }
    t->qp = kept;
    return SQZ_OK;
}

sqz_status sqz__ct_attach(sqz_model *m, const void *qc, const sqz__st_view *v, size_t n) {
    const cJSON *root = qc;
    const cJSON *q = cJSON_GetObjectItemCaseSensitive(root, "quantization_config");
    const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(q, "format");
    const cJSON *sp = cJSON_GetObjectItemCaseSensitive(q, "sparsity_config");
    const cJSON *spf = cJSON_IsObject(sp) ? cJSON_GetObjectItemCaseSensitive(sp, "format") : NULL;
    SQZ_RETURN_IF(spf && !(cJSON_IsString(spf) && (strcmp(spf->valuestring, "sparse-24-bitmask") == 0 ||
                                                   strcmp(spf->valuestring, "dense") == 0)),
                  SQZ_ERR_UNSUPPORTED, "config.json: compressed-tensors sparsity_config format \"%.40s\" is not read by "
                  "sqz (it reads sparse-24-bitmask and dense)", cJSON_IsString(spf) ? spf->valuestring : "?");
    static const char *const known[] = {"pack-quantized", "int-quantized", "float-quantized", "naive-quantized",
                                        "nvfp4-pack-quantized", "mixed-precision", "dense"};
    bool ok = !cJSON_IsString(fmt);
    for (size_t i = 0; !ok && i < sizeof known / sizeof known[0]; i++) ok = strcmp(fmt->valuestring, known[i]) == 0;
    if (!ok)
        return SQZ_ERROR(SQZ_ERR_UNSUPPORTED, "config.json: compressed-tensors format \"%.40s\" is not read by sqz (it "
                         "reads pack-quantized, int-quantized, float-quantized, naive-quantized and nvfp4-pack-quantized)",
                         fmt->valuestring);
    for (size_t i = 0; i < n; i++) {
        const size_t len = strlen(v[i].name);
        if (len > 14 && strcmp(v[i].name + len - 14, ".weight_packed") == 0) SQZ_TRY(attach_packed(m, &v[i], v, n));
        if (len > 11 && strcmp(v[i].name + len - 11, ".compressed") == 0) SQZ_TRY(attach_sparse24(m, &v[i], v, n));
    }
    const bool dyn = dynamic_inputs(root);
    for (int64_t i = 0; i < m->n_tensors; i++) {
        sqz_tensor *t = &m->tensors[i];
        const size_t len = strlen(t->name);
        const bool f8 = t->dtype == SQZ_DTYPE_F8_E4M3;
        if (t->qp || (t->dtype != SQZ_DTYPE_I8 && !f8) || len < 8 || strcmp(t->name + len - 7, ".weight") != 0) continue;
        char prefix[256];
        if (len - 7 >= sizeof prefix) continue;
        snprintf(prefix, sizeof prefix, "%.*s", (int)(len - 7), t->name);
        SQZ_TRY(f8 ? attach_fp8(m, t, prefix, dyn, v, n) : attach_int8(m, t, prefix, dyn, v, n));
    }
    for (size_t i = 0; i < n; i++) { /* every side tensor belongs to a quantized weight */
        if (!sqz__ct_is_part(v[i].name)) continue;
        char want[300];
        const char *dot = strrchr(v[i].name, '.');
        snprintf(want, sizeof want, "%.*s.weight", (int)(dot - v[i].name), v[i].name);
        const int64_t k = sqz_model_find(m, want);
        const bool sparse_part = !strcmp(dot + 1, "compressed") || !strcmp(dot + 1, "bitmask") || !strcmp(dot + 1, "shape");
        SQZ_RETURN_IF(k < 0 || (!sparse_part && !m->tensors[k].qp && m->tensors[k].dtype != SQZ_DTYPE_Q8_0), SQZ_ERR_FORMAT,
                      "%s: tensor '%s': no %sweight '%s' for it", v[i].file, v[i].name, sparse_part ? "" : "quantized ", want);
    }
    return SQZ_OK;
}

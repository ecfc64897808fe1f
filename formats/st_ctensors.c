/*
 * formats/st_ctensors.c - sqz's quantized weights written as compressed-tensors (the format of
 * neuralmagic/compressed-tensors and llm-compressor, read by transformers, vLLM and SGLang), the
 * default layout of an HF directory (docs/formats.md). Every mapping is exact; what has no exact
 * form is refused, naming the tensor. For a linear layer P:
 *   INT4 per group (W4A16), format "pack-quantized":
 *     P.weight_packed     I32 [n, k / 8]   eight 4-bit values per word, element 8i + j in bits
 *                                          4j..4j+3, stored as q + 8 with q in [-8, 7]: exactly
 *                                          sqz's U4 codes (sqz/qparams.h) read little-endian
 *     P.weight_scale      F32 [n, k / g]   w = scale * (q - zp); F32 although sqz's scales are fp16
 *                                          values: compressed-tensors dequantizes in the scale's
 *                                          dtype, and fp16 products are rounded (SmolLM2's down_proj
 *                                          lost bits that way), f32 ones exact
 *     P.weight_zero_point I32 [ceil(n / 8), k / g]  asymmetric only: zp + 8 (= sqz's zero point)
 *                                          packed eight per word along the OUTPUT dimension
 *     P.weight_g_idx      I32 [k]          act-order ("actorder": "group"): the group of each column
 *     P.weight_shape      I32 [2]          (n, k)
 *   INT8 per channel, weight-only (W8A16): "pack-quantized" with num_bits 8: four values q + 128
 *     per word, P.weight_scale F32 [n, 1], P.weight_shape.
 *   8 bits per group of 32 (a GGUF Q8_0 or Q5_0 weight, st_blocks.c): the same with
 *     P.weight_scale F32 [n, k / 32], strategy "group", group_size 32.
 *   W8A8, format "int-quantized": P.weight I8 [n, k], P.weight_scale F32 [n, 1], and for a static
 *     activation scale P.input_scale F32 [1] (dynamic: per-token scales, no tensor).
 *   FP8 E4M3 per channel, "naive-quantized" (W8A16-FP8; what compressed-tensors itself labels it) or
 *     "float-quantized" (W8A8-FP8, dynamic per-token FP8 activations, or static with P.input_scale
 *     F32 [1]: llm-compressor's FP8): P.weight F8_E4M3 [n, k],
 *     P.weight_scale F32 [n, 1] (F32: compressed-tensors' decompressor multiplies in the scale's
 *     dtype, and fp8 * f32 is exact, so it gives sqz's values).
 *   NVFP4 (weight-only, NVFP4A16), "nvfp4-pack-quantized": P.weight_packed U8 [n, k / 2] (two E2M1
 *     codes a byte, the even element low), P.weight_scale F8_E4M3 [n, k / 16], P.weight_global_scale
 *     F32 [1]; strategy "tensor_group", group_size 16, scale_dtype float8_e4m3fn.
 * config.json's quantization_config: one config group per distinct scheme (targets ["Linear"]
 * when there is one, else the module names), "ignore" naming every float linear layer
 * (lm_head included), format per group and "mixed-precision" when they differ.
 * Differences kept in mind: compressed-tensors' activation grid is [-128, 127] with dynamic scales
 * absmax / 127.5, sqz's [-127, 127] with absmax / 127: the file declares the former (no field
 * says otherwise), and sqz reads it back on that grid (st_ctensors_read.c), so sqz and
 * compressed-tensors compute the same thing on the file, while `sqz compress`'s own report used
 * sqz's grid. A 2:4 weight is written dense, or with --hf-format compressed-tensors-sparse24 (the
 * row at the end) in sparse-24-bitmask parts when it is W8A8 INT8, listed in
 * quantization_config.sparsity_config.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "formats/formats_internal.h"
#include "sqz/qparams.h"

#define CT_FAIL(...) sqz__error(SQZ_ERR_UNSUPPORTED, __FILE__, __LINE__, __VA_ARGS__)

static void put_f32(uint8_t *d, float v) {
    uint32_t u;
    memcpy(&u, &v, 4);
    sqz__wr_u32(d, u);
}

static sqz_status shape_part(sqz__st_part *p, int *n, int64_t no, int64_t ni) {
    sqz__st_part *s = sqz__st_part_new(p, n, "weight_shape", SQZ_DTYPE_I32, 2, 0);
    SQZ_TRY(sqz__st_part_alloc(s));
    sqz__wr_u32(s->data, (uint32_t)no);
    sqz__wr_u32((uint8_t *)s->data + 4, (uint32_t)ni);
    return SQZ_OK;
}

/* P.weight_packed I32 [no, ni / 4] of 8-bit codes q (row-major int8): q + 128, four per word, low
 * byte first. */
static sqz_status packed8_part(sqz__st_part *p, int *n, const int8_t *q, int64_t no, int64_t ni) {
    sqz__st_part *w = sqz__st_part_new(p, n, "weight_packed", SQZ_DTYPE_I32, no, ni / 4);
    SQZ_TRY(sqz__st_part_alloc(w));
    for (int64_t i = 0; i < no * ni; i++) ((uint8_t *)w->data)[i] = (uint8_t)((uint8_t)q[i] ^ 0x80);
    return SQZ_OK;
}

static sqz_status int4_parts(const sqz_tensor *t, sqz__st_part *p, int *n) {
    const sqz_qparams *qp = t->qp;
    const int64_t no = qp->n_out, ni = qp->n_in, ng = qp->n_groups;
    if (qp->act_mode != SQZ_ACT_FLOAT)
        return CT_FAIL("tensor '%s': int4 weights with int8 activations have no compressed-tensors form sqz writes: "
                       "use --hf-format sqz", t->name);
    if (ni % 8) return CT_FAIL("tensor '%s': %lld input columns are not a multiple of 8 (pack-quantized int32 words)",
                               t->name, (long long)ni);
    sqz__st_part *w = sqz__st_part_new(p, n, "weight_packed", SQZ_DTYPE_I32, no, ni / 8);
    w->data = t->data; /* U4 bytes = the int32 words little-endian */
    w->nbytes = t->nbytes;
    sqz__st_part *s = sqz__st_part_new(p, n, "weight_scale", SQZ_DTYPE_F32, no, ng);
    SQZ_TRY(sqz__st_part_alloc(s));
    for (int64_t i = 0; i < no * ng; i++) put_f32((uint8_t *)s->data + 4 * i, qp->scales[i]);
    if (qp->zeros) {
        sqz__st_part *z = sqz__st_part_new(p, n, "weight_zero_point", SQZ_DTYPE_I32, (no + 7) / 8, ng);
        SQZ_TRY(sqz__st_part_alloc(z));
        uint8_t *d = z->data;
        for (int64_t r = 0; r < no; r++)
            for (int64_t g = 0; g < ng; g++) {
                uint8_t *word = d + 4 * ((r / 8) * ng + g);
                const uint32_t u = sqz__rd_u32(word) | (uint32_t)(qp->zeros[r * ng + g] & 15) << (4 * (r % 8));
                sqz__wr_u32(word, u);
            }
    }
    if (qp->g_idx) {
        sqz__st_part *gi = sqz__st_part_new(p, n, "weight_g_idx", SQZ_DTYPE_I32, ni, 0);
        SQZ_TRY(sqz__st_part_alloc(gi));
        for (int64_t c = 0; c < ni; c++) sqz__wr_u32((uint8_t *)gi->data + 4 * c, (uint32_t)qp->g_idx[c]);
    }
    return shape_part(p, n, no, ni);
}

static sqz_status int8_parts(const sqz__st_layout *L, const sqz_tensor *t, sqz__st_part *p, int *n) {
    const sqz_qparams *qp = t->qp;
    const int64_t no = qp->n_out, ni = qp->n_in;
    if (qp->act_mode == SQZ_ACT_FLOAT) { /* W8A16: pack-quantized, 8 bits */
        if (ni % 4) return CT_FAIL("tensor '%s': %lld input columns are not a multiple of 4 (pack-quantized int32 "
                                   "words)", t->name, (long long)ni);
        SQZ_TRY(packed8_part(p, n, t->data, no, ni));
    } else if (L->id == SQZ_HF_COMPRESSED_TENSORS_SP24 && sqz__sp24_fits(t->data, SQZ_DTYPE_I8, no, ni)) {
        SQZ_TRY(sqz__sp24_parts(t->name, t->data, SQZ_DTYPE_I8, no, ni, p, n)); /* W8A8 2:4: int8 values */
    } else {
        sqz__st_part *w = sqz__st_part_new(p, n, "weight", SQZ_DTYPE_I8, no, ni);
        w->data = t->data;
        w->nbytes = t->nbytes;
    }
    sqz__st_part *s = sqz__st_part_new(p, n, "weight_scale", SQZ_DTYPE_F32, no, 1);
    SQZ_TRY(sqz__st_part_alloc(s));
    for (int64_t r = 0; r < no; r++) put_f32((uint8_t *)s->data + 4 * r, qp->scales[r]);
    if (qp->act_mode == SQZ_ACT_STATIC_TENSOR) {
        sqz__st_part *a = sqz__st_part_new(p, n, "input_scale", SQZ_DTYPE_F32, 1, 0);
        SQZ_TRY(sqz__st_part_alloc(a));
        put_f32(a->data, qp->act_scale);
    }
    return qp->act_mode == SQZ_ACT_FLOAT ? shape_part(p, n, no, ni) : SQZ_OK;
}

/* 8-bit codes in groups (a GGUF Q8_0 or Q5_0 weight, st_blocks.c): pack-quantized 8 bits,
 * strategy group: P.weight_packed I32 [n, k / 4] (q + 128, four per word, low byte first),
 * P.weight_scale F32 [n, k / group], P.weight_shape. */
static sqz_status ct_i8g_parts(const sqz__st_layout *L, const sqz_tensor *t, const sqz__st_i8g *g, sqz__st_part *p,
                               int *n) {
    (void)L;
    *n = 0;
    const int64_t no = g->n_out, ni = g->n_in, ng = ni / g->group;
    if (ni % 4) return CT_FAIL("tensor '%s': %lld input columns are not a multiple of 4 (pack-quantized int32 words)",
                               t->name, (long long)ni);
    sqz_status st = packed8_part(p, n, g->q, no, ni);
    sqz__st_part *s = st == SQZ_OK ? sqz__st_part_new(p, n, "weight_scale", SQZ_DTYPE_F32, no, ng) : NULL;
    if (s) st = sqz__st_part_alloc(s);
    if (st == SQZ_OK) {
        for (int64_t i = 0; i < no * ng; i++) put_f32((uint8_t *)s->data + 4 * i, g->scales[i]);
        st = shape_part(p, n, no, ni);
    }
    if (st != SQZ_OK) sqz__st_parts_free(p, *n);
    return st;
}

/* FP8 per channel: P.weight F8_E4M3 [n, k] (sqz's bytes), P.weight_scale F32 [n, 1]; W8A8-FP8's
 * activations dynamic per token: no tensor; static: P.input_scale F32 [1]. */
static sqz_status fp8_parts(const sqz_tensor *t, sqz__st_part *p, int *n) {
    const sqz_qparams *qp = t->qp;
    sqz__st_part *w = sqz__st_part_new(p, n, "weight", SQZ_DTYPE_F8_E4M3, qp->n_out, qp->n_in);
    w->data = t->data;
    w->nbytes = t->nbytes;
    sqz__st_part *s = sqz__st_part_new(p, n, "weight_scale", SQZ_DTYPE_F32, qp->n_out, 1);
    SQZ_TRY(sqz__st_part_alloc(s));
    for (int64_t r = 0; r < qp->n_out; r++) put_f32((uint8_t *)s->data + 4 * r, qp->scales[r]);
    if (qp->act_mode == SQZ_ACT_STATIC_TENSOR) {
        sqz__st_part *a = sqz__st_part_new(p, n, "input_scale", SQZ_DTYPE_F32, 1, 0);
        SQZ_TRY(sqz__st_part_alloc(a));
        put_f32(a->data, qp->act_scale);
    }
    return SQZ_OK;
}

/* NVFP4: P.weight_packed U8 [n, k / 2] (sqz's U4 bytes: element 2i in the low nibble), P.weight_scale
 * F8_E4M3 [n, k / 16], P.weight_global_scale F32 [1]. */
static sqz_status nvfp4_parts(const sqz_tensor *t, sqz__st_part *p, int *n) {
    const sqz_qparams *qp = t->qp;
    sqz__st_part *w = sqz__st_part_new(p, n, "weight_packed", SQZ_DTYPE_U8, qp->n_out, qp->n_in / 2);
    w->data = t->data;
    w->nbytes = t->nbytes;
    sqz__st_part *s = sqz__st_part_new(p, n, "weight_scale", SQZ_DTYPE_F8_E4M3, qp->n_out, qp->n_groups);
    SQZ_TRY(sqz__st_part_alloc(s));
    for (int64_t i = 0; i < qp->n_out * qp->n_groups; i++) ((uint8_t *)s->data)[i] = sqz_fp32_to_fp8_e4m3(qp->scales[i]);
    sqz__st_part *g = sqz__st_part_new(p, n, "weight_global_scale", SQZ_DTYPE_F32, 1, 0);
    SQZ_TRY(sqz__st_part_alloc(g));
    put_f32(g->data, qp->global_scale);
    return SQZ_OK;
}

static sqz_status ct_parts(const sqz__st_layout *L, const sqz_tensor *t, sqz__st_part *p, int *n) {
    *n = 0;
    SQZ_TRY(sqz_qparams_check(t->qp, t->dtype, t->nbytes, t->name));
    if (t->qp->in_scale)
        return CT_FAIL("tensor '%s': an unfolded smoothing vector (input_smooth) has no place in compressed-tensors: "
                       "use --hf-format sqz", t->name);
    const sqz_qscheme sc = t->qp->scheme;
    sqz_status st = sc == SQZ_QSCHEME_U4_GROUP ? int4_parts(t, p, n)
                    : sc == SQZ_QSCHEME_F8_ROW ? fp8_parts(t, p, n)
                    : sc == SQZ_QSCHEME_NVFP4  ? nvfp4_parts(t, p, n)
                                               : int8_parts(L, t, p, n);
    if (st != SQZ_OK) sqz__st_parts_free(p, *n);
    return st;
}

/* ---- config.json ---------------------------------------------------------------------------- */

typedef struct ct_scheme { /* what one config group says */
    int bits, group;       /* group 0: per channel */
    bool sym, actorder;
    sqz_act_mode act;
    bool fp;               /* type "float" (FP8 E4M3), else "int" */
} ct_scheme;

static ct_scheme scheme_of(const sqz_qparams *qp) {
    const bool fp4 = qp->scheme == SQZ_QSCHEME_NVFP4;
    ct_scheme s = {qp->scheme == SQZ_QSCHEME_U4_GROUP || fp4 ? 4 : 8, 0, qp->zeros == NULL, qp->g_idx != NULL,
                   qp->act_mode, qp->scheme == SQZ_QSCHEME_F8_ROW || fp4};
    /* 8 bits with group_size < n_in: a GGUF Q8_0 / Q5_0 weight's descriptor (st_blocks.c) */
    if (qp->scheme == SQZ_QSCHEME_U4_GROUP || fp4 || qp->group_size < qp->n_in) s.group = qp->group_size;
    return s;
}

static bool same_scheme(ct_scheme a, ct_scheme b) {
    return a.bits == b.bits && a.group == b.group && a.sym == b.sym && a.actorder == b.actorder && a.act == b.act &&
           a.fp == b.fp;
}

/* FP8: what compressed-tensors 0.20 itself writes, "naive-quantized" weight-only and "float-quantized" with
 * FP8 activations (the two share one layout). */
static const char *format_of(ct_scheme s) {
    if (s.fp && s.bits == 4) return "nvfp4-pack-quantized";
    if (s.fp) return s.act == SQZ_ACT_FLOAT ? "naive-quantized" : "float-quantized";
    return s.act == SQZ_ACT_FLOAT ? "pack-quantized" : "int-quantized";
}

static cJSON *weights_json(ct_scheme s) {
    cJSON *w = cJSON_CreateObject();
    cJSON_AddNumberToObject(w, "num_bits", s.bits);
    cJSON_AddStringToObject(w, "type", s.fp ? "float" : "int");
    cJSON_AddBoolToObject(w, "symmetric", s.sym);
    const bool nvfp4 = s.fp && s.bits == 4; /* group scales under one global scale, stored as FP8 */
    cJSON_AddStringToObject(w, "strategy", nvfp4 ? "tensor_group" : s.group ? "group" : "channel");
    if (nvfp4) cJSON_AddStringToObject(w, "scale_dtype", "torch.float8_e4m3fn");
    if (s.group) cJSON_AddNumberToObject(w, "group_size", s.group);
    else cJSON_AddNullToObject(w, "group_size");
    if (s.actorder) cJSON_AddStringToObject(w, "actorder", "group");
    else cJSON_AddNullToObject(w, "actorder");
    cJSON_AddBoolToObject(w, "dynamic", false);
    cJSON_AddStringToObject(w, "observer", "minmax");
    return w;
}

static cJSON *inputs_json(ct_scheme s) {
    if (s.act == SQZ_ACT_FLOAT) return cJSON_CreateNull();
    cJSON *a = cJSON_CreateObject();
    cJSON_AddNumberToObject(a, "num_bits", 8);
    cJSON_AddStringToObject(a, "type", s.fp ? "float" : "int");
    cJSON_AddBoolToObject(a, "symmetric", true);
    cJSON_AddStringToObject(a, "strategy", s.act == SQZ_ACT_DYNAMIC_TOKEN ? "token" : "tensor");
    cJSON_AddBoolToObject(a, "dynamic", s.act == SQZ_ACT_DYNAMIC_TOKEN);
    if (s.act == SQZ_ACT_STATIC_TENSOR) cJSON_AddStringToObject(a, "observer", "minmax");
    return a;
}

/* The module name of a linear weight (its HF name less ".weight"). */
static bool module_name(const sqz_model *m, const sqz_tensor *t, char *buf, size_t cap) {
    if (!sqz__hf_name_make(m->hp.family, t->role, t->layer, t->param, buf, cap)) return false;
    const size_t len = strlen(buf);
    if (len < 7 || strcmp(buf + len - 7, ".weight") != 0) return false;
    buf[len - 7] = 0;
    return true;
}

#define CT_MAX_GROUPS 16

static cJSON *quant_config(const sqz_model *m) {
    ct_scheme sch[CT_MAX_GROUPS];
    int ns = 0;
    for (int64_t i = 0; i < m->n_tensors; i++) {
        if (!m->tensors[i].qp) continue;
        const ct_scheme s = scheme_of(m->tensors[i].qp);
        int k = 0;
        while (k < ns && !same_scheme(sch[k], s)) k++;
        if (k == ns && ns == CT_MAX_GROUPS) {
            CT_FAIL("config.json: more than %d distinct quantization schemes", CT_MAX_GROUPS);
            return NULL;
        }
        if (k == ns) sch[ns++] = s;
    }
    bool mixed = false;
    for (int k = 1; k < ns; k++) mixed |= strcmp(format_of(sch[k]), format_of(sch[0])) != 0;
    cJSON *qc = cJSON_CreateObject(), *groups = cJSON_AddObjectToObject(qc, "config_groups");
    cJSON *ignore = cJSON_CreateArray();
    char name[160];
    for (int k = 0; k < ns; k++) {
        char gname[24];
        snprintf(gname, sizeof gname, "group_%d", k);
        cJSON *g = cJSON_AddObjectToObject(groups, gname), *targets = cJSON_AddArrayToObject(g, "targets");
        for (int64_t i = 0; ns > 1 && i < m->n_tensors; i++) {
            const sqz_tensor *t = &m->tensors[i];
            if (t->qp && same_scheme(scheme_of(t->qp), sch[k]) && module_name(m, t, name, sizeof name))
                cJSON_AddItemToArray(targets, cJSON_CreateString(name));
        }
        if (ns == 1) cJSON_AddItemToArray(targets, cJSON_CreateString("Linear"));
        cJSON_AddItemToObject(g, "weights", weights_json(sch[k]));
        cJSON_AddItemToObject(g, "input_activations", inputs_json(sch[k]));
        cJSON_AddNullToObject(g, "output_activations");
        if (mixed) cJSON_AddStringToObject(g, "format", format_of(sch[k]));
    }
    bool head_listed = false;
    for (int64_t i = 0; i < m->n_tensors; i++) {
        const sqz_tensor *t = &m->tensors[i];
        if (t->qp || !sqz__st_is_linear(t) || !module_name(m, t, name, sizeof name)) continue;
        head_listed |= t->role == SQZ_ROLE_OUTPUT;
        cJSON_AddItemToArray(ignore, cJSON_CreateString(name));
    }
    /* a tied classifier is still a Linear module in transformers: it stays float */
    if (!head_listed && sqz_family_get(m->hp.family)->lm_head) cJSON_AddItemToArray(ignore, cJSON_CreateString("lm_head"));
    cJSON_AddStringToObject(qc, "format", mixed ? "mixed-precision" : ns ? format_of(sch[0]) : "dense");
    cJSON_AddItemToObject(qc, "ignore", ignore);
    cJSON_AddNullToObject(qc, "kv_cache_scheme");
    cJSON_AddStringToObject(qc, "quant_method", "compressed-tensors");
    cJSON_AddStringToObject(qc, "quantization_status", "compressed");
    return qc;
}

/* sparsity_config: the modules written in sparse-24-bitmask parts (sparse[i]), and the share of
 * zeros they give the linear weights (compressed-tensors' global_sparsity). */
static cJSON *sparsity_config(const sqz_model *m, const bool *sparse) {
    cJSON *sc = cJSON_CreateObject(), *targets = cJSON_CreateArray();
    double zeros = 0, all = 0;
    char name[160];
    for (int64_t i = 0; i < m->n_tensors; i++) {
        const sqz_tensor *t = &m->tensors[i];
        if (!sqz__st_is_linear(t)) continue;
        all += (double)sqz_tensor_nelements(t);
        if (!sparse[i] || !module_name(m, t, name, sizeof name)) continue;
        zeros += 0.5 * (double)sqz_tensor_nelements(t);
        cJSON_AddItemToArray(targets, cJSON_CreateString(name));
    }
    cJSON_AddStringToObject(sc, "format", "sparse-24-bitmask");
    cJSON_AddNumberToObject(sc, "global_sparsity", all > 0 ? zeros / all : 0);
    cJSON_AddItemToObject(sc, "ignore", cJSON_CreateArray());
    cJSON_AddBoolToObject(sc, "registry_requires_subclass", false);
    cJSON_AddStringToObject(sc, "sparsity_structure", "2:4");
    cJSON_AddItemToObject(sc, "targets", targets);
    return sc;
}

static char *ct_config(const sqz__st_layout *L, const sqz_model *m, const bool *sparse, char *cfg) {
    (void)L;
    cJSON *root = cJSON_Parse(cfg);
    free(cfg);
    bool any_sparse = false;
    for (int64_t i = 0; sparse && i < m->n_tensors; i++) any_sparse |= sparse[i];
    cJSON *qc = root ? quant_config(m) : NULL;
    if (qc && any_sparse) cJSON_AddItemToObject(qc, "sparsity_config", sparsity_config(m, sparse));
    if (!qc) {
        cJSON_Delete(root);
        if (!root) sqz__error(SQZ_ERR_NOMEM, __FILE__, __LINE__, "config.json: out of memory");
        return NULL;
    }
    cJSON_AddItemToObject(root, "quantization_config", qc);
    char *text = cJSON_Print(root);
    cJSON_Delete(root);
    char *out = text ? sqz__strdup(text) : NULL;
    cJSON_free(text);
    if (!out) sqz__error(SQZ_ERR_NOMEM, __FILE__, __LINE__, "config.json: out of memory");
    return out;
}

/* reading: st_ctensors_read.c */
bool sqz__ct_is_part(const char *name);
sqz_status sqz__ct_attach(sqz_model *m, const void *qc, const sqz__st_view *v, size_t n);

const sqz__st_layout sqz__st_layout_ctensors = {
    .id = SQZ_HF_COMPRESSED_TENSORS,
    .quant_method = "compressed-tensors",
    .parts = ct_parts,
    .config = ct_config,
    .i8g_parts = ct_i8g_parts,
    .is_part = sqz__ct_is_part,
    .attach = sqz__ct_attach,
};

/* --hf-format compressed-tensors-sparse24: a 2:4-sparse W8A8 weight's int8 values in
 * sparse-24-bitmask parts (int8_parts, st_sparse24.c), the rest as above. Float 2:4 weights stay
 * dense: transformers 5 ignores sparsity_config and would load a sparse-only file's weights as
 * random ones with a warning (a trap), and vLLM has not served sparse-only 2:4 since 0.7. */
const sqz__st_layout sqz__st_layout_ctensors_sp24 = {
    .id = SQZ_HF_COMPRESSED_TENSORS_SP24,
    .quant_method = "compressed-tensors",
    .parts = ct_parts,
    .config = ct_config,
    .i8g_parts = ct_i8g_parts,
    .is_part = sqz__ct_is_part,
    .attach = sqz__ct_attach,
};

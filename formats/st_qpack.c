/*
 * formats/st_qpack.c - sqz's quantized weights (sqz/qparams.h: I8 per row, U4 per group) in an HF
 * safetensors directory, and back. The layout (docs/quantization.md) for a linear layer whose
 * weight is P.weight:
 *   P.weight             I8  [n_out, n_in]       INT8 per output channel: the int8 values
 *                        I32 [n_out, n_in / 8]   INT4 per group: 8 codes per int32, element 8i + k
 *                                                in bits 4k..4k+3 (= sqz's U4 bytes, little-endian)
 *   P.weight_scale       F32 [n_out, 1]          INT8: w = q * scale
 *                        F16 [n_out, n_groups]   INT4: w = scale * (code - zero)
 *   P.weight_zero_point  I8  [n_out, ceil(n_groups / 2)]  INT4 asymmetric: zero points 0..15, two
 *                                                per byte (group 2j low nibble); absent: zero 8
 *   P.weight_g_idx       I32 [n_in]              group of every input column (GPTQ act-order)
 *   P.input_scale        F32 [1]                 W8A8: > 0 the static activation scale, 0 per-token
 *                                                dynamic scales; absent: weight-only
 *   P.input_smooth       F32 [n_in]              unfolded smoothing: y = (x / smooth) . W^T
 * An INT8 weight whose every row is 2:4 (and n_in a multiple of 32) is written compressed
 * (sqz/sparse.h, docs/sparsity.md): P.weight I8 [n_out, n_in / 2] holds the kept values and
 *   P.weight_sparse_meta I32 [n_out, n_in / 32]  the 2-bit indices, PTX's sparse-mma fields
 * and the reader puts the zeros back.
 * and config.json carries "quantization_config": {"quant_method": "sqz", "format_version": 1,
 * ...} (the descriptive fields are documented; the reader needs only quant_method).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "formats/formats_internal.h"
#include "sqz/qparams.h"
#include "sqz/sparse.h"

static const char *const PART_SUFFIX[] = {"weight_scale", "weight_zero_point", "weight_g_idx", "input_scale",
                                          "input_smooth", "weight_sparse_meta"};

static bool qpack_is_part(const char *name) {
    const char *dot = strrchr(name, '.');
    if (!dot) return false;
    for (size_t i = 0; i < sizeof PART_SUFFIX / sizeof PART_SUFFIX[0]; i++)
        if (strcmp(dot + 1, PART_SUFFIX[i]) == 0) return true;
    return false;
}

/* ---- writing ------------------------------------------------------------------------------ */

static void put_f32s(uint8_t *dst, const float *v, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &v[i], 4);
        sqz__wr_u32(dst + 4 * i, u);
    }
}

/* Every row of the int8 matrix (n, k) 2:4, k a multiple of 32 (the compressed layout's rule). */
static bool is_2_4(const int8_t *w, int64_t n, int64_t k) {
    if (k % 32 || n < 1) return false;
    for (int64_t i = 0; i < n * k; i += 4)
        if ((w[i] != 0) + (w[i + 1] != 0) + (w[i + 2] != 0) + (w[i + 3] != 0) > 2) return false;
    return true;
}

static sqz_status qpack_parts(const sqz__st_layout *L, const sqz_tensor *t, sqz__st_part *parts, int *n_out) {
    (void)L;
    const sqz_qparams *qp = t->qp;
    const int64_t no = qp->n_out, ni = qp->n_in, ng = qp->n_groups;
    SQZ_TRY(sqz_qparams_check(qp, t->dtype, t->nbytes, t->name));
    SQZ_RETURN_IF(qp->scheme == SQZ_QSCHEME_F8_ROW || qp->scheme == SQZ_QSCHEME_NVFP4, SQZ_ERR_UNSUPPORTED,
                  "tensor '%s': %s weights have no place in sqz's layout: use --hf-format compressed-tensors", t->name,
                  qp->scheme == SQZ_QSCHEME_NVFP4 ? "NVFP4" : "FP8");
    SQZ_RETURN_IF(qp->act_grid != SQZ_ACT_GRID_SYM127, SQZ_ERR_UNSUPPORTED, "tensor '%s': W8A8 on compressed-tensors' "
                  "activation grid ([-128, 127], dynamic absmax / 127.5) has no place in sqz's layout: use "
                  "--hf-format compressed-tensors", t->name);
    int n = 0;
    sqz_status st = SQZ_OK;
    sqz__st_part *w;
    if (qp->scheme == SQZ_QSCHEME_I8_ROW && is_2_4(t->data, no, ni)) {
        w = sqz__st_part_new(parts, &n, "weight", SQZ_DTYPE_I8, no, ni / 2);
        sqz__st_part *mp = sqz__st_part_new(parts, &n, "weight_sparse_meta", SQZ_DTYPE_I32, no, ni / 32);
        st = sqz__st_part_alloc(w);
        if (st == SQZ_OK) st = sqz__st_part_alloc(mp);
        if (st == SQZ_OK) st = sqz_sp24_pack_i8(t->data, no, ni, w->data, mp->data);
        for (int64_t i = 0; st == SQZ_OK && i < no * (ni / 32); i++) { /* little-endian words */
            uint32_t u;
            memcpy(&u, (uint8_t *)mp->data + 4 * i, 4);
            sqz__wr_u32((uint8_t *)mp->data + 4 * i, u);
        }
        if (st != SQZ_OK) {
            sqz__st_parts_free(parts, n);
            return st;
        }
    } else if (qp->scheme == SQZ_QSCHEME_I8_ROW) {
        w = sqz__st_part_new(parts, &n, "weight", SQZ_DTYPE_I8, no, ni);
        w->data = t->data;
        w->nbytes = t->nbytes;
    } else {
        SQZ_RETURN_IF(ni % 8 != 0, SQZ_ERR_UNSUPPORTED, "tensor '%s': %lld input columns are not a multiple of 8 (int4 "
                      "is stored as int32 words)", t->name, (long long)ni);
        w = sqz__st_part_new(parts, &n, "weight", SQZ_DTYPE_I32, no, ni / 8);
        w->data = t->data; /* U4 bytes = int32 words read little-endian */
        w->nbytes = t->nbytes;
    }
    sqz__st_part *s;
    if (qp->scheme == SQZ_QSCHEME_I8_ROW) {
        s = sqz__st_part_new(parts, &n, "weight_scale", SQZ_DTYPE_F32, no, 1);
        if ((st = sqz__st_part_alloc(s)) == SQZ_OK) put_f32s(s->data, qp->scales, no);
    } else {
        s = sqz__st_part_new(parts, &n, "weight_scale", SQZ_DTYPE_F16, no, ng);
        if ((st = sqz__st_part_alloc(s)) == SQZ_OK)
            for (int64_t i = 0; i < no * ng; i++) sqz__wr_u16((uint8_t *)s->data + 2 * i, sqz_fp32_to_fp16(qp->scales[i]));
        if (st == SQZ_OK && qp->zeros) {
            const int64_t nz = (ng + 1) / 2;
            sqz__st_part *z = sqz__st_part_new(parts, &n, "weight_zero_point", SQZ_DTYPE_I8, no, nz);
            if ((st = sqz__st_part_alloc(z)) == SQZ_OK) {
                uint8_t *d = z->data;
                memset(d, 0, (size_t)(no * nz));
                for (int64_t r = 0; r < no; r++)
                    for (int64_t g = 0; g < ng; g++)
                        d[r * nz + g / 2] |= (uint8_t)((qp->zeros[r * ng + g] & 0x0F) << (4 * (g % 2)));
            }
        }
        if (st == SQZ_OK && qp->g_idx) {
            sqz__st_part *gi = sqz__st_part_new(parts, &n, "weight_g_idx", SQZ_DTYPE_I32, ni, 0);
            if ((st = sqz__st_part_alloc(gi)) == SQZ_OK)
                for (int64_t c = 0; c < ni; c++) sqz__wr_u32((uint8_t *)gi->data + 4 * c, (uint32_t)qp->g_idx[c]);
        }
    }
    if (st == SQZ_OK && qp->act_mode != SQZ_ACT_FLOAT) {
        sqz__st_part *a = sqz__st_part_new(parts, &n, "input_scale", SQZ_DTYPE_F32, 1, 0);
        const float v = qp->act_mode == SQZ_ACT_STATIC_TENSOR ? qp->act_scale : 0.0f;
        if ((st = sqz__st_part_alloc(a)) == SQZ_OK) put_f32s(a->data, &v, 1);
    }
    if (st == SQZ_OK && qp->in_scale) {
        sqz__st_part *a = sqz__st_part_new(parts, &n, "input_smooth", SQZ_DTYPE_F32, ni, 0);
        if ((st = sqz__st_part_alloc(a)) == SQZ_OK) put_f32s(a->data, qp->in_scale, ni);
    }
    if (st != SQZ_OK) {
        sqz__st_parts_free(parts, n);
        return st;
    }
    *n_out = n;
    return SQZ_OK;
}

/* "model_type": "llama" becomes "sqz-llama": transformers and vLLM refuse the directory loudly
 * ("does not recognize this architecture") instead of loading the integer codes as weights
 * (sqz's hf_config.c reads the prefix away). cfg is freed; NULL on failure. */
static char *mark_model_type(char *cfg) {
    char *k = strstr(cfg, "\"model_type\"");
    char *v = k ? strchr(k + strlen("\"model_type\""), '"') : NULL;
    if (!v) {
        free(cfg);
        sqz__error(SQZ_ERR_FORMAT, __FILE__, __LINE__, "config.json: no model_type to mark");
        return NULL;
    }
    const size_t head = (size_t)(v + 1 - cfg), len = strlen(cfg);
    char *out = sqz__malloc(len + 5);
    if (out) {
        memcpy(out, cfg, head);
        memcpy(out + head, "sqz-", 4);
        memcpy(out + head + 4, cfg + head, len - head + 1);
    }
    free(cfg);
    return out;
}

static char *qpack_config(const sqz__st_layout *L, const sqz_model *m, const bool *sparse, char *cfg) {
    (void)sparse;
    (void)L;
    int64_t n_i8 = 0, n_u4 = 0, n_static = 0, n_dyn = 0, n_smooth = 0, n_gidx = 0, n_asym = 0;
    int32_t group = 0;
    bool mixed_group = false;
    for (int64_t i = 0; i < m->n_tensors; i++) {
        const sqz_qparams *qp = m->tensors[i].qp;
        if (!qp) continue;
        if (qp->scheme == SQZ_QSCHEME_I8_ROW) n_i8++;
        else {
            n_u4++;
            if (group && group != qp->group_size) mixed_group = true;
            group = qp->group_size;
            n_gidx += qp->g_idx != NULL;
            n_asym += qp->zeros != NULL;
        }
        n_static += qp->act_mode == SQZ_ACT_STATIC_TENSOR;
        n_dyn += qp->act_mode == SQZ_ACT_DYNAMIC_TOKEN;
        n_smooth += qp->in_scale != NULL;
    }
    if (!cfg || n_i8 + n_u4 == 0) return cfg;
    if (!(cfg = mark_model_type(cfg))) return NULL;
    /* inserted before the closing brace of the object, in the writer's two-space style */
    char *close = strrchr(cfg, '}');
    char q[768];
    int k = snprintf(q, sizeof q,
                     ",\n  \"quantization_config\": {\n    \"quant_method\": \"sqz\",\n    \"format_version\": 1,\n"
                     "    \"bits\": %d,\n    \"weights\": \"%s\",\n",
                     n_u4 ? 4 : 8, n_u4 && n_i8 ? "mixed" : n_u4 ? "int4_per_group" : "int8_per_channel");
    if (n_u4 && !mixed_group) k += snprintf(q + k, sizeof q - (size_t)k, "    \"group_size\": %d,\n", (int)group);
    if (n_u4)
        k += snprintf(q + k, sizeof q - (size_t)k, "    \"sym\": %s,\n    \"desc_act\": %s,\n",
                      n_asym ? "false" : "true", n_gidx ? "true" : "false");
    snprintf(q + k, sizeof q - (size_t)k,
             "    \"activations\": \"%s\",\n    \"input_smooth\": %s,\n"
             "    \"layout\": \"sqz docs/quantization.md\"\n  }\n}\n",
             n_static ? "int8_static_per_tensor" : n_dyn ? "int8_dynamic_per_token" : "float",
             n_smooth ? "true" : "false");
    if (!close) {
        free(cfg);
        sqz__error(SQZ_ERR_FORMAT, __FILE__, __LINE__, "config.json: not a JSON object");
        return NULL;
    }
    /* drop trailing whitespace before the brace */
    char *e = close;
    while (e > cfg && (e[-1] == '\n' || e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r')) e--;
    const size_t head = (size_t)(e - cfg);
    char *out = sqz__malloc(head + strlen(q) + 1);
    if (out) {
        memcpy(out, cfg, head);
        strcpy(out + head, q);
    }
    free(cfg);
    return out;
}

/* ---- reading ------------------------------------------------------------------------------ */

#define QFAIL(...) sqz__error(SQZ_ERR_FORMAT, __FILE__, __LINE__, __VA_ARGS__)

/* A 2:4-compressed INT8 weight (I8 [n_out, n_in / 2] + meta I32 [n_out, n_in / 32]) back to
 * I8 [n_out, n_in] with its zeros, owned by the model. */
static sqz_status unpack_2_4(sqz_tensor *t, const char *prefix, const sqz__st_view *mt) {
    const char *file = mt->file;
    const int64_t no = t->shape[0], half = t->shape[1];
    if (t->dtype != SQZ_DTYPE_I8 || half > INT64_MAX / 2 || (2 * half) % 32 || !sqz__st_view_is(mt, SQZ_DTYPE_I32, no, 2 * half / 32))
        return QFAIL("%s: tensor '%s.weight_sparse_meta': a 2:4 weight is I8 [n_out, n_in / 2] with I32 meta "
                     "[n_out, n_in / 32], n_in a multiple of 32", file, prefix);
    const int64_t ni = 2 * half, nw = no * (ni / 32);
    uint32_t *meta = sqz__malloc((size_t)(nw ? nw : 1) * sizeof(uint32_t));
    int8_t *w = sqz__malloc((size_t)(no * ni > 0 ? no * ni : 1));
    sqz_status st = meta && w ? SQZ_OK : SQZ_ERR_NOMEM;
    for (int64_t i = 0; st == SQZ_OK && i < nw; i++) meta[i] = sqz__rd_u32(mt->data + 4 * i);
    if (st == SQZ_OK && sqz_sp24_unpack_i8(t->data, meta, no, ni, w) != SQZ_OK) {
        char why[160];
        snprintf(why, sizeof why, "%s", sqz_last_error());
        st = QFAIL("%s: tensor '%s.weight_sparse_meta': %s", file, prefix, why);
    }
    free(meta);
    if (st != SQZ_OK) {
        free(w);
        return st;
    }
    if (t->owned) free(t->data);
    t->data = w;
    t->nbytes = (size_t)(no * ni);
    t->shape[1] = ni;
    t->owned = true;
    return SQZ_OK;
}

/* Attaches the qparams described by the side tensors of t (prefix P of P.weight). */
static sqz_status attach_one(sqz_model *m, sqz_tensor *t, const char *prefix, const sqz__st_view *v, size_t n) {
    const sqz__st_view *sc = sqz__st_view_find(v, n, prefix, "weight_scale");
    const sqz__st_view *zp = sqz__st_view_find(v, n, prefix, "weight_zero_point");
    const sqz__st_view *gi = sqz__st_view_find(v, n, prefix, "weight_g_idx");
    const sqz__st_view *is = sqz__st_view_find(v, n, prefix, "input_scale");
    const sqz__st_view *sm = sqz__st_view_find(v, n, prefix, "input_smooth");
    if (!sc) {
        if (zp || gi || is || sm) return QFAIL("%s: tensor '%s': side tensors without %s.weight_scale",
                                               (zp ? zp : gi ? gi : is ? is : sm)->file, t->name, prefix);
        return SQZ_OK;
    }
    const char *file = sc->file;
    if (t->ndim != 2) return QFAIL("%s: tensor '%s': a quantized weight must be 2-D", file, t->name);
    const sqz__st_view *mt = sqz__st_view_find(v, n, prefix, "weight_sparse_meta");
    if (mt) SQZ_TRY(unpack_2_4(t, prefix, mt));
    sqz_qparams qp;
    memset(&qp, 0, sizeof qp);
    qp.n_out = t->shape[0];
    if (t->dtype == SQZ_DTYPE_I8) {
        qp.scheme = SQZ_QSCHEME_I8_ROW;
        qp.n_in = t->shape[1];
        qp.group_size = (int32_t)qp.n_in;
        qp.n_groups = 1;
        if (!sqz__st_view_is(sc, SQZ_DTYPE_F32, qp.n_out, 1))
            return QFAIL("%s: tensor '%s.weight_scale': INT8 scales must be F32 [%lld, 1]", file, prefix,
                         (long long)qp.n_out);
    } else if (t->dtype == SQZ_DTYPE_I32) {
        qp.scheme = SQZ_QSCHEME_U4_GROUP;
        if (t->shape[1] > (INT64_MAX / 8)) return QFAIL("%s: tensor '%s': too wide", file, t->name);
        qp.n_in = t->shape[1] * 8;
        if (sc->dtype != SQZ_DTYPE_F16 || sc->ndim != 2 || sc->shape[0] != qp.n_out || sc->shape[1] < 1 ||
            qp.n_in % sc->shape[1] != 0)
            return QFAIL("%s: tensor '%s.weight_scale': INT4 scales must be F16 [%lld, n_groups] with n_groups "
                         "dividing %lld", file, prefix, (long long)qp.n_out, (long long)qp.n_in);
        qp.n_groups = sc->shape[1];
        qp.group_size = (int32_t)(qp.n_in / qp.n_groups);
        if (zp && !sqz__st_view_is(zp, SQZ_DTYPE_I8, qp.n_out, (qp.n_groups + 1) / 2))
            return QFAIL("%s: tensor '%s.weight_zero_point': must be I8 [%lld, %lld]", file, prefix,
                         (long long)qp.n_out, (long long)(qp.n_groups + 1) / 2);
        if (gi && !sqz__st_view_is(gi, SQZ_DTYPE_I32, qp.n_in, 1))
            return QFAIL("%s: tensor '%s.weight_g_idx': must be I32 [%lld]", file, prefix, (long long)qp.n_in);
    } else {
        return QFAIL("%s: tensor '%s': quantized weights are I8 or I32, not %s", file, t->name,
                     sqz_dtype_name(t->dtype));
    }
    if (qp.scheme == SQZ_QSCHEME_I8_ROW && (zp || gi))
        return QFAIL("%s: tensor '%s': INT8 weights have no zero points or groups", file, t->name);
    if (is && !sqz__st_view_is(is, SQZ_DTYPE_F32, 1, 1))
        return QFAIL("%s: tensor '%s.input_scale': must be F32 [1]", file, prefix);
    if (sm && !sqz__st_view_is(sm, SQZ_DTYPE_F32, qp.n_in, 1))
        return QFAIL("%s: tensor '%s.input_smooth': must be F32 [%lld]", file, prefix, (long long)qp.n_in);
    /* one heap block: qparams, scales, in_scale, g_idx, zeros */
    const size_t ns = (size_t)qp.n_out * (size_t)qp.n_groups, ni = (size_t)qp.n_in;
    const size_t off_s = (sizeof(sqz_qparams) + 15) & ~(size_t)15;
    const size_t off_i = off_s + ns * sizeof(float);
    const size_t off_g = off_i + (sm ? ni * sizeof(float) : 0);
    const size_t off_z = off_g + (gi ? ni * sizeof(int32_t) : 0);
    const size_t total = off_z + (zp ? ns : 0);
    uint8_t *b = sqz__malloc(total);
    if (!b) return SQZ_ERR_NOMEM;
    float *scales = (float *)(void *)(b + off_s);
    for (size_t i = 0; i < ns; i++)
        scales[i] = qp.scheme == SQZ_QSCHEME_I8_ROW ? sqz__rd_f32(sc->data + 4 * i)
                                                    : sqz_fp16_to_fp32(sqz__rd_u16(sc->data + 2 * i));
    qp.scales = scales;
    if (sm) {
        float *s = (float *)(void *)(b + off_i);
        for (size_t i = 0; i < ni; i++) s[i] = sqz__rd_f32(sm->data + 4 * i);
        qp.in_scale = s;
    }
    if (gi) {
        int32_t *g = (int32_t *)(void *)(b + off_g);
        for (size_t i = 0; i < ni; i++) g[i] = (int32_t)sqz__rd_u32(gi->data + 4 * i);
        qp.g_idx = g;
    }
    if (zp) {
        uint8_t *z = b + off_z;
        const size_t nz = (size_t)(qp.n_groups + 1) / 2;
        for (size_t r = 0; r < (size_t)qp.n_out; r++)
            for (size_t g = 0; g < (size_t)qp.n_groups; g++) z[r * (size_t)qp.n_groups + g] = (zp->data[r * nz + g / 2] >> (4 * (g % 2))) & 0x0F;
        qp.zeros = z;
    }
    if (is) {
        const float a = sqz__rd_f32(is->data);
        qp.act_mode = a > 0 ? SQZ_ACT_STATIC_TENSOR : SQZ_ACT_DYNAMIC_TOKEN;
        qp.act_scale = a > 0 ? a : 0.0f;
        if (!(a >= 0) || !isfinite(a)) {
            free(b);
            return QFAIL("%s: tensor '%s.input_scale' = %g is not a scale", file, prefix, (double)a);
        }
    }
    for (size_t i = 0; sm && i < ni; i++) {
        const float v = qp.in_scale[i];
        if (!(v > 0) || !isfinite(v)) {
            free(b);
            return QFAIL("%s: tensor '%s.input_smooth'[%zu] = %g is not positive", file, prefix, i, (double)v);
        }
    }
    const sqz_dtype dt = qp.scheme == SQZ_QSCHEME_I8_ROW ? SQZ_DTYPE_I8 : SQZ_DTYPE_U4;
    sqz_status st = sqz_qparams_check(&qp, dt, t->nbytes, t->name);
    if (st != SQZ_OK) {
        free(b);
        sqz__error_prefix("%s", file);
        return SQZ_ERR_FORMAT;
    }
    memcpy(b, &qp, sizeof qp);
    SQZ_TRY(sqz_model_keep(m, b)); /* frees b on failure */
    t->dtype = dt;
    t->shape[1] = qp.n_in;
    t->qp = (const sqz_qparams *)(void *)b;
    return SQZ_OK;
}

static sqz_status qpack_attach(sqz_model *m, const void *qc, const sqz__st_view *v, size_t n) {
    (void)qc;
    for (int64_t i = 0; i < m->n_tensors; i++) {
        sqz_tensor *t = &m->tensors[i];
        const size_t len = strlen(t->name);
        if (t->param != SQZ_PARAM_WEIGHT || len < 8 || strcmp(t->name + len - 7, ".weight") != 0) continue;
        char prefix[256];
        if (len - 7 >= sizeof prefix) continue;
        memcpy(prefix, t->name, len - 7);
        prefix[len - 7] = 0;
        SQZ_TRY(attach_one(m, t, prefix, v, n));
    }
    /* every side tensor must belong to a weight */
    for (size_t i = 0; i < n; i++) {
        if (!qpack_is_part(v[i].name)) continue;
        char want[300];
        const char *dot = strrchr(v[i].name, '.');
        snprintf(want, sizeof want, "%.*s.weight", (int)(dot - v[i].name), v[i].name);
        SQZ_RETURN_IF(sqz_model_find(m, want) < 0, SQZ_ERR_FORMAT, "%s: tensor '%s': no weight '%s' for it",
                      v[i].file, v[i].name, want);
    }
    return SQZ_OK;
}

const sqz__st_layout sqz__st_layout_sqz = {
    .id = SQZ_HF_SQZ,
    .quant_method = "sqz",
    .parts = qpack_parts,
    .config = qpack_config,
    .is_part = qpack_is_part,
    .attach = qpack_attach,
};

/*
 * formats/st_gptq.c - sqz's quantized weights as GPTQ checkpoints (AutoGPTQ / GPTQModel; vLLM's
 * GPTQ and Marlin kernels, transformers through gptqmodel), written and read. For a linear
 * layer P of shape (n, k), b bits (4, or 8 for sqz's per-channel INT8 and for a GGUF Q8_0 / Q5_0
 * weight in groups of 32, read back as Q8_0), p = 32 / b values per int32, g groups:
 *   P.qweight  I32 [k / p, n]  packed along the INPUT: word (i, j) holds the codes of column j
 *                              (output) at inputs p*i .. p*i + p - 1, input p*i + t in bits b*t..
 *   P.qzeros   I32 [g, n / p]  zero points packed along the OUTPUT the same way; checkpoint_format
 *                              "gptq" (v1) stores zero - 1, "gptq_v2" the zero point itself
 *   P.scales   F16 [g, n]      w[j][c] = scales[g_idx[c]][j] * (code - zero[g_idx[c]][j])
 *   P.g_idx    I32 [k]         the group of every input (c / group_size without act-order)
 * Codes are unsigned: sqz's U4 codes as they are; INT8's q + 128 with zero point 128.
 * Exact or refused: v1 cannot hold a zero point 0 (it would read back as 1 - 1 + ... = 16), an
 * INT8 scale that is not an fp16 value, W8A8 activations, unfolded smoothing, a float linear
 * layer inside the blocks (GPTQ configs have no per-layer exclusion sqz writes), mixed schemes.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "core/blocks.h"
#include "formats/formats_internal.h"
#include "sqz/qparams.h"

#define GQ_FAIL(...) sqz__error(SQZ_ERR_UNSUPPORTED, __FILE__, __LINE__, __VA_ARGS__)
#define GQ_BAD(...) sqz__error(SQZ_ERR_FORMAT, __FILE__, __LINE__, __VA_ARGS__)

/* The code of element (r, c) of weight t: U4 codes as stored, INT8 q + 128. */
static uint32_t code_at(const sqz_tensor *t, int64_t r, int64_t c) {
    const uint8_t *d = t->data;
    if (t->qp->scheme == SQZ_QSCHEME_I8_ROW) return (uint8_t)(d[r * t->qp->n_in + c] ^ 0x80);
    const uint8_t byte = d[r * (t->qp->n_in / 2) + c / 2];
    return c % 2 ? byte >> 4 : byte & 15;
}

static uint32_t zero_at(const sqz_qparams *qp, int64_t r, int64_t g) {
    if (qp->scheme == SQZ_QSCHEME_I8_ROW) return 128;
    return qp->zeros ? qp->zeros[r * qp->n_groups + g] : 8;
}

static sqz_status gptq_check(const sqz__st_layout *L, const sqz_tensor *t) {
    const sqz_qparams *qp = t->qp;
    SQZ_RETURN_IF(qp->scheme == SQZ_QSCHEME_F8_ROW || qp->scheme == SQZ_QSCHEME_NVFP4, SQZ_ERR_UNSUPPORTED,
                  "tensor '%s': %s weights have no GPTQ form (its codes are integers): use --hf-format compressed-tensors",
                  t->name, qp->scheme == SQZ_QSCHEME_NVFP4 ? "NVFP4" : "FP8");
    const int bits = qp->scheme == SQZ_QSCHEME_U4_GROUP ? 4 : 8, p = 32 / bits;
    SQZ_TRY(sqz_qparams_check(qp, t->dtype, t->nbytes, t->name));
    if (qp->in_scale) return GQ_FAIL("tensor '%s': an unfolded smoothing vector has no place in GPTQ", t->name);
    if (qp->act_mode != SQZ_ACT_FLOAT)
        return GQ_FAIL("tensor '%s': W8A8 (quantized activations) has no GPTQ form: use --hf-format "
                       "compressed-tensors", t->name);
    if (qp->n_in % p || qp->n_out % p)
        return GQ_FAIL("tensor '%s': shape (%lld, %lld) is not a multiple of %d on both sides (GPTQ packs inputs "
                       "and zero points in int32)", t->name, (long long)qp->n_out, (long long)qp->n_in, p);
    for (int64_t i = 0; i < qp->n_out * qp->n_groups; i++) {
        if (sqz_fp16_to_fp32(sqz_fp32_to_fp16(qp->scales[i])) != qp->scales[i])
            return GQ_FAIL("tensor '%s': scale %g is not an fp16 value (GPTQ stores fp16 scales): use --hf-format "
                           "compressed-tensors", t->name, (double)qp->scales[i]);
        if (L->id == SQZ_HF_GPTQ && qp->zeros && qp->zeros[i] == 0)
            return GQ_FAIL("tensor '%s': zero point 0 at row %lld: GPTQ v1 stores zero - 1 and cannot hold it: use "
                           "--hf-format gptq-v2 or compressed-tensors", t->name, (long long)(i / qp->n_groups));
    }
    return SQZ_OK;
}

/* parts[0..3] = qweight I32 [ni/p, no], qzeros I32 [ng, no/p], scales F16 [ng, no], g_idx I32 [ni],
 * allocated (p values per word); freed again on failure. */
static sqz_status gptq_new_parts(sqz__st_part *parts, int *n, int64_t no, int64_t ni, int64_t ng, int p) {
    sqz__st_part_new(parts, n, "qweight", SQZ_DTYPE_I32, ni / p, no);
    sqz__st_part_new(parts, n, "qzeros", SQZ_DTYPE_I32, ng, no / p);
    sqz__st_part_new(parts, n, "scales", SQZ_DTYPE_F16, ng, no);
    sqz__st_part_new(parts, n, "g_idx", SQZ_DTYPE_I32, ni, 0);
    sqz_status st = SQZ_OK;
    for (int k = 0; k < *n && st == SQZ_OK; k++) st = sqz__st_part_alloc(&parts[k]);
    if (st != SQZ_OK) sqz__st_parts_free(parts, *n);
    return st;
}

static sqz_status gptq_parts(const sqz__st_layout *L, const sqz_tensor *t, sqz__st_part *parts, int *n) {
    *n = 0;
    SQZ_TRY(gptq_check(L, t));
    const sqz_qparams *qp = t->qp;
    const int bits = qp->scheme == SQZ_QSCHEME_U4_GROUP ? 4 : 8, p = 32 / bits;
    const int64_t no = qp->n_out, ni = qp->n_in, ng = qp->n_groups;
    const uint32_t zoff = L->id == SQZ_HF_GPTQ ? 1 : 0, mask = (1u << bits) - 1;
    SQZ_TRY(gptq_new_parts(parts, n, no, ni, ng, p));
    sqz__st_part *w = &parts[0], *z = &parts[1], *s = &parts[2], *gi = &parts[3];
    for (int64_t i = 0; i < ni / p; i++)
        for (int64_t j = 0; j < no; j++) {
            uint32_t word = 0;
            for (int b = 0; b < p; b++) word |= code_at(t, j, i * p + b) << (bits * b);
            sqz__wr_u32((uint8_t *)w->data + 4 * (i * no + j), word);
        }
    for (int64_t g = 0; g < ng; g++) {
        for (int64_t j = 0; j < no / p; j++) {
            uint32_t word = 0;
            for (int b = 0; b < p; b++) word |= ((zero_at(qp, j * p + b, g) - zoff) & mask) << (bits * b);
            sqz__wr_u32((uint8_t *)z->data + 4 * (g * (no / p) + j), word);
        }
        for (int64_t j = 0; j < no; j++)
            sqz__wr_u16((uint8_t *)s->data + 2 * (g * no + j), sqz_fp32_to_fp16(qp->scales[j * ng + g]));
    }
    for (int64_t c = 0; c < ni; c++)
        sqz__wr_u32((uint8_t *)gi->data + 4 * c, (uint32_t)(qp->g_idx ? qp->g_idx[c] : c / qp->group_size));
    return SQZ_OK;
}

/* 8-bit codes in groups (a GGUF Q8_0 or Q5_0 weight, st_blocks.c): codes q + 128 with zero point
 * 128 (v1 stores 127), the blocks' fp16 scales as they are (exact), g_idx = column / group. */
static sqz_status gptq_i8g_parts(const sqz__st_layout *L, const sqz_tensor *t, const sqz__st_i8g *g,
                                 sqz__st_part *parts, int *n) {
    *n = 0;
    const int64_t no = g->n_out, ni = g->n_in, ng = ni / g->group;
    if (ni % 4 || no % 4)
        return GQ_FAIL("tensor '%s': shape (%lld, %lld) is not a multiple of 4 on both sides (GPTQ packs inputs and "
                       "zero points in int32)", t->name, (long long)no, (long long)ni);
    const uint32_t zero = L->id == SQZ_HF_GPTQ ? 127 : 128;
    SQZ_TRY(gptq_new_parts(parts, n, no, ni, ng, 4));
    sqz__st_part *w = &parts[0], *z = &parts[1], *s = &parts[2], *gi = &parts[3];
    for (int64_t i = 0; i < ni / 4; i++)
        for (int64_t j = 0; j < no; j++) {
            uint32_t word = 0;
            for (int b = 0; b < 4; b++) word |= (uint32_t)((uint8_t)g->q[j * ni + 4 * i + b] ^ 0x80) << (8 * b);
            sqz__wr_u32((uint8_t *)w->data + 4 * (i * no + j), word);
        }
    for (int64_t k = 0; k < ng * (no / 4); k++) sqz__wr_u32((uint8_t *)z->data + 4 * k, zero * 0x01010101u);
    for (int64_t k = 0; k < ng; k++)
        for (int64_t j = 0; j < no; j++)
            sqz__wr_u16((uint8_t *)s->data + 2 * (k * no + j), sqz_fp32_to_fp16(g->scales[j * ng + k]));
    for (int64_t c = 0; c < ni; c++) sqz__wr_u32((uint8_t *)gi->data + 4 * c, (uint32_t)(c / g->group));
    return SQZ_OK;
}

/* config.json: one scheme for every linear layer of the blocks (GPTQ has no per-layer exclusion). */
static char *gptq_config(const sqz__st_layout *L, const sqz_model *m, const bool *sparse, char *cfg) {
    (void)sparse;
    const sqz_qparams *first = NULL;
    bool desc = false, asym = false;
    for (int64_t i = 0; i < m->n_tensors; i++) {
        const sqz_tensor *t = &m->tensors[i];
        if (!sqz__st_is_linear(t) || t->role == SQZ_ROLE_OUTPUT) continue;
        const sqz_qparams *qp = t->qp;
        const char *why = !qp ? "is float" : first && (qp->scheme != first->scheme || qp->group_size != first->group_size)
                                                 ? "differs in bits or group size from the other layers" : NULL;
        if (why) {
            free(cfg);
            GQ_FAIL("tensor '%s' %s: a GPTQ checkpoint holds one scheme for every linear layer of the blocks: use "
                    "--hf-format compressed-tensors", t->name, why);
            return NULL;
        }
        first = first ? first : qp;
        desc |= qp->g_idx != NULL;
        asym |= qp->zeros != NULL;
    }
    cJSON *root = cJSON_Parse(cfg);
    free(cfg);
    if (!root || !first) {
        cJSON_Delete(root);
        sqz__error(SQZ_ERR_UNSUPPORTED, __FILE__, __LINE__, "config.json: no quantized linear layer for GPTQ");
        return NULL;
    }
    const bool i8 = first->scheme == SQZ_QSCHEME_I8_ROW;
    cJSON *q = cJSON_AddObjectToObject(root, "quantization_config");
    cJSON_AddStringToObject(q, "quant_method", "gptq");
    cJSON_AddNumberToObject(q, "bits", i8 ? 8 : 4);
    /* 8 bits in groups: a GGUF Q8_0 / Q5_0 weight's descriptor (st_blocks.c) */
    cJSON_AddNumberToObject(q, "group_size", i8 && first->group_size == first->n_in ? -1 : first->group_size);
    cJSON_AddBoolToObject(q, "desc_act", desc);
    cJSON_AddBoolToObject(q, "sym", !asym);
    cJSON_AddBoolToObject(q, "static_groups", false);
    cJSON_AddBoolToObject(q, "true_sequential", true);
    cJSON_AddBoolToObject(q, "lm_head", false);
    cJSON_AddNumberToObject(q, "damp_percent", 0.01);
    cJSON_AddStringToObject(q, "checkpoint_format", L->id == SQZ_HF_GPTQ ? "gptq" : "gptq_v2");
    char *text = cJSON_Print(root);
    cJSON_Delete(root);
    char *out = text ? sqz__strdup(text) : NULL;
    cJSON_free(text);
    if (!out) sqz__error(SQZ_ERR_NOMEM, __FILE__, __LINE__, "config.json: out of memory");
    return out;
}

/* ---- reading --------------------------------------------------------------------------------- */

static bool gptq_is_part(const char *name) {
    const char *dot = strrchr(name, '.');
    return dot && (!strcmp(dot, ".qweight") || !strcmp(dot, ".qzeros") || !strcmp(dot, ".scales") ||
                   !strcmp(dot, ".g_idx"));
}

typedef struct gq_cfg {
    int bits;
    bool v2;
} gq_cfg;

/* Unpacks P.qweight & co. into weight t's data and the qparams block b (see make_weight). */
static sqz_status unpack_weight(const gq_cfg *c, const sqz__st_view *w, const sqz__st_view *z, const sqz__st_view *s,
                                const sqz__st_view *gi, sqz_qparams *qp, uint8_t *data, float *scales,
                                uint8_t *zeros, int32_t *g_idx) {
    const int bits = c->bits, p = 32 / bits;
    const int64_t no = qp->n_out, ni = qp->n_in, ng = qp->n_groups;
    const uint32_t mask = (1u << bits) - 1;
    for (int64_t i = 0; i < ni / p; i++)
        for (int64_t j = 0; j < no; j++) {
            const uint32_t word = sqz__rd_u32(w->data + 4 * (i * no + j));
            for (int b = 0; b < p; b++) {
                const uint32_t code = (word >> (bits * b)) & mask;
                const int64_t col = i * p + b;
                if (bits == 8) data[j * ni + col] = (uint8_t)(code ^ 0x80); /* q = code - 128 */
                else data[j * (ni / 2) + col / 2] |= (uint8_t)(code << (4 * (col % 2)));
            }
        }
    bool sym = true;
    for (int64_t g = 0; g < ng; g++)
        for (int64_t j = 0; j < no; j++) {
            const uint32_t word = sqz__rd_u32(z->data + 4 * (g * (no / p) + j / p));
            const uint32_t zero = ((word >> (bits * (j % p))) & mask) + (c->v2 ? 0 : 1);
            if (zero > mask || (bits == 8 && zero != 128))
                return GQ_BAD("%s: tensor '%s': zero point %u of output %lld: sqz holds %s", z->file, z->name, zero,
                              (long long)j, bits == 8 ? "8-bit weights with zero point 128 only" : "0..15");
            zeros[j * ng + g] = (uint8_t)zero;
            sym &= zero == 8;
            scales[j * ng + g] = sqz__st_view_f32(s, (size_t)(g * no + j));
        }
    if (sym || bits == 8) qp->zeros = NULL;
    bool natural = true;
    for (int64_t col = 0; gi && col < ni; col++) {
        g_idx[col] = (int32_t)sqz__rd_u32(gi->data + 4 * col);
        natural &= g_idx[col] == col / (ni / ng);
    }
    if (!gi || natural) qp->g_idx = NULL;
    return SQZ_OK;
}

/* t as a GGUF Q8_0 tensor from 8-bit codes q ((no, ni) int8) and fp16-valued scales ((no, ni / 32)). */
static sqz_status q8_0_weight(sqz_tensor *t, const uint8_t *q, const float *scales, int64_t no, int64_t ni) {
    const int64_t nb = no * ni / 32;
    sqz_block_q8_0 *blk = sqz__malloc((size_t)nb * sizeof *blk);
    if (!blk) return SQZ_ERR_NOMEM;
    for (int64_t i = 0; i < nb; i++) {
        blk[i].d = sqz_fp32_to_fp16(scales[i]);
        memcpy(blk[i].qs, q + 32 * i, 32);
    }
    t->dtype = SQZ_DTYPE_Q8_0;
    t->data = blk;
    t->nbytes = (size_t)nb * sizeof *blk;
    t->owned = true;
    return SQZ_OK;
}

static sqz_status make_weight(sqz_model *m, const gq_cfg *c, const sqz__st_view *w, const sqz__st_view *v, size_t n) {
    char prefix[256], name[272];
    const size_t pl = strlen(w->name) - strlen(".qweight");
    SQZ_RETURN_IF(pl >= sizeof prefix, SQZ_ERR_FORMAT, "%s: tensor '%s': name too long", w->file, w->name);
    snprintf(prefix, sizeof prefix, "%.*s", (int)pl, w->name);
    const sqz__st_view *z = sqz__st_view_find(v, n, prefix, "qzeros"), *s = sqz__st_view_find(v, n, prefix, "scales");
    const sqz__st_view *gi = sqz__st_view_find(v, n, prefix, "g_idx");
    const int p = 32 / c->bits;
    const int64_t ni = w->ndim == 2 ? w->shape[0] * p : 0, no = w->ndim == 2 ? w->shape[1] : 0;
    const int64_t ng = s && s->ndim == 2 ? s->shape[0] : 0;
    if (!z || !s || w->dtype != SQZ_DTYPE_I32 || ni < 1 || no < 1 || no % p || ng < 1 || ni % ng ||
        !sqz__st_view_is(s, s->dtype, ng, no) || s->dtype != SQZ_DTYPE_F16 || !sqz__st_view_is(z, SQZ_DTYPE_I32, ng, no / p) ||
        (gi && !sqz__st_view_is(gi, SQZ_DTYPE_I32, ni, 1)))
        return GQ_BAD("%s: tensor '%s': GPTQ wants I32 qweight [k/%d, n], I32 qzeros [g, n/%d], F16 scales [g, n], "
                      "I32 g_idx [k]", w->file, w->name, p, p);
    if (c->bits == 8 && ng != 1 && ni != 32 * ng)
        return SQZ_ERROR(SQZ_ERR_UNSUPPORTED, "%s: tensor '%s': 8-bit GPTQ in groups of %lld: sqz reads 8 bits per "
                         "channel (INT8) or per group of 32 (GGUF Q8_0)", w->file, w->name, (long long)(ni / ng));
    snprintf(name, sizeof name, "%s.weight", prefix);
    sqz_tensor t;
    memset(&t, 0, sizeof t);
    if (sqz__hf_name_parse(m->hp.family, name, &t.role, &t.layer, &t.param) != SQZ__HF_TENSOR)
        return GQ_BAD("%s: tensor '%s': not a known %s tensor name", w->file, w->name, m->hp.arch);
    sqz_qparams qp = {.scheme = c->bits == 4 ? SQZ_QSCHEME_U4_GROUP : SQZ_QSCHEME_I8_ROW, .n_out = no, .n_in = ni,
                      .n_groups = ng, .group_size = (int32_t)(ni / ng)};
    const size_t ns = (size_t)(no * ng), off_s = (sizeof qp + 15) & ~(size_t)15, off_g = off_s + ns * sizeof(float);
    const size_t off_z = off_g + (size_t)ni * sizeof(int32_t), total = off_z + ns;
    uint8_t *b = sqz__calloc(total, 1);
    t.nbytes = (size_t)(c->bits == 4 ? no * ni / 2 : no * ni);
    uint8_t *data = sqz__calloc(t.nbytes, 1);
    if (!b || !data) {
        free(b);
        free(data);
        return SQZ_ERR_NOMEM;
    }
    qp.scales = (float *)(void *)(b + off_s);
    qp.g_idx = (int32_t *)(void *)(b + off_g);
    qp.zeros = b + off_z;
    sqz_status st = unpack_weight(c, w, z, s, gi, &qp, data, (float *)(void *)(b + off_s), b + off_z,
                                  (int32_t *)(void *)(b + off_g));
    t.dtype = c->bits == 4 ? SQZ_DTYPE_U4 : SQZ_DTYPE_I8;
    if (st == SQZ_OK && c->bits == 8 && ng != 1) { /* 8 bits in groups of 32 with fp16 scales: Q8_0, exactly */
        if (qp.g_idx) {
            st = SQZ_ERROR(SQZ_ERR_UNSUPPORTED, "%s: tensor '%s': 8-bit GPTQ with act-order (g_idx): sqz reads 8-bit "
                           "groups in column order only", w->file, w->name);
        } else {
            st = q8_0_weight(&t, data, qp.scales, no, ni);
        }
        free(b);
        free(data);
        if (st != SQZ_OK) return st;
        t.name = name;
        t.ndim = 2;
        t.shape[0] = no;
        t.shape[1] = ni;
        if (!sqz_model_add_tensor(m, &t)) {
            free(t.data);
            return SQZ_ERR_NOMEM;
        }
        return SQZ_OK;
    }
    if (st == SQZ_OK && sqz_qparams_check(&qp, t.dtype, t.nbytes, name) != SQZ_OK) {
        sqz__error_prefix("%s", w->file);
        st = SQZ_ERR_FORMAT;
    }
    if (st != SQZ_OK) {
        free(b);
        free(data);
        return st;
    }
    memcpy(b, &qp, sizeof qp);
    if ((st = sqz_model_keep(m, b)) != SQZ_OK) { /* frees b */
        free(data);
        return st;
    }
    t.name = name;
    t.ndim = 2;
    t.shape[0] = no;
    t.shape[1] = ni;
    t.data = data;
    t.owned = true;
    t.qp = (const sqz_qparams *)(void *)b;
    if (!sqz_model_add_tensor(m, &t)) {
        free(data);
        return SQZ_ERR_NOMEM;
    }
    return SQZ_OK;
}

static sqz_status gptq_attach(sqz_model *m, const void *root, const sqz__st_view *v, size_t n) {
    const cJSON *q = cJSON_GetObjectItemCaseSensitive((const cJSON *)root, "quantization_config");
    const cJSON *bits = cJSON_GetObjectItemCaseSensitive(q, "bits");
    const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(q, "checkpoint_format");
    gq_cfg c = {cJSON_IsNumber(bits) ? bits->valueint : 0, false};
    if (cJSON_IsString(fmt)) {
        SQZ_RETURN_IF(strcmp(fmt->valuestring, "gptq") && strcmp(fmt->valuestring, "gptq_v2"), SQZ_ERR_UNSUPPORTED,
                      "config.json: GPTQ checkpoint_format \"%.32s\" is not read by sqz (gptq, gptq_v2)",
                      fmt->valuestring);
        c.v2 = strcmp(fmt->valuestring, "gptq_v2") == 0;
    }
    SQZ_RETURN_IF(c.bits != 4 && c.bits != 8, SQZ_ERR_UNSUPPORTED,
                  "config.json: GPTQ with %d bits: sqz reads 4 and 8", c.bits);
    for (size_t i = 0; i < n; i++) {
        const size_t len = strlen(v[i].name);
        if (len > 8 && strcmp(v[i].name + len - 8, ".qweight") == 0) SQZ_TRY(make_weight(m, &c, &v[i], v, n));
    }
    for (size_t i = 0; i < n; i++) { /* every part belongs to a weight read above */
        if (!gptq_is_part(v[i].name)) continue;
        char want[300];
        const char *dot = strrchr(v[i].name, '.');
        snprintf(want, sizeof want, "%.*s.weight", (int)(dot - v[i].name), v[i].name);
        SQZ_RETURN_IF(sqz_model_find(m, want) < 0, SQZ_ERR_FORMAT, "%s: tensor '%s': no qweight for it", v[i].file,
                      v[i].name);
    }
    return SQZ_OK;
}

const sqz__st_layout sqz__st_layout_gptq = {
    .id = SQZ_HF_GPTQ, .quant_method = "gptq", .parts = gptq_parts, .config = gptq_config, .i8g_parts = gptq_i8g_parts,
    .is_part = gptq_is_part, .attach = gptq_attach,
};
const sqz__st_layout sqz__st_layout_gptq_v2 = {
    .id = SQZ_HF_GPTQ_V2, .quant_method = "gptq", .parts = gptq_parts, .config = gptq_config, .i8g_parts = gptq_i8g_parts,
    .is_part = gptq_is_part, .attach = gptq_attach,
};

/*
 * formats/bundle_meta.c - what a bundle holds besides tensor bytes: which dtype each tensor is
 * stored with (or why it cannot be), the HPARAMS and VOCAB sections (layouts in
 * edge/bundle_format.h) and the JSON manifest with the provenance.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "edge/crypto.h"
#include "formats/bundle_internal.h"
#include "sqz/qparams.h"
#include "sqz/formats.h"
#include "sqz/io.h"

static const struct { sqz_dtype d; uint32_t code; } dtype_codes[] = {
    {SQZ_DTYPE_F32, SQZB_DT_F32}, {SQZ_DTYPE_F16, SQZB_DT_F16}, {SQZ_DTYPE_Q8_0, SQZB_DT_Q8_0},
    {SQZ_DTYPE_Q4_0, SQZB_DT_Q4_0}, {SQZ_DTYPE_Q4_1, SQZB_DT_Q4_1}};
#define N_CODES (sizeof dtype_codes / sizeof dtype_codes[0])

sqz_dtype sqz__bundle_dtype_of(uint32_t code) {
    if (code == SQZB_DT_Q4_0_X8) return SQZ_DTYPE_Q4_0;
    if (code == SQZB_DT_I8_ROW) return SQZ_DTYPE_I8;
    if (code == SQZB_DT_U4_GROUP) return SQZ_DTYPE_U4;
    for (size_t i = 0; i < N_CODES; i++)
        if (dtype_codes[i].code == code) return dtype_codes[i].d;
    return SQZ_DTYPE_COUNT;
}

/* What keeps a scheme-quantized weight out of bundle format 1, or NULL. */
static const char *scheme_unsupported(const sqz_qparams *qp) {
    if (qp->act_mode != SQZ_ACT_FLOAT) return "W8A8 (quantized activations)";
    if (qp->in_scale) return "an unfolded smoothing vector";
    if (qp->g_idx) return "act-order groups (g_idx)";
    if (qp->scheme == SQZ_QSCHEME_F8_ROW) return "FP8 E4M3 values (sqz-edge multiplies integers)";
    if (qp->scheme == SQZ_QSCHEME_NVFP4) return "NVFP4 codes (sqz-edge multiplies integers)";
    if (qp->scheme != SQZ_QSCHEME_I8_ROW && qp->scheme != SQZ_QSCHEME_U4_GROUP) return "an unknown scheme";
    return NULL;
}

sqz_status sqz__bundle_qpack(const sqz_tensor *t, uint8_t **out, size_t *n) {
    const sqz_qparams *qp = t->qp;
    size_t ng = (size_t)qp->n_groups, rows = (size_t)qp->n_out, codes = t->nbytes;
    size_t at = (SQZB_QHEADER + codes + 3) / 4 * 4, total = at + rows * ng * 4 + (qp->zeros ? rows * ng : 0);
    uint8_t *b = sqz__calloc(1, total);
    if (!b) return SQZ_ERR_NOMEM;
    sqz__wr_u32(b, qp->scheme == SQZ_QSCHEME_I8_ROW ? 1u : 2u);
    sqz__wr_u32(b + 4, (uint32_t)qp->group_size);
    sqz__wr_u32(b + 8, (uint32_t)qp->n_groups);
    sqz__wr_u32(b + 12, qp->zeros ? SQZB_Q_ZEROS : 0u);
    memcpy(b + SQZB_QHEADER, t->data, codes);
    for (size_t i = 0; i < rows * ng; i++) {
        uint32_t u;
        memcpy(&u, &qp->scales[i], 4);
        sqz__wr_u32(b + at + 4 * i, u);
    }
    if (qp->zeros) memcpy(b + at + rows * ng * 4, qp->zeros, rows * ng);
    *out = b;
    *n = total;
    return SQZ_OK;
}

static uint32_t code_of(sqz_dtype d) {
    for (size_t i = 0; i < N_CODES; i++)
        if (dtype_codes[i].d == d) return dtype_codes[i].code;
    return UINT32_MAX;
}

uint32_t sqz__bundle_dtype(const sqz_tensor *t, const sqz_save_opts *o) {
    sqz_dtype d = t->dtype;
    if (o->dtype >= 0 && t->param == SQZ_PARAM_WEIGHT && t->ndim == 2) {
        /* the asked dtype; a matrix whose rows are not whole blocks of it is stored in f32
         * (its values exactly: a float widened, or dequantized), as the GGUF writer does */
        d = sqz_tensor_row_len(t) % sqz_dtype_info((sqz_dtype)o->dtype)->block_size == 0 ? (sqz_dtype)o->dtype
                                                                                            : SQZ_DTYPE_F32;
    } else if (t->qp) { /* sqz's int8 / int4, weight-only and in column order */
        if (scheme_unsupported(t->qp)) return UINT32_MAX;
        return t->qp->scheme == SQZ_QSCHEME_I8_ROW ? SQZB_DT_I8_ROW : SQZB_DT_U4_GROUP;
    }
    /* q4_0 matrices in 8-row groups where the rows allow: sqz-edge's integer kernels read a block
     * column of 8 rows at once (the same bytes in another order; sqz reads them back as q4_0) */
    if (d == SQZ_DTYPE_Q4_0 && t->ndim == 2 && t->shape[0] % 8 == 0) return SQZB_DT_Q4_0_X8;
    return code_of(d);
}

sqz_status sqz__bundle_check(const sqz_model *m, const sqz_save_opts *o) {
    const sqz_family_info *fi = sqz_family_get(m->hp.family);
    SQZ_RETURN_IF(!fi || !fi->bundle, SQZ_ERR_UNSUPPORTED,
                  "a bundle holds llama-family decoders; this model is %s", sqz_family_name(m->hp.family));
    SQZ_RETURN_IF(m->hp.act != SQZ_ACT_SILU || m->hp.rope_layout == SQZ_ROPE_NONE, SQZ_ERR_UNSUPPORTED,
                  "a bundle holds SiLU decoders with rotary embeddings");
    const char *beyond = sqz__model_beyond_llama(m);
    SQZ_RETURN_IF(beyond, SQZ_ERR_UNSUPPORTED, "sqz-edge runs llama's plain block; this %s model has %s", m->hp.arch,
                  beyond);
    SQZ_RETURN_IF(m->vocab.kind != SQZ_VOCAB_SPM && m->vocab.kind != SQZ_VOCAB_BPE, SQZ_ERR_UNSUPPORTED,
                  "a bundle needs an SPM or BPE tokenizer; this model has %s", sqz_vocab_kind_name(m->vocab.kind));
    for (int64_t i = 0; i < m->n_tensors; i++) {
        const sqz_tensor *t = &m->tensors[i];
        SQZ_RETURN_IF(t->ndim > 2, SQZ_ERR_UNSUPPORTED, "tensor '%s': %d dimensions (a bundle holds 1 or 2)",
                      t->name, (int)t->ndim);
        if (sqz__bundle_dtype(t, o) != UINT32_MAX) continue;
        bool asked = o->dtype >= 0 && t->param == SQZ_PARAM_WEIGHT && t->ndim == 2;
        if (!asked && t->qp && scheme_unsupported(t->qp))
            return SQZ_ERROR(SQZ_ERR_UNSUPPORTED, "tensor '%s': sqz's %s with %s is not in bundle format %d.%d; "
                             "choose a dtype with --dtype", t->name, sqz_dtype_name(t->dtype),
                             scheme_unsupported(t->qp), SQZB_MAJOR, SQZB_MINOR);
        return SQZ_ERROR(SQZ_ERR_UNSUPPORTED, "tensor '%s': a bundle cannot hold %s (it holds f32, f16, q8_0, "
                         "q4_0, q4_1, and sqz's int8 / int4 weights)%s", t->name,
                         sqz_dtype_name(asked ? (sqz_dtype)o->dtype : t->dtype), asked ? "" : "; choose one with --dtype");
    }
    return SQZ_OK;
}

/* ---- the metadata sections, built in a growable buffer ---- */
static sqz_status done(sqz__bytebuf *b, uint8_t **out, size_t *n) {
    if (b->oom) {
        free(b->p);
        return SQZ_ERR_NOMEM;
    }
    *out = b->p;
    *n = b->n;
    return SQZ_OK;
}

sqz_status sqz__bundle_hparams(const sqz_model *m, uint8_t **out, size_t *n) {
    const sqz_hparams *hp = &m->hp;
    sqz__bytebuf b = {0};
    char arch[32] = {0};
    snprintf(arch, sizeof arch, "%s", hp->arch);
    sqz__bytebuf_put_u32(&b, SQZB_HP_FIXED);
    sqz__bytebuf_put(&b, arch, 32);
    sqz__bytebuf_put_u32(&b, 0); /* llama */
    sqz__bytebuf_put_u32(&b, (uint32_t)hp->rope_layout);
    sqz__bytebuf_put_u32(&b, 0); /* SiLU */
    sqz__bytebuf_put_u32(&b, (hp->tied_embeddings ? SQZB_HP_TIED : 0u) | (hp->attn_bias ? SQZB_HP_ATTN_BIAS : 0u));
    sqz__bytebuf_put_f32(&b, hp->norm_eps);
    sqz__bytebuf_put_f32(&b, hp->rope_theta);
    const int64_t dims[8] = {hp->n_layers, hp->d_model, hp->n_heads, hp->n_kv_heads,
                             hp->head_dim, hp->d_ff,    hp->vocab_size, hp->ctx_len};
    for (int i = 0; i < 8; i++) sqz__bytebuf_put_u32(&b, (uint32_t)dims[i]);
    for (int64_t l = 0; l < hp->n_layers; l++) {
        sqz__bytebuf_put_u32(&b, (uint32_t)m->layers[l].n_heads);
        sqz__bytebuf_put_u32(&b, (uint32_t)m->layers[l].n_kv_heads);
        sqz__bytebuf_put_u32(&b, (uint32_t)m->layers[l].d_ff);
    }
    return done(&b, out, n);
}

/* The HF tokenizer.json details the SPM encoder follows: Metaspace split, fuse_unk. */
static uint32_t hf_flags(const sqz_vocab *v) {
    if (!v->hf_json) return 0;
    cJSON *root = cJSON_Parse(v->hf_json);
    if (!root) return 0;
    uint32_t f = 0;
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(root, "model");
    if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(model, "fuse_unk"))) f |= SQZB_VOCAB_FUSE_UNK;
    /* a Metaspace pre-tokenizer, alone or in a Sequence */
    const cJSON *pre = cJSON_GetObjectItemCaseSensitive(root, "pre_tokenizer");
    const cJSON *seq = cJSON_GetObjectItemCaseSensitive(pre, "pretokenizers");
    const cJSON *cands[64];
    int nc = 0;
    cands[nc++] = pre;
    const cJSON *it;
    cJSON_ArrayForEach(it, seq) if (nc < 64) cands[nc++] = it;
    for (int i = 0; i < nc; i++) {
        const cJSON *ty = cJSON_GetObjectItemCaseSensitive(cands[i], "type");
        if (cJSON_IsString(ty) && strcmp(ty->valuestring, "Metaspace") == 0 &&
            cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(cands[i], "split")))
            f |= SQZB_VOCAB_SPLIT_WORDS;
    }
    cJSON_Delete(root);
    return f;
}

sqz_status sqz__bundle_vocab(const sqz_model *m, uint8_t **out, size_t *n) {
    const sqz_vocab *v = &m->vocab;
    sqz__bytebuf b = {0};
    sqz__bytebuf_put_u32(&b, SQZB_VOCAB_FIXED);
    sqz__bytebuf_put_u32(&b, v->kind == SQZ_VOCAB_SPM ? 1u : 2u);
    sqz__bytebuf_put_u32(&b, (uint32_t)v->n_tokens);
    sqz__bytebuf_put_u32(&b, (uint32_t)v->bos);
    sqz__bytebuf_put_u32(&b, (uint32_t)v->eos);
    sqz__bytebuf_put_u32(&b, (uint32_t)v->unk);
    sqz__bytebuf_put_u32(&b, (v->add_bos ? SQZB_VOCAB_ADD_BOS : 0u) | (v->add_eos ? SQZB_VOCAB_ADD_EOS : 0u) |
                    (v->add_space_prefix ? SQZB_VOCAB_SPACE_PREFIX : 0u) | hf_flags(v));
    sqz__bytebuf_put_u32(&b, (uint32_t)v->max_token_len);
    sqz__bytebuf_put_u32(&b, (uint32_t)(v->merges ? v->n_merges : 0));
    for (int32_t i = 0; i < v->n_tokens; i++) sqz__bytebuf_put_f32(&b, v->scores ? v->scores[i] : 0.0f);
    for (int32_t i = 0; i < v->n_tokens; i++) {
        int32_t ty = v->types ? v->types[i] : SQZ_TOKEN_NORMAL;
        if (!v->types) { /* as the runtime's tokenizer: the named special ids are what is known */
            if (i == v->bos || i == v->eos || i == v->pad || i == v->cls || i == v->sep || i == v->mask)
                ty = SQZ_TOKEN_CONTROL;
            if (i == v->unk) ty = SQZ_TOKEN_UNKNOWN;
        }
        uint8_t t8 = (uint8_t)(ty >= SQZ_TOKEN_NORMAL && ty <= SQZ_TOKEN_BYTE ? ty : SQZ_TOKEN_NORMAL);
        sqz__bytebuf_put(&b, &t8, 1);
    }
    for (int32_t i = 0; i < v->n_tokens; i++) {
        size_t len = strlen(v->tokens[i]);
        SQZ_RETURN_IF(len > SQZB_MAX_TOKEN_LEN, SQZ_ERR_UNSUPPORTED, "token %d: %zu bytes (a bundle holds at most %u)",
                      (int)i, len, SQZB_MAX_TOKEN_LEN);
        sqz__bytebuf_put_u32(&b, (uint32_t)len);
        sqz__bytebuf_put(&b, v->tokens[i], len);
    }
    for (int32_t i = 0; v->merges && i < v->n_merges; i++) {
        size_t len = strlen(v->merges[i]);
        SQZ_RETURN_IF(len > SQZB_MAX_TOKEN_LEN, SQZ_ERR_UNSUPPORTED, "merge %d: %zu bytes", (int)i, len);
        sqz__bytebuf_put_u32(&b, (uint32_t)len);
        sqz__bytebuf_put(&b, v->merges[i], len);
    }
    const char *pre = v->pre ? v->pre : "";
    sqz__bytebuf_put_u32(&b, (uint32_t)strlen(pre));
    sqz__bytebuf_put(&b, pre, strlen(pre));
    return done(&b, out, n);
}

/* SHA-512 of the source file (hex), or NULL for a directory or an unreadable file. */
static char *source_digest(const char *path) {
    if (!path || sqz__is_dir(path)) return NULL;
    sqz_mapping *map;
    if (sqz_map(path, &map) != SQZ_OK) return NULL;
    sqze_sha512 h;
    uint8_t d[64];
    sqze_sha512_init(&h);
    sqze_sha512_update(&h, map->data, map->size);
    sqze_sha512_final(&h, d);
    sqz_unmap(map);
    char *hex = sqz__malloc(129);
    if (hex)
        for (int i = 0; i < 64; i++) snprintf(hex + 2 * i, 3, "%02x", d[i]);
    return hex;
}

/* The bytes of the bundle's own tensors, in the types they are stored in (after --dtype), and this
 * export's step that changed types: the manifest describes the file it is in, never its source
 * alone. Returns how many tensors the step converted. */
static int64_t add_stored(cJSON *root, cJSON *model, const sqz_model *m, const sqz_save_opts *o) {
    int64_t bytes = 0, converted = 0, requant = 0;
    char from[96] = "";
    for (int64_t i = 0; i < m->n_tensors; i++) {
        const sqz_tensor *t = &m->tensors[i];
        const uint32_t code = sqz__bundle_dtype(t, o);
        size_t nb = t->nbytes;
        const sqz_dtype d = code >= SQZB_DT_I8_ROW ? t->dtype : sqz__bundle_dtype_of(code);
        if (code < SQZB_DT_I8_ROW && d != t->dtype) {
            (void)sqz_dtype_nbytes(d, sqz_tensor_nelements(t), &nb);
            converted++;
            requant += sqz_dtype_info(t->dtype)->is_quantized && sqz_dtype_info(d)->is_quantized;
            const char *fn = sqz_dtype_name(t->dtype);
            if (!strstr(from, fn) && strlen(from) + strlen(fn) + 3 < sizeof from)
                snprintf(from + strlen(from), sizeof from - strlen(from), "%s%s", from[0] ? ", " : "", fn);
        }
        bytes += (int64_t)nb;
    }
    cJSON_AddNumberToObject(model, "tensor_bytes", (double)bytes);
    cJSON *steps = cJSON_AddArrayToObject(root, "export_steps");
    if (converted && steps) {
        cJSON *s = cJSON_CreateObject();
        cJSON_AddStringToObject(s, "step", "export --dtype");
        cJSON_AddStringToObject(s, "dtype", sqz_dtype_name((sqz_dtype)o->dtype));
        cJSON_AddNumberToObject(s, "tensors_converted", (double)converted);
        cJSON_AddStringToObject(s, "from", from);
        cJSON_AddNumberToObject(s, "tensors_requantized", (double)requant);
        cJSON_AddItemToArray(steps, s);
    }
    return converted;
}

sqz_status sqz__bundle_manifest(const sqz_model *m, const sqz_save_opts *o, uint8_t **out, size_t *n) {
    cJSON *root = cJSON_CreateObject();
    if (!root) return SQZ_ERR_NOMEM;
    char ver[16];
    snprintf(ver, sizeof ver, "%d.%d", SQZB_MAJOR, SQZB_MINOR);
    cJSON_AddStringToObject(root, "format", "sqzb");
    cJSON_AddStringToObject(root, "format_version", ver);
    cJSON_AddStringToObject(root, "producer", "sqz " SQZ_VERSION_STRING);
    cJSON *model = cJSON_AddObjectToObject(root, "model");
    cJSON_AddStringToObject(model, "arch", m->hp.arch);
    if (m->name) cJSON_AddStringToObject(model, "name", m->name);
    cJSON_AddNumberToObject(model, "parameters", (double)sqz_model_param_count(m));
    const int64_t converted = add_stored(root, model, m, o);
    cJSON *src = cJSON_AddObjectToObject(root, "source");
    if (m->source_path) cJSON_AddStringToObject(src, "path", m->source_path);
    cJSON_AddStringToObject(src, "format", sqz_format_name((sqz_format)m->source_format));
    char *hex = source_digest(m->source_path);
    if (hex) cJSON_AddStringToObject(src, "sha512", hex);
    else cJSON_AddNullToObject(src, "sha512");
    free(hex);
    /* the compress report (recipe, accuracy measured by eval), verbatim */
    if (o->provenance_json) {
        cJSON *p = cJSON_Parse(o->provenance_json);
        if (!p) {
            cJSON_Delete(root);
            return SQZ_ERROR(SQZ_ERR_FORMAT, "bundle: the provenance report is not valid JSON");
        }
        cJSON_AddItemToObject(root, "compress_report", p);
        /* the report's figures (spec, bytes, accuracy) were measured on the source of this export */
        cJSON_AddStringToObject(root, "compress_report_describes",
                                converted ? "the source, before this export's steps (export_steps): its sizes and "
                                            "accuracy were not measured on this bundle's tensors"
                                          : "this bundle's tensors (exported unchanged)");
    }
    char *text = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    if (!text) return SQZ_ERR_NOMEM;
    *n = strlen(text);
    *out = (uint8_t *)text;
    return SQZ_OK;
}

/*
 * formats/st_layout.c - the table of layouts in which an HF safetensors directory holds sqz's
 * scheme-quantized weights (sqz/qparams.h), one row each: compressed-tensors (st_ctensors.c) and
 * its sparse-24-bitmask variant (st_sparse24.c), GPTQ v1 and v2 (st_gptq.c), sqz's own
 * (st_qpack.c); the choice on writing (sqz_save_opts hf_format) and the detection on reading
 * (config.json's quantization_config.quant_method); and what the rows share.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "formats/formats_internal.h"

static const sqz__st_layout *const layouts[SQZ_HF_FORMAT_COUNT] = {
    [SQZ_HF_COMPRESSED_TENSORS] = &sqz__st_layout_ctensors,
    [SQZ_HF_GPTQ] = &sqz__st_layout_gptq,
    [SQZ_HF_GPTQ_V2] = &sqz__st_layout_gptq_v2,
    [SQZ_HF_SQZ] = &sqz__st_layout_sqz,
    [SQZ_HF_COMPRESSED_TENSORS_SP24] = &sqz__st_layout_ctensors_sp24,
};

static const char *const names[SQZ_HF_FORMAT_COUNT] = {
    [SQZ_HF_COMPRESSED_TENSORS] = "compressed-tensors",
    [SQZ_HF_GPTQ] = "gptq",
    [SQZ_HF_GPTQ_V2] = "gptq-v2",
    [SQZ_HF_SQZ] = "sqz",
    [SQZ_HF_COMPRESSED_TENSORS_SP24] = "compressed-tensors-sparse24",
};

const char *sqz_hf_format_name(sqz_hf_format f) {
    return (unsigned)f < SQZ_HF_FORMAT_COUNT ? names[f] : NULL;
}

const sqz__st_layout *sqz__st_layout_get(sqz_hf_format f) {
    return (unsigned)f < SQZ_HF_FORMAT_COUNT ? layouts[f] : NULL;
}

sqz_status sqz__st_layout_detect(const char *cfg, size_t len, const char *path, const sqz__st_layout **out,
                                 void **qc_out) {
    *out = NULL;
    *qc_out = NULL;
    cJSON *root = cJSON_ParseWithLength(cfg, len);
    const cJSON *qc = cJSON_GetObjectItemCaseSensitive(root, "quantization_config");
    if (!qc || cJSON_IsNull(qc)) {
        cJSON_Delete(root);
        return SQZ_OK;
    }
    const cJSON *qm = cJSON_GetObjectItemCaseSensitive(qc, "quant_method");
    /* the first row of a quant_method reads every variant of it (GPTQ's checkpoint_format) */
    for (int i = 0; cJSON_IsString(qm) && i < SQZ_HF_FORMAT_COUNT; i++) {
        if (strcmp(qm->valuestring, layouts[i]->quant_method) == 0) {
            *out = layouts[i];
            *qc_out = root;
            return SQZ_OK;
        }
    }
    char what[80];
    snprintf(what, sizeof what, "%.64s", cJSON_IsString(qm) ? qm->valuestring : "(none)");
    cJSON_Delete(root);
    return SQZ_ERROR(SQZ_ERR_UNSUPPORTED, "%s: quantization_config.quant_method \"%s\" is not read by sqz (it reads "
                     "compressed-tensors, gptq and sqz)", path, what);
}

void sqz__st_layout_config_free(void *qc) { cJSON_Delete(qc); }

void sqz__st_parts_free(sqz__st_part *parts, int n) {
    for (int i = 0; i < n; i++)
        if (parts[i].owned) {
            free(parts[i].data);
            parts[i].data = NULL;
            parts[i].owned = false;
        }
}

sqz__st_part *sqz__st_part_new(sqz__st_part *p, int *n, const char *suffix, sqz_dtype dt, int64_t d0, int64_t d1) {
    sqz__st_part *q = &p[(*n)++];
    memset(q, 0, sizeof *q);
    snprintf(q->suffix, sizeof q->suffix, "%s", suffix);
    q->dtype = dt;
    q->ndim = d1 > 0 ? 2 : 1;
    q->shape[0] = d0;
    q->shape[1] = d1 > 0 ? d1 : 1;
    return q;
}

sqz_status sqz__st_part_alloc(sqz__st_part *q) {
    size_t nb;
    if (!sqz_dtype_nbytes(q->dtype, q->shape[0] * q->shape[1], &nb)) return SQZ_ERR_SHAPE;
    q->data = sqz__calloc(nb ? nb : 1, 1);
    if (!q->data) return SQZ_ERR_NOMEM;
    q->nbytes = nb;
    q->owned = true;
    return SQZ_OK;
}

const sqz__st_view *sqz__st_view_find(const sqz__st_view *v, size_t n, const char *prefix, const char *suffix) {
    const size_t pl = strlen(prefix);
    for (size_t i = 0; i < n; i++)
        if (strncmp(v[i].name, prefix, pl) == 0 && v[i].name[pl] == '.' && strcmp(v[i].name + pl + 1, suffix) == 0)
            return &v[i];
    return NULL;
}

bool sqz__st_view_is(const sqz__st_view *v, sqz_dtype dt, int64_t d0, int64_t d1) {
    int64_t n = 1;
    for (int i = 0; i < v->ndim; i++) n *= v->shape[i];
    return v->dtype == dt && v->ndim >= 1 && v->shape[0] == d0 && n == d0 * d1;
}

float sqz__st_view_f32(const sqz__st_view *v, size_t i) {
    switch (v->dtype) {
    case SQZ_DTYPE_F16: return sqz_fp16_to_fp32(sqz__rd_u16(v->data + 2 * i));
    case SQZ_DTYPE_BF16: return sqz_bf16_to_fp32(sqz__rd_u16(v->data + 2 * i));
    case SQZ_DTYPE_F8_E4M3: return sqz_fp8_e4m3_to_fp32(v->data[i]);
    default: return sqz__rd_f32(v->data + 4 * i);
    }
}

bool sqz__st_is_linear(const sqz_tensor *t) {
    return t->param == SQZ_PARAM_WEIGHT && t->ndim == 2 && t->role != SQZ_ROLE_TOKEN_EMBD &&
           t->role != SQZ_ROLE_POS_EMBD && t->role != SQZ_ROLE_TYPE_EMBD;
}

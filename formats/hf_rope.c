/* formats/hf_rope.c - the rotary settings of an HF config.json <-> sqz_hparams (+ the frequency
 * factor tensors).
 *
 * Read as hub checkpoints state them (rope_theta, rope_scaling {rope_type|type, ...},
 * partial_rotary_factor, original_max_position_embeddings, Gemma 3's rope_local_base_freq) and as
 * transformers 5 writes them (rope_parameters {rope_type, rope_theta, ...}, per layer type for Gemma 3:
 * {"full_attention": {...}, "sliding_attention": {...}}). Scalings:
 *   default            nothing
 *   linear             positions times 1/factor (hp.rope_freq_scale)
 *   llama3             frequency divisors computed here as transformers' _compute_llama3_parameters
 *                      and convert_hf_to_gguf.py do, kept as the ROPE_FREQS tensor (GGUF rope_freqs)
 *   longrope (su)      short_factor / long_factor as ROPE_FACTORS_SHORT / _LONG tensors, the attention
 *                      factor sqrt(1 + ln(max/orig) / ln(orig)) unless the config states one
 * Anything else (yarn, dynamic, ...) is refused by name. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include <cjson/cJSON.h>

#include "formats/formats_internal.h"

/* The value of key in object o (the last one when given twice, as Python's json), NULL when absent or null. */
static const cJSON *get(const cJSON *o, const char *key) {
    const cJSON *found = NULL;
    for (const cJSON *it = o ? o->child : NULL; it; it = it->next) {
        if (it->string && strcmp(it->string, key) == 0) found = it;
    }
    return cJSON_IsNull(found) ? NULL : found;
}

/* A number of o (or of `alt` when o lacks it) in (lo, hi]; def when both lack it. */
static sqz_status num(const char *path, const cJSON *o, const cJSON *alt, const char *key, double def, double lo,
                      double hi, double *out) {
    const cJSON *it = get(o, key);
    if (!it) it = get(alt, key);
    if (!it) {
        SQZ_RETURN_IF(isnan(def), SQZ_ERR_FORMAT, "%s: the rope scaling needs \"%s\"", path, key);
        *out = def;
        return SQZ_OK;
    }
    SQZ_RETURN_IF(!cJSON_IsNumber(it) || !(it->valuedouble > lo && it->valuedouble <= hi), SQZ_ERR_FORMAT,
                  "%s: \"%s\" must be a number in (%g, %g]", path, key, lo, hi);
    *out = it->valuedouble;
    return SQZ_OK;
}

/* Adds an owned f32 global tensor of n values. */
static sqz_status add_vec(sqz_model *m, sqz_role role, const double *v, int64_t n) {
    float *d = sqz__malloc((size_t)n * sizeof *d);
    if (!d) return SQZ_ERR_NOMEM;
    for (int64_t i = 0; i < n; i++) d[i] = (float)v[i];
    char name[64];
    snprintf(name, sizeof name, "%s.weight", sqz_role_name(role));
    sqz_tensor t = {.name = name, .role = role, .layer = -1, .param = SQZ_PARAM_WEIGHT, .dtype = SQZ_DTYPE_F32,
                    .ndim = 1, .shape = {n}, .nbytes = (size_t)n * sizeof *d, .data = d, .owned = true};
    if (sqz_model_add_tensor(m, &t)) return SQZ_OK;
    free(d);
    return SQZ_ERR_NOMEM;
}

/* Llama 3's divisors: 1 for short wavelengths, factor for long ones, smoothed between. */
static sqz_status llama3(const char *path, const cJSON *sc, const cJSON *root, sqz_hparams *hp, sqz_model *m) {
    double f, lo, hi, orig;
    SQZ_TRY(num(path, sc, NULL, "factor", NAN, 0.0, 1e6, &f));
    SQZ_TRY(num(path, sc, NULL, "low_freq_factor", NAN, 0.0, 1e6, &lo));
    SQZ_TRY(num(path, sc, NULL, "high_freq_factor", NAN, 0.0, 1e6, &hi));
    SQZ_TRY(num(path, sc, root, "original_max_position_embeddings", NAN, 0.0, 1 << 24, &orig));
    SQZ_RETURN_IF(!(hi > lo), SQZ_ERR_FORMAT, "%s: llama3 rope scaling needs high_freq_factor > low_freq_factor", path);
    hp->rope_scaling = SQZ_ROPE_SCALING_LLAMA3;
    hp->rope_factor = (float)f;
    hp->rope_low_freq_factor = (float)lo;
    hp->rope_high_freq_factor = (float)hi;
    hp->rope_ctx_orig = (int64_t)orig;
    const int64_t dim = hp->rope_dim > 0 ? hp->rope_dim : hp->head_dim, half = dim / 2;
    double div[4096];
    SQZ_RETURN_IF(half > 4096 || half < 1, SQZ_ERR_FORMAT, "%s: %lld rotated dimensions", path, (long long)dim);
    for (int64_t i = 0; i < half; i++) {
        const float inv = 1.0f / powf(hp->rope_theta, (float)(2 * i) / (float)dim); /* transformers' f32 */
        const double wavelen = 2.0 * M_PI / inv, lo_wl = orig / lo, hi_wl = orig / hi;
        if (wavelen < hi_wl) div[i] = 1.0;
        else if (wavelen > lo_wl) div[i] = f;
        else {
            const double s = (orig / wavelen - lo) / (hi - lo);
            div[i] = 1.0 / ((1.0 - s) / f + s);
        }
    }
    return add_vec(m, SQZ_ROLE_ROPE_FREQS, div, half);
}

/* One factor list of longrope, half entries. */
static sqz_status factors(const char *path, const cJSON *sc, const char *key, int64_t half, double *out) {
    const cJSON *a = get(sc, key);
    SQZ_RETURN_IF(!cJSON_IsArray(a) || cJSON_GetArraySize(a) != half, SQZ_ERR_FORMAT,
                  "%s: longrope's \"%s\" must be a list of %lld numbers (rotated dimensions / 2)", path, key,
                  (long long)half);
    int64_t i = 0;
    for (const cJSON *it = a->child; it; it = it->next, i++) {
        SQZ_RETURN_IF(!cJSON_IsNumber(it) || !(it->valuedouble > 0 && it->valuedouble < 1e9), SQZ_ERR_FORMAT,
                      "%s: longrope's \"%s\"[%lld] must be a positive number", path, key, (long long)i);
        out[i] = it->valuedouble;
    }
    return SQZ_OK;
}

static sqz_status longrope(const char *path, const cJSON *sc, const cJSON *root, sqz_hparams *hp, sqz_model *m) {
    const int64_t dim = hp->rope_dim > 0 ? hp->rope_dim : hp->head_dim, half = dim / 2;
    SQZ_RETURN_IF(half > 4096 || half < 1, SQZ_ERR_FORMAT, "%s: %lld rotated dimensions", path, (long long)dim);
    double orig, att, v[4096];
    SQZ_TRY(num(path, sc, root, "original_max_position_embeddings", NAN, 0.0, 1 << 24, &orig));
    const double factor = (double)hp->ctx_len / orig;
    const double def_att = factor <= 1.0 ? 1.0 : sqrt(1.0 + log(factor) / log(orig));
    SQZ_TRY(num(path, sc, NULL, "attention_factor", def_att, 0.0, 1e3, &att));
    hp->rope_scaling = SQZ_ROPE_SCALING_LONGROPE;
    hp->rope_ctx_orig = (int64_t)orig;
    hp->rope_factor = (float)factor;
    hp->rope_attn_factor = att == 1.0 ? 0.0f : (float)att;
    SQZ_TRY(factors(path, sc, "short_factor", half, v));
    SQZ_TRY(add_vec(m, SQZ_ROLE_ROPE_FACTORS_SHORT, v, half));
    SQZ_TRY(factors(path, sc, "long_factor", half, v));
    return add_vec(m, SQZ_ROLE_ROPE_FACTORS_LONG, v, half);
}

sqz_status sqz__hf_rope_read(const cJSON *root, const char *path, sqz_hparams *hp, sqz_model *m) {
    const cJSON *rp = get(root, "rope_parameters");
    SQZ_RETURN_IF(rp && !cJSON_IsObject(rp), SQZ_ERR_FORMAT, "%s: \"rope_parameters\" must be an object", path);
    const cJSON *full = get(rp, "full_attention"), *local = get(rp, "sliding_attention");
    if (!cJSON_IsObject(full)) full = rp;
    const cJSON *sc = rp ? full : get(root, "rope_scaling");
    double theta, ptheta, prf;
    SQZ_TRY(num(path, root, NULL, "rope_theta", 10000.0, 0.0, 1e12, &ptheta));
    SQZ_TRY(num(path, full, NULL, "rope_theta", ptheta, 0.0, 1e12, &theta));
    hp->rope_theta = (float)theta;
    SQZ_TRY(num(path, full, root, "partial_rotary_factor", 1.0, 0.0, 1.0, &prf));
    if (prf < 1.0) {
        hp->rope_dim = (int64_t)((double)hp->head_dim * prf); /* transformers: int(head_dim * factor) */
        SQZ_RETURN_IF(hp->rope_dim < 2 || hp->rope_dim % 2 != 0, SQZ_ERR_FORMAT, "%s: partial_rotary_factor %g of "
                      "head_dim %lld rotates %lld dimensions: not an even count", path, prf, (long long)hp->head_dim,
                      (long long)hp->rope_dim);
    }
    double ltheta;
    SQZ_TRY(num(path, root, NULL, "rope_local_base_freq", 10000.0, 0.0, 1e12, &ltheta));
    SQZ_TRY(num(path, local, NULL, "rope_theta", ltheta, 0.0, 1e12, &ltheta));
    hp->rope_theta_local = (float)ltheta;
    SQZ_RETURN_IF(sc && !cJSON_IsObject(sc), SQZ_ERR_FORMAT, "%s: the rope scaling must be an object", path);
    const cJSON *k = get(sc, "rope_type");
    if (!k) k = get(sc, "type");
    const char *kind = cJSON_IsString(k) ? k->valuestring : sc ? NULL : "default";
    SQZ_RETURN_IF(!kind, SQZ_ERR_FORMAT, "%s: the rope scaling names no rope_type", path);
    if (strcmp(kind, "default") == 0) return SQZ_OK;
    if (strcmp(kind, "linear") == 0) {
        double f;
        SQZ_TRY(num(path, sc, NULL, "factor", NAN, 0.0, 1e6, &f));
        hp->rope_scaling = SQZ_ROPE_SCALING_LINEAR;
        hp->rope_factor = (float)f;
        hp->rope_freq_scale = (float)(1.0 / f);
        return SQZ_OK;
    }
    if (strcmp(kind, "llama3") == 0) return llama3(path, sc, root, hp, m);
    if (strcmp(kind, "longrope") == 0 || strcmp(kind, "su") == 0) return longrope(path, sc, root, hp, m);
    return SQZ_ERROR(SQZ_ERR_UNSUPPORTED, "%s: rope scaling \"%.64s\" is not supported (sqz reads default, linear, "
                     "llama3, longrope)", path, kind);
}

/* The float list of a global tensor (f32 or f16/bf16) as a JSON array. */
static cJSON *vec_json(const sqz_model *m, sqz_role role) {
    const sqz_tensor *t = sqz_model_get(m, role, -1, SQZ_PARAM_WEIGHT);
    if (!t) return NULL;
    const int64_t n = sqz_tensor_nelements(t);
    float *v = sqz__malloc((size_t)(n > 0 ? n : 1) * sizeof *v);
    if (!v || sqz_tensor_to_f32(t, v) != SQZ_OK) {
        free(v);
        return NULL;
    }
    cJSON *a = cJSON_CreateArray();
    for (int64_t i = 0; a && i < n; i++) cJSON_AddItemToArray(a, cJSON_CreateNumber((double)v[i]));
    free(v);
    return a;
}

bool sqz__hf_rope_write(cJSON *o, const sqz_model *m) {
    const sqz_hparams *hp = &m->hp;
    cJSON *sc = NULL;
    switch (hp->rope_scaling) {
    case SQZ_ROPE_SCALING_NONE: return cJSON_AddNullToObject(o, "rope_scaling") != NULL;
    case SQZ_ROPE_SCALING_LINEAR:
        sc = cJSON_CreateObject();
        cJSON_AddStringToObject(sc, "rope_type", "linear");
        cJSON_AddNumberToObject(sc, "factor", (double)hp->rope_factor);
        break;
    case SQZ_ROPE_SCALING_LLAMA3:
        if (!(hp->rope_factor > 0) || hp->rope_ctx_orig <= 0) {
            SQZ_ERROR(SQZ_ERR_UNSUPPORTED, "config.json: the model's llama3 rope frequencies came without their "
                      "parameters (a GGUF keeps only the rope_freqs tensor): write GGUF");
            return false;
        }
        sc = cJSON_CreateObject();
        cJSON_AddStringToObject(sc, "rope_type", "llama3");
        cJSON_AddNumberToObject(sc, "factor", (double)hp->rope_factor);
        cJSON_AddNumberToObject(sc, "low_freq_factor", (double)hp->rope_low_freq_factor);
        cJSON_AddNumberToObject(sc, "high_freq_factor", (double)hp->rope_high_freq_factor);
        cJSON_AddNumberToObject(sc, "original_max_position_embeddings", (double)hp->rope_ctx_orig);
        break;
    case SQZ_ROPE_SCALING_LONGROPE:
        sc = cJSON_CreateObject();
        cJSON_AddStringToObject(sc, "rope_type", "longrope");
        cJSON_AddItemToObject(sc, "short_factor", vec_json(m, SQZ_ROLE_ROPE_FACTORS_SHORT));
        cJSON_AddItemToObject(sc, "long_factor", vec_json(m, SQZ_ROLE_ROPE_FACTORS_LONG));
        if (hp->rope_attn_factor > 0) cJSON_AddNumberToObject(sc, "attention_factor", (double)hp->rope_attn_factor);
        cJSON_AddNumberToObject(o, "original_max_position_embeddings", (double)hp->rope_ctx_orig);
        break;
    }
    return sc && cJSON_AddItemToObject(o, "rope_scaling", sc);
}

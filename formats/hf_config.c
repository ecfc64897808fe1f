/* formats/hf_config.c - HF config.json <-> sqz_hparams.
 *
 * Reading accepts what transformers writes for LlamaConfig, MistralConfig, Qwen2Config
 * and BertConfig (defaults are transformers' own where a key is missing) and checks every
 * value before it sizes anything. Writing produces a config.json that transformers loads
 * with the matching *ForCausalLM / BertModel class. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include <cjson/cJSON.h>

#include "formats/formats_internal.h"

/* One row per HF model_type sqz reads. */
typedef struct hf_arch {
    const char *model_type;   /* config.json "model_type" */
    const char *class_prefix; /* "architectures" entries starting with this name the same arch */
    const char *arch;         /* sqz_hparams.arch (GGUF general.architecture where one exists) */
    const char *hf_class;     /* what the writer puts in "architectures" */
    sqz_family family;
    bool tie_default;         /* transformers' default for tie_word_embeddings */
    bool qkv_bias;            /* q/k/v always carry biases (not a config key) */
    bool has_bias_key;        /* config has "attention_bias" */
} hf_arch;

static const hf_arch archs[] = {
    {"llama", "Llama", "llama", "LlamaForCausalLM", SQZ_FAMILY_LLAMA, false, false, true},
    {"mistral", "Mistral", "mistral", "MistralForCausalLM", SQZ_FAMILY_LLAMA, false, false, false},
    {"qwen2", "Qwen2For", "qwen2", "Qwen2ForCausalLM", SQZ_FAMILY_LLAMA, false, true, false},
    /* SmolLM checkpoints are llama models; GGUF calls them "llama" too */
    {"smollm", "SmolLM", "llama", "LlamaForCausalLM", SQZ_FAMILY_LLAMA, false, false, true},
    {"bert", "Bert", "bert", "BertModel", SQZ_FAMILY_BERT, false, true, false},
    {"qwen3", "Qwen3For", "qwen3", "Qwen3ForCausalLM", SQZ_FAMILY_QWEN3, false, false, true},
    /* google/gemma-3-270m, -1b: the text model (the 4b+ checkpoints are multimodal "gemma3") */
    {"gemma3_text", "Gemma3ForCausalLM", "gemma3", "Gemma3ForCausalLM", SQZ_FAMILY_GEMMA3, true, false, true},
    {"phi3", "Phi3", "phi3", "Phi3ForCausalLM", SQZ_FAMILY_PHI3, false, false, false},
    {"qwen3_moe", "Qwen3Moe", "qwen3moe", "Qwen3MoeForCausalLM", SQZ_FAMILY_QWEN3MOE, false, false, true},
    {"mixtral", "Mixtral", "mixtral", "MixtralForCausalLM", SQZ_FAMILY_MIXTRAL, false, false, false},
};
#define N_ARCHS (sizeof archs / sizeof archs[0])

/* Integers in JSON are doubles: only values below 2^53 are exact. */
#define JSON_INT_MAX 9007199254740991.0

/* ---- reading ---- */

typedef struct cfg {
    const cJSON *root;
    const char *path;
} cfg;

/* The value of key, NULL when absent or null. A key given twice takes its last value, as
 * Python's json module (and so transformers) does. */
static const cJSON *item(const cfg *c, const char *key) {
    const cJSON *found = NULL;
    for (const cJSON *it = c->root->child; it; it = it->next) {
        if (it->string && strcmp(it->string, key) == 0) found = it;
    }
    return cJSON_IsNull(found) ? NULL : found;
}

static sqz_status get_int(const cfg *c, const char *key, bool required, int64_t def, int64_t lo, int64_t hi,
                          int64_t *out) {
    const cJSON *it = item(c, key);
    if (!it) {
        SQZ_RETURN_IF(required, SQZ_ERR_FORMAT, "%s: missing \"%s\"", c->path, key);
        *out = def;
        return SQZ_OK;
    }
    double d = cJSON_IsNumber(it) ? it->valuedouble : NAN;
    SQZ_RETURN_IF(!isfinite(d) || d != floor(d) || fabs(d) > JSON_INT_MAX, SQZ_ERR_FORMAT,
                  "%s: \"%s\" must be an integer", c->path, key);
    SQZ_RETURN_IF(d < (double)lo || d > (double)hi, SQZ_ERR_FORMAT,
                  "%s: \"%s\" = %.0f is out of range [%lld, %lld]", c->path, key, d, (long long)lo, (long long)hi);
    *out = (int64_t)d;
    return SQZ_OK;
}

/* A float in (lo, hi]. */
static sqz_status get_float(const cfg *c, const char *key, double def, double lo, double hi, float *out) {
    const cJSON *it = item(c, key);
    double d = def;
    if (it) {
        SQZ_RETURN_IF(!cJSON_IsNumber(it), SQZ_ERR_FORMAT, "%s: \"%s\" must be a number", c->path, key);
        d = it->valuedouble;
    }
    /* the range holds for the float that is kept (1e-85 would become 0) */
    const float f = (float)d;
    SQZ_RETURN_IF(!isfinite(d) || d <= lo || d > hi || !((double)f > lo), SQZ_ERR_FORMAT,
                  "%s: \"%s\" = %g is out of range (%g, %g]", c->path, key, d, lo, hi);
    *out = f;
    return SQZ_OK;
}

static sqz_status get_bool(const cfg *c, const char *key, bool def, bool *out) {
    const cJSON *it = item(c, key);
    if (!it) {
        *out = def;
        return SQZ_OK;
    }
    SQZ_RETURN_IF(!cJSON_IsBool(it), SQZ_ERR_FORMAT, "%s: \"%s\" must be true or false", c->path, key);
    *out = cJSON_IsTrue(it);
    return SQZ_OK;
}

static const char *get_string(const cfg *c, const char *key) {
    const cJSON *it = item(c, key);
    return cJSON_IsString(it) ? it->valuestring : NULL;
}

/* A token id key: an integer, or a list whose first entry is taken (eos lists). -1 if absent
 * or not a valid id for the vocabulary (transformers does not check these either). */
static int32_t token_id(const cfg *c, const char *key, int64_t vocab) {
    const cJSON *it = item(c, key);
    if (cJSON_IsArray(it)) it = it->child;
    if (!cJSON_IsNumber(it)) return -1;
    double d = it->valuedouble;
    if (!(d >= 0 && d < (double)vocab && d == floor(d))) return -1;
    return (int32_t)d;
}

static sqz_status find_arch(const cfg *c, const hf_arch **out) {
    const char *mt = get_string(c, "model_type");
    if (mt && strncmp(mt, "sqz-", 4) == 0) mt += 4; /* sqz's own quantized layout (st_qpack.c) */
    if (mt) {
        for (size_t i = 0; i < N_ARCHS; i++) {
            if (strcmp(mt, archs[i].model_type) == 0) { *out = &archs[i]; return SQZ_OK; }
        }
        return SQZ_ERROR(SQZ_ERR_ARCH, "%s: model_type \"%.64s\" is not supported (sqz reads llama, mistral, qwen2, "
                         "smollm, qwen3, gemma3_text, phi3, qwen3_moe, mixtral and bert)", c->path, mt);
    }
    const cJSON *list = item(c, "architectures");
    const cJSON *a = cJSON_IsArray(list) ? list->child : NULL;
    if (cJSON_IsString(a)) {
        for (size_t i = 0; i < N_ARCHS; i++) {
            if (strncmp(a->valuestring, archs[i].class_prefix, strlen(archs[i].class_prefix)) == 0) {
                *out = &archs[i];
                return SQZ_OK;
            }
        }
        return SQZ_ERROR(SQZ_ERR_ARCH, "%s: architecture \"%.64s\" is not supported (sqz reads llama, mistral, "
                         "qwen2, smollm, qwen3, gemma3_text, phi3, qwen3_moe, mixtral and bert)", c->path,
                         a->valuestring);
    }
    return SQZ_ERROR(SQZ_ERR_ARCH, "%s: neither \"model_type\" nor \"architectures\" names the architecture", c->path);
}

static sqz_status read_act(const cfg *c, const char *key, const char *def, sqz_act *out) {
    const char *a = get_string(c, key);
    if (!a) a = item(c, key) ? "" : def;
    if (strcmp(a, "silu") == 0 || strcmp(a, "swish") == 0) *out = SQZ_ACT_SILU;
    else if (strcmp(a, "gelu_pytorch_tanh") == 0 || (strcmp(a, "gelu_new") == 0 && strcmp(key, "hidden_activation") == 0))
        *out = SQZ_ACT_GELU_TANH;
    else if (strcmp(a, "gelu") == 0 || strcmp(a, "gelu_new") == 0 || strcmp(a, "gelu_fast") == 0)
        *out = SQZ_ACT_GELU;
    else return SQZ_ERROR(SQZ_ERR_UNSUPPORTED, "%s: hidden_act \"%.64s\" is not supported", c->path, a);
    return SQZ_OK;
}

/* What config.json holds beyond the keys every family shares, one row per family (the row's
 * functions are below). */
typedef struct jw jw;
typedef struct hf_family {
    int64_t ctx_default;     /* max_position_embeddings when absent (transformers' default) */
    const char *act_default; /* hidden_act when absent */
    const char *act_key;     /* the activation's key: NULL for "hidden_act" (Gemma: "hidden_activation") */
    bool head_dim_key;       /* the config may set head_dim (BertConfig has none: hidden_size / heads) */
    sqz_status (*read)(const cfg *c, const hf_arch *a, sqz_hparams *hp, sqz_model *m);
    /* false, with the error recorded, when config.json cannot express m */
    bool (*check)(const sqz_model *m, const hf_arch *a);
    void (*write)(jw *w, const sqz_model *m, const hf_arch *a);
} hf_family;
static const hf_family *hf_family_of(sqz_family f);

static sqz_status read_llama_keys(const cfg *c, const hf_arch *a, sqz_hparams *hp, sqz_model *m) {
    (void)m;
    SQZ_RETURN_IF(hp->head_dim % 2 != 0, SQZ_ERR_FORMAT, "%s: head_dim %lld is odd: rotary embeddings need pairs",
                  c->path, (long long)hp->head_dim);
    SQZ_TRY(get_float(c, "rms_norm_eps", 1e-6, 0.0, 1.0, &hp->norm_eps));
    SQZ_TRY(sqz__hf_rope_read(c->root, c->path, hp, m));
    hp->rope_layout = SQZ_ROPE_HALF;
    bool bias = a->qkv_bias;
    if (a->has_bias_key) SQZ_TRY(get_bool(c, "attention_bias", false, &bias));
    hp->attn_bias = bias;
    SQZ_TRY(get_bool(c, "tie_word_embeddings", a->tie_default, &hp->tied_embeddings));
    return SQZ_OK;
}

static sqz_status read_bert_keys(const cfg *c, const hf_arch *a, sqz_hparams *hp, sqz_model *m) {
    (void)a;
    SQZ_RETURN_IF(hp->n_kv_heads != hp->n_heads, SQZ_ERR_FORMAT, "%s: BERT has no grouped-query attention "
                  "(num_key_value_heads %lld != num_attention_heads %lld)", c->path, (long long)hp->n_kv_heads,
                  (long long)hp->n_heads);
    SQZ_TRY(get_int(c, "type_vocab_size", false, 2, 0, 1 << 16, &hp->n_token_types));
    SQZ_TRY(get_float(c, "layer_norm_eps", 1e-12, 0.0, 1.0, &hp->norm_eps));
    const char *pe = get_string(c, "position_embedding_type");
    SQZ_RETURN_IF(pe && strcmp(pe, "absolute") != 0, SQZ_ERR_UNSUPPORTED,
                  "%s: position_embedding_type \"%.64s\" is not supported (only \"absolute\")", c->path, pe);
    hp->rope_layout = SQZ_ROPE_NONE;
    hp->attn_bias = true;
    hp->tied_embeddings = false;
    m->vocab.pad = token_id(c, "pad_token_id", hp->vocab_size);
    return SQZ_OK;
}

static sqz_status read_hparams(const cfg *c, sqz_model *m) {
    const hf_arch *a = NULL;
    SQZ_TRY(find_arch(c, &a));
    sqz_hparams hp;
    memset(&hp, 0, sizeof hp);
    snprintf(hp.arch, sizeof hp.arch, "%s", a->arch);
    hp.family = a->family;
    const hf_family *hf = hf_family_of(a->family);
    SQZ_RETURN_IF(!hf, SQZ_ERR_ARCH, "%s: family %d has no config.json row", c->path, (int)a->family);

    SQZ_TRY(get_int(c, "hidden_size", true, 0, 1, 1 << 20, &hp.d_model));
    SQZ_TRY(get_int(c, "num_hidden_layers", true, 0, 1, 10000, &hp.n_layers));
    SQZ_TRY(get_int(c, "num_attention_heads", true, 0, 1, 1 << 14, &hp.n_heads));
    SQZ_TRY(get_int(c, "num_key_value_heads", false, hp.n_heads, 1, hp.n_heads, &hp.n_kv_heads));
    SQZ_RETURN_IF(hp.n_heads % hp.n_kv_heads != 0, SQZ_ERR_FORMAT,
                  "%s: num_attention_heads %lld is not a multiple of num_key_value_heads %lld", c->path,
                  (long long)hp.n_heads, (long long)hp.n_kv_heads);
    bool explicit_hd = hf->head_dim_key && item(c, "head_dim") != NULL;
    hp.head_dim = hp.d_model / hp.n_heads;
    if (explicit_hd) SQZ_TRY(get_int(c, "head_dim", false, 0, 1, 1 << 16, &hp.head_dim));
    SQZ_RETURN_IF(!explicit_hd && hp.d_model % hp.n_heads != 0, SQZ_ERR_FORMAT,
                  "%s: hidden_size %lld is not a multiple of num_attention_heads %lld", c->path,
                  (long long)hp.d_model, (long long)hp.n_heads);
    /* the bound of an explicit head_dim holds for the derived one too (the writer states it) */
    SQZ_RETURN_IF(!explicit_hd && hp.head_dim > (1 << 16), SQZ_ERR_FORMAT,
                  "%s: hidden_size %lld / num_attention_heads %lld gives a head_dim of %lld, beyond 65536", c->path,
                  (long long)hp.d_model, (long long)hp.n_heads, (long long)hp.head_dim);
    SQZ_TRY(get_int(c, "intermediate_size", true, 0, 1, 1 << 24, &hp.d_ff));
    SQZ_TRY(get_int(c, "vocab_size", true, 0, 1, SQZ__MAX_VOCAB, &hp.vocab_size));
    SQZ_TRY(get_int(c, "max_position_embeddings", false, hf->ctx_default, 1, 1 << 24, &hp.ctx_len));
    SQZ_TRY(read_act(c, hf->act_key ? hf->act_key : "hidden_act", hf->act_default, &hp.act));

    m->hp = hp;
    SQZ_TRY(sqz_model_init_layers(m));
    SQZ_TRY(hf->read(c, a, &m->hp, m));
    m->vocab.bos = token_id(c, "bos_token_id", m->hp.vocab_size);
    m->vocab.eos = token_id(c, "eos_token_id", m->hp.vocab_size);
    const char *name = get_string(c, "_name_or_path");
    if (name && *name && sqz__utf8_valid(name, strlen(name))) {
        char *dup = sqz__strdup(name);
        if (!dup) return SQZ_ERR_NOMEM;
        free(m->name);
        m->name = dup;
    }
    return SQZ_OK;
}

sqz_status sqz__hf_config_read(const char *json, size_t len, const char *path, sqz_model *m) {
    SQZ_RETURN_IF(len > SQZ__MAX_JSON, SQZ_ERR_FORMAT, "%s: %zu bytes is too large for a config.json", path, len);
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(json, len, &end, false);
    if (!root) {
        size_t at = end && end >= json ? (size_t)(end - json) : 0;
        return SQZ_ERROR(SQZ_ERR_FORMAT, "%s: not valid JSON (error near byte %zu)", path, at);
    }
    sqz_status s = SQZ_OK;
    size_t used = (size_t)(end - json);
    for (size_t i = used; i < len && s == SQZ_OK; i++) {
        if (json[i] != ' ' && json[i] != '\n' && json[i] != '\r' && json[i] != '\t' && json[i] != 0)
            s = SQZ_ERROR(SQZ_ERR_FORMAT, "%s: trailing bytes after the JSON object at byte %zu", path, i);
    }
    if (s == SQZ_OK && !cJSON_IsObject(root)) s = SQZ_ERROR(SQZ_ERR_FORMAT, "%s: not a JSON object", path);
    if (s == SQZ_OK) {
        cfg c = {root, path};
        s = read_hparams(&c, m);
    }
    cJSON_Delete(root);
    return s;
}

/* ---- writing ---- */

/* The double closest to f with the fewest digits that still rounds to f (1e-06, not
 * 9.9999999747524271e-07), so that config.json shows what the model was trained with. */
static double short_float(float f) {
    char buf[32];
    for (int prec = 1; prec <= 9; prec++) {
        snprintf(buf, sizeof buf, "%.*g", prec, (double)f);
        double d = strtod(buf, NULL);
        if ((float)d == f) return d;
    }
    return (double)f;
}

static const char *torch_dtype_name(sqz_dtype d) {
    switch (d) {
    case SQZ_DTYPE_F16: return "float16";
    case SQZ_DTYPE_BF16: return "bfloat16";
    case SQZ_DTYPE_F64: return "float64";
    default: return "float32";
    }
}

static const hf_arch *arch_for(const sqz_hparams *hp) {
    for (size_t i = 0; i < N_ARCHS; i++) {
        if (archs[i].family == hp->family && strcmp(archs[i].arch, hp->arch) == 0) return &archs[i];
    }
    /* e.g. a GGUF model whose architecture has no HF model_type of its own */
    for (size_t i = 0; i < N_ARCHS; i++) {
        if (archs[i].family == hp->family) return &archs[i];
    }
    return NULL;
}

/* A JSON object under construction; ok turns false at the first allocation failure. */
struct jw {
    cJSON *o;
    bool ok;
    bool refused; /* a value config.json cannot state: the error is recorded */
};

static void add_item(jw *w, const char *k, cJSON *v) {
    if (!v || !w->o || !cJSON_AddItemToObject(w->o, k, v)) {
        cJSON_Delete(v);
        w->ok = false;
    }
}
static void add_num(jw *w, const char *k, double v) { add_item(w, k, cJSON_CreateNumber(v)); }
static void add_str(jw *w, const char *k, const char *v) { add_item(w, k, cJSON_CreateString(v)); }
static void add_bool(jw *w, const char *k, bool v) { add_item(w, k, cJSON_CreateBool(v)); }

/* ---- the rows: what each family adds to config.json ---- */

static bool check_llama(const sqz_model *m, const hf_arch *a) {
    const sqz_hparams *hp = &m->hp;
    const sqz_layer_dims *l0 = &m->layers[0];
    if (!a->has_bias_key && hp->attn_bias != a->qkv_bias) {
        SQZ_ERROR(SQZ_ERR_UNSUPPORTED, "config.json: %s cannot express q/k/v biases %s", a->hf_class,
                  hp->attn_bias ? "present" : "absent");
        return false;
    }
    if (hp->d_model % l0->n_heads) {
        SQZ_ERROR(SQZ_ERR_UNSUPPORTED, "config.json: transformers' %s requires hidden_size %lld to be a multiple "
                  "of num_attention_heads %lld (it checks even with an explicit head_dim): write GGUF (--to gguf)",
                  a->hf_class, (long long)hp->d_model, (long long)l0->n_heads);
        return false;
    }
    const bool o_bias = sqz_model_get(m, SQZ_ROLE_ATTN_OUT, 0, SQZ_PARAM_BIAS) != NULL;
    const bool mlp_bias = sqz_model_get(m, SQZ_ROLE_FFN_DOWN, 0, SQZ_PARAM_BIAS) != NULL;
    if ((o_bias || mlp_bias) && !(a->has_bias_key && (!o_bias || hp->attn_bias))) {
        SQZ_ERROR(SQZ_ERR_UNSUPPORTED, "config.json: %s cannot express biases on %s (a pruned model's "
                  "compensation): write GGUF (--to gguf), which llama.cpp loads with them", a->hf_class,
                  o_bias ? "o_proj without q/k/v" : "the MLP");
        return false;
    }
    return true;
}

static void write_llama(jw *w, const sqz_model *m, const hf_arch *a) {
    const sqz_hparams *hp = &m->hp;
    const sqz_layer_dims *l0 = &m->layers[0];
    const bool mlp_bias = sqz_model_get(m, SQZ_ROLE_FFN_DOWN, 0, SQZ_PARAM_BIAS) != NULL;
    add_num(w, "num_key_value_heads", (double)l0->n_kv_heads);
    add_num(w, "head_dim", (double)hp->head_dim);
    add_num(w, "rms_norm_eps", short_float(hp->norm_eps));
    add_num(w, "rope_theta", short_float(hp->rope_theta > 0 ? hp->rope_theta : 10000.0f));
    if (w->o && !sqz__hf_rope_write(w->o, m)) w->ok = false, w->refused = true;
    if (hp->rope_dim > 0 && hp->rope_dim != hp->head_dim)
        add_num(w, "partial_rotary_factor", short_float((float)hp->rope_dim / (float)hp->head_dim));
    if (a->has_bias_key) {
        add_bool(w, "attention_bias", hp->attn_bias);
        add_bool(w, "mlp_bias", mlp_bias);
    }
    add_num(w, "attention_dropout", 0.0);
    add_bool(w, "tie_word_embeddings", hp->tied_embeddings);
    add_bool(w, "use_cache", true);
}

static bool check_bert(const sqz_model *m, const hf_arch *a) {
    (void)a;
    const sqz_hparams *hp = &m->hp;
    const sqz_layer_dims *l0 = &m->layers[0];
    if (l0->n_kv_heads != l0->n_heads || l0->n_heads * hp->head_dim != hp->d_model) {
        SQZ_ERROR(SQZ_ERR_UNSUPPORTED, "config.json: BertModel cannot express %lld heads of %lld (%lld KV heads) "
                  "in a hidden size of %lld", (long long)l0->n_heads, (long long)hp->head_dim,
                  (long long)l0->n_kv_heads, (long long)hp->d_model);
        return false;
    }
    return true;
}

static void write_bert(jw *w, const sqz_model *m, const hf_arch *a) {
    (void)a;
    const sqz_hparams *hp = &m->hp;
    add_num(w, "type_vocab_size", (double)hp->n_token_types);
    add_num(w, "layer_norm_eps", short_float(hp->norm_eps));
    add_num(w, "pad_token_id", m->vocab.pad >= 0 ? m->vocab.pad : 0);
    add_str(w, "position_embedding_type", "absolute");
    add_num(w, "hidden_dropout_prob", 0.1);
    add_num(w, "attention_probs_dropout_prob", 0.1);
}

/* Gemma 3: llama's keys (its defaults differ), query_pre_attn_scalar, the sliding layers (layer_types, or
 * the older sliding_window_pattern: every pattern-th layer global). Soft-capping (Gemma 2) is refused. */
static sqz_status read_gemma3_keys(const cfg *c, const hf_arch *a, sqz_hparams *hp, sqz_model *m) {
    SQZ_TRY(read_llama_keys(c, a, hp, m));
    SQZ_RETURN_IF(item(c, "final_logit_softcapping") || item(c, "attn_logit_softcapping"), SQZ_ERR_UNSUPPORTED,
                  "%s: logit soft-capping (Gemma 2's final_logit_softcapping / attn_logit_softcapping) is not "
                  "supported", c->path);
    int64_t qpas, window, pattern;
    SQZ_TRY(get_int(c, "query_pre_attn_scalar", false, 256, 1, 1 << 20, &qpas));
    if (qpas != hp->head_dim) hp->attn_scale = (float)(1.0 / sqrt((double)qpas)); /* transformers' qpas**-0.5 */
    SQZ_TRY(get_int(c, "sliding_window", false, 4096, 1, 1 << 24, &window));
    SQZ_TRY(get_int(c, "sliding_window_pattern", false, 6, 1, 1 << 16, &pattern));
    const cJSON *types = item(c, "layer_types");
    SQZ_RETURN_IF(types && (!cJSON_IsArray(types) || cJSON_GetArraySize(types) != hp->n_layers), SQZ_ERR_FORMAT,
                  "%s: \"layer_types\" must list one type per layer (%lld)", c->path, (long long)hp->n_layers);
    const cJSON *t = types ? types->child : NULL;
    for (int64_t l = 0; l < hp->n_layers; l++, t = t ? t->next : NULL) {
        bool sliding = (l + 1) % pattern != 0;
        if (types) {
            SQZ_RETURN_IF(!cJSON_IsString(t) || (strcmp(t->valuestring, "sliding_attention") != 0 &&
                                                 strcmp(t->valuestring, "full_attention") != 0),
                          SQZ_ERR_FORMAT, "%s: layer_types[%lld] must be \"sliding_attention\" or \"full_attention\"",
                          c->path, (long long)l);
            sliding = strcmp(t->valuestring, "sliding_attention") == 0;
        }
        m->layers[l].window = sliding ? window : 0;
    }
    hp->sliding_window = window;
    return SQZ_OK;
}

static bool check_gemma3(const sqz_model *m, const hf_arch *a) { return check_llama(m, a); }

static void write_gemma3(jw *w, const sqz_model *m, const hf_arch *a) {
    const sqz_hparams *hp = &m->hp;
    write_llama(w, m, a);
    add_num(w, "query_pre_attn_scalar",
            hp->attn_scale > 0 ? (double)lroundf(1.0f / (hp->attn_scale * hp->attn_scale)) : (double)hp->head_dim);
    add_num(w, "rope_local_base_freq", short_float(hp->rope_theta_local > 0 ? hp->rope_theta_local : 10000.0f));
    add_num(w, "sliding_window", (double)(hp->sliding_window > 0 ? hp->sliding_window : 4096));
    cJSON *types = cJSON_CreateArray();
    for (int64_t l = 0; types && l < hp->n_layers; l++)
        cJSON_AddItemToArray(types, cJSON_CreateString(m->layers[l].window > 0 ? "sliding_attention" : "full_attention"));
    add_item(w, "layer_types", types);
    add_str(w, "hidden_activation", "gelu_pytorch_tanh");
    add_item(w, "final_logit_softcapping", cJSON_CreateNull());
    add_item(w, "attn_logit_softcapping", cJSON_CreateNull());
}

/* Phi-3 / Phi-4-mini: llama's keys; a sliding window beyond the context (Phi-4-mini's 262144) is none,
 * a shorter one is refused (llama.cpp runs Phi-3 without one). */
static sqz_status read_phi3_keys(const cfg *c, const hf_arch *a, sqz_hparams *hp, sqz_model *m) {
    SQZ_TRY(read_llama_keys(c, a, hp, m));
    int64_t window;
    SQZ_TRY(get_int(c, "sliding_window", false, 0, 0, INT64_C(1) << 40, &window));
    SQZ_RETURN_IF(window > 0 && window < hp->ctx_len, SQZ_ERR_UNSUPPORTED, "%s: a sliding window of %lld positions "
                  "within the context of %lld is not supported for phi3 (llama.cpp disables it too)", c->path,
                  (long long)window, (long long)hp->ctx_len);
    return SQZ_OK;
}

static bool check_phi3(const sqz_model *m, const hf_arch *a) {
    if (m->hp.head_dim * m->layers[0].n_heads != m->hp.d_model) {
        SQZ_ERROR(SQZ_ERR_UNSUPPORTED, "config.json: %s derives head_dim from hidden_size / num_attention_heads",
                  a->hf_class);
        return false;
    }
    return check_llama(m, a);
}

static void write_phi3(jw *w, const sqz_model *m, const hf_arch *a) {
    write_llama(w, m, a);
    add_item(w, "sliding_window", cJSON_CreateNull());
    /* Phi3Config's default pad_token_id is 32000, beyond a smaller vocabulary */
    add_item(w, "pad_token_id", m->vocab.pad >= 0 ? cJSON_CreateNumber(m->vocab.pad) : cJSON_CreateNull());
}

/* ---- mixtures of experts: the expert count, top-k and each expert's width into every layer ---- */

static void set_experts(sqz_model *m, sqz_hparams *hp, int64_t n_expert, int64_t used, int64_t width) {
    hp->n_expert = n_expert;
    hp->n_expert_used = used;
    hp->d_ff = width;
    for (int64_t l = 0; l < hp->n_layers; l++) {
        m->layers[l].n_expert = n_expert;
        m->layers[l].d_ff = width;
    }
}

static sqz_status read_expert_counts(const cfg *c, int64_t dflt, int64_t used_dflt, int64_t *n, int64_t *used) {
    const char *key = item(c, "num_experts") ? "num_experts" : "num_local_experts";
    SQZ_TRY(get_int(c, key, false, dflt, 1, 1 << 16, n));
    return get_int(c, "num_experts_per_tok", false, used_dflt, 1, *n, used);
}

/* Qwen3-MoE: llama's keys, experts of moe_intermediate_size in every layer (decoder_sparse_step 1, no
 * mlp_only_layers: dense layers between sparse ones are refused, as llama.cpp's qwen3moe has none). */
static sqz_status read_qwen3moe_keys(const cfg *c, const hf_arch *a, sqz_hparams *hp, sqz_model *m) {
    SQZ_TRY(read_llama_keys(c, a, hp, m));
    int64_t n, used, width, step;
    SQZ_TRY(read_expert_counts(c, 128, 8, &n, &used));
    SQZ_TRY(get_int(c, "moe_intermediate_size", false, 768, 1, 1 << 24, &width));
    SQZ_TRY(get_int(c, "decoder_sparse_step", false, 1, 1, 1 << 16, &step));
    const cJSON *dense = item(c, "mlp_only_layers");
    SQZ_RETURN_IF(step != 1 || (dense && cJSON_GetArraySize(dense) > 0), SQZ_ERR_UNSUPPORTED,
                  "%s: dense layers between the sparse ones (decoder_sparse_step %lld, mlp_only_layers) are not "
                  "supported (llama.cpp's qwen3moe has none)", c->path, (long long)step);
    SQZ_TRY(get_bool(c, "norm_topk_prob", false, &hp->expert_norm_topk));
    set_experts(m, hp, n, used, width);
    return SQZ_OK;
}

/* Mixtral: llama's keys, num_local_experts experts of intermediate_size, top-k always renormalised; a sliding
 * window shorter than the context (Mixtral's is null) is refused. */
static sqz_status read_mixtral_keys(const cfg *c, const hf_arch *a, sqz_hparams *hp, sqz_model *m) {
    SQZ_TRY(read_llama_keys(c, a, hp, m));
    int64_t n, used, window;
    SQZ_TRY(read_expert_counts(c, 8, 2, &n, &used));
    SQZ_TRY(get_int(c, "sliding_window", false, 0, 0, INT64_C(1) << 40, &window));
    SQZ_RETURN_IF(window > 0 && window < hp->ctx_len, SQZ_ERR_UNSUPPORTED, "%s: a sliding window of %lld positions "
                  "within the context of %lld is not supported for mixtral", c->path, (long long)window,
                  (long long)hp->ctx_len);
    hp->expert_norm_topk = true;
    set_experts(m, hp, n, used, hp->d_ff);
    return SQZ_OK;
}

static bool check_moe(const sqz_model *m, const hf_arch *a) {
    for (int64_t l = 1; l < m->hp.n_layers; l++) {
        if (m->layers[l].n_expert != m->layers[0].n_expert) {
            SQZ_ERROR(SQZ_ERR_UNSUPPORTED, "config.json: %s cannot express %lld experts in layer %lld and %lld in "
                      "layer 0: write GGUF (--to gguf)", a->hf_class, (long long)m->layers[l].n_expert, (long long)l,
                      (long long)m->layers[0].n_expert);
            return false;
        }
    }
    return check_llama(m, a);
}

static bool check_mixtral(const sqz_model *m, const hf_arch *a) {
    if (!m->hp.expert_norm_topk) {
        SQZ_ERROR(SQZ_ERR_UNSUPPORTED, "config.json: %s always renormalises the top-k routing weights", a->hf_class);
        return false;
    }
    return check_moe(m, a);
}

static void write_mixtral(jw *w, const sqz_model *m, const hf_arch *a) {
    write_llama(w, m, a);
    add_num(w, "num_experts_per_tok", (double)m->hp.n_expert_used);
    add_num(w, "num_local_experts", (double)m->layers[0].n_expert);
    add_item(w, "sliding_window", cJSON_CreateNull());
}

/* intermediate_size: Qwen3-MoE's dense width is not kept by sqz (no layer uses it); written as experts used x
 * expert width, llama.cpp's own fallback for a missing expert_feed_forward_length. */
static void write_qwen3moe(jw *w, const sqz_model *m, const hf_arch *a) {
    const sqz_hparams *hp = &m->hp;
    const sqz_layer_dims *l0 = &m->layers[0];
    write_llama(w, m, a);
    add_num(w, "num_experts_per_tok", (double)hp->n_expert_used);
    cJSON *ff = cJSON_CreateNumber((double)(l0->d_ff * hp->n_expert_used));
    if (!ff || !w->o || !cJSON_ReplaceItemInObject(w->o, "intermediate_size", ff)) { /* on failure ff is ours */
        cJSON_Delete(ff);
        w->ok = false;
    }
    add_num(w, "num_experts", (double)l0->n_expert);
    add_num(w, "moe_intermediate_size", (double)l0->d_ff);
    add_bool(w, "norm_topk_prob", hp->expert_norm_topk);
    add_num(w, "decoder_sparse_step", 1);
    add_item(w, "mlp_only_layers", cJSON_CreateArray());
}

static const hf_family hf_families[] = {
    [SQZ_FAMILY_LLAMA] = {2048, "silu", NULL, true, read_llama_keys, check_llama, write_llama},
    [SQZ_FAMILY_BERT] = {512, "gelu", NULL, false, read_bert_keys, check_bert, write_bert},
    [SQZ_FAMILY_QWEN3] = {32768, "silu", NULL, true, read_llama_keys, check_llama, write_llama},
    [SQZ_FAMILY_GEMMA3] = {131072, "gelu_pytorch_tanh", "hidden_activation", true, read_gemma3_keys, check_gemma3,
                           write_gemma3},
    [SQZ_FAMILY_PHI3] = {4096, "silu", NULL, false, read_phi3_keys, check_phi3, write_phi3},
    [SQZ_FAMILY_QWEN3MOE] = {32768, "silu", NULL, true, read_qwen3moe_keys, check_moe, write_qwen3moe},
    [SQZ_FAMILY_MIXTRAL] = {131072, "silu", NULL, true, read_mixtral_keys, check_mixtral, write_mixtral},
};

static const hf_family *hf_family_of(sqz_family f) {
    return (unsigned)f < sizeof hf_families / sizeof *hf_families ? &hf_families[f] : NULL;
}

char *sqz__hf_config_write_dtype(const sqz_model *m, sqz_dtype weight_dtype) {
    const sqz_hparams *hp = &m->hp;
    const hf_arch *a = arch_for(hp);
    if (!a) {
        SQZ_ERROR(SQZ_ERR_ARCH, "config.json: no HF architecture for family %d", (int)hp->family);
        return NULL;
    }
    if (!m->layers || hp->n_layers <= 0) {
        SQZ_ERROR(SQZ_ERR_INVALID_ARG, "config.json: the model has no layers");
        return NULL;
    }
    const sqz_layer_dims *l0 = &m->layers[0];
    for (int64_t l = 1; l < hp->n_layers; l++) {
        const sqz_layer_dims *ld = &m->layers[l];
        if (ld->n_heads != l0->n_heads || ld->n_kv_heads != l0->n_kv_heads || ld->d_ff != l0->d_ff) {
            SQZ_ERROR(SQZ_ERR_UNSUPPORTED, "config.json: layer %lld has %lld heads, %lld KV heads, d_ff %lld but "
                      "layer 0 has %lld, %lld, %lld: a plain HF config cannot express per-layer dimensions: "
                      "write GGUF (--to gguf), whose per-layer arrays llama.cpp reads",
                      (long long)l, (long long)ld->n_heads, (long long)ld->n_kv_heads, (long long)ld->d_ff,
                      (long long)l0->n_heads, (long long)l0->n_kv_heads, (long long)l0->d_ff);
            return NULL;
        }
    }
    const hf_family *hf = hf_family_of(hp->family);
    if (!hf) {
        SQZ_ERROR(SQZ_ERR_ARCH, "config.json: no HF architecture for family %d", (int)hp->family);
        return NULL;
    }
    if (!hf->check(m, a)) return NULL;
    jw w = {cJSON_CreateObject(), true, false};
    w.ok = w.o != NULL;
    cJSON *classes = cJSON_CreateArray();
    if (classes && !cJSON_AddItemToArray(classes, cJSON_CreateString(a->hf_class))) w.ok = false;
    add_item(&w, "architectures", classes);
    add_str(&w, "model_type", a->model_type);
    add_num(&w, "hidden_size", (double)hp->d_model);
    add_num(&w, "intermediate_size", (double)l0->d_ff);
    add_num(&w, "num_hidden_layers", (double)hp->n_layers);
    add_num(&w, "num_attention_heads", (double)l0->n_heads);
    add_num(&w, "vocab_size", (double)hp->vocab_size);
    add_num(&w, "max_position_embeddings", (double)hp->ctx_len);
    add_str(&w, "hidden_act", hp->act == SQZ_ACT_GELU ? "gelu" : "silu");
    add_num(&w, "initializer_range", 0.02);
    hf->write(&w, m, a);
    if (m->vocab.bos >= 0) add_num(&w, "bos_token_id", m->vocab.bos);
    if (m->vocab.eos >= 0) add_num(&w, "eos_token_id", m->vocab.eos);
    add_str(&w, "torch_dtype", torch_dtype_name(weight_dtype));
    char *text = w.ok ? cJSON_Print(w.o) : NULL;
    cJSON_Delete(w.o);
    if (w.refused) return NULL; /* the reason is recorded */
    if (!text) {
        SQZ_ERROR(SQZ_ERR_NOMEM, "config.json: out of memory");
        return NULL;
    }
    /* Hand back memory the caller frees with free(), not cJSON_free. */
    char *out = sqz__strdup(text);
    cJSON_free(text);
    return out;
}

char *sqz__hf_config_write(const sqz_model *m) {
    const sqz_tensor *e = sqz_model_get(m, SQZ_ROLE_TOKEN_EMBD, -1, SQZ_PARAM_WEIGHT);
    sqz_dtype d = e && sqz_dtype_info(e->dtype)->is_float ? e->dtype : SQZ_DTYPE_F32;
    return sqz__hf_config_write_dtype(m, d);
}

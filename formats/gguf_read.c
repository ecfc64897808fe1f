/*
 * formats/gguf_read.c - GGUF v3 (and v2) checkpoints into an sqz_model.
 *
 * The file is mapped and parsed by gguf_kv.c (every count, length and byte range is
 * checked there); this file turns the checked container into the model: the
 * architecture's hyperparameters (per-layer arrays included), tensors by role (data
 * pointers into the mapping, nothing is read), and the tokenizer.* vocabulary.
 * Key names follow llama.cpp's llama-arch.cpp / gguf-py constants.py.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "formats/gguf_internal.h"

#define MAX_DIM ((int64_t)INT32_MAX) /* hyperparameters are kept below this so products fit int64 */

typedef struct reader_ctx {
    const sqz__gguf *g;
    const char *arch;
    sqz_model *m;
    const sqz__gguf_arch *a;
} reader_ctx;

static const char *arch_key(const reader_ctx *c, const char *suffix, char *buf, size_t cap) {
    snprintf(buf, cap, "%s.%s", c->arch, suffix);
    return buf;
}

/* An integer <arch>.<suffix> in [lo, MAX_DIM]; *found tells whether it was there. */
static sqz_status get_dim(const reader_ctx *c, const char *suffix, bool required, int64_t lo, bool *found,
                          int64_t *out) {
    char key[128];
    arch_key(c, suffix, key, sizeof key);
    SQZ_TRY(sqz__gguf_get_int(c->g, key, found, out));
    SQZ_RETURN_IF(!*found && required, SQZ_ERR_FORMAT, "%s: metadata '%s' is missing", c->g->path, key);
    SQZ_RETURN_IF(*found && (*out < lo || *out > MAX_DIM), SQZ_ERR_FORMAT,
                  "%s: metadata '%s' = %" PRId64 " is out of range", c->g->path, key, *out);
    return SQZ_OK;
}

enum { DIM_HEADS, DIM_KV_HEADS, DIM_FF };

static void set_layer_dim(sqz_layer_dims *ld, int which, int64_t v) {
    if (which == DIM_HEADS) ld->n_heads = v;
    else if (which == DIM_KV_HEADS) ld->n_kv_heads = v;
    else ld->d_ff = v;
}

/* A per-layer dimension stored as a scalar or as an array of n_layers integers (pruned
 * models, llama.cpp's get_key_or_arr). Fills field `which` of every m->layers entry
 * and returns the largest value as the default. */
static sqz_status get_layer_dim(const reader_ctx *c, const char *suffix, int which, bool *found, int64_t *dflt) {
    char key[128];
    arch_key(c, suffix, key, sizeof key);
    const sqz__gguf_kv *kv = sqz__gguf_find(c->g, key);
    *found = kv != NULL;
    if (!kv) return SQZ_OK;
    sqz_model *m = c->m;
    if (kv->type != SQZ__GGUF_ARRAY) {
        SQZ_TRY(get_dim(c, suffix, true, 0, found, dflt));
        for (int64_t l = 0; l < m->hp.n_layers; l++) set_layer_dim(&m->layers[l], which, *dflt);
        return SQZ_OK;
    }
    SQZ_RETURN_IF(kv->n != (uint64_t)m->hp.n_layers, SQZ_ERR_FORMAT,
                  "%s: metadata '%s' has %" PRIu64 " entries for %" PRId64 " layers", c->g->path, key, kv->n,
                  m->hp.n_layers);
    *dflt = 0;
    for (int64_t l = 0; l < m->hp.n_layers; l++) {
        int64_t v;
        SQZ_TRY(sqz__gguf_arr_int(c->g, kv, (uint64_t)l, &v));
        SQZ_RETURN_IF(v < 0 || v > MAX_DIM, SQZ_ERR_FORMAT, "%s: metadata '%s'[%" PRId64 "] = %" PRId64
                      " is out of range", c->g->path, key, l, v);
        set_layer_dim(&m->layers[l], which, v);
        if (v > *dflt) *dflt = v;
    }
    return SQZ_OK;
}

static sqz_status get_eps(const reader_ctx *c, const char *suffix, float dflt, float *out) {
    char key[128];
    bool found;
    double v = dflt;
    SQZ_TRY(sqz__gguf_get_float(c->g, arch_key(c, suffix, key, sizeof key), &found, &v));
    SQZ_RETURN_IF(found && !(v > 0 && v < 1), SQZ_ERR_FORMAT, "%s: metadata '%s' = %g is not a valid epsilon",
                  c->g->path, key, v);
    *out = (float)v;
    return SQZ_OK;
}

/* What the newer architectures add to the rotation and the attention: partial rotary
 * (rope.dimension_count), linear scaling (rope.scaling.type/factor), longrope's original context and
 * attention factor (Phi-3), and the sliding-window layers with their own base (Gemma 3: every
 * sliding_window_pattern-th layer global, 6 by default, base rope.freq_base_swa, 10000 by default, as
 * llama.cpp reads them). The factor tensors (rope_freqs, rope_factors_*) are read as tensors. */
static sqz_status read_rope_extras(const reader_ctx *c) {
    sqz_model *m = c->m;
    sqz_hparams *hp = &m->hp;
    char key[128];
    bool found;
    int64_t rot = hp->head_dim, window = 0, period = 6;
    SQZ_TRY(get_dim(c, "rope.dimension_count", false, 2, &found, &rot));
    SQZ_RETURN_IF(found && (rot > hp->head_dim || rot % 2), SQZ_ERR_FORMAT, "%s: metadata '%s.rope.dimension_count' "
                  "= %" PRId64 " does not fit head_dim %" PRId64, c->g->path, c->arch, rot, hp->head_dim);
    hp->rope_dim = rot == hp->head_dim ? 0 : rot;
    char *type = NULL;
    SQZ_TRY(sqz__gguf_get_str(c->g, arch_key(c, "rope.scaling.type", key, sizeof key), &found, &type));
    double f = 1.0, att = 1.0;
    SQZ_TRY(sqz__gguf_get_float(c->g, arch_key(c, "rope.scaling.factor", key, sizeof key), &found, &f));
    const bool linear = type && strcmp(type, "linear") == 0 && f > 0 && f != 1.0;
    free(type);
    if (linear) {
        hp->rope_scaling = SQZ_ROPE_SCALING_LINEAR;
        hp->rope_factor = (float)f;
        hp->rope_freq_scale = (float)(1.0 / f);
    }
    SQZ_TRY(get_dim(c, "rope.scaling.original_context_length", false, 1, &found, &hp->rope_ctx_orig));
    SQZ_TRY(sqz__gguf_get_float(c->g, arch_key(c, "rope.scaling.attn_factor", key, sizeof key), &found, &att));
    SQZ_RETURN_IF(!(att > 0 && att < 1e3), SQZ_ERR_FORMAT, "%s: metadata '%s' = %g is out of range", c->g->path, key, att);
    if (att != 1.0) hp->rope_attn_factor = (float)att;
    SQZ_TRY(get_dim(c, "attention.sliding_window", false, 0, &found, &window));
    if (window <= 0 || strcmp(c->arch, "gemma3") != 0) return SQZ_OK; /* llama.cpp runs others without */
    SQZ_TRY(get_dim(c, "attention.sliding_window_pattern", false, 1, &found, &period));
    double base = 10000.0;
    SQZ_TRY(sqz__gguf_get_float(c->g, arch_key(c, "rope.freq_base_swa", key, sizeof key), &found, &base));
    SQZ_RETURN_IF(!(base > 0 && base < 1e30), SQZ_ERR_FORMAT, "%s: metadata '%s' = %g is out of range", c->g->path,
                  key, base);
    hp->rope_theta_local = (float)base;
    hp->sliding_window = window;
    for (int64_t l = 0; l < hp->n_layers; l++) m->layers[l].window = (l + 1) % period != 0 ? window : 0;
    /* llama.cpp's attention scale: 1/sqrt(head_dim), but 1/sqrt(n_embd / n_head) for the 27B (62 layers) */
    if (hp->n_layers == 62) hp->attn_scale = 1.0f / sqrtf((float)(hp->d_model / hp->n_heads));
    return SQZ_OK;
}

/* <arch>.expert_count / expert_used_count: a mixture of experts (the row's moe_family), each layer's
 * d_ff then the width of one expert; llama.cpp renormalises the top-k weights of both architectures. */
static sqz_status read_experts(const reader_ctx *c, const sqz__gguf_arch *a) {
    sqz_model *m = c->m;
    sqz_hparams *hp = &m->hp;
    bool found;
    SQZ_TRY(get_dim(c, "expert_count", false, 0, &found, &hp->n_expert));
    if (!found || hp->n_expert == 0) {
        hp->n_expert = 0;
        SQZ_RETURN_IF(sqz_family_get(hp->family)->experts, SQZ_ERR_FORMAT, "%s: metadata '%s.expert_count' is "
                      "missing: a %s model is a mixture of experts", c->g->path, c->arch, c->arch);
        return SQZ_OK;
    }
    SQZ_RETURN_IF(!a->moe_family, SQZ_ERR_ARCH, "%s: %s.expert_count = %" PRId64 ": sqz reads mixtures of experts "
                  "as llama (Mixtral) and qwen3moe, not as %s", c->g->path, c->arch, hp->n_expert, c->arch);
    hp->family = a->moe_family;
    SQZ_TRY(get_dim(c, "expert_used_count", true, 1, &found, &hp->n_expert_used));
    hp->expert_norm_topk = true;
    if (a->expert_ff_key) {
        SQZ_TRY(get_dim(c, a->expert_ff_key, false, 1, &found, &hp->d_ff));
        if (!found) hp->d_ff /= hp->n_expert_used; /* llama.cpp's fallback n_ff / n_expert_used */
    }
    for (int64_t l = 0; l < hp->n_layers; l++) {
        m->layers[l].n_expert = hp->n_expert;
        if (a->expert_ff_key) m->layers[l].d_ff = hp->d_ff;
    }
    return SQZ_OK;
}

static sqz_status read_hparams(const reader_ctx *c, const sqz__gguf_arch *a) {
    sqz_model *m = c->m;
    sqz_hparams *hp = &m->hp;
    bool found;
    snprintf(hp->arch, sizeof hp->arch, "%s", a->name);
    hp->family = a->family;
    hp->rope_layout = a->rope;
    hp->act = a->act;
    SQZ_TRY(get_dim(c, "block_count", true, 1, &found, &hp->n_layers));
    SQZ_RETURN_IF(hp->n_layers > 65536, SQZ_ERR_FORMAT, "%s: %s.block_count %" PRId64 " is absurd", c->g->path,
                  c->arch, hp->n_layers);
    SQZ_TRY(get_dim(c, "embedding_length", true, 1, &found, &hp->d_model));
    SQZ_TRY(get_dim(c, "context_length", true, 0, &found, &hp->ctx_len));
    SQZ_TRY(sqz_model_init_layers(m));
    SQZ_TRY(get_layer_dim(c, "attention.head_count", DIM_HEADS, &found, &hp->n_heads));
    SQZ_RETURN_IF(!found, SQZ_ERR_FORMAT, "%s: metadata '%s.attention.head_count' is missing", c->g->path, c->arch);
    SQZ_TRY(get_layer_dim(c, "attention.head_count_kv", DIM_KV_HEADS, &found, &hp->n_kv_heads));
    if (!found) { /* no GQA: as many KV heads as heads, layer by layer */
        hp->n_kv_heads = hp->n_heads;
        for (int64_t l = 0; l < hp->n_layers; l++) m->layers[l].n_kv_heads = m->layers[l].n_heads;
    }
    SQZ_TRY(get_layer_dim(c, "feed_forward_length", DIM_FF, &found, &hp->d_ff));
    SQZ_RETURN_IF(!found, SQZ_ERR_FORMAT, "%s: metadata '%s.feed_forward_length' is missing", c->g->path, c->arch);
    SQZ_TRY(read_experts(c, a));
    SQZ_TRY(get_dim(c, "attention.key_length", false, 1, &found, &hp->head_dim));
    if (!found) {
        SQZ_RETURN_IF(hp->n_heads <= 0 || hp->d_model % hp->n_heads != 0, SQZ_ERR_FORMAT,
                      "%s: embedding length %" PRId64 " is not a multiple of %" PRId64 " heads and %s.attention."
                      "key_length is missing", c->g->path, hp->d_model, hp->n_heads, c->arch);
        hp->head_dim = hp->d_model / hp->n_heads;
    }
    const sqz_family_info *fi = sqz_family_get(hp->family);
    if (fi->positions == SQZ_POS_ROTARY) {
        char key[128];
        double theta = 10000.0;
        SQZ_TRY(sqz__gguf_get_float(c->g, arch_key(c, "rope.freq_base", key, sizeof key), &found, &theta));
        SQZ_RETURN_IF(!(theta > 0 && theta < 1e30), SQZ_ERR_FORMAT, "%s: metadata '%s' = %g is out of range",
                      c->g->path, key, theta);
        hp->rope_theta = (float)theta;
        SQZ_TRY(read_rope_extras(c));
    } else {
        hp->rope_theta = 0;
    }
    if (fi->norm == SQZ_NORM_RMS) SQZ_TRY(get_eps(c, "attention.layer_norm_rms_epsilon", 1e-5f, &hp->norm_eps));
    else SQZ_TRY(get_eps(c, "attention.layer_norm_epsilon", 1e-12f, &hp->norm_eps));
    SQZ_TRY(get_dim(c, "vocab_size", false, 1, &found, &hp->vocab_size));
    if (!found) hp->vocab_size = 0; /* from the tokenizer or the embedding, later */
    if (fi->token_types) {
        SQZ_TRY(sqz__gguf_get_int(c->g, "tokenizer.ggml.token_type_count", &found, &hp->n_token_types));
        if (!found) SQZ_TRY(get_dim(c, "token_type_count", false, 0, &found, &hp->n_token_types));
        SQZ_RETURN_IF(found && (hp->n_token_types < 0 || hp->n_token_types > MAX_DIM), SQZ_ERR_FORMAT,
                      "%s: token type count %" PRId64 " is out of range", c->g->path, hp->n_token_types);
        if (!found) hp->n_token_types = -1; /* from the token_types tensor, later */
    }
    return SQZ_OK;
}

/* A fused tensor of layer t->layer split into roles[0..n), rows[i] rows each, views of its rows
 * (phi3's ffn_up: gate then up; attn_qkv: q, k, v). */
static sqz_status add_split(const reader_ctx *c, const sqz_tensor *t, const sqz_role *roles, const int64_t *rows,
                            int n) {
    int64_t total = 0;
    for (int i = 0; i < n; i++) total += rows[i];
    size_t row_bytes;
    SQZ_RETURN_IF(t->shape[0] != total || !sqz_dtype_nbytes(t->dtype, t->ndim == 2 ? t->shape[1] : 1, &row_bytes),
                  SQZ_ERR_SHAPE, "%s: tensor '%s': %" PRId64 " rows, a fused projection of this layer needs %" PRId64,
                  c->g->path, t->name, t->shape[0], total);
    const uint8_t *p = t->data;
    for (int i = 0; i < n; i++) {
        char name[SQZ__GGUF_MAX_NAME + 1];
        sqz__gguf_tensor_name(roles[i], t->layer, t->param, name, sizeof name);
        sqz_tensor u = *t;
        u.name = name;
        u.role = roles[i];
        u.shape[0] = rows[i];
        u.nbytes = (size_t)rows[i] * row_bytes;
        u.data = (void *)(uintptr_t)p;
        if (!sqz_model_add_tensor(c->m, &u)) return SQZ_ERR_NOMEM;
        p += u.nbytes;
    }
    return SQZ_OK;
}

/* The fused forms of an architecture that stores them (phi3): true when t was one and is added split. */
static sqz_status add_fused(const reader_ctx *c, const sqz__gguf_arch *a, sqz_tensor *t, bool *done) {
    *done = false;
    if (!a->fused_gate_up || t->layer < 0 || t->layer >= c->m->hp.n_layers) return SQZ_OK;
    const sqz_layer_dims *ld = &c->m->layers[t->layer];
    const int64_t hd = c->m->hp.head_dim;
    if (t->role == SQZ_ROLE_FFN_UP && t->shape[0] == 2 * ld->d_ff) {
        static const sqz_role gu[] = {SQZ_ROLE_FFN_GATE, SQZ_ROLE_FFN_UP};
        const int64_t rows[] = {ld->d_ff, ld->d_ff};
        *done = true;
        return add_split(c, t, gu, rows, 2);
    }
    if (t->role == SQZ_ROLE_ATTN_QKV) {
        static const sqz_role qkv[] = {SQZ_ROLE_ATTN_Q, SQZ_ROLE_ATTN_K, SQZ_ROLE_ATTN_V};
        const int64_t rows[] = {ld->n_heads * hd, ld->n_kv_heads * hd, ld->n_kv_heads * hd};
        *done = true;
        return add_split(c, t, qkv, rows, 3);
    }
    return SQZ_OK;
}

static sqz_status read_tensors(const reader_ctx *c) {
    const sqz__gguf *g = c->g;
    sqz_model *m = c->m;
    for (int64_t i = 0; i < g->n_tensors; i++) {
        const sqz__gguf_tinfo *ti = &g->ti[i];
        char name[SQZ__GGUF_MAX_NAME + 1];
        memcpy(name, ti->name, ti->name_len); /* name_len <= SQZ__GGUF_MAX_NAME, no NUL inside */
        name[ti->name_len] = 0;
        sqz_tensor t = {.name = name, .dtype = ti->dtype, .ndim = (int32_t)ti->n_dims, .nbytes = ti->nbytes,
                        .owned = false};
        if (!sqz__gguf_parse_tensor_name(name, &t.role, &t.layer, &t.param)) {
            return SQZ_ERROR(SQZ_ERR_FORMAT, "%s: tensor '%s' is not part of a %s model as sqz knows it "
                             "(unknown name)", g->path, name, c->arch);
        }
        if (t.role == SQZ_ROLE_ROPE_FREQS) m->hp.rope_scaling = SQZ_ROPE_SCALING_LLAMA3;
        if (t.role == SQZ_ROLE_ROPE_FACTORS_LONG || t.role == SQZ_ROLE_ROPE_FACTORS_SHORT)
            m->hp.rope_scaling = SQZ_ROPE_SCALING_LONGROPE;
        SQZ_RETURN_IF(t.layer >= m->hp.n_layers, SQZ_ERR_FORMAT, "%s: tensor '%s': layer %d beyond %s.block_count %"
                      PRId64, g->path, name, (int)t.layer, c->arch, m->hp.n_layers);
        for (uint32_t d = 0; d < ti->n_dims; d++) t.shape[d] = ti->ne[ti->n_dims - 1 - d];
        t.data = (void *)(uintptr_t)(g->data + g->data_start + ti->offset);
        bool fused;
        SQZ_TRY(add_fused(c, c->a, &t, &fused));
        if (fused) continue;
        SQZ_RETURN_IF(t.role == SQZ_ROLE_ATTN_QKV, SQZ_ERR_FORMAT, "%s: tensor '%s': a fused attn_qkv in a %s model "
                      "(sqz splits it for phi3 only)", g->path, name, c->arch);
        if (!sqz_model_add_tensor(m, &t)) return SQZ_ERR_NOMEM;
    }
    return SQZ_OK;
}

static sqz_status vocab_kind(const reader_ctx *c, const char *model, sqz_vocab_kind *k) {
    if (strcmp(model, "llama") == 0) *k = SQZ_VOCAB_SPM;
    else if (strcmp(model, "gpt2") == 0) *k = SQZ_VOCAB_BPE;
    else if (strcmp(model, "bert") == 0) *k = SQZ_VOCAB_WPM;
    else if (strcmp(model, "no") == 0 || strcmp(model, "none") == 0) *k = SQZ_VOCAB_NONE;
    else return SQZ_ERROR(SQZ_ERR_UNSUPPORTED, "%s: tokenizer.ggml.model '%s' is not supported (sqz reads llama, "
                          "gpt2, bert)", c->g->path, model);
    return SQZ_OK;
}

/* An array of n strings into a new char*[n]; every entry valid UTF-8 without NUL. wpm: turn
 * llama.cpp's WordPiece spelling back into HF's. */
static sqz_status read_str_array(const sqz__gguf *g, const sqz__gguf_kv *kv, const char *key, bool wpm,
                                 char ***out) {
    SQZ_RETURN_IF(kv->type != SQZ__GGUF_ARRAY || kv->arr_type != SQZ__GGUF_STRING, SQZ_ERR_FORMAT,
                  "%s: metadata '%s' is not an array of strings", g->path, key);
    char **a = sqz__calloc(kv->n ? (size_t)kv->n : 1, sizeof *a);
    if (!a) return SQZ_ERR_NOMEM;
    *out = a; /* the caller owns it from here, filled or not */
    sqz__gguf_str_iter it;
    sqz__gguf_str_iter_init(g, kv, &it);
    for (uint64_t i = 0; i < kv->n; i++) {
        size_t len = 0;
        const char *s = sqz__gguf_str_next(&it, &len);
        SQZ_RETURN_IF(!s, SQZ_ERR_FORMAT, "%s: metadata '%s'[%" PRIu64 "] is truncated", g->path, key, i);
        SQZ_RETURN_IF(memchr(s, 0, len) || !sqz__utf8_valid(s, len), SQZ_ERR_FORMAT,
                      "%s: metadata '%s'[%" PRIu64 "] is not valid UTF-8 text", g->path, key, i);
        a[i] = wpm ? sqz__wpm_from_gguf(s, len) : sqz__strndup(s, len);
        if (!a[i]) return SQZ_ERR_NOMEM;
    }
    return SQZ_OK;
}

/* A special token id. As llama.cpp reads them (llama-vocab.cpp): 0xFFFFFFFF (-1 stored as
 * uint32, what llama-convert-llama2c-to-ggml writes for "no padding token") means none, and
 * any other id outside the vocabulary is ignored (llama.cpp warns and ignores it), so that
 * every file llama.cpp opens, sqz opens. */
static sqz_status read_token_id(const reader_ctx *c, const char *key, int32_t *out) {
    bool found;
    int64_t v;
    SQZ_TRY(sqz__gguf_get_int(c->g, key, &found, &v));
    if (!found || v < 0 || v >= c->m->vocab.n_tokens) return SQZ_OK;
    *out = (int32_t)v;
    return SQZ_OK;
}

static sqz_status read_vocab(const reader_ctx *c) {
    const sqz__gguf *g = c->g;
    sqz_vocab *v = &c->m->vocab;
    bool found;
    char *model = NULL;
    SQZ_TRY(sqz__gguf_get_str(g, "tokenizer.ggml.model", &found, &model));
    if (!found) return SQZ_OK;
    sqz_status s = vocab_kind(c, model, &v->kind);
    free(model);
    SQZ_TRY(s);
    if (v->kind == SQZ_VOCAB_NONE) return SQZ_OK;

    const sqz__gguf_kv *kv = sqz__gguf_find(g, "tokenizer.ggml.tokens");
    SQZ_RETURN_IF(!kv, SQZ_ERR_FORMAT, "%s: tokenizer.ggml.model is set but tokenizer.ggml.tokens is missing", g->path);
    SQZ_RETURN_IF(kv->type == SQZ__GGUF_ARRAY && (kv->n == 0 || kv->n > SQZ__MAX_VOCAB), SQZ_ERR_FORMAT,
                  "%s: tokenizer.ggml.tokens has %" PRIu64 " entries (1 to %d allowed)", g->path, kv->n,
                  SQZ__MAX_VOCAB);
    s = read_str_array(g, kv, "tokenizer.ggml.tokens", v->kind == SQZ_VOCAB_WPM, &v->tokens);
    if (v->tokens) v->n_tokens = (int32_t)kv->n; /* NULL entries past a failure are fine to free */
    SQZ_TRY(s);

    if ((kv = sqz__gguf_find(g, "tokenizer.ggml.scores")) != NULL) {
        SQZ_RETURN_IF(kv->type != SQZ__GGUF_ARRAY ||
                          (kv->arr_type != SQZ__GGUF_FLOAT32 && kv->arr_type != SQZ__GGUF_FLOAT64) ||
                          kv->n != (uint64_t)v->n_tokens,
                      SQZ_ERR_FORMAT, "%s: tokenizer.ggml.scores is not an array of %d floats", g->path,
                      (int)v->n_tokens);
        v->scores = sqz__malloc((size_t)v->n_tokens * sizeof *v->scores);
        if (!v->scores) return SQZ_ERR_NOMEM;
        for (int32_t i = 0; i < v->n_tokens; i++) v->scores[i] = (float)sqz__gguf_arr_float(g, kv, (uint64_t)i);
    }
    if ((kv = sqz__gguf_find(g, "tokenizer.ggml.token_type")) != NULL) {
        SQZ_RETURN_IF(kv->type != SQZ__GGUF_ARRAY || kv->n != (uint64_t)v->n_tokens, SQZ_ERR_FORMAT,
                      "%s: tokenizer.ggml.token_type is not an array of %d integers", g->path, (int)v->n_tokens);
        v->types = sqz__malloc((size_t)v->n_tokens * sizeof *v->types);
        if (!v->types) return SQZ_ERR_NOMEM;
        for (int32_t i = 0; i < v->n_tokens; i++) {
            int64_t t;
            SQZ_TRY(sqz__gguf_arr_int(g, kv, (uint64_t)i, &t));
            SQZ_RETURN_IF(t < INT32_MIN || t > INT32_MAX, SQZ_ERR_FORMAT, "%s: tokenizer.ggml.token_type[%d] = %"
                          PRId64 " is out of range", g->path, (int)i, t);
            v->types[i] = (int32_t)t;
        }
    }
    if ((kv = sqz__gguf_find(g, "tokenizer.ggml.merges")) != NULL) {
        s = read_str_array(g, kv, "tokenizer.ggml.merges", false, &v->merges);
        if (v->merges) v->n_merges = (int32_t)kv->n; /* n <= SQZ__MAX_ARRAY */
        SQZ_TRY(s);
    }
    SQZ_TRY(read_token_id(c, "tokenizer.ggml.bos_token_id", &v->bos));
    SQZ_TRY(read_token_id(c, "tokenizer.ggml.eos_token_id", &v->eos));
    SQZ_TRY(read_token_id(c, "tokenizer.ggml.unknown_token_id", &v->unk));
    SQZ_TRY(read_token_id(c, "tokenizer.ggml.padding_token_id", &v->pad));
    SQZ_TRY(read_token_id(c, "tokenizer.ggml.seperator_token_id", &v->sep)); /* sic, as llama.cpp spells it */
    SQZ_TRY(read_token_id(c, "tokenizer.ggml.cls_token_id", &v->cls));
    SQZ_TRY(read_token_id(c, "tokenizer.ggml.mask_token_id", &v->mask));
    /* llama.cpp's defaults when the flags are absent. */
    v->add_bos = v->kind == SQZ_VOCAB_SPM || v->kind == SQZ_VOCAB_WPM;
    v->add_eos = false;
    v->add_space_prefix = v->kind == SQZ_VOCAB_SPM;
    SQZ_TRY(sqz__gguf_get_bool(g, "tokenizer.ggml.add_bos_token", &found, &v->add_bos));
    if (!found) v->unstated |= SQZ_VOCAB_UNSTATED_ADD_BOS;
    SQZ_TRY(sqz__gguf_get_bool(g, "tokenizer.ggml.add_eos_token", &found, &v->add_eos));
    if (!found) v->unstated |= SQZ_VOCAB_UNSTATED_ADD_EOS;
    SQZ_TRY(sqz__gguf_get_bool(g, "tokenizer.ggml.add_space_prefix", &found, &v->add_space_prefix));
    if (!found) v->unstated |= SQZ_VOCAB_UNSTATED_ADD_SPACE_PREFIX;
    SQZ_TRY(sqz__gguf_get_str(g, "tokenizer.ggml.pre", &found, &v->pre));
    SQZ_TRY(sqz__gguf_get_str(g, "tokenizer.chat_template", &found, &v->chat_template));
    return SQZ_OK;
}

/* What the metadata left open, from the tensors and the vocabulary. */
static sqz_status finish_hparams(const reader_ctx *c) {
    sqz_model *m = c->m;
    sqz_hparams *hp = &m->hp;
    const sqz_tensor *embd = sqz_model_get(m, SQZ_ROLE_TOKEN_EMBD, -1, SQZ_PARAM_WEIGHT);
    if (hp->vocab_size == 0) {
        if (m->vocab.n_tokens > 0) hp->vocab_size = m->vocab.n_tokens;
        else if (embd) hp->vocab_size = embd->shape[0];
    }
    SQZ_RETURN_IF(hp->vocab_size <= 0, SQZ_ERR_FORMAT, "%s: vocabulary size unknown (no %s.vocab_size, no "
                  "tokenizer.ggml.tokens, no token_embd.weight)", c->g->path, c->arch);
    const sqz_family_info *fi = sqz_family_get(hp->family);
    if (fi->lm_head) hp->tied_embeddings = sqz_model_get(m, SQZ_ROLE_OUTPUT, -1, SQZ_PARAM_WEIGHT) == NULL;
    if (fi->token_types && hp->n_token_types < 0) {
        const sqz_tensor *tt = sqz_model_get(m, SQZ_ROLE_TYPE_EMBD, -1, SQZ_PARAM_WEIGHT);
        hp->n_token_types = tt ? tt->shape[0] : 0;
    }
    for (int64_t i = 0; i < m->n_tensors; i++) {
        const sqz_tensor *t = &m->tensors[i];
        if (t->param == SQZ_PARAM_BIAS && (t->role == SQZ_ROLE_ATTN_Q || t->role == SQZ_ROLE_ATTN_K ||
                                           t->role == SQZ_ROLE_ATTN_V)) {
            hp->attn_bias = true;
        }
    }
    return SQZ_OK;
}

/* Where entry i's bytes end: the next entry's start (its u64 key length), after the last
 * entry the first tensor info's start. SIZE_MAX when unknown (a file without tensors). */
static size_t kv_end(const sqz__gguf *g, int64_t i) {
    if (i + 1 < g->n_kv) return (size_t)((const uint8_t *)g->kv[i + 1].key - g->data) - 8;
    if (g->n_tensors > 0) return (size_t)((const uint8_t *)g->ti[0].name - g->data) - 8;
    return SIZE_MAX;
}

/* Copies the entries sqz does not own into m->gguf_meta, verbatim (docs/formats.md). */
static sqz_status keep_meta(const sqz__gguf *g, const char *arch, sqz_model *m) {
    sqz_gguf_meta *gm = &m->gguf_meta;
    size_t total = 0;
    for (int64_t i = 0; i < g->n_kv; i++) {
        const sqz__gguf_kv *kv = &g->kv[i];
        if (sqz__gguf_key_owned(kv->key, kv->key_len, arch) || kv_end(g, i) == SIZE_MAX) continue;
        total += kv_end(g, i) - ((size_t)((const uint8_t *)kv->key - g->data) - 8);
        gm->n++;
    }
    if (gm->n == 0) return SQZ_OK;
    gm->off = sqz__calloc((size_t)gm->n + 1, sizeof *gm->off);
    gm->bytes = sqz__malloc(total);
    if (!gm->off || !gm->bytes) return SQZ_ERR_NOMEM; /* freed with the model */
    int64_t j = 0;
    for (int64_t i = 0; i < g->n_kv; i++) {
        const sqz__gguf_kv *kv = &g->kv[i];
        if (sqz__gguf_key_owned(kv->key, kv->key_len, arch) || kv_end(g, i) == SIZE_MAX) continue;
        size_t start = (size_t)((const uint8_t *)kv->key - g->data) - 8, n = kv_end(g, i) - start;
        memcpy(gm->bytes + gm->off[j], g->data + start, n);
        gm->off[j + 1] = gm->off[j] + n;
        j++;
    }
    return SQZ_OK;
}

static sqz_status read_model(const sqz__gguf *g, sqz_model *m) {
    bool found;
    char *arch = NULL;
    SQZ_TRY(sqz__gguf_get_str(g, "general.architecture", &found, &arch));
    SQZ_RETURN_IF(!found, SQZ_ERR_FORMAT, "%s: metadata 'general.architecture' is missing", g->path);
    const sqz__gguf_arch *a = sqz__gguf_arch_find(arch);
    if (!a) {
        sqz_status s = SQZ_ERROR(SQZ_ERR_ARCH, "%s: architecture '%.64s' is not supported (sqz reads: %s)", g->path,
                                 arch, sqz__gguf_arch_list());
        free(arch);
        return s;
    }
    free(arch);
    reader_ctx c = {.g = g, .arch = a->name, .m = m, .a = a};
    int64_t ftype = -1;
    bool has_ftype = false;
    SQZ_TRY(sqz__gguf_get_int(g, "general.file_type", &has_ftype, &ftype));
    m->gguf_file_type = has_ftype && ftype >= 0 && ftype < 1024 ? (int32_t)ftype : -1;
    SQZ_TRY(read_hparams(&c, a));
    SQZ_TRY(read_tensors(&c));
    SQZ_TRY(read_vocab(&c));
    SQZ_TRY(finish_hparams(&c));
    free(m->name);
    m->name = NULL;
    SQZ_TRY(sqz__gguf_get_str(g, "general.name", &found, &m->name));
    return keep_meta(g, a->name, m);
}

sqz_status sqz__gguf_read_mem(const char *path, const uint8_t *data, size_t size, sqz_model *m) {
    sqz__gguf g;
    SQZ_TRY(sqz__gguf_parse(path, data, size, &g));
    sqz_status s = read_model(&g, m);
    sqz__gguf_free(&g);
    return s;
}

sqz_status sqz__gguf_open(const char *path, sqz_model *m) {
    sqz_mapping *map;
    SQZ_TRY(sqz_map(path, &map));
    SQZ_TRY(sqz_model_keep_mapping(m, map)); /* unmapped with the model, or at once on failure */
    return sqz__gguf_read_mem(path, map->data, map->size, m);
}

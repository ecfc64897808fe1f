/* core/model.c - the model representation: tensors by (layer, role, param),
 * per-layer dimensions, parameter counts and shape validation. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/internal.h"
#include "sqz/family.h"
#include "sqz/io.h"
#include "sqz/model.h"

struct sqz_model_store {
    void **bufs;
    size_t n_bufs, cap_bufs;
    sqz_mapping **maps;
    size_t n_maps;
    int64_t cap_tensors;
};

sqz_model *sqz_model_new(void) {
    sqz_model *m = sqz__calloc(1, sizeof *m);
    if (!m) return NULL;
    m->store = sqz__calloc(1, sizeof *m->store);
    if (!m->store) { free(m); return NULL; }
    sqz_vocab_init(&m->vocab);
    m->gguf_file_type = -1;
    return m;
}

void sqz_model_free(sqz_model *m) {
    if (!m) return;
    for (int64_t i = 0; i < m->n_tensors; i++) {
        if (m->tensors[i].owned) free(m->tensors[i].data);
        free(m->tensors[i].name);
    }
    free(m->tensors);
    free(m->layers);
    sqz_vocab_clear(&m->vocab);
    free(m->name);
    free(m->source_path);
    free(m->gguf_meta.off);
    free(m->gguf_meta.bytes);
    if (m->store) {
        for (size_t i = 0; i < m->store->n_bufs; i++) free(m->store->bufs[i]);
        free(m->store->bufs);
        for (size_t i = 0; i < m->store->n_maps; i++) sqz_unmap(m->store->maps[i]);
        free(m->store->maps);
        free(m->store);
    }
    free(m);
}

sqz_status sqz_model_keep(sqz_model *m, void *buf) {
    sqz_model_store *s = m->store;
    if (s->n_bufs == s->cap_bufs) {
        size_t cap = s->cap_bufs ? s->cap_bufs * 2 : 8;
        void **b = sqz__realloc(s->bufs, cap * sizeof *b);
        if (!b) { free(buf); return SQZ_ERR_NOMEM; }
        s->bufs = b;
        s->cap_bufs = cap;
    }
    s->bufs[s->n_bufs++] = buf;
    return SQZ_OK;
}

sqz_status sqz_model_keep_mapping(sqz_model *m, sqz_mapping *map) {
    sqz_model_store *s = m->store;
    sqz_mapping **mm = sqz__realloc(s->maps, (s->n_maps + 1) * sizeof *mm);
    if (!mm) { sqz_unmap(map); return SQZ_ERR_NOMEM; }
    s->maps = mm;
    s->maps[s->n_maps++] = map;
    return SQZ_OK;
}

sqz_tensor *sqz_model_get(const sqz_model *m, sqz_role role, int32_t layer, sqz_param param) {
    for (int64_t i = 0; i < m->n_tensors; i++) {
        sqz_tensor *t = &m->tensors[i];
        if (t->role == role && t->layer == layer && t->param == param) return t;
    }
    return NULL;
}

int64_t sqz_model_find(const sqz_model *m, const char *name) {
    for (int64_t i = 0; i < m->n_tensors; i++) {
        if (strcmp(m->tensors[i].name, name) == 0) return i;
    }
    return -1;
}

sqz_tensor *sqz_model_add_tensor(sqz_model *m, const sqz_tensor *t) {
    sqz_model_store *s = m->store;
    if (m->n_tensors == s->cap_tensors) {
        int64_t cap = s->cap_tensors ? s->cap_tensors * 2 : 64;
        sqz_tensor *nt = sqz__realloc(m->tensors, (size_t)cap * sizeof *nt);
        if (!nt) return NULL;
        m->tensors = nt;
        s->cap_tensors = cap;
    }
    char *name = sqz__strdup(t->name ? t->name : "");
    if (!name) return NULL;
    sqz_tensor *d = &m->tensors[m->n_tensors++];
    *d = *t;
    d->name = name;
    for (int i = d->ndim; i < SQZ_MAX_DIMS; i++) d->shape[i] = 1;
    return d;
}

sqz_status sqz_model_init_layers(sqz_model *m) {
    SQZ_RETURN_IF(m->hp.n_layers < 0 || m->hp.n_layers > 100000, SQZ_ERR_FORMAT, "absurd layer count %" PRId64,
                  m->hp.n_layers);
    free(m->layers);
    m->layers = sqz__calloc((size_t)(m->hp.n_layers ? m->hp.n_layers : 1), sizeof *m->layers);
    if (!m->layers) return SQZ_ERR_NOMEM;
    for (int64_t l = 0; l < m->hp.n_layers; l++) {
        m->layers[l] = (sqz_layer_dims){m->hp.n_heads, m->hp.n_kv_heads, m->hp.d_ff, 0, m->hp.n_expert};
    }
    return SQZ_OK;
}

int64_t sqz_model_param_count(const sqz_model *m) {
    int64_t n = 0;
    for (int64_t i = 0; i < m->n_tensors; i++) {
        n += sqz_tensor_nelements(&m->tensors[i]);
    }
    return n;
}

int64_t sqz_model_active_param_count(const sqz_model *m) {
    int64_t n = 0;
    for (int64_t i = 0; i < m->n_tensors; i++) {
        const sqz_tensor *t = &m->tensors[i];
        const sqz_role r = t->role;
        const bool exps = r == SQZ_ROLE_FFN_GATE_EXPS || r == SQZ_ROLE_FFN_UP_EXPS || r == SQZ_ROLE_FFN_DOWN_EXPS;
        const int64_t ne = sqz_tensor_nelements(t);
        n += exps && t->shape[0] > 0 ? ne / t->shape[0] * m->hp.n_expert_used : ne;
    }
    return n;
}

int64_t sqz_model_data_bytes(const sqz_model *m) {
    int64_t n = 0;
    for (int64_t i = 0; i < m->n_tensors; i++) {
        n += (int64_t)m->tensors[i].nbytes;
    }
    return n;
}

const char *sqz_rope_layout_name(sqz_rope_layout r) {
    switch (r) {
    case SQZ_ROPE_INTERLEAVED: return "interleaved";
    case SQZ_ROPE_HALF: return "half";
    default: return "none";
    }
}

/* Expected shape of (role, param) in layer l; ndim 0 when the role is not part of the family. */
static int expected_shape(const sqz_model *m, sqz_role role, sqz_param param, int32_t l, int64_t shape[3]) {
    const sqz_hparams *hp = &m->hp;
    const sqz_layer_dims *ld = l >= 0 ? &m->layers[l] : NULL;
    const int64_t d = hp->d_model, hd = hp->head_dim;
    int64_t rows = 0, cols = 0;
    switch (role) {
    case SQZ_ROLE_TOKEN_EMBD: rows = hp->vocab_size; cols = d; break;
    case SQZ_ROLE_OUTPUT: rows = hp->vocab_size; cols = d; break;
    case SQZ_ROLE_POS_EMBD: rows = hp->ctx_len; cols = d; break;
    case SQZ_ROLE_TYPE_EMBD: rows = hp->n_token_types; cols = d; break;
    case SQZ_ROLE_POOLER: rows = d; cols = d; break;
    case SQZ_ROLE_EMBD_NORM: case SQZ_ROLE_OUTPUT_NORM: case SQZ_ROLE_ATTN_NORM: case SQZ_ROLE_FFN_NORM:
    case SQZ_ROLE_ATTN_OUT_NORM: case SQZ_ROLE_LAYER_OUT_NORM: case SQZ_ROLE_ATTN_POST_NORM:
    case SQZ_ROLE_FFN_POST_NORM:
        shape[0] = d;
        return 1;
    case SQZ_ROLE_ATTN_Q_NORM: case SQZ_ROLE_ATTN_K_NORM:
        shape[0] = hd;
        return param == SQZ_PARAM_WEIGHT;
    case SQZ_ROLE_ROPE_FREQS: case SQZ_ROLE_ROPE_FACTORS_LONG: case SQZ_ROLE_ROPE_FACTORS_SHORT:
        shape[0] = (hp->rope_dim > 0 ? hp->rope_dim : hd) / 2;
        return param == SQZ_PARAM_WEIGHT;
    case SQZ_ROLE_ATTN_Q: rows = ld->n_heads * hd; cols = d; break;
    case SQZ_ROLE_ATTN_K: case SQZ_ROLE_ATTN_V: rows = ld->n_kv_heads * hd; cols = d; break;
    case SQZ_ROLE_ATTN_OUT: rows = d; cols = ld->n_heads * hd; break;
    case SQZ_ROLE_FFN_GATE: case SQZ_ROLE_FFN_UP: rows = ld->d_ff; cols = d; break;
    case SQZ_ROLE_FFN_DOWN: rows = d; cols = ld->d_ff; break;
    case SQZ_ROLE_FFN_GATE_INP: rows = ld->n_expert; cols = d; break;
    case SQZ_ROLE_FFN_GATE_EXPS: case SQZ_ROLE_FFN_UP_EXPS: case SQZ_ROLE_FFN_DOWN_EXPS:
        if (param != SQZ_PARAM_WEIGHT) return 0;
        shape[0] = ld->n_expert;
        shape[1] = role == SQZ_ROLE_FFN_DOWN_EXPS ? d : ld->d_ff;
        shape[2] = role == SQZ_ROLE_FFN_DOWN_EXPS ? ld->d_ff : d;
        return 3;
    default: return 0;
    }
    if (param == SQZ_PARAM_BIAS) {
        shape[0] = rows;
        return 1;
    }
    shape[0] = rows;
    shape[1] = cols;
    return 2;
}

sqz_status sqz_model_check_finite(const sqz_model *m) {
    for (int64_t i = 0; i < m->n_tensors; i++) {
        const sqz_tensor *t = &m->tensors[i];
        const sqz_status st = sqz_tensor_check_finite(t);
        /* a mapped tensor's pages leave the resident set again (they are the file's: a later read faults
         * them in once more), so checking a model does not hold all of it in memory */
        if (!t->owned && t->data) (void)sqz__mapping_release(t->data, t->nbytes);
        if (st != SQZ_OK && m->source_path) sqz__error_prefix("%s", m->source_path);
        if (st != SQZ_OK) return st;
    }
    return SQZ_OK;
}

/* Whether the family's row places `role` in its models: the layer roles, the embeddings, norms and
 * classifier every family has, and the row's extra globals. */
static bool role_in_family(const sqz_family_info *fi, sqz_role role) {
    for (int i = 0; i < fi->n_layer_roles; i++) {
        if (fi->layer_roles[i] == role) return true;
    }
    for (int i = 0; i < fi->n_extra_global; i++) {
        if (fi->extra_global[i] == role) return true;
    }
    switch (role) {
    case SQZ_ROLE_ATTN_Q_NORM: case SQZ_ROLE_ATTN_K_NORM: case SQZ_ROLE_ATTN_POST_NORM: case SQZ_ROLE_FFN_POST_NORM:
    case SQZ_ROLE_ROPE_FREQS: case SQZ_ROLE_ROPE_FACTORS_LONG: case SQZ_ROLE_ROPE_FACTORS_SHORT:
    case SQZ_ROLE_ATTN_QKV: case SQZ_ROLE_FFN_GATE_INP: case SQZ_ROLE_FFN_GATE_EXPS: case SQZ_ROLE_FFN_UP_EXPS:
    case SQZ_ROLE_FFN_DOWN_EXPS:
        return false; /* the newer roles only where a row names them */
    default:
        return true; /* the older roles: by shape (expected_shape), as before */
    }
}

/* "[128]", "[64, 128]" */
static const char *shape_text(const int64_t *shape, int nd, char *buf, size_t cap) {
    size_t k = (size_t)snprintf(buf, cap, "[");
    for (int i = 0; i < nd && k < cap; i++)
        k += (size_t)snprintf(buf + k, cap - k, "%s%" PRId64, i ? ", " : "", shape[i]);
    if (k < cap) snprintf(buf + k, cap - k, "]");
    return buf;
}

/* What a tensor holds must be what the forward pass uses: weights a float view (a float or
 * block type, or integers with their qparams), not raw integers; q/k/v biases only in a model
 * whose attention has them (the forward pass would skip one a writer still exports). */
static sqz_status check_kind(const sqz_model *m, const sqz_tensor *t, const char *src) {
    const sqz_dtype_traits *tr = sqz__dtype_core(t->dtype);
    SQZ_RETURN_IF(!tr || (!tr->is_float && !tr->is_quantized && !t->qp), SQZ_ERR_FORMAT,
                  "%s: tensor '%s' is %s: a weight needs a float or quantized type", src, t->name,
                  sqz_dtype_name(t->dtype));
    const bool qkv = t->role == SQZ_ROLE_ATTN_Q || t->role == SQZ_ROLE_ATTN_K || t->role == SQZ_ROLE_ATTN_V;
    SQZ_RETURN_IF(sqz_family_get(m->hp.family)->qkv_bias_by_hparam && qkv && t->param == SQZ_PARAM_BIAS &&
                      !m->hp.attn_bias,
                  SQZ_ERR_FORMAT, "%s: tensor '%s' is a q/k/v bias, but the model's attention has none "
                  "(attention_bias false): it would be ignored here and applied by llama.cpp", src, t->name);
    return SQZ_OK;
}

sqz_status sqz_model_validate(const sqz_model *m) {
    const sqz_hparams *hp = &m->hp;
    const char *src = m->source_path ? m->source_path : "model";
    SQZ_RETURN_IF(hp->n_layers <= 0 || hp->d_model <= 0 || hp->n_heads <= 0 || hp->head_dim <= 0 ||
                      hp->vocab_size <= 0 || hp->d_ff <= 0,
                  SQZ_ERR_FORMAT,
                  "%s: hyperparameters out of range (layers %" PRId64 ", d_model %" PRId64 ", heads %" PRId64
                  ", head_dim %" PRId64 ", vocab %" PRId64 ", d_ff %" PRId64 ")",
                  src, hp->n_layers, hp->d_model, hp->n_heads, hp->head_dim, hp->vocab_size, hp->d_ff);
    SQZ_RETURN_IF(!m->layers, SQZ_ERR_INVALID_ARG, "%s: per-layer dimensions not initialised", src);
    const sqz_family_info *fi = sqz_family_get(hp->family);
    SQZ_RETURN_IF(!fi, SQZ_ERR_ARCH, "%s: family %d has no row in the family table", src, (int)hp->family);
    for (int64_t l = 0; l < hp->n_layers; l++) {
        const sqz_layer_dims *ld = &m->layers[l];
        SQZ_RETURN_IF(ld->n_heads <= 0 || ld->n_kv_heads <= 0 || ld->n_heads % ld->n_kv_heads != 0 || ld->d_ff <= 0,
                      SQZ_ERR_FORMAT, "%s: layer %" PRId64 ": %" PRId64 " heads, %" PRId64 " KV heads, d_ff %" PRId64
                      " are not valid", src, l, ld->n_heads, ld->n_kv_heads, ld->d_ff);
        SQZ_RETURN_IF(fi->experts && (ld->n_expert <= 0 || hp->n_expert_used <= 0 || hp->n_expert_used > ld->n_expert),
                      SQZ_ERR_FORMAT, "%s: layer %" PRId64 ": %" PRId64 " experts, %" PRId64 " used per token: a %s "
                      "model routes each token to 1..experts of them", src, l, ld->n_expert, hp->n_expert_used,
                      fi->name);
    }
    for (int64_t i = 0; i < m->n_tensors; i++) {
        const sqz_tensor *t = &m->tensors[i];
        SQZ_RETURN_IF(t->layer >= hp->n_layers, SQZ_ERR_FORMAT, "%s: tensor '%s': layer %d beyond the model's %" PRId64
                      " layers", src, t->name, t->layer, hp->n_layers);
        SQZ_RETURN_IF(sqz_role_per_layer(t->role) != (t->layer >= 0), SQZ_ERR_FORMAT,
                      "%s: tensor '%s': role %s %s a layer index", src, t->name, sqz_role_name(t->role),
                      sqz_role_per_layer(t->role) ? "needs" : "takes no");
        for (int64_t j = 0; j < i; j++) {
            const sqz_tensor *u = &m->tensors[j];
            SQZ_RETURN_IF(u->role == t->role && u->layer == t->layer && u->param == t->param, SQZ_ERR_FORMAT,
                          "%s: tensors '%s' and '%s' both map to %s%s (layer %d)", src, u->name, t->name,
                          sqz_role_name(t->role), t->param == SQZ_PARAM_BIAS ? ".bias" : ".weight", t->layer);
        }
        int64_t want[3] = {0, 0, 0};
        int nd = role_in_family(fi, t->role) ? expected_shape(m, t->role, t->param, t->layer, want) : 0;
        SQZ_RETURN_IF(nd == 0, SQZ_ERR_FORMAT, "%s: tensor '%s': role %s has no place in a %s model", src, t->name,
                      sqz_role_name(t->role), sqz_family_name(hp->family));
        bool ok = t->ndim == nd;
        for (int k = 0; ok && k < nd; k++) ok = t->shape[k] == want[k];
        char have_s[96], want_s[64];
        SQZ_RETURN_IF(!ok, SQZ_ERR_SHAPE, "%s: tensor '%s' has shape %s, the architecture needs %s", src, t->name,
                      shape_text(t->shape, t->ndim, have_s, sizeof have_s),
                      shape_text(want, nd, want_s, sizeof want_s));
        SQZ_TRY(check_kind(m, t, src));
        size_t nb;
        SQZ_RETURN_IF(!sqz_dtype_nbytes(t->dtype, sqz_tensor_nelements(t), &nb) || nb != t->nbytes, SQZ_ERR_FORMAT,
                      "%s: tensor '%s': %zu bytes do not hold shape x %s", src, t->name, t->nbytes,
                      sqz_dtype_name(t->dtype));
    }
    /* Token ids index the embedding: a tokenizer with more tokens than its rows would read
     * outside it. (Fewer is legal: vocabularies are padded.) */
    SQZ_RETURN_IF(m->vocab.n_tokens > hp->vocab_size, SQZ_ERR_FORMAT,
                  "%s: the tokenizer has %" PRId32 " tokens, the embedding %" PRId64 " rows: ids beyond row %" PRId64
                  " would index outside it", src, m->vocab.n_tokens, hp->vocab_size, hp->vocab_size - 1);
    /* Required roles. */
    SQZ_RETURN_IF(!sqz_model_get(m, SQZ_ROLE_TOKEN_EMBD, -1, SQZ_PARAM_WEIGHT), SQZ_ERR_FORMAT,
                  "%s: no token embedding tensor", src);
    for (int64_t l = 0; l < hp->n_layers; l++) {
        for (int r = 0; r < fi->n_layer_roles; r++) {
            SQZ_RETURN_IF(!sqz_model_get(m, fi->layer_roles[r], (int32_t)l, SQZ_PARAM_WEIGHT), SQZ_ERR_FORMAT,
                          "%s: layer %" PRId64 " has no %s tensor", src, l, sqz_role_name(fi->layer_roles[r]));
        }
    }
    SQZ_RETURN_IF(fi->final_norm && !sqz_model_get(m, SQZ_ROLE_OUTPUT_NORM, -1, SQZ_PARAM_WEIGHT), SQZ_ERR_FORMAT,
                  "%s: no final norm tensor", src);
    SQZ_RETURN_IF(fi->lm_head && !hp->tied_embeddings && !sqz_model_get(m, SQZ_ROLE_OUTPUT, -1, SQZ_PARAM_WEIGHT),
                  SQZ_ERR_FORMAT, "%s: no classifier tensor and embeddings are not tied", src);
    return SQZ_OK;
}

const char *sqz__model_beyond_llama(const sqz_model *m) {
    const sqz_hparams *hp = &m->hp;
    const sqz_family_info *fi = sqz_family_get(hp->family);
    if (hp->rope_scaling != SQZ_ROPE_SCALING_NONE) return "scaled rotary frequencies (llama3 / linear / longrope)";
    if (hp->rope_dim > 0 && hp->rope_dim != hp->head_dim) return "a partial rotation";
    if (hp->attn_scale != 0.0f) return "its own attention scale";
    if (hp->sliding_window > 0) return "sliding-window layers";
    if (hp->act != SQZ_ACT_SILU) return "an FFN activation other than SiLU";
    if (fi && fi->embed_scale_sqrt_d) return "scaled embeddings";
    if (fi && fi->experts) return "a mixture of experts";
    for (int64_t i = 0; i < m->n_tensors; i++) {
        const sqz_role r = m->tensors[i].role;
        if (r == SQZ_ROLE_ATTN_Q_NORM || r == SQZ_ROLE_ATTN_K_NORM) return "q/k norms";
        if (r == SQZ_ROLE_ATTN_POST_NORM || r == SQZ_ROLE_FFN_POST_NORM) return "post-attention / post-FFN norms";
    }
    return NULL;
}

/*
 * formats/gguf_write.c - an sqz_model as a GGUF v3 file that llama.cpp loads unchanged.
 *
 * Every tensor's name, dtype, shape and offset is decided first; the header (metadata and
 * tensor infos) is built in memory, then the tensors are converted and streamed one at a
 * time through an atomic sqz_outfile, so memory stays at one tensor. Metadata keys and
 * types are what llama.cpp's loader reads (llama-arch.cpp, gguf-py constants.py):
 * per-layer head counts and FFN widths become uint32 arrays when pruning made layers
 * differ. q/k rows are permuted to the layout llama.cpp expects for the architecture.
 * The BERT pooler is not written: llama.cpp's bert graph has no place for it and
 * refuses files with tensors it does not use. A SentencePiece ("llama") vocabulary without all
 * 256 <0xNN> byte tokens gets the missing ones appended, with zero embedding rows
 * (gguf_vocab_bytes.c): llama.cpp's tokenizer throws on a character it cannot write as bytes.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "formats/gguf_internal.h"

/* ---- a growable byte buffer for the header ---- */

typedef struct gbuf {
    sqz__bytebuf buf;
    uint64_t n_kv; /* metadata entries written so far */
} gbuf;

static void put(gbuf *b, const void *src, size_t n) { sqz__bytebuf_put(&b->buf, src, n); }
static void put_u32(gbuf *b, uint32_t v) { sqz__bytebuf_put_u32(&b->buf, v); }
static void put_u64(gbuf *b, uint64_t v) { sqz__bytebuf_put_u64(&b->buf, v); }
static void put_f32(gbuf *b, float f) { sqz__bytebuf_put_f32(&b->buf, f); }
static void put_str(gbuf *b, const char *s) {
    size_t n = strlen(s);
    put_u64(b, n);
    put(b, s, n);
}

static void kv_head(gbuf *b, const char *key, sqz__gguf_type type) {
    put_str(b, key);
    put_u32(b, type);
    b->n_kv++;
}
static void kv_u32(gbuf *b, const char *key, uint32_t v) { kv_head(b, key, SQZ__GGUF_UINT32); put_u32(b, v); }
static void kv_f32(gbuf *b, const char *key, float v) { kv_head(b, key, SQZ__GGUF_FLOAT32); put_f32(b, v); }
static void kv_bool(gbuf *b, const char *key, bool v) {
    kv_head(b, key, SQZ__GGUF_BOOL);
    uint8_t x = v ? 1 : 0;
    put(b, &x, 1);
}
static void kv_str(gbuf *b, const char *key, const char *s) { kv_head(b, key, SQZ__GGUF_STRING); put_str(b, s); }
static void kv_arr_head(gbuf *b, const char *key, sqz__gguf_type et, uint64_t n) {
    kv_head(b, key, SQZ__GGUF_ARRAY);
    put_u32(b, et);
    put_u64(b, n);
}
/* wpm: WordPiece tokens in llama.cpp's spelling (sqz__wpm_to_gguf). The array's count is n plus
 * n_more: the caller puts the other n_more strings after it. */
static void kv_arr_str(gbuf *b, const char *key, char *const *s, int64_t n, int64_t n_more, bool wpm) {
    kv_arr_head(b, key, SQZ__GGUF_STRING, (uint64_t)(n + n_more));
    for (int64_t i = 0; i < n && !b->buf.oom; i++) {
        if (!wpm) {
            put_str(b, s[i] ? s[i] : "");
            continue;
        }
        char *t = sqz__wpm_to_gguf(s[i] ? s[i] : "");
        if (!t) b->buf.oom = true;
        else put_str(b, t);
        free(t);
    }
}

/* ---- what gets written ---- */

typedef struct wtensor {
    const sqz_tensor *t;
    char name[SQZ__GGUF_MAX_NAME + 1];
    sqz_dtype dtype;
    uint64_t offset; /* in the data section */
    size_t nbytes;     /* in the file */
    size_t src_nbytes; /* of the source's rows, exported; the rest of nbytes is zero rows */
    int64_t extra_rows; /* zero rows after the source's (the byte tokens' embeddings) */
    const sqz_tensor *first; /* rows written before t's (Phi-3's ffn_up holds gate, then up), or NULL */
    size_t first_nbytes;
} wtensor;

typedef struct writer {
    const sqz_model *m;
    const char *path;
    const sqz_save_opts *o;
    const sqz__gguf_arch *arch;
    wtensor *w;
    int64_t n_w;
    uint64_t data_size;
    size_t max_nbytes;
    gbuf kv;
    bool add_byte[256]; /* the <0xNN> tokens appended to an SPM vocabulary (gguf_vocab_bytes.c) */
    int n_add;
} writer;

/* Whether the architecture stores gate and up as one ffn_up of 2 x d_ff rows (llama.cpp's phi3). */
static bool fused_gate_up(const writer *wr) { return wr->arch->fused_gate_up; }

static bool skip_tensor(const sqz_model *m, const sqz_tensor *t) {
    /* tied classifier: llama.cpp uses token_embd when output.weight is absent (the embedding
     * itself is always written, even when the source stored it under the classifier's name) */
    if (t->role == SQZ_ROLE_OUTPUT && m->hp.tied_embeddings &&
        sqz_model_get(m, SQZ_ROLE_TOKEN_EMBD, -1, SQZ_PARAM_WEIGHT)) {
        return true;
    }
    return t->role == SQZ_ROLE_POOLER; /* llama.cpp's bert has no pooler tensor */
}

/* The embedding and the classifier: one row per token, so they grow with the added byte tokens. */
static bool grows_with_vocab(const writer *wr, const sqz_tensor *t) {
    return wr->n_add > 0 && (t->role == SQZ_ROLE_TOKEN_EMBD || t->role == SQZ_ROLE_OUTPUT) &&
           t->param == SQZ_PARAM_WEIGHT && t->ndim == 2 && t->shape[0] == wr->m->hp.vocab_size;
}

/* Phi-3's ffn_up: the layer's gate rows first, in the same type (llama.cpp splits the product in half). */
static sqz_status plan_gate(writer *wr, wtensor *w) {
    const sqz_tensor *t = w->t, *g = sqz_model_get(wr->m, SQZ_ROLE_FFN_GATE, t->layer, t->param);
    SQZ_RETURN_IF(!g, SQZ_ERR_FORMAT, "%s: tensor '%s': llama.cpp's %s stores gate and up together, and layer %d "
                  "has no gate", wr->path, t->name, wr->arch->name, (int)t->layer);
    const sqz_dtype gd = sqz__export_dtype(g, wr->o, SQZ_FORMAT_GGUF);
    SQZ_RETURN_IF(gd != w->dtype || g->ndim != t->ndim || (t->ndim == 2 && g->shape[1] != t->shape[1]),
                  SQZ_ERR_UNSUPPORTED, "%s: tensors '%s' (%s) and '%s' (%s): llama.cpp's %s stores gate and up as one "
                  "ffn_up tensor, so they need one type and width", wr->path, g->name, sqz_dtype_name(gd), t->name,
                  sqz_dtype_name(w->dtype), wr->arch->name);
    SQZ_RETURN_IF(!sqz_dtype_nbytes(gd, sqz_tensor_nelements(g), &w->first_nbytes), SQZ_ERR_SHAPE,
                  "%s: tensor '%s': not whole %s blocks", wr->path, g->name, sqz_dtype_name(gd));
    w->first = g;
    w->nbytes += w->first_nbytes;
    return SQZ_OK;
}

static sqz_status plan_tensors(writer *wr) {
    const sqz_model *m = wr->m;
    wr->w = sqz__calloc(m->n_tensors ? (size_t)m->n_tensors : 1, sizeof *wr->w);
    if (!wr->w) return SQZ_ERR_NOMEM;
    uint64_t off = 0;
    for (int64_t i = 0; i < m->n_tensors; i++) {
        const sqz_tensor *t = &m->tensors[i];
        if (skip_tensor(m, t)) continue;
        if (fused_gate_up(wr) && t->role == SQZ_ROLE_FFN_GATE) continue; /* inside ffn_up */
        wtensor *w = &wr->w[wr->n_w];
        w->t = t;
        SQZ_RETURN_IF(t->ndim < 1 || t->ndim > SQZ_MAX_DIMS, SQZ_ERR_INVALID_ARG, "%s: tensor '%s' has %d dimensions",
                      wr->path, t->name, (int)t->ndim);
        SQZ_RETURN_IF(!sqz__gguf_tensor_name(t->role, t->layer, t->param, w->name, sizeof w->name),
                      SQZ_ERR_INVALID_ARG, "%s: tensor '%s': GGUF name too long", wr->path, t->name);
        SQZ_RETURN_IF(!t->data && t->nbytes > 0, SQZ_ERR_INVALID_ARG, "%s: tensor '%s' has no data", wr->path,
                      t->name);
        w->dtype = sqz__export_dtype(t, wr->o, SQZ_FORMAT_GGUF);
        const sqz_dtype_traits *to = sqz_dtype_info(w->dtype), *from = sqz_dtype_info(t->dtype);
        SQZ_RETURN_IF(w->dtype != t->dtype && (!from->to_f32 || !to->from_f32), SQZ_ERR_UNSUPPORTED,
                      "%s: tensor '%s': sqz cannot convert %s to %s", wr->path, t->name, from->name, to->name);
        SQZ_RETURN_IF(!sqz_dtype_nbytes(w->dtype, sqz_tensor_nelements(t), &w->src_nbytes), SQZ_ERR_SHAPE,
                      "%s: tensor '%s': %lld elements are not whole %s blocks", wr->path, t->name,
                      (long long)sqz_tensor_nelements(t), to->name);
        w->extra_rows = grows_with_vocab(wr, t) ? wr->n_add : 0;
        SQZ_RETURN_IF(!sqz_dtype_nbytes(w->dtype, sqz_tensor_nelements(t) + w->extra_rows * t->shape[1], &w->nbytes),
                      SQZ_ERR_SHAPE, "%s: tensor '%s': %lld rows do not fit %s", wr->path, t->name,
                      (long long)(t->shape[0] + w->extra_rows), to->name);
        if (fused_gate_up(wr) && t->role == SQZ_ROLE_FFN_UP) SQZ_TRY(plan_gate(wr, w));
        w->offset = off;
        off += w->nbytes;
        off += (SQZ__GGUF_DEFAULT_ALIGNMENT - off % SQZ__GGUF_DEFAULT_ALIGNMENT) % SQZ__GGUF_DEFAULT_ALIGNMENT;
        if (w->nbytes > wr->max_nbytes) wr->max_nbytes = w->nbytes;
        wr->n_w++;
    }
    wr->data_size = off;
    return SQZ_OK;
}

/* The dtype holding the most matrix elements decides general.file_type. */
static sqz_dtype dominant_dtype(const writer *wr, bool *any_quant) {
    int64_t count[SQZ_DTYPE_COUNT] = {0};
    *any_quant = false;
    for (int64_t i = 0; i < wr->n_w; i++) {
        const wtensor *w = &wr->w[i];
        if (sqz_dtype_info(w->dtype)->is_quantized) *any_quant = true;
        if (w->t->ndim == 2 && w->t->param == SQZ_PARAM_WEIGHT) count[w->dtype] += sqz_tensor_nelements(w->t);
    }
    int best = SQZ_DTYPE_F32;
    for (int d = 0; d < SQZ_DTYPE_COUNT; d++) {
        if (count[d] > count[best]) best = d;
    }
    return (sqz_dtype)best;
}

static bool fits_u32(int64_t v) { return v >= 0 && v <= (int64_t)UINT32_MAX; }

static sqz_status check_u32(const writer *wr, const char *what, int64_t v) {
    SQZ_RETURN_IF(!fits_u32(v), SQZ_ERR_INVALID_ARG, "%s: %s = %lld does not fit GGUF's uint32", wr->path, what,
                  (long long)v);
    return SQZ_OK;
}

static int64_t layer_dim(const sqz_layer_dims *ld, int which) {
    return which == 0 ? ld->n_heads : which == 1 ? ld->n_kv_heads : ld->d_ff;
}

/* A per-layer dimension: a scalar when every layer agrees, else a uint32 array. */
static sqz_status kv_layer_dim(writer *wr, const char *key, int which, bool *uniform) {
    const sqz_model *m = wr->m;
    int64_t n = m->hp.n_layers;
    *uniform = true;
    for (int64_t l = 0; l < n; l++) {
        SQZ_TRY(check_u32(wr, key, layer_dim(&m->layers[l], which)));
        if (layer_dim(&m->layers[l], which) != layer_dim(&m->layers[0], which)) *uniform = false;
    }
    if (*uniform) {
        kv_u32(&wr->kv, key, (uint32_t)layer_dim(&m->layers[0], which));
        return SQZ_OK;
    }
    kv_arr_head(&wr->kv, key, SQZ__GGUF_UINT32, (uint64_t)n);
    for (int64_t l = 0; l < n; l++) put_u32(&wr->kv, (uint32_t)layer_dim(&m->layers[l], which));
    return SQZ_OK;
}

/* The period of global layers llama.cpp's gemma3 reads (every period-th layer global, the others sliding);
 * 0 when the model's layers follow none or their windows differ. */
static int64_t swa_period(const sqz_model *m) {
    int64_t p = m->hp.n_layers + 1;
    for (int64_t l = 0; l < m->hp.n_layers; l++)
        if (m->layers[l].window == 0) { p = l + 1; break; }
    for (int64_t l = 0; l < m->hp.n_layers; l++) {
        const int64_t want = (l + 1) % p != 0 ? m->hp.sliding_window : 0;
        if (m->layers[l].window != want) return 0;
    }
    return p;
}

/* What the newer architectures add: scaling, longrope's context and factor, sliding windows (gemma3).
 * What llama.cpp cannot state is refused here, before any byte is written. */
static sqz_status write_rope_kv(writer *wr) {
    const sqz_hparams *hp = &wr->m->hp;
    gbuf *b = &wr->kv;
    const char *a = wr->arch->name;
    char key[128];
#define AKEY(suffix) (snprintf(key, sizeof key, "%s.%s", a, suffix), key)
    const bool gemma3 = strcmp(a, "gemma3") == 0;
    const float want_scale = gemma3 && hp->n_layers == 62 ? 1.0f / sqrtf((float)(hp->d_model / hp->n_heads)) : 0.0f;
    SQZ_RETURN_IF(hp->attn_scale != want_scale && !(gemma3 && hp->attn_scale == 1.0f / sqrtf((float)hp->head_dim)),
                  SQZ_ERR_UNSUPPORTED, "%s: the model scales attention scores by %g; llama.cpp's %s uses "
                  "1/sqrt(head_dim) and cannot be told otherwise", wr->path, (double)hp->attn_scale, a);
    if (hp->rope_scaling == SQZ_ROPE_SCALING_LINEAR) {
        kv_str(b, AKEY("rope.scaling.type"), "linear");
        kv_f32(b, AKEY("rope.scaling.factor"), hp->rope_factor);
    }
    if (hp->rope_scaling == SQZ_ROPE_SCALING_LONGROPE) {
        SQZ_TRY(check_u32(wr, "original context", hp->rope_ctx_orig));
        kv_u32(b, AKEY("rope.scaling.original_context_length"), (uint32_t)hp->rope_ctx_orig);
        kv_f32(b, AKEY("rope.scaling.attn_factor"), hp->rope_attn_factor > 0 ? hp->rope_attn_factor : 1.0f);
    }
    if (hp->sliding_window <= 0) return SQZ_OK;
    const int64_t period = swa_period(wr->m);
    SQZ_RETURN_IF(!gemma3 || period == 0, SQZ_ERR_UNSUPPORTED, "%s: the model's sliding-window layers %s: llama.cpp "
                  "reads one window and a period of global layers (gemma3 only)", wr->path,
                  gemma3 ? "follow no period" : "are not gemma3's");
    SQZ_TRY(check_u32(wr, "sliding window", hp->sliding_window));
    kv_u32(b, AKEY("attention.sliding_window"), (uint32_t)hp->sliding_window);
    kv_u32(b, AKEY("attention.sliding_window_pattern"), (uint32_t)period);
    kv_f32(b, AKEY("rope.freq_base_swa"), hp->rope_theta_local > 0 ? hp->rope_theta_local : 10000.0f);
#undef AKEY
    return SQZ_OK;
}

/* A mixture's expert_count / expert_used_count (and qwen3moe's expert_feed_forward_length): only under an
 * architecture llama.cpp runs mixtures as, with one expert count for every layer and the top-k weights
 * renormalised, as llama.cpp's build_moe_ffn computes them for llama and qwen3moe. */
static sqz_status write_experts_kv(writer *wr, const char *a) {
    const sqz_hparams *hp = &wr->m->hp;
    char key[128];
    if (hp->n_expert <= 0) return SQZ_OK;
    SQZ_RETURN_IF(!wr->arch->moe_family, SQZ_ERR_UNSUPPORTED, "%s: llama.cpp's %s runs no mixture of experts "
                  "(the layers differ in width: prune with the same widths in every layer)", wr->path, a);
    SQZ_RETURN_IF(!hp->expert_norm_topk, SQZ_ERR_UNSUPPORTED, "%s: llama.cpp's %s renormalises the top-%lld routing "
                  "weights, this model does not (norm_topk_prob false): it would run differently", wr->path, a,
                  (long long)hp->n_expert_used);
    for (int64_t l = 0; l < hp->n_layers; l++) {
        SQZ_RETURN_IF(wr->m->layers[l].n_expert != hp->n_expert, SQZ_ERR_UNSUPPORTED, "%s: layer %lld has %lld "
                      "experts, layer 0 %lld: llama.cpp's %s has one expert count", wr->path, (long long)l,
                      (long long)wr->m->layers[l].n_expert, (long long)hp->n_expert, a);
    }
    SQZ_TRY(check_u32(wr, "expert count", hp->n_expert));
    kv_u32(&wr->kv, (snprintf(key, sizeof key, "%s.expert_count", a), key), (uint32_t)hp->n_expert);
    kv_u32(&wr->kv, (snprintf(key, sizeof key, "%s.expert_used_count", a), key), (uint32_t)hp->n_expert_used);
    if (wr->arch->expert_ff_key) {
        snprintf(key, sizeof key, "%s.%s", a, wr->arch->expert_ff_key);
        kv_u32(&wr->kv, key, (uint32_t)wr->m->layers[0].d_ff);
    }
    return SQZ_OK;
}

static sqz_status write_arch_kv(writer *wr) {
    const sqz_model *m = wr->m;
    const sqz_hparams *hp = &m->hp;
    gbuf *b = &wr->kv;
    const char *a = wr->arch->name;
    char key[128];
#define AKEY(suffix) (snprintf(key, sizeof key, "%s.%s", a, suffix), key)
    SQZ_RETURN_IF(hp->n_layers <= 0 || !m->layers, SQZ_ERR_INVALID_ARG, "%s: the model has no layers", wr->path);
    SQZ_TRY(check_u32(wr, "context length", hp->ctx_len));
    SQZ_TRY(check_u32(wr, "embedding length", hp->d_model));
    SQZ_TRY(check_u32(wr, "block count", hp->n_layers));
    SQZ_TRY(check_u32(wr, "head dim", hp->head_dim));
    SQZ_TRY(check_u32(wr, "vocab size", hp->vocab_size + wr->n_add));
    kv_u32(b, AKEY("context_length"), (uint32_t)hp->ctx_len);
    kv_u32(b, AKEY("embedding_length"), (uint32_t)hp->d_model);
    kv_u32(b, AKEY("block_count"), (uint32_t)hp->n_layers);
    bool heads_uniform, kv_uniform, ff_uniform;
    SQZ_TRY(kv_layer_dim(wr, AKEY("feed_forward_length"), 2, &ff_uniform));
    SQZ_TRY(kv_layer_dim(wr, AKEY("attention.head_count"), 0, &heads_uniform));
    SQZ_TRY(kv_layer_dim(wr, AKEY("attention.head_count_kv"), 1, &kv_uniform));
    SQZ_TRY(write_experts_kv(wr, a));
    const sqz_family_info *fr = sqz_family_get(hp->family);
    SQZ_RETURN_IF(fr->gguf_uniform && (!heads_uniform || !kv_uniform || !ff_uniform), SQZ_ERR_UNSUPPORTED,
                  "%s: the layers differ in heads or FFN width, and llama.cpp's %s sizes every layer from one: prune "
                  "with the same widths in every layer (heads=R:uniform, ffn=R)", wr->path, a);
    SQZ_RETURN_IF(fr->heads_fill_width && m->layers[0].n_heads * hp->head_dim != hp->d_model, SQZ_ERR_UNSUPPORTED,
                  "%s: %lld heads of %lld in a hidden size of %lld: llama.cpp's %s needs them to fill it", wr->path,
                  (long long)m->layers[0].n_heads, (long long)hp->head_dim, (long long)hp->d_model, a);
    if (!heads_uniform || m->layers[0].n_heads * hp->head_dim != hp->d_model) {
        /* llama.cpp derives head_dim as embd / heads unless told */
        kv_u32(b, AKEY("attention.key_length"), (uint32_t)hp->head_dim);
        kv_u32(b, AKEY("attention.value_length"), (uint32_t)hp->head_dim);
    }
    const sqz_family_info *fi = sqz_family_get(hp->family);
    if (fi->positions == SQZ_POS_ROTARY) {
        kv_u32(b, AKEY("rope.dimension_count"), (uint32_t)(hp->rope_dim > 0 ? hp->rope_dim : hp->head_dim));
        kv_f32(b, AKEY("rope.freq_base"), hp->rope_theta > 0 ? hp->rope_theta : 10000.0f);
        SQZ_TRY(write_rope_kv(wr));
    }
    if (fi->norm == SQZ_NORM_RMS) kv_f32(b, AKEY("attention.layer_norm_rms_epsilon"), hp->norm_eps);
    else kv_f32(b, AKEY("attention.layer_norm_epsilon"), hp->norm_eps);
    if (!fi->causal) kv_bool(b, AKEY("attention.causal"), false);
    if (!fi->lm_head) kv_u32(b, AKEY("pooling_type"), 1); /* LLAMA_POOLING_TYPE_MEAN: sentence-transformers' */
    kv_u32(b, AKEY("vocab_size"), (uint32_t)(hp->vocab_size + wr->n_add));
#undef AKEY
    return SQZ_OK;
}

static void write_vocab_kv(writer *wr) {
    const sqz_vocab *v = &wr->m->vocab;
    gbuf *b = &wr->kv;
    if (v->kind == SQZ_VOCAB_NONE || v->n_tokens <= 0 || !v->tokens) return;
    kv_str(b, "tokenizer.ggml.model", sqz_vocab_kind_name(v->kind));
    if (v->pre) kv_str(b, "tokenizer.ggml.pre", v->pre);
    const int64_t n_all = (int64_t)v->n_tokens + wr->n_add;
    kv_arr_str(b, "tokenizer.ggml.tokens", v->tokens, v->n_tokens, wr->n_add, v->kind == SQZ_VOCAB_WPM);
    for (int byte = 0; byte < 256; byte++) { /* the byte tokens sqz adds (gguf_vocab_bytes.c) */
        char text[7];
        sqz__gguf_byte_token_text(byte, text);
        if (wr->add_byte[byte]) put_str(b, text);
    }
    if (v->scores) {
        kv_arr_head(b, "tokenizer.ggml.scores", SQZ__GGUF_FLOAT32, (uint64_t)n_all);
        for (int32_t i = 0; i < v->n_tokens; i++) put_f32(b, v->scores[i]);
        for (int i = 0; i < wr->n_add; i++) put_f32(b, 0.0f);
    }
    if (v->types || wr->n_add > 0) {
        kv_arr_head(b, "tokenizer.ggml.token_type", SQZ__GGUF_INT32, (uint64_t)n_all);
        for (int32_t i = 0; i < v->n_tokens; i++) put_u32(b, (uint32_t)(v->types ? v->types[i] : SQZ_TOKEN_NORMAL));
        for (int i = 0; i < wr->n_add; i++) put_u32(b, SQZ_TOKEN_BYTE);
    }
    if (v->merges && v->n_merges > 0) kv_arr_str(b, "tokenizer.ggml.merges", v->merges, v->n_merges, 0, false);
    static const struct { const char *key; size_t off; } ids[] = {
        {"tokenizer.ggml.bos_token_id", offsetof(sqz_vocab, bos)},
        {"tokenizer.ggml.eos_token_id", offsetof(sqz_vocab, eos)},
        {"tokenizer.ggml.unknown_token_id", offsetof(sqz_vocab, unk)},
        {"tokenizer.ggml.padding_token_id", offsetof(sqz_vocab, pad)},
        {"tokenizer.ggml.seperator_token_id", offsetof(sqz_vocab, sep)}, /* sic */
        {"tokenizer.ggml.cls_token_id", offsetof(sqz_vocab, cls)},
        {"tokenizer.ggml.mask_token_id", offsetof(sqz_vocab, mask)},
    };
    for (size_t i = 0; i < sizeof ids / sizeof *ids; i++) {
        int32_t id;
        memcpy(&id, (const char *)v + ids[i].off, sizeof id);
        if (id >= 0 && id < v->n_tokens) kv_u32(b, ids[i].key, (uint32_t)id);
    }
    if (!(v->unstated & SQZ_VOCAB_UNSTATED_ADD_BOS)) kv_bool(b, "tokenizer.ggml.add_bos_token", v->add_bos);
    if (!(v->unstated & SQZ_VOCAB_UNSTATED_ADD_EOS)) kv_bool(b, "tokenizer.ggml.add_eos_token", v->add_eos);
    if (!(v->unstated & SQZ_VOCAB_UNSTATED_ADD_SPACE_PREFIX)) {
        kv_bool(b, "tokenizer.ggml.add_space_prefix", v->add_space_prefix);
    }
    const sqz_hparams *hp = &wr->m->hp;
    if (sqz_family_get(hp->family)->token_types && fits_u32(hp->n_token_types) && hp->n_token_types > 0) {
        kv_u32(b, "tokenizer.ggml.token_type_count", (uint32_t)hp->n_token_types);
    }
    if (v->chat_template) kv_str(b, "tokenizer.chat_template", v->chat_template);
}

/* Whether every tensor goes out with the bytes it had in the source (same dtype, data still the
 * source's mapping): then llama-quantize's quantize.* keys still describe the file. */
static bool tensors_unchanged(const writer *wr) {
    for (int64_t i = 0; i < wr->n_w; i++) {
        if (wr->w[i].dtype != wr->w[i].t->dtype || wr->w[i].t->owned || wr->w[i].extra_rows) return false;
    }
    return true;
}

/* The source's metadata sqz does not own (sqz_gguf_meta), verbatim, after sqz's own keys.
 * quantize.* is dropped when sqz re-quantized or changed any tensor (docs/formats.md). */
static void write_passthrough_kv(writer *wr) {
    const sqz_gguf_meta *gm = &wr->m->gguf_meta;
    const bool keep_quantize = tensors_unchanged(wr);
    for (int64_t i = 0; i < gm->n; i++) {
        const uint8_t *e = gm->bytes + gm->off[i];
        size_t n = gm->off[i + 1] - gm->off[i];
        uint64_t klen = 0;
        for (int k = 0; k < 8; k++) klen |= (uint64_t)e[k] << (8 * k);
        const char *key = (const char *)e + 8;
        if (sqz__gguf_key_owned(key, (size_t)klen, wr->arch->name)) continue; /* written by sqz already */
        if (!keep_quantize && klen >= 9 && memcmp(key, "quantize.", 9) == 0) continue;
        put(&wr->kv, e, n);
        wr->kv.n_kv++;
    }
}

/* llama.cpp sets token attributes by general.name: a name containing "phi3" or "phi-3" makes it look up
 * "</s>" and abort on a vocabulary without one (llama-vocab.cpp, unordered_map::at). Such a name is written
 * with "phi 3" instead; NULL when the name is safe as it is. */
static char *safe_name(const sqz_model *m) {
    for (int32_t i = 0; i < m->vocab.n_tokens; i++)
        if (m->vocab.tokens[i] && strcmp(m->vocab.tokens[i], "</s>") == 0) return NULL;
    if (m->vocab.n_tokens == 0) return NULL;
    const size_t len = strlen(m->name);
    char *out = sqz__malloc(2 * len + 1), *w = out;
    bool changed = false;
    for (const char *p = m->name; out && *p;) {
        const bool phi = (p[0] | 32) == 'p' && (p[1] | 32) == 'h' && (p[2] | 32) == 'i';
        const size_t skip = phi && p[3] == '3' ? 3 : phi && p[3] == '-' && p[4] == '3' ? 4 : 0;
        if (skip) { /* "phi3" / "phi-3" -> "phi 3" */
            memcpy(w, p, 3), w[3] = ' ', w += 4, p += skip, changed = true;
        } else {
            *w++ = *p++;
        }
    }
    if (out) *w = 0;
    if (!changed) {
        free(out);
        return NULL;
    }
    return out;
}

static sqz_status build_metadata(writer *wr) {
    const sqz_model *m = wr->m;
    gbuf *b = &wr->kv;
    kv_str(b, "general.architecture", wr->arch->name);
    if (m->name && sqz__utf8_valid(m->name, strlen(m->name))) {
        char *name = safe_name(m);
        kv_str(b, "general.name", name ? name : m->name);
        free(name);
    }
    kv_u32(b, "general.alignment", SQZ__GGUF_DEFAULT_ALIGNMENT);
    bool any_quant;
    int ftype = sqz__gguf_file_type(dominant_dtype(wr, &any_quant));
    bool kept = wr->m->gguf_file_type >= 0; /* a GGUF source whose tensors all keep their dtypes keeps its label */
    for (int64_t i = 0; i < wr->n_w && kept; i++) kept = wr->w[i].dtype == wr->w[i].t->dtype;
    if (kept) ftype = wr->m->gguf_file_type;
    if (wr->o && wr->o->gguf_file_type > 0) ftype = wr->o->gguf_file_type; /* a mix's, as llama-quantize */
    if (ftype >= 0) kv_u32(b, "general.file_type", (uint32_t)ftype);
    if (any_quant) kv_u32(b, "general.quantization_version", 2); /* GGML_QNT_VERSION */
    SQZ_TRY(write_arch_kv(wr));
    write_vocab_kv(wr);
    write_passthrough_kv(wr);
    return b->buf.oom ? SQZ_ERROR(SQZ_ERR_NOMEM, "%s: out of memory building the GGUF header", wr->path) : SQZ_OK;
}

static sqz_status build_header(writer *wr, gbuf *h) {
    put(h, SQZ__GGUF_MAGIC, 4);
    put_u32(h, SQZ__GGUF_VERSION);
    put_u64(h, (uint64_t)wr->n_w);
    put_u64(h, wr->kv.n_kv);
    put(h, wr->kv.buf.p, wr->kv.buf.n);
    for (int64_t i = 0; i < wr->n_w; i++) {
        const wtensor *w = &wr->w[i];
        const sqz_tensor *t = w->t;
        put_str(h, w->name);
        put_u32(h, (uint32_t)t->ndim);
        for (int d = t->ndim - 1; d >= 0; d--) { /* innermost first; the added rows are outermost */
            put_u64(h, (uint64_t)(t->shape[d] + (d == 0 ? w->extra_rows + (w->first ? w->first->shape[0] : 0) : 0)));
        }
        put_u32(h, (uint32_t)sqz_dtype_info(w->dtype)->gguf_type);
        put_u64(h, w->offset);
    }
    return h->buf.oom ? SQZ_ERROR(SQZ_ERR_NOMEM, "%s: out of memory building the GGUF header", wr->path) : SQZ_OK;
}

static sqz_status stream_tensors(writer *wr, sqz_outfile *f) {
    uint8_t *buf = sqz__malloc(wr->max_nbytes ? wr->max_nbytes : 1);
    if (!buf) return SQZ_ERR_NOMEM;
    sqz_rope_layout rope = sqz__target_rope(wr->m, SQZ_FORMAT_GGUF);
    sqz_status s = SQZ_OK;
    uint64_t done = 0;
    for (int64_t i = 0; i < wr->n_w && s == SQZ_OK; i++) {
        const wtensor *w = &wr->w[i];
        const size_t f0 = w->first_nbytes;
        if (w->first) s = sqz__tensor_export(wr->m, w->first, w->dtype, rope, buf, f0, NULL);
        if (s == SQZ_OK && w->src_nbytes > 0)
            s = sqz__tensor_export(wr->m, w->t, w->dtype, rope, buf + f0, w->src_nbytes, NULL);
        /* zero bytes are zero weights in every GGML type (each block's scales are 0) */
        if (w->nbytes > f0 + w->src_nbytes) memset(buf + f0 + w->src_nbytes, 0, w->nbytes - f0 - w->src_nbytes);
        if (s != SQZ_OK) {
            sqz__error_prefix("%s", wr->path);
            break;
        }
        s = sqz_outfile_write(f, buf, w->nbytes);
        if (s == SQZ_OK) s = sqz_outfile_pad(f, SQZ__GGUF_DEFAULT_ALIGNMENT);
        /* the source pages just read are the file's again: a conversion holds one tensor, not the model
         * (a mapping's pages only; heap data is never touched) */
        if (w->src_nbytes > 0) (void)sqz__mapping_release(w->t->data, w->t->nbytes);
        if (w->first) (void)sqz__mapping_release(w->first->data, w->first->nbytes);
        done += w->nbytes;
        if (s == SQZ_OK && wr->o->progress) {
            wr->o->progress(wr->o->progress_user, (int64_t)done, (int64_t)wr->data_size);
        }
    }
    free(buf);
    return s;
}

static sqz_status write_file(writer *wr) {
    SQZ_TRY(plan_tensors(wr));
    SQZ_TRY(build_metadata(wr));
    gbuf h = {0};
    sqz_status s = build_header(wr, &h);
    sqz_outfile *f = NULL;
    if (s == SQZ_OK) s = sqz_outfile_open(wr->path, &f);
    if (s == SQZ_OK) s = sqz_outfile_write(f, h.buf.p, h.buf.n);
    free(h.buf.p);
    if (s == SQZ_OK) s = sqz_outfile_pad(f, SQZ__GGUF_DEFAULT_ALIGNMENT);
    if (s == SQZ_OK) s = stream_tensors(wr, f);
    if (s == SQZ_OK) return sqz_outfile_commit(f);
    sqz_outfile_abort(f);
    return s;
}

sqz_status sqz__gguf_save(const sqz_model *m, const char *path, const sqz_save_opts *o) {
    SQZ_RETURN_IF(!m || !path || !o, SQZ_ERR_INVALID_ARG, "sqz__gguf_save: NULL argument");
    writer wr = {.m = m, .path = path, .o = o, .arch = sqz__gguf_arch_for_model(m)};
    wr.n_add = sqz__gguf_missing_bytes(m, wr.add_byte);
    sqz_status s = write_file(&wr);
    free(wr.w);
    free(wr.kv.buf.p);
    return s;
}

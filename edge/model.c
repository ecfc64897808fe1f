/*
 * edge/model.c - from an opened bundle to a runnable model: every tensor's role, dtype, shape
 * and size checked against the hyperparameters, then the arena laid out. One function plans
 * the layout, so the memory announced (sqze_model_memory) is exactly the memory used.
 */
#include <string.h>

#include "edge/edge_internal.h"

#define ALIGN 64

typedef struct plan {
    size_t layers, x, xb, xb2, q, att, xq, xq_c, xq_cb, xq_d, xq_s, xh, hb, hb2, scores, rope_cos, rope_sin, logits, kv, kv_bytes, tok, tok_bytes,
        probs, prob_ids, tokens, total;
} plan;

static size_t take(size_t *at, size_t bytes) {
    size_t o = *at;
    *at += (bytes + ALIGN - 1) / ALIGN * ALIGN;
    return o;
}

/* The arena's layout for ctx positions; 0 total when a size would overflow. */
static void make_plan(const sqze_hparams *hp, const sqze_vocab_view *v, uint32_t ctx, plan *p) {
    memset(p, 0, sizeof *p);
    uint64_t max_qd = 0, max_ff = 0, kv = 0;
    for (uint32_t l = 0; l < hp->n_layers; l++) {
        uint32_t h, k, ff;
        sqze_layer_dims(hp, l, &h, &k, &ff);
        if ((uint64_t)h * hp->head_dim > max_qd) max_qd = (uint64_t)h * hp->head_dim;
        if (ff > max_ff) max_ff = ff;
        kv += (uint64_t)k * hp->head_dim; /* < 2^12 layers x 2^24 */
    }
    /* K and V of every layer: 2 x ctx x sum(kv dims) floats; checked against SIZE_MAX */
    uint64_t kv_floats = 2 * kv;
    if (ctx == 0 || kv_floats > (uint64_t)SIZE_MAX / 4 / ctx) return;
    size_t at = 0;
    p->layers = take(&at, (size_t)hp->n_layers * sizeof(sqze_layer));
    p->x = take(&at, (size_t)hp->d_model * 4);
    p->xb = take(&at, (size_t)hp->d_model * 4);
    p->xb2 = take(&at, (size_t)hp->d_model * 4);
    p->q = take(&at, (size_t)max_qd * 4);
    p->att = take(&at, (size_t)max_qd * 4);
    p->hb = take(&at, (size_t)max_ff * 4);
    p->hb2 = take(&at, (size_t)max_ff * 4);
    uint64_t max_k = max_qd > max_ff ? max_qd : max_ff; /* the widest product input */
    if (hp->d_model > max_k) max_k = hp->d_model;
    p->xq = take(&at, (size_t)max_k);
    p->xq_c = take(&at, (size_t)max_k);
    p->xq_cb = take(&at, (size_t)max_k / 32 * 4);
    p->xq_d = take(&at, (size_t)max_k / 32 * 4);
    p->xq_s = take(&at, (size_t)max_k / 32 * 4);
    p->xh = take(&at, (size_t)max_k * 4);
    p->scores = take(&at, (size_t)ctx * 4);
    p->rope_cos = take(&at, (size_t)hp->head_dim / 2 * 4);
    p->rope_sin = take(&at, (size_t)hp->head_dim / 2 * 4);
    p->logits = take(&at, (size_t)hp->vocab_size * 4);
    p->probs = take(&at, (size_t)hp->vocab_size * 4);
    p->prob_ids = take(&at, (size_t)hp->vocab_size * 4);
    p->tokens = take(&at, (size_t)ctx * 4);
    p->tok_bytes = sqze__tok_memory(v, ctx);
    if (!p->tok_bytes) return;
    p->tok = take(&at, p->tok_bytes);
    p->kv_bytes = (size_t)(kv_floats * ctx * 4);
    if (p->kv_bytes > SIZE_MAX - at - ALIGN) return;
    p->kv = take(&at, p->kv_bytes);
    p->total = at;
}

size_t sqze_model_memory(const sqze_bundle *b, uint32_t ctx) {
    sqze_hparams hp;
    sqze_vocab_view v;
    if (sqze_hparams_read(b, &hp, NULL, 0) || sqze_vocab_read(b, &v, NULL, 0)) return 0;
    plan p;
    make_plan(&hp, &v, ctx, &p);
    return p.total;
}

/* An I8_ROW / U4_GROUP section (layout in edge/bundle_format.h): header, sizes, alignment. */
static int bind_scheme(const sqze_section *s, const char *lab, uint32_t rows, uint32_t cols, sqze_w *w, char *err,
                       size_t cap) {
    int i8 = s->dtype == SQZB_DT_I8_ROW;
    if (s->stored < SQZB_QHEADER || (!i8 && cols % 2))
        return sqze__fail(err, cap, "%s: %llu bytes: too short for sqz's int8 / int4 layout", lab,
                          (unsigned long long)s->stored);
    const uint8_t *h = s->data;
    uint32_t scheme = sqze__u32(h), gs = sqze__u32(h + 4), ng = sqze__u32(h + 8), flags = sqze__u32(h + 12);
    if (scheme != (i8 ? 1u : 2u) || gs == 0 || ng == 0 || (uint64_t)gs * ng != cols || (!i8 && gs % 2) ||
        (i8 && (ng != 1 || flags)) || (flags & ~SQZB_Q_ZEROS))
        return sqze__fail(err, cap, "%s: scheme %u, groups of %u x %u for %u columns, flags %#x", lab,
                          (unsigned)scheme, (unsigned)gs, (unsigned)ng, (unsigned)cols, (unsigned)flags);
    uint64_t codes = i8 ? (uint64_t)rows * cols : (uint64_t)rows * cols / 2, side = (uint64_t)rows * ng;
    uint64_t at = (SQZB_QHEADER + codes + 3) / 4 * 4, need = at + side * 4 + ((flags & SQZB_Q_ZEROS) ? side : 0);
    if (need != s->stored)
        return sqze__fail(err, cap, "%s: %llu bytes stored, the codes, scales and zero points need %llu", lab,
                          (unsigned long long)s->stored, (unsigned long long)need);
    if (((uintptr_t)s->data) % 4) return sqze__fail(err, cap, "%s: not 4-byte aligned in memory (map the bundle)", lab);
    *w = (sqze_w){s->data + SQZB_QHEADER, s->dtype, rows, cols, (const float *)(const void *)(s->data + at),
                  (flags & SQZB_Q_ZEROS) ? s->data + at + side * 4 : NULL, gs, ng};
    for (uint64_t i = 0; w->zeros && i < side; i++)
        if (w->zeros[i] > 15) return sqze__fail(err, cap, "%s: zero point %u out of 0..15", lab, (unsigned)w->zeros[i]);
    return 0;
}

/* The weight of (role, layer, param) with its shape checked: rows x cols, f32 for vectors;
 * sqz's int8 / int4 for the matrices that are only multiplied (not the embedding). */
static int bind(const sqze_bundle *b, uint32_t role, int32_t layer, uint32_t param, uint32_t rows, uint32_t cols,
                int optional, sqze_w *w, char *err, size_t cap) {
    memset(w, 0, sizeof *w);
    sqze_section s;
    char lab[96];
    for (uint32_t i = 0; i < b->n_sections; i++) {
        sqze_bundle_section(b, i, &s);
        if (s.kind != SQZB_KIND_TENSOR || s.role != role || s.layer != layer || s.param != param) continue;
        sqze_section_label(&s, lab, sizeof lab);
        if (w->data) return sqze__fail(err, cap, "%s: a second tensor for this role", lab);
        if (s.flags & SQZB_S_DEFLATE)
            return sqze__fail(err, cap, "%s is deflated (a transport form): export the bundle without --deflate to "
                              "run it", lab);
        int vec = cols == 1;
        if (s.ndim == 2 && s.shape[0] == rows && s.shape[1] == cols && !vec && s.dtype >= SQZB_DT_I8_ROW &&
            (s.dtype == SQZB_DT_I8_ROW || s.dtype == SQZB_DT_U4_GROUP) && role != SQZE_ROLE_TOKEN_EMBD) {
            if (bind_scheme(&s, lab, rows, cols, w, err, cap)) return 1;
            continue;
        }
        if (vec ? (s.ndim != 1 || s.shape[0] != rows) : (s.ndim != 2 || s.shape[0] != rows || s.shape[1] != cols))
            return sqze__fail(err, cap, "%s: shape (%llu, %llu) where the hyperparameters say (%u, %u)", lab,
                              (unsigned long long)s.shape[0], (unsigned long long)s.shape[1], (unsigned)rows,
                              (unsigned)cols);
        if (vec && s.dtype != SQZB_DT_F32)
            return sqze__fail(err, cap, "%s: %s; norms and biases must be f32", lab, sqze_dtype_name(s.dtype));
        if (s.dtype == SQZB_DT_Q4_0_X8 && rows % 8)
            return sqze__fail(err, cap, "%s: q4_0 in 8-row groups with %u rows (a multiple of 8)", lab, (unsigned)rows);
        uint64_t nb = sqze_dtype_bytes(s.dtype, (uint64_t)rows * cols);
        if (!nb) return sqze__fail(err, cap, "%s: dtype %u (%s) with rows of %u elements cannot run", lab,
                                   (unsigned)s.dtype, sqze_dtype_name(s.dtype), (unsigned)cols);
        if (nb != s.stored)
            return sqze__fail(err, cap, "%s: %llu bytes stored, %u x %u %s need %llu", lab,
                              (unsigned long long)s.stored, (unsigned)rows, (unsigned)cols, sqze_dtype_name(s.dtype),
                              (unsigned long long)nb);
        if (((uintptr_t)s.data) % 4)
            return sqze__fail(err, cap, "%s: data not 4-byte aligned in memory (map the bundle)", lab);
        *w = (sqze_w){s.data, s.dtype, rows, cols, NULL, NULL, 0, 0};
    }
    if (!w->data && !optional) {
        if (layer >= 0)
            return sqze__fail(err, cap, "no tensor blk.%d.%s.%s", (int)layer, sqze_role_name(role),
                              param ? "bias" : "weight");
        return sqze__fail(err, cap, "no tensor %s.%s", sqze_role_name(role), param ? "bias" : "weight");
    }
    return 0;
}

static int bind_layer(const sqze_bundle *b, const sqze_hparams *hp, uint32_t l, sqze_layer *L, char *err,
                      size_t cap) {
    sqze_layer_dims(hp, l, &L->heads, &L->kv_heads, &L->d_ff);
    uint32_t d = hp->d_model, qd = L->heads * hp->head_dim, kvd = L->kv_heads * hp->head_dim, ff = L->d_ff;
    int32_t li = (int32_t)l;
    int bias = (hp->flags & SQZB_HP_ATTN_BIAS) != 0;
    if (bind(b, SQZE_ROLE_ATTN_NORM, li, 0, d, 1, 0, &L->attn_norm, err, cap) ||
        bind(b, SQZE_ROLE_ATTN_Q, li, 0, qd, d, 0, &L->wq, err, cap) ||
        bind(b, SQZE_ROLE_ATTN_K, li, 0, kvd, d, 0, &L->wk, err, cap) ||
        bind(b, SQZE_ROLE_ATTN_V, li, 0, kvd, d, 0, &L->wv, err, cap) ||
        bind(b, SQZE_ROLE_ATTN_OUT, li, 0, d, qd, 0, &L->wo, err, cap) ||
        bind(b, SQZE_ROLE_ATTN_Q, li, 1, qd, 1, !bias, &L->bq, err, cap) ||
        bind(b, SQZE_ROLE_ATTN_K, li, 1, kvd, 1, !bias, &L->bk, err, cap) ||
        bind(b, SQZE_ROLE_ATTN_V, li, 1, kvd, 1, !bias, &L->bv, err, cap) ||
        bind(b, SQZE_ROLE_FFN_NORM, li, 0, d, 1, 0, &L->ffn_norm, err, cap) ||
        bind(b, SQZE_ROLE_FFN_GATE, li, 0, ff, d, 0, &L->gate, err, cap) ||
        bind(b, SQZE_ROLE_FFN_UP, li, 0, ff, d, 0, &L->up, err, cap) ||
        bind(b, SQZE_ROLE_FFN_DOWN, li, 0, d, ff, 0, &L->down, err, cap))
        return 1;
    return 0;
}

int sqze_model_check(const sqze_bundle *b, char *err, size_t cap) {
    sqze_hparams hp;
    sqze_vocab_view v;
    if (sqze_hparams_read(b, &hp, err, cap) || sqze_vocab_read(b, &v, err, cap)) return 1;
    if (v.n_tokens > hp.vocab_size)
        return sqze__fail(err, cap, "vocab: %u tokens for an embedding of %u rows", (unsigned)v.n_tokens,
                          (unsigned)hp.vocab_size);
    sqze_w w;
    sqze_layer L;
    if (bind(b, SQZE_ROLE_TOKEN_EMBD, -1, 0, hp.vocab_size, hp.d_model, 0, &w, err, cap) ||
        bind(b, SQZE_ROLE_OUTPUT_NORM, -1, 0, hp.d_model, 1, 0, &w, err, cap) ||
        (!(hp.flags & SQZB_HP_TIED) && bind(b, SQZE_ROLE_OUTPUT, -1, 0, hp.vocab_size, hp.d_model, 0, &w, err, cap)))
        return 1;
    for (uint32_t l = 0; l < hp.n_layers; l++)
        if (bind_layer(b, &hp, l, &L, err, cap)) return 1;
    return 0;
}

void sqze_set_activations(sqze_model *m, int acts) { m->acts = acts == SQZE_ACTS_F32 ? SQZE_ACTS_F32 : SQZE_ACTS_Q8; }

int sqze_model_init(sqze_model *m, const sqze_bundle *b, uint32_t ctx, void *arena, size_t arena_size, char *err,
                    size_t cap) {
    memset(m, 0, sizeof *m);
    if (sqze_hparams_read(b, &m->hp, err, cap) || sqze_vocab_read(b, &m->vocab, err, cap)) return 1;
    const sqze_hparams *hp = &m->hp;
    if (ctx < 1) return sqze__fail(err, cap, "a context of %u positions", (unsigned)ctx);
    if (m->vocab.n_tokens > hp->vocab_size)
        return sqze__fail(err, cap, "vocab: %u tokens for an embedding of %u rows", (unsigned)m->vocab.n_tokens,
                          (unsigned)hp->vocab_size);
    plan p;
    make_plan(hp, &m->vocab, ctx, &p);
    if (!p.total) return sqze__fail(err, cap, "a context of %u positions is too large to lay out", (unsigned)ctx);
    if (!arena || arena_size < p.total || ((uintptr_t)arena) % ALIGN)
        return sqze__fail(err, cap, "the arena holds %zu bytes (64-byte aligned); this context needs %zu", arena_size,
                          p.total);
    uint8_t *a = arena;
    m->ctx = ctx;
    m->layers = (sqze_layer *)(a + p.layers);
    if (bind(b, SQZE_ROLE_TOKEN_EMBD, -1, 0, hp->vocab_size, hp->d_model, 0, &m->tok_embd, err, cap) ||
        bind(b, SQZE_ROLE_OUTPUT_NORM, -1, 0, hp->d_model, 1, 0, &m->out_norm, err, cap))
        return 1;
    if (hp->flags & SQZB_HP_TIED) m->output = m->tok_embd;
    else if (bind(b, SQZE_ROLE_OUTPUT, -1, 0, hp->vocab_size, hp->d_model, 0, &m->output, err, cap)) return 1;
    float *kv = (float *)(a + p.kv);
    for (uint32_t l = 0; l < hp->n_layers; l++) {
        sqze_layer *L = &m->layers[l];
        memset(L, 0, sizeof *L);
        if (bind_layer(b, hp, l, L, err, cap)) return 1;
        size_t n = (size_t)ctx * L->kv_heads * hp->head_dim;
        L->kcache = kv;
        L->vcache = kv + n;
        kv += 2 * n;
    }
    m->x = (float *)(a + p.x);
    m->xb = (float *)(a + p.xb);
    m->xb2 = (float *)(a + p.xb2);
    m->q = (float *)(a + p.q);
    m->att = (float *)(a + p.att);
    m->hb = (float *)(a + p.hb);
    m->hb2 = (float *)(a + p.hb2);
    m->acts = SQZE_ACTS_Q8;
    m->xq = (int8_t *)(a + p.xq);
    m->xq_c = (int32_t *)(a + p.xq_c);
    m->xq_cb = (int32_t *)(a + p.xq_cb);
    m->xq_d = (float *)(a + p.xq_d);
    m->xq_s = (float *)(a + p.xq_s);
    m->xh = (float *)(a + p.xh);
    m->scores = (float *)(a + p.scores);
    m->rope_cos = (float *)(a + p.rope_cos);
    m->rope_sin = (float *)(a + p.rope_sin);
    m->logits = (float *)(a + p.logits);
    m->probs = (float *)(a + p.probs);
    m->prob_ids = (int32_t *)(a + p.prob_ids);
    m->tokens = (int32_t *)(a + p.tokens);
    sqze__tok_build(m, &m->vocab, a + p.tok);
    return 0;
}

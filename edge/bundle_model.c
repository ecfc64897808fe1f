/*
 * edge/bundle_model.c - the HPARAMS and VOCAB sections (layouts in edge/bundle_format.h),
 * read in place and checked: every count against the bytes there and against the caps.
 */
#include <string.h>

#include "edge/edge_internal.h"

uint64_t sqze_dtype_bytes(uint32_t dtype, uint64_t n) {
    switch (dtype) {
    case SQZB_DT_F32: return n <= UINT64_MAX / 4 ? n * 4 : 0;
    case SQZB_DT_F16: return n <= UINT64_MAX / 2 ? n * 2 : 0;
    case SQZB_DT_Q8_0: return n % 32 ? 0 : n / 32 * 34;
    case SQZB_DT_Q4_0:
    case SQZB_DT_Q4_0_X8: return n % 32 ? 0 : n / 32 * 18;
    case SQZB_DT_Q4_1: return n % 32 ? 0 : n / 32 * 20;
    default: return 0;
    }
}

const char *sqze_dtype_name(uint32_t dtype) {
    switch (dtype) {
    case SQZB_DT_F32: return "f32";
    case SQZB_DT_F16: return "f16";
    case SQZB_DT_Q8_0: return "q8_0";
    case SQZB_DT_Q4_0: return "q4_0";
    case SQZB_DT_Q4_0_X8: return "q4_0 (8-row groups)";
    case SQZB_DT_Q4_1: return "q4_1";
    case SQZB_DT_I8_ROW: return "int8 (sqz, per row)";
    case SQZB_DT_U4_GROUP: return "int4 (sqz, per group)";
    default: return "unknown";
    }
}

/* The one section of a kind that the model needs, stored plainly. */
static int need_section(const sqze_bundle *b, uint32_t kind, const char *what, sqze_section *s, char *err,
                        size_t cap) {
    int64_t i = sqze_bundle_find(b, kind, s);
    if (i < 0) return sqze__fail(err, cap, "no %s section", what);
    sqze_section o;
    for (uint32_t j = (uint32_t)i + 1; j < b->n_sections; j++) {
        sqze_bundle_section(b, j, &o);
        if (o.kind == kind) return sqze__fail(err, cap, "section %u: a second %s section", (unsigned)j, what);
    }
    if (s->flags & SQZB_S_DEFLATE)
        return sqze__fail(err, cap, "section %u (%s) is deflated (a transport form): export the bundle without "
                          "--deflate to run it", (unsigned)i, what);
    return 0;
}

void sqze_layer_dims(const sqze_hparams *hp, uint32_t l, uint32_t *heads, uint32_t *kv_heads, uint32_t *d_ff) {
    const uint8_t *p = hp->layer_dims + (size_t)l * 12;
    *heads = sqze__u32(p);
    *kv_heads = sqze__u32(p + 4);
    *d_ff = sqze__u32(p + 8);
}

int sqze_hparams_read(const sqze_bundle *b, sqze_hparams *hp, char *err, size_t cap) {
    sqze_section s;
    memset(hp, 0, sizeof *hp);
    if (need_section(b, SQZB_KIND_HPARAMS, "hparams", &s, err, cap)) return 1;
    const uint8_t *p = s.data;
    uint32_t fixed = s.stored >= 4 ? sqze__u32(p) : 0;
    if (s.stored < SQZB_HP_FIXED || fixed < SQZB_HP_FIXED || fixed > s.stored)
        return sqze__fail(err, cap, "section %u (hparams): %llu bytes, fixed part %u (at least %d)",
                          (unsigned)s.index, (unsigned long long)s.stored, (unsigned)fixed, SQZB_HP_FIXED);
    memcpy(hp->arch, p + 4, 32);
    hp->arch[32] = 0;
    hp->family = sqze__u32(p + 36);
    hp->rope_layout = sqze__u32(p + 40);
    hp->act = sqze__u32(p + 44);
    hp->flags = sqze__u32(p + 48);
    hp->norm_eps = sqze__f32(p + 52);
    hp->rope_theta = sqze__f32(p + 56);
    uint32_t *dims[] = {&hp->n_layers, &hp->d_model, &hp->n_heads, &hp->n_kv_heads, &hp->head_dim,
                        &hp->d_ff, &hp->vocab_size, &hp->ctx_len};
    for (int i = 0; i < 8; i++) *dims[i] = sqze__u32(p + 60 + 4 * i);
    const char *lab = "hparams";
    if (hp->family != 0) return sqze__fail(err, cap, "%s: family %u is not llama (the only one the runtime runs)", lab,
                                           (unsigned)hp->family);
    if (hp->act != 0) return sqze__fail(err, cap, "%s: activation %u is not SiLU", lab, (unsigned)hp->act);
    if (hp->rope_layout != 1 && hp->rope_layout != 2)
        return sqze__fail(err, cap, "%s: rotary layout %u (1 interleaved, 2 half)", lab, (unsigned)hp->rope_layout);
    if (!(hp->norm_eps > 0 && hp->norm_eps < 1) || !(hp->rope_theta > 0 && hp->rope_theta < 1e12f))
        return sqze__fail(err, cap, "%s: norm_eps %g or rope_theta %g out of range", lab, (double)hp->norm_eps,
                          (double)hp->rope_theta);
    if (hp->n_layers < 1 || hp->n_layers > SQZB_MAX_LAYERS)
        return sqze__fail(err, cap, "%s: %u layers (1 to %u)", lab, (unsigned)hp->n_layers, SQZB_MAX_LAYERS);
    if (hp->d_model < 1 || hp->d_model > SQZB_MAX_DIM || hp->head_dim < 2 || hp->head_dim % 2 ||
        hp->head_dim > 4096 || hp->vocab_size < 1 || hp->vocab_size > SQZB_MAX_VOCAB)
        return sqze__fail(err, cap, "%s: d_model %u, head_dim %u, vocab %u out of range", lab,
                          (unsigned)hp->d_model, (unsigned)hp->head_dim, (unsigned)hp->vocab_size);
    if (s.stored - fixed < (uint64_t)hp->n_layers * 12)
        return sqze__fail(err, cap, "%s: %u layers need %u bytes of per-layer dims, %llu there", lab,
                          (unsigned)hp->n_layers, (unsigned)hp->n_layers * 12, (unsigned long long)(s.stored - fixed));
    hp->layer_dims = p + fixed;
    for (uint32_t l = 0; l < hp->n_layers; l++) {
        uint32_t h, kv, ff;
        sqze_layer_dims(hp, l, &h, &kv, &ff);
        if (h < 1 || kv < 1 || h % kv || (uint64_t)h * hp->head_dim > SQZB_MAX_DIM || ff < 1 || ff > SQZB_MAX_DIM)
            return sqze__fail(err, cap, "%s: layer %u: %u heads, %u kv heads, d_ff %u", lab, (unsigned)l,
                              (unsigned)h, (unsigned)kv, (unsigned)ff);
    }
    return 0;
}

int sqze_vocab_read(const sqze_bundle *b, sqze_vocab_view *v, char *err, size_t cap) {
    sqze_section s;
    memset(v, 0, sizeof *v);
    if (need_section(b, SQZB_KIND_VOCAB, "vocab", &s, err, cap)) return 1;
    const uint8_t *p = s.data;
    uint32_t fixed = s.stored >= 4 ? sqze__u32(p) : 0;
    if (s.stored < SQZB_VOCAB_FIXED || fixed < SQZB_VOCAB_FIXED || fixed > s.stored)
        return sqze__fail(err, cap, "section %u (vocab): %llu bytes, fixed part %u", (unsigned)s.index,
                          (unsigned long long)s.stored, (unsigned)fixed);
    v->kind = sqze__u32(p + 4);
    v->n_tokens = sqze__u32(p + 8);
    v->bos = (int32_t)sqze__u32(p + 12);
    v->eos = (int32_t)sqze__u32(p + 16);
    v->unk = (int32_t)sqze__u32(p + 20);
    v->flags = sqze__u32(p + 24);
    v->max_token_len = sqze__u32(p + 28);
    v->n_merges = sqze__u32(p + 32);
    if (v->kind != 1 && v->kind != 2) return sqze__fail(err, cap, "vocab: kind %u (1 SPM, 2 BPE)", (unsigned)v->kind);
    if (v->n_tokens < 1 || v->n_tokens > SQZB_MAX_VOCAB || v->n_merges > SQZB_MAX_VOCAB)
        return sqze__fail(err, cap, "vocab: %u tokens, %u merges (at most %u)", (unsigned)v->n_tokens,
                          (unsigned)v->n_merges, SQZB_MAX_VOCAB);
    const int32_t sp[3] = {v->bos, v->eos, v->unk};
    for (int i = 0; i < 3; i++)
        if (sp[i] < -1 || sp[i] >= (int32_t)v->n_tokens)
            return sqze__fail(err, cap, "vocab: special id %d outside %u tokens", (int)sp[i], (unsigned)v->n_tokens);
    uint64_t left = s.stored - fixed, need = (uint64_t)v->n_tokens * 5;
    if (left < need)
        return sqze__fail(err, cap, "vocab: %u tokens need %llu bytes of scores and types, %llu there",
                          (unsigned)v->n_tokens, (unsigned long long)need, (unsigned long long)left);
    v->scores = p + fixed;
    v->types = v->scores + (size_t)v->n_tokens * 4;
    v->strings = v->types + v->n_tokens;
    v->strings_size = (size_t)(left - need);
    size_t at = 0;
    uint32_t longest = 0;
    for (uint64_t i = 0; i < (uint64_t)v->n_tokens + v->n_merges + 1; i++) {
        if (v->strings_size - at < 4)
            return sqze__fail(err, cap, "vocab: string %llu is cut off", (unsigned long long)i);
        uint32_t n = sqze__u32(v->strings + at);
        if (n > SQZB_MAX_TOKEN_LEN || n > v->strings_size - at - 4)
            return sqze__fail(err, cap, "vocab: string %llu of %u bytes (at most %u, and inside the section)",
                              (unsigned long long)i, (unsigned)n, SQZB_MAX_TOKEN_LEN);
        if (i < v->n_tokens && n > longest) longest = n;
        if (i == (uint64_t)v->n_tokens + v->n_merges) {
            v->pre = (const char *)v->strings + at + 4;
            v->pre_len = n;
        }
        at += 4 + n;
    }
    v->max_token_len = longest;
    return 0;
}

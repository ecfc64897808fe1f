/*
 * formats/bundle_read.c - a .sqzb bundle as an sqz_model, so every sqz command runs a bundle.
 *
 * The bundle is checked by the edge runtime's own reader (edge/bundle.c: header, table, CRCs),
 * so sqz and sqz-edge accept exactly the same files. Tensors point into the mapping; a bundle
 * with deflated sections (the transport form) is inflated into memory first.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <zlib.h>

#include "edge/crypto.h"
#include "edge/edge_internal.h"
#include "formats/bundle_internal.h"
#include "sqz/qparams.h"

bool sqz__looks_bundle(const uint8_t *p, size_t n) { return n >= 8 && memcmp(p, SQZB_MAGIC, 8) == 0; }

/* A plain image of a bundle whose sections are deflated: every section inflated, offsets,
 * sizes and CRCs rewritten (the header and table CRCs too). malloc'd into *out. */
static sqz_status inflate_image(const char *path, const sqze_bundle *b, uint8_t **out, size_t *out_n) {
    uint64_t off = (SQZB_HEADER_SIZE + (uint64_t)b->n_sections * SQZB_ENTRY_SIZE + SQZB_ALIGN - 1) / SQZB_ALIGN *
                   SQZB_ALIGN;
    sqze_section s;
    for (uint32_t i = 0; i < b->n_sections; i++) {
        sqze_bundle_section(b, i, &s);
        /* deflate expands at most 1032:1 (RFC 1951's longest match per 2 bits) */
        SQZ_RETURN_IF(s.size / 1032 > s.stored || s.size > ((uint64_t)1 << 40) || off > ((uint64_t)1 << 41),
                      SQZ_ERR_FORMAT, "%s: section %u claims %" PRIu64 " bytes from %" PRIu64 " deflated", path,
                      (unsigned)i, s.size, s.stored);
        off = (off + s.size + SQZB_ALIGN - 1) / SQZB_ALIGN * SQZB_ALIGN;
    }
    uint8_t *img = sqz__calloc(1, (size_t)off);
    if (!img) return SQZ_ERR_NOMEM;
    memcpy(img, b->data, SQZB_HEADER_SIZE);
    uint8_t *table = img + SQZB_HEADER_SIZE;
    off = (SQZB_HEADER_SIZE + (uint64_t)b->n_sections * SQZB_ENTRY_SIZE + SQZB_ALIGN - 1) / SQZB_ALIGN * SQZB_ALIGN;
    for (uint32_t i = 0; i < b->n_sections; i++) {
        sqze_bundle_section(b, i, &s);
        uint8_t *e = table + (size_t)i * SQZB_ENTRY_SIZE;
        memcpy(e, b->table + (size_t)i * b->entry_size, SQZB_ENTRY_SIZE);
        if (s.flags & SQZB_S_DEFLATE) {
            uLongf got = (uLongf)s.size;
            int zr = uncompress(img + off, &got, s.data, (uLong)s.stored);
            if (zr != Z_OK || got != s.size) {
                free(img);
                return SQZ_ERROR(SQZ_ERR_FORMAT, "%s: section %u: deflate stream does not inflate to its %" PRIu64
                                 " bytes (zlib %d)", path, (unsigned)i, s.size, zr);
            }
        } else {
            memcpy(img + off, s.data, (size_t)s.size);
        }
        sqz__wr_u32(e + 4, s.flags & ~SQZB_S_DEFLATE);
        sqz__wr_u64(e + 8, off);
        sqz__wr_u64(e + 16, s.size);
        sqz__wr_u32(e + 32, sqze_crc32(0, img + off, (size_t)s.size));
        off = (off + s.size + SQZB_ALIGN - 1) / SQZB_ALIGN * SQZB_ALIGN;
    }
    sqz__wr_u32(img + 12, 0); /* the signature does not carry over */
    sqz__wr_u32(img + 20, SQZB_ENTRY_SIZE);
    sqz__wr_u64(img + 24, SQZB_HEADER_SIZE);
    sqz__wr_u64(img + 32, off);
    sqz__wr_u64(img + 40, 0);
    sqz__wr_u32(img + 48, 0);
    sqz__wr_u32(img + 52, sqze_crc32(0, table, (size_t)b->n_sections * SQZB_ENTRY_SIZE));
    sqz__wr_u32(img + 60, sqze_crc32(0, img, 60));
    *out = img;
    *out_n = (size_t)off;
    return SQZ_OK;
}

static char *dup_n(const uint8_t *p, size_t n) {
    char *s = sqz__malloc(n + 1);
    if (s) {
        memcpy(s, p, n);
        s[n] = 0;
    }
    return s;
}

static sqz_status read_vocab(const char *path, const sqze_bundle *b, sqz_vocab *v) {
    char err[256];
    sqze_vocab_view w;
    SQZ_RETURN_IF(sqze_vocab_read(b, &w, err, sizeof err), SQZ_ERR_FORMAT, "%s: %s", path, err);
    v->kind = w.kind == 1 ? SQZ_VOCAB_SPM : SQZ_VOCAB_BPE;
    v->tokens = sqz__calloc(w.n_tokens, sizeof *v->tokens);
    v->scores = sqz__calloc(w.n_tokens, sizeof *v->scores);
    v->types = sqz__calloc(w.n_tokens, sizeof *v->types);
    if (!v->tokens || !v->scores || !v->types) return SQZ_ERR_NOMEM;
    v->n_tokens = (int32_t)w.n_tokens;
    size_t at = 0;
    for (uint32_t i = 0; i < w.n_tokens; i++) {
        uint32_t n = sqze__u32(w.strings + at);
        SQZ_RETURN_IF(memchr(w.strings + at + 4, 0, n), SQZ_ERR_FORMAT, "%s: vocab: token %u holds a NUL byte", path,
                      (unsigned)i);
        if (!(v->tokens[i] = dup_n(w.strings + at + 4, n))) return SQZ_ERR_NOMEM;
        at += 4 + n;
        v->scores[i] = sqze__f32(w.scores + 4 * (size_t)i);
        v->types[i] = w.types[i];
    }
    if (w.n_merges) {
        v->merges = sqz__calloc(w.n_merges, sizeof *v->merges);
        if (!v->merges) return SQZ_ERR_NOMEM;
        v->n_merges = (int32_t)w.n_merges;
        for (uint32_t i = 0; i < w.n_merges; i++) {
            uint32_t n = sqze__u32(w.strings + at);
            SQZ_RETURN_IF(memchr(w.strings + at + 4, 0, n), SQZ_ERR_FORMAT, "%s: vocab: merge %u holds a NUL byte",
                          path, (unsigned)i);
            if (!(v->merges[i] = dup_n(w.strings + at + 4, n))) return SQZ_ERR_NOMEM;
            at += 4 + n;
        }
    }
    if (w.pre_len && !(v->pre = dup_n((const uint8_t *)w.pre, w.pre_len))) return SQZ_ERR_NOMEM;
    v->bos = w.bos;
    v->eos = w.eos;
    v->unk = w.unk;
    v->add_bos = w.flags & SQZB_VOCAB_ADD_BOS;
    v->add_eos = w.flags & SQZB_VOCAB_ADD_EOS;
    v->add_space_prefix = w.flags & SQZB_VOCAB_SPACE_PREFIX;
    v->max_token_len = (int32_t)w.max_token_len;
    return SQZ_OK;
}

/* The qparams of an I8_ROW / U4_GROUP tensor section (layout in edge/bundle_format.h): checked,
 * owned by the model, pointing into the section; t->data / t->nbytes become the codes. */
static sqz_status read_scheme(const char *path, const char *lab, const sqze_section *s, sqz_tensor *t,
                              sqz_model *m) {
    const uint64_t rows = s->shape[0], cols = s->shape[1];
    const bool i8 = s->dtype == SQZB_DT_I8_ROW;
    SQZ_RETURN_IF(s->ndim != 2 || (!i8 && cols % 2) || s->stored < SQZB_QHEADER, SQZ_ERR_FORMAT,
                  "%s: %s: not a (rows, cols) matrix of sqz's int8 / int4 codes", path, lab);
    const uint8_t *h = s->data;
    uint32_t scheme = sqze__u32(h), gs = sqze__u32(h + 4), ng = sqze__u32(h + 8), flags = sqze__u32(h + 12);
    SQZ_RETURN_IF(scheme != (i8 ? 1u : 2u) || gs == 0 || ng == 0 || (uint64_t)gs * ng != cols ||
                      (i8 && (ng != 1 || flags)) || (flags & ~SQZB_Q_ZEROS),
                  SQZ_ERR_FORMAT, "%s: %s: scheme %u, groups of %u x %u for %" PRIu64 " columns, flags %#x", path, lab,
                  (unsigned)scheme, (unsigned)gs, (unsigned)ng, cols, (unsigned)flags);
    uint64_t codes = i8 ? rows * cols : rows * cols / 2; /* shape checked: < 2^48 */
    uint64_t at = (SQZB_QHEADER + codes + 3) / 4 * 4, side = rows * ng;
    uint64_t need = at + side * 4 + ((flags & SQZB_Q_ZEROS) ? side : 0);
    SQZ_RETURN_IF(need != s->stored, SQZ_ERR_FORMAT, "%s: %s: %" PRIu64 " bytes stored, the codes, scales and zero "
                  "points need %" PRIu64, path, lab, s->stored, need);
    sqz_qparams *qp = sqz__calloc(1, sizeof *qp);
    if (!qp) return SQZ_ERR_NOMEM;
    SQZ_TRY(sqz_model_keep(m, qp));
    qp->scheme = i8 ? SQZ_QSCHEME_I8_ROW : SQZ_QSCHEME_U4_GROUP;
    qp->n_out = (int64_t)rows;
    qp->n_in = (int64_t)cols;
    qp->group_size = (int32_t)gs;
    qp->n_groups = ng;
    qp->scales = (const float *)(const void *)(s->data + at);
    qp->zeros = (flags & SQZB_Q_ZEROS) ? s->data + at + side * 4 : NULL;
    qp->act_mode = SQZ_ACT_FLOAT;
    t->data = (void *)(s->data + SQZB_QHEADER);
    t->nbytes = (size_t)codes;
    t->qp = qp;
    sqz_status st = sqz_qparams_check(qp, t->dtype, t->nbytes, lab);
    if (st != SQZ_OK) sqz__error_prefix("%s", path);
    return st;
}

static sqz_status read_model(const char *path, const sqze_bundle *b, sqz_model *m) {
    char err[256];
    sqze_hparams hp;
    SQZ_RETURN_IF(sqze_hparams_read(b, &hp, err, sizeof err), SQZ_ERR_FORMAT, "%s: %s", path, err);
    memcpy(m->hp.arch, hp.arch, sizeof m->hp.arch - 1);
    m->hp.arch[sizeof m->hp.arch - 1] = 0;
    m->hp.family = SQZ_FAMILY_LLAMA;
    m->hp.n_layers = hp.n_layers;
    m->hp.d_model = hp.d_model;
    m->hp.n_heads = hp.n_heads;
    m->hp.n_kv_heads = hp.n_kv_heads;
    m->hp.head_dim = hp.head_dim;
    m->hp.d_ff = hp.d_ff;
    m->hp.vocab_size = hp.vocab_size;
    m->hp.ctx_len = hp.ctx_len;
    m->hp.norm_eps = hp.norm_eps;
    m->hp.rope_theta = hp.rope_theta;
    m->hp.rope_layout = hp.rope_layout == 1 ? SQZ_ROPE_INTERLEAVED : SQZ_ROPE_HALF;
    m->hp.act = SQZ_ACT_SILU;
    m->hp.tied_embeddings = hp.flags & SQZB_HP_TIED;
    m->hp.attn_bias = hp.flags & SQZB_HP_ATTN_BIAS;
    SQZ_TRY(sqz_model_init_layers(m));
    for (uint32_t l = 0; l < hp.n_layers; l++) {
        uint32_t h, kv, ff;
        sqze_layer_dims(&hp, l, &h, &kv, &ff);
        m->layers[l] = (sqz_layer_dims){.n_heads = h, .n_kv_heads = kv, .d_ff = ff};
    }
    SQZ_TRY(read_vocab(path, b, &m->vocab));
    for (uint32_t i = 0; i < b->n_sections; i++) {
        sqze_section s;
        sqze_bundle_section(b, i, &s);
        if (s.kind != SQZB_KIND_TENSOR) continue;
        sqze_section_label(&s, err, sizeof err);
        sqz_tensor t = {0};
        t.dtype = sqz__bundle_dtype_of(s.dtype);
        SQZ_RETURN_IF(t.dtype == SQZ_DTYPE_COUNT, SQZ_ERR_FORMAT, "%s: %s: unknown dtype %u", path, err,
                      (unsigned)s.dtype);
        SQZ_RETURN_IF(s.role >= SQZ_ROLE_COUNT || s.param > 1 || s.ndim < 1 || s.ndim > 2 || s.layer < -1 ||
                          s.layer >= (int32_t)hp.n_layers || (s.layer >= 0) != sqz_role_per_layer((sqz_role)s.role),
                      SQZ_ERR_FORMAT, "%s: %s: role %u, param %u, %u dimensions or layer %d out of range", path, err,
                      (unsigned)s.role, (unsigned)s.param, (unsigned)s.ndim, (int)s.layer);
        SQZ_RETURN_IF(s.shape[0] < 1 || s.shape[0] > SQZB_MAX_DIM * 64ull || s.shape[1] < 1 ||
                          s.shape[1] > SQZB_MAX_DIM || (s.ndim == 1 && s.shape[1] != 1),
                      SQZ_ERR_FORMAT, "%s: %s: shape (%" PRIu64 ", %" PRIu64 ")", path, err, s.shape[0], s.shape[1]);
        t.role = (sqz_role)s.role;
        t.param = (sqz_param)s.param;
        t.layer = s.layer;
        t.ndim = (int32_t)s.ndim;
        t.shape[0] = (int64_t)s.shape[0];
        if (s.ndim == 2) t.shape[1] = (int64_t)s.shape[1];
        if (s.dtype >= SQZB_DT_I8_ROW) {
            SQZ_TRY(read_scheme(path, err, &s, &t, m));
        } else {
            size_t nb;
            SQZ_RETURN_IF(!sqz_dtype_nbytes(t.dtype, sqz_tensor_nelements(&t), &nb) || nb != s.stored, SQZ_ERR_FORMAT,
                          "%s: %s: %" PRIu64 " bytes stored, its shape in %s needs %zu", path, err, s.stored,
                          sqz_dtype_name(t.dtype), nb);
            t.nbytes = nb;
            t.data = (void *)s.data;
        }
        char name[96];
        if (s.layer >= 0) snprintf(name, sizeof name, "blk.%d.%s.%s", (int)s.layer, sqz_role_name(t.role),
                                   s.param ? "bias" : "weight");
        else snprintf(name, sizeof name, "%s.%s", sqz_role_name(t.role), s.param ? "bias" : "weight");
        SQZ_RETURN_IF(sqz_model_get(m, t.role, t.layer, t.param), SQZ_ERR_FORMAT, "%s: %s: a second %s", path, err,
                      name);
        if (s.dtype == SQZB_DT_Q4_0_X8) { /* back to q4_0's rows, in memory the model owns */
            SQZ_RETURN_IF(s.ndim != 2 || s.shape[0] % 8, SQZ_ERR_FORMAT,
                          "%s: %s: q4_0 in 8-row groups with %" PRIu64 " rows (a multiple of 8)", path, err,
                          s.shape[0]);
            uint8_t *plain = sqz__malloc(t.nbytes ? t.nbytes : 1);
            if (!plain) return SQZ_ERR_NOMEM;
            sqze_q4_0_from_x8(s.data, plain, s.shape[0], s.shape[1]);
            t.data = plain;
            t.owned = true;
        }
        t.name = name;
        if (!sqz_model_add_tensor(m, &t)) {
            if (t.owned) free(t.data);
            return SQZ_ERR_NOMEM;
        }
    }
    return SQZ_OK;
}

sqz_status sqz__bundle_read_mem(const char *path, const uint8_t *data, size_t size, sqz_model *m) {
    char err[256];
    sqze_bundle b;
    SQZ_RETURN_IF(sqze_bundle_open(&b, data, size, NULL, err, sizeof err), SQZ_ERR_FORMAT, "%s: %s", path, err);
    bool deflated = false;
    for (uint32_t i = 0; i < b.n_sections; i++) {
        sqze_section s;
        sqze_bundle_section(&b, i, &s);
        deflated = deflated || (s.flags & SQZB_S_DEFLATE);
    }
    if (deflated) {
        uint8_t *img = NULL;
        size_t n = 0;
        SQZ_TRY(inflate_image(path, &b, &img, &n));
        SQZ_TRY(sqz_model_keep(m, img));
        SQZ_RETURN_IF(sqze_bundle_open(&b, img, n, NULL, err, sizeof err), SQZ_ERR_FORMAT, "%s: inflated: %s", path,
                      err);
    }
    return read_model(path, &b, m);
}

sqz_status sqz__bundle_open(const char *path, sqz_model *m) {
    sqz_mapping *map;
    SQZ_TRY(sqz_map(path, &map));
    SQZ_TRY(sqz_model_keep_mapping(m, map));
    return sqz__bundle_read_mem(path, map->data, map->size, m);
}

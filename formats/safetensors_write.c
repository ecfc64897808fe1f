/* formats/safetensors_write.c - an HF directory: model.safetensors, config.json,
 * generation_config.json and the tokenizer files, written atomically (sqz_outdir).
 *
 * The header is computed first from the tensors' export dtypes and shapes, then the data
 * streams one tensor at a time (memory: one converted tensor beyond the mappings). The
 * header is padded with spaces so the data section starts 8-byte aligned, as the
 * safetensors reference writer does; tensors are written in model order, each size a
 * multiple of its element size, with __metadata__ {"format": "pt"} so that
 * transformers' safetensors loader accepts the file. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "formats/formats_internal.h"
#include "sqz/qparams.h"

#define ST_NAME_CAP 128

typedef struct st_plan {
    const sqz_tensor *t;
    char name[ST_NAME_CAP];
    sqz_dtype dtype;
    size_t nbytes;
    int32_t ndim;                 /* the shape written (t's, or a part's) */
    int64_t shape[SQZ_MAX_DIMS];
    int part, n_parts;            /* a part of a scheme-quantized weight in the layout's form (part
                                     0 .. n_parts - 1, consecutive in the plan), or -1 */
    const sqz_tensor *more[2];    /* a fused tensor's further members, whose rows follow t's (Phi-3) */
    int n_more;
    bool minus_one;               /* a Gemma norm: HF stores w where sqz keeps 1 + w (written as f32) */
    int32_t expert;               /* matrix `expert` of a stacked FFN_*_EXPS tensor (one HF tensor per expert),
                                     or -1 */
} st_plan;

/* Whether t is written in the layout (else as floats or its own dtype): sqz's INT8 / INT4, and a
 * GGUF block-quantized linear layer of the blocks (exactly, or refused: st_blocks.c). */
static bool in_layout(const sqz_tensor *t, const sqz_save_opts *o) {
    return (t->qp || (sqz__st_block_linear(t) && !o->gguf_blocks_float)) &&
           !(o->dtype >= 0 && sqz_dtype_info((sqz_dtype)o->dtype)->is_float);
}

/* The parts of weight t in layout L: from its qparams, or from its GGUF blocks. */
static sqz_status layout_parts(const sqz__st_layout *L, const sqz_tensor *t, sqz__st_part *pp, int *np) {
    return t->qp ? L->parts(L, t, pp, np) : sqz__st_block_parts(L, t, pp, np);
}

/* A JSON string literal (names are UTF-8; only quotes, backslashes and controls need escapes),
 * appended to the header (core/bytebuf.c). */
static void sb_json_str(sqz__bytebuf *b, const char *s) {
    sqz__bytebuf_put(b, "\"", 1);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') { sqz__bytebuf_put(b, "\\", 1); sqz__bytebuf_put(b, (const char *)&c, 1); }
        else if (c < 0x20) sqz__bytebuf_printf(b, "\\u%04x", c);
        else sqz__bytebuf_put(b, (const char *)&c, 1);
    }
    sqz__bytebuf_put(b, "\"", 1);
}

/* The plan rows of quantized weight t (its HF name in p->name): its parts in the layout, whose
 * data is computed again when written. */
static sqz_status plan_parts(const sqz__st_layout *L, const sqz_tensor *t, st_plan *plan, size_t *n) {
    sqz__st_part pp[SQZ__ST_MAX_PARTS];
    int np = 0;
    SQZ_TRY(layout_parts(L, t, pp, &np));
    char stem[ST_NAME_CAP]; /* the HF name up to "weight"; a copy, as the rows overwrite it */
    const char *name = plan[*n].name;
    snprintf(stem, sizeof stem, "%.*s", (int)(strlen(name) - strlen("weight")), name);
    sqz_status st = SQZ_OK;
    for (int k = 0; k < np && st == SQZ_OK; k++) {
        st_plan *q = &plan[(*n)++];
        q->t = t;
        q->expert = -1;
        q->part = k;
        q->n_parts = np;
        q->dtype = pp[k].dtype;
        q->nbytes = pp[k].nbytes;
        q->ndim = pp[k].ndim;
        q->shape[0] = pp[k].shape[0];
        q->shape[1] = pp[k].shape[1];
        if ((size_t)snprintf(q->name, sizeof q->name, "%s%s", stem, pp[k].suffix) >= sizeof q->name)
            st = SQZ_ERROR(SQZ_ERR_UNSUPPORTED, "tensor '%s': name too long", t->name);
    }
    sqz__st_parts_free(pp, np);
    return st;
}

/* Roles that config.json states (the rope frequency factors), not tensors of an HF checkpoint. */
static bool config_role(sqz_role r) {
    return r == SQZ_ROLE_ROPE_FREQS || r == SQZ_ROLE_ROPE_FACTORS_LONG || r == SQZ_ROLE_ROPE_FACTORS_SHORT;
}

/* A fused row (Phi-3's qkv_proj / gate_up_proj): t and the layer's other members, in one tensor of
 * the concatenated rows; float members of one dtype only. */
static sqz_status plan_fused(const sqz_model *m, const sqz_save_opts *o, const sqz_tensor *t, const sqz_role *mem,
                             int n_mem, const char *base, st_plan *p) {
    SQZ_RETURN_IF(in_layout(t, o), SQZ_ERR_UNSUPPORTED, "model.safetensors: tensor '%s': %s's fused %s in a "
                  "quantized HF layout is not supported: write GGUF, or a float --dtype", t->name,
                  sqz_family_name(m->hp.family), base);
    int64_t rows = t->shape[0];
    for (int k = 1; k < n_mem; k++) {
        const sqz_tensor *u = sqz_model_get(m, mem[k], t->layer, t->param);
        SQZ_RETURN_IF(!u || in_layout(u, o) || sqz__export_dtype(u, o, SQZ_FORMAT_SAFETENSORS) != p->dtype ||
                          u->ndim != t->ndim || (t->ndim == 2 && u->shape[1] != t->shape[1]),
                      SQZ_ERR_UNSUPPORTED, "model.safetensors: tensor '%s': %s's fused %s needs its members in one "
                      "float type and width (%s is %s)", t->name, sqz_family_name(m->hp.family), base,
                      u ? u->name : sqz_role_name(mem[k]), u ? sqz_dtype_name(u->dtype) : "missing");
        p->more[p->n_more++] = u;
        rows += u->shape[0];
    }
    SQZ_RETURN_IF(!sqz__hf_fused_name(m->hp.family, t->layer, base, t->param, p->name, sizeof p->name),
                  SQZ_ERR_UNSUPPORTED, "model.safetensors: tensor '%s': name too long", t->name);
    p->ndim = t->ndim;
    memcpy(p->shape, t->shape, sizeof p->shape);
    p->shape[0] = rows;
    SQZ_RETURN_IF(!sqz_dtype_nbytes(p->dtype, rows * (t->ndim == 2 ? t->shape[1] : 1), &p->nbytes), SQZ_ERR_SHAPE,
                  "model.safetensors: tensor '%s': size overflows", t->name);
    return SQZ_OK;
}

/* The plan rows of a mixture's stacked tensor t: one float tensor per expert, under the family's HF names. */
static sqz_status plan_experts(const sqz_model *m, const sqz_save_opts *o, const sqz_tensor *t, st_plan *plan,
                               size_t *n) {
    SQZ_RETURN_IF(in_layout(t, o), SQZ_ERR_UNSUPPORTED, "model.safetensors: tensor '%s': experts in a quantized HF "
                  "layout are not supported yet: write GGUF, or a float --dtype", t->name);
    const sqz_dtype dt = sqz__export_dtype(t, o, SQZ_FORMAT_SAFETENSORS);
    for (int64_t e = 0; e < t->shape[0]; e++) {
        st_plan *p = &plan[(*n)++];
        *p = (st_plan){.t = t, .dtype = dt, .part = -1, .expert = (int32_t)e, .ndim = 2,
                       .shape = {t->shape[1], t->shape[2], 1, 1}};
        SQZ_RETURN_IF(!sqz__hf_expert_name(m->hp.family, t->role, t->layer, (int32_t)e, t->param, p->name,
                                           sizeof p->name),
                      SQZ_ERR_UNSUPPORTED, "model.safetensors: tensor '%s': no HF name for its experts in a %s model",
                      t->name, sqz_family_name(m->hp.family));
        SQZ_RETURN_IF(!sqz_dtype_nbytes(dt, t->shape[1] * t->shape[2], &p->nbytes), SQZ_ERR_SHAPE,
                      "model.safetensors: tensor '%s': size overflows", t->name);
    }
    return SQZ_OK;
}

/* Which tensors are written, under which names and dtypes. */
static sqz_status make_plan(const sqz_model *m, const sqz_save_opts *o, const sqz__st_layout *L, st_plan **out,
                            size_t *n_out) {
    *out = NULL;
    *n_out = 0;
    size_t rows = (size_t)m->n_tensors * SQZ__ST_MAX_PARTS + 1;
    for (int64_t i = 0; i < m->n_tensors; i++) rows += m->tensors[i].ndim == 3 ? (size_t)m->tensors[i].shape[0] : 0;
    st_plan *plan = sqz__calloc(rows, sizeof *plan);
    if (!plan) return SQZ_ERR_NOMEM;
    size_t n = 0;
    sqz_status st = SQZ_OK;
    for (int64_t i = 0; i < m->n_tensors && st == SQZ_OK; i++) {
        const sqz_tensor *t = &m->tensors[i];
        if (t->role == SQZ_ROLE_OUTPUT && m->hp.tied_embeddings) continue; /* tie_word_embeddings says it */
        if (config_role(t->role)) continue;
        if (t->ndim == 3) {
            st = plan_experts(m, o, t, plan, &n);
            continue;
        }
        sqz_role mem[3];
        const char *base = NULL;
        const int fused = sqz__hf_fused(m->hp.family, t->role, mem, &base);
        if (fused < 0) continue; /* inside its fused tensor */
        st_plan *p = &plan[n];
        p->t = t;
        p->part = -1;
        p->expert = -1;
        p->dtype = sqz__export_dtype(t, o, SQZ_FORMAT_SAFETENSORS);
        p->minus_one = sqz_family_get(m->hp.family)->hf_norm_plus_one && sqz__is_rms_norm_role(t->role) &&
                       t->param == SQZ_PARAM_WEIGHT;
        if (p->minus_one) p->dtype = SQZ_DTYPE_F32;
        if (fused > 0) {
            st = plan_fused(m, o, t, mem, fused, base, p);
            if (st == SQZ_OK) n++;
        } else if (!sqz__hf_name_make(m->hp.family, t->role, t->layer, t->param, p->name, sizeof p->name))
            st = SQZ_ERROR(SQZ_ERR_UNSUPPORTED, "model.safetensors: tensor '%s': role %s has no HF name in a %s "
                           "model", t->name, sqz_role_name(t->role), sqz_family_name(m->hp.family));
        else if (!t->data)
            st = SQZ_ERROR(SQZ_ERR_INVALID_ARG, "model.safetensors: tensor '%s' has no data", t->name);
        else if (in_layout(t, o)) /* the values and side tensors in the layout */
            st = plan_parts(L, t, plan, &n);
        else if (!sqz_dtype_nbytes(p->dtype, sqz_tensor_nelements(t), &p->nbytes))
            st = SQZ_ERROR(SQZ_ERR_SHAPE, "model.safetensors: tensor '%s': %" PRId64 " elements do not fit %s",
                           t->name, sqz_tensor_nelements(t), sqz_dtype_name(p->dtype));
        else {
            p->ndim = t->ndim;
            memcpy(p->shape, t->shape, sizeof p->shape);
            n++;
        }
    }
    if (st != SQZ_OK) {
        free(plan);
        return st;
    }
    *out = plan;
    *n_out = n;
    return SQZ_OK;
}

/* The header JSON, padded with spaces so that 8 + its length is a multiple of 8. */
static sqz_status make_header(const st_plan *plan, size_t n, sqz__bytebuf *b, uint64_t *data_bytes) {
    uint64_t off = 0;
    sqz__bytebuf_put(b, "{\"__metadata__\":{\"format\":\"pt\"}", 31);
    for (size_t i = 0; i < n; i++) {
        const st_plan *p = &plan[i];
        sqz__bytebuf_put(b, ",", 1);
        sb_json_str(b, p->name);
        sqz__bytebuf_printf(b, ":{\"dtype\":\"%s\",\"shape\":[", sqz_dtype_info(p->dtype)->st_name);
        for (int d = 0; d < p->ndim; d++) sqz__bytebuf_printf(b, "%s%" PRId64, d ? "," : "", p->shape[d]);
        SQZ_RETURN_IF(off + p->nbytes < off, SQZ_ERR_SHAPE, "model.safetensors: data size overflows");
        sqz__bytebuf_printf(b, "],\"data_offsets\":[%" PRIu64 ",%" PRIu64 "]}", off, off + (uint64_t)p->nbytes);
        off += p->nbytes;
    }
    sqz__bytebuf_put(b, "}", 1);
    while (!b->oom && (8 + b->n) % 8 != 0) sqz__bytebuf_put(b, " ", 1);
    if (b->oom) return SQZ_ERR_NOMEM;
    *data_bytes = off;
    return SQZ_OK;
}

/* Quantized weight t with its rows (values, scales, zero points) in the target's rotary order:
 * *out is t itself, or a copy in *tmp whose data and qparams live in bufs (freed by the caller). */
static sqz_status rope_qtensor(const sqz_model *m, const sqz_tensor *t, sqz_rope_layout rope, sqz_tensor *tmp,
                               sqz_qparams *qtmp, void *bufs[3], const sqz_tensor **out) {
    *out = t;
    if (!((t->role == SQZ_ROLE_ATTN_Q || t->role == SQZ_ROLE_ATTN_K) && rope != SQZ_ROPE_NONE &&
          m->hp.rope_layout != SQZ_ROPE_NONE && rope != m->hp.rope_layout))
        return SQZ_OK;
    const int64_t heads = t->role == SQZ_ROLE_ATTN_Q ? m->layers[t->layer].n_heads : m->layers[t->layer].n_kv_heads;
    const int64_t hd = m->hp.head_dim, rows = t->shape[0];
    SQZ_RETURN_IF(rows != heads * hd || hd % 2 != 0, SQZ_ERR_SHAPE, "tensor '%s': %lld rows are not %lld heads of %lld",
                  t->name, (long long)rows, (long long)heads, (long long)hd);
    if (!(bufs[0] = sqz__malloc(t->nbytes))) return SQZ_ERR_NOMEM;
    sqz__rope_permute_rows(t->data, bufs[0], heads, hd, t->nbytes / (size_t)rows, m->hp.rope_layout, rope);
    *tmp = *t;
    tmp->data = bufs[0];
    *out = tmp;
    if (!t->qp) return SQZ_OK; /* GGUF blocks: a row is whole blocks, nothing else to permute */
    const sqz_qparams *qp = t->qp;
    const int64_t ng = qp->n_groups;
    bufs[1] = sqz__malloc((size_t)(rows * ng) * sizeof(float));
    bufs[2] = qp->zeros ? sqz__malloc((size_t)(rows * ng)) : NULL;
    if (!bufs[1] || (qp->zeros && !bufs[2])) return SQZ_ERR_NOMEM;
    sqz__rope_permute_rows((const uint8_t *)qp->scales, bufs[1], heads, hd, (size_t)ng * sizeof(float),
                           m->hp.rope_layout, rope);
    if (qp->zeros) sqz__rope_permute_rows(qp->zeros, bufs[2], heads, hd, (size_t)ng, m->hp.rope_layout, rope);
    *qtmp = *qp;
    qtmp->scales = bufs[1];
    qtmp->zeros = bufs[2];
    tmp->qp = qtmp;
    return SQZ_OK;
}

/* The parts of plan row p's weight in the layout, rows in the target's order (cur: the parts,
 * freed by the caller with sqz__st_parts_free). */
static sqz_status make_parts(const sqz_model *m, const sqz__st_layout *L, const st_plan *p, sqz_rope_layout rope,
                             sqz__st_part *cur, int *n_cur) {
    sqz_tensor tmp;
    sqz_qparams qtmp;
    void *bufs[3] = {NULL, NULL, NULL};
    const sqz_tensor *t;
    sqz_status st = rope_qtensor(m, p->t, rope, &tmp, &qtmp, bufs, &t);
    if (st == SQZ_OK) st = layout_parts(L, t, cur, n_cur);
    if (st == SQZ_OK && *n_cur != p->n_parts) st = SQZ_ERROR(SQZ_ERR_SHAPE, "tensor '%s': parts", p->t->name);
    for (int k = 0; st == SQZ_OK && t != p->t && k < *n_cur; k++) { /* borrowed from the permuted copy */
        if (cur[k].owned || !cur[k].nbytes) continue;
        void *c = sqz__malloc(cur[k].nbytes);
        if (!c) { st = SQZ_ERR_NOMEM; break; }
        memcpy(c, cur[k].data, cur[k].nbytes);
        cur[k].data = c;
        cur[k].owned = true;
    }
    if (st != SQZ_OK) sqz__st_parts_free(cur, *n_cur);
    for (int k = 0; k < 3; k++) free(bufs[k]);
    return st;
}

/* A tensor written as is (or its fused members one after another); Gemma's norms as w = (1 + w) - 1. */
static sqz_status export_plain(const sqz_model *m, const st_plan *p, sqz_rope_layout rope, uint8_t *buf) {
    size_t first = p->nbytes, off;
    if (p->expert >= 0) { /* one matrix of a stacked tensor */
        sqz_tensor one = *p->t;
        one.nbytes = p->t->nbytes / (size_t)p->t->shape[0];
        one.data = (uint8_t *)p->t->data + (size_t)p->expert * one.nbytes;
        one.ndim = 2;
        one.shape[0] = p->t->shape[1];
        one.shape[1] = p->t->shape[2];
        one.shape[2] = 1;
        return sqz__tensor_export(m, &one, p->dtype, rope, buf, p->nbytes, NULL);
    }
    for (int k = 0; k < p->n_more; k++) {
        size_t b;
        if (!sqz_dtype_nbytes(p->dtype, sqz_tensor_nelements(p->more[k]), &b)) return SQZ_ERR_SHAPE;
        first -= b;
    }
    SQZ_TRY(sqz__tensor_export(m, p->t, p->dtype, rope, buf, first, NULL));
    off = first;
    for (int k = 0; k < p->n_more; k++) {
        size_t b;
        sqz_dtype_nbytes(p->dtype, sqz_tensor_nelements(p->more[k]), &b);
        SQZ_TRY(sqz__tensor_export(m, p->more[k], p->dtype, rope, buf + off, b, NULL));
        off += b;
    }
    if (p->minus_one) {
        float *w = (float *)(void *)buf;
        for (size_t j = 0; j < p->nbytes / sizeof(float); j++) w[j] -= 1.0f;
    }
    return SQZ_OK;
}

/* Plan row p's source pages once written (its last part; a mapping's pages only, heap data is never
 * touched): a conversion holds one tensor, not the model. */
static void release_source(const st_plan *p) {
    if (p->part >= 0 && p->part != p->n_parts - 1) return;
    if (p->expert >= 0) {
        const size_t one = p->t->nbytes / (size_t)p->t->shape[0];
        (void)sqz__mapping_release((const uint8_t *)p->t->data + (size_t)p->expert * one, one);
        return;
    }
    (void)sqz__mapping_release(p->t->data, p->t->nbytes);
    for (int k = 0; k < p->n_more; k++) (void)sqz__mapping_release(p->more[k]->data, p->more[k]->nbytes);
}

static sqz_status write_weights(const sqz_model *m, const sqz_save_opts *o, const sqz__st_layout *L,
                                const st_plan *plan, size_t n, sqz_outdir *d) {
    sqz__bytebuf h = {0};
    uint64_t total = 0;
    sqz_status st = make_header(plan, n, &h, &total);
    if (st != SQZ_OK) { free(h.p); return st; }
    size_t max_bytes = 1;
    for (size_t i = 0; i < n; i++) max_bytes = plan[i].nbytes > max_bytes ? plan[i].nbytes : max_bytes;
    uint8_t *buf = sqz__malloc(max_bytes);
    sqz_outfile *f = NULL;
    st = buf ? sqz_outdir_file(d, "model.safetensors", &f) : SQZ_ERR_NOMEM;
    if (st == SQZ_OK) {
        uint8_t len[8];
        sqz__wr_u64(len, (uint64_t)h.n);
        st = sqz_outfile_write(f, len, 8);
    }
    if (st == SQZ_OK) st = sqz_outfile_write(f, h.p, h.n);
    const sqz_rope_layout rope = sqz__target_rope(m, SQZ_FORMAT_SAFETENSORS);
    uint64_t done = 0;
    if (st == SQZ_OK && o->progress) o->progress(o->progress_user, 0, (int64_t)total);
    sqz__st_part cur[SQZ__ST_MAX_PARTS];
    int n_cur = 0;
    for (size_t i = 0; i < n && st == SQZ_OK; i++) {
        const void *bytes = buf;
        if (plan[i].part == 0) st = make_parts(m, L, &plan[i], rope, cur, &n_cur);
        if (plan[i].part >= 0 && st == SQZ_OK) {
            const sqz__st_part *q = &cur[plan[i].part];
            bytes = q->data;
            if (q->nbytes != plan[i].nbytes) st = SQZ_ERROR(SQZ_ERR_SHAPE, "tensor '%s': part size", plan[i].name);
        } else if (st == SQZ_OK) {
            st = export_plain(m, &plan[i], rope, buf);
        }
        if (st != SQZ_OK) {
            sqz__error_prefix("model.safetensors");
            break;
        }
        st = sqz_outfile_write(f, bytes, plan[i].nbytes);
        release_source(&plan[i]);
        if (plan[i].part >= 0 && plan[i].part == plan[i].n_parts - 1) sqz__st_parts_free(cur, n_cur);
        done += plan[i].nbytes;
        if (st == SQZ_OK && o->progress) o->progress(o->progress_user, (int64_t)done, (int64_t)total);
    }
    sqz__st_parts_free(cur, n_cur);
    if (st == SQZ_OK) {
        st = sqz_outfile_commit(f);
    } else {
        sqz_outfile_abort(f);
    }
    free(buf);
    free(h.p);
    return st;
}

static sqz_status write_text(sqz_outdir *d, const char *name, const char *text) {
    sqz_outfile *f;
    SQZ_TRY(sqz_outdir_file(d, name, &f));
    sqz_status st = sqz_outfile_write(f, text, strlen(text));
    if (st == SQZ_OK) st = sqz_outfile_write(f, "\n", 1);
    if (st != SQZ_OK) {
        sqz_outfile_abort(f);
        return st;
    }
    return sqz_outfile_commit(f);
}

/* Writes text produced by a generator (NULL = failed, error set) and frees it. */
static sqz_status write_generated(sqz_outdir *d, const char *name, char *text) {
    if (!text) {
        sqz__error_prefix("%s", name);
        return SQZ_ERR_UNSUPPORTED;
    }
    sqz_status st = write_text(d, name, text);
    free(text);
    return st;
}

static sqz_status write_side_files(const sqz_model *m, const sqz_save_opts *o, const sqz__st_layout *L,
                                   const st_plan *plan, size_t n, sqz_outdir *d) {
    /* torch_dtype: what the token embedding (the largest common matrix) is written in */
    sqz_dtype wd = SQZ_DTYPE_F32;
    for (size_t i = 0; i < n; i++) {
        if (plan[i].t->role == SQZ_ROLE_TOKEN_EMBD && sqz_dtype_info(plan[i].dtype)->is_float) wd = plan[i].dtype;
    }
    bool quantized = false;
    bool *sparse = sqz__calloc((size_t)m->n_tensors + 1, sizeof *sparse); /* in sparse-24-bitmask parts */
    if (!sparse) return SQZ_ERR_NOMEM;
    for (size_t i = 0; i < n; i++) {
        quantized |= plan[i].part >= 0;
        const size_t len = strlen(plan[i].name);
        if (plan[i].part >= 0 && len > 11 && strcmp(plan[i].name + len - 11, ".compressed") == 0)
            sparse[plan[i].t - m->tensors] = true;
    }
    char *cfg = sqz__hf_config_write_dtype(m, wd);
    if (cfg && quantized) { /* the config writers see GGUF block linears as what they become */
        sqz_model shadow;
        sqz_tensor *tensors = NULL;
        sqz_qparams *qps = NULL;
        if (o->gguf_blocks_float) {
            cfg = L->config(L, m, sparse, cfg);
        } else if (sqz__st_block_config_model(m, &shadow, &tensors, &qps) == SQZ_OK) {
            cfg = L->config(L, &shadow, sparse, cfg);
        } else {
            free(cfg);
            cfg = NULL;
            sqz__error(SQZ_ERR_NOMEM, __FILE__, __LINE__, "config.json: out of memory");
        }
        free(tensors);
        free(qps);
    }
    free(sparse);
    if (!cfg) return SQZ_ERR_UNSUPPORTED; /* the generator's message says why */
    SQZ_TRY(write_generated(d, "config.json", cfg));
    if (sqz_family_get(m->hp.family)->lm_head && (m->vocab.bos >= 0 || m->vocab.eos >= 0)) {
        char gen[160];
        int k = snprintf(gen, sizeof gen, "{\n  \"_from_model_config\": true");
        if (m->vocab.bos >= 0)
            k += snprintf(gen + k, sizeof gen - (size_t)k, ",\n  \"bos_token_id\": %d", m->vocab.bos);
        if (m->vocab.eos >= 0)
            k += snprintf(gen + k, sizeof gen - (size_t)k, ",\n  \"eos_token_id\": %d", m->vocab.eos);
        snprintf(gen + k, sizeof gen - (size_t)k, "\n}");
        SQZ_TRY(write_text(d, "generation_config.json", gen));
    }
    /* Without a vocabulary (no tokenizer file was read) there is nothing to write. */
    if (m->vocab.n_tokens > 0 || m->vocab.hf_json) {
        SQZ_TRY(write_generated(d, "tokenizer.json", sqz__tokenizer_json_write(&m->vocab)));
        SQZ_TRY(write_generated(d, "tokenizer_config.json", sqz__tokenizer_config_write(&m->vocab)));
    }
    return SQZ_OK;
}

sqz_status sqz__st_save(const sqz_model *m, const char *path, const sqz_save_opts *o) {
    sqz_status st = sqz_model_validate(m);
    if (st != SQZ_OK) {
        sqz__error_prefix("%s: cannot write", path);
        return st;
    }
    /* config.json first: a model it cannot describe fails before any weight is written */
    char *probe = sqz__hf_config_write(m);
    if (!probe) {
        sqz__error_prefix("%s", path);
        return SQZ_ERR_UNSUPPORTED;
    }
    free(probe);
    const sqz__st_layout *L = sqz__st_layout_get(o->hf_format);
    SQZ_RETURN_IF(!L, SQZ_ERR_INVALID_ARG, "%s: unknown HF layout %d", path, (int)o->hf_format);
    st_plan *plan;
    size_t n;
    st = make_plan(m, o, L, &plan, &n);
    if (st != SQZ_OK) {
        sqz__error_prefix("%s", path);
        return st;
    }
    sqz_outdir *d = NULL;
    st = sqz_outdir_open_ex(path, o->replace ? SQZ_OUTPUT_REPLACE : 0, &d);
    if (st != SQZ_OK) {
        free(plan);
        return st;
    }
    st = write_weights(m, o, L, plan, n, d);
    if (st == SQZ_OK) st = write_side_files(m, o, L, plan, n, d);
    if (st == SQZ_OK) {
        st = sqz_outdir_commit(d);
    } else {
        sqz__error_prefix("%s", path);
        sqz_outdir_abort(d);
    }
    free(plan);
    return st;
}

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

#define ST_NAME_CAP 128

typedef struct st_plan {
    const sqz_tensor *t;
    char name[ST_NAME_CAP];
    sqz_dtype dtype;
    size_t nbytes;
    int32_t ndim;                 /* the shape written (t's, or a part's) */
    int64_t shape[SQZ_MAX_DIMS];
    const sqz__st_part *part;     /* a part of an sqz-quantized weight (st_qpack.c), written as it is */
} st_plan;

/* The parts of the sqz-quantized weights of a plan (owned by the plan). */
typedef struct st_parts {
    sqz__st_part *p;
    size_t n;
} st_parts;

static void parts_free(st_parts *ps) {
    for (size_t i = 0; i < ps->n; i++) sqz__st_qpack_parts_free(&ps->p[i], 1);
    free(ps->p);
    ps->p = NULL;
    ps->n = 0;
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

/* Which tensors are written, under which names and dtypes. */
static sqz_status make_plan(const sqz_model *m, const sqz_save_opts *o, st_plan **out, size_t *n_out,
                            st_parts *ps) {
    *out = NULL;
    *n_out = 0;
    size_t n_q = 0;
    for (int64_t i = 0; i < m->n_tensors; i++) n_q += m->tensors[i].qp != NULL;
    st_plan *plan = sqz__calloc((size_t)m->n_tensors + n_q * (SQZ__ST_MAX_PARTS - 1) + 1, sizeof *plan);
    ps->p = n_q ? sqz__calloc(n_q * SQZ__ST_MAX_PARTS, sizeof *ps->p) : NULL;
    if (!plan || (n_q && !ps->p)) {
        free(plan);
        return SQZ_ERR_NOMEM;
    }
    size_t n = 0;
    sqz_status st = SQZ_OK;
    for (int64_t i = 0; i < m->n_tensors && st == SQZ_OK; i++) {
        const sqz_tensor *t = &m->tensors[i];
        if (t->role == SQZ_ROLE_OUTPUT && m->hp.tied_embeddings) continue; /* tie_word_embeddings says it */
        st_plan *p = &plan[n];
        p->t = t;
        p->dtype = sqz__export_dtype(t, o, SQZ_FORMAT_SAFETENSORS);
        if (!sqz__hf_name_make(m->hp.family, t->role, t->layer, t->param, p->name, sizeof p->name))
            st = SQZ_ERROR(SQZ_ERR_UNSUPPORTED, "model.safetensors: tensor '%s': role %s has no HF name in a %s "
                           "model", t->name, sqz_role_name(t->role), sqz_family_name(m->hp.family));
        else if (!t->data)
            st = SQZ_ERROR(SQZ_ERR_INVALID_ARG, "model.safetensors: tensor '%s' has no data", t->name);
        else if (t->qp) { /* sqz's INT8 / INT4 layout: the values and side tensors, as they are */
            int np = 0;
            sqz__st_part *pp = ps->p + ps->n;
            st = sqz__st_qpack_parts(t, pp, &np);
            if (st == SQZ_OK) ps->n += (size_t)np;
            char stem[ST_NAME_CAP]; /* p->name up to ".weight"; a copy, as q may alias p's array */
            snprintf(stem, sizeof stem, "%.*s", (int)(strlen(p->name) - strlen("weight")), p->name);
            for (int k = 0; k < np && st == SQZ_OK; k++) {
                st_plan *q = &plan[n++];
                q->t = t;
                q->part = &pp[k];
                q->dtype = pp[k].dtype;
                q->nbytes = pp[k].nbytes;
                q->ndim = pp[k].ndim;
                q->shape[0] = pp[k].shape[0];
                q->shape[1] = pp[k].shape[1];
                if (k > 0 && (size_t)snprintf(q->name, sizeof q->name, "%s%s", stem, pp[k].suffix) >=
                                 sizeof q->name)
                    st = SQZ_ERROR(SQZ_ERR_UNSUPPORTED, "model.safetensors: tensor '%s': name too long", t->name);
            }
        }
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
        parts_free(ps);
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

/* A part of an sqz-quantized weight: its bytes, rows permuted with q/k when the rotary layouts
 * differ (scales and zero points follow their rows; column vectors do not move). */
static sqz_status export_part(const sqz_model *m, const st_plan *p, sqz_rope_layout rope, uint8_t *dst) {
    const sqz_tensor *t = p->t;
    const sqz__st_part *q = p->part;
    const bool permute = q->per_row && (t->role == SQZ_ROLE_ATTN_Q || t->role == SQZ_ROLE_ATTN_K) &&
                         rope != SQZ_ROPE_NONE && m->hp.rope_layout != SQZ_ROPE_NONE && rope != m->hp.rope_layout;
    if (!permute) {
        memcpy(dst, q->data, q->nbytes);
        return SQZ_OK;
    }
    const int64_t heads = t->role == SQZ_ROLE_ATTN_Q ? m->layers[t->layer].n_heads : m->layers[t->layer].n_kv_heads;
    const int64_t hd = m->hp.head_dim;
    SQZ_RETURN_IF(q->shape[0] != heads * hd || hd % 2 != 0, SQZ_ERR_SHAPE,
                  "tensor '%s': %lld rows are not %lld heads of %lld", t->name, (long long)q->shape[0],
                  (long long)heads, (long long)hd);
    sqz__rope_permute_rows(q->data, dst, heads, hd, q->nbytes / (size_t)q->shape[0], m->hp.rope_layout, rope);
    return SQZ_OK;
}

static sqz_status write_weights(const sqz_model *m, const sqz_save_opts *o, const st_plan *plan, size_t n,
                                sqz_outdir *d) {
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
    for (size_t i = 0; i < n && st == SQZ_OK; i++) {
        if (plan[i].part) st = export_part(m, &plan[i], rope, buf);
        else st = sqz__tensor_export(m, plan[i].t, plan[i].dtype, rope, buf, plan[i].nbytes, NULL);
        if (st != SQZ_OK) {
            sqz__error_prefix("model.safetensors");
            break;
        }
        st = sqz_outfile_write(f, buf, plan[i].nbytes);
        done += plan[i].nbytes;
        if (st == SQZ_OK && o->progress) o->progress(o->progress_user, (int64_t)done, (int64_t)total);
    }
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

static sqz_status write_side_files(const sqz_model *m, const st_plan *plan, size_t n, sqz_outdir *d) {
    /* torch_dtype: what the token embedding (the largest common matrix) is written in */
    sqz_dtype wd = SQZ_DTYPE_F32;
    for (size_t i = 0; i < n; i++) {
        if (plan[i].t->role == SQZ_ROLE_TOKEN_EMBD && sqz_dtype_info(plan[i].dtype)->is_float) wd = plan[i].dtype;
    }
    char *cfg = sqz__st_qpack_config(m, sqz__hf_config_write_dtype(m, wd));
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
    st_plan *plan;
    size_t n;
    st_parts parts = {NULL, 0};
    st = make_plan(m, o, &plan, &n, &parts);
    if (st != SQZ_OK) {
        sqz__error_prefix("%s", path);
        return st;
    }
    sqz_outdir *d = NULL;
    st = sqz_outdir_open_ex(path, o->replace ? SQZ_OUTPUT_REPLACE : 0, &d);
    if (st != SQZ_OK) {
        free(plan);
        parts_free(&parts);
        return st;
    }
    st = write_weights(m, o, plan, n, d);
    if (st == SQZ_OK) st = write_side_files(m, plan, n, d);
    if (st == SQZ_OK) {
        st = sqz_outdir_commit(d);
    } else {
        sqz__error_prefix("%s", path);
        sqz_outdir_abort(d);
    }
    free(plan);
    parts_free(&parts);
    return st;
}

/*
 * formats/bundle_write.c - an sqz_model as a .sqzb bundle (edge/bundle_format.h, docs/bundle.md).
 *
 * Two passes over the sections, so that memory stays at one tensor: the first produces each
 * section's stored bytes (a dtype conversion when --dtype asks, deflate when asked) only to
 * measure them (size, CRC-32, SHA-512 digest); then the header and table are final, signed
 * when a key is given, and the second pass produces the bytes again and streams them into an
 * atomic sqz_outfile. Tensors keep their stored rows (the rotary layout is a hyperparameter:
 * the edge runtime runs both). Hyperparameters, vocabulary and manifest are built in memory.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <zlib.h>

#include "edge/crypto.h"
#include "edge/sqz_edge.h"
#include "formats/bundle_internal.h"

typedef struct bsect {
    uint32_t kind, flags, dtype;
    uint64_t offset, stored, size;
    uint32_t crc;
    uint8_t digest[64];
    const sqz_tensor *t; /* TENSOR sections */
    uint8_t *blob;       /* other sections: their bytes (owned) */
    size_t blob_n;
} bsect;

/* The stored bytes of section s: *out (owned in *tmp when produced here), *n. */
static sqz_status section_bytes(const sqz_model *m, const bsect *s, bool deflate, const uint8_t **out, size_t *n,
                                uint8_t **tmp) {
    *tmp = NULL;
    const uint8_t *raw = s->blob;
    size_t rawn = s->blob_n;
    uint8_t *conv = NULL;
    if (s->t && s->dtype >= SQZB_DT_I8_ROW) { /* sqz's int8 / int4: codes, scales, zero points */
        SQZ_TRY(sqz__bundle_qpack(s->t, &conv, &rawn));
        raw = conv;
    } else if (s->t) {
        raw = s->t->data;
        rawn = s->t->nbytes;
        if (sqz__bundle_dtype_of(s->dtype) != s->t->dtype || s->t->qp) {
            sqz_dtype to = sqz__bundle_dtype_of(s->dtype);
            size_t nb;
            SQZ_RETURN_IF(!sqz_dtype_nbytes(to, sqz_tensor_nelements(s->t), &nb), SQZ_ERR_SHAPE,
                          "tensor '%s': too large", s->t->name);
            conv = sqz__malloc(nb ? nb : 1);
            if (!conv) return SQZ_ERR_NOMEM;
            sqz_status st = sqz__tensor_export(m, s->t, to, m->hp.rope_layout, conv, nb, NULL);
            if (st != SQZ_OK) {
                free(conv);
                return st;
            }
            raw = conv;
            rawn = nb;
        }
        if (s->dtype == SQZB_DT_Q4_0_X8) { /* the q4_0 bytes in 8-row groups */
            uint8_t *x8 = sqz__malloc(rawn ? rawn : 1);
            if (!x8) {
                free(conv);
                return SQZ_ERR_NOMEM;
            }
            sqze_q4_0_to_x8(raw, x8, (uint64_t)sqz_tensor_nrows(s->t), (uint64_t)sqz_tensor_row_len(s->t));
            free(conv);
            raw = conv = x8;
        }
    }
    if (!deflate) {
        *out = raw;
        *n = rawn;
        *tmp = conv;
        return SQZ_OK;
    }
    uLongf zn = compressBound((uLong)rawn);
    uint8_t *z = sqz__malloc(zn);
    if (!z) {
        free(conv);
        return SQZ_ERR_NOMEM;
    }
    int zr = compress2(z, &zn, raw, (uLong)rawn, 6);
    free(conv);
    if (zr != Z_OK) {
        free(z);
        return SQZ_ERROR(SQZ_ERR_NOMEM, "bundle: deflate failed (zlib %d)", zr);
    }
    *out = z;
    *n = zn;
    *tmp = z;
    return SQZ_OK;
}

static void put_entry(uint8_t *e, const bsect *s) {
    memset(e, 0, SQZB_ENTRY_SIZE);
    sqz__wr_u32(e, s->kind);
    sqz__wr_u32(e + 4, s->flags);
    sqz__wr_u64(e + 8, s->offset);
    sqz__wr_u64(e + 16, s->stored);
    sqz__wr_u64(e + 24, s->size);
    sqz__wr_u32(e + 32, s->crc);
    sqz__wr_u32(e + 36, s->dtype);
    const sqz_tensor *t = s->t;
    sqz__wr_u32(e + 40, (uint32_t)(t ? t->layer : -1));
    if (t) {
        e[44] = (uint8_t)(t->role & 0xFF);
        e[45] = (uint8_t)(t->role >> 8);
        e[46] = (uint8_t)t->param;
        e[47] = (uint8_t)(t->ndim == 1 ? 1 : 2);
        sqz__wr_u64(e + 48, (uint64_t)sqz_tensor_nrows(t));
        sqz__wr_u64(e + 56, (uint64_t)sqz_tensor_row_len(t));
        if (t->ndim == 1) {
            sqz__wr_u64(e + 48, (uint64_t)t->shape[0]);
            sqz__wr_u64(e + 56, 1);
        }
    }
    memcpy(e + 64, s->digest, SQZB_DIGEST_SIZE);
}

static uint64_t align_up(uint64_t x) { return (x + SQZB_ALIGN - 1) / SQZB_ALIGN * SQZB_ALIGN; }

/* Pass 1: sizes, CRCs, digests and offsets. */
static sqz_status measure(const sqz_model *m, bsect *s, size_t n, bool deflate, uint64_t *end) {
    uint64_t off = SQZB_HEADER_SIZE + (uint64_t)n * SQZB_ENTRY_SIZE;
    for (size_t i = 0; i < n; i++) {
        const uint8_t *p;
        size_t len;
        uint8_t *tmp;
        bool z = deflate && s[i].kind != SQZB_KIND_HPARAMS; /* hparams stay readable at a glance */
        sqz_status st = section_bytes(m, &s[i], z, &p, &len, &tmp);
        if (st != SQZ_OK) return st;
        s[i].flags = z ? SQZB_S_DEFLATE : 0;
        s[i].stored = len;
        s[i].crc = (uint32_t)crc32(0L, p, (uInt)0);
        for (size_t at = 0; at < len;) { /* zlib's crc32 takes uInt lengths */
            size_t k = len - at > (1u << 30) ? (1u << 30) : len - at;
            s[i].crc = (uint32_t)crc32(s[i].crc, p + at, (uInt)k);
            at += k;
        }
        sqze_sha512 h;
        sqze_sha512_init(&h);
        sqze_sha512_update(&h, p, len);
        sqze_sha512_final(&h, s[i].digest);
        free(tmp);
        s[i].offset = off = align_up(off);
        off += len;
    }
    *end = off; /* the end of the last section: the file ends here, or its signature follows aligned */
    return SQZ_OK;
}

static sqz_status write_all(const sqz_model *m, const char *path, bsect *s, size_t n, const sqz_save_opts *o) {
    uint64_t end;
    SQZ_TRY(measure(m, s, n, o->deflate, &end));
    for (size_t i = 0; i < n; i++) { /* the inflated size */
        if (!(s[i].flags & SQZB_S_DEFLATE)) s[i].size = s[i].stored;
        else if (!s[i].t) s[i].size = s[i].blob_n;
        else if (s[i].dtype >= SQZB_DT_I8_ROW) { /* measured from the packed bytes */
            uint8_t *q;
            size_t qn;
            SQZ_TRY(sqz__bundle_qpack(s[i].t, &q, &qn));
            free(q);
            s[i].size = qn;
        }
        else {
            size_t nb = 0;
            (void)sqz_dtype_nbytes(sqz__bundle_dtype_of(s[i].dtype), sqz_tensor_nelements(s[i].t), &nb);
            s[i].size = nb; /* measured already: it fits */
        }
    }
    size_t tbytes = n * SQZB_ENTRY_SIZE;
    uint8_t *head = sqz__calloc(1, SQZB_HEADER_SIZE + tbytes);
    if (!head) return SQZ_ERR_NOMEM;
    uint8_t *table = head + SQZB_HEADER_SIZE;
    for (size_t i = 0; i < n; i++) put_entry(table + i * SQZB_ENTRY_SIZE, &s[i]);
    bool sign = o->sign_key != NULL;
    memcpy(head, SQZB_MAGIC, 8);
    head[8] = SQZB_MAJOR;
    head[10] = SQZB_MINOR;
    sqz__wr_u32(head + 12, sign ? SQZB_F_SIGNED : 0);
    sqz__wr_u32(head + 16, (uint32_t)n);
    sqz__wr_u32(head + 20, SQZB_ENTRY_SIZE);
    sqz__wr_u64(head + 24, SQZB_HEADER_SIZE);
    sqz__wr_u64(head + 32, sign ? align_up(end) + SQZB_SIG_SIZE : end);
    sqz__wr_u64(head + 40, sign ? align_up(end) : 0);
    sqz__wr_u32(head + 48, sign ? SQZB_SIG_SIZE : 0);
    sqz__wr_u32(head + 52, (uint32_t)crc32(0L, table, (uInt)tbytes));
    sqz__wr_u32(head + 60, (uint32_t)crc32(0L, head, 60));
    uint8_t sig[SQZB_SIG_SIZE];
    sqz_status st = SQZ_OK;
    if (sign) { /* signed: header bytes 0..55 (not the CRCs of the signature and of the header) || table */
        uint8_t *msg = sqz__malloc(SQZB_SIGNED_HEADER + tbytes);
        if (!msg) {
            free(head);
            return SQZ_ERR_NOMEM;
        }
        memcpy(msg, head, SQZB_SIGNED_HEADER);
        memcpy(msg + SQZB_SIGNED_HEADER, table, tbytes);
        st = sqz__bundle_sign(o->sign_key, msg, SQZB_SIGNED_HEADER + tbytes, sig);
        free(msg);
        sqz__wr_u32(head + 56, (uint32_t)crc32(0L, sig, SQZB_SIG_SIZE));
        sqz__wr_u32(head + 60, (uint32_t)crc32(0L, head, 60));
    }
    sqz_outfile *f = NULL;
    if (st == SQZ_OK) st = sqz_outfile_open(path, &f);
    if (st == SQZ_OK) st = sqz_outfile_write(f, head, SQZB_HEADER_SIZE + tbytes);
    int64_t done = 0, total = sqz_model_data_bytes(m);
    for (size_t i = 0; i < n && st == SQZ_OK; i++) {
        const uint8_t *p;
        size_t len;
        uint8_t *tmp = NULL;
        st = sqz_outfile_pad(f, SQZB_ALIGN);
        if (st == SQZ_OK) st = section_bytes(m, &s[i], (s[i].flags & SQZB_S_DEFLATE) != 0, &p, &len, &tmp);
        if (st == SQZ_OK && (len != s[i].stored || sqz_outfile_tell(f) != s[i].offset))
            st = SQZ_ERROR(SQZ_ERR_IO, "%s: section %zu changed between the passes", path, i);
        if (st == SQZ_OK) st = sqz_outfile_write(f, p, len);
        free(tmp);
        if (s[i].t) {
            done += (int64_t)s[i].t->nbytes;
            if (o->progress) o->progress(o->progress_user, done, total);
        }
    }
    if (st == SQZ_OK && sign) st = sqz_outfile_pad(f, SQZB_ALIGN);
    if (st == SQZ_OK && sign) st = sqz_outfile_write(f, sig, sizeof sig);
    free(head);
    if (st != SQZ_OK) {
        sqz_outfile_abort(f);
        return st;
    }
    return sqz_outfile_commit(f);
}

sqz_status sqz__bundle_save(const sqz_model *m, const char *path, const sqz_save_opts *o) {
    SQZ_TRY(sqz__bundle_check(m, o));
    size_t n = 3 + (size_t)m->n_tensors;
    bsect *s = sqz__calloc(n, sizeof *s);
    if (!s) return SQZ_ERR_NOMEM;
    sqz_status st = SQZ_OK;
    s[0].kind = SQZB_KIND_MANIFEST;
    s[1].kind = SQZB_KIND_HPARAMS;
    s[2].kind = SQZB_KIND_VOCAB;
    st = sqz__bundle_manifest(m, o, &s[0].blob, &s[0].blob_n);
    if (st == SQZ_OK) st = sqz__bundle_hparams(m, &s[1].blob, &s[1].blob_n);
    if (st == SQZ_OK) st = sqz__bundle_vocab(m, &s[2].blob, &s[2].blob_n);
    for (int64_t i = 0; i < m->n_tensors && st == SQZ_OK; i++) {
        bsect *x = &s[3 + i];
        x->kind = SQZB_KIND_TENSOR;
        x->t = &m->tensors[i];
        x->dtype = sqz__bundle_dtype(x->t, o);
    }
    if (st == SQZ_OK) st = write_all(m, path, s, n, o);
    if (st != SQZ_OK) sqz__error_prefix("%s", path);
    for (size_t i = 0; i < n; i++) free(s[i].blob);
    free(s);
    return st;
}

/*
 * calib/stats_read.c - reading a statistics file (.sqzs, layout in sqz/calib.h). The file
 * is untrusted: every record's length is checked against the bytes left and its crc32
 * before it is parsed, every count against the record's length and sqz's caps, every
 * value for finiteness.
 */
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "calib/calib_internal.h"

#define HEADER_BYTES 104
#define MAX_LAYERS (1 << 16)
#define BLK_RECORD_BYTES (16 + 32 + 4) /* tag, reserved, length; layer, inputs, tokens, 2 cosines; crc */

void sqz_calib_stats_free(sqz_calib_stats *st) {
    if (!st) return;
    for (int64_t i = 0; i < st->n_blocks; i++) sqz_calib_block_free(&st->blocks[i]);
    free(st->blocks);
    free(st);
}

const sqz_calib_block *sqz_calib_stats_block(const sqz_calib_stats *st, int32_t layer) {
    for (int64_t i = 0; st && i < st->n_blocks; i++)
        if (st->blocks[i].layer == layer) return &st->blocks[i];
    return NULL;
}

static double rd_f64(sqz__reader *r) {
    uint64_t u = sqz__reader_u64(r);
    double v;
    memcpy(&v, &u, 8);
    return v;
}

/* n floats into a new array; false (with ok = false) on short data or a non-finite value. */
static float *rd_f32s(sqz__reader *r, int64_t n, bool *finite) {
    const uint8_t *p = sqz__reader_bytes(r, (size_t)n * 4);
    if (!p) return NULL;
    float *v = malloc((size_t)(n ? n : 1) * sizeof(float));
    if (!v) return NULL;
    for (int64_t i = 0; i < n; i++) {
        v[i] = sqz__rd_f32(p + 4 * i);
        if (!isfinite(v[i])) *finite = false;
    }
    return v;
}

#define FAIL(...) (sqz__error(SQZ_ERR_FORMAT, __FILE__, __LINE__, __VA_ARGS__))

static sqz_status parse_lin(const char *path, int64_t rec, sqz__reader *r, sqz_calib_block *b, unsigned file_have) {
    int32_t layer = (int32_t)sqz__reader_u32(r);
    uint32_t roles = sqz__reader_u32(r);
    uint64_t k = sqz__reader_u64(r), n_tok = sqz__reader_u64(r);
    unsigned have = sqz__reader_u32(r);
    if (!r->ok) return FAIL("%s: record %lld: truncated input record", path, (long long)rec);
    if (layer != b->layer) return FAIL("%s: record %lld: input of layer %d inside block %d", path, (long long)rec,
                                       (int)layer, (int)b->layer);
    if (b->n_inputs >= SQZ_CALIB_MAX_INPUTS) return FAIL("%s: record %lld: block %d has more than %d inputs", path,
                                                          (long long)rec, (int)layer, SQZ_CALIB_MAX_INPUTS);
    if (!roles || (roles >> SQZ_ROLE_COUNT)) return FAIL("%s: record %lld: bad role bits 0x%x", path, (long long)rec,
                                                         roles);
    if (k < 1 || k > SQZ_CALIB_MAX_N_IN) return FAIL("%s: record %lld: input width %llu out of range", path,
                                                     (long long)rec, (unsigned long long)k);
    if (n_tok > ((uint64_t)1 << 48)) return FAIL("%s: record %lld: %llu tokens", path, (long long)rec,
                                                 (unsigned long long)n_tok);
    if ((have & ~file_have) || (have & ~(unsigned)0x3F))
        return FAIL("%s: record %lld: statistics 0x%x not announced by the header (0x%x)", path, (long long)rec, have,
                    file_have);
    for (int i = 0; i < b->n_inputs; i++)
        if (b->in[i].roles & roles) return FAIL("%s: record %lld: block %d lists a role twice", path, (long long)rec,
                                                (int)layer);
    sqz_calib_input *in = &b->in[b->n_inputs++];
    in->roles = roles;
    in->have = have;
    in->st.n_in = (int64_t)k;
    in->st.n_tokens = (int64_t)n_tok;
    bool finite = true;
    const char *what = NULL; /* short data (the reader's flag down) or no memory (up) */
    if ((have & SQZ_QSTAT_X2) && !(in->x2 = rd_f32s(r, (int64_t)k, &finite))) what = "x2";
    if (!what && (have & SQZ_QSTAT_ABSMAX) && !(in->absmax = rd_f32s(r, (int64_t)k, &finite))) what = "absmax";
    if (!what && (have & SQZ_QSTAT_ABSMEAN) && !(in->absmean = rd_f32s(r, (int64_t)k, &finite))) what = "absmean";
    if (!what && (have & SQZ_QSTAT_XTX)) {
        uint64_t tri = k * (k + 1) / 2;
        const uint8_t *p = sqz__reader_bytes(r, tri * 8);
        if (!p || !(in->xtx = malloc(k * k * sizeof(double)))) what = "xtx";
        for (uint64_t i = 0, o = 0; !what && i < k; i++) {
            for (uint64_t j = i; j < k; j++, o++) {
                uint64_t u = sqz__rd_u64(p + 8 * o);
                double v;
                memcpy(&v, &u, 8);
                if (!isfinite(v)) finite = false;
                in->xtx[i * k + j] = in->xtx[j * k + i] = v;
            }
        }
    }
    if (!what && (have & SQZ_QSTAT_SAMPLE)) {
        uint64_t n_x = sqz__reader_u64(r);
        if (r->ok && n_x > sqz__reader_left(r) / 4 / k)
            return FAIL("%s: record %lld: %llu sample rows of %llu values run past the record", path, (long long)rec,
                        (unsigned long long)n_x, (unsigned long long)k);
        if (!r->ok || !(in->x = rd_f32s(r, (int64_t)(n_x * k), &finite))) what = "sample";
        else in->st.n_x = (int64_t)n_x;
    }
    if (!what && (have & SQZ_QSTAT_HIST)) {
        sqz_act_hist *h = &in->hist;
        uint32_t nb = sqz__reader_u32(r);
        (void)sqz__reader_u32(r);
        double width = rd_f64(r), total = rd_f64(r);
        float amax = sqz__reader_f32(r);
        (void)sqz__reader_u32(r);
        uint64_t nz = sqz__reader_u64(r);
        if (!r->ok) {
            what = "histogram";
        } else if (sqz__reader_left(r) / 8 < nb) {
            return FAIL("%s: record %lld: histogram of %u bins runs past the record", path, (long long)rec, nb);
        } else if (nb < 1 || nb > SQZ_HIST_MAX_BINS || !isfinite(width) || width < 0 || !isfinite(total) ||
                   total < 0 || !isfinite(amax) || amax < 0 || nz > ((uint64_t)1 << 62)) {
            return FAIL("%s: record %lld: histogram of %u bins, width %g, total %g, max %g, %llu zeros out of range",
                        path, (long long)rec, nb, width, total, (double)amax, (unsigned long long)nz);
        } else if (!(h->counts = malloc((size_t)nb * sizeof(double)))) {
            what = "histogram";
        } else {
            h->n_bins = (int32_t)nb;
            h->width = width;
            h->total = total;
            h->absmax = amax;
            h->n_zero = (int64_t)nz;
            for (uint32_t i = 0; i < nb; i++) {
                h->counts[i] = rd_f64(r);
                if (!isfinite(h->counts[i]) || h->counts[i] < 0) finite = false;
            }
        }
    }
    if (what) return r->ok ? SQZ_ERROR(SQZ_ERR_NOMEM, "%s: record %lld: no memory for %s", path, (long long)rec, what)
                           : FAIL("%s: record %lld: %s truncated", path, (long long)rec, what);
    if (!finite) return FAIL("%s: record %lld: non-finite statistics", path, (long long)rec);
    if (sqz__reader_left(r) != 0) return FAIL("%s: record %lld: %zu bytes left over", path, (long long)rec,
                                              sqz__reader_left(r));
    in->st.xtx = in->xtx;
    in->st.x2 = in->x2;
    in->st.absmax = in->absmax;
    in->st.absmean = in->absmean;
    in->st.x = in->x;
    in->st.hist = (have & SQZ_QSTAT_HIST) ? &in->hist : NULL;
    return SQZ_OK;
}

static sqz_status parse(const char *path, const uint8_t *p, size_t size, sqz_calib_stats *st) {
    if (size < HEADER_BYTES || memcmp(p, "SQZSTAT1", 8) != 0)
        return FAIL("%s: not an sqz statistics file (no SQZSTAT1 header)", path);
    if (sqz__rd_u32(p + 100) != (uint32_t)crc32(0L, p, 100)) return FAIL("%s: header checksum mismatch", path);
    if (sqz__rd_u32(p + 8) != 1) return FAIL("%s: version %u (this sqz reads 1)", path, sqz__rd_u32(p + 8));
    st->have = sqz__rd_u32(p + 12);
    st->n_layers = sqz__rd_u32(p + 16);
    st->d_model = sqz__rd_u32(p + 20);
    st->vocab = sqz__rd_u32(p + 24);
    memcpy(st->arch, p + 32, 32);
    st->arch[32] = 0;
    st->n_windows = (int64_t)(sqz__rd_u64(p + 64) & 0x7FFFFFFFFFFFull);
    st->ctx = (int64_t)(sqz__rd_u64(p + 72) & 0x7FFFFFFFFFFFull);
    st->seed = sqz__rd_u64(p + 80);
    st->n_text_tokens = (int64_t)(sqz__rd_u64(p + 88) & 0x7FFFFFFFFFFFull);
    st->sample_rows = sqz__rd_u32(p + 96);
    if (st->n_layers < 1 || st->n_layers > MAX_LAYERS) return FAIL("%s: %lld layers", path, (long long)st->n_layers);
    if (st->have & ~(unsigned)0x3F) return FAIL("%s: unknown statistics bits 0x%x", path, st->have);
    /* a block per layer and the classifier's, but no more than the file has BLK0 records for:
     * a 104-byte file cannot make sqz allocate 65537 blocks */
    int64_t cap = st->n_layers + 1, fit = (int64_t)((size - HEADER_BYTES) / BLK_RECORD_BYTES);
    if (fit < cap) cap = fit > 0 ? fit : 1;
    st->blocks = calloc((size_t)cap, sizeof *st->blocks);
    if (!st->blocks) return SQZ_ERROR(SQZ_ERR_NOMEM, "%s: no memory for %lld blocks", path, (long long)cap);
    uint32_t announced = 0; /* inputs the current block's record announces */
    sqz__reader r;
    sqz__reader_init(&r, p + HEADER_BYTES, size - HEADER_BYTES);
    sqz_calib_block *cur = NULL;
    for (int64_t rec = 0;; rec++) {
        const uint8_t *tag = sqz__reader_bytes(&r, 4);
        (void)sqz__reader_u32(&r);
        uint64_t len = sqz__reader_u64(&r);
        if (!r.ok) return FAIL("%s: record %lld: truncated record header (no END0 record)", path, (long long)rec);
        if (len > sqz__reader_left(&r) || sqz__reader_left(&r) - len < 4)
            return FAIL("%s: record %lld: length %llu exceeds the %zu bytes left", path, (long long)rec,
                        (unsigned long long)len, sqz__reader_left(&r));
        const uint8_t *pl = sqz__reader_bytes(&r, (size_t)len);
        uint32_t crc = sqz__reader_u32(&r);
        if (crc != (uint32_t)crc32(0L, pl, (uInt)len)) return FAIL("%s: record %lld: checksum mismatch", path,
                                                                   (long long)rec);
        sqz__reader rr;
        sqz__reader_init(&rr, pl, (size_t)len);
        const bool blk = memcmp(tag, "BLK0", 4) == 0, end = memcmp(tag, "END0", 4) == 0;
        if ((blk || end) && cur && cur->n_inputs != (int)announced)
            return FAIL("%s: record %lld: block %d announces %u inputs, %d follow", path, (long long)rec,
                        (int)cur->layer, announced, cur->n_inputs);
        if (end) {
            uint64_t n = sqz__reader_u64(&rr);
            if (!rr.ok || sqz__reader_left(&rr) || n != (uint64_t)rec)
                return FAIL("%s: END0 record says %llu records, the file has %lld", path, (unsigned long long)n,
                            (long long)rec);
            if (sqz__reader_left(&r)) return FAIL("%s: %zu bytes after the END0 record", path, sqz__reader_left(&r));
            return SQZ_OK;
        } else if (blk) {
            int32_t layer = (int32_t)sqz__reader_u32(&rr);
            uint32_t n_inputs = sqz__reader_u32(&rr);
            uint64_t n_tok = sqz__reader_u64(&rr);
            double cm = rd_f64(&rr), cmin = rd_f64(&rr);
            if (!rr.ok || sqz__reader_left(&rr)) return FAIL("%s: record %lld: bad block record", path, (long long)rec);
            if (layer < -1 || layer >= st->n_layers) return FAIL("%s: record %lld: layer %d of %lld", path,
                                                                 (long long)rec, (int)layer, (long long)st->n_layers);
            int32_t prev = st->n_blocks > 0 ? st->blocks[st->n_blocks - 1].layer : -2;
            if (st->n_blocks > 0 && (prev == -1 || (layer >= 0 && layer <= prev)))
                return FAIL("%s: record %lld: block %d out of order", path, (long long)rec, (int)layer);
            if (st->n_blocks >= cap) return FAIL("%s: record %lld: too many blocks", path, (long long)rec);
            if (n_inputs > SQZ_CALIB_MAX_INPUTS || !isfinite(cm) || !isfinite(cmin) || n_tok > ((uint64_t)1 << 48))
                return FAIL("%s: record %lld: bad block record values", path, (long long)rec);
            cur = &st->blocks[st->n_blocks++];
            announced = n_inputs;
            cur->layer = layer;
            cur->n_tokens = (int64_t)n_tok;
            cur->cos_mean = cm;
            cur->cos_min = cmin;
        } else if (memcmp(tag, "LIN0", 4) == 0) {
            if (!cur) return FAIL("%s: record %lld: input record before any block record", path, (long long)rec);
            SQZ_TRY(parse_lin(path, rec, &rr, cur, st->have));
        } else {
            return FAIL("%s: record %lld: unknown record tag", path, (long long)rec);
        }
    }
}

sqz_status sqz__calib_stats_read_mem(const char *path, const uint8_t *data, size_t size, sqz_calib_stats **out) {
    *out = NULL;
    sqz_calib_stats *st = sqz__calloc(1, sizeof *st);
    sqz_status s = st ? parse(path, data, size, st) : SQZ_ERR_NOMEM;
    if (s != SQZ_OK) {
        sqz_calib_stats_free(st);
        return s;
    }
    *out = st;
    return SQZ_OK;
}

sqz_status sqz_calib_stats_read(const char *path, sqz_calib_stats **out) {
    *out = NULL;
    sqz_mapping *map;
    SQZ_TRY(sqz_map(path, &map));
    sqz_status s = sqz__calib_stats_read_mem(path, map->data, map->size, out);
    sqz_unmap(map);
    return s;
}

sqz_status sqz_calib_stats_check_model(const sqz_calib_stats *st, const sqz_model *m, const char *path) {
    const char *p = path ? path : "statistics";
    SQZ_RETURN_IF(st->n_layers != m->hp.n_layers || st->d_model != m->hp.d_model || st->vocab != m->hp.vocab_size,
                  SQZ_ERR_INVALID_ARG,
                  "%s: made for a model of %lld layers, d_model %lld, vocabulary %lld; this one has %lld, %lld, %lld", p,
                  (long long)st->n_layers, (long long)st->d_model, (long long)st->vocab, (long long)m->hp.n_layers,
                  (long long)m->hp.d_model, (long long)m->hp.vocab_size);
    for (int64_t b = 0; b < st->n_blocks; b++) {
        const sqz_calib_block *blk = &st->blocks[b];
        for (int i = 0; i < blk->n_inputs; i++) {
            for (int r = 0; r < SQZ_ROLE_COUNT; r++) {
                if (!(blk->in[i].roles & SQZ__ROLE_BIT(r))) continue;
                const sqz_tensor *t = sqz_model_get(m, (sqz_role)r, blk->layer, SQZ_PARAM_WEIGHT);
                if (!t && r == SQZ_ROLE_OUTPUT && m->hp.tied_embeddings) /* the classifier is the embedding */
                    t = sqz_model_get(m, SQZ_ROLE_TOKEN_EMBD, -1, SQZ_PARAM_WEIGHT);
                const bool mats_ok = t && (t->ndim == 2 ? blk->in[i].n_mat <= 1
                                                        : t->ndim == 3 && blk->in[i].n_mat == t->shape[0]);
                SQZ_RETURN_IF(!mats_ok || sqz_tensor_row_len(t) != blk->in[i].st.n_in, SQZ_ERR_INVALID_ARG,
                              "%s: block %d: the input of %s has %lld channels, the model's tensor %s", p,
                              (int)blk->layer, sqz_role_name((sqz_role)r), (long long)blk->in[i].st.n_in,
                              t ? "differs" : "is missing");
            }
        }
    }
    return SQZ_OK;
}

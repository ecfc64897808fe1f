/*
 * eval/logits_file.c - saving a base model's output at the scored positions and reading
 * it back ("SQZLOGB1", layout in sqz/eval.h). Rows are quantized log-probabilities as in
 * llama.cpp's kl-divergence base files (16-bit steps over [max - 16, max]), plus the exact
 * nll of the next token and the exact argmax.
 */
#include <math.h>
#include <stdlib.h>

#include "eval/eval_internal.h"

#define LOGB_MAGIC "SQZLOGB1"
/* Version 2 appends a u64 FNV-1a checksum of the tokens and rows; version 1 files (no
 * checksum) are still read. */
enum { LOGB_VERSION = 2, LOGB_HEADER = 8 + 4 * 7 + 8, ROW_FIXED = 16, LOGB_TRAILER = 8 };

/* FNV-1a, 64 bits, continued from h over p[0..n). */
static uint64_t fnv1a(uint64_t h, const uint8_t *p, size_t n) {
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}
#define FNV_START 0xcbf29ce484222325ull

size_t sqz__logits_row_bytes(uint32_t n_vocab) { return ROW_FIXED + 2 * (size_t)n_vocab; }

struct sqz__logits_writer {
    sqz_outfile *f;
    uint64_t sum; /* checksum of what follows the header */
    uint32_t n_vocab;
    uint8_t *row;
};

sqz_status sqz__logits_writer_open(const char *path, const sqz__logits_header *h, const int32_t *tokens, bool scratch,
                                   sqz__logits_writer **out) {
    *out = NULL;
    sqz__logits_writer *w = sqz__calloc(1, sizeof *w);
    if (!w) return SQZ_ERR_NOMEM;
    w->n_vocab = h->n_vocab;
    w->sum = FNV_START;
    w->row = sqz__malloc(sqz__logits_row_bytes(h->n_vocab));
    sqz_status st = !w->row ? SQZ_ERR_NOMEM : scratch ? sqz__outfile_open_scratch(path, &w->f) : sqz_outfile_open(path, &w->f);
    if (st == SQZ_OK) {
        uint8_t hd[LOGB_HEADER];
        memcpy(hd, LOGB_MAGIC, 8);
        sqz__wr_u32(hd + 8, LOGB_VERSION);
        sqz__wr_u32(hd + 12, h->n_vocab);
        sqz__wr_u32(hd + 16, h->ctx);
        sqz__wr_u32(hd + 20, h->n_chunks);
        sqz__wr_u32(hd + 24, h->first);
        sqz__wr_u32(hd + 28, h->add_bos);
        sqz__wr_u32(hd + 32, (uint32_t)h->bos);
        sqz__wr_u64(hd + 36, h->n_tokens);
        st = sqz_outfile_write(w->f, hd, sizeof hd);
        for (uint64_t i = 0; st == SQZ_OK && i < h->n_tokens; i++) {
            uint8_t b[4];
            sqz__wr_u32(b, (uint32_t)tokens[i]);
            w->sum = fnv1a(w->sum, b, 4);
            st = sqz_outfile_write(w->f, b, 4);
        }
    }
    if (st != SQZ_OK) {
        sqz__logits_writer_close(w, false);
        return st;
    }
    *out = w;
    return SQZ_OK;
}

sqz_status sqz__logits_writer_row(sqz__logits_writer *w, const float *logits, int32_t target) {
    sqz__lsm l = sqz__log_softmax(logits, w->n_vocab);
    float mx = (float)l.max, mn = logits[0];
    for (uint32_t i = 1; i < w->n_vocab; i++) {
        if (logits[i] < mn) mn = logits[i];
    }
    if (mn < mx - 16.0f) mn = mx - 16.0f;
    float scale = (mx - mn) / 65535.0f;
    float min_log_prob = (float)((double)mn - l.max - l.lse);
    float nll = (float)(l.max + l.lse - (double)logits[target]);
    uint8_t *r = w->row;
    uint32_t u;
    memcpy(&u, &scale, 4);
    sqz__wr_u32(r, u);
    memcpy(&u, &min_log_prob, 4);
    sqz__wr_u32(r + 4, u);
    memcpy(&u, &nll, 4);
    sqz__wr_u32(r + 8, u);
    sqz__wr_u32(r + 12, (uint32_t)l.argmax);
    float inv = scale > 0 ? 1.0f / scale : 0.0f;
    for (uint32_t i = 0; i < w->n_vocab; i++) {
        float q = logits[i] > mn ? nearbyintf(inv * (logits[i] - mn)) : 0.0f;
        if (q > 65535.0f) q = 65535.0f;
        sqz__wr_u16(r + ROW_FIXED + 2 * (size_t)i, (uint16_t)q);
    }
    w->sum = fnv1a(w->sum, r, sqz__logits_row_bytes(w->n_vocab));
    return sqz_outfile_write(w->f, r, sqz__logits_row_bytes(w->n_vocab));
}

sqz_status sqz__logits_writer_close(sqz__logits_writer *w, bool commit) {
    if (!w) return SQZ_OK;
    sqz_status st = SQZ_OK;
    if (w->f) {
        uint8_t t[LOGB_TRAILER];
        sqz__wr_u64(t, w->sum);
        if (commit) st = sqz_outfile_write(w->f, t, sizeof t);
        if (commit && st == SQZ_OK) st = sqz_outfile_commit(w->f);
        else sqz_outfile_abort(w->f);
    }
    free(w->row);
    free(w);
    return st;
}

/* A stored row: finite, scale >= 0, log-probabilities <= 0 (the smallest, and the largest a code
 * can give: min + 65535 * scale, which the writer makes -lse, up to rounding), nll >= 0, argmax
 * in the vocabulary. A larger scale would give exp() of huge log-probabilities: an infinite KLD. */
static sqz_status check_row(const char *path, const sqz__logits_reader *r, uint64_t i) {
    const uint8_t *p = r->rows + i * r->row_bytes;
    const float scale = sqz__rd_f32(p), min_lp = sqz__rd_f32(p + 4), nll = sqz__rd_f32(p + 8);
    const uint32_t am = sqz__rd_u32(p + 12);
    SQZ_RETURN_IF(am >= r->h.n_vocab, SQZ_ERR_FORMAT, "%s: row %llu: argmax %u outside the vocabulary of %u", path,
                  (unsigned long long)i, am, r->h.n_vocab);
    SQZ_RETURN_IF(!(isfinite(scale) && scale >= 0 && isfinite(min_lp) && min_lp <= 0 && isfinite(nll) && nll >= 0 &&
                    (double)min_lp + 65535.0 * (double)scale <= 1e-3),
                  SQZ_ERR_FORMAT, "%s: row %llu: scale %g, min log p %g, nll %g out of range (finite; scale and nll "
                  ">= 0; log p from min to min + 65535 * scale, <= 0)", path, (unsigned long long)i, (double)scale, (double)min_lp, (double)nll);
    return SQZ_OK;
}

sqz_status sqz__logits_reader_open(const char *path, sqz__logits_reader *r) {
    memset(r, 0, sizeof *r);
    sqz_mapping *map;
    SQZ_TRY(sqz_map(path, &map));
    sqz_status st = sqz__logits_reader_open_mem(path, map->data, map->size, r);
    if (st != SQZ_OK) sqz_unmap(map);
    else r->map = map;
    return st;
}

sqz_status sqz__logits_reader_open_mem(const char *path, const uint8_t *p, size_t size, sqz__logits_reader *r) {
    memset(r, 0, sizeof *r);
    sqz_status st = SQZ_OK;
    if (size >= 8 && !memcmp(p, "_logits_", 8)) return sqz__logits_reader_open_llama(path, p, size, r);
    if (size < LOGB_HEADER || memcmp(p, LOGB_MAGIC, 8) != 0) {
        st = SQZ_ERROR(SQZ_ERR_FORMAT, "%s: not a base logits file (neither sqz's SQZLOGB1 nor llama.cpp's _logits_ magic)", path);
        goto fail;
    }
    uint32_t version = sqz__rd_u32(p + 8);
    sqz__logits_header *h = &r->h;
    h->n_vocab = sqz__rd_u32(p + 12);
    h->ctx = sqz__rd_u32(p + 16);
    h->n_chunks = sqz__rd_u32(p + 20);
    h->first = sqz__rd_u32(p + 24);
    h->add_bos = sqz__rd_u32(p + 28);
    h->bos = (int32_t)sqz__rd_u32(p + 32);
    h->n_tokens = sqz__rd_u64(p + 36);
    if (version != 1 && version != LOGB_VERSION) {
        st = SQZ_ERROR(SQZ_ERR_FORMAT, "%s: base logits version %u, this sqz reads version %d", path, version,
                       LOGB_VERSION);
        goto fail;
    }
    if (h->n_vocab == 0 || h->ctx < 4 || h->first != h->ctx / 2 ||
        h->n_tokens != (uint64_t)h->n_chunks * h->ctx) {
        st = SQZ_ERROR(SQZ_ERR_FORMAT,
                       "%s: inconsistent header (vocab %u, ctx %u, first %u, %u chunks, %llu tokens)", path,
                       h->n_vocab, h->ctx, h->first, h->n_chunks, (unsigned long long)h->n_tokens);
        goto fail;
    }
    r->row_bytes = sqz__logits_row_bytes(h->n_vocab);
    r->n_rows = (uint64_t)h->n_chunks * (h->ctx - 1 - h->first);
    const size_t trailer = version >= 2 ? LOGB_TRAILER : 0;
    size_t left = size - LOGB_HEADER, tok_bytes, rows_bytes, need;
    if (!sqz__mul_size((size_t)h->n_tokens, 4, &tok_bytes) ||
        !sqz__mul_size((size_t)r->n_rows, r->row_bytes, &rows_bytes) ||
        !sqz__add_size(tok_bytes, rows_bytes, &need) || !sqz__add_size(need, trailer, &need) || need != left) {
        st = SQZ_ERROR(SQZ_ERR_FORMAT, "%s: %zu bytes of data, the header describes %llu tokens and %llu rows of %zu "
                       "bytes", path, left, (unsigned long long)h->n_tokens, (unsigned long long)r->n_rows,
                       r->row_bytes);
        goto fail;
    }
    r->tokens = p + LOGB_HEADER;
    r->rows = r->tokens + tok_bytes;
    if (trailer && fnv1a(FNV_START, r->tokens, tok_bytes + rows_bytes) != sqz__rd_u64(p + size - trailer)) {
        st = SQZ_ERROR(SQZ_ERR_FORMAT, "%s: checksum mismatch: the file was modified or damaged", path);
        goto fail;
    }
    for (uint64_t i = 0; i < r->n_rows && st == SQZ_OK; i++) st = check_row(path, r, i);
    if (st != SQZ_OK) goto fail;
    return SQZ_OK;
fail:
    sqz__logits_reader_close(r);
    return st;
}

void sqz__logits_reader_close(sqz__logits_reader *r) {
    if (!r) return;
    sqz_unmap(r->map);
    memset(r, 0, sizeof *r);
}

sqz__base_row sqz__logits_reader_row(const sqz__logits_reader *r, uint64_t i) {
    const uint8_t *p = r->rows + i * r->row_bytes;
    if (r->llama) return sqz__logits_llama_row(r, i);
    sqz__base_row b = {sqz__rd_f32(p), sqz__rd_f32(p + 4), sqz__rd_f32(p + 8), (int32_t)sqz__rd_u32(p + 12),
                       p + ROW_FIXED};
    return b;
}

double sqz__kld_stored(const sqz__base_row *b, uint32_t n_vocab, const float *model, const sqz__lsm *lm) {
    double k = 0, om = lm->max + lm->lse;
    for (uint32_t i = 0; i < n_vocab; i++) {
        double lpb = (double)b->min_log_prob + (double)b->scale * sqz__rd_u16(b->q + 2 * (size_t)i);
        if (lpb > -16.0) k += exp(lpb) * (lpb - ((double)model[i] - om));
    }
    return k > 0 ? k : 0;
}

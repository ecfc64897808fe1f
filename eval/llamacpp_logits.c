/*
 * eval/llamacpp_logits.c - llama-perplexity's --kl-divergence-base files read as base logits
 * (layout in eval_internal.h), so that a base saved by llama.cpp serves `sqz eval --base-logits`:
 * the KL divergence, nll and top token are taken from the stored rows as llama.cpp's
 * kl_divergence() takes them.
 */
#include <math.h>

#include "eval/eval_internal.h"

enum { LLAMA_HEADER = 8 + 3 * 4, LLAMA_ROW_FIXED = 8 };

/* u16 values per row: the padded vocabulary and the two floats (perplexity.cpp's nv). */
static uint64_t row_u16(uint32_t n_vocab) { return 2 * (((uint64_t)n_vocab + 1) / 2) + 4; }

/* A stored row: finite, scale >= 0, log-probabilities <= 0 (as check_row of logits_file.c). */
static sqz_status check_row(const char *path, const uint8_t *p, uint64_t i) {
    const float scale = sqz__rd_f32(p), min_lp = sqz__rd_f32(p + 4);
    SQZ_RETURN_IF(!(isfinite(scale) && scale >= 0 && isfinite(min_lp) && min_lp <= 0 &&
                    (double)min_lp + 65535.0 * (double)scale <= 1e-3),
                  SQZ_ERR_FORMAT, "%s: row %llu: scale %g, min log p %g out of range (finite; scale >= 0; log p from "
                  "min to min + 65535 * scale, <= 0)", path, (unsigned long long)i, (double)scale, (double)min_lp);
    return SQZ_OK;
}

sqz_status sqz__logits_reader_open_llama(const char *path, const uint8_t *p, size_t size, sqz__logits_reader *r) {
    memset(r, 0, sizeof *r);
    SQZ_RETURN_IF(size < LLAMA_HEADER, SQZ_ERR_FORMAT, "%s: llama.cpp logits file of %zu bytes: no header", path, size);
    const int32_t ctx = (int32_t)sqz__rd_u32(p + 8), vocab = (int32_t)sqz__rd_u32(p + 12),
                  chunks = (int32_t)sqz__rd_u32(p + 16);
    SQZ_RETURN_IF(ctx < 4 || ctx > (1 << 24) || vocab < 1 || vocab > (1 << 24) || chunks < 1, SQZ_ERR_FORMAT,
                  "%s: llama.cpp logits file with n_ctx %d, n_vocab %d, n_chunk %d (n_ctx >= 4, n_vocab >= 1, "
                  "n_chunk >= 1)", path, ctx, vocab, chunks);
    sqz__logits_header *h = &r->h;
    h->n_vocab = (uint32_t)vocab;
    h->ctx = (uint32_t)ctx;
    h->n_chunks = (uint32_t)chunks;
    h->first = h->ctx / 2;
    h->n_tokens = (uint64_t)h->n_chunks * h->ctx;
    h->bos = -1;
    r->llama = true;
    r->row_bytes = 2 * (size_t)row_u16(h->n_vocab);
    r->n_rows = (uint64_t)h->n_chunks * (h->ctx - 1 - h->first);
    size_t tok_bytes, rows_bytes, need;
    SQZ_RETURN_IF(!sqz__mul_size((size_t)h->n_tokens, 4, &tok_bytes) ||
                      !sqz__mul_size((size_t)r->n_rows, r->row_bytes, &rows_bytes) ||
                      !sqz__add_size(tok_bytes, rows_bytes, &need) || need != size - LLAMA_HEADER,
                  SQZ_ERR_FORMAT, "%s: %zu bytes of data, llama.cpp's header describes %llu tokens and %llu rows of "
                  "%zu bytes", path, size - LLAMA_HEADER, (unsigned long long)h->n_tokens,
                  (unsigned long long)r->n_rows, r->row_bytes);
    r->tokens = p + LLAMA_HEADER;
    r->rows = r->tokens + tok_bytes;
    for (uint64_t i = 0; i < h->n_tokens; i++) {
        const int32_t t = (int32_t)sqz__rd_u32(r->tokens + 4 * i);
        SQZ_RETURN_IF(t < 0 || t >= vocab, SQZ_ERR_FORMAT, "%s: token %llu is %d, outside the vocabulary of %d", path,
                      (unsigned long long)i, t, vocab);
    }
    for (uint64_t i = 0; i < r->n_rows; i++) SQZ_TRY(check_row(path, r->rows + i * r->row_bytes, i));
    return SQZ_OK;
}

sqz__base_row sqz__logits_llama_row(const sqz__logits_reader *r, uint64_t i) {
    const uint8_t *p = r->rows + i * r->row_bytes, *q = p + LLAMA_ROW_FIXED;
    const uint64_t per_chunk = r->h.ctx - 1 - r->h.first, c = i / per_chunk, j = i % per_chunk;
    const int32_t target = (int32_t)sqz__rd_u32(r->tokens + 4 * (c * r->h.ctx + r->h.first + j + 1));
    sqz__base_row b = {.scale = sqz__rd_f32(p), .min_log_prob = sqz__rd_f32(p + 4), .q = q};
    /* kl_divergence(): nll_base = -(scale * q[tok] + min_log_prob) in float; the top token is the
     * first of the largest log-probability, i.e. of the largest code (scale >= 0) */
    b.nll = -(b.scale * (float)sqz__rd_u16(q + 2 * (size_t)target) + b.min_log_prob);
    uint16_t best = 0;
    for (uint32_t v = 0; v < r->h.n_vocab; v++) {
        const uint16_t x = sqz__rd_u16(q + 2 * (size_t)v);
        if (v == 0 || x > best) {
            best = x;
            b.argmax = (int32_t)v;
        }
    }
    return b;
}

/*
 * eval/eval_internal.h - what the files of eval/ share. Not public.
 */
#ifndef SQZ_EVAL_INTERNAL_H
#define SQZ_EVAL_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "core/internal.h"
#include "sqz/eval.h"
#include "sqz/io.h"

/* ---- statistics (stats.c) ---- */

/* Log-softmax summary of one row of logits: max and log(sum exp(x - max)), in double. */
typedef struct sqz__lsm {
    double max, lse; /* log p(v) = x[v] - max - lse */
    int32_t argmax;  /* lowest index on ties */
} sqz__lsm;
sqz__lsm sqz__log_softmax(const float *x, int64_t n);
/* out[r] = sqz__log_softmax(x + r n, n) for rows r < rows, split over up to `threads` threads (the
 * caller one of them): the same values as one at a time. */
void sqz__log_softmax_rows(const float *x, int64_t rows, int64_t n, int threads, sqz__lsm *out);

/* KL(base || model) over n entries from full base and model rows (exact, double). */
double sqz__kld_rows(const float *base, const sqz__lsm *lb, const float *model, const sqz__lsm *lm, int64_t n);

/* The p-quantile (0..1) of v[0..n) by linear interpolation between order statistics; sorts a
 * copy. 0 for n == 0; NaN on out of memory. */
double sqz__percentile(const float *v, int64_t n, double p);

/* ---- base logits files (logits_file.c) ---- */

typedef struct sqz__logits_header {
    uint32_t n_vocab, ctx, n_chunks, first, add_bos;
    int32_t bos;
    uint64_t n_tokens;
} sqz__logits_header;

/* Bytes of one stored row for n_vocab entries. */
size_t sqz__logits_row_bytes(uint32_t n_vocab);

typedef struct sqz__logits_writer sqz__logits_writer;
/* Starts an atomic file at path with the header and the tokens (scratch: committed at once even
 * while commits are deferred, see sqz__outfile_open_scratch). */
sqz_status sqz__logits_writer_open(const char *path, const sqz__logits_header *h, const int32_t *tokens, bool scratch,
                                   sqz__logits_writer **out);
/* Appends one scored row: logits (n_vocab) and the target token. */
sqz_status sqz__logits_writer_row(sqz__logits_writer *w, const float *logits, int32_t target);
/* Commits (all rows written) or aborts; frees w either way. */
sqz_status sqz__logits_writer_close(sqz__logits_writer *w, bool commit);

typedef struct sqz__logits_reader {
    sqz_mapping *map;
    sqz__logits_header h;
    const uint8_t *tokens; /* n_tokens little-endian i32 */
    const uint8_t *rows;   /* first row */
    size_t row_bytes;
    uint64_t n_rows;
    bool llama; /* llama.cpp's kl-divergence base file ("_logits_"): no nll, argmax or BOS setting stored */
} sqz__logits_reader;

/* Maps and validates a base logits file: sqz's ("SQZLOGB1") or llama-perplexity's
 * --kl-divergence-base file ("_logits_", llamacpp_logits.c). */
sqz_status sqz__logits_reader_open(const char *path, sqz__logits_reader *r);
/* Validates a base logits file's bytes (path names it in messages); r points into p, which
 * must outlive it (r->map stays NULL). */
sqz_status sqz__logits_reader_open_mem(const char *path, const uint8_t *p, size_t size, sqz__logits_reader *r);
void sqz__logits_reader_close(sqz__logits_reader *r);
/* llama-perplexity's --kl-divergence-base file (llamacpp_logits.c), from its "_logits_" magic on:
 *   "_logits_" | i32 n_ctx | i32 n_vocab | i32 n_chunk | i32 tokens[n_chunk * n_ctx] (before the BOS
 *   replacement) | per chunk, per scored position (n_ctx - 1 - n_ctx/2 of them): nv = 2*((n_vocab+1)/2) + 4
 *   u16: f32 scale, f32 min_log_prob, u16 q[n_vocab] (+ one u16 of padding for an odd n_vocab):
 *   log p(v) = scale * q[v] + min_log_prob
 * (tools/perplexity/perplexity.cpp: perplexity() writes it, kl_divergence() reads it). */
sqz_status sqz__logits_reader_open_llama(const char *path, const uint8_t *p, size_t size, sqz__logits_reader *r);

/* One stored row, decoded: log_probs (n_vocab floats, caller's), nll, argmax. For a llama.cpp
 * file nll and argmax are those of the stored log-probabilities, as kl_divergence() takes them. */
typedef struct sqz__base_row {
    float scale, min_log_prob, nll;
    int32_t argmax;
    const uint8_t *q; /* n_vocab little-endian u16 */
} sqz__base_row;
sqz__base_row sqz__logits_reader_row(const sqz__logits_reader *r, uint64_t i);
/* sqz__logits_reader_row of a llama.cpp file (llamacpp_logits.c). */
sqz__base_row sqz__logits_llama_row(const sqz__logits_reader *r, uint64_t i);

/* KL(base || model) of a stored base row against a model row (llama.cpp's formula: base
 * log-probabilities below -16 are left out). */
double sqz__kld_stored(const sqz__base_row *b, uint32_t n_vocab, const float *model, const sqz__lsm *lm);

#endif

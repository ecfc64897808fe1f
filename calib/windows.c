/*
 * calib/windows.c - calibration text to token windows.
 *
 * The text is tokenized once; window starts are stratified over the whole token stream
 * (one window per stratum, its offset in the stratum drawn with splitmix64 from the seed),
 * so a small sample still covers the beginning, the middle and the end of the file, and
 * the same inputs always give the same windows.
 */
#include <stdlib.h>
#include <string.h>

#include "calib/calib_internal.h"

/* splitmix64 (Steele, Lea, Flood 2014): one 64-bit value per call. */
static uint64_t splitmix64(uint64_t *state) {
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* floor(span * i / n) without overflow (i <= n < 2^25). */
static uint64_t stratum_edge(uint64_t span, uint64_t i, uint64_t n) {
    return span / n * i + (span % n) * i / n;
}

void sqz_calib_windows_free(sqz_calib_windows *w) {
    if (!w) return;
    free(w->tokens);
    free(w->starts);
    memset(w, 0, sizeof *w);
}

sqz_status sqz_calib_windows_from_ids(const int32_t *ids, int64_t n_ids, int32_t bos, int64_t n_windows, int64_t ctx,
                                      uint64_t seed, sqz_calib_windows *out) {
    memset(out, 0, sizeof *out);
    SQZ_RETURN_IF(n_windows < 1 || n_windows > (1 << 24), SQZ_ERR_INVALID_ARG,
                  "calibration: %lld windows (1 to %d)", (long long)n_windows, 1 << 24);
    SQZ_RETURN_IF(ctx < 2 || ctx > (1 << 24), SQZ_ERR_INVALID_ARG, "calibration: window of %lld tokens (2 or more)",
                  (long long)ctx);
    SQZ_RETURN_IF(!ids || n_ids < ctx, SQZ_ERR_INVALID_ARG,
                  "calibration: the text has %lld tokens, fewer than one window of %lld", (long long)n_ids,
                  (long long)ctx);
    int64_t total;
    size_t bytes;
    SQZ_RETURN_IF(!sqz__mul_i64(n_windows, ctx, &total) || !sqz__mul_size((size_t)total, sizeof(int32_t), &bytes),
                  SQZ_ERR_NOMEM, "calibration: %lld windows of %lld tokens overflow", (long long)n_windows,
                  (long long)ctx);
    out->tokens = sqz__malloc(bytes);
    out->starts = sqz__malloc((size_t)n_windows * sizeof(int64_t));
    if (!out->tokens || !out->starts) {
        sqz_calib_windows_free(out);
        return SQZ_ERR_NOMEM;
    }
    uint64_t state = seed;
    uint64_t span = (uint64_t)(n_ids - ctx) + 1; /* possible starts: [0, span) */
    for (int64_t i = 0; i < n_windows; i++) {
        /* stratum i: [span * i / n, span * (i + 1) / n), never empty when span >= n; when the
         * text is short, strata shrink to one start and windows overlap */
        uint64_t lo = stratum_edge(span, (uint64_t)i, (uint64_t)n_windows);
        uint64_t hi = stratum_edge(span, (uint64_t)i + 1, (uint64_t)n_windows);
        uint64_t width = hi > lo ? hi - lo : 1;
        uint64_t start = lo + splitmix64(&state) % width;
        if (start >= span) start = span - 1;
        out->starts[i] = (int64_t)start;
        int32_t *dst = out->tokens + i * ctx;
        memcpy(dst, ids + start, (size_t)ctx * sizeof(int32_t));
        if (bos >= 0) dst[0] = bos;
    }
    out->n_windows = n_windows;
    out->ctx = ctx;
    out->n_text_tokens = n_ids;
    out->seed = seed;
    return SQZ_OK;
}

sqz_status sqz_calib_windows_make(const sqz_tokenizer *tok, const char *text, size_t len, int64_t n_windows,
                                  int64_t ctx, uint64_t seed, sqz_calib_windows *out) {
    memset(out, 0, sizeof *out);
    int32_t *ids = NULL;
    size_t n = 0;
    /* not "the text has 1 tokens" (the BOS alone) */
    SQZ_RETURN_IF(len == 0, SQZ_ERR_INVALID_ARG, "calibration: the text is empty (0 tokens)");
    SQZ_TRY(sqz_tokenize(tok, text, len, true, &ids, &n));
    int32_t bos = sqz_tokenizer_adds_bos(tok) ? sqz_tokenizer_bos(tok) : -1;
    sqz_status st = sqz_calib_windows_from_ids(ids, (int64_t)n, bos, n_windows, ctx, seed, out);
    free(ids);
    return st;
}

/*
 * runtime/spans.c - several sequences in one window (sqz_forward_spans): llama.cpp's batches of
 * sequence ids, in the shape task scoring needs: a shared context once, and each continuation
 * after it, all in one pass over the weights. Positions restart per sequence (the rotation of
 * llama.c's qk_position per span); attention hides the keys of other sequences (the visible
 * ranges per query, kernels/cpu/attn.c).
 */
#include <stdlib.h>
#include <string.h>

#include "runtime/runtime_internal.h"

/* The spans tile [0, n) in order and each parent is an earlier root; fills vis (3 per token). */
static sqz_status check_spans(const sqz_span *sp, int64_t n_spans, int64_t n, int64_t *vis) {
    int64_t at = 0;
    for (int64_t e = 0; e < n_spans; e++) {
        const sqz_span *x = &sp[e];
        SQZ_RETURN_IF(x->start != at || x->len < 1 || x->len > n - at, SQZ_ERR_INVALID_ARG,
                      "runtime: span %lld is [%lld, +%lld); the spans must cover the %lld tokens in order", (long long)e,
                      (long long)x->start, (long long)x->len, (long long)n);
        SQZ_RETURN_IF(x->parent >= e || x->parent < -1 || (x->parent >= 0 && sp[x->parent].parent != -1),
                      SQZ_ERR_INVALID_ARG, "runtime: span %lld's parent %d is not an earlier span without a parent",
                      (long long)e, x->parent);
        const int64_t lo = x->parent >= 0 ? sp[x->parent].start : 0, hi = x->parent >= 0 ? lo + sp[x->parent].len : 0;
        for (int64_t i = x->start; i < x->start + x->len; i++) {
            vis[3 * i] = lo, vis[3 * i + 1] = hi, vis[3 * i + 2] = x->start;
        }
        at += x->len;
    }
    SQZ_RETURN_IF(at != n, SQZ_ERR_INVALID_ARG, "runtime: the spans cover %lld of %lld tokens", (long long)at,
                  (long long)n);
    return SQZ_OK;
}

/* The final rows picked by rows[], gathered (n_rows, d) for the head. */
static sqz_status head_rows(sqz_session *s, const float *x, int64_t n, const int64_t *rows, int64_t n_rows,
                            float *logits) {
    float *g = sqz__malloc((size_t)(n_rows > 0 ? n_rows : 1) * (size_t)s->d * sizeof(float));
    if (!g) return SQZ_ERR_NOMEM;
    sqz_status st = SQZ_OK;
    for (int64_t r = 0; r < n_rows; r++) {
        if (rows[r] < 0 || rows[r] >= n) {
            st = SQZ_ERROR(SQZ_ERR_INVALID_ARG, "runtime: logits row %lld of a window of %lld", (long long)rows[r],
                           (long long)n);
            break;
        }
        memcpy(g + r * s->d, x + rows[r] * s->d, (size_t)s->d * sizeof(float));
    }
    if (st == SQZ_OK) st = sqz_session_head(s, g, n_rows, 0, logits);
    free(g);
    return st;
}

sqz_status sqz_forward_spans(sqz_session *s, const int32_t *tokens, int64_t n, const sqz_span *spans,
                             int64_t n_spans, const int64_t *rows, int64_t n_rows, float *logits) {
    SQZ_RETURN_IF(!s->fam->lm_head, SQZ_ERR_ARCH, "%s: sqz_forward_spans runs decoders", s->m->source_path);
    SQZ_RETURN_IF(n < 1 || n > s->max_tokens || n_spans < 1 || !spans || n_rows < 0 || (n_rows && !rows),
                  SQZ_ERR_INVALID_ARG, "runtime: %lld tokens in %lld spans (the session holds %lld)", (long long)n,
                  (long long)n_spans, (long long)s->max_tokens);
    for (int32_t l = 0; l < (int32_t)s->m->hp.n_layers; l++)
        SQZ_RETURN_IF(s->m->layers[l].window > 0 && s->m->layers[l].window < n, SQZ_ERR_UNSUPPORTED,
                      "runtime: layer %d's sliding window of %lld is shorter than the %lld batched tokens", l,
                      (long long)s->m->layers[l].window, (long long)n);
    int64_t *vis = sqz__malloc((size_t)n * 3 * sizeof *vis);
    float *x = sqz__malloc((size_t)n * (size_t)s->d * sizeof *x);
    sqz_status st = vis && x ? check_spans(spans, n_spans, n, vis) : SQZ_ERR_NOMEM;
    if (st == SQZ_OK) st = sqz_session_embed(s, tokens, NULL, n, 0, x);
    s->spans = spans, s->n_spans = n_spans, s->span_vis = vis;
    for (int32_t l = 0; st == SQZ_OK && l < (int32_t)s->m->hp.n_layers; l++) st = sqz_session_block(s, l, x, n, 0);
    s->spans = NULL, s->n_spans = 0, s->span_vis = NULL;
    if (st == SQZ_OK && (logits || s->hook)) st = head_rows(s, x, n, rows, n_rows, logits);
    free(vis);
    free(x);
    return st;
}

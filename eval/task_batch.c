/*
 * eval/task_batch.c - the tasks' sequences batched as llama-perplexity batches them: per task,
 * the prefix its sequences share once, then each sequence's rest after it (sqz_forward_spans),
 * as many tasks to a window as the session holds, and the log-probabilities of the targets.
 */
#include <stdlib.h>
#include <string.h>

#include "eval/eval_internal.h"
#include "eval/task_internal.h"

/* The prefix all of a's sequences share, kept below the shortest one's last token (so each has a
 * token after it). */
static size_t shared_prefix(const sqz__ask *a) {
    size_t m, k = sqz__tseq_common_prefix(a->seq, a->n, &m);
    return k < m ? k : m > 0 ? m - 1 : 0;
}

/* Rows at positions < end_of(s) are needed: the targets' predecessors (and seq 0's last token
 * for the quirk). */
static size_t end_of(const sqz__ask *a, int32_t s) {
    if (s == 0 && a->quirk_tok >= 0) return a->seq[0].n_ids;
    return a->to[s] > a->from[s] ? a->to[s] - 1 : 0;
}

int64_t sqz__ask_footprint(sqz__ask *a) {
    a->k = shared_prefix(a);
    int64_t n = (int64_t)a->k;
    for (int32_t s = 0; s < a->n; s++) {
        if (a->from[s] == 0) a->from[s] = 1;
        if (end_of(a, s) > a->k) n += (int64_t)(end_of(a, s) - a->k);
    }
    return n;
}

typedef struct win {
    int32_t *tok;
    sqz_span *sp;
    int64_t *rows;
    int64_t n, n_sp, n_rows;
} win;

/* Appends a's spans and rows to the window (its footprint fits). */
static void plan(win *w, sqz__ask *a) {
    size_t lo = SIZE_MAX;
    for (int32_t s = 0; s < a->n; s++)
        if (a->from[s] < a->to[s] && a->from[s] - 1 < lo) lo = a->from[s] - 1;
    int32_t root = -1;
    a->row_pre = -1;
    if (a->k > 0) {
        root = (int32_t)w->n_sp;
        w->sp[w->n_sp++] = (sqz_span){w->n, (int64_t)a->k, -1};
        a->pf = lo < a->k ? lo : a->k;
        a->row_pre = w->n_rows;
        for (size_t p = a->pf; p < a->k; p++) w->rows[w->n_rows++] = w->n + (int64_t)p;
        memcpy(w->tok + w->n, a->seq[0].ids, a->k * sizeof *w->tok);
        w->n += (int64_t)a->k;
    }
    for (int32_t s = 0; s < a->n; s++) {
        const size_t end = end_of(a, s);
        a->row_seq[s] = -1;
        if (end <= a->k) continue;
        const int64_t start = w->n;
        w->sp[w->n_sp++] = (sqz_span){start, (int64_t)(end - a->k), root};
        memcpy(w->tok + start, a->seq[s].ids + a->k, (end - a->k) * sizeof *w->tok);
        w->n += (int64_t)(end - a->k);
        a->first[s] = a->from[s] - 1 > a->k ? a->from[s] - 1 : a->k;
        a->row_seq[s] = w->n_rows;
        for (size_t p = a->first[s]; p < end; p++) w->rows[w->n_rows++] = start + (int64_t)(p - a->k);
    }
    a->quirk_row = a->quirk_tok >= 0 ? a->row_seq[0] + (int64_t)(a->seq[0].n_ids - 1 - a->first[0]) : -1;
}

/* The logits row of the prediction of seq s's token t. */
static int64_t row_of(const sqz__ask *a, int32_t s, size_t t) {
    return t - 1 < a->k ? a->row_pre + (int64_t)(t - 1 - a->pf) : a->row_seq[s] + (int64_t)(t - 1 - a->first[s]);
}

static float lp_at(const float *logits, const sqz__lsm *m, int64_t V, int64_t row, int32_t tok) {
    return (float)((double)logits[row * V + tok] - m[row].max - m[row].lse);
}

/* Fills each ask's lp from the window's logits (each row's log-softmax once). */
static sqz_status fill(sqz__ask *asks, int64_t n, const float *logits, int64_t n_rows, int64_t V, int threads) {
    sqz__lsm *m = malloc((size_t)(n_rows ? n_rows : 1) * sizeof *m);
    if (!m) return SQZ_ERR_NOMEM;
    sqz__log_softmax_rows(logits, n_rows, V, threads, m);
    sqz_status st = SQZ_OK;
    for (int64_t i = 0; i < n && st == SQZ_OK; i++) {
        sqz__ask *a = &asks[i];
        for (int32_t s = 0; s < a->n && st == SQZ_OK; s++) {
            if (!(a->lp[s] = calloc(a->seq[s].n_ids + 1, sizeof(float)))) st = SQZ_ERR_NOMEM;
            for (size_t t = a->from[s]; st == SQZ_OK && t < a->to[s]; t++)
                a->lp[s][t] = lp_at(logits, m, V, row_of(a, s, t), a->seq[s].ids[t]);
        }
        if (a->quirk_tok >= 0) a->quirk_lp = lp_at(logits, m, V, a->quirk_row, a->quirk_tok);
    }
    free(m);
    return st;
}

void sqz__asks_release(sqz__ask *asks, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        for (int32_t s = 0; s < asks[i].n; s++) {
            free(asks[i].lp[s]);
            asks[i].lp[s] = NULL;
        }
}

sqz_status sqz__asks_run(sqz_session *s, sqz__ask *asks, int64_t n, int64_t *tokens) {
    const int64_t T = sqz_session_max_tokens(s), V = sqz_session_model(s)->hp.vocab_size;
    win w = {0};
    float *logits = NULL;
    w.tok = malloc((size_t)T * sizeof *w.tok);
    w.sp = malloc((size_t)T * sizeof *w.sp);
    w.rows = malloc((size_t)T * sizeof *w.rows);
    sqz_status st = w.tok && w.sp && w.rows ? SQZ_OK : SQZ_ERR_NOMEM;
    for (int64_t i0 = 0; i0 < n && st == SQZ_OK;) {
        int64_t i1 = i0;
        w.n = w.n_sp = w.n_rows = 0;
        while (i1 < n) {
            const int64_t need = sqz__ask_footprint(&asks[i1]);
            if (need > T) {
                st = SQZ_ERROR(SQZ_ERR_INVALID_ARG, "tasks: a task takes %lld tokens; the session holds %lld",
                               (long long)need, (long long)T);
                break;
            }
            if (w.n + need > T) break;
            plan(&w, &asks[i1++]);
        }
        if (st != SQZ_OK) break;
        float *l = realloc(logits, (size_t)(w.n_rows ? w.n_rows : 1) * (size_t)V * sizeof *l);
        if (!l) st = SQZ_ERR_NOMEM;
        else logits = l;
        if (st == SQZ_OK && w.n > 0) st = sqz_forward_spans(s, w.tok, w.n, w.sp, w.n_sp, w.rows, w.n_rows, logits);
        if (st == SQZ_OK) st = fill(asks + i0, i1 - i0, logits, w.n_rows, V, sqz_session_threads(s));
        *tokens += w.n;
        i0 = i1;
    }
    free(logits);
    free(w.tok);
    free(w.sp);
    free(w.rows);
    return st;
}

/*
 * eval/tasks.c - scoring the tasks of eval/task_files.c as llama-perplexity's hellaswag_score,
 * winogrande_score and multiple_choice_score do (tools/perplexity/perplexity.cpp), and the jsonl
 * kind as lm-evaluation-harness's loglikelihood: each task's shared prefix is run once, and its
 * KV cache reused for every ending (sqz_forward at pos = the prefix's length).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "eval/eval_internal.h"
#include "eval/task_internal.h"
#include "sqz/family.h"

sqz_status sqz_tasks_tokenize(sqz_tasks *ts, const sqz_tokenizer *tok) {
    for (int64_t i = 0; i < ts->n; i++) {
        for (int32_t s = 0; s < ts->t[i].n_seq; s++) {
            sqz__tseq *q = &ts->t[i].seq[s];
            free(q->ids);
            q->ids = NULL;
            SQZ_TRY(sqz_tokenize(tok, q->text, q->len, true, &q->ids, &q->n_ids));
        }
    }
    ts->tokenized = true;
    return SQZ_OK;
}

int64_t sqz_tasks_max_tokens(const sqz_tasks *ts) {
    size_t m = 0;
    for (int64_t i = 0; ts->tokenized && i < ts->n; i++)
        for (int32_t s = 0; s < ts->t[i].n_seq; s++) m = ts->t[i].seq[s].n_ids > m ? ts->t[i].seq[s].n_ids : m;
    return (int64_t)m;
}

/* The longest prefix seq[0..n) share, and their shortest length. */
static size_t common_prefix(const sqz__tseq *seq, int32_t n, size_t *min_len) {
    size_t m = seq[0].n_ids;
    for (int32_t s = 1; s < n; s++) m = seq[s].n_ids < m ? seq[s].n_ids : m;
    size_t k = 0;
    for (; k < m; k++) {
        int32_t s = 1;
        while (s < n && seq[s].ids[k] == seq[0].ids[k]) s++;
        if (s < n) break;
    }
    *min_len = m;
    return k;
}

int64_t sqz_tasks_total_tokens(const sqz_tasks *ts) {
    int64_t tot = 0;
    for (int64_t i = 0; ts->tokenized && i < ts->n; i++) {
        const sqz__task *t = &ts->t[i];
        int32_t n = t->n_choices;
        size_t ml, cp = common_prefix(t->seq, n, &ml);
        tot += (int64_t)cp;
        for (int32_t s = 0; s < n; s++) tot += (int64_t)(t->seq[s].n_ids - cp);
    }
    return tot;
}

/* ---- the log-probabilities of a task's sequences ------------------------------------------- */

typedef struct work {
    sqz_session *s;
    int64_t V, max_tokens, tokens;
    float *rows; /* logits of one forward */
    size_t rows_cap;
    float *pre;  /* the prefix's logits */
    size_t pre_cap;
    float **lp;  /* lp[s][t] = log p(seq s token t | tokens before), for the targets asked */
    int32_t lp_n;
} work;

static sqz_status grow(float **p, size_t *cap, size_t need) {
    if (need <= *cap) return SQZ_OK;
    float *q = realloc(*p, need * sizeof *q);
    if (!q) return SQZ_ERR_NOMEM;
    *p = q;
    *cap = need;
    return SQZ_OK;
}

static float row_lp(const float *x, int64_t V, int32_t tok) {
    sqz__lsm m = sqz__log_softmax(x, V);
    return (float)((double)x[tok] - m.max - m.lse);
}

/* What one task asks of score_seqs: seqs 0..n, targets [from[s], to[s]) of each, and
 * optionally (quirk_tok >= 0) seq 0 run through its last token, whose logits score quirk_tok. */
typedef struct ask {
    const sqz__tseq *seq;
    int32_t n;
    size_t from[101], to[101];
    int32_t quirk_tok;
    float quirk_lp;
} ask;

/* Runs the shared prefix [0, k) once (rows for the targets inside it), then each sequence on
 * top of it from position k, filling w->lp[s][t] for every target asked. */
static sqz_status score_seqs(work *w, ask *a) {
    size_t ml, cp = common_prefix(a->seq, a->n, &ml);
    size_t k = cp < ml ? cp : ml - 1, lo = SIZE_MAX;
    for (int32_t s = 0; s < a->n; s++) {
        SQZ_RETURN_IF(a->seq[s].n_ids > (size_t)w->max_tokens, SQZ_ERR_INVALID_ARG,
                      "tasks: a sequence of %zu tokens; the session holds %lld", a->seq[s].n_ids,
                      (long long)w->max_tokens);
        if (a->from[s] == 0) a->from[s] = 1;
        if (a->from[s] < a->to[s] && a->from[s] - 1 < lo) lo = a->from[s] - 1;
    }
    if (k > 0) {
        size_t pf = lo < k ? lo : k, nr = k - pf;
        SQZ_TRY(grow(&w->pre, &w->pre_cap, (nr ? nr : 1) * (size_t)w->V));
        SQZ_TRY(sqz_forward(w->s, a->seq[0].ids, (int64_t)k, 0, (int64_t)(nr ? pf : k), nr ? w->pre : NULL));
        w->tokens += (int64_t)k;
        for (int32_t s = 0; s < a->n; s++)
            for (size_t t = a->from[s]; t < a->to[s] && t - 1 < k; t++)
                w->lp[s][t] = row_lp(w->pre + (t - 1 - pf) * (size_t)w->V, w->V, a->seq[s].ids[t]);
    }
    for (int32_t s = 0; s < a->n; s++) {
        const sqz__tseq *q = &a->seq[s];
        size_t end = a->to[s] > 0 ? a->to[s] - 1 : 0; /* rows at positions < end */
        if (s == 0 && a->quirk_tok >= 0) end = q->n_ids;
        if (end <= k) continue;
        size_t first = a->from[s] > k + 1 ? a->from[s] - 1 : k; /* first row's position */
        SQZ_TRY(grow(&w->rows, &w->rows_cap, (end - first) * (size_t)w->V));
        SQZ_TRY(sqz_forward(w->s, q->ids + k, (int64_t)(end - k), (int64_t)k, (int64_t)(first - k), w->rows));
        w->tokens += (int64_t)(end - k);
        for (size_t t = a->from[s] > k + 1 ? a->from[s] : k + 1; t < a->to[s]; t++)
            w->lp[s][t] = row_lp(w->rows + (t - 1 - first) * (size_t)w->V, w->V, q->ids[t]);
        if (s == 0 && a->quirk_tok >= 0)
            a->quirk_lp = row_lp(w->rows + (q->n_ids - 1 - first) * (size_t)w->V, w->V, a->quirk_tok);
    }
    return SQZ_OK;
}

/* ---- the kinds ----------------------------------------------------------------------------- */

/* hellaswag and multiple-choice: each sequence's mean log-probability over its tokens after the
 * shared prefix (the first of them predicted by the prefix's last logits); llama-perplexity sums
 * hellaswag's in double, multiple-choice's in float. */
static sqz_status run_mean(work *w, const sqz__task *t, double *score, bool f32_sum) {
    size_t ml, cp = common_prefix(t->seq, t->n_choices, &ml);
    size_t from = cp < ml ? cp : ml - 1;
    ask a = {.seq = t->seq, .n = t->n_choices, .quirk_tok = -1};
    for (int32_t s = 0; s < a.n; s++) a.from[s] = from < 1 ? 1 : from, a.to[s] = t->seq[s].n_ids;
    SQZ_TRY(score_seqs(w, &a));
    for (int32_t s = 0; s < a.n; s++) {
        double d = 0;
        float f = 0;
        for (size_t i = a.from[s]; i < a.to[s]; i++) d += w->lp[s][i], f += w->lp[s][i];
        size_t cnt = a.to[s] > a.from[s] ? a.to[s] - a.from[s] : 0;
        score[s] = f32_sum ? (double)(f / (float)cnt) : d / (double)cnt;
    }
    return SQZ_OK;
}

/* winogrande: llama-perplexity's partial scoring (see sqz/tasks.h). */
static sqz_status run_winogrande(work *w, const sqz__task *t, double *score) {
    const sqz__tseq *q = t->seq;
    size_t ml, cp = common_prefix(q, 2, &ml);
    const size_t len[2] = {q[0].n_ids, q[1].n_ids};
    const bool skip = len[0] - cp > 3 && len[1] - cp > 3;
    ask a = {.seq = q, .n = 2, .quirk_tok = -1};
    size_t nb[2], last[2];
    for (int s = 0; s < 2; s++) {
        nb[s] = skip ? q[2 + s].n_ids : cp;
        if (nb[s] < 1) nb[s] = 1;
        if (nb[s] > len[s]) nb[s] = len[s];
        last[s] = len[s] - nb[s] > 1 ? 1 : 0;
        a.from[s] = nb[s];
        a.to[s] = len[s] - last[s];
    }
    /* llama-perplexity scores the second sequence's first token with the first's last logits
     * when the choice is not skipped (its FIXME) */
    bool quirk = nb[1] == cp && a.from[1] < a.to[1];
    if (quirk) a.quirk_tok = q[1].ids[nb[1]];
    SQZ_TRY(score_seqs(w, &a));
    if (quirk) w->lp[1][nb[1]] = a.quirk_lp;
    for (int s = 0; s < 2; s++) {
        float f = 0;
        for (size_t i = a.from[s]; i < a.to[s]; i++) f += w->lp[s][i];
        score[s] = (double)(f / (float)(len[s] - nb[s] - last[s])); /* 0/0: NaN, as llama.cpp */
    }
    return SQZ_OK;
}

/* jsonl: the continuation's summed log-probability, over the tokens after the context's. */
static sqz_status run_jsonl(work *w, const sqz__task *t, double *score, double *norm) {
    const int32_t n = t->n_choices;
    size_t nctx = t->seq[n].n_ids > 0 ? t->seq[n].n_ids : 1;
    ask a = {.seq = t->seq, .n = n, .quirk_tok = -1};
    for (int32_t s = 0; s < n; s++) {
        a.from[s] = nctx < t->seq[s].n_ids ? nctx : t->seq[s].n_ids;
        a.to[s] = t->seq[s].n_ids;
    }
    SQZ_TRY(score_seqs(w, &a));
    for (int32_t s = 0; s < n; s++) {
        double d = 0;
        for (size_t i = a.from[s]; i < a.to[s]; i++) d += w->lp[s][i];
        score[s] = d;
        norm[s] = d / (double)t->choice_bytes[s];
    }
    return SQZ_OK;
}

/* The first best of v[0..n) (strict >, as llama.cpp and numpy.argmax); *tie when the runner-up
 * lies within 1e-6. */
static int32_t best_of(const double *v, int32_t n, bool *tie, sqz_task_outcome *o) {
    int32_t b = 0;
    for (int32_t i = 1; i < n; i++)
        if (v[i] > v[b]) b = i;
    *tie = false;
    double second = -INFINITY;
    for (int32_t i = 0; i < n; i++) {
        if (i != b && fabs(v[i] - v[b]) < 1e-6) *tie = true;
        if (i != b && v[i] > second) second = v[i];
    }
    if (o) o->best = v[b], o->second = second;
    return b;
}

static sqz_status score_task(work *w, const sqz_tasks *ts, const sqz__task *t, sqz_task_outcome *o) {
    double sc[101], nm[101];
    bool tie_norm = false;
    for (int32_t s = 0; s < t->n_seq; s++)
        if (!(w->lp[s] = realloc(w->lp[s], (t->seq[s].n_ids + 1) * sizeof(float)))) return SQZ_ERR_NOMEM;
    switch (ts->kind) {
    case SQZ_TASK_WINOGRANDE:
        SQZ_TRY(run_winogrande(w, t, sc));
        /* llama.cpp: score_1st > score_2nd ? 1 : 2 (a NaN picks the second) */
        o->choice = sc[0] > sc[1] ? 0 : 1;
        o->tie = fabs(sc[0] - sc[1]) < 1e-6;
        o->best = sc[o->choice], o->second = sc[1 - o->choice];
        break;
    case SQZ_TASK_JSONL:
        SQZ_TRY(run_jsonl(w, t, sc, nm));
        o->choice = best_of(sc, t->n_choices, &o->tie, o);
        o->choice_norm = best_of(nm, t->n_choices, &tie_norm, NULL);
        break;
    default:
        SQZ_TRY(run_mean(w, t, sc, ts->kind == SQZ_TASK_MULTIPLE_CHOICE));
        o->choice = best_of(sc, t->n_choices, &o->tie, o);
        break;
    }
    if (ts->kind != SQZ_TASK_JSONL) o->choice_norm = o->choice;
    o->correct = ts->kind == SQZ_TASK_MULTIPLE_CHOICE ? t->labels[o->choice] == 1 : o->choice == t->gold;
    o->correct_norm = ts->kind == SQZ_TASK_JSONL ? o->choice_norm == t->gold : o->correct;
    return SQZ_OK;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void sqz_task_result_free(sqz_task_result *r) {
    if (!r) return;
    free(r->outcomes);
    memset(r, 0, sizeof *r);
}

static void fill_counts(sqz_task_result *r) {
    for (int64_t i = 0; i < r->n; i++) {
        r->correct += r->outcomes[i].correct;
        r->correct_norm += r->outcomes[i].correct_norm;
        r->n_ties += r->outcomes[i].tie;
    }
    r->accuracy = (double)r->correct / (double)r->n;
    r->accuracy_norm = (double)r->correct_norm / (double)r->n;
    sqz_wilson95(r->correct, r->n, &r->ci_lo, &r->ci_hi);
    sqz_wilson95(r->correct_norm, r->n, &r->ci_norm_lo, &r->ci_norm_hi);
}

sqz_status sqz_eval_tasks(sqz_session *s, const sqz_tasks *ts, const sqz_task_opts *o, sqz_task_result *r) {
    memset(r, 0, sizeof *r);
    const sqz_model *m = sqz_session_model(s);
    SQZ_RETURN_IF(!sqz_family_get(m->hp.family)->lm_head, SQZ_ERR_ARCH,
                  "tasks: scoring choices needs a decoder; %s is an encoder", m->source_path ? m->source_path : "");
    SQZ_RETURN_IF(!ts->tokenized, SQZ_ERR_INVALID_ARG, "%s: the tasks are not tokenized", ts->path);
    SQZ_RETURN_IF(sqz_tasks_max_tokens(ts) > sqz_session_max_tokens(s), SQZ_ERR_INVALID_ARG,
                  "%s: a task's sequence has %lld tokens; the session holds %lld (a larger --ctx)", ts->path,
                  (long long)sqz_tasks_max_tokens(ts), (long long)sqz_session_max_tokens(s));
    work w = {.s = s, .V = m->hp.vocab_size, .max_tokens = sqz_session_max_tokens(s), .lp_n = 101};
    w.lp = calloc(101, sizeof *w.lp);
    r->outcomes = calloc((size_t)ts->n, sizeof *r->outcomes);
    sqz_status st = w.lp && r->outcomes ? SQZ_OK : SQZ_ERR_NOMEM;
    const int64_t total = sqz_tasks_total_tokens(ts);
    double t0 = now_s();
    for (int64_t i = 0; st == SQZ_OK && i < ts->n; i++) {
        st = score_task(&w, ts, &ts->t[i], &r->outcomes[i]);
        r->n_choices += ts->t[i].n_choices;
        if (st == SQZ_OK && o && o->progress) o->progress(o->progress_user, w.tokens, total);
    }
    for (int32_t i = 0; w.lp && i < w.lp_n; i++) free(w.lp[i]);
    free(w.lp);
    free(w.rows);
    free(w.pre);
    if (st != SQZ_OK) {
        sqz_task_result_free(r);
        return st;
    }
    r->kind = ts->kind;
    r->n = ts->n;
    r->seconds = now_s() - t0;
    r->tokens = w.tokens;
    r->activations = sqz_session_activations(s);
    fill_counts(r);
    return SQZ_OK;
}

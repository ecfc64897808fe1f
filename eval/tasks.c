/*
 * eval/tasks.c - scoring the tasks of eval/task_files.c as llama-perplexity's hellaswag_score,
 * winogrande_score and multiple_choice_score do (tools/perplexity/perplexity.cpp), and the jsonl
 * kind as lm-evaluation-harness's loglikelihood: each task's shared prefix is run once, and its
 * KV cache reused for every ending (sqz_forward at pos = the prefix's length).
 */
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

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

size_t sqz__tseq_common_prefix(const sqz__tseq *seq, int32_t n, size_t *min_len) {
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
        size_t ml, cp = sqz__tseq_common_prefix(t->seq, n, &ml);
        tot += (int64_t)cp;
        for (int32_t s = 0; s < n; s++) tot += (int64_t)(t->seq[s].n_ids - cp);
    }
    return tot;
}

/* ---- the kinds: what each asks, and its scores ------------------------------------------- */

/* hellaswag and multiple-choice: each sequence's tokens after the prefix all of them share (the
 * first predicted by the prefix's last logits). */
static void ask_mean(const sqz__task *t, sqz__ask *a) {
    size_t ml, cp = sqz__tseq_common_prefix(t->seq, t->n_choices, &ml);
    size_t from = cp < ml ? cp : ml - 1;
    for (int32_t s = 0; s < a->n; s++) a->from[s] = from < 1 ? 1 : from, a->to[s] = t->seq[s].n_ids;
}

/* ... their mean log-probability; llama-perplexity sums hellaswag's in double, multiple-choice's
 * in float. */
static void score_mean(const sqz__ask *a, double *score, bool f32_sum) {
    for (int32_t s = 0; s < a->n; s++) {
        double d = 0;
        float f = 0;
        for (size_t i = a->from[s]; i < a->to[s]; i++) d += a->lp[s][i], f += a->lp[s][i];
        size_t cnt = a->to[s] > a->from[s] ? a->to[s] - a->from[s] : 0;
        score[s] = f32_sum ? (double)(f / (float)cnt) : d / (double)cnt;
    }
}

/* winogrande: llama-perplexity's partial scoring (see sqz/tasks.h). */
static void ask_winogrande(const sqz__task *t, sqz__ask *a) {
    const sqz__tseq *q = t->seq;
    size_t ml, cp = sqz__tseq_common_prefix(q, 2, &ml);
    const size_t len[2] = {q[0].n_ids, q[1].n_ids};
    const bool skip = len[0] - cp > 3 && len[1] - cp > 3;
    a->n = 2;
    for (int s = 0; s < 2; s++) {
        size_t nb = skip ? q[2 + s].n_ids : cp;
        nb = nb < 1 ? 1 : nb > len[s] ? len[s] : nb;
        a->nb[s] = nb;
        a->last[s] = len[s] - nb > 1 ? 1 : 0;
        a->from[s] = nb;
        a->to[s] = len[s] - a->last[s];
    }
    /* llama-perplexity scores the second sequence's first token with the first's last logits
     * when the choice is not skipped (its FIXME) */
    if (a->nb[1] == cp && a->from[1] < a->to[1]) a->quirk_tok = q[1].ids[a->nb[1]];
}

static void score_winogrande(sqz__ask *a, double *score) {
    if (a->quirk_tok >= 0) a->lp[1][a->nb[1]] = a->quirk_lp;
    for (int s = 0; s < 2; s++) {
        float f = 0;
        for (size_t i = a->from[s]; i < a->to[s]; i++) f += a->lp[s][i];
        /* 0/0 is NaN, as llama.cpp's */
        score[s] = (double)(f / (float)(a->seq[s].n_ids - a->nb[s] - a->last[s]));
    }
}

/* jsonl: the continuation's tokens, after those of the context alone. */
static void ask_jsonl(const sqz__task *t, sqz__ask *a) {
    size_t nctx = t->seq[a->n].n_ids > 0 ? t->seq[a->n].n_ids : 1;
    for (int32_t s = 0; s < a->n; s++) {
        a->from[s] = nctx < t->seq[s].n_ids ? nctx : t->seq[s].n_ids;
        a->to[s] = t->seq[s].n_ids;
    }
}

static void score_jsonl(const sqz__task *t, const sqz__ask *a, double *score, double *norm) {
    for (int32_t s = 0; s < a->n; s++) {
        double d = 0;
        for (size_t i = a->from[s]; i < a->to[s]; i++) d += a->lp[s][i];
        score[s] = d;
        norm[s] = d / (double)t->choice_bytes[s];
    }
}

static void ask_of(sqz_task_kind k, const sqz__task *t, sqz__ask *a);

int64_t sqz_tasks_max_tokens(const sqz_tasks *ts) {
    int64_t m = 0;
    sqz__ask *a = malloc(sizeof *a);
    for (int64_t i = 0; a && ts->tokenized && i < ts->n; i++) {
        ask_of(ts->kind, &ts->t[i], a);
        const int64_t f = sqz__ask_footprint(a);
        m = f > m ? f : m;
    }
    free(a);
    return m;
}

int64_t sqz_tasks_window(const sqz_tasks *ts, int64_t vocab) {
    /* 512 tokens, fewer when their logits would pass 256 MB, and at least the largest task */
    int64_t w = ((int64_t)1 << 26) / (vocab > 0 ? vocab : 1), need = sqz_tasks_max_tokens(ts);
    w = w < 512 ? w : 512;
    return w > need ? w : need;
}

static void ask_of(sqz_task_kind k, const sqz__task *t, sqz__ask *a) {
    memset(a, 0, offsetof(sqz__ask, lp));
    a->seq = t->seq;
    a->n = t->n_choices;
    a->quirk_tok = -1;
    if (k == SQZ_TASK_WINOGRANDE) ask_winogrande(t, a);
    else if (k == SQZ_TASK_JSONL) ask_jsonl(t, a);
    else ask_mean(t, a);
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

static void outcome_of(sqz_task_kind k, const sqz__task *t, sqz__ask *a, sqz_task_outcome *o) {
    double sc[SQZ__MAX_CHOICES] = {0}, nm[SQZ__MAX_CHOICES] = {0};
    bool tie_norm = false;
    switch (k) {
    case SQZ_TASK_WINOGRANDE:
        score_winogrande(a, sc);
        /* llama.cpp: score_1st > score_2nd ? 1 : 2 (a NaN picks the second) */
        o->choice = sc[0] > sc[1] ? 0 : 1;
        o->tie = fabs(sc[0] - sc[1]) < 1e-6;
        o->best = sc[o->choice], o->second = sc[1 - o->choice];
        break;
    case SQZ_TASK_JSONL:
        score_jsonl(t, a, sc, nm);
        o->choice = best_of(sc, t->n_choices, &o->tie, o);
        o->choice_norm = best_of(nm, t->n_choices, &tie_norm, NULL);
        break;
    default:
        score_mean(a, sc, k == SQZ_TASK_MULTIPLE_CHOICE);
        o->choice = best_of(sc, t->n_choices, &o->tie, o);
        break;
    }
    if (k != SQZ_TASK_JSONL) o->choice_norm = o->choice;
    o->correct = k == SQZ_TASK_MULTIPLE_CHOICE ? t->labels[o->choice] == 1 : o->choice == t->gold;
    o->correct_norm = k == SQZ_TASK_JSONL ? o->choice_norm == t->gold : o->correct;
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
                  "%s: a task takes %lld tokens; the session holds %lld (a larger --ctx)", ts->path,
                  (long long)sqz_tasks_max_tokens(ts), (long long)sqz_session_max_tokens(s));
    enum { CHUNK = 64 }; /* tasks planned at a time */
    sqz__ask *asks = calloc(CHUNK, sizeof *asks);
    r->outcomes = calloc((size_t)ts->n, sizeof *r->outcomes);
    sqz_status st = asks && r->outcomes ? SQZ_OK : SQZ_ERR_NOMEM;
    const int64_t total = sqz_tasks_total_tokens(ts);
    int64_t tokens = 0;
    double t0 = sqz_now_seconds();
    for (int64_t i0 = 0; st == SQZ_OK && i0 < ts->n; i0 += CHUNK) {
        const int64_t m = ts->n - i0 < CHUNK ? ts->n - i0 : CHUNK;
        for (int64_t i = 0; i < m; i++) ask_of(ts->kind, &ts->t[i0 + i], &asks[i]);
        st = sqz__asks_run(s, asks, m, &tokens);
        for (int64_t i = 0; st == SQZ_OK && i < m; i++) {
            outcome_of(ts->kind, &ts->t[i0 + i], &asks[i], &r->outcomes[i0 + i]);
            r->n_choices += ts->t[i0 + i].n_choices;
        }
        sqz__asks_release(asks, m);
        /* total counts every ending's last token, which no window feeds (its logits score nothing): the
         * last chunk says all of it */
        const int64_t done = i0 + m == ts->n || tokens > total ? total : tokens;
        if (st == SQZ_OK && o && o->progress) o->progress(o->progress_user, done, total);
    }
    free(asks);
    if (st != SQZ_OK) {
        sqz_task_result_free(r);
        return st;
    }
    r->kind = ts->kind;
    r->n = ts->n;
    r->seconds = sqz_now_seconds() - t0;
    r->tokens = tokens;
    r->activations = sqz_session_activations(s);
    fill_counts(r);
    return SQZ_OK;
}

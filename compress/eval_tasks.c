/*
 * compress/eval_tasks.c - `sqz compress --eval-task KIND FILE`: the result and the original on
 * the same tasks (eval/, sqz/tasks.h), both accuracies, the paired delta and McNemar's exact test,
 * into the report.
 */
#include <stdio.h>
#include <string.h>

#include "compress/compress_internal.h"
#include "sqz/tasks.h"
#include "sqz/tokenizer.h"

static sqz_status run_one(const sqz_model *m, const sqz_tasks *t, int threads, const sqz_task_opts *o,
                          sqz_task_result *r) {
    sqz_session_opts so = sqz_session_default_opts();
    so.n_threads = threads;
    so.max_tokens = sqz_tasks_window(t, m->hp.vocab_size);
    sqz_session *s = NULL;
    sqz_status st = sqz_session_new(m, &so, &s);
    if (st == SQZ_OK) st = sqz_eval_tasks(s, t, o, r);
    sqz_session_free(s);
    return st;
}

static void fill(const sqz_task_result *m, const sqz_task_result *b, const sqz_task_delta *d,
                 const sqz_task_delta *dn, sqz_compress_tasks *out) {
    out->n = m->n;
    out->correct = m->correct, out->correct_base = b->correct, out->ties = m->n_ties;
    out->accuracy = m->accuracy, out->ci_lo = m->ci_lo, out->ci_hi = m->ci_hi;
    out->accuracy_base = b->accuracy, out->ci_base_lo = b->ci_lo, out->ci_base_hi = b->ci_hi;
    out->delta = d->delta, out->p_value = d->p_value, out->agree = d->agree;
    out->has_norm = m->kind == SQZ_TASK_JSONL;
    out->correct_norm = m->correct_norm, out->correct_norm_base = b->correct_norm;
    out->delta_norm = dn->delta, out->p_norm = dn->p_value;
}

sqz_status sqz_compress_eval_tasks(const sqz_model *compressed, const sqz_model *original, int kind,
                                   const char *file, int64_t limit, int threads, sqz_progress_fn progress,
                                   void *progress_user, sqz_compress_tasks *out) {
    memset(out, 0, sizeof *out);
    SQZ_RETURN_IF(compressed->hp.vocab_size != original->hp.vocab_size, SQZ_ERR_INVALID_ARG,
                  "%s: the result's vocabulary (%lld) is not the original's (%lld)", file,
                  (long long)compressed->hp.vocab_size, (long long)original->hp.vocab_size);
    const double t0 = sqz_now_seconds();
    sqz_tasks *t = NULL;
    sqz_tokenizer *tok = NULL;
    sqz_task_result rm, rb;
    memset(&rm, 0, sizeof rm);
    memset(&rb, 0, sizeof rb);
    sqz_task_delta d, dn;
    const sqz_task_opts o = {.progress = progress, .progress_user = progress_user};
    sqz_status st = sqz_tasks_read(file, (sqz_task_kind)kind, limit, &t);
    if (st == SQZ_OK) st = sqz_tokenizer_new(&original->vocab, &tok);
    if (st == SQZ_OK) st = sqz_tasks_tokenize(t, tok);
    if (st == SQZ_OK) st = run_one(original, t, threads, &o, &rb);
    if (st == SQZ_OK) st = run_one(compressed, t, threads, &o, &rm);
    if (st == SQZ_OK) st = sqz_task_compare(&rm, &rb, false, &d);
    if (st == SQZ_OK) st = sqz_task_compare(&rm, &rb, true, &dn);
    if (st == SQZ_OK) {
        fill(&rm, &rb, &d, &dn, out);
        snprintf(out->kind, sizeof out->kind, "%s", sqz_task_kind_name((sqz_task_kind)kind));
        snprintf(out->file, sizeof out->file, "%s", file);
        out->seconds = sqz_now_seconds() - t0;
        out->done = true;
    }
    sqz_task_result_free(&rm);
    sqz_task_result_free(&rb);
    sqz_tokenizer_free(tok);
    sqz_tasks_free(t);
    return st;
}

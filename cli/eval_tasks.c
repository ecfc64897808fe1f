/* cli/eval_tasks.c - `sqz eval MODEL --task KIND FILE [--base BASE]`: accuracy on HellaSwag,
 * WinoGrande, multiple-choice (MMLU, ARC, TruthfulQA) and JSONL tasks, as llama-perplexity
 * scores its kinds, and with a base both accuracies, the delta and McNemar's exact test. */
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "sqz/tasks.h"
#include "sqz/tokenizer.h"

typedef struct side {
    sqz_model *m;
    sqz_tokenizer *tok;
    sqz_tasks *t;
    sqz_session *s;
    sqz_task_result r;
} side;

static void side_free(side *x) {
    sqz_task_result_free(&x->r);
    sqz_session_free(x->s);
    sqz_tasks_free(x->t);
    sqz_tokenizer_free(x->tok);
    sqz_model_free(x->m);
}

/* Opens a model, reads and tokenizes the tasks with its tokenizer, and starts a session long
 * enough for the longest task (or --ctx, refused when shorter). */
static sqz_status open_side(const sqz_cli_task_args *a, const char *path, sqz_backend *be, side *x, bool *reported) {
    sqz_open_opts oo = {.tokenizer_path = a->tokpath};
    sqz_status st = sqz_model_open(path, &oo, &x->m);
    if (st == SQZ_OK) sqz_cli_model_warnings(path, x->m);
    if (st == SQZ_OK) st = sqz_model_check_finite(x->m);
    if (st == SQZ_OK) st = sqz_tokenizer_new(&x->m->vocab, &x->tok);
    if (st == SQZ_OK) st = sqz_tasks_read(a->file, (sqz_task_kind)a->kind, a->limit, &x->t);
    if (st == SQZ_OK) st = sqz_tasks_tokenize(x->t, x->tok);
    if (st != SQZ_OK) return st;
    const int64_t need = sqz_tasks_max_tokens(x->t);
    if (a->ctx > 0 && a->ctx < need) {
        sqz_cli_error("%s: a task takes %lld tokens with %s's tokenizer; --ctx %lld is shorter", a->file,
                      (long long)need, path, (long long)a->ctx);
        *reported = true;
        return SQZ_ERR_INVALID_ARG;
    }
    sqz_session_opts so = sqz_session_default_opts();
    so.n_threads = (int)a->threads;
    so.max_tokens = a->ctx > 0 ? a->ctx : sqz_tasks_window(x->t, x->m->hp.vocab_size);
    so.weights = a->stream ? SQZ_WEIGHTS_STREAM : SQZ_WEIGHTS_CACHE;
    so.backend = be;
    so.activations = (sqz_activations)a->acts;
    return sqz_session_new(x->m, &so, &x->s);
}

static sqz_status run_side(const sqz_cli_task_args *a, const char *label, side *x) {
    sqz_progress *p = sqz_cli_progress(a->quiet, label, sqz_tasks_total_tokens(x->t), "tokens");
    sqz_task_opts o = {.progress = sqz_progress_cb, .progress_user = p};
    sqz_status st = sqz_eval_tasks(x->s, x->t, &o, &x->r);
    sqz_progress_end(p);
    return st;
}

static void print_acc(const char *key, int64_t k, int64_t n, double lo, double hi) {
    printf("%-12s %.3f%%  95%% CI [%.2f%%, %.2f%%]  (%lld of %lld)\n", key, 100.0 * (double)k / (double)n, 100 * lo,
           100 * hi, (long long)k, (long long)n);
}

static void print_result(const sqz_cli_task_args *a, const sqz_task_result *r) {
    printf("model        %s\n", a->model);
    printf("tasks        %s: %s, %lld tasks, %lld choices, %lld tokens evaluated\n", sqz_task_kind_name(r->kind),
           a->file, (long long)r->n, (long long)r->n_choices, (long long)r->tokens);
    printf("activations  %s\n", sqz_cli_activations_name(r->activations));
    print_acc(r->kind == SQZ_TASK_JSONL ? "acc" : "accuracy", r->correct, r->n, r->ci_lo, r->ci_hi);
    if (r->kind == SQZ_TASK_JSONL) print_acc("acc_norm", r->correct_norm, r->n, r->ci_norm_lo, r->ci_norm_hi);
    printf("random       %.3f%%\n", 100.0 * (double)r->n / (double)r->n_choices);
    printf("ties         %lld task%s whose best two choices lie within 1e-6 of log-probability\n",
           (long long)r->n_ties, r->n_ties == 1 ? "" : "s");
}

static void print_delta(const sqz_cli_task_args *a, const sqz_task_result *b, const sqz_task_delta *d, bool norm) {
    const char *what = norm ? "acc_norm" : "accuracy";
    printf("base         %s\n", a->base);
    print_acc(norm ? "base norm" : "base", norm ? b->correct_norm : b->correct, b->n, norm ? b->ci_norm_lo : b->ci_lo,
              norm ? b->ci_norm_hi : b->ci_hi);
    printf("delta        %+.3f points of %s (right in the model only %lld, in the base only %lld, both %lld, "
           "neither %lld)\n", 100.0 * d->delta, what, (long long)d->only_model, (long long)d->only_base,
           (long long)d->both, (long long)d->neither);
    printf("mcnemar      p = %.4g (exact, two-sided)%s\n", d->p_value,
           d->p_value < 0.05 ? ": the difference is significant at 5%" : ": not significant at 5%");
    printf("agreement    %.2f%% of the tasks the same choice\n", 100.0 * d->agree);
}

/* The JSON report with each task's choice and whether it was right. */
static sqz_status write_json(const sqz_cli_task_args *a, const side *m, const side *b, const sqz_task_delta *d) {
    char *j = sqz_task_report_json(&m->r, a->file, a->model, b ? &b->r : NULL, a->base, b ? d : NULL);
    if (!j) return SQZ_ERR_NOMEM;
    sqz_status st = sqz_cli_write_file(a->json, j, strlen(j));
    free(j);
    return st;
}

int sqz_cli_eval_tasks(const sqz_cli_task_args *a) {
    side m, b;
    memset(&m, 0, sizeof m);
    memset(&b, 0, sizeof b);
    sqz_backend *be = NULL;
    bool reported = false;
    sqz_status st = sqz_backend_cpu((int)a->threads, &be);
    if (st == SQZ_OK) st = open_side(a, a->model, be, &m, &reported);
    if (st == SQZ_OK && a->base) st = open_side(a, a->base, be, &b, &reported);
    if (st == SQZ_OK && a->base && b.m->hp.vocab_size != m.m->hp.vocab_size) {
        sqz_cli_error("%s has a vocabulary of %lld, the model %s %lld: they cannot be compared on the same tasks",
                      a->base, (long long)b.m->hp.vocab_size, a->model, (long long)m.m->hp.vocab_size);
        reported = true;
        st = SQZ_ERR_INVALID_ARG;
    }
    if (st == SQZ_OK) st = run_side(a, "tasks", &m);
    if (st == SQZ_OK && a->base) st = run_side(a, "base tasks", &b);
    sqz_task_delta d;
    memset(&d, 0, sizeof d);
    const bool norm = false;
    if (st == SQZ_OK && a->base) st = sqz_task_compare(&m.r, &b.r, norm, &d);
    if (st == SQZ_OK) {
        print_result(a, &m.r);
        if (a->base) print_delta(a, &b.r, &d, norm);
        if (a->base && m.r.kind == SQZ_TASK_JSONL) {
            sqz_task_delta dn;
            if (sqz_task_compare(&m.r, &b.r, true, &dn) == SQZ_OK)
                printf("norm delta   %+.3f points of acc_norm, McNemar p = %.4g\n", 100.0 * dn.delta, dn.p_value);
        }
        printf("time         %.2f s (%.1f tokens/s)", m.r.seconds, (double)m.r.tokens / (m.r.seconds > 0 ? m.r.seconds : 1));
        if (a->base) printf(", base %.2f s", b.r.seconds);
        printf("\n");
    }
    if (st == SQZ_OK && a->json) st = write_json(a, &m, a->base ? &b : NULL, &d);
    int rc = st == SQZ_OK ? 0 : reported ? 1 : sqz_cli_fail(st);
    side_free(&m);
    side_free(&b);
    sqz_backend_free(be);
    return rc;
}

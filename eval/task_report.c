/*
 * eval/task_report.c - the statistics of task accuracy (Wilson's interval, McNemar's exact test
 * of a paired difference) and the JSON report.
 */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>

#include "eval/task_internal.h"

void sqz_wilson95(int64_t k, int64_t n, double *lo, double *hi) {
    if (n <= 0) {
        *lo = 0, *hi = 1;
        return;
    }
    /* llama-perplexity's hellaswag_score: Wilson score interval */
    const double za = 1.95996398454, f = (double)k / (double)n, z = za * za / (double)n;
    const double cnf = z * sqrt((double)n * (4.0 * f * (1 - f) + z)) / (za + za);
    *lo = (f + z * 0.5 - cnf) / (1.0 + z);
    *hi = (f + z * 0.5 + cnf) / (1.0 + z);
}

double sqz_mcnemar_exact(int64_t b, int64_t c) {
    const int64_t n = b + c, k = b < c ? b : c;
    if (n <= 0) return 1.0;
    /* 2 * sum_{i<=k} C(n, i) / 2^n, each term in logs */
    double s = 0, ln2n = (double)n * log(2.0), lgn = lgamma((double)n + 1);
    for (int64_t i = 0; i <= k; i++) s += exp(lgn - lgamma((double)i + 1) - lgamma((double)(n - i) + 1) - ln2n);
    return 2 * s < 1 ? 2 * s : 1.0;
}

sqz_status sqz_task_compare(const sqz_task_result *m, const sqz_task_result *b, bool norm, sqz_task_delta *d) {
    memset(d, 0, sizeof *d);
    SQZ_RETURN_IF(m->n != b->n || !m->outcomes || !b->outcomes, SQZ_ERR_INVALID_ARG,
                  "tasks: comparing %lld tasks with %lld", (long long)m->n, (long long)b->n);
    int64_t same = 0;
    for (int64_t i = 0; i < m->n; i++) {
        const sqz_task_outcome *x = &m->outcomes[i], *y = &b->outcomes[i];
        bool a = norm ? x->correct_norm : x->correct, c = norm ? y->correct_norm : y->correct;
        d->both += a && c;
        d->only_model += a && !c;
        d->only_base += !a && c;
        d->neither += !a && !c;
        same += (norm ? x->choice_norm == y->choice_norm : x->choice == y->choice);
    }
    d->n = m->n;
    d->delta = (double)(d->only_model - d->only_base) / (double)(m->n ? m->n : 1);
    d->p_value = sqz_mcnemar_exact(d->only_model, d->only_base);
    d->agree = (double)same / (double)(m->n ? m->n : 1);
    return SQZ_OK;
}

static void add_acc(cJSON *o, const sqz_task_result *r) {
    cJSON_AddNumberToObject(o, "n", (double)r->n);
    cJSON_AddNumberToObject(o, "correct", (double)r->correct);
    cJSON_AddNumberToObject(o, "accuracy", r->accuracy);
    double ci[2] = {r->ci_lo, r->ci_hi};
    cJSON_AddItemToObject(o, "ci95", cJSON_CreateDoubleArray(ci, 2));
    if (r->kind == SQZ_TASK_JSONL) {
        cJSON_AddNumberToObject(o, "correct_norm", (double)r->correct_norm);
        cJSON_AddNumberToObject(o, "accuracy_norm", r->accuracy_norm);
        double cn[2] = {r->ci_norm_lo, r->ci_norm_hi};
        cJSON_AddItemToObject(o, "ci95_norm", cJSON_CreateDoubleArray(cn, 2));
    }
    cJSON_AddNumberToObject(o, "ties", (double)r->n_ties);
    cJSON_AddNumberToObject(o, "random_chance", r->n_choices ? (double)r->n / (double)r->n_choices : 0);
    cJSON_AddStringToObject(o, "activations", r->activations == SQZ_ACTIVATIONS_Q8 ? "q8" : "f32");
    cJSON_AddNumberToObject(o, "seconds", r->seconds);
    cJSON_AddNumberToObject(o, "tokens", (double)r->tokens);
}

/* Each task's choice, whether it was right, and its margin over the runner-up. */
static void add_outcomes(cJSON *o, const sqz_task_result *r) {
    cJSON *c = cJSON_AddArrayToObject(o, "choices"), *k = cJSON_AddArrayToObject(o, "right");
    cJSON *m = cJSON_AddArrayToObject(o, "margins");
    for (int64_t i = 0; c && k && m && i < r->n; i++) {
        const sqz_task_outcome *t = &r->outcomes[i];
        cJSON_AddItemToArray(c, cJSON_CreateNumber(t->choice));
        cJSON_AddItemToArray(k, cJSON_CreateNumber(t->correct));
        double g = t->best - t->second;
        cJSON_AddItemToArray(m, isfinite(g) ? cJSON_CreateNumber(g) : cJSON_CreateNull());
    }
}

char *sqz_task_report_json(const sqz_task_result *r, const char *file, const char *model, const sqz_task_result *base,
                           const char *base_model, const sqz_task_delta *d) {
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    cJSON_AddStringToObject(o, "task", sqz_task_kind_name(r->kind));
    if (file) cJSON_AddStringToObject(o, "file", file);
    if (model) cJSON_AddStringToObject(o, "model", model);
    add_acc(o, r);
    add_outcomes(o, r);
    if (base && d) {
        cJSON *b = cJSON_AddObjectToObject(o, "base");
        if (b && base_model) cJSON_AddStringToObject(b, "model", base_model);
        if (b) add_acc(b, base);
        if (b) add_outcomes(b, base);
        cJSON_AddNumberToObject(o, "delta", d->delta);
        cJSON_AddNumberToObject(o, "mcnemar_p", d->p_value);
        cJSON_AddNumberToObject(o, "both", (double)d->both);
        cJSON_AddNumberToObject(o, "only_model", (double)d->only_model);
        cJSON_AddNumberToObject(o, "only_base", (double)d->only_base);
        cJSON_AddNumberToObject(o, "neither", (double)d->neither);
        cJSON_AddNumberToObject(o, "agree", d->agree);
    }
    char *s = cJSON_Print(o);
    cJSON_Delete(o);
    return s;
}

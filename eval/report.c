/*
 * eval/report.c - the evaluation report as JSON.
 */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>

#include "eval/eval_internal.h"

/* JSON has no NaN/inf: they become null. */
static bool add_num(cJSON *o, const char *k, double v) {
    return isfinite(v) ? cJSON_AddNumberToObject(o, k, v) != NULL : cJSON_AddNullToObject(o, k) != NULL;
}

char *sqz_eval_report_json(const sqz_eval_result *r, const char *model, const char *base, const char *text) {
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    bool ok = true;
    if (model) ok &= cJSON_AddStringToObject(o, "model", model) != NULL;
    if (base) ok &= cJSON_AddStringToObject(o, "base", base) != NULL;
    if (text) ok &= cJSON_AddStringToObject(o, "text", text) != NULL;
    if (r->is_encoder) {
        ok &= add_num(o, "n_sentences", (double)r->n_sentences);
        ok &= add_num(o, "cos_mean", r->cos_mean);
        ok &= add_num(o, "cos_p1", r->cos_p1);
        ok &= add_num(o, "cos_min", r->cos_min);
        ok &= add_num(o, "tokens", (double)r->n_tokens);
    } else {
        ok &= add_num(o, "ppl", r->ppl);
        ok &= add_num(o, "ppl_stderr", r->ppl_stderr);
        ok &= add_num(o, "nll_mean", r->nll_mean);
        ok &= add_num(o, "tokens_scored", (double)r->tokens_scored);
        ok &= add_num(o, "n_chunks", (double)r->n_chunks);
        ok &= add_num(o, "ctx", (double)r->ctx);
        ok &= add_num(o, "n_tokens", (double)r->n_tokens);
        ok &= cJSON_AddStringToObject(o, "activations", r->activations == SQZ_ACTIVATIONS_Q8 ? "q8" : "f32") != NULL;
        if (r->n_excluded) ok &= add_num(o, "n_excluded", (double)r->n_excluded);
        if (r->has_base) {
            ok &= add_num(o, "ppl_base", r->ppl_base);
            ok &= add_num(o, "ppl_base_stderr", r->ppl_base_stderr);
            ok &= add_num(o, "delta_ppl", r->delta_ppl);
            ok &= add_num(o, "kld_mean", r->kld_mean);
            ok &= add_num(o, "kld_stderr", r->kld_stderr);
            ok &= add_num(o, "kld_p99", r->kld_p99);
            ok &= add_num(o, "kld_p999", r->kld_p999);
            ok &= add_num(o, "kld_max", r->kld_max);
            ok &= add_num(o, "top1_agree", r->top1_agree);
            ok &= add_num(o, "rms_dp", r->rms_dp);
            ok &= add_num(o, "max_dp", r->max_dp);
        }
    }
    ok &= add_num(o, "seconds", r->seconds);
    ok &= add_num(o, "tokens_per_s", r->tokens_per_s);
    char *s = ok ? cJSON_Print(o) : NULL;
    cJSON_Delete(o);
    return s;
}

/*
 * compress/report.c - the compress report as JSON.
 */
#include <cjson/cJSON.h>
#include <stdlib.h>

#include "compress/compress_internal.h"
#include "sqz/prune.h"

/* JSON has no NaN/inf: they become null. */
static bool num(cJSON *o, const char *k, double v) {
    return isfinite(v) ? cJSON_AddNumberToObject(o, k, v) != NULL : cJSON_AddNullToObject(o, k) != NULL;
}

/* "stages": [{"pass", "spec", "seconds", "note"}] and the recipe as one line. */
static bool add_stages(cJSON *o, const sqz_compress_report *r) {
    bool ok = cJSON_AddStringToObject(o, "recipe", r->recipe) != NULL;
    cJSON *a = cJSON_AddArrayToObject(o, "stages");
    ok &= a != NULL;
    for (int64_t i = 0; a && ok && i < r->n_stages; i++) {
        const sqz_stage_report *st = &r->stages[i];
        cJSON *e = cJSON_CreateObject();
        if (!e || !cJSON_AddItemToArray(a, e)) {
            cJSON_Delete(e);
            return false;
        }
        ok &= cJSON_AddStringToObject(e, "pass", st->pass) != NULL;
        ok &= cJSON_AddStringToObject(e, "spec", st->spec) != NULL;
        ok &= num(e, "seconds", st->seconds);
        if (st->note[0]) ok &= cJSON_AddStringToObject(e, "note", st->note) != NULL;
    }
    return ok;
}

/* "eval": the result against the original, when it was evaluated. */
static bool add_eval(cJSON *o, const sqz_compress_eval *e, const char *model, const char *out) {
    if (!e->done) return true;
    cJSON *v = cJSON_AddObjectToObject(o, "eval");
    if (!v) return false;
    bool ok = cJSON_AddStringToObject(v, "text", e->text) != NULL;
    ok &= num(v, "ctx", (double)e->ctx);
    ok &= num(v, "chunks", (double)e->n_chunks);
    ok &= num(v, "held_out", (double)e->n_held_out);
    ok &= num(v, "tokens_scored", (double)e->tokens_scored);
    if (e->encoder) {
        ok &= num(v, "cos_mean", e->cos_mean);
        ok &= num(v, "cos_min", e->cos_min);
    } else {
        ok &= num(v, "ppl_base", e->ppl_base);
        ok &= num(v, "ppl", e->ppl);
        ok &= num(v, "delta_ppl", e->delta_ppl);
        ok &= num(v, "kld_mean", e->kld_mean);
        ok &= num(v, "kld_p99", e->kld_p99);
        ok &= num(v, "top1", e->top1);
    }
    if (e->held_windows > 0) {
        ok &= num(v, "held_windows", (double)e->held_windows);
        ok &= num(v, "held_ctx", (double)e->held_ctx);
        ok &= num(v, "held_seed", (double)e->held_seed);
    }
    ok &= num(v, "seconds", e->seconds);
    char cmd[2048]; /* `sqz eval` reproduces these figures; the paths fit (text 256, tokenizer 256) */
    const size_t need = model && out ? sqz_compress_eval_command(e, model, out, cmd, sizeof cmd) : 0;
    if (need > 0 && need < sizeof cmd) ok &= cJSON_AddStringToObject(v, "command", cmd) != NULL;
    return ok;
}

/* "eval_task": the result and the original on tasks, when evaluated. */
static bool add_tasks(cJSON *o, const sqz_compress_tasks *t) {
    if (!t->done) return true;
    cJSON *v = cJSON_AddObjectToObject(o, "eval_task");
    if (!v) return false;
    bool ok = cJSON_AddStringToObject(v, "task", t->kind) != NULL && cJSON_AddStringToObject(v, "file", t->file);
    ok &= num(v, "n", (double)t->n);
    ok &= num(v, "correct", (double)t->correct);
    ok &= num(v, "accuracy", t->accuracy);
    ok &= num(v, "correct_base", (double)t->correct_base);
    ok &= num(v, "accuracy_base", t->accuracy_base);
    ok &= num(v, "delta", t->delta);
    ok &= num(v, "mcnemar_p", t->p_value);
    ok &= num(v, "agree", t->agree);
    ok &= num(v, "ties", (double)t->ties);
    if (t->has_norm) {
        ok &= num(v, "correct_norm", (double)t->correct_norm);
        ok &= num(v, "correct_norm_base", (double)t->correct_norm_base);
        ok &= num(v, "delta_norm", t->delta_norm);
        ok &= num(v, "mcnemar_p_norm", t->p_norm);
    }
    ok &= num(v, "seconds", t->seconds);
    return ok;
}

/* "layerdrop": the blocks' scores, the choice and the compensation maps, when a drop-layers
 * stage measured. */
static bool add_layer_scores(cJSON *v, const sqz_layerdrop_result *d) {
    cJSON *a = cJSON_AddArrayToObject(v, "layers");
    bool ok = a != NULL;
    for (int32_t i = 0; a && ok && i < d->n_layers; i++) {
        const sqz_layerdrop_layer *l = &d->layers[i];
        cJSON *e = cJSON_CreateObject();
        if (!e || !cJSON_AddItemToArray(a, e)) {
            cJSON_Delete(e);
            return false;
        }
        ok &= num(e, "layer", l->layer);
        ok &= num(e, "bi", l->bi);
        ok &= num(e, "angular", l->angular);
        ok &= num(e, "kld", l->kld);
        ok &= num(e, "top1", l->top1);
        ok &= num(e, "removed_step", l->step);
    }
    cJSON *c = cJSON_AddArrayToObject(v, "compensation");
    ok &= c != NULL;
    for (int32_t i = 0; c && ok && i < d->n_comp; i++) {
        cJSON *e = cJSON_CreateObject();
        if (!e || !cJSON_AddItemToArray(c, e)) {
            cJSON_Delete(e);
            return false;
        }
        ok &= num(e, "into", d->comp[i].into);
        ok &= num(e, "first", d->comp[i].first);
        ok &= num(e, "last", d->comp[i].last);
        ok &= num(e, "err_before", d->comp[i].err_before);
        ok &= num(e, "err_after", d->comp[i].err_after);
    }
    return ok;
}

static bool add_layerdrop(cJSON *o, const sqz_layerdrop_result *d) {
    if (!d) return true;
    cJSON *v = cJSON_AddObjectToObject(o, "layerdrop");
    if (!v) return false;
    bool ok = cJSON_AddStringToObject(v, "method", sqz_layerdrop_method_name(d->method)) != NULL;
    ok &= cJSON_AddBoolToObject(v, "iterative", d->iterative) != NULL;
    ok &= cJSON_AddBoolToObject(v, "compensated", d->compensated) != NULL;
    ok &= num(v, "blocks_before", d->n_layers);
    cJSON *r = cJSON_AddArrayToObject(v, "removed");
    ok &= r != NULL;
    for (int32_t i = 0; r && ok && i < d->count; i++) ok &= cJSON_AddItemToArray(r, cJSON_CreateNumber(d->removed[i]));
    ok &= num(v, "windows", (double)d->n_windows);
    ok &= num(v, "tokens", (double)d->n_tokens);
    ok &= num(v, "kld_windows", (double)d->kld_windows);
    ok &= num(v, "kld_tokens", (double)d->kld_tokens);
    ok &= num(v, "seconds_score", d->seconds_score);
    ok &= num(v, "seconds_compensation", d->seconds_comp);
    if (d->note[0]) ok &= cJSON_AddStringToObject(v, "note", d->note) != NULL;
    return ok && add_layer_scores(v, d);
}

/* "prune": per layer what the last prune stage removed and the scores it chose by. */
static bool add_prune_layer(cJSON *a, const sqz_prune_layer *l) {
    cJSON *e = cJSON_CreateObject();
    if (!e || !cJSON_AddItemToArray(a, e)) {
        cJSON_Delete(e);
        return false;
    }
    bool ok = num(e, "layer", l->layer);
    ok &= num(e, "heads_before", (double)l->heads_before);
    ok &= num(e, "heads_after", (double)l->heads_after);
    ok &= num(e, "kv_heads_before", (double)l->kv_before);
    ok &= num(e, "kv_heads_after", (double)l->kv_after);
    ok &= num(e, "ffn_before", (double)l->ffn_before);
    ok &= num(e, "ffn_after", (double)l->ffn_after);
    if (l->head_score) {
        cJSON *hs = cJSON_AddArrayToObject(e, "head_scores"), *hr = cJSON_AddArrayToObject(e, "heads_removed");
        ok &= hs && hr;
        for (int64_t h = 0; ok && h < l->heads_before; h++) {
            ok &= cJSON_AddItemToArray(hs, isfinite(l->head_score[h]) ? cJSON_CreateNumber(l->head_score[h])
                                                                       : cJSON_CreateNull());
            if (l->head_removed[h]) ok &= cJSON_AddItemToArray(hr, cJSON_CreateNumber((double)h));
        }
    }
    if (isfinite(l->ffn_q[0])) {
        cJSON *q = cJSON_AddArrayToObject(e, "ffn_score_quartiles");
        ok &= q != NULL;
        for (int k = 0; q && ok && k < 5; k++) ok &= cJSON_AddItemToArray(q, cJSON_CreateNumber(l->ffn_q[k]));
        ok &= num(e, "ffn_score_cut", l->ffn_cut);
        ok &= num(e, "ffn_score_removed_mean", l->ffn_removed_mean);
        ok &= num(e, "ffn_score_kept_mean", l->ffn_kept_mean);
    }
    return ok;
}

static bool add_prune(cJSON *o, const sqz_prune_record *p) {
    if (!p || !p->layers) return true;
    cJSON *v = cJSON_AddObjectToObject(o, "prune");
    if (!v) return false;
    bool ok = cJSON_AddStringToObject(v, "spec", p->spec) != NULL;
    ok &= cJSON_AddStringToObject(v, "score", sqz_prune_score_name(p->score)) != NULL;
    ok &= cJSON_AddStringToObject(v, "compensation", sqz_prune_comp_name(p->comp)) != NULL;
    ok &= num(v, "hidden_before", (double)p->d_before);
    ok &= num(v, "hidden_after", (double)p->d_after);
    cJSON *a = cJSON_AddArrayToObject(v, "layers");
    ok &= a != NULL;
    for (int32_t i = 0; a && ok && i < p->n_layers; i++) ok &= add_prune_layer(a, &p->layers[i]);
    return ok;
}

void sqz_compress_report_counts(const sqz_compress_report *r, int64_t *fallbacks, int64_t *requantized) {
    int64_t f = 0, q = 0;
    for (int64_t i = 0; i < r->n_layers; i++) {
        const sqz_layer_report *l = &r->layers[i];
        sqz_dtype d;
        f += l->fallback_from[0] != 0;
        q += l->quantized && sqz_dtype_from_name(l->source_format, &d) && sqz_dtype_info(d)->is_quantized;
    }
    if (fallbacks) *fallbacks = f;
    if (requantized) *requantized = q;
}

char *sqz_compress_report_json(const sqz_compress_report *r, const char *model, const char *out) {
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    bool ok = true;
    if (model) ok &= cJSON_AddStringToObject(o, "model", model) != NULL;
    if (out) ok &= cJSON_AddStringToObject(o, "output", out) != NULL;
    ok &= cJSON_AddStringToObject(o, "spec", r->spec) != NULL;
    cJSON *t = cJSON_AddObjectToObject(o, "totals");
    ok &= t != NULL;
    if (t) {
        ok &= num(t, "bytes_before", (double)r->bytes_before);
        ok &= num(t, "bytes_after", (double)r->bytes_after);
        ok &= num(t, "ratio", r->bytes_after ? (double)r->bytes_before / (double)r->bytes_after : NAN);
        ok &= num(t, "params", (double)r->params);
        ok &= num(t, "params_quantized", (double)r->params_quantized);
        ok &= num(t, "bpw_quantized", r->bpw_quantized);
        ok &= num(t, "bpw_model", r->bpw_model);
        ok &= num(t, "seconds_total", r->seconds_total);
        ok &= num(t, "seconds_forward", r->seconds_forward);
        ok &= num(t, "seconds_quant", r->seconds_quant);
        ok &= num(t, "seconds_validate", r->seconds_validate);
        ok &= num(t, "activation_bytes", (double)r->activation_bytes);
        ok &= num(t, "calib_windows", (double)r->n_windows);
        ok &= num(t, "calib_ctx", (double)r->ctx);
        ok &= num(t, "blocks_before", (double)r->n_layers_before);
        ok &= num(t, "blocks_after", (double)r->n_layers_after);
        ok &= num(t, "params_after", (double)r->params_after);
        int64_t fallbacks = 0, requantized = 0;
        sqz_compress_report_counts(r, &fallbacks, &requantized);
        ok &= num(t, "fallbacks", (double)fallbacks);     /* layers whose mix type fell back (width) */
        ok &= num(t, "requantized", (double)requantized); /* layers stored quantized in the source, rounded again */
        if (r->device[0]) {
            ok &= cJSON_AddStringToObject(t, "device", r->device) != NULL;
            ok &= num(t, "device_peak_bytes", (double)r->device_peak_bytes);
            ok &= num(t, "device_cap_bytes", (double)r->device_cap_bytes);
        }
    }
    cJSON *ls = cJSON_AddArrayToObject(o, "layers");
    ok &= ls != NULL;
    for (int64_t i = 0; ls && ok && i < r->n_layers; i++) {
        const sqz_layer_report *l = &r->layers[i];
        cJSON *e = cJSON_CreateObject();
        if (!e || !cJSON_AddItemToArray(ls, e)) {
            cJSON_Delete(e);
            ok = false;
            break;
        }
        ok &= cJSON_AddStringToObject(e, "tensor", l->tensor) != NULL;
        ok &= num(e, "layer", l->layer);
        ok &= cJSON_AddStringToObject(e, "role", sqz_role_name(l->role)) != NULL;
        ok &= cJSON_AddBoolToObject(e, "quantized", l->quantized) != NULL;
        ok &= cJSON_AddStringToObject(e, "method", l->method) != NULL;
        ok &= cJSON_AddStringToObject(e, "format", l->format) != NULL;
        if (l->why[0]) ok &= cJSON_AddStringToObject(e, "why", l->why) != NULL;
        ok &= num(e, "n_out", (double)l->n_out);
        ok &= num(e, "n_in", (double)l->n_in);
        ok &= num(e, "bits_per_weight", l->bits_per_weight);
        ok &= num(e, "out_err", l->out_err);
        ok &= num(e, "weight_err", l->weight_err);
        if (l->validated_by[0]) ok &= cJSON_AddStringToObject(e, "validated_by", l->validated_by) != NULL;
        ok &= num(e, "seconds", l->seconds);
        if (l->alpha != 0) ok &= num(e, "alpha", l->alpha);
        if (l->act_scale != 0) ok &= num(e, "act_scale", l->act_scale);
        if (l->fallback_from[0]) ok &= cJSON_AddStringToObject(e, "fallback_from", l->fallback_from) != NULL;
        if (l->source_format[0]) ok &= cJSON_AddStringToObject(e, "source_format", l->source_format) != NULL;
        if (l->heldout_gptq > 0 || l->heldout_imatrix > 0) { /* judged held out (NaN or 0: not) */
            ok &= num(e, "heldout_gptq", l->heldout_gptq);
            ok &= num(e, "heldout_imatrix", l->heldout_imatrix);
        }
    }
    cJSON *bs = cJSON_AddArrayToObject(o, "blocks");
    ok &= bs != NULL;
    for (int64_t i = 0; bs && ok && i < r->n_blocks; i++) {
        const sqz_block_report *b = &r->blocks[i];
        cJSON *e = cJSON_CreateObject();
        if (!e || !cJSON_AddItemToArray(bs, e)) {
            cJSON_Delete(e);
            ok = false;
            break;
        }
        ok &= num(e, "layer", b->layer);
        ok &= num(e, "cos_mean", b->cos_mean);
        ok &= num(e, "cos_min", b->cos_min);
        ok &= num(e, "seconds", b->seconds);
        if (b->expert_tokens) { /* tokens routed to each expert, in expert order */
            cJSON *et = cJSON_CreateFloatArray(b->expert_tokens, (int)b->n_expert);
            ok &= et && cJSON_AddItemToObject(e, "expert_tokens", et);
        }
    }
    ok &= add_stages(o, r);
    ok &= add_eval(o, &r->eval, model, out);
    ok &= add_tasks(o, &r->tasks);
    ok &= add_layerdrop(o, r->layerdrop);
    ok &= add_prune(o, r->prune);
    char *s = ok ? cJSON_Print(o) : NULL;
    cJSON_Delete(o);
    return s;
}

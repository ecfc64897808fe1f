/*
 * compress/recipe.c - recipes: ordered stages (a pass + its parsed SPEC), from the command line
 * (sqz_recipe_add) or a JSON file (sqz_recipe_load), and back to JSON for the report.
 * Both forms go through the same generic parser and the pass's check.
 */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compress/compress_internal.h"
#include "sqz/io.h"

static const char *pass_names(char *buf, size_t cap) {
    int n = 0;
    const sqz_pass *const *p = sqz_passes(&n);
    buf[0] = 0;
    for (int i = 0; i < n; i++) {
        if (i) strncat(buf, ", ", cap - strlen(buf) - 1);
        strncat(buf, p[i]->name, cap - strlen(buf) - 1);
    }
    return buf;
}

sqz_status sqz_recipe_add(sqz_recipe *r, const char *pass, const char *spec) {
    char names[256], label[64];
    const sqz_pass *p = sqz_pass_find(pass);
    SQZ_RETURN_IF(!p, SQZ_ERR_INVALID_ARG, "unknown pass '%s' (%s)", pass ? pass : "", pass_names(names, sizeof names));
    SQZ_RETURN_IF(!spec || strlen(spec) >= sizeof r->stages[0].spec, SQZ_ERR_INVALID_ARG, "--%s: %s", p->name,
                  spec ? "SPEC too long" : "no SPEC");
    void *args = sqz__calloc(1, p->args_size);
    if (!args) return SQZ_ERR_NOMEM;
    uint64_t given = 0;
    if (p->label) snprintf(label, sizeof label, "%s", p->label);
    else snprintf(label, sizeof label, "--%s", p->name);
    sqz_status st = sqz_opts_defaults(p->opts, p->n_opts, args);
    if (st == SQZ_OK) st = sqz_opts_parse_spec(p->opts, p->n_opts, spec, label, args, &given);
    if (st == SQZ_OK && p->check) st = p->check(args, given, spec);
    sqz_stage *ns = st == SQZ_OK ? sqz__realloc(r->stages, (size_t)(r->n + 1) * sizeof *ns) : NULL;
    if (st == SQZ_OK && !ns) st = SQZ_ERR_NOMEM;
    if (st != SQZ_OK) {
        free(args);
        return st;
    }
    r->stages = ns;
    sqz_stage *s = &r->stages[r->n++];
    memset(s, 0, sizeof *s);
    s->pass = p;
    snprintf(s->spec, sizeof s->spec, "%s", spec);
    s->args = args;
    return SQZ_OK;
}

void sqz_recipe_free(sqz_recipe *r) {
    if (!r) return;
    for (int i = 0; i < r->n; i++) free(r->stages[i].args);
    free(r->stages);
    memset(r, 0, sizeof *r);
}

/* An object of options {"format": "int4", "damp": 0.02, "flag": true} as a SPEC, positional
 * value first. */
static sqz_status object_spec(const sqz_pass *p, const cJSON *obj, const char *file, int idx, char *out, size_t cap) {
    size_t k = 0;
    out[0] = 0;
    for (int pos = 1; pos >= 0; pos--) { /* the positional row first, then the rest */
        for (const cJSON *it = obj->child; it; it = it->next) {
            const sqz_opt *o = sqz_opts_find(p->opts, p->n_opts, it->string);
            SQZ_RETURN_IF(!o, SQZ_ERR_FORMAT, "%s: stage %d (%s): unknown option '%s'", file, idx, p->name, it->string);
            if (!!(o->flags & SQZ_OPT_POSITIONAL) != pos) continue;
            char v[128];
            SQZ_RETURN_IF(cJSON_IsString(it) && strlen(it->valuestring) >= sizeof v, SQZ_ERR_FORMAT,
                          "%s: stage %d (%s): option '%s' is longer than %zu bytes", file, idx, p->name, it->string,
                          sizeof v - 1);
            if (cJSON_IsString(it)) snprintf(v, sizeof v, "%s", it->valuestring);
            else if (cJSON_IsNumber(it) && isfinite(it->valuedouble)) snprintf(v, sizeof v, "%.17g", it->valuedouble);
            else if (cJSON_IsTrue(it) && o->type == SQZ_OPT_FLAG) v[0] = 0;
            else return SQZ_ERROR(SQZ_ERR_FORMAT, "%s: stage %d (%s): option '%s' must be a string or a number%s", file,
                                  idx, p->name, it->string, o->type == SQZ_OPT_FLAG ? " (or true)" : "");
            int w = pos ? snprintf(out + k, cap - k, "%s", v)
                        : v[0] ? snprintf(out + k, cap - k, "%s%s=%s", k ? ":" : "", o->name, v)
                               : snprintf(out + k, cap - k, "%s%s", k ? ":" : "", o->name);
            SQZ_RETURN_IF(w < 0 || (size_t)w >= cap - k, SQZ_ERR_FORMAT, "%s: stage %d (%s): too long", file, idx,
                          p->name);
            k += (size_t)w;
        }
    }
    return SQZ_OK;
}

static sqz_status load_stage(sqz_recipe *r, const cJSON *st, const char *file, int idx) {
    char names[256], spec[256];
    SQZ_RETURN_IF(!cJSON_IsObject(st) || !st->child || st->child->next, SQZ_ERR_FORMAT,
                  "%s: stage %d must be an object with one key, the pass (%s)", file, idx, pass_names(names, sizeof names));
    const cJSON *v = st->child;
    const sqz_pass *p = sqz_pass_find(v->string);
    SQZ_RETURN_IF(!p, SQZ_ERR_FORMAT, "%s: stage %d: unknown pass '%s' (%s)", file, idx, v->string,
                  pass_names(names, sizeof names));
    /* a SPEC that does not fit is refused, never cut (a cut list or number would parse) */
    SQZ_RETURN_IF(cJSON_IsString(v) && strlen(v->valuestring) >= sizeof spec, SQZ_ERR_FORMAT,
                  "%s: stage %d (%s): SPEC of %zu bytes (at most %zu)", file, idx, p->name, strlen(v->valuestring),
                  sizeof spec - 1);
    SQZ_RETURN_IF(cJSON_IsNumber(v) && !isfinite(v->valuedouble), SQZ_ERR_FORMAT,
                  "%s: stage %d (%s): the number is out of range", file, idx, p->name);
    if (cJSON_IsString(v)) snprintf(spec, sizeof spec, "%s", v->valuestring);
    else if (cJSON_IsNumber(v)) snprintf(spec, sizeof spec, "%.17g", v->valuedouble);
    else if (cJSON_IsObject(v)) SQZ_TRY(object_spec(p, v, file, idx, spec, sizeof spec));
    else return SQZ_ERROR(SQZ_ERR_FORMAT, "%s: stage %d (%s): the value must be a SPEC string or an object of options",
                          file, idx, p->name);
    sqz_status s = sqz_recipe_add(r, p->name, spec);
    if (s != SQZ_OK) sqz__error_prefix("%s: stage %d", file, idx);
    return s;
}

sqz_status sqz_recipe_load(sqz_recipe *r, const char *path) {
    char *text = NULL;
    size_t len = 0;
    SQZ_TRY(sqz_read_file(path, (size_t)1 << 20, &text, &len));
    sqz_status st = sqz__recipe_parse(r, path, text, len);
    free(text);
    return st;
}

sqz_status sqz__recipe_parse(sqz_recipe *r, const char *path, const char *text, size_t len) {
    cJSON *root = cJSON_ParseWithLength(text, len);
    SQZ_RETURN_IF(!root, SQZ_ERR_FORMAT, "%s: not valid JSON", path);
    sqz_status st = SQZ_OK;
    const cJSON *ver = cJSON_GetObjectItemCaseSensitive(root, "sqz_recipe");
    const cJSON *stages = cJSON_GetObjectItemCaseSensitive(root, "stages");
    if (!cJSON_IsObject(root) || !cJSON_IsArray(stages))
        st = SQZ_ERROR(SQZ_ERR_FORMAT, "%s: a recipe is {\"sqz_recipe\": 1, \"stages\": [...]}", path);
    else if (ver && !(cJSON_IsNumber(ver) && ver->valuedouble == 1))
        st = SQZ_ERROR(SQZ_ERR_FORMAT, "%s: recipe version %s is not supported (1)", path,
                       cJSON_IsNumber(ver) ? "other than 1" : "not a number");
    for (const cJSON *it = root->child; st == SQZ_OK && it; it = it->next)
        if (strcmp(it->string, "sqz_recipe") && strcmp(it->string, "stages"))
            st = SQZ_ERROR(SQZ_ERR_FORMAT, "%s: unknown key '%s' (sqz_recipe, stages)", path, it->string);
    if (st == SQZ_OK && cJSON_GetArraySize(stages) == 0) st = SQZ_ERROR(SQZ_ERR_FORMAT, "%s: no stages", path);
    const int n0 = r->n;
    int idx = 0;
    for (const cJSON *s = stages ? stages->child : NULL; st == SQZ_OK && s; s = s->next) st = load_stage(r, s, path, idx++);
    cJSON_Delete(root);
    if (st != SQZ_OK) { /* r unchanged on failure */
        for (int i = n0; i < r->n; i++) free(r->stages[i].args);
        r->n = n0;
    }
    return st;
}

const sqz_compress_spec *sqz_stage_quant_spec(const sqz_stage *s) {
    return s && s->pass->quant_spec ? s->pass->quant_spec(s->args) : NULL;
}

bool sqz__stage_steps(const sqz_stage *s) {
    return s->pass->model_step && (!s->pass->steps || s->pass->steps(s->args));
}

bool sqz__stage_joins_previous(const sqz_recipe *r, int k) {
    return k > 0 && r->stages[k].pass->run_block && !sqz__stage_steps(&r->stages[k]) &&
           !r->stages[k - 1].pass->reshapes;
}

sqz_status sqz__recipe_link(const sqz_recipe *r, sqz_stage_link *links) {
    memset(links, 0, (size_t)r->n * sizeof *links);
    for (int k = 0; k < r->n; k++)
        if (r->stages[k].pass->link) SQZ_TRY(r->stages[k].pass->link(r, k, links));
    return SQZ_OK;
}

sqz_status sqz_recipe_check_model(const sqz_recipe *r, const sqz_model *m, bool have_windows) {
    if (!r || r->n == 0) return SQZ_OK;
    sqz_stage_link *links = sqz__calloc((size_t)r->n, sizeof *links);
    if (!links) return SQZ_ERR_NOMEM;
    sqz_status st = sqz__recipe_link(r, links);
    free(links);
    int64_t n_layers = m->hp.n_layers;
    for (int k = 0; k < r->n && st == SQZ_OK; k++)
        if (r->stages[k].pass->check_model) st = r->stages[k].pass->check_model(&r->stages[k], m, &n_layers, have_windows);
    return st;
}

sqz_status sqz_recipe_check_uniform(const sqz_recipe *r, const sqz_model *m) {
    const sqz_layer_dims *l0 = &m->layers[0];
    for (int64_t l = 1; l < m->hp.n_layers; l++) {
        const sqz_layer_dims *ld = &m->layers[l];
        SQZ_RETURN_IF(ld->n_heads != l0->n_heads || ld->n_kv_heads != l0->n_kv_heads || ld->d_ff != l0->d_ff,
                      SQZ_ERR_INVALID_ARG, "the model's layer %lld has %lld heads, %lld KV heads, d_ff %lld but "
                      "layer 0 has %lld, %lld, %lld, which a plain HF config.json cannot hold: write GGUF (--to gguf)",
                      (long long)l, (long long)ld->n_heads, (long long)ld->n_kv_heads, (long long)ld->d_ff,
                      (long long)l0->n_heads, (long long)l0->n_kv_heads, (long long)l0->d_ff);
    }
    for (int k = 0; r && k < r->n; k++)
        if (r->stages[k].pass->check_uniform) SQZ_TRY(r->stages[k].pass->check_uniform(&r->stages[k], m));
    const sqz_family_info *fi = sqz_family_get(m->hp.family);
    for (int k = 0; r && fi && fi->hf_fused && k < r->n; k++) {
        const sqz_compress_spec *q = sqz_stage_quant_spec(&r->stages[k]);
        SQZ_RETURN_IF(q && !sqz_qformat_is_gguf(q->q.target.fmt), SQZ_ERR_INVALID_ARG,
                      "%s: %s's HF files fuse q|k|v and gate|up into one tensor each, which sqz's int8/int4 HF "
                      "layouts do not hold fused: write GGUF (q8_0, q4_k_m, ...)", r->stages[k].spec, fi->name);
    }
    return SQZ_OK;
}

char *sqz_recipe_json(const sqz_recipe *r) {
    cJSON *root = cJSON_CreateObject(), *arr = NULL;
    bool ok = root && cJSON_AddNumberToObject(root, "sqz_recipe", 1) && (arr = cJSON_AddArrayToObject(root, "stages"));
    for (int i = 0; ok && i < r->n; i++) {
        cJSON *o = cJSON_CreateObject();
        ok = o && cJSON_AddStringToObject(o, r->stages[i].pass->name, r->stages[i].spec);
        if (o) cJSON_AddItemToArray(arr, o);
    }
    char *s = ok ? cJSON_Print(root) : NULL;
    cJSON_Delete(root);
    return s;
}

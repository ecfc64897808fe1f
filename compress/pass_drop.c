/*
 * compress/pass_drop.c - `--drop-layers SPEC`: removes whole blocks with the model-editing API
 * (sqz/edit.h), which renumbers the rest. The blocks are explicit indices of the model as it
 * is when the stage runs ("3,4", "2-5"), or N (or P%) blocks chosen by a method of layerdrop/
 * (sqz/layerdrop.h: "4:bi", "25%:kld:iterative", "8:angular:replaceme", the baselines
 * "4:last" and "4:random:seed=3"), optionally compensated without training (replaceme). The
 * scored choice calibrates itself on the stage's windows; its scores and choice go to the
 * report (rep->layerdrop).
 */
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "compress/compress_internal.h"
#include "prune/sparsity_internal.h"
#include "prune/prune_internal.h"
#include "sqz/edit.h"
#include "sqz/layerdrop.h"

const sqz_opt sqz__drop_opts[SQZ__DROP_N_OPTS] = {
    {.name = "layers", .type = SQZ_OPT_STRING, .offset = offsetof(sqz__drop_args, list),
     .flags = SQZ_OPT_POSITIONAL | SQZ_OPT_REQUIRED, .metavar = "LIST|N|P%",
     .help = "without a method: block indices to remove (3,4 or 2-5); with one: how many blocks, N or P% of "
             "them (4:bi, 25%:kld)"},
    {.name = "method", .type = SQZ_OPT_CHOICE, .offset = offsetof(sqz__drop_args, method), .flags = SQZ_OPT_BARE,
     .choices = "list|bi|angular|kld|last|random", .def = "list",
     .help = "how the blocks are chosen: the LIST; lowest block influence 1 - E[cos(in, out)] (ShortGPT); the run "
             "of N consecutive blocks of lowest angular distance (Gromov et al.); lowest measured KLD of the model "
             "without the block alone; the last N (baseline); N at random (baseline). bi, angular, kld need --calib"},
    {.name = "iterative", .type = SQZ_OPT_FLAG, .offset = offsetof(sqz__drop_args, iterative),
     .help = "bi, angular, kld: remove one block, score the shortened model again, repeat"},
    {.name = "compensation", .type = SQZ_OPT_CHOICE, .offset = offsetof(sqz__drop_args, compensation),
     .flags = SQZ_OPT_BARE, .choices = "no-compensation|replaceme", .def = "no-compensation",
     .help = "replaceme: fold a least-squares linear map (fitted on the --calib windows) into the down projection "
             "of the block before each removed run"},
    {.name = "all-scores", .type = SQZ_OPT_FLAG, .offset = offsetof(sqz__drop_args, all_scores),
     .help = "also measure every block's KLD for the report when the method does not (costly)"},
    {.name = "seed", .type = SQZ_OPT_INT, .offset = offsetof(sqz__drop_args, seed), .min = 0, .max = 4e18,
     .def = "1", .help = "random: the seed"},
    {.name = "kld-windows", .type = SQZ_OPT_INT, .offset = offsetof(sqz__drop_args, kld_windows), .min = 0,
     .max = 1 << 20, .def = "8", .metavar = "K", .help = "KLD scores on the first K calibration windows (0 = all)"},
    {.name = "ridge", .type = SQZ_OPT_FLOAT, .offset = offsetof(sqz__drop_args, ridge), .flags = SQZ_OPT_OPEN_MIN,
     .min = 0, .max = 1, .def = "0.0001", .help = "replaceme: ridge towards the identity, relative to tr(M^T M) / d"},
};

static int cmp_i32(const void *a, const void *b) {
    const int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* One item "N" or "A-B" of the list into a->layers. */
static sqz_status drop_item(sqz__drop_args *a, const char *item, size_t len, const char *spec) {
    char buf[32], *end;
    SQZ_RETURN_IF(len == 0 || len >= sizeof buf, SQZ_ERR_INVALID_ARG,
                  "--drop-layers '%s': empty or too long item (block indices such as 3,4 or 2-5)", spec);
    memcpy(buf, item, len);
    buf[len] = 0;
    long lo = strtol(buf, &end, 10), hi = lo;
    if (*end == '-' && end != buf) hi = strtol(end + 1, &end, 10);
    SQZ_RETURN_IF(*end || buf[0] == '-' || lo < 0 || hi < lo || hi > 65535, SQZ_ERR_INVALID_ARG,
                  "--drop-layers '%s': bad item '%s' (block indices such as 3,4 or 2-5)", spec, buf);
    for (long l = lo; l <= hi; l++) {
        SQZ_RETURN_IF(a->n >= (int)(sizeof a->layers / sizeof a->layers[0]), SQZ_ERR_INVALID_ARG,
                      "--drop-layers '%s': more than %d blocks", spec, (int)(sizeof a->layers / sizeof a->layers[0]));
        a->layers[a->n++] = (int32_t)l;
    }
    return SQZ_OK;
}

/* The explicit list into a->layers, sorted, distinct. */
static sqz_status parse_list(sqz__drop_args *a, const char *spec) {
    a->n = 0;
    for (const char *p = a->list; p;) {
        const char *e = strchr(p, ',');
        SQZ_TRY(drop_item(a, p, e ? (size_t)(e - p) : strlen(p), spec));
        p = e ? e + 1 : NULL;
    }
    qsort(a->layers, (size_t)a->n, sizeof a->layers[0], cmp_i32);
    for (int i = 1; i < a->n; i++)
        SQZ_RETURN_IF(a->layers[i] == a->layers[i - 1], SQZ_ERR_INVALID_ARG, "--drop-layers '%s': block %d listed twice",
                      spec, (int)a->layers[i]);
    return SQZ_OK;
}

/* With a method: the count N or the percentage P% into a->count / a->percent. */
static sqz_status parse_count(sqz__drop_args *a, const char *spec) {
    char *end;
    const double v = strtod(a->list, &end);
    const bool pct = *end == '%' && end[1] == 0;
    SQZ_RETURN_IF(end == a->list || (*end && !pct) || !isfinite(v), SQZ_ERR_INVALID_ARG,
                  "--drop-layers '%s': part '%s': with a method, how many blocks: N or P%% (4:bi, 25%%:kld)", spec,
                  a->list);
    if (pct) {
        SQZ_RETURN_IF(!(v > 0 && v < 100), SQZ_ERR_INVALID_ARG,
                      "--drop-layers '%s': part '%s': a percentage in (0, 100) (the model keeps a block)", spec, a->list);
        a->percent = v;
        return SQZ_OK;
    }
    SQZ_RETURN_IF(v < 1 || v > 65535 || v != floor(v), SQZ_ERR_INVALID_ARG,
                  "--drop-layers '%s': part '%s': a whole number of blocks >= 1", spec, a->list);
    a->count = (int32_t)v;
    return SQZ_OK;
}

sqz_status sqz__drop_check(void *args, uint64_t given, const char *spec) {
    (void)given;
    sqz__drop_args *a = args;
    const bool list = a->method == SQZ_LAYERDROP_LIST;
    SQZ_TRY(list ? parse_list(a, spec) : parse_count(a, spec));
    SQZ_RETURN_IF(a->iterative && (list || a->method == SQZ_LAYERDROP_LAST || a->method == SQZ_LAYERDROP_RANDOM),
                  SQZ_ERR_INVALID_ARG, "--drop-layers '%s': part 'iterative' needs a scored method (bi, angular, kld)",
                  spec);
    a->list = NULL; /* points into the parser's copy: not kept */
    return SQZ_OK;
}

/* How many blocks the stage removes from a model of L blocks; a usage error naming the part. */
static sqz_status drop_count(const sqz__drop_args *a, const char *spec, int64_t L, int32_t *n) {
    if (a->method == SQZ_LAYERDROP_LIST) {
        for (int i = 0; i < a->n; i++)
            SQZ_RETURN_IF(a->layers[i] >= L, SQZ_ERR_INVALID_ARG,
                          "--drop-layers '%s': block %d does not exist (the model has blocks 0..%lld at this stage)",
                          spec, (int)a->layers[i], (long long)L - 1);
        *n = a->n;
    } else {
        *n = a->percent > 0 ? (int32_t)llround(a->percent / 100.0 * (double)L) : a->count;
        if (*n < 1) *n = 1;
    }
    SQZ_RETURN_IF(*n >= L, SQZ_ERR_INVALID_ARG,
                  "--drop-layers '%s': removing %d of %lld blocks leaves none (the model keeps at least one)", spec,
                  (int)*n, (long long)L);
    return SQZ_OK;
}

static bool needs_windows(const sqz__drop_args *a) {
    return a->method == SQZ_LAYERDROP_BI || a->method == SQZ_LAYERDROP_ANGULAR || a->method == SQZ_LAYERDROP_KLD ||
           a->compensation || a->all_scores;
}

sqz_status sqz_recipe_check_model(const sqz_recipe *r, const sqz_model *m, bool have_windows) {
    int64_t L = m->hp.n_layers;
    if (r) SQZ_TRY(sqz__sparsity_check_recipe(r, have_windows));
    for (int i = 0; r && i < r->n; i++) {
        const sqz_stage *s = &r->stages[i];
        if (s->pass->model_step == sqz__prune_model_step) SQZ_TRY(sqz__prune_check_model(s->args, s->spec, m));
        if (s->pass->model_step != sqz__drop_model_step) continue;
        const sqz__drop_args *a = s->args;
        int32_t n = a->n;
        /* a LIST naming a block the model lacks is bad input for this model, found when the
         * stage runs (exit 1, as before); a count is a usage error */
        if (a->method != SQZ_LAYERDROP_LIST) SQZ_TRY(drop_count(a, s->spec, L, &n));
        SQZ_RETURN_IF(needs_windows(a) && !have_windows, SQZ_ERR_INVALID_ARG,
                      "--drop-layers '%s': part '%s' measures the model: give --calib FILE", s->spec,
                      a->compensation ? "replaceme" : a->all_scores ? "all-scores"
                                                                     : sqz_layerdrop_method_name(a->method));
        L -= n;
    }
    return SQZ_OK;
}

/* "removed blocks 3, 4 by bi (30 -> 28 blocks); replaceme into 2" into the stage's note. */
static void note(sqz_pass_ctx *c, const sqz_layerdrop_result *res, int64_t before) {
    char *b = c->stage->note;
    const size_t cap = sizeof c->stage->note;
    int k = snprintf(b, cap, "removed block%s", res->count > 1 ? "s" : "");
    for (int32_t i = 0; i < res->count && k > 0 && (size_t)k < cap; i++)
        k += snprintf(b + k, cap - (size_t)k, "%s %d", i ? "," : "", (int)res->removed[i]);
    if (k > 0 && (size_t)k < cap && res->method != SQZ_LAYERDROP_LIST)
        k += snprintf(b + k, cap - (size_t)k, " by %s%s", sqz_layerdrop_method_name(res->method),
                      res->iterative ? " (iterative)" : "");
    if (k > 0 && (size_t)k < cap)
        k += snprintf(b + k, cap - (size_t)k, " (%lld -> %lld blocks)", (long long)before, (long long)c->m->hp.n_layers);
    for (int32_t i = 0; i < res->n_comp && k > 0 && (size_t)k < cap; i++)
        k += snprintf(b + k, cap - (size_t)k, "%s %d (err %.3f -> %.3f)", i ? "," : "; replaceme into",
                      (int)res->comp[i].into, res->comp[i].err_before, res->comp[i].err_after);
}

sqz_status sqz__drop_model_step(sqz_pass_ctx *c, const void *args) {
    const sqz__drop_args *a = args;
    const int64_t before = c->m->hp.n_layers;
    int32_t n = 0;
    SQZ_TRY(drop_count(a, c->stage->spec, before, &n));
    SQZ_RETURN_IF(needs_windows(a) && !c->w, SQZ_ERR_INVALID_ARG,
                  "--drop-layers '%s': choosing or compensating measures the model: give --calib FILE (a statistics "
                  "file holds no block outputs)", c->stage->spec);
    sqz_layerdrop_opts lo = sqz_layerdrop_default_opts();
    lo.method = (sqz_layerdrop_method)a->method;
    lo.count = n;
    lo.list = a->layers;
    lo.n_list = a->n;
    lo.iterative = a->iterative;
    lo.compensate = a->compensation == 1;
    lo.all_scores = a->all_scores;
    lo.seed = (uint64_t)a->seed;
    lo.kld_windows = a->kld_windows;
    lo.ridge = a->ridge;
    lo.progress = c->o->progress; /* scoring passes */
    lo.progress_user = c->o->progress_user;
    sqz_layerdrop_result *res = sqz__calloc(1, sizeof *res);
    if (!res) return SQZ_ERR_NOMEM;
    /* an explicit list without compensation measures nothing (as before: no forward pass); the
     * baselines are scored when there are windows, for the report */
    const sqz_calib_windows *w = needs_windows(a) || a->method != SQZ_LAYERDROP_LIST ? c->w : NULL;
    sqz_status st = sqz_layerdrop_run(c->m, w, c->session_opts, &lo, res);
    if (st == SQZ_OK) note(c, res, before);
    if (st == SQZ_OK && w) {
        sqz_layerdrop_result_free(c->rep->layerdrop);
        free(c->rep->layerdrop);
        c->rep->layerdrop = res;
        return SQZ_OK;
    }
    sqz_layerdrop_result_free(res);
    free(res);
    return st;
}

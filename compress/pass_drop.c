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
#include "sqz/edit.h"
#include "sqz/layerdrop.h"

/* --drop-layers: explicit blocks (LIST), or N / P% blocks chosen by a method of layerdrop/
 * (sqz/layerdrop.h), optionally iterative and compensated. */
typedef struct drop_args {
    const char *list;     /* as given (points into the stage's SPEC copy only during parsing) */
    int method;           /* sqz_layerdrop_method; SQZ_LAYERDROP_LIST: `layers` are the blocks */
    bool iterative;
    int compensation;     /* 0 none, 1 replaceme */
    bool all_scores;      /* measure every block's KLD for the report too */
    int64_t seed, kld_windows;
    double ridge;
    int32_t count;        /* a method: N blocks, or 0 when given as a percentage */
    double percent;       /* a method: P of "P%" (N = round(P / 100 x blocks)), else 0 */
    sqz_opt_list layers;  /* LIST: the blocks to remove, sorted, distinct */
} drop_args;

static const sqz_opt drop_opts[] = {
    {.name = "layers", .type = SQZ_OPT_STRING, .offset = offsetof(drop_args, list),
     .flags = SQZ_OPT_POSITIONAL | SQZ_OPT_REQUIRED, .metavar = "LIST|N|P%",
     .help = "without a method: block indices to remove (3,4 or 2-5); with one: how many blocks, N or P% of "
             "them (4:bi, 25%:kld)"},
    {.name = "method", .type = SQZ_OPT_CHOICE, .offset = offsetof(drop_args, method), .flags = SQZ_OPT_BARE,
     .choices = "list|bi|angular|kld|last|random", .def = "list",
     .help = "how the blocks are chosen: the LIST; lowest block influence 1 - E[cos(in, out)] (ShortGPT); the run "
             "of N consecutive blocks of lowest angular distance (Gromov et al.); lowest measured KLD of the model "
             "without the block alone; the last N (baseline); N at random (baseline). bi, angular, kld need --calib"},
    {.name = "iterative", .type = SQZ_OPT_FLAG, .offset = offsetof(drop_args, iterative),
     .help = "bi, angular, kld: remove one block, score the shortened model again, repeat"},
    {.name = "compensation", .type = SQZ_OPT_CHOICE, .offset = offsetof(drop_args, compensation),
     .flags = SQZ_OPT_BARE, .choices = "no-compensation|replaceme", .def = "no-compensation",
     .help = "replaceme: fold a least-squares linear map (fitted on the --calib windows) into the down projection "
             "of the block before each removed run"},
    {.name = "all-scores", .type = SQZ_OPT_FLAG, .offset = offsetof(drop_args, all_scores),
     .help = "also measure every block's KLD for the report when the method does not (costly)"},
    {.name = "seed", .type = SQZ_OPT_INT, .offset = offsetof(drop_args, seed), .min = 0, .max = 4e18,
     .def = "1", .help = "random: the seed"},
    {.name = "kld-windows", .type = SQZ_OPT_INT, .offset = offsetof(drop_args, kld_windows), .min = 0,
     .max = 1 << 20, .def = "8", .metavar = "K", .help = "KLD scores on the first K calibration windows (0 = all)"},
    {.name = "ridge", .type = SQZ_OPT_FLOAT, .offset = offsetof(drop_args, ridge), .flags = SQZ_OPT_OPEN_MIN,
     .min = 0, .max = 1, .def = "0.0001", .help = "replaceme: ridge towards the identity, relative to tr(M^T M) / d"},
};

/* With a method: the count N or the percentage P% into a->count / a->percent. */
static sqz_status parse_count(drop_args *a, const char *spec) {
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

static sqz_status drop_check(void *args, uint64_t given, const char *spec) {
    (void)given;
    drop_args *a = args;
    const bool list = a->method == SQZ_LAYERDROP_LIST;
    char what[300];
    snprintf(what, sizeof what, "--drop-layers '%s'", spec);
    SQZ_TRY(list ? sqz_opt_list_parse(a->list, 0, 65535, what, &a->layers) : parse_count(a, spec));
    SQZ_RETURN_IF(a->iterative && (list || a->method == SQZ_LAYERDROP_LAST || a->method == SQZ_LAYERDROP_RANDOM),
                  SQZ_ERR_INVALID_ARG, "--drop-layers '%s': part 'iterative' needs a scored method (bi, angular, kld)",
                  spec);
    a->list = NULL; /* points into the parser's copy: not kept */
    return SQZ_OK;
}

/* How many blocks the stage removes from a model of L blocks; a usage error naming the part. */
static sqz_status drop_count(const drop_args *a, const char *spec, int64_t L, int32_t *n) {
    if (a->method == SQZ_LAYERDROP_LIST) {
        for (int i = 0; i < a->layers.n; i++)
            SQZ_RETURN_IF(a->layers.v[i] >= L, SQZ_ERR_INVALID_ARG,
                          "--drop-layers '%s': block %d does not exist (the model has blocks 0..%lld at this stage)",
                          spec, (int)a->layers.v[i], (long long)L - 1);
        *n = a->layers.n;
    } else {
        *n = a->percent > 0 ? (int32_t)llround(a->percent / 100.0 * (double)L) : a->count;
        if (*n < 1) *n = 1;
    }
    SQZ_RETURN_IF(*n >= L, SQZ_ERR_INVALID_ARG,
                  "--drop-layers '%s': removing %d of %lld blocks leaves none (the model keeps at least one)", spec,
                  (int)*n, (long long)L);
    return SQZ_OK;
}

static bool needs_windows(const drop_args *a) {
    return a->method == SQZ_LAYERDROP_BI || a->method == SQZ_LAYERDROP_ANGULAR || a->method == SQZ_LAYERDROP_KLD ||
           a->compensation || a->all_scores;
}

/* A count must leave a block of the blocks the model has at this stage; a LIST naming a block the
 * model lacks is bad input for this model, found when the stage runs (exit 1); measuring needs
 * windows. */
static sqz_status drop_check_model(const sqz_stage *s, const sqz_model *m, int64_t *n_layers, bool have_windows) {
    (void)m;
    const drop_args *a = s->args;
    int32_t n = a->layers.n;
    if (a->method != SQZ_LAYERDROP_LIST) SQZ_TRY(drop_count(a, s->spec, *n_layers, &n));
    SQZ_RETURN_IF(needs_windows(a) && !have_windows, SQZ_ERR_INVALID_ARG,
                  "--drop-layers '%s': part '%s' measures the model: give --calib FILE", s->spec,
                  a->compensation ? "replaceme" : a->all_scores ? "all-scores" : sqz_layerdrop_method_name(a->method));
    *n_layers -= n;
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

static sqz_status drop_model_step(sqz_pass_ctx *c, const void *args) {
    const drop_args *a = args;
    const int64_t before = c->m->hp.n_layers;
    int32_t n = 0;
    SQZ_TRY(drop_count(a, c->stage->spec, before, &n));
    SQZ_RETURN_IF(needs_windows(a) && !c->w, SQZ_ERR_INVALID_ARG,
                  "--drop-layers '%s': choosing or compensating measures the model: give --calib FILE (a statistics "
                  "file holds no block outputs)", c->stage->spec);
    sqz_layerdrop_opts lo = sqz_layerdrop_default_opts();
    lo.method = (sqz_layerdrop_method)a->method;
    lo.count = n;
    lo.list = a->layers.v;
    lo.n_list = a->layers.n;
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

const sqz_pass sqz__pass_drop_layers = {
    .name = "drop-layers", .metavar = "LIST|N:METHOD",
    .summary = "remove whole blocks, by index or N (P%) chosen by importance, optionally compensated (the rest "
               "are renumbered; GGUF and HF outputs say the new count; docs/layerdrop.md)",
    .examples = "3 3,4 2-5 4:bi 25%:kld 8:angular:replaceme 4:bi:iterative 4:last 4:random:seed=3",
    .opts = drop_opts, .n_opts = (int)(sizeof drop_opts / sizeof drop_opts[0]), .args_size = sizeof(drop_args),
    .reshapes = true, .check = drop_check, .check_model = drop_check_model, .model_step = drop_model_step,
};

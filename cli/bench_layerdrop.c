/* cli/bench_layerdrop.c - `sqz bench layerdrop`: which blocks to remove, measured. On
 * SmolLM2-135M (or MODEL), the blocks are scored once on calibration windows (block influence,
 * angular distance, the KLD of removing each alone); then for every count (1, 2, 4, 25% by
 * default) and method (bi, angular, kld, and the baselines last and random over 5 seeds, whose
 * median is the baseline) the shortened model, with and without compensation (replaceme), is
 * evaluated against the full one on held-out chunks of the evaluation text: mean KLD, delta
 * ppl, top-1 agreement, each KLD also as a ratio to the last-n baseline of the same run;
 * generation tokens/s of the shortened models against the full model; peak memory. */
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

typedef struct ld_bench_opts {
    sqz_cli_bench_args c; /* model, texts, sizes, threads (sqz_cli_bench_rows) */
    const char *counts;
    int64_t seeds, kld_windows, gen;
    bool no_comp;
} ld_bench_opts;

static const sqz_opt ld_bench_rows[] = {
    {.name = "kld-windows", .type = SQZ_OPT_INT, .offset = offsetof(ld_bench_opts, kld_windows), .min = 1,
     .max = 1 << 20, .def = "4", .metavar = "K", .help = "windows of the per-block KLD scores"},
    {.name = "counts", .type = SQZ_OPT_STRING, .offset = offsetof(ld_bench_opts, counts), .def = "1,2,4,25%",
     .metavar = "LIST", .help = "blocks to remove: counts N or fractions P%, comma-separated"},
    {.name = "seeds", .type = SQZ_OPT_INT, .offset = offsetof(ld_bench_opts, seeds), .min = 1, .max = 99, .def = "5",
     .help = "random choices per count (their median is the baseline)"},
    {.name = "gen", .type = SQZ_OPT_INT, .offset = offsetof(ld_bench_opts, gen), .min = 1, .max = 4096, .def = "64",
     .metavar = "G", .help = "tokens generated (greedy) for the tokens/s comparison"},
    {.name = "no-compensation", .type = SQZ_OPT_FLAG, .offset = offsetof(ld_bench_opts, no_comp),
     .help = "leave out the compensated (replaceme) rows"},
};

static const char ld_bench_head[] =
    "usage: sqz bench layerdrop [MODEL] [--calib FILE] [--eval TEXT] [--counts LIST] [options]\n\n"
    "Scores every block of MODEL (default SmolLM2-135M-Instruct) once on calibration windows, then\n"
    "removes 1, 2, 4 and 25% of the blocks by each method (bi, angular, kld) and by the baselines\n"
    "(the last blocks; random, median of 5 seeds), with and without replaceme compensation, and\n"
    "evaluates each shortened model against the full one on held-out chunks: mean KLD, delta ppl,\n"
    "top-1, KLD as a ratio to dropping the last blocks; generation tokens/s vs the full model;\n"
    "peak memory.\n";

void sqz_bench_layerdrop_usage(FILE *out) {
    sqz_cli_bench_model_usage(out, ld_bench_head, ld_bench_rows, SQZ_CLI_N(ld_bench_rows));
}

/* What one run shares. */
typedef struct ld_bench {
    sqz_cli_bench_model H; /* model, backend, data, the base's logits (cli/bench_model.c) */
    const ld_bench_opts *a;
    sqz_layerdrop_scores sc;
    double ppl_base, gen_full[2];
    struct cached { char key[512]; sqz_eval_result r; double gen[2]; } cache[256];
    int n_cache;
} ld_bench;

/* One evaluated configuration. */
typedef struct ld_row {
    double kld, dppl, top1, ppl, gen[2]; /* tokens per wall second, per CPU second */
    bool ok;
} ld_row;

/* The model without blocks set[0..n) (compensated when comp), evaluated against the saved base. */
static sqz_status evaluate(ld_bench *B, const int32_t *set, int32_t n, bool comp, bool gen, ld_row *row) {
    char key[512];
    int k = snprintf(key, sizeof key, "%d:", comp);
    for (int32_t i = 0; i < n && k > 0 && (size_t)k < sizeof key; i++)
        k += snprintf(key + k, sizeof key - (size_t)k, "%d,", (int)set[i]);
    for (int i = 0; i < B->n_cache; i++)
        if (!strcmp(B->cache[i].key, key) && (!gen || B->cache[i].gen[0] > 0)) {
            const sqz_eval_result *r = &B->cache[i].r;
            *row = (ld_row){r->kld_mean, r->delta_ppl, r->top1_agree, r->ppl, {B->cache[i].gen[0], B->cache[i].gen[1]}, true};
            return SQZ_OK;
        }
    sqz_model *m = NULL;
    sqz_layerdrop_result res = {0};
    sqz_eval_result r = {0};
    const sqz_session_opts cso = sqz_cli_bench_session_opts(&B->H, B->H.d.w.ctx);
    sqz_status st = sqz_model_open(B->H.model, NULL, &m);
    if (st == SQZ_OK && comp) st = sqz_layerdrop_compensate(m, &B->H.d.w, &cso, set, n, 1e-4, &res);
    if (st == SQZ_OK) st = sqz_model_remove_layers(m, set, n);
    if (st == SQZ_OK) st = sqz_cli_bench_evaluate(&B->H, m, false, &r);
    double g[2] = {0, 0};
    if (st == SQZ_OK && gen) st = sqz_cli_bench_gen(&B->H, m, B->a->gen, g);
    if (st == SQZ_OK) {
        *row = (ld_row){r.kld_mean, r.ppl - B->ppl_base, r.top1_agree, r.ppl, {g[0], g[1]}, true};
        free(r.kld_values);
        r.kld_values = NULL;
        if (B->n_cache < 256) {
            snprintf(B->cache[B->n_cache].key, sizeof B->cache[0].key, "%s", key);
            B->cache[B->n_cache].r = r;
            B->cache[B->n_cache].r.delta_ppl = row->dppl;
            B->cache[B->n_cache].gen[0] = g[0];
            B->cache[B->n_cache++].gen[1] = g[1];
        }
    }
    sqz_eval_result_free(&r);
    sqz_layerdrop_result_free(&res);
    sqz_model_free(m);
    return st;
}

static void print_row(const char *method, const int32_t *set, int32_t n, bool comp, const ld_row *r, double last) {
    char list[256];
    int k = 0;
    for (int32_t i = 0; i < n && k >= 0 && (size_t)k < sizeof list; i++)
        k += snprintf(list + k, sizeof list - (size_t)k, "%s%d", i ? "," : "", (int)set[i]);
    if (!n) snprintf(list, sizeof list, "-");
    printf("  %-14s %-5s %-28s %9.4f %9.3f %7.4f %9.3f %8.3f\n", method, comp ? "yes" : "no", list, r->kld, r->dppl,
           r->top1, r->ppl, last > 0 ? r->kld / last : 0.0);
}

static int cmp_kld(const void *a, const void *b) {
    const double x = ((const ld_row *)a)->kld, y = ((const ld_row *)b)->kld;
    return (x > y) - (x < y);
}

/* The rows of one count: scored methods, last, random (median), compensated. */
static sqz_status one_count(ld_bench *B, int32_t n) {
    const int32_t L = (int32_t)B->H.orig->hp.n_layers;
    static const sqz_layerdrop_method scored[] = {SQZ_LAYERDROP_BI, SQZ_LAYERDROP_ANGULAR, SQZ_LAYERDROP_KLD};
    int32_t set[4][256], last_set[256];
    ld_row rows[4] = {{0}}, last = {0}, comp[4] = {{0}}, lastc = {0}, rnd[99] = {{0}};
    sqz_layerdrop_opts o = sqz_layerdrop_default_opts();
    o.count = n;
    o.method = SQZ_LAYERDROP_LAST;
    sqz_status st = sqz_layerdrop_choose(&B->sc, L, &o, last_set);
    if (st == SQZ_OK) st = evaluate(B, last_set, n, false, false, &last);
    printf("\nremove %d of %d blocks   baseline: the last %d (KLD ratio column)\n", (int)n, (int)L, (int)n);
    printf("  %-14s %-5s %-28s %9s %9s %7s %9s %8s\n", "method", "comp", "removed", "KLD", "dppl", "top1", "ppl",
           "x last");
    if (st == SQZ_OK) print_row("last", last_set, n, false, &last, last.kld);
    int best = 0;
    for (int i = 0; i < 3 && st == SQZ_OK; i++) {
        o.method = scored[i];
        st = sqz_layerdrop_choose(&B->sc, L, &o, set[i]);
        if (st == SQZ_OK) st = evaluate(B, set[i], n, false, false, &rows[i]);
        if (st == SQZ_OK) print_row(sqz_layerdrop_method_name(scored[i]), set[i], n, false, &rows[i], last.kld);
        if (st == SQZ_OK && rows[i].kld < rows[best].kld) best = i;
    }
    o.method = SQZ_LAYERDROP_RANDOM;
    for (int k = 0; k < B->a->seeds && st == SQZ_OK; k++) {
        char name[32];
        o.seed = (uint64_t)k + 1;
        snprintf(name, sizeof name, "random seed=%d", k + 1);
        st = sqz_layerdrop_choose(&B->sc, L, &o, set[3]);
        if (st == SQZ_OK) st = evaluate(B, set[3], n, false, false, &rnd[k]);
        if (st == SQZ_OK) print_row(name, set[3], n, false, &rnd[k], last.kld);
    }
    ld_row med = {0};
    if (st == SQZ_OK) {
        qsort(rnd, (size_t)B->a->seeds, sizeof rnd[0], cmp_kld);
        med = rnd[B->a->seeds / 2];
        print_row("random median", NULL, 0, false, &med, last.kld);
    }
    for (int i = 0; i < 3 && st == SQZ_OK && !B->a->no_comp; i++) {
        st = evaluate(B, set[i], n, true, false, &comp[i]);
        if (st == SQZ_OK) print_row(sqz_layerdrop_method_name(scored[i]), set[i], n, true, &comp[i], last.kld);
    }
    if (st == SQZ_OK && !B->a->no_comp) st = evaluate(B, last_set, n, true, false, &lastc);
    if (st == SQZ_OK && !B->a->no_comp) print_row("last", last_set, n, true, &lastc, last.kld);
    ld_row gb = {0};
    if (st == SQZ_OK) st = evaluate(B, set[best], n, false, true, &gb);
    if (st == SQZ_OK) {
        const char *bm = sqz_layerdrop_method_name(scored[best]);
        printf("  best scored: %s KLD %.4f vs last %.4f (x%.3f) vs random median %.4f (x%.3f): %s\n", bm,
               rows[best].kld, last.kld, rows[best].kld / last.kld, med.kld, rows[best].kld / med.kld,
               rows[best].kld < last.kld && rows[best].kld < med.kld ? "lower than both" : "NOT lower than both");
        if (!B->a->no_comp)
            printf("  compensation (replaceme) on %s: KLD %.4f -> %.4f (x%.3f)\n", bm, rows[best].kld, comp[best].kld,
                   comp[best].kld / rows[best].kld);
        printf("  generation (%lld tokens, greedy, best of 3): %.1f tokens/s vs full %.1f (x%.3f); per CPU second "
               "%.1f vs %.1f (x%.3f)\n", (long long)B->a->gen, gb.gen[0], B->gen_full[0], gb.gen[0] / B->gen_full[0],
               gb.gen[1], B->gen_full[1], gb.gen[1] / B->gen_full[1]);
    }
    return st;
}

static void print_scores(const ld_bench *B) {
    const sqz_layerdrop_scores *s = &B->sc;
    printf("\nscores of the %d blocks on %lld windows x %lld tokens (KLD on %lld windows, %lld scored tokens), "
           "%.1f s\n", (int)s->n_layers, (long long)s->n_windows, (long long)B->H.d.w.ctx, (long long)s->kld_windows,
           (long long)s->kld_tokens, s->seconds);
    printf("  %5s %9s %9s %9s %9s\n", "block", "bi", "ang(n=1)", "KLD", "top1");
    for (int32_t l = 0; l < s->n_layers; l++)
        printf("  %5d %9.5f %9.5f %9.5f %9.4f\n", (int)l, s->bi[l], sqz_layerdrop_ang(s, l, 1), s->kld[l], s->top1[l]);
}

/* Windows, scores, the evaluation text and the base's logits. */
static sqz_status setup(ld_bench *B) {
    sqz_session *s = NULL;
    sqz_status st = sqz_cli_bench_model_data(&B->H, &s);
    sqz_layerdrop_score_opts so = {.kld = true, .kld_windows = B->a->kld_windows};
    sqz_progress *p = sqz_progress_start("scores", 0, "block passes");
    so.progress = sqz_progress_cb;
    so.progress_user = p;
    if (st == SQZ_OK) st = sqz_layerdrop_score(s, &B->H.d.w, &so, &B->sc);
    sqz_progress_end(p);
    sqz_session_free(s);
    if (st == SQZ_OK) print_scores(B);
    return st;
}

/* The full model's perplexity (its logits saved as the base) and generation speed. */
static sqz_status base_run(ld_bench *B) {
    sqz_eval_result r = {0};
    sqz_status st = sqz_cli_bench_evaluate(&B->H, B->H.orig, true, &r);
    if (st == SQZ_OK) st = sqz_cli_bench_gen(&B->H, B->H.orig, B->a->gen, B->gen_full);
    if (st == SQZ_OK) {
        B->ppl_base = r.ppl;
        printf("\nfull model: ppl %.4f on %lld chunks of %lld tokens (%lld held out: they overlap calibration "
               "windows), %lld tokens scored; generation %.1f tokens/s (%.1f per CPU second)\n", r.ppl,
               (long long)r.n_chunks, (long long)r.ctx, (long long)r.n_excluded, (long long)r.tokens_scored,
               B->gen_full[0], B->gen_full[1]);
    }
    sqz_eval_result_free(&r);
    return st;
}

static sqz_status run_counts(ld_bench *B) {
    const int32_t L = (int32_t)B->H.orig->hp.n_layers;
    sqz_status st = SQZ_OK;
    for (const char *p = B->a->counts; p && *p && st == SQZ_OK;) {
        char *end;
        const double v = strtod(p, &end);
        const bool pct = *end == '%';
        int32_t n = pct ? (int32_t)llround(v / 100.0 * L) : (int32_t)v;
        if (end == p || n < 1 || n >= L) {
            fprintf(stderr, "sqz bench layerdrop: bad count '%s' for %d blocks (skipped)\n", p, (int)L);
        } else {
            if (pct) printf("\n%g%% of %d blocks = %d", v, (int)L, (int)n);
            st = one_count(B, n);
        }
        p = strchr(p, ',');
        p = p ? p + 1 : NULL;
    }
    return st;
}

int sqz_bench_layerdrop(int argc, char **argv) {
    ld_bench_opts a = {0};
    const int bad = sqz_cli_bench_model_parse("bench layerdrop", ld_bench_rows, SQZ_CLI_N(ld_bench_rows), &a, &a.c,
                                              argc, argv);
    if (bad) return bad;
    ld_bench *B = calloc(1, sizeof *B);
    if (!B) return sqz_cli_fail(SQZ_ERR_NOMEM);
    B->a = &a;
    const sqz_cli_bench_model *H = &B->H;
    sqz_status st = sqz_cli_bench_model_open(&B->H, "layerdrop", &a.c);
    if (st == SQZ_OK)
        printf("model: %s (%lld blocks, %.1f M params)\ncalibration: %s, %lld x %lld; evaluation: %s\n", H->model,
               (long long)H->orig->hp.n_layers, (double)sqz_model_param_count(H->orig) / 1e6, H->calib,
               (long long)a.c.n, (long long)a.c.ctx, H->eval);
    if (st == SQZ_OK) st = setup(B);
    if (st == SQZ_OK) st = base_run(B);
    if (st == SQZ_OK) st = run_counts(B);
    if (st == SQZ_OK) sqz_cli_bench_model_peak(H);
    for (int i = 0; i < B->n_cache; i++) sqz_eval_result_free(&B->cache[i].r);
    sqz_layerdrop_scores_free(&B->sc);
    sqz_cli_bench_model_close(&B->H);
    free(B);
    return st == SQZ_OK ? 0 : sqz_cli_fail(st);
}

/* cli/bench_prune.c - `sqz bench prune`: structured pruning, measured. On SmolLM2-135M (or
 * MODEL), for every budget (10%, 20%, 30% of the attention+FFN parameters by default), every
 * score (magnitude, wanda, flap, obs) and compensation (none, lsq by default), the model is
 * pruned on the same calibration windows (`--prune` through sqz_compress_run, the pipeline
 * `sqz compress` runs) and evaluated against the unpruned one on held-out chunks: mean KLD,
 * delta ppl, top-1, the KLD as a ratio to magnitude pruning without compensation (the baseline
 * of the same run), the GGUF file size, the compress time, the evaluation tokens/s against the
 * dense model's in the same run; per budget the best row's greedy generation tokens/s against
 * the dense model's; peak memory. */
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"

typedef struct pr_bench_opts {
    sqz_cli_bench_args c; /* model, texts, sizes, threads (sqz_cli_bench_rows) */
    const char *ratios, *scores, *comps;
    int structure;
    int64_t gen, align;
} pr_bench_opts;

enum { S_FFN, S_HEADS, S_BOTH, S_PARAMS };

static const sqz_opt pr_bench_rows[] = {
    {.name = "ratios", .type = SQZ_OPT_STRING, .offset = offsetof(pr_bench_opts, ratios), .def = "0.1,0.2,0.3",
     .metavar = "LIST", .help = "budgets: fractions of the attention+FFN parameters to remove, comma-separated"},
    {.name = "structure", .type = SQZ_OPT_CHOICE, .offset = offsetof(pr_bench_opts, structure),
     .choices = "ffn|heads|both|params", .def = "ffn",
     .help = "what a budget removes: FFN neurons only (ffn=R'), heads only (heads=R'), the same fraction of both, "
             "or FLAP's global placement (params=R)"},
    {.name = "scores", .type = SQZ_OPT_STRING, .offset = offsetof(pr_bench_opts, scores),
     .def = "magnitude,wanda,flap,obs", .metavar = "LIST", .help = "importance scores, comma-separated"},
    {.name = "comps", .type = SQZ_OPT_STRING, .offset = offsetof(pr_bench_opts, comps), .def = "none,lsq",
     .metavar = "LIST", .help = "compensations (none, bias, lsq, both), comma-separated"},
    {.name = "align", .type = SQZ_OPT_INT, .offset = offsetof(pr_bench_opts, align), .min = 1, .max = 4096,
     .def = "32", .metavar = "N", .help = "kept FFN widths a multiple of N (the SPEC's align=)"},
    {.name = "gen", .type = SQZ_OPT_INT, .offset = offsetof(pr_bench_opts, gen), .min = 1, .max = 4096, .def = "64",
     .metavar = "G", .help = "tokens generated (greedy) for the tokens/s comparison"},
};

static const char pr_bench_head[] =
    "usage: sqz bench prune [MODEL] [--ratios LIST] [--scores LIST] [--comps LIST] [options]\n\n"
    "Prunes MODEL (default SmolLM2-135M-Instruct) at each budget (default 10%, 20%, 30% of the\n"
    "attention+FFN parameters) with each score and compensation on the same calibration windows,\n"
    "and evaluates each result against the unpruned model on held-out chunks: mean KLD, delta ppl,\n"
    "top-1, KLD as a ratio to magnitude pruning without compensation (the baseline of the run),\n"
    "GGUF size, compress seconds, evaluation tokens/s vs the dense model; per budget, greedy\n"
    "generation tokens/s of the best result vs the dense model; peak memory.\n";

void sqz_bench_prune_usage(FILE *out) {
    sqz_cli_bench_model_usage(out, pr_bench_head, pr_bench_rows, SQZ_CLI_N(pr_bench_rows));
}

typedef struct pr_bench {
    sqz_cli_bench_model H; /* model, backend, data, the base's logits (cli/bench_model.c) */
    const pr_bench_opts *a;
    char gguf[96];
    double ppl_base, eval_tps_dense, gen_dense[2];
    int64_t lin_dense, attn_dense, ffn_dense;
} pr_bench;

typedef struct pr_row {
    char spec[96];
    double kld, dppl, top1, removed, mb, seconds, eval_tps;
} pr_row;

/* Attention and FFN weight parameters of m. */
static void linear_params(const sqz_model *m, int64_t *attn, int64_t *ffn) {
    *attn = *ffn = 0;
    for (int64_t i = 0; i < m->n_tensors; i++) {
        const sqz_tensor *t = &m->tensors[i];
        if (t->param != SQZ_PARAM_WEIGHT) continue;
        if (t->role == SQZ_ROLE_ATTN_Q || t->role == SQZ_ROLE_ATTN_K || t->role == SQZ_ROLE_ATTN_V ||
            t->role == SQZ_ROLE_ATTN_OUT)
            *attn += sqz_tensor_nelements(t);
        if (t->role == SQZ_ROLE_FFN_GATE || t->role == SQZ_ROLE_FFN_UP || t->role == SQZ_ROLE_FFN_DOWN)
            *ffn += sqz_tensor_nelements(t);
    }
}

/* The prune SPEC of budget r (fraction of the attention+FFN parameters) for the structure;
 * false when the structure cannot remove that much (heads alone at a large budget). */
static bool spec_of(const pr_bench *B, double r, const char *score, const char *comp, char *spec, size_t cap) {
    const double lin = (double)B->lin_dense;
    const int s = B->a->structure;
    const double f = s == S_FFN ? r * lin / (double)B->ffn_dense : s == S_HEADS ? r * lin / (double)B->attn_dense : r;
    if (f <= 0 || f >= 0.95) return false;
    static const char *const part[] = {"ffn=%.4f", "heads=%.4f", "heads=%.4f:ffn=%.4f", "params=%.4f"};
    int k = snprintf(spec, cap, part[s], f, f);
    snprintf(spec + k, cap - (size_t)k, ":%s:%s:align=%lld", score, comp, (long long)B->a->align);
    return true;
}

/* Prunes a fresh copy of the model with spec, measures it; *m_out keeps the model when asked. */
static sqz_status prune_one(pr_bench *B, const char *spec, pr_row *row, sqz_model **m_out) {
    sqz_model *m = NULL;
    sqz_eval_result r = {0};
    const char *const stages[] = {"prune", spec, NULL};
    sqz_status st = sqz_cli_bench_compress(&B->H, stages, &row->seconds, &m);
    if (st == SQZ_OK) st = sqz_cli_bench_evaluate(&B->H, m, false, &r);
    sqz_save_opts so = {.format = SQZ_FORMAT_GGUF, .dtype = -1};
    if (st == SQZ_OK) st = sqz_model_save(m, B->gguf, &so);
    struct stat sb;
    if (st == SQZ_OK && stat(B->gguf, &sb) == 0) row->mb = (double)sb.st_size / 1e6;
    unlink(B->gguf);
    if (st == SQZ_OK) {
        int64_t attn, ffn;
        linear_params(m, &attn, &ffn);
        snprintf(row->spec, sizeof row->spec, "%s", spec);
        row->kld = r.kld_mean;
        row->dppl = r.ppl - B->ppl_base;
        row->top1 = r.top1_agree;
        row->eval_tps = r.tokens_per_s;
        row->removed = 1 - (double)(attn + ffn) / (double)B->lin_dense;
    }
    sqz_eval_result_free(&r);
    if (st == SQZ_OK && m_out) *m_out = m;
    else sqz_model_free(m);
    return st;
}

static void print_row(const char *score, const char *comp, const pr_row *r, double base, double dense_tps) {
    printf("  %-10s %-5s %7.1f%% %9.4f %9.3f %7.4f %8.3f %8.2f %8.1f %7.3f\n", score, comp, 100 * r->removed, r->kld,
           r->dppl, r->top1, base > 0 ? r->kld / base : NAN, r->mb, r->seconds,
           dense_tps > 0 ? r->eval_tps / dense_tps : NAN);
}

/* The rows of one budget, the baseline first, then the best row's generation speed. */
static sqz_status one_ratio(pr_bench *B, double r) {
    char scores[8][16], comps[4][16], spec[96];
    const int ns = SQZ_CLI_SPLIT(B->a->scores, scores), nc = SQZ_CLI_SPLIT(B->a->comps, comps);
    pr_row base = {0}, best = {0}, rows[8][4];
    memset(rows, 0, sizeof rows);
    if (!spec_of(B, r, "magnitude", "none", spec, sizeof spec)) {
        printf("\nbudget %.0f%%: more than the structure can give (skipped)\n", 100 * r);
        return SQZ_OK;
    }
    printf("\nbudget %.0f%% of the attention+FFN parameters (baseline: %s)\n", 100 * r, spec);
    printf("  %-10s %-5s %8s %9s %9s %7s %8s %8s %8s %7s\n", "score", "comp", "removed", "KLD", "dppl", "top1",
           "x magn.", "GGUF MB", "comp. s", "eval x");
    sqz_status st = prune_one(B, spec, &base, NULL);
    if (st == SQZ_OK) print_row("magnitude", "none", &base, base.kld, B->eval_tps_dense);
    best = base;
    for (int i = 0; i < ns && st == SQZ_OK; i++)
        for (int j = 0; j < nc && st == SQZ_OK; j++) {
            if (!strcmp(scores[i], "magnitude") && !strcmp(comps[j], "none")) {
                rows[i][j] = base;
                continue;
            }
            if (!spec_of(B, r, scores[i], comps[j], spec, sizeof spec)) continue;
            st = prune_one(B, spec, &rows[i][j], NULL);
            if (st == SQZ_OK) print_row(scores[i], comps[j], &rows[i][j], base.kld, B->eval_tps_dense);
            if (st == SQZ_OK && rows[i][j].kld < best.kld) best = rows[i][j];
        }
    for (int i = 0; i < ns && st == SQZ_OK; i++)
        for (int j = 1; j < nc; j++)
            if (rows[i][0].spec[0] && rows[i][j].spec[0])
                printf("  compensation %s on %s: KLD %.4f -> %.4f (x%.3f)\n", comps[j], scores[i], rows[i][0].kld,
                       rows[i][j].kld, rows[i][j].kld / rows[i][0].kld);
    sqz_model *m = NULL;
    pr_row again = {0};
    double g[2] = {0, 0};
    if (st == SQZ_OK) st = prune_one(B, best.spec, &again, &m);
    if (st == SQZ_OK) st = sqz_cli_bench_gen(&B->H, m, B->a->gen, g);
    sqz_model_free(m);
    if (st == SQZ_OK)
        printf("  best: %s KLD %.4f vs magnitude %.4f (x%.3f; %s); eval %.0f tokens/s vs dense %.0f (x%.3f); "
               "generation %.1f tokens/s vs dense %.1f (x%.3f), per CPU second %.1f vs %.1f (x%.3f)\n",
               best.spec, best.kld, base.kld, best.kld / base.kld,
               best.kld <= 0.5 * base.kld ? "at most half" : "more than half", again.eval_tps, B->eval_tps_dense,
               again.eval_tps / B->eval_tps_dense, g[0], B->gen_dense[0], g[0] / B->gen_dense[0], g[1],
               B->gen_dense[1], g[1] / B->gen_dense[1]);
    return st;
}

/* The dense model: its logits saved as the base, then evaluated against them (the speed
 * every row is compared with, measured the same way), its generation speed. */
static sqz_status base_run(pr_bench *B) {
    sqz_eval_result r = {0}, r2 = {0};
    sqz_status st = sqz_cli_bench_evaluate(&B->H, B->H.orig, true, &r);
    if (st == SQZ_OK) st = sqz_cli_bench_evaluate(&B->H, B->H.orig, false, &r2);
    if (st == SQZ_OK) st = sqz_cli_bench_gen(&B->H, B->H.orig, B->a->gen, B->gen_dense);
    if (st == SQZ_OK) {
        B->ppl_base = r.ppl;
        B->eval_tps_dense = r2.tokens_per_s;
        printf("\ndense model: ppl %.4f on %lld chunks of %lld tokens (%lld held out: they overlap calibration "
               "windows); evaluation %.0f tokens/s; generation %.1f tokens/s (%.1f per CPU second)\n", r.ppl,
               (long long)r.n_chunks, (long long)r.ctx, (long long)r.n_excluded, r2.tokens_per_s, B->gen_dense[0],
               B->gen_dense[1]);
    }
    sqz_eval_result_free(&r);
    sqz_eval_result_free(&r2);
    return st;
}

static sqz_status run_ratios(pr_bench *B) {
    sqz_status st = SQZ_OK;
    for (const char *p = B->a->ratios; p && *p && st == SQZ_OK;) {
        char *end;
        const double v = strtod(p, &end);
        if (end == p || !(v > 0 && v < 1)) fprintf(stderr, "sqz bench prune: bad budget '%s' (skipped)\n", p);
        else st = one_ratio(B, v);
        p = strchr(p, ',');
        p = p ? p + 1 : NULL;
    }
    return st;
}

static sqz_status bench(pr_bench *B, const pr_bench_opts *a) {
    const sqz_cli_bench_model *H = &B->H;
    sqz_status st = sqz_cli_bench_model_open(&B->H, "prune", &a->c);
    if (st == SQZ_OK) {
        linear_params(H->orig, &B->attn_dense, &B->ffn_dense);
        B->lin_dense = B->attn_dense + B->ffn_dense;
        printf("model: %s (%lld blocks, %.1f M params, %.1f M in attention+FFN)\ncalibration: %s, %lld x %lld; "
               "evaluation: %s\n", H->model, (long long)H->orig->hp.n_layers,
               (double)sqz_model_param_count(H->orig) / 1e6, (double)B->lin_dense / 1e6, H->calib, (long long)a->c.n,
               (long long)a->c.ctx, H->eval);
    }
    snprintf(B->gguf, sizeof B->gguf, "%s.gguf", H->base_file);
    if (st == SQZ_OK) st = sqz_cli_bench_model_data(&B->H, NULL);
    if (st == SQZ_OK) st = base_run(B);
    if (st == SQZ_OK) st = run_ratios(B);
    return st;
}

int sqz_bench_prune(int argc, char **argv) {
    pr_bench_opts a = {0};
    const int bad = sqz_cli_bench_model_parse("bench prune", pr_bench_rows, SQZ_CLI_N(pr_bench_rows), &a, &a.c, argc,
                                              argv);
    if (bad) return bad;
    pr_bench *B = calloc(1, sizeof *B);
    if (!B) return sqz_cli_fail(SQZ_ERR_NOMEM);
    B->a = &a;
    const sqz_status st = bench(B, &a);
    if (st == SQZ_OK) sqz_cli_bench_model_peak(&B->H);
    sqz_cli_bench_model_close(&B->H);
    free(B);
    return st == SQZ_OK ? 0 : sqz_cli_fail(st);
}

/* cli/bench_sparsity.c - `sqz bench sparsity`: unstructured and N:M sparsity, measured. On
 * SmolLM2-135M (or MODEL), for every pattern (50% and 2:4 by default), every method
 * (magnitude, wanda, sparsegpt) and every quantization (none, int8, int4:g64 by default;
 * sparsegpt quantizes jointly in its sweep, magnitude and wanda are followed by RTN), the model
 * is sparsified on the same calibration windows (`--sparsity` through sqz_compress_run, the
 * pipeline `sqz compress` runs) and evaluated against the dense model on held-out chunks: mean
 * KLD, delta ppl, top-1, compress seconds; the quantization alone is measured too. The last
 * lines say whether the papers' ordering holds in this run (2:4: SparseGPT <= Wanda <
 * magnitude in mean KLD; 50%: Wanda < magnitude). */
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

typedef struct sp_bench_opts {
    sqz_cli_bench_args c; /* model, texts, sizes, threads (sqz_cli_bench_rows) */
    const char *patterns, *methods, *quants;
} sp_bench_opts;

static const sqz_opt sp_bench_rows[] = {
    {.name = "patterns", .type = SQZ_OPT_STRING, .offset = offsetof(sp_bench_opts, patterns), .def = "0.5,2:4",
     .metavar = "LIST", .help = "sparsity patterns (R or N:M), comma-separated"},
    {.name = "methods", .type = SQZ_OPT_STRING, .offset = offsetof(sp_bench_opts, methods),
     .def = "magnitude,wanda,sparsegpt", .metavar = "LIST", .help = "methods, comma-separated"},
    {.name = "quants", .type = SQZ_OPT_STRING, .offset = offsetof(sp_bench_opts, quants), .def = "none,int8,int4:g64",
     .metavar = "LIST", .help = "quantizations after (or, for sparsegpt, joint with) the sparsity: none or a --quant "
                                "SPEC, comma-separated"},
};

static const char sp_bench_head[] =
    "usage: sqz bench sparsity [MODEL] [--patterns LIST] [--methods LIST] [--quants LIST] [options]\n\n"
    "Sparsifies MODEL (default SmolLM2-135M-Instruct) with each pattern (default 50% and 2:4), method\n"
    "(magnitude, wanda, sparsegpt) and quantization (none, int8, int4:g64; sparsegpt jointly) on the\n"
    "same calibration windows, and evaluates each result against the dense model on held-out chunks:\n"
    "mean KLD, delta ppl, top-1, compress seconds; then whether SparseGPT <= Wanda < magnitude at\n"
    "2:4 and Wanda < magnitude at 50% (mean KLD) in this run.\n";

void sqz_bench_sparsity_usage(FILE *out) {
    sqz_cli_bench_model_usage(out, sp_bench_head, sp_bench_rows, SQZ_CLI_N(sp_bench_rows));
}

typedef struct sp_bench {
    sqz_cli_bench_model H; /* model, backend, data, the base's logits (cli/bench_model.c) */
    const sp_bench_opts *a;
    double ppl_base;
    int fails; /* orderings that did not hold */
} sp_bench;

typedef struct sp_row {
    double kld, dppl, top1, seconds;
} sp_row;

/* Runs the stages (pass, SPEC pairs; NULL pass ends) on a fresh copy and evaluates it. */
static sqz_status run_one(sp_bench *B, const char *const *stages, sp_row *row) {
    sqz_model *m = NULL;
    sqz_eval_result r = {0};
    sqz_status st = sqz_cli_bench_compress(&B->H, stages, &row->seconds, &m);
    if (st == SQZ_OK) st = sqz_cli_bench_evaluate(&B->H, m, false, &r);
    if (st == SQZ_OK) *row = (sp_row){r.kld_mean, r.ppl - B->ppl_base, r.top1_agree, row->seconds};
    sqz_eval_result_free(&r);
    sqz_model_free(m);
    return st;
}

static void print_row(const char *pattern, const char *method, const char *quant, const sp_row *r) {
    printf("  %-6s %-10s %-10s %9.4f %10.3f %7.4f %8.1f\n", pattern, method, quant, r->kld, r->dppl, r->top1,
           r->seconds);
}

/* The orderings of one pattern and quantization: index 0 magnitude, 1 wanda, 2 sparsegpt. */
static void verdict(sp_bench *B, const char *pattern, const char *quant, const double kld[3], const bool have[3]) {
    const bool nm = strchr(pattern, ':') != NULL;
    if (have[0] && have[1]) {
        const bool ok = kld[1] < kld[0];
        B->fails += !ok && !strcmp(quant, "none");
        printf("  ordering %s %s: wanda %.4f < magnitude %.4f: %s\n", pattern, quant, kld[1], kld[0], ok ? "holds" : "FAILS");
    }
    if (nm && have[1] && have[2]) {
        const bool ok = kld[2] <= kld[1];
        B->fails += !ok && !strcmp(quant, "none");
        printf("  ordering %s %s: sparsegpt %.4f <= wanda %.4f: %s\n", pattern, quant, kld[2], kld[1],
               ok ? "holds" : "FAILS");
    }
}

static sqz_status one_pattern(sp_bench *B, const char *pattern) {
    char methods[4][32], quants[6][32], spec[96];
    const int nm = SQZ_CLI_SPLIT(B->a->methods, methods), nq = SQZ_CLI_SPLIT(B->a->quants, quants);
    sqz_status st = SQZ_OK;
    printf("\npattern %s\n  %-6s %-10s %-10s %9s %10s %7s %8s\n", pattern, "pattern", "method", "quant", "KLD", "dppl",
           "top1", "seconds");
    for (int q = 0; q < nq && st == SQZ_OK; q++) {
        double kld[3] = {0};
        bool have[3] = {0};
        const bool none = !strcmp(quants[q], "none");
        for (int i = 0; i < nm && st == SQZ_OK; i++) {
            snprintf(spec, sizeof spec, "%.31s:%.31s", pattern, methods[i]);
            const char *stages[] = {"sparsity", spec, none ? NULL : "quant", quants[q], NULL};
            sp_row r = {0};
            st = run_one(B, stages, &r);
            if (st != SQZ_OK) break;
            print_row(pattern, methods[i], quants[q], &r);
            const int k = !strcmp(methods[i], "magnitude") ? 0 : !strcmp(methods[i], "wanda") ? 1 : 2;
            kld[k] = r.kld;
            have[k] = true;
        }
        if (st == SQZ_OK) verdict(B, pattern, quants[q], kld, have);
    }
    return st;
}

/* Windows, the evaluation text's ids, the held-out spans, the dense model's logits. */
static sqz_status setup(sp_bench *B) {
    sqz_eval_result r = {0};
    sqz_status st = sqz_cli_bench_model_data(&B->H, NULL);
    if (st == SQZ_OK) st = sqz_cli_bench_evaluate(&B->H, B->H.orig, true, &r);
    if (st == SQZ_OK) {
        B->ppl_base = r.ppl;
        printf("dense model: ppl %.4f on %lld chunks of %lld tokens (%lld held out)\n", r.ppl, (long long)r.n_chunks,
               (long long)r.ctx, (long long)r.n_excluded);
    }
    sqz_eval_result_free(&r);
    return st;
}

/* The quantizations alone, for reference. */
static sqz_status quant_only(sp_bench *B) {
    char quants[6][32];
    const int nq = SQZ_CLI_SPLIT(B->a->quants, quants);
    sqz_status st = SQZ_OK;
    for (int q = 0; q < nq && st == SQZ_OK; q++) {
        if (!strcmp(quants[q], "none")) continue;
        const char *stages[] = {"quant", quants[q], NULL};
        sp_row r = {0};
        st = run_one(B, stages, &r);
        if (st == SQZ_OK) print_row("dense", "-", quants[q], &r);
    }
    return st;
}

static sqz_status bench(sp_bench *B) {
    const sqz_cli_bench_model *H = &B->H;
    sqz_status st = sqz_cli_bench_model_open(&B->H, "sparsity", &B->a->c);
    if (st == SQZ_OK)
        printf("model: %s (%lld blocks, %.1f M params)\ncalibration: %s, %lld x %lld; evaluation: %s, %lld chunks of "
               "%lld\n", H->model, (long long)H->orig->hp.n_layers, (double)sqz_model_param_count(H->orig) / 1e6,
               H->calib, (long long)B->a->c.n, (long long)B->a->c.ctx, H->eval, (long long)B->a->c.eval_chunks,
               (long long)B->a->c.eval_ctx);
    if (st == SQZ_OK) st = setup(B);
    if (st == SQZ_OK) st = quant_only(B);
    char pats[6][32];
    const int np = SQZ_CLI_SPLIT(B->a->patterns, pats);
    for (int i = 0; i < np && st == SQZ_OK; i++) st = one_pattern(B, pats[i]);
    return st;
}

int sqz_bench_sparsity(int argc, char **argv) {
    sp_bench_opts a = {0};
    const int bad = sqz_cli_bench_model_parse("bench sparsity", sp_bench_rows, SQZ_CLI_N(sp_bench_rows), &a, &a.c,
                                              argc, argv);
    if (bad) return bad;
    sp_bench *B = calloc(1, sizeof *B);
    if (!B) return sqz_cli_fail(SQZ_ERR_NOMEM);
    B->a = &a;
    const sqz_status st = bench(B);
    if (st == SQZ_OK)
        printf("\n%s: the papers' ordering (unquantized rows) %s; %.1f s in all\n", B->H.model,
               B->fails ? "FAILS" : "holds", sqz_now_seconds() - B->H.t0);
    const int fails = B->fails;
    sqz_cli_bench_model_close(&B->H);
    free(B);
    return st == SQZ_OK ? (fails ? 1 : 0) : sqz_cli_fail(st);
}

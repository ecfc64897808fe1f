/*
 * cli/cmd_bench.c - `sqz bench <what>`: benchmarks that print ratios against baselines
 * measured in the same run. Sub-benchmarks are rows of one table (more to come: eval,
 * compress).
 *
 * `sqz bench eval` lives in cli/bench_eval.c.
 * `sqz bench kernels`: on a CUDA device, the W8A8 and W4A16 GEMM kernels against cuBLAS
 * fp16 and cuBLASLt INT8 on llama-like shapes (TOPS, GB/s, ratios, fraction of the
 * device's peak); on the CPU, the W8A8 scalar reference and the W4A16 path against
 * OpenBLAS sgemm.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/cli.h"

typedef struct bench_sub {
    const char *name;
    const char *summary;
    int (*run)(int argc, char **argv); /* argv[0] is the sub-benchmark's name */
    void (*usage)(FILE *out);
} bench_sub;

static int bench_kernels(int argc, char **argv);
static void bench_kernels_usage(FILE *out);

static const bench_sub subs[] = {
    {"kernels", "INT8 / INT4 GEMM kernels vs cuBLAS (GPU); CPU W8A8 reference and W4A16 vs OpenBLAS", bench_kernels,
     bench_kernels_usage},
    {"eval", "forward-pass throughput of the runtime vs OpenBLAS sgemm", sqz_bench_eval, sqz_bench_eval_usage},
    {"compress", "RTN GB/s vs memcpy, GPTQ s/block vs RTN, peak memory of compress vs the checkpoint",
     sqz_bench_compress, sqz_bench_compress_usage},
    {"layerdrop", "layer removal by bi / angular / kld vs the last-n and random baselines, with and without "
     "compensation: KLD, delta ppl, top-1, generation tokens/s, peak memory",
     sqz_bench_layerdrop, sqz_bench_layerdrop_usage},
    {"prune", "structured pruning by magnitude / wanda / flap / obs, with and without compensation, at 10-30% of "
     "the attention+FFN parameters: KLD vs magnitude, delta ppl, top-1, GGUF size, eval and generation speed vs "
     "the dense model, peak memory", sqz_bench_prune, sqz_bench_prune_usage},
    {"sparsity", "unstructured (50%) and 2:4 sparsity by magnitude / wanda / sparsegpt, alone and with INT8 / INT4 "
                 "(sparsegpt jointly): KLD, delta ppl, top-1, seconds; whether the papers' ordering holds",
     sqz_bench_sparsity, sqz_bench_sparsity_usage},
    {"edge", "the edge runtime: stripped size (x86-64, aarch64), peak RSS vs announced, tokens/s vs sqz generate, "
             "llama.cpp and under qemu", sqz_bench_edge, sqz_bench_edge_usage},
    {"distributed", "calibration + GPTQ on 1 and R MPI ranks of 1 thread (owner and replicated statistics): time "
                    "ratio, bytes per block, memory per rank, identical outputs", sqz_bench_distributed,
     sqz_bench_distributed_usage},
};
static const int n_subs = (int)(sizeof subs / sizeof subs[0]);

void sqz_cmd_bench_usage(FILE *out) {
    fprintf(out, "usage: sqz bench <what> [options]\n\n");
    for (int i = 0; i < n_subs; i++) fprintf(out, "  %-10s %s\n", subs[i].name, subs[i].summary);
    for (int i = 0; i < n_subs; i++) {
        fprintf(out, "\n");
        subs[i].usage(out);
    }
}

int sqz_cmd_bench_help(int argc, char **argv) {
    for (size_t i = 0; argc >= 2 && i < sizeof subs / sizeof subs[0]; i++)
        if (strcmp(argv[1], subs[i].name) == 0) {
            subs[i].usage(stdout);
            return 0;
        }
    sqz_cmd_bench_usage(stdout);
    return 0;
}

int sqz_cmd_bench(int argc, char **argv) {
    if (argc < 2) return sqz_cli_usage_error("bench", "which benchmark? (kernels, eval, compress or layerdrop)");
    for (int i = 0; i < n_subs; i++)
        if (strcmp(argv[1], subs[i].name) == 0) return subs[i].run(argc - 1, argv + 1);
    return sqz_cli_usage_error("bench", "unknown benchmark '%s' (kernels, eval, compress or layerdrop)", argv[1]);
}

/* ---- options ---------------------------------------------------------------------- */
enum { MAX_LIST = 32 };

typedef struct kopts {
    int64_t m[MAX_LIST];
    int n_m;
    int64_t nk[MAX_LIST][2];
    int n_nk;
    bool kernel_on[SQZ_BENCH_KERNEL_COUNT];
    double min_time;
    int device;
    bool cpu, gpu;
} kopts;

static bool parse_i64_list(const char *s, int64_t *out, int *n) {
    *n = 0;
    while (*s) {
        char *end;
        const long long v = strtoll(s, &end, 10);
        if (end == s || v < 1 || v > (1LL << 31) || *n == MAX_LIST) return false;
        out[(*n)++] = v;
        s = *end == ',' ? end + 1 : end;
        if (*end && *end != ',') return false;
    }
    return *n > 0;
}

static bool parse_nk_list(const char *s, int64_t (*out)[2], int *n) {
    *n = 0;
    while (*s) {
        char *end;
        const long long a = strtoll(s, &end, 10);
        if (end == s || (*end != 'x' && *end != 'X') || *n == MAX_LIST) return false;
        const char *t = end + 1;
        const long long b = strtoll(t, &end, 10);
        if (end == t || a < 1 || b < 1 || a > (1LL << 31) || b > (1LL << 31)) return false;
        out[*n][0] = a;
        out[*n][1] = b;
        (*n)++;
        if (*end && *end != ',') return false;
        s = *end ? end + 1 : end;
    }
    return *n > 0;
}

/* The command line as given; parse_kopts turns it into kopts. */
typedef struct kargs {
    const char *m, *nk, *kernels;
    bool quick, cpu_only, gpu_only;
    double min_time;
    int64_t device;
} kargs;

static const sqz_opt kernels_rows[] = {
    {.name = "m", .type = SQZ_OPT_STRING, .offset = offsetof(kargs, m), .metavar = "LIST",
     .help = "token counts (default 1,4,16,64,128,512,4096)"},
    {.name = "nk", .type = SQZ_OPT_STRING, .offset = offsetof(kargs, nk), .metavar = "LIST",
     .help = "weight shapes NxK (default all of {4096,11008,14336,8192}^2)"},
    {.name = "quick", .type = SQZ_OPT_FLAG, .offset = offsetof(kargs, quick),
     .help = "m 1,16,128 and shapes 4096x4096, 8192x8192 (where --m / --nk are not given)"},
    {.name = "kernels", .type = SQZ_OPT_STRING, .offset = offsetof(kargs, kernels), .metavar = "LIST",
     .help = "which GPU kernels (default all): cublas_f16, cublaslt_i8, i8_lt, i8_mma, i8_mma_fusedq, "
             "w4_q4_0, w4_q4_1, w4_deq_cublas"},
    {.name = "min-time", .type = SQZ_OPT_FLOAT, .offset = offsetof(kargs, min_time), .flags = SQZ_OPT_OPEN_MIN,
     .min = 0, .max = 3600, .def = "0.2", .metavar = "S", .help = "seconds per measurement"},
    {.name = "device", .type = SQZ_OPT_INT, .offset = offsetof(kargs, device), .min = 0, .max = 1023, .def = "0",
     .help = "CUDA device"},
    {.name = "cpu-only", .type = SQZ_OPT_FLAG, .offset = offsetof(kargs, cpu_only), .help = "the CPU part only"},
    {.name = "gpu-only", .type = SQZ_OPT_FLAG, .offset = offsetof(kargs, gpu_only), .help = "the GPU part only"},
};

static const char kernels_head[] =
    "usage: sqz bench kernels [--m LIST] [--nk LIST] [--quick] [--kernels LIST] [--min-time S]\n"
    "                         [--device N] [--cpu-only | --gpu-only]\n\n"
    "On a CUDA device, the W8A8 and W4A16 GEMM kernels against cuBLAS fp16 and cuBLASLt INT8\n"
    "on llama-like shapes; on the CPU (n = k = 2048, m 1, 16, 64), the W8A8 reference and the\n"
    "W4A16 path against OpenBLAS sgemm, and the 2:4 sparse W8A8 reference against the dense one.\n"
    "Time is the median per call; TOPS = 2mnk / time; GB/s = minimum DRAM traffic / time;\n"
    "x_f16 and x_i8lt are speed-ups over cuBLAS fp16 and cuBLASLt INT8 on the same shape;\n"
    "%peak is against the dense tensor-core peak of the matching input type.\n";

static void bench_kernels_usage(FILE *out) {
    const sqz_opt_group g = {NULL, kernels_rows, SQZ_CLI_N(kernels_rows), NULL};
    sqz_cli_help(out, kernels_head, &g, 1);
}

static void kopts_defaults(kopts *o, bool quick) {
    static const int64_t dm[] = {1, 4, 16, 64, 128, 512, 4096}, qm[] = {1, 16, 128};
    static const int64_t dims[] = {4096, 11008, 14336, 8192};
    memset(o, 0, sizeof *o);
    for (int i = 0; i < (quick ? 3 : 7); i++) o->m[o->n_m++] = quick ? qm[i] : dm[i];
    for (int a = 0; a < 4; a++)
        for (int b = 0; b < 4; b++) {
            if (quick && (a != b || a == 1 || a == 2)) continue; /* 4096x4096, 8192x8192 */
            o->nk[o->n_nk][0] = dims[a];
            o->nk[o->n_nk][1] = dims[b];
            o->n_nk++;
        }
    for (int k = 0; k < SQZ_BENCH_KERNEL_COUNT; k++) o->kernel_on[k] = true;
}

/* --kernels LIST: 0, or 2 after the usage error. */
static int parse_kernel_list(const char *v, kopts *o) {
    for (int k = 0; k < SQZ_BENCH_KERNEL_COUNT; k++) o->kernel_on[k] = false;
    char *dup = strdup(v);
    if (!dup) return sqz_cli_fail(SQZ_ERR_NOMEM);
    for (char *tok = strtok(dup, ","); tok; tok = strtok(NULL, ",")) {
        int found = -1;
        for (int k = 0; k < SQZ_BENCH_KERNEL_COUNT; k++)
            if (strcmp(tok, sqz_bench_kernel_name((sqz_bench_kernel)k)) == 0) found = k;
        if (found < 0) {
            const int rc = sqz_cli_usage_error("bench kernels", "unknown kernel '%s' in --kernels", tok);
            free(dup);
            return rc;
        }
        o->kernel_on[found] = true;
    }
    free(dup);
    return 0;
}

static int parse_kopts(int argc, char **argv, kopts *o) {
    kargs a = {0};
    const sqz_opt_group g = {NULL, kernels_rows, SQZ_CLI_N(kernels_rows), &a};
    const int bad = sqz_cli_parse("bench kernels", &g, 1, argc, argv, NULL);
    if (bad) return bad;
    if (a.cpu_only && a.gpu_only)
        return sqz_cli_usage_error("bench kernels", "--cpu-only and --gpu-only exclude each other");
    kopts_defaults(o, a.quick);
    if (a.m && !parse_i64_list(a.m, o->m, &o->n_m))
        return sqz_cli_usage_error("bench kernels", "bad --m list '%s' (e.g. 1,16,128: 1 to 2^31, 32 at most)", a.m);
    if (a.nk && !parse_nk_list(a.nk, o->nk, &o->n_nk))
        return sqz_cli_usage_error("bench kernels", "bad --nk list '%s' (e.g. 4096x4096,11008x4096)", a.nk);
    const int rc = a.kernels ? parse_kernel_list(a.kernels, o) : 0;
    if (rc) return rc;
    o->min_time = a.min_time;
    o->device = (int)a.device;
    o->cpu = !a.gpu_only;
    o->gpu = !a.cpu_only;
    return 0;
}

/* ---- GPU -------------------------------------------------------------------------- */
static bool kernel_is_i8(sqz_bench_kernel k) {
    return k == SQZ_BENCH_CUBLASLT_I8 || k == SQZ_BENCH_I8_LT || k == SQZ_BENCH_I8_MMA || k == SQZ_BENCH_I8_MMA_FUSED;
}

static int bench_gpu(const kopts *o) {
    if (sqz_cuda_device_count() == 0) {
        /* why (no CUDA build, module or runtime not loadable, no device): an error when the GPU
         * part was asked for alone, a note after the CPU part otherwise */
        sqz_backend *none = NULL;
        const sqz_status s = sqz_backend_cuda(o->device, &none);
        sqz_backend_free(none);
        if (!o->cpu) return sqz_cli_fail(s != SQZ_OK ? s : SQZ_ERR_DEVICE);
        printf("no CUDA device (%s): kernel benchmarks need a GPU\n", s != SQZ_OK ? sqz_last_error() : "none found");
        return 0;
    }
    sqz_cuda_device_info info;
    sqz_status s = sqz_cuda_device_info_get(o->device, &info);
    if (s != SQZ_OK) return sqz_cli_fail(s);
    printf("GPU %d: %s, compute capability %d.%d, %d SMs at %.2f GHz, DRAM %.0f GB/s, %.1f GiB, L2 %.0f MiB\n",
           o->device, info.name, info.cc_major, info.cc_minor, info.sm_count, info.sm_clock_ghz, info.mem_bandwidth_gbs,
           (double)info.mem_bytes / (1 << 30), (double)info.l2_bytes / (1 << 20));
    if (info.peak_f16_tflops > 0)
        printf("dense tensor-core peak at that clock: fp16 %.0f TFLOPS, int8 %.0f TOPS (docs/kernels.md)\n",
               info.peak_f16_tflops, info.peak_i8_tops);
    else
        printf("peak: this architecture is not in sqz's table, %%peak is not shown\n");
    sqz_backend *b;
    s = sqz_backend_cuda(o->device, &b);
    if (s != SQZ_OK) return sqz_cli_fail(s);
    printf("\n%6s %6s %6s  %-14s %10s %8s %8s %7s %8s %6s %5s\n", "m", "n", "k", "kernel", "time_us", "TOPS", "GB/s",
           "x_f16", "x_i8lt", "%peak", "%bw");
    for (int s_i = 0; s_i < o->n_nk; s_i++)
        for (int m_i = 0; m_i < o->n_m; m_i++) {
            const int64_t m = o->m[m_i], n = o->nk[s_i][0], k = o->nk[s_i][1];
            double base[2] = {0, 0}; /* cuBLAS fp16, cuBLASLt int8 */
            for (int kk = 0; kk < SQZ_BENCH_KERNEL_COUNT; kk++) {
                const sqz_bench_kernel kern = (sqz_bench_kernel)kk;
                const bool is_base = kern == SQZ_BENCH_CUBLAS_F16 || kern == SQZ_BENCH_CUBLASLT_I8;
                if (!o->kernel_on[kk] && !is_base) continue;
                sqz_bench_result r;
                s = sqz_cuda_bench_gemm(b, kern, m, n, k, o->min_time, &r);
                if (s != SQZ_OK) {
                    if (o->kernel_on[kk])
                        printf("%6lld %6lld %6lld  %-14s %s\n", (long long)m, (long long)n, (long long)k,
                               sqz_bench_kernel_name(kern), sqz_last_error());
                    if (s != SQZ_ERR_UNSUPPORTED && s != SQZ_ERR_NOMEM) {
                        sqz_backend_free(b);
                        return sqz_cli_fail(s);
                    }
                    continue;
                }
                if (kern == SQZ_BENCH_CUBLAS_F16) base[0] = r.seconds;
                if (kern == SQZ_BENCH_CUBLASLT_I8) base[1] = r.seconds;
                if (!o->kernel_on[kk]) continue;
                const double peak = kernel_is_i8(kern) ? info.peak_i8_tops : info.peak_f16_tflops;
                const double tops = r.ops / r.seconds * 1e-12, gbs = r.bytes / r.seconds * 1e-9;
                char xf[16] = "-", xi[16] = "-", pk[16] = "-";
                if (base[0] > 0) snprintf(xf, sizeof xf, "%.2f", base[0] / r.seconds);
                if (base[1] > 0) snprintf(xi, sizeof xi, "%.2f", base[1] / r.seconds);
                if (peak > 0) snprintf(pk, sizeof pk, "%.1f", 100.0 * tops / peak);
                printf("%6lld %6lld %6lld  %-14s %10.1f %8.1f %8.0f %7s %8s %6s %5.0f\n", (long long)m, (long long)n,
                       (long long)k, sqz_bench_kernel_name(kern), r.seconds * 1e6, tops, gbs, xf, xi, pk,
                       100.0 * gbs / info.mem_bandwidth_gbs);
                fflush(stdout);
            }
        }
    sqz_backend_free(b);
    return 0;
}

/* ---- CPU -------------------------------------------------------------------------- */
typedef enum { CPU_SGEMM, CPU_I8, CPU_W4, CPU_I8_SP24 } cpu_kind;

typedef struct cpu_bufs {
    int64_t m, n, k;
    float *xf, *wf, *y, *xs, *ws;
    int8_t *xq, *wq;
    uint16_t *xh;
    void *w4;
    int8_t *sv;   /* 2:4: wq with 2 of every 4 zeroed, packed (sqz/sparse.h) */
    uint32_t *sm;
} cpu_bufs;

static sqz_status cpu_call(sqz_backend *b, cpu_kind kind, cpu_bufs *u) {
    if (kind == CPU_SGEMM) {
        sqz_matmul_args a = {.m = u->m, .n = u->n, .k = u->k, .x = u->xf, .w = u->wf, .w_dtype = SQZ_DTYPE_F32, .y = u->y};
        return sqz_backend_matmul(b, &a);
    }
    if (kind == CPU_I8) {
        sqz_gemm_i8_args a = {.m = u->m, .n = u->n, .k = u->k, .x_f32 = u->xf, .x = u->xq, .x_scale = u->xs,
                              .w = u->wq, .w_scale = u->ws, .y = u->y, .y_dtype = SQZ_DTYPE_F32};
        return sqz_backend_gemm_i8(b, &a);
    }
    if (kind == CPU_I8_SP24) {
        sqz_gemm_i8_sp24_args a = {.m = u->m, .n = u->n, .k = u->k, .x_f32 = u->xf, .x = u->xq, .x_scale = u->xs,
                                   .values = u->sv, .meta = u->sm, .w_scale = u->ws, .y = u->y,
                                   .y_dtype = SQZ_DTYPE_F32};
        return sqz_backend_gemm_i8_sp24(b, &a);
    }
    sqz_gemm_w4_args a = {.m = u->m, .n = u->n, .k = u->k, .x = u->xh, .w = u->w4, .y = u->y, .y_dtype = SQZ_DTYPE_F32};
    return sqz_backend_gemm_w4(b, &a);
}

/* CPU timing: calls until min_time has passed; mean seconds per call. */
static sqz_status cpu_time(sqz_backend *b, cpu_kind kind, cpu_bufs *u, double min_time, double *sec) {
    sqz_status s = cpu_call(b, kind, u); /* warm-up */
    if (s != SQZ_OK) return s;
    int calls = 0;
    const double t0 = sqz_now_seconds();
    double t;
    do {
        if ((s = cpu_call(b, kind, u)) != SQZ_OK) return s;
        calls++;
        t = sqz_now_seconds() - t0;
    } while (t < min_time);
    *sec = t / calls;
    return SQZ_OK;
}

/* u->wq with 2 of every 4 values zeroed (the kept pair moving along the row), packed. */
static sqz_status sp24_weights(cpu_bufs *u) {
    int8_t *w = malloc((size_t)(u->n * u->k));
    u->sv = malloc((size_t)(u->n * u->k / 2));
    u->sm = malloc(sizeof(uint32_t) * (size_t)(u->n * u->k / 32));
    sqz_status s = w && u->sv && u->sm ? SQZ_OK : SQZ_ERR_NOMEM;
    for (int64_t g = 0; s == SQZ_OK && g < u->n * u->k / 4; g++)
        for (int i = 0; i < 4; i++) w[4 * g + i] = (i == g % 4 || i == (g + 1 + g / 4 % 3) % 4) ? u->wq[4 * g + i] : 0;
    if (s == SQZ_OK) s = sqz_sp24_pack_i8(w, u->n, u->k, u->sv, u->sm);
    free(w);
    return s;
}

static int bench_cpu(const kopts *o) {
    const int64_t n = 2048, k = 2048, ms[] = {1, 16, 64};
    sqz_backend *b;
    sqz_status s = sqz_backend_cpu(0, &b);
    if (s != SQZ_OK) return sqz_cli_fail(s);
    cpu_bufs u = {.n = n, .k = k};
    const int64_t mmax = 64;
    u.xf = malloc(sizeof(float) * mmax * k);
    u.wf = malloc(sizeof(float) * n * k);
    u.y = malloc(sizeof(float) * mmax * n);
    u.xs = malloc(sizeof(float) * mmax);
    u.ws = malloc(sizeof(float) * n);
    u.xq = malloc(mmax * k);
    u.wq = malloc(n * k);
    u.xh = malloc(sizeof(uint16_t) * mmax * k);
    uint8_t *blocks = malloc((size_t)n * (k / 32) * 18);
    if (!u.xf || !u.wf || !u.y || !u.xs || !u.ws || !u.xq || !u.wq || !u.xh || !blocks) {
        s = SQZ_ERR_NOMEM;
        goto done;
    }
    uint32_t r = 12345;
    for (int64_t i = 0; i < mmax * k; i++) {
        r = r * 1664525u + 1013904223u;
        u.xf[i] = (float)(r >> 8) / 16777216.0f - 0.5f;
        u.xh[i] = sqz_fp32_to_fp16(u.xf[i]);
    }
    for (int64_t i = 0; i < n * k; i++) {
        r = r * 1664525u + 1013904223u;
        u.wq[i] = (int8_t)(r >> 24);
        u.wf[i] = u.wq[i] * 0.001f;
    }
    for (int64_t j = 0; j < n; j++) u.ws[j] = 0.001f;
    for (size_t i = 0; i < (size_t)n * (k / 32) * 18; i++) {
        r = r * 1664525u + 1013904223u;
        blocks[i] = (uint8_t)(r >> 24);
    }
    for (size_t i = 0; i < (size_t)n * (k / 32); i++) { /* block scale d = 2^-8: fp16 0x1C00, little-endian */
        blocks[i * 18] = 0x00;
        blocks[i * 18 + 1] = 0x1C;
    }
    if ((s = sqz_backend_prepare_w4(b, blocks, SQZ_DTYPE_Q4_0, n, k, &u.w4)) != SQZ_OK) goto done;
    if ((s = sp24_weights(&u)) != SQZ_OK) goto done;
    printf("\nCPU: W8A8 (exact int32, AVX2 when present) and W4A16 (prepared layout -> sgemm) vs OpenBLAS sgemm, "
           "n = k = %lld; w8a8 2:4: the exact scalar reference on the compressed 2:4 weight (sqz/sparse.h)\n",
           (long long)n);
    printf("%6s  %-18s %10s %8s %9s\n", "m", "path", "time_ms", "GOPS", "x_sgemm");
    for (int i = 0; i < 3; i++) {
        u.m = ms[i];
        double t_sgemm = 0, t_i8 = 0, t;
        const double ops = 2.0 * u.m * n * k;
        static const char *names[] = {"sgemm (OpenBLAS)", "w8a8 (exact)", "w4a16 (q4_0)", "w8a8 2:4 (ref)"};
        for (int kind = CPU_SGEMM; kind <= CPU_I8_SP24; kind++) {
            if ((s = cpu_time(b, (cpu_kind)kind, &u, o->min_time, &t)) != SQZ_OK) goto done;
            if (kind == CPU_SGEMM) t_sgemm = t;
            if (kind == CPU_I8) t_i8 = t;
            printf("%6lld  %-18s %10.3f %8.2f %9.2f\n", (long long)u.m, names[kind], t * 1e3, ops / t * 1e-9,
                   t_sgemm / t);
            fflush(stdout);
        }
        printf("%6lld  w8a8 2:4 (ref) vs w8a8 (exact): x%.2f\n", (long long)u.m, t_i8 / t);
    }
done:
    free(u.sv);
    free(u.sm);
    sqz_backend_release(b, u.w4);
    free(u.xf); free(u.wf); free(u.y); free(u.xs); free(u.ws); free(u.xq); free(u.wq); free(u.xh); free(blocks);
    sqz_backend_free(b);
    return s == SQZ_OK ? 0 : sqz_cli_fail(s);
}

static int bench_kernels(int argc, char **argv) {
    kopts o;
    const int rc = parse_kopts(argc, argv, &o);
    if (rc != 0) return rc;
    if (o.gpu) {
        const int g = bench_gpu(&o);
        if (g != 0) return g;
    }
    if (o.cpu) return bench_cpu(&o);
    return 0;
}

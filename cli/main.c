/* cli/main.c - `sqz`: dispatch to the subcommands registered in one table. */
#include <signal.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "cli/cli.h"
#include "sqz/dist.h"

static const sqz_cmd commands[] = {
    {.name = "inspect", .summary = "show a checkpoint's architecture, parameters and tensors", .run = sqz_cmd_inspect,
     .usage = sqz_cmd_inspect_usage},
    {.name = "convert", .summary = "convert between llama2.c, GGUF and HF safetensors (and from sqz's ONNX)", .run = sqz_cmd_convert,
     .usage = sqz_cmd_convert_usage, .outputs_together = true},
    {.name = "export", .summary = "export for deployment: GGUF, HF safetensors, or a signed checksummed bundle "
     "for sqz-edge", .run = sqz_cmd_export, .usage = sqz_cmd_export_usage, .outputs_together = true},
    {.name = "generate", .summary = "generate text from a decoder (greedy at temperature 0)", .run = sqz_cmd_generate,
     .usage = sqz_cmd_generate_usage},
    {.name = "eval", .summary = "perplexity, KL divergence and top-1 agreement against a base; embedding similarity",
     .run = sqz_cmd_eval, .usage = sqz_cmd_eval_usage, .outputs_together = true},
    {.name = "calibrate", .summary = "run calibration text through a model and save the activation statistics",
     .run = sqz_cmd_calibrate, .usage = sqz_cmd_calibrate_usage, .outputs_together = true},
    {.name = "compress",
     .summary = "run a recipe of passes (quantization, pruning, sparsity, layer removal) on a model, with a report "
                "and the accuracy cost", .run = sqz_cmd_compress, .usage = sqz_cmd_compress_usage,
     .outputs_together = true},
    {.name = "quantize", .summary = "llama-quantize's command line (IN [OUT] TYPE [THREADS]), run as compress",
     .run = sqz_cmd_quantize, .usage = sqz_cmd_quantize_usage, .outputs_together = true},
    {.name = "perplexity", .summary = "llama.cpp's name for eval", .alias_of = "eval"},
    {.name = "bench",
     .summary = "benchmarks (kernels, eval, compress, prune, sparsity, layerdrop, edge, ...), each against a baseline",
     .run = sqz_cmd_bench, .usage = sqz_cmd_bench_usage, .help_of = sqz_cmd_bench_help},
};
static const int n_commands = (int)(sizeof commands / sizeof commands[0]);

int sqz_cli_fail(sqz_status s) {
    const char *msg = sqz_last_error();
    /* An allocation refused under an address-space limit says which limit. */
    char hint[96] = "";
    struct rlimit rl;
    if (s == SQZ_ERR_NOMEM && getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
        snprintf(hint, sizeof hint, " (the address space is limited to %llu MB: ulimit -v)",
                 (unsigned long long)(rl.rlim_cur >> 20));
    return sqz_cli_error("%s%s", *msg ? msg : sqz_status_message(s), hint);
}

int sqz_cli_error(const char *fmt, ...) {
    char msg[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (sqz_dist_size() > 1) fprintf(stderr, "sqz: error: rank %d of %d: %s\n", sqz_dist_rank(), sqz_dist_size(), msg);
    else fprintf(stderr, "sqz: error: %s\n", msg);
    return 1;
}

int sqz_cli_usage_error(const char *cmd, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "sqz %s: ", cmd);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, " (see 'sqz %s --help')\n", cmd);
    va_end(ap);
    return 2;
}

static void usage(FILE *out) {
    fprintf(out, "sqz %s - compress transformer checkpoints and measure what it cost\n\n", SQZ_VERSION_STRING);
    fprintf(out, "usage: sqz <command> [options]\n\ncommands:\n");
    for (int i = 0; i < n_commands; i++) fprintf(out, "  %-10s %s\n", commands[i].name, commands[i].summary);
    fprintf(out, "\n'sqz <command> --help' describes a command.\n");
}

/* A command whose outputs appear together or not at all. Under mpirun (sqz/dist.h) every rank
 * runs it and rank 0 alone writes the outputs and prints (the others write to /dev/null);
 * a rank that fails ends the whole job (MPI_Abort) after removing its temporaries, and the
 * others are then killed by signal, which removes theirs (core/temps.c). */
static int run_together(const sqz_cmd *c, int argc, char **argv) {
    sqz_status st = sqz_dist_init(&argc, &argv);
    if (st != SQZ_OK) return sqz_cli_fail(st);
    const bool dist = sqz_dist_size() > 1, root = sqz_dist_rank() == 0;
    if (dist && !root) {
        sqz_io_discard_outputs(); /* rank 0 writes; the others leave nothing, even when killed */
        if (!freopen("/dev/null", "w", stdout)) return 1;
    }
    sqz_io_defer_begin();
    int rc = c->run(argc, argv);
    if (root) sqz_profile_print(stderr);
    st = sqz_io_defer_end(rc == 0 && root);
    if (st != SQZ_OK) rc = sqz_cli_fail(st);
    if (dist && rc != 0) {
        fflush(NULL);
        sqz_dist_abort(rc);
    }
    if (dist && getenv("SQZ_DIST_REPORT")) { /* one line per rank for `sqz bench distributed` */
        struct rusage ru;
        getrusage(RUSAGE_SELF, &ru);
        fprintf(stderr, "sqz-dist: rank %d of %d: peak RSS %ld kB, sent %llu bytes\n", sqz_dist_rank(),
                sqz_dist_size(), ru.ru_maxrss, (unsigned long long)sqz_dist_bytes_sent());
    }
    sqz_dist_finalize();
    return rc;
}

/* The row of command `name`; an alias's (alias_of) is its command's. */
static const sqz_cmd *find_command(const char *name) {
    for (int i = 0; i < n_commands; i++)
        if (strcmp(name, commands[i].name) == 0)
            return commands[i].alias_of ? find_command(commands[i].alias_of) : &commands[i];
    return NULL;
}

/* A command's help: its usage, then llama.cpp's spellings it refuses. */
static void command_usage(const sqz_cmd *c) {
    c->usage(stdout);
    sqz_cli_llamacpp_help(stdout, c->name);
}

/* An unknown command: one line (git's habit), not the whole list. */
static int unknown_command(const char *name) {
    fprintf(stderr, "sqz: unknown command '%s' (see 'sqz --help')\n", name);
    return 2;
}

/* `sqz help [COMMAND [SUB]]`: what `sqz COMMAND [SUB] --help` prints. */
static int help(int argc, char **argv) {
    if (argc < 3) {
        usage(stdout);
        return 0;
    }
    const sqz_cmd *c = find_command(argv[2]);
    if (!c) return unknown_command(argv[2]);
    if (c->help_of) return c->help_of(argc - 2, argv + 2);
    command_usage(c);
    return 0;
}

#define SQZ_BLAS_THREAD_TIMEOUT "18"

/* OpenBLAS reads its settings only when it loads, so the program runs itself again (once) with them set
 * where the user set none (SQZ_BLAS_KEEP=1 keeps the BLAS as it is):
 *   - OPENBLAS_CORETYPE when the BLAS chose less than the CPU's feature bits allow: an OpenBLAS older
 *     than the CPU runs its oldest kernels (4-7x slower sgemm);
 *   - OPENBLAS_THREAD_TIMEOUT=18 (idle threads poll 2^18 cycles, ~0.1 ms as sqz's pool does, then
 *     sleep; OpenBLAS's own default is 2^28, ~0.1 s): its polling threads, calling sched_yield, took
 *     the cores from sqz's pool between BLAS calls (SmolLM2 compress q4_0:gptq on 2 cores: 46-51 s ->
 *     36-38 s; the 1.5B's eval 35 -> 33 s). */
static void blas_env(char **argv) {
    if (getenv("SQZ_BLAS_KEEP")) return;
    bool timeout = false, core = false;
    if (!getenv("OPENBLAS_THREAD_TIMEOUT") && setenv("OPENBLAS_THREAD_TIMEOUT", SQZ_BLAS_THREAD_TIMEOUT, 1) == 0) {
        setenv("SQZ_BLAS_TIMEOUT_BY", "1", 1); /* for --version --verbose */
        timeout = true;
    }
    sqz_blas_info b;
    sqz_blas_info_get(&b);
    if (!getenv("OPENBLAS_CORETYPE") && b.better[0] && setenv("OPENBLAS_CORETYPE", b.better, 1) == 0) {
        setenv("SQZ_BLAS_CHOSEN_BY", b.core, 1); /* what OpenBLAS chose itself: for --version --verbose */
        core = true;
    }
    if (!timeout && !core) return;
    /* the binary's own path, not /proc/self/exe: the process keeps its name ("sqz", not "exe") for ps,
     * pgrep and mpirun's messages */
    char self[4096];
    const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n > 0) self[n] = 0;
    execv(n > 0 ? self : "/proc/self/exe", argv);
    if (core) unsetenv("OPENBLAS_CORETYPE"); /* exec failed: go on with the BLAS as it is (the user's own */
    if (timeout) unsetenv("OPENBLAS_THREAD_TIMEOUT"); /* settings stay) */
}

/* `sqz --version [--verbose]`: the version; verbose: the BLAS, its kernels, sgemm's speed and the
 * instruction sets of sqz's own kernels. */
static int version(int argc, char **argv) {
    printf("sqz %s\n", SQZ_VERSION_STRING);
    if (argc < 3 || (strcmp(argv[2], "--verbose") && strcmp(argv[2], "-v"))) return 0;
    sqz_blas_info b;
    sqz_blas_info_get(&b);
    const char *chosen = getenv("SQZ_BLAS_CHOSEN_BY");
    static const char *tiers[] = {"unknown", "SSE", "AVX2+FMA", "AVX-512", "AVX-512 with BF16"};
    printf("blas         %s\n", b.config);
    printf("blas core    %s (%s); this CPU allows %s", b.core, tiers[b.core_tier], tiers[b.cpu_tier]);
    if (chosen) printf("; OpenBLAS chose %s itself, sqz set OPENBLAS_CORETYPE=%s", chosen, getenv("OPENBLAS_CORETYPE"));
    else if (getenv("OPENBLAS_CORETYPE")) printf("; OPENBLAS_CORETYPE=%s given", getenv("OPENBLAS_CORETYPE"));
    const char *to = getenv("OPENBLAS_THREAD_TIMEOUT");
    printf("\nblas waits   %s%s%s\n", to ? "OPENBLAS_THREAD_TIMEOUT=" : "OpenBLAS's default (2^28 cycles)", to ? to : "",
           to && getenv("SQZ_BLAS_TIMEOUT_BY") ? " (set by sqz: idle threads sleep after 2^18 cycles)" : "");
    printf("sgemm        %.1f GFLOP/s (2048 x 2048 x 2048, the best of 3)\n", sqz_blas_sgemm_gflops(2048));
    printf("kernels      %s\n", sqz_cpu_kernels());
    return 0;
}

int main(int argc, char **argv) {
    blas_env(argv);
    if (argc >= 2 && strcmp(argv[1], "help") == 0) return help(argc, argv);
    if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (strcmp(argv[1], "--version") == 0) return version(argc, argv);
    const sqz_cmd *c = find_command(argv[1]);
    if (!c) return unknown_command(argv[1]);
    for (int a = 2; a < argc; a++) {
        if (strcmp(argv[a], "--help") == 0 || strcmp(argv[a], "-h") == 0) {
            if (c->help_of) return c->help_of(argc - 1, argv + 1);
            command_usage(c);
            return 0;
        }
    }
    /* A file-size limit (ulimit -f) is then an EFBIG from write(): the writer names the
     * output and the limit, instead of a silent death by SIGXFSZ. */
    signal(SIGXFSZ, SIG_IGN);
    sqz_io_cleanup_on_signals();
    if (!c->outputs_together) {
        const int rc = c->run(argc - 1, argv + 1);
        sqz_profile_print(stderr);
        return rc;
    }
    return run_together(c, argc - 1, argv + 1);
}

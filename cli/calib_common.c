/* cli/calib_common.c - what `sqz calibrate` and `sqz compress` share: the calibration
 * options (one table, a group of both commands' command lines), reading the text into
 * windows, and the session that runs them. */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

#define STR_(x) #x
#define STR(x) STR_(x)

const sqz_opt sqz_cli_calib_opts[] = {
    {.name = "calib", .type = SQZ_OPT_STRING, .offset = offsetof(sqz_cli_calib, text), .flags = SQZ_OPT_INPUT,
     .metavar = "FILE",
     .alias = "text", .short_name = 'f', .help = "calibration text (windows spread over the whole of it)"},
    {.name = "calib-samples", .type = SQZ_OPT_INT, .offset = offsetof(sqz_cli_calib, samples), .min = 1,
     .max = 1 << 20, .def = STR(SQZ_CALIB_DEFAULT_SAMPLES), .metavar = "N", .alias = "samples",
     .help = "calibration windows (16,384 tokens at the default ctx: full-rank Hessians up to 16,384 inputs; "
             "more took 4x longer and did no better on SmolLM2-135M: docs/compress.md, \"Defaults\")"},
    {.name = "calib-ctx", .type = SQZ_OPT_INT, .offset = offsetof(sqz_cli_calib, ctx), .min = 2, .max = 1 << 20,
     .def = STR(SQZ_CALIB_DEFAULT_CTX), .metavar = "T", .alias = "ctx", .help = "tokens per window"},
    {.name = "seed", .type = SQZ_OPT_INT, .offset = offsetof(sqz_cli_calib, seed), .min = 0,
     .max = (double)INT64_MAX, .def = STR(SQZ_CALIB_DEFAULT_SEED), .metavar = "S",
     .help = "where the windows start in the text"},
    {.name = "sample-rows", .type = SQZ_OPT_INT, .offset = offsetof(sqz_cli_calib, sample_rows), .min = 0,
     .max = 1 << 20, .metavar = "R",
     .help = "input rows kept per layer for the searches and validation; by default calibrate keeps "
             "128, compress 512"},
    {.name = "threads", .type = SQZ_OPT_INT, .offset = offsetof(sqz_cli_calib, threads), .min = 0, .max = 1024,
     .def = "0", .metavar = "N", .short_name = 't', .help = "CPU threads, 0 for all cores"},
    {.name = "tokenizer", .type = SQZ_OPT_STRING, .offset = offsetof(sqz_cli_calib, tokenizer), .flags = SQZ_OPT_INPUT,
     .metavar = "FILE",
     .help = "llama2.c tokenizer.bin (default: beside the checkpoint)"},
    {.name = "stats-partition", .type = SQZ_OPT_CHOICE, .offset = offsetof(sqz_cli_calib, partition),
     .choices = "owner|replicate", .def = "owner",
     .help = "under mpirun: owner: each linear input's statistics formed by one rank from every window's "
             "activations (Hessians in row panels spread over the ranks), the GPTQ/RTN/imatrix solve of its layers "
             "on that rank alone, the same bytes as one process; replicate: every rank sums its windows and merges "
             "every rank's partial sums, solving everything (docs/distributed.md)"},
    {.name = "device", .type = SQZ_OPT_CHOICE, .offset = offsetof(sqz_cli_calib, device),
     .choices = "cpu|cuda|cpu-offload", .def = "cpu",
     .help = "where calibration runs: cuda: each block's forward (norms, products, rotary, attention, SwiGLU), "
             "the Hessians, GPTQ's Cholesky factor and updates and the layer validation on the first GPU, one "
             "block's weights at a time (docs/device.md); cpu-offload: the same device code path on the CPU (a "
             "check of it, slower than cpu); SQZ_PROFILE=1 prints where the time went, phase by phase, at the end; "
             "SQZ_HOST_FORWARD=1 keeps the block's activations on the host (products on the device)"},
    {.name = "gpu-mem", .type = SQZ_OPT_INT, .offset = offsetof(sqz_cli_calib, gpu_mem), .min = 0,
     .max = 1 << 30, .def = "0", .metavar = "MIB",
     .help = "with --device cuda (or cpu-offload): the most sqz allocates on the device, in MiB; under a cap the "
             "Hessians stay on the host (one panel on the device at a time), GPTQ's factor is formed in cached "
             "tiles and crosses in rows, and the output is the uncapped run's, byte for byte; about two blocks' "
             "f32 weights suffice (357 for Qwen2.5-1.5B); below what one block needs the run stops naming what did "
             "not fit; 0 = no cap"},
};
const int sqz_cli_calib_n_opts = (int)(sizeof sqz_cli_calib_opts / sizeof sqz_cli_calib_opts[0]);

void sqz_cli_calib_defaults(sqz_cli_calib *c) {
    memset(c, 0, sizeof *c);
    (void)sqz_opts_defaults(sqz_cli_calib_opts, sqz_cli_calib_n_opts, c); /* the table's own: cannot fail */
    c->sample_rows = -1;
}

sqz_status sqz_cli_backend_open(const sqz_cli_calib *c, sqz_backend **be) {
    *be = NULL;
    if (c->device == SQZ_CLI_DEVICE_CPU) return sqz_backend_cpu((int)c->threads, be);
    sqz_status st = c->device == SQZ_CLI_DEVICE_CPU_OFFLOAD ? sqz_backend_cpu_offload((int)c->threads, be)
                                                             : sqz_backend_cuda(-1, be);
    if (st != SQZ_OK) return st;
    if (c->gpu_mem > 0 && (st = sqz_backend_set_mem_cap(*be, (size_t)c->gpu_mem << 20)) != SQZ_OK) {
        sqz_backend_free(*be);
        *be = NULL;
    }
    return st;
}

sqz_status sqz_cli_calib_check(const sqz_cli_calib *c, const sqz_model *m) {
    const sqz_size_term t[] = {{"--calib-samples", c->samples}, {"--calib-ctx", c->ctx},
                               {"d_model", m->hp.d_model}, {"bytes per float", 4}};
    return sqz_opts_check_size("calibration activations", t, 4, sqz_cli_memory_limit(), "the memory");
}

sqz_status sqz_cli_calib_open(const sqz_cli_calib *c, const sqz_model *m, sqz_backend *be, sqz_calib_windows *w,
                              sqz_session **s) {
    char *text = NULL;
    size_t len = 0;
    sqz_tokenizer *tok = NULL;
    *s = NULL;
    memset(w, 0, sizeof *w);
    sqz_status st = sqz_read_file(c->text, (size_t)1 << 31, &text, &len);
    if (st == SQZ_OK) st = sqz_tokenizer_new(&m->vocab, &tok);
    if (st == SQZ_OK) st = sqz_calib_windows_make(tok, text, len, c->samples, c->ctx, c->seed, w);
    free(text);
    sqz_tokenizer_free(tok);
    if (st == SQZ_OK) {
        sqz_session_opts so = sqz_session_default_opts();
        so.n_threads = c->threads;
        so.max_tokens = c->ctx;
        so.backend = be;
        st = sqz_session_new(m, &so, s);
    }
    if (st != SQZ_OK) sqz_calib_windows_free(w);
    return st;
}

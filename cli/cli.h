/* cli/cli.h - the subcommand table and helpers the subcommands share. */
#ifndef SQZ_CLI_H
#define SQZ_CLI_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "sqz/sqz.h"

typedef struct sqz_cmd {
    const char *name;
    const char *summary;
    int (*run)(int argc, char **argv); /* argv[0] is the subcommand name; returns the exit status */
    void (*usage)(FILE *out);
    /* optional: prints the help of what argv names (a command with sub-commands); returns the
     * exit status. NULL: usage(stdout). */
    int (*help_of)(int argc, char **argv);
    /* the command's outputs appear together at its successful end, or none does
     * (sqz_io_defer_begin / sqz_io_defer_end around run) */
    bool outputs_together;
    /* another tool's name for command `alias_of` (llama.cpp's "perplexity" for "eval"): the row
     * needs only name, summary and alias_of */
    const char *alias_of;
} sqz_cmd;

/* Prints "sqz: error: <last error>" (or msg) to stderr and returns 1. */
int sqz_cli_fail(sqz_status s);
/* Prints "sqz: error: <printf message>" (under MPI "sqz: error: rank R of N: ...") and returns 1. */
int sqz_cli_error(const char *fmt, ...);
/* Prints "sqz <cmd>: <printf message> (see 'sqz <cmd> --help')" to stderr and returns 2
 * (usage error). */
int sqz_cli_usage_error(const char *cmd, const char *fmt, ...);
/* Rows of a static option table. */
#define SQZ_CLI_N(rows) ((int)(sizeof(rows) / sizeof((rows)[0])))
/* Parses a command line (argv[0] is the command's name) against option tables
 * (sqz_opts_parse_argv: each group's defaults first, then the words). Returns 0, or prints
 * the usage error ("sqz <cmd>: unknown option '--frob' (see ...)") and returns 2. given[g]
 * (may be NULL) gets the bits of the rows of group g that were given. */
/* llama.cpp's spellings that command `cmd` refuses, each with sqz's (SQZ_OPT_REFUSE rows,
 * cli/llamacpp.c); NULL and *n = 0 for a command without. sqz_cli_parse adds them to the
 * groups it parses. */
const sqz_opt *sqz_cli_llamacpp_refused(const char *cmd, int *n);
/* Those rows as a section of `cmd`'s help (nothing for a command without). */
void sqz_cli_llamacpp_help(FILE *out, const char *cmd);
int sqz_cli_parse(const char *cmd, const sqz_opt_group *g, int ng, int argc, char **argv, uint64_t *given);
/* After parsing (sqz_cli_parse calls it): the rows flagged SQZ_OPT_INPUT are what the command
 * reads, SQZ_OPT_OUTPUT what it writes. Refuses (usage error, exit 2, one line naming both
 * paths) an output that is an input (same file), an existing directory output that holds an
 * input, an existing output inside an input directory, two outputs naming the same path (or
 * one inside the other's directory), and a target that cannot be replaced (a FIFO, a device,
 * a socket; a directory sqz did not write unless a --force flag row was given). Returns 0. */
int sqz_cli_check_paths(const char *cmd, const sqz_opt_group *g, int ng, int argc, char **argv);
/* The memory sizes derived from options are checked against (sqz_opts_check_size): the
 * physical memory, or the address-space limit (ulimit -v) when lower. */
uint64_t sqz_cli_memory_limit(void);
/* A command's --help: the hand-written usage line and description (ending in a newline),
 * then "options:" and the list generated from the tables. */
void sqz_cli_help(FILE *out, const char *usage_and_description, const sqz_opt_group *g, int ng);
/* --quiet, the one row the long commands (compress, calibrate, eval, convert, export,
 * generate) share: a group of its own in their tables, {NULL, &sqz_cli_quiet_opt, 1, &quiet}
 * with a bool quiet. */
extern const sqz_opt sqz_cli_quiet_opt;
/* --hf-format LAYOUT (convert, export, compress): an sqz_hf_format into an int, a group of its own
 * like --quiet: {NULL, &sqz_cli_hf_format_opt, 1, &hf_format}. */
extern const sqz_opt sqz_cli_hf_format_opt;
/* The progress of a long stage (sqz/progress.h: a line on a terminal, plain lines into a log);
 * NULL, which every sqz_progress function accepts, with --quiet and on MPI ranks other than 0. */
sqz_progress *sqz_cli_progress(bool quiet, const char *label, int64_t total, const char *unit);
/* Where scripts/setup.sh puts SmolLM2-135M ($SQZ_PYMODELS or ~/.cache/sqz/pymodels); static buffer. */
const char *sqz_cli_default_smollm2(void);

int sqz_cmd_inspect(int argc, char **argv);
void sqz_cmd_inspect_usage(FILE *out);
int sqz_cmd_convert(int argc, char **argv);
void sqz_cmd_convert_usage(FILE *out);
int sqz_cmd_export(int argc, char **argv);
void sqz_cmd_export_usage(FILE *out);
int sqz_cmd_generate(int argc, char **argv);
void sqz_cmd_generate_usage(FILE *out);
int sqz_cmd_eval(int argc, char **argv);
void sqz_cmd_eval_usage(FILE *out);
/* `sqz eval MODEL --task KIND FILE` (cli/eval_tasks.c): task accuracy, with --base the delta. */
typedef struct sqz_cli_task_args {
    const char *model, *base, *file, *json, *tokpath;
    int kind;                     /* sqz_task_kind */
    int64_t limit, ctx, threads;  /* limit 0: every task; ctx 0: as long as the longest task */
    int acts;                     /* sqz_activations */
    bool stream, quiet;
} sqz_cli_task_args;
int sqz_cli_eval_tasks(const sqz_cli_task_args *a);
/* `sqz compress --eval-task KIND FILE` (cli/compress_tasks.c): argv with the option's two words
 * joined into --eval-task=KIND:FILE (free with sqz_cli_join_eval_task_free); the spec parsed
 * (0, or the usage error's status); the task file read before any work; the summary lines. */
char **sqz_cli_join_eval_task(int argc, char **argv, int *out_argc);
void sqz_cli_join_eval_task_free(int argc, char **orig, int n, char **v);
int sqz_cli_eval_task_spec(const char *spec, int *kind, const char **file);
sqz_status sqz_cli_eval_task_check(int kind, const char *file, int64_t limit);
struct sqz_compress_tasks;
void sqz_cli_print_tasks(const struct sqz_compress_tasks *t);
/* `sqz bench eval` (cli/bench_eval.c), a row of the bench table; argv[0] is "eval". */
int sqz_bench_eval(int argc, char **argv);
void sqz_bench_eval_usage(FILE *out);
/* `sqz bench eval --text/--llama-cpp` (cli/bench_vs_llamacpp.c): sqz's eval (a child `sqz eval`)
 * and generation beside llama.cpp's llama-perplexity and llama-bench on the same file. */
typedef struct sqz_cli_vs_opts {
    const char *model, *text;  /* text NULL: generation only */
    const char *llama_dir;     /* NULL: sqz's numbers only */
    int64_t ctx, chunks, gen, threads;
} sqz_cli_vs_opts;
/* Prints the table (and adds "vs_llama_cpp" to json when non-NULL); returns the exit status. */
struct cJSON;
int sqz_cli_bench_vs_llamacpp(const sqz_cli_vs_opts *o, struct cJSON *json);

/* ---- calibration and compression (cli/calib_common.c, cmd_calibrate.c, cmd_compress.c,
 * report_html.c) ---- */
int sqz_cmd_calibrate(int argc, char **argv);
void sqz_cmd_calibrate_usage(FILE *out);
int sqz_cmd_compress(int argc, char **argv);
/* `sqz quantize`: llama-quantize's command line, run as sqz compress (cli/cmd_quantize.c) */
void sqz_cmd_quantize_usage(FILE *out);
int sqz_cmd_quantize(int argc, char **argv);
void sqz_cmd_compress_usage(FILE *out);
/* `sqz bench compress` (cli/bench_compress.c), a row of the bench table; argv[0] is "compress". */
int sqz_bench_compress(int argc, char **argv);
void sqz_bench_compress_usage(FILE *out);
/* `sqz bench layerdrop` (cli/bench_layerdrop.c): layer removal by method, with and without
 * compensation, against the last-n and random baselines; argv[0] is "layerdrop". */
int sqz_bench_layerdrop(int argc, char **argv);
void sqz_bench_layerdrop_usage(FILE *out);
/* `sqz bench prune` (cli/bench_prune.c). */
int sqz_bench_prune(int argc, char **argv);
void sqz_bench_prune_usage(FILE *out);
/* `sqz bench sparsity` (cli/bench_sparsity.c): magnitude / wanda / sparsegpt at 50% and 2:4,
 * alone and with INT8 / INT4; exit 1 when the papers' ordering fails. */
int sqz_bench_sparsity(int argc, char **argv);
void sqz_bench_sparsity_usage(FILE *out);
/* `sqz bench edge` (cli/bench_edge.c): the edge runtime's size, memory and speed budgets. */
int sqz_bench_edge(int argc, char **argv);
void sqz_bench_edge_usage(FILE *out);

/* `sqz bench distributed` (cli/bench_distributed.c): calibration + GPTQ on 1 and R MPI ranks,
 * both statistics partitions: time, bytes, memory, identical outputs. */
int sqz_bench_distributed(int argc, char **argv);
void sqz_bench_distributed_usage(FILE *out);

/* The calibration options both commands take (filled through sqz_cli_calib_opts). */
typedef struct sqz_cli_calib {
    const char *text;       /* --calib FILE (alias --text) */
    const char *tokenizer;  /* --tokenizer FILE (llama2.c) */
    int64_t samples, ctx;   /* --calib-samples N, --calib-ctx T */
    int64_t seed;           /* --seed S */
    int64_t sample_rows;    /* --sample-rows R; -1 = the command's default */
    int64_t threads;        /* --threads N */
    int partition;          /* --stats-partition owner|replicate (sqz_calib_partition) */
    int device;             /* --device cpu|cuda|cpu-offload (SQZ_CLI_DEVICE_*) */
    int64_t gpu_mem;        /* --gpu-mem MIB; 0 = no cap */
} sqz_cli_calib;
enum { SQZ_CLI_DEVICE_CPU = 0, SQZ_CLI_DEVICE_CUDA = 1, SQZ_CLI_DEVICE_CPU_OFFLOAD = 2 };
/* The backend --device names (with --gpu-mem's cap), owned by the caller (sqz_backend_free);
 * a missing GPU is sqz_backend_cuda's error. (Commands refuse --gpu-mem without --device cuda as usage.) */
sqz_status sqz_cli_backend_open(const sqz_cli_calib *c, sqz_backend **be);
/* The rows of sqz_cli_calib, a group of its own in a command's tables:
 *   {"calibration", sqz_cli_calib_opts, sqz_cli_calib_n_opts, &cc} */
extern const sqz_opt sqz_cli_calib_opts[];
extern const int sqz_cli_calib_n_opts;
/* The table's defaults, and sample_rows -1 (the command's default). Call before parsing. */
void sqz_cli_calib_defaults(sqz_cli_calib *c);
/* The calibration activations (N windows x T tokens x d_model floats) fit in memory
 * (sqz_opts_check_size): checked before the text is read. SQZ_ERR_INVALID_ARG otherwise. */
sqz_status sqz_cli_calib_check(const sqz_cli_calib *c, const sqz_model *m);
/* Reads and tokenizes the text into windows and makes a session able to run them. */
sqz_status sqz_cli_calib_open(const sqz_cli_calib *c, const sqz_model *m, sqz_backend *be, sqz_calib_windows *w,
                              sqz_session **s);
/* ---- what the benchmarks share (cli/bench_util.c) ---------------------------------- */
/* The model, the texts and their sizes that the model benchmarks (prune, sparsity, layerdrop)
 * take, filled through sqz_cli_bench_rows (a group of their option tables). */
typedef struct sqz_cli_bench_args {
    const char *path, *calib, *eval;
    int64_t n, ctx, eval_ctx, eval_chunks, threads;
} sqz_cli_bench_args;
extern const sqz_opt sqz_cli_bench_rows[];
extern const int sqz_cli_bench_n_rows;
/* $SQZ_TEST_DATA/data/wiki.test.raw (default ../shared): the benchmarks' default text. */
const char *sqz_cli_bench_text(void);
/* CPU seconds of the process. */
double sqz_cli_cpu_s(void);
/* Greedy generation of `gen` tokens after ids[0..16) on a session of m made from *base
 * (max_tokens set here): tokens per wall second and per CPU second of the process (steadier on
 * a shared machine), each the best of 3 runs after one warm-up (which dequantizes the weights
 * the session keeps in f32). */
sqz_status sqz_cli_gen_speed(const sqz_model *m, const sqz_session_opts *base, const int32_t *ids, int64_t gen,
                             double tps[2]);
/* What a benchmark evaluates on: the calibration windows cut from cc->text, the evaluation
 * text's ids (with BOS), and, when the two texts are the same file, the windows' spans to hold
 * out of the evaluation (exclude, w.n_windows pairs; NULL otherwise). All owned. */
typedef struct sqz_cli_bench_data {
    sqz_calib_windows w;
    int32_t *ids;
    size_t n_ids;
    int64_t (*exclude)[2];
} sqz_cli_bench_data;
/* Fills *d for model m; *session (when not NULL) gets the calibration session that can run the
 * windows (the caller frees it), else it is freed here. On error *d is freed. */
sqz_status sqz_cli_bench_data_open(const sqz_model *m, sqz_backend *be, const sqz_cli_calib *cc, const char *eval,
                                   sqz_cli_bench_data *d, sqz_session **session);
void sqz_cli_bench_data_free(sqz_cli_bench_data *d);
/* Splits a comma-separated list into at most cap items of fewer than `width` characters each
 * (items: cap rows of width chars, NUL-terminated; longer and empty items are left out).
 * Returns the item count. SQZ_CLI_SPLIT(list, char arr[CAP][W]) passes the array's shape. */
int sqz_cli_split_list(const char *list, char *items, size_t width, int cap);
#define SQZ_CLI_SPLIT(list, arr) \
    sqz_cli_split_list((list), &(arr)[0][0], sizeof (arr)[0], (int)(sizeof(arr) / sizeof (arr)[0]))
/* Evaluation options over d: chunks of ctx tokens, at most `chunks` after the held-out ones. */
sqz_eval_opts sqz_cli_bench_eval_opts(const sqz_cli_bench_data *d, int64_t ctx, int64_t chunks);
/* ---- the harness of the model benchmarks (cli/bench_model.c) ---------------------------- */
/* One run of `sqz bench prune|sparsity|layerdrop`: the model (MODEL or SmolLM2-135M) and the
 * texts resolved from the shared options, the model opened with a CPU backend, the benchmark's
 * data (sqz_cli_bench_model_data), and a temporary file for the base's logits. */
typedef struct sqz_cli_bench_model {
    const sqz_cli_bench_args *c;
    const char *calib, *eval, *model;
    char base_file[64]; /* the dense model's logits (sqz_cli_bench_evaluate with save_base) */
    bool have_base;
    sqz_model *orig;
    sqz_backend *be;
    sqz_cli_bench_data d;
    double t0; /* when the run started (the closing line's seconds in all) */
} sqz_cli_bench_model;
/* The help of a model benchmark: head, the shared options, then its own rows. */
void sqz_cli_bench_model_usage(FILE *out, const char *head, const sqz_opt *rows, int n);
/* Parses argv into the shared options c and the benchmark's own rows (into own); as sqz_cli_parse. */
int sqz_cli_bench_model_parse(const char *cmd, const sqz_opt *rows, int n, void *own, sqz_cli_bench_args *c,
                              int argc, char **argv);
/* Line-buffers stdout, makes the base's temporary file (/tmp/sqz_bench_NAME_XXXXXX), resolves the
 * defaults of c (kept by pointer), opens the model and the CPU backend. Close *H whatever it returns. */
sqz_status sqz_cli_bench_model_open(sqz_cli_bench_model *H, const char *name, const sqz_cli_bench_args *c);
/* The calibration windows and evaluation ids (sqz_cli_bench_data_open with the shared options). */
sqz_status sqz_cli_bench_model_data(sqz_cli_bench_model *H, sqz_session **session);
/* Session options on the run's backend and threads. */
sqz_session_opts sqz_cli_bench_session_opts(const sqz_cli_bench_model *H, int64_t max_tokens);
/* Evaluates m on the run's chunks: saving its logits as the base (save_base), else against them. */
sqz_status sqz_cli_bench_evaluate(const sqz_cli_bench_model *H, const sqz_model *m, bool save_base,
                                  sqz_eval_result *r);
/* A fresh copy of the model compressed by the recipe stages (pass, SPEC pairs; a NULL pass ends)
 * on the run's windows, as `sqz compress` runs it; *seconds the compress time; *out the model. */
sqz_status sqz_cli_bench_compress(const sqz_cli_bench_model *H, const char *const *stages, double *seconds,
                                  sqz_model **out);
/* Greedy generation speed of m (sqz_cli_gen_speed on the evaluation ids). */
sqz_status sqz_cli_bench_gen(const sqz_cli_bench_model *H, const sqz_model *m, int64_t gen, double tps[2]);
/* The closing line: peak RSS against the F32 checkpoint, seconds in all. */
void sqz_cli_bench_model_peak(const sqz_cli_bench_model *H);
/* Removes the temporary file and frees what open and data made. */
void sqz_cli_bench_model_close(sqz_cli_bench_model *H);
/* The compress report as a self-contained HTML page (inline SVG plot of the per-layer output
 * error); malloc'd, NULL on out of memory. */
char *sqz_cli_report_html(const sqz_compress_report *r, const char *model, const char *out);
/* The layer-removal section of that page (cli/report_layers.c): a bar chart per measured
 * importance score by block, removed blocks marked, the per-block table and the compensation
 * maps. malloc'd HTML; NULL when no drop-layers stage measured (or out of memory). */
char *sqz_cli_report_layers_html(const sqz_compress_report *r);
/* The structured-pruning section (cli/report_prune.c): charts by layer of the fraction of
 * heads and FFN neurons removed, of every head's score and of the neurons' score quartiles,
 * and the per-layer table. malloc'd HTML; NULL when no prune stage ran (or out of memory). */
char *sqz_cli_report_prune_html(const sqz_compress_report *r);
/* The words of the compress report shared by the summary on stdout and the HTML page
 * (cli/report_words.c). Layers: quantized, kept float (f32 / f16 / bf16), or kept as stored
 * (still in the quantized type of the source, e.g. q4_1: not "float"). */
typedef struct sqz_cli_layer_counts {
    int64_t quantized, kept_float, kept_stored;
    char float_types[48], stored_types[48]; /* the kept types, each once: "f16", "q4_1, q5_0" */
} sqz_cli_layer_counts;
/* A layer format that is not a quantized dtype (f32, f16, bf16). */
bool sqz_cli_format_is_float(const char *format);
void sqz_cli_count_layers(const sqz_compress_report *r, sqz_cli_layer_counts *c);
/* "31 quantized, 5 kept float (f16), 30 kept as stored (q4_1)" into buf. */
void sqz_cli_layers_words(const sqz_cli_layer_counts *c, char *buf, size_t cap);
/* "x2.63 smaller", "x1.38 larger" (a file that grew), "the same size" into buf. */
void sqz_cli_size_words(int64_t before, int64_t after, char *buf, size_t cap);
/* When the recipe's quantization is a single K-quant (q2_k .. q6_k) that left layers as they were
 * because of their width: a hint naming the llama.cpp mix (q4_k_m ...) that quantizes them too;
 * "" otherwise. */
void sqz_cli_kquant_hint(const sqz_compress_report *r, const sqz_cli_layer_counts *c, char *buf, size_t cap);
/* The layers a mix's width fallback gave another type, by pair: "166 of 210 matrices: q4_k -> q5_0
 * (144), q6_k -> q8_0 (22) (width not a multiple of the block; llama-quantize falls back alike)";
 * "" when none. */
void sqz_cli_fallback_words(const sqz_compress_report *r, const sqz_cli_layer_counts *c, char *buf, size_t cap);
/* The layers quantized again from a block-quantized source: "210 matrices stored q4_1 in the source,
 * rounded again from their dequantized values (llama-quantize asks for --allow-requantize)"; "" when none. */
void sqz_cli_requant_words(const sqz_compress_report *r, char *buf, size_t cap);
/* "6 of 6 stacked expert tensors rounded by RTN: ..." for a mixture's experts, "" for a dense model. */
void sqz_cli_experts_words(const sqz_compress_report *r, char *buf, size_t cap);
/* Writes a whole file atomically. */
sqz_status sqz_cli_write_file(const char *path, const void *data, size_t n);
/* Warns on stderr ("sqz: warning: ...") about a model that is legal but probably not what the
 * user meant: a tokenizer covering less than half of the embedding's rows (padded vocabularies
 * are legal; rows no token reaches are never produced by tokenization). */
void sqz_cli_model_warnings(const char *path, const sqz_model *m);

int sqz_cmd_bench(int argc, char **argv);
void sqz_cmd_bench_usage(FILE *out);
/* `sqz bench WHAT --help`: WHAT's usage (all of them without a known WHAT). */
int sqz_cmd_bench_help(int argc, char **argv);
/* The --activations row's help, one text for eval, generate and bench (the choice's int is a
 * sqz_activations: f32 0, q8 1). sqz_cli_activations_name: the report's words for a mode. */
#define SQZ_CLI_ACTIVATIONS_HELP \
    "f32: each product takes its input as it is (the exact model); q8: quantized as llama.cpp's CPU " \
    "backend quantizes it for the weight type (Q8_0, Q8_1, Q8_K; f16/bf16 for F16/BF16 weights) and " \
    "multiplied in integers: llama.cpp's numbers and speed"
const char *sqz_cli_activations_name(int mode);

#endif

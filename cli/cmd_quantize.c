/* cli/cmd_quantize.c - `sqz quantize [options] IN [OUT] TYPE [THREADS]`: llama-quantize's
 * command line (tools/quantize/quantize.cpp), translated into `sqz compress IN -o OUT --quant
 * SPEC ...` and run as that. TYPE is one of llama-quantize's names (any case) or ftype ids;
 * without OUT the output is ggml-model-TYPE.gguf beside IN, as llama-quantize names it. */
#include <ctype.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cli/cli.h"

/* llama-quantize's types (QUANT_OPTIONS), its ftype ids (llama.h's llama_ftype) and the sqz
 * SPEC of each; NULL: not an sqz format, with where to go instead. */
typedef struct llama_type {
    const char *name;
    int ftype;
    const char *spec;
    const char *instead; /* with spec NULL */
} llama_type;

#define CONVERT "a float type: sqz convert IN -o OUT --dtype f32|f16|bf16"
static const llama_type types[] = {
    {"Q4_0", 2, "q4_0", NULL},          {"Q4_1", 3, "q4_1", NULL},       {"Q5_0", 8, "q5_0", NULL},
    {"Q5_1", 9, "q5_1", NULL},          {"Q8_0", 7, "q8_0", NULL},       {"Q2_K", 10, "q2_k", NULL},
    {"Q3_K_S", 11, "q3_k_s", NULL},     {"Q3_K_M", 12, "q3_k_m", NULL},  {"Q3_K", 12, "q3_k_m", NULL},
    {"Q3_K_L", 13, "q3_k_l", NULL},     {"Q4_K_S", 14, "q4_k_s", NULL},  {"Q4_K_M", 15, "q4_k_m", NULL},
    {"Q4_K", 15, "q4_k_m", NULL},       {"Q5_K_S", 16, "q5_k_s", NULL},  {"Q5_K_M", 17, "q5_k_m", NULL},
    {"Q5_K", 17, "q5_k_m", NULL},       {"Q6_K", 18, "q6_k", NULL},      {"IQ4_NL", 25, "iq4_nl", NULL},
    {"IQ3_S", 26, "iq3_s", NULL},       {"IQ3_M", 27, "iq3_m", NULL},    {"IQ4_XS", 30, "iq4_xs", NULL},
    {"F32", 0, NULL, CONVERT},          {"F16", 1, NULL, CONVERT},       {"BF16", 32, NULL, CONVERT},
    {"COPY", -1, NULL, "a copy: sqz convert IN -o OUT"},
    {"IQ2_XXS", 19, NULL, NULL},        {"IQ2_XS", 20, NULL, NULL},      {"Q2_K_S", 21, NULL, NULL},
    {"IQ3_XS", 22, NULL, NULL},         {"IQ3_XXS", 23, NULL, NULL},     {"IQ1_S", 24, NULL, NULL},
    {"IQ2_S", 28, NULL, NULL},          {"IQ2_M", 29, NULL, NULL},       {"IQ1_M", 31, NULL, NULL},
    {"TQ1_0", 36, NULL, NULL},          {"TQ2_0", 37, NULL, NULL},       {"MXFP4_MOE", 38, "mxfp4_moe", NULL},
    {"Q1_0", 40, NULL, NULL},           {"Q2_0", 41, NULL, NULL},
};

/* The type named by word (a name in any case, or an ftype id), or NULL. */
static const llama_type *find_type(const char *word) {
    char *end;
    const long id = strtol(word, &end, 10);
    const bool number = end != word && !*end;
    for (int i = 0; i < SQZ_CLI_N(types); i++)
        if (number ? types[i].ftype == id : !strcasecmp(types[i].name, word)) return &types[i];
    return NULL;
}

typedef struct quantize_args {
    const char *in, *out, *type, *threads, *imatrix, *out_type, *embd_type;
    const char *tensor_types[64];
    int n_tensor_types;
    bool allow_requantize, pure, leave_output, quiet;
} quantize_args;

static sqz_status add_tensor_type(void *dst, const sqz_opt *o, const char *value) {
    (void)o;
    quantize_args *a = dst;
    if (a->n_tensor_types < SQZ_CLI_N(a->tensor_types)) a->tensor_types[a->n_tensor_types] = value;
    a->n_tensor_types++;
    return SQZ_OK;
}

static const sqz_opt quantize_rows[] = {
    {.name = "in", .type = SQZ_OPT_STRING, .offset = offsetof(quantize_args, in),
     .flags = SQZ_OPT_POSITIONAL | SQZ_OPT_REQUIRED, .metavar = "IN", .help = "the model (any format sqz reads)"},
    {.name = "out", .type = SQZ_OPT_STRING, .offset = offsetof(quantize_args, out),
     .flags = SQZ_OPT_POSITIONAL | SQZ_OPT_REQUIRED, .metavar = "OUT",
     .help = "the .gguf to write; left out (IN TYPE), ggml-model-TYPE.gguf beside IN"},
    {.name = "type", .type = SQZ_OPT_STRING, .offset = offsetof(quantize_args, type), .flags = SQZ_OPT_POSITIONAL,
     .metavar = "TYPE", .help = "llama-quantize's type (Q4_K_M, q8_0, ...) or ftype id (15, 7, ...)"},
    {.name = "threads", .type = SQZ_OPT_STRING, .offset = offsetof(quantize_args, threads),
     .flags = SQZ_OPT_POSITIONAL, .metavar = "THREADS", .help = "CPU threads (sqz compress --threads)"},
    {.name = "imatrix", .type = SQZ_OPT_STRING, .offset = offsetof(quantize_args, imatrix), .metavar = "FILE",
     .help = "llama-imatrix's importance matrix: --imatrix FILE and the imatrix method (SPEC:imatrix)"},
    {.name = "pure", .type = SQZ_OPT_FLAG, .offset = offsetof(quantize_args, pure),
     .help = "every matrix the type, no mix: SPEC:pure"},
    {.name = "leave-output-tensor", .type = SQZ_OPT_FLAG, .offset = offsetof(quantize_args, leave_output),
     .help = "output.weight left float: --keep-float output"},
    {.name = "allow-requantize", .type = SQZ_OPT_FLAG, .offset = offsetof(quantize_args, allow_requantize),
     .help = "accepted and not needed: sqz requantizes quantized weights (dequantized first) anyway"},
    {.name = "output-tensor-type", .type = SQZ_OPT_STRING, .offset = offsetof(quantize_args, out_type),
     .metavar = "TYPE", .help = "as sqz compress --output-tensor-type"},
    {.name = "token-embedding-type", .type = SQZ_OPT_STRING, .offset = offsetof(quantize_args, embd_type),
     .metavar = "TYPE", .help = "as sqz compress --token-embedding-type"},
    {.name = "tensor-type", .type = SQZ_OPT_STRING, .flags = SQZ_OPT_REPEAT, .metavar = "PATTERN=TYPE",
     .set = add_tensor_type, .help = "as sqz compress --tensor-type"},
};

static const char quantize_head[] =
    "usage: sqz quantize [--imatrix FILE] [--pure] [--leave-output-tensor] [--allow-requantize]\n"
    "                    [--output-tensor-type TYPE] [--token-embedding-type TYPE] [--tensor-type P=TYPE]\n"
    "                    IN [OUT] TYPE [THREADS]\n\n"
    "llama-quantize's command line, run as `sqz compress IN -o OUT --quant SPEC ...` (the line run is\n"
    "printed first): TYPE as llama-quantize spells it (Q4_K_M, q4_k_m, 15; Q4_K is Q4_K_M), OUT by\n"
    "default ggml-model-TYPE.gguf beside IN. sqz compress's other options (--calib, --eval, --report,\n"
    "GPTQ, ...) are reached through sqz compress itself. docs/llamacpp.md: every llama.cpp spelling.\n";

void sqz_cmd_quantize_usage(FILE *out) {
    const sqz_opt_group g[] = {{NULL, quantize_rows, SQZ_CLI_N(quantize_rows), NULL},
                               {NULL, &sqz_cli_quiet_opt, 1, NULL}};
    sqz_cli_help(out, quantize_head, g, 2);
}

/* IN TYPE (OUT left out) or IN OUT TYPE: fills a->type and a->out (default_out holds the
 * default name). 0, or the usage error's status. */
static int resolve_out(quantize_args *a, char *default_out, size_t cap) {
    if (find_type(a->out)) { /* IN TYPE [THREADS]: llama-quantize's own test, a type first */
        if (a->threads) return sqz_cli_usage_error("quantize", "unexpected argument '%s'", a->threads);
        a->threads = a->type;
        a->type = a->out;
        const char *slash = strrchr(a->in, '/');
        const int dir = slash ? (int)(slash - a->in) + 1 : 0;
        const llama_type *t = find_type(a->type);
        snprintf(default_out, cap, "%.*sggml-model-%s.gguf", dir, a->in, t->name);
        a->out = default_out;
    }
    if (!a->type) return sqz_cli_usage_error("quantize", "no TYPE given (IN [OUT] TYPE [THREADS])");
    return 0;
}

/* The compress command line of a (argv: at most cap words), into words; the count or -1. */
static int compress_argv(const quantize_args *a, const llama_type *t, char *spec, size_t spec_cap, char **argv,
                         int cap) {
    snprintf(spec, spec_cap, "%s%s%s", t->spec, a->imatrix ? ":imatrix" : "", a->pure ? ":pure" : "");
    int n = 0;
#define PUSH(w) (n < cap ? (void)(argv[n++] = (char *)(w)) : (void)(n = cap + 1))
    PUSH("compress");
    PUSH(a->in);
    PUSH("-o");
    PUSH(a->out);
    PUSH("--quant");
    PUSH(spec);
    if (a->imatrix) PUSH("--imatrix"), PUSH(a->imatrix);
    if (a->leave_output) PUSH("--keep-float"), PUSH("output");
    if (a->out_type) PUSH("--output-tensor-type"), PUSH(a->out_type);
    if (a->embd_type) PUSH("--token-embedding-type"), PUSH(a->embd_type);
    for (int i = 0; i < a->n_tensor_types; i++) PUSH("--tensor-type"), PUSH(a->tensor_types[i]);
    if (a->threads) PUSH("--threads"), PUSH(a->threads);
    if (a->quiet) PUSH("--quiet");
#undef PUSH
    return n <= cap ? n : -1;
}

int sqz_cmd_quantize(int argc, char **argv) {
    quantize_args a;
    memset(&a, 0, sizeof a);
    const sqz_opt_group g[] = {{NULL, quantize_rows, SQZ_CLI_N(quantize_rows), &a},
                               {NULL, &sqz_cli_quiet_opt, 1, &a.quiet}};
    int rc = sqz_cli_parse("quantize", g, 2, argc, argv, NULL);
    if (rc) return rc;
    if (a.n_tensor_types > SQZ_CLI_N(a.tensor_types))
        return sqz_cli_usage_error("quantize", "more than %d --tensor-type", SQZ_CLI_N(a.tensor_types));
    char default_out[4096], spec[128];
    if ((rc = resolve_out(&a, default_out, sizeof default_out))) return rc;
    const llama_type *t = find_type(a.type);
    if (!t) return sqz_cli_usage_error("quantize", "unknown TYPE '%s' (llama-quantize's names: Q4_K_M, Q8_0, ...; "
                                       "or ftype ids)", a.type);
    if (!t->spec)
        return sqz_cli_usage_error("quantize", "%s is not an sqz quantization%s%s", t->name,
                                   t->instead ? "; for " : " (sqz compress --help lists sqz's)",
                                   t->instead ? t->instead : "");
    if (a.threads) {
        for (const char *p = a.threads; *p; p++)
            if (!isdigit((unsigned char)*p)) return sqz_cli_usage_error("quantize", "bad THREADS '%s'", a.threads);
    }
    if (a.leave_output) { /* llama-quantize leaves output.weight alone; a tied model has none: nothing to do */
        sqz_model *m = NULL;
        sqz_open_opts oo = {0};
        if (sqz_model_open(a.in, &oo, &m) != SQZ_OK) return sqz_cli_fail(SQZ_ERR_FORMAT);
        a.leave_output = !m->hp.tied_embeddings;
        sqz_model_free(m);
    }
    char *cargv[160];
    const int cargc = compress_argv(&a, t, spec, sizeof spec, cargv, SQZ_CLI_N(cargv) - 1);
    if (cargc < 0) return sqz_cli_usage_error("quantize", "too many options");
    cargv[cargc] = NULL;
    if (!a.quiet) {
        fprintf(stderr, "sqz quantize: running sqz");
        for (int i = 0; i < cargc; i++) fprintf(stderr, " %s", cargv[i]);
        fprintf(stderr, "\n");
    }
    return sqz_cmd_compress(cargc, cargv);
}

/* cli/cmd_convert.c - `sqz convert MODEL -o OUT [--to gguf|safetensors] [--dtype ...]`. */
#include <inttypes.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/cli.h"

typedef struct convert_opts {
    const char *in, *out, *tokenizer;
    int to, dtype; /* sqz_format, sqz_dtype; -1 when not given */
    bool force;
} convert_opts;

/* The choices, in the option rows and in the usage line alike (one string each: they cannot drift). */
#define TO_CHOICES "gguf|safetensors|hf"
#define DTYPE_CHOICES "f32|f16|bf16|f64|q8_0|q4_0|q4_1"

static const int to_values[] = {SQZ_FORMAT_GGUF, SQZ_FORMAT_SAFETENSORS, SQZ_FORMAT_SAFETENSORS};
static const int dtype_values[] = {SQZ_DTYPE_F32,  SQZ_DTYPE_F16,  SQZ_DTYPE_BF16, SQZ_DTYPE_F64,
                                   SQZ_DTYPE_Q8_0, SQZ_DTYPE_Q4_0, SQZ_DTYPE_Q4_1};

static const sqz_opt convert_rows[] = {
    {.name = "model", .type = SQZ_OPT_STRING, .offset = offsetof(convert_opts, in),
     .flags = SQZ_OPT_POSITIONAL | SQZ_OPT_REQUIRED | SQZ_OPT_INPUT, .metavar = "MODEL",
     .help = "an HF directory, a .safetensors, a .gguf, a llama2.c .bin or an ONNX directory sqz wrote"},
    {.name = "output", .type = SQZ_OPT_STRING, .offset = offsetof(convert_opts, out),
     .flags = SQZ_OPT_REQUIRED | SQZ_OPT_OUTPUT | SQZ_OPT_OUTPUT_DIR,
     .metavar = "OUT", .short_name = 'o', .help = "a .gguf file or an HF directory"},
    {.name = "to", .type = SQZ_OPT_CHOICE, .offset = offsetof(convert_opts, to), .choices = TO_CHOICES,
     .values = to_values, .help = "the output format (default: gguf when OUT ends in .gguf, else safetensors)"},
    {.name = "dtype", .type = SQZ_OPT_CHOICE, .offset = offsetof(convert_opts, dtype),
     .choices = DTYPE_CHOICES, .values = dtype_values,
     .help = "dtype of the weight matrices (default: every tensor keeps its own)"},
    {.name = "tokenizer", .type = SQZ_OPT_STRING, .offset = offsetof(convert_opts, tokenizer), .flags = SQZ_OPT_INPUT,
     .metavar = "FILE",
     .help = "llama2.c tokenizer.bin (default: beside the checkpoint)"},
    {.name = "force", .type = SQZ_OPT_FLAG, .offset = offsetof(convert_opts, force),
     .help = "replace an existing directory OUT that sqz did not write"},
};

static const char convert_head[] =
    "usage: sqz convert MODEL -o OUT [--to " TO_CHOICES "]\n"
    "                   [--dtype " DTYPE_CHOICES "] [--hf-format LAYOUT] [--tokenizer FILE]\n\n"
    "Converts between llama2.c, GGUF and HF safetensors (and from the ONNX directories sqz\n"
    "writes: docs/onnx.md, \"Reading back\"). OUT is a .gguf file or an HF\n"
    "directory (model.safetensors + config.json + tokenizer.json). The format defaults to\n"
    "gguf when OUT ends in .gguf, safetensors otherwise. Without --dtype every tensor keeps\n"
    "its dtype; in safetensors sqz's int8/int4 weights and GGUF q4_0, q8_0 and q5_0 linear\n"
    "layers are written exactly in the --hf-format layout, other GGUF block types of linear\n"
    "layers are refused with the reason (never requantized), and a block-typed embedding or\n"
    "classifier becomes f32 (docs/formats.md). With --dtype, weight matrices take that dtype\n"
    "(norms stay f32 in GGUF), and a float dtype dequantizes every quantized tensor. A\n"
    "same-dtype round trip is value-exact; q/k rows are reordered for the target's rotary\n"
    "convention. The output appears atomically: on any error nothing is left at OUT.\n";

void sqz_cmd_convert_usage(FILE *out) {
    const sqz_opt_group g[] = {{NULL, convert_rows, SQZ_CLI_N(convert_rows), NULL}, {NULL, &sqz_cli_hf_format_opt, 1, NULL},
                               {NULL, &sqz_cli_quiet_opt, 1, NULL}};
    sqz_cli_help(out, convert_head, g, 3);
}

static bool ends_with(const char *s, const char *suf) {
    size_t n = strlen(s), k = strlen(suf);
    return n >= k && strcmp(s + n - k, suf) == 0;
}

int sqz_cmd_convert(int argc, char **argv) {
    convert_opts a = {.to = -1, .dtype = -1};
    bool quiet = false;
    int hf_format = SQZ_HF_COMPRESSED_TENSORS;
    const sqz_opt_group g[] = {{NULL, convert_rows, SQZ_CLI_N(convert_rows), &a}, {NULL, &sqz_cli_hf_format_opt, 1, &hf_format},
                               {NULL, &sqz_cli_quiet_opt, 1, &quiet}};
    const int bad = sqz_cli_parse("convert", g, 3, argc, argv, NULL);
    if (bad) return bad;
    const char *in = a.in, *out = a.out;
    sqz_save_opts so = {.format = ends_with(out, ".gguf") ? SQZ_FORMAT_GGUF : SQZ_FORMAT_SAFETENSORS};
    if (a.to >= 0) so.format = (sqz_format)a.to;
    so.dtype = a.dtype;
    so.replace = a.force;
    so.hf_format = (sqz_hf_format)hf_format;
    const sqz_format_traits *fi = sqz_format_info(so.format);
    if (a.dtype >= 0 && !fi->block_types && sqz_dtype_info((sqz_dtype)a.dtype)->is_quantized)
        return sqz_cli_usage_error("convert", "%s holds float dtypes only; use --to gguf for %s", fi->name,
                                   sqz_dtype_name((sqz_dtype)a.dtype));
    double t0 = sqz_now_seconds();
    sqz_open_opts oo = {.tokenizer_path = a.tokenizer};
    sqz_model *m;
    sqz_status s = sqz_model_open(in, &oo, &m);
    if (s != SQZ_OK) return sqz_cli_fail(s);
    sqz_cli_model_warnings(in, m);
    sqz_progress *p = sqz_cli_progress(quiet, "convert", sqz_model_data_bytes(m), "B");
    so.progress = sqz_progress_cb;
    so.progress_user = p;
    s = sqz_model_save(m, out, &so);
    sqz_progress_end(p);
    if (s != SQZ_OK) {
        sqz_model_free(m);
        return sqz_cli_fail(s);
    }
    double dt = sqz_now_seconds() - t0;
    fprintf(stderr, "sqz: wrote %s (%s, %" PRId64 " tensors, %.3f M params) in %.2f s\n", out,
            sqz_format_name(so.format), m->n_tensors, (double)sqz_model_param_count(m) / 1e6, dt);
    sqz_model_free(m);
    return 0;
}

/*
 * cli/cmd_export.c - `sqz export MODEL -o OUT --to gguf|safetensors|bundle`: a model sqz opens,
 * compressed or not, to a deployment target that holds its types as they are (refused, naming
 * the tensor, when it cannot; --dtype chooses one), with the bundle's options (signature,
 * deflate, provenance); and `sqz export --keygen PREFIX` for the signing key pair.
 */
#include <inttypes.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

typedef struct export_opts {
    const char *in, *out, *tokenizer, *sign, *report, *keygen;
    int to, dtype; /* sqz_format, sqz_dtype; -1 when not given */
    int onnx_ops;  /* -1 when not given; 0 matmulnbits, 1 qdq */
    bool deflate, force;
} export_opts;

static const int to_values[] = {SQZ_FORMAT_GGUF, SQZ_FORMAT_SAFETENSORS, SQZ_FORMAT_SAFETENSORS, SQZ_FORMAT_BUNDLE,
                                SQZ_FORMAT_ONNX};
static const int onnx_ops_values[] = {0, 1};
static const int dtype_values[] = {SQZ_DTYPE_F32,  SQZ_DTYPE_F16,  SQZ_DTYPE_BF16,
                                   SQZ_DTYPE_Q8_0, SQZ_DTYPE_Q4_0, SQZ_DTYPE_Q4_1};

static const sqz_opt export_rows[] = {
    {.name = "model", .type = SQZ_OPT_STRING, .offset = offsetof(export_opts, in),
     .flags = SQZ_OPT_POSITIONAL | SQZ_OPT_INPUT, .metavar = "MODEL",
     .help = "any checkpoint sqz opens: HF directory, .safetensors, .gguf, llama2.c .bin, .sqzb, sqz's ONNX directory"},
    {.name = "output", .type = SQZ_OPT_STRING, .offset = offsetof(export_opts, out),
     .flags = SQZ_OPT_OUTPUT | SQZ_OPT_OUTPUT_DIR, .metavar = "OUT", .short_name = 'o',
     .help = "a .gguf file, an HF directory, a .sqzb bundle or an ONNX directory"},
    {.name = "to", .type = SQZ_OPT_CHOICE, .offset = offsetof(export_opts, to), .choices = "gguf|safetensors|hf|bundle|onnx",
     .values = to_values, .help = "the target (default: from OUT's suffix: .gguf, .sqzb, else safetensors); onnx: a "
     "directory for onnxruntime(-genai) (docs/onnx.md)"},
    {.name = "onnx-ops", .type = SQZ_OPT_CHOICE, .offset = offsetof(export_opts, onnx_ops), .choices = "matmulnbits|qdq",
     .values = onnx_ops_values, .help = "onnx: quantized weights as com.microsoft MatMulNBits (default) or as "
     "DequantizeLinear + MatMul (QDQ, opset 21 blocks); FP8 weights are always DequantizeLinear on FLOAT8E4M3FN"},
    {.name = "dtype", .type = SQZ_OPT_CHOICE, .offset = offsetof(export_opts, dtype),
     .choices = "f32|f16|bf16|q8_0|q4_0|q4_1", .values = dtype_values,
     .help = "dtype of the weight matrices (default: each keeps its own, refused when the target cannot hold it)"},
    {.name = "sign", .type = SQZ_OPT_STRING, .offset = offsetof(export_opts, sign), .flags = SQZ_OPT_INPUT,
     .metavar = "KEY", .help = "bundle: sign with this Ed25519 secret key (from --keygen)"},
    {.name = "deflate", .type = SQZ_OPT_FLAG, .offset = offsetof(export_opts, deflate),
     .help = "bundle: deflate every section (for transport: sqz reads it, sqz-edge runs plain bundles only)"},
    {.name = "report", .type = SQZ_OPT_STRING, .offset = offsetof(export_opts, report), .flags = SQZ_OPT_INPUT,
     .metavar = "R.json", .help = "bundle: the compress report (recipe, accuracy) to keep in the manifest"},
    {.name = "tokenizer", .type = SQZ_OPT_STRING, .offset = offsetof(export_opts, tokenizer), .flags = SQZ_OPT_INPUT,
     .metavar = "FILE", .help = "llama2.c tokenizer.bin (default: beside the checkpoint)"},
    {.name = "keygen", .type = SQZ_OPT_STRING, .offset = offsetof(export_opts, keygen), .metavar = "PREFIX",
     .help = "make a signing key pair PREFIX.key (secret, mode 0600) and PREFIX.pub, and nothing else"},
    {.name = "force", .type = SQZ_OPT_FLAG, .offset = offsetof(export_opts, force),
     .help = "replace an existing directory OUT that sqz did not write"},
};

static const char export_head[] =
    "usage: sqz export MODEL -o OUT [--to gguf|safetensors|bundle|onnx] [--dtype D] [--hf-format LAYOUT]\n"
    "                  [--onnx-ops matmulnbits|qdq]\n"
    "                  [--sign KEY] [--deflate] [--report R.json] [--tokenizer FILE]\n"
    "       sqz export --keygen PREFIX\n\n"
    "Writes MODEL for deployment: GGUF (llama.cpp), an HF safetensors directory, or an\n"
    "sqz bundle (.sqzb: checksummed sections, a provenance manifest, an optional Ed25519\n"
    "signature; run by sqz-edge and by every sqz command; docs/bundle.md), or an ONNX\n"
    "decoder directory for onnxruntime and onnxruntime-genai (docs/onnx.md). Unlike convert,\n"
    "export never changes a type on its own: a tensor the target cannot hold is refused\n"
    "(naming it) unless --dtype says what to store; exact forms are kept: in safetensors,\n"
    "GGUF q4_0/q8_0/q5_0 linear layers go into the --hf-format layout and a block-typed\n"
    "embedding or classifier becomes f32 (docs/formats.md). The output appears atomically.\n";

void sqz_cmd_export_usage(FILE *out) {
    const sqz_opt_group g[] = {{NULL, export_rows, SQZ_CLI_N(export_rows), NULL}, {NULL, &sqz_cli_hf_format_opt, 1, NULL},
                               {NULL, &sqz_cli_quiet_opt, 1, NULL}};
    sqz_cli_help(out, export_head, g, 3);
}

static bool ends_with(const char *s, const char *suf) {
    size_t n = strlen(s), k = strlen(suf);
    return n >= k && strcmp(s + n - k, suf) == 0;
}

int sqz_cmd_export(int argc, char **argv) {
    export_opts a = {.to = -1, .dtype = -1, .onnx_ops = -1};
    bool quiet = false;
    int hf_format = SQZ_HF_COMPRESSED_TENSORS;
    const sqz_opt_group g[] = {{NULL, export_rows, SQZ_CLI_N(export_rows), &a}, {NULL, &sqz_cli_hf_format_opt, 1, &hf_format},
                               {NULL, &sqz_cli_quiet_opt, 1, &quiet}};
    const int bad = sqz_cli_parse("export", g, 3, argc, argv, NULL);
    if (bad) return bad;
    if (a.keygen) {
        if (a.in || a.out) return sqz_cli_usage_error("export", "--keygen makes keys only: no MODEL or -o");
        sqz_status s = sqz_bundle_keygen(a.keygen);
        if (s != SQZ_OK) return sqz_cli_fail(s);
        fprintf(stderr, "sqz: wrote %s.key (secret) and %s.pub (public)\n", a.keygen, a.keygen);
        return 0;
    }
    if (!a.in || !a.out) return sqz_cli_usage_error("export", "MODEL and -o OUT are required");
    sqz_save_opts so = {.format = ends_with(a.out, ".gguf")   ? SQZ_FORMAT_GGUF
                                  : ends_with(a.out, ".sqzb") ? SQZ_FORMAT_BUNDLE
                                                              : SQZ_FORMAT_SAFETENSORS,
                        .dtype = a.dtype, .replace = a.force, .sign_key = a.sign, .deflate = a.deflate,
                        .hf_format = (sqz_hf_format)hf_format};
    if (a.to >= 0) so.format = (sqz_format)a.to;
    const sqz_format_traits *fi = sqz_format_info(so.format);
    if (a.onnx_ops >= 0 && !fi->onnx_opts)
        return sqz_cli_usage_error("export", "--onnx-ops is for --to onnx");
    so.onnx_ops = a.onnx_ops > 0 ? a.onnx_ops : 0;
    if (!fi->bundle_opts && (a.sign || a.deflate || a.report))
        return sqz_cli_usage_error("export", "--sign, --deflate and --report are for --to bundle");
    char *report = NULL;
    if (a.report) {
        sqz_status s = sqz_read_file(a.report, (size_t)64 << 20, &report, NULL);
        if (s != SQZ_OK) return sqz_cli_fail(s);
        so.provenance_json = report;
    }
    double t0 = sqz_now_seconds();
    sqz_open_opts oo = {.tokenizer_path = a.tokenizer};
    sqz_model *m = NULL;
    sqz_status s = sqz_model_open(a.in, &oo, &m);
    if (s == SQZ_OK) s = sqz_model_check_target(m, &so);
    if (s != SQZ_OK) {
        free(report);
        if (!m) return sqz_cli_fail(s);
        fprintf(stderr, "sqz: error: %s: cannot export to %s: %s\n", a.in, sqz_format_name(so.format),
                sqz_last_error());
        sqz_model_free(m);
        return 1;
    }
    sqz_progress *p = sqz_cli_progress(quiet, "export", sqz_model_data_bytes(m), "B");
    so.progress = sqz_progress_cb;
    so.progress_user = p;
    s = sqz_model_save(m, a.out, &so);
    sqz_progress_end(p);
    free(report);
    if (s != SQZ_OK) {
        sqz_model_free(m);
        return sqz_cli_fail(s);
    }
    fprintf(stderr, "sqz: wrote %s (%s%s%s, %" PRId64 " tensors, %.3f M params) in %.2f s\n", a.out,
            sqz_format_name(so.format), a.sign ? ", signed" : "", a.deflate ? ", deflated" : "", m->n_tensors,
            (double)sqz_model_param_count(m) / 1e6, sqz_now_seconds() - t0);
    sqz_model_free(m);
    return 0;
}

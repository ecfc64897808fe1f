/* cli/cmd_convert.c - `sqz convert MODEL -o OUT [--to gguf|safetensors] [--dtype ...]`. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/cli.h"

void sqz_cmd_convert_usage(FILE *out) {
    fprintf(out,
            "usage: sqz convert MODEL -o OUT [--to gguf|safetensors] [--dtype f32|f16|bf16|q8_0|q4_0|q4_1]\n"
            "                   [--tokenizer FILE]\n\n"
            "Converts between llama2.c, GGUF and HF safetensors. OUT is a .gguf file or an HF\n"
            "directory (model.safetensors + config.json + tokenizer.json). The format defaults to\n"
            "gguf when OUT ends in .gguf, safetensors otherwise. Without --dtype every tensor keeps\n"
            "its dtype (block-quantized tensors become f32 in safetensors); with it, weight\n"
            "matrices take that dtype (norms stay f32 in GGUF). A same-dtype round trip is\n"
            "value-exact; q/k rows are reordered for the target's rotary convention. The output\n"
            "appears atomically: on any error nothing is left at OUT.\n");
}

static bool ends_with(const char *s, const char *suf) {
    size_t n = strlen(s), k = strlen(suf);
    return n >= k && strcmp(s + n - k, suf) == 0;
}

int sqz_cmd_convert(int argc, char **argv) {
    const char *in = NULL, *out = NULL, *to = NULL, *dtype = NULL, *tok = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        bool has = i + 1 < argc;
        if ((strcmp(a, "-o") == 0 || strcmp(a, "--output") == 0) && has) out = argv[++i];
        else if (strcmp(a, "--to") == 0 && has) to = argv[++i];
        else if (strcmp(a, "--dtype") == 0 && has) dtype = argv[++i];
        else if (strcmp(a, "--tokenizer") == 0 && has) tok = argv[++i];
        else if (a[0] == '-' && a[1]) return sqz_cli_usage_error("convert", "unknown option or missing value '%s'", a);
        else if (!in) in = a;
        else return sqz_cli_usage_error("convert", "more than one MODEL given ('%s')", a);
    }
    if (!in) return sqz_cli_usage_error("convert", "no MODEL given");
    if (!out) return sqz_cli_usage_error("convert", "no output given (-o OUT)");
    sqz_save_opts so = {.format = ends_with(out, ".gguf") ? SQZ_FORMAT_GGUF : SQZ_FORMAT_SAFETENSORS, .dtype = -1};
    if (to) {
        sqz_format f;
        if (!sqz_format_from_name(to, &f) || (f != SQZ_FORMAT_GGUF && f != SQZ_FORMAT_SAFETENSORS))
            return sqz_cli_usage_error("convert", "--to must be gguf or safetensors, not '%s'", to);
        so.format = f;
    }
    if (dtype) {
        sqz_dtype d;
        if (!sqz_dtype_from_name(dtype, &d) || !sqz_dtype_info(d)->from_f32 ||
            !(sqz_dtype_info(d)->is_float || sqz_dtype_info(d)->is_quantized))
            return sqz_cli_usage_error("convert", "--dtype must be f32, f16, bf16, q8_0, q4_0 or q4_1, not '%s'", dtype);
        if (so.format == SQZ_FORMAT_SAFETENSORS && sqz_dtype_info(d)->is_quantized)
            return sqz_cli_usage_error("convert", "safetensors holds float dtypes only; use --to gguf for %s", dtype);
        so.dtype = (int)d;
    }
    double t0 = sqz_cli_now_s();
    sqz_open_opts oo = {.tokenizer_path = tok};
    sqz_model *m;
    sqz_status s = sqz_model_open(in, &oo, &m);
    if (s != SQZ_OK) return sqz_cli_fail(s);
    sqz_progress *p = sqz_progress_start("convert", sqz_model_data_bytes(m), "B");
    so.progress = sqz_progress_cb;
    so.progress_user = p;
    s = sqz_model_save(m, out, &so);
    sqz_progress_end(p);
    if (s != SQZ_OK) {
        sqz_model_free(m);
        return sqz_cli_fail(s);
    }
    double dt = sqz_cli_now_s() - t0;
    fprintf(stderr, "sqz: wrote %s (%s, %" PRId64 " tensors, %.3f M params) in %.2f s\n", out,
            sqz_format_name(so.format), m->n_tensors, (double)sqz_model_param_count(m) / 1e6, dt);
    sqz_model_free(m);
    return 0;
}

/* cli/cmd_compress.c - `sqz compress MODEL -o OUT --quant SPEC`: quantizes the linear layers
 * of a model (sequentially on calibration text, from a statistics file, or without
 * statistics for RTN), validates every compressed layer, writes GGUF or HF safetensors and
 * a JSON / HTML report. */
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "cli/cli.h"

void sqz_cmd_compress_usage(FILE *out) {
    fprintf(out,
            "usage: sqz compress MODEL -o OUT --quant SPEC [--calib FILE] [--calib-samples N] [--calib-ctx T]\n"
            "                    [--seed S] [--stats FILE] [--report R.json] [--html R.html]\n"
            "                    [--to gguf|safetensors] [--keep-float LIST] [--sample-rows R]\n"
            "                    [--threads N] [--tokenizer FILE]\n\n"
            "Quantizes the linear layers of every block (embeddings, norms and the classifier stay\n"
            "float). With --calib, block l is calibrated on the output of the already compressed\n"
            "blocks 0..l-1 (N windows of T tokens spread over FILE; default 128 x 512; the activations\n"
            "take N x T x d_model floats); with --stats, the statistics of `sqz calibrate` are used\n"
            "instead (imatrix, w8a8 static scales, smoothquant); rtn needs neither. Every compressed\n"
            "layer is run through the CPU kernels on calibration rows and its relative output error\n"
            "is reported.\n\n"
            "SPEC: FORMAT[:PART...]\n"
            "  formats  int8 (W8A16 per channel), w8a8 (+ INT8 activations), int4 (per group),\n"
            "           q8_0, q4_0, q4_1 (GGUF blocks, llama.cpp's exact grids)\n"
            "  methods  rtn (default), imatrix (q4_0/q4_1), gptq, awq, smoothquant (w8a8)\n"
            "  w8a8     minmax (default), percentile [pct=99.99], entropy, dynamic\n"
            "  int4     g32 | g64 | g128 (default), sym (default) | asym\n"
            "  gptq     act-order (default) | no-act-order, static-groups (default) | dynamic-groups,\n"
            "           damp=0.01\n"
            "  e.g.     int8  w8a8:smoothquant  int4:gptq:g128:act-order  q4_0:imatrix  q4_0:awq\n\n"
            "  -o OUT            a .gguf file or an HF directory\n"
            "  --to FORMAT       gguf (default for q8_0/q4_0/q4_1 or OUT ending in .gguf) or\n"
            "                    safetensors (default otherwise; int8/w8a8/int4 need it)\n"
            "  --report R.json   per-layer method, bits per weight, output error, time; totals\n"
            "  --html R.html     the same as a page with a plot of the per-layer error\n"
            "  --keep-float LIST also keep these float: roles (attn_v,ffn_down), blk.N, blk.N.role\n"
            "  --sample-rows R   input rows kept per layer for the searches and validation (512)\n");
}

static bool ends_with(const char *s, const char *suf) {
    size_t n = strlen(s), k = strlen(suf);
    return n >= k && strcmp(s + n - k, suf) == 0;
}

static void print_summary(const char *path, const char *out, sqz_format fmt, const sqz_cli_calib *cc,
                          const sqz_compress_report *r) {
    int64_t nq = 0, nf = 0;
    double sum = 0, worst = -1;
    int64_t n_err = 0;
    const char *worst_name = "";
    for (int64_t i = 0; i < r->n_layers; i++) {
        const sqz_layer_report *l = &r->layers[i];
        if (!l->quantized) {
            nf++;
            continue;
        }
        nq++;
        if (l->out_err == l->out_err) {
            sum += l->out_err;
            n_err++;
            if (l->out_err > worst) {
                worst = l->out_err;
                worst_name = l->tensor;
            }
        }
    }
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    printf("model        %s\n", path);
    printf("spec         %s\n", r->spec);
    if (r->n_windows)
        printf("calibration  %s%s: %lld windows x %lld tokens (activations %.1f MB)\n", cc->text ? "" : "statistics",
               cc->text ? cc->text : "", (long long)r->n_windows, (long long)r->ctx, (double)r->activation_bytes / 1e6);
    printf("layers       %lld quantized, %lld kept float\n", (long long)nq, (long long)nf);
    printf("size         %.3f MB -> %.3f MB (x%.2f); %.3f bits/weight quantized, %.3f bits/param overall\n",
           (double)r->bytes_before / 1e6, (double)r->bytes_after / 1e6,
           r->bytes_after ? (double)r->bytes_before / (double)r->bytes_after : 0.0, r->bpw_quantized, r->bpw_model);
    if (n_err)
        printf("output err   mean %.5f, worst %.5f (%s), relative, on calibration rows\n", sum / (double)n_err, worst,
               worst_name);
    printf("time         %.2f s (forward %.2f, methods %.2f, validation %.2f)\n", r->seconds_total, r->seconds_forward,
           r->seconds_quant, r->seconds_validate);
    printf("peak memory  %.1f MB\n", (double)ru.ru_maxrss / 1024.0);
    printf("wrote        %s (%s)\n", out, sqz_format_name(fmt));
}

int sqz_cmd_compress(int argc, char **argv) {
    sqz_cli_calib cc;
    sqz_cli_calib_defaults(&cc);
    const char *path = NULL, *out = NULL, *spec = NULL, *stats_path = NULL, *report = NULL, *html = NULL,
               *to = NULL, *keep = NULL;
    for (int i = 1; i < argc; i++) {
        int rc = sqz_cli_calib_option("compress", &cc, argc, argv, &i);
        if (rc > 0) return rc;
        if (rc == 0) continue;
        const char *o = argv[i];
        bool has = i + 1 < argc;
        if ((!strcmp(o, "-o") || !strcmp(o, "--output")) && has) out = argv[++i];
        else if (!strcmp(o, "--quant") && has) spec = argv[++i];
        else if (!strcmp(o, "--stats") && has) stats_path = argv[++i];
        else if (!strcmp(o, "--report") && has) report = argv[++i];
        else if (!strcmp(o, "--html") && has) html = argv[++i];
        else if (!strcmp(o, "--to") && has) to = argv[++i];
        else if (!strcmp(o, "--keep-float") && has) keep = argv[++i];
        else if (o[0] == '-' && o[1]) return sqz_cli_usage_error("compress", "unknown option or missing value '%s'", o);
        else if (!path) path = o;
        else return sqz_cli_usage_error("compress", "more than one MODEL given ('%s')", o);
    }
    if (!path) return sqz_cli_usage_error("compress", "no MODEL given");
    if (!out) return sqz_cli_usage_error("compress", "no output given (-o OUT)");
    if (!spec) return sqz_cli_usage_error("compress", "no --quant SPEC given (e.g. int8, int4:gptq:g128, q4_0:awq)");
    if (cc.text && stats_path) return sqz_cli_usage_error("compress", "--calib and --stats exclude each other");
    sqz_compress_opts co = sqz_compress_default_opts();
    if (sqz_compress_spec_parse(spec, &co.spec) != SQZ_OK) return sqz_cli_usage_error("compress", "%s", sqz_last_error());
    co.keep_float = keep;
    if (cc.sample_rows >= 0) co.sample_rows = cc.sample_rows;
    const sqz_qformat qf = co.spec.q.target.fmt;
    const bool gguf_native = qf == SQZ_QFMT_Q8_0 || qf == SQZ_QFMT_Q4_0 || qf == SQZ_QFMT_Q4_1;
    sqz_save_opts so = {.format = gguf_native || ends_with(out, ".gguf") ? SQZ_FORMAT_GGUF : SQZ_FORMAT_SAFETENSORS,
                        .dtype = -1};
    if (to) {
        sqz_format f;
        if (!sqz_format_from_name(to, &f) || (f != SQZ_FORMAT_GGUF && f != SQZ_FORMAT_SAFETENSORS))
            return sqz_cli_usage_error("compress", "--to must be gguf or safetensors, not '%s'", to);
        so.format = f;
    }
    if (so.format == SQZ_FORMAT_GGUF && !gguf_native)
        return sqz_cli_usage_error("compress", "SPEC '%s' stores sqz's %s layout, which GGUF cannot hold: use --to "
                                   "safetensors (an HF directory), or a GGUF format (q8_0, q4_0, q4_1)",
                                   spec, sqz_qformat_name(qf));
    if (so.format == SQZ_FORMAT_SAFETENSORS && gguf_native)
        return sqz_cli_usage_error("compress", "SPEC '%s' is a GGUF block format: write it with --to gguf (or an OUT "
                                   "ending in .gguf); for safetensors use int8 or int4", spec);
    const unsigned needs = sqz_compress_needs(&co.spec) & ~(unsigned)(SQZ_QSTAT_SAMPLE | SQZ_QSTAT_ABSMEAN);
    if (!cc.text && !stats_path && (needs || co.spec.method->needs))
        return sqz_cli_usage_error("compress", "SPEC '%s' needs calibration: give --calib FILE (or --stats FILE)", spec);

    sqz_model *m = NULL;
    sqz_backend *be = NULL;
    sqz_session *s = NULL;
    sqz_calib_stats *stats = NULL;
    sqz_calib_windows w;
    memset(&w, 0, sizeof w);
    sqz_compress_report rep;
    memset(&rep, 0, sizeof rep);
    sqz_open_opts oo = {.tokenizer_path = cc.tokenizer};
    sqz_status st = sqz_model_open(path, &oo, &m);
    if (st == SQZ_OK && stats_path) st = sqz_calib_stats_read(stats_path, &stats);
    if (st == SQZ_OK && cc.text) {
        st = sqz_backend_cpu(cc.threads, &be);
        if (st == SQZ_OK) st = sqz_cli_calib_open(&cc, m, be, &w, &s);
    }
    if (st == SQZ_OK) {
        sqz_progress *p = cc.text ? sqz_progress_start("compress", m->hp.n_layers * w.n_windows * 2, "passes")
                                  : sqz_progress_start("compress", m->hp.n_layers, "blocks");
        co.progress = sqz_progress_cb;
        co.progress_user = p;
        st = sqz_compress_model(m, s, cc.text ? &w : NULL, stats, &co, &rep);
        sqz_progress_end(p);
    }
    sqz_session_free(s); /* the float copies of the weights go before the writer runs */
    s = NULL;
    /* The reports are staged before the model is written and appear only if it was. */
    sqz_outfile *fr = NULL, *fh = NULL;
    if (st == SQZ_OK && report) {
        char *j = sqz_compress_report_json(&rep, path, out);
        st = j ? sqz_outfile_open(report, &fr) : SQZ_ERR_NOMEM;
        if (st == SQZ_OK) st = sqz_outfile_write(fr, j, strlen(j));
        free(j);
    }
    if (st == SQZ_OK && html) {
        char *h = sqz_cli_report_html(&rep, path, out);
        st = h ? sqz_outfile_open(html, &fh) : SQZ_ERR_NOMEM;
        if (st == SQZ_OK) st = sqz_outfile_write(fh, h, strlen(h));
        free(h);
    }
    if (st == SQZ_OK) {
        sqz_progress *p = sqz_progress_start("write", sqz_model_data_bytes(m), "B");
        so.progress = sqz_progress_cb;
        so.progress_user = p;
        st = sqz_model_save(m, out, &so);
        sqz_progress_end(p);
    }
    if (st == SQZ_OK && fr) st = sqz_outfile_commit(fr);
    else sqz_outfile_abort(fr);
    if (st == SQZ_OK && fh) st = sqz_outfile_commit(fh);
    else sqz_outfile_abort(fh);
    if (st == SQZ_OK) print_summary(path, out, so.format, &cc, &rep);
    sqz_compress_report_free(&rep);
    sqz_calib_stats_free(stats);
    sqz_calib_windows_free(&w);
    sqz_backend_free(be);
    sqz_model_free(m);
    return st == SQZ_OK ? 0 : sqz_cli_fail(st);
}

/* cli/cmd_compress.c - `sqz compress MODEL -o OUT STAGES...`: runs a recipe of stages (one
 * flag per row of the pass table: --quant SPEC, --drop-layers LIST, ...; or --recipe FILE) on
 * a model, sequentially on calibration text, from a statistics file, or without statistics;
 * optionally evaluates the result against the original on held-out text; writes GGUF or HF
 * safetensors and a JSON / HTML report, all committed together or not at all. */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include "cli/cli.h"

#define STR_(x) #x
#define STR(x) STR_(x)

typedef struct compress_opts {
    const char *path, *out, *stats, *imatrix, *report, *html, *keep, *eval;
    const char *embd_type, *output_type; /* llama-quantize's --token-embedding-type / --output-tensor-type */
    const char *tensor_types[64];        /* --tensor-type PATTERN=TYPE, in order */
    int n_tensor_types;
    int to;                     /* TO_* */
    int hf_format;              /* sqz_hf_format */
    bool force, quiet;
    int64_t eval_ctx, eval_chunks;
    const char *eval_task, *eval_task_file; /* --eval-task KIND FILE (joined KIND:FILE), its file */
    int eval_task_kind;
    int64_t eval_tasks_limit;
    sqz_recipe recipe;          /* stages in the order given */
    char recipe_error[512];     /* a --recipe FILE that could not be read: bad input (exit 1), not usage */
} compress_opts;

enum { TO_AUTO, TO_GGUF, TO_SAFETENSORS };

/* --NAME SPEC of a pass and --recipe FILE append stages in command-line order. */
static sqz_status add_stage(void *dst, const sqz_opt *o, const char *value) {
    return sqz_recipe_add(&((compress_opts *)dst)->recipe, o->name, value);
}
static sqz_status add_recipe(void *dst, const sqz_opt *o, const char *value) {
    (void)o;
    compress_opts *a = dst;
    if (!a->recipe_error[0] && sqz_recipe_load(&a->recipe, value) != SQZ_OK)
        snprintf(a->recipe_error, sizeof a->recipe_error, "%s", sqz_last_error());
    return SQZ_OK;
}

#define MAX_TENSOR_TYPES (int)(sizeof((compress_opts *)0)->tensor_types / sizeof(const char *))
/* --tensor-type items in order; more than MAX_TENSOR_TYPES are counted and refused after parsing */
static sqz_status add_tensor_type(void *dst, const sqz_opt *o, const char *value) {
    (void)o;
    compress_opts *a = dst;
    if (a->n_tensor_types < MAX_TENSOR_TYPES) a->tensor_types[a->n_tensor_types] = value;
    a->n_tensor_types++;
    return SQZ_OK;
}

static const sqz_opt compress_rows[] = {
    {.name = "model", .type = SQZ_OPT_STRING, .offset = offsetof(compress_opts, path),
     .flags = SQZ_OPT_POSITIONAL | SQZ_OPT_REQUIRED | SQZ_OPT_INPUT, .metavar = "MODEL", .short_name = 'm',
     .help = "HF directory, .safetensors, .gguf, llama2.c .bin or an ONNX directory sqz wrote"},
    {.name = "output", .type = SQZ_OPT_STRING, .offset = offsetof(compress_opts, out),
     .flags = SQZ_OPT_REQUIRED | SQZ_OPT_OUTPUT | SQZ_OPT_OUTPUT_DIR, .short_name = 'o', .metavar = "OUT",
     .help = "a .gguf file or an HF directory"},
    {.name = "recipe", .type = SQZ_OPT_STRING, .flags = SQZ_OPT_REPEAT | SQZ_OPT_INPUT, .metavar = "FILE",
     .set = add_recipe,
     .help = "stages from a JSON recipe ({\"sqz_recipe\": 1, \"stages\": [{\"quant\": \"q4_0:gptq\"}]}), in place"},
    {.name = "to", .type = SQZ_OPT_CHOICE, .offset = offsetof(compress_opts, to), .choices = "auto|gguf|safetensors",
     .def = "auto", .help = "auto: gguf for q8_0/q4_0/q4_1/q*_k/iq4_*/iq3_s or an OUT ending in .gguf, else safetensors"},
    {.name = "stats", .type = SQZ_OPT_STRING, .offset = offsetof(compress_opts, stats), .flags = SQZ_OPT_INPUT,
     .metavar = "FILE",
     .help = "statistics of `sqz calibrate` instead of --calib (imatrix, w8a8, smoothquant)"},
    {.name = "imatrix", .type = SQZ_OPT_STRING, .offset = offsetof(compress_opts, imatrix), .flags = SQZ_OPT_INPUT,
     .metavar = "FILE",
     .help = "an importance matrix of llama.cpp's llama-imatrix (GGUF or legacy .dat) instead of --calib, for "
             "the imatrix method (q4_k_m:imatrix ...): quantizes as llama-quantize --imatrix FILE"},
    {.name = "eval", .type = SQZ_OPT_STRING, .offset = offsetof(compress_opts, eval), .flags = SQZ_OPT_INPUT,
     .metavar = "TEXT",
     .help = "evaluate the result against the original on TEXT (chunks overlapping calibration windows of "
             "the same text are held out): delta ppl, mean/p99 KLD, top-1; in the summary and reports"},
    {.name = "eval-ctx", .type = SQZ_OPT_INT, .offset = offsetof(compress_opts, eval_ctx), .min = 0, .max = 1 << 20,
     .def = "0", .metavar = "N", .help = "evaluation chunk length; 0 = 512 (encoders: sentences of 256) capped by the "
     "model's trained context, as `sqz eval --ctx`; a larger N is used with a warning"},
    {.name = "eval-chunks", .type = SQZ_OPT_INT, .offset = offsetof(compress_opts, eval_chunks), .min = 0,
     .max = 1 << 30, .def = "32", .metavar = "K", .help = "evaluate the first K chunks (encoders: sentences) not "
     "held out; 0 = all of TEXT (wiki.test.raw: ~590 chunks of 512)"},
    {.name = "eval-task", .type = SQZ_OPT_STRING, .offset = offsetof(compress_opts, eval_task),
     .metavar = "KIND FILE",
     .help = "the result and the original on tasks, as `sqz eval --task KIND FILE --base`: hellaswag, winogrande, "
             "multiple-choice or jsonl; both accuracies, the delta and McNemar's exact test, in the summary and "
             "reports (docs/eval.md)"},
    {.name = "eval-tasks-limit", .type = SQZ_OPT_INT, .offset = offsetof(compress_opts, eval_tasks_limit), .min = 0,
     .max = (int64_t)1 << 40, .def = "0", .metavar = "N", .help = "--eval-task: the first N tasks; 0 = all"},
    {.name = "report", .type = SQZ_OPT_STRING, .offset = offsetof(compress_opts, report), .flags = SQZ_OPT_OUTPUT,
     .metavar = "R.json",
     .help = "per-layer method, bits per weight, output error, time; stages; totals; evaluation"},
    {.name = "html", .type = SQZ_OPT_STRING, .offset = offsetof(compress_opts, html), .flags = SQZ_OPT_OUTPUT,
     .metavar = "R.html",
     .help = "the same as one self-contained page with a plot of the per-layer error"},
    {.name = "keep-float", .type = SQZ_OPT_STRING, .offset = offsetof(compress_opts, keep), .metavar = "LIST",
     .help = "also keep these float: roles (attn_v,ffn_down), blk.N, blk.N.role"},
    {.name = "token-embedding-type", .type = SQZ_OPT_STRING, .offset = offsetof(compress_opts, embd_type),
     .metavar = "TYPE", .help = "a mix's token embedding in this GGUF type (q8_0, q6_k, ...), as llama-quantize's option"},
    {.name = "output-tensor-type", .type = SQZ_OPT_STRING, .offset = offsetof(compress_opts, output_type),
     .metavar = "TYPE", .help = "a mix's output (and a tied embedding) in this GGUF type, as llama-quantize's option"},
    {.name = "tensor-type", .type = SQZ_OPT_STRING, .flags = SQZ_OPT_REPEAT, .metavar = "PATTERN=TYPE",
     .set = add_tensor_type,
     .help = "a mix's matrices whose GGUF name (blk.N.ROLE.weight) PATTERN (a regex, PCRE2) is found in take TYPE; "
             "the first match wins; as llama-quantize's option"},
    {.name = "force", .type = SQZ_OPT_FLAG, .offset = offsetof(compress_opts, force),
     .help = "replace an existing directory OUT that sqz did not write"},
};

/* One row per pass of the pass table: --NAME SPEC. */
static int stage_rows(sqz_opt *rows, int cap) {
    int n = 0;
    const sqz_pass *const *p = sqz_passes(&n);
    for (int i = 0; i < n && i < cap; i++) {
        const sqz_pass_help h = sqz_pass_describe(p[i]);
        rows[i] = (sqz_opt){.name = h.name, .type = SQZ_OPT_STRING, .flags = SQZ_OPT_REPEAT, .metavar = h.metavar,
                            .help = h.summary, .set = add_stage};
    }
    return n < cap ? n : cap;
}

static const char compress_head[] =
    "usage: sqz compress MODEL -o OUT STAGE... [--calib FILE | --stats FILE | --imatrix FILE] [--eval TEXT]\n"
    "                    [--report R.json] [--html R.html] [options]\n"
    "  STAGE: --PASS SPEC (the passes below: --quant, --drop-layers, --prune, ...) | --recipe FILE\n"
    "         (run in the order given)\n\n"
    "Runs the stages on the model: whole-model steps (layer removal) as given, block stages\n"
    "(quantization) block by block; with --calib, block l is calibrated on the output of the\n"
    "already compressed blocks 0..l-1 (N windows of T tokens spread over FILE; default "
    STR(SQZ_CALIB_DEFAULT_SAMPLES) " x " STR(SQZ_CALIB_DEFAULT_CTX) ";\n"
    "the activations take N x T x d_model floats); with --stats, the statistics of `sqz calibrate`\n"
    "are used instead (imatrix, w8a8 static scales, smoothquant); rtn needs neither. Every\n"
    "quantized layer is run through the CPU kernels on calibration rows and its relative output\n"
    "error is reported. With --eval TEXT the result is compared with the original. The model and\n"
    "the reports are written together at the end, or nothing is.\n"
    "  e.g. sqz compress m.gguf -o q.gguf --quant q4_0:gptq --calib wiki.train.raw --eval wiki.test.raw\n"
    "       sqz compress stories260K.bin -o x.gguf --drop-layers 2 --quant q4_0\n";

void sqz_cmd_compress_usage(FILE *out) {
    sqz_opt st[16];
    const int ns = stage_rows(st, 16);
    const sqz_opt_group g[] = {{NULL, compress_rows, SQZ_CLI_N(compress_rows), NULL},
                               {"stages (in the order given)", st, ns, NULL},
                               {"calibration", sqz_cli_calib_opts, sqz_cli_calib_n_opts, NULL},
                               {NULL, &sqz_cli_hf_format_opt, 1, NULL},
                               {NULL, &sqz_cli_quiet_opt, 1, NULL}};
    sqz_cli_help(out, compress_head, g, 5);
    int n = 0;
    const sqz_pass *const *p = sqz_passes(&n);
    for (int i = 0; i < n; i++) {
        const sqz_pass_help h = sqz_pass_describe(p[i]);
        char *parts = sqz_opts_help_spec(h.opts, h.n_opts, 4);
        fprintf(out, "\n--%s %s: %s\n  parts (separated by ':'):\n%s  e.g. %s\n", h.name, h.metavar, h.summary,
                parts ? parts : "", h.examples);
        free(parts);
    }
    fprintf(out, "\nMore: docs/compress.md (passes, recipes), docs/quantization.md (methods, formats).\n");
}

/* "size": the tensor data before and after, what the ratio and the bits count; then the output's
 * own bytes (headers, metadata, tokenizer and alignment on top: the staged file, which the end of
 * the run puts in place). */
static void print_size(const sqz_compress_report *r, int64_t quantized, const char *out) {
    char words[256];
    sqz_cli_size_words(r->bytes_before, r->bytes_after, words, sizeof words);
    printf("size         tensors %.3f MB -> %.3f MB (%s)", (double)r->bytes_before / 1e6, (double)r->bytes_after / 1e6,
           words);
    if (r->params_after != r->params)
        printf("; %.3f M -> %.3f M parameters", (double)r->params / 1e6, (double)r->params_after / 1e6);
    if (quantized) printf("; %.3f bits/weight quantized", r->bpw_quantized);
    printf("; %.3f bits/param overall", r->bpw_model);
    const int64_t file = sqz_io_output_bytes(out);
    if (file >= 0) printf("; file %.3f MB", (double)file / 1e6);
    printf("\n");
}

/* "accuracy" and the `sqz eval` line that reproduces it. */
static void print_accuracy(const compress_opts *a, const sqz_compress_eval *e) {
    if (e->done && e->encoder)
        printf("accuracy     %s: embedding cosine mean %.6f, min %.6f over %lld sentences (%lld held out)\n", e->text,
               e->cos_mean, e->cos_min, (long long)e->n_chunks, (long long)e->n_held_out);
    else if (e->done)
        printf("accuracy     %s: ppl %.4f -> %.4f (%+.4f), KLD mean %.5f p99 %.5f, top-1 %.2f%%; %lld chunks of %lld "
               "(%lld held out)\n",
               e->text, e->ppl_base, e->ppl, e->delta_ppl, e->kld_mean, e->kld_p99, 100.0 * e->top1,
               (long long)e->n_chunks, (long long)e->ctx, (long long)e->n_held_out);
    char cmd[2048];
    const size_t need = sqz_compress_eval_command(e, a->path, a->out, cmd, sizeof cmd);
    if (need > 0 && need < sizeof cmd) printf("  reproduce  %s\n", cmd);
}

static void print_summary(const compress_opts *a, sqz_format fmt, const sqz_cli_calib *cc,
                          const sqz_compress_report *r) {
    int64_t n_err = 0;
    double sum = 0, worst = -1;
    const char *worst_name = "";
    sqz_cli_layer_counts lc;
    sqz_cli_count_layers(r, &lc);
    char words[256], hint[512];
    for (int64_t i = 0; i < r->n_layers; i++) {
        const sqz_layer_report *l = &r->layers[i];
        if (!l->quantized) continue;
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
    printf("model        %s\n", a->path);
    printf("recipe       %s\n", r->recipe);
    for (int64_t i = 0; i < r->n_stages; i++)
        if (r->stages[i].note[0]) printf("  %-10s %s\n", r->stages[i].pass, r->stages[i].note);
    if (a->imatrix) { /* the legacy .dat records the chunks, not their size; 0: not recorded */
        char cnt[32] = "not recorded", size[32] = "not recorded";
        if (r->n_windows > 0) snprintf(cnt, sizeof cnt, "%lld", (long long)r->n_windows);
        if (r->ctx > 0) snprintf(size, sizeof size, "%lld tokens", (long long)r->ctx);
        printf("calibration  importance matrix %s (llama-imatrix: chunks %s, chunk size %s)\n", a->imatrix, cnt, size);
    }
    else if (r->n_windows)
        printf("calibration  %s%s: %lld windows x %lld tokens (activations %.1f MB)\n", cc->text ? "" : "statistics",
               cc->text ? cc->text : "", (long long)r->n_windows, (long long)r->ctx, (double)r->activation_bytes / 1e6);
    if (r->n_layers_after != r->n_layers_before)
        printf("blocks       %lld -> %lld\n", (long long)r->n_layers_before, (long long)r->n_layers_after);
    if (r->n_layers) {
        sqz_cli_layers_words(&lc, words, sizeof words);
        printf("layers       %s\n", words);
        sqz_cli_kquant_hint(r, &lc, hint, sizeof hint);
        if (hint[0]) printf("hint         %s\n", hint);
        sqz_cli_fallback_words(r, &lc, hint, sizeof hint);
        if (hint[0]) printf("fallback     %s\n", hint);
        sqz_cli_requant_words(r, hint, sizeof hint);
        if (hint[0]) printf("requantized  %s\n", hint);
        sqz_cli_experts_words(r, hint, sizeof hint);
        if (hint[0]) printf("experts      %s\n", hint);
    }
    print_size(r, lc.quantized, a->out);
    if (n_err)
        printf("output err   mean %.5f, worst %.5f (%s), relative, on calibration rows\n", sum / (double)n_err, worst,
               worst_name);
    const sqz_compress_eval *e = &r->eval;
    print_accuracy(a, e);
    sqz_cli_print_tasks(&r->tasks);
    /* the same numbers as the JSON (totals.seconds_*, eval.seconds) and the HTML page */
    printf("time         compress %.2f s (forward %.2f, methods %.2f, validation %.2f)", r->seconds_total,
           r->seconds_forward, r->seconds_quant, r->seconds_validate);
    if (e->done) printf("; evaluation %.2f s", e->seconds);
    if (r->tasks.done) printf("; tasks %.2f s", r->tasks.seconds);
    printf("\n");
    printf("peak memory  %.1f MB\n", (double)ru.ru_maxrss / 1024.0);
    if (r->device[0]) {
        printf("device       %s: memory peak %.1f MB", r->device, (double)r->device_peak_bytes / 1e6);
        if (r->device_cap_bytes) printf(" (--gpu-mem %.1f MB)", (double)r->device_cap_bytes / 1e6);
        const char *by[8];
        int nby = 0, cnt[8] = {0};
        for (int64_t i = 0; i < r->n_layers; i++) { /* which kernels validated the layers */
            const char *v = r->layers[i].validated_by;
            int k = 0;
            while (k < nby && strcmp(by[k], v) != 0) k++;
            if (v[0] && k == nby && nby < 8) by[nby++] = v;
            if (v[0] && k < nby) cnt[k]++;
        }
        for (int k = 0; k < nby; k++) printf("%s %s %d layers", k ? "," : "; validated by", by[k], cnt[k]);
        printf("\n");
    }
    if (r->ranks > 1 || (r->ranks == 1 && getenv("SQZ_DIST_REPORT")))
        printf("distributed  %d ranks, statistics partition %s: rank 0 held at most %.1f MB of statistics (the "
               "most of any rank %.1f MB), sent %.1f MB (%.2f MB per block)\n", r->ranks,
               cc->partition ? "replicate" : "owner", (double)r->stats_peak_bytes / 1e6,
               (double)r->stats_peak_max_bytes / 1e6, (double)r->bytes_sent / 1e6,
               r->n_layers_before ? (double)r->bytes_sent / 1e6 / (double)r->n_layers_before : 0.0);
    printf("wrote        %s (%s)\n", a->out, sqz_format_name(fmt));
}

static bool ends_with(const char *s, const char *suf) {
    size_t n = strlen(s), k = strlen(suf);
    return n >= k && strcmp(s + n - k, suf) == 0;
}

/* The quantization SPEC of the recipe (the last quant stage), or NULL. */
static const sqz_compress_spec *quant_spec(const sqz_recipe *r, const char **text) {
    const sqz_compress_spec *q = NULL;
    for (int i = 0; i < r->n; i++) {
        const sqz_compress_spec *sp = sqz_stage_quant_spec(&r->stages[i]);
        if (!sp) continue;
        q = sp;
        *text = r->stages[i].spec;
    }
    return q;
}

/* The statistics a stage needs (SQZ_QSTAT_* bits). */
static unsigned stage_needs(const sqz_stage *s) {
    unsigned req = 0;
    (void)sqz_stage_needs(s, &req);
    return req;
}

/* Output format and the checks between stages, output and calibration; 0 or exit status 2. */
static int plan_output(const compress_opts *a, const sqz_cli_calib *cc, sqz_save_opts *so) {
    const char *spec = "";
    const sqz_compress_spec *q = quant_spec(&a->recipe, &spec);
    const sqz_qformat qf = q ? q->q.target.fmt : SQZ_QFMT_Q8_0;
    const bool gguf_native = q && sqz_qformat_is_gguf(qf);
    *so = (sqz_save_opts){.format = gguf_native || ends_with(a->out, ".gguf") ? SQZ_FORMAT_GGUF : SQZ_FORMAT_SAFETENSORS,
                          .dtype = -1, .replace = a->force, .hf_format = (sqz_hf_format)a->hf_format,
                          .gguf_blocks_float = true}; /* what the recipe left unquantized is float */
    if (a->to != TO_AUTO) so->format = a->to == TO_GGUF ? SQZ_FORMAT_GGUF : SQZ_FORMAT_SAFETENSORS;
    if (cc->gpu_mem > 0 && cc->device == SQZ_CLI_DEVICE_CPU)
        return sqz_cli_usage_error("compress", "--gpu-mem caps a device's memory: it needs --device cuda (or cpu-offload)");
    if (cc->device != SQZ_CLI_DEVICE_CPU && !cc->text)
        return sqz_cli_usage_error("compress", "--device %s runs the calibration loop: it needs --calib FILE",
                                   cc->device == SQZ_CLI_DEVICE_CUDA ? "cuda" : "cpu-offload");
    if (q && q->mix && !(q->auto_bpw > 0)) /* MOSTLY_Q4_K_M for q4_k_m; auto: the dominant type */
        so->gguf_file_type = sqz_qmix_gguf_ftype(q->mix);
    const sqz_format_traits *fi = sqz_format_info(so->format);
    if (q && !fi->hf_layouts && !gguf_native)
        return sqz_cli_usage_error("compress", "SPEC '%s' stores sqz's %s layout, which GGUF cannot hold: use --to "
                                   "safetensors (an HF directory), or a GGUF format (q8_0, q4_0, q4_1, q*_k, iq4_nl, iq4_xs, iq3_s)",
                                   spec, sqz_qformat_name(qf));
    if (q && fi->hf_layouts && q->method && q->method->smooths &&
        so->hf_format != SQZ_HF_SQZ)
        return sqz_cli_usage_error("compress", "SPEC '%s': %s keeps unfolded smoothing vectors (o_proj's input), "
                                   "which %s cannot hold: give --hf-format sqz (read by sqz only), or a method that "
                                   "does not smooth (rtn, gptq)", spec, q->method->name,
                                   sqz_hf_format_name(so->hf_format));
    if (q && !fi->block_types && gguf_native)
        return sqz_cli_usage_error("compress", "SPEC '%s' is a GGUF block format: write it with --to gguf (or an OUT "
                                   "ending in .gguf); for safetensors use int8 or int4", spec);
    if ((a->embd_type || a->output_type || a->n_tensor_types) && (!q || !q->mix || q->auto_bpw > 0))
        return sqz_cli_usage_error("compress", "--%s applies to a whole-model mix (q4_k_m, q3_k_s, q4_0:mix, ...), "
                                   "not to '%s'", a->embd_type ? "token-embedding-type" : a->output_type ?
                                   "output-tensor-type" : "tensor-type", q ? spec : "no quantization stage");
    unsigned all_req = 0;
    for (int i = 0; i < a->recipe.n; i++) {
        const sqz_stage *s = &a->recipe.stages[i];
        const unsigned req = stage_needs(s);
        all_req |= req;
        if (a->imatrix && (req & ~(unsigned)SQZ_QSTAT_X2))
            return sqz_cli_usage_error("compress", "--%s '%s' needs more than the E[x^2] of an importance matrix: "
                                       "--imatrix serves the imatrix method (e.g. q4_k_m:imatrix); give --calib FILE",
                                       sqz_pass_describe(s->pass).name, s->spec);
        if (req && !cc->text && !a->stats && !a->imatrix)
            return sqz_cli_usage_error("compress", "--%s '%s' needs calibration: give --calib FILE (or --stats FILE, "
                                       "or --imatrix FILE for imatrix)", sqz_pass_describe(s->pass).name, s->spec);
        const sqz_compress_spec *qs = sqz_stage_quant_spec(s);
        if (qs && qs->auto_bpw > 0 && !cc->text) /* it runs the model: statistics from a file are not enough */
            return sqz_cli_usage_error("compress", "--%s '%s' measures every layer's sensitivity and its plans on "
                                       "calibration text: give --calib FILE", sqz_pass_describe(s->pass).name, s->spec);
    }
    if (a->imatrix && !(all_req & SQZ_QSTAT_X2)) /* llama-quantize would use it: never ignore it silently */
        return sqz_cli_usage_error("compress", "--imatrix is for the imatrix method, which no stage uses: add "
                                   "':imatrix' to the SPEC (e.g. --quant %s:imatrix)", q ? spec : "q4_k_m");
    return 0;
}

/* Is the evaluation text the calibration text (same file, or the same bytes)? Then the chunks
 * overlapping calibration windows are held out. */
static bool same_text(const char *a, const char *b) {
    struct stat sa, sb;
    if (!a || !b || stat(a, &sa) || stat(b, &sb)) return false;
    if (sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino) return true;
    if (sa.st_size != sb.st_size) return false;
    FILE *fa = fopen(a, "rb"), *fb = fopen(b, "rb");
    bool eq = fa && fb;
    char x[65536], y[65536];
    size_t n;
    while (eq && (n = fread(x, 1, sizeof x, fa)) > 0) eq = fread(y, 1, n, fb) == n && !memcmp(x, y, n);
    if (fa) fclose(fa);
    if (fb) fclose(fb);
    return eq;
}

static sqz_status evaluate(const compress_opts *a, const sqz_cli_calib *cc, const sqz_model *m,
                           const sqz_calib_windows *w, sqz_compress_report *rep) {
    sqz_model *orig = NULL;
    sqz_open_opts oo = {.tokenizer_path = cc->tokenizer};
    sqz_status st = sqz_model_open(a->path, &oo, &orig);
    if (st != SQZ_OK) return st;
    sqz_compress_eval_opts eo = sqz_compress_eval_default_opts();
    eo.ctx = a->eval_ctx;
    eo.max_chunks = a->eval_chunks;
    eo.threads = (int)cc->threads;
    eo.tokenizer = cc->tokenizer;
    if (a->eval_ctx > 0 && orig->hp.ctx_len > 0 && a->eval_ctx > orig->hp.ctx_len) /* as `sqz eval --ctx` */
        fprintf(stderr, "sqz compress: warning: --eval-ctx %lld is beyond the %lld tokens %s was trained on "
                "(n_ctx_train < n_ctx): positions past them were never trained, the figures are not comparable\n",
                (long long)a->eval_ctx, (long long)orig->hp.ctx_len, a->path);
    sqz_progress *p = sqz_cli_progress(a->quiet, "eval", 0, "tokens");
    eo.progress = sqz_progress_cb;
    eo.progress_user = p;
    const bool held = cc->text && w->n_windows && same_text(a->eval, cc->text);
    st = sqz_compress_eval_run(m, orig, a->eval, NULL, 0, held ? w : NULL, &eo, &rep->eval);
    sqz_progress_end(p);
    sqz_model_free(orig);
    return st;
}

/* --eval-task: the result and the original (reopened) on the tasks. */
static sqz_status evaluate_tasks(const compress_opts *a, const sqz_cli_calib *cc, const sqz_model *m,
                                 sqz_compress_report *rep) {
    sqz_model *orig = NULL;
    sqz_open_opts oo = {.tokenizer_path = cc->tokenizer};
    sqz_status st = sqz_model_open(a->path, &oo, &orig);
    if (st != SQZ_OK) return st;
    sqz_progress *p = sqz_cli_progress(a->quiet, "tasks", 0, "tokens");
    st = sqz_compress_eval_tasks(m, orig, a->eval_task_kind, a->eval_task_file, a->eval_tasks_limit, (int)cc->threads,
                                 sqz_progress_cb, p, &rep->tasks);
    sqz_progress_end(p);
    sqz_model_free(orig);
    return st;
}

/* Stages the reports, writes the model, then commits the reports: all or nothing. */
static sqz_status write_all(const compress_opts *a, sqz_model *m, sqz_save_opts *so, const sqz_compress_report *rep) {
    sqz_outfile *fr = NULL, *fh = NULL;
    sqz_status st = SQZ_OK;
    if (a->report) {
        char *j = sqz_compress_report_json(rep, a->path, a->out);
        st = j ? sqz_outfile_open(a->report, &fr) : SQZ_ERR_NOMEM;
        if (st == SQZ_OK) st = sqz_outfile_write(fr, j, strlen(j));
        free(j);
    }
    if (st == SQZ_OK && a->html) {
        char *h = sqz_cli_report_html(rep, a->path, a->out);
        st = h ? sqz_outfile_open(a->html, &fh) : SQZ_ERR_NOMEM;
        if (st == SQZ_OK) st = sqz_outfile_write(fh, h, strlen(h));
        free(h);
    }
    if (st == SQZ_OK) {
        sqz_progress *p = sqz_cli_progress(a->quiet, "write", sqz_model_data_bytes(m), "B");
        so->progress = sqz_progress_cb;
        so->progress_user = p;
        st = sqz_model_save(m, a->out, so);
        /* the total is the model's data size, an estimate of the file's: a save that wrote
         * fewer bytes still finished ("done", not "stopped at") */
        if (st == SQZ_OK) sqz_progress_update(p, sqz_model_data_bytes(m));
        sqz_progress_end(p);
    }
    if (st == SQZ_OK && fr) st = sqz_outfile_commit(fr);
    else sqz_outfile_abort(fr);
    if (st == SQZ_OK && fh) st = sqz_outfile_commit(fh);
    else sqz_outfile_abort(fh);
    return st;
}

/* A Hessian (GPTQ, SparseGPT, OBS) of an input wider than the calibration tokens is rank-deficient,
 * and the solve then leans on its damping: said before the work, not found after it. */
static void warn_hessian_rank(const compress_opts *a, const sqz_model *m, const sqz_calib_windows *w) {
    const char *by = NULL;
    for (int i = 0; i < a->recipe.n && !by; i++)
        if (stage_needs(&a->recipe.stages[i]) & SQZ_QSTAT_XTX) by = a->recipe.stages[i].spec;
    /* hp.d_ff is the largest layer's (sqz__sync_layer_defaults) */
    const int64_t widest = m->hp.d_ff > m->hp.d_model ? m->hp.d_ff : m->hp.d_model;
    const int64_t tokens = w->n_windows * w->ctx;
    if (by && tokens < widest)
        fprintf(stderr, "sqz compress: warning: '%s' solves with Hessians of up to %lld inputs from %lld calibration "
                        "tokens: rank-deficient, held up by the damping alone; %lld tokens or more (--calib-samples x "
                        "--calib-ctx) make them full rank\n",
                by, (long long)widest, (long long)tokens, (long long)widest);
}

/* *usage is set when the recipe does not fit the model (sqz_recipe_check_model): exit 2. */
static sqz_status run(compress_opts *a, const sqz_cli_calib *cc, sqz_save_opts *so, sqz_compress_report *rep,
                      const sqz_type_overrides *ov, bool *usage) {
    sqz_model *m = NULL;
    sqz_backend *be = NULL;
    sqz_session *s = NULL;
    sqz_calib_stats *stats = NULL;
    sqz_calib_windows w;
    memset(&w, 0, sizeof w);
    sqz_compress_opts co = sqz_compress_default_opts();
    co.keep_float = a->keep;
    co.overrides = ov;
    if (cc->sample_rows >= 0) co.sample_rows = cc->sample_rows;
    co.stats_partition = (sqz_calib_partition)cc->partition;
    sqz_open_opts oo = {.tokenizer_path = cc->tokenizer};
    sqz_status st = sqz_model_open(a->path, &oo, &m);
    if (st == SQZ_OK) sqz_cli_model_warnings(a->path, m);
    /* --keep-float parsed once, against the model, before any work (a malformed item or one that
     * names no tensor of it: exit 2); the run uses these items */
    sqz_keep_float keep;
    if (st == SQZ_OK && (st = sqz_keep_float_parse(a->keep, m, &keep)) != SQZ_OK) *usage = true;
    if (st == SQZ_OK) co.keep_parsed = &keep;
    if (st == SQZ_OK) st = sqz_model_check_finite(m); /* NaN / Inf weights never pass through */
    if (st == SQZ_OK && (st = sqz_recipe_check_model(&a->recipe, m, cc->text != NULL)) != SQZ_OK) *usage = true;
    /* an HF config.json holds one set of layer dims (so does llama.cpp's GGUF loader for some families): refused
     * now, not after the work */
    if (st == SQZ_OK && (sqz_format_info(so->format)->one_layer_shape || sqz_family_get(m->hp.family)->gguf_uniform) &&
        (st = sqz_recipe_check_uniform(&a->recipe, m)) != SQZ_OK)
        *usage = true;
    /* odd FFN widths are padded to the quant group (not with --stats / --imatrix: their statistics have the
     * old widths) */
    if (st == SQZ_OK && !a->stats && !a->imatrix) st = sqz_recipe_pad_for_quant(&a->recipe, m, NULL);
    if (st == SQZ_OK && cc->text && (st = sqz_cli_calib_check(cc, m)) != SQZ_OK) *usage = true;
    if (st == SQZ_OK && a->eval) {
        const sqz_size_term t[] = {{"--eval-ctx", a->eval_ctx > 0 ? a->eval_ctx : 512},
                                   {"vocab_size", m->hp.vocab_size}, {"bytes per float", 4}, {"models", 2}};
        st = sqz_opts_check_size("the logits of an evaluation chunk", t, 4, sqz_cli_memory_limit(), "the memory");
        *usage = st != SQZ_OK;
    }
    if (st == SQZ_OK && a->eval_task) st = sqz_cli_eval_task_check(a->eval_task_kind, a->eval_task_file,
                                                                a->eval_tasks_limit);
    if (st == SQZ_OK && a->stats) st = sqz_calib_stats_read(a->stats, &stats);
    if (st == SQZ_OK && a->imatrix) st = sqz_calib_stats_read_imatrix(a->imatrix, m, &stats);
    if (st == SQZ_OK && cc->text) {
        st = sqz_cli_backend_open(cc, &be);
        if (st == SQZ_OK) st = sqz_cli_calib_open(cc, m, be, &w, &s);
        if (st == SQZ_OK) warn_hessian_rank(a, m, &w);
    }
    if (st == SQZ_OK) {
        sqz_progress *p = sqz_cli_progress(a->quiet, "compress", 0, cc->text ? "passes" : "blocks");
        co.progress = sqz_progress_cb;
        co.progress_user = p;
        sqz_compress_env env = {.windows = cc->text ? &w : NULL, .session = s,
                                .session_opts = sqz_session_default_opts(), .stats = stats};
        env.session_opts.n_threads = (int)cc->threads;
        env.session_opts.backend = be;
        st = sqz_compress_run(m, &a->recipe, &env, &co, rep);
        sqz_progress_end(p);
    }
    sqz_session_free(s); /* the float copies of the weights go before evaluation and writing */
    if (be && cc->device != SQZ_CLI_DEVICE_CPU) {
        sqz_backend_mem mem;
        sqz_backend_mem_stats(be, &mem);
        snprintf(rep->device, sizeof rep->device, "%s", sqz_backend_name(be));
        rep->device_peak_bytes = (int64_t)mem.peak;
        rep->device_cap_bytes = (int64_t)mem.cap;
    }
    if (st == SQZ_OK && a->eval) st = evaluate(a, cc, m, &w, rep);
    if (st == SQZ_OK && a->eval_task) st = evaluate_tasks(a, cc, m, rep);
    if (st == SQZ_OK) st = write_all(a, m, so, rep);
    sqz_calib_stats_free(stats);
    sqz_calib_windows_free(&w);
    sqz_backend_free(be);
    sqz_model_free(m);
    return st;
}

int sqz_cmd_compress(int argc, char **argv) {
    sqz_cli_calib cc;
    sqz_cli_calib_defaults(&cc);
    compress_opts a;
    memset(&a, 0, sizeof a);
    sqz_opt st_rows[16];
    const int ns = stage_rows(st_rows, 16);
    const sqz_opt_group g[] = {{NULL, st_rows, ns, &a},
                               {NULL, compress_rows, SQZ_CLI_N(compress_rows), &a},
                               {NULL, sqz_cli_calib_opts, sqz_cli_calib_n_opts, &cc},
                               {NULL, &sqz_cli_hf_format_opt, 1, &a.hf_format},
                               {NULL, &sqz_cli_quiet_opt, 1, &a.quiet}};
    int jargc = 0;
    char **jargv = sqz_cli_join_eval_task(argc, argv, &jargc);
    if (!jargv) return sqz_cli_fail(SQZ_ERR_NOMEM);
    int rc = sqz_cli_parse("compress", g, 5, jargc, jargv, NULL);
    if (rc == 0 && a.eval_task) rc = sqz_cli_eval_task_spec(a.eval_task, &a.eval_task_kind, &a.eval_task_file);
    if (rc == 0 && a.eval_tasks_limit && !a.eval_task)
        rc = sqz_cli_usage_error("compress", "--eval-tasks-limit applies to --eval-task");
    if (rc == 0 && a.recipe_error[0]) {
        fprintf(stderr, "sqz: error: %s\n", a.recipe_error);
        rc = 1;
    }
    if (rc == 0 && a.recipe.n == 0)
        rc = sqz_cli_usage_error("compress", "no stage given (e.g. --quant q4_0:gptq, --drop-layers 3, --recipe "
                                 "r.json)");
    if (rc == 0 && cc.text && a.stats) rc = sqz_cli_usage_error("compress", "--calib and --stats exclude each other");
    if (rc == 0 && a.imatrix && (cc.text || a.stats))
        rc = sqz_cli_usage_error("compress", "--imatrix excludes %s (one source of statistics)",
                                 cc.text ? "--calib" : "--stats");
    sqz_save_opts so;
    if (rc == 0) rc = plan_output(&a, &cc, &so);
    sqz_type_overrides *ov = NULL;
    if (rc == 0 && a.n_tensor_types > MAX_TENSOR_TYPES)
        rc = sqz_cli_usage_error("compress", "--tensor-type given %d times (at most %d)", a.n_tensor_types,
                                 MAX_TENSOR_TYPES);
    if (rc == 0 && (a.embd_type || a.output_type || a.n_tensor_types) &&
        sqz_type_overrides_new(a.embd_type, a.output_type, a.tensor_types, a.n_tensor_types, &ov) != SQZ_OK)
        rc = sqz_cli_usage_error("compress", "%s", sqz_last_error());
    if (rc != 0) {
        sqz_recipe_free(&a.recipe);
        sqz_cli_join_eval_task_free(argc, argv, jargc, jargv);
        return rc;
    }
    sqz_compress_report rep;
    memset(&rep, 0, sizeof rep);
    bool usage = false;
    sqz_status st = run(&a, &cc, &so, &rep, ov, &usage);
    sqz_type_overrides_free(ov);
    if (usage) rc = sqz_cli_usage_error("compress", "%s", sqz_last_error());
    if (st == SQZ_OK) print_summary(&a, so.format, &cc, &rep);
    sqz_compress_report_free(&rep);
    sqz_recipe_free(&a.recipe);
    sqz_cli_join_eval_task_free(argc, argv, jargc, jargv);
    return usage ? rc : st == SQZ_OK ? 0 : sqz_cli_fail(st);
}

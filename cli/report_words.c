/* cli/report_words.c - the words of the compress report that the summary on stdout and the
 * HTML page share, so that both say the same thing: how the size changed (a file that grew
 * says so), what happened to each layer (quantized, kept float, or kept in the quantized type
 * it was stored in), and the hint towards llama.cpp's mixes when a single K-quant had to keep
 * layers. The JSON holds the same facts as data (totals.bytes_*, each layer's quantized and
 * format). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

bool sqz_cli_format_is_float(const char *format) {
    sqz_dtype t;
    return !sqz_dtype_from_name(format, &t) || !sqz_dtype_info(t)->is_quantized;
}

/* Appends `name` to the comma-separated list in buf unless it is there. */
static void add_type(char *buf, size_t cap, const char *name) {
    const size_t n = strlen(name);
    for (const char *p = buf; (p = strstr(p, name)) != NULL; p += n)
        if ((p == buf || p[-1] == ' ') && (p[n] == ',' || p[n] == 0)) return;
    const size_t k = strlen(buf);
    snprintf(buf + k, cap - k, "%s%s", k ? ", " : "", name);
}

void sqz_cli_count_layers(const sqz_compress_report *r, sqz_cli_layer_counts *c) {
    memset(c, 0, sizeof *c);
    for (int64_t i = 0; i < r->n_layers; i++) {
        const sqz_layer_report *l = &r->layers[i];
        if (l->quantized) {
            c->quantized++;
        } else if (sqz_cli_format_is_float(l->format)) {
            c->kept_float++;
            add_type(c->float_types, sizeof c->float_types, l->format);
        } else {
            c->kept_stored++;
            add_type(c->stored_types, sizeof c->stored_types, l->format);
        }
    }
}

void sqz_cli_layers_words(const sqz_cli_layer_counts *c, char *buf, size_t cap) {
    int k = snprintf(buf, cap, "%lld quantized", (long long)c->quantized);
    if (k > 0 && (size_t)k < cap && c->kept_float)
        k += snprintf(buf + k, cap - (size_t)k, ", %lld kept float (%s)", (long long)c->kept_float, c->float_types);
    if (k > 0 && (size_t)k < cap && c->kept_stored)
        snprintf(buf + k, cap - (size_t)k, ", %lld kept as stored (%s)", (long long)c->kept_stored, c->stored_types);
}

void sqz_cli_size_words(int64_t before, int64_t after, char *buf, size_t cap) {
    if (before <= 0 || after <= 0) snprintf(buf, cap, "size change not measured");
    else if (after < before) snprintf(buf, cap, "x%.2f smaller", (double)before / (double)after);
    else if (after > before) snprintf(buf, cap, "x%.2f larger", (double)after / (double)before);
    else snprintf(buf, cap, "the same size");
}

/* The recipe's last quant stage's row of the report, or NULL. */
static const sqz_stage_report *last_quant_stage(const sqz_compress_report *r) {
    const sqz_stage_report *q = NULL;
    for (int64_t i = 0; i < r->n_stages; i++)
        if (r->stages[i].quantizes) q = &r->stages[i];
    return q;
}

void sqz_cli_kquant_hint(const sqz_compress_report *r, const sqz_cli_layer_counts *c, char *buf, size_t cap) {
    /* a single K-quant (a ':pure' SPEC: without it a K-quant name means llama.cpp's mix) and that mix */
    static const struct { sqz_qformat single; const char *mix; } mixes[] = {
        {SQZ_QFMT_Q2_K, "q2_k"}, {SQZ_QFMT_Q3_K, "q3_k_m"}, {SQZ_QFMT_Q4_K, "q4_k_m"}, {SQZ_QFMT_Q5_K, "q5_k_m"},
        {SQZ_QFMT_Q6_K, "q6_k"}};
    buf[0] = 0;
    int64_t narrow = 0; /* kept because of their width (not --keep-float) */
    for (int64_t i = 0; i < r->n_layers; i++)
        narrow += !r->layers[i].quantized && strstr(r->layers[i].why, "multiple") != NULL;
    if (!narrow) return;
    const sqz_stage_report *q = last_quant_stage(r);
    for (size_t i = 0; q && !q->qmix && i < sizeof mixes / sizeof mixes[0]; i++)
        if (q->qtarget.fmt == mixes[i].single)
            snprintf(buf, cap, "%s left %lld of %lld layers as they were (a K-quant needs an input width that is a "
                     "multiple of 256); llama.cpp's mix --quant %s quantizes those too, with the fallback types "
                     "llama-quantize uses (docs/quantization.md)", sqz_qformat_name(q->qtarget.fmt), (long long)narrow,
                     (long long)(c->quantized + c->kept_float + c->kept_stored), mixes[i].mix);
    for (int64_t i = 0; !buf[0] && i < r->n_layers; i++) /* not a K-quant: say why, naming a layer */
        if (!r->layers[i].quantized && strstr(r->layers[i].why, "multiple") != NULL)
            snprintf(buf, cap, "%lld of %lld layers were left as they were (%s: %s, %lld columns); a group size "
                     "that divides their width quantizes them too", (long long)narrow,
                     (long long)(c->quantized + c->kept_float + c->kept_stored), r->layers[i].tensor,
                     r->layers[i].why, (long long)r->layers[i].n_in);
}

/* Appends "name" to a ", "-separated list of distinct names (kept within cap). */
static void add_distinct(char *list, size_t cap, const char *name) {
    const size_t n = strlen(name);
    for (const char *p = list; (p = strstr(p, name)) != NULL; p += n)
        if ((p == list || p[-1] == ' ') && (p[n] == ',' || p[n] == 0)) return;
    if (strlen(list) + n + 3 >= cap) return;
    if (list[0]) strcat(list, ", ");
    strcat(list, name);
}

void sqz_cli_fallback_words(const sqz_compress_report *r, const sqz_cli_layer_counts *c, char *buf, size_t cap) {
    char pair[8][40];
    int64_t cnt[8] = {0}, total = 0;
    int np = 0;
    buf[0] = 0;
    for (int64_t i = 0; i < r->n_layers; i++) {
        const sqz_layer_report *l = &r->layers[i];
        if (!l->fallback_from[0]) continue;
        char p[40];
        snprintf(p, sizeof p, "%.15s -> %.15s", l->fallback_from, l->format);
        int k = 0;
        while (k < np && strcmp(pair[k], p) != 0) k++;
        if (k == np && np < 8) memcpy(pair[np++], p, sizeof p);
        if (k < np) cnt[k]++;
        total++;
    }
    if (!total) return;
    size_t n = (size_t)snprintf(buf, cap, "%lld of %lld matrices:", (long long)total,
                                (long long)(c->quantized + c->kept_float + c->kept_stored));
    for (int k = 0; k < np && n < cap; k++)
        n += (size_t)snprintf(buf + n, cap - n, "%s %s (%lld)", k ? "," : "", pair[k], (long long)cnt[k]);
    if (n < cap)
        snprintf(buf + n, cap - n, " (width not a multiple of the block; llama-quantize falls back alike)");
}

/* "; tokens per expert: 0 experts got none, fewest 12, most 3,409 (the JSON report lists each)" */
static const char *expert_tokens_words(const sqz_compress_report *r, char *buf, size_t cap) {
    double lo = INFINITY, hi = -INFINITY;
    int64_t none = 0, n = 0;
    for (int64_t b = 0; b < r->n_blocks; b++)
        for (int64_t e = 0; e < r->blocks[b].n_expert; e++) {
            const double t = r->blocks[b].expert_tokens[e];
            lo = t < lo ? t : lo;
            hi = t > hi ? t : hi;
            none += t == 0;
            n++;
        }
    if (!n) return "";
    snprintf(buf, cap, "; tokens per expert: %lld of %lld got none, fewest %.0f, most %.0f (the JSON report "
             "lists each, blocks[].expert_tokens)", (long long)none, (long long)n, lo, hi);
    return buf;
}

/* The row of sqz_qmethods()' table at index i, or NULL. */
static const sqz_qmethod *method_row(int32_t i) {
    int n = 0;
    const sqz_qmethod *t = sqz_qmethods(&n);
    return i >= 0 && i < n ? &t[i] : NULL;
}

void sqz_cli_experts_words(const sqz_compress_report *r, char *buf, size_t cap) {
    int64_t n = 0, rtn = 0, by[3] = {0, 0, 0};
    buf[0] = 0;
    for (int64_t i = 0; i < r->n_layers; i++) {
        const sqz_layer_report *l = &r->layers[i];
        if (l->role != SQZ_ROLE_FFN_GATE_EXPS && l->role != SQZ_ROLE_FFN_UP_EXPS && l->role != SQZ_ROLE_FFN_DOWN_EXPS)
            continue;
        n++;
        rtn += l->quantized && !strncmp(l->why, "rtn: no per-expert", 18);
        /* the method rows an expert's rule takes (compress/pass_quant_experts.c): the SPEC's Hessian method
         * (gptq), the one weighing by E[x^2] (imatrix), the row-wise one (rtn) */
        const sqz_qmethod *mt = l->quantized ? method_row(l->qmethod) : NULL;
        by[0] += mt && mt->hessian;
        by[1] += mt && !mt->hessian && (mt->needs & SQZ_QSTAT_X2);
        by[2] += mt && mt->rowwise;
    }
    if (!n) return;
    char toks[256];
    if (rtn)
        snprintf(buf, cap, "%lld of %lld stacked expert tensors rounded by RTN: no per-expert statistics reached them "
                 "(a mixture's experts take their statistics from --calib or an --imatrix of llama-imatrix)",
                 (long long)rtn, (long long)n);
    else
        snprintf(buf, cap, "%lld stacked expert tensors, each expert by its own statistics (by the rule most of a "
                 "tensor's experts took: gptq %lld, imatrix %lld, rtn %lld; docs/moe.md; each row counts its "
                 "experts)%s", (long long)n, (long long)by[0], (long long)by[1], (long long)by[2],
                 expert_tokens_words(r, toks, sizeof toks));
}

void sqz_cli_requant_words(const sqz_compress_report *r, char *buf, size_t cap) {
    int64_t n = 0;
    char types[64] = "";
    buf[0] = 0;
    sqz_compress_report_counts(r, NULL, &n);
    if (!n) return;
    for (int64_t i = 0; i < r->n_layers; i++) {
        const sqz_layer_report *l = &r->layers[i];
        sqz_dtype d;
        if (l->quantized && sqz_dtype_from_name(l->source_format, &d) && sqz_dtype_info(d)->is_quantized)
            add_distinct(types, sizeof types, l->source_format);
    }
    snprintf(buf, cap, "%lld matrices stored %s in the source, rounded again from their dequantized values "
             "(llama-quantize asks for --allow-requantize)", (long long)n, types);
}

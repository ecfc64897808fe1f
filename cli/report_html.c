/* cli/report_html.c - the compress report as one self-contained HTML page: the totals, the
 * accuracy of the result against the original (when evaluated), an inline SVG plot of every
 * quantized layer's relative output error (log scale, one colour per role, blocks along x,
 * the legend in a band above the plot so it covers no point) and the per-layer table. A value
 * that was not measured is never printed as "nan": the page says why (the tensor stayed float,
 * there were no calibration rows). No scripts, no external resources. The page is written
 * into a memory stream (open_memstream), as the layer and prune sections are. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

/* Text with <, >, & and quotes escaped. */
static void hb_text(FILE *b, const char *s) {
    for (; s && *s; s++) {
        switch (*s) {
        case '<': fprintf(b, "&lt;"); break;
        case '>': fprintf(b, "&gt;"); break;
        case '&': fprintf(b, "&amp;"); break;
        case '"': fprintf(b, "&quot;"); break;
        default: fprintf(b, "%c", *s);
        }
    }
}

/* prefix (HTML), then a number with printf format fmt (one double), or, when it is not
 * finite, "&infin;" or (NaN: not measured) the text `why`. */
static void hb_num(FILE *b, const char *prefix, const char *fmt, double v, const char *why) {
    fprintf(b, "%s", prefix);
    if (isfinite(v)) fprintf(b, fmt, v);
    else if (isinf(v)) fprintf(b, "%s&infin;", v < 0 ? "&minus;" : "");
    else hb_text(b, why);
}

/* ---- totals and accuracy ------------------------------------------------------------- */

static void totals(FILE *b, const sqz_compress_report *r, const char *model, const char *out) {
    fprintf(b, "<table>\n<tr><td>model</td><td>");
    hb_text(b, model);
    fprintf(b, "</td></tr>\n<tr><td>output</td><td>");
    hb_text(b, out);
    char words[512];
    sqz_cli_size_words(r->bytes_before, r->bytes_after, words, sizeof words);
    fprintf(b, "</td></tr>\n<tr><td>size</td><td>%.3f MB &rarr; %.3f MB (", (double)r->bytes_before / 1e6,
              (double)r->bytes_after / 1e6);
    hb_text(b, words);
    fprintf(b, ")</td></tr>\n");
    if (r->n_layers) {
        sqz_cli_layer_counts lc;
        sqz_cli_count_layers(r, &lc);
        sqz_cli_layers_words(&lc, words, sizeof words);
        fprintf(b, "<tr><td>layers</td><td>");
        hb_text(b, words);
        fprintf(b, "</td></tr>\n");
        sqz_cli_kquant_hint(r, &lc, words, sizeof words);
        if (words[0]) {
            fprintf(b, "<tr><td>hint</td><td>");
            hb_text(b, words);
            fprintf(b, "</td></tr>\n");
        }
    }
    fprintf(b, "<tr><td>bits per weight</td><td>");
    if (r->params_quantized > 0) fprintf(b, "%.3f quantized matrices, ", r->bpw_quantized);
    else fprintf(b, "no matrix quantized, ");
    hb_num(b, "", "%.3f whole model", r->bpw_model, "whole model: not counted");
    fprintf(b, "</td></tr>\n");
    if (r->n_windows)
        fprintf(b, "<tr><td>calibration</td><td>%lld windows &times; %lld tokens</td></tr>\n",
                  (long long)r->n_windows, (long long)r->ctx);
    else fprintf(b, "<tr><td>calibration</td><td>none</td></tr>\n");
    /* the numbers of the summary on stdout and of the JSON (totals.seconds_*, eval.seconds) */
    fprintf(b, "<tr><td>time</td><td>compress %.2f s (forward %.2f, methods %.2f, validation %.2f)",
              r->seconds_total, r->seconds_forward, r->seconds_quant, r->seconds_validate);
    if (r->eval.done) fprintf(b, "; evaluation %.2f s", r->eval.seconds);
    fprintf(b, "</td></tr>\n</table>\n");
}

/* "N chunks of C tokens, T tokens scored; H more held out: ..." (encoders: sentences). */
static void eval_extent(FILE *b, const sqz_compress_eval *e) {
    if (e->encoder) fprintf(b, "%lld sentences (one per line, at most %lld tokens)", (long long)e->n_chunks,
                              (long long)e->ctx);
    else fprintf(b, "%lld chunks of %lld tokens, %lld tokens scored", (long long)e->n_chunks, (long long)e->ctx,
                   (long long)e->tokens_scored);
    if (e->n_held_out)
        fprintf(b, "; %lld more held out: they overlap the calibration windows", (long long)e->n_held_out);
}

static void accuracy(FILE *b, const sqz_compress_eval *e) {
    fprintf(b, "<h2>Accuracy vs the original</h2>\n<table>\n<tr><td>text</td><td>");
    hb_text(b, e->text[0] ? e->text : "(given in memory)");
    fprintf(b, "</td></tr>\n<tr><td>evaluated</td><td>");
    eval_extent(b, e);
    fprintf(b, "</td></tr>\n");
    if (e->encoder) {
        hb_num(b, "<tr><td>embedding cosine</td><td>mean ", "%.6f", e->cos_mean, "not measured");
        hb_num(b, ", min ", "%.6f", e->cos_min, "not measured");
        fprintf(b, "</td></tr>\n");
    } else {
        hb_num(b, "<tr><td>perplexity</td><td>", "%.4f", e->ppl_base, "not measured");
        hb_num(b, " &rarr; ", "%.4f", e->ppl, "not measured");
        hb_num(b, " (&Delta; ", "%+.4f", e->delta_ppl, "not measured");
        if (isfinite(e->delta_ppl) && e->ppl_base > 0) fprintf(b, ", %+.3f%%", 100.0 * e->delta_ppl / e->ppl_base);
        hb_num(b, ")</td></tr>\n<tr><td>KL divergence (nats per token)</td><td>mean ", "%.5f", e->kld_mean,
               "not measured");
        hb_num(b, ", p99 ", "%.5f", e->kld_p99, "not measured");
        hb_num(b, "</td></tr>\n<tr><td>top-1 agreement</td><td>", "%.3f%%", 100.0 * e->top1, "not measured");
        fprintf(b, "</td></tr>\n");
    }
    fprintf(b, "<tr><td>time</td><td>evaluation %.2f s</td></tr>\n</table>\n", e->seconds);
}

/* --eval-task: both models on the tasks, the delta and McNemar's test. */
static void tasks_table(FILE *b, const sqz_compress_tasks *t) {
    if (!t->done) return;
    fprintf(b, "<h2>Tasks vs the original</h2>\n<table>\n<tr><td>tasks</td><td>");
    hb_text(b, t->kind);
    fprintf(b, " ");
    hb_text(b, t->file);
    fprintf(b, ", %lld tasks</td></tr>\n", (long long)t->n);
    fprintf(b, "<tr><td>accuracy</td><td>%.2f%% &rarr; %.2f%% (%+.2f points), 95%% CI [%.2f%%, %.2f%%]</td></tr>\n",
            100 * t->accuracy_base, 100 * t->accuracy, 100 * t->delta, 100 * t->ci_lo, 100 * t->ci_hi);
    fprintf(b, "<tr><td>McNemar's exact test</td><td>p = %.3g (%s at 5%%)</td></tr>\n", t->p_value,
            t->p_value < 0.05 ? "significant" : "not significant");
    fprintf(b, "<tr><td>same choice</td><td>%.1f%% of the tasks</td></tr>\n", 100 * t->agree);
    if (t->has_norm)
        fprintf(b, "<tr><td>acc_norm</td><td>%lld &rarr; %lld right (%+.2f points, p = %.3g)</td></tr>\n",
                (long long)t->correct_norm_base, (long long)t->correct_norm, 100 * t->delta_norm, t->p_norm);
    fprintf(b, "<tr><td>time</td><td>%.2f s</td></tr>\n</table>\n", t->seconds);
}

/* One line under the title: how much smaller, how much worse. */
static void headline(FILE *b, const sqz_compress_report *r) {
    const sqz_compress_eval *e = &r->eval;
    fprintf(b, "<p><b>");
    char words[96];
    sqz_cli_size_words(r->bytes_before, r->bytes_after, words, sizeof words);
    if (r->bytes_before > 0 && r->bytes_after > r->bytes_before)
        fprintf(b, "%s: the file grew from %.3f to %.3f MB; ", words, (double)r->bytes_before / 1e6,
                  (double)r->bytes_after / 1e6);
    else fprintf(b, "%s; ", words);
    if (!e->done) fprintf(b, "accuracy not evaluated (sqz compress --eval TEXT)");
    else if (e->encoder) hb_num(b, "embedding cosine vs the original ", "%.5f", e->cos_mean, "not measured");
    else if (isfinite(e->delta_ppl) && e->ppl_base > 0)
        fprintf(b, "vs the original: perplexity %+.2f%%, KLD %.4f, top-1 %.2f%%", 100.0 * e->delta_ppl / e->ppl_base,
                  e->kld_mean, 100.0 * e->top1);
    else fprintf(b, "perplexity change not measured");
    fprintf(b, "</b></p>\n");
}

/* ---- the plot ------------------------------------------------------------------------ */

static const char *role_color(sqz_role r) {
    switch (r) {
    case SQZ_ROLE_ATTN_Q: return "#1f77b4";
    case SQZ_ROLE_ATTN_K: return "#17becf";
    case SQZ_ROLE_ATTN_V: return "#2ca02c";
    case SQZ_ROLE_ATTN_OUT: return "#9467bd";
    case SQZ_ROLE_FFN_GATE: return "#ff7f0e";
    case SQZ_ROLE_FFN_UP: return "#d62728";
    case SQZ_ROLE_FFN_DOWN: return "#8c564b";
    case SQZ_ROLE_TOKEN_EMBD: return "#bcbd22";
    case SQZ_ROLE_OUTPUT: return "#e377c2";
    default: return "#7f7f7f";
    }
}

static bool plotted(const sqz_layer_report *l) { return l->quantized && l->out_err > 0 && isfinite(l->out_err); }

/* Geometry: the legend has a band of its own above the plot area, so no point lies under it. */
typedef struct geom {
    double W, H, L, R, T, B, pw, ph; /* size, margins (T holds the legend band), plot area */
    double lo, hi;                   /* log10 range of the y axis */
    int64_t nb;                      /* columns: blocks, then one for global tensors if any */
    bool global;                     /* a global tensor (classifier, embeddings) is plotted */
} geom;

#define LEGEND_Y 16.0 /* centre line of the legend band */

static double px(const geom *g, const sqz_layer_report *l) {
    double slot; /* spread the roles of a block across its column */
    int64_t col = l->layer;
    if (l->layer < 0) {
        col = g->nb - 1;
        slot = l->role == SQZ_ROLE_TOKEN_EMBD ? 0.25 : l->role == SQZ_ROLE_OUTPUT ? 0.75 : 0.5;
    } else {
        slot = ((double)l->role - SQZ_ROLE_ATTN_Q + 0.5) / (SQZ_ROLE_FFN_DOWN - SQZ_ROLE_ATTN_Q + 1);
    }
    return g->L + g->pw * ((double)col + 0.1 + 0.8 * slot) / (double)g->nb;
}

static double py(const geom *g, double v) { return g->T + g->ph * (1 - (log10(v) - g->lo) / (g->hi - g->lo)); }

/* Returns the number of points; fills the geometry and which roles have points. */
static int64_t plot_geom(const sqz_compress_report *r, geom *g, bool present[SQZ_ROLE_COUNT]) {
    *g = (geom){.W = 960, .H = 380, .L = 70, .R = 20, .T = 36, .B = 50, .lo = INFINITY, .hi = -INFINITY};
    int64_t n = 0, max_layer = 0;
    for (int64_t i = 0; i < r->n_layers; i++) {
        const sqz_layer_report *l = &r->layers[i];
        if (l->layer > max_layer) max_layer = l->layer;
        if (!plotted(l)) continue;
        g->lo = fmin(g->lo, log10(l->out_err));
        g->hi = fmax(g->hi, log10(l->out_err));
        g->global |= l->layer < 0;
        if ((int)l->role >= 0 && l->role < SQZ_ROLE_COUNT) present[l->role] = true;
        n++;
    }
    g->lo = floor(g->lo);
    g->hi = ceil(g->hi);
    if (g->hi <= g->lo) g->hi = g->lo + 1;
    g->nb = max_layer + 1 + (g->global ? 1 : 0);
    g->pw = g->W - g->L - g->R;
    g->ph = g->H - g->T - g->B;
    return n;
}

static void plot_axes(FILE *b, const geom *g) {
    fprintf(b, "<rect x=\"%.0f\" y=\"%.0f\" width=\"%.0f\" height=\"%.0f\" fill=\"#fafafa\" stroke=\"#ccc\"/>\n",
              g->L, g->T, g->pw, g->ph);
    for (double e = g->lo; e <= g->hi + 1e-9; e += 1) {
        const double y = g->T + g->ph * (1 - (e - g->lo) / (g->hi - g->lo));
        fprintf(b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>"
                     "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">1e%d</text>\n",
                  g->L, y, g->L + g->pw, y, g->L - 6, y + 4, (int)e);
    }
    const int64_t blocks = g->nb - (g->global ? 1 : 0);
    const int64_t step = blocks > 16 ? (blocks + 15) / 16 : 1;
    for (int64_t l = 0; l < blocks; l += step)
        fprintf(b, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%lld</text>\n",
                  g->L + g->pw * ((double)l + 0.5) / (double)g->nb, g->T + g->ph + 16, (long long)l);
    if (g->global)
        fprintf(b, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">global</text>\n",
                  g->L + g->pw * ((double)blocks + 0.5) / (double)g->nb, g->T + g->ph + 16);
    fprintf(b, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">block</text>\n", g->L + g->pw / 2, g->H - 8);
    fprintf(b, "<text transform=\"translate(16 %.1f) rotate(-90)\" text-anchor=\"middle\">relative output "
                 "error</text>\n", g->T + g->ph / 2);
}

/* The legend: one entry per role that has points, in the band above the plot area. */
static void plot_legend(FILE *b, const geom *g, const bool present[SQZ_ROLE_COUNT]) {
    double lx = g->L + 8;
    fprintf(b, "<g class=\"legend\">\n");
    for (int r0 = 0; r0 < SQZ_ROLE_COUNT; r0++) {
        if (!present[r0]) continue;
        const char *name = sqz_role_name((sqz_role)r0);
        fprintf(b, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"4\" fill=\"%s\"/><text x=\"%.1f\" y=\"%.1f\">%s</text>\n",
                  lx, LEGEND_Y, role_color((sqz_role)r0), lx + 7, LEGEND_Y + 4, name);
        lx += 22 + 7.5 * (double)strlen(name);
    }
    fprintf(b, "</g>\n");
}

static void plot(FILE *b, const sqz_compress_report *r) {
    geom g;
    bool present[SQZ_ROLE_COUNT] = {false};
    if (!plot_geom(r, &g, present)) {
        fprintf(b, "<p>No output errors to plot: %s.</p>\n",
                  r->n_windows ? "no layer was quantized" : "no calibration rows (compressed without --calib)");
        return;
    }
    fprintf(b, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
                 "viewBox=\"0 0 %.0f %.0f\" font-family=\"sans-serif\" font-size=\"12\">\n", g.W, g.H, g.W, g.H);
    plot_axes(b, &g);
    fprintf(b, "<g class=\"points\">\n");
    for (int64_t i = 0; i < r->n_layers; i++) {
        const sqz_layer_report *l = &r->layers[i];
        if (!plotted(l)) continue;
        fprintf(b, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"4\" fill=\"%s\"><title>", px(&g, l), py(&g, l->out_err),
                  role_color(l->role));
        hb_text(b, l->tensor);
        fprintf(b, ": %.3g</title></circle>\n", l->out_err);
    }
    fprintf(b, "</g>\n");
    plot_legend(b, &g, present);
    fprintf(b, "</svg>\n");
}

/* ---- tables -------------------------------------------------------------------------- */

/* "kept float: <why>" (the reason once when it already says so), or "kept as stored (q4_1):
 * <why>" for a layer that stayed in the quantized type it was stored in. */
static void kept(FILE *b, const sqz_layer_report *l) {
    const char *why = l->why;
    if (!sqz_cli_format_is_float(l->format)) {
        fprintf(b, "kept as stored (");
        hb_text(b, l->format);
        fprintf(b, ")%s", why[0] ? ": " : "");
        hb_text(b, why);
    } else if (!why[0]) fprintf(b, "kept float");
    else if (!strncmp(why, "kept float", 10)) hb_text(b, why);
    else {
        fprintf(b, "kept float: ");
        hb_text(b, why);
    }
}

static void layer_row(FILE *b, const sqz_layer_report *l) {
    fprintf(b, "<tr><td>");
    hb_text(b, l->tensor);
    fprintf(b, "</td><td>");
    hb_text(b, l->quantized || sqz_cli_format_is_float(l->format) ? l->method : "as stored");
    fprintf(b, "</td><td>");
    hb_text(b, l->format);
    fprintf(b, "</td><td>%lld&times;%lld</td><td>", (long long)l->n_out, (long long)l->n_in);
    hb_num(b, "", "%.3f", l->bits_per_weight, "unknown");
    if (!l->quantized) {
        fprintf(b, "</td><td colspan=\"2\" class=\"why\">");
        kept(b, l);
    } else {
        fprintf(b, "</td><td%s>", isnan(l->out_err) ? " class=\"why\"" : "");
        hb_num(b, "", "%.5f", l->out_err, "no calibration rows");
        fprintf(b, "</td><td%s>", isnan(l->weight_err) ? " class=\"why\"" : "");
        hb_num(b, "", "%.5f", l->weight_err, "not measured");
    }
    fprintf(b, "</td><td>%.3f</td></tr>\n", l->seconds);
}

static void layers_table(FILE *b, const sqz_compress_report *r) {
    if (!r->n_layers) return; /* no quantization stage */
    fprintf(b, "<h2>Layers</h2>\n<table><tr><th>tensor</th><th>method</th><th>format</th><th>shape</th>"
                 "<th>bits/weight</th><th>output error</th><th>weight error</th><th>time (s)</th></tr>\n");
    for (int64_t i = 0; i < r->n_layers; i++) layer_row(b, &r->layers[i]);
    fprintf(b, "</table>\n");
}

static void blocks_table(FILE *b, const sqz_compress_report *r) {
    if (!r->n_blocks) return;
    fprintf(b, "<h2>Blocks</h2>\n<table><tr><th>block</th><th>cos(in, out)</th><th>1 &minus; cos</th>"
                 "<th>time (s)</th></tr>\n");
    for (int64_t i = 0; i < r->n_blocks; i++) {
        const sqz_block_report *k = &r->blocks[i];
        fprintf(b, "<tr><td>%d</td>", (int)k->layer);
        if (isfinite(k->cos_mean))
            fprintf(b, "<td>%.5f</td><td>%.5f</td>", k->cos_mean, 1 - k->cos_mean);
        else fprintf(b, "<td colspan=\"2\" class=\"why\">no calibration windows</td>");
        fprintf(b, "<td>%.3f</td></tr>\n", k->seconds);
    }
    fprintf(b, "</table>\n");
}

char *sqz_cli_report_html(const sqz_compress_report *r, const char *model, const char *out) {
    char *buf = NULL;
    size_t len = 0;
    FILE *b = open_memstream(&buf, &len); /* as the layer and prune sections (cli/report_layers.c) */
    if (!b) return NULL;
    fprintf(b, "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>sqz compress: ");
    hb_text(b, r->spec);
    fprintf(b, "</title>\n<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}"
                  "td,th{border:1px solid #ccc;padding:2px 8px;text-align:right}td:first-child,th:first-child"
                  "{text-align:left}td.why{text-align:left;color:#666;font-style:italic}</style></head><body>\n"
                  "<h1>sqz compress ");
    hb_text(b, r->spec);
    fprintf(b, "</h1>\n");
    headline(b, r);
    totals(b, r, model, out);
    if (r->eval.done) accuracy(b, &r->eval);
    tasks_table(b, &r->tasks);
    if (r->n_layers) {
        fprintf(b, "<h2>Per-layer output error</h2>\n<p>||Y<sub>q</sub> &minus; Y||<sub>F</sub> / ||Y||<sub>F</sub> "
                      "of each compressed layer, run as it would run, on calibration rows.</p>\n");
        plot(b, r);
    }
    layers_table(b, r);
    blocks_table(b, r);
    char *ld = sqz_cli_report_layers_html(r); /* layer importance (cli/report_layers.c), when measured */
    if (ld) fprintf(b, "%s", ld);
    free(ld);
    char *pr = sqz_cli_report_prune_html(r); /* structured pruning (cli/report_prune.c), when run */
    if (pr) fprintf(b, "%s", pr);
    free(pr);
    fprintf(b, "</body></html>\n");
    if (fclose(b) != 0) {
        free(buf);
        return NULL;
    }
    return buf;
}

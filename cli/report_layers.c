/* cli/report_layers.c - the layer-removal section of the compress report's HTML page: one
 * inline SVG bar chart per measured importance score (block influence, angular distance of
 * the run of N blocks starting at each block, KLD of the model without each block alone),
 * blocks along x, the removed blocks in red; the per-block table and the compensation maps.
 * report_html.c appends it when a drop-layers stage measured (rep->layerdrop). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli/cli.h"

enum { W = 760, H = 230, PL = 70, PR = 20, PT = 30, PB = 40 };

static double score_of(const sqz_layerdrop_layer *l, int which) {
    return which == 0 ? l->bi : which == 1 ? l->angular : l->kld;
}

static bool any_finite(const sqz_layerdrop_result *d, int which) {
    for (int32_t i = 0; i < d->n_layers; i++)
        if (isfinite(score_of(&d->layers[i], which))) return true;
    return false;
}

/* The top of the y axis: the largest score, or, when one block dwarfs the rest (block 0 of most
 * decoders), 1.25 x the second largest, the taller bars then cut at the top with their value. */
static double y_top(const sqz_layerdrop_result *d, int which) {
    double m1 = 0, m2 = 0;
    for (int32_t i = 0; i < d->n_layers; i++) {
        const double v = score_of(&d->layers[i], which);
        if (!isfinite(v)) continue;
        if (v > m1) m2 = m1, m1 = v;
        else if (v > m2) m2 = v;
    }
    if (m1 <= 0) return 1;
    return m2 > 0 && m1 > 3 * m2 ? 1.25 * m2 : m1;
}

/* One bar chart of score `which` over the blocks. */
static void chart(FILE *f, const sqz_layerdrop_result *d, int which) {
    static const char *const titles[] = {"block influence 1 &minus; E[cos(x<sub>in</sub>, x<sub>out</sub>)]",
                                         "angular distance of the run of %d blocks starting at the block",
                                         "KLD of the model without the block alone (nats/token)"};
    const double mx = y_top(d, which);
    fprintf(f, "<h3>");
    fprintf(f, titles[which], (int)d->count);
    fprintf(f, "</h3>\n<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
               "style=\"font:11px sans-serif\">\n", W, H);
    const double pw = W - PL - PR, ph = H - PT - PB, bw = pw / d->n_layers;
    fprintf(f, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#000\"/>\n", PL, H - PB, W - PR, H - PB);
    fprintf(f, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#000\"/>\n", PL, PT, PL, H - PB);
    for (int k = 0; k <= 4; k++) {
        const double y = H - PB - ph * k / 4.0;
        fprintf(f, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#ddd\"/>"
                   "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%.3g</text>\n", PL, y, W - PR, y, PL - 4, y + 4,
                mx * k / 4.0);
    }
    for (int32_t i = 0; i < d->n_layers; i++) {
        const sqz_layerdrop_layer *l = &d->layers[i];
        const double v = score_of(l, which), x = PL + bw * i;
        if (isfinite(v)) {
            const double h = ph * (v > mx ? 1.0 : v / mx);
            if (v > mx)
                fprintf(f, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">&#9650; %.3g</text>\n", x + bw / 2,
                        PT - 4, v);
            fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\"><title>block %d: "
                       "%.5g%s</title></rect>\n", x + bw * 0.1, H - PB - h, bw * 0.8, h,
                    l->step ? "#d62728" : "#1f77b4", (int)l->layer, v, l->step ? " (removed)" : "");
        }
        if (d->n_layers <= 40 || i % 5 == 0)
            fprintf(f, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%d</text>\n", x + bw / 2, H - PB + 14,
                    (int)l->layer);
    }
    fprintf(f, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">block</text>\n", PL + pw / 2, H - 6);
    fprintf(f, "<rect x=\"%d\" y=\"8\" width=\"10\" height=\"10\" fill=\"#1f77b4\"/><text x=\"%d\" y=\"17\">kept"
               "</text><rect x=\"%d\" y=\"8\" width=\"10\" height=\"10\" fill=\"#d62728\"/><text x=\"%d\" y=\"17\">"
               "removed</text>\n</svg>\n", W - 160, W - 146, W - 100, W - 86);
}

static void cell(FILE *f, double v, const char *fmt) {
    if (isfinite(v)) {
        fprintf(f, "<td>");
        fprintf(f, fmt, v);
        fprintf(f, "</td>");
    } else {
        fprintf(f, "<td class=\"why\">not measured</td>");
    }
}

static void table(FILE *f, const sqz_layerdrop_result *d) {
    fprintf(f, "<table><tr><th>block</th><th>bi</th><th>angular (run of %d)</th><th>KLD without it</th>"
               "<th>top-1 without it</th><th>removed</th></tr>\n", (int)d->count);
    for (int32_t i = 0; i < d->n_layers; i++) {
        const sqz_layerdrop_layer *l = &d->layers[i];
        fprintf(f, "<tr><td>%d</td>", (int)l->layer);
        cell(f, l->bi, "%.5f");
        cell(f, l->angular, "%.5f");
        cell(f, l->kld, "%.5f");
        cell(f, l->top1, "%.4f");
        if (l->step && d->iterative) fprintf(f, "<td>step %d</td></tr>\n", (int)l->step);
        else fprintf(f, "<td>%s</td></tr>\n", l->step ? "yes" : "");
    }
    fprintf(f, "</table>\n");
    if (!d->n_comp) return;
    fprintf(f, "<h3>Compensation (replaceme)</h3>\n<table><tr><th>folded into block</th><th>removed run</th>"
               "<th>||O &minus; L|| / ||L|| before</th><th>after</th></tr>\n");
    for (int32_t i = 0; i < d->n_comp; i++)
        fprintf(f, "<tr><td>%d</td><td>%d&ndash;%d</td><td>%.4f</td><td>%.4f</td></tr>\n", (int)d->comp[i].into,
                (int)d->comp[i].first, (int)d->comp[i].last, d->comp[i].err_before, d->comp[i].err_after);
    fprintf(f, "</table>\n");
}

char *sqz_cli_report_layers_html(const sqz_compress_report *r) {
    const sqz_layerdrop_result *d = r->layerdrop;
    if (!d || !d->layers) return NULL;
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) return NULL;
    fprintf(f, "<h2>Layer importance</h2>\n<p>%d of %d blocks removed by <b>%s</b>%s%s, scored on %lld calibration "
               "windows (%lld tokens; KLD on %lld windows, %lld scored tokens). Removed blocks are red.",
            (int)d->count, (int)d->n_layers, sqz_layerdrop_method_name(d->method), d->iterative ? " (iterative)" : "",
            d->compensated ? ", compensated (replaceme)" : "", (long long)d->n_windows, (long long)d->n_tokens,
            (long long)d->kld_windows, (long long)d->kld_tokens);
    if (d->note[0]) fprintf(f, " %s.", d->note);
    fprintf(f, "</p>\n");
    for (int k = 0; k < 3; k++)
        if (any_finite(d, k)) chart(f, d, k);
    table(f, d);
    if (fclose(f) != 0) {
        free(buf);
        return NULL;
    }
    return buf;
}

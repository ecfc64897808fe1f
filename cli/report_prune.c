/* cli/report_prune.c - the structured-pruning section of the compress report's HTML page
 * (report_html.c appends it when a prune stage ran, rep->prune): inline SVG charts, layers
 * along x, of what was removed (the fraction of each layer's heads and FFN neurons), of every
 * head's importance score (removed heads red), and of the FFN neurons' scores (quartile boxes,
 * min-max whiskers, the highest removed score as a red tick); scores on a log axis, since
 * they span decades across layers; then the per-layer table. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli/cli.h"

enum { W = 760, H = 240, PL = 70, PR = 20, PT = 30, PB = 40 };

typedef struct axis {
    double lo, hi; /* log10 range of the scores */
} axis;

static void frame(FILE *f, const char *title, int32_t n, double (*label)(double, const axis *), const axis *ax,
                  bool pct) {
    fprintf(f, "<h3>%s</h3>\n<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
               "style=\"font:11px sans-serif\">\n", title, W, H);
    fprintf(f, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#000\"/>\n", PL, H - PB, W - PR, H - PB);
    fprintf(f, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#000\"/>\n", PL, PT, PL, H - PB);
    const double ph = H - PT - PB, pw = W - PL - PR;
    for (int k = 0; k <= 4; k++) {
        const double y = H - PB - ph * k / 4.0, v = label(k / 4.0, ax);
        fprintf(f, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#ddd\"/><text x=\"%d\" y=\"%.1f\" "
                   "text-anchor=\"end\">", PL, y, W - PR, y, PL - 4, y + 4);
        fprintf(f, pct ? "%.0f%%</text>\n" : "%.3g</text>\n", pct ? 100 * v : v);
    }
    for (int32_t i = 0; i < n; i++)
        if (n <= 40 || i % 5 == 0)
            fprintf(f, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%d</text>\n", PL + pw * (i + 0.5) / n,
                    H - PB + 14, (int)i);
    fprintf(f, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">layer</text>\n", PL + pw / 2, H - 6);
}

static void legend(FILE *f, const char *c1, const char *t1, const char *c2, const char *t2) {
    fprintf(f, "<rect x=\"%d\" y=\"8\" width=\"10\" height=\"10\" fill=\"%s\"/><text x=\"%d\" y=\"17\">%s</text>"
               "<rect x=\"%d\" y=\"8\" width=\"10\" height=\"10\" fill=\"%s\"/><text x=\"%d\" y=\"17\">%s</text>\n"
               "</svg>\n", W - 260, c1, W - 246, t1, W - 130, c2, W - 116, t2);
}

static double lin_label(double t, const axis *ax) { return ax->lo + t * (ax->hi - ax->lo); }
static double log_label(double t, const axis *ax) { return pow(10, ax->lo + t * (ax->hi - ax->lo)); }

/* y of a score on the log axis (scores <= 0 at the bottom). */
static double ylog(double v, const axis *ax) {
    const double ph = H - PT - PB, t = v > 0 ? (log10(v) - ax->lo) / (ax->hi - ax->lo) : 0;
    return H - PB - ph * (t < 0 ? 0 : t > 1 ? 1 : t);
}

static void removed_chart(FILE *f, const sqz_prune_record *p) {
    double mx = 0;
    for (int32_t i = 0; i < p->n_layers; i++) {
        const sqz_prune_layer *l = &p->layers[i];
        const double h = 1 - (double)l->heads_after / (double)l->heads_before;
        const double n = 1 - (double)l->ffn_after / (double)l->ffn_before;
        mx = fmax(mx, fmax(h, n));
    }
    const axis ax = {0, mx > 0 ? fmin(1, mx * 1.1) : 1};
    frame(f, "removed: fraction of each layer's heads and FFN neurons", p->n_layers, lin_label, &ax, true);
    const double pw = W - PL - PR, ph = H - PT - PB, bw = pw / p->n_layers;
    for (int32_t i = 0; i < p->n_layers; i++) {
        const sqz_prune_layer *l = &p->layers[i];
        const double v[2] = {1 - (double)l->heads_after / (double)l->heads_before,
                             1 - (double)l->ffn_after / (double)l->ffn_before};
        for (int k = 0; k < 2; k++) {
            const double h = ph * v[k] / ax.hi;
            fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\"><title>layer %d: "
                       "%s %lld -&gt; %lld</title></rect>\n", PL + bw * i + bw * (0.1 + 0.4 * k), H - PB - h,
                    bw * 0.4, h, k ? "#2ca02c" : "#ff7f0e", (int)l->layer, k ? "FFN neurons" : "heads",
                    (long long)(k ? l->ffn_before : l->heads_before), (long long)(k ? l->ffn_after : l->heads_after));
        }
    }
    legend(f, "#ff7f0e", "heads", "#2ca02c", "FFN neurons");
}

/* The log10 range of every head score (heads) or neuron quartile (!heads) that is positive. */
static bool score_axis(const sqz_prune_record *p, bool heads, axis *ax) {
    double lo = INFINITY, hi = -INFINITY;
    for (int32_t i = 0; i < p->n_layers; i++) {
        const sqz_prune_layer *l = &p->layers[i];
        const int64_t n = heads ? (l->head_score ? l->heads_before : 0) : (isfinite(l->ffn_q[0]) ? 5 : 0);
        for (int64_t k = 0; k < n; k++) {
            const double v = heads ? l->head_score[k] : l->ffn_q[k];
            if (v > 0 && isfinite(v)) lo = fmin(lo, log10(v)), hi = fmax(hi, log10(v));
        }
    }
    if (!isfinite(lo)) return false;
    ax->lo = floor(lo);
    ax->hi = hi > ax->lo ? ceil(hi + 1e-9) : ax->lo + 1;
    return true;
}

static void head_chart(FILE *f, const sqz_prune_record *p) {
    axis ax;
    if (!score_axis(p, true, &ax)) return;
    char title[160];
    snprintf(title, sizeof title, "importance of every attention head (%s, log scale)",
             sqz_prune_score_name(p->score));
    frame(f, title, p->n_layers, log_label, &ax, false);
    const double pw = W - PL - PR, bw = pw / p->n_layers;
    for (int32_t i = 0; i < p->n_layers; i++) {
        const sqz_prune_layer *l = &p->layers[i];
        for (int64_t h = 0; l->head_score && h < l->heads_before; h++) {
            const double x = PL + bw * (i + 0.15 + 0.7 * ((double)h + 0.5) / (double)l->heads_before);
            fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"2.5\" fill=\"%s\"><title>layer %d head %lld: %.4g%s"
                       "</title></circle>\n", x, ylog(l->head_score[h], &ax), l->head_removed[h] ? "#d62728" : "#1f77b4",
                    (int)l->layer, (long long)h, l->head_score[h], l->head_removed[h] ? " (removed)" : "");
        }
    }
    legend(f, "#1f77b4", "kept", "#d62728", "removed");
}

static void ffn_chart(FILE *f, const sqz_prune_record *p) {
    axis ax;
    if (!score_axis(p, false, &ax)) return;
    char title[200];
    snprintf(title, sizeof title, "importance of the FFN neurons (%s, log scale): quartiles, min&ndash;max, and "
             "the highest removed score", sqz_prune_score_name(p->score));
    frame(f, title, p->n_layers, log_label, &ax, false);
    const double pw = W - PL - PR, bw = pw / p->n_layers;
    for (int32_t i = 0; i < p->n_layers; i++) {
        const sqz_prune_layer *l = &p->layers[i];
        if (!isfinite(l->ffn_q[0])) continue;
        const double xc = PL + bw * (i + 0.5), y[5] = {ylog(l->ffn_q[0], &ax), ylog(l->ffn_q[1], &ax),
                                                       ylog(l->ffn_q[2], &ax), ylog(l->ffn_q[3], &ax),
                                                       ylog(l->ffn_q[4], &ax)};
        fprintf(f, "<g><title>layer %d: min %.4g, quartiles %.4g / %.4g / %.4g, max %.4g; removed up to %.4g"
                   "</title><line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#1f77b4\"/>"
                   "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"#aec7e8\" stroke=\"#1f77b4\"/>"
                   "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#000\"/>",
                (int)l->layer, l->ffn_q[0], l->ffn_q[1], l->ffn_q[2], l->ffn_q[3], l->ffn_q[4], l->ffn_cut, xc, y[4],
                xc, y[0], xc - bw * 0.3, y[3], bw * 0.6, fmax(y[1] - y[3], 0.5), xc - bw * 0.3, y[2], xc + bw * 0.3,
                y[2]);
        if (isfinite(l->ffn_cut))
            fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#d62728\" stroke-width=\"2\"/>",
                    xc - bw * 0.45, ylog(l->ffn_cut, &ax), xc + bw * 0.45, ylog(l->ffn_cut, &ax));
        fprintf(f, "</g>\n");
    }
    legend(f, "#aec7e8", "quartiles", "#d62728", "removed up to");
}

static void cell(FILE *f, double v) {
    if (isfinite(v)) fprintf(f, "<td>%.4g</td>", v);
    else fprintf(f, "<td class=\"why\">-</td>");
}

static void table(FILE *f, const sqz_prune_record *p) {
    fprintf(f, "<table><tr><th>layer</th><th>heads</th><th>KV heads</th><th>heads removed</th><th>FFN neurons</th>"
               "<th>highest removed score</th><th>mean removed</th><th>mean kept</th></tr>\n");
    for (int32_t i = 0; i < p->n_layers; i++) {
        const sqz_prune_layer *l = &p->layers[i];
        fprintf(f, "<tr><td>%d</td><td>%lld &rarr; %lld</td><td>%lld &rarr; %lld</td><td>", (int)l->layer,
                (long long)l->heads_before, (long long)l->heads_after, (long long)l->kv_before,
                (long long)l->kv_after);
        bool first = true;
        for (int64_t h = 0; l->head_removed && h < l->heads_before; h++)
            if (l->head_removed[h]) fprintf(f, "%s%lld", first ? "" : ", ", (long long)h), first = false;
        fprintf(f, "</td><td>%lld &rarr; %lld</td>", (long long)l->ffn_before, (long long)l->ffn_after);
        cell(f, l->ffn_cut);
        cell(f, l->ffn_removed_mean);
        cell(f, l->ffn_kept_mean);
        fprintf(f, "</tr>\n");
    }
    fprintf(f, "</table>\n");
}

char *sqz_cli_report_prune_html(const sqz_compress_report *r) {
    const sqz_prune_record *p = r->prune;
    if (!p || !p->layers || p->n_layers <= 0) return NULL;
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) return NULL;
    fprintf(f, "<h2>Structured pruning</h2>\n<p><b>--prune %s</b>: score <b>%s</b>, compensation <b>%s</b>",
            p->spec, sqz_prune_score_name(p->score), sqz_prune_comp_name(p->comp));
    if (p->d_after != p->d_before)
        fprintf(f, "; hidden channels %lld &rarr; %lld", (long long)p->d_before, (long long)p->d_after);
    fprintf(f, ". Scores are comparable within a layer; the pass ranks each layer's structures by them (a "
               "global budget, params=, ranks them standardized per layer).</p>\n");
    removed_chart(f, p);
    head_chart(f, p);
    ffn_chart(f, p);
    table(f, p);
    if (fclose(f) != 0) {
        free(buf);
        return NULL;
    }
    return buf;
}

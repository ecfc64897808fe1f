/* cli/report_html.c - the compress report as one self-contained HTML page: totals, an inline
 * SVG plot of every quantized layer's relative output error (log scale, one colour per role,
 * blocks along x) and the per-layer table. No scripts, no external resources. */
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

typedef struct hbuf {
    char *p;
    size_t n, cap;
    bool ok;
} hbuf;

static void hb_printf(hbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void hb_printf(hbuf *b, const char *fmt, ...) {
    if (!b->ok) return;
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (k < 0) { b->ok = false; return; }
    if (b->n + (size_t)k + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 16384;
        while (cap < b->n + (size_t)k + 1) cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) { b->ok = false; return; }
        b->p = p;
        b->cap = cap;
    }
    va_start(ap, fmt);
    vsnprintf(b->p + b->n, (size_t)k + 1, fmt, ap);
    va_end(ap);
    b->n += (size_t)k;
}

/* Text with <, >, & and quotes escaped. */
static void hb_text(hbuf *b, const char *s) {
    for (; s && *s; s++) {
        switch (*s) {
        case '<': hb_printf(b, "&lt;"); break;
        case '>': hb_printf(b, "&gt;"); break;
        case '&': hb_printf(b, "&amp;"); break;
        case '"': hb_printf(b, "&quot;"); break;
        default: hb_printf(b, "%c", *s);
        }
    }
}

static const char *role_color(sqz_role r) {
    switch (r) {
    case SQZ_ROLE_ATTN_Q: return "#1f77b4";
    case SQZ_ROLE_ATTN_K: return "#17becf";
    case SQZ_ROLE_ATTN_V: return "#2ca02c";
    case SQZ_ROLE_ATTN_OUT: return "#9467bd";
    case SQZ_ROLE_FFN_GATE: return "#ff7f0e";
    case SQZ_ROLE_FFN_UP: return "#d62728";
    case SQZ_ROLE_FFN_DOWN: return "#8c564b";
    default: return "#7f7f7f";
    }
}

static void plot(hbuf *b, const sqz_compress_report *r) {
    const double W = 960, H = 360, L = 70, R = 20, T = 20, B = 50;
    double lo = INFINITY, hi = -INFINITY;
    int64_t n = 0, max_layer = 0;
    for (int64_t i = 0; i < r->n_layers; i++) {
        const sqz_layer_report *l = &r->layers[i];
        if (l->layer > max_layer) max_layer = l->layer;
        if (!l->quantized || !(l->out_err > 0) || !isfinite(l->out_err)) continue;
        lo = fmin(lo, log10(l->out_err));
        hi = fmax(hi, log10(l->out_err));
        n++;
    }
    if (!n) {
        hb_printf(b, "<p>No output errors to plot (no calibration rows).</p>\n");
        return;
    }
    lo = floor(lo);
    hi = ceil(hi);
    if (hi <= lo) hi = lo + 1;
    const double pw = W - L - R, ph = H - T - B;
    hb_printf(b, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
                 "viewBox=\"0 0 %.0f %.0f\" font-family=\"sans-serif\" font-size=\"12\">\n", W, H, W, H);
    hb_printf(b, "<rect x=\"%.0f\" y=\"%.0f\" width=\"%.0f\" height=\"%.0f\" fill=\"#fafafa\" stroke=\"#ccc\"/>\n", L,
              T, pw, ph);
    for (double e = lo; e <= hi + 1e-9; e += 1) {
        const double y = T + ph * (1 - (e - lo) / (hi - lo));
        hb_printf(b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>"
                     "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">1e%d</text>\n",
                  L, y, L + pw, y, L - 6, y + 4, (int)e);
    }
    const int64_t nb = max_layer + 1;
    const int64_t step = nb > 16 ? (nb + 15) / 16 : 1;
    for (int64_t l = 0; l < nb; l += step) {
        const double x = L + pw * ((double)l + 0.5) / (double)nb;
        hb_printf(b, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%lld</text>\n", x, T + ph + 16, (long long)l);
    }
    hb_printf(b, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">block</text>\n", L + pw / 2, H - 8);
    hb_printf(b, "<text transform=\"translate(16 %.1f) rotate(-90)\" text-anchor=\"middle\">relative output "
                 "error</text>\n", T + ph / 2);
    for (int64_t i = 0; i < r->n_layers; i++) {
        const sqz_layer_report *l = &r->layers[i];
        if (!l->quantized || !(l->out_err > 0) || !isfinite(l->out_err)) continue;
        /* spread the roles of a block across its column */
        const double slot = ((double)l->role - SQZ_ROLE_ATTN_Q + 0.5) / (SQZ_ROLE_FFN_DOWN - SQZ_ROLE_ATTN_Q + 1);
        const double x = L + pw * ((double)l->layer + 0.1 + 0.8 * slot) / (double)nb;
        const double y = T + ph * (1 - (log10(l->out_err) - lo) / (hi - lo));
        hb_printf(b, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"4\" fill=\"%s\"><title>", x, y, role_color(l->role));
        hb_text(b, l->tensor);
        hb_printf(b, ": %.3g</title></circle>\n", l->out_err);
    }
    double lx = L + 8;
    for (int r0 = SQZ_ROLE_ATTN_Q; r0 <= SQZ_ROLE_FFN_DOWN; r0++) {
        if (r0 == SQZ_ROLE_ATTN_OUT_NORM || r0 == SQZ_ROLE_FFN_NORM) continue;
        hb_printf(b, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"4\" fill=\"%s\"/><text x=\"%.1f\" y=\"%.1f\">%s</text>\n",
                  lx, T + 10, role_color((sqz_role)r0), lx + 7, T + 14, sqz_role_name((sqz_role)r0));
        lx += 95;
    }
    hb_printf(b, "</svg>\n");
}

char *sqz_cli_report_html(const sqz_compress_report *r, const char *model, const char *out) {
    hbuf b = {NULL, 0, 0, true};
    hb_printf(&b, "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>sqz compress: ");
    hb_text(&b, r->spec);
    hb_printf(&b, "</title>\n<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}"
                  "td,th{border:1px solid #ccc;padding:2px 8px;text-align:right}td:first-child,th:first-child"
                  "{text-align:left}</style></head><body>\n<h1>sqz compress ");
    hb_text(&b, r->spec);
    hb_printf(&b, "</h1>\n<table>\n<tr><td>model</td><td>");
    hb_text(&b, model);
    hb_printf(&b, "</td></tr>\n<tr><td>output</td><td>");
    hb_text(&b, out);
    hb_printf(&b, "</td></tr>\n<tr><td>size</td><td>%.3f MB &rarr; %.3f MB (&times;%.2f)</td></tr>\n",
              (double)r->bytes_before / 1e6, (double)r->bytes_after / 1e6,
              r->bytes_after ? (double)r->bytes_before / (double)r->bytes_after : 0.0);
    hb_printf(&b, "<tr><td>bits per weight</td><td>%.3f quantized matrices, %.3f whole model</td></tr>\n",
              r->bpw_quantized, r->bpw_model);
    if (r->n_windows)
        hb_printf(&b, "<tr><td>calibration</td><td>%lld windows &times; %lld tokens</td></tr>\n",
                  (long long)r->n_windows, (long long)r->ctx);
    hb_printf(&b, "<tr><td>time</td><td>%.2f s (forward %.2f, methods %.2f, validation %.2f)</td></tr>\n</table>\n",
              r->seconds_total, r->seconds_forward, r->seconds_quant, r->seconds_validate);
    hb_printf(&b, "<h2>Per-layer output error</h2>\n<p>||Y<sub>q</sub> &minus; Y||<sub>F</sub> / ||Y||<sub>F</sub> "
                  "of each compressed layer, run as it would run, on calibration rows.</p>\n");
    plot(&b, r);
    hb_printf(&b, "<h2>Layers</h2>\n<table><tr><th>tensor</th><th>method</th><th>format</th><th>shape</th>"
                  "<th>bits/weight</th><th>output error</th><th>weight error</th><th>time (s)</th></tr>\n");
    for (int64_t i = 0; i < r->n_layers; i++) {
        const sqz_layer_report *l = &r->layers[i];
        hb_printf(&b, "<tr><td>");
        hb_text(&b, l->tensor);
        hb_printf(&b, "</td><td>");
        hb_text(&b, l->method);
        hb_printf(&b, "</td><td>");
        hb_text(&b, l->format);
        hb_printf(&b, "</td><td>%lld&times;%lld</td><td>%.3f</td><td>%.5f</td><td>%.5f</td><td>%.3f</td></tr>\n",
                  (long long)l->n_out, (long long)l->n_in, l->bits_per_weight, l->out_err, l->weight_err, l->seconds);
    }
    hb_printf(&b, "</table>\n");
    if (r->n_blocks) {
        hb_printf(&b, "<h2>Blocks</h2>\n<table><tr><th>block</th><th>cos(in, out)</th><th>1 &minus; cos</th>"
                      "<th>time (s)</th></tr>\n");
        for (int64_t i = 0; i < r->n_blocks; i++)
            hb_printf(&b, "<tr><td>%d</td><td>%.5f</td><td>%.5f</td><td>%.3f</td></tr>\n", (int)r->blocks[i].layer,
                      r->blocks[i].cos_mean, 1 - r->blocks[i].cos_mean, r->blocks[i].seconds);
        hb_printf(&b, "</table>\n");
    }
    hb_printf(&b, "</body></html>\n");
    if (!b.ok) {
        free(b.p);
        return NULL;
    }
    return b.p;
}

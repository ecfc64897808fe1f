/*
 * quant/awq.c - AWQ (Lin et al., "AWQ: Activation-aware Weight Quantization", 2023; llm-awq's
 * auto_scale and auto_clip), on any target format, GGUF grids included.
 *
 * Scale search: for alpha in {0, 1/grid, ..., (grid-1)/grid}, s = mean|x|^alpha clamped to
 * >= 1e-4 and divided by sqrt(max s * min s); the layers sharing the input are quantized as
 * Q(W . diag s) and evaluated on (X / s), i.e. Q(W diag s) diag(s)^-1 against W on X; the
 * alpha with the smallest summed squared output error wins (alpha 0 is plain RTN, so the
 * search never does worse than RTN on its sample).
 * Clip search (after scaling, on the scaled input): per row and group, the threshold
 * max|w| * (1 - i/grid), i < grid * max_shrink, minimising the group's partial output error
 * sum_t (x_t,g . (Q(clip(w_g)) - w_g))^2 = d^T G_g d with the group's Gram matrix G_g.
 * The result stores Q(clip(W diag s)); the caller folds 1/s into the previous operation.
 */
#include <cblas.h>
#include <float.h>
#include <stdlib.h>
#include <string.h>

#include "core/blocks.h"
#include "core/dequant.h"
#include "quant/gguf/quant_gguf.h"
#include "quant/quant_internal.h"
#include "sqz/progress.h"

/* Quantize-dequantize one group of n values (n = the format's group) with the reference. */
static void fake_group(sqz_qformat f, const float *w, int n, float *out) {
    switch (f) {
    case SQZ_QFMT_Q8_0: { sqz_block_q8_0 b; sqz__quantize_q8_0_ref(w, &b, 32); sqz__dequantize_q8_0(&b, out, 32); break; }
    case SQZ_QFMT_Q4_0: { sqz_block_q4_0 b; sqz__quantize_q4_0_ref(w, &b, 32); sqz__dequantize_q4_0(&b, out, 32); break; }
    case SQZ_QFMT_Q4_1: { sqz_block_q4_1 b; sqz__quantize_q4_1_ref(w, &b, 32); sqz__dequantize_q4_1(&b, out, 32); break; }
    default: {
        sqz__grid g;
        sqz__grid_make(f, w, n, &g);
        for (int i = 0; i < n; i++) out[i] = sqz__grid_value(&g, f, sqz__grid_code(&g, f, w[i]));
    }
    }
}

static void awq_scales(const float *absmean, int64_t n, float alpha, float *s) {
    float mx = 0, mn = FLT_MAX;
    for (int64_t j = 0; j < n; j++) {
        float v = powf(absmean[j], alpha);
        v = v < 1e-4f ? 1e-4f : v;
        s[j] = v;
        mx = v > mx ? v : mx;
        mn = v < mn ? v : mn;
    }
    const float norm = sqrtf(mx * mn);
    for (int64_t j = 0; j < n; j++) s[j] /= norm;
}

sqz_status sqz_awq_search_scales(const sqz_qlinear *lin, int n_lin, const sqz_qstats *st, const sqz_quant_opts *o,
                                 float *s, float *alpha) {
    SQZ_TRY(sqz__check_method_args("awq", lin, n_lin, st, o, SQZ_QSTAT_SAMPLE, s, true));
    SQZ_RETURN_IF(o->awq_grid < 1 || o->awq_grid > 1000, SQZ_ERR_INVALID_ARG, "awq: grid %d", (int)o->awq_grid);
    const int64_t n = st->n_in;
    int64_t nx;
    float *rows_owned;
    const float *x = sqz__search_rows(st, o, &nx, &rows_owned);
    if (!x) return SQZ_ERR_NOMEM;
    int64_t max_out = 0;
    for (int i = 0; i < n_lin; i++) max_out = lin[i].n_out > max_out ? lin[i].n_out : max_out;
    float *am = sqz__calloc((size_t)n, sizeof(float));
    float *cand = sqz__malloc((size_t)n * sizeof(float));
    float *xs = sqz__malloc((size_t)nx * (size_t)n * sizeof(float));
    float *ws = sqz__malloc((size_t)max_out * (size_t)n * sizeof(float));
    float *qs = sqz__malloc((size_t)max_out * (size_t)n * sizeof(float));
    float *yq = sqz__malloc((size_t)nx * (size_t)max_out * sizeof(float));
    float **yref = sqz__calloc((size_t)n_lin, sizeof(float *));
    sqz_status st_ = SQZ_ERR_NOMEM;
    if (!am || !cand || !xs || !ws || !qs || !yq || !yref) goto done;
    if (st->absmean) memcpy(am, st->absmean, (size_t)n * sizeof(float));
    else { /* from the sample */
        for (int64_t r = 0; r < st->n_x; r++)
            for (int64_t j = 0; j < n; j++) am[j] += fabsf(st->x[r * n + j]);
        for (int64_t j = 0; j < n; j++) am[j] /= (float)st->n_x;
    }
    for (int i = 0; i < n_lin; i++) {
        yref[i] = sqz__malloc((size_t)nx * (size_t)lin[i].n_out * sizeof(float));
        if (!yref[i]) goto done;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)nx, (int)lin[i].n_out, (int)n, 1.0f, x, (int)n,
                    lin[i].w, (int)n, 0.0f, yref[i], (int)lin[i].n_out);
    }
    double best = INFINITY;
    *alpha = 0;
    for (int k = 0; k < o->awq_grid; k++) {
        const float a = (float)k / (float)o->awq_grid;
        awq_scales(am, n, a, cand);
        for (int64_t r = 0; r < nx; r++)
            for (int64_t j = 0; j < n; j++) xs[r * n + j] = x[r * n + j] / cand[j];
        double err = 0;
        for (int i = 0; i < n_lin && err < best; i++) {
            memcpy(ws, lin[i].w, (size_t)lin[i].n_out * (size_t)n * sizeof(float));
            sqz_scale_columns(ws, lin[i].n_out, n, cand);
            if ((st_ = sqz__fake_quant(ws, lin[i].n_out, n, &o->target, qs)) != SQZ_OK) goto done;
            err += sqz__out_err2(xs, nx, n, NULL, qs, lin[i].n_out, yref[i], yq, true);
        }
        if (err < best) {
            best = err;
            *alpha = a;
            memcpy(s, cand, (size_t)n * sizeof(float));
        }
    }
    st_ = SQZ_OK;
done:
    for (int i = 0; yref && i < n_lin; i++) free(yref[i]);
    free(yref); free(am); free(cand); free(xs); free(ws); free(qs); free(yq); free(rows_owned);
    return st_;
}

/* Clipping search on ws (n_out, n) in place, for input rows xs (nx, n). */
static sqz_status awq_clip(float *ws, int64_t n_out, int64_t n, const float *xs, int64_t nx, const sqz_quant_opts *o) {
    const sqz_qformat f = o->target.fmt;
    const int64_t gs = sqz__group_cols(&o->target, n), ng = n / gs;
    const int steps = (int)((float)o->awq_clip_grid * o->awq_max_shrink);
    if (steps < 2 || f == SQZ_QFMT_I8) return SQZ_OK; /* one candidate, or a whole-row group: no search */
    float *gram = sqz__malloc((size_t)ng * (size_t)(gs * gs) * sizeof(float));
    float *buf = sqz__malloc((size_t)gs * 3 * sizeof(float));
    if (!gram || !buf) { free(gram); free(buf); return SQZ_ERR_NOMEM; }
    for (int64_t g = 0; g < ng; g++) {
        float *G = gram + g * gs * gs;
        cblas_ssyrk(CblasRowMajor, CblasUpper, CblasTrans, (int)gs, (int)nx, 1.0f, xs + g * gs, (int)n, 0.0f, G,
                    (int)gs);
        for (int64_t a = 0; a < gs; a++)
            for (int64_t b = 0; b < a; b++) G[a * gs + b] = G[b * gs + a];
    }
    float *clipped = buf, *q = buf + gs, *d = buf + 2 * gs;
    for (int64_t r = 0; r < n_out; r++) {
        for (int64_t g = 0; g < ng; g++) {
            float *w = ws + r * n + g * gs;
            const float *G = gram + g * gs * gs;
            float org = 0;
            for (int64_t j = 0; j < gs; j++) org = fabsf(w[j]) > org ? fabsf(w[j]) : org;
            double best = INFINITY;
            float best_mx = org;
            for (int i = 0; i < steps; i++) {
                const float mx = org * (1.0f - (float)i / (float)o->awq_clip_grid);
                for (int64_t j = 0; j < gs; j++) clipped[j] = w[j] > mx ? mx : (w[j] < -mx ? -mx : w[j]);
                fake_group(f, clipped, (int)gs, q);
                for (int64_t j = 0; j < gs; j++) d[j] = q[j] - w[j];
                double e = 0;
                for (int64_t a = 0; a < gs; a++) {
                    double row = 0;
                    for (int64_t b = 0; b < gs; b++) row += (double)G[a * gs + b] * d[b];
                    e += row * d[a];
                }
                if (e < best) { best = e; best_mx = mx; }
            }
            for (int64_t j = 0; j < gs; j++) w[j] = w[j] > best_mx ? best_mx : (w[j] < -best_mx ? -best_mx : w[j]);
        }
    }
    free(gram);
    free(buf);
    return SQZ_OK;
}

sqz_status sqz_quant_awq(const sqz_qlinear *lin, int n_lin, const sqz_qstats *st, const sqz_quant_opts *o,
                         sqz_qmatrix *out, float *smooth) {
    SQZ_TRY(sqz__check_method_args("awq", lin, n_lin, st, o, SQZ_QSTAT_SAMPLE, smooth, true));
    SQZ_RETURN_IF(o->act_mode != SQZ_ACT_FLOAT, SQZ_ERR_UNSUPPORTED, "awq: weight-only (use smoothquant for W8A8)");
    const double t0 = sqz_now_seconds();
    float alpha = 0;
    SQZ_TRY(sqz_awq_search_scales(lin, n_lin, st, o, smooth, &alpha));
    const int64_t n = st->n_in;
    int64_t nx;
    float *rows_owned;
    const float *x = sqz__search_rows(st, o, &nx, &rows_owned);
    float *xs = x ? sqz__malloc((size_t)nx * (size_t)n * sizeof(float)) : NULL;
    if (!xs) { free(rows_owned); return SQZ_ERR_NOMEM; }
    for (int64_t r = 0; r < nx; r++)
        for (int64_t j = 0; j < n; j++) xs[r * n + j] = x[r * n + j] / smooth[j];
    free(rows_owned);
    const double t_search = sqz_now_seconds() - t0;
    sqz_status s = SQZ_OK;
    int i = 0;
    for (; i < n_lin; i++) {
        const double t1 = sqz_now_seconds();
        float *ws = sqz__malloc((size_t)lin[i].n_out * (size_t)n * sizeof(float));
        if (!ws) { s = SQZ_ERR_NOMEM; break; }
        memcpy(ws, lin[i].w, (size_t)lin[i].n_out * (size_t)n * sizeof(float));
        sqz_scale_columns(ws, lin[i].n_out, n, smooth);
        if (o->awq_clip && !lin[i].skip_clip) s = awq_clip(ws, lin[i].n_out, n, xs, nx, o);
        if (s == SQZ_OK) s = sqz_quant_rtn_one(ws, lin[i].n_out, n, &o->target, &out[i]);
        free(ws);
        if (s != SQZ_OK) break;
        out[i].alpha = alpha;
        out[i].seconds = sqz_now_seconds() - t1 + t_search / n_lin;
    }
    free(xs);
    if (s != SQZ_OK) {
        for (int j = 0; j < i; j++) sqz_qmatrix_free(&out[j]);
        if (i < n_lin && lin[i].name) sqz__error_prefix("%s", lin[i].name);
    }
    return s;
}

void sqz_scale_columns(float *w, int64_t n_out, int64_t n_in, const float *s) {
    for (int64_t r = 0; r < n_out; r++)
        for (int64_t j = 0; j < n_in; j++) w[r * n_in + j] *= s[j];
}

void sqz_fold_smooth_into_norm(float *gamma, float *beta, int64_t n, const float *s) {
    for (int64_t j = 0; j < n; j++) {
        gamma[j] /= s[j];
        if (beta) beta[j] /= s[j];
    }
}

void sqz_fold_smooth_into_linear(float *w_prev, float *b_prev, int64_t n_out_prev, int64_t n_in_prev,
                                 const float *s) {
    for (int64_t r = 0; r < n_out_prev; r++) {
        for (int64_t j = 0; j < n_in_prev; j++) w_prev[r * n_in_prev + j] /= s[r];
        if (b_prev) b_prev[r] /= s[r];
    }
}

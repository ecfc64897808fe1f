/*
 * calib/observe_xtx.c - the observers' Hessian sums X^T X through a backend's xtx slot
 * (sqz/backend.h; issue 26). Without a backend the host forms them (sqz__xtx_panel, the bits
 * observers always had); a host-memory backend (the CPU) takes the same call on the host sums
 * (the same bits again).
 *
 * On a device backend an input's upper triangle is kept as row panels of DEV_PANEL rows (panel p:
 * rows [pP, min(k, (p+1)P)), columns from pP on, contiguous), each event's rows updating every
 * panel through the xtx slot's row-panel form (the first update with beta 0). Where the panels
 * live does not change their bits, only the traffic:
 *   - no --gpu-mem cap: every panel stays in device memory until the observer is sealed,
 *     finished, merged or packed (sqz__calib_xtx_to_host); about half a dense k x k;
 *   - under a cap: the sums stay on the host (hacc) and each panel's update passes through one
 *     device panel (uploaded, updated, downloaded), so an 8960-wide input needs 37 MB of device
 *     memory instead of 321 MB, at the price of two crossings of the bus per window.
 * Either way the xtx slot receives the same operands in device buffers of the same shapes, so a
 * capped run's Hessians are the uncapped run's bits. What follows the flush is host arithmetic.
 *
 * The column statistics (E[x^2], E|x|, E[x], absmax) and layer scoring's cosines go through the
 * colstats and cosine slots the same way when the event's rows are on the device: the column sums
 * continue the host's (uploaded at the first update, copied back at the flush), so they are the
 * host's bits (sqz/backend.h: every backend adds the rows in order).
 */
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/backend_impl.h"
#include "calib/observe_internal.h"

enum { DEV_PANEL = 4 * SQZ_XTX_PANEL_ALIGN }; /* rows per device panel (fixed: the bits depend on it) */

static bool on_device_opts(const sqz_calib_observe_opts *o) {
    return o->backend && !sqz_backend_host_memory(o->backend);
}

static bool on_device(const sqz_calib_observer *ob) { return on_device_opts(&ob->o); }

/* Under --gpu-mem the sums stay on the host (the panels pass through the device). */
static bool streamed(const sqz_backend *b) {
    sqz_backend_mem m;
    sqz_backend_mem_stats(b, &m);
    return m.cap != 0;
}

static int64_t n_panels(int64_t k) { return (k + DEV_PANEL - 1) / DEV_PANEL; }

/* Panel p of width k: rows [*a, *e), (e - a) x (k - a) doubles. */
static size_t panel_of(int64_t k, int64_t p, int64_t *a, int64_t *e) {
    *a = p * DEV_PANEL;
    *e = *a + DEV_PANEL < k ? *a + DEV_PANEL : k;
    return (size_t)(*e - *a) * (size_t)(k - *a) * sizeof(double);
}

/* A failed alloc (the backend set the error): the message names what was wanted. */
static sqz_status alloc_failed(const char *what, int64_t a, int64_t b) {
    sqz__error_prefix("calibration: %s of %lld x %lld", what, (long long)a, (long long)b);
    return SQZ_ERR_NOMEM;
}

sqz_status sqz__calib_xtx_check(const sqz_calib_observe_opts *o) {
    if (!o->backend || !(o->needs & SQZ_QSTAT_XTX)) return SQZ_OK;
    SQZ_RETURN_IF(!sqz_backend_supports(o->backend, SQZ_OP_XTX, SQZ_DTYPE_F32), SQZ_ERR_UNSUPPORTED,
                  "calibration: backend %s has no X^T X (xtx slot)", o->backend->ops->name);
    SQZ_RETURN_IF(on_device_opts(o) && (!o->backend->ops->alloc || !o->backend->ops->upload ||
                                        !o->backend->ops->download),
                  SQZ_ERR_UNSUPPORTED, "calibration: backend %s cannot move memory", o->backend->ops->name);
    return SQZ_OK;
}

/* The observer's host staging buffer, at least `bytes` (page-locked when the backend can). */
static sqz_status stage_get(sqz_calib_observer *ob, size_t bytes) {
    if (bytes <= ob->stage_bytes) return SQZ_OK;
    const sqz_backend *b = ob->o.backend;
    if (ob->stage_pinned) sqz_backend_unpin(b, ob->stage);
    free(ob->stage);
    ob->stage_bytes = 0;
    ob->stage_pinned = false;
    if (!(ob->stage = sqz__malloc(bytes))) return SQZ_ERR_NOMEM;
    ob->stage_bytes = bytes;
    ob->stage_pinned = sqz_backend_pin(b, ob->stage, bytes, 0);
    return SQZ_OK;
}

/* Device memory of at least `bytes` at *p (*have its size), regrown when smaller. */
static sqz_status dev_get(const sqz_backend *b, void **p, size_t *have, size_t bytes, const char *what, int64_t r,
                          int64_t c) {
    if (bytes <= *have) return SQZ_OK;
    if (b->ops->free) b->ops->free(b->ctx, *p);
    *have = 0;
    if (!(*p = b->ops->alloc(b->ctx, bytes))) return alloc_failed(what, r, c);
    *have = bytes;
    return SQZ_OK;
}

/* Host rows [a, e) of acc (row stride k), columns [a, k), to or from the contiguous stage. */
static void pack(double *acc, double *stage, int64_t k, int64_t a, int64_t e, bool to_stage) {
    const size_t w = (size_t)(k - a);
    for (int64_t r = a; r < e; r++) {
        double *h = acc + r * k + a, *s = stage + (size_t)(r - a) * w;
        memcpy(to_stage ? s : h, to_stage ? h : s, w * sizeof(double));
    }
}

static sqz_status wait_for(const sqz_backend *b) { return b->ops->synchronize ? b->ops->synchronize(b->ctx) : SQZ_OK; }

/* The device panel p of `in`: resident (allocated at its first update), or under a cap the
 * passing panel with the host's sum uploaded into it (nothing to upload before the first). */
static sqz_status panel_in(sqz_calib_observer *ob, obs_input *in, int64_t p, bool stream, double **h) {
    const sqz_backend *b = ob->o.backend;
    const int64_t k = in->n_in;
    int64_t a, e;
    const size_t bytes = panel_of(k, p, &a, &e);
    if (!stream) {
        if (!in->dev_hp[p] && !(in->dev_hp[p] = b->ops->alloc(b->ctx, bytes)))
            return alloc_failed("device Hessian panel", e - a, k - a);
        *h = in->dev_hp[p];
        return SQZ_OK;
    }
    SQZ_TRY(dev_get(b, &ob->dev_pan, &ob->dev_pan_bytes, bytes, "device Hessian panel", e - a, k - a));
    *h = ob->dev_pan;
    if (!in->dev_used) return SQZ_OK;
    SQZ_TRY(stage_get(ob, bytes));
    pack(in->hacc, ob->stage, k, a, e, true);
    return b->ops->upload(b->ctx, ob->dev_pan, ob->stage, bytes);
}

/* Under a cap: the passing panel's new sum back into the host's. */
static sqz_status panel_out(sqz_calib_observer *ob, obs_input *in, int64_t p) {
    const sqz_backend *b = ob->o.backend;
    const int64_t k = in->n_in;
    int64_t a, e;
    const size_t bytes = panel_of(k, p, &a, &e);
    SQZ_TRY(stage_get(ob, bytes));
    SQZ_TRY(b->ops->download(b->ctx, ob->stage, ob->dev_pan, bytes));
    SQZ_TRY(wait_for(b));
    pack(in->hacc, ob->stage, k, a, e, false);
    return SQZ_OK;
}

/* Where an input's sums are kept, made at its first update. */
static sqz_status sums_init(obs_input *in, bool stream) {
    const int64_t k = in->n_in;
    if (stream && !in->hacc)
        in->hacc = in->host_used ? sqz__calloc((size_t)k * (size_t)k, sizeof(double)) : in->xtx;
    if (!stream && !in->dev_hp) in->dev_hp = sqz__calloc((size_t)n_panels(k), sizeof(void *));
    return (stream ? in->hacc != NULL : in->dev_hp != NULL) ? SQZ_OK : SQZ_ERR_NOMEM;
}

/* The device: rows uploaded into ob->dev_x (grown as needed) unless they are there already (x_dev,
 * in the backend's memory), then every panel of H = beta H + X^T X. */
static sqz_status xtx_device(sqz_calib_observer *ob, obs_input *in, const float *x, const float *x_dev, int64_t n) {
    const sqz_backend *b = ob->o.backend;
    const int64_t k = in->n_in;
    const bool stream = streamed(b);
    SQZ_TRY(sums_init(in, stream));
    if (!x_dev) {
        SQZ_TRY(dev_get(b, &ob->dev_x, &ob->dev_x_bytes, (size_t)n * (size_t)k * sizeof(float),
                        "device buffer of rows", n, k));
        SQZ_TRY(b->ops->upload(b->ctx, ob->dev_x, x, (size_t)n * (size_t)k * sizeof(float)));
    }
    for (int64_t p = 0; p < n_panels(k); p++) {
        int64_t a, e;
        panel_of(k, p, &a, &e);
        double *h = NULL;
        SQZ_TRY(panel_in(ob, in, p, stream, &h));
        const sqz_xtx_args xa = {.m = n, .k = k, .x = x_dev ? x_dev : ob->dev_x, .h = h,
                                 .beta = in->dev_used ? 1.0 : 0.0, .r0 = a, .r1 = e, .ldh = k - a};
        SQZ_TRY(b->ops->xtx(b->ctx, &xa));
        if (stream) SQZ_TRY(panel_out(ob, in, p));
    }
    in->dev_used = true;
    return SQZ_OK;
}

static sqz_status xtx_add(sqz_calib_observer *ob, obs_input *in, const float *x, const float *x_dev, int64_t n);

sqz_status sqz__calib_xtx_add(sqz_calib_observer *ob, obs_input *in, const float *x, const float *x_dev, int64_t n) {
    const double t0 = sqz__prof_begin();
    const sqz_status st = xtx_add(ob, in, x, x_dev, n);
    sqz__prof_end(SQZ__PROF_OBS_XTX, t0);
    return st;
}

static sqz_status xtx_add(sqz_calib_observer *ob, obs_input *in, const float *x, const float *x_dev, int64_t n) {
    if (n == 0) return SQZ_OK;
    const sqz_backend *b = ob->o.backend;
    if (!b) { /* the CPU slot's arithmetic on the observer's own conversion buffer */
        sqz__xtx_host(&(sqz_xtx_args){.m = n, .k = in->n_in, .x = x, .h = in->xtx, .beta = 1.0}, ob->dbuf);
        return SQZ_OK;
    }
    if (on_device(ob)) return xtx_device(ob, in, x, x_dev, n);
    const sqz_xtx_args a = {.m = n, .k = in->n_in, .x = x, .h = in->xtx, .beta = 1.0};
    return b->ops->xtx(b->ctx, &a);
}

/* Row r's entries c >= r of the sum src (row stride w, columns from a) written to (the first
 * time) or added into the host's upper triangle. */
static void sum_rows(obs_input *in, const double *src, int64_t a, int64_t e, int64_t w) {
    const int64_t k = in->n_in;
    for (int64_t r = a; r < e; r++) {
        const double *s = src + (r - a) * w + (r - a);
        double *h = in->xtx + r * k + r;
        if (in->host_used)
            for (int64_t c = 0; c < k - r; c++) h[c] += s[c];
        else
            memcpy(h, s, (size_t)(k - r) * sizeof(double));
    }
}

/* The device sums of one input added into (or, the first time, written to) the host's upper
 * triangle; the lower triangle stays 0 as the host path leaves it. */
static sqz_status input_to_host(sqz_calib_observer *ob, obs_input *in) {
    const double t0 = sqz__prof_begin();
    const sqz_backend *b = ob->o.backend;
    const int64_t k = in->n_in;
    sqz_status s = SQZ_OK;
    if (in->hacc) { /* under a cap: the sums are on the host already */
        if (in->hacc != in->xtx) sum_rows(in, in->hacc, 0, k, k);
    } else {
        for (int64_t p = 0; p < n_panels(k) && s == SQZ_OK; p++) {
            int64_t a, e;
            const size_t bytes = panel_of(k, p, &a, &e);
            s = stage_get(ob, bytes);
            if (s == SQZ_OK) s = b->ops->download(b->ctx, ob->stage, in->dev_hp[p], bytes);
            if (s == SQZ_OK) s = wait_for(b);
            if (s == SQZ_OK) sum_rows(in, ob->stage, a, e, k - a);
        }
    }
    for (int64_t r = 0; s == SQZ_OK && r < k; r++) memset(in->xtx + r * k, 0, (size_t)r * sizeof(double));
    sqz__prof_end(SQZ__PROF_OBS_H_DOWN, t0);
    if (s != SQZ_OK) return s;
    in->host_used = true;
    sqz__calib_xtx_free_input(ob, in);
    return SQZ_OK;
}

/* ---- the column statistics and cosines ---- */

/* Where in's host column sums are (NULL: not collected), in the device block's order. */
static void cs_parts(obs_input *in, void **part, size_t *bytes) {
    const size_t k = (size_t)in->n_in;
    part[0] = in->sum_x2, part[1] = in->sum_abs, part[2] = in->sum_x, part[3] = in->absmax;
    bytes[0] = bytes[1] = bytes[2] = k * sizeof(double);
    bytes[3] = k * sizeof(float);
}

/* The device block of in's column sums, made at the first update with the host's sums in it. */
static sqz_status cs_device(sqz_calib_observer *ob, obs_input *in) {
    if (in->dev_cs) return SQZ_OK;
    const sqz_backend *b = ob->o.backend;
    const size_t k = (size_t)in->n_in;
    if (!(in->dev_cs = b->ops->alloc(b->ctx, 3 * k * sizeof(double) + k * sizeof(float))))
        return alloc_failed("device column statistics", 4, in->n_in);
    void *part[4];
    size_t bytes[4], off = 0;
    cs_parts(in, part, bytes);
    for (int i = 0; i < 4; off += bytes[i], i++)
        if (part[i]) SQZ_TRY(b->ops->upload(b->ctx, (char *)in->dev_cs + off, part[i], bytes[i]));
    return SQZ_OK;
}

static sqz_status cs_to_host(sqz_calib_observer *ob, obs_input *in) {
    if (!in->dev_cs) return SQZ_OK;
    const sqz_backend *b = ob->o.backend;
    void *part[4];
    size_t bytes[4], off = 0;
    cs_parts(in, part, bytes);
    for (int i = 0; i < 4; off += bytes[i], i++)
        if (part[i]) SQZ_TRY(b->ops->download(b->ctx, part[i], (char *)in->dev_cs + off, bytes[i]));
    SQZ_TRY(wait_for(b));
    if (b->ops->free) b->ops->free(b->ctx, in->dev_cs);
    in->dev_cs = NULL;
    return SQZ_OK;
}

sqz_status sqz__calib_colstats_add(sqz_calib_observer *ob, obs_input *in, const float *x, const float *x_dev,
                                   int64_t n) {
    if (!in->sum_x2 && !in->sum_abs && !in->sum_x && !in->absmax) return SQZ_OK;
    const sqz_backend *b = ob->o.backend;
    sqz_colstats_args a = {.x = x, .n = n, .k = in->n_in, .sum_x2 = in->sum_x2, .sum_abs = in->sum_abs,
                           .sum_x = in->sum_x, .absmax = in->absmax};
    if (!x_dev || !on_device(ob) || !sqz_backend_supports(b, SQZ_OP_COLSTATS, SQZ_DTYPE_F32)) {
        SQZ_TRY(cs_to_host(ob, in)); /* rows on the host after rows on the device: one sum */
        sqz__colstats_host(&a);
        return SQZ_OK;
    }
    SQZ_TRY(cs_device(ob, in));
    const size_t k = (size_t)in->n_in;
    double *d = in->dev_cs;
    a.x = x_dev;
    a.sum_x2 = in->sum_x2 ? d : NULL;
    a.sum_abs = in->sum_abs ? d + k : NULL;
    a.sum_x = in->sum_x ? d + 2 * k : NULL;
    a.absmax = in->absmax ? (float *)(d + 3 * k) : NULL;
    return b->ops->colstats(b->ctx, &a);
}

sqz_status sqz__calib_cosines_add(sqz_calib_observer *ob, const float *x, const float *x_dev, int64_t n, int64_t d) {
    const sqz_backend *b = ob->o.backend;
    if (!x_dev || !on_device(ob) || !sqz_backend_supports(b, SQZ_OP_COSINE, SQZ_DTYPE_F32)) {
        for (int64_t t = 0; t < n; t++) sqz__calib_cos_add(ob, sqz__cosine_row(ob->blk_in + t * d, x + t * d, d));
        return SQZ_OK;
    }
    if (n > ob->dev_blk_n) { /* the block input up beside the output the device holds */
        if (b->ops->free) b->ops->free(b->ctx, ob->dev_blk), b->ops->free(b->ctx, ob->dev_cos);
        ob->dev_blk_n = 0;
        ob->dev_cos = NULL;
        if (!(ob->dev_blk = b->ops->alloc(b->ctx, (size_t)(n * d) * sizeof(float))) ||
            !(ob->dev_cos = b->ops->alloc(b->ctx, (size_t)n * sizeof(double))))
            return alloc_failed("device block rows for the cosines", n, d);
        ob->dev_blk_n = n;
    }
    SQZ_TRY(b->ops->upload(b->ctx, ob->dev_blk, ob->blk_in, (size_t)(n * d) * sizeof(float)));
    const sqz_cosine_args a = {.a = ob->dev_blk, .b = x_dev, .n = n, .d = d, .out = ob->dev_cos};
    SQZ_TRY(b->ops->cosine(b->ctx, &a));
    double *c = sqz__malloc((size_t)n * sizeof(double));
    if (!c) return SQZ_ERR_NOMEM;
    sqz_status s = b->ops->download(b->ctx, c, ob->dev_cos, (size_t)n * sizeof(double));
    if (s == SQZ_OK) s = wait_for(b);
    for (int64_t t = 0; s == SQZ_OK && t < n; t++) sqz__calib_cos_add(ob, c[t]);
    free(c);
    return s;
}

sqz_status sqz__calib_xtx_to_host(sqz_calib_observer *ob) {
    if (!ob || !on_device(ob)) return SQZ_OK;
    for (int i = 0; i < ob->n_inputs; i++) {
        obs_input *in = &ob->in[i];
        SQZ_TRY(cs_to_host(ob, in)); /* before input_to_host frees the input's device memory */
        if (in->dev_used && in->xtx) SQZ_TRY(input_to_host(ob, in));
        sqz__calib_xtx_free_input(ob, in);
    }
    return SQZ_OK;
}

void sqz__calib_xtx_free_input(sqz_calib_observer *ob, obs_input *in) {
    const sqz_backend *b = ob->o.backend;
    if (in->dev_hp && b && b->ops->free)
        for (int64_t p = 0; p < n_panels(in->n_in); p++) b->ops->free(b->ctx, in->dev_hp[p]);
    free(in->dev_hp);
    in->dev_hp = NULL;
    if (in->hacc != in->xtx) free(in->hacc);
    in->hacc = NULL;
    in->dev_used = false;
    if (in->dev_cs && b && b->ops->free) b->ops->free(b->ctx, in->dev_cs);
    in->dev_cs = NULL;
}

void sqz__calib_xtx_free_scratch(sqz_calib_observer *ob) {
    const sqz_backend *b = ob->o.backend;
    if (b && b->ops->free) {
        b->ops->free(b->ctx, ob->dev_x);
        b->ops->free(b->ctx, ob->dev_pan);
        b->ops->free(b->ctx, ob->dev_blk);
        b->ops->free(b->ctx, ob->dev_cos);
    }
    ob->dev_x = ob->dev_pan = NULL;
    ob->dev_blk = NULL;
    ob->dev_cos = NULL;
    ob->dev_blk_n = 0;
    ob->dev_x_bytes = ob->dev_pan_bytes = 0;
    if (ob->stage_pinned) sqz_backend_unpin(b, ob->stage);
    free(ob->stage);
    ob->stage = NULL;
    ob->stage_bytes = 0;
    ob->stage_pinned = false;
}

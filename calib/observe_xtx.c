/*
 * calib/observe_xtx.c - the observers' Hessian sums X^T X through a backend's xtx slot
 * (sqz/backend.h; issue 26). Without a backend the host forms them (sqz__xtx_panel, the bits
 * observers always had); a host-memory backend (the CPU) takes the same call on the host sums
 * (the same bits again); on a device backend each input's sum lives in device memory (k x k
 * doubles, the first update with beta 0), each event's rows go through one upload buffer per
 * observer, and the sum comes back into the host's in->xtx when the observer is sealed,
 * finished, merged or packed (sqz__calib_xtx_to_host): what follows is host arithmetic.
 */
#include <stdlib.h>
#include <string.h>

#include "calib/observe_internal.h"

static bool on_device_opts(const sqz_calib_observe_opts *o) {
    return o->backend && !sqz_backend_host_memory(o->backend);
}

static bool on_device(const sqz_calib_observer *ob) { return on_device_opts(&ob->o); }

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

/* The device: rows uploaded into ob->dev_x (grown as needed) unless they are there already (x_dev,
 * in the backend's memory), then H_dev = beta H_dev + X^T X. */
static sqz_status xtx_device(sqz_calib_observer *ob, obs_input *in, const float *x, const float *x_dev, int64_t n) {
    const sqz_backend *b = ob->o.backend;
    const int64_t k = in->n_in;
    const size_t xb = (size_t)n * (size_t)k * sizeof(float);
    if (!in->dev_h) {
        in->dev_h = b->ops->alloc(b->ctx, (size_t)k * (size_t)k * sizeof(double));
        if (!in->dev_h) return alloc_failed("device Hessian", k, k);
        in->dev_used = false;
    }
    if (!x_dev && xb > ob->dev_x_bytes) {
        if (b->ops->free) b->ops->free(b->ctx, ob->dev_x);
        ob->dev_x_bytes = 0;
        if (!(ob->dev_x = b->ops->alloc(b->ctx, xb)))
            return alloc_failed("device buffer of rows", n, k);
        ob->dev_x_bytes = xb;
    }
    if (!x_dev) SQZ_TRY(b->ops->upload(b->ctx, ob->dev_x, x, xb));
    const sqz_xtx_args a = {.m = n, .k = k, .x = x_dev ? x_dev : ob->dev_x, .h = in->dev_h,
                            .beta = in->dev_used ? 1.0 : 0.0};
    SQZ_TRY(b->ops->xtx(b->ctx, &a));
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

/* The device sum of one input added into (or, the first time, written to) the host's upper
 * triangle; the lower triangle stays 0 as the host path leaves it. */
static sqz_status input_to_host(const sqz_backend *b, obs_input *in) {
    const double t0 = sqz__prof_begin();
    const int64_t k = in->n_in;
    const size_t nb = (size_t)k * (size_t)k * sizeof(double);
    double *h = in->host_used ? sqz__malloc(nb) : in->xtx;
    if (!h) return SQZ_ERR_NOMEM;
    /* page-locked for the copy: a 642 MB Hessian then crosses at the bus's speed */
    const bool pinned = sqz_backend_pin(b, h, nb, 0);
    sqz_status s = b->ops->download(b->ctx, h, in->dev_h, nb);
    if (s == SQZ_OK && b->ops->synchronize) s = b->ops->synchronize(b->ctx);
    if (pinned) sqz_backend_unpin(b, h);
    if (s == SQZ_OK)
        for (int64_t r = 0; r < k; r++) {
            if (h != in->xtx)
                for (int64_t c = r; c < k; c++) in->xtx[r * k + c] += h[r * k + c];
            memset(in->xtx + r * k, 0, (size_t)r * sizeof(double));
        }
    if (h != in->xtx) free(h);
    sqz__prof_end(SQZ__PROF_OBS_H_DOWN, t0);
    if (s != SQZ_OK) return s;
    in->host_used = true;
    if (b->ops->free) b->ops->free(b->ctx, in->dev_h);
    in->dev_h = NULL;
    in->dev_used = false;
    return SQZ_OK;
}

sqz_status sqz__calib_xtx_to_host(sqz_calib_observer *ob) {
    if (!ob || !on_device(ob)) return SQZ_OK;
    for (int i = 0; i < ob->n_inputs; i++) {
        obs_input *in = &ob->in[i];
        if (in->dev_h && in->dev_used && in->xtx) SQZ_TRY(input_to_host(ob->o.backend, in));
        sqz__calib_xtx_free_input(ob, in);
    }
    return SQZ_OK;
}

void sqz__calib_xtx_free_input(sqz_calib_observer *ob, obs_input *in) {
    const sqz_backend *b = ob->o.backend;
    if (in->dev_h && b && b->ops->free) b->ops->free(b->ctx, in->dev_h);
    in->dev_h = NULL;
    in->dev_used = false;
}

void sqz__calib_xtx_free_scratch(sqz_calib_observer *ob) {
    const sqz_backend *b = ob->o.backend;
    if (ob->dev_x && b && b->ops->free) b->ops->free(b->ctx, ob->dev_x);
    ob->dev_x = NULL;
    ob->dev_x_bytes = 0;
}

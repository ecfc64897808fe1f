/* tests/unit/fake_device.h - a "device" backend made of the CPU backend's calibration slots
 * (sgemm, xtx, chol_inv_upper, the tile slots) with host_memory false: callers then take their device paths
 * (upload, the slots on backend memory, download), which is how CI checks those paths without a
 * GPU (issue 26). Its memory is malloc'd and filled with 0xff bytes (NaN as f32 and f64), so
 * that a path reading memory it never wrote shows; copies are memcpy. It counts live
 * allocations (prepare_w4's prepared weights included) and the slot calls (fake_calls_chol: the
 * factors, chol_inv_upper or the tiles' dpotrf). Every other slot is the CPU backend's own, so the
 * fake device runs every op the CPU does (test_backend_ops runs them all on it). */
#ifndef SQZ_TESTS_FAKE_DEVICE_H
#define SQZ_TESTS_FAKE_DEVICE_H

#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/backend_impl.h"
#include "sqz/backend.h"
#include "test_util.h"

typedef struct fake_device {
    sqz_backend b;        /* what callers get */
    sqz_backend_ops ops;
    sqz_backend *cpu;
} fake_device;

static int64_t fake_live, fake_calls_xtx, fake_calls_sgemm, fake_calls_chol, fake_calls_colstats, fake_calls_cosine;
static const sqz_backend_ops *fake_cpu_ops;

static void *fake_alloc(void *ctx, size_t n) {
    (void)ctx;
    void *p = malloc(n ? n : 1);
    if (p) {
        memset(p, 0xff, n);
        fake_live++;
    }
    return p;
}

static void fake_free(void *ctx, void *p) {
    (void)ctx;
    if (p) fake_live--;
    free(p);
}

static sqz_status fake_copy(void *ctx, void *dst, const void *src, size_t n) {
    (void)ctx;
    memcpy(dst, src, n);
    return SQZ_OK;
}

static sqz_status fake_xtx(void *ctx, const sqz_xtx_args *a) {
    fake_calls_xtx++;
    return fake_cpu_ops->xtx(ctx, a);
}

static sqz_status fake_sgemm(void *ctx, const sqz_sgemm_args *a) {
    fake_calls_sgemm++;
    return fake_cpu_ops->sgemm(ctx, a);
}

static sqz_status fake_chol(void *ctx, double *h, int64_t n) {
    fake_calls_chol++;
    return fake_cpu_ops->chol_inv_upper(ctx, h, n);
}

static sqz_status fake_dpotrf(void *ctx, double *a, int64_t n, int64_t lda) {
    fake_calls_chol++;
    return fake_cpu_ops->dpotrf(ctx, a, n, lda);
}

static sqz_status fake_colstats(void *ctx, const sqz_colstats_args *a) {
    fake_calls_colstats++;
    return fake_cpu_ops->colstats(ctx, a);
}

static sqz_status fake_cosine(void *ctx, const sqz_cosine_args *a) {
    fake_calls_cosine++;
    return fake_cpu_ops->cosine(ctx, a);
}

/* The CPU's prepared int4 weights live in the CPU's memory; counted here as the fake's own, since
 * callers free them with the fake's free(). */
static sqz_status fake_prepare_w4(void *ctx, const void *src, sqz_dtype t, int64_t n, int64_t k, void **prepared) {
    const sqz_status st = fake_cpu_ops->prepare_w4(ctx, src, t, n, k, prepared);
    if (st == SQZ_OK && *prepared) fake_live++;
    return st;
}

/* Builds f on a CPU backend of n_threads (0: all cores, OpenBLAS left as it is). */
static inline void fake_device_init(fake_device *f, int n_threads) {
    memset(f, 0, sizeof *f);
    SQZ_ASSERT_OK(sqz_backend_cpu(n_threads, &f->cpu));
    fake_cpu_ops = f->cpu->ops;
    f->ops = *f->cpu->ops;
    f->ops.name = "fake-device";
    f->ops.host_memory = false;
    f->ops.alloc = fake_alloc;
    f->ops.free = fake_free;
    f->ops.upload = fake_copy;
    f->ops.download = fake_copy;
    f->ops.xtx = fake_xtx;
    f->ops.sgemm = fake_sgemm;
    f->ops.chol_inv_upper = fake_chol;
    f->ops.dpotrf = fake_dpotrf;
    f->ops.colstats = fake_colstats;
    f->ops.cosine = fake_cosine;
    f->ops.prepare_w4 = fake_prepare_w4;
    f->ops.destroy = NULL;
    f->b.ops = &f->ops;
    f->b.ctx = f->cpu->ctx;
}

static inline void fake_device_free(fake_device *f) {
    sqz_backend_free(f->cpu);
    memset(f, 0, sizeof *f);
}

#endif

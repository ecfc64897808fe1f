/*
 * runtime/device.c - a session's matrix products on a device backend (sqz_session_opts.backend
 * whose memory is not host memory, e.g. CUDA: `sqz compress --device cuda`).
 *
 * The session's activations, norms, rotary, attention and the observers' hooks stay in host
 * memory; each linear layer's product goes to the device: the weight, widened to f32 (on the
 * device for F16/BF16, dequantized on the host for block and scheme types), is uploaded once and
 * kept until sqz_session_invalidate drops its block, so the device holds the blocks in use and
 * nothing else of the model; the input rows are uploaded, multiplied (the backend's matmul, full
 * f32) and the result downloaded. The bias is added on the host. The products are f32 as on the
 * CPU, in the device's summation order.
 */
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/backend_impl.h"
#include "kernels/cpu/widen.h"
#include "runtime/runtime_internal.h"

static void *dev_alloc(sqz_session *s, size_t bytes) { return s->be->ops->alloc(s->be->ctx, bytes); }

/* A device buffer of at least `floats` floats in *buf (grown, contents not kept). */
static sqz_status dev_scratch(sqz_session *s, float **buf, size_t *cap, size_t floats) {
    if (floats <= *cap) return SQZ_OK;
    s->be->ops->free(s->be->ctx, *buf);
    *cap = 0;
    *buf = dev_alloc(s, floats * sizeof(float));
    if (!*buf) return SQZ_ERR_NOMEM;
    *cap = floats;
    return SQZ_OK;
}

/* A stored block or float matrix widened on the session's pool (the recompute pass dequantizes
 * each block's new weights before uploading them). */
sqz_status sqz__dev_widen_host(sqz_session *s, const sqz_tensor *w, float *dst) {
    const int64_t n = w->shape[0];
    if (w->qp || w->ndim != 2 || n < 256 || w->nbytes % (size_t)n) return sqz_tensor_to_f32(w, dst);
    if (sqz__widen_rows(s->pool, w->dtype, w->data, w->nbytes / (size_t)n, n, sqz_tensor_row_len(w), dst))
        return SQZ_OK;
    return sqz_tensor_to_f32(w, dst); /* the serial path names the problem */
}

bool sqz__dev_widens(const sqz_session *s, const sqz_tensor *t) {
    return !t->qp && (t->dtype == SQZ_DTYPE_F16 || t->dtype == SQZ_DTYPE_BF16) &&
           sqz_backend_supports(s->be, SQZ_OP_TO_F32, t->dtype);
}

sqz_status sqz__dev_weight(sqz_session *s, const sqz_tensor *w, const float **out) {
    const int64_t i = sqz__tensor_index(s, w);
    if (sqz__dev_prefetch_pending(s, w->layer)) SQZ_TRY(sqz__dev_prefetch_finish(s));
    if (s->dcache[i]) {
        *out = s->dcache[i];
        return SQZ_OK;
    }
    const int64_t ne = sqz_tensor_nelements(w);
    const size_t bytes = (size_t)ne * sizeof(float);
    const sqz_backend_ops *ops = s->be->ops;
    float *d = dev_alloc(s, bytes);
    if (!d) {
        sqz__error_prefix("runtime: tensor '%s' (%.1f MB as f32) on %s", w->name, (double)bytes / 1e6, ops->name);
        return SQZ_ERR_NOMEM;
    }
    sqz_status st = SQZ_OK;
    const bool widen = sqz__dev_widens(s, w);
    if (!w->qp && w->dtype == SQZ_DTYPE_F32) {
        st = ops->upload(s->be->ctx, d, w->data, bytes);
    } else if (widen) { /* the stored halves travel; the device widens them */
        void *raw = dev_alloc(s, w->nbytes);
        st = raw ? ops->upload(s->be->ctx, raw, w->data, w->nbytes) : SQZ_ERR_NOMEM;
        if (st == SQZ_OK) st = ops->to_f32(s->be->ctx, raw, w->dtype, ne, d);
        if (st == SQZ_OK) st = ops->synchronize(s->be->ctx);
        ops->free(s->be->ctx, raw);
    } else { /* block and scheme types: dequantized here, one tensor at a time */
        float *h = sqz__malloc(bytes);
        st = h ? sqz__dev_widen_host(s, w, h) : SQZ_ERR_NOMEM;
        if (st == SQZ_OK) st = ops->upload(s->be->ctx, d, h, bytes);
        free(h);
    }
    if (st != SQZ_OK) {
        ops->free(s->be->ctx, d);
        sqz__error_prefix("runtime: tensor '%s' to %s", w->name, ops->name);
        return st;
    }
    s->dcache[i] = d;
    s->dcache_bytes += (int64_t)bytes;
    *out = d;
    return SQZ_OK;
}

sqz_status sqz__dev_linear(sqz_session *s, const float *x, int64_t m, const sqz_tensor *w, float *y) {
    const int64_t n = w->shape[0], k = sqz_tensor_row_len(w);
    SQZ_RETURN_IF(!w->data, SQZ_ERR_INVALID_ARG, "runtime: tensor '%s' has no data loaded", w->name);
    SQZ_RETURN_IF(!sqz_backend_supports(s->be, SQZ_OP_MATMUL, SQZ_DTYPE_F32), SQZ_ERR_UNSUPPORTED,
                  "runtime: backend %s has no f32 matmul", s->be->ops->name);
    const float *dw;
    double t0 = sqz__prof_begin();
    SQZ_TRY(sqz__dev_weight(s, w, &dw));
    sqz__prof_end(SQZ__PROF_DEV_WEIGHT, t0);
    if (dev_scratch(s, &s->dx, &s->dx_cap, (size_t)m * (size_t)k) != SQZ_OK ||
        dev_scratch(s, &s->dy, &s->dy_cap, (size_t)m * (size_t)n) != SQZ_OK) {
        sqz__error_prefix("runtime: the rows of tensor '%s''s product on %s", w->name, s->be->ops->name);
        return SQZ_ERR_NOMEM;
    }
    const sqz_backend_ops *ops = s->be->ops;
    t0 = sqz__prof_begin();
    SQZ_TRY(ops->upload(s->be->ctx, s->dx, x, (size_t)m * (size_t)k * sizeof(float)));
    sqz__prof_end(SQZ__PROF_DEV_X_UP, t0);
    t0 = sqz__prof_begin();
    const sqz_matmul_args a = {.m = m, .n = n, .k = k, .x = s->dx, .w = dw, .w_dtype = SQZ_DTYPE_F32, .bias = NULL,
                               .y = s->dy};
    sqz_status st = ops->matmul(s->be->ctx, &a);
    if (st == SQZ_OK) st = ops->download(s->be->ctx, y, s->dy, (size_t)m * (size_t)n * sizeof(float));
    sqz__prof_end(SQZ__PROF_DEV_MATMUL, t0);
    if (st != SQZ_OK) sqz__error_prefix("runtime: tensor '%s' on %s", w->name, ops->name);
    return st;
}

void sqz__dev_invalidate(sqz_session *s, int32_t layer) {
    if (sqz__dev_prefetch_pending(s, layer) && sqz__dev_prefetch_finish(s) != SQZ_OK)
        sqz_clear_error(); /* the copies are dropped below anyway */
    for (int64_t i = 0; s->dcache && i < s->n_wcache && i < s->m->n_tensors; i++) {
        if (!s->dcache[i] || (layer != -2 && s->m->tensors[i].layer != layer)) continue;
        s->be->ops->free(s->be->ctx, s->dcache[i]);
        s->dcache_bytes -= sqz_tensor_nelements(&s->m->tensors[i]) * (int64_t)sizeof(float);
        s->dcache[i] = NULL;
    }
}

void sqz__dev_pin(sqz_session *s, void *p, size_t bytes) {
    if (s->dcache && s->n_pinned < (int)(sizeof s->pinned / sizeof s->pinned[0]) &&
        sqz_backend_pin(s->be, p, bytes, (size_t)1 << 20))
        s->pinned[s->n_pinned++] = p;
}

void sqz__dev_unpin_all(sqz_session *s) {
    for (int i = 0; i < s->n_pinned; i++) sqz_backend_unpin(s->be, s->pinned[i]);
    s->n_pinned = 0;
}

sqz_status sqz__dev_init(sqz_session *s) {
    s->dcache = sqz__calloc((size_t)(s->m->n_tensors ? s->m->n_tensors : 1), sizeof *s->dcache);
    return s->dcache ? SQZ_OK : SQZ_ERR_NOMEM;
}

void sqz__dev_free(sqz_session *s) {
    if (!s->dcache) return;
    sqz__dev_invalidate(s, -2);
    free(s->dcache);
    s->dcache = NULL;
    s->be->ops->free(s->be->ctx, s->dx);
    s->be->ops->free(s->be->ctx, s->dy);
    s->dx = s->dy = NULL;
    sqz__dev_block_free(s);
}

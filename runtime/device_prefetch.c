/*
 * runtime/device_prefetch.c - a block's weights copied to the device while the block before it
 * runs (sqz_session_prefetch; docs/device.md): each tensor of the layer is made f32 on the host
 * (block types dequantized on the session's pool; F16/BF16 travel as stored and are widened on the
 * device when first used, as sqz__dev_weight does), into page-locked staging buffers, and queued on
 * the backend's copy stream (upload_async). The first use of any of the layer's tensors waits for
 * the copies (copies_wait), widens the halves, frees the staging and leaves the device copies in
 * the session's table, so that the values are those sqz__dev_weight would have uploaded: the
 * prefetch changes when the bytes cross, never which.
 */
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/backend_impl.h"
#include "kernels/cpu/widen.h"
#include "runtime/runtime_internal.h"

enum { MAX_STAGED = 2 * SQZ_ROLE_COUNT };

typedef struct staged {
    int64_t idx;     /* tensor index (dcache slot) */
    void *host;      /* the staging buffer (page-locked when pinned) */
    bool pinned;
    void *raw;       /* F16 / BF16: the halves on the device, widened into dcache[idx] at the end */
} staged;

struct sqz__dev_pf {
    int32_t layer;
    int n;
    staged st[MAX_STAGED];
};

static bool can_prefetch(const sqz_session *s) {
    if (!s->dcache || !s->be->ops->upload_async || !s->be->ops->copies_wait) return false;
    sqz_backend_mem mem;
    sqz_backend_mem_stats(s->be, &mem);
    return mem.cap == 0; /* under --gpu-mem the cap is the blocks' own budget */
}

static void release(sqz_session *s, sqz__dev_pf *pf) {
    for (int k = 0; k < pf->n; k++) {
        if (pf->st[k].pinned) sqz_backend_unpin(s->be, pf->st[k].host);
        free(pf->st[k].host);
        if (pf->st[k].raw) s->be->ops->free(s->be->ctx, pf->st[k].raw);
    }
    free(pf);
}

/* One tensor of the layer staged and queued: dcache[idx] is its device f32 buffer. */
static sqz_status stage(sqz_session *s, const sqz_tensor *t, staged *g) {
    const int64_t ne = sqz_tensor_nelements(t);
    const bool half = sqz__dev_widens(s, t);
    const size_t bytes = half ? t->nbytes : (size_t)ne * sizeof(float);
    float *d = s->be->ops->alloc(s->be->ctx, (size_t)ne * sizeof(float));
    if (!d) return SQZ_ERR_NOMEM;
    s->dcache[g->idx] = d;
    s->dcache_bytes += ne * (int64_t)sizeof(float);
    if (half && !(g->raw = s->be->ops->alloc(s->be->ctx, t->nbytes))) return SQZ_ERR_NOMEM;
    if (!(g->host = sqz__malloc(bytes))) return SQZ_ERR_NOMEM;
    if (half || (!t->qp && t->dtype == SQZ_DTYPE_F32)) memcpy(g->host, t->data, bytes);
    else SQZ_TRY(sqz__dev_widen_host(s, t, g->host));
    g->pinned = sqz_backend_pin(s->be, g->host, bytes, 0);
    return s->be->ops->upload_async(s->be->ctx, half ? g->raw : (void *)d, g->host, bytes);
}

bool sqz__dev_prefetch_pending(const sqz_session *s, int32_t layer) {
    return s->dpf && (layer == -2 || s->dpf->layer == layer);
}

sqz_status sqz__dev_prefetch_finish(sqz_session *s) {
    sqz__dev_pf *pf = s->dpf;
    if (!pf) return SQZ_OK;
    s->dpf = NULL;
    sqz_status st = s->be->ops->copies_wait(s->be->ctx);
    for (int k = 0; k < pf->n && st == SQZ_OK; k++) {
        const sqz_tensor *t = &s->m->tensors[pf->st[k].idx];
        if (pf->st[k].raw)
            st = s->be->ops->to_f32(s->be->ctx, pf->st[k].raw, t->dtype, sqz_tensor_nelements(t),
                                    s->dcache[pf->st[k].idx]);
    }
    if (st == SQZ_OK) st = s->be->ops->synchronize(s->be->ctx); /* the halves widened before they are freed */
    if (st != SQZ_OK) sqz__error_prefix("runtime: block %d's weights copied to %s", pf->layer, s->be->ops->name);
    release(s, pf);
    return st;
}

/* Drops what a failed prefetch made: its device copies too (the layer uploads on first use). */
static void undo(sqz_session *s, sqz__dev_pf *pf) {
    if (s->be->ops->copies_wait(s->be->ctx) != SQZ_OK) sqz_clear_error();
    for (int k = 0; k < pf->n; k++) {
        const int64_t i = pf->st[k].idx;
        if (!s->dcache[i]) continue;
        s->be->ops->free(s->be->ctx, s->dcache[i]);
        s->dcache[i] = NULL;
        s->dcache_bytes -= sqz_tensor_nelements(&s->m->tensors[i]) * (int64_t)sizeof(float);
    }
    release(s, pf);
    sqz_clear_error();
}

sqz_status sqz_session_prefetch(sqz_session *s, int32_t layer) {
    if (!s || layer < 0 || layer >= s->m->hp.n_layers || !can_prefetch(s)) return SQZ_OK;
    SQZ_TRY(sqz__dev_prefetch_finish(s)); /* one layer in flight */
    sqz__dev_pf *pf = sqz__calloc(1, sizeof *pf);
    if (!pf) return SQZ_ERR_NOMEM;
    pf->layer = layer;
    sqz_status st = SQZ_OK;
    const double t0 = sqz__prof_begin();
    for (int r = 0; r < SQZ_ROLE_COUNT && st == SQZ_OK; r++)
        for (int p = 0; p < 2 && st == SQZ_OK; p++) {
            const sqz_tensor *t = s->lt[layer].t[r][p];
            if (!t || !t->data || t->qp || s->dcache[sqz__tensor_index(s, t)]) continue;
            staged *g = &pf->st[pf->n++];
            g->idx = sqz__tensor_index(s, t);
            st = stage(s, t, g);
        }
    sqz__prof_end(SQZ__PROF_DEV_PREFETCH, t0);
    if (st != SQZ_OK) { /* a prefetch only moves when bytes cross: without it the layer uploads later */
        undo(s, pf);
        return SQZ_OK;
    }
    s->dpf = pf;
    return SQZ_OK;
}

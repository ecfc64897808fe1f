/*
 * quant/gptq_sweep.c - GPTQ's column sweep (the algorithm is described in gptq.c): blocks of
 * `blocksize` columns; within a block the rows are independent given U, so they run on the
 * thread pool (each row's errors kept in its row of err, the loss summed afterwards in row
 * order: the same bits for any thread count and as the serial sweep always gave); across blocks
 * the trailing update is one sgemm. On the host the weights are wp (n_out, n) row-major; on a
 * device backend they are wp^T (n, n_out) in device memory, so that a block's columns are
 * contiguous rows to download and the update is wp^T[i2:, :] -= U[i1:i2, i2:]^T . err^T.
 */
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/backend_impl.h"
#include "kernels/cpu/linalg.h"
#include "quant/gguf/quant_gguf.h"
#include "quant/gptq_internal.h"

/* One block's rows: row r's columns i1..i1+cnt at w + r * ld. */
typedef struct gptq_block {
    const gptq_ctx *c;
    float *w;
    int64_t ld, i1, cnt;
    float *err;   /* (n_out, cnt) */
    float *wpre;  /* GPTAQ: (n_out, cnt) each column's value before it was quantized; else NULL */
    gptq_out *o;
} gptq_block;

/* Group id and grid of the element at processing position p of row r. */
static inline sqz__grid *grid_at(const gptq_ctx *c, sqz__grid *grids, int64_t r, int64_t p) {
    const int64_t g = c->static_grids ? c->perm[p] / c->gs : p / c->gs;
    return &grids[r * c->ng + g];
}

/* The target value of element v at processing position p of row r (codes[] and the grid
 * anchors as plain GPTQ; a pruned element takes the grid's zero code, or 0 without a grid). */
static inline float target_value(const gptq_ctx *c, sqz__grid *grids, int8_t *codes, int64_t r, int64_t p, float v,
                                 bool pruned) {
    if (c->mask && !c->mask->quantize) return pruned ? 0.0f : v;
    const int64_t col = c->perm[p];
    const sqz__grid *g = grid_at(c, grids, r, p);
    int code = sqz__grid_code(g, c->fmt, pruned ? 0.0f : v);
    /* anchors: the column (within its group, original order == processing order for
     * dynamic GGUF grids) that defined the grid takes the extreme code */
    const int64_t within = c->static_grids ? col % c->gs : p % c->gs;
    if (!pruned && within == g->anchor[0]) code = g->anchor_code[0];
    else if (!pruned && within == g->anchor[1]) code = g->anchor_code[1];
    codes[r * c->n + col] = (int8_t)code;
    return sqz__grid_value(g, c->fmt, code);
}

/* IQ3_S: the codeword of the group of 4 starting at processing position p of row r, from the
 * values the row holds now (v: 4 consecutive columns, in original order too), weighted by the
 * columns' importance; codes written, the 4 target values into q. */
static void iq3_group(const gptq_ctx *c, sqz__grid *grids, int8_t *codes, int64_t r, int64_t p, const float *v,
                      float *q) {
    const int64_t col = c->perm[p];
    sqz__iq3s_group(v, c->hdiag ? c->hdiag + col : NULL, grid_at(c, grids, r, p)->d, codes + r * c->n + col, q);
}

/* Row r of the block: each column in turn, its error spread over the block's later columns. */
static void sweep_row(const gptq_block *b, int64_t r) {
    const gptq_ctx *c = b->c;
    const sqz__gptq_mask *mk = c->mask;
    const int64_t n = c->n, cnt = b->cnt, i1 = b->i1;
    float *wr = b->w + r * b->ld, *er = b->err + r * cnt;
    sqz__grid *grids = b->o->grids;
    uint8_t *pr = b->o->pr;
    float gq[4] = {0}; /* IQ3_S: the current group's values */
    for (int64_t i = 0; i < cnt; i++) {
        const int64_t p = i1 + i;
        if (c->kdyn && p % c->sbn == 0) { /* the super-block lies in this block (gptq.c) */
            const int64_t sb = p / c->sbn;
            const size_t bb = sqz_dtype_info(sqz_qformat_dtype(c->fmt))->type_size;
            uint8_t *blk = b->o->kblk + (size_t)r * b->o->row_bytes + (size_t)sb * bb;
            sqz__gptq_kgrids(c, wr + i, sb, blk, &grids[r * c->ng + p / c->gs]);
        } else if (grids && !c->static_grids && !c->kdyn && p % c->gs == 0) {
            sqz__grid_make(c->fmt, wr + i, (int)c->gs, &grids[r * c->ng + p / c->gs]);
        }
        if (mk && mk->per_row && p % mk->span == 0) {
            const int64_t span = mk->span < cnt - i ? mk->span : cnt - i;
            mk->select(mk->user, wr + i, b->ld, 1, span, c->ud + p, pr + r * cnt + i, cnt);
        }
        const float v = wr[i];
        float q;
        if (c->fmt == SQZ_QFMT_IQ3_S && !mk) { /* codewords of 4: chosen when a group starts */
            if (p % 4 == 0) iq3_group(c, grids, b->o->codes, r, p, wr + i, gq);
            q = gq[p % 4];
        } else {
            q = target_value(c, grids, b->o->codes, r, p, v, mk && pr[r * cnt + i]);
        }
        if (b->o->values) b->o->values[r * n + c->perm[p]] = q;
        const float d = c->u[p * n + p];
        const float e = (v - q) / d;
        er[i] = e;
        const float *urow = c->u + p * n + i1;
        if (!c->pm) {
            for (int64_t j = i + 1; j < cnt; j++) wr[j] -= e * urow[j];
            continue;
        }
        /* GPTAQ: W1[:, i:] -= err1 (x) Hinv1[i, i:] - w (x) P1[i, i:] (P1[i, i] = 0); with P = 0
         * this is GPTQ's update bit for bit */
        const float *prow = c->pm + p * n + i1;
        b->wpre[r * cnt + i] = v;
        for (int64_t j = i + 1; j < cnt; j++) wr[j] -= e * urow[j] - v * prow[j];
    }
}

static void rows_fn(void *ctx, int64_t begin, int64_t end, int thread) {
    (void)thread;
    for (int64_t r = begin; r < end; r++) sweep_row(ctx, r);
}

/* The block's rows (a non-per-row mask selects first), then its loss in row order. */
static void sweep_block(gptq_block *b, int64_t n_out) {
    const sqz__gptq_mask *mk = b->c->mask;
    if (mk && !mk->per_row)
        mk->select(mk->user, b->w, b->ld, n_out, b->cnt, b->c->ud + b->i1, b->o->pr, b->cnt);
    /* a per-row mask's select shares its scratch between calls (sparse/sparsegpt.c): one thread */
    if (mk && mk->per_row) rows_fn(b, 0, n_out, 0);
    else sqz__pool_for(b->c->pool, n_out, 4, rows_fn, b);
    const int64_t ne = n_out * b->cnt;
    for (int64_t i = 0; i < ne; i++) b->o->loss += 0.5 * (double)b->err[i] * (double)b->err[i];
}

sqz_status sqz__gptq_sweep_host(const gptq_ctx *c, float *wp, int64_t n_out, gptq_out *o) {
    const int64_t n = c->n, B = c->blocksize;
    float *err = sqz__malloc((size_t)n_out * (size_t)B * sizeof(float));
    float *wpre = c->pm ? sqz__malloc((size_t)n_out * (size_t)B * sizeof(float)) : NULL;
    if (!err || (c->pm && !wpre)) {
        free(err);
        free(wpre);
        return SQZ_ERR_NOMEM;
    }
    sqz_status s = SQZ_OK;
    for (int64_t i1 = 0; i1 < n && s == SQZ_OK; i1 += B) {
        const int64_t i2 = i1 + B < n ? i1 + B : n, cnt = i2 - i1;
        gptq_block b = {c, wp + i1, n, i1, cnt, err, wpre, o};
        const double t0 = sqz__prof_begin();
        sweep_block(&b, n_out);
        sqz__prof_end(SQZ__PROF_GPTQ_SWEEP, t0);
        if (i2 >= n) break;
        const sqz_sgemm_args a = {.m = n_out, .n = n - i2, .k = cnt, .alpha = -1.0f, .a = err, .lda = cnt,
                                  .b = c->u + i1 * n + i2, .ldb = n, .beta = 1.0f, .c = wp + i2, .ldc = n};
        if (c->be) s = c->be->ops->sgemm(c->be->ctx, &a);
        else sqz__sgemm_host(&a);
        if (s != SQZ_OK || !wpre) continue;
        /* GPTAQ: W[:, i2:] += Wpre[:, block] . P[block, i2:], the same columns' values before
         * quantization as inside the block (GPTQModel's gptaq.py multiplies the block's W1 here,
         * which by then holds Q: its result then depends on the block size; ours does not) */
        const sqz_sgemm_args ap = {.m = n_out, .n = n - i2, .k = cnt, .alpha = 1.0f, .a = wpre, .lda = cnt,
                                   .b = c->pm + i1 * n + i2, .ldb = n, .beta = 1.0f, .c = wp + i2, .ldc = n};
        if (c->be) s = c->be->ops->sgemm(c->be->ctx, &ap);
        else sqz__sgemm_host(&ap);
    }
    free(err);
    free(wpre);
    return s;
}

/* dst (cols, rows) = src (rows, cols)^T, both row-major: tiles of 32 x 32 (each cache line of
 * both sides used whole), bands of 32 source rows on the pool. */
typedef struct tr_job {
    const float *src;
    int64_t rows, cols;
    float *dst;
} tr_job;

static void tr_fn(void *ctx, int64_t b, int64_t e, int thread) {
    (void)thread;
    const tr_job *j = ctx;
    for (int64_t r0 = b * 32; r0 < e * 32 && r0 < j->rows; r0 += 32) {
        const int64_t r1 = r0 + 32 < j->rows ? r0 + 32 : j->rows;
        for (int64_t c0 = 0; c0 < j->cols; c0 += 32) {
            const int64_t c1 = c0 + 32 < j->cols ? c0 + 32 : j->cols;
            for (int64_t r = r0; r < r1; r++)
                for (int64_t c = c0; c < c1; c++) j->dst[c * j->rows + r] = j->src[r * j->cols + c];
        }
    }
}

static void transpose(sqz__pool *pool, const float *src, int64_t rows, int64_t cols, float *dst) {
    tr_job j = {src, rows, cols, dst};
    sqz__pool_for(pool, (rows + 31) / 32, 4, tr_fn, &j);
}

/* Device memory of the device sweep: wp^T (n, n_out), err^T (B, n_out); host: a block as it
 * comes (cnt, n_out), as the rows see it (n_out, cnt), its errors both ways. */
typedef struct dev_sweep {
    sqz_backend *be;
    float *dw, *de;
    float *tb, *hb, *err, *et;
    bool tb_pinned, et_pinned; /* page-locked (sqz_backend_pin): each block's columns cross twice */
    float *dwpre, *wpre; /* GPTAQ: the block's values before quantization, device (B, n_out) and host
                            (n_out, B); else NULL */
    float *dur, *dpr;    /* under --gpu-mem (c->du NULL): the block's rows of U and of GPTAQ's P, (B, n)
                            each, uploaded from the host's copies per block */
} dev_sweep;

static void dev_sweep_free(dev_sweep *d) {
    if (d->tb_pinned) sqz_backend_unpin(d->be, d->tb);
    if (d->et_pinned) sqz_backend_unpin(d->be, d->et);
    if (d->be->ops->free) {
        d->be->ops->free(d->be->ctx, d->dw);
        d->be->ops->free(d->be->ctx, d->de);
        d->be->ops->free(d->be->ctx, d->dwpre);
        d->be->ops->free(d->be->ctx, d->dur);
        d->be->ops->free(d->be->ctx, d->dpr);
    }
    free(d->wpre);
    free(d->tb);
    free(d->hb);
    free(d->err);
    free(d->et);
}

static sqz_status dev_sweep_init(const gptq_ctx *c, const float *wp, int64_t n_out, dev_sweep *d) {
    const size_t n = (size_t)c->n, B = (size_t)c->blocksize, no = (size_t)n_out;
    sqz_backend *be = c->be;
    memset(d, 0, sizeof *d);
    d->be = be;
    float *wt = sqz__malloc(n * no * sizeof(float));
    d->tb = sqz__malloc(B * no * sizeof(float));
    d->hb = sqz__malloc(B * no * sizeof(float));
    d->err = sqz__malloc(B * no * sizeof(float));
    d->et = sqz__malloc(B * no * sizeof(float));
    d->wpre = c->pm ? sqz__malloc(B * no * sizeof(float)) : NULL;
    if (!wt || !d->tb || !d->hb || !d->err || !d->et || (c->pm && !d->wpre)) {
        free(wt);
        return SQZ_ERR_NOMEM;
    }
    d->dw = be->ops->alloc(be->ctx, n * no * sizeof(float));
    d->de = d->dw ? be->ops->alloc(be->ctx, B * no * sizeof(float)) : NULL;
    d->dwpre = d->de && c->pm ? be->ops->alloc(be->ctx, B * no * sizeof(float)) : NULL;
    sqz_status s = SQZ_OK;
    if (!d->dw || !d->de || (c->pm && !d->dwpre)) {
        sqz__error_prefix("gptq: device memory for %zu x %zu weights", no, n);
        s = SQZ_ERR_NOMEM;
    }
    if (s == SQZ_OK && !c->du) { /* U (and P) in rows, a block's at a time */
        d->dur = be->ops->alloc(be->ctx, B * n * sizeof(float));
        d->dpr = d->dur && c->pm ? be->ops->alloc(be->ctx, B * n * sizeof(float)) : NULL;
        if (!d->dur || (c->pm && !d->dpr)) {
            sqz__error_prefix("gptq: device memory for %zu rows of the factor of %zu", B, n);
            s = SQZ_ERR_NOMEM;
        }
    }
    if (s == SQZ_OK) {
        d->tb_pinned = sqz_backend_pin(be, d->tb, B * no * sizeof(float), 0);
        d->et_pinned = sqz_backend_pin(be, d->et, B * no * sizeof(float), 0);
    }
    if (s == SQZ_OK) {
        transpose(c->pool, wp, n_out, c->n, wt);
        s = be->ops->upload(be->ctx, d->dw, wt, n * no * sizeof(float));
    }
    free(wt);
    return s;
}

/* Block [i1, i1 + cnt): its columns down, swept, errors up, the trailing update. */
static sqz_status dev_block(const gptq_ctx *c, dev_sweep *d, int64_t n_out, int64_t i1, int64_t cnt, gptq_out *o) {
    sqz_backend *be = d->be;
    const int64_t n = c->n, i2 = i1 + cnt;
    const size_t bytes = (size_t)cnt * (size_t)n_out * sizeof(float);
    double t0 = sqz__prof_begin();
    SQZ_TRY(be->ops->download(be->ctx, d->tb, d->dw + i1 * n_out, bytes));
    if (be->ops->synchronize) SQZ_TRY(be->ops->synchronize(be->ctx));
    transpose(c->pool, d->tb, cnt, n_out, d->hb);
    sqz__prof_end(SQZ__PROF_GPTQ_XFER, t0);
    gptq_block b = {c, d->hb, cnt, i1, cnt, d->err, d->wpre, o};
    t0 = sqz__prof_begin();
    sweep_block(&b, n_out);
    sqz__prof_end(SQZ__PROF_GPTQ_SWEEP, t0);
    if (i2 >= n) return SQZ_OK;
    t0 = sqz__prof_begin();
    transpose(c->pool, d->err, n_out, cnt, d->et);
    SQZ_TRY(be->ops->upload(be->ctx, d->de, d->et, bytes));
    const size_t rows = (size_t)cnt * (size_t)n * sizeof(float);
    if (!c->du) SQZ_TRY(be->ops->upload(be->ctx, d->dur, c->u + i1 * n, rows));
    if (!c->du && c->pm) SQZ_TRY(be->ops->upload(be->ctx, d->dpr, c->pm + i1 * n, rows));
    sqz__prof_end(SQZ__PROF_GPTQ_XFER, t0);
    /* rows [i1, i2) of U: resident, or the ones just uploaded; the same values, the same call */
    const float *ur = c->du ? (const float *)c->du + i1 * n : d->dur;
    const float *pr = c->dp ? (const float *)c->dp + i1 * n : d->dpr;
    const sqz_sgemm_args a = {.trans_a = true, .m = n - i2, .n = n_out, .k = cnt, .alpha = -1.0f,
                              .a = ur + i2, .lda = n, .b = d->de, .ldb = n_out,
                              .beta = 1.0f, .c = d->dw + i2 * n_out, .ldc = n_out};
    SQZ_TRY(be->ops->sgemm(be->ctx, &a));
    if (!c->pm) return SQZ_OK;
    /* GPTAQ: wp^T[i2:, :] += P[i1:i2, i2:]^T . Wpre^T (as the host's second sgemm) */
    transpose(c->pool, d->wpre, n_out, cnt, d->et);
    SQZ_TRY(be->ops->upload(be->ctx, d->dwpre, d->et, bytes));
    const sqz_sgemm_args ap = {.trans_a = true, .m = n - i2, .n = n_out, .k = cnt, .alpha = 1.0f,
                               .a = pr + i2, .lda = n, .b = d->dwpre, .ldb = n_out,
                               .beta = 1.0f, .c = d->dw + i2 * n_out, .ldc = n_out};
    return be->ops->sgemm(be->ctx, &ap);
}

sqz_status sqz__gptq_sweep_device(const gptq_ctx *c, const float *wp, int64_t n_out, gptq_out *o) {
    dev_sweep d;
    const double t0 = sqz__prof_begin();
    sqz_status s = dev_sweep_init(c, wp, n_out, &d);
    sqz__prof_end(SQZ__PROF_GPTQ_DEV_INIT, t0);
    for (int64_t i1 = 0; i1 < c->n && s == SQZ_OK; i1 += c->blocksize) {
        const int64_t cnt = i1 + c->blocksize < c->n ? c->blocksize : c->n - i1;
        s = dev_block(c, &d, n_out, i1, cnt, o);
    }
    dev_sweep_free(&d);
    return s;
}

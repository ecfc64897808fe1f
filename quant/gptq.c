/*
 * quant/gptq.c - GPTQ (Frantar, Ashkboos, Hoefler, Alistarh 2022; the IST-DASLab gptq.py
 * fasterquant and AutoGPTQ): quantize the columns of W one at a time and spread each
 * column's error over the columns not yet quantized, weighted by the inverse Hessian of the
 * layer's input, H = X^T X (any positive scale: the damping is relative).
 *
 *   dead columns (H_jj = 0): H_jj = 1, W[:, j] = 0
 *   act-order: columns by decreasing H_jj (stable)
 *   H = (1 - shrink) H + shrink diag(H)   (shrinkage of the off-diagonal: a Hessian from fewer
 *                                          tokens than inputs otherwise fits the calibration rows)
 *   H += percdamp * mean(diag H) * I;  U = chol(H^-1) upper       (kernels/cpu/chol.c, double;
 *                                                                  a device: chol_tiles.c)
 *   for blocks of `blocksize` columns:                           (lazy batch updates)
 *       for each column p of the block, each row r:
 *           q = Q(w_rp) on the row's grid for that column's group
 *           e = (w_rp - q) / U_pp;  w_r,p+1..block end -= e * U_p,p+1..
 *       W[:, after the block] -= E . U[block, after the block]  (one sgemm)
 *
 * Grids (per row and group, grid.c): dynamic groups are built when a group starts, from the
 * CURRENT (error-updated) weights of its columns; the reference builds them from the
 * not-yet-updated matrix (W instead of W1 when the group starts inside a block), we use the
 * values the rows really hold at that point. Static groups are built from the original W
 * before any update (always for I8, whose grid is the whole row, and for GGUF targets with
 * act-order, which cannot store a permutation). I4 with act-order and dynamic groups forms
 * groups of consecutive columns in processing order and records g_idx (AutoGPTQ desc_act).
 * GGUF targets pin each grid's anchors to their extreme codes (sqz/quant.h, the invariant).
 * K-quant targets (Q2_K..Q6_K): when the sweep reaches a super-block of 256, llama.cpp's
 * quantizer (importance = diag H) quantizes the values its row holds then (error-updated, as
 * GPTQ's dynamic groups), which fixes d, dmin and the sub-block scales; the sweep then rounds
 * onto the sub-block grids those bytes define (quant/gguf/kquant.c sqz__kquant_subgrids) and the
 * codes are packed back into the same blocks, so the blocks dequantize to exactly the values GPTQ
 * used. The sweep's block is rounded up to a multiple of the super-block so that each lies in
 * one. Under act-order, static-groups or a mask the super-blocks are the original row's, made
 * before the sweep (static). Scales made from the original row cannot follow the error feedback:
 * at 2-3 bits the updated weights leave their range and are clipped (Qwen2.5-Coder-0.5B's ffn_down
 * at Q2_K, 2026-11-29: static GPTQ lost to imatrix rounding). IQ4_NL / IQ4_XS / IQ3_S the same
 * way: the grids are the stored 32-block scales and the non-linear table or codebook (a value is
 * d * kvalues[code], the nearest table value is the code; quant/gguf/iq4.c, iq3.c).
 *
 * SparseGPT runs this same sweep with a mask hook (sqz__gptq_masked, quant_internal.h): the
 * hook picks the weights that become zero, which is the target value instead of the grid's.
 *
 * Rows are independent given U: within a block each row walks its columns in turn with the
 * block's 128 x 128 corner of U in cache (the rows on a thread pool); across blocks the update
 * is a GEMM (gptq_sweep.c, also the sweep on a device backend: sqz_quant_opts.backend).
 */
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/backend_impl.h"
#include "kernels/cpu/linalg.h"
#include "quant/chol_tiles.h"
#include "quant/gguf/kquant_internal.h"
#include "quant/gguf/quant_gguf.h"
#include "quant/gptq_internal.h"
#include "sqz/progress.h"

/* argsort of diag(H) descending, ties by index (a stable order every libc agrees on). */
typedef struct diag_key {
    double d;
    int64_t i;
} diag_key;
static int cmp_key(const void *a, const void *b) {
    const diag_key *x = a, *y = b;
    if (x->d != y->d) return x->d > y->d ? -1 : 1;
    return x->i < y->i ? -1 : (x->i > y->i);
}

static bool on_device(const sqz_backend *be) { return be && !sqz_backend_host_memory(be); }

double sqz__gptq_shrink(const sqz_quant_opts *o, const sqz_qstats *st) {
    if (o->gptq_shrink >= 0) return o->gptq_shrink;
    /* auto: inputs / (inputs + tokens), the share of a sample covariance that is noise when the
     * tokens are few (Ledoit and Wolf's p / n); 0 as the tokens outnumber the inputs many times */
    const double k = (double)st->n_in, t = st->n_tokens > 0 ? (double)st->n_tokens : 0;
    return t > 0 ? k / (k + t) : 0;
}

/* Device bytes the factor's tiles may take: what --gpu-mem leaves (1 when nothing: too little), or
 * 0 without a cap (every tile at once). */
static size_t tile_budget(const sqz_backend *be) {
    sqz_backend_mem m;
    sqz_backend_mem_stats(be, &m);
    if (!m.cap) return 0;
    return m.cap > m.in_use ? m.cap - m.in_use : 1;
}

/* The factor of the damped Hessian h (n, n) in place: on the host, a host-memory backend's slot on
 * h itself, or on a device in tiles within what --gpu-mem leaves (chol_tiles.c: the same bits
 * whatever that is). */
static sqz_status chol(sqz_backend *be, double *h, int64_t n) {
    if (!be) return sqz__chol_inverse_upper(h, n);
    if (!on_device(be)) return be->ops->chol_inv_upper(be->ctx, h, n);
    return sqz__chol_tiles(be, h, n, tile_budget(be), NULL);
}

/* Rows [b, e) of the damped, permuted Hessian (dead rows and columns: the identity). */
typedef struct hperm_job {
    const double *h;
    const int64_t *perm;
    const uint8_t *dead;
    int64_t n;
    double damp;
    double keep;  /* 1 - shrink: the off-diagonal entries' factor */
    double *work;
    float *u; /* the second job: work -> float */
} hperm_job;

static void hperm_fn(void *ctx, int64_t b, int64_t e, int thread) {
    (void)thread;
    const hperm_job *j = ctx;
    const int64_t n = j->n;
    for (int64_t a = b; a < e; a++) {
        if (j->u) {
            for (int64_t c = 0; c < n; c++) j->u[a * n + c] = (float)j->work[a * n + c];
            continue;
        }
        const int64_t ia = j->perm[a];
        for (int64_t c = 0; c < n; c++) {
            const int64_t ib = j->perm[c];
            j->work[a * n + c] = j->dead[ia] || j->dead[ib] ? (a == c ? 1.0 : 0.0)
                                 : a == c                  ? j->h[ia * n + ib]
                                                           : j->keep * j->h[ia * n + ib];
        }
        j->work[a * n + a] += j->damp;
    }
}

/* Builds U (float), perm / dead for the shared input and, for GPTAQ, P (gptaq.c; else NULL).
 * Peak: n^2 doubles (the damped, permuted Hessian, factored in place) + n^2 floats (U); GPTAQ
 * 2 n^2 doubles + n^2 floats more while P is formed. */
static sqz_status prepare(sqz__pool *pool, const sqz_qstats *st, const sqz_quant_opts *o, float **u_out,
                          int64_t **perm_out, uint8_t **dead_out, float **p_out) {
    const int64_t n = st->n_in;
    size_t nn;
    SQZ_RETURN_IF(!sqz__mul_size((size_t)n, (size_t)n, &nn) || nn > ((size_t)1 << 34), SQZ_ERR_INVALID_ARG,
                  "gptq: %lld input columns are too many for a dense Hessian", (long long)n);
    double *work = sqz__malloc(nn * sizeof(double));
    int64_t *perm = sqz__malloc((size_t)n * sizeof(int64_t));
    uint8_t *dead = sqz__calloc((size_t)n, 1);
    diag_key *keys = sqz__malloc((size_t)n * sizeof(diag_key));
    float *u = NULL;
    sqz_status s = SQZ_ERR_NOMEM;
    if (!work || !perm || !dead || !keys) goto done;
    double mean = 0;
    for (int64_t j = 0; j < n; j++) {
        const double d = st->xtx[j * n + j];
        s = SQZ_ERROR(SQZ_ERR_NUMERIC, "gptq: Hessian diagonal %lld is %g", (long long)j, d);
        if (!(d >= 0) || !isfinite(d)) goto done;
        dead[j] = d == 0;
        keys[j] = (diag_key){dead[j] ? 1.0 : d, j};
        perm[j] = j;
        mean += dead[j] ? 1.0 : d;
    }
    mean /= (double)n;
    if (o->act_order) { /* IQ3_S: a codeword's 4 columns move together, by their summed diagonal */
        const int64_t ag = o->target.fmt == SQZ_QFMT_IQ3_S ? 4 : 1;
        for (int64_t g = 0; g < n / ag; g++) {
            double t = 0;
            for (int64_t k = 0; k < ag; k++) t += keys[g * ag + k].d;
            keys[g] = (diag_key){t, g};
        }
        qsort(keys, (size_t)(n / ag), sizeof *keys, cmp_key);
        for (int64_t g = 0; g < n / ag; g++)
            for (int64_t k = 0; k < ag; k++) perm[g * ag + k] = keys[g].i * ag + k;
    }
    double damp = o->percdamp * mean;
    if (!(damp > 0)) damp = 1e-8 * (mean > 0 ? mean : 1.0);
    for (int attempt = 0;; attempt++) { /* AutoGPTQ fails here; we raise the damping tenfold a few times */
        /* H[perm][perm], shrunk toward its diagonal, + damping */
        hperm_job hj = {st->xtx, perm, dead, n, damp, 1.0 - sqz__gptq_shrink(o, st), work, NULL};
        sqz__pool_for(pool, n, 16, hperm_fn, &hj);
        sqz_clear_error();
        s = chol(o->backend, work, n);
        if (s != SQZ_ERR_NUMERIC || attempt == 4) break;
        damp *= 10;
    }
    if (s != SQZ_OK) { sqz__error_prefix("gptq"); goto done; }
    if (o->gptaq && (s = sqz__gptaq_p(st->dxxt, perm, dead, work, n, o->gptaq_alpha, p_out)) != SQZ_OK) goto done;
    if (!(u = sqz__malloc(nn * sizeof(float)))) { s = SQZ_ERR_NOMEM; goto done; }
    hperm_job uj = {.n = n, .work = work, .u = u}; /* narrowed, rounded to nearest */
    sqz__pool_for(pool, n, 16, hperm_fn, &uj);
    *u_out = u;
    u = NULL;
    *perm_out = perm;
    *dead_out = dead;
    perm = NULL;
    dead = NULL;
done:
    free(u);
    free(work);
    free(keys);
    free(perm);
    free(dead);
    return s;
}

/* K-quants, IQ4 and IQ3_S: the grids of super-block sb's sub-blocks from the block llama.cpp's
 * importance-weighted quantizer makes of x (its sbn values, original column order): the block's
 * scales stay in blk (its codes are replaced after the sweep), grids gets one per sub-block. */
void sqz__gptq_kgrids(const gptq_ctx *c, const float *x, int64_t sb, uint8_t *blk, sqz__grid *grids) {
    const sqz_dtype dt = sqz_qformat_dtype(c->fmt);
    const int64_t sbn = sqz_dtype_info(dt)->block_size; /* 256, or 32 for IQ4_NL */
    float d[16], m[16] = {0};
    int zero = 0, nmax = 15, sub = 32;
    const float *qw = c->hdiag ? c->hdiag + sb * sbn : NULL;
    if (c->fmt == SQZ_QFMT_IQ3_S) { /* a grid is the sub-block's scale; the codebook is the sweep's */
        sqz__quantize_iq3_s(x, blk, 1, sbn, qw);
        sqz__iq3s_subscales(blk, d);
    } else if (sqz__qfmt_iq4(c->fmt)) {
        sqz__quantize_iq4(dt, x, blk, 1, sbn, qw);
        sqz__iq4_subscales(dt, blk, d);
    } else if (c->fmt == SQZ_QFMT_MXFP4) { /* the reference's power of two, or the search's with H's diagonal */
        sqz__quantize_mxfp4(x, blk, 1, sbn, qw);
        d[0] = sqz__mxfp4_scale(blk);
    } else {
        sqz__quantize_k(dt, x, blk, 1, sbn, qw);
        sub = sqz__kquant_subgrids(dt, blk, d, m, &zero, &nmax);
    }
    for (int j = 0; j < sbn / sub; j++)
        grids[j] = (sqz__grid){.d = d[j], .m = m[j], .zero = zero, .lo = 0, .hi = nmax, .anchor = {-1, -1}};
}

/* The static form: every super-block of the original row at once. */
static void kgrids_row(const gptq_ctx *c, const float *row, uint8_t *kblk, sqz__grid *grids) {
    const sqz_dtype dt = sqz_qformat_dtype(c->fmt);
    const size_t bb = sqz_dtype_info(dt)->type_size;
    const int64_t sbn = sqz_dtype_info(dt)->block_size;
    for (int64_t sb = 0; sb < c->n / sbn; sb++)
        sqz__gptq_kgrids(c, row + sb * sbn, sb, kblk + sb * bb, grids + sb * (sbn / c->gs));
}

/* K-quants and IQ4: the sweep's codes (original column order) into the blocks kgrids_row made. */
static void kencode(const gptq_ctx *c, const int8_t *codes, int64_t n_out, uint8_t *kblk, sqz_qmatrix *q) {
    const sqz_dtype dt = sqz_qformat_dtype(c->fmt);
    const size_t bb = sqz_dtype_info(dt)->type_size;
    const int64_t sbn = sqz_dtype_info(dt)->block_size;
    uint8_t L[256];
    for (int64_t r = 0; r < n_out; r++)
        for (int64_t sb = 0; sb < c->n / sbn; sb++) {
            for (int e = 0; e < sbn; e++) L[e] = (uint8_t)codes[r * c->n + sb * sbn + e];
            uint8_t *blk = kblk + ((size_t)r * (size_t)(c->n / sbn) + (size_t)sb) * bb;
            if (c->fmt == SQZ_QFMT_IQ3_S) sqz__iq3s_repack(codes + r * c->n + sb * sbn, blk); /* signed levels */
            else if (sqz__qfmt_iq4(c->fmt)) sqz__iq4_repack(dt, L, blk);
            else if (c->fmt == SQZ_QFMT_MXFP4) sqz__mxfp4_repack(L, blk);
            else sqz__kquant_repack(dt, L, blk);
        }
    memcpy(q->data, kblk, q->nbytes);
}

/* The static grids of rows [begin, end) from the original (dead-zeroed) weights, in original
 * column order (each thread its own row of tmp). */
typedef struct sgrid_job {
    const gptq_ctx *c;
    const float *wp;
    float *tmp;        /* (threads, n) */
    uint8_t *kblk;     /* K-quants: the blocks, row_bytes per row */
    size_t row_bytes;
    sqz__grid *grids;
} sgrid_job;

static void sgrid_fn(void *ctx, int64_t begin, int64_t end, int thread) {
    const sgrid_job *j = ctx;
    const gptq_ctx *c = j->c;
    float *tmp = j->tmp + (size_t)thread * (size_t)c->n;
    for (int64_t r = begin; r < end; r++) {
        for (int64_t p = 0; p < c->n; p++) tmp[c->perm[p]] = j->wp[r * c->n + p];
        if (j->kblk) {
            kgrids_row(c, tmp, j->kblk + (size_t)r * j->row_bytes, &j->grids[r * c->ng]);
            continue;
        }
        for (int64_t g = 0; g < c->ng; g++) {
            if (c->fmt == SQZ_QFMT_NVFP4) sqz__nvfp4_grid(tmp + g * c->gs, c->gscale, &j->grids[r * c->ng + g]);
            else sqz__grid_make(c->fmt, tmp + g * c->gs, (int)c->gs, &j->grids[r * c->ng + g]);
        }
    }
}

static sqz_status static_grids(const gptq_ctx *c, const float *wp, int64_t n_out, uint8_t *kblk, size_t nbytes,
                               sqz__grid *grids) {
    const int nt = sqz__pool_threads(c->pool);
    sgrid_job j = {c, wp, sqz__malloc((size_t)nt * (size_t)c->n * sizeof(float)), kblk, nbytes / (size_t)n_out,
                   grids};
    if (!j.tmp) return SQZ_ERR_NOMEM;
    sqz__pool_for(c->pool, n_out, 1, sgrid_fn, &j);
    free(j.tmp);
    return SQZ_OK;
}

/* Rows [b, e) of w permuted into wp, dead columns zeroed. */
typedef struct wperm_job {
    const gptq_ctx *c;
    const float *w;
    float *wp;
} wperm_job;

static void wperm_fn(void *ctx, int64_t b, int64_t e, int thread) {
    (void)thread;
    const wperm_job *j = ctx;
    const int64_t n = j->c->n;
    for (int64_t r = b; r < e; r++)
        for (int64_t p = 0; p < n; p++) {
            const int64_t col = j->c->perm[p];
            j->wp[r * n + p] = j->c->dead[col] ? 0.0f : j->w[r * n + col];
        }
}

/* One layer: out (quantizing) or values (mask without quantization). */
static sqz_status gptq_one(const gptq_ctx *c, const float *w, int64_t n_out, sqz_qmatrix *out, float *values) {
    const int64_t n = c->n, B = c->blocksize;
    const bool quant = !c->mask || c->mask->quantize;
    const bool kq = quant && sqz__qfmt_blockgrid(c->fmt);
    float *wp = sqz__malloc((size_t)n_out * (size_t)n * sizeof(float));
    gptq_out go = {.codes = quant ? sqz__malloc((size_t)n_out * (size_t)n) : NULL,
                   .grids = quant ? sqz__malloc((size_t)n_out * (size_t)c->ng * sizeof(sqz__grid)) : NULL,
                   .pr = c->mask ? sqz__calloc((size_t)n_out * (size_t)B, 1) : NULL,
                   .values = values, .row_bytes = out && n_out ? out->nbytes / (size_t)n_out : 0};
    uint8_t *kblk = kq ? sqz__malloc(out->nbytes) : NULL;
    sqz_status s = SQZ_OK;
    go.kblk = kblk;
    if (!wp || (quant && (!go.codes || !go.grids)) || (c->mask && !go.pr) || (kq && !kblk)) s = SQZ_ERR_NOMEM;
    double t0 = sqz__prof_begin();
    if (s == SQZ_OK) { /* permuted, dead columns zeroed */
        wperm_job pj = {c, w, wp};
        sqz__pool_for(c->pool, n_out, 4, wperm_fn, &pj);
    }
    sqz__prof_end(SQZ__PROF_GPTQ_PERMUTE, t0);
    t0 = sqz__prof_begin();
    if (s == SQZ_OK && quant && c->static_grids) s = static_grids(c, wp, n_out, kblk, kq ? out->nbytes : 0, go.grids);
    sqz__prof_end(SQZ__PROF_GPTQ_GRIDS, t0);
    if (s == SQZ_OK)
        s = on_device(c->be) ? sqz__gptq_sweep_device(c, wp, n_out, &go)
                                                     : sqz__gptq_sweep_host(c, wp, n_out, &go);
    t0 = sqz__prof_begin();
    if (s == SQZ_OK && quant) {
        if (kq) kencode(c, go.codes, n_out, kblk, out);
        else sqz__encode(out, go.codes, go.grids);
        out->loss = go.loss;
    }
    sqz__prof_end(SQZ__PROF_GPTQ_ENCODE, t0);
    free(wp); free(go.codes); free(go.grids); free(go.pr); free(kblk);
    return s;
}

/* What a backend must have for GPTQ (a device one: memory and the tile slots too). */
static sqz_status check_backend(const sqz_backend *be) {
    if (!be) return SQZ_OK;
    const sqz_op factor = on_device(be) ? SQZ_OP_TILES : SQZ_OP_CHOL;
    SQZ_RETURN_IF(!sqz_backend_supports(be, factor, SQZ_DTYPE_F32) ||
                      !sqz_backend_supports(be, SQZ_OP_SGEMM, SQZ_DTYPE_F32),
                  SQZ_ERR_UNSUPPORTED, "gptq: backend %s has no Cholesky factor or sgemm", be->ops->name);
    SQZ_RETURN_IF(on_device(be) && (!be->ops->alloc || !be->ops->upload || !be->ops->download),
                  SQZ_ERR_UNSUPPORTED, "gptq: backend %s cannot move memory", be->ops->name);
    return SQZ_OK;
}

static void ctx_free(gptq_ctx *c) {
    if (!c->borrowed) {
        if (c->du && c->be->ops->free) c->be->ops->free(c->be->ctx, c->du);
        if (c->dp && c->be->ops->free) c->be->ops->free(c->be->ctx, c->dp);
        free((void *)c->u);
        free((void *)c->perm);
        free((void *)c->dead);
        free((void *)c->pm);
    }
    sqz__pool_free(c->pool);
    free((void *)c->ud);
    free((void *)c->hdiag);
    memset(c, 0, sizeof *c);
}

/* A fresh factor handed to the caller's store (o->factors), when there is one. */
static sqz_status keep_factor(const sqz_quant_opts *o, const sqz__gptq_key *key, gptq_ctx *c) {
    sqz__gptq_factors_keep(o->factors, key, c);
    return SQZ_OK;
}

/* U, perm, dead (prepare, or the caller's store when it holds this input's factor), U's diagonal
 * for a mask, diag H for K-quant grids, the thread pool, U in device memory on a device backend.
 * c->n, mask and be are set; on failure the caller still calls ctx_free. */
static sqz_status ctx_setup(gptq_ctx *c, const sqz_qstats *st, const sqz_quant_opts *o, bool want_hdiag) {
    const int64_t n = c->n;
    SQZ_TRY(check_backend(c->be));
    float *u = NULL;
    int64_t *perm = NULL;
    uint8_t *dead = NULL;
    float *pm = NULL;
    SQZ_TRY(sqz__pool_new(o->threads, &c->pool));
    const sqz__gptq_key key = sqz__gptq_key_of(st, o);
    const bool kept = sqz__gptq_factors_take(o->factors, &key, c); /* a member of the same input before */
    if (!kept) {
        const double t0 = sqz__prof_begin();
        sqz_status s = prepare(c->pool, st, o, &u, &perm, &dead, &pm);
        sqz__prof_end(SQZ__PROF_GPTQ_PREP, t0);
        c->pm = pm; /* owned by c even when prepare failed after forming it */
        SQZ_TRY(s);
        c->u = u;
        c->perm = perm;
        c->dead = dead;
    }
    if (c->mask) {
        float *ud = sqz__malloc((size_t)n * sizeof(float));
        if (!(c->ud = ud)) return SQZ_ERR_NOMEM;
        for (int64_t p = 0; p < n; p++) ud[p] = u[p * n + p];
    }
    if (want_hdiag) {
        float *hd = sqz__malloc((size_t)n * sizeof(float));
        if (!(c->hdiag = hd)) return SQZ_ERR_NOMEM;
        for (int64_t j = 0; j < n; j++) hd[j] = (float)st->xtx[j * n + j];
    }
    if (kept) return SQZ_OK; /* its device copies came with it */
    /* under --gpu-mem U (and P) cross in rows as the sweep needs them (gptq_sweep.c), same bits */
    if (!on_device(c->be) || tile_budget(c->be)) return keep_factor(o, &key, c);
    const size_t nb = (size_t)n * (size_t)n * sizeof(float);
    if (!(c->du = c->be->ops->alloc(c->be->ctx, nb))) {
        sqz__error_prefix("gptq: device memory for the factor of %lld", (long long)n);
        return SQZ_ERR_NOMEM;
    }
    SQZ_TRY(c->be->ops->upload(c->be->ctx, c->du, u, nb));
    if (!c->pm) return keep_factor(o, &key, c);
    if (!(c->dp = c->be->ops->alloc(c->be->ctx, nb))) {
        sqz__error_prefix("gptq: device memory for GPTAQ's P of %lld", (long long)n);
        return SQZ_ERR_NOMEM;
    }
    SQZ_TRY(c->be->ops->upload(c->be->ctx, c->dp, c->pm, nb));
    return keep_factor(o, &key, c);
}

typedef struct layers_job {
    const gptq_ctx *c;
    const sqz_qlinear *lin;
    int n_lin;
    const sqz_quant_opts *o;
    const sqz_qtarget *t;
    float act_scale;
    double t_prep;
    bool gguf;
} layers_job;

/* One layer quantized into q (with g_idx for I4 desc_act). */
static sqz_status layer_quant(const layers_job *L, int i, sqz_qmatrix *q) {
    const gptq_ctx *c = L->c;
    const int64_t n = c->n;
    SQZ_TRY(sqz_qmatrix_alloc(q, L->t, L->lin[i].n_out, n));
    SQZ_TRY(gptq_one(c, L->lin[i].w, L->lin[i].n_out, q, NULL));
    if (!c->static_grids && L->o->act_order && !L->gguf) { /* I4 desc_act: groups by position */
        if (!(q->g_idx_buf = sqz__malloc((size_t)n * sizeof(int32_t)))) return SQZ_ERR_NOMEM;
        for (int64_t p = 0; p < n; p++) q->g_idx_buf[c->perm[p]] = (int32_t)(p / c->gs);
        q->qp.g_idx = q->g_idx_buf;
    }
    if (L->t->fmt == SQZ_QFMT_NVFP4) q->qp.global_scale = c->gscale;
    q->qp.act_mode = L->o->act_mode;
    q->qp.act_grid = sqz__act_grid_for(L->o->target.fmt, L->o->act_mode);
    q->qp.act_scale = L->act_scale;
    return SQZ_OK;
}

static sqz_status run_layers(const layers_job *L, sqz_qmatrix *out, float **values) {
    const bool quant = !L->c->mask || L->c->mask->quantize;
    sqz_status s = SQZ_OK;
    int done = 0;
    for (; done < L->n_lin; done++) {
        const double t1 = sqz_now_seconds();
        if (!quant) {
            if ((s = gptq_one(L->c, L->lin[done].w, L->lin[done].n_out, NULL, values[done])) != SQZ_OK) break;
            continue;
        }
        s = layer_quant(L, done, &out[done]);
        if (s != SQZ_OK) {
            sqz_qmatrix_free(&out[done]);
            if (L->lin[done].name) sqz__error_prefix("%s", L->lin[done].name);
            break;
        }
        out[done].seconds = sqz_now_seconds() - t1 + L->t_prep / L->n_lin;
    }
    for (int j = 0; s != SQZ_OK && quant && j < done; j++) sqz_qmatrix_free(&out[j]);
    return s;
}

static sqz_status gptq_run(const sqz_qlinear *lin, int n_lin, const sqz_qstats *st, const sqz_quant_opts *o_in,
                           const sqz__gptq_mask *mask, sqz_qmatrix *out, float **values, float *smooth) {
    sqz_quant_opts o1 = o_in ? *o_in : sqz_quant_default_opts();
    if (o1.gptaq && o1.gptaq_optional && (!st || !st->dxxt)) o1.gptaq = false; /* plain GPTQ */
    SQZ_TRY(sqz__check_method_args("gptq", lin, n_lin, st, o_in, SQZ_QSTAT_XTX | (o1.gptaq ? SQZ_QSTAT_DXXT : 0u),
                                   smooth, false));
    if (mask) o1.act_order = false;
    const sqz_quant_opts *o = &o1;
    sqz_qtarget t = o->target;
    SQZ_TRY(sqz_qtarget_check(&t));
    /* IQ3_S's codebook holds no 0: SparseGPT cannot keep a mask on it */
    SQZ_RETURN_IF(t.fmt == SQZ_QFMT_IQ3_S && mask && mask->quantize, SQZ_ERR_UNSUPPORTED,
                  "gptq: iq3_s cannot keep a sparsity mask: its codebook holds no 0");
    const int64_t n = st->n_in;
    const bool kq = sqz__qfmt_blockgrid(t.fmt);
    /* K-quants and IQ4: a grid per sub-block (32 for Q4_K / Q5_K / IQ4, 16 for the others) */
    const bool sub32 = t.fmt == SQZ_QFMT_Q4_K || t.fmt == SQZ_QFMT_Q5_K || sqz__qfmt_table(t.fmt) ||
                       t.fmt == SQZ_QFMT_IQ3_S;
    const int64_t gs = !kq ? sqz__group_cols(&t, n) : sub32 ? 32 : 16;
    const int64_t sbn = kq ? sqz_dtype_info(sqz_qformat_dtype(t.fmt))->block_size : 1;
    const bool quant = !mask || mask->quantize;
    SQZ_RETURN_IF(kq && n % sbn, SQZ_ERR_INVALID_ARG, "gptq: %s needs a width that is a multiple of %lld, not %lld",
                  sqz_qformat_name(t.fmt), (long long)sbn, (long long)n);
    SQZ_RETURN_IF(o->blocksize < 1 || (quant && t.fmt != SQZ_QFMT_I8 && t.fmt != SQZ_QFMT_FP8 && o->blocksize % gs != 0), SQZ_ERR_INVALID_ARG,
                  "gptq: block size %d must be a positive multiple of the group (%lld)", (int)o->blocksize,
                  (long long)gs);
    SQZ_RETURN_IF(mask && mask->per_row && (mask->span < 1 || o->blocksize % mask->span), SQZ_ERR_INVALID_ARG,
                  "gptq: block size %d must be a multiple of the mask span %lld", (int)o->blocksize,
                  (long long)mask->span);
    SQZ_RETURN_IF(mask && quant && (sqz__qfmt_affine(t.fmt) || sqz__qfmt_iq4(t.fmt)), SQZ_ERR_INVALID_ARG,
                  "gptq: %s has no exact zero (%s), so it cannot keep a sparsity mask", sqz_qformat_name(t.fmt),
                  sqz__qfmt_iq4(t.fmt) ? "kvalues_iq4nl holds no 0" : "d * code + m");
    SQZ_RETURN_IF(!(o->percdamp >= 0), SQZ_ERR_INVALID_ARG, "gptq: damping %g", o->percdamp);
    SQZ_RETURN_IF(!(o->gptq_shrink <= 1) || (o->gptq_shrink < 0 && o->gptq_shrink != SQZ_GPTQ_SHRINK_AUTO),
                  SQZ_ERR_INVALID_ARG, "gptq: shrinkage %g (0 to 1, or SQZ_GPTQ_SHRINK_AUTO)", o->gptq_shrink);
    float act_scale = 0.0f;
    if (quant && o->act_mode == SQZ_ACT_STATIC_TENSOR) SQZ_TRY(sqz__act_scale_for(st, o, NULL, &act_scale));
    const bool gguf = t.fmt == SQZ_QFMT_Q8_0 || t.fmt == SQZ_QFMT_Q4_0 || t.fmt == SQZ_QFMT_Q4_1 ||
                      t.fmt == SQZ_QFMT_Q5_0 || t.fmt == SQZ_QFMT_Q5_1;
    /* K-quant / IQ grids made as the sweep reaches each super-block, from the error-updated values
     * (GPTQ's dynamic groups); static from the original row under act-order, static-groups or a mask */
    const bool kdyn = kq && quant && !mask && !o->act_order && !o->static_groups;
    gptq_ctx c = {.n = n, .fmt = t.fmt, .gs = gs, .ng = n / gs,
                  .static_grids = t.fmt == SQZ_QFMT_I8 || t.fmt == SQZ_QFMT_FP8 || t.fmt == SQZ_QFMT_NVFP4 ||
                                  o->static_groups || (gguf && o->act_order) || (kq && !kdyn),
                  .kdyn = kdyn, .sbn = sbn, .act_order = o->act_order, .mask = mask, .be = o->backend,
                  /* dynamic super-blocks start where a block does, so that each lies in one block */
                  .blocksize = kdyn ? (int32_t)((o->blocksize + sbn - 1) / sbn * sbn) : o->blocksize};
    float amax = 0.0f; /* NVFP4: one global scale for the matrices of this input, as RTN (quant/nvfp4.c) */
    for (int i = 0; t.fmt == SQZ_QFMT_NVFP4 && i < n_lin; i++)
        amax = fmaxf(amax, sqz__nvfp4_amax(lin[i].w, lin[i].n_out * n));
    c.gscale = sqz__nvfp4_global_scale(amax);
    const double t0 = sqz_now_seconds();
    sqz_status s = ctx_setup(&c, st, o, kq && quant);
    const double t_prep = sqz_now_seconds() - t0;
    const layers_job L = {&c, lin, n_lin, o, &t, act_scale, t_prep, gguf};
    if (s == SQZ_OK) s = run_layers(&L, out, values);
    ctx_free(&c);
    if (s != SQZ_OK) return s;
    if (smooth)
        for (int64_t j = 0; j < n; j++) smooth[j] = 1.0f;
    return SQZ_OK;
}

sqz_status sqz_quant_gptq(const sqz_qlinear *lin, int n_lin, const sqz_qstats *st, const sqz_quant_opts *o,
                          sqz_qmatrix *out, float *smooth) {
    return gptq_run(lin, n_lin, st, o, NULL, out, NULL, smooth);
}

sqz_status sqz__gptq_masked(const sqz_qlinear *lin, int n_lin, const sqz_qstats *st, const sqz_quant_opts *o,
                            const sqz__gptq_mask *mask, sqz_qmatrix *out, float **values) {
    SQZ_RETURN_IF(!mask || !mask->select || (!mask->quantize && !values) || (mask->quantize && !out),
                  SQZ_ERR_INVALID_ARG, "gptq: a mask needs its select function and somewhere to put the result");
    return gptq_run(lin, n_lin, st, o, mask, out, values, NULL);
}

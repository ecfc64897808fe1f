/*
 * quant/gptq_internal.h - what gptq.c (preparation, grids, packing) shares with gptq_sweep.c
 * (the column sweep on the host or on a device backend). Internal.
 */
#ifndef SQZ_QUANT_GPTQ_INTERNAL_H
#define SQZ_QUANT_GPTQ_INTERNAL_H

#include "kernels/cpu/pool.h"
#include "quant/quant_internal.h"

typedef struct sqz_gptq_factors sqz_gptq_factors;

typedef struct gptq_ctx {
    int64_t n;          /* columns */
    const int64_t *perm; /* processing position -> original column */
    const uint8_t *dead; /* by original column */
    const float *u;     /* (n, n) upper factor of H^-1 in processing order (host) */
    sqz_qformat fmt;
    int64_t gs, ng;     /* group columns, groups per row */
    bool static_grids;
    float gscale;       /* NVFP4: the global scale of the matrices being quantized (their shared amax) */
    bool kdyn;          /* K-quants / IQ: each super-block's grids made when the sweep reaches it,
                           from the values its row holds then (sqz__gptq_kgrids) */
    int64_t sbn;        /* K-quants / IQ: the super-block (256, or 32 for IQ4_NL) */
    bool act_order;
    int32_t blocksize;
    const sqz__gptq_mask *mask; /* NULL: plain GPTQ */
    const float *ud;    /* (n) U's diagonal, when mask */
    const float *hdiag; /* K-quants: diag H by original column, the importance of the grids */
    sqz__pool *pool;    /* the rows of a block, the static grids */
    sqz_backend *be;    /* NULL: host arithmetic; else the backend (host memory or a device) */
    void *du;           /* device backend: U (n, n) f32 in its memory */
    const float *pm;    /* GPTAQ: P (n, n) in processing order, strictly upper (gptaq.c); NULL: GPTQ */
    void *dp;           /* device backend with GPTAQ: P (n, n) f32 in its memory */
    bool borrowed;      /* u, du, perm, dead, pm, dp belong to a sqz_gptq_factors (not freed here) */
} gptq_ctx;

/* The shrinkage of H's off-diagonal GPTQ uses for these options and statistics (gptq_shrink, or
 * its automatic value). */
double sqz__gptq_shrink(const sqz_quant_opts *o, const sqz_qstats *st);

/* What a prepared factor depends on (gptq_factors.c): two calls with equal keys factor the same
 * matrix the same way. Compared with memcmp (zero-filled by sqz__gptq_key_of). */
typedef struct sqz__gptq_key {
    const sqz_qstats *st;
    const double *xtx, *dxxt;
    int64_t n;
    double percdamp, shrink, gptaq_alpha;
    bool act_order, iq3_groups, gptaq;
    const sqz_backend *be;
} sqz__gptq_key;

sqz__gptq_key sqz__gptq_key_of(const sqz_qstats *st, const sqz_quant_opts *o);
/* When f holds the factor of key k: c's factor fields point at it (c->borrowed) and true. */
bool sqz__gptq_factors_take(const sqz_gptq_factors *f, const sqz__gptq_key *k, gptq_ctx *c);
/* f (may be NULL: nothing) takes c's freshly prepared factor for key k, dropping what it held. */
void sqz__gptq_factors_keep(sqz_gptq_factors *f, const sqz__gptq_key *k, gptq_ctx *c);

/* Where the sweep writes: codes (n_out, n) by original column and the grids (n_out, ng) when
 * quantizing, pr (n_out, blocksize) the mask's choice for the current block, values (n_out, n)
 * by original column for a mask without quantization; loss the sum of e^2 / 2. */
typedef struct gptq_out {
    int8_t *codes;
    sqz__grid *grids;
    uint8_t *pr;
    float *values;
    uint8_t *kblk;      /* K-quants / IQ: the blocks (n_out rows of row_bytes) whose scales are the grids */
    size_t row_bytes;
    double loss;
} gptq_out;

/* K-quants, IQ4 and IQ3_S: the grids of super-block sb (its c->sbn values x in original column order)
 * from llama.cpp's importance-weighted quantizer (importance diag H): scales into blk, one grid per
 * sub-block into grids. */
void sqz__gptq_kgrids(const gptq_ctx *c, const float *x, int64_t sb, uint8_t *blk, sqz__grid *grids);

/* The sweep over row-major wp (n_out, n) in processing order (overwritten) on the host; the
 * trailing updates through c->be's sgemm slot when it is a host-memory backend (same bits). */
sqz_status sqz__gptq_sweep_host(const gptq_ctx *c, float *wp, int64_t n_out, gptq_out *o);
/* The same on a device backend: wp^T and U in its memory, each block's rows downloaded, swept
 * on the host and their errors uploaded for one sgemm. wp is read only. */
sqz_status sqz__gptq_sweep_device(const gptq_ctx *c, const float *wp, int64_t n_out, gptq_out *o);

/* GPTAQ's P = alpha * triu1(D . U^T) . U (gptaq.c), D = dxxt (n, n, original column order)
 * permuted by perm with the dead columns' rows and columns zero, U the double factor (n, n,
 * processing order, strictly lower part 0). *p_out (n, n) float is the caller's to free.
 * SQZ_ERR_NUMERIC for a non-finite dxxt entry, SQZ_ERR_INVALID_ARG for a bad alpha. */
sqz_status sqz__gptaq_p(const double *dxxt, const int64_t *perm, const uint8_t *dead, const double *u, int64_t n,
                        double alpha, float **p_out);

#endif

/*
 * calib/owner.c - a block's statistics on the ranks of an MPI job with --stats-partition owner
 * (docs/distributed.md): the statistics are partitioned by linear input, and no rank ever holds
 * a partial sum of an input it does not own.
 *
 * The windows are dealt round-robin: rank r runs windows r, r + N, r + 2N, ... Step k, every
 * rank runs its window kN + r through the block with a hook that only copies what it sees (the
 * activations of each linear input, the block's per-token input/output cosines). Then each
 * input's activations of the step are gathered to the input's owner in rank order, which is
 * window order, and the owner feeds them to one observer, exactly as the hook of a plain run
 * (no mpirun) feeds its one observer window after window: every sum is formed by the same
 * additions in the same order, so the statistics, hence the files, are the same bits as a plain
 * run's for any number of ranks. Rank 0 adds the cosines the same way. At the end each owner
 * broadcasts its inputs' statistics, one input at a time, so that every rank can compress the
 * whole block, or, for a partitioned solve (a quantization that solves each input's layers
 * alone: compress/pass_quant_share.c), keeps them: the owner alone solves them and sends the result.
 *
 * The Hessians are formed in row panels dealt over the ranks (calib/panel.c), so a step's
 * activations of an input also go to the ranks holding panels of it; after the last window the
 * panels are gathered into the owner's whole matrix.
 *
 * Memory for statistics on a rank: its panels, the whole Hessian of each input it owns, its own
 * inputs' other accumulators, one window's activations of every input (the capture) and the
 * step's activations of the inputs it needs (N windows); then the merged block, or only its own
 * inputs for a partitioned solve. Traffic per block: every window's activations of an input to
 * its owner and panel holders (T x d floats per window, against the tree's d x d Hessians per
 * rank), the panels to the owners, and the merged statistics or the solved groups.
 */
#include <stdlib.h>
#include <string.h>

#include "calib/reduce_internal.h"
#include "sqz/dist.h"

enum { CAP_MAX_EVENTS = 64 };

typedef struct cap_event {
    uint32_t roles;
    int64_t dim, n;
    size_t off; /* floats into buf */
} cap_event;

/* What one window's pass through the block showed. */
typedef struct capture {
    int32_t layer;
    bool block_io;
    cap_event ev[CAP_MAX_EVENTS];
    int n_ev;
    float *buf;
    size_t len, cap; /* floats */
    float *blk;      /* the block's input, until its output arrives */
    size_t blk_cap;
    int64_t blk_n, blk_d;
    double *cos; /* per-token cosines */
    int64_t n_cos, cos_cap;
} capture;

static sqz_status grow(void **p, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) return SQZ_OK;
    size_t n = *cap ? *cap : 1024;
    while (n < need) n *= 2;
    void *q = sqz__realloc(*p, n * elem);
    if (!q) return SQZ_ERROR(SQZ_ERR_NOMEM, "calibration: cannot hold one window's activations (%.1f MB)",
                             (double)(need * elem) / 1e6);
    *p = q;
    *cap = n;
    return SQZ_OK;
}

static sqz_status capture_hook(void *user, const sqz_hook_event *e) {
    capture *c = user;
    if (e->layer != c->layer) return SQZ_OK;
    const size_t n = (size_t)e->n_tokens * (size_t)e->dim;
    if (e->point == SQZ_HOOK_LINEAR_IN && e->roles && !e->in_expert) { /* a mixture: refused with MPI */
        SQZ_RETURN_IF(c->n_ev == CAP_MAX_EVENTS, SQZ_ERR_INVALID_ARG,
                      "calibration: block %d reports more than %d linear inputs per window", (int)c->layer,
                      CAP_MAX_EVENTS);
        SQZ_TRY(grow((void **)&c->buf, &c->cap, c->len + n, sizeof(float)));
        memcpy(c->buf + c->len, e->x, n * sizeof(float));
        c->ev[c->n_ev++] = (cap_event){e->roles, e->dim, e->n_tokens, c->len};
        c->len += n;
    } else if (e->point == SQZ_HOOK_BLOCK_IN && c->block_io) {
        SQZ_TRY(grow((void **)&c->blk, &c->blk_cap, n, sizeof(float)));
        memcpy(c->blk, e->x, n * sizeof(float));
        c->blk_n = e->n_tokens;
        c->blk_d = e->dim;
    } else if (e->point == SQZ_HOOK_BLOCK_OUT && c->block_io && c->blk_n == e->n_tokens && c->blk_d == e->dim) {
        size_t cap = (size_t)c->cos_cap;
        SQZ_TRY(grow((void **)&c->cos, &cap, (size_t)(c->n_cos + e->n_tokens), sizeof(double)));
        c->cos_cap = (int64_t)cap;
        for (int64_t t = 0; t < e->n_tokens; t++)
            c->cos[c->n_cos++] = sqz__cosine_row(c->blk + t * e->dim, e->x + t * e->dim, e->dim);
        c->blk_n = 0;
    }
    return SQZ_OK;
}

static size_t capture_bytes(const capture *c) {
    return c->cap * sizeof(float) + c->blk_cap * sizeof(float) + (size_t)c->cos_cap * sizeof(double);
}

/* The block's linear inputs, in the order a window meets them (every rank sees the same). */
typedef struct inputs {
    uint32_t roles[SQZ_CALIB_MAX_INPUTS];
    int64_t dim[SQZ_CALIB_MAX_INPUTS];
    int owner[SQZ_CALIB_MAX_INPUTS];
    bool recv[SQZ_CALIB_MAX_INPUTS][256]; /* the ranks that get input i's activations: its owner
                                             and the holders of its Hessian panels */
    int n;
} inputs;

/* Each input to an owner: the largest first, each to the rank with the fewest Hessian bytes so
 * far (ties: the lower rank); the Hessians' row panels dealt on their own (calib/panel.c). The
 * same on every rank. */
static sqz_status assign(const capture *c, int size, bool xtx, inputs *in, sqz__calib_panels *ps) {
    memset(in, 0, sizeof *in);
    for (int e = 0; e < c->n_ev; e++) {
        int i = 0;
        while (i < in->n && in->roles[i] != c->ev[e].roles) i++;
        if (i < in->n) continue;
        SQZ_RETURN_IF(in->n == SQZ_CALIB_MAX_INPUTS, SQZ_ERR_INVALID_ARG,
                      "calibration: block %d has more than %d distinct linear inputs", (int)c->layer,
                      SQZ_CALIB_MAX_INPUTS);
        in->roles[in->n] = c->ev[e].roles;
        in->dim[in->n++] = c->ev[e].dim;
    }
    double *load = sqz__calloc((size_t)size, sizeof *load);
    if (!load) return SQZ_ERR_NOMEM;
    bool done[SQZ_CALIB_MAX_INPUTS] = {0};
    for (int k = 0; k < in->n; k++) {
        int big = -1;
        for (int i = 0; i < in->n; i++)
            if (!done[i] && (big < 0 || in->dim[i] > in->dim[big])) big = i;
        int r = 0;
        for (int q = 1; q < size; q++)
            if (load[q] < load[r]) r = q;
        in->owner[big] = r;
        in->recv[big][r] = true;
        load[r] += (double)in->dim[big] * (double)in->dim[big];
        done[big] = true;
    }
    free(load);
    return xtx ? sqz__calib_panels_assign(in->dim, in->owner, in->n, sqz_dist_rank(), size, ps, in->recv) : SQZ_OK;
}

/* This rank's events of the input with `roles`, as [count][n_tokens...][floats...]. */
static sqz_status pack_input(const capture *c, uint32_t roles, uint8_t **buf, size_t *len, size_t *cap) {
    int64_t cnt = 0;
    size_t floats = 0;
    for (int e = 0; e < c->n_ev; e++)
        if (c->ev[e].roles == roles) cnt++, floats += (size_t)(c->ev[e].n * c->ev[e].dim);
    *len = (size_t)(1 + cnt) * sizeof(int64_t) + floats * sizeof(float);
    SQZ_TRY(grow((void **)buf, cap, *len, 1));
    uint8_t *p = *buf;
    memcpy(p, &cnt, sizeof cnt);
    p += sizeof cnt;
    for (int e = 0; e < c->n_ev; e++)
        if (c->ev[e].roles == roles) {
            memcpy(p, &c->ev[e].n, sizeof(int64_t));
            p += sizeof(int64_t);
        }
    for (int e = 0; e < c->n_ev; e++)
        if (c->ev[e].roles == roles) {
            const size_t nb = (size_t)(c->ev[e].n * c->ev[e].dim) * sizeof(float);
            memcpy(p, c->buf + c->ev[e].off, nb);
            p += nb;
        }
    return SQZ_OK;
}

/* Every rank's events of input i (all[0..), counts per rank), in window order, to this rank's
 * observer (ob, when it owns the input) and Hessian panels of it. */
static sqz_status replay(sqz_calib_observer *ob, sqz__calib_panels *ps, int i, int32_t layer, uint32_t roles,
                         int64_t dim, const uint8_t *all, const size_t *counts, int size) {
    size_t off = 0;
    for (int r = 0; r < size; off += counts[r], r++) {
        if (!counts[r]) continue;
        sqz__reader rd;
        sqz__reader_init(&rd, all + off, counts[r]);
        int64_t cnt = 0;
        const uint8_t *p = sqz__reader_bytes(&rd, sizeof cnt);
        SQZ_RETURN_IF(!p, SQZ_ERR_FORMAT, "calibration: rank %d's activations are damaged", r);
        memcpy(&cnt, p, sizeof cnt);
        const uint8_t *ns = cnt >= 0 && cnt <= CAP_MAX_EVENTS ? sqz__reader_bytes(&rd, (size_t)cnt * 8) : NULL;
        SQZ_RETURN_IF(!ns, SQZ_ERR_FORMAT, "calibration: rank %d's activations are damaged", r);
        for (int64_t e = 0; e < cnt; e++) {
            int64_t n;
            memcpy(&n, ns + e * 8, sizeof n);
            const uint8_t *x = n > 0 && n <= (int64_t)(counts[r] / sizeof(float)) / dim
                                   ? sqz__reader_bytes(&rd, (size_t)(n * dim) * sizeof(float))
                                   : NULL;
            SQZ_RETURN_IF(!x, SQZ_ERR_FORMAT, "calibration: rank %d's activations are damaged", r);
            /* the hook's event: the rows are float-aligned in the gather buffer (8-byte header) */
            sqz_hook_event ev = {.point = SQZ_HOOK_LINEAR_IN, .layer = layer, .roles = roles,
                                 .x = (const float *)(const void *)x, .n_tokens = n, .dim = dim};
            if (ob) SQZ_TRY(sqz_calib_observer_hook(ob, &ev));
            SQZ_TRY(sqz__calib_panels_add(ps, i, ev.x, n, dim));
        }
    }
    return SQZ_OK;
}

/* The index of the input with `roles` among ob's, or -1. */
static int mine_index(const sqz_calib_observer *ob, uint32_t roles) {
    for (int j = 0; j < ob->n_inputs; j++)
        if (ob->in[j].roles == roles) return j;
    return -1;
}

/* A partitioned solve: input i's statistics stay on its owner (moved into `final`); the other
 * ranks get its roles and width only. */
static sqz_status keep_input(sqz_calib_observer *mine, const inputs *in, int i, sqz_calib_observer *final) {
    if (sqz_dist_rank() != in->owner[i]) return sqz__calib_observer_stub_input(final, in->roles[i], in->dim[i]);
    return sqz__calib_observer_take_input(final, mine, mine_index(mine, in->roles[i]));
}

/* Input i's statistics from its owner to every rank, appended to `final` (the owner moves its
 * own there). */
static sqz_status bcast_input(sqz_calib_observer *mine, const inputs *in, int i, const sqz_calib_observe_opts *o,
                              sqz__calib_mem *mem, sqz_calib_observer *final) {
    const int rank = sqz_dist_rank(), root = in->owner[i];
    if (sqz_dist_size() == 1) return keep_input(mine, in, i, final);
    uint8_t *buf = NULL;
    size_t len = 0, cap = 0;
    const int j = mine_index(mine, in->roles[i]);
    sqz_status st = rank != root || j >= 0
                        ? SQZ_OK
                        : SQZ_ERROR(SQZ_ERR_INVALID_ARG, "calibration: block %d: rank %d saw no input %d",
                                    (int)final->layer, rank, i);
    if (st == SQZ_OK && rank == root) st = sqz__calib_observer_pack(mine, j, &buf, &len, &cap);
    uint64_t n64 = len;
    if (st == SQZ_OK) st = sqz_dist_bcast(&n64, sizeof n64, root);
    if (st == SQZ_OK && rank != root) {
        cap = (size_t)n64 ? (size_t)n64 : 1;
        if (!(buf = sqz__malloc(cap))) st = SQZ_ERR_NOMEM;
    }
    sqz__calib_mem_set(mem, mem->live + cap);
    if (st == SQZ_OK) st = sqz_dist_bcast(buf, (size_t)n64, root);
    sqz_calib_observer *one = NULL;
    if (st == SQZ_OK && rank != root) {
        sqz__reader rd;
        sqz__reader_init(&rd, buf, (size_t)n64);
        st = sqz__calib_observer_unpack(&rd, o, &one);
    }
    free(buf);
    sqz__calib_mem_set(mem, mem->live - cap + sqz__calib_observer_bytes(one));
    if (st == SQZ_OK) st = rank == root ? sqz__calib_observer_take_input(final, mine, j)
                                        : sqz__calib_observer_take_input(final, one, 0);
    sqz_calib_observer_free(one);
    return st;
}

typedef struct owner_run {
    const sqz__calib_owner_job *j;
    capture cap;
    inputs in;
    sqz_calib_observe_opts mine_o; /* the job's statistics but the Hessians (in panels) */
    sqz__calib_panels panels; /* this rank's Hessian panels */
    sqz_calib_observer *mine; /* the inputs this rank owns (and, on rank 0, the cosines) */
    uint8_t *pk;              /* packing buffer */
    size_t pk_cap;
} owner_run;

/* The step's activations of each input to the ranks that need it, then the work on what arrived
 * (first every exchange: a rank that received waits for no other rank's work, and the ranks
 * accumulate at the same time). counts: size * SQZ_CALIB_MAX_INPUTS. */
static sqz_status exchange(owner_run *R, size_t *counts) {
    const sqz__calib_owner_job *j = R->j;
    const int rank = sqz_dist_rank(), size = sqz_dist_size();
    size_t total = 0;
    uint8_t *got[SQZ_CALIB_MAX_INPUTS] = {0};
    sqz_status st = SQZ_OK;
    for (int i = 0; i < R->in.n && st == SQZ_OK; i++) {
        size_t len = 0, *ci = counts + (size_t)i * (size_t)size;
        st = pack_input(&R->cap, R->in.roles[i], &R->pk, &len, &R->pk_cap);
        for (int q = 0; q < size && st == SQZ_OK; q++)
            if (R->in.recv[i][q]) st = sqz_dist_gatherv(R->pk, len, q, q == rank ? &got[i] : &(uint8_t *){NULL}, ci);
        for (int r = 0; got[i] && r < size; r++) total += ci[r];
    }
    sqz__calib_mem_set(j->mem, j->mem->live + total);
    const size_t b0 = sqz__calib_observer_bytes(R->mine);
    for (int i = 0; i < R->in.n && st == SQZ_OK; i++)
        if (got[i])
            st = replay(rank == R->in.owner[i] ? R->mine : NULL, &R->panels, i, j->layer, R->in.roles[i],
                        R->in.dim[i], got[i], counts + (size_t)i * (size_t)size, size);
    sqz__calib_mem_set(j->mem, j->mem->live - total - b0 + sqz__calib_observer_bytes(R->mine));
    for (int i = 0; i < SQZ_CALIB_MAX_INPUTS; i++) free(got[i]);
    return st;
}

/* The step's per-token cosines to rank 0, added in window order. */
static sqz_status cosines(owner_run *R, size_t *counts) {
    uint8_t *all = NULL;
    sqz_status st = sqz_dist_gatherv(R->cap.cos, (size_t)R->cap.n_cos * sizeof(double), 0, &all, counts);
    size_t off = 0;
    for (int r = 0; st == SQZ_OK && sqz_dist_rank() == 0 && r < sqz_dist_size(); off += counts[r], r++)
        for (size_t t = 0; t < counts[r] / sizeof(double); t++) {
            double v;
            memcpy(&v, all + off + t * sizeof(double), sizeof v);
            sqz__calib_cos_add(R->mine, v);
        }
    free(all);
    return st;
}

/* Step k: this rank's window kN + rank (if any) through the block, then the exchange. */
static sqz_status step(owner_run *R, int64_t k) {
    const sqz__calib_owner_job *j = R->j;
    const int rank = sqz_dist_rank(), size = sqz_dist_size();
    capture *c = &R->cap;
    c->n_ev = 0;
    c->len = 0;
    c->n_cos = 0;
    c->blk_n = 0;
    const size_t before = capture_bytes(c);
    if (k * size + rank < j->nw) {
        SQZ_TRY(sqz__calib_window(j->s, j->layer, j->x + (size_t)k * j->win_floats, j->tmp, j->win_floats, j->ctx,
                                  capture_hook, c));
        if (j->progress) j->progress(j->progress_user, ++*j->done, j->total);
    }
    sqz__calib_mem_set(j->mem, j->mem->live - before + capture_bytes(c));
    if (k == 0) { /* every rank ran a window (nw >= size): the block's inputs are known */
        SQZ_TRY(assign(c, size, (j->oo->needs & SQZ_QSTAT_XTX) != 0, &R->in, &R->panels));
        sqz__calib_mem_set(j->mem, j->mem->live + sqz__calib_panels_bytes(&R->panels));
    }
    size_t *counts = sqz__calloc((size_t)size * SQZ_CALIB_MAX_INPUTS, sizeof *counts);
    if (!counts) return SQZ_ERR_NOMEM;
    sqz_status st = exchange(R, counts);
    if (st == SQZ_OK && j->oo->block_io) st = cosines(R, counts);
    free(counts);
    return st;
}

sqz_status sqz__calib_owner_stats(const sqz__calib_owner_job *j, sqz_calib_block *stats) {
    const int size = sqz_dist_size();
    owner_run R;
    memset(&R, 0, sizeof R);
    R.j = j;
    R.cap.layer = j->layer;
    R.cap.block_io = j->oo->block_io;
    R.mine_o = *j->oo;
    R.mine_o.needs &= ~(unsigned)SQZ_QSTAT_XTX;
    SQZ_RETURN_IF(size > 256, SQZ_ERR_INVALID_ARG, "calibration: --stats-partition owner takes at most 256 ranks");
    SQZ_TRY(sqz__calib_observer_range(j->layer, &R.mine_o, 0, j->nw, j->ctx, &R.mine));
    sqz_status st = SQZ_OK;
    for (int64_t k = 0; k * size < j->nw && st == SQZ_OK; k++) st = step(&R, k);
    for (int i = 0; i < R.in.n && st == SQZ_OK && (j->oo->needs & SQZ_QSTAT_XTX); i++) { /* whole Hessians */
        double *h = NULL;
        st = sqz__calib_panels_gather(&R.panels, i, R.in.owner[i], &h, j->mem);
        const int q = h ? mine_index(R.mine, R.in.roles[i]) : -1;
        if (q >= 0) {
            R.mine->in[q].xtx = h;
        } else if (h) {
            free(h);
            st = SQZ_ERROR(SQZ_ERR_INVALID_ARG, "calibration: block %d: rank %d owns an input it never saw",
                           (int)j->layer, sqz_dist_rank());
        }
    }
    sqz__calib_panels_free(&R.panels);
    sqz__calib_mem_set(j->mem, j->mem->live - capture_bytes(&R.cap));
    free(R.cap.buf);
    free(R.cap.blk);
    free(R.cap.cos);
    free(R.pk);
    const sqz_status sealed = sqz__calib_observer_seal(R.mine);
    if (st == SQZ_OK) st = sealed;
    sqz_calib_observer *final = NULL;
    if (st == SQZ_OK) st = sqz__calib_observer_range(j->layer, j->oo, 0, j->nw, j->ctx, &final);
    if (st == SQZ_OK && j->oo->block_io) { /* rank 0's cosine sums */
        double cs[2] = {R.mine->cos_sum, R.mine->cos_min};
        int64_t cn = R.mine->cos_n;
        st = sqz_dist_bcast(cs, sizeof cs, 0);
        if (st == SQZ_OK) st = sqz_dist_bcast(&cn, sizeof cn, 0);
        final->cos_sum = cs[0];
        final->cos_min = cs[1];
        final->cos_n = cn;
    }
    for (int i = 0; i < R.in.n && st == SQZ_OK; i++)
        st = j->partitioned ? keep_input(R.mine, &R.in, i, final) : bcast_input(R.mine, &R.in, i, j->oo, j->mem, final);
    sqz_calib_observer_free(R.mine);
    if (st == SQZ_OK) st = sqz_calib_observer_finish(final, stats);
    if (st == SQZ_OK && j->partitioned) {
        stats->partitioned = true;
        for (int i = 0; i < R.in.n; i++) stats->owner[i] = R.in.owner[i];
    }
    sqz_calib_observer_free(final);
    return st;
}

/*
 * calib/driver.c - the sequential block-by-block driver (see sqz/calib.h), on one process or
 * on every rank of an MPI job (sqz/dist.h).
 *
 * X holds the residual stream of every calibration window at the input of the current
 * block. Block l observes on a copy of each window (so that X still holds block l's input
 * after the pass), lets the callback compress the block, then runs the compressed block on
 * X in place: block l + 1 is calibrated on what the compressed blocks 0..l produce, as
 * GPTQ's and AWQ's sequential layer-by-layer procedure does.
 *
 * A plain run feeds one observer every window in order. In an MPI job each rank holds and runs
 * only its share of the windows, and the statistics, hence the compressed block every rank
 * computes from them, are the same bits for any N (1 included): with --stats-partition owner
 * (calib/owner.c) the windows are dealt round-robin and each linear input's activations go to
 * the rank that owns the input, which accumulates them in window order (the plain run's bits);
 * with replicate each window gets an observer of its own and the observers are merged along a
 * fixed binary tree over the windows (calib/reduce.c), each rank merging the nodes inside its
 * contiguous share, the ranks exchanging those and merging the rest of the tree.
 *
 * GPTAQ (SQZ_QSTAT_DXXT) carries a second buffer F: every window's residual stream through the
 * ORIGINAL blocks. Before block l is observed on a window, F's window goes through block l in
 * place (its weights are still the original ones) with a hook that keeps its linear inputs'
 * rows; the observer pairs them with the compressed stream's rows (observe_dx.c). Plain runs
 * only: a job of more than one rank is refused.
 */
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/backend_impl.h"
#include "calib/reduce_internal.h"
#include "sqz/dist.h"
#include "sqz/family.h"

typedef struct run {
    sqz_session *s;
    const sqz_calib_run_opts *o;
    sqz_calib_observe_opts oo;
    int32_t layer;
    int64_t ctx, w0;   /* this rank's first window */
    size_t win_floats;
    float *x, *tmp;
    float *f;          /* GPTAQ: the float model's stream (as x), or NULL */
    sqz__calib_capture *cap;
    int64_t done, total;
    sqz__calib_mem mem;
    double hist_w0[SQZ_CALIB_MAX_INPUTS]; /* the first window's histogram widths (rank 0's) */
} run;

sqz_status sqz__calib_window(sqz_session *s, int32_t layer, float *x, float *tmp, size_t win_floats, int64_t ctx,
                             sqz_hook_fn hook, void *user) {
    if (tmp) {
        memcpy(tmp, x, win_floats * sizeof(float));
        x = tmp;
    }
    sqz_session_set_hook(s, hook, user);
    /* layer -1: the classifier's input (the head leaves x as it is) */
    sqz_status st = layer < 0 ? sqz_session_head(s, x, ctx, 0, NULL) : sqz_session_block(s, layer, x, ctx, 0);
    sqz_session_set_hook(s, NULL, NULL);
    return st;
}

/* The observer of tree node [a, b) of this rank's windows. */
static sqz_status node(run *R, int64_t a, int64_t b, sqz_calib_observer **out) {
    *out = NULL;
    if (b - a >= 2) {
        const int64_t m = sqz__calib_tree_split(a, b);
        sqz_calib_observer *l = NULL, *r = NULL;
        sqz_status st = node(R, a, m, &l);
        if (st == SQZ_OK) st = node(R, m, b, &r);
        if (st == SQZ_OK) {
            const size_t before = sqz__calib_observer_bytes(l) + sqz__calib_observer_bytes(r);
            st = sqz__calib_observer_merge(l, r);
            sqz__calib_mem_set(&R->mem, R->mem.live - before + sqz__calib_observer_bytes(l));
        }
        sqz_calib_observer_free(r);
        if (st != SQZ_OK) sqz_calib_observer_free(l);
        else *out = l;
        return st;
    }
    sqz_calib_observer *ob = NULL;
    SQZ_TRY(sqz__calib_observer_range(R->layer, &R->oo, a, b, R->ctx, &ob));
    memcpy(ob->hist_w0, R->hist_w0, sizeof ob->hist_w0);
    sqz_status st = sqz__calib_window(R->s, R->layer, R->x + (size_t)(a - R->w0) * R->win_floats, R->tmp,
                                      R->win_floats, R->ctx, sqz_calib_observer_hook, ob);
    if (R->o->progress) R->o->progress(R->o->progress_user, ++R->done, R->total);
    if (st != SQZ_OK) {
        sqz_calib_observer_free(ob);
        return st;
    }
    if ((st = sqz__calib_observer_seal(ob)) != SQZ_OK) {
        sqz_calib_observer_free(ob);
        return st;
    }
    sqz__calib_mem_set(&R->mem, R->mem.live + sqz__calib_observer_bytes(ob));
    if (a == 0 && (R->oo.needs & SQZ_QSTAT_HIST)) { /* rank 0: window 0 chose the bins; tell the others */
        for (int i = 0; i < ob->n_inputs; i++) R->hist_w0[i] = ob->in[i].hist.width;
        st = sqz_dist_bcast(R->hist_w0, sizeof R->hist_w0, 0);
        if (st != SQZ_OK) {
            sqz_calib_observer_free(ob);
            return st;
        }
    }
    *out = ob;
    return SQZ_OK;
}

/* A plain run (no mpirun): one observer fed every window in order, with one set of statistics
 * in memory; an owner-partitioned job forms the same bits (calib/owner.c). */
static sqz_status block_stats_serial(run *R, int64_t nw, sqz_calib_block *stats) {
    sqz_calib_observer *ob = NULL;
    SQZ_TRY(sqz__calib_observer_range(R->layer, &R->oo, 0, nw, R->ctx, &ob));
    sqz_status st = SQZ_OK;
    sqz__calib_observer_pair(ob, R->cap);
    for (int64_t i = 0; i < nw && st == SQZ_OK; i++) {
        if (R->f) { /* the original block on the float stream, in place: its rows to pair with */
            sqz__calib_capture_reset(R->cap, R->layer);
            st = sqz__calib_window(R->s, R->layer, R->f + (size_t)i * R->win_floats, NULL, R->win_floats, R->ctx,
                                   sqz__calib_capture_hook, R->cap);
            if (R->o->progress) R->o->progress(R->o->progress_user, ++R->done, R->total);
            if (st != SQZ_OK) break;
        }
        st = sqz__calib_window(R->s, R->layer, R->x + (size_t)i * R->win_floats, R->tmp, R->win_floats, R->ctx,
                               sqz_calib_observer_hook, ob);
        if (R->o->progress) R->o->progress(R->o->progress_user, ++R->done, R->total);
    }
    if (st == SQZ_OK) st = sqz__calib_observer_seal(ob);
    if (st == SQZ_OK) {
        sqz__calib_mem_set(&R->mem, sqz__calib_observer_bytes(ob));
        st = sqz_calib_observer_finish(ob, stats);
    }
    sqz_calib_observer_free(ob);
    return st;
}

/* Whether the windows are dealt round-robin and combined by owners (calib/owner.c). */
static bool owner_mode(const sqz_calib_run_opts *o) {
    return sqz_dist_launched() && o->partition == SQZ_CALIB_PARTITION_OWNER;
}

/* The statistics of block R->layer over all windows (of all ranks). */
static sqz_status block_stats(run *R, int64_t nw, int64_t w1, sqz_calib_block *stats) {
    if (!sqz_dist_launched() || R->f) return block_stats_serial(R, nw, stats);
    if (owner_mode(R->o)) {
        const sqz__calib_owner_job j = {R->s, R->layer, &R->oo, R->x, R->tmp, R->ctx, nw, R->win_floats, &R->mem,
                                        R->o->progress, R->o->progress_user, &R->done, R->total,
                                        R->o->partitioned_solve && sqz_dist_size() > 1};
        return sqz__calib_owner_stats(&j, stats);
    }
    enum { MAX_PIECES = 128 };
    sqz__calib_range pr[MAX_PIECES];
    sqz_calib_observer *pieces[MAX_PIECES] = {0};
    int n = 0;
    sqz__calib_tree_pieces(0, nw, R->w0, w1, pr, &n);
    sqz_status st = SQZ_OK;
    /* histograms: every window counts in the bins window 0 chose, as one observer of all
     * windows would (sqz_act_hist: the first batch sets the width); rank 0 sends them */
    memset(R->hist_w0, 0, sizeof R->hist_w0);
    if (R->w0 > 0 && (R->oo.needs & SQZ_QSTAT_HIST)) st = sqz_dist_bcast(R->hist_w0, sizeof R->hist_w0, 0);
    for (int i = 0; i < n && st == SQZ_OK; i++) st = node(R, pr[i].a, pr[i].b, &pieces[i]);
    sqz_calib_observer *all = NULL;
    if (st == SQZ_OK) st = sqz__calib_exchange(pieces, pr, n, nw, &R->oo, &R->mem, &all);
    for (int i = 0; i < n; i++) sqz_calib_observer_free(pieces[i]);
    if (st == SQZ_OK) st = sqz_calib_observer_finish(all, stats);
    sqz_calib_observer_free(all);
    return st;
}

/* The classifier's input (sqz_calib_run_opts.head): its statistics as a block's, over the final
 * stream x (and the float one for GPTAQ), given to on_block as layer -1; every rank gets them all
 * (the classifier is one matrix: no partitioned solve). */
static sqz_status head_stats(run *R, const sqz_model *m, int64_t nw, int64_t w1) {
    const sqz_family_info *fi = sqz_family_get(m->hp.family);
    if (!fi || !fi->lm_head)
        return R->o->on_block ? R->o->on_block(R->o->user, R->s, -1, NULL) : SQZ_OK;
    sqz_calib_run_opts ho = *R->o;
    ho.partitioned_solve = false;
    const sqz_calib_run_opts *keep = R->o;
    R->o = &ho;
    R->layer = -1;
    sqz__calib_capture_free(R->cap); /* GPTAQ's slots are the blocks' inputs: the classifier's is another */
    sqz_calib_block stats;
    memset(&stats, 0, sizeof stats);
    sqz_status st = block_stats(R, nw, w1, &stats);
    if (st == SQZ_OK && ho.on_block) st = ho.on_block(ho.user, R->s, -1, &stats);
    sqz_calib_block_free(&stats);
    sqz__calib_mem_set(&R->mem, 0);
    R->o = keep;
    return st;
}

sqz_status sqz_calib_run(sqz_session *s, const sqz_calib_windows *w, const sqz_calib_run_opts *o) {
    SQZ_RETURN_IF(!s || !w || !o || !w->tokens || w->n_windows < 1, SQZ_ERR_INVALID_ARG,
                  "calibration: no windows");
    const sqz_model *m = sqz_session_model(s);
    const int64_t d = m->hp.d_model, ctx = w->ctx, nw = w->n_windows, nl = m->hp.n_layers;
    SQZ_RETURN_IF(ctx > sqz_session_max_tokens(s), SQZ_ERR_INVALID_ARG,
                  "calibration: windows of %lld tokens exceed the session's %lld", (long long)ctx,
                  (long long)sqz_session_max_tokens(s));
    SQZ_TRY(sqz__calib_check_ranks(m, w)); /* every rank: the same model and windows */
    const int rank = sqz_dist_rank(), size = sqz_dist_size();
    /* the MPI paths (owner.c, reduce.c, panel.c) are host arithmetic; a host-memory backend
     * gives their bits, a device one is refused rather than silently not used */
    SQZ_RETURN_IF(size > 1 && o->observe.backend && !sqz_backend_host_memory(o->observe.backend),
                  SQZ_ERR_UNSUPPORTED, "calibration: the %s backend cannot form the statistics of a job of %d "
                  "ranks (device statistics are for one process)", o->observe.backend->ops->name, size);
    const bool gptaq = (o->observe.needs & SQZ_QSTAT_DXXT) != 0;
    SQZ_RETURN_IF(gptaq && size > 1, SQZ_ERR_UNSUPPORTED,
                  "calibration: GPTAQ (the float model's stream) runs on one process, not on a job of %d ranks "
                  "(add ':no-gptaq' to the gptq or sparsegpt SPEC)", size);
    const bool dealt = owner_mode(o) && !gptaq; /* windows rank, rank + size, ...; else [w0, w1) */
    int64_t w0, w1;
    sqz__calib_rank_windows(nw, rank, size, &w0, &w1);
    const int64_t here = dealt ? (nw - rank + size - 1) / size : w1 - w0;
    size_t win_floats, all_floats, all_bytes;
    SQZ_RETURN_IF(!sqz__mul_size((size_t)ctx, (size_t)d, &win_floats) ||
                      !sqz__mul_size(win_floats, (size_t)here, &all_floats) ||
                      !sqz__mul_size(all_floats, sizeof(float), &all_bytes),
                  SQZ_ERR_NOMEM, "calibration: %lld windows x %lld tokens x %lld floats overflow", (long long)here,
                  (long long)ctx, (long long)d);
    float *x = malloc(all_bytes);
    float *tmp = o->recompute ? malloc(win_floats * sizeof(float)) : NULL;
    float *f = gptaq ? malloc(all_bytes) : NULL;
    sqz__calib_capture cap;
    memset(&cap, 0, sizeof cap);
    if (!x || (o->recompute && !tmp) || (gptaq && !f)) {
        free(x);
        free(tmp);
        free(f);
        return SQZ_ERROR(SQZ_ERR_NOMEM, "calibration: cannot hold the activations of %lld windows x %lld tokens "
                         "x %lld (%.1f MB%s); use fewer samples or a shorter context",
                         (long long)here, (long long)ctx, (long long)d, (double)all_bytes / 1e6,
                         gptaq ? ", twice for GPTAQ's float stream" : "");
    }
    sqz_status st = SQZ_OK;
    for (int64_t i = 0; i < here && st == SQZ_OK; i++)
        st = sqz_session_embed(s, w->tokens + (dealt ? rank + i * size : w0 + i) * ctx, NULL, ctx, 0,
                               x + (size_t)i * win_floats);
    if (f && st == SQZ_OK) memcpy(f, x, all_bytes);

    run R = {.s = s, .o = o, .oo = o->observe, .ctx = ctx, .w0 = w0, .win_floats = win_floats, .x = x, .tmp = tmp,
             .f = f, .cap = gptaq ? &cap : NULL,
             .total = nl * here * ((o->recompute ? 2 : 1) + (gptaq ? 1 : 0)) + (o->head ? here * (gptaq ? 2 : 1) : 0)};
    R.oo.expected_tokens = nw * ctx;
    for (int32_t l = 0; l < nl && st == SQZ_OK; l++) {
        sqz_calib_block stats;
        memset(&stats, 0, sizeof stats);
        R.layer = l;
        double t0 = sqz__prof_begin();
        st = block_stats(&R, nw, w1, &stats);
        sqz__prof_end(SQZ__PROF_CALIB_STATS, t0);
        t0 = sqz__prof_begin();
        if (st == SQZ_OK && o->on_block) st = o->on_block(o->user, s, l, &stats);
        sqz_calib_block_free(&stats);
        sqz__prof_end(SQZ__PROF_CALIB_BLOCK, t0);
        sqz__calib_mem_set(&R.mem, 0);
        /* block l + 1's weights cross to a device while block l's outputs are recomputed */
        if (st == SQZ_OK && l + 1 < nl) st = sqz_session_prefetch(s, l + 1);
        t0 = sqz__prof_begin();
        for (int64_t i = 0; tmp && i < here && st == SQZ_OK; i++) {
            st = sqz_session_block(s, l, x + (size_t)i * win_floats, ctx, 0);
            if (o->progress) o->progress(o->progress_user, ++R.done, R.total);
        }
        sqz__prof_end(SQZ__PROF_CALIB_RECOMPUTE, t0);
        sqz_session_invalidate(s, l); /* the block's float weight copies: one block at a time */
    }
    if (st == SQZ_OK && o->head) st = head_stats(&R, m, nw, w1);
    sqz_session_set_hook(s, NULL, NULL);
    if (o->info) {
        o->info->stats_peak_bytes = (int64_t)R.mem.peak;
        double most = (double)R.mem.peak; /* collective: every rank that got here */
        if (st == SQZ_OK) st = sqz_dist_max_f64(&most, 1);
        o->info->stats_peak_max_bytes = (int64_t)most;
        o->info->bytes_sent = sqz_dist_bytes_sent();
        o->info->windows_here = here;
        o->info->ranks = sqz_dist_size();
    }
    free(x);
    free(tmp);
    free(f);
    sqz__calib_capture_free(&cap);
    return st;
}

sqz_status sqz_calib_scan(sqz_model *m, const sqz_session_opts *so, const sqz_calib_windows *w, unsigned needs,
                          bool head, sqz_calib_block_fn on_block, void *user, sqz_progress_fn progress,
                          void *progress_user) {
    sqz_session_opts o = *so;
    o.max_tokens = w->ctx;
    sqz_session *s = NULL;
    SQZ_TRY(sqz_session_new(m, &o, &s));
    sqz_calib_run_opts ro;
    memset(&ro, 0, sizeof ro);
    ro.observe.needs = needs;
    ro.head = head;
    ro.on_block = on_block;
    ro.user = user;
    ro.progress = progress;
    ro.progress_user = progress_user;
    sqz_status st = sqz_calib_run(s, w, &ro);
    sqz_session_free(s);
    return st;
}

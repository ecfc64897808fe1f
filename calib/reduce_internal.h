/*
 * calib/reduce_internal.h - distributed calibration inside calib/ (reduce.c, driver.c).
 */
#ifndef SQZ_CALIB_REDUCE_INTERNAL_H
#define SQZ_CALIB_REDUCE_INTERNAL_H

#include "calib/observe_internal.h"

typedef struct sqz__calib_range {
    int64_t a, b; /* windows [a, b) */
} sqz__calib_range;

/* Bytes of statistics held now and at most (what --stats-partition is measured by). */
typedef struct sqz__calib_mem {
    size_t live, peak;
} sqz__calib_mem;
void sqz__calib_mem_set(sqz__calib_mem *mem, size_t live);

/* The windows [s, e) of rank `rank` of `size` (replicate: contiguous, sizes differing by at most
 * one). */
void sqz__calib_rank_windows(int64_t nw, int rank, int size, int64_t *s, int64_t *e);
/* The maximal nodes of the tree over [a, b) inside [s, e), in window order, into out[*n...]
 * (at most 2 log2(b - a) + 2). */
void sqz__calib_tree_pieces(int64_t a, int64_t b, int64_t s, int64_t e, sqz__calib_range *out, int *n);
/* --stats-partition replicate: the observer of all nw windows from this rank's pieces
 * mine[0..n_mine) (taken: freed or moved) and every other rank's, all-gathered and merged along
 * the tree on every rank. Collective. */
sqz_status sqz__calib_exchange(sqz_calib_observer **mine, const sqz__calib_range *ranges, int n_mine, int64_t nw,
                               const sqz_calib_observe_opts *o, sqz__calib_mem *mem, sqz_calib_observer **out);

/* Runs one window (x, win_floats floats) through block `layer` with hook(user) installed for the
 * pass; with tmp, on a copy there, so that x keeps the block's input. */
sqz_status sqz__calib_window(sqz_session *s, int32_t layer, float *x, float *tmp, size_t win_floats, int64_t ctx,
                             sqz_hook_fn hook, void *user);

/* Row panels of the Hessians of an owner-partitioned job (calib/panel.c). */
typedef struct sqz__calib_panel {
    int input;     /* index among the block's inputs */
    int rank;      /* the rank that forms it */
    int64_t a, b;  /* rows [a, b) of X^T X's upper triangle */
    double *h;     /* on its rank, until it leaves: (b - a, width) rows, row r is row a + r, columns
                      >= a + r accumulated; NULL elsewhere */
} sqz__calib_panel;
typedef struct sqz__calib_panels {
    sqz__calib_panel *p; /* every rank's panels, in the order dealt (the same on every rank) */
    int64_t n;
    int64_t dim[SQZ_CALIB_MAX_INPUTS];   /* the inputs' widths */
    double *whole[SQZ_CALIB_MAX_INPUTS]; /* the inputs this rank owns: their whole (n, n) Hessian,
                                            its panels' h pointing into it */
    double *dbuf; /* (XTX_CHUNK, dbuf_n) */
    int64_t dbuf_n;
} sqz__calib_panels;
/* Deals the panels of inputs of widths dim[0..n_inputs) to `size` ranks (the same on every rank)
 * and allocates this rank's (for an input it owns, owner[i] == rank, the whole Hessian at once,
 * which the other ranks' panels join); holds[i][r] is set when rank r holds a panel of input i. */
sqz_status sqz__calib_panels_assign(const int64_t *dim, const int *owner, int n_inputs, int rank, int size,
                                    sqz__calib_panels *ps, bool holds[][256]);
/* Adds x (n_tokens, n) of input `input`, one event, to this rank's panels of it. */
sqz_status sqz__calib_panels_add(sqz__calib_panels *ps, int input, const float *x, int64_t n_tokens, int64_t n);
/* Every rank's panels of `input` to rank root (freed here; sent one by one, straight
 * into place), where *xtx becomes the whole (n, n) matrix, upper triangle (malloc'd; NULL
 * elsewhere). Collective. */
sqz_status sqz__calib_panels_gather(sqz__calib_panels *ps, int input, int root, double **xtx, sqz__calib_mem *mem);
size_t sqz__calib_panels_bytes(const sqz__calib_panels *ps);
void sqz__calib_panels_free(sqz__calib_panels *ps);

/* --stats-partition owner (calib/owner.c): this rank holds the windows rank, rank + N, ... of
 * nw, in x (win_floats each, in that order); tmp (or NULL) is a window of scratch so that x
 * keeps the block's input. */
typedef struct sqz__calib_owner_job {
    sqz_session *s;
    int32_t layer;
    const sqz_calib_observe_opts *oo;
    float *x, *tmp;
    int64_t ctx, nw;
    size_t win_floats;
    sqz__calib_mem *mem;
    sqz_progress_fn progress;
    void *progress_user;
    int64_t *done, total;
    bool partitioned; /* leave each input's statistics on its owner (sqz_calib_block.partitioned) */
} sqz__calib_owner_job;
/* The statistics of the block over all nw windows, the same bits as one observer fed every
 * window in order (a plain run) on any number of ranks; every rank gets them all. Collective. */
sqz_status sqz__calib_owner_stats(const sqz__calib_owner_job *j, sqz_calib_block *stats);
/* SQZ_ERR_INVALID_ARG naming the rank when some rank's model (its header: tensors' names, types,
 * shapes, first bytes) or windows differ from rank 0's, or there are fewer windows than ranks.
 * Collective; nothing on one process. */
sqz_status sqz__calib_check_ranks(const sqz_model *m, const sqz_calib_windows *w);

#endif

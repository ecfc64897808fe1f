/*
 * calib/reduce.c - --stats-partition replicate: the statistics of a block from the observers of
 * every rank, the same bits on any number of ranks (see observe_internal.h): each rank observed a
 * contiguous range of
 * windows as the maximal nodes of the fixed tree inside its range ("pieces"); the pieces of
 * all ranks are exchanged (sqz/dist.h) and merged along the tree, so the additions are those
 * one process makes for the whole tree. Also the check, before any work, that every rank
 * runs the same model on the same windows.
 */
#include <stdlib.h>
#include <string.h>

#include "calib/observe_internal.h"
#include "calib/reduce_internal.h"
#include "sqz/dist.h"

void sqz__calib_mem_set(sqz__calib_mem *mem, size_t live) {
    mem->live = live;
    if (live > mem->peak) mem->peak = live;
}

void sqz__calib_tree_pieces(int64_t a, int64_t b, int64_t s, int64_t e, sqz__calib_range *out, int *n) {
    if (b <= s || a >= e || a >= b) return;
    if (s <= a && b <= e) {
        out[(*n)++] = (sqz__calib_range){a, b};
        return;
    }
    const int64_t m = sqz__calib_tree_split(a, b);
    sqz__calib_tree_pieces(a, m, s, e, out, n);
    sqz__calib_tree_pieces(m, b, s, e, out, n);
}

void sqz__calib_rank_windows(int64_t nw, int rank, int size, int64_t *s, int64_t *e) {
    *s = nw * rank / size;
    *e = nw * (rank + 1) / size;
}

typedef struct tree {
    sqz__calib_range *r;
    sqz_calib_observer **ob;
    int n;
    sqz__calib_mem *mem;
} tree;

/* The observer of tree node [a, b): a piece, or the merge of its children. */
static sqz_status combine(tree *t, int64_t a, int64_t b, sqz_calib_observer **out) {
    *out = NULL;
    for (int i = 0; i < t->n; i++)
        if (t->r[i].a == a && t->r[i].b == b) {
            *out = t->ob[i];
            t->ob[i] = NULL;
            SQZ_RETURN_IF(!*out, SQZ_ERR_INVALID_ARG, "calibration: windows [%lld, %lld) given twice", (long long)a,
                          (long long)b);
            return SQZ_OK;
        }
    SQZ_RETURN_IF(b - a < 2, SQZ_ERR_INVALID_ARG, "calibration: no rank observed window %lld", (long long)a);
    const int64_t m = sqz__calib_tree_split(a, b);
    sqz_calib_observer *l = NULL, *r = NULL;
    sqz_status st = combine(t, a, m, &l);
    if (st == SQZ_OK) st = combine(t, m, b, &r);
    if (st == SQZ_OK) {
        const size_t before = sqz__calib_observer_bytes(l) + sqz__calib_observer_bytes(r);
        st = sqz__calib_observer_merge(l, r);
        sqz__calib_mem_set(t->mem, t->mem->live - before + sqz__calib_observer_bytes(l)); /* r goes */
    }
    sqz_calib_observer_free(r);
    if (st != SQZ_OK) {
        sqz_calib_observer_free(l);
        return st;
    }
    *out = l;
    return SQZ_OK;
}

/* Appends [a, b) and the observer (input `only`, or all when < 0) of each of this rank's pieces. */
static sqz_status pack_pieces(sqz_calib_observer **mine, const sqz__calib_range *ranges, int n, int only, uint8_t **buf,
                              size_t *len, size_t *cap) {
    for (int i = 0; i < n; i++) {
        const int64_t ab[2] = {ranges[i].a, ranges[i].b};
        if (*len + sizeof ab > *cap) {
            uint8_t *q = sqz__realloc(*buf, *cap = (*len + sizeof ab) * 2 + 4096);
            if (!q) return SQZ_ERR_NOMEM;
            *buf = q;
        }
        memcpy(*buf + *len, ab, sizeof ab);
        *len += sizeof ab;
        SQZ_TRY(sqz__calib_observer_pack(mine[i], only, buf, len, cap));
    }
    return SQZ_OK;
}

/* The observer of all nw windows from the packed pieces of every rank in all[0..total). */
static sqz_status unpack_combine(const uint8_t *all, size_t total, int64_t nw, const sqz_calib_observe_opts *o,
                                 sqz__calib_mem *mem, sqz_calib_observer **out) {
    enum { MAX_PIECES = 256 };
    sqz__calib_range rr[MAX_PIECES];
    sqz_calib_observer *obs[MAX_PIECES] = {0};
    int n = 0;
    sqz__reader rd;
    sqz__reader_init(&rd, all, total);
    sqz_status st = SQZ_OK;
    while (st == SQZ_OK && sqz__reader_left(&rd) > 0) {
        const uint8_t *p = sqz__reader_bytes(&rd, 2 * sizeof(int64_t));
        if (!p || n == MAX_PIECES) {
            st = SQZ_ERROR(SQZ_ERR_FORMAT, "calibration: the ranks' statistics are damaged (piece header)");
            break;
        }
        memcpy(&rr[n].a, p, sizeof(int64_t));
        memcpy(&rr[n].b, p + sizeof(int64_t), sizeof(int64_t));
        st = sqz__calib_observer_unpack(&rd, o, &obs[n]);
        if (st == SQZ_OK) sqz__calib_mem_set(mem, mem->live + sqz__calib_observer_bytes(obs[n]));
        n++;
    }
    tree t = {rr, obs, n, mem};
    if (st == SQZ_OK) st = combine(&t, 0, nw, out);
    for (int i = 0; i < n; i++) {
        if (obs[i]) sqz__calib_mem_set(mem, mem->live - sqz__calib_observer_bytes(obs[i]));
        sqz_calib_observer_free(obs[i]);
    }
    return st;
}

/* Replicated: every rank gets every rank's pieces and merges the whole tree (an all-gather). */
static sqz_status exchange_replicate(sqz_calib_observer **mine, const sqz__calib_range *ranges, int n_mine,
                                     int64_t nw, const sqz_calib_observe_opts *o, sqz__calib_mem *mem,
                                     sqz_calib_observer **out) {
    const int size = sqz_dist_size();
    uint8_t *buf = NULL, *all = NULL;
    size_t len = 0, cap = 0, total = 0;
    sqz_status st = pack_pieces(mine, ranges, n_mine, -1, &buf, &len, &cap);
    sqz__calib_mem_set(mem, mem->live + cap);
    for (int i = 0; i < n_mine; i++) { /* their bytes travel now */
        sqz__calib_mem_set(mem, mem->live - sqz__calib_observer_bytes(mine[i]));
        sqz_calib_observer_free(mine[i]);
        mine[i] = NULL;
    }
    size_t *counts = sqz__calloc((size_t)size, sizeof *counts);
    if (st == SQZ_OK && !counts) st = SQZ_ERR_NOMEM;
    if (st == SQZ_OK) st = sqz_dist_allgatherv(buf, len, &all, counts);
    for (int r = 0; st == SQZ_OK && r < size; r++) total += counts[r];
    free(buf);
    sqz__calib_mem_set(mem, mem->live - cap + total);
    if (st == SQZ_OK) st = unpack_combine(all, total, nw, o, mem, out);
    free(all);
    sqz__calib_mem_set(mem, mem->live - total);
    free(counts);
    return st;
}

sqz_status sqz__calib_exchange(sqz_calib_observer **mine, const sqz__calib_range *ranges, int n_mine, int64_t nw,
                               const sqz_calib_observe_opts *o, sqz__calib_mem *mem, sqz_calib_observer **out) {
    *out = NULL;
    if (sqz_dist_size() == 1) { /* one piece, the whole tree */
        SQZ_RETURN_IF(n_mine != 1 || ranges[0].a != 0 || ranges[0].b != nw, SQZ_ERR_INVALID_ARG,
                      "calibration: one process observed windows [%lld, %lld) of %lld", (long long)ranges[0].a,
                      (long long)ranges[0].b, (long long)nw);
        *out = mine[0];
        mine[0] = NULL;
        return SQZ_OK;
    }
    return exchange_replicate(mine, ranges, n_mine, nw, o, mem, out);
}

/* ---- the same model and windows on every rank --------------------------------------------- */

static uint64_t fnv(uint64_t h, const void *p, size_t n) {
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

sqz_status sqz__calib_check_ranks(const sqz_model *m, const sqz_calib_windows *w) {
    const int size = sqz_dist_size();
    if (size == 1) return SQZ_OK;
    SQZ_RETURN_IF(w->n_windows < size, SQZ_ERR_INVALID_ARG,
                  "calibration: %d ranks need at least %d windows, not %lld (--calib-samples)", size, size,
                  (long long)w->n_windows);
    /* the header (hyperparameters, every tensor's name, type, shape and size, the first bytes of
     * its data) and the windows */
    uint64_t h = 1469598103934665603ull;
    h = fnv(h, &m->hp.n_layers, sizeof m->hp.n_layers);
    h = fnv(h, &m->hp.d_model, sizeof m->hp.d_model);
    for (int64_t i = 0; i < m->n_tensors; i++) {
        const sqz_tensor *t = &m->tensors[i];
        if (t->name) h = fnv(h, t->name, strlen(t->name));
        h = fnv(h, &t->dtype, sizeof t->dtype);
        h = fnv(h, t->shape, sizeof t->shape);
        h = fnv(h, &t->nbytes, sizeof t->nbytes);
        if (t->data) h = fnv(h, t->data, t->nbytes < 256 ? t->nbytes : 256);
    }
    uint64_t hw = fnv(1469598103934665603ull, w->tokens, (size_t)(w->n_windows * w->ctx) * sizeof(int32_t));
    uint64_t mine[2] = {h, hw};
    uint8_t *all = NULL;
    size_t *counts = sqz__calloc((size_t)size, sizeof *counts);
    if (!counts) return SQZ_ERR_NOMEM;
    sqz_status st = sqz_dist_allgatherv(mine, sizeof mine, &all, counts);
    for (int r = 1; st == SQZ_OK && r < size; r++) {
        uint64_t v[2], v0[2];
        memcpy(v0, all, sizeof v0);
        memcpy(v, all + (size_t)r * sizeof mine, sizeof v);
        if (v[0] != v0[0])
            st = SQZ_ERROR(SQZ_ERR_INVALID_ARG, "calibration: rank %d opened a different model than rank 0 "
                           "(checksum of the header %016llx, rank 0's %016llx)", r, (unsigned long long)v[0],
                           (unsigned long long)v0[0]);
        else if (v[1] != v0[1])
            st = SQZ_ERROR(SQZ_ERR_INVALID_ARG, "calibration: rank %d cut different calibration windows than rank 0 "
                           "(another text or options)", r);
    }
    free(all);
    free(counts);
    return st;
}

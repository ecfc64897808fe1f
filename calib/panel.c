/*
 * calib/panel.c - the Hessians of an owner-partitioned job (calib/owner.c) split into row
 * panels, so that the X^T X work, the largest part of calibration, is divided evenly between
 * the ranks even when one input (ffn_down's, 70% of a SmolLM2 block's Hessian bytes) dominates.
 *
 * Panel p of an input of width n is the rows [pP, min(n, (p+1)P)) of the upper triangle of
 * X^T X (P = SQZ__PANEL_ROWS, fixed: not a function of the number of ranks). The panels are dealt
 * to the ranks largest first, each to the rank with the least work so far. A panel's holder adds
 * every window's chunk of rows in window order with the plain observer's own arithmetic
 * (calib/observe.c: the same XTX_CHUNK-row chunks converted to double, the same panel update
 * sqz__xtx_panel), so its sums are the same bits whichever rank forms them, and the same as
 * a plain run's. At the end the panels of an input are gathered to the input's owner, who alone
 * holds the whole Hessian.
 */
#include <stdlib.h>
#include <string.h>

#include "calib/reduce_internal.h"
#include "sqz/dist.h"

/* Whether panel p's rows live inside this rank's whole matrix of its input (not its own block). */
static bool in_whole(const sqz__calib_panels *ps, const sqz__calib_panel *p) {
    return ps->whole[p->input] != NULL;
}

void sqz__calib_panels_free(sqz__calib_panels *ps) {
    for (int64_t k = 0; k < ps->n; k++)
        if (!in_whole(ps, &ps->p[k])) free(ps->p[k].h);
    for (int i = 0; i < SQZ_CALIB_MAX_INPUTS; i++) free(ps->whole[i]);
    free(ps->p);
    free(ps->dbuf);
    memset(ps, 0, sizeof *ps);
}

size_t sqz__calib_panels_bytes(const sqz__calib_panels *ps) {
    size_t b = 0;
    for (int64_t k = 0; k < ps->n; k++)
        if (ps->p[k].h && !in_whole(ps, &ps->p[k]))
            b += (size_t)(ps->p[k].b - ps->p[k].a) * (size_t)ps->dim[ps->p[k].input] * sizeof(double);
    for (int i = 0; i < SQZ_CALIB_MAX_INPUTS; i++)
        if (ps->whole[i]) b += (size_t)ps->dim[i] * (size_t)ps->dim[i] * sizeof(double);
    return b;
}

typedef struct unit {
    sqz__calib_panel p;
    double cost; /* the products its rows take */
} unit;

static int by_cost(const void *x, const void *y) {
    const unit *u = x, *v = y;
    if (u->cost != v->cost) return u->cost > v->cost ? -1 : 1;
    if (u->p.input != v->p.input) return u->p.input - v->p.input;
    return u->p.a < v->p.a ? -1 : 1;
}

/* This rank's storage for panel p (rank, input known). */
static sqz_status place(sqz__calib_panels *ps, sqz__calib_panel *p, bool owns_input) {
    const int64_t n = ps->dim[p->input];
    double **w = &ps->whole[p->input];
    if (owns_input && !*w && !(*w = sqz__calloc((size_t)n * (size_t)n, sizeof(double)))) return SQZ_ERR_NOMEM;
    if (owns_input) p->h = *w + p->a * n;
    else if (!(p->h = sqz__calloc((size_t)(p->b - p->a) * (size_t)n, sizeof(double)))) return SQZ_ERR_NOMEM;
    return SQZ_OK;
}

sqz_status sqz__calib_panels_assign(const int64_t *dim, const int *owner, int n_inputs, int rank, int size,
                                    sqz__calib_panels *ps, bool holds[][256]) {
    int64_t m = 0;
    for (int i = 0; i < n_inputs; i++) {
        ps->dim[i] = dim[i];
        m += (dim[i] + SQZ__PANEL_ROWS - 1) / SQZ__PANEL_ROWS;
    }
    unit *u = sqz__calloc((size_t)m, sizeof *u);
    double *load = sqz__calloc((size_t)size, sizeof *load);
    ps->p = sqz__calloc((size_t)m, sizeof *ps->p);
    sqz_status st = u && load && ps->p ? SQZ_OK : SQZ_ERR_NOMEM;
    for (int i = 0, k = 0; i < n_inputs && st == SQZ_OK; i++)
        for (int64_t a = 0; a < dim[i]; a += SQZ__PANEL_ROWS, k++) {
            const int64_t b = a + SQZ__PANEL_ROWS < dim[i] ? a + SQZ__PANEL_ROWS : dim[i];
            u[k] = (unit){{i, 0, a, b, NULL}, (double)(b - a) * (double)(dim[i] - a)};
        }
    if (st == SQZ_OK) qsort(u, (size_t)m, sizeof *u, by_cost);
    for (int64_t k = 0; k < m && st == SQZ_OK; k++, ps->n++) { /* each to the least loaded rank */
        int r = 0;
        for (int q = 1; q < size; q++)
            if (load[q] < load[r]) r = q;
        load[r] += u[k].cost;
        sqz__calib_panel *p = &ps->p[k];
        *p = u[k].p;
        p->rank = r;
        if (r < 256) holds[p->input][r] = true;
        if (r == rank) st = place(ps, p, owner[p->input] == rank);
    }
    free(u);
    free(load);
    return st;
}

sqz_status sqz__calib_panels_add(sqz__calib_panels *ps, int input, const float *x, int64_t n_tokens, int64_t n) {
    bool any = false;
    for (int64_t k = 0; k < ps->n; k++) any = any || (ps->p[k].input == input && ps->p[k].h);
    if (!any) return SQZ_OK;
    if (n > ps->dbuf_n) {
        free(ps->dbuf);
        if (!(ps->dbuf = sqz__malloc((size_t)XTX_CHUNK * (size_t)n * sizeof(double)))) {
            ps->dbuf_n = 0;
            return SQZ_ERR_NOMEM;
        }
        ps->dbuf_n = n;
    }
    for (int64_t t0 = 0; t0 < n_tokens; t0 += XTX_CHUNK) { /* the plain observer's chunks */
        const int64_t nr = n_tokens - t0 < XTX_CHUNK ? n_tokens - t0 : XTX_CHUNK;
        const float *src = x + t0 * n;
        for (int64_t i = 0; i < nr * n; i++) ps->dbuf[i] = (double)src[i];
        for (int64_t k = 0; k < ps->n; k++) {
            const sqz__calib_panel *p = &ps->p[k];
            if (p->input == input && p->h) sqz__xtx_panel(ps->dbuf, nr, n, p->a, p->b, p->h);
        }
    }
    return SQZ_OK;
}

sqz_status sqz__calib_panels_gather(sqz__calib_panels *ps, int input, int root, double **xtx, sqz__calib_mem *mem) {
    const int rank = sqz_dist_rank();
    const int64_t n = ps->dim[input];
    const size_t whole = (size_t)n * (size_t)n * sizeof(double);
    *xtx = NULL;
    double *h = rank == root ? ps->whole[input] : NULL;
    if (rank == root && !h) { /* it holds no panel of its input */
        if (!(h = ps->whole[input] = sqz__calloc((size_t)n * (size_t)n, sizeof(double)))) return SQZ_ERR_NOMEM;
        sqz__calib_mem_set(mem, mem->live + whole);
    }
    sqz_status st = SQZ_OK;
    for (int64_t k = 0; k < ps->n && st == SQZ_OK; k++) { /* in the order dealt, the same everywhere */
        sqz__calib_panel *p = &ps->p[k];
        if (p->input != input || p->rank == root) continue; /* the root's are in place */
        const size_t nb = (size_t)(p->b - p->a) * (size_t)n * sizeof(double);
        if (rank == root) st = sqz_dist_recv(h + p->a * n, nb, p->rank);
        if (rank != p->rank) continue;
        st = sqz_dist_send(p->h, nb, root);
        free(p->h); /* its bytes have travelled */
        p->h = NULL;
        sqz__calib_mem_set(mem, mem->live - nb);
    }
    if (rank != root) return st;
    for (int64_t k = 0; k < ps->n; k++) /* its panels are rows of the whole matrix, which leaves here */
        if (ps->p[k].input == input) ps->p[k].h = NULL;
    ps->whole[input] = NULL;
    if (st == SQZ_OK) *xtx = h;
    else {
        free(h);
        sqz__calib_mem_set(mem, mem->live - whole);
    }
    return st;
}

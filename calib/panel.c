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
 * sqz__calib_xtx_panel), so its sums are the same bits whichever rank forms them, and the same as
 * a plain run's. At the end the panels of an input are gathered to the input's owner, who alone
 * holds the whole Hessian.
 */
#include <stdlib.h>
#include <string.h>

#include "calib/reduce_internal.h"
#include "sqz/dist.h"

static bool in_whole(const sqz__calib_panels *ps, const sqz__calib_panel *p) {
    return ps->whole[p->input] != NULL;
}

void sqz__calib_panels_free(sqz__calib_panels *ps) {
    for (int k = 0; k < ps->n; k++)
        if (!in_whole(ps, &ps->p[k])) free(ps->p[k].h);
    for (int i = 0; i < SQZ_CALIB_MAX_INPUTS; i++) free(ps->whole[i]);
    free(ps->home);
    free(ps->p);
    free(ps->dbuf);
    memset(ps, 0, sizeof *ps);
}

size_t sqz__calib_panels_bytes(const sqz__calib_panels *ps) {
    size_t b = 0;
    for (int k = 0; k < ps->n; k++)
        if (ps->p[k].h && !in_whole(ps, &ps->p[k]))
            b += (size_t)(ps->p[k].b - ps->p[k].a) * (size_t)ps->p[k].n * sizeof(double);
    for (int k = 0; k < ps->n; k++) /* each whole matrix once: its first panel here */
        if (in_whole(ps, &ps->p[k])) {
            bool first = true;
            for (int q = 0; q < k; q++) first = first && ps->p[q].input != ps->p[k].input;
            if (first) b += (size_t)ps->p[k].n * (size_t)ps->p[k].n * sizeof(double);
        }
    return b;
}

typedef struct unit {
    int input;
    int64_t a, b, n;
    double cost;
} unit;

static int by_cost(const void *x, const void *y) {
    const unit *u = x, *v = y;
    if (u->cost != v->cost) return u->cost > v->cost ? -1 : 1;
    if (u->input != v->input) return u->input - v->input;
    return u->a < v->a ? -1 : 1;
}

sqz_status sqz__calib_panels_assign(const int64_t *dim, const int *owner, int n_inputs, int rank, int size,
                                    sqz__calib_panels *ps, bool holds[][256]) {
    int64_t total = 0;
    for (int i = 0; i < n_inputs; i++) total += (dim[i] + SQZ__PANEL_ROWS - 1) / SQZ__PANEL_ROWS;
    unit *u = sqz__calloc((size_t)total, sizeof *u);
    double *load = sqz__calloc((size_t)size, sizeof *load);
    if (!u || !load) {
        free(u);
        free(load);
        return SQZ_ERR_NOMEM;
    }
    int64_t m = 0;
    for (int i = 0; i < n_inputs; i++)
        for (int64_t a = 0; a < dim[i]; a += SQZ__PANEL_ROWS) {
            const int64_t b = a + SQZ__PANEL_ROWS < dim[i] ? a + SQZ__PANEL_ROWS : dim[i];
            u[m++] = (unit){i, a, b, dim[i], (double)(b - a) * (double)(dim[i] - a)};
        }
    qsort(u, (size_t)m, sizeof *u, by_cost);
    sqz_status st = SQZ_OK;
    if (!(ps->home = sqz__calloc((size_t)m, sizeof *ps->home))) st = SQZ_ERR_NOMEM;
    ps->n_home = m;
    for (int64_t k = 0; k < m && st == SQZ_OK; k++) {
        int r = 0;
        for (int q = 1; q < size; q++)
            if (load[q] < load[r]) r = q;
        load[r] += u[k].cost;
        if (r < 256) holds[u[k].input][r] = true;
        ps->home[k] = (sqz__calib_panel){u[k].input, u[k].a, u[k].b, r, NULL};
        if (r != rank) continue;
        if (ps->n % 16 == 0) {
            sqz__calib_panel *np = sqz__realloc(ps->p, (size_t)(ps->n + 16) * sizeof *np);
            if (!np) {
                st = SQZ_ERR_NOMEM;
                break;
            }
            ps->p = np;
        }
        sqz__calib_panel *p = &ps->p[ps->n++];
        *p = (sqz__calib_panel){u[k].input, u[k].a, u[k].b, u[k].n, NULL};
        const int i = p->input;
        if (owner[i] == rank && !ps->whole[i] && !(ps->whole[i] = sqz__calloc((size_t)p->n * (size_t)p->n, 8)))
            st = SQZ_ERR_NOMEM;
        else if (owner[i] == rank) p->h = ps->whole[i] + p->a * p->n;
        else if (!(p->h = sqz__calloc((size_t)(p->b - p->a) * (size_t)p->n, sizeof(double)))) st = SQZ_ERR_NOMEM;
    }
    free(u);
    free(load);
    return st;
}

sqz_status sqz__calib_panels_add(sqz__calib_panels *ps, int input, const float *x, int64_t n_tokens, int64_t n) {
    bool any = false;
    for (int k = 0; k < ps->n; k++) any = any || ps->p[k].input == input;
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
        for (int k = 0; k < ps->n; k++) {
            const sqz__calib_panel *p = &ps->p[k];
            if (p->input != input) continue;
            sqz__calib_xtx_panel(ps->dbuf, nr, n, p->a, p->b, p->h);
        }
    }
    return SQZ_OK;
}

sqz_status sqz__calib_panels_gather(sqz__calib_panels *ps, int input, int64_t n, int root, double **xtx,
                                    sqz__calib_mem *mem) {
    const int rank = sqz_dist_rank();
    const size_t whole = (size_t)n * (size_t)n * sizeof(double);
    *xtx = NULL;
    double *h = rank == root ? ps->whole[input] : NULL;
    if (rank == root && !h) { /* it holds no panel of its input */
        if (!(h = ps->whole[input] = sqz__calloc((size_t)n * (size_t)n, sizeof(double)))) return SQZ_ERR_NOMEM;
        sqz__calib_mem_set(mem, mem->live + whole);
    }
    sqz_status st = SQZ_OK;
    for (int64_t k = 0; k < ps->n_home && st == SQZ_OK; k++) { /* in the order dealt, the same everywhere */
        const sqz__calib_panel *u = &ps->home[k];
        const int holder = (int)u->n;
        if (u->input != input || holder == root) continue; /* the root's are in place */
        const size_t nb = (size_t)(u->b - u->a) * (size_t)n * sizeof(double);
        if (rank == root) st = sqz_dist_recv(h + u->a * n, nb, holder);
        if (rank != holder) continue;
        for (int q = 0; q < ps->n; q++) {
            sqz__calib_panel *p = &ps->p[q];
            if (p->input != input || p->a != u->a) continue;
            st = sqz_dist_send(p->h, nb, root);
            free(p->h); /* its bytes have travelled */
            p->h = NULL;
            sqz__calib_mem_set(mem, mem->live - nb);
        }
    }
    if (rank != root) return st;
    for (int q = 0; q < ps->n; q++) /* its panels are rows of the whole matrix, which leaves here */
        if (ps->p[q].input == input) ps->p[q].h = NULL;
    ps->whole[input] = NULL;
    if (st == SQZ_OK) *xtx = h;
    else {
        free(h);
        sqz__calib_mem_set(mem, mem->live - whole);
    }
    return st;
}

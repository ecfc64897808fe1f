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
    for (int64_t k = 0; k < m && st == SQZ_OK; k++) {
        int r = 0;
        for (int q = 1; q < size; q++)
            if (load[q] < load[r]) r = q;
        load[r] += u[k].cost;
        if (r < 256) holds[u[k].input][r] = true;
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

/* Rows of `input` in this rank's panels. */
static int64_t rows_here(const sqz__calib_panels *ps, int input) {
    int64_t r = 0;
    for (int k = 0; k < ps->n; k++)
        if (ps->p[k].input == input) r += ps->p[k].b - ps->p[k].a;
    return r;
}

sqz_status sqz__calib_panels_gather(sqz__calib_panels *ps, int input, int64_t n, int root, double **xtx,
                                    sqz__calib_mem *mem) {
    const int size = sqz_dist_size();
    const bool root_here = sqz_dist_rank() == root;
    *xtx = NULL;
    /* this rank's panels of the input, as [a][b][rows...] (the root copies its own in place) */
    size_t len = 0;
    for (int k = 0; k < ps->n && !root_here; k++)
        if (ps->p[k].input == input) len += 2 * sizeof(int64_t) + (size_t)(ps->p[k].b - ps->p[k].a) * (size_t)n * 8;
    uint8_t *buf = sqz__malloc(len ? len : 1), *q = buf;
    if (!buf) return SQZ_ERR_NOMEM;
    size_t freed = 0;
    for (int k = 0; k < ps->n && !root_here; k++) {
        sqz__calib_panel *p = &ps->p[k];
        if (p->input != input) continue;
        const size_t nb = (size_t)(p->b - p->a) * (size_t)n * sizeof(double);
        memcpy(q, &p->a, sizeof p->a);
        memcpy(q + sizeof p->a, &p->b, sizeof p->b);
        memcpy(q + 2 * sizeof p->a, p->h, nb);
        q += 2 * sizeof p->a + nb;
        free(p->h); /* its bytes travel now */
        p->h = NULL;
        freed += nb;
    }
    sqz__calib_mem_set(mem, mem->live - freed + len);
    size_t *counts = sqz__calloc((size_t)size, sizeof *counts);
    uint8_t *all = NULL;
    sqz_status st = counts ? sqz_dist_gatherv(buf, len, root, &all, counts) : SQZ_ERR_NOMEM;
    free(buf);
    sqz__calib_mem_set(mem, mem->live - len);
    if (st == SQZ_OK && sqz_dist_rank() == root) {
        size_t total = 0;
        for (int r = 0; r < size; r++) total += counts[r];
        /* the root owns the input: its whole matrix holds its own panels already */
        double *h = ps->whole[input];
        if (!h) { /* it holds no panel of its input */
            if (!(h = ps->whole[input] = sqz__calloc((size_t)n * (size_t)n, sizeof(double)))) st = SQZ_ERR_NOMEM;
            else sqz__calib_mem_set(mem, mem->live + (size_t)n * (size_t)n * sizeof(double));
        }
        sqz__calib_mem_set(mem, mem->live + total);
        sqz__reader rd;
        sqz__reader_init(&rd, all, total);
        int64_t rows = 0;
        while (st == SQZ_OK && sqz__reader_left(&rd) > 0) {
            int64_t ab[2];
            const uint8_t *hd = sqz__reader_bytes(&rd, sizeof ab);
            if (hd) memcpy(ab, hd, sizeof ab);
            const uint8_t *body = hd && ab[0] >= 0 && ab[0] < ab[1] && ab[1] <= n
                                      ? sqz__reader_bytes(&rd, (size_t)(ab[1] - ab[0]) * (size_t)n * sizeof(double))
                                      : NULL;
            if (!body) {
                st = SQZ_ERROR(SQZ_ERR_FORMAT, "calibration: a rank's Hessian panels are damaged");
                break;
            }
            memcpy(h + ab[0] * n, body, (size_t)(ab[1] - ab[0]) * (size_t)n * sizeof(double));
            rows += ab[1] - ab[0];
        }
        rows += rows_here(ps, input);
        for (int k = 0; k < ps->n; k++) /* its panels are the whole matrix's rows, which leaves here */
            if (ps->p[k].input == input) ps->p[k].h = NULL;
        ps->whole[input] = NULL;
        if (st == SQZ_OK && rows != n)
            st = SQZ_ERROR(SQZ_ERR_FORMAT, "calibration: %lld of %lld Hessian rows arrived", (long long)rows,
                           (long long)n);
        sqz__calib_mem_set(mem, mem->live - total);
        if (st == SQZ_OK) *xtx = h;
        else {
            free(h);
            sqz__calib_mem_set(mem, mem->live - (size_t)n * (size_t)n * sizeof(double));
        }
    }
    free(all);
    free(counts);
    return st;
}

/*
 * quant/chol_tiles.c - GPTQ's factor on a device backend, formed in tiles (quant/chol_tiles.h):
 * U upper with U^T U = H^-1, kernels/cpu/chol.c's definition (J H J = L L^T, U = J L^-1 J),
 * from f64 tiles of T x T by the backend's tile slots (sqz/backend.h SQZ_OP_TILES).
 *
 * The matrix lives on the host (the caller's h, read and written in reversed order: J H J); a tile is a
 * contiguous (rows x cols) buffer in device memory, brought in through a cache of device
 * buffers (least recently used out; a tile written on the device goes back to the host when it
 * leaves). Without a budget every tile of the lower triangle stays in device memory (each comes
 * in once, goes out once); under --gpu-mem the cache holds what the budget allows, at least
 * three tiles. The tile ops receive the same operands in buffers of the same shapes either way,
 * so the factor's bits do not depend on the budget: a capped run factors exactly as an uncapped
 * one (the point of --gpu-mem being a cap, not a different algorithm).
 *
 *   Cholesky, right-looking: for k: L_kk = potrf(A_kk); L_ik = A_ik L_kk^-T (i > k);
 *                            A_ij -= L_ik L_jk^T (j > k, i >= j)
 *   inverse, by columns j:   X_jj = L_jj^-1 (a solve against I);
 *                            X_ij = -L_ii^-1 sum_{k=j}^{i-1} L_ik X_kj (i > j, ascending),
 *                            in place: X_ij replaces L_ij, which no later step reads
 * X's tiles land in h reversed, which is U = J X J; the host zeroes U's strict lower triangle.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/backend_impl.h"
#include "core/internal.h"
#include "quant/chol_tiles.h"

static int64_t tile_size = SQZ__CHOL_TILE;

void sqz__chol_tiles_set_size(int64_t t) { tile_size = t > 0 ? t : SQZ__CHOL_TILE; }
int64_t sqz__chol_tiles_size(void) { return tile_size; }

typedef struct slot {
    int64_t i, j; /* the tile held (i < 0: none) */
    double *dev;  /* T x T doubles */
    bool dirty;
    uint64_t used;
} slot;

typedef struct tiles {
    sqz_backend *be;
    double *h;       /* host, (n, n) row-major: J H J, then L, then X */
    int64_t n, t, nt;
    slot *s;
    int n_slots;
    double *tmp[2];  /* device temporaries (a sum, an identity), T x T each */
    double *stage;   /* host, T x T */
    bool stage_pinned;
    uint64_t clock;
    int64_t loads, stores; /* tiles moved in / out */
} tiles;

static int64_t dim(const tiles *T, int64_t i) { return i < T->nt - 1 ? T->t : T->n - (T->nt - 1) * T->t; }

static sqz_status wait_for(sqz_backend *be) { return be->ops->synchronize ? be->ops->synchronize(be->ctx) : SQZ_OK; }

/* Tile (i, j) of J H J (of its factors) between the host matrix and the stage (contiguous rows x
 * cols): its element (a, b) is the host's (n-1 - (iT + a), n-1 - (jT + b)), so the host never
 * reverses the matrix itself (two passes over n^2 doubles saved; the tiles' contents are the
 * same), and the inverse lands in h already reversed: U = J X J. */
static void pack(const tiles *T, int64_t i, int64_t j, bool to_stage) {
    const int64_t r = dim(T, i), c = dim(T, j), n = T->n;
    for (int64_t a = 0; a < r; a++) {
        double *h = T->h + (n - 1 - (i * T->t + a)) * n + (n - 1 - j * T->t), *s = T->stage + a * c;
        if (to_stage)
            for (int64_t b = 0; b < c; b++) s[b] = h[-b];
        else
            for (int64_t b = 0; b < c; b++) h[-b] = s[b];
    }
}

static size_t tile_bytes(const tiles *T, int64_t i, int64_t j) {
    return (size_t)dim(T, i) * (size_t)dim(T, j) * sizeof(double);
}

static sqz_status store(tiles *T, slot *s) {
    if (!s->dirty) return SQZ_OK;
    SQZ_TRY(T->be->ops->download(T->be->ctx, T->stage, s->dev, tile_bytes(T, s->i, s->j)));
    SQZ_TRY(wait_for(T->be));
    pack(T, s->i, s->j, false);
    s->dirty = false;
    T->stores++;
    return SQZ_OK;
}

/* The slot holding tile (i, j): found, or the least recently used one emptied (stored if written)
 * and, when load, filled from the host. */
static sqz_status get(tiles *T, int64_t i, int64_t j, bool load, slot **out) {
    slot *lru = NULL;
    for (int k = 0; k < T->n_slots; k++) {
        slot *s = &T->s[k];
        if (s->i == i && s->j == j) {
            s->used = ++T->clock;
            *out = s;
            return SQZ_OK;
        }
        if (!lru || s->i < 0 || (lru->i >= 0 && s->used < lru->used)) lru = s;
    }
    if (lru->i >= 0) SQZ_TRY(store(T, lru));
    lru->i = i;
    lru->j = j;
    lru->used = ++T->clock;
    lru->dirty = false;
    if (load) {
        pack(T, i, j, true);
        sqz_status st = T->be->ops->upload(T->be->ctx, lru->dev, T->stage, tile_bytes(T, i, j));
        if (st == SQZ_OK) st = wait_for(T->be); /* the stage is reused by the next move */
        if (st != SQZ_OK) {
            lru->i = -1;
            return st;
        }
        T->loads++;
    }
    *out = lru;
    return SQZ_OK;
}

/* Device pointers of tiles (i, j) (loaded), marked written when `write`. */
static sqz_status dev(tiles *T, int64_t i, int64_t j, bool write, double **p) {
    slot *s;
    SQZ_TRY(get(T, i, j, true, &s));
    s->dirty = s->dirty || write;
    *p = s->dev;
    return SQZ_OK;
}

/* Tile (i, j) becomes the contents of temporary k (their buffers trade places). */
static sqz_status take_tmp(tiles *T, int64_t i, int64_t j, int k) {
    slot *s;
    SQZ_TRY(get(T, i, j, false, &s));
    double *d = s->dev;
    s->dev = T->tmp[k];
    T->tmp[k] = d;
    s->dirty = true;
    return SQZ_OK;
}

static sqz_status potrf_step(tiles *T, int64_t k) {
    sqz_backend *be = T->be;
    const int64_t rk = dim(T, k);
    double *akk;
    SQZ_TRY(dev(T, k, k, true, &akk));
    SQZ_TRY(be->ops->dpotrf(be->ctx, akk, rk, rk));
    for (int64_t i = k + 1; i < T->nt; i++) {
        double *aik, *lkk;
        SQZ_TRY(dev(T, i, k, true, &aik));
        SQZ_TRY(dev(T, k, k, false, &lkk));
        const sqz_dtrsm_args a = {.right = true, .trans = true, .m = dim(T, i), .n = rk, .alpha = 1.0, .a = lkk,
                                  .lda = rk, .b = aik, .ldb = rk};
        SQZ_TRY(be->ops->dtrsm(be->ctx, &a));
    }
    for (int64_t j = k + 1; j < T->nt; j++)
        for (int64_t i = j; i < T->nt; i++) {
            double *aij, *lik, *ljk;
            SQZ_TRY(dev(T, i, j, true, &aij));
            SQZ_TRY(dev(T, i, k, false, &lik));
            SQZ_TRY(dev(T, j, k, false, &ljk));
            const sqz_dgemm_args a = {.trans_b = true, .m = dim(T, i), .n = dim(T, j), .k = rk, .alpha = -1.0,
                                      .a = lik, .lda = rk, .b = ljk, .ldb = rk, .beta = 1.0, .c = aij,
                                      .ldc = dim(T, j)};
            SQZ_TRY(be->ops->dgemm(be->ctx, &a));
        }
    return SQZ_OK;
}

/* X_jj = L_jj^-1: L_jj against an identity uploaded into temporary 1. */
static sqz_status inv_diag(tiles *T, int64_t j) {
    sqz_backend *be = T->be;
    const int64_t rj = dim(T, j);
    memset(T->stage, 0, (size_t)(rj * rj) * sizeof(double));
    for (int64_t a = 0; a < rj; a++) T->stage[a * rj + a] = 1.0;
    SQZ_TRY(be->ops->upload(be->ctx, T->tmp[1], T->stage, (size_t)(rj * rj) * sizeof(double)));
    SQZ_TRY(wait_for(be));
    double *ljj;
    SQZ_TRY(dev(T, j, j, false, &ljj));
    const sqz_dtrsm_args a = {.m = rj, .n = rj, .alpha = 1.0, .a = ljj, .lda = rj, .b = T->tmp[1], .ldb = rj};
    SQZ_TRY(be->ops->dtrsm(be->ctx, &a));
    return take_tmp(T, j, j, 1);
}

/* X_ij = -L_ii^-1 sum_{k=j}^{i-1} L_ik X_kj, the sum in temporary 0. */
static sqz_status inv_off(tiles *T, int64_t i, int64_t j) {
    sqz_backend *be = T->be;
    const int64_t ri = dim(T, i), rj = dim(T, j);
    for (int64_t k = j; k < i; k++) {
        double *lik, *xkj;
        SQZ_TRY(dev(T, i, k, false, &lik));
        SQZ_TRY(dev(T, k, j, false, &xkj));
        const sqz_dgemm_args a = {.m = ri, .n = rj, .k = dim(T, k), .alpha = 1.0, .a = lik, .lda = dim(T, k),
                                  .b = xkj, .ldb = rj, .beta = k == j ? 0.0 : 1.0, .c = T->tmp[0], .ldc = rj};
        SQZ_TRY(be->ops->dgemm(be->ctx, &a));
    }
    double *lii;
    SQZ_TRY(dev(T, i, i, false, &lii));
    const sqz_dtrsm_args a = {.m = ri, .n = rj, .alpha = -1.0, .a = lii, .lda = ri, .b = T->tmp[0], .ldb = rj};
    SQZ_TRY(be->ops->dtrsm(be->ctx, &a));
    return take_tmp(T, i, j, 0);
}

static void tiles_free(tiles *T) {
    sqz_backend *be = T->be;
    for (int k = 0; T->s && k < T->n_slots; k++)
        if (be->ops->free) be->ops->free(be->ctx, T->s[k].dev);
    for (int k = 0; k < 2; k++)
        if (be->ops->free) be->ops->free(be->ctx, T->tmp[k]);
    if (T->stage_pinned) sqz_backend_unpin(be, T->stage);
    free(T->stage);
    free(T->s);
}

/* The slots: every tile of the lower triangle without a budget, else what the budget holds beside
 * the temporaries (two; one for a single tile) and a quarter tile left for the library's workspace
 * (cuSOLVER's potrf; usually inside the scratch the Hessians grew already): at least three, or all. */
static sqz_status tiles_init(tiles *T, sqz_backend *be, double *h, int64_t n, size_t budget) {
    memset(T, 0, sizeof *T);
    T->be = be;
    T->h = h;
    T->n = n;
    T->t = tile_size < n ? tile_size : n;
    T->nt = (n + T->t - 1) / T->t;
    const size_t tb = (size_t)T->t * (size_t)T->t * sizeof(double);
    const int64_t all = T->nt * (T->nt + 1) / 2, n_tmp = T->nt > 1 ? 2 : 1;
    int64_t want = all;
    if (budget) {
        const size_t reserve = tb / 4;
        const int64_t fit = (budget > reserve ? (int64_t)((budget - reserve) / tb) : 0) - n_tmp;
        const int64_t need = all < 3 ? all : 3;
        SQZ_RETURN_IF(fit < need, SQZ_ERR_NOMEM,
                      "the factor of %lld needs %.1f MB of device memory for its tiles; --gpu-mem leaves %.1f MB",
                      (long long)n, (double)((size_t)(need + n_tmp) * tb + reserve) / 1e6, (double)budget / 1e6);
        want = fit < all ? fit : all;
    }
    T->n_slots = (int)want;
    if (!(T->s = sqz__calloc((size_t)want, sizeof *T->s)) || !(T->stage = sqz__malloc(tb))) return SQZ_ERR_NOMEM;
    T->stage_pinned = sqz_backend_pin(be, T->stage, tb, 0);
    for (int k = 2 - (int)n_tmp; k < 2; k++)
        if (!(T->tmp[k] = be->ops->alloc(be->ctx, tb))) goto nomem;
    for (int k = 0; k < T->n_slots; k++) {
        T->s[k].i = -1;
        if (!(T->s[k].dev = be->ops->alloc(be->ctx, tb))) goto nomem;
    }
    return SQZ_OK;
nomem:
    sqz__error_prefix("device memory for the tiles of a %lld-wide factor", (long long)n);
    return SQZ_ERR_NOMEM;
}

sqz_status sqz__chol_tiles(sqz_backend *be, double *h, int64_t n, size_t budget, sqz__chol_tiles_stats *stats) {
    SQZ_RETURN_IF(!be || !sqz_backend_supports(be, SQZ_OP_TILES, SQZ_DTYPE_F32), SQZ_ERR_UNSUPPORTED,
                  "backend %s has no tile slots (dgemm, dtrsm, dpotrf)", be ? be->ops->name : "(none)");
    SQZ_RETURN_IF(n < 1, SQZ_ERR_INVALID_ARG, "a factor of width %lld", (long long)n);
    tiles T;
    sqz_status s = tiles_init(&T, be, h, n, budget);
    for (int64_t k = 0; s == SQZ_OK && k < T.nt; k++) s = potrf_step(&T, k);
    for (int64_t j = 0; s == SQZ_OK && j < T.nt; j++) {
        s = inv_diag(&T, j);
        for (int64_t i = j + 1; s == SQZ_OK && i < T.nt; i++) s = inv_off(&T, i, j);
    }
    for (int k = 0; s == SQZ_OK && k < T.n_slots; k++)
        if (T.s[k].i >= 0) s = store(&T, &T.s[k]);
    if (stats) *stats = (sqz__chol_tiles_stats){.tiles = T.nt, .slots = T.n_slots, .loads = T.loads, .stores = T.stores};
    tiles_free(&T);
    SQZ_TRY(s);
    /* h holds U = J X J in its upper triangle (X's tiles landed reversed); below it, the Hessian */
    for (int64_t i = 0; i < n; i++) {
        memset(h + i * n, 0, (size_t)i * sizeof(double));
        for (int64_t j = i; j < n; j++)
            SQZ_RETURN_IF(!isfinite(h[i * n + j]), SQZ_ERR_NUMERIC, "inverse Hessian factor is not finite");
    }
    return SQZ_OK;
}

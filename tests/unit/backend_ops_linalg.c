/* tests/unit/backend_ops_linalg.c - test_backend_ops's rows for the calibration's f64 slots: the
 * Hessian sum (xtx), GPTQ's factor (chol_inv_upper), the tile slots (dgemm, dtrsm, dpotrf) and the
 * observers' statistics (colstats, cosine). References in double, by textbook loops written here. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/backend_impl.h"
#include "backend_ops.h"

static double *rand_d(int64_t n) {
    double *p = bo_malloc((size_t)n * sizeof(double));
    for (int64_t i = 0; i < n; i++) p[i] = bo_rndf();
    return p;
}

/* ---- xtx: beta 0 and 1; the strictly lower triangle is not written ---- */

/* A row panel: rows [R0, K) of the upper triangle (beta 1 onto h0), row R0 + i at h + i * LDH from
 * column R0 on; what lies left of the diagonal and past column K stays. */
static void xtx_panel(const sqz_backend *b, bo_res *res, const float *x, int64_t m, int64_t k) {
    enum { R0 = SQZ_XTX_PANEL_ALIGN };
    const int64_t rows = k - R0, ldh = rows + 2;
    double *h0 = rand_d(rows * ldh), *h = bo_malloc((size_t)(rows * ldh) * sizeof(double));
    bo_dev d;
    bo_dev_begin(&d, b, res);
    const float *dx = bo_put(&d, x, (size_t)(m * k) * sizeof(float));
    double *dh = bo_put(&d, h0, (size_t)(rows * ldh) * sizeof(double));
    const sqz_xtx_args a = {.m = m, .k = k, .x = dx, .h = dh, .beta = 1, .r0 = R0, .r1 = k, .ldh = ldh};
    if (bo_dev_ok(&d)) bo_call(&d, "xtx (panel)", b->ops->xtx(b->ctx, &a));
    bo_get(&d, h, dh, (size_t)(rows * ldh) * sizeof(double));
    for (int64_t i = 0; bo_dev_ok(&d) && i < rows; i++) {
        for (int64_t o = 0; o < ldh; o++) {
            const int64_t row = R0 + i, col = R0 + o;
            if (col < row || col >= k) {
                bo_check(res, "h panel (untouched)", i * ldh + o, h[i * ldh + o], h0[i * ldh + o], 0);
                continue;
            }
            double ref = h0[i * ldh + o], mag = fabs(ref);
            for (int64_t t = 0; t < m; t++) {
                ref += (double)x[t * k + row] * x[t * k + col];
                mag += fabs((double)x[t * k + row] * x[t * k + col]);
            }
            bo_check(res, "h panel", i * ldh + o, h[i * ldh + o], ref, 1e-13 * mag);
        }
    }
    bo_dev_end(&d);
    free(h0), free(h);
}

void bo_run_xtx(const bo_row *r, const sqz_backend *b, bo_res *res) {
    (void)r;
    enum { M = 300, K = 150 };
    float *x = bo_rand(M * K, 1.0f);
    double *h0 = rand_d(K * K), *h = bo_malloc(K * K * sizeof(double));
    for (int beta = 0; beta < 2 && !res->fail; beta++) {
        bo_dev d;
        bo_dev_begin(&d, b, res);
        const float *dx = bo_put(&d, x, M * K * sizeof(float));
        double *dh = bo_put(&d, h0, K * K * sizeof(double));
        const sqz_xtx_args a = {.m = M, .k = K, .x = dx, .h = dh, .beta = beta};
        if (bo_dev_ok(&d)) bo_call(&d, "xtx", b->ops->xtx(b->ctx, &a));
        bo_get(&d, h, dh, K * K * sizeof(double));
        for (int64_t i = 0; bo_dev_ok(&d) && i < K; i++) {
            for (int64_t j = 0; j < K; j++) {
                if (j < i) {
                    bo_check(res, "h lower", i * K + j, h[i * K + j], h0[i * K + j], 0);
                    continue;
                }
                double ref = beta ? h0[i * K + j] : 0, mag = fabs(ref);
                for (int64_t t = 0; t < M; t++) {
                    ref += (double)x[t * K + i] * x[t * K + j];
                    mag += fabs((double)x[t * K + i] * x[t * K + j]);
                }
                bo_check(res, beta ? "h(beta 1)" : "h", i * K + j, h[i * K + j], ref, 1e-13 * mag);
            }
        }
        bo_dev_end(&d);
    }
    if (!res->fail) xtx_panel(b, res, x, M, K);
    free(x), free(h0), free(h);
}

/* ---- the factor: U upper, U^T U = H^-1 ---- */

/* In place: a (n, n) SPD becomes its lower Cholesky factor (upper part left as is). */
static void cholesky_lower(double *a, int64_t n) {
    for (int64_t j = 0; j < n; j++) {
        double s = a[j * n + j];
        for (int64_t p = 0; p < j; p++) s -= a[j * n + p] * a[j * n + p];
        a[j * n + j] = sqrt(s);
        for (int64_t i = j + 1; i < n; i++) {
            double t = a[i * n + j];
            for (int64_t p = 0; p < j; p++) t -= a[i * n + p] * a[j * n + p];
            a[i * n + j] = t / a[j * n + j];
        }
    }
}

/* inv = a^-1 by Gauss-Jordan with partial pivoting (a is destroyed). */
static void invert(double *a, double *inv, int64_t n) {
    for (int64_t i = 0; i < n * n; i++) inv[i] = (i / n == i % n);
    for (int64_t c = 0; c < n; c++) {
        int64_t p = c;
        for (int64_t i = c + 1; i < n; i++) if (fabs(a[i * n + c]) > fabs(a[p * n + c])) p = i;
        for (int64_t j = 0; j < n; j++) {
            double t = a[c * n + j]; a[c * n + j] = a[p * n + j]; a[p * n + j] = t;
            t = inv[c * n + j]; inv[c * n + j] = inv[p * n + j]; inv[p * n + j] = t;
        }
        const double piv = a[c * n + c];
        for (int64_t j = 0; j < n; j++) a[c * n + j] /= piv, inv[c * n + j] /= piv;
        for (int64_t i = 0; i < n; i++) {
            if (i == c) continue;
            const double f = a[i * n + c];
            for (int64_t j = 0; j < n; j++) a[i * n + j] -= f * a[c * n + j], inv[i * n + j] -= f * inv[c * n + j];
        }
    }
}

void bo_run_chol(const bo_row *r, const sqz_backend *b, bo_res *res) {
    (void)r;
    enum { N = 40, M = 80 };
    float *x = bo_rand(M * N, 1.0f);
    double *hm = bo_malloc(N * N * sizeof(double)), *tmp = bo_malloc(N * N * sizeof(double));
    double *u = bo_malloc(N * N * sizeof(double)), *got = bo_malloc(N * N * sizeof(double));
    for (int64_t i = 0; i < N; i++) {
        for (int64_t j = 0; j < N; j++) {
            double s = 0;
            for (int64_t t = 0; t < M; t++) s += (double)x[t * N + i] * x[t * N + j];
            hm[i * N + j] = s / M + (i == j ? 0.1 : 0);
        }
    }
    memcpy(tmp, hm, N * N * sizeof(double));
    invert(tmp, u, N); /* u = H^-1, then its lower factor L: U = L^T */
    cholesky_lower(u, N);
    double umax = 0;
    for (int64_t i = 0; i < N; i++) for (int64_t j = 0; j <= i; j++) umax = fmax(umax, fabs(u[i * N + j]));
    bo_dev d;
    bo_dev_begin(&d, b, res);
    double *dh = bo_put(&d, hm, N * N * sizeof(double));
    if (bo_dev_ok(&d)) bo_call(&d, "chol_inv_upper", b->ops->chol_inv_upper(b->ctx, dh, N));
    bo_get(&d, got, dh, N * N * sizeof(double));
    for (int64_t i = 0; bo_dev_ok(&d) && i < N; i++) {
        for (int64_t j = 0; j < N; j++) {
            if (j < i) bo_check(res, "U lower", i * N + j, got[i * N + j], 0.0, 0);
            else bo_check(res, "U", i * N + j, got[i * N + j], u[j * N + i], 1e-10 * umax);
        }
    }
    bo_dev_end(&d);
    free(x), free(hm), free(tmp), free(u), free(got);
}

/* ---- the tile slots ---- */

static void tiles_dgemm(const sqz_backend *b, bo_res *res) {
    enum { M = 9, N = 11, K = 13, PAD = 2 };
    for (int tr = 0; tr < 4 && !res->fail; tr++) {
        const bool ta = tr & 1, tb = tr & 2;
        const int64_t lda = (ta ? M : K) + PAD, ldb = (tb ? K : N) + PAD, ldc = N + PAD;
        double *a = rand_d((ta ? K : M) * lda), *bm = rand_d((tb ? N : K) * ldb), *c0 = rand_d(M * ldc);
        double *c = bo_malloc(M * ldc * sizeof(double));
        const double alpha = -0.5, beta = 1.0;
        bo_dev d;
        bo_dev_begin(&d, b, res);
        const double *da = bo_put(&d, a, (size_t)((ta ? K : M) * lda) * 8);
        const double *db = bo_put(&d, bm, (size_t)((tb ? N : K) * ldb) * 8);
        double *dc = bo_put(&d, c0, M * ldc * 8);
        const sqz_dgemm_args g = {.trans_a = ta, .trans_b = tb, .m = M, .n = N, .k = K, .alpha = alpha, .a = da,
                                  .lda = lda, .b = db, .ldb = ldb, .beta = beta, .c = dc, .ldc = ldc};
        if (bo_dev_ok(&d)) bo_call(&d, "dgemm", b->ops->dgemm(b->ctx, &g));
        bo_get(&d, c, dc, M * ldc * 8);
        for (int64_t i = 0; bo_dev_ok(&d) && i < M; i++) {
            for (int64_t j = 0; j < N; j++) {
                double ref = 0, mag = 0;
                for (int64_t p = 0; p < K; p++) {
                    const double v = (ta ? a[p * lda + i] : a[i * lda + p]) * (tb ? bm[j * ldb + p] : bm[p * ldb + j]);
                    ref += v, mag += fabs(v);
                }
                ref = alpha * ref + beta * c0[i * ldc + j];
                bo_check(res, "dgemm c", i * ldc + j, c[i * ldc + j], ref, 1e-12 * (mag + fabs(c0[i * ldc + j])));
            }
        }
        bo_dev_end(&d);
        free(a), free(bm), free(c0), free(c);
    }
}

/* A well-conditioned lower triangle (diagonal 2..3, small below; the upper part garbage). */
static double *lower_tri(int64_t n, int64_t ld) {
    double *a = rand_d(n * ld);
    for (int64_t i = 0; i < n; i++) {
        for (int64_t j = 0; j < i; j++) a[i * ld + j] *= 0.3;
        a[i * ld + i] = 2.5 + 0.5 * bo_rndf();
        for (int64_t j = i + 1; j < ld; j++) a[i * ld + j] = 1e30; /* not read */
    }
    return a;
}

static void tiles_dtrsm(const sqz_backend *b, bo_res *res) {
    enum { M = 12, N = 10 };
    for (int v = 0; v < 4 && !res->fail; v++) {
        const bool right = v & 1, trans = v & 2;
        const int64_t na = right ? N : M, lda = na + 1, ldb = N + 2;
        double *a = lower_tri(na, lda), *b0 = rand_d(M * ldb);
        double *x = bo_malloc(M * ldb * 8), *got = bo_malloc(M * ldb * 8);
        const double alpha = 1.5;
        bo_dev d;
        bo_dev_begin(&d, b, res);
        const double *da = bo_put(&d, a, (size_t)(na * lda) * 8);
        double *dbm = bo_put(&d, b0, M * ldb * 8);
        const sqz_dtrsm_args t = {.right = right, .trans = trans, .m = M, .n = N, .alpha = alpha, .a = da, .lda = lda,
                                  .b = dbm, .ldb = ldb};
        if (bo_dev_ok(&d)) bo_call(&d, "dtrsm", b->ops->dtrsm(b->ctx, &t));
        bo_get(&d, got, dbm, M * ldb * 8);
        /* op(A)[i][j]: A's lower triangle, transposed when trans */
#define OPA(i, j) (trans ? ((j) >= (i) ? a[(j) * lda + (i)] : 0.0) : ((i) >= (j) ? a[(i) * lda + (j)] : 0.0))
        /* reference X: op(A) X = alpha B (left) or X op(A) = alpha B (right), by substitution */
        for (int64_t col = 0; col < (right ? M : N); col++) {
            const bool fwd = trans ? right : !right; /* op(A) lower (solve forwards) unless transposed */
            for (int64_t s = 0; s < na; s++) {
                const int64_t e = fwd ? s : na - 1 - s;
                double acc = alpha * (right ? b0[col * ldb + e] : b0[e * ldb + col]);
                for (int64_t p = 0; p < na; p++) {
                    if (p == e || (fwd ? p > e : p < e)) continue;
                    acc -= right ? x[col * ldb + p] * OPA(p, e) : OPA(e, p) * x[p * ldb + col];
                }
                double *dst = right ? &x[col * ldb + e] : &x[e * ldb + col];
                *dst = acc / OPA(e, e);
            }
        }
#undef OPA
        double xmax = 0;
        for (int64_t i = 0; i < M; i++) for (int64_t j = 0; j < N; j++) xmax = fmax(xmax, fabs(x[i * ldb + j]));
        for (int64_t i = 0; bo_dev_ok(&d) && i < M; i++)
            for (int64_t j = 0; j < ldb; j++)
                bo_check(res, "dtrsm b", i * ldb + j, got[i * ldb + j], j < N ? x[i * ldb + j] : b0[i * ldb + j],
                         j < N ? 1e-12 * xmax : 0);
        bo_dev_end(&d);
        free(a), free(b0), free(x), free(got);
    }
}

static void tiles_dpotrf(const sqz_backend *b, bo_res *res) {
    enum { N = 20, LDA = 23 };
    double *g = rand_d(N * N), *a = bo_malloc(N * LDA * 8), *got = bo_malloc(N * LDA * 8), *l = bo_malloc(N * N * 8);
    for (int64_t i = 0; i < N; i++) {
        for (int64_t j = 0; j < LDA; j++) {
            double s = j < N ? (i == j ? 1.0 : 0) : 7.0;
            for (int64_t p = 0; j < N && p < N; p++) s += g[i * N + p] * g[j * N + p] / N;
            a[i * LDA + j] = j > i ? -3.0 : s; /* the upper part is neither read nor written */
            if (j < N) l[i * N + j] = s;
        }
    }
    cholesky_lower(l, N);
    bo_dev d;
    bo_dev_begin(&d, b, res);
    double *da = bo_put(&d, a, N * LDA * 8);
    if (bo_dev_ok(&d)) bo_call(&d, "dpotrf", b->ops->dpotrf(b->ctx, da, N, LDA));
    bo_get(&d, got, da, N * LDA * 8);
    for (int64_t i = 0; bo_dev_ok(&d) && i < N; i++)
        for (int64_t j = 0; j < LDA; j++)
            bo_check(res, "dpotrf", i * LDA + j, got[i * LDA + j], j <= i ? l[i * N + j] : a[i * LDA + j],
                     j <= i ? 1e-12 : 0);
    bo_dev_end(&d);
    free(g), free(a), free(got), free(l);
}

void bo_run_tiles(const bo_row *r, const sqz_backend *b, bo_res *res) {
    (void)r;
    tiles_dgemm(b, res);
    tiles_dtrsm(b, res);
    tiles_dpotrf(b, res);
}

/* ---- colstats and cosine: sums in order, so the bits ---- */

void bo_run_colstats(const bo_row *r, const sqz_backend *b, bo_res *res) {
    (void)r;
    enum { N = 50, K = 37 };
    float *x = bo_rand(N * K, 4.0f), *am0 = bo_rand(K, 2.0f), *am = bo_malloc(K * 4);
    double *s0[3], *got = bo_malloc(K * 8), *ref = bo_malloc(K * 8);
    for (int s = 0; s < 3; s++) s0[s] = rand_d(K);
    for (int j = 0; j < K; j++) am0[j] = fabsf(am0[j]);
    for (int all = 1; all >= 0 && !res->fail; all--) { /* all four outputs, then sum_x2 and absmax only */
        bo_dev d;
        bo_dev_begin(&d, b, res);
        const float *dx = bo_put(&d, x, N * K * 4);
        double *ds[3];
        for (int s = 0; s < 3; s++) ds[s] = all || s == 0 ? bo_put(&d, s0[s], K * 8) : NULL;
        float *dam = bo_put(&d, am0, K * 4);
        const sqz_colstats_args a = {.x = dx, .n = N, .k = K, .sum_x2 = ds[0], .sum_abs = ds[1], .sum_x = ds[2],
                                     .absmax = dam};
        if (bo_dev_ok(&d)) bo_call(&d, "colstats", b->ops->colstats(b->ctx, &a));
        static const char *const names[3] = {"sum_x2", "sum_abs", "sum_x"};
        for (int s = 0; s < 3; s++) {
            if (!ds[s]) continue;
            bo_get(&d, got, ds[s], K * 8);
            for (int64_t j = 0; j < K; j++) {
                double acc = s0[s][j];
                for (int64_t t = 0; t < N; t++) {
                    const double v = x[t * K + j];
                    acc += s == 0 ? v * v : s == 1 ? fabs(v) : v;
                }
                ref[j] = acc;
            }
            for (int64_t j = 0; bo_dev_ok(&d) && j < K; j++) bo_check(res, names[s], j, got[j], ref[j], 0);
        }
        bo_get(&d, am, dam, K * 4);
        for (int64_t j = 0; bo_dev_ok(&d) && j < K; j++) {
            float m = am0[j];
            for (int64_t t = 0; t < N; t++) m = fmaxf(m, fabsf(x[t * K + j]));
            bo_check(res, "absmax", j, am[j], m, 0);
        }
        bo_dev_end(&d);
    }
    free(x), free(am0), free(am), free(got), free(ref);
    for (int s = 0; s < 3; s++) free(s0[s]);
}

void bo_run_cosine(const bo_row *r, const sqz_backend *b, bo_res *res) {
    (void)r;
    enum { N = 7, D = 100 };
    float *x = bo_rand(N * D, 1.0f), *y = bo_rand(N * D, 1.0f);
    for (int64_t j = 0; j < D; j++) y[3 * D + j] = 0.0f; /* a zero row: 1 */
    for (int64_t j = 0; j < D; j++) y[5 * D + j] = x[5 * D + j] * 0.5f + y[5 * D + j] * 0.01f; /* near 1 */
    double *got = bo_malloc(N * 8);
    bo_dev d;
    bo_dev_begin(&d, b, res);
    const float *da = bo_put(&d, x, N * D * 4), *db = bo_put(&d, y, N * D * 4);
    double *dout = bo_put(&d, NULL, N * 8);
    const sqz_cosine_args a = {.a = da, .b = db, .n = N, .d = D, .out = dout};
    if (bo_dev_ok(&d)) bo_call(&d, "cosine", b->ops->cosine(b->ctx, &a));
    bo_get(&d, got, dout, N * 8);
    for (int64_t t = 0; bo_dev_ok(&d) && t < N; t++) {
        double ab = 0, aa = 0, bb = 0;
        for (int64_t j = 0; j < D; j++) {
            const double u = x[t * D + j], v = y[t * D + j];
            ab += u * v, aa += u * u, bb += v * v;
        }
        bo_check(res, "out", t, got[t], aa > 0 && bb > 0 ? ab / sqrt(aa * bb) : 1.0, 0);
    }
    bo_dev_end(&d);
    free(x), free(y), free(got);
}

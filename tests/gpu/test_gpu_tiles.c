/* tests/gpu/test_gpu_tiles.c - the CUDA side of --gpu-mem below a dense Hessian (issue 26; written
 * on 2026-12-02 without a GPU: its first run is the next GPU session's):
 *   - the tile slots dgemm, dtrsm (left/right, plain/transposed), dpotrf against the CPU backend's on
 *     awkward shapes (relative bounds below), dpotrf refusing a matrix that is not positive definite;
 *   - xtx row panels against the CPU's whole matrix (1e-12 of sqrt(H_ii H_jj)), and the same call
 *     twice giving the same bits (what a capped run's identity rests on);
 *   - GPTQ's tiled factor (quant/chol_tiles.c) on the device against kernels/cpu/chol.c (1e-9 of
 *     max |U|), and its bytes under budgets of 6 and 10 tiles equal to every tile resident, with the
 *     device's peak within the budget; an 8960-wide factor timed resident and capped.
 * Skips (77) without a usable CUDA device. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/cpu/backend_impl.h"
#include "kernels/cpu/linalg.h"
#include "quant/chol_tiles.h"
#include "gpu_open.h"
#include "sqz/backend.h"
#include "test_util.h"

static sqz_backend *gpu, *cpu;
static uint64_t rs = 0x2545F4914F6CDD1Dull;
static double rnd(void) {
    rs ^= rs << 13, rs ^= rs >> 7, rs ^= rs << 17;
    return (double)(rs >> 11) / 9007199254740992.0 * 2.0 - 1.0;
}
static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void *up(const void *h, size_t n) {
    void *d = gpu->ops->alloc(gpu->ctx, n);
    assert_non_null(d);
    SQZ_ASSERT_OK(gpu->ops->upload(gpu->ctx, d, h, n));
    return d;
}
static void down(void *h, const void *d, size_t n) {
    SQZ_ASSERT_OK(gpu->ops->download(gpu->ctx, h, d, n));
    SQZ_ASSERT_OK(gpu->ops->synchronize(gpu->ctx));
}
static double *rnd_mat(int64_t r, int64_t c) {
    double *a = malloc((size_t)(r * c) * sizeof(double));
    for (int64_t i = 0; i < r * c; i++) a[i] = rnd();
    return a;
}
static double maxrel(const double *a, const double *b, size_t n) {
    double d = 0, m = 0;
    for (size_t i = 0; i < n; i++) d = fmax(d, fabs(a[i] - b[i])), m = fmax(m, fabs(b[i]));
    return m > 0 ? d / m : d;
}

static void dgemm_case(bool ta, bool tb, int64_t m, int64_t n, int64_t k, double beta) {
    const int64_t lda = (ta ? m : k) + 3, ldb = (tb ? k : n) + 1, ldc = n + 2;
    double *a = rnd_mat(ta ? k : m, lda), *b = rnd_mat(tb ? n : k, ldb), *c = rnd_mat(m, ldc);
    double *ref = malloc((size_t)(m * ldc) * sizeof(double)), *got = malloc((size_t)(m * ldc) * sizeof(double));
    memcpy(ref, c, (size_t)(m * ldc) * sizeof(double));
    sqz_dgemm_args g = {ta, tb, m, n, k, -1.0, a, lda, b, ldb, beta, ref, ldc};
    SQZ_ASSERT_OK(cpu->ops->dgemm(cpu->ctx, &g));
    void *da = up(a, (size_t)((ta ? k : m) * lda) * 8), *db = up(b, (size_t)((tb ? n : k) * ldb) * 8),
         *dc = up(c, (size_t)(m * ldc) * 8);
    g.a = da, g.b = db, g.c = dc;
    SQZ_ASSERT_OK(gpu->ops->dgemm(gpu->ctx, &g));
    down(got, dc, (size_t)(m * ldc) * 8);
    const double e = maxrel(got, ref, (size_t)(m * ldc));
    printf("dgemm ta=%d tb=%d m=%lld n=%lld k=%lld beta=%g: max |gpu-cpu| / max|C| %.3g (bound 1e-13)\n", ta, tb,
           (long long)m, (long long)n, (long long)k, beta, e);
    assert_true(e <= 1e-13);
    gpu->ops->free(gpu->ctx, da), gpu->ops->free(gpu->ctx, db), gpu->ops->free(gpu->ctx, dc);
    free(a), free(b), free(c), free(ref), free(got);
}

/* A well-conditioned lower triangle (diagonal 2 + |.|, the rest / n) of order n, row stride ld. */
static double *lower(int64_t n, int64_t ld) {
    double *a = rnd_mat(n, ld);
    for (int64_t i = 0; i < n; i++) {
        for (int64_t j = 0; j < n; j++) a[i * ld + j] /= (double)n;
        a[i * ld + i] = 2.0 + fabs(a[i * ld + i]);
        for (int64_t j = i + 1; j < n; j++) a[i * ld + j] = NAN; /* not read */
    }
    return a;
}

static void dtrsm_case(bool right, bool trans, int64_t m, int64_t n) {
    const int64_t na = right ? n : m, lda = na + 5, ldb = n + 1;
    double *a = lower(na, lda), *b = rnd_mat(m, ldb);
    double *ref = malloc((size_t)(m * ldb) * 8), *got = malloc((size_t)(m * ldb) * 8);
    memcpy(ref, b, (size_t)(m * ldb) * 8);
    sqz_dtrsm_args t = {right, trans, m, n, -0.5, a, lda, ref, ldb};
    SQZ_ASSERT_OK(cpu->ops->dtrsm(cpu->ctx, &t));
    void *da = up(a, (size_t)(na * lda) * 8), *db = up(b, (size_t)(m * ldb) * 8);
    t.a = da, t.b = db;
    SQZ_ASSERT_OK(gpu->ops->dtrsm(gpu->ctx, &t));
    down(got, db, (size_t)(m * ldb) * 8);
    const double e = maxrel(got, ref, (size_t)(m * ldb));
    printf("dtrsm right=%d trans=%d m=%lld n=%lld: max |gpu-cpu| / max|B| %.3g (bound 1e-12)\n", right, trans,
           (long long)m, (long long)n, e);
    assert_true(e <= 1e-12);
    gpu->ops->free(gpu->ctx, da), gpu->ops->free(gpu->ctx, db);
    free(a), free(b), free(ref), free(got);
}

/* A = B B^T / m + I (n, n), row stride ld, the upper part NaN (not read). */
static double *spd(int64_t n, int64_t ld) {
    const int64_t m = n + 8;
    double *b = rnd_mat(n, m), *a = malloc((size_t)(n * ld) * 8);
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < ld; j++) {
            double s = 0;
            if (j <= i)
                for (int64_t t = 0; t < m; t++) s += b[i * m + t] * b[j * m + t];
            a[i * ld + j] = j > i || j >= n ? NAN : s / (double)m + (i == j);
        }
    free(b);
    return a;
}

static void test_tile_slots(void **state) {
    (void)state;
    dgemm_case(false, true, 512, 512, 512, 1.0);
    dgemm_case(false, true, 77, 300, 129, 1.0);
    dgemm_case(false, false, 300, 77, 129, 0.0);
    dgemm_case(true, false, 33, 65, 17, 1.0);
    for (int r = 0; r < 2; r++)
        for (int t = 0; t < 2; t++) dtrsm_case(r, t, 300, 129), dtrsm_case(r, t, 512, 512);
    const int64_t ns[] = {1, 37, 512};
    for (size_t i = 0; i < 3; i++) {
        const int64_t n = ns[i], ld = n + 3;
        double *a = spd(n, ld), *ref = malloc((size_t)(n * ld) * 8), *got = malloc((size_t)(n * ld) * 8);
        memcpy(ref, a, (size_t)(n * ld) * 8);
        SQZ_ASSERT_OK(cpu->ops->dpotrf(cpu->ctx, ref, n, ld));
        void *d = up(a, (size_t)(n * ld) * 8);
        SQZ_ASSERT_OK(gpu->ops->dpotrf(gpu->ctx, d, n, ld));
        down(got, d, (size_t)(n * ld) * 8);
        double e = 0, big = 0;
        for (int64_t r = 0; r < n; r++)
            for (int64_t c = 0; c <= r; c++)
                e = fmax(e, fabs(got[r * ld + c] - ref[r * ld + c])), big = fmax(big, fabs(ref[r * ld + c]));
        printf("dpotrf n=%lld: max |gpu-cpu| / max|L| %.3g (bound 1e-12)\n", (long long)n, e / big);
        assert_true(e <= 1e-12 * big);
        a[(n / 2) * ld + n / 2] = -1.0;
        SQZ_ASSERT_OK(gpu->ops->upload(gpu->ctx, d, a, (size_t)(n * ld) * 8));
        assert_int_equal(gpu->ops->dpotrf(gpu->ctx, d, n, ld), SQZ_ERR_NUMERIC);
        gpu->ops->free(gpu->ctx, d);
        free(a), free(ref), free(got);
    }
}

static void test_xtx_panels(void **state) {
    (void)state;
    const int64_t m = 300, k = 1100, P = 256;
    float *x = malloc((size_t)(m * k) * sizeof(float));
    for (int64_t i = 0; i < m * k; i++) x[i] = (float)(rnd() * (1 + i % 5));
    double *whole = malloc((size_t)(k * k) * 8);
    SQZ_ASSERT_OK(cpu->ops->xtx(cpu->ctx, &(sqz_xtx_args){.m = m, .k = k, .x = x, .h = whole, .beta = 0.0}));
    void *dx = up(x, (size_t)(m * k) * sizeof(float));
    double worst = 0;
    for (int64_t r0 = 0; r0 < k; r0 += P) {
        const int64_t r1 = r0 + P < k ? r0 + P : k, w = k - r0;
        const size_t nb = (size_t)((r1 - r0) * w) * 8;
        double *p = malloc(nb), *q = malloc(nb);
        void *dp = gpu->ops->alloc(gpu->ctx, nb);
        assert_non_null(dp);
        const sqz_xtx_args a0 = {.m = m / 2, .k = k, .x = dx, .h = dp, .beta = 0.0, .r0 = r0, .r1 = r1, .ldh = w};
        const sqz_xtx_args a1 = {.m = m - m / 2, .k = k, .x = (float *)dx + (m / 2) * k, .h = dp, .beta = 1.0,
                                 .r0 = r0, .r1 = r1, .ldh = w};
        for (int rep = 0; rep < 2; rep++) {
            SQZ_ASSERT_OK(gpu->ops->xtx(gpu->ctx, &a0));
            SQZ_ASSERT_OK(gpu->ops->xtx(gpu->ctx, &a1));
            down(rep ? q : p, dp, nb);
        }
        for (int64_t r = r0; r < r1; r++) {
            const double *g = p + (r - r0) * w + (r - r0), *q2 = q + (r - r0) * w + (r - r0);
            assert_memory_equal(g, q2, (size_t)(k - r) * 8);
            for (int64_t c = r; c < k; c++) {
                const double s = sqrt(whole[r * k + r] * whole[c * k + c]);
                worst = fmax(worst, fabs(g[c - r] - whole[r * k + c]) / s);
            }
        }
        gpu->ops->free(gpu->ctx, dp);
        free(p), free(q);
    }
    printf("xtx row panels of %lld rows (k %lld, two updates): max |gpu-cpu|/sqrt(Hii Hjj) %.3g (bound 1e-12); "
           "repeated calls: the same bits\n", (long long)P, (long long)k, worst);
    assert_true(worst <= 1e-12);
    gpu->ops->free(gpu->ctx, dx);
    free(x), free(whole);
}

/* The tiled factor of h (n, n, upper valid) on a fresh CUDA backend within budget: its peak. */
static double *tiled(const double *h, int64_t n, size_t budget, size_t *peak, double *secs) {
    sqz_backend *g;
    SQZ_ASSERT_OK(sqz_backend_cuda(-1, &g));
    double *u = malloc((size_t)(n * n) * 8);
    memcpy(u, h, (size_t)(n * n) * 8);
    const double t0 = now();
    SQZ_ASSERT_OK(sqz__chol_tiles(g, u, n, budget, NULL));
    *secs = now() - t0;
    sqz_backend_mem m;
    sqz_backend_mem_stats(g, &m);
    *peak = m.peak;
    sqz_backend_free(g);
    return u;
}

/* vs_cpu: a random SPD matrix, compared with chol.c; else diagonally dominant (H_ii = n, |H_ij| <= 1:
 * quick to make at 8960), bytes and times only. */
static void factor_case(int64_t n, int64_t tile, bool vs_cpu) {
    sqz__chol_tiles_set_size(tile);
    double *h;
    if (vs_cpu) {
        h = spd(n, n);
        for (int64_t i = 0; i < n; i++)
            for (int64_t j = i + 1; j < n; j++) h[i * n + j] = h[j * n + i]; /* upper valid */
    } else {
        h = rnd_mat(n, n);
        for (int64_t i = 0; i < n; i++) h[i * n + i] = (double)n;
    }
    size_t p0, p;
    double s0, s;
    double *u0 = tiled(h, n, 0, &p0, &s0);
    if (vs_cpu) {
        double *ref = malloc((size_t)(n * n) * 8);
        memcpy(ref, h, (size_t)(n * n) * 8);
        SQZ_ASSERT_OK(sqz__chol_inverse_upper(ref, n));
        const double e = maxrel(u0, ref, (size_t)(n * n));
        printf("tiled factor n=%lld tiles of %lld: max |gpu-chol.c| / max|U| %.3g (bound 1e-9)\n", (long long)n,
               (long long)tile, e);
        assert_true(e <= 1e-9);
        free(ref);
    }
    const int64_t ts = sqz__chol_tiles_size() < n ? sqz__chol_tiles_size() : n;
    const int slots[] = {6, 10}; /* three and seven cached tiles */
    for (int b = 0; b < 2; b++) {
        const size_t budget = (size_t)slots[b] * (size_t)(ts * ts) * 8 + ((size_t)4 << 20); /* + potrf workspace */
        double *u = tiled(h, n, budget, &p, &s);
        printf("TIME tiled factor n=%lld tiles of %lld: resident %.4f s (peak %.1f MB); budget %.1f MB: %.4f s (peak "
               "%.1f MB), %s\n",
               (long long)n, (long long)ts, s0, (double)p0 / 1e6, (double)budget / 1e6, s, (double)p / 1e6,
               memcmp(u, u0, (size_t)(n * n) * 8) ? "DIFFERENT bytes" : "the same bytes");
        assert_memory_equal(u, u0, (size_t)(n * n) * 8);
        assert_true(p <= budget);
        free(u);
    }
    free(u0), free(h);
    sqz__chol_tiles_set_size(0);
}

static void test_tiled_factor(void **state) {
    (void)state;
    factor_case(300, 64, true);
    factor_case(1536, 512, true);
    factor_case(8960, 512, false);
}

int main(void) {
    const int rc0 = sqz_gpu_open(&gpu, &cpu, "GPU tile tests");
    if (rc0) return rc0;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tile_slots),
        cmocka_unit_test(test_xtx_panels),
        cmocka_unit_test(test_tiled_factor),
    };
    const int rc = sqz_test_run(tests, NULL, NULL);
    sqz_backend_free(gpu);
    sqz_backend_free(cpu);
    return rc;
}

/* tests/gpu/test_gpu_calib.c - the CUDA backend's float slots (matmul on f32/f16/bf16 weights,
 * sgemm, xtx, chol_inv_upper, to_f32) against the CPU backend's same slots, and its memory
 * accounting. Random data of awkward shapes (m = 1, k = 1, k not a multiple of 32, k = 8960 at
 * small m, n up to 2000 for the factor) and stories260K's weights. Bounds, per element:
 *   sgemm / matmul: |gpu - cpu| <= 1e-5 (|alpha| sum_p |a_ip b_pj| + |beta c_ij| (+ |bias_j|)),
 *                   fp32 in both, only the order of the sums differs (TF32 would fail this);
 *   xtx:            |gpu - cpu| <= 1e-12 sqrt(H_ii H_jj) (f64, rounding order only);
 *   chol:           U^T U H v = v within 1e-8 (relative, max norm) for random v, and
 *                   |U_gpu - U_cpu| <= 1e-8 max |U_cpu|; strictly lower 0, diagonal > 0;
 *   to_f32:         bit for bit (every f16 and bf16 pattern; NaN as NaN).
 * Every case prints what it measured. xtx m=512 k=8960 and chol n=8960 are timed
 * (informational). Without a CUDA device the program exits 77. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/cpu/backend_impl.h"
#include "gpu_open.h"
#include "test_util.h"
#include "unit/real_weights.h"

static sqz_backend *gpu, *cpu;
static uint64_t rs = 0x9E3779B97F4A7C15ull;
static float rndf(void) {
    rs ^= rs << 13; rs ^= rs >> 7; rs ^= rs << 17;
    return (float)((rs >> 11) & 0xFFFFFF) / 16777216.0f * 2.0f - 1.0f;
}
static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* ---- device buffers with sentinel guards ---- */
enum { GUARD = 256 };
static const uint8_t SENTINEL = 0xA5;
typedef struct gbuf { uint8_t *dev; size_t n; } gbuf;

static gbuf gnew(size_t n, const void *init) {
    gbuf g = {gpu->ops->alloc(gpu->ctx, n + 2 * GUARD), n};
    if (!g.dev) fail_msg("alloc %zu: %s", n, sqz_last_error());
    uint8_t *fill = malloc(n + 2 * GUARD);
    memset(fill, SENTINEL, n + 2 * GUARD);
    if (init) memcpy(fill + GUARD, init, n);
    SQZ_ASSERT_OK(gpu->ops->upload(gpu->ctx, g.dev, fill, n + 2 * GUARD));
    free(fill);
    return g;
}
static void *gptr(gbuf g) { return g.dev + GUARD; }
static void gget(gbuf g, void *out, const char *what) {
    uint8_t *all = malloc(g.n + 2 * GUARD);
    SQZ_ASSERT_OK(gpu->ops->download(gpu->ctx, all, g.dev, g.n + 2 * GUARD));
    for (size_t i = 0; i < GUARD; i++)
        if (all[i] != SENTINEL || all[GUARD + g.n + i] != SENTINEL) fail_msg("%s: sentinel byte overwritten", what);
    if (out) memcpy(out, all + GUARD, g.n);
    free(all);
}
static void gfree(gbuf g) { gpu->ops->free(gpu->ctx, g.dev); }

/* ---- sgemm ---- */
static void sgemm_case(bool ta, bool tb, int64_t m, int64_t n, int64_t k, int64_t pad, float alpha, float beta) {
    const int64_t ar = ta ? k : m, ac = ta ? m : k, br = tb ? n : k, bc = tb ? k : n;
    const int64_t lda = ac + pad, ldb = bc + pad, ldc = n + pad;
    const size_t na = (size_t)(ar * lda), nb = (size_t)(br * ldb), nc = (size_t)(m * ldc);
    float *A = malloc(4 * na + 4), *B = malloc(4 * nb + 4), *C = malloc(4 * nc + 4), *ref = malloc(4 * nc + 4),
          *got = malloc(4 * nc + 4);
    for (size_t i = 0; i < na; i++) A[i] = rndf();
    for (size_t i = 0; i < nb; i++) B[i] = rndf() * 3.0f;
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < ldc; j++) C[i * ldc + j] = j >= n ? 7777.0f : beta == 0.0f ? NAN : rndf();
    memcpy(ref, C, 4 * nc);
    sqz_sgemm_args a = {.trans_a = ta, .trans_b = tb, .m = m, .n = n, .k = k, .alpha = alpha, .a = A, .lda = lda,
                        .b = B, .ldb = ldb, .beta = beta, .c = ref, .ldc = ldc};
    if (beta == 0.0f) /* the CPU reference must not see the NaNs either (OpenBLAS ignores C too) */
        for (int64_t i = 0; i < m; i++) memset(ref + i * ldc, 0, 4 * (size_t)n);
    SQZ_ASSERT_OK(cpu->ops->sgemm(cpu->ctx, &a));
    gbuf dA = gnew(4 * na, A), dB = gnew(4 * nb, B), dC = gnew(4 * nc, C);
    a.a = gptr(dA), a.b = gptr(dB), a.c = gptr(dC);
    SQZ_ASSERT_OK(gpu->ops->sgemm(gpu->ctx, &a));
    char what[128];
    snprintf(what, sizeof what, "sgemm ta=%d tb=%d m=%lld n=%lld k=%lld pad=%lld beta=%g", ta, tb, (long long)m,
             (long long)n, (long long)k, (long long)pad, beta);
    gget(dC, got, what);
    double worst = 0;
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < ldc; j++) {
            const float g = got[i * ldc + j], r = ref[i * ldc + j];
            if (j >= n) {
                if (g != 7777.0f) fail_msg("%s: C[%lld][%lld] beyond n written", what, (long long)i, (long long)j);
                continue;
            }
            double s = beta != 0.0f ? fabs((double)beta * C[i * ldc + j]) : 0.0;
            for (int64_t p = 0; p < k; p++)
                s += fabs((double)alpha * (ta ? A[p * lda + i] : A[i * lda + p]) * (tb ? B[j * ldb + p] : B[p * ldb + j]));
            const double e = fabs((double)g - r) / (s > 0 ? s : 1e-30);
            if (!isfinite(g) || (s == 0 && g != r)) fail_msg("%s: C[%lld][%lld] = %g vs %g", what, (long long)i, (long long)j, g, r);
            if (e > worst) worst = e;
        }
    printf("%-70s max |gpu-cpu|/scale %.3g (bound 1e-5)\n", what, worst);
    if (!(worst <= 1e-5)) fail_msg("%s: relative error %g > 1e-5", what, worst);
    gfree(dA), gfree(dB), gfree(dC);
    free(A), free(B), free(C), free(ref), free(got);
}

static void test_sgemm(void **state) {
    (void)state;
    for (int t = 0; t < 4; t++) {
        sgemm_case(t & 1, t & 2, 1, 1, 1, 0, 1.0f, 0.0f);
        sgemm_case(t & 1, t & 2, 17, 65, 127, 3, -0.5f, 1.0f);
        sgemm_case(t & 1, t & 2, 130, 33, 1, 0, 2.0f, 0.25f);
        sgemm_case(t & 1, t & 2, 300, 257, 1000, 5, 1.0f, 0.0f);
    }
    sgemm_case(false, true, 1, 2000, 64, 0, 1.0f, 0.0f);
    sgemm_case(true, false, 64, 64, 4096, 0, 1.0f, 1.0f);
    sgemm_case(false, false, 9, 11, 0, 2, 1.0f, 0.5f); /* k = 0: C = beta C */
    sqz_sgemm_args bad = {.m = 4, .n = 4, .k = 4, .alpha = 1, .a = (float *)16, .lda = 3, .b = (float *)16, .ldb = 4,
                          .c = (float *)16, .ldc = 4};
    assert_int_equal(gpu->ops->sgemm(gpu->ctx, &bad), SQZ_ERR_INVALID_ARG);
}

/* ---- matmul on f32 / f16 / bf16 weights ---- */
static uint16_t to16(float f, sqz_dtype t) { return t == SQZ_DTYPE_F16 ? sqz_fp32_to_fp16(f) : sqz_fp32_to_bf16(f); }
static float from16(uint16_t h, sqz_dtype t) { return t == SQZ_DTYPE_F16 ? sqz_fp16_to_fp32(h) : sqz_bf16_to_fp32(h); }

/* wf (n, k) as dtype t; x (m, k). */
static void matmul_case(const char *tag, int64_t m, int64_t n, int64_t k, const float *x, const float *wf, sqz_dtype t,
                        bool bias) {
    const size_t M = m, N = n, K = k, ws = t == SQZ_DTYPE_F32 ? 4 : 2;
    void *w = malloc(ws * N * K + 4);
    float *wv = malloc(4 * N * K + 4), *b = malloc(4 * N + 4), *ref = malloc(4 * M * N + 4), *got = malloc(4 * M * N + 4);
    for (size_t i = 0; i < N * K; i++) {
        if (t == SQZ_DTYPE_F32) ((float *)w)[i] = wv[i] = wf[i];
        else wv[i] = from16(((uint16_t *)w)[i] = to16(wf[i], t), t);
    }
    for (size_t j = 0; j < N; j++) b[j] = rndf();
    sqz_matmul_args a = {.m = m, .n = n, .k = k, .x = x, .w = w, .w_dtype = t, .bias = bias ? b : NULL, .y = ref};
    SQZ_ASSERT_OK(cpu->ops->matmul(cpu->ctx, &a));
    gbuf dx = gnew(4 * M * K, x), dw = gnew(ws * N * K, w), db = gnew(4 * N, b), dy = gnew(4 * M * N, NULL);
    a.x = gptr(dx), a.w = gptr(dw), a.bias = bias ? gptr(db) : NULL, a.y = gptr(dy);
    assert_true(sqz_backend_supports(gpu, SQZ_OP_MATMUL, t));
    SQZ_ASSERT_OK(gpu->ops->matmul(gpu->ctx, &a));
    char what[128];
    snprintf(what, sizeof what, "matmul %s m=%lld n=%lld k=%lld w=%s%s", tag, (long long)m, (long long)n, (long long)k,
             sqz_dtype_name(t), bias ? " bias" : "");
    gget(dy, got, what);
    double worst = 0;
    for (size_t i = 0; i < M; i++)
        for (size_t j = 0; j < N; j++) {
            double s = bias ? fabs(b[j]) : 0;
            for (size_t p = 0; p < K; p++) s += fabs((double)x[i * K + p] * wv[j * K + p]);
            const double e = fabs((double)got[i * N + j] - ref[i * N + j]) / (s > 0 ? s : 1e-30);
            if (!isfinite(got[i * N + j])) fail_msg("%s: y[%zu][%zu] = %g", what, i, j, got[i * N + j]);
            if (e > worst) worst = e;
        }
    printf("%-70s max |gpu-cpu|/scale %.3g (bound 1e-5)\n", what, worst);
    if (!(worst <= 1e-5)) fail_msg("%s: relative error %g > 1e-5", what, worst);
    gfree(dx), gfree(dw), gfree(db), gfree(dy);
    free(w), free(wv), free(b), free(ref), free(got);
}

static void matmul_random(int64_t m, int64_t n, int64_t k, sqz_dtype t, bool bias) {
    float *x = malloc(4 * (size_t)(m * k) + 4), *w = malloc(4 * (size_t)(n * k) + 4);
    for (int64_t i = 0; i < m * k; i++) x[i] = rndf();
    for (int64_t i = 0; i < n * k; i++) w[i] = rndf() * 0.1f;
    matmul_case("random", m, n, k, x, w, t, bias);
    free(x), free(w);
}

static void test_matmul(void **state) {
    (void)state;
    const sqz_dtype ts[3] = {SQZ_DTYPE_F32, SQZ_DTYPE_F16, SQZ_DTYPE_BF16};
    for (int i = 0; i < 3; i++) {
        matmul_random(1, 1, 1, ts[i], false);
        matmul_random(3, 17, 33, ts[i], true);
        matmul_random(17, 100, 256, ts[i], false);
        matmul_random(64, 300, 200, ts[i], true);
    }
    matmul_random(2, 5000, 4096, SQZ_DTYPE_F16, true); /* 80 MB widened: more than one scratch panel */
    assert_false(sqz_backend_supports(gpu, SQZ_OP_MATMUL, SQZ_DTYPE_Q8_0));
}

static void test_matmul_real(void **state) {
    (void)state;
    float *w = sqz_rw_need();
    /* token embeddings as activations (512, 64) through layer 0's wq (64, 64) and w1 (172, 64) */
    const sqz_dtype ts[3] = {SQZ_DTYPE_F32, SQZ_DTYPE_F16, SQZ_DTYPE_BF16};
    for (int i = 0; i < 3; i++) {
        matmul_case("stories260K wq", 512, 64, 64, w + SQZ_RW_TOK_EMB, w + SQZ_RW_WQ, ts[i], false);
        matmul_case("stories260K w1", 512, 172, 64, w + SQZ_RW_TOK_EMB, w + SQZ_RW_W1, ts[i], true);
    }
    free(w);
}

/* ---- to_f32 ---- */
static void test_to_f32(void **state) {
    (void)state;
    const sqz_dtype ts[2] = {SQZ_DTYPE_F16, SQZ_DTYPE_BF16};
    uint16_t *src = malloc(2 * 65536);
    float *ref = malloc(4 * 65536), *got = malloc(4 * 65536);
    for (int i = 0; i < 65536; i++) src[i] = (uint16_t)i;
    for (int t = 0; t < 2; t++) {
        SQZ_ASSERT_OK(cpu->ops->to_f32(cpu->ctx, src, ts[t], 65536, ref));
        gbuf ds = gnew(2 * 65536, src), dd = gnew(4 * 65536, NULL);
        SQZ_ASSERT_OK(gpu->ops->to_f32(gpu->ctx, gptr(ds), ts[t], 65536, gptr(dd)));
        gget(dd, got, "to_f32");
        int diff = 0;
        for (int i = 0; i < 65536; i++)
            if (isnan(ref[i]) ? !isnan(got[i]) : memcmp(&ref[i], &got[i], 4) != 0) diff++;
        printf("to_f32 %s: all 65536 patterns, %d differ from the CPU (bound 0)\n", sqz_dtype_name(ts[t]), diff);
        assert_int_equal(diff, 0);
        gfree(ds), gfree(dd);
    }
    float f[1001];
    for (int i = 0; i < 1001; i++) f[i] = rndf() * 1e30f;
    f[7] = NAN, f[8] = -INFINITY, f[9] = 1e-45f;
    gbuf ds = gnew(sizeof f, f), dd = gnew(sizeof f, NULL);
    SQZ_ASSERT_OK(gpu->ops->to_f32(gpu->ctx, gptr(ds), SQZ_DTYPE_F32, 1001, gptr(dd)));
    gget(dd, got, "to_f32 f32");
    assert_memory_equal(got, f, sizeof f);
    printf("to_f32 f32: 1001 values copied bit for bit\n");
    assert_int_equal(gpu->ops->to_f32(gpu->ctx, gptr(ds), SQZ_DTYPE_Q8_0, 1, gptr(dd)), SQZ_ERR_UNSUPPORTED);
    gfree(ds), gfree(dd);
    free(src), free(ref), free(got);
}

/* ---- xtx ---- */
static const double LOWER_MARK = -12345.0;

/* x (m, k); beta 1 adds to h0 (k, k, upper valid) or, h0 NULL, to the CPU's X0^T X0 of a random X0. */
static void xtx_case(const char *tag, int64_t m, int64_t k, const float *x, double beta, bool timed) {
    const size_t K = k, KK = K * K;
    double *h = malloc(8 * KK), *ref = malloc(8 * KK), *got = malloc(8 * KK);
    if (beta == 0.0) {
        for (size_t i = 0; i < KK; i++) h[i] = NAN; /* must not be read */
    } else {
        float *x0 = malloc(4 * 3 * K);
        for (size_t i = 0; i < 3 * K; i++) x0[i] = rndf();
        sqz_xtx_args a0 = {.m = 3, .k = k, .x = x0, .h = h, .beta = 0.0};
        SQZ_ASSERT_OK(cpu->ops->xtx(cpu->ctx, &a0));
        free(x0);
    }
    for (size_t i = 0; i < K; i++)
        for (size_t j = 0; j < i; j++) h[i * K + j] = LOWER_MARK;
    memcpy(ref, h, 8 * KK);
    sqz_xtx_args a = {.m = m, .k = k, .x = x, .h = ref, .beta = beta};
    SQZ_ASSERT_OK(cpu->ops->xtx(cpu->ctx, &a));
    gbuf dx = gnew(4 * (size_t)m * K + 4, x), dh = gnew(8 * KK, h);
    a.x = gptr(dx), a.h = gptr(dh);
    SQZ_ASSERT_OK(gpu->ops->synchronize(gpu->ctx));
    double t0 = now();
    SQZ_ASSERT_OK(gpu->ops->xtx(gpu->ctx, &a));
    SQZ_ASSERT_OK(gpu->ops->synchronize(gpu->ctx));
    const double secs = now() - t0;
    char what[128];
    snprintf(what, sizeof what, "xtx %s m=%lld k=%lld beta=%g", tag, (long long)m, (long long)k, beta);
    gget(dh, got, what);
    double worst = 0;
    for (size_t i = 0; i < K; i++)
        for (size_t j = 0; j < K; j++) {
            const double g = got[i * K + j], r = ref[i * K + j];
            if (j < i) {
                if (g != LOWER_MARK) fail_msg("%s: H[%zu][%zu] below the diagonal written", what, i, j);
                continue;
            }
            const double s = sqrt(ref[i * K + i] * ref[j * K + j]);
            if (!isfinite(g) || (s == 0 && g != r)) fail_msg("%s: H[%zu][%zu] = %g vs %g", what, i, j, g, r);
            const double e = s > 0 ? fabs(g - r) / s : 0;
            if (e > worst) worst = e;
        }
    printf("%-70s max |gpu-cpu|/sqrt(Hii Hjj) %.3g (bound 1e-12)\n", what, worst);
    if (timed) {
        /* the first call above paid for the scratch; time a second, same work */
        a.beta = 0.0;
        SQZ_ASSERT_OK(gpu->ops->synchronize(gpu->ctx));
        t0 = now();
        SQZ_ASSERT_OK(gpu->ops->xtx(gpu->ctx, &a));
        SQZ_ASSERT_OK(gpu->ops->synchronize(gpu->ctx));
        printf("TIME xtx m=%lld k=%lld: %.4f s (first call %.4f s)\n", (long long)m, (long long)k, now() - t0, secs);
    }
    if (!(worst <= 1e-12)) fail_msg("%s: relative error %g > 1e-12", what, worst);
    gfree(dx), gfree(dh);
    free(h), free(ref), free(got);
}

static void xtx_random(int64_t m, int64_t k, double beta, bool timed) {
    float *x = malloc(4 * (size_t)(m * k) + 4);
    for (int64_t i = 0; i < m * k; i++) x[i] = rndf() * (float)(1 + i % 7);
    xtx_case("random", m, k, x, beta, timed);
    free(x);
}

static void test_xtx(void **state) {
    (void)state;
    const int64_t shapes[][2] = {{1, 1}, {1, 37}, {300, 1}, {257, 100}, {513, 129}, {7, 8960}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        xtx_random(shapes[i][0], shapes[i][1], 0.0, false);
        if (shapes[i][1] < 1000) xtx_random(shapes[i][0], shapes[i][1], 1.0, false);
    }
    xtx_random(0, 50, 1.0, false);
    xtx_random(512, 8960, 0.0, true);
    sqz_xtx_args bad = {.m = 1, .k = 1, .x = (float *)16, .h = (double *)16, .beta = 0.5};
    assert_int_equal(gpu->ops->xtx(gpu->ctx, &bad), SQZ_ERR_INVALID_ARG);
}

/* ---- chol_inv_upper ---- */
/* y = U^T (U (H v)) - v for u upper (n, n), hs symmetric (full); returns max|y| / max|v|. */
static double chol_residual(const double *u, const double *hs, int64_t n) {
    double *v = malloc(8 * n), *t = malloc(8 * n), *w = malloc(8 * n);
    double worst = 0;
    for (int r = 0; r < 3; r++) {
        double vmax = 0, emax = 0;
        for (int64_t i = 0; i < n; i++) v[i] = rndf(), vmax = fmax(vmax, fabs(v[i]));
        for (int64_t i = 0; i < n; i++) {
            double s = 0;
            for (int64_t j = 0; j < n; j++) s += hs[i * n + j] * v[j];
            t[i] = s;
        }
        for (int64_t i = 0; i < n; i++) {
            double s = 0;
            for (int64_t j = i; j < n; j++) s += u[i * n + j] * t[j];
            w[i] = s;
        }
        for (int64_t j = 0; j < n; j++) {
            double s = 0;
            for (int64_t i = 0; i <= j; i++) s += u[i * n + j] * w[i];
            emax = fmax(emax, fabs(s - v[j]));
        }
        worst = fmax(worst, emax / vmax);
    }
    free(v), free(t), free(w);
    return worst;
}

/* h (n, n): upper triangle valid (the lower is filled with NaN here: must not be read);
 * cpu_too: compare with the CPU's factor. */
static void chol_case(const char *tag, double *h, int64_t n, bool cpu_too, bool timed) {
    const size_t N = n, NN = N * N;
    double *hs = malloc(8 * NN), *ref = malloc(8 * NN), *got = malloc(8 * NN);
    for (size_t i = 0; i < N; i++)
        for (size_t j = 0; j < N; j++) hs[i * N + j] = j >= i ? h[i * N + j] : h[j * N + i];
    for (size_t i = 0; i < N; i++)
        for (size_t j = 0; j < i; j++) h[i * N + j] = NAN;
    gbuf dh = gnew(8 * NN, h);
    SQZ_ASSERT_OK(gpu->ops->synchronize(gpu->ctx));
    const double t0 = now();
    SQZ_ASSERT_OK(gpu->ops->chol_inv_upper(gpu->ctx, gptr(dh), n));
    SQZ_ASSERT_OK(gpu->ops->synchronize(gpu->ctx));
    const double secs = now() - t0;
    char what[128];
    snprintf(what, sizeof what, "chol %s n=%lld", tag, (long long)n);
    gget(dh, got, what);
    for (size_t i = 0; i < N; i++) {
        if (!(got[i * N + i] > 0)) fail_msg("%s: U[%zu][%zu] = %g is not positive", what, i, i, got[i * N + i]);
        for (size_t j = 0; j < N; j++) {
            if (j < i && got[i * N + j] != 0.0) fail_msg("%s: U[%zu][%zu] = %g below the diagonal", what, i, j, got[i * N + j]);
            if (!isfinite(got[i * N + j])) fail_msg("%s: U[%zu][%zu] not finite", what, i, j);
        }
    }
    const double res = chol_residual(got, hs, n);
    double diff = -1;
    if (cpu_too) {
        memcpy(ref, h, 8 * NN);
        SQZ_ASSERT_OK(cpu->ops->chol_inv_upper(cpu->ctx, ref, n));
        double dmax = 0, umax = 0;
        for (size_t i = 0; i < NN; i++) dmax = fmax(dmax, fabs(got[i] - ref[i])), umax = fmax(umax, fabs(ref[i]));
        diff = dmax / umax;
    }
    printf("%-40s |U^T U H v - v|/|v| %.3g (bound 1e-8), |Ugpu-Ucpu|/max|U| %.3g (bound 1e-8)%s\n", what, res, diff,
           cpu_too ? "" : " (not compared)");
    if (timed) printf("TIME chol n=%lld: %.4f s\n", (long long)n, secs);
    if (!(res <= 1e-8)) fail_msg("%s: residual %g > 1e-8", what, res);
    if (cpu_too && !(diff <= 1e-8)) fail_msg("%s: differs from the CPU factor by %g > 1e-8", what, diff);
    gfree(dh);
    free(hs), free(ref), free(got);
}

/* H = X^T X / m + 0.01 mean(diag) I for random X (m, n) through the CPU's xtx (upper valid). */
static double *spd_random(int64_t n, int64_t m) {
    float *x = malloc(4 * (size_t)(m * n));
    double *h = malloc(8 * (size_t)(n * n));
    for (int64_t i = 0; i < m * n; i++) x[i] = rndf();
    sqz_xtx_args a = {.m = m, .k = n, .x = x, .h = h, .beta = 0.0};
    SQZ_ASSERT_OK(cpu->ops->xtx(cpu->ctx, &a));
    double mean = 0;
    for (int64_t i = 0; i < n; i++) mean += h[i * n + i] / (double)n;
    for (int64_t i = 0; i < n * n; i++) h[i] /= (double)m;
    for (int64_t i = 0; i < n; i++) h[i * n + i] += 0.01 * mean / (double)m;
    free(x);
    return h;
}

static void chol_expect_numeric(const char *tag, double *h, int64_t n) {
    gbuf dh = gnew(8 * (size_t)(n * n), h);
    const sqz_status s = gpu->ops->chol_inv_upper(gpu->ctx, gptr(dh), n);
    printf("chol %s n=%lld: %s (%s)\n", tag, (long long)n, sqz_status_name(s), s != SQZ_OK ? sqz_last_error() : "");
    assert_int_equal(s, SQZ_ERR_NUMERIC);
    gfree(dh);
}

static void test_chol(void **state) {
    (void)state;
    const int64_t ns[] = {1, 2, 3, 37, 129, 300, 1000, 2000};
    for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) {
        double *h = spd_random(ns[i], ns[i] + 16);
        chol_case("random", h, ns[i], true, false);
        free(h);
    }
    double *h = spd_random(50, 60);
    h[3 * 50 + 7] = NAN; /* in the upper triangle: read */
    chol_expect_numeric("NaN", h, 50);
    free(h);
    h = spd_random(50, 60);
    h[10 * 50 + 10] = -1.0;
    chol_expect_numeric("not positive definite", h, 50);
    memset(h, 0, 8 * 50 * 50);
    chol_expect_numeric("zero", h, 50);
    free(h);
    h = spd_random(40, 50); /* still fine after the failures */
    chol_case("after errors", h, 40, true, false);
    free(h);
    /* n = 8960, diagonally dominant (H_ii = n, |H_ij| <= 1): timed, residual only */
    const int64_t n = 8960;
    h = malloc(8 * (size_t)(n * n));
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = i; j < n; j++) h[i * n + j] = i == j ? (double)n : rndf();
    chol_case("diag-dominant", h, n, false, true);
    free(h);
}

static void test_real_hessian(void **state) {
    (void)state;
    float *w = sqz_rw_need();
    /* w1 of all 5 layers (860, 64) as 860 activation rows: the Hessian of a 64-input layer */
    xtx_case("stories260K w1 rows", 860, 64, w + SQZ_RW_W1, 0.0, false);
    double *h = malloc(8 * 64 * 64);
    sqz_xtx_args a = {.m = 860, .k = 64, .x = w + SQZ_RW_W1, .h = h, .beta = 0.0};
    SQZ_ASSERT_OK(cpu->ops->xtx(cpu->ctx, &a));
    double mean = 0;
    for (int i = 0; i < 64; i++) mean += h[i * 64 + i] / 64;
    for (int i = 0; i < 64; i++) h[i * 64 + i] += 0.01 * mean; /* GPTQ's damping */
    chol_case("stories260K w1 Hessian", h, 64, true, false);
    free(h);
    free(w);
}

/* ---- memory accounting (a backend of its own: its numbers start from zero) ---- */
static void test_mem(void **state) {
    (void)state;
    sqz_backend *g = NULL;
    SQZ_ASSERT_OK(sqz_backend_cuda(-1, &g));
    assert_false(sqz_backend_host_memory(g));
    sqz_backend_mem m0, m;
    sqz_backend_mem_stats(g, &m0);
    printf("mem: fresh backend in_use %zu peak %zu cap %zu (the cuBLAS(Lt) workspace)\n", m0.in_use, m0.peak, m0.cap);
    assert_true(m0.in_use >= ((size_t)32 << 20) && m0.peak == m0.in_use && m0.cap == 0);
    const size_t MB = (size_t)1 << 20, base = m0.in_use;
    void *p = g->ops->alloc(g->ctx, 10 * MB);
    assert_non_null(p);
    sqz_backend_mem_stats(g, &m);
    assert_int_equal(m.in_use, base + 10 * MB);
    g->ops->free(g->ctx, p);
    sqz_backend_mem_stats(g, &m);
    assert_int_equal(m.in_use, base);
    assert_int_equal(m.peak, base + 10 * MB);
    assert_int_equal(sqz_backend_set_mem_cap(g, base - 1), SQZ_ERR_NOMEM);
    printf("mem: cap below in_use -> %s\n", sqz_last_error());
    const size_t cap = base + 8 * MB;
    SQZ_ASSERT_OK(sqz_backend_set_mem_cap(g, cap));
    assert_null(g->ops->alloc(g->ctx, 10 * MB));
    printf("mem: 10 MB under an 8 MB margin -> %s\n", sqz_last_error());
    assert_non_null(strstr(sqz_last_error(), "--gpu-mem"));
    /* xtx under the cap: the f64 chunks shrink to the room left (2 MB: ~500 rows of k = 500) */
    const int64_t rows = 2000, k = 500;
    float *x = malloc(4 * rows * k);
    double *ref = malloc(8 * k * k), *got = malloc(8 * k * k);
    for (int64_t i = 0; i < rows * k; i++) x[i] = rndf();
    void *dx = g->ops->alloc(g->ctx, 4 * rows * k), *dh = g->ops->alloc(g->ctx, 8 * k * k);
    assert_true(dx && dh);
    SQZ_ASSERT_OK(g->ops->upload(g->ctx, dx, x, 4 * rows * k));
    sqz_xtx_args a = {.m = rows, .k = k, .x = x, .h = ref, .beta = 0.0};
    SQZ_ASSERT_OK(cpu->ops->xtx(cpu->ctx, &a));
    a.x = dx, a.h = dh;
    SQZ_ASSERT_OK(g->ops->xtx(g->ctx, &a));
    SQZ_ASSERT_OK(g->ops->download(g->ctx, got, dh, 8 * k * k));
    double worst = 0;
    for (int64_t i = 0; i < k; i++)
        for (int64_t j = i; j < k; j++)
            worst = fmax(worst, fabs(got[i * k + j] - ref[i * k + j]) / sqrt(ref[i * k + i] * ref[j * k + j]));
    sqz_backend_mem_stats(g, &m);
    printf("mem: xtx m=%lld k=%lld under the cap: error %.3g; in_use %zu peak %zu cap %zu (scratch %zu)\n",
           (long long)rows, (long long)k, worst, m.in_use, m.peak, m.cap, m.in_use - base - 4 * rows * k - 8 * k * k);
    assert_true(worst <= 1e-12);
    assert_true(m.in_use <= cap && m.cap == cap && m.in_use > base + 4 * rows * k + 8 * k * k);
    g->ops->free(g->ctx, dx), g->ops->free(g->ctx, dh);
    /* an op whose scratch cannot fit: one widened row of 4 MB, with the scratch xtx left (~2.3 MB)
     * + 1 MB of room under the cap */
    const int64_t kk = 1000000;
    SQZ_ASSERT_OK(sqz_backend_set_mem_cap(g, 0));
    void *dw = g->ops->alloc(g->ctx, 2 * kk), *dxx = g->ops->alloc(g->ctx, 4 * kk), *dy = g->ops->alloc(g->ctx, 4);
    assert_true(dw && dxx && dy);
    sqz_backend_mem_stats(g, &m);
    SQZ_ASSERT_OK(sqz_backend_set_mem_cap(g, m.in_use + MB));
    sqz_matmul_args mm = {.m = 1, .n = 1, .k = kk, .x = dxx, .w = dw, .w_dtype = SQZ_DTYPE_F16, .y = dy};
    const sqz_status s = g->ops->matmul(g->ctx, &mm);
    printf("mem: matmul needing 4 MB of scratch -> %s: %s\n", sqz_status_name(s), sqz_last_error());
    assert_int_equal(s, SQZ_ERR_NOMEM);
    SQZ_ASSERT_OK(sqz_backend_set_mem_cap(g, 0));
    SQZ_ASSERT_OK(g->ops->matmul(g->ctx, &mm));
    SQZ_ASSERT_OK(g->ops->synchronize(g->ctx));
    g->ops->free(g->ctx, dw), g->ops->free(g->ctx, dxx), g->ops->free(g->ctx, dy);
    sqz_backend_mem_stats(g, &m);
    printf("mem: after freeing all: in_use %zu (base %zu + scratch) peak %zu\n", m.in_use, base, m.peak);
    assert_true(m.peak >= m.in_use && m.in_use >= base);
    sqz_backend_free(g);
    free(x), free(ref), free(got);
}

int main(void) {
    const int rc0 = sqz_gpu_open(&gpu, &cpu, "GPU calibration tests");
    if (rc0) return rc0;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mem),
        cmocka_unit_test(test_to_f32),
        cmocka_unit_test(test_sgemm),
        cmocka_unit_test(test_matmul),
        cmocka_unit_test(test_matmul_real),
        cmocka_unit_test(test_xtx),
        cmocka_unit_test(test_real_hessian),
        cmocka_unit_test(test_chol),
    };
    const int rc = sqz_test_run(tests, NULL, NULL);
    sqz_backend_free(gpu);
    sqz_backend_free(cpu);
    return rc;
}

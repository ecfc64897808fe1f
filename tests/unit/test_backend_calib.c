/* tests/unit/test_backend_calib.c - the calibration loop's backend slots (issue 26).
 *   the CPU backend's slots: xtx equals a naive double X^T X (beta 0 and 1, rows over several
 *     chunks, columns over several panels, the strictly lower triangle never written);
 *     chol_inv_upper gives U upper with U^T U H = I (and SQZ_ERR_NUMERIC on an indefinite H);
 *     sgemm equals a naive product for every transpose combination with padded leading
 *     dimensions (the padding untouched); the tile slots dgemm, dtrsm and dpotrf against naive
 *     arithmetic (test_chol_tiles has the tiled factor they form);
 *   the observers with sqz_calib_observe_opts.backend on tinystories-656K's activations
 *     (sqz_calib_run): the CPU backend gives the bits of backend NULL for every statistic; the
 *     device path (fake_device.h: the CPU slots with host_memory false) gives X^T X within
 *     1e-12 relative and every other statistic bit for bit (E[x^2], E|x|, absmax from the device rows
 *     through the colstats slot, the block's cosines through cosine), frees its device memory, and so does
 *     an observer merged and then fed again (the sums added on the host). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/backend_impl.h"
#include "calib/observe_internal.h"
#include "quant/quant_internal.h"
#include "calib_backend_util.h"
#include "fake_device.h"

static uint64_t rs = 0x243F6A8885A308D3ull;
static double urand(void) { /* [-1, 1) */
    rs ^= rs << 13;
    rs ^= rs >> 7;
    rs ^= rs << 17;
    return (double)(rs >> 11) / (double)(1ull << 52) - 1.0;
}

/* ---- the CPU slots ---------------------------------------------------------------------- */

static void test_xtx_slot(void **state) {
    (void)state;
    enum { M = 300, K = 200 }; /* two chunks of rows, two panels of columns */
    sqz_backend *cpu;
    SQZ_ASSERT_OK(sqz_backend_cpu(0, &cpu));
    assert_true(sqz_backend_supports(cpu, SQZ_OP_XTX, SQZ_DTYPE_F32));
    float *x = malloc(sizeof(float) * M * K);
    double *ref = calloc(K * K, sizeof(double)), *h = malloc(sizeof(double) * K * K);
    for (int i = 0; i < M * K; i++) x[i] = (float)urand();
    for (int t = 0; t < M; t++)
        for (int i = 0; i < K; i++)
            for (int j = i; j < K; j++) ref[i * K + j] += (double)x[t * K + i] * (double)x[t * K + j];
    for (int i = 0; i < K * K; i++) h[i] = 12345.0;
    for (int pass = 0; pass < 2; pass++) { /* beta 0 over the sentinels, then beta 1: twice the sum */
        const sqz_xtx_args a = {.m = M, .k = K, .x = x, .h = h, .beta = pass ? 1.0 : 0.0};
        SQZ_ASSERT_OK(cpu->ops->xtx(cpu->ctx, &a));
        double worst = 0;
        for (int i = 0; i < K; i++)
            for (int j = 0; j < K; j++) {
                if (j < i) {
                    assert_true(h[i * K + j] == 12345.0);
                    continue;
                }
                const double want = (pass + 1) * ref[i * K + j];
                const double sc = (pass + 1) * sqrt(ref[i * K + i] * ref[j * K + j]);
                if (fabs(h[i * K + j] - want) / sc > worst) worst = fabs(h[i * K + j] - want) / sc;
            }
        print_message("xtx slot, beta %d: largest error %.3g of sqrt(H_ii H_jj)\n", pass, worst);
        assert_true(worst < 1e-13);
    }
    const sqz_xtx_args none = {.m = 0, .k = K, .x = x, .h = h, .beta = 0.0};
    SQZ_ASSERT_OK(cpu->ops->xtx(cpu->ctx, &none));
    for (int i = 0; i < K; i++)
        for (int j = i; j < K; j++) assert_true(h[i * K + j] == 0.0);
    const sqz_xtx_args bad = {.m = M, .k = K, .x = x, .h = h, .beta = 0.5};
    assert_int_equal(cpu->ops->xtx(cpu->ctx, &bad), SQZ_ERR_INVALID_ARG);
    free(x);
    free(ref);
    free(h);
    sqz_backend_free(cpu);
}

static void test_chol_slot(void **state) {
    (void)state;
    enum { N = 150 };
    sqz_backend *cpu;
    SQZ_ASSERT_OK(sqz_backend_cpu(0, &cpu));
    double *a = malloc(sizeof(double) * N * N), *h = calloc(N * N, sizeof(double)), *u = malloc(sizeof(double) * N * N);
    for (int i = 0; i < N * N; i++) a[i] = urand();
    for (int i = 0; i < N; i++)
        for (int j = 0; j < N; j++) {
            for (int t = 0; t < N; t++) h[i * N + j] += a[i * N + t] * a[j * N + t];
            if (i == j) h[i * N + j] += 1.0;
        }
    memcpy(u, h, sizeof(double) * N * N);
    SQZ_ASSERT_OK(cpu->ops->chol_inv_upper(cpu->ctx, u, N));
    double worst = 0;
    for (int i = 0; i < N; i++) {
        assert_true(u[i * N + i] > 0);
        for (int j = 0; j < i; j++) assert_true(u[i * N + j] == 0.0);
    }
    for (int i = 0; i < N; i++) /* (U^T U H)_ij = sum_t (U^T U)_it H_tj */
        for (int j = 0; j < N; j++) {
            double s = 0;
            for (int t = 0; t < N; t++) {
                double utu = 0;
                for (int r = 0; r <= (i < t ? i : t); r++) utu += u[r * N + i] * u[r * N + t];
                s += utu * h[t * N + j];
            }
            const double e = fabs(s - (i == j ? 1.0 : 0.0));
            if (e > worst) worst = e;
        }
    print_message("chol slot, n %d: largest |U^T U H - I| %.3g\n", N, worst);
    assert_true(worst < 1e-8);
    for (int i = 0; i < N * N; i++) u[i] = i % (N + 1) == 0 ? -1.0 : 0.0;
    assert_int_equal(cpu->ops->chol_inv_upper(cpu->ctx, u, N), SQZ_ERR_NUMERIC);
    free(a);
    free(h);
    free(u);
    sqz_backend_free(cpu);
}

static void test_sgemm_slot(void **state) {
    (void)state;
    enum { M = 37, N = 29, K = 53, PAD = 3 };
    sqz_backend *cpu;
    SQZ_ASSERT_OK(sqz_backend_cpu(0, &cpu));
    float *a = malloc(sizeof(float) * (K + PAD) * (K + PAD) * 2), *b = malloc(sizeof(float) * (K + PAD) * (K + PAD) * 2);
    float *c = malloc(sizeof(float) * M * (N + PAD)), *c0 = malloc(sizeof(float) * M * (N + PAD));
    for (int i = 0; i < (K + PAD) * (K + PAD) * 2; i++) {
        a[i] = (float)urand();
        b[i] = (float)urand();
    }
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
            const int64_t lda = (ta ? M : K) + PAD, ldb = (tb ? K : N) + PAD, ldc = N + PAD;
            for (int i = 0; i < M * ldc; i++) c[i] = c0[i] = (float)urand();
            const sqz_sgemm_args g = {.trans_a = ta, .trans_b = tb, .m = M, .n = N, .k = K, .alpha = 0.75f, .a = a,
                                      .lda = lda, .b = b, .ldb = ldb, .beta = -0.5f, .c = c, .ldc = ldc};
            SQZ_ASSERT_OK(cpu->ops->sgemm(cpu->ctx, &g));
            double worst = 0;
            for (int i = 0; i < M; i++)
                for (int j = 0; j < ldc; j++) {
                    if (j >= N) { /* padding */
                        assert_true(c[i * ldc + j] == c0[i * ldc + j]);
                        continue;
                    }
                    double s = 0, mag = 0;
                    for (int t = 0; t < K; t++) {
                        const double x = ta ? a[t * lda + i] : a[i * lda + t], y = tb ? b[j * ldb + t] : b[t * ldb + j];
                        s += x * y;
                        mag += fabs(x * y);
                    }
                    const double want = 0.75 * s - 0.5 * (double)c0[i * ldc + j];
                    const double e = fabs((double)c[i * ldc + j] - want) / (mag + fabs((double)c0[i * ldc + j]));
                    if (e > worst) worst = e;
                }
            print_message("sgemm slot, trans_a %d trans_b %d: largest relative error %.3g\n", ta, tb, worst);
            assert_true(worst < 1e-5);
        }
    free(a);
    free(b);
    free(c);
    free(c0);
    sqz_backend_free(cpu);
}

/* The tile slots (SQZ_OP_TILES, GPTQ's factor in tiles): dgemm against a naive product for every
 * transpose combination, dtrsm (left / right, plain / transposed) against op(A) X = B checked back,
 * dpotrf against L L^T = A with the strict upper part untouched. */
static void test_tile_slots(void **state) {
    (void)state;
    enum { M = 37, N = 29, K = 53, LD = 60 };
    sqz_backend *cpu;
    SQZ_ASSERT_OK(sqz_backend_cpu(0, &cpu));
    assert_true(sqz_backend_supports(cpu, SQZ_OP_TILES, SQZ_DTYPE_F32));
    double *a = malloc(sizeof(double) * LD * LD), *b = malloc(sizeof(double) * LD * LD);
    double *c = malloc(sizeof(double) * LD * LD), *c0 = malloc(sizeof(double) * LD * LD);
    for (int i = 0; i < LD * LD; i++) a[i] = urand(), b[i] = urand(), c0[i] = urand();
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
            memcpy(c, c0, sizeof(double) * LD * LD);
            const sqz_dgemm_args g = {ta, tb, M, N, K, 0.75, a, LD, b, LD, -0.5, c, LD};
            SQZ_ASSERT_OK(cpu->ops->dgemm(cpu->ctx, &g));
            double worst = 0;
            for (int i = 0; i < M; i++)
                for (int j = 0; j < N; j++) {
                    double s = 0;
                    for (int t = 0; t < K; t++) s += (ta ? a[t * LD + i] : a[i * LD + t]) * (tb ? b[j * LD + t] : b[t * LD + j]);
                    worst = fmax(worst, fabs(c[i * LD + j] - (0.75 * s - 0.5 * c0[i * LD + j])));
                }
            assert_true(worst < 1e-12);
            assert_true(c[0 * LD + N] == c0[0 * LD + N]); /* outside C */
        }
    /* A lower, well conditioned; its upper part NaN (must not be read) */
    for (int i = 0; i < LD; i++)
        for (int j = 0; j < LD; j++) a[i * LD + j] = j > i ? NAN : j == i ? 2.0 + fabs(a[i * LD + j]) : a[i * LD + j] / LD;
    for (int right = 0; right < 2; right++)
        for (int tr = 0; tr < 2; tr++) {
            memcpy(c, c0, sizeof(double) * LD * LD);
            const sqz_dtrsm_args t = {right, tr, M, N, -2.0, a, LD, c, LD};
            SQZ_ASSERT_OK(cpu->ops->dtrsm(cpu->ctx, &t));
            double worst = 0; /* op(A) X (left) or X op(A) (right) must give -2 B */
            for (int i = 0; i < M; i++)
                for (int j = 0; j < N; j++) {
                    double s = 0;
                    const int kk = right ? N : M;
                    for (int q = 0; q < kk; q++) {
                        const int r = right ? q : i, cc = right ? j : q; /* A's entry op(A)[r][cc] */
                        const int ar = tr ? cc : r, ac = tr ? r : cc;
                        const double av = ac > ar ? 0.0 : a[ar * LD + ac];
                        s += right ? c[i * LD + q] * av : av * c[q * LD + j];
                    }
                    worst = fmax(worst, fabs(s + 2.0 * c0[i * LD + j]));
                }
            assert_true(worst < 1e-12);
        }
    for (int i = 0; i < LD; i++) /* H = B B^T / LD + I in the lower triangle, NaN above */
        for (int j = 0; j < LD; j++) {
            double s = 0;
            for (int t = 0; t < LD; t++) s += b[i * LD + t] * b[j * LD + t];
            c[i * LD + j] = j > i ? NAN : s / LD + (i == j);
        }
    memcpy(c0, c, sizeof(double) * LD * LD);
    SQZ_ASSERT_OK(cpu->ops->dpotrf(cpu->ctx, c, K, LD));
    double worst = 0;
    for (int i = 0; i < K; i++)
        for (int j = 0; j <= i; j++) {
            double s = 0;
            for (int t = 0; t <= j; t++) s += c[i * LD + t] * c[j * LD + t];
            worst = fmax(worst, fabs(s - c0[i * LD + j]));
        }
    for (int i = 0; i < K; i++)
        for (int j = i + 1; j < LD; j++) assert_true(isnan(c[i * LD + j]));
    print_message("tile slots: dgemm, dtrsm (4 ways) within 1e-12; dpotrf n %d: largest |L L^T - A| %.3g\n", K, worst);
    assert_true(worst < 1e-12);
    c0[5 * LD + 5] = -1.0;
    assert_int_equal(cpu->ops->dpotrf(cpu->ctx, c0, K, LD), SQZ_ERR_NUMERIC);
    free(a), free(b), free(c), free(c0);
    sqz_backend_free(cpu);
}

/* ---- observers on real activations ------------------------------------------------------- */

static void test_observer_backends(void **state) {
    (void)state;
    SQZ_SKIP_UNLESS(cb_model_path());
    SQZ_SKIP_UNLESS(sqz_test_data("data/wiki.test.raw"));
    sqz_model *m;
    SQZ_ASSERT_OK(sqz_model_open(cb_model_path(), NULL, &m));
    sqz_calib_windows w = cb_windows(m, NW, 5);
    sqz_calib_block host, cpu_b, dev_b;
    cb_run_stats(m, &w, NULL, &host);
    sqz_backend *cpu;
    SQZ_ASSERT_OK(sqz_backend_cpu(0, &cpu));
    cb_run_stats(m, &w, cpu, &cpu_b);
    cb_compare(&host, &cpu_b, true, "CPU backend vs none");
    fake_device fd;
    fake_device_init(&fd, 0);
    fake_calls_xtx = fake_calls_colstats = fake_calls_cosine = 0;
    cb_run_stats(m, &w, &fd.b, &dev_b);
    assert_true(fake_calls_xtx >= 4 * NW * 2); /* every input, every window, both blocks */
    assert_int_equal(fake_live, 0);
    cb_compare(&host, &dev_b, false, "device path vs none");
    sqz_calib_block_free(&dev_b);
    /* the forward on the device too: E[x^2], E|x| and absmax from the device rows (colstats), the
     * block's cosines (cosine), the same bits */
    fake_calls_colstats = fake_calls_cosine = 0;
    cb_run_stats_fwd(m, &w, &fd.b, &fd.b, &dev_b);
    assert_true(fake_calls_colstats >= 4 * NW);
    assert_true(fake_calls_cosine >= NW);
    assert_int_equal(fake_live, 0);
    cb_compare(&host, &dev_b, false, "device forward and statistics vs none");
    sqz_calib_block_free(&host);
    sqz_calib_block_free(&cpu_b);
    sqz_calib_block_free(&dev_b);
    fake_device_free(&fd);
    sqz_backend_free(cpu);
    sqz_calib_windows_free(&w);
    sqz_model_free(m);
}

/* Window i of w through the model with observer ob on block LAYER. */
static void feed(sqz_session *s, const sqz_calib_windows *w, int64_t i, sqz_calib_observer *ob) {
    sqz_session_set_hook(s, sqz_calib_observer_hook, ob);
    SQZ_ASSERT_OK(sqz_forward(s, w->tokens + i * CTX, CTX, 0, CTX, NULL));
    sqz_session_set_hook(s, NULL, NULL);
}

static void test_observer_device_merge(void **state) {
    (void)state;
    SQZ_SKIP_UNLESS(cb_model_path());
    SQZ_SKIP_UNLESS(sqz_test_data("data/wiki.test.raw"));
    sqz_model *m;
    SQZ_ASSERT_OK(sqz_model_open(cb_model_path(), NULL, &m));
    sqz_calib_windows w = cb_windows(m, 4, 9);
    sqz_session_opts so = sqz_session_default_opts();
    so.max_tokens = CTX;
    so.n_threads = 1;
    sqz_session *s;
    SQZ_ASSERT_OK(sqz_session_new(m, &so, &s));
    fake_device fd;
    fake_device_init(&fd, 0);
    const sqz_calib_observe_opts oh = {.needs = SQZ_QSTAT_XTX}, od = {.needs = SQZ_QSTAT_XTX, .backend = &fd.b};
    sqz_calib_observer *ref, *a, *b;
    SQZ_ASSERT_OK(sqz_calib_observer_new(LAYER, &oh, &ref));
    SQZ_ASSERT_OK(sqz_calib_observer_new(LAYER, &od, &a));
    SQZ_ASSERT_OK(sqz_calib_observer_new(LAYER, &od, &b));
    for (int64_t i = 0; i < 4; i++) feed(s, &w, i, ref);
    feed(s, &w, 0, a);
    feed(s, &w, 1, b);
    feed(s, &w, 2, b);
    SQZ_ASSERT_OK(sqz__calib_observer_merge(a, b)); /* both sums come to the host */
    assert_int_equal(fake_live, 2);                 /* a's and b's upload buffers, no sums */
    feed(s, &w, 3, a);                              /* a device sum again, added at the end */
    sqz_calib_block rb, ab;
    SQZ_ASSERT_OK(sqz_calib_observer_finish(ref, &rb));
    SQZ_ASSERT_OK(sqz_calib_observer_finish(a, &ab));
    for (int i = 0; i < rb.n_inputs; i++) {
        const int64_t n = rb.in[i].st.n_in;
        const double *x = rb.in[i].xtx, *y = ab.in[i].xtx;
        assert_int_equal(ab.in[i].st.n_tokens, 4 * CTX);
        for (int64_t r = 0; r < n; r++)
            for (int64_t c = 0; c < n; c++)
                assert_true(cb_close_h(x[r * n + c], y[r * n + c], x[r * n + r], x[c * n + c], 1e-12));
    }
    sqz_calib_observer_free(ref);
    sqz_calib_observer_free(a);
    sqz_calib_observer_free(b);
    assert_int_equal(fake_live, 0);
    /* a backend without the slot is refused when the Hessian is wanted */
    fd.ops.xtx = NULL;
    assert_int_equal(sqz_calib_observer_new(LAYER, &od, &a), SQZ_ERR_UNSUPPORTED);
    sqz_calib_block_free(&rb);
    sqz_calib_block_free(&ab);
    fake_device_free(&fd);
    sqz_session_free(s);
    sqz_calib_windows_free(&w);
    sqz_model_free(m);
}

/* to_f32 narrows f64 (GPTQ's factor kept on a device) exactly as the host's (float) cast:
 * random values over many binades, halfway-ish and denormal-producing ones, infinities. */
static void test_to_f32_f64(void **state) {
    (void)state;
    sqz_backend *cpu = NULL;
    SQZ_ASSERT_OK(sqz_backend_cpu(0, &cpu));
    assert_true(sqz_backend_supports(cpu, SQZ_OP_TO_F32, SQZ_DTYPE_F64));
    enum { N = 4096 };
    double *src = malloc(N * sizeof *src);
    float *dst = malloc(N * sizeof *dst);
    assert_non_null(src);
    assert_non_null(dst);
    for (int i = 0; i < N; i++) src[i] = urand() * ldexp(1.0, (i % 300) - 160); /* 1e-48 .. 1e42 */
    src[0] = 1.0 + ldexp(1.0, -24); /* halfway between two floats: to even */
    src[1] = 1e-45;                 /* a float denormal */
    src[2] = 1e300;                 /* beyond float: inf */
    src[3] = -0.0;
    SQZ_ASSERT_OK(cpu->ops->to_f32(cpu->ctx, src, SQZ_DTYPE_F64, N, dst));
    int differ = 0;
    for (int i = 0; i < N; i++) {
        const float want = (float)src[i];
        differ += memcmp(&want, &dst[i], sizeof want) != 0;
    }
    printf("to_f32 f64: %d of %d differ from the (float) cast\n", differ, N);
    assert_int_equal(differ, 0);
    free(src);
    free(dst);
    sqz_backend_free(cpu);
}

/* sqz__rows_to_f32 on a pool gives the serial conversion's bytes for float and block dtypes
 * (large enough for the pool: 6.3 M elements), and the serial path for a small matrix. */
static void test_rows_to_f32(void **state) {
    (void)state;
    const int64_t rows = 4099, k = 1536, n = rows * k; /* rows not a multiple of the chunk */
    float *w = malloc((size_t)n * sizeof *w), *a = malloc((size_t)n * sizeof *a), *b = malloc((size_t)n * sizeof *b);
    assert_non_null(w);
    assert_non_null(a);
    assert_non_null(b);
    for (int64_t i = 0; i < n; i++) w[i] = (float)(urand() * 0.05);
    const sqz_dtype types[] = {SQZ_DTYPE_F16, SQZ_DTYPE_BF16, SQZ_DTYPE_Q4_K, SQZ_DTYPE_Q6_K, SQZ_DTYPE_Q8_0};
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
        size_t nb = 0;
        assert_true(sqz_dtype_nbytes(types[t], n, &nb));
        void *q = malloc(nb);
        assert_non_null(q);
        SQZ_ASSERT_OK(sqz_convert(SQZ_DTYPE_F32, w, types[t], q, n, NULL));
        SQZ_ASSERT_OK(sqz_convert(types[t], q, SQZ_DTYPE_F32, a, n, NULL));
        for (int threads = 1; threads <= 3; threads += 2) {
            memset(b, 0xff, (size_t)n * sizeof *b);
            SQZ_ASSERT_OK(sqz__rows_to_f32(types[t], q, nb, rows, k, b, threads));
            assert_memory_equal(a, b, (size_t)n * sizeof *a);
        }
        memset(b, 0xff, (size_t)k * 8 * sizeof *b); /* 8 rows: below the pool's size, serial */
        SQZ_ASSERT_OK(sqz__rows_to_f32(types[t], q, nb / (size_t)rows * 8, 8, k, b, 0));
        assert_memory_equal(a, b, (size_t)k * 8 * sizeof *a);
        printf("rows_to_f32 %s: %lld x %lld, 1 and 3 threads: the serial bytes\n", sqz_dtype_name(types[t]),
               (long long)rows, (long long)k);
        free(q);
    }
    free(w);
    free(a);
    free(b);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_to_f32_f64),
        cmocka_unit_test(test_rows_to_f32),
        cmocka_unit_test(test_xtx_slot),
        cmocka_unit_test(test_chol_slot),
        cmocka_unit_test(test_sgemm_slot),
        cmocka_unit_test(test_tile_slots),
        cmocka_unit_test(test_observer_backends),
        cmocka_unit_test(test_observer_device_merge),
    };
    return sqz_test_run(tests, NULL, NULL);
}

/* tests/gpu/test_gpu_calib_loop.c - the CUDA backend's calibration slots and the device paths of the
 * observers and GPTQ (issue 26), against the CPU backend / the host:
 *   xtx (beta 0 then 1, 3000 rows x 1536) within 1e-12 of sqrt(H_ii H_jj), the lower triangle
 *   not needed; chol_inv_upper: |U^T U H - I| < 1e-8 and U within 1e-9 of the CPU's (relative to
 *   its row's diagonal); sgemm (every transpose, padded leading dimensions) within 1e-5 relative
 *   (TF32 must be off); the observers of tinystories-656K (sqz_calib_run): X^T X within 1e-12, the
 *   other statistics bit for bit; GPTQ (q4_0, i4 g128 act-order, iq4_nl) on its block-1 layers:
 *   >= 99.9% of the weights dequantize to the host's values, device memory back to its start.
 * Prints what it measured (worst errors, agreement, times). Without a CUDA device: exit 77; a
 * backend without the slots (SQZ_OP_XTX/CHOL/SGEMM unsupported) skips the cases. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/backend_impl.h"
#include "quant/quant_internal.h"
#include "sqz/progress.h" /* sqz_now_seconds */
#include "unit/calib_backend_util.h"
#include "unit/quant_fixture.h"

static sqz_backend *gpu, *cpu;
static uint64_t rs = 0x13198A2E03707344ull;
static double urand(void) {
    rs ^= rs << 13;
    rs ^= rs >> 7;
    rs ^= rs << 17;
    return (double)(rs >> 11) / (double)(1ull << 52) - 1.0;
}

#define NEED(op)                                                                                         \
    do {                                                                                                 \
        if (!sqz_backend_supports(gpu, (op), SQZ_DTYPE_F32)) SQZ_SKIP("the CUDA backend lacks op %d", (int)(op)); \
    } while (0)

static void *up(const void *h, size_t n) {
    void *d = gpu->ops->alloc(gpu->ctx, n);
    assert_non_null(d);
    SQZ_ASSERT_OK(gpu->ops->upload(gpu->ctx, d, h, n));
    return d;
}

static void test_xtx(void **state) {
    (void)state;
    NEED(SQZ_OP_XTX);
    enum { M = 3000, K = 1536 };
    float *x = malloc(sizeof(float) * M * K);
    for (size_t i = 0; i < (size_t)M * K; i++) x[i] = (float)urand();
    double *hc = malloc(sizeof(double) * K * K), *hg = malloc(sizeof(double) * K * K);
    const sqz_xtx_args c0 = {.m = M / 2, .k = K, .x = x, .h = hc, .beta = 0.0};
    const sqz_xtx_args c1 = {.m = M - M / 2, .k = K, .x = x + (size_t)(M / 2) * K, .h = hc, .beta = 1.0};
    double t = sqz_now_seconds();
    SQZ_ASSERT_OK(cpu->ops->xtx(cpu->ctx, &c0));
    SQZ_ASSERT_OK(cpu->ops->xtx(cpu->ctx, &c1));
    const double t_cpu = sqz_now_seconds() - t;
    float *dx = up(x, sizeof(float) * M * K);
    double *dh = gpu->ops->alloc(gpu->ctx, sizeof(double) * K * K);
    assert_non_null(dh);
    t = sqz_now_seconds();
    sqz_xtx_args g0 = c0, g1 = c1;
    g0.x = dx;
    g0.h = dh;
    g1.x = dx + (size_t)(M / 2) * K;
    g1.h = dh;
    SQZ_ASSERT_OK(gpu->ops->xtx(gpu->ctx, &g0));
    SQZ_ASSERT_OK(gpu->ops->xtx(gpu->ctx, &g1));
    SQZ_ASSERT_OK(gpu->ops->synchronize(gpu->ctx));
    const double t_gpu = sqz_now_seconds() - t;
    SQZ_ASSERT_OK(gpu->ops->download(gpu->ctx, hg, dh, sizeof(double) * K * K));
    double worst = 0;
    for (int i = 0; i < K; i++)
        for (int j = i; j < K; j++) {
            const double e = fabs(hg[i * K + j] - hc[i * K + j]) / sqrt(hc[i * K + i] * hc[j * K + j]);
            if (!(e <= worst)) worst = e;
        }
    print_message("xtx %d x %d: largest difference %.3g of sqrt(H_ii H_jj); CPU %.4f s, GPU %.4f s\n", M, K, worst,
                  t_cpu, t_gpu);
    assert_true(worst < 1e-12);
    gpu->ops->free(gpu->ctx, dx);
    gpu->ops->free(gpu->ctx, dh);
    free(x);
    free(hc);
    free(hg);
}

static void test_chol(void **state) {
    (void)state;
    NEED(SQZ_OP_CHOL);
    enum { N = 384, M = 1200 };
    float *x = malloc(sizeof(float) * M * N);
    for (int i = 0; i < M * N; i++) x[i] = (float)urand();
    double *h = malloc(sizeof(double) * N * N), *uc = malloc(sizeof(double) * N * N), *ug = malloc(sizeof(double) * N * N);
    const sqz_xtx_args a = {.m = M, .k = N, .x = x, .h = h, .beta = 0.0};
    SQZ_ASSERT_OK(cpu->ops->xtx(cpu->ctx, &a));
    for (int i = 0; i < N; i++) {
        for (int j = 0; j < i; j++) h[i * N + j] = h[j * N + i];
        h[i * N + i] += 1.0;
    }
    memcpy(uc, h, sizeof(double) * N * N);
    SQZ_ASSERT_OK(cpu->ops->chol_inv_upper(cpu->ctx, uc, N));
    double *dh = up(h, sizeof(double) * N * N);
    SQZ_ASSERT_OK(gpu->ops->chol_inv_upper(gpu->ctx, dh, N));
    SQZ_ASSERT_OK(gpu->ops->download(gpu->ctx, ug, dh, sizeof(double) * N * N));
    double wu = 0, wi = 0;
    for (int i = 0; i < N; i++)
        for (int j = 0; j < N; j++) {
            if (j < i) assert_true(ug[i * N + j] == 0.0);
            const double e = fabs(ug[i * N + j] - uc[i * N + j]) / uc[i * N + i];
            if (!(e <= wu)) wu = e;
        }
    for (int i = 0; i < N; i += 7) /* rows of U^T U H - I */
        for (int j = 0; j < N; j++) {
            double s = 0;
            for (int t = 0; t < N; t++) {
                double utu = 0;
                for (int r = 0; r <= (i < t ? i : t); r++) utu += ug[r * N + i] * ug[r * N + t];
                s += utu * h[t * N + j];
            }
            if (!(fabs(s - (i == j)) <= wi)) wi = fabs(s - (i == j));
        }
    print_message("chol %d: U vs the CPU's %.3g (of the row's diagonal); |U^T U H - I| %.3g\n", N, wu, wi);
    assert_true(wu < 1e-9 && wi < 1e-8);
    for (int i = 0; i < N * N; i++) h[i] = i % (N + 1) == 0 ? -1.0 : 0.0;
    SQZ_ASSERT_OK(gpu->ops->upload(gpu->ctx, dh, h, sizeof(double) * N * N));
    assert_int_equal(gpu->ops->chol_inv_upper(gpu->ctx, dh, N), SQZ_ERR_NUMERIC);
    sqz_clear_error();
    gpu->ops->free(gpu->ctx, dh);
    free(x); free(h); free(uc); free(ug);
}

static void test_sgemm(void **state) {
    (void)state;
    NEED(SQZ_OP_SGEMM);
    enum { M = 300, N = 257, K = 129, PAD = 5, BIG = (M + PAD) * (K + N + PAD) };
    float *a = malloc(sizeof(float) * BIG), *b = malloc(sizeof(float) * BIG);
    float *cc = malloc(sizeof(float) * M * (N + PAD)), *cg = malloc(sizeof(float) * M * (N + PAD));
    for (int i = 0; i < BIG; i++) {
        a[i] = (float)urand();
        b[i] = (float)urand();
    }
    float *da = up(a, sizeof(float) * BIG), *db = up(b, sizeof(float) * BIG);
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
            const int64_t ldc = N + PAD;
            for (int i = 0; i < M * ldc; i++) cc[i] = (float)urand();
            float *dc = up(cc, sizeof(float) * M * ldc);
            sqz_sgemm_args g = {.trans_a = ta, .trans_b = tb, .m = M, .n = N, .k = K, .alpha = -1.0f, .a = a,
                                .lda = (ta ? M : K) + PAD, .b = b, .ldb = (tb ? K : N) + PAD, .beta = 1.0f, .c = cc,
                                .ldc = ldc};
            SQZ_ASSERT_OK(cpu->ops->sgemm(cpu->ctx, &g));
            g.a = da;
            g.b = db;
            g.c = dc;
            SQZ_ASSERT_OK(gpu->ops->sgemm(gpu->ctx, &g));
            SQZ_ASSERT_OK(gpu->ops->download(gpu->ctx, cg, dc, sizeof(float) * M * ldc));
            double worst = 0;
            for (int i = 0; i < M; i++)
                for (int j = 0; j < ldc; j++) {
                    const double e = fabs((double)cg[i * ldc + j] - cc[i * ldc + j]) / (fabs((double)cc[i * ldc + j]) + 1.0);
                    if (!(e <= worst)) worst = e;
                }
            print_message("sgemm trans_a %d trans_b %d: largest difference %.3g (relative to |c| + 1)\n", ta, tb, worst);
            assert_true(worst < 1e-5);
            gpu->ops->free(gpu->ctx, dc);
        }
    gpu->ops->free(gpu->ctx, da);
    gpu->ops->free(gpu->ctx, db);
    free(a); free(b); free(cc); free(cg);
}

static void test_observer(void **state) {
    (void)state;
    NEED(SQZ_OP_XTX);
    SQZ_SKIP_UNLESS(cb_model_path());
    SQZ_SKIP_UNLESS(sqz_test_data("data/wiki.test.raw"));
    sqz_model *m;
    SQZ_ASSERT_OK(sqz_model_open(cb_model_path(), NULL, &m));
    sqz_calib_windows w = cb_windows(m, 4, 5);
    sqz_calib_block host, dev;
    sqz_backend_mem m0, m1;
    sqz_backend_mem_stats(gpu, &m0);
    cb_run_stats(m, &w, NULL, &host);
    cb_run_stats(m, &w, gpu, &dev);
    sqz_backend_mem_stats(gpu, &m1);
    cb_compare(&host, &dev, false, "CUDA observer vs host");
    print_message("device memory in use before %zu, after %zu, peak %zu bytes\n", m0.in_use, m1.in_use, m1.peak);
    assert_true(m1.in_use == m0.in_use);
    sqz_calib_block_free(&host);
    sqz_calib_block_free(&dev);
    sqz_calib_windows_free(&w);
    sqz_model_free(m);
}

static double agree(const sqz_qmatrix *a, const sqz_qmatrix *b, int n) {
    int64_t same = 0, all = 0;
    for (int i = 0; i < n; i++) {
        const int64_t ne = a[i].n_out * a[i].n_in;
        float *x = malloc((size_t)ne * sizeof(float)), *y = malloc((size_t)ne * sizeof(float));
        SQZ_ASSERT_OK(sqz_qmatrix_to_f32(&a[i], x));
        SQZ_ASSERT_OK(sqz_qmatrix_to_f32(&b[i], y));
        for (int64_t j = 0; j < ne; j++) same += x[j] == y[j];
        all += ne;
        free(x);
        free(y);
    }
    return (double)same / (double)all;
}

static void test_gptq(void **state) {
    (void)state;
    NEED(SQZ_OP_CHOL);
    NEED(SQZ_OP_SGEMM);
    qfix f;
    qfix_load(&f, cb_model_path(), 1, 256, 4);
    int64_t n_out, n_in;
    sqz_qlinear lin = {.w = qfix_weight(&f, SQZ_ROLE_FFN_DOWN, &n_out, &n_in), .name = "ffn_down"};
    lin.n_out = n_out;
    sqz_qstats_buf sb;
    SQZ_ASSERT_OK(sqz_qstats_compute(f.x[QF_DOWN], f.n_calib, n_in, SQZ_QSTAT_XTX, 0, &sb));
    const sqz_qtarget ts[] = {{SQZ_QFMT_Q4_0, 32}, {SQZ_QFMT_I4_SYM, 128}, {SQZ_QFMT_IQ4_NL, 0}};
    for (int k = 0; k < 3; k++) {
        sqz_quant_opts o = sqz_quant_default_opts();
        o.target = ts[k];
        o.act_order = k == 1;
        sqz_qmatrix h, g;
        memset(&h, 0, sizeof h);
        memset(&g, 0, sizeof g);
        SQZ_ASSERT_OK(sqz_quant_gptq(&lin, 1, &sb.s, &o, &h, NULL));
        sqz_backend_mem m0, m1;
        sqz_backend_mem_stats(gpu, &m0);
        o.backend = gpu;
        SQZ_ASSERT_OK(sqz_quant_gptq(&lin, 1, &sb.s, &o, &g, NULL));
        sqz_backend_mem_stats(gpu, &m1);
        const double a = agree(&h, &g, 1);
        print_message("gptq %s g%d%s on ffn_down (%lld x %lld): %.5f%% of the weights as the host's, loss %.6g vs "
                      "%.6g, host %.4f s, CUDA %.4f s\n", sqz_qformat_name(ts[k].fmt), (int)ts[k].group,
                      o.act_order ? " act-order" : "", (long long)n_out, (long long)n_in, 100.0 * a, g.loss, h.loss,
                      h.seconds, g.seconds);
        assert_true(a >= 0.999);
        assert_true(m1.in_use == m0.in_use);
        sqz_qmatrix_free(&h);
        sqz_qmatrix_free(&g);
    }
    free((void *)lin.w);
    sqz_qstats_buf_free(&sb);
    qfix_free(&f);
}

int main(void) {
    if (sqz_cuda_device_count() == 0 || sqz_backend_cuda(-1, &gpu) != SQZ_OK) {
        printf("no usable CUDA device (%s): the calibration slots' GPU test is skipped\n", sqz_last_error());
        return SQZ_TEST_SKIP;
    }
    SQZ_ASSERT_OK(sqz_backend_cpu(0, &cpu));
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_xtx),  cmocka_unit_test(test_chol), cmocka_unit_test(test_sgemm),
        cmocka_unit_test(test_observer), cmocka_unit_test(test_gptq),
    };
    const int rc = sqz_test_run(tests, NULL, NULL);
    sqz_backend_free(cpu);
    sqz_backend_free(gpu);
    return rc;
}

/* tests/unit/test_chol_tiles.c - GPTQ's factor in tiles and the Hessian's row panels, the pieces
 * that let --gpu-mem go below a dense Hessian (issue 26), on real activations (tinystories-656K
 * block 1: inputs 128 and 384 wide; SmolLM2-135M block 0's ffn_down input, 1536 wide, when its
 * package is installed):
 *   - the tiled factor on cpu-offload (tiles of 48, 100 and the default 512) is kernels/cpu/chol.c's
 *     U to 1e-9 of its largest entry;
 *   - its bits do not depend on the budget: every tile resident, 6, 9 or 14 tiles (the cache then
 *     moves tiles in and out many times) give the same bytes, and the device's peak stays within
 *     the budget; on a device whose memory starts as NaN (fake_device.h) too, so nothing unwritten
 *     is read;
 *   - a Hessian that is not positive definite is SQZ_ERR_NUMERIC, a budget below six tiles
 *     SQZ_ERR_NOMEM naming --gpu-mem (six tiles);
 *   - the xtx slot's row panels (CPU and cpu-offload) are the whole matrix's entries bit for bit,
 *     over two updates (beta 0, then 1);
 *   - GPTQ (Q4_0 and IQ4_NL) through cpu-offload capped near its floor writes the uncapped bytes. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/backend_impl.h"
#include "fake_device.h"
#include "kernels/cpu/linalg.h"
#include "quant/chol_tiles.h"
#include "quant_fixture.h"

/* The damped Hessian of rows x (n, k), GPTQ's 1% of the mean diagonal: full, row-major. */
static double *damped(const float *x, int64_t n, int64_t k) {
    sqz_qstats_buf sb;
    SQZ_ASSERT_OK(sqz_qstats_compute(x, n, k, SQZ_QSTAT_XTX, 0, &sb));
    double *h = malloc((size_t)(k * k) * sizeof(double));
    memcpy(h, sb.s.xtx, (size_t)(k * k) * sizeof(double));
    sqz_qstats_buf_free(&sb);
    double mean = 0;
    for (int64_t j = 0; j < k; j++) mean += h[j * k + j];
    for (int64_t j = 0; j < k; j++) h[j * k + j] += 0.01 * mean / (double)k;
    return h;
}

/* The tiled factor of h on a fresh cpu-offload backend within `budget`; its device peak in *peak. */
static double *tiled(const double *h, int64_t k, size_t budget, size_t *peak, sqz__chol_tiles_stats *st) {
    sqz_backend *off;
    SQZ_ASSERT_OK(sqz_backend_cpu_offload(0, &off));
    double *u = malloc((size_t)(k * k) * sizeof(double));
    memcpy(u, h, (size_t)(k * k) * sizeof(double));
    SQZ_ASSERT_OK(sqz__chol_tiles(off, u, k, budget, st));
    sqz_backend_mem m;
    sqz_backend_mem_stats(off, &m);
    assert_int_equal(m.in_use, 0);
    *peak = m.peak;
    sqz_backend_free(off);
    return u;
}

static void one_width(const float *x, int64_t n, int64_t k, const char *label) {
    double *h = damped(x, n, k);
    double *ref = malloc((size_t)(k * k) * sizeof(double));
    memcpy(ref, h, (size_t)(k * k) * sizeof(double));
    SQZ_ASSERT_OK(sqz__chol_inverse_upper(ref, k));
    double big = 0;
    for (int64_t i = 0; i < k * k; i++) big = fmax(big, fabs(ref[i]));
    const int64_t sizes[] = {48, 100, 0};
    for (size_t t = 0; t < sizeof sizes / sizeof sizes[0]; t++) {
        sqz__chol_tiles_set_size(sizes[t]);
        const int64_t ts = sqz__chol_tiles_size() < k ? sqz__chol_tiles_size() : k;
        const size_t tb = (size_t)(ts * ts) * sizeof(double);
        size_t peak0;
        sqz__chol_tiles_stats s0;
        double *u0 = tiled(h, k, 0, &peak0, &s0);
        double dmax = 0;
        for (int64_t i = 0; i < k * k; i++) dmax = fmax(dmax, fabs(u0[i] - ref[i]));
        for (int64_t i = 0; i < k; i++)
            for (int64_t j = 0; j < i; j++) assert_true(u0[i * k + j] == 0.0);
        print_message("  %-22s tiles of %3lld (%lld x %lld): |U - chol.c's U| <= %.2e of max |U|; all resident: "
                      "peak %.2f MB, %lld in, %lld out\n",
                      label, (long long)ts, (long long)s0.tiles, (long long)s0.tiles, dmax / big, (double)peak0 / 1e6,
                      (long long)s0.loads, (long long)s0.stores);
        assert_true(dmax <= 1e-9 * big);
        const int64_t all = s0.tiles * (s0.tiles + 1) / 2;
        assert_int_equal(s0.loads, all);
        const int slots[] = {3, 6, 11};
        for (int b = 0; b < 3; b++) {
            const size_t budget = (size_t)(slots[b] + 3) * tb; /* + two temporaries and workspace */
            size_t peak;
            sqz__chol_tiles_stats s;
            double *u = tiled(h, k, budget, &peak, &s);
            assert_memory_equal(u, u0, (size_t)(k * k) * sizeof(double));
            assert_true(peak <= budget);
            if (slots[b] < all) assert_true(s.loads > all);
            print_message("  %-22s   budget %2d tiles: the same bytes, peak %.2f MB <= %.2f MB, %lld in, %lld out\n",
                          "", slots[b] + 3, (double)peak / 1e6, (double)budget / 1e6, (long long)s.loads,
                          (long long)s.stores);
            free(u);
        }
        fake_device fd; /* memory that starts as NaN */
        fake_device_init(&fd, 0);
        double *uf = malloc((size_t)(k * k) * sizeof(double));
        memcpy(uf, h, (size_t)(k * k) * sizeof(double));
        SQZ_ASSERT_OK(sqz__chol_tiles(&fd.b, uf, k, 6 * tb, NULL));
        assert_memory_equal(uf, u0, (size_t)(k * k) * sizeof(double));
        assert_int_equal(fake_live, 0);
        fake_device_free(&fd);
        free(uf);
        free(u0);
    }
    sqz__chol_tiles_set_size(0);
    free(ref);
    free(h);
}

static void test_factor(void **state) {
    (void)state;
    qfix f;
    qfix_load(&f, sqz_test_data("models/tinystories-656K"), 1, 256, 4);
    one_width(f.x[QF_QKV], f.n_calib, f.dim[QF_QKV], "tinystories q|k|v");
    one_width(f.x[QF_DOWN], f.n_calib, f.dim[QF_DOWN], "tinystories down");
    qfix_free(&f);
    if (!sqz_test_smollm2()) return;
    qfix_load(&f, sqz_test_smollm2(), 0, 256, 4);
    one_width(f.x[QF_DOWN], f.n_calib, f.dim[QF_DOWN], "SmolLM2 down");
    qfix_free(&f);
}

static void test_refusals(void **state) {
    (void)state;
    sqz_backend *off;
    SQZ_ASSERT_OK(sqz_backend_cpu_offload(0, &off));
    const int64_t k = 200;
    double *h = calloc((size_t)(k * k), sizeof(double));
    for (int64_t i = 0; i < k; i++) h[i * k + i] = i == 150 ? -1.0 : 2.0;
    sqz__chol_tiles_set_size(64);
    assert_int_equal(sqz__chol_tiles(off, h, k, 0, NULL), SQZ_ERR_NUMERIC);
    for (int64_t i = 0; i < k; i++) h[i * k + i] = 2.0;
    assert_int_equal(sqz__chol_tiles(off, h, k, 1, NULL), SQZ_ERR_NOMEM);
    assert_non_null(strstr(sqz_last_error(), "--gpu-mem"));
    SQZ_ASSERT_OK(sqz__chol_tiles(off, h, k, 0, NULL));
    for (int64_t i = 0; i < k; i++) assert_true(fabs(h[i * k + i] - 1.0 / sqrt(2.0)) < 1e-15);
    sqz__chol_tiles_set_size(0);
    sqz_backend_mem m;
    sqz_backend_mem_stats(off, &m);
    assert_int_equal(m.in_use, 0);
    free(h);
    sqz_backend_free(off);
}

/* Every row panel of 128 and 256 rows, updated twice, against the whole matrix, on backend b
 * (its memory is host memory for both the CPU and cpu-offload). */
static void panels_on(sqz_backend *b, const float *x, int64_t n, int64_t k) {
    double *whole = malloc((size_t)(k * k) * sizeof(double));
    const int64_t half = n / 2;
    SQZ_ASSERT_OK(b->ops->xtx(b->ctx, &(sqz_xtx_args){.m = half, .k = k, .x = x, .h = whole, .beta = 0.0}));
    SQZ_ASSERT_OK(b->ops->xtx(b->ctx, &(sqz_xtx_args){.m = n - half, .k = k, .x = x + half * k, .h = whole, .beta = 1.0}));
    const int64_t heights[] = {128, 256};
    for (int hi = 0; hi < 2; hi++)
        for (int64_t r0 = 0; r0 < k; r0 += heights[hi]) {
            const int64_t r1 = r0 + heights[hi] < k ? r0 + heights[hi] : k, w = k - r0;
            double *p = malloc((size_t)((r1 - r0) * w) * sizeof(double));
            for (int64_t i = 0; i < (r1 - r0) * w; i++) p[i] = NAN; /* beta 0 must ignore it */
            SQZ_ASSERT_OK(b->ops->xtx(b->ctx, &(sqz_xtx_args){.m = half, .k = k, .x = x, .h = p, .beta = 0.0,
                                                             .r0 = r0, .r1 = r1, .ldh = w}));
            SQZ_ASSERT_OK(b->ops->xtx(b->ctx, &(sqz_xtx_args){.m = n - half, .k = k, .x = x + half * k, .h = p,
                                                             .beta = 1.0, .r0 = r0, .r1 = r1, .ldh = w}));
            for (int64_t r = r0; r < r1; r++)
                assert_memory_equal(p + (r - r0) * w + (r - r0), whole + r * k + r, (size_t)(k - r) * sizeof(double));
            free(p);
        }
    /* a panel that does not start on a 128-row boundary is refused */
    double one = 0;
    assert_int_equal(b->ops->xtx(b->ctx, &(sqz_xtx_args){.m = 1, .k = k, .x = x, .h = &one, .beta = 0.0, .r0 = 64,
                                                        .r1 = 128, .ldh = k}),
                     SQZ_ERR_INVALID_ARG);
    free(whole);
}

static void test_xtx_panels(void **state) {
    (void)state;
    qfix f;
    qfix_load(&f, sqz_test_data("models/tinystories-656K"), 1, 256, 4);
    sqz_backend *cpu, *off;
    SQZ_ASSERT_OK(sqz_backend_cpu(0, &cpu));
    SQZ_ASSERT_OK(sqz_backend_cpu_offload(0, &off));
    panels_on(cpu, f.x[QF_DOWN], f.n_calib, f.dim[QF_DOWN]);
    panels_on(off, f.x[QF_DOWN], f.n_calib, f.dim[QF_DOWN]);
    print_message("  xtx row panels of 128 and 256 rows of the 384-wide down input: the whole matrix's bits "
                  "(CPU, cpu-offload)\n");
    sqz_backend_free(off);
    sqz_backend_free(cpu);
    qfix_free(&f);
}

/* GPTQ of tinystories' down layer through cpu-offload, tiles of 100: uncapped, then capped at the
 * uncapped peak less the factor's resident tiles (so the tiles and U stream): the same bytes. */
static void test_gptq_capped(void **state) {
    (void)state;
    qfix f;
    qfix_load(&f, sqz_test_data("models/tinystories-656K"), 1, 256, 4);
    int64_t n_out, n_in;
    float *w = qfix_weight(&f, SQZ_ROLE_FFN_DOWN, &n_out, &n_in);
    sqz_qstats_buf sb;
    SQZ_ASSERT_OK(sqz_qstats_compute(f.x[QF_DOWN], f.n_calib, n_in, SQZ_QSTAT_XTX, 0, &sb));
    const sqz_qlinear lin = {.w = w, .n_out = n_out, .name = "down"};
    sqz__chol_tiles_set_size(100);
    const sqz_qformat fmts[] = {SQZ_QFMT_Q4_0, SQZ_QFMT_IQ4_NL};
    for (int fi = 0; fi < 2; fi++) {
        sqz_quant_opts o = sqz_quant_default_opts();
        o.target = (sqz_qtarget){fmts[fi], fmts[fi] == SQZ_QFMT_Q4_0 ? 32 : 0};
        sqz_qmatrix q0 = {0}, q1 = {0};
        size_t peak[2];
        for (int capped = 0; capped < 2; capped++) {
            sqz_backend *off;
            SQZ_ASSERT_OK(sqz_backend_cpu_offload(0, &off));
            /* the sweep's weights, a block of errors and U's rows (0.46 MB), or 7 tiles of the factor (U
             * alone would be 0.59 MB, the resident tiles 0.96 MB) */
            const size_t cap = 600000;
            if (capped) SQZ_ASSERT_OK(sqz_backend_set_mem_cap(off, cap));
            o.backend = off;
            SQZ_ASSERT_OK(sqz_quant_gptq(&lin, 1, &sb.s, &o, capped ? &q1 : &q0, NULL));
            sqz_backend_mem m;
            sqz_backend_mem_stats(off, &m);
            peak[capped] = m.peak;
            if (capped) assert_true(m.peak <= cap);
            sqz_backend_free(off);
        }
        assert_int_equal(q0.nbytes, q1.nbytes);
        assert_memory_equal(q0.data, q1.data, q0.nbytes);
        assert_true(q0.loss == q1.loss);
        assert_true(peak[1] < peak[0]);
        print_message("  GPTQ %s of tinystories down through cpu-offload: uncapped peak %.2f MB, capped %.2f MB, "
                      "the same bytes\n",
                      sqz_qformat_name(fmts[fi]), (double)peak[0] / 1e6, (double)peak[1] / 1e6);
        sqz_qmatrix_free(&q0);
        sqz_qmatrix_free(&q1);
    }
    sqz__chol_tiles_set_size(0);
    sqz_qstats_buf_free(&sb);
    free(w);
    qfix_free(&f);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_factor),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_xtx_panels),
        cmocka_unit_test(test_gptq_capped),
    };
    return sqz_test_run(tests, NULL, NULL);
}

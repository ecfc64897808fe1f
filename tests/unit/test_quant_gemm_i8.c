/* tests/unit/test_quant_gemm_i8.c - the vectorized INT8 GEMM (kernels/cpu/gemm_i8.c) against the
 * scalar reference (gemm_ref.c): bit-identical int32 sums and f32/f16 outputs on odd shapes
 * (m = 1, 3, 17; k not a multiple of 16 or 32; every int8 value including -128), on real
 * weights and activations, and through the CPU backend's gemm_i8 slot. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/backend_impl.h"
#include "kernels/cpu/gemm_i8.h"
#include "kernels/cpu/gemm_ref.h"
#include "real_weights.h"
#include "test_util.h"

static uint64_t rng = 0x2545F4914F6CDD1Dull;
static uint32_t rnd(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng >> 11);
}

static void fill_i8(int8_t *p, size_t n, int extremes) {
    for (size_t i = 0; i < n; i++) {
        uint32_t r = rnd();
        p[i] = extremes && (r & 7) == 0 ? (int8_t)((r >> 3) & 1 ? 127 : -128) : (int8_t)(r >> 8);
    }
}

static void check_shape(int64_t m, int64_t n, int64_t k, int extremes) {
    int8_t *x = malloc((size_t)(m * k) + 1), *w = malloc((size_t)(n * k) + 1);
    int32_t *a = malloc((size_t)(m * n) * 4 + 4), *b = malloc((size_t)(m * n) * 4 + 4);
    float *xs = malloc((size_t)m * 4), *ws = malloc((size_t)n * 4);
    float *y0 = malloc((size_t)(m * n) * 4 + 4), *y1 = malloc((size_t)(m * n) * 4 + 4);
    uint16_t *h0 = malloc((size_t)(m * n) * 2 + 2), *h1 = malloc((size_t)(m * n) * 2 + 2);
    fill_i8(x, (size_t)(m * k), extremes);
    fill_i8(w, (size_t)(n * k), extremes);
    for (int64_t i = 0; i < m; i++) xs[i] = (float)(rnd() % 1000 + 1) * 1e-4f;
    for (int64_t j = 0; j < n; j++) ws[j] = (float)(rnd() % 1000 + 1) * 3e-5f;
    SQZ_ASSERT_OK(sqz__gemm_i8_acc(SQZ_I8_PATH_SCALAR, m, n, k, x, w, a));
    SQZ_ASSERT_OK(sqz__gemm_i8_acc(SQZ_I8_PATH_AUTO, m, n, k, x, w, b));
    assert_memory_equal(a, b, (size_t)(m * n) * 4);
    /* the scalar path is the reference loop itself */
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            int64_t s = 0;
            for (int64_t t = 0; t < k; t++) s += (int64_t)x[i * k + t] * w[j * k + t];
            assert_int_equal(s, a[i * n + j]);
        }
    SQZ_ASSERT_OK(sqz__gemm_i8_ref(m, n, k, x, xs, w, ws, y0, SQZ_DTYPE_F32));
    SQZ_ASSERT_OK(sqz__gemm_i8_cpu(SQZ_I8_PATH_AUTO, m, n, k, x, xs, w, ws, y1, SQZ_DTYPE_F32));
    assert_memory_equal(y0, y1, (size_t)(m * n) * 4);
    SQZ_ASSERT_OK(sqz__gemm_i8_ref(m, n, k, x, xs, w, ws, h0, SQZ_DTYPE_F16));
    SQZ_ASSERT_OK(sqz__gemm_i8_cpu(SQZ_I8_PATH_AUTO, m, n, k, x, xs, w, ws, h1, SQZ_DTYPE_F16));
    assert_memory_equal(h0, h1, (size_t)(m * n) * 2);
    if (sqz__gemm_i8_has_avx2()) {
        SQZ_ASSERT_OK(sqz__gemm_i8_acc(SQZ_I8_PATH_AVX2, m, n, k, x, w, b));
        assert_memory_equal(a, b, (size_t)(m * n) * 4);
    }
    free(x); free(w); free(a); free(b); free(xs); free(ws); free(y0); free(y1); free(h0); free(h1);
}

static void test_odd_shapes(void **state) {
    (void)state;
    print_message("avx2: %s\n", sqz__gemm_i8_has_avx2() ? "yes" : "no (scalar only)");
    const int64_t ms[] = {1, 2, 3, 17};
    const int64_t ns[] = {1, 3, 4, 5, 33};
    const int64_t ks[] = {1, 15, 16, 17, 31, 33, 100, 577};
    for (size_t a = 0; a < sizeof ms / sizeof ms[0]; a++)
        for (size_t b = 0; b < sizeof ns / sizeof ns[0]; b++)
            for (size_t c = 0; c < sizeof ks / sizeof ks[0]; c++) check_shape(ms[a], ns[b], ks[c], (int)(c & 1));
    check_shape(0, 5, 7, 0);
    check_shape(3, 0, 7, 0);
    check_shape(3, 5, 0, 0);
    /* panels: n beyond one L2 panel, long k (all -128: the largest sums) */
    check_shape(5, 700, 1000, 1);
    int8_t *x = malloc(3 * 4099), *w = malloc(2 * 4099);
    memset(x, 0x80, 3 * 4099);
    memset(w, 0x80, 2 * 4099);
    int32_t acc[6];
    SQZ_ASSERT_OK(sqz__gemm_i8_acc(SQZ_I8_PATH_AUTO, 3, 2, 4099, x, w, acc));
    for (int i = 0; i < 6; i++) assert_int_equal(acc[i], 4099 * 16384);
    free(x);
    free(w);
}

static void test_errors(void **state) {
    (void)state;
    int8_t x[4] = {0}, w[4] = {0};
    int32_t a[1];
    float s[1] = {1}, y[1];
    assert_int_equal(sqz__gemm_i8_acc(SQZ_I8_PATH_AUTO, -1, 1, 1, x, w, a), SQZ_ERR_INVALID_ARG);
    assert_int_equal(sqz__gemm_i8_acc(SQZ_I8_PATH_AUTO, 1, 1, SQZ_GEMM_I8_MAX_K + 1, x, w, a), SQZ_ERR_INVALID_ARG);
    assert_int_equal(sqz__gemm_i8_cpu(SQZ_I8_PATH_AUTO, 1, 1, 4, x, s, w, s, y, SQZ_DTYPE_BF16), SQZ_ERR_INVALID_ARG);
    assert_int_equal(sqz__gemm_i8_acc((sqz_i8_path)9, 1, 1, 4, x, w, a), SQZ_ERR_INVALID_ARG);
}

/* Real weights (stories260K w1, 860 x 64) and real-valued inputs (token embeddings), quantized
 * per row, through the backend slot with the fused x_f32 path and without. */
static void test_real_backend(void **state) {
    (void)state;
    float *rw = sqz_rw_need();
    const int64_t m = 17, n = 860, k = 64;
    const float *wf = rw + SQZ_RW_W1, *xf = rw + SQZ_RW_TOK_EMB + 5 * k;
    int8_t *wq = malloc((size_t)(n * k)), *xq = malloc((size_t)(m * k)), *xq2 = malloc((size_t)(m * k));
    float *wsc = malloc((size_t)n * 4), *xsc = malloc((size_t)m * 4), *xsc2 = malloc((size_t)m * 4);
    float *y0 = malloc((size_t)(m * n) * 4), *y1 = malloc((size_t)(m * n) * 4);
    sqz__quantize_rows_i8_ref(wf, n, k, wq, wsc);
    sqz__quantize_rows_i8_ref(xf, m, k, xq, xsc);
    SQZ_ASSERT_OK(sqz__gemm_i8_ref(m, n, k, xq, xsc, wq, wsc, y0, SQZ_DTYPE_F32));
    sqz_backend *be;
    SQZ_ASSERT_OK(sqz_backend_cpu(0, &be));
    assert_true(sqz_backend_supports(be, SQZ_OP_GEMM_I8, SQZ_DTYPE_I8));
    sqz_gemm_i8_args a = {.m = m, .n = n, .k = k, .x_f32 = xf, .x = xq2, .x_scale = xsc2, .w = wq, .w_scale = wsc,
                          .y = y1, .y_dtype = SQZ_DTYPE_F32};
    SQZ_ASSERT_OK(be->ops->gemm_i8(be->ctx, &a));
    assert_memory_equal(y0, y1, (size_t)(m * n) * 4);
    assert_memory_equal(xq, xq2, (size_t)(m * k));
    a.x_f32 = NULL;
    memset(y1, 0, (size_t)(m * n) * 4);
    SQZ_ASSERT_OK(be->ops->gemm_i8(be->ctx, &a));
    assert_memory_equal(y0, y1, (size_t)(m * n) * 4);
    sqz_backend_free(be);
    free(rw); free(wq); free(xq); free(xq2); free(wsc); free(xsc); free(xsc2); free(y0); free(y1);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_odd_shapes),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_real_backend),
    };
    return sqz_test_run(tests, NULL, NULL);
}

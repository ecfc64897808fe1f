/* tests/unit/test_gemm_ref.c - the scalar GEMM references (W8A8, W4A16, per-token
 * quantization), the CPU backend's gemm slots, and the prepared int4 layout (pack /
 * unpack round trips on random and real weights). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/backend_impl.h"
#include "core/blocks.h"
#include "core/internal.h"
#include "core/dequant.h"
#include "quant/gguf/quant_gguf.h"
#include "kernels/cpu/gemm_ref.h"
#include "kernels/cpu/w4_pack.h"
#include "real_weights.h"
#include "test_util.h"

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint32_t rnd(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 16);
}
static float rndf(void) { return (float)(rnd() & 0xFFFFFF) / 16777216.0f * 2.0f - 1.0f; } /* [-1, 1) */

/* ---- per-token quantization ---------------------------------------------------- */
static void test_quantize_rows(void **state) {
    (void)state;
    /* absmax 127 -> scale exactly 1: round half to even is visible */
    const float x[3][8] = {
        {127.0f, 2.5f, 3.5f, -2.5f, -0.5f, 0.5f, 1.5f, -127.0f},
        {0, 0, 0, 0, 0, 0, 0, 0},
        {1.0f, NAN, 2.0f, 0, 0, 0, 0, 0},
    };
    int8_t q[3][8];
    float s[3];
    sqz__quantize_rows_i8_ref(&x[0][0], 3, 8, &q[0][0], s);
    const int8_t want[8] = {127, 2, 4, -2, 0, 0, 2, -127};
    assert_memory_equal(q[0], want, 8);
    assert_true(s[0] == 1.0f);
    assert_true(s[1] == 0.0f);
    assert_true(isnan(s[2]));
    for (int j = 0; j < 8; j++) { assert_int_equal(q[1][j], 0); assert_int_equal(q[2][j], 0); }

    const float inf_row[4] = {1.0f, -INFINITY, 0.0f, 3.0f};
    const float tiny_row[4] = {1e-45f, -1e-45f, 0.0f, 0.0f}; /* absmax / 127 underflows to 0 */
    sqz__quantize_rows_i8_ref(inf_row, 1, 4, q[0], s);
    assert_true(isnan(s[0]));
    sqz__quantize_rows_i8_ref(tiny_row, 1, 4, q[0], s);
    assert_true(s[0] == 0.0f);
    for (int j = 0; j < 4; j++) assert_int_equal(q[0][j], 0);

    /* random rows: |x - q d| <= d / 2 and the absmax maps to +-127 */
    enum { M = 5, K = 300 };
    float *xr = malloc(sizeof(float) * M * K);
    int8_t *qr = malloc(M * K);
    float sr[M];
    for (int i = 0; i < M * K; i++) xr[i] = rndf() * (float)(1 + i / K);
    sqz__quantize_rows_i8_ref(xr, M, K, qr, sr);
    for (int i = 0; i < M; i++) {
        int maxq = 0;
        for (int j = 0; j < K; j++) {
            const float v = xr[i * K + j];
            assert_true(fabsf(v - qr[i * K + j] * sr[i]) <= 0.5001f * sr[i]);
            if (abs(qr[i * K + j]) > maxq) maxq = abs(qr[i * K + j]);
        }
        assert_int_equal(maxq, 127);
    }
    free(xr);
    free(qr);
}

/* ---- W8A8 reference ------------------------------------------------------------- */
static void test_gemm_i8_ref(void **state) {
    (void)state;
    const int8_t x[2 * 4] = {1, -2, 3, 4, -128, 127, 0, 5};
    const int8_t w[3 * 4] = {2, 2, 2, 2, -1, 0, 1, 0, 127, -128, 1, -1};
    const float xs[2] = {0.5f, 2.0f}, ws[3] = {1.0f, 0.25f, 0.001f};
    float y[6];
    SQZ_ASSERT_OK(sqz__gemm_i8_ref(2, 3, 4, x, xs, w, ws, y, SQZ_DTYPE_F32));
    const int acc[6] = {12, 2, 127 + 256 + 3 - 4, 8, 128, -128 * 127 - 127 * 128 - 5};
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 3; j++) assert_true(y[i * 3 + j] == ((float)acc[i * 3 + j] * xs[i]) * ws[j]);
    uint16_t yh[6];
    SQZ_ASSERT_OK(sqz__gemm_i8_ref(2, 3, 4, x, xs, w, ws, yh, SQZ_DTYPE_F16));
    for (int i = 0; i < 6; i++) assert_int_equal(yh[i], sqz_fp32_to_fp16(y[i]));
    assert_int_equal(sqz__gemm_i8_ref(1, 1, SQZ_GEMM_I8_MAX_K + 1, x, xs, w, ws, y, SQZ_DTYPE_F32), SQZ_ERR_INVALID_ARG);
    assert_int_equal(sqz__gemm_i8_ref(1, 1, 4, x, xs, w, ws, y, SQZ_DTYPE_BF16), SQZ_ERR_INVALID_ARG);
    assert_int_equal(sqz__gemm_i8_ref(-1, 1, 4, x, xs, w, ws, y, SQZ_DTYPE_F32), SQZ_ERR_INVALID_ARG);

    /* random int8 at odd sizes against 64-bit sums */
    enum { M = 7, N = 9, K = 333 };
    int8_t *xa = malloc(M * K), *wa = malloc(N * K);
    float xsa[M], wsa[N], ya[M * N];
    for (int i = 0; i < M * K; i++) xa[i] = (int8_t)(rnd() & 0xFF);
    for (int i = 0; i < N * K; i++) wa[i] = (int8_t)(rnd() & 0xFF);
    for (int i = 0; i < M; i++) xsa[i] = 0.01f * (float)(i + 1);
    for (int j = 0; j < N; j++) wsa[j] = 0.003f * (float)(j + 1);
    SQZ_ASSERT_OK(sqz__gemm_i8_ref(M, N, K, xa, xsa, wa, wsa, ya, SQZ_DTYPE_F32));
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            long long s = 0;
            for (int t = 0; t < K; t++) s += (long long)xa[i * K + t] * wa[j * K + t];
            assert_true(ya[i * N + j] == ((float)s * xsa[i]) * wsa[j]);
        }
    free(xa);
    free(wa);
}

/* ---- CPU backend slots ------------------------------------------------------------- */
static void test_cpu_gemm_i8(void **state) {
    (void)state;
    sqz_backend *b;
    SQZ_ASSERT_OK(sqz_backend_cpu(1, &b));
    assert_true(sqz_backend_supports(b, SQZ_OP_GEMM_I8, SQZ_DTYPE_I8));
    assert_true(sqz_backend_supports(b, SQZ_OP_GEMM_W4A16, SQZ_DTYPE_Q4_0));
    assert_true(sqz_backend_supports(b, SQZ_OP_GEMM_W4A16, SQZ_DTYPE_Q4_1));
    assert_false(sqz_backend_supports(b, SQZ_OP_GEMM_W4A16, SQZ_DTYPE_Q4_K));
    enum { M = 3, N = 17, K = 100 };
    float *xf = malloc(sizeof(float) * M * K), *wf = malloc(sizeof(float) * N * K);
    for (int i = 0; i < M * K; i++) xf[i] = rndf();
    for (int i = 0; i < N * K; i++) wf[i] = 0.1f * rndf();
    int8_t xq[M * K], xq2[M * K], wq[N * K];
    float xs[M], xs2[M], ws[N], y[M * N], y2[M * N];
    sqz__quantize_rows_i8_ref(wf, N, K, wq, ws);
    sqz_gemm_i8_args a = {.m = M, .n = N, .k = K, .x_f32 = xf, .x = xq, .x_scale = xs, .w = wq, .w_scale = ws,
                          .y = y, .y_dtype = SQZ_DTYPE_F32};
    SQZ_ASSERT_OK(b->ops->gemm_i8(b->ctx, &a));
    sqz__quantize_rows_i8_ref(xf, M, K, xq2, xs2);
    assert_memory_equal(xq, xq2, sizeof xq);
    assert_memory_equal(xs, xs2, sizeof xs);
    SQZ_ASSERT_OK(sqz__gemm_i8_ref(M, N, K, xq2, xs2, wq, ws, y2, SQZ_DTYPE_F32));
    assert_memory_equal(y, y2, sizeof y);
    /* the W8A8 result approximates the float GEMM */
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double s = 0;
            for (int t = 0; t < K; t++) s += (double)xf[i * K + t] * wf[j * K + t];
            assert_true(fabs(s - y[i * N + j]) < 0.02);
        }
    a.variant = SQZ_KVAR_I8_MMA;
    assert_int_equal(b->ops->gemm_i8(b->ctx, &a), SQZ_ERR_UNSUPPORTED);
    a.variant = SQZ_KVAR_AUTO;
    a.y_dtype = SQZ_DTYPE_Q8_0;
    assert_int_equal(b->ops->gemm_i8(b->ctx, &a), SQZ_ERR_INVALID_ARG);
    free(xf);
    free(wf);
    sqz_backend_free(b);
}

/* ---- the prepared int4 layout --------------------------------------------------- */
static void test_w4_layout(void **state) {
    (void)state;
    sqz_w4_layout L;
    assert_int_equal(sqz__w4_layout_init(SQZ_DTYPE_Q4_0, 10, 48, &L), SQZ_ERR_INVALID_ARG);
    assert_int_equal(sqz__w4_layout_init(SQZ_DTYPE_Q4_0, 0, 64, &L), SQZ_ERR_INVALID_ARG);
    assert_int_equal(sqz__w4_layout_init(SQZ_DTYPE_F32, 10, 64, &L), SQZ_ERR_INVALID_ARG);
    assert_int_equal(sqz__w4_layout_init(SQZ_DTYPE_Q4_0, INT64_MAX / 2, 1LL << 40, &L), SQZ_ERR_INVALID_ARG);
    SQZ_ASSERT_OK(sqz__w4_layout_init(SQZ_DTYPE_Q4_1, 65, 96, &L));
    assert_int_equal(L.n_tiles, 2);
    assert_int_equal(L.k_steps, 6);
    assert_int_equal(L.groups, 3);
    assert_int_equal(L.d_offset, 2 * 6 * 512);
    assert_int_equal(L.m_offset, L.d_offset + 2 * 3 * 128);
    assert_int_equal(L.total, L.m_offset + 2 * 3 * 128);
    assert_int_equal(L.src_row_bytes, 3 * 20);
    /* every (k, n) of a (tile, step) is one nibble of one lane */
    int seen[16][64];
    memset(seen, 0, sizeof seen);
    for (int lane = 0; lane < 32; lane++)
        for (int w = 0; w < 4; w++)
            for (int p = 0; p < 8; p++) {
                int kk, nn;
                sqz_w4_nibble_coord(lane, w, p, &kk, &nn);
                assert_true(kk >= 0 && kk < 16 && nn >= 0 && nn < 64);
                seen[kk][nn]++;
            }
    for (int kk = 0; kk < 16; kk++)
        for (int nn = 0; nn < 64; nn++) assert_int_equal(seen[kk][nn], 1);
    int pos_seen[64] = {0};
    for (int c = 0; c < 64; c++) pos_seen[sqz_w4_scale_pos(c)]++;
    for (int c = 0; c < 64; c++) assert_int_equal(pos_seen[c], 1);
}

/* pack -> unpack == original; padding columns hold zero nibbles and zero scales;
 * dequant_rows == the GGUF reference dequantizer, bit for bit. */
static void check_roundtrip(sqz_dtype t, int64_t n, int64_t k, const uint8_t *src) {
    sqz_w4_layout L;
    SQZ_ASSERT_OK(sqz__w4_layout_init(t, n, k, &L));
    uint8_t *prep = malloc(L.total), *back = malloc(n * L.src_row_bytes);
    memset(prep, 0xA5, L.total);
    sqz__w4_pack(&L, src, prep);
    sqz__w4_unpack(&L, prep, back);
    assert_memory_equal(back, src, (size_t)n * L.src_row_bytes);
    /* padding */
    for (int64_t tile = 0; tile < L.n_tiles; tile++)
        for (int64_t g = 0; g < L.groups; g++)
            for (int c = 0; c < 64; c++) {
                if (tile * 64 + c < n) continue;
                const uint8_t *d = prep + L.d_offset + (size_t)(tile * L.groups + g) * 128 + 2 * sqz_w4_scale_pos(c);
                assert_int_equal(sqz__rd_u16(d), 0);
            }
    /* dequantization of a row range straddling tiles */
    const int64_t row0 = n > 3 ? 3 : 0, rows = n - row0;
    float *ref = malloc(sizeof(float) * n * k), *got = malloc(sizeof(float) * rows * k);
    if (t == SQZ_DTYPE_Q4_0) sqz__dequantize_q4_0(src, ref, n * k);
    else sqz__dequantize_q4_1(src, ref, n * k);
    sqz__w4_dequant_rows(&L, prep, row0, rows, got);
    assert_memory_equal(got, ref + row0 * k, sizeof(float) * rows * k);
    free(ref);
    free(got);
    free(prep);
    free(back);
}

static void test_w4_roundtrip_random(void **state) {
    (void)state;
    const int64_t shapes[][2] = {{1, 32}, {3, 64}, {64, 32}, {65, 96}, {130, 256}, {172, 64}, {200, 4128}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        for (int q41 = 0; q41 < 2; q41++) {
            const sqz_dtype t = q41 ? SQZ_DTYPE_Q4_1 : SQZ_DTYPE_Q4_0;
            const int64_t n = shapes[s][0], k = shapes[s][1];
            const size_t bytes = (size_t)n * (size_t)(k / 32) * (q41 ? 20 : 18);
            uint8_t *src = malloc(bytes);
            for (size_t i = 0; i < bytes; i++) src[i] = (uint8_t)rnd();
            /* keep the scales finite so that dequantization comparisons are meaningful */
            for (size_t b = 0; b < bytes; b += q41 ? 20 : 18) {
                sqz__wr_u16(src + b, sqz_fp32_to_fp16(0.01f * rndf()));
                if (q41) sqz__wr_u16(src + b + 2, sqz_fp32_to_fp16(-0.1f * rndf()));
            }
            check_roundtrip(t, n, k, src);
            free(src);
        }
    }
}

static void test_w4_roundtrip_real(void **state) {
    (void)state;
    float *wts = sqz_rw_need();
    /* (rows, cols, offset): FFN w1 of all layers, token embeddings, wq reshaped to k = 256 */
    const int64_t mats[][3] = {{860, 64, SQZ_RW_W1}, {512, 64, SQZ_RW_TOK_EMB}, {80, 256, SQZ_RW_WQ}};
    for (size_t i = 0; i < sizeof mats / sizeof mats[0]; i++) {
        const int64_t n = mats[i][0], k = mats[i][1];
        const float *w = wts + mats[i][2];
        uint8_t *q0 = malloc((size_t)n * (k / 32) * 18), *q1 = malloc((size_t)n * (k / 32) * 20);
        sqz__quantize_q4_0_ref(w, q0, n * k);
        sqz__quantize_q4_1_ref(w, q1, n * k);
        check_roundtrip(SQZ_DTYPE_Q4_0, n, k, q0);
        check_roundtrip(SQZ_DTYPE_Q4_1, n, k, q1);
        free(q0);
        free(q1);
    }
    free(wts);
}

/* ---- W4A16 reference and the CPU backend ------------------------------------------ */
static double nmse(const float *a, const float *ref, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        num += ((double)a[i] - ref[i]) * ((double)a[i] - ref[i]);
        den += (double)ref[i] * ref[i];
    }
    return den > 0 ? num / den : num;
}

static void test_gemm_w4(void **state) {
    (void)state;
    float *wts = sqz_rw_need();
    sqz_backend *b;
    SQZ_ASSERT_OK(sqz_backend_cpu(1, &b));
    const int64_t n = 860, k = 64;
    for (int q41 = 0; q41 < 2; q41++) {
        const sqz_dtype t = q41 ? SQZ_DTYPE_Q4_1 : SQZ_DTYPE_Q4_0;
        uint8_t *blocks = malloc((size_t)n * (k / 32) * 20);
        (q41 ? sqz__quantize_q4_1_ref : sqz__quantize_q4_0_ref)(wts + SQZ_RW_W1, blocks, n * k);
        void *prep;
        SQZ_ASSERT_OK(b->ops->prepare_w4(b->ctx, blocks, t, n, k, &prep));
        const int64_t ms[] = {1, 3, 17};
        for (size_t mi = 0; mi < 3; mi++) {
            const int64_t m = ms[mi];
            uint16_t *x = malloc(sizeof(uint16_t) * m * k);
            for (int64_t i = 0; i < m * k; i++) x[i] = sqz_fp32_to_fp16(rndf());
            float *y = malloc(sizeof(float) * m * n), *yr = malloc(sizeof(float) * m * n);
            uint16_t *yh = malloc(sizeof(uint16_t) * m * n);
            SQZ_ASSERT_OK(sqz__gemm_w4a16_ref(m, n, k, x, blocks, t, yr, SQZ_DTYPE_F32));
            /* the reference against a direct double sum */
            float *wd = malloc(sizeof(float) * n * k);
            (q41 ? sqz__dequantize_q4_1 : sqz__dequantize_q4_0)(blocks, wd, n * k);
            for (int64_t i = 0; i < m; i++)
                for (int64_t j = 0; j < n; j += 37) {
                    double s = 0;
                    for (int64_t u = 0; u < k; u++) s += (double)sqz_fp16_to_fp32(x[i * k + u]) * wd[j * k + u];
                    assert_true(yr[i * n + j] == (float)s);
                }
            sqz_gemm_w4_args a = {.m = m, .n = n, .k = k, .x = x, .w = prep, .y = y, .y_dtype = SQZ_DTYPE_F32};
            SQZ_ASSERT_OK(b->ops->gemm_w4(b->ctx, &a));
            assert_true(nmse(y, yr, (size_t)(m * n)) < 1e-10);
            a.y = yh;
            a.y_dtype = SQZ_DTYPE_F16;
            SQZ_ASSERT_OK(b->ops->gemm_w4(b->ctx, &a));
            for (int64_t i = 0; i < m * n; i++) y[i] = sqz_fp16_to_fp32(yh[i]);
            assert_true(nmse(y, yr, (size_t)(m * n)) < 1e-6);
            a.n = n - 1;
            assert_int_equal(b->ops->gemm_w4(b->ctx, &a), SQZ_ERR_SHAPE);
            a.n = n;
            a.variant = SQZ_KVAR_W4_MMA;
            assert_int_equal(b->ops->gemm_w4(b->ctx, &a), SQZ_ERR_UNSUPPORTED);
            free(wd);
            free(x);
            free(y);
            free(yr);
            free(yh);
        }
        b->ops->free(b->ctx, prep);
        free(blocks);
    }
    void *prep = NULL;
    uint8_t dummy[18] = {0};
    assert_int_equal(b->ops->prepare_w4(b->ctx, dummy, SQZ_DTYPE_Q4_0, 1, 48, &prep), SQZ_ERR_INVALID_ARG);
    assert_null(prep);
    uint16_t x1[32] = {0};
    float y1[1];
    assert_int_equal(sqz__gemm_w4a16_ref(1, 1, 48, x1, dummy, SQZ_DTYPE_Q4_0, y1, SQZ_DTYPE_F32), SQZ_ERR_INVALID_ARG);
    assert_int_equal(sqz__gemm_w4a16_ref(1, 1, 32, x1, dummy, SQZ_DTYPE_Q8_0, y1, SQZ_DTYPE_F32), SQZ_ERR_INVALID_ARG);
    sqz_backend_free(b);
    free(wts);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_quantize_rows),     cmocka_unit_test(test_gemm_i8_ref),
        cmocka_unit_test(test_cpu_gemm_i8),       cmocka_unit_test(test_w4_layout),
        cmocka_unit_test(test_w4_roundtrip_random), cmocka_unit_test(test_w4_roundtrip_real),
        cmocka_unit_test(test_gemm_w4),
    };
    return sqz_test_run(tests, NULL, NULL);
}

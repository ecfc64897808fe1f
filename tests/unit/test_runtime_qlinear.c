/* tests/unit/test_runtime_qlinear.c - the runtime runs weights quantized with sqz's schemes
 * (sqz_tensor.qp, sqz/quant.h) as that header defines them, in cache and stream modes:
 *   I8 per row, weight-only: x . (q * scale)^T;
 *   I8 per row, W8A8 dynamic per token with an unfolded in_scale: the CPU backend's exact INT8
 *     GEMM (x_f32 = x / in_scale quantized per token) is the reference;
 *   I8 per row, W8A8 static: clamp(rint(x / act_scale)) + the INT8 GEMM;
 *   I8 per row, W8A8 static and dynamic on compressed-tensors' grid ([-128, 127], absmax / 127.5);
 *   U4 per group with zero points: x . dequant(W)^T (sqz_qparams_to_f32).
 * The layer is stories260K's layer-0 attn_q, replaced in place; a whole forward then runs. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/backend_impl.h"
#include "runtime/runtime_internal.h"
#include "sqz/quant.h"
#include "test_util.h"

enum { M = 9, N = 64, K = 64 };

static float frand(uint32_t *s) {
    *s = *s * 1664525u + 1013904223u;
    return (float)(*s >> 8) / 16777216.0f - 0.5f;
}

static double rel_err(const float *a, const float *b, int64_t n) {
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) {
        num = fmax(num, fabs((double)a[i] - b[i]));
        den = fmax(den, fabs((double)b[i]));
    }
    return num / den;
}

/* y = x . w^T in double, w (N, K) f32. */
static void ref_matmul(const float *x, const float *w, float *y) {
    for (int i = 0; i < M; i++) {
        for (int j = 0; j < N; j++) {
            double a = 0;
            for (int c = 0; c < K; c++) a += (double)x[i * K + c] * w[j * K + c];
            y[i * N + j] = (float)a;
        }
    }
}

/* Runs sqz__linear on tensor t in a fresh session of each weight mode; checks against want. */
static void check_modes(sqz_model *m, sqz_tensor *t, const float *x, const float *want, double tol) {
    for (int mode = 0; mode < 2; mode++) {
        sqz_session_opts o = sqz_session_default_opts();
        o.max_tokens = 32;
        o.weights = mode ? SQZ_WEIGHTS_STREAM : SQZ_WEIGHTS_CACHE;
        sqz_session *s;
        SQZ_ASSERT_OK(sqz_session_new(m, &o, &s));
        float y[M * N];
        SQZ_ASSERT_OK(sqz__linear(s, x, M, t, NULL, y));
        double e = rel_err(y, want, M * N);
        print_message("  %s mode: relative error %.2e\n", mode ? "stream" : "cache", e);
        assert_true(e <= tol);
        /* the whole model still runs */
        int32_t ids[5] = {1, 403, 407, 261, 378};
        float logits[5 * 512];
        SQZ_ASSERT_OK(sqz_forward(s, ids, 5, 0, 0, logits));
        for (int i = 0; i < 5 * 512; i++) assert_true(isfinite(logits[i]));
        sqz_session_free(s);
    }
}

static void test_quantized_layers(void **state) {
    (void)state;
    const char *path = sqz_test_data("models/stories260K/stories260K.bin");
    SQZ_SKIP_UNLESS(path);
    sqz_model *m;
    SQZ_ASSERT_OK(sqz_model_open(path, NULL, &m));
    sqz_tensor *t = sqz_model_get(m, SQZ_ROLE_ATTN_Q, 0, SQZ_PARAM_WEIGHT);
    assert_non_null(t);
    assert_int_equal(t->shape[0], N);
    assert_int_equal(t->shape[1], K);
    sqz_tensor saved = *t;
    uint32_t seed = 12345;
    float x[M * K], w[N * K], want[M * N], scales[N * 2], in_scale[K];
    int8_t q8[N * K];
    for (int i = 0; i < M * K; i++) x[i] = 3.0f * frand(&seed);
    for (int i = 0; i < N * K; i++) q8[i] = (int8_t)((int)(frand(&seed) * 254.0f));
    for (int j = 0; j < N; j++) scales[j] = 0.01f + 0.02f * (frand(&seed) + 0.5f);
    for (int c = 0; c < K; c++) in_scale[c] = 0.5f + (frand(&seed) + 0.5f);
    sqz_backend *be;
    SQZ_ASSERT_OK(sqz_backend_cpu(0, &be));
    assert_true(sqz_backend_supports(be, SQZ_OP_GEMM_I8, SQZ_DTYPE_I8));

    /* 1. I8 per row, weight-only */
    sqz_qparams qp = {.scheme = SQZ_QSCHEME_I8_ROW, .n_out = N, .n_in = K, .group_size = K, .n_groups = 1,
                      .scales = scales, .act_mode = SQZ_ACT_FLOAT};
    t->dtype = SQZ_DTYPE_I8;
    t->data = q8;
    t->nbytes = N * K;
    t->qp = &qp;
    for (int j = 0; j < N; j++)
        for (int c = 0; c < K; c++) w[j * K + c] = (float)q8[j * K + c] * scales[j];
    ref_matmul(x, w, want);
    print_message("i8 weight-only\n");
    check_modes(m, t, x, want, 1e-6);

    /* 2. W8A8 dynamic per token, unfolded in_scale: the backend's exact INT8 GEMM */
    qp.act_mode = SQZ_ACT_DYNAMIC_TOKEN;
    qp.in_scale = in_scale;
    float xs[M * K], xscale[M];
    int8_t xq[M * K];
    for (int i = 0; i < M; i++)
        for (int c = 0; c < K; c++) xs[i * K + c] = x[i * K + c] / in_scale[c];
    sqz_gemm_i8_args g = {.m = M, .n = N, .k = K, .x_f32 = xs, .x = xq, .x_scale = xscale, .w = q8,
                          .w_scale = scales, .y = want, .y_dtype = SQZ_DTYPE_F32};
    SQZ_ASSERT_OK(be->ops->gemm_i8(be->ctx, &g));
    print_message("i8 W8A8 dynamic + in_scale\n");
    check_modes(m, t, x, want, 1e-5);

    /* 3. W8A8 static */
    qp.act_mode = SQZ_ACT_STATIC_TENSOR;
    qp.act_scale = 0.02f;
    qp.in_scale = NULL;
    for (int i = 0; i < M * K; i++) { /* sqz/quant.h: clamp(rint(x / scale), -127, 127) */
        float v = rintf(x[i] / qp.act_scale);
        xq[i] = (int8_t)(v > 127 ? 127 : v < -127 ? -127 : v);
    }
    for (int i = 0; i < M; i++) xscale[i] = qp.act_scale;
    sqz_gemm_i8_args g2 = {.m = M, .n = N, .k = K, .x_f32 = NULL, .x = xq, .x_scale = xscale, .w = q8,
                           .w_scale = scales, .y = want, .y_dtype = SQZ_DTYPE_F32};
    SQZ_ASSERT_OK(be->ops->gemm_i8(be->ctx, &g2));
    print_message("i8 W8A8 static\n");
    check_modes(m, t, x, want, 1e-5);

    /* 3b. W8A8 on compressed-tensors' grid (what its files declare; st_ctensors_read.c):
     * clamp(rint(x / s), -128, 127), dynamic s = absmax / 127.5 */
    qp.act_grid = SQZ_ACT_GRID_CTENSORS;
    qp.act_scale = 0.0117f; /* |x| < 1.5: some inputs fall below -127.5 * s, others above 127 * s */
    for (int pass = 0; pass < 2; pass++) {
        float xd[M * K];
        int at_min = 0;
        for (int i = 0; i < M; i++) {
            float amax = 0.0f;
            for (int c = 0; c < K; c++) amax = fmaxf(amax, fabsf(x[i * K + c]));
            const float sc = pass ? amax / 127.5f : qp.act_scale;
            for (int c = 0; c < K; c++) {
                float v = rintf(x[i * K + c] / sc);
                v = v > 127 ? 127 : v < -128 ? -128 : v;
                at_min += v == -128;
                xd[i * K + c] = v * sc;
            }
        }
        for (int j = 0; j < N; j++)
            for (int c = 0; c < K; c++) w[j * K + c] = (float)q8[j * K + c] * scales[j];
        ref_matmul(xd, w, want);
        print_message("i8 W8A8 %s, compressed-tensors' grid (%d inputs at -128)\n", pass ? "dynamic" : "static",
                      at_min);
        assert_true(pass || at_min > 0); /* static: sqz's own grid would clamp them to -127 */
        check_modes(m, t, x, want, 1e-5);
        qp.act_mode = SQZ_ACT_DYNAMIC_TOKEN;
        qp.act_scale = 0.0f;
    }
    qp.act_mode = SQZ_ACT_FLOAT; /* a grid on a weight-only layer means nothing: refused */
    assert_int_equal(sqz_qparams_check(&qp, SQZ_DTYPE_I8, N * K, "ct"), SQZ_ERR_INVALID_ARG);
    qp.act_grid = (sqz_act_grid)7;
    qp.act_mode = SQZ_ACT_DYNAMIC_TOKEN;
    assert_int_equal(sqz_qparams_check(&qp, SQZ_DTYPE_I8, N * K, "ct"), SQZ_ERR_INVALID_ARG);

    /* 4. U4 per group of 32 with zero points, weight-only */
    uint8_t codes[N * K], packed[N * K / 2], zeros[N * 2];
    for (int i = 0; i < N * K; i++) codes[i] = (uint8_t)((int)((frand(&seed) + 0.5f) * 16.0f) & 15);
    for (int i = 0; i < N * 2; i++) zeros[i] = (uint8_t)(i % 16);
    sqz_u4_pack(codes, N * K, packed);
    sqz_qparams q4 = {.scheme = SQZ_QSCHEME_U4_GROUP, .n_out = N, .n_in = K, .group_size = 32, .n_groups = 2,
                      .scales = scales, .zeros = zeros, .act_mode = SQZ_ACT_FLOAT};
    t->dtype = SQZ_DTYPE_U4;
    t->data = packed;
    t->nbytes = N * K / 2;
    t->qp = &q4;
    SQZ_ASSERT_OK(sqz_qparams_to_f32(&q4, SQZ_DTYPE_U4, packed, N * K / 2, w));
    ref_matmul(x, w, want);
    print_message("u4 per group\n");
    check_modes(m, t, x, want, 1e-6);

    /* a bad in_scale is refused when the session is made */
    in_scale[3] = 0;
    q4.in_scale = in_scale;
    sqz_session *s = NULL;
    assert_int_equal(sqz_session_new(m, NULL, &s), SQZ_ERR_INVALID_ARG);
    assert_null(s);

    *t = saved;
    sqz_backend_free(be);
    sqz_model_free(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_quantized_layers),
    };
    return sqz_test_run(tests, NULL, NULL);
}

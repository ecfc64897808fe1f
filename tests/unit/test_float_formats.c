/* tests/unit/test_float_formats.c - the 8- and 4-bit float formats of issue 50:
 *   - FP8 E4M3: every one of the 256 codes converts to its value (bias 7, subnormals m * 2^-9, 0x7F
 *     and 0xFF NaN, largest 448) and back to itself; from float rounds half to even (each midpoint
 *     between neighbours), saturates at +-448, keeps the sign of zero;
 *   - E2M1: the 16 codes and the rounding thresholds (0.25 -> 0, 0.75 -> 1, 1.25 -> 1, 1.75 -> 2,
 *     2.5 -> 2, 3.5 -> 4, 5 -> 4: ties to even; beyond 6: 6; a negative value rounding to 0 keeps the
 *     sign bit);
 *   - the qparams of F8_ROW and NVFP4: checks (a group scale that is no E4M3 value, a bad global
 *     scale, FP8 activations on a weight that is not FP8) and dequantization against the rule;
 *   - RTN onto FP8 and NVFP4 on stories260K's real matrices: every weight within half a step of
 *     its value, NVFP4's global scale shared by the matrices of one input; GPTQ onto FP8, NVFP4 and
 *     MXFP4 lowers the output error on held-out rows against RTN (the layer's own inputs: the
 *     embedding rows); NVFP4's imatrix scale search never has a larger weighted error than RTN.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "real_weights.h"
#include "sqz/quant.h"
#include "test_util.h"

static void test_fp8_codes(void **state) {
    (void)state;
    for (int b = 0; b < 256; b++) {
        const float v = sqz_fp8_e4m3_to_fp32((uint8_t)b);
        if ((b & 0x7F) == 0x7F) {
            assert_true(isnan(v));
            continue;
        }
        const int e = (b >> 3) & 15, m = b & 7;
        const double want = (e == 0 ? m * ldexp(1, -9) : (1 + m / 8.0) * ldexp(1, e - 7)) * ((b & 0x80) ? -1 : 1);
        assert_true((double)v == want);
        assert_int_equal(sqz_fp32_to_fp8_e4m3(v), b);
    }
    assert_true(sqz_fp8_e4m3_to_fp32(0x7E) == 448.0f);
    assert_int_equal(sqz_fp32_to_fp8_e4m3(1e9f), 0x7E);
    assert_int_equal(sqz_fp32_to_fp8_e4m3(-500.0f), 0xFE);
    assert_int_equal(sqz_fp32_to_fp8_e4m3(NAN), 0x7F);
    assert_int_equal(sqz_fp32_to_fp8_e4m3(-0.0f), 0x80);
    /* every midpoint between two neighbouring positive values rounds to the even code */
    for (int b = 0; b < 0x7E; b++) {
        const float lo = sqz_fp8_e4m3_to_fp32((uint8_t)b), hi = sqz_fp8_e4m3_to_fp32((uint8_t)(b + 1));
        const float mid = (lo + hi) / 2; /* exact: both have few significant bits */
        assert_int_equal(sqz_fp32_to_fp8_e4m3(mid), (b & 1) ? b + 1 : b);
        assert_int_equal(sqz_fp32_to_fp8_e4m3(nextafterf(mid, 0)), b);
        assert_int_equal(sqz_fp32_to_fp8_e4m3(nextafterf(mid, 1000)), b + 1);
    }
}

static void test_e2m1(void **state) {
    (void)state;
    static const float vals[8] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6};
    for (int c = 0; c < 16; c++) assert_true(sqz__e2m1_value(c) == ((c & 8) ? -vals[c & 7] : vals[c & 7]));
    static const struct { float x; int code; } cases[] = {
        {0.25f, 0}, {0.2500001f, 1}, {0.75f, 2}, {1.25f, 2}, {1.2500001f, 3}, {1.75f, 4}, {2.5f, 4},
        {2.5000002f, 5}, {3.5f, 6}, {5.0f, 6}, {5.0000005f, 7}, {100.0f, 7}, {-0.1f, 8}, {-0.0f, 0}, {-3.0f, 13},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        if (sqz__e2m1_rne(cases[i].x) != cases[i].code)
            fail_msg("e2m1(%.9g) = %d, want %d", (double)cases[i].x, sqz__e2m1_rne(cases[i].x), cases[i].code);
    }
}

static void test_qparams(void **state) {
    (void)state;
    /* NVFP4: 2 rows of 32 (2 groups each) */
    uint8_t codes[32];
    for (int i = 0; i < 32; i++) codes[i] = (uint8_t)(i * 7 + 3);
    float scales[4] = {0.5f, 448.0f, 0.125f, 3.0f};
    sqz_qparams qp = {.scheme = SQZ_QSCHEME_NVFP4, .n_out = 2, .n_in = 32, .group_size = 16, .n_groups = 2,
                      .scales = scales, .global_scale = 2688.0f / 7.0f};
    assert_int_equal(sqz_qparams_check(&qp, SQZ_DTYPE_U4, 32, "t"), SQZ_OK);
    float out[64];
    sqz_qparams_rows_to_f32(&qp, codes, 0, 2, out);
    for (int r = 0; r < 2; r++)
        for (int c = 0; c < 32; c++) {
            const int b = codes[(r * 32 + c) / 2], code = c % 2 ? b >> 4 : b & 15;
            const float want = sqz_bf16_to_fp32(sqz_fp32_to_bf16(sqz__e2m1_value(code) * (scales[r * 2 + c / 16] / qp.global_scale)));
            assert_true(out[r * 32 + c] == want);
        }
    scales[1] = 0.3f; /* not an E4M3 value */
    assert_int_equal(sqz_qparams_check(&qp, SQZ_DTYPE_U4, 32, "t"), SQZ_ERR_INVALID_ARG);
    scales[1] = 448.0f;
    qp.global_scale = 0;
    assert_int_equal(sqz_qparams_check(&qp, SQZ_DTYPE_U4, 32, "t"), SQZ_ERR_INVALID_ARG);
    /* F8_ROW */
    uint8_t q8[6] = {0x38, 0xB8, 0x7E, 0x01, 0x00, 0x40};
    float s8[2] = {0.5f, 2.0f};
    sqz_qparams f8 = {.scheme = SQZ_QSCHEME_F8_ROW, .n_out = 2, .n_in = 3, .group_size = 3, .n_groups = 1, .scales = s8};
    assert_int_equal(sqz_qparams_check(&f8, SQZ_DTYPE_F8_E4M3, 6, "t"), SQZ_OK);
    float o8[6];
    sqz_qparams_rows_to_f32(&f8, q8, 0, 2, o8);
    const float want8[6] = {0.5f, -0.5f, 224.0f, 2.0f * ldexpf(1, -9), 0.0f, 4.0f};
    for (int i = 0; i < 6; i++) assert_true(o8[i] == want8[i]);
    f8.act_mode = SQZ_ACT_DYNAMIC_TOKEN; /* W8A8-FP8 must say its FP8 grid */
    assert_int_equal(sqz_qparams_check(&f8, SQZ_DTYPE_F8_E4M3, 6, "t"), SQZ_ERR_INVALID_ARG);
    f8.act_grid = SQZ_ACT_GRID_FP8;
    assert_int_equal(sqz_qparams_check(&f8, SQZ_DTYPE_F8_E4M3, 6, "t"), SQZ_OK);
    f8.act_mode = SQZ_ACT_STATIC_TENSOR; /* static W8A8-FP8 (llm-compressor's FP8): a positive scale */
    assert_int_equal(sqz_qparams_check(&f8, SQZ_DTYPE_F8_E4M3, 6, "t"), SQZ_ERR_INVALID_ARG);
    f8.act_scale = 0.25f;
    assert_int_equal(sqz_qparams_check(&f8, SQZ_DTYPE_F8_E4M3, 6, "t"), SQZ_OK);
    f8.act_mode = SQZ_ACT_FLOAT; /* weight-only FP8 cannot say an FP8 grid */
    f8.act_scale = 0;
    assert_int_equal(sqz_qparams_check(&f8, SQZ_DTYPE_F8_E4M3, 6, "t"), SQZ_ERR_INVALID_ARG);
    float s1[2] = {1, 1};
    int8_t q1[6] = {0};
    sqz_qparams i8 = {.scheme = SQZ_QSCHEME_I8_ROW, .n_out = 2, .n_in = 3, .group_size = 3, .n_groups = 1,
                      .scales = s1, .act_mode = SQZ_ACT_DYNAMIC_TOKEN, .act_grid = SQZ_ACT_GRID_FP8};
    assert_int_equal(sqz_qparams_check(&i8, SQZ_DTYPE_I8, sizeof q1, "t"), SQZ_ERR_INVALID_ARG);
}

/* W8A8-FP8's activations, dynamic (per row absmax / 448) and static (one scale): fp8(clamp(x / s)) * s. */
static void test_fp8_act_rows(void **state) {
    (void)state;
    /* static, s = 0.5: 1.1 / 0.5 = 2.2 -> 2.25 (3 mantissa bits); 1000 and +inf saturate at 448 * 0.5;
     * NaN stays NaN; -0.3 / 0.5 = -0.6 -> -0.625; 1e-4 / 0.5 = 2e-4 -> 2^-12 (E4M3's subnormal step 2^-9:
     * 0) */
    float x[6] = {1.1f, 1000.0f, INFINITY, NAN, -0.3f, 1e-4f};
    sqz__fp8_act_rows(x, 2, 3, 0.5f);
    const float want[6] = {1.125f, 224.0f, 224.0f, NAN, -0.3125f, 0.0f};
    for (int i = 0; i < 6; i++) assert_true(isnan(want[i]) ? isnan(x[i]) : x[i] == want[i]);
    /* dynamic: a row of absmax 448 has s = 1 (its FP8 values stay); -3 / (6 / 448) = -224 and 1 -> 74.67
     * -> 72 (step 4 in [64, 128)); a row with a NaN becomes NaN */
    float y[9] = {448.0f, -2.0f, 0.5f, 1.0f, NAN, 2.0f, 6.0f, -3.0f, 1.0f};
    sqz__fp8_act_rows(y, 3, 3, 0.0f);
    assert_true(y[0] == 448.0f && y[1] == -2.0f && y[2] == 0.5f);
    const float s6 = 6.0f / 448.0f;
    assert_true(y[6] == 448.0f * s6 && y[7] == -224.0f * s6 && y[8] == 72.0f * s6);
    assert_true(isnan(y[3]) && isnan(y[4]) && isnan(y[5]));
}

/* RTN of (n_out, n_in) w onto fmt: every value within half of its neighbourhood's step of w. */
static void check_rtn(sqz_qformat fmt, const float *w, int64_t n_out, int64_t n_in) {
    sqz_qmatrix q;
    const sqz_qtarget t = {fmt, 0};
    assert_int_equal(sqz_quant_rtn_one(w, n_out, n_in, &t, &q), SQZ_OK);
    float *d = malloc((size_t)(n_out * n_in) * sizeof(float));
    assert_int_equal(sqz_qmatrix_to_f32(&q, d), SQZ_OK);
    for (int64_t r = 0; r < n_out; r++)
        for (int64_t c = 0; c < n_in; c++) {
            const float x = w[r * n_in + c], v = d[r * n_in + c];
            /* FP8: 3 mantissa bits (relative step 1/8 of the scaled value, or the subnormal step);
             * NVFP4: the E2M1 step at the group's scale (at most 2 * scale / global, 1/3 of amax16) */
            const float tol = fmt == SQZ_QFMT_FP8 ? fabsf(x) / 16 + q.qp.scales[r] * ldexpf(1, -10)
                                                 : q.qp.scales[r * (n_in / 16) + c / 16] / q.qp.global_scale * 1.0001f +
                                                       fabsf(x) / 256;
            if (!(fabsf(v - x) <= tol))
                fail_msg("%s: (%lld, %lld) = %g for %g (tolerance %g)", sqz_qformat_name(fmt), (long long)r,
                         (long long)c, (double)v, (double)x, (double)tol);
        }
    free(d);
    sqz_qmatrix_free(&q);
}

static void test_rtn_real(void **state) {
    (void)state;
    float *w = sqz_rw_need();
    check_rtn(SQZ_QFMT_FP8, w + SQZ_RW_W1, 860, 64);
    check_rtn(SQZ_QFMT_NVFP4, w + SQZ_RW_W1, 860, 64);
    /* the matrices of one input share NVFP4's global scale: the largest magnitude of all of them */
    const float *q0 = w + SQZ_RW_WQ, *k0 = w + SQZ_RW_WQ + 5 * 64 * 64;
    sqz_qlinear lin[2] = {{.w = q0, .n_out = 64, .name = "q"}, {.w = k0, .n_out = 32, .name = "k"}};
    sqz_qstats st = {.n_in = 64};
    sqz_quant_opts o = sqz_quant_default_opts();
    o.target = (sqz_qtarget){SQZ_QFMT_NVFP4, 0};
    sqz_qmatrix out[2];
    assert_int_equal(sqz_quant_rtn(lin, 2, &st, &o, out, NULL), SQZ_OK);
    float amax = 0;
    for (int i = 0; i < 64 * 64; i++) amax = fmaxf(amax, fabsf(q0[i]));
    for (int i = 0; i < 32 * 64; i++) amax = fmaxf(amax, fabsf(k0[i]));
    assert_true(out[0].qp.global_scale == out[1].qp.global_scale);
    assert_true(out[0].qp.global_scale == (1.0f / amax) * 2688.0f);
    sqz_qmatrix_free(&out[0]);
    sqz_qmatrix_free(&out[1]);
    free(w);
}

/* Output error ||X (W - Q)^T||^2 on rows of x. */
static double out_err(const float *x, int64_t m, const float *w, const float *q, int64_t n_out, int64_t n_in) {
    double e = 0;
    for (int64_t i = 0; i < m; i++)
        for (int64_t r = 0; r < n_out; r++) {
            double s = 0;
            for (int64_t c = 0; c < n_in; c++) s += (double)x[i * n_in + c] * (w[r * n_in + c] - q[r * n_in + c]);
            e += s * s;
        }
    return e;
}

/* NVFP4's imatrix search: per row, its weighted error (qw * sqrt(sigma2 + x^2) per group of 16, as the
 * search weighs it) is never above RTN's, whose scales it starts from. */
static void test_nvfp4_imatrix(void **state) {
    (void)state;
    float *w = sqz_rw_need();
    const int64_t n_in = 64, n_out = 172;
    const float *wl = w + SQZ_RW_W1, *x = w + SQZ_RW_TOK_EMB;
    float x2[64] = {0};
    for (int64_t i = 0; i < 512; i++)
        for (int64_t c = 0; c < n_in; c++) x2[c] += x[i * n_in + c] * x[i * n_in + c] / 512;
    sqz_qlinear lin = {.w = wl, .n_out = n_out, .name = "w1"};
    sqz_qstats st = {.n_in = n_in, .x2 = x2};
    sqz_quant_opts o = sqz_quant_default_opts();
    o.target = (sqz_qtarget){SQZ_QFMT_NVFP4, 0};
    sqz_qmatrix q[2];
    assert_int_equal(sqz_quant_rtn(&lin, 1, &st, &o, &q[0], NULL), SQZ_OK);
    assert_int_equal(sqz_quant_imatrix(&lin, 1, &st, &o, &q[1], NULL), SQZ_OK);
    assert_true(q[0].qp.global_scale == q[1].qp.global_scale);
    float *d[2] = {malloc((size_t)(n_out * n_in) * sizeof(float)), malloc((size_t)(n_out * n_in) * sizeof(float))};
    for (int k = 0; k < 2; k++) assert_int_equal(sqz_qmatrix_to_f32(&q[k], d[k]), SQZ_OK);
    double tot[2] = {0, 0};
    int moved = 0;
    for (int64_t r = 0; r < n_out; r++) {
        double e[2] = {0, 0};
        for (int64_t g = 0; g < n_in / 16; g++) {
            const float *xg = wl + r * n_in + 16 * g;
            float s2 = 0;
            for (int j = 0; j < 16; j++) s2 += xg[j] * xg[j];
            for (int k = 0; k < 2; k++)
                for (int j = 0; j < 16; j++) {
                    const double rr = xg[j] - d[k][r * n_in + 16 * g + j];
                    e[k] += x2[16 * g + j] * sqrt(s2 * 2.0 / 16 + (double)xg[j] * xg[j]) * rr * rr;
                }
            moved += q[0].qp.scales[r * (n_in / 16) + g] != q[1].qp.scales[r * (n_in / 16) + g];
        }
        if (e[1] > e[0] * (1 + 1e-5) + 1e-12) fail_msg("row %lld: imatrix's weighted error %g above rtn's %g", (long long)r, e[1], e[0]);
        tot[0] += e[0];
        tot[1] += e[1];
    }
    print_message("nvfp4 imatrix: weighted error %.3f of rtn's, %d of %lld group scales moved\n", tot[1] / tot[0], moved,
                  (long long)(n_out * n_in / 16));
    assert_true(tot[1] < tot[0] && moved > 0);
    for (int k = 0; k < 2; k++) {
        free(d[k]);
        sqz_qmatrix_free(&q[k]);
    }
    free(w);
}

static void test_gptq_beats_rtn(void **state) {
    (void)state;
    float *w = sqz_rw_need();
    const int64_t n_in = 64, n_out = 172, m = 512; /* stories260K layer 0's w1, the embedding rows as inputs */
    const float *wl = w + SQZ_RW_W1, *x = w + SQZ_RW_TOK_EMB;
    double *xtx = calloc((size_t)(n_in * n_in), sizeof(double));
    for (int64_t i = 0; i < m / 2; i++) /* calibration: the even rows; held out: the odd ones */
        for (int64_t a = 0; a < n_in; a++)
            for (int64_t b = 0; b < n_in; b++) xtx[a * n_in + b] += (double)x[2 * i * n_in + a] * x[2 * i * n_in + b];
    float *held = malloc((size_t)(m / 2 * n_in) * sizeof(float));
    for (int64_t i = 0; i < m / 2; i++) memcpy(held + i * n_in, x + (2 * i + 1) * n_in, (size_t)n_in * sizeof(float));
    const sqz_qformat fmts[3] = {SQZ_QFMT_FP8, SQZ_QFMT_NVFP4, SQZ_QFMT_MXFP4};
    float *dq = malloc((size_t)(n_out * n_in) * sizeof(float));
    for (int f = 0; f < 3; f++) {
        sqz_qlinear lin = {.w = wl, .n_out = n_out, .name = "w1"};
        sqz_qstats st = {.n_in = n_in, .xtx = xtx, .n_tokens = m / 2};
        sqz_quant_opts o = sqz_quant_default_opts();
        o.target = (sqz_qtarget){fmts[f], 0};
        sqz_qmatrix q;
        double e[2];
        for (int g = 0; g < 2; g++) {
            const sqz_status s = g ? sqz_quant_gptq(&lin, 1, &st, &o, &q, NULL) : sqz_quant_rtn(&lin, 1, &st, &o, &q, NULL);
            assert_int_equal(s, SQZ_OK);
            assert_int_equal(sqz_qmatrix_to_f32(&q, dq), SQZ_OK);
            e[g] = out_err(held, m / 2, wl, dq, n_out, n_in);
            sqz_qmatrix_free(&q);
        }
        print_message("%s: held-out output error gptq %.4g, rtn %.4g (%.2fx)\n", sqz_qformat_name(fmts[f]), e[1], e[0],
                      e[1] / e[0]);
        assert_true(e[1] < e[0]);
    }
    free(dq);
    free(held);
    free(xtx);
    free(w);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fp8_codes),        cmocka_unit_test(test_e2m1),
        cmocka_unit_test(test_fp8_act_rows),
        cmocka_unit_test(test_qparams),          cmocka_unit_test(test_rtn_real),
        cmocka_unit_test(test_nvfp4_imatrix),    cmocka_unit_test(test_gptq_beats_rtn),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

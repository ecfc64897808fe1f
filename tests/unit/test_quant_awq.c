/* tests/unit/test_quant_awq.c - AWQ, SmoothQuant and imatrix on real layers with real
 * activations (wiki.test.raw through the runtime), errors measured on held-out tokens:
 *   AWQ (scale + clip search) below RTN at the same format, GGUF grids included; the returned
 *   scales folded into the RMSNorm weight or kept as the layer's in_scale give the same output;
 *   SmoothQuant W8A8 below plain W8A8 (static minmax, and dynamic per token) on the input with
 *   the strongest outlier channels; percentile and KL static scales run and are reported;
 *   imatrix Q4_0/Q4_1 below plain RTN (its bytes are checked against libggml in tests/py). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "quant_fixture.h"

static const sqz_role group_roles[QF_N][3] = {{SQZ_ROLE_ATTN_Q, SQZ_ROLE_ATTN_K, SQZ_ROLE_ATTN_V},
                                               {SQZ_ROLE_ATTN_OUT, SQZ_ROLE_COUNT, SQZ_ROLE_COUNT},
                                               {SQZ_ROLE_FFN_GATE, SQZ_ROLE_FFN_UP, SQZ_ROLE_COUNT},
                                               {SQZ_ROLE_FFN_DOWN, SQZ_ROLE_COUNT, SQZ_ROLE_COUNT}};
static const char *const group_names[QF_N] = {"q|k|v", "o", "gate|up", "down"};

static int load_group(const qfix *f, int g, sqz_qlinear *lin) {
    int n = 0;
    int64_t n_in, n_out;
    for (int k = 0; k < 3 && group_roles[g][k] != SQZ_ROLE_COUNT; k++, n++) {
        float *w = qfix_weight(f, group_roles[g][k], &n_out, &n_in);
        lin[n] = (sqz_qlinear){.w = w, .n_out = n_out, .name = sqz_role_name(group_roles[g][k]),
                               .skip_clip = group_roles[g][k] == SQZ_ROLE_ATTN_Q || group_roles[g][k] == SQZ_ROLE_ATTN_K};
    }
    return n;
}

/* RMS over the group of the held-out relative errors; layers run as stored (in_scale, W8A8). */
static double group_err(const qfix *f, int g, const sqz_qlinear *lin, int n, const sqz_qmatrix *q) {
    double num = 0, den = 0;
    for (int i = 0; i < n; i++) {
        const double e = qfix_rel_err_q(f->x[g], f->n_calib, f->n_rows, f->dim[g], lin[i].w, &q[i]);
        num += e * e * (double)lin[i].n_out;
        den += (double)lin[i].n_out;
    }
    return sqrt(num / den);
}

static void free_all(sqz_qmatrix *q, int n) {
    for (int i = 0; i < n; i++) sqz_qmatrix_free(&q[i]);
}

static void run_awq(const char *label, const char *path, int32_t layer, int64_t win, int windows, bool on_q4_1_grid) {
    qfix f;
    qfix_load(&f, path, layer, win, windows);
    print_message("%s layer %d (held-out relative output error):\n", label, (int)layer);
    const int fmts[][2] = {{SQZ_QFMT_I4_SYM, 32}, {SQZ_QFMT_I4_ASYM, 128}, {SQZ_QFMT_Q4_0, 32}, {SQZ_QFMT_Q4_1, 32}};
    for (int g = 0; g < QF_N; g++) {
        sqz_qlinear lin[3];
        const int n = load_group(&f, g, lin);
        const int64_t n_in = f.dim[g];
        sqz_qstats_buf sb;
        SQZ_ASSERT_OK(sqz_qstats_compute(f.x[g], f.n_calib, n_in, SQZ_QSTAT_SAMPLE | SQZ_QSTAT_ABSMEAN | SQZ_QSTAT_X2,
                                         0, &sb));
        float *s = malloc((size_t)n_in * sizeof(float));
        for (size_t fi = 0; fi < sizeof fmts / sizeof fmts[0]; fi++) {
            sqz_quant_opts o = sqz_quant_default_opts();
            o.target = (sqz_qtarget){(sqz_qformat)fmts[fi][0], fmts[fi][1]};
            if (!sqz_qtarget_fits(&o.target, n_in) || (on_q4_1_grid && o.target.fmt == SQZ_QFMT_Q4_1)) continue;
            sqz_qmatrix r[3], a[3];
            memset(r, 0, sizeof r);
            memset(a, 0, sizeof a);
            SQZ_ASSERT_OK(sqz_quant_rtn(lin, n, &sb.s, &o, r, NULL));
            SQZ_ASSERT_OK(sqz_quant_awq(lin, n, &sb.s, &o, a, s));
            /* the stored weight is W diag(s): keep s as the input scale to run it */
            for (int i = 0; i < n; i++) {
                if (a[i].qp.scheme != SQZ_QSCHEME_NONE) SQZ_ASSERT_OK(sqz_qmatrix_set_in_scale(&a[i], s));
            }
            double er = group_err(&f, g, lin, n, r), ea;
            if (a[0].qp.scheme != SQZ_QSCHEME_NONE) {
                ea = group_err(&f, g, lin, n, a);
            } else { /* GGUF blocks: fold 1/s into the input instead (what folding into the norm does) */
                float *xs = malloc((size_t)(f.n_rows * n_in) * sizeof(float));
                for (int64_t t = 0; t < f.n_rows * n_in; t++) xs[t] = f.x[g][t] / s[t % n_in];
                double num = 0, den = 0;
                for (int i = 0; i < n; i++) {
                    float *deq = malloc((size_t)(a[i].n_out * n_in) * sizeof(float));
                    SQZ_ASSERT_OK(sqz_qmatrix_to_f32(&a[i], deq));
                    /* error of Q(W s) on x / s against W on x: compare outputs row by row */
                    const int64_t m = f.n_rows - f.n_calib, no = a[i].n_out;
                    float *y0 = malloc((size_t)(m * no) * 4), *y1 = malloc((size_t)(m * no) * 4);
                    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)m, (int)no, (int)n_in, 1.0f,
                                f.x[g] + f.n_calib * n_in, (int)n_in, lin[i].w, (int)n_in, 0.0f, y0, (int)no);
                    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)m, (int)no, (int)n_in, 1.0f,
                                xs + f.n_calib * n_in, (int)n_in, deq, (int)n_in, 0.0f, y1, (int)no);
                    double nn = 0, dd = 0;
                    for (int64_t t = 0; t < m * no; t++) {
                        nn += ((double)y0[t] - y1[t]) * ((double)y0[t] - y1[t]);
                        dd += (double)y0[t] * y0[t];
                    }
                    num += nn / dd * (double)no;
                    den += (double)no;
                    free(deq); free(y0); free(y1);
                }
                ea = sqrt(num / den);
                free(xs);
            }
            print_message("  %-7s %-8s g%-3d  rtn %.5f  awq %.5f  (alpha %.2f)\n", group_names[g],
                          sqz_qformat_name(o.target.fmt), (int)o.target.group, er, ea, (double)a[0].alpha);
            assert_true(ea < er);
            free_all(r, n);
            free_all(a, n);
        }
        /* imatrix (llama.cpp's weighted Q4_0 / Q4_1) against plain RTN */
        for (int qf = SQZ_QFMT_Q4_0; qf <= SQZ_QFMT_Q4_1; qf++) {
            sqz_quant_opts o = sqz_quant_default_opts();
            o.target = (sqz_qtarget){(sqz_qformat)qf, 32};
            if (!sqz_qtarget_fits(&o.target, n_in) || (on_q4_1_grid && qf == SQZ_QFMT_Q4_1)) continue;
            sqz_qmatrix r[3], im[3];
            memset(r, 0, sizeof r);
            memset(im, 0, sizeof im);
            SQZ_ASSERT_OK(sqz_quant_rtn(lin, n, &sb.s, &o, r, NULL));
            SQZ_ASSERT_OK(sqz_quant_imatrix(lin, n, &sb.s, &o, im, NULL));
            const double er = group_err(&f, g, lin, n, r), ei = group_err(&f, g, lin, n, im);
            print_message("  %-7s %-8s imatrix %.5f (rtn %.5f)\n", group_names[g], sqz_qformat_name(o.target.fmt),
                          ei, er);
            assert_true(ei < er);
            free_all(r, n);
            free_all(im, n);
        }
        free(s);
        sqz_qstats_buf_free(&sb);
        for (int i = 0; i < n; i++) free((void *)lin[i].w);
    }
    qfix_free(&f);
}

static void test_awq_stories260K(void **state) {
    (void)state;
    run_awq("stories260K", sqz_test_data("models/stories260K/stories260K.bin"), 1, 512, 4, false);
}
static void test_awq_tinystories(void **state) {
    (void)state;
    run_awq("tinystories-656K", sqz_test_data("models/tinystories-656K"), 1, 512, 4, false);
}
static void test_awq_smollm2(void **state) {
    (void)state;
    run_awq("SmolLM2-135M", sqz_test_smollm2(), 2, 512, 4, true);
}

/* Folding: (x / s) . (W diag s)^T == x . W^T, through an RMSNorm weight and a previous linear. */
static void test_fold(void **state) {
    (void)state;
    enum { N = 64, M = 8, P = 5 };
    float gamma[N], gamma2[N], x[N], xn[N], w[M * N], ws[M * N], s[N], prev[N * P], prev2[N * P], u[P];
    for (int j = 0; j < N; j++) {
        gamma[j] = gamma2[j] = 0.5f + 0.01f * (float)j;
        x[j] = sinf((float)j);
        s[j] = 0.25f + (float)(j % 7);
    }
    for (int i = 0; i < M * N; i++) w[i] = ws[i] = cosf(0.3f * (float)i);
    sqz_scale_columns(ws, M, N, s);
    sqz_fold_smooth_into_norm(gamma2, NULL, N, s);
    for (int i = 0; i < M; i++) {
        double a = 0, b = 0;
        for (int j = 0; j < N; j++) {
            a += (double)(x[j] * gamma[j]) * w[i * N + j];
            b += (double)(x[j] * gamma2[j]) * ws[i * N + j];
        }
        assert_true(fabs(a - b) < 1e-4 * (fabs(a) + 1));
    }
    /* previous linear: its output channel j feeds input j */
    for (int i = 0; i < N * P; i++) prev[i] = prev2[i] = sinf(0.7f * (float)i);
    for (int k = 0; k < P; k++) u[k] = cosf((float)k);
    sqz_fold_smooth_into_linear(prev2, NULL, N, P, s);
    for (int j = 0; j < N; j++) {
        double a = 0, b = 0;
        for (int k = 0; k < P; k++) { a += (double)prev[j * P + k] * u[k]; b += (double)prev2[j * P + k] * u[k]; }
        xn[j] = (float)b;
        assert_true(fabs(a / s[j] - b) < 1e-5 * (fabs(a) + 1));
    }
    (void)xn;
}

/* SmoothQuant on the input with the strongest outlier channels of SmolLM2 (or tinystories). */
static void run_smoothquant(const char *label, const char *path, int32_t layer, int64_t win, int windows) {
    qfix f;
    qfix_load(&f, path, layer, win, windows);
    /* outlier strength: max over channels of absmax / median absmax */
    int best_g = 0;
    double best_ratio = 0;
    for (int g = 0; g < QF_N; g++) {
        sqz_qstats_buf sb;
        SQZ_ASSERT_OK(sqz_qstats_compute(f.x[g], f.n_calib, f.dim[g], SQZ_QSTAT_ABSMAX, 0, &sb));
        float *a = malloc((size_t)f.dim[g] * 4);
        memcpy(a, sb.s.absmax, (size_t)f.dim[g] * 4);
        float mx = 0;
        for (int64_t j = 0; j < f.dim[g]; j++) mx = a[j] > mx ? a[j] : mx;
        /* median by partial selection (n is small) */
        for (int64_t i = 0; i <= f.dim[g] / 2; i++)
            for (int64_t j = i + 1; j < f.dim[g]; j++)
                if (a[j] < a[i]) { float t = a[i]; a[i] = a[j]; a[j] = t; }
        const double ratio = mx / a[f.dim[g] / 2];
        print_message("%s layer %d %-7s: max|x| %.2f, %.1f x the median channel\n", label, (int)layer, group_names[g],
                      (double)mx, ratio);
        if (ratio > best_ratio) { best_ratio = ratio; best_g = g; }
        free(a);
        sqz_qstats_buf_free(&sb);
    }
    const int g = best_g;
    sqz_qlinear lin[3];
    const int n = load_group(&f, g, lin);
    sqz_qstats_buf sb;
    SQZ_ASSERT_OK(sqz_qstats_compute(f.x[g], f.n_calib, f.dim[g],
                                     SQZ_QSTAT_SAMPLE | SQZ_QSTAT_ABSMAX | SQZ_QSTAT_HIST, 0, &sb));
    float *s = malloc((size_t)f.dim[g] * 4);
    const struct { sqz_act_mode mode; sqz_act_calib calib; const char *name; } cases[] = {
        {SQZ_ACT_STATIC_TENSOR, SQZ_ACT_CALIB_MINMAX, "static minmax"},
        {SQZ_ACT_DYNAMIC_TOKEN, SQZ_ACT_CALIB_MINMAX, "dynamic per token"},
        {SQZ_ACT_STATIC_TENSOR, SQZ_ACT_CALIB_PERCENTILE, "static p99.99"},
        {SQZ_ACT_STATIC_TENSOR, SQZ_ACT_CALIB_KL, "static KL"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        sqz_quant_opts o = sqz_quant_default_opts();
        o.target = (sqz_qtarget){SQZ_QFMT_I8, 0};
        o.act_mode = cases[c].mode;
        o.act_calib = cases[c].calib;
        sqz_qmatrix p[3], q[3], wo[3];
        memset(p, 0, sizeof p);
        memset(q, 0, sizeof q);
        memset(wo, 0, sizeof wo);
        SQZ_ASSERT_OK(sqz_quant_rtn(lin, n, &sb.s, &o, p, NULL)); /* plain W8A8 */
        SQZ_ASSERT_OK(sqz_quant_smoothquant(lin, n, &sb.s, &o, q, s));
        for (int i = 0; i < n; i++) {
            assert_int_equal(q[i].qp.act_mode, cases[c].mode);
            SQZ_ASSERT_OK(sqz_qmatrix_set_in_scale(&q[i], s));
        }
        sqz_quant_opts ow = o;
        ow.act_mode = SQZ_ACT_FLOAT;
        SQZ_ASSERT_OK(sqz_quant_rtn(lin, n, &sb.s, &ow, wo, NULL)); /* W8A16 for reference */
        const double ep = group_err(&f, g, lin, n, p), eq = group_err(&f, g, lin, n, q), ew = group_err(&f, g, lin, n, wo);
        print_message("  %-7s W8A8 %-17s plain %.5f  smoothquant %.5f (alpha %.2f)  [W8A16 %.5f]\n", group_names[g],
                      cases[c].name, ep, eq, (double)q[0].alpha, ew);
        if (c < 2) assert_true(eq < ep);
        free_all(p, n);
        free_all(q, n);
        free_all(wo, n);
    }
    /* a fixed alpha is honoured; W8A8 needs the i8 target and an activation mode */
    sqz_quant_opts o = sqz_quant_default_opts();
    o.act_mode = SQZ_ACT_DYNAMIC_TOKEN;
    o.sq_alpha = 0.5f;
    sqz_qmatrix q[3];
    memset(q, 0, sizeof q);
    SQZ_ASSERT_OK(sqz_quant_smoothquant(lin, n, &sb.s, &o, q, s));
    assert_true(q[0].alpha == 0.5f);
    free_all(q, n);
    o.act_mode = SQZ_ACT_FLOAT;
    assert_int_equal(sqz_quant_smoothquant(lin, n, &sb.s, &o, q, s), SQZ_ERR_INVALID_ARG);
    o.act_mode = SQZ_ACT_DYNAMIC_TOKEN;
    o.target = (sqz_qtarget){SQZ_QFMT_Q4_0, 32};
    assert_int_equal(sqz_quant_smoothquant(lin, n, &sb.s, &o, q, s), SQZ_ERR_UNSUPPORTED);
    free(s);
    sqz_qstats_buf_free(&sb);
    for (int i = 0; i < n; i++) free((void *)lin[i].w);
    qfix_free(&f);
}

static void test_smoothquant_smollm2(void **state) {
    (void)state;
    run_smoothquant("SmolLM2-135M", sqz_test_smollm2(), 2, 512, 4);
}
static void test_smoothquant_tinystories(void **state) {
    (void)state;
    run_smoothquant("tinystories-656K", sqz_test_data("models/tinystories-656K"), 1, 512, 4);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fold),
        cmocka_unit_test(test_awq_stories260K),
        cmocka_unit_test(test_awq_tinystories),
        cmocka_unit_test(test_awq_smollm2),
        cmocka_unit_test(test_smoothquant_tinystories),
        cmocka_unit_test(test_smoothquant_smollm2),
    };
    /* every real-layer case needs the text: without it only test_fold would run */
    if (!sqz_test_needs(sqz_test_data("data/wiki.test.raw"))) return SQZ_TEST_SKIP;
    return sqz_test_run(tests, NULL, NULL);
}

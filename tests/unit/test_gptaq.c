/* tests/unit/test_gptaq.c - GPTAQ (gptq with sqz_quant_opts.gptaq) on real weights and activations.
 *   zero_dx: with dXX^T = 0 (X = X~) GPTAQ's result is GPTQ's, byte for byte, for INT8, INT4
 *     (g32, act-order and in order) and Q4_0 / Q8_0 on tinystories-656K's block 1 inputs;
 *   driver: the sequential driver with SQZ_QSTAT_DXXT on tinystories-656K (2 blocks) and
 *     stories260K (5 blocks; its 172-wide ffn_down fits no group and is skipped), the blocks compressed
 *     (int4:gptq:g32) as they go so the compressed stream leaves the float one: at block 0 the
 *     two streams are the same (dXX^T is exactly 0 and GPTAQ == GPTQ byte for byte); at every
 *     later block GPTAQ's ||Q X~ - W X||^2 over the calibration tokens is lower than GPTQ's for
 *     the layers (the sum per block, and most layers one by one). The objective needs no rows:
 *     ||Q X~ - W X||^2 = sum_rows q H q^T - 2 q (H + dXX^T^T) w^T + const, H = X~^T X~,
 *     since X~^T X = H + dXX^T^T. The device path (fake_device.h: P in "device" memory, a second
 *     sgemm per block) agrees with the host's GPTAQ on >= 99.9% of the weights. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fake_device.h"
#include "quant_fixture.h"
#include "sqz/calib.h"
#include "sqz/compress.h"

static const char *tiny(void) { return sqz_test_data("models/tinystories-656K"); }

static const sqz_role lin_roles[] = {SQZ_ROLE_ATTN_Q,  SQZ_ROLE_ATTN_K, SQZ_ROLE_ATTN_V,  SQZ_ROLE_ATTN_OUT,
                                     SQZ_ROLE_FFN_GATE, SQZ_ROLE_FFN_UP, SQZ_ROLE_FFN_DOWN};

/* GPTQ with and without GPTAQ on one layer; the two results' bytes compared (or returned). */
static void quant_pair(const float *w, int64_t n_out, const sqz_qstats *st, sqz_quant_opts o, sqz_qmatrix *gq,
                       sqz_qmatrix *aq) {
    const sqz_qlinear lin = {.w = w, .n_out = n_out, .name = "layer"};
    memset(gq, 0, sizeof *gq);
    memset(aq, 0, sizeof *aq);
    o.gptaq = false;
    SQZ_ASSERT_OK(sqz_quant_gptq(&lin, 1, st, &o, gq, NULL));
    o.gptaq = true;
    SQZ_ASSERT_OK(sqz_quant_gptq(&lin, 1, st, &o, aq, NULL));
}

static void assert_same(const sqz_qmatrix *a, const sqz_qmatrix *b) {
    assert_int_equal(a->nbytes, b->nbytes);
    assert_memory_equal(a->data, b->data, a->nbytes);
}

static void test_zero_dx(void **state) {
    (void)state;
    qfix f;
    qfix_load(&f, tiny(), 1, 128, 4);
    static const int targets[][3] = {{SQZ_QFMT_I8, 0, 1},   {SQZ_QFMT_I4_SYM, 32, 1}, {SQZ_QFMT_I4_SYM, 32, 0},
                                     {SQZ_QFMT_I4_ASYM, 64, 1}, {SQZ_QFMT_Q4_0, 0, 1}, {SQZ_QFMT_Q8_0, 0, 0}};
    int compared = 0;
    for (int g = 0; g < QF_N; g++) {
        const sqz_role role = g == QF_QKV ? SQZ_ROLE_ATTN_Q : g == QF_O ? SQZ_ROLE_ATTN_OUT
                              : g == QF_GATEUP ? SQZ_ROLE_FFN_UP : SQZ_ROLE_FFN_DOWN;
        int64_t n_out, n_in;
        float *w = qfix_weight(&f, role, &n_out, &n_in);
        sqz_qstats_buf sb;
        SQZ_ASSERT_OK(sqz_qstats_compute(f.x[g], f.n_calib, n_in, SQZ_QSTAT_XTX, 0, &sb));
        double *zero = calloc((size_t)(n_in * n_in), sizeof(double));
        sb.s.dxxt = zero;
        for (size_t t = 0; t < sizeof targets / sizeof targets[0]; t++) {
            sqz_quant_opts o = sqz_quant_default_opts();
            o.target = (sqz_qtarget){(sqz_qformat)targets[t][0], targets[t][1]};
            o.act_order = targets[t][2];
            if (!sqz_qtarget_fits(&o.target, n_in)) continue;
            sqz_qmatrix gq, aq;
            quant_pair(w, n_out, &sb.s, o, &gq, &aq);
            assert_same(&gq, &aq);
            compared++;
            sqz_qmatrix_free(&gq);
            sqz_qmatrix_free(&aq);
        }
        free(zero);
        sqz_qstats_buf_free(&sb);
        free(w);
    }
    print_message("dXX^T = 0: GPTAQ == GPTQ byte for byte in %d layer x format cases\n", compared);
    assert_true(compared >= 16);
    qfix_free(&f);
}

/* sum over rows of q H q^T - 2 q A w^T, A = H + D^T (the objective less its constant). */
static double objective(const float *w, const float *q, int64_t n_out, int64_t n, const double *h, const double *d) {
    double *hq = malloc((size_t)n * sizeof(double)), *aw = malloc((size_t)n * sizeof(double));
    double total = 0;
    for (int64_t r = 0; r < n_out; r++) {
        const float *wr = w + r * n, *qr = q + r * n;
        for (int64_t i = 0; i < n; i++) {
            double a = 0, b = 0;
            for (int64_t j = 0; j < n; j++) {
                a += h[i * n + j] * qr[j];
                b += (h[i * n + j] + d[j * n + i]) * wr[j];
            }
            hq[i] = a;
            aw[i] = b;
        }
        for (int64_t i = 0; i < n; i++) total += qr[i] * hq[i] - 2.0 * qr[i] * aw[i];
    }
    free(hq);
    free(aw);
    return total;
}

typedef struct drv {
    sqz_model *m;
    sqz_backend *dev; /* fake_device.h */
    double agree_min;
    sqz_compress_opts co;
    sqz_compress_report rep;
    int same, better, worse;
    int blocks_better, blocks;
} drv;

static float *weight_of(const sqz_model *m, sqz_role role, int32_t layer, int64_t *n_out) {
    const sqz_tensor *t = sqz_model_get(m, role, layer, SQZ_PARAM_WEIGHT);
    if (!t) return NULL;
    float *w = malloc((size_t)sqz_tensor_nelements(t) * sizeof(float));
    SQZ_ASSERT_OK(sqz_tensor_to_f32(t, w));
    *n_out = t->shape[0];
    return w;
}

/* One layer of block `layer`: GPTQ and GPTAQ on its input's statistics, compared. */
static void compare_layer(drv *D, int32_t layer, sqz_role role, const sqz_qstats *st, double *gain_sum) {
    int64_t n_out = 0;
    float *w = weight_of(D->m, role, layer, &n_out);
    if (!w) return;
    const int64_t n = st->n_in;
    sqz_quant_opts o = sqz_quant_default_opts();
    o.target = (sqz_qtarget){SQZ_QFMT_I4_SYM, 32};
    o.act_order = true;
    o.static_groups = true;
    if (!sqz_qtarget_fits(&o.target, n)) {
        free(w);
        return;
    }
    sqz_qmatrix gq, aq;
    quant_pair(w, n_out, st, o, &gq, &aq);
    if (layer == 0) {
        assert_same(&gq, &aq);
        D->same++;
    } else {
        float *qg = malloc((size_t)(n_out * n) * sizeof(float)), *qa = malloc((size_t)(n_out * n) * sizeof(float));
        SQZ_ASSERT_OK(sqz_qmatrix_to_f32(&gq, qg));
        SQZ_ASSERT_OK(sqz_qmatrix_to_f32(&aq, qa));
        const double fg = objective(w, qg, n_out, n, st->xtx, st->dxxt);
        const double fa = objective(w, qa, n_out, n, st->xtx, st->dxxt);
        print_message("  block %d %-9s gptq %.6g  gptaq %.6g  (gptaq - gptq %.4g)\n", (int)layer, sqz_role_name(role),
                      fg, fa, fa - fg);
        sqz_qmatrix dq;
        memset(&dq, 0, sizeof dq);
        const sqz_qlinear lin = {.w = w, .n_out = n_out, .name = "layer"};
        o.gptaq = true;
        o.backend = D->dev;
        SQZ_ASSERT_OK(sqz_quant_gptq(&lin, 1, st, &o, &dq, NULL));
        float *qd = malloc((size_t)(n_out * n) * sizeof(float));
        SQZ_ASSERT_OK(sqz_qmatrix_to_f32(&dq, qd));
        int64_t same = 0;
        for (int64_t j = 0; j < n_out * n; j++) same += qd[j] == qa[j];
        D->agree_min = fmin(D->agree_min, (double)same / (double)(n_out * n));
        free(qd);
        sqz_qmatrix_free(&dq);
        if (fa < fg) D->better++;
        else D->worse++;
        *gain_sum += fg - fa;
        free(qg);
        free(qa);
    }
    sqz_qmatrix_free(&gq);
    sqz_qmatrix_free(&aq);
    free(w);
}

static sqz_status on_block(void *user, sqz_session *s, int32_t layer, const sqz_calib_block *b) {
    drv *D = user;
    double gain = 0;
    for (int i = 0; i < b->n_inputs; i++) {
        const sqz_qstats *st = &b->in[i].st;
        assert_true(b->in[i].have & SQZ_QSTAT_DXXT);
        assert_non_null(st->dxxt);
        double dmax = 0;
        for (int64_t j = 0; j < st->n_in * st->n_in; j++) dmax = fmax(dmax, fabs(st->dxxt[j]));
        if (layer == 0) assert_true(dmax == 0.0); /* the same stream: exactly zero */
        else assert_true(dmax > 0.0);
        for (size_t r = 0; r < sizeof lin_roles / sizeof lin_roles[0]; r++)
            if (b->in[i].roles & (1u << lin_roles[r])) compare_layer(D, layer, lin_roles[r], st, &gain);
    }
    if (layer > 0) {
        D->blocks++;
        if (gain > 0) D->blocks_better++;
    }
    sqz_session_invalidate(s, layer);
    return sqz_compress_block(D->m, layer, b, &D->co, &D->rep);
}

static void run_driver(const char *path, int min_blocks) {
    SQZ_SKIP_UNLESS(path);
    SQZ_SKIP_UNLESS(sqz_test_data("data/wiki.test.raw"));
    drv D;
    memset(&D, 0, sizeof D);
    SQZ_ASSERT_OK(sqz_model_open(path, NULL, &D.m));
    fake_device fd;
    fake_device_init(&fd, 0);
    D.dev = &fd.b;
    D.agree_min = 1.0;
    D.co = sqz_compress_default_opts();
    SQZ_ASSERT_OK(sqz_compress_spec_parse("int4:gptq:g32", &D.co.spec));
    char *text;
    size_t len;
    SQZ_ASSERT_OK(sqz_read_file(sqz_test_data("data/wiki.test.raw"), (size_t)1 << 31, &text, &len));
    if (len > 200000) len = 200000;
    sqz_tokenizer *tok;
    SQZ_ASSERT_OK(sqz_tokenizer_new(&D.m->vocab, &tok));
    sqz_calib_windows w;
    SQZ_ASSERT_OK(sqz_calib_windows_make(tok, text, len, 8, 128, 7, &w));
    sqz_tokenizer_free(tok);
    free(text);
    sqz_session_opts so = sqz_session_default_opts();
    so.max_tokens = w.ctx;
    sqz_session *s;
    SQZ_ASSERT_OK(sqz_session_new(D.m, &so, &s));
    sqz_calib_run_opts ro;
    memset(&ro, 0, sizeof ro);
    ro.observe.needs = SQZ_QSTAT_XTX | SQZ_QSTAT_DXXT;
    ro.recompute = true;
    ro.on_block = on_block;
    ro.user = &D;
    SQZ_ASSERT_OK(sqz_calib_run(s, &w, &ro));
    print_message("%s: block 0: %d layers identical; later blocks: GPTAQ lower in %d layers, higher in %d; lower "
                  "in %d of %d blocks\n", path, D.same, D.better, D.worse, D.blocks_better, D.blocks);
    assert_true(D.same >= 6);
    assert_int_equal(D.blocks, min_blocks);
    assert_int_equal(D.blocks_better, D.blocks);
    assert_true(D.better > 2 * D.worse);
    print_message("device path: agrees with the host's GPTAQ on >= %.5f%% of each layer's weights\n",
                  100.0 * D.agree_min);
    assert_true(D.agree_min >= 0.999);
    fake_device_free(&fd);
    assert_int_equal(fake_live, 0);
    sqz_compress_report_free(&D.rep);
    sqz_session_free(s);
    sqz_calib_windows_free(&w);
    sqz_model_free(D.m);
}

static void test_driver(void **state) {
    (void)state;
    run_driver(tiny(), 1);
    run_driver(sqz_test_data("models/stories260K/stories260K.bin"), 4);
}

/* A GPTAQ spec without the float stream (no dXX^T) is refused by name. */
static void test_needs_dxxt(void **state) {
    (void)state;
    float w[4 * 32];
    for (int i = 0; i < 4 * 32; i++) w[i] = sinf(0.37f * (float)i);
    double h[32 * 32] = {0};
    for (int i = 0; i < 32; i++)
        for (int j = 0; j < 32; j++) h[i * 32 + j] = (i == j ? 2.0 : 0.0) + 0.3 / (1 + abs(i - j));
    const sqz_qstats st = {.n_in = 32, .n_tokens = 1, .xtx = h};
    const sqz_qlinear lin = {.w = w, .n_out = 4};
    sqz_quant_opts o = sqz_quant_default_opts();
    o.target = (sqz_qtarget){SQZ_QFMT_Q4_0, 0};
    o.gptaq = true;
    sqz_qmatrix q;
    memset(&q, 0, sizeof q);
    assert_int_equal(sqz_quant_gptq(&lin, 1, &st, &o, &q, NULL), SQZ_ERR_INVALID_ARG);
    assert_non_null(strstr(sqz_last_error(), "dXX^T"));
    /* optional (the SPEC's default when gptaq is not named): plain GPTQ without dXX^T, its bytes */
    sqz_qmatrix g;
    memset(&g, 0, sizeof g);
    o.gptaq_optional = true;
    SQZ_ASSERT_OK(sqz_quant_gptq(&lin, 1, &st, &o, &q, NULL));
    o.gptaq = o.gptaq_optional = false;
    SQZ_ASSERT_OK(sqz_quant_gptq(&lin, 1, &st, &o, &g, NULL));
    assert_same(&q, &g);
    sqz_qmatrix_free(&q);
    sqz_qmatrix_free(&g);
    sqz_compress_spec sp;
    SQZ_ASSERT_OK(sqz_compress_spec_parse("q4_k:gptq:gptaq:gptaq-alpha=0.5:pure", &sp));
    assert_true(sp.q.gptaq);
    assert_true(sp.q.gptaq_alpha == 0.5);
    assert_true(sqz_compress_needs(&sp) & SQZ_QSTAT_DXXT);
    assert_false(sp.q.gptaq_optional); /* asked for: required */
    SQZ_ASSERT_OK(sqz_compress_spec_parse("q4_k:gptq:no-gptaq:pure", &sp));
    assert_false(sp.q.gptaq);
    assert_false(sqz_compress_needs(&sp) & SQZ_QSTAT_DXXT);
    assert_int_equal(sqz_compress_spec_parse("q4_k:rtn:gptaq:pure", &sp), SQZ_ERR_INVALID_ARG);
    assert_int_equal(sqz_compress_spec_parse("q4_k:gptq:no-gptaq:gptaq-alpha=0.5:pure", &sp), SQZ_ERR_INVALID_ARG);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_needs_dxxt),
        cmocka_unit_test(test_zero_dx),
        cmocka_unit_test(test_driver),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

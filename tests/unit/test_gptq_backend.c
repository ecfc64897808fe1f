/* tests/unit/test_gptq_backend.c - GPTQ through sqz_quant_opts.backend and threads (issue 26),
 * on real layers with real activations (tinystories-656K block 1: q|k|v 128 wide, down 384;
 * SmolLM2-135M's ffn_down, 1536 wide, for Q4_K when its package is installed):
 *   the CPU backend gives the bytes (and loss, g_idx) of backend NULL for Q4_0, IQ4_NL, Q4_K and
 *     I4 g128 with act-order, and so do 1 and 2 threads of the row sweep;
 *   the device path (fake_device.h: the CPU slots with host_memory false: the weights transposed
 *     in "device" memory, one trans_a sgemm per block) dequantizes to the host path's values for
 *     at least 99.9% of the weights, frees its memory and calls the slots;
 *   a SparseGPT-style mask without quantization takes the device path too (same zeros, values
 *     close). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fake_device.h"
#include "quant/quant_internal.h"
#include "quant_fixture.h"

typedef struct fcase {
    sqz_qformat fmt;
    int32_t group;
    bool act_order;
    bool static_groups; /* K-quants: the original rows' grids; else made as the sweep reaches them */
} fcase;

static void qfree(sqz_qmatrix *q, int n) {
    for (int i = 0; i < n; i++) sqz_qmatrix_free(&q[i]);
}

static void same_bytes(const sqz_qmatrix *a, const sqz_qmatrix *b, int n, const char *what) {
    for (int i = 0; i < n; i++) {
        assert_int_equal(a[i].nbytes, b[i].nbytes);
        if (memcmp(a[i].data, b[i].data, a[i].nbytes)) fail_msg("%s: layer %d differs", what, i);
        assert_true(a[i].loss == b[i].loss);
        assert_true(!a[i].qp.g_idx == !b[i].qp.g_idx);
        if (a[i].qp.g_idx) assert_memory_equal(a[i].qp.g_idx, b[i].qp.g_idx, (size_t)a[i].n_in * sizeof(int32_t));
    }
}

/* Share of the weights whose dequantized values agree exactly. */
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

/* One format on one group of layers: NULL vs CPU backend vs 1 / 2 threads (bytes), vs the device
 * path (values). */
static void one_case(const fcase *fc, const sqz_qlinear *lin, int n, const sqz_qstats *st, sqz_backend *cpu,
                     sqz_backend *dev, const char *label) {
    sqz_quant_opts o = sqz_quant_default_opts();
    o.target = (sqz_qtarget){fc->fmt, fc->group};
    o.act_order = fc->act_order;
    o.static_groups = fc->static_groups;
    sqz_qmatrix ref[3], q[3];
    memset(ref, 0, sizeof ref);
    SQZ_ASSERT_OK(sqz_quant_gptq(lin, n, st, &o, ref, NULL));
    const double t_ref = ref[0].seconds;
    sqz_backend *bes[] = {cpu, NULL, NULL};
    const int threads[] = {0, 1, 2};
    for (int k = 0; k < 3; k++) {
        sqz_quant_opts ok = o;
        ok.backend = bes[k];
        ok.threads = threads[k];
        memset(q, 0, sizeof q);
        SQZ_ASSERT_OK(sqz_quant_gptq(lin, n, st, &ok, q, NULL));
        same_bytes(ref, q, n, k == 0 ? "CPU backend" : k == 1 ? "1 thread" : "2 threads");
        qfree(q, n);
    }
    sqz_quant_opts od = o;
    od.backend = dev;
    memset(q, 0, sizeof q);
    fake_calls_chol = fake_calls_sgemm = 0;
    SQZ_ASSERT_OK(sqz_quant_gptq(lin, n, st, &od, q, NULL));
    assert_int_equal(fake_live, 0);
    assert_true(fake_calls_chol >= 1);
    assert_true(fake_calls_sgemm >= (st->n_in > o.blocksize ? 1 : 0));
    const double a = agree(ref, q, n);
    double lr = 0, ld = 0;
    for (int i = 0; i < n; i++) {
        lr += ref[i].loss;
        ld += q[i].loss;
    }
    print_message("  %-18s %-7s g%-3d%s: CPU backend, 1 and 2 threads identical; device path agrees on %.5f%% "
                  "of the weights, loss %.6g vs %.6g (host %.3f s)\n",
                  label, sqz_qformat_name(fc->fmt), (int)fc->group, fc->act_order ? " act-order" : "", 100.0 * a, ld,
                  lr, t_ref);
    /* dynamic K-quant grids: llama.cpp's discrete scale choice for a super-block can flip on the
     * device's last-bit differences in the updated weights, and the row then differs from there */
    const bool kdyn = !fc->static_groups && !fc->act_order && (fc->fmt == SQZ_QFMT_Q4_K);
    assert_true(a >= (kdyn ? 0.99 : 0.999));
    assert_true(fabs(ld - lr) <= (kdyn ? 1e-2 : 1e-3) * lr + 1e-12);
    qfree(q, n);
    qfree(ref, n);
}

static const sqz_role qkv[3] = {SQZ_ROLE_ATTN_Q, SQZ_ROLE_ATTN_K, SQZ_ROLE_ATTN_V};

/* The layers reading input g of f's block (q|k|v or down), their statistics. */
static int layers_of(const qfix *f, int g, sqz_qlinear *lin, sqz_qstats_buf *sb) {
    int n = 0;
    int64_t n_in = 0, n_out;
    for (int k = 0; k < (g == QF_QKV ? 3 : 1); k++, n++) {
        const sqz_role r = g == QF_QKV ? qkv[k] : SQZ_ROLE_FFN_DOWN;
        float *w = qfix_weight(f, r, &n_out, &n_in);
        lin[n] = (sqz_qlinear){.w = w, .n_out = n_out, .name = sqz_role_name(r)};
    }
    assert_int_equal(n_in, f->dim[g]);
    SQZ_ASSERT_OK(sqz_qstats_compute(f->x[g], f->n_calib, n_in, SQZ_QSTAT_XTX, 0, sb));
    return n;
}

static void test_tinystories(void **state) {
    (void)state;
    qfix f;
    qfix_load(&f, sqz_test_data("models/tinystories-656K"), 1, 256, 4);
    sqz_backend *cpu;
    SQZ_ASSERT_OK(sqz_backend_cpu(0, &cpu));
    fake_device fd;
    fake_device_init(&fd, 0);
    const fcase cases[] = {{SQZ_QFMT_Q4_0, 32, false, false}, {SQZ_QFMT_Q4_0, 32, true, false},
                           {SQZ_QFMT_I4_SYM, 128, true, false},  {SQZ_QFMT_I4_ASYM, 128, false, false},
                           {SQZ_QFMT_IQ4_NL, 0, false, false},   {SQZ_QFMT_I8, 0, false, false}};
    const int groups[2] = {QF_QKV, QF_DOWN};
    for (int gi = 0; gi < 2; gi++) {
        sqz_qlinear lin[3];
        sqz_qstats_buf sb;
        const int n = layers_of(&f, groups[gi], lin, &sb);
        for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
            one_case(&cases[c], lin, n, &sb.s, cpu, &fd.b, gi ? "tinystories down" : "tinystories q|k|v");
        for (int i = 0; i < n; i++) free((void *)lin[i].w);
        sqz_qstats_buf_free(&sb);
    }
    fake_device_free(&fd);
    sqz_backend_free(cpu);
    qfix_free(&f);
}

static void test_smollm2_q4_k(void **state) {
    (void)state;
    qfix f;
    qfix_load(&f, sqz_test_smollm2(), 0, 256, 4);
    sqz_backend *cpu;
    SQZ_ASSERT_OK(sqz_backend_cpu(0, &cpu));
    fake_device fd;
    fake_device_init(&fd, 0);
    sqz_qlinear lin[1];
    sqz_qstats_buf sb;
    const int n = layers_of(&f, QF_DOWN, lin, &sb);
    const fcase c = {SQZ_QFMT_Q4_K, 0, false, true}, cd = {SQZ_QFMT_Q4_K, 0, false, false};
    one_case(&c, lin, n, &sb.s, cpu, &fd.b, "SmolLM2 ffn_down");
    one_case(&cd, lin, n, &sb.s, cpu, &fd.b, "SmolLM2 ffn_down dynamic");
    free((void *)lin[0].w);
    sqz_qstats_buf_free(&sb);
    fake_device_free(&fd);
    sqz_backend_free(cpu);
    qfix_free(&f);
}

/* A block-wide mask: the weights under half the block's mean saliency |w| / U_jj become 0. */
static void half_mean_select(void *user, const float *w, int64_t ld_w, int64_t rows, int64_t cols, const float *ud,
                             uint8_t *prune, int64_t ld_p) {
    (void)user;
    double mean = 0;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t j = 0; j < cols; j++) mean += fabs((double)w[r * ld_w + j]) / ud[j];
    mean /= (double)(rows * cols);
    for (int64_t r = 0; r < rows; r++)
        for (int64_t j = 0; j < cols; j++) prune[r * ld_p + j] = fabs((double)w[r * ld_w + j]) / ud[j] < 0.5 * mean;
}

static void test_mask_device(void **state) {
    (void)state;
    qfix f;
    qfix_load(&f, sqz_test_data("models/tinystories-656K"), 1, 256, 4);
    fake_device fd;
    fake_device_init(&fd, 0);
    sqz_qlinear lin[3];
    sqz_qstats_buf sb;
    const int n = layers_of(&f, QF_DOWN, lin, &sb);
    const int64_t ne = lin[0].n_out * sb.s.n_in;
    float *vh = malloc((size_t)ne * sizeof(float)), *vd = malloc((size_t)ne * sizeof(float));
    const sqz__gptq_mask mk = {.per_row = false, .span = 128, .quantize = false, .select = half_mean_select};
    sqz_quant_opts o = sqz_quant_default_opts();
    SQZ_ASSERT_OK(sqz__gptq_masked(lin, n, &sb.s, &o, &mk, NULL, &vh));
    o.backend = &fd.b;
    SQZ_ASSERT_OK(sqz__gptq_masked(lin, n, &sb.s, &o, &mk, NULL, &vd));
    assert_int_equal(fake_live, 0);
    int64_t zeros = 0, same_zero = 0, close = 0;
    for (int64_t i = 0; i < ne; i++) {
        zeros += vh[i] == 0.0f;
        same_zero += (vh[i] == 0.0f) == (vd[i] == 0.0f);
        close += fabsf(vh[i] - vd[i]) <= 1e-4f * (fabsf(vh[i]) + 1e-3f);
    }
    print_message("  mask, tinystories down: %.1f%% zeros; device path: %.4f%% the same zeros, %.4f%% of the "
                  "values within 1e-4\n", 100.0 * (double)zeros / (double)ne, 100.0 * (double)same_zero / (double)ne,
                  100.0 * (double)close / (double)ne);
    assert_true(zeros > ne / 10);
    assert_true(same_zero >= ne - ne / 1000);
    assert_true(close >= ne - ne / 1000);
    free(vh);
    free(vd);
    free((void *)lin[0].w);
    sqz_qstats_buf_free(&sb);
    fake_device_free(&fd);
    qfix_free(&f);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tinystories),
        cmocka_unit_test(test_smollm2_q4_k),
        cmocka_unit_test(test_mask_device),
    };
    return sqz_test_run(tests, NULL, NULL);
}

/* tests/unit/test_quant_gptq.c - GPTQ on real layers of stories260K, tinystories-656K and
 * SmolLM2-135M with real activations (wiki.test.raw through the runtime): for every format the
 * output error on held-out tokens is below RTN's; GGUF targets keep the invariant of
 * sqz/quant.h (re-quantizing the dequantized result with the reference gives the same bytes);
 * act-order with and without static groups; determinism (same bytes twice, Q4_0 and I4); a factor
 * kept between calls (sqz_gptq_factors) gives the bytes of a fresh one.
 * K-quants (Q2_K..Q6_K, where the width is a multiple of 256: SmolLM2's ffn_down) with static
 * grids keep the super-block and sub-block scales llama.cpp's quantizer picks for the original row
 * (dynamic ones, and the Hessian's shrinkage: test_shrink_dynamic); so do IQ4_NL,
 * IQ4_XS and IQ3_S (GPTQ onto its codebook: codewords of 4 columns chosen as a group starts).
 * SmolLM2's weights are already on a Q4_1 grid (the package ships a Q4_1 GGUF): RTN to Q4_1
 * reproduces them exactly, so Q4_1 is not compared there. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "quant/gguf/kquant_internal.h"
#include "quant/gguf/quant_gguf.h"
#include "quant_fixture.h"

typedef struct model_case {
    const char *label;
    const char *path;
    int32_t layer;
    int64_t win;
    int windows;
    bool on_q4_1_grid;
} model_case;

static const int fmt_groups[][2] = {
    {SQZ_QFMT_I8, 0},       {SQZ_QFMT_I4_SYM, 32},  {SQZ_QFMT_I4_SYM, 128}, {SQZ_QFMT_I4_ASYM, 32},
    {SQZ_QFMT_I4_ASYM, 128}, {SQZ_QFMT_Q8_0, 32},   {SQZ_QFMT_Q4_0, 32},    {SQZ_QFMT_Q4_1, 32},
    {SQZ_QFMT_Q2_K, 0},     {SQZ_QFMT_Q3_K, 0},     {SQZ_QFMT_Q4_K, 0},     {SQZ_QFMT_Q5_K, 0},
    {SQZ_QFMT_Q6_K, 0},     {SQZ_QFMT_Q5_0, 32},    {SQZ_QFMT_Q5_1, 32},    {SQZ_QFMT_IQ4_NL, 0},
    {SQZ_QFMT_IQ4_XS, 0},   {SQZ_QFMT_IQ3_S, 0},
};

static bool is_iq4(sqz_qformat f) { return f == SQZ_QFMT_IQ4_NL || f == SQZ_QFMT_IQ4_XS; }
/* formats whose grids come from llama.cpp's quantizer on whole blocks (K-quants, IQ4, IQ3_S) */
static bool is_k(sqz_qformat f) {
    return (f >= SQZ_QFMT_Q2_K && f <= SQZ_QFMT_Q6_K) || is_iq4(f) || f == SQZ_QFMT_IQ3_S;
}

static const sqz_role group_roles[QF_N][3] = {{SQZ_ROLE_ATTN_Q, SQZ_ROLE_ATTN_K, SQZ_ROLE_ATTN_V},
                                               {SQZ_ROLE_ATTN_OUT, SQZ_ROLE_COUNT, SQZ_ROLE_COUNT},
                                               {SQZ_ROLE_FFN_GATE, SQZ_ROLE_FFN_UP, SQZ_ROLE_COUNT},
                                               {SQZ_ROLE_FFN_DOWN, SQZ_ROLE_COUNT, SQZ_ROLE_COUNT}};

/* Squared error and squared reference of a group of layers on held-out rows. */
static void group_err(const qfix *f, int g, const sqz_qlinear *lin, int n, const sqz_qmatrix *q, double *num,
                      double *den) {
    const int64_t n_in = f->dim[g];
    for (int i = 0; i < n; i++) {
        float *deq = malloc((size_t)(lin[i].n_out * n_in) * sizeof(float));
        SQZ_ASSERT_OK(sqz_qmatrix_to_f32(&q[i], deq));
        const double e = qfix_rel_err(f->x[g], f->n_calib, f->n_rows, n_in, lin[i].w, deq, lin[i].n_out);
        /* weight the relative errors by the layer's size: sum of squares over the group */
        *num += e * e * (double)lin[i].n_out;
        *den += (double)lin[i].n_out;
        free(deq);
    }
}

/* K-quants and IQ4: every (super-)block keeps the grids llama.cpp's quantizer chooses for the
 * original row with diag H as the importance (d, dmin and the sub-block scales), only the codes
 * differ. */
static void check_iq4grids(const sqz_qmatrix *q, const float *w, const float *imp) {
    const int64_t n = q->n_in, bs = sqz_dtype_info(q->dtype)->block_size, nb = n / bs;
    const size_t bb = sqz_dtype_info(q->dtype)->type_size;
    uint8_t *ref = malloc((size_t)nb * bb);
    for (int64_t r = 0; r < q->n_out; r++) {
        sqz__quantize_iq4(q->dtype, w + r * n, ref, 1, n, imp);
        for (int64_t b = 0; b < nb; b++) {
            float d0[8], d1[8];
            const int k = sqz__iq4_subscales(q->dtype, ref + b * bb, d0);
            assert_int_equal(sqz__iq4_subscales(q->dtype, (const uint8_t *)q->data + ((size_t)(r * nb + b)) * bb, d1), k);
            assert_memory_equal(d0, d1, (size_t)k * sizeof(float));
        }
    }
    free(ref);
}

static void check_kgrids(const sqz_qmatrix *q, const float *w, const sqz_qstats *st) {
    const int64_t n = q->n_in, nb = n / 256;
    const size_t bb = sqz_dtype_info(q->dtype)->type_size;
    float *imp = malloc((size_t)n * sizeof(float));
    uint8_t *ref = malloc((size_t)nb * bb);
    for (int64_t j = 0; j < n; j++) imp[j] = (float)st->xtx[j * n + j];
    if (q->dtype == SQZ_DTYPE_IQ3_S) { /* the super-block's d and the 8 sub-block scales */
        for (int64_t r = 0; r < q->n_out; r++) {
            sqz__quantize_iq3_s(w + r * n, ref, 1, n, imp);
            for (int64_t b = 0; b < nb; b++) {
                float d0[8], d1[8];
                sqz__iq3s_subscales(ref + b * bb, d0);
                sqz__iq3s_subscales((const uint8_t *)q->data + ((size_t)(r * nb + b)) * bb, d1);
                assert_memory_equal(d0, d1, sizeof d0);
            }
        }
    }
    if (q->dtype == SQZ_DTYPE_IQ4_NL || q->dtype == SQZ_DTYPE_IQ4_XS || q->dtype == SQZ_DTYPE_IQ3_S) {
        if (q->dtype != SQZ_DTYPE_IQ3_S) check_iq4grids(q, w, imp);
        free(imp);
        free(ref);
        return;
    }
    for (int64_t r = 0; r < q->n_out; r++) {
        sqz__quantize_k(q->dtype, w + r * n, ref, 1, n, imp);
        for (int64_t b = 0; b < nb; b++) {
            float d0[16], m0[16], d1[16], m1[16];
            int z0, z1, x0, x1;
            const int sub = sqz__kquant_subgrids(q->dtype, ref + b * bb, d0, m0, &z0, &x0);
            assert_int_equal(sqz__kquant_subgrids(q->dtype, (const uint8_t *)q->data + ((size_t)(r * nb + b)) * bb, d1,
                                                  m1, &z1, &x1), sub);
            assert_memory_equal(d0, d1, (size_t)(256 / sub) * sizeof(float));
            assert_memory_equal(m0, m1, (size_t)(256 / sub) * sizeof(float));
        }
    }
    free(imp);
    free(ref);
}

/* Re-quantizing the dequantized GPTQ result with the reference reproduces its bytes. */
static void check_invariant(const sqz_qmatrix *q) {
    const int64_t ne = q->n_out * q->n_in;
    float *deq = malloc((size_t)ne * sizeof(float));
    void *re = malloc(q->nbytes);
    SQZ_ASSERT_OK(sqz_qmatrix_to_f32(q, deq));
    if (q->dtype == SQZ_DTYPE_Q4_0) sqz__quantize_q4_0_ref(deq, re, ne);
    else if (q->dtype == SQZ_DTYPE_Q4_1) sqz__quantize_q4_1_ref(deq, re, ne);
    else if (q->dtype == SQZ_DTYPE_Q5_0) sqz__quantize_q5_0_ref(deq, re, ne);
    else if (q->dtype == SQZ_DTYPE_Q5_1) sqz__quantize_q5_1_ref(deq, re, ne);
    else sqz__quantize_q8_0_ref(deq, re, ne);
    assert_memory_equal(re, q->data, q->nbytes);
    free(deq);
    free(re);
}

static void run_model(const model_case *mc) {
    qfix f;
    qfix_load(&f, mc->path, mc->layer, mc->win, mc->windows);
    print_message("%s layer %d: %lld calibration rows, %lld held out (relative output error, RMS over layers)\n",
                  mc->label, (int)mc->layer, (long long)f.n_calib, (long long)(f.n_rows - f.n_calib));
    for (int g = 0; g < QF_N; g++) {
        sqz_qlinear lin[3];
        int n = 0;
        int64_t n_in = 0, n_out;
        for (int k = 0; k < 3 && group_roles[g][k] != SQZ_ROLE_COUNT; k++, n++) {
            float *w = qfix_weight(&f, group_roles[g][k], &n_out, &n_in);
            lin[n] = (sqz_qlinear){.w = w, .n_out = n_out, .name = sqz_role_name(group_roles[g][k])};
        }
        assert_int_equal(n_in, f.dim[g]);
        sqz_qstats_buf sb;
        SQZ_ASSERT_OK(sqz_qstats_compute(f.x[g], f.n_calib, n_in, SQZ_QSTAT_XTX, 0, &sb));
        for (size_t fi = 0; fi < sizeof fmt_groups / sizeof fmt_groups[0]; fi++) {
            sqz_quant_opts o = sqz_quant_default_opts();
            o.target = (sqz_qtarget){(sqz_qformat)fmt_groups[fi][0], fmt_groups[fi][1]};
            if (!sqz_qtarget_fits(&o.target, n_in)) continue;
            if (mc->on_q4_1_grid && (o.target.fmt == SQZ_QFMT_Q4_1 || o.target.fmt == SQZ_QFMT_Q5_1)) continue;
            const bool gguf = o.target.fmt >= SQZ_QFMT_Q8_0;
            sqz_qmatrix rq[3], gq[3], aq[3];
            memset(rq, 0, sizeof rq);
            memset(gq, 0, sizeof gq);
            memset(aq, 0, sizeof aq);
            SQZ_ASSERT_OK(sqz_quant_rtn(lin, n, &sb.s, &o, rq, NULL));
            o.static_groups = is_k(o.target.fmt); /* the original rows' grids (dynamic: test_shrink_dynamic) */
            SQZ_ASSERT_OK(sqz_quant_gptq(lin, n, &sb.s, &o, gq, NULL));
            o.static_groups = false;
            double rn = 0, rd = 0, gn = 0, gd = 0, an = 0, ad = 0;
            group_err(&f, g, lin, n, rq, &rn, &rd);
            group_err(&f, g, lin, n, gq, &gn, &gd);
            /* act-order: static groups (forced for GGUF blocks) or g_idx (I4) */
            o.act_order = true;
            SQZ_ASSERT_OK(sqz_quant_gptq(lin, n, &sb.s, &o, aq, NULL));
            group_err(&f, g, lin, n, aq, &an, &ad);
            const double er = sqrt(rn / rd), eg = sqrt(gn / gd), ea = sqrt(an / ad);
            print_message("  %-7s %-8s g%-3d  rtn %.5f  gptq %.5f  act-order %.5f  (%.2f bpw)\n",
                          g == QF_QKV ? "q|k|v" : g == QF_O ? "o" : g == QF_GATEUP ? "gate|up" : "down",
                          sqz_qformat_name(o.target.fmt), (int)o.target.group, er, eg, ea,
                          sqz_qmatrix_bits_per_weight(&gq[0]));
            assert_true(eg < er);
            assert_true(ea < er);
            if (o.target.fmt == SQZ_QFMT_Q4_0) { /* determinism: the same bytes twice */
                sqz_qmatrix dq[3];
                memset(dq, 0, sizeof dq);
                o.act_order = false;
                o.static_groups = is_k(o.target.fmt);
                SQZ_ASSERT_OK(sqz_quant_gptq(lin, n, &sb.s, &o, dq, NULL));
                for (int i = 0; i < n; i++) {
                    assert_memory_equal(dq[i].data, gq[i].data, gq[i].nbytes);
                    sqz_qmatrix_free(&dq[i]);
                }
            }
            for (int i = 0; i < n; i++) {
                if (is_k(o.target.fmt)) {
                    check_kgrids(&gq[i], lin[i].w, &sb.s);
                    check_kgrids(&aq[i], lin[i].w, &sb.s);
                } else if (gguf) {
                    check_invariant(&gq[i]);
                    check_invariant(&aq[i]);
                }
                if (o.target.fmt == SQZ_QFMT_I4_SYM || o.target.fmt == SQZ_QFMT_I4_ASYM) {
                    assert_non_null(aq[i].qp.g_idx); /* desc_act: groups by processing position */
                    SQZ_ASSERT_OK(sqz_qparams_check(&aq[i].qp, aq[i].dtype, aq[i].nbytes, "act-order"));
                } else {
                    assert_null(aq[i].qp.g_idx);
                }
                sqz_qmatrix_free(&rq[i]);
                sqz_qmatrix_free(&gq[i]);
                sqz_qmatrix_free(&aq[i]);
            }
        }
        /* static groups with act-order on I4, and determinism */
        if (sqz_qtarget_fits(&(sqz_qtarget){SQZ_QFMT_I4_SYM, 32}, n_in)) {
            sqz_quant_opts o = sqz_quant_default_opts();
            o.target = (sqz_qtarget){SQZ_QFMT_I4_SYM, 32};
            o.act_order = true;
            o.static_groups = true;
            sqz_qmatrix a[3], b[3], r[3];
            memset(a, 0, sizeof a);
            memset(b, 0, sizeof b);
            memset(r, 0, sizeof r);
            SQZ_ASSERT_OK(sqz_quant_gptq(lin, n, &sb.s, &o, a, NULL));
            SQZ_ASSERT_OK(sqz_quant_gptq(lin, n, &sb.s, &o, b, NULL));
            SQZ_ASSERT_OK(sqz_quant_rtn(lin, n, &sb.s, &o, r, NULL));
            double an = 0, ad = 0, rn = 0, rd = 0;
            group_err(&f, g, lin, n, a, &an, &ad);
            group_err(&f, g, lin, n, r, &rn, &rd);
            assert_true(an < rn);
            for (int i = 0; i < n; i++) {
                assert_null(a[i].qp.g_idx);
                assert_memory_equal(a[i].data, b[i].data, a[i].nbytes);
                assert_memory_equal(a[i].qp.scales, b[i].qp.scales, (size_t)(a[i].n_out * a[i].qp.n_groups) * 4);
                sqz_qmatrix_free(&a[i]);
                sqz_qmatrix_free(&b[i]);
                sqz_qmatrix_free(&r[i]);
            }
        }
        sqz_qstats_buf_free(&sb);
        for (int i = 0; i < n; i++) free((void *)lin[i].w);
    }
    qfix_free(&f);
}

static void test_stories260K(void **state) {
    (void)state;
    const model_case mc = {"stories260K", sqz_test_data("models/stories260K/stories260K.bin"), 1, 512, 8, false};
    run_model(&mc);
}

static void test_tinystories(void **state) {
    (void)state;
    const model_case mc = {"tinystories-656K", sqz_test_data("models/tinystories-656K"), 1, 512, 8, false};
    run_model(&mc);
}

static void test_smollm2(void **state) {
    (void)state;
    const model_case mc = {"SmolLM2-135M", sqz_test_smollm2(), 2, 1024, 8, true};
    run_model(&mc);
}

/* SmolLM2's blk.2 ffn_down (1536 wide: every K-quant fits), its weight (the caller's to free) and the
 * Hessian of its input over 4 windows of 512 tokens. */
static float *smollm2_down(const char *path, qfix *f, int64_t *n_out, int64_t *n_in, sqz_qstats_buf *sb) {
    qfix_load(f, path, 2, 512, 4);
    float *w = qfix_weight(f, SQZ_ROLE_FFN_DOWN, n_out, n_in);
    SQZ_ASSERT_OK(sqz_qstats_compute(f->x[QF_DOWN], f->n_calib, *n_in, SQZ_QSTAT_XTX, 0, sb));
    return w;
}

/* A factor kept in a sqz_gptq_factors store between calls on the same statistics (a mix's members
 * of one input, each to its own type) gives the bytes of a fresh factor: SmolLM2's ffn_down input
 * (1536 wide: every K-quant fits), members of 576, 192 and 100 of its rows, one at a time to Q4_K,
 * Q6_K, IQ3_S (codewords of 4 under act order: another key), Q4_0, with and without act order, in
 * turn through one store. */
static void test_shared_factor(void **state) {
    (void)state;
    const char *path = sqz_test_smollm2();
    SQZ_SKIP_UNLESS(path);
    qfix f;
    int64_t n_in = 0, n_out = 0;
    sqz_qstats_buf sb;
    float *w = smollm2_down(path, &f, &n_out, &n_in, &sb);
    const sqz_qformat fmts[] = {SQZ_QFMT_Q4_K, SQZ_QFMT_Q6_K, SQZ_QFMT_IQ3_S, SQZ_QFMT_Q4_0};
    const int64_t rows[] = {n_out, 192, 100};
    struct sqz_gptq_factors *store = sqz_gptq_factors_new();
    assert_non_null(store);
    int calls = 0;
    for (int ao = 0; ao < 2; ao++)
        for (size_t fi = 0; fi < sizeof fmts / sizeof fmts[0]; fi++)
            for (int k = 0; k < 3; k++) {
                sqz_quant_opts o = sqz_quant_default_opts();
                o.target = (sqz_qtarget){fmts[fi], 32};
                o.act_order = ao;
                sqz_qlinear lin = {w, rows[k], "member", false};
                sqz_qmatrix fresh = {0}, kept = {0};
                SQZ_ASSERT_OK(sqz_quant_gptq(&lin, 1, &sb.s, &o, &fresh, NULL));
                o.factors = store;
                SQZ_ASSERT_OK(sqz_quant_gptq(&lin, 1, &sb.s, &o, &kept, NULL));
                assert_int_equal(kept.nbytes, fresh.nbytes);
                assert_memory_equal(kept.data, fresh.data, fresh.nbytes);
                sqz_qmatrix_free(&fresh);
                sqz_qmatrix_free(&kept);
                calls++;
            }
    print_message("SmolLM2 ffn_down: %d calls through one store, each the bytes of a fresh factor\n", calls);
    sqz_gptq_factors_free(store);
    sqz_qstats_buf_free(&sb);
    free(w);
    qfix_free(&f);
}

/* Degenerate Hessians: dead columns (a channel that is always 0) and a rank-deficient X. */
static void test_dead_columns(void **state) {
    (void)state;
    enum { N_IN = 256 }; /* a K-quant super-block */
    const int64_t n_in = N_IN, n_out = 8, rows = 16;
    static float x[16 * N_IN], w[8 * N_IN];
    for (int i = 0; i < rows * n_in; i++) x[i] = (i % n_in == 5 || i % n_in == 40) ? 0.0f : sinf(0.37f * (float)i);
    for (int i = 0; i < n_out * n_in; i++) w[i] = cosf(0.11f * (float)i);
    sqz_qstats_buf sb;
    SQZ_ASSERT_OK(sqz_qstats_compute(x, rows, n_in, SQZ_QSTAT_XTX, 0, &sb));
    sqz_quant_opts o = sqz_quant_default_opts();
    sqz_qlinear lin = {w, n_out, "w", false};
    for (int f = 0; f < SQZ_QFMT_COUNT; f++) {
        if (!(sqz_qmethod_find("gptq")->formats & (1u << f))) continue;
        o.target = (sqz_qtarget){(sqz_qformat)f, 32};
        for (int ao = 0; ao < 2; ao++) {
            o.act_order = ao;
            sqz_qmatrix q = {0};
            SQZ_ASSERT_OK(sqz_quant_gptq(&lin, 1, &sb.s, &o, &q, NULL));
            static float deq[8 * N_IN];
            SQZ_ASSERT_OK(sqz_qmatrix_to_f32(&q, deq));
            const bool offset = f == SQZ_QFMT_Q4_1 || f == SQZ_QFMT_Q5_1 || f == SQZ_QFMT_I4_ASYM || f == SQZ_QFMT_Q2_K ||
                                f == SQZ_QFMT_Q4_K || f == SQZ_QFMT_Q5_K || /* 0 need not be on an offset grid */
                                is_iq4((sqz_qformat)f) || f == SQZ_QFMT_IQ3_S; /* nor in the tables */
            for (int r = 0; r < n_out && !offset; r++)
                assert_true(deq[r * n_in + 5] == 0.0f && deq[r * n_in + 40] == 0.0f); /* dead columns are zeroed */
            if (f == SQZ_QFMT_Q8_0 || f == SQZ_QFMT_Q4_0 || f == SQZ_QFMT_Q4_1 || f == SQZ_QFMT_Q5_0 ||
                f == SQZ_QFMT_Q5_1) /* the uniform 32-blocks (check_invariant) */
                check_invariant(&q);
            sqz_qmatrix_free(&q);
        }
    }
    /* bad options */
    o.target = (sqz_qtarget){SQZ_QFMT_I4_SYM, 64};
    o.blocksize = 96;
    sqz_qmatrix q = {0};
    assert_int_equal(sqz_quant_gptq(&lin, 1, &sb.s, &o, &q, NULL), SQZ_ERR_INVALID_ARG);
    assert_true(sqz_qmethod_find("gptq")->formats & (1u << SQZ_QFMT_IQ3_S)); /* codewords of 4 (run above) */
    sqz_qstats_buf_free(&sb);
}

/* SmolLM2's ffn_down (1536 wide) onto Q6_K and IQ3_S: shrink=1 (a diagonal Hessian: no error
 * feedback) rounds each weight to the nearest value of llama.cpp's own grids, so its Q6_K bytes are
 * imatrix's with E[x^2] = diag H / n (all but near-ties of the scale search); shrink=0.5 stays below
 * RTN's held-out error; dynamic K-quant grids (no act-order, dynamic-groups: made as the sweep reaches
 * each super-block) give the same bytes twice and a held-out error below RTN's. */
static void test_shrink_dynamic(void **state) {
    (void)state;
    const char *path = sqz_test_smollm2();
    SQZ_SKIP_UNLESS(path);
    qfix f;
    int64_t n_in = 0, n_out = 0;
    sqz_qstats_buf sb;
    float *w = smollm2_down(path, &f, &n_out, &n_in, &sb);
    float *x2 = malloc((size_t)n_in * sizeof(float));
    for (int64_t j = 0; j < n_in; j++) x2[j] = (float)(sb.s.xtx[j * n_in + j] / (double)f.n_calib);
    sqz_qstats st2 = {.n_in = n_in, .x2 = x2, .n_tokens = f.n_calib};
    sqz_qlinear lin = {w, n_out, "ffn_down", false};
    const sqz_qformat fmts[] = {SQZ_QFMT_Q6_K, SQZ_QFMT_IQ3_S};
    for (size_t fi = 0; fi < 2; fi++) {
        sqz_quant_opts o = sqz_quant_default_opts();
        o.target = (sqz_qtarget){fmts[fi], 256};
        o.act_order = false;
        sqz_qmatrix rtn = {0}, im = {0}, diag = {0}, half = {0}, dyn = {0}, dyn2 = {0};
        SQZ_ASSERT_OK(sqz_quant_rtn(&lin, 1, &sb.s, &o, &rtn, NULL));
        SQZ_ASSERT_OK(sqz_quant_imatrix(&lin, 1, &st2, &o, &im, NULL));
        o.gptq_shrink = 1.0;
        SQZ_ASSERT_OK(sqz_quant_gptq(&lin, 1, &sb.s, &o, &diag, NULL));
        o.gptq_shrink = 0.5;
        SQZ_ASSERT_OK(sqz_quant_gptq(&lin, 1, &sb.s, &o, &half, NULL));
        o.gptq_shrink = 0;
        o.static_groups = false;
        SQZ_ASSERT_OK(sqz_quant_gptq(&lin, 1, &sb.s, &o, &dyn, NULL));
        SQZ_ASSERT_OK(sqz_quant_gptq(&lin, 1, &sb.s, &o, &dyn2, NULL));
        assert_memory_equal(dyn.data, dyn2.data, dyn.nbytes);
        if (fmts[fi] == SQZ_QFMT_Q6_K) {
            size_t same = 0;
            for (size_t b = 0; b < im.nbytes; b++) same += ((const uint8_t *)im.data)[b] == ((const uint8_t *)diag.data)[b];
            print_message("Q6_K shrink=1: %.3f%% of imatrix's bytes\n", 100.0 * (double)same / (double)im.nbytes);
            assert_true((double)same >= 0.99 * (double)im.nbytes);
        }
        double e[5];
        const sqz_qmatrix *qs[5] = {&rtn, &im, &diag, &half, &dyn};
        for (int k = 0; k < 5; k++) {
            double num = 0, den = 0;
            group_err(&f, QF_DOWN, &lin, 1, qs[k], &num, &den);
            e[k] = sqrt(num / den);
        }
        print_message("%s held out: rtn %.5f imatrix %.5f shrink=1 %.5f shrink=0.5 %.5f dynamic %.5f\n",
                      fmts[fi] == SQZ_QFMT_Q6_K ? "Q6_K" : "IQ3_S", e[0], e[1], e[2], e[3], e[4]);
        assert_true(e[3] < e[0] && e[4] < e[0]);
        if (getenv("SQZ_SHRINK_SCAN")) {
            const double shr[] = {0, 0.1, 0.25, 0.5, 0.75};
            for (int ao = 0; ao < 2; ao++)
                for (int k = 0; k < 5; k++) {
                    sqz_quant_opts o2 = sqz_quant_default_opts();
                    o2.target = o.target;
                    o2.act_order = ao;
                    o2.gptq_shrink = shr[k];
                    sqz_qmatrix q = {0};
                    SQZ_ASSERT_OK(sqz_quant_gptq(&lin, 1, &sb.s, &o2, &q, NULL));
                    double num = 0, den = 0;
                    group_err(&f, QF_DOWN, &lin, 1, &q, &num, &den);
                    print_message("  act-order %d shrink %.2f: %.5f\n", ao, shr[k], sqrt(num / den));
                    sqz_qmatrix_free(&q);
                }
        }
        for (int k = 0; k < 5; k++) sqz_qmatrix_free((sqz_qmatrix *)qs[k]);
        sqz_qmatrix_free(&dyn2);
    }
    free(x2);
    sqz_qstats_buf_free(&sb);
    free(w);
    qfix_free(&f);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dead_columns),
        cmocka_unit_test(test_shared_factor),
        cmocka_unit_test(test_shrink_dynamic),
        cmocka_unit_test(test_stories260K),
        cmocka_unit_test(test_tinystories),
        cmocka_unit_test(test_smollm2),
    };
    /* every real-layer case needs the text: without it only test_dead_columns would run */
    if (!sqz_test_needs(sqz_test_data("data/wiki.test.raw"))) return SQZ_TEST_SKIP;
    return sqz_test_run(tests, NULL, NULL);
}

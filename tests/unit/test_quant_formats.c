/* tests/unit/test_quant_formats.c - quantized storage (I8 per row, U4 per group), RTN of every
 * format against its scalar reference (exact bytes), dequantization, qparams checks, attaching
 * to a real model (sqz_tensor_to_f32 and the runtime read it), the default policy, activation
 * scales (minmax / percentile / KL) and the method table. */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/blocks.h"
#include "core/dequant.h"
#include "quant/gguf/quant_gguf.h"
#include "kernels/cpu/gemm_ref.h"
#include "real_weights.h"
#include "sqz/quant.h"
#include "test_util.h"

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static float rndn(void) { /* roughly N(0, 1) */
    float s = 0;
    for (int i = 0; i < 4; i++) {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        s += (float)(rng >> 40) / 16777216.0f - 0.5f;
    }
    return s * 1.732f;
}

static float fp16r(float v) { return sqz_fp16_to_fp32(sqz_fp32_to_fp16(v)); }

/* The documented I4 grids, written out plainly as the oracle for rtn.c / grid.c. */
static void oracle_i4(const float *w, int64_t n_out, int64_t n_in, int gs, int asym, uint8_t *codes, float *scales,
                      uint8_t *zeros) {
    const int64_t ng = n_in / gs;
    for (int64_t r = 0; r < n_out; r++)
        for (int64_t g = 0; g < ng; g++) {
            const float *x = w + r * n_in + g * gs;
            float s;
            int z;
            if (!asym) {
                float amax = 0, m = 0;
                for (int i = 0; i < gs; i++)
                    if (fabsf(x[i]) > amax) { amax = fabsf(x[i]); m = x[i]; }
                s = fp16r(m / -8.0f);
                z = 8;
            } else {
                float lo = 0, hi = 0;
                for (int i = 0; i < gs; i++) { lo = fminf(lo, x[i]); hi = fmaxf(hi, x[i]); }
                s = fp16r((hi - lo) / 15.0f);
                z = s != 0 ? (int)fminf(15, fmaxf(0, rintf(-lo / s))) : 0;
            }
            scales[r * ng + g] = s;
            if (zeros) zeros[r * ng + g] = (uint8_t)z;
            for (int i = 0; i < gs; i++) {
                int c = s != 0 ? (int)rintf(x[i] / s) + z : (asym ? 0 : 8);
                codes[r * n_in + g * gs + i] = (uint8_t)(c < 0 ? 0 : (c > 15 ? 15 : c));
            }
        }
}

static void test_u4_pack(void **state) {
    (void)state;
    const uint8_t codes[6] = {1, 2, 15, 0, 7, 8};
    uint8_t p[3], back[6];
    sqz_u4_pack(codes, 6, p);
    assert_int_equal(p[0], 0x21); /* element 0 in the low nibble */
    assert_int_equal(p[1], 0x0F);
    assert_int_equal(p[2], 0x87);
    sqz_u4_unpack(p, 6, back);
    assert_memory_equal(codes, back, 6);
    float f[6];
    sqz_dtype_info(SQZ_DTYPE_U4)->to_f32(p, f, 6);
    for (int i = 0; i < 6; i++) assert_true(f[i] == codes[i]);
    size_t nb;
    assert_true(sqz_dtype_nbytes(SQZ_DTYPE_U4, 6, &nb) && nb == 3);
    assert_false(sqz_dtype_nbytes(SQZ_DTYPE_U4, 5, &nb));
}

/* Every format's RTN against its reference on real weights (stories260K wq: 5 x (64, 64) as one
 * (320, 64) matrix, and w1 (860, 64)), plus a block of synthetic values with zeros and ties. */
/* FP8 per row as compressed-tensors computes it: s = absmax / 448, q = fp8(clamp(w / s)), w' = q * s. */
static void oracle_fp8(const float *w, int64_t n_out, int64_t n_in, uint8_t *q, float *ref) {
    for (int64_t r = 0; r < n_out; r++) {
        float amax = 0;
        for (int64_t c = 0; c < n_in; c++) amax = fmaxf(amax, fabsf(w[r * n_in + c]));
        const float sc = amax / 448.0f;
        for (int64_t c = 0; c < n_in; c++) {
            const int64_t i = r * n_in + c;
            q[i] = sc > 0 ? sqz_fp32_to_fp8_e4m3(fminf(fmaxf(w[i] / sc, -448.0f), 448.0f)) : 0;
            ref[i] = sqz_fp8_e4m3_to_fp32(q[i]) * sc;
        }
    }
}

/* NVFP4 as compressed-tensors computes it for one f32 matrix: gs = (1 / amax) * 2688; per 16,
 * s = fp8(clamp(gs * amax16 / 6)) (0.125 for 0); codes e2m1(w / (s / gs)); w' = bf16(e2m1 * (s / gs)). */
static void oracle_nvfp4(const float *w, int64_t n_out, int64_t n_in, uint8_t *packed, float *ref) {
    float amax = 0;
    for (int64_t i = 0; i < n_out * n_in; i++) amax = fmaxf(amax, fabsf(w[i]));
    const float rcp = 1.0f / amax, gs = rcp * 2688.0f;
    static const float e2m1[8] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6};
    memset(packed, 0, (size_t)(n_out * n_in / 2));
    for (int64_t i0 = 0; i0 < n_out * n_in; i0 += 16) {
        float a16 = 0;
        for (int j = 0; j < 16; j++) a16 = fmaxf(a16, fabsf(w[i0 + j]));
        float sc = sqz_fp8_e4m3_to_fp32(sqz_fp32_to_fp8_e4m3(fminf(gs * (a16 / 6.0f), 448.0f)));
        sc = sc == 0 ? 0.125f : sc;
        const float eff = sc / gs;
        for (int j = 0; j < 16; j++) {
            const float y = fminf(fabsf(w[i0 + j] / eff), 6.0f);
            int best = 0; /* nearest E2M1 magnitude, ties to the even index */
            for (int k = 1; k < 8; k++) {
                const float dk = fabsf(y - e2m1[k]), db = fabsf(y - e2m1[best]);
                if (dk < db || (dk == db && k % 2 == 0)) best = k;
            }
            const int code = best | (w[i0 + j] / eff < 0 ? 8 : 0);
            packed[(i0 + j) / 2] |= (uint8_t)(code << (4 * ((i0 + j) % 2)));
            ref[i0 + j] = sqz_bf16_to_fp32(sqz_fp32_to_bf16((code & 8 ? -e2m1[best] : e2m1[best]) * eff));
        }
    }
}

static void check_rtn_formats(const float *w, int64_t n_out, int64_t n_in) {
    const int64_t ne = n_out * n_in;
    float *deq = malloc((size_t)ne * 4), *ref = malloc((size_t)ne * 4);
    for (int f = 0; f < SQZ_QFMT_COUNT; f++) {
        const int groups[3] = {32, 64, 128};
        for (int gi = 0; gi < 3; gi++) {
            sqz_qtarget t = {(sqz_qformat)f, groups[gi]};
            if (!sqz_qtarget_fits(&t, n_in)) continue;
            if (gi > 0 && f != SQZ_QFMT_I4_SYM && f != SQZ_QFMT_I4_ASYM) continue;
            sqz_qmatrix q, q2;
            SQZ_ASSERT_OK(sqz_quant_rtn_one(w, n_out, n_in, &t, &q));
            SQZ_ASSERT_OK(sqz_quant_rtn_one(w, n_out, n_in, &t, &q2));
            assert_int_equal(q.nbytes, q2.nbytes); /* determinism */
            assert_memory_equal(q.data, q2.data, q.nbytes);
            void *rb = malloc(q.nbytes);
            switch (f) {
            case SQZ_QFMT_I8: {
                float *sc = malloc((size_t)n_out * 4);
                sqz__quantize_rows_i8_ref(w, n_out, n_in, rb, sc);
                assert_memory_equal(q.qp.scales, sc, (size_t)n_out * 4);
                for (int64_t i = 0; i < ne; i++) ref[i] = (float)((int8_t *)rb)[i] * sc[i / n_in];
                free(sc);
                break;
            }
            case SQZ_QFMT_Q8_0: sqz__quantize_q8_0_ref(w, rb, ne); sqz__dequantize_q8_0(rb, ref, ne); break;
            case SQZ_QFMT_Q4_0: sqz__quantize_q4_0_ref(w, rb, ne); sqz__dequantize_q4_0(rb, ref, ne); break;
            case SQZ_QFMT_Q4_1: sqz__quantize_q4_1_ref(w, rb, ne); sqz__dequantize_q4_1(rb, ref, ne); break;
            case SQZ_QFMT_Q5_0: sqz__quantize_q5_0_ref(w, rb, ne); sqz__dequantize_q5_0(rb, ref, ne); break;
            case SQZ_QFMT_Q5_1: sqz__quantize_q5_1_ref(w, rb, ne); sqz__dequantize_q5_1(rb, ref, ne); break;
            case SQZ_QFMT_IQ4_NL: /* llama-quantize's quantize_iq4_nl / _xs without weights */
            case SQZ_QFMT_IQ4_XS:
                sqz__quantize_iq4(q.dtype, w, rb, n_out, n_in, NULL);
                sqz_dtype_info(q.dtype)->to_f32(rb, ref, ne);
                break;
            case SQZ_QFMT_IQ3_S: /* quantize_iq3_s without weights */
                sqz__quantize_iq3_s(w, rb, n_out, n_in, NULL);
                sqz_dtype_info(q.dtype)->to_f32(rb, ref, ne);
                break;
            case SQZ_QFMT_MXFP4: sqz__quantize_mxfp4_ref(w, rb, ne); sqz__dequantize_mxfp4(rb, ref, ne); break;
            case SQZ_QFMT_FP8: oracle_fp8(w, n_out, n_in, rb, ref); break;
            case SQZ_QFMT_NVFP4: oracle_nvfp4(w, n_out, n_in, rb, ref); break;
            default: {
                const int asym = f == SQZ_QFMT_I4_ASYM;
                const int64_t ng = n_in / t.group;
                uint8_t *codes = malloc((size_t)ne), *zeros = malloc((size_t)(n_out * ng));
                float *sc = malloc((size_t)(n_out * ng) * 4);
                oracle_i4(w, n_out, n_in, t.group, asym, codes, sc, asym ? zeros : NULL);
                sqz_u4_pack(codes, ne, rb);
                assert_memory_equal(q.qp.scales, sc, (size_t)(n_out * ng) * 4);
                if (asym) assert_memory_equal(q.qp.zeros, zeros, (size_t)(n_out * ng));
                else assert_null(q.qp.zeros);
                for (int64_t i = 0; i < ne; i++) {
                    const int64_t g = (i % n_in) / t.group, r = i / n_in;
                    ref[i] = sc[r * ng + g] * (float)(codes[i] - (asym ? zeros[r * ng + g] : 8));
                    assert_true(sc[r * ng + g] == fp16r(sc[r * ng + g])); /* fp16-exact scales */
                }
                free(codes); free(zeros); free(sc);
            }
            }
            assert_memory_equal(q.data, rb, q.nbytes);
            SQZ_ASSERT_OK(sqz_qmatrix_to_f32(&q, deq));
            assert_memory_equal(deq, ref, (size_t)ne * 4);
            const double bpw = sqz_qmatrix_bits_per_weight(&q);
            const double want[SQZ_QFMT_COUNT] = {8.0 + 32.0 / n_in, 4.0 + 16.0 / t.group, 4.0 + 20.0 / t.group,
                                                 8.5, 4.5, 5.0, 2.625, 3.4375, 4.5, 5.5, 6.5625, 5.5, 6.0,
                                                 4.5, 4.25, 3.4375, 4.25, 8.0 + 32.0 / n_in,
                                                 4.5 + 32.0 / (double)ne};
            assert_true(fabs(bpw - want[f]) < 1e-9);
            free(rb);
            sqz_qmatrix_free(&q);
            sqz_qmatrix_free(&q2);
        }
    }
    free(deq);
    free(ref);
}

static void test_rtn_vs_reference(void **state) {
    (void)state;
    float *rw = sqz_rw_need();
    check_rtn_formats(rw + SQZ_RW_WQ, 320, 64);
    check_rtn_formats(rw + SQZ_RW_W1, 860, 64);
    check_rtn_formats(rw + SQZ_RW_W2, 64, 172); /* I8 only: 172 is no multiple of 32 */
    free(rw);
    /* zeros, ties, one-sign groups, a zero row */
    float w[4 * 128];
    for (int i = 0; i < 4 * 128; i++) w[i] = (i % 7 == 0) ? 0.0f : (float)((i % 19) - 9) * 0.25f;
    for (int i = 128; i < 256; i++) w[i] = 0;
    for (int i = 256; i < 384; i++) w[i] = fabsf(w[i]) + 0.5f;
    check_rtn_formats(w, 4, 128);
}

static void test_qparams_check(void **state) {
    (void)state;
    const float w[2 * 64] = {1, -2, 3};
    sqz_qmatrix q;
    sqz_qtarget t = {SQZ_QFMT_I4_ASYM, 32};
    SQZ_ASSERT_OK(sqz_quant_rtn_one(w, 2, 64, &t, &q));
    SQZ_ASSERT_OK(sqz_qparams_check(&q.qp, q.dtype, q.nbytes, "x"));
    assert_int_equal(sqz_qparams_check(&q.qp, q.dtype, q.nbytes - 1, "x"), SQZ_ERR_INVALID_ARG);
    assert_int_equal(sqz_qparams_check(&q.qp, SQZ_DTYPE_I8, q.nbytes, "x"), SQZ_ERR_INVALID_ARG);
    q.zeros_buf[1] = 16;
    assert_int_equal(sqz_qparams_check(&q.qp, q.dtype, q.nbytes, "x"), SQZ_ERR_INVALID_ARG);
    assert_non_null(strstr(sqz_last_error(), "zero point"));
    q.zeros_buf[1] = 3;
    int32_t g_idx[64] = {0};
    g_idx[5] = 2;
    q.qp.g_idx = g_idx;
    assert_int_equal(sqz_qparams_check(&q.qp, q.dtype, q.nbytes, "x"), SQZ_ERR_INVALID_ARG);
    g_idx[5] = 1;
    SQZ_ASSERT_OK(sqz_qparams_check(&q.qp, q.dtype, q.nbytes, "x"));
    q.qp.g_idx = NULL;
    q.qp.act_mode = SQZ_ACT_STATIC_TENSOR;
    assert_int_equal(sqz_qparams_check(&q.qp, q.dtype, q.nbytes, "x"), SQZ_ERR_INVALID_ARG);
    q.qp.act_scale = 0.5f;
    SQZ_ASSERT_OK(sqz_qparams_check(&q.qp, q.dtype, q.nbytes, "x"));
    float s[64];
    for (int i = 0; i < 64; i++) s[i] = 1.0f;
    s[3] = 0;
    assert_int_equal(sqz_qmatrix_set_in_scale(&q, s), SQZ_ERR_INVALID_ARG);
    s[3] = 2;
    SQZ_ASSERT_OK(sqz_qmatrix_set_in_scale(&q, s));
    sqz_qmatrix_free(&q);
    sqz_qmatrix_free(NULL);
    /* GGUF blocks take no input scale; shapes must fit the group */
    t = (sqz_qtarget){SQZ_QFMT_Q4_0, 0};
    SQZ_ASSERT_OK(sqz_quant_rtn_one(w, 2, 64, &t, &q));
    assert_int_equal(sqz_qmatrix_set_in_scale(&q, s), SQZ_ERR_UNSUPPORTED);
    sqz_qmatrix_free(&q);
    assert_int_equal(sqz_quant_rtn_one(w, 2, 48, &t, &q), SQZ_ERR_SHAPE);
    t = (sqz_qtarget){SQZ_QFMT_I4_SYM, 48};
    assert_int_equal(sqz_quant_rtn_one(w, 2, 48, &t, &q), SQZ_ERR_INVALID_ARG);
    float bad[64] = {NAN};
    t = (sqz_qtarget){SQZ_QFMT_I4_SYM, 32};
    assert_int_equal(sqz_quant_rtn_one(bad, 1, 64, &t, &q), SQZ_ERR_NUMERIC);
    /* names */
    sqz_qformat f;
    for (int i = 0; i < SQZ_QFMT_COUNT; i++) {
        assert_true(sqz_qformat_from_name(sqz_qformat_name((sqz_qformat)i), &f));
        assert_int_equal(f, i);
    }
    assert_false(sqz_qformat_from_name("q3_k_m", &f)); /* a mix (sqz_qmix_find), not a format */
}

/* Attach I8 / U4 / Q4_0 results to stories260K, read them back through sqz_tensor_to_f32 and
 * run the model: W8A16 keeps the greedy continuation close to the float model's. */
static void test_attach_and_run(void **state) {
    (void)state;
    const char *path = sqz_test_data("models/stories260K/stories260K.bin");
    SQZ_SKIP_UNLESS(path);
    sqz_model *m;
    SQZ_ASSERT_OK(sqz_model_open(path, NULL, &m));
    const int32_t prompt[4] = {1, 403, 407, 261};
    float *l0 = malloc(4 * 512 * sizeof(float)), *l1 = malloc(4 * 512 * sizeof(float));
    sqz_session *s;
    SQZ_ASSERT_OK(sqz_session_new(m, NULL, &s));
    SQZ_ASSERT_OK(sqz_forward(s, prompt, 4, 0, 0, l0));
    sqz_session_free(s);
    int n_q = 0;
    const sqz_qtarget targets[3] = {{SQZ_QFMT_I8, 0}, {SQZ_QFMT_I4_ASYM, 32}, {SQZ_QFMT_Q4_0, 32}};
    for (int64_t i = 0; i < m->n_tensors; i++) {
        sqz_tensor *t = &m->tensors[i];
        const char *why = NULL;
        const sqz_qtarget *tg = &targets[t->layer >= 0 ? t->layer % 3 : 0];
        if (!sqz_quant_policy_wants(t, tg, NULL, &why)) {
            if (t->role == SQZ_ROLE_FFN_DOWN) assert_non_null(strstr(why, "multiple")); /* 172 columns */
            if (t->role == SQZ_ROLE_TOKEN_EMBD) assert_non_null(strstr(why, "embeddings"));
            continue;
        }
        float *w = malloc((size_t)sqz_tensor_nelements(t) * 4), *back = malloc((size_t)sqz_tensor_nelements(t) * 4);
        SQZ_ASSERT_OK(sqz_tensor_to_f32(t, w));
        sqz_qmatrix q;
        SQZ_ASSERT_OK(sqz_quant_rtn_one(w, t->shape[0], t->shape[1], tg, &q));
        float *want = malloc((size_t)sqz_tensor_nelements(t) * 4);
        SQZ_ASSERT_OK(sqz_qmatrix_to_f32(&q, want));
        SQZ_ASSERT_OK(sqz_qmatrix_attach(m, t, &q));
        assert_null(q.data);
        assert_int_equal(t->dtype, sqz_qformat_dtype(tg->fmt));
        assert_true((t->qp != NULL) == (tg->fmt != SQZ_QFMT_Q4_0));
        SQZ_ASSERT_OK(sqz_tensor_to_f32(t, back));
        assert_memory_equal(back, want, (size_t)sqz_tensor_nelements(t) * 4);
        free(w); free(back); free(want);
        n_q++;
    }
    assert_int_equal(n_q, 7 + 6 + 6 + 7 + 6); /* i8 layers 0, 3 take down (172 columns); i4 and q4_0 layers cannot */
    SQZ_ASSERT_OK(sqz_session_new(m, NULL, &s));
    SQZ_ASSERT_OK(sqz_forward(s, prompt, 4, 0, 0, l1));
    sqz_session_free(s);
    double num = 0, den = 0;
    for (int i = 0; i < 4 * 512; i++) { num += (l0[i] - l1[i]) * (double)(l0[i] - l1[i]); den += l0[i] * (double)l0[i]; }
    print_message("stories260K mixed i8/i4/q4_0 RTN: relative logit error %.4f\n", sqrt(num / den));
    assert_true(sqrt(num / den) < 0.5);
    free(l0);
    free(l1);
    sqz_model_free(m);
}

/* Activation scales: a Gaussian with a few outliers. */
static void test_act_scales(void **state) {
    (void)state;
    const int64_t n = 200000;
    float *x = malloc((size_t)n * 4);
    for (int64_t i = 0; i < n; i++) x[i] = rndn();
    for (int64_t i = 0; i < 20; i++) x[i * 997] = 40.0f + (float)i;
    sqz_act_hist h;
    sqz_act_hist_init(&h);
    SQZ_ASSERT_OK(sqz_act_hist_add(&h, x, n / 2));
    SQZ_ASSERT_OK(sqz_act_hist_add(&h, x + n / 2, n - n / 2)); /* may grow the range */
    assert_true(h.total == (double)n);
    double sum = 0;
    for (int b = 0; b < h.n_bins; b++) sum += h.counts[b];
    assert_true(sum == (double)n);
    float t_max, t_pct, t_kl;
    SQZ_ASSERT_OK(sqz_act_threshold(&h, SQZ_ACT_CALIB_MINMAX, 0, &t_max));
    SQZ_ASSERT_OK(sqz_act_threshold(&h, SQZ_ACT_CALIB_PERCENTILE, 99.99, &t_pct));
    SQZ_ASSERT_OK(sqz_act_threshold(&h, SQZ_ACT_CALIB_KL, 0, &t_kl));
    print_message("thresholds: max %.3f, p99.99 %.3f, kl %.3f\n", t_max, t_pct, t_kl);
    assert_true(t_max == 59.0f);
    assert_true(t_pct > 3.0f && t_pct < 10.0f);
    assert_true(t_kl > 2.0f && t_kl < t_max);
    /* merging two halves gives the same counts as one histogram */
    sqz_act_hist a, b;
    sqz_act_hist_init(&a);
    sqz_act_hist_init(&b);
    SQZ_ASSERT_OK(sqz_act_hist_add(&a, x, n / 2));
    SQZ_ASSERT_OK(sqz_act_hist_add(&b, x + n / 2, n - n / 2));
    SQZ_ASSERT_OK(sqz_act_hist_merge(&a, &b));
    assert_true(a.total == (double)n && a.absmax == h.absmax);
    sqz_act_hist empty;
    sqz_act_hist_init(&empty);
    assert_int_equal(sqz_act_threshold(&empty, SQZ_ACT_CALIB_KL, 0, &t_kl), SQZ_ERR_INVALID_ARG);
    sqz_act_hist_free(&a);
    sqz_act_hist_free(&b);
    sqz_act_hist_free(&h);
    /* static quantization */
    const float v[5] = {1.0f, -2.5f, 1000.0f, NAN, 0.25f};
    int8_t q[5];
    sqz_quantize_act_static(v, 1, 5, 0.5f, q);
    assert_int_equal(q[0], 2);
    assert_int_equal(q[1], -5);
    assert_int_equal(q[2], 127);
    assert_int_equal(q[3], 0);
    assert_int_equal(q[4], 0); /* 0.5 rounds to even */
    free(x);
}

static void test_method_table(void **state) {
    (void)state;
    int n;
    const sqz_qmethod *t = sqz_qmethods(&n);
    assert_int_equal(n, 5);
    for (int i = 0; i < n; i++) {
        assert_ptr_equal(sqz_qmethod_find(t[i].name), &t[i]);
        assert_non_null(t[i].run);
        assert_non_null(t[i].summary);
    }
    assert_null(sqz_qmethod_find("nope"));
    assert_true(sqz_qmethod_find("gptq")->needs & SQZ_QSTAT_XTX);
    assert_true(sqz_qmethod_find("awq")->smooths);
    /* missing statistics are reported, not crashed on */
    const float w[64] = {1};
    sqz_qlinear lin = {w, 1, "x", false};
    sqz_qstats st = {.n_in = 64};
    sqz_quant_opts o = sqz_quant_default_opts();
    sqz_qmatrix out = {0};
    float smooth[64];
    assert_int_equal(sqz_quant_gptq(&lin, 1, &st, &o, &out, smooth), SQZ_ERR_INVALID_ARG);
    assert_non_null(strstr(sqz_last_error(), "Hessian"));
    assert_int_equal(sqz_quant_awq(&lin, 1, &st, &o, &out, NULL), SQZ_ERR_INVALID_ARG);
    o.target = (sqz_qtarget){SQZ_QFMT_Q4_0, 32};
    o.act_mode = SQZ_ACT_DYNAMIC_TOKEN;
    assert_int_equal(sqz_quant_rtn(&lin, 1, &st, &o, &out, smooth), SQZ_ERR_UNSUPPORTED);
    o.act_mode = SQZ_ACT_FLOAT;
    SQZ_ASSERT_OK(sqz_quant_rtn(&lin, 1, &st, &o, &out, smooth));
    assert_true(smooth[0] == 1.0f && smooth[63] == 1.0f);
    sqz_qmatrix_free(&out);
    assert_int_equal(sqz_quant_imatrix(&lin, 1, &st, &o, &out, smooth), SQZ_ERR_INVALID_ARG);
}

/* llama.cpp's weighted error of one IQ3_S super-block (weights qw * sqrt(sigma2 + x^2)). */
static double iq3_werr(const float *x, const float *qw, const void *blk) {
    float y[256], sumx2 = 0;
    sqz__dequantize_iq3_s(blk, y, 256);
    for (int i = 0; i < 256; i++) sumx2 += x[i] * x[i];
    const float sigma2 = 2 * sumx2 / 256;
    double e = 0;
    for (int i = 0; i < 256; i++) e += qw[i] * sqrtf(sigma2 + x[i] * x[i]) * (double)(x[i] - y[i]) * (x[i] - y[i]);
    return e;
}

/* sqz__iq3s_refine on stories260K's real weights (the 5 w1 as 215 super-blocks), with importance
 * from real-looking positive weights: never worse than llama.cpp's block, lower in total, and what
 * it writes is a valid block that sqz__iq3s_refine keeps as it is (a fixed point). Through the
 * imatrix method: search=exact keeps llama.cpp's bytes, refine lowers the error. */
static void test_iq3s_refine(void **state) {
    (void)state;
    float *w = sqz_rw_need();
    const float *x = w + SQZ_RW_W1;
    const int nsb = 5 * 172 * 64 / 256;
    float qw[256];
    for (int i = 0; i < 256; i++) qw[i] = 0.25f + (float)((i * 37) % 101) / 50.0f;
    double before = 0, after = 0;
    int changed = 0;
    for (int b = 0; b < nsb; b++) {
        sqz_block_iq3_s q, r;
        sqz__quantize_iq3_s(x + 256 * b, &q, 1, 256, qw);
        r = q;
        sqz__iq3s_refine(x + 256 * b, qw, &r);
        const double e0 = iq3_werr(x + 256 * b, qw, &q), e1 = iq3_werr(x + 256 * b, qw, &r);
        assert_true(e1 <= e0);
        changed += memcmp(&q, &r, sizeof q) != 0;
        before += e0;
        after += e1;
        sqz_block_iq3_s r2 = r;
        sqz__iq3s_refine(x + 256 * b, qw, &r2);
        assert_true(iq3_werr(x + 256 * b, qw, &r2) <= e1);
    }
    print_message("iq3_s refine on stories260K w1: weighted error %.6g -> %.6g (%.1f%%), %d of %d blocks changed\n",
                  before, after, 100.0 * after / before, changed, nsb);
    assert_true(after < 0.97 * before);
    assert_true(changed > nsb / 2);
    /* the method: exact is llama.cpp's bytes, refine changes them for the better */
    float x2[256];
    for (int i = 0; i < 256; i++) x2[i] = qw[i];
    sqz_qlinear lin = {x, nsb, "w1", false};
    sqz_qstats st = {.n_in = 256, .x2 = x2};
    sqz_quant_opts o = sqz_quant_default_opts();
    o.target = (sqz_qtarget){SQZ_QFMT_IQ3_S, 256};
    sqz_qmatrix qe = {0}, qr = {0};
    SQZ_ASSERT_OK(sqz_quant_imatrix(&lin, 1, &st, &o, &qe, NULL));
    uint8_t *ref = malloc(qe.nbytes);
    sqz__quantize_iq3_s(x, ref, nsb, 256, x2);
    assert_memory_equal(qe.data, ref, qe.nbytes);
    o.refine = true;
    SQZ_ASSERT_OK(sqz_quant_imatrix(&lin, 1, &st, &o, &qr, NULL));
    double e_exact = 0, e_ref = 0;
    for (int b = 0; b < nsb; b++) {
        e_exact += iq3_werr(x + 256 * b, qw, (const uint8_t *)qe.data + b * sizeof(sqz_block_iq3_s));
        e_ref += iq3_werr(x + 256 * b, qw, (const uint8_t *)qr.data + b * sizeof(sqz_block_iq3_s));
    }
    assert_true(fabs(e_ref - after) <= 1e-9 * after && e_exact == before);
    free(ref);
    sqz_qmatrix_free(&qe);
    sqz_qmatrix_free(&qr);
    free(w);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_u4_pack),
        cmocka_unit_test(test_rtn_vs_reference),
        cmocka_unit_test(test_qparams_check),
        cmocka_unit_test(test_attach_and_run),
        cmocka_unit_test(test_act_scales),
        cmocka_unit_test(test_method_table),
        cmocka_unit_test(test_iq3s_refine),
    };
    return sqz_test_run(tests, NULL, NULL);
}

/* tests/unit/test_moe.c - a mixture's experts in calibration and quantization (issue 49, docs/moe.md), on the
 * random-initialised Qwen3-MoE of tests/data/moe/ (3 layers, 8 experts of width 32, top-2):
 *   - the observer of a block sees each expert's own tokens: every token once per expert it is routed to
 *     (tokens x top-k in all), E[x^2] the mean of the rows it saw, X^T X (symmetric; kept from the expert's
 *     64th token on: it has 64 inputs) its diagonal over its tokens the same, an expert that saw none the
 *     all-ones E[x^2] and no X^T X;
 *   - an expert no token reached is rounded by the documented rule (an all-ones importance, imatrix), those
 *     with at least as many tokens as inputs by GPTQ on their own X^T X, the others by imatrix on their
 *     E[x^2], and the report row counts each. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sqz/calib.h"
#include "sqz/compress.h"
#include "test_util.h"

#define BIT(r) (1u << (unsigned)(r))
enum { T = 400 };

static const char *qwen3moe(void) {
    static char b[4096];
    const char *src = getenv("SQZ_SOURCE_DIR");
    snprintf(b, sizeof b, "%s/tests/data/moe/qwen3moe", src && *src ? src : ".");
    return b;
}

static const int32_t *ids(void) {
    static int32_t v[T];
    for (int i = 0; i < T; i++) v[i] = (int32_t)((i * 37 + 11) % 480);
    return v;
}

/* Block 0's statistics from one forward pass of the T ids. */
static void observe_block0(const sqz_model *m, unsigned needs, sqz_calib_block *out) {
    sqz_calib_observe_opts oo = {.needs = needs};
    sqz_calib_observer *ob;
    SQZ_ASSERT_OK(sqz_calib_observer_new(0, &oo, &ob));
    sqz_session_opts so = sqz_session_default_opts();
    so.max_tokens = T;
    sqz_session *s;
    SQZ_ASSERT_OK(sqz_session_new(m, &so, &s));
    sqz_session_set_hook(s, sqz_calib_observer_hook, ob);
    SQZ_ASSERT_OK(sqz_forward(s, ids(), T, 0, 0, NULL));
    SQZ_ASSERT_OK(sqz_calib_observer_finish(ob, out));
    sqz_calib_observer_free(ob);
    sqz_session_free(s);
}

static void test_observer_per_expert(void **state) {
    (void)state;
    sqz_model *m;
    SQZ_ASSERT_OK(sqz_model_open(qwen3moe(), NULL, &m));
    sqz_calib_block b;
    observe_block0(m, SQZ_QSTAT_X2 | SQZ_QSTAT_XTX, &b);
    const sqz_calib_input *gu = sqz_calib_block_input(&b, SQZ_ROLE_FFN_GATE_EXPS);
    const sqz_calib_input *dn = sqz_calib_block_input(&b, SQZ_ROLE_FFN_DOWN_EXPS);
    assert_non_null(gu);
    assert_non_null(dn);
    assert_true(gu->roles == (BIT(SQZ_ROLE_FFN_GATE_EXPS) | BIT(SQZ_ROLE_FFN_UP_EXPS)));
    assert_int_equal(gu->st.n_in, 64);
    assert_int_equal(dn->st.n_in, 32);
    assert_true(gu->n_mat >= 1 && gu->n_mat <= 8 && gu->mat_tokens && gu->mat_xtx);
    double sum = 0;
    for (int64_t e = 0; e < gu->n_mat; e++) {
        const float n = gu->mat_tokens[e];
        sum += n;
        /* an X^T X from an expert's 64th token on (it has 64 inputs); before, its rows only */
        assert_true((gu->mat_xtx[e] != NULL) == (n >= 64));
        for (int64_t j = 0; j < 64; j++) {
            const double x2 = gu->x2[e * 64 + j];
            if (n == 0) assert_true(x2 == 1.0); /* llama-imatrix's all-ones importance, no Hessian */
            if (gu->mat_xtx[e]) {
                const double *h = gu->mat_xtx[e];
                assert_true(fabs(h[j * 64 + j] / n - x2) <= 1e-5 * fmax(1.0, x2));
                for (int64_t c = 0; c < 64; c++) assert_true(h[j * 64 + c] == h[c * 64 + j]);
            }
        }
    }
    assert_true(sum == 2.0 * T); /* every token to its top-2 */
    assert_true(gu->st.n_tokens == 2 * T && dn->st.n_tokens == 2 * T);
    print_message("block 0: tokens per expert:");
    for (int64_t e = 0; e < gu->n_mat; e++) print_message(" %.0f", (double)gu->mat_tokens[e]);
    print_message("\n");
    sqz_calib_block_free(&b);
    sqz_model_free(m);
}

/* GPTQ per expert, with one expert's tokens taken away: that one is rounded by the all-ones rule. */
static void test_unreached_expert_rule(void **state) {
    (void)state;
    sqz_model *m;
    SQZ_ASSERT_OK(sqz_model_open(qwen3moe(), NULL, &m));
    sqz_calib_block b;
    observe_block0(m, SQZ_QSTAT_X2 | SQZ_QSTAT_XTX | SQZ_QSTAT_SAMPLE, &b);
    sqz_calib_input *gu = (sqz_calib_input *)sqz_calib_block_input(&b, SQZ_ROLE_FFN_GATE_EXPS);
    assert_true(gu && gu->n_mat == 8);
    int64_t gone = -1; /* the busiest expert loses its tokens, as if calibration had never reached it */
    for (int64_t e = 0; e < 8; e++) gone = gone < 0 || gu->mat_tokens[e] > gu->mat_tokens[gone] ? e : gone;
    gu->mat_tokens[gone] = 0;
    free(gu->mat_xtx[gone]);
    gu->mat_xtx[gone] = NULL;
    long want_gptq = 0; /* the rule: GPTQ where an expert saw at least as many tokens as it has inputs (64) */
    for (int64_t e = 0; e < 8; e++) want_gptq += gu->mat_tokens[e] >= 64.0f;
    for (int64_t j = 0; j < 64; j++) gu->x2[gone * 64 + j] = 1.0f;
    sqz_compress_opts o = sqz_compress_default_opts();
    SQZ_ASSERT_OK(sqz_compress_spec_parse("q4_0:gptq:pure", &o.spec));
    sqz_compress_report rep;
    memset(&rep, 0, sizeof rep);
    SQZ_ASSERT_OK(sqz_compress_block(m, 0, &b, &o, &rep));
    bool seen = false;
    for (int64_t i = 0; i < rep.n_layers; i++) {
        const sqz_layer_report *r = &rep.layers[i];
        if (r->role != SQZ_ROLE_FFN_GATE_EXPS) continue;
        print_message("%s: %s %s, %s\n", r->tensor, r->method, r->format, r->why);
        assert_true(r->quantized && !strcmp(r->format, "q4_0"));
        long g = -1, im = -1, ones = -1, rtn = -1;
        assert_int_equal(sscanf(r->why, "experts: gptq %ld imatrix %ld ones %ld rtn %ld", &g, &im, &ones, &rtn), 4);
        assert_true(ones == 1 && rtn == 0 && g == want_gptq && g + im == 7 && g >= 1); /* fewer tokens: imatrix */
        seen = true;
    }
    assert_true(seen);
    const sqz_tensor *t = sqz_model_get(m, SQZ_ROLE_FFN_GATE_EXPS, 0, SQZ_PARAM_WEIGHT);
    assert_true(t->dtype == SQZ_DTYPE_Q4_0 && t->ndim == 3 && t->shape[0] == 8);
    sqz_compress_report_free(&rep);
    sqz_calib_block_free(&b);
    sqz_model_free(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_observer_per_expert),
        cmocka_unit_test(test_unreached_expert_rule),
    };
    return sqz_test_run(tests, NULL, NULL);
}

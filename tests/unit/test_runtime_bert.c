/* tests/unit/test_runtime_bert.c - the encoder forward pass on all-MiniLM-L6-v2: sentence
 * embeddings (mean pooling + L2 normalisation, as sentence-transformers' modules.json says) with
 * cosine >= 0.99999 against the numpy BertModel reference (tests/ref/make_minilm_ref.py, whose
 * first sentence also reproduces sentence-transformers' published values); the token-state and
 * block APIs agree; errors are clean. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime_fixture.h"
#include "test_util.h"

static const char *fixture(const char *name) {
    static char buf[4096];
    const char *src = getenv("SQZ_SOURCE_DIR");
    snprintf(buf, sizeof buf, "%s/tests/data/runtime/%s", src && *src ? src : ".", name);
    return buf;
}

static double cosine(const float *a, const float *b, int64_t n) {
    double d = 0, na = 0, nb = 0;
    for (int64_t i = 0; i < n; i++) {
        d += (double)a[i] * b[i];
        na += (double)a[i] * a[i];
        nb += (double)b[i] * b[i];
    }
    return d / sqrt(na * nb);
}

static void test_minilm_embeddings(void **state) {
    (void)state;
    const char *path = sqz_test_minilm();
    SQZ_SKIP_UNLESS(path);
    ref_file f;
    if (!ref_load(fixture("minilm_embeddings.ref"), &f)) fail_msg("cannot read minilm_embeddings.ref");
    sqz_model *m;
    SQZ_ASSERT_OK(sqz_model_open(path, NULL, &m));
    sqz_session *s;
    SQZ_ASSERT_OK(sqz_session_new(m, NULL, &s));
    assert_int_equal(sqz_session_max_tokens(s), 512); /* capped by the position embeddings */
    int64_t d = m->hp.d_model;
    float *e = malloc(sizeof(float) * d);
    for (uint32_t c = 0; c < f.n_cases; c++) {
        const ref_case *rc = &f.cases[c];
        assert_int_equal(rc->n_cols, d);
        SQZ_ASSERT_OK(sqz_embed(s, rc->ids, NULL, rc->n_ids, true, e));
        double cs = cosine(e, rc->rows[0].vals, d), err = ref_rel_err(&rc->rows[0], rc->n_cols, e);
        print_message("sentence %u (%u tokens): cosine %.9f, relative error %.2e\n", c, rc->n_ids, cs, err);
        assert_true(cs >= 0.99999);
        assert_true(err < 1e-4);
        double nrm = 0;
        for (int64_t i = 0; i < d; i++) nrm += (double)e[i] * e[i];
        assert_true(fabs(sqrt(nrm) - 1.0) < 1e-5);
    }
    free(e);
    ref_free(&f);
    sqz_session_free(s);
    sqz_model_free(m);
}

/* sqz_encode == embed + blocks; unnormalised pooling == mean of the token states. */
static void test_minilm_apis_agree(void **state) {
    (void)state;
    const char *path = sqz_test_minilm();
    SQZ_SKIP_UNLESS(path);
    sqz_model *m;
    SQZ_ASSERT_OK(sqz_model_open(path, NULL, &m));
    sqz_session_opts o = sqz_session_default_opts();
    o.max_tokens = 64;
    sqz_session *s;
    SQZ_ASSERT_OK(sqz_session_new(m, &o, &s));
    int64_t d = m->hp.d_model;
    int32_t ids[9] = {101, 2023, 2003, 2019, 2742, 6251, 1012, 102, 0};
    int32_t types[8] = {0, 0, 0, 0, 1, 1, 1, 1};
    float *h = malloc(sizeof(float) * 8 * d), *x = malloc(sizeof(float) * 8 * d), *e = malloc(sizeof(float) * d);
    SQZ_ASSERT_OK(sqz_encode(s, ids, NULL, 8, h));
    SQZ_ASSERT_OK(sqz_session_embed(s, ids, NULL, 8, 0, x));
    for (int32_t l = 0; l < (int32_t)m->hp.n_layers; l++) SQZ_ASSERT_OK(sqz_session_block(s, l, x, 8, 0));
    for (int64_t i = 0; i < 8 * d; i++) assert_true(fabsf(h[i] - x[i]) < 1e-6f);
    SQZ_ASSERT_OK(sqz_embed(s, ids, NULL, 8, false, e));
    for (int64_t c = 0; c < d; c++) {
        double mean = 0;
        for (int i = 0; i < 8; i++) mean += h[i * d + c];
        assert_true(fabs(mean / 8 - e[c]) < 1e-5);
    }
    /* token types change the result */
    SQZ_ASSERT_OK(sqz_encode(s, ids, types, 8, x));
    assert_true(fabsf(x[5 * d] - h[5 * d]) > 1e-6f);
    /* errors */
    float logits[4];
    assert_int_equal(sqz_forward(s, ids, 8, 0, 0, logits), SQZ_ERR_ARCH);
    assert_int_equal(sqz_session_head(s, x, 8, 0, logits), SQZ_ERR_ARCH);
    types[2] = 2;
    assert_int_equal(sqz_encode(s, ids, types, 8, x), SQZ_ERR_INVALID_ARG);
    ids[3] = 30522;
    assert_int_equal(sqz_encode(s, ids, NULL, 8, x), SQZ_ERR_INVALID_ARG);
    assert_int_equal(sqz_encode(s, ids, NULL, 0, x), SQZ_ERR_INVALID_ARG);
    int32_t *many = calloc(65, sizeof *many);
    assert_int_equal(sqz_encode(s, many, NULL, 65, NULL), SQZ_ERR_INVALID_ARG);
    free(many);
    free(h);
    free(x);
    free(e);
    sqz_session_free(s);
    sqz_model_free(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_minilm_embeddings),
        cmocka_unit_test(test_minilm_apis_agree),
    };
    return sqz_test_run(tests, NULL, NULL);
}

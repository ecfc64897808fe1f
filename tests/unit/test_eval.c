/* tests/unit/test_eval.c - eval/ on stories260K over the start of wiki.test.raw:
 *   a model against itself gives KL divergence 0, top-1 agreement 100%, delta ppl 0;
 *   saved base logits (SQZLOGB1) read back give the same ppl_base and top-1, KLD ~0, and are
 *   refused for other tokens, another ctx, or when corrupt;
 *   the protocol's counts (chunks, scored tokens) and the JSON report's keys;
 *   percentiles. (The perplexity value itself is checked against an independent numpy
 *   implementation by tests/py/test_eval_ppl.py.) */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "eval/eval_internal.h"
#include "sqz/tokenizer.h"
#include "test_util.h"

typedef struct fixture {
    sqz_model *m;
    sqz_session *s, *s2;
    int32_t *ids;
    size_t n_ids;
} fixture;

static int setup(void **state) {
    const char *path = sqz_test_data("models/stories260K/stories260K.bin");
    const char *text = sqz_test_data("data/wiki.test.raw");
    if (!sqz_test_exists(path) || !sqz_test_exists(text)) {
        *state = NULL;
        return 0;
    }
    fixture *f = calloc(1, sizeof *f);
    char *buf;
    size_t len;
    sqz_tokenizer *tok;
    if (sqz_read_file(text, (size_t)1 << 24, &buf, &len) != SQZ_OK) return -1;
    if (len > 60000) len = 60000;
    if (sqz_model_open(path, NULL, &f->m) != SQZ_OK || sqz_tokenizer_new(&f->m->vocab, &tok) != SQZ_OK ||
        sqz_tokenize(tok, buf, len, true, &f->ids, &f->n_ids) != SQZ_OK)
        return -1;
    free(buf);
    sqz_tokenizer_free(tok);
    sqz_session_opts o = sqz_session_default_opts();
    o.max_tokens = 128;
    if (sqz_session_new(f->m, &o, &f->s) != SQZ_OK || sqz_session_new(f->m, &o, &f->s2) != SQZ_OK) return -1;
    *state = f;
    return 0;
}

static int teardown(void **state) {
    fixture *f = *state;
    if (!f) return 0;
    sqz_session_free(f->s);
    sqz_session_free(f->s2);
    sqz_model_free(f->m);
    free(f->ids);
    free(f);
    return 0;
}

#define NEED_FIXTURE(f)                                                                   \
    do {                                                                                  \
        if (!(f)) { print_message("skipping: stories260K or wiki.test.raw missing\n"); skip(); } \
    } while (0)

static void test_self_base_is_exact(void **state) {
    fixture *f = *state;
    NEED_FIXTURE(f);
    sqz_eval_opts o = sqz_eval_default_opts();
    o.ctx = 128;
    o.max_chunks = 6;
    sqz_eval_result alone, r;
    SQZ_ASSERT_OK(sqz_eval_perplexity(f->s, f->ids, (int64_t)f->n_ids, &o, &alone));
    assert_int_equal(alone.n_chunks, 6);
    assert_int_equal(alone.tokens_scored, 6 * (128 - 1 - 64));
    assert_false(alone.has_base);
    assert_true(alone.ppl > 10 && alone.ppl < 1000 && alone.ppl_stderr > 0);
    o.base = f->s2;
    SQZ_ASSERT_OK(sqz_eval_perplexity(f->s, f->ids, (int64_t)f->n_ids, &o, &r));
    assert_true(r.has_base);
    assert_true(r.ppl == alone.ppl);
    assert_true(r.ppl_base == r.ppl);
    assert_true(r.delta_ppl == 0.0);
    assert_true(r.kld_mean == 0.0 && r.kld_max == 0.0 && r.kld_p99 == 0.0);
    assert_true(r.top1_agree == 1.0);
    assert_true(r.rms_dp == 0.0);
    char *j = sqz_eval_report_json(&r, "m", "b", "t");
    assert_non_null(j);
    const char *keys[] = {"\"ppl\"", "\"ppl_stderr\"", "\"tokens_scored\"", "\"ppl_base\"", "\"delta_ppl\"",
                          "\"kld_mean\"", "\"kld_p99\"", "\"top1_agree\"", "\"rms_dp\""};
    for (size_t k = 0; k < sizeof keys / sizeof *keys; k++) assert_non_null(strstr(j, keys[k]));
    free(j);
    sqz_eval_result_free(&alone);
    sqz_eval_result_free(&r);
    sqz_eval_result_free(NULL);
}

static void test_saved_base_logits(void **state) {
    fixture *f = *state;
    NEED_FIXTURE(f);
    const char *dir = sqz_test_tmpdir();
    char path[4096];
    snprintf(path, sizeof path, "%s/base.logits", dir);
    sqz_eval_opts o = sqz_eval_default_opts();
    o.ctx = 64;
    o.max_chunks = 5;
    o.save_base = path;
    sqz_eval_result a, b;
    SQZ_ASSERT_OK(sqz_eval_perplexity(f->s, f->ids, (int64_t)f->n_ids, &o, &a));
    o.save_base = NULL;
    o.base_logits = path;
    SQZ_ASSERT_OK(sqz_eval_perplexity(f->s2, f->ids, (int64_t)f->n_ids, &o, &b));
    assert_true(b.has_base);
    assert_true(fabs(b.ppl_base - a.ppl) / a.ppl < 1e-6);
    assert_true(fabs(b.delta_ppl) / a.ppl < 1e-6);
    assert_true(b.top1_agree == 1.0);
    print_message("KLD through the 16-bit base file: mean %.3g max %.3g\n", b.kld_mean, b.kld_max);
    assert_true(b.kld_mean < 1e-5 && b.kld_max < 1e-4);
    /* fewer chunks than saved is fine; more is not */
    o.max_chunks = 3;
    sqz_eval_result c;
    SQZ_ASSERT_OK(sqz_eval_perplexity(f->s2, f->ids, (int64_t)f->n_ids, &o, &c));
    sqz_eval_result_free(&c);
    o.max_chunks = 6;
    assert_int_equal(sqz_eval_perplexity(f->s2, f->ids, (int64_t)f->n_ids, &o, &c), SQZ_ERR_INVALID_ARG);
    /* another ctx, other tokens */
    o.max_chunks = 2;
    o.ctx = 32;
    assert_int_equal(sqz_eval_perplexity(f->s2, f->ids, (int64_t)f->n_ids, &o, &c), SQZ_ERR_INVALID_ARG);
    o.ctx = 64;
    assert_int_equal(sqz_eval_perplexity(f->s2, f->ids + 1, (int64_t)f->n_ids - 1, &o, &c), SQZ_ERR_INVALID_ARG);
    assert_non_null(strstr(sqz_last_error(), "other text"));
    /* a truncated copy is a format error */
    char *buf;
    size_t len;
    SQZ_ASSERT_OK(sqz_read_file(path, (size_t)1 << 26, &buf, &len));
    char bad[4096];
    snprintf(bad, sizeof bad, "%s/bad.logits", dir);
    FILE *fp = fopen(bad, "wb");
    fwrite(buf, 1, len - 7, fp);
    fclose(fp);
    o.base_logits = bad;
    assert_int_equal(sqz_eval_perplexity(f->s2, f->ids, (int64_t)f->n_ids, &o, &c), SQZ_ERR_FORMAT);
    buf[0] = 'X';
    fp = fopen(bad, "wb");
    fwrite(buf, 1, len, fp);
    fclose(fp);
    assert_int_equal(sqz_eval_perplexity(f->s2, f->ids, (int64_t)f->n_ids, &o, &c), SQZ_ERR_FORMAT);
    free(buf);
    unlink(bad);
    unlink(path);
    rmdir(dir);
    sqz_eval_result_free(&a);
    sqz_eval_result_free(&b);
}

static void test_protocol_limits(void **state) {
    fixture *f = *state;
    NEED_FIXTURE(f);
    sqz_eval_opts o = sqz_eval_default_opts();
    sqz_eval_result r;
    o.ctx = 128;
    assert_int_equal(sqz_eval_perplexity(f->s, f->ids, 255, &o, &r), SQZ_ERR_INVALID_ARG); /* < 2 ctx */
    SQZ_ASSERT_OK(sqz_eval_perplexity(f->s, f->ids, 256, &o, &r));
    assert_int_equal(r.n_chunks, 2);
    sqz_eval_result_free(&r);
    o.ctx = 256; /* beyond the session's 128 positions */
    assert_int_equal(sqz_eval_perplexity(f->s, f->ids, (int64_t)f->n_ids, &o, &r), SQZ_ERR_INVALID_ARG);
    o.ctx = 64;
    o.base = f->s2;
    o.base_logits = "x";
    assert_int_equal(sqz_eval_perplexity(f->s, f->ids, (int64_t)f->n_ids, &o, &r), SQZ_ERR_INVALID_ARG);
}

static void test_percentile(void **state) {
    (void)state;
    float v[5] = {5, 1, 4, 2, 3};
    assert_true(sqz__percentile(v, 5, 0.0) == 1.0);
    assert_true(sqz__percentile(v, 5, 1.0) == 5.0);
    assert_true(sqz__percentile(v, 5, 0.5) == 3.0);
    assert_true(fabs(sqz__percentile(v, 5, 0.99) - 4.96) < 1e-9);
    assert_true(sqz__percentile(v, 0, 0.5) == 0.0);
    float one = 7;
    assert_true(sqz__percentile(&one, 1, 0.999) == 7.0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_self_base_is_exact),
        cmocka_unit_test(test_saved_base_logits),
        cmocka_unit_test(test_protocol_limits),
        cmocka_unit_test(test_percentile),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}

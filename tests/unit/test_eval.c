/* tests/unit/test_eval.c - eval/ on stories260K over the start of wiki.test.raw:
 *   a model against itself gives KL divergence 0, top-1 agreement 100%, delta ppl 0;
 *   saved base logits (SQZLOGB1) read back give the same ppl_base and top-1, KLD ~0, and are
 *   refused for other tokens, another ctx, or when corrupt;
 *   the protocol's counts (chunks, scored tokens) and the JSON report's keys;
 *   exclusion spans (held-out evaluation) skip exactly the chunks they overlap;
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
        if (!(f)) SQZ_SKIP("stories260K or wiki.test.raw missing");                       \
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

/* The kept chunks of a 64-token grid, back to back (n_keep of them). */
static int32_t *gather(const int32_t *ids, const int *keep, int n_keep) {
    int32_t *g = malloc((size_t)n_keep * 64 * sizeof *g);
    for (int k = 0; k < n_keep; k++) memcpy(g + k * 64, ids + keep[k] * 64, 64 * sizeof *g);
    return g;
}

/* Exclusion spans skip exactly the chunks they overlap; the others are evaluated as if they
 * were the whole text (same numbers bit for bit), and the two sets add up to the whole run. */
static void test_exclude_spans(void **state) {
    fixture *f = *state;
    NEED_FIXTURE(f);
    const int64_t n = 20 * 64 + 17; /* 20 chunks of 64 and a partial one */
    assert_true((int64_t)f->n_ids >= n);
    sqz_eval_opts o = sqz_eval_default_opts();
    o.ctx = 64;
    o.base = f->s2;
    sqz_eval_result all, ex, kept, gone;
    SQZ_ASSERT_OK(sqz_eval_perplexity(f->s, f->ids, n, &o, &all));
    assert_int_equal(all.n_chunks, 20);
    assert_int_equal(all.n_excluded, 0);
    /* chunk 0 (one token), 3 (inside), 4 and 5 (a span across their border); an empty span
     * inside chunk 7 and one past the text exclude nothing */
    const int64_t spans[][2] = {{0, 1}, {3 * 64 + 10, 3 * 64 + 20}, {5 * 64 - 1, 5 * 64 + 1}, {7 * 64 + 5, 7 * 64 + 5},
                                {20 * 64, 20 * 64 + 500}};
    o.exclude = spans;
    o.n_exclude = 5;
    SQZ_ASSERT_OK(sqz_eval_perplexity(f->s, f->ids, n, &o, &ex));
    assert_int_equal(ex.n_excluded, 4);
    assert_int_equal(ex.n_chunks, 16);
    assert_int_equal(ex.n_chunks + ex.n_excluded, all.n_chunks);
    assert_int_equal(ex.tokens_scored, 16 * (64 - 1 - 32));
    assert_int_equal(ex.n_tokens, n);
    assert_true(ex.kld_mean == 0.0 && ex.top1_agree == 1.0);
    int keep[16], drop[4] = {0, 3, 4, 5}, nk = 0;
    for (int c = 0; c < 20; c++)
        if (c != 0 && (c < 3 || c > 5)) keep[nk++] = c;
    int32_t *gk = gather(f->ids, keep, 16), *gd = gather(f->ids, drop, 4);
    o.exclude = NULL;
    o.n_exclude = 0;
    SQZ_ASSERT_OK(sqz_eval_perplexity(f->s, gk, 16 * 64, &o, &kept));
    SQZ_ASSERT_OK(sqz_eval_perplexity(f->s, gd, 4 * 64, &o, &gone));
    assert_true(ex.ppl == kept.ppl && ex.nll_mean == kept.nll_mean && ex.ppl_stderr == kept.ppl_stderr);
    print_message("ppl: all %.4f, held-out %.4f (16 chunks), excluded %.4f (4 chunks)\n", all.ppl, ex.ppl, gone.ppl);
    assert_true(fabs(16 * kept.nll_mean + 4 * gone.nll_mean - 20 * all.nll_mean) < 1e-9 * 20 * all.nll_mean);
    assert_true(ex.ppl != all.ppl);
    /* max_chunks counts evaluated chunks: chunk 0 is skipped, 1 and 2 are evaluated */
    o.exclude = spans;
    o.n_exclude = 5;
    o.max_chunks = 2;
    sqz_eval_result two;
    SQZ_ASSERT_OK(sqz_eval_perplexity(f->s, f->ids, n, &o, &two));
    assert_int_equal(two.n_chunks, 2);
    assert_int_equal(two.n_excluded, 1);
    char *j = sqz_eval_report_json(&two, NULL, NULL, NULL);
    assert_non_null(strstr(j, "\"n_excluded\""));
    free(j);
    j = sqz_eval_report_json(&all, NULL, NULL, NULL);
    assert_null(strstr(j, "\"n_excluded\""));
    free(j);
    sqz_eval_result_free(&two);
    sqz_eval_result_free(&all);
    sqz_eval_result_free(&ex);
    sqz_eval_result_free(&kept);
    sqz_eval_result_free(&gone);
    free(gk);
    free(gd);
}

/* Base logits saved with spans hold the kept chunks: read back with the same spans. Spans that
 * are not ranges, or that leave nothing, are refused. */
static void test_exclude_spans_errors_and_saved_base(void **state) {
    fixture *f = *state;
    NEED_FIXTURE(f);
    const int64_t n = 8 * 64;
    const char *dir = sqz_test_tmpdir();
    char path[4096];
    snprintf(path, sizeof path, "%s/held.logits", dir);
    const int64_t spans[][2] = {{64, 130}};
    sqz_eval_opts o = sqz_eval_default_opts();
    o.ctx = 64;
    o.exclude = spans;
    o.n_exclude = 1;
    o.save_base = path;
    sqz_eval_result a, b, r;
    SQZ_ASSERT_OK(sqz_eval_perplexity(f->s, f->ids, n, &o, &a));
    assert_int_equal(a.n_chunks, 6); /* not chunk 1 (64..128) nor 2 (128..192, which holds 128 and 129) */
    assert_int_equal(a.n_excluded, 2);
    o.save_base = NULL;
    o.base_logits = path;
    SQZ_ASSERT_OK(sqz_eval_perplexity(f->s2, f->ids, n, &o, &b));
    assert_true(fabs(b.ppl_base - a.ppl) / a.ppl < 1e-6 && b.top1_agree == 1.0);
    o.n_exclude = 0; /* without the spans the file's tokens are not the text's first chunks */
    assert_int_equal(sqz_eval_perplexity(f->s2, f->ids, n, &o, &r), SQZ_ERR_INVALID_ARG);
    unlink(path);
    rmdir(dir);
    o.base_logits = NULL;
    const int64_t everything[][2] = {{0, n}}, backwards[][2] = {{10, 5}}, negative[][2] = {{-1, 5}};
    o.n_exclude = 1;
    o.exclude = everything;
    assert_int_equal(sqz_eval_perplexity(f->s, f->ids, n, &o, &r), SQZ_ERR_INVALID_ARG);
    assert_non_null(strstr(sqz_last_error(), "no held-out text"));
    o.exclude = backwards;
    assert_int_equal(sqz_eval_perplexity(f->s, f->ids, n, &o, &r), SQZ_ERR_INVALID_ARG);
    o.exclude = negative;
    assert_int_equal(sqz_eval_perplexity(f->s, f->ids, n, &o, &r), SQZ_ERR_INVALID_ARG);
    o.exclude = NULL;
    assert_int_equal(sqz_eval_perplexity(f->s, f->ids, n, &o, &r), SQZ_ERR_INVALID_ARG);
    sqz_eval_result_free(&a);
    sqz_eval_result_free(&b);
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
        cmocka_unit_test(test_exclude_spans),
        cmocka_unit_test(test_exclude_spans_errors_and_saved_base),
        cmocka_unit_test(test_percentile),
    };
    /* every case but test_percentile needs both: without them that one alone would run */
    if (!sqz_test_needs(sqz_test_data("models/stories260K/stories260K.bin")) ||
        !sqz_test_needs(sqz_test_data("data/wiki.test.raw")))
        return SQZ_TEST_SKIP;
    return sqz_test_run(tests, setup, teardown);
}

/* tests/unit/test_compress_eval.c - sqz_compress_eval_run (compress/eval.c) on real models and
 * text:
 *   stories260K against itself: KL divergence 0, delta ppl 0, top-1 agreement 1;
 *   stories260K quantized to q4_0 (no calibration) against the original: KLD > 0, top-1 < 1,
 *   and every number equal to what sqz_eval_perplexity gives on the same chunks;
 *   calibration windows of the same text held out: fewer chunks, n_held_out more, the same
 *   numbers as sqz_eval_perplexity with those spans excluded, and the count as counted here;
 *   one-line errors (short text, windows of another text, everything held out, no file);
 *   all-MiniLM-L6-v2 (when installed) quantized to int8: embedding cosine, held-out lines.
 * Without stories260K or wiki.test.raw the executable exits 77 (skipped); without MiniLM its
 * case skips. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sqz/compress.h"
#include "sqz/eval.h"
#include "sqz/tokenizer.h"
#include "test_util.h"

#define TEXT_BYTES 30000 /* the start of wiki.test.raw */
#define CTX 128

typedef struct fixture {
    sqz_model *orig, *q;  /* the original and a q4_0 copy (or int8 for the encoder) */
    sqz_tokenizer *tok;
    char *text;
    size_t len;
} fixture;

static sqz_model *open_quantized(const char *path, const char *spec) {
    sqz_model *m = NULL;
    if (sqz_model_open(path, NULL, &m) != SQZ_OK) return NULL;
    sqz_compress_opts o = sqz_compress_default_opts();
    sqz_compress_report rep;
    sqz_status st = sqz_compress_spec_parse(spec, &o.spec);
    if (st == SQZ_OK) st = sqz_compress_model(m, NULL, NULL, NULL, &o, &rep);
    if (st == SQZ_OK) print_message("%s: %lld of %lld parameters quantized to %s\n", path,
                                    (long long)rep.params_quantized, (long long)rep.params, spec);
    sqz_compress_report_free(&rep);
    if (st != SQZ_OK) {
        sqz_model_free(m);
        return NULL;
    }
    return m;
}

static int fixture_open(void **state, const char *model, const char *spec, size_t text_bytes) {
    fixture *f = calloc(1, sizeof *f);
    if (!f || sqz_read_file(sqz_test_data("data/wiki.test.raw"), (size_t)1 << 24, &f->text, &f->len) != SQZ_OK)
        return -1;
    if (f->len > text_bytes) f->len = text_bytes;
    if (sqz_model_open(model, NULL, &f->orig) != SQZ_OK || !(f->q = open_quantized(model, spec)) ||
        sqz_tokenizer_new(&f->orig->vocab, &f->tok) != SQZ_OK) {
        print_message("fixture: %s\n", sqz_last_error());
        return -1;
    }
    *state = f;
    return 0;
}

static int setup(void **state) {
    return fixture_open(state, sqz_test_data("models/stories260K/stories260K.bin"), "q4_0:pure", TEXT_BYTES);
}

static int setup_encoder(void **state) {
    const char *minilm = sqz_test_minilm();
    if (!minilm || !sqz_test_exists(minilm)) {
        *state = NULL; /* the case skips */
        return 0;
    }
    return fixture_open(state, minilm, "int8", 20000);
}

static int teardown(void **state) {
    fixture *f = *state;
    if (!f) return 0;
    sqz_model_free(f->orig);
    sqz_model_free(f->q);
    sqz_tokenizer_free(f->tok);
    free(f->text);
    free(f);
    return 0;
}

static sqz_compress_eval_opts opts(int64_t max_chunks) {
    sqz_compress_eval_opts o = sqz_compress_eval_default_opts();
    o.ctx = CTX;
    o.max_chunks = max_chunks;
    o.threads = 1;
    return o;
}

/* sqz_eval_perplexity directly: model m against base b on the fixture's text. */
static void direct(const fixture *f, const sqz_model *m, const sqz_model *b, const sqz_calib_windows *w,
                   int64_t max_chunks, sqz_eval_result *r) {
    int32_t *ids;
    size_t n;
    SQZ_ASSERT_OK(sqz_tokenize(f->tok, f->text, f->len, true, &ids, &n));
    sqz_session_opts so = sqz_session_default_opts();
    so.n_threads = 1;
    so.max_tokens = CTX;
    sqz_session *sm, *sb;
    SQZ_ASSERT_OK(sqz_session_new(m, &so, &sm));
    SQZ_ASSERT_OK(sqz_session_new(b, &so, &sb));
    int64_t(*spans)[2] = calloc(w ? (size_t)w->n_windows : 1, sizeof *spans);
    for (int64_t i = 0; w && i < w->n_windows; i++) {
        spans[i][0] = w->starts[i];
        spans[i][1] = w->starts[i] + w->ctx;
    }
    sqz_eval_opts o = sqz_eval_default_opts();
    o.ctx = CTX;
    o.max_chunks = max_chunks;
    o.base = sb;
    o.exclude = (const int64_t(*)[2])spans;
    o.n_exclude = w ? w->n_windows : 0;
    SQZ_ASSERT_OK(sqz_eval_perplexity(sm, ids, (int64_t)n, &o, r));
    free(spans);
    free(ids);
    sqz_session_free(sm);
    sqz_session_free(sb);
}

static void assert_same(const sqz_compress_eval *e, const sqz_eval_result *r) {
    assert_int_equal(e->n_chunks, r->n_chunks);
    assert_int_equal(e->n_held_out, r->n_excluded);
    assert_int_equal(e->tokens_scored, r->tokens_scored);
    assert_true(e->ppl == r->ppl && e->ppl_base == r->ppl_base && e->delta_ppl == r->delta_ppl);
    assert_true(e->kld_mean == r->kld_mean && e->kld_p99 == r->kld_p99 && e->top1 == r->top1_agree);
}

static void test_self_is_exact(void **state) {
    fixture *f = *state;
    sqz_compress_eval_opts o = opts(0);
    sqz_compress_eval e;
    SQZ_ASSERT_OK(sqz_compress_eval_run(f->orig, f->orig, "wiki.test.raw", f->text, f->len, NULL, &o, &e));
    print_message("self: %lld chunks, ppl %.4f, kld %.3g, top-1 %.4f (%.2f s)\n", (long long)e.n_chunks, e.ppl,
                  e.kld_mean, e.top1, e.seconds);
    assert_true(e.done && !e.encoder);
    assert_string_equal(e.text, "wiki.test.raw");
    assert_int_equal(e.ctx, CTX);
    assert_true(e.n_chunks >= 10 && e.n_held_out == 0);
    assert_int_equal(e.tokens_scored, e.n_chunks * (CTX - 1 - CTX / 2));
    assert_true(e.kld_mean == 0.0 && e.kld_p99 == 0.0 && e.delta_ppl == 0.0 && e.top1 == 1.0);
    assert_true(e.ppl == e.ppl_base && e.ppl > 10 && e.ppl < 1000);
    assert_true(e.seconds > 0);
}

static void test_quantized_matches_direct(void **state) {
    fixture *f = *state;
    sqz_compress_eval_opts o = opts(0);
    sqz_compress_eval e;
    SQZ_ASSERT_OK(sqz_compress_eval_run(f->q, f->orig, "wiki", f->text, f->len, NULL, &o, &e));
    print_message("q4_0: %lld chunks, ppl %.4f -> %.4f (%+.4f), kld mean %.5f p99 %.5f, top-1 %.4f\n",
                  (long long)e.n_chunks, e.ppl_base, e.ppl, e.delta_ppl, e.kld_mean, e.kld_p99, e.top1);
    assert_true(e.kld_mean > 0 && e.kld_p99 >= e.kld_mean && e.top1 < 1.0 && e.top1 > 0.5);
    assert_true(e.delta_ppl != 0.0);
    sqz_eval_result r;
    direct(f, f->q, f->orig, NULL, 0, &r);
    assert_same(&e, &r);
    sqz_eval_result_free(&r);
    /* max_chunks */
    o.max_chunks = 3;
    SQZ_ASSERT_OK(sqz_compress_eval_run(f->q, f->orig, "wiki", f->text, f->len, NULL, &o, &e));
    assert_int_equal(e.n_chunks, 3);
    direct(f, f->q, f->orig, NULL, 3, &r);
    assert_same(&e, &r);
    sqz_eval_result_free(&r);
}

/* Chunks of the fixture's text that overlap a window, counted here. */
static int64_t count_held(const sqz_calib_windows *w, int64_t n_tokens) {
    int64_t held = 0;
    for (int64_t c = 0; c < n_tokens / CTX; c++) {
        bool hit = false;
        for (int64_t i = 0; i < w->n_windows; i++)
            hit |= w->starts[i] < (c + 1) * CTX && c * CTX < w->starts[i] + w->ctx;
        held += hit;
    }
    return held;
}

static void test_held_out_windows(void **state) {
    fixture *f = *state;
    sqz_calib_windows w;
    SQZ_ASSERT_OK(sqz_calib_windows_make(f->tok, f->text, f->len, 8, 100, 1234, &w));
    sqz_compress_eval_opts o = opts(0);
    sqz_compress_eval all, held;
    SQZ_ASSERT_OK(sqz_compress_eval_run(f->q, f->orig, "wiki", f->text, f->len, NULL, &o, &all));
    SQZ_ASSERT_OK(sqz_compress_eval_run(f->q, f->orig, "wiki", f->text, f->len, &w, &o, &held));
    print_message("held out: %lld of %lld chunks (8 windows of 100 tokens in %lld); ppl %.4f -> %.4f, kld %.5f, "
                  "top-1 %.4f\n", (long long)held.n_held_out, (long long)all.n_chunks, (long long)w.n_text_tokens,
                  held.ppl_base, held.ppl, held.kld_mean, held.top1);
    assert_true(held.n_held_out >= 8 && held.n_held_out <= 16); /* a window of 100 spans 1 or 2 chunks of 128 */
    assert_int_equal(held.n_held_out, count_held(&w, w.n_text_tokens));
    assert_int_equal(held.n_chunks + held.n_held_out, all.n_chunks);
    assert_int_equal(held.tokens_scored, held.n_chunks * (CTX - 1 - CTX / 2));
    assert_true(held.kld_mean != all.kld_mean);
    sqz_eval_result r;
    direct(f, f->q, f->orig, &w, 0, &r);
    assert_same(&held, &r);
    sqz_eval_result_free(&r);
    /* max_chunks counts evaluated chunks */
    o.max_chunks = 5;
    SQZ_ASSERT_OK(sqz_compress_eval_run(f->q, f->orig, "wiki", f->text, f->len, &w, &o, &held));
    assert_int_equal(held.n_chunks, 5);
    direct(f, f->q, f->orig, &w, 5, &r);
    assert_same(&held, &r);
    sqz_eval_result_free(&r);
    sqz_calib_windows_free(&w);
}

static void test_errors(void **state) {
    fixture *f = *state;
    sqz_compress_eval_opts o = opts(0);
    sqz_compress_eval e;
    const char *tiny = "Once upon a time there was a cat.";
    assert_int_equal(sqz_compress_eval_run(f->q, f->orig, "tiny.txt", tiny, strlen(tiny), NULL, &o, &e),
                     SQZ_ERR_INVALID_ARG);
    print_message("%s\n", sqz_last_error());
    assert_non_null(strstr(sqz_last_error(), "tiny.txt"));
    assert_non_null(strstr(sqz_last_error(), "too few for one chunk"));
    assert_false(e.done);
    assert_int_equal(sqz_compress_eval_run(f->q, f->orig, "empty.txt", "", 0, NULL, &o, &e), SQZ_ERR_INVALID_ARG);
    /* windows of another text (a shorter prefix) */
    sqz_calib_windows w;
    SQZ_ASSERT_OK(sqz_calib_windows_make(f->tok, f->text, f->len / 2, 4, 64, 1, &w));
    assert_int_equal(sqz_compress_eval_run(f->q, f->orig, "wiki", f->text, f->len, &w, &o, &e), SQZ_ERR_INVALID_ARG);
    print_message("%s\n", sqz_last_error());
    assert_non_null(strstr(sqz_last_error(), "windows"));
    sqz_calib_windows_free(&w);
    /* windows covering the whole text leave nothing */
    SQZ_ASSERT_OK(sqz_calib_windows_make(f->tok, f->text, 3000, 40, 128, 1, &w));
    assert_int_equal(sqz_compress_eval_run(f->q, f->orig, "short", f->text, 3000, &w, &o, &e), SQZ_ERR_INVALID_ARG);
    print_message("%s\n", sqz_last_error());
    assert_non_null(strstr(sqz_last_error(), "no held-out text"));
    sqz_calib_windows_free(&w);
    assert_int_equal(sqz_compress_eval_run(f->q, f->orig, "/nonexistent/text.raw", NULL, 0, NULL, &o, &e), SQZ_ERR_IO);
    /* text read from the path */
    o.max_chunks = 2;
    SQZ_ASSERT_OK(sqz_compress_eval_run(f->q, f->orig, sqz_test_data("data/wiki.test.raw"), NULL, 0, NULL, &o, &e));
    assert_true(e.done && e.n_chunks == 2 && e.kld_mean > 0);
}

static void test_encoder(void **state) {
    fixture *f = *state;
    SQZ_SKIP_UNLESS(sqz_test_minilm());
    if (!f) SQZ_SKIP("all-MiniLM-L6-v2 not loaded");
    sqz_compress_eval_opts o = sqz_compress_eval_default_opts();
    o.threads = 1;
    sqz_compress_eval self, q, held;
    SQZ_ASSERT_OK(sqz_compress_eval_run(f->orig, f->orig, "wiki", f->text, f->len, NULL, &o, &self));
    assert_true(self.done && self.encoder && self.ctx == 256);
    assert_true(fabs(self.cos_mean - 1) < 1e-9 && fabs(self.cos_min - 1) < 1e-9);
    SQZ_ASSERT_OK(sqz_compress_eval_run(f->q, f->orig, "wiki", f->text, f->len, NULL, &o, &q));
    sqz_calib_windows w;
    SQZ_ASSERT_OK(sqz_calib_windows_make(f->tok, f->text, f->len, 4, 128, 1234, &w));
    SQZ_ASSERT_OK(sqz_compress_eval_run(f->q, f->orig, "wiki", f->text, f->len, &w, &o, &held));
    print_message("int8 MiniLM: %lld sentences, cos mean %.6f min %.6f; held out %lld lines (4 windows of 128 of "
                  "%lld tokens), cos mean %.6f\n", (long long)q.n_chunks, q.cos_mean, q.cos_min,
                  (long long)held.n_held_out, (long long)w.n_text_tokens, held.cos_mean);
    assert_int_equal(q.n_chunks, self.n_chunks);
    assert_true(q.cos_mean < 1 && q.cos_mean > 0.95 && q.cos_min <= q.cos_mean);
    assert_true(held.n_held_out > 0);
    assert_int_equal(held.n_chunks + held.n_held_out, q.n_chunks);
    sqz_calib_windows_free(&w);
    /* sentences as max_chunks */
    o.max_chunks = 10;
    SQZ_ASSERT_OK(sqz_compress_eval_run(f->q, f->orig, "wiki", f->text, f->len, NULL, &o, &q));
    assert_int_equal(q.n_chunks, 10);
}

/* The `sqz eval` line that reproduces an evaluation: --ctx, --chunks, --hold-out, --tokenizer,
 * paths quoted for a shell where needed; none for an encoder with held-out sentences. */
static void test_command(void **state) {
    (void)state;
    sqz_compress_eval e;
    memset(&e, 0, sizeof e);
    e.done = true;
    e.ctx = 512;
    e.n_chunks = 32;
    snprintf(e.text, sizeof e.text, "wiki.test.raw");
    char buf[512];
    size_t n = sqz_compress_eval_command(&e, "m.gguf", "q.gguf", buf, sizeof buf);
    assert_string_equal(buf, "sqz eval q.gguf --base m.gguf --text wiki.test.raw --ctx 512 --chunks 32");
    assert_int_equal(n, strlen(buf));
    e.held_windows = 128, e.held_ctx = 512, e.held_seed = 1234;
    snprintf(e.tokenizer, sizeof e.tokenizer, "tok512.bin");
    n = sqz_compress_eval_command(&e, "my model's dir", "out dir/q.gguf", buf, sizeof buf);
    assert_string_equal(buf, "sqz eval 'out dir/q.gguf' --base 'my model'\\''s dir' --text wiki.test.raw --ctx 512 "
                             "--chunks 32 --hold-out 128:512:1234 --tokenizer tok512.bin");
    /* a short buffer: truncated, NUL-terminated, the needed length returned */
    char small[16];
    assert_int_equal(sqz_compress_eval_command(&e, "my model's dir", "out dir/q.gguf", small, sizeof small), n);
    assert_int_equal(strlen(small), sizeof small - 1);
    e.encoder = true, e.n_held_out = 3;
    assert_int_equal(sqz_compress_eval_command(&e, "m", "q", buf, sizeof buf), 0);
    assert_string_equal(buf, "");
    e.encoder = false, e.done = false;
    assert_int_equal(sqz_compress_eval_command(&e, "m", "q", buf, sizeof buf), 0);
}

int main(void) {
    if (!sqz_test_needs(sqz_test_data("models/stories260K/stories260K.bin")) ||
        !sqz_test_needs(sqz_test_data("data/wiki.test.raw")))
        return SQZ_TEST_SKIP;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_self_is_exact),
        cmocka_unit_test(test_quantized_matches_direct),
        cmocka_unit_test(test_held_out_windows),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_command),
        cmocka_unit_test_setup_teardown(test_encoder, setup_encoder, teardown),
    };
    return sqz_test_run(tests, setup, teardown);
}

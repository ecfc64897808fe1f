/* tests/unit/test_eval_tasks.c - task accuracy (issue 48, sqz/tasks.h):
 *   - McNemar's exact p on hand tables (against sum C(n, i) / 2^n computed apart), Wilson's
 *     interval against llama-perplexity's printed one, the paired comparison's counts;
 *   - each reader on good files (the sequences it builds) and on hostile ones: refused with the
 *     file and the place (line, task, byte);
 *   - sqz_forward_spans: several sequences in one window give each sequence's logits of running it
 *     alone (shared prefix and independent roots), and bad spans are refused;
 *   - sqz_eval_tasks on stories260K: the batched scores choose what sequence-by-sequence
 *     log-probabilities choose. (Counts against llama-perplexity: tests/py/test_eval_tasks.py.) */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eval/task_internal.h"
#include "sqz/tokenizer.h"
#include "test_util.h"

/* ---- statistics ------------------------------------------------------------------------------ */

static void test_mcnemar(void **state) {
    (void)state;
    /* 2 * sum_{i <= min} C(n, i) / 2^n, by Python's math.comb */
    assert_true(fabs(sqz_mcnemar_exact(10, 2) - 0.03857421875) < 1e-12);
    assert_true(fabs(sqz_mcnemar_exact(2, 10) - 0.03857421875) < 1e-12);
    assert_true(fabs(sqz_mcnemar_exact(20, 5) - 0.004077315330505371) < 1e-12);
    assert_true(fabs(sqz_mcnemar_exact(100, 70) - 0.02584438758134169) < 1e-10);
    assert_true(sqz_mcnemar_exact(0, 0) == 1.0);
    assert_true(sqz_mcnemar_exact(5, 5) == 1.0);
    assert_true(sqz_mcnemar_exact(1, 0) == 1.0);
}

static void test_wilson_and_compare(void **state) {
    (void)state;
    double lo, hi;
    /* llama-perplexity --hellaswag printed "240  61.66666667%  [55.3776%, 67.5881%]" for 148 of 240 */
    sqz_wilson95(148, 240, &lo, &hi);
    assert_true(fabs(lo - 0.553776) < 5e-7 && fabs(hi - 0.675881) < 5e-7);
    /* a hand-made paired table: both right 5, model only 10, base only 2, neither 3 */
    sqz_task_outcome om[20], ob[20];
    memset(om, 0, sizeof om);
    memset(ob, 0, sizeof ob);
    for (int i = 0; i < 20; i++) {
        om[i].correct = i < 15;
        ob[i].correct = i < 5 || (i >= 15 && i < 17);
        om[i].choice = i % 3;
        ob[i].choice = i < 10 ? i % 3 : 0;
    }
    sqz_task_result m = {.n = 20, .outcomes = om}, b = {.n = 20, .outcomes = ob};
    sqz_task_delta d;
    SQZ_ASSERT_OK(sqz_task_compare(&m, &b, false, &d));
    assert_int_equal(d.both, 5);
    assert_int_equal(d.only_model, 10);
    assert_int_equal(d.only_base, 2);
    assert_int_equal(d.neither, 3);
    assert_true(fabs(d.delta - 8.0 / 20) < 1e-12);
    assert_true(fabs(d.p_value - 0.03857421875) < 1e-12);
    /* the same choice: the first 10 (i % 3 both), then i % 3 == 0 of 10..19 (12, 15, 18) */
    assert_true(fabs(d.agree - 13.0 / 20) < 1e-12);
    b.n = 19;
    assert_int_equal(sqz_task_compare(&m, &b, false, &d), SQZ_ERR_INVALID_ARG);
}

/* ---- readers --------------------------------------------------------------------------------- */

static sqz_tasks *parse_ok(sqz_task_kind k, const void *d, size_t n, int64_t limit) {
    sqz_tasks *t = NULL;
    SQZ_ASSERT_OK(sqz_tasks_parse("f.txt", k, d, n, limit, &t));
    return t;
}

/* The file is refused, and the message holds `want`. */
static void refused(sqz_task_kind k, const void *d, size_t n, const char *want) {
    sqz_tasks *t = (sqz_tasks *)1;
    sqz_status st = sqz_tasks_parse("f.txt", k, d, n, 0, &t);
    if (st == SQZ_OK || !strstr(sqz_last_error(), want) || !strstr(sqz_last_error(), "f.txt"))
        fail_msg("wanted a refusal with '%s', got %s: '%s'", want, sqz_status_name(st), sqz_last_error());
    assert_null(t);
}

static void test_hellaswag_file(void **state) {
    (void)state;
    const char *good = "Topic: ctx one\n2\na\nb\nc\nd\nT: ctx two\n0\ne\nf\ng\nh\n";
    sqz_tasks *t = parse_ok(SQZ_TASK_HELLASWAG, good, strlen(good), 0);
    assert_int_equal(sqz_tasks_count(t), 2);
    assert_string_equal(t->t[0].seq[2].text, "Topic: ctx one c");
    assert_int_equal(t->t[0].gold, 2);
    assert_int_equal(t->t[1].gold, 0);
    sqz_tasks_free(t);
    t = parse_ok(SQZ_TASK_HELLASWAG, good, strlen(good), 1);
    assert_int_equal(sqz_tasks_count(t), 1);
    sqz_tasks_free(t);
    refused(SQZ_TASK_HELLASWAG, good, strlen(good) - 2, "11 lines, not a multiple of 6");
    const char *gold = "Topic: ctx\n4\na\nb\nc\nd\n";
    refused(SQZ_TASK_HELLASWAG, gold, strlen(gold), "f.txt:2: task 0's gold index '4'");
    refused(SQZ_TASK_HELLASWAG, "", 0, "no tasks");
}

static void test_winogrande_file(void **state) {
    (void)state;
    const char *good = "index,sentence,option1,option2,answer\n"
                       "0,\"Sarah was better than Maria, so _ got the easy cases.\",Sarah,Maria,2\n"
                       "1,Tom gave _ a book.,Ann,Bob,1\r\n";
    sqz_tasks *t = parse_ok(SQZ_TASK_WINOGRANDE, good, strlen(good), 0);
    assert_int_equal(sqz_tasks_count(t), 2);
    assert_string_equal(t->t[0].seq[1].text, "Sarah was better than Maria, so Maria got the easy cases.");
    assert_string_equal(t->t[0].seq[3].text, "Sarah was better than Maria, so Maria");
    assert_int_equal(t->t[0].gold, 1);
    assert_string_equal(t->t[1].seq[0].text, "Tom gave Ann a book.");
    assert_int_equal(t->t[1].gold, 0);
    sqz_tasks_free(t);
    const char *nob = "0,Tom gave Ann a book.,Ann,Bob,1\n";
    refused(SQZ_TASK_WINOGRANDE, nob, strlen(nob), "f.txt:1: the sentence has no '_'");
    const char *ans = "0,Tom gave _ a book.,Ann,Bob,1\n1,Tom gave _ a book.,Ann,Bob,3\n";
    refused(SQZ_TASK_WINOGRANDE, ans, strlen(ans), "f.txt:2: the answer '3' is not 1 or 2");
    const char *commas = "0,Tom gave _ a book.,Ann,1\n";
    refused(SQZ_TASK_WINOGRANDE, commas, strlen(commas), "f.txt:1: 3 of the 4 commas");
}

static void put_u32(uint8_t **p, uint32_t v) {
    for (int i = 0; i < 4; i++) *(*p)++ = (uint8_t)(v >> (8 * i));
}

static void put_str(uint8_t **p, const char *s) {
    put_u32(p, (uint32_t)strlen(s));
    memcpy(*p, s, strlen(s));
    *p += strlen(s);
}

/* One task: question, mc1 = {a (label 0), b (label 1)}, mc2 = {} ; returns the bytes written. */
static size_t mc_file(uint8_t *buf, uint32_t n_answers, const char *answer1) {
    uint8_t *p = buf;
    put_u32(&p, 1);
    put_u32(&p, 8);
    put_str(&p, "Which?");
    put_u32(&p, n_answers);
    put_str(&p, "no");
    put_str(&p, answer1);
    put_u32(&p, 0);
    put_u32(&p, 1);
    put_u32(&p, 0);
    return (size_t)(p - buf);
}

static void test_multiple_choice_file(void **state) {
    (void)state;
    uint8_t buf[256];
    size_t n = mc_file(buf, 2, "yes");
    sqz_tasks *t = parse_ok(SQZ_TASK_MULTIPLE_CHOICE, buf, n, 0);
    assert_int_equal(t->t[0].n_choices, 2);
    assert_string_equal(t->t[0].seq[1].text, "Which? yes");
    assert_int_equal(t->t[0].labels[1], 1);
    sqz_tasks_free(t);
    refused(SQZ_TASK_MULTIPLE_CHOICE, buf, n - 3, "task 0: mc2 at byte");
    refused(SQZ_TASK_MULTIPLE_CHOICE, buf, 26, "task 0: an answer of 2 bytes at byte 26 runs past the end");
    refused(SQZ_TASK_MULTIPLE_CHOICE, buf, 3, "too short for the task count");
    uint8_t many[8] = {0xff, 0xff, 0xff, 0x0f, 8, 0, 0, 0};
    refused(SQZ_TASK_MULTIPLE_CHOICE, many, sizeof many, "268435455 tasks need");
    n = mc_file(buf, 200, "yes");
    refused(SQZ_TASK_MULTIPLE_CHOICE, buf, n, "mc1 has 200 answers (at most 100)");
    n = mc_file(buf, 2, "");
    refused(SQZ_TASK_MULTIPLE_CHOICE, buf, n, "mc1's answer 1 is empty");
    buf[4] = 200; /* the offset of task 0 beyond the file */
    n = mc_file(buf, 2, "yes");
    buf[4] = 200;
    refused(SQZ_TASK_MULTIPLE_CHOICE, buf, n, "task 0's offset 200 lies outside");
}

static void test_jsonl_file(void **state) {
    (void)state;
    const char *good = "{\"context\": \"The sky is \", \"choices\": [\"blue\", \"green\"], \"gold\": 0}\n\n"
                       "{\"context\": \"Two plus two\", \"choices\": [\"is five\", \"is four\", \"is\"], \"gold\": 1}\n";
    sqz_tasks *t = parse_ok(SQZ_TASK_JSONL, good, strlen(good), 0);
    assert_int_equal(sqz_tasks_count(t), 2);
    /* the context's trailing space moves into the continuation, then " " + choice (lm-eval) */
    assert_string_equal(t->t[0].seq[0].text, "The sky is  blue");
    assert_string_equal(t->t[0].seq[2].text, "The sky is");
    assert_int_equal((int)t->t[1].choice_bytes[1], 7);
    sqz_tasks_free(t);
    const char *g = "{\"context\": \"a\", \"choices\": [\"b\", \"c\"], \"gold\": 2}\n";
    refused(SQZ_TASK_JSONL, g, strlen(g), "f.txt:1: \"gold\" is not the index");
    /* beyond int's range: refused before any conversion (fuzz_tasks found 8.9e120 converted to int) */
    const char *huge = "{\"context\": \"a\", \"choices\": [\"b\", \"c\"], \"gold\": 8.9e120}\n";
    refused(SQZ_TASK_JSONL, huge, strlen(huge), "f.txt:1: \"gold\" is not the index");
    const char *neg = "{\"context\": \"a\", \"choices\": [\"b\", \"c\"], \"gold\": -3e10}\n";
    refused(SQZ_TASK_JSONL, neg, strlen(neg), "f.txt:1: \"gold\" is not the index");
    const char *c = "{\"context\": \"a\", \"gold\": 0}\n";
    refused(SQZ_TASK_JSONL, c, strlen(c), "f.txt:1: \"choices\" is not an array");
    const char *bad = "{\"context\": \"a\", \"choices\": [\"b\", \"c\"], \"gold\": 0}\n{\"context\": \n";
    refused(SQZ_TASK_JSONL, bad, strlen(bad), "f.txt:2: not JSON");
}

/* ---- batched sequences ----------------------------------------------------------------------- */

typedef struct fixture {
    sqz_model *m;
    sqz_tokenizer *tok;
    sqz_session *s;
} fixture;

static int setup(void **state) {
    const char *path = sqz_test_data("models/stories260K/stories260K.bin");
    fixture *f = calloc(1, sizeof *f);
    *state = f;
    if (!sqz_test_exists(path)) return 0;
    sqz_session_opts so = sqz_session_default_opts();
    so.max_tokens = 256;
    so.n_threads = 2;
    if (sqz_model_open(path, NULL, &f->m) != SQZ_OK || sqz_tokenizer_new(&f->m->vocab, &f->tok) != SQZ_OK ||
        sqz_session_new(f->m, &so, &f->s) != SQZ_OK)
        return -1;
    return 0;
}

static int teardown(void **state) {
    fixture *f = *state;
    sqz_session_free(f->s);
    sqz_tokenizer_free(f->tok);
    sqz_model_free(f->m);
    free(f);
    return 0;
}

static float max_diff(const float *a, const float *b, size_t n) {
    float d = 0;
    for (size_t i = 0; i < n; i++) d = fabsf(a[i] - b[i]) > d ? fabsf(a[i] - b[i]) : d;
    return d;
}

static void test_spans_equal_alone(void **state) {
    fixture *f = *state;
    if (!f->m) SQZ_SKIP("stories260K not found");
    const int64_t V = f->m->hp.vocab_size;
    /* prefix P (5 tokens), endings A (3) and B (4) after it, and an independent root R (6) */
    const int32_t P[5] = {1, 403, 261, 300, 9}, A[3] = {40, 41, 42}, B[4] = {77, 78, 79, 80}, R[6] = {1, 5, 6, 7, 8, 9};
    int32_t win[18], pa[8], pb[9];
    memcpy(win, P, sizeof P), memcpy(win + 5, A, sizeof A), memcpy(win + 8, B, sizeof B), memcpy(win + 12, R, sizeof R);
    memcpy(pa, P, sizeof P), memcpy(pa + 5, A, sizeof A), memcpy(pb, P, sizeof P), memcpy(pb + 5, B, sizeof B);
    const sqz_span sp[4] = {{0, 5, -1}, {5, 3, 0}, {8, 4, 0}, {12, 6, -1}};
    const int64_t rows[18] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17};
    float *lw = malloc(18 * (size_t)V * sizeof *lw), *la = malloc(9 * (size_t)V * sizeof *la);
    SQZ_ASSERT_OK(sqz_forward_spans(f->s, win, 18, sp, 4, rows, 18, lw));
    SQZ_ASSERT_OK(sqz_forward(f->s, pa, 8, 0, 0, la));
    assert_true(max_diff(lw, la, 8 * (size_t)V) < 1e-4f); /* P then A */
    SQZ_ASSERT_OK(sqz_forward(f->s, pb, 9, 0, 5, la));
    assert_true(max_diff(lw + 8 * V, la, 4 * (size_t)V) < 1e-4f); /* B after P */
    SQZ_ASSERT_OK(sqz_forward(f->s, R, 6, 0, 0, la));
    assert_true(max_diff(lw + 12 * V, la, 6 * (size_t)V) < 1e-4f); /* R alone */
    /* bad spans */
    const sqz_span gap[2] = {{0, 5, -1}, {6, 3, 0}};
    assert_int_equal(sqz_forward_spans(f->s, win, 9, gap, 2, rows, 1, lw), SQZ_ERR_INVALID_ARG);
    const sqz_span deep[3] = {{0, 5, -1}, {5, 3, 0}, {8, 4, 1}};
    assert_int_equal(sqz_forward_spans(f->s, win, 12, deep, 3, rows, 1, lw), SQZ_ERR_INVALID_ARG);
    const int64_t far[1] = {12};
    assert_int_equal(sqz_forward_spans(f->s, win, 12, sp, 3, far, 1, lw), SQZ_ERR_INVALID_ARG);
    free(lw);
    free(la);
}

/* Mean log-probability of seq's tokens from `from` on, running it alone. */
static double mean_lp_alone(fixture *f, const int32_t *ids, size_t n, size_t from) {
    const int64_t V = f->m->hp.vocab_size;
    float *l = malloc(n * (size_t)V * sizeof *l);
    SQZ_ASSERT_OK(sqz_forward(f->s, ids, (int64_t)n, 0, 0, l));
    double sum = 0;
    for (size_t t = from; t < n; t++) {
        const float *x = l + (t - 1) * (size_t)V;
        double mx = x[0], s = 0;
        for (int64_t v = 1; v < V; v++) mx = x[v] > mx ? x[v] : mx;
        for (int64_t v = 0; v < V; v++) s += exp(x[v] - mx);
        sum += x[ids[t]] - mx - log(s);
    }
    free(l);
    return sum / (double)(n - from);
}

static void test_tasks_batched_as_alone(void **state) {
    fixture *f = *state;
    if (!f->m) SQZ_SKIP("stories260K not found");
    const char *file = "Once upon a time there was a little girl\n1\nwho ate a cat.\nnamed Lily. She liked to play.\n"
                       "went home\nsaw the sun\nThe dog ran\n0\nto the park and played.\nsky blue\nhappy\n"
                       "into the big tree with a boy named Tim.\n";
    sqz_tasks *t = parse_ok(SQZ_TASK_HELLASWAG, file, strlen(file), 0);
    SQZ_ASSERT_OK(sqz_tasks_tokenize(t, f->tok));
    sqz_task_result r;
    SQZ_ASSERT_OK(sqz_eval_tasks(f->s, t, NULL, &r));
    assert_int_equal(r.n, 2);
    for (int i = 0; i < 2; i++) {
        const sqz__task *k = &t->t[i];
        size_t cp = 0, m = k->seq[0].n_ids;
        for (int s = 1; s < 4; s++) m = k->seq[s].n_ids < m ? k->seq[s].n_ids : m;
        while (cp < m && k->seq[1].ids[cp] == k->seq[0].ids[cp] && k->seq[2].ids[cp] == k->seq[0].ids[cp] &&
               k->seq[3].ids[cp] == k->seq[0].ids[cp])
            cp++;
        double sc[4];
        int best = 0;
        for (int s = 0; s < 4; s++) {
            sc[s] = mean_lp_alone(f, k->seq[s].ids, k->seq[s].n_ids, cp);
            if (sc[s] > sc[best]) best = s;
        }
        assert_int_equal(r.outcomes[i].choice, best);
        assert_true(fabs(r.outcomes[i].best - sc[best]) < 1e-4);
    }
    sqz_task_result_free(&r);
    sqz_tasks_free(t);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mcnemar),
        cmocka_unit_test(test_wilson_and_compare),
        cmocka_unit_test(test_hellaswag_file),
        cmocka_unit_test(test_winogrande_file),
        cmocka_unit_test(test_multiple_choice_file),
        cmocka_unit_test(test_jsonl_file),
        cmocka_unit_test(test_spans_equal_alone),
        cmocka_unit_test(test_tasks_batched_as_alone),
    };
    return sqz_test_run(tests, setup, teardown);
}

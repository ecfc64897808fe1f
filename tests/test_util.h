/* tests/test_util.h - what the C tests share: where the real models are, skipping. */
#ifndef SQZ_TEST_UTIL_H
#define SQZ_TEST_UTIL_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "sqz/sqz.h"

/* ctest's skip code (SKIP_RETURN_CODE 77). */
#define SQZ_TEST_SKIP 77

/* The shared/ folder with models/ and data/: $SQZ_TEST_DATA, else <source>/../shared. */
const char *sqz_test_data_dir(void);
/* <data dir>/rel in a static buffer (one of 8 rotating buffers). */
const char *sqz_test_data(const char *rel);
/* The PyPI model packages: $SQZ_PYMODELS, else ~/.cache/sqz/pymodels. */
const char *sqz_test_pymodels_dir(void);
/* SmolLM2-135M-Instruct Q4_1 GGUF path, or NULL when not installed. */
const char *sqz_test_smollm2(void);
/* Qwen2.5-Coder-0.5B GGUF path (SQZ_WITH_EDGE_MODELS=1 scripts/setup.sh), or NULL. */
const char *sqz_test_qwen05(void);
/* all-MiniLM-L6-v2 HF directory, or NULL when not installed. */
const char *sqz_test_minilm(void);
/* A fresh empty temporary directory (removed by the OS's tmp cleaning; tests rm their files). */
const char *sqz_test_tmpdir(void);
/* True if the file exists. */
int sqz_test_exists(const char *path);

/* Asserts that a status is SQZ_OK, printing the library's message otherwise. */
#define SQZ_ASSERT_OK(expr)                                                                   \
    do {                                                                                      \
        sqz_status sqz__st = (expr);                                                          \
        if (sqz__st != SQZ_OK) fail_msg("%s -> %s: %s", #expr, sqz_status_name(sqz__st), sqz_last_error()); \
    } while (0)

/* ---- skipping: no executable passes without having tested anything ----
 * A case that cannot run (its model, text or device is missing) skips with SQZ_SKIP or
 * SQZ_SKIP_UNLESS, saying why. main() runs its cases with sqz_test_run (not
 * cmocka_run_group_tests), which returns SQZ_TEST_SKIP when every case skipped - ctest then
 * reports the test skipped, never passed - and otherwise lists the cases that skipped and why.
 * An executable that exists for some data (its few cases without it prove little on their
 * own) checks that data first with sqz_test_needs and returns SQZ_TEST_SKIP without it. */

/* Prints why the current case skips and records it for sqz_test_run's summary. */
void sqz_test_skip_note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Skips the current case (reported skipped), printf-style reason. */
#define SQZ_SKIP(...)                                                                         \
    do {                                                                                      \
        sqz_test_skip_note(__VA_ARGS__);                                                      \
        _skip(__FILE__, __LINE__);                                                            \
    } while (0)

/* cmocka's skip() counts too (a case skipped without a reason is still a case not run). */
#undef skip
#define skip() SQZ_SKIP("skip() called without a reason")

/* Skips the current case when a file is missing (NULL: a model package not installed). */
#define SQZ_SKIP_UNLESS(path)                                                                 \
    do {                                                                                      \
        const char *sqz__path = (path);                                                       \
        if (!sqz__path) SQZ_SKIP("model not installed under %s", sqz_test_pymodels_dir());    \
        if (!sqz_test_exists(sqz__path)) SQZ_SKIP("%s not found", sqz__path);                 \
    } while (0)

/* Runs a group of cases as cmocka_run_group_tests does and returns main's exit status: 1 when
 * a case failed, SQZ_TEST_SKIP when every case skipped, else 0 (after listing the cases that
 * skipped, with why). At most 64 cases a group. */
int sqz_test_run_group(const char *group, const struct CMUnitTest *tests, size_t n, CMFixtureFunction setup,
                       CMFixtureFunction teardown);
#define sqz_test_run(tests, setup, teardown) sqz_test_run_name(#tests, tests, setup, teardown)
#define sqz_test_run_name(name, tests, setup, teardown)                                       \
    sqz_test_run_group(name, tests, sizeof(tests) / sizeof((tests)[0]), setup, teardown)

/* For main(): true when `path` (may be NULL: not installed) exists; otherwise prints that every
 * case needs it, and main returns SQZ_TEST_SKIP. */
int sqz_test_needs(const char *path);

#endif

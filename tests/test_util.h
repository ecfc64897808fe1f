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

/* Skips the current cmocka test (reported as skipped) when a file is missing. */
#define SQZ_SKIP_UNLESS(path)                                                                 \
    do {                                                                                      \
        if (!(path) || !sqz_test_exists(path)) { print_message("skipping: %s not found\n", (path) ? (path) : "model"); skip(); } \
    } while (0)

#endif

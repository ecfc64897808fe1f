/* tests/fuzz/fuzz_llama2c.c - libFuzzer harness for the llama2.c checkpoint and tokenizer.bin
 * readers (formats/llama2c.c, formats/tokenizer_llama2c.c), and the tokenizer.json writer and
 * reader on every vocab the tokenizer reader accepts.
 *
 * The readers take paths (they map the file), so the input goes into an anonymous in-memory
 * file (memfd) opened through /proc/self/fd/N: no tokenizer can be found beside it. Each input
 * is tried as a checkpoint (tensors the reader accepts are read end to end, then validated) and
 * as a tokenizer.bin of 8 and of 512 tokens; an accepted vocab is written as tokenizer.json,
 * read back, and must come back with the same tokens, scores (bit exact; NaN as NaN) and
 * types. Every failure must leave a message. Seeds: tests/data/llama2c/, tests/data/hostile/llama2c/. */
#define _GNU_SOURCE
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "formats/formats_internal.h"

static int g_fd = -1;
static char g_path[64];

#define check(cond)                                                                             \
    do {                                                                                        \
        if (!(cond)) {                                                                          \
            fprintf(stderr, "fuzz_llama2c.c:%d: %s failed (%s)\n", __LINE__, #cond, sqz_last_error()); \
            abort();                                                                            \
        }                                                                                       \
    } while (0)

static void roundtrip(const sqz_vocab *v) {
    char *json = sqz__tokenizer_json_write(v);
    check(json != NULL);
    sqz_vocab back;
    sqz_vocab_init(&back);
    check(sqz__tokenizer_json_read(json, strlen(json), NULL, "fuzz.json", &back) == SQZ_OK);
    check(back.kind == v->kind && back.n_tokens == v->n_tokens && back.scores && back.types);
    for (int32_t i = 0; i < v->n_tokens; i++) {
        check(strcmp(back.tokens[i], v->tokens[i]) == 0);
        check(back.types[i] == v->types[i]);
        /* bit exact, except that every NaN comes back as the canonical NaN */
        check(isnan(v->scores[i]) ? isnan(back.scores[i])
                                  : memcmp(&back.scores[i], &v->scores[i], sizeof(float)) == 0);
    }
    sqz_vocab_clear(&back);
    free(json);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (g_fd < 0) {
        g_fd = memfd_create("fuzz_llama2c", 0);
        if (g_fd < 0) abort();
        snprintf(g_path, sizeof g_path, "/proc/self/fd/%d", g_fd);
    }
    if (ftruncate(g_fd, 0) != 0 || pwrite(g_fd, data, size, 0) != (ssize_t)size) abort();

    sqz_clear_error();
    sqz_model *m = sqz_model_new();
    if (!m) return 0;
    sqz_status s = sqz__llama2c_open(g_path, NULL, m);
    if (s == SQZ_OK) {
        volatile uint8_t sink = 0;
        for (int64_t i = 0; i < m->n_tensors; i++) {
            const uint8_t *p = m->tensors[i].data;
            for (size_t k = 0; k < m->tensors[i].nbytes; k++) sink ^= p[k];
        }
        (void)sink;
        s = sqz_model_validate(m);
        check(s == SQZ_OK); /* the reader's shapes always satisfy the model's checks */
    }
    check(s == SQZ_OK || sqz_last_error()[0] != 0); /* every failure must say why */
    sqz_model_free(m);

    static const int32_t sizes[] = {8, 512};
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        sqz_clear_error();
        sqz_vocab v;
        sqz_vocab_init(&v);
        s = sqz__llama2c_tokenizer_read(g_path, sizes[i], &v);
        check(s == SQZ_OK || (sqz_last_error()[0] != 0 && v.n_tokens == 0 && !v.tokens));
        if (s == SQZ_OK) roundtrip(&v);
        sqz_vocab_clear(&v);
    }
    return 0;
}

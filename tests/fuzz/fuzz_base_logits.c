/* tests/fuzz/fuzz_base_logits.c - libFuzzer harness for the base logits reader
 * (eval/logits_file.c, the SQZLOGB1 file that `sqz eval --save-base` writes and
 * `sqz eval --base-logits` reads).
 *
 * Each input is read twice by sqz__logits_reader_open_mem (the whole reader after the mmap):
 * as it is, then with the trailing FNV-1a checksum of a version-2 file recomputed, so that
 * mutations reach the row checks behind the checksum. When the reader accepts a file, every
 * token is read, and every row is decoded and scored as eval scores it (sqz__kld_stored against
 * a model row): the KL divergence must be finite and >= 0. Every failure must leave a message.
 * Seeds: tests/data/base_logits/ (small files from `sqz eval --save-base` on stories260K). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eval/eval_internal.h"

enum { HEADER = 44, TRAILER = 8 };

static void fix_checksum(uint8_t *d, size_t size) {
    if (size < HEADER + TRAILER || memcmp(d, "SQZLOGB1", 8) != 0 || d[8] != 2) return;
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = HEADER; i < size - TRAILER; i++) h = (h ^ d[i]) * 0x100000001b3ull;
    for (int i = 0; i < 8; i++) d[size - TRAILER + i] = (uint8_t)(h >> (8 * i));
}

static void run(const uint8_t *d, size_t size) {
    sqz_clear_error();
    sqz__logits_reader r;
    if (sqz__logits_reader_open_mem("fuzz.logits", d, size, &r) != SQZ_OK) {
        if (getenv("SQZ_FUZZ_VERBOSE")) fprintf(stderr, "refused: %s\n", sqz_last_error());
        if (sqz_last_error()[0] == 0) abort(); /* every failure must say why */
        return;
    }
    volatile uint32_t sink = 0;
    for (uint64_t i = 0; i < r.h.n_tokens; i++) sink += sqz__rd_u32(r.tokens + 4 * i);
    if (r.n_rows) {
        /* rows exist, so n_vocab is bounded by the input's size */
        float *model = malloc((size_t)r.h.n_vocab * sizeof *model);
        if (!model) abort();
        for (uint32_t v = 0; v < r.h.n_vocab; v++) model[v] = (float)(v % 7) - 3.0f;
        sqz__lsm lm = sqz__log_softmax(model, r.h.n_vocab);
        for (uint64_t i = 0; i < r.n_rows; i++) {
            sqz__base_row b = sqz__logits_reader_row(&r, i);
            if (b.argmax < 0 || (uint32_t)b.argmax >= r.h.n_vocab) abort();
            double k = sqz__kld_stored(&b, r.h.n_vocab, model, &lm);
            if (!isfinite(k) || k < 0 || !isfinite(b.nll)) abort(); /* the reader let a row through that eval cannot score */
        }
        free(model);
    }
    (void)sink;
    sqz__logits_reader_close(&r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    uint8_t *d = malloc(size ? size : 1);
    if (!d) return 0;
    memcpy(d, data, size);
    run(d, size);
    fix_checksum(d, size);
    run(d, size);
    free(d);
    return 0;
}

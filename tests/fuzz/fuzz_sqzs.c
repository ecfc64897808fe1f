/* tests/fuzz/fuzz_sqzs.c - libFuzzer harness for the calibration statistics reader
 * (calib/stats_read.c, the .sqzs file that `sqz calibrate -o` writes and `sqz compress
 * --stats` reads).
 *
 * Each input is parsed twice by sqz__calib_stats_read_mem (the whole reader after the mmap):
 * as it is (the checksum paths), then with the header's and every record's CRC-32 recomputed,
 * so that mutations reach the record parsers behind the checksums. When the reader accepts a
 * file every array it returns is read end to end at the length it claims (an overrun crashes
 * under ASan) and every block is found again by its layer. Every failure must leave a message.
 * Seeds: tests/data/sqzs/ (small files from `sqz calibrate` on stories260K). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "calib/calib_internal.h"

static uint64_t rd64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
    return v;
}
static void wr32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}

/* Header CRC (bytes 0..100 at 100) and each record's (tag, u32, u64 length, payload, crc32). */
static void fix_crcs(uint8_t *d, size_t size) {
    if (size < 104) return;
    wr32(d + 100, (uint32_t)crc32(0L, d, 100));
    size_t at = 104;
    while (size - at >= 16) {
        uint64_t len = rd64(d + at + 8);
        if (len > size - at - 16 || size - at - 16 - len < 4) return;
        wr32(d + at + 16 + len, (uint32_t)crc32(0L, d + at + 16, (uInt)len));
        at += 16 + (size_t)len + 4;
    }
}

static void sum_f32(const float *p, int64_t n, volatile float *sink) {
    for (int64_t i = 0; p && i < n; i++) *sink += p[i];
}

static void run(const uint8_t *d, size_t size) {
    sqz_clear_error();
    sqz_calib_stats *st = NULL;
    sqz_status s = sqz__calib_stats_read_mem("fuzz.sqzs", d, size, &st);
    if (s != SQZ_OK) {
        if (st || sqz_last_error()[0] == 0) abort(); /* nothing returned, and a message */
        if (getenv("SQZ_FUZZ_VERBOSE")) fprintf(stderr, "refused: %s\n", sqz_last_error());
        return;
    }
    volatile float sink = 0;
    for (int64_t b = 0; b < st->n_blocks; b++) {
        const sqz_calib_block *blk = &st->blocks[b];
        if (sqz_calib_stats_block(st, blk->layer) != blk) abort(); /* layers are unique */
        for (int i = 0; i < blk->n_inputs; i++) {
            const sqz_qstats *q = &blk->in[i].st;
            int64_t k = q->n_in;
            sum_f32(q->x2, k, &sink);
            sum_f32(q->absmax, k, &sink);
            sum_f32(q->absmean, k, &sink);
            sum_f32(q->x, q->n_x * k, &sink);
            for (int64_t j = 0; q->xtx && j < k * k; j++) sink += (float)q->xtx[j];
            if (q->hist)
                for (int32_t j = 0; j < q->hist->n_bins; j++) sink += (float)q->hist->counts[j];
        }
    }
    (void)sink;
    sqz_calib_stats_free(st);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    uint8_t *d = malloc(size ? size : 1);
    if (!d) return 0;
    memcpy(d, data, size);
    run(d, size);
    fix_crcs(d, size);
    run(d, size);
    free(d);
    return 0;
}

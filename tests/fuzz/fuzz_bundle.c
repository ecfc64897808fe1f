/* tests/fuzz/fuzz_bundle.c - libFuzzer harness for the bundle readers (edge/bundle.c,
 * bundle_model.c, model.c, the tokenizer tables; formats/bundle_read.c).
 *
 * Each input is read twice: as it is (the checksum paths), and with every CRC-32 it carries
 * recomputed, so that mutations reach the parsers behind the checksums. Each time: sqz's
 * reader (every tensor it accepts read end to end, then sqz_model_validate; every failure
 * must leave a message), and the edge runtime: open, sqze_model_memory for 8 positions, and
 * when that is at most 64 MB, sqze_model_init in an arena of exactly that size, a prompt
 * tokenized and two positions run, and a token sampled. Seeds: tests/data/bundle/ (tiny
 * bundles from tests/data/llama2c: f32, signed + deflated, sqz's int8) and
 * tests/data/hostile/bundle/. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "edge/crypto.h"
#include "edge/sqz_edge.h"
#include "formats/bundle_internal.h"

static uint64_t rd64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
    return v;
}
static uint32_t rd32(const uint8_t *p) { return (uint32_t)p[0] | p[1] << 8 | p[2] << 16 | (uint32_t)p[3] << 24; }
static void wr32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}

/* Recomputes the CRCs of whatever lies inside the buffer. */
static void fix_crcs(uint8_t *d, size_t size) {
    if (size < SQZB_HEADER_SIZE) return;
    uint32_t n = rd32(d + 16), es = rd32(d + 20);
    uint64_t to = rd64(d + 24), so = rd64(d + 40);
    if (es >= SQZB_ENTRY_SIZE && es <= 4096 && n <= SQZB_MAX_SECTIONS && to <= size &&
        (uint64_t)n * es <= size - to) {
        for (uint32_t i = 0; i < n; i++) {
            uint8_t *e = d + to + (size_t)i * es;
            uint64_t off = rd64(e + 8), len = rd64(e + 16);
            if (off <= size && len <= size - off) wr32(e + 32, sqze_crc32(0, d + off, (size_t)len));
        }
        wr32(d + 52, sqze_crc32(0, d + to, (size_t)n * es));
    }
    if (so && so <= size && size - so >= SQZB_SIG_SIZE) wr32(d + 56, sqze_crc32(0, d + so, SQZB_SIG_SIZE));
    wr32(d + 60, sqze_crc32(0, d, 60));
}

static void run_sqz(const uint8_t *d, size_t size) {
    sqz_clear_error();
    sqz_model *m = sqz_model_new();
    if (!m) return;
    sqz_status s = sqz__bundle_read_mem("fuzz.sqzb", d, size, m);
    if (s == SQZ_OK) {
        volatile uint8_t sink = 0;
        for (int64_t i = 0; i < m->n_tensors; i++) {
            const uint8_t *p = m->tensors[i].data;
            for (size_t k = 0; k < m->tensors[i].nbytes; k++) sink ^= p[k];
        }
        (void)sink;
        s = sqz_model_validate(m);
    }
    if (s != SQZ_OK && sqz_last_error()[0] == 0) abort(); /* every failure must say why */
    sqz_model_free(m);
}

static void run_edge(const uint8_t *d, size_t size) {
    char err[256] = "";
    sqze_bundle b;
    if (sqze_bundle_open(&b, d, size, NULL, err, sizeof err)) {
        if (!err[0]) abort();
        return;
    }
    size_t need = sqze_model_memory(&b, 8);
    if (!need || need > ((size_t)64 << 20)) return;
    void *arena = NULL;
    if (posix_memalign(&arena, 64, need)) return;
    sqze_model m;
    if (sqze_model_init(&m, &b, 8, arena, need, err, sizeof err) == 0) {
        int32_t ids[8];
        int64_t n = sqze_tokenize(&m, "Hi 12 a'bc\xe2\x96\x81z", 15, 1, ids, 6, err, sizeof err);
        int32_t tok = n > 0 ? ids[0] : 0;
        for (uint32_t pos = 0; pos < 2; pos++) {
            const float *lg = sqze_forward(&m, tok, pos);
            if (!lg) break;
            uint64_t rng = 1;
            tok = sqze_sample(&m, m.logits, pos ? 0.8f : 0.0f, 0.9f, &rng);
            char piece[64];
            (void)sqze_token_text(&m, 1, tok, piece, sizeof piece);
        }
    } else if (!err[0]) {
        abort();
    }
    free(arena);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    /* a 64-byte aligned copy: tensors are used in place and must be aligned as in a mapping */
    uint8_t *d = NULL;
    if (posix_memalign((void **)&d, 64, size ? size : 1)) return 0;
    memcpy(d, data, size);
    run_sqz(d, size);
    run_edge(d, size);
    fix_crcs(d, size);
    run_sqz(d, size);
    run_edge(d, size);
    free(d);
    return 0;
}

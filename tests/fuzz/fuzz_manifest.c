/* tests/fuzz/fuzz_manifest.c - libFuzzer harness for a bundle's manifest (the JSON provenance
 * section, formats/bundle_meta.c; read back by edge/bundle.c and formats/bundle_read.c).
 *
 * Neither reader parses the manifest: sqz-edge --manifest prints its bytes, sqz's reader skips
 * it. What must hold, whatever the JSON: (1) a bundle whose manifest section holds these bytes,
 * plain or deflated, with every offset and CRC right, opens in the edge runtime (the manifest
 * is never needed to run), sqze_bundle_find returns exactly those bytes, and sqz's reader
 * (which inflates a deflated manifest) fails only with a message (the bundle has no
 * hyperparameters); (2) the only code that parses manifest JSON, sqz__bundle_manifest, which
 * keeps a compress report (`sqz export --provenance R.json`) in it, either refuses the text
 * with a message or writes a manifest that is valid JSON whose compress_report is the text's
 * JSON. fuzz_bundle reaches the manifest only behind its CRC and mutates it rarely; here every
 * mutation lands in it. Seeds: tests/data/manifest/ (manifests of bundles sqz export wrote,
 * with and without a provenance report). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include <cjson/cJSON.h>

#include "edge/crypto.h"
#include "edge/sqz_edge.h"
#include "formats/bundle_internal.h"

static void wr32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static void wr64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}

enum { SEC_AT = (SQZB_HEADER_SIZE + SQZB_ENTRY_SIZE + SQZB_ALIGN - 1) / SQZB_ALIGN * SQZB_ALIGN };

/* A one-section bundle: header, table, the manifest's stored bytes (deflated when asked). */
static void container(const uint8_t *data, size_t size, bool deflate) {
    const uint8_t *stored = data;
    size_t n = size;
    uint8_t *z = NULL;
    if (deflate) {
        uLongf zn = compressBound((uLong)size);
        if (!(z = malloc(zn)) || compress2(z, &zn, data, (uLong)size, 1) != Z_OK) abort();
        stored = z;
        n = zn;
    }
    size_t total = SEC_AT + n;
    uint8_t *b = calloc(1, total);
    if (!b) abort();
    memcpy(b, SQZB_MAGIC, 8);
    b[8] = SQZB_MAJOR;
    b[10] = SQZB_MINOR;
    wr32(b + 16, 1);
    wr32(b + 20, SQZB_ENTRY_SIZE);
    wr64(b + 24, SQZB_HEADER_SIZE);
    wr64(b + 32, total);
    uint8_t *e = b + SQZB_HEADER_SIZE;
    wr32(e, SQZB_KIND_MANIFEST);
    wr32(e + 4, deflate ? SQZB_S_DEFLATE : 0);
    wr64(e + 8, SEC_AT);
    wr64(e + 16, n);
    wr64(e + 24, size);
    memcpy(b + SEC_AT, stored, n);
    wr32(e + 32, sqze_crc32(0, b + SEC_AT, n));
    wr32(e + 40, UINT32_MAX); /* layer -1 */
    uint8_t h[64];
    sqze_sha512 sh;
    sqze_sha512_init(&sh);
    sqze_sha512_update(&sh, b + SEC_AT, n);
    sqze_sha512_final(&sh, h);
    memcpy(e + 64, h, SQZB_DIGEST_SIZE);
    wr32(b + 52, sqze_crc32(0, e, SQZB_ENTRY_SIZE));
    wr32(b + 60, sqze_crc32(0, b, 60));

    char err[256] = "";
    sqze_bundle bd;
    if (sqze_bundle_open(&bd, b, total, NULL, err, sizeof err)) abort(); /* the manifest cannot stop a bundle */
    sqze_section s;
    if (sqze_bundle_find(&bd, SQZB_KIND_MANIFEST, &s) != 0 || s.stored != n || s.size != size ||
        memcmp(s.data, stored, n) != 0)
        abort(); /* what sqz-edge --manifest prints is what was stored */

    sqz_clear_error();
    sqz_model *m = sqz_model_new();
    if (!m) abort();
    if (sqz__bundle_read_mem("fuzz.sqzb", b, total, m) == SQZ_OK || sqz_last_error()[0] == 0) abort();
    sqz_model_free(m);
    free(b);
    free(z);
}

/* The manifest builder with the text as the provenance report. */
static void builder(const uint8_t *data, size_t size) {
    char *text = malloc(size + 1);
    if (!text) abort();
    memcpy(text, data, size);
    text[size] = 0;
    sqz_model *m = sqz_model_new();
    if (!m) abort();
    snprintf(m->hp.arch, sizeof m->hp.arch, "llama");
    sqz_save_opts o = {.format = SQZ_FORMAT_BUNDLE, .dtype = -1, .provenance_json = text};
    uint8_t *out = NULL;
    size_t n = 0;
    sqz_clear_error();
    cJSON *want = cJSON_Parse(text);
    if (sqz__bundle_manifest(m, &o, &out, &n) != SQZ_OK) {
        if (want || sqz_last_error()[0] == 0) abort(); /* refused only when not JSON, and says so */
    } else {
        cJSON *got = cJSON_ParseWithLength((const char *)out, n);
        if (!got || !want) abort();
        /* the same tree: printed alike (cJSON_Compare is not reflexive for duplicate keys) */
        const cJSON *rep = cJSON_GetObjectItemCaseSensitive(got, "compress_report");
        char *a = rep ? cJSON_PrintUnformatted(rep) : NULL, *b = cJSON_PrintUnformatted(want);
        if (!a || !b || strcmp(a, b) != 0) abort();
        free(a);
        free(b);
        cJSON_Delete(got);
        free(out);
    }
    cJSON_Delete(want);
    sqz_model_free(m);
    free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > ((size_t)1 << 20)) return 0;
    container(data, size, false);
    container(data, size, true);
    builder(data, size);
    return 0;
}

/* tests/fuzz/fuzz_tokenizer_json.c - libFuzzer harness for the HF tokenizer.json reader
 * (formats/tokenizer_json.c) and writer (tokenizer_json_write.c).
 *
 * The input is tokenizer.json, optionally followed by a NUL byte and tokenizer_config.json.
 * Every vocab the reader accepts is synthesised back to tokenizer.json (the verbatim text
 * dropped) and read again: tokens, types and scores (bit exact, NaN as NaN) must come back.
 * Every failure must leave a message. Seeds: tests/data/tokenizer_json/ (BPE with byte fallback,
 * byte-level BPE, WordPiece, Unigram, and sqz's own writer's output; written by
 * make_tokenizer_json_seeds.py), dictionary: tokenizer_json.dict. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/formats_internal.h"

#define check(cond)                                                                                   \
    do {                                                                                              \
        if (!(cond)) {                                                                                \
            fprintf(stderr, "fuzz_tokenizer_json.c:%d: %s failed (%s)\n", __LINE__, #cond, sqz_last_error()); \
            abort();                                                                                  \
        }                                                                                             \
    } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const uint8_t *nul = memchr(data, 0, size);
    size_t len = nul ? (size_t)(nul - data) : size;
    char *cfg = NULL;
    if (nul) {
        cfg = malloc(size - len);
        if (!cfg) return 0;
        memcpy(cfg, nul + 1, size - len - 1);
        cfg[size - len - 1] = 0;
    }
    sqz_clear_error();
    sqz_vocab v;
    sqz_vocab_init(&v);
    sqz_status s = sqz__tokenizer_json_read((const char *)data, len, cfg, "fuzz/tokenizer.json", &v);
    check(s == SQZ_OK || (sqz_last_error()[0] != 0 && v.n_tokens == 0 && !v.tokens));
    if (s == SQZ_OK) {
        free(v.hf_json);
        free(v.hf_config_json);
        v.hf_json = v.hf_config_json = NULL;
        char *json = sqz__tokenizer_json_write(&v);
        char *cj = sqz__tokenizer_config_write(&v);
        check(json && cj);
        sqz_vocab back;
        sqz_vocab_init(&back);
        check(sqz__tokenizer_json_read(json, strlen(json), cj, "fuzz/synth.json", &back) == SQZ_OK);
        check(back.n_tokens == v.n_tokens && (back.scores != NULL) == (v.scores != NULL));
        for (int32_t i = 0; i < v.n_tokens; i++) {
            check(strcmp(back.tokens[i], v.tokens[i]) == 0);
            check(back.types[i] == v.types[i]);
            if (v.scores)
                check(isnan(v.scores[i]) ? isnan(back.scores[i])
                                         : memcmp(&back.scores[i], &v.scores[i], sizeof(float)) == 0);
        }
        sqz_vocab_clear(&back);
        free(json);
        free(cj);
    }
    sqz_vocab_clear(&v);
    free(cfg);
    return 0;
}

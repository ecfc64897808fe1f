/*
 * formats/tokenizer_llama2c.c - llama2.c tokenizer.bin (tokenizer.py export, read by run.c build_tokenizer).
 *
 * Layout (little-endian): int32 max_token_length, then per token, in id order:
 *   float32 score, int32 len, len bytes (no terminator).
 * llama2.c's exporter writes SentencePiece pieces with U+2581 replaced by ' ' and BOS/EOS as
 * "\n<s>\n" / "\n</s>\n". We undo both so the vocab is in SentencePiece/GGUF "llama" form:
 * spaces become U+2581 again (SentencePiece pieces never hold a plain space) and the
 * decorated BOS/EOS become "<s>" / "</s>". Pieces must be valid UTF-8 (every SentencePiece
 * piece is; raw bytes live in the <0xNN> tokens), non-empty and no longer than
 * max_token_length (run.c sizes its merge buffer from it). The file must hold exactly
 * vocab_size tokens.
 */
#include <inttypes.h>
#include <stdlib.h>

#include "formats/formats_internal.h"

#define L2C_MAX_TOKEN_LEN (1 << 16)

static const char SPACE_MARK[] = "\xe2\x96\x81"; /* U+2581 LOWER ONE EIGHTH BLOCK */

/* The piece in SentencePiece form (malloc'd). */
static char *normalise_piece(const uint8_t *b, size_t n) {
    if (n == 5 && memcmp(b, "\n<s>\n", 5) == 0) return sqz__strdup("<s>");
    if (n == 6 && memcmp(b, "\n</s>\n", 6) == 0) return sqz__strdup("</s>");
    size_t spaces = 0;
    for (size_t i = 0; i < n; i++) spaces += b[i] == ' ';
    char *s = sqz__malloc(n + 2 * spaces + 1); /* n <= 2^16: no overflow */
    if (!s) return NULL;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (b[i] == ' ') {
            memcpy(s + k, SPACE_MARK, 3);
            k += 3;
        } else {
            s[k++] = (char)b[i];
        }
    }
    s[k] = 0;
    return s;
}

static bool is_byte_token(const char *s) {
    static const char hex[] = "0123456789ABCDEFabcdef";
    return strlen(s) == 6 && memcmp(s, "<0x", 3) == 0 && s[5] == '>' && s[3] && s[4] && strchr(hex, s[3]) &&
           strchr(hex, s[4]);
}

static int32_t token_type(const char *s) {
    if (strcmp(s, "<unk>") == 0) return SQZ_TOKEN_UNKNOWN;
    if (strcmp(s, "<s>") == 0 || strcmp(s, "</s>") == 0) return SQZ_TOKEN_CONTROL;
    if (is_byte_token(s)) return SQZ_TOKEN_BYTE;
    return SQZ_TOKEN_NORMAL;
}

static sqz_status parse(const char *path, const sqz_mapping *map, int32_t vocab_size, sqz_vocab *v) {
    sqz__reader r;
    sqz__reader_init(&r, map->data, map->size);
    int32_t max_len = (int32_t)sqz__reader_u32(&r);
    SQZ_RETURN_IF(!r.ok, SQZ_ERR_FORMAT, "%s: %zu bytes, too short for the tokenizer header", path, map->size);
    SQZ_RETURN_IF(max_len <= 0 || max_len > L2C_MAX_TOKEN_LEN, SQZ_ERR_FORMAT,
                  "%s: max_token_length %" PRId32 " out of range", path, max_len);
    /* Each token needs at least 9 bytes: cap the count before allocating. */
    SQZ_RETURN_IF(vocab_size <= 0 || vocab_size > SQZ__MAX_VOCAB || (size_t)vocab_size > sqz__reader_left(&r) / 9,
                  SQZ_ERR_FORMAT, "%s: %zu bytes cannot hold %" PRId32 " tokens", path, map->size, vocab_size);
    v->kind = SQZ_VOCAB_SPM;
    v->tokens = sqz__calloc((size_t)vocab_size, sizeof *v->tokens);
    v->scores = sqz__calloc((size_t)vocab_size, sizeof *v->scores);
    v->types = sqz__calloc((size_t)vocab_size, sizeof *v->types);
    if (!v->tokens || !v->scores || !v->types) return SQZ_ERR_NOMEM;
    v->n_tokens = vocab_size; /* calloc'd: sqz_vocab_clear frees what was filled */
    v->max_token_len = max_len;
    for (int32_t i = 0; i < vocab_size; i++) {
        size_t at = r.pos;
        float score = sqz__reader_f32(&r);
        int32_t len = (int32_t)sqz__reader_u32(&r);
        SQZ_RETURN_IF(!r.ok, SQZ_ERR_FORMAT, "%s: token %" PRId32 ": truncated at byte %zu (file has %zu)", path, i,
                      at, map->size);
        SQZ_RETURN_IF(len <= 0 || len > max_len, SQZ_ERR_FORMAT,
                      "%s: token %" PRId32 " at byte %zu: length %" PRId32 " outside [1, max_token_length %" PRId32
                      "]", path, i, at, len, max_len);
        const uint8_t *b = sqz__reader_bytes(&r, (size_t)len);
        SQZ_RETURN_IF(!b, SQZ_ERR_FORMAT, "%s: token %" PRId32 " at byte %zu: %" PRId32 " bytes exceed the %zu left",
                      path, i, at, len, map->size - at - 8);
        SQZ_RETURN_IF(!sqz__utf8_valid((const char *)b, (size_t)len), SQZ_ERR_FORMAT,
                      "%s: token %" PRId32 " at byte %zu is not valid UTF-8", path, i, at);
        SQZ_RETURN_IF(memchr(b, 0, (size_t)len), SQZ_ERR_FORMAT, "%s: token %" PRId32 " holds a NUL byte", path, i);
        v->tokens[i] = normalise_piece(b, (size_t)len);
        if (!v->tokens[i]) return SQZ_ERR_NOMEM;
        v->scores[i] = score;
        v->types[i] = token_type(v->tokens[i]);
    }
    SQZ_RETURN_IF(sqz__reader_left(&r) != 0, SQZ_ERR_FORMAT,
                  "%s: %zu bytes left after %" PRId32 " tokens (the model's vocab_size)", path,
                  sqz__reader_left(&r), vocab_size);
    /* run.c and SentencePiece's defaults: <unk> 0, <s> 1, </s> 2; BOS is added, text gets a
     * leading space ("dummy prefix"). */
    v->unk = 0;
    v->bos = vocab_size > 1 ? 1 : -1;
    v->eos = vocab_size > 2 ? 2 : -1;
    v->add_bos = true;
    v->add_eos = false;
    v->add_space_prefix = true;
    return SQZ_OK;
}

sqz_status sqz__llama2c_tokenizer_read(const char *path, int32_t vocab_size, sqz_vocab *v) {
    sqz_mapping *map;
    SQZ_TRY(sqz_map(path, &map));
    sqz_vocab tmp;
    sqz_vocab_init(&tmp);
    sqz_status s = parse(path, map, vocab_size, &tmp);
    sqz_unmap(map);
    if (s != SQZ_OK) {
        sqz_vocab_clear(&tmp);
        return s;
    }
    sqz_vocab_clear(v);
    *v = tmp;
    return SQZ_OK;
}

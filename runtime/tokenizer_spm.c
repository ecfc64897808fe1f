/*
 * runtime/tokenizer_spm.c - SentencePiece-style BPE with byte fallback.
 *
 * The text becomes one sequence of symbols: spaces are escaped to U+2581 "▁", a leading "▁" is
 * added when the vocabulary asks for it (SentencePiece's add_dummy_prefix, llama.cpp's
 * add_space_prefix, HF's Prepend("▁") normaliser), each UTF-8 character is its token, or its
 * <0xNN> byte tokens when the vocabulary lacks it, or <unk>. Adjacent symbols are then merged
 * best-first (tokenizer.c's merger):
 *   - by the score of the merged token, highest first: SentencePiece's BPE, llama2.c run.c's
 *     encode and llama.cpp's llm_tokenizer_spm (vocabularies with scores and no merges);
 *   - by merge rank: HF tokenizers' BPE model with byte_fallback, for tokenizer.json files that
 *     carry their merges (tinystories-656K). Both put ties on the leftmost pair.
 * The symbols span the whole text (no split at spaces: pieces such as "▁and▁" exist), except
 * with an HF Metaspace pre-tokenizer with split = true, where each "▁" starts a new word.
 *
 * To keep memory and cache footprint small on long texts, the text is still cut into chunks of a
 * few KB, but only between two characters c1 c2 that are both tokens and that no token holds side
 * by side: a merged symbol spanning that point would be a token containing "c1c2", so no merge can
 * cross it and the chunks encode exactly as the whole. Such points are frequent (every ~10
 * characters of English for tinystories-656K). The pairs are kept in a bitmap filter: a false
 * positive only forgoes a cut.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "runtime/tokenizer_internal.h"

static const char SPACE_MARK[] = "\xe2\x96\x81"; /* U+2581 */

typedef struct spm_impl {
    int32_t byte_id[256]; /* the <0xNN> token of each byte, -1 if missing */
    sqz__merge_mode mode;
    bool space_prefix;    /* prepend "▁" to text at the start or after a special token */
    bool escape_spaces;   /* ' ' -> "▁" (the vocabulary spells spaces as U+2581) */
    bool split_words;     /* HF Metaspace split = true */
    bool fuse_unk;        /* HF BPE: consecutive unknown characters give one <unk> */
    uint64_t *pairs;      /* bitmap of hashed character pairs found inside tokens; NULL: never cut */
    uint32_t pairs_mask;  /* bits - 1 */
} spm_impl;

#define CHUNK 4096 /* bytes of text before the encoder looks for a safe cut */

typedef struct spm_work {
    sqz__merger m;
    sqz__str norm;
    sqz__ids ids;
} spm_work;

static void *spm_work_new(const sqz_tokenizer *t) {
    (void)t;
    return sqz__calloc(1, sizeof(spm_work));
}

static void spm_work_free(void *p) {
    spm_work *w = p;
    if (!w) return;
    sqz__merger_free(&w->m);
    free(w->norm.s);
    free(w->ids.v);
    free(w);
}

/* Initial symbols of norm[0..n) into w->ids. */
static sqz_status initial_symbols(const sqz_tokenizer *t, const spm_impl *im, const char *s, size_t n,
                                  sqz__ids *ids) {
    bool prev_unk = false;
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        size_t len = sqz__utf8_next(s + i, n - i, &cp);
        if (len == 0) len = 1; /* an invalid byte stands alone and falls back to its byte token */
        int32_t id = sqz__tok_find(t, s + i, len);
        if (id >= 0 && (t->type[id] == SQZ_TOKEN_NORMAL || t->type[id] == SQZ_TOKEN_USER_DEFINED)) {
            SQZ_TRY(sqz__ids_push(ids, id));
            prev_unk = false;
        } else {
            bool bytes = true;
            for (size_t k = 0; k < len; k++) bytes = bytes && im->byte_id[(unsigned char)s[i + k]] >= 0;
            if (bytes) {
                for (size_t k = 0; k < len; k++) SQZ_TRY(sqz__ids_push(ids, im->byte_id[(unsigned char)s[i + k]]));
                prev_unk = false;
            } else {
                SQZ_RETURN_IF(t->unk < 0, SQZ_ERR_FORMAT,
                              "tokenizer: character at byte %zu has no token, no byte tokens and there is no "
                              "unknown token", i);
                if (!(im->fuse_unk && prev_unk)) SQZ_TRY(sqz__ids_push(ids, t->unk));
                prev_unk = true;
            }
        }
        i += len;
    }
    return SQZ_OK;
}

static sqz_status merge_chunk(const sqz_tokenizer *t, const spm_impl *im, spm_work *w, const char *s, size_t n,
                              sqz__ids *out) {
    w->ids.n = 0;
    SQZ_TRY(initial_symbols(t, im, s, n, &w->ids));
    size_t k = w->ids.n;
    SQZ_TRY(sqz__merge(t, &w->m, im->mode, w->ids.v, &k));
    return sqz__ids_append(out, w->ids.v, k);
}

static uint32_t pair_hash(uint32_t a, uint32_t b) {
    uint64_t k = ((uint64_t)a << 32 | b) * 0x9e3779b97f4a7c15ull;
    return (uint32_t)(k >> 32);
}

static bool pair_maybe(const spm_impl *im, uint32_t a, uint32_t b) {
    uint32_t h = pair_hash(a, b) & im->pairs_mask;
    return (im->pairs[h >> 6] >> (h & 63)) & 1;
}

/* True if the character at s[0..len) is an initial symbol of its own (a producible token). */
static bool known_char(const sqz_tokenizer *t, const char *s, size_t len) {
    int32_t id = sqz__tok_find(t, s, len);
    return id >= 0 && (t->type[id] == SQZ_TOKEN_NORMAL || t->type[id] == SQZ_TOKEN_USER_DEFINED);
}

/* Encodes s[0..n) in chunks cut where no merge can cross (see the top of the file). */
static sqz_status merge_append(const sqz_tokenizer *t, const spm_impl *im, spm_work *w, const char *s, size_t n,
                               sqz__ids *out) {
    if (!im->pairs || n <= 2 * CHUNK) return merge_chunk(t, im, w, s, n, out);
    size_t start = 0, prev = 0, prev_len = 0;
    uint32_t prev_cp = 0;
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        size_t len = sqz__utf8_next(s + i, n - i, &cp);
        if (len && prev_len && i - start >= CHUNK && known_char(t, s + prev, prev_len) && known_char(t, s + i, len) &&
            !pair_maybe(im, prev_cp, cp)) {
            SQZ_TRY(merge_chunk(t, im, w, s + start, i - start, out));
            start = i;
        }
        prev = i;
        prev_len = len; /* 0 after an invalid byte: never cut next to one */
        prev_cp = cp;
        i += len ? len : 1;
    }
    return merge_chunk(t, im, w, s + start, n - start, out);
}

static sqz_status spm_encode(const sqz_tokenizer *t, void *work, const char *text, size_t len, bool first,
                             sqz__ids *out) {
    const spm_impl *im = t->impl;
    spm_work *w = work;
    w->norm.n = 0;
    SQZ_TRY(sqz__str_append(&w->norm, "", 0));
    if (im->space_prefix && first) SQZ_TRY(sqz__str_append(&w->norm, SPACE_MARK, 3));
    size_t run = 0; /* copy runs of non-space bytes at once */
    for (size_t i = 0; i < len; i++) {
        if (text[i] == ' ' && im->escape_spaces) {
            SQZ_TRY(sqz__str_append(&w->norm, text + run, i - run));
            SQZ_TRY(sqz__str_append(&w->norm, SPACE_MARK, 3));
            run = i + 1;
        }
    }
    SQZ_TRY(sqz__str_append(&w->norm, text + run, len - run));
    const char *s = w->norm.s;
    size_t n = w->norm.n;
    if (!im->split_words) return merge_append(t, im, w, s, n, out);
    size_t start = 0; /* Metaspace split: words begin at each "▁" */
    for (size_t i = 1; i + 3 <= n; i++) {
        if (memcmp(s + i, SPACE_MARK, 3) == 0) {
            SQZ_TRY(merge_append(t, im, w, s + start, i - start, out));
            start = i;
            i += 2;
        }
    }
    return merge_append(t, im, w, s + start, n - start, out);
}

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

/* The byte of a "<0xNN>" token, or -1. */
static int byte_of(const char *s, size_t n) {
    if (n != 6 || memcmp(s, "<0x", 3) != 0 || s[5] != '>') return -1;
    int hi = hexval(s[3]), lo = hexval(s[4]);
    return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

/* The HF pre-tokenizer (or one inside a Sequence) of type Metaspace, or NULL. */
static const cJSON *find_metaspace(const cJSON *pre) {
    if (!cJSON_IsObject(pre)) return NULL;
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(pre, "type");
    if (cJSON_IsString(type) && strcmp(type->valuestring, "Metaspace") == 0) return pre;
    const cJSON *seq = cJSON_GetObjectItemCaseSensitive(pre, "pretokenizers");
    const cJSON *it;
    cJSON_ArrayForEach(it, seq) {
        const cJSON *m = find_metaspace(it);
        if (m) return m;
    }
    return NULL;
}

/* Details only a tokenizer.json says: Metaspace splitting and fuse_unk. */
static void read_hf_json(spm_impl *im, const char *json) {
    cJSON *root = cJSON_Parse(json);
    if (!root) return; /* the loader parsed it already; nothing more to learn */
    const cJSON *meta = find_metaspace(cJSON_GetObjectItemCaseSensitive(root, "pre_tokenizer"));
    if (meta) {
        im->escape_spaces = true;
        im->split_words = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(meta, "split"));
    }
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(root, "model");
    im->fuse_unk = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(model, "fuse_unk"));
    cJSON_Delete(root);
}

static void spm_impl_free(void *p) {
    spm_impl *im = p;
    if (im) free(im->pairs);
    free(im);
}

/* The filter of character pairs inside tokens; left NULL (no cuts) when a token is not UTF-8. */
static sqz_status build_pairs_filter(const sqz_tokenizer *t, spm_impl *im) {
    size_t total = 0;
    for (int32_t i = 0; i < t->n_tokens; i++) total += t->text_len[i];
    uint64_t bits = 1 << 16;
    while (bits < 8 * (uint64_t)total && bits < ((uint64_t)1 << 26)) bits *= 2;
    uint64_t *f = sqz__calloc((size_t)(bits / 64), sizeof *f);
    if (!f) return SQZ_ERR_NOMEM;
    for (int32_t i = 0; i < t->n_tokens; i++) {
        const char *s = t->text[i];
        size_t n = t->text_len[i];
        uint32_t prev = 0;
        for (size_t j = 0; j < n;) {
            uint32_t cp;
            size_t len = sqz__utf8_next(s + j, n - j, &cp);
            if (!len) { /* cannot reason about this token's characters */
                free(f);
                return SQZ_OK;
            }
            if (j) {
                uint32_t h = pair_hash(prev, cp) & (uint32_t)(bits - 1);
                f[h >> 6] |= (uint64_t)1 << (h & 63);
            }
            prev = cp;
            j += len;
        }
    }
    im->pairs = f;
    im->pairs_mask = (uint32_t)(bits - 1);
    return SQZ_OK;
}

sqz_status sqz__spm_init(sqz_tokenizer *t, const sqz_vocab *v) {
    spm_impl *im = sqz__calloc(1, sizeof *im);
    if (!im) return SQZ_ERR_NOMEM;
    t->impl = im;
    t->impl_free = spm_impl_free;
    for (int b = 0; b < 256; b++) im->byte_id[b] = -1;
    size_t marks = 0, spaces = 0;
    for (int32_t i = 0; i < t->n_tokens; i++) {
        int b = byte_of(t->text[i], t->text_len[i]);
        if (b >= 0 && im->byte_id[b] < 0) im->byte_id[b] = i;
        marks += strstr(t->text[i], SPACE_MARK) != NULL;
        spaces += memchr(t->text[i], ' ', t->text_len[i]) != NULL;
    }
    im->mode = t->n_merges > 0 ? SQZ__MERGE_RANKS : SQZ__MERGE_SCORES;
    im->space_prefix = v->add_space_prefix;
    im->escape_spaces = marks > 0 && marks >= spaces; /* SentencePiece pieces spell spaces U+2581 */
    if (v->hf_json) read_hf_json(im, v->hf_json);
    SQZ_TRY(build_pairs_filter(t, im));
    t->encode = spm_encode;
    t->work_new = spm_work_new;
    t->work_free = spm_work_free;
    t->detok_strip_space = im->space_prefix;

    for (int32_t i = 0; i < t->n_tokens; i++) {
        const char *s = t->text[i];
        size_t n = t->text_len[i];
        int b = byte_of(s, n);
        if (b >= 0 && im->byte_id[b] == i) {
            char c = (char)b;
            SQZ_TRY(sqz__tok_set_piece(t, i, &c, 1));
        } else if (t->type[i] == SQZ_TOKEN_NORMAL || t->type[i] == SQZ_TOKEN_USER_DEFINED) {
            if (!im->escape_spaces || !strstr(s, SPACE_MARK)) continue; /* the piece is the text */
            char *p = t->piece[i];
            size_t k = 0;
            for (size_t j = 0; j < n;) { /* in place: the piece shrinks */
                if (j + 3 <= n && memcmp(s + j, SPACE_MARK, 3) == 0) {
                    p[k++] = ' ';
                    j += 3;
                } else {
                    p[k++] = s[j++];
                }
            }
            p[k] = 0;
            t->piece_len[i] = (uint32_t)k;
        }
    }
    return SQZ_OK;
}

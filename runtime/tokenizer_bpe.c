/*
 * runtime/tokenizer_bpe.c - byte-level BPE (GPT-2, llama-3, SmolLM2, Qwen2).
 *
 * 1. Pre-tokenize: a list of regexes, each cutting every piece the previous one produced into
 *    its matches and the gaps between them (HF Split "Isolated"; llama.cpp unicode_regex_split).
 *    The regexes are llama.cpp's for the GGUF tokenizer.ggml.pre names and the patterns of an HF
 *    tokenizer.json pre_tokenizer; PCRE2 (UTF + UCP: \p{L}, \p{N}, \s are Unicode) runs them,
 *    JIT-compiled when available. Each piece is matched as its own subject, so a lookahead such
 *    as \s+(?!\S) stops at the piece's end exactly as in HF.
 * 2. Each word's bytes are mapped through GPT-2's byte-to-unicode table (bytes_to_unicode in
 *    openai/gpt-2 encoder.py: printable Latin-1 bytes stand for themselves, the other 68 bytes
 *    for U+0100..U+0143), each mapped character is a token, and tokenizer.c's merger applies the
 *    merges by rank. Words repeat a lot: the ids of each word are cached for the call.
 * Invalid UTF-8 bytes cannot go through PCRE2 in UTF mode; each is its own one-byte word (the
 * byte map makes that lossless).
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <cjson/cJSON.h>

#include "runtime/tokenizer_internal.h"

#define MAX_REGEX 4
#define CACHE_MAX_WORD 256 /* bytes; longer words are not cached */

/* HF ByteLevel(use_regex) and GPT-2's encoder.py (llama.cpp drops the final \s+ and emits the
 * unmatched gaps instead: the same split). */
static const char RE_GPT2[] = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";
/* Meta-Llama-3 tokenizer.json Split pattern (llama.cpp LLAMA_VOCAB_PRE_TYPE_LLAMA3). */
static const char RE_LLAMA3[] = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+"
                                "[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
/* Qwen2 / StableLM2: llama-3's with single digits. */
static const char RE_QWEN2[] = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+"
                               "[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
/* o200k (GPT-4o, Phi-4-mini): the tokenizer.json pattern llama.cpp keeps as the original. */
static const char RE_GPT4O[] = "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+"
                               "(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+"
                               "[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+"
                               "[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
/* HF Digits(individual_digits = true) and llama.cpp's first regex for SmolLM/StarCoder. */
static const char RE_DIGIT[] = "\\p{N}";
static const char RE_DIGITS[] = "\\p{N}+";

/* GGUF tokenizer.ggml.pre names -> regex lists (llama.cpp llama-vocab.cpp). */
static const struct pre_row {
    const char *name;
    const char *re[MAX_REGEX];
    bool ignore_merges;
} PRE_TABLE[] = {
    {"default", {RE_GPT2}, false},   {"gpt2", {RE_GPT2}, false},     {"gpt-2", {RE_GPT2}, false},
    {"mpt", {RE_GPT2}, false},       {"olmo", {RE_GPT2}, false},     {"jais", {RE_GPT2}, false},
    {"llama3", {RE_LLAMA3}, true},   {"llama-bpe", {RE_LLAMA3}, true}, {"llama-v3", {RE_LLAMA3}, true},
    {"smollm", {RE_DIGIT, RE_GPT2}, false},    {"starcoder", {RE_DIGIT, RE_GPT2}, false},
    {"refact", {RE_DIGIT, RE_GPT2}, false},    {"command-r", {RE_DIGIT, RE_GPT2}, false},
    {"codeshell", {RE_DIGIT, RE_GPT2}, false}, {"exaone", {RE_DIGIT, RE_GPT2}, false},
    {"minerva-7b", {RE_DIGIT, RE_GPT2}, false},
    {"qwen2", {RE_QWEN2}, false},    {"stablelm2", {RE_QWEN2}, false},
    {"gpt-4o", {RE_GPT4O}, false},   {"llama4", {RE_GPT4O}, false},
};

typedef struct bpe_impl {
    pcre2_code *re[MAX_REGEX];
    bool jit[MAX_REGEX];
    int n_re;
    bool ignore_merges;    /* a word that is a token is that token (llama-3; HF ignore_merges) */
    bool add_prefix_space; /* HF ByteLevel add_prefix_space: a space before text that lacks one */
    char map[256][2];      /* byte -> its character's UTF-8 (1 or 2 bytes) */
    uint8_t map_len[256];
    int32_t byte_tok[256]; /* the token of each byte's character, -1 if missing */
} bpe_impl;

typedef struct cache_slot {
    uint32_t key_off, key_len; /* in work->keys; key_len 0 = empty */
    uint32_t ids_off, ids_n;   /* in work->cids */
} cache_slot;

typedef struct bpe_work {
    pcre2_match_data *md[MAX_REGEX];
    pcre2_match_context *mctx;
    pcre2_jit_stack *jstack;
    sqz__merger m;
    sqz__str word;   /* the mapped word */
    sqz__ids syms;
    cache_slot *cache;
    uint32_t cache_mask, cache_n;
    sqz__str keys;
    sqz__ids cids;
} bpe_work;

static void bpe_work_free(void *p) {
    bpe_work *w = p;
    if (!w) return;
    for (int i = 0; i < MAX_REGEX; i++) pcre2_match_data_free(w->md[i]);
    pcre2_match_context_free(w->mctx);
    pcre2_jit_stack_free(w->jstack);
    sqz__merger_free(&w->m);
    free(w->word.s);
    free(w->syms.v);
    free(w->cache);
    free(w->keys.s);
    free(w->cids.v);
    free(w);
}

static void *bpe_work_new(const sqz_tokenizer *t) {
    const bpe_impl *im = t->impl;
    bpe_work *w = sqz__calloc(1, sizeof *w);
    if (!w) return NULL;
    bool ok = true;
    for (int i = 0; i < im->n_re; i++) ok = ok && (w->md[i] = pcre2_match_data_create_from_pattern(im->re[i], NULL));
    /* A JIT stack that grows to 8 MiB: long whitespace runs backtrack deeply in \s+(?!\S). */
    ok = ok && (w->mctx = pcre2_match_context_create(NULL)) && (w->jstack = pcre2_jit_stack_create(32 << 10, 8 << 20, NULL));
    w->cache_mask = 1023;
    ok = ok && (w->cache = calloc((size_t)w->cache_mask + 1, sizeof *w->cache));
    if (!ok) {
        bpe_work_free(w);
        SQZ_ERROR(SQZ_ERR_NOMEM, "tokenizer: out of memory for the pre-tokenizer");
        return NULL;
    }
    pcre2_jit_stack_assign(w->mctx, NULL, w->jstack);
    return w;
}

static uint64_t hash_key(const char *s, size_t n) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 0x100000001b3ull;
    return h ^ (h >> 31);
}

static cache_slot *cache_find(bpe_work *w, const char *s, size_t n) {
    uint32_t i = (uint32_t)hash_key(s, n) & w->cache_mask;
    for (;;) {
        cache_slot *c = &w->cache[i];
        if (!c->key_len || (c->key_len == n && memcmp(w->keys.s + c->key_off, s, n) == 0)) return c;
        i = (i + 1) & w->cache_mask;
    }
}

static sqz_status cache_grow(bpe_work *w) {
    uint32_t cap = (w->cache_mask + 1) * 2;
    cache_slot *old = w->cache, *nc = sqz__calloc(cap, sizeof *nc);
    if (!nc) return SQZ_ERR_NOMEM;
    uint32_t old_cap = w->cache_mask + 1;
    w->cache = nc;
    w->cache_mask = cap - 1;
    for (uint32_t i = 0; i < old_cap; i++) {
        if (!old[i].key_len) continue;
        *cache_find(w, w->keys.s + old[i].key_off, old[i].key_len) = old[i];
    }
    free(old);
    return SQZ_OK;
}

/* Encodes raw bytes s[0..n) as one word. */
static sqz_status encode_word(const sqz_tokenizer *t, bpe_work *w, const char *s, size_t n, sqz__ids *out) {
    const bpe_impl *im = t->impl;
    w->word.n = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char b = (unsigned char)s[i];
        SQZ_TRY(sqz__str_append(&w->word, im->map[b], im->map_len[b]));
    }
    const char *word = w->word.s;
    size_t wl = w->word.n;
    cache_slot *c = NULL;
    if (wl <= CACHE_MAX_WORD && w->keys.n < UINT32_MAX / 2 && w->cids.n < UINT32_MAX / 2) {
        c = cache_find(w, word, wl);
        if (c->key_len) return sqz__ids_append(out, w->cids.v + c->ids_off, c->ids_n);
    }
    w->syms.n = 0;
    int32_t whole = im->ignore_merges ? sqz__tok_find(t, word, wl) : -1;
    if (whole >= 0) {
        SQZ_TRY(sqz__ids_push(&w->syms, whole));
    } else {
        for (size_t i = 0; i < n; i++) {
            int32_t id = im->byte_tok[(unsigned char)s[i]];
            if (id >= 0) SQZ_TRY(sqz__ids_push(&w->syms, id)); /* else dropped, as HF and llama.cpp do */
        }
        size_t k = w->syms.n;
        SQZ_TRY(sqz__merge(t, &w->m, SQZ__MERGE_RANKS, w->syms.v, &k));
        w->syms.n = k;
    }
    if (c) {
        cache_slot e = {(uint32_t)w->keys.n, (uint32_t)wl, (uint32_t)w->cids.n, (uint32_t)w->syms.n};
        SQZ_TRY(sqz__str_append(&w->keys, word, wl));
        SQZ_TRY(sqz__ids_append(&w->cids, w->syms.v, w->syms.n));
        *c = e;
        if (++w->cache_n * 2 > w->cache_mask) SQZ_TRY(cache_grow(w));
    }
    return sqz__ids_append(out, w->syms.v, w->syms.n);
}

/* Cuts s[0..n) (valid UTF-8) with regex `level` and hands matches and gaps to the next level. */
static sqz_status split(const sqz_tokenizer *t, bpe_work *w, const char *s, size_t n, int level, sqz__ids *out) {
    const bpe_impl *im = t->impl;
    if (n == 0) return SQZ_OK;
    if (level >= im->n_re || level >= MAX_REGEX) return encode_word(t, w, s, n, out);
    pcre2_match_data *md = w->md[level];
    size_t pos = 0, gap = 0;
    while (pos < n) {
        int rc = im->jit[level] ? pcre2_jit_match(im->re[level], (PCRE2_SPTR)s, n, pos, 0, md, w->mctx)
                                : pcre2_match(im->re[level], (PCRE2_SPTR)s, n, pos, PCRE2_NO_UTF_CHECK, md, w->mctx);
        if (rc == PCRE2_ERROR_NOMATCH) break;
        if (rc < 0) {
            PCRE2_UCHAR msg[120];
            pcre2_get_error_message(rc, msg, sizeof msg);
            return SQZ_ERROR(SQZ_ERR_NUMERIC, "tokenizer: pre-tokenizer regex %d failed: %s", level, (const char *)msg);
        }
        const PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
        size_t ms = ov[0], me = ov[1];
        if (me <= ms) { /* an empty match cuts nothing: step over one character */
            uint32_t cp;
            size_t l = ms < n ? sqz__utf8_next(s + ms, n - ms, &cp) : 1;
            pos = ms + (l ? l : 1);
            continue;
        }
        if (ms > gap) SQZ_TRY(split(t, w, s + gap, ms - gap, level + 1, out));
        SQZ_TRY(split(t, w, s + ms, me - ms, level + 1, out));
        gap = pos = me;
    }
    if (n > gap) SQZ_TRY(split(t, w, s + gap, n - gap, level + 1, out));
    return SQZ_OK;
}

static sqz_status bpe_encode(const sqz_tokenizer *t, void *work, const char *text, size_t len, bool first,
                             sqz__ids *out) {
    const bpe_impl *im = t->impl;
    bpe_work *w = work;
    sqz__str pre = {0};
    if (im->add_prefix_space && first && len && text[0] != ' ') { /* HF ByteLevel(add_prefix_space) */
        SQZ_TRY(sqz__str_append(&pre, " ", 1));
        sqz_status s = sqz__str_append(&pre, text, len);
        if (s == SQZ_OK) s = bpe_encode(t, work, pre.s, pre.n, false, out);
        free(pre.s);
        return s;
    }
    size_t start = 0;
    for (size_t i = 0; i < len;) { /* valid UTF-8 runs go to the regexes; each invalid byte is a word */
        uint32_t cp;
        size_t l = sqz__utf8_next(text + i, len - i, &cp);
        if (l) {
            i += l;
            continue;
        }
        SQZ_TRY(split(t, w, text + start, i - start, 0, out));
        SQZ_TRY(encode_word(t, w, text + i, 1, out));
        start = ++i;
    }
    return split(t, w, text + start, len - start, 0, out);
}

/* ---- set-up ---------------------------------------------------------------------------- */

static void bpe_impl_free(void *p) {
    bpe_impl *im = p;
    if (!im) return;
    for (int i = 0; i < im->n_re; i++) pcre2_code_free(im->re[i]);
    free(im);
}

static sqz_status add_regex(bpe_impl *im, const char *pattern, size_t len) {
    SQZ_RETURN_IF(im->n_re == MAX_REGEX, SQZ_ERR_UNSUPPORTED, "tokenizer: more than %d pre-tokenizer regexes",
                  MAX_REGEX);
    int err;
    PCRE2_SIZE off;
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)pattern, len, PCRE2_UTF | PCRE2_UCP, &err, &off, NULL);
    if (!re) {
        PCRE2_UCHAR msg[120];
        pcre2_get_error_message(err, msg, sizeof msg);
        return SQZ_ERROR(SQZ_ERR_FORMAT, "tokenizer: pre-tokenizer regex '%.*s': %s at offset %zu", (int)len,
                         pattern, (const char *)msg, (size_t)off);
    }
    im->jit[im->n_re] = pcre2_jit_compile(re, PCRE2_JIT_COMPLETE) == 0; /* else the interpreter */
    im->re[im->n_re++] = re;
    return SQZ_OK;
}

/* An HF tokenizer.json pre_tokenizer as regexes: Sequence, Split (Isolated), Digits, ByteLevel. */
static sqz_status from_hf_pre(bpe_impl *im, const cJSON *pre) {
    if (cJSON_IsNull(pre) || !pre) return SQZ_OK;
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(pre, "type");
    SQZ_RETURN_IF(!cJSON_IsString(type), SQZ_ERR_FORMAT, "tokenizer.json: pre_tokenizer without a type");
    const char *ty = type->valuestring;
    if (strcmp(ty, "Sequence") == 0) {
        const cJSON *it;
        cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(pre, "pretokenizers")) SQZ_TRY(from_hf_pre(im, it));
        return SQZ_OK;
    }
    if (strcmp(ty, "ByteLevel") == 0) {
        const cJSON *use = cJSON_GetObjectItemCaseSensitive(pre, "use_regex");
        im->add_prefix_space = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(pre, "add_prefix_space"));
        if (!cJSON_IsFalse(use)) SQZ_TRY(add_regex(im, RE_GPT2, strlen(RE_GPT2)));
        return SQZ_OK;
    }
    if (strcmp(ty, "Digits") == 0) {
        bool one = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(pre, "individual_digits"));
        return add_regex(im, one ? RE_DIGIT : RE_DIGITS, strlen(one ? RE_DIGIT : RE_DIGITS));
    }
    if (strcmp(ty, "Split") == 0) {
        const cJSON *pat = cJSON_GetObjectItemCaseSensitive(pre, "pattern");
        const cJSON *beh = cJSON_GetObjectItemCaseSensitive(pre, "behavior");
        const cJSON *re = cJSON_GetObjectItemCaseSensitive(pat, "Regex");
        const cJSON *str = cJSON_GetObjectItemCaseSensitive(pat, "String");
        SQZ_RETURN_IF(!cJSON_IsString(beh) || strcmp(beh->valuestring, "Isolated") != 0 ||
                          cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(pre, "invert")),
                      SQZ_ERR_UNSUPPORTED, "tokenizer.json: Split pre-tokenizer behaviour '%s' (only Isolated)",
                      cJSON_IsString(beh) ? beh->valuestring : "?");
        if (cJSON_IsString(re)) return add_regex(im, re->valuestring, strlen(re->valuestring));
        SQZ_RETURN_IF(!cJSON_IsString(str), SQZ_ERR_FORMAT, "tokenizer.json: Split pre-tokenizer without a pattern");
        char *q = sqz__asprintf("\\Q%s\\E", str->valuestring); /* a literal string */
        if (!q) return SQZ_ERR_NOMEM;
        sqz_status s = add_regex(im, q, strlen(q));
        free(q);
        return s;
    }
    return SQZ_ERROR(SQZ_ERR_UNSUPPORTED, "tokenizer.json: pre-tokenizer '%s' is not supported for byte-level BPE", ty);
}

static sqz_status choose_regexes(bpe_impl *im, const sqz_vocab *v) {
    if (v->pre) {
        for (size_t i = 0; i < sizeof PRE_TABLE / sizeof PRE_TABLE[0]; i++) {
            if (strcmp(v->pre, PRE_TABLE[i].name) != 0) continue;
            for (int k = 0; k < MAX_REGEX && PRE_TABLE[i].re[k]; k++)
                SQZ_TRY(add_regex(im, PRE_TABLE[i].re[k], strlen(PRE_TABLE[i].re[k])));
            im->ignore_merges = PRE_TABLE[i].ignore_merges;
            return SQZ_OK;
        }
    }
    if (v->hf_json) {
        cJSON *root = cJSON_Parse(v->hf_json);
        SQZ_RETURN_IF(!root, SQZ_ERR_FORMAT, "tokenizer.json: not valid JSON");
        sqz_status s = from_hf_pre(im, cJSON_GetObjectItemCaseSensitive(root, "pre_tokenizer"));
        const cJSON *model = cJSON_GetObjectItemCaseSensitive(root, "model");
        im->ignore_merges = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(model, "ignore_merges"));
        cJSON_Delete(root);
        return s;
    }
    SQZ_RETURN_IF(v->pre, SQZ_ERR_UNSUPPORTED, "tokenizer: pre-tokenizer '%s' is not supported", v->pre);
    return add_regex(im, RE_GPT2, strlen(RE_GPT2)); /* no name: GPT-2's */
}

sqz_status sqz__bpe_init(sqz_tokenizer *t, const sqz_vocab *v) {
    bpe_impl *im = sqz__calloc(1, sizeof *im);
    if (!im) return SQZ_ERR_NOMEM;
    t->impl = im;
    t->impl_free = bpe_impl_free;
    SQZ_TRY(choose_regexes(im, v));

    /* GPT-2 bytes_to_unicode, and its inverse for decoding (characters below U+0144). */
    int16_t inv[0x144];
    for (int i = 0; i < 0x144; i++) inv[i] = -1;
    int extra = 0;
    for (int b = 0; b < 256; b++) {
        bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
        uint32_t cp = printable ? (uint32_t)b : 256u + (uint32_t)extra++;
        char u[4];
        size_t l = sqz__utf8_put(cp, u);
        memcpy(im->map[b], u, l);
        im->map_len[b] = (uint8_t)l;
        inv[cp] = (int16_t)b;
        im->byte_tok[b] = sqz__tok_find(t, u, l);
    }
    t->encode = bpe_encode;
    t->work_new = bpe_work_new;
    t->work_free = bpe_work_free;

    for (int32_t i = 0; i < t->n_tokens; i++) {
        if (t->type[i] == SQZ_TOKEN_CONTROL || t->type[i] == SQZ_TOKEN_USER_DEFINED) continue; /* verbatim */
        const char *s = t->text[i];
        size_t n = t->text_len[i];
        char *p = t->piece[i];
        size_t k = 0;
        for (size_t j = 0; j < n;) { /* in place: never longer than the text */
            uint32_t cp;
            size_t l = sqz__utf8_next(s + j, n - j, &cp);
            if (l && cp < 0x144 && inv[cp] >= 0) {
                p[k++] = (char)inv[cp];
            } else {
                if (!l) l = 1;
                memcpy(p + k, s + j, l);
                k += l;
            }
            j += l;
        }
        p[k] = 0;
        t->piece_len[i] = (uint32_t)k;
    }
    return SQZ_OK;
}

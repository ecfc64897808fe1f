/*
 * runtime/tokenizer_wpm.c - WordPiece for BERT encoders, as HF tokenizers' BertNormalizer +
 * BertPreTokenizer + WordPiece (the same as Google BERT's tokenization.py).
 *
 * Per character (every step is a per-character map, so one pass does them all):
 *   clean_text     drop NUL, U+FFFD and "other" characters (Cc Cf Co Cs, not unassigned ones)
 *                  except \t \n \r;
 *                  whitespace becomes a space;
 *   chinese chars  spaces around CJK ideographs (the ranges of BERT's _is_chinese_char);
 *   strip accents  NFD, then drop nonspacing marks (Mn) (when strip_accents, or when it is unset and
 *                  lowercase is on);
 *   lowercase      the per-character lowercase mapping (Rust char::to_lowercase);
 *   pre-tokenize   whitespace ends a word, punctuation (ASCII punctuation or Unicode P*) is a word;
 * then each word: greedy longest match first, continuations prefixed "##"; a word with a piece that
 * matches nothing, or longer than max_input_chars_per_word (100) characters, becomes [UNK].
 * The Unicode facts (which characters are "other", punctuation or nonspacing marks, NFD, lowercase)
 * come from tokenizer_unicode_data.c, which gen_tokenizer_unicode.py probes from HF tokenizers itself:
 * HF mixes Unicode versions (its categories are Unicode 8's), and we follow it character for
 * character. NFD's canonical reordering is not needed: it only moves marks that are then dropped.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "runtime/tokenizer_internal.h"

/* Classes of sqz__uni_class_runs. */
enum { UNI_NONE = 0, UNI_OTHER = 1, UNI_STRIPPED = 2, UNI_PUNCT = 3 };

static int uni_class(uint32_t cp) {
    size_t lo = 0, hi = sqz__uni_n_class_runs; /* last run starting at or before cp */
    while (hi - lo > 1) {
        size_t mid = (lo + hi) / 2;
        if ((sqz__uni_class_runs[mid] >> 2) <= cp) lo = mid;
        else hi = mid;
    }
    return (int)(sqz__uni_class_runs[lo] & 3);
}

static uint32_t uni_lower(uint32_t cp) {
    if (cp < 0x80) return cp >= 'A' && cp <= 'Z' ? cp + 32 : cp;
    size_t lo = 0, hi = sqz__uni_n_lower_runs;
    if (cp < sqz__uni_lower_runs[0].start) return cp;
    while (hi - lo > 1) {
        size_t mid = (lo + hi) / 2;
        if (sqz__uni_lower_runs[mid].start <= cp) lo = mid;
        else hi = mid;
    }
    const sqz__uni_case_run *r = &sqz__uni_lower_runs[lo];
    uint32_t off = cp - r->start;
    if (off % (uint32_t)r->stride || off / (uint32_t)r->stride >= (uint32_t)r->count) return cp;
    return (uint32_t)((int64_t)cp + r->delta);
}

/* NFD of cp with the nonspacing marks removed, into out (at most 3); returns the count. */
static int uni_strip(uint32_t cp, uint32_t out[3]) {
    if (cp < 0x80) {
        out[0] = cp;
        return 1;
    }
    if (cp >= 0xAC00 && cp <= 0xD7A3) { /* Hangul syllable: L V [T] (Unicode 3.12) */
        uint32_t s = cp - 0xAC00;
        out[0] = 0x1100 + s / 588;
        out[1] = 0x1161 + (s % 588) / 28;
        if (s % 28) {
            out[2] = 0x11A7 + s % 28;
            return 3;
        }
        return 2;
    }
    size_t lo = 0, hi = sqz__uni_n_strip1;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (sqz__uni_strip1[mid][0] < cp) lo = mid + 1;
        else hi = mid;
    }
    if (lo < sqz__uni_n_strip1 && sqz__uni_strip1[lo][0] == cp) {
        out[0] = sqz__uni_strip1[lo][1];
        return 1;
    }
    lo = 0, hi = sqz__uni_n_stripn;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (sqz__uni_stripn[mid][0] < cp) lo = mid + 1;
        else hi = mid;
    }
    if (lo < sqz__uni_n_stripn && sqz__uni_stripn[lo][0] == cp) {
        int n = (int)sqz__uni_stripn[lo][1];
        for (int i = 0; i < n; i++) out[i] = sqz__uni_stripn[lo][2 + i];
        return n;
    }
    if (uni_class(cp) == UNI_STRIPPED) return 0; /* a nonspacing mark */
    out[0] = cp;
    return 1;
}

/* Rust char::is_whitespace (the White_Space property). */
static bool is_ws(uint32_t c) {
    return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

static bool is_punct(uint32_t c) {
    if (c < 0x80) return (c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) || (c >= 123 && c <= 126);
    return uni_class(c) == UNI_PUNCT;
}

static bool is_cjk(uint32_t c) {
    return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x20000 && c <= 0x2A6DF) ||
           (c >= 0x2A700 && c <= 0x2B73F) || (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
           (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

typedef struct wpm_impl {
    bool clean_text, chinese, strip_accents, lowercase;
    int32_t max_chars;
    char prefix[16]; /* continuing_subword_prefix, "##" */
    size_t prefix_len;
} wpm_impl;

typedef struct wpm_work {
    sqz__str word;  /* the current word, UTF-8 */
    size_t word_chars;
    sqz__str probe; /* prefix + candidate piece */
    sqz__ids sub;
} wpm_work;

static void *wpm_work_new(const sqz_tokenizer *t) {
    (void)t;
    return sqz__calloc(1, sizeof(wpm_work));
}

static void wpm_work_free(void *p) {
    wpm_work *w = p;
    if (!w) return;
    free(w->word.s);
    free(w->probe.s);
    free(w->sub.v);
    free(w);
}

/* WordPiece of the current word (HF WordPiece::tokenize). */
static sqz_status flush_word(const sqz_tokenizer *t, const wpm_impl *im, wpm_work *w, sqz__ids *out) {
    const char *s = w->word.s;
    size_t n = w->word.n;
    if (n == 0) return SQZ_OK;
    size_t chars = w->word_chars;
    w->word.n = 0;
    w->word_chars = 0;
    SQZ_RETURN_IF(t->unk < 0, SQZ_ERR_FORMAT, "tokenizer: WordPiece vocabulary without an unknown token");
    if (chars > (size_t)im->max_chars) return sqz__ids_push(out, t->unk);
    w->sub.n = 0;
    for (size_t start = 0; start < n;) {
        int32_t found = -1;
        size_t end = n;
        if (end - start > t->max_text_len) { /* no token is longer: bounds the work per word */
            end = start + t->max_text_len;
            while (end > start && ((unsigned char)s[end] & 0xC0) == 0x80) end--;
        }
        while (end > start) {
            if (start == 0) {
                found = sqz__tok_find(t, s, end);
            } else {
                w->probe.n = 0;
                SQZ_TRY(sqz__str_append(&w->probe, im->prefix, im->prefix_len));
                SQZ_TRY(sqz__str_append(&w->probe, s + start, end - start));
                found = sqz__tok_find(t, w->probe.s, w->probe.n);
            }
            if (found >= 0) break;
            do end--; while (end > start && ((unsigned char)s[end] & 0xC0) == 0x80); /* previous character */
        }
        if (found < 0) return sqz__ids_push(out, t->unk);
        SQZ_TRY(sqz__ids_push(&w->sub, found));
        start = end;
    }
    return sqz__ids_append(out, w->sub.v, w->sub.n);
}

/* A normalised character into the pre-tokenizer. */
static sqz_status feed(const sqz_tokenizer *t, const wpm_impl *im, wpm_work *w, uint32_t c, sqz__ids *out) {
    if (is_ws(c)) return flush_word(t, im, w, out);
    char u[4];
    size_t l = sqz__utf8_put(c, u);
    if (is_punct(c)) {
        SQZ_TRY(flush_word(t, im, w, out));
        SQZ_TRY(sqz__str_append(&w->word, u, l));
        w->word_chars = 1;
        return flush_word(t, im, w, out);
    }
    SQZ_TRY(sqz__str_append(&w->word, u, l));
    w->word_chars++;
    return SQZ_OK;
}

/* strip accents, lowercase, pre-tokenize one cleaned character. */
static sqz_status normalise(const sqz_tokenizer *t, const wpm_impl *im, wpm_work *w, uint32_t c, sqz__ids *out) {
    uint32_t parts[3] = {c};
    int np = im->strip_accents ? uni_strip(c, parts) : 1;
    for (int i = 0; i < np; i++) {
        uint32_t p = parts[i];
        if (im->lowercase && p == 0x130) { /* İ: the one character whose lowercase is two */
            SQZ_TRY(feed(t, im, w, 'i', out));
            SQZ_TRY(feed(t, im, w, 0x307, out));
            continue;
        }
        SQZ_TRY(feed(t, im, w, im->lowercase ? uni_lower(p) : p, out));
    }
    return SQZ_OK;
}

static sqz_status wpm_encode(const sqz_tokenizer *t, void *work, const char *text, size_t len, bool first,
                             sqz__ids *out) {
    (void)first;
    const wpm_impl *im = t->impl;
    wpm_work *w = work;
    w->word.n = 0;
    w->word_chars = 0;
    for (size_t i = 0; i < len;) {
        uint32_t c;
        size_t l = sqz__utf8_next(text + i, len - i, &c);
        if (!l) {
            c = 0xFFFD; /* an invalid byte */
            l = 1;
        }
        i += l;
        if (im->clean_text) {
            if (c == 0 || c == 0xFFFD || (c != '\t' && c != '\n' && c != '\r' && uni_class(c) == UNI_OTHER)) continue;
            if (is_ws(c)) c = ' ';
        }
        if (im->chinese && is_cjk(c)) {
            SQZ_TRY(feed(t, im, w, ' ', out));
            SQZ_TRY(normalise(t, im, w, c, out));
            SQZ_TRY(feed(t, im, w, ' ', out));
            continue;
        }
        SQZ_TRY(normalise(t, im, w, c, out));
    }
    return flush_word(t, im, w, out);
}

/* ---- decoding: HF's WordPiece decoder with cleanup ------------------------------------------ */

/* Replaces every `from` in b by `to` (to is never longer than from). */
static void replace_all(sqz__str *b, const char *from, const char *to) {
    size_t fl = strlen(from), tl = strlen(to), k = 0;
    for (size_t i = 0; i < b->n;) {
        if (i + fl <= b->n && memcmp(b->s + i, from, fl) == 0) {
            memmove(b->s + k, to, tl);
            k += tl;
            i += fl;
        } else {
            b->s[k++] = b->s[i++];
        }
    }
    b->n = k;
    b->s[k] = 0;
}

static sqz_status wpm_detok(const sqz_tokenizer *t, const int32_t *ids, size_t n, bool special, char **text,
                            size_t *len) {
    static const char *const CLEANUP[][2] = {{" .", "."},   {" ?", "?"},     {" !", "!"},          {" ,", ","},
                                             {" ' ", "'"},  {" n't", "n't"}, {" 'm", "'m"},        {" do not", " don't"},
                                             {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}};
    const wpm_impl *im = t->impl;
    sqz__str b = {0}, tok = {0};
    sqz_status s = sqz__str_append(&b, "", 0);
    size_t k = 0; /* position among the tokens kept (HF skips specials before decoding) */
    for (size_t i = 0; i < n && s == SQZ_OK; i++) {
        int32_t id = ids[i];
        /* HF decode(skip_special_tokens) leaves out [CLS], [SEP], [PAD] and [UNK] */
        if ((t->type[id] == SQZ_TOKEN_CONTROL || t->type[id] == SQZ_TOKEN_UNKNOWN) && !special) continue;
        const char *p = t->text[id];
        size_t pl = t->text_len[id];
        tok.n = 0;
        if (k++ == 0) {
            s = sqz__str_append(&tok, p, pl);
        } else if (pl >= im->prefix_len && memcmp(p, im->prefix, im->prefix_len) == 0) {
            s = sqz__str_append(&tok, p + im->prefix_len, pl - im->prefix_len);
        } else {
            s = sqz__str_append(&tok, " ", 1);
            if (s == SQZ_OK) s = sqz__str_append(&tok, p, pl);
        }
        if (s != SQZ_OK) break;
        for (size_t r = 0; r < sizeof CLEANUP / sizeof CLEANUP[0]; r++) replace_all(&tok, CLEANUP[r][0], CLEANUP[r][1]);
        s = sqz__str_append(&b, tok.s, tok.n);
    }
    free(tok.s);
    if (s != SQZ_OK) {
        free(b.s);
        return s;
    }
    *text = b.s;
    if (len) *len = b.n;
    return SQZ_OK;
}

/* ---- set-up ---------------------------------------------------------------------------- */

static void wpm_impl_free(void *p) { free(p); }

static void read_hf_json(wpm_impl *im, const char *json) {
    cJSON *root = cJSON_Parse(json);
    if (!root) return;
    const cJSON *norm = cJSON_GetObjectItemCaseSensitive(root, "normalizer");
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(norm, "type");
    if (cJSON_IsString(type) && strcmp(type->valuestring, "BertNormalizer") == 0) {
        const cJSON *x;
        if (cJSON_IsBool(x = cJSON_GetObjectItemCaseSensitive(norm, "clean_text"))) im->clean_text = cJSON_IsTrue(x);
        if (cJSON_IsBool(x = cJSON_GetObjectItemCaseSensitive(norm, "handle_chinese_chars"))) im->chinese = cJSON_IsTrue(x);
        if (cJSON_IsBool(x = cJSON_GetObjectItemCaseSensitive(norm, "lowercase"))) im->lowercase = cJSON_IsTrue(x);
        x = cJSON_GetObjectItemCaseSensitive(norm, "strip_accents");
        im->strip_accents = cJSON_IsBool(x) ? cJSON_IsTrue(x) : im->lowercase; /* null: follows lowercase */
    }
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(root, "model");
    const cJSON *pre = cJSON_GetObjectItemCaseSensitive(model, "continuing_subword_prefix");
    if (cJSON_IsString(pre) && strlen(pre->valuestring) < sizeof im->prefix) {
        strcpy(im->prefix, pre->valuestring);
        im->prefix_len = strlen(im->prefix);
    }
    const cJSON *mc = cJSON_GetObjectItemCaseSensitive(model, "max_input_chars_per_word");
    if (cJSON_IsNumber(mc) && mc->valuedouble >= 1 && mc->valuedouble <= 1e6) im->max_chars = (int32_t)mc->valuedouble;
    cJSON_Delete(root);
}

sqz_status sqz__wpm_init(sqz_tokenizer *t, const sqz_vocab *v) {
    wpm_impl *im = sqz__calloc(1, sizeof *im);
    if (!im) return SQZ_ERR_NOMEM;
    t->impl = im;
    t->impl_free = wpm_impl_free;
    *im = (wpm_impl){.clean_text = true, .chinese = true, .strip_accents = true, .lowercase = true, .max_chars = 100,
                     .prefix = "##", .prefix_len = 2};
    if (v->hf_json) read_hf_json(im, v->hf_json);
    t->encode = wpm_encode;
    t->work_new = wpm_work_new;
    t->work_free = wpm_work_free;
    t->detok = wpm_detok;
    /* BERT's template: [CLS] text [SEP]; the vocab's BOS/EOS fields name them when cls/sep are unset. */
    t->bos = v->cls >= 0 ? v->cls : v->bos;
    t->eos = v->sep >= 0 ? v->sep : v->eos;
    t->add_bos = t->bos >= 0;
    t->add_eos = t->eos >= 0;
    for (int32_t i = 0; i < t->n_tokens; i++) {
        if (sqz__tok_is_special(t, i)) continue;
        const char *s = t->text[i];
        size_t n = t->text_len[i];
        if (n >= im->prefix_len && im->prefix_len && memcmp(s, im->prefix, im->prefix_len) == 0)
            SQZ_TRY(sqz__tok_set_piece(t, i, s + im->prefix_len, n - im->prefix_len));
    }
    return SQZ_OK;
}

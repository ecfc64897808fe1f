/*
 * formats/tokenizer_json_write.c - an sqz_vocab as HF tokenizer.json and tokenizer_config.json.
 *
 * A vocab read from an HF directory carries the original texts (v->hf_json, v->hf_config_json)
 * and they are written back verbatim. Otherwise a tokenizer.json is synthesised that the
 * `tokenizers` library loads and that tokenizes like the source:
 *   SPM  BPE model with byte_fallback, normalizer Prepend("▁") + Replace(" ", "▁"), decoder
 *        Replace("▁", " ") / ByteFallback / Fuse / Strip (HF's Llama tokenizer.json). Merges are
 *        derived from the scores as transformers' GGUF converter (integrations/ggml.py,
 *        GGUFTokenizerSkeleton) derives them: every split of every token into two vocab pieces
 *        (at code point boundaries) is a merge; within a token, splits are ordered by the
 *        pieces' scores (descending); all merges are then ordered by the merged token's score,
 *        descending, ties keeping token id order (Python's stable sort). Merging by this rank
 *        is merging the best-scoring pair, as SentencePiece / llama2.c do. (Tokens longer
 *        than MAX_MERGE_TOKEN bytes are not split: the cost is quadratic in the length.)
 *   BPE  byte-level BPE (GPT-2): ByteLevel pre-tokenizer (with the split that GGUF's
 *        tokenizer.ggml.pre names, for the few we know), decoder ByteLevel, the merges.
 *   WPM  WordPiece with BertNormalizer, BertPreTokenizer, [CLS] $A [SEP]; the tokens are in HF
 *        form already ("word", "##piece").
 * The model object also carries "scores" and "types" (keys `tokenizers` ignores: checked with
 * tokenizers 0.23 for BPE and WordPiece) so that GGUF -> HF -> GGUF keeps them exactly;
 * tokenizer_json.c reads them back. Non-finite scores are written as "inf", "-inf", "nan"
 * (a NaN comes back as the canonical NaN, its payload is not kept).
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <cjson/cJSON.h>

#include "formats/formats_internal.h"

static const char SPACE_MARK[] = "\xe2\x96\x81"; /* U+2581 */

/* ---- token text -> id (open addressing, FNV-1a) ---- */
typedef struct tok_index {
    int32_t *slot;
    size_t mask;
    const sqz_vocab *v;
} tok_index;

static uint64_t fnv1a(const char *s, size_t n) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)s[i]) * 1099511628211ull;
    return h;
}

static bool index_build(tok_index *ix, const sqz_vocab *v) {
    size_t cap = 16;
    while (cap < (size_t)v->n_tokens * 2) cap *= 2;
    ix->slot = sqz__malloc(cap * sizeof *ix->slot);
    if (!ix->slot) return false;
    ix->mask = cap - 1;
    ix->v = v;
    for (size_t i = 0; i < cap; i++) ix->slot[i] = -1;
    for (int32_t i = 0; i < v->n_tokens; i++) {
        const char *t = v->tokens[i];
        size_t h = (size_t)fnv1a(t, strlen(t)) & ix->mask;
        bool dup = false;
        for (; ix->slot[h] >= 0; h = (h + 1) & ix->mask) {
            if (strcmp(v->tokens[ix->slot[h]], t) == 0) { dup = true; break; }
        }
        if (!dup) ix->slot[h] = i; /* the first id of a duplicated text */
    }
    return true;
}

/* Id of the n bytes at s, or -1. */
static int32_t index_find(const tok_index *ix, const char *s, size_t n) {
    for (size_t h = (size_t)fnv1a(s, n) & ix->mask; ix->slot[h] >= 0; h = (h + 1) & ix->mask) {
        const char *t = ix->v->tokens[ix->slot[h]];
        if (strlen(t) == n && memcmp(t, s, n) == 0) return ix->slot[h];
    }
    return -1;
}

/* ---- merges from scores ---- */
typedef struct cand {
    int32_t l, r, tok;      /* pieces and the merged token */
    float kl, kr, kt;       /* their sort keys (scores, NaN as -inf) */
    int64_t seq;            /* order of discovery, for stable sorting */
} cand;

static float score_key(const sqz_vocab *v, int32_t id) {
    float s = v->scores ? v->scores[id] : -(float)id;
    return isnan(s) ? -INFINITY : s;
}

static int cmp_local(const void *a, const void *b) {
    const cand *x = a, *y = b;
    if (x->kl != y->kl) return x->kl > y->kl ? -1 : 1;
    if (x->kr != y->kr) return x->kr > y->kr ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static int cmp_global(const void *a, const void *b) {
    const cand *x = a, *y = b;
    if (x->kt != y->kt) return x->kt > y->kt ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* Tokens longer than this (bytes) get no derived merges. */
#define MAX_MERGE_TOKEN 1024

static size_t utf8_len(unsigned char c) { return c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4; }

/* All merges for a vocab ordered as described at the top. *out is malloc'd. */
static sqz_status derive_merges(const sqz_vocab *v, cand **out, size_t *n_out) {
    *out = NULL;
    *n_out = 0;
    tok_index ix;
    if (!index_build(&ix, v)) return SQZ_ERR_NOMEM;
    size_t n = 0, cap = (size_t)v->n_tokens + 16;
    cand *c = sqz__malloc(cap * sizeof *c);
    if (!c) { free(ix.slot); return SQZ_ERR_NOMEM; }
    for (int32_t t = 0; t < v->n_tokens; t++) {
        const char *s = v->tokens[t];
        size_t len = strlen(s), start = n;
        if (len > MAX_MERGE_TOKEN) continue; /* splitting costs len^2; real tokens are far shorter */
        for (size_t k = utf8_len((unsigned char)s[0]); k < len; k += utf8_len((unsigned char)s[k])) {
            int32_t l = index_find(&ix, s, k), r = l >= 0 ? index_find(&ix, s + k, len - k) : -1;
            if (r < 0) continue;
            if (n == cap) {
                cand *nc = sqz__realloc(c, cap * 2 * sizeof *c);
                if (!nc) { free(c); free(ix.slot); return SQZ_ERR_NOMEM; }
                c = nc;
                cap *= 2;
            }
            c[n] = (cand){l, r, t, score_key(v, l), score_key(v, r), score_key(v, t), (int64_t)n};
            n++;
        }
        qsort(c + start, n - start, sizeof *c, cmp_local);
        for (size_t i = start; i < n; i++) c[i].seq = (int64_t)i;
    }
    qsort(c, n, sizeof *c, cmp_global);
    free(ix.slot);
    *out = c;
    *n_out = n;
    return SQZ_OK;
}

/* ---- building the JSON ---- */
/* cJSON_Add* return NULL on allocation failure; `ok` collects it. */
typedef struct jb {
    bool ok;
} jb;

static cJSON *add(jb *b, cJSON *parent, const char *key, cJSON *item) {
    if (!item) { b->ok = false; return NULL; }
    if (!parent) return item;
    bool fine = key ? cJSON_AddItemToObject(parent, key, item) : cJSON_AddItemToArray(parent, item);
    if (!fine) { cJSON_Delete(item); b->ok = false; return NULL; }
    return item;
}

static cJSON *add_str(jb *b, cJSON *o, const char *k, const char *s) { return add(b, o, k, cJSON_CreateString(s)); }
static cJSON *add_num(jb *b, cJSON *o, const char *k, double x) { return add(b, o, k, cJSON_CreateNumber(x)); }
static cJSON *add_bool(jb *b, cJSON *o, const char *k, bool x) { return add(b, o, k, cJSON_CreateBool(x)); }
static cJSON *add_null(jb *b, cJSON *o, const char *k) { return add(b, o, k, cJSON_CreateNull()); }
static cJSON *add_obj(jb *b, cJSON *o, const char *k) { return add(b, o, k, cJSON_CreateObject()); }
static cJSON *add_arr(jb *b, cJSON *o, const char *k) { return add(b, o, k, cJSON_CreateArray()); }

static cJSON *typed(jb *b, cJSON *parent, const char *type) {
    cJSON *o = add_obj(b, parent, NULL);
    if (o) add_str(b, o, "type", type);
    return o;
}

static const char *tok(const sqz_vocab *v, int32_t id) {
    return id >= 0 && id < v->n_tokens ? v->tokens[id] : NULL;
}

static int32_t type_of(const sqz_vocab *v, int32_t i) { return v->types ? v->types[i] : SQZ_TOKEN_NORMAL; }

/* added_tokens: control, unknown and user-defined tokens. */
static void added_tokens(jb *b, cJSON *root, const sqz_vocab *v) {
    cJSON *a = add_arr(b, root, "added_tokens");
    for (int32_t i = 0; a && i < v->n_tokens; i++) {
        int32_t t = type_of(v, i);
        if (t != SQZ_TOKEN_CONTROL && t != SQZ_TOKEN_UNKNOWN && t != SQZ_TOKEN_USER_DEFINED) continue;
        cJSON *e = add_obj(b, a, NULL);
        if (!e) return;
        add_num(b, e, "id", i);
        add_str(b, e, "content", v->tokens[i]);
        add_bool(b, e, "single_word", false);
        add_bool(b, e, "lstrip", false);
        add_bool(b, e, "rstrip", false);
        add_bool(b, e, "normalized", t == SQZ_TOKEN_USER_DEFINED);
        add_bool(b, e, "special", t != SQZ_TOKEN_USER_DEFINED);
    }
}

static void special_ref(jb *b, cJSON *arr, const char *name, int type_id) {
    cJSON *o = add_obj(b, arr, NULL);
    cJSON *s = o ? add_obj(b, o, "SpecialToken") : NULL;
    if (!s) return;
    add_str(b, s, "id", name);
    add_num(b, s, "type_id", type_id);
}

static void sequence_ref(jb *b, cJSON *arr, const char *id, int type_id) {
    cJSON *o = add_obj(b, arr, NULL);
    cJSON *s = o ? add_obj(b, o, "Sequence") : NULL;
    if (!s) return;
    add_str(b, s, "id", id);
    add_num(b, s, "type_id", type_id);
}

/* TemplateProcessing: [first] $A [last] (pair: [first] $A [last] [first] $B [last], BERT style
 * for WordPiece: [CLS] $A [SEP] $B [SEP]). first/last -1 when absent. */
static void template_processing(jb *b, cJSON *root, const sqz_vocab *v, int32_t first, int32_t last) {
    if (first < 0 && last < 0) {
        add_null(b, root, "post_processor");
        return;
    }
    cJSON *pp = add_obj(b, root, "post_processor");
    if (!pp) return;
    add_str(b, pp, "type", "TemplateProcessing");
    cJSON *single = add_arr(b, pp, "single"), *pair = add_arr(b, pp, "pair");
    if (!single || !pair) return;
    bool bert = v->kind == SQZ_VOCAB_WPM;
    if (first >= 0) special_ref(b, single, tok(v, first), 0);
    sequence_ref(b, single, "A", 0);
    if (last >= 0) special_ref(b, single, tok(v, last), 0);
    if (first >= 0) special_ref(b, pair, tok(v, first), 0);
    sequence_ref(b, pair, "A", 0);
    if (last >= 0) special_ref(b, pair, tok(v, last), 0);
    if (first >= 0 && !bert) special_ref(b, pair, tok(v, first), 1);
    sequence_ref(b, pair, "B", 1);
    if (last >= 0) special_ref(b, pair, tok(v, last), 1);
    cJSON *st = add_obj(b, pp, "special_tokens");
    int32_t ids[2] = {first, last};
    for (int k = 0; st && k < 2; k++) {
        if (ids[k] < 0 || cJSON_GetObjectItemCaseSensitive(st, tok(v, ids[k]))) continue;
        cJSON *e = add_obj(b, st, tok(v, ids[k]));
        if (!e) return;
        add_str(b, e, "id", tok(v, ids[k]));
        cJSON *a = add_arr(b, e, "ids");
        if (a) add_num(b, a, NULL, ids[k]);
        a = add_arr(b, e, "tokens");
        if (a) add_str(b, a, NULL, tok(v, ids[k]));
    }
}

static void replace_step(jb *b, cJSON *arr, const char *from, const char *to) {
    cJSON *r = typed(b, arr, "Replace");
    cJSON *p = r ? add_obj(b, r, "pattern") : NULL;
    if (!p) return;
    add_str(b, p, "String", from);
    add_str(b, r, "content", to);
}

static void byte_level(jb *b, cJSON *parent, const char *key, bool prefix, bool trim, bool regex) {
    cJSON *o = key ? add_obj(b, parent, key) : add_obj(b, parent, NULL);
    if (!o) return;
    add_str(b, o, "type", "ByteLevel");
    add_bool(b, o, "add_prefix_space", prefix);
    add_bool(b, o, "trim_offsets", trim);
    add_bool(b, o, "use_regex", regex);
}

static void scores_and_types(jb *b, cJSON *model, const sqz_vocab *v) {
    if (v->scores) {
        cJSON *a = add_arr(b, model, "scores");
        for (int32_t i = 0; a && i < v->n_tokens; i++) {
            float s = v->scores[i];
            if (isfinite(s)) add_num(b, a, NULL, s);
            else add_str(b, a, NULL, isnan(s) ? "nan" : s > 0 ? "inf" : "-inf");
        }
    }
    if (v->types) {
        cJSON *a = add_arr(b, model, "types");
        for (int32_t i = 0; a && i < v->n_tokens; i++) add_num(b, a, NULL, v->types[i]);
    }
}

/* "merges": string form "a b" unless a piece holds a space, then the pair form. */
static void merges_array(jb *b, cJSON *model, const char *const *left, const char *const *right, const size_t *ll,
                         size_t n) {
    bool pairs = false;
    for (size_t i = 0; i < n && !pairs; i++) pairs = memchr(left[i], ' ', ll[i]) || strchr(right[i], ' ');
    cJSON *a = add_arr(b, model, "merges");
    char *buf = NULL;
    size_t cap = 0;
    for (size_t i = 0; a && b->ok && i < n; i++) {
        if (pairs) {
            cJSON *p = add_arr(b, a, NULL);
            if (!p) break;
            char *l = sqz__strndup(left[i], ll[i]);
            if (!l) { b->ok = false; break; }
            add_str(b, p, NULL, l);
            free(l);
            add_str(b, p, NULL, right[i]);
        } else {
            size_t need = ll[i] + strlen(right[i]) + 2;
            if (need > cap) {
                char *nb = sqz__realloc(buf, need);
                if (!nb) { b->ok = false; break; }
                buf = nb;
                cap = need;
            }
            snprintf(buf, need, "%.*s %s", (int)ll[i], left[i], right[i]);
            add_str(b, a, NULL, buf);
        }
    }
    free(buf);
}

/* Merges of the vocab: v->merges split at their first space, else derived from scores (or,
 * without scores, from id order, lower ids merging first). */
static sqz_status write_merges(jb *b, cJSON *model, const sqz_vocab *v) {
    size_t n = v->merges ? (size_t)v->n_merges : 0;
    cand *c = NULL;
    if (!v->merges) SQZ_TRY(derive_merges(v, &c, &n));
    const char **left = sqz__calloc(n ? n : 1, sizeof *left), **right = sqz__calloc(n ? n : 1, sizeof *right);
    size_t *ll = sqz__calloc(n ? n : 1, sizeof *ll);
    if (!left || !right || !ll) {
        free(left); free(right); free(ll); free(c);
        return SQZ_ERR_NOMEM;
    }
    for (size_t i = 0; i < n; i++) {
        if (c) {
            left[i] = v->tokens[c[i].l];
            ll[i] = strlen(left[i]);
            right[i] = v->tokens[c[i].r];
        } else {
            const char *m = v->merges[i], *sp = strchr(m, ' ');
            left[i] = m;
            ll[i] = sp ? (size_t)(sp - m) : strlen(m);
            right[i] = sp ? sp + 1 : "";
        }
    }
    merges_array(b, model, left, right, ll, n);
    free(left); free(right); free(ll); free(c);
    return SQZ_OK;
}

static cJSON *vocab_object(jb *b, cJSON *model, const sqz_vocab *v) {
    cJSON *o = add_obj(b, model, "vocab");
    for (int32_t i = 0; o && b->ok && i < v->n_tokens; i++) add_num(b, o, v->tokens[i], i);
    return o;
}

static sqz_status build_spm(jb *b, cJSON *root, const sqz_vocab *v) {
    added_tokens(b, root, v);
    cJSON *norm = typed(b, NULL, "Sequence");
    add(b, root, "normalizer", norm);
    cJSON *ns = norm ? add_arr(b, norm, "normalizers") : NULL;
    if (ns && v->add_space_prefix) {
        cJSON *p = typed(b, ns, "Prepend");
        if (p) add_str(b, p, "prepend", SPACE_MARK);
    }
    if (ns) replace_step(b, ns, " ", SPACE_MARK);
    add_null(b, root, "pre_tokenizer");
    template_processing(b, root, v, v->add_bos ? v->bos : -1, v->add_eos ? v->eos : -1);
    cJSON *dec = typed(b, NULL, "Sequence");
    add(b, root, "decoder", dec);
    cJSON *ds = dec ? add_arr(b, dec, "decoders") : NULL;
    if (ds) {
        replace_step(b, ds, SPACE_MARK, " ");
        typed(b, ds, "ByteFallback");
        typed(b, ds, "Fuse");
        if (v->add_space_prefix) {
            cJSON *s = typed(b, ds, "Strip");
            if (s) {
                add_str(b, s, "content", " ");
                add_num(b, s, "start", 1);
                add_num(b, s, "stop", 0);
            }
        }
    }
    cJSON *m = add_obj(b, root, "model");
    if (!m) return SQZ_ERR_NOMEM;
    add_str(b, m, "type", "BPE");
    add_null(b, m, "dropout");
    if (tok(v, v->unk)) add_str(b, m, "unk_token", tok(v, v->unk));
    else add_null(b, m, "unk_token");
    add_null(b, m, "continuing_subword_prefix");
    add_null(b, m, "end_of_word_suffix");
    add_bool(b, m, "fuse_unk", true);
    add_bool(b, m, "byte_fallback", true);
    add_bool(b, m, "ignore_merges", false);
    vocab_object(b, m, v);
    SQZ_TRY(write_merges(b, m, v));
    scores_and_types(b, m, v);
    return SQZ_OK;
}

/* Pre-tokenizer regexes of the GGUF tokenizer.ggml.pre names we know (llama.cpp llama-vocab.cpp
 * and the models' HF tokenizer.json files); others get GPT-2's ByteLevel split. */
static const struct { const char *pre; const char *split; bool digits; } pre_table[] = {
    {"smollm", NULL, true},
    {"llama-bpe",
     "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
     "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+", false},
    {"qwen2",
     "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
     "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+", false},
    {"gpt-4o", /* o200k: Phi-4-mini */
     "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+(?i:'s|'t|'re|'ve|'m|"
     "'ll|'d)?|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?i:'s|'t|'re|"
     "'ve|'m|'ll|'d)?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+", false},
};

const char *sqz__hf_pre_name(const char *split) {
    for (size_t i = 0; split && i < sizeof pre_table / sizeof *pre_table; i++) {
        if (pre_table[i].split && strcmp(pre_table[i].split, split) == 0) return pre_table[i].pre;
    }
    return NULL;
}

const char *sqz__hf_pre_name_digits(void) {
    for (size_t i = 0; i < sizeof pre_table / sizeof *pre_table; i++)
        if (!pre_table[i].split && pre_table[i].digits) return pre_table[i].pre;
    return NULL;
}

static sqz_status build_bpe(jb *b, cJSON *root, const sqz_vocab *v) {
    added_tokens(b, root, v);
    add_null(b, root, "normalizer");
    const char *split = NULL;
    bool digits = false;
    for (size_t i = 0; v->pre && i < sizeof pre_table / sizeof *pre_table; i++) {
        if (strcmp(v->pre, pre_table[i].pre) == 0) { split = pre_table[i].split; digits = pre_table[i].digits; }
    }
    if (split || digits) {
        cJSON *seq = typed(b, NULL, "Sequence");
        add(b, root, "pre_tokenizer", seq);
        cJSON *ps = seq ? add_arr(b, seq, "pretokenizers") : NULL;
        if (ps && digits) {
            cJSON *d = typed(b, ps, "Digits");
            if (d) add_bool(b, d, "individual_digits", true);
        }
        if (ps && split) {
            cJSON *s = typed(b, ps, "Split");
            cJSON *p = s ? add_obj(b, s, "pattern") : NULL;
            if (p) {
                add_str(b, p, "Regex", split);
                add_str(b, s, "behavior", "Isolated");
                add_bool(b, s, "invert", false);
            }
        }
        if (ps) byte_level(b, ps, NULL, false, true, !split);
    } else {
        byte_level(b, root, "pre_tokenizer", false, true, true);
    }
    if (v->add_bos || v->add_eos) template_processing(b, root, v, v->add_bos ? v->bos : -1, v->add_eos ? v->eos : -1);
    else byte_level(b, root, "post_processor", true, false, true);
    byte_level(b, root, "decoder", true, true, true);
    cJSON *m = add_obj(b, root, "model");
    if (!m) return SQZ_ERR_NOMEM;
    add_str(b, m, "type", "BPE");
    add_null(b, m, "dropout");
    if (tok(v, v->unk)) add_str(b, m, "unk_token", tok(v, v->unk));
    else add_null(b, m, "unk_token");
    add_str(b, m, "continuing_subword_prefix", "");
    add_str(b, m, "end_of_word_suffix", "");
    add_bool(b, m, "fuse_unk", false);
    add_bool(b, m, "byte_fallback", false);
    add_bool(b, m, "ignore_merges", split != NULL && strcmp(v->pre, "llama-bpe") == 0);
    vocab_object(b, m, v);
    SQZ_TRY(write_merges(b, m, v));
    scores_and_types(b, m, v);
    return SQZ_OK;
}

/* An uncased BERT vocab has no upper-case ASCII letters outside its [SPECIAL] tokens. */
static bool wpm_lowercase(const sqz_vocab *v) {
    for (int32_t i = 0; i < v->n_tokens; i++) {
        const char *t = v->tokens[i];
        size_t n = strlen(t);
        if (n >= 2 && t[0] == '[' && t[n - 1] == ']') continue;
        for (; *t; t++) {
            if (*t >= 'A' && *t <= 'Z') return false;
        }
    }
    return true;
}

static sqz_status build_wpm(jb *b, cJSON *root, const sqz_vocab *v) {
    added_tokens(b, root, v);
    cJSON *n = typed(b, NULL, "BertNormalizer");
    add(b, root, "normalizer", n);
    if (n) {
        add_bool(b, n, "clean_text", true);
        add_bool(b, n, "handle_chinese_chars", true);
        add_null(b, n, "strip_accents");
        add_bool(b, n, "lowercase", wpm_lowercase(v));
    }
    add(b, root, "pre_tokenizer", typed(b, NULL, "BertPreTokenizer"));
    int32_t cls = v->cls >= 0 ? v->cls : v->bos, sep = v->sep >= 0 ? v->sep : v->eos;
    template_processing(b, root, v, v->add_bos ? cls : -1, v->add_eos ? sep : -1);
    cJSON *d = typed(b, NULL, "WordPiece");
    add(b, root, "decoder", d);
    if (d) {
        add_str(b, d, "prefix", "##");
        add_bool(b, d, "cleanup", true);
    }
    cJSON *m = add_obj(b, root, "model");
    if (!m) return SQZ_ERR_NOMEM;
    add_str(b, m, "type", "WordPiece");
    add_str(b, m, "unk_token", tok(v, v->unk) ? tok(v, v->unk) : "[UNK]");
    add_str(b, m, "continuing_subword_prefix", "##");
    add_num(b, m, "max_input_chars_per_word", 100);
    vocab_object(b, m, v);
    scores_and_types(b, m, v);
    return SQZ_OK;
}

char *sqz__tokenizer_json_write(const sqz_vocab *v) {
    if (v->hf_json) return sqz__strdup(v->hf_json);
    if (v->n_tokens <= 0 || !v->tokens) {
        SQZ_ERROR(SQZ_ERR_INVALID_ARG, "tokenizer.json: the model has no vocabulary to write");
        return NULL;
    }
    jb b = {.ok = true};
    cJSON *root = cJSON_CreateObject();
    if (!root) { SQZ_ERROR(SQZ_ERR_NOMEM, "tokenizer.json: out of memory"); return NULL; }
    add_str(&b, root, "version", "1.0");
    add_null(&b, root, "truncation");
    add_null(&b, root, "padding");
    sqz_status s;
    switch (v->kind) {
    case SQZ_VOCAB_SPM: s = build_spm(&b, root, v); break;
    case SQZ_VOCAB_BPE: s = build_bpe(&b, root, v); break;
    case SQZ_VOCAB_WPM: s = build_wpm(&b, root, v); break;
    default: s = SQZ_ERROR(SQZ_ERR_UNSUPPORTED, "tokenizer.json: no tokenizer kind to write (vocab kind %s)",
                           sqz_vocab_kind_name(v->kind));
    }
    char *out = NULL;
    if (s == SQZ_OK && b.ok) out = cJSON_Print(root);
    cJSON_Delete(root);
    if (s == SQZ_OK && !out) SQZ_ERROR(SQZ_ERR_NOMEM, "tokenizer.json: out of memory building the JSON");
    return out;
}

/* ---- tokenizer_config.json ---- */
char *sqz__tokenizer_config_write(const sqz_vocab *v) {
    if (v->hf_config_json) return sqz__strdup(v->hf_config_json);
    jb b = {.ok = true};
    cJSON *root = cJSON_CreateObject();
    if (!root) { SQZ_ERROR(SQZ_ERR_NOMEM, "tokenizer_config.json: out of memory"); return NULL; }
    static const char *const cls_names[] = {
        [SQZ_VOCAB_NONE] = "PreTrainedTokenizerFast", [SQZ_VOCAB_SPM] = "LlamaTokenizerFast",
        [SQZ_VOCAB_BPE] = "GPT2TokenizerFast", [SQZ_VOCAB_WPM] = "BertTokenizerFast"};
    add_bool(&b, root, "add_bos_token", v->add_bos);
    add_bool(&b, root, "add_eos_token", v->add_eos);
    const struct { const char *key; int32_t id; } sp[] = {
        {"bos_token", v->bos}, {"eos_token", v->eos}, {"unk_token", v->unk}, {"pad_token", v->pad},
        {"sep_token", v->sep}, {"cls_token", v->cls}, {"mask_token", v->mask},
    };
    for (size_t i = 0; i < sizeof sp / sizeof *sp; i++) {
        if (tok(v, sp[i].id)) add_str(&b, root, sp[i].key, tok(v, sp[i].id));
        else if (i < 3) add_null(&b, root, sp[i].key);
    }
    add_bool(&b, root, "clean_up_tokenization_spaces", v->kind == SQZ_VOCAB_WPM);
    if (v->kind == SQZ_VOCAB_SPM) add_bool(&b, root, "legacy", false);
    if (v->kind == SQZ_VOCAB_WPM) add_bool(&b, root, "do_lower_case", wpm_lowercase(v));
    /* transformers' VERY_LARGE_INTEGER: the vocab does not know the model's context length. */
    add(&b, root, "model_max_length", cJSON_CreateRaw("1000000000000000019884624838656"));
    int k = v->kind >= SQZ_VOCAB_NONE && v->kind <= SQZ_VOCAB_WPM ? (int)v->kind : 0;
    add_str(&b, root, "tokenizer_class", cls_names[k]);
    if (v->chat_template) add_str(&b, root, "chat_template", v->chat_template);
    char *out = b.ok ? cJSON_Print(root) : NULL;
    cJSON_Delete(root);
    if (!out) SQZ_ERROR(SQZ_ERR_NOMEM, "tokenizer_config.json: out of memory building the JSON");
    return out;
}

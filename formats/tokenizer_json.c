/*
 * formats/tokenizer_json.c - HF tokenizer.json (+ tokenizer_config.json) into an sqz_vocab.
 * The writers are in tokenizer_json_write.c.
 *
 * Models understood (the "model" object of tokenizer.json, as the `tokenizers` library writes it):
 *   BPE       vocab {token: id}, merges ["a b", ...] or [["a", "b"], ...]. Kind BPE (GGUF "gpt2")
 *             when a ByteLevel pre-tokenizer or decoder is present (GPT-2, SmolLM2); kind SPM
 *             (GGUF "llama") when byte_fallback is set or a Metaspace / Prepend("▁") is present
 *             (SentencePiece models converted by transformers, tinystories-656K).
 *   WordPiece vocab {token: id}. Kind WPM. Tokens stay in HF form ("word", "##piece"), the form
 *             runtime/tokenizer_wpm.c expects. (llama.cpp's BERT GGUFs spell them "▁word" and
 *             "piece": convert_hf_to_gguf.py's "phantom" mapping; converting is the GGUF side's job.)
 *   Unigram   vocab [[piece, score], ...]. Kind SPM with the scores.
 * Ids come from the model vocab and from added_tokens (which win where both name an id); ids
 * no entry names become "[PAD<id>]" of type UNUSED, as llama.cpp's converter does.
 *
 * Scores of a BPE-based SPM vocab: the array under model.scores when present (sqz writes it so
 * that GGUF -> HF -> GGUF keeps them exactly; `tokenizers` ignores unknown keys in the model
 * object), else derived from the merge ranks so that merging by score follows the merges:
 * the token made by merge r scores -r; tokens no merge makes score -(n_merges + id); control,
 * unknown, byte and unused tokens score 0 (SentencePiece's convention).
 * Types: model.types when sqz wrote it, else added special tokens are CONTROL (the unk token
 * UNKNOWN), other added tokens USER_DEFINED, "<0xNN>" BYTE under byte fallback, the rest NORMAL.
 */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <cjson/cJSON.h>

#include "formats/formats_internal.h"

static const char SPACE_MARK[] = "\xe2\x96\x81"; /* U+2581 */

typedef struct tj {
    const char *path;
    const cJSON *root, *model, *cfg;
    const char *type;   /* model.type */
    sqz_vocab *v;
    bool *added;        /* n_tokens flags: came from added_tokens */
    bool *special;      /* n_tokens flags: added with special: true */
} tj;

static const char *obj_str(const cJSON *o, const char *key) {
    const cJSON *s = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsString(s) ? s->valuestring : NULL;
}

/* A token id from a JSON number: integral and in range. */
static bool json_id(const cJSON *n, int32_t *out) {
    if (!cJSON_IsNumber(n)) return false;
    double d = n->valuedouble;
    if (!(d >= 0 && d < SQZ__MAX_VOCAB) || d != floor(d)) return false;
    *out = (int32_t)d;
    return true;
}

/* True if a node of pre_tokenizer / normalizer / decoder trees (Sequence nests them under
 * "pretokenizers", "normalizers" or "decoders") has type `type`; *found is that node. */
static bool tree_has(const cJSON *node, const char *type, const cJSON **found) {
    if (!cJSON_IsObject(node)) return false;
    const char *t = obj_str(node, "type");
    if (t && strcmp(t, type) == 0) {
        if (found) *found = node;
        return true;
    }
    static const char *const subs[] = {"pretokenizers", "normalizers", "decoders", "processors"};
    for (size_t i = 0; i < sizeof subs / sizeof *subs; i++) {
        const cJSON *a = cJSON_GetObjectItemCaseSensitive(node, subs[i]);
        const cJSON *e;
        cJSON_ArrayForEach(e, a) {
            if (tree_has(e, type, found)) return true;
        }
    }
    return false;
}

static int32_t find_token(const sqz_vocab *v, const char *s) {
    for (int32_t i = 0; i < v->n_tokens; i++) {
        if (v->tokens[i] && strcmp(v->tokens[i], s) == 0) return i;
    }
    return -1;
}

/* A special token named in tokenizer_config.json: a string or an AddedToken object. */
static const char *cfg_token(const cJSON *cfg, const char *key) {
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(cfg, key);
    if (cJSON_IsString(x)) return x->valuestring;
    if (cJSON_IsObject(x)) return obj_str(x, "content");
    return NULL;
}

/* Sets tokens[id] = s (copied), replacing an earlier entry only when `replace`. */
static sqz_status put_token(tj *c, int32_t id, const char *s, bool replace, const char *where) {
    sqz_vocab *v = c->v;
    SQZ_RETURN_IF(id < 0 || id >= v->n_tokens, SQZ_ERR_FORMAT, "%s: %s: id %" PRId32 " out of range", c->path,
                  where, id);
    SQZ_RETURN_IF(!sqz__utf8_valid(s, strlen(s)) || !*s, SQZ_ERR_FORMAT,
                  "%s: %s: token %" PRId32 " is empty or not valid UTF-8", c->path, where, id);
    if (v->tokens[id]) {
        if (strcmp(v->tokens[id], s) == 0) return SQZ_OK;
        SQZ_RETURN_IF(!replace, SQZ_ERR_FORMAT, "%s: %s: id %" PRId32 " given to both '%s' and '%s'", c->path, where,
                      id, v->tokens[id], s);
        free(v->tokens[id]);
        v->tokens[id] = NULL;
    }
    v->tokens[id] = sqz__strdup(s);
    return v->tokens[id] ? SQZ_OK : SQZ_ERR_NOMEM;
}

/* Largest id named by the model vocab and added_tokens, + 1; validates the shapes. */
static sqz_status count_ids(tj *c, const cJSON *vocab, const cJSON *added, int32_t *n) {
    int64_t max = -1;
    const cJSON *e;
    if (strcmp(c->type, "Unigram") == 0) {
        SQZ_RETURN_IF(!cJSON_IsArray(vocab), SQZ_ERR_FORMAT, "%s: model.vocab of a Unigram model is not an array",
                      c->path);
        int64_t k = cJSON_GetArraySize(vocab);
        max = k - 1;
    } else {
        SQZ_RETURN_IF(!cJSON_IsObject(vocab), SQZ_ERR_FORMAT, "%s: model.vocab is not an object", c->path);
        cJSON_ArrayForEach(e, vocab) {
            int32_t id;
            SQZ_RETURN_IF(!json_id(e, &id), SQZ_ERR_FORMAT, "%s: model.vocab: token '%s' has no valid id", c->path,
                          e->string ? e->string : "");
            if (id > max) max = id;
        }
    }
    SQZ_RETURN_IF(added && !cJSON_IsArray(added), SQZ_ERR_FORMAT, "%s: added_tokens is not an array", c->path);
    cJSON_ArrayForEach(e, added) {
        int32_t id;
        SQZ_RETURN_IF(!json_id(cJSON_GetObjectItemCaseSensitive(e, "id"), &id) || !obj_str(e, "content"),
                      SQZ_ERR_FORMAT, "%s: added_tokens: an entry without a valid id and content", c->path);
        if (id > max) max = id;
    }
    SQZ_RETURN_IF(max < 0, SQZ_ERR_FORMAT, "%s: no tokens", c->path);
    SQZ_RETURN_IF(max >= SQZ__MAX_VOCAB, SQZ_ERR_FORMAT, "%s: token id %" PRId64 " beyond the limit", c->path, max);
    *n = (int32_t)(max + 1);
    return SQZ_OK;
}

static sqz_status read_tokens(tj *c, const cJSON *vocab, const cJSON *added) {
    sqz_vocab *v = c->v;
    const cJSON *e;
    bool unigram = strcmp(c->type, "Unigram") == 0;
    int32_t i = 0;
    cJSON_ArrayForEach(e, vocab) {
        if (unigram) {
            const cJSON *piece = cJSON_GetArrayItem(e, 0), *score = cJSON_GetArrayItem(e, 1);
            SQZ_RETURN_IF(!cJSON_IsArray(e) || !cJSON_IsString(piece) || !cJSON_IsNumber(score), SQZ_ERR_FORMAT,
                          "%s: model.vocab[%" PRId32 "] is not a [piece, score] pair", c->path, i);
            SQZ_TRY(put_token(c, i, piece->valuestring, false, "model.vocab"));
            v->scores[i] = (float)score->valuedouble;
        } else {
            int32_t id = 0;
            json_id(e, &id); /* checked by count_ids */
            SQZ_TRY(put_token(c, id, e->string, false, "model.vocab"));
        }
        i++;
    }
    cJSON_ArrayForEach(e, added) {
        int32_t id = 0;
        json_id(cJSON_GetObjectItemCaseSensitive(e, "id"), &id);
        SQZ_TRY(put_token(c, id, obj_str(e, "content"), true, "added_tokens"));
        c->added[id] = true;
        c->special[id] = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(e, "special"));
    }
    for (int32_t k = 0; k < v->n_tokens; k++) {
        if (v->tokens[k]) continue;
        v->tokens[k] = sqz__asprintf("[PAD%" PRId32 "]", k);
        if (!v->tokens[k]) return SQZ_ERR_NOMEM;
        v->types[k] = SQZ_TOKEN_UNUSED;
    }
    return SQZ_OK;
}

static sqz_status read_merges(tj *c) {
    sqz_vocab *v = c->v;
    const cJSON *merges = cJSON_GetObjectItemCaseSensitive(c->model, "merges");
    if (!merges) return SQZ_OK;
    SQZ_RETURN_IF(!cJSON_IsArray(merges), SQZ_ERR_FORMAT, "%s: model.merges is not an array", c->path);
    int n = cJSON_GetArraySize(merges);
    if (n == 0) return SQZ_OK;
    v->merges = sqz__calloc((size_t)n, sizeof *v->merges);
    if (!v->merges) return SQZ_ERR_NOMEM;
    v->n_merges = n; /* calloc'd: clearing frees what was filled */
    const cJSON *e;
    int32_t i = 0;
    cJSON_ArrayForEach(e, merges) {
        if (cJSON_IsString(e)) {
            const char *sp = strchr(e->valuestring, ' ');
            SQZ_RETURN_IF(!sp || sp == e->valuestring || !sp[1], SQZ_ERR_FORMAT,
                          "%s: model.merges[%" PRId32 "] '%s' is not \"left right\"", c->path, i, e->valuestring);
            v->merges[i] = sqz__strdup(e->valuestring);
        } else {
            const cJSON *a = cJSON_GetArrayItem(e, 0), *b = cJSON_GetArrayItem(e, 1);
            SQZ_RETURN_IF(!cJSON_IsArray(e) || cJSON_GetArraySize(e) != 2 || !cJSON_IsString(a) || !cJSON_IsString(b) ||
                              !*a->valuestring || !*b->valuestring,
                          SQZ_ERR_FORMAT, "%s: model.merges[%" PRId32 "] is not a pair of strings", c->path, i);
            v->merges[i] = sqz__asprintf("%s %s", a->valuestring, b->valuestring);
        }
        if (!v->merges[i]) return SQZ_ERR_NOMEM;
        SQZ_RETURN_IF(!sqz__utf8_valid(v->merges[i], strlen(v->merges[i])), SQZ_ERR_FORMAT,
                      "%s: model.merges[%" PRId32 "] is not valid UTF-8", c->path, i);
        i++;
    }
    return SQZ_OK;
}

static bool is_byte_token(const char *s) {
    static const char hex[] = "0123456789ABCDEFabcdef";
    return strlen(s) == 6 && memcmp(s, "<0x", 3) == 0 && s[5] == '>' && strchr(hex, s[3]) && strchr(hex, s[4]);
}

/* model.types written by sqz: n_tokens valid sqz_token_type values, else false. */
static bool embedded_types(tj *c) {
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(c->model, "types");
    sqz_vocab *v = c->v;
    if (!cJSON_IsArray(a) || cJSON_GetArraySize(a) != v->n_tokens) return false;
    const cJSON *e;
    cJSON_ArrayForEach(e, a) {
        if (!cJSON_IsNumber(e) || e->valueint < SQZ_TOKEN_NORMAL || e->valueint > SQZ_TOKEN_BYTE) return false;
    }
    int32_t i = 0;
    cJSON_ArrayForEach(e, a) v->types[i++] = e->valueint;
    return true;
}

static void infer_types(tj *c, bool byte_fallback) {
    sqz_vocab *v = c->v;
    for (int32_t i = 0; i < v->n_tokens; i++) {
        if (v->types[i] == SQZ_TOKEN_UNUSED) continue;
        if (i == v->unk) v->types[i] = SQZ_TOKEN_UNKNOWN;
        else if (c->added[i]) v->types[i] = c->special[i] ? SQZ_TOKEN_CONTROL : SQZ_TOKEN_USER_DEFINED;
        else if (byte_fallback && is_byte_token(v->tokens[i])) v->types[i] = SQZ_TOKEN_BYTE;
        else v->types[i] = SQZ_TOKEN_NORMAL;
    }
}

/* A score from model.scores: a number, or "inf" / "-inf" / "nan" (sqz writes non-finite
 * scores as strings, JSON having no literal for them). */
static bool score_value(const cJSON *e, float *out) {
    if (cJSON_IsNumber(e)) { *out = (float)e->valuedouble; return true; }
    if (!cJSON_IsString(e)) return false;
    if (strcmp(e->valuestring, "inf") == 0) *out = INFINITY;
    else if (strcmp(e->valuestring, "-inf") == 0) *out = -INFINITY;
    else if (strcmp(e->valuestring, "nan") == 0) *out = NAN;
    else return false;
    return true;
}

/* Hash of a string for the merge-rank lookup (FNV-1a). */
static uint64_t fnv1a(const char *s, size_t n) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)s[i]) * 1099511628211ull;
    return h;
}

/* Scores of a BPE-based SPM vocab (see the file comment). */
static sqz_status spm_scores(tj *c) {
    sqz_vocab *v = c->v;
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(c->model, "scores");
    if (cJSON_IsArray(a) && cJSON_GetArraySize(a) == v->n_tokens) {
        const cJSON *e;
        int32_t i = 0;
        cJSON_ArrayForEach(e, a) {
            SQZ_RETURN_IF(!score_value(e, &v->scores[i]), SQZ_ERR_FORMAT, "%s: model.scores[%" PRId32
                          "] is not a number", c->path, i);
            i++;
        }
        return SQZ_OK;
    }
    /* rank[id] = first merge making token id. Hash table of token ids by text. */
    size_t cap = 16;
    while (cap < (size_t)v->n_tokens * 2) cap *= 2;
    int32_t *slot = sqz__malloc(cap * sizeof *slot);
    int64_t *rank = sqz__malloc((size_t)v->n_tokens * sizeof *rank);
    if (!slot || !rank) { free(slot); free(rank); return SQZ_ERR_NOMEM; }
    for (size_t i = 0; i < cap; i++) slot[i] = -1;
    for (int32_t i = 0; i < v->n_tokens; i++) {
        rank[i] = -1;
        size_t h = (size_t)fnv1a(v->tokens[i], strlen(v->tokens[i])) & (cap - 1);
        while (slot[h] >= 0) h = (h + 1) & (cap - 1);
        slot[h] = i;
    }
    for (int32_t r = 0; r < v->n_merges; r++) {
        const char *m = v->merges[r], *sp = strchr(m, ' ');
        size_t nl = (size_t)(sp - m), nr = strlen(sp + 1);
        /* the merged text without the space */
        char buf[512];
        if (nl + nr >= sizeof buf) continue; /* such long tokens do not occur; they keep the default */
        memcpy(buf, m, nl);
        memcpy(buf + nl, sp + 1, nr + 1);
        size_t h = (size_t)fnv1a(buf, nl + nr) & (cap - 1);
        for (; slot[h] >= 0; h = (h + 1) & (cap - 1)) {
            if (strcmp(v->tokens[slot[h]], buf) == 0) {
                if (rank[slot[h]] < 0) rank[slot[h]] = r;
                break;
            }
        }
    }
    for (int32_t i = 0; i < v->n_tokens; i++) {
        int32_t t = v->types[i];
        if (t == SQZ_TOKEN_CONTROL || t == SQZ_TOKEN_UNKNOWN || t == SQZ_TOKEN_BYTE || t == SQZ_TOKEN_UNUSED)
            v->scores[i] = 0.f;
        else if (rank[i] >= 0) v->scores[i] = -(float)rank[i];
        else v->scores[i] = -(float)((int64_t)v->n_merges + i);
    }
    free(slot);
    free(rank);
    return SQZ_OK;
}

/* Special ids and flags: tokenizer.json's post-processor and model.unk_token, then
 * tokenizer_config.json (which wins). */
static void read_specials(tj *c) {
    sqz_vocab *v = c->v;
    const char *unk = obj_str(c->model, "unk_token");
    if (unk) v->unk = find_token(v, unk);

    int32_t first = -1, last = -1;
    const cJSON *pp = cJSON_GetObjectItemCaseSensitive(c->root, "post_processor");
    const cJSON *tp = NULL;
    if (tree_has(pp, "TemplateProcessing", &tp)) {
        const cJSON *single = cJSON_GetObjectItemCaseSensitive(tp, "single");
        int n = cJSON_GetArraySize(single);
        const cJSON *f = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(single, 0), "SpecialToken");
        const cJSON *l = n > 1 ? cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(single, n - 1), "SpecialToken")
                               : NULL;
        const cJSON *st = cJSON_GetObjectItemCaseSensitive(tp, "special_tokens");
        const cJSON *ends[2] = {f, l};
        int32_t *ids[2] = {&first, &last};
        for (int k = 0; k < 2; k++) {
            const char *name = obj_str(ends[k], "id");
            if (!name) continue;
            const cJSON *ent = cJSON_GetObjectItemCaseSensitive(st, name);
            int32_t id;
            if (json_id(cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(ent, "ids"), 0), &id) && id < v->n_tokens)
                *ids[k] = id;
            else
                *ids[k] = find_token(v, name);
        }
    } else if (tree_has(pp, "BertProcessing", &tp) || tree_has(pp, "RobertaProcessing", &tp)) {
        int32_t id;
        if (json_id(cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(tp, "cls"), 1), &id) && id < v->n_tokens)
            first = id;
        if (json_id(cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(tp, "sep"), 1), &id) && id < v->n_tokens)
            last = id;
    }
    if (v->kind == SQZ_VOCAB_WPM) {
        v->cls = first;
        v->sep = last;
    }
    v->bos = first;
    v->add_bos = first >= 0;
    if (v->kind == SQZ_VOCAB_WPM) v->eos = last;
    v->add_eos = last >= 0;

    /* tokenizer_config.json */
    static const struct { const char *key; size_t off; } names[] = {
        {"bos_token", offsetof(sqz_vocab, bos)}, {"eos_token", offsetof(sqz_vocab, eos)},
        {"unk_token", offsetof(sqz_vocab, unk)}, {"pad_token", offsetof(sqz_vocab, pad)},
        {"sep_token", offsetof(sqz_vocab, sep)}, {"cls_token", offsetof(sqz_vocab, cls)},
        {"mask_token", offsetof(sqz_vocab, mask)},
    };
    for (size_t k = 0; c->cfg && k < sizeof names / sizeof *names; k++) {
        const char *s = cfg_token(c->cfg, names[k].key);
        int32_t id = s ? find_token(v, s) : -1;
        if (id >= 0) *(int32_t *)((char *)v + names[k].off) = id;
    }
    const cJSON *b = cJSON_GetObjectItemCaseSensitive(c->cfg, "add_bos_token");
    if (cJSON_IsBool(b)) v->add_bos = cJSON_IsTrue(b);
    b = cJSON_GetObjectItemCaseSensitive(c->cfg, "add_eos_token");
    if (cJSON_IsBool(b)) v->add_eos = cJSON_IsTrue(b);
    if (v->kind == SQZ_VOCAB_WPM) { /* llama.cpp's BERT convention: BOS = [CLS], EOS = [SEP] */
        if (v->cls >= 0) v->bos = v->cls;
        if (v->sep >= 0) v->eos = v->sep;
    }
    /* Last resorts for SentencePiece-style vocabs without a config. */
    if (v->kind == SQZ_VOCAB_SPM) {
        if (v->bos < 0 && !c->cfg) v->bos = find_token(v, "<s>");
        if (v->eos < 0) v->eos = find_token(v, "</s>");
        if (v->unk < 0) v->unk = find_token(v, "<unk>");
    }
    const cJSON *pad = cJSON_GetObjectItemCaseSensitive(c->root, "padding");
    int32_t pid;
    if (v->pad < 0 && json_id(cJSON_GetObjectItemCaseSensitive(pad, "pad_id"), &pid) && pid < v->n_tokens) v->pad = pid;
}

/* chat_template: a string, or a list of {name, template} (the "default" one, else the first). */
static sqz_status read_chat_template(tj *c) {
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(c->cfg, "chat_template");
    const char *s = NULL;
    if (cJSON_IsString(t)) s = t->valuestring;
    else if (cJSON_IsArray(t)) {
        const cJSON *e;
        cJSON_ArrayForEach(e, t) {
            const char *name = obj_str(e, "name"), *tpl = obj_str(e, "template");
            if (tpl && (!s || (name && strcmp(name, "default") == 0))) s = tpl;
        }
    }
    if (!s) return SQZ_OK;
    c->v->chat_template = sqz__strdup(s);
    return c->v->chat_template ? SQZ_OK : SQZ_ERR_NOMEM;
}

static sqz_status parse(tj *c, const char *json, size_t len, const char *config_json) {
    sqz_vocab *v = c->v;
    const cJSON *root = c->root;
    SQZ_RETURN_IF(!cJSON_IsObject(root), SQZ_ERR_FORMAT, "%s: not a JSON object", c->path);
    c->model = cJSON_GetObjectItemCaseSensitive(root, "model");
    SQZ_RETURN_IF(!cJSON_IsObject(c->model), SQZ_ERR_FORMAT, "%s: no \"model\" object", c->path);
    c->type = obj_str(c->model, "type");
    const cJSON *vocab = cJSON_GetObjectItemCaseSensitive(c->model, "vocab");
    if (!c->type) { /* older files omit it */
        if (cJSON_IsArray(vocab)) c->type = "Unigram";
        else if (cJSON_GetObjectItemCaseSensitive(c->model, "merges")) c->type = "BPE";
        else if (cJSON_GetObjectItemCaseSensitive(c->model, "max_input_chars_per_word")) c->type = "WordPiece";
        else c->type = "?";
    }
    const cJSON *pre = cJSON_GetObjectItemCaseSensitive(root, "pre_tokenizer");
    const cJSON *norm = cJSON_GetObjectItemCaseSensitive(root, "normalizer");
    const cJSON *dec = cJSON_GetObjectItemCaseSensitive(root, "decoder");
    bool byte_fallback = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(c->model, "byte_fallback"));
    const cJSON *meta = NULL, *prep = NULL;
    bool has_meta = tree_has(pre, "Metaspace", &meta);
    bool has_prep = tree_has(norm, "Prepend", &prep);
    if (strcmp(c->type, "WordPiece") == 0) v->kind = SQZ_VOCAB_WPM;
    else if (strcmp(c->type, "Unigram") == 0) v->kind = SQZ_VOCAB_SPM;
    else if (strcmp(c->type, "BPE") == 0) {
        bool byte_level = tree_has(pre, "ByteLevel", NULL) || tree_has(dec, "ByteLevel", NULL);
        v->kind = !byte_level && (byte_fallback || has_meta || has_prep) ? SQZ_VOCAB_SPM : SQZ_VOCAB_BPE;
    } else {
        return SQZ_ERROR(SQZ_ERR_UNSUPPORTED, "%s: tokenizer model type '%s' is not supported (BPE, WordPiece, "
                         "Unigram are)", c->path, c->type);
    }

    const cJSON *added = cJSON_GetObjectItemCaseSensitive(root, "added_tokens");
    if (cJSON_IsNull(added)) added = NULL;
    int32_t n = 0;
    SQZ_TRY(count_ids(c, vocab, added, &n));
    v->tokens = sqz__calloc((size_t)n, sizeof *v->tokens);
    v->types = sqz__calloc((size_t)n, sizeof *v->types);
    c->added = sqz__calloc((size_t)n, sizeof *c->added);
    c->special = sqz__calloc((size_t)n, sizeof *c->special);
    if (v->kind == SQZ_VOCAB_SPM) v->scores = sqz__calloc((size_t)n, sizeof *v->scores);
    if (!v->tokens || !v->types || !c->added || !c->special || (v->kind == SQZ_VOCAB_SPM && !v->scores))
        return SQZ_ERR_NOMEM;
    v->n_tokens = n;
    SQZ_TRY(read_tokens(c, vocab, added));
    if (strcmp(c->type, "BPE") == 0) SQZ_TRY(read_merges(c));
    read_specials(c);
    if (!embedded_types(c)) infer_types(c, byte_fallback || v->kind == SQZ_VOCAB_SPM);
    if (v->kind == SQZ_VOCAB_SPM && strcmp(c->type, "BPE") == 0) SQZ_TRY(spm_scores(c));

    if (v->kind == SQZ_VOCAB_SPM) {
        const char *p = prep ? obj_str(prep, "prepend") : NULL;
        const char *scheme = meta ? obj_str(meta, "prepend_scheme") : NULL;
        v->add_space_prefix = (p && strcmp(p, SPACE_MARK) == 0) ||
                              (meta && (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(meta, "add_prefix_space")) ||
                                        (scheme && strcmp(scheme, "never") != 0)));
    }
    SQZ_TRY(read_chat_template(c));
    const cJSON *split = NULL, *digits = NULL, *bl = NULL;
    if (v->kind == SQZ_VOCAB_BPE && tree_has(pre, "Split", &split)) {
        const char *name = sqz__hf_pre_name(obj_str(cJSON_GetObjectItemCaseSensitive(split, "pattern"), "Regex"));
        if (name && !(v->pre = sqz__strdup(name))) return SQZ_ERR_NOMEM;
    } else if (v->kind == SQZ_VOCAB_BPE && tree_has(pre, "Digits", &digits) && tree_has(pre, "ByteLevel", &bl) &&
               cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(digits, "individual_digits")) &&
               !cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(bl, "use_regex"))) { /* SmolLM's */
        const char *name = sqz__hf_pre_name_digits();
        if (name && !(v->pre = sqz__strdup(name))) return SQZ_ERR_NOMEM;
    }
    v->hf_json = sqz__strndup(json, len);
    if (!v->hf_json) return SQZ_ERR_NOMEM;
    if (config_json) {
        v->hf_config_json = sqz__strdup(config_json);
        if (!v->hf_config_json) return SQZ_ERR_NOMEM;
    }
    return SQZ_OK;
}

sqz_status sqz__tokenizer_json_read(const char *json, size_t len, const char *config_json, const char *path,
                                    sqz_vocab *v) {
    if (!path) path = "tokenizer.json";
    SQZ_RETURN_IF(len > SQZ__MAX_JSON, SQZ_ERR_FORMAT, "%s: %zu bytes of JSON, more than the limit", path, len);
    cJSON *root = cJSON_ParseWithLength(json, len);
    if (!root) {
        const char *at = cJSON_GetErrorPtr();
        size_t off = at && at >= json && at <= json + len ? (size_t)(at - json) : 0;
        return SQZ_ERROR(SQZ_ERR_FORMAT, "%s: not valid JSON (near byte %zu)", path, off);
    }
    cJSON *cfg = NULL;
    if (config_json) {
        cfg = cJSON_Parse(config_json);
        if (!cJSON_IsObject(cfg)) {
            cJSON_Delete(root);
            cJSON_Delete(cfg);
            return SQZ_ERROR(SQZ_ERR_FORMAT, "%s: tokenizer_config.json beside it is not a valid JSON object", path);
        }
    }
    sqz_vocab tmp;
    sqz_vocab_init(&tmp);
    tj c = {.path = path, .root = root, .cfg = cfg, .v = &tmp};
    sqz_status s = parse(&c, json, len, config_json);
    free(c.added);
    free(c.special);
    cJSON_Delete(root);
    cJSON_Delete(cfg);
    if (s != SQZ_OK) {
        sqz_vocab_clear(&tmp);
        return s;
    }
    sqz_vocab_clear(v);
    *v = tmp;
    return SQZ_OK;
}

/*
 * runtime/tokenizer.c - the parts every tokenizer kind shares: building (token and merge hash
 * tables, decoded pieces), the best-first pair merger, splitting out special tokens, the public
 * encode/decode entry points.
 *
 * The merger is llama.cpp's llm_tokenizer_spm / HF tokenizers' Word::merge_all: symbols in a
 * doubly linked list, candidate pairs in a min-heap keyed by (priority, left position), stale
 * candidates recognised on pop and dropped. Each merge costs O(log n), so a whole 1.3 MB file
 * given as one SentencePiece "word" encodes in well under a second (llama2.c's run.c rescans
 * every pair after each merge: O(n^2)).
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/tokenizer_internal.h"

#define MAX_TOKENS (1 << 22) /* as formats/ (SQZ__MAX_VOCAB) */

/* ---- small utilities ----------------------------------------------------------------- */

size_t sqz__utf8_next(const char *str, size_t n, uint32_t *cp) {
    const unsigned char *s = (const unsigned char *)str;
    if (n == 0) return 0;
    unsigned c = s[0];
    if (c < 0x80) {
        *cp = c;
        return 1;
    }
    size_t len;
    uint32_t v, min;
    if ((c & 0xE0) == 0xC0) { len = 2; v = c & 0x1F; min = 0x80; }
    else if ((c & 0xF0) == 0xE0) { len = 3; v = c & 0x0F; min = 0x800; }
    else if ((c & 0xF8) == 0xF0) { len = 4; v = c & 0x07; min = 0x10000; }
    else return 0;
    if (len > n) return 0;
    for (size_t j = 1; j < len; j++) {
        if ((s[j] & 0xC0) != 0x80) return 0;
        v = (v << 6) | (s[j] & 0x3F);
    }
    if (v < min || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) return 0;
    *cp = v;
    return len;
}

size_t sqz__utf8_put(uint32_t cp, char *out) {
    unsigned char *o = (unsigned char *)out;
    if (cp < 0x80) { o[0] = (unsigned char)cp; return 1; }
    if (cp < 0x800) { o[0] = (unsigned char)(0xC0 | (cp >> 6)); o[1] = (unsigned char)(0x80 | (cp & 0x3F)); return 2; }
    if (cp < 0x10000) {
        o[0] = (unsigned char)(0xE0 | (cp >> 12));
        o[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (unsigned char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (unsigned char)(0xF0 | (cp >> 18));
    o[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
    o[3] = (unsigned char)(0x80 | (cp & 0x3F));
    return 4;
}

static sqz_status grow(void **p, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) return SQZ_OK;
    size_t c = *cap ? *cap : 16;
    while (c < need) {
        SQZ_RETURN_IF(c > SIZE_MAX / 2, SQZ_ERR_NOMEM, "tokenizer: buffer of %zu elements too large", need);
        c *= 2;
    }
    size_t bytes;
    SQZ_RETURN_IF(!sqz__mul_size(c, elem, &bytes), SQZ_ERR_NOMEM, "tokenizer: buffer of %zu elements too large", c);
    void *q = sqz__realloc(*p, bytes);
    if (!q) return SQZ_ERR_NOMEM;
    *p = q;
    *cap = c;
    return SQZ_OK;
}

sqz_status sqz__ids_push(sqz__ids *a, int32_t id) {
    SQZ_TRY(grow((void **)&a->v, &a->cap, a->n + 1, sizeof *a->v));
    a->v[a->n++] = id;
    return SQZ_OK;
}

sqz_status sqz__ids_append(sqz__ids *a, const int32_t *ids, size_t n) {
    SQZ_TRY(grow((void **)&a->v, &a->cap, a->n + n, sizeof *a->v));
    if (n) memcpy(a->v + a->n, ids, n * sizeof *ids);
    a->n += n;
    return SQZ_OK;
}

sqz_status sqz__str_append(sqz__str *b, const char *s, size_t n) {
    SQZ_TRY(grow((void **)&b->s, &b->cap, b->n + n + 1, 1));
    if (n) memcpy(b->s + b->n, s, n);
    b->n += n;
    b->s[b->n] = 0;
    return SQZ_OK;
}

/* ---- hashing ------------------------------------------------------------------------- */

static uint64_t hash_bytes(const char *s, size_t n) {
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a 64 */
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 0x100000001b3ull;
    return h ^ (h >> 29);
}

static uint64_t hash_pair(int32_t a, int32_t b) {
    uint64_t k = ((uint64_t)(uint32_t)a << 32) | (uint32_t)b;
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdull;
    k ^= k >> 33;
    k *= 0xc4ceb9fe1a85ec53ull;
    return k ^ (k >> 33);
}

static uint32_t table_size(size_t n) {
    uint32_t c = 16;
    while (c < 2 * n) c *= 2; /* n <= 2^23: no overflow */
    return c;
}

int32_t sqz__tok_find(const sqz_tokenizer *t, const char *s, size_t n) {
    uint32_t i = (uint32_t)hash_bytes(s, n) & t->map_mask;
    for (;;) {
        uint32_t slot = t->map[i];
        if (!slot) return -1;
        int32_t id = (int32_t)slot - 1;
        if (t->text_len[id] == n && memcmp(t->text[id], s, n) == 0) return id;
        i = (i + 1) & t->map_mask;
    }
}

typedef struct sqz__pair_slot {
    int32_t a, b; /* a < 0: empty */
    int32_t rank, merged;
} sqz__pair_slot;

bool sqz__tok_pair(const sqz_tokenizer *t, int32_t a, int32_t b, int32_t *rank, int32_t *merged) {
    if (!t->pairs) return false;
    uint32_t i = (uint32_t)hash_pair(a, b) & t->pairs_mask;
    for (;;) {
        const sqz__pair_slot *p = &t->pairs[i];
        if (p->a < 0) return false;
        if (p->a == a && p->b == b) {
            *rank = p->rank;
            *merged = p->merged;
            return true;
        }
        i = (i + 1) & t->pairs_mask;
    }
}

/* A later ordinary token replaces an earlier id with the same text (llama.cpp keeps the last);
 * a control token never shadows an ordinary one. */
static void map_insert(sqz_tokenizer *t, int32_t id) {
    uint32_t i = (uint32_t)hash_bytes(t->text[id], t->text_len[id]) & t->map_mask;
    for (;;) {
        uint32_t slot = t->map[i];
        if (!slot) {
            t->map[i] = (uint32_t)id + 1;
            return;
        }
        int32_t o = (int32_t)slot - 1;
        if (t->text_len[o] == t->text_len[id] && memcmp(t->text[o], t->text[id], t->text_len[id]) == 0) {
            if (!(sqz__tok_is_special(t, id) && !sqz__tok_is_special(t, o))) t->map[i] = (uint32_t)id + 1;
            return;
        }
        i = (i + 1) & t->map_mask;
    }
}

/* Merges are "left right"; a token may itself hold a space, so take the first split whose two
 * sides are both tokens. */
static sqz_status build_pairs(sqz_tokenizer *t, const sqz_vocab *v) {
    if (v->n_merges <= 0 || !v->merges) return SQZ_OK;
    SQZ_RETURN_IF(v->n_merges > (1 << 24), SQZ_ERR_FORMAT, "tokenizer: %" PRId32 " merges (more than 2^24)",
                  v->n_merges);
    t->pairs_mask = table_size((size_t)v->n_merges) - 1;
    t->pairs = sqz__malloc(((size_t)t->pairs_mask + 1) * sizeof *t->pairs);
    if (!t->pairs) return SQZ_ERR_NOMEM;
    for (size_t i = 0; i <= t->pairs_mask; i++) t->pairs[i].a = -1;
    char *buf = NULL;
    size_t cap = 0;
    for (int32_t r = 0; r < v->n_merges; r++) {
        const char *m = v->merges[r];
        SQZ_RETURN_IF(!m, SQZ_ERR_FORMAT, "tokenizer: merge %" PRId32 " is missing", r);
        size_t len = strlen(m);
        int32_t a = -1, b = -1;
        for (const char *sp = memchr(m, ' ', len); sp; sp = memchr(sp + 1, ' ', len - (size_t)(sp + 1 - m))) {
            a = sqz__tok_find(t, m, (size_t)(sp - m));
            b = sqz__tok_find(t, sp + 1, len - (size_t)(sp - m) - 1);
            if (a >= 0 && b >= 0) break;
            a = b = -1;
        }
        if (a < 0) continue; /* names a token the vocab lacks: can never apply */
        size_t la = t->text_len[a], lb = t->text_len[b];
        if (grow((void **)&buf, &cap, la + lb, 1) != SQZ_OK) {
            free(buf);
            return SQZ_ERR_NOMEM;
        }
        memcpy(buf, t->text[a], la);
        memcpy(buf + la, t->text[b], lb);
        int32_t merged = sqz__tok_find(t, buf, la + lb);
        if (merged < 0) continue; /* HF rejects such a file; a merge to no token can never be emitted */
        uint32_t i = (uint32_t)hash_pair(a, b) & t->pairs_mask;
        while (t->pairs[i].a >= 0 && !(t->pairs[i].a == a && t->pairs[i].b == b)) i = (i + 1) & t->pairs_mask;
        if (t->pairs[i].a >= 0) continue; /* duplicate: the first (lowest rank) stays, as llama.cpp */
        t->pairs[i] = (sqz__pair_slot){a, b, r, merged};
        t->n_merges++;
    }
    free(buf);
    return SQZ_OK;
}

sqz_status sqz__tok_set_piece(sqz_tokenizer *t, int32_t i, const char *s, size_t n) {
    /* Every kind's piece is at most as long as its text (see the arena sizing in build). */
    SQZ_RETURN_IF(n > t->text_len[i], SQZ_ERR_FORMAT, "tokenizer: token %" PRId32 ": piece longer than its text", i);
    memmove(t->piece[i], s, n);
    t->piece[i][n] = 0;
    t->piece_len[i] = (uint32_t)n;
    return SQZ_OK;
}

/* ---- the merger ---------------------------------------------------------------------- */

typedef struct sqz__sym {
    int32_t id; /* -1 once merged into its left neighbour */
    int32_t prev, next;
} sqz__sym;

typedef struct sqz__cand {
    uint64_t key; /* priority << 32 | left position: lower merges first */
    int32_t left, right, lid, rid, merged;
} sqz__cand;

void sqz__merger_free(sqz__merger *m) {
    if (!m) return;
    free(m->sym);
    free(m->heap);
    free(m->buf);
    memset(m, 0, sizeof *m);
}

/* Higher score first: an order-preserving map of -score onto uint32. */
static uint32_t score_key(float score) {
    uint32_t u;
    memcpy(&u, &score, 4);
    u = (u & 0x80000000u) ? ~u : (u | 0x80000000u); /* ascending in score */
    return ~u;
}

static void heap_push_raw(sqz__merger *m, sqz__cand c) {
    size_t i = m->heap_n++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (m->heap[p].key <= c.key) break;
        m->heap[i] = m->heap[p];
        i = p;
    }
    m->heap[i] = c;
}

static sqz__cand heap_pop(sqz__merger *m) {
    sqz__cand top = m->heap[0];
    sqz__cand last = m->heap[--m->heap_n];
    size_t i = 0, n = m->heap_n;
    for (;;) {
        size_t l = 2 * i + 1;
        if (l >= n) break;
        size_t c = (l + 1 < n && m->heap[l + 1].key < m->heap[l].key) ? l + 1 : l;
        if (m->heap[c].key >= last.key) break;
        m->heap[i] = m->heap[c];
        i = c;
    }
    if (n) m->heap[i] = last;
    return top;
}

static sqz_status try_pair(const sqz_tokenizer *t, sqz__merger *m, sqz__merge_mode mode, int32_t left, int32_t right) {
    int32_t a = m->sym[left].id, b = m->sym[right].id;
    int32_t merged, rank;
    uint32_t prio;
    if (mode == SQZ__MERGE_RANKS) {
        if (!sqz__tok_pair(t, a, b, &rank, &merged)) return SQZ_OK;
        prio = (uint32_t)rank;
    } else {
        size_t la = t->text_len[a], lb = t->text_len[b];
        if (la + lb > t->max_text_len) return SQZ_OK;
        memcpy(m->buf, t->text[a], la);
        memcpy(m->buf + la, t->text[b], lb);
        merged = sqz__tok_find(t, m->buf, la + lb);
        /* SentencePiece never produces control, unknown, byte or unused pieces from text. */
        if (merged < 0 || (t->type[merged] != SQZ_TOKEN_NORMAL && t->type[merged] != SQZ_TOKEN_USER_DEFINED))
            return SQZ_OK;
        prio = score_key(t->scores[merged]);
    }
    SQZ_TRY(grow((void **)&m->heap, &m->heap_cap, m->heap_n + 1, sizeof *m->heap));
    heap_push_raw(m, (sqz__cand){((uint64_t)prio << 32) | (uint32_t)left, left, right, a, b, merged});
    return SQZ_OK;
}

sqz_status sqz__merge(const sqz_tokenizer *t, sqz__merger *m, sqz__merge_mode mode, int32_t *ids, size_t *n_io) {
    size_t n = *n_io;
    if (n < 2) return SQZ_OK;
    SQZ_RETURN_IF(n > INT32_MAX, SQZ_ERR_INVALID_ARG, "tokenizer: %zu symbols in one word (at most 2^31 - 1)", n);
    SQZ_TRY(grow((void **)&m->sym, &m->sym_cap, n, sizeof *m->sym));
    if (mode == SQZ__MERGE_SCORES) SQZ_TRY(grow((void **)&m->buf, &m->buf_cap, (size_t)t->max_text_len + 1, 1));
    for (size_t i = 0; i < n; i++) m->sym[i] = (sqz__sym){ids[i], (int32_t)i - 1, i + 1 < n ? (int32_t)i + 1 : -1};
    m->heap_n = 0;
    for (size_t i = 0; i + 1 < n; i++) SQZ_TRY(try_pair(t, m, mode, (int32_t)i, (int32_t)i + 1));
    while (m->heap_n) {
        sqz__cand c = heap_pop(m);
        sqz__sym *l = &m->sym[c.left];
        if (l->id != c.lid || l->next != c.right || m->sym[c.right].id != c.rid) continue; /* stale */
        sqz__sym *r = &m->sym[c.right];
        l->id = c.merged;
        l->next = r->next;
        if (r->next >= 0) m->sym[r->next].prev = c.left;
        r->id = -1;
        if (l->prev >= 0) SQZ_TRY(try_pair(t, m, mode, l->prev, c.left));
        if (l->next >= 0) SQZ_TRY(try_pair(t, m, mode, c.left, l->next));
    }
    size_t k = 0;
    for (int32_t i = 0; i >= 0; i = m->sym[i].next) ids[k++] = m->sym[i].id;
    *n_io = k;
    return SQZ_OK;
}

/* ---- construction ---------------------------------------------------------------------- */

static sqz_status check_special(const sqz_vocab *v, int32_t id, const char *what) {
    SQZ_RETURN_IF(id < -1 || id >= v->n_tokens, SQZ_ERR_FORMAT,
                  "tokenizer: %s token id %" PRId32 " outside the vocabulary of %" PRId32, what, id, v->n_tokens);
    return SQZ_OK;
}

/* Specials sorted longest text first (so "<|im_start|>" wins over "<|im"), then by id. */
typedef struct special_key {
    uint32_t len;
    int32_t id;
} special_key;

static int cmp_special(const void *pa, const void *pb) {
    const special_key *a = pa, *b = pb;
    if (a->len != b->len) return a->len > b->len ? -1 : 1;
    return (a->id > b->id) - (a->id < b->id);
}

static bool is_byte_text(const char *s, size_t n) {
    return n == 6 && s[0] == '<' && s[1] == '0' && s[2] == 'x' && s[5] == '>' && strchr("0123456789ABCDEFabcdef", s[3]) &&
           s[3] && strchr("0123456789ABCDEFabcdef", s[4]) && s[4];
}

static sqz_status build(sqz_tokenizer *t, const sqz_vocab *v) {
    SQZ_RETURN_IF(v->kind != SQZ_VOCAB_SPM && v->kind != SQZ_VOCAB_BPE && v->kind != SQZ_VOCAB_WPM,
                  SQZ_ERR_UNSUPPORTED, "tokenizer: the model carries no vocabulary (kind '%s'): a llama2.c "
                  "checkpoint needs tokenizer.bin or tok<N>.bin beside it, or one given (sqz: --tokenizer FILE)",
                  sqz_vocab_kind_name(v->kind));
    SQZ_RETURN_IF(v->n_tokens <= 0 || v->n_tokens > MAX_TOKENS || !v->tokens, SQZ_ERR_FORMAT,
                  "tokenizer: vocabulary of %" PRId32 " tokens (expected 1 to %d)", v->n_tokens, MAX_TOKENS);
    SQZ_TRY(check_special(v, v->bos, "BOS"));
    SQZ_TRY(check_special(v, v->eos, "EOS"));
    SQZ_TRY(check_special(v, v->unk, "unknown"));
    SQZ_TRY(check_special(v, v->pad, "padding"));
    SQZ_TRY(check_special(v, v->sep, "separator"));
    SQZ_TRY(check_special(v, v->cls, "classifier"));
    SQZ_TRY(check_special(v, v->mask, "mask"));
    size_t n = (size_t)v->n_tokens;
    t->kind = v->kind;
    t->n_tokens = v->n_tokens;
    t->bos = v->bos; t->eos = v->eos; t->unk = v->unk; t->pad = v->pad;
    t->cls = v->cls; t->sep = v->sep; t->mask = v->mask;
    t->add_bos = v->add_bos && v->bos >= 0;
    t->add_eos = v->add_eos && v->eos >= 0;

    t->text = sqz__calloc(n, sizeof *t->text);
    t->piece = sqz__calloc(n, sizeof *t->piece);
    t->text_len = sqz__calloc(n, sizeof *t->text_len);
    t->piece_len = sqz__calloc(n, sizeof *t->piece_len);
    t->scores = sqz__calloc(n, sizeof *t->scores);
    t->type = sqz__calloc(n, sizeof *t->type);
    if (!t->text || !t->piece || !t->text_len || !t->piece_len || !t->scores || !t->type) return SQZ_ERR_NOMEM;
    /* One arena: every token's text and its decoded piece, which is never longer than the text. */
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        SQZ_RETURN_IF(!v->tokens[i], SQZ_ERR_FORMAT, "tokenizer: token %zu is missing", i);
        size_t len = strlen(v->tokens[i]);
        SQZ_RETURN_IF(len > UINT32_MAX / 4, SQZ_ERR_FORMAT, "tokenizer: token %zu is %zu bytes long", i, len);
        SQZ_RETURN_IF(!sqz__add_size(total, 2 * (len + 1), &total), SQZ_ERR_NOMEM, "tokenizer: tokens too large");
        t->text_len[i] = (uint32_t)len;
        if (len > t->max_text_len) t->max_text_len = (uint32_t)len;
    }
    t->arena = sqz__malloc(total ? total : 1);
    if (!t->arena) return SQZ_ERR_NOMEM;
    char *p = t->arena;
    for (size_t i = 0; i < n; i++) {
        size_t len = t->text_len[i];
        t->text[i] = p;
        memcpy(p, v->tokens[i], len + 1);
        p += len + 1;
        t->piece[i] = p; /* filled by the kind's init; defaults to the text */
        memcpy(p, v->tokens[i], len + 1);
        t->piece_len[i] = (uint32_t)len;
        p += len + 1;
        t->scores[i] = v->scores ? v->scores[i] : 0.0f;
        int32_t ty = v->types ? v->types[i] : SQZ_TOKEN_NORMAL;
        if (ty < SQZ_TOKEN_NORMAL || ty > SQZ_TOKEN_BYTE) ty = SQZ_TOKEN_NORMAL;
        /* SentencePiece byte pieces are never text, whatever a loader called them */
        if (v->kind == SQZ_VOCAB_SPM && ty == SQZ_TOKEN_NORMAL && is_byte_text(t->text[i], len)) ty = SQZ_TOKEN_BYTE;
        t->type[i] = (uint8_t)ty;
    }
    if (!v->types) { /* without types, the named special ids are what we know */
        const int32_t ctl[] = {v->bos, v->eos, v->pad, v->cls, v->sep, v->mask};
        for (size_t k = 0; k < sizeof ctl / sizeof ctl[0]; k++)
            if (ctl[k] >= 0) t->type[ctl[k]] = SQZ_TOKEN_CONTROL;
        if (v->unk >= 0) t->type[v->unk] = SQZ_TOKEN_UNKNOWN;
    }

    t->map_mask = table_size(n) - 1;
    t->map = sqz__calloc((size_t)t->map_mask + 1, sizeof *t->map);
    if (!t->map) return SQZ_ERR_NOMEM;
    for (size_t i = 0; i < n; i++)
        if (t->text_len[i]) map_insert(t, (int32_t)i);
    SQZ_TRY(build_pairs(t, v));

    size_t ns = 0;
    for (size_t i = 0; i < n; i++)
        ns += t->text_len[i] && (t->type[i] == SQZ_TOKEN_CONTROL || t->type[i] == SQZ_TOKEN_USER_DEFINED);
    if (ns) {
        special_key *keys = sqz__malloc(ns * sizeof *keys);
        t->specials = sqz__malloc(ns * sizeof *t->specials);
        if (!keys || !t->specials) {
            free(keys);
            return SQZ_ERR_NOMEM;
        }
        size_t k = 0;
        for (size_t i = 0; i < n; i++)
            if (t->text_len[i] && (t->type[i] == SQZ_TOKEN_CONTROL || t->type[i] == SQZ_TOKEN_USER_DEFINED))
                keys[k++] = (special_key){t->text_len[i], (int32_t)i};
        qsort(keys, ns, sizeof *keys, cmp_special);
        for (size_t i = 0; i < ns; i++) {
            t->specials[i] = keys[i].id;
            t->special_first[(unsigned char)t->text[keys[i].id][0]] = 1;
        }
        t->n_specials = ns;
        free(keys);
    }

    switch (v->kind) {
    case SQZ_VOCAB_SPM: return sqz__spm_init(t, v);
    case SQZ_VOCAB_BPE: return sqz__bpe_init(t, v);
    default: return sqz__wpm_init(t, v);
    }
}

sqz_status sqz_tokenizer_new(const sqz_vocab *v, sqz_tokenizer **out) {
    SQZ_RETURN_IF(!v || !out, SQZ_ERR_INVALID_ARG, "sqz_tokenizer_new: NULL argument");
    *out = NULL;
    sqz_tokenizer *t = sqz__calloc(1, sizeof *t);
    if (!t) return SQZ_ERR_NOMEM;
    sqz_status s = build(t, v);
    if (s != SQZ_OK) {
        sqz_tokenizer_free(t);
        return s;
    }
    *out = t;
    return SQZ_OK;
}

void sqz_tokenizer_free(sqz_tokenizer *t) {
    if (!t) return;
    if (t->impl_free) t->impl_free(t->impl);
    free(t->text);
    free(t->text_len);
    free(t->piece);
    free(t->piece_len);
    free(t->scores);
    free(t->type);
    free(t->map);
    free(t->pairs);
    free(t->specials);
    free(t->arena);
    free(t);
}

/* ---- encoding ------------------------------------------------------------------------ */

/* The special token spelled at s[0..n) (longest first), or -1. User-defined tokens always
 * count; control tokens only when asked. */
static int32_t match_special(const sqz_tokenizer *t, const char *s, size_t n, bool control) {
    for (size_t k = 0; k < t->n_specials; k++) {
        int32_t id = t->specials[k];
        if (!control && t->type[id] == SQZ_TOKEN_CONTROL) continue;
        size_t len = t->text_len[id];
        if (len <= n && memcmp(s, t->text[id], len) == 0) return id;
    }
    return -1;
}

static sqz_status encode_all(const sqz_tokenizer *t, void *work, const char *text, size_t len, unsigned flags,
                             sqz__ids *out) {
    bool add = flags & SQZ_TOKENIZE_ADD_SPECIAL;
    bool control = flags & SQZ_TOKENIZE_PARSE_SPECIAL;
    if (add && t->add_bos) SQZ_TRY(sqz__ids_push(out, t->bos));
    size_t start = 0;
    bool first = true;
    if (t->n_specials) {
        for (size_t i = 0; i < len;) {
            int32_t id = t->special_first[(unsigned char)text[i]] ? match_special(t, text + i, len - i, control) : -1;
            if (id < 0) {
                i++;
                continue;
            }
            if (i > start) SQZ_TRY(t->encode(t, work, text + start, i - start, first, out));
            SQZ_TRY(sqz__ids_push(out, id));
            i += t->text_len[id];
            start = i;
            first = true; /* llama.cpp and HF both treat text after a special token as a new start */
        }
    }
    if (len > start) SQZ_TRY(t->encode(t, work, text + start, len - start, first, out));
    if (add && t->add_eos) SQZ_TRY(sqz__ids_push(out, t->eos));
    return SQZ_OK;
}

sqz_status sqz_tokenize_ex(const sqz_tokenizer *t, const char *text, size_t len, unsigned flags, int32_t **ids,
                           size_t *n_ids) {
    if (ids) *ids = NULL;
    if (n_ids) *n_ids = 0;
    SQZ_RETURN_IF(!t || !ids || !n_ids || (!text && len), SQZ_ERR_INVALID_ARG, "sqz_tokenize: NULL argument");
    sqz__ids out = {0};
    void *work = NULL;
    if (t->work_new && !(work = t->work_new(t))) return SQZ_ERR_NOMEM;
    sqz_status s = encode_all(t, work, text, len, flags, &out);
    if (t->work_free) t->work_free(work);
    if (s == SQZ_OK && !out.v) { /* non-NULL even when empty */
        s = sqz__ids_push(&out, 0);
        out.n = 0;
    }
    if (s != SQZ_OK) {
        free(out.v);
        return s;
    }
    *ids = out.v;
    *n_ids = out.n;
    return SQZ_OK;
}

sqz_status sqz_tokenize(const sqz_tokenizer *t, const char *text, size_t len, bool add_special, int32_t **ids,
                        size_t *n_ids) {
    return sqz_tokenize_ex(t, text, len, add_special ? SQZ_TOKENIZE_ADD_SPECIAL : 0u, ids, n_ids);
}

/* ---- decoding ------------------------------------------------------------------------ */

const char *sqz_token_piece(const sqz_tokenizer *t, int32_t id, size_t *len) {
    if (!t || id < 0 || id >= t->n_tokens) {
        if (len) *len = 0;
        return NULL;
    }
    if (len) *len = t->piece_len[id];
    return t->piece[id];
}

sqz_status sqz_detokenize(const sqz_tokenizer *t, const int32_t *ids, size_t n, bool special, char **text,
                          size_t *len) {
    if (text) *text = NULL;
    if (len) *len = 0;
    SQZ_RETURN_IF(!t || !text || (!ids && n), SQZ_ERR_INVALID_ARG, "sqz_detokenize: NULL argument");
    for (size_t i = 0; i < n; i++)
        SQZ_RETURN_IF(ids[i] < 0 || ids[i] >= t->n_tokens, SQZ_ERR_INVALID_ARG,
                      "sqz_detokenize: id %" PRId32 " at position %zu outside the vocabulary of %" PRId32, ids[i], i,
                      t->n_tokens);
    if (t->detok) return t->detok(t, ids, n, special, text, len);
    sqz__str b = {0};
    sqz_status s = sqz__str_append(&b, "", 0);
    bool strip = t->detok_strip_space;
    for (size_t i = 0; i < n && s == SQZ_OK; i++) {
        int32_t id = ids[i];
        if (t->type[id] == SQZ_TOKEN_CONTROL && !special) continue;
        const char *p = t->piece[id];
        size_t pl = t->piece_len[id];
        if (strip) { /* the first piece written carries the prefix (after a BOS that is left out) */
            if (pl && p[0] == ' ' && t->type[id] != SQZ_TOKEN_CONTROL) p++, pl--;
            strip = false;
        }
        s = sqz__str_append(&b, p, pl);
    }
    if (s != SQZ_OK) {
        free(b.s);
        return s;
    }
    *text = b.s;
    if (len) *len = b.n;
    return SQZ_OK;
}

/* ---- accessors ----------------------------------------------------------------------- */

sqz_vocab_kind sqz_tokenizer_kind(const sqz_tokenizer *t) { return t ? t->kind : SQZ_VOCAB_NONE; }
int32_t sqz_tokenizer_n_tokens(const sqz_tokenizer *t) { return t ? t->n_tokens : 0; }
int32_t sqz_tokenizer_bos(const sqz_tokenizer *t) { return t ? t->bos : -1; }
int32_t sqz_tokenizer_eos(const sqz_tokenizer *t) { return t ? t->eos : -1; }
bool sqz_tokenizer_adds_bos(const sqz_tokenizer *t) { return t && t->add_bos; }
bool sqz_tokenizer_adds_eos(const sqz_tokenizer *t) { return t && t->add_eos; }
bool sqz_token_is_control(const sqz_tokenizer *t, int32_t id) {
    return t && id >= 0 && id < t->n_tokens && t->type[id] == SQZ_TOKEN_CONTROL;
}

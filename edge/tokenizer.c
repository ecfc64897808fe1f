/*
 * edge/tokenizer.c - the tokenizers of the bundles sqz writes, encoding as sqz's runtime does
 * (runtime/tokenizer_spm.c, tokenizer_bpe.c) so that prompts give the same ids, with tables in
 * the arena and no allocation:
 *   SPM: spaces as U+2581 (when the pieces spell them so), the prefix "▁" when the vocabulary
 *        asks, each UTF-8 character its token or its <0xNN> bytes or <unk>, then adjacent
 *        symbols merged best-first (highest merged-token score, or lowest merge rank when the
 *        vocabulary has merges), ties to the leftmost pair.
 *   BPE: byte-level (GPT-2) with its pre-tokenizer pattern, written out by hand for ASCII:
 *        's 't 're 've 'm 'll 'd | ?letters | ?digits | ?other | spaces; bytes >= 0x80 count
 *        as letters (sqz uses PCRE2's Unicode classes: non-ASCII text may split differently).
 *        "smollm"/"starcoder" isolate each digit first. Merges by rank.
 * Special tokens written in the prompt text are not parsed (sqz does so for user-defined ones).
 */
#include <string.h>

#include "edge/edge_internal.h"

enum { T_NORMAL = 1, T_UNKNOWN = 2, T_CONTROL = 3, T_USER = 4, T_BYTE = 6 };
static const char MARK[] = "\xe2\x96\x81"; /* U+2581 */

static uint32_t work_cap_of(uint32_t ctx) { return ctx > (1u << 26) ? 0 : 4 * ctx + 64; }

static size_t a8(size_t n) { return (n + 7) / 8 * 8; }

size_t sqze__tok_memory(const sqze_vocab_view *v, uint32_t ctx) {
    uint32_t wc = work_cap_of(ctx);
    if (!wc) return 0;
    size_t n = v->n_tokens;
    return a8(n * sizeof(uint8_t *)) + 2 * a8(n * 4) + a8(n) + a8((size_t)v->n_merges * sizeof(sqze_merge)) +
           3 * a8((size_t)wc * 4) + a8((size_t)wc * 4 + 16 + 2 * SQZB_MAX_TOKEN_LEN);
}

static int cmp_bytes(const uint8_t *a, uint32_t na, const uint8_t *b, uint32_t nb) {
    int c = memcmp(a, b, na < nb ? na : nb);
    return c ? c : (na < nb ? -1 : na > nb);
}

/* ---- heapsort (libc's qsort may allocate) ---- */
typedef int (*less_fn)(const sqze_model *m, uint32_t a, uint32_t b);
static void sift(const sqze_model *m, uint32_t *v, size_t i, size_t n, less_fn less) {
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n) return;
        if (c + 1 < n && less(m, v[c], v[c + 1])) c++;
        if (!less(m, v[i], v[c])) return;
        uint32_t t = v[i]; v[i] = v[c]; v[c] = t;
        i = c;
    }
}
static void heapsort_u32(const sqze_model *m, uint32_t *v, size_t n, less_fn less) {
    for (size_t i = n / 2; i-- > 0;) sift(m, v, i, n, less);
    for (size_t e = n; e-- > 1;) {
        uint32_t t = v[0]; v[0] = v[e]; v[e] = t;
        sift(m, v, 0, e, less);
    }
}
static int tok_less(const sqze_model *m, uint32_t a, uint32_t b) {
    int c = cmp_bytes(m->tok_str[a], m->tok_len[a], m->tok_str[b], m->tok_len[b]);
    return c ? c < 0 : a < b;
}

/* The token spelled s[0..n), -1 if none. Of equal texts the last ordinary one wins, and a
 * control token never shadows an ordinary one (runtime/tokenizer.c map_insert). */
int32_t sqze__tok_find(const sqze_model *m, const uint8_t *s, uint32_t n) {
    size_t lo = 0, hi = m->vocab.n_tokens;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        uint32_t t = m->tok_sorted[mid];
        if (cmp_bytes(m->tok_str[t], m->tok_len[t], s, n) < 0) lo = mid + 1;
        else hi = mid;
    }
    int32_t best = -1;
    for (; lo < m->vocab.n_tokens; lo++) {
        uint32_t t = m->tok_sorted[lo];
        if (cmp_bytes(m->tok_str[t], m->tok_len[t], s, n) != 0) break;
        int special = m->tok_type[t] == T_CONTROL;
        if (best < 0 || !special || m->tok_type[best] == T_CONTROL) best = (int32_t)t;
    }
    return best;
}

/* merges sorted by (a, b, rank): heapsort in place */
static int merge_less(const sqze_merge *a, const sqze_merge *b) {
    return a->a != b->a ? a->a < b->a : a->b != b->b ? a->b < b->b : a->rank < b->rank;
}
static void merge_sift(sqze_merge *v, size_t i, size_t n) {
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n) return;
        if (c + 1 < n && merge_less(&v[c], &v[c + 1])) c++;
        if (!merge_less(&v[i], &v[c])) return;
        sqze_merge t = v[i]; v[i] = v[c]; v[c] = t;
        i = c;
    }
}
static void merges_sort(sqze_merge *v, size_t n) {
    for (size_t i = n / 2; i-- > 0;) merge_sift(v, i, n);
    for (size_t e = n; e-- > 1;) {
        sqze_merge t = v[0]; v[0] = v[e]; v[e] = t;
        merge_sift(v, 0, e);
    }
}

static int32_t hexv(uint8_t c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10 : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* GPT-2's bytes_to_unicode: printable bytes map to themselves, the others to 256 + n. */
static uint32_t byte_cp(uint32_t b) {
    if ((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174) return b;
    uint32_t n = 0;
    for (uint32_t c = 0; c < b; c++)
        if (!((c >= 33 && c <= 126) || (c >= 161 && c <= 172) || c >= 174)) n++;
    return 256 + n;
}

static uint32_t put_utf8(uint8_t *o, uint32_t cp) {
    if (cp < 0x80) { o[0] = (uint8_t)cp; return 1; }
    o[0] = (uint8_t)(0xC0 | cp >> 6);
    o[1] = (uint8_t)(0x80 | (cp & 0x3F));
    return 2; /* code points here are < 0x800 */
}

void sqze__tok_build(sqze_model *m, const sqze_vocab_view *v, uint8_t *mem) {
    size_t n = v->n_tokens, at = 0;
    m->work_cap = work_cap_of(m->ctx);
    m->tok_str = (const uint8_t **)(void *)(mem + at); at += a8(n * sizeof(uint8_t *));
    m->tok_len = (uint32_t *)(void *)(mem + at); at += a8(n * 4);
    m->tok_sorted = (uint32_t *)(void *)(mem + at); at += a8(n * 4);
    m->tok_type = mem + at; at += a8(n);
    m->merges = (sqze_merge *)(void *)(mem + at); at += a8((size_t)v->n_merges * sizeof(sqze_merge));
    m->work_ids = (int32_t *)(void *)(mem + at); at += a8((size_t)m->work_cap * 4);
    m->work_mid = (int32_t *)(void *)(mem + at); at += a8((size_t)m->work_cap * 4);
    m->work_prio = (float *)(void *)(mem + at); at += a8((size_t)m->work_cap * 4);
    m->work_text = mem + at;
    size_t s = 0, marks = 0, spaces = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t len = sqze__u32(v->strings + s);
        m->tok_str[i] = v->strings + s + 4;
        m->tok_len[i] = len;
        s += 4 + len;
        uint8_t ty = v->types[i];
        const uint8_t *t = m->tok_str[i];
        int is_byte = len == 6 && !memcmp(t, "<0x", 3) && t[5] == '>' && hexv(t[3]) >= 0 && hexv(t[4]) >= 0;
        if (ty < T_NORMAL || ty > T_BYTE) ty = T_NORMAL;
        if (v->kind == 1 && ty == T_NORMAL && is_byte) ty = T_BYTE;
        m->tok_type[i] = ty;
        m->tok_sorted[i] = (uint32_t)i;
        for (uint32_t k = 0; k + 3 <= len; k++)
            if (!memcmp(t + k, MARK, 3)) { marks++; break; }
        if (memchr(t, ' ', len)) spaces++;
    }
    heapsort_u32(m, m->tok_sorted, n, tok_less);
    m->escape_spaces = marks > 0 && marks >= spaces;
    for (int b = 0; b < 256; b++) m->byte_tok[b] = -1;
    for (int i = 0; i < 324; i++) m->byte_of_cp[i] = 0xFFFF;
    for (uint32_t b = 0; b < 256; b++) {
        uint8_t buf[6];
        if (v->kind == 1) {
            static const char hx[] = "0123456789ABCDEF";
            memcpy(buf, "<0x", 3);
            buf[3] = (uint8_t)hx[b >> 4];
            buf[4] = (uint8_t)hx[b & 15];
            buf[5] = '>';
            m->byte_tok[b] = sqze__tok_find(m, buf, 6);
        } else {
            uint32_t cp = byte_cp(b);
            m->byte_of_cp[cp] = (uint16_t)b;
            m->byte_tok[b] = sqze__tok_find(m, buf, put_utf8(buf, cp));
        }
    }
    /* merges "left right": the first split whose sides are both tokens (runtime/tokenizer.c) */
    uint32_t nm = 0;
    for (uint32_t r = 0; r < v->n_merges; r++) {
        uint32_t len = sqze__u32(v->strings + s);
        const uint8_t *t = v->strings + s + 4;
        s += 4 + len;
        for (uint32_t k = 0; k < len; k++) {
            if (t[k] != ' ') continue;
            int32_t a = sqze__tok_find(m, t, k), b = sqze__tok_find(m, t + k + 1, len - k - 1);
            if (a < 0 || b < 0) continue;
            memcpy(m->work_text, t, k);
            memcpy(m->work_text + k, t + k + 1, len - k - 1);
            int32_t merged = sqze__tok_find(m, m->work_text, len - 1);
            if (merged >= 0) m->merges[nm++] = (sqze_merge){a, b, merged, (int32_t)r};
            break;
        }
    }
    m->n_merges = nm;
    merges_sort(m->merges, nm);
    m->split_digits = v->pre_len && ((v->pre_len == 6 && !memcmp(v->pre, "smollm", 6)) ||
                                     (v->pre_len == 9 && !memcmp(v->pre, "starcoder", 9)));
}

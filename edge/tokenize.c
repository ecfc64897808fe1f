/*
 * edge/tokenize.c - text to ids and ids to text over the tables of edge/tokenizer.c (the
 * rules are described there). Works in the arena's working space: a prompt longer than the
 * context's working space is refused, never truncated.
 */
#include <string.h>

#include "edge/edge_internal.h"

enum { T_NORMAL = 1, T_UNKNOWN = 2, T_CONTROL = 3, T_USER = 4, T_BYTE = 6 };
static const uint8_t MARK[] = {0xe2, 0x96, 0x81}; /* U+2581 */

#define find sqze__tok_find

/* The merge of (a, b) with the lowest rank, or NULL. */
static const sqze_merge *find_merge(const sqze_model *m, int32_t a, int32_t b) {
    size_t lo = 0, hi = m->n_merges;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        const sqze_merge *x = &m->merges[mid];
        if (x->a < a || (x->a == a && x->b < b)) lo = mid + 1;
        else hi = mid;
    }
    return lo < m->n_merges && m->merges[lo].a == a && m->merges[lo].b == b ? &m->merges[lo] : NULL;
}

/* Length of the UTF-8 character at s (n bytes left); 0 when invalid (runtime's sqz__utf8_next). */
static uint32_t utf8_len(const uint8_t *s, size_t n) {
    uint32_t len = s[0] < 0x80 ? 1 : (s[0] & 0xE0) == 0xC0 ? 2 : (s[0] & 0xF0) == 0xE0 ? 3 : (s[0] & 0xF8) == 0xF0 ? 4 : 0;
    if (!len || len > n) return 0;
    uint32_t cp = len == 1 ? s[0] : len == 2 ? s[0] & 0x1Fu : len == 3 ? s[0] & 0x0Fu : s[0] & 0x07u;
    for (uint32_t i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0;
        cp = cp << 6 | (s[i] & 0x3Fu);
    }
    static const uint32_t min_cp[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < min_cp[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
    return len;
}

/* The priority of merging symbols i and i+1 (higher first), and the merged id; -1 if none. */
static int32_t pair(const sqze_model *m, int32_t a, int32_t b, float *prio) {
    if (m->n_merges || m->vocab.kind == 2) {
        const sqze_merge *x = find_merge(m, a, b);
        if (!x) return -1;
        *prio = -(float)x->rank; /* ranks < 2^22: exact in float */
        return x->merged;
    }
    uint32_t la = m->tok_len[a], lb = m->tok_len[b];
    if (la + lb > 2 * SQZB_MAX_TOKEN_LEN) return -1;
    uint8_t *buf = m->work_text + 4 * (size_t)m->work_cap + 8; /* past the text */
    memcpy(buf, m->tok_str[a], la);
    memcpy(buf + la, m->tok_str[b], lb);
    int32_t id = find(m, buf, la + lb);
    /* SentencePiece never produces control, unknown, byte or unused pieces from text */
    if (id < 0 || (m->tok_type[id] != T_NORMAL && m->tok_type[id] != T_USER)) return -1;
    memcpy(prio, m->vocab.scores + 4 * (size_t)id, 4);
    return id;
}

/* Best-first merging of ids[0..n) in place; returns the new count. */
static uint32_t merge(sqze_model *m, int32_t *ids, uint32_t n) {
    float *prio = m->work_prio;
    int32_t *mid = m->work_mid;
    for (uint32_t i = 0; i + 1 < n; i++) mid[i] = pair(m, ids[i], ids[i + 1], &prio[i]);
    while (n > 1) {
        int64_t best = -1;
        for (uint32_t i = 0; i + 1 < n; i++)
            if (mid[i] >= 0 && (best < 0 || prio[i] > prio[best])) best = i; /* ties: leftmost */
        if (best < 0) break;
        uint32_t b = (uint32_t)best;
        ids[b] = mid[b];
        memmove(ids + b + 1, ids + b + 2, (n - b - 2) * sizeof *ids);
        memmove(mid + b + 1, mid + b + 2, (n - b - 2) * sizeof *mid);
        memmove(prio + b + 1, prio + b + 2, (n - b - 2) * sizeof *prio);
        n--;
        if (b + 1 < n) mid[b] = pair(m, ids[b], ids[b + 1], &prio[b]);
        if (b > 0) mid[b - 1] = pair(m, ids[b - 1], ids[b], &prio[b - 1]);
    }
    return n;
}

typedef struct out_ids {
    int32_t *ids;
    size_t n, cap;
    int full;
} out_ids;

static void push(out_ids *o, int32_t id) {
    if (o->n < o->cap) o->ids[o->n++] = id;
    else o->full = 1;
}

/* SPM: the initial symbols of s[0..n), merged, appended to o. 0, or -1 when the working space
 * is too small. */
static int spm_word(sqze_model *m, const uint8_t *s, size_t n, out_ids *o) {
    int32_t *w = m->work_ids;
    uint32_t k = 0, cap = m->work_cap;
    int prev_unk = 0;
    for (size_t i = 0; i < n;) {
        uint32_t len = utf8_len(s + i, n - i);
        if (!len) len = 1;
        int32_t id = find(m, s + i, len);
        if (id >= 0 && (m->tok_type[id] == T_NORMAL || m->tok_type[id] == T_USER)) {
            if (k >= cap) return -1;
            w[k++] = id;
            prev_unk = 0;
        } else {
            int bytes = 1;
            for (uint32_t j = 0; j < len; j++) bytes = bytes && m->byte_tok[s[i + j]] >= 0;
            if (bytes) {
                for (uint32_t j = 0; j < len; j++) {
                    if (k >= cap) return -1;
                    w[k++] = m->byte_tok[s[i + j]];
                }
                prev_unk = 0;
            } else if (m->vocab.unk >= 0) {
                if (!((m->vocab.flags & SQZB_VOCAB_FUSE_UNK) && prev_unk)) {
                    if (k >= cap) return -1;
                    w[k++] = m->vocab.unk;
                }
                prev_unk = 1;
            } /* else: sqz refuses; the character is dropped here (no way to spell it) */
        }
        i += len;
    }
    k = merge(m, w, k);
    for (uint32_t i = 0; i < k; i++) push(o, w[i]);
    return 0;
}

static int spm_encode(sqze_model *m, const char *text, size_t len, out_ids *o) {
    uint8_t *t = m->work_text;
    size_t n = 0, cap = 4 * (size_t)m->work_cap;
    if ((m->vocab.flags & SQZB_VOCAB_SPACE_PREFIX) && len) { /* sqz: the prefix goes on non-empty text */
        memcpy(t, MARK, 3);
        n = 3;
    }
    for (size_t i = 0; i < len; i++) {
        if (n + 3 > cap) return -1;
        if (text[i] == ' ' && m->escape_spaces) {
            memcpy(t + n, MARK, 3);
            n += 3;
        } else {
            t[n++] = (uint8_t)text[i];
        }
    }
    if (!(m->vocab.flags & SQZB_VOCAB_SPLIT_WORDS)) return spm_word(m, t, n, o);
    size_t start = 0; /* Metaspace split: words begin at each U+2581 */
    for (size_t i = 1; i + 3 <= n; i++) {
        if (!memcmp(t + i, MARK, 3)) {
            if (spm_word(m, t + start, i - start, o)) return -1;
            start = i;
            i += 2;
        }
    }
    return spm_word(m, t + start, n - start, o);
}

/* ---- byte-level BPE ---- */
static int is_space(uint8_t c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }
static int is_digit(uint8_t c) { return c >= '0' && c <= '9'; }
static int is_letter(uint8_t c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c >= 0x80; }
static int cls(uint8_t c) { return is_space(c) ? 0 : is_letter(c) ? 1 : is_digit(c) ? 2 : 3; }

static int bpe_piece(sqze_model *m, const uint8_t *s, size_t n, out_ids *o) {
    int32_t *w = m->work_ids;
    if (n > m->work_cap) return -1;
    for (size_t i = 0; i < n; i++) {
        if (m->byte_tok[s[i]] < 0) return -1;
        w[i] = m->byte_tok[s[i]];
    }
    uint32_t k = merge(m, w, (uint32_t)n);
    for (uint32_t i = 0; i < k; i++) push(o, w[i]);
    return 0;
}

/* GPT-2's pattern over s[0..n): 's|'t|'re|'ve|'m|'ll|'d| ?L+| ?N+| ?[^\s L N]+|\s+(?!\S)|\s+ */
static int gpt2_split(sqze_model *m, const uint8_t *s, size_t n, out_ids *o) {
    static const char *const contr[] = {"'s", "'t", "'re", "'ve", "'m", "'ll", "'d"};
    size_t i = 0;
    while (i < n) {
        size_t j = i;
        if (s[i] == '\'') {
            for (int c = 0; c < 7 && j == i; c++) {
                size_t cl = strlen(contr[c]);
                if (n - i >= cl && !memcmp(s + i, contr[c], cl)) j = i + cl;
            }
        }
        if (j == i) {
            size_t k = i + (s[i] == ' ' && i + 1 < n && !is_space(s[i + 1]));
            if (k < n && !is_space(s[k])) {
                int c = cls(s[k]);
                j = k;
                while (j < n && cls(s[j]) == c) j++;
            } else { /* whitespace: the run, less its last char when a non-space follows */
                j = i;
                while (j < n && is_space(s[j])) j++;
                if (j < n && j - i > 1) j--;
            }
        }
        if (bpe_piece(m, s + i, j - i, o)) return -1;
        i = j;
    }
    return 0;
}

static int bpe_encode(sqze_model *m, const char *text, size_t len, out_ids *o) {
    const uint8_t *s = (const uint8_t *)text;
    if (!m->split_digits) return gpt2_split(m, s, len, o);
    size_t start = 0;
    for (size_t i = 0; i < len; i++) {
        if (!is_digit(s[i])) continue;
        if (i > start && gpt2_split(m, s + start, i - start, o)) return -1;
        if (bpe_piece(m, s + i, 1, o)) return -1;
        start = i + 1;
    }
    return start < len ? gpt2_split(m, s + start, len - start, o) : 0;
}

int64_t sqze_tokenize(sqze_model *m, const char *text, size_t len, int add_bos, int32_t *ids, size_t cap, char *err,
                      size_t errcap) {
    out_ids o = {ids, 0, cap, 0};
    if (add_bos && (m->vocab.flags & SQZB_VOCAB_ADD_BOS) && m->vocab.bos >= 0) push(&o, m->vocab.bos);
    int r = len ? (m->vocab.kind == 1 ? spm_encode(m, text, len, &o) : bpe_encode(m, text, len, &o)) : 0;
    if (add_bos && (m->vocab.flags & SQZB_VOCAB_ADD_EOS) && m->vocab.eos >= 0) push(&o, m->vocab.eos);
    if (r) {
        sqze__fail(err, errcap, "the prompt (%zu bytes) exceeds the tokenizer's working space for a context of %u",
                   len, (unsigned)m->ctx);
        return -1;
    }
    if (o.full) {
        sqze__fail(err, errcap, "the prompt is more than %zu tokens", cap);
        return -1;
    }
    return (int64_t)o.n;
}

size_t sqze_token_text(const sqze_model *m, int first, int32_t id, char *buf, size_t cap) {
    if (id < 0 || (uint32_t)id >= m->vocab.n_tokens || m->tok_type[id] == T_CONTROL) return 0;
    const uint8_t *s = m->tok_str[id];
    uint32_t n = m->tok_len[id];
    size_t k = 0;
    if (m->vocab.kind == 2) { /* byte-level: each code point is a byte */
        for (uint32_t i = 0; i < n && k < cap;) {
            uint32_t cp, l = utf8_len(s + i, n - i);
            if (l == 1) cp = s[i];
            else if (l == 2) cp = (uint32_t)(s[i] & 0x1F) << 6 | (s[i + 1] & 0x3F);
            else cp = 0xFFFF;
            if (m->tok_type[id] != T_USER && cp < 324 && m->byte_of_cp[cp] != 0xFFFF) {
                buf[k++] = (char)m->byte_of_cp[cp];
                i += l;
            } else { /* text as it is */
                buf[k++] = (char)s[i++];
            }
        }
        return k;
    }
    if (m->tok_type[id] == T_BYTE) {
        int hi = s[3] <= '9' ? s[3] - '0' : (s[3] | 0x20) - 'a' + 10, lo = s[4] <= '9' ? s[4] - '0' : (s[4] | 0x20) - 'a' + 10;
        if (cap) buf[k++] = (char)(hi * 16 + lo);
        return k;
    }
    for (uint32_t i = 0; i < n && k < cap;) {
        if (m->escape_spaces && i + 3 <= n && !memcmp(s + i, MARK, 3)) {
            buf[k++] = ' ';
            i += 3;
        } else {
            buf[k++] = (char)s[i++];
        }
    }
    if (first && k && buf[0] == ' ' && (m->vocab.flags & SQZB_VOCAB_SPACE_PREFIX)) {
        memmove(buf, buf + 1, --k);
    }
    return k;
}

int sqze_token_is_control(const sqze_model *m, int32_t id) {
    return id >= 0 && (uint32_t)id < m->vocab.n_tokens && m->tok_type[id] == T_CONTROL;
}
int32_t sqze_token_find(const sqze_model *m, const char *s, size_t n) {
    return n > 0xFFFFFFFFu ? -1 : sqze__tok_find(m, (const uint8_t *)s, (uint32_t)n);
}
int32_t sqze_bos(const sqze_model *m) { return m->vocab.bos; }
int32_t sqze_eos(const sqze_model *m) { return m->vocab.eos; }
uint32_t sqze_vocab_size(const sqze_model *m) { return m->hp.vocab_size; }

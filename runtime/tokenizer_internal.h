/*
 * runtime/tokenizer_internal.h - what the tokenizer files share (not public; see sqz/tokenizer.h).
 *
 * tokenizer.c        construction, hashing, the best-first pair merger, special-token splitting,
 *                    the output buffer, decoding;
 * tokenizer_spm.c    SentencePiece-style BPE (scores or merge ranks, byte fallback);
 * tokenizer_bpe.c    byte-level BPE with pre-tokenizer regexes (PCRE2);
 * tokenizer_wpm.c    WordPiece with the BERT normaliser;
 * tokenizer_unicode_data.c  generated Unicode tables for the BERT normaliser.
 */
#ifndef SQZ_RUNTIME_TOKENIZER_INTERNAL_H
#define SQZ_RUNTIME_TOKENIZER_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/internal.h"
#include "sqz/tokenizer.h"
#include "sqz/vocab.h"

/* A growing array of token ids. */
typedef struct sqz__ids {
    int32_t *v;
    size_t n, cap;
} sqz__ids;

/* Appends one id / n ids; SQZ_ERR_NOMEM on failure. */
sqz_status sqz__ids_push(sqz__ids *a, int32_t id);
sqz_status sqz__ids_append(sqz__ids *a, const int32_t *ids, size_t n);

/* Best-first merging of adjacent symbols (SentencePiece / BPE), reusable across calls. */
typedef struct sqz__merger {
    struct sqz__sym *sym;
    size_t sym_cap;
    struct sqz__cand *heap;
    size_t heap_n, heap_cap;
    char *buf; /* concatenation buffer (score mode) */
    size_t buf_cap;
} sqz__merger;

typedef enum sqz__merge_mode {
    SQZ__MERGE_SCORES = 0, /* merge the pair whose concatenation is a token with the highest score */
    SQZ__MERGE_RANKS = 1,  /* merge the pair listed first in the merges */
} sqz__merge_mode;

/* Per-kind behaviour: encode one stretch of ordinary text (no special tokens inside) into out.
 * `first` is true for the stretch at the very start of the text (SPM's space prefix). */
typedef sqz_status (*sqz__encode_fn)(const sqz_tokenizer *t, void *work, const char *text, size_t len, bool first,
                                     sqz__ids *out);

struct sqz_tokenizer {
    sqz_vocab_kind kind;
    int32_t n_tokens;
    char **text;         /* token strings as in the vocab, NUL-terminated (arena) */
    uint32_t *text_len;  /* their lengths in bytes */
    char **piece;        /* decoded bytes (sqz_token_piece), NUL-terminated (arena) */
    uint32_t *piece_len;
    float *scores;       /* n_tokens, 0 when the vocab has none */
    uint8_t *type;       /* sqz_token_type per token */
    uint32_t max_text_len;

    /* token text -> id: open addressing, slots hold id + 1 (0 = empty) */
    uint32_t *map;
    uint32_t map_mask;

    /* merges: (left id, right id) -> rank and merged id */
    struct sqz__pair_slot *pairs;
    uint32_t pairs_mask;
    int32_t n_merges;    /* valid merges kept */

    int32_t bos, eos, unk, pad, cls, sep, mask;
    bool add_bos, add_eos;

    /* control and user-defined tokens that SQZ_TOKENIZE_PARSE_SPECIAL recognises, longest first */
    int32_t *specials;
    size_t n_specials;
    uint8_t special_first[256]; /* 1 if some special token starts with this byte */

    sqz__encode_fn encode;
    void *(*work_new)(const sqz_tokenizer *t); /* per-call scratch (NULL on out of memory) */
    void (*work_free)(void *work);
    void *impl;                                /* the kind's own data */
    void (*impl_free)(void *impl);
    bool detok_strip_space; /* SPM: drop the space the prefix added from the decoded text */
    /* Kind-specific decoding (NULL = the pieces concatenated, control tokens skipped unless special) */
    sqz_status (*detok)(const sqz_tokenizer *t, const int32_t *ids, size_t n, bool special, char **text,
                        size_t *len);

    char *arena;
};

/* Token id of the bytes s[0..n), or -1. */
int32_t sqz__tok_find(const sqz_tokenizer *t, const char *s, size_t n);
/* Rank and merged id of the pair (a, b); false if the pair is not a merge. */
bool sqz__tok_pair(const sqz_tokenizer *t, int32_t a, int32_t b, int32_t *rank, int32_t *merged);

/* Merges ids[0..*n) in place, best pair first, ties to the leftmost; *n shrinks. */
sqz_status sqz__merge(const sqz_tokenizer *t, sqz__merger *m, sqz__merge_mode mode, int32_t *ids, size_t *n);
void sqz__merger_free(sqz__merger *m);

/* UTF-8: length (1..4) of the valid sequence at s[0..n) and its code point, or 0 if the byte at s
 * does not start a valid sequence (overlong, surrogate, > U+10FFFF, truncated). */
size_t sqz__utf8_next(const char *s, size_t n, uint32_t *cp);
/* Writes cp as UTF-8 into out (4 bytes room); returns the length. */
size_t sqz__utf8_put(uint32_t cp, char *out);

/* Appends bytes to a growing char buffer. */
typedef struct sqz__str {
    char *s;
    size_t n, cap;
} sqz__str;
sqz_status sqz__str_append(sqz__str *b, const char *s, size_t n);

/* Per-kind set-up: fill t->encode, work_new/free, impl, detok, and the decoded pieces
 * (t->piece / t->piece_len, allocated by the callee with sqz__tok_set_pieces). */
sqz_status sqz__spm_init(sqz_tokenizer *t, const sqz_vocab *v);
sqz_status sqz__bpe_init(sqz_tokenizer *t, const sqz_vocab *v);
sqz_status sqz__wpm_init(sqz_tokenizer *t, const sqz_vocab *v);

/* Stores decoded piece i (copies n bytes; called once per token by the kinds' init). */
sqz_status sqz__tok_set_piece(sqz_tokenizer *t, int32_t i, const char *s, size_t n);

/* True if token i is a control/unknown/user-defined (not ordinary text) token. */
static inline bool sqz__tok_is_special(const sqz_tokenizer *t, int32_t i) {
    return t->type[i] == SQZ_TOKEN_CONTROL || t->type[i] == SQZ_TOKEN_USER_DEFINED ||
           t->type[i] == SQZ_TOKEN_UNKNOWN;
}

/* ---- generated Unicode tables (tokenizer_unicode_data.c) ---- */
typedef struct sqz__uni_case_run {
    uint32_t start;
    int32_t count, delta, stride;
} sqz__uni_case_run;
extern const char sqz__uni_version[];
extern const uint32_t sqz__uni_class_runs[];
extern const size_t sqz__uni_n_class_runs;
extern const sqz__uni_case_run sqz__uni_lower_runs[];
extern const size_t sqz__uni_n_lower_runs;
extern const uint32_t sqz__uni_strip1[][2];
extern const size_t sqz__uni_n_strip1;
extern const uint32_t sqz__uni_stripn[][5];
extern const size_t sqz__uni_n_stripn;

#endif

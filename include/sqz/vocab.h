/*
 * sqz/vocab.h - the tokenizer data a model carries.
 *
 * This is the tokenizer as data (what GGUF stores under tokenizer.ggml.*), not the
 * encoder itself (runtime/ builds encoders from it). Readers fill it from GGUF arrays,
 * llama2.c tokenizer.bin or HF tokenizer.json; writers turn it back into those forms.
 * All strings are UTF-8 and owned by the vocab; sqz_vocab_clear() frees them.
 */
#ifndef SQZ_VOCAB_H
#define SQZ_VOCAB_H

#include <stdbool.h>
#include <stdint.h>

#include "sqz/api.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum sqz_vocab_kind {
    SQZ_VOCAB_NONE = 0, /* no tokenizer known */
    SQZ_VOCAB_SPM = 1,  /* SentencePiece-style BPE by scores, byte fallback <0xNN> (GGUF "llama") */
    SQZ_VOCAB_BPE = 2,  /* byte-level BPE by merges, GPT-2 byte map (GGUF "gpt2") */
    SQZ_VOCAB_WPM = 3,  /* WordPiece (GGUF "bert") */
} sqz_vocab_kind;

/* GGUF tokenizer.ggml.token_type values. */
typedef enum sqz_token_type {
    SQZ_TOKEN_NORMAL = 1,
    SQZ_TOKEN_UNKNOWN = 2,
    SQZ_TOKEN_CONTROL = 3,
    SQZ_TOKEN_USER_DEFINED = 4,
    SQZ_TOKEN_UNUSED = 5,
    SQZ_TOKEN_BYTE = 6,
} sqz_token_type;

/* sqz_vocab.unstated bits: add_* flags a GGUF source left to llama.cpp's defaults. */
enum {
    SQZ_VOCAB_UNSTATED_ADD_BOS = 1,
    SQZ_VOCAB_UNSTATED_ADD_EOS = 2,
    SQZ_VOCAB_UNSTATED_ADD_SPACE_PREFIX = 4,
};

typedef struct sqz_vocab {
    sqz_vocab_kind kind;
    int32_t n_tokens;
    char **tokens;        /* n_tokens strings, in id order */
    float *scores;        /* n_tokens scores, or NULL */
    int32_t *types;       /* n_tokens sqz_token_type values, or NULL (all normal) */
    int32_t n_merges;
    char **merges;        /* "left right" pairs by priority (BPE), or NULL */
    int32_t bos, eos, unk, pad, sep, cls, mask; /* special ids, -1 if none */
    bool add_bos, add_eos;
    bool add_space_prefix; /* SPM: prepend a space (U+2581) to the text */
    uint32_t unstated;    /* SQZ_VOCAB_UNSTATED_* bits: the GGUF writer leaves these flags out as the
                             source did (the values above are llama.cpp's defaults); 0 elsewhere */
    char *pre;            /* pre-tokenizer name (GGUF tokenizer.ggml.pre: "default", "smollm", ...) or NULL */
    char *chat_template;  /* or NULL */
    char *hf_json;        /* verbatim tokenizer.json when the model came from an HF directory, else NULL */
    char *hf_config_json; /* verbatim tokenizer_config.json, or NULL */
    int32_t max_token_len; /* llama2.c tokenizer.bin header; 0 if unknown */
} sqz_vocab;

/* Sets every field to its empty value (special ids -1). */
SQZ_API void sqz_vocab_init(sqz_vocab *v);
/* Frees everything the vocab owns and re-initialises it. NULL is fine. */
SQZ_API void sqz_vocab_clear(sqz_vocab *v);
/* GGUF tokenizer.ggml.model name of a kind: "llama", "gpt2", "bert", or "none". */
SQZ_API const char *sqz_vocab_kind_name(sqz_vocab_kind k);

#ifdef __cplusplus
}
#endif
#endif

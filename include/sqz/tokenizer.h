/*
 * sqz/tokenizer.h - text to token ids and back, for the vocabularies a model carries.
 *
 * A tokenizer is built from an sqz_vocab (sqz/vocab.h: what a loader read from a GGUF file, a
 * llama2.c tokenizer.bin or an HF tokenizer.json) and reproduces the reference tokenizer of
 * that vocabulary token for token:
 *
 *   SQZ_VOCAB_SPM  SentencePiece-style BPE (llama2.c run.c encode, llama.cpp llm_tokenizer_spm):
 *                  spaces become U+2581 "▁", a leading "▁" is added when vocab->add_space_prefix,
 *                  adjacent symbols are merged best-first, characters missing from the vocabulary
 *                  fall back to <0xNN> byte tokens (else <unk>). The merge order is
 *                    - by the score of the merged token (highest first) when the vocab has scores
 *                      and no merges (llama2.c tokenizer.bin, GGUF "llama"), or
 *                    - by merge rank (first listed first) when the vocab has merges (an HF
 *                      tokenizer.json BPE model with byte_fallback, as tinystories-656K): this is
 *                      what HF tokenizers does for such files, and it differs from scores.
 *                  Ties go to the leftmost pair. The text is one sequence (no pre-split), unless the
 *                  tokenizer.json has a Metaspace pre-tokenizer with split = true.
 *   SQZ_VOCAB_BPE  byte-level BPE (GPT-2, llama-3, SmolLM2): the text is cut into words by the
 *                  pre-tokenizer regexes (chosen by vocab->pre, the GGUF tokenizer.ggml.pre name:
 *                  "gpt2"/"default" -> the GPT-2 regex; "llama-bpe"/"llama3" -> llama-3's;
 *                  "smollm"/"starcoder"/"refact"/"command-r"/"codeshell" -> single digits, then
 *                  GPT-2's; "qwen2"/"stablelm2" -> llama-3's with single digits; else by the
 *                  pre_tokenizer of vocab->hf_json), each word's bytes are mapped through GPT-2's
 *                  byte-to-unicode table and merged by rank.
 *   SQZ_VOCAB_WPM  WordPiece (BERT): HF BertNormalizer (drop control characters, whitespace to
 *                  space, spaces around CJK ideographs, accents stripped (NFD without Mn) and
 *                  lowercase when the vocab is uncased), split on whitespace and punctuation,
 *                  then greedy longest-match-first with "##" continuations; a word with no
 *                  segmentation, or longer than 100 characters, becomes [UNK].
 *
 *   sqz_tokenizer *tok;
 *   if (sqz_tokenizer_new(&model->vocab, &tok) != SQZ_OK) { ... sqz_last_error() ... }
 *   int32_t *ids; size_t n;
 *   if (sqz_tokenize(tok, text, strlen(text), true, &ids, &n) == SQZ_OK) {   // BOS per the vocab
 *       char *back; size_t len;
 *       sqz_detokenize(tok, ids, n, false, &back, &len);                    // == text for SPM/BPE
 *       free(back);
 *       free(ids);
 *   }
 *   sqz_tokenizer_free(tok);
 *
 * Text is UTF-8. Invalid bytes are not an error: SPM encodes each as its <0xNN> token, BPE as a
 * one-byte word, WPM reads them as U+FFFD, which its normaliser drops.
 *
 * Cost: building hashes the tokens and merges once (O(vocab + merges)); encoding is
 * O(n log n) in the text length (a priority queue over adjacent pairs; BPE words are cached
 * per call). A tokenizer is immutable after sqz_tokenizer_new: any number of threads may use
 * one tokenizer at the same time.
 */
#ifndef SQZ_TOKENIZER_H
#define SQZ_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sqz/api.h"
#include "sqz/status.h"
#include "sqz/vocab.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sqz_tokenizer sqz_tokenizer;

/* Flags of sqz_tokenize_ex. */
typedef enum sqz_tokenize_flags {
    /* Add the special tokens the vocabulary asks for: BOS when vocab->add_bos and EOS when
     * vocab->add_eos (SPM, BPE); [CLS] first and [SEP] last (WPM). */
    SQZ_TOKENIZE_ADD_SPECIAL = 1u << 0,
    /* Text that spells a control or user-defined token ("<|im_start|>", "[MASK]") becomes that
     * token (longest match first), as HF tokenizers does by default and llama.cpp with
     * parse_special. Without it such text is tokenized as ordinary characters. */
    SQZ_TOKENIZE_PARSE_SPECIAL = 1u << 1,
} sqz_tokenize_flags;

/*
 * Builds a tokenizer for vocabulary v and stores it in *out (the caller frees it with
 * sqz_tokenizer_free). The tokenizer copies what it needs: v may be changed or freed afterwards.
 * Errors (*out is NULL then): SQZ_ERR_UNSUPPORTED for a kind of NONE or a pre-tokenizer it does
 * not know (message names it); SQZ_ERR_FORMAT for an inconsistent vocabulary (no tokens, a
 * special id out of range, a regex PCRE2 rejects); SQZ_ERR_NOMEM.
 */
SQZ_API sqz_status sqz_tokenizer_new(const sqz_vocab *v, sqz_tokenizer **out);

/* Frees the tokenizer. NULL is fine. */
SQZ_API void sqz_tokenizer_free(sqz_tokenizer *t);

/*
 * Encodes text[0..len) (UTF-8; need not be NUL-terminated; len 0 is fine) into token ids.
 * add_special: see SQZ_TOKENIZE_ADD_SPECIAL (llama.cpp's perplexity and generation add them).
 * On success *ids is a malloc'd array of *n_ids ids in [0, n_tokens) that the caller frees with
 * free(); it is non-NULL even when *n_ids is 0. On error *ids is NULL and *n_ids 0.
 * Errors: SQZ_ERR_INVALID_ARG (NULL arguments), SQZ_ERR_NOMEM, SQZ_ERR_FORMAT when a word cannot
 * be encoded because the vocabulary lacks both its characters and the unknown token.
 */
SQZ_API sqz_status sqz_tokenize(const sqz_tokenizer *t, const char *text, size_t len, bool add_special, int32_t **ids,
                                size_t *n_ids);

/* sqz_tokenize with sqz_tokenize_flags (OR'd). sqz_tokenize(.., b, ..) is
 * sqz_tokenize_ex(.., b ? SQZ_TOKENIZE_ADD_SPECIAL : 0, ..). */
SQZ_API sqz_status sqz_tokenize_ex(const sqz_tokenizer *t, const char *text, size_t len, unsigned flags, int32_t **ids,
                                   size_t *n_ids);

/*
 * The bytes one token stands for, in *len bytes (also NUL-terminated; the bytes themselves may
 * contain NUL, e.g. SPM's <0x00>): SPM "▁the" -> " the", "<0x0A>" -> "\n"; BPE "Ġthe" -> " the";
 * WPM "##ing" -> "ing", "the" -> "the" (sqz_detokenize adds the spaces between WPM words).
 * Control, unknown and user-defined tokens give their text ("<s>", "[CLS]").
 * The string belongs to the tokenizer and lives as long as it. NULL (and *len 0) when id is out
 * of range. len may be NULL.
 */
SQZ_API const char *sqz_token_piece(const sqz_tokenizer *t, int32_t id, size_t *len);

/*
 * Decodes ids[0..n) into text: the pieces concatenated, control tokens left out unless `special`
 * (WPM also leaves out [UNK], as HF's decode with skip_special_tokens; SPM and BPE write "<unk>");
 * SPM drops the one leading space that add_space_prefix added; WPM joins words with spaces and
 * glues "##" continuations and punctuation as HF's WordPiece decoder (cleanup on).
 * For SPM and BPE, sqz_detokenize(sqz_tokenize(x)) == x (lossless) as long as no <unk> was needed
 * (SPM without byte tokens) and the vocabulary has a token for every byte the text holds (a BPE
 * vocabulary may lack some, as SmolLM2's lacks 0xFF: such bytes are dropped, as HF and llama.cpp
 * do). WPM is lossy.
 * On success *text is malloc'd (NUL-terminated, *len bytes before the NUL) and the caller frees
 * it with free(). len may be NULL. Errors: SQZ_ERR_INVALID_ARG (an id out of range; message
 * names its position), SQZ_ERR_NOMEM; *text is NULL then.
 */
SQZ_API sqz_status sqz_detokenize(const sqz_tokenizer *t, const int32_t *ids, size_t n, bool special, char **text,
                                  size_t *len);

/* The tokenizer's kind (SQZ_VOCAB_SPM, _BPE or _WPM). */
SQZ_API sqz_vocab_kind sqz_tokenizer_kind(const sqz_tokenizer *t);
/* Number of token ids (vocab->n_tokens). */
SQZ_API int32_t sqz_tokenizer_n_tokens(const sqz_tokenizer *t);
/* Begin/end of sequence ids (-1 if none). For WPM these are [CLS] and [SEP]. */
SQZ_API int32_t sqz_tokenizer_bos(const sqz_tokenizer *t);
SQZ_API int32_t sqz_tokenizer_eos(const sqz_tokenizer *t);
/* Whether SQZ_TOKENIZE_ADD_SPECIAL adds a BOS (resp. EOS) token. */
SQZ_API bool sqz_tokenizer_adds_bos(const sqz_tokenizer *t);
SQZ_API bool sqz_tokenizer_adds_eos(const sqz_tokenizer *t);
/* True if id is a control token (BOS, EOS, [CLS], <|im_end|>, ...): generation stops on EOS,
 * detokenize skips them. False for ids out of range. */
SQZ_API bool sqz_token_is_control(const sqz_tokenizer *t, int32_t id);

#ifdef __cplusplus
}
#endif
#endif

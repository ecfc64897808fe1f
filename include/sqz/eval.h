/*
 * sqz/eval.h - accuracy evaluation: perplexity, divergence from a base model, embedding
 * similarity, and the JSON report.
 *
 * Perplexity follows llama.cpp's tools/perplexity protocol so that the numbers can be put next
 * to its tables: the token ids of the whole text (tokenized once, with BOS when the vocabulary
 * adds one) are cut into n_chunks = min(n_tokens / ctx, max_chunks) chunks of ctx tokens; the
 * first token of each chunk is replaced by BOS when the vocabulary adds BOS; only the second
 * half of each chunk is scored: the logits at positions ctx/2 .. ctx-2 predict tokens
 * ctx/2+1 .. ctx-1, i.e. ctx - 1 - ctx/2 scored tokens per chunk.
 *   ppl = exp(mean nll), ppl_stderr = ppl * sqrt((mean nll^2 - mean nll^2) / (count - 1))
 *
 * With a base (a second session on the same tokens, or base logits saved earlier), every
 * scored position also gives (llama.cpp's KL-divergence statistics):
 *   kld     = sum_v p_base(v) (log p_base(v) - log p_model(v))
 *   same top: argmax of the model's logits == argmax of the base's
 *   dp      = p_model(next token) - p_base(next token);  rms_dp = sqrt(mean dp^2)
 *
 *   sqz_eval_opts o = sqz_eval_default_opts();
 *   o.ctx = 256;
 *   sqz_eval_result r;
 *   sqz_eval_perplexity(session, ids, n_ids, &o, &r);
 *   printf("ppl %.4f +/- %.4f over %lld tokens\n", r.ppl, r.ppl_stderr, (long long)r.tokens_scored);
 *   sqz_eval_result_free(&r);
 */
#ifndef SQZ_EVAL_H
#define SQZ_EVAL_H

#include <stdbool.h>
#include <stdint.h>

#include "sqz/api.h"
#include "sqz/progress.h"
#include "sqz/runtime.h"
#include "sqz/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sqz_eval_opts {
    int64_t ctx;               /* chunk length in tokens (>= 4; <= the session's max_tokens); default 512 */
    int64_t max_chunks;        /* 0 = every whole chunk of the text */
    int32_t bos;               /* BOS id put first in each chunk; -1 = the model's vocab.bos */
    int add_bos;               /* 1 replace the first token by BOS, 0 never, -1 (default) = the
                                  model's vocab.add_bos, as llama.cpp does */
    sqz_session *base;         /* optional live base model (same vocabulary); borrowed */
    const char *base_logits;   /* optional base logits file (sqz_eval saved them) to compare with */
    const char *save_base;     /* optional path: write the base's logits (the live base's, or the
                                  model's own when there is no base) for later --base-logits use */
    bool save_base_scratch;    /* save_base is a scratch file read back within the run: it is put in
                                  place at once even while commits are deferred (sqz/io.h) */
    sqz_progress_fn progress;  /* optional: done/total in tokens processed */
    void *progress_user;
    /* Optional held-out evaluation: n_exclude spans [exclude[i][0], exclude[i][1]) of token
     * positions in tokens[] (e.g. the calibration windows: starts[i], starts[i] + ctx). A chunk
     * [c * ctx, (c + 1) * ctx) that overlaps one is skipped (counted in n_excluded); the others
     * keep their places in the text, so the chunks evaluated are a subset of those evaluated
     * without spans. max_chunks then caps the chunks evaluated (skipped ones do not count).
     * Base logits saved with spans hold the evaluated chunks only: read them back with the
     * same spans. Empty spans (start == end) exclude nothing. NULL / 0 = none: every chunk. */
    const int64_t (*exclude)[2];
    int64_t n_exclude;
} sqz_eval_opts;

/* ctx 512, max_chunks 0, bos -1, add_bos -1, everything else NULL / 0. */
SQZ_API sqz_eval_opts sqz_eval_default_opts(void);

/* The evaluation context of `sqz eval` and `sqz compress --eval` when none is given, one rule
 * for both: the family's default (decoders: llama.cpp's 512 tokens per chunk; encoders: 256
 * tokens per sentence) capped by the context the model was trained on (hp.ctx_len, when
 * known). A context given explicitly is used as given, beyond the trained one too (the
 * command lines warn then, as llama.cpp does when n_ctx_train < n_ctx). */
SQZ_API int64_t sqz_eval_default_ctx(const sqz_model *m);

typedef struct sqz_eval_result {
    /* perplexity (decoders) */
    double ppl, ppl_stderr, nll_mean;
    int64_t tokens_scored, n_chunks, ctx, n_tokens; /* n_tokens: the text's token count */
    int64_t n_excluded;                             /* chunks skipped: they overlap o->exclude */
    /* with a base */
    bool has_base;
    double ppl_base, ppl_base_stderr, delta_ppl;  /* delta_ppl = ppl - ppl_base */
    double kld_mean, kld_stderr, kld_p99, kld_p999, kld_max;
    double top1_agree;                            /* fraction in [0, 1] */
    double rms_dp, max_dp;                        /* of dp, in probability units [0, 1] */
    /* encoders (sqz_eval_embeddings) */
    bool is_encoder;
    int64_t n_sentences;
    double cos_mean, cos_p1, cos_min;
    /* cost */
    sqz_activations activations;   /* the evaluated session's (SQZ_ACTIVATIONS_F32: the exact model) */
    double seconds, tokens_per_s;  /* wall clock of the evaluation; tokens of the text evaluated per second
                                      (a live base's time included) */
    /* per-position KL values (tokens_scored floats, or NULL without a base), owned by the result */
    float *kld_values;
} sqz_eval_result;

/* Frees what the result owns (kld_values) and zeroes it. NULL is fine. */
SQZ_API void sqz_eval_result_free(sqz_eval_result *r);

/*
 * Perplexity of the decoder in `model` over tokens[0..n_tokens), and with o->base or
 * o->base_logits the divergence statistics against that base. o may be NULL for the defaults.
 * *r is filled (and owns kld_values; free with sqz_eval_result_free) on success.
 * Errors: SQZ_ERR_INVALID_ARG (fewer than 2 * ctx tokens, as llama.cpp requires; ctx beyond a
 * session's max_tokens; vocabularies of different sizes; saved base logits for other tokens or
 * another ctx; an exclusion span with start < 0 or end < start; every chunk excluded),
 * SQZ_ERR_FORMAT (a corrupt base logits file), SQZ_ERR_IO, the forward pass's errors.
 * A file written through o->save_base is atomic: it exists only if the whole run succeeded.
 */
SQZ_API sqz_status sqz_eval_perplexity(sqz_session *model, const int32_t *tokens, int64_t n_tokens,
                                       const sqz_eval_opts *o, sqz_eval_result *r);

/*
 * Cosine similarity between the sentence embeddings (sqz_embed, normalised) of model and base
 * over n sequences (seqs[i] of lens[i] ids each, [CLS] ... [SEP] as the tokenizer makes them):
 * fills cos_mean, cos_p1 (1st percentile), cos_min, n_sentences, is_encoder. Empty sequences are
 * skipped. Both sessions must run encoders with the same hidden size.
 */
SQZ_API sqz_status sqz_eval_embeddings(sqz_session *model, sqz_session *base, const int32_t *const *seqs,
                                       const int64_t *lens, int64_t n, sqz_eval_result *r);

/*
 * The report as JSON text: {"model": .., "base": .., "text": .., "ppl": .., "ppl_stderr": ..,
 * "tokens_scored": .., "n_chunks": .., "ctx": .., "n_excluded" (only when chunks were skipped),
 * and with a base "ppl_base", "delta_ppl", "kld_mean", "kld_p99", "kld_p999", "kld_max",
 * "top1_agree", "rms_dp"; for encoders
 * "cos_mean", "cos_p1", "cos_min", "n_sentences"; "seconds", "tokens_per_s"}.
 * model, base and text are labels (paths) and may be NULL. Returns a malloc'd string the caller
 * frees with free(), or NULL on out of memory.
 */
SQZ_API char *sqz_eval_report_json(const sqz_eval_result *r, const char *model, const char *base, const char *text);

/*
 * Base logits files ("SQZLOGB1"): what a later evaluation needs of a base model's output at every
 * scored position, compactly. Layout (little-endian):
 *   magic "SQZLOGB1" | u32 version (2; 1 is still read) | u32 n_vocab | u32 ctx | u32 n_chunks | u32 first (ctx/2)
 *   | u32 add_bos | i32 bos | u64 n_tokens (= n_chunks * ctx)
 *   | i32 tokens[n_tokens]        the evaluated token ids (before the BOS replacement)
 *   | per scored row (n_chunks * (ctx - 1 - first) rows, chunk by chunk):
 *       f32 scale, f32 min_log_prob, f32 nll (exact -log p(next token)), i32 argmax (exact),
 *       u16 q[n_vocab]: log p(v) = min_log_prob + scale * q[v]
 *   | u64 FNV-1a (64-bit) of the tokens and rows (version 2)
 * The reader checks the sum, and that every row is finite with scale >= 0, min_log_prob <= 0,
 * nll >= 0 and argmax < n_vocab.
 * The log-probabilities span [max - 16, max] in 65535 steps (llama.cpp's kl-divergence base
 * format does the same), so the KL divergence read back differs from a live base's by ~1e-6;
 * nll (hence ppl_base) and argmax (hence top-1 agreement) are exact.
 * Size: about 2 * n_vocab bytes per scored token (ctx 512, vocab 49152: 25 MB per chunk).
 */

#ifdef __cplusplus
}
#endif
#endif

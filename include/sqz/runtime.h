/*
 * sqz/runtime.h - the forward pass: decoders (llama family) and encoders (BERT).
 *
 * A session runs one model on one backend. It owns the scratch buffers, the
 * rotary tables, a key/value cache for up to max_tokens positions, and (by
 * default) float copies of the weights the backend cannot use as they are
 * (quantized GGUF matrices are dequantized to f32 once, on first use). Whole
 * windows are processed at once (prefill): every linear layer is one matrix
 * product over all the window's tokens.
 *
 *   sqz_session *s;
 *   if (sqz_session_new(model, NULL, &s) != SQZ_OK) { ... sqz_last_error() ... }
 *   float *logits = malloc(n * model->hp.vocab_size * sizeof(float));
 *   sqz_forward(s, tokens, n, 0, 0, logits);         // logits of every position
 *   sqz_session_free(s);
 *
 * Threads: matrix products run on the backend (on the CPU: the backend's pool for
 * weights in their stored blocks, OpenBLAS's threads for f32 products); attention,
 * norms and element-wise work run on the session's own threads. A
 * session is not thread-safe: use one per thread. The model must outlive the
 * session and must not change while the session uses it (see
 * sqz_session_invalidate after a pass rewrote tensors).
 *
 * Conventions: token ids are int32 in [0, vocab_size); activations and logits are
 * f32, row-major, one row per token.
 */
#ifndef SQZ_RUNTIME_H
#define SQZ_RUNTIME_H

#include <stdbool.h>
#include <stdint.h>

#include "sqz/api.h"
#include "sqz/backend.h"
#include "sqz/model.h"
#include "sqz/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sqz_session sqz_session;

/* How weights the backend cannot multiply directly are handled. The CPU backend multiplies every
 * stored dtype with a float view from its blocks (F32/F16/BF16, the GGUF block types: no f32
 * copy, whatever the mode); what is left are sqz's own int8/int4 scheme weights (sqz/qparams.h:
 * per-channel or per-group scales, smoothing, W8A8), which the modes below dequantize. */
typedef enum sqz_weight_mode {
    SQZ_WEIGHTS_CACHE = 0,  /* dequantize each such matrix to f32 on first use and keep it: fastest;
                               memory grows to those matrices in f32 */
    SQZ_WEIGHTS_STREAM = 1, /* dequantize in row panels at every use: memory stays at one panel
                               (a few MB); slower */
} sqz_weight_mode;

typedef struct sqz_session_opts {
    int n_threads;          /* threads for attention and element-wise work; 0 = all online cores.
                               A backend the session makes gets the same number (its pool splits the
                               products on stored weights; OpenBLAS's threads the f32 ones); a
                               borrowed backend keeps its own. */
    int64_t max_tokens;     /* longest window (positions 0..max_tokens-1); 0 = min(ctx_len, 2048),
                               or 2048 when ctx_len is unknown */
    sqz_weight_mode weights;
    sqz_backend *backend;   /* borrowed, must outlive the session; NULL = the session makes and owns a
                               CPU backend. A device backend (sqz_backend_host_memory false, e.g.
                               CUDA) takes the linear layers' products: each weight goes to the
                               device as f32 on first use and stays until sqz_session_invalidate
                               drops its layer; activations, attention and hooks stay on the host
                               (docs/device.md). */
    sqz_activations activations; /* SQZ_ACTIVATIONS_F32 (the exact model) or SQZ_ACTIVATIONS_Q8 (each product on stored
                               weights takes its input quantized as ggml-cpu does: llama.cpp's
                               numbers); Q8 needs the session's own CPU backend or a borrowed CPU one */
    bool map_weights;       /* false (default): on a host-memory backend each weight of 2 MB or more
                               that lies in a file mapping is copied, on its first product of at
                               most 16 tokens (generation's steps; eval's windows do not), into
                               transparent huge pages and multiplied from there (one TLB entry per
                               2 MB instead of per 4 KB: generation ~10% faster on a 1.5 B), the
                               mapping's pages of it dropped (resident memory does not grow); true:
                               multiply straight from the mapping */
} sqz_session_opts;

/* Defaults: n_threads 0, max_tokens 0, SQZ_WEIGHTS_CACHE, backend NULL, SQZ_ACTIVATIONS_F32,
 * map_weights false. */
SQZ_API sqz_session_opts sqz_session_default_opts(void);

/* Makes a session for model m (validated again here; llama and BERT families). opts may be
 * NULL for the defaults. On success *out is owned by the caller (sqz_session_free).
 * Errors: SQZ_ERR_ARCH (family/shape the runtime cannot run), SQZ_ERR_NOMEM, SQZ_ERR_UNSUPPORTED
 * (a backend that does not work on host memory, a weight dtype with no float view). */
SQZ_API sqz_status sqz_session_new(const sqz_model *m, const sqz_session_opts *opts, sqz_session **out);
/* Frees the session and everything it owns (not the model, not a borrowed backend). NULL is fine. */
SQZ_API void sqz_session_free(sqz_session *s);

/* The model and the window limit the session was made with. */
SQZ_API const sqz_model *sqz_session_model(const sqz_session *s);
SQZ_API int64_t sqz_session_max_tokens(const sqz_session *s);
/* The threads the session's element-wise work and attention run on (its pool, the caller counted). */
SQZ_API int sqz_session_threads(const sqz_session *s);
/* How the session's products take their input (sqz_session_opts.activations). */
SQZ_API sqz_activations sqz_session_activations(const sqz_session *s);
/* Bytes the session holds (scratch, caches, dequantized weights so far). */
SQZ_API int64_t sqz_session_bytes(const sqz_session *s);

/* Forgets the float copies of layer `layer`'s weights (-1: the global tensors: embeddings,
 * classifier, final norm; -2: everything), so that tensors a pass rewrote (data, dtype,
 * quantization parameters) are read again. The set of tensors must not change (make a new
 * session then); quantization parameters are checked when the session is made, so a pass that
 * attaches new ones should make a new session, or check them itself (sqz_qparams_check).
 *
 * Weights quantized with sqz's schemes (sqz_tensor.qp, sqz/qparams.h) run as that header defines:
 * the input is divided by in_scale when set, and a W8A8 layer quantizes its input to int8 (per
 * token, or with the static act_scale) before the product, which is computed in float on the
 * dequantized operands (equal to the INT8 GEMM up to float rounding of the sums). */
SQZ_API void sqz_session_invalidate(sqz_session *s, int32_t layer);

/* On a session with a device backend that copies beside its computation (the backend's
 * upload_async), starts copying layer `layer`'s weights, norms and biases to the device as the
 * block would upload them on first use (block types dequantized now, on the session's pool), so
 * that the layer's next block finds them there; the copies overlap whatever runs meanwhile. The
 * first use of the layer waits for them. Nothing is computed differently. Does nothing (SQZ_OK) on
 * any other session, under a device memory cap (sqz_backend_set_mem_cap), or when the device has
 * no room (the layer then uploads on first use); one layer is in flight at a time (a pending one
 * is finished first). The calibration driver calls it for block l + 1 while block l's outputs are
 * recomputed (calib/driver.c). */
SQZ_API sqz_status sqz_session_prefetch(sqz_session *s, int32_t layer);

/* ---- hooks: observe activations (calibration) ------------------------------------------ */

typedef enum sqz_hook_point {
    SQZ_HOOK_BLOCK_IN = 0,  /* the residual stream entering block `layer`: (n_tokens, d_model) */
    SQZ_HOOK_LINEAR_IN = 1, /* the input of the linear layers named in `roles` (of block `layer`,
                               or the classifier with layer -1): (n_tokens, in_features) */
    SQZ_HOOK_BLOCK_OUT = 2, /* the residual stream leaving block `layer`: (n_tokens, d_model) */
    SQZ_HOOK_EXPERT_OUT = 3, /* one expert's output on the tokens routed to it (in_expert), before its routing
                                weights (`weights`, one per row) scale it: (n_tokens, d_model) (expert pruning's
                                REAP score) */
} sqz_hook_point;

typedef struct sqz_hook_event {
    sqz_hook_point point;
    int32_t layer;      /* block index; -1 for the classifier (LINEAR_IN with roles = OUTPUT bit) */
    uint32_t roles;     /* LINEAR_IN: bit (1u << role) for every linear layer that reads x. Layers
                           that share an input are reported once: q|k|v, gate|up. 0 otherwise. */
    const float *x;     /* (n_tokens, dim) row-major; valid only during the call */
    int64_t n_tokens;
    int64_t dim;
    int64_t pos;        /* position of the first row (classifier: index of its first row in the window) */
    const float *x_dev; /* the same rows in `backend`'s memory when the session computed them there (a
                           device block: docs/device.md), else NULL; valid only during the call */
    const sqz_backend *backend; /* the session's backend when x_dev is set, else NULL */
    int32_t in_expert;  /* LINEAR_IN of one expert of a mixture (roles: FFN_GATE_EXPS|FFN_UP_EXPS, or
                           FFN_DOWN_EXPS): 1 + the expert's index, x the rows of the tokens routed to it
                           (gathered: pos is 0); 0 for every other event */
    const float *weights; /* EXPERT_OUT: each row's routing weight; NULL otherwise */
} sqz_hook_event;

/* A hook returns SQZ_OK to continue; any other status aborts the forward pass, which returns
 * that status (the hook records its own message with the error functions). */
typedef sqz_status (*sqz_hook_fn)(void *user, const sqz_hook_event *e);

/* Installs (fn != NULL) or removes (fn == NULL) the session's hook. One hook per session. */
SQZ_API void sqz_session_set_hook(sqz_session *s, sqz_hook_fn fn, void *user);

/* ---- decoders --------------------------------------------------------------------------- */

/* Runs tokens[0..n) at positions [pos, pos+n). They attend to themselves causally and to the
 * keys/values that earlier calls left in the cache for positions [0, pos): pos = 0 starts a new
 * window; pos = the previous pos + n continues it (generation). pos + n <= max_tokens.
 * logits (may be NULL) receives the classifier output of tokens [logits_from, n): a caller-owned
 * buffer of (n - logits_from) * vocab_size floats. 0 <= logits_from <= n.
 * Errors: SQZ_ERR_INVALID_ARG (token id out of range, window too long, pos beyond the cache),
 * SQZ_ERR_ARCH for an encoder, or a hook's status. */
SQZ_API sqz_status sqz_forward(sqz_session *s, const int32_t *tokens, int64_t n, int64_t pos, int64_t logits_from,
                               float *logits);

/* One sequence of a batched window (sqz_forward_spans): rows [start, start + len) of the window;
 * parent: -1, or the index of an earlier span with parent -1 that this one continues. */
typedef struct sqz_span {
    int64_t start, len;
    int32_t parent;
} sqz_span;

/* Several sequences in one window, as llama.cpp batches them with sequence ids: tokens[0..n) are
 * the spans, back to back in order, covering [0, n). A span with parent -1 starts at position 0
 * and attends to itself causally; a span with parent p sits at positions [len(p), len(p) + len)
 * and attends to span p's tokens and to its own causally (e.g. a question once, then each of its
 * answers after it). The window starts at cache slot 0 (as pos 0 does). logits (may be NULL)
 * receives the classifier output of the tokens rows[0..n_rows), in that order (n_rows *
 * vocab_size floats). Each sequence's results equal those of running it alone, up to float
 * summation order.
 * Errors: SQZ_ERR_INVALID_ARG (spans that do not tile [0, n), a parent that is not an earlier
 * root, a row out of range, the window too long), SQZ_ERR_UNSUPPORTED (a sliding window shorter
 * than n: run the sequences one at a time then), SQZ_ERR_ARCH (an encoder). The blocks run on the
 * host (a device backend's whole-block path is not taken; its products still are). */
SQZ_API sqz_status sqz_forward_spans(sqz_session *s, const int32_t *tokens, int64_t n, const sqz_span *spans,
                                     int64_t n_spans, const int64_t *rows, int64_t n_rows, float *logits);

/* The same pass in three steps, for block-by-block calibration (the caller owns x, n * d_model
 * floats, and may change it between blocks):
 *   embed:  x = token embedding (+ positions and token types, then the embedding LayerNorm, for BERT);
 *           types may be NULL (all 0); pos as in sqz_forward.
 *   block:  x = block `layer`(x), in place, positions [pos, pos+n); fills that layer's cache rows.
 *   head:   decoders: final norm then classifier of rows [logits_from, n) into logits
 *           ((n - logits_from) * vocab_size floats); x is left unchanged. logits NULL: only the
 *           classifier's input is formed, for the session's hook (SQZ_HOOK_LINEAR_IN, layer -1,
 *           role OUTPUT; nothing at all without a hook). */
SQZ_API sqz_status sqz_session_embed(sqz_session *s, const int32_t *tokens, const int32_t *types, int64_t n,
                                     int64_t pos, float *x);
SQZ_API sqz_status sqz_session_block(sqz_session *s, int32_t layer, float *x, int64_t n, int64_t pos);
SQZ_API sqz_status sqz_session_head(sqz_session *s, const float *x, int64_t n, int64_t logits_from, float *logits);

/* ---- encoders --------------------------------------------------------------------------- */

/* Runs an encoder over one sequence (bidirectional attention, positions 0..n-1; types may be
 * NULL = all 0) and writes the last layer's token states (n * d_model floats) to hidden.
 * SQZ_ERR_ARCH for a decoder. */
SQZ_API sqz_status sqz_encode(sqz_session *s, const int32_t *tokens, const int32_t *types, int64_t n, float *hidden);

/* Sentence embedding: sqz_encode, then the mean of the token states (sentence-transformers
 * Pooling with pooling_mode_mean_tokens over an all-ones attention mask), then, when
 * `normalize`, division by its L2 norm (sentence-transformers Normalize, as all-MiniLM-L6-v2's
 * modules.json lists). out holds d_model floats. */
SQZ_API sqz_status sqz_embed(sqz_session *s, const int32_t *tokens, const int32_t *types, int64_t n, bool normalize,
                             float *out);

/* ---- generation ------------------------------------------------------------------------- */

typedef struct sqz_sample_opts {
    float temperature;  /* 0 = greedy (argmax, lowest id on ties) */
    float top_p;        /* nucleus sampling threshold in (0, 1]; 1 or 0 = off */
    uint64_t seed;      /* random seed (xorshift64*; 0 is replaced by a fixed constant) */
} sqz_sample_opts;

/* Called after each new token; return false to stop early. */
typedef bool (*sqz_token_fn)(void *user, int32_t token);

/* Picks the next token from one row of logits (vocab floats; modified in place when sampling).
 * *rng is the sampler state (seeded from opts->seed by sqz_generate). */
SQZ_API int32_t sqz_sample(float *logits, int64_t vocab, const sqz_sample_opts *o, uint64_t *rng);

/* Generates up to n_new tokens after the prompt (n_prompt >= 1 ids; the caller adds BOS if the
 * model wants it): one prefill of the prompt, then one token at a time with the key/value cache.
 * Stops early at eos (>= 0; pass -1 to never stop on a token; eos itself is not stored) or when
 * on_token returns false.
 * out (capacity n_new, caller-owned) receives the new tokens, *n_out their count.
 * n_prompt + n_new is capped at max_tokens: SQZ_ERR_INVALID_ARG beyond it. */
SQZ_API sqz_status sqz_generate(sqz_session *s, const int32_t *prompt, int64_t n_prompt, int64_t n_new, int32_t eos,
                                const sqz_sample_opts *o, sqz_token_fn on_token, void *user, int32_t *out,
                                int64_t *n_out);

/* ---- cost model ------------------------------------------------------------------------- */

/* Floating-point operations (multiply and add counted as 2) of one sqz_forward over n tokens at
 * pos 0 with logits for n_logits of them: linear layers, causal attention (only the unmasked
 * half), classifier. Element-wise work is not counted. */
SQZ_API double sqz_forward_flops(const sqz_model *m, int64_t n, int64_t n_logits);

#ifdef __cplusplus
}
#endif
#endif

/*
 * sqz/calib.h - calibration: text to token windows, observers on the activations of every
 * linear layer, the sequential block-by-block driver, and the statistics file (.sqzs).
 * What is done with the statistics (quantization, pruning, layer removal) is sqz/compress.h.
 *
 * ---- Sequential calibration (GPTQ / AWQ style) -------------------------------------------
 * sqz_calib_run embeds every window once into a buffer X of n_windows x ctx x d_model floats,
 * then for each block l:
 *   1. runs every window of X through block l (sqz_session_block) with observers on the
 *      inputs of its linear layers (SQZ_HOOK_LINEAR_IN) and on its input and output
 *      (SQZ_HOOK_BLOCK_IN / _OUT), on a copy of the window;
 *   2. hands the block's statistics to a callback, which may compress block l and write the
 *      result back into the model (then calls sqz_session_invalidate(s, l));
 *   3. runs block l again on X in place: X becomes the input of block l + 1 as the COMPRESSED
 *      block l produces it. (Without a callback that changes weights, 1 and 3 are one pass.)
 * Only X, one window of scratch and one block's statistics are held at a time.
 * Each window has an observer of its own, merged with the others along a fixed binary tree
 * over the windows (so the block's statistics are held up to log2(n_windows) + 1 times while
 * they are collected). Under `mpirun -np N` (sqz/dist.h) every rank holds and runs about
 * n_windows / N windows and the ranks exchange the tree's nodes: the statistics, and everything
 * computed from them, are the same bits for every N (docs/distributed.md).
 * Memory of X: n_windows * ctx * d_model * 4 bytes: 32 x 512 x 576 floats = 37.7 MB for
 * SmolLM2-135M at the default 32 x 512; 128 x 512 = 151 MB; 16 x 256 = 9.4 MB. The statistics of one block:
 * per distinct input (q|k|v, o, gate|up, down) n_in^2 doubles for the Hessian (SmolLM2: 2.6 MB
 * for d_model 576, 18.9 MB for d_ff 1536), a few n_in vectors, a 2048-bin histogram and the
 * sample rows (sample_rows x n_in floats).
 *
 * ---- Observers ---------------------------------------------------------------------------
 * For every input x (n_tokens, n_in) of a linear layer (layers sharing an input, q|k|v and
 * gate|up, see it once), over all calibration tokens:
 *   absmax[j]  = max_t |x_tj|                          (SQZ_QSTAT_ABSMAX)
 *   x2[j]      = (1/T) sum_t x_tj^2                    (SQZ_QSTAT_X2, llama.cpp's imatrix)
 *   absmean[j] = (1/T) sum_t |x_tj|                    (SQZ_QSTAT_ABSMEAN, AWQ)
 *   mean[j]    = (1/T) sum_t x_tj                      (SQZ_QSTAT_MEAN, FLAP; not in .sqzs files)
 *   xtx        = sum_t x_t x_t^T, in double            (SQZ_QSTAT_XTX, GPTQ's Hessian / 2)
 *   hist       = |x| histogram, 2048 bins (grows)      (SQZ_QSTAT_HIST, percentile / entropy)
 *   x          = every k-th row, k = max(1, T / sample_rows) (SQZ_QSTAT_SAMPLE; AWQ and
 *                SmoothQuant searches, validation)
 * and for the block: cos(x_in_t, x_out_t) of the residual stream, mean and minimum over
 * tokens (ShortGPT's block influence is 1 - cos_mean: for layer importance).
 *
 * ---- Statistics file (.sqzs), version 1, little-endian -------------------------------------
 *   header (104 bytes):
 *     char magic[8] "SQZSTAT1" | u32 version 1 | u32 have (SQZ_QSTAT_* bits stored)
 *     | u32 n_layers | u32 d_model | u32 vocab | u32 reserved 0 | char arch[32] (NUL-padded)
 *     | u64 n_windows | u64 ctx | u64 seed | u64 n_text_tokens | u32 sample_rows
 *     | u32 crc32 (zlib) of the 100 bytes before it
 *   records, each: u32 tag | u32 reserved 0 | u64 len | payload (len bytes) | u32 crc32(payload)
 *     tag "BLK0": i32 layer | u32 n_inputs | u64 n_tokens | f64 cos_mean | f64 cos_min
 *     tag "LIN0": i32 layer | u32 roles | u64 n_in | u64 n_tokens | u32 have, then in this order
 *       the arrays that `have` lists: x2 f32[n_in] | absmax f32[n_in] | absmean f32[n_in]
 *       | xtx f64[n_in (n_in + 1) / 2] (upper triangle, row by row)
 *       | sample: u64 n_x, f32[n_x n_in] | hist: u32 n_bins, u32 0, f64 width, f64 total,
 *         f32 absmax, u32 0, u64 n_zero, f64 counts[n_bins]
 *     tag "END0": u64 n_records (the records before it); nothing may follow.
 *   A block's BLK0 record comes first, then its LIN0 records; blocks in increasing order.
 * Readers check every length against the bytes left, every count against n_in and the caps
 * below, and every crc32.
 *
 * Threads: a session, an observer or a writer is used by one thread at a time.
 */
#ifndef SQZ_CALIB_H
#define SQZ_CALIB_H

#include <stdbool.h>
#include <stdint.h>

#include "sqz/api.h"
#include "sqz/progress.h"
#include "sqz/model.h"
#include "sqz/quant.h"
#include "sqz/runtime.h"
#include "sqz/status.h"
#include "sqz/tokenizer.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ======================================================================================
 * Calibration windows
 * ====================================================================================== */

/* 32 x 512 = 16,384 tokens: full-rank Hessians for inputs up to 16,384 wide (Qwen2.5-1.5B's
 * d_ff 8,960 included), about 4 minutes for SmolLM2-135M on two cores; 128 windows took 16
 * minutes there and gave no better result (docs/compress.md, "Defaults"). A plain integer
 * literal: command-line tables and help texts print it. */
#define SQZ_CALIB_DEFAULT_SAMPLES 32
#define SQZ_CALIB_DEFAULT_CTX 512
#define SQZ_CALIB_DEFAULT_SEED 1234 /* a plain integer literal: command-line tables print it as their default */

typedef struct sqz_calib_windows {
    int32_t *tokens;       /* (n_windows, ctx) token ids, owned */
    int64_t *starts;       /* (n_windows) where each window starts in the text's token ids, owned */
    int64_t n_windows;
    int64_t ctx;
    int64_t n_text_tokens; /* tokens of the whole text */
    uint64_t seed;
} sqz_calib_windows;

/* Cuts n_windows windows of ctx tokens out of ids[0..n_ids): the span [0, n_ids - ctx] of
 * possible starts is split into n_windows equal strata and each window starts at a point of
 * its stratum drawn from `seed` (splitmix64), so the windows cover the whole text and the
 * same (ids, n_windows, ctx, seed) always give the same windows. Windows overlap when the
 * text is shorter than n_windows * ctx. When bos >= 0 the first token of each window is
 * replaced by bos (as sqz_eval_perplexity does for its chunks).
 * Errors: SQZ_ERR_INVALID_ARG for n_windows < 1, ctx < 2, or n_ids < ctx (the message gives
 * both counts); SQZ_ERR_NOMEM. On success *out owns its arrays (sqz_calib_windows_free). */
SQZ_API sqz_status sqz_calib_windows_from_ids(const int32_t *ids, int64_t n_ids, int32_t bos, int64_t n_windows,
                                              int64_t ctx, uint64_t seed, sqz_calib_windows *out);

/* Tokenizes text[0..len) once (special tokens added as the vocabulary asks) and calls
 * sqz_calib_windows_from_ids with the tokenizer's BOS when it adds one, else -1. */
SQZ_API sqz_status sqz_calib_windows_make(const sqz_tokenizer *tok, const char *text, size_t len, int64_t n_windows,
                                          int64_t ctx, uint64_t seed, sqz_calib_windows *out);

/* Frees the arrays and zeroes w. NULL is fine. */
SQZ_API void sqz_calib_windows_free(sqz_calib_windows *w);

/* ======================================================================================
 * Statistics of one block
 * ====================================================================================== */

#define SQZ_CALIB_MAX_INPUTS 6     /* distinct linear inputs per block (q|k|v, o, gate|up, down; a mixture's
                                      from an importance matrix: q|k|v, o, the router, the experts' gate|up,
                                      their down) */
#define SQZ_CALIB_MAX_N_IN (1 << 20) /* largest in_features accepted (also when reading files) */

/* The statistics of one linear input. `st` is the view the methods of sqz/quant.h read; its
 * pointers point at the arrays below (owned) or are NULL when not collected. */
typedef struct sqz_calib_input {
    uint32_t roles;    /* bit (1u << sqz_role) of every linear layer reading this input */
    unsigned have;     /* SQZ_QSTAT_* present */
    sqz_qstats st;     /* n_in, n_tokens, and the arrays that `have` lists */
    double *xtx;       /* (n_in, n_in), both triangles */
    double *dxxt;      /* (n_in, n_in) GPTAQ's sum (x - x~) x~^T (SQZ_QSTAT_DXXT; live calibration only,
                          never in a .sqzs file) */
    float *x2, *absmax, *absmean;
    float *mean;       /* E[x] (SQZ_QSTAT_MEAN; live calibration only, never in a .sqzs file) */
    float *x;          /* (st.n_x, n_in) sample rows */
    sqz_act_hist hist; /* st.hist points here when HIST is present */
    int64_t n_mat;     /* matrices whose E[x^2] x2 holds one after another, (n_mat, n_in): a mixture's experts
                          (from an importance matrix); 0 or 1: one input */
    float *mat_tokens; /* (n_mat) tokens each of them saw (the importance matrix's counts), or NULL */
    double **mat_xtx;  /* (n_mat) each one's X^T X (n_in, n_in), both triangles, where sqz's calibration collects
                          X^T X; NULL for an expert that saw fewer tokens than n_in (only E[x^2] is kept there) */
    float *mat_reap;   /* (n_mat) REAP's score of each expert (the experts' gate|up input of sqz's calibration):
                          the mean over the tokens routed to it of routing weight x ||expert output||; or NULL */
} sqz_calib_input;

typedef struct sqz_calib_block {
    int32_t layer;      /* block index; -1 for the classifier's input */
    int64_t n_tokens;   /* tokens that went through the block */
    double cos_mean;    /* mean over tokens of cos(block input, block output); 0 if not observed */
    double cos_min;
    int n_inputs;
    sqz_calib_input in[SQZ_CALIB_MAX_INPUTS];
    /* An MPI job with a partitioned solve (sqz_calib_run_opts.partitioned_solve): input i's
     * statistics are on rank owner[i] only; on the other ranks in[i] has its roles and st.n_in
     * and nothing else (have == 0). false: every input's statistics are here. */
    bool partitioned;
    int owner[SQZ_CALIB_MAX_INPUTS];
} sqz_calib_block;

/* The input read by the linear layer of `role` (ATTN_Q/K/V, ATTN_OUT, FFN_GATE/UP/DOWN,
 * OUTPUT), or NULL when the block has no statistics for it. */
SQZ_API const sqz_calib_input *sqz_calib_block_input(const sqz_calib_block *b, sqz_role role);
/* Frees what b owns and zeroes it. NULL is fine. */
SQZ_API void sqz_calib_block_free(sqz_calib_block *b);

/* ---- observers ---- */
typedef struct sqz_calib_observer sqz_calib_observer;

typedef struct sqz_calib_observe_opts {
    unsigned needs;           /* SQZ_QSTAT_* to collect */
    int64_t sample_rows;      /* SAMPLE: about this many rows are kept (every k-th row) */
    int64_t expected_tokens;  /* tokens that will be observed (sets k); 0 = keep the first rows */
    bool block_io;            /* observe BLOCK_IN / BLOCK_OUT for the cosine similarity */
    /* The Hessian sum X^T X through this backend's xtx slot (sqz/backend.h; issue 26). Borrowed;
     * NULL = host arithmetic. A host-memory backend (the CPU) gives the same bits as NULL; on a
     * device backend each input's sum stays in device memory until the observer is finished.
     * The other statistics are always formed on the host. sqz_calib_run refuses a device backend
     * in an MPI job of more than one rank (SQZ_ERR_UNSUPPORTED). */
    sqz_backend *backend;
} sqz_calib_observe_opts;

/* An observer of block `layer` (-1: the classifier input). Events for other layers are
 * ignored. On success *out is owned by the caller (sqz_calib_observer_free). */
SQZ_API sqz_status sqz_calib_observer_new(int32_t layer, const sqz_calib_observe_opts *o, sqz_calib_observer **out);
/* The hook to install with sqz_session_set_hook(s, sqz_calib_observer_hook, observer).
 * Errors: SQZ_ERR_NOMEM; SQZ_ERR_INVALID_ARG when an input changes width between events or
 * a block has more than SQZ_CALIB_MAX_INPUTS inputs. */
SQZ_API sqz_status sqz_calib_observer_hook(void *observer, const sqz_hook_event *e);
/* Ends the observation: x2 and absmean become means, the Hessian is made symmetric, and the
 * statistics move into *out (zeroed first; the observer may then only be freed). */
SQZ_API sqz_status sqz_calib_observer_finish(sqz_calib_observer *ob, sqz_calib_block *out);
/* NULL is fine. */
SQZ_API void sqz_calib_observer_free(sqz_calib_observer *ob);

/* ======================================================================================
 * The sequential driver
 * ====================================================================================== */

/* Called once per block with its statistics (owned by the driver, valid during the call).
 * It may rewrite the block's tensors in the model; it must then call
 * sqz_session_invalidate(s, layer) before returning. */
typedef sqz_status (*sqz_calib_block_fn)(void *user, sqz_session *s, int32_t layer, const sqz_calib_block *stats);

/* How the ranks of an MPI job combine a block's statistics (docs/distributed.md). Either way the
 * result is the same bits on any number of ranks. */
typedef enum sqz_calib_partition {
    SQZ_CALIB_PARTITION_OWNER = 0, /* each linear input owned by one rank, which accumulates every
                                      window's activations of it in window order (a plain run's
                                      bits) and broadcasts the result; windows dealt round-robin
                                      (the default) */
    SQZ_CALIB_PARTITION_REPLICATE, /* each rank sums its contiguous windows' statistics along a
                                      fixed tree, every rank gathers every rank's partial sums and
                                      merges them all (an all-reduce; its own bits) */
} sqz_calib_partition;

/* What a run measured (distributed calibration, docs/distributed.md). */
typedef struct sqz_calib_run_info {
    int64_t stats_peak_bytes; /* most bytes of statistics this rank held at once (accumulators,
                                 exchanged pieces, the merged block) */
    int64_t stats_peak_max_bytes; /* the most any rank of the job held at once */
    uint64_t bytes_sent;      /* bytes this rank sent to other ranks (sqz_dist_bytes_sent) */
    int64_t windows_here;     /* windows this rank ran */
    int ranks;                /* ranks of the job (1 without MPI) */
} sqz_calib_run_info;

typedef struct sqz_calib_run_opts {
    sqz_calib_observe_opts observe;
    bool recompute;             /* run each block again after on_block (it changed the block) */
    sqz_calib_block_fn on_block; /* may be NULL */
    void *user;
    sqz_progress_fn progress;   /* optional: done / total in window-block passes */
    void *progress_user;
    sqz_calib_run_info *info;   /* optional: filled at the end */
    sqz_calib_partition partition; /* MPI jobs only */
    bool partitioned_solve;     /* MPI jobs with the owner partition: on_block gets each input's
                                   statistics on its owner rank only (sqz_calib_block.partitioned)
                                   and must solve the inputs this rank owns and share the results
                                   (compress/pass_quant_share.c); false: every rank gets them all */
    bool head;                  /* also the classifier's input: after the last block, on_block(user,
                                   s, -1, stats) with the statistics (observe.needs) of the final
                                   norm's output over every window, role OUTPUT, on every rank; a
                                   model without a classifier (an encoder) gets on_block(user, s,
                                   -1, NULL) */
} sqz_calib_run_opts;

/* Runs every window of w through the decoder or encoder of session s block by block as the
 * header comment describes. The session's max_tokens must be >= w->ctx; the session's hook
 * is replaced during the call and removed at the end.
 * Errors: SQZ_ERR_INVALID_ARG (window longer than the session's cache, token ids out of
 * range), SQZ_ERR_NOMEM (X does not fit: the message gives its size), the forward pass's
 * errors, on_block's status. */
SQZ_API sqz_status sqz_calib_run(sqz_session *s, const sqz_calib_windows *w, const sqz_calib_run_opts *o);

/* One pass over model m as it is, for a step that scores the model before changing it (auto's
 * sensitivities, pruning budgets): a session of m with `so` (max_tokens set to the windows'
 * ctx), the statistics `needs` of every block handed to on_block(user, ...), with head also the
 * classifier's input's (layer -1, sqz_calib_run_opts.head), no recompute, progress as
 * sqz_calib_run's. The session is freed before returning. Errors: sqz_calib_run's and
 * sqz_session_new's. */
SQZ_API sqz_status sqz_calib_scan(sqz_model *m, const sqz_session_opts *so, const sqz_calib_windows *w,
                                  unsigned needs, bool head, sqz_calib_block_fn on_block, void *user,
                                  sqz_progress_fn progress, void *progress_user);

/* ======================================================================================
 * Statistics file (.sqzs)
 * ====================================================================================== */

typedef struct sqz_stats_writer sqz_stats_writer;

/* Starts writing statistics for model m calibrated on w (atomic output: nothing appears
 * at path before commit). `have` is what the records will hold (SQZ_QSTAT_*; records may
 * hold less). */
SQZ_API sqz_status sqz_stats_writer_open(const char *path, const sqz_model *m, const sqz_calib_windows *w,
                                         unsigned have, int64_t sample_rows, sqz_stats_writer **out);
/* Appends one block (its BLK0 record and one LIN0 record per input). */
SQZ_API sqz_status sqz_stats_writer_add(sqz_stats_writer *wr, const sqz_calib_block *b);
/* Writes the END0 record and commits; frees wr in every case. */
SQZ_API sqz_status sqz_stats_writer_commit(sqz_stats_writer *wr);
/* Removes the temporary file and frees wr. NULL is fine. */
SQZ_API void sqz_stats_writer_abort(sqz_stats_writer *wr);

typedef struct sqz_calib_stats {
    unsigned have;
    int64_t n_layers, d_model, vocab;
    char arch[33];
    int64_t n_windows, ctx, n_text_tokens, sample_rows;
    uint64_t seed;
    sqz_calib_block *blocks;   /* n_blocks, in file order */
    int64_t n_blocks;
} sqz_calib_stats;

/* Reads a whole statistics file. Every length, count and checksum is checked; errors are
 * SQZ_ERR_FORMAT naming the file, the record and the reason (SQZ_ERR_IO when unreadable).
 * On success *out is owned by the caller (sqz_calib_stats_free). */
SQZ_API sqz_status sqz_calib_stats_read(const char *path, sqz_calib_stats **out);
/* SQZ_ERR_INVALID_ARG unless the file was made for a model of m's shape (layers, d_model,
 * vocabulary, every input's width). `path` names the file in the message. */
SQZ_API sqz_status sqz_calib_stats_check_model(const sqz_calib_stats *st, const sqz_model *m, const char *path);
/* Reads an importance matrix written by llama.cpp's llama-imatrix, in its GGUF layout (the
 * default) or its legacy .dat layout, as statistics of model m: every entry (llama.cpp's tensor
 * names, blk.N.ROLE.weight and output.weight) becomes the E[x^2] (SQZ_QSTAT_X2) of that layer's
 * input, with the value llama-quantize computes from the file (sums / counts; legacy: values /
 * ncall), so that the imatrix method quantizes as llama-quantize --imatrix FILE does. Layers that
 * read one input (q/k/v, gate/up) share it when their values are equal, as llama-imatrix's are.
 * n_layers, d_model and vocab are m's; n_windows and ctx are the file's chunks and chunk size.
 * Errors: SQZ_ERR_FORMAT naming the file, the entry and the reason (a truncated or malformed file,
 * a non-finite or negative value, a name that is no matrix of m, a width that differs from the
 * tensor's), SQZ_ERR_IO when unreadable. On success *out is owned by the caller
 * (sqz_calib_stats_free). */
SQZ_API sqz_status sqz_calib_stats_read_imatrix(const char *path, const sqz_model *m, sqz_calib_stats **out);
/* The statistics of block `layer`, or NULL. */
SQZ_API const sqz_calib_block *sqz_calib_stats_block(const sqz_calib_stats *st, int32_t layer);
/* NULL is fine. */
SQZ_API void sqz_calib_stats_free(sqz_calib_stats *st);

#ifdef __cplusplus
}
#endif
#endif

/*
 * sqz/quant.h - quantized weight storage and the quantization methods (RTN, imatrix, GPTQ,
 * AWQ, SmoothQuant), activation scales for W8A8, and the default float-or-quantize policy.
 *
 * A method quantizes ONE linear layer's weight W (n_out, n_in) f32 row-major, or a few
 * layers that read the same input (q/k/v, gate/up: they share statistics and, for the
 * smoothing methods, one input scale), from the statistics of that input (sqz_qstats).
 * The block-by-block driver (calib/) collects the statistics, calls a method through the
 * table of methods (sqz_qmethod_*), folds the returned input scale into the previous
 * operation and attaches the result to the model:
 *
 *   const sqz_qmethod *gptq = sqz_qmethod_find("gptq");
 *   sqz_quant_opts o = sqz_quant_default_opts();
 *   o.target = (sqz_qtarget){SQZ_QFMT_Q4_0, 32};
 *   sqz_qlinear lin[3] = {{wq, n_q, "q"}, {wk, n_kv, "k"}, {wv, n_kv, "v"}};   // f32 copies
 *   sqz_qmatrix out[3] = {0};
 *   float *smooth = malloc(n_in * sizeof(float));
 *   if (gptq->run(lin, 3, &stats, &o, out, smooth) == SQZ_OK) {
 *       // smooth is all ones for gptq; for awq/smoothquant divide the previous op by it:
 *       sqz_fold_smooth_into_norm(attn_norm_weight, NULL, n_in, smooth);
 *       for (int i = 0; i < 3; i++) sqz_qmatrix_attach(model, tensor_of[i], &out[i]);
 *   }
 *
 * ---- Storage ----------------------------------------------------------------------------
 * sqz_qparams, the I8-per-row and U4-per-group layouts and their dequantizers are in
 * sqz/qparams.h (part of core), included here.
 *
 * ---- Grids (what every method reproduces) -------------------------------------------------
 *   I8      scale = absmax(row) / 127 (f32), q = clamp(rint(w / scale), -127, 127): exactly
 *           sqz__quantize_rows_i8_ref (kernels/cpu/gemm_ref.h); a zero row has scale 0.
 *   I4_SYM  per (row, group): m = the element of largest magnitude (the first one, keeping its
 *           sign, as GGUF Q4_0), scale = fp16(m / -8), code = clamp(rint(w / scale) + 8, 0, 15);
 *           scale 0 -> all codes 8.
 *   I4_ASYM lo = min(min w, 0), hi = max(max w, 0) (zero is always on the grid, as GPTQ),
 *           scale = fp16((hi - lo) / 15), zero = clamp(rint(-lo / scale), 0, 15),
 *           code = clamp(rint(w / scale) + zero, 0, 15); scale 0 -> zero 0, codes 0.
 *   Q8_0, Q4_0, Q4_1: llama.cpp's reference quantizers (quant/gguf/quant_ref.c), byte for byte.
 *   Q2_K, Q3_K, Q4_K, Q5_K, Q6_K: llama.cpp's quantize_row_q*_K_ref (RTN) and quantize_q*_K with
 *           quant_weights = E[x^2] (imatrix), byte for byte (quant/gguf/kquant.c).
 * (fp16(v) is v rounded to the nearest binary16, as a float.)
 *
 * ---- GPTQ on GGUF grids: the invariant ----------------------------------------------------
 * For Q8_0 / Q4_0 / Q4_1 targets GPTQ computes each 32-column group's d (and m) exactly as the
 * reference quantizer would from the group's CURRENT (error-updated) weights when the group
 * starts (static groups: from the original weights), rounds them to fp16 as the block stores
 * them, quantizes every column to the nearest code of that stored grid, and forces the
 * element that defined the grid (Q4_0/Q8_0: the largest magnitude; Q4_1: the minimum and the
 * maximum) onto the extreme code. Hence:
 *   1. the blocks dequantize (sqz__dequantize_q4_0 etc., gguf-py, llama.cpp) exactly to the
 *      values GPTQ used for its error feedback (sqz_qmatrix_to_f32 == GPTQ's Q);
 *   2. re-quantizing those dequantized values with the reference quantizer gives back the same
 *      bytes (Q8_0, Q4_0: always; Q4_1: whenever a block's |m| < 2^12 * 15 * d, i.e. for any
 *      block that is not a near-constant offset; tests check it on every real layer).
 * So a GPTQ result is written to GGUF with no further rounding and stays a fixed point of the
 * reference quantizer.
 */
#ifndef SQZ_QUANT_H
#define SQZ_QUANT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sqz/api.h"
#include "sqz/backend.h"
#include "sqz/dtype.h"
#include "sqz/model.h"
#include "sqz/qparams.h"
#include "sqz/status.h"
#include "sqz/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ======================================================================================
 * Targets and results
 * ====================================================================================== */

typedef enum sqz_qformat {
    SQZ_QFMT_I8 = 0,      /* INT8 per output channel (W8A16, or W8A8 with act_mode) */
    SQZ_QFMT_I4_SYM = 1,  /* INT4 per group, symmetric (zero 8) */
    SQZ_QFMT_I4_ASYM = 2, /* INT4 per group with zero points */
    SQZ_QFMT_Q8_0 = 3,    /* GGUF Q8_0 */
    SQZ_QFMT_Q4_0 = 4,    /* GGUF Q4_0 */
    SQZ_QFMT_Q4_1 = 5,    /* GGUF Q4_1 */
    SQZ_QFMT_Q2_K = 6,    /* GGUF K-quants: 256-element super-blocks (n_in a multiple of 256) */
    SQZ_QFMT_Q3_K = 7,
    SQZ_QFMT_Q4_K = 8,
    SQZ_QFMT_Q5_K = 9,
    SQZ_QFMT_Q6_K = 10,
    SQZ_QFMT_Q5_0 = 11,   /* GGUF Q5_0 / Q5_1 (blocks of 32): llama.cpp's fallbacks of Q4_K / Q5_K */
    SQZ_QFMT_Q5_1 = 12,
    SQZ_QFMT_IQ4_NL = 13, /* GGUF IQ4_NL (blocks of 32) and IQ4_XS (super-blocks of 256): 4-bit codes
                           * into llama.cpp's non-linear table kvalues_iq4nl times a block scale */
    SQZ_QFMT_IQ4_XS = 14,
    SQZ_QFMT_IQ3_S = 15,  /* GGUF IQ3_S (super-blocks of 256): groups of 4 weights on a 512-point lattice
                           * codebook with sign bits and 4-bit sub-block scales; RTN and imatrix only */
    SQZ_QFMT_MXFP4 = 16,  /* GGUF MXFP4 (blocks of 32): E2M1 values times a power-of-two scale (OCP
                           * microscaling FP4, 4.25 bits) */
    SQZ_QFMT_FP8 = 17,    /* FP8 E4M3 per output channel (compressed-tensors' float-quantized): w = fp8 *
                           * scale, scale = absmax / 448 per row (SQZ_QSCHEME_F8_ROW); W8A8-FP8 with
                           * act_mode SQZ_ACT_DYNAMIC_TOKEN */
    SQZ_QFMT_NVFP4 = 18,  /* NVFP4 (compressed-tensors' nvfp4-pack-quantized): E2M1 values, an FP8 E4M3
                           * scale per 16 columns and a global scale per tensor, shared by the matrices
                           * of one input (q/k/v, gate/up) as llm-compressor shares it (SQZ_QSCHEME_NVFP4) */
    SQZ_QFMT_COUNT
} sqz_qformat;

typedef struct sqz_qtarget {
    sqz_qformat fmt;
    int32_t group;  /* I4_*: 32, 64 or 128; Q*_0/1: 32, Q*_K: 256 (set by sqz_qtarget_check); I8: ignored */
} sqz_qtarget;

/* "i8", "i4_sym", "i4_asym", "q8_0", "q4_0", "q4_1", "q2_k" ... "q6_k"; "invalid" out of range. */
SQZ_API const char *sqz_qformat_name(sqz_qformat f);
SQZ_API bool sqz_qformat_from_name(const char *name, sqz_qformat *out);
/* The storage dtype of a format (I8, U4, Q8_0, Q4_0, Q4_1, Q2_K ... Q6_K). */
SQZ_API sqz_dtype sqz_qformat_dtype(sqz_qformat f);
/* True for the GGUF block formats (Q8_0, Q4_0, Q4_1, the K-quants): stored as llama.cpp's blocks,
 * written to GGUF as they are; false for sqz's I8 / U4 layouts. */
SQZ_API bool sqz_qformat_is_gguf(sqz_qformat f);
/* Validates a target and fills the implied group (32 for GGUF formats). SQZ_ERR_INVALID_ARG
 * for a group other than 32/64/128 on I4. */
SQZ_API sqz_status sqz_qtarget_check(sqz_qtarget *t);
/* True if a weight with n_in columns can take this target (n_in a multiple of the group,
 * or any n_in >= 1 for I8). */
SQZ_API bool sqz_qtarget_fits(const sqz_qtarget *t, int64_t n_in);

/* One quantized weight, as a method returns it. Owns data and the qp arrays. */
typedef struct sqz_qmatrix {
    sqz_qtarget target;
    sqz_dtype dtype;       /* storage dtype (sqz_qformat_dtype(target.fmt)) */
    int64_t n_out, n_in;
    void *data;            /* nbytes = sqz_dtype_nbytes(dtype, n_out * n_in) */
    size_t nbytes;
    sqz_qparams qp;        /* scheme NONE for GGUF formats (then only act fields may be set) */
    float *scales_buf;     /* owned arrays behind qp (NULL when absent) */
    uint8_t *zeros_buf;
    int32_t *g_idx_buf;
    float *in_scale_buf;
    double seconds;        /* time the method spent on this matrix */
    double loss;           /* method-specific objective (GPTQ: sum (w - q)^2 / [H^-1]_cc / 2), or 0 */
    float alpha;           /* AWQ / SmoothQuant: the chosen exponent (SmoothQuant: -1 when no
                              smoothing beat plain W8A8); else 0 */
} sqz_qmatrix;

/* Frees what q owns and zeroes it. NULL is fine. */
SQZ_API void sqz_qmatrix_free(sqz_qmatrix *q);
/* Allocates an empty result for target t and shape (n_out, n_in): data, scales (and zeros)
 * as the format needs. For methods and tests. */
SQZ_API sqz_status sqz_qmatrix_alloc(sqz_qmatrix *q, const sqz_qtarget *t, int64_t n_out, int64_t n_in);
/* Dequantizes the whole weight into out ((n_out, n_in) f32); in_scale not applied. */
SQZ_API sqz_status sqz_qmatrix_to_f32(const sqz_qmatrix *q, float *out);
/* Storage bits per weight: values + scales (+ zeros, g_idx, in_scale) over n_out * n_in. */
SQZ_API double sqz_qmatrix_bits_per_weight(const sqz_qmatrix *q);
/* Keeps the smoothing vector s (n_in) as the layer's in_scale instead of folding it (only for
 * the I8 and I4 formats: GGUF blocks cannot carry it -> SQZ_ERR_UNSUPPORTED). */
SQZ_API sqz_status sqz_qmatrix_set_in_scale(sqz_qmatrix *q, const float *s);
/* Moves q into model m as tensor t: t->dtype, data, nbytes and qp are replaced (the model owns
 * them; t's previous owned data is freed unless another tensor is tied to it) and q is left
 * empty. t must be 2-D with shape (n_out, n_in). */
SQZ_API sqz_status sqz_qmatrix_attach(sqz_model *m, sqz_tensor *t, sqz_qmatrix *q);

/* Y (m, n_out) = X (m, n_in) . W^T computed with the weight as stored and the activation path
 * the layer would run: float X for weight-only layers, the exact INT8 GEMM for W8A8 (dynamic
 * per-token or static per-tensor activations), in_scale applied. For validation: compare
 * with the float layer. */
SQZ_API sqz_status sqz_qmatrix_forward(const sqz_qmatrix *q, const float *x, int64_t m, float *y);

/* ======================================================================================
 * Statistics of a layer's input
 * ====================================================================================== */

/* What a method needs (bits of sqz_qmethod.needs). */
enum {
    SQZ_QSTAT_XTX = 1u << 0,     /* xtx: the Hessian sum x x^T (double) */
    SQZ_QSTAT_X2 = 1u << 1,      /* x2: E[x^2] per channel (llama.cpp's importance matrix) */
    SQZ_QSTAT_ABSMAX = 1u << 2,  /* absmax: max |x| per channel */
    SQZ_QSTAT_ABSMEAN = 1u << 3, /* absmean: E|x| per channel */
    SQZ_QSTAT_SAMPLE = 1u << 4,  /* x: a sample of input rows */
    SQZ_QSTAT_HIST = 1u << 5,    /* hist: histogram of |x| over the whole tensor */
    SQZ_QSTAT_MEAN = 1u << 6,    /* mean: E[x] per channel (pruning: FLAP's fluctuation and bias
                                    compensation); collected by live calibration, not stored in
                                    statistics files (version 1) */
    SQZ_QSTAT_DXXT = 1u << 7,    /* dxxt: sum (x - x~) x~^T, x the float model's input, x~ the
                                    compressed model's (GPTAQ); live calibration only, which then
                                    also runs the original model's stream; not in statistics files */
};

/* |x| histogram with constant bin width (TensorRT / pytorch-quantization HistogramCalibrator):
 * bin b counts values in [b * width, (b + 1) * width). It starts with n_bins (2048) over the
 * first batch's absmax and grows by whole bins when a later batch exceeds the range (bins merge
 * in pairs beyond SQZ_HIST_MAX_BINS). */
#define SQZ_HIST_BINS 2048
#define SQZ_HIST_MAX_BINS (1 << 16)
typedef struct sqz_act_hist {
    double *counts;   /* n_bins (owned) */
    int32_t n_bins;
    double width;     /* 0 until the first non-zero value */
    double total;     /* values counted */
    float absmax;
    int64_t n_zero;   /* values seen while width was 0 (all zeros so far; added to bin 0) */
} sqz_act_hist;

SQZ_API void sqz_act_hist_init(sqz_act_hist *h);
SQZ_API void sqz_act_hist_free(sqz_act_hist *h);
/* Adds n values. NaN/inf are ignored. SQZ_ERR_NOMEM. */
SQZ_API sqz_status sqz_act_hist_add(sqz_act_hist *h, const float *x, int64_t n);
/* dst += src (re-binning src to dst's width when they differ; the coarser width wins). */
SQZ_API sqz_status sqz_act_hist_merge(sqz_act_hist *dst, const sqz_act_hist *src);

typedef struct sqz_qstats {
    int64_t n_in;
    int64_t n_tokens;          /* rows the statistics were accumulated over */
    const double *xtx;         /* (n_in, n_in) sum_t x_t x_t^T, symmetric (GPTQ uses it unscaled:
                                  2 X^T X / n differs by a factor the damping is relative to) */
    const float *x2;           /* (n_in) E[x^2] */
    const float *absmax;       /* (n_in) */
    const float *absmean;      /* (n_in) */
    const float *x;            /* (n_x, n_in) a sample of input rows (AWQ, SmoothQuant searches) */
    int64_t n_x;
    const sqz_act_hist *hist;  /* |x| over every element of the input */
    const float *mean;         /* (n_in) E[x] (SQZ_QSTAT_MEAN), or NULL */
    const double *dxxt;        /* (n_in, n_in) row-major sum_t (x_t - x~_t) x~_t^T (SQZ_QSTAT_DXXT), or
                                  NULL: x_t the row the ORIGINAL model gives this input, x~_t the row
                                  the partly compressed model gives it (the one xtx sums), paired by
                                  token; on xtx's scale (GPTAQ's P does not change when both scale) */
} sqz_qstats;

/* Statistics computed from rows x (n, n_in) at once, for tests, tools and small drivers (calib/
 * accumulates the same quantities in a streaming way). `needs` selects what is computed; the
 * sample keeps the first min(n, max_sample) rows (copied). Free with sqz_qstats_buf_free. */
typedef struct sqz_qstats_buf {
    sqz_qstats s;
    double *xtx;
    float *x2, *absmax, *absmean, *x;
    sqz_act_hist hist;
} sqz_qstats_buf;
SQZ_API sqz_status sqz_qstats_compute(const float *x, int64_t n, int64_t n_in, unsigned needs, int64_t max_sample,
                                      sqz_qstats_buf *out);
SQZ_API void sqz_qstats_buf_free(sqz_qstats_buf *b);

/* ======================================================================================
 * Methods
 * ====================================================================================== */

/* How static activation scales are calibrated (TensorRT's three). */
typedef enum sqz_act_calib {
    SQZ_ACT_CALIB_MINMAX = 0,     /* threshold = absmax */
    SQZ_ACT_CALIB_PERCENTILE = 1, /* the |x| percentile (99.99 by default) */
    SQZ_ACT_CALIB_KL = 2,         /* entropy: the threshold minimising KL(P || Q) */
} sqz_act_calib;

#define SQZ_GPTQ_SHRINK_AUTO (-1.0)
typedef struct sqz_quant_opts {
    sqz_qtarget target;
    /* GPTQ (Frantar et al. 2022, IST-DASLab gptq.py) */
    double percdamp;        /* damping = percdamp * mean(diag H); 0.01 */
    double gptq_shrink;     /* H's off-diagonal scaled by 1 - gptq_shrink before the damping (0 to 1;
                               1: diagonal, each column rounded on its own; SQZ_GPTQ_SHRINK_AUTO:
                               n_in / (n_in + n_tokens), what sqz compress uses); 0 */
    int32_t blocksize;      /* lazy-batch block; 128 (a multiple of the group) */
    bool act_order;         /* process columns by decreasing diag(H) */
    bool static_groups;     /* grids from the original weights before any update (always so for
                               GGUF targets with act_order) */
    /* imatrix / rtn onto IQ3_S (and GPTQ's imatrix candidate): after llama.cpp's quantizer, sqz's
     * search of the scales with the codewords chosen at the stored scales (sqz__iq3s_refine), kept
     * where the weighted error is lower; false: llama.cpp's bytes */
    bool refine;
    /* GPTAQ (Li et al., ICML 2025): fit Q X~ to the original model's W X instead of W X~. GPTQ's
     * sweep plus the correction P = alpha * triu1(dXX^T . U^T) . U (U the factor of H^-1) applied
     * with each column's value before quantization; needs st->dxxt. Also SparseGPT's sweep. */
    bool gptaq;             /* false */
    double gptaq_alpha;     /* 0.25 (GPTQModel's GPTAQConfig default) */
    bool gptaq_optional;    /* with gptaq: run plain GPTQ where GPTAQ cannot run (no st->dxxt)
                               instead of failing; false */
    /* AWQ (Lin et al. 2023, llm-awq auto_scale / auto_clip) */
    int32_t awq_grid;       /* alpha in {0, 1/grid, ..., (grid-1)/grid}; 20 */
    bool awq_clip;          /* search a clipping threshold per (row, group); true */
    int32_t awq_clip_grid;  /* 20: shrink ratios 1 - i/grid for i < grid * max_shrink */
    float awq_max_shrink;   /* 0.5 */
    /* SmoothQuant (Xiao et al. 2023) and W8A8 */
    sqz_act_mode act_mode;  /* SQZ_ACT_FLOAT for weight-only; W8A8 otherwise (I8 target only) */
    sqz_act_calib act_calib;
    double act_percentile;  /* 99.99 */
    float sq_alpha;         /* < 0: search alpha in [sq_alpha_min, sq_alpha_max] step sq_alpha_step;
                               else use this alpha; default -1 */
    float sq_alpha_min, sq_alpha_max, sq_alpha_step; /* 0.0, 1.0, 0.05 */
    int64_t max_search_rows; /* rows of the sample the searches use (AWQ, SmoothQuant); 512 */
    /* GPTQ / SparseGPT on a backend (sqz/backend.h; issue 26). Borrowed; NULL = host arithmetic.
     * A host-memory backend (the CPU) gives the same bytes as NULL; a device backend factors the
     * Hessian with its chol_inv_upper slot and keeps the weights being swept and the factor in its
     * memory, the trailing updates one sgemm per block (the codes may differ from the host's in
     * rare ties: the update's float order differs). */
    sqz_backend *backend;
    int32_t threads;        /* GPTQ's row sweep and grids on this many threads; 0 = all cores. The
                               result is the same bytes for any count */
    /* GPTQ / SparseGPT: prepared factors kept between calls (sqz_gptq_factors_new), so that layers
     * that share an input but are called one at a time (a mix gives each its own type) factor its
     * Hessian once. Borrowed; NULL = none (each call factors). A call reuses the kept factor when
     * its statistics are the same object (st, its xtx and dxxt) and its damping, act order, IQ3_S
     * grouping, GPTAQ and backend match, and keeps its own otherwise: the same bytes either way. */
    struct sqz_gptq_factors *factors;
} sqz_quant_opts;

/* A store of one prepared GPTQ factor (U, the column order, GPTAQ's P; on a device backend their
 * device copies) for sqz_quant_opts.factors. The caller owns it and frees it with
 * sqz_gptq_factors_free once the statistics it was used with are freed or changed (a later call on
 * other statistics at the same address would otherwise take a stale factor). NULL on no memory. */
SQZ_API struct sqz_gptq_factors *sqz_gptq_factors_new(void);
SQZ_API void sqz_gptq_factors_free(struct sqz_gptq_factors *f);

/* Defaults as documented above, target I8. */
SQZ_API sqz_quant_opts sqz_quant_default_opts(void);

/* One linear layer given to a method: its f32 weight (n_out, n_in) row-major (read only). */
typedef struct sqz_qlinear {
    const float *w;
    int64_t n_out;
    const char *name;  /* for messages; may be NULL */
    bool skip_clip;    /* AWQ: no clipping search for this layer (llm-awq skips q and k, whose
                          errors the attention scores amplify) */
} sqz_qlinear;

/* A method quantizes n_lin layers that read the same input (n_in = st->n_in columns each) into
 * out[0..n_lin) (zero-initialised by the caller; on error nothing is left allocated) and writes
 * the input smoothing vector to smooth[0..n_in): the stored weights are W . diag(smooth), so
 * the layer is exact only if its input is divided by smooth, by folding 1/smooth into the
 * previous operation (sqz_fold_smooth_into_norm / _into_linear) or by keeping it
 * (sqz_qmatrix_set_in_scale). Methods that do not smooth write ones. smooth may be NULL for
 * those only (SQZ_ERR_INVALID_ARG otherwise). */
typedef sqz_status (*sqz_qmethod_fn)(const sqz_qlinear *lin, int n_lin, const sqz_qstats *st,
                                     const sqz_quant_opts *o, sqz_qmatrix *out, float *smooth);

typedef struct sqz_qmethod {
    const char *name;       /* "rtn", "imatrix", "gptq", "awq", "smoothquant" */
    unsigned needs;         /* SQZ_QSTAT_* the method reads */
    unsigned optional;      /* SQZ_QSTAT_* it uses when present */
    bool smooths;           /* returns a non-trivial smoothing vector */
    unsigned formats;       /* bit (1u << sqz_qformat) for every target it supports */
    const char *summary;
    sqz_qmethod_fn run;
    /* what the method is, for the options and the pipeline (so that nothing asks its name): */
    bool quantizes_acts;    /* only with quantized activations (W8A8): smoothquant */
    bool weight_only;       /* never with quantized activations: awq */
    bool hessian;           /* solves against X^T X: act-order (on by default), static groups, damp, shrink and
                             * GPTAQ apply, and a mix judges it against imatrix per matrix: gptq */
    bool searches_alpha;    /* 'alpha=' sets its migration strength: smoothquant */
    bool refines;           /* 'refine' searches its IQ3_S blocks further: rtn, imatrix, gptq */
    bool rowwise;           /* needs no statistics and rounds each row alone, so a matrix streams: rtn */
} sqz_qmethod;

/* The table: n_out receives the number of rows. Static storage. */
SQZ_API const sqz_qmethod *sqz_qmethods(int *n_out);
/* The method called name, or NULL. */
SQZ_API const sqz_qmethod *sqz_qmethod_find(const char *name);

/* The methods, callable directly (same contract as sqz_qmethod_fn).
 *   rtn          each format's reference quantizer; with o->act_mode != SQZ_ACT_FLOAT (I8 target)
 *                plain W8A8: static scale from st->absmax (minmax), st->hist or the sample rows.
 *   imatrix      Q4_0 / Q4_1 weighted by st->x2, exactly llama.cpp's bytes.
 *   gptq         st->xtx; o->percdamp, blocksize, act_order, static_groups (see the invariant
 *                above for GGUF targets; I4 + act_order without static groups sets qp.g_idx).
 *   awq          st->x (and st->absmean when present): scales + clipping, any target; writes s.
 *   smoothquant  I8 target, o->act_mode dynamic or static: alpha searched on the sample rows by
 *                the exact W8A8 output error (static scales are calibrated on the first half of
 *                the rows and scored on the second, so that the search sees clipping as unseen
 *                tokens would); the result's static act_scale uses all statistics; writes s. */
SQZ_API sqz_status sqz_quant_rtn(const sqz_qlinear *lin, int n_lin, const sqz_qstats *st, const sqz_quant_opts *o,
                                 sqz_qmatrix *out, float *smooth);
/* llama.cpp's importance-weighted Q4_0 / Q4_1 (quantize_row_q4_0_impl / q4_1_impl with
 * quant_weights = st->x2), byte for byte. */
SQZ_API sqz_status sqz_quant_imatrix(const sqz_qlinear *lin, int n_lin, const sqz_qstats *st, const sqz_quant_opts *o,
                                     sqz_qmatrix *out, float *smooth);
SQZ_API sqz_status sqz_quant_gptq(const sqz_qlinear *lin, int n_lin, const sqz_qstats *st, const sqz_quant_opts *o,
                                  sqz_qmatrix *out, float *smooth);
SQZ_API sqz_status sqz_quant_awq(const sqz_qlinear *lin, int n_lin, const sqz_qstats *st, const sqz_quant_opts *o,
                                 sqz_qmatrix *out, float *smooth);
SQZ_API sqz_status sqz_quant_smoothquant(const sqz_qlinear *lin, int n_lin, const sqz_qstats *st,
                                         const sqz_quant_opts *o, sqz_qmatrix *out, float *smooth);

/* RTN of one weight into an allocated result (the reference quantizer of each format). */
SQZ_API sqz_status sqz_quant_rtn_one(const float *w, int64_t n_out, int64_t n_in, const sqz_qtarget *t,
                                     sqz_qmatrix *out);

/* ---- AWQ pieces (the search is also usable alone) ---- */
/* The AWQ input scales for layers sharing an input: s = absmean^alpha (clamped to >= 1e-4,
 * normalised by sqrt(max s * min s)), alpha on the grid minimising sum_i ||X (Q(W_i diag s)
 * diag(s)^-1)^T - X W_i^T||^2 over the sample rows. Writes s (n_in) and the chosen alpha. */
SQZ_API sqz_status sqz_awq_search_scales(const sqz_qlinear *lin, int n_lin, const sqz_qstats *st,
                                         const sqz_quant_opts *o, float *s, float *alpha);

/* ---- folding a smoothing vector s into the operation that produces the input ----
 * After W := W . diag(s) the input must become x / s:
 *   norm (RMSNorm / LayerNorm) weight gamma[j] /= s[j] (and LayerNorm bias beta[j] /= s[j]);
 *   previous linear (e.g. v_proj before o_proj when the shapes match, up_proj before down_proj):
 *   its output row j (and bias j) /= s[j].
 * Every layer reading that input must use the same s (one call for q|k|v, one for gate|up). */
SQZ_API void sqz_fold_smooth_into_norm(float *gamma, float *beta, int64_t n, const float *s);
SQZ_API void sqz_fold_smooth_into_linear(float *w_prev, float *b_prev, int64_t n_out_prev, int64_t n_in_prev,
                                         const float *s);
/* W (n_out, n_in) := W . diag(s). */
SQZ_API void sqz_scale_columns(float *w, int64_t n_out, int64_t n_in, const float *s);

/* ---- W8A8 activation scales ---- */
/* The clipping threshold of |x| for method c from a histogram (MINMAX: absmax; PERCENTILE: the
 * right edge of the bin where the cumulative count reaches percentile %; KL: TensorRT's entropy
 * calibration with 128 quantized levels: for every i >= 128 bins, P = bins[0, i) with the
 * outliers added to bin i - 1, Q = P merged into 128 levels and spread back over the non-empty
 * bins, threshold = i * width for the i minimising KL(P || Q), the last minimum on ties; a
 * histogram that grew beyond SQZ_HIST_BINS bins is searched with its bins merged in pairs until
 * at most SQZ_HIST_BINS remain; bin 0 takes bin 1's count, as pytorch-quantization does). The
 * scale is threshold / 127. SQZ_ERR_INVALID_ARG for an empty histogram. */
SQZ_API sqz_status sqz_act_threshold(const sqz_act_hist *h, sqz_act_calib c, double percentile, float *threshold);
/* x_q (m, k) = clamp(rint(x / scale), -127, 127); NaN -> 0. scale > 0. */
SQZ_API void sqz_quantize_act_static(const float *x, int64_t m, int64_t k, float scale, int8_t *q);

/* ---- SmoothQuant pieces ---- */
/* s_j = absmax_j^alpha / wmax_j^(1 - alpha), wmax_j = max over the layers of |W[:, j]|; s_j = 1
 * where either maximum is 0; clamped to >= 1e-5. */
SQZ_API void sqz_smoothquant_scales(const sqz_qlinear *lin, int n_lin, int64_t n_in, const float *absmax, float alpha,
                                    float *s);

/* ======================================================================================
 * Policy: which tensors are quantized
 * ====================================================================================== */

typedef struct sqz_quant_policy {
    bool quant_output;      /* also quantize the classifier (OUTPUT) when it is not tied; false */
    bool quant_embeddings;  /* also the token embedding (GGUF targets only); false */
} sqz_quant_policy;

/* Defaults: only the linear layers of the blocks (attn_q/k/v/output, ffn_gate/up/down) are
 * quantized; embeddings, norms, biases, the classifier and the BERT pooler stay float; a matrix
 * whose n_in does not fit the target (sqz_qtarget_fits) stays float too. Returns true to
 * quantize; otherwise *why (may be NULL) gets a static reason. */
SQZ_API bool sqz_quant_policy_wants(const sqz_tensor *t, const sqz_qtarget *target, const sqz_quant_policy *p,
                                    const char **why);

/* ======================================================================================
 * Whole-model type mixes (quant/mix.c): llama.cpp's llama_tensor_get_type as a table
 * ====================================================================================== */

typedef struct sqz_qmix sqz_qmix; /* a row of the mix table (static, never freed) */

/* "q2_k", "q3_k_s", "q3_k_m", "q3_k_l", "q4_k_s", "q4_k_m", "q5_k_s", "q5_k_m", "q4_0", "q8_0", "iq3_m"
 * (llama.cpp's ftypes of those names); NULL if none. */
SQZ_API const sqz_qmix *sqz_qmix_find(const char *name);
SQZ_API const char *sqz_qmix_name(const sqz_qmix *mix);
/* llama.cpp's llama_ftype of the mix (15 for q4_k_m, 10 for q2_k:mix), which llama-quantize
 * writes as GGUF general.file_type whatever type holds the most weights; -1 for NULL. */
SQZ_API int sqz_qmix_gguf_ftype(const sqz_qmix *mix);

/* The dtype the mix gives tensor t of model m, as llama-quantize chooses it for that ftype: the
 * role rules (attn_v / ffn_down promotion on the first, last and every third layer, output
 * Q6_K, a tied token embedding as the output), then llama.cpp's fallback when the row width
 * is not a multiple of the type's block (Q2_K/Q3_K -> Q4_0, Q4_K -> Q5_0, Q5_K -> Q5_1,
 * Q6_K -> Q8_0, then F16). has_imatrix: the ftype's imatrix-only rules (Q4_0's Q4_1 ffn_down
 * in the first eighth). Tensors llama.cpp does not quantize (vectors, norms) keep t->dtype. */
SQZ_API sqz_dtype sqz_qmix_type(const sqz_qmix *mix, const sqz_model *m, const sqz_tensor *t, bool has_imatrix);

/* ---- mixed precision to a size budget (quant/auto.c, `--quant auto:bpw=X`) ---- */
#define SQZ_QAUTO_MAX_CAND 13
typedef struct sqz_qauto_tensor {
    int n;                               /* candidates that fit this tensor's width */
    sqz_qformat fmt[SQZ_QAUTO_MAX_CAND];
    double bytes[SQZ_QAUTO_MAX_CAND];    /* storage of the matrix in that type */
    double err[SQZ_QAUTO_MAX_CAND];      /* sum E[x_j^2] (W - Q(W))[r, j]^2 / sum E[x_j^2] W[r, j]^2 */
    int chosen;                          /* set by sqz_qauto_solve: index into fmt, -1 if none */
} sqz_qauto_tensor;

/* The candidate types (Q2_K, Q3_K, IQ3_S, IQ4_XS, Q4_0, IQ4_NL, Q4_K, Q4_1, Q5_0, Q5_K, Q5_1, Q6_K, Q8_0);
 * returns their number. */
SQZ_API int sqz_qauto_candidates(const sqz_qformat **out);
/* The sensitivity of W (n_out, n_in) to every candidate that fits: each quantized (with E[x^2]
 * as llama.cpp's importance when imatrix and x2, where the type has an importance-weighted
 * quantizer; else RTN) and its output error weighted by x2 (1 where x2 is NULL). */
SQZ_API sqz_status sqz_qauto_measure(const float *w, int64_t n_out, int64_t n_in, const float *x2, bool imatrix,
                                     sqz_qauto_tensor *out);
/* One candidate of sqz_qauto_measure: W quantized to f, deq (n_out * n_in floats, the caller's
 * scratch) gets its dequantization, *bytes its storage and *err its relative output error;
 * *bytes = -1 when f's block does not divide n_in. Safe to call from several threads. */
SQZ_API sqz_status sqz_qauto_measure_one(const float *w, int64_t n_out, int64_t n_in, const float *x2, bool imatrix,
                                         sqz_qformat f, float *deq, double *bytes, double *err);
/* Chooses t[i].chosen for n tensors to minimise the summed error with at most `budget` bytes
 * (greedy over the lower convex hulls); *used gets the bytes chosen (more than budget only when
 * every tensor's cheapest type is). */
SQZ_API sqz_status sqz_qauto_solve(sqz_qauto_tensor *t, int64_t n, double budget, double *used);

/* The qformat that stores dtype d (false for float dtypes: F16/F32). */
SQZ_API bool sqz_qformat_from_dtype(sqz_dtype d, sqz_qformat *out);

/* ======================================================================================
 * Benchmarks (the body of `sqz bench compress`)
 * ====================================================================================== */

typedef struct sqz_quant_bench {
    int64_t n_matrices;
    double input_bytes;     /* f32 bytes quantized */
    double seconds;         /* RTN time (dequantizing the source to f32 is not counted) */
    double gbps;            /* input_bytes / seconds / 1e9 */
} sqz_quant_bench;

/* RTN throughput over every matrix the default policy quantizes in model m, to target t. */
SQZ_API sqz_status sqz_quant_bench_rtn(const sqz_model *m, const sqz_qtarget *t, sqz_quant_bench *out);

/* GPTQ time for block `layer` of a llama-family model: the 7 linear layers grouped by input
 * (q|k|v, o, gate|up, down), each group with its Hessian from stats[g] (g = 0..3 in that order)
 * or, when stats is NULL, from a deterministic synthetic sample of 512 rows. *seconds gets the
 * time of the four sqz_quant_gptq calls (Hessian building not counted). */
SQZ_API sqz_status sqz_quant_bench_gptq_block(const sqz_model *m, int32_t layer, const sqz_quant_opts *o,
                                              const sqz_qstats *const *stats, double *seconds);

#ifdef __cplusplus
}
#endif
#endif

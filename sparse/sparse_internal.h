/*
 * sparse/sparse_internal.h - unstructured and N:M sparsity as algorithms (issue 10): choosing
 * the zeros (magnitude, Wanda), SparseGPT on GPTQ's sweep (alone or jointly with a quantization
 * target), OWL's layer-wise ratios, and the check of a 2:4 layer through the sparse INT8 kernel.
 * The `--sparsity` pass that runs them block by block is compress/pass_sparsity.c; the 2:4
 * storage itself (sqz/sparse.h, core/sparse24.c) is core's, because the kernels and the readers
 * below this module read it. docs/sparsity.md is the user's page.
 *
 *   SPEC  := R | N ':' M  (':' PART)*    R: the fraction of each layer's weights set to zero,
 *                                        in (0, 1); N:M: N of every M consecutive weights of a
 *                                        row are kept (2:4, 4:8; NVIDIA's sparse tensor cores
 *                                        run 2:4)
 *   PART  := magnitude | wanda | sparsegpt  the method (default sparsegpt)
 *          | uniform | owl                   layer-wise ratios (owl: unstructured only)
 *          | 'owl-m=' X | 'owl-lambda=' X    OWL's outlier threshold M and spread lambda
 *          | 'damp=' X | 'blocksize=' N      SparseGPT's damping and column block
 *   e.g. 0.5  0.5:wanda  2:4:sparsegpt  4:8:magnitude  0.6:wanda:owl
 */
#ifndef SQZ_SPARSE_INTERNAL_H
#define SQZ_SPARSE_INTERNAL_H

#include "calib/calib_internal.h"
#include "core/internal.h"
#include "quant/quant_internal.h"
#include "sqz/calib.h"
#include "sqz/quant.h"
#include "sqz/runtime.h"

#define SQZ__SPARSITY_MAX_LAYERS 512

typedef enum sqz__sparsity_method {
    SQZ__SPARSE_MAGNITUDE = 0, /* |W|: layer-wise (unstructured), per group of M (N:M) */
    SQZ__SPARSE_WANDA = 1,     /* |W_ij| * ||x_j||: per output row (Sun et al. 2023) */
    SQZ__SPARSE_SPARSEGPT = 2, /* OBS in GPTQ's sweep: W^2 / [U]_jj^2, remaining weights updated */
} sqz__sparsity_method;

/* What a sparsity SPEC asks for (the `--sparsity` pass's option rows fill it). */
typedef struct sqz__sparse_opts {
    double ratio;        /* unstructured: fraction zeroed; N:M: N (positional) */
    int m;               /* M of N:M, 0 for unstructured */
    int n;               /* N of N:M (derived) */
    int method;          /* sqz__sparsity_method */
    int layers;          /* 0 uniform, 1 owl */
    double owl_m, owl_lambda;
    double damp;
    int64_t blocksize;
    int aq;              /* SparseGPT: 1 with GPTAQ's correction (sqz_quant_opts.gptaq), 0 without */
    double aq_alpha;     /* its alpha */
} sqz__sparse_opts;

/* ---- choosing the zeros (mask.c) -------------------------------------------------------- */

/* prune[i] = 1 for the k lowest of score[0..count) (ties: by (score, index) order), else 0. */
sqz_status sqz__sparsity_lowest(const float *score, int64_t count, int64_t k, uint8_t *prune);
/* Within each row of (rows, cols) at stride ld (prune at stride ld_p): the k lowest. */
sqz_status sqz__sparsity_row_lowest(const float *score, int64_t ld, int64_t rows, int64_t cols, int64_t k,
                                    uint8_t *prune, int64_t ld_p);
/* N:M: within every M consecutive columns of every row, the M - N lowest (cols % m == 0). */
void sqz__sparsity_nm_lowest(const float *score, int64_t ld, int64_t rows, int64_t cols, int n, int m,
                             uint8_t *prune, int64_t ld_p);
/* Zeros of w (n_out, n_in) by magnitude or Wanda (x2: E[x^2] per input, Wanda only) at ratio
 * (unstructured) or N:M; returns the number of zeros set. */
sqz_status sqz__sparsity_score_prune(float *w, int64_t n_out, int64_t n_in, int method, const float *x2,
                                     double ratio, int n, int m, int64_t *zeros);
/* Whether every row of w satisfies N:M (at most N non-zeros in every M consecutive columns). */
bool sqz__sparsity_is_nm(const float *w, int64_t n_out, int64_t n_in, int n, int m);

/* ---- SparseGPT (sparsegpt.c): the GPTQ sweep of quant/ with a mask hook ------------------ */

/* Sparsifies the n_lin layers sharing the input of st: values[i] (caller's, n_out * n_in)
 * receive the swept weights; or, with q (joint: the quantization's options, target included),
 * out[i] the quantized layers. be and threads: where the sweep's factor and updates run and its
 * row threads (sqz_quant_opts.backend / threads; NULL and 0: the host, all cores). */
sqz_status sqz__sparsegpt(const sqz_qlinear *lin, int n_lin, const sqz_qstats *st, const sqz__sparse_opts *a,
                          double ratio, const sqz_quant_opts *q, sqz_backend *be, int threads, sqz_qmatrix *out,
                          float **values);

/* ---- the 2:4 kernel check (forward.c) ---------------------------------------------------- */

/* Y (m, n_out) = X (m, n_in) . W^T as the layer runs (sqz_qmatrix_forward), through the 2:4
 * sparse INT8 kernel for 2:4 INT8 layers, which must agree bit for bit with the dense one. */
sqz_status sqz__sparsity_forward(const sqz__sparse_opts *a, const sqz_qmatrix *q, const float *x, int64_t m,
                                 float *y);

/* A float 2:4 layer w (n_out, n_in): its INT8 image through the sparse and the dense INT8
 * kernels on the sample rows x (m, n_in), which must agree bit for bit (no-op for other
 * patterns, n_in not a multiple of 32 or no rows). */
sqz_status sqz__sparsity_check_f32(const sqz__sparse_opts *a, const float *w, int64_t n_out, int64_t n_in,
                                   const float *x, int64_t m);

/* ---- OWL (owl.c) --------------------------------------------------------------------------- */

/* layer_ratio[0..n_layers) from one calibration pass over the windows w on the model as it is
 * (Yin et al. 2024: layer ratios spread by the share of outlier scores |W| * ||x|| > M * mean in
 * each block, around a->ratio). so: the sessions' options (max_tokens is set from w). */
sqz_status sqz__sparsity_owl(sqz_model *m, const sqz_calib_windows *w, const sqz_session_opts *so,
                             const sqz__sparse_opts *a, sqz_progress_fn progress, void *progress_user,
                             double *layer_ratio);

#endif

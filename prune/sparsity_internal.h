/*
 * prune/sparsity_internal.h - unstructured and N:M sparsity (`--sparsity SPEC`, issue 10):
 * what the files prune/sparsity_*.c share and the pass's declarations for the pass table
 * (compress/passes.c). docs/sparsity.md is the user's page.
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
#ifndef SQZ_SPARSITY_INTERNAL_H
#define SQZ_SPARSITY_INTERNAL_H

#include "core/internal.h"
#include "sqz/compress.h"

#define SQZ__SPARSITY_MAX_LAYERS 512

typedef enum sqz__sparsity_method {
    SQZ__SPARSE_MAGNITUDE = 0, /* |W|: layer-wise (unstructured), per group of M (N:M) */
    SQZ__SPARSE_WANDA = 1,     /* |W_ij| * ||x_j||: per output row (Sun et al. 2023) */
    SQZ__SPARSE_SPARSEGPT = 2, /* OBS in GPTQ's sweep: W^2 / [U]_jj^2, remaining weights updated */
} sqz__sparsity_method;

typedef struct sqz__sparsity_args {
    double ratio;        /* unstructured: fraction zeroed; N:M: N (positional) */
    int m;               /* M of N:M, 0 for unstructured */
    int n;               /* N of N:M (derived) */
    int method;          /* sqz__sparsity_method */
    int layers;          /* 0 uniform, 1 owl */
    double owl_m, owl_lambda;
    double damp;
    int64_t blocksize;
    /* per run: OWL's per-layer ratios (model step), the joint quantization (sqz__sparsity_link),
     * the counts for the note */
    double layer_ratio[SQZ__SPARSITY_MAX_LAYERS];
    bool have_layer_ratio;
    const sqz_compress_spec *joint; /* the following quant stage's SPEC (sparsegpt), or NULL */
    int64_t zeros, total;
} sqz__sparsity_args;
#define SQZ__SPARSITY_N_OPTS 8

extern const sqz_opt sqz__sparsity_opts[SQZ__SPARSITY_N_OPTS];
sqz_status sqz__sparsity_check(void *args, uint64_t given, const char *spec);
unsigned sqz__sparsity_needs(const void *args, unsigned *required);
sqz_status sqz__sparsity_model_step(sqz_pass_ctx *c, const void *args);
sqz_status sqz__sparsity_block(sqz_pass_ctx *c, int32_t layer, const sqz_calib_block *stats, const void *args);

/* Before a recipe runs: a sparsegpt stage followed by a quant stage becomes SparseGPT's joint
 * mode (the quant stage's format in the same sweep; the quant stage then leaves those layers);
 * magnitude / wanda keep their zeros through the quant stage's own method, except GPTQ (which
 * moves them) and q4_1 (which has no exact zero): usage errors. */
sqz_status sqz__sparsity_link(const sqz_recipe *r); /* compress/sparsity_link.c */
/* The link's usage errors and OWL without calibration, before anything runs (from
 * sqz_recipe_check_model: exit 2). */
sqz_status sqz__sparsity_check_recipe(const sqz_recipe *r, bool have_windows);

/* ---- choosing the zeros (sparsity_mask.c) ----------------------------------------------- */

/* prune[i] = 1 for the k lowest of score[0..count) (ties: lower index first is kept zero... by
 * (score, index) order), else 0. */
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

/* ---- SparseGPT (sparsity_gpt.c): the GPTQ sweep of quant/ with a mask hook ---------------- */

/* Sparsifies the n_lin layers sharing the input of st: values[i] (caller's, n_out * n_in)
 * receive the swept weights; or, with q (joint), out[i] the quantized layers. */
sqz_status sqz__sparsegpt(const sqz_qlinear *lin, int n_lin, const sqz_qstats *st, const sqz__sparsity_args *a,
                          double ratio, const sqz_compress_spec *q, sqz_qmatrix *out, float **values);

/* ---- joint mode (sparsity_joint.c) ---------------------------------------------------------- */

/* SparseGPT with a->joint's format in one sweep for the n layers t[] (f32 copies in lin[]):
 * every result is checked (the zeros dequantize to exact zeros; N:M holds on every row),
 * validated on the sample rows of `in` (2:4 INT8 layers through the sparse INT8 kernel, which
 * must agree bit for bit with the dense one), reported and attached. */
sqz_status sqz__sparsity_joint(sqz_pass_ctx *c, sqz__sparsity_args *a, int32_t layer, const sqz_qlinear *lin,
                               sqz_tensor **t, int n, const sqz_calib_input *in, double ratio);

/* Y (m, n_out) = X (m, n_in) . W^T as the layer runs (sqz_qmatrix_forward), through the 2:4
 * sparse INT8 kernel for 2:4 INT8 layers (sparsity_forward.c). */
sqz_status sqz__sparsity_forward(const sqz__sparsity_args *a, const sqz_qmatrix *q, const float *x, int64_t m,
                                 float *y);

/* A float 2:4 layer w (n_out, n_in): its INT8 image through the sparse and the dense INT8
 * kernels on the sample rows x (m, n_in), which must agree bit for bit (no-op for other
 * patterns, n_in not a multiple of 32 or no rows). */
sqz_status sqz__sparsity_check_f32(const sqz__sparsity_args *a, const float *w, int64_t n_out, int64_t n_in,
                                   const float *x, int64_t m);

/* ---- OWL (sparsity_owl.c) ------------------------------------------------------------------ */

/* a->layer_ratio from one calibration pass on the model as it is (Yin et al. 2024: layer
 * ratios spread by the share of outlier scores |W| * ||x|| > M * mean in each block). */
sqz_status sqz__sparsity_owl(sqz_pass_ctx *c, sqz__sparsity_args *a);

#endif

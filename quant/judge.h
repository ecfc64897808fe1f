/*
 * quant/judge.h - the judgement of a quantized layer on calibration rows (not public): how far it is
 * from the float layer (validation), and which of GPTQ and imatrix rounds it better (the judge a mix
 * applies per layer). It takes statistics and sample rows and returns numbers; the compress pass
 * writes them into its report rows (compress/pass_quant_block.c, pass_sparsity_joint.c).
 *
 * validate_dev.c forms the products on the host or on a device backend; judge.c compares them.
 */
#ifndef SQZ_QUANT_JUDGE_H
#define SQZ_QUANT_JUDGE_H

#include "quant/quant_internal.h"
#include "sqz/backend.h"

/* The validation products of a compressed layer on the sample rows (validate_dev.c), on the host
 * (be NULL or host memory) or through be's kernels: yr (n_x, no) = x . w^T (w (no, ni) f32: the
 * float layer), and yq = q as it would run on xs (x / smooth when folded); by receives the kernel's
 * name ("cpu:sgemm", "cuda:gemm_i8", ...); deq, when not NULL, is q dequantized, which a device
 * without q's kernel then multiplies instead of dequantizing again. A caller that compares
 * candidates forms yr once. */
sqz_status sqz__validate_float(sqz_backend *be, const float *w, int64_t no, int64_t ni, const float *x, int64_t n_x,
                               float *yr);
sqz_status sqz__validate_quant(sqz_backend *be, const sqz_qmatrix *q, const float *xs, int64_t n_x, const float *deq,
                               float *yq, char by[24]);

/* A layer's products on the sample rows formed before its validation (when GPTQ and imatrix were
 * compared): the float layer's yr, the kept candidate's yq and the kernel that made it. */
typedef struct sqz__sample_products {
    float *yr, *yq;
    char by[24];
} sqz__sample_products;

void sqz__sample_products_free(sqz__sample_products *p);

/* What the validation of one layer measured: the relative error of its weights against the float
 * weights (times the smoothing, when folded) and of its outputs on the sample rows (NAN: no rows),
 * and the kernel that formed the compressed products. */
typedef struct sqz__layer_check {
    double weight_err, out_err;
    char by[24];
} sqz__layer_check;

/* Validates q against the float layer w (no, ni) on the sample rows x (n_x, ni; NULL when n_x is 0);
 * xs = x / smooth when the smoothing was folded (else x). known: products already formed on these
 * rows (NULL, or empty: formed here). out->out_err stays as the caller set it when n_x is 0. */
sqz_status sqz__judge_validate(sqz_backend *be, const sqz_qmatrix *q, const float *w, const float *x, const float *xs,
                               int64_t n_x, const float *smooth, const sqz__sample_products *known, int threads,
                               sqz__layer_check *out);

/* GPTQ's sweep can lose to importance-weighted rounding (judge.c says where and why): where *used
 * is a Hessian method, imatrix produces the target and sample rows x (st->n_x of them) are at hand,
 * lin is also rounded by imatrix, both are judged on rows neither was fitted to, and the better one
 * replaces *out (*used then says imatrix). *kept receives the float and kept products on x (the
 * caller's to free); *heldout_gptq / *heldout_imatrix the held-out errors (left as they were when no
 * held-out judgement ran). st: the layer's input statistics; x: its sample rows (NULL: none). */
sqz_status sqz__judge_gptq_or_imatrix(sqz_backend *be, const sqz_qlinear *lin, const sqz_qstats *st, const float *x,
                                      const sqz_quant_opts *qo, sqz_qmatrix *out, const sqz_qmethod **used,
                                      sqz__sample_products *kept, double *heldout_gptq, double *heldout_imatrix);

#endif

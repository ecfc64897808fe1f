/*
 * sqz/prune.h - structured pruning: importance scores of attention heads and FFN neurons
 * from calibration statistics, the choice of what to keep under the GQA rules, and the
 * compensation of the kept weights (FLAP's bias compensation, the least-squares
 * reconstruction from the Hessian). The `--prune SPEC` pass of sqz compress (prune/) is
 * built from these; docs/pruning.md has the method, the SPEC and the measurements.
 *
 * A structure's "output layer" is the linear layer that reads it: o (attn_output) for a
 * head, whose input columns [h * head_dim, (h+1) * head_dim) are head h's attention output;
 * down (ffn_down) for an FFN neuron, whose input column j is neuron j's activation. The
 * scores and both compensations read the statistics of that layer's input x (sqz_qstats of
 * sqz/quant.h, from the sequential calibration of sqz/calib.h), with W (n_out, n_in) the
 * output layer's weight and S a structure's columns of it:
 *
 *   magnitude  ||W_q[S rows]||_F^2 + ||W_o[:, S]||_F^2 (heads), ||gate_j||^2 + ||up_j||^2 +
 *              ||down_:,j||^2 (neurons): the weights the structure owns, no statistics
 *   wanda      Wanda-sp (An et al., FLAP's baseline): sum over S and the rows i of
 *              |W_ij| * ||x_j||_2, ||x_j|| = sqrt(T E[x_j^2])                  (needs X2)
 *   flap       FLAP's fluctuation (An et al. 2024): sum over j in S of
 *              Var(x_j) * ||W_:,j||_2^2, Var = E[x^2] - E[x]^2                 (needs X2, MEAN)
 *   obs        the output error of removing S with the optimal correction of the other
 *              columns (Optimal Brain Surgeon, as SparseGPT measures it):
 *              tr(W_S [(H^-1)_SS]^-1 W_S^T) with H = X^T X + damping        (needs XTX)
 *
 * Compensation when columns S of W are removed and K kept:
 *   bias       b += W_S E[x_S]: the mean contribution of the removed inputs moves into the
 *              output layer's bias (FLAP); exact for the mean, needs MEAN
 *   lsq        W_K += W_S H_SK H_KK^-1: the least-squares optimal W_K' given the kept
 *              inputs, min ||X W^T - X_K W_K'^T||_F on the calibration tokens; H = X^T X with
 *              relative damping on H_KK (needs XTX)
 *   both       lsq, then bias with the mean of the residual x_S - H_SK H_KK^-1 x_K's mean
 */
#ifndef SQZ_PRUNE_H
#define SQZ_PRUNE_H

#include <stdbool.h>
#include <stdint.h>

#include "sqz/api.h"
#include "sqz/family.h"
#include "sqz/model.h"
#include "sqz/quant.h"
#include "sqz/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum sqz_prune_score {
    SQZ_PRUNE_MAGNITUDE = 0,
    SQZ_PRUNE_WANDA = 1,
    SQZ_PRUNE_FLAP = 2,
    SQZ_PRUNE_OBS = 3,
    SQZ_PRUNE_SCORE_COUNT
} sqz_prune_score;

typedef enum sqz_prune_comp {
    SQZ_PRUNE_COMP_NONE = 0,
    SQZ_PRUNE_COMP_BIAS = 1,
    SQZ_PRUNE_COMP_LSQ = 2,
    SQZ_PRUNE_COMP_BOTH = 3,
} sqz_prune_comp;

/* "magnitude", "wanda", "flap", "obs" / "none", "bias", "lsq", "both"; "?" when out of range. */
SQZ_API const char *sqz_prune_score_name(sqz_prune_score s);
SQZ_API const char *sqz_prune_comp_name(sqz_prune_comp c);

/* The statistics (SQZ_QSTAT_*) a score or a compensation reads from the output layer's input. */
SQZ_API unsigned sqz_prune_score_needs(sqz_prune_score s);
SQZ_API unsigned sqz_prune_comp_needs(sqz_prune_comp c);

/*
 * Importance of every head (k = SQZ_STRUCT_HEAD: out[0..n_heads)) or FFN neuron
 * (SQZ_STRUCT_NEURON: out[0..d_ff)) of block `layer`, higher = more important, from the
 * weights of m (any dtype with a float view) and st, the statistics of the input of the
 * output layer (o or down; NULL for magnitude). damp: relative damping of H for obs (a
 * fraction of the mean diagonal, e.g. 0.01).
 * Errors: SQZ_ERR_INVALID_ARG (a structure other than heads / neurons, layer out of range,
 * statistics missing or of another width: the message names the layer and what is missing),
 * SQZ_ERR_NUMERIC (H not positive definite), SQZ_ERR_NOMEM.
 */
SQZ_API sqz_status sqz_prune_scores(const sqz_model *m, int32_t layer, sqz_structure k, sqz_prune_score score,
                                    const sqz_qstats *st, double damp, double *out);

/*
 * The query heads to keep in a layer of n_heads heads in n_kv groups (n_heads / n_kv
 * consecutive query heads share a KV head) when `remove` heads should go: the kept count
 * is the feasible count nearest to n_heads - remove >= 1 (feasible: kv' * per with kv' <= n_kv
 * groups kept and per <= n_heads / n_kv query heads kept in each, so n_heads stays a
 * multiple of n_kv_heads; ties keep more), and among the (kv', per) that give it, the
 * one keeping the largest score sum: in each group its `per` best heads, the kv' groups
 * whose kept heads score highest. keep gets the indices, increasing; *n_keep their count.
 * Returns SQZ_OK; SQZ_ERR_INVALID_ARG when remove >= n_heads (every head).
 */
SQZ_API sqz_status sqz_prune_choose_heads(int64_t n_heads, int64_t n_kv, const double *scores, int64_t remove,
                                          int64_t *keep, int64_t *n_keep);

/*
 * The count sqz_prune_choose_heads keeps when `remove` of n_heads heads (n_kv groups) should
 * go (*n_keep), and in how many shapes (kv' groups x per query heads) it can keep them
 * (*n_shapes): with more than one, the scores pick the shape, so layers can end up with
 * different KV head counts. Returns SQZ_OK; SQZ_ERR_INVALID_ARG as sqz_prune_choose_heads.
 */
SQZ_API sqz_status sqz_prune_heads_shapes(int64_t n_heads, int64_t n_kv, int64_t remove, int64_t *n_keep,
                                          int *n_shapes);

/*
 * The heads to keep with the shape fixed: in each of the n_kv groups its per_keep best query
 * heads, then the kv_keep groups whose kept heads score highest (sqz_prune_choose_heads with
 * one shape; `uniform` pruning gives every layer the same shape). keep gets kv_keep * per_keep
 * indices, increasing. Returns SQZ_OK; SQZ_ERR_INVALID_ARG when the shape does not fit the
 * layer (kv_keep in [1, n_kv], per_keep in [1, n_heads / n_kv]); SQZ_ERR_NOMEM.
 */
SQZ_API sqz_status sqz_prune_choose_heads_shape(int64_t n_heads, int64_t n_kv, const double *scores,
                                                int64_t kv_keep, int64_t per_keep, int64_t *keep);

/* keep[0..n - remove) = the indices of the n - remove highest scores, increasing (ties: the
 * lower index). remove in [0, n). */
SQZ_API void sqz_prune_choose_top(int64_t n, const double *scores, int64_t remove, int64_t *keep);

/*
 * Compensates, then removes: adjusts the output layer (o or down) of block `layer` for the
 * removal of every structure not in keep[0..n_keep) (heads or neurons) as `comp` says
 * (above), then keeps them with sqz_model_keep_heads / _neurons (sqz/family.h). Members
 * stored in block formats (GGUF Q4_1 and so on) are replaced by their float values first
 * (columns of block formats cannot be cut); the output layer becomes F32 when compensated.
 * BIAS needs the output layer's bias tensor: a model without one gets an F32 zero bias
 * added, and for the llama family zero biases on the layers HF ties to it (attention_bias:
 * q, k, v and o, hp.attn_bias becomes true; mlp_bias: gate, up and down), so that GGUF and
 * HF both express the result (sqz_model_add_tensor: tensor pointers and sessions made before
 * are invalid after a call that adds one; sqz_prune_add_biases does it for every layer up
 * front).
 * Errors: SQZ_ERR_INVALID_ARG (statistics missing or of another width), SQZ_ERR_NUMERIC
 * (H_KK not positive definite even damped), the edits' errors, SQZ_ERR_NOMEM.
 */
SQZ_API sqz_status sqz_prune_apply(sqz_model *m, int32_t layer, sqz_structure k, const int64_t *keep, int64_t n_keep,
                                   sqz_prune_comp comp, const sqz_qstats *st, double damp);

/* Adds the F32 zero biases above for the o and/or down layers of every block that lacks them
 * (so the model's tensor set is fixed before a calibration session is made). *added gets the
 * number of tensors added. */
SQZ_API sqz_status sqz_prune_add_biases(sqz_model *m, bool attn_out, bool ffn_down, int64_t *added);

/* ======================================================================================
 * What a --prune stage did, per layer (the compress report's "prune" section and its plots)
 * ====================================================================================== */

typedef struct sqz_prune_layer {
    int32_t layer;
    int64_t heads_before, heads_after; /* query heads */
    int64_t kv_before, kv_after;       /* KV heads */
    int64_t ffn_before, ffn_after;     /* FFN neurons */
    double *head_score;   /* heads_before scores of the layer's heads (owned), NULL when its heads
                             were not scored (no head removed from it) */
    uint8_t *head_removed; /* heads_before flags, 1 = removed (owned), NULL with head_score */
    double ffn_q[5];      /* the neurons' scores: min, 25%, median, 75%, max; NaN when not scored */
    double ffn_cut;       /* the highest score among the removed neurons; NaN when none removed */
    double ffn_removed_mean, ffn_kept_mean; /* mean score of the removed / kept neurons; NaN if none */
} sqz_prune_layer;

typedef struct sqz_prune_record {
    sqz_prune_score score;
    sqz_prune_comp comp;
    char spec[256];             /* the stage's SPEC */
    int64_t d_before, d_after;  /* hidden channels before / after the stage */
    int32_t n_layers;
    sqz_prune_layer *layers;    /* n_layers entries (owned) */
} sqz_prune_record;

/* Frees what r owns and zeroes it; NULL-safe. */
SQZ_API void sqz_prune_record_free(sqz_prune_record *r);

#ifdef __cplusplus
}
#endif
#endif

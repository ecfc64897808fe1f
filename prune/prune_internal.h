/*
 * prune/prune_internal.h - what the files of prune/ share and export to the `--prune` pass
 * (compress/pass_prune.c), not public: the options a prune SPEC gives, the global budget, the
 * hidden-channel removal and the record of what was removed.
 */
#ifndef SQZ_PRUNE_INTERNAL_H
#define SQZ_PRUNE_INTERNAL_H

#include "core/internal.h"
#include "sqz/calib.h"
#include "sqz/progress.h"
#include "sqz/prune.h"
#include "sqz/runtime.h"

/* A 2-D tensor's float values, malloc'd (*out, rows * cols), NULL-safe: *out = NULL on error. */
sqz_status sqz__prune_load(const sqz_tensor *t, float **out);

/* The output layer (o or down) of structure k in `layer`, and the width in columns of one
 * structure (head_dim or 1). NULL when the model lacks it. */
sqz_tensor *sqz__prune_out_layer(const sqz_model *m, int32_t layer, sqz_structure k, int64_t *width);

/* H + damp * mean(diag H) * I restricted to idx[0..n) (both axes) into a new (n, n) array
 * (dead inputs, H_jj == 0, get 1 on the diagonal as GPTQ does). NULL on out of memory. */
double *sqz__prune_damped(const double *h, int64_t n_in, const int64_t *idx, int64_t n, double damp);

/* ---- what a prune SPEC asks for (the `--prune` pass's option rows fill it) ------------------ */

#define SQZ__PRUNE_MAX_LAYERS 512

typedef struct sqz__prune_opts {
    double heads, ffn;    /* fraction of each layer's heads / FFN neurons to remove */
    double params;        /* or: fraction of the attention+FFN parameters, placed by budget.c */
    double channels;      /* fraction of the hidden channels to remove (channels.c) */
    int score;            /* sqz_prune_score */
    int comp;             /* sqz_prune_comp, or -1: the score's default */
    double damp;          /* relative damping of H (obs, lsq) */
    int64_t align;        /* kept FFN widths are a multiple of this (where d_ff is) */
    bool uniform;         /* heads=: every layer keeps the same heads and KV heads (one shape) */
    double experts;       /* fraction of each mixture layer's experts to remove (experts.c) */
    int expert_score;     /* sqz__expert_score */
} sqz__prune_opts;

/* ---- a mixture's experts (experts.c) ---------------------------------------------------------- */

/* How experts are scored for removal: REAP (router-weighted expert activation norms, Lasby et al., Cerebras
 * 2025), routing frequency (tokens routed to each), or a seeded random draw (the baseline). */
typedef enum sqz__expert_score { SQZ__EXPERTS_REAP = 0, SQZ__EXPERTS_FREQUENCY = 1, SQZ__EXPERTS_RANDOM = 2 } sqz__expert_score;
/* Scores sc[0..n_expert) of layer `layer`'s experts from its calibration statistics (the experts' gate|up
 * input: mat_tokens, mat_reap); a higher score is kept. SQZ_ERR_INVALID_ARG naming the layer when the
 * statistics lack what the score reads. */
sqz_status sqz__prune_expert_scores(const sqz_calib_block *stats, int32_t layer, int64_t n_expert,
                                    sqz__expert_score how, double *sc);

/* Where the whole-model measurements run: calibration windows (NULL: none given), the sessions'
 * options, progress, and the stage's SPEC for messages. */
typedef struct sqz__prune_env {
    const sqz_calib_windows *w;
    const sqz_session_opts *session_opts;
    sqz_progress_fn progress;
    void *progress_user;
    const char *spec;
} sqz__prune_env;

/* The compensation a->comp names, or the score's default (bias for flap, lsq for obs). */
sqz_prune_comp sqz__prune_comp_of(const sqz__prune_opts *a);

/* Hidden channels to remove from d (a->channels, aligned as FFN widths), and the whole-model
 * removal (channels.c). */
int64_t sqz__prune_channels_remove(const sqz__prune_opts *a, int64_t d);
sqz_status sqz__prune_channels(sqz_model *m, const sqz__prune_opts *a, const sqz__prune_env *e);

/* params=: the heads and FFN neurons to remove in every layer (plan_heads / plan_ffn, n_layers
 * entries each, at most SQZ__PRUNE_MAX_LAYERS) from one scoring pass over the model (budget.c). */
sqz_status sqz__prune_plan(sqz_model *m, const sqz__prune_opts *a, const sqz__prune_env *e,
                           int32_t *plan_heads, int32_t *plan_ffn);

/* heads=R:uniform: the shape every layer keeps when `remove` of each layer's heads go (all
 * layers alike): *kv_keep KV groups of *per_keep query heads. With more than one shape for the
 * count, the one keeping the most standardized score over all layers, from one scoring pass
 * over the unpruned model (uniform.c). */
sqz_status sqz__prune_uniform_shape(sqz_model *m, const sqz__prune_opts *a, const sqz__prune_env *e,
                                    int64_t remove, int64_t *kv_keep, int64_t *per_keep);

/* ---- the record of what the pass removed (record.c; sqz_prune_record of sqz/prune.h) ----- */

/* Opens r for the model m after the stage's whole-model step (every layer as it is: nothing
 * removed yet; scores NaN). d_before: hidden channels before the stage. */
sqz_status sqz__prune_record_open(sqz_prune_record *r, const sqz_model *m, sqz_prune_score score,
                                  sqz_prune_comp comp, const char *spec, int64_t d_before);
/* After block `layer`'s heads were pruned: the scores of its heads, which were kept, the
 * counts now in m. After its FFN neurons were: the scores' quartiles, the cut and the means.
 * Out of memory loses the scores from the report, silently (the pruning itself stands). */
void sqz__prune_record_heads(sqz_prune_record *r, const sqz_model *m, int32_t layer, const double *scores,
                             const int64_t *keep, int64_t n_keep);
void sqz__prune_record_ffn(sqz_prune_record *r, const sqz_model *m, int32_t layer, const double *scores, int64_t n,
                           const int64_t *keep, int64_t n_keep);

#endif

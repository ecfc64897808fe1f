/*
 * prune/prune_internal.h - what the files of prune/ share (not public), and the `--prune`
 * pass's declarations for the pass table (compress/passes.c).
 */
#ifndef SQZ_PRUNE_INTERNAL_H
#define SQZ_PRUNE_INTERNAL_H

#include "core/internal.h"
#include "sqz/compress.h"
#include "sqz/prune.h"

/* A 2-D tensor's float values, malloc'd (*out, rows * cols), NULL-safe: *out = NULL on error. */
sqz_status sqz__prune_load(const sqz_tensor *t, float **out);

/* The output layer (o or down) of structure k in `layer`, and the width in columns of one
 * structure (head_dim or 1). NULL when the model lacks it. */
sqz_tensor *sqz__prune_out_layer(const sqz_model *m, int32_t layer, sqz_structure k, int64_t *width);

/* H + damp * mean(diag H) * I restricted to idx[0..n) (both axes) into a new (n, n) array
 * (dead inputs, H_jj == 0, get 1 on the diagonal as GPTQ does). NULL on out of memory. */
double *sqz__prune_damped(const double *h, int64_t n_in, const int64_t *idx, int64_t n, double damp);

/* ---- the pass (pass_prune.c) -------------------------------------------------------- */

#define SQZ__PRUNE_MAX_LAYERS 512

typedef struct sqz__prune_args {
    double heads, ffn;    /* fraction of each layer's heads / FFN neurons to remove */
    double params;        /* or: fraction of the attention+FFN parameters, placed by budget.c */
    double channels;      /* fraction of the hidden channels to remove (channels.c) */
    int score;            /* sqz_prune_score */
    int comp;             /* sqz_prune_comp, or -1: the score's default */
    double damp;          /* relative damping of H (obs, lsq) */
    int64_t align;        /* kept FFN widths are a multiple of this (where d_ff is) */
    /* params=: what the model step decided per layer (heads / neurons to remove) */
    int32_t plan_heads[SQZ__PRUNE_MAX_LAYERS], plan_ffn[SQZ__PRUNE_MAX_LAYERS];
} sqz__prune_args;
#define SQZ__PRUNE_N_OPTS 8

/* Hidden channels to remove from d (a->channels, aligned as FFN widths), and the whole-model
 * removal (channels.c). */
int64_t sqz__prune_channels_remove(const sqz__prune_args *a, int64_t d);
sqz_status sqz__prune_channels(sqz_pass_ctx *c, const sqz__prune_args *a);

/* Fills a->plan_heads / plan_ffn for a->params (budget.c). */
sqz_status sqz__prune_plan(sqz_pass_ctx *c, sqz__prune_args *a);
extern const sqz_opt sqz__prune_opts[SQZ__PRUNE_N_OPTS];
sqz_status sqz__prune_check(void *args, uint64_t given, const char *spec);
unsigned sqz__prune_needs(const void *args, unsigned *required);
/* The usage checks that need the model (sqz_recipe_check_model): every layer keeps a head and
 * an FFN neuron. */
sqz_status sqz__prune_check_model(const void *args, const char *spec, const sqz_model *m);
sqz_status sqz__prune_model_step(sqz_pass_ctx *c, const void *args);
sqz_status sqz__prune_block(sqz_pass_ctx *c, int32_t layer, const sqz_calib_block *stats, const void *args);

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

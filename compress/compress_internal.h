/*
 * compress/compress_internal.h - what the files of compress/ share (not public).
 */
#ifndef SQZ_COMPRESS_INTERNAL_H
#define SQZ_COMPRESS_INTERNAL_H

#include "calib/calib_internal.h"
#include "sparse/sparse_internal.h"
#include "compress/pass.h"
#include "sqz/compress.h"
#include "sqz/family.h"

/* The groups of linear layers of a block and where smoothing folds: sqz/family.h
 * (sqz_family_linear_groups), the one table of what each architecture family couples. */

/* The report's layer rows (compress/pass_quant_block.c): a row for 2-D tensor t with nothing measured
 * yet (errors NAN), and its append to rep->layers. */
void sqz__report_row_init(sqz_layer_report *r, const sqz_tensor *t);
/* The row's method: its name (+ suffix, e.g. "+gptaq") and its index in the method table. */
void sqz__report_row_method(sqz_layer_report *r, const sqz_qmethod *mt, const char *suffix);
sqz_status sqz__report_add(sqz_compress_report *rep, const sqz_layer_report *row);

/* Gives the pages of a borrowed (mapped) tensor's old bytes back to the kernel. */
void sqz__release_pages(const void *p, size_t n);

/* A partitioned solve (calib/owner.c, compress/pass_quant_share.c): rank `owner` quantized group g
 * of block `layer`, its report rows in rows->layers (the owner's; ignored elsewhere); every rank
 * calls this, and after it every rank has the group's tensors and quantized[] and to_f16[] flags
 * (by role) as the owner has them, and the rows appended to rep. Collective. */
sqz_status sqz__share_group(sqz_model *m, int32_t layer, const sqz_linear_group *g, int owner, bool *quantized,
                            bool *to_f16, const sqz_compress_report *rows, sqz_compress_report *rep);

/* Replaces tensor t's data with an owned f32 copy of values (n elements), dtype F32. */
sqz_status sqz__tensor_set_f32(sqz_model *m, sqz_tensor *t, const float *values);

/* ---- the passes: one row each, defined in the pass's own file (the table: passes.c) ---- */

extern const sqz_pass sqz__pass_drop_layers; /* pass_drop.c */
extern const sqz_pass sqz__pass_pad_ffn;     /* pass_pad.c */
extern const sqz_pass sqz__pass_quant;       /* pass_quant.c */
extern const sqz_pass sqz__pass_prune;       /* pass_prune.c */
extern const sqz_pass sqz__pass_sparsity;    /* pass_sparsity.c */
extern const sqz_pass sqz__pass_cast;        /* pass_cast.c */
extern const sqz_pass sqz__pass_rotate;      /* pass_rotate.c */

/* sqz_recipe_load's parser over the text of a recipe (len bytes, not NUL-terminated; path
 * names it in messages); r unchanged on failure (recipe.c). */
sqz_status sqz__recipe_parse(sqz_recipe *r, const char *path, const char *text, size_t len);
/* Whether stage k shares its block loop with stage k - 1: it has a block step and no whole-model
 * step, and stage k - 1 does not reshape (the pipeline's rule; pad-ffn's placement reads it too). */
bool sqz__stage_joins_previous(const sqz_recipe *r, int k);
/* Whether stage s's model_step runs (it has one, and its pass's `steps` says so for its args). */
bool sqz__stage_steps(const sqz_stage *s);

/* Every stage's link (sqz_pass.link) into links[0..r->n), zeroed first (recipe.c). */
sqz_status sqz__recipe_link(const sqz_recipe *r, sqz_stage_link *links);

/* Block `layer` compressed as sqz_compress_block, with --keep-float parsed (keep, may be NULL). */
sqz_status sqz__compress_block(sqz_model *m, int32_t layer, const sqz_calib_block *stats, const sqz_compress_opts *o,
                               const sqz_keep_float *keep, sqz_compress_report *rep);

/* A mixture's experts in block `layer` (pass_quant_experts.c): each stacked FFN_*_EXPS tensor quantized one
 * expert at a time onto its GGUF type, with per-expert importance where stats hold it; report rows added. */
sqz_status sqz__compress_experts(sqz_model *m, int32_t layer, const sqz_calib_block *stats,
                                 const sqz_compress_opts *o, const sqz_keep_float *keep, sqz_compress_report *rep);
/* Refuses, before any work, a SPEC that cannot quantize a mixture's experts (sqz's own int8/int4 layouts). */
sqz_status sqz__experts_check(const sqz_model *m, const sqz_compress_spec *sp);

/* --sparsity's joint mode (sparsity_joint.c): SparseGPT with the following quant stage's
 * options q in one sweep for the n layers t[] (f32 copies in lin[]): every result is checked (the
 * zeros dequantize to exact zeros; N:M holds on every row), validated on the sample rows of `in`
 * (2:4 INT8 layers through the sparse INT8 kernel, which must agree bit for bit with the dense
 * one), reported as the quant pass reports its layers, and attached; *zeros grows by the zeros. */
sqz_status sqz__sparsity_joint(sqz_pass_ctx *c, const sqz__sparse_opts *a, const sqz_quant_opts *q,
                               const sqz_qlinear *lin, sqz_tensor **t, int n, const sqz_calib_input *in, double ratio,
                               int64_t *zeros);

/* The quant pass's SPEC as its option rows fill it; check() turns it into an sqz_compress_spec. */
typedef struct sqz__quant_args {
    int format;  /* index into FORMATS */
    int method;  /* index into the method table (sqz_qmethods) */
    int act;     /* SQZ_ACT_CALIB_* or ACT_DYNAMIC */
    int group;   /* 32, 64, 128 */
    int asym;    /* 0 sym, 1 asym */
    int order;   /* 1 act-order, 0 no-act-order */
    int groups;  /* 1 static-groups, 0 dynamic-groups */
    double damp, alpha, pct, shrink;
    int aq;      /* 1 gptaq, 0 no-gptaq */
    double aq_alpha; /* GPTAQ's alpha */
    int mix;     /* 1 mix (llama.cpp's whole-model rules), 0 pure */
    double bpw;  /* auto: bits per parameter asked */
    int rot;     /* auto: 1 try-rotate (plan rotated too, keep the better), 0 no-rotate */
    int search;  /* 1 refine (sqz's IQ3_S search after llama.cpp's), 0 exact (llama.cpp's bytes) */
    sqz_compress_spec spec; /* the result */
} sqz__quant_args;

/* Statistics a quantization SPEC cannot run without. */
unsigned sqz__quant_required(const sqz_compress_spec *sp);
/* auto:bpw=X (compress/pass_quant_plan.c): the dtype of every block matrix, [layer * SQZ_ROLE_COUNT + role]
 * (SQZ_DTYPE_COUNT: not planned). */
typedef struct sqz_qplan {
    int32_t n_layers;
    sqz_dtype *type;
    sqz_dtype embd, out;                /* the token embedding's and output's types; SQZ_DTYPE_COUNT: the mix's */
    double bytes_target, bytes_planned; /* the whole model */
    char label[32];                     /* "greedy", "q3_k_m+" (a mix with upgrades) */
} sqz_qplan;
/* The plan of auto:bpw= for the model as it stands (measured, candidates, the calibration trial);
 * kld: NULL, or where the kept plan's trial KLD goes (then a single candidate is measured too;
 * NaN when the trial could not run: fewer than two calibration windows). */
sqz_status sqz__quant_auto_plan(sqz_pass_ctx *pc, sqz_compress_spec *sp, double *kld);
/* auto:bpw=...:try-rotate (compress/pass_quant_rotate.c): plans the model as it stands and
 * rotated (--rotate all), keeps the one whose trial measured the lower KLD (the model stays
 * rotated or is put back exactly as it was), its plan into *plan; *rotated says which. */
sqz_status sqz__quant_auto_try_rotate(sqz_pass_ctx *pc, sqz_compress_spec *sp, sqz_qplan **plan, bool *rotated);
/* --rotate all with its default seed (compress/pass_rotate.c), and whether m's family allows it
 * (the reason as the error when not). */
#define SQZ__ROTATE_SEED 1
sqz_status sqz__rotate_all(sqz_model *m);
sqz_status sqz__rotate_check_all(const sqz_model *m);
sqz_qplan *sqz__qplan_new(int32_t n_layers); /* every type SQZ_DTYPE_COUNT; NULL on out of memory */
void sqz__qplan_free(sqz_qplan *p);
/* The plan's type for t: a block matrix, or the token embedding / output; SQZ_DTYPE_COUNT if none. */
sqz_dtype sqz__qplan_type(const sqz_qplan *p, const sqz_tensor *t);
/* Bytes of every tensor of m under plan p (the mix's types for what p leaves to it). */
double sqz__qplan_bytes(const sqz_model *m, const sqz_compress_spec *sp, const sqz_qplan *p);

/* auto's guard (compress/pass_quant_trial.c). The block matrices auto measured: t[i] and its
 * layer's input statistics x2[i] (E[x^2], or NULL) for i = layer * n_roles + k, roles[k]. */
typedef struct sqz__qauto_measured {
    const sqz_qauto_tensor *t;
    float *const *x2;
    const bool *have;
    const sqz_role *roles;
    int n_roles;
    int32_t n_layers;
    const float *x2_out; /* the classifier input's E[x^2], or NULL */
} sqz__qauto_measured;
/* The largest of llama.cpp's mixes (q3_k_m, q4_k_m, q5_k_m, q4_0, q8_0) whose whole model fits
 * `target` bytes, its block matrices then upgraded greedily (most error saved per byte) with
 * what is left; *out NULL when no mix fits. */
sqz_status sqz__qplan_anchor(const sqz_model *m, const sqz_compress_spec *sp, const sqz__qauto_measured *ms,
                             double target, sqz_qplan **out);
/* Mean KLD of the model under each plan against the model as it is, on up to 8 calibration
 * windows (llama.cpp's protocol: the second half of each window scored); kld[i] NAN when fewer
 * than 2 windows. The model is restored before returning. */
sqz_status sqz__qplan_trial(sqz_pass_ctx *pc, const sqz_compress_spec *sp, const sqz__qauto_measured *ms,
                            sqz_qplan *const *plans, int n, double *kld);
/* A mix's token embedding and output, after the last block (compress/pass_quant_globals.c); head:
 * the statistics of the output's input, or NULL (then the reference quantizer rounds both). */
sqz_status sqz__quant_mix_globals(sqz_model *m, const sqz_compress_spec *sp, const sqz_type_overrides *ov, int threads,
                                  const sqz_calib_block *head, sqz_compress_report *rep);
/* The type the SPEC's mix gives tensor t of m under the overrides ov (may be NULL), as
 * llama-quantize chooses it with --token-embedding-type / --output-tensor-type / --tensor-type
 * (compress/type_overrides.c). SQZ_ERR_INVALID_ARG when a type given for the embedding or the
 * output does not fit its width. *wanted (may be NULL): the type before the width fallback. */
sqz_status sqz__mix_type(const sqz_compress_spec *sp, const sqz_type_overrides *ov, const sqz_model *m,
                         const sqz_tensor *t, sqz_dtype *out, sqz_dtype *wanted);

#endif

/*
 * compress/compress_internal.h - what the files of compress/ share (not public).
 */
#ifndef SQZ_COMPRESS_INTERNAL_H
#define SQZ_COMPRESS_INTERNAL_H

#include "calib/calib_internal.h"
#include "sqz/compress.h"
#include "sqz/family.h"

/* The groups of linear layers of a block and where smoothing folds: sqz/family.h
 * (sqz_family_linear_groups), the one table of what each architecture family couples. */

/* The report's layer rows (compress/quant_block.c): a row for 2-D tensor t with nothing measured
 * yet (errors NAN), and its append to rep->layers. */
void sqz__report_row_init(sqz_layer_report *r, const sqz_tensor *t);
sqz_status sqz__report_add(sqz_compress_report *rep, const sqz_layer_report *row);

/* Gives the pages of a borrowed (mapped) tensor's old bytes back to the kernel. */
void sqz__release_pages(const void *p, size_t n);

/* A partitioned solve (calib/owner.c, compress/quant_share.c): rank `owner` quantized group g
 * of block `layer`, its report rows in rows->layers (the owner's; ignored elsewhere); every rank
 * calls this, and after it every rank has the group's tensors and quantized[] and to_f16[] flags
 * (by role) as the owner has them, and the rows appended to rep. Collective. */
sqz_status sqz__share_group(sqz_model *m, int32_t layer, const sqz_linear_group *g, int owner, bool *quantized,
                            bool *to_f16, const sqz_compress_report *rows, sqz_compress_report *rep);

/* Replaces tensor t's data with an owned f32 copy of values (n elements), dtype F32. */
sqz_status sqz__tensor_set_f32(sqz_model *m, sqz_tensor *t, const float *values);

/* ---- passes: each pass's arguments, option rows and functions (the table: passes.c) ---- */

/* What the SPEC's parts fill; check() turns it into an sqz_compress_spec. */
typedef struct sqz__quant_args {
    int format;  /* index into FORMATS */
    int method;  /* index into the method table (sqz_qmethods) */
    int act;     /* SQZ_ACT_CALIB_* or ACT_DYNAMIC */
    int group;   /* 32, 64, 128 */
    int asym;    /* 0 sym, 1 asym */
    int order;   /* 1 act-order, 0 no-act-order */
    int groups;  /* 1 static-groups, 0 dynamic-groups */
    double damp, alpha, pct;
    int mix;     /* 1 mix (llama.cpp's whole-model rules), 0 pure */
    double bpw;  /* auto: bits per parameter asked */
    sqz_compress_spec spec; /* the result */
    bool absorbed;          /* a --sparsity sparsegpt stage quantizes these layers jointly (set per run) */
} sqz__quant_args;
#define SQZ__QUANT_N_OPTS 12
extern sqz_opt sqz__quant_opts[SQZ__QUANT_N_OPTS];
void sqz__quant_opts_init(void);
sqz_status sqz__quant_check(void *args, uint64_t given, const char *spec);
unsigned sqz__quant_needs(const void *args, unsigned *required);
sqz_status sqz__quant_block(sqz_pass_ctx *c, int32_t layer, const sqz_calib_block *stats, const void *args);
/* Statistics a quantization SPEC cannot run without. */
unsigned sqz__quant_required(const sqz_compress_spec *sp);
/* auto:bpw=X (compress/quant_auto.c): the dtype of every block matrix, [layer * SQZ_ROLE_COUNT + role]
 * (SQZ_DTYPE_COUNT: not planned). */
typedef struct sqz_qplan {
    int32_t n_layers;
    sqz_dtype *type;
    sqz_dtype embd, out;                /* the token embedding's and output's types; SQZ_DTYPE_COUNT: the mix's */
    double bytes_target, bytes_planned; /* the whole model */
    char label[32];                     /* "greedy", "q3_k_m+" (a mix with upgrades) */
} sqz_qplan;
sqz_status sqz__quant_auto_plan(sqz_pass_ctx *pc, sqz_compress_spec *sp);
sqz_qplan *sqz__qplan_new(int32_t n_layers); /* every type SQZ_DTYPE_COUNT; NULL on out of memory */
void sqz__qplan_free(sqz_qplan *p);
/* The plan's type for t: a block matrix, or the token embedding / output; SQZ_DTYPE_COUNT if none. */
sqz_dtype sqz__qplan_type(const sqz_qplan *p, const sqz_tensor *t);
/* Bytes of every tensor of m under plan p (the mix's types for what p leaves to it). */
double sqz__qplan_bytes(const sqz_model *m, const sqz_compress_spec *sp, const sqz_qplan *p);

/* auto's guard (compress/quant_auto_trial.c). The block matrices auto measured: t[i] and its
 * layer's input statistics x2[i] (E[x^2], or NULL) for i = layer * n_roles + k, roles[k]. */
typedef struct sqz__qauto_measured {
    const sqz_qauto_tensor *t;
    float *const *x2;
    const bool *have;
    const sqz_role *roles;
    int n_roles;
    int32_t n_layers;
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
/* A mix's token embedding and output, after the last block (compress/quant_mix.c). */
sqz_status sqz__quant_mix_globals(sqz_model *m, const sqz_compress_spec *sp, sqz_compress_report *rep);
/* The SPEC of a quant stage, or NULL for a stage of another pass. */
const sqz_compress_spec *sqz__quant_stage_spec(const sqz_stage *s);

/* --pad-ffn M: zero neurons up to a multiple of M (compress/pass_pad.c). */
typedef struct sqz__pad_args {
    int64_t multiple;
} sqz__pad_args;
#define SQZ__PAD_N_OPTS 1
extern const sqz_opt sqz__pad_opts[SQZ__PAD_N_OPTS];
sqz_status sqz__pad_model_step(sqz_pass_ctx *c, const void *args);

/* --drop-layers: explicit blocks (LIST), or N / P% blocks chosen by a method of layerdrop/
 * (sqz/layerdrop.h), optionally iterative and compensated. */
typedef struct sqz__drop_args {
    const char *list;     /* as given (points into the stage's SPEC copy only during parsing) */
    int method;           /* sqz_layerdrop_method; SQZ_LAYERDROP_LIST: `layers` are the blocks */
    bool iterative;
    int compensation;     /* 0 none, 1 replaceme */
    bool all_scores;      /* measure every block's KLD for the report too */
    int64_t seed, kld_windows;
    double ridge;
    int32_t count;        /* a method: N blocks, or 0 when given as a percentage */
    double percent;       /* a method: P of "P%" (N = round(P / 100 x blocks)), else 0 */
    int32_t layers[256];  /* LIST: the blocks to remove, sorted, distinct */
    int n;
} sqz__drop_args;
#define SQZ__DROP_N_OPTS 8
extern const sqz_opt sqz__drop_opts[SQZ__DROP_N_OPTS];
sqz_status sqz__drop_check(void *args, uint64_t given, const char *spec);
sqz_status sqz__drop_model_step(sqz_pass_ctx *c, const void *args);

#endif

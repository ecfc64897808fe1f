/*
 * compress/compress_internal.h - what the files of compress/ share (not public).
 */
#ifndef SQZ_COMPRESS_INTERNAL_H
#define SQZ_COMPRESS_INTERNAL_H

#include "calib/calib_internal.h"
#include "sqz/compress.h"

/* The groups of linear layers of a block and where smoothing folds: sqz/family.h
 * (sqz_family_linear_groups), the one table of what each architecture family couples. */

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
    double bytes_target, bytes_planned; /* the whole model */
} sqz_qplan;
sqz_status sqz__quant_auto_plan(sqz_pass_ctx *pc, sqz_compress_spec *sp);
void sqz__qplan_free(sqz_qplan *p);
sqz_dtype sqz__qplan_type(const sqz_qplan *p, const sqz_tensor *t);
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

/*
 * compress/pass.h - a pass's row and the context its slots run in (not public: sqz/compress.h
 * says what a client sees of a pass, sqz_pass_describe). Every pass defines its row in its own
 * file (compress/pass_*.c); compress/passes.c lists the rows.
 */
#ifndef SQZ_COMPRESS_PASS_H
#define SQZ_COMPRESS_PASS_H

#include "sqz/compress.h"

struct sqz_keep_float;

/* What the stages of one run record about each other (sqz_pass.link). */
typedef struct sqz_stage_link {
    const struct sqz_stage *joint; /* this stage works jointly with that stage (its SPEC), or NULL */
    bool absorbed;                 /* another stage does this stage's work: its run_block is not called */
} sqz_stage_link;

typedef struct sqz_pass_ctx {
    sqz_model *m;
    const struct sqz_compress_opts *o;  /* policy, keep_float, sample_rows */
    sqz_compress_report *rep;
    const sqz_calib_windows *w;         /* calibration windows, or NULL */
    sqz_stage_report *stage;            /* this stage's row of the report (its note) */
    const sqz_session_opts *session_opts; /* for a whole-model step that runs the model itself
                                             (max_tokens is set from the windows it runs) */
    void *state;                        /* this stage's run-time state (pass->state_size bytes, zeroed at
                                           the start of the run; NULL when state_size is 0) */
    const struct sqz_stage *joint;      /* the stage a link joined this one with, or NULL */
    const struct sqz_keep_float *keep;  /* o->keep_float, parsed once for the run */
    bool changed;                       /* set by a model_step that changed stored tensors without
                                           `reshapes` being true of its pass: the loop after it
                                           calibrates on a fresh session */
} sqz_pass_ctx;

struct sqz_pass {
    const char *name;        /* "quant", "drop-layers" */
    const char *metavar;     /* "SPEC", "LIST" */
    const char *summary;     /* one line */
    const char *examples;    /* SPECs, space-separated */
    const char *label;       /* how parse errors name a SPEC of this pass ("SPEC"); NULL: "--NAME" */
    const sqz_opt *opts;     /* the SPEC's parts */
    int n_opts;
    size_t args_size;        /* bytes of the struct the options fill (and `check` completes) */
    size_t state_size;       /* bytes of the run-time state (pass_ctx.state); 0: none */
    bool reshapes;           /* changes tensor shapes or the number of layers */
    bool changes_widths;     /* may change FFN widths (the widths a later stage sees are known only then) */
    bool pads_ffn;           /* pads FFN widths itself (sqz_recipe_pad_for_quant adds no stage then) */
    /* Fills what the option rows cannot say statically (choices from another table); called by
     * sqz_passes, idempotent and thread-safe. May be NULL. */
    void (*init)(void);
    /* Cross-option rules and derived fields, after the generic parse; `given` has bit i for
     * every option row i given. `spec` labels errors. May be NULL. */
    sqz_status (*check)(void *args, uint64_t given, const char *spec);
    /* The usage checks that need the model (sqz_recipe_check_model): s is the stage, m the model
     * as given, *n_layers the blocks it has when this stage runs (a stage that removes blocks
     * lowers it), have_windows whether calibration text was given. May be NULL. */
    sqz_status (*check_model)(const struct sqz_stage *s, const sqz_model *m, int64_t *n_layers, bool have_windows);
    /* The usage checks of an output that holds one set of layer dims for the whole model (an HF
     * config.json, whose transformers classes also want hidden_size a multiple of the heads),
     * before any work (sqz_recipe_check_uniform): refuses, naming the reason and the way out, a
     * stage whose result it could not hold. m is the model as given. May be NULL: the stage
     * leaves alike layers alike. */
    sqz_status (*check_uniform)(const struct sqz_stage *s, const sqz_model *m);
    /* The stages around stage k of r: records in links[] what it does with them (joint work) or
     * refuses an order it cannot run. Called before every run and by sqz_recipe_check_model.
     * May be NULL. */
    sqz_status (*link)(const struct sqz_recipe *r, int k, sqz_stage_link *links);
    /* Statistics run_block reads (SQZ_QSTAT_*); *required gets those it cannot run without.
     * NULL: none. */
    unsigned (*needs)(const void *args, unsigned *required);
    /* A quantization stage's SPEC (the format it writes, its method), or NULL: the accessor
     * through which the CLI, the recipe and other stages see it. May be NULL (not a quant pass). */
    const sqz_compress_spec *(*quant_spec)(const void *args);
    /* Whether run_block may solve each linear input's layers on that input's owner rank alone
     * (distributed calibration, docs/distributed.md): it changes no other layer. NULL: no. */
    bool (*partitions)(const void *args);
    sqz_status (*model_step)(sqz_pass_ctx *c, const void *args);
    /* Whether model_step runs for these args (a stage whose step does not run may share the block
     * loop of the stage before it). NULL: always, when model_step is set. */
    bool (*steps)(const void *args);
    sqz_status (*run_block)(sqz_pass_ctx *c, int32_t layer, const sqz_calib_block *stats, const void *args);
    /* Once after the last block of the loop, with the statistics of the classifier's input (the
     * final norm's output on the compressed model; sqz_calib_run_opts.head), or NULL where there
     * are none (no calibration, a statistics file without them, an encoder). May be NULL. */
    sqz_status (*run_head)(sqz_pass_ctx *c, const sqz_calib_block *stats, const void *args);
    /* Frees what the run left in the state (also after a failure). May be NULL. */
    void (*fini)(void *state);
};

#endif

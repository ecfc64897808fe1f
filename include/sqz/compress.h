/*
 * sqz/compress.h - the compression pipeline: a table of passes (quantization, and the
 * structural passes: layer removal, pruning), recipes of ordered stages, the sequential
 * block loop that runs them on calibration windows, and the report.
 */
#ifndef SQZ_COMPRESS_H
#define SQZ_COMPRESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sqz/api.h"
#include "sqz/calib.h"
#include "sqz/layerdrop.h"
#include "sqz/model.h"
#include "sqz/options.h"
#include "sqz/quant.h"
#include "sqz/runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ======================================================================================
 * compress: SPEC, one block, the whole model, the report
 * ====================================================================================== */

/*
 * SPEC grammar (parts separated by ':'; the first names the format, the others are options
 * in any order; an unknown or misplaced part is an error naming it):
 *   SPEC    := FORMAT (':' PART)*
 *   FORMAT  := int8        INT8 per output channel, weight-only (W8A16)
 *            | w8a8        INT8 weights per channel + INT8 activations
 *            | int4        INT4 per group (sqz's U4 layout), default g128, symmetric
 *            | q8_0 | q4_0 | q4_1   GGUF blocks of 32 (llama.cpp's exact grids)
 *   PART    := METHOD | ACT | 'g32' | 'g64' | 'g128' | 'sym' | 'asym' | 'act-order'
 *            | 'no-act-order' | 'static-groups' | 'dynamic-groups' | 'damp=' NUMBER | 'gptaq'
 *            | 'no-gptaq' | 'gptaq-alpha=' NUMBER | 'alpha=' NUMBER
 *            | 'pct=' NUMBER
 *   METHOD  := rtn | imatrix | gptq | awq | smoothquant       (default rtn)
 *   ACT     := minmax | percentile | entropy | dynamic         (w8a8 only; default minmax)
 * Examples: int8, w8a8, w8a8:percentile, w8a8:smoothquant, w8a8:smoothquant:alpha=0.5,
 * int4:rtn:g128, int4:awq:g64, int4:gptq:g128:act-order:asym, q8_0, q4_0:imatrix,
 * q4_0:gptq, q4_1:awq.
 * Group size and sym/asym apply to int4 only; smoothquant needs w8a8; imatrix needs q4_0 or
 * q4_1; alpha (SmoothQuant's fixed migration strength; default: searched per layer) needs
 * smoothquant; pct (the percentile, default 99.99) needs percentile; damp (GPTQ's relative
 * damping, default 0.01) needs gptq; so do act-order (the default: columns by decreasing
 * Hessian diagonal), no-act-order, static-groups (the default: grids from the original weights,
 * natural column groups) and dynamic-groups (grids built as the columns are reached; with
 * act-order, int4 then records every column's group in g_idx, AutoGPTQ's desc_act); so do gptaq
 * (GPTAQ: fit the original model's outputs, from a second stream through the original blocks;
 * q.gptaq, and sqz_compress_needs then includes SQZ_QSTAT_DXXT), no-gptaq (the default) and
 * gptaq-alpha= (its weight, 0.25; giving it turns GPTAQ on).
 */
typedef struct sqz_compress_spec {
    char text[128];             /* the SPEC as given */
    const sqz_qmethod *method;  /* from sqz_qmethod_find */
    sqz_quant_opts q;           /* target, act_mode / act_calib, method options */
    const sqz_qmix *mix;        /* a whole-model type mix (q4_k_m, q4_0:mix, ...; quant/mix.c), or NULL:
                                   every matrix q.target */
    double auto_bpw;            /* auto:bpw=X: the size asked, bits per parameter of the whole model; else 0 */
    double auto_params;         /* auto: the parameters auto_bpw counts; 0: the model's as the stage finds it
                                   (try-rotate gives the rotated plan the unrotated model's bytes) */
    struct sqz_qplan *plan;     /* auto: the type of every block matrix, made at block 0 of a run (owned by
                                   the quant stage's run-time state; NULL in a parsed SPEC) */
} sqz_compress_spec;

/* Parses a SPEC. Errors: SQZ_ERR_INVALID_ARG with a message naming the offending part
 * ("SPEC 'int4:gptq:g96': unknown part 'g96' (group sizes: g32, g64, g128)"). */
SQZ_API sqz_status sqz_compress_spec_parse(const char *spec, sqz_compress_spec *out);

/* The layers a method treats together, in the order they are compressed (smoothing of a
 * later group may be folded into an earlier group's weights, so down comes before gate|up). */

/* One linear layer in the report. */
typedef struct sqz_layer_report {
    char tensor[96];        /* the tensor's name */
    int32_t layer;
    sqz_role role;
    bool quantized;
    char method[16];        /* "gptq", "awq", ...; "float" when kept */
    int32_t qmethod;        /* the index in sqz_qmethods()' table of the method that rounded it (a mixture's stacked
                               experts: the one most of its experts took), for callers that ask the method's
                               columns (hessian, rowwise, needs) rather than its name; -1 when no method row did
                               (kept, copied, sparsegpt) */
    char format[16];        /* sqz_qformat_name, or the kept dtype's name */
    char why[64];           /* why it stayed float, or "" */
    int64_t n_out, n_in;
    double bits_per_weight; /* storage bits of this weight (scales etc. included) */
    double out_err;         /* ||Y_q - Y||_F / ||Y||_F on the calibration sample rows (the layer
                               run through the CPU kernels as it would run); NaN if no rows */
    double weight_err;      /* ||W_q - W||_F / ||W||_F */
    char validated_by[24];  /* the kernel out_err was measured with: "cpu:sgemm", "cpu:gemm_i8",
                               "cuda:gemm_i8", "cuda:gemm_w4a16", "cuda:matmul" (dequantized) */
    double seconds;         /* method time for this matrix (shared time split evenly) */
    float alpha;            /* AWQ / SmoothQuant exponent, else 0 */
    float act_scale;        /* W8A8 static activation scale, else 0 */
    double heldout_gptq, heldout_imatrix; /* a mix's GPTQ-or-imatrix choice: each candidate's relative
                               output error on the sample rows, both fitted without them; NaN when
                               not judged so */
    char source_format[16]; /* the dtype the source stored (a quantized one: this layer was requantized) */
    char fallback_from[16]; /* a mix's type for this layer before the width fallback took another
                               (llama-quantize's "required fallback quantization"); "" when none */
} sqz_layer_report;

typedef struct sqz_block_report {
    int32_t layer;
    double cos_mean, cos_min;  /* block input/output similarity on the calibration windows */
    double seconds;            /* compressing this block (methods, folding, validation) */
    int64_t n_expert;          /* a mixture's block with statistics: its experts, and the tokens the */
    float *expert_tokens;      /* router sent each on the calibration (or llama-imatrix's counts), owned;
                                  0 and NULL otherwise */
} sqz_block_report;

/* What the compressed model cost, measured against the original on held-out text
 * (`sqz compress --eval TEXT`, sqz_compress_eval). */
typedef struct sqz_compress_eval {
    bool done;                 /* false: not evaluated */
    bool encoder;              /* encoder (BERT): cosine of the embeddings instead of ppl/KLD */
    char text[256];            /* the evaluated text's path (label) */
    int64_t ctx;               /* chunk length in tokens */
    int64_t n_chunks;          /* chunks evaluated */
    int64_t n_held_out;        /* chunks skipped because they overlap a calibration window */
    int64_t held_windows, held_ctx; /* the calibration windows held out (0: none were given): */
    uint64_t held_seed;        /* `sqz eval --hold-out N:T:SEED` holds out the same chunks */
    char tokenizer[256];       /* the tokenizer file the models were opened with ("": their own) */
    int64_t tokens_scored;
    double ppl_base, ppl, delta_ppl;   /* perplexity of the original, of the result, difference */
    double kld_mean, kld_p99;  /* KL(original || result) per token, nats */
    double top1;               /* fraction of tokens where both predict the same next token */
    double cos_mean, cos_min;  /* encoders: embedding cosine similarity over sentences */
    double seconds;
} sqz_compress_eval;

/* The result against the original on tasks (`sqz compress --eval-task KIND FILE`,
 * sqz_compress_eval_tasks; sqz/tasks.h): each model's accuracy, the delta and McNemar's test. */
typedef struct sqz_compress_tasks {
    bool done;
    char kind[24], file[256];
    int64_t n, correct, correct_base, ties;
    double accuracy, ci_lo, ci_hi, accuracy_base, ci_base_lo, ci_base_hi;
    double delta, p_value, agree; /* accuracy - accuracy_base, McNemar's exact p, same choices */
    bool has_norm;                /* jsonl: acc_norm too */
    int64_t correct_norm, correct_norm_base;
    double delta_norm, p_norm;
    double seconds;
} sqz_compress_tasks;

typedef struct sqz_compress_report {
    char spec[128];
    sqz_layer_report *layers;  /* n_layers entries (owned) */
    int64_t n_layers;
    sqz_block_report *blocks;  /* n_blocks entries (owned) */
    int64_t n_blocks;
    int64_t bytes_before;      /* tensor data of the model before (tied tensors once) */
    int64_t bytes_after;
    int64_t params;            /* parameters of the model */
    int64_t params_quantized;  /* parameters in quantized matrices */
    double bits_quantized;     /* storage bits of the quantized matrices */
    double bpw_quantized;      /* bits_quantized / params_quantized */
    double bpw_model;          /* 8 * bytes_after / params_after */
    double seconds_total;      /* the whole sqz_compress_model call */
    double seconds_forward;    /* forward passes and observers */
    double seconds_quant;      /* the methods */
    double seconds_validate;
    int64_t activation_bytes;  /* the driver's buffer X */
    int64_t n_windows, ctx;    /* calibration (0 without) */
    sqz_compress_eval eval;    /* the result against the original (eval.done false when not run) */
    char recipe[512];          /* the stages in order, "drop-layers 2, quant q4_0:gptq" */
    struct sqz_stage_report *stages; /* n_stages entries (owned), one per stage run */
    int64_t n_stages;
    int64_t n_layers_before, n_layers_after; /* blocks of the model before and after */
    int64_t params_after;      /* parameters of the result (fewer after structural stages) */
    sqz_layerdrop_result *layerdrop; /* the last drop-layers stage that measured (scores, choice,
                                        compensation; sqz/layerdrop.h), owned; NULL if none */
    struct sqz_prune_record *prune; /* the last prune stage: per layer what it removed and the
                                       scores it chose by (sqz/prune.h), owned; NULL if none */
    int ranks;                 /* MPI ranks that calibrated (1 alone; docs/distributed.md) */
    int64_t stats_peak_bytes;  /* most bytes of calibration statistics this rank held at once */
    int64_t stats_peak_max_bytes; /* the same, the most of any rank of an MPI job */
    uint64_t bytes_sent;       /* bytes this rank sent to the other ranks */
    char device[24];           /* the backend calibration ran on ("cpu", "cuda"), set by the caller */
    int64_t device_peak_bytes; /* its memory accounting (sqz_backend_mem): the most it held, and */
    int64_t device_cap_bytes;  /* the cap (0: none); both 0 on the CPU */
    sqz_compress_tasks tasks;  /* the result against the original on tasks (tasks.done false: not run) */
} sqz_compress_report;

/* One stage of the recipe in the report. */
typedef struct sqz_stage_report {
    char pass[24];             /* the pass's name */
    char spec[256];            /* its SPEC as given */
    double seconds;            /* its whole-model step and its share of the block loop */
    char note[512];            /* what the stage did, in words ("removed blocks 2 (5 -> 4)") */
    /* a quantization stage (one whose SPEC sqz_stage_quant_spec gives), as that SPEC parsed; false and zero
     * for a stage of another pass: */
    bool quantizes;            /* the stage quantizes: qtarget and qmix below say to what */
    sqz_qtarget qtarget;       /* the SPEC's format and group (a mix: its base type's) */
    bool qmix;                 /* the SPEC names a whole-model type mix (q4_k_m, q4_0:mix, auto:bpw=); false: every
                                  block matrix in qtarget (a ':pure' K-quant, int4, ...) */
} sqz_stage_report;

SQZ_API void sqz_compress_report_free(sqz_compress_report *r);

/* llama-quantize's per-tensor type overrides on top of a whole-model mix (compress/type_overrides.c,
 * docs/quantization.md): the token embedding's and the output's type, and PATTERN=TYPE items
 * matched in order (the first found anywhere in a tensor's GGUF name, blk.N.ROLE.weight, wins;
 * PCRE2 syntax, the pattern lowercased as llama-quantize does). Opaque; created and freed by the
 * caller, read by the quantization pass. */
typedef struct sqz_type_overrides sqz_type_overrides;

/* Parses and compiles the overrides: token_embd and output are type names or NULL (not given),
 * items[0..n_items) are "PATTERN=TYPE" strings; a TYPE is a GGUF block type sqz writes (q8_0,
 * q4_0, q4_1, q5_0, q5_1, q2_k ... q6_k, any case). Errors: SQZ_ERR_INVALID_ARG naming the option
 * and the item (an unknown or float type, no '=', a pattern that does not compile, with PCRE2's
 * reason), SQZ_ERR_NOMEM. On success *out is the caller's (sqz_type_overrides_free). */
SQZ_API sqz_status sqz_type_overrides_new(const char *token_embd, const char *output, const char *const *items,
                                          int n_items, sqz_type_overrides **out);
/* NULL is fine. */
SQZ_API void sqz_type_overrides_free(sqz_type_overrides *ov);

typedef struct sqz_compress_opts {
    sqz_compress_spec spec;
    sqz_quant_policy policy;
    const char *keep_float;  /* comma-separated list of what stays float beyond the policy:
                                role names (attn_q, ffn_down, ...), "blk.N" (a whole block) or
                                "blk.N.role"; NULL for none (sqz_keep_float_parse: an item that
                                names nothing is an error of the run) */
    int64_t sample_rows;     /* rows kept per input for the searches and validation; 512 */
    sqz_progress_fn progress; /* optional, done / total in blocks */
    void *progress_user;
    sqz_calib_partition stats_partition; /* under mpirun: how the ranks combine statistics */
    const sqz_type_overrides *overrides; /* per-tensor types on top of the SPEC's mix, or NULL (the
                                            caller's; a SPEC without a mix ignores them) */
    sqz_backend *backend;    /* borrowed: where the Hessians, GPTQ's factor and updates and the layer
                                validation run (`--device`; docs/device.md); NULL or the CPU backend:
                                the host's arithmetic */
    int threads;             /* the methods' threads (GPTQ's row sweep); 0 = all online cores */
    const struct sqz_keep_float *keep_parsed; /* keep_float already parsed against the model by the
                                                 caller (sqz_keep_float_parse), which sqz_compress_run
                                                 then uses as is; NULL: the run parses keep_float */
} sqz_compress_opts;

/* --keep-float LIST parsed once: every item a role (attn_v, ffn_down, ... in every block),
 * "blk.N" (every tensor of block N) or "blk.N.ROLE". */
#define SQZ_KEEP_FLOAT_MAX 64
typedef struct sqz_keep_float {
    int n;
    struct {
        int32_t layer;  /* the block, or -1: every block */
        sqz_role role;  /* the role, or SQZ_ROLE_COUNT: every role of the block */
    } items[SQZ_KEEP_FLOAT_MAX];
} sqz_keep_float;

/* Parses list (NULL or "" : no item) into *out. With m non-NULL every item must name at least one
 * tensor of m (a block it has, a role it has there). Errors: SQZ_ERR_INVALID_ARG naming the item
 * ("--keep-float: 'blk.99' names no tensor of the model (blocks 0..4)", "'atn_v' is not a role
 * (attn_v, ffn_down, ...), blk.N or blk.N.ROLE"); more than SQZ_KEEP_FLOAT_MAX items. */
SQZ_API sqz_status sqz_keep_float_parse(const char *list, const sqz_model *m, sqz_keep_float *out);
/* Whether k (may be NULL) names tensor t. */
SQZ_API bool sqz_keep_float_match(const sqz_keep_float *k, const sqz_tensor *t);

/* spec = int8 (rtn), the default policy, no keep_float, sample_rows 512. */
SQZ_API sqz_compress_opts sqz_compress_default_opts(void);

/* What statistics the SPEC needs (SQZ_QSTAT_*), sample rows for validation included. */
SQZ_API unsigned sqz_compress_needs(const sqz_compress_spec *spec);

/* Compresses block `layer` of m from its statistics (stats may be NULL for methods that need
 * none; then there is no validation on activations). The linear layers are quantized in
 * groups that share an input (o, down, q|k|v, gate|up: a smoothing vector of down is folded
 * into up's rows before gate|up is quantized); smoothing vectors are folded into the norm
 * before q|k|v and gate|up, into v's rows before o when n_heads == n_kv_heads, and kept as
 * the layer's in_scale otherwise (sqz formats) or not searched (GGUF formats: AWQ's scale
 * search is skipped for that group, its clipping search still runs). Results are attached to
 * the model (sqz_qmatrix_attach); rows are appended to rep->layers. */
SQZ_API sqz_status sqz_compress_block(sqz_model *m, int32_t layer, const sqz_calib_block *stats,
                                      const sqz_compress_opts *o, sqz_compress_report *rep);

/* The whole model: with windows (s and w non-NULL) block by block on the calibration windows
 * with recomputation (sqz_calib_run), or from a statistics file (stats non-NULL; no forward
 * pass), or, for methods that need no statistics, without either (validation then reports
 * weight errors only). *rep is filled (caller frees with sqz_compress_report_free) also on
 * failure, with what was done. Errors: SQZ_ERR_INVALID_ARG when the method needs statistics
 * that were not given or the file lacks (the message says which), the driver's and the
 * methods' errors. */
SQZ_API sqz_status sqz_compress_model(sqz_model *m, sqz_session *s, const sqz_calib_windows *w,
                                      const sqz_calib_stats *stats, const sqz_compress_opts *o,
                                      sqz_compress_report *rep);

/* The report as JSON text ({"spec", "totals": {...}, "layers": [...], "blocks": [...]}, field
 * names as in the structs above). model and out label the paths (may be NULL). Returns a
 * malloc'd string (caller frees) or NULL on out of memory. */
SQZ_API char *sqz_compress_report_json(const sqz_compress_report *r, const char *model, const char *out);
/* What the report's layers say a llama.cpp user asks about (also in the JSON's totals):
 * *fallbacks, the layers a mix gave another type than its rules asked because the width does not
 * fit the block (fallback_from set; llama-quantize's "required fallback quantization"), and
 * *requantized, the layers quantized from a source that stored them block-quantized already
 * (rounded again from their dequantized values; llama-quantize refuses that without
 * --allow-requantize). Either pointer may be NULL. */
SQZ_API void sqz_compress_report_counts(const sqz_compress_report *r, int64_t *fallbacks, int64_t *requantized);

/* ======================================================================================
 * The pipeline: a table of passes, recipes of stages, one run
 * ====================================================================================== */

/*
 * A pass is one row of the pass table (compress/passes.c lists the rows; each pass defines its
 * row in its own file, compress/pass_*.c): its name (the command-line flag "--NAME SPEC" and the
 * recipe's stage key), its options declared as data (sqz/options.h: the SPEC is parsed by the
 * one generic parser, and --help is generated from the same rows), the statistics it needs, how
 * it is checked against the model and the stages around it, and what it does:
 *   model_step   optional, once, on the whole model before the block loop (passes that decide
 *                across layers: layer removal, a global pruning budget); it may change the
 *                model's structure (then `reshapes`).
 *   run_block    optional, block by block inside the sequential calibration loop: block l is
 *                compressed from statistics collected on the output of the already compressed
 *                blocks 0..l-1.
 *   run_head     optional, after the last block: the token embedding and the classifier, with
 *                the statistics of the classifier's input on the compressed blocks' output.
 * Stages run in recipe order. Consecutive stages with run_block share one calibration loop
 * (each block: every stage's run_block in order, then the block is recomputed), except that a
 * stage that reshapes ends its loop: the next stage calibrates again on the changed model.
 * A whole-model step is a barrier between loops.
 *
 * A stage's parsed options (its args) never change once parsed: what a run decides (a plan, the
 * counts of its note) lives in the run's state for that stage (pass_ctx.state, state_size bytes,
 * zeroed when a run starts, given to fini when it ends), and what one stage does for another (a
 * joint sweep) is recorded by `link` in the run's table of stage links, never in the other
 * stage's args. Nothing outside the pass table recognises a pass by its name or its functions:
 * what the pipeline, the recipe checks and the CLI need to know is a field or a slot of the row.
 */

/* A pass (a row of the pass table). Its definition, with the run-time context and the slots that
 * do the work, is the library's (compress/pass.h): a client lists the passes, reads what --help
 * says of them and adds stages by name; it cannot register a pass. */
typedef struct sqz_pass sqz_pass;

/* What --help and the recipe's errors say of a pass: the flag "--NAME METAVAR", a one-line
 * summary, example SPECs (space-separated), and the option rows its SPEC is parsed with
 * (sqz/options.h). The strings are static. */
typedef struct sqz_pass_help {
    const char *name;        /* "quant", "drop-layers" */
    const char *metavar;     /* "SPEC", "LIST" */
    const char *summary;     /* one line */
    const char *examples;    /* SPECs, space-separated */
    const sqz_opt *opts;     /* the SPEC's parts */
    int n_opts;
} sqz_pass_help;
SQZ_API sqz_pass_help sqz_pass_describe(const sqz_pass *p);

/* The pass table (static, *n gets its length) and a lookup by name (NULL if none). */
SQZ_API const sqz_pass *const *sqz_passes(int *n);
SQZ_API const sqz_pass *sqz_pass_find(const char *name);

/* One stage: a pass with its parsed options. */
typedef struct sqz_stage {
    const sqz_pass *pass;
    char spec[256];          /* the SPEC as given (a recipe's object form is turned into one) */
    void *args;              /* pass->args_size bytes, owned */
} sqz_stage;

typedef struct sqz_recipe {
    sqz_stage *stages;       /* n entries, owned */
    int n;
} sqz_recipe;

/* Appends a stage: parses spec with the pass's option table and check. Errors:
 * SQZ_ERR_INVALID_ARG naming the pass ("unknown pass 'prun' (quant, drop-layers)") or the
 * bad part of the SPEC and what is allowed; SQZ_ERR_NOMEM. r is unchanged on failure. */
SQZ_API sqz_status sqz_recipe_add(sqz_recipe *r, const char *pass, const char *spec);

/*
 * Appends the stages of a JSON recipe file:
 *   {"sqz_recipe": 1,
 *    "stages": [ {"drop-layers": "2"},
 *                {"quant": "q4_0:gptq"},
 *                {"quant": {"format": "int4", "method": "gptq", "group": "g64", "damp": 0.02}} ]}
 * Each stage is an object with one key, the pass; its value is the SPEC, or an object of the
 * pass's options by name (strings, numbers, true for a flag), which is the same as the SPEC
 * "int4:method=gptq:group=g64:damp=0.02". Unknown keys are errors. Errors: SQZ_ERR_IO,
 * SQZ_ERR_FORMAT naming the file and the stage, the stages' parse errors.
 */
SQZ_API sqz_status sqz_recipe_load(sqz_recipe *r, const char *path);
/* The recipe as JSON in the form above (SPEC strings): malloc'd, NULL on out of memory. */
SQZ_API char *sqz_recipe_json(const sqz_recipe *r);
/* Frees the stages. NULL is fine. */
SQZ_API void sqz_recipe_free(sqz_recipe *r);
/* The statistics stage s reads (SQZ_QSTAT_*); *required (may be NULL) gets those it cannot run
 * without. 0 for a stage that reads none. */
SQZ_API unsigned sqz_stage_needs(const sqz_stage *s, unsigned *required);
/* The SPEC of a quantization stage (its pass has quant_spec), or NULL for a stage of another pass. */
SQZ_API const sqz_compress_spec *sqz_stage_quant_spec(const sqz_stage *s);

/* Usage checks of a recipe that need the model (the CLI runs them before anything is computed,
 * and reports a failure as a usage error): a drop-layers stage with a method must leave a block
 * (its N or P% below the blocks the model has at that stage; an explicit LIST is checked when
 * the stage runs, as bad input for that model) and, when it measures
 * (bi, angular, kld, replaceme, all-scores), needs calibration windows (have_windows); a
 * prune stage must leave every layer a head and an FFN neuron.
 * Errors: SQZ_ERR_INVALID_ARG naming the stage's SPEC and the part. */
SQZ_API sqz_status sqz_recipe_check_model(const sqz_recipe *r, const sqz_model *m, bool have_windows);

/*
 * Whether an output with one set of layer dims for the whole model (HF safetensors + config.json)
 * can hold what r makes of m: m's layers agree (heads, KV heads, FFN width), every stage's
 * check_uniform passes, and no int8/int4 quant stage meets a family whose HF files fuse projections
 * (sqz_family_info.hf_fused: Phi-3). Returns SQZ_OK, or SQZ_ERR_INVALID_ARG with one line naming the stage (or
 * the model), the reason and the way out (GGUF, or the stage's option that keeps layers alike).
 */
SQZ_API sqz_status sqz_recipe_check_uniform(const sqz_recipe *r, const sqz_model *m);

/* Odd FFN widths quantized, not skipped: when a quant stage's group (32 for q4_0, 256 for the
 * K-quants, the int4 group) divides d_model (gate and up are quantized too) but not some layer's
 * FFN width of m (or a prune stage comes first), inserts a "pad-ffn" stage with the largest such
 * group before that stage's block loop (compress/pass_pad.c: zero neurons, exact). Nothing when the recipe already has a pad-ffn
 * stage. *inserted (may be NULL) gets the new stage's index, or -1. SQZ_ERR_NOMEM. */
SQZ_API sqz_status sqz_recipe_pad_for_quant(sqz_recipe *r, const sqz_model *m, int *inserted);

/* Where the statistics come from, and how to run the model. */
typedef struct sqz_compress_env {
    const sqz_calib_windows *windows; /* calibrate on these (sequentially), or NULL */
    sqz_session *session;       /* optional live session over the model, used while its structure
                                   is unchanged (else one is made from session_opts) */
    sqz_session_opts session_opts; /* for sessions the pipeline makes (max_tokens: windows' ctx) */
    const sqz_calib_stats *stats; /* or statistics from `sqz calibrate` (only before any stage
                                     that reshapes: they describe the original model) */
} sqz_compress_env;

/* Runs the recipe on m (in place). The quantization stage of a one-stage recipe behaves
 * exactly as sqz_compress_model. *rep is filled (free with sqz_compress_report_free) also on
 * failure, with what was done. Errors: SQZ_ERR_INVALID_ARG when a stage needs statistics that
 * were not given (the message says which and how to get them), the passes' errors. */
SQZ_API sqz_status sqz_compress_run(sqz_model *m, const sqz_recipe *r, const sqz_compress_env *env,
                                    const struct sqz_compress_opts *o, sqz_compress_report *rep);

/* ======================================================================================
 * Evaluation against the original (sqz compress --eval TEXT)
 * ====================================================================================== */

typedef struct sqz_compress_eval_opts {
    int64_t ctx;              /* decoders: chunk length, 0 = 512; encoders: longest sentence in
                                 tokens, 0 = 256; a default is capped by the original's ctx_len */
    int64_t max_chunks;       /* evaluate at most this many chunks (encoders: sentences) after the
                                 held-out ones are skipped; 0 = all */
    int threads;              /* the sessions' threads; 0 = all online cores */
    sqz_backend *backend;     /* borrowed; NULL = each session makes its own CPU backend */
    sqz_progress_fn progress; /* optional: done / total in tokens (decoders) or sentences (encoders) */
    void *progress_user;
    const char *tokenizer;    /* optional: the tokenizer file the models were opened with, for the
                                 command that reproduces the figures (sqz_compress_eval_command) */
} sqz_compress_eval_opts;

/* Everything 0 / NULL: the defaults above. */
SQZ_API sqz_compress_eval_opts sqz_compress_eval_default_opts(void);

/* The `sqz eval` command line that reproduces a decoder's evaluation e of the result written
 * to `out` against the original `model`: --ctx and --chunks as evaluated, and --hold-out
 * N:T:SEED when calibration windows were held out (paths quoted for a POSIX shell where
 * needed). Writes at most cap bytes with a terminating NUL (cap >= 1); returns the length it
 * needs, as snprintf, or 0 when there is no such command: not evaluated, or an encoder whose
 * held-out sentences `sqz eval` cannot select (then buf is ""). */
SQZ_API size_t sqz_compress_eval_command(const sqz_compress_eval *e, const char *model, const char *out, char *buf,
                                         size_t cap);

/*
 * Evaluates `compressed` against `original` on a text and fills *out (out->done true), with
 * one session per model (made and freed here, o->ctx positions each):
 *   decoders: sqz_eval_perplexity of the compressed model with the original as a live base,
 *     llama.cpp's protocol (the text tokenized once with BOS, chunks of ctx tokens, the second
 *     half of each scored): ppl_base, ppl, delta_ppl, kld_mean, kld_p99, top1, n_chunks,
 *     tokens_scored;
 *   encoders (hp.family BERT): one sentence per non-blank line ([CLS] .. [SEP], cut to ctx
 *     tokens keeping [SEP], as `sqz eval`): cos_mean and cos_min of the normalised sentence
 *     embeddings (sqz_eval_embeddings), n_chunks = sentences, tokens_scored = their tokens.
 * held_out (may be NULL) are calibration windows cut from this same text (sqz_calib_windows_make
 * with either model's tokenizer): a chunk, or a line, whose tokens overlap a window's span
 * [starts[i], starts[i] + ctx) in the text's ids is skipped and counted in n_held_out; the
 * others keep their places. Pass NULL when TEXT is not the calibration text.
 * text[0..len) is the text; text NULL reads text_path. text_path labels the text in out->text
 * and in messages (may be NULL when text is given). out->seconds is the whole call.
 * Errors (one line naming the text): SQZ_ERR_INVALID_ARG (models of another family,
 * vocabulary or width; an empty text; fewer than 2 * ctx tokens for a decoder; no non-blank
 * line for an encoder; windows cut from a text of another token count; every chunk or line
 * held out), SQZ_ERR_UNSUPPORTED (an encoder's lines that cannot be placed in the whole text's
 * ids to hold them out), SQZ_ERR_IO (reading text_path), the sessions' and forward passes'
 * errors. On error *out is zeroed (done false).
 *
 *   sqz_compress_eval_opts eo = sqz_compress_eval_default_opts();
 *   eo.max_chunks = 64;
 *   sqz_compress_eval_run(m, orig, "wiki.test.raw", NULL, 0, same_text ? &w : NULL, &eo, &rep.eval);
 */
SQZ_API sqz_status sqz_compress_eval_run(const sqz_model *compressed, const sqz_model *original,
                                         const char *text_path, const char *text, size_t len,
                                         const sqz_calib_windows *held_out, const sqz_compress_eval_opts *o,
                                         sqz_compress_eval *out);

/*
 * The compressed model and the original on the tasks of `file` (sqz_tasks_read: kind, the first
 * `limit` tasks, 0 all), tokenized with the original's tokenizer, each model in a session of
 * `threads` threads (f32 activations), into *out. progress (may be NULL): tokens evaluated.
 * Errors: the task file's (SQZ_ERR_FORMAT naming the place), SQZ_ERR_INVALID_ARG (vocabularies
 * that differ), the sessions' and forward passes'. On error *out is zeroed.
 */
SQZ_API sqz_status sqz_compress_eval_tasks(const sqz_model *compressed, const sqz_model *original, int kind,
                                           const char *file, int64_t limit, int threads, sqz_progress_fn progress,
                                           void *progress_user, sqz_compress_tasks *out);

#ifdef __cplusplus
}
#endif
#endif

/*
 * sqz/compress.h - the compression pipeline: a table of passes (quantization, and the
 * structural passes: layer removal, pruning), recipes of ordered stages, the sequential
 * block loop that runs them on calibration windows, and the report.
 */
#ifndef SQZ_COMPRESS_H
#define SQZ_COMPRESS_H

#include <stdbool.h>
#include <stdint.h>

#include "sqz/calib.h"
#include "sqz/model.h"
#include "sqz/quant.h"

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
 *            | 'no-act-order' | 'static-groups' | 'dynamic-groups' | 'damp=' NUMBER | 'alpha=' NUMBER
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
 * act-order, int4 then records every column's group in g_idx, AutoGPTQ's desc_act).
 */
typedef struct sqz_compress_spec {
    char text[128];             /* the SPEC as given */
    const sqz_qmethod *method;  /* from sqz_qmethod_find */
    sqz_quant_opts q;           /* target, act_mode / act_calib, method options */
} sqz_compress_spec;

/* Parses a SPEC. Errors: SQZ_ERR_INVALID_ARG with a message naming the offending part
 * ("SPEC 'int4:gptq:g96': unknown part 'g96' (group sizes: g32, g64, g128)"). */
sqz_status sqz_compress_spec_parse(const char *spec, sqz_compress_spec *out);

/* The layers a method treats together, in the order they are compressed (smoothing of a
 * later group may be folded into an earlier group's weights, so down comes before gate|up). */

/* One linear layer in the report. */
typedef struct sqz_layer_report {
    char tensor[96];        /* the tensor's name */
    int32_t layer;
    sqz_role role;
    bool quantized;
    char method[16];        /* "gptq", "awq", ...; "float" when kept */
    char format[16];        /* sqz_qformat_name, or the kept dtype's name */
    char why[64];           /* why it stayed float, or "" */
    int64_t n_out, n_in;
    double bits_per_weight; /* storage bits of this weight (scales etc. included) */
    double out_err;         /* ||Y_q - Y||_F / ||Y||_F on the calibration sample rows (the layer
                               run through the CPU kernels as it would run); NaN if no rows */
    double weight_err;      /* ||W_q - W||_F / ||W||_F */
    double seconds;         /* method time for this matrix (shared time split evenly) */
    float alpha;            /* AWQ / SmoothQuant exponent, else 0 */
    float act_scale;        /* W8A8 static activation scale, else 0 */
} sqz_layer_report;

typedef struct sqz_block_report {
    int32_t layer;
    double cos_mean, cos_min;  /* block input/output similarity on the calibration windows */
    double seconds;            /* compressing this block (methods, folding, validation) */
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
    int64_t tokens_scored;
    double ppl_base, ppl, delta_ppl;   /* perplexity of the original, of the result, difference */
    double kld_mean, kld_p99;  /* KL(original || result) per token, nats */
    double top1;               /* fraction of tokens where both predict the same next token */
    double cos_mean, cos_min;  /* encoders: embedding cosine similarity over sentences */
    double seconds;
} sqz_compress_eval;

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
    double bpw_model;          /* 8 * bytes_after / params */
    double seconds_total;      /* the whole sqz_compress_model call */
    double seconds_forward;    /* forward passes and observers */
    double seconds_quant;      /* the methods */
    double seconds_validate;
    int64_t activation_bytes;  /* the driver's buffer X */
    int64_t n_windows, ctx;    /* calibration (0 without) */
    sqz_compress_eval eval;    /* the result against the original (eval.done false when not run) */
} sqz_compress_report;

void sqz_compress_report_free(sqz_compress_report *r);

typedef struct sqz_compress_opts {
    sqz_compress_spec spec;
    sqz_quant_policy policy;
    const char *keep_float;  /* comma-separated list of what stays float beyond the policy:
                                role names (attn_q, ffn_down, ...), "blk.N" (a whole block) or
                                "blk.N.role"; NULL for none */
    int64_t sample_rows;     /* rows kept per input for the searches and validation; 512 */
    sqz_progress_fn progress; /* optional, done / total in blocks */
    void *progress_user;
} sqz_compress_opts;

/* spec = int8 (rtn), the default policy, no keep_float, sample_rows 512. */
sqz_compress_opts sqz_compress_default_opts(void);

/* What statistics the SPEC needs (SQZ_QSTAT_*), sample rows for validation included. */
unsigned sqz_compress_needs(const sqz_compress_spec *spec);

/* Compresses block `layer` of m from its statistics (stats may be NULL for methods that need
 * none; then there is no validation on activations). The linear layers are quantized in
 * groups that share an input (o, down, q|k|v, gate|up: a smoothing vector of down is folded
 * into up's rows before gate|up is quantized); smoothing vectors are folded into the norm
 * before q|k|v and gate|up, into v's rows before o when n_heads == n_kv_heads, and kept as
 * the layer's in_scale otherwise (sqz formats) or not searched (GGUF formats: AWQ's scale
 * search is skipped for that group, its clipping search still runs). Results are attached to
 * the model (sqz_qmatrix_attach); rows are appended to rep->layers. */
sqz_status sqz_compress_block(sqz_model *m, int32_t layer, const sqz_calib_block *stats, const sqz_compress_opts *o,
                              sqz_compress_report *rep);

/* The whole model: with windows (s and w non-NULL) block by block on the calibration windows
 * with recomputation (sqz_calib_run), or from a statistics file (stats non-NULL; no forward
 * pass), or, for methods that need no statistics, without either (validation then reports
 * weight errors only). *rep is filled (caller frees with sqz_compress_report_free) also on
 * failure, with what was done. Errors: SQZ_ERR_INVALID_ARG when the method needs statistics
 * that were not given or the file lacks (the message says which), the driver's and the
 * methods' errors. */
sqz_status sqz_compress_model(sqz_model *m, sqz_session *s, const sqz_calib_windows *w, const sqz_calib_stats *stats,
                              const sqz_compress_opts *o, sqz_compress_report *rep);

/* The report as JSON text ({"spec", "totals": {...}, "layers": [...], "blocks": [...]}, field
 * names as in the structs above). model and out label the paths (may be NULL). Returns a
 * malloc'd string (caller frees) or NULL on out of memory. */
char *sqz_compress_report_json(const sqz_compress_report *r, const char *model, const char *out);

#ifdef __cplusplus
}
#endif
#endif

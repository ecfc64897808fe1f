/*
 * quant/quant_internal.h - what the files of quant/ share (not public).
 *
 * Grids: a "grid" is the (d, m, zero) of one group of one row under a target format, and the
 * rule mapping a value to a code and a code back to the value the dequantizer produces.
 * RTN uses the reference quantizers directly; GPTQ builds a grid when a group starts and
 * quantizes column by column with it (grid.c).
 */
#ifndef SQZ_QUANT_INTERNAL_H
#define SQZ_QUANT_INTERNAL_H

#include <float.h>
#include <math.h>
#include <stdint.h>

#include "core/dequant.h"
#include "core/internal.h"
#include "kernels/cpu/linalg.h"
#include "quant/gguf/quant_gguf.h"
#include "sqz/quant.h"

/* v rounded to the nearest binary16, as a float (what a block or an fp16 scale stores). */
static inline float sqz__fp16_round(float v) { return sqz_fp16_to_fp32(sqz_fp32_to_fp16(v)); }

static inline int sqz__clampi(int v, int lo, int hi) { return v < lo ? lo : (v > hi ? hi : v); }

/* rintf (round half to even) into an int, saturating far outside int8 range (NaN -> 0).
 * Adding and subtracting 1.5 * 2^23 rounds |v| < 2^22 to an integer in the current (nearest-
 * even) mode exactly as rintf does, without the libm call baseline x86-64 makes for rintf. */
static inline int sqz__rint_sat(float v) {
    if (!(v == v)) return 0;
    if (v > 1e6f) return 1000000;
    if (v < -1e6f) return -1000000;
#if defined(FLT_EVAL_METHOD) && FLT_EVAL_METHOD == 0
    const float r = (v + 12582912.0f) - 12582912.0f; /* IEEE: not simplified without -ffast-math */
    return (int)r;
#else
    return (int)rintf(v);
#endif
}

/* W quantized to t as auto measures and plans it: llama.cpp's importance-weighted quantizer
 * with E[x^2] = x2 where asked (imatrix) and the type has one, the reference one otherwise; with
 * refine, IQ3_S blocks then searched again (sqz__iq3s_refine, the SPEC's search=refine). */
sqz_status sqz__qauto_quantize(const float *w, int64_t n_out, int64_t n_in, const float *x2, bool imatrix,
                               bool refine, const sqz_qtarget *t, sqz_qmatrix *q);
/* sqz_qauto_measure_one with the rounding of sqz__qauto_quantize (refine). */
sqz_status sqz__qauto_measure(const float *w, int64_t n_out, int64_t n_in, const float *x2, bool imatrix, bool refine,
                              sqz_qformat f, float *deq, double *bytes, double *err);
/* sqz's IQ3_S search (sqz__iq3s_refine) over every block of the (n_out, n_in) matrix w that
 * sqz__quantize_iq3_s wrote into data with the same importance qw (n_in, or NULL), on threads
 * (0: all cores) (quant/imatrix.c). */
sqz_status sqz__iq3s_refine_rows(const float *w, int64_t n_out, int64_t n_in, const float *qw, void *data,
                                 int threads);
/* Appends candidate (f, bytes, err) to t (quant/auto.c). */
void sqz__qauto_add(sqz_qauto_tensor *t, sqz_qformat f, double bytes, double err);

/* ---- grids (grid.c) ---- */
typedef struct sqz__grid {
    float d;        /* the stored scale (fp16-exact for I4/Q formats; f32 for I8) */
    float m;        /* Q4_1: the stored minimum; else 0 */
    int zero;       /* I4: the zero point (8 when symmetric); else 0 */
    int lo, hi;     /* code range */
    int anchor[2];  /* GGUF formats: columns (within the group) forced to the extreme codes, or -1 */
    int anchor_code[2];
} sqz__grid;

/* Grid of one group x[0..n) under format f, exactly as that format's reference quantizer
 * chooses it (n is the group: 32 for Q formats, the group size for I4, the row for I8). */
void sqz__grid_make(sqz_qformat f, const float *x, int n, sqz__grid *g);
/* Formats whose values are code * d + m (a stored minimum) rather than (code - zero) * d. */
static inline bool sqz__qfmt_affine(sqz_qformat f) {
    return f == SQZ_QFMT_Q4_1 || f == SQZ_QFMT_Q5_1 || f == SQZ_QFMT_Q2_K || f == SQZ_QFMT_Q4_K || f == SQZ_QFMT_Q5_K;
}
/* The K-quants Q2_K..Q6_K (super-blocks of 256, sub-block grids: sqz__kquant_subgrids). */
static inline bool sqz__qfmt_kquant(sqz_qformat f) {
    return f == SQZ_QFMT_Q2_K || f == SQZ_QFMT_Q3_K || f == SQZ_QFMT_Q4_K || f == SQZ_QFMT_Q5_K || f == SQZ_QFMT_Q6_K;
}
/* IQ4_NL / IQ4_XS: codes index kvalues_iq4nl (a value is d * kvalues[code], d per 32-block),
 * static grids from the blocks llama.cpp's quantizer makes, as the K-quants. */
static inline bool sqz__qfmt_iq4(sqz_qformat f) { return f == SQZ_QFMT_IQ4_NL || f == SQZ_QFMT_IQ4_XS; }
/* The formats whose value is d * table[code] for a 16-entry table, d per 32-block: IQ4 and MXFP4
 * (E2M1 doubled, d a power of two). NULL for the others. */
static inline const int8_t *sqz__qfmt_table(sqz_qformat f) {
    return sqz__qfmt_iq4(f) ? sqz__kvalues_iq4nl : f == SQZ_QFMT_MXFP4 ? sqz__kvalues_fp4 : NULL;
}
/* Formats whose GPTQ grids come from the reference quantizer's blocks of the original row. */
static inline bool sqz__qfmt_blockgrid(sqz_qformat f) {
    return sqz__qfmt_kquant(f) || sqz__qfmt_table(f) || f == SQZ_QFMT_IQ3_S;
}
/* The code of value v on grid g (nearest stored value, clamped to the code range). */
static inline int sqz__grid_code(const sqz__grid *g, sqz_qformat f, float v) {
    if (f == SQZ_QFMT_MXFP4) return g->d == 0.0f ? 0 : sqz__fp4_best_index(v, g->d); /* code 0 is +0 */
    if (f == SQZ_QFMT_NVFP4) return sqz__e2m1_rne(v / g->d); /* d = s / gs > 0 */
    if (f == SQZ_QFMT_FP8) /* the E4M3 byte (stored in an int8 code): compressed-tensors' clamp, then RNE */
        return g->d == 0.0f ? 0 : (int8_t)sqz_fp32_to_fp8_e4m3(fminf(fmaxf(v / g->d, -448.0f), 448.0f));
    if (g->d == 0.0f) return f == SQZ_QFMT_Q4_0 || f == SQZ_QFMT_I4_SYM || sqz__qfmt_iq4(f) ? 8 : g->zero;
    if (sqz__qfmt_iq4(f)) return sqz__iq4_best_index(v / g->d);
    int c;
    if (sqz__qfmt_affine(f)) c = sqz__rint_sat((v - g->m) / g->d);
    else c = sqz__rint_sat(v / g->d) + g->zero;
    return sqz__clampi(c, g->lo, g->hi);
}

/* The value the dequantizer produces for code c (bit-exact with the format's dequantizer). */
static inline float sqz__grid_value(const sqz__grid *g, sqz_qformat f, int c) {
    if (sqz__qfmt_iq4(f)) return g->d * sqz__kvalues_iq4nl[c]; /* as sqz_dequantize_iq4_* */
    if (f == SQZ_QFMT_MXFP4) return (float)sqz__kvalues_fp4[c] * g->d; /* as sqz__dequantize_mxfp4 */
    if (f == SQZ_QFMT_FP8) return sqz_fp8_e4m3_to_fp32((uint8_t)c) * g->d; /* as sqz_qparams_rows_to_f32 */
    if (f == SQZ_QFMT_NVFP4) return sqz_bf16_to_fp32(sqz_fp32_to_bf16(sqz__e2m1_value(c) * g->d)); /* idem */
    if (sqz__qfmt_affine(f)) {
        const float p = (float)c * g->d; /* exact: fp16 times a 4-bit integer */
        return p + g->m;                 /* one rounding, as (q & 15) * d + m in the dequantizer */
    }
    return (float)(c - g->zero) * g->d;
}

/* Writes codes (one int8 per element, row-major (n_out, n_in)) and the grids (n_out, n_groups)
 * into q's storage (blocks, packed nibbles, scales, zeros). */
void sqz__encode(sqz_qmatrix *q, const int8_t *codes, const sqz__grid *grids);

/* The activation grid a layer of format f with act_mode declares: FP8 weights quantize their
 * inputs to FP8 (W8A8-FP8), the others to sqz's int8 grid. */
static inline sqz_act_grid sqz__act_grid_for(sqz_qformat f, sqz_act_mode mode) {
    return f == SQZ_QFMT_FP8 && mode != SQZ_ACT_FLOAT ? SQZ_ACT_GRID_FP8 : SQZ_ACT_GRID_SYM127;
}

/* quant/nvfp4.c: NVFP4 as compressed-tensors computes it. The global scale of matrices whose largest
 * magnitude is amax (sqz__nvfp4_amax of each, the largest of those sharing an input), a group of 16's
 * E4M3 scale under it, and rows quantized under gs into q (codes, scales, qp.global_scale). */
float sqz__nvfp4_global_scale(float amax);
float sqz__nvfp4_amax(const float *w, int64_t n);
float sqz__nvfp4_group_scale(const float *x, float gs);
void sqz__nvfp4_rows(const float *w, int64_t n_out, int64_t n_in, float gs, sqz_qmatrix *q);
/* The same with each group's scale searched by the weighted error (importance qw, n_in values). */
void sqz__nvfp4_rows_search(const float *w, int64_t n_out, int64_t n_in, float gs, const float *qw, sqz_qmatrix *q);
/* GPTQ's grid of a group of 16 under global scale gs: d = s / gs (a value is bf16(e2m1 * d)), m the
 * stored E4M3 scale s (NVFP4 is not affine: m is read by sqz__encode only). */
void sqz__nvfp4_grid(const float *x, float gs, sqz__grid *g);

/* Group size of a target in columns (I8: n_in). */
static inline int64_t sqz__group_cols(const sqz_qtarget *t, int64_t n_in) {
    return t->fmt == SQZ_QFMT_I8 || t->fmt == SQZ_QFMT_FP8 ? n_in : (int64_t)t->group;
}

/* Quantize-dequantize rows of w (n_out, n_in) with the target's reference quantizer into out
 * (fake quantization: the values the stored weight would dequantize to). scratch: NULL or
 * room for the encoded matrix (allocated otherwise). */
sqz_status sqz__fake_quant(const float *w, int64_t n_out, int64_t n_in, const sqz_qtarget *t, float *out);

/* Whether st holds every statistic of needs (SQZ_QSTAT_* bits). */
bool sqz__qstats_has(const sqz_qstats *st, unsigned needs);

/* Common argument checks of the methods: n_lin >= 1, weights present, st->n_in fits the target. */
sqz_status sqz__check_method_args(const char *method, const sqz_qlinear *lin, int n_lin, const sqz_qstats *st,
                                  const sqz_quant_opts *o, unsigned needs, float *smooth, bool smooths);

/* The input rows the searches (AWQ, SmoothQuant) use: all of st->x when n_x <= max_search_rows
 * (or max_search_rows <= 0), else max_search_rows evenly spaced rows copied into *owned (free it).
 * NULL on out of memory. */
const float *sqz__search_rows(const sqz_qstats *st, const sqz_quant_opts *o, int64_t *nx, float **owned);

/* ||a - b|| / ||b|| over n values (0 when both are all zero, infinity when only b is). */
double sqz__rel_err(const float *a, const float *b, int64_t n);
/* dst (n_rows, n_in) = src (n_rows rows of dtype `from`, nbytes in all) widened to f32, on a pool of
 * `threads` (0: every core) when the matrix is large; the serial conversion's bytes
 * (quant/rows_f32.c). */
sqz_status sqz__rows_to_f32(sqz_dtype from, const void *src, size_t nbytes, int64_t n_rows, int64_t n_in, float *dst,
                            int threads);
/* sqz_qmatrix_to_f32 on a pool for GGUF block formats (a scheme's matrix: the serial path). */
sqz_status sqz__qmatrix_to_f32_par(const sqz_qmatrix *q, float *out, int threads);
/* Sum of squared differences between X . A^T and X . B^T over the sample rows (n_x, n_in),
 * A and B (n_out, n_in); ya and yb are scratch of n_x * n_out floats (ya may hold X . A^T
 * already when have_ya). */
double sqz__out_err2(const float *x, int64_t n_x, int64_t n_in, const float *a, const float *b, int64_t n_out,
                     float *ya, float *yb, bool have_ya);

/* The static activation scale (threshold / 127) of a layer's input for o->act_calib, from the
 * statistics; with smooth (n_in, may be NULL) the input is x / smooth: MINMAX then uses
 * max_j absmax_j / smooth_j exactly, PERCENTILE and KL a histogram of the smoothed sample rows. */
sqz_status sqz__act_scale_for(const sqz_qstats *st, const sqz_quant_opts *o, const float *smooth, float *scale);

/* ---- GPTQ's column sweep with a mask (gptq.c; SparseGPT: sparse/sparsegpt.c) ----
 * SparseGPT (Frantar & Alistarh 2023) is GPTQ's sweep in which some weights are set to zero
 * instead of to their nearest grid value: the same Hessian, damping, factor U of H^-1 and
 * lazy block updates; only the choice of each column's target value differs. A hook chooses
 * which weights become zero from the CURRENT (error-updated) weights and U's diagonal:
 *   per_row false: at the start of every block of columns, for all rows at once (unstructured:
 *                  SparseGPT's block-wise threshold over rows x block columns);
 *   per_row true:  for one row when its sweep reaches a column p with p % span == 0, over
 *                  columns [p, p + span) (N:M: span = M, within the block; blocksize % M == 0).
 * The sweep runs in the original column order (no act-order: N:M groups are consecutive
 * columns). quantize: kept weights go to the target's grid (the joint mode: zeros are the
 * grid's exact zero code; Q4_1 has none and is refused) or keep their updated values. */
typedef struct sqz__gptq_mask {
    bool per_row;
    int64_t span;
    bool quantize;
    /* Fills prune[r * ld_p + j] (1 = set to zero) for rows [0, rows), columns [0, cols) from
     * w[r * ld_w + j] and ud[j] (U's diagonal over those columns). */
    void (*select)(void *user, const float *w, int64_t ld_w, int64_t rows, int64_t cols, const float *ud,
                   uint8_t *prune, int64_t ld_p);
    void *user;
} sqz__gptq_mask;

/* GPTQ with a mask hook. mask->quantize: out[i] receives the quantized layers as
 * sqz_quant_gptq's; else values[i] (n_out * n_in floats each, caller's) the swept weights
 * with their zeros, and out is not touched. o->act_order is ignored (original order). */
sqz_status sqz__gptq_masked(const sqz_qlinear *lin, int n_lin, const sqz_qstats *st, const sqz_quant_opts *o,
                            const sqz__gptq_mask *mask, sqz_qmatrix *out, float **values);

/* sqz__chol_inverse_upper: kernels/cpu/linalg.h (the CPU backend's chol_inv_upper slot). */


/* ---- whole-model mixes (mix.c), for llama-quantize's per-tensor overrides (compress/) ---- */
/* Whether a mix gives t a type of its own (the matrices llama.cpp quantizes: embedding, output,
 * attention and FFN weights); false for norms, biases, position embeddings, the pooler. */
bool sqz__qmix_quantizes(const sqz_tensor *t);
/* sqz_qmix_type with i as the tensor's index among the tensors of its role that the mix's rules
 * see (llama.cpp's running counters i_attention_wv / i_ffn_down, which skip tensors a
 * --tensor-type pattern chose); sqz_qmix_type passes t->layer. */
sqz_dtype sqz__qmix_type_at(const sqz_qmix *mix, const sqz_model *m, const sqz_tensor *t, bool has_imatrix,
                            int64_t i);
/* The same before the width fallback: the type the mix's rules ask for (what llama-quantize counts
 * as "required fallback quantization" when the fallback then takes another). */
sqz_dtype sqz__qmix_wanted_at(const sqz_qmix *mix, const sqz_model *m, const sqz_tensor *t, bool has_imatrix,
                              int64_t i);
/* tensor_type_fallback: ty, or what llama.cpp falls back to when n_cols is not a multiple of
 * its block (Q2_K/Q3_K -> Q4_0, Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0, then F16). */
sqz_dtype sqz__qmix_fallback(sqz_dtype ty, int64_t n_cols);
/* The mix table's names, ", "-separated, into buf (cap bytes, truncated to fit): for messages. */
void sqz__qmix_names(char *buf, size_t cap);

/* ---- offline rotations (quant/rotate.c) ---- */
/* The orthogonal n x n matrix diag(s) (H_{2^k} (x) C_m) of width n = 2^k m (m odd; H the scaled
 * Sylvester Hadamard matrix, C_m the orthonormal DCT-II, s random signs from seed, all +1 for
 * seed 0), row-major, into *out (malloc'd, the caller frees). */
sqz_status sqz__rotation_make(int64_t n, uint64_t seed, float **out);
/* out (rows, n) = w (rows, n) q (n, n): a rotation of the input columns of a weight. */
void sqz__rotate_right(const float *w, int64_t rows, int64_t n, const float *q, float *out);
/* out (n, cols) = q^T (n, n) w (n, cols): a rotation of the output rows of a weight. */
void sqz__rotate_left_t(const float *q, int64_t n, const float *w, int64_t cols, float *out);

#endif

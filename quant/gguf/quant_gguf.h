/* quant/gguf/quant_gguf.h - the GGUF block quantizers (module sqz_quant_gguf, depending on core
 * only): llama.cpp's scalar reference quantizers (quantize_row_*_ref) and its
 * importance-weighted K-quants (quantize_q*_K). They write the block layouts of core/blocks.h;
 * the dequantizers are core's (core/dequant.h). n is the number of elements, a multiple of the
 * block size. */
#ifndef SQZ_QUANT_GGUF_H
#define SQZ_QUANT_GGUF_H

#include <stdint.h>

#include "sqz/dtype.h"

/* quant/gguf/quant_ref.c */
void sqz__quantize_q8_0_ref(const float *x, void *y, int64_t n);
void sqz__quantize_q4_0_ref(const float *x, void *y, int64_t n);
void sqz__quantize_q4_1_ref(const float *x, void *y, int64_t n);
void sqz__quantize_q5_0_ref(const float *x, void *y, int64_t n);
void sqz__quantize_q5_1_ref(const float *x, void *y, int64_t n);
/* The 32 codes L (0..31) of a Q5_0 / Q5_1 block: low nibbles into qs[16] as Q4's, the fifth bit
 * of code j into bit j of qh[4] (a little-endian u32). */
void sqz__pack_q5(const uint8_t *L, uint8_t *qs, uint8_t *qh);

/* quant/gguf/kquant.c: llama.cpp's quantize_row_q*_K_ref */
void sqz__quantize_q2_K_ref(const float *x, void *y, int64_t n);
void sqz__quantize_q3_K_ref(const float *x, void *y, int64_t n);
void sqz__quantize_q4_K_ref(const float *x, void *y, int64_t n);
void sqz__quantize_q5_K_ref(const float *x, void *y, int64_t n);
void sqz__quantize_q6_K_ref(const float *x, void *y, int64_t n);
/* llama.cpp's quantize_q*_K: nrow rows of n_per_row (a multiple of 256) into type t (Q2_K ...
 * Q6_K); quant_weights (n_per_row, e.g. E[x^2] of the input) or NULL for the reference. */
void sqz__quantize_k(sqz_dtype t, const float *src, void *dst, int64_t nrow, int64_t n_per_row,
                    const float *quant_weights);

/* quant/gguf/iq4.c: llama.cpp's IQ4_NL / IQ4_XS quantizers. The _ref ones are
 * quantize_row_iq4_nl_ref / quantize_row_iq4_xs_ref (the dtype table's from_f32; an all-zero
 * IQ4_NL block keeps the previous block's codes there, as llama.cpp's, which leaves them
 * uninitialised for a first block: its values are 0 either way). sqz__quantize_iq4 is
 * quantize_iq4_nl / quantize_iq4_xs: nrow rows of n_per_row (a multiple of 32 / 256) into t
 * (IQ4_NL or IQ4_XS) with the scale search, quant_weights (n_per_row) or NULL: what
 * llama-quantize writes with and without --imatrix. */
void sqz__quantize_iq4_nl_ref(const float *x, void *y, int64_t n);
void sqz__quantize_iq4_xs_ref(const float *x, void *y, int64_t n);
void sqz__quantize_iq4(sqz_dtype t, const float *src, void *dst, int64_t nrow, int64_t n_per_row,
                      const float *quant_weights);
/* ggml's best_index_int8 on kvalues_iq4nl: the code (0..15) whose table value is nearest x. */
int sqz__iq4_best_index(float x);
/* The scale of each 32-element sub-block of one IQ4_NL (1) / IQ4_XS (8) block into d, computed
 * as the dequantizer does (a value is d[j] * kvalues_iq4nl[code]). Returns the count, 0 for
 * another dtype. */
int sqz__iq4_subscales(sqz_dtype t, const void *block, float *d);
/* Writes codes L (32 or 256, each 0..15) into the block's nibbles, keeping its scales. */
void sqz__iq4_repack(sqz_dtype t, const uint8_t *L, void *block);

/* quant/gguf/fp4.c: MXFP4. sqz__quantize_mxfp4_ref is llama.cpp's quantize_row_mxfp4_ref (the
 * dtype table's from_f32, and what llama-quantize writes: its quantize_mxfp4 ignores an importance
 * matrix). sqz__quantize_mxfp4: nrow rows of n_per_row (a multiple of 32); quant_weights NULL gives
 * the reference's bytes, else sqz's search of each block's exponent among the reference's and its
 * two neighbours by the error weighted as llama.cpp's IQ4_NL search weights it. */
void sqz__quantize_mxfp4_ref(const float *x, void *y, int64_t n);
void sqz__quantize_mxfp4(const float *src, void *dst, int64_t nrow, int64_t n_per_row, const float *quant_weights);
/* ggml's best_index_mxfp4: the code of the E2M1 value nearest x at scale d (kvalues_fp4[code] * d). */
int sqz__fp4_best_index(float x, float d);
/* A block's scale as the dequantizer computes it (2^(e - 128)), and its codes (32, each 0..15)
 * written into its nibbles, keeping e. */
float sqz__mxfp4_scale(const void *block);
void sqz__mxfp4_repack(const uint8_t *L, void *block);

/* quant/gguf/iq3.c: llama.cpp's IQ3_S quantizer. sqz__quantize_iq3_s is quantize_iq3_s: nrow
 * rows of n_per_row (a multiple of 256), quant_weights (n_per_row) or NULL, what llama-quantize
 * writes with and without --imatrix; the _ref one is quantize_row_iq3_s_ref (the same without
 * weights, one row: the dtype table's from_f32). Thread-safe (the grid's neighbour tables are
 * built once, on first use). */
void sqz__quantize_iq3_s(const float *src, void *dst, int64_t nrow, int64_t n_per_row, const float *quant_weights);
void sqz__quantize_iq3_s_ref(const float *x, void *y, int64_t n);
/* GPTQ onto IQ3_S (quant/gptq.c): the scale of each of the block's 8 sub-blocks of 32 into db,
 * computed as the dequantizer does (a value is db[j] * level * sign). */
void sqz__iq3s_subscales(const void *block, float *db);
/* The codeword for 4 consecutive weights v at sub-block scale db: each sign from its weight, the
 * 4 magnitudes rounded to the nearest odd levels 1..15 and, where that is not one of the grid's
 * 512 codewords, the neighbour (llama.cpp's 3 nearest distance shells) with the least error
 * weighted by w (4 weights, or NULL for equal ones). Writes the signed levels (+-1..+-15) to
 * code and the values the dequantizer gives them to q. db == 0: levels +1, values 0. */
void sqz__iq3s_group(const float *v, const float *w, float db, int8_t *code, float *q);
/* Writes 256 signed levels (4 by 4 codewords of the grid, as sqz__iq3s_group chose them) into
 * the block's indices and sign bits, keeping its d and sub-block scales. */
void sqz__iq3s_repack(const int8_t *code, void *block);

/* sqz's own IQ3_S search after llama.cpp's (not llama.cpp's bytes): one block of 256 values x made
 * by sqz__quantize_iq3_s with the same quant_weights qw (or NULL) re-chosen in place: the super-block
 * scale among 5 near the stored one (+-5%), then each sub-block's 4-bit scale (all 16) with its
 * codewords chosen at the scale the dequantizer uses (llama.cpp rounds the scale after choosing the
 * codes), with llama.cpp's weights qw[i] * sqrt(sigma2 + x[i]^2); the block is replaced only where
 * that weighted squared error is lower. Thread-safe. */
void sqz__iq3s_refine(const float *x, const float *qw, void *block);

/* quant/gguf/dtype_ref.c: the reference from_f32 of t: the block quantizer of a GGUF type sqz
 * writes, core's converter of a float type (F32, F16, BF16, F64), NULL when sqz cannot produce
 * t. The same function as sqz_dtype_info(t)->from_f32. */
sqz_from_f32_fn sqz__dtype_from_f32(sqz_dtype t);

#endif

/* quant/gguf/kquant_internal.h - the scale searches shared by the K-quant quantizers
 * (quant/gguf/kquant_search.c; llama.cpp's ggml-quants.c helpers of the same names). */
#ifndef SQZ_QUANT_GGUF_KQUANT_INTERNAL_H
#define SQZ_QUANT_GGUF_KQUANT_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "sqz/dtype.h"

#define SQZ__GROUP_MAX_EPS 1e-15f

/* ggml's nearest_int: round half to even by adding 1.5 * 2^23 (|v| <= 4194303; larger values
 * give llama.cpp's same wrapped result, never undefined behaviour). */
static inline int sqz__nearest_int(float fval) {
    const float val = fval + 12582912.f;
    int i;
    memcpy(&i, &val, sizeof(int));
    return (i & 0x007fffff) - 0x00400000;
}

/* Signed codes on nmax levels each side, scale searched among 19 candidates; weights qw, or
 * x^2 when qw is NULL (make_qx_quants with rmse_type 1). L = code + nmax. Returns the scale. */
float sqz__make_qx_quants(int n, int nmax, const float *x, int8_t *L, const float *qw);
/* Q3_K's reference search (make_q3_quants, do_rmse = true). L = code + nmax. */
float sqz__make_q3_quants(int n, int nmax, const float *x, int8_t *L);
/* Scale and minimum by weighted least squares over nstep + 1 candidate ranges (make_qkx2_quants);
 * *the_min = -minimum (>= 0). */
float sqz__make_qkx2_quants(int n, int nmax, const float *x, const float *weights, uint8_t *L, float *the_min,
                            uint8_t *Laux, float rmin, float rdelta, int nstep, bool use_mad);
/* make_qkx3_quants (use_mad = false); weights NULL means x^2. */
float sqz__make_qkx3_quants(int n, int nmax, const float *x, const float *weights, uint8_t *L, float *the_min,
                            uint8_t *Laux, float rmin, float rdelta, int nstep);
/* Non-negative values x onto 0..nmax with an importance-weighted scale (make_qp_quants). */
float sqz__make_qp_quants(int n, int nmax, const float *x, uint8_t *L, const float *quant_weights);
/* make_qkx3_quants (n = 32) of 8 consecutive sub-blocks x[32 j + i] with their weights, side by
 * side (kquant_x8.c, AVX2): codes into L[32 j + i], scales[j] and the_mins[j] as the 8 scalar calls
 * give them, bit for bit. False (nothing written) where it cannot run (no AVX2, nstep < 1): the
 * caller then runs the scalar search. */
bool sqz__make_qkx3_quants_x8(int nmax, const float *x, const float *weights, uint8_t *L, float *scales,
                              float *the_mins, float rmin, float rdelta, int nstep);
/* make_qx_quants (n = 16) of 8 consecutive sub-blocks x[16 j + i] (weights qw likewise, or NULL:
 * x^2) side by side: codes L[16 j + i] and scales[j], bit for bit the 8 scalar calls'. False
 * (nothing written) without AVX2. */
bool sqz__make_qx_quants_x8(int nmax, const float *x, int8_t *L, const float *qw, float *scales);
/* Tests: off makes both _x8 searches return false (the scalar path runs); on (the default) again. */
void sqz__kquant_x8_set(bool on);

/* The sub-block grids of one K-quant block (Q2_K..Q6_K) as its dequantizer reads them: sub-block
 * j's code c in [0, *nmax] is the value (float)(c - *zero) * d[j] + m[j], computed in that order
 * (m is 0 for Q3_K / Q6_K, minus dmin times the sub-block's min for Q2_K / Q4_K / Q5_K: exactly
 * llama.cpp's dequantize_row_q*_K). d and m hold 16 entries. Returns the sub-block length (16 or
 * 32), 0 for another dtype. */
int sqz__kquant_subgrids(sqz_dtype t, const void *block, float *d, float *m, int *zero, int *nmax);
/* Writes codes L[256] (each in its sub-block's [0, nmax]) into the block's code bits, keeping its
 * scales: with the codes of the quantizer itself this reproduces its bytes. L may be changed. */
void sqz__kquant_repack(sqz_dtype t, uint8_t *L, void *block);

#endif

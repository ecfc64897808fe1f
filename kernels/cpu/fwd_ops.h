/*
 * kernels/cpu/fwd_ops.h - the element-wise and normalisation operators of the forward pass,
 * row kernels plus drivers that spread rows over the session's pool.
 * Shapes: x is (n, d) row-major; per-channel parameters have d entries.
 */
#ifndef SQZ_KERNELS_CPU_FWD_OPS_H
#define SQZ_KERNELS_CPU_FWD_OPS_H

#include <stdint.h>

#include "kernels/cpu/pool.h"
#include "sqz/model.h"

/* Elements of simple work (a multiply-add, a norm step) a pool chunk should hold at least. */
#define SQZ__MIN_CHUNK 65536
/* Rows of d elements per chunk to reach SQZ__MIN_CHUNK. */
int64_t sqz__row_grain(int64_t d);

/* y = x / sqrt(mean(x^2) + eps) * w  (RMSNorm, Zhang & Sennrich 2019; llama). y may equal x. */
void sqz__rmsnorm(sqz__pool *p, const float *x, const float *w, float eps, int64_t n, int64_t d, float *y);
/* y = (x - mean) / sqrt(var + eps) * w + b, biased variance (LayerNorm; BERT). b may be NULL. y may equal x. */
void sqz__layernorm(sqz__pool *p, const float *x, const float *w, const float *b, float eps, int64_t n, int64_t d,
                    float *y);
/* x += y (n*d elements). */
void sqz__add(sqz__pool *p, float *x, const float *y, int64_t n, int64_t d);
/* g = silu(g) * u  (SwiGLU, Shazeer 2020). */
void sqz__silu_mul(sqz__pool *p, float *g, const float *u, int64_t n, int64_t d);
/* x = gelu(x) = x/2 (1 + erf(x/sqrt 2)), the exact (erf) form BERT uses. */
void sqz__gelu(sqz__pool *p, float *x, int64_t n, int64_t d);

/* Rotary tables for positions [0, n_pos): cos/sin[p * (hd/2) + i] of angle p * theta^(-2i/hd),
 * computed in float as HF transformers and llama2.c do. */
void sqz__rope_tables(float theta, int64_t head_dim, int64_t n_pos, float *cos_t, float *sin_t);
/* Rotates n rows of x (row stride ld floats) holding n_heads heads of head_dim each, row r at
 * position pos + r, pairing (2i, 2i+1) (INTERLEAVED) or (i, i + hd/2) (HALF). */
void sqz__rope(sqz__pool *p, float *x, int64_t ld, int64_t n, int64_t n_heads, int64_t head_dim, int64_t pos,
               sqz_rope_layout layout, const float *cos_t, const float *sin_t);

/* ---- vectorized row kernels (fwd_vec.c; AVX2+FMA variants picked at run time on x86) ---- */
/* In-place softmax of row[0..len) after multiplying by scale; entries [len, width) are zeroed. */
void sqz__softmax_row(float *row, int64_t len, int64_t width, float scale);
/* g[i] = silu(g[i]) * u[i] for i < n. */
void sqz__silu_mul_span(float *g, const float *u, int64_t n);
/* x[i] = gelu(x[i]) (erf form, erf to 1.5e-7) for i < n. */
void sqz__gelu_span(float *x, int64_t n);
/* e^x, ~2 ulp on [-87, 88] (clamped outside); NaN stays NaN. */
float sqz__expf(float x);

#endif

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

/* g = gelu_tanh(g) * u  (GeGLU with GELU's tanh approximation: Gemma's gelu_pytorch_tanh). */
void sqz__gelu_tanh_mul(sqz__pool *p, float *g, const float *u, int64_t n, int64_t d);

/* What the rotary tables of one kind of layer are made from. */
typedef struct sqz__rope_spec {
    float theta;          /* the base */
    int64_t dim;          /* dimensions rotated per head (rope_dim): the tables have dim/2 columns */
    float pos_scale;      /* positions times this (linear scaling: 1/factor); 0: 1 */
    const float *divisors; /* dim/2 frequency divisors (llama 3's rope_freqs, longrope's factors) or NULL */
    float mscale;         /* cos and sin times this (longrope's attention factor); 0: 1 */
} sqz__rope_spec;
/* Rotary tables for positions [0, n_pos): cos/sin[p * (dim/2) + i] of angle
 * p * pos_scale * theta^(-2i/dim) / divisors[i], times mscale, the inverse frequencies computed in
 * float as HF transformers does (divided by the divisor in float, as its llama3 / longrope code). */
void sqz__rope_tables(const sqz__rope_spec *spec, int64_t n_pos, float *cos_t, float *sin_t);
/* Rotates the first rope_dim dimensions of each head in n rows of x (row stride ld floats) holding
 * n_heads heads of head_dim each, row r at position pos + r, pairing (2i, 2i+1) (INTERLEAVED) or
 * (i, i + rope_dim/2) (HALF); the tables have rope_dim/2 columns. */
void sqz__rope(sqz__pool *p, float *x, int64_t ld, int64_t n, int64_t n_heads, int64_t head_dim, int64_t rope_dim,
               int64_t pos, sqz_rope_layout layout, const float *cos_t, const float *sin_t);

/* ---- vectorized row kernels (fwd_vec.c; AVX2+FMA variants picked at run time on x86) ---- */
/* In-place softmax of row[0..len) after multiplying by scale; entries [len, width) are zeroed. */
void sqz__softmax_row(float *row, int64_t len, int64_t width, float scale);
/* g[i] = silu(g[i]) * u[i] for i < n. */
void sqz__silu_mul_span(float *g, const float *u, int64_t n);
/* g[i] = gelu_tanh(g[i]) * u[i] for i < n: 0.5 g (1 + tanh(sqrt(2/pi) (g + 0.044715 g^3))). */
void sqz__gelu_tanh_mul_span(float *g, const float *u, int64_t n);
/* x[i] = gelu(x[i]) (erf form, erf to 1.5e-7) for i < n. */
void sqz__gelu_span(float *x, int64_t n);
/* e^x, ~2 ulp on [-87, 88] (clamped outside); NaN stays NaN. */
float sqz__expf(float x);

#endif

/* edge/edge_internal.h - what the edge runtime's files share. */
#ifndef SQZE_INTERNAL_H
#define SQZE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "edge/sqz_edge.h"

/* Writes the message into err (cap bytes) and returns 1. */
int sqze__fail(char *err, size_t cap, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
uint32_t sqze__u32(const uint8_t *p);
uint64_t sqze__u64(const uint8_t *p);
float sqze__f32(const uint8_t *p);

/* Roles the runtime uses (sqz's SQZ_ROLE_MAP order; the bundle stores these numbers). */
enum {
    SQZE_ROLE_TOKEN_EMBD = 0, SQZE_ROLE_OUTPUT_NORM = 4, SQZE_ROLE_OUTPUT = 5, SQZE_ROLE_ATTN_NORM = 7,
    SQZE_ROLE_ATTN_Q = 8, SQZE_ROLE_ATTN_K = 9, SQZE_ROLE_ATTN_V = 10, SQZE_ROLE_ATTN_OUT = 11,
    SQZE_ROLE_FFN_NORM = 13, SQZE_ROLE_FFN_GATE = 14, SQZE_ROLE_FFN_UP = 15, SQZE_ROLE_FFN_DOWN = 16,
    SQZE_N_ROLES = 18
};

/* Where row r of a q4_0 / q4_1 / q4_0-x8 matrix with rows of k elements keeps its blocks: block b
 * starts at base + b * stride, with its fp16 d at +d (q4_1: m at +m) and its 16 code bytes as two
 * halves of 8 at +qa (bytes 0..7) and +qb (8..15). (edge/q4x8.c) */
typedef struct sqze_q4row {
    const uint8_t *base;
    uint32_t stride, d, m, qa, qb;
} sqze_q4row;
sqze_q4row sqze__q4row(const uint8_t *data, uint32_t dtype, uint32_t r, uint32_t k);

/* ---- kernels (edge/kernels.c): y = W x over every row of W ---- */
/* W in a bundle dtype (edge/model.c checked its shape and sizes); x of w->cols floats. */
void sqze__matvec(const sqze_w *w, const float *x, float *y);
/* a . b over n floats, with the kernels' lanes (attention's scores) */
float sqze__dot(const float *a, const float *b, uint32_t n);
/* Row r of W as floats (embedding lookup). */
void sqze__row_f32(const void *w, uint32_t dtype, uint32_t r, uint32_t k, float *out);
float sqze__fp16_to_f32(uint16_t h);
uint16_t sqze__fp32_to_fp16(float f); /* round to nearest even */

/* ---- --activations q8 (edge/kernels_q8.c): a product's input, quantized once and on demand ---- */
typedef struct sqze_xin {
    const float *x;
    uint32_t k;
    int q8;             /* the model's activations are SQZE_ACTS_Q8 */
    int have_q, have_h; /* qs / d / s, h computed from x */
    int8_t *qs;         /* k codes (the model's scratch: one input at a time) */
    float *d, *s;       /* per block of 32: fp16's d, and s = d (unrounded) sum(qs) */
    int32_t *c;         /* k / 4: -8 x the sum of each 4 codes (q4_0's offset, lane by lane) */
    int32_t *cb;        /* k / 32: -8 x the sum of each block's codes (q4_0's offset per block) */
    float *h;           /* x rounded to fp16 (f16 weights) */
} sqze_xin;
void sqze__xin_init(sqze_xin *in, const sqze_model *m, const float *x, uint32_t k);
/* y = W x with x as the model's activations say (f32 or q8: docs/bundle.md) */
void sqze__matvec_x(const sqze_w *w, sqze_xin *in, float *y);
/* exp as sqz's runtime computes it (Cephes scheme; kernels/cpu/fwd_vec.c) */
float sqze__expf(float x);

/* ---- tokenizer tables, laid out by model.c, built by tokenizer.c ---- */
size_t sqze__tok_memory(const sqze_vocab_view *v, uint32_t ctx);
void sqze__tok_build(sqze_model *m, const sqze_vocab_view *v, uint8_t *mem);
/* The token spelled s[0..n), -1 if none (of equal texts the last ordinary one). */
int32_t sqze__tok_find(const sqze_model *m, const uint8_t *s, uint32_t n);
#endif

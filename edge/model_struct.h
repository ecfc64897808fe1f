/*
 * edge/model_struct.h - the model a caller holds (usually on its stack); everything it points
 * to is either in the bundle (weights, vocabulary) or in the caller's arena (edge/model.c lays
 * it out). Fields are for the runtime's files; callers use the functions of sqz_edge.h.
 */
#ifndef SQZ_EDGE_MODEL_STRUCT_H
#define SQZ_EDGE_MODEL_STRUCT_H

#include <stddef.h>
#include <stdint.h>

/* A weight where the bundle stores it: rows x cols elements of a bundle dtype. */
typedef struct sqze_w {
    const uint8_t *data; /* NULL when absent (a bias the model does not have); the codes of I8_ROW/U4_GROUP */
    uint32_t dtype, rows, cols;
    /* I8_ROW / U4_GROUP: rows x n_groups f32 scales (little-endian, 4-byte aligned), zero points
     * (U4_GROUP, or NULL: 8), columns per group */
    const float *scales;
    const uint8_t *zeros;
    uint32_t group_size, n_groups;
} sqze_w;

typedef struct sqze_layer {
    sqze_w attn_norm, wq, wk, wv, wo, bq, bk, bv, ffn_norm, gate, up, down;
    uint32_t heads, kv_heads, d_ff;
    float *kcache, *vcache; /* ctx x kv_heads*head_dim each, in the arena */
} sqze_layer;

/* One vocabulary merge: tokens a and b become `merged`, priority `rank` (lower first). */
typedef struct sqze_merge {
    int32_t a, b, merged, rank;
} sqze_merge;

struct sqze_model {
    sqze_hparams hp;
    sqze_vocab_view vocab;
    uint32_t ctx;
    sqze_w tok_embd, out_norm, output;
    sqze_layer *layers;
    /* activations: x, xb (d_model), q and att (max heads*head_dim), hb, hb2 (max d_ff),
     * scores (ctx), rope cos/sin (head_dim/2 each), logits (vocab) */
    float *x, *xb, *xb2, *q, *att, *hb, *hb2, *scores, *rope_cos, *rope_sin, *logits;
    /* --activations: SQZE_ACTS_*; a product's input quantized (codes, per-32 d and s, q4_0's
     * offset per 4 codes; the widest input's) or rounded to fp16 */
    int acts;
    int8_t *xq;
    int32_t *xq_c, *xq_cb; /* q4_0's offset per 4 codes, and per block (the 8-row groups' kernels) */
    float *xq_d, *xq_s, *xh;
    /* tokenizer: each token's bytes, ids sorted by bytes, merges sorted by (a, b), the
     * <0xNN> / byte-level token of each byte, and the encoder's working space */
    const uint8_t **tok_str;
    uint32_t *tok_len, *tok_sorted;
    uint8_t *tok_type;
    sqze_merge *merges;
    uint32_t n_merges; /* usable merges (both sides and the result are tokens) */
    int32_t byte_tok[256];
    int32_t *work_ids;  /* work_cap symbols, and per adjacent pair its merge and priority */
    int32_t *work_mid;
    float *work_prio;
    uint8_t *work_text; /* 4 * work_cap bytes */
    uint32_t work_cap;
    uint32_t escape_spaces; /* SPM pieces spell spaces U+2581 */
    uint32_t split_digits;  /* BPE: each digit is a piece of its own (pre-tokenizer "smollm") */
    uint16_t byte_of_cp[324]; /* BPE: the byte of each byte-level code point (0xFFFF: none) */
    int32_t *tokens; /* ctx ids: the caller's sequence */
    /* sampling: (probability, id) pairs for top-p */
    float *probs;
    int32_t *prob_ids;
};
#endif

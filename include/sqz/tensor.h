/*
 * sqz/tensor.h - tensor views and tensor roles.
 *
 * A tensor is a passive descriptor: name, role, dtype, shape and a pointer to its
 * bytes. Shapes are written outermost first, as PyTorch and safetensors do: a
 * linear layer's weight is (out_features, in_features) and its rows are contiguous.
 * (GGUF lists dimensions innermost first; the GGUF reader and writer reverse them.)
 * Data is always dense row-major; for block-quantized dtypes each row (the
 * innermost dimension) is a whole number of blocks.
 */
#ifndef SQZ_TENSOR_H
#define SQZ_TENSOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sqz/api.h"
#include "sqz/dtype.h"
#include "sqz/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SQZ_MAX_DIMS 4

/*
 * What a tensor is for, independent of the checkpoint format. The second column is
 * the GGUF base name (blk.N.<name>.weight for per-layer roles), the third says whether
 * the role belongs to a layer. Append-only.
 */
#define SQZ_ROLE_MAP(X)                                                           \
    X(TOKEN_EMBD, "token_embd", 0)          /* (vocab, d_model) */                \
    X(POS_EMBD, "position_embd", 0)         /* (ctx, d_model), BERT */            \
    X(TYPE_EMBD, "token_types", 0)          /* (n_types, d_model), BERT */        \
    X(EMBD_NORM, "token_embd_norm", 0)      /* (d_model), BERT LayerNorm */       \
    X(OUTPUT_NORM, "output_norm", 0)        /* (d_model) final RMSNorm */         \
    X(OUTPUT, "output", 0)                  /* (vocab, d_model) classifier */     \
    X(POOLER, "pooler", 0)                  /* (d_model, d_model), BERT pooler */ \
    X(ATTN_NORM, "attn_norm", 1)            /* (d_model) */                       \
    X(ATTN_Q, "attn_q", 1)                  /* (n_heads*head_dim, d_model) */     \
    X(ATTN_K, "attn_k", 1)                  /* (n_kv_heads*head_dim, d_model) */  \
    X(ATTN_V, "attn_v", 1)                  /* (n_kv_heads*head_dim, d_model) */  \
    X(ATTN_OUT, "attn_output", 1)           /* (d_model, n_heads*head_dim) */     \
    X(ATTN_OUT_NORM, "attn_output_norm", 1) /* (d_model), BERT post-attn LN */    \
    X(FFN_NORM, "ffn_norm", 1)              /* (d_model) */                       \
    X(FFN_GATE, "ffn_gate", 1)              /* (d_ff, d_model) */                 \
    X(FFN_UP, "ffn_up", 1)                  /* (d_ff, d_model) */                 \
    X(FFN_DOWN, "ffn_down", 1)              /* (d_model, d_ff) */                 \
    X(LAYER_OUT_NORM, "layer_output_norm", 1) /* (d_model), BERT post-FFN LN */ \
    X(ATTN_Q_NORM, "attn_q_norm", 1)        /* (head_dim) per-head RMSNorm of q (qwen3, gemma3) */ \
    X(ATTN_K_NORM, "attn_k_norm", 1)        /* (head_dim) per-head RMSNorm of k */ \
    X(ATTN_POST_NORM, "post_attention_norm", 1) /* (d_model) RMSNorm of attention's output (gemma3) */ \
    X(FFN_POST_NORM, "post_ffw_norm", 1)    /* (d_model) RMSNorm of the FFN's output (gemma3) */ \
    X(ROPE_FREQS, "rope_freqs", 0)          /* (rope_dim/2) frequency divisors (llama 3 scaling) */ \
    X(ROPE_FACTORS_LONG, "rope_factors_long", 0)   /* (rope_dim/2) longrope, long contexts (phi3) */ \
    X(ROPE_FACTORS_SHORT, "rope_factors_short", 0) /* (rope_dim/2) longrope, short contexts */ \
    X(ATTN_QKV, "attn_qkv", 1)              /* q, k, v rows fused (phi3 GGUF): split on read, never in a model */ \
    X(FFN_GATE_INP, "ffn_gate_inp", 1)      /* (n_expert, d_model) the router of a mixture of experts */ \
    X(FFN_GATE_EXPS, "ffn_gate_exps", 1)    /* (n_expert, d_ff, d_model) every expert's gate, stacked */ \
    X(FFN_UP_EXPS, "ffn_up_exps", 1)        /* (n_expert, d_ff, d_model) */ \
    X(FFN_DOWN_EXPS, "ffn_down_exps", 1)    /* (n_expert, d_model, d_ff) */

typedef enum sqz_role {
#define SQZ__ROLE_ENUM(name, gguf, per_layer) SQZ_ROLE_##name,
    SQZ_ROLE_MAP(SQZ__ROLE_ENUM)
#undef SQZ__ROLE_ENUM
    SQZ_ROLE_COUNT
} sqz_role;

/* A role's parameter kind: the weight or the bias of that role. */
typedef enum sqz_param { SQZ_PARAM_WEIGHT = 0, SQZ_PARAM_BIAS = 1 } sqz_param;

/* GGUF base name of a role ("attn_q"); "invalid" if out of range. Static. */
SQZ_API const char *sqz_role_name(sqz_role r);
/* True if the role exists once per layer (blk.N.*). */
SQZ_API bool sqz_role_per_layer(sqz_role r);
/* Parses a GGUF base name; false if unknown. */
SQZ_API bool sqz_role_from_name(const char *name, sqz_role *out);

typedef struct sqz_tensor {
    char *name;          /* the name in the source checkpoint, kept for export; owned by the model */
    sqz_role role;
    sqz_param param;     /* weight or bias */
    int32_t layer;       /* 0..n_layers-1 for per-layer roles, -1 otherwise */
    sqz_dtype dtype;
    int32_t ndim;        /* 1..SQZ_MAX_DIMS */
    int64_t shape[SQZ_MAX_DIMS]; /* outermost first; unused entries are 1 */
    void *data;          /* nbytes of dense row-major data; NULL until loaded */
    size_t nbytes;       /* exactly sqz_dtype_nbytes(dtype, nelements) */
    bool owned;          /* data is heap memory freed with the model (else borrowed from a mapping) */
    const struct sqz_qparams *qp; /* scales / zero points / groups of a quantized weight whose dtype
                                     holds only integer values (I8 per row, U4 per group; see
                                     sqz/qparams.h), owned by the model; NULL for every other tensor */
} sqz_tensor;

/* Number of elements (product of the shape). */
SQZ_API int64_t sqz_tensor_nelements(const sqz_tensor *t);
/* Length of the innermost dimension (elements per row). */
SQZ_API int64_t sqz_tensor_row_len(const sqz_tensor *t);
/* Number of rows (product of all but the innermost dimension). */
SQZ_API int64_t sqz_tensor_nrows(const sqz_tensor *t);

/* Converts the whole tensor to float into dst, which holds nelements floats (dequantizing
 * through t->qp when it is set). Returns SQZ_ERR_UNSUPPORTED for dtypes without a float view. */
SQZ_API sqz_status sqz_tensor_to_f32(const sqz_tensor *t, float *dst);

/* The one finite-value check: SQZ_OK when every value of the tensor (dequantized: through
 * t->qp, or the block scales of a GGUF type) is finite; else SQZ_ERR_FORMAT naming the tensor,
 * the value and where ("tensor 'blk.0.attn_norm.weight': nan at row 0, column 17"). Integer
 * tensors without qparams are finite by nature. Reads the whole tensor, a bounded chunk at a
 * time (a tensor with qparams: all of it at once). */
SQZ_API sqz_status sqz_tensor_check_finite(const sqz_tensor *t);

/* Converts n elements from src (of dtype `from`) to dst (of dtype `to`), through float
 * unless the types are equal (then a plain copy). dst holds sqz_dtype_nbytes(to, n) bytes.
 * Returns SQZ_ERR_UNSUPPORTED when `to` cannot be produced, SQZ_ERR_SHAPE when n is not
 * a multiple of either block size. `scratch` holds n floats or is NULL (then allocated). */
SQZ_API sqz_status sqz_convert(sqz_dtype from, const void *src, sqz_dtype to, void *dst, int64_t n,
                               float *scratch);

#ifdef __cplusplus
}
#endif
#endif

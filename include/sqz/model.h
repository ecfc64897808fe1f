/*
 * sqz/model.h - the one model representation every loader fills and every pass,
 * runtime and writer reads.
 *
 * A model is an architecture (family + hyperparameters, with per-layer dimensions so
 * that pruned layers may differ in width), its tensors by (layer, role, param), the
 * tokenizer data and the names the source checkpoint used. Tensor data stays in the
 * memory-mapped source file until something reads it: opening a model reads headers
 * only.
 *
 *   sqz_model *m;
 *   if (sqz_model_open("models/tinystories-656K", NULL, &m) != SQZ_OK) {
 *       fprintf(stderr, "%s\n", sqz_last_error());
 *       return 1;
 *   }
 *   const sqz_tensor *wq = sqz_model_get(m, SQZ_ROLE_ATTN_Q, 0, SQZ_PARAM_WEIGHT);
 *   printf("%s: %lld params\n", m->hp.arch, (long long)sqz_model_param_count(m));
 *   sqz_model_free(m);
 */
#ifndef SQZ_MODEL_H
#define SQZ_MODEL_H

#include <stdbool.h>
#include <stdint.h>

#include "sqz/api.h"
#include "sqz/io.h"
#include "sqz/status.h"
#include "sqz/tensor.h"
#include "sqz/vocab.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum sqz_family {
    SQZ_FAMILY_LLAMA = 0, /* decoder: RMSNorm, RoPE, GQA, SwiGLU (llama, mistral, qwen2, smollm) */
    SQZ_FAMILY_BERT = 1,  /* encoder: LayerNorm, absolute positions, GELU (BERT, MiniLM) */
    SQZ_FAMILY_QWEN3 = 2, /* llama + per-head RMSNorm of q and k, explicit head_dim (Qwen3) */
    SQZ_FAMILY_GEMMA3 = 3, /* llama + q/k norms, post-attention / post-FFN norms, embeddings times
                              sqrt(d_model), GELU-tanh, sliding-window layers (Gemma 3) */
    SQZ_FAMILY_PHI3 = 4,  /* llama with fused qkv / gate_up in its files, partial rotary, longrope (Phi-3,
                             Phi-4-mini) */
    SQZ_FAMILY_QWEN3MOE = 5, /* qwen3 with a mixture of experts in place of the FFN (Qwen3-30B-A3B) */
    SQZ_FAMILY_MIXTRAL = 6, /* llama with a mixture of experts in place of the FFN (Mixtral; GGUF "llama") */
    SQZ_FAMILY_COUNT      /* the families of the table (core/family.c); ids from here on are
                             registered at run time (tests) */
} sqz_family;

/*
 * How the rows of the q and k projections are ordered for rotary embeddings.
 * INTERLEAVED: Meta/llama2.c/GGUF-llama order, rotation pairs (2i, 2i+1) in each head.
 * HALF: HF transformers order (rotate_half), pairs (i, i + head_dim/2).
 * Converting between them permutes whole rows of attn_q and attn_k (formats/rope.c).
 */
typedef enum sqz_rope_layout {
    SQZ_ROPE_NONE = 0,
    SQZ_ROPE_INTERLEAVED = 1,
    SQZ_ROPE_HALF = 2,
} sqz_rope_layout;

/* The FFN's activation: SiLU (gated: SwiGLU), GELU's erf form (BERT), GELU's tanh approximation
 * (gated: GeGLU, Gemma's gelu_pytorch_tanh). */
typedef enum sqz_act { SQZ_ACT_SILU = 0, SQZ_ACT_GELU = 1, SQZ_ACT_GELU_TANH = 2 } sqz_act;

/* How rotary frequencies are scaled (what a writer must state; the runtime reads the factors
 * from the ROPE_FREQS / ROPE_FACTORS_* tensors and hp.rope_freq_scale). */
typedef enum sqz_rope_scaling {
    SQZ_ROPE_SCALING_NONE = 0,
    SQZ_ROPE_SCALING_LINEAR = 1,   /* positions times hp.rope_freq_scale in full-attention layers */
    SQZ_ROPE_SCALING_LLAMA3 = 2,   /* frequency divisors in ROPE_FREQS (Llama 3.1+) */
    SQZ_ROPE_SCALING_LONGROPE = 3, /* ROPE_FACTORS_SHORT / _LONG and an attention factor (Phi-3) */
} sqz_rope_scaling;

/* Dimensions that may differ from layer to layer after pruning. */
typedef struct sqz_layer_dims {
    int64_t n_heads;
    int64_t n_kv_heads;
    int64_t d_ff;
    int64_t window;     /* sliding-window attention: a query sees this many positions (itself
                           included); 0: every earlier position (a global layer) */
    int64_t n_expert;   /* experts of the layer's mixture (d_ff is each expert's width); 0: a dense FFN */
} sqz_layer_dims;

typedef struct sqz_hparams {
    char arch[32];        /* GGUF general.architecture / HF model_type: "llama", "qwen2", "bert" ... */
    sqz_family family;
    int64_t n_layers;
    int64_t d_model;      /* hidden size */
    int64_t n_heads;      /* default per-layer value */
    int64_t n_kv_heads;   /* default per-layer value */
    int64_t head_dim;
    int64_t d_ff;         /* default per-layer value */
    int64_t vocab_size;
    int64_t ctx_len;      /* trained context length */
    int64_t n_token_types; /* BERT token_type vocabulary, 0 otherwise */
    float norm_eps;
    float rope_theta;     /* 0 when the family has no rotary embeddings */
    sqz_rope_layout rope_layout; /* how THIS model's attn_q/attn_k rows are stored */
    sqz_act act;
    bool tied_embeddings; /* the classifier is the token embedding */
    bool attn_bias;       /* q/k/v carry biases (qwen2, BERT) */
    /* ---- what newer decoders add; 0 means "as llama" ---- */
    int64_t rope_dim;     /* dimensions rotated per head, the first ones (partial rotary: Phi-3); 0: head_dim */
    float attn_scale;     /* scale of q.k before the softmax; 0: 1/sqrt(head_dim) (Gemma 3:
                             query_pre_attn_scalar^-1/2) */
    float rope_theta_local; /* rope base of sliding-window layers (Gemma 3); 0: rope_theta */
    sqz_rope_scaling rope_scaling;
    float rope_freq_scale; /* LINEAR: position scale of full-attention layers (1 / factor) */
    float rope_factor;    /* LLAMA3 / LONGROPE: the config's factor (LONGROPE: max / original context) */
    float rope_low_freq_factor, rope_high_freq_factor; /* LLAMA3's */
    int64_t rope_ctx_orig; /* LLAMA3 / LONGROPE: original_max_position_embeddings; LONGROPE uses the long
                              factors for contexts beyond it */
    float rope_attn_factor; /* cos and sin times this (LONGROPE's attention factor); 0: 1 */
    int64_t sliding_window; /* the sliding layers' window (layers[l].window says which layers); 0: none */
    /* ---- mixtures of experts (0: a dense model) ---- */
    int64_t n_expert;      /* default per-layer value (layers[l].n_expert) */
    int64_t n_expert_used; /* experts each token is routed to (top-k) */
    bool expert_norm_topk; /* the top-k routing weights are renormalised to sum to 1 (Mixtral; Qwen3-MoE's
                              norm_topk_prob); false: the full softmax's probabilities */
} sqz_hparams;

typedef struct sqz_model_store sqz_model_store; /* internal: mappings and owned buffers */

/*
 * GGUF metadata sqz neither reads nor computes (general.license, general.languages,
 * quantize.imatrix.*, tokenizer.ggml.eot_token_id, ...), kept from a GGUF source so that the
 * GGUF writer copies it verbatim, with its GGUF type. Keys sqz writes itself (general.architecture,
 * name, alignment, file_type, quantization_version, the architecture's hyperparameters, the
 * tokenizer arrays, ids and flags) are never kept. Empty (n = 0) for every other source.
 */
typedef struct sqz_gguf_meta {
    int64_t n;       /* entries, in source order */
    size_t *off;     /* n + 1 offsets into bytes: entry i is bytes[off[i] .. off[i + 1]) */
    uint8_t *bytes;  /* the entries as GGUF stores them: u64 key length, key, u32 type, value */
} sqz_gguf_meta;

typedef struct sqz_model {
    sqz_hparams hp;
    sqz_layer_dims *layers; /* hp.n_layers entries */
    sqz_tensor *tensors;    /* n_tensors entries, in source order */
    int64_t n_tensors;
    sqz_vocab vocab;
    char *name;             /* general.name / model name, or NULL */
    char *source_path;      /* what was opened */
    int source_format;      /* an sqz_format (sqz/formats.h) */
    sqz_gguf_meta gguf_meta; /* pass-through GGUF metadata, owned by the model */
    int32_t gguf_file_type;  /* a GGUF source's general.file_type (llama_ftype: 15 for Q4_K_M), -1 if none: the
                                GGUF writer keeps it while every tensor keeps its dtype */
    sqz_model_store *store;
} sqz_model;

/* An empty model (no tensors, empty vocab). Free with sqz_model_free. NULL on out of memory. */
SQZ_API sqz_model *sqz_model_new(void);
/* Frees the model, its tensors' owned data, its mappings and its vocab. NULL is fine. */
SQZ_API void sqz_model_free(sqz_model *m);

/* The tensor for (role, layer, param) or NULL. layer is -1 for global roles. */
SQZ_API sqz_tensor *sqz_model_get(const sqz_model *m, sqz_role role, int32_t layer, sqz_param param);
/* Index of the tensor named `name` (source name) or -1. */
SQZ_API int64_t sqz_model_find(const sqz_model *m, const char *name);

/* Appends a tensor. Copies `name`; the data pointer is stored as given (ownership
 * passes to the model if t->owned). Returns the new tensor or NULL (error set). */
SQZ_API sqz_tensor *sqz_model_add_tensor(sqz_model *m, const sqz_tensor *t);

/* Allocates model->layers for hp.n_layers and fills them with the default dims. */
SQZ_API sqz_status sqz_model_init_layers(sqz_model *m);

/* Number of parameters (a tied classifier is absent, so nothing is counted twice). */
SQZ_API int64_t sqz_model_param_count(const sqz_model *m);
/* Parameters one token uses: all of them in a dense model; in a mixture of experts the router and
 * hp.n_expert_used of each layer's experts (the others are counted out). */
SQZ_API int64_t sqz_model_active_param_count(const sqz_model *m);
/* Bytes of tensor data. */
SQZ_API int64_t sqz_model_data_bytes(const sqz_model *m);

/* Checks that every tensor's shape agrees with the hyperparameters and per-layer dims
 * and that the roles a family needs are present. Returns SQZ_ERR_SHAPE/SQZ_ERR_FORMAT
 * with a message naming the tensor. */
SQZ_API sqz_status sqz_model_validate(const sqz_model *m);
/* sqz_tensor_check_finite on every tensor: the first non-finite value, named. */
SQZ_API sqz_status sqz_model_check_finite(const sqz_model *m);

/* Makes the model own `buf` (freed with the model; freed at once on failure).
 * For loaders and passes. */
SQZ_API sqz_status sqz_model_keep(sqz_model *m, void *buf);
/* Makes the model own a file mapping its tensors borrow from (unmapped with the
 * model; at once on failure). */
SQZ_API sqz_status sqz_model_keep_mapping(sqz_model *m, sqz_mapping *map);

/* Family name: "llama" / "bert". */
SQZ_API const char *sqz_family_name(sqz_family f);
SQZ_API const char *sqz_rope_layout_name(sqz_rope_layout r);

#ifdef __cplusplus
}
#endif
#endif

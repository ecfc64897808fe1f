/*
 * sqz/family.h - what a transformer family is made of, as data: one table with a row per
 * architecture family (sqz_family of sqz/model.h), which compression and pruning passes
 * read instead of hard-coding llama or BERT.
 *
 * A row says:
 *   - the norm (RMSNorm or LayerNorm), where it sits (pre-norm: before attention and the
 *     FFN, the residual stream is never normalised; post-norm: after each residual add),
 *     and whether the FFN is gated;
 *   - the groups of linear layers that read the same input, in compression order, and
 *     where a smoothing vector s of each group's input (AWQ / SmoothQuant: x / s, W * s)
 *     can fold exactly: into the norm before the group, into the rows of the linear layer
 *     that produces the input, or nowhere;
 *   - the coupled structures a structural pruner removes together, as lists of members
 *     (role, param, axis, unit): one attention head, one FFN neuron, one hidden channel.
 *
 *                     llama (pre-RMSNorm, SwiGLU)        BERT (post-LayerNorm, GELU, biases)
 *   groups / fold     o      -> v rows (MHA only)        o      -> v rows (MHA only)
 *                     down   -> up rows                  down   -> nowhere (gelu(up) does not
 *                     q|k|v  -> attn_norm                          commute with a scale)
 *                     gate|up-> ffn_norm                 q|k|v  -> nowhere (post-norm: the
 *                                                        up     -> nowhere  input is also the
 *                                                                           residual stream)
 *   head h            rows of q and its bias, the rows of its KV head in k/v (and biases),
 *                     the columns of o                   (the same; BERT has no GQA)
 *   neuron j          row j of gate and up (+ biases),   row j of up (+ bias), column j of down
 *                     column j of down
 *   channel c         column c of the token (position, type) embeddings and of every linear
 *                     layer reading the residual stream (q, k, v, gate, up, classifier), row c
 *                     of every linear layer writing it (o, down) and of their biases, entry c
 *                     of every norm weight and bias; BERT's pooler (d_model, d_model) loses
 *                     row, column and bias entry c.
 *
 * The o -> v fold needs one row of v per input of o: n_heads == n_kv_heads in that layer.
 * Under GQA a row of v feeds n_heads / n_kv_heads inputs of o, which may want different
 * scales, so the group folds nowhere there. sqz_family_linear_groups resolves this per layer.
 *
 * ---- Rotary embeddings and head rows -------------------------------------------------------
 * Rotation pairs never cross a head: INTERLEAVED pairs rows (2i, 2i+1) of a head, HALF pairs
 * (i, i + head_dim/2) of a head (runtime/ops.c rope_rows, formats/export.c). In both
 * layouts head h is rows [h*head_dim, (h+1)*head_dim) of q (and KV head g the same rows
 * of k and v), so keeping or dropping whole heads keeps the model's rope_layout valid and
 * needs no permutation. head_dim never changes.
 *
 * ---- Hidden channels and the norms' statistics -----------------------------------------
 * Removing channels makes every norm compute its statistics over the kept channels only:
 * RMSNorm divides by sqrt(sum over kept x_c^2 / d' + eps) with d' = kept channels, so even
 * channels that are zero everywhere change the result: with sum S over the kept channels
 * the norm's factor goes from 1/sqrt(S/d + eps) to 1/sqrt(S/d' + eps). No compensation is
 * applied (for RMSNorm it would be exact for zero channels only: the pruned model equals
 * the unpruned one with those channels zeroed, every RMSNorm weight times sqrt(d'/d) and
 * eps times d'/d; the test checks exactly this). LayerNorm's mean and variance are both
 * taken over the kept channels. An encoder's output states (sqz_encode, sqz_embed) lose the
 * removed channels: its embedding dimension becomes d'.
 */
#ifndef SQZ_FAMILY_H
#define SQZ_FAMILY_H

#include <stdbool.h>
#include <stdint.h>

#include "sqz/api.h"
#include "sqz/model.h"
#include "sqz/status.h"
#include "sqz/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum sqz_norm_kind {
    SQZ_NORM_RMS = 0,   /* x / sqrt(mean(x^2) + eps) * w */
    SQZ_NORM_LAYER = 1, /* (x - mean) / sqrt(var + eps) * w + b */
} sqz_norm_kind;

/* Where a smoothing vector of a group's input folds (the values of compress/'s sqz__fold). */
typedef enum sqz_fold {
    SQZ_FOLD_NORM = 0,   /* into the weight (and bias) of the norm before the group */
    SQZ_FOLD_LINEAR = 1, /* into the rows (and bias) of the previous linear layer (v before o, up before down) */
    SQZ_FOLD_NONE = 2,   /* nowhere: keep it as the layer's in_scale, or do not smooth */
} sqz_fold;

#define SQZ_LINEAR_GROUP_MAX 3  /* members of one group (q|k|v) */
#define SQZ_LINEAR_GROUPS_MAX 4 /* groups of one block */

/* Linear layers of one block that read the same input. */
typedef struct sqz_linear_group {
    sqz_role roles[SQZ_LINEAR_GROUP_MAX]; /* roles[0..n) */
    int n;
    sqz_fold fold;
    sqz_role fold_role;  /* the norm or the previous linear layer; SQZ_ROLE_COUNT when fold is NONE */
    bool fold_needs_mha; /* the LINEAR fold holds only where n_heads == n_kv_heads (o into v); in the
                            table; sqz_family_linear_groups has already applied it */
} sqz_linear_group;

/* What one index of a structure counts, along the member's axis. */
typedef enum sqz_unit {
    SQZ_UNIT_HEAD = 0,    /* query head h: head_dim consecutive rows / columns from h * head_dim */
    SQZ_UNIT_KV_HEAD = 1, /* key/value head g: head_dim rows from g * head_dim; it serves query heads
                             [g * G, (g+1) * G), G = n_heads / n_kv_heads */
    SQZ_UNIT_NEURON = 2,  /* one FFN neuron: one row / column */
    SQZ_UNIT_CHANNEL = 3, /* one hidden channel: one row / column / entry */
} sqz_unit;

/* One tensor a structure spans. Members whose tensor a model lacks (biases of a bias-free
 * model, a tied classifier, BERT's pooler) are skipped. Per-layer roles (sqz_role_per_layer)
 * are taken in the structure's layer, or in every layer for channels. */
typedef struct sqz_member {
    sqz_role role;
    sqz_param param;
    int axis;      /* 0: rows of a 2-D weight, or the entries of a 1-D tensor; 1: columns */
    sqz_unit unit;
} sqz_member;

typedef enum sqz_structure {
    SQZ_STRUCT_HEAD = 0,    /* an attention head of one layer */
    SQZ_STRUCT_NEURON = 1,  /* an FFN neuron of one layer */
    SQZ_STRUCT_CHANNEL = 2, /* a hidden channel of the whole model */
    SQZ_STRUCT_COUNT
} sqz_structure;

typedef struct sqz_coupled {
    const sqz_member *members;
    int n_members;
} sqz_coupled;

/* How a family encodes positions. */
typedef enum sqz_positions {
    SQZ_POS_ROTARY = 0,   /* RoPE on q and k (hp.rope_theta, hp.rope_layout) */
    SQZ_POS_ABSOLUTE = 1, /* a learned position embedding added to the tokens' (SQZ_ROLE_POS_EMBD) */
} sqz_positions;

/* One row of the family table. Static storage. Everything the library needs to know about a
 * family is here or in the rows keyed by family beside the code that needs it: the runtime's
 * passes (runtime/family_ops.c), the HF tensor names and config keys (formats/hf_names.c,
 * formats/hf_config.c) and the GGUF architectures (formats/gguf_names.c). */
typedef struct sqz_family_info {
    sqz_family family;
    sqz_norm_kind norm;
    bool pre_norm;   /* norm before attention / FFN (llama) vs after each residual add (BERT) */
    bool gated_ffn;  /* act(gate) * up (SwiGLU): 3 FFN matrices; else act(up): 2 */
    const sqz_linear_group *groups; /* in compression order: o, down, q|k|v, gate|up (or up) */
    int n_groups;
    sqz_coupled structures[SQZ_STRUCT_COUNT];

    /* ---- the architecture ---- */
    const char *name;      /* "llama", "bert" (sqz_family_name) */
    bool lm_head;          /* a decoder with a classifier (output, or the token embedding when tied):
                              sqz_forward, perplexity, layer dropping; false: an encoder (sqz_encode,
                              sqz_embed, compared by its embeddings) */
    bool causal;           /* attention sees earlier positions only */
    sqz_positions positions;
    bool token_types;      /* token type (segment) embeddings: hp.n_token_types, SQZ_ROLE_TYPE_EMBD */
    const sqz_role *layer_roles; /* the weights every layer must have (sqz_model_validate) */
    int n_layer_roles;
    bool final_norm;       /* SQZ_ROLE_OUTPUT_NORM is required */
    bool qkv_bias_by_hparam; /* q/k/v biases only where hp.attn_bias says so (the runtime skips none,
                                llama.cpp applies them); false: always allowed */
    /* ---- what the tools need ---- */
    int64_t eval_ctx;      /* default evaluation context (eval, compress --eval): llama.cpp's 512 for
                              decoders, sentence-transformers' 256 for MiniLM */
    bool prune_channels;   /* hidden-channel pruning (--prune channels=) is supported */
    bool bias_siblings;    /* a compensation bias on o (down) also puts zero biases on q, k, v (gate,
                              up) and sets hp.attn_bias: the HF config ties them (attention_bias,
                              mlp_bias) */
    /* ---- what the writers need ---- */
    const char *gguf_arch; /* the GGUF general.architecture its models are written as when their own
                              (hp.arch) has no GGUF row of that family (mistral, smollm -> llama):
                              formats/gguf_names.c */
    bool bundle;           /* an sqz bundle (the edge runtime) can hold it */
    bool hf_head_dim;      /* its HF config states head_dim apart from hidden_size (LlamaConfig's
                              head_dim); false: n_heads x head_dim must be hidden_size (BertModel) */
    /* ---- what newer families add (false / NULL: as llama) ---- */
    bool embed_scale_sqrt_d; /* token embeddings times sqrt(d_model) (Gemma; llama.cpp's sqrtf(n_embd)) */
    bool hf_norm_plus_one; /* HF stores RMSNorm weights w and computes x * (1 + w) (Gemma); sqz keeps
                              1 + w, as llama.cpp's GGUF does: the HF reader adds 1, the writer subtracts it */
    const char *no_rotation; /* why rotations of the residual stream are refused; NULL: allowed */
    bool no_out_bias;      /* llama.cpp's loader for it takes no bias on o / down (qwen3, gemma3, phi3): pruning's
                              bias compensation, which puts one there, is refused */
    bool gguf_uniform;     /* llama.cpp's loader for its GGUF architecture sizes every layer from one head count
                              and FFN width: per-layer dimensions (pruning) are refused for a GGUF output */
    bool heads_fill_width; /* heads x head_dim must stay d_model (llama.cpp's phi3: attn_output is n_embd x
                              n_embd): head pruning is refused */
    bool hf_fused;         /* its HF files fuse q|k|v and gate|up into one tensor each (Phi-3): float ones are
                              fused again on write, sqz's int8/int4 layouts of them are refused */
    bool experts;          /* its FFN is a mixture of experts: a router (FFN_GATE_INP) and the experts stacked in
                              FFN_{GATE,UP,DOWN}_EXPS, hp.n_expert_used of layers[l].n_expert per token */
    const sqz_role *extra_global; /* global tensors it may carry beyond embeddings, norms and classifier
                                     (rope frequency factors) */
    int n_extra_global;
} sqz_family_info;

/* The table row of family f; NULL when f is out of range (or a registered slot is empty). */
SQZ_API const sqz_family_info *sqz_family_get(sqz_family f);

/* Fills out[0..n) (capacity SQZ_LINEAR_GROUPS_MAX) with the linear groups of block `layer`
 * of m, in compression order, the MHA-only fold of o into v resolved for that layer's heads
 * (fold NONE and fold_role SQZ_ROLE_COUNT where it does not hold). Returns n (4 for llama
 * and BERT), or 0 when the family or the layer is out of range. */
SQZ_API int sqz_family_linear_groups(const sqz_model *m, int32_t layer, sqz_linear_group *out);

/*
 * The structural edits (whole edits of sqz/edit.h: the model must validate before, it
 * validates after, and on any error the model is unchanged). Every member of the
 * structure (sqz_family_info.structures) keeps the rows / columns / entries of the kept
 * indices, then the per-layer dimensions (or hp.d_model) follow. Indices are strictly
 * increasing. The new tensors are heap buffers owned by the model; all of them are built
 * before any tensor changes, so peak memory is the old and the new members together.
 * Columns of block-quantized or sqz-quantized members are refused (SQZ_ERR_UNSUPPORTED
 * naming the tensor, as sqz_tensor_keep_cols): prune before quantizing. Sessions made
 * before must be made again.
 */

/* Keeps query heads keep[0..n) of layer `layer`. A KV head is kept when at least one of its
 * query heads is; every kept KV head must keep the same number of query heads (so n_heads
 * stays a multiple of n_kv_heads and query head i still reads KV head i / G): dropping all
 * query heads of a KV group removes the group, dropping the same number from every group
 * thins them. New dims: n_heads = n, n_kv_heads = kept groups, head_dim unchanged.
 * Returns SQZ_OK; SQZ_ERR_INVALID_ARG (bad list, uneven groups); SQZ_ERR_UNSUPPORTED;
 * the model's validation error; SQZ_ERR_NOMEM. */
SQZ_API sqz_status sqz_model_keep_heads(sqz_model *m, int32_t layer, const int64_t *keep, int64_t n);

/* Keeps FFN neurons keep[0..n) of layer `layer`; its d_ff becomes n.
 * Returns as sqz_model_keep_heads. */
SQZ_API sqz_status sqz_model_keep_neurons(sqz_model *m, int32_t layer, const int64_t *keep, int64_t n);

/* Keeps experts keep[0..n) of a mixture's layer `layer`: their matrices of the stacked FFN_*_EXPS tensors and
 * their rows of the router (FFN_GATE_INP), in that order; layers[layer].n_expert becomes n (at least
 * hp.n_expert_used). Float and GGUF block types alike (whole experts move); a whole edit (core/experts.c).
 * Returns as sqz_model_keep_heads; SQZ_ERR_ARCH for a model without experts. */
SQZ_API sqz_status sqz_model_keep_experts(sqz_model *m, int32_t layer, const int64_t *keep, int64_t n);

/* Pads the FFN of layer `layer` with zero neurons up to d_ff (>= its width): zero rows in gate
 * and up (and their biases), zero columns in down, so the layer computes exactly what it did
 * (act(0) * 0 = 0) while down's input width becomes, e.g., a multiple of a quantization block.
 * Rows are appended in the member's own dtype (zero bytes are the value 0 in every dtype, GGUF
 * blocks included); columns too for scalar dtypes, while a block-quantized down becomes f32.
 * sqz-quantized members (qp) are refused (SQZ_ERR_UNSUPPORTED). A whole edit (core/ffn_pad.c).
 * Returns as sqz_model_keep_heads. */
SQZ_API sqz_status sqz_model_pad_neurons(sqz_model *m, int32_t layer, int64_t d_ff);

/* Keeps hidden channels keep[0..n) everywhere; hp.d_model becomes n (heads, head_dim and
 * d_ff stay). See "Hidden channels and the norms' statistics" above for what it does to the
 * norms. Returns as sqz_model_keep_heads. */
SQZ_API sqz_status sqz_model_keep_channels(sqz_model *m, const int64_t *keep, int64_t n);

#ifdef __cplusplus
}
#endif
#endif

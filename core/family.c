/* core/family.c - the family table (sqz/family.h): linear groups and smoothing folds, the
 * coupled structures of structural pruning, and the edits that keep heads / neurons /
 * channels through them. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/edit_internal.h"
#include "core/family_internal.h"
#include "sqz/family.h"

#define N_OF(a) ((int)(sizeof(a) / sizeof((a)[0])))
#define W SQZ_PARAM_WEIGHT
#define B SQZ_PARAM_BIAS

/* ---- llama: pre-RMSNorm, SwiGLU, GQA, optional q/k/v biases (qwen2) ---- */
static const sqz_linear_group llama_groups[] = {
    {{SQZ_ROLE_ATTN_OUT}, 1, SQZ_FOLD_LINEAR, SQZ_ROLE_ATTN_V, true},
    {{SQZ_ROLE_FFN_DOWN}, 1, SQZ_FOLD_LINEAR, SQZ_ROLE_FFN_UP, false},
    {{SQZ_ROLE_ATTN_Q, SQZ_ROLE_ATTN_K, SQZ_ROLE_ATTN_V}, 3, SQZ_FOLD_NORM, SQZ_ROLE_ATTN_NORM, false},
    {{SQZ_ROLE_FFN_GATE, SQZ_ROLE_FFN_UP}, 2, SQZ_FOLD_NORM, SQZ_ROLE_FFN_NORM, false},
};
static const sqz_member llama_head[] = {
    {SQZ_ROLE_ATTN_Q, W, 0, SQZ_UNIT_HEAD},    {SQZ_ROLE_ATTN_Q, B, 0, SQZ_UNIT_HEAD},
    {SQZ_ROLE_ATTN_K, W, 0, SQZ_UNIT_KV_HEAD}, {SQZ_ROLE_ATTN_K, B, 0, SQZ_UNIT_KV_HEAD},
    {SQZ_ROLE_ATTN_V, W, 0, SQZ_UNIT_KV_HEAD}, {SQZ_ROLE_ATTN_V, B, 0, SQZ_UNIT_KV_HEAD},
    {SQZ_ROLE_ATTN_OUT, W, 1, SQZ_UNIT_HEAD},
};
static const sqz_member llama_neuron[] = {
    {SQZ_ROLE_FFN_GATE, W, 0, SQZ_UNIT_NEURON}, {SQZ_ROLE_FFN_GATE, B, 0, SQZ_UNIT_NEURON},
    {SQZ_ROLE_FFN_UP, W, 0, SQZ_UNIT_NEURON},   {SQZ_ROLE_FFN_UP, B, 0, SQZ_UNIT_NEURON},
    {SQZ_ROLE_FFN_DOWN, W, 1, SQZ_UNIT_NEURON},
};
static const sqz_member llama_channel[] = {
    {SQZ_ROLE_TOKEN_EMBD, W, 1, SQZ_UNIT_CHANNEL}, {SQZ_ROLE_OUTPUT, W, 1, SQZ_UNIT_CHANNEL},
    {SQZ_ROLE_OUTPUT_NORM, W, 0, SQZ_UNIT_CHANNEL}, {SQZ_ROLE_OUTPUT_NORM, B, 0, SQZ_UNIT_CHANNEL},
    {SQZ_ROLE_ATTN_NORM, W, 0, SQZ_UNIT_CHANNEL}, {SQZ_ROLE_ATTN_NORM, B, 0, SQZ_UNIT_CHANNEL},
    {SQZ_ROLE_ATTN_Q, W, 1, SQZ_UNIT_CHANNEL},    {SQZ_ROLE_ATTN_K, W, 1, SQZ_UNIT_CHANNEL},
    {SQZ_ROLE_ATTN_V, W, 1, SQZ_UNIT_CHANNEL},    {SQZ_ROLE_ATTN_OUT, W, 0, SQZ_UNIT_CHANNEL},
    {SQZ_ROLE_ATTN_OUT, B, 0, SQZ_UNIT_CHANNEL},  {SQZ_ROLE_FFN_NORM, W, 0, SQZ_UNIT_CHANNEL},
    {SQZ_ROLE_FFN_NORM, B, 0, SQZ_UNIT_CHANNEL},  {SQZ_ROLE_FFN_GATE, W, 1, SQZ_UNIT_CHANNEL},
    {SQZ_ROLE_FFN_UP, W, 1, SQZ_UNIT_CHANNEL},    {SQZ_ROLE_FFN_DOWN, W, 0, SQZ_UNIT_CHANNEL},
    {SQZ_ROLE_FFN_DOWN, B, 0, SQZ_UNIT_CHANNEL},
};

/* ---- BERT: post-LayerNorm, GELU (ungated), biases everywhere, no GQA ---- */
static const sqz_linear_group bert_groups[] = {
    /* post-norm: the inputs of q|k|v and up are also the residual stream, and down reads
     * gelu(up): nothing to fold into but v (before o) */
    {{SQZ_ROLE_ATTN_OUT}, 1, SQZ_FOLD_LINEAR, SQZ_ROLE_ATTN_V, true},
    {{SQZ_ROLE_FFN_DOWN}, 1, SQZ_FOLD_NONE, SQZ_ROLE_COUNT, false},
    {{SQZ_ROLE_ATTN_Q, SQZ_ROLE_ATTN_K, SQZ_ROLE_ATTN_V}, 3, SQZ_FOLD_NONE, SQZ_ROLE_COUNT, false},
    {{SQZ_ROLE_FFN_UP}, 1, SQZ_FOLD_NONE, SQZ_ROLE_COUNT, false},
};
static const sqz_member bert_neuron[] = {
    {SQZ_ROLE_FFN_UP, W, 0, SQZ_UNIT_NEURON},
    {SQZ_ROLE_FFN_UP, B, 0, SQZ_UNIT_NEURON},
    {SQZ_ROLE_FFN_DOWN, W, 1, SQZ_UNIT_NEURON},
};
static const sqz_member bert_channel[] = {
    {SQZ_ROLE_TOKEN_EMBD, W, 1, SQZ_UNIT_CHANNEL},   {SQZ_ROLE_POS_EMBD, W, 1, SQZ_UNIT_CHANNEL},
    {SQZ_ROLE_TYPE_EMBD, W, 1, SQZ_UNIT_CHANNEL},    {SQZ_ROLE_EMBD_NORM, W, 0, SQZ_UNIT_CHANNEL},
    {SQZ_ROLE_EMBD_NORM, B, 0, SQZ_UNIT_CHANNEL},    {SQZ_ROLE_POOLER, W, 0, SQZ_UNIT_CHANNEL},
    {SQZ_ROLE_POOLER, W, 1, SQZ_UNIT_CHANNEL},       {SQZ_ROLE_POOLER, B, 0, SQZ_UNIT_CHANNEL},
    {SQZ_ROLE_ATTN_Q, W, 1, SQZ_UNIT_CHANNEL},       {SQZ_ROLE_ATTN_K, W, 1, SQZ_UNIT_CHANNEL},
    {SQZ_ROLE_ATTN_V, W, 1, SQZ_UNIT_CHANNEL},       {SQZ_ROLE_ATTN_OUT, W, 0, SQZ_UNIT_CHANNEL},
    {SQZ_ROLE_ATTN_OUT, B, 0, SQZ_UNIT_CHANNEL},     {SQZ_ROLE_ATTN_OUT_NORM, W, 0, SQZ_UNIT_CHANNEL},
    {SQZ_ROLE_ATTN_OUT_NORM, B, 0, SQZ_UNIT_CHANNEL}, {SQZ_ROLE_FFN_UP, W, 1, SQZ_UNIT_CHANNEL},
    {SQZ_ROLE_FFN_DOWN, W, 0, SQZ_UNIT_CHANNEL},     {SQZ_ROLE_FFN_DOWN, B, 0, SQZ_UNIT_CHANNEL},
    {SQZ_ROLE_LAYER_OUT_NORM, W, 0, SQZ_UNIT_CHANNEL}, {SQZ_ROLE_LAYER_OUT_NORM, B, 0, SQZ_UNIT_CHANNEL},
};

/* The weights every layer must have. */
static const sqz_role llama_layer_roles[] = {SQZ_ROLE_ATTN_NORM, SQZ_ROLE_ATTN_Q, SQZ_ROLE_ATTN_K,
                                             SQZ_ROLE_ATTN_V, SQZ_ROLE_ATTN_OUT, SQZ_ROLE_FFN_NORM,
                                             SQZ_ROLE_FFN_GATE, SQZ_ROLE_FFN_UP, SQZ_ROLE_FFN_DOWN};
static const sqz_role bert_layer_roles[] = {SQZ_ROLE_ATTN_Q, SQZ_ROLE_ATTN_K, SQZ_ROLE_ATTN_V,
                                            SQZ_ROLE_ATTN_OUT, SQZ_ROLE_ATTN_OUT_NORM, SQZ_ROLE_FFN_UP,
                                            SQZ_ROLE_FFN_DOWN, SQZ_ROLE_LAYER_OUT_NORM};

/* qwen3: llama's, with the per-head q/k norms (head_dim entries shared by every head: pruning
 * heads keeps them whole; channels do not touch them). */
static const sqz_role qwen3_layer_roles[] = {SQZ_ROLE_ATTN_NORM, SQZ_ROLE_ATTN_Q,      SQZ_ROLE_ATTN_K,
                                             SQZ_ROLE_ATTN_V,    SQZ_ROLE_ATTN_Q_NORM, SQZ_ROLE_ATTN_K_NORM,
                                             SQZ_ROLE_ATTN_OUT,  SQZ_ROLE_FFN_NORM,    SQZ_ROLE_FFN_GATE,
                                             SQZ_ROLE_FFN_UP,    SQZ_ROLE_FFN_DOWN};
/* gemma3: qwen3's and the norms of attention's and the FFN's outputs (sandwich norms). */
static const sqz_role gemma3_layer_roles[] = {
    SQZ_ROLE_ATTN_NORM, SQZ_ROLE_ATTN_Q,   SQZ_ROLE_ATTN_K,   SQZ_ROLE_ATTN_V,      SQZ_ROLE_ATTN_Q_NORM,
    SQZ_ROLE_ATTN_K_NORM, SQZ_ROLE_ATTN_OUT, SQZ_ROLE_ATTN_POST_NORM, SQZ_ROLE_FFN_NORM, SQZ_ROLE_FFN_GATE,
    SQZ_ROLE_FFN_UP,    SQZ_ROLE_FFN_DOWN, SQZ_ROLE_FFN_POST_NORM};
static const sqz_member gemma3_channel[] = {
    {SQZ_ROLE_TOKEN_EMBD, W, 1, SQZ_UNIT_CHANNEL},     {SQZ_ROLE_OUTPUT, W, 1, SQZ_UNIT_CHANNEL},
    {SQZ_ROLE_OUTPUT_NORM, W, 0, SQZ_UNIT_CHANNEL},    {SQZ_ROLE_ATTN_NORM, W, 0, SQZ_UNIT_CHANNEL},
    {SQZ_ROLE_ATTN_Q, W, 1, SQZ_UNIT_CHANNEL},         {SQZ_ROLE_ATTN_K, W, 1, SQZ_UNIT_CHANNEL},
    {SQZ_ROLE_ATTN_V, W, 1, SQZ_UNIT_CHANNEL},         {SQZ_ROLE_ATTN_OUT, W, 0, SQZ_UNIT_CHANNEL},
    {SQZ_ROLE_ATTN_POST_NORM, W, 0, SQZ_UNIT_CHANNEL}, {SQZ_ROLE_FFN_NORM, W, 0, SQZ_UNIT_CHANNEL},
    {SQZ_ROLE_FFN_GATE, W, 1, SQZ_UNIT_CHANNEL},       {SQZ_ROLE_FFN_UP, W, 1, SQZ_UNIT_CHANNEL},
    {SQZ_ROLE_FFN_DOWN, W, 0, SQZ_UNIT_CHANNEL},       {SQZ_ROLE_FFN_POST_NORM, W, 0, SQZ_UNIT_CHANNEL},
};
/* The mixtures of experts: attention as their dense family's, the router and the stacked experts in
 * place of the FFN. Their FFN is not a linear group (compress refuses them before any work: per-expert
 * calibration is still to come), and only heads are a prunable structure. */
static const sqz_linear_group moe_groups[] = {
    {{SQZ_ROLE_ATTN_OUT}, 1, SQZ_FOLD_LINEAR, SQZ_ROLE_ATTN_V, true},
    {{SQZ_ROLE_ATTN_Q, SQZ_ROLE_ATTN_K, SQZ_ROLE_ATTN_V}, 3, SQZ_FOLD_NORM, SQZ_ROLE_ATTN_NORM, false},
};
static const char moe_no_rotation[] = "the router and the experts read the residual stream and are not rotated yet";
static const sqz_role mixtral_layer_roles[] = {SQZ_ROLE_ATTN_NORM,    SQZ_ROLE_ATTN_Q,        SQZ_ROLE_ATTN_K,
                                               SQZ_ROLE_ATTN_V,       SQZ_ROLE_ATTN_OUT,      SQZ_ROLE_FFN_NORM,
                                               SQZ_ROLE_FFN_GATE_INP, SQZ_ROLE_FFN_GATE_EXPS, SQZ_ROLE_FFN_UP_EXPS,
                                               SQZ_ROLE_FFN_DOWN_EXPS};
static const sqz_role qwen3moe_layer_roles[] = {
    SQZ_ROLE_ATTN_NORM,   SQZ_ROLE_ATTN_Q,       SQZ_ROLE_ATTN_K,        SQZ_ROLE_ATTN_V,
    SQZ_ROLE_ATTN_Q_NORM, SQZ_ROLE_ATTN_K_NORM,  SQZ_ROLE_ATTN_OUT,      SQZ_ROLE_FFN_NORM,
    SQZ_ROLE_FFN_GATE_INP, SQZ_ROLE_FFN_GATE_EXPS, SQZ_ROLE_FFN_UP_EXPS, SQZ_ROLE_FFN_DOWN_EXPS};

/* Global tensors a family may carry besides embeddings, norms and the classifier. */
static const sqz_role llama_extra_global[] = {SQZ_ROLE_ROPE_FREQS};
static const sqz_role phi3_extra_global[] = {SQZ_ROLE_ROPE_FACTORS_LONG, SQZ_ROLE_ROPE_FACTORS_SHORT};

/* One row per family. Adding a family: a value of sqz_family (sqz/model.h), a row here, its
 * runtime passes and their row (runtime/family_ops.c), and its rows in formats/ (HF names and
 * config keys, GGUF architecture) if it is read from files. */
static const sqz_family_info families[] = {
    [SQZ_FAMILY_LLAMA] = {
        .family = SQZ_FAMILY_LLAMA, .norm = SQZ_NORM_RMS, .pre_norm = true, .gated_ffn = true,
        .groups = llama_groups, .n_groups = N_OF(llama_groups),
        .structures = {[SQZ_STRUCT_HEAD] = {llama_head, N_OF(llama_head)},
                       [SQZ_STRUCT_NEURON] = {llama_neuron, N_OF(llama_neuron)},
                       [SQZ_STRUCT_CHANNEL] = {llama_channel, N_OF(llama_channel)}},
        .name = "llama", .lm_head = true, .causal = true, .positions = SQZ_POS_ROTARY, .token_types = false,
        .layer_roles = llama_layer_roles, .n_layer_roles = N_OF(llama_layer_roles), .final_norm = true,
        .qkv_bias_by_hparam = true, .eval_ctx = 512, .prune_channels = true, .bias_siblings = true,
        .gguf_arch = "llama", .bundle = true, .hf_head_dim = true,
        .extra_global = llama_extra_global, .n_extra_global = N_OF(llama_extra_global),
    },
    [SQZ_FAMILY_QWEN3] = {
        .family = SQZ_FAMILY_QWEN3, .norm = SQZ_NORM_RMS, .pre_norm = true, .gated_ffn = true,
        .groups = llama_groups, .n_groups = N_OF(llama_groups),
        .structures = {[SQZ_STRUCT_HEAD] = {llama_head, N_OF(llama_head)},
                       [SQZ_STRUCT_NEURON] = {llama_neuron, N_OF(llama_neuron)},
                       [SQZ_STRUCT_CHANNEL] = {llama_channel, N_OF(llama_channel)}},
        .no_out_bias = true, .gguf_uniform = true,
        .name = "qwen3", .lm_head = true, .causal = true, .positions = SQZ_POS_ROTARY, .token_types = false,
        .layer_roles = qwen3_layer_roles, .n_layer_roles = N_OF(qwen3_layer_roles), .final_norm = true,
        .qkv_bias_by_hparam = true, .eval_ctx = 512, .prune_channels = true, .bias_siblings = true,
        .gguf_arch = "qwen3", .bundle = false, .hf_head_dim = true,
    },
    /* Gemma 3: channels are not pruned (the embedding scale is sqrt of the width llama.cpp reads, so a
     * narrower model would be scaled differently); rotations do not pass the post-norms. */
    [SQZ_FAMILY_GEMMA3] = {
        .family = SQZ_FAMILY_GEMMA3, .norm = SQZ_NORM_RMS, .pre_norm = true, .gated_ffn = true,
        .groups = llama_groups, .n_groups = N_OF(llama_groups),
        .structures = {[SQZ_STRUCT_HEAD] = {llama_head, N_OF(llama_head)},
                       [SQZ_STRUCT_NEURON] = {llama_neuron, N_OF(llama_neuron)},
                       [SQZ_STRUCT_CHANNEL] = {gemma3_channel, N_OF(gemma3_channel)}},
        .no_out_bias = true, .gguf_uniform = true,
        .name = "gemma3", .lm_head = true, .causal = true, .positions = SQZ_POS_ROTARY, .token_types = false,
        .layer_roles = gemma3_layer_roles, .n_layer_roles = N_OF(gemma3_layer_roles), .final_norm = true,
        .qkv_bias_by_hparam = true, .eval_ctx = 512, .prune_channels = false, .bias_siblings = true,
        .gguf_arch = "gemma3", .bundle = false, .hf_head_dim = true,
        .embed_scale_sqrt_d = true, .hf_norm_plus_one = true,
        .no_rotation = "the norms after attention and after the FFN scale channels one by one, which a rotation "
                       "of the residual stream does not commute with",
    },
    [SQZ_FAMILY_PHI3] = {
        .family = SQZ_FAMILY_PHI3, .norm = SQZ_NORM_RMS, .pre_norm = true, .gated_ffn = true,
        .groups = llama_groups, .n_groups = N_OF(llama_groups),
        .structures = {[SQZ_STRUCT_HEAD] = {llama_head, N_OF(llama_head)},
                       [SQZ_STRUCT_NEURON] = {llama_neuron, N_OF(llama_neuron)},
                       [SQZ_STRUCT_CHANNEL] = {llama_channel, N_OF(llama_channel)}},
        .hf_fused = true, .no_out_bias = true, .gguf_uniform = true, .heads_fill_width = true,
        .name = "phi3", .lm_head = true, .causal = true, .positions = SQZ_POS_ROTARY, .token_types = false,
        .layer_roles = llama_layer_roles, .n_layer_roles = N_OF(llama_layer_roles), .final_norm = true,
        .qkv_bias_by_hparam = true, .eval_ctx = 512, .prune_channels = true, .bias_siblings = true,
        .gguf_arch = "phi3", .bundle = false, .hf_head_dim = false,
        .extra_global = phi3_extra_global, .n_extra_global = N_OF(phi3_extra_global),
    },
    [SQZ_FAMILY_QWEN3MOE] = {
        .family = SQZ_FAMILY_QWEN3MOE, .norm = SQZ_NORM_RMS, .pre_norm = true, .gated_ffn = true,
        .groups = moe_groups, .n_groups = N_OF(moe_groups),
        .structures = {[SQZ_STRUCT_HEAD] = {llama_head, N_OF(llama_head)}},
        .no_out_bias = true, .gguf_uniform = true,
        .name = "qwen3moe", .lm_head = true, .causal = true, .positions = SQZ_POS_ROTARY, .token_types = false,
        .layer_roles = qwen3moe_layer_roles, .n_layer_roles = N_OF(qwen3moe_layer_roles), .final_norm = true,
        .qkv_bias_by_hparam = true, .eval_ctx = 512, .prune_channels = false, .bias_siblings = true,
        .gguf_arch = "qwen3moe", .bundle = false, .hf_head_dim = true,
        .experts = true, .no_rotation = moe_no_rotation,
    },
    [SQZ_FAMILY_MIXTRAL] = {
        .family = SQZ_FAMILY_MIXTRAL, .norm = SQZ_NORM_RMS, .pre_norm = true, .gated_ffn = true,
        .groups = moe_groups, .n_groups = N_OF(moe_groups),
        .structures = {[SQZ_STRUCT_HEAD] = {llama_head, N_OF(llama_head)}},
        .no_out_bias = true, .gguf_uniform = true,
        .name = "mixtral", .lm_head = true, .causal = true, .positions = SQZ_POS_ROTARY, .token_types = false,
        .layer_roles = mixtral_layer_roles, .n_layer_roles = N_OF(mixtral_layer_roles), .final_norm = true,
        .qkv_bias_by_hparam = true, .eval_ctx = 512, .prune_channels = false, .bias_siblings = true,
        .gguf_arch = "llama", .bundle = false, .hf_head_dim = true,
        .experts = true, .no_rotation = moe_no_rotation,
    },
    /* BERT's head members are llama's: q/k/v rows and biases, o columns (n_kv_heads == n_heads) */
    [SQZ_FAMILY_BERT] = {
        .family = SQZ_FAMILY_BERT, .norm = SQZ_NORM_LAYER, .pre_norm = false, .gated_ffn = false,
        .groups = bert_groups, .n_groups = N_OF(bert_groups),
        .structures = {[SQZ_STRUCT_HEAD] = {llama_head, N_OF(llama_head)},
                       [SQZ_STRUCT_NEURON] = {bert_neuron, N_OF(bert_neuron)},
                       [SQZ_STRUCT_CHANNEL] = {bert_channel, N_OF(bert_channel)}},
        .name = "bert", .lm_head = false, .causal = false, .positions = SQZ_POS_ABSOLUTE, .token_types = true,
        .layer_roles = bert_layer_roles, .n_layer_roles = N_OF(bert_layer_roles), .final_norm = false,
        .qkv_bias_by_hparam = false, .eval_ctx = 256, .prune_channels = false, .bias_siblings = false,
        .gguf_arch = "bert", .bundle = false, .hf_head_dim = false,
    },
};
_Static_assert(N_OF(families) == SQZ_FAMILY_COUNT, "one row per sqz_family");

/* Rows registered at run time (sqz__family_register): tests define a family through the table. */
#define EXTRA_FAMILIES 4
static const sqz_family_info *extra[EXTRA_FAMILIES];

const sqz_family_info *sqz_family_get(sqz_family f) {
    if ((unsigned)f < (unsigned)N_OF(families)) return &families[f];
    if ((unsigned)f - SQZ_FAMILY_COUNT < EXTRA_FAMILIES) return extra[(unsigned)f - SQZ_FAMILY_COUNT];
    return NULL;
}

const char *sqz_family_name(sqz_family f) {
    const sqz_family_info *fi = sqz_family_get(f);
    return fi && fi->name ? fi->name : "unknown";
}

sqz_status sqz__family_register(sqz_family_info *row, sqz_family *out) {
    for (unsigned i = 0; i < EXTRA_FAMILIES; i++) {
        if (extra[i]) continue;
        row->family = (sqz_family)(SQZ_FAMILY_COUNT + i);
        extra[i] = row;
        *out = row->family;
        return SQZ_OK;
    }
    return SQZ_ERROR(SQZ_ERR_UNSUPPORTED, "family table: no free slot for family '%s'", row->name);
}

int sqz_family_linear_groups(const sqz_model *m, int32_t layer, sqz_linear_group *out) {
    const sqz_family_info *fi = sqz_family_get(m->hp.family);
    if (!fi || !m->layers || layer < 0 || layer >= m->hp.n_layers) return 0;
    const sqz_layer_dims *ld = &m->layers[layer];
    const bool mha = ld->n_heads == ld->n_kv_heads;
    for (int i = 0; i < fi->n_groups; i++) {
        out[i] = fi->groups[i];
        if (out[i].fold_needs_mha && !mha) {
            out[i].fold = SQZ_FOLD_NONE;
            out[i].fold_role = SQZ_ROLE_COUNT;
        }
    }
    return fi->n_groups;
}

/* ---- applying a structure ----------------------------------------------------------------- */

/* The kept rows / columns of every unit: idx[unit][0..n[unit]). */
typedef struct keep_plan {
    int64_t *idx[SQZ_UNIT_CHANNEL + 1];
    int64_t n[SQZ_UNIT_CHANNEL + 1];
} keep_plan;

static void plan_free(keep_plan *p) {
    for (int u = 0; u <= SQZ_UNIT_CHANNEL; u++) free(p->idx[u]);
}

/* idx of unit u = every index of keep[0..n) expanded to `width` consecutive rows. */
static sqz_status plan_units(keep_plan *p, sqz_unit u, const int64_t *keep, int64_t n, int64_t width) {
    p->idx[u] = sqz__malloc((size_t)(n * width) * sizeof(int64_t));
    if (!p->idx[u]) return SQZ_ERR_NOMEM;
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < width; j++) p->idx[u][i * width + j] = keep[i] * width + j;
    p->n[u] = n * width;
    return SQZ_OK;
}

/* Builds member e's slice of tensor t into the pending slice of t (chained when a tensor is a
 * member twice: BERT's pooler keeps rows and columns). */
static sqz_status prepare_member(sqz_model *m, sqz_tensor *t, const sqz_member *e, const keep_plan *p,
                                 sqz__slice *pending) {
    sqz__slice *ps = &pending[t - m->tensors];
    const sqz_tensor src = ps->data ? sqz__slice_view(ps) : *t;
    sqz__slice s;
    SQZ_TRY(sqz__slice_prepare(m, &src, t, e->axis, p->idx[e->unit], p->n[e->unit], &s));
    sqz__slice_discard(ps);
    *ps = s;
    return SQZ_OK;
}

/* Prepares every member of structure k in `layer` (channels: every layer), then commits them
 * all; on an error nothing changes. */
static sqz_status apply_structure(sqz_model *m, sqz_structure k, int32_t layer, const keep_plan *p) {
    const sqz_coupled *c = &sqz_family_get(m->hp.family)->structures[k];
    sqz__slice *pending = sqz__calloc((size_t)m->n_tensors, sizeof *pending);
    if (!pending) return SQZ_ERR_NOMEM;
    sqz_status st = SQZ_OK;
    for (int i = 0; st == SQZ_OK && i < c->n_members; i++) {
        const sqz_member *e = &c->members[i];
        const bool per_layer = sqz_role_per_layer(e->role);
        const int32_t l0 = !per_layer ? -1 : k == SQZ_STRUCT_CHANNEL ? 0 : layer;
        const int32_t l1 = !per_layer ? -1 : k == SQZ_STRUCT_CHANNEL ? (int32_t)m->hp.n_layers - 1 : layer;
        for (int32_t l = l0; st == SQZ_OK && l <= l1; l++) {
            sqz_tensor *t = sqz_model_get(m, e->role, l, e->param);
            if (t) st = prepare_member(m, t, e, p, pending);
        }
    }
    for (int64_t i = 0; i < m->n_tensors; i++) {
        if (!pending[i].data) continue;
        if (st == SQZ_OK) sqz__slice_commit(&pending[i]);
        else sqz__slice_discard(&pending[i]);
    }
    free(pending);
    return st;
}

/* Checks the model and the layer index of a per-layer edit. */
static sqz_status check_layer(const sqz_model *m, int32_t layer) {
    SQZ_TRY(sqz_model_validate(m));
    SQZ_RETURN_IF(!sqz_family_get(m->hp.family), SQZ_ERR_ARCH, "family %d has no row in the family table",
                  (int)m->hp.family);
    SQZ_RETURN_IF(layer < 0 || layer >= m->hp.n_layers, SQZ_ERR_INVALID_ARG,
                  "layer %d: no such layer (the model has %" PRId64 ")", (int)layer, m->hp.n_layers);
    return SQZ_OK;
}

/* The KV heads that keep query heads, and the common number of query heads they keep. */
static sqz_status kv_groups(const sqz_layer_dims *ld, int32_t layer, const int64_t *keep, int64_t n,
                            int64_t *kv_keep, int64_t *n_kv) {
    const int64_t g = ld->n_heads / ld->n_kv_heads;
    int64_t per = 0;
    *n_kv = 0;
    for (int64_t i = 0; i < n;) {
        const int64_t grp = keep[i] / g;
        int64_t cnt = 0;
        while (i < n && keep[i] / g == grp) {
            cnt++;
            i++;
        }
        SQZ_RETURN_IF(per && cnt != per, SQZ_ERR_INVALID_ARG,
                      "layer %d: KV head %" PRId64 " keeps %" PRId64 " query heads, an earlier one keeps %" PRId64
                      ": every kept KV head must keep the same number of its %" PRId64, (int)layer, grp, cnt, per, g);
        per = cnt;
        kv_keep[(*n_kv)++] = grp;
    }
    return SQZ_OK;
}

sqz_status sqz_model_keep_heads(sqz_model *m, int32_t layer, const int64_t *keep, int64_t n) {
    SQZ_TRY(check_layer(m, layer));
    sqz_layer_dims ld = m->layers[layer];
    char what[64];
    snprintf(what, sizeof what, "layer %d: heads", (int)layer);
    SQZ_TRY(sqz__check_keep(keep, n, ld.n_heads, what));
    int64_t *kv = sqz__malloc((size_t)ld.n_kv_heads * sizeof *kv), n_kv = 0;
    if (!kv) return SQZ_ERR_NOMEM;
    keep_plan p = {0};
    const int64_t hd = m->hp.head_dim;
    sqz_status st = kv_groups(&ld, layer, keep, n, kv, &n_kv);
    if (st == SQZ_OK) st = plan_units(&p, SQZ_UNIT_HEAD, keep, n, hd);
    if (st == SQZ_OK) st = plan_units(&p, SQZ_UNIT_KV_HEAD, kv, n_kv, hd);
    if (st == SQZ_OK) st = apply_structure(m, SQZ_STRUCT_HEAD, layer, &p);
    plan_free(&p);
    free(kv);
    SQZ_TRY(st);
    ld.n_heads = n;
    ld.n_kv_heads = n_kv;
    SQZ_TRY(sqz_model_set_layer_dims(m, layer, &ld));
    return sqz_model_validate(m);
}

sqz_status sqz_model_keep_neurons(sqz_model *m, int32_t layer, const int64_t *keep, int64_t n) {
    SQZ_TRY(check_layer(m, layer));
    sqz_layer_dims ld = m->layers[layer];
    char what[64];
    snprintf(what, sizeof what, "layer %d: FFN neurons", (int)layer);
    SQZ_TRY(sqz__check_keep(keep, n, ld.d_ff, what));
    keep_plan p = {0};
    sqz_status st = plan_units(&p, SQZ_UNIT_NEURON, keep, n, 1);
    if (st == SQZ_OK) st = apply_structure(m, SQZ_STRUCT_NEURON, layer, &p);
    plan_free(&p);
    SQZ_TRY(st);
    ld.d_ff = n;
    SQZ_TRY(sqz_model_set_layer_dims(m, layer, &ld));
    return sqz_model_validate(m);
}

sqz_status sqz_model_keep_channels(sqz_model *m, const int64_t *keep, int64_t n) {
    SQZ_TRY(check_layer(m, 0));
    SQZ_TRY(sqz__check_keep(keep, n, m->hp.d_model, "hidden channels"));
    keep_plan p = {0};
    sqz_status st = plan_units(&p, SQZ_UNIT_CHANNEL, keep, n, 1);
    if (st == SQZ_OK) st = apply_structure(m, SQZ_STRUCT_CHANNEL, -1, &p);
    plan_free(&p);
    SQZ_TRY(st);
    m->hp.d_model = n;
    return sqz_model_validate(m);
}

/* formats/hf_names.c - Hugging Face tensor names <-> (role, layer, param).
 *
 * Two families of names are known, each a table (adding a name is adding a row):
 *   llama family (LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM):
 *     model.embed_tokens.weight, model.norm.weight, lm_head.weight,
 *     model.layers.N.<base>.{weight,bias}
 *   BERT (BertModel, as in all-MiniLM-L6-v2), with an optional "bert." or "model." prefix:
 *     embeddings.*, pooler.dense.*, encoder.layer.N.<base>.{weight,bias}
 *     (old TF-converted checkpoints name LayerNorm parameters gamma/beta).
 * Buffers that transformers derives at load time (rotary inv_freq, BERT position_ids)
 * are recognised and ignored. The writer asks for the canonical name of a role with
 * sqz__hf_name_make, so reading what we wrote gives back the same roles. */
#include <stdio.h>

#include "formats/formats_internal.h"

typedef struct hf_name_row {
    const char *base; /* without the layer prefix and without ".weight" / ".bias" */
    sqz_role role;
    sqz__hf_name_kind fused; /* SQZ__HF_TENSOR, or the fused projection this name holds (read only: the
                                name of its first role is the unfused one) */
} hf_name_row;

static const hf_name_row llama_global[] = {
    {"model.embed_tokens", SQZ_ROLE_TOKEN_EMBD, SQZ__HF_TENSOR},
    {"model.norm", SQZ_ROLE_OUTPUT_NORM, SQZ__HF_TENSOR},
    {"lm_head", SQZ_ROLE_OUTPUT, SQZ__HF_TENSOR},
};
static const hf_name_row llama_layer[] = {
    {"input_layernorm", SQZ_ROLE_ATTN_NORM, SQZ__HF_TENSOR},
    {"self_attn.q_proj", SQZ_ROLE_ATTN_Q, SQZ__HF_TENSOR},
    {"self_attn.k_proj", SQZ_ROLE_ATTN_K, SQZ__HF_TENSOR},
    {"self_attn.v_proj", SQZ_ROLE_ATTN_V, SQZ__HF_TENSOR},
    {"self_attn.o_proj", SQZ_ROLE_ATTN_OUT, SQZ__HF_TENSOR},
    {"post_attention_layernorm", SQZ_ROLE_FFN_NORM, SQZ__HF_TENSOR},
    {"mlp.gate_proj", SQZ_ROLE_FFN_GATE, SQZ__HF_TENSOR},
    {"mlp.up_proj", SQZ_ROLE_FFN_UP, SQZ__HF_TENSOR},
    {"mlp.down_proj", SQZ_ROLE_FFN_DOWN, SQZ__HF_TENSOR},
};
/* Qwen3: llama's and the per-head q/k norms. */
static const hf_name_row qwen3_layer[] = {
    {"input_layernorm", SQZ_ROLE_ATTN_NORM, SQZ__HF_TENSOR},     {"self_attn.q_proj", SQZ_ROLE_ATTN_Q, SQZ__HF_TENSOR},
    {"self_attn.k_proj", SQZ_ROLE_ATTN_K, SQZ__HF_TENSOR},       {"self_attn.v_proj", SQZ_ROLE_ATTN_V, SQZ__HF_TENSOR},
    {"self_attn.q_norm", SQZ_ROLE_ATTN_Q_NORM, SQZ__HF_TENSOR},  {"self_attn.k_norm", SQZ_ROLE_ATTN_K_NORM, SQZ__HF_TENSOR},
    {"self_attn.o_proj", SQZ_ROLE_ATTN_OUT, SQZ__HF_TENSOR},     {"post_attention_layernorm", SQZ_ROLE_FFN_NORM, SQZ__HF_TENSOR},
    {"mlp.gate_proj", SQZ_ROLE_FFN_GATE, SQZ__HF_TENSOR},        {"mlp.up_proj", SQZ_ROLE_FFN_UP, SQZ__HF_TENSOR},
    {"mlp.down_proj", SQZ_ROLE_FFN_DOWN, SQZ__HF_TENSOR},
};
/* Gemma 3 (Gemma3ForCausalLM): post_attention_layernorm is the norm of attention's output, the FFN's
 * input norm is pre_feedforward_layernorm. */
static const hf_name_row gemma3_layer[] = {
    {"input_layernorm", SQZ_ROLE_ATTN_NORM, SQZ__HF_TENSOR},               {"self_attn.q_proj", SQZ_ROLE_ATTN_Q, SQZ__HF_TENSOR},
    {"self_attn.k_proj", SQZ_ROLE_ATTN_K, SQZ__HF_TENSOR},                 {"self_attn.v_proj", SQZ_ROLE_ATTN_V, SQZ__HF_TENSOR},
    {"self_attn.q_norm", SQZ_ROLE_ATTN_Q_NORM, SQZ__HF_TENSOR},            {"self_attn.k_norm", SQZ_ROLE_ATTN_K_NORM, SQZ__HF_TENSOR},
    {"self_attn.o_proj", SQZ_ROLE_ATTN_OUT, SQZ__HF_TENSOR},               {"post_attention_layernorm", SQZ_ROLE_ATTN_POST_NORM, SQZ__HF_TENSOR},
    {"pre_feedforward_layernorm", SQZ_ROLE_FFN_NORM, SQZ__HF_TENSOR},      {"mlp.gate_proj", SQZ_ROLE_FFN_GATE, SQZ__HF_TENSOR},
    {"mlp.up_proj", SQZ_ROLE_FFN_UP, SQZ__HF_TENSOR},                      {"mlp.down_proj", SQZ_ROLE_FFN_DOWN, SQZ__HF_TENSOR},
    {"post_feedforward_layernorm", SQZ_ROLE_FFN_POST_NORM, SQZ__HF_TENSOR},
};
/* Phi-3: llama's names, and the fused projections its checkpoints carry (split on read). */
static const hf_name_row phi3_layer[] = {
    {"input_layernorm", SQZ_ROLE_ATTN_NORM, SQZ__HF_TENSOR},
    {"self_attn.q_proj", SQZ_ROLE_ATTN_Q, SQZ__HF_TENSOR},
    {"self_attn.k_proj", SQZ_ROLE_ATTN_K, SQZ__HF_TENSOR},
    {"self_attn.v_proj", SQZ_ROLE_ATTN_V, SQZ__HF_TENSOR},
    {"self_attn.o_proj", SQZ_ROLE_ATTN_OUT, SQZ__HF_TENSOR},
    {"post_attention_layernorm", SQZ_ROLE_FFN_NORM, SQZ__HF_TENSOR},
    {"mlp.gate_proj", SQZ_ROLE_FFN_GATE, SQZ__HF_TENSOR},
    {"mlp.up_proj", SQZ_ROLE_FFN_UP, SQZ__HF_TENSOR},
    {"mlp.down_proj", SQZ_ROLE_FFN_DOWN, SQZ__HF_TENSOR},
    {"self_attn.qkv_proj", SQZ_ROLE_ATTN_Q, SQZ__HF_FUSED_QKV},
    {"mlp.gate_up_proj", SQZ_ROLE_FFN_GATE, SQZ__HF_FUSED_GATE_UP},
};
/* The mixtures of experts: their dense family's layer rows and these (the dense FFN's rows then never match);
 * "*" in a base is the expert's index (its matrix of the stacked FFN_*_EXPS role). */
static const hf_name_row qwen3moe_more[] = {
    {"mlp.gate", SQZ_ROLE_FFN_GATE_INP, SQZ__HF_TENSOR},
    {"mlp.experts.*.gate_proj", SQZ_ROLE_FFN_GATE_EXPS, SQZ__HF_EXPERT},
    {"mlp.experts.*.up_proj", SQZ_ROLE_FFN_UP_EXPS, SQZ__HF_EXPERT},
    {"mlp.experts.*.down_proj", SQZ_ROLE_FFN_DOWN_EXPS, SQZ__HF_EXPERT},
};
static const hf_name_row mixtral_more[] = {
    {"block_sparse_moe.gate", SQZ_ROLE_FFN_GATE_INP, SQZ__HF_TENSOR},
    {"block_sparse_moe.experts.*.w1", SQZ_ROLE_FFN_GATE_EXPS, SQZ__HF_EXPERT},
    {"block_sparse_moe.experts.*.w3", SQZ_ROLE_FFN_UP_EXPS, SQZ__HF_EXPERT},
    {"block_sparse_moe.experts.*.w2", SQZ_ROLE_FFN_DOWN_EXPS, SQZ__HF_EXPERT},
};
static const hf_name_row bert_global[] = {
    {"embeddings.word_embeddings", SQZ_ROLE_TOKEN_EMBD, SQZ__HF_TENSOR},
    {"embeddings.position_embeddings", SQZ_ROLE_POS_EMBD, SQZ__HF_TENSOR},
    {"embeddings.token_type_embeddings", SQZ_ROLE_TYPE_EMBD, SQZ__HF_TENSOR},
    {"embeddings.LayerNorm", SQZ_ROLE_EMBD_NORM, SQZ__HF_TENSOR},
    {"pooler.dense", SQZ_ROLE_POOLER, SQZ__HF_TENSOR},
};
static const hf_name_row bert_layer[] = {
    {"attention.self.query", SQZ_ROLE_ATTN_Q, SQZ__HF_TENSOR},
    {"attention.self.key", SQZ_ROLE_ATTN_K, SQZ__HF_TENSOR},
    {"attention.self.value", SQZ_ROLE_ATTN_V, SQZ__HF_TENSOR},
    {"attention.output.dense", SQZ_ROLE_ATTN_OUT, SQZ__HF_TENSOR},
    {"attention.output.LayerNorm", SQZ_ROLE_ATTN_OUT_NORM, SQZ__HF_TENSOR},
    {"intermediate.dense", SQZ_ROLE_FFN_UP, SQZ__HF_TENSOR},
    {"output.dense", SQZ_ROLE_FFN_DOWN, SQZ__HF_TENSOR},
    {"output.LayerNorm", SQZ_ROLE_LAYER_OUT_NORM, SQZ__HF_TENSOR},
};

typedef struct hf_family_names {
    const char *const *prefixes; /* optional model prefixes stripped before matching (NULL-terminated) */
    const char *layer_prefix;    /* "model.layers." : followed by the layer index and "." */
    const hf_name_row *global;
    size_t n_global;
    const hf_name_row *layer;
    size_t n_layer;
    const char *const *ignored_global; /* derived buffers (full names after the prefix) */
    const char *const *ignored_layer;  /* derived buffers (names after "<layer_prefix>N.") */
    const hf_name_row *more;           /* further layer rows (a mixture's router and experts), or NULL */
    size_t n_more;
} hf_family_names;

static const char *const no_prefixes[] = {NULL};
static const char *const bert_prefixes[] = {"bert.", "model.", NULL};
static const char *const llama_ignored_global[] = {"model.rotary_emb.inv_freq", NULL};
static const char *const llama_ignored_layer[] = {"self_attn.rotary_emb.inv_freq", NULL};
static const char *const bert_ignored_global[] = {"embeddings.position_ids", NULL};
static const char *const none_ignored[] = {NULL};

#define N_OF(a) (sizeof(a) / sizeof((a)[0]))

static const hf_family_names families[] = {
    [SQZ_FAMILY_LLAMA] = {no_prefixes, "model.layers.", llama_global, N_OF(llama_global), llama_layer,
                          N_OF(llama_layer), llama_ignored_global, llama_ignored_layer, NULL, 0},
    [SQZ_FAMILY_BERT] = {bert_prefixes, "encoder.layer.", bert_global, N_OF(bert_global), bert_layer,
                         N_OF(bert_layer), bert_ignored_global, none_ignored, NULL, 0},
    [SQZ_FAMILY_QWEN3] = {no_prefixes, "model.layers.", llama_global, N_OF(llama_global), qwen3_layer,
                          N_OF(qwen3_layer), llama_ignored_global, llama_ignored_layer, NULL, 0},
    [SQZ_FAMILY_GEMMA3] = {no_prefixes, "model.layers.", llama_global, N_OF(llama_global), gemma3_layer,
                           N_OF(gemma3_layer), llama_ignored_global, llama_ignored_layer, NULL, 0},
    [SQZ_FAMILY_PHI3] = {no_prefixes, "model.layers.", llama_global, N_OF(llama_global), phi3_layer,
                         N_OF(phi3_layer), llama_ignored_global, llama_ignored_layer, NULL, 0},
    [SQZ_FAMILY_QWEN3MOE] = {no_prefixes, "model.layers.", llama_global, N_OF(llama_global), qwen3_layer,
                             N_OF(qwen3_layer), llama_ignored_global, llama_ignored_layer, qwen3moe_more,
                             N_OF(qwen3moe_more)},
    [SQZ_FAMILY_MIXTRAL] = {no_prefixes, "model.layers.", llama_global, N_OF(llama_global), llama_layer,
                            N_OF(llama_layer), llama_ignored_global, llama_ignored_layer, mixtral_more,
                            N_OF(mixtral_more)},
};

static bool starts_with(const char *s, const char *p) { return strncmp(s, p, strlen(p)) == 0; }

/* Layer row i of family f: its own rows, then the further ones. */
static size_t n_layer_rows(const hf_family_names *f) { return f->n_layer + f->n_more; }
static const hf_name_row *layer_row(const hf_family_names *f, size_t i) {
    return i < f->n_layer ? &f->layer[i] : &f->more[i - f->n_layer];
}

static bool in_list(const char *const *list, const char *s) {
    for (; *list; list++) {
        if (strcmp(*list, s) == 0) return true;
    }
    return false;
}

static size_t parse_layer(const char *s, int32_t *layer);

/* Whether [s, s + n) is row base b, whose "*" (if any) stands for a decimal index (into *idx, else -1). */
static bool match_base(const char *b, const char *s, size_t n, int32_t *idx) {
    const char *star = strchr(b, '*');
    *idx = -1;
    if (!star) return strlen(b) == n && memcmp(b, s, n) == 0;
    const size_t pre = (size_t)(star - b), post = strlen(star + 1);
    if (n < pre + post + 1 || memcmp(b, s, pre) != 0 || memcmp(star + 1, s + n - post, post) != 0) return false;
    if (post == 0 || star[1] != '.') return false;
    const size_t used = parse_layer(s + pre, idx); /* "N." with its dot, as a layer index */
    return used > 0 && pre + used - 1 == n - post;
}

/* Splits "<base>.<param>" and looks base up in rows; *fused: the row's fused kind, *idx an expert's index. */
static bool match_rows(const hf_name_row *rows, size_t n, const char *s, sqz_role *role, sqz_param *param,
                       sqz__hf_name_kind *fused, int32_t *idx) {
    const char *dot = strrchr(s, '.');
    if (!dot) return false;
    const char *p = dot + 1;
    bool legacy = strcmp(p, "gamma") == 0 || strcmp(p, "beta") == 0;
    if (strcmp(p, "weight") == 0 || strcmp(p, "gamma") == 0) *param = SQZ_PARAM_WEIGHT;
    else if (strcmp(p, "bias") == 0 || strcmp(p, "beta") == 0) *param = SQZ_PARAM_BIAS;
    else return false;
    size_t blen = (size_t)(dot - s);
    for (size_t i = 0; i < n; i++) {
        if (match_base(rows[i].base, s, blen, idx)) {
            /* gamma/beta only ever named LayerNorm parameters */
            if (legacy && !strstr(rows[i].base, "LayerNorm")) return false;
            *role = rows[i].role;
            *fused = rows[i].fused;
            return true;
        }
    }
    return false;
}

/* Parses a decimal layer index "N." at s: no sign, no leading zeros, at most 6 digits.
 * Returns the characters consumed including the dot, or 0. */
static size_t parse_layer(const char *s, int32_t *layer) {
    size_t i = 0;
    int32_t v = 0;
    while (s[i] >= '0' && s[i] <= '9') {
        if (i == 6) return 0;
        v = v * 10 + (s[i] - '0');
        i++;
    }
    if (i == 0 || s[i] != '.' || (i > 1 && s[0] == '0')) return 0;
    *layer = v;
    return i + 1;
}

sqz__hf_name_kind sqz__hf_name_parse(sqz_family family, const char *name, sqz_role *role, int32_t *layer,
                                     sqz_param *param) {
    int32_t expert;
    return sqz__hf_name_parse_expert(family, name, role, layer, param, &expert);
}

sqz__hf_name_kind sqz__hf_name_parse_expert(sqz_family family, const char *name, sqz_role *role, int32_t *layer,
                                            sqz_param *param, int32_t *expert) {
    *expert = -1;
    if ((unsigned)family >= N_OF(families)) return SQZ__HF_UNKNOWN;
    const hf_family_names *f = &families[family];
    const char *s = name;
    for (const char *const *p = f->prefixes; *p; p++) {
        if (starts_with(s, *p)) {
            s += strlen(*p);
            break;
        }
    }
    if (starts_with(s, f->layer_prefix)) {
        int32_t l;
        size_t n = parse_layer(s + strlen(f->layer_prefix), &l);
        if (n == 0) return SQZ__HF_UNKNOWN;
        const char *rest = s + strlen(f->layer_prefix) + n;
        if (in_list(f->ignored_layer, rest)) return SQZ__HF_IGNORED;
        sqz__hf_name_kind kind;
        if (!match_rows(f->layer, f->n_layer, rest, role, param, &kind, expert) &&
            !(f->more && match_rows(f->more, f->n_more, rest, role, param, &kind, expert)))
            return SQZ__HF_UNKNOWN;
        *layer = l;
        return kind;
    }
    if (in_list(f->ignored_global, s)) return SQZ__HF_IGNORED;
    sqz__hf_name_kind kind;
    if (!match_rows(f->global, f->n_global, s, role, param, &kind, expert)) return SQZ__HF_UNKNOWN;
    *layer = -1;
    return kind;
}

bool sqz__hf_name_make(sqz_family family, sqz_role role, int32_t layer, sqz_param param, char *buf, size_t cap) {
    if ((unsigned)family >= N_OF(families) || cap == 0) return false;
    const hf_family_names *f = &families[family];
    const char *suffix = param == SQZ_PARAM_BIAS ? "bias" : "weight";
    bool per_layer = sqz_role_per_layer(role);
    if (per_layer != (layer >= 0)) return false;
    const size_t n = per_layer ? n_layer_rows(f) : f->n_global;
    for (size_t i = 0; i < n; i++) {
        const hf_name_row *row = per_layer ? layer_row(f, i) : &f->global[i];
        if (row->role != role || row->fused != SQZ__HF_TENSOR) continue;
        int k = per_layer ? snprintf(buf, cap, "%s%d.%s.%s", f->layer_prefix, (int)layer, row->base, suffix)
                          : snprintf(buf, cap, "%s.%s", row->base, suffix);
        return k > 0 && (size_t)k < cap;
    }
    return false;
}

bool sqz__hf_expert_name(sqz_family family, sqz_role role, int32_t layer, int32_t e, sqz_param param, char *buf,
                         size_t cap) {
    if ((unsigned)family >= N_OF(families) || layer < 0 || e < 0 || cap == 0) return false;
    const hf_family_names *f = &families[family];
    for (size_t i = 0; i < n_layer_rows(f); i++) {
        const hf_name_row *row = layer_row(f, i);
        const char *star = strchr(row->base, '*');
        if (row->role != role || row->fused != SQZ__HF_EXPERT || !star) continue;
        const int k = snprintf(buf, cap, "%s%d.%.*s%d%s.%s", f->layer_prefix, (int)layer,
                               (int)(star - row->base), row->base, (int)e, star + 1,
                               param == SQZ_PARAM_BIAS ? "bias" : "weight");
        return k > 0 && (size_t)k < cap;
    }
    return false;
}

/* The roles a fused row holds, in row order. */
static int fused_roles(sqz__hf_name_kind k, sqz_role *out) {
    if (k == SQZ__HF_FUSED_QKV) {
        out[0] = SQZ_ROLE_ATTN_Q, out[1] = SQZ_ROLE_ATTN_K, out[2] = SQZ_ROLE_ATTN_V;
        return 3;
    }
    if (k == SQZ__HF_FUSED_GATE_UP) {
        out[0] = SQZ_ROLE_FFN_GATE, out[1] = SQZ_ROLE_FFN_UP;
        return 2;
    }
    return 0;
}

int sqz__hf_fused(sqz_family family, sqz_role role, sqz_role members[3], const char **base) {
    if ((unsigned)family >= N_OF(families)) return 0;
    const hf_family_names *f = &families[family];
    for (size_t i = 0; i < f->n_layer; i++) {
        sqz_role r[3];
        const int n = fused_roles(f->layer[i].fused, r);
        for (int k = 0; k < n; k++) {
            if (r[k] != role) continue;
            memcpy(members, r, sizeof r);
            if (base) *base = f->layer[i].base;
            return k == 0 ? n : -1;
        }
    }
    return 0;
}

bool sqz__hf_fused_name(sqz_family family, int32_t layer, const char *base, sqz_param param, char *buf, size_t cap) {
    if ((unsigned)family >= N_OF(families) || layer < 0) return false;
    const int k = snprintf(buf, cap, "%s%d.%s.%s", families[family].layer_prefix, (int)layer, base,
                           param == SQZ_PARAM_BIAS ? "bias" : "weight");
    return k > 0 && (size_t)k < cap;
}

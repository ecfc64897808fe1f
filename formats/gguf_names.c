/*
 * formats/gguf_names.c - GGUF names: tensor names <-> (role, layer, param), the
 * architectures sqz reads and writes, ggml type names, llama.cpp file types.
 */
#include <stdio.h>
#include <stdlib.h>

#include "formats/gguf_internal.h"

/* What general.architecture means to sqz. The rotary layout is how llama.cpp's
 * converter stores attn_q/attn_k: "llama" permutes HF rows into interleaved pairs
 * (LLAMA_ROPE_TYPE_NORM), "qwen2" keeps the HF rotate_half order (NEOX). */
static const sqz__gguf_arch archs[] = {
    /* llama.cpp's Mixtral is "llama" with expert tensors (its build_moe_ffn: softmax, top-k renormalised) */
    {.name = "llama", .family = SQZ_FAMILY_LLAMA, .rope = SQZ_ROPE_INTERLEAVED, .act = SQZ_ACT_SILU, .per_layer = "deci",
     .moe_family = SQZ_FAMILY_MIXTRAL},
    {.name = "qwen2", .family = SQZ_FAMILY_LLAMA, .rope = SQZ_ROPE_HALF, .act = SQZ_ACT_SILU},
    {.name = "bert", .family = SQZ_FAMILY_BERT, .rope = SQZ_ROPE_NONE, .act = SQZ_ACT_GELU},
    /* DeciLM / Nemotron-NAS: llama with per-layer head counts and FFN widths, the one
     * llama-like architecture whose llama.cpp loader sizes each layer on its own. */
    {.name = "deci", .family = SQZ_FAMILY_LLAMA, .rope = SQZ_ROPE_INTERLEAVED, .act = SQZ_ACT_SILU},
    /* convert_hf_to_gguf.py keeps HF's row order for these (llama.cpp runs them with NEOX rope) */
    {.name = "qwen3", .family = SQZ_FAMILY_QWEN3, .rope = SQZ_ROPE_HALF, .act = SQZ_ACT_SILU},
    {.name = "qwen3moe", .family = SQZ_FAMILY_QWEN3MOE, .rope = SQZ_ROPE_HALF, .act = SQZ_ACT_SILU,
     .moe_family = SQZ_FAMILY_QWEN3MOE, .expert_ff_key = "expert_feed_forward_length"},
    {.name = "gemma3", .family = SQZ_FAMILY_GEMMA3, .rope = SQZ_ROPE_HALF, .act = SQZ_ACT_GELU_TANH},
    {.name = "phi3", .family = SQZ_FAMILY_PHI3, .rope = SQZ_ROPE_HALF, .act = SQZ_ACT_SILU, .fused_gate_up = true},
};

const sqz__gguf_arch *sqz__gguf_arch_find(const char *name) {
    for (size_t i = 0; i < sizeof archs / sizeof *archs; i++) {
        if (strcmp(archs[i].name, name) == 0) return &archs[i];
    }
    return NULL;
}

static bool layers_uniform(const sqz_model *m) {
    for (int64_t l = 1; l < m->hp.n_layers && m->layers; l++) {
        const sqz_layer_dims *a = &m->layers[0], *b = &m->layers[l];
        if (a->n_heads != b->n_heads || a->n_kv_heads != b->n_kv_heads || a->d_ff != b->d_ff) return false;
    }
    return true;
}

/* The model's own architecture when sqz has its row (llama, qwen2, deci, qwen3, ...), else its family's
 * (mistral, smollm and llama2.c checkpoints are written as llama); per-layer dimensions move to the row's
 * per_layer architecture (llama.cpp's "llama" sizes every layer from the first layer's counts; a pruned
 * qwen2 stays qwen2, which llama.cpp refuses, and the gguf_uniform families are refused by the writer). */
const sqz__gguf_arch *sqz__gguf_arch_for_model(const sqz_model *m) {
    const sqz_family_info *fi = sqz_family_get(m->hp.family);
    const sqz__gguf_arch *a = sqz__gguf_arch_find(m->hp.arch);
    if (!a || a->family != m->hp.family) a = sqz__gguf_arch_find(fi && fi->gguf_arch ? fi->gguf_arch : "llama");
    if (a && a->per_layer && !layers_uniform(m)) a = sqz__gguf_arch_find(a->per_layer);
    return a;
}

const char *sqz__gguf_arch_list(void) { return "llama qwen2 qwen3 qwen3moe gemma3 phi3 bert deci"; }

int sqz__gguf_file_type(sqz_dtype dominant) {
    switch (dominant) { /* llama.cpp enum llama_ftype */
    case SQZ_DTYPE_F32: return 0;   /* ALL_F32 */
    case SQZ_DTYPE_F16: return 1;   /* MOSTLY_F16 */
    case SQZ_DTYPE_Q4_0: return 2;  /* MOSTLY_Q4_0 */
    case SQZ_DTYPE_Q4_1: return 3;  /* MOSTLY_Q4_1 */
    case SQZ_DTYPE_Q8_0: return 7;  /* MOSTLY_Q8_0 */
    case SQZ_DTYPE_Q5_0: return 8;  /* MOSTLY_Q5_0 */
    case SQZ_DTYPE_Q5_1: return 9;  /* MOSTLY_Q5_1 */
    case SQZ_DTYPE_Q2_K: return 10; /* MOSTLY_Q2_K */
    case SQZ_DTYPE_Q3_K: return 12; /* MOSTLY_Q3_K_M */
    case SQZ_DTYPE_Q4_K: return 15; /* MOSTLY_Q4_K_M */
    case SQZ_DTYPE_Q5_K: return 17; /* MOSTLY_Q5_K_M */
    case SQZ_DTYPE_Q6_K: return 18; /* MOSTLY_Q6_K */
    case SQZ_DTYPE_IQ4_NL: return 25; /* MOSTLY_IQ4_NL */
    case SQZ_DTYPE_IQ4_XS: return 30; /* MOSTLY_IQ4_XS */
    case SQZ_DTYPE_IQ3_S: return 26;  /* MOSTLY_IQ3_S */
    case SQZ_DTYPE_MXFP4: return 38;  /* MOSTLY_MXFP4_MOE (llama.cpp's one MXFP4 ftype) */
    case SQZ_DTYPE_BF16: return 32; /* MOSTLY_BF16 */
    default: return -1;
    }
}

/* ggml.h enum ggml_type, for messages about types sqz does not read. */
static const char *const ggml_names[] = {
    [0] = "f32",      [1] = "f16",     [2] = "q4_0",   [3] = "q4_1",    [6] = "q5_0",     [7] = "q5_1",
    [8] = "q8_0",     [9] = "q8_1",    [10] = "q2_K",  [11] = "q3_K",   [12] = "q4_K",    [13] = "q5_K",
    [14] = "q6_K",    [15] = "q8_K",   [16] = "iq2_xxs", [17] = "iq2_xs", [18] = "iq3_xxs", [19] = "iq1_s",
    [20] = "iq4_nl",  [21] = "iq3_s",  [22] = "iq2_s", [23] = "iq4_xs", [24] = "i8",      [25] = "i16",
    [26] = "i32",     [27] = "i64",    [28] = "f64",   [29] = "iq1_m",  [30] = "bf16",    [34] = "tq1_0",
    [35] = "tq2_0",   [39] = "mxfp4",
};

const char *sqz__ggml_type_name(uint32_t type) {
    if (type >= sizeof ggml_names / sizeof *ggml_names || !ggml_names[type]) return "unknown";
    return ggml_names[type];
}

/* Parses the trailing ".weight" / ".bias" off [s, s+n); returns the base length or 0. */
static size_t strip_param(const char *s, size_t n, sqz_param *param) {
    static const char w[] = ".weight", b[] = ".bias";
    if (n > sizeof w - 1 && memcmp(s + n - (sizeof w - 1), w, sizeof w - 1) == 0) {
        *param = SQZ_PARAM_WEIGHT;
        return n - (sizeof w - 1);
    }
    if (n > sizeof b - 1 && memcmp(s + n - (sizeof b - 1), b, sizeof b - 1) == 0) {
        *param = SQZ_PARAM_BIAS;
        return n - (sizeof b - 1);
    }
    return 0;
}

bool sqz__gguf_parse_tensor_name(const char *name, sqz_role *role, int32_t *layer, sqz_param *param) {
    size_t n = strlen(name);
    const char *base = name;
    *layer = -1;
    if (strncmp(name, "blk.", 4) == 0) {
        const char *p = name + 4;
        int64_t l = 0;
        size_t digits = 0;
        while (*p >= '0' && *p <= '9' && digits < 7) {
            l = l * 10 + (*p - '0');
            p++;
            digits++;
        }
        if (digits == 0 || *p != '.' || (digits > 1 && p[-(ptrdiff_t)digits] == '0')) return false;
        *layer = (int32_t)l;
        base = p + 1;
        n -= (size_t)(base - name);
    }
    size_t bl = strip_param(base, n, param);
    if (bl == 0 || bl >= 64) return false;
    char buf[64];
    memcpy(buf, base, bl);
    buf[bl] = 0;
    if (!sqz_role_from_name(buf, role)) return false;
    return sqz_role_per_layer(*role) == (*layer >= 0);
}

bool sqz__gguf_tensor_name(sqz_role role, int32_t layer, sqz_param param, char *buf, size_t cap) {
    const char *suffix = param == SQZ_PARAM_BIAS ? "bias" : "weight";
    int n = sqz_role_per_layer(role) ? snprintf(buf, cap, "blk.%d.%s.%s", (int)layer, sqz_role_name(role), suffix)
                                     : snprintf(buf, cap, "%s.%s", sqz_role_name(role), suffix);
    return n > 0 && (size_t)n < cap;
}

static const char phantom[] = "\xe2\x96\x81"; /* U+2581, the SentencePiece space mark */

static bool is_bracketed(const char *s, size_t n) { return n >= 2 && s[0] == '[' && s[n - 1] == ']'; }

char *sqz__wpm_to_gguf(const char *tok) {
    size_t n = strlen(tok);
    if (is_bracketed(tok, n)) return sqz__strdup(tok);
    if (strncmp(tok, "##", 2) == 0) return sqz__strdup(tok + 2);
    return sqz__asprintf("%s%s", phantom, tok);
}

char *sqz__wpm_from_gguf(const char *tok, size_t n) {
    const size_t np = sizeof phantom - 1;
    if (is_bracketed(tok, n)) return sqz__strndup(tok, n);
    if (n >= np && memcmp(tok, phantom, np) == 0) return sqz__strndup(tok + np, n - np);
    char *s = sqz__malloc(n + 3);
    if (!s) return NULL;
    memcpy(s, "##", 2);
    memcpy(s + 2, tok, n);
    s[n + 2] = 0;
    return s;
}

/* Keys the writer computes (gguf_write.c); a source's values for them are read, never copied. */
static const char *const owned_keys[] = {
    "general.architecture", "general.name", "general.alignment", "general.file_type",
    "general.quantization_version", "tokenizer.ggml.model", "tokenizer.ggml.pre", "tokenizer.ggml.tokens",
    "tokenizer.ggml.scores", "tokenizer.ggml.token_type", "tokenizer.ggml.merges",
    "tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id", "tokenizer.ggml.unknown_token_id",
    "tokenizer.ggml.padding_token_id", "tokenizer.ggml.seperator_token_id", "tokenizer.ggml.cls_token_id",
    "tokenizer.ggml.mask_token_id", "tokenizer.ggml.add_bos_token", "tokenizer.ggml.add_eos_token",
    "tokenizer.ggml.add_space_prefix", "tokenizer.ggml.token_type_count", "tokenizer.chat_template",
};

bool sqz__gguf_key_owned(const char *key, size_t len, const char *arch) {
    for (size_t i = 0; i < sizeof owned_keys / sizeof *owned_keys; i++) {
        if (strlen(owned_keys[i]) == len && memcmp(owned_keys[i], key, len) == 0) return true;
    }
    size_t n = arch ? strlen(arch) : 0;
    if (n > 0 && len > n && memcmp(key, arch, n) == 0 && key[n] == '.') return true; /* hyperparameters */
    return len >= 6 && memcmp(key, "split.", 6) == 0; /* gguf-split's shard keys: sqz writes one file */
}

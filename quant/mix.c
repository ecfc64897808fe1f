/*
 * quant/mix.c - whole-model type mixes: which tensor gets which type, as llama-quantize
 * chooses it for its ftypes Q2_K, Q3_K_S, Q3_K_M, Q3_K_L, Q4_K_S, Q4_K_M, Q5_K_S, Q5_K_M, Q4_0,
 * Q4_1, Q5_0, Q5_1, Q6_K, Q8_0, IQ3_S, IQ3_M, IQ4_NL and IQ4_XS (llama.cpp src/llama-quant.cpp, llama_tensor_get_type_impl and
 * tensor_type_fallback), written as data: a row per mix, each holding per-role rules "when
 * COND the type is HI, else LO".
 *
 * What the rules reproduce (not Falcon, not 70B; models of 8 experts take rules8, below):
 *   use_more_bits(i, n) = i < n/8 || i >= 7n/8 || (i - n/8) % 3 == 2
 *   Q3_K_M: attn_v Q5_K in the first two layers, else Q4_K; ffn_down Q5_K for i < n/16,
 *           else Q4_K; attn_output Q4_K
 *   Q4_K_M, Q5_K_M: attn_v and ffn_down Q6_K where use_more_bits
 *   Q4_0 (Q5_0) with an importance matrix: ffn_down Q4_1 (Q5_1) for i < n/8
 *   Q4_1, Q5_1, Q6_K, Q8_0: no rule; IQ3_S: attn_v Q4_K when n_head / n_head_kv >= 4
 *   Q2_K: attn_v Q4_K when n_head / n_head_kv >= 4 (layer 0's heads), else Q3_K; ffn_down and
 *         attn_output Q3_K
 *   Q3_K_S: no rule (every matrix Q3_K but the output); Q3_K_L: attn_v, ffn_down, attn_output Q5_K
 *   Q4_K_S: attn_v Q5_K for i < 4; ffn_down Q5_K for i < n/8; Q5_K_S: no rule
 *   IQ3_M (base IQ3_S): attn_v and attn_output Q4_K; ffn_down Q4_K for i < n/8
 *   IQ4_NL, IQ4_XS: attn_v Q5_K when n_head / n_head_kv >= 4; ffn_down Q5_K for i < n/8 without
 *         an importance matrix
 *   output (and a tied token embedding): Q8_0 when its width is not a multiple of the base
 *   type's block, else Q6_K unless the base is Q8_0; the untied token embedding: the base type.
 * Then the fallback: a width that is not a multiple of the type's block gives Q2_K/Q3_K ->
 * Q4_0, Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0, IQ3_S and IQ4_XS -> IQ4_NL, and F16 where even that does
 * not fit.
 * With exactly 8 experts (llama.cpp's hparams.n_expert == 8) attn_v and attn_k are Q8_0, attn_output Q5_K for
 * Q2_K, Q3_K_S, Q3_K_M, Q4_K_S, Q4_K_M, IQ3_S, IQ3_M, IQ4_NL, IQ4_XS and the base type for the others, IQ3_M's
 * ffn_down Q4_K also where use_more_bits. The experts (ffn_*_exps) take the rules of their category (ffn_down_exps
 * ffn_down's), their layer index from the name as llama.cpp's layer_info does; the router is never quantized.
 * MXFP4_MOE (38, a row of its own: experts_only): the experts' tensors MXFP4, every other matrix, the
 * output and the token embedding Q8_0.
 * The layer index of attn_v is llama.cpp's running count of attn_v tensors, which is the
 * block index for a model whose every block has one.
 */
#include <stdio.h>
#include <string.h>

#include "quant/quant_internal.h"

typedef enum cond {
    C_NONE = 0,     /* no rule: the base type */
    C_ALWAYS,       /* HI */
    C_MORE_BITS,    /* use_more_bits(i, n) ? HI : LO */
    C_FIRST_2,      /* i < 2 ? HI : LO */
    C_FIRST_16TH,   /* i < n/16 ? HI : LO */
    C_FIRST_8TH_IM, /* with an importance matrix and i < n/8 ? HI : LO */
    C_FIRST_4,      /* i < 4 ? HI : LO */
    C_FIRST_8TH,    /* i < n/8 ? HI : LO */
    C_FIRST_8TH_NO_IM, /* without an importance matrix and i < n/8 ? HI : LO */
    C_GQA_4,        /* n_head / n_head_kv >= 4 ? HI : LO */
    C_FIRST_8TH_OR_MORE_BITS, /* i < n/8 || use_more_bits(i, n) ? HI : LO (IQ3_M's ffn_down with 8 experts) */
} cond;

typedef struct rule {
    cond when;
    sqz_dtype hi, lo; /* lo SQZ_DTYPE_COUNT: the base type */
} rule;

enum { R_ATTN_V, R_FFN_DOWN, R_ATTN_OUT, R_ATTN_K, R_N };

struct sqz_qmix {
    const char *name;
    int ftype; /* llama.cpp's llama_ftype, written as GGUF general.file_type */
    sqz_dtype base;
    rule rules[R_N];
    rule rules8[R_N]; /* a mixture of exactly 8 experts (llama.cpp's n_expert == 8, Mixtral's count) */
    bool experts_only; /* MXFP4_MOE: the experts' tensors in the base type, every other matrix Q8_0 */
};

#define BASE SQZ_DTYPE_COUNT
#define NO {C_NONE, BASE, BASE}
#define ALL(t) {C_ALWAYS, SQZ_DTYPE_##t, BASE}
/* a mix: its rules for attn_v, ffn_down and attn_output, and with 8 experts llama.cpp's: attn_v and attn_k
 * Q8_0, attn_output OUT8, ffn_down DOWN8 */
#define MIX(nm, ft, b, V, DOWN, OUT, OUT8, DOWN8)                                                       \
    {nm, ft, SQZ_DTYPE_##b, {[R_ATTN_V] = V, [R_FFN_DOWN] = DOWN, [R_ATTN_OUT] = OUT, [R_ATTN_K] = NO}, \
     {[R_ATTN_V] = ALL(Q8_0), [R_FFN_DOWN] = DOWN8, [R_ATTN_OUT] = OUT8, [R_ATTN_K] = ALL(Q8_0)}, false}
static const struct sqz_qmix mixes[] = {
    MIX("q3_k_m", 12, Q3_K, ((rule){C_FIRST_2, SQZ_DTYPE_Q5_K, SQZ_DTYPE_Q4_K}),
        ((rule){C_FIRST_16TH, SQZ_DTYPE_Q5_K, SQZ_DTYPE_Q4_K}), ALL(Q4_K), ALL(Q5_K),
        ((rule){C_FIRST_16TH, SQZ_DTYPE_Q5_K, SQZ_DTYPE_Q4_K})),
    MIX("q4_k_m", 15, Q4_K, ((rule){C_MORE_BITS, SQZ_DTYPE_Q6_K, BASE}), ((rule){C_MORE_BITS, SQZ_DTYPE_Q6_K, BASE}),
        NO, ALL(Q5_K), ((rule){C_MORE_BITS, SQZ_DTYPE_Q6_K, BASE})),
    MIX("q5_k_m", 17, Q5_K, ((rule){C_MORE_BITS, SQZ_DTYPE_Q6_K, BASE}), ((rule){C_MORE_BITS, SQZ_DTYPE_Q6_K, BASE}),
        NO, NO, ((rule){C_MORE_BITS, SQZ_DTYPE_Q6_K, BASE})),
    MIX("q4_0", 2, Q4_0, NO, ((rule){C_FIRST_8TH_IM, SQZ_DTYPE_Q4_1, BASE}), NO, NO,
        ((rule){C_FIRST_8TH_IM, SQZ_DTYPE_Q4_1, BASE})),
    MIX("q8_0", 7, Q8_0, NO, NO, NO, NO, NO),
    MIX("q2_k", 10, Q2_K, ((rule){C_GQA_4, SQZ_DTYPE_Q4_K, SQZ_DTYPE_Q3_K}), ALL(Q3_K), ALL(Q3_K), ALL(Q5_K),
        ALL(Q3_K)),
    MIX("q3_k_s", 11, Q3_K, NO, NO, NO, ALL(Q5_K), NO),
    MIX("q3_k_l", 13, Q3_K, ALL(Q5_K), ALL(Q5_K), ALL(Q5_K), NO, ALL(Q5_K)),
    MIX("q4_k_s", 14, Q4_K, ((rule){C_FIRST_4, SQZ_DTYPE_Q5_K, BASE}), ((rule){C_FIRST_8TH, SQZ_DTYPE_Q5_K, BASE}),
        NO, ALL(Q5_K), ((rule){C_FIRST_8TH, SQZ_DTYPE_Q5_K, BASE})),
    MIX("q5_k_s", 16, Q5_K, NO, NO, NO, NO, NO),
    MIX("iq3_m", 27, IQ3_S, ALL(Q4_K), ((rule){C_FIRST_8TH, SQZ_DTYPE_Q4_K, BASE}), ALL(Q4_K), ALL(Q5_K),
        ((rule){C_FIRST_8TH_OR_MORE_BITS, SQZ_DTYPE_Q4_K, BASE})),
    /* the single-type ftypes: the output Q6_K (Q8_0 where 256 does not divide it), the rest the base */
    MIX("q4_1", 3, Q4_1, NO, NO, NO, NO, NO),
    MIX("q5_0", 8, Q5_0, NO, ((rule){C_FIRST_8TH_IM, SQZ_DTYPE_Q5_1, BASE}), NO, NO,
        ((rule){C_FIRST_8TH_IM, SQZ_DTYPE_Q5_1, BASE})),
    MIX("q5_1", 9, Q5_1, NO, NO, NO, NO, NO),
    MIX("q6_k", 18, Q6_K, NO, NO, NO, NO, NO),
    MIX("iq3_s", 26, IQ3_S, ((rule){C_GQA_4, SQZ_DTYPE_Q4_K, BASE}), NO, NO, ALL(Q5_K), NO),
    MIX("iq4_nl", 25, IQ4_NL, ((rule){C_GQA_4, SQZ_DTYPE_Q5_K, BASE}),
        ((rule){C_FIRST_8TH_NO_IM, SQZ_DTYPE_Q5_K, BASE}), NO, ALL(Q5_K),
        ((rule){C_FIRST_8TH_NO_IM, SQZ_DTYPE_Q5_K, BASE})),
    MIX("iq4_xs", 30, IQ4_XS, ((rule){C_GQA_4, SQZ_DTYPE_Q5_K, BASE}),
        ((rule){C_FIRST_8TH_NO_IM, SQZ_DTYPE_Q5_K, BASE}), NO, ALL(Q5_K),
        ((rule){C_FIRST_8TH_NO_IM, SQZ_DTYPE_Q5_K, BASE})),
    /* llama.cpp's MXFP4_MOE (38): a tensor with more than one matrix (the experts') MXFP4, the rest and
     * the output Q8_0 */
    {"mxfp4_moe", 38, SQZ_DTYPE_MXFP4, {NO, NO, NO, NO}, {NO, NO, NO, NO}, true},
};
#undef MIX

/* tensor_type_fallback: the type a width that the block does not divide falls back to. */
static const struct {
    sqz_dtype from, to;
} fallbacks[] = {
    {SQZ_DTYPE_Q2_K, SQZ_DTYPE_Q4_0}, {SQZ_DTYPE_Q3_K, SQZ_DTYPE_Q4_0}, {SQZ_DTYPE_Q4_K, SQZ_DTYPE_Q5_0},
    {SQZ_DTYPE_Q5_K, SQZ_DTYPE_Q5_1}, {SQZ_DTYPE_Q6_K, SQZ_DTYPE_Q8_0}, {SQZ_DTYPE_IQ3_S, SQZ_DTYPE_IQ4_NL},
    {SQZ_DTYPE_IQ4_XS, SQZ_DTYPE_IQ4_NL},
};

const sqz_qmix *sqz_qmix_find(const char *name) {
    for (size_t i = 0; name && i < sizeof mixes / sizeof mixes[0]; i++)
        if (!strcmp(mixes[i].name, name)) return &mixes[i];
    return NULL;
}

const char *sqz_qmix_name(const sqz_qmix *mix) { return mix ? mix->name : "none"; }

void sqz__qmix_names(char *buf, size_t cap) {
    size_t k = 0;
    if (cap) buf[0] = '\0';
    for (size_t i = 0; i < sizeof mixes / sizeof mixes[0] && k < cap; i++) {
        const int w = snprintf(buf + k, cap - k, "%s%s", i ? ", " : "", mixes[i].name);
        if (w < 0 || (size_t)w >= cap - k) break;
        k += (size_t)w;
    }
}

int sqz_qmix_gguf_ftype(const sqz_qmix *mix) { return mix ? mix->ftype : -1; }

static bool use_more_bits(int64_t i, int64_t n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

/* llama_hparams::n_gqa(0): layer 0's query heads per key/value head (integer division) */
static int64_t n_gqa(const sqz_model *m) {
    const int64_t h = m->layers ? m->layers[0].n_heads : m->hp.n_heads;
    const int64_t kv = m->layers ? m->layers[0].n_kv_heads : m->hp.n_kv_heads;
    return kv > 0 ? h / kv : 0;
}

static sqz_dtype apply(const rule *r, sqz_dtype base, int64_t i, const sqz_model *m, bool has_imatrix) {
    const int64_t n = m->hp.n_layers;
    bool hi = false;
    switch (r->when) {
    case C_NONE: return base;
    case C_ALWAYS: hi = true; break;
    case C_MORE_BITS: hi = use_more_bits(i, n); break;
    case C_FIRST_2: hi = i < 2; break;
    case C_FIRST_16TH: hi = i < n / 16; break;
    case C_FIRST_8TH_IM: hi = has_imatrix && i < n / 8; break;
    case C_FIRST_4: hi = i < 4; break;
    case C_FIRST_8TH: hi = i < n / 8; break;
    case C_FIRST_8TH_NO_IM: hi = !has_imatrix && i < n / 8; break;
    case C_GQA_4: hi = n_gqa(m) >= 4; break;
    case C_FIRST_8TH_OR_MORE_BITS: hi = i < n / 8 || use_more_bits(i, n); break;
    }
    const sqz_dtype t = hi ? r->hi : r->lo;
    return t == BASE ? base : t;
}

static int64_t block_of(sqz_dtype d) { return sqz_dtype_info(d)->block_size; }

sqz_dtype sqz__qmix_fallback(sqz_dtype ty, int64_t n_cols) {
    if (!(n_cols % block_of(ty))) return ty;
    sqz_dtype to = ty;
    for (size_t i = 0; i < sizeof fallbacks / sizeof fallbacks[0]; i++)
        if (fallbacks[i].from == ty) to = fallbacks[i].to;
    return n_cols % block_of(to) ? SQZ_DTYPE_F16 : to;
}

bool sqz__qmix_quantizes(const sqz_tensor *t) {
    if (!t || t->param != SQZ_PARAM_WEIGHT) return false;
    const bool exps = t->role == SQZ_ROLE_FFN_GATE_EXPS || t->role == SQZ_ROLE_FFN_UP_EXPS ||
                      t->role == SQZ_ROLE_FFN_DOWN_EXPS;
    if (t->ndim != (exps ? 3 : 2)) return false;
    switch (t->role) {
    case SQZ_ROLE_FFN_GATE_EXPS:
    case SQZ_ROLE_FFN_UP_EXPS:
    case SQZ_ROLE_FFN_DOWN_EXPS: /* the router (ffn_gate_inp) is not: llama-quantize keeps it too */
    case SQZ_ROLE_TOKEN_EMBD:
    case SQZ_ROLE_OUTPUT:
    case SQZ_ROLE_ATTN_V:
    case SQZ_ROLE_FFN_DOWN:
    case SQZ_ROLE_ATTN_OUT:
    case SQZ_ROLE_ATTN_Q:
    case SQZ_ROLE_ATTN_K:
    case SQZ_ROLE_FFN_GATE:
    case SQZ_ROLE_FFN_UP: return true;
    default: return false; /* norms, position embeddings, the pooler: not quantized */
    }
}

sqz_dtype sqz__qmix_type_at(const sqz_qmix *mix, const sqz_model *m, const sqz_tensor *t, bool has_imatrix,
                            int64_t i) {
    if (!mix || !sqz__qmix_quantizes(t)) return t ? t->dtype : SQZ_DTYPE_F32;
    return sqz__qmix_fallback(sqz__qmix_wanted_at(mix, m, t, has_imatrix, i), sqz_tensor_row_len(t));
}

sqz_dtype sqz__qmix_wanted_at(const sqz_qmix *mix, const sqz_model *m, const sqz_tensor *t, bool has_imatrix,
                              int64_t i) {
    if (!mix || !sqz__qmix_quantizes(t)) return t ? t->dtype : SQZ_DTYPE_F32;
    const int64_t n_cols = t->shape[1];
    if (mix->experts_only)
        return t->role == SQZ_ROLE_FFN_GATE_EXPS || t->role == SQZ_ROLE_FFN_UP_EXPS || t->role == SQZ_ROLE_FFN_DOWN_EXPS
                   ? mix->base : SQZ_DTYPE_Q8_0;
    const rule *rules = m->hp.n_expert == 8 ? mix->rules8 : mix->rules;
    sqz_dtype ty = mix->base;
    /* a tied embedding is quantized as the output */
    const bool as_output = t->role == SQZ_ROLE_OUTPUT || (t->role == SQZ_ROLE_TOKEN_EMBD && m->hp.tied_embeddings);
    switch (as_output ? SQZ_ROLE_OUTPUT : t->role) {
    case SQZ_ROLE_OUTPUT:
        ty = n_cols % block_of(mix->base) ? SQZ_DTYPE_Q8_0
             : mix->base != SQZ_DTYPE_Q8_0 ? SQZ_DTYPE_Q6_K
                                            : SQZ_DTYPE_Q8_0;
        break;
    case SQZ_ROLE_ATTN_V: ty = apply(&rules[R_ATTN_V], mix->base, i, m, has_imatrix); break;
    case SQZ_ROLE_ATTN_K: ty = apply(&rules[R_ATTN_K], mix->base, i, m, has_imatrix); break;
    case SQZ_ROLE_FFN_DOWN: case SQZ_ROLE_FFN_DOWN_EXPS: /* llama.cpp's category: "ffn_down" in the name */
        ty = apply(&rules[R_FFN_DOWN], mix->base, i, m, has_imatrix);
        break;
    case SQZ_ROLE_ATTN_OUT: ty = apply(&rules[R_ATTN_OUT], mix->base, i, m, has_imatrix); break;
    default: break;
    }
    return ty;
}

sqz_dtype sqz_qmix_type(const sqz_qmix *mix, const sqz_model *m, const sqz_tensor *t, bool has_imatrix) {
    return sqz__qmix_type_at(mix, m, t, has_imatrix, t ? t->layer : 0);
}

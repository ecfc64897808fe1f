/*
 * quant/policy.c - which tensors a quantization pass touches by default: the linear layers
 * of the blocks. Embeddings, norms, biases, the BERT pooler and the classifier stay float
 * (the classifier is the most sensitive matrix of a small LM and often tied to the embedding;
 * --quant-output style options set sqz_quant_policy.quant_output).
 */
#include "quant/quant_internal.h"

bool sqz_quant_policy_wants(const sqz_tensor *t, const sqz_qtarget *target, const sqz_quant_policy *p,
                            const char **why) {
    const char *r = NULL;
    if (!t) r = "no tensor";
    else if (t->param != SQZ_PARAM_WEIGHT) r = "biases stay float";
    else if (t->ndim != 2) r = "only matrices are quantized";
    else {
        switch (t->role) {
        case SQZ_ROLE_ATTN_Q:
        case SQZ_ROLE_ATTN_K:
        case SQZ_ROLE_ATTN_V:
        case SQZ_ROLE_ATTN_OUT:
        case SQZ_ROLE_FFN_GATE:
        case SQZ_ROLE_FFN_UP:
        case SQZ_ROLE_FFN_DOWN:
        case SQZ_ROLE_FFN_GATE_EXPS: /* one expert's matrix (compress/pass_quant_experts.c) */
        case SQZ_ROLE_FFN_UP_EXPS:
        case SQZ_ROLE_FFN_DOWN_EXPS: break;
        case SQZ_ROLE_OUTPUT:
            if (!p || !p->quant_output) r = "the classifier stays float (quant_output)";
            break;
        case SQZ_ROLE_TOKEN_EMBD: {
            const bool gguf = target && sqz_qformat_is_gguf(target->fmt);
            if (!p || !p->quant_embeddings) r = "embeddings stay float (quant_embeddings)";
            else if (!gguf) r = "embeddings are quantized only to GGUF block formats (row lookups)";
            break;
        }
        case SQZ_ROLE_POOLER: r = "the BERT pooler stays float"; break;
        default: r = "embeddings and norms stay float"; break;
        }
    }
    if (!r && target && !sqz_qtarget_fits(target, t->shape[1]))
        r = "its input width is not a multiple of the target's group";
    if (why) *why = r;
    return r == NULL;
}

/*
 * runtime/moe.c - the FFN of a mixture-of-experts layer (Mixtral, Qwen3-MoE), in place of the dense
 * SwiGLU when the layer has a router (FFN_GATE_INP):
 *
 *   p     = softmax(h . Wr^T)                      (float, over the layer's n_expert experts)
 *   S     = the hp.n_expert_used largest p         (ties: the lower index, as torch.topk on CPU)
 *   w_e   = p_e, or p_e / sum over S of p          (hp.expert_norm_topk: Mixtral, norm_topk_prob)
 *   out   = sum over e in S of w_e . down_e(act(gate_e(h)) * up_e(h))
 *
 * which is modeling_qwen3_moe.py's / modeling_mixtral.py's TopKRouter and Experts, and llama.cpp's
 * build_moe_ffn with softmax gating and norm_w. Each expert runs once per window on the tokens routed to
 * it (gathered into moe_x), its rows of the stacked FFN_*_EXPS tensors multiplied in place
 * (sqz__linear_slice), its output added into out with the token's weight, experts in index order.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/backend_impl.h"
#include "runtime/runtime_internal.h"

static sqz_status alloc_bytes(sqz_session *s, int64_t n, size_t each, void **out) {
    size_t bytes;
    SQZ_RETURN_IF(n < 1 || !sqz__mul_size((size_t)n, each, &bytes), SQZ_ERR_NOMEM,
                  "runtime: mixture-of-experts scratch overflows");
    *out = sqz__malloc(bytes);
    if (!*out) return SQZ_ERR_NOMEM;
    s->scratch_bytes += (int64_t)bytes;
    return SQZ_OK;
}

sqz_status sqz__moe_setup(sqz_session *s) {
    const sqz_model *m = s->m;
    if (!s->fam->experts) return SQZ_OK;
    SQZ_RETURN_IF(s->dcache || !sqz_backend_host_memory(s->be), SQZ_ERR_UNSUPPORTED,
                  "%s: backend '%s' runs no mixture of experts yet (the CPU backend does)", m->source_path,
                  s->be->ops->name);
    for (int64_t i = 0; i < m->n_tensors; i++) {
        const sqz_tensor *t = &m->tensors[i];
        const bool exps = t->role == SQZ_ROLE_FFN_GATE_EXPS || t->role == SQZ_ROLE_FFN_UP_EXPS ||
                          t->role == SQZ_ROLE_FFN_DOWN_EXPS;
        SQZ_RETURN_IF(exps && t->qp, SQZ_ERR_UNSUPPORTED,
                      "%s: tensor '%s': experts with sqz's int8/int4 schemes do not run (float and GGUF block "
                      "types do)", m->source_path, t->name);
    }
    const int64_t T = s->max_tokens, E = m->hp.n_expert, K = m->hp.n_expert_used;
    SQZ_TRY(alloc_bytes(s, T * s->d, sizeof(float), (void **)&s->moe_x));
    SQZ_TRY(alloc_bytes(s, T * s->d, sizeof(float), (void **)&s->moe_y));
    SQZ_TRY(alloc_bytes(s, T * E, sizeof(float), (void **)&s->moe_p));
    SQZ_TRY(alloc_bytes(s, T * K, sizeof(int32_t), (void **)&s->moe_sel));
    SQZ_TRY(alloc_bytes(s, T * K, sizeof(float), (void **)&s->moe_w));
    SQZ_TRY(alloc_bytes(s, T, sizeof(float), (void **)&s->moe_rw));
    return alloc_bytes(s, T, sizeof(int32_t), (void **)&s->moe_rows);
}

void sqz__moe_free(sqz_session *s) {
    free(s->moe_x);
    free(s->moe_y);
    free(s->moe_p);
    free(s->moe_sel);
    free(s->moe_w);
    free(s->moe_rw);
    free(s->moe_rows);
}

/* Router row p (E logits) -> softmax in place, then the K largest into sel / w (renormalised if asked). */
static void route(float *p, int64_t E, int64_t K, bool norm, int32_t *sel, float *w) {
    float mx = p[0];
    for (int64_t e = 1; e < E; e++) mx = p[e] > mx ? p[e] : mx;
    float sum = 0;
    for (int64_t e = 0; e < E; e++) {
        p[e] = expf(p[e] - mx);
        sum += p[e];
    }
    for (int64_t e = 0; e < E; e++) p[e] /= sum;
    float wsum = 0;
    for (int64_t k = 0; k < K; k++) {
        int64_t best = -1;
        for (int64_t e = 0; e < E; e++) {
            bool taken = false;
            for (int64_t j = 0; j < k; j++) taken = taken || sel[j] == e;
            if (!taken && (best < 0 || p[e] > p[best])) best = e;
        }
        sel[k] = (int32_t)best;
        w[k] = p[best];
        wsum += w[k];
    }
    if (norm)
        for (int64_t k = 0; k < K; k++) w[k] /= wsum;
}

/* The session's hook on expert e's input x (cnt, dim) of the roles in bits (calibration per expert). */
static sqz_status hook_expert(sqz_session *s, int32_t layer, uint32_t bits, const float *x, int64_t cnt, int64_t dim,
                              int64_t e) {
    if (!s->hook) return SQZ_OK;
    const sqz_hook_event ev = {.point = SQZ_HOOK_LINEAR_IN, .layer = layer, .roles = bits, .x = x, .n_tokens = cnt,
                               .dim = dim, .in_expert = (int32_t)e + 1};
    return s->hook(s->hook_user, &ev);
}

#define BIT(r) (1u << (unsigned)(r))

/* Expert e of the layer on its gathered tokens moe_x (cnt, d) -> moe_y (cnt, d). */
static sqz_status expert(sqz_session *s, int32_t layer, int64_t e, int64_t cnt) {
    const int64_t ff = s->m->layers[layer].d_ff;
    SQZ_TRY(hook_expert(s, layer, BIT(SQZ_ROLE_FFN_GATE_EXPS) | BIT(SQZ_ROLE_FFN_UP_EXPS), s->moe_x, cnt, s->d, e));
    SQZ_TRY(sqz__linear_slice(s, s->moe_x, cnt, sqz__st(s, SQZ_ROLE_FFN_GATE_EXPS, layer, SQZ_PARAM_WEIGHT), e,
                              s->ff_a));
    SQZ_TRY(sqz__linear_slice(s, s->moe_x, cnt, sqz__st(s, SQZ_ROLE_FFN_UP_EXPS, layer, SQZ_PARAM_WEIGHT), e,
                              s->ff_b));
    if (s->m->hp.act == SQZ_ACT_GELU_TANH) sqz__gelu_tanh_mul(s->pool, s->ff_a, s->ff_b, cnt, ff);
    else sqz__silu_mul(s->pool, s->ff_a, s->ff_b, cnt, ff);
    SQZ_TRY(hook_expert(s, layer, BIT(SQZ_ROLE_FFN_DOWN_EXPS), s->ff_a, cnt, ff, e));
    return sqz__linear_slice(s, s->ff_a, cnt, sqz__st(s, SQZ_ROLE_FFN_DOWN_EXPS, layer, SQZ_PARAM_WEIGHT), e,
                             s->moe_y);
}

/* The session's hook on expert e's output moe_y (cnt, d) and its rows' routing weights (REAP's score). */
static sqz_status hook_expert_out(sqz_session *s, int32_t layer, int64_t e, int64_t cnt) {
    if (!s->hook) return SQZ_OK;
    for (int64_t i = 0; i < cnt; i++) s->moe_rw[i] = s->moe_w[s->moe_rows[i]];
    const sqz_hook_event ev = {.point = SQZ_HOOK_EXPERT_OUT, .layer = layer, .x = s->moe_y, .n_tokens = cnt,
                               .dim = s->d, .in_expert = (int32_t)e + 1, .weights = s->moe_rw};
    return s->hook(s->hook_user, &ev);
}

sqz_status sqz__moe_ffn(sqz_session *s, int32_t layer, const float *h, int64_t n, float *out) {
    const sqz_hparams *hp = &s->m->hp;
    const int64_t d = s->d, E = s->m->layers[layer].n_expert, K = hp->n_expert_used;
    SQZ_TRY(sqz__linear(s, h, n, sqz__st(s, SQZ_ROLE_FFN_GATE_INP, layer, SQZ_PARAM_WEIGHT), NULL, s->moe_p));
    for (int64_t t = 0; t < n; t++)
        route(s->moe_p + t * E, E, K, hp->expert_norm_topk, s->moe_sel + t * K, s->moe_w + t * K);
    memset(out, 0, (size_t)(n * d) * sizeof(float));
    for (int64_t e = 0; e < E; e++) {
        int64_t cnt = 0;
        for (int64_t t = 0; t < n; t++) {
            for (int64_t k = 0; k < K; k++) {
                if (s->moe_sel[t * K + k] != e) continue;
                s->moe_rows[cnt] = (int32_t)(t * K + k);
                memcpy(s->moe_x + cnt * d, h + t * d, (size_t)d * sizeof(float));
                cnt++;
            }
        }
        if (cnt == 0) continue;
        SQZ_TRY(expert(s, layer, e, cnt));
        SQZ_TRY(hook_expert_out(s, layer, e, cnt));
        for (int64_t i = 0; i < cnt; i++) {
            const int64_t tk = s->moe_rows[i];
            const float w = s->moe_w[tk], *y = s->moe_y + i * d;
            float *o = out + tk / K * d;
            for (int64_t c = 0; c < d; c++) o[c] += w * y[c];
        }
    }
    return SQZ_OK;
}

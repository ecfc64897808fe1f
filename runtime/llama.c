/*
 * runtime/llama.c - the llama family's passes: the embedding, one decoder block, the classifier head.
 *
 *   h = RMSNorm(x) * attn_norm
 *   q = h Wq^T (+bq), k = h Wk^T (+bk), v = h Wv^T (+bv)      (biases: qwen2)
 *   q, k rotated (RoPE, the model's row layout); k, v stored in the cache
 *   x += Attention(q, K, V) Wo^T                              (causal, GQA)
 *   h = RMSNorm(x) * ffn_norm
 *   x += (silu(h Wg^T) * (h Wu^T)) Wd^T                       (SwiGLU)
 * and the head: logits = RMSNorm(x) * output_norm . Wout^T, Wout = output or the
 * token embedding when tied. This is modeling_llama.py's LlamaDecoderLayer and
 * llama2.c's forward(), over a whole window at once.
 *
 * The newer decoders are this block with what their tensors and hyperparameters switch on
 * (no branch on a family): q and k RMSNormed per head before the rotation when the layer has
 * attn_q_norm / attn_k_norm (Qwen3, Gemma 3); attention's and the FFN's outputs RMSNormed before
 * their residual adds when it has post_attention_norm / post_ffw_norm (Gemma 3); the layer's
 * sliding window and its rotary tables (Gemma 3's local layers); hp.attn_scale; a partial rotation
 * (hp.rope_dim, Phi-3); GELU-tanh instead of SiLU (hp.act); embeddings times sqrt(d_model) where
 * the family row says so (Gemma); and, where the layer has a router (ffn_gate_inp), a mixture of
 * experts in place of the dense FFN (moe.c: Mixtral, Qwen3-MoE).
 */
#include <math.h>
#include <string.h>

#include "runtime/runtime_internal.h"

#define ROLE_BIT(r) (1u << (unsigned)(r))

/* y = x W^T (+ b) for the linear layer of role r (its bias when the model has one). */
static sqz_status linear_role(sqz_session *s, sqz_role r, int32_t layer, const float *x, int64_t n, float *y) {
    const float *b;
    SQZ_TRY(sqz__param(s, r, layer, SQZ_PARAM_BIAS, &b));
    return sqz__linear(s, x, n, sqz__st(s, r, layer, SQZ_PARAM_WEIGHT), b, y);
}

/* The token embedding's rows; positions are rotary, applied inside the blocks. */
sqz_status sqz__llama_embed(sqz_session *s, const int32_t *tokens, const int32_t *types, int64_t n, int64_t pos,
                            float *x) {
    (void)types;
    (void)pos;
    SQZ_TRY(sqz__embed_rows(sqz__st(s, SQZ_ROLE_TOKEN_EMBD, -1, SQZ_PARAM_WEIGHT), tokens, n, x));
    if (s->fam->embed_scale_sqrt_d) { /* llama.cpp's ggml_scale(inpL, sqrtf(n_embd)) */
        const float k = sqrtf((float)s->d);
        for (int64_t i = 0; i < n * s->d; i++) x[i] *= k;
    }
    return SQZ_OK;
}

/* An optional RMSNorm (role r of the layer) of rows (n, d) in place: a no-op when the layer has none. */
static sqz_status norm_opt(sqz_session *s, sqz_role r, int32_t layer, float *x, int64_t n, int64_t d) {
    const float *w;
    SQZ_TRY(sqz__param(s, r, layer, SQZ_PARAM_WEIGHT, &w));
    if (w) sqz__rmsnorm(s->pool, x, w, s->m->hp.norm_eps, n, d, x);
    return SQZ_OK;
}

/* q (n, qd) and the new keys (n, kvd): per-head norms where the layer has them, then the rotation
 * with the layer's tables. */
static sqz_status qk_position(sqz_session *s, int32_t layer, float *q, float *k, int64_t n, int64_t pos) {
    const sqz_layer_dims *ld = &s->m->layers[layer];
    const int64_t hd = s->hd;
    SQZ_TRY(norm_opt(s, SQZ_ROLE_ATTN_Q_NORM, layer, q, n * ld->n_heads, hd));
    SQZ_TRY(norm_opt(s, SQZ_ROLE_ATTN_K_NORM, layer, k, n * ld->n_kv_heads, hd));
    const bool local = ld->window > 0 && s->rope_cos_l;
    const float *cs = local ? s->rope_cos_l : s->rope_cos, *sn = local ? s->rope_sin_l : s->rope_sin;
    const sqz_rope_layout lay = s->m->hp.rope_layout;
    const int64_t qd = ld->n_heads * hd, kd = ld->n_kv_heads * hd;
    if (s->spans) { /* batched sequences: each span from its own first position */
        for (int64_t e = 0; e < s->n_spans; e++) {
            const sqz_span *sp = &s->spans[e];
            const int64_t p0 = sp->parent >= 0 ? s->spans[sp->parent].len : 0;
            sqz__rope(s->pool, q + sp->start * qd, qd, sp->len, ld->n_heads, hd, s->rope_dim, p0, lay, cs, sn);
            sqz__rope(s->pool, k + sp->start * kd, kd, sp->len, ld->n_kv_heads, hd, s->rope_dim, p0, lay, cs, sn);
        }
        return SQZ_OK;
    }
    sqz__rope(s->pool, q, qd, n, ld->n_heads, hd, s->rope_dim, pos, lay, cs, sn);
    sqz__rope(s->pool, k, kd, n, ld->n_kv_heads, hd, s->rope_dim, pos, lay, cs, sn);
    return SQZ_OK;
}

/* The dense SwiGLU / GeGLU of the normed rows s->h (n, d), into s->h. */
static sqz_status dense_ffn(sqz_session *s, int32_t layer, int64_t n, int64_t pos) {
    const int64_t d = s->d, ff = s->m->layers[layer].d_ff;
    SQZ_TRY(sqz__hook(s, SQZ_HOOK_LINEAR_IN, layer, ROLE_BIT(SQZ_ROLE_FFN_GATE) | ROLE_BIT(SQZ_ROLE_FFN_UP), s->h, n,
                      d, pos));
    SQZ_TRY(linear_role(s, SQZ_ROLE_FFN_GATE, layer, s->h, n, s->ff_a));
    SQZ_TRY(linear_role(s, SQZ_ROLE_FFN_UP, layer, s->h, n, s->ff_b));
    if (s->m->hp.act == SQZ_ACT_GELU_TANH) sqz__gelu_tanh_mul(s->pool, s->ff_a, s->ff_b, n, ff);
    else sqz__silu_mul(s->pool, s->ff_a, s->ff_b, n, ff);
    SQZ_TRY(sqz__hook(s, SQZ_HOOK_LINEAR_IN, layer, ROLE_BIT(SQZ_ROLE_FFN_DOWN), s->ff_a, n, ff, pos));
    return linear_role(s, SQZ_ROLE_FFN_DOWN, layer, s->ff_a, n, s->h);
}

sqz_status sqz__llama_block(sqz_session *s, int32_t layer, float *x, int64_t n, int64_t pos) {
    const sqz_hparams *hp = &s->m->hp;
    const sqz_layer_dims *ld = &s->m->layers[layer];
    int64_t d = s->d, hd = s->hd, qd = ld->n_heads * hd, kvd = ld->n_kv_heads * hd;
    float *kc = s->kcache + s->kv_off[layer] + pos * kvd, *vc = s->vcache + s->kv_off[layer] + pos * kvd;
    if (!s->spans && sqz__dev_block_ok(s, layer, pos)) return sqz__dev_block_run(s, layer, x, n, pos);

    SQZ_TRY(sqz__hook(s, SQZ_HOOK_BLOCK_IN, layer, 0, x, n, d, pos));

    /* attention */
    const float *w_an, *w_fn;
    SQZ_TRY(sqz__param(s, SQZ_ROLE_ATTN_NORM, layer, SQZ_PARAM_WEIGHT, &w_an));
    SQZ_TRY(sqz__param(s, SQZ_ROLE_FFN_NORM, layer, SQZ_PARAM_WEIGHT, &w_fn));
    sqz__rmsnorm(s->pool, x, w_an, hp->norm_eps, n, d, s->h);
    SQZ_TRY(sqz__hook(s, SQZ_HOOK_LINEAR_IN, layer,
                      ROLE_BIT(SQZ_ROLE_ATTN_Q) | ROLE_BIT(SQZ_ROLE_ATTN_K) | ROLE_BIT(SQZ_ROLE_ATTN_V), s->h, n, d,
                      pos));
    SQZ_TRY(linear_role(s, SQZ_ROLE_ATTN_Q, layer, s->h, n, s->q));
    SQZ_TRY(linear_role(s, SQZ_ROLE_ATTN_K, layer, s->h, n, kc));
    SQZ_TRY(linear_role(s, SQZ_ROLE_ATTN_V, layer, s->h, n, vc));
    SQZ_TRY(qk_position(s, layer, s->q, kc, n, pos));
    s->kv_valid[layer] = pos + n;
    sqz__attention(s, layer, s->q, qd, n, pos, s->fam->causal, s->att, qd);
    SQZ_TRY(sqz__hook(s, SQZ_HOOK_LINEAR_IN, layer, ROLE_BIT(SQZ_ROLE_ATTN_OUT), s->att, n, qd, pos));
    SQZ_TRY(linear_role(s, SQZ_ROLE_ATTN_OUT, layer, s->att, n, s->h));
    SQZ_TRY(norm_opt(s, SQZ_ROLE_ATTN_POST_NORM, layer, s->h, n, d));
    sqz__add(s->pool, x, s->h, n, d);

    /* feed-forward: dense, or a mixture of experts where the layer has a router */
    sqz__rmsnorm(s->pool, x, w_fn, hp->norm_eps, n, d, s->h);
    if (sqz__st(s, SQZ_ROLE_FFN_GATE_INP, layer, SQZ_PARAM_WEIGHT)) {
        SQZ_TRY(sqz__moe_ffn(s, layer, s->h, n, s->att)); /* att (T, max(q, d)) is free here */
        memcpy(s->h, s->att, (size_t)(n * d) * sizeof(float));
    } else {
        SQZ_TRY(dense_ffn(s, layer, n, pos));
    }
    SQZ_TRY(norm_opt(s, SQZ_ROLE_FFN_POST_NORM, layer, s->h, n, d));
    sqz__add(s->pool, x, s->h, n, d);

    return sqz__hook(s, SQZ_HOOK_BLOCK_OUT, layer, 0, x, n, d, pos);
}

sqz_status sqz__llama_head(sqz_session *s, const float *x, int64_t n, int64_t logits_from, float *logits) {
    int64_t d = s->d, rows = n - logits_from;
    if (rows <= 0 || (!logits && !s->hook)) return SQZ_OK;
    const float *w, *b;
    SQZ_TRY(sqz__param(s, SQZ_ROLE_OUTPUT_NORM, -1, SQZ_PARAM_WEIGHT, &w));
    SQZ_TRY(sqz__param(s, SQZ_ROLE_OUTPUT, -1, SQZ_PARAM_BIAS, &b));
    sqz__rmsnorm(s->pool, x + logits_from * d, w, s->m->hp.norm_eps, rows, d, s->h);
    SQZ_TRY(sqz__hook(s, SQZ_HOOK_LINEAR_IN, -1, ROLE_BIT(SQZ_ROLE_OUTPUT), s->h, rows, d, logits_from));
    if (!logits) return SQZ_OK; /* the classifier's input for the hook only (calibration) */
    return sqz__linear(s, s->h, rows, s->classifier, b, logits);
}

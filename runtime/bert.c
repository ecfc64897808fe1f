/*
 * runtime/bert.c - BERT encoder (Devlin et al. 2019) as transformers' BertModel:
 *
 *   x = LayerNorm(word[tok] + position[p] + token_type[type])          (embeddings)
 *   per layer (post-LN):
 *     a = Attention(x Wq^T + bq, x Wk^T + bk, x Wv^T + bv)  (bidirectional)
 *     x = LayerNorm(x + a Wo^T + bo)                        (attention.output.LayerNorm)
 *     x = LayerNorm(x + gelu(x Wi^T + bi) Wo2^T + bo2)      (output.LayerNorm, erf GELU)
 *
 * The sentence embedding (mean pooling, L2 normalisation) is in session.c.
 */
#include <string.h>

#include "runtime/runtime_internal.h"

#define ROLE_BIT(r) (1u << (unsigned)(r))

static sqz_status linear_role(sqz_session *s, sqz_role r, int32_t layer, const float *x, int64_t n, float *y) {
    const float *b;
    SQZ_TRY(sqz__param(s, r, layer, SQZ_PARAM_BIAS, &b));
    return sqz__linear(s, x, n, sqz__st(s, r, layer, SQZ_PARAM_WEIGHT), b, y);
}

sqz_status sqz__bert_embed(sqz_session *s, const int32_t *tokens, const int32_t *types, int64_t n, int64_t pos,
                           float *x) {
    const sqz_hparams *hp = &s->m->hp;
    int64_t d = s->d;
    const sqz_tensor *pe = sqz__st(s, SQZ_ROLE_POS_EMBD, -1, SQZ_PARAM_WEIGHT);
    const sqz_tensor *te = sqz__st(s, SQZ_ROLE_TYPE_EMBD, -1, SQZ_PARAM_WEIGHT);
    SQZ_RETURN_IF(!pe, SQZ_ERR_ARCH, "%s: BERT model without position embeddings", s->m->source_path);
    SQZ_RETURN_IF(pos + n > pe->shape[0], SQZ_ERR_INVALID_ARG,
                  "runtime: positions up to %lld exceed the %lld position embeddings", (long long)(pos + n),
                  (long long)pe->shape[0]);
    if (types) {
        for (int64_t i = 0; i < n; i++) {
            SQZ_RETURN_IF(!te || types[i] < 0 || types[i] >= te->shape[0], SQZ_ERR_INVALID_ARG,
                          "runtime: token type %d at %lld out of range", types[i], (long long)i);
        }
    }
    SQZ_TRY(sqz__embed_rows(sqz__st(s, SQZ_ROLE_TOKEN_EMBD, -1, SQZ_PARAM_WEIGHT), tokens, n, x));
    /* Position and type rows go through the h scratch one row at a time (any dtype). */
    float *row = s->h;
    for (int64_t i = 0; i < n; i++) {
        int32_t p = (int32_t)(pos + i);
        SQZ_TRY(sqz__embed_rows(pe, &p, 1, row));
        for (int64_t c = 0; c < d; c++) x[i * d + c] += row[c];
        if (te) {
            int32_t t = types ? types[i] : 0;
            SQZ_TRY(sqz__embed_rows(te, &t, 1, row));
            for (int64_t c = 0; c < d; c++) x[i * d + c] += row[c];
        }
    }
    const float *w, *b;
    SQZ_TRY(sqz__param(s, SQZ_ROLE_EMBD_NORM, -1, SQZ_PARAM_WEIGHT, &w));
    SQZ_TRY(sqz__param(s, SQZ_ROLE_EMBD_NORM, -1, SQZ_PARAM_BIAS, &b));
    if (w) sqz__layernorm(s->pool, x, w, b, hp->norm_eps, n, d, x);
    return SQZ_OK;
}

sqz_status sqz__bert_block(sqz_session *s, int32_t layer, float *x, int64_t n, int64_t pos) {
    const sqz_hparams *hp = &s->m->hp;
    const sqz_layer_dims *ld = &s->m->layers[layer];
    int64_t d = s->d, hd = s->hd, qd = ld->n_heads * hd, kvd = ld->n_kv_heads * hd, ff = ld->d_ff;
    float *kc = s->kcache + s->kv_off[layer] + pos * kvd, *vc = s->vcache + s->kv_off[layer] + pos * kvd;
    if (sqz__dev_block_ok(s, layer, pos)) return sqz__dev_block_run(s, layer, x, n, pos);
    const float *n1w, *n1b, *n2w, *n2b;
    SQZ_TRY(sqz__param(s, SQZ_ROLE_ATTN_OUT_NORM, layer, SQZ_PARAM_WEIGHT, &n1w));
    SQZ_TRY(sqz__param(s, SQZ_ROLE_ATTN_OUT_NORM, layer, SQZ_PARAM_BIAS, &n1b));
    SQZ_TRY(sqz__param(s, SQZ_ROLE_LAYER_OUT_NORM, layer, SQZ_PARAM_WEIGHT, &n2w));
    SQZ_TRY(sqz__param(s, SQZ_ROLE_LAYER_OUT_NORM, layer, SQZ_PARAM_BIAS, &n2b));

    SQZ_TRY(sqz__hook(s, SQZ_HOOK_BLOCK_IN, layer, 0, x, n, d, pos));
    SQZ_TRY(sqz__hook(s, SQZ_HOOK_LINEAR_IN, layer,
                      ROLE_BIT(SQZ_ROLE_ATTN_Q) | ROLE_BIT(SQZ_ROLE_ATTN_K) | ROLE_BIT(SQZ_ROLE_ATTN_V), x, n, d, pos));
    SQZ_TRY(linear_role(s, SQZ_ROLE_ATTN_Q, layer, x, n, s->q));
    SQZ_TRY(linear_role(s, SQZ_ROLE_ATTN_K, layer, x, n, kc));
    SQZ_TRY(linear_role(s, SQZ_ROLE_ATTN_V, layer, x, n, vc));
    s->kv_valid[layer] = pos + n;
    sqz__attention(s, layer, s->q, qd, n, pos, s->fam->causal, s->att, qd);
    SQZ_TRY(sqz__hook(s, SQZ_HOOK_LINEAR_IN, layer, ROLE_BIT(SQZ_ROLE_ATTN_OUT), s->att, n, qd, pos));
    SQZ_TRY(linear_role(s, SQZ_ROLE_ATTN_OUT, layer, s->att, n, s->h));
    sqz__add(s->pool, x, s->h, n, d);
    sqz__layernorm(s->pool, x, n1w, n1b, hp->norm_eps, n, d, x);

    SQZ_TRY(sqz__hook(s, SQZ_HOOK_LINEAR_IN, layer, ROLE_BIT(SQZ_ROLE_FFN_UP), x, n, d, pos));
    SQZ_TRY(linear_role(s, SQZ_ROLE_FFN_UP, layer, x, n, s->ff_a));
    sqz__gelu(s->pool, s->ff_a, n, ff);
    SQZ_TRY(sqz__hook(s, SQZ_HOOK_LINEAR_IN, layer, ROLE_BIT(SQZ_ROLE_FFN_DOWN), s->ff_a, n, ff, pos));
    SQZ_TRY(linear_role(s, SQZ_ROLE_FFN_DOWN, layer, s->ff_a, n, s->h));
    sqz__add(s->pool, x, s->h, n, d);
    sqz__layernorm(s->pool, x, n2w, n2b, hp->norm_eps, n, d, x);

    return sqz__hook(s, SQZ_HOOK_BLOCK_OUT, layer, 0, x, n, d, pos);
}

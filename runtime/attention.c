/*
 * runtime/attention.c - a session's attention over its key/value cache: the layer's cache rows
 * and the session's scratch handed to the CPU's attention (kernels/cpu/attn.c).
 *
 * Few queries (generation: n < SQZ__QMM_TILE_M) are split over the session's pool by query head
 * when the scores scratch has a row for every thread; otherwise the gathered products run.
 */
#include "kernels/cpu/backend_impl.h"
#include "kernels/cpu/attn.h"
#include "runtime/runtime_internal.h"

void sqz__attention(sqz_session *s, int32_t layer, const float *q, int64_t ldq, int64_t n, int64_t pos, bool causal,
                    float *out, int64_t ldo) {
    const double t0 = sqz__prof_begin();
    const sqz_layer_dims *ld = &s->m->layers[layer];
    const int64_t qb = s->max_tokens < SQZ__QBLOCK ? s->max_tokens : SQZ__QBLOCK;
    const bool few = n < SQZ__QMM_TILE_M && sqz__pool_threads(s->pool) <= s->max_group * qb;
    const int64_t kv_dim = ld->n_kv_heads * s->hd;
    const sqz_attention_args a = {.q = q, .ldq = ldq, .k = s->kcache + s->kv_off[layer],
                                  .v = s->vcache + s->kv_off[layer], .ldkv = kv_dim, .out = out, .ldo = ldo, .n = n,
                                  .pos = pos, .n_heads = ld->n_heads, .n_kv_heads = ld->n_kv_heads,
                                  .head_dim = s->hd, .causal = causal, .scale = s->m->hp.attn_scale,
                                  .window = ld->window};
    const sqz__attn_scratch w = {s->scores, s->max_tokens, s->qg, s->dot, s->span_vis};
    sqz__attention_cpu(s->pool, &a, &w, few);
    sqz__prof_end(SQZ__PROF_FWD_ATTN, t0);
}

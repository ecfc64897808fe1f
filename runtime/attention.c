/*
 * runtime/attention.c - scaled dot-product attention over the key/value cache
 * (Vaswani et al. 2017), grouped-query (Ainslie et al. 2023): query head h reads
 * key/value head h / (n_heads / n_kv_heads).
 *
 * For each key/value head and each block of SQZ__QBLOCK queries, the queries of all the
 * heads sharing that key/value head are gathered into one (group * rows, head_dim) matrix,
 * then: S = Q K^T (one sgemm over the keys the block can see), row-wise masked softmax on
 * the pool, O = P V (one sgemm), scattered back to each head's columns. Grouping makes the
 * products `group` times taller (fewer, more efficient BLAS calls); causal blocking skips
 * the keys after a block's last query, so the wasted (masked) work is at most one block's
 * triangle.
 *
 * Few queries (generation: n < SQZ__QMM_TILE_M) are split over the session's pool by query
 * head instead: each thread scores its heads' keys with the CPU kernels' f32 dot product, takes
 * the softmax in its own row of the scores scratch and sums the values, so a single token's
 * attention uses every thread (the BLAS products of one token are too small to split).
 */
#include <cblas.h>
#include <math.h>
#include <string.h>

#include "runtime/runtime_internal.h"

typedef struct {
    float *scores;
    int64_t width;    /* columns of S for this block (keys visible to its last query) */
    int64_t first;    /* absolute position of the block's first query */
    int64_t mb;       /* queries per head in the block; row r is query r % mb */
    bool causal;
    float scale;
} softmax_job;

static void softmax_rows(void *c, int64_t b, int64_t e, int t) {
    (void)t;
    const softmax_job *j = c;
    for (int64_t r = b; r < e; r++) {
        int64_t len = j->causal ? j->first + r % j->mb + 1 : j->width;
        sqz__softmax_row(j->scores + r * j->width, len, j->width, j->scale);
    }
}

typedef struct {
    const sqz_session *s;
    const float *q, *kc, *vc;
    float *out;
    int64_t ldq, ldo, n, pos, group, kv_dim;
    bool causal;
    float scale;
} heads_job;

/* Query heads [b, e) for the few queries of the job; thread t uses scores row t. */
static void heads_few(void *c, int64_t b, int64_t e, int thread) {
    const heads_job *j = c;
    const int64_t hd = j->s->hd;
    float *sc = j->s->scores + (int64_t)thread * j->s->max_tokens;
    for (int64_t h = b; h < e; h++) {
        const float *kg = j->kc + (h / j->group) * hd, *vg = j->vc + (h / j->group) * hd;
        for (int64_t i = 0; i < j->n; i++) {
            const int64_t width = j->causal ? j->pos + i + 1 : j->pos + j->n;
            const float *qh = j->q + i * j->ldq + h * hd;
            for (int64_t t = 0; t < width; t++) sc[t] = j->s->dot(qh, kg + t * j->kv_dim, hd);
            sqz__softmax_row(sc, width, width, j->scale);
            float *o = j->out + i * j->ldo + h * hd;
            memset(o, 0, (size_t)hd * sizeof(float));
            for (int64_t t = 0; t < width; t++) {
                const float p = sc[t], *v = vg + t * j->kv_dim;
                for (int64_t d = 0; d < hd; d++) o[d] += p * v[d];
            }
        }
    }
}

static void attention(sqz_session *s, int32_t layer, const float *q, int64_t ldq, int64_t n, int64_t pos, bool causal,
                      float *out, int64_t ldo);

void sqz__attention(sqz_session *s, int32_t layer, const float *q, int64_t ldq, int64_t n, int64_t pos, bool causal,
                    float *out, int64_t ldo) {
    const double t0 = sqz__prof_begin();
    attention(s, layer, q, ldq, n, pos, causal, out, ldo);
    sqz__prof_end(SQZ__PROF_FWD_ATTN, t0);
}

static void attention(sqz_session *s, int32_t layer, const float *q, int64_t ldq, int64_t n, int64_t pos, bool causal,
                      float *out, int64_t ldo) {
    const sqz_layer_dims *ld = &s->m->layers[layer];
    const int64_t qb = s->max_tokens < SQZ__QBLOCK ? s->max_tokens : SQZ__QBLOCK;
    if (n < SQZ__QMM_TILE_M && sqz__pool_threads(s->pool) <= s->max_group * qb) { /* a scores row per thread */
        const int64_t grp = ld->n_heads / ld->n_kv_heads;
        heads_job j = {s, q, s->kcache + s->kv_off[layer], s->vcache + s->kv_off[layer], out, ldq, ldo, n, pos, grp,
                       ld->n_kv_heads * s->hd, causal, 1.0f / sqrtf((float)s->hd)};
        sqz__pool_for(s->pool, ld->n_heads, 1, heads_few, &j);
        return;
    }
    int64_t hd = s->hd, nkv = ld->n_kv_heads, group = ld->n_heads / nkv;
    int64_t kv_dim = nkv * hd;
    const float *kc = s->kcache + s->kv_off[layer], *vc = s->vcache + s->kv_off[layer];
    float scale = 1.0f / sqrtf((float)hd);
    for (int64_t g = 0; g < nkv; g++) {
        const float *kg = kc + g * hd, *vg = vc + g * hd;
        for (int64_t i0 = 0; i0 < n; i0 += SQZ__QBLOCK) {
            int64_t mb = n - i0 < SQZ__QBLOCK ? n - i0 : SQZ__QBLOCK, rows = group * mb;
            int64_t width = causal ? pos + i0 + mb : pos + n;
            /* gather: row j * mb + i = query i0 + i of head g * group + j */
            for (int64_t j = 0; j < group; j++) {
                for (int64_t i = 0; i < mb; i++) {
                    memcpy(s->qg + (j * mb + i) * hd, q + (i0 + i) * ldq + (g * group + j) * hd,
                           (size_t)hd * sizeof(float));
                }
            }
            /* S (rows, width) = Qg . K_g[0..width)^T */
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)rows, (int)width, (int)hd, 1.0f, s->qg, (int)hd,
                        kg, (int)kv_dim, 0.0f, s->scores, (int)width);
            softmax_job sj = {s->scores, width, pos + i0, mb, causal, scale};
            sqz__pool_for(s->pool, rows, sqz__row_grain(width) / 4 + 1, softmax_rows, &sj); /* exp ~4x a FMA */
            /* Og (rows, hd) = P (rows, width) . V_g[0..width) (width, hd) */
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)rows, (int)hd, (int)width, 1.0f, s->scores,
                        (int)width, vg, (int)kv_dim, 0.0f, s->qg, (int)hd);
            for (int64_t j = 0; j < group; j++) {
                for (int64_t i = 0; i < mb; i++) {
                    memcpy(out + (i0 + i) * ldo + (g * group + j) * hd, s->qg + (j * mb + i) * hd,
                           (size_t)hd * sizeof(float));
                }
            }
        }
    }
}

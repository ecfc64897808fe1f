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

void sqz__attention(sqz_session *s, int32_t layer, const float *q, int64_t ldq, int64_t n, int64_t pos, bool causal,
                    float *out, int64_t ldo) {
    const sqz_layer_dims *ld = &s->m->layers[layer];
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

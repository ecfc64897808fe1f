/*
 * kernels/cpu/attn.c - scaled dot-product attention (Vaswani et al. 2017), grouped-query
 * (Ainslie et al. 2023): query head h reads key/value head h / (n_heads / n_kv_heads). The
 * runtime's attention over its key/value cache and the CPU backend's attention slot
 * (sqz/backend.h) are this one function.
 *
 * For each key/value head and each block of SQZ__ATTN_QBLOCK queries, the queries of all the
 * heads sharing that key/value head are gathered into one (group * rows, head_dim) matrix,
 * then: S = Q K^T (one sgemm over the keys the block can see), row-wise masked softmax on
 * the pool, O = P V (one sgemm), scattered back to each head's columns. Grouping makes the
 * products `group` times taller (fewer, more efficient BLAS calls); causal blocking skips
 * the keys after a block's last query, so the wasted (masked) work is at most one block's
 * triangle.
 *
 * Few queries (generation) may be split over the pool by query head instead: each thread
 * scores its heads' keys with the CPU kernels' f32 dot product, takes the softmax in its own
 * row of the scores scratch and sums the values, so a single token's attention uses every
 * thread (the BLAS products of one token are too small to split).
 */
#include <cblas.h>
#include <math.h>
#include <string.h>

#include "kernels/cpu/backend_impl.h"
#include "kernels/cpu/attn.h"
#include "kernels/cpu/fwd_ops.h"

typedef struct {
    float *scores;
    const int64_t *vis; /* optional per-query visible keys (sqz__attn_scratch) */
    int64_t width;    /* columns of S for this block (keys visible to its last query) */
    int64_t first;    /* absolute position of the block's first query */
    int64_t mb;       /* queries per head in the block; row r is query r % mb */
    bool causal;
    float scale;
    int64_t window;   /* sliding window (0: none) */
} softmax_job;

/* The softmax of one query's scores row[0..len) over the keys [start, len) it sees, the rest zero. */
static void softmax_window(float *row, int64_t len, int64_t width, float scale, int64_t window) {
    const int64_t start = window > 0 && len > window ? len - window : 0;
    sqz__softmax_row(row + start, len - start, width - start, scale);
    if (start > 0) memset(row, 0, (size_t)start * sizeof(float));
}

/* Hides the keys query q may not see (vis: [lo, hi) and [own, ...)) before its softmax. */
static void mask_hide(float *row, const int64_t *vis) {
    for (int64_t t = 0; t < vis[0]; t++) row[t] = -INFINITY;
    for (int64_t t = vis[1]; t < vis[2]; t++) row[t] = -INFINITY;
}

/* ... and zeroes them after it (the clamped exponential leaves ~1e-38 there). */
static void mask_zero(float *row, const int64_t *vis) {
    if (vis[0] > 0) memset(row, 0, (size_t)vis[0] * sizeof(float));
    if (vis[2] > vis[1]) memset(row + vis[1], 0, (size_t)(vis[2] - vis[1]) * sizeof(float));
}

static void softmax_rows(void *c, int64_t b, int64_t e, int t) {
    (void)t;
    const softmax_job *j = c;
    for (int64_t r = b; r < e; r++) {
        int64_t len = j->causal ? j->first + r % j->mb + 1 : j->width;
        float *row = j->scores + r * j->width;
        const int64_t *vis = j->vis ? j->vis + 3 * (j->first + r % j->mb) : NULL;
        if (vis) mask_hide(row, vis);
        softmax_window(row, len, j->width, j->scale, j->window);
        if (vis) mask_zero(row, vis);
    }
}

typedef struct {
    const sqz_attention_args *a;
    const sqz__attn_scratch *w;
    int64_t group;
    float scale;
} heads_job;

/* Query heads [b, e) for the few queries of the job; thread t uses scores row t. */
static void heads_few(void *c, int64_t b, int64_t e, int thread) {
    const heads_job *j = c;
    const sqz_attention_args *a = j->a;
    const int64_t hd = a->head_dim;
    float *sc = j->w->scores + (int64_t)thread * j->w->few_ld;
    for (int64_t h = b; h < e; h++) {
        const float *kg = a->k + (h / j->group) * hd, *vg = a->v + (h / j->group) * hd;
        for (int64_t i = 0; i < a->n; i++) {
            const int64_t width = a->causal ? a->pos + i + 1 : a->pos + a->n;
            const float *qh = a->q + i * a->ldq + h * hd;
            for (int64_t t = 0; t < width; t++) sc[t] = j->w->dot(qh, kg + t * a->ldkv, hd);
            const int64_t *vis = j->w->vis ? j->w->vis + 3 * (a->pos + i) : NULL;
            if (vis) mask_hide(sc, vis);
            softmax_window(sc, width, width, j->scale, a->window);
            if (vis) mask_zero(sc, vis);
            float *o = a->out + i * a->ldo + h * hd;
            memset(o, 0, (size_t)hd * sizeof(float));
            for (int64_t t = 0; t < width; t++) {
                const float p = sc[t], *v = vg + t * a->ldkv;
                for (int64_t d = 0; d < hd; d++) o[d] += p * v[d];
            }
        }
    }
}

/* One key/value head g: its query blocks through the gathered sgemm / softmax / sgemm. */
static void kv_head(sqz__pool *p, const sqz_attention_args *a, const sqz__attn_scratch *w, int64_t g,
                    int64_t group, float scale) {
    const int64_t hd = a->head_dim, n = a->n, pos = a->pos;
    const float *kg = a->k + g * hd, *vg = a->v + g * hd;
    for (int64_t i0 = 0; i0 < n; i0 += SQZ__ATTN_QBLOCK) {
        int64_t mb = n - i0 < SQZ__ATTN_QBLOCK ? n - i0 : SQZ__ATTN_QBLOCK, rows = group * mb;
        int64_t width = a->causal ? pos + i0 + mb : pos + n;
        /* gather: row j * mb + i = query i0 + i of head g * group + j */
        for (int64_t j = 0; j < group; j++)
            for (int64_t i = 0; i < mb; i++)
                memcpy(w->qg + (j * mb + i) * hd, a->q + (i0 + i) * a->ldq + (g * group + j) * hd,
                       (size_t)hd * sizeof(float));
        /* S (rows, width) = Qg . K_g[0..width)^T */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)rows, (int)width, (int)hd, 1.0f, w->qg, (int)hd,
                    kg, (int)a->ldkv, 0.0f, w->scores, (int)width);
        softmax_job sj = {w->scores, w->vis, width, pos + i0, mb, a->causal, scale, a->window};
        sqz__pool_for(p, rows, sqz__row_grain(width) / 4 + 1, softmax_rows, &sj); /* exp ~4x a FMA */
        /* Og (rows, hd) = P (rows, width) . V_g[0..width) (width, hd) */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)rows, (int)hd, (int)width, 1.0f, w->scores,
                    (int)width, vg, (int)a->ldkv, 0.0f, w->qg, (int)hd);
        for (int64_t j = 0; j < group; j++)
            for (int64_t i = 0; i < mb; i++)
                memcpy(a->out + (i0 + i) * a->ldo + (g * group + j) * hd, w->qg + (j * mb + i) * hd,
                       (size_t)hd * sizeof(float));
    }
}

void sqz__attention_cpu(sqz__pool *p, const sqz_attention_args *a, const sqz__attn_scratch *w, bool few) {
    const int64_t group = a->n_heads / a->n_kv_heads;
    const float scale = a->scale > 0 ? a->scale : 1.0f / sqrtf((float)a->head_dim);
    if (few) {
        heads_job j = {a, w, group, scale};
        sqz__pool_for(p, a->n_heads, 1, heads_few, &j);
        return;
    }
    for (int64_t g = 0; g < a->n_kv_heads; g++) kv_head(p, a, w, g, group, scale);
}

size_t sqz__attention_scratch_floats(const sqz_attention_args *a, int threads, bool few, int64_t *few_ld) {
    const int64_t width = a->pos + a->n, group = a->n_heads / a->n_kv_heads;
    const int64_t qb = a->n < SQZ__ATTN_QBLOCK ? a->n : SQZ__ATTN_QBLOCK;
    *few_ld = width;
    const int64_t scores = few ? (int64_t)threads * width : group * qb * width;
    return (size_t)(scores + group * qb * a->head_dim);
}

/*
 * kernels/cpu/fwd_ops.c - norms, activations and rotary embeddings.
 *
 * Accumulations (norm statistics, softmax sums) are done in double: they cost nothing
 * next to the matrix products and keep results independent of the row length.
 */
#include "kernels/cpu/fwd_ops.h"

#include "core/prof.h"

#include <math.h>

/* Rows per chunk so that a chunk holds at least SQZ__MIN_CHUNK elements of work: waking a
 * thread costs microseconds, worth it only for work at least that long. */
int64_t sqz__row_grain(int64_t d) {
    int64_t g = d > 0 ? (SQZ__MIN_CHUNK + d - 1) / d : 1;
    return g < 1 ? 1 : g;
}
#define row_grain sqz__row_grain

/* ---- RMSNorm ---- */
typedef struct {
    const float *x, *w, *b;
    float *y;
    float eps;
    int64_t d;
} norm_job;

static void rmsnorm_rows(void *c, int64_t b, int64_t e, int t) {
    (void)t;
    const norm_job *j = c;
    for (int64_t r = b; r < e; r++) {
        const float *x = j->x + r * j->d;
        float *y = j->y + r * j->d;
        double ss = 0;
        for (int64_t i = 0; i < j->d; i++) ss += (double)x[i] * x[i];
        float inv = (float)(1.0 / sqrt(ss / (double)j->d + (double)j->eps));
        for (int64_t i = 0; i < j->d; i++) y[i] = j->w[i] * (x[i] * inv);
    }
}

void sqz__rmsnorm(sqz__pool *p, const float *x, const float *w, float eps, int64_t n, int64_t d, float *y) {
    const double t0 = sqz__prof_begin();
    norm_job j = {x, w, NULL, y, eps, d};
    sqz__pool_for(p, n, row_grain(d), rmsnorm_rows, &j);
    sqz__prof_end(SQZ__PROF_FWD_ELEMWISE, t0);
}

/* ---- LayerNorm ---- */
static void layernorm_rows(void *c, int64_t b, int64_t e, int t) {
    (void)t;
    const norm_job *j = c;
    for (int64_t r = b; r < e; r++) {
        const float *x = j->x + r * j->d;
        float *y = j->y + r * j->d;
        double s = 0;
        for (int64_t i = 0; i < j->d; i++) s += x[i];
        double mean = s / (double)j->d, v = 0;
        for (int64_t i = 0; i < j->d; i++) v += ((double)x[i] - mean) * ((double)x[i] - mean);
        float inv = (float)(1.0 / sqrt(v / (double)j->d + (double)j->eps));
        float fm = (float)mean;
        for (int64_t i = 0; i < j->d; i++) {
            float o = (x[i] - fm) * inv * j->w[i];
            y[i] = j->b ? o + j->b[i] : o;
        }
    }
}

void sqz__layernorm(sqz__pool *p, const float *x, const float *w, const float *b, float eps, int64_t n, int64_t d,
                    float *y) {
    const double t0 = sqz__prof_begin();
    norm_job j = {x, w, b, y, eps, d};
    sqz__pool_for(p, n, row_grain(d), layernorm_rows, &j);
    sqz__prof_end(SQZ__PROF_FWD_ELEMWISE, t0);
}

/* ---- element-wise ---- */
typedef struct {
    float *x;
    const float *y;
    int64_t d;
} ew_job;

static void add_rows(void *c, int64_t b, int64_t e, int t) {
    (void)t;
    const ew_job *j = c;
    float *x = j->x + b * j->d;
    const float *y = j->y + b * j->d;
    int64_t n = (e - b) * j->d;
    for (int64_t i = 0; i < n; i++) x[i] += y[i];
}

void sqz__add(sqz__pool *p, float *x, const float *y, int64_t n, int64_t d) {
    const double t0 = sqz__prof_begin();
    ew_job j = {x, y, d};
    sqz__pool_for(p, n, row_grain(d) * 8, add_rows, &j);
    sqz__prof_end(SQZ__PROF_FWD_ELEMWISE, t0);
}

static void silu_mul_rows(void *c, int64_t b, int64_t e, int t) {
    (void)t;
    const ew_job *j = c;
    sqz__silu_mul_span(j->x + b * j->d, j->y + b * j->d, (e - b) * j->d);
}

void sqz__silu_mul(sqz__pool *p, float *g, const float *u, int64_t n, int64_t d) {
    const double t0 = sqz__prof_begin();
    ew_job j = {g, u, d};
    sqz__pool_for(p, n, row_grain(d) / 4 + 1, silu_mul_rows, &j);
    sqz__prof_end(SQZ__PROF_FWD_ELEMWISE, t0);
}

static void gelu_tanh_mul_rows(void *c, int64_t b, int64_t e, int t) {
    (void)t;
    const ew_job *j = c;
    sqz__gelu_tanh_mul_span(j->x + b * j->d, j->y + b * j->d, (e - b) * j->d);
}

void sqz__gelu_tanh_mul(sqz__pool *p, float *g, const float *u, int64_t n, int64_t d) {
    const double t0 = sqz__prof_begin();
    ew_job j = {g, u, d};
    sqz__pool_for(p, n, row_grain(d) / 4 + 1, gelu_tanh_mul_rows, &j);
    sqz__prof_end(SQZ__PROF_FWD_ELEMWISE, t0);
}

static void gelu_rows(void *c, int64_t b, int64_t e, int t) {
    (void)t;
    const ew_job *j = c;
    sqz__gelu_span(j->x + b * j->d, (e - b) * j->d);
}

void sqz__gelu(sqz__pool *p, float *x, int64_t n, int64_t d) {
    const double t0 = sqz__prof_begin();
    ew_job j = {x, NULL, d};
    sqz__pool_for(p, n, row_grain(d) / 4 + 1, gelu_rows, &j);
    sqz__prof_end(SQZ__PROF_FWD_ELEMWISE, t0);
}

/* ---- rotary embeddings (Su et al. 2021) ---- */
void sqz__rope_tables(const sqz__rope_spec *spec, int64_t n_pos, float *cos_t, float *sin_t) {
    const int64_t half = spec->dim / 2;
    const float ps = spec->pos_scale > 0 ? spec->pos_scale : 1.0f, ms = spec->mscale > 0 ? spec->mscale : 1.0f;
    for (int64_t i = 0; i < half; i++) {
        /* HF: inv_freq = 1 / theta ** (arange(0, dim, 2).float() / dim), all in float32; llama 3's
         * and longrope's factors divide it, linear scaling divides it by the factor. */
        float inv = 1.0f / powf(spec->theta, (float)(2 * i) / (float)spec->dim);
        if (spec->divisors) inv = inv / spec->divisors[i];
        if (ps != 1.0f) inv = inv * ps;
        for (int64_t p = 0; p < n_pos; p++) {
            float a = (float)p * inv;
            cos_t[p * half + i] = cosf(a) * ms;
            sin_t[p * half + i] = sinf(a) * ms;
        }
    }
}

typedef struct {
    float *x;
    int64_t ld, n_heads, hd, rd, pos;
    sqz_rope_layout layout;
    const float *cos_t, *sin_t;
} rope_job;

static void rope_rows(void *c, int64_t b, int64_t e, int t) {
    (void)t;
    const rope_job *j = c;
    int64_t half = j->rd / 2;
    for (int64_t r = b; r < e; r++) {
        const float *cs = j->cos_t + (j->pos + r) * half, *sn = j->sin_t + (j->pos + r) * half;
        for (int64_t h = 0; h < j->n_heads; h++) {
            float *v = j->x + r * j->ld + h * j->hd;
            if (j->layout == SQZ_ROPE_INTERLEAVED) {
                for (int64_t i = 0; i < half; i++) {
                    float a = v[2 * i], bb = v[2 * i + 1];
                    v[2 * i] = a * cs[i] - bb * sn[i];
                    v[2 * i + 1] = a * sn[i] + bb * cs[i];
                }
            } else {
                for (int64_t i = 0; i < half; i++) {
                    float a = v[i], bb = v[i + half];
                    v[i] = a * cs[i] - bb * sn[i];
                    v[i + half] = bb * cs[i] + a * sn[i];
                }
            }
        }
    }
}

void sqz__rope(sqz__pool *p, float *x, int64_t ld, int64_t n, int64_t n_heads, int64_t head_dim, int64_t rope_dim,
               int64_t pos, sqz_rope_layout layout, const float *cos_t, const float *sin_t) {
    if (layout != SQZ_ROPE_INTERLEAVED && layout != SQZ_ROPE_HALF) return;
    const double t0 = sqz__prof_begin();
    rope_job j = {x, ld, n_heads, head_dim, rope_dim > 0 ? rope_dim : head_dim, pos, layout, cos_t, sin_t};
    sqz__pool_for(p, n, row_grain(n_heads * head_dim), rope_rows, &j);
    sqz__prof_end(SQZ__PROF_FWD_ELEMWISE, t0);
}


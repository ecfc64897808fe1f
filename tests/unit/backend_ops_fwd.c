/* tests/unit/backend_ops_fwd.c - test_backend_ops's rows for the block forward's slots: rmsnorm,
 * layernorm, rope, attention, silu_mul, add, gelu. References in double from sqz/backend.h's
 * definitions (libm's exp and erf); bounds allow any f32 summation order, as a device sums in its
 * own (sqz/backend.h), and the CPU's documented approximations (its vectorized exp, A&S's erf). */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/backend_impl.h"
#include "backend_ops.h"

#define EPS ((double)FLT_EPSILON)

void bo_run_rmsnorm(const bo_row *r, const sqz_backend *b, bo_res *res) {
    (void)r;
    enum { N = 5, D = 100 };
    const float eps = 1e-5f;
    float *x = bo_rand(N * D, 3.0f), *w = bo_rand(D, 1.5f), *y = bo_malloc(N * D * 4);
    for (int64_t j = 0; j < D; j++) x[4 * D + j] *= 1e-3f; /* a small row: eps matters */
    for (int inplace = 0; inplace < 2 && !res->fail; inplace++) {
        bo_dev d;
        bo_dev_begin(&d, b, res);
        float *dx = bo_put(&d, x, N * D * 4), *dy = inplace ? dx : bo_put(&d, NULL, N * D * 4);
        const float *dw = bo_put(&d, w, D * 4);
        const sqz_rmsnorm_args a = {.x = dx, .w = dw, .y = dy, .eps = eps, .n = N, .d = D};
        if (bo_dev_ok(&d)) bo_call(&d, "rmsnorm", b->ops->rmsnorm(b->ctx, &a));
        bo_get(&d, y, dy, N * D * 4);
        for (int64_t i = 0; bo_dev_ok(&d) && i < N; i++) {
            double ss = 0;
            for (int64_t j = 0; j < D; j++) ss += (double)x[i * D + j] * x[i * D + j];
            const double s = 1.0 / sqrt(ss / D + eps);
            for (int64_t j = 0; j < D; j++) {
                const double ref = x[i * D + j] * s * w[j];
                bo_check(res, inplace ? "y(in place)" : "y", i * D + j, y[i * D + j], ref,
                         (D / 2.0 + 4) * EPS * fabs(ref) + 1e-30);
            }
        }
        bo_dev_end(&d);
    }
    free(x), free(w), free(y);
}

void bo_run_layernorm(const bo_row *r, const sqz_backend *b, bo_res *res) {
    (void)r;
    enum { N = 5, D = 100 };
    const float eps = 1e-5f;
    float *x = bo_rand(N * D, 2.0f), *w = bo_rand(D, 1.5f), *bias = bo_rand(D, 0.5f), *y = bo_malloc(N * D * 4);
    for (int64_t j = 0; j < D; j++) x[1 * D + j] += 40.0f; /* an offset row: the mean matters */
    for (int with_b = 1; with_b >= 0 && !res->fail; with_b--) {
        bo_dev d;
        bo_dev_begin(&d, b, res);
        const float *dx = bo_put(&d, x, N * D * 4), *dw = bo_put(&d, w, D * 4);
        const float *db = with_b ? bo_put(&d, bias, D * 4) : NULL;
        float *dy = bo_put(&d, NULL, N * D * 4);
        const sqz_layernorm_args a = {.x = dx, .w = dw, .b = db, .y = dy, .eps = eps, .n = N, .d = D};
        if (bo_dev_ok(&d)) bo_call(&d, "layernorm", b->ops->layernorm(b->ctx, &a));
        bo_get(&d, y, dy, N * D * 4);
        for (int64_t i = 0; bo_dev_ok(&d) && i < N; i++) {
            double mean = 0, var = 0, mabs = 0;
            for (int64_t j = 0; j < D; j++) mean += x[i * D + j], mabs += fabs(x[i * D + j]);
            mean /= D, mabs /= D;
            for (int64_t j = 0; j < D; j++) var += (x[i * D + j] - mean) * (x[i * D + j] - mean);
            var /= D;
            const double rstd = 1.0 / sqrt(var + eps);
            for (int64_t j = 0; j < D; j++) {
                const double bj = with_b ? bias[j] : 0, core = (x[i * D + j] - mean) * rstd * w[j];
                const double bound = (D + 8) * EPS * (fabs(core) + fabs(w[j]) * rstd * (mabs + sqrt(var))) +
                                     EPS * fabs(bj) + 1e-30;
                bo_check(res, with_b ? "y" : "y(no b)", i * D + j, y[i * D + j], core + bj, bound);
            }
        }
        bo_dev_end(&d);
    }
    free(x), free(w), free(bias), free(y);
}

void bo_run_rope(const bo_row *r, const sqz_backend *b, bo_res *res) {
    (void)r;
    enum { N = 3, POS = 2, H = 3, HD = 16, LD = H * HD + 4, HALF = HD / 2, NPOS = POS + N };
    float *x = bo_rand(N * LD, 2.0f), *got = bo_malloc(N * LD * 4);
    float *cs = bo_malloc(NPOS * HALF * 4), *sn = bo_malloc(NPOS * HALF * 4);
    for (int64_t p = 0; p < NPOS; p++) {
        for (int64_t i = 0; i < HALF; i++) {
            const double ang = p * pow(10000.0, -2.0 * i / HD);
            cs[p * HALF + i] = (float)cos(ang), sn[p * HALF + i] = (float)sin(ang);
        }
    }
    for (int half = 0; half < 2 && !res->fail; half++) {
        bo_dev d;
        bo_dev_begin(&d, b, res);
        float *dx = bo_put(&d, x, N * LD * 4);
        const float *dc = bo_put(&d, cs, NPOS * HALF * 4), *ds = bo_put(&d, sn, NPOS * HALF * 4);
        const sqz_rope_args a = {.x = dx, .ld = LD, .n = N, .n_heads = H, .head_dim = HD, .pos = POS,
                                 .half = half, .cos_t = dc, .sin_t = ds};
        if (bo_dev_ok(&d)) bo_call(&d, "rope", b->ops->rope(b->ctx, &a));
        bo_get(&d, got, dx, N * LD * 4);
        for (int64_t row = 0; bo_dev_ok(&d) && row < N; row++) {
            const float *c = cs + (POS + row) * HALF, *s = sn + (POS + row) * HALF;
            for (int64_t e = H * HD; e < LD; e++) /* the padding stays */
                bo_check(res, "x padding", row * LD + e, got[row * LD + e], x[row * LD + e], 0);
            for (int64_t h = 0; h < H; h++) {
                const int64_t o = row * LD + h * HD;
                for (int64_t i = 0; i < HALF; i++) {
                    const int64_t i0 = o + (half ? i : 2 * i), i1 = o + (half ? i + HALF : 2 * i + 1);
                    const double x0 = x[i0], x1 = x[i1];
                    const double bound = 2 * EPS * (fabs(x0) + fabs(x1)) + 1e-30; /* |c|, |s| <= 1 */
                    bo_check(res, half ? "x(half)" : "x", i0, got[i0], x0 * c[i] - x1 * s[i], bound);
                    bo_check(res, half ? "x(half)" : "x", i1, got[i1], x0 * s[i] + x1 * c[i], bound);
                }
            }
        }
        bo_dev_end(&d);
    }
    free(x), free(got), free(cs), free(sn);
}

typedef struct attn_shape {
    int64_t n, pos;
    bool causal;
    float scale;    /* 0: 1 / sqrt(head_dim) */
    int64_t window; /* 0: all keys */
} attn_shape;

/* out (n, heads * hd) of one case against the double softmax. */
static void attn_check(bo_res *res, const attn_shape *s, const float *q, const float *k, const float *v,
                       const float *out, int64_t ldq, int64_t ldkv, int64_t ldo, int64_t heads, int64_t kvh,
                       int64_t hd) {
    const double scale = s->scale != 0 ? s->scale : 1.0 / sqrt((double)hd);
    double p[64];
    for (int64_t i = 0; i < s->n; i++) {
        const int64_t keys = s->causal ? s->pos + i + 1 : s->pos + s->n;
        const int64_t first = s->window > 0 && keys > s->window ? keys - s->window : 0;
        for (int64_t h = 0; h < heads; h++) {
            const int64_t g = h / (heads / kvh);
            double mx = -INFINITY, sum = 0, ds = 0;
            for (int64_t j = first; j < keys; j++) {
                double dot = 0, mag = 0;
                for (int64_t c = 0; c < hd; c++) {
                    dot += (double)q[i * ldq + h * hd + c] * k[j * ldkv + g * hd + c];
                    mag += fabs((double)q[i * ldq + h * hd + c] * k[j * ldkv + g * hd + c]);
                }
                p[j] = dot * scale;
                mx = fmax(mx, p[j]);
                ds = fmax(ds, (hd + 2) * EPS * scale * mag);
            }
            for (int64_t j = first; j < keys; j++) p[j] = exp(p[j] - mx), sum += p[j];
            for (int64_t c = 0; c < hd; c++) {
                double ref = 0, mag = 0;
                for (int64_t j = first; j < keys; j++) {
                    ref += p[j] / sum * v[j * ldkv + g * hd + c];
                    mag += p[j] / sum * fabs(v[j * ldkv + g * hd + c]);
                }
                const double bound = mag * (2 * ds + 1e-6 + 2 * (keys - first) * EPS) + 1e-30;
                const int64_t e = i * ldo + h * hd + c;
                bo_check(res, s->window ? "out(window)" : s->causal ? "out(causal)" : "out", e, out[e], ref, bound);
            }
        }
    }
}

void bo_run_attention(const bo_row *r, const sqz_backend *b, bo_res *res) {
    enum { H = 4, KVH = 2, HD = 16, LDQ = H * HD + 3, LDKV = KVH * HD + 5, LDO = H * HD + 2, MAXKEYS = 11 };
    /* few queries (the CPU's dot path) and as many as its tile (the other), causal or not; r->arg 1:
     * the CPU's own options, a given scale and a sliding window */
    const attn_shape common[] = {{.n = 3, .pos = 4, .causal = true}, {.n = 3, .pos = 4},
                                 {.n = 9, .pos = 2, .causal = true}, {.n = 9, .pos = 2}};
    const attn_shape cpu_own[] = {{.n = 3, .pos = 4, .causal = true, .scale = 0.3f, .window = 3},
                                  {.n = 9, .pos = 2, .causal = true, .scale = 0.3f, .window = 4},
                                  {.n = 9, .pos = 2, .causal = true, .window = 20}};
    const attn_shape *shapes = r->arg ? cpu_own : common;
    const size_t n_shapes = r->arg ? sizeof cpu_own / sizeof cpu_own[0] : sizeof common / sizeof common[0];
    float *q = bo_rand(9 * LDQ, 2.0f), *k = bo_rand(MAXKEYS * LDKV, 2.0f), *v = bo_rand(MAXKEYS * LDKV, 1.0f);
    float *out = bo_malloc(9 * LDO * 4);
    for (size_t si = 0; si < n_shapes && !res->fail; si++) {
        const attn_shape *s = &shapes[si];
        const int64_t keys = s->pos + s->n;
        bo_dev d;
        bo_dev_begin(&d, b, res);
        const float *dq = bo_put(&d, q, (size_t)(s->n * LDQ) * 4), *dk = bo_put(&d, k, (size_t)(keys * LDKV) * 4);
        const float *dv = bo_put(&d, v, (size_t)(keys * LDKV) * 4);
        float *dout = bo_put(&d, NULL, (size_t)(s->n * LDO) * 4);
        const sqz_attention_args a = {.q = dq, .ldq = LDQ, .k = dk, .v = dv, .ldkv = LDKV, .out = dout, .ldo = LDO,
                                      .n = s->n, .pos = s->pos, .n_heads = H, .n_kv_heads = KVH, .head_dim = HD,
                                      .causal = s->causal, .scale = s->scale, .window = s->window};
        if (bo_dev_ok(&d)) bo_call(&d, "attention", b->ops->attention(b->ctx, &a));
        bo_get(&d, out, dout, (size_t)(s->n * LDO) * 4);
        if (bo_dev_ok(&d)) attn_check(res, s, q, k, v, out, LDQ, LDKV, LDO, H, KVH, HD);
        bo_dev_end(&d);
    }
    free(q), free(k), free(v), free(out);
}

/* silu_mul, add, gelu (r->arg: the op) on n elements, in place on x. */
void bo_run_eltwise(const bo_row *r, const sqz_backend *b, bo_res *res) {
    enum { N = 1003 };
    const sqz_op op = (sqz_op)r->arg;
    float *x = bo_rand(N, op == SQZ_OP_GELU ? 6.0f : 12.0f), *y = bo_rand(N, 2.0f), *got = bo_malloc(N * 4);
    x[0] = 0.0f, x[1] = -0.0f;
    bo_dev d;
    bo_dev_begin(&d, b, res);
    float *dx = bo_put(&d, x, N * 4);
    const float *dy = op == SQZ_OP_GELU ? NULL : bo_put(&d, y, N * 4);
    const sqz_eltwise_args a = {.x = dx, .y = dy, .n = N};
    sqz_status (*slot)(void *, const sqz_eltwise_args *) =
        op == SQZ_OP_SILU_MUL ? b->ops->silu_mul : op == SQZ_OP_ADD ? b->ops->add : b->ops->gelu;
    const char *name = op == SQZ_OP_SILU_MUL ? "silu_mul" : op == SQZ_OP_ADD ? "add" : "gelu";
    if (bo_dev_ok(&d)) bo_call(&d, name, slot(b->ctx, &a));
    bo_get(&d, got, dx, N * 4);
    for (int64_t i = 0; bo_dev_ok(&d) && i < N; i++) {
        const double g = x[i];
        if (op == SQZ_OP_ADD) {
            const float sum = x[i] + y[i];
            bo_check(res, "x", i, got[i], sum, 0);
        } else if (op == SQZ_OP_SILU_MUL) {
            const double ref = g / (1 + exp(-g)) * y[i];
            bo_check(res, "x", i, got[i], ref, 1e-6 * fabs(ref) + 1e-30);
        } else {
            const double ref = 0.5 * g * (1 + erf(g / sqrt(2.0)));
            bo_check(res, "x", i, got[i], ref, 0.5 * fabs(g) * (1.5e-7 + 8 * EPS) + 4 * EPS * fabs(ref) + 1e-30);
        }
    }
    bo_dev_end(&d);
    free(x), free(y), free(got);
}

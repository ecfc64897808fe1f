/* tests/unit/backend_ops_gemm.c - test_backend_ops's rows for the products and conversions: matmul
 * on every stored dtype (f32 and q8 activations), W8A8 dense and 2:4, W4A16, sgemm, to_f32. Each
 * reference is computed here in double from the inputs: weights through core's scalar dequantizer
 * (the dtype table's to_f32), W8A8 by sqz/backend.h's exact definition in integers. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/backend_impl.h"
#include "backend_ops.h"
#include "sqz/sparse.h"

/* n rows of k weights of t: quantized from src by the dtype's reference quantizer when sqz writes t;
 * otherwise random codes behind a finite scale (Q8_K: an f32 d; the others an fp16 d in front). */
static uint8_t *make_weights(sqz_dtype t, const float *src, int64_t n, int64_t k, size_t *bytes) {
    const sqz_dtype_traits *tr = sqz_dtype_info(t);
    const int64_t blocks = n * k / tr->block_size;
    *bytes = (size_t)blocks * tr->type_size;
    uint8_t *w = bo_malloc(*bytes);
    if (tr->from_f32) {
        tr->from_f32(src, w, n * k);
        return w;
    }
    for (size_t i = 0; i < *bytes; i++) w[i] = (uint8_t)bo_rnd();
    for (int64_t bl = 0; bl < blocks; bl++) {
        const float d = 0.002f + 0.01f * fabsf(bo_rndf());
        if (t == SQZ_DTYPE_Q8_K) {
            memcpy(w + (size_t)bl * tr->type_size, &d, 4);
        } else {
            const uint16_t h = sqz_fp32_to_fp16(d);
            memcpy(w + (size_t)bl * tr->type_size, &h, 2);
        }
    }
    return w;
}

/* y (m, n) of x (m, k) . wf^T + bias against the double sums. q8: x as the kernel multiplies it
 * (q . d, d = amax / 127 of its block of 32 or 256, d maybe stored as fp16; or x rounded to f16/bf16)
 * is within dx = amax256 (1/254 + 2^-11) + 2^-8 |x| of x, weighted by |w|; the d q - m types also
 * take m times the block sums of x, stored as fp16 (Q8_1): + max|w| 2^-10 |x|. */
static void check_matmul(bo_res *res, bool q8, int64_t m, int64_t n, int64_t k, const float *x, const float *wf,
                         const float *bias, const float *y) {
    char what[32];
    snprintf(what, sizeof what, "y(m=%lld)", (long long)m);
    double *dx = bo_malloc((size_t)k * sizeof(double));
    for (int64_t i = 0; i < m; i++) {
        const float *xi = x + i * k;
        for (int64_t c = 0; c < k; c++) { /* q8: how far each x can move (half a step of its block's scale) */
            double amax = 0;
            for (int64_t c2 = c / 256 * 256; c2 < c / 256 * 256 + 256 && c2 < k; c2++) amax = fmax(amax, fabs(xi[c2]));
            dx[c] = q8 ? amax * (1.0 / 254 + ldexp(1, -11)) + ldexp(fabs(xi[c]), -8) : 0;
        }
        for (int64_t j = 0; j < n; j++) {
            const float *wj = wf + j * k;
            double ref = bias ? bias[j] : 0, mag = bias ? fabs(bias[j]) : 0, wmax = 0, q = 0;
            for (int64_t c = 0; c < k; c++) wmax = fmax(wmax, fabs(wj[c]));
            for (int64_t c = 0; c < k; c++) {
                ref += (double)wj[c] * xi[c];
                mag += fabs((double)wj[c] * xi[c]);
                q += fabs(wj[c]) * dx[c] + (q8 ? wmax * ldexp(fabs(xi[c]), -10) : 0);
            }
            bo_check(res, what, i * n + j, y[i * n + j], ref, 1e-5 * mag + q + 1e-30);
        }
    }
    free(dx);
}

void bo_run_matmul(const bo_row *r, const sqz_backend *b, bo_res *res) {
    enum { N = 37, K = 768, MMAX = 9 };
    const int64_t ms[] = {1, 3, MMAX};
    const sqz_dtype t = r->dtype;
    float *src = bo_rand(N * K, 1.0f), *x = bo_rand(MMAX * K, 2.0f), *bias = bo_rand(N, 1.0f);
    float *wf = bo_malloc(N * K * sizeof(float)), *y = bo_malloc(MMAX * N * sizeof(float));
    size_t wbytes;
    uint8_t *w = make_weights(t, src, N, K, &wbytes);
    sqz_dtype_info(t)->to_f32(w, wf, N * K);
    bo_dev d;
    bo_dev_begin(&d, b, res);
    const void *dw = bo_put(&d, w, wbytes), *dx = bo_put(&d, x, MMAX * K * sizeof(float));
    const void *db = bo_put(&d, bias, N * sizeof(float));
    for (size_t mi = 0; mi < sizeof ms / sizeof ms[0] && bo_dev_ok(&d); mi++) {
        const int64_t m = ms[mi];
        float *dy = bo_put(&d, NULL, (size_t)(m * N) * sizeof(float));
        if (!bo_dev_ok(&d)) break;
        const sqz_matmul_args a = {.m = m, .n = N, .k = K, .x = dx, .w = dw, .w_dtype = t,
                                   .bias = m == 3 ? db : NULL, .y = dy, .acts = (sqz_activations)r->arg};
        bo_call(&d, "matmul", b->ops->matmul(b->ctx, &a));
        bo_get(&d, y, dy, (size_t)(m * N) * sizeof(float));
        if (bo_dev_ok(&d))
            check_matmul(res, r->arg == SQZ_ACTIVATIONS_Q8, m, N, K, x, wf, m == 3 ? bias : NULL, y);
        bo_dev_free(&d, dy);
    }
    bo_dev_end(&d);
    free(src), free(x), free(bias), free(wf), free(y), free(w);
}

/* ---- W8A8: the exact definition (sqz/backend.h) ---- */

/* x_scale = absmax / 127, x = clamp(rint(x / x_scale)), 0 for a zero row (no NaN rows here). */
static void quantize_rows(const float *x, int64_t m, int64_t k, int8_t *q, float *s) {
    for (int64_t i = 0; i < m; i++) {
        float amax = 0;
        for (int64_t c = 0; c < k; c++) amax = fmaxf(amax, fabsf(x[i * k + c]));
        s[i] = amax / 127.0f;
        for (int64_t c = 0; c < k; c++) {
            const float v = s[i] > 0 ? rintf(x[i * k + c] / s[i]) : 0.0f;
            q[i * k + c] = (int8_t)fmaxf(-127.0f, fminf(127.0f, v));
        }
    }
}

/* y's reference in f32 (or f16) bits from the int32 sums. */
static void i8_reference(int64_t m, int64_t n, int64_t k, const int8_t *x, const float *xs, const int8_t *w,
                         const float *ws, float *ref) {
    for (int64_t i = 0; i < m; i++) {
        for (int64_t j = 0; j < n; j++) {
            int64_t acc = 0;
            for (int64_t c = 0; c < k; c++) acc += (int64_t)x[i * k + c] * w[j * k + c];
            const float t = (float)acc * xs[i];
            ref[i * n + j] = t * ws[j];
        }
    }
}

typedef struct i8_case {
    int64_t m, n, k;
    const float *xf;
    int8_t *xq;
    float *xs;
    const int8_t *w;         /* dense (n, k) */
    const int8_t *values;    /* 2:4: (n, k/2) and meta (n, k/32); NULL: dense */
    const uint32_t *meta;
    const float *ws;
} i8_case;

/* One run: x given (fused false) or x_f32 (the backend quantizes), y f32 or f16. */
static void i8_run(const i8_case *c, const sqz_backend *b, bo_res *res, bool fused, sqz_dtype yt, const float *ref) {
    const int64_t m = c->m, n = c->n, k = c->k;
    const size_t ysz = yt == SQZ_DTYPE_F16 ? 2 : 4;
    bo_dev d;
    bo_dev_begin(&d, b, res);
    const float *dxf = fused ? bo_put(&d, c->xf, (size_t)(m * k) * 4) : NULL;
    int8_t *dxq = bo_put(&d, fused ? NULL : c->xq, (size_t)(m * k));
    float *dxs = bo_put(&d, fused ? NULL : c->xs, (size_t)m * 4);
    const float *dws = bo_put(&d, c->ws, (size_t)n * 4);
    void *dy = bo_put(&d, NULL, (size_t)(m * n) * ysz);
    const int8_t *dw = c->values ? bo_put(&d, c->values, (size_t)(n * k / 2)) : bo_put(&d, c->w, (size_t)(n * k));
    const uint32_t *dmeta = c->values ? bo_put(&d, c->meta, (size_t)(n * k / 32) * 4) : NULL;
    if (bo_dev_ok(&d) && c->values) {
        const sqz_gemm_i8_sp24_args a = {.m = m, .n = n, .k = k, .x_f32 = dxf, .x = dxq, .x_scale = dxs,
                                         .values = dw, .meta = dmeta, .w_scale = dws, .y = dy, .y_dtype = yt};
        bo_call(&d, "gemm_i8_sp24", b->ops->gemm_i8_sp24(b->ctx, &a));
    } else if (bo_dev_ok(&d)) {
        const sqz_gemm_i8_args a = {.m = m, .n = n, .k = k, .x_f32 = dxf, .x = dxq, .x_scale = dxs,
                                    .w = dw, .w_scale = dws, .y = dy, .y_dtype = yt};
        bo_call(&d, "gemm_i8", b->ops->gemm_i8(b->ctx, &a));
    }
    uint8_t *y = bo_malloc((size_t)(m * n) * ysz);
    int8_t *xq = bo_malloc((size_t)(m * k));
    float *xs = bo_malloc((size_t)m * 4);
    bo_get(&d, y, dy, (size_t)(m * n) * ysz);
    if (fused) bo_get(&d, xq, dxq, (size_t)(m * k)), bo_get(&d, xs, dxs, (size_t)m * 4);
    const bool f16 = yt == SQZ_DTYPE_F16;
    const char *what = fused ? (f16 ? "y(x_f32, f16)" : "y(x_f32)") : (f16 ? "y(f16)" : "y");
    for (int64_t i = 0; bo_dev_ok(&d) && i < m * n; i++) {
        if (yt == SQZ_DTYPE_F16) {
            uint16_t h;
            memcpy(&h, y + 2 * i, 2);
            bo_check(res, what, i, sqz_fp16_to_fp32(h), sqz_fp16_to_fp32(sqz_fp32_to_fp16(ref[i])), 0);
        } else {
            float f;
            memcpy(&f, y + 4 * i, 4);
            bo_check(res, what, i, f, ref[i], 0);
        }
    }
    for (int64_t i = 0; fused && bo_dev_ok(&d) && i < m; i++) bo_check(res, "x_scale", i, xs[i], c->xs[i], 0);
    for (int64_t i = 0; fused && bo_dev_ok(&d) && i < m * k; i++) bo_check(res, "x", i, xq[i], c->xq[i], 0);
    bo_dev_end(&d);
    free(y), free(xq), free(xs);
}

static void run_i8(const sqz_backend *b, bo_res *res, bool sp24) {
    enum { M = 5, N = 37 };
    const int64_t k = sp24 ? 96 : 100;
    float *xf = bo_rand(M * k, 3.0f), *ws = bo_malloc(N * sizeof(float)), *ref = bo_malloc(M * N * sizeof(float));
    memset(xf + 2 * k, 0, (size_t)k * sizeof(float)); /* a zero row: scale 0, x 0 */
    int8_t *xq = bo_malloc((size_t)(M * k)), *w = bo_malloc((size_t)(N * k)), *values = NULL;
    float *xs = bo_malloc(M * sizeof(float));
    uint32_t *meta = NULL;
    for (int64_t i = 0; i < N * k; i++) w[i] = (int8_t)((int)(bo_rnd() % 255) - 127);
    for (int64_t j = 0; j < N; j++) ws[j] = 0.001f + 0.02f * fabsf(bo_rndf());
    if (sp24) { /* two zeros in every group of four, at random places */
        for (int64_t g = 0; g < N * k / 4; g++) {
            const uint32_t keep0 = bo_rnd() % 4, keep1 = (keep0 + 1 + bo_rnd() % 3) % 4;
            for (uint32_t e = 0; e < 4; e++)
                if (e != keep0 && e != keep1) w[4 * g + e] = 0;
        }
        values = bo_malloc((size_t)(N * k / 2));
        meta = bo_malloc((size_t)(N * k / 32) * 4);
        if (sqz_sp24_pack_i8(w, N, k, values, meta) != SQZ_OK) bo_fail(res, "sp24 pack: %s", sqz_last_error());
    }
    quantize_rows(xf, M, k, xq, xs);
    i8_reference(M, N, k, xq, xs, w, ws, ref);
    const i8_case c = {.m = M, .n = N, .k = k, .xf = xf, .xq = xq, .xs = xs, .w = w, .values = values, .meta = meta,
                       .ws = ws};
    for (int fused = 0; fused < 2 && !res->fail; fused++) {
        i8_run(&c, b, res, fused, SQZ_DTYPE_F32, ref);
        i8_run(&c, b, res, fused, SQZ_DTYPE_F16, ref);
    }
    free(xf), free(ws), free(ref), free(xq), free(w), free(values), free(xs), free(meta);
}

void bo_run_gemm_i8(const bo_row *r, const sqz_backend *b, bo_res *res) { (void)r; run_i8(b, res, false); }
void bo_run_gemm_i8_sp24(const bo_row *r, const sqz_backend *b, bo_res *res) { (void)r; run_i8(b, res, true); }

/* ---- W4A16 ---- */

void bo_run_gemm_w4(const bo_row *r, const sqz_backend *b, bo_res *res) {
    enum { N = 37, K = 320, MMAX = 5 };
    float *src = bo_rand(N * K, 1.0f), *wf = bo_malloc(N * K * sizeof(float)), *xf = bo_rand(MMAX * K, 2.0f);
    uint16_t *xh = bo_malloc(MMAX * K * 2);
    for (int64_t i = 0; i < MMAX * K; i++) xh[i] = sqz_fp32_to_fp16(xf[i]), xf[i] = sqz_fp16_to_fp32(xh[i]);
    size_t wbytes;
    uint8_t *w = make_weights(r->dtype, src, N, K, &wbytes), *y = bo_malloc(MMAX * N * 4);
    sqz_dtype_info(r->dtype)->to_f32(w, wf, N * K);
    void *prepared = NULL;
    bo_dev d;
    bo_dev_begin(&d, b, res);
    bo_call(&d, "prepare_w4", b->ops->prepare_w4(b->ctx, w, r->dtype, N, K, &prepared));
    const uint16_t *dx = bo_put(&d, xh, MMAX * K * 2);
    for (int64_t m = 1; m <= MMAX && bo_dev_ok(&d); m += MMAX - 1) {
        for (int f16 = 0; f16 < 2 && bo_dev_ok(&d); f16++) {
            const size_t ysz = f16 ? 2 : 4;
            void *dy = bo_put(&d, NULL, (size_t)(m * N) * ysz);
            const sqz_gemm_w4_args a = {.m = m, .n = N, .k = K, .x = dx, .w = prepared, .y = dy,
                                        .y_dtype = f16 ? SQZ_DTYPE_F16 : SQZ_DTYPE_F32};
            if (bo_dev_ok(&d)) bo_call(&d, "gemm_w4", b->ops->gemm_w4(b->ctx, &a));
            bo_get(&d, y, dy, (size_t)(m * N) * ysz);
            for (int64_t i = 0; bo_dev_ok(&d) && i < m; i++) {
                for (int64_t j = 0; j < N; j++) {
                    double ref = 0, mag = 0;
                    for (int64_t c = 0; c < K; c++) {
                        ref += (double)wf[j * K + c] * xf[i * K + c];
                        mag += fabs((double)wf[j * K + c] * xf[i * K + c]);
                    }
                    uint16_t h;
                    float got;
                    if (f16) memcpy(&h, y + 2 * (i * N + j), 2), got = sqz_fp16_to_fp32(h);
                    else memcpy(&got, y + 4 * (i * N + j), 4);
                    const double bound = (ldexp(1, -11) + 1e-5) * mag + (f16 ? ldexp(1, -11) * fabs(ref) : 0) + 1e-30;
                    bo_check(res, f16 ? "y(f16)" : "y", i * N + j, got, ref, bound);
                }
            }
            bo_dev_free(&d, dy);
        }
    }
    if (prepared) b->ops->free(b->ctx, prepared);
    bo_dev_end(&d);
    free(src), free(wf), free(xf), free(xh), free(w), free(y);
}

/* ---- sgemm: the four transposes, padded leading dimensions, beta 0 over NaN and beta 1 ---- */

void bo_run_sgemm(const bo_row *r, const sqz_backend *b, bo_res *res) {
    (void)r;
    enum { M = 13, N = 37, K = 70, PAD = 3 };
    const float alpha = 0.75f;
    for (int tr = 0; tr < 8 && !res->fail; tr++) {
        const bool ta = tr & 1, tb = tr & 2, beta1 = tr & 4;
        const int64_t lda = (ta ? M : K) + PAD, ldb = (tb ? K : N) + PAD, ldc = N + PAD;
        const int64_t arows = ta ? K : M, brows = tb ? N : K;
        float *a = bo_rand(arows * lda, 1.0f), *bm = bo_rand(brows * ldb, 1.0f), *c0 = bo_rand(M * ldc, 1.0f);
        float *c = bo_malloc(M * ldc * sizeof(float));
        bo_dev d;
        bo_dev_begin(&d, b, res);
        const float *da = bo_put(&d, a, (size_t)(arows * lda) * 4), *db = bo_put(&d, bm, (size_t)(brows * ldb) * 4);
        if (!beta1) for (int64_t i = 0; i < M; i++) for (int64_t j = 0; j < N; j++) c0[i * ldc + j] = NAN;
        float *dc = bo_put(&d, c0, (size_t)(M * ldc) * 4);
        const sqz_sgemm_args s = {.trans_a = ta, .trans_b = tb, .m = M, .n = N, .k = K, .alpha = alpha, .a = da,
                                  .lda = lda, .b = db, .ldb = ldb, .beta = beta1 ? 1.0f : 0.0f, .c = dc, .ldc = ldc};
        if (bo_dev_ok(&d)) bo_call(&d, "sgemm", b->ops->sgemm(b->ctx, &s));
        bo_get(&d, c, dc, (size_t)(M * ldc) * 4);
        for (int64_t i = 0; bo_dev_ok(&d) && i < M; i++) {
            for (int64_t j = 0; j < ldc; j++) {
                if (j >= N) { /* the padding stays */
                    bo_check(res, "c padding", i * ldc + j, c[i * ldc + j], c0[i * ldc + j], 0);
                    continue;
                }
                double ref = 0, mag = 0;
                for (int64_t p = 0; p < K; p++) {
                    const double av = ta ? a[p * lda + i] : a[i * lda + p], bv = tb ? bm[j * ldb + p] : bm[p * ldb + j];
                    ref += av * bv;
                    mag += fabs(av * bv);
                }
                ref *= alpha, mag *= alpha;
                if (beta1) ref += c0[i * ldc + j], mag += fabs(c0[i * ldc + j]);
                bo_check(res, "c", i * ldc + j, c[i * ldc + j], ref, 1e-5 * mag + 1e-30);
            }
        }
        bo_dev_end(&d);
        free(a), free(bm), free(c0), free(c);
    }
}

/* ---- to_f32: an independent decoding of each source format; the bits ---- */

static double f16_value(uint16_t h) {
    const int e = (h >> 10) & 31, f = h & 1023;
    const double v = e == 0 ? ldexp(f, -24) : e == 31 ? INFINITY : ldexp(f + 1024, e - 25);
    return h & 0x8000 ? -v : v;
}

void bo_run_to_f32(const bo_row *r, const sqz_backend *b, bo_res *res) {
    enum { N = 1000 };
    const size_t esz = sqz_dtype_info(r->dtype)->type_size;
    uint8_t *src = bo_malloc(N * esz);
    float *ref = bo_malloc(N * sizeof(float)), *got = bo_malloc(N * sizeof(float));
    for (int64_t i = 0; i < N; i++) {
        if (r->dtype == SQZ_DTYPE_F16 || r->dtype == SQZ_DTYPE_BF16) {
            uint16_t h = (uint16_t)bo_rnd();
            const int exp_shift = r->dtype == SQZ_DTYPE_F16 ? 10 : 7, exp_max = r->dtype == SQZ_DTYPE_F16 ? 31 : 255;
            if (((h >> exp_shift) & exp_max) == exp_max) h &= (uint16_t)~(1u << exp_shift); /* no NaN */
            if (i < 4) /* 0, -0, the smallest subnormal, infinity */
                h = (uint16_t)(i == 0 ? 0 : i == 1 ? 0x8000 : i == 2 ? 1 : (exp_max << exp_shift));
            memcpy(src + 2 * i, &h, 2);
            uint32_t u = (uint32_t)h << 16;
            float bf;
            memcpy(&bf, &u, 4);
            ref[i] = r->dtype == SQZ_DTYPE_F16 ? (float)f16_value(h) : bf;
        } else if (r->dtype == SQZ_DTYPE_F64) {
            double v = ldexp(bo_rndf(), (int)(bo_rnd() % 250) - 140); /* f32's subnormals to 2^110 */
            if (i == 0) v = -0.0;
            if (i == 1) v = 3.4028234e38;
            memcpy(src + 8 * i, &v, 8);
            ref[i] = (float)v; /* rounded to nearest even */
        } else {
            float v = ldexpf(bo_rndf(), (int)(bo_rnd() % 250) - 140);
            if (i == 0) v = -0.0f;
            memcpy(src + 4 * i, &v, 4);
            ref[i] = v;
        }
    }
    bo_dev d;
    bo_dev_begin(&d, b, res);
    const void *ds = bo_put(&d, src, N * esz);
    float *dd = bo_put(&d, NULL, N * sizeof(float));
    if (bo_dev_ok(&d)) bo_call(&d, "to_f32", b->ops->to_f32(b->ctx, ds, r->dtype, N, dd));
    bo_get(&d, got, dd, N * sizeof(float));
    for (int64_t i = 0; bo_dev_ok(&d) && i < N; i++) bo_check(res, "dst", i, got[i], ref[i], 0);
    bo_dev_end(&d);
    free(src), free(ref), free(got);
}

/* tests/gpu/test_gpu_kernels.c - every CUDA GEMM variant against the CPU scalar reference,
 * in the style of ggml's test-backend-ops: a grid of shapes with odd ones (m = 1, 3, 17;
 * k not a multiple of the tile, k not a multiple of 16), random and real weights
 * (stories260K), NaN / inf agreement, sentinel bytes around every output the kernels write,
 * normalised MSE within a per-kernel tolerance:
 *   W8A8 (all variants): 0 - integer accumulation and the same epilogue arithmetic make
 *                        the f32 outputs bit-identical; f16 outputs too (one RNE rounding);
 *                        quantized activations and scales bit-identical as well;
 *   W4A16:               1e-5 (f32 out) / 2e-5 (f16 out) - the kernels round dequantized
 *                        weights to fp16, the reference keeps them exact.
 * Without a CUDA device the program exits 77 (ctest: skipped); without the CUDA module
 * (libsqz_cuda.so, found through SQZ_CUDA_MODULE) it fails. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/backend_impl.h"
#include "core/internal.h"
#include "quant/gguf/quant_gguf.h"
#include "kernels/cpu/gemm_ref.h"
#include "gpu_open.h"
#include "test_util.h"
#include "unit/real_weights.h"

static sqz_backend *gpu;
static uint64_t rs = 0x2545F4914F6CDD1Dull;
static float rndf(void) {
    rs ^= rs << 13; rs ^= rs >> 7; rs ^= rs << 17;
    return (float)((rs >> 11) & 0xFFFFFF) / 16777216.0f * 2.0f - 1.0f;
}

/* ---- device buffers with sentinels ---- */
enum { GUARD = 256 };
static const uint8_t SENTINEL = 0xA5;

typedef struct gbuf { uint8_t *dev; size_t n; } gbuf;

static gbuf gnew(size_t n, const void *init) {
    gbuf g = {gpu->ops->alloc(gpu->ctx, n + 2 * GUARD), n};
    assert_non_null(g.dev);
    uint8_t *fill = malloc(n + 2 * GUARD);
    memset(fill, SENTINEL, n + 2 * GUARD);
    if (init) memcpy(fill + GUARD, init, n);
    SQZ_ASSERT_OK(gpu->ops->upload(gpu->ctx, g.dev, fill, n + 2 * GUARD));
    free(fill);
    return g;
}
static void *gptr(gbuf g) { return g.dev + GUARD; }
/* Downloads the payload into out (may be NULL) and checks both guards. */
static void gget(gbuf g, void *out, const char *what) {
    uint8_t *all = malloc(g.n + 2 * GUARD);
    SQZ_ASSERT_OK(gpu->ops->download(gpu->ctx, all, g.dev, g.n + 2 * GUARD));
    for (size_t i = 0; i < GUARD; i++)
        if (all[i] != SENTINEL || all[GUARD + g.n + i] != SENTINEL) fail_msg("%s: sentinel byte overwritten", what);
    if (out) memcpy(out, all + GUARD, g.n);
    free(all);
}
static void gfree(gbuf g) { gpu->ops->free(gpu->ctx, g.dev); }

static float out_at(const void *y, sqz_dtype t, size_t i) {
    return t == SQZ_DTYPE_F32 ? ((const float *)y)[i] : sqz_fp16_to_fp32(((const uint16_t *)y)[i]);
}

/* NaN / inf agreement, then normalised MSE over the finite pairs. */
static void compare(const char *what, const void *got, const void *ref, sqz_dtype t, size_t n, double tol) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        const float a = out_at(got, t, i), b = out_at(ref, t, i);
        if (isnan(a) != isnan(b) || isinf(a) != isinf(b) || (isinf(a) && (a > 0) != (b > 0)))
            fail_msg("%s: element %zu: %g vs reference %g (NaN/inf disagreement)", what, i, a, b);
        if (!isfinite(a)) continue;
        num += ((double)a - b) * ((double)a - b);
        den += (double)b * b;
    }
    const double e = den > 0 ? num / den : num;
    if (!(e <= tol)) fail_msg("%s: normalised MSE %g > %g", what, e, tol);
}

/* ---- W8A8 ---- */
static const char *vname(sqz_kernel_variant v) {
    switch (v) {
    case SQZ_KVAR_AUTO: return "auto";
    case SQZ_KVAR_I8_CUBLASLT: return "cublaslt";
    case SQZ_KVAR_I8_MMA: return "mma";
    case SQZ_KVAR_I8_MMA_FUSED: return "mma_fused";
    case SQZ_KVAR_W4_MMA: return "w4_mma";
    case SQZ_KVAR_W4_DEQUANT_F16: return "w4_dequant";
    }
    return "?";
}

/* One W8A8 case: wf (n, k) float weights, x_f32 random; inject adds NaN / inf rows. */
static void i8_case(int64_t m, int64_t n, int64_t k, const float *wf, sqz_kernel_variant v, sqz_dtype yt, bool give_f32,
                    bool inject) {
    char what[160];
    snprintf(what, sizeof what, "gemm_i8 %s m=%lld n=%lld k=%lld y=%s%s%s", vname(v), (long long)m, (long long)n,
             (long long)k, sqz_dtype_name(yt), give_f32 ? " x_f32" : "", inject ? " nan/inf" : "");
    const size_t M = m, N = n, K = k, ys = yt == SQZ_DTYPE_F32 ? 4 : 2;
    float *xf = malloc(4 * M * K + 4), *xs = malloc(4 * M + 4), *ws = malloc(4 * N + 4), *xs_got = malloc(4 * M + 4);
    int8_t *xq = malloc(M * K + 1), *wq = malloc(N * K + 1), *xq_got = malloc(M * K + 1);
    uint8_t *y_ref = malloc(ys * M * N + 1), *y_got = malloc(ys * M * N + 1);
    for (size_t i = 0; i < M; i++)
        for (size_t j = 0; j < K; j++) xf[i * K + j] = rndf() * (float)(1 + i % 5);
    if (inject && m > 2 && k > 5) {
        xf[1 * K + 3] = NAN;
        xf[2 * K + 5] = -INFINITY;
    }
    sqz__quantize_rows_i8_ref(wf, n, k, wq, ws);
    if (inject && n > 1) ws[n - 1] = NAN; /* a NaN channel */
    sqz__quantize_rows_i8_ref(xf, m, k, xq, xs);
    SQZ_ASSERT_OK(sqz__gemm_i8_ref(m, n, k, xq, xs, wq, ws, y_ref, yt));

    gbuf dxf = gnew(4 * M * K, xf), dxq = gnew(M * K, give_f32 ? NULL : xq), dxs = gnew(4 * M, give_f32 ? NULL : xs);
    gbuf dwq = gnew(N * K, wq), dws = gnew(4 * N, ws), dy = gnew(ys * M * N, NULL);
    sqz_gemm_i8_args a = {.m = m, .n = n, .k = k, .x_f32 = give_f32 ? gptr(dxf) : NULL, .x = gptr(dxq),
                          .x_scale = gptr(dxs), .w = gptr(dwq), .w_scale = gptr(dws), .y = gptr(dy), .y_dtype = yt,
                          .variant = v};
    const sqz_status s = gpu->ops->gemm_i8(gpu->ctx, &a);
    const bool lt_rules = n % 4 == 0 && k % 4 == 0;
    if (v == SQZ_KVAR_I8_CUBLASLT && !lt_rules) {
        if (s != SQZ_ERR_UNSUPPORTED) fail_msg("%s: expected SQZ_ERR_UNSUPPORTED, got %s", what, sqz_status_name(s));
    } else {
        if (s != SQZ_OK) fail_msg("%s: %s: %s", what, sqz_status_name(s), sqz_last_error());
        SQZ_ASSERT_OK(gpu->ops->synchronize(gpu->ctx));
        gget(dy, y_got, what);
        gget(dxq, xq_got, what);
        gget(dxs, xs_got, what);
        gget(dxf, NULL, what);
        if (give_f32) { /* the activations quantized on the device, bit for bit */
            if (memcmp(xq_got, xq, M * K) != 0) fail_msg("%s: quantized activations differ", what);
            for (size_t i = 0; i < M; i++)
                if (!(xs_got[i] == xs[i] || (isnan(xs_got[i]) && isnan(xs[i]))))
                    fail_msg("%s: x_scale[%zu] = %g, reference %g", what, i, xs_got[i], xs[i]);
        }
        compare(what, y_got, y_ref, yt, M * N, 0.0);
    }
    gfree(dxf); gfree(dxq); gfree(dxs); gfree(dwq); gfree(dws); gfree(dy);
    free(xf); free(xs); free(ws); free(xs_got); free(xq); free(wq); free(xq_got); free(y_ref); free(y_got);
}

static float *random_weights(int64_t n, int64_t k) {
    float *w = malloc(sizeof(float) * (size_t)(n * k));
    for (int64_t i = 0; i < n * k; i++) w[i] = 0.05f * rndf();
    return w;
}

static void test_i8_grid(void **state) {
    (void)state;
    const int64_t ms[] = {1, 3, 16, 17, 33, 64, 130};
    const int64_t nks[][2] = {{64, 64}, {72, 100}, {130, 96}, {256, 4160}, {4096, 256}, {8, 13}};
    const sqz_kernel_variant vs[] = {SQZ_KVAR_I8_CUBLASLT, SQZ_KVAR_I8_MMA, SQZ_KVAR_I8_MMA_FUSED, SQZ_KVAR_AUTO};
    for (size_t s = 0; s < sizeof nks / sizeof nks[0]; s++) {
        float *wf = random_weights(nks[s][0], nks[s][1]);
        for (size_t mi = 0; mi < sizeof ms / sizeof ms[0]; mi++) {
            const bool big = nks[s][0] * nks[s][1] > 100000;
            if (big && ms[mi] != 1 && ms[mi] != 17 && ms[mi] != 130) continue;
            for (size_t vi = 0; vi < 4; vi++)
                for (int f16 = 0; f16 < 2; f16++) {
                    const bool f32_in = vs[vi] == SQZ_KVAR_I8_MMA_FUSED || (mi + (size_t)f16) % 2 == 0;
                    i8_case(ms[mi], nks[s][0], nks[s][1], wf, vs[vi], f16 ? SQZ_DTYPE_F16 : SQZ_DTYPE_F32, f32_in,
                            false);
                }
        }
        free(wf);
    }
}

static void test_i8_real_and_nan(void **state) {
    (void)state;
    float *wts = sqz_rw_need();
    const sqz_kernel_variant vs[] = {SQZ_KVAR_I8_CUBLASLT, SQZ_KVAR_I8_MMA, SQZ_KVAR_I8_MMA_FUSED, SQZ_KVAR_AUTO};
    for (size_t vi = 0; vi < 4; vi++)
        for (int f16 = 0; f16 < 2; f16++) {
            const sqz_dtype yt = f16 ? SQZ_DTYPE_F16 : SQZ_DTYPE_F32;
            const bool f32_in = vs[vi] == SQZ_KVAR_I8_MMA_FUSED || f16;
            i8_case(17, 860, 64, wts + SQZ_RW_W1, vs[vi], yt, f32_in, false);   /* FFN w1, all layers */
            i8_case(3, 64, 172, wts + SQZ_RW_W2, vs[vi], yt, f32_in, false);    /* FFN w2: k = 172 */
            i8_case(40, 512, 64, wts + SQZ_RW_TOK_EMB, vs[vi], yt, f32_in, true); /* with NaN / inf */
        }
    free(wts);
}

/* ---- W4A16 ---- */
static void w4_case(int64_t m, int64_t n, int64_t k, const uint8_t *blocks, sqz_dtype wt, sqz_kernel_variant v,
                    sqz_dtype yt, bool inject) {
    char what[160];
    snprintf(what, sizeof what, "gemm_w4 %s %s m=%lld n=%lld k=%lld y=%s%s", vname(v), sqz_dtype_name(wt),
             (long long)m, (long long)n, (long long)k, sqz_dtype_name(yt), inject ? " nan" : "");
    const size_t M = m, N = n, K = k, ys = yt == SQZ_DTYPE_F32 ? 4 : 2;
    uint16_t *x = malloc(2 * M * K);
    for (size_t i = 0; i < M * K; i++) x[i] = sqz_fp32_to_fp16(rndf());
    if (inject && m > 1) x[1 * K + 7] = 0x7E00; /* NaN: row 1 of y becomes NaN */
    float *yr32 = malloc(4 * M * N);
    uint8_t *y_ref = malloc(ys * M * N), *y_got = malloc(ys * M * N), *y_again = malloc(ys * M * N);
    SQZ_ASSERT_OK(sqz__gemm_w4a16_ref(m, n, k, x, blocks, wt, yr32, SQZ_DTYPE_F32));
    for (size_t i = 0; i < M * N; i++) {
        if (yt == SQZ_DTYPE_F32) ((float *)y_ref)[i] = yr32[i];
        else ((uint16_t *)y_ref)[i] = sqz_fp32_to_fp16(yr32[i]);
    }
    void *prep = NULL;
    SQZ_ASSERT_OK(gpu->ops->prepare_w4(gpu->ctx, blocks, wt, n, k, &prep));
    gbuf dx = gnew(2 * M * K, x), dy = gnew(ys * M * N, NULL);
    sqz_gemm_w4_args a = {.m = m, .n = n, .k = k, .x = gptr(dx), .w = prep, .y = gptr(dy), .y_dtype = yt,
                          .variant = v};
    sqz_status s = gpu->ops->gemm_w4(gpu->ctx, &a);
    if (s != SQZ_OK) fail_msg("%s: %s: %s", what, sqz_status_name(s), sqz_last_error());
    gget(dy, y_got, what);
    gget(dx, NULL, what);
    compare(what, y_got, y_ref, yt, M * N, yt == SQZ_DTYPE_F32 ? 1e-5 : 2e-5);
    /* deterministic: split-k reductions run in a fixed order */
    SQZ_ASSERT_OK(gpu->ops->gemm_w4(gpu->ctx, &a));
    gget(dy, y_again, what);
    if (memcmp(y_got, y_again, ys * M * N) != 0) fail_msg("%s: two runs differ", what);
    /* n / k must match the prepared weight */
    a.n = n + 1;
    assert_int_equal(gpu->ops->gemm_w4(gpu->ctx, &a), SQZ_ERR_SHAPE);
    gfree(dx);
    gfree(dy);
    gpu->ops->free(gpu->ctx, prep);
    free(x); free(yr32); free(y_ref); free(y_got); free(y_again);
}

static uint8_t *quantize_q4(const float *w, int64_t n, int64_t k, sqz_dtype t) {
    uint8_t *b = malloc((size_t)(n * (k / 32)) * 20);
    if (t == SQZ_DTYPE_Q4_0) sqz__quantize_q4_0_ref(w, b, n * k);
    else sqz__quantize_q4_1_ref(w, b, n * k);
    return b;
}

static void test_w4_grid(void **state) {
    (void)state;
    const int64_t ms[] = {1, 3, 16, 17, 64, 257};
    const int64_t nks[][2] = {{64, 32}, {100, 96}, {72, 2080}, {256, 4128}};
    const sqz_kernel_variant vs[] = {SQZ_KVAR_W4_MMA, SQZ_KVAR_W4_DEQUANT_F16, SQZ_KVAR_AUTO};
    for (size_t s = 0; s < sizeof nks / sizeof nks[0]; s++) {
        float *wf = random_weights(nks[s][0], nks[s][1]);
        for (int q41 = 0; q41 < 2; q41++) {
            const sqz_dtype wt = q41 ? SQZ_DTYPE_Q4_1 : SQZ_DTYPE_Q4_0;
            uint8_t *blocks = quantize_q4(wf, nks[s][0], nks[s][1], wt);
            for (size_t mi = 0; mi < sizeof ms / sizeof ms[0]; mi++)
                for (size_t vi = 0; vi < 3; vi++)
                    for (int f16 = 0; f16 < 2; f16++)
                        w4_case(ms[mi], nks[s][0], nks[s][1], blocks, wt, vs[vi], f16 ? SQZ_DTYPE_F16 : SQZ_DTYPE_F32,
                                false);
            free(blocks);
        }
        free(wf);
    }
}

static void test_w4_real_and_nan(void **state) {
    (void)state;
    float *wts = sqz_rw_need();
    const int64_t mats[][3] = {{860, 64, SQZ_RW_W1}, {512, 64, SQZ_RW_TOK_EMB}, {80, 256, SQZ_RW_WQ}};
    for (size_t i = 0; i < 3; i++)
        for (int q41 = 0; q41 < 2; q41++) {
            const sqz_dtype wt = q41 ? SQZ_DTYPE_Q4_1 : SQZ_DTYPE_Q4_0;
            uint8_t *blocks = quantize_q4(wts + mats[i][2], mats[i][0], mats[i][1], wt);
            const int64_t ms[] = {1, 3, 17, 300};
            for (size_t mi = 0; mi < 4; mi++) {
                w4_case(ms[mi], mats[i][0], mats[i][1], blocks, wt, SQZ_KVAR_W4_MMA, SQZ_DTYPE_F32, mi == 1);
                w4_case(ms[mi], mats[i][0], mats[i][1], blocks, wt, SQZ_KVAR_W4_DEQUANT_F16, SQZ_DTYPE_F16, mi == 1);
            }
            free(blocks);
        }
    free(wts);
}

static void test_errors(void **state) {
    (void)state;
    assert_true(sqz_backend_supports(gpu, SQZ_OP_GEMM_I8, SQZ_DTYPE_I8));
    assert_true(sqz_backend_supports(gpu, SQZ_OP_GEMM_W4A16, SQZ_DTYPE_Q4_1));
    assert_true(sqz_backend_supports(gpu, SQZ_OP_MATMUL, SQZ_DTYPE_F32)); /* f32/f16/bf16 weights (issue 26) */
    assert_false(sqz_backend_supports(gpu, SQZ_OP_MATMUL, SQZ_DTYPE_Q8_0)); /* block types: not on the device */
    /* weights prepared elsewhere, or not at all */
    uint16_t x[32];
    sqz_gemm_w4_args a = {.m = 1, .n = 1, .k = 32, .x = x, .w = x, .y = x, .y_dtype = SQZ_DTYPE_F32};
    assert_int_equal(gpu->ops->gemm_w4(gpu->ctx, &a), SQZ_ERR_INVALID_ARG);
    sqz_gemm_i8_args b = {.m = 1, .n = 1, .k = SQZ_GEMM_I8_MAX_K + 1, .y_dtype = SQZ_DTYPE_F32};
    assert_int_equal(gpu->ops->gemm_i8(gpu->ctx, &b), SQZ_ERR_INVALID_ARG);
    b.k = 32;
    b.variant = SQZ_KVAR_I8_MMA_FUSED; /* needs x_f32 */
    assert_int_equal(gpu->ops->gemm_i8(gpu->ctx, &b), SQZ_ERR_INVALID_ARG);
    b.variant = SQZ_KVAR_W4_MMA;
    assert_int_equal(gpu->ops->gemm_i8(gpu->ctx, &b), SQZ_ERR_UNSUPPORTED);
}

int main(void) {
    const int rc0 = sqz_gpu_open(&gpu, NULL, "GPU kernel tests");
    if (rc0) return rc0;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_i8_grid),
        cmocka_unit_test(test_i8_real_and_nan),
        cmocka_unit_test(test_w4_grid),
        cmocka_unit_test(test_w4_real_and_nan),
    };
    const int rc = sqz_test_run(tests, NULL, NULL);
    sqz_backend_free(gpu);
    return rc;
}

/* tests/gpu/test_gpu_sp24.c - the 2:4 sparse INT8 CUDA kernel (mma.sp m16n8k64) against the CPU
 * reference, bit for bit (f32 and f16 outputs; integer sums and the same epilogue arithmetic):
 * odd shapes (m = 1, 3, 17; n not a multiple of 16), random 2:4 weights with every int8 value,
 * a real 2:4 weight (stories260K), x_f32 quantized on the device, sentinels after y; k not a
 * multiple of 64 refused (SQZ_ERR_UNSUPPORTED). Without a CUDA device: exit 77. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/backend_impl.h"
#include "core/internal.h"
#include "kernels/cpu/gemm_ref.h"
#include "sqz/sparse.h"
#include "test_util.h"

static sqz_backend *gpu;
static uint64_t rs = 0x9E3779B97F4A7C15ull;
static uint32_t rnd(void) {
    rs ^= rs << 13; rs ^= rs >> 7; rs ^= rs << 17;
    return (uint32_t)(rs >> 32);
}

static void *up(const void *h, size_t n) {
    void *d = gpu->ops->alloc(gpu->ctx, n + 64);
    assert_non_null(d);
    assert_int_equal(gpu->ops->upload(gpu->ctx, d, h, n), SQZ_OK);
    return d;
}

/* One shape: y on the GPU (x_f32 quantized there) equals the CPU reference, f32 and f16. */
static void one(int64_t m, int64_t n, int64_t k) {
    int8_t *w = calloc((size_t)(n * k), 1), *vals = malloc((size_t)(n * k / 2)), *xq = malloc((size_t)(m * k));
    uint32_t *meta = malloc(sizeof(uint32_t) * (size_t)(n * k / 32));
    float *xf = malloc(sizeof(float) * (size_t)(m * k)), *xs = malloc(sizeof(float) * (size_t)m);
    float *ws = malloc(sizeof(float) * (size_t)n);
    for (int64_t g = 0; g < n * k / 4; g++) {
        const int i0 = (int)(rnd() % 4), i1 = (i0 + 1 + (int)(rnd() % 3)) % 4;
        w[4 * g + i0] = (int8_t)rnd();
        w[4 * g + i1] = (int8_t)rnd();
    }
    for (int64_t i = 0; i < m * k; i++) xf[i] = (float)(int32_t)(rnd() % 2001 - 1000) / 997.0f;
    for (int64_t j = 0; j < n; j++) ws[j] = (float)(rnd() % 1000 + 1) * 1e-4f;
    assert_int_equal(sqz_sp24_pack_i8(w, n, k, vals, meta), SQZ_OK);
    sqz__quantize_rows_i8_ref(xf, m, k, xq, xs);
    for (int f16 = 0; f16 < 2; f16++) {
        const size_t yb = (size_t)(m * n) * (f16 ? 2 : 4);
        uint8_t *yr = malloc(yb), *yg = malloc(yb + 64);
        assert_int_equal(sqz_gemm_i8_sp24_ref(m, n, k, xq, xs, vals, meta, ws, yr, f16 ? SQZ_DTYPE_F16 : SQZ_DTYPE_F32),
                         SQZ_OK);
        void *dxf = up(xf, sizeof(float) * (size_t)(m * k)), *dv = up(vals, (size_t)(n * k / 2));
        void *dm = up(meta, sizeof(uint32_t) * (size_t)(n * k / 32)), *dws = up(ws, sizeof(float) * (size_t)n);
        void *dx = gpu->ops->alloc(gpu->ctx, (size_t)(m * k)), *dxs = gpu->ops->alloc(gpu->ctx, sizeof(float) * (size_t)m);
        memset(yg, 0xA5, yb + 64);
        void *dy = up(yg, yb + 64);
        sqz_gemm_i8_sp24_args a = {.m = m, .n = n, .k = k, .x_f32 = dxf, .x = dx, .x_scale = dxs, .values = dv,
                                   .meta = dm, .w_scale = dws, .y = dy, .y_dtype = f16 ? SQZ_DTYPE_F16 : SQZ_DTYPE_F32};
        assert_int_equal(gpu->ops->gemm_i8_sp24(gpu->ctx, &a), SQZ_OK);
        assert_int_equal(gpu->ops->synchronize(gpu->ctx), SQZ_OK);
        assert_int_equal(gpu->ops->download(gpu->ctx, yg, dy, yb + 64), SQZ_OK);
        if (memcmp(yg, yr, yb)) fail_msg("m %lld n %lld k %lld %s: the GPU differs from the CPU reference", (long long)m,
                                         (long long)n, (long long)k, f16 ? "f16" : "f32");
        for (size_t i = yb; i < yb + 64; i++) assert_int_equal(yg[i], 0xA5);
        void *ptrs[] = {dxf, dv, dm, dws, dx, dxs, dy};
        for (size_t i = 0; i < 7; i++) gpu->ops->free(gpu->ctx, ptrs[i]);
        free(yr);
        free(yg);
    }
    free(w); free(vals); free(xq); free(meta); free(xf); free(xs); free(ws);
}

static void test_shapes(void **state) {
    (void)state;
    const int64_t ms[] = {1, 3, 17, 64}, ns[] = {16, 40, 172}, ks[] = {64, 128, 576};
    for (size_t i = 0; i < 4; i++)
        for (size_t j = 0; j < 3; j++)
            for (size_t l = 0; l < 3; l++) one(ms[i], ns[j], ks[l]);
}

static void test_k_refused(void **state) {
    (void)state;
    sqz_gemm_i8_sp24_args a = {.m = 1, .n = 16, .k = 96, .x = (int8_t *)16, .x_scale = (float *)16,
                               .values = (int8_t *)16, .meta = (uint32_t *)16, .w_scale = (float *)16, .y = (void *)16,
                               .y_dtype = SQZ_DTYPE_F32};
    assert_int_equal(gpu->ops->gemm_i8_sp24(gpu->ctx, &a), SQZ_ERR_UNSUPPORTED);
}

int main(void) {
    if (sqz_cuda_device_count() == 0 || sqz_backend_cuda(-1, &gpu) != SQZ_OK) {
        printf("no usable CUDA device (%s): the 2:4 GPU kernel test is skipped\n", sqz_last_error());
        return SQZ_TEST_SKIP;
    }
    if (!gpu->ops->gemm_i8_sp24) { fprintf(stderr, "no gemm_i8_sp24 slot\n"); return 1; }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shapes),
        cmocka_unit_test(test_k_refused),
    };
    const int rc = sqz_test_run(tests, NULL, NULL);
    sqz_backend_free(gpu);
    return rc;
}

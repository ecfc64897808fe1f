/* tests/gpu/test_gpu_stats.c - the CUDA colstats and cosine slots (issue 26; written 2026-12-02 without
 * a GPU, first run on the next GPU session) against the CPU backend's, bit for bit: every sum adds
 * its rows in order with exact products (sqz/backend.h), so a device must give the host's bytes.
 * Shapes 1 x 1 to 513 x 8960, accumulating onto non-zero sums, a NaN and an infinity, zero rows
 * (cosine 1); stories260K's weights as rows. Skips (77) without a usable CUDA device. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/backend_impl.h"
#include "unit/real_weights.h"
#include "gpu_open.h"
#include "sqz/backend.h"
#include "test_util.h"

static sqz_backend *gpu, *cpu;
static uint64_t rs = 0x9E3779B97F4A7C15ull;
static float rndf(void) {
    rs ^= rs << 13, rs ^= rs >> 7, rs ^= rs << 17;
    return (float)((double)(rs >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

static void *up(const void *h, size_t n) {
    void *d = gpu->ops->alloc(gpu->ctx, n ? n : 1);
    assert_non_null(d);
    if (n) SQZ_ASSERT_OK(gpu->ops->upload(gpu->ctx, d, h, n));
    return d;
}

static void colstats_case(const char *tag, const float *x, int64_t n, int64_t k) {
    double *s = malloc((size_t)(3 * k) * 8), *g = malloc((size_t)(3 * k) * 8);
    float *m = malloc((size_t)k * 4), *gm = malloc((size_t)k * 4);
    for (int64_t j = 0; j < 3 * k; j++) s[j] = j % 3 ? 0.25 * (double)j : 0.0;
    for (int64_t j = 0; j < k; j++) m[j] = j % 2 ? 0.5f : 0.0f;
    void *dx = up(x, (size_t)(n * k) * 4), *ds = up(s, (size_t)(3 * k) * 8), *dm = up(m, (size_t)k * 4);
    const sqz_colstats_args h = {x, n, k, s, s + k, s + 2 * k, m};
    SQZ_ASSERT_OK(cpu->ops->colstats(cpu->ctx, &h));
    const sqz_colstats_args d = {dx, n, k, ds, (double *)ds + k, (double *)ds + 2 * k, dm};
    SQZ_ASSERT_OK(gpu->ops->colstats(gpu->ctx, &d));
    SQZ_ASSERT_OK(gpu->ops->download(gpu->ctx, g, ds, (size_t)(3 * k) * 8));
    SQZ_ASSERT_OK(gpu->ops->download(gpu->ctx, gm, dm, (size_t)k * 4));
    SQZ_ASSERT_OK(gpu->ops->synchronize(gpu->ctx));
    printf("colstats %s %lld x %lld: %s\n", tag, (long long)n, (long long)k,
           memcmp(g, s, (size_t)(3 * k) * 8) || memcmp(gm, m, (size_t)k * 4) ? "DIFFERENT" : "the CPU's bits");
    assert_memory_equal(g, s, (size_t)(3 * k) * 8);
    assert_memory_equal(gm, m, (size_t)k * 4);
    gpu->ops->free(gpu->ctx, dx), gpu->ops->free(gpu->ctx, ds), gpu->ops->free(gpu->ctx, dm);
    free(s), free(g), free(m), free(gm);
}

static void cosine_case(const char *tag, const float *a, const float *b, int64_t n, int64_t d) {
    double *c = malloc((size_t)n * 8), *g = malloc((size_t)n * 8);
    void *da = up(a, (size_t)(n * d) * 4), *db = up(b, (size_t)(n * d) * 4), *dc = up(NULL, (size_t)n * 8);
    SQZ_ASSERT_OK(cpu->ops->cosine(cpu->ctx, &(sqz_cosine_args){a, b, n, d, c}));
    SQZ_ASSERT_OK(gpu->ops->cosine(gpu->ctx, &(sqz_cosine_args){da, db, n, d, dc}));
    SQZ_ASSERT_OK(gpu->ops->download(gpu->ctx, g, dc, (size_t)n * 8));
    SQZ_ASSERT_OK(gpu->ops->synchronize(gpu->ctx));
    printf("cosine %s %lld x %lld: %s\n", tag, (long long)n, (long long)d, memcmp(g, c, (size_t)n * 8) ? "DIFFERENT" : "the CPU's bits");
    assert_memory_equal(g, c, (size_t)n * 8);
    gpu->ops->free(gpu->ctx, da), gpu->ops->free(gpu->ctx, db), gpu->ops->free(gpu->ctx, dc);
    free(c), free(g);
}

static void test_stats(void **state) {
    (void)state;
    const int64_t shapes[][2] = {{1, 1}, {3, 37}, {300, 129}, {513, 8960}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        const int64_t n = shapes[i][0], k = shapes[i][1];
        float *x = malloc((size_t)(n * k) * 4), *y = malloc((size_t)(n * k) * 4);
        for (int64_t t = 0; t < n * k; t++) x[t] = rndf() * (float)(1 + t % 9), y[t] = rndf();
        if (n > 2) {
            x[k + 1] = NAN, x[2 * k] = INFINITY; /* propagate as the CPU's do */
            for (int64_t j = 0; j < k; j++) y[j] = 0.0f; /* a zero row: cosine 1 */
        }
        colstats_case("random", x, n, k);
        cosine_case("random", x, y, n, k);
        free(x), free(y);
    }
    float *w = sqz_rw_need();
    colstats_case("stories260K w1 rows", w + SQZ_RW_W1, 860, 64);
    cosine_case("stories260K w1 rows", w + SQZ_RW_W1, w + SQZ_RW_W1 + 64, 859, 64);
    free(w);
}

int main(void) {
    const int rc0 = sqz_gpu_open(&gpu, &cpu, "GPU statistics tests");
    if (rc0) return rc0;
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_stats)};
    const int rc = sqz_test_run(tests, NULL, NULL);
    sqz_backend_free(gpu);
    sqz_backend_free(cpu);
    return rc;
}

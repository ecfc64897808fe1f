/* tests/unit/test_fgemm.c - sqz's own f32 GEMM over stored weights (kernels/cpu/fgemm.h):
 *   - every form this CPU runs (AVX-512, AVX2) gives the scalar reference form's bits, on 1 and 2
 *     threads, for token counts that leave partial tiles of 1 and 2 vectors, weight rows that leave
 *     partial register tiles and blocks of rows, and widths with a partial block of columns;
 *   - the scalar form is within float summation error of sqz__matmul_ref (sums in double);
 *   - sqz__qmatmul takes it for many tokens, and SQZ_F32_GEMM=blas puts sgemm back (the same values
 *     within summation error, other bits). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "kernels/cpu/fgemm.h"
#include "kernels/cpu/gemm_ref.h"
#include "test_util.h"

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static float rndf(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (float)((rng_state >> 40) & 0xFFFFFF) / 16777216.0f * 2.0f - 1.0f;
}

static float *rand_floats(int64_t n, float scale) {
    float *x = malloc((size_t)n * sizeof(float));
    assert_non_null(x);
    for (int64_t i = 0; i < n; i++) x[i] = scale * rndf();
    return x;
}

/* n rows of k weights of type t quantized from random floats (malloc'd). */
static uint8_t *make_rows(sqz_dtype t, int64_t n, int64_t k) {
    const sqz_dtype_traits *tr = sqz_dtype_info(t);
    float *src = rand_floats(n * k, 1.0f);
    uint8_t *w = malloc((size_t)(n * k / tr->block_size) * tr->type_size);
    assert_non_null(w);
    tr->from_f32(src, w, n * k);
    free(src);
    return w;
}

/* |y - reference| within 1e-5 of sum |w x| for every output. */
static void check_close(const sqz_matmul_args *a, const float *y, const char *what) {
    float *ref = malloc((size_t)(a->m * a->n) * sizeof(float)), *row = malloc((size_t)a->k * sizeof(float));
    assert_non_null(ref);
    assert_non_null(row);
    sqz_matmul_args r = *a;
    r.y = ref;
    SQZ_ASSERT_OK(sqz__matmul_ref(&r));
    const sqz_dtype_traits *tr = sqz_dtype_info(a->w_dtype);
    const size_t rb = (size_t)(a->k / tr->block_size) * tr->type_size;
    for (int64_t j = 0; j < a->n; j++) {
        tr->to_f32((const uint8_t *)a->w + (size_t)j * rb, row, a->k);
        for (int64_t i = 0; i < a->m; i++) {
            double mag = 0;
            for (int64_t c = 0; c < a->k; c++) mag += fabs((double)row[c] * a->x[i * a->k + c]);
            const double d = fabs((double)y[i * a->n + j] - ref[i * a->n + j]);
            if (!(d <= 1e-5 * mag + 1e-30))
                fail_msg("%s %s m=%lld n=%lld k=%lld: y[%lld][%lld] = %.9g, reference %.9g", what,
                         sqz_dtype_name(a->w_dtype), (long long)a->m, (long long)a->n, (long long)a->k, (long long)i,
                         (long long)j, (double)y[i * a->n + j], (double)ref[i * a->n + j]);
        }
    }
    free(ref);
    free(row);
}

/* Every form on 1 and 2 threads against the scalar form, bit for bit; the scalar form against the
 * reference. */
static void check_shape(sqz__pool *pool, sqz_dtype t, int64_t m, int64_t n, int64_t k, bool bias) {
    uint8_t *w = make_rows(t, n, k);
    float *x = rand_floats(m * k, 2.0f), *b = bias ? rand_floats(n, 1.0f) : NULL;
    float *want = malloc((size_t)(m * n) * sizeof(float)), *got = malloc((size_t)(m * n + 1) * sizeof(float));
    assert_non_null(want);
    assert_non_null(got);
    sqz_matmul_args a = {.m = m, .n = n, .k = k, .x = x, .w = w, .w_dtype = t, .bias = b, .y = want};
    const sqz__dequant_fn dq = sqz__qmm_dequant(t, SQZ__ISA_SCALAR);
    SQZ_ASSERT_OK(sqz__fgemm(NULL, sqz__fgemm_scalar(), dq, &a));
    check_close(&a, want, "scalar form");
    a.y = got;
    for (int isa = 0; isa < SQZ__ISA_COUNT; isa++) {
        const sqz__fgemm_impl *G = sqz__fgemm_impl_for((sqz__qmm_isa)isa);
        if (!G || !sqz__qmm_isa_runs((sqz__qmm_isa)isa)) continue;
        for (int th = 0; th < 2; th++) {
            got[m * n] = 12345.0f; /* a sentinel past the output */
            SQZ_ASSERT_OK(sqz__fgemm(th ? pool : NULL, G, sqz__qmm_dequant(t, (sqz__qmm_isa)isa), &a));
            assert_true(got[m * n] == 12345.0f);
            for (int64_t i = 0; i < m * n; i++)
                if (memcmp(&got[i], &want[i], sizeof(float)) != 0)
                    fail_msg("%s form, %d thread(s), %s m=%lld n=%lld k=%lld: y[%lld] = %.9g, scalar form %.9g", G->name,
                             th + 1, sqz_dtype_name(t), (long long)m, (long long)n, (long long)k, (long long)i,
                             (double)got[i], (double)want[i]);
        }
    }
    free(w);
    free(x);
    free(b);
    free(want);
    free(got);
}

static void test_forms_equal_scalar(void **state) {
    (void)state;
    sqz__pool *pool;
    SQZ_ASSERT_OK(sqz__pool_new(2, &pool));
    /* tokens: one vector (8), a partial one (9), 2 vectors of 8 or 16, tails of 1 and 2 vectors */
    const int64_t ms[] = {8, 9, 16, 17, 33, 40, 70};
    /* rows: one, a partial tile of 6 or 12, a partial block of 48, several blocks */
    const int64_t ns[] = {1, 11, 13, 49, 100};
    for (size_t mi = 0; mi < sizeof ms / sizeof ms[0]; mi++)
        for (size_t ni = 0; ni < sizeof ns / sizeof ns[0]; ni++) {
            check_shape(pool, SQZ_DTYPE_Q4_K, ms[mi], ns[ni], 512, (mi + ni) % 2);
            check_shape(pool, SQZ_DTYPE_Q8_0, ms[mi], ns[ni], 576, (mi + ni) % 2 == 0); /* 256 + 256 + 64 */
        }
    const sqz_dtype more[] = {SQZ_DTYPE_F16, SQZ_DTYPE_BF16, SQZ_DTYPE_Q4_0, SQZ_DTYPE_Q4_1, SQZ_DTYPE_Q5_0,
                              SQZ_DTYPE_Q5_1, SQZ_DTYPE_Q2_K, SQZ_DTYPE_Q3_K, SQZ_DTYPE_Q5_K, SQZ_DTYPE_Q6_K};
    for (size_t ti = 0; ti < sizeof more / sizeof more[0]; ti++) check_shape(pool, more[ti], 37, 50, 768, ti % 2);
    sqz__pool_free(pool);
}

/* sqz__qmatmul uses the form for many tokens (the same bits); SQZ_F32_GEMM=blas gives sgemm's sums. */
static void test_qmatmul_takes_it(void **state) {
    (void)state;
    const int64_t m = 40, n = 60, k = 512;
    uint8_t *w = make_rows(SQZ_DTYPE_Q4_K, n, k);
    float *x = rand_floats(m * k, 2.0f), *y = malloc((size_t)(m * n) * sizeof(float)),
          *want = malloc((size_t)(m * n) * sizeof(float));
    assert_non_null(y);
    assert_non_null(want);
    const sqz__qmm_isa isa = sqz__qmm_isa_best();
    const sqz__fgemm_impl *G = sqz__fgemm_impl_for(isa);
    if (!G || isa == SQZ__ISA_SCALAR) {
        free(w), free(x), free(y), free(want);
        skip(); /* NEON or scalar machines: sgemm serves many tokens */
    }
    sqz_matmul_args a = {.m = m, .n = n, .k = k, .x = x, .w = w, .w_dtype = SQZ_DTYPE_Q4_K, .y = want};
    SQZ_ASSERT_OK(sqz__fgemm(NULL, G, sqz__qmm_dequant(SQZ_DTYPE_Q4_K, isa), &a));
    a.y = y;
    SQZ_ASSERT_OK(sqz__qmatmul(NULL, isa, &a));
    assert_memory_equal(y, want, (size_t)(m * n) * sizeof(float));
    setenv("SQZ_F32_GEMM", "blas", 1);
    assert_false(sqz__fgemm_enabled());
    SQZ_ASSERT_OK(sqz__qmatmul(NULL, isa, &a));
    unsetenv("SQZ_F32_GEMM");
    assert_true(sqz__fgemm_enabled());
    check_close(&a, y, "sgemm");
    free(w), free(x), free(y), free(want);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_forms_equal_scalar),
        cmocka_unit_test(test_qmatmul_takes_it),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

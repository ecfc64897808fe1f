/* tests/unit/test_qmatmul.c - the stored-weight kernels (kernels/cpu/qmatmul.h) against their
 * scalar references: every dequantizer variant bit for bit against core's scalar dequantizer,
 * and the product (few tokens: tiled dots; many: panels + sgemm; every instruction set this
 * CPU runs, 1 and 2 threads) within float summation error of sqz__matmul_ref (rows dequantized
 * by core, sums in double). On random blocks of every dtype, on real stories260K weights
 * quantized to every type sqz writes, on SmolLM2-135M's own Q4_1 and Q8_0 tensors and on
 * Qwen2.5-Coder-0.5B's Q8_0, Q5_0, Q6_K and Q4_K tensors (when fetched). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/backend_impl.h"
#include "core/internal.h"
#include "kernels/cpu/gemm_ref.h"
#include "kernels/cpu/qmatmul.h"
#include "real_weights.h"
#include "test_util.h"

static uint64_t rng_state = 0x2545F4914F6CDD1Dull;
static uint32_t rnd(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 16);
}
static float rndf(void) { return (float)(rnd() & 0xFFFFFF) / 16777216.0f * 2.0f - 1.0f; } /* [-1, 1) */

/* Every stored type the runtime multiplies (F32 has no dequantizer variant, but the product). */
static const sqz_dtype kTypes[] = {SQZ_DTYPE_F32,  SQZ_DTYPE_F16,  SQZ_DTYPE_BF16,   SQZ_DTYPE_Q8_0,  SQZ_DTYPE_Q4_0,
                                   SQZ_DTYPE_Q4_1, SQZ_DTYPE_Q5_0, SQZ_DTYPE_Q5_1,   SQZ_DTYPE_Q2_K,  SQZ_DTYPE_Q3_K,
                                   SQZ_DTYPE_Q4_K, SQZ_DTYPE_Q5_K, SQZ_DTYPE_Q6_K,   SQZ_DTYPE_IQ4_NL, SQZ_DTYPE_IQ4_XS,
                                   SQZ_DTYPE_IQ3_S, SQZ_DTYPE_MXFP4};
#define N_TYPES (sizeof kTypes / sizeof kTypes[0])

/* n rows of k values of type t: quantized from `src` (n * k floats) when sqz writes t, else
 * random codes with a finite fp16 scale in front (IQ4_NL, IQ4_XS). malloc'd. */
static uint8_t *make_rows(sqz_dtype t, const float *src, int64_t n, int64_t k, size_t *row_bytes) {
    const sqz_dtype_traits *tr = sqz_dtype_info(t);
    *row_bytes = (size_t)(k / tr->block_size) * tr->type_size;
    uint8_t *w = malloc(*row_bytes * (size_t)n);
    assert_non_null(w);
    if (tr->from_f32) {
        tr->from_f32(src, w, n * k);
        return w;
    }
    for (size_t i = 0; i < *row_bytes * (size_t)n; i++) w[i] = (uint8_t)rnd();
    for (int64_t b = 0; b < n * k / tr->block_size; b++) {
        uint16_t d = sqz_fp32_to_fp16(0.01f + 0.05f * fabsf(rndf()));
        memcpy(w + (size_t)b * tr->type_size, &d, 2); /* d is the first field of both */
    }
    return w;
}

/* Every instruction set's dequantizer of t gives core's scalar values bit for bit. */
static void check_dequant(sqz_dtype t, const uint8_t *w, int64_t n_el) {
    float *ref = malloc((size_t)n_el * sizeof(float)), *got = malloc((size_t)n_el * sizeof(float));
    assert_non_null(ref);
    assert_non_null(got);
    sqz_dtype_info(t)->to_f32(w, ref, n_el);
    for (int isa = 0; isa < SQZ__ISA_COUNT; isa++) {
        if (!sqz__qmm_isa_runs((sqz__qmm_isa)isa)) continue;
        sqz__qmm_dequant(t, (sqz__qmm_isa)isa)(w, got, n_el);
        for (int64_t i = 0; i < n_el; i++) {
            if (memcmp(&ref[i], &got[i], 4) != 0)
                fail_msg("%s %s: element %lld is %.9g, scalar %.9g", sqz_dtype_name(t),
                         sqz__qmm_isa_name((sqz__qmm_isa)isa), (long long)i, (double)got[i], (double)ref[i]);
        }
    }
    free(ref);
    free(got);
}

/* y of every instruction set, with and without a pool, within summation error of the reference. */
static void check_matmul(sqz_dtype t, const uint8_t *w, int64_t n, int64_t k, int64_t m, const float *x,
                         const float *bias, sqz__pool *pool) {
    float *ref = malloc((size_t)(m * n) * sizeof(float)), *y = malloc((size_t)(m * n + 1) * sizeof(float));
    float *row = malloc((size_t)k * sizeof(float));
    assert_non_null(ref);
    assert_non_null(y);
    assert_non_null(row);
    sqz_matmul_args a = {.m = m, .n = n, .k = k, .x = x, .w = w, .w_dtype = t, .bias = bias, .y = ref};
    SQZ_ASSERT_OK(sqz__matmul_ref(&a));
    const sqz_dtype_traits *tr = sqz_dtype_info(t);
    const size_t row_bytes = (size_t)(k / tr->block_size) * tr->type_size;
    for (int isa = 0; isa < SQZ__ISA_COUNT; isa++) {
        if (!sqz__qmm_isa_runs((sqz__qmm_isa)isa)) continue;
        for (int use_pool = 0; use_pool < 2; use_pool++) {
            y[m * n] = 12345.0f; /* sentinel past the output */
            a.y = y;
            SQZ_ASSERT_OK(sqz__qmatmul(use_pool ? pool : NULL, (sqz__qmm_isa)isa, &a));
            assert_true(y[m * n] == 12345.0f);
            for (int64_t j = 0; j < n; j++) {
                tr->to_f32(w + (size_t)j * row_bytes, row, k);
                for (int64_t i = 0; i < m; i++) {
                    double mag = 0;
                    for (int64_t c = 0; c < k; c++) mag += fabs((double)row[c] * x[i * k + c]);
                    const double tol = 1e-5 * mag + 1e-30;
                    if (!(fabs((double)y[i * n + j] - ref[i * n + j]) <= tol))
                        fail_msg("%s %s m=%lld: y[%lld][%lld] = %.9g, reference %.9g (tolerance %.3g)",
                                 sqz_dtype_name(t), sqz__qmm_isa_name((sqz__qmm_isa)isa), (long long)m,
                                 (long long)i, (long long)j, (double)y[i * n + j], (double)ref[i * n + j], tol);
                }
            }
        }
    }
    free(ref);
    free(y);
    free(row);
}

static float *rand_floats(int64_t n, float scale) {
    float *x = malloc((size_t)n * sizeof(float));
    assert_non_null(x);
    for (int64_t i = 0; i < n; i++) x[i] = scale * rndf();
    return x;
}

static void test_random_blocks(void **state) {
    (void)state;
    sqz__pool *pool;
    SQZ_ASSERT_OK(sqz__pool_new(2, &pool));
    const int64_t n = 37, k = 768; /* k: one chunk and a half: a partial tile */
    float *src = rand_floats(n * k, 1.0f), *bias = rand_floats(n, 1.0f);
    float *x = rand_floats(17 * k, 2.0f);
    for (size_t ti = 0; ti < N_TYPES; ti++) {
        size_t rb;
        uint8_t *w = make_rows(kTypes[ti], src, n, k, &rb);
        if (kTypes[ti] != SQZ_DTYPE_F32) check_dequant(kTypes[ti], w, n * k);
        const int64_t ms[] = {1, 3, SQZ__QMM_TILE_M - 1, SQZ__QMM_TILE_M, 17};
        for (size_t mi = 0; mi < sizeof ms / sizeof ms[0]; mi++)
            check_matmul(kTypes[ti], w, n, k, ms[mi], x, mi % 2 ? bias : NULL, pool);
        free(w);
    }
    free(src);
    free(bias);
    free(x);
    sqz__pool_free(pool);
}

/* Real weights: stories260K's w1 (5 x (172, 64) = 55040 floats) as rows of 256, quantized to
 * every type; more rows than one panel (SQZ__QMM_PANEL) so that panels are cut. */
static void test_real_stories260k(void **state) {
    (void)state;
    float *all = sqz_rw_need();
    sqz__pool *pool;
    SQZ_ASSERT_OK(sqz__pool_new(2, &pool));
    const int64_t k = 256, n = 55040 / 256; /* 215 rows */
    const float *src = all + SQZ_RW_W1;
    float *x = rand_floats(9 * k, 1.0f);
    for (size_t ti = 0; ti < N_TYPES; ti++) {
        size_t rb;
        uint8_t *w = make_rows(kTypes[ti], src, n, k, &rb);
        if (kTypes[ti] != SQZ_DTYPE_F32) check_dequant(kTypes[ti], w, n * k);
        check_matmul(kTypes[ti], w, n, k, 1, x, NULL, pool);
        check_matmul(kTypes[ti], w, n, k, 9, x, NULL, pool);
        free(w);
    }
    /* (860, 64) as stored: k 64 takes the block types of 32 */
    size_t rb;
    uint8_t *w = make_rows(SQZ_DTYPE_Q4_0, src, 860, 64, &rb);
    check_matmul(SQZ_DTYPE_Q4_0, w, 860, 64, 9, x, NULL, pool);
    free(w);
    free(x);
    free(all);
    sqz__pool_free(pool);
}

/* A real file's own tensors, as it stores them, through the kernels of every instruction set (1
 * and 9 tokens) and the CPU backend's matmul slot (asked first, then the slot). */
static void check_real_file(const char *path, const char *const *names, const sqz_dtype *want, int count) {
    sqz_model *m;
    SQZ_ASSERT_OK(sqz_model_open(path, NULL, &m));
    sqz__pool *pool;
    SQZ_ASSERT_OK(sqz__pool_new(2, &pool));
    sqz_backend *be;
    SQZ_ASSERT_OK(sqz_backend_cpu(2, &be));
    for (int i = 0; i < count; i++) {
        int64_t ti = sqz_model_find(m, names[i]);
        assert_true(ti >= 0);
        const sqz_tensor *t = &m->tensors[ti];
        assert_int_equal(t->dtype, want[i]);
        const int64_t k = sqz_tensor_row_len(t), n = t->shape[0] < 2048 ? t->shape[0] : 2048;
        check_dequant(t->dtype, t->data, n * k);
        float *x = rand_floats(9 * k, 1.0f);
        check_matmul(t->dtype, t->data, n, k, 1, x, NULL, pool);
        check_matmul(t->dtype, t->data, n, k, 9, x, NULL, pool);
        assert_true(sqz_backend_supports(be, SQZ_OP_MATMUL, t->dtype));
        float *y = malloc((size_t)n * sizeof(float)), *ref = malloc((size_t)n * sizeof(float));
        sqz_matmul_args a = {.m = 1, .n = n, .k = k, .x = x, .w = t->data, .w_dtype = t->dtype, .y = y};
        SQZ_ASSERT_OK(be->ops->matmul(be->ctx, &a));
        a.y = ref;
        SQZ_ASSERT_OK(sqz__matmul_ref(&a));
        for (int64_t j = 0; j < n; j++) assert_true(fabsf(y[j] - ref[j]) <= 1e-3f * (1.0f + fabsf(ref[j])));
        free(y);
        free(ref);
        free(x);
    }
    sqz_backend_free(be);
    sqz__pool_free(pool);
    sqz_model_free(m);
}

/* SmolLM2-135M's own tensors: Q4_1 blocks, the Q8_0 embedding. */
static void test_real_smollm2(void **state) {
    (void)state;
    const char *path = sqz_test_smollm2();
    SQZ_SKIP_UNLESS(path);
    const char *const names[] = {"blk.0.ffn_down.weight", "blk.29.attn_k.weight", "token_embd.weight"};
    const sqz_dtype want[] = {SQZ_DTYPE_Q4_1, SQZ_DTYPE_Q4_1, SQZ_DTYPE_Q8_0};
    check_real_file(path, names, want, 3);
}

/* Qwen2.5-Coder-0.5B's own tensors (its Q8_0 classifier, Q5_0 embedding, Q6_K and Q4_K
 * down-projections of 4864 columns; skipped unless fetched: SQZ_WITH_EDGE_MODELS=1 setup.sh). */
static void test_real_qwen05(void **state) {
    (void)state;
    const char *path = sqz_test_qwen05();
    SQZ_SKIP_UNLESS(path);
    const char *const names[] = {"output.weight", "token_embd.weight", "blk.0.ffn_down.weight",
                                 "blk.11.ffn_down.weight"};
    const sqz_dtype want[] = {SQZ_DTYPE_Q8_0, SQZ_DTYPE_Q5_0, SQZ_DTYPE_Q6_K, SQZ_DTYPE_Q4_K};
    check_real_file(path, names, want, 4);
}

/* What the backend refuses: raw integer codes (I8, U4: they need their scheme's parameters),
 * k not a multiple of the block; asked first, never a crash. */
static void test_refusals(void **state) {
    (void)state;
    sqz_backend *be;
    SQZ_ASSERT_OK(sqz_backend_cpu(1, &be));
    assert_false(sqz_backend_supports(be, SQZ_OP_MATMUL, SQZ_DTYPE_I8));
    assert_false(sqz_backend_supports(be, SQZ_OP_MATMUL, SQZ_DTYPE_U4));
    assert_true(sqz_backend_supports(be, SQZ_OP_MATMUL, SQZ_DTYPE_Q6_K));
    uint8_t blocks[2 * 18] = {0};
    float x[48] = {0}, y[2];
    sqz_matmul_args a = {.m = 1, .n = 1, .k = 48, .x = x, .w = blocks, .w_dtype = SQZ_DTYPE_Q4_0, .y = y};
    assert_int_equal(be->ops->matmul(be->ctx, &a), SQZ_ERR_INVALID_ARG);
    a.w_dtype = SQZ_DTYPE_I8;
    assert_int_equal(be->ops->matmul(be->ctx, &a), SQZ_ERR_UNSUPPORTED);
    sqz_backend_free(be);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_random_blocks),
        cmocka_unit_test(test_real_stories260k),
        cmocka_unit_test(test_real_smollm2),
        cmocka_unit_test(test_real_qwen05),
        cmocka_unit_test(test_refusals),
    };
    return sqz_test_run(tests, NULL, NULL);
}

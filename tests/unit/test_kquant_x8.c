/* tests/unit/test_kquant_x8.c - the 8-lane make_qkx3_quants (quant/gguf/kquant_x8.c, AVX2) against
 * the scalar searches it runs side by side (quant/gguf/kquant_search.c: make_qkx3_quants, and
 * make_qkx2_quants without MAD with the reference quantizers' ranges; Q6_K's make_qx_quants with
 * and without weights), bit for bit: codes, scales and mins of every sub-block, for Q4_K's, Q5_K's
 * and Q6_K's nmax (15, 31, 32), on
 *   - stories260K's real weights (every super-block of its 264,128 floats) with importance weights
 *     formed as the Q4_K quantizer forms them, and with all-ones importance;
 *   - adversarial blocks: constant sub-blocks (the early return), all zero, all positive (min
 *     clamped to 0), one huge value, denormals, alternating signs, a zero weight, a NaN;
 * the whole reference and importance-weighted Q4_K, Q5_K and Q6_K quantization of stories260K's
 * weights (sqz__quantize_k, rows of 256) gives the same bytes with the 8-lane searches and without;
 * and prints the time of both over the real weights (informational: no threshold). Skips (77) where
 * the CPU has no AVX2 (the 8-lane search then never runs). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "quant/gguf/kquant_internal.h"
#include "quant/gguf/quant_gguf.h"
#include "unit/real_weights.h"

static int checked, differ;
static double t_scalar, t_x8;

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* 8 scalar searches against the 8-lane one on x (256), w (256): make_qkx3_quants as the imatrix
 * quantizers call it, make_qkx2_quants (no MAD) as the reference Q4_K / Q5_K quantizers do. */
static void compare_one(int nmax, const float *x, const float *w, const char *what, bool qkx2) {
    uint8_t L1[256], L2[256], Laux[32];
    float s1[8], m1[8], s2[8], m2[8];
    const float rmin = qkx2 ? (nmax == 15 ? -1.f : -0.5f) : -0.9f, rdelta = qkx2 ? 0.1f : 0.05f;
    const int nstep = qkx2 ? (nmax == 15 ? 20 : 15) : 36;
    double t0 = now();
    for (int j = 0; j < 8; j++)
        s1[j] = qkx2 ? sqz__make_qkx2_quants(32, nmax, x + 32 * j, w + 32 * j, L1 + 32 * j, &m1[j], Laux, rmin, rdelta,
                                             nstep, false)
                     : sqz__make_qkx3_quants(32, nmax, x + 32 * j, w + 32 * j, L1 + 32 * j, &m1[j], Laux, rmin, rdelta,
                                             nstep);
    const double t1 = now();
    assert_true(sqz__make_qkx3_quants_x8(nmax, x, w, L2, s2, m2, rmin, rdelta, nstep));
    t_scalar += t1 - t0;
    t_x8 += now() - t1;
    checked++;
    if (memcmp(L1, L2, sizeof L1) || memcmp(s1, s2, sizeof s1) || memcmp(m1, m2, sizeof m1)) {
        if (differ++ < 5) {
            for (int j = 0; j < 8; j++)
                if (s1[j] != s2[j] || memcmp(&m1[j], &m2[j], 4) || memcmp(L1 + 32 * j, L2 + 32 * j, 32))
                    print_message("%s nmax %d sub-block %d: scale %a vs %a, min %a vs %a\n", what, nmax, j,
                                  (double)s1[j], (double)s2[j], (double)m1[j], (double)m2[j]);
        }
    }
}

/* Q6_K's make_qx_quants (n 16, nmax 32) on the two halves of 256 values, with and without weights. */
static void compare_qx(const float *x, const float *w, const char *what) {
    for (int h = 0; h < 2; h++)
        for (int weighted = 0; weighted < 2; weighted++) {
            int8_t L1[128], L2[128];
            float s1[8], s2[8];
            const float *xs = x + 128 * h, *qw = weighted ? w + 128 * h : NULL;
            double t0 = now();
            for (int j = 0; j < 8; j++) s1[j] = sqz__make_qx_quants(16, 32, xs + 16 * j, L1 + 16 * j, qw ? qw + 16 * j : NULL);
            const double t1 = now();
            assert_true(sqz__make_qx_quants_x8(32, xs, L2, qw, s2));
            t_scalar += t1 - t0;
            t_x8 += now() - t1;
            checked++;
            if ((memcmp(L1, L2, sizeof L1) || memcmp(s1, s2, sizeof s1)) && differ++ < 5)
                print_message("%s make_qx_quants half %d weighted %d: scale[0] %a vs %a\n", what, h, weighted,
                              (double)s1[0], (double)s2[0]);
        }
}

static void compare(int nmax, const float *x, const float *w, const char *what) {
    compare_one(nmax, x, w, what, false);
    compare_one(nmax, x, w, what, true);
    if (nmax == 15) compare_qx(x, w, what);
}

static bool avx2(void) {
    float x[256] = {1}, w[256] = {1}, s[8], m[8];
    uint8_t L[256];
    return sqz__make_qkx3_quants_x8(15, x, w, L, s, m, -0.9f, 0.05f, 36);
}

static void importance(const float *x, float *w) { /* as k45_impl_block forms them, qw = 1 */
    float sum_x2 = 0;
    for (int l = 0; l < 256; ++l) sum_x2 += x[l] * x[l];
    const float sigma2 = 2 * sum_x2 / 256;
    for (int l = 0; l < 256; ++l) w[l] = sqrtf(sigma2 + x[l] * x[l]);
}

static void test_real(void **state) {
    (void)state;
    float *all = sqz_rw_load();
    if (!all) SQZ_SKIP("stories260K.bin not found");
    checked = differ = 0;
    t_scalar = t_x8 = 0;
    float w[256], ones[256];
    for (int i = 0; i < 256; i++) ones[i] = 1.0f;
    for (int nmax = 15; nmax <= 31; nmax += 16)
        for (size_t b = 0; b + 256 <= SQZ_RW_FLOATS; b += 256) {
            importance(all + b, w);
            compare(nmax, all + b, w, "stories260K");
            compare(nmax, all + b, ones, "stories260K, unit weights");
        }
    print_message("stories260K: %d batches of 8 searches, %d differ; scalar %.3f s, 8 lanes %.3f s (%.1fx)\n",
                  checked, differ, t_scalar, t_x8, t_x8 > 0 ? t_scalar / t_x8 : 0.0);
    assert_int_equal(differ, 0);
    free(all);
}

static void test_adversarial(void **state) {
    (void)state;
    checked = differ = 0;
    uint64_t r = 0x2545F4914F6CDD1Dull;
    float x[256], w[256];
    for (int kind = 0; kind < 10; kind++)
        for (int rep = 0; rep < 40; rep++) {
            for (int i = 0; i < 256; i++) {
                r ^= r << 13, r ^= r >> 7, r ^= r << 17;
                const float u = (float)((r >> 11) & 0xFFFFFF) / 16777216.0f * 2.0f - 1.0f;
                x[i] = u;
                w[i] = 0.1f + fabsf(u);
            }
            for (int j = 0; j < 8; j++) {
                float *s = x + 32 * j;
                const int how = (kind + j) % 10;
                if (how == 1) for (int i = 0; i < 32; i++) s[i] = 0.25f;          /* constant: early return */
                if (how == 2) for (int i = 0; i < 32; i++) s[i] = 0.0f;           /* all zero */
                if (how == 3) for (int i = 0; i < 32; i++) s[i] = fabsf(s[i]) + 1; /* min clamped to 0 */
                if (how == 4) s[rep % 32] = 3e4f;                                  /* one huge value */
                if (how == 5) for (int i = 0; i < 32; i++) s[i] *= 1e-38f;         /* denormals */
                if (how == 6) for (int i = 0; i < 32; i++) s[i] = (i & 1) ? 1.0f : -1.0f;
                if (how == 7) w[32 * j + rep % 32] = 0.0f;                         /* a zero weight */
                if (how == 8 && rep % 4 == 0) s[rep % 32] = NAN;
                if (how == 9) for (int i = 0; i < 32; i++) s[i] = -fabsf(s[i]) - 1; /* all negative */
            }
            compare(15, x, w, "adversarial");
            compare(31, x, w, "adversarial");
        }
    print_message("adversarial: %d batches of 8 searches, %d differ\n", checked, differ);
    assert_int_equal(differ, 0);
}

/* Whole rows through the quantizers, the 8-lane searches on and off. */
static void test_rows(void **state) {
    (void)state;
    float *all = sqz_rw_load();
    if (!all) SQZ_SKIP("stories260K.bin not found");
    const int64_t rows = SQZ_RW_FLOATS / 256;
    float *qw = malloc(256 * sizeof(float));
    for (int i = 0; i < 256; i++) qw[i] = 0.5f + (float)(i % 7) * 0.25f; /* an importance per column */
    const sqz_dtype types[] = {SQZ_DTYPE_Q4_K, SQZ_DTYPE_Q5_K, SQZ_DTYPE_Q6_K};
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++)
        for (int weighted = 0; weighted < 2; weighted++) {
            const size_t bytes = (size_t)rows * sqz_dtype_info(types[t])->type_size;
            uint8_t *a = malloc(bytes), *b = malloc(bytes);
            double t0 = now();
            sqz__quantize_k(types[t], all, a, rows, 256, weighted ? qw : NULL);
            const double t1 = now();
            sqz__kquant_x8_set(false);
            sqz__quantize_k(types[t], all, b, rows, 256, weighted ? qw : NULL);
            sqz__kquant_x8_set(true);
            const double t2 = now();
            print_message("%s %s: %lld rows of 256, the same bytes: %s; 8 lanes %.3f s, scalar %.3f s\n",
                          sqz_dtype_name(types[t]), weighted ? "with importance" : "reference", (long long)rows,
                          memcmp(a, b, bytes) ? "NO" : "yes", t1 - t0, t2 - t1);
            assert_memory_equal(a, b, bytes);
            free(a);
            free(b);
        }
    free(qw);
    free(all);
}

int main(void) {
    if (!avx2()) {
        printf("no AVX2 on this CPU: the 8-lane search never runs, nothing to compare\n");
        return SQZ_TEST_SKIP;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_real),
        cmocka_unit_test(test_adversarial),
        cmocka_unit_test(test_rows),
    };
    return sqz_test_run(tests, NULL, NULL);
}

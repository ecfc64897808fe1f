/* tests/unit/test_kquant_x8.c - the 8-lane make_qkx3_quants (quant/gguf/kquant_x8.c, AVX2) against
 * the scalar searches it runs side by side (quant/gguf/kquant_search.c: make_qkx3_quants, and
 * make_qkx2_quants without MAD with the reference quantizers' ranges), bit for bit: codes, scales
 * and mins of every sub-block, for Q4_K's and Q5_K's nmax (15, 31), on
 *   - stories260K's real weights (every super-block of its 264,128 floats) with importance weights
 *     formed as the Q4_K quantizer forms them, and with all-ones importance;
 *   - adversarial blocks: constant sub-blocks (the early return), all zero, all positive (min
 *     clamped to 0), one huge value, denormals, alternating signs, a zero weight, a NaN;
 * and prints the time of both over the real weights (informational: no threshold). Skips (77) where
 * the CPU has no AVX2 (the 8-lane search then never runs). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "quant/gguf/kquant_internal.h"
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

static void compare(int nmax, const float *x, const float *w, const char *what) {
    compare_one(nmax, x, w, what, false);
    compare_one(nmax, x, w, what, true);
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
    print_message("stories260K: %d super-blocks of 8 searches, %d differ; scalar %.3f s, 8 lanes %.3f s (%.1fx)\n",
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
    print_message("adversarial: %d super-blocks of 8 searches, %d differ\n", checked, differ);
    assert_int_equal(differ, 0);
}

int main(void) {
    if (!avx2()) {
        printf("no AVX2 on this CPU: the 8-lane search never runs, nothing to compare\n");
        return SQZ_TEST_SKIP;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_real),
        cmocka_unit_test(test_adversarial),
    };
    return sqz_test_run(tests, NULL, NULL);
}

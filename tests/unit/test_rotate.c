/* tests/unit/test_rotate.c - the rotation matrices of --rotate (quant/rotate.c): orthogonal to
 * float precision for powers of two, SmolLM2's 576 = 64 x 9, Qwen2.5's 896 = 128 x 7, odd widths
 * and 1; a power of two without signs is the scaled Sylvester Hadamard matrix (entries
 * +-1/sqrt(n)); the signs change with the seed; the fold identity W Q (Q^T x) = W x holds. */
#include <math.h>
#include <stdlib.h>

#include "quant/quant_internal.h"
#include "test_util.h"

static double max_orth_err(const float *q, int64_t n) {
    double worst = 0;
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < n; j++) {
            double s = 0;
            for (int64_t k = 0; k < n; k++) s += (double)q[i * n + k] * (double)q[j * n + k];
            worst = fmax(worst, fabs(s - (i == j ? 1.0 : 0.0)));
        }
    return worst;
}

static void test_orthogonal(void **state) {
    (void)state;
    const int64_t widths[] = {1, 7, 8, 64, 96, 576, 896};
    for (size_t w = 0; w < sizeof widths / sizeof widths[0]; w++) {
        for (uint64_t seed = 0; seed < 2; seed++) {
            float *q = NULL;
            SQZ_ASSERT_OK(sqz__rotation_make(widths[w], seed, &q));
            const double e = max_orth_err(q, widths[w]);
            print_message("  width %4lld seed %llu: max |Q Q^T - I| = %.2e\n", (long long)widths[w],
                          (unsigned long long)seed, e);
            assert_true(e < 1e-5);
            free(q);
        }
    }
    float *q = NULL;
    assert_int_equal(sqz__rotation_make(0, 0, &q), SQZ_ERR_INVALID_ARG);
    assert_null(q);
}

static void test_hadamard_and_seed(void **state) {
    (void)state;
    float *h = NULL, *s1 = NULL, *s2 = NULL;
    SQZ_ASSERT_OK(sqz__rotation_make(64, 0, &h));
    SQZ_ASSERT_OK(sqz__rotation_make(64, 1, &s1));
    SQZ_ASSERT_OK(sqz__rotation_make(64, 2, &s2));
    int differ = 0;
    for (int i = 0; i < 64 * 64; i++) {
        assert_true(fabsf(fabsf(h[i]) - 0.125f) < 1e-7f); /* +-1/sqrt(64) */
        assert_true(fabsf(s1[i]) == fabsf(h[i]));         /* signs only */
        differ += s1[i] != s2[i];
    }
    for (int j = 0; j < 64; j++) assert_true(h[j] == 0.125f); /* Sylvester: the first row is all + */
    assert_true(differ > 0);
    free(h);
    free(s1);
    free(s2);
}

/* The fold: (W Q) applied to Q^T x equals W x (a reader of the rotated stream), and
 * Q^T (W y) is sqz__rotate_left_t (a writer). */
static void test_fold_identity(void **state) {
    (void)state;
    enum { N = 576, R = 5 };
    float *q = NULL, w[R * N], wq[R * N], x[N], xr[N], qt_w[N * 1];
    SQZ_ASSERT_OK(sqz__rotation_make(N, 3, &q));
    for (int i = 0; i < R * N; i++) w[i] = sinf(0.37f * (float)i);
    for (int j = 0; j < N; j++) x[j] = cosf(0.11f * (float)j) + (j == 17 ? 30.0f : 0.0f); /* an outlier */
    sqz__rotate_right(w, R, N, q, wq);
    sqz__rotate_left_t(q, N, x, 1, qt_w); /* Q^T x: the rotated stream as a column */
    for (int j = 0; j < N; j++) xr[j] = qt_w[j];
    float amax = 0;
    for (int j = 0; j < N; j++) amax = fmaxf(amax, fabsf(xr[j]));
    assert_true(amax < 10.0f); /* the outlier of 30 is spread over the channels */
    for (int r = 0; r < R; r++) {
        double a = 0, b = 0;
        for (int j = 0; j < N; j++) {
            a += (double)w[r * N + j] * x[j];
            b += (double)wq[r * N + j] * xr[j];
        }
        assert_true(fabs(a - b) < 1e-3 * (1 + fabs(a)));
    }
    free(q);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_orthogonal),
        cmocka_unit_test(test_hadamard_and_seed),
        cmocka_unit_test(test_fold_identity),
    };
    return sqz_test_run(tests, NULL, NULL);
}

/* tests/unit/test_runtime_ops.c - the runtime's building blocks: the pool covers every item
 * once, also over thousands of small jobs whether its waiters sleep or spin; both rotary layouts give the same rotation once rows are permuted as formats/ does
 * (interleaved (2i, 2i+1) vs rotate_half (i, i + hd/2)); norms, activations and softmax against
 * direct double-precision formulas; the vectorized exp; sampling (greedy ties, seeded nucleus). */
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/fwd_ops.h"
#include "kernels/cpu/pool.h"
#include "test_util.h"

typedef struct {
    atomic_int *hits;
} pool_job;

static void mark(void *c, int64_t b, int64_t e, int t) {
    (void)t;
    pool_job *j = c;
    for (int64_t i = b; i < e; i++) atomic_fetch_add(&j->hits[i], 1);
}

static void test_pool_covers_once(void **state) {
    (void)state;
    sqz__pool *p;
    SQZ_ASSERT_OK(sqz__pool_new(4, &p));
    assert_int_equal(sqz__pool_threads(p), 4);
    enum { N = 10007 };
    atomic_int *hits = calloc(N, sizeof *hits);
    pool_job j = {hits};
    for (int rep = 0; rep < 50; rep++) sqz__pool_for(p, N, 1 + rep, mark, &j);
    for (int i = 0; i < N; i++) assert_int_equal(atomic_load(&hits[i]), 50);
    sqz__pool_for(p, 0, 1, mark, &j);
    free(hits);
    sqz__pool_free(p);
    sqz__pool_free(NULL);
}

/* Thousands of small jobs back to back (a generation step's pattern), with waiters that sleep at
 * once (SQZ_POOL_SPIN_US=0) and that spin first (the default): every item of every job counted
 * once, no job lost or run twice (a lost wake-up would hang here). */
static void test_pool_many_small_jobs(void **state) {
    (void)state;
    const char *spins[] = {"0", "100"};
    enum { N = 64, JOBS = 2000 };
    for (int s = 0; s < 2; s++) {
        setenv("SQZ_POOL_SPIN_US", spins[s], 1);
        sqz__pool *p;
        SQZ_ASSERT_OK(sqz__pool_new(2, &p));
        atomic_int *hits = calloc(N, sizeof *hits);
        pool_job j = {hits};
        for (int rep = 0; rep < JOBS; rep++) sqz__pool_for(p, N, 1, mark, &j);
        for (int i = 0; i < N; i++) assert_int_equal(atomic_load(&hits[i]), JOBS);
        free(hits);
        sqz__pool_free(p);
    }
    unsetenv("SQZ_POOL_SPIN_US");
}

/* Rotating with INTERLEAVED then moving element 2i -> i, 2i+1 -> i + hd/2 equals moving first
 * and rotating with HALF: the two layouts describe one rotation. */
static void test_rope_layouts_agree(void **state) {
    (void)state;
    enum { T = 9, H = 3, HD = 16 };
    float cs[T * HD / 2], sn[T * HD / 2];
    const sqz__rope_spec spec = {.theta = 10000.0f, .dim = HD};
    sqz__rope_tables(&spec, T, cs, sn);
    float a[T * H * HD], b[T * H * HD];
    for (int i = 0; i < T * H * HD; i++) a[i] = sinf(0.37f * (float)i) + 0.1f;
    /* b = a with each head's pairs regrouped to the half layout */
    for (int r = 0; r < T * H; r++) {
        for (int i = 0; i < HD / 2; i++) {
            b[r * HD + i] = a[r * HD + 2 * i];
            b[r * HD + i + HD / 2] = a[r * HD + 2 * i + 1];
        }
    }
    sqz__rope(NULL, a, H * HD, T, H, HD, HD, 0, SQZ_ROPE_INTERLEAVED, cs, sn);
    sqz__rope(NULL, b, H * HD, T, H, HD, HD, 0, SQZ_ROPE_HALF, cs, sn);
    for (int r = 0; r < T * H; r++) {
        for (int i = 0; i < HD / 2; i++) {
            assert_true(fabsf(b[r * HD + i] - a[r * HD + 2 * i]) < 1e-6f);
            assert_true(fabsf(b[r * HD + i + HD / 2] - a[r * HD + 2 * i + 1]) < 1e-6f);
        }
    }
    /* position 0 is the identity; the rotation keeps each pair's norm */
    float x[HD], y[HD];
    for (int i = 0; i < HD; i++) x[i] = y[i] = (float)i - 3.5f;
    sqz__rope(NULL, y, HD, 1, 1, HD, HD, 0, SQZ_ROPE_HALF, cs, sn);
    assert_memory_equal(x, y, sizeof x);
    sqz__rope(NULL, y, HD, 1, 1, HD, HD, 5, SQZ_ROPE_INTERLEAVED, cs, sn);
    for (int i = 0; i < HD / 2; i++) {
        double n0 = hypot(x[2 * i], x[2 * i + 1]), n1 = hypot(y[2 * i], y[2 * i + 1]);
        assert_true(fabs(n0 - n1) < 1e-5);
    }
    /* angle of pair i at position p is p * theta^(-2i/hd) */
    double ang = 5.0 * pow(10000.0, -2.0 * 3 / HD);
    assert_true(fabs(cs[5 * HD / 2 + 3] - cos(ang)) < 1e-6);
}

static void test_norms_and_activations(void **state) {
    (void)state;
    sqz__pool *p;
    SQZ_ASSERT_OK(sqz__pool_new(2, &p));
    enum { N = 300, D = 384 };
    float *x = malloc(sizeof(float) * N * D), *y = malloc(sizeof(float) * N * D), w[D], b[D];
    for (int i = 0; i < N * D; i++) x[i] = cosf(0.01f * (float)i) * (1.0f + (float)(i % 7));
    for (int i = 0; i < D; i++) {
        w[i] = 0.5f + 0.001f * (float)i;
        b[i] = -0.25f + 0.002f * (float)i;
    }
    sqz__rmsnorm(p, x, w, 1e-5f, N, D, y);
    for (int r = 0; r < N; r += 37) {
        double ss = 0;
        for (int i = 0; i < D; i++) ss += (double)x[r * D + i] * x[r * D + i];
        double inv = 1 / sqrt(ss / D + 1e-5);
        for (int i = 0; i < D; i++) assert_true(fabs(y[r * D + i] - w[i] * x[r * D + i] * inv) < 1e-5);
    }
    sqz__layernorm(p, x, w, b, 1e-12f, N, D, y);
    for (int r = 0; r < N; r += 37) {
        double mu = 0, var = 0;
        for (int i = 0; i < D; i++) mu += x[r * D + i];
        mu /= D;
        for (int i = 0; i < D; i++) var += (x[r * D + i] - mu) * (x[r * D + i] - mu);
        var /= D;
        for (int i = 0; i < D; i++)
            assert_true(fabs(y[r * D + i] - ((x[r * D + i] - mu) / sqrt(var + 1e-12) * w[i] + b[i])) < 1e-5);
    }
    memcpy(y, x, sizeof(float) * N * D);
    sqz__gelu(p, y, N, D);
    for (int i = 0; i < N * D; i += 101) {
        double v = x[i];
        assert_true(fabs(y[i] - 0.5 * v * (1 + erf(v / sqrt(2.0)))) < 1e-5 * (1 + fabs(v)));
    }
    float *u = malloc(sizeof(float) * N * D);
    for (int i = 0; i < N * D; i++) u[i] = 0.5f - (float)(i % 3);
    memcpy(y, x, sizeof(float) * N * D);
    sqz__silu_mul(p, y, u, N, D);
    for (int i = 0; i < N * D; i += 101) {
        double v = x[i];
        assert_true(fabs(y[i] - v / (1 + exp(-v)) * u[i]) < 1e-5 * (1 + fabs(v)));
    }
    memcpy(y, x, sizeof(float) * N * D);
    sqz__add(p, y, u, N, D);
    for (int i = 0; i < N * D; i += 101) assert_true(y[i] == x[i] + u[i]);
    float row[8] = {1, 2, 3, 4, 100, 100, 100, 100};
    sqz__softmax_row(row, 4, 8, 0.5f);
    double z = exp(0.5) + exp(1.0) + exp(1.5) + exp(2.0);
    assert_true(fabs(row[3] - exp(2.0) / z) < 1e-6);
    assert_true(row[4] == 0 && row[7] == 0);
    free(x);
    free(y);
    free(u);
    sqz__pool_free(p);
}

/* The vectorized exp behind softmax, SiLU and GELU: a few ulp on its range, NaN stays NaN, 0 at
 * the bottom of the range (softmax of masked-out logits). */
static void test_fast_exp(void **state) {
    (void)state;
    double worst = 0;
    for (double x = -87.0; x <= 88.0; x += 0.001) {
        double want = exp((double)(float)x), got = sqz__expf((float)x);
        worst = fmax(worst, fabs(got - want) / want);
    }
    print_message("fast exp: worst relative error %.3g on [-87, 88]\n", worst);
    assert_true(worst < 5e-7);
    assert_true(isnan(sqz__expf(NAN)));
    assert_true(sqz__expf(-1000.0f) < 1e-37f && sqz__expf(-1000.0f) >= 0);
    assert_true(isfinite(sqz__expf(1000.0f)));
    assert_true(sqz__expf(0.0f) == 1.0f);
}

static void test_sampling(void **state) {
    (void)state;
    float l[6] = {0.5f, 3.0f, 3.0f, -1.0f, 2.9f, 0.0f};
    uint64_t rng = 1;
    sqz_sample_opts g = {0};
    assert_int_equal(sqz_sample(l, 6, &g, &rng), 1); /* lowest id of the tie */
    assert_int_equal(sqz_sample(l, 6, NULL, &rng), 1);
    /* top-p 0.5 keeps ids 1 and 2 only (each ~0.35 of the mass) */
    sqz_sample_opts t = {1.0f, 0.5f, 42};
    int seen[6] = {0};
    uint64_t r2 = 42;
    for (int k = 0; k < 400; k++) {
        float c[6];
        memcpy(c, l, sizeof c);
        seen[sqz_sample(c, 6, &t, &r2)]++;
    }
    assert_int_equal(seen[0] + seen[3] + seen[4] + seen[5], 0);
    assert_true(seen[1] > 100 && seen[2] > 100);
    /* without top-p every id can come up; same seed, same draws */
    sqz_sample_opts t2 = {1.0f, 1.0f, 7};
    uint64_t ra = 7, rb = 7;
    for (int k = 0; k < 50; k++) {
        float c1[6], c2[6];
        memcpy(c1, l, sizeof c1);
        memcpy(c2, l, sizeof c2);
        assert_int_equal(sqz_sample(c1, 6, &t2, &ra), sqz_sample(c2, 6, &t2, &rb));
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pool_covers_once),
        cmocka_unit_test(test_pool_many_small_jobs),
        cmocka_unit_test(test_rope_layouts_agree),
        cmocka_unit_test(test_norms_and_activations),
        cmocka_unit_test(test_fast_exp),
        cmocka_unit_test(test_sampling),
    };
    return sqz_test_run(tests, NULL, NULL);
}

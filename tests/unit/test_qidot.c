/* tests/unit/test_qidot.c - the integer products of kernels/cpu/qidot.h:
 *   - the activation quantizers against their rules (Q8_0/Q8_1: d = fp16(amax / 127), codes
 *     within half a step; Q8_1's f32 sum; Q8_K: the largest magnitude maps to -127, block sums;
 *     a NaN block gives NaN; F16/BF16 rounding); the AVX-512 quantizers write their bytes;
 *   - every scalar kernel against the double dot product of core's dequantized weights and the
 *     dequantized activations (within 1e-5 of sum |w x|): the reference is tied to the formats;
 *   - every instruction set's kernel this CPU runs against the scalar one: bit for bit with unit
 *     scales (the result is then a sum of integers below 2^24, exact in any order: the integer
 *     sums are the same bits), within 1e-5 of sum |w x| with real scales; on random blocks and on
 *     real stories260K weights quantized to every type sqz writes;
 *   - the 4- and 8-token kernels (AVX-512 VNNI) against the scalar one on each of their rows, as above;
 *   - the panel GEMMs (AVX-512 VNNI, AVX2) against the scalar one on every token and row, as above,
 *     and through sqz__qmatmul; the AVX2 one at the saturation bounds and against the VNNI one's bits;
 *   - sqz__qmatmul with SQZ_ACTIVATIONS_Q8 (1, 5 and 9 tokens, 1 and 2 threads) equals the
 *     kernel applied row by row (each group of 4 tokens: the 4-token kernel where there is one);
 *     F16 weights take rounded inputs.
 * The NEON variants run under qemu (tests/cli/test_qdot_aarch64.sh). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/dequant.h"
#include "core/internal.h"
#include "kernels/cpu/qidot.h"
#include "real_weights.h"
#include "test_util.h"

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint32_t rnd(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 16);
}
static float rndf(void) { return (float)(rnd() & 0xFFFFFF) / 16777216.0f * 2.0f - 1.0f; } /* [-1, 1) */

static const sqz_dtype kTypes[] = {SQZ_DTYPE_Q8_0, SQZ_DTYPE_Q4_0, SQZ_DTYPE_Q4_1,  SQZ_DTYPE_Q5_0, SQZ_DTYPE_Q5_1,
                                   SQZ_DTYPE_IQ4_NL, SQZ_DTYPE_Q2_K, SQZ_DTYPE_Q3_K, SQZ_DTYPE_Q4_K, SQZ_DTYPE_Q5_K,
                                   SQZ_DTYPE_Q6_K, SQZ_DTYPE_IQ4_XS, SQZ_DTYPE_IQ3_S, SQZ_DTYPE_MXFP4};
#define N_TYPES (sizeof kTypes / sizeof kTypes[0])

/* ---- the quantizers ---------------------------------------------------------------------- */

static void test_quantize_q8_0_q8_1(void **state) {
    (void)state;
    float x[64];
    for (int i = 0; i < 64; i++) x[i] = 3.0f * rndf();
    x[40] = 0; /* block 1: with an exact tie to check half-to-even */
    sqz__aq8_0 a[2];
    sqz__aq8_1 b[2];
    sqz__aq_quantize(SQZ__AQ_Q8_0, x, a, 64);
    sqz__aq_quantize(SQZ__AQ_Q8_1, x, b, 64);
    for (int blk = 0; blk < 2; blk++) {
        float amax = 0;
        for (int j = 0; j < 32; j++) amax = fmaxf(amax, fabsf(x[32 * blk + j]));
        assert_true(a[blk].d == sqz_fp16_to_fp32(sqz_fp32_to_fp16(amax / 127.0f)));
        int32_t sum = 0;
        for (int j = 0; j < 32; j++) {
            const float step = amax / 127.0f, v = x[32 * blk + j];
            assert_true(fabsf(v - step * (float)a[blk].qs[j]) <= 0.5001f * step);
            assert_int_equal(a[blk].qs[j], b[blk].qs[j]);
            sum += a[blk].qs[j];
        }
        assert_true(b[blk].d == a[blk].d);
        assert_true(b[blk].s == (amax / 127.0f) * (float)sum); /* f32, before the fp16 rounding of d */
    }
    float t[32] = {127.0f, 0.5f, 1.5f, -2.5f}; /* id = 1: halves go to even */
    sqz__aq_quantize(SQZ__AQ_Q8_0, t, a, 32);
    assert_int_equal(a[0].qs[0], 127);
    assert_int_equal(a[0].qs[1], 0);
    assert_int_equal(a[0].qs[2], 2);
    assert_int_equal(a[0].qs[3], -2);
    t[5] = NAN;
    sqz__aq_quantize(SQZ__AQ_Q8_0, t, a, 32);
    assert_true(isnan(a[0].d));
}

static void test_quantize_q8_K(void **state) {
    (void)state;
    float x[512];
    for (int i = 0; i < 512; i++) x[i] = rndf();
    x[77] = 2.0f;                       /* block 0: the largest is positive */
    x[256 + 3] = -5.0f;                 /* block 1: negative */
    sqz__aq8_K a[2];
    sqz__aq_quantize(SQZ__AQ_Q8_K, x, a, 512);
    assert_int_equal(a[0].qs[77], -127);
    assert_int_equal(a[1].qs[3], -127);
    assert_true(a[0].d == 1.0f / (-127.0f / 2.0f));
    for (int b = 0; b < 2; b++) {
        for (int g = 0; g < 16; g++) {
            int s = 0;
            for (int j = 0; j < 16; j++) s += a[b].qs[16 * g + j];
            assert_int_equal(a[b].bsums[g], s);
        }
        for (int j = 0; j < 256; j++) assert_true(fabsf(x[256 * b + j] - a[b].d * (float)a[b].qs[j]) <= 0.5001f * fabsf(a[b].d));
    }
    float z[256] = {0};
    sqz__aq_quantize(SQZ__AQ_Q8_K, z, a, 256);
    assert_true(a[0].d == 0.0f);
    float h[4] = {1.0f / 3.0f, 70000.0f, -1e-8f, 3.0f}, r[4];
    sqz__aq_quantize(SQZ__AQ_F16, h, r, 4);
    for (int i = 0; i < 4; i++) assert_true(r[i] == sqz_fp16_to_fp32(sqz_fp32_to_fp16(h[i])));
    sqz__aq_quantize(SQZ__AQ_BF16, h, r, 4);
    for (int i = 0; i < 4; i++) assert_true(r[i] == sqz_bf16_to_fp32(sqz_fp32_to_bf16(h[i])));
}

/* The quantizer of every instruction set this CPU runs (sqz__qmm_aq_quantizer: AVX-512's,
 * AVX2's) writes the reference's bytes: rows of random values with exact ties (x.5 steps), the largest magnitude repeated and of either
 * sign, all-zero and tiny blocks, a NaN, an infinity, huge values. */
static void test_quantize_fast(void **state) {
    (void)state;
    enum { K = 1024 };
    static float x[K];
    static uint8_t a[K * sizeof(float)], b[K * sizeof(float)]; /* the largest row: F16/BF16 rows are f32 */
    const sqz__aq_kind kinds[] = {SQZ__AQ_Q8_0, SQZ__AQ_Q8_1, SQZ__AQ_Q8_K, SQZ__AQ_F16, SQZ__AQ_BF16};
    int n_fast = 0;
    sqz__aq_quantize_fn fast[SQZ__ISA_COUNT];
    for (int isa = 0; isa < SQZ__ISA_COUNT; isa++)
        if (sqz__qmm_isa_runs((sqz__qmm_isa)isa)) fast[n_fast++] = sqz__qmm_aq_quantizer((sqz__qmm_isa)isa);
    if (SQZ__QMM_X86 && sqz__qmm_isa_runs(SQZ__ISA_AVX2)) /* aquant_avx2.c, not the reference */
        assert_true(sqz__qmm_aq_quantizer(SQZ__ISA_AVX2) != sqz__aq_quantize);
    for (int trial = 0; trial < 200; trial++) {
        for (int i = 0; i < K; i++) x[i] = trial % 3 == 0 ? (float)((int)(rnd() % 509) - 254) * 0.5f : rndf();
        const int t = trial % 10;
        if (t == 1) x[5] = x[17] = -3.0f, x[300] = 3.0f;              /* a tie for the largest magnitude */
        if (t == 2) memset(x + 256, 0, 256 * sizeof(float));           /* an all-zero block */
        if (t == 3) for (int i = 512; i < 768; i++) x[i] = 1e-39f * (float)(i % 7); /* subnormal */
        if (t == 4) x[700] = NAN;
        if (t == 5) x[40] = -INFINITY;
        if (t == 6) for (int i = 0; i < K; i++) x[i] *= 1e30f;
        for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
            const size_t n = sqz__aq_row_bytes(kinds[k], K);
            assert_true(n <= sizeof a);
            memset(a, 0xAB, sizeof a);
            sqz__aq_quantize(kinds[k], x, a, K);
            for (int f = 0; f < n_fast; f++) {
                memset(b, 0xAB, sizeof b);
                fast[f](kinds[k], x, b, K);
                if (memcmp(a, b, n) != 0) fail_msg("trial %d kind %d: fast quantizer %d differs", trial, (int)kinds[k], f);
            }
        }
    }
}

/* ---- the kernels ---------------------------------------------------------------------- */

/* The activation row's values as floats (its d times its codes). */
static void aq_values(sqz__aq_kind kind, const void *xq, int64_t k, float *out) {
    for (int64_t i = 0; i < k; i++) {
        if (kind == SQZ__AQ_Q8_0) out[i] = ((const sqz__aq8_0 *)xq)[i / 32].d * ((const sqz__aq8_0 *)xq)[i / 32].qs[i % 32];
        if (kind == SQZ__AQ_Q8_1) out[i] = ((const sqz__aq8_1 *)xq)[i / 32].d * ((const sqz__aq8_1 *)xq)[i / 32].qs[i % 32];
        if (kind == SQZ__AQ_Q8_K) out[i] = ((const sqz__aq8_K *)xq)[i / 256].d * ((const sqz__aq8_K *)xq)[i / 256].qs[i % 256];
    }
}

/* The exact dot product in double of the dequantized weights and activations, and sum |w x|.
 * Q4_1/Q5_1's minimum meets the activations' f32 sum s (d before rounding), as the kernels. */
static double exact_dot(sqz_dtype t, const void *row, const void *xq, int64_t k, double *mag) {
    float *w = malloc((size_t)k * sizeof(float)), *x = malloc((size_t)k * sizeof(float));
    assert_non_null(w);
    assert_non_null(x);
    const sqz__aq_kind kind = sqz__aq_kind_of(t);
    sqz_dtype_info(t)->to_f32(row, w, k);
    aq_values(kind, xq, k, x);
    double sum = 0;
    *mag = 0;
    const bool minimum = t == SQZ_DTYPE_Q4_1 || t == SQZ_DTYPE_Q5_1;
    for (int64_t b = 0; b < k / 32; b++) {
        const uint8_t *blk = (const uint8_t *)row + (size_t)b * sqz_dtype_info(t)->type_size;
        uint16_t mh = 0;
        if (minimum) memcpy(&mh, blk + 2, 2);
        const double m = minimum ? (double)sqz_fp16_to_fp32(mh) : 0.0;
        for (int j = 0; j < 32; j++) {
            const double p = ((double)w[32 * b + j] - m) * x[32 * b + j];
            sum += p;
            *mag += fabs(p);
        }
        if (minimum) {
            const double s = ((const sqz__aq8_1 *)xq)[b].s;
            sum += m * s;
            *mag += fabs(m * s);
        }
    }
    free(w);
    free(x);
    return sum;
}

/* Random blocks of t (n_blocks): random bytes with finite fp16 scales; unit: every fp16
 * field (scales, minimums) 1.0 and codes bounded by `lim` where the type allows. */
static uint8_t *random_row(sqz_dtype t, int64_t k, bool unit) {
    const sqz_dtype_traits *tr = sqz_dtype_info(t);
    const size_t nb = (size_t)(k / tr->block_size), bytes = nb * tr->type_size;
    uint8_t *w = malloc(bytes);
    assert_non_null(w);
    for (size_t i = 0; i < bytes; i++) w[i] = (uint8_t)rnd();
    for (size_t b = 0; b < nb; b++) { /* the fp16 fields: d (and m/dmin) first, Q2_K/Q3_K/Q6_K last */
        uint8_t *blk = w + b * tr->type_size;
        const uint16_t d = unit ? 0x3C00 : sqz_fp32_to_fp16(0.001f + 0.05f * fabsf(rndf()));
        const uint16_t m = unit ? 0x3C00 : sqz_fp32_to_fp16(0.02f * rndf());
        switch (t) {
        case SQZ_DTYPE_Q2_K: memcpy(blk + tr->type_size - 4, &d, 2); memcpy(blk + tr->type_size - 2, &m, 2); break;
        case SQZ_DTYPE_Q3_K: case SQZ_DTYPE_Q6_K: memcpy(blk + tr->type_size - 2, &d, 2); break;
        case SQZ_DTYPE_MXFP4: blk[0] = (uint8_t)(unit ? 128 : 118 + rnd() % 8); break; /* E8M0: 2^(e-128) */
        case SQZ_DTYPE_Q4_1: case SQZ_DTYPE_Q5_1: case SQZ_DTYPE_Q4_K: case SQZ_DTYPE_Q5_K:
            memcpy(blk, &d, 2);
            memcpy(blk + 2, &m, 2);
            break;
        default: memcpy(blk, &d, 2);
        }
    }
    return w;
}

/* An activation row of k values quantized for t; unit: every scale 1 and small codes, so that
 * each result is an integer sum below 2^24. */
static void *activation_row(sqz_dtype t, int64_t k, bool unit) {
    const sqz__aq_kind kind = sqz__aq_kind_of(t);
    float *x = malloc((size_t)k * sizeof(float));
    void *xq = malloc(sqz__aq_row_bytes(kind, k));
    assert_non_null(x);
    assert_non_null(xq);
    for (int64_t i = 0; i < k; i++) x[i] = (rnd() % 16 == 0 ? 8.0f : 1.0f) * rndf();
    sqz__aq_quantize(kind, x, xq, k);
    for (int64_t b = 0; unit && b < k / 32; b++) {
        int8_t *qs = kind == SQZ__AQ_Q8_K ? ((sqz__aq8_K *)xq)[b / 8].qs + 32 * (b % 8)
                     : kind == SQZ__AQ_Q8_0 ? ((sqz__aq8_0 *)xq)[b].qs : ((sqz__aq8_1 *)xq)[b].qs;
        int32_t s = 0;
        for (int j = 0; j < 32; j++) s += (qs[j] = (int8_t)(qs[j] / 8)); /* |q| <= 15 */
        if (kind == SQZ__AQ_Q8_0) ((sqz__aq8_0 *)xq)[b].d = 1.0f;
        if (kind == SQZ__AQ_Q8_1) { ((sqz__aq8_1 *)xq)[b].d = 1.0f; ((sqz__aq8_1 *)xq)[b].s = (float)s; }
    }
    for (int64_t b = 0; unit && kind == SQZ__AQ_Q8_K && b < k / 256; b++) {
        sqz__aq8_K *a = (sqz__aq8_K *)xq + b;
        a->d = 1.0f;
        for (int g = 0; g < 16; g++) {
            int s = 0;
            for (int j = 0; j < 16; j++) s += a->qs[16 * g + j];
            a->bsums[g] = (int16_t)s;
        }
    }
    free(x);
    return xq;
}

/* Every variant this CPU runs against the scalar kernel on one row; the scalar one against the
 * exact dot product. */
static void check_row(sqz_dtype t, const void *row, const void *xq, int64_t k, bool unit) {
    const float ref = sqz__qmm_idot(t, SQZ__ISA_SCALAR)(row, xq, k);
    double mag;
    const double exact = exact_dot(t, row, xq, k, &mag);
    if (!(fabs(ref - exact) <= 1e-5 * mag + 1e-30))
        fail_msg("%s k %lld: scalar %.9g, exact %.9g (sum |w x| %g)", sqz_dtype_name(t), (long long)k, ref, exact, mag);
    for (int isa = 1; isa < SQZ__ISA_COUNT; isa++) {
        if (!sqz__qmm_isa_runs((sqz__qmm_isa)isa)) continue;
        const float got = sqz__qmm_idot(t, (sqz__qmm_isa)isa)(row, xq, k);
        const bool ok = unit && mag < 16777216.0 ? got == ref : fabs(got - ref) <= 1e-5 * mag + 1e-30;
        if (!ok)
            fail_msg("%s %s k %lld %s: %.9g vs scalar %.9g (sum |w x| %g)", sqz_dtype_name(t),
                     sqz__qmm_idot_name(t, (sqz__qmm_isa)isa), (long long)k, unit ? "unit scales" : "real scales",
                     got, ref, mag);
    }
}

static void test_kernels_random(void **state) {
    (void)state;
    static const int64_t lens[] = {256, 512, 768, 2304, 4096 + 256, 10240};
    for (size_t ti = 0; ti < N_TYPES; ti++) {
        const sqz_dtype t = kTypes[ti];
        for (int64_t k = 32; k <= 256; k += 32) { /* a few 32-blocks, the tails of the 8-block loops */
            if (k % sqz_dtype_info(t)->block_size) continue;
            for (int unit = 0; unit < 2; unit++) {
                uint8_t *w = random_row(t, k, unit);
                void *xq = activation_row(t, k, unit);
                check_row(t, w, xq, k, unit);
                free(w);
                free(xq);
            }
        }
        for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
            for (int unit = 0; unit < 2; unit++) {
                uint8_t *w = random_row(t, lens[li], unit);
                void *xq = activation_row(t, lens[li], unit);
                check_row(t, w, xq, lens[li], unit);
                free(w);
                free(xq);
            }
        }
    }
}

/* The 4-token kernels (sqz__qmm_idot4) against the scalar kernel on each of their 4 activation
 * rows (contiguous, stride sqz__aq_row_bytes): bit for bit with unit scales, within 1e-5 of
 * sum |w x| with real ones; k 288 (9 blocks of 32) and 4352 take the 32-block kernels' tails. */
/* The several-token kernels (4 and 8 tokens: AVX-512 VNNI) against the scalar kernel on each row. */
static void check_wide(sqz_dtype t, sqz__idot4_fn f, int width, int64_t k, int unit) {
    const sqz__aq_kind kind = sqz__aq_kind_of(t);
    const size_t rb = sqz__aq_row_bytes(kind, k);
    uint8_t *w = random_row(t, k, unit), *xq = malloc((size_t)width * rb);
    assert_non_null(xq);
    for (int r = 0; r < width; r++) {
        void *x = activation_row(t, k, unit);
        memcpy(xq + r * rb, x, rb);
        free(x);
    }
    float out[8];
    f(w, xq, rb, k, out);
    for (int r = 0; r < width; r++) {
        const float ref = sqz__qmm_idot(t, SQZ__ISA_SCALAR)(w, xq + r * rb, k);
        double mag;
        exact_dot(t, w, xq + r * rb, k, &mag);
        const bool ok = unit && mag < 16777216.0 ? out[r] == ref : fabs(out[r] - ref) <= 1e-5 * mag + 1e-30;
        if (!ok)
            fail_msg("%s x%d k %lld %s row %d: %.9g vs scalar %.9g (sum |w x| %g)", sqz_dtype_name(t), width,
                     (long long)k, unit ? "unit scales" : "real scales", r, out[r], ref, mag);
    }
    free(w);
    free(xq);
}

static void test_kernels_x4(void **state) {
    (void)state;
    if (!sqz__qmm_isa_runs(SQZ__ISA_AVX512)) skip();
    static const int64_t lens[] = {256, 288, 512, 768, 2304, 4096 + 256, 10240};
    int n8 = 0;
    for (size_t ti = 0; ti < N_TYPES; ti++) {
        const sqz_dtype t = kTypes[ti];
        const sqz__idot4_fn f4 = sqz__qmm_idot4(t, SQZ__ISA_AVX512), f8 = sqz__qmm_idot8(t, SQZ__ISA_AVX512);
        n8 += f8 != NULL;
        for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
            const int64_t k = lens[li];
            if (k % sqz_dtype_info(t)->block_size) continue;
            for (int unit = 0; unit < 2; unit++) {
                if (f4) check_wide(t, f4, 4, k, unit);
                if (f8) check_wide(t, f8, 8, k, unit);
            }
        }
    }
    if (sqz__qmm_idot8(SQZ_DTYPE_Q4_K, SQZ__ISA_AVX512)) assert_int_equal(n8, 7); /* the seven K and IQ types */
}

/* The panel GEMM of isa (qidot_gemm_vnni.c, qidot_gemm_avx2.c) against the scalar kernel on every
 * token and row: bit for bit with unit scales (exact), within 1e-5 of sum |w x| otherwise; xs
 * (the types against Q8_0) equal to -128 times each block's sum; the scratch not written past
 * scratch_bytes(k). */
static void qgemm_compare(sqz__qmm_isa isa, sqz_dtype t, int64_t m, int64_t n, int64_t k, const uint8_t *w,
                          const uint8_t *xq, const float *bias, bool exact) {
    const sqz__qgemm_impl *G = sqz__qmm_qgemm_impl(t, isa);
    assert_non_null(G);
    const sqz__aq_kind kind = sqz__aq_kind_of(t);
    const size_t ab = sqz__aq_row_bytes(kind, k),
                 rb = (size_t)(k / sqz_dtype_info(t)->block_size) * sqz_dtype_info(t)->type_size;
    const size_t sb = G->scratch_bytes(k);
    float *y = malloc((size_t)(m * n) * sizeof(float));
    int32_t *xs = malloc((size_t)(m * (k / 32)) * sizeof(int32_t));
    uint8_t *scr = malloc(sb + 64);
    assert_true(y && xs && scr);
    memset(scr + sb, 0xA5, 64);
    if (kind == SQZ__AQ_Q8_0) {
        G->xsums(xq, ab, 0, m, k, xs);
        for (int64_t i = 0; i < m; i++)
            for (int64_t b = 0; b < k / 32; b++) {
                int32_t sum = 0;
                for (int j = 0; j < 32; j++) sum += ((const sqz__aq8_0 *)(const void *)(xq + i * ab))[b].qs[j];
                assert_int_equal(xs[i * (k / 32) + b], -128 * sum);
            }
    }
    const sqz__qgemm_args a = {.w = w, .row_bytes = rb, .m = m, .n = n, .k = k, .xq = xq, .xq_bytes = ab,
                               .xs = kind == SQZ__AQ_Q8_0 ? xs : NULL, .y = y, .bias = bias};
    G->rows(t, &a, 0, n, scr);
    for (int i = 0; i < 64; i++)
        if (scr[sb + i] != 0xA5) fail_msg("qgemm %s %s k %lld: scratch written past its size", G->name, sqz_dtype_name(t), (long long)k);
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            const float ref = sqz__qmm_idot(t, SQZ__ISA_SCALAR)(w + j * rb, xq + i * ab, k) + (bias ? bias[j] : 0.0f);
            double mag;
            exact_dot(t, w + j * rb, xq + i * ab, k, &mag);
            const float got = y[i * n + j];
            const bool ok = exact && mag < 16777216.0 ? got == ref : fabs(got - ref) <= 1e-5 * (mag + 1.0);
            if (!ok)
                fail_msg("qgemm %s %s m %lld n %lld k %lld %s y[%lld][%lld] %.9g vs scalar %.9g (sum |w x| %g)", G->name,
                         sqz_dtype_name(t), (long long)m, (long long)n, (long long)k, exact ? "unit" : "real",
                         (long long)i, (long long)j, got, ref, mag);
        }
    free(y), free(xs), free(scr);
}

/* Random weights and activations (unit: unit scales, small codes), bias, through qgemm_compare:
 * panels cut short (n not a multiple of the panel), token counts taking the several-token paths
 * and their tails. */
static void check_qgemm(sqz__qmm_isa isa, sqz_dtype t, int64_t m, int64_t n, int64_t k, int unit) {
    const size_t ab = sqz__aq_row_bytes(sqz__aq_kind_of(t), k);
    uint8_t *w = random_row(t, n * k, unit), *xq = malloc((size_t)m * ab);
    float *bias = malloc((size_t)n * sizeof(float));
    assert_true(xq && bias);
    for (int64_t i = 0; i < m; i++) {
        void *x = activation_row(t, k, unit);
        memcpy(xq + i * ab, x, ab);
        free(x);
    }
    for (int64_t j = 0; j < n; j++) bias[j] = unit ? (float)(j % 5) : 0.25f * rndf();
    qgemm_compare(isa, t, m, n, k, w, xq, bias, unit);
    free(w), free(xq), free(bias);
}

/* Through sqz__qmatmul: 40 tokens, 2 threads, against the one-row kernel, for the types isa has a
 * panel GEMM of. */
static void qgemm_qmatmul(sqz__qmm_isa isa) {
    const int64_t m = 40, n = 70, k = 768;
    float *x = malloc(m * k * sizeof(float)), *y = malloc(m * n * sizeof(float));
    assert_true(x && y);
    for (int64_t i = 0; i < m * k; i++) x[i] = rndf();
    sqz__pool *pool = NULL;
    assert_int_equal(sqz__pool_new(2, &pool), SQZ_OK);
    for (size_t ti = 0; ti < N_TYPES; ti++) {
        const sqz_dtype t = kTypes[ti];
        if (!sqz__qmm_qgemm(t, isa)) continue;
        const sqz__aq_kind kind = sqz__aq_kind_of(t);
        const size_t ab = sqz__aq_row_bytes(kind, k),
                     rb = (size_t)(k / sqz_dtype_info(t)->block_size) * sqz_dtype_info(t)->type_size;
        uint8_t *w = random_row(t, n * k, false), *xq = malloc(ab);
        assert_non_null(xq);
        sqz_matmul_args a = {.m = m, .n = n, .k = k, .x = x, .w = w, .w_dtype = t, .y = y, .acts = SQZ_ACTIVATIONS_Q8};
        assert_int_equal(sqz__qmatmul(pool, isa, &a), SQZ_OK);
        for (int64_t i = 0; i < m; i++) {
            sqz__aq_quantize(kind, x + i * k, xq, k);
            for (int64_t j = 0; j < n; j++) {
                double mag;
                exact_dot(t, w + j * rb, xq, k, &mag);
                const float want = sqz__qmm_idot(t, SQZ__ISA_SCALAR)(w + j * rb, xq, k);
                if (!(fabs(y[i * n + j] - want) <= 1e-5 * (mag + 1.0)))
                    fail_msg("qmatmul isa %d %s y[%lld][%lld] %.9g vs scalar %.9g", (int)isa, sqz_dtype_name(t),
                             (long long)i, (long long)j, y[i * n + j], want);
            }
        }
        free(w), free(xq);
    }
    sqz__pool_free(pool);
    free(x), free(y);
}

static const int64_t kQgemmShapes[][3] = {{16, 16, 32}, {21, 37, 288}, {37, 5, 896}, {13, 48, 4352}, {1, 17, 64},
                                          {19, 33, 256}, {9, 16, 512}, {24, 20, 2304}};

static void test_qgemm(void **state) {
    (void)state;
    /* the VNNI form only: AVX-512 without VNNI takes the AVX2 one (test_qgemm_avx2) */
    const sqz__qgemm_impl *vnni = sqz__qmm_qgemm_impl(SQZ_DTYPE_Q4_0, SQZ__ISA_AVX512);
    if (!sqz__qmm_isa_runs(SQZ__ISA_AVX512) || !vnni || strcmp(vnni->name, "avx512vnni") != 0) skip();
    static const int64_t (*shapes)[3] = kQgemmShapes;
    const size_t n_shapes = sizeof kQgemmShapes / sizeof kQgemmShapes[0];
    int types = 0;
    for (size_t ti = 0; ti < N_TYPES; ti++) {
        const sqz_dtype t = kTypes[ti];
        if (!sqz__qmm_qgemm(t, SQZ__ISA_AVX512)) continue;
        types++;
        for (size_t si = 0; si < n_shapes; si++)
            for (int unit = 0; unit < 2; unit++)
                if (shapes[si][2] % sqz_dtype_info(t)->block_size == 0)
                    check_qgemm(SQZ__ISA_AVX512, t, shapes[si][0], shapes[si][1], shapes[si][2], unit);
    }
    assert_int_equal(types, 14); /* Q8_0, Q4_0, Q5_0, IQ4_NL, MXFP4, Q4_1, Q5_1, Q2_K .. Q6_K, IQ4_XS, IQ3_S */
    qgemm_qmatmul(SQZ__ISA_AVX512);
}

/* The fp16 fields of a block of t (as random_row places them) set to 1.0. */
static void unit_fields(sqz_dtype t, uint8_t *blk) {
    const size_t ts = sqz_dtype_info(t)->type_size;
    const uint16_t one = 0x3C00;
    switch (t) {
    case SQZ_DTYPE_Q6_K: case SQZ_DTYPE_Q3_K: memcpy(blk + ts - 2, &one, 2); break;
    case SQZ_DTYPE_Q2_K: /* scales and qs, then d and dmin */
        memcpy(blk + ts - 4, &one, 2);
        memcpy(blk + ts - 2, &one, 2);
        break;
    case SQZ_DTYPE_MXFP4: blk[0] = 128; break; /* e: 2^0 */
    case SQZ_DTYPE_Q4_1: case SQZ_DTYPE_Q5_1: case SQZ_DTYPE_Q4_K: case SQZ_DTYPE_Q5_K:
        memcpy(blk, &one, 2);
        memcpy(blk + 2, &one, 2);
        break;
    default: memcpy(blk, &one, 2);
    }
}

/* The saturation bounds of the AVX2 form: every weight byte one pattern (0xFF: the largest codes
 * of Q4_*, Q5_*, Q6_K, Q4_K's largest scales and minimums; 0x7F: Q6_K's largest scale with its
 * codes of 63, Q8_0 127; 0x80: Q8_0 -128, Q6_K scale -128; 0x00: IQ4_NL -127), unit scales, every
 * activation code +127 or -127: a saturated int16 sum would be far off. The other types: 0xFF
 * Q2_K's codes 3 with scales and minimums 15, Q3_K's codes 3 (stored 7) with scales 31, IQ4_XS's
 * 113 with scale 31, MXFP4's -12 (0x7F: -12 and 12); 0x00 Q3_K's -4 (stored 0) with scales -32,
 * IQ4_XS's -127 with scale -32; 0xFF IQ3_S's grid entry 511 (15, 15, 1, 1), all negative; 0x7F / 0x80 mixed. */
static void check_qgemm_extreme(sqz__qmm_isa isa, sqz_dtype t) {
    static const uint8_t patterns[] = {0xFF, 0x7F, 0x80, 0x00};
    const int64_t m = 9, n = 11, k = 512;
    const sqz__aq_kind kind = sqz__aq_kind_of(t);
    const sqz_dtype_traits *tr = sqz_dtype_info(t);
    const size_t ab = sqz__aq_row_bytes(kind, k), rb = (size_t)(k / tr->block_size) * tr->type_size;
    uint8_t *w = malloc(rb * n), *xq = calloc((size_t)m, ab);
    assert_true(w && xq);
    for (size_t pi = 0; pi < sizeof patterns; pi++) {
        memset(w, patterns[pi], rb * n);
        for (size_t b = 0; b < (size_t)n * (size_t)(k / tr->block_size); b++) unit_fields(t, w + b * tr->type_size);
        for (int64_t i = 0; i < m; i++) { /* token i: codes +127, -127, or alternating by element (i % 3) */
            for (int64_t e = 0; e < k; e++) {
                const int8_t q = (int8_t)(i % 3 == 0 ? 127 : i % 3 == 1 ? -127 : e % 2 ? 127 : -127);
                if (kind == SQZ__AQ_Q8_K) {
                    sqz__aq8_K *x = (sqz__aq8_K *)(void *)(xq + i * ab) + e / 256;
                    x->d = 1.0f;
                    x->qs[e % 256] = q;
                    x->bsums[(e % 256) / 16] = (int16_t)((e % 16 ? x->bsums[(e % 256) / 16] : 0) + q);
                } else if (kind == SQZ__AQ_Q8_0) {
                    sqz__aq8_0 *x = (sqz__aq8_0 *)(void *)(xq + i * ab) + e / 32;
                    x->d = 1.0f;
                    x->qs[e % 32] = q;
                } else {
                    sqz__aq8_1 *x = (sqz__aq8_1 *)(void *)(xq + i * ab) + e / 32;
                    x->d = 1.0f;
                    x->qs[e % 32] = q;
                    x->s = (e % 32 ? x->s : 0.0f) + (float)q;
                }
            }
        }
        qgemm_compare(isa, t, m, n, k, w, xq, NULL, false);
    }
    free(w), free(xq);
}

/* Where this CPU runs the VNNI form too: the AVX2 form's outputs are its bits (the same integer
 * sums, the same f32 operations per block in the same order), real scales and a bias. */
static void check_qgemm_same(sqz_dtype t, int64_t m, int64_t n, int64_t k) {
    const sqz__qgemm_impl *V = sqz__qmm_qgemm_impl(t, SQZ__ISA_AVX512), *A = sqz__qmm_qgemm_impl(t, SQZ__ISA_AVX2);
    if (!V || !A || V == A) return;
    const sqz__aq_kind kind = sqz__aq_kind_of(t);
    const size_t ab = sqz__aq_row_bytes(kind, k),
                 rb = (size_t)(k / sqz_dtype_info(t)->block_size) * sqz_dtype_info(t)->type_size;
    uint8_t *w = random_row(t, n * k, false), *xq = malloc((size_t)m * ab);
    float *y[2] = {malloc((size_t)(m * n) * sizeof(float)), malloc((size_t)(m * n) * sizeof(float))};
    float *bias = malloc((size_t)n * sizeof(float));
    int32_t *xs = malloc((size_t)(m * (k / 32)) * sizeof(int32_t));
    void *scr = malloc(V->scratch_bytes(k) > A->scratch_bytes(k) ? V->scratch_bytes(k) : A->scratch_bytes(k));
    assert_true(xq && y[0] && y[1] && bias && xs && scr);
    for (int64_t i = 0; i < m; i++) {
        void *x = activation_row(t, k, false);
        memcpy(xq + i * ab, x, ab);
        free(x);
    }
    for (int64_t j = 0; j < n; j++) bias[j] = 0.25f * rndf();
    for (int v = 0; v < 2; v++) {
        const sqz__qgemm_impl *G = v ? A : V;
        if (kind == SQZ__AQ_Q8_0) G->xsums(xq, ab, 0, m, k, xs);
        const sqz__qgemm_args a = {.w = w, .row_bytes = rb, .m = m, .n = n, .k = k, .xq = xq, .xq_bytes = ab,
                                   .xs = kind == SQZ__AQ_Q8_0 ? xs : NULL, .y = y[v], .bias = bias};
        G->rows(t, &a, 0, n, scr);
    }
    if (memcmp(y[0], y[1], (size_t)(m * n) * sizeof(float)) != 0)
        fail_msg("qgemm %s m %lld n %lld k %lld: avx2 differs from avx512vnni", sqz_dtype_name(t), (long long)m,
                 (long long)n, (long long)k);
    free(w), free(xq), free(y[0]), free(y[1]), free(bias), free(xs), free(scr);
}

/* The AVX2 form (qidot_gemm_avx2.c), on every CPU with AVX2: as test_qgemm, plus two token tails
 * (2 and 3 tokens past the groups of 4), the saturation bounds, and the VNNI form's bits. */
static void test_qgemm_avx2(void **state) {
    (void)state;
    if (!sqz__qmm_isa_runs(SQZ__ISA_AVX2) || !sqz__qmm_qgemm(SQZ_DTYPE_Q4_0, SQZ__ISA_AVX2)) skip();
    static const int64_t more[][3] = {{18, 8, 256}, {23, 9, 544}, {2, 24, 768}};
    const size_t n_shapes = sizeof kQgemmShapes / sizeof kQgemmShapes[0], n_more = sizeof more / sizeof more[0];
    int types = 0;
    for (size_t ti = 0; ti < N_TYPES; ti++) {
        const sqz_dtype t = kTypes[ti];
        if (!sqz__qmm_qgemm(t, SQZ__ISA_AVX2)) continue;
        types++;
        for (size_t si = 0; si < n_shapes + n_more; si++) {
            const int64_t *sh = si < n_shapes ? kQgemmShapes[si] : more[si - n_shapes];
            for (int unit = 0; unit < 2; unit++)
                if (sh[2] % sqz_dtype_info(t)->block_size == 0) check_qgemm(SQZ__ISA_AVX2, t, sh[0], sh[1], sh[2], unit);
        }
        check_qgemm_extreme(SQZ__ISA_AVX2, t);
        check_qgemm_same(t, 21, 37, 2304);
    }
    assert_int_equal(types, 14); /* Q8_0, Q4_0, Q5_0, IQ4_NL, MXFP4, Q4_1, Q5_1, Q2_K .. Q6_K, IQ4_XS, IQ3_S */
    qgemm_qmatmul(SQZ__ISA_AVX2);
}

/* Real weights: stories260K's w1 (860 rows of 64 as 215 rows of 256) quantized to each type sqz
 * writes, against real-looking activations. */
static void test_kernels_real(void **state) {
    (void)state;
    float *all = sqz_rw_load();
    if (!all) skip();
    const float *src = all + SQZ_RW_W1;
    const int64_t k = 256, n = 215;
    for (size_t ti = 0; ti < N_TYPES; ti++) {
        const sqz_dtype t = kTypes[ti];
        const sqz_dtype_traits *tr = sqz_dtype_info(t);
        if (!tr->from_f32) continue;
        const size_t rb = (size_t)(k / tr->block_size) * tr->type_size;
        uint8_t *w = malloc(rb * (size_t)n);
        assert_non_null(w);
        tr->from_f32(src, w, n * k);
        for (int64_t r = 0; r < n; r++) {
            void *xq = activation_row(t, k, false);
            check_row(t, w + (size_t)r * rb, xq, k, false);
            free(xq);
        }
        free(w);
    }
    free(all);
}

/* sqz__qmatmul with quantized activations: each output the kernel's value for its row, on 1
 * and 2 threads and every instruction set; F16 weights see the inputs rounded to f16. */
static void test_qmatmul_q8(void **state) {
    (void)state;
    const int64_t n = 37, k = 512;
    float *x = malloc(9 * k * sizeof(float)), *y = malloc(9 * n * sizeof(float)), *wf = malloc(n * k * sizeof(float));
    assert_non_null(x);
    assert_non_null(y);
    assert_non_null(wf);
    for (int64_t i = 0; i < 9 * k; i++) x[i] = rndf();
    for (int64_t i = 0; i < n * k; i++) wf[i] = 0.1f * rndf();
    sqz__pool *pool = NULL;
    assert_int_equal(sqz__pool_new(2, &pool), SQZ_OK);
    for (size_t ti = 0; ti < N_TYPES + 1; ti++) {
        const sqz_dtype t = ti < N_TYPES ? kTypes[ti] : SQZ_DTYPE_F16;
        const sqz_dtype_traits *tr = sqz_dtype_info(t);
        const size_t rb = (size_t)(k / tr->block_size) * tr->type_size;
        uint8_t *w = ti < N_TYPES ? random_row(t, n * k, false) : malloc(rb * n);
        assert_non_null(w);
        if (t == SQZ_DTYPE_F16) tr->from_f32(wf, w, n * k);
        const sqz__aq_kind kind = sqz__aq_kind_of(t);
        const size_t ab = sqz__aq_row_bytes(kind, k);
        uint8_t *xq = malloc(ab), *x4 = malloc(4 * ab); /* one token; 4 tokens for the 4-token kernel */
        assert_non_null(xq);
        assert_non_null(x4);
        for (int isa = 0; isa < SQZ__ISA_COUNT; isa++) {
            if (!sqz__qmm_isa_runs((sqz__qmm_isa)isa)) continue;
            const sqz__idot4_fn f4 = sqz__qmm_idot4(t, (sqz__qmm_isa)isa);
            for (int64_t m = 1; m <= 9; m += 4) {
                for (int th = 0; th < 2; th++) {
                    sqz_matmul_args a = {.m = m, .n = n, .k = k, .x = x, .w = w, .w_dtype = t, .y = y,
                                         .acts = SQZ_ACTIVATIONS_Q8};
                    assert_int_equal(sqz__qmatmul(th ? pool : NULL, (sqz__qmm_isa)isa, &a), SQZ_OK);
                    for (int64_t i = 0; i < m; i++) {
                        sqz__aq_quantize(kind, x + i * k, xq, k);
                        for (int64_t j = 0; j < n; j++) {
                            float want;
                            if (t == SQZ_DTYPE_F16) { /* the rounded inputs through the float product */
                                sqz_matmul_args f = {.m = 1, .n = 1, .k = k, .x = (const float *)(const void *)xq,
                                                     .w = w + j * rb, .w_dtype = t, .y = &want};
                                assert_int_equal(sqz__qmatmul(NULL, (sqz__qmm_isa)isa, &f), SQZ_OK);
                                if (m > 1) { /* the tiled dot there: another order of the same sums */
                                    assert_true(fabsf(y[i * n + j] - want) <= 1e-5f * (1.0f + fabsf(want)) * (float)k);
                                    continue;
                                }
                            } else if (f4 && i < m / 4 * 4) { /* tokens in groups of 4 (or 8: the same sums,
                                                                 * in the same order) take the 4-token kernel */
                                float o[4];
                                for (int r = 0; r < 4; r++)
                                    sqz__aq_quantize(kind, x + (i / 4 * 4 + r) * k, x4 + r * ab, k);
                                f4(w + j * rb, x4, ab, k, o);
                                want = o[i % 4];
                            } else {
                                want = sqz__qmm_idot(t, (sqz__qmm_isa)isa)(w + j * rb, xq, k);
                            }
                            if (y[i * n + j] != want)
                                fail_msg("%s isa %d m %lld threads %d: y[%lld][%lld] %.9g, kernel %.9g", sqz_dtype_name(t),
                                         isa, (long long)m, th + 1, (long long)i, (long long)j, y[i * n + j], want);
                        }
                    }
                }
            }
        }
        free(xq);
        free(x4);
        free(w);
    }
    sqz__pool_free(pool);
    free(x);
    free(y);
    free(wf);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_quantize_q8_0_q8_1),
        cmocka_unit_test(test_quantize_q8_K),
        cmocka_unit_test(test_quantize_fast),
        cmocka_unit_test(test_kernels_random),
        cmocka_unit_test(test_kernels_x4),
        cmocka_unit_test(test_kernels_real),
        cmocka_unit_test(test_qgemm),
        cmocka_unit_test(test_qgemm_avx2),
        cmocka_unit_test(test_qmatmul_q8),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

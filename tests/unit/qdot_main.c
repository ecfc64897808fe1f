/* tests/unit/qdot_main.c - the f32 dot products of kernels/cpu/qdot.c against a double sum and,
 * where NEON is compiled in, every fused one-token kernel of kernels/cpu/qfused_neon.c against
 * the double dot product of core's scalar dequantizer's weights, as a plain program (no test
 * framework: tests/cli/test_qdot_aarch64.sh cross-builds it with qdot.c, qfused_neon.c and core's
 * dequantizers and runs it under qemu-aarch64), and every integer product of kernels/cpu/qidot_neon.c
 * against qidot_ref.c's scalar one. Prints "<isa>: ok" per dot product, "<type> neon fused: ok ..."
 * per fused kernel and "<type> neon-dot: ok ..." per integer product and exits 0, or prints the
 * first mismatch and exits 1. */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/qmatmul.h"
#if SQZ__QMM_NEON
#include "core/blocks.h"
#include "core/dequant.h"
#include "kernels/cpu/qidot.h"
#include "quant/gguf/quant_gguf.h"

#define NEON_IDOT_DECL(t) SQZ__IDOT_DECL(t, neon) /* kernels/cpu/qidot_neon.c */
SQZ__IDOT_TYPES(NEON_IDOT_DECL)
NEON_IDOT_DECL(mxfp4)
#endif

static uint64_t state = 0x9E3779B97F4A7C15ull;
static float rndf(void) {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return (float)((state >> 40) & 0xFFFFFF) / 16777216.0f * 2.0f - 1.0f;
}

static int check(const char *name, sqz__dot_fn dot) {
    enum { N = 1100 };
    static float a[N], b[N];
    for (int i = 0; i < N; i++) { a[i] = rndf(); b[i] = 4.0f * rndf(); }
    for (int n = 0; n <= N; n += (n < 80 ? 1 : 37)) {
        const int off = n % 3, len = n - off; /* unaligned starts */
        double ref = 0, mag = 0;
        for (int i = 0; i < len; i++) {
            ref += (double)a[off + i] * b[off + i];
            mag += fabs((double)a[off + i] * b[off + i]);
        }
        const float got = dot(a + off, b + off, len);
        if (!(fabs(got - ref) <= 1e-6 * mag + 1e-30)) {
            printf("%s: n = %d: %.9g, double sum %.9g\n", name, len, (double)got, ref);
            return 1;
        }
    }
    printf("%s: ok\n", name);
    return 0;
}

#if SQZ__QMM_NEON
/* A fused kernel, its type's scalar dequantizer (the reference weights), its quantizer (for real
 * weights) and where its blocks keep their fp16 scales (offsets; -1: none): random bytes there could be Inf or NaN. */
typedef struct fused_case {
    const char *name;
    sqz_dtype dtype;
    sqz__dot1_fn dot1;
    sqz__dequant_fn ref;
    void (*quant)(const float *x, void *y, int64_t n); /* quant/gguf's reference quantizer */
    int bs;          /* elements per block */
    size_t ts;       /* bytes per block */
    int f16[2];      /* offsets of the fp16 fields (d, and m or dmin) */
    sqz__idot_fn idot, idot_ref; /* the integer product against quantized activations (qidot_neon.c), its reference */
} fused_case;

#define CASE(t, T, n, f0, f1)                                                                     \
    {#t, SQZ_DTYPE_##T, sqz__qdot1_##t##_neon, sqz__dequantize_##t, sqz__quantize_##t##_ref, n,   \
     sizeof(sqz_block_##t), {f0, f1}, sqz__idot_##t##_neon, sqz__idot_##t##_ref}
#define OFF(t, f) (int)offsetof(sqz_block_##t, f)

static const fused_case fused_cases[] = {
    CASE(q8_0, Q8_0, SQZ_QK8_0, OFF(q8_0, d), -1),
    CASE(q4_0, Q4_0, SQZ_QK4_0, OFF(q4_0, d), -1),
    CASE(q4_1, Q4_1, SQZ_QK4_1, OFF(q4_1, d), OFF(q4_1, m)),
    CASE(q5_0, Q5_0, SQZ_QK5_0, OFF(q5_0, d), -1),
    CASE(q5_1, Q5_1, SQZ_QK5_1, OFF(q5_1, d), OFF(q5_1, m)),
    CASE(iq4_nl, IQ4_NL, SQZ_QK4_NL, OFF(iq4_nl, d), -1),
    CASE(q4_K, Q4_K, SQZ_QK_K, OFF(q4_K, d), OFF(q4_K, dmin)),
    CASE(q5_K, Q5_K, SQZ_QK_K, OFF(q5_K, d), OFF(q5_K, dmin)),
    CASE(q6_K, Q6_K, SQZ_QK_K, OFF(q6_K, d), -1),
    CASE(q2_K, Q2_K, SQZ_QK_K, OFF(q2_K, d), OFF(q2_K, dmin)),
    CASE(q3_K, Q3_K, SQZ_QK_K, OFF(q3_K, d), -1),
    CASE(iq4_xs, IQ4_XS, SQZ_QK_K, OFF(iq4_xs, d), -1),
    CASE(iq3_s, IQ3_S, SQZ_QK_K, OFF(iq3_s, d), -1),
    /* MXFP4: no fp16 field (random_blocks sets its E8M0 exponent) */
    {"mxfp4", SQZ_DTYPE_MXFP4, sqz__qdot1_mxfp4_neon, sqz__dequantize_mxfp4, sqz__quantize_mxfp4_ref, SQZ_QK_MXFP4,
     sizeof(sqz_block_mxfp4), {-1, -1}, sqz__idot_mxfp4_neon, sqz__idot_mxfp4_ref},
};

static uint8_t rndb(void) { return (uint8_t)((rndf() + 1.0f) * 128.0f); }

/* nb random blocks: random bytes, then finite fp16 scales of either sign and of magnitudes from zero
 * and subnormal to 40. */
static void random_blocks(const fused_case *c, uint8_t *w, int64_t nb) {
    for (size_t i = 0; i < (size_t)nb * c->ts; i++) w[i] = rndb();
    for (int64_t b = 0; c->dtype == SQZ_DTYPE_MXFP4 && b < nb; b++) /* exponents 2^-10 .. 2^5 */
        w[(size_t)b * c->ts] = (uint8_t)(118 + rndb() % 16);
    for (int64_t b = 0; b < nb; b++) {
        for (int f = 0; f < 2; f++) {
            if (c->f16[f] < 0) continue;
            static const float mag[7] = {0.05f, 0.0f, 3e-6f /* subnormal */, 1e-3f, 0.05f, 40.0f, 0.5f};
            const float v = rndf() * mag[(b + f) % 7];
            const uint16_t h = sqz_fp32_to_fp16(v);
            memcpy(w + (size_t)b * c->ts + c->f16[f], &h, 2);
        }
    }
}

static int close_to(const fused_case *c, const char *how, int64_t k, float got, double ref, double mag) {
    if (fabs(got - ref) <= 1e-5 * mag + 1e-30) return 1;
    printf("%s neon fused (%s): k = %lld: %.9g, double dot of the dequantized weights %.9g (sum |w x| %.9g)\n",
           c->name, how, (long long)k, (double)got, ref, mag);
    return 0;
}

/* The kernel on nb random blocks and x against the double dot of the scalar dequantizer's weights
 * within 1e-5 of sum |w x|, called directly (xs formed as qmatmul.c forms it) and through
 * sqz__qmatmul with the best instruction set (NEON): one token (the fused kernel from the table)
 * and two (the tiled NEON dot over the scalar dequantizer). x has room for 2 k floats. */
static int check_fused_k(const fused_case *c, int64_t nb, uint8_t *w, float *x, float *xs, float *deq) {
    const int64_t k = nb * c->bs;
    random_blocks(c, w, nb);
    for (int64_t i = 0; i < k; i++) x[i] = 4.0f * rndf();
    for (int64_t j = 0; j < k / SQZ__XS_BLOCK; j++) {
        float t = 0;
        for (int i = 0; i < SQZ__XS_BLOCK; i++) t += x[j * SQZ__XS_BLOCK + i];
        xs[j] = t;
    }
    c->ref(w, deq, k);
    double ref = 0, mag = 0;
    for (int64_t i = 0; i < k; i++) {
        ref += (double)deq[i] * x[i];
        mag += fabs((double)deq[i] * x[i]);
    }
    if (!close_to(c, "direct", k, c->dot1(w, x, xs, k), ref, mag)) return 1;
    memcpy(x + k, x, (size_t)k * sizeof(float));
    float y[2];
    for (int64_t m = 1; m <= 2; m++) {
        const sqz_matmul_args a = {.m = m, .n = 1, .k = k, .x = x, .w = w, .w_dtype = c->dtype, .y = y};
        if (sqz__qmatmul(NULL, sqz__qmm_isa_best(), &a) != SQZ_OK) {
            printf("%s: sqz__qmatmul failed\n", c->name);
            return 1;
        }
        for (int64_t i = 0; i < m; i++)
            if (!close_to(c, m == 1 ? "sqz__qmatmul, 1 token" : "sqz__qmatmul, 2 tokens", k, y[i], ref, mag)) return 1;
    }
    return 0;
}

/* Every fused kernel on several lengths (1 block .. 10240 elements), three random rows each. */
static int check_fused(void) {
    enum { MAXK = 40 * SQZ_QK_K };
    static const int64_t nbs[] = {1, 2, 3, 7, 16, 40, 320};
    static float x[2 * MAXK], xs[MAXK / SQZ__XS_BLOCK], deq[MAXK];
    static uint8_t w[2 * MAXK]; /* every type stores under 2 bytes per element */
    int bad = 0;
    for (size_t t = 0; t < sizeof fused_cases / sizeof fused_cases[0]; t++) {
        const fused_case *c = &fused_cases[t];
        int fail = sqz__qmm_dot1(c->dtype, SQZ__ISA_NEON) != c->dot1;
        if (fail) printf("%s: qmatmul.c's table has another NEON fused kernel\n", c->name);
        for (size_t j = 0; j < sizeof nbs / sizeof nbs[0] && nbs[j] * c->bs <= MAXK && !fail; j++)
            for (int rep = 0; rep < 3 && !fail; rep++) fail = check_fused_k(c, nbs[j], w, x, xs, deq);
        if (!fail)
            printf("%s neon fused: ok (k = %d .. %d, 3 rows each; directly and through sqz__qmatmul)\n", c->name,
                   c->bs, (int)MAXK);
        bad |= fail;
    }
    return bad;
}

/* ---- the integer products of kernels/cpu/qidot_neon.c against qidot_ref.c's ------------------ */

/* Activation value i of the quantized row xq (d times the code). */
static float act_value(sqz__aq_kind kind, const void *xq, int64_t i) {
    if (kind == SQZ__AQ_Q8_K) return ((const sqz__aq8_K *)xq)[i / 256].d * ((const sqz__aq8_K *)xq)[i / 256].qs[i % 256];
    if (kind == SQZ__AQ_Q8_1) return ((const sqz__aq8_1 *)xq)[i / 32].d * ((const sqz__aq8_1 *)xq)[i / 32].qs[i % 32];
    return ((const sqz__aq8_0 *)xq)[i / 32].d * ((const sqz__aq8_0 *)xq)[i / 32].qs[i % 32];
}

/* The row's activations as codes in [-r, r] with d = 1 (Q8_1's s and Q8_K's bsums their sums). */
static void unit_codes(sqz__aq_kind kind, void *xq, int64_t k, int r) {
    for (int64_t i = 0; i < k; i++) {
        const int8_t q = (int8_t)((int)((rndf() + 1.0f) * (float)(r + 0.5f)) - r); /* -r .. r (r + 1 rarely) */
        const int8_t c = q > r ? (int8_t)r : q;
        if (kind == SQZ__AQ_Q8_K) {
            sqz__aq8_K *a = (sqz__aq8_K *)xq + i / 256;
            if (i % 256 == 0) memset(a->bsums, 0, sizeof a->bsums), a->d = 1.0f;
            a->qs[i % 256] = c;
            a->bsums[i % 256 / 16] = (int16_t)(a->bsums[i % 256 / 16] + c);
        } else if (kind == SQZ__AQ_Q8_1) {
            sqz__aq8_1 *a = (sqz__aq8_1 *)xq + i / 32;
            if (i % 32 == 0) a->d = 1.0f, a->s = 0.0f;
            a->qs[i % 32] = c;
            a->s += (float)c;
        } else {
            sqz__aq8_0 *a = (sqz__aq8_0 *)xq + i / 32;
            if (i % 32 == 0) a->d = 1.0f;
            a->qs[i % 32] = c;
        }
    }
}

/* One row of nb random blocks against one activation row, NEON against the reference. unit: the
 * fp16 scales 1.0 and activations d = 1 with codes in [-r, r], r halved from 127 until the
 * blocks' terms (each an integer) sum in absolute value under 2^24: every partial sum is exact in
 * any order, the results must be bit-equal. Else random finite scales and activations quantized
 * from random floats: within 1e-5 of sum |w x| (the dequantized weights times the activations). */
static int check_idot_k(const fused_case *c, int64_t nb, int unit, uint8_t *w, void *xq, float *x, float *deq) {
    const int64_t k = nb * c->bs;
    const sqz__aq_kind kind = sqz__aq_kind_of(c->dtype);
    const size_t ab = sqz__aq_row_bytes(kind, c->bs); /* bytes of one block's activations */
    random_blocks(c, w, nb);
    double mag = 0;
    if (unit) {
        for (int64_t b = 0; b < nb; b++)
            for (int f = 0; f < 2; f++)
                if (c->f16[f] >= 0) memcpy(w + (size_t)b * c->ts + c->f16[f], &(uint16_t){0x3C00}, 2);
        for (int r = 127;; r /= 2) {
            unit_codes(kind, xq, k, r);
            mag = 0;
            for (int64_t b = 0; b < nb; b++) mag += fabs(c->idot_ref(w + (size_t)b * c->ts, (uint8_t *)xq + b * ab, c->bs));
            if (mag < 16777216.0) break;
            if (r == 1) {
                printf("%s neon-dot: k = %lld: no activation codes keep the sum under 2^24\n", c->name, (long long)k);
                return 1;
            }
        }
    } else {
        for (int64_t i = 0; i < k; i++) x[i] = 4.0f * rndf();
        sqz__aq_quantize(kind, x, xq, k);
        c->ref(w, deq, k);
        for (int64_t i = 0; i < k; i++) mag += fabs((double)deq[i] * act_value(kind, xq, i));
    }
    const float got = c->idot(w, xq, k), ref = c->idot_ref(w, xq, k);
    if (unit ? memcmp(&got, &ref, sizeof got) == 0 : fabs((double)got - ref) <= 1e-5 * mag + 1e-30) return 0;
    printf("%s neon-dot (%s): k = %lld: %.9g, the scalar kernel %.9g (sum |terms| %.9g)\n", c->name,
           unit ? "unit scales, must be equal" : "random scales", (long long)k, (double)got, (double)ref, mag);
    return 1;
}

/* Every integer product on 1 block .. 10240 elements, 3 rows each with unit and with random scales;
 * qidot.c's table must give it for NEON (the CPU has the dot-product extension: qemu -cpu max). */
static int check_idot(void) {
    enum { MAXK = 40 * SQZ_QK_K };
    static const int64_t nbs[] = {1, 2, 3, 4, 5, 7, 16, 40, 320};
    static float x[MAXK], deq[MAXK], xq[MAXK / 32 * sizeof(sqz__aq8_1) / sizeof(float)];
    static uint8_t w[2 * MAXK];
    int bad = 0;
    for (size_t t = 0; t < sizeof fused_cases / sizeof fused_cases[0]; t++) {
        const fused_case *c = &fused_cases[t];
        int fail = sqz__qmm_idot(c->dtype, SQZ__ISA_NEON) != c->idot ||
                   strcmp(sqz__qmm_idot_name(c->dtype, SQZ__ISA_NEON), "neon-dot") != 0;
        if (fail) printf("%s: qidot.c's table gives %s for NEON, not this neon-dot kernel\n", c->name,
                         sqz__qmm_idot_name(c->dtype, SQZ__ISA_NEON));
        for (size_t j = 0; j < sizeof nbs / sizeof nbs[0] && nbs[j] * c->bs <= MAXK && !fail; j++)
            for (int rep = 0; rep < 6 && !fail; rep++) fail = check_idot_k(c, nbs[j], rep % 2, w, xq, x, deq);
        if (!fail)
            printf("%s neon-dot: ok (k = %d .. %d, 3 rows each bit-equal to the scalar kernel with unit scales, "
                   "within 1e-5 with random ones)\n", c->name, c->bs, (int)MAXK);
        bad |= fail;
    }
    return bad;
}

/* Real weights: stories260K's w1 (5 x (172, 64) = 55040 floats, as 215 rows of 256), read from its
 * llama2.c checkpoint (7 int32 header: dim 64, hidden 172, 5 layers, ..., vocab 512; then the
 * tensors, w1 at float 94848). Returns 0, or -1 when path is missing or not that checkpoint. */
enum { RW_W1 = 94848, RW_ROWS = 215, RW_K = 256 };
static int load_w1(const char *path, float *w) {
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    int32_t head[7];
    const int ok = fread(head, 4, 7, f) == 7 && head[0] == 64 && head[1] == 172 && head[2] == 5 && head[5] == 512 &&
                   fseek(f, 28 + 4L * RW_W1, SEEK_SET) == 0 && fread(w, 4, RW_ROWS * RW_K, f) == RW_ROWS * RW_K;
    fclose(f);
    return ok ? 0 : -1;
}

/* Every kernel on w1 quantized by quant/gguf's reference quantizer of its type: each row directly
 * and all 215 at once through sqz__qmatmul (one token), against the double dot of the dequantized
 * weights within 1e-5 of sum |w x|. */
static int check_real(const float *w1) {
    static uint8_t q[2 * RW_ROWS * RW_K];
    static float deq[RW_ROWS * RW_K], x[RW_K], xs[RW_K / SQZ__XS_BLOCK], y[RW_ROWS];
    for (int i = 0; i < RW_K; i++) x[i] = 2.0f * rndf();
    for (int j = 0; j < RW_K / SQZ__XS_BLOCK; j++) {
        float t = 0;
        for (int i = 0; i < SQZ__XS_BLOCK; i++) t += x[j * SQZ__XS_BLOCK + i];
        xs[j] = t;
    }
    int bad = 0;
    for (size_t t = 0; t < sizeof fused_cases / sizeof fused_cases[0]; t++) {
        const fused_case *c = &fused_cases[t];
        const size_t rb = (size_t)(RW_K / c->bs) * c->ts;
        c->quant(w1, q, RW_ROWS * RW_K);
        c->ref(q, deq, RW_ROWS * RW_K);
        const sqz_matmul_args a = {.m = 1, .n = RW_ROWS, .k = RW_K, .x = x, .w = q, .w_dtype = c->dtype, .y = y};
        int fail = sqz__qmatmul(NULL, sqz__qmm_isa_best(), &a) != SQZ_OK;
        for (int r = 0; r < RW_ROWS && !fail; r++) {
            double ref = 0, mag = 0;
            for (int i = 0; i < RW_K; i++) {
                ref += (double)deq[r * RW_K + i] * x[i];
                mag += fabs((double)deq[r * RW_K + i] * x[i]);
            }
            fail = !close_to(c, "stories260K, direct", RW_K, c->dot1(q + r * rb, x, xs, RW_K), ref, mag) ||
                   !close_to(c, "stories260K, sqz__qmatmul", RW_K, y[r], ref, mag);
        }
        if (!fail) printf("%s neon fused: ok on stories260K's w1 (%d rows of %d)\n", c->name, RW_ROWS, RW_K);
        bad |= fail;
    }
    return bad;
}
#endif

/* argv[1]: stories260K.bin (optional: its real weights are checked too). */
int main(int argc, char **argv) {
    int bad = check("scalar", sqz__dot_f32_scalar);
#if SQZ__QMM_NEON
    bad |= check("neon", sqz__dot_f32_neon);
    if (sqz__qmm_isa_best() != SQZ__ISA_NEON) {
        printf("the best instruction set is %s, not neon\n", sqz__qmm_isa_name(sqz__qmm_isa_best()));
        return 1;
    }
    bad |= check_fused();
    bad |= check_idot();
    if (argc > 1) {
        static float w1[RW_ROWS * RW_K];
        if (load_w1(argv[1], w1) != 0) {
            printf("%s: not the stories260K checkpoint\n", argv[1]);
            return 1;
        }
        bad |= check_real(w1);
    }
#else
    (void)argc, (void)argv;
#endif
    return bad;
}

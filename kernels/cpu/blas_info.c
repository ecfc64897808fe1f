/*
 * kernels/cpu/blas_info.c - which kernels the BLAS runs, against what the CPU allows.
 *
 * OpenBLAS chooses its kernels from a table of CPU models. A CPU newer than the table (Debian
 * 12's OpenBLAS 0.3.21 on an Intel family 6 model 207) gets its oldest x86-64 kernels: sgemm at
 * 36 GFLOP/s where the AVX-512 ones give 243 on the same 2 cores. What the CPU allows is read
 * here from its own feature bits (CPUID), and the CLI sets OPENBLAS_CORETYPE (read by OpenBLAS
 * only when it loads) and runs itself again when the BLAS chose less (cli/main.c).
 */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "sqz/backend.h"
#include "sqz/progress.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

char *openblas_get_corename(void);
char *openblas_get_config(void);

/* OpenBLAS's x86-64 cores by the instructions their sgemm uses: 1 SSE, 2 AVX2+FMA, 3 AVX-512,
 * 4 AVX-512 with BF16; 0 unknown (a core this table does not name is never overruled). */
static const struct { const char *name; int tier; } cores[] = {
    {"Prescott", 1},   {"Core2", 1},      {"Penryn", 1},    {"Dunnington", 1}, {"Nehalem", 1},
    {"Atom", 1},       {"Barcelona", 1},  {"Bobcat", 1},    {"Bulldozer", 1},  {"Piledriver", 1},
    {"Steamroller", 1}, {"Excavator", 1}, {"Sandybridge", 1}, {"Haswell", 2},  {"Zen", 2},
    {"SkylakeX", 3},   {"Cooperlake", 4}, {"SapphireRapids", 4},
};
static const char *best_names[] = {"", "", "HASWELL", "SKYLAKEX", "COOPERLAKE"};

static int tier_of(const char *core) {
    for (size_t i = 0; i < sizeof cores / sizeof cores[0]; i++)
        if (!strcasecmp(core, cores[i].name)) return cores[i].tier;
    return 0;
}

/* The best tier the CPU's own feature bits allow (and the OS saves the registers of). */
static int cpu_tier(void) {
#if defined(__x86_64__) || defined(__i386__)
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return 0;
    const bool fma = c & (1u << 12), osxsave = c & (1u << 27), avx = c & (1u << 28);
    if (!osxsave || !avx) return 1;
    unsigned xlo, xhi;
    __asm__ volatile("xgetbv" : "=a"(xlo), "=d"(xhi) : "c"(0));
    (void)xhi;
    const bool ymm = (xlo & 0x6) == 0x6, zmm = (xlo & 0xe6) == 0xe6;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return 1;
    const bool avx2 = b & (1u << 5), f = b & (1u << 16), dq = b & (1u << 17), cd = b & (1u << 28),
               bw = b & (1u << 30), vl = b & (1u << 31);
    if (!(ymm && avx2 && fma)) return 1;
    if (!(zmm && f && dq && cd && bw && vl)) return 2;
    unsigned a1 = 0, b1, c1, d1;
    const bool bf16 = __get_cpuid_count(7, 1, &a1, &b1, &c1, &d1) && (a1 & (1u << 5));
    return bf16 ? 4 : 3;
#else
    return 0; /* other architectures: the BLAS's own choice stands */
#endif
}

void sqz_blas_info_get(sqz_blas_info *out) {
    memset(out, 0, sizeof *out);
    const char *core = openblas_get_corename(), *cfg = openblas_get_config();
    snprintf(out->core, sizeof out->core, "%s", core ? core : "");
    snprintf(out->config, sizeof out->config, "%s", cfg ? cfg : "");
    const int have = tier_of(out->core), can = cpu_tier();
    out->core_tier = have;
    out->cpu_tier = can;
    if (have > 0 && can > have) snprintf(out->better, sizeof out->better, "%s", best_names[can]);
}

double sqz_blas_sgemm_gflops(int n) {
    if (n <= 0 || n > 8192) return 0.0;
    float *a = malloc(sizeof(float) * (size_t)n * (size_t)n), *b = malloc(sizeof(float) * (size_t)n * (size_t)n),
          *c = malloc(sizeof(float) * (size_t)n * (size_t)n);
    double best = 0.0;
    for (size_t i = 0; a && b && c && i < (size_t)n * (size_t)n; i++) {
        a[i] = (float)(i % 7) * 1e-3f;
        b[i] = (float)(i % 5) * 1e-3f;
    }
    for (int r = 0; a && b && c && r < 3; r++) { /* the best of three: a shared machine is noisy */
        const double t0 = sqz_now_seconds();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
        const double s = sqz_now_seconds() - t0;
        if (s > 0 && 2.0 * n * (double)n * n / s / 1e9 > best) best = 2.0 * n * (double)n * n / s / 1e9;
    }
    free(a);
    free(b);
    free(c);
    return best;
}

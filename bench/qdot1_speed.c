/*
 * bench/qdot1_speed.c - the fused one-token kernels (kernels/cpu/qfused_*.c) alone, at 1 thread:
 * billions of weights per second for Q4_0, Q8_0, Q4_K and Q6_K rows of 1536 (the 1.5 B's width),
 * with the matrix resident in L2 (256 rows), L3 (4096) and DRAM (65536 rows, 57-83 MB).
 * Synthetic blocks (random codes and scales, small fp16 d): a speed test, no accuracy figure.
 * Where the rate does not fall from L2 to DRAM, the kernel is bound by its vector operations,
 * not by memory (docs/kernels.md, "The ceiling with f32 activations").
 *
 *   build-release/bench/sqz_bench_qdot1
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/cpu/qmatmul.h"

#if SQZ__QMM_X86
typedef float (*dot1_fn)(const void *, const float *, const float *, int64_t);

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Random blocks of bs bytes per qk elements whose fp16 scales (at the offsets d_at, -1: none) are 2^-8. */
static uint8_t *blocks(int64_t rows, int64_t k, size_t bs, int64_t qk, const int *d_at) {
    const size_t rb = (size_t)(k / qk) * bs;
    uint8_t *w = malloc(rb * (size_t)rows);
    if (!w) return NULL;
    uint32_t s = 12345;
    for (size_t i = 0; i < rb * (size_t)rows; i++) w[i] = (uint8_t)((s = s * 1664525u + 1013904223u) >> 24);
    for (size_t b = 0; b < rb * (size_t)rows / bs; b++)
        for (int j = 0; d_at[j] >= 0; j++) {
            w[b * bs + (size_t)d_at[j]] = 0x00;
            w[b * bs + (size_t)d_at[j] + 1] = 0x1c;
        }
    return w;
}

static void run(const char *name, dot1_fn f, size_t bs, int64_t qk, const int *d_at, int64_t rows) {
    const int64_t k = 1536;
    const size_t rb = (size_t)(k / qk) * bs;
    uint8_t *w = blocks(rows, k, bs, qk, d_at);
    float *x = malloc((size_t)k * sizeof(float)), *xs = malloc((size_t)(k / 32) * sizeof(float));
    if (!w || !x || !xs) {
        fprintf(stderr, "sqz_bench_qdot1: out of memory\n");
        exit(1);
    }
    for (int64_t i = 0; i < k; i++) x[i] = (float)((i * 37) % 101) / 101.0f - 0.5f;
    for (int64_t i = 0; i < k / 32; i++) {
        xs[i] = 0;
        for (int j = 0; j < 32; j++) xs[i] += x[i * 32 + j];
    }
    volatile float sink = 0;
    int reps = (int)(1e9 / (double)(k * rows));
    if (reps < 3) reps = 3;
    double best = 1e30;
    for (int t = 0; t < 5; t++) {
        const double t0 = now();
        for (int r = 0; r < reps; r++)
            for (int64_t i = 0; i < rows; i++) sink += f(w + (size_t)i * rb, x, xs, k);
        const double dt = (now() - t0) / reps;
        if (dt < best) best = dt;
    }
    printf("%-12s %6lld rows (%6.1f MB)  %6.2f G weights/s  %5.1f GB/s\n", name, (long long)rows,
           (double)(rb * (size_t)rows) / 1e6, (double)(k * rows) / best / 1e9, (double)(rb * (size_t)rows) / best / 1e9);
    (void)sink;
    free(w);
    free(x);
    free(xs);
}

int main(void) {
    static const int d_q4_0[] = {0, -1}, d_q8_0[] = {0, -1}, d_q4_K[] = {0, 2, -1}, d_q6_K[] = {208, -1};
    const int avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw");
    const int64_t rows[] = {256, 4096, 65536};
    printf("fused one-token kernels, 1 thread, rows of 1536 (synthetic blocks: a speed test)\n");
    for (int i = 0; i < 3; i++) {
        run("q4_0 avx2", sqz__qdot1_q4_0_avx2, 18, 32, d_q4_0, rows[i]);
        run("q8_0 avx2", sqz__qdot1_q8_0_avx2, 34, 32, d_q8_0, rows[i]);
        run("q4_K avx2", sqz__qdot1_q4_K_avx2, 144, 256, d_q4_K, rows[i]);
        run("q6_K avx2", sqz__qdot1_q6_K_avx2, 210, 256, d_q6_K, rows[i]);
        if (!avx512) continue;
        run("q4_0 avx512", sqz__qdot1_q4_0_avx512, 18, 32, d_q4_0, rows[i]);
        run("q8_0 avx512", sqz__qdot1_q8_0_avx512, 34, 32, d_q8_0, rows[i]);
        run("q4_K avx512", sqz__qdot1_q4_K_avx512, 144, 256, d_q4_K, rows[i]);
        run("q6_K avx512", sqz__qdot1_q6_K_avx512, 210, 256, d_q6_K, rows[i]);
    }
    return 0;
}
#else
int main(void) {
    printf("sqz_bench_qdot1: x86-64 kernels only\n");
    return 77;
}
#endif

/*
 * bench/qidot_vs_ggml.c - sqz's one-token integer kernels (kernels/cpu/qidot*.c, the variant this
 * CPU runs) against ggml-cpu's on the same rows and the same quantized activations, at 1 thread:
 * billions of weights per second with the matrix in L2 (256 rows) and in DRAM (65536 rows), and
 * for Q4_0 and Q4_K also ggml's repacked 8-row gemv (what llama.cpp runs on x86 for those types:
 * its repack buffers, ggml_gemv_*_8x8; random bytes in its layout, a speed figure only).
 * Weights: 64 distinct rows quantized by ggml, repeated. A speed test: no accuracy figure.
 *
 * Built and run by bench/qidot_vs_ggml.sh against an existing llama.cpp build (nothing of
 * llama.cpp is committed): bash bench/qidot_vs_ggml.sh LLAMA_BIN [K]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ggml-cpu.h"
#include "ggml.h"
#include "kernels/cpu/qidot.h"

/* ggml-cpu's repacked gemv kernels (exported by libggml-cpu, not declared in its headers) */
void ggml_gemv_q4_K_8x8_q8_K(int n, float *s, size_t bs, const void *vx, const void *vy, int nr, int nc);
void ggml_gemv_q4_0_8x8_q8_0(int n, float *s, size_t bs, const void *vx, const void *vy, int nr, int nc);

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static const struct {
    enum ggml_type g;
    sqz_dtype s;
} kTypes[] = {
    {GGML_TYPE_Q8_0, SQZ_DTYPE_Q8_0}, {GGML_TYPE_Q4_0, SQZ_DTYPE_Q4_0}, {GGML_TYPE_Q4_1, SQZ_DTYPE_Q4_1},
    {GGML_TYPE_Q5_0, SQZ_DTYPE_Q5_0}, {GGML_TYPE_Q5_1, SQZ_DTYPE_Q5_1}, {GGML_TYPE_IQ4_NL, SQZ_DTYPE_IQ4_NL},
    {GGML_TYPE_Q2_K, SQZ_DTYPE_Q2_K}, {GGML_TYPE_Q3_K, SQZ_DTYPE_Q3_K}, {GGML_TYPE_Q4_K, SQZ_DTYPE_Q4_K},
    {GGML_TYPE_Q5_K, SQZ_DTYPE_Q5_K}, {GGML_TYPE_Q6_K, SQZ_DTYPE_Q6_K}, {GGML_TYPE_IQ4_XS, SQZ_DTYPE_IQ4_XS},
    {GGML_TYPE_IQ3_S, SQZ_DTYPE_IQ3_S}, {GGML_TYPE_MXFP4, SQZ_DTYPE_MXFP4},
};

static float frand(void) { return (float)rand() / (float)RAND_MAX - 0.5f; }

/* G weights/s of ggml's repacked gemv over rows x k random bytes (bytes per 8 rows x 256: b8). */
static double repacked(enum ggml_type g, int64_t rows, int64_t k, int reps) {
    const size_t rb = g == GGML_TYPE_Q4_K ? (size_t)k / 256 * 144 : (size_t)k / 32 * 18;
    uint8_t *w = malloc(rb * (size_t)rows), *xq = calloc(1, (size_t)k * 2 + 4096);
    float *y = malloc((size_t)rows * sizeof(float));
    if (!w || !xq || !y) exit(1);
    for (size_t i = 0; i < rb * (size_t)rows; i++) w[i] = (uint8_t)(i * 2654435761u >> 24);
    double best = 1e30;
    for (int r = 0; r < 5; r++) {
        const double t0 = now();
        for (int q = 0; q < reps; q++) {
            if (g == GGML_TYPE_Q4_K) ggml_gemv_q4_K_8x8_q8_K((int)k, y, (size_t)rows, w, xq, 1, (int)rows);
            else ggml_gemv_q4_0_8x8_q8_0((int)k, y, (size_t)rows, w, xq, 1, (int)rows);
        }
        const double t = now() - t0;
        if (t < best) best = t;
    }
    free(w), free(xq), free(y);
    return (double)rows * (double)k * reps / best / 1e9;
}

static void one(int t, int64_t rows, int64_t k) {
    const struct ggml_type_traits_cpu *tc = ggml_get_type_traits_cpu(kTypes[t].g);
    const struct ggml_type_traits_cpu *vc = ggml_get_type_traits_cpu(tc->vec_dot_type);
    const size_t rb = ggml_row_size(kTypes[t].g, k);
    uint8_t *w = malloc(rb * (size_t)rows), *xg = malloc(ggml_row_size(tc->vec_dot_type, k));
    const sqz__aq_kind kind = sqz__aq_kind_of(kTypes[t].s);
    uint8_t *xs = malloc(sqz__aq_row_bytes(kind, k));
    float *x = malloc((size_t)k * sizeof(float)), *y = malloc((size_t)rows * sizeof(float));
    if (!w || !xg || !xs || !x || !y) exit(1);
    for (int64_t j = 0; j < rows; j++) {
        if (j < 64) {
            for (int64_t i = 0; i < k; i++) x[i] = frand();
            ggml_quantize_chunk(kTypes[t].g, x, w + j * rb, 0, 1, k, NULL);
        } else {
            memcpy(w + j * rb, w + (j % 64) * rb, rb);
        }
    }
    for (int64_t i = 0; i < k; i++) x[i] = frand();
    vc->from_float(x, xg, k);
    sqz__aq_quantize(kind, x, xs, k);
    const sqz__qmm_isa isa = sqz__qmm_isa_best();
    const sqz__idot_fn f = sqz__qmm_idot(kTypes[t].s, isa);
    const int reps = rows <= 256 ? (int)(4e8 / (double)(rows * k)) + 1 : 8;
    double bg = 1e30, bs = 1e30;
    for (int r = 0; r < 5; r++) {
        const double t0 = now();
        for (int q = 0; q < reps; q++)
            for (int64_t j = 0; j < rows; j++) tc->vec_dot((int)k, &y[j], 0, w + j * rb, 0, xg, 0, 1);
        const double t1 = now();
        for (int q = 0; q < reps; q++)
            for (int64_t j = 0; j < rows; j++) y[j] = f(w + j * rb, xs, k);
        const double t2 = now();
        if (t1 - t0 < bg) bg = t1 - t0;
        if (t2 - t1 < bs) bs = t2 - t1;
    }
    const double n = (double)rows * (double)k * reps / 1e9;
    printf("  %-7s %-5s %8.2f %8.2f %6.2fx", ggml_type_name(kTypes[t].g), rows <= 256 ? "L2" : "DRAM", n / bs, n / bg,
           bg / bs);
    if (kTypes[t].g == GGML_TYPE_Q4_K || kTypes[t].g == GGML_TYPE_Q4_0) {
        const double gr = repacked(kTypes[t].g, rows, k, reps);
        printf(" %8.2f %6.2fx", gr, n / bs / gr);
    }
    printf("   (sqz: %s)\n", sqz__qmm_idot_name(kTypes[t].s, isa));
    free(w), free(xg), free(xs), free(x), free(y);
}

int main(int argc, char **argv) {
    ggml_cpu_init();
    const int64_t k = argc > 1 ? atoll(argv[1]) : 1536;
    if (k <= 0 || k % 256) {
        fprintf(stderr, "usage: %s [K, a multiple of 256]\n", argv[0]);
        return 2;
    }
    printf("one-token integer products, 1 thread, rows of %lld; G weights/s (best of 5)\n", (long long)k);
    printf("  %-7s %-5s %8s %8s %7s %8s %7s\n", "type", "where", "sqz", "ggml", "ratio", "repack", "ratio");
    for (int t = 0; t < (int)(sizeof kTypes / sizeof kTypes[0]); t++) {
        one(t, 256, k);
        one(t, 65536, k);
    }
    return 0;
}

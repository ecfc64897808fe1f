/*
 * kernels/cpu/gemm_i8.c - exact INT8 GEMM: AVX2 tiles with run-time CPU detection, the
 * scalar reference as fallback (see gemm_i8.h).
 *
 * AVX2 path: 16 int8 of a row are widened to int16 (vpmovsxbw) and multiplied pairwise
 * with vpmaddwd into 8 int32 lanes; a tile of 2 X rows x 4 W rows keeps 8 accumulators,
 * 2 + 4 widened operands in registers (14 of 16 ymm). Products of int8 fit int16 pairs
 * summed in int32 (|2 * 128 * 128| = 32768), and every partial sum is bounded by the sum of
 * |products| <= k * 16384 < 2^31 for k <= SQZ_GEMM_I8_MAX_K, so nothing overflows and the
 * result is the exact integer the reference computes. W is walked in column panels that
 * stay in L2 while every X row pair passes over them.
 */
#include <stdlib.h>

#include "core/internal.h"
#include "kernels/cpu/gemm_i8.h"
#include "sqz/backend.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define SQZ_I8_X86 1
#include <immintrin.h>
#endif

static int32_t dot_i8(const int8_t *a, const int8_t *b, int64_t k) {
    int32_t acc = 0;
    for (int64_t t = 0; t < k; t++) acc += (int32_t)a[t] * (int32_t)b[t];
    return acc;
}

bool sqz__gemm_i8_has_avx2(void) {
#ifdef SQZ_I8_X86
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") != 0;
#else
    return false;
#endif
}

/* A tile computes out[a * NR + b] = X[a] . W[b] for a < MR, b < NR. */
typedef void (*tile_fn)(const int8_t *x, int64_t ldx, const int8_t *w, int64_t ldw, int64_t k, int32_t *out);

static void tile_scalar(const int8_t *x, int64_t ldx, const int8_t *w, int64_t ldw, int64_t k, int32_t *out,
                        int mr, int nr) {
    for (int a = 0; a < mr; a++)
        for (int b = 0; b < nr; b++) out[a * nr + b] = dot_i8(x + a * ldx, w + b * ldw, k);
}

#ifdef SQZ_I8_X86
__attribute__((target("avx2"))) static inline int32_t hsum_epi32(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(1, 0, 3, 2)));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1)));
    return _mm_cvtsi128_si32(s);
}

#define SQZ_I8_TILE(MR, NR)                                                                                  \
    __attribute__((target("avx2"))) static void tile_avx2_##MR##x##NR(const int8_t *x, int64_t ldx,           \
                                                                      const int8_t *w, int64_t ldw, int64_t k, \
                                                                      int32_t *out) {                       \
        __m256i acc[MR][NR];                                                                                 \
        for (int a = 0; a < MR; a++)                                                                         \
            for (int b = 0; b < NR; b++) acc[a][b] = _mm256_setzero_si256();                                 \
        int64_t t = 0;                                                                                       \
        for (; t + 16 <= k; t += 16) {                                                                       \
            __m256i xv[MR], wv[NR];                                                                          \
            for (int a = 0; a < MR; a++)                                                                     \
                xv[a] = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(const void *)(x + a * ldx + t))); \
            for (int b = 0; b < NR; b++)                                                                     \
                wv[b] = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(const void *)(w + b * ldw + t))); \
            for (int a = 0; a < MR; a++)                                                                     \
                for (int b = 0; b < NR; b++)                                                                 \
                    acc[a][b] = _mm256_add_epi32(acc[a][b], _mm256_madd_epi16(xv[a], wv[b]));                \
        }                                                                                                    \
        for (int a = 0; a < MR; a++)                                                                         \
            for (int b = 0; b < NR; b++)                                                                     \
                out[a * NR + b] = hsum_epi32(acc[a][b]) + dot_i8(x + a * ldx + t, w + b * ldw + t, k - t);   \
    }
SQZ_I8_TILE(2, 4)
SQZ_I8_TILE(1, 4)
SQZ_I8_TILE(2, 1)
SQZ_I8_TILE(1, 1)
#undef SQZ_I8_TILE
#endif

static sqz_status check_args(int64_t m, int64_t n, int64_t k) {
    SQZ_RETURN_IF(m < 0 || n < 0 || k < 0, SQZ_ERR_INVALID_ARG, "gemm_i8: negative dimension (%lld, %lld, %lld)",
                  (long long)m, (long long)n, (long long)k);
    SQZ_RETURN_IF(k > SQZ_GEMM_I8_MAX_K, SQZ_ERR_INVALID_ARG,
                  "gemm_i8: k = %lld exceeds %d (the int32 accumulator could overflow)", (long long)k,
                  SQZ_GEMM_I8_MAX_K);
    return SQZ_OK;
}

static sqz_status pick(sqz_i8_path path, bool *avx2) {
    *avx2 = false;
    if (path == SQZ_I8_PATH_SCALAR) return SQZ_OK;
    SQZ_RETURN_IF(path != SQZ_I8_PATH_AUTO && path != SQZ_I8_PATH_AVX2, SQZ_ERR_INVALID_ARG,
                  "gemm_i8: unknown path %d", (int)path);
    *avx2 = sqz__gemm_i8_has_avx2();
    SQZ_RETURN_IF(path == SQZ_I8_PATH_AVX2 && !*avx2, SQZ_ERR_UNSUPPORTED, "gemm_i8: this CPU has no AVX2");
    return SQZ_OK;
}

/* What a finished tile is written as: raw int32, or the scaled f32/f16 output. */
typedef struct epilogue {
    int32_t *acc;
    const float *x_scale, *w_scale;
    void *y;
    sqz_dtype y_dtype;
} epilogue;

static void emit(const epilogue *e, int64_t n, int64_t i0, int64_t j0, int mr, int nr, const int32_t *t) {
    for (int a = 0; a < mr; a++) {
        const int64_t i = i0 + a;
        for (int b = 0; b < nr; b++) {
            const int64_t j = j0 + b, idx = i * n + j;
            const int32_t v = t[a * nr + b];
            if (e->acc) {
                e->acc[idx] = v;
                continue;
            }
            const float f = ((float)v * e->x_scale[i]) * e->w_scale[j];
            if (e->y_dtype == SQZ_DTYPE_F32) ((float *)e->y)[idx] = f;
            else ((uint16_t *)e->y)[idx] = sqz_fp32_to_fp16(f);
        }
    }
}

/* Column panel: as many W rows as fit ~192 KB (L2), a multiple of 4. */
static int64_t panel_rows(int64_t k) {
    int64_t p = k > 0 ? (192 * 1024) / k : 1024;
    p = p < 4 ? 4 : (p > 1024 ? 1024 : p);
    return p & ~(int64_t)3;
}

static void run(bool avx2, int64_t m, int64_t n, int64_t k, const int8_t *x, const int8_t *w, const epilogue *e) {
    int32_t t[8];
    const int64_t pn = panel_rows(k);
    for (int64_t j0 = 0; j0 < n; j0 += pn) {
        const int64_t j1 = j0 + pn < n ? j0 + pn : n;
        for (int64_t i = 0; i < m; i += 2) {
            const int mr = m - i >= 2 ? 2 : 1;
            const int8_t *xi = x + i * k;
            for (int64_t j = j0; j < j1; j += 4) {
                const int nr = j1 - j >= 4 ? 4 : (int)(j1 - j);
                const int8_t *wj = w + j * k;
#ifdef SQZ_I8_X86
                if (avx2) {
                    if (nr == 4) {
                        (mr == 2 ? tile_avx2_2x4 : tile_avx2_1x4)(xi, k, wj, k, k, t);
                    } else {
                        for (int b = 0; b < nr; b++) {
                            int32_t c[2];
                            (mr == 2 ? tile_avx2_2x1 : tile_avx2_1x1)(xi, k, wj + b * k, k, k, c);
                            for (int a = 0; a < mr; a++) t[a * nr + b] = c[a];
                        }
                    }
                    emit(e, n, i, j, mr, nr, t);
                    continue;
                }
#endif
                tile_scalar(xi, k, wj, k, k, t, mr, nr);
                emit(e, n, i, j, mr, nr, t);
            }
        }
    }
    (void)avx2;
}

sqz_status sqz__gemm_i8_acc(sqz_i8_path path, int64_t m, int64_t n, int64_t k, const int8_t *x, const int8_t *w,
                           int32_t *acc) {
    SQZ_TRY(check_args(m, n, k));
    bool avx2;
    SQZ_TRY(pick(path, &avx2));
    const epilogue e = {.acc = acc};
    run(avx2, m, n, k, x, w, &e);
    return SQZ_OK;
}

sqz_status sqz__gemm_i8_cpu(sqz_i8_path path, int64_t m, int64_t n, int64_t k, const int8_t *x,
                           const float *x_scale, const int8_t *w, const float *w_scale, void *y, sqz_dtype y_dtype) {
    SQZ_TRY(check_args(m, n, k));
    SQZ_RETURN_IF(y_dtype != SQZ_DTYPE_F32 && y_dtype != SQZ_DTYPE_F16, SQZ_ERR_INVALID_ARG,
                  "gemm_i8: output dtype %s (f32 or f16 expected)", sqz_dtype_name(y_dtype));
    bool avx2;
    SQZ_TRY(pick(path, &avx2));
    const epilogue e = {.x_scale = x_scale, .w_scale = w_scale, .y = y, .y_dtype = y_dtype};
    run(avx2, m, n, k, x, w, &e);
    return SQZ_OK;
}

/*
 * kernels/cpu/fgemm.c - the f32 GEMM over stored weights (fgemm.h): packing X into token tiles,
 * the weight rows' blocks over the pool, the scalar reference tiles, and the choice of form.
 */
#include "kernels/cpu/fgemm.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"

/* ---- the scalar reference: the same fma chains as the vector forms ------------------------------ */

static void tile_scalar(int width, const float *xp, const float *w, int64_t ldw, int64_t kc, float *ct, int64_t ldc) {
    for (int r = 0; r < 4; r++) {
        for (int t = 0; t < width; t++) {
            float acc = ct[r * ldc + t];
            for (int64_t kk = 0; kk < kc; kk++) acc = fmaf(xp[kk * width + t], w[r * ldw + kk], acc);
            ct[r * ldc + t] = acc;
        }
    }
}
static void tile_scalar1(const float *xp, const float *w, int64_t ldw, int64_t kc, float *ct, int64_t ldc) {
    tile_scalar(4, xp, w, ldw, kc, ct, ldc);
}
static void tile_scalar2(const float *xp, const float *w, int64_t ldw, int64_t kc, float *ct, int64_t ldc) {
    tile_scalar(8, xp, w, ldw, kc, ct, ldc);
}
static const sqz__fgemm_impl fgemm_scalar = {"scalar", 4, 4, {tile_scalar1, tile_scalar2}};

const sqz__fgemm_impl *sqz__fgemm_scalar(void) { return &fgemm_scalar; }

const sqz__fgemm_impl *sqz__fgemm_impl_for(sqz__qmm_isa isa) {
#if SQZ__QMM_X86
    if (isa == SQZ__ISA_AVX512) return &sqz__fgemm_avx512;
    if (isa == SQZ__ISA_AVX2) return &sqz__fgemm_avx2;
#endif
    if (isa == SQZ__ISA_SCALAR) return &fgemm_scalar;
    return NULL;
}

bool sqz__fgemm_enabled(void) {
    const char *v = getenv("SQZ_F32_GEMM");
    return !(v && strcmp(v, "blas") == 0);
}

const sqz__fgemm_impl *sqz__fgemm_for(sqz__qmm_isa isa) {
    return isa != SQZ__ISA_SCALAR && sqz__fgemm_enabled() ? sqz__fgemm_impl_for(isa) : NULL;
}

/* ---- the product ------------------------------------------------------------------------------ */

typedef struct fg_job {
    const sqz_matmul_args *a;
    const sqz__fgemm_impl *G;
    sqz__dequant_fn dq;
    size_t row_bytes, ts; /* bytes per weight row, per block */
    int64_t bs;           /* elements per block */
    int64_t m_pad;        /* tokens rounded up to a vector */
    float *xp;            /* the packed tokens: m_pad * k floats */
    float *scratch;       /* each thread's wt (SQZ__FG_NC x SQZ__FG_KC) and ct (SQZ__FG_NC x m_pad) */
    size_t each;          /* floats of scratch per thread */
} fg_job;

/* The token tiles of the kc block at column k0: tile t0 (2 vectors, the last 1 or 2) at xp + k0 *
 * m_pad + t0 * kc, laid out [kk][token]. Units: kc blocks [b, e). */
static void pack_x(void *c, int64_t b, int64_t e, int thread) {
    (void)thread;
    const fg_job *J = c;
    const int64_t m = J->a->m, k = J->a->k, tw = 2 * (int64_t)J->G->vec;
    for (int64_t blk = b; blk < e; blk++) {
        const int64_t k0 = blk * SQZ__FG_KC, kc = k - k0 < SQZ__FG_KC ? k - k0 : SQZ__FG_KC;
        for (int64_t t0 = 0; t0 < J->m_pad; t0 += tw) {
            const int64_t w = J->m_pad - t0 < tw ? J->m_pad - t0 : tw;
            float *dst = J->xp + k0 * J->m_pad + t0 * kc;
            for (int64_t t = 0; t < w; t++) {
                const float *src = t0 + t < m ? J->a->x + (t0 + t) * k + k0 : NULL;
                for (int64_t kk = 0; kk < kc; kk++) dst[kk * w + t] = src ? src[kk] : 0.0f;
            }
        }
    }
}

/* Rows [j0, j0 + SQZ__FG_NC) of Y: their blocks of columns dequantized into wt, multiplied into ct. */
static void rows_block(const fg_job *J, int64_t j0, float *wt, float *ct) {
    const sqz_matmul_args *a = J->a;
    const int64_t k = a->k, mp = J->m_pad, tw = 2 * (int64_t)J->G->vec, nr = J->G->nr;
    const int64_t rows = a->n - j0 < SQZ__FG_NC ? a->n - j0 : SQZ__FG_NC;
    const int64_t groups = (rows + nr - 1) / nr;
    memset(ct, 0, (size_t)(groups * nr * mp) * sizeof *ct);
    memset(wt + rows * SQZ__FG_KC, 0, (size_t)((groups * nr - rows) * SQZ__FG_KC) * sizeof *wt);
    for (int64_t k0 = 0; k0 < k; k0 += SQZ__FG_KC) {
        const int64_t kc = k - k0 < SQZ__FG_KC ? k - k0 : SQZ__FG_KC;
        for (int64_t r = 0; r < rows; r++)
            J->dq((const uint8_t *)a->w + (size_t)(j0 + r) * J->row_bytes + (size_t)(k0 / J->bs) * J->ts,
                  wt + r * SQZ__FG_KC, kc);
        const float *xb = J->xp + k0 * mp;
        for (int64_t t0 = 0; t0 < mp; t0 += tw) {
            const int64_t w = mp - t0 < tw ? mp - t0 : tw;
            const sqz__fg_tile_fn tile = J->G->tile[w > J->G->vec];
            for (int64_t g = 0; g < groups; g++)
                tile(xb + t0 * kc, wt + g * nr * SQZ__FG_KC, SQZ__FG_KC, kc, ct + g * nr * mp + t0, mp);
        }
    }
    for (int64_t t0 = 0; t0 < a->m; t0 += 16) { /* ct's columns into Y's rows, 16 tokens at a time */
        const int64_t t1 = a->m - t0 < 16 ? a->m : t0 + 16;
        for (int64_t r = 0; r < rows; r++) {
            const float bias = a->bias ? a->bias[j0 + r] : 0.0f;
            for (int64_t t = t0; t < t1; t++) a->y[t * a->n + j0 + r] = a->bias ? ct[r * mp + t] + bias : ct[r * mp + t];
        }
    }
}

static void rows_blocks(void *c, int64_t b, int64_t e, int thread) {
    const fg_job *J = c;
    float *wt = J->scratch + (size_t)thread * J->each, *ct = wt + SQZ__FG_NC * SQZ__FG_KC;
    for (int64_t i = b; i < e; i++) rows_block(J, i * SQZ__FG_NC, wt, ct);
}

static void run_on(sqz__pool *pool, int64_t n, int64_t grain, sqz__pool_fn fn, void *ctx) {
    if (pool) sqz__pool_for(pool, n, grain, fn, ctx);
    else fn(ctx, 0, n, 0);
}

sqz_status sqz__fgemm(sqz__pool *pool, const sqz__fgemm_impl *G, sqz__dequant_fn dq, const sqz_matmul_args *a) {
    const sqz_dtype_traits *tr = sqz_dtype_info(a->w_dtype);
    fg_job J = {.a = a, .G = G, .dq = dq, .ts = tr->type_size, .bs = tr->block_size,
                .row_bytes = (size_t)(a->k / tr->block_size) * tr->type_size,
                .m_pad = (a->m + G->vec - 1) / G->vec * G->vec};
    J.each = (size_t)SQZ__FG_NC * (size_t)(SQZ__FG_KC + J.m_pad) + 16; /* + 64 bytes: each thread's own lines */
    const int threads = pool ? sqz__pool_threads(pool) : 1;
    const size_t xp_bytes = (size_t)J.m_pad * (size_t)a->k * sizeof(float) + 64;
    const size_t sc_bytes = J.each * (size_t)threads * sizeof(float) + 64;
    void *own_x = NULL, *own_s = NULL;
    J.xp = pool ? sqz__pool_scratch(pool, 0, xp_bytes) : (own_x = sqz__malloc(xp_bytes));
    J.scratch = pool ? sqz__pool_scratch(pool, 2, sc_bytes) : (own_s = sqz__malloc(sc_bytes));
    if (!J.xp || !J.scratch) {
        free(own_x);
        free(own_s);
        return SQZ_ERROR(SQZ_ERR_NOMEM, "CPU matmul: no memory for %zu + %zu bytes of packed tokens and blocks",
                         xp_bytes, sc_bytes);
    }
    run_on(pool, (a->k + SQZ__FG_KC - 1) / SQZ__FG_KC, 1, pack_x, &J);
    run_on(pool, (a->n + SQZ__FG_NC - 1) / SQZ__FG_NC, 1, rows_blocks, &J);
    free(own_x);
    free(own_s);
    return SQZ_OK;
}

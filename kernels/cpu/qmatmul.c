/*
 * kernels/cpu/qmatmul.c - the table of stored-weight kernels and the two ways of multiplying
 * (qmatmul.h): dot products over L1 tiles of a row for few tokens, dequantized panels and
 * sgemm for many.
 */
#include "kernels/cpu/qmatmul.h"

#include <cblas.h>
#include <stdlib.h>
#include <string.h>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#include "core/internal.h"
#include "kernels/cpu/fgemm.h"
#include "kernels/cpu/qidot.h"

#if SQZ__QMM_X86
#define X86(f) f
#else
#define X86(f) NULL
#endif
#if SQZ__QMM_NEON
#define NEON(f) f
#else
#define NEON(f) NULL
#endif

/* One row per dtype: its dequantizer and fused one-token kernel for each instruction set (NULL:
 * the scalar dequantizer of core's dtype table; the tiled dot). AVX-512 machines run the AVX2
 * dequantizers and the AVX-512 fused kernels; aarch64 the scalar dequantizers and the NEON fused
 * kernels (qfused_neon.c). Q2_K, Q3_K, Q5_K, IQ4_XS and IQ3_S have fused kernels only (the scalar
 * dequantizer makes their panels). */
typedef struct qmm_row {
    sqz__dequant_fn dequant[SQZ__ISA_COUNT];
    sqz__dot1_fn dot1[SQZ__ISA_COUNT];  /* fused one-token kernel; NULL: the tiled dot */
} qmm_row;

#define ROW_X86(f) {{[SQZ__ISA_AVX2] = X86(f), [SQZ__ISA_AVX512] = X86(f)}, {NULL}}
/* Fused kernels only: the scalar dequantizer for many tokens (n: the NEON kernel). */
#define FUSED_ONLY(g, h, n) {{NULL}, \
                             {[SQZ__ISA_AVX2] = X86(g), [SQZ__ISA_AVX512] = X86(h), [SQZ__ISA_NEON] = NEON(n)}}
#define ROW_X86_FUSED512(f, g, h, n) {{[SQZ__ISA_AVX2] = X86(f), [SQZ__ISA_AVX512] = X86(f)}, \
                                      {[SQZ__ISA_AVX2] = X86(g), [SQZ__ISA_AVX512] = X86(h), [SQZ__ISA_NEON] = NEON(n)}}

static const qmm_row qmm_rows[SQZ_DTYPE_COUNT] = {
    [SQZ_DTYPE_F16] = ROW_X86(sqz__dequant_f16_avx2),
    [SQZ_DTYPE_BF16] = ROW_X86(sqz__dequant_bf16_avx2),
    [SQZ_DTYPE_Q8_0] = ROW_X86_FUSED512(sqz__dequant_q8_0_avx2, sqz__qdot1_q8_0_avx2, sqz__qdot1_q8_0_avx512,
                                        sqz__qdot1_q8_0_neon),
    [SQZ_DTYPE_Q4_0] = ROW_X86_FUSED512(sqz__dequant_q4_0_avx2, sqz__qdot1_q4_0_avx2, sqz__qdot1_q4_0_avx512,
                                        sqz__qdot1_q4_0_neon),
    [SQZ_DTYPE_Q4_1] = ROW_X86_FUSED512(sqz__dequant_q4_1_avx2, sqz__qdot1_q4_1_avx2, sqz__qdot1_q4_1_avx512,
                                        sqz__qdot1_q4_1_neon),
    [SQZ_DTYPE_Q5_0] = ROW_X86_FUSED512(sqz__dequant_q5_0_avx2, sqz__qdot1_q5_0_avx2, sqz__qdot1_q5_0_avx512,
                                        sqz__qdot1_q5_0_neon),
    [SQZ_DTYPE_Q5_1] = ROW_X86_FUSED512(sqz__dequant_q5_1_avx2, sqz__qdot1_q5_1_avx2, sqz__qdot1_q5_1_avx512,
                                        sqz__qdot1_q5_1_neon),
    [SQZ_DTYPE_IQ4_NL] = ROW_X86_FUSED512(sqz__dequant_iq4_nl_avx2, sqz__qdot1_iq4_nl_avx2, sqz__qdot1_iq4_nl_avx512,
                                          sqz__qdot1_iq4_nl_neon),
    [SQZ_DTYPE_MXFP4] = ROW_X86_FUSED512(sqz__dequant_mxfp4_avx2, sqz__qdot1_mxfp4_avx2, sqz__qdot1_mxfp4_avx512,
                                         sqz__qdot1_mxfp4_neon),
    [SQZ_DTYPE_IQ4_XS] = FUSED_ONLY(sqz__qdot1_iq4_xs_avx2, sqz__qdot1_iq4_xs_avx512, sqz__qdot1_iq4_xs_neon),
    [SQZ_DTYPE_Q4_K] = ROW_X86_FUSED512(sqz__dequant_q4_K_avx2, sqz__qdot1_q4_K_avx2, sqz__qdot1_q4_K_avx512,
                                        sqz__qdot1_q4_K_neon),
    [SQZ_DTYPE_Q2_K] = FUSED_ONLY(sqz__qdot1_q2_K_avx2, sqz__qdot1_q2_K_avx512, sqz__qdot1_q2_K_neon),
    [SQZ_DTYPE_Q3_K] = FUSED_ONLY(sqz__qdot1_q3_K_avx2, sqz__qdot1_q3_K_avx512, sqz__qdot1_q3_K_neon),
    [SQZ_DTYPE_Q5_K] = FUSED_ONLY(sqz__qdot1_q5_K_avx2, sqz__qdot1_q5_K_avx512, sqz__qdot1_q5_K_neon),
    [SQZ_DTYPE_Q6_K] = ROW_X86_FUSED512(sqz__dequant_q6_K_avx2, sqz__qdot1_q6_K_avx2, sqz__qdot1_q6_K_avx512,
                                        sqz__qdot1_q6_K_neon),
    /* IQ3_S: the AVX2 kernel on AVX-512 machines too */
    [SQZ_DTYPE_IQ3_S] = FUSED_ONLY(sqz__qdot1_iq3_s_avx2, sqz__qdot1_iq3_s_avx2, sqz__qdot1_iq3_s_neon),
    /* F32, Q2_K, Q3_K, Q5_K, Q8_K, IQ4_XS: the scalar dequantizer; every NEON dequantizer: the scalar one */
};

static const char *const isa_names[SQZ__ISA_COUNT] = {"scalar", "avx2", "avx512", "neon"};

const char *sqz__qmm_isa_name(sqz__qmm_isa isa) {
    return (unsigned)isa < SQZ__ISA_COUNT ? isa_names[isa] : "invalid";
}

#if SQZ__QMM_X86
/* CPUID leaf 1, ECX bit 29 (clang 14's __builtin_cpu_supports does not know "f16c"). */
static bool has_f16c(void) {
    unsigned a, b, c, d;
    return __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 29));
}
#endif

bool sqz__qmm_isa_runs(sqz__qmm_isa isa) {
    switch (isa) {
    case SQZ__ISA_SCALAR: return true;
#if SQZ__QMM_X86
    case SQZ__ISA_AVX2:
        __builtin_cpu_init();
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && has_f16c();
    case SQZ__ISA_AVX512:
        return sqz__qmm_isa_runs(SQZ__ISA_AVX2) && __builtin_cpu_supports("avx512f") &&
               __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl");
#endif
#if SQZ__QMM_NEON
    case SQZ__ISA_NEON: return true;
#endif
    default: return false;
    }
}

sqz__qmm_isa sqz__qmm_isa_best(void) {
    sqz__qmm_isa best = SQZ__ISA_SCALAR;
    for (int i = SQZ__ISA_COUNT - 1; i > 0; i--) {
        if (sqz__qmm_isa_runs((sqz__qmm_isa)i)) { best = (sqz__qmm_isa)i; break; }
    }
    const char *want = getenv("SQZ_QMM_ISA");
    for (int i = 0; want && i < (int)best; i++) {
        if (strcmp(want, isa_names[i]) == 0 && sqz__qmm_isa_runs((sqz__qmm_isa)i)) return (sqz__qmm_isa)i;
    }
    return best;
}

bool sqz__qmm_supports(sqz_dtype t) {
    const sqz_dtype_traits *tr = sqz_dtype_info(t);
    return tr && tr->to_f32 && (tr->is_quantized || tr->is_float) && t != SQZ_DTYPE_F64;
}

sqz__dequant_fn sqz__qmm_dequant(sqz_dtype t, sqz__qmm_isa isa) {
    if (!sqz__qmm_supports(t)) return NULL;
    if ((unsigned)isa < SQZ__ISA_COUNT && qmm_rows[t].dequant[isa]) return qmm_rows[t].dequant[isa];
    return sqz_dtype_info(t)->to_f32;
}

sqz__dot1_fn sqz__qmm_dot1(sqz_dtype t, sqz__qmm_isa isa) {
    if (!sqz__qmm_supports(t) || (unsigned)isa >= SQZ__ISA_COUNT) return NULL;
    return qmm_rows[t].dot1[isa];
}

sqz__dot_fn sqz__qmm_dot(sqz__qmm_isa isa) {
#if SQZ__QMM_X86
    if (isa == SQZ__ISA_AVX2) return sqz__dot_f32_avx2;
    if (isa == SQZ__ISA_AVX512) return sqz__dot_f32_avx512;
#endif
#if SQZ__QMM_NEON
    if (isa == SQZ__ISA_NEON) return sqz__dot_f32_neon;
#endif
    (void)isa;
    return sqz__dot_f32_scalar;
}

/* ---- the product ---------------------------------------------------------------------- */

typedef struct qmm_job {
    const sqz_matmul_args *a;
    sqz__dequant_fn dq;
    sqz__dot_fn dot;
    sqz__dot1_fn dot1; /* one token: the fused kernel, or NULL */
    const float *xs;   /* with dot1: the sums of x over each SQZ__XS_BLOCK elements */
    int64_t bs;        /* elements per block */
    size_t ts;         /* bytes per block */
    size_t row_bytes;  /* bytes per weight row */
    int64_t j0;        /* panel path: first row of the panel */
    float *panel;      /* panel path: (rows, k) */
} qmm_job;

/* Few tokens: output rows [b, e), every token; each row read once, SQZ__QMM_CHUNK at a time. */
static void rows_dot(void *c, int64_t b, int64_t e, int thread) {
    (void)thread;
    const qmm_job *J = c;
    const sqz_matmul_args *a = J->a;
    const int64_t m = a->m, k = a->k;
    float tile[SQZ__QMM_CHUNK] __attribute__((aligned(64)));
    float acc[SQZ__QMM_TILE_M];
    for (int64_t j = b; j < e; j++) {
        const uint8_t *row = (const uint8_t *)a->w + (size_t)j * J->row_bytes;
        if (J->dot1) {
            const float v = J->dot1(row, a->x, J->xs, k);
            a->y[j] = a->bias ? v + a->bias[j] : v;
            continue;
        }
        for (int64_t i = 0; i < m; i++) acc[i] = 0;
        for (int64_t c0 = 0; c0 < k; c0 += SQZ__QMM_CHUNK) {
            const int64_t len = k - c0 < SQZ__QMM_CHUNK ? k - c0 : SQZ__QMM_CHUNK;
            const float *w = tile;
            if (a->w_dtype == SQZ_DTYPE_F32) w = (const float *)(const void *)row + c0;
            else J->dq(row + (size_t)(c0 / J->bs) * J->ts, tile, len);
            for (int64_t i = 0; i < m; i++) acc[i] += J->dot(w, a->x + i * k + c0, len);
        }
        for (int64_t i = 0; i < m; i++) a->y[i * a->n + j] = a->bias ? acc[i] + a->bias[j] : acc[i];
    }
}

/* Many tokens: rows [b, e) of the current panel dequantized. */
static void rows_dequant(void *c, int64_t b, int64_t e, int thread) {
    (void)thread;
    const qmm_job *J = c;
    const int64_t k = J->a->k;
    for (int64_t r = b; r < e; r++)
        J->dq((const uint8_t *)J->a->w + (size_t)(J->j0 + r) * J->row_bytes, J->panel + r * k, k);
}

static void run_inline(sqz__pool *pool, int64_t n, int64_t grain, sqz__pool_fn fn, void *ctx) {
    if (pool) sqz__pool_for(pool, n, grain, fn, ctx);
    else fn(ctx, 0, n, 0);
}

/* n bytes of scratch: the pool's slot (kept between products), or malloc'd into *owned. */
static void *scratch(sqz__pool *pool, int slot, size_t n, void **owned) {
    *owned = NULL;
    if (pool) return sqz__pool_scratch(pool, slot, n);
    return *owned = sqz__malloc(n);
}

static sqz_status panels_sgemm(sqz__pool *pool, qmm_job *J) {
    const sqz_matmul_args *a = J->a;
    const int64_t P = a->n < SQZ__QMM_PANEL ? a->n : SQZ__QMM_PANEL;
    void *owned;
    J->panel = scratch(pool, 0, (size_t)P * (size_t)a->k * sizeof(float), &owned);
    if (!J->panel) return SQZ_ERR_NOMEM;
    const int64_t spin = sqz__pool_set_spin(pool, 0); /* sgemm's own threads take the cores */
    for (J->j0 = 0; J->j0 < a->n; J->j0 += P) {
        const int64_t nj = a->n - J->j0 < P ? a->n - J->j0 : P;
        run_inline(pool, nj, 8, rows_dequant, J);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)a->m, (int)nj, (int)a->k, 1.0f, a->x, (int)a->k,
                    J->panel, (int)a->k, 0.0f, a->y + J->j0, (int)a->n);
    }
    sqz__pool_set_spin(pool, spin);
    free(owned);
    if (a->bias) {
        for (int64_t i = 0; i < a->m; i++) {
            float *row = a->y + i * a->n;
            for (int64_t j = 0; j < a->n; j++) row[j] += a->bias[j];
        }
    }
    return SQZ_OK;
}

/* ---- quantized activations (qidot.h) ------------------------------------------------------- */

typedef struct qmm_ijob {
    const sqz_matmul_args *a;
    sqz__aq_kind kind;
    sqz__aq_quantize_fn quantize;
    sqz__idot_fn idot;
    sqz__idot4_fn idot4; /* 4 tokens at a time, or NULL */
    sqz__idot4_fn idot8; /* 8 tokens at a time, or NULL */
    uint8_t *xq;       /* m quantized rows of xq_bytes */
    size_t xq_bytes;
    size_t row_bytes;  /* bytes per weight row */
} qmm_ijob;

static void rows_quantize(void *c, int64_t b, int64_t e, int thread) {
    (void)thread;
    const qmm_ijob *J = c;
    for (int64_t i = b; i < e; i++)
        J->quantize(J->kind, J->a->x + i * J->a->k, J->xq + (size_t)i * J->xq_bytes, J->a->k);
}

/* Output rows [j0, j1) for tokens [i0, i1). */
static void tile_idot(const qmm_ijob *J, int64_t j0, int64_t j1, int64_t i0, int64_t i1) {
    const sqz_matmul_args *a = J->a;
    for (int64_t j = j0; j < j1; j++) {
        const uint8_t *row = (const uint8_t *)a->w + (size_t)j * J->row_bytes;
        const float bj = a->bias ? a->bias[j] : 0.0f;
        int64_t i = i0;
        for (float o[8]; J->idot8 && i + 8 <= i1; i += 8) {
            J->idot8(row, J->xq + (size_t)i * J->xq_bytes, J->xq_bytes, a->k, o);
            for (int r = 0; r < 8; r++) a->y[(i + r) * a->n + j] = o[r] + bj;
        }
        for (float o[4]; J->idot4 && i + 4 <= i1; i += 4) {
            J->idot4(row, J->xq + (size_t)i * J->xq_bytes, J->xq_bytes, a->k, o);
            for (int r = 0; r < 4; r++) a->y[(i + r) * a->n + j] = o[r] + bj;
        }
        for (; i < i1; i++) a->y[i * a->n + j] = J->idot(row, J->xq + (size_t)i * J->xq_bytes, a->k) + bj;
    }
}

/* Output rows [b, e) for every token: as many quantized tokens as fit in 256 KB (L2) against
 * every row of the range, so that the weights are read once per such tile of tokens and the
 * activations once. */
enum { SQZ__QI_TILE_BYTES = 256 * 1024 };
static void rows_idot(void *c, int64_t b, int64_t e, int thread) {
    (void)thread;
    const qmm_ijob *J = c;
    const int64_t m = J->a->m, tt = (int64_t)(SQZ__QI_TILE_BYTES / J->xq_bytes) / 4 * 4 + 4;
    for (int64_t i0 = 0; i0 < m; i0 += tt) tile_idot(J, b, e, i0, m - i0 < tt ? m : i0 + tt);
}

/* Many tokens of a block type with a panel GEMM (the 14 types with integer products, VNNI or AVX2):
 * panels of rows packed once, against every token (qidot_gemm_vnni.c, qidot_gemm_avx2.c). Below
 * this many tokens the one-row kernels (4 or 8 tokens a row) serve. */
enum { SQZ__QGEMM_MIN_TOKENS = 16 };
#if SQZ__QMM_X86
typedef struct qgemm_job {
    sqz_dtype t;
    const sqz__qgemm_impl *G;
    sqz__qgemm_args g;
    uint8_t *panels; /* each thread's panel: `each` bytes */
    size_t each;
} qgemm_job;

static void rows_xsums(void *c, int64_t b, int64_t e, int thread) {
    (void)thread;
    qgemm_job *Q = c;
    Q->G->xsums(Q->g.xq, Q->g.xq_bytes, b, e, Q->g.k, (int32_t *)(void *)Q->g.xs);
}

/* Units [b, e) of 16 rows (a VNNI panel, two AVX2 ones), packed into the thread's part of the scratch. */
static void panels_qgemm(void *c, int64_t b, int64_t e, int thread) {
    qgemm_job *Q = c;
    Q->G->rows(Q->t, &Q->g, b * 16, e * 16 < Q->g.n ? e * 16 : Q->g.n, Q->panels + (size_t)thread * Q->each);
}
#endif

static sqz_status qgemm(sqz__pool *pool, const qmm_ijob *J, const sqz__qgemm_impl *G) {
#if SQZ__QMM_X86
    const sqz_matmul_args *a = J->a;
    qgemm_job Q = {.t = a->w_dtype, .G = G, .each = (G->scratch_bytes(a->k) + 63) / 64 * 64,
                   .g = {.w = a->w, .row_bytes = J->row_bytes, .m = a->m, .n = a->n, .k = a->k, .xq = J->xq,
                         .xq_bytes = J->xq_bytes, .y = a->y, .bias = a->bias}};
    void *owned = NULL;
    if (J->kind == SQZ__AQ_Q8_0) {
        Q.g.xs = scratch(pool, 0, (size_t)a->m * (size_t)(a->k / 32) * sizeof(int32_t), &owned);
        if (!Q.g.xs) return SQZ_ERR_NOMEM;
        run_inline(pool, a->m, 8, rows_xsums, &Q);
    }
    void *owned_panels;
    Q.panels = scratch(pool, 2, (size_t)sqz__pool_threads(pool) * Q.each, &owned_panels);
    if (!Q.panels) {
        free(owned);
        return SQZ_ERR_NOMEM;
    }
    /* ~1M multiply-adds at least per chunk of panels */
    run_inline(pool, (a->n + 15) / 16, 1048576 / (16 * a->k * a->m) + 1, panels_qgemm, &Q);
    free(owned);
    free(owned_panels);
    return SQZ_OK;
#else
    (void)pool, (void)J, (void)G;
    return SQZ_ERR_UNSUPPORTED;
#endif
}

/* Y = X . W^T with X quantized as ggml-cpu quantizes it for W's type (F16/BF16: X rounded, then
 * the float product; F32 and types without integer kernels: the float product). */
static sqz_status qmatmul_q8(sqz__pool *pool, sqz__qmm_isa isa, const sqz_matmul_args *a) {
    qmm_ijob J = {.a = a, .kind = sqz__aq_kind_of(a->w_dtype), .quantize = sqz__qmm_aq_quantizer(isa),
                  .idot = sqz__qmm_idot(a->w_dtype, isa),
                  .idot4 = a->m >= 4 ? sqz__qmm_idot4(a->w_dtype, isa) : NULL,
                  .idot8 = a->m >= 8 ? sqz__qmm_idot8(a->w_dtype, isa) : NULL};
    sqz_matmul_args f = *a;
    f.acts = SQZ_ACTIVATIONS_F32;
    if (J.kind == SQZ__AQ_NONE) return sqz__qmatmul(pool, isa, &f);
    J.xq_bytes = sqz__aq_row_bytes(J.kind, a->k);
    void *owned;
    J.xq = scratch(pool, 1, (size_t)a->m * J.xq_bytes + 64, &owned);
    if (!J.xq) return SQZ_ERR_NOMEM;
    run_inline(pool, a->m, 4, rows_quantize, &J);
    sqz_status st = SQZ_OK;
    if (!J.idot) { /* F16 / BF16: the rounded activations through the float product */
        f.x = (const float *)(const void *)J.xq;
        st = sqz__qmatmul(pool, isa, &f);
    } else {
        const sqz_dtype_traits *tr = sqz_dtype_info(a->w_dtype);
        J.row_bytes = (size_t)(a->k / tr->block_size) * tr->type_size;
        const sqz__qgemm_impl *G = a->m >= SQZ__QGEMM_MIN_TOKENS ? sqz__qmm_qgemm_impl(a->w_dtype, isa) : NULL;
        if (G)
            st = qgemm(pool, &J, G);
        else /* ~64k multiply-adds per chunk of rows: enough to be worth waking a thread */
            run_inline(pool, a->n, 65536 / (a->k * a->m) + 1, rows_idot, &J);
    }
    free(owned);
    return st;
}

sqz_status sqz__qmatmul(sqz__pool *pool, sqz__qmm_isa isa, const sqz_matmul_args *a) {
    const sqz_dtype_traits *tr = sqz_dtype_info(a->w_dtype);
    SQZ_RETURN_IF(!sqz__qmm_supports(a->w_dtype), SQZ_ERR_UNSUPPORTED, "CPU matmul: weights of dtype %s",
                  sqz_dtype_name(a->w_dtype));
    SQZ_RETURN_IF(a->m < 0 || a->n < 0 || a->k < 0 || a->k % tr->block_size != 0 || a->m > INT32_MAX ||
                      a->n > INT32_MAX || a->k > INT32_MAX,
                  SQZ_ERR_INVALID_ARG, "CPU matmul: shape (%lld, %lld, %lld) for %s weights", (long long)a->m,
                  (long long)a->n, (long long)a->k, sqz_dtype_name(a->w_dtype));
    if (a->m == 0 || a->n == 0) return SQZ_OK;
    if (a->acts == SQZ_ACTIVATIONS_Q8 && a->k > 0) return qmatmul_q8(pool, isa, a);
    qmm_job J = {.a = a, .dq = sqz__qmm_dequant(a->w_dtype, isa), .dot = sqz__qmm_dot(isa),
                 .dot1 = a->m == 1 ? sqz__qmm_dot1(a->w_dtype, isa) : NULL,
                 .bs = tr->block_size, .ts = tr->type_size,
                 .row_bytes = (size_t)(a->k / tr->block_size) * tr->type_size};
    if (a->k == 0) { /* no products: the bias alone */
        for (int64_t i = 0; i < a->m; i++)
            for (int64_t j = 0; j < a->n; j++) a->y[i * a->n + j] = a->bias ? a->bias[j] : 0.0f;
        return SQZ_OK;
    }
    if (a->m >= SQZ__QMM_TILE_M) { /* many tokens: sqz's own GEMM where the ISA has one (fgemm.h), else sgemm */
        const sqz__fgemm_impl *G = sqz__fgemm_for(isa);
        return G ? sqz__fgemm(pool, G, J.dq, a) : panels_sgemm(pool, &J);
    }
    float xs_stack[1024], *xs = NULL;
    if (J.dot1) { /* the fused kernels' sums of x, once for every row */
        const int64_t nc = a->k / SQZ__XS_BLOCK;
        xs = nc <= 1024 ? xs_stack : sqz__malloc((size_t)nc * sizeof(float));
        if (!xs) return SQZ_ERR_NOMEM;
        for (int64_t c = 0; c < nc; c++) {
            float t = 0;
            for (int i = 0; i < SQZ__XS_BLOCK; i++) t += a->x[c * SQZ__XS_BLOCK + i];
            xs[c] = t;
        }
        J.xs = xs;
    }
    /* ~64k multiply-adds per chunk of rows: enough to be worth waking a thread */
    int64_t grain = 65536 / (a->k * a->m) + 1;
    run_inline(pool, a->n, grain, rows_dot, &J);
    if (xs != xs_stack) free(xs);
    return SQZ_OK;
}

/*
 * kernels/cpu/backend_cpu.c - the CPU backend: float GEMM through OpenBLAS for f32 weights;
 * weights in every other stored type with a float view (f16/bf16, the GGUF block types) are
 * multiplied from their blocks by qmatmul.h's kernels on the backend's thread pool (dot
 * products over L1 tiles for few tokens, dequantized row panels and sgemm for many), so that
 * memory stays at one panel.
 * W8A8 is exact (gemm_i8.c: AVX2, bit-identical to the scalar reference of gemm_ref.c);
 * W4A16 keeps its weights in the same prepared layout as CUDA (w4_pack.h) and widens them
 * in panels for sgemm.
 */
#include <cblas.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "kernels/cpu/backend_impl.h"
#include "core/internal.h"
#include "kernels/cpu/backend_fwd.h"
#include "kernels/cpu/gemm_i8.h"
#include "kernels/cpu/gemm_ref.h"
#include "kernels/cpu/linalg.h"
#include "kernels/cpu/qmatmul.h"
#include "kernels/cpu/w4_pack.h"
#include "sqz/backend.h"
#include "sqz/sparse.h"

typedef struct cpu_ctx {
    int n_threads;
    sqz__pool *pool;      /* n_threads threads: the stored-weight products */
    sqz__qmm_isa isa;     /* their kernels (sqz__qmm_isa_best when the backend was made) */
    atomic_flag busy;     /* set while a call uses the pool: a concurrent call runs on its own thread */
} cpu_ctx;

static bool cpu_supports(void *ctx, sqz_op op, sqz_dtype w) {
    (void)ctx;
    if (op == SQZ_OP_MATMUL) return sqz__qmm_supports(w);
    if (op == SQZ_OP_GEMM_I8) return w == SQZ_DTYPE_I8;
    if (op == SQZ_OP_GEMM_W4A16) return w == SQZ_DTYPE_Q4_0 || w == SQZ_DTYPE_Q4_1;
    if (op == SQZ_OP_GEMM_I8_SP24) return w == SQZ_DTYPE_I8;
    if (op == SQZ_OP_SGEMM || op == SQZ_OP_XTX || op == SQZ_OP_CHOL || op == SQZ_OP_TILES) return true;
    if (op == SQZ_OP_COLSTATS || op == SQZ_OP_COSINE) return true;
    if (op >= SQZ_OP_RMSNORM && op <= SQZ_OP_GELU) return true;
    if (op == SQZ_OP_TO_F32)
        return w == SQZ_DTYPE_F32 || w == SQZ_DTYPE_F16 || w == SQZ_DTYPE_BF16 || w == SQZ_DTYPE_F64;
    return false;
}

static void *cpu_alloc(void *ctx, size_t n) {
    (void)ctx;
    void *p = NULL;
    if (posix_memalign(&p, 64, n ? n : 64) != 0) {
        SQZ_ERROR(SQZ_ERR_NOMEM, "out of memory allocating %zu bytes", n);
        return NULL;
    }
    return p;
}

static void cpu_free(void *ctx, void *p) { (void)ctx; free(p); }

static sqz_status cpu_copy(void *ctx, void *dst, const void *src, size_t n) {
    (void)ctx;
    memcpy(dst, src, n);
    return SQZ_OK;
}

static sqz_status cpu_sync(void *ctx) { (void)ctx; return SQZ_OK; }

static sqz_status cpu_matmul(void *ctx, const sqz_matmul_args *a) {
    cpu_ctx *c = ctx;
    SQZ_RETURN_IF(a->m < 0 || a->n < 0 || a->k < 0, SQZ_ERR_INVALID_ARG, "matmul: negative dimension");
    if (a->w_dtype != SQZ_DTYPE_F32) { /* the pool is not reentrant: one caller at a time uses it */
        const bool mine = !atomic_flag_test_and_set(&c->busy);
        sqz_status st = sqz__qmatmul(mine ? c->pool : NULL, c->isa, a);
        if (mine) atomic_flag_clear(&c->busy);
        return st;
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)a->m, (int)a->n, (int)a->k, 1.0f, a->x, (int)a->k,
                (const float *)a->w, (int)a->k, 0.0f, a->y, (int)a->n);
    if (a->bias) {
        for (int64_t i = 0; i < a->m; i++) {
            float *row = a->y + i * a->n;
            for (int64_t j = 0; j < a->n; j++) row[j] += a->bias[j];
        }
    }
    return SQZ_OK;
}

static sqz_status check_out_dtype(const char *op, sqz_dtype t) {
    SQZ_RETURN_IF(t != SQZ_DTYPE_F32 && t != SQZ_DTYPE_F16, SQZ_ERR_INVALID_ARG,
                  "CPU %s: output dtype %s (f32 or f16 expected)", op, sqz_dtype_name(t));
    return SQZ_OK;
}

static sqz_status cpu_gemm_i8(void *ctx, const sqz_gemm_i8_args *a) {
    (void)ctx;
    SQZ_RETURN_IF(a->variant != SQZ_KVAR_AUTO, SQZ_ERR_UNSUPPORTED, "CPU gemm_i8: kernel variant %d (only auto)",
                  (int)a->variant);
    SQZ_RETURN_IF(a->m < 0 || a->n < 0 || a->k < 0, SQZ_ERR_INVALID_ARG, "CPU gemm_i8: negative dimension");
    SQZ_TRY(check_out_dtype("gemm_i8", a->y_dtype));
    SQZ_RETURN_IF(a->m > 0 && (!a->x || !a->x_scale || (a->n > 0 && (!a->w || !a->w_scale || !a->y))),
                  SQZ_ERR_INVALID_ARG, "CPU gemm_i8: a NULL buffer");
    if (a->x_f32) sqz__quantize_rows_i8_ref(a->x_f32, a->m, a->k, a->x, a->x_scale);
    /* AVX2 when the CPU has it, bit-identical to sqz__gemm_i8_ref (kernels/cpu/gemm_i8.h) */
    return sqz__gemm_i8_cpu(SQZ_I8_PATH_AUTO, a->m, a->n, a->k, a->x, a->x_scale, a->w, a->w_scale, a->y,
                           a->y_dtype);
}

/* The 2:4 sparse W8A8 GEMM: the scalar reference (kernels/cpu/gemm_i8_sp24.c), exact. */
static sqz_status cpu_gemm_i8_sp24(void *ctx, const sqz_gemm_i8_sp24_args *a) {
    (void)ctx;
    SQZ_RETURN_IF(a->m > 0 && a->n > 0 && (!a->x || !a->x_scale || !a->values || !a->meta || !a->w_scale || !a->y),
                  SQZ_ERR_INVALID_ARG, "CPU gemm_i8_sp24: a NULL buffer");
    if (a->x_f32 && a->m > 0 && a->k > 0) sqz__quantize_rows_i8_ref(a->x_f32, a->m, a->k, a->x, a->x_scale);
    return sqz_gemm_i8_sp24_ref(a->m, a->n, a->k, a->x, a->x_scale, a->values, a->meta, a->w_scale, a->y, a->y_dtype);
}

/* The CPU's prepared int4 weight: this header, then the layout of w4_pack.h. */
enum { W4_HEADER = 64 };
static const char w4_magic[8] = {'S', 'Q', 'Z', 'W', '4', 'C', 'P', 'U'};

static sqz_status cpu_prepare_w4(void *ctx, const void *src, sqz_dtype t, int64_t n, int64_t k, void **prepared) {
    *prepared = NULL;
    sqz_w4_layout L;
    SQZ_TRY(sqz__w4_layout_init(t, n, k, &L));
    size_t bytes;
    SQZ_RETURN_IF(!sqz__add_size(L.total, W4_HEADER, &bytes), SQZ_ERR_INVALID_ARG, "prepare_w4: size overflows");
    uint8_t *p = cpu_alloc(ctx, bytes);
    if (!p) return SQZ_ERR_NOMEM;
    memset(p, 0, W4_HEADER);
    memcpy(p, w4_magic, sizeof w4_magic);
    sqz__wr_u32(p + 8, (uint32_t)t);
    sqz__wr_u64(p + 16, (uint64_t)n);
    sqz__wr_u64(p + 24, (uint64_t)k);
    sqz__w4_pack(&L, src, p + W4_HEADER);
    *prepared = p;
    return SQZ_OK;
}

enum { W4_PANEL = 4 * SQZ_W4_TILE_N };

static sqz_status cpu_gemm_w4(void *ctx, const sqz_gemm_w4_args *a) {
    (void)ctx;
    SQZ_RETURN_IF(a->variant != SQZ_KVAR_AUTO, SQZ_ERR_UNSUPPORTED, "CPU gemm_w4: kernel variant %d (only auto)",
                  (int)a->variant);
    SQZ_RETURN_IF(!a->w, SQZ_ERR_INVALID_ARG, "CPU gemm_w4: no prepared weights");
    SQZ_TRY(check_out_dtype("gemm_w4", a->y_dtype));
    const uint8_t *p = a->w;
    SQZ_RETURN_IF(memcmp(p, w4_magic, sizeof w4_magic) != 0, SQZ_ERR_INVALID_ARG,
                  "CPU gemm_w4: weights were not prepared by the CPU backend's prepare_w4");
    const sqz_dtype t = (sqz_dtype)sqz__rd_u32(p + 8);
    const int64_t n = (int64_t)sqz__rd_u64(p + 16), k = (int64_t)sqz__rd_u64(p + 24);
    SQZ_RETURN_IF(n != a->n || k != a->k, SQZ_ERR_SHAPE,
                  "CPU gemm_w4: weights prepared as (%lld, %lld), called with n = %lld, k = %lld", (long long)n,
                  (long long)k, (long long)a->n, (long long)a->k);
    SQZ_RETURN_IF(a->m < 0 || a->m > INT_MAX || n > INT_MAX || k > INT_MAX, SQZ_ERR_INVALID_ARG,
                  "CPU gemm_w4: m = %lld out of range (BLAS takes int sizes)", (long long)a->m);
    if (a->m == 0) return SQZ_OK;
    SQZ_RETURN_IF(!a->x || !a->y, SQZ_ERR_INVALID_ARG, "CPU gemm_w4: a NULL buffer");
    sqz_w4_layout L;
    SQZ_TRY(sqz__w4_layout_init(t, n, k, &L));
    size_t xn, yn, panel_n, total;
    SQZ_RETURN_IF(!sqz__mul_size((size_t)a->m, (size_t)k, &xn) || !sqz__mul_size((size_t)a->m, (size_t)n, &yn) ||
                      !sqz__mul_size(W4_PANEL, (size_t)k, &panel_n) || !sqz__add_size(xn, panel_n, &total) ||
                      !sqz__add_size(total, a->y_dtype == SQZ_DTYPE_F16 ? yn : 0, &total) ||
                      !sqz__mul_size(total, sizeof(float), &total),
                  SQZ_ERR_INVALID_ARG, "CPU gemm_w4: sizes overflow");
    float *xf = sqz__malloc(total);
    if (!xf) return SQZ_ERR_NOMEM;
    float *panel = xf + xn;
    float *yf = a->y_dtype == SQZ_DTYPE_F32 ? (float *)a->y : panel + panel_n;
    for (size_t i = 0; i < xn; i++) xf[i] = sqz_fp16_to_fp32(a->x[i]);
    for (int64_t j0 = 0; j0 < n; j0 += W4_PANEL) {
        const int64_t nj = n - j0 < W4_PANEL ? n - j0 : W4_PANEL;
        sqz__w4_dequant_rows(&L, p + W4_HEADER, j0, nj, panel);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)a->m, (int)nj, (int)k, 1.0f, xf, (int)k, panel,
                    (int)k, 0.0f, yf + j0, (int)n);
    }
    if (a->y_dtype == SQZ_DTYPE_F16) {
        uint16_t *y = a->y;
        for (size_t i = 0; i < yn; i++) y[i] = sqz_fp32_to_fp16(yf[i]);
    }
    free(xf);
    return SQZ_OK;
}

static void cpu_destroy(void *ctx) {
    cpu_ctx *c = ctx;
    if (c) sqz__pool_free(c->pool);
    free(c);
}

static sqz_status cpu_sgemm(void *ctx, const sqz_sgemm_args *a) {
    (void)ctx;
    SQZ_RETURN_IF(a->m < 0 || a->n < 0 || a->k < 0 || a->m > INT_MAX || a->n > INT_MAX || a->k > INT_MAX,
                  SQZ_ERR_INVALID_ARG, "CPU sgemm: dimensions (%lld, %lld, %lld) out of range", (long long)a->m,
                  (long long)a->n, (long long)a->k);
    if (a->m && a->n) sqz__sgemm_host(a);
    return SQZ_OK;
}

static sqz_status cpu_xtx(void *ctx, const sqz_xtx_args *a) {
    (void)ctx;
    SQZ_RETURN_IF(a->m < 0 || a->k < 1 || a->k > INT_MAX || a->m > INT_MAX || (a->beta != 0.0 && a->beta != 1.0),
                  SQZ_ERR_INVALID_ARG, "CPU xtx: m %lld, k %lld, beta %g out of range", (long long)a->m,
                  (long long)a->k, a->beta);
    SQZ_TRY(sqz__xtx_check_panel(a, "CPU"));
    double *dbuf = sqz__malloc((size_t)SQZ_XTX_CHUNK * (size_t)a->k * sizeof(double));
    if (!dbuf) return SQZ_ERR_NOMEM;
    sqz__xtx_host(a, dbuf);
    free(dbuf);
    return SQZ_OK;
}

static bool dims_ok(int64_t a, int64_t b, int64_t c) {
    return a >= 0 && b >= 0 && c >= 0 && a <= INT_MAX && b <= INT_MAX && c <= INT_MAX;
}

static sqz_status cpu_dgemm(void *ctx, const sqz_dgemm_args *a) {
    (void)ctx;
    SQZ_RETURN_IF(!dims_ok(a->m, a->n, a->k), SQZ_ERR_INVALID_ARG, "CPU dgemm: dimensions (%lld, %lld, %lld) out of range",
                  (long long)a->m, (long long)a->n, (long long)a->k);
    if (a->m && a->n) sqz__dgemm_host(a);
    return SQZ_OK;
}

static sqz_status cpu_dtrsm(void *ctx, const sqz_dtrsm_args *a) {
    (void)ctx;
    SQZ_RETURN_IF(!dims_ok(a->m, a->n, 0), SQZ_ERR_INVALID_ARG, "CPU dtrsm: dimensions (%lld, %lld) out of range",
                  (long long)a->m, (long long)a->n);
    if (a->m && a->n) sqz__dtrsm_host(a);
    return SQZ_OK;
}

static sqz_status cpu_dpotrf(void *ctx, double *a, int64_t n, int64_t lda) {
    (void)ctx;
    SQZ_RETURN_IF(n < 1 || n > INT_MAX || lda < n || lda > INT_MAX, SQZ_ERR_INVALID_ARG,
                  "CPU dpotrf: n %lld, lda %lld out of range", (long long)n, (long long)lda);
    return sqz__chol_lower(a, n, lda) ? SQZ_OK : SQZ_ERROR(SQZ_ERR_NUMERIC, "Hessian is not positive definite");
}

static sqz_status cpu_colstats(void *ctx, const sqz_colstats_args *a) {
    (void)ctx;
    SQZ_RETURN_IF(a->n < 0 || a->k < 1 || (a->n > 0 && !a->x), SQZ_ERR_INVALID_ARG, "CPU colstats: n %lld, k %lld",
                  (long long)a->n, (long long)a->k);
    sqz__colstats_host(a);
    return SQZ_OK;
}

static sqz_status cpu_cosine(void *ctx, const sqz_cosine_args *a) {
    (void)ctx;
    SQZ_RETURN_IF(a->n < 0 || a->d < 1 || (a->n > 0 && (!a->a || !a->b || !a->out)), SQZ_ERR_INVALID_ARG,
                  "CPU cosine: n %lld, d %lld", (long long)a->n, (long long)a->d);
    sqz__cosine_host(a);
    return SQZ_OK;
}

static sqz_status cpu_chol(void *ctx, double *h, int64_t n) {
    (void)ctx;
    SQZ_RETURN_IF(n < 1 || n > INT_MAX, SQZ_ERR_INVALID_ARG, "CPU Cholesky: n %lld", (long long)n);
    return sqz__chol_inverse_upper(h, n);
}

static sqz_status cpu_to_f32(void *ctx, const void *src, sqz_dtype t, int64_t n, float *dst) {
    (void)ctx;
    SQZ_RETURN_IF(t != SQZ_DTYPE_F32 && t != SQZ_DTYPE_F16 && t != SQZ_DTYPE_BF16 && t != SQZ_DTYPE_F64,
                  SQZ_ERR_UNSUPPORTED, "CPU to_f32: dtype %s is not a float type", sqz_dtype_name(t));
    sqz_dtype_info(t)->to_f32(src, dst, n);
    return SQZ_OK;
}

/* The block forward's slots on the backend's pool (one caller at a time; a concurrent call runs
 * on its own thread): kernels/cpu/backend_fwd.c. */
static sqz__pool *pool_take(cpu_ctx *c) { return atomic_flag_test_and_set(&c->busy) ? NULL : c->pool; }
static void pool_give(cpu_ctx *c, sqz__pool *p) {
    if (p) atomic_flag_clear(&c->busy);
}
#define FWD_SLOT(name, T, call)                                                                                       \
    static sqz_status cpu_##name(void *ctx, const T *a) {                                                             \
        cpu_ctx *c = ctx;                                                                                             \
        sqz__pool *p = pool_take(c);                                                                                  \
        const sqz_status st = call;                                                                                   \
        pool_give(c, p);                                                                                              \
        return st;                                                                                                    \
    }
FWD_SLOT(rmsnorm, sqz_rmsnorm_args, sqz__cpu_rmsnorm(p, a))
FWD_SLOT(rope, sqz_rope_args, sqz__cpu_rope(p, a))
FWD_SLOT(attention, sqz_attention_args, sqz__cpu_attention(p, sqz__qmm_dot(c->isa), a))
FWD_SLOT(silu_mul, sqz_eltwise_args, sqz__cpu_silu_mul(p, a))
FWD_SLOT(add, sqz_eltwise_args, sqz__cpu_add(p, a))
FWD_SLOT(layernorm, sqz_layernorm_args, sqz__cpu_layernorm(p, a))
FWD_SLOT(gelu, sqz_eltwise_args, sqz__cpu_gelu(p, a))
#undef FWD_SLOT

static const sqz_backend_ops cpu_ops = {
    /* .version = */ SQZ__BACKEND_OPS_VERSION,
    /* .size = */ sizeof(sqz_backend_ops),
    /* .name = */ "cpu",
    /* .supports = */ cpu_supports,
    /* .alloc = */ cpu_alloc,
    /* .free = */ cpu_free,
    /* .upload = */ cpu_copy,
    /* .download = */ cpu_copy,
    /* .synchronize = */ cpu_sync,
    /* .matmul = */ cpu_matmul,
    /* .gemm_i8 = */ cpu_gemm_i8,
    /* .prepare_w4 = */ cpu_prepare_w4,
    /* .gemm_w4 = */ cpu_gemm_w4,
    /* .destroy = */ cpu_destroy,
    /* .gemm_i8_sp24 = */ cpu_gemm_i8_sp24,
    /* .host_memory = */ true,
    /* .sgemm = */ cpu_sgemm,
    /* .xtx = */ cpu_xtx,
    /* .chol_inv_upper = */ cpu_chol,
    /* .to_f32 = */ cpu_to_f32,
    /* .mem_stats = */ NULL,
    /* .set_mem_cap = */ NULL,
    /* .host_pin = */ NULL,
    /* .host_unpin = */ NULL,
    /* .rmsnorm = */ cpu_rmsnorm,
    /* .rope = */ cpu_rope,
    /* .attention = */ cpu_attention,
    /* .silu_mul = */ cpu_silu_mul,
    /* .add = */ cpu_add,
    /* .layernorm = */ cpu_layernorm,
    /* .gelu = */ cpu_gelu,
    /* .upload_async = */ NULL, /* host memory: nothing to copy */
    /* .copies_wait = */ NULL,
    /* .dgemm = */ cpu_dgemm,
    /* .dtrsm = */ cpu_dtrsm,
    /* .dpotrf = */ cpu_dpotrf,
    /* .colstats = */ cpu_colstats,
    /* .cosine = */ cpu_cosine,
};

const sqz_backend_ops *sqz__cpu_ops(void) { return &cpu_ops; }

sqz_status sqz_backend_cpu(int n_threads, sqz_backend **out) {
    *out = NULL;
    cpu_ctx *c = sqz__calloc(1, sizeof *c);
    sqz_backend *b = sqz__calloc(1, sizeof *b);
    if (!c || !b) { free(c); free(b); return SQZ_ERR_NOMEM; }
    c->n_threads = n_threads;
    c->isa = sqz__qmm_isa_best();
    atomic_flag_clear(&c->busy);
    sqz_status st = sqz__pool_new(n_threads, &c->pool);
    if (st != SQZ_OK) { free(c); free(b); return st; }
    if (n_threads > 0) openblas_set_num_threads(n_threads);
    b->ops = &cpu_ops;
    b->ctx = c;
    *out = b;
    return SQZ_OK;
}

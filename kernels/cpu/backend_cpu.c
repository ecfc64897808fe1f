/*
 * kernels/cpu/backend_cpu.c - the CPU backend: float GEMM through OpenBLAS.
 * Weights in f16/bf16 are widened to f32 in row panels so that memory stays bounded.
 */
#include <cblas.h>
#include <stdlib.h>

#include "core/internal.h"
#include "sqz/backend.h"

typedef struct cpu_ctx {
    int n_threads;
} cpu_ctx;

static bool cpu_supports(void *ctx, sqz_op op, sqz_dtype w) {
    (void)ctx;
    if (op == SQZ_OP_MATMUL) return w == SQZ_DTYPE_F32 || w == SQZ_DTYPE_F16 || w == SQZ_DTYPE_BF16;
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

enum { PANEL_ROWS = 256 };

static sqz_status cpu_matmul(void *ctx, const sqz_matmul_args *a) {
    (void)ctx;
    SQZ_RETURN_IF(a->m < 0 || a->n < 0 || a->k < 0, SQZ_ERR_INVALID_ARG, "matmul: negative dimension");
    if (a->w_dtype == SQZ_DTYPE_F32) {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)a->m, (int)a->n, (int)a->k, 1.0f, a->x, (int)a->k,
                    (const float *)a->w, (int)a->k, 0.0f, a->y, (int)a->n);
    } else {
        const sqz_dtype_traits *tr = sqz_dtype_info(a->w_dtype);
        SQZ_RETURN_IF(!tr || !tr->is_float, SQZ_ERR_UNSUPPORTED, "CPU matmul: weights of dtype %s",
                      sqz_dtype_name(a->w_dtype));
        float *panel = sqz__malloc((size_t)PANEL_ROWS * (size_t)a->k * sizeof(float));
        if (!panel) return SQZ_ERR_NOMEM;
        for (int64_t j0 = 0; j0 < a->n; j0 += PANEL_ROWS) {
            int64_t nj = a->n - j0 < PANEL_ROWS ? a->n - j0 : PANEL_ROWS;
            tr->to_f32((const uint8_t *)a->w + (size_t)j0 * (size_t)a->k * tr->type_size, panel, nj * a->k);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)a->m, (int)nj, (int)a->k, 1.0f, a->x,
                        (int)a->k, panel, (int)a->k, 0.0f, a->y + j0, (int)a->n);
        }
        free(panel);
    }
    if (a->bias) {
        for (int64_t i = 0; i < a->m; i++) {
            float *row = a->y + i * a->n;
            for (int64_t j = 0; j < a->n; j++) row[j] += a->bias[j];
        }
    }
    return SQZ_OK;
}

static void cpu_destroy(void *ctx) { free(ctx); }

static const sqz_backend_ops cpu_ops = {
    /* .name = */ "cpu",
    /* .supports = */ cpu_supports,
    /* .alloc = */ cpu_alloc,
    /* .free = */ cpu_free,
    /* .upload = */ cpu_copy,
    /* .download = */ cpu_copy,
    /* .synchronize = */ cpu_sync,
    /* .matmul = */ cpu_matmul,
    /* .gemm_i8 = */ NULL,
    /* .prepare_w4 = */ NULL,
    /* .gemm_w4 = */ NULL,
    /* .destroy = */ cpu_destroy,
};

sqz_status sqz_backend_cpu(int n_threads, sqz_backend **out) {
    *out = NULL;
    cpu_ctx *c = sqz__calloc(1, sizeof *c);
    sqz_backend *b = sqz__calloc(1, sizeof *b);
    if (!c || !b) { free(c); free(b); return SQZ_ERR_NOMEM; }
    c->n_threads = n_threads;
    if (n_threads > 0) openblas_set_num_threads(n_threads);
    b->ops = &cpu_ops;
    b->ctx = c;
    *out = b;
    return SQZ_OK;
}

/*
 * kernels/cpu/backend_offload.c - sqz_backend_cpu_offload: the CPU backend's slots behind the
 * device interface (host_memory false), with the device's memory accounting (mem_stats,
 * set_mem_cap), so that the device code paths and --gpu-mem's refusals run in CI without a GPU.
 * Its "device memory" is host memory; alloc() records each buffer's size in a table (buffers it
 * did not make, e.g. prepare_w4's, are freed untracked).
 */
#include <pthread.h>
#include <stdlib.h>

#include "kernels/cpu/backend_impl.h"
#include "core/internal.h"
#include "kernels/cpu/linalg.h"

typedef struct rec {
    void *p;
    size_t n;
} rec;

typedef struct offload_ctx {
    void *cpu;             /* the CPU backend's context: every other slot */
    pthread_mutex_t mu;
    rec *recs;
    size_t n_recs, cap_recs;
    size_t in_use, peak, cap;
} offload_ctx;

static sqz_backend_ops offload_ops;

/* Room for one more record; false (SQZ_ERR_NOMEM recorded) when the table cannot grow. */
static bool recs_room(offload_ctx *c) {
    if (c->n_recs < c->cap_recs) return true;
    const size_t cap = c->cap_recs * 2 + 64;
    rec *r = sqz__realloc(c->recs, cap * sizeof *r);
    if (!r) return false;
    c->recs = r;
    c->cap_recs = cap;
    return true;
}

static void *off_alloc(void *ctx, size_t n) {
    offload_ctx *c = ctx;
    pthread_mutex_lock(&c->mu);
    void *p = NULL;
    if (c->cap && c->in_use + n > c->cap)
        SQZ_ERROR(SQZ_ERR_NOMEM, "cpu-offload: allocating %.1f MB would exceed --gpu-mem %.1f MB (%.1f MB in use)",
                  (double)n / 1e6, (double)c->cap / 1e6, (double)c->in_use / 1e6);
    else if (recs_room(c) && (p = sqz__cpu_ops()->alloc(c->cpu, n))) {
        c->recs[c->n_recs++] = (rec){p, n};
        c->in_use += n;
        if (c->in_use > c->peak) c->peak = c->in_use;
    }
    pthread_mutex_unlock(&c->mu);
    return p;
}

static void off_free(void *ctx, void *p) {
    offload_ctx *c = ctx;
    if (!p) return;
    pthread_mutex_lock(&c->mu);
    for (size_t i = c->n_recs; i-- > 0;)
        if (c->recs[i].p == p) {
            c->in_use -= c->recs[i].n;
            c->recs[i] = c->recs[--c->n_recs];
            break;
        }
    pthread_mutex_unlock(&c->mu);
    free(p);
}

static void off_stats(void *ctx, sqz_backend_mem *out) {
    offload_ctx *c = ctx;
    pthread_mutex_lock(&c->mu);
    *out = (sqz_backend_mem){c->in_use, c->peak, c->cap};
    pthread_mutex_unlock(&c->mu);
}

static sqz_status off_set_cap(void *ctx, size_t cap) {
    offload_ctx *c = ctx;
    pthread_mutex_lock(&c->mu);
    const size_t used = c->in_use;
    if (cap == 0 || used <= cap) c->cap = cap;
    pthread_mutex_unlock(&c->mu);
    SQZ_RETURN_IF(cap && used > cap, SQZ_ERR_NOMEM, "cpu-offload: --gpu-mem %.1f MB is less than the %.1f MB in use",
                  (double)cap / 1e6, (double)used / 1e6);
    return SQZ_OK;
}

static void off_destroy(void *ctx) {
    offload_ctx *c = ctx;
    sqz__cpu_ops()->destroy(c->cpu);
    pthread_mutex_destroy(&c->mu);
    free(c->recs);
    free(c);
}

/* Every other slot forwards to the CPU backend's, with its context. */
#define FWD(slot, T)                                                                                                  \
    static sqz_status off_##slot(void *ctx, const T *a) { return sqz__cpu_ops()->slot(((offload_ctx *)ctx)->cpu, a); }
FWD(matmul, sqz_matmul_args)
FWD(gemm_i8, sqz_gemm_i8_args)
FWD(gemm_w4, sqz_gemm_w4_args)
FWD(gemm_i8_sp24, sqz_gemm_i8_sp24_args)
FWD(sgemm, sqz_sgemm_args)
FWD(xtx, sqz_xtx_args)
FWD(rmsnorm, sqz_rmsnorm_args)
FWD(rope, sqz_rope_args)
FWD(attention, sqz_attention_args)
FWD(silu_mul, sqz_eltwise_args)
FWD(add, sqz_eltwise_args)
FWD(layernorm, sqz_layernorm_args)
FWD(gelu, sqz_eltwise_args)
FWD(dgemm, sqz_dgemm_args)
FWD(dtrsm, sqz_dtrsm_args)
FWD(colstats, sqz_colstats_args)
FWD(cosine, sqz_cosine_args)
#undef FWD
static bool off_supports(void *ctx, sqz_op op, sqz_dtype w) {
    return sqz__cpu_ops()->supports(((offload_ctx *)ctx)->cpu, op, w);
}
static sqz_status off_copy(void *ctx, void *dst, const void *src, size_t n) {
    return sqz__cpu_ops()->upload(((offload_ctx *)ctx)->cpu, dst, src, n);
}
static sqz_status off_sync(void *ctx) { return sqz__cpu_ops()->synchronize(((offload_ctx *)ctx)->cpu); }
static sqz_status off_prepare_w4(void *ctx, const void *src, sqz_dtype t, int64_t n, int64_t k, void **prepared) {
    return sqz__cpu_ops()->prepare_w4(((offload_ctx *)ctx)->cpu, src, t, n, k, prepared);
}
static sqz_status off_chol(void *ctx, double *h, int64_t n) {
    return sqz__cpu_ops()->chol_inv_upper(((offload_ctx *)ctx)->cpu, h, n);
}
static sqz_status off_dpotrf(void *ctx, double *a, int64_t n, int64_t lda) {
    return sqz__cpu_ops()->dpotrf(((offload_ctx *)ctx)->cpu, a, n, lda);
}
static sqz_status off_to_f32(void *ctx, const void *src, sqz_dtype t, int64_t n, float *dst) {
    return sqz__cpu_ops()->to_f32(((offload_ctx *)ctx)->cpu, src, t, n, dst);
}

/* The copy stream of a device is a memcpy here: the copy has landed when the call returns. */
static sqz_status off_copies_wait(void *ctx) {
    (void)ctx;
    return SQZ_OK;
}

static void offload_init(void) {
    offload_ops = (sqz_backend_ops){
        SQZ__BACKEND_OPS_VERSION, sizeof(sqz_backend_ops), "cpu-offload", off_supports, off_alloc, off_free, off_copy, off_copy, off_sync, off_matmul, off_gemm_i8,
        off_prepare_w4, off_gemm_w4, off_destroy, off_gemm_i8_sp24, false, off_sgemm, off_xtx, off_chol,
        off_to_f32, off_stats, off_set_cap, NULL, NULL, off_rmsnorm, off_rope, off_attention, off_silu_mul,
        off_add, off_layernorm, off_gelu, off_copy, off_copies_wait, off_dgemm, off_dtrsm, off_dpotrf,
        off_colstats, off_cosine};
}

sqz_status sqz_backend_cpu_offload(int n_threads, sqz_backend **out) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, offload_init);
    offload_ctx *c = sqz__calloc(1, sizeof *c);
    if (!c) return SQZ_ERR_NOMEM;
    sqz_status st = sqz_backend_cpu(n_threads, out);
    if (st != SQZ_OK) {
        free(c);
        return st;
    }
    c->cpu = (*out)->ctx; /* the CPU backend's table object is reused: ops and ctx replaced */
    pthread_mutex_init(&c->mu, NULL);
    (*out)->ops = &offload_ops;
    (*out)->ctx = c;
    return SQZ_OK;
}

/*
 * kernels/cuda/backend_cuda.cu - the CUDA backend behind sqz/backend.h: device selection,
 * one non-blocking stream, cuBLAS / cuBLASLt handles, allocation and copies, error
 * reporting (statement, file, line and the CUDA / cuBLAS text through sqz_status and
 * sqz_last_error), the memory accounting (--gpu-mem), and the dispatch of the GEMM ops to their
 * kernel variants (the calibration slots are calib_cuda.cu, the block forward's fwd_cuda.cu).
 */
#include <limits.h>

#include "kernels/cpu/backend_impl.h"
#include "kernels/cuda/backend_cuda.cuh"
#include "kernels/cuda/calib_cuda.cuh"
#include "kernels/cuda/fwd_cuda.cuh"
#include "kernels/cuda/gemm_i8_lt.cuh"
#include "kernels/cuda/gemm_i8_mma.cuh"
#include "kernels/cuda/gemm_i8_sp24.cuh"
#include "kernels/cuda/gemm_w4.cuh"
#include "kernels/cuda/quantize_i8.cuh"

/* ---- errors ---------------------------------------------------------------------- */
sqz_status sqz__cuda_error(cudaError_t e, const char *stmt, const char *file, int line) {
    const sqz_status s = e == cudaErrorMemoryAllocation ? SQZ_ERR_NOMEM : SQZ_ERR_DEVICE;
    return sqz__error(s, file, line, "%s: %s: %s", stmt, cudaGetErrorName(e), cudaGetErrorString(e));
}

sqz_status sqz__cublas_error(cublasStatus_t e, const char *stmt, const char *file, int line) {
    const sqz_status s = e == CUBLAS_STATUS_ALLOC_FAILED ? SQZ_ERR_NOMEM
                         : e == CUBLAS_STATUS_NOT_SUPPORTED ? SQZ_ERR_UNSUPPORTED
                                                            : SQZ_ERR_DEVICE;
    return sqz__error(s, file, line, "%s: %s: %s", stmt, cublasGetStatusName(e), cublasGetStatusString(e));
}

/* ---- context helpers ------------------------------------------------------------- */
sqz_status sqz__cuda_enter(sqz_cuda_ctx *c) {
    SQZ_CUDA_TRY(cudaSetDevice(c->device));
    return SQZ_OK;
}

/* ---- memory accounting ----------------------------------------------------------- */
static double mb(size_t bytes) { return (double)bytes / (1024.0 * 1024.0); }

sqz_status sqz__cuda_mem_charge(sqz_cuda_ctx *c, size_t bytes) {
    SQZ_RETURN_IF(c->mem_cap && (bytes > c->mem_cap || c->mem_in_use > c->mem_cap - bytes), SQZ_ERR_NOMEM,
                  "CUDA: allocating %.1f MB would exceed --gpu-mem %.1f MB (%.1f MB in use)", mb(bytes),
                  mb(c->mem_cap), mb(c->mem_in_use));
    c->mem_in_use += bytes;
    if (c->mem_in_use > c->mem_peak) c->mem_peak = c->mem_in_use;
    return SQZ_OK;
}

void sqz__cuda_mem_uncharge(sqz_cuda_ctx *c, size_t bytes) {
    c->mem_in_use = bytes < c->mem_in_use ? c->mem_in_use - bytes : 0;
}

static sqz_status alloc_track(sqz_cuda_ctx *c, void *p, size_t bytes) {
    if (c->n_allocs == c->cap_allocs) {
        const size_t cap = c->cap_allocs ? 2 * c->cap_allocs : 64;
        sqz__cuda_alloc_rec *r = (sqz__cuda_alloc_rec *)sqz__realloc(c->allocs, cap * sizeof *r);
        if (!r) return SQZ_ERR_NOMEM;
        c->allocs = r;
        c->cap_allocs = cap;
    }
    c->allocs[c->n_allocs].ptr = p;
    c->allocs[c->n_allocs].bytes = bytes;
    c->n_allocs++;
    return SQZ_OK;
}

/* Drops p from the table (newest first: buffers tend to be freed in reverse order) and
 * returns its size to the accounting. */
static void alloc_forget(sqz_cuda_ctx *c, const void *p) {
    for (size_t i = c->n_allocs; i-- > 0;)
        if (c->allocs[i].ptr == p) {
            sqz__cuda_mem_uncharge(c, c->allocs[i].bytes);
            c->allocs[i] = c->allocs[--c->n_allocs];
            return;
        }
}

static void cuda_mem_stats(void *ctx, sqz_backend_mem *out) {
    const sqz_cuda_ctx *c = (const sqz_cuda_ctx *)ctx;
    out->in_use = c->mem_in_use;
    out->peak = c->mem_peak;
    out->cap = c->mem_cap;
}

static sqz_status cuda_set_mem_cap(void *ctx, size_t cap) {
    sqz_cuda_ctx *c = (sqz_cuda_ctx *)ctx;
    SQZ_RETURN_IF(cap && c->mem_in_use > cap, SQZ_ERR_NOMEM,
                  "CUDA: --gpu-mem %.1f MB is less than the %.1f MB already in use on device %d", mb(cap),
                  mb(c->mem_in_use), c->device);
    c->mem_cap = cap;
    return SQZ_OK;
}

/* Releases the scratch buffer after the work queued on the stream. */
static cudaError_t scratch_release(sqz_cuda_ctx *c) {
    cudaError_t e = cudaSuccess;
    if (c->scratch) {
        if (c->mem_pools) e = cudaFreeAsync(c->scratch, c->stream);
        else if ((e = cudaStreamSynchronize(c->stream)) == cudaSuccess) e = cudaFree(c->scratch);
        sqz__cuda_mem_uncharge(c, c->scratch_bytes);
    }
    c->scratch = NULL;
    c->scratch_bytes = 0;
    return e;
}

size_t sqz__cuda_scratch_fit(const sqz_cuda_ctx *c, size_t want, size_t min) {
    if (!c->mem_cap) return want;
    const size_t others = c->mem_in_use - c->scratch_bytes;
    const size_t room = c->mem_cap > others ? c->mem_cap - others : 0;
    return room >= want ? want : room >= min ? room : min;
}

sqz_status sqz__cuda_scratch(sqz_cuda_ctx *c, size_t bytes, void **out) {
    if (bytes > c->scratch_bytes) {
        size_t want = bytes + bytes / 4; /* some headroom against regrowing */
        if (want < ((size_t)4 << 20)) want = (size_t)4 << 20;
        want = sqz__cuda_scratch_fit(c, want, bytes); /* under a cap: no headroom rather than failing */
        SQZ_CUDA_TRY(scratch_release(c));
        SQZ_TRY(sqz__cuda_mem_charge(c, want));
        cudaError_t e = c->mem_pools ? cudaMallocAsync(&c->scratch, want, c->stream) : cudaMalloc(&c->scratch, want);
        if (e != cudaSuccess) {
            c->scratch = NULL;
            sqz__cuda_mem_uncharge(c, want);
            return sqz__cuda_error(e, "scratch cudaMalloc", __FILE__, __LINE__);
        }
        c->scratch_bytes = want;
    }
    *out = c->scratch;
    return SQZ_OK;
}

const sqz__w4_entry *sqz__cuda_w4_find(const sqz_cuda_ctx *c, const void *ptr) {
    for (size_t i = 0; i < c->n_w4; i++)
        if (c->w4[i].ptr == ptr) return &c->w4[i];
    return NULL;
}

sqz_status sqz__cuda_w4_register(sqz_cuda_ctx *c, const void *ptr, const sqz_w4_layout *L) {
    if (c->n_w4 == c->cap_w4) {
        const size_t cap = c->cap_w4 ? 2 * c->cap_w4 : 64;
        sqz__w4_entry *e = (sqz__w4_entry *)sqz__realloc(c->w4, cap * sizeof *e);
        if (!e) return SQZ_ERR_NOMEM;
        c->w4 = e;
        c->cap_w4 = cap;
    }
    c->w4[c->n_w4].ptr = ptr;
    c->w4[c->n_w4].layout = *L;
    c->n_w4++;
    return SQZ_OK;
}

static void w4_forget(sqz_cuda_ctx *c, const void *ptr) {
    for (size_t i = 0; i < c->n_w4; i++)
        if (c->w4[i].ptr == ptr) { c->w4[i] = c->w4[--c->n_w4]; return; }
}

/* ---- ops ------------------------------------------------------------------------- */
static bool cuda_supports(void *ctx, sqz_op op, sqz_dtype w) {
    (void)ctx;
    const bool float_w = w == SQZ_DTYPE_F32 || w == SQZ_DTYPE_F16 || w == SQZ_DTYPE_BF16;
    if (op == SQZ_OP_MATMUL) return float_w;
    if (op == SQZ_OP_TO_F32) return float_w || w == SQZ_DTYPE_F64; /* f64: GPTQ's factor, narrowed */
    if (op == SQZ_OP_GEMM_I8) return w == SQZ_DTYPE_I8;
    if (op == SQZ_OP_GEMM_W4A16) return w == SQZ_DTYPE_Q4_0 || w == SQZ_DTYPE_Q4_1;
    if (op == SQZ_OP_GEMM_I8_SP24) return w == SQZ_DTYPE_I8;
    if (op >= SQZ_OP_RMSNORM && op <= SQZ_OP_GELU)
        return true; /* the block forward (fwd_cuda.cu): f32, w_dtype ignored */
    return op == SQZ_OP_SGEMM || op == SQZ_OP_XTX || op == SQZ_OP_CHOL || op == SQZ_OP_TILES || op == SQZ_OP_COLSTATS ||
           op == SQZ_OP_COSINE;
}

static void *cuda_alloc(void *ctx, size_t n) {
    sqz_cuda_ctx *c = (sqz_cuda_ctx *)ctx;
    void *p = NULL;
    const size_t bytes = n ? n : 1;
    if (sqz__cuda_enter(c) != SQZ_OK || sqz__cuda_mem_charge(c, bytes) != SQZ_OK) return NULL;
    const cudaError_t e = cudaMalloc(&p, bytes);
    if (e != cudaSuccess) {
        sqz__cuda_mem_uncharge(c, bytes);
        sqz__cuda_error(e, "cudaMalloc", __FILE__, __LINE__);
        sqz__error_prefix("allocating %zu bytes on CUDA device %d", n, c->device);
        return NULL;
    }
    if (alloc_track(c, p, bytes) != SQZ_OK) {
        sqz__cuda_mem_uncharge(c, bytes);
        cudaFree(p);
        return NULL;
    }
    return p;
}

static void cuda_free(void *ctx, void *p) {
    sqz_cuda_ctx *c = (sqz_cuda_ctx *)ctx;
    if (!p) return;
    w4_forget(c, p);
    alloc_forget(c, p);
    if (sqz__cuda_enter(c) == SQZ_OK) cudaFree(p); /* nothing sensible to do on failure */
}

/* Copies are synchronous on return: the host buffer may be reused or read at once. */
static sqz_status cuda_upload(void *ctx, void *dst, const void *src, size_t n) {
    sqz_cuda_ctx *c = (sqz_cuda_ctx *)ctx;
    SQZ_TRY(sqz__cuda_enter(c));
    SQZ_CUDA_TRY(cudaMemcpyAsync(dst, src, n, cudaMemcpyHostToDevice, c->stream));
    SQZ_CUDA_TRY(cudaStreamSynchronize(c->stream));
    return SQZ_OK;
}

/* A block's weights while the block before it computes: the copy stream, made on first use. */
static sqz_status cuda_upload_async(void *ctx, void *dst, const void *src, size_t n) {
    sqz_cuda_ctx *c = (sqz_cuda_ctx *)ctx;
    SQZ_TRY(sqz__cuda_enter(c));
    if (!c->copy_stream) SQZ_CUDA_TRY(cudaStreamCreateWithFlags(&c->copy_stream, cudaStreamNonBlocking));
    SQZ_CUDA_TRY(cudaMemcpyAsync(dst, src, n, cudaMemcpyHostToDevice, c->copy_stream));
    return SQZ_OK;
}

static sqz_status cuda_copies_wait(void *ctx) {
    sqz_cuda_ctx *c = (sqz_cuda_ctx *)ctx;
    SQZ_TRY(sqz__cuda_enter(c));
    if (c->copy_stream) SQZ_CUDA_TRY(cudaStreamSynchronize(c->copy_stream));
    return SQZ_OK;
}

static sqz_status cuda_download(void *ctx, void *dst, const void *src, size_t n) {
    sqz_cuda_ctx *c = (sqz_cuda_ctx *)ctx;
    SQZ_TRY(sqz__cuda_enter(c));
    SQZ_CUDA_TRY(cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToHost, c->stream));
    SQZ_CUDA_TRY(cudaStreamSynchronize(c->stream));
    return SQZ_OK;
}

static sqz_status cuda_host_pin(void *ctx, void *p, size_t n) {
    sqz_cuda_ctx *c = (sqz_cuda_ctx *)ctx;
    SQZ_TRY(sqz__cuda_enter(c));
    const cudaError_t e = cudaHostRegister(p, n, cudaHostRegisterDefault);
    if (e == cudaSuccess) return SQZ_OK;
    (void)cudaGetLastError(); /* not sticky: clear it, or the next launch check would report it */
    return sqz__cuda_error(e, "cudaHostRegister", __FILE__, __LINE__);
}

static void cuda_host_unpin(void *ctx, void *p) {
    sqz_cuda_ctx *c = (sqz_cuda_ctx *)ctx;
    if (sqz__cuda_enter(c) == SQZ_OK) (void)cudaHostUnregister(p);
}

static sqz_status cuda_sync(void *ctx) {
    sqz_cuda_ctx *c = (sqz_cuda_ctx *)ctx;
    SQZ_TRY(sqz__cuda_enter(c));
    SQZ_CUDA_TRY(cudaStreamSynchronize(c->stream));
    return SQZ_OK;
}

static sqz_status check_out_dtype(const char *op, sqz_dtype t) {
    SQZ_RETURN_IF(t != SQZ_DTYPE_F32 && t != SQZ_DTYPE_F16, SQZ_ERR_INVALID_ARG,
                  "CUDA %s: output dtype %s (f32 or f16 expected)", op, sqz_dtype_name(t));
    return SQZ_OK;
}

/* Runs one concrete W8A8 variant. */
static sqz_status i8_run(sqz_cuda_ctx *c, const sqz_gemm_i8_args *a, sqz_kernel_variant v) {
    if (v == SQZ_KVAR_I8_CUBLASLT) return sqz__i8_lt_gemm(c, a);
    return sqz__i8_mma_gemm(c, a, v == SQZ_KVAR_I8_MMA_FUSED);
}

static int64_t m_bucket(int64_t m) {
    int64_t b = 1;
    while (b < m) b <<= 1;
    return b;
}

/* AUTO: every W8A8 variant gives the same bytes (integer accumulation, same epilogue), so
 * AUTO may pick by speed without changing results. The first call of a shape (m rounded
 * up to a power of two) times each applicable variant with CUDA events (a stream
 * synchronization) and remembers the fastest; later calls run it directly. */
static sqz_status i8_auto(sqz_cuda_ctx *c, const sqz_gemm_i8_args *a) {
    const int64_t mb = m_bucket(a->m);
    const int f32 = a->x_f32 != NULL;
    for (int i = 0; i < SQZ__I8_CHOICES; i++) {
        const sqz__i8_choice *h = &c->i8_choices[i];
        if (h->variant != SQZ_KVAR_AUTO && h->m_bucket == mb && h->n == a->n && h->k == a->k && h->f32_input == f32)
            return i8_run(c, a, h->variant);
    }
    sqz_kernel_variant cands[3];
    int nc = 0;
    if (f32) cands[nc++] = SQZ_KVAR_I8_MMA_FUSED;
    cands[nc++] = SQZ_KVAR_I8_MMA;
    if (a->k > 0) cands[nc++] = SQZ_KVAR_I8_CUBLASLT;
    cudaEvent_t e0 = NULL, e1 = NULL;
    SQZ_CUDA_TRY(cudaEventCreate(&e0));
    sqz_status s = SQZ_OK;
    if (cudaEventCreate(&e1) != cudaSuccess) s = sqz__cuda_error(cudaGetLastError(), "cudaEventCreate", __FILE__, __LINE__);
    sqz_kernel_variant best = SQZ_KVAR_AUTO;
    float best_ms = 0.0f;
    for (int i = 0; i < nc && s == SQZ_OK; i++) {
        s = i8_run(c, a, cands[i]); /* warm-up (plans, scratch); also leaves a valid result in y */
        if (s == SQZ_ERR_UNSUPPORTED) { /* cuBLASLt's rules or algorithms: not a candidate */
            sqz_clear_error();
            s = SQZ_OK;
            continue;
        }
        if (s != SQZ_OK) break;
        float ms = 0.0f;
        cudaError_t e = cudaEventRecord(e0, c->stream);
        for (int r = 0; r < 2 && e == cudaSuccess && s == SQZ_OK; r++) s = i8_run(c, a, cands[i]);
        if (s != SQZ_OK) break;
        if (e == cudaSuccess) e = cudaEventRecord(e1, c->stream);
        if (e == cudaSuccess) e = cudaEventSynchronize(e1);
        if (e == cudaSuccess) e = cudaEventElapsedTime(&ms, e0, e1);
        if (e != cudaSuccess) { s = sqz__cuda_error(e, "timing W8A8 variants", __FILE__, __LINE__); break; }
        if (best == SQZ_KVAR_AUTO || ms < best_ms) { best = cands[i]; best_ms = ms; }
    }
    cudaEventDestroy(e0);
    if (e1) cudaEventDestroy(e1);
    if (s != SQZ_OK) return s;
    if (best == SQZ_KVAR_AUTO) return SQZ_ERROR(SQZ_ERR_DEVICE, "CUDA gemm_i8: no W8A8 variant could run");
    sqz__i8_choice *h = &c->i8_choices[c->next_choice];
    c->next_choice = (c->next_choice + 1) % SQZ__I8_CHOICES;
    h->m_bucket = mb;
    h->n = a->n;
    h->k = a->k;
    h->f32_input = f32;
    h->variant = best;
    return SQZ_OK; /* y holds the last candidate's result, identical to the winner's */
}

static sqz_status cuda_gemm_i8(void *ctx, const sqz_gemm_i8_args *a) {
    sqz_cuda_ctx *c = (sqz_cuda_ctx *)ctx;
    SQZ_RETURN_IF(a->m < 0 || a->n < 0 || a->k < 0 || a->m > INT_MAX || a->n > INT_MAX, SQZ_ERR_INVALID_ARG,
                  "CUDA gemm_i8: dimensions (%lld, %lld, %lld) out of range", (long long)a->m, (long long)a->n,
                  (long long)a->k);
    SQZ_RETURN_IF(a->k > SQZ_GEMM_I8_MAX_K, SQZ_ERR_INVALID_ARG,
                  "CUDA gemm_i8: k = %lld exceeds %d (the int32 accumulator could overflow)", (long long)a->k,
                  SQZ_GEMM_I8_MAX_K);
    SQZ_TRY(check_out_dtype("gemm_i8", a->y_dtype));
    SQZ_RETURN_IF(a->variant != SQZ_KVAR_AUTO && a->variant != SQZ_KVAR_I8_CUBLASLT && a->variant != SQZ_KVAR_I8_MMA &&
                      a->variant != SQZ_KVAR_I8_MMA_FUSED,
                  SQZ_ERR_UNSUPPORTED, "CUDA gemm_i8: kernel variant %d is not a W8A8 variant", (int)a->variant);
    SQZ_RETURN_IF(a->variant == SQZ_KVAR_I8_MMA_FUSED && !a->x_f32, SQZ_ERR_INVALID_ARG,
                  "CUDA gemm_i8: the fused variant quantizes x_f32, which is NULL");
    SQZ_RETURN_IF(a->m > 0 && (!a->x || !a->x_scale || (a->n > 0 && (!a->w || !a->w_scale || !a->y))),
                  SQZ_ERR_INVALID_ARG, "CUDA gemm_i8: a NULL buffer");
    SQZ_TRY(sqz__cuda_enter(c));
    if (a->m == 0) return SQZ_OK;
    if (a->n == 0) { /* no output, but x / x_scale are still outputs when x_f32 is given */
        if (a->x_f32) return sqz__i8_quantize_rows(c, a->x_f32, a->m, a->k, a->x, a->x_scale);
        return SQZ_OK;
    }
    if (a->variant == SQZ_KVAR_AUTO) return i8_auto(c, a);
    return i8_run(c, a, a->variant);
}

static sqz_status cuda_prepare_w4(void *ctx, const void *src, sqz_dtype t, int64_t n, int64_t k, void **prepared) {
    sqz_cuda_ctx *c = (sqz_cuda_ctx *)ctx;
    *prepared = NULL;
    sqz_w4_layout L;
    SQZ_TRY(sqz__w4_layout_init(t, n, k, &L));
    SQZ_RETURN_IF(n > INT_MAX || L.n_tiles * L.k_steps > INT_MAX / 32, SQZ_ERR_INVALID_ARG,
                  "prepare_w4: weight (%lld, %lld) too large for the CUDA kernels", (long long)n, (long long)k);
    uint8_t *host = (uint8_t *)sqz__malloc(L.total);
    if (!host) return SQZ_ERR_NOMEM;
    sqz__w4_pack(&L, src, host);
    void *dev = cuda_alloc(c, L.total);
    sqz_status s = dev ? cuda_upload(c, dev, host, L.total) : SQZ_ERR_NOMEM;
    free(host);
    if (s == SQZ_OK) s = sqz__cuda_w4_register(c, dev, &L);
    if (s != SQZ_OK) {
        cuda_free(c, dev);
        return s;
    }
    *prepared = dev;
    return SQZ_OK;
}

static sqz_status cuda_gemm_w4(void *ctx, const sqz_gemm_w4_args *a) {
    sqz_cuda_ctx *c = (sqz_cuda_ctx *)ctx;
    SQZ_TRY(check_out_dtype("gemm_w4", a->y_dtype));
    SQZ_RETURN_IF(a->variant != SQZ_KVAR_AUTO && a->variant != SQZ_KVAR_W4_MMA && a->variant != SQZ_KVAR_W4_DEQUANT_F16,
                  SQZ_ERR_UNSUPPORTED, "CUDA gemm_w4: kernel variant %d is not a W4A16 variant", (int)a->variant);
    const sqz__w4_entry *e = sqz__cuda_w4_find(c, a->w);
    SQZ_RETURN_IF(!e, SQZ_ERR_INVALID_ARG, "CUDA gemm_w4: weights %p were not prepared by this backend's prepare_w4",
                  a->w);
    SQZ_RETURN_IF(e->layout.n != a->n || e->layout.k != a->k, SQZ_ERR_SHAPE,
                  "CUDA gemm_w4: weights prepared as (%lld, %lld), called with n = %lld, k = %lld",
                  (long long)e->layout.n, (long long)e->layout.k, (long long)a->n, (long long)a->k);
    SQZ_RETURN_IF(a->m < 0 || a->m > INT_MAX, SQZ_ERR_INVALID_ARG, "CUDA gemm_w4: m = %lld out of range",
                  (long long)a->m);
    SQZ_RETURN_IF(a->m > 0 && (!a->x || !a->y), SQZ_ERR_INVALID_ARG, "CUDA gemm_w4: a NULL buffer");
    SQZ_RETURN_IF(!sqz__aligned(a->x, 16), SQZ_ERR_INVALID_ARG, "CUDA gemm_w4: x must be 16-byte aligned");
    SQZ_TRY(sqz__cuda_enter(c));
    if (a->m == 0) return SQZ_OK;
    if (a->variant == SQZ_KVAR_W4_DEQUANT_F16) return sqz__w4_dequant_gemm(c, a, e);
    return sqz__w4_mma_gemm(c, a, e);
}

static void cuda_destroy(void *ctx) {
    sqz_cuda_ctx *c = (sqz_cuda_ctx *)ctx;
    if (!c) return;
    if (cudaSetDevice(c->device) == cudaSuccess && c->stream) cudaStreamSynchronize(c->stream);
    sqz__i8_lt_plans_free(c);
    sqz__calib_free(c);
    if (c->lt) cublasLtDestroy(c->lt);
    if (c->blas) cublasDestroy(c->blas);
    scratch_release(c);
    if (c->lt_ws) cudaFree(c->lt_ws);
    /* prepared weights the caller did not free() belong to the context and go with it */
    for (size_t i = 0; i < c->n_w4; i++) cudaFree((void *)c->w4[i].ptr);
    free(c->w4);
    free(c->allocs); /* buffers still allocated die with the CUDA context's process, as before */
    if (c->stream) {
        cudaStreamSynchronize(c->stream);
        cudaStreamDestroy(c->stream);
    }
    if (c->copy_stream) {
        cudaStreamSynchronize(c->copy_stream);
        cudaStreamDestroy(c->copy_stream);
    }
    free(c);
}

/* The 2:4 sparse W8A8 GEMM (gemm_i8_sp24.cu): mma.sp m16n8k64, k a multiple of 64. */
static sqz_status cuda_gemm_i8_sp24(void *ctx, const sqz_gemm_i8_sp24_args *a) {
    sqz_cuda_ctx *c = (sqz_cuda_ctx *)ctx;
    SQZ_RETURN_IF(a->m < 0 || a->n < 0 || a->k < 0 || a->k > SQZ_GEMM_I8_MAX_K, SQZ_ERR_INVALID_ARG,
                  "CUDA gemm_i8_sp24: dimensions (%lld, %lld, %lld) out of range", (long long)a->m, (long long)a->n,
                  (long long)a->k);
    SQZ_TRY(check_out_dtype("gemm_i8_sp24", a->y_dtype));
    SQZ_RETURN_IF(a->m > 0 && (!a->x || !a->x_scale || (a->n > 0 && (!a->values || !a->meta || !a->w_scale || !a->y))),
                  SQZ_ERR_INVALID_ARG, "CUDA gemm_i8_sp24: a NULL buffer");
    SQZ_TRY(sqz__cuda_enter(c));
    return sqz__i8_sp24_gemm(c, a);
}

static const sqz_backend_ops cuda_ops = {
    /* .version = */ SQZ__BACKEND_OPS_VERSION,
    /* .size = */ sizeof(sqz_backend_ops),
    /* .name = */ "cuda",
    /* .supports = */ cuda_supports,
    /* .alloc = */ cuda_alloc,
    /* .free = */ cuda_free,
    /* .upload = */ cuda_upload,
    /* .download = */ cuda_download,
    /* .synchronize = */ cuda_sync,
    /* .matmul = */ sqz__cuda_matmul,
    /* .gemm_i8 = */ cuda_gemm_i8,
    /* .prepare_w4 = */ cuda_prepare_w4,
    /* .gemm_w4 = */ cuda_gemm_w4,
    /* .destroy = */ cuda_destroy,
    /* .gemm_i8_sp24 = */ cuda_gemm_i8_sp24,
    /* .host_memory = */ false,
    /* .sgemm = */ sqz__cuda_sgemm,
    /* .xtx = */ sqz__cuda_xtx,
    /* .chol_inv_upper = */ sqz__cuda_chol_inv_upper,
    /* .to_f32 = */ sqz__cuda_to_f32,
    /* .mem_stats = */ cuda_mem_stats,
    /* .set_mem_cap = */ cuda_set_mem_cap,
    /* .host_pin = */ cuda_host_pin,
    /* .host_unpin = */ cuda_host_unpin,
    /* .rmsnorm = */ sqz__cuda_rmsnorm,
    /* .rope = */ sqz__cuda_rope,
    /* .attention = */ sqz__cuda_attention,
    /* .silu_mul = */ sqz__cuda_silu_mul,
    /* .add = */ sqz__cuda_add,
    /* .layernorm = */ sqz__cuda_layernorm,
    /* .gelu = */ sqz__cuda_gelu,
    /* .upload_async = */ cuda_upload_async,
    /* .copies_wait = */ cuda_copies_wait,
    /* .dgemm = */ sqz__cuda_dgemm,
    /* .dtrsm = */ sqz__cuda_dtrsm,
    /* .dpotrf = */ sqz__cuda_dpotrf,
    /* .colstats = */ sqz__cuda_colstats,
    /* .cosine = */ sqz__cuda_cosine,
};

sqz_cuda_ctx *sqz__cuda_ctx_of(sqz_backend *b) {
    return b && b->ops == &cuda_ops ? (sqz_cuda_ctx *)b->ctx : NULL;
}

int sqz__cuda_device_count(void) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        cudaGetLastError(); /* no driver / no device: not an error for this question */
        return 0;
    }
    return n;
}

static sqz_status ctx_init(sqz_cuda_ctx *c, int device) {
    c->device = device;
    SQZ_CUDA_TRY(cudaSetDevice(device));
    SQZ_CUDA_TRY(cudaDeviceGetAttribute(&c->cc_major, cudaDevAttrComputeCapabilityMajor, device));
    SQZ_CUDA_TRY(cudaDeviceGetAttribute(&c->cc_minor, cudaDevAttrComputeCapabilityMinor, device));
    SQZ_CUDA_TRY(cudaDeviceGetAttribute(&c->sm_count, cudaDevAttrMultiProcessorCount, device));
    int optin = 0;
    SQZ_CUDA_TRY(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
    c->smem_optin = (size_t)optin;
    SQZ_CUDA_TRY(cudaDeviceGetAttribute(&c->mem_pools, cudaDevAttrMemoryPoolsSupported, device));
    SQZ_RETURN_IF(c->cc_major < 8, SQZ_ERR_UNSUPPORTED,
                  "CUDA device %d has compute capability %d.%d; the sqz kernels need 8.0 or newer (mma.sync int8 / "
                  "cp.async)", device, c->cc_major, c->cc_minor);
    SQZ_CUDA_TRY(cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking));
    SQZ_CUBLAS_TRY(cublasCreate(&c->blas));
    SQZ_CUBLAS_TRY(cublasSetStream(c->blas, c->stream));
    /* Full fp32 for sgemm / matmul: the default math mode never uses TF32 tensor cores (only
     * CUBLAS_TF32_TENSOR_OP_MATH would); set explicitly so that nothing inherited changes it. */
    SQZ_CUBLAS_TRY(cublasSetMathMode(c->blas, CUBLAS_DEFAULT_MATH));
    SQZ_CUBLAS_TRY(cublasLtCreate(&c->lt));
    c->lt_ws_bytes = (size_t)32 << 20; /* NVIDIA's recommendation for Hopper */
    SQZ_CUDA_TRY(cudaMalloc(&c->lt_ws, c->lt_ws_bytes));
    SQZ_TRY(sqz__cuda_mem_charge(c, c->lt_ws_bytes));
    /* cuBLAS shares it (same stream, one call at a time) instead of a workspace of its own
     * that the accounting could not see */
    SQZ_CUBLAS_TRY(cublasSetWorkspace(c->blas, c->lt_ws, c->lt_ws_bytes));
    SQZ_TRY(sqz__i8_mma_init(c));
    SQZ_TRY(sqz__w4_init(c));
    return SQZ_OK;
}

sqz_status sqz__cuda_backend_create(int device, sqz_backend **out) {
    *out = NULL;
    int count = 0;
    const cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess) {
        cudaGetLastError();
        return SQZ_ERROR(SQZ_ERR_DEVICE, "no usable CUDA device: cudaGetDeviceCount: %s: %s", cudaGetErrorName(e),
                         cudaGetErrorString(e));
    }
    SQZ_RETURN_IF(count == 0, SQZ_ERR_DEVICE, "no CUDA device found");
    if (device < 0) device = 0;
    SQZ_RETURN_IF(device >= count, SQZ_ERR_DEVICE, "CUDA device %d requested, %d present", device, count);
    sqz_cuda_ctx *c = (sqz_cuda_ctx *)sqz__calloc(1, sizeof *c);
    sqz_backend *b = (sqz_backend *)sqz__calloc(1, sizeof *b);
    if (!c || !b) { free(c); free(b); return SQZ_ERR_NOMEM; }
    const sqz_status s = ctx_init(c, device);
    if (s != SQZ_OK) {
        cuda_destroy(c);
        free(b);
        return s;
    }
    b->ops = &cuda_ops;
    b->ctx = c;
    *out = b;
    return SQZ_OK;
}

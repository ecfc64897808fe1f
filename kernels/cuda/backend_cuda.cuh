/*
 * kernels/cuda/backend_cuda.cuh - the CUDA backend's context and the helpers its kernel
 * families share (device, stream, handles, scratch memory, registry of prepared int4
 * weights). The public face is plain C: sqz_backend_cuda() in sqz/backend.h, which libsqz
 * reaches through the module's entry table (kernels/cuda_loader/cuda_module.h, module_entry.cu).
 */
#ifndef SQZ_KERNELS_CUDA_BACKEND_CUDA_CUH
#define SQZ_KERNELS_CUDA_BACKEND_CUDA_CUH

#include "kernels/cuda/cuda_common.cuh"

struct sqz__lt_plan; /* gemm_i8_lt.cu */
struct cusolverDnContext; /* cusolverDnHandle_t (calib_cuda.cu) */
struct cusolverDnParams;  /* cusolverDnParams_t */

/* One live allocation of cuda_alloc (the memory accounting's ptr -> size table). */
typedef struct sqz__cuda_alloc_rec {
    void *ptr;
    size_t bytes;
} sqz__cuda_alloc_rec;

typedef struct sqz__w4_entry {
    const void *ptr;      /* device pointer returned by prepare_w4 */
    sqz_w4_layout layout; /* its shape and dtype */
} sqz__w4_entry;

enum { SQZ__LT_PLANS = 32, SQZ__I8_CHOICES = 64 };

/* The W8A8 variant AUTO measured fastest for a shape (m rounded up to a power of two). */
typedef struct sqz__i8_choice {
    int64_t m_bucket, n, k;
    int f32_input;
    sqz_kernel_variant variant; /* SQZ_KVAR_AUTO: empty slot */
} sqz__i8_choice;

/* One context is driven by one host thread at a time (one stream, one scratch buffer). */
typedef struct sqz_cuda_ctx {
    int device;
    int mem_pools;              /* cudaMallocAsync available (stream-ordered scratch) */
    int cc_major, cc_minor;
    int sm_count;
    size_t smem_optin;          /* max dynamic shared memory per block */
    cudaStream_t stream;
    cudaStream_t copy_stream;   /* upload_async's copies beside the computation (made on first use) */
    cublasHandle_t blas;
    cublasLtHandle_t lt;
    void *lt_ws;                /* cuBLASLt workspace, also cuBLAS's (cublasSetWorkspace) */
    size_t lt_ws_bytes;
    void *scratch;              /* stream-ordered scratch for one op at a time */
    size_t scratch_bytes;
    struct sqz__lt_plan *plans; /* SQZ__LT_PLANS cached cuBLASLt plans */
    int next_plan;
    sqz__i8_choice i8_choices[SQZ__I8_CHOICES]; /* round-robin cache of AUTO's picks */
    int next_choice;
    sqz__w4_entry *w4;          /* prepared int4 weights owned by this context */
    size_t n_w4, cap_w4;
    /* memory accounting (sqz_backend_mem): alloc(), the scratch buffer and the cuBLAS(Lt)
     * workspace; cuSOLVER's workspace comes from the scratch buffer */
    size_t mem_in_use, mem_peak, mem_cap; /* cap 0: none */
    sqz__cuda_alloc_rec *allocs;          /* live alloc() buffers */
    size_t n_allocs, cap_allocs;
    struct cusolverDnContext *solver;     /* created on the first chol_inv_upper */
    struct cusolverDnParams *solver_params;
} sqz_cuda_ctx;

/* Makes ctx's device current. */
sqz_status sqz__cuda_enter(sqz_cuda_ctx *c);
/* A scratch buffer of at least `bytes` (valid until the next call; stream-ordered). Growing it
 * is charged to the memory accounting: SQZ_ERR_NOMEM naming the cap when it would exceed it. */
sqz_status sqz__cuda_scratch(sqz_cuda_ctx *c, size_t bytes, void **out);
/* The most scratch bytes, between min and want, that the memory cap allows now (want without a
 * cap): ops that work in chunks size them with it so that a tight --gpu-mem still runs. */
size_t sqz__cuda_scratch_fit(const sqz_cuda_ctx *c, size_t want, size_t min);
/* Charges `bytes` to the accounting: SQZ_ERR_NOMEM ("would exceed --gpu-mem") over the cap. */
sqz_status sqz__cuda_mem_charge(sqz_cuda_ctx *c, size_t bytes);
/* Returns `bytes` charged before. */
void sqz__cuda_mem_uncharge(sqz_cuda_ctx *c, size_t bytes);
/* The registered layout of a prepared int4 weight, or NULL. */
const sqz__w4_entry *sqz__cuda_w4_find(const sqz_cuda_ctx *c, const void *ptr);
/* Registers a device buffer holding a prepared int4 weight of layout L. */
sqz_status sqz__cuda_w4_register(sqz_cuda_ctx *c, const void *ptr, const sqz_w4_layout *L);
/* The context of a CUDA backend, or NULL when b is not one. */
sqz_cuda_ctx *sqz__cuda_ctx_of(sqz_backend *b);

/* The module's implementations of the CUDA entry points of sqz/backend.h (same contracts:
 * sqz_cuda_device_count, sqz_backend_cuda, sqz_cuda_device_info_get, sqz_cuda_bench_gemm). */
int sqz__cuda_device_count(void);
sqz_status sqz__cuda_backend_create(int device, sqz_backend **out);
sqz_status sqz__cuda_device_info_get(int device, sqz_cuda_device_info *out);
sqz_status sqz__cuda_bench_gemm(sqz_backend *b, sqz_bench_kernel kernel, int64_t m, int64_t n, int64_t k,
                                double min_seconds, sqz_bench_result *result);

#endif

/*
 * kernels/cuda/cuda_common.cuh - what the CUDA files share: the CHECK macros that turn
 * CUDA / cuBLAS errors into sqz_status with the statement, file, line and the library's
 * own error text, and the PTX wrappers (cp.async, ldmatrix, mma.sync) of sm_80+.
 */
#ifndef SQZ_KERNELS_CUDA_COMMON_CUH
#define SQZ_KERNELS_CUDA_COMMON_CUH

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

extern "C" {
#include "core/internal.h"
}
#include "kernels/cpu/w4_pack.h"
#include "kernels/cuda/mma_frag.h"
#include "sqz/backend.h"

/* ---- errors ---------------------------------------------------------------------- */
sqz_status sqz__cuda_error(cudaError_t e, const char *stmt, const char *file, int line);
sqz_status sqz__cublas_error(cublasStatus_t e, const char *stmt, const char *file, int line);

/* Evaluates a CUDA runtime call; on failure records "stmt: cudaErrorX: text" at this file
 * and line and returns SQZ_ERR_DEVICE (SQZ_ERR_NOMEM for allocation failures). */
#define SQZ_CUDA_TRY(stmt)                                                                  \
    do {                                                                                    \
        cudaError_t sqz__ce = (stmt);                                                       \
        if (sqz__ce != cudaSuccess) return sqz__cuda_error(sqz__ce, #stmt, __FILE__, __LINE__); \
    } while (0)
/* The same for cuBLAS and cuBLASLt calls. */
#define SQZ_CUBLAS_TRY(stmt)                                                                \
    do {                                                                                    \
        cublasStatus_t sqz__bs = (stmt);                                                    \
        if (sqz__bs != CUBLAS_STATUS_SUCCESS) return sqz__cublas_error(sqz__bs, #stmt, __FILE__, __LINE__); \
    } while (0)
/* After a kernel launch: reports launch configuration errors. */
#define SQZ_CUDA_LAUNCHED() SQZ_CUDA_TRY(cudaGetLastError())

static inline bool sqz__aligned(const void *p, size_t a) { return ((uintptr_t)p & (a - 1)) == 0; }
static inline int64_t sqz__ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* ---- PTX wrappers (sm_80+) -------------------------------------------------------- */
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#define SQZ__NEED_SM80 1 /* kernels trap: the host refuses such devices before launching */
#endif

__device__ __forceinline__ uint32_t sqz__smem_addr(const void *p) {
    return (uint32_t)__cvta_generic_to_shared(p);
}

/* 16-byte global -> shared copy; src_bytes < 16 zero-fills the rest (0 reads nothing). */
__device__ __forceinline__ void sqz__cp_async16(uint32_t dst, const void *src, int src_bytes) {
#ifndef SQZ__NEED_SM80
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes) : "memory");
#endif
}
__device__ __forceinline__ void sqz__cp_async_commit() {
#ifndef SQZ__NEED_SM80
    asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}
template <int N>
__device__ __forceinline__ void sqz__cp_async_wait() {
#ifndef SQZ__NEED_SM80
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
#endif
}

__device__ __forceinline__ void sqz__st_shared_v4(uint32_t addr, uint32_t a, uint32_t b, uint32_t c, uint32_t d) {
    asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"r"(addr), "r"(a), "r"(b), "r"(c), "r"(d) : "memory");
}

__device__ __forceinline__ void sqz__ldsm_x4(uint32_t (&r)[4], uint32_t addr) {
#ifndef SQZ__NEED_SM80
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr)
                 : "memory");
#else
    r[0] = r[1] = r[2] = r[3] = addr;
#endif
}

/* D += A . B, s8 x s8 -> s32, 16 x 8 x 32 (IMMA). */
__device__ __forceinline__ void sqz__mma_s8(int (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
#ifndef SQZ__NEED_SM80
    asm volatile(
        "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#endif
}

/* D += A . B, f16 x f16 -> f32, 16 x 8 x 16 (HMMA). */
__device__ __forceinline__ void sqz__mma_f16(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
#ifndef SQZ__NEED_SM80
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#endif
}

/* Triton's grouped tile order: consecutive CTAs walk 8 row tiles before moving to the
 * next column tile, so that the weight tiles they share stay in L2. */
__device__ __forceinline__ void sqz__tile_coords(int pid, int tiles_m, int tiles_n, int *bm, int *bn) {
    const int group = 8;
    const int per_group = group * tiles_n;
    const int first_m = (pid / per_group) * group;
    const int gsize = min(tiles_m - first_m, group);
    *bm = first_m + (pid % per_group) % gsize;
    *bn = (pid % per_group) / gsize;
}

/* Stores one output element (f32 or f16, RNE). */
__device__ __forceinline__ void sqz__store_out(void *y, int y_f16, int64_t idx, float v) {
    if (y_f16) ((__half *)y)[idx] = __float2half_rn(v);
    else ((float *)y)[idx] = v;
}

#endif

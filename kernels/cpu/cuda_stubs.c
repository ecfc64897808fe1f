/* kernels/cpu/cuda_stubs.c - the names of the benchmarkable kernels, and the CUDA-only
 * public entry points of sqz/backend.h when libsqz is built without CUDA
 * (kernels/cuda_loader/cuda_loader.c provides them otherwise, through the CUDA module). */
#include "core/internal.h"
#include "sqz/backend.h"

static const char *const bench_names[SQZ_BENCH_KERNEL_COUNT] = {
    [SQZ_BENCH_CUBLAS_F16] = "cublas_f16",
    [SQZ_BENCH_CUBLASLT_I8] = "cublaslt_i8",
    [SQZ_BENCH_I8_LT] = "i8_lt",
    [SQZ_BENCH_I8_MMA] = "i8_mma",
    [SQZ_BENCH_I8_MMA_FUSED] = "i8_mma_fusedq",
    [SQZ_BENCH_W4_Q4_0] = "w4_q4_0",
    [SQZ_BENCH_W4_Q4_1] = "w4_q4_1",
    [SQZ_BENCH_W4_DEQUANT_F16] = "w4_deq_cublas",
};

const char *sqz_bench_kernel_name(sqz_bench_kernel kernel) {
    if ((int)kernel < 0 || kernel >= SQZ_BENCH_KERNEL_COUNT) return "invalid";
    return bench_names[kernel];
}

#ifndef SQZ_HAVE_CUDA
int sqz_cuda_device_count(void) { return 0; }

sqz_status sqz_cuda_device_info_get(int device, sqz_cuda_device_info *out) {
    (void)device;
    memset(out, 0, sizeof *out);
    return SQZ_ERROR(SQZ_ERR_UNSUPPORTED, "this libsqz was built without CUDA (configure with -DSQZ_CUDA=ON)");
}

sqz_status sqz_cuda_bench_gemm(sqz_backend *b, sqz_bench_kernel kernel, int64_t m, int64_t n, int64_t k,
                               double min_seconds, sqz_bench_result *result) {
    (void)b; (void)kernel; (void)m; (void)n; (void)k; (void)min_seconds;
    memset(result, 0, sizeof *result);
    return SQZ_ERROR(SQZ_ERR_UNSUPPORTED, "this libsqz was built without CUDA (configure with -DSQZ_CUDA=ON)");
}
#endif

/*
 * kernels/cuda/gemm_i8_sp24.cu - the 2:4 sparse W8A8 GEMM (gemm_i8_sp24.cuh). Each warp computes
 * a 16 (W rows) x 8 (tokens) tile of Y^T with one mma.sp m16n8k64 per 64 columns of k: the A
 * fragment is four 32-bit loads of kept values, B four 32-bit loads of quantized activations,
 * the metadata one 32-bit register built from two 16-bit halves of sqz/sparse.h's words
 * (fragment math: kernels/cuda/mma_frag.h, checked on the CPU by tests/unit/test_sp24_emu.c).
 * Plain global loads: the first, exact version; staging through shared memory is the next step.
 */
#include <cuda_fp16.h>
#include <limits.h>

#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/gemm_i8_sp24.cuh"
#include "kernels/cuda/mma_frag.h"
#include "kernels/cuda/quantize_i8.cuh"

enum { SP_WARPS = 4 };

__global__ void i8_sp24_kernel(int m, int n, int k, const int8_t *__restrict__ x, const float *__restrict__ xs,
                               const int8_t *__restrict__ vals, const uint32_t *__restrict__ meta,
                               const float *__restrict__ ws, void *__restrict__ y, int y_f16) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int n0 = (blockIdx.x * SP_WARPS + warp) * 16, m0 = blockIdx.y * 8;
    if (n0 >= n) return;
    const int kh = k / 2, kw = k / 32;
    int acc[4] = {0, 0, 0, 0};
    for (int kk = 0; kk < k; kk += 64) {
        uint32_t a[4], b[4];
        for (int r = 0; r < 4; r++) {
            int row, col, kq, tok;
            sqz_frag_s8_a(lane, r, &row, &col); /* compressed column within the step's 32 */
            a[r] = n0 + row < n ? *(const uint32_t *)(vals + (size_t)(n0 + row) * kh + kk / 2 + col) : 0u;
            sqz_frag_s8_b64(lane, r, &kq, &tok);
            b[r] = m0 + tok < m ? *(const uint32_t *)(x + (size_t)(m0 + tok) * k + kk + kq) : 0u;
        }
        int r0, r1, c0, c1;
        sqz_sp24_meta_s8(lane, 0, &r0, &c0);
        sqz_sp24_meta_s8(lane, 1, &r1, &c1);
        const uint32_t e = sqz_sp24_meta_half(meta, n, kw, n0 + r0, kk + c0) |
                           sqz_sp24_meta_half(meta, n, kw, n0 + r1, kk + c1) << 16;
        asm volatile(
            "mma.sp::ordered_metadata.sync.aligned.m16n8k64.row.col.s32.s8.s8.s32 {%0, %1, %2, %3}, "
            "{%4, %5, %6, %7}, {%8, %9, %10, %11}, {%0, %1, %2, %3}, %12, 0x0;\n"
            : "+r"(acc[0]), "+r"(acc[1]), "+r"(acc[2]), "+r"(acc[3])
            : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "r"(b[2]), "r"(b[3]), "r"(e));
    }
    for (int i = 0; i < 4; i++) {
        int row, col;
        sqz_frag_c(lane, i, &row, &col); /* row: W row (output column of Y), col: token */
        const int R = n0 + row, T = m0 + col;
        if (R >= n || T >= m) continue;
        const float v = __fmul_rn(__fmul_rn((float)acc[i], xs[T]), ws[R]);
        if (y_f16) ((__half *)y)[(size_t)T * n + R] = __float2half_rn(v);
        else ((float *)y)[(size_t)T * n + R] = v;
    }
}

sqz_status sqz__i8_sp24_gemm(sqz_cuda_ctx *c, const sqz_gemm_i8_sp24_args *a) {
    SQZ_RETURN_IF(a->k % 64 != 0, SQZ_ERR_UNSUPPORTED,
                  "CUDA gemm_i8_sp24: k = %lld is not a multiple of 64 (one mma.sp m16n8k64 step)", (long long)a->k);
    SQZ_RETURN_IF(a->m > INT_MAX || a->n > INT_MAX || a->k > INT_MAX, SQZ_ERR_INVALID_ARG,
                  "CUDA gemm_i8_sp24: dimensions out of range");
    if (a->m == 0) return SQZ_OK;
    if (a->x_f32) SQZ_TRY(sqz__i8_quantize_rows(c, a->x_f32, a->m, a->k, a->x, a->x_scale));
    if (a->n == 0) return SQZ_OK;
    const dim3 grid((unsigned)((a->n + 16 * SP_WARPS - 1) / (16 * SP_WARPS)), (unsigned)((a->m + 7) / 8));
    i8_sp24_kernel<<<grid, 32 * SP_WARPS, 0, c->stream>>>((int)a->m, (int)a->n, (int)a->k, a->x, a->x_scale, a->values,
                                                            a->meta, a->w_scale, a->y, a->y_dtype == SQZ_DTYPE_F16);
    SQZ_CUDA_LAUNCHED();
    return SQZ_OK;
}

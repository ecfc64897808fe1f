/*
 * kernels/cpu/gemm_i8_sp24.c - the CPU reference of the 2:4 sparse W8A8 GEMM (sqz/sparse.h).
 *
 * For output (i, j) it reads the two kept values of every group of 4 and the x values at their
 * indices: k/2 multiply-adds instead of k. The int32 sum is the dense one minus terms that are
 * exactly 0, and integer addition is exact in any order, so the result is bit for bit the dense
 * reference's (kernels/cpu/gemm_ref.c) on the unpacked weight; the scale epilogue is the same
 * two IEEE multiplications.
 */
#include "core/internal.h"
#include "sqz/backend.h"
#include "sqz/sparse.h"

sqz_status sqz_gemm_i8_sp24_ref(int64_t m, int64_t n, int64_t k, const int8_t *x, const float *x_scale,
                                const int8_t *values, const uint32_t *meta, const float *w_scale, void *y,
                                sqz_dtype y_dtype) {
    SQZ_RETURN_IF(m < 0 || n < 0 || k < 0 || k % 32, SQZ_ERR_INVALID_ARG,
                  "gemm_i8_sp24: dimensions (%lld, %lld, %lld): k must be a multiple of 32", (long long)m,
                  (long long)n, (long long)k);
    SQZ_RETURN_IF(k > SQZ_GEMM_I8_MAX_K, SQZ_ERR_INVALID_ARG, "gemm_i8_sp24: k = %lld exceeds %d", (long long)k,
                  SQZ_GEMM_I8_MAX_K);
    SQZ_RETURN_IF(y_dtype != SQZ_DTYPE_F32 && y_dtype != SQZ_DTYPE_F16, SQZ_ERR_INVALID_ARG,
                  "gemm_i8_sp24: output dtype %s (f32 or f16 expected)", sqz_dtype_name(y_dtype));
    for (int64_t i = 0; i < m; i++) {
        const int8_t *xr = x + i * k;
        for (int64_t j = 0; j < n; j++) {
            const int8_t *vr = values + j * (k / 2);
            const uint32_t *mr = meta + j * (k / 32);
            int32_t acc = 0;
            for (int64_t g = 0; g < k / 4; g++) {
                const unsigned f = (mr[g / 8] >> (4 * (g % 8))) & 15u;
                acc += (int32_t)xr[4 * g + (f & 3u)] * (int32_t)vr[2 * g];
                acc += (int32_t)xr[4 * g + (f >> 2)] * (int32_t)vr[2 * g + 1];
            }
            const float v = ((float)acc * x_scale[i]) * w_scale[j];
            if (y_dtype == SQZ_DTYPE_F32) ((float *)y)[i * n + j] = v;
            else ((uint16_t *)y)[i * n + j] = sqz_fp32_to_fp16(v);
        }
    }
    return SQZ_OK;
}

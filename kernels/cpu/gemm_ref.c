/*
 * kernels/cpu/gemm_ref.c - scalar reference GEMMs (see gemm_ref.h for the exact
 * definitions the CUDA kernels reproduce).
 */
#include <float.h>
#include <math.h>
#include <stdlib.h>

#include "core/blocks.h"
#include "core/internal.h"
#include "core/dequant.h"
#include "kernels/cpu/gemm_ref.h"

void sqz__quantize_rows_i8_ref(const float *x, int64_t m, int64_t k, int8_t *q, float *scale) {
    for (int64_t i = 0; i < m; i++) {
        const float *row = x + i * k;
        int8_t *qrow = q + i * k;
        float amax = 0.0f;
        int nonfinite = 0;
        for (int64_t j = 0; j < k; j++) {
            const float a = fabsf(row[j]);
            if (!(a <= FLT_MAX)) nonfinite = 1; /* NaN or infinity */
            else if (a > amax) amax = a;
        }
        const float d = nonfinite ? NAN : amax / 127.0f;
        scale[i] = d;
        if (nonfinite || d == 0.0f) { /* NaN/inf, zero row, or a subnormal absmax that underflows */
            for (int64_t j = 0; j < k; j++) qrow[j] = 0;
            continue;
        }
        for (int64_t j = 0; j < k; j++) {
            /* |row[j] / d| <= 127 * (1 + 2^-23)^2, so rint lands in [-127, 127]; clamp anyway */
            float v = rintf(row[j] / d);
            v = v > 127.0f ? 127.0f : (v < -127.0f ? -127.0f : v);
            qrow[j] = (int8_t)v;
        }
    }
}

static void store_out(void *y, sqz_dtype y_dtype, int64_t idx, float v) {
    if (y_dtype == SQZ_DTYPE_F32) ((float *)y)[idx] = v;
    else ((uint16_t *)y)[idx] = sqz_fp32_to_fp16(v);
}

sqz_status sqz__gemm_i8_ref(int64_t m, int64_t n, int64_t k, const int8_t *x, const float *x_scale,
                           const int8_t *w, const float *w_scale, void *y, sqz_dtype y_dtype) {
    SQZ_RETURN_IF(m < 0 || n < 0 || k < 0, SQZ_ERR_INVALID_ARG, "gemm_i8: negative dimension (%lld, %lld, %lld)",
                  (long long)m, (long long)n, (long long)k);
    SQZ_RETURN_IF(k > SQZ_GEMM_I8_MAX_K, SQZ_ERR_INVALID_ARG,
                  "gemm_i8: k = %lld exceeds %d (the int32 accumulator could overflow)", (long long)k,
                  SQZ_GEMM_I8_MAX_K);
    SQZ_RETURN_IF(y_dtype != SQZ_DTYPE_F32 && y_dtype != SQZ_DTYPE_F16, SQZ_ERR_INVALID_ARG,
                  "gemm_i8: output dtype %s (f32 or f16 expected)", sqz_dtype_name(y_dtype));
    for (int64_t i = 0; i < m; i++) {
        const int8_t *xr = x + i * k;
        for (int64_t j = 0; j < n; j++) {
            const int8_t *wr = w + j * k;
            int32_t acc = 0;
            for (int64_t t = 0; t < k; t++) acc += (int32_t)xr[t] * (int32_t)wr[t];
            const float v = ((float)acc * x_scale[i]) * w_scale[j];
            store_out(y, y_dtype, i * n + j, v);
        }
    }
    return SQZ_OK;
}

sqz_status sqz__gemm_w4a16_ref(int64_t m, int64_t n, int64_t k, const uint16_t *x, const void *w,
                              sqz_dtype w_dtype, void *y, sqz_dtype y_dtype) {
    SQZ_RETURN_IF(m < 0 || n < 0 || k < 0, SQZ_ERR_INVALID_ARG, "gemm_w4: negative dimension");
    SQZ_RETURN_IF(k % 32 != 0, SQZ_ERR_INVALID_ARG, "gemm_w4: k = %lld is not a multiple of 32", (long long)k);
    SQZ_RETURN_IF(w_dtype != SQZ_DTYPE_Q4_0 && w_dtype != SQZ_DTYPE_Q4_1, SQZ_ERR_INVALID_ARG,
                  "gemm_w4: weight dtype %s (q4_0 or q4_1 expected)", sqz_dtype_name(w_dtype));
    SQZ_RETURN_IF(y_dtype != SQZ_DTYPE_F32 && y_dtype != SQZ_DTYPE_F16, SQZ_ERR_INVALID_ARG,
                  "gemm_w4: output dtype %s (f32 or f16 expected)", sqz_dtype_name(y_dtype));
    const size_t row_bytes = (size_t)(k / 32) * (w_dtype == SQZ_DTYPE_Q4_0 ? sizeof(sqz_block_q4_0)
                                                                           : sizeof(sqz_block_q4_1));
    size_t xn, bytes;
    SQZ_RETURN_IF(!sqz__mul_size((size_t)m, (size_t)k, &xn) || !sqz__add_size(xn, (size_t)k, &xn) ||
                      !sqz__mul_size(xn, sizeof(float), &bytes),
                  SQZ_ERR_INVALID_ARG, "gemm_w4: m * k overflows");
    float *wrow = sqz__malloc(bytes ? bytes : 1);
    if (!wrow) return SQZ_ERR_NOMEM;
    float *xf = wrow + k; /* x widened once: (m, k) */
    for (size_t t = 0; t < (size_t)m * (size_t)k; t++) xf[t] = sqz_fp16_to_fp32(x[t]);
    for (int64_t j = 0; j < n; j++) {
        const uint8_t *src = (const uint8_t *)w + (size_t)j * row_bytes;
        if (w_dtype == SQZ_DTYPE_Q4_0) sqz__dequantize_q4_0(src, wrow, k);
        else sqz__dequantize_q4_1(src, wrow, k);
        for (int64_t i = 0; i < m; i++) {
            const float *xr = xf + i * k;
            double acc = 0.0;
            for (int64_t t = 0; t < k; t++) acc += (double)xr[t] * (double)wrow[t];
            store_out(y, y_dtype, i * n + j, (float)acc);
        }
    }
    free(wrow);
    return SQZ_OK;
}

sqz_status sqz__matmul_ref(const sqz_matmul_args *a) {
    const sqz_dtype_traits *tr = sqz_dtype_info(a->w_dtype);
    SQZ_RETURN_IF(!tr || !tr->to_f32, SQZ_ERR_UNSUPPORTED, "matmul reference: weights of dtype %s",
                  sqz_dtype_name(a->w_dtype));
    SQZ_RETURN_IF(a->m < 0 || a->n < 0 || a->k < 0 || a->k % tr->block_size != 0, SQZ_ERR_INVALID_ARG,
                  "matmul reference: k = %lld for %s weights", (long long)a->k, sqz_dtype_name(a->w_dtype));
    float *row = sqz__malloc((size_t)(a->k > 0 ? a->k : 1) * sizeof(float));
    if (!row) return SQZ_ERR_NOMEM;
    const size_t row_bytes = (size_t)(a->k / tr->block_size) * tr->type_size;
    for (int64_t j = 0; j < a->n; j++) {
        tr->to_f32((const uint8_t *)a->w + (size_t)j * row_bytes, row, a->k);
        for (int64_t i = 0; i < a->m; i++) {
            double s = 0;
            for (int64_t c = 0; c < a->k; c++) s += (double)row[c] * (double)a->x[i * a->k + c];
            a->y[i * a->n + j] = (float)s + (a->bias ? a->bias[j] : 0.0f);
        }
    }
    free(row);
    return SQZ_OK;
}

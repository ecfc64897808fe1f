/* quant/gguf/dtype_ref.c - the public dtype table: core's rows (core/dtype.c: layouts,
 * dequantizers, the float converters) completed with the reference quantizers of the GGUF block
 * types sqz writes, and sqz_convert, which converts through them. Core cannot point its table at
 * the quantizers (they sit above it), so the complete table is made here, once. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "quant/gguf/quant_gguf.h"
#include "sqz/dtype.h"
#include "sqz/tensor.h"

/* The reference quantizer of each block type sqz writes (llama.cpp's quantize_row_*_ref). */
static const sqz_from_f32_fn quantizers[SQZ_DTYPE_COUNT] = {
    [SQZ_DTYPE_Q8_0] = sqz__quantize_q8_0_ref, [SQZ_DTYPE_Q4_0] = sqz__quantize_q4_0_ref,
    [SQZ_DTYPE_Q4_1] = sqz__quantize_q4_1_ref, [SQZ_DTYPE_Q5_0] = sqz__quantize_q5_0_ref,
    [SQZ_DTYPE_Q5_1] = sqz__quantize_q5_1_ref, [SQZ_DTYPE_Q2_K] = sqz__quantize_q2_K_ref,
    [SQZ_DTYPE_Q3_K] = sqz__quantize_q3_K_ref, [SQZ_DTYPE_Q4_K] = sqz__quantize_q4_K_ref,
    [SQZ_DTYPE_Q5_K] = sqz__quantize_q5_K_ref, [SQZ_DTYPE_Q6_K] = sqz__quantize_q6_K_ref,
    [SQZ_DTYPE_IQ4_NL] = sqz__quantize_iq4_nl_ref, [SQZ_DTYPE_IQ4_XS] = sqz__quantize_iq4_xs_ref,
    [SQZ_DTYPE_IQ3_S] = sqz__quantize_iq3_s_ref, [SQZ_DTYPE_MXFP4] = sqz__quantize_mxfp4_ref,
};

sqz_from_f32_fn sqz__dtype_from_f32(sqz_dtype t) {
    if ((unsigned)t >= SQZ_DTYPE_COUNT) return NULL;
    return quantizers[t] ? quantizers[t] : sqz__dtype_core(t)->from_f32;
}

/* Filled once, on first use, and never written again. */
static sqz_dtype_traits traits[SQZ_DTYPE_COUNT];
static pthread_once_t traits_once = PTHREAD_ONCE_INIT;

static void traits_fill(void) {
    for (int i = 0; i < SQZ_DTYPE_COUNT; i++) {
        traits[i] = *sqz__dtype_core((sqz_dtype)i);
        traits[i].from_f32 = sqz__dtype_from_f32((sqz_dtype)i);
    }
}

const sqz_dtype_traits *sqz_dtype_info(sqz_dtype t) {
    if ((unsigned)t >= SQZ_DTYPE_COUNT) return NULL;
    pthread_once(&traits_once, traits_fill);
    return &traits[t];
}

sqz_status sqz_convert(sqz_dtype from, const void *src, sqz_dtype to, void *dst, int64_t n, float *scratch) {
    const sqz_dtype_traits *tf = sqz_dtype_info(from), *tt = sqz_dtype_info(to);
    SQZ_RETURN_IF(!tf || !tt, SQZ_ERR_INVALID_ARG, "invalid dtype in conversion");
    size_t nb;
    SQZ_RETURN_IF(!sqz_dtype_nbytes(from, n, &nb) || !sqz_dtype_nbytes(to, n, &nb), SQZ_ERR_SHAPE,
                  "cannot convert %lld elements from %s to %s: not a whole number of blocks", (long long)n,
                  tf->name, tt->name);
    if (from == to) {
        memcpy(dst, src, nb);
        return SQZ_OK;
    }
    SQZ_RETURN_IF(!tf->to_f32, SQZ_ERR_UNSUPPORTED, "dtype %s has no float view", tf->name);
    SQZ_RETURN_IF(!tt->from_f32, SQZ_ERR_UNSUPPORTED, "sqz cannot produce dtype %s", tt->name);
    float *buf = scratch;
    if (from == SQZ_DTYPE_F32) {
        tt->from_f32(src, dst, n);
        return SQZ_OK;
    }
    if (to == SQZ_DTYPE_F32) {
        tf->to_f32(src, dst, n);
        return SQZ_OK;
    }
    if (!buf) {
        size_t fb;
        SQZ_RETURN_IF(!sqz__mul_size((size_t)n, sizeof(float), &fb), SQZ_ERR_SHAPE, "conversion size overflows");
        buf = sqz__malloc(fb);
        if (!buf) return SQZ_ERR_NOMEM;
    }
    tf->to_f32(src, buf, n);
    tt->from_f32(buf, dst, n);
    if (buf != scratch) free(buf);
    return SQZ_OK;
}

/* core/dtype.c - the dtype traits table: one row per storage type, with its layout, its
 * dequantizer (to_f32) and, for the float types, its converter from float. The GGUF block types'
 * quantizers are quant/gguf's, which completes these rows into sqz_dtype_info's table
 * (quant/gguf/dtype_ref.c). */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "core/blocks.h"
#include "core/dequant.h"
#include "core/internal.h"
#include "sqz/dtype.h"

static void f32_to_f32(const void *src, float *dst, int64_t n) { memcpy(dst, src, (size_t)n * 4); }
static void f32_from_f32(const float *src, void *dst, int64_t n) { memcpy(dst, src, (size_t)n * 4); }

static void f8_to_f32(const void *src, float *dst, int64_t n) {
    const uint8_t *s = src;
    for (int64_t i = 0; i < n; i++) dst[i] = sqz_fp8_e4m3_to_fp32(s[i]);
}
static void f8_from_f32(const float *src, void *dst, int64_t n) {
    uint8_t *d = dst;
    for (int64_t i = 0; i < n; i++) d[i] = sqz_fp32_to_fp8_e4m3(src[i]);
}

static void f16_to_f32(const void *src, float *dst, int64_t n) {
    const uint16_t *s = src;
    for (int64_t i = 0; i < n; i++) dst[i] = sqz_fp16_to_fp32(s[i]);
}
static void f16_from_f32(const float *src, void *dst, int64_t n) {
    uint16_t *d = dst;
    for (int64_t i = 0; i < n; i++) d[i] = sqz_fp32_to_fp16(src[i]);
}
static void bf16_to_f32(const void *src, float *dst, int64_t n) {
    const uint16_t *s = src;
    for (int64_t i = 0; i < n; i++) dst[i] = sqz_bf16_to_fp32(s[i]);
}
static void bf16_from_f32(const float *src, void *dst, int64_t n) {
    uint16_t *d = dst;
    for (int64_t i = 0; i < n; i++) d[i] = sqz_fp32_to_bf16(src[i]);
}
static void f64_to_f32(const void *src, float *dst, int64_t n) {
    const double *s = src;
    for (int64_t i = 0; i < n; i++) dst[i] = (float)s[i];
}
static void f64_from_f32(const float *src, void *dst, int64_t n) {
    double *d = dst;
    for (int64_t i = 0; i < n; i++) d[i] = src[i];
}

/* Integer types convert exactly within float's 24-bit mantissa; wider values round. */
#define INT_CONVERTERS(T, suffix)                                                    \
    static void suffix##_to_f32(const void *src, float *dst, int64_t n) {            \
        const T *s = src;                                                            \
        for (int64_t i = 0; i < n; i++) dst[i] = (float)s[i];                        \
    }
INT_CONVERTERS(int8_t, i8)
INT_CONVERTERS(int16_t, i16)
INT_CONVERTERS(int32_t, i32)
INT_CONVERTERS(int64_t, i64)
INT_CONVERTERS(uint8_t, u8)

/* U4: the raw codes (their meaning needs the tensor's qparams, sqz/quant.h). */
static void u4_to_f32(const void *src, float *dst, int64_t n) {
    const uint8_t *s = src;
    for (int64_t i = 0; i < n / 2; i++) {
        dst[2 * i] = (float)(s[i] & 0x0F);
        dst[2 * i + 1] = (float)(s[i] >> 4);
    }
}

/* GGML type ids (ggml.h enum ggml_type), fixed by the GGUF format. */
enum {
    GGML_F32 = 0, GGML_F16 = 1, GGML_Q4_0 = 2, GGML_Q4_1 = 3, GGML_Q5_0 = 6, GGML_Q5_1 = 7, GGML_Q8_0 = 8,
    GGML_Q2_K = 10, GGML_Q3_K = 11, GGML_Q4_K = 12, GGML_Q5_K = 13, GGML_Q6_K = 14, GGML_Q8_K = 15,
    GGML_IQ4_NL = 20, GGML_IQ3_S = 21, GGML_IQ4_XS = 23, GGML_I8 = 24, GGML_I16 = 25, GGML_I32 = 26, GGML_I64 = 27,
    GGML_F64 = 28, GGML_BF16 = 30, GGML_MXFP4 = 39,
};

static const sqz_dtype_traits traits[SQZ_DTYPE_COUNT] = {
    [SQZ_DTYPE_F32] = {.name = "f32", .block_size = 1, .type_size = 4, .gguf_type = GGML_F32,
                       .st_name = "F32", .is_float = true, .to_f32 = f32_to_f32, .from_f32 = f32_from_f32},
    [SQZ_DTYPE_F16] = {.name = "f16", .block_size = 1, .type_size = 2, .gguf_type = GGML_F16,
                       .st_name = "F16", .is_float = true, .to_f32 = f16_to_f32, .from_f32 = f16_from_f32},
    [SQZ_DTYPE_BF16] = {.name = "bf16", .block_size = 1, .type_size = 2, .gguf_type = GGML_BF16,
                        .st_name = "BF16", .is_float = true, .to_f32 = bf16_to_f32, .from_f32 = bf16_from_f32},
    [SQZ_DTYPE_I8] = {.name = "i8", .block_size = 1, .type_size = 1, .gguf_type = GGML_I8,
                      .st_name = "I8", .to_f32 = i8_to_f32},
    [SQZ_DTYPE_I32] = {.name = "i32", .block_size = 1, .type_size = 4, .gguf_type = GGML_I32,
                       .st_name = "I32", .to_f32 = i32_to_f32},
    [SQZ_DTYPE_Q8_0] = {.name = "q8_0", .block_size = SQZ_QK8_0, .type_size = sizeof(sqz_block_q8_0),
                        .gguf_type = GGML_Q8_0, .is_quantized = true,
                        .to_f32 = sqz__dequantize_q8_0},
    [SQZ_DTYPE_Q4_0] = {.name = "q4_0", .block_size = SQZ_QK4_0, .type_size = sizeof(sqz_block_q4_0),
                        .gguf_type = GGML_Q4_0, .is_quantized = true,
                        .to_f32 = sqz__dequantize_q4_0},
    [SQZ_DTYPE_Q4_1] = {.name = "q4_1", .block_size = SQZ_QK4_1, .type_size = sizeof(sqz_block_q4_1),
                        .gguf_type = GGML_Q4_1, .is_quantized = true,
                        .to_f32 = sqz__dequantize_q4_1},
    [SQZ_DTYPE_Q4_K] = {.name = "q4_k", .block_size = SQZ_QK_K, .type_size = sizeof(sqz_block_q4_K),
                        .gguf_type = GGML_Q4_K, .is_quantized = true, .to_f32 = sqz__dequantize_q4_K},
    [SQZ_DTYPE_Q6_K] = {.name = "q6_k", .block_size = SQZ_QK_K, .type_size = sizeof(sqz_block_q6_K),
                        .gguf_type = GGML_Q6_K, .is_quantized = true, .to_f32 = sqz__dequantize_q6_K},
    [SQZ_DTYPE_I16] = {.name = "i16", .block_size = 1, .type_size = 2, .gguf_type = GGML_I16,
                       .st_name = "I16", .to_f32 = i16_to_f32},
    [SQZ_DTYPE_I64] = {.name = "i64", .block_size = 1, .type_size = 8, .gguf_type = GGML_I64,
                       .st_name = "I64", .to_f32 = i64_to_f32},
    [SQZ_DTYPE_F64] = {.name = "f64", .block_size = 1, .type_size = 8, .gguf_type = GGML_F64,
                       .st_name = "F64", .is_float = true, .to_f32 = f64_to_f32, .from_f32 = f64_from_f32},
    [SQZ_DTYPE_U4] = {.name = "u4", .block_size = 2, .type_size = 1, .gguf_type = -1, .to_f32 = u4_to_f32},
    [SQZ_DTYPE_Q5_0] = {.name = "q5_0", .block_size = SQZ_QK5_0, .type_size = sizeof(sqz_block_q5_0),
                        .gguf_type = GGML_Q5_0, .is_quantized = true, .to_f32 = sqz__dequantize_q5_0},
    [SQZ_DTYPE_Q5_1] = {.name = "q5_1", .block_size = SQZ_QK5_1, .type_size = sizeof(sqz_block_q5_1),
                        .gguf_type = GGML_Q5_1, .is_quantized = true, .to_f32 = sqz__dequantize_q5_1},
    [SQZ_DTYPE_Q2_K] = {.name = "q2_k", .block_size = SQZ_QK_K, .type_size = sizeof(sqz_block_q2_K),
                        .gguf_type = GGML_Q2_K, .is_quantized = true, .to_f32 = sqz__dequantize_q2_K},
    [SQZ_DTYPE_Q3_K] = {.name = "q3_k", .block_size = SQZ_QK_K, .type_size = sizeof(sqz_block_q3_K),
                        .gguf_type = GGML_Q3_K, .is_quantized = true, .to_f32 = sqz__dequantize_q3_K},
    [SQZ_DTYPE_Q5_K] = {.name = "q5_k", .block_size = SQZ_QK_K, .type_size = sizeof(sqz_block_q5_K),
                        .gguf_type = GGML_Q5_K, .is_quantized = true, .to_f32 = sqz__dequantize_q5_K},
    [SQZ_DTYPE_Q8_K] = {.name = "q8_k", .block_size = SQZ_QK_K, .type_size = sizeof(sqz_block_q8_K),
                        .gguf_type = GGML_Q8_K, .is_quantized = true, .to_f32 = sqz__dequantize_q8_K},
    [SQZ_DTYPE_IQ4_NL] = {.name = "iq4_nl", .block_size = SQZ_QK4_NL, .type_size = sizeof(sqz_block_iq4_nl),
                          .gguf_type = GGML_IQ4_NL, .is_quantized = true, .to_f32 = sqz__dequantize_iq4_nl},
    [SQZ_DTYPE_IQ4_XS] = {.name = "iq4_xs", .block_size = SQZ_QK_K, .type_size = sizeof(sqz_block_iq4_xs),
                          .gguf_type = GGML_IQ4_XS, .is_quantized = true, .to_f32 = sqz__dequantize_iq4_xs},
    [SQZ_DTYPE_U8] = {.name = "u8", .block_size = 1, .type_size = 1, .gguf_type = -1, .st_name = "U8",
                      .to_f32 = u8_to_f32},
    [SQZ_DTYPE_IQ3_S] = {.name = "iq3_s", .block_size = SQZ_QK_K, .type_size = sizeof(sqz_block_iq3_s),
                         .gguf_type = GGML_IQ3_S, .is_quantized = true, .to_f32 = sqz__dequantize_iq3_s},
    [SQZ_DTYPE_MXFP4] = {.name = "mxfp4", .block_size = SQZ_QK_MXFP4, .type_size = sizeof(sqz_block_mxfp4),
                         .gguf_type = GGML_MXFP4, .is_quantized = true, .to_f32 = sqz__dequantize_mxfp4},
    /* not is_float: FP8 values mean nothing without their scales (SQZ_QSCHEME_F8_ROW) */
    [SQZ_DTYPE_F8_E4M3] = {.name = "f8_e4m3", .block_size = 1, .type_size = 1, .gguf_type = -1,
                           .st_name = "F8_E4M3", .to_f32 = f8_to_f32, .from_f32 = f8_from_f32},
};

const sqz_dtype_traits *sqz__dtype_core(sqz_dtype t) {
    if ((unsigned)t >= SQZ_DTYPE_COUNT) return NULL;
    return &traits[t];
}

const char *sqz_dtype_name(sqz_dtype t) {
    const sqz_dtype_traits *tr = sqz__dtype_core(t);
    return tr ? tr->name : "invalid";
}

bool sqz_dtype_from_name(const char *name, sqz_dtype *out) {
    for (int i = 0; i < SQZ_DTYPE_COUNT; i++) {
        if (strcasecmp(name, traits[i].name) == 0) { *out = (sqz_dtype)i; return true; }
    }
    return false;
}

bool sqz_dtype_from_gguf(int gguf_type, sqz_dtype *out) {
    for (int i = 0; i < SQZ_DTYPE_COUNT; i++) {
        if (traits[i].gguf_type == gguf_type) { *out = (sqz_dtype)i; return true; }
    }
    return false;
}

bool sqz_dtype_from_st(const char *st_name, sqz_dtype *out) {
    for (int i = 0; i < SQZ_DTYPE_COUNT; i++) {
        if (traits[i].st_name && strcmp(traits[i].st_name, st_name) == 0) { *out = (sqz_dtype)i; return true; }
    }
    return false;
}

bool sqz_dtype_nbytes(sqz_dtype t, int64_t n, size_t *out) {
    const sqz_dtype_traits *tr = sqz__dtype_core(t);
    if (!tr || n < 0 || n % tr->block_size != 0) return false;
    return !__builtin_mul_overflow((uint64_t)(n / tr->block_size), (uint64_t)tr->type_size, out);
}

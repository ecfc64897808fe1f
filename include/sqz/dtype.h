/*
 * sqz/dtype.h - element types and their traits table.
 *
 * Every storage type sqz reads or writes is one row of a table indexed by the enum
 * (ggml's type_traits idea): adding a format is adding a row. Quantized types store
 * fixed-size blocks of `block_size` elements in `type_size` bytes; their layouts
 * are exactly llama.cpp's (see core/blocks.h), so GGUF tensors are used as they are.
 *
 * Enum values are append-only: they may be stored in sqz's own files.
 */
#ifndef SQZ_DTYPE_H
#define SQZ_DTYPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sqz/api.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum sqz_dtype {
    SQZ_DTYPE_F32 = 0,
    SQZ_DTYPE_F16 = 1,
    SQZ_DTYPE_BF16 = 2,
    SQZ_DTYPE_I8 = 3,
    SQZ_DTYPE_I32 = 4,
    SQZ_DTYPE_Q8_0 = 5, /* 32 x int8 + fp16 scale                 (llama.cpp block_q8_0) */
    SQZ_DTYPE_Q4_0 = 6, /* 32 x 4-bit, offset 8, + fp16 scale      (block_q4_0) */
    SQZ_DTYPE_Q4_1 = 7, /* 32 x 4-bit + fp16 scale + fp16 minimum  (block_q4_1) */
    SQZ_DTYPE_Q4_K = 8, /* 256-element super-blocks, 6-bit sub-scales (block_q4_K) */
    SQZ_DTYPE_Q6_K = 9, /* 256-element super-blocks, 6-bit values  (block_q6_K) */
    SQZ_DTYPE_I16 = 10,
    SQZ_DTYPE_I64 = 11,
    SQZ_DTYPE_F64 = 12,
    SQZ_DTYPE_U4 = 13,  /* 4-bit codes 0..15, two per byte: element 2i in the low nibble of byte i;
                           the values of sqz's INT4-per-group weights (meaning in sqz_tensor.qp,
                           sqz/qparams.h); to_f32 gives the raw codes */
    SQZ_DTYPE_Q5_0 = 14,   /* 32 x 5-bit, offset 16, + fp16 scale      (block_q5_0) */
    SQZ_DTYPE_Q5_1 = 15,   /* 32 x 5-bit + fp16 scale + fp16 minimum    (block_q5_1) */
    SQZ_DTYPE_Q2_K = 16,   /* 256-element super-blocks, 2-bit values, 4-bit sub-scales/mins */
    SQZ_DTYPE_Q3_K = 17,   /* 256-element super-blocks, 3-bit values, 6-bit sub-scales */
    SQZ_DTYPE_Q5_K = 18,   /* 256-element super-blocks, 5-bit values, 6-bit sub-scales/mins */
    SQZ_DTYPE_Q8_K = 19,   /* 256 x int8 + f32 scale + block sums (llama.cpp's dot-product type) */
    SQZ_DTYPE_IQ4_NL = 20, /* 32 x 4-bit indices into a non-linear table + fp16 scale */
    SQZ_DTYPE_IQ4_XS = 21, /* IQ4_NL values in 256-element super-blocks with 6-bit sub-scales */
    SQZ_DTYPE_U8 = 22,     /* unsigned bytes (safetensors U8: compressed-tensors' sparse-24 bitmasks) */
    SQZ_DTYPE_IQ3_S = 23,  /* 256-element super-blocks: groups of 4 magnitudes from a 512-point lattice
                              grid (9-bit index), a sign bit each, 4-bit sub-scales (3.4375 bits) */
    SQZ_DTYPE_MXFP4 = 24,  /* OCP microscaling FP4: 32 x E2M1 (4-bit float: 0, 0.5, 1, 1.5, 2, 3, 4, 6
                              and their negatives) + one E8M0 (power of two) scale (block_mxfp4,
                              4.25 bits) */
    SQZ_DTYPE_F8_E4M3 = 25, /* FP8 E4M3 (OCP "fn": bias 7, no infinities, largest 448; safetensors
                               F8_E4M3): compressed-tensors' FP8 weights, with their scales
                               (sqz/qparams.h, SQZ_QSCHEME_F8_ROW) */
    SQZ_DTYPE_COUNT
} sqz_dtype;

/* Converts n elements (n a multiple of block_size) of this type to float. */
typedef void (*sqz_to_f32_fn)(const void *src, float *dst, int64_t n);
/* Converts n floats (n a multiple of block_size) to this type: the plain scalar
 * reference ("deterministic creation of model files"); fast paths are tested
 * against it. */
typedef void (*sqz_from_f32_fn)(const float *src, void *dst, int64_t n);

typedef struct sqz_dtype_traits {
    const char *name;          /* lower case: "f32", "q4_0" */
    int64_t block_size;        /* elements per block; 1 for scalar types */
    size_t type_size;          /* bytes per block */
    int gguf_type;             /* GGML type id in GGUF files; -1 if GGUF has none */
    const char *st_name;       /* safetensors dtype string ("F32", "BF16"); NULL if none */
    bool is_quantized;         /* block-quantized (block_size > 1) */
    bool is_float;             /* F16/BF16/F32/F64 */
    sqz_to_f32_fn to_f32;      /* NULL if no float view exists (never for listed types) */
    sqz_from_f32_fn from_f32;  /* NULL if sqz cannot produce this type */
} sqz_dtype_traits;

/* The traits row of t; NULL if t is out of range. Static storage. */
SQZ_API const sqz_dtype_traits *sqz_dtype_info(sqz_dtype t);

/* Name of t ("q4_0"), or "invalid". */
SQZ_API const char *sqz_dtype_name(sqz_dtype t);

/* Parses a name as printed by sqz_dtype_name (case-insensitive). Returns false if unknown. */
SQZ_API bool sqz_dtype_from_name(const char *name, sqz_dtype *out);

/* The sqz dtype of a GGML type id; false if sqz does not support it. */
SQZ_API bool sqz_dtype_from_gguf(int gguf_type, sqz_dtype *out);

/* The sqz dtype of a safetensors dtype string ("F32"); false if unsupported. */
SQZ_API bool sqz_dtype_from_st(const char *st_name, sqz_dtype *out);

/* Bytes taken by n elements of t. Sets *out and returns true; returns false when n
 * is negative, not a multiple of the block size, or the size overflows. */
SQZ_API bool sqz_dtype_nbytes(sqz_dtype t, int64_t n, size_t *out);

/* Scalar conversions, IEEE round-to-nearest-even (bit-identical to ggml's). */
SQZ_API uint16_t sqz_fp32_to_fp16(float f);
SQZ_API float sqz_fp16_to_fp32(uint16_t h);
SQZ_API uint16_t sqz_fp32_to_bf16(float f);
SQZ_API float sqz_bf16_to_fp32(uint16_t h);
/* FP8 E4M3 (fn) to float (exact; 0x7F / 0xFF NaN), and from float: round half to even, saturating
 * at +-448 (torch's cast of a value compressed-tensors clamped first), NaN to 0x7F. */
SQZ_API float sqz_fp8_e4m3_to_fp32(uint8_t b);
SQZ_API uint8_t sqz_fp32_to_fp8_e4m3(float f);

#ifdef __cplusplus
}
#endif
#endif

/*
 * core/blocks.h - block layouts of the quantized types, shared by C and CUDA.
 *
 * Exactly llama.cpp's (ggml-common.h) so that GGUF tensors are used byte for byte.
 * Half-precision values are stored as raw IEEE binary16 bits (uint16_t).
 */
#ifndef SQZ_CORE_BLOCKS_H
#define SQZ_CORE_BLOCKS_H

#include <stdint.h>

#ifdef __cplusplus
#define SQZ__STATIC_ASSERT static_assert
#else
#include <assert.h>
#define SQZ__STATIC_ASSERT _Static_assert
#endif

#define SQZ_QK8_0 32
#define SQZ_QK4_0 32
#define SQZ_QK4_1 32
#define SQZ_QK5_0 32
#define SQZ_QK5_1 32
#define SQZ_QK4_NL 32
#define SQZ_QK_K 256
#define SQZ_QK_MXFP4 32
#define SQZ_K_SCALE_SIZE 12

typedef struct {
    uint16_t d;               /* scale */
    int8_t qs[SQZ_QK8_0];     /* values: x = d * q */
} sqz_block_q8_0;
SQZ__STATIC_ASSERT(sizeof(sqz_block_q8_0) == 2 + SQZ_QK8_0, "wrong q8_0 block size");

typedef struct {
    uint16_t d;               /* scale */
    uint8_t qs[SQZ_QK4_0 / 2]; /* nibbles: low = element j, high = element j + 16; x = d * (q - 8) */
} sqz_block_q4_0;
SQZ__STATIC_ASSERT(sizeof(sqz_block_q4_0) == 2 + SQZ_QK4_0 / 2, "wrong q4_0 block size");

typedef struct {
    uint16_t d;               /* scale */
    uint16_t m;               /* minimum: x = d * q + m */
    uint8_t qs[SQZ_QK4_1 / 2];
} sqz_block_q4_1;
SQZ__STATIC_ASSERT(sizeof(sqz_block_q4_1) == 4 + SQZ_QK4_1 / 2, "wrong q4_1 block size");

typedef struct {
    uint16_t d;               /* super-block scale for the quantized scales */
    uint16_t dmin;            /* super-block scale for the quantized minimums */
    uint8_t scales[SQZ_K_SCALE_SIZE]; /* 8 scales and 8 minimums, 6 bits each */
    uint8_t qs[SQZ_QK_K / 2]; /* 4-bit values */
} sqz_block_q4_K;
SQZ__STATIC_ASSERT(sizeof(sqz_block_q4_K) == 4 + SQZ_K_SCALE_SIZE + SQZ_QK_K / 2, "wrong q4_K block size");

typedef struct {
    uint8_t ql[SQZ_QK_K / 2];     /* lower 4 bits */
    uint8_t qh[SQZ_QK_K / 4];     /* upper 2 bits */
    int8_t scales[SQZ_QK_K / 16]; /* 8-bit sub-block scales */
    uint16_t d;                   /* super-block scale */
} sqz_block_q6_K;
SQZ__STATIC_ASSERT(sizeof(sqz_block_q6_K) == SQZ_QK_K / 2 + SQZ_QK_K / 4 + SQZ_QK_K / 16 + 2, "wrong q6_K block size");

typedef struct {
    uint16_t d;               /* scale */
    uint8_t qh[4];            /* 5th bits: bit j of the little-endian u32 is element j's */
    uint8_t qs[SQZ_QK5_0 / 2]; /* low nibbles as Q4_0; x = d * (q - 16) */
} sqz_block_q5_0;
SQZ__STATIC_ASSERT(sizeof(sqz_block_q5_0) == 2 + 4 + SQZ_QK5_0 / 2, "wrong q5_0 block size");

typedef struct {
    uint16_t d;               /* scale */
    uint16_t m;               /* minimum: x = d * q + m */
    uint8_t qh[4];
    uint8_t qs[SQZ_QK5_1 / 2];
} sqz_block_q5_1;
SQZ__STATIC_ASSERT(sizeof(sqz_block_q5_1) == 4 + 4 + SQZ_QK5_1 / 2, "wrong q5_1 block size");

typedef struct {
    uint8_t scales[SQZ_QK_K / 16]; /* 16 sub-blocks: scale in the low, minimum in the high nibble */
    uint8_t qs[SQZ_QK_K / 4];      /* 2-bit values */
    uint16_t d;                    /* super-block scale for the quantized scales */
    uint16_t dmin;                 /* super-block scale for the quantized minimums */
} sqz_block_q2_K;
SQZ__STATIC_ASSERT(sizeof(sqz_block_q2_K) == 4 + SQZ_QK_K / 16 + SQZ_QK_K / 4, "wrong q2_K block size");

typedef struct {
    uint8_t hmask[SQZ_QK_K / 8]; /* high bits (set: no -4 offset) */
    uint8_t qs[SQZ_QK_K / 4];    /* low 2 bits */
    uint8_t scales[12];          /* 16 scales, 6 bits each, offset 32 */
    uint16_t d;                  /* super-block scale */
} sqz_block_q3_K;
SQZ__STATIC_ASSERT(sizeof(sqz_block_q3_K) == 2 + SQZ_QK_K / 4 + SQZ_QK_K / 8 + 12, "wrong q3_K block size");

typedef struct {
    uint16_t d;
    uint16_t dmin;
    uint8_t scales[SQZ_K_SCALE_SIZE]; /* as Q4_K */
    uint8_t qh[SQZ_QK_K / 8];         /* 5th bits */
    uint8_t qs[SQZ_QK_K / 2];         /* low 4 bits */
} sqz_block_q5_K;
SQZ__STATIC_ASSERT(sizeof(sqz_block_q5_K) == 4 + SQZ_K_SCALE_SIZE + SQZ_QK_K / 2 + SQZ_QK_K / 8,
                   "wrong q5_K block size");

typedef struct {
    float d;                        /* scale (f32): x = d * q */
    int8_t qs[SQZ_QK_K];
    int16_t bsums[SQZ_QK_K / 16];   /* sums of 16 values (for dot products; not read back) */
} sqz_block_q8_K;
SQZ__STATIC_ASSERT(sizeof(sqz_block_q8_K) == 4 + SQZ_QK_K + SQZ_QK_K / 16 * 2, "wrong q8_K block size");

typedef struct {
    uint16_t d;
    uint8_t qs[SQZ_QK4_NL / 2];   /* nibbles index the non-linear table kvalues_iq4nl */
} sqz_block_iq4_nl;
SQZ__STATIC_ASSERT(sizeof(sqz_block_iq4_nl) == 2 + SQZ_QK4_NL / 2, "wrong iq4_nl block size");

typedef struct {
    uint8_t e;                      /* E8M0 scale: 2^(e - 127); 0xFF (NaN) is invalid */
    uint8_t qs[SQZ_QK_MXFP4 / 2];   /* E2M1 codes, element j in the low nibble of byte j, j + 16 in the high */
} sqz_block_mxfp4;
SQZ__STATIC_ASSERT(sizeof(sqz_block_mxfp4) == 1 + SQZ_QK_MXFP4 / 2, "wrong mxfp4 block size");

typedef struct {
    uint16_t d;
    uint16_t scales_h;             /* high 2 bits of the 8 sub-block scales */
    uint8_t scales_l[SQZ_QK_K / 64]; /* low 4 bits; scale = d * (ls - 32) */
    uint8_t qs[SQZ_QK_K / 2];
} sqz_block_iq4_xs;
SQZ__STATIC_ASSERT(sizeof(sqz_block_iq4_xs) == 4 + SQZ_QK_K / 64 + SQZ_QK_K / 2, "wrong iq4_xs block size");

typedef struct {
    uint16_t d;                      /* super-block scale; sub-block scale d * (1 + 2 s) */
    uint8_t qs[SQZ_QK_K / 4];        /* low 8 bits of each group of 4's index into iq3s_grid */
    uint8_t qh[SQZ_QK_K / 32];       /* the indices' ninth bits, one byte per sub-block of 32 */
    uint8_t signs[SQZ_QK_K / 8];     /* one sign bit per weight (set: negative) */
    uint8_t scales[SQZ_QK_K / 64];   /* 4-bit s of sub-blocks 2i (low nibble) and 2i+1 (high) */
} sqz_block_iq3_s;
SQZ__STATIC_ASSERT(sizeof(sqz_block_iq3_s) == 2 + 13 * (SQZ_QK_K / 32) + SQZ_QK_K / 64, "wrong iq3_s block size");

#endif

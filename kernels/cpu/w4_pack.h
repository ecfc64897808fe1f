/*
 * kernels/cpu/w4_pack.h - the "prepared" layout of int4 weights (GGUF Q4_0 / Q4_1) that
 * the W4A16 tensor-core kernel reads (kernels/cuda/gemm_w4.cu), and its pure-C packer,
 * unpacker and dequantizer. The CPU backend uses the same layout, so CPU and CUDA agree
 * by construction and the layout is unit-tested without a GPU.
 *
 * The idea is Marlin's (Frantar et al., 2024): re-lay the weights offline so that one
 * 16-byte load per lane yields, after a few bit operations, ready-made B fragments of
 * mma.sync.m16n8k16 (fp16, "col" B = W rows). PTX ISA "Matrix Fragments for
 * mma.m16n8k16 with floating point type": lane = 4 * g + t (g = groupID, t =
 * threadID_in_group) holds B[k][n] for n = g and k = {2t, 2t+1} (register 0) and
 * {2t+8, 2t+9} (register 1), each register an f16x2 with the lower k in the low half.
 *
 * Geometry: W is (n, k); columns (output channels) form tiles of 64 (n padded with zero
 * weights, zero scales), k forms steps of 16 (one mma) and groups of 32 (one GGUF block).
 *
 *   quants  [n_tiles][k_steps][32 lanes][4 words]   u32 words, 512 bytes per (tile, step)
 *   scales  [n_tiles][groups][64]                   fp16 d, permuted (below)
 *   mins    [n_tiles][groups][64]                   fp16 m, Q4_1 only
 *
 * Word w of lane (g, t) holds the 8 nibbles of n8 sub-tiles j = 2w and 2w + 1 (columns
 * j * 8 + g of the tile). Nibble p (bits 4p..4p+3) is element `hi` = p >> 2 of f16x2
 * number h = p & 3: h = 0 -> sub-tile 2w register 0, h = 1 -> sub-tile 2w register 1,
 * h = 2 -> sub-tile 2w+1 register 0, h = 3 -> sub-tile 2w+1 register 1; so k = 2t + hi
 * + 8 * (h & 1). This order lets the kernel build f16x2 pairs with one mask each:
 * (w & 0x000F000F) | 0x64006400 is the f16x2 (1024 + nibble 0, 1024 + nibble 4), and
 * 0x00F000F0 / w >> 8 give the other three pairs (the "magic number" conversion of
 * Kim et al., "Who says elephants can't run", 2022).
 * Scales: position g * 8 + j of a (tile, group) row holds column j * 8 + g, so that lane
 * (g, t) reads its 8 scales (sub-tiles 0..7) as one 16-byte load.
 * Nibbles are the raw GGUF values q in 0..15: Q4_0 w = d * (q - 8), Q4_1 w = d * q + m.
 * All multi-byte values are little-endian (the GPU's order).
 */
#ifndef SQZ_KERNELS_CPU_W4_PACK_H
#define SQZ_KERNELS_CPU_W4_PACK_H

#include <stddef.h>
#include <stdint.h>

#include "sqz/dtype.h"
#include "sqz/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__CUDACC__)
#define SQZ__HD __host__ __device__ __forceinline__
#else
#define SQZ__HD static inline
#endif

#define SQZ_W4_TILE_N 64      /* columns per tile: 8 mma n8 sub-tiles */
#define SQZ_W4_KSTEP 16       /* k of one mma.m16n8k16 */
#define SQZ_W4_GROUP 32       /* elements per GGUF Q4_0 / Q4_1 block */
#define SQZ_W4_STEP_BYTES 512 /* one (tile, k step): 32 lanes x 16 bytes */
#define SQZ_W4_SCALE_BYTES 128 /* one (tile, group): 64 fp16 */

typedef struct sqz_w4_layout {
    sqz_dtype dtype;       /* SQZ_DTYPE_Q4_0 or SQZ_DTYPE_Q4_1 */
    int64_t n, k;          /* the logical weight (n, k) */
    int64_t n_tiles;       /* ceil(n / 64) */
    int64_t k_steps;       /* k / 16 */
    int64_t groups;        /* k / 32 */
    size_t q_offset;       /* quants: n_tiles * k_steps * 512 bytes */
    size_t d_offset;       /* scales: n_tiles * groups * 128 bytes */
    size_t m_offset;       /* mins (Q4_1; == total for Q4_0) */
    size_t total;          /* bytes of the prepared buffer */
    size_t src_row_bytes;  /* bytes of one GGUF row (k / 32 blocks) */
} sqz_w4_layout;

/* Fills *out for a (n, k) weight of dtype. SQZ_ERR_INVALID_ARG when n < 1, k < 32, k is not a
 * multiple of 32, the dtype is not Q4_0 / Q4_1 or a size overflows. */
sqz_status sqz__w4_layout_init(sqz_dtype dtype, int64_t n, int64_t k, sqz_w4_layout *out);

/* Where nibble p (0..7) of word w (0..3) of lane (0..31) lands in its (tile, k step):
 * *kk in 0..15, *nn in 0..63. */
SQZ__HD void sqz_w4_nibble_coord(int lane, int w, int p, int *kk, int *nn) {
    const int g = lane >> 2, t = lane & 3, h = p & 3, hi = p >> 2;
    *kk = 2 * t + hi + 8 * (h & 1);
    *nn = (2 * w + (h >> 1)) * 8 + g;
}

/* Position of column c (0..63 within a tile) in a (tile, group) row of scales / mins. */
SQZ__HD int sqz_w4_scale_pos(int c) { return (c & 7) * 8 + (c >> 3); }

/* Packs src (n rows of k / 32 GGUF blocks, host memory) into dst (L->total bytes). */
void sqz__w4_pack(const sqz_w4_layout *L, const void *src, void *dst);
/* The inverse: dst receives n rows of GGUF blocks (n * src_row_bytes bytes); padding
 * columns are dropped. unpack(pack(x)) == x byte for byte. */
void sqz__w4_unpack(const sqz_w4_layout *L, const void *prepared, void *dst);
/* Dequantizes rows [row0, row0 + rows) of the prepared weight into out (rows, k) f32,
 * with the GGUF reference's arithmetic (d * (q - 8) or d * q + m in f32). */
void sqz__w4_dequant_rows(const sqz_w4_layout *L, const void *prepared, int64_t row0, int64_t rows, float *out);

#ifdef __cplusplus
}
#endif
#endif

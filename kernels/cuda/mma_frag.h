/*
 * kernels/cuda/mma_frag.h - the index math of the tensor-core kernels, in plain C so that
 * the CPU unit tests (tests/unit/test_gemm_ref.c) check it against the PTX ISA without a
 * GPU: fragment coordinates of mma.sync, shared-memory swizzles and ldmatrix row
 * addresses. The kernels use exactly these functions.
 *
 * PTX ISA 8.x, "Matrix Fragments for mma.m16n8k16 with floating point type" and
 * "... for mma.m16n8k32" (.s8): a lane is (g, t) = (lane >> 2, lane & 3). Here a fragment
 * is addressed by 32-bit register r instead of the ISA's element index i:
 *   f16 A (16 x 16), r = 0..3, holds (row, col), (row, col + 1):  row = g + 8 (r & 1), col = 2t + 8 (r >> 1)
 *   f16 B (16 x 8),  r = 0..1, holds (k, n), (k + 1, n):          k = 2t + 8 r, n = g
 *   s8  A (16 x 32), r = 0..3, holds (row, col .. col + 3):        row = g + 8 (r & 1), col = 4t + 16 (r >> 1)
 *   s8  B (32 x 8),  r = 0..1, holds (k .. k + 3, n):              k = 4t + 16 r, n = g
 *   C / D (16 x 8) f32 or s32, element i = 0..3:                  row = g + 8 (i >> 1), col = 2t + (i & 1)
 * ldmatrix.sync.aligned.m8n8.x4.b16: lane l gives the address of row (l & 7) of matrix
 * (l >> 3) (16 bytes each); afterwards register q of lane l holds bytes 4 (l & 3) .. +3 of
 * row (l >> 2) of matrix q.
 */
#ifndef SQZ_KERNELS_CUDA_MMA_FRAG_H
#define SQZ_KERNELS_CUDA_MMA_FRAG_H

#if defined(__CUDACC__)
#define SQZ__FRAG __host__ __device__ __forceinline__
#else
#define SQZ__FRAG static inline
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ---- fragment coordinates ---- */
SQZ__FRAG void sqz_frag_f16_a(int lane, int r, int *row, int *col) {
    *row = (lane >> 2) + 8 * (r & 1);
    *col = 2 * (lane & 3) + 8 * (r >> 1);
}
SQZ__FRAG void sqz_frag_f16_b(int lane, int r, int *k, int *n) {
    *k = 2 * (lane & 3) + 8 * r;
    *n = lane >> 2;
}
SQZ__FRAG void sqz_frag_s8_a(int lane, int r, int *row, int *col) {
    *row = (lane >> 2) + 8 * (r & 1);
    *col = 4 * (lane & 3) + 16 * (r >> 1);
}
SQZ__FRAG void sqz_frag_s8_b(int lane, int r, int *k, int *n) {
    *k = 4 * (lane & 3) + 16 * r;
    *n = lane >> 2;
}
SQZ__FRAG void sqz_frag_c(int lane, int i, int *row, int *col) {
    *row = (lane >> 2) + 8 * (i >> 1);
    *col = 2 * (lane & 3) + (i & 1);
}

/* ---- INT8 kernel (gemm_i8_mma.cu): tiles of rows x 64 bytes (k), 16-byte chunks 0..3.
 * Swizzle chunk ^ ((row >> 1) & 3): the 8 rows an ldmatrix phase reads at one logical
 * chunk fall in 8 different 16-byte bank groups, and so do the cp.async stores. ---- */
#define SQZ_I8_BK 64
SQZ__FRAG int sqz_i8_smem_off(int row, int chunk) { return row * SQZ_I8_BK + ((chunk ^ ((row >> 1) & 3)) << 4); }
/* ldmatrix.x4 row (relative to the tile) and chunk that lane l addresses to load the A
 * fragment (s8, 16 x 32) of rows r0..r0+15 at k step ks (0 or 1) of the tile: matrices
 * 0..3 = (rows +0, k 0..15), (rows +8, k 0..15), (rows +0, k 16..31), (rows +8, k 16..31),
 * i.e. registers 0..3 of sqz_frag_s8_a. */
SQZ__FRAG void sqz_i8_ldsm_a(int lane, int r0, int ks, int *row, int *chunk) {
    const int q = lane >> 3;
    *row = r0 + (lane & 7) + 8 * (q & 1);
    *chunk = 2 * ks + (q >> 1);
}
/* The B fragments (s8, 32 x 8) of two n8 tiles at W rows n0..n0+7 and n0+8..n0+15:
 * matrices 0..3 = (tile 0, k 0..15), (tile 0, k 16..31), (tile 1, k 0..15), (tile 1, k 16..31),
 * i.e. registers {0, 1} of tile 0 then {0, 1} of tile 1 (sqz_frag_s8_b). */
SQZ__FRAG void sqz_i8_ldsm_b(int lane, int n0, int ks, int *row, int *chunk) {
    const int q = lane >> 3;
    *row = n0 + (lane & 7) + 8 * (q >> 1);
    *chunk = 2 * ks + (q & 1);
}

/* ---- W4A16 kernel (gemm_w4.cu): fp16 activation tiles of rows x 64 halves (128 bytes),
 * 16-byte chunks 0..7, swizzle chunk ^ (row & 7). ---- */
#define SQZ_W4_BK 64
SQZ__FRAG int sqz_f16_smem_off(int row, int chunk) { return row * (2 * SQZ_W4_BK) + ((chunk ^ (row & 7)) << 4); }
/* ldmatrix.x4 row and chunk for the A fragment (f16, 16 x 16) of rows r0..r0+15 at k step
 * ks (0..3): matrices 0..3 = (rows +0, k 0..7), (rows +8, k 0..7), (rows +0, k 8..15),
 * (rows +8, k 8..15) = registers 0..3 of sqz_frag_f16_a. */
SQZ__FRAG void sqz_f16_ldsm_a(int lane, int r0, int ks, int *row, int *chunk) {
    const int q = lane >> 3;
    *row = r0 + (lane & 7) + 8 * (q & 1);
    *chunk = 2 * ks + (q >> 1);
}

/* ---- 2:4 sparse INT8 (gemm_i8_sp24.cu): mma.sp::ordered_metadata.m16n8k64.row.col.s32.s8.s8.s32,
 * W as the sparse A operand (16 W rows x 64 k, compressed to 16 x 32), X^T as B (64 k x 8
 * tokens). PTX ISA, "Matrix fragments for sparse mma.m16n8k64 with .u8/.s8":
 *   A (compressed 16 x 32), r = 0..3: the dense m16n8k32 A layout on the compressed matrix,
 *     (row, ccol .. ccol + 3): row = g + 8 (r & 1), ccol = 4t + 16 (r >> 1) (= sqz_frag_s8_a);
 *     these are the kept values of uncompressed columns 2 ccol .. 2 ccol + 7;
 *   B (64 x 8), r = 0..3: (k .. k + 3, n): k = 4t + 16 r, n = g;
 *   metadata, sparsity selector 0 (every lane of a group of four contributes): lane (g, t)
 *     holds the 2-bit index pairs of uncompressed columns 16t .. 16t + 15 (four groups of 4,
 *     group j at bits 4j) of row g in bits 0..15 and of row g + 8 in bits 16..31.
 * The metadata assignment is the one point not yet confirmed on hardware here (no GPU in the
 * sessions so far): tests/gpu/test_gpu_sp24.c compares the kernel with the CPU reference
 * wherever a GPU is found, and this function is the one place to change. ---- */
SQZ__FRAG void sqz_frag_s8_b64(int lane, int r, int *k, int *n) {
    *k = 4 * (lane & 3) + 16 * r;
    *n = lane >> 2;
}
/* Row (within the tile) and first uncompressed column (within the k64 step) of the 16-bit
 * half h (0: bits 0..15, 1: bits 16..31) of lane's metadata register. */
SQZ__FRAG void sqz_sp24_meta_s8(int lane, int h, int *row, int *col0) {
    *row = (lane >> 2) + 8 * h;
    *col0 = 16 * (lane & 3);
}
/* The 16-bit half of W row R's metadata (sqz/sparse.h words, kw = k / 32 per row) for
 * uncompressed columns [c0, c0 + 16) (c0 % 16 == 0); rows R >= n (past the matrix): four
 * valid (0, 1) fields, over zero values. */
SQZ__FRAG unsigned sqz_sp24_meta_half(const unsigned *meta, int n, int kw, int R, int c0) {
    if (R >= n) return 0x4444u;
    const unsigned w = meta[(long long)R * kw + c0 / 32];
    return (w >> (16 * ((c0 / 16) & 1))) & 0xFFFFu;
}

#ifdef __cplusplus
}
#endif
#endif

/* tests/unit/test_kernel_emu.c - the tensor-core kernels' index math, checked on the CPU
 * without a GPU:
 *  - the fragment coordinates of kernels/cuda/mma_frag.h against the PTX ISA's own
 *    element-index formulas (written here independently, from the ISA text);
 *  - shared-memory swizzles: the loaders write every byte once, and ldmatrix phases and
 *    stores are free of bank conflicts;
 *  - ldmatrix emulated on the swizzled tiles yields the fragments the ISA expects;
 *  - the W4A16 kernel emulated end to end on real weights: the nibble decoder (the
 *    "magic number" fp16 trick, with fp16 roundings reproduced exactly), the scale
 *    permutation, the B-fragment placement and the mma accumulation, against the scalar
 *    reference. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "quant/gguf/quant_gguf.h"
#include "kernels/cpu/gemm_ref.h"
#include "kernels/cpu/w4_pack.h"
#include "kernels/cuda/mma_frag.h"
#include "real_weights.h"
#include "test_util.h"

/* ---- PTX ISA element-index formulas (groupID g, threadID_in_group t) ---- */
static int G(int lane) { return lane >> 2; }
static int T(int lane) { return lane % 4; }
/* m16n8k16 .f16 A, elements a0..a7 */
static int ptx_f16_a_row(int lane, int i) { return (i < 2 || (i >= 4 && i < 6)) ? G(lane) : G(lane) + 8; }
static int ptx_f16_a_col(int lane, int i) { return i < 4 ? T(lane) * 2 + (i & 1) : T(lane) * 2 + (i & 1) + 8; }
/* m16n8k16 .f16 B, elements b0..b3 */
static int ptx_f16_b_row(int lane, int i) { return i < 2 ? T(lane) * 2 + (i & 1) : T(lane) * 2 + (i & 1) + 8; }
/* m16n8k32 .s8 A, elements a0..a15 */
static int ptx_s8_a_row(int lane, int i) { return (i < 4 || (i >= 8 && i < 12)) ? G(lane) : G(lane) + 8; }
static int ptx_s8_a_col(int lane, int i) { return i < 8 ? T(lane) * 4 + (i & 3) : T(lane) * 4 + (i & 3) + 16; }
/* m16n8k32 .s8 B, elements b0..b7 */
static int ptx_s8_b_row(int lane, int i) { return i < 4 ? T(lane) * 4 + (i & 3) : T(lane) * 4 + (i & 3) + 16; }
/* C / D, elements c0..c3 */
static int ptx_c_row(int lane, int i) { return i < 2 ? G(lane) : G(lane) + 8; }
static int ptx_c_col(int lane, int i) { return T(lane) * 2 + (i & 1); }

static void test_fragments_match_ptx(void **state) {
    (void)state;
    for (int lane = 0; lane < 32; lane++) {
        int row, col;
        for (int i = 0; i < 8; i++) { /* f16 A: register i / 2, half i % 2 */
            sqz_frag_f16_a(lane, i / 2, &row, &col);
            assert_int_equal(row, ptx_f16_a_row(lane, i));
            assert_int_equal(col + i % 2, ptx_f16_a_col(lane, i));
        }
        for (int i = 0; i < 4; i++) {
            sqz_frag_f16_b(lane, i / 2, &row, &col);
            assert_int_equal(row + i % 2, ptx_f16_b_row(lane, i));
            assert_int_equal(col, G(lane));
        }
        for (int i = 0; i < 16; i++) { /* s8 A: register i / 4, byte i % 4 */
            sqz_frag_s8_a(lane, i / 4, &row, &col);
            assert_int_equal(row, ptx_s8_a_row(lane, i));
            assert_int_equal(col + i % 4, ptx_s8_a_col(lane, i));
        }
        for (int i = 0; i < 8; i++) {
            sqz_frag_s8_b(lane, i / 4, &row, &col);
            assert_int_equal(row + i % 4, ptx_s8_b_row(lane, i));
            assert_int_equal(col, G(lane));
        }
        for (int i = 0; i < 4; i++) {
            sqz_frag_c(lane, i, &row, &col);
            assert_int_equal(row, ptx_c_row(lane, i));
            assert_int_equal(col, ptx_c_col(lane, i));
        }
    }
}

/* ---- ldmatrix on swizzled tiles ---- */
typedef int (*smem_off_fn)(int row, int chunk);

/* ldmatrix.x4: lane l addresses row (l & 7) of matrix l >> 3; register q of lane l gets
 * bytes 4 (l & 3) .. +3 of row l >> 2 of matrix q. Also checks each 8-address phase for
 * bank conflicts (8 distinct 16-byte bank groups). */
static void ldsm_x4(const uint8_t *smem, const int addr[32], uint8_t regs[32][4][4]) {
    for (int q = 0; q < 4; q++) {
        int groups = 0;
        for (int r = 0; r < 8; r++) groups |= 1 << ((addr[8 * q + r] >> 4) & 7);
        assert_int_equal(groups, 0xFF);
    }
    for (int l = 0; l < 32; l++)
        for (int q = 0; q < 4; q++) memcpy(regs[l][q], smem + addr[8 * q + (l >> 2)] + 4 * (l & 3), 4);
}

/* Fills a swizzled smem image of a (rows x row_bytes) tile; checks the map is a bijection
 * and that each warp-wide group of 32 consecutive 16-byte stores is conflict free. */
static void fill_tile(uint8_t *smem, const uint8_t *tile, int rows, int row_bytes, smem_off_fn off) {
    const int chunks = row_bytes / 16;
    int *seen = calloc((size_t)rows * chunks, sizeof(int));
    for (int c = 0; c < rows * chunks; c++) {
        const int r = c / chunks, ch = c % chunks, o = off(r, ch);
        assert_true(o >= 0 && o + 16 <= rows * row_bytes && o % 16 == 0);
        seen[o / 16]++;
        memcpy(smem + o, tile + r * row_bytes + ch * 16, 16);
    }
    for (int i = 0; i < rows * chunks; i++) assert_int_equal(seen[i], 1);
    for (int c0 = 0; c0 + 32 <= rows * chunks; c0 += 32)
        for (int ph = 0; ph < 4; ph++) { /* a 128-bit store wavefront serves 8 lanes */
            int groups = 0;
            for (int l = 0; l < 8; l++) {
                const int c = c0 + 8 * ph + l;
                groups |= 1 << ((off(c / chunks, c % chunks) >> 4) & 7);
            }
            assert_int_equal(groups, 0xFF);
        }
    free(seen);
}

static void test_i8_tiles(void **state) {
    (void)state;
    enum { ROWS = 128 };
    uint8_t tile[ROWS * SQZ_I8_BK], smem[ROWS * SQZ_I8_BK], regs[32][4][4];
    for (int i = 0; i < ROWS * SQZ_I8_BK; i++) tile[i] = (uint8_t)(i * 7 + i / 64);
    fill_tile(smem, tile, ROWS, SQZ_I8_BK, sqz_i8_smem_off);
    for (int r0 = 0; r0 < ROWS; r0 += 16)
        for (int ks = 0; ks < SQZ_I8_BK / 32; ks++) {
            int addr[32];
            /* A fragment of rows r0.. */
            for (int l = 0; l < 32; l++) {
                int row, ch;
                sqz_i8_ldsm_a(l, r0, ks, &row, &ch);
                addr[l] = sqz_i8_smem_off(row, ch);
            }
            ldsm_x4(smem, addr, regs);
            for (int l = 0; l < 32; l++)
                for (int r = 0; r < 4; r++) {
                    int row, col;
                    sqz_frag_s8_a(l, r, &row, &col);
                    assert_memory_equal(regs[l][r], tile + (r0 + row) * SQZ_I8_BK + ks * 32 + col, 4);
                }
            /* B fragments of the n8 tiles at rows r0 and r0 + 8 */
            for (int l = 0; l < 32; l++) {
                int row, ch;
                sqz_i8_ldsm_b(l, r0, ks, &row, &ch);
                addr[l] = sqz_i8_smem_off(row, ch);
            }
            ldsm_x4(smem, addr, regs);
            for (int l = 0; l < 32; l++)
                for (int t = 0; t < 2; t++)
                    for (int r = 0; r < 2; r++) {
                        int kk, nn;
                        sqz_frag_s8_b(l, r, &kk, &nn);
                        /* B[k][n] = W[n][k]: 4 consecutive k of row n */
                        assert_memory_equal(regs[l][2 * t + r], tile + (r0 + 8 * t + nn) * SQZ_I8_BK + ks * 32 + kk, 4);
                    }
        }
}

static void test_f16_tiles(void **state) {
    (void)state;
    enum { ROWS = 128, RB = 2 * SQZ_W4_BK };
    uint8_t *tile = malloc(ROWS * RB), *smem = malloc(ROWS * RB), regs[32][4][4];
    for (int i = 0; i < ROWS * RB; i++) tile[i] = (uint8_t)(i * 13 + i / 128);
    fill_tile(smem, tile, ROWS, RB, sqz_f16_smem_off);
    for (int r0 = 0; r0 < ROWS; r0 += 16)
        for (int ks = 0; ks < SQZ_W4_BK / 16; ks++) {
            int addr[32];
            for (int l = 0; l < 32; l++) {
                int row, ch;
                sqz_f16_ldsm_a(l, r0, ks, &row, &ch);
                addr[l] = sqz_f16_smem_off(row, ch);
            }
            ldsm_x4(smem, addr, regs);
            for (int l = 0; l < 32; l++)
                for (int r = 0; r < 4; r++) {
                    int row, col; /* in halves */
                    sqz_frag_f16_a(l, r, &row, &col);
                    assert_memory_equal(regs[l][r], tile + (r0 + row) * RB + 2 * (ks * 16 + col), 4);
                }
        }
    free(tile);
    free(smem);
}

/* ---- the W4A16 kernel, emulated ---- */

/* Exact double -> fp16, round to nearest even (one rounding). */
static uint16_t f16_rne(double x) {
    uint16_t sign = 0;
    if (x < 0 || (x == 0 && signbit(x))) { sign = 0x8000; x = -x; }
    if (x >= 65520.0) return sign | 0x7C00;
    if (x < 0x1p-14) return sign | (uint16_t)nearbyint(x * 0x1p24); /* subnormal grid 2^-24 */
    int e;
    frexp(x, &e); /* x = f 2^e, f in [0.5, 1) */
    e -= 1;       /* x in [2^e, 2^(e+1)) */
    double mant = nearbyint(x * ldexp(1.0, 10 - e));
    if (mant >= 2048) { mant = 1024; e++; }
    if (e > 15) return sign | 0x7C00;
    return sign | (uint16_t)(((e + 15) << 10) | ((int)mant - 1024));
}
static float h2f(uint32_t bits16) { return sqz_fp16_to_fp32((uint16_t)bits16); }

/* gemm_w4.cu's w4_decode, operation by operation: b[j][r][e] is half e of register r of
 * sub-tile j, as an fp16 bit pattern. */
static void emu_decode(const uint8_t q16[16], const uint8_t d16[16], const uint8_t m16[16], int q41,
                       uint16_t b[8][2][2]) {
    for (int w = 0; w < 4; w++) {
        const uint32_t lo = sqz__rd_u32(q16 + 4 * w), hi = lo >> 8;
        const uint32_t h[4] = {(lo & 0x000F000Fu) | 0x64006400u, (lo & 0x00F000F0u) | 0x64006400u,
                               (hi & 0x000F000Fu) | 0x64006400u, (hi & 0x00F000F0u) | 0x64006400u};
        const uint32_t dw = sqz__rd_u32(d16 + 4 * w), mw = sqz__rd_u32(m16 + 4 * w);
        for (int p = 0; p < 4; p++) {
            const int j = 2 * w + (p >> 1), r = p & 1;
            const double d = h2f(p < 2 ? dw & 0xFFFF : dw >> 16), mn = h2f(p < 2 ? mw & 0xFFFF : mw >> 16);
            for (int e = 0; e < 2; e++) {
                const double hv = h2f((h[p] >> (16 * e)) & 0xFFFF);
                /* h - 1032 / fma(h, 1/16, -72) (Q4_0) or h - 1024 / fma(h, 1/16, -64) (Q4_1): exact */
                const double v = (p % 2 == 0) ? hv - (q41 ? 1024 : 1032) : hv / 16 - (q41 ? 64 : 72);
                assert_true(v == floor(v) && v >= -8 && v <= 15);
                /* hmul2 / hfma2: one rounding of the exact result */
                b[j][r][e] = f16_rne(q41 ? v * d + mn : v * d);
            }
        }
    }
}

/* Emulates w4_small_kernel for m <= 16 rows: y (m, n) f32. Also returns the decoded
 * weights wdec (n, k) to compare with the fp16-rounded exact dequantization. */
static void emu_w4_small(const sqz_w4_layout *L, const uint8_t *prep, const uint16_t *x, int m, float *y,
                         float *wdec) {
    const int q41 = L->dtype == SQZ_DTYPE_Q4_1;
    const uint8_t zero16[16] = {0};
    memset(y, 0, sizeof(float) * m * L->n);
    for (int64_t tile = 0; tile < L->n_tiles; tile++) {
        float acc[16][64];
        memset(acc, 0, sizeof acc);
        for (int64_t step = 0; step < L->k_steps; step++) {
            float B[16][64], A[16][16];
            int cover[16][64];
            memset(cover, 0, sizeof cover);
            for (int lane = 0; lane < 32; lane++) {
                const uint8_t *q16 = prep + L->q_offset + ((size_t)(tile * L->k_steps + step) * 32 + lane) * 16;
                const size_t so = (size_t)(tile * L->groups + step / 2) * SQZ_W4_SCALE_BYTES + (size_t)(lane >> 2) * 16;
                uint16_t b[8][2][2];
                emu_decode(q16, prep + L->d_offset + so, q41 ? prep + L->m_offset + so : zero16, q41, b);
                for (int j = 0; j < 8; j++)
                    for (int r = 0; r < 2; r++)
                        for (int e = 0; e < 2; e++) {
                            int kk, nn;
                            sqz_frag_f16_b(lane, r, &kk, &nn);
                            B[kk + e][j * 8 + nn] = h2f(b[j][r][e]);
                            cover[kk + e][j * 8 + nn]++;
                        }
                /* A registers as the kernel loads them (rows >= m are zero) */
                for (int r = 0; r < 4; r++) {
                    int row, col;
                    sqz_frag_f16_a(lane, r, &row, &col);
                    for (int e = 0; e < 2; e++)
                        A[row][col + e] = row < m ? h2f(x[row * L->k + step * 16 + col + e]) : 0.0f;
                }
            }
            for (int kk = 0; kk < 16; kk++)
                for (int c = 0; c < 64; c++) {
                    assert_int_equal(cover[kk][c], 1);
                    const int64_t row = tile * 64 + c;
                    if (row < L->n) wdec[row * L->k + step * 16 + kk] = B[kk][c];
                }
            for (int i = 0; i < 16; i++)
                for (int c = 0; c < 64; c++) {
                    float s = 0;
                    for (int kk = 0; kk < 16; kk++) s += A[i][kk] * B[kk][c];
                    acc[i][c] += s;
                }
        }
        /* the accumulators leave through the C-fragment coordinates */
        for (int lane = 0; lane < 32; lane++)
            for (int j = 0; j < 8; j++)
                for (int e = 0; e < 4; e++) {
                    int row, col;
                    sqz_frag_c(lane, e, &row, &col);
                    const int64_t n = tile * 64 + j * 8 + col;
                    if (row < m && n < L->n) y[row * L->n + n] = acc[row][j * 8 + col];
                }
    }
}

static void test_w4_kernel_emulated(void **state) {
    (void)state;
    float *wts = sqz_rw_need();
    const int64_t mats[][3] = {{860, 64, SQZ_RW_W1}, {80, 256, SQZ_RW_WQ}};
    uint64_t rs = 12345;
    for (size_t mi = 0; mi < 2; mi++)
        for (int q41 = 0; q41 < 2; q41++) {
            const sqz_dtype t = q41 ? SQZ_DTYPE_Q4_1 : SQZ_DTYPE_Q4_0;
            const int64_t n = mats[mi][0], k = mats[mi][1];
            uint8_t *blocks = malloc((size_t)n * (k / 32) * 20);
            (q41 ? sqz__quantize_q4_1_ref : sqz__quantize_q4_0_ref)(wts + mats[mi][2], blocks, n * k);
            sqz_w4_layout L;
            SQZ_ASSERT_OK(sqz__w4_layout_init(t, n, k, &L));
            uint8_t *prep = malloc(L.total);
            sqz__w4_pack(&L, blocks, prep);
            const int m = 3;
            uint16_t *x = malloc(sizeof(uint16_t) * m * k);
            for (int64_t i = 0; i < m * k; i++) {
                rs ^= rs << 13; rs ^= rs >> 7; rs ^= rs << 17;
                x[i] = sqz_fp32_to_fp16((float)((int)(rs % 2001) - 1000) / 1000.0f);
            }
            float *y = malloc(sizeof(float) * m * n), *yr = malloc(sizeof(float) * m * n);
            float *wdec = malloc(sizeof(float) * n * k), *wref = malloc(sizeof(float) * n * k);
            emu_w4_small(&L, prep, x, m, y, wdec);
            /* the decoder reproduces the exact dequantization rounded once to fp16 */
            const uint8_t *bk = blocks;
            for (int64_t row = 0; row < n; row++)
                for (int64_t g = 0; g < k / 32; g++) {
                    const uint8_t *blk = bk + (size_t)(row * (k / 32) + g) * (q41 ? 20 : 18);
                    const double d = sqz_fp16_to_fp32(sqz__rd_u16(blk));
                    const double mn = q41 ? sqz_fp16_to_fp32(sqz__rd_u16(blk + 2)) : 0.0;
                    const uint8_t *qs = blk + (q41 ? 4 : 2);
                    for (int e = 0; e < 32; e++) {
                        const int q = e < 16 ? (qs[e] & 15) : (qs[e - 16] >> 4);
                        wref[row * k + g * 32 + e] = h2f(f16_rne(q41 ? q * d + mn : (q - 8) * d));
                    }
                }
            assert_memory_equal(wdec, wref, sizeof(float) * n * k);
            /* and the emulated GEMM matches the scalar reference */
            SQZ_ASSERT_OK(sqz__gemm_w4a16_ref(m, n, k, x, blocks, t, yr, SQZ_DTYPE_F32));
            double num = 0, den = 0;
            for (int64_t i = 0; i < m * n; i++) {
                num += ((double)y[i] - yr[i]) * ((double)y[i] - yr[i]);
                den += (double)yr[i] * yr[i];
            }
            assert_true(num / den < 1e-5);
            free(blocks);
            free(prep);
            free(x);
            free(y);
            free(yr);
            free(wdec);
            free(wref);
        }
    free(wts);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fragments_match_ptx),
        cmocka_unit_test(test_i8_tiles),
        cmocka_unit_test(test_f16_tiles),
        cmocka_unit_test(test_w4_kernel_emulated),
    };
    return sqz_test_run(tests, NULL, NULL);
}

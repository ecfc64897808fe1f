/* tests/unit/test_sp24_emu.c - the 2:4 sparse INT8 CUDA kernel's index math (kernels/cuda/
 * mma_frag.h, gemm_i8_sp24.cu), checked on the CPU without a GPU:
 *  - the fragment maps of mma.sp m16n8k64 .s8 cover their tiles exactly once: A (compressed
 *    16 x 32), B (64 x 8), the metadata (16 rows x 16 groups of 4);
 *  - the kernel emulated end to end on a real 2:4 INT8 weight (stories260K, rows not a multiple
 *    of 16, tokens not a multiple of 8): registers loaded as the kernel loads them, mma.sp
 *    applied element by element as the ISA defines it (each kept value times the B row its
 *    metadata index names), the epilogue; equal bit for bit to the CPU reference. */
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/gemm_ref.h"
#include "kernels/cuda/mma_frag.h"
#include "sparse/sparse_internal.h"
#include "real_weights.h"
#include "sqz/sparse.h"
#include "test_util.h"

static void test_coverage(void **state) {
    (void)state;
    int a[16][32] = {{0}}, b[64][8] = {{0}}, e[16][16] = {{0}};
    for (int lane = 0; lane < 32; lane++)
        for (int r = 0; r < 4; r++) {
            int row, col, k, n;
            sqz_frag_s8_a(lane, r, &row, &col);
            for (int q = 0; q < 4; q++) a[row][col + q]++;
            sqz_frag_s8_b64(lane, r, &k, &n);
            for (int q = 0; q < 4; q++) b[k + q][n]++;
        }
    for (int lane = 0; lane < 32; lane++)
        for (int h = 0; h < 2; h++) {
            int row, col0;
            sqz_sp24_meta_s8(lane, h, &row, &col0);
            for (int j = 0; j < 4; j++) e[row][col0 / 4 + j]++;
        }
    for (int i = 0; i < 16; i++)
        for (int j = 0; j < 32; j++) assert_int_equal(a[i][j], 1);
    for (int i = 0; i < 64; i++)
        for (int j = 0; j < 8; j++) assert_int_equal(b[i][j], 1);
    for (int i = 0; i < 16; i++)
        for (int j = 0; j < 16; j++) assert_int_equal(e[i][j], 1);
}

/* Per lane, the registers of one k64 step of the tile (n0, m0), exactly as the kernel loads. */
typedef struct regs {
    unsigned a[32][4], b[32][4], e[32];
} regs;

static void load(regs *g, const int8_t *vals, const uint32_t *meta, const int8_t *x, int m, int n, int k, int n0,
                 int m0, int kk) {
    for (int lane = 0; lane < 32; lane++) {
        for (int r = 0; r < 4; r++) {
            int row, col, kq, tok;
            sqz_frag_s8_a(lane, r, &row, &col);
            g->a[lane][r] = 0;
            if (n0 + row < n) memcpy(&g->a[lane][r], vals + (size_t)(n0 + row) * (k / 2) + kk / 2 + col, 4);
            sqz_frag_s8_b64(lane, r, &kq, &tok);
            g->b[lane][r] = 0;
            if (m0 + tok < m) memcpy(&g->b[lane][r], x + (size_t)(m0 + tok) * k + kk + kq, 4);
        }
        int r0, r1, c0, c1;
        sqz_sp24_meta_s8(lane, 0, &r0, &c0);
        sqz_sp24_meta_s8(lane, 1, &r1, &c1);
        g->e[lane] = sqz_sp24_meta_half(meta, n, k / 32, n0 + r0, kk + c0) |
                     sqz_sp24_meta_half(meta, n, k / 32, n0 + r1, kk + c1) << 16;
    }
}

static int8_t byte_of(unsigned w, int q) { return (int8_t)(uint8_t)(w >> (8 * q)); }

/* mma.sp as the ISA defines it, reading every operand through the fragment maps. */
static void mma_sp(const regs *g, int32_t d[16][8]) {
    int8_t A[16][32], B[64][8];
    unsigned E[16][16];
    for (int lane = 0; lane < 32; lane++)
        for (int r = 0; r < 4; r++) {
            int row, col, k, n;
            sqz_frag_s8_a(lane, r, &row, &col);
            for (int q = 0; q < 4; q++) A[row][col + q] = byte_of(g->a[lane][r], q);
            sqz_frag_s8_b64(lane, r, &k, &n);
            for (int q = 0; q < 4; q++) B[k + q][n] = byte_of(g->b[lane][r], q);
        }
    for (int lane = 0; lane < 32; lane++)
        for (int h = 0; h < 2; h++) {
            int row, col0;
            sqz_sp24_meta_s8(lane, h, &row, &col0);
            for (int j = 0; j < 4; j++) E[row][col0 / 4 + j] = (g->e[lane] >> (16 * h + 4 * j)) & 15u;
        }
    for (int i = 0; i < 16; i++)
        for (int j = 0; j < 8; j++)
            for (int c = 0; c < 16; c++) { /* chunk c: kept values A[i][2c], A[i][2c+1] at indices E & 3, E >> 2 */
                const unsigned f = E[i][c];
                assert_true((f & 3u) < (f >> 2)); /* ordered metadata */
                d[i][j] += (int32_t)A[i][2 * c] * B[4 * c + (f & 3u)][j] + (int32_t)A[i][2 * c + 1] * B[4 * c + (f >> 2)][j];
            }
}

static void test_kernel_emulated(void **state) {
    (void)state;
    float *rw = sqz_rw_need();
    enum { N = 172, K = 128, M = 13 };
    float *w = malloc(sizeof(float) * N * K), *xf = malloc(sizeof(float) * M * K);
    for (int r = 0; r < N; r++) /* W1 of blocks 0 and 1 side by side: k = 128, two mma steps */
        for (int c = 0; c < K; c++) w[r * K + c] = rw[SQZ_RW_W1 + (c < 64 ? 0 : 172 * 64) + r * 64 + c % 64];
    for (int i = 0; i < M * K; i++) xf[i] = rw[SQZ_RW_TOK_EMB + 7 * K + i];
    int64_t z;
    assert_int_equal(sqz__sparsity_score_prune(w, N, K, SQZ__SPARSE_MAGNITUDE, NULL, 0, 2, 4, &z), SQZ_OK);
    int8_t *wq = malloc(N * K), *vals = malloc(N * K / 2), *xq = malloc(M * K);
    uint32_t *meta = malloc(sizeof(uint32_t) * N * K / 32);
    float ws[N], xs[M], *yref = malloc(sizeof(float) * M * N), *yemu = malloc(sizeof(float) * M * N);
    sqz__quantize_rows_i8_ref(w, N, K, wq, ws);
    sqz__quantize_rows_i8_ref(xf, M, K, xq, xs);
    assert_int_equal(sqz_sp24_pack_i8(wq, N, K, vals, meta), SQZ_OK);
    assert_int_equal(sqz_gemm_i8_sp24_ref(M, N, K, xq, xs, vals, meta, ws, yref, SQZ_DTYPE_F32), SQZ_OK);
    regs *g = malloc(sizeof *g);
    for (int n0 = 0; n0 < N; n0 += 16)
        for (int m0 = 0; m0 < M; m0 += 8) {
            int32_t d[16][8];
            memset(d, 0, sizeof d);
            for (int kk = 0; kk < K; kk += 64) {
                load(g, vals, meta, xq, M, N, K, n0, m0, kk);
                mma_sp(g, d);
            }
            for (int lane = 0; lane < 32; lane++) /* the epilogue: accumulator fragment -> Y */
                for (int i = 0; i < 4; i++) {
                    int row, col;
                    sqz_frag_c(lane, i, &row, &col);
                    if (n0 + row < N && m0 + col < M)
                        yemu[(m0 + col) * N + n0 + row] = ((float)d[row][col] * xs[m0 + col]) * ws[n0 + row];
                }
        }
    assert_memory_equal(yemu, yref, sizeof(float) * M * N);
    free(g); free(w); free(xf); free(wq); free(vals); free(xq); free(meta); free(yref); free(yemu); free(rw);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_coverage),
        cmocka_unit_test(test_kernel_emulated),
    };
    return sqz_test_run(tests, NULL, NULL);
}

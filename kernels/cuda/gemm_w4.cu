/*
 * kernels/cuda/gemm_w4.cu - W4A16 tensor-core GEMM on the prepared int4 layout (see
 * gemm_w4.cuh and kernels/cpu/w4_pack.h). The decoder below is mirrored, operation for
 * operation, by the CPU emulation in tests/unit/test_gemm_ref.c.
 */
#include <limits.h>

#include "kernels/cuda/gemm_w4.cuh"

namespace {

struct W4Params {
    int m, n, k;
    const __half *x;          /* (m, k) */
    const uint8_t *w;         /* prepared */
    size_t q_offset, d_offset, m_offset;
    int n_tiles, k_steps, groups;
    void *y;                  /* (m, n) */
    int y_f16;
    float *part;              /* split-k partial sums [splits][m][n], or NULL */
    int splits, tiles_m, tiles_n, k_tiles;
};

__device__ __forceinline__ __half2 as_h2(uint32_t u) {
    __half2 h;
    memcpy(&h, &u, 4);
    return h;
}
__device__ __forceinline__ uint32_t as_u32(__half2 h) {
    uint32_t u;
    memcpy(&u, &h, 4);
    return u;
}

/* fp16 bit patterns, both halves */
constexpr uint32_t H_MAGIC = 0x64006400u;   /* 1024 */
constexpr uint32_t H_1032 = 0x64086408u;    /* 1024 + 8 */
constexpr uint32_t H_1_16 = 0x2C002C00u;    /* 1/16 */
constexpr uint32_t H_M72 = 0xD480D480u;     /* -72 = -(1024 / 16 + 8) */
constexpr uint32_t H_M64 = 0xD400D400u;     /* -64 = -(1024 / 16) */

/* One lane's 16 bytes of a (tile, k step) + its 8 scales (and minimums) -> the B
 * fragments of the tile's 8 n8 sub-tiles. Nibble order: kernels/cpu/w4_pack.h. Every
 * step is exact except the last (one RNE rounding of d * (q - 8), or of d * q + m by fma). */
template <bool Q41>
__device__ __forceinline__ void w4_decode(const uint4 &q, const uint4 &d8, const uint4 &m8, uint32_t (&b)[8][2]) {
    const uint32_t qw[4] = {q.x, q.y, q.z, q.w};
    const uint32_t dw[4] = {d8.x, d8.y, d8.z, d8.w};
    const uint32_t mw[4] = {m8.x, m8.y, m8.z, m8.w};
#pragma unroll
    for (int w = 0; w < 4; w++) {
        const uint32_t lo = qw[w], hi = qw[w] >> 8;
        const __half2 h0 = as_h2((lo & 0x000F000Fu) | H_MAGIC); /* 1024 + q, nibbles 0 and 4 */
        const __half2 h1 = as_h2((lo & 0x00F000F0u) | H_MAGIC); /* 1024 + 16 q, nibbles 1 and 5 */
        const __half2 h2 = as_h2((hi & 0x000F000Fu) | H_MAGIC); /* nibbles 2 and 6 */
        const __half2 h3 = as_h2((hi & 0x00F000F0u) | H_MAGIC); /* nibbles 3 and 7 */
        const __half2 de = __low2half2(as_h2(dw[w])), dodd = __high2half2(as_h2(dw[w]));
        if (!Q41) {
            const __half2 v0 = __hsub2(h0, as_h2(H_1032));              /* q - 8 */
            const __half2 v1 = __hfma2(h1, as_h2(H_1_16), as_h2(H_M72)); /* q - 8 */
            const __half2 v2 = __hsub2(h2, as_h2(H_1032));
            const __half2 v3 = __hfma2(h3, as_h2(H_1_16), as_h2(H_M72));
            b[2 * w][0] = as_u32(__hmul2(v0, de));
            b[2 * w][1] = as_u32(__hmul2(v1, de));
            b[2 * w + 1][0] = as_u32(__hmul2(v2, dodd));
            b[2 * w + 1][1] = as_u32(__hmul2(v3, dodd));
        } else {
            const __half2 me = __low2half2(as_h2(mw[w])), modd = __high2half2(as_h2(mw[w]));
            const __half2 v0 = __hsub2(h0, as_h2(H_MAGIC));             /* q */
            const __half2 v1 = __hfma2(h1, as_h2(H_1_16), as_h2(H_M64)); /* q */
            const __half2 v2 = __hsub2(h2, as_h2(H_MAGIC));
            const __half2 v3 = __hfma2(h3, as_h2(H_1_16), as_h2(H_M64));
            b[2 * w][0] = as_u32(__hfma2(v0, de, me));
            b[2 * w][1] = as_u32(__hfma2(v1, de, me));
            b[2 * w + 1][0] = as_u32(__hfma2(v2, dodd, modd));
            b[2 * w + 1][1] = as_u32(__hfma2(v3, dodd, modd));
        }
    }
}

__device__ __forceinline__ void w4_store(const W4Params &p, int split, int row, int col, float v) {
    if (row >= p.m || col >= p.n) return;
    const int64_t idx = (int64_t)row * p.n + col;
    if (p.part) p.part[(int64_t)split * p.m * p.n + idx] = v;
    else sqz__store_out(p.y, p.y_f16, idx, v);
}

/* ---- small m ---------------------------------------------------------------------- */
constexpr int SW = 8; /* warps of the small-m kernel */

template <bool Q41>
struct SmallStage {
    uint4 q[2], d, mn;
    uint32_t a[2][4];
};

template <bool Q41>
__device__ __forceinline__ void small_load(SmallStage<Q41> &s, const W4Params &p, const uint4 *qp, const uint4 *dp,
                                           const uint4 *mp, const uint32_t *xlo, const uint32_t *xhi, bool lo_ok,
                                           bool hi_ok, int gi) {
    s.q[0] = __ldg(qp + (size_t)(2 * gi) * 32);
    s.q[1] = __ldg(qp + (size_t)(2 * gi + 1) * 32);
    s.d = __ldg(dp + (size_t)gi * 8);
    s.mn = Q41 ? __ldg(mp + (size_t)gi * 8) : make_uint4(0u, 0u, 0u, 0u);
#pragma unroll
    for (int st = 0; st < 2; st++) {
        const int k2 = (gi * 32 + st * 16) / 2; /* in half2 units */
        /* registers per sqz_frag_f16_a: 0 = (g, 2t), 1 = (g + 8, 2t), 2 = (g, 2t + 8), 3 = (g + 8, 2t + 8) */
        s.a[st][0] = lo_ok ? __ldg(xlo + k2) : 0u;
        s.a[st][1] = hi_ok ? __ldg(xhi + k2) : 0u;
        s.a[st][2] = lo_ok ? __ldg(xlo + k2 + 4) : 0u;
        s.a[st][3] = hi_ok ? __ldg(xhi + k2 + 4) : 0u;
    }
    (void)p;
}

template <bool Q41>
__global__ void __launch_bounds__(SW * 32) w4_small_kernel(const W4Params p) {
#ifdef SQZ__NEED_SM80
    __trap();
#else
    __shared__ float red[SW][16][SQZ_W4_TILE_N];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int tile = blockIdx.x;
    const int parts = p.splits * SW, part = blockIdx.y * SW + warp;
    const int g0 = (int)((int64_t)p.groups * part / parts);
    const int g1 = (int)((int64_t)p.groups * (part + 1) / parts);
    const uint4 *qp = reinterpret_cast<const uint4 *>(p.w + p.q_offset) + (size_t)tile * p.k_steps * 32 + lane;
    const uint4 *dp = reinterpret_cast<const uint4 *>(p.w + p.d_offset) + (size_t)tile * p.groups * 8 + (lane >> 2);
    const uint4 *mp = reinterpret_cast<const uint4 *>(p.w + p.m_offset) + (size_t)tile * p.groups * 8 + (lane >> 2);
    int r0, c0;
    sqz_frag_f16_a(lane, 0, &r0, &c0);
    const bool lo_ok = r0 < p.m, hi_ok = r0 + 8 < p.m;
    const uint32_t *xlo = reinterpret_cast<const uint32_t *>(p.x + (int64_t)(lo_ok ? r0 : 0) * p.k + c0);
    const uint32_t *xhi = reinterpret_cast<const uint32_t *>(p.x + (int64_t)(hi_ok ? r0 + 8 : 0) * p.k + c0);

    float acc[8][4];
#pragma unroll
    for (int j = 0; j < 8; j++)
#pragma unroll
        for (int e = 0; e < 4; e++) acc[j][e] = 0.0f;

    if (g0 < g1) {
        SmallStage<Q41> cur, nxt;
        small_load<Q41>(cur, p, qp, dp, mp, xlo, xhi, lo_ok, hi_ok, g0);
        for (int gi = g0; gi < g1; gi++) {
            if (gi + 1 < g1) small_load<Q41>(nxt, p, qp, dp, mp, xlo, xhi, lo_ok, hi_ok, gi + 1);
#pragma unroll
            for (int st = 0; st < 2; st++) {
                uint32_t b[8][2];
                w4_decode<Q41>(cur.q[st], cur.d, cur.mn, b);
#pragma unroll
                for (int j = 0; j < 8; j++) sqz__mma_f16(acc[j], cur.a[st], b[j]);
            }
            if (gi + 1 < g1) cur = nxt;
        }
    }

#pragma unroll
    for (int j = 0; j < 8; j++)
#pragma unroll
        for (int e = 0; e < 4; e++) {
            int row, col;
            sqz_frag_c(lane, e, &row, &col);
            red[warp][row][j * 8 + col] = acc[j][e];
        }
    __syncthreads();
    for (int o = threadIdx.x; o < 16 * SQZ_W4_TILE_N; o += SW * 32) {
        const int row = o / SQZ_W4_TILE_N, col = o % SQZ_W4_TILE_N;
        float s = 0.0f;
#pragma unroll
        for (int w = 0; w < SW; w++) s += red[w][row][col];
        w4_store(p, blockIdx.y, row, tile * SQZ_W4_TILE_N + col, s);
    }
#endif
}

/* ---- mid / big m ------------------------------------------------------------------ */
template <int MI_, int WARPS_M_, int WARPS_N_, int STAGES_, bool Q41_>
struct WCfg {
    static constexpr int MI = MI_, WARPS_M = WARPS_M_, WARPS_N = WARPS_N_, STAGES = STAGES_;
    static constexpr bool Q41 = Q41_;
    static constexpr int THREADS = 32 * WARPS_M * WARPS_N;
    static constexpr int BM = 16 * MI * WARPS_M; /* CTA columns: WARPS_N tiles of 64 */
    static constexpr int A_BYTES = BM * SQZ_W4_BK * 2;
    static constexpr int B_BYTES = WARPS_N * (SQZ_W4_BK / SQZ_W4_KSTEP) * SQZ_W4_STEP_BYTES;
    static constexpr int S_BYTES = WARPS_N * (SQZ_W4_BK / SQZ_W4_GROUP) * SQZ_W4_SCALE_BYTES;
    static constexpr int M_BYTES = Q41 ? S_BYTES : 0;
    static constexpr int STAGE_BYTES = A_BYTES + B_BYTES + S_BYTES + M_BYTES;
    static constexpr int SMEM = STAGES * STAGE_BYTES;
    static_assert(SQZ_W4_BK == 64, "4 k steps and 2 groups per stage");
    static_assert((BM * 8) % THREADS == 0 && (WARPS_N * 128) % THREADS == 0, "whole chunks per thread");
};

template <class C>
__device__ __forceinline__ void big_load_stage(uint8_t *s, const W4Params &p, int m0, int nt0, int kt) {
    const int k0 = kt * SQZ_W4_BK;
#pragma unroll
    for (int i = 0; i < C::BM * 8 / C::THREADS; i++) { /* activations: BM rows x 8 chunks */
        const int c = (int)threadIdx.x + i * C::THREADS;
        const int r = c >> 3, ch = c & 7;
        const int grow = m0 + r, gk = k0 + ch * 8;
        const bool in = grow < p.m && gk < p.k; /* k % 32 == 0: whole chunks */
        const __half *src = in ? p.x + (int64_t)grow * p.k + gk : p.x;
        sqz__cp_async16(sqz__smem_addr(s + sqz_f16_smem_off(r, ch)), src, in ? 16 : 0);
    }
    uint8_t *sb = s + C::A_BYTES;
#pragma unroll
    for (int i = 0; i < C::WARPS_N * 128 / C::THREADS; i++) { /* quants: [tile][4 steps][32 lanes] */
        const int c = (int)threadIdx.x + i * C::THREADS;
        const int nt = nt0 + (c >> 7), step = kt * 4 + ((c & 127) >> 5);
        const bool in = nt < p.n_tiles && step < p.k_steps;
        const uint8_t *src =
            in ? p.w + p.q_offset + ((size_t)nt * p.k_steps + step) * SQZ_W4_STEP_BYTES + (size_t)(c & 31) * 16 : p.w;
        sqz__cp_async16(sqz__smem_addr(sb + c * 16), src, in ? 16 : 0);
    }
    uint8_t *ss = sb + C::B_BYTES;
    for (int c = threadIdx.x; c < C::WARPS_N * 16; c += C::THREADS) { /* scales: [tile][2 groups][8 chunks] */
        const int nt = nt0 + (c >> 4), grp = kt * 2 + ((c & 15) >> 3);
        const bool in = nt < p.n_tiles && grp < p.groups;
        const size_t o = ((size_t)nt * p.groups + grp) * SQZ_W4_SCALE_BYTES + (size_t)(c & 7) * 16;
        sqz__cp_async16(sqz__smem_addr(ss + c * 16), in ? p.w + p.d_offset + o : p.w, in ? 16 : 0);
        if (C::Q41) sqz__cp_async16(sqz__smem_addr(ss + C::S_BYTES + c * 16), in ? p.w + p.m_offset + o : p.w, in ? 16 : 0);
    }
}

template <class C>
__global__ void __launch_bounds__(C::THREADS) w4_big_kernel(const W4Params p) {
#ifdef SQZ__NEED_SM80
    __trap();
#else
    extern __shared__ __align__(128) uint8_t smem[];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int wm = warp / C::WARPS_N, wn = warp % C::WARPS_N;
    int bm, bn;
    sqz__tile_coords(blockIdx.x, p.tiles_m, p.tiles_n, &bm, &bn);
    const int m0 = bm * C::BM, nt0 = bn * C::WARPS_N;
    const int kt0 = (int)((int64_t)p.k_tiles * blockIdx.y / p.splits);
    const int kt1 = (int)((int64_t)p.k_tiles * (blockIdx.y + 1) / p.splits);
    const int nk = kt1 - kt0;

    float acc[C::MI][8][4];
#pragma unroll
    for (int mi = 0; mi < C::MI; mi++)
#pragma unroll
        for (int j = 0; j < 8; j++)
#pragma unroll
            for (int e = 0; e < 4; e++) acc[mi][j][e] = 0.0f;

#pragma unroll
    for (int s = 0; s < C::STAGES - 1; s++) {
        if (s < nk) big_load_stage<C>(smem + s * C::STAGE_BYTES, p, m0, nt0, kt0 + s);
        sqz__cp_async_commit();
    }
    for (int it = 0; it < nk; it++) {
        sqz__cp_async_wait<C::STAGES - 2>();
        __syncthreads();
        const int nxt = it + C::STAGES - 1;
        if (nxt < nk) big_load_stage<C>(smem + (nxt % C::STAGES) * C::STAGE_BYTES, p, m0, nt0, kt0 + nxt);
        sqz__cp_async_commit();
        const uint8_t *sa = smem + (it % C::STAGES) * C::STAGE_BYTES;
        const uint8_t *sb = sa + C::A_BYTES;
        const uint8_t *ss = sb + C::B_BYTES;
#pragma unroll
        for (int ks = 0; ks < SQZ_W4_BK / SQZ_W4_KSTEP; ks++) {
            const int so = wn * 256 + (ks >> 1) * SQZ_W4_SCALE_BYTES + (lane >> 2) * 16;
            const uint4 d8 = *reinterpret_cast<const uint4 *>(ss + so);
            const uint4 m8 = C::Q41 ? *reinterpret_cast<const uint4 *>(ss + C::S_BYTES + so) : make_uint4(0u, 0u, 0u, 0u);
            const uint4 q = *reinterpret_cast<const uint4 *>(sb + ((wn * 4 + ks) * 32 + lane) * 16);
            uint32_t b[8][2];
            w4_decode<C::Q41>(q, d8, m8, b);
#pragma unroll
            for (int mi = 0; mi < C::MI; mi++) {
                uint32_t a[4];
                int row, ch;
                sqz_f16_ldsm_a(lane, wm * C::MI * 16 + mi * 16, ks, &row, &ch);
                sqz__ldsm_x4(a, sqz__smem_addr(sa + sqz_f16_smem_off(row, ch)));
#pragma unroll
                for (int j = 0; j < 8; j++) sqz__mma_f16(acc[mi][j], a, b[j]);
            }
        }
    }
    sqz__cp_async_wait<0>();

#pragma unroll
    for (int mi = 0; mi < C::MI; mi++)
#pragma unroll
        for (int j = 0; j < 8; j++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                int row, col;
                sqz_frag_c(lane, e, &row, &col);
                w4_store(p, blockIdx.y, m0 + wm * C::MI * 16 + mi * 16 + row,
                         (nt0 + wn) * SQZ_W4_TILE_N + j * 8 + col, acc[mi][j][e]);
            }
#endif
}

/* shared memory: mid 4 x 13 KiB; big 3 x 26 KiB = 78 KiB, under the 99 KiB per block of
 * sm_86 / sm_89 (4 stages would need 104 KiB) */
using WMid0 = WCfg<2, 2, 2, 4, false>;
using WMid1 = WCfg<2, 2, 2, 4, true>;
using WBig0 = WCfg<4, 2, 4, 3, false>;
using WBig1 = WCfg<4, 2, 4, 3, true>;

constexpr int RTHREADS = 256;

__global__ void __launch_bounds__(RTHREADS) reduce_kernel(const float *__restrict__ part, int splits, int64_t mn,
                                                          void *__restrict__ y, int y_f16) {
    for (int64_t i = (int64_t)blockIdx.x * RTHREADS + threadIdx.x; i < mn; i += (int64_t)gridDim.x * RTHREADS) {
        float s = 0.0f;
        for (int sp = 0; sp < splits; sp++) s += part[(int64_t)sp * mn + i];
        sqz__store_out(y, y_f16, i, s);
    }
}

/* The dequantize-to-fp16 path: one thread per (tile, k step, lane), the same decoder, the
 * fragments scattered back to (n, k) by the ISA's B-fragment coordinates. */
template <bool Q41>
__global__ void __launch_bounds__(RTHREADS) dequant_kernel(const W4Params p, __half *__restrict__ out) {
    const int64_t total = (int64_t)p.n_tiles * p.k_steps * 32;
    const uint4 *qb = reinterpret_cast<const uint4 *>(p.w + p.q_offset);
    const uint4 *db = reinterpret_cast<const uint4 *>(p.w + p.d_offset);
    const uint4 *mb = reinterpret_cast<const uint4 *>(p.w + p.m_offset);
    for (int64_t idx = (int64_t)blockIdx.x * RTHREADS + threadIdx.x; idx < total; idx += (int64_t)gridDim.x * RTHREADS) {
        const int lane = (int)(idx & 31);
        const int64_t ts = idx >> 5;
        const int step = (int)(ts % p.k_steps);
        const int64_t tile = ts / p.k_steps;
        const int64_t so = (tile * p.groups + step / 2) * 8 + (lane >> 2);
        const uint4 q = __ldg(qb + idx);
        const uint4 d8 = __ldg(db + so);
        const uint4 m8 = Q41 ? __ldg(mb + so) : make_uint4(0u, 0u, 0u, 0u);
        uint32_t b[8][2];
        w4_decode<Q41>(q, d8, m8, b);
#pragma unroll
        for (int j = 0; j < 8; j++)
#pragma unroll
            for (int r = 0; r < 2; r++) {
                int kk, nn;
                sqz_frag_f16_b(lane, r, &kk, &nn);
                const int64_t row = tile * SQZ_W4_TILE_N + j * 8 + nn;
                if (row < p.n)
                    *reinterpret_cast<uint32_t *>(out + row * p.k + (int64_t)step * SQZ_W4_KSTEP + kk) = b[j][r];
            }
    }
}

W4Params make_params(const sqz_gemm_w4_args *a, const sqz__w4_entry *e) {
    W4Params p;
    memset(&p, 0, sizeof p);
    p.m = (int)a->m;
    p.n = (int)a->n;
    p.k = (int)a->k;
    p.x = reinterpret_cast<const __half *>(a->x);
    p.w = static_cast<const uint8_t *>(a->w);
    p.q_offset = e->layout.q_offset;
    p.d_offset = e->layout.d_offset;
    p.m_offset = e->layout.m_offset;
    p.n_tiles = (int)e->layout.n_tiles;
    p.k_steps = (int)e->layout.k_steps;
    p.groups = (int)e->layout.groups;
    p.y = a->y;
    p.y_f16 = a->y_dtype == SQZ_DTYPE_F16;
    p.splits = 1;
    return p;
}

sqz_status alloc_partials(sqz_cuda_ctx *c, W4Params &p) {
    p.part = NULL;
    if (p.splits <= 1) return SQZ_OK;
    size_t bytes;
    SQZ_RETURN_IF(!sqz__mul_size((size_t)p.splits * (size_t)p.m, (size_t)p.n, &bytes) ||
                      !sqz__mul_size(bytes, sizeof(float), &bytes),
                  SQZ_ERR_INVALID_ARG, "gemm_w4: partial sums overflow");
    void *part;
    SQZ_TRY(sqz__cuda_scratch(c, bytes, &part));
    p.part = static_cast<float *>(part);
    return SQZ_OK;
}

sqz_status finish_partials(sqz_cuda_ctx *c, const W4Params &p) {
    if (!p.part) return SQZ_OK;
    const int64_t mn = (int64_t)p.m * p.n;
    const int64_t blocks = sqz__ceil_div(mn, RTHREADS);
    reduce_kernel<<<(unsigned)(blocks < 65536 ? blocks : 65536), RTHREADS, 0, c->stream>>>(p.part, p.splits, mn, p.y,
                                                                                          p.y_f16);
    SQZ_CUDA_LAUNCHED();
    return SQZ_OK;
}

sqz_status launch_small(sqz_cuda_ctx *c, W4Params p, bool q41) {
    int64_t splits = sqz__ceil_div(2 * (int64_t)c->sm_count, p.n_tiles);
    const int64_t max_splits = p.groups / (2 * SW) > 1 ? p.groups / (2 * SW) : 1; /* >= 2 groups per warp */
    if (splits > max_splits) splits = max_splits;
    if (splits > 32) splits = 32;
    if (splits < 1) splits = 1;
    p.splits = (int)splits;
    SQZ_TRY(alloc_partials(c, p));
    const dim3 grid((unsigned)p.n_tiles, (unsigned)p.splits);
    if (q41) w4_small_kernel<true><<<grid, SW * 32, 0, c->stream>>>(p);
    else w4_small_kernel<false><<<grid, SW * 32, 0, c->stream>>>(p);
    SQZ_CUDA_LAUNCHED();
    return finish_partials(c, p);
}

template <class C>
sqz_status launch_big(sqz_cuda_ctx *c, W4Params p, int64_t target_ctas) {
    p.tiles_m = (int)sqz__ceil_div(p.m, C::BM);
    p.tiles_n = (int)sqz__ceil_div(p.n_tiles, C::WARPS_N);
    p.k_tiles = (int)sqz__ceil_div(p.k, SQZ_W4_BK);
    const int64_t ctas = (int64_t)p.tiles_m * p.tiles_n;
    SQZ_RETURN_IF(ctas > INT_MAX, SQZ_ERR_INVALID_ARG, "gemm_w4: %lld tiles exceed the grid", (long long)ctas);
    int64_t splits = 1;
    if (ctas < target_ctas && p.k_tiles >= 4) {
        splits = sqz__ceil_div(target_ctas, ctas);
        if (splits > p.k_tiles / 2) splits = p.k_tiles / 2; /* at least 2 k tiles per split */
        if (splits > 16) splits = 16;
        if (splits < 1) splits = 1;
    }
    p.splits = (int)splits;
    SQZ_TRY(alloc_partials(c, p));
    w4_big_kernel<C><<<dim3((unsigned)ctas, (unsigned)p.splits), C::THREADS, C::SMEM, c->stream>>>(p);
    SQZ_CUDA_LAUNCHED();
    return finish_partials(c, p);
}

template <class C>
sqz_status set_smem(void) {
    SQZ_CUDA_TRY(cudaFuncSetAttribute(w4_big_kernel<C>, cudaFuncAttributeMaxDynamicSharedMemorySize, C::SMEM));
    return SQZ_OK;
}

} // namespace

sqz_status sqz__w4_init(sqz_cuda_ctx *c) {
    SQZ_RETURN_IF((size_t)WBig1::SMEM > c->smem_optin, SQZ_ERR_UNSUPPORTED,
                  "gemm_w4: the device allows %zu bytes of shared memory per block, the kernel needs %d", c->smem_optin,
                  WBig1::SMEM);
    SQZ_TRY(set_smem<WMid0>());
    SQZ_TRY(set_smem<WMid1>());
    SQZ_TRY(set_smem<WBig0>());
    SQZ_TRY(set_smem<WBig1>());
    return SQZ_OK;
}

sqz_status sqz__w4_mma_gemm(sqz_cuda_ctx *c, const sqz_gemm_w4_args *a, const sqz__w4_entry *e) {
    const W4Params p = make_params(a, e);
    const bool q41 = e->layout.dtype == SQZ_DTYPE_Q4_1;
    if (p.m <= 16) return launch_small(c, p, q41);
    if (p.m <= 256) return q41 ? launch_big<WMid1>(c, p, 2 * (int64_t)c->sm_count)
                               : launch_big<WMid0>(c, p, 2 * (int64_t)c->sm_count);
    return q41 ? launch_big<WBig1>(c, p, c->sm_count) : launch_big<WBig0>(c, p, c->sm_count);
}

sqz_status sqz__f16_gemm(sqz_cuda_ctx *c, int64_t m, int64_t n, int64_t k, const void *x, const void *w, void *y,
                         sqz_dtype y_dtype) {
    SQZ_RETURN_IF(m > INT_MAX || n > INT_MAX || k > INT_MAX, SQZ_ERR_INVALID_ARG,
                  "cuBLAS fp16 GEMM: (%lld, %lld, %lld) exceeds int sizes", (long long)m, (long long)n, (long long)k);
    const float alpha = 1.0f, beta = 0.0f;
    /* column-major: C (n x m) = op(A) (n x k) . B (k x m), A = W stored (k x n), B = X stored (k x m) */
    SQZ_CUBLAS_TRY(cublasGemmEx(c->blas, CUBLAS_OP_T, CUBLAS_OP_N, (int)n, (int)m, (int)k, &alpha, w, CUDA_R_16F,
                                (int)k, x, CUDA_R_16F, (int)k, &beta, y,
                                y_dtype == SQZ_DTYPE_F16 ? CUDA_R_16F : CUDA_R_32F, (int)n, CUBLAS_COMPUTE_32F,
                                CUBLAS_GEMM_DEFAULT));
    return SQZ_OK;
}

sqz_status sqz__w4_dequant_gemm(sqz_cuda_ctx *c, const sqz_gemm_w4_args *a, const sqz__w4_entry *e) {
    const W4Params p = make_params(a, e);
    size_t bytes;
    SQZ_RETURN_IF(!sqz__mul_size((size_t)p.n, (size_t)p.k, &bytes) || !sqz__mul_size(bytes, 2, &bytes),
                  SQZ_ERR_INVALID_ARG, "gemm_w4: n * k overflows");
    void *w16;
    SQZ_TRY(sqz__cuda_scratch(c, bytes, &w16));
    const int64_t total = (int64_t)p.n_tiles * p.k_steps * 32;
    const int64_t blocks = sqz__ceil_div(total, RTHREADS);
    const unsigned grid = (unsigned)(blocks < 65536 ? blocks : 65536);
    if (e->layout.dtype == SQZ_DTYPE_Q4_1) dequant_kernel<true><<<grid, RTHREADS, 0, c->stream>>>(p, (__half *)w16);
    else dequant_kernel<false><<<grid, RTHREADS, 0, c->stream>>>(p, (__half *)w16);
    SQZ_CUDA_LAUNCHED();
    return sqz__f16_gemm(c, a->m, a->n, a->k, a->x, w16, a->y, a->y_dtype);
}

/*
 * kernels/cuda/gemm_i8_mma.cu - W8A8 tensor-core GEMM with mma.sync m16n8k32 (see
 * gemm_i8_mma.cuh). Index math (fragments, swizzle, ldmatrix rows) lives in mma_frag.h
 * and is unit-tested on the CPU.
 *
 * Tiling: CTA tile BM x BN x 64 (k), warps WARPS_M x WARPS_N each owning WM x WN, i.e.
 * MI m16 tiles x NI n8 tiles of accumulators; STAGES-deep cp.async ring in dynamic shared
 * memory; rows of 64 bytes swizzled by sqz_i8_smem_off.
 *   L (m > 32):  128 x 128, 8 warps (2 x 4) of 64 x 32, 4 stages = 64 KiB
 *   S (m <= 32): 32 x 64, 4 warps (1 x 4) of 32 x 16, 4 stages = 24 KiB, split-k to fill the GPU
 *   F: S with the fused per-token quantization
 * Bounds: rows beyond m / n and k beyond k are zero-filled (cp.async src-size 0). When k is
 * not a multiple of 16 or a base pointer is not 16-byte aligned, rows are not 16-byte
 * aligned and the tiles are filled through registers instead (slow, correct).
 */
#include <float.h>
#include <limits.h>

#include "kernels/cuda/gemm_i8_lt.cuh"
#include "kernels/cuda/gemm_i8_mma.cuh"
#include "kernels/cuda/quantize_i8.cuh"

namespace {

constexpr int BK = SQZ_I8_BK;

struct I8Params {
    int m, n, k;
    const int8_t *x;         /* (m, k), unfused */
    const float *x_scale;    /* (m), unfused */
    const int8_t *w;         /* (n, k) */
    const float *w_scale;    /* (n) */
    const float *x_f32;      /* (m, k), fused */
    int8_t *x_out;           /* (m, k), fused: written by the CTAs of column tile 0 */
    float *x_scale_out;      /* (m), fused */
    void *y;                 /* (m, n) */
    int y_f16;
    int32_t *acc;            /* split-k: (m, n) int32 sums, zeroed; NULL: scales applied here */
    int k_tiles, splits, tiles_m, tiles_n;
    int aligned;             /* cp.async path: k % 16 == 0 and x (unfused), w 16-byte aligned */
    int f32_vec;             /* fused: k % 4 == 0 and x_f32 16-byte aligned */
    int xout_vec;            /* fused: k % 16 == 0 and x_out 16-byte aligned */
};

template <int BM_, int BN_, int WARPS_M_, int WARPS_N_, int STAGES_, bool FUSED_>
struct Cfg {
    static constexpr int BM = BM_, BN = BN_, WARPS_M = WARPS_M_, WARPS_N = WARPS_N_, STAGES = STAGES_;
    static constexpr bool FUSED = FUSED_;
    static constexpr int THREADS = 32 * WARPS_M * WARPS_N;
    static constexpr int WM = BM / WARPS_M, WN = BN / WARPS_N;
    static constexpr int MI = WM / 16, NI = WN / 8;
    static constexpr int A_BYTES = BM * BK, B_BYTES = BN * BK;
    static constexpr int STAGE_BYTES = A_BYTES + B_BYTES;
    static constexpr int SMEM = STAGES * STAGE_BYTES + (FUSED ? BM * 4 : 0);
    static_assert(WM % 16 == 0 && WN % 16 == 0, "warp tiles hold m16 tiles and pairs of n8 tiles");
    static_assert((BM * 4) % THREADS == 0 && (BN * 4) % THREADS == 0, "whole chunks per thread");
    static_assert(STAGES >= 2, "pipeline");
};

using CfgL = Cfg<128, 128, 2, 4, 4, false>;
using CfgS = Cfg<32, 64, 1, 4, 4, false>;
using CfgF = Cfg<32, 64, 1, 4, 4, true>;

__device__ __forceinline__ uint32_t pack4(int8_t a, int8_t b, int8_t c, int8_t d) {
    return (uint32_t)(uint8_t)a | ((uint32_t)(uint8_t)b << 8) | ((uint32_t)(uint8_t)c << 16) |
           ((uint32_t)(uint8_t)d << 24);
}

/* rows [row0, row0 + ROWS) x k [k0, k0 + 64) of an int8 (rows_total, k) matrix -> tile s. */
template <class C, int ROWS>
__device__ __forceinline__ void load_i8_tile(uint8_t *s, const int8_t *g, int rows_total, int row0, int k, int k0,
                                             bool aligned) {
#pragma unroll
    for (int i = 0; i < ROWS * 4 / C::THREADS; i++) {
        const int c = (int)threadIdx.x + i * C::THREADS;
        const int r = c >> 2, ch = c & 3;
        const int grow = row0 + r, gk = k0 + ch * 16;
        const uint32_t dst = sqz__smem_addr(s + sqz_i8_smem_off(r, ch));
        const bool in = grow < rows_total && gk < k;
        if (aligned) {
            /* k % 16 == 0: a chunk is wholly inside or outside */
            const int8_t *src = in ? g + (int64_t)grow * k + gk : g;
            sqz__cp_async16(dst, src, in ? 16 : 0);
        } else {
            uint32_t v[4] = {0u, 0u, 0u, 0u};
            if (in) {
                const int8_t *src = g + (int64_t)grow * k + gk;
                const int nb = min(16, k - gk);
#pragma unroll
                for (int b = 0; b < 16; b++) /* unrolled: v stays in registers */
                    v[b >> 2] |= (b < nb ? (uint32_t)(uint8_t)src[b] : 0u) << (8 * (b & 3));
            }
            sqz__st_shared_v4(dst, v[0], v[1], v[2], v[3]);
        }
    }
}

/* Fused: quantizes rows [m0, m0 + BM) x k [k0, k0 + 64) of x_f32 with the row scales into
 * tile s (and into x_out when write_x). */
template <class C>
__device__ __forceinline__ void load_a_fused(uint8_t *s, const I8Params &p, const float *s_scale, int m0, int k0,
                                             bool write_x) {
#pragma unroll
    for (int i = 0; i < C::BM * 4 / C::THREADS; i++) {
        const int c = (int)threadIdx.x + i * C::THREADS;
        const int r = c >> 2, ch = c & 3;
        const int grow = m0 + r, gk = k0 + ch * 16;
        uint32_t v[4] = {0u, 0u, 0u, 0u};
        if (grow < p.m && gk < p.k) {
            const float d = s_scale[r];
            const float *src = p.x_f32 + (int64_t)grow * p.k + gk;
            const int nb = min(16, p.k - gk);
            if (p.f32_vec && nb == 16) {
#pragma unroll
                for (int q = 0; q < 4; q++) {
                    const float4 f = __ldg(reinterpret_cast<const float4 *>(src) + q);
                    v[q] = pack4(sqz__i8_quant(f.x, d), sqz__i8_quant(f.y, d), sqz__i8_quant(f.z, d),
                                 sqz__i8_quant(f.w, d));
                }
            } else {
#pragma unroll
                for (int b = 0; b < 16; b++)
                    v[b >> 2] |= (b < nb ? (uint32_t)(uint8_t)sqz__i8_quant(src[b], d) : 0u) << (8 * (b & 3));
            }
            if (write_x) {
                int8_t *dst = p.x_out + (int64_t)grow * p.k + gk;
                if (p.xout_vec && nb == 16) {
                    *reinterpret_cast<uint4 *>(dst) = make_uint4(v[0], v[1], v[2], v[3]);
                } else {
#pragma unroll
                    for (int b = 0; b < 16; b++)
                        if (b < nb) dst[b] = (int8_t)(uint8_t)(v[b >> 2] >> (8 * (b & 3)));
                }
            }
        }
        sqz__st_shared_v4(sqz__smem_addr(s + sqz_i8_smem_off(r, ch)), v[0], v[1], v[2], v[3]);
    }
}

template <class C>
__global__ void __launch_bounds__(C::THREADS) i8_mma_kernel(const I8Params p) {
#ifdef SQZ__NEED_SM80
    __trap();
#else
    extern __shared__ __align__(128) uint8_t smem[];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int wm = warp / C::WARPS_N, wn = warp % C::WARPS_N;
    int bm, bn;
    sqz__tile_coords(blockIdx.x, p.tiles_m, p.tiles_n, &bm, &bn);
    const int m0 = bm * C::BM, n0 = bn * C::BN;
    const int kt0 = (int)((int64_t)p.k_tiles * blockIdx.y / p.splits);
    const int kt1 = (int)((int64_t)p.k_tiles * (blockIdx.y + 1) / p.splits);
    const int nk = kt1 - kt0;
    float *s_scale = reinterpret_cast<float *>(smem + C::STAGES * C::STAGE_BYTES);
    const bool write_x = C::FUSED && bn == 0;

    if (C::FUSED) {
        /* prologue: per-token scales of this CTA's rows over the whole k */
        for (int r = warp; r < C::BM; r += C::THREADS / 32) {
            const int grow = m0 + r;
            float amax = 0.0f;
            int nf = 0;
            if (grow < p.m) {
                const float *src = p.x_f32 + (int64_t)grow * p.k;
                for (int j = lane; j < p.k; j += 32) {
                    const float a = fabsf(__ldg(src + j));
                    if (!(a <= FLT_MAX)) nf = 1;
                    else amax = fmaxf(amax, a);
                }
            }
            for (int o = 16; o > 0; o >>= 1) {
                amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
                nf |= __shfl_xor_sync(0xffffffffu, nf, o);
            }
            if (lane == 0) {
                const float d = sqz__i8_row_scale(amax, nf != 0);
                s_scale[r] = d;
                if (grow < p.m && bn == 0 && blockIdx.y == 0) p.x_scale_out[grow] = d;
            }
        }
        __syncthreads();
    }

    int acc[C::MI][C::NI][4];
#pragma unroll
    for (int mi = 0; mi < C::MI; mi++)
#pragma unroll
        for (int ni = 0; ni < C::NI; ni++)
#pragma unroll
            for (int e = 0; e < 4; e++) acc[mi][ni][e] = 0;

    auto load_stage = [&](int stage, int kt) {
        uint8_t *sa = smem + stage * C::STAGE_BYTES;
        const int k0 = kt * BK;
        if (C::FUSED) load_a_fused<C>(sa, p, s_scale, m0, k0, write_x);
        else load_i8_tile<C, C::BM>(sa, p.x, p.m, m0, p.k, k0, p.aligned);
        load_i8_tile<C, C::BN>(sa + C::A_BYTES, p.w, p.n, n0, p.k, k0, p.aligned);
    };

#pragma unroll
    for (int s = 0; s < C::STAGES - 1; s++) {
        if (s < nk) load_stage(s, kt0 + s);
        sqz__cp_async_commit();
    }
    for (int it = 0; it < nk; it++) {
        sqz__cp_async_wait<C::STAGES - 2>(); /* stage `it` has landed (this thread's copies) */
        __syncthreads();                     /* ... everyone's; and stage it-1 is no longer read */
        const int nxt = it + C::STAGES - 1;
        if (nxt < nk) load_stage(nxt % C::STAGES, kt0 + nxt);
        sqz__cp_async_commit();
        const uint8_t *sa = smem + (it % C::STAGES) * C::STAGE_BYTES;
        const uint8_t *sb = sa + C::A_BYTES;
#pragma unroll
        for (int ks = 0; ks < BK / 32; ks++) {
            uint32_t a[C::MI][4], b[C::NI][2];
#pragma unroll
            for (int mi = 0; mi < C::MI; mi++) {
                int row, ch;
                sqz_i8_ldsm_a(lane, wm * C::WM + mi * 16, ks, &row, &ch);
                sqz__ldsm_x4(a[mi], sqz__smem_addr(sa + sqz_i8_smem_off(row, ch)));
            }
#pragma unroll
            for (int ni = 0; ni < C::NI; ni += 2) {
                int row, ch;
                uint32_t r[4];
                sqz_i8_ldsm_b(lane, wn * C::WN + ni * 8, ks, &row, &ch);
                sqz__ldsm_x4(r, sqz__smem_addr(sb + sqz_i8_smem_off(row, ch)));
                b[ni][0] = r[0]; b[ni][1] = r[1];
                b[ni + 1][0] = r[2]; b[ni + 1][1] = r[3];
            }
#pragma unroll
            for (int mi = 0; mi < C::MI; mi++)
#pragma unroll
                for (int ni = 0; ni < C::NI; ni++) sqz__mma_s8(acc[mi][ni], a[mi], b[ni]);
        }
    }
    sqz__cp_async_wait<0>();

#pragma unroll
    for (int mi = 0; mi < C::MI; mi++)
#pragma unroll
        for (int ni = 0; ni < C::NI; ni++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                int row, col;
                sqz_frag_c(lane, e, &row, &col);
                row += m0 + wm * C::WM + mi * 16;
                col += n0 + wn * C::WN + ni * 8;
                if (row >= p.m || col >= p.n) continue;
                const int64_t idx = (int64_t)row * p.n + col;
                if (p.acc) {
                    atomicAdd(p.acc + idx, acc[mi][ni][e]);
                } else {
                    const float xs = C::FUSED ? s_scale[row - m0] : __ldg(p.x_scale + row);
                    const float v = __fmul_rn(__fmul_rn(__int2float_rn(acc[mi][ni][e]), xs), __ldg(p.w_scale + col));
                    sqz__store_out(p.y, p.y_f16, idx, v);
                }
            }
#endif
}

template <class C>
sqz_status launch(sqz_cuda_ctx *c, I8Params p, int64_t target_ctas) {
    p.tiles_m = (int)sqz__ceil_div(p.m, C::BM);
    p.tiles_n = (int)sqz__ceil_div(p.n, C::BN);
    p.k_tiles = (int)sqz__ceil_div(p.k, BK);
    const int64_t ctas = (int64_t)p.tiles_m * p.tiles_n;
    SQZ_RETURN_IF(ctas > INT_MAX, SQZ_ERR_INVALID_ARG, "gemm_i8: %lld tiles exceed the grid", (long long)ctas);
    int64_t splits = 1;
    if (ctas < target_ctas && p.k_tiles >= 8) {
        splits = sqz__ceil_div(target_ctas, ctas);
        if (splits > p.k_tiles / 4) splits = p.k_tiles / 4; /* at least 4 k tiles per split */
        if (splits > 32) splits = 32;
        if (splits < 1) splits = 1;
    }
    p.splits = (int)splits;
    p.acc = NULL;
    if (splits > 1) {
        const size_t bytes = (size_t)p.m * (size_t)p.n * sizeof(int32_t);
        void *acc;
        SQZ_TRY(sqz__cuda_scratch(c, bytes, &acc));
        SQZ_CUDA_TRY(cudaMemsetAsync(acc, 0, bytes, c->stream));
        p.acc = (int32_t *)acc;
    }
    i8_mma_kernel<C><<<dim3((unsigned)ctas, (unsigned)splits), C::THREADS, C::SMEM, c->stream>>>(p);
    SQZ_CUDA_LAUNCHED();
    if (p.acc)
        SQZ_TRY(sqz__i8_scale_epilogue(c, p.acc, p.m, p.n, C::FUSED ? p.x_scale_out : p.x_scale, p.w_scale, p.y,
                                       p.y_f16));
    return SQZ_OK;
}

template <class C>
sqz_status set_smem(void) {
    SQZ_CUDA_TRY(cudaFuncSetAttribute(i8_mma_kernel<C>, cudaFuncAttributeMaxDynamicSharedMemorySize, C::SMEM));
    return SQZ_OK;
}

} // namespace

sqz_status sqz__i8_mma_init(sqz_cuda_ctx *c) {
    SQZ_RETURN_IF((size_t)CfgL::SMEM > c->smem_optin, SQZ_ERR_UNSUPPORTED,
                  "gemm_i8: the device allows %zu bytes of shared memory per block, the kernel needs %d",
                  c->smem_optin, CfgL::SMEM);
    SQZ_TRY(set_smem<CfgL>());
    SQZ_TRY(set_smem<CfgS>());
    SQZ_TRY(set_smem<CfgF>());
    return SQZ_OK;
}

sqz_status sqz__i8_mma_gemm(sqz_cuda_ctx *c, const sqz_gemm_i8_args *a, bool fused) {
    I8Params p;
    memset(&p, 0, sizeof p);
    p.m = (int)a->m;
    p.n = (int)a->n;
    p.k = (int)a->k;
    p.x = a->x;
    p.x_scale = a->x_scale;
    p.w = a->w;
    p.w_scale = a->w_scale;
    p.y = a->y;
    p.y_f16 = a->y_dtype == SQZ_DTYPE_F16;
    if (fused) {
        p.x_f32 = a->x_f32;
        p.x_out = a->x;
        p.x_scale_out = a->x_scale;
        p.f32_vec = p.k % 4 == 0 && sqz__aligned(a->x_f32, 16);
        p.xout_vec = p.k % 16 == 0 && sqz__aligned(a->x, 16);
        p.aligned = p.k % 16 == 0 && sqz__aligned(a->w, 16);
        return launch<CfgF>(c, p, 4 * (int64_t)c->sm_count);
    }
    if (a->x_f32) SQZ_TRY(sqz__i8_quantize_rows(c, a->x_f32, a->m, a->k, a->x, a->x_scale));
    p.aligned = p.k % 16 == 0 && sqz__aligned(a->w, 16) && sqz__aligned(a->x, 16);
    if (p.m <= 32) return launch<CfgS>(c, p, 4 * (int64_t)c->sm_count);
    return launch<CfgL>(c, p, c->sm_count);
}

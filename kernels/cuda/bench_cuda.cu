/*
 * kernels/cuda/bench_cuda.cu - device facts and GEMM timing for `sqz bench kernels`
 * (sqz_cuda_device_info_get, sqz_cuda_bench_gemm of sqz/backend.h, reached through the CUDA
 * module's entry table: sqz__cuda_device_info_get, sqz__cuda_bench_gemm).
 *
 * Peak table: dense tensor-core operations per SM per clock (an FMA counts 2), from
 * NVIDIA's datasheets divided by SMs x boost clock:
 *   sm_80 A100:            fp16 2048, int8 4096   (312 TFLOPS / 624 TOPS, 108 SMs, 1410 MHz)
 *   sm_86 A10/A40:         fp16 1024, int8 2048   (A40: 150 TFLOPS, 84 SMs, 1740 MHz)
 *   sm_89 L4/L40S:         fp16 1024, int8 2048   (L40S: 362 TFLOPS, 142 SMs, 2520 MHz)
 *   sm_90 H100/H200:       fp16 4096, int8 8192   (H100 SXM: 989 TFLOPS at 1830 MHz, 132 SMs)
 * GeForce parts of sm_86 / sm_89 run fp16 with fp32 accumulation at half that rate. The
 * peak is computed at the clock the device reports (cudaDevAttrClockRate), which may be
 * above the clock the datasheet uses (1980 vs 1830 MHz on H100 SXM): fractions of peak
 * are then conservative. Hopper's peak is reached only by wgmma; mma.sync kernels (ours)
 * top out well below it.
 */
#include <algorithm>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <vector>

#include "kernels/cpu/backend_impl.h"
#include "kernels/cuda/backend_cuda.cuh"
#include "kernels/cuda/gemm_i8_lt.cuh"
#include "kernels/cuda/gemm_w4.cuh"

namespace {

struct PeakRow {
    int major, minor;
    double f16_per_sm_clk, i8_per_sm_clk;
};
const PeakRow kPeaks[] = {
    {8, 0, 2048, 4096},
    {8, 6, 1024, 2048},
    {8, 9, 1024, 2048},
    {9, 0, 4096, 8192},
};

__device__ __forceinline__ uint32_t mix32(uint64_t i, uint32_t seed) {
    uint64_t z = i * 0x9E3779B97F4A7C15ull + seed;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return (uint32_t)(z ^ (z >> 31));
}

__global__ void fill_u8_kernel(uint8_t *p, size_t n, uint32_t seed) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        p[i] = (uint8_t)mix32(i, seed);
}
/* uniform in [lo, hi) */
__global__ void fill_f32_kernel(float *p, size_t n, uint32_t seed, float lo, float hi) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        p[i] = lo + (hi - lo) * (float)(mix32(i, seed) >> 8) * (1.0f / 16777216.0f);
}
__global__ void fill_f16_kernel(__half *p, size_t n, uint32_t seed) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        p[i] = __float2half_rn(-1.0f + 2.0f * (float)(mix32(i, seed) >> 8) * (1.0f / 16777216.0f));
}

unsigned fill_grid(size_t n) {
    const size_t b = (n + 255) / 256;
    return (unsigned)(b < 4096 ? (b ? b : 1) : 4096);
}

/* Device buffers freed together. */
struct Arena {
    sqz_backend *b;
    std::vector<void *> ptrs;
    ~Arena() {
        for (void *p : ptrs) b->ops->free(b->ctx, p);
    }
    void *get(size_t bytes) {
        void *p = b->ops->alloc(b->ctx, bytes);
        if (p) ptrs.push_back(p);
        return p;
    }
};

void random_q4_blocks(std::vector<uint8_t> &blk, sqz_dtype t, int64_t n, int64_t k) {
    const size_t bsize = t == SQZ_DTYPE_Q4_0 ? 18 : 20;
    const size_t nb = (size_t)n * (size_t)(k / 32);
    blk.resize(nb * bsize);
    uint64_t s = 0x243F6A8885A308D3ull;
    for (size_t i = 0; i < nb; i++) {
        uint8_t *b = blk.data() + i * bsize;
        const uint16_t d = sqz_fp32_to_fp16(0.002f + 0.001f * (float)(i % 7));
        sqz__wr_u16(b, d);
        size_t q = 2;
        if (t == SQZ_DTYPE_Q4_1) { sqz__wr_u16(b + 2, sqz_fp32_to_fp16(-0.016f)); q = 4; }
        for (int j = 0; j < 16; j++) {
            s ^= s << 13; s ^= s >> 7; s ^= s << 17;
            b[q + j] = (uint8_t)(s >> 24);
        }
    }
}

} // namespace

sqz_status sqz__cuda_device_info_get(int device, sqz_cuda_device_info *out) {
    memset(out, 0, sizeof *out);
    int count = sqz__cuda_device_count();
    SQZ_RETURN_IF(device < 0 || device >= count, SQZ_ERR_DEVICE, "CUDA device %d requested, %d present", device, count);
    cudaDeviceProp prop;
    SQZ_CUDA_TRY(cudaGetDeviceProperties(&prop, device));
    int clock_khz = 0, mem_khz = 0;
    SQZ_CUDA_TRY(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, device));
    SQZ_CUDA_TRY(cudaDeviceGetAttribute(&mem_khz, cudaDevAttrMemoryClockRate, device));
    snprintf(out->name, sizeof out->name, "%s", prop.name);
    out->cc_major = prop.major;
    out->cc_minor = prop.minor;
    out->sm_count = prop.multiProcessorCount;
    out->sm_clock_ghz = clock_khz * 1e-6;
    out->mem_bandwidth_gbs = 2.0 * mem_khz * 1e3 * (prop.memoryBusWidth / 8.0) * 1e-9;
    out->mem_bytes = prop.totalGlobalMem;
    out->l2_bytes = (size_t)prop.l2CacheSize;
    for (const PeakRow &r : kPeaks) {
        if (r.major != prop.major || r.minor != prop.minor) continue;
        const double per_s = (double)out->sm_count * out->sm_clock_ghz * 1e9;
        out->peak_f16_tflops = r.f16_per_sm_clk * per_s * 1e-12;
        out->peak_i8_tops = r.i8_per_sm_clk * per_s * 1e-12;
    }
    return SQZ_OK;
}

/* The activations (f16, or int8 codes with their scales, and f32 for the fused kernel), the weight
 * scales and the output of one kernel's products, filled on the device. */
typedef struct bench_bufs {
    void *xf, *xh, *xq, *xs, *wsc, *y, *acc;
} bench_bufs;

static sqz_status bench_inputs(Arena &ar, sqz_cuda_ctx *c, sqz_bench_kernel kernel, bool is_w4, size_t M, size_t N,
                               size_t K, bench_bufs *o) {
    if (kernel == SQZ_BENCH_CUBLAS_F16 || is_w4) {
        if (!(o->xh = ar.get(2 * M * K))) return SQZ_ERR_NOMEM;
        fill_f16_kernel<<<fill_grid(M * K), 256, 0, c->stream>>>((__half *)o->xh, M * K, 7u);
        SQZ_CUDA_LAUNCHED();
    } else {
        if (!(o->xq = ar.get(M * K)) || !(o->xs = ar.get(4 * M)) || !(o->wsc = ar.get(4 * N))) return SQZ_ERR_NOMEM;
        fill_u8_kernel<<<fill_grid(M * K), 256, 0, c->stream>>>((uint8_t *)o->xq, M * K, 5u);
        fill_f32_kernel<<<fill_grid(M), 256, 0, c->stream>>>((float *)o->xs, M, 6u, 0.001f, 0.01f);
        fill_f32_kernel<<<fill_grid(N), 256, 0, c->stream>>>((float *)o->wsc, N, 8u, 0.001f, 0.01f);
        SQZ_CUDA_LAUNCHED();
        if (kernel == SQZ_BENCH_I8_MMA_FUSED) {
            if (!(o->xf = ar.get(4 * M * K))) return SQZ_ERR_NOMEM;
            fill_f32_kernel<<<fill_grid(M * K), 256, 0, c->stream>>>((float *)o->xf, M * K, 9u, -1.0f, 1.0f);
            SQZ_CUDA_LAUNCHED();
        }
    }
    if (kernel == SQZ_BENCH_CUBLASLT_I8) {
        if (!(o->acc = ar.get(4 * M * N))) return SQZ_ERR_NOMEM;
    } else if (!(o->y = ar.get(2 * M * N))) {
        return SQZ_ERR_NOMEM;
    }
    return SQZ_OK;
}

/* Times call() on the stream: 3 warm-up calls, then batches of about 1 ms or more (the first batch
 * calibrates) until min_seconds have passed and at least 3 batches (at most 1000); each batch's
 * seconds per call into per_call, the calls timed into *calls. */
template <typename Call>
static sqz_status time_calls(sqz_backend *b, sqz_cuda_ctx *c, Call &call, double min_seconds,
                             std::vector<double> &per_call, int *calls_out) {
    int calls = 0;
    cudaEvent_t e0 = NULL, e1 = NULL;
    SQZ_CUDA_TRY(cudaEventCreate(&e0));
    sqz_status s = cudaEventCreate(&e1) == cudaSuccess ? SQZ_OK : SQZ_ERROR(SQZ_ERR_DEVICE, "cudaEventCreate failed");
    if (s == SQZ_OK) {
        for (int i = 0; i < 3 && s == SQZ_OK; i++) s = call(); /* warm-up: plans, scratch, clocks */
        if (s == SQZ_OK) s = b->ops->synchronize(b->ctx);
    }
    int batch = 1;
    double spent = 0.0;
    while (s == SQZ_OK && (spent < min_seconds || per_call.size() < 3) && per_call.size() < 1000) {
        if (cudaEventRecord(e0, c->stream) != cudaSuccess) { s = SQZ_ERROR(SQZ_ERR_DEVICE, "cudaEventRecord failed"); break; }
        for (int i = 0; i < batch && s == SQZ_OK; i++) s = call();
        if (s != SQZ_OK) break;
        float ms = 0.0f;
        if (cudaEventRecord(e1, c->stream) != cudaSuccess || cudaEventSynchronize(e1) != cudaSuccess ||
            cudaEventElapsedTime(&ms, e0, e1) != cudaSuccess) {
            s = SQZ_ERROR(SQZ_ERR_DEVICE, "timing with CUDA events failed: %s", cudaGetErrorString(cudaGetLastError()));
            break;
        }
        const double t = ms * 1e-3;
        if (per_call.empty() && batch == 1 && t < 1e-3) { /* first batch calibrates: batches of >= ~1 ms */
            batch = (int)std::min(1000.0, ceil(1e-3 / std::max(t, 1e-7)));
            spent += t;
            continue;
        }
        per_call.push_back(t / batch);
        calls += batch;
        spent += t;
    }
    cudaEventDestroy(e0);
    if (e1) cudaEventDestroy(e1);
    if (s == SQZ_OK) s = b->ops->synchronize(b->ctx);
    if (s != SQZ_OK) return s;
    *calls_out = calls;
    return SQZ_OK;
}

/* Bytes one product moves (weights, activations, scales, output), for the GB/s column. */
static double bench_bytes(sqz_bench_kernel kernel, int64_t m, int64_t n, int64_t k, size_t w4_total) {
    const double mk = (double)m * k, nk = (double)n * k, mn = (double)m * n;
    switch (kernel) {
    case SQZ_BENCH_CUBLAS_F16: return 2 * mk + 2 * nk + 2 * mn;
    case SQZ_BENCH_CUBLASLT_I8: return mk + nk + 4 * mn;
    case SQZ_BENCH_I8_LT:
    case SQZ_BENCH_I8_MMA: return mk + nk + 4.0 * (m + n) + 2 * mn;
    case SQZ_BENCH_I8_MMA_FUSED: return 4 * mk + mk + nk + 4.0 * (m + n) + 2 * mn;
    default: return 2 * mk + (double)w4_total + 2 * mn;
    }
}

sqz_status sqz__cuda_bench_gemm(sqz_backend *b, sqz_bench_kernel kernel, int64_t m, int64_t n, int64_t k,
                               double min_seconds, sqz_bench_result *result) {
    memset(result, 0, sizeof *result);
    sqz_cuda_ctx *c = sqz__cuda_ctx_of(b);
    SQZ_RETURN_IF(!c, SQZ_ERR_INVALID_ARG, "sqz_cuda_bench_gemm: not a CUDA backend");
    SQZ_RETURN_IF(m < 1 || n < 1 || k < 1 || m > INT_MAX || n > INT_MAX || k > SQZ_GEMM_I8_MAX_K, SQZ_ERR_INVALID_ARG,
                  "sqz_cuda_bench_gemm: shape (%lld, %lld, %lld) out of range", (long long)m, (long long)n,
                  (long long)k);
    SQZ_RETURN_IF((int)kernel < 0 || kernel >= SQZ_BENCH_KERNEL_COUNT, SQZ_ERR_INVALID_ARG,
                  "sqz_cuda_bench_gemm: unknown kernel %d", (int)kernel);
    const bool is_w4 = kernel == SQZ_BENCH_W4_Q4_0 || kernel == SQZ_BENCH_W4_Q4_1 || kernel == SQZ_BENCH_W4_DEQUANT_F16;
    const bool is_lt = kernel == SQZ_BENCH_CUBLASLT_I8 || kernel == SQZ_BENCH_I8_LT;
    SQZ_RETURN_IF(is_w4 && k % 32 != 0, SQZ_ERR_UNSUPPORTED, "W4 kernels need k %% 32 == 0 (k = %lld)", (long long)k);
    SQZ_RETURN_IF(is_lt && (n % 4 != 0 || k % 4 != 0), SQZ_ERR_UNSUPPORTED,
                  "cuBLASLt IMMA needs n and k multiples of 4 (n = %lld, k = %lld)", (long long)n, (long long)k);
    SQZ_TRY(sqz__cuda_enter(c));

    const size_t M = (size_t)m, N = (size_t)n, K = (size_t)k;
    const sqz_dtype wq = kernel == SQZ_BENCH_W4_Q4_1 ? SQZ_DTYPE_Q4_1 : SQZ_DTYPE_Q4_0;
    sqz_w4_layout L;
    memset(&L, 0, sizeof L);
    if (is_w4) SQZ_TRY(sqz__w4_layout_init(wq, n, k, &L));
    const size_t w_bytes = kernel == SQZ_BENCH_CUBLAS_F16 ? 2 * N * K : is_w4 ? L.total : N * K;
    /* bytes besides the weight copies: activations, scales, output, scratch */
    size_t other = 4 * M * K + 2 * M * K + 4 * M + 4 * N + 4 * M * N + 64 * ((size_t)1 << 20);
    if (kernel == SQZ_BENCH_W4_DEQUANT_F16) other += 2 * N * K;
    size_t free_b = 0, total_b = 0;
    SQZ_CUDA_TRY(cudaMemGetInfo(&free_b, &total_b));
    int l2 = 0;
    SQZ_CUDA_TRY(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, c->device));
    int copies = (int)std::min<size_t>(8, 2 * (size_t)l2 / w_bytes + 1); /* together > 2 x L2 */
    while (copies > 1 && other + (size_t)copies * w_bytes > free_b * 9 / 10) copies--;
    SQZ_RETURN_IF(other + w_bytes > free_b * 9 / 10, SQZ_ERR_NOMEM,
                  "sqz_cuda_bench_gemm: (%lld, %lld, %lld) needs ~%zu MiB, %zu MiB free", (long long)m, (long long)n,
                  (long long)k, (other + w_bytes) >> 20, free_b >> 20);

    Arena ar{b, {}};
    std::vector<void *> w(copies);
    for (int i = 0; i < copies; i++) {
        w[i] = ar.get(w_bytes);
        if (!w[i]) return SQZ_ERR_NOMEM;
    }
    if (is_w4) {
        std::vector<uint8_t> blocks, packed(L.total);
        random_q4_blocks(blocks, wq, n, k);
        sqz__w4_pack(&L, blocks.data(), packed.data());
        for (int i = 0; i < copies; i++) {
            SQZ_TRY(b->ops->upload(b->ctx, w[i], packed.data(), L.total));
            SQZ_TRY(sqz__cuda_w4_register(c, w[i], &L));
        }
    } else {
        for (int i = 0; i < copies; i++) {
            if (kernel == SQZ_BENCH_CUBLAS_F16) fill_f16_kernel<<<fill_grid(N * K), 256, 0, c->stream>>>((__half *)w[i], N * K, 11u + i);
            else fill_u8_kernel<<<fill_grid(N * K), 256, 0, c->stream>>>((uint8_t *)w[i], N * K, 11u + i);
            SQZ_CUDA_LAUNCHED();
        }
    }
    bench_bufs bb = {};
    SQZ_TRY(bench_inputs(ar, c, kernel, is_w4, M, N, K, &bb));
    void *xf = bb.xf, *xh = bb.xh, *xq = bb.xq, *xs = bb.xs, *wsc = bb.wsc, *y = bb.y, *acc = bb.acc;

    int turn = 0;
    auto call = [&]() -> sqz_status {
        const void *wi = w[turn];
        turn = (turn + 1) % copies;
        switch (kernel) {
        case SQZ_BENCH_CUBLAS_F16: return sqz__f16_gemm(c, m, n, k, xh, wi, y, SQZ_DTYPE_F16);
        case SQZ_BENCH_CUBLASLT_I8:
            return sqz__i8_lt_matmul(c, m, n, k, (const int8_t *)xq, (const int8_t *)wi, (int32_t *)acc);
        case SQZ_BENCH_I8_LT:
        case SQZ_BENCH_I8_MMA:
        case SQZ_BENCH_I8_MMA_FUSED: {
            sqz_gemm_i8_args a;
            memset(&a, 0, sizeof a);
            a.m = m; a.n = n; a.k = k;
            a.x_f32 = (const float *)xf;
            a.x = (int8_t *)xq;
            a.x_scale = (float *)xs;
            a.w = (const int8_t *)wi;
            a.w_scale = (const float *)wsc;
            a.y = y;
            a.y_dtype = SQZ_DTYPE_F16;
            a.variant = kernel == SQZ_BENCH_I8_LT ? SQZ_KVAR_I8_CUBLASLT
                        : kernel == SQZ_BENCH_I8_MMA ? SQZ_KVAR_I8_MMA : SQZ_KVAR_I8_MMA_FUSED;
            return b->ops->gemm_i8(b->ctx, &a);
        }
        default: {
            sqz_gemm_w4_args a;
            memset(&a, 0, sizeof a);
            a.m = m; a.n = n; a.k = k;
            a.x = (const uint16_t *)xh;
            a.w = wi;
            a.y = y;
            a.y_dtype = SQZ_DTYPE_F16;
            a.variant = kernel == SQZ_BENCH_W4_DEQUANT_F16 ? SQZ_KVAR_W4_DEQUANT_F16 : SQZ_KVAR_W4_MMA;
            return b->ops->gemm_w4(b->ctx, &a);
        }
        }
    };

    std::vector<double> per_call;
    int calls = 0;
    SQZ_TRY(time_calls(b, c, call, min_seconds, per_call, &calls));

    std::sort(per_call.begin(), per_call.end());
    result->seconds = per_call[per_call.size() / 2];
    result->calls = calls;
    result->ops = 2.0 * (double)m * (double)n * (double)k;
    result->bytes = bench_bytes(kernel, m, n, k, L.total);
    return SQZ_OK;
}

/*
 * kernels/cuda/fwd_cuda.cu - the CUDA backend's block-forward slots (fwd_cuda.cuh; contracts in
 * sqz/backend.h, definitions in kernels/cpu/fwd_ops.c, fwd_vec.c and attn.c).
 *
 * rmsnorm: a CTA per row, the sum of squares in double (exact products, only the order of the
 *   sum differs from the CPU), then the CPU's float expression w * (x * inv).
 * rope: a thread per (row, head, pair); the products and the sum rounded one by one (__fmul_rn,
 *   __fadd_rn: nvcc would otherwise fuse them into an FMA), as the CPU's ISO C (-std=c11: no
 *   contraction) does, so the two give the same bits.
 * attention: a CTA of 128 threads per (query, head). Keys go through shared memory in chunks of
 *   ATTN_CHUNK scores with an online softmax (Milakov & Gimelshein 2018, as FlashAttention):
 *   running max m and sum l, the output accumulators rescaled by e^(m_old - m_new) per chunk,
 *   so any number of keys works in 6 KB of static shared memory. Scores: a warp per key, lanes
 *   across head_dim; outputs: a thread per head_dim column, up to ATTN_DPT columns each.
 * layernorm: as rmsnorm, two double reductions (mean, then the variance about it); gelu: erff.
 * silu_mul, add: grid-stride element loops. silu clamps e^-x's argument to [-87.34, 88] as the
 *   CPU's exp does, so the two agree for large |x| too.
 */
#include <limits.h>
#include <math.h>

#include "kernels/cpu/backend_impl.h"
#include "kernels/cuda/fwd_cuda.cuh"

namespace {

constexpr int ROW_THREADS = 256;   /* rmsnorm's CTA */
constexpr int EW_THREADS = 256;    /* element-wise and rope kernels */
constexpr int ATTN_THREADS = 128;  /* attention's CTA: 4 warps */
constexpr int ATTN_WARPS = ATTN_THREADS / 32;
constexpr int ATTN_CHUNK = 1024;   /* keys scored per pass through shared memory */
constexpr int ATTN_DPT = SQZ__CUDA_ATTN_MAX_HD / ATTN_THREADS; /* output columns per thread */
static_assert(SQZ__CUDA_ATTN_MAX_HD % ATTN_THREADS == 0, "ATTN_DPT must cover the largest head");

/* The CPU exp's input range (kernels/cpu/fwd_vec.c: vexp): below, e^x flushes toward 0; above,
 * it would overflow. */
constexpr float EXP_LO = -87.33654f, EXP_HI = 88.0f;

unsigned grid_for(int64_t n) {
    const int64_t b = sqz__ceil_div(n, EW_THREADS);
    return (unsigned)(b < 1 ? 1 : b > 8192 ? 8192 : b);
}

#define SQZ__FOR_EACH(i, n) \
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (int64_t)gridDim.x * blockDim.x)

struct sum_op {
    template <typename T> __device__ T operator()(T a, T b) const { return a + b; }
};
struct max_op {
    __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};

template <typename T, typename Op> __device__ T warp_reduce(T v, Op op) {
    for (int o = 16; o > 0; o >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

/* Every thread of the CTA gets the reduction of v (the same bits: the warps' partials are
 * combined in one order). red holds a partial per warp; the barriers make the shared writes
 * before the call visible after it and let red be reused at once. Call from all threads. */
template <typename T, typename Op> __device__ T block_reduce(T v, T *red, Op op) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    v = warp_reduce(v, op);
    if (lane == 0) red[warp] = v;
    __syncthreads();
    T r = red[0];
    for (int w = 1; w < warps; w++) r = op(r, red[w]);
    __syncthreads();
    return r;
}

/* ---- rmsnorm ------------------------------------------------------------------------ */
/* x, y (n, d), w (d); y may equal x (each element is read, then written, by one thread). */
__global__ void __launch_bounds__(ROW_THREADS)
    rmsnorm_kernel(const float *x, const float *__restrict__ w, float *y, float eps, int64_t n, int64_t d) {
    __shared__ double red[ROW_THREADS / 32];
    for (int64_t r = blockIdx.x; r < n; r += gridDim.x) {
        const float *xr = x + r * d;
        float *yr = y + r * d;
        double ss = 0.0;
        for (int64_t i = threadIdx.x; i < d; i += ROW_THREADS) ss += (double)xr[i] * xr[i];
        ss = block_reduce(ss, red, sum_op());
        const float inv = (float)(1.0 / sqrt(ss / (double)d + (double)eps));
        for (int64_t i = threadIdx.x; i < d; i += ROW_THREADS) yr[i] = w[i] * (xr[i] * inv);
    }
}

/* ---- rope --------------------------------------------------------------------------- */
/* Pair i of head h of row r: (2i, 2i+1) or, half, (i, i + hd/2); tables (positions, hd/2). */
__global__ void rope_kernel(float *x, int64_t ld, int64_t n, int64_t n_heads, int64_t hd, int64_t pos, bool half,
                            const float *__restrict__ cos_t, const float *__restrict__ sin_t) {
    const int64_t hh = hd / 2;
    SQZ__FOR_EACH(idx, n * n_heads * hh) {
        const int64_t i = idx % hh, rh = idx / hh, h = rh % n_heads, r = rh / n_heads;
        float *v = x + r * ld + h * hd;
        const float c = cos_t[(pos + r) * hh + i], s = sin_t[(pos + r) * hh + i];
        const int64_t i0 = half ? i : 2 * i, i1 = half ? i + hh : 2 * i + 1;
        const float a = v[i0], b = v[i1];
        v[i0] = __fsub_rn(__fmul_rn(a, c), __fmul_rn(b, s));
        v[i1] = __fadd_rn(__fmul_rn(a, s), __fmul_rn(b, c)); /* the CPU's b c + a s: + commutes */
    }
}

/* ---- silu_mul, add ------------------------------------------------------------------ */
__global__ void silu_mul_kernel(float *g, const float *__restrict__ u, int64_t n) {
    SQZ__FOR_EACH(i, n) {
        const float x = g[i];
        const float e = expf(fminf(fmaxf(-x, EXP_LO), EXP_HI)); /* NaN x: e finite, result NaN */
        g[i] = x / (1.0f + e) * u[i];
    }
}

__global__ void add_kernel(float *x, const float *__restrict__ y, int64_t n) {
    SQZ__FOR_EACH(i, n) x[i] += y[i];
}

/* ---- layernorm, gelu (BERT) ------------------------------------------------------------ */
/* The CPU's (kernels/cpu/fwd_ops.c): mean and biased variance in double, then in float
 * (x - (float)mean) * inv * w (+ b), rounded step by step as the CPU's ISO C. y may equal x. */
__global__ void __launch_bounds__(ROW_THREADS)
    layernorm_kernel(const float *x, const float *__restrict__ w, const float *__restrict__ b, float *y, float eps,
                     int64_t n, int64_t d) {
    __shared__ double red[ROW_THREADS / 32];
    for (int64_t r = blockIdx.x; r < n; r += gridDim.x) {
        const float *xr = x + r * d;
        float *yr = y + r * d;
        double s = 0.0;
        for (int64_t i = threadIdx.x; i < d; i += ROW_THREADS) s += xr[i];
        const double mean = block_reduce(s, red, sum_op()) / (double)d;
        double v = 0.0;
        for (int64_t i = threadIdx.x; i < d; i += ROW_THREADS) v += ((double)xr[i] - mean) * ((double)xr[i] - mean);
        v = block_reduce(v, red, sum_op());
        const float inv = (float)(1.0 / sqrt(v / (double)d + (double)eps)), fm = (float)mean;
        for (int64_t i = threadIdx.x; i < d; i += ROW_THREADS) {
            const float o = __fmul_rn(__fmul_rn(__fsub_rn(xr[i], fm), inv), w[i]);
            yr[i] = b ? __fadd_rn(o, b[i]) : o;
        }
    }
}

/* x = x / 2 (1 + erf(x / sqrt 2)), CUDA's erff (the CPU's A&S 7.1.26 is within 1.5e-7 of it). */
__global__ void gelu_kernel(float *x, int64_t n) {
    SQZ__FOR_EACH(i, n) x[i] = 0.5f * x[i] * (1.0f + erff(x[i] * 0.70710678118654752f));
}

/* ---- attention ---------------------------------------------------------------------- */
/* s_p[0..len) = q . k_t * scale for keys t0 + j: a warp per key, lanes across head_dim. */
__device__ void attn_scores(const sqz_attention_args &a, const float *s_q, const float *kb, int64_t t0, int len,
                            float scale, float *s_p) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    for (int j = warp; j < len; j += ATTN_WARPS) { /* uniform per warp: the shuffles see all lanes */
        const float *kr = kb + (t0 + j) * a.ldkv;
        float dot = 0.0f;
        for (int64_t d = lane; d < a.head_dim; d += 32) dot = fmaf(s_q[d], kr[d], dot);
        dot = warp_reduce(dot, sum_op());
        if (lane == 0) s_p[j] = dot * scale;
    }
}

/* acc[c] (column threadIdx.x + c * ATTN_THREADS) = acc[c] * alpha + sum_j s_p[j] v_{t0+j}. */
__device__ void attn_accumulate(const sqz_attention_args &a, const float *vb, int64_t t0, int len, const float *s_p,
                                float alpha, float (&acc)[ATTN_DPT]) {
#pragma unroll
    for (int c = 0; c < ATTN_DPT; c++) {
        const int64_t d = threadIdx.x + c * ATTN_THREADS;
        if (d < a.head_dim) {
            const float *vd = vb + t0 * a.ldkv + d;
            float o = acc[c] * alpha;
            for (int j = 0; j < len; j++) o = fmaf(s_p[j], vd[j * a.ldkv], o);
            acc[c] = o;
        }
    }
}

/* Query blockIdx.x, head blockIdx.y. */
__global__ void __launch_bounds__(ATTN_THREADS) attention_kernel(const sqz_attention_args a) {
    __shared__ float s_q[SQZ__CUDA_ATTN_MAX_HD];
    __shared__ float s_p[ATTN_CHUNK];
    __shared__ float s_red[ATTN_WARPS];
    const int64_t i = blockIdx.x, h = blockIdx.y, hd = a.head_dim;
    const int64_t kvh = h / (a.n_heads / a.n_kv_heads);
    const int64_t width = a.causal ? a.pos + i + 1 : a.pos + a.n;
    const float scale = 1.0f / sqrtf((float)hd); /* the CPU's scale, bit for bit (IEEE sqrt, div) */
    const float *qr = a.q + i * a.ldq + h * hd;
    for (int64_t d = threadIdx.x; d < hd; d += ATTN_THREADS) s_q[d] = qr[d];
    __syncthreads();
    const float *kb = a.k + kvh * hd, *vb = a.v + kvh * hd;
    float acc[ATTN_DPT];
#pragma unroll
    for (int c = 0; c < ATTN_DPT; c++) acc[c] = 0.0f;
    float m = -INFINITY, l = 0.0f; /* running max and sum of e^(s - m) */
    for (int64_t t0 = 0; t0 < width; t0 += ATTN_CHUNK) { /* uniform over the CTA */
        const int len = (int)(width - t0 < ATTN_CHUNK ? width - t0 : ATTN_CHUNK);
        attn_scores(a, s_q, kb, t0, len, scale, s_p);
        __syncthreads();
        float cm = -INFINITY;
        for (int j = threadIdx.x; j < len; j += ATTN_THREADS) cm = fmaxf(cm, s_p[j]);
        const float m_new = fmaxf(m, block_reduce(cm, s_red, max_op()));
        float cs = 0.0f;
        for (int j = threadIdx.x; j < len; j += ATTN_THREADS) {
            const float e = expf(s_p[j] - m_new);
            s_p[j] = e;
            cs += e;
        }
        cs = block_reduce(cs, s_red, sum_op()); /* its barrier publishes s_p's exponentials */
        const float alpha = m == -INFINITY ? 0.0f : expf(m - m_new); /* first chunk: nothing to rescale */
        l = l * alpha + cs;
        m = m_new;
        attn_accumulate(a, vb, t0, len, s_p, alpha, acc);
        __syncthreads(); /* the next chunk rewrites s_p */
    }
    float *outr = a.out + i * a.ldo + h * hd;
    const float inv = 1.0f / l;
#pragma unroll
    for (int c = 0; c < ATTN_DPT; c++) {
        const int64_t d = threadIdx.x + c * ATTN_THREADS;
        if (d < hd) outr[d] = acc[c] * inv;
    }
}

} // namespace

/* ---- host entry points -------------------------------------------------------------- */
sqz_status sqz__cuda_rmsnorm(void *ctx, const sqz_rmsnorm_args *a) {
    sqz_cuda_ctx *c = (sqz_cuda_ctx *)ctx;
    SQZ_RETURN_IF(a->n < 0 || a->d < 1, SQZ_ERR_INVALID_ARG, "CUDA rmsnorm: n %lld, d %lld", (long long)a->n,
                  (long long)a->d);
    if (a->n == 0) return SQZ_OK;
    SQZ_RETURN_IF(!a->x || !a->w || !a->y, SQZ_ERR_INVALID_ARG, "CUDA rmsnorm: a NULL buffer");
    SQZ_TRY(sqz__cuda_enter(c));
    const unsigned blocks = (unsigned)(a->n < 65535 ? a->n : 65535);
    rmsnorm_kernel<<<blocks, ROW_THREADS, 0, c->stream>>>(a->x, a->w, a->y, a->eps, a->n, a->d);
    SQZ_CUDA_LAUNCHED();
    return SQZ_OK;
}

sqz_status sqz__cuda_rope(void *ctx, const sqz_rope_args *a) {
    sqz_cuda_ctx *c = (sqz_cuda_ctx *)ctx;
    SQZ_RETURN_IF(a->n < 0 || a->pos < 0 || a->head_dim < 2 || a->head_dim % 2 || a->n_heads < 1 ||
                      a->ld < a->n_heads * a->head_dim,
                  SQZ_ERR_INVALID_ARG, "CUDA rope: n %lld at %lld, %lld heads of %lld, row stride %lld",
                  (long long)a->n, (long long)a->pos, (long long)a->n_heads, (long long)a->head_dim,
                  (long long)a->ld);
    if (a->n == 0) return SQZ_OK;
    SQZ_RETURN_IF(!a->x || !a->cos_t || !a->sin_t, SQZ_ERR_INVALID_ARG, "CUDA rope: a NULL buffer");
    SQZ_TRY(sqz__cuda_enter(c));
    const int64_t pairs = a->n * a->n_heads * (a->head_dim / 2);
    rope_kernel<<<grid_for(pairs), EW_THREADS, 0, c->stream>>>(a->x, a->ld, a->n, a->n_heads, a->head_dim, a->pos,
                                                               a->half, a->cos_t, a->sin_t);
    SQZ_CUDA_LAUNCHED();
    return SQZ_OK;
}

static sqz_status attention_check(const sqz_attention_args *a) {
    SQZ_RETURN_IF(a->scale != 0.0f || a->window != 0, SQZ_ERR_UNSUPPORTED,
                  "CUDA attention: a score scale (%g) or a sliding window (%lld) is the CPU's only",
                  (double)a->scale, (long long)a->window);
    SQZ_RETURN_IF(a->n < 0 || a->pos < 0 || a->head_dim < 1 || a->n_kv_heads < 1 || a->n_heads < a->n_kv_heads ||
                      a->n_heads % a->n_kv_heads || a->ldq < a->n_heads * a->head_dim ||
                      a->ldo < a->n_heads * a->head_dim || a->ldkv < a->n_kv_heads * a->head_dim,
                  SQZ_ERR_INVALID_ARG,
                  "CUDA attention: n %lld at %lld, %lld heads / %lld kv heads of %lld, strides q %lld kv %lld out %lld",
                  (long long)a->n, (long long)a->pos, (long long)a->n_heads, (long long)a->n_kv_heads,
                  (long long)a->head_dim, (long long)a->ldq, (long long)a->ldkv, (long long)a->ldo);
    SQZ_RETURN_IF(a->n > INT_MAX || a->n_heads > 65535, SQZ_ERR_INVALID_ARG,
                  "CUDA attention: %lld queries x %lld heads exceed the launch grid", (long long)a->n,
                  (long long)a->n_heads);
    SQZ_RETURN_IF(a->head_dim > SQZ__CUDA_ATTN_MAX_HD, SQZ_ERR_UNSUPPORTED,
                  "CUDA attention: head_dim %lld (at most %d)", (long long)a->head_dim, SQZ__CUDA_ATTN_MAX_HD);
    SQZ_RETURN_IF(a->n && (!a->q || !a->k || !a->v || !a->out), SQZ_ERR_INVALID_ARG, "CUDA attention: a NULL buffer");
    return SQZ_OK;
}

sqz_status sqz__cuda_attention(void *ctx, const sqz_attention_args *a) {
    sqz_cuda_ctx *c = (sqz_cuda_ctx *)ctx;
    SQZ_TRY(attention_check(a));
    if (a->n == 0) return SQZ_OK;
    SQZ_TRY(sqz__cuda_enter(c));
    const dim3 grid((unsigned)a->n, (unsigned)a->n_heads);
    attention_kernel<<<grid, ATTN_THREADS, 0, c->stream>>>(*a);
    SQZ_CUDA_LAUNCHED();
    return SQZ_OK;
}

static sqz_status eltwise_check(const char *op, const sqz_eltwise_args *a) {
    SQZ_RETURN_IF(a->n < 0, SQZ_ERR_INVALID_ARG, "CUDA %s: n %lld", op, (long long)a->n);
    SQZ_RETURN_IF(a->n && (!a->x || !a->y), SQZ_ERR_INVALID_ARG, "CUDA %s: a NULL buffer", op);
    return SQZ_OK;
}

sqz_status sqz__cuda_silu_mul(void *ctx, const sqz_eltwise_args *a) {
    sqz_cuda_ctx *c = (sqz_cuda_ctx *)ctx;
    SQZ_TRY(eltwise_check("silu_mul", a));
    if (a->n == 0) return SQZ_OK;
    SQZ_TRY(sqz__cuda_enter(c));
    silu_mul_kernel<<<grid_for(a->n), EW_THREADS, 0, c->stream>>>(a->x, a->y, a->n);
    SQZ_CUDA_LAUNCHED();
    return SQZ_OK;
}

sqz_status sqz__cuda_add(void *ctx, const sqz_eltwise_args *a) {
    sqz_cuda_ctx *c = (sqz_cuda_ctx *)ctx;
    SQZ_TRY(eltwise_check("add", a));
    if (a->n == 0) return SQZ_OK;
    SQZ_TRY(sqz__cuda_enter(c));
    add_kernel<<<grid_for(a->n), EW_THREADS, 0, c->stream>>>(a->x, a->y, a->n);
    SQZ_CUDA_LAUNCHED();
    return SQZ_OK;
}

sqz_status sqz__cuda_layernorm(void *ctx, const sqz_layernorm_args *a) {
    sqz_cuda_ctx *c = (sqz_cuda_ctx *)ctx;
    SQZ_RETURN_IF(a->n < 0 || a->d < 1 || (a->n && (!a->x || !a->w || !a->y)), SQZ_ERR_INVALID_ARG,
                  "CUDA layernorm: n %lld, d %lld or a NULL buffer", (long long)a->n, (long long)a->d);
    if (a->n == 0) return SQZ_OK;
    SQZ_TRY(sqz__cuda_enter(c));
    const unsigned grid = (unsigned)(a->n < 65535 ? a->n : 65535);
    layernorm_kernel<<<grid, ROW_THREADS, 0, c->stream>>>(a->x, a->w, a->b, a->y, a->eps, a->n, a->d);
    SQZ_CUDA_LAUNCHED();
    return SQZ_OK;
}

sqz_status sqz__cuda_gelu(void *ctx, const sqz_eltwise_args *a) {
    sqz_cuda_ctx *c = (sqz_cuda_ctx *)ctx;
    SQZ_RETURN_IF(a->n < 0 || (a->n && !a->x), SQZ_ERR_INVALID_ARG, "CUDA gelu: n %lld or a NULL buffer",
                  (long long)a->n);
    if (a->n == 0) return SQZ_OK;
    SQZ_TRY(sqz__cuda_enter(c));
    gelu_kernel<<<grid_for(a->n), EW_THREADS, 0, c->stream>>>(a->x, a->n);
    SQZ_CUDA_LAUNCHED();
    return SQZ_OK;
}

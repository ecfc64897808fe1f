/*
 * kernels/cuda/stats_cuda.cu - the CUDA backend's colstats and cosine slots (sqz/backend.h): the
 * observers' per-column sums and layer scoring's per-row cosine. One thread per column (per row)
 * adds its rows (columns) in order, each product of two widened floats exact in f64, so the sums
 * are the CPU's bits (kernels/cpu/backend_calib.c): a fused multiply-add of an exact product rounds
 * as the separate add does. The columns' threads read consecutive addresses (coalesced); a row's
 * cosine walks its row alone, cheap at the sizes a calibration window has.
 */
#include <limits.h>
#include <math.h>

#include "kernels/cpu/backend_impl.h"
#include "kernels/cuda/calib_cuda.cuh"

__global__ void colstats_kernel(const float *x, int64_t n, int64_t k, double *x2, double *ab, double *sx,
                                float *amax) {
    const int64_t j = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= k) return;
    double s2 = x2 ? x2[j] : 0, sa = ab ? ab[j] : 0, s1 = sx ? sx[j] : 0;
    float m = amax ? amax[j] : 0.0f;
    for (int64_t t = 0; t < n; t++) {
        const double v = (double)x[t * k + j];
        s2 = __dadd_rn(s2, __dmul_rn(v, v));
        sa = __dadd_rn(sa, fabs(v));
        s1 = __dadd_rn(s1, v);
        const float a = fabsf((float)v);
        if (a > m) m = a;
    }
    if (x2) x2[j] = s2;
    if (ab) ab[j] = sa;
    if (sx) sx[j] = s1;
    if (amax) amax[j] = m;
}

__global__ void cosine_kernel(const float *a, const float *b, int64_t n, int64_t d, double *out) {
    const int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n) return;
    const float *ra = a + t * d, *rb = b + t * d;
    double s_ab = 0, s_aa = 0, s_bb = 0;
    for (int64_t j = 0; j < d; j++) {
        const double x = (double)ra[j], y = (double)rb[j];
        s_ab = __dadd_rn(s_ab, __dmul_rn(x, y));
        s_aa = __dadd_rn(s_aa, __dmul_rn(x, x));
        s_bb = __dadd_rn(s_bb, __dmul_rn(y, y));
    }
    out[t] = s_aa > 0 && s_bb > 0 ? __ddiv_rn(s_ab, __dsqrt_rn(__dmul_rn(s_aa, s_bb))) : 1.0;
}

static unsigned blocks_of(int64_t n) { return (unsigned)((n + 255) / 256); }

sqz_status sqz__cuda_colstats(void *ctx, const sqz_colstats_args *a) {
    sqz_cuda_ctx *c = (sqz_cuda_ctx *)ctx;
    SQZ_RETURN_IF(a->n < 0 || a->k < 1 || a->k > (int64_t)INT_MAX * 256 || (a->n > 0 && !a->x), SQZ_ERR_INVALID_ARG,
                  "CUDA colstats: n %lld, k %lld", (long long)a->n, (long long)a->k);
    if (a->n == 0 || (!a->sum_x2 && !a->sum_abs && !a->sum_x && !a->absmax)) return SQZ_OK;
    SQZ_TRY(sqz__cuda_enter(c));
    colstats_kernel<<<blocks_of(a->k), 256, 0, c->stream>>>(a->x, a->n, a->k, a->sum_x2, a->sum_abs, a->sum_x,
                                                            a->absmax);
    SQZ_CUDA_LAUNCHED();
    return SQZ_OK;
}

sqz_status sqz__cuda_cosine(void *ctx, const sqz_cosine_args *a) {
    sqz_cuda_ctx *c = (sqz_cuda_ctx *)ctx;
    SQZ_RETURN_IF(a->n < 0 || a->d < 1 || a->n > (int64_t)INT_MAX * 256 || (a->n > 0 && (!a->a || !a->b || !a->out)),
                  SQZ_ERR_INVALID_ARG, "CUDA cosine: n %lld, d %lld", (long long)a->n, (long long)a->d);
    if (a->n == 0) return SQZ_OK;
    SQZ_TRY(sqz__cuda_enter(c));
    cosine_kernel<<<blocks_of(a->n), 256, 0, c->stream>>>(a->a, a->b, a->n, a->d, a->out);
    SQZ_CUDA_LAUNCHED();
    return SQZ_OK;
}

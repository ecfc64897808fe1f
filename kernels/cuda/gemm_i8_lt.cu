/*
 * kernels/cuda/gemm_i8_lt.cu - W8A8 through cuBLASLt IMMA plus a scale epilogue (see
 * gemm_i8_lt.cuh). Matmul descriptors, layouts and the heuristic's algorithm are cached
 * per (m, n, k, alignment) in a small round-robin table of the context.
 */
#include "kernels/cuda/gemm_i8_lt.cuh"
#include "kernels/cuda/quantize_i8.cuh"

struct sqz__lt_plan {
    bool used, supported;
    int64_t m, n, k;
    uint32_t align;
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t la, lb, lc;
    cublasLtMatmulAlgo_t algo;
};

static void plan_release(sqz__lt_plan *p) {
    if (p->op) cublasLtMatmulDescDestroy(p->op);
    if (p->la) cublasLtMatrixLayoutDestroy(p->la);
    if (p->lb) cublasLtMatrixLayoutDestroy(p->lb);
    if (p->lc) cublasLtMatrixLayoutDestroy(p->lc);
    memset(p, 0, sizeof *p);
}

void sqz__i8_lt_plans_free(sqz_cuda_ctx *c) {
    if (!c->plans) return;
    for (int i = 0; i < SQZ__LT_PLANS; i++) plan_release(&c->plans[i]);
    free(c->plans);
    c->plans = NULL;
}

bool sqz__i8_lt_can_run(int64_t m, int64_t n, int64_t k, const void *x, const void *w, const void *acc) {
    return m >= 1 && n >= 4 && k >= 4 && n % 4 == 0 && k % 4 == 0 && sqz__aligned(x, 4) && sqz__aligned(w, 4) &&
           sqz__aligned(acc, 4);
}

static uint32_t alignment_of(const void *x, const void *w, const void *acc) {
    return sqz__aligned(x, 16) && sqz__aligned(w, 16) && sqz__aligned(acc, 16) ? 16u : 4u;
}

static sqz_status plan_build(sqz_cuda_ctx *c, sqz__lt_plan *p, int64_t m, int64_t n, int64_t k, uint32_t align) {
    plan_release(p);
    p->used = true;
    p->m = m; p->n = n; p->k = k; p->align = align;
    const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    SQZ_CUBLAS_TRY(cublasLtMatmulDescCreate(&p->op, CUBLAS_COMPUTE_32I, CUDA_R_32I));
    SQZ_CUBLAS_TRY(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
    SQZ_CUBLAS_TRY(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
    SQZ_CUBLAS_TRY(cublasLtMatrixLayoutCreate(&p->la, CUDA_R_8I, (uint64_t)k, (uint64_t)n, k));
    SQZ_CUBLAS_TRY(cublasLtMatrixLayoutCreate(&p->lb, CUDA_R_8I, (uint64_t)k, (uint64_t)m, k));
    SQZ_CUBLAS_TRY(cublasLtMatrixLayoutCreate(&p->lc, CUDA_R_32I, (uint64_t)n, (uint64_t)m, n));
    cublasLtMatmulPreference_t pref = NULL;
    SQZ_CUBLAS_TRY(cublasLtMatmulPreferenceCreate(&pref));
    const uint64_t ws = c->lt_ws_bytes;
    cublasStatus_t st = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
    const cublasLtMatmulPreferenceAttributes_t al[4] = {
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
    for (int i = 0; i < 4 && st == CUBLAS_STATUS_SUCCESS; i++)
        st = cublasLtMatmulPreferenceSetAttribute(pref, al[i], &align, sizeof align);
    cublasLtMatmulHeuristicResult_t res;
    memset(&res, 0, sizeof res);
    int found = 0;
    if (st == CUBLAS_STATUS_SUCCESS)
        st = cublasLtMatmulAlgoGetHeuristic(c->lt, p->op, p->la, p->lb, p->lc, p->lc, pref, 1, &res, &found);
    cublasLtMatmulPreferenceDestroy(pref);
    /* "not supported" is an answer (no IMMA algorithm for this shape), not a failure */
    if (st != CUBLAS_STATUS_SUCCESS && st != CUBLAS_STATUS_NOT_SUPPORTED)
        return sqz__cublas_error(st, "cublasLtMatmulAlgoGetHeuristic", __FILE__, __LINE__);
    p->supported = st == CUBLAS_STATUS_SUCCESS && found > 0 && res.state == CUBLAS_STATUS_SUCCESS;
    if (p->supported) p->algo = res.algo;
    return SQZ_OK;
}

static sqz_status plan_get(sqz_cuda_ctx *c, int64_t m, int64_t n, int64_t k, uint32_t align, sqz__lt_plan **out) {
    if (!c->plans) {
        c->plans = (sqz__lt_plan *)sqz__calloc(SQZ__LT_PLANS, sizeof(sqz__lt_plan));
        if (!c->plans) return SQZ_ERR_NOMEM;
    }
    for (int i = 0; i < SQZ__LT_PLANS; i++) {
        sqz__lt_plan *p = &c->plans[i];
        if (p->used && p->m == m && p->n == n && p->k == k && p->align == align) { *out = p; return SQZ_OK; }
    }
    sqz__lt_plan *p = &c->plans[c->next_plan];
    c->next_plan = (c->next_plan + 1) % SQZ__LT_PLANS;
    sqz_status s = plan_build(c, p, m, n, k, align);
    if (s != SQZ_OK) { plan_release(p); return s; }
    *out = p;
    return SQZ_OK;
}

/* The cached plan for this problem; SQZ_ERR_UNSUPPORTED when IMMA cannot run it. */
static sqz_status lt_plan(sqz_cuda_ctx *c, int64_t m, int64_t n, int64_t k, const void *x, const void *w,
                          const void *acc, sqz__lt_plan **out) {
    SQZ_RETURN_IF(!sqz__i8_lt_can_run(m, n, k, x, w, acc), SQZ_ERR_UNSUPPORTED,
                  "cuBLASLt IMMA: (m, n, k) = (%lld, %lld, %lld) breaks its rules (n, k multiples of 4, "
                  "4-byte aligned pointers)", (long long)m, (long long)n, (long long)k);
    sqz__lt_plan *p;
    SQZ_TRY(plan_get(c, m, n, k, alignment_of(x, w, acc), &p));
    SQZ_RETURN_IF(!p->supported, SQZ_ERR_UNSUPPORTED,
                  "cuBLASLt offers no IMMA algorithm for (m, n, k) = (%lld, %lld, %lld)", (long long)m, (long long)n,
                  (long long)k);
    *out = p;
    return SQZ_OK;
}

static sqz_status lt_run(sqz_cuda_ctx *c, const sqz__lt_plan *p, const int8_t *x, const int8_t *w, int32_t *acc) {
    const int32_t alpha = 1, beta = 0;
    SQZ_CUBLAS_TRY(cublasLtMatmul(c->lt, p->op, &alpha, w, p->la, x, p->lb, &beta, acc, p->lc, acc, p->lc, &p->algo,
                                  c->lt_ws, c->lt_ws_bytes, c->stream));
    return SQZ_OK;
}

sqz_status sqz__i8_lt_matmul(sqz_cuda_ctx *c, int64_t m, int64_t n, int64_t k, const int8_t *x, const int8_t *w,
                             int32_t *acc) {
    sqz__lt_plan *p = NULL; /* set by lt_plan; gcc -Wmaybe-uninitialized misreads the inlined SQZ_TRY */
    SQZ_TRY(lt_plan(c, m, n, k, x, w, acc, &p));
    return lt_run(c, p, x, w, acc);
}

namespace {

constexpr int ETHREADS = 256;

__global__ void __launch_bounds__(ETHREADS) scale_kernel(const int32_t *__restrict__ acc, int64_t m, int64_t n,
                                                         const float *__restrict__ xs, const float *__restrict__ ws,
                                                         void *__restrict__ y, int y_f16) {
    const int64_t col = (int64_t)blockIdx.x * ETHREADS + threadIdx.x;
    if (col >= n) return;
    const float wsc = ws[col];
    for (int64_t row = blockIdx.y; row < m; row += gridDim.y) {
        const int64_t i = row * n + col;
        sqz__store_out(y, y_f16, i, __fmul_rn(__fmul_rn(__int2float_rn(acc[i]), xs[row]), wsc));
    }
}

} // namespace

sqz_status sqz__i8_scale_epilogue(sqz_cuda_ctx *c, const int32_t *acc, int64_t m, int64_t n, const float *x_scale,
                                  const float *w_scale, void *y, int y_f16) {
    if (m <= 0 || n <= 0) return SQZ_OK;
    const dim3 grid((unsigned)sqz__ceil_div(n, ETHREADS), (unsigned)(m < 65535 ? m : 65535));
    scale_kernel<<<grid, ETHREADS, 0, c->stream>>>(acc, m, n, x_scale, w_scale, y, y_f16);
    SQZ_CUDA_LAUNCHED();
    return SQZ_OK;
}

sqz_status sqz__i8_lt_gemm(sqz_cuda_ctx *c, const sqz_gemm_i8_args *a) {
    size_t bytes;
    SQZ_RETURN_IF(!sqz__mul_size((size_t)a->m, (size_t)a->n, &bytes) || !sqz__mul_size(bytes, 4, &bytes),
                  SQZ_ERR_INVALID_ARG, "gemm_i8: m * n overflows");
    void *acc;
    SQZ_TRY(sqz__cuda_scratch(c, bytes, &acc));
    sqz__lt_plan *p = NULL; /* set by lt_plan; gcc -Wmaybe-uninitialized misreads the inlined SQZ_TRY */
    SQZ_TRY(lt_plan(c, a->m, a->n, a->k, a->x, a->w, acc, &p)); /* before any work: AUTO falls back on failure */
    if (a->x_f32) SQZ_TRY(sqz__i8_quantize_rows(c, a->x_f32, a->m, a->k, a->x, a->x_scale));
    SQZ_TRY(lt_run(c, p, a->x, a->w, (int32_t *)acc));
    return sqz__i8_scale_epilogue(c, (const int32_t *)acc, a->m, a->n, a->x_scale, a->w_scale, a->y,
                                  a->y_dtype == SQZ_DTYPE_F16);
}

/*
 * kernels/cpu/backend_fwd.c - the CPU backend's block-forward slots (sqz/backend.h: rmsnorm,
 * rope, attention, silu_mul, add, layernorm, gelu): the runtime's own row kernels (fwd_ops.c, attn.c) behind the
 * backend table, so that a session whose activations live in "device" memory on the CPU
 * (sqz_backend_cpu_offload) computes the host forward's bits, and a device backend takes the same
 * calls. Each slot runs on the pool it is given (the CPU backend's), or on the calling thread.
 */
#include <stdlib.h>

#include "kernels/cpu/backend_impl.h"
#include "core/internal.h"
#include "kernels/cpu/attn.h"
#include "kernels/cpu/backend_fwd.h"
#include "kernels/cpu/fwd_ops.h"

sqz_status sqz__cpu_rmsnorm(sqz__pool *p, const sqz_rmsnorm_args *a) {
    SQZ_RETURN_IF(a->n < 0 || a->d < 1 || (a->n && (!a->x || !a->w || !a->y)), SQZ_ERR_INVALID_ARG,
                  "CPU rmsnorm: n %lld, d %lld or a NULL buffer", (long long)a->n, (long long)a->d);
    sqz__rmsnorm(p, a->x, a->w, a->eps, a->n, a->d, a->y);
    return SQZ_OK;
}

sqz_status sqz__cpu_layernorm(sqz__pool *p, const sqz_layernorm_args *a) {
    SQZ_RETURN_IF(a->n < 0 || a->d < 1 || (a->n && (!a->x || !a->w || !a->y)), SQZ_ERR_INVALID_ARG,
                  "CPU layernorm: n %lld, d %lld or a NULL buffer", (long long)a->n, (long long)a->d);
    sqz__layernorm(p, a->x, a->w, a->b, a->eps, a->n, a->d, a->y);
    return SQZ_OK;
}

sqz_status sqz__cpu_rope(sqz__pool *p, const sqz_rope_args *a) {
    SQZ_RETURN_IF(a->n < 0 || a->pos < 0 || a->head_dim < 2 || a->head_dim % 2 || a->n_heads < 1 ||
                      a->ld < a->n_heads * a->head_dim || (a->n && (!a->x || !a->cos_t || !a->sin_t)),
                  SQZ_ERR_INVALID_ARG, "CPU rope: n %lld, %lld heads of %lld, row stride %lld or a NULL buffer",
                  (long long)a->n, (long long)a->n_heads, (long long)a->head_dim, (long long)a->ld);
    sqz__rope(p, a->x, a->ld, a->n, a->n_heads, a->head_dim, a->head_dim, a->pos, a->half ? SQZ_ROPE_HALF : SQZ_ROPE_INTERLEAVED,
              a->cos_t, a->sin_t);
    return SQZ_OK;
}

sqz_status sqz__attention_check(const char *who, const sqz_attention_args *a) {
    SQZ_RETURN_IF(a->n < 0 || a->pos < 0 || a->head_dim < 1 || a->n_kv_heads < 1 || a->n_heads < a->n_kv_heads ||
                      a->n_heads % a->n_kv_heads || a->ldq < a->n_heads * a->head_dim ||
                      a->ldo < a->n_heads * a->head_dim || a->ldkv < a->n_kv_heads * a->head_dim,
                  SQZ_ERR_INVALID_ARG, "%s attention: n %lld at %lld, %lld heads / %lld kv heads of %lld, strides",
                  who, (long long)a->n, (long long)a->pos, (long long)a->n_heads, (long long)a->n_kv_heads,
                  (long long)a->head_dim);
    SQZ_RETURN_IF(a->n && (!a->q || !a->k || !a->v || !a->out), SQZ_ERR_INVALID_ARG, "%s attention: a NULL buffer",
                  who);
    return SQZ_OK;
}

sqz_status sqz__cpu_attention(sqz__pool *p, sqz__dot_fn dot, const sqz_attention_args *a) {
    SQZ_TRY(sqz__attention_check("CPU", a));
    if (a->n == 0) return SQZ_OK;
    const bool few = a->n < SQZ__QMM_TILE_M; /* by shape alone: the same bits on any pool */
    const int threads = sqz__pool_threads(p);
    int64_t few_ld;
    const size_t nf = sqz__attention_scratch_floats(a, threads, few, &few_ld);
    const int64_t qb = a->n < SQZ__ATTN_QBLOCK ? a->n : SQZ__ATTN_QBLOCK;
    float *buf = sqz__malloc(nf * sizeof(float));
    if (!buf) return SQZ_ERR_NOMEM;
    const sqz__attn_scratch w = {buf, few_ld, buf + nf - (size_t)(a->n_heads / a->n_kv_heads * qb * a->head_dim),
                                 dot, NULL};
    sqz__attention_cpu(p, a, &w, few);
    free(buf);
    return SQZ_OK;
}

/* Element-wise work as rows of ROW elements (so that the pool can split it) and a tail: each
 * element's result does not depend on the split. */
enum { ROW = 4096 };

sqz_status sqz__cpu_silu_mul(sqz__pool *p, const sqz_eltwise_args *a) {
    SQZ_RETURN_IF(a->n < 0 || (a->n && (!a->x || !a->y)), SQZ_ERR_INVALID_ARG, "CPU silu_mul: n %lld",
                  (long long)a->n);
    const int64_t rows = a->n / ROW, tail = a->n - rows * ROW;
    if (rows) sqz__silu_mul(p, a->x, a->y, rows, ROW);
    if (tail) sqz__silu_mul(NULL, a->x + rows * ROW, a->y + rows * ROW, 1, tail);
    return SQZ_OK;
}

sqz_status sqz__cpu_add(sqz__pool *p, const sqz_eltwise_args *a) {
    SQZ_RETURN_IF(a->n < 0 || (a->n && (!a->x || !a->y)), SQZ_ERR_INVALID_ARG, "CPU add: n %lld", (long long)a->n);
    const int64_t rows = a->n / ROW, tail = a->n - rows * ROW;
    if (rows) sqz__add(p, a->x, a->y, rows, ROW);
    if (tail) sqz__add(NULL, a->x + rows * ROW, a->y + rows * ROW, 1, tail);
    return SQZ_OK;
}

sqz_status sqz__cpu_gelu(sqz__pool *p, const sqz_eltwise_args *a) {
    SQZ_RETURN_IF(a->n < 0 || (a->n && !a->x), SQZ_ERR_INVALID_ARG, "CPU gelu: n %lld", (long long)a->n);
    const int64_t rows = a->n / ROW, tail = a->n - rows * ROW;
    if (rows) sqz__gelu(p, a->x, rows, ROW);
    if (tail) sqz__gelu(NULL, a->x + rows * ROW, 1, tail);
    return SQZ_OK;
}

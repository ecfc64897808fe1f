/* kernels/cpu/backend.c - backend-independent dispatch helpers. */
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "kernels/cpu/backend_impl.h"

void sqz_backend_free(sqz_backend *b) {
    if (!b) return;
    if (b->ops && b->ops->destroy) b->ops->destroy(b->ctx);
    free(b);
}

bool sqz_backend_supports(const sqz_backend *b, sqz_op op, sqz_dtype w_dtype) {
    if (!b || !b->ops || !b->ops->supports) return false;
    switch (op) {
    case SQZ_OP_MATMUL: if (!b->ops->matmul) return false; break;
    case SQZ_OP_GEMM_I8: if (!b->ops->gemm_i8) return false; break;
    case SQZ_OP_GEMM_W4A16: if (!b->ops->gemm_w4 || !b->ops->prepare_w4) return false; break;
    case SQZ_OP_GEMM_I8_SP24: if (!b->ops->gemm_i8_sp24) return false; break;
    case SQZ_OP_SGEMM: if (!b->ops->sgemm) return false; break;
    case SQZ_OP_XTX: if (!b->ops->xtx) return false; break;
    case SQZ_OP_CHOL: if (!b->ops->chol_inv_upper) return false; break;
    case SQZ_OP_TO_F32: if (!b->ops->to_f32) return false; break;
    case SQZ_OP_RMSNORM: if (!b->ops->rmsnorm) return false; break;
    case SQZ_OP_ROPE: if (!b->ops->rope) return false; break;
    case SQZ_OP_ATTENTION: if (!b->ops->attention) return false; break;
    case SQZ_OP_SILU_MUL: if (!b->ops->silu_mul) return false; break;
    case SQZ_OP_ADD: if (!b->ops->add) return false; break;
    case SQZ_OP_LAYERNORM: if (!b->ops->layernorm) return false; break;
    case SQZ_OP_GELU: if (!b->ops->gelu) return false; break;
    case SQZ_OP_TILES: if (!b->ops->dgemm || !b->ops->dtrsm || !b->ops->dpotrf) return false; break;
    case SQZ_OP_COLSTATS: if (!b->ops->colstats) return false; break;
    case SQZ_OP_COSINE: if (!b->ops->cosine) return false; break;
    default: return false;
    }
    return b->ops->supports(b->ctx, op, w_dtype);
}

const char *sqz_backend_name(const sqz_backend *b) { return b && b->ops ? b->ops->name : "(none)"; }

#define SLOT_OR_UNSUPPORTED(b, slot)                                                                             \
    SQZ_RETURN_IF(!(b) || !(b)->ops || !(b)->ops->slot, SQZ_ERR_UNSUPPORTED, "backend %s has no %s",            \
                  sqz_backend_name(b), #slot)

sqz_status sqz_backend_matmul(sqz_backend *b, const sqz_matmul_args *a) {
    SLOT_OR_UNSUPPORTED(b, matmul);
    return b->ops->matmul(b->ctx, a);
}

sqz_status sqz_backend_gemm_i8(sqz_backend *b, const sqz_gemm_i8_args *a) {
    SLOT_OR_UNSUPPORTED(b, gemm_i8);
    return b->ops->gemm_i8(b->ctx, a);
}

sqz_status sqz_backend_gemm_i8_sp24(sqz_backend *b, const sqz_gemm_i8_sp24_args *a) {
    SLOT_OR_UNSUPPORTED(b, gemm_i8_sp24);
    return b->ops->gemm_i8_sp24(b->ctx, a);
}

sqz_status sqz_backend_prepare_w4(sqz_backend *b, const void *src_host, sqz_dtype src_dtype, int64_t n, int64_t k,
                                  void **prepared) {
    SLOT_OR_UNSUPPORTED(b, prepare_w4);
    return b->ops->prepare_w4(b->ctx, src_host, src_dtype, n, k, prepared);
}

sqz_status sqz_backend_gemm_w4(sqz_backend *b, const sqz_gemm_w4_args *a) {
    SLOT_OR_UNSUPPORTED(b, gemm_w4);
    return b->ops->gemm_w4(b->ctx, a);
}

void sqz_backend_release(sqz_backend *b, void *p) {
    if (b && b->ops && b->ops->free && p) b->ops->free(b->ctx, p);
}

bool sqz_backend_host_memory(const sqz_backend *b) { return b && b->ops && b->ops->host_memory; }

void sqz_backend_mem_stats(const sqz_backend *b, sqz_backend_mem *out) {
    memset(out, 0, sizeof *out);
    if (b && b->ops && b->ops->mem_stats) b->ops->mem_stats(b->ctx, out);
}

sqz_status sqz_backend_set_mem_cap(sqz_backend *b, size_t cap) {
    SQZ_RETURN_IF(!b || !b->ops || !b->ops->set_mem_cap, SQZ_ERR_UNSUPPORTED,
                  "backend %s has no device memory to cap", b && b->ops ? b->ops->name : "(none)");
    return b->ops->set_mem_cap(b->ctx, cap);
}

bool sqz_backend_pin(const sqz_backend *b, void *p, size_t nbytes, size_t min_bytes) {
    if (!b || !b->ops || !b->ops->host_pin || !b->ops->host_unpin || !p || nbytes < min_bytes) return false;
    if (b->ops->host_pin(b->ctx, p, nbytes) == SQZ_OK) return true;
    sqz_clear_error();
    return false;
}

void sqz_backend_unpin(const sqz_backend *b, void *p) {
    if (b && b->ops && b->ops->host_unpin && p) b->ops->host_unpin(b->ctx, p);
}

#ifndef SQZ_HAVE_CUDA
sqz_status sqz_backend_cuda(int device, sqz_backend **out) {
    (void)device;
    *out = NULL;
    return SQZ_ERROR(SQZ_ERR_UNSUPPORTED, "this libsqz was built without CUDA (configure with -DSQZ_CUDA=ON)");
}
#endif

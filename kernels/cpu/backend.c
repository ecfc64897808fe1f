/* kernels/cpu/backend.c - backend-independent dispatch helpers. */
#include <stdlib.h>

#include "core/internal.h"
#include "sqz/backend.h"

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
    default: return false;
    }
    return b->ops->supports(b->ctx, op, w_dtype);
}

#ifndef SQZ_HAVE_CUDA
sqz_status sqz_backend_cuda(int device, sqz_backend **out) {
    (void)device;
    *out = NULL;
    return SQZ_ERROR(SQZ_ERR_UNSUPPORTED, "this libsqz was built without CUDA (configure with -DSQZ_CUDA=ON)");
}
#endif

/*
 * prune/sparsity_forward.c - how a sparse quantized layer is validated: as it would run.
 */
#include "prune/sparsity_internal.h"

sqz_status sqz__sparsity_forward(const sqz__sparsity_args *a, const sqz_qmatrix *q, const float *x, int64_t m,
                                 float *y) {
    (void)a;
    return sqz_qmatrix_forward(q, x, m, y);
}

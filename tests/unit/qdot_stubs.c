/* tests/unit/qdot_stubs.c - what tests/unit/qdot_main.c's aarch64 program links in place of the rest
 * of the library (tests/cli/test_qdot_aarch64.sh): the dtype table is core's rows alone (layouts and
 * dequantizers; quant/gguf's quantizers, which complete it in libsqz, are not needed to multiply),
 * and sgemm, which only many tokens reach, aborts (there is no aarch64 OpenBLAS here). */
#include <cblas.h>
#include <stdlib.h>

#include "core/internal.h"
#include "sqz/dtype.h"

const sqz_dtype_traits *sqz_dtype_info(sqz_dtype t) {
    return (unsigned)t < SQZ_DTYPE_COUNT ? sqz__dtype_core(t) : NULL;
}

void cblas_sgemm(const enum CBLAS_ORDER o, const enum CBLAS_TRANSPOSE ta, const enum CBLAS_TRANSPOSE tb,
                 const blasint m, const blasint n, const blasint k, const float alpha, const float *a,
                 const blasint lda, const float *b, const blasint ldb, const float beta, float *c,
                 const blasint ldc) {
    (void)o, (void)ta, (void)tb, (void)m, (void)n, (void)k, (void)alpha, (void)a, (void)lda, (void)b;
    (void)ldb, (void)beta, (void)c, (void)ldc;
    abort();
}

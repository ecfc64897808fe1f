/* tests/gpu/gpu_open.h - the start of a GPU test: the CUDA backend on the first device (and, when
 * cpu is not NULL, a CPU backend to compare with), or the exit code when there is none:
 *   77 (skipped): no CUDA device, or one the kernels cannot use (sqz_backend_cuda's
 *      SQZ_ERR_UNSUPPORTED with a device present, e.g. compute capability below 8.0);
 *   1 (failed): a CUDA build whose module cannot be found (no device and SQZ_ERR_UNSUPPORTED: the
 *      build is broken, which is not the same as a machine without a GPU), or a backend that fails. */
#ifndef SQZ_TESTS_GPU_OPEN_H
#define SQZ_TESTS_GPU_OPEN_H

#include <stdio.h>

#include "sqz/backend.h"
#include "test_util.h"

/* 0 with *gpu (and *cpu) made, else the exit code; `what` names the tests in the skip line. */
static inline int sqz_gpu_open(sqz_backend **gpu, sqz_backend **cpu, const char *what) {
    *gpu = NULL;
    if (cpu) *cpu = NULL;
    if (sqz_cuda_device_count() == 0) {
        sqz_backend *none = NULL;
        const sqz_status why = sqz_backend_cuda(-1, &none);
        sqz_backend_free(none);
        if (why == SQZ_ERR_UNSUPPORTED) {
            fprintf(stderr, "sqz_backend_cuda: %s\n", sqz_last_error());
            return 1;
        }
        printf("no CUDA device (%s): %s skipped\n", why != SQZ_OK ? sqz_last_error() : "none found", what);
        return SQZ_TEST_SKIP;
    }
    const sqz_status s = sqz_backend_cuda(-1, gpu);
    if (s == SQZ_ERR_UNSUPPORTED) {
        printf("CUDA device unusable for these kernels (%s): %s skipped\n", sqz_last_error(), what);
        return SQZ_TEST_SKIP;
    }
    if (s != SQZ_OK || (cpu && sqz_backend_cpu(0, cpu) != SQZ_OK)) {
        fprintf(stderr, "backend: %s\n", sqz_last_error());
        return 1;
    }
    return 0;
}

#endif

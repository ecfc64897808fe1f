/* tests/gpu/gpu_open.h - the start of a GPU test: the CUDA backend on the first device and a CPU
 * backend to compare with, or the exit code when there is none (77: no usable device, a skip; 1: a
 * CUDA build whose module cannot be found, a failure). */
#ifndef SQZ_TESTS_GPU_OPEN_H
#define SQZ_TESTS_GPU_OPEN_H

#include <stdio.h>

#include "sqz/backend.h"
#include "test_util.h"

/* 0 with *gpu and *cpu made, else the exit code (what names the tests in the skip line). */
static inline int sqz_gpu_open(sqz_backend **gpu, sqz_backend **cpu, const char *what) {
    *gpu = *cpu = NULL;
    if (sqz_cuda_device_count() == 0) {
        sqz_backend *none = NULL;
        const sqz_status why = sqz_backend_cuda(-1, &none);
        sqz_backend_free(none);
        if (why == SQZ_ERR_UNSUPPORTED) { /* built with CUDA: the module must be there */
            fprintf(stderr, "sqz_backend_cuda: %s\n", sqz_last_error());
            return 1;
        }
        printf("no CUDA device: %s skipped\n", what);
        return SQZ_TEST_SKIP;
    }
    if (sqz_backend_cuda(-1, gpu) != SQZ_OK || sqz_backend_cpu(0, cpu) != SQZ_OK) {
        fprintf(stderr, "backend: %s\n", sqz_last_error());
        return 1;
    }
    return 0;
}

#endif

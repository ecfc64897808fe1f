/*
 * kernels/cuda_loader/cuda_module.h - the interface between libsqz and its CUDA module (internal).
 *
 * A CUDA build (SQZ_CUDA) puts the CUDA backend (kernels/cuda/) in a module of its own,
 * libsqz_cuda.so, which links cudart, cuBLAS and cuBLASLt; libsqz and the programs that link
 * it link none of them. kernels/cuda_loader/cuda_loader.c dlopens the module the first time a
 * CUDA entry point of sqz/backend.h is called (once, thread-safe; never unloaded), looks up
 * SQZ__CUDA_MODULE_ENTRY and calls it with the host table below; the module answers with
 * its entry-point table. The module defines the few libsqz internals its code calls
 * (error recording, allocation, dtype names, the int4 packer) as forwarders to the host
 * table, so that both sides share one error state per thread and the module has no
 * undefined sqz symbol; it exports nothing but the entry symbol (a version script).
 *
 * Both tables start with the ABI number and their size. Bump SQZ__CUDA_MODULE_ABI whenever
 * a table, sqz_w4_layout or a struct of sqz/backend.h changes: the loader refuses a module of
 * another ABI, and the module refuses a host of another ABI (the module and libsqz are
 * meant to come from the same build).
 */
#ifndef SQZ_KERNELS_CUDA_LOADER_CUDA_MODULE_H
#define SQZ_KERNELS_CUDA_LOADER_CUDA_MODULE_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/cpu/w4_pack.h"
#include "kernels/cpu/backend_impl.h"
#include "sqz/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SQZ__CUDA_MODULE_ABI 3u
/* The symbol the module exports: const sqz__cuda_module *ENTRY(const sqz__cuda_host *host). */
#define SQZ__CUDA_MODULE_ENTRY "sqz__cuda_module_entry"
/* The module's file name, looked for next to the library (or program) holding the loader. */
#define SQZ__CUDA_MODULE_FILE "libsqz_cuda.so"

/* libsqz -> module: the libsqz services the CUDA code uses. Messages are formatted by the
 * module; the host records them as the calling thread's error. */
typedef struct sqz__cuda_host {
    uint32_t abi;  /* SQZ__CUDA_MODULE_ABI */
    uint32_t size; /* sizeof(sqz__cuda_host) */
    sqz_status (*error)(sqz_status s, const char *file, int line, const char *msg);
    void (*error_prefix)(const char *msg);
    void (*clear_error)(void);
    void *(*malloc)(size_t n);                 /* sqz__malloc: NULL with SQZ_ERR_NOMEM recorded */
    void *(*calloc)(size_t count, size_t size);
    void *(*realloc)(void *p, size_t n);
    const char *(*dtype_name)(sqz_dtype t);
    uint16_t (*fp32_to_fp16)(float f);
    sqz_status (*w4_layout_init)(sqz_dtype dtype, int64_t n, int64_t k, sqz_w4_layout *out);
    void (*w4_pack)(const sqz_w4_layout *L, const void *src, void *dst);
} sqz__cuda_host;

/* module -> libsqz: the CUDA entry points of sqz/backend.h, with their contracts. */
typedef struct sqz__cuda_module {
    uint32_t abi;  /* SQZ__CUDA_MODULE_ABI */
    uint32_t size; /* sizeof(sqz__cuda_module) */
    int (*device_count)(void);
    sqz_status (*backend_create)(int device, sqz_backend **out);
    sqz_status (*device_info_get)(int device, sqz_cuda_device_info *out);
    sqz_status (*bench_gemm)(sqz_backend *b, sqz_bench_kernel kernel, int64_t m, int64_t n, int64_t k,
                             double min_seconds, sqz_bench_result *result);
} sqz__cuda_module;

/* The type of the module's entry: NULL when host is of another ABI. */
typedef const sqz__cuda_module *(*sqz__cuda_module_entry_fn)(const sqz__cuda_host *host);

#ifdef __cplusplus
}
#endif
#endif

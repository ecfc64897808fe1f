/*
 * kernels/cuda/module_entry.cu - the entry of the CUDA module libsqz_cuda.so
 * (kernels/cuda_loader/cuda_module.h): libsqz's loader calls sqz__cuda_module_entry with its host
 * table and gets the entry points of this backend. The libsqz internals the CUDA code calls
 * (error recording, allocation, dtype names, the int4 packer) are defined here as forwarders
 * to the host table: one error state per thread on both sides, and no undefined sqz symbol in
 * the module (it is linked with --no-undefined and exports the entry only, module.map).
 * Only in the module: sqz_kernels_cuda's objects alone still link against core and
 * kernels/cpu (the layering check).
 */
#include <stdarg.h>
#include <stdio.h>

#include "kernels/cuda_loader/cuda_module.h"
#include "kernels/cuda/backend_cuda.cuh"

static const sqz__cuda_host *host; /* set once by the entry, before any other call */

/* ---- libsqz's internals, forwarded -------------------------------------------------- */
sqz_status sqz__error(sqz_status s, const char *file, int line, const char *fmt, ...) {
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return host->error(s, file, line, msg);
}

void sqz__error_prefix(const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    host->error_prefix(msg);
}

void sqz_clear_error(void) { host->clear_error(); }
void *sqz__malloc(size_t n) { return host->malloc(n); }
void *sqz__calloc(size_t count, size_t size) { return host->calloc(count, size); }
void *sqz__realloc(void *p, size_t n) { return host->realloc(p, n); }
const char *sqz_dtype_name(sqz_dtype t) { return host->dtype_name(t); }
uint16_t sqz_fp32_to_fp16(float f) { return host->fp32_to_fp16(f); }
sqz_status sqz__w4_layout_init(sqz_dtype dtype, int64_t n, int64_t k, sqz_w4_layout *out) {
    return host->w4_layout_init(dtype, n, k, out);
}
void sqz__w4_pack(const sqz_w4_layout *L, const void *src, void *dst) { host->w4_pack(L, src, dst); }

/* ---- the entry ---------------------------------------------------------------------- */
static const sqz__cuda_module module_table = {
    /* .abi = */ SQZ__CUDA_MODULE_ABI,
    /* .size = */ (uint32_t)sizeof(sqz__cuda_module),
    /* .device_count = */ sqz__cuda_device_count,
    /* .backend_create = */ sqz__cuda_backend_create,
    /* .device_info_get = */ sqz__cuda_device_info_get,
    /* .bench_gemm = */ sqz__cuda_bench_gemm,
};

extern "C" __attribute__((visibility("default"))) const sqz__cuda_module *sqz__cuda_module_entry(
    const sqz__cuda_host *h) {
    if (!h || h->abi != SQZ__CUDA_MODULE_ABI || h->size != sizeof *h) return NULL;
    host = h;
    return &module_table;
}

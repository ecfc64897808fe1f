/* kernels/cuda_loader/cuda_loader.c - the CUDA entry points of sqz/backend.h in a CUDA build:
 * they load the CUDA module (libsqz_cuda.so, kernels/cuda_loader/cuda_module.h) on first use and
 * call through its entry-point table. Compiled into kernels/cpu's module, so libsqz holds it (it
 * answers what kernels/cpu/backend.c and cuda_stubs.c answer without CUDA, and lends the module
 * kernels/cpu's int4 packer), not into the CUDA module it loads. libsqz links no CUDA library,
 * so a command that never asks for a GPU maps none, and a machine without the CUDA runtime runs
 * the CPU paths.
 *
 * Where the module is looked for, first found wins:
 *   1. $SQZ_CUDA_MODULE (a path; nothing else is tried when it is set);
 *   2. the directory of the object holding this code (libsqz.so, or the program that linked
 *      libsqz.a), found with dladdr;
 *   3. that directory's SQZ__CUDA_MODULE_RELDIR (bin -> lib of an installed prefix);
 *   4. the dynamic linker's search path (LD_LIBRARY_PATH, ld.so.cache).
 * A module that is absent is SQZ_ERR_UNSUPPORTED; one that is present but cannot be loaded
 * (no CUDA runtime: "libcudart.so.13: cannot open shared object file") or is of another ABI
 * is SQZ_ERR_DEVICE. The outcome is decided once per process. */
#define _GNU_SOURCE /* dladdr1 */
#include <dlfcn.h>
#include <link.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kernels/cpu/backend_impl.h"
#include "core/internal.h"
#include "kernels/cuda_loader/cuda_module.h"
#include "sqz/backend.h"

/* ---- the services libsqz lends the module ------------------------------------------- */
static sqz_status host_error(sqz_status s, const char *file, int line, const char *msg) {
    return sqz__error(s, file, line, "%s", msg);
}
static void host_error_prefix(const char *msg) { sqz__error_prefix("%s", msg); }

static const sqz__cuda_host host = {
    .abi = SQZ__CUDA_MODULE_ABI,
    .size = sizeof(sqz__cuda_host),
    .error = host_error,
    .error_prefix = host_error_prefix,
    .clear_error = sqz_clear_error,
    .malloc = sqz__malloc,
    .calloc = sqz__calloc,
    .realloc = sqz__realloc,
    .dtype_name = sqz_dtype_name,
    .fp32_to_fp16 = sqz_fp32_to_fp16,
    .w4_layout_init = sqz__w4_layout_init,
    .w4_pack = sqz__w4_pack,
};

/* ---- loading, once ------------------------------------------------------------------- */
static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static const sqz__cuda_module *mod;  /* NULL: not loadable, see load_status / load_msg */
static sqz_status load_status;
static char load_msg[1024];

static void fail(sqz_status s, const char *fmt, ...) SQZ__PRINTF(2, 3);
static void fail(sqz_status s, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    load_status = s;
    vsnprintf(load_msg, sizeof load_msg, fmt, ap);
    va_end(ap);
}

/* The directory of the object this code is in ("" when unknown): libsqz.so, or the program
 * that linked libsqz.a (the first link map, which glibc leaves unnamed: /proc/self/exe). */
static void own_dir(char *dir, size_t cap) {
    Dl_info info;
    struct link_map *lm = NULL;
    char path[PATH_MAX];
    dir[0] = 0;
    if (!dladdr1((const void *)&own_dir, &info, (void **)&lm, RTLD_DL_LINKMAP)) return;
    if (lm && lm->l_prev == NULL) {
        const ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
        if (n <= 0) return;
        path[n] = 0;
    } else if (!info.dli_fname || !realpath(info.dli_fname, path)) {
        return;
    }
    const char *slash = strrchr(path, '/');
    if (!slash) return;
    const size_t len = (size_t)(slash - path);
    if (len + 1 > cap) return;
    memcpy(dir, path, len);
    dir[len] = 0;
    if (len == 0) snprintf(dir, cap, "/");
}

/* dlopens `path`; false with the failure recorded. */
static bool open_module(const char *path, void **handle) {
    *handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (*handle) return true;
    const char *e = dlerror();
    fail(SQZ_ERR_DEVICE, "cannot load the CUDA module %s: %s", path, e ? e : "unknown error");
    return false;
}

static void load(void) {
    void *h = NULL;
    const char *env = getenv("SQZ_CUDA_MODULE");
    if (env && *env) {
        if (access(env, F_OK) != 0) {
            fail(SQZ_ERR_UNSUPPORTED, "no CUDA module at SQZ_CUDA_MODULE=%s", env);
            return;
        }
        if (!open_module(env, &h)) return;
    } else {
        char dir[PATH_MAX], cand[2][2 * PATH_MAX];
        int n_cand = 0;
        own_dir(dir, sizeof dir);
        if (dir[0]) {
            snprintf(cand[n_cand++], sizeof cand[0], "%s/%s", dir, SQZ__CUDA_MODULE_FILE);
#ifdef SQZ__CUDA_MODULE_RELDIR
            snprintf(cand[n_cand++], sizeof cand[0], "%s/%s/%s", dir, SQZ__CUDA_MODULE_RELDIR, SQZ__CUDA_MODULE_FILE);
#endif
        }
        for (int i = 0; i < n_cand && !h; i++)
            if (access(cand[i], F_OK) == 0 && !open_module(cand[i], &h)) return;
        if (!h) {
            h = dlopen(SQZ__CUDA_MODULE_FILE, RTLD_NOW | RTLD_LOCAL);
            if (!h) {
                const char *e = dlerror();
                if (!e) e = "unknown error";
                /* the module itself missing, or found on the search path with a library missing */
                if (strncmp(e, SQZ__CUDA_MODULE_FILE ":", strlen(SQZ__CUDA_MODULE_FILE) + 1) == 0)
                    fail(SQZ_ERR_UNSUPPORTED,
                         "the CUDA module " SQZ__CUDA_MODULE_FILE " was not found (next to %s, nor on the library "
                         "path; set SQZ_CUDA_MODULE to its path)",
                         dir[0] ? dir : "libsqz");
                else
                    fail(SQZ_ERR_DEVICE, "cannot load the CUDA module %s: %s", SQZ__CUDA_MODULE_FILE, e);
                return;
            }
        }
    }
    sqz__cuda_module_entry_fn entry = NULL;
    void *sym = dlsym(h, SQZ__CUDA_MODULE_ENTRY);
    if (sym) memcpy(&entry, &sym, sizeof entry); /* POSIX: a data pointer that holds a function */
    const sqz__cuda_module *m = entry ? entry(&host) : NULL;
    if (!entry) {
        fail(SQZ_ERR_DEVICE, "the CUDA module has no %s: not an sqz CUDA module", SQZ__CUDA_MODULE_ENTRY);
    } else if (!m || m->abi != SQZ__CUDA_MODULE_ABI || m->size != sizeof *m) {
        fail(SQZ_ERR_DEVICE, "the CUDA module is of another build (interface ABI %u expected, %s); reinstall sqz",
             SQZ__CUDA_MODULE_ABI, m ? "it has another" : "it refused this libsqz");
    } else {
        mod = m;
        return;
    }
    dlclose(h);
}

/* The module, or the reason it cannot be had (recorded as this thread's error). */
static sqz_status module(const sqz__cuda_module **out) {
    pthread_once(&load_once, load);
    *out = mod;
    if (mod) return SQZ_OK;
    return sqz__error(load_status, __FILE__, __LINE__, "CUDA backend unavailable: %s", load_msg);
}

/* ---- the public entry points ----------------------------------------------------------- */
sqz_status sqz_backend_cuda(int device, sqz_backend **out) {
    const sqz__cuda_module *m;
    *out = NULL;
    SQZ_TRY(module(&m));
    SQZ_TRY(m->backend_create(device, out));
    if (sqz__backend_ops_ok((*out)->ops)) return SQZ_OK;
    sqz_backend_free(*out);
    *out = NULL;
    return SQZ_ERROR(SQZ_ERR_DEVICE, "CUDA backend unavailable: its operations table is of another build (version or "
                     "size differs from this libsqz's); install libsqz_cuda.so from the same build");
}

int sqz_cuda_device_count(void) {
    pthread_once(&load_once, load);
    return mod ? mod->device_count() : 0; /* never fails: no module is no device */
}

sqz_status sqz_cuda_device_info_get(int device, sqz_cuda_device_info *out) {
    const sqz__cuda_module *m;
    memset(out, 0, sizeof *out);
    SQZ_TRY(module(&m));
    return m->device_info_get(device, out);
}

sqz_status sqz_cuda_bench_gemm(sqz_backend *b, sqz_bench_kernel kernel, int64_t m, int64_t n, int64_t k,
                               double min_seconds, sqz_bench_result *result) {
    const sqz__cuda_module *mo;
    memset(result, 0, sizeof *result);
    SQZ_TRY(module(&mo));
    return mo->bench_gemm(b, kernel, m, n, k, min_seconds, result);
}

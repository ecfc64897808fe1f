/* core/status.c - status names and messages, the thread's last error, small libc helpers. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#if defined(__linux__)
#include <sys/mman.h>
#endif

#include "core/internal.h"
#include "sqz/status.h"

#define SQZ__ERRMSG_CAP 1024

static _Thread_local char tl_msg[SQZ__ERRMSG_CAP];
static _Thread_local char tl_loc[128];

static const char *const status_names[] = {
#define X(name, msg) "SQZ_" #name,
    SQZ_STATUS_MAP(X)
#undef X
};
static const char *const status_msgs[] = {
#define X(name, msg) msg,
    SQZ_STATUS_MAP(X)
#undef X
};

const char *sqz_status_name(sqz_status s) {
    if ((unsigned)s >= SQZ_STATUS_COUNT) return "SQZ_UNKNOWN_STATUS";
    return status_names[s];
}

const char *sqz_status_message(sqz_status s) {
    if ((unsigned)s >= SQZ_STATUS_COUNT) return "unknown status";
    return status_msgs[s];
}

const char *sqz_last_error(void) { return tl_msg; }
const char *sqz_last_error_location(void) { return tl_loc; }
void sqz_clear_error(void) { tl_msg[0] = 0; tl_loc[0] = 0; }

sqz_status sqz__error(sqz_status s, const char *file, int line, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(tl_msg, sizeof tl_msg, fmt, ap);
    va_end(ap);
    snprintf(tl_loc, sizeof tl_loc, "%s:%d", sqz__basename(file), line);
    return s;
}

void sqz__error_prefix(const char *fmt, ...) {
    char prefix[512], old[SQZ__ERRMSG_CAP];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    memcpy(old, tl_msg, sizeof old);
    size_t np = strlen(prefix);
    if (np > sizeof tl_msg - 3) np = sizeof tl_msg - 3;
    memcpy(tl_msg, prefix, np);
    memcpy(tl_msg + np, ": ", 2);
    size_t rest = sizeof tl_msg - np - 3;
    size_t no = strnlen(old, rest);
    memcpy(tl_msg + np + 2, old, no);
    tl_msg[np + 2 + no] = 0;
}

/* A buffer of 32 MB or more (a block's Hessians, GPTQ's factors, a layer's weights as f32) asks
 * for transparent huge pages before it is first touched: glibc maps such a buffer afresh for each
 * allocation, and faulting it in 4 KB pages was a visible share of the calibration loop (a block
 * of the 1.5 B: its 642 MB ffn_down Hessian, the factor's work copy, U). Only advice: where THP
 * is off or unsupported nothing changes. */
static void *huge_pages(void *p, size_t n) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    if (p && n >= ((size_t)32 << 20)) {
        const uintptr_t pg = 4096, a = ((uintptr_t)p + pg - 1) & ~(pg - 1), e = ((uintptr_t)p + n) & ~(pg - 1);
        if (e > a) (void)madvise((void *)a, e - a, MADV_HUGEPAGE);
    }
#else
    (void)n;
#endif
    return p;
}

void *sqz__malloc(size_t n) {
    void *p = malloc(n ? n : 1);
    if (!p) SQZ_ERROR(SQZ_ERR_NOMEM, "out of memory allocating %zu bytes", n);
    return huge_pages(p, n);
}

void *sqz__calloc(size_t count, size_t size) {
    void *p = calloc(count ? count : 1, size ? size : 1);
    if (!p) SQZ_ERROR(SQZ_ERR_NOMEM, "out of memory allocating %zu x %zu bytes", count, size);
    return huge_pages(p, count * size);
}

void *sqz__realloc(void *p, size_t n) {
    void *q = realloc(p, n ? n : 1);
    if (!q) SQZ_ERROR(SQZ_ERR_NOMEM, "out of memory reallocating %zu bytes", n);
    return q;
}

char *sqz__strndup(const char *s, size_t n) {
    char *d = sqz__malloc(n + 1);
    if (!d) return NULL;
    memcpy(d, s, n);
    d[n] = 0;
    return d;
}

char *sqz__strdup(const char *s) { return sqz__strndup(s, strlen(s)); }

char *sqz__asprintf(const char *fmt, ...) {
    va_list ap, ap2;
    va_start(ap, fmt);
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0) { va_end(ap2); SQZ_ERROR(SQZ_ERR_INVALID_ARG, "bad format string"); return NULL; }
    char *s = sqz__malloc((size_t)n + 1);
    if (s) vsnprintf(s, (size_t)n + 1, fmt, ap2);
    va_end(ap2);
    return s;
}

bool sqz__utf8_valid(const char *str, size_t n) {
    const unsigned char *s = (const unsigned char *)str;
    size_t i = 0;
    while (i < n) {
        unsigned c = s[i];
        if (c < 0x80) { i++; continue; }
        size_t len;
        uint32_t cp, min;
        if ((c & 0xE0) == 0xC0) { len = 2; cp = c & 0x1F; min = 0x80; }
        else if ((c & 0xF0) == 0xE0) { len = 3; cp = c & 0x0F; min = 0x800; }
        else if ((c & 0xF8) == 0xF0) { len = 4; cp = c & 0x07; min = 0x10000; }
        else return false;
        if (len > n - i) return false;
        for (size_t j = 1; j < len; j++) {
            if ((s[i + j] & 0xC0) != 0x80) return false;
            cp = (cp << 6) | (s[i + j] & 0x3F);
        }
        if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
        i += len;
    }
    return true;
}

const char *sqz__basename(const char *path) {
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

char *sqz__path_join(const char *dir, const char *name) {
    size_t n = strlen(dir);
    if (n > 0 && dir[n - 1] == '/') return sqz__asprintf("%s%s", dir, name);
    return sqz__asprintf("%s/%s", dir, name);
}

char *sqz__dirname(const char *path) {
    const char *s = strrchr(path, '/');
    if (!s) return sqz__strdup(".");
    if (s == path) return sqz__strdup("/");
    return sqz__strndup(path, (size_t)(s - path));
}

bool sqz__is_dir(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

bool sqz__is_file(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

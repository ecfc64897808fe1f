/*
 * core/bytebuf.c - the growable byte buffer the writers build headers and sections in (GGUF's
 * header, the bundle's metadata sections, the safetensors header), distributed compression packs
 * messages in and the option tables write their help text in: bytes, little-endian numbers and
 * printf text appended, the first allocation failure remembered (oom) and every later append a
 * no-op.
 */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "core/internal.h"

/* Room for n more bytes; false (oom set) when it cannot be had. */
static bool reserve(sqz__bytebuf *b, size_t n) {
    if (b->oom) return false;
    if (n > b->cap - b->n) {
        size_t cap = b->cap ? b->cap : 4096;
        while (n > cap - b->n) {
            if (cap > SIZE_MAX / 2) {
                b->oom = true;
                return false;
            }
            cap *= 2;
        }
        uint8_t *p = sqz__realloc(b->p, cap);
        if (!p) {
            b->oom = true;
            return false;
        }
        b->p = p;
        b->cap = cap;
    }
    return true;
}

void sqz__bytebuf_put(sqz__bytebuf *b, const void *src, size_t n) {
    if (b->oom || !n || !reserve(b, n)) return;
    memcpy(b->p + b->n, src, n);
    b->n += n;
}

void sqz__bytebuf_printf(sqz__bytebuf *b, const char *fmt, ...) {
    if (b->oom) return;
    va_list ap;
    va_start(ap, fmt);
    const int k = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (k < 0 || (size_t)k == SIZE_MAX || !reserve(b, (size_t)k + 1)) {
        b->oom = true;
        return;
    }
    va_start(ap, fmt);
    vsnprintf((char *)b->p + b->n, (size_t)k + 1, fmt, ap);
    va_end(ap);
    b->n += (size_t)k;
}

char *sqz__bytebuf_str(sqz__bytebuf *b) {
    if (!b->oom && reserve(b, 1)) {
        b->p[b->n] = 0;
        return (char *)b->p;
    }
    return NULL;
}

void sqz__bytebuf_put_u32(sqz__bytebuf *b, uint32_t v) {
    uint8_t x[4];
    sqz__wr_u32(x, v);
    sqz__bytebuf_put(b, x, 4);
}

void sqz__bytebuf_put_u64(sqz__bytebuf *b, uint64_t v) {
    uint8_t x[8];
    sqz__wr_u64(x, v);
    sqz__bytebuf_put(b, x, 8);
}

void sqz__bytebuf_put_f32(sqz__bytebuf *b, float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    sqz__bytebuf_put_u32(b, u);
}

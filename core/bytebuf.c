/*
 * core/bytebuf.c - the growable byte buffer the writers build headers and sections in (GGUF's
 * header, the bundle's metadata sections) and distributed compression packs messages in:
 * little-endian numbers appended, the first allocation failure remembered (oom) and every later
 * append a no-op.
 */
#include <stdint.h>
#include <string.h>

#include "core/internal.h"

void sqz__bytebuf_put(sqz__bytebuf *b, const void *src, size_t n) {
    if (b->oom || !n) return;
    if (n > b->cap - b->n) {
        size_t cap = b->cap ? b->cap : 4096;
        while (n > cap - b->n) {
            if (cap > SIZE_MAX / 2) {
                b->oom = true;
                return;
            }
            cap *= 2;
        }
        uint8_t *p = sqz__realloc(b->p, cap);
        if (!p) {
            b->oom = true;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, src, n);
    b->n += n;
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

/* formats/onnx_pb.c - the protobuf wire format (varints, fixed32, length-delimited fields) for the
 * ONNX writer. Hand-written rather than protobuf-c (docs/onnx.md, "Why a hand encoder"): the writer
 * emits a few messages and never parses one, the weights live in external data so the ModelProto
 * stays small, and six functions over sqz__bytebuf need neither a code generator nor onnx.proto at
 * build time. Field numbers are onnx.proto3's; an append after an allocation failure is a no-op
 * (bytebuf's oom flag), checked once by the caller. */
#include <stdlib.h>
#include <string.h>

#include "formats/onnx_internal.h"

enum { WIRE_VARINT = 0, WIRE_FIXED32 = 5, WIRE_LEN = 2 };

void sqz__pb_varint(sqz__bytebuf *b, uint64_t v) {
    uint8_t tmp[10];
    size_t n = 0;
    do {
        uint8_t c = (uint8_t)(v & 0x7f);
        v >>= 7;
        tmp[n++] = (uint8_t)(c | (v ? 0x80 : 0));
    } while (v);
    sqz__bytebuf_put(b, tmp, n);
}

static void tag(sqz__bytebuf *b, int field, int wire) { sqz__pb_varint(b, ((uint64_t)field << 3) | (uint64_t)wire); }

void sqz__pb_int(sqz__bytebuf *b, int field, int64_t v) {
    tag(b, field, WIRE_VARINT);
    sqz__pb_varint(b, (uint64_t)v); /* negative int64: ten bytes, two's complement, as protobuf does */
}

void sqz__pb_f32(sqz__bytebuf *b, int field, float v) {
    tag(b, field, WIRE_FIXED32);
    sqz__bytebuf_put_f32(b, v);
}

void sqz__pb_bytes(sqz__bytebuf *b, int field, const void *p, size_t n) {
    tag(b, field, WIRE_LEN);
    sqz__pb_varint(b, (uint64_t)n);
    if (n) sqz__bytebuf_put(b, p, n);
}

void sqz__pb_str(sqz__bytebuf *b, int field, const char *s) { sqz__pb_bytes(b, field, s, strlen(s)); }

void sqz__pb_msg(sqz__bytebuf *b, int field, const sqz__bytebuf *sub) {
    if (sub->oom) b->oom = true;
    sqz__pb_bytes(b, field, sub->p, sub->n);
}

void sqz__pb_msg_take(sqz__bytebuf *b, int field, sqz__bytebuf *sub) {
    sqz__pb_msg(b, field, sub);
    free(sub->p);
    memset(sub, 0, sizeof *sub);
}

/* formats/onnx_read_pb.c - a bounds-checked protobuf decoder for the parts of an ONNX ModelProto the
 * reader needs (onnx_read.c; docs/onnx.md, "Reading back"): ModelProto.graph (7) -> GraphProto.node (1)
 * and .initializer (5); TensorProto dims (1, packed or not), data_type (2), name (8), raw_data (9),
 * doc_string (12), external_data (13: StringStringEntryProto key 1 / value 2: location, offset, length),
 * data_location (14); NodeProto input (1), output (2), op_type (4), domain (7), attribute (5:
 * AttributeProto name 1, i 3, type 20). Every other field is skipped by its wire type.
 *
 * ModelProto.producer_name (2) is kept too: the reader refuses another tool's model by it.
 *
 * The wire format (protobuf's encoding guide): a tag varint (field << 3 | wire type), then a varint
 * (0), 8 bytes (1), a varint length and that many bytes (2) or 4 bytes (5); groups (3, 4) are
 * refused (ONNX never uses them). Every varint is at most 10 bytes, every length is checked against
 * the bytes left of its enclosing message before anything is read, and strings stay in the
 * caller's bytes (sqz__pb_span), so a hostile file costs at most its own size in the arrays. */
#include <stdio.h>
#include <stdlib.h>

#include "formats/onnx_internal.h"

#define MAX_NODES (1 << 22)

enum { W_VARINT = 0, W_I64 = 1, W_LEN = 2, W_I32 = 5 };

typedef struct pbr {
    const uint8_t *p;
    size_t n, pos;
    size_t base; /* offset of p in the whole file (messages) */
} pbr;

/* One field: its number, wire type and value (v for varint / fixed, b[0..len) for LEN). */
typedef struct pbf {
    uint64_t num;
    int wire;
    uint64_t v;
    const uint8_t *b;
    size_t len;
} pbf;

typedef struct ctx {
    const char *file;
    sqz__onnx_proto *out;
    size_t cap_init, cap_node;
} ctx;

static bool varint(pbr *r, uint64_t *v) {
    uint64_t x = 0;
    for (int i = 0; i < 10; i++) {
        if (r->pos >= r->n) return false;
        const uint8_t c = r->p[r->pos++];
        if (i == 9 && c > 1) return false; /* a tenth byte holds bit 63 only */
        x |= (uint64_t)(c & 0x7f) << (7 * i);
        if (!(c & 0x80)) {
            *v = x;
            return true;
        }
    }
    return false;
}

/* The next field of r into f; SQZ_ERR_FORMAT naming the byte where the message breaks. */
static sqz_status next_field(ctx *c, pbr *r, pbf *f, const char *what) {
    const size_t at = r->base + r->pos;
    uint64_t tag;
    SQZ_RETURN_IF(!varint(r, &tag), SQZ_ERR_FORMAT, "%s: byte %zu: a truncated or overlong varint (tag) in %s",
                  c->file, at, what);
    f->num = tag >> 3;
    f->wire = (int)(tag & 7);
    f->b = NULL;
    f->len = 0;
    f->v = 0;
    SQZ_RETURN_IF(f->num == 0, SQZ_ERR_FORMAT, "%s: byte %zu: field number 0 in %s", c->file, at, what);
    switch (f->wire) {
    case W_VARINT:
        SQZ_RETURN_IF(!varint(r, &f->v), SQZ_ERR_FORMAT, "%s: byte %zu: a truncated or overlong varint (field %llu) "
                      "in %s", c->file, at, (unsigned long long)f->num, what);
        return SQZ_OK;
    case W_I64:
    case W_I32: {
        const size_t k = f->wire == W_I64 ? 8 : 4;
        SQZ_RETURN_IF(r->n - r->pos < k, SQZ_ERR_FORMAT, "%s: byte %zu: field %llu's %zu bytes run past the end of "
                      "%s", c->file, at, (unsigned long long)f->num, k, what);
        f->v = k == 8 ? sqz__rd_u64(r->p + r->pos) : sqz__rd_u32(r->p + r->pos);
        r->pos += k;
        return SQZ_OK;
    }
    case W_LEN: {
        uint64_t len;
        SQZ_RETURN_IF(!varint(r, &len), SQZ_ERR_FORMAT, "%s: byte %zu: a truncated or overlong length (field %llu) "
                      "in %s", c->file, at, (unsigned long long)f->num, what);
        SQZ_RETURN_IF(len > r->n - r->pos, SQZ_ERR_FORMAT, "%s: byte %zu: field %llu's length %llu runs past the end "
                      "of %s (%zu bytes left)", c->file, at, (unsigned long long)f->num, (unsigned long long)len,
                      what, r->n - r->pos);
        f->b = r->p + r->pos;
        f->len = (size_t)len;
        r->pos += (size_t)len;
        return SQZ_OK;
    }
    default:
        return SQZ_ERROR(SQZ_ERR_FORMAT, "%s: byte %zu: wire type %d (field %llu) in %s is not one ONNX uses",
                         c->file, at, f->wire, (unsigned long long)f->num, what);
    }
}

static pbr sub(const pbr *r, const pbf *f) {
    pbr s = {f->b, f->len, 0, r->base + (size_t)(f->b - r->p)};
    return s;
}

static sqz_status want_wire(ctx *c, const pbr *r, const pbf *f, int wire, const char *what) {
    SQZ_RETURN_IF(f->wire != wire, SQZ_ERR_FORMAT, "%s: byte %zu: field %llu of %s has wire type %d, not %d", c->file,
                  r->base + r->pos, (unsigned long long)f->num, what, f->wire, wire);
    return SQZ_OK;
}

static sqz__pb_span span(const pbf *f) { return (sqz__pb_span){(const char *)f->b, f->len}; }

/* "1234" -> 1234: decimal digits only, below 2^63. */
static bool dec_u64(sqz__pb_span s, uint64_t *v) {
    if (s.n == 0 || s.n > 19) return false;
    uint64_t x = 0;
    for (size_t i = 0; i < s.n; i++) {
        if (s.p[i] < '0' || s.p[i] > '9') return false;
        x = x * 10 + (uint64_t)(s.p[i] - '0');
    }
    *v = x;
    return true;
}

/* external_data's StringStringEntryProto: location / offset / length. */
static sqz_status ext_entry(ctx *c, const pbr *r, const pbf *f, sqz__onnx_init *t) {
    pbr s = sub(r, f);
    sqz__pb_span key = {NULL, 0}, val = {"", 0};
    while (s.pos < s.n) {
        pbf g;
        SQZ_TRY(next_field(c, &s, &g, "an external_data entry"));
        if (g.num == 1 || g.num == 2) SQZ_TRY(want_wire(c, &s, &g, W_LEN, "an external_data entry"));
        if (g.num == 1) key = span(&g);
        else if (g.num == 2) val = span(&g);
    }
    if (sqz__pb_is(key, "location")) {
        t->location = val;
        return SQZ_OK;
    }
    const bool off = sqz__pb_is(key, "offset"), len = sqz__pb_is(key, "length");
    if (!off && !len) return SQZ_OK; /* "checksum" and others: not needed */
    uint64_t v;
    SQZ_RETURN_IF(!dec_u64(val, &v), SQZ_ERR_FORMAT, "%s: tensor '%.*s': external_data %s \"%.*s\" is not a decimal "
                  "number", c->file, (int)(t->name.n > 200 ? 200 : t->name.n), t->name.p, off ? "offset" : "length",
                  (int)(val.n > 40 ? 40 : val.n), val.p);
    if (off) {
        t->offset = v;
        t->has_offset = true;
    } else {
        t->length = v;
        t->has_length = true;
    }
    return SQZ_OK;
}

static sqz_status add_dim(ctx *c, sqz__onnx_init *t, uint64_t v) {
    SQZ_RETURN_IF(t->ndim == SQZ__ONNX_MAX_DIMS, SQZ_ERR_FORMAT, "%s: a tensor with more than %d dimensions", c->file,
                  SQZ__ONNX_MAX_DIMS);
    SQZ_RETURN_IF(v > (uint64_t)INT64_MAX, SQZ_ERR_FORMAT, "%s: a tensor with a negative dimension", c->file);
    t->dims[t->ndim++] = (int64_t)v;
    return SQZ_OK;
}

/* dims: one varint, or packed varints in a length-delimited field */
static sqz_status dims_field(ctx *c, const pbr *r, const pbf *f, sqz__onnx_init *t) {
    if (f->wire == W_VARINT) return add_dim(c, t, f->v);
    pbr s = sub(r, f);
    while (s.pos < s.n) {
        uint64_t v;
        SQZ_RETURN_IF(!varint(&s, &v), SQZ_ERR_FORMAT, "%s: byte %zu: a bad varint in a tensor's packed dims", c->file,
                      s.base + s.pos);
        SQZ_TRY(add_dim(c, t, v));
    }
    return SQZ_OK;
}

/* The wire type of a TensorProto field the reader uses (dims, 1, take either), or -1. */
static int tensor_wire(uint64_t num) {
    switch (num) {
    case 2: case 14: return W_VARINT;
    case 8: case 9: case 12: case 13: return W_LEN;
    default: return -1;
    }
}

static sqz_status tensor(ctx *c, const pbr *r, const pbf *f, sqz__onnx_init *t) {
    pbr s = sub(r, f);
    memset(t, 0, sizeof *t);
    while (s.pos < s.n) {
        pbf g;
        SQZ_TRY(next_field(c, &s, &g, "a TensorProto"));
        if (g.num == 1) {
            if (g.wire != W_VARINT) SQZ_TRY(want_wire(c, &s, &g, W_LEN, "a TensorProto"));
            SQZ_TRY(dims_field(c, &s, &g, t));
            continue;
        }
        if (tensor_wire(g.num) >= 0) SQZ_TRY(want_wire(c, &s, &g, tensor_wire(g.num), "a TensorProto"));
        switch (g.num) {
        case 2: t->data_type = (int64_t)g.v; break;
        case 8: t->name = span(&g); break;
        case 9:
            t->raw = g.b;
            t->raw_n = g.len;
            t->has_raw = true;
            break;
        case 12: t->doc = span(&g); break;
        case 13: SQZ_TRY(ext_entry(c, &s, &g, t)); break;
        case 14: t->external = g.v == 1; break;
        case 4: case 5: case 6: case 7: case 10: case 11: t->typed_data = true; break; /* float_data, int32_data, ... */
        default: break;
        }
    }
    return SQZ_OK;
}

static const char *const ATTR_NAMES[SQZ__ONNX_ATTR_COUNT] = {"K", "N", "bits", "block_size", "axis", "to"};

static sqz_status attribute(ctx *c, const pbr *r, const pbf *f, sqz__onnx_node *nd) {
    pbr s = sub(r, f);
    sqz__pb_span name = {NULL, 0};
    int64_t i = 0;
    bool has_i = false;
    while (s.pos < s.n) {
        pbf g;
        SQZ_TRY(next_field(c, &s, &g, "an AttributeProto"));
        if (g.num == 1) {
            SQZ_TRY(want_wire(c, &s, &g, W_LEN, "an AttributeProto"));
            name = span(&g);
        } else if (g.num == 3) {
            SQZ_TRY(want_wire(c, &s, &g, W_VARINT, "an AttributeProto"));
            i = (int64_t)g.v;
            has_i = true;
        }
    }
    for (int k = 0; k < SQZ__ONNX_ATTR_COUNT && has_i; k++) {
        if (sqz__pb_is(name, ATTR_NAMES[k])) {
            nd->attr[k] = i;
            nd->has_attr[k] = true;
        }
    }
    return SQZ_OK;
}

static sqz_status node(ctx *c, const pbr *r, const pbf *f, sqz__onnx_node *nd) {
    pbr s = sub(r, f);
    memset(nd, 0, sizeof *nd);
    while (s.pos < s.n) {
        pbf g;
        SQZ_TRY(next_field(c, &s, &g, "a NodeProto"));
        if (g.num == 1 || g.num == 2 || g.num == 4 || g.num == 5 || g.num == 7)
            SQZ_TRY(want_wire(c, &s, &g, W_LEN, "a NodeProto"));
        if (g.num == 1) {
            if (nd->n_in < SQZ__ONNX_NODE_INPUTS) nd->in[nd->n_in] = span(&g);
            nd->n_in++;
        } else if (g.num == 2 && !nd->out.p) {
            nd->out = span(&g);
        } else if (g.num == 4) {
            nd->op = span(&g);
        } else if (g.num == 7) {
            nd->domain = span(&g);
        } else if (g.num == 5) {
            SQZ_TRY(attribute(c, &s, &g, nd));
        }
    }
    return SQZ_OK;
}

static sqz_status grow(void **p, size_t *cap, size_t n, size_t elem) {
    if (n < *cap) return SQZ_OK;
    size_t nc = *cap ? *cap * 2 : 64;
    void *q = sqz__realloc(*p, nc * elem);
    if (!q) return SQZ_ERR_NOMEM;
    *p = q;
    *cap = nc;
    return SQZ_OK;
}

static sqz_status graph(ctx *c, const pbr *r, const pbf *f) {
    pbr s = sub(r, f);
    sqz__onnx_proto *o = c->out;
    while (s.pos < s.n) {
        pbf g;
        SQZ_TRY(next_field(c, &s, &g, "the GraphProto"));
        if (g.num != 1 && g.num != 5) continue;
        SQZ_TRY(want_wire(c, &s, &g, W_LEN, "the GraphProto"));
        if (g.num == 5) {
            SQZ_RETURN_IF(o->n_init >= SQZ__MAX_TENSORS, SQZ_ERR_FORMAT, "%s: more than %d initializers", c->file,
                          SQZ__MAX_TENSORS);
            SQZ_TRY(grow((void **)&o->init, &c->cap_init, (size_t)o->n_init, sizeof *o->init));
            SQZ_TRY(tensor(c, &s, &g, &o->init[o->n_init]));
            o->n_init++;
        } else {
            SQZ_RETURN_IF(o->n_node >= MAX_NODES, SQZ_ERR_FORMAT, "%s: more than %d nodes", c->file, MAX_NODES);
            SQZ_TRY(grow((void **)&o->node, &c->cap_node, (size_t)o->n_node, sizeof *o->node));
            SQZ_TRY(node(c, &s, &g, &o->node[o->n_node]));
            o->n_node++;
        }
    }
    return SQZ_OK;
}

bool sqz__pb_is(sqz__pb_span s, const char *lit) {
    const size_t n = strlen(lit);
    return s.p && s.n == n && memcmp(s.p, lit, n) == 0;
}

bool sqz__pb_eq(sqz__pb_span a, sqz__pb_span b) { return a.p && b.p && a.n == b.n && memcmp(a.p, b.p, a.n) == 0; }

void sqz__onnx_proto_free(sqz__onnx_proto *p) {
    free(p->init);
    free(p->node);
    memset(p, 0, sizeof *p);
}

sqz_status sqz__onnx_proto_read(const uint8_t *bytes, size_t n, const char *file, sqz__onnx_proto *out) {
    memset(out, 0, sizeof *out);
    ctx c = {file, out, 0, 0};
    pbr r = {bytes, n, 0, 0};
    bool has_graph = false;
    sqz_status st = SQZ_OK;
    while (st == SQZ_OK && r.pos < r.n) {
        pbf f;
        st = next_field(&c, &r, &f, "the ModelProto");
        if (st == SQZ_OK && f.num == 1) st = want_wire(&c, &r, &f, W_VARINT, "the ModelProto");
        if (st == SQZ_OK && f.num == 1) out->ir_version = (int64_t)f.v;
        if (st == SQZ_OK && f.num == 2) st = want_wire(&c, &r, &f, W_LEN, "the ModelProto");
        if (st == SQZ_OK && f.num == 2) out->producer = span(&f);
        if (st != SQZ_OK || f.num != 7) continue;
        st = want_wire(&c, &r, &f, W_LEN, "the ModelProto");
        if (st == SQZ_OK && has_graph) st = SQZ_ERROR(SQZ_ERR_FORMAT, "%s: two graphs in one ModelProto", file);
        if (st == SQZ_OK) st = graph(&c, &r, &f);
        has_graph = true;
    }
    if (st == SQZ_OK && !has_graph) st = SQZ_ERROR(SQZ_ERR_FORMAT, "%s: a ModelProto without a graph", file);
    if (st != SQZ_OK) sqz__onnx_proto_free(out);
    return st;
}

/*
 * formats/gguf_kv.c - the GGUF container: header, metadata, tensor infos.
 *
 * Everything in the file is untrusted. Every count is capped and checked against the
 * bytes left before anything is allocated (a string costs at least 8 bytes, an array 12,
 * a metadata entry 13, a tensor info 24 + 8 per dimension), every size computation is
 * overflow-checked, and values are only located here (kv->pos), never copied: the
 * getters below read them in place. See gguf_internal.h for the layout.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "formats/gguf_internal.h"

/* Bytes of one scalar of each type; 0 for string and array. */
static const size_t scalar_size[SQZ__GGUF_TYPE_COUNT] = {
    [SQZ__GGUF_UINT8] = 1, [SQZ__GGUF_INT8] = 1,     [SQZ__GGUF_UINT16] = 2,  [SQZ__GGUF_INT16] = 2,
    [SQZ__GGUF_UINT32] = 4, [SQZ__GGUF_INT32] = 4,   [SQZ__GGUF_FLOAT32] = 4, [SQZ__GGUF_BOOL] = 1,
    [SQZ__GGUF_STRING] = 0, [SQZ__GGUF_ARRAY] = 0,   [SQZ__GGUF_UINT64] = 8,  [SQZ__GGUF_INT64] = 8,
    [SQZ__GGUF_FLOAT64] = 8,
};

static const char *const type_names[SQZ__GGUF_TYPE_COUNT] = {
    "uint8", "int8", "uint16", "int16", "uint32", "int32", "float32", "bool", "string", "array",
    "uint64", "int64", "float64",
};

const char *sqz__gguf_type_name(uint32_t type) {
    return type < SQZ__GGUF_TYPE_COUNT ? type_names[type] : "invalid";
}

/* The fewest bytes one value of `type` can take. */
static size_t min_size(uint32_t type) {
    if (type == SQZ__GGUF_STRING) return 8;
    if (type == SQZ__GGUF_ARRAY) return 12;
    return scalar_size[type];
}

static bool is_int_type(uint32_t t) {
    return t <= SQZ__GGUF_INT32 || t == SQZ__GGUF_UINT64 || t == SQZ__GGUF_INT64;
}

/* Parsing context: the file name and what is being read, for messages. */
typedef struct parse_ctx {
    const char *path;
    sqz__reader r;
    const char *what;  /* "metadata", "tensor info" */
    const char *name;  /* key or tensor name being read (may be NULL) */
    size_t name_len;
    char what_buf[48];
} parse_ctx;

/* Names the entry being read by its index until its key or name is known. */
static void ctx_entry(parse_ctx *c, const char *kind, uint64_t i) {
    snprintf(c->what_buf, sizeof c->what_buf, "%s #%" PRIu64, kind, i);
    c->what = c->what_buf;
    c->name = NULL;
}

#define CTX_FMT "%s: %s%s%.*s%s: "
#define CTX_ARGS(c) (c)->path, (c)->what, (c)->name ? " '" : "", (int)((c)->name ? (c)->name_len : 0), \
                    (c)->name ? (c)->name : "", (c)->name ? "'" : ""

static sqz_status truncated(parse_ctx *c, const char *field) {
    return SQZ_ERROR(SQZ_ERR_FORMAT, CTX_FMT "truncated: the file (%zu bytes) ends before %s", CTX_ARGS(c),
                     c->r.size, field);
}

/* A string: u64 length, then the bytes. */
static sqz_status read_string(parse_ctx *c, const char *field, const char **s, size_t *len) {
    uint64_t n = sqz__reader_u64(&c->r);
    if (!c->r.ok) {
        char what[64];
        snprintf(what, sizeof what, "the %s length", field);
        return truncated(c, what);
    }
    SQZ_RETURN_IF(n > SQZ__MAX_STRING, SQZ_ERR_FORMAT, CTX_FMT "%s length %" PRIu64 " exceeds the limit of %d bytes",
                  CTX_ARGS(c), field, n, SQZ__MAX_STRING);
    SQZ_RETURN_IF(n > sqz__reader_left(&c->r), SQZ_ERR_FORMAT,
                  CTX_FMT "%s length %" PRIu64 " exceeds the %zu bytes left in the file", CTX_ARGS(c), field, n,
                  sqz__reader_left(&c->r));
    *s = (const char *)sqz__reader_bytes(&c->r, (size_t)n);
    *len = (size_t)n;
    return SQZ_OK;
}

/* A name used as an identifier (key, tensor name): non-empty UTF-8 without NUL. */
static sqz_status check_ident(parse_ctx *c, const char *field, const char *s, size_t len) {
    SQZ_RETURN_IF(len == 0, SQZ_ERR_FORMAT, CTX_FMT "empty %s", CTX_ARGS(c), field);
    SQZ_RETURN_IF(memchr(s, 0, len) != NULL, SQZ_ERR_FORMAT, CTX_FMT "%s contains a NUL byte", CTX_ARGS(c), field);
    SQZ_RETURN_IF(!sqz__utf8_valid(s, len), SQZ_ERR_FORMAT, CTX_FMT "%s is not valid UTF-8", CTX_ARGS(c), field);
    return SQZ_OK;
}

/* Array header: element type and count, checked against the bytes left. */
static sqz_status read_array_head(parse_ctx *c, int depth, uint32_t *et, uint64_t *n) {
    *et = sqz__reader_u32(&c->r);
    *n = sqz__reader_u64(&c->r);
    if (!c->r.ok) return truncated(c, "the array header");
    SQZ_RETURN_IF(*et >= SQZ__GGUF_TYPE_COUNT, SQZ_ERR_FORMAT, CTX_FMT "array of unknown value type %" PRIu32,
                  CTX_ARGS(c), *et);
    SQZ_RETURN_IF(*et == SQZ__GGUF_ARRAY && depth + 1 >= SQZ__GGUF_MAX_DEPTH, SQZ_ERR_FORMAT,
                  CTX_FMT "arrays nested deeper than %d levels", CTX_ARGS(c), SQZ__GGUF_MAX_DEPTH);
    SQZ_RETURN_IF(*n > SQZ__MAX_ARRAY, SQZ_ERR_FORMAT, CTX_FMT "array of %" PRIu64 " elements exceeds the limit of %d",
                  CTX_ARGS(c), *n, SQZ__MAX_ARRAY);
    SQZ_RETURN_IF(*n * min_size(*et) > sqz__reader_left(&c->r), SQZ_ERR_FORMAT,
                  CTX_FMT "array of %" PRIu64 " %s values cannot fit in the %zu bytes left in the file",
                  CTX_ARGS(c), *n,
                  sqz__gguf_type_name(*et), sqz__reader_left(&c->r));
    return SQZ_OK;
}

/* Checks and steps over one value of `type`; depth counts enclosing arrays. */
static sqz_status skip_value(parse_ctx *c, uint32_t type, int depth) {
    if (type == SQZ__GGUF_STRING) {
        const char *s;
        size_t len;
        return read_string(c, "string", &s, &len);
    }
    if (type != SQZ__GGUF_ARRAY) {
        if (!sqz__reader_bytes(&c->r, scalar_size[type])) return truncated(c, "the value");
        return SQZ_OK;
    }
    uint32_t et;
    uint64_t n;
    SQZ_TRY(read_array_head(c, depth, &et, &n));
    if (et != SQZ__GGUF_STRING && et != SQZ__GGUF_ARRAY) {
        sqz__reader_bytes(&c->r, (size_t)n * scalar_size[et]); /* checked by read_array_head */
        return SQZ_OK;
    }
    for (uint64_t i = 0; i < n; i++) SQZ_TRY(skip_value(c, et, depth + 1));
    return SQZ_OK;
}

static int cmp_bytes(const char *a, size_t na, const char *b, size_t nb) {
    int r = memcmp(a, b, na < nb ? na : nb);
    if (r != 0) return r;
    return na < nb ? -1 : na > nb;
}

static int cmp_kv(const void *a, const void *b) {
    const sqz__gguf_kv *x = *(sqz__gguf_kv *const *)a, *y = *(sqz__gguf_kv *const *)b;
    return cmp_bytes(x->key, x->key_len, y->key, y->key_len);
}

static int cmp_ti_name(const void *a, const void *b) {
    const sqz__gguf_tinfo *x = *(sqz__gguf_tinfo *const *)a, *y = *(sqz__gguf_tinfo *const *)b;
    return cmp_bytes(x->name, x->name_len, y->name, y->name_len);
}

static int cmp_ti_offset(const void *a, const void *b) {
    const sqz__gguf_tinfo *x = *(sqz__gguf_tinfo *const *)a, *y = *(sqz__gguf_tinfo *const *)b;
    if (x->offset != y->offset) return x->offset < y->offset ? -1 : 1;
    return x->nbytes < y->nbytes ? -1 : x->nbytes > y->nbytes;
}

const sqz__gguf_kv *sqz__gguf_find(const sqz__gguf *g, const char *key) {
    size_t klen = strlen(key);
    int64_t lo = 0, hi = g->n_kv - 1;
    while (lo <= hi) {
        int64_t mid = lo + (hi - lo) / 2;
        const sqz__gguf_kv *kv = g->kv_sorted[mid];
        int c = cmp_bytes(kv->key, kv->key_len, key, klen);
        if (c == 0) return kv;
        if (c < 0) lo = mid + 1;
        else hi = mid - 1;
    }
    return NULL;
}

static sqz_status parse_header(parse_ctx *c, sqz__gguf *g, uint64_t *n_tensors, uint64_t *n_kv) {
    const uint8_t *magic = sqz__reader_bytes(&c->r, 4);
    SQZ_RETURN_IF(!magic || memcmp(magic, SQZ__GGUF_MAGIC, 4) != 0, SQZ_ERR_FORMAT,
                  "%s: not a GGUF file (no \"GGUF\" magic at offset 0)", c->path);
    g->version = sqz__reader_u32(&c->r);
    if (!c->r.ok) return truncated(c, "the version");
    SQZ_RETURN_IF(g->version == 1, SQZ_ERR_UNSUPPORTED,
                  "%s: GGUF version 1 is not supported (32-bit counts; re-convert with a current llama.cpp)", c->path);
    SQZ_RETURN_IF(g->version == 0x02000000u || g->version == 0x03000000u, SQZ_ERR_UNSUPPORTED,
                  "%s: big-endian GGUF files are not supported", c->path);
    SQZ_RETURN_IF(g->version != 2 && g->version != 3, SQZ_ERR_UNSUPPORTED,
                  "%s: unsupported GGUF version %" PRIu32 " (sqz reads versions 2 and 3)", c->path, g->version);
    *n_tensors = sqz__reader_u64(&c->r);
    *n_kv = sqz__reader_u64(&c->r);
    if (!c->r.ok) return truncated(c, "the tensor and metadata counts");
    SQZ_RETURN_IF(*n_kv > SQZ__MAX_KV, SQZ_ERR_FORMAT, "%s: %" PRIu64 " metadata entries exceed the limit of %d",
                  c->path, *n_kv, SQZ__MAX_KV);
    SQZ_RETURN_IF(*n_tensors > SQZ__MAX_TENSORS, SQZ_ERR_FORMAT, "%s: %" PRIu64 " tensors exceed the limit of %d",
                  c->path, *n_tensors, SQZ__MAX_TENSORS);
    /* key length (8) + at least 1 byte of key + type (4) + at least 1 byte of value */
    SQZ_RETURN_IF(*n_kv * 14 > sqz__reader_left(&c->r), SQZ_ERR_FORMAT,
                  "%s: %" PRIu64 " metadata entries cannot fit in the %zu bytes left in the file", c->path, *n_kv,
                  sqz__reader_left(&c->r));
    return SQZ_OK;
}

static sqz_status parse_kv(parse_ctx *c, sqz__gguf *g, uint64_t n_kv) {
    if (n_kv == 0) return SQZ_OK;
    g->kv = sqz__calloc((size_t)n_kv, sizeof *g->kv);
    g->kv_sorted = sqz__calloc((size_t)n_kv, sizeof *g->kv_sorted);
    if (!g->kv || !g->kv_sorted) return SQZ_ERR_NOMEM;
    for (uint64_t i = 0; i < n_kv; i++) {
        sqz__gguf_kv *kv = &g->kv[i];
        ctx_entry(c, "metadata entry", i);
        SQZ_TRY(read_string(c, "key", &kv->key, &kv->key_len));
        SQZ_TRY(check_ident(c, "key", kv->key, kv->key_len));
        c->what = "metadata";
        c->name = kv->key;
        c->name_len = kv->key_len;
        kv->type = sqz__reader_u32(&c->r);
        if (!c->r.ok) return truncated(c, "the value type");
        SQZ_RETURN_IF(kv->type >= SQZ__GGUF_TYPE_COUNT, SQZ_ERR_FORMAT, CTX_FMT "unknown value type %" PRIu32,
                      CTX_ARGS(c), kv->type);
        if (kv->type == SQZ__GGUF_ARRAY) {
            SQZ_TRY(read_array_head(c, 0, &kv->arr_type, &kv->n));
            kv->pos = c->r.pos;
            if (kv->arr_type == SQZ__GGUF_STRING || kv->arr_type == SQZ__GGUF_ARRAY) {
                for (uint64_t j = 0; j < kv->n; j++) SQZ_TRY(skip_value(c, kv->arr_type, 1));
            } else {
                sqz__reader_bytes(&c->r, (size_t)kv->n * scalar_size[kv->arr_type]);
            }
        } else {
            kv->pos = c->r.pos;
            SQZ_TRY(skip_value(c, kv->type, 0));
        }
        g->kv_sorted[i] = kv;
        g->n_kv = (int64_t)i + 1;
    }
    c->name = NULL;
    qsort(g->kv_sorted, (size_t)g->n_kv, sizeof *g->kv_sorted, cmp_kv);
    for (int64_t i = 1; i < g->n_kv; i++) {
        const sqz__gguf_kv *a = g->kv_sorted[i - 1], *b = g->kv_sorted[i];
        SQZ_RETURN_IF(cmp_kv(&a, &b) == 0, SQZ_ERR_FORMAT, "%s: duplicate metadata key '%.*s'", c->path,
                      (int)a->key_len, a->key);
    }
    return SQZ_OK;
}

static sqz_status parse_alignment(parse_ctx *c, sqz__gguf *g) {
    g->alignment = SQZ__GGUF_DEFAULT_ALIGNMENT;
    bool found;
    int64_t a;
    SQZ_TRY(sqz__gguf_get_int(g, "general.alignment", &found, &a));
    if (!found) return SQZ_OK;
    SQZ_RETURN_IF(a <= 0 || a > (1 << 30) || (a & (a - 1)) != 0, SQZ_ERR_FORMAT,
                  "%s: general.alignment %" PRId64 " is not a power of two between 1 and 2^30", c->path, a);
    g->alignment = (uint32_t)a;
    return SQZ_OK;
}

static sqz_status parse_tensor_info(parse_ctx *c, sqz__gguf_tinfo *t, uint64_t idx) {
    ctx_entry(c, "tensor info", idx);
    SQZ_TRY(read_string(c, "tensor name", &t->name, &t->name_len));
    SQZ_TRY(check_ident(c, "tensor name", t->name, t->name_len));
    c->what = "tensor";
    c->name = t->name;
    c->name_len = t->name_len;
    SQZ_RETURN_IF(t->name_len > SQZ__GGUF_MAX_NAME, SQZ_ERR_FORMAT, CTX_FMT "name of %zu bytes exceeds the %d allowed",
                  CTX_ARGS(c), t->name_len, SQZ__GGUF_MAX_NAME);
    t->n_dims = sqz__reader_u32(&c->r);
    if (!c->r.ok) return truncated(c, "the dimension count");
    SQZ_RETURN_IF(t->n_dims < 1 || t->n_dims > SQZ_MAX_DIMS, SQZ_ERR_FORMAT, CTX_FMT "%" PRIu32
                  " dimensions (sqz supports 1 to %d)", CTX_ARGS(c), t->n_dims, SQZ_MAX_DIMS);
    int64_t nel = 1;
    for (int d = 0; d < SQZ_MAX_DIMS; d++) t->ne[d] = 1;
    for (uint32_t d = 0; d < t->n_dims; d++) {
        uint64_t ne = sqz__reader_u64(&c->r);
        if (!c->r.ok) return truncated(c, "the dimensions");
        SQZ_RETURN_IF(ne > (uint64_t)INT64_MAX, SQZ_ERR_FORMAT, CTX_FMT "dimension %" PRIu32 " is %" PRIu64
                      ", beyond int64", CTX_ARGS(c), d, ne);
        t->ne[d] = (int64_t)ne;
        SQZ_RETURN_IF(!sqz__mul_i64(nel, t->ne[d], &nel), SQZ_ERR_FORMAT,
                      CTX_FMT "element count of the shape overflows int64", CTX_ARGS(c));
    }
    uint32_t type = sqz__reader_u32(&c->r);
    t->offset = sqz__reader_u64(&c->r);
    if (!c->r.ok) return truncated(c, "the type and offset");
    SQZ_RETURN_IF(type > INT32_MAX || !sqz_dtype_from_gguf((int)type, &t->dtype), SQZ_ERR_UNSUPPORTED,
                  CTX_FMT "ggml type %" PRIu32 " (%s) is not supported by sqz", CTX_ARGS(c), type,
                  sqz__ggml_type_name(type));
    const sqz_dtype_traits *tr = sqz_dtype_info(t->dtype);
    SQZ_RETURN_IF(t->ne[0] % tr->block_size != 0, SQZ_ERR_FORMAT,
                  CTX_FMT "row length %" PRId64 " is not a multiple of the %s block size %" PRId64, CTX_ARGS(c),
                  t->ne[0], tr->name, tr->block_size);
    SQZ_RETURN_IF(!sqz_dtype_nbytes(t->dtype, nel, &t->nbytes), SQZ_ERR_FORMAT,
                  CTX_FMT "%" PRId64 " elements of %s overflow the byte size", CTX_ARGS(c), nel, tr->name);
    return SQZ_OK;
}

static sqz_status check_tensor_ranges(sqz__gguf *g) {
    size_t n = (size_t)g->n_tensors;
    if (n == 0) return SQZ_OK;
    SQZ_RETURN_IF(g->data_start > g->size, SQZ_ERR_FORMAT, "%s: truncated: the data section would start at "
                  "offset %zu, beyond the end of the file (%zu bytes)", g->path, g->data_start, g->size);
    sqz__gguf_tinfo **idx = sqz__malloc(n * sizeof *idx);
    if (!idx) return SQZ_ERR_NOMEM;
    sqz_status s = SQZ_OK;
    for (size_t i = 0; i < n; i++) idx[i] = &g->ti[i];
    for (size_t i = 0; i < n && s == SQZ_OK; i++) {
        const sqz__gguf_tinfo *t = &g->ti[i];
        size_t avail = g->size - g->data_start;
        if (t->offset % g->alignment != 0) {
            s = SQZ_ERROR(SQZ_ERR_FORMAT, "%s: tensor '%.*s': data offset %" PRIu64 " is not a multiple of the "
                          "alignment %" PRIu32, g->path, (int)t->name_len, t->name, t->offset, g->alignment);
        } else if (t->offset > avail || t->nbytes > avail - t->offset) {
            s = SQZ_ERROR(SQZ_ERR_FORMAT, "%s: tensor '%.*s': data [%" PRIu64 ", +%zu bytes) exceeds the %zu-byte "
                          "data section (file size %zu)", g->path, (int)t->name_len, t->name, t->offset, t->nbytes,
                          avail, g->size);
        }
    }
    if (s == SQZ_OK) {
        qsort(idx, n, sizeof *idx, cmp_ti_name);
        for (size_t i = 1; i < n && s == SQZ_OK; i++) {
            if (cmp_ti_name(&idx[i - 1], &idx[i]) == 0) {
                s = SQZ_ERROR(SQZ_ERR_FORMAT, "%s: duplicate tensor name '%.*s'", g->path, (int)idx[i]->name_len,
                              idx[i]->name);
            }
        }
    }
    if (s == SQZ_OK) {
        /* Sorted by offset, the non-empty ranges must not overlap; empty tensors take no bytes. */
        qsort(idx, n, sizeof *idx, cmp_ti_offset);
        const sqz__gguf_tinfo *prev = NULL;
        for (size_t i = 0; i < n && s == SQZ_OK; i++) {
            const sqz__gguf_tinfo *b = idx[i];
            if (b->nbytes == 0) continue;
            if (prev && prev->offset + prev->nbytes > b->offset) {
                s = SQZ_ERROR(SQZ_ERR_FORMAT, "%s: tensors '%.*s' [%" PRIu64 ", %" PRIu64 ") and '%.*s' [%" PRIu64
                              ", %" PRIu64 ") overlap", g->path, (int)prev->name_len, prev->name, prev->offset,
                              prev->offset + prev->nbytes, (int)b->name_len, b->name, b->offset, b->offset + b->nbytes);
            }
            prev = b;
        }
    }
    free(idx);
    return s;
}

static sqz_status parse_all(parse_ctx *c, sqz__gguf *g) {
    uint64_t n_tensors = 0, n_kv = 0;
    SQZ_TRY(parse_header(c, g, &n_tensors, &n_kv));
    SQZ_TRY(parse_kv(c, g, n_kv));
    SQZ_TRY(parse_alignment(c, g));
    /* name length (8) + at least 1 byte + n_dims (4) + one dimension (8) + type (4) + offset (8) */
    SQZ_RETURN_IF(n_tensors * 33 > sqz__reader_left(&c->r), SQZ_ERR_FORMAT,
                  "%s: %" PRIu64 " tensor infos cannot fit in the %zu bytes left in the file", c->path, n_tensors,
                  sqz__reader_left(&c->r));
    if (n_tensors > 0) {
        g->ti = sqz__calloc((size_t)n_tensors, sizeof *g->ti);
        if (!g->ti) return SQZ_ERR_NOMEM;
    }
    for (uint64_t i = 0; i < n_tensors; i++) {
        SQZ_TRY(parse_tensor_info(c, &g->ti[i], i));
        g->n_tensors = (int64_t)i + 1;
    }
    size_t pos = c->r.pos, a = g->alignment;
    g->data_start = pos + (a - pos % a) % a; /* pos <= size and a <= 2^30: no overflow */
    return check_tensor_ranges(g);
}

sqz_status sqz__gguf_parse(const char *path, const uint8_t *data, size_t size, sqz__gguf *g) {
    *g = (sqz__gguf){.path = path, .data = data, .size = size, .alignment = SQZ__GGUF_DEFAULT_ALIGNMENT};
    parse_ctx c = {.path = path, .what = "header"};
    sqz__reader_init(&c.r, data, size);
    sqz_status s = parse_all(&c, g);
    if (s != SQZ_OK) sqz__gguf_free(g);
    return s;
}

void sqz__gguf_free(sqz__gguf *g) {
    if (!g) return;
    free(g->kv);
    free(g->kv_sorted);
    free(g->ti);
    g->kv = NULL;
    g->kv_sorted = NULL;
    g->ti = NULL;
    g->n_kv = g->n_tensors = 0;
}

/* ---- typed getters: values were checked by the parse, read them in place ---- */

static int64_t read_int_at(const uint8_t *p, uint32_t type, bool *ok) {
    *ok = true;
    switch (type) {
    case SQZ__GGUF_UINT8: return p[0];
    case SQZ__GGUF_INT8: return (int8_t)p[0];
    case SQZ__GGUF_UINT16: return sqz__rd_u16(p);
    case SQZ__GGUF_INT16: return (int16_t)sqz__rd_u16(p);
    case SQZ__GGUF_UINT32: return sqz__rd_u32(p);
    case SQZ__GGUF_INT32: return (int32_t)sqz__rd_u32(p);
    case SQZ__GGUF_INT64: return (int64_t)sqz__rd_u64(p);
    case SQZ__GGUF_UINT64: {
        uint64_t v = sqz__rd_u64(p);
        if (v > (uint64_t)INT64_MAX) *ok = false;
        return (int64_t)(v & (uint64_t)INT64_MAX);
    }
    default: *ok = false; return 0;
    }
}

static double read_float_at(const uint8_t *p, uint32_t type) {
    if (type == SQZ__GGUF_FLOAT32) return sqz__rd_f32(p);
    uint64_t u = sqz__rd_u64(p);
    double d;
    memcpy(&d, &u, sizeof d);
    return d;
}

static sqz_status wrong_type(const sqz__gguf *g, const sqz__gguf_kv *kv, const char *want) {
    return SQZ_ERROR(SQZ_ERR_FORMAT, "%s: metadata '%.*s' is %s%s%s, expected %s", g->path, (int)kv->key_len, kv->key,
                     sqz__gguf_type_name(kv->type), kv->type == SQZ__GGUF_ARRAY ? " of " : "",
                     kv->type == SQZ__GGUF_ARRAY ? sqz__gguf_type_name(kv->arr_type) : "", want);
}

sqz_status sqz__gguf_get_int(const sqz__gguf *g, const char *key, bool *found, int64_t *out) {
    const sqz__gguf_kv *kv = sqz__gguf_find(g, key);
    *found = kv != NULL;
    if (!kv) return SQZ_OK;
    if (!is_int_type(kv->type)) return wrong_type(g, kv, "an integer");
    bool ok;
    *out = read_int_at(g->data + kv->pos, kv->type, &ok);
    SQZ_RETURN_IF(!ok, SQZ_ERR_FORMAT, "%s: metadata '%s' is out of range", g->path, key);
    return SQZ_OK;
}

sqz_status sqz__gguf_get_float(const sqz__gguf *g, const char *key, bool *found, double *out) {
    const sqz__gguf_kv *kv = sqz__gguf_find(g, key);
    *found = kv != NULL;
    if (!kv) return SQZ_OK;
    if (kv->type != SQZ__GGUF_FLOAT32 && kv->type != SQZ__GGUF_FLOAT64) return wrong_type(g, kv, "a float");
    *out = read_float_at(g->data + kv->pos, kv->type);
    return SQZ_OK;
}

sqz_status sqz__gguf_get_bool(const sqz__gguf *g, const char *key, bool *found, bool *out) {
    const sqz__gguf_kv *kv = sqz__gguf_find(g, key);
    *found = kv != NULL;
    if (!kv) return SQZ_OK;
    if (kv->type != SQZ__GGUF_BOOL) return wrong_type(g, kv, "a bool");
    *out = g->data[kv->pos] != 0;
    return SQZ_OK;
}

sqz_status sqz__gguf_get_str(const sqz__gguf *g, const char *key, bool *found, char **out) {
    const sqz__gguf_kv *kv = sqz__gguf_find(g, key);
    *found = kv != NULL;
    *out = NULL;
    if (!kv) return SQZ_OK;
    if (kv->type != SQZ__GGUF_STRING) return wrong_type(g, kv, "a string");
    size_t len = (size_t)sqz__rd_u64(g->data + kv->pos);
    const char *s = (const char *)g->data + kv->pos + 8;
    SQZ_RETURN_IF(memchr(s, 0, len) || !sqz__utf8_valid(s, len), SQZ_ERR_FORMAT,
                  "%s: metadata '%s' is not valid UTF-8 text", g->path, key);
    *out = sqz__strndup(s, len);
    return *out ? SQZ_OK : SQZ_ERR_NOMEM;
}

sqz_status sqz__gguf_arr_int(const sqz__gguf *g, const sqz__gguf_kv *kv, uint64_t i, int64_t *out) {
    if (kv->type != SQZ__GGUF_ARRAY || !is_int_type(kv->arr_type)) return wrong_type(g, kv, "an integer array");
    SQZ_RETURN_IF(i >= kv->n, SQZ_ERR_INVALID_ARG, "%s: metadata '%.*s': index %" PRIu64 " beyond %" PRIu64
                  " elements", g->path, (int)kv->key_len, kv->key, i, kv->n);
    bool ok;
    *out = read_int_at(g->data + kv->pos + i * scalar_size[kv->arr_type], kv->arr_type, &ok);
    SQZ_RETURN_IF(!ok, SQZ_ERR_FORMAT, "%s: metadata '%.*s'[%" PRIu64 "] is out of range", g->path,
                  (int)kv->key_len, kv->key, i);
    return SQZ_OK;
}

double sqz__gguf_arr_float(const sqz__gguf *g, const sqz__gguf_kv *kv, uint64_t i) {
    return read_float_at(g->data + kv->pos + i * scalar_size[kv->arr_type], kv->arr_type);
}

void sqz__gguf_str_iter_init(const sqz__gguf *g, const sqz__gguf_kv *kv, sqz__gguf_str_iter *it) {
    sqz__reader_init(&it->r, g->data, g->size);
    it->r.pos = kv->pos;
}

const char *sqz__gguf_str_next(sqz__gguf_str_iter *it, size_t *len) {
    uint64_t n = sqz__reader_u64(&it->r);
    if (!it->r.ok || n > sqz__reader_left(&it->r)) return NULL;
    *len = (size_t)n;
    return (const char *)sqz__reader_bytes(&it->r, (size_t)n);
}

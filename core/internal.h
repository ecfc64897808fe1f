/*
 * core/internal.h - helpers every module of libsqz uses internally (not public).
 *
 * Error recording: SQZ_RETURN_IF(cond, status, fmt, ...) records a formatted message
 * with the source location and returns the status; SQZ_TRY(expr) forwards a failing
 * status unchanged (zstd's RETURN_ERROR_IF / FORWARD_IF_ERROR).
 * Untrusted bytes are read with the explicit little-endian helpers below, never by
 * casting to a struct; every size computation uses the overflow-checked helpers.
 */
#ifndef SQZ_CORE_INTERNAL_H
#define SQZ_CORE_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "core/prof.h"
#include "sqz/dtype.h"
#include "sqz/status.h"

#if defined(__GNUC__) || defined(__clang__)
#define SQZ__PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define SQZ__PRINTF(a, b)
#endif

/* Records status + message for this thread and returns status. */
sqz_status sqz__error(sqz_status s, const char *file, int line, const char *fmt, ...) SQZ__PRINTF(4, 5);
/* Prepends "prefix: " to the thread's current message (adds context on the way up). */
void sqz__error_prefix(const char *fmt, ...) SQZ__PRINTF(1, 2);

/* core/fp8.c: W8A8-FP8's activations (SQZ_ACT_GRID_FP8) in place, m rows of k, each value
 * fp8(clamp(x / s, -448, 448)) * s as compressed-tensors' fake quantization computes it:
 *   - scale 0 (dynamic, per token): per row s = absmax / 448 (0 where s is 0; a row holding a NaN or an
 *     infinity becomes NaN);
 *   - scale > 0 (static, per tensor: the file's input_scale): s = scale for every value; a NaN stays NaN,
 *     an infinity saturates to +-448 s, as torch's clamp. */
void sqz__fp8_act_rows(float *x, int64_t m, int64_t k, float scale);
/* E2M1 (FP4: bit 3 the sign, bits 0-2 index 0, 0.5, 1, 1.5, 2, 3, 4, 6): the value of a code, and the
 * code of x rounded to the nearest value, ties to even (compressed-tensors' cast_to_fp4 on x clamped to
 * +-6; a negative x that rounds to 0 keeps its sign bit, -0.0 does not). */
float sqz__e2m1_value(int code);
uint8_t sqz__e2m1_rne(float x);

#define SQZ_ERROR(status, ...) sqz__error((status), __FILE__, __LINE__, __VA_ARGS__)

#define SQZ_RETURN_IF(cond, status, ...)                                           \
    do {                                                                           \
        if (cond) return sqz__error((status), __FILE__, __LINE__, __VA_ARGS__);    \
    } while (0)

#define SQZ_TRY(expr)                                                              \
    do {                                                                           \
        sqz_status sqz__s = (expr);                                                \
        if (sqz__s != SQZ_OK) return sqz__s;                                       \
    } while (0)

/* Allocation that records SQZ_ERR_NOMEM on failure. */
void *sqz__malloc(size_t n);
void *sqz__calloc(size_t count, size_t size);
void *sqz__realloc(void *p, size_t n);
char *sqz__strdup(const char *s);
char *sqz__strndup(const char *s, size_t n);
/* malloc'd printf. NULL on failure (error set). */
char *sqz__asprintf(const char *fmt, ...) SQZ__PRINTF(1, 2);

/* Overflow-checked arithmetic: return false on overflow. */
static inline bool sqz__mul_size(size_t a, size_t b, size_t *out) { return !__builtin_mul_overflow(a, b, out); }
static inline bool sqz__add_size(size_t a, size_t b, size_t *out) { return !__builtin_add_overflow(a, b, out); }
static inline bool sqz__mul_i64(int64_t a, int64_t b, int64_t *out) { return !__builtin_mul_overflow(a, b, out); }

/* Little-endian loads and stores (unaligned safe). */
static inline uint16_t sqz__rd_u16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }
static inline uint32_t sqz__rd_u32(const uint8_t *p) {
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}
static inline uint64_t sqz__rd_u64(const uint8_t *p) {
    return (uint64_t)sqz__rd_u32(p) | ((uint64_t)sqz__rd_u32(p + 4) << 32);
}
static inline float sqz__rd_f32(const uint8_t *p) {
    uint32_t u = sqz__rd_u32(p);
    float f;
    memcpy(&f, &u, 4);
    return f;
}
static inline void sqz__wr_u16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); }
static inline void sqz__wr_u32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static inline void sqz__wr_u64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}

/* A bounds-checked little-endian reader over untrusted bytes. Every read checks the
 * bytes left; the first failure is sticky (ok = false) so a parser can read a
 * whole record and check once. */
typedef struct sqz__reader {
    const uint8_t *p;
    size_t size;
    size_t pos;
    bool ok;
} sqz__reader;

static inline void sqz__reader_init(sqz__reader *r, const void *p, size_t size) {
    r->p = (const uint8_t *)p; r->size = size; r->pos = 0; r->ok = true;
}
static inline size_t sqz__reader_left(const sqz__reader *r) { return r->size - r->pos; }
static inline bool sqz__reader_need(sqz__reader *r, size_t n) {
    if (!r->ok || n > r->size - r->pos) { r->ok = false; return false; }
    return true;
}
static inline uint8_t sqz__reader_u8(sqz__reader *r) {
    if (!sqz__reader_need(r, 1)) return 0;
    return r->p[r->pos++];
}
static inline uint32_t sqz__reader_u32(sqz__reader *r) {
    if (!sqz__reader_need(r, 4)) return 0;
    uint32_t v = sqz__rd_u32(r->p + r->pos); r->pos += 4; return v;
}
static inline uint64_t sqz__reader_u64(sqz__reader *r) {
    if (!sqz__reader_need(r, 8)) return 0;
    uint64_t v = sqz__rd_u64(r->p + r->pos); r->pos += 8; return v;
}
static inline float sqz__reader_f32(sqz__reader *r) {
    if (!sqz__reader_need(r, 4)) return 0;
    float v = sqz__rd_f32(r->p + r->pos); r->pos += 4; return v;
}
/* Returns a pointer to the next n bytes and advances, or NULL (ok = false). */
static inline const uint8_t *sqz__reader_bytes(sqz__reader *r, size_t n) {
    if (!sqz__reader_need(r, n)) return NULL;
    const uint8_t *q = r->p + r->pos; r->pos += n; return q;
}
/* Copies the next n bytes into dst and advances, or returns false (ok = false). */
static inline bool sqz__reader_copy(sqz__reader *r, void *dst, size_t n) {
    const uint8_t *q = sqz__reader_bytes(r, n);
    if (q && n) memcpy(dst, q, n);
    return q != NULL;
}

/* True if s[0..n) is valid UTF-8 (no overlongs, no surrogates, <= U+10FFFF). */
bool sqz__utf8_valid(const char *s, size_t n);

/* The final path component (pointer into path). */
const char *sqz__basename(const char *path);
/* dir + "/" + name, malloc'd. */
char *sqz__path_join(const char *dir, const char *name);
/* The directory part of path, malloc'd ("." if none). */
char *sqz__dirname(const char *path);
/* True if path names an existing directory / regular file. */
bool sqz__is_dir(const char *path);
bool sqz__is_file(const char *path);
/* "FIFO", "character device", "socket", "directory", ... for a st_mode (messages). */
const char *sqz__file_kind(unsigned mode);
/* Opens a file for reading without ever blocking on it: O_NONBLOCK, fstat, then refuses
 * anything but a regular file ("PATH: a FIFO, not a regular file"), then clears O_NONBLOCK.
 * *size gets the file's size. Errors: SQZ_ERR_IO naming the file. */
sqz_status sqz__open_regular(const char *path, int *fd, uint64_t *size);
/* Whether this process opened the file (device, inode) as an input (sqz__open_regular):
 * outputs are never put in the place of one. */
bool sqz__is_input(uint64_t dev, uint64_t ino);
/* SQZ_OK, or SQZ_ERR_IO naming the first input (sqz__open_regular) whose size or modification
 * time differs from when this process first opened it: another process changed it during the
 * run ("PATH: changed or truncated while being read"). An input removed, or replaced by
 * another file (a rename), is not a change of what was read. */
sqz_status sqz__inputs_check(void);
/* The path of the live mapping (sqz_map) that holds addr, or NULL. Async-signal-safe: the
 * SIGBUS handler of sqz_io_cleanup_on_signals names the file truncated under a mapping. */
const char *sqz__mapping_at(const void *addr);
/* Drops this process's copies of the whole pages of [addr, addr + n) when that range lies in one
 * live read-only mapping (sqz_map): they no longer count in its resident memory, and a later
 * read faults them in again from the file, unchanged. False (nothing done) for memory that is
 * not a mapping's (heap data must never be dropped). */
bool sqz__mapping_release(const void *addr, size_t n);
/* A writable mapping of `size` bytes backed by an unlinked scratch file in $TMPDIR (or /tmp), its
 * blocks reserved first (posix_fallocate: no SIGBUS for a full disk later), registered as the
 * read-only mappings are, so that sqz__mapping_release drops its pages from this process while the
 * file keeps them: data a reader must assemble (an HF mixture's stacked experts) without holding it
 * all in memory. Freed by sqz_unmap (or with the model that keeps it). Writes go through a cast of
 * ->data. */
struct sqz_mapping;
sqz_status sqz__map_spill(size_t size, struct sqz_mapping **out);
/* sqz_outfile_open for a scratch file a step reads back at once (auto's trial logits): its
 * commit puts it in place even while a program defers its commits (sqz_io_defer_begin). */
struct sqz_outfile;
sqz_status sqz__outfile_open_scratch(const char *path, struct sqz_outfile **out);

/* A growable byte buffer (core/bytebuf.c), zero-initialised to start: appends are no-ops after
 * the first allocation failure, which sets oom; the caller frees p. */
typedef struct sqz__bytebuf {
    uint8_t *p;
    size_t n, cap;
    bool oom;
} sqz__bytebuf;
void sqz__bytebuf_put(sqz__bytebuf *b, const void *src, size_t n);
void sqz__bytebuf_put_u32(sqz__bytebuf *b, uint32_t v);
void sqz__bytebuf_put_u64(sqz__bytebuf *b, uint64_t v);
void sqz__bytebuf_put_f32(sqz__bytebuf *b, float f);
/* Appends the printf text (without its NUL; a NUL follows it in p, outside n). */
void sqz__bytebuf_printf(sqz__bytebuf *b, const char *fmt, ...) SQZ__PRINTF(2, 3);
/* p as a C string: a NUL after the n bytes (not counted in n); NULL after an allocation failure. */
char *sqz__bytebuf_str(sqz__bytebuf *b);

/* The dtype table without the quantizers (core/dtype.c): the rows of sqz_dtype_info with
 * from_f32 set for the float types only (F32, F16, BF16, F64). Core reads this one (the layouts
 * and to_f32); quant/gguf/dtype_ref.c completes it with the GGUF block quantizers into the public
 * table. NULL if t is out of range. Static storage. */
const sqz_dtype_traits *sqz__dtype_core(sqz_dtype t);

/* The norm roles of a decoder whose weight scales an RMSNorm (the ones Gemma's HF files store as w - 1). */
bool sqz__is_rms_norm_role(int role);

/* What m computes beyond llama's plain block (the writers of graphs and bundles build that block only):
 * a short description of the first such part (q/k norms, scaled rotary frequencies, ...), or NULL. */
struct sqz_model;
const char *sqz__model_beyond_llama(const struct sqz_model *m);

/* A copy of qp and its arrays in one heap block (one free() frees it all; callers hand it to the
 * model's store), for rows keep[0..n) of qp (keep NULL: all qp->n_out rows, n unused); column data
 * (in_scale, g_idx) is copied whole. NULL when out of memory. core/qparams.c */
struct sqz_qparams;
struct sqz_qparams *sqz__qparams_clone(const struct sqz_qparams *qp, const int64_t *keep, int64_t n);

#endif

/* formats/detect.c - the format table (one row per format: its name, sniffer, reader, writer, check and
 * the columns the writers and the CLI ask instead of naming formats), format detection by content, and
 * the public open entry point. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "formats/bundle_internal.h"
#include "formats/gguf_internal.h"

static bool looks_gguf(const uint8_t *p, size_t n, uint64_t size) { (void)size; return sqz__looks_gguf(p, n); }
static bool looks_bundle(const uint8_t *p, size_t n, uint64_t size) { (void)size; return sqz__looks_bundle(p, n); }
static sqz_status open_st(const char *path, const sqz_open_opts *o, sqz_model *m) { (void)o; return sqz__st_open(path, m); }
static sqz_status open_gguf(const char *path, const sqz_open_opts *o, sqz_model *m) {
    (void)o;
    return sqz__gguf_open(path, m);
}
static sqz_status open_llama2c(const char *path, const sqz_open_opts *o, sqz_model *m) {
    return sqz__llama2c_open(path, o ? o->tokenizer_path : NULL, m);
}
static sqz_status open_onnx(const char *path, const sqz_open_opts *o, sqz_model *m) {
    (void)o;
    return sqz__onnx_open(path, m);
}
static bool has_file(const char *dir, const char *name) {
    char *p = sqz__path_join(dir, name);
    bool has = p && sqz__is_file(p);
    free(p);
    return has;
}
/* an HF checkpoint: config.json (its reader says which weight files are missing) */
static bool looks_st_dir(const char *dir) { return has_file(dir, "config.json"); }
/* sqz's ONNX export: model.onnx, unless safetensors weights are there too (an HF directory that carries an
 * ONNX copy is read as the HF checkpoint) */
static bool looks_onnx_dir(const char *dir) {
    return has_file(dir, "model.onnx") && !has_file(dir, "model.safetensors") &&
           !has_file(dir, "model.safetensors.index.json");
}
static sqz_status open_bundle(const char *path, const sqz_open_opts *o, sqz_model *m) {
    (void)o;
    return sqz__bundle_open(path, m);
}

static bool st_has_dtype(sqz_dtype d) { return sqz_dtype_info(d)->st_name != NULL; }
static bool gguf_has_dtype(sqz_dtype d) { return sqz_dtype_info(d)->gguf_type >= 0; }
/* HF keeps q/k in rotate_half order */
static sqz_rope_layout rope_hf(const sqz_model *m) {
    (void)m;
    return SQZ_ROPE_HALF;
}
/* GGUF: the architecture row's order (llama.cpp: "llama" uses LLAMA_ROPE_TYPE_NORM, interleaved, q/k
 * permuted by convert_hf_to_gguf.py; qwen2, qwen3, gemma3, phi3 use NEOX, HF's order) */
static sqz_rope_layout rope_gguf(const sqz_model *m) {
    const sqz__gguf_arch *a = sqz__gguf_arch_for_model(m);
    return a && a->rope != SQZ_ROPE_NONE ? a->rope : SQZ_ROPE_INTERLEAVED;
}

/* Sniffing order: the rows with a magic first, ONNX's first protobuf bytes, llama2.c's plausible header last. */
static const sqz__format_row format_table[] = {
    [SQZ_FORMAT_GGUF] = {.info = {.name = "gguf", .block_types = true},
                         .looks = looks_gguf, .open = open_gguf, .save = sqz__gguf_save, .check = sqz__tensors_check,
                         .has_dtype = gguf_has_dtype, .rope = rope_gguf},
    [SQZ_FORMAT_BUNDLE] = {.info = {.name = "bundle", .block_types = true, .bundle_opts = true},
                           .looks = looks_bundle, .open = open_bundle, .save = sqz__bundle_save,
                           .check = sqz__bundle_check},
    [SQZ_FORMAT_SAFETENSORS] = {.info = {.name = "safetensors", .hf_layouts = true, .one_layer_shape = true},
                                .looks = sqz__looks_safetensors, .looks_dir = looks_st_dir, .open = open_st, .save = sqz__st_save,
                                .check = sqz__tensors_check, .dtype_every_tensor = true, .has_dtype = st_has_dtype,
                                .rope = rope_hf},
    [SQZ_FORMAT_LLAMA2C] = {.info = {.name = "llama2c"}, .looks = sqz__looks_llama2c, .open = open_llama2c},
    /* formats/onnx_write.c; read back: formats/onnx_read.c (the directories sqz writes, config.json in them) */
    [SQZ_FORMAT_ONNX] = {.info = {.name = "onnx", .block_types = true, .onnx_opts = true},
                         .looks = sqz__looks_onnx, .looks_dir = looks_onnx_dir, .open = open_onnx,
                         .save = sqz__onnx_save, .check = sqz__onnx_check},
};
static const sqz_format sniff_order[] = {SQZ_FORMAT_GGUF, SQZ_FORMAT_BUNDLE, SQZ_FORMAT_SAFETENSORS,
                                         SQZ_FORMAT_ONNX, SQZ_FORMAT_LLAMA2C};
/* Directories: an ONNX export before an HF checkpoint (both have config.json). */
static const sqz_format dir_order[] = {SQZ_FORMAT_ONNX, SQZ_FORMAT_SAFETENSORS};
#define N_FORMATS ((int)(sizeof format_table / sizeof format_table[0]))

const sqz__format_row *sqz__format_get(sqz_format f) {
    return (int)f > 0 && (int)f < N_FORMATS && format_table[f].info.name ? &format_table[f] : NULL;
}

const sqz_format_traits *sqz_format_info(sqz_format f) {
    static const sqz_format_traits unknown = {.name = "unknown"};
    const sqz__format_row *r = sqz__format_get(f);
    return r ? &r->info : &unknown;
}

const char *sqz_format_name(sqz_format f) { return sqz_format_info(f)->name; }

sqz_status sqz__format_save(const sqz_model *m, const char *path, const sqz_save_opts *o) {
    const sqz__format_row *r = sqz__format_get(o->format);
    SQZ_RETURN_IF(!r || !r->save, SQZ_ERR_UNSUPPORTED, "%s: sqz cannot write the %s format", path,
                  sqz_format_name(o->format));
    return r->save(m, path, o);
}

bool sqz__looks_gguf(const uint8_t *p, size_t n) { return n >= 4 && memcmp(p, "GGUF", 4) == 0; }

/* safetensors: u64 header length N, then N bytes of JSON starting with '{'. */
bool sqz__looks_safetensors(const uint8_t *p, size_t n, uint64_t file_size) {
    if (n < 9) return false;
    uint64_t hl = sqz__rd_u64(p);
    if (hl < 2 || hl > file_size - 8) return false;
    size_t i = 8;
    while (i < n && (p[i] == ' ' || p[i] == '\n' || p[i] == '\r' || p[i] == '\t')) i++;
    return i < n && p[i] == '{';
}

/* llama2.c legacy: seven int32 (dim, hidden, layers, heads, kv_heads, vocab, seq) with
 * plausible values, then float32 weights whose count the header predicts. */
bool sqz__looks_llama2c(const uint8_t *p, size_t n, uint64_t file_size) {
    if (n < 28) return false;
    int32_t h[7];
    for (int i = 0; i < 7; i++) h[i] = (int32_t)sqz__rd_u32(p + 4 * i);
    if (h[0] <= 0 || h[1] <= 0 || h[2] <= 0 || h[3] <= 0 || h[4] <= 0 || h[6] <= 0 || h[5] == 0) return false;
    if (h[0] > (1 << 20) || h[1] > (1 << 22) || h[2] > 4096 || h[3] > 4096 || h[4] > h[3]) return false;
    /* The size is not checked here: a file one byte short is a truncated llama2.c checkpoint,
     * which the reader says (the header predicts N bytes), not "not a checkpoint". */
    (void)file_size;
    if (h[0] % h[3] != 0) return false;
    return true;
}

static sqz_status sniff_file(const char *path, sqz_format *out) {
    int fd;
    uint64_t size;
    SQZ_TRY(sqz__open_regular(path, &fd, &size)); /* never blocks on a FIFO */
    uint8_t head[64] = {0};
    ssize_t got;
    do got = read(fd, head, sizeof head);
    while (got < 0 && errno == EINTR);
    const int e = errno;
    close(fd);
    SQZ_RETURN_IF(got < 0, SQZ_ERR_IO, "%s: cannot read: %s", path, strerror(e));
    size_t n = (size_t)got;
    SQZ_RETURN_IF(n == 0, SQZ_ERR_FORMAT, "%s: empty file", path);
    for (size_t i = 0; i < sizeof sniff_order / sizeof sniff_order[0]; i++) {
        if (format_table[sniff_order[i]].looks(head, n, size)) {
            *out = sniff_order[i];
            return SQZ_OK;
        }
    }
    return SQZ_ERROR(SQZ_ERR_FORMAT, "%s: not a GGUF, safetensors, sqz bundle, ONNX or llama2.c checkpoint (first bytes "
                     "%02x %02x %02x %02x)", path, head[0], head[1], head[2], head[3]);
}

sqz_status sqz_detect_format(const char *path, sqz_format *out) {
    *out = SQZ_FORMAT_UNKNOWN;
    if (sqz__is_dir(path)) {
        for (size_t i = 0; i < sizeof dir_order / sizeof dir_order[0]; i++) {
            if (format_table[dir_order[i]].looks_dir(path)) {
                *out = dir_order[i];
                return SQZ_OK;
            }
        }
        return SQZ_ERROR(SQZ_ERR_FORMAT, "%s: a directory without config.json is not an HF checkpoint, and one without "
                         "model.onnx not an ONNX export", path);
    }
    return sniff_file(path, out);
}

sqz_status sqz_model_open(const char *path, const sqz_open_opts *opts, sqz_model **out) {
    *out = NULL;
    sqz_format fmt;
    SQZ_TRY(sqz_detect_format(path, &fmt));
    sqz_model *m = sqz_model_new();
    if (!m) return SQZ_ERR_NOMEM;
    m->source_path = sqz__strdup(path);
    m->source_format = fmt;
    sqz_status s = m->source_path ? SQZ_OK : SQZ_ERR_NOMEM;
    if (s == SQZ_OK) {
        const sqz__format_row *r = sqz__format_get(fmt);
        s = r ? r->open(path, opts, m) : SQZ_ERROR(SQZ_ERR_FORMAT, "%s: unknown format", path);
    }
    if (s == SQZ_OK) s = sqz_model_validate(m);
    if (s != SQZ_OK) {
        sqz_model_free(m);
        return s;
    }
    *out = m;
    return SQZ_OK;
}

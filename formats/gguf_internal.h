/*
 * formats/gguf_internal.h - what the GGUF reader (gguf_read.c), its container parser
 * (gguf_kv.c), the writer (gguf_write.c) and the name tables (gguf_names.c) share.
 *
 * The GGUF container (ggml's docs/gguf.md), all little-endian:
 *   u32 magic "GGUF", u32 version (2 or 3; v1 had 32-bit counts and is refused),
 *   u64 n_tensors, u64 n_kv,
 *   n_kv x { string key, u32 value type, value },
 *   n_tensors x { string name, u32 n_dims, u64 ne[n_dims] (innermost first), u32 ggml type, u64 offset },
 *   padding to general.alignment (default 32), then the data section; each tensor's offset
 *   is relative to the start of the data section and a multiple of the alignment.
 * A string is u64 length + bytes (no NUL); an array is u32 element type + u64 count + elements.
 */
#ifndef SQZ_GGUF_INTERNAL_H
#define SQZ_GGUF_INTERNAL_H

#include "formats/formats_internal.h"

#define SQZ__GGUF_MAGIC "GGUF"
#define SQZ__GGUF_VERSION 3
#define SQZ__GGUF_DEFAULT_ALIGNMENT 32
#define SQZ__GGUF_MAX_NAME 64     /* tensor name bytes (GGUF spec: at most 64) */
#define SQZ__GGUF_MAX_DEPTH 4     /* nesting of arrays inside arrays */

/* Metadata value types (gguf_type in ggml's gguf.h). */
typedef enum sqz__gguf_type {
    SQZ__GGUF_UINT8 = 0,
    SQZ__GGUF_INT8 = 1,
    SQZ__GGUF_UINT16 = 2,
    SQZ__GGUF_INT16 = 3,
    SQZ__GGUF_UINT32 = 4,
    SQZ__GGUF_INT32 = 5,
    SQZ__GGUF_FLOAT32 = 6,
    SQZ__GGUF_BOOL = 7,
    SQZ__GGUF_STRING = 8,
    SQZ__GGUF_ARRAY = 9,
    SQZ__GGUF_UINT64 = 10,
    SQZ__GGUF_INT64 = 11,
    SQZ__GGUF_FLOAT64 = 12,
    SQZ__GGUF_TYPE_COUNT
} sqz__gguf_type;

/* One metadata entry; everything points into the parsed bytes (nothing is copied). */
typedef struct sqz__gguf_kv {
    const char *key;     /* key_len bytes, valid UTF-8, no NUL, not terminated */
    size_t key_len;
    uint32_t type;       /* an sqz__gguf_type */
    uint32_t arr_type;   /* element type when type is ARRAY */
    uint64_t n;          /* element count when type is ARRAY */
    size_t pos;          /* offset of the value; for arrays of the first element */
} sqz__gguf_kv;

/* One tensor info, checked: shape, type, byte range inside the file. */
typedef struct sqz__gguf_tinfo {
    const char *name;    /* name_len bytes, valid UTF-8, no NUL, not terminated */
    size_t name_len;
    uint32_t n_dims;     /* 1..SQZ_MAX_DIMS */
    int64_t ne[SQZ_MAX_DIMS]; /* innermost first, unused entries 1 */
    sqz_dtype dtype;
    uint64_t offset;     /* from the start of the data section */
    size_t nbytes;
} sqz__gguf_tinfo;

/* A parsed GGUF container over caller-owned bytes. */
typedef struct sqz__gguf {
    const char *path;     /* for messages */
    const uint8_t *data;
    size_t size;
    uint32_t version;
    sqz__gguf_kv *kv;
    int64_t n_kv;
    sqz__gguf_kv **kv_sorted; /* by key, for lookups */
    sqz__gguf_tinfo *ti;
    int64_t n_tensors;
    uint32_t alignment;
    size_t data_start;    /* offset of the data section in the file */
} sqz__gguf;

/* ---- the container (gguf_kv.c) ---- */
/* Parses and checks the whole container: header, every metadata value (nested arrays
 * included), tensor infos, alignment, tensor byte ranges (inside the file, aligned, not
 * overlapping), unique keys and names. On error everything is freed and the message
 * names `path`. */
sqz_status sqz__gguf_parse(const char *path, const uint8_t *data, size_t size, sqz__gguf *g);
void sqz__gguf_free(sqz__gguf *g);
/* The entry for key, or NULL. */
const sqz__gguf_kv *sqz__gguf_find(const sqz__gguf *g, const char *key);
/* Name of a value type ("uint32", "array"); "invalid" if out of range. */
const char *sqz__gguf_type_name(uint32_t type);

/* Typed getters. They return SQZ_OK and set *found = false when the key is absent, an
 * error naming the key when it holds the wrong type or an out-of-range value. */
sqz_status sqz__gguf_get_int(const sqz__gguf *g, const char *key, bool *found, int64_t *out);
sqz_status sqz__gguf_get_float(const sqz__gguf *g, const char *key, bool *found, double *out);
sqz_status sqz__gguf_get_bool(const sqz__gguf *g, const char *key, bool *found, bool *out);
/* A malloc'd NUL-terminated copy of a string value (valid UTF-8 and without NUL). */
sqz_status sqz__gguf_get_str(const sqz__gguf *g, const char *key, bool *found, char **out);
/* Element i of an integer array (any integer element type). */
sqz_status sqz__gguf_arr_int(const sqz__gguf *g, const sqz__gguf_kv *kv, uint64_t i, int64_t *out);
/* Element i of a float array (float32/float64). */
double sqz__gguf_arr_float(const sqz__gguf *g, const sqz__gguf_kv *kv, uint64_t i);

/* Walks the strings of a string array in order. */
typedef struct sqz__gguf_str_iter {
    sqz__reader r;
} sqz__gguf_str_iter;
void sqz__gguf_str_iter_init(const sqz__gguf *g, const sqz__gguf_kv *kv, sqz__gguf_str_iter *it);
/* The next string (pointer into the file, *len bytes); NULL past the end. */
const char *sqz__gguf_str_next(sqz__gguf_str_iter *it, size_t *len);

/* ---- names (gguf_names.c) ---- */
/* Parses "blk.N.<role>.weight|bias" or "<role>.weight|bias". False if the name is not one
 * of the role table's GGUF names. */
bool sqz__gguf_parse_tensor_name(const char *name, sqz_role *role, int32_t *layer, sqz_param *param);
/* Writes the GGUF name of (role, layer, param) into buf (cap bytes); false if it does not fit. */
bool sqz__gguf_tensor_name(sqz_role role, int32_t layer, sqz_param param, char *buf, size_t cap);

typedef struct sqz__gguf_arch {
    const char *name;          /* general.architecture */
    sqz_family family;
    sqz_rope_layout rope;      /* order of attn_q/attn_k rows in this architecture's GGUF files */
    sqz_act act;
    const char *per_layer;     /* the architecture a model with per-layer head counts / FFN widths is written as
                                  (llama -> deci, whose llama.cpp loader sizes each layer), NULL: this one */
    bool fused_gate_up;        /* ffn_up holds gate then up (2 x d_ff rows; llama.cpp's phi3), attn_qkv may
                                  hold q, k, v: split on read, ffn_up fused again on write */
    /* ---- mixtures of experts: <arch>.expert_count > 0 ---- */
    sqz_family moe_family;     /* the family such a file is (llama -> mixtral); 0 (llama): none is read */
    const char *expert_ff_key; /* the key of each expert's FFN width (qwen3moe: expert_feed_forward_length);
                                  NULL: feed_forward_length is it (llama's Mixtral layout) */
} sqz__gguf_arch;
/* The architecture row for a general.architecture value; NULL if sqz does not know it. */
const sqz__gguf_arch *sqz__gguf_arch_find(const char *name);
/* The general.architecture a model is written under (llama for llama/mistral/smollm). */
const sqz__gguf_arch *sqz__gguf_arch_for_model(const sqz_model *m);
/* Space-separated list of the known architectures, for messages. */
const char *sqz__gguf_arch_list(void);
/* Name of a ggml type id ("q5_0"), "unknown" if ggml has none. */
const char *sqz__ggml_type_name(uint32_t type);
/* WordPiece tokens: sqz keeps HF's spelling ("word", "##piece"); llama.cpp's BERT GGUFs
 * spell them "\u2581word" and "piece" (convert_hf_to_gguf.py's phantom space), "[CLS]"-style
 * specials unchanged. malloc'd; NULL on out of memory (error set). */
char *sqz__wpm_to_gguf(const char *tok);
char *sqz__wpm_from_gguf(const char *tok, size_t len);
/* Whether the GGUF writer computes `key` (len bytes) itself for a file of architecture `arch`
 * (NULL: none): general.architecture/name/alignment/file_type/quantization_version, the
 * tokenizer keys sqz models, <arch>.*, split.*. Other keys of a GGUF source pass through. */
bool sqz__gguf_key_owned(const char *key, size_t len, const char *arch);
/* llama.cpp's general.file_type (LLAMA_FTYPE) for the dominant matrix dtype; -1 if none. */
int sqz__gguf_file_type(sqz_dtype dominant);

/* ---- byte tokens (gguf_vocab_bytes.c) ---- */
/* The <0xNN> tokens llama.cpp's SentencePiece tokenizer needs and m's vocabulary lacks: marks
 * them in missing[] and returns their number; 0 unless the vocabulary is SPM and its tokens
 * cover the embedding's rows exactly (hp.vocab_size == n_tokens). The writer appends them after
 * the last token (type BYTE, score 0) with zero embedding rows. */
int sqz__gguf_missing_bytes(const sqz_model *m, bool missing[256]);
/* "<0xNN>" for byte, upper-case hex as llama.cpp spells it. */
void sqz__gguf_byte_token_text(int byte, char out[7]);

/* ---- the reader on bytes already in memory (gguf_read.c) ---- */
/* Fills an empty model from a GGUF image: tensor data pointers point into `data`, which
 * must outlive the model. `path` names the file in messages. Does not validate shapes
 * (sqz_model_validate does). Used by sqz__gguf_open and the fuzz harness. */
sqz_status sqz__gguf_read_mem(const char *path, const uint8_t *data, size_t size, sqz_model *m);

#endif

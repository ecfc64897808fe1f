/*
 * edge/sqz_edge.h - the edge runtime: open a .sqzb bundle, check it, say how much memory a
 * context needs, then run a llama-family decoder from one caller-provided arena.
 *
 * C99, libc and libm only; no allocation anywhere in this library. Typical use (edge/main.c):
 *
 *   sqze_bundle b;  char err[256];
 *   if (sqze_bundle_open(&b, data, size, pubkey_or_NULL, err, sizeof err)) { puts(err); return 1; }
 *   size_t need = sqze_model_memory(&b, ctx);        // exact; 0 when the bundle is not runnable
 *   void *arena = malloc(need);                      // the caller's only allocation
 *   sqze_model m;
 *   if (sqze_model_init(&m, &b, ctx, arena, need, err, sizeof err)) ...
 *   int32_t ids[64]; int n = sqze_tokenize(&m, "Once upon", ids, 64, 1);
 *   const float *logits = sqze_forward(&m, ids[0], 0);  ...
 *
 * Every function that can fail writes one line (no trailing newline) into err and returns
 * nonzero. The bundle's bytes must stay valid and unchanged while a model uses them.
 */
#ifndef SQZ_EDGE_H
#define SQZ_EDGE_H

#include <stddef.h>
#include <stdint.h>

#include "edge/bundle_format.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- the bundle (edge/bundle.c) ---- */

typedef struct sqze_section {
    uint32_t index;          /* position in the table */
    uint32_t kind, flags;    /* sqzb_kind, SQZB_S_* */
    uint64_t offset, stored, size;
    uint32_t crc, dtype;
    int32_t layer;
    uint32_t role, param, ndim;
    uint64_t shape[2];
    const uint8_t *digest;   /* SQZB_DIGEST_SIZE bytes, in the table */
    const uint8_t *data;     /* `stored` bytes, in the bundle */
} sqze_section;

typedef struct sqze_bundle {
    const uint8_t *data;     /* the whole file */
    size_t size;
    uint32_t major, minor, flags;
    uint32_t n_sections, entry_size;
    const uint8_t *table;    /* n_sections * entry_size bytes */
    const uint8_t *sig;      /* SQZB_SIG_SIZE bytes, or NULL when unsigned */
    int verified;            /* 1 when the signature and every digest were checked against a key */
} sqze_bundle;

/* Checks the header, the table (CRCs, bounds, order, no overlap, known versions and required
 * kinds) and the CRC-32 of every section; with pubkey (32 bytes) also the Ed25519 signature
 * and every section's SHA-512 digest (a bundle without a signature is then refused). Reads
 * every byte once; allocates nothing. 0 on success. */
int sqze_bundle_open(sqze_bundle *b, const void *data, size_t size, const uint8_t *pubkey, char *err, size_t cap);
/* Entry i (< n_sections) of an opened bundle. */
void sqze_bundle_section(const sqze_bundle *b, uint32_t i, sqze_section *s);
/* The first section of a kind, or -1. */
int64_t sqze_bundle_find(const sqze_bundle *b, uint32_t kind, sqze_section *s);
/* "section 7 (tensor blk.0.attn_q.weight)" / "section 0 (manifest)" into buf. */
const char *sqze_section_label(const sqze_section *s, char *buf, size_t cap);
/* GGUF-style role names in the order of SQZ_ROLE_MAP ("attn_q"); "?" when out of range. */
const char *sqze_role_name(uint32_t role);

/* ---- hyperparameters and vocabulary (edge/bundle_model.c), read without allocating ---- */

typedef struct sqze_hparams {
    char arch[33];
    uint32_t family, rope_layout, act, flags;
    float norm_eps, rope_theta;
    uint32_t n_layers, d_model, n_heads, n_kv_heads, head_dim, d_ff, vocab_size, ctx_len;
    const uint8_t *layer_dims; /* n_layers x (u32 heads, kv heads, d_ff), in the bundle */
} sqze_hparams;
/* Reads and checks the HPARAMS section (limits, divisibility, per-layer dims). */
int sqze_hparams_read(const sqze_bundle *b, sqze_hparams *hp, char *err, size_t cap);
/* Per-layer dims of layer l. */
void sqze_layer_dims(const sqze_hparams *hp, uint32_t l, uint32_t *heads, uint32_t *kv_heads, uint32_t *d_ff);

typedef struct sqze_vocab_view {
    uint32_t kind, n_tokens, n_merges, flags, max_token_len;
    int32_t bos, eos, unk;
    const uint8_t *scores;  /* n_tokens f32 */
    const uint8_t *types;   /* n_tokens u8 */
    const uint8_t *strings; /* n_tokens then n_merges (u32 length + bytes) */
    size_t strings_size;
    const char *pre;        /* pre-tokenizer name, pre_len bytes (not NUL-terminated) */
    uint32_t pre_len;
} sqze_vocab_view;
/* Reads and checks the VOCAB section (every string inside it, special ids in range). */
int sqze_vocab_read(const sqze_bundle *b, sqze_vocab_view *v, char *err, size_t cap);

/* Bytes of `n` elements of a bundle dtype, 0 for an unknown dtype or a partial block. */
uint64_t sqze_dtype_bytes(uint32_t dtype, uint64_t n);
const char *sqze_dtype_name(uint32_t dtype);
/* q4_0 rows to and from dtype SQZB_DT_Q4_0_X8 (bundle_format.h), rows a multiple of 8, cols of
 * 32: `plain` holds rows x cols/32 blocks of 18 bytes; `x8` the same bytes in 8-row groups. The two
 * buffers do not overlap. (edge/q4x8.c) */
void sqze_q4_0_to_x8(const uint8_t *plain, uint8_t *x8, uint64_t rows, uint64_t cols);
void sqze_q4_0_from_x8(const uint8_t *x8, uint8_t *plain, uint64_t rows, uint64_t cols);

/* ---- the model (edge/model.c, forward.c) ---- */

typedef struct sqze_model sqze_model;

/* Exact bytes of the arena sqze_model_init needs for a context of ctx positions (the KV cache,
 * activations, tokenizer tables, logits, sampling scratch), computed before anything exists.
 * 0 when the bundle cannot run (sqze_model_init then says why) or ctx < 1. */
size_t sqze_model_memory(const sqze_bundle *b, uint32_t ctx);
/* Checks every tensor the model needs (role, dtype, shape, size, not deflated) without an
 * arena: what sqze_model_init would refuse, said before anything is allocated. 0 if runnable. */
int sqze_model_check(const sqze_bundle *b, char *err, size_t cap);
/* Lays the model out in arena (at least sqze_model_memory bytes; nothing else is ever
 * allocated) after checking every tensor's role, dtype, shape and size. */
int sqze_model_init(sqze_model *m, const sqze_bundle *b, uint32_t ctx, void *arena, size_t arena_size, char *err,
                    size_t cap);
/* Runs token at position pos (0 <= pos < ctx; positions before it must have been run) and
 * returns the logits (vocab_size floats, inside the arena, valid until the next call). */
const float *sqze_forward(sqze_model *m, int32_t token, uint32_t pos);

/* How the matrix products take their input vector (sqz's --activations): SQZE_ACTS_Q8 (the
 * default after sqze_model_init; what llama.cpp computes) quantizes it per 32 values to 8-bit
 * codes for q8_0 / q4_0 / q4_1 weights and multiplies in integers, rounds it to fp16 for f16
 * weights; SQZE_ACTS_F32 keeps it in f32 (as `sqz generate --activations f32`). f32 weights and
 * sqz's int8 / int4 schemes take the f32 input either way. */
enum { SQZE_ACTS_F32 = 0, SQZE_ACTS_Q8 = 1 };
void sqze_set_activations(sqze_model *m, int acts);

/* ---- tokenizer (edge/tokenizer.c) ---- */
/* Encodes text (with BOS when the vocabulary wants one and add_bos is set) into ids (at most
 * cap). Returns the number of ids, or -1 when they do not fit in cap or the working space of
 * the context (err says which). */
int64_t sqze_tokenize(sqze_model *m, const char *text, size_t len, int add_bos, int32_t *ids, size_t cap, char *err,
                      size_t errcap);
/* The bytes token `id` adds to a text (at most cap; the length is returned): <0xNN> byte
 * tokens, U+2581 as a space, byte-level BPE's byte map; `first` when no text was written yet
 * (SPM then drops the space its prefix added). Control tokens add nothing. */
size_t sqze_token_text(const sqze_model *m, int first, int32_t id, char *buf, size_t cap);
int sqze_token_is_control(const sqze_model *m, int32_t id);
/* The token spelled exactly s[0..n) (a control token only when no ordinary one is), -1 if none. */
int32_t sqze_token_find(const sqze_model *m, const char *s, size_t n);
int32_t sqze_bos(const sqze_model *m);
int32_t sqze_eos(const sqze_model *m);
uint32_t sqze_vocab_size(const sqze_model *m);

/* ---- sampling (edge/sample.c) ---- */
/* Greedy at temperature <= 0 (ties to the lowest id); else temperature and top-p as sqz's
 * runtime/generate.c, with xorshift64* seeded by *rng. Overwrites logits. */
int32_t sqze_sample(sqze_model *m, float *logits, float temperature, float top_p, uint64_t *rng);

/* The dot-product kernels this build uses: "scalar", "avx2", "avx512", "neon"; and those of
 * the q8 activations: "scalar", "avx2", "avx512vnni", "neon", "neon-dot". */
const char *sqze_kernels(void);
const char *sqze_kernels_q8(void);


#include "edge/model_struct.h"

#ifdef __cplusplus
}
#endif
#endif

/*
 * edge/bundle_format.h - the .sqzb bundle layout, byte by byte (docs/bundle.md is the prose).
 *
 * One header, one section table, then the sections, every one starting at a multiple of
 * SQZB_ALIGN so a tensor can be used where it is mapped. All integers little-endian.
 *
 *   header (SQZB_HEADER_SIZE bytes)
 *     0  u8[8]  magic "SQZB\r\n\x1a\n"
 *     8  u16    major version (SQZB_MAJOR): a reader refuses a major it does not know
 *    10  u16    minor version: additions a reader of a lower minor may ignore
 *    12  u32    flags: SQZB_F_SIGNED; a bit in SQZB_F_UNKNOWN_MASK it does not know is refused
 *    16  u32    n_sections
 *    20  u32    entry_size: bytes per table entry, >= SQZB_ENTRY_SIZE (extra bytes ignored)
 *    24  u64    table_offset (SQZB_HEADER_SIZE in this version)
 *    32  u64    file_size: the whole file
 *    40  u64    sig_offset: SQZB_SIG_SIZE bytes of signature, 0 when unsigned
 *    48  u32    sig_size (SQZB_SIG_SIZE or 0)
 *    52  u32    table_crc: CRC-32 of the n_sections * entry_size table bytes
 *    56  u32    sig_crc: CRC-32 of the signature block (0 when unsigned)
 *    60  u32    header_crc: CRC-32 of bytes 0..59
 *
 *   section table entry (entry_size bytes, SQZB_ENTRY_SIZE in this version)
 *     0  u32    kind (sqzb_kind)
 *     4  u32    flags: SQZB_S_DEFLATE (stored bytes are a zlib stream of `size` bytes),
 *               SQZB_S_REQUIRED (a reader that does not know `kind` must refuse the bundle)
 *     8  u64    offset of the stored bytes (multiple of SQZB_ALIGN)
 *    16  u64    stored size
 *    24  u64    size once inflated (== stored size without SQZB_S_DEFLATE)
 *    32  u32    crc32 of the stored bytes (zlib's CRC-32)
 *    36  u32    dtype (GGML type id: 0 F32, 1 F16, 2 Q4_0, 3 Q4_1, 8 Q8_0), tensors only
 *    40  i32    layer (-1 for global tensors)
 *    44  u16    role (sqz's SQZ_ROLE_MAP order), tensors only
 *    46  u8     param (0 weight, 1 bias)
 *    47  u8     ndim (1 or 2)
 *    48  u64    shape[0] (outermost: rows)
 *    56  u64    shape[1] (elements per row; 1 when ndim == 1)
 *    64  u8[32] digest: the first 32 bytes of SHA-512 of the stored bytes
 *
 *   signature (sig_size bytes at sig_offset, after the last section)
 *     0  u8[64] Ed25519 signature of header bytes 0..55 || section table
 *    64  u8[32] the signer's public key (information only: the loader checks with ITS key)
 *
 * The signature covers the header (but for the two CRCs, which depend on it) and the table; the table holds each section's SHA-512
 * digest, so it covers every byte of every section. CRC-32 catches accidents cheaply at
 * every open; digests are checked when a key is given. Every byte of the file is covered by
 * a check: the padding between the table, the sections and the signature must be zero.
 */
#ifndef SQZB_BUNDLE_FORMAT_H
#define SQZB_BUNDLE_FORMAT_H

#define SQZB_MAGIC "SQZB\r\n\x1a\n"
#define SQZB_MAJOR 1
#define SQZB_MINOR 1 /* 1.1: dtype 64, q4_0 in 8-row groups */
#define SQZB_HEADER_SIZE 64
#define SQZB_ENTRY_SIZE 96
#define SQZB_ALIGN 64
#define SQZB_SIG_SIZE 96
#define SQZB_DIGEST_SIZE 32
#define SQZB_SIGNED_HEADER 56 /* the header bytes the signature covers: all but sig_crc and header_crc */

#define SQZB_F_SIGNED 0x1u
#define SQZB_F_UNKNOWN_MASK 0xFFFFu /* header flags below 2^16 must be understood */
#define SQZB_S_DEFLATE 0x1u
#define SQZB_S_REQUIRED 0x2u

/* Section kinds. Append-only. */
typedef enum sqzb_kind {
    SQZB_KIND_MANIFEST = 1, /* JSON: provenance (source, recipe, accuracy); never needed to run */
    SQZB_KIND_HPARAMS = 2,  /* binary hyperparameters + per-layer dims (below) */
    SQZB_KIND_VOCAB = 3,    /* binary tokenizer (below) */
    SQZB_KIND_TENSOR = 4,   /* one tensor's bytes, dense row-major, in its stored dtype */
} sqzb_kind;

/*
 * HPARAMS section: u32 size of the fixed part (SQZB_HP_FIXED; a larger value: unknown fields
 * follow and are skipped), then
 *     4 u8[32] arch, NUL-padded       36 u32 family (0 llama)     40 u32 rope_layout (1 interleaved, 2 half)
 *    44 u32 act (0 silu)              48 u32 flags (bit 0 tied embeddings, bit 1 attention biases)
 *    52 f32 norm_eps                  56 f32 rope_theta
 *    60 u32 n_layers  64 u32 d_model  68 u32 n_heads  72 u32 n_kv_heads  76 u32 head_dim
 *    80 u32 d_ff      84 u32 vocab_size  88 u32 ctx_len
 * then per layer: u32 n_heads, u32 n_kv_heads, u32 d_ff.
 */
#define SQZB_HP_FIXED 92
#define SQZB_HP_TIED 0x1u
#define SQZB_HP_ATTN_BIAS 0x2u

/*
 * VOCAB section: u32 size of the fixed part (SQZB_VOCAB_FIXED), then
 *     4 u32 kind (1 SPM, 2 BPE)  8 u32 n_tokens  12 i32 bos  16 i32 eos  20 i32 unk
 *    24 u32 flags (SQZB_VOCAB_*)  28 u32 max_token_len
 *    32 u32 n_merges
 * then n_tokens f32 scores, n_tokens u8 types (sqz_token_type), then n_tokens strings,
 * n_merges strings ("left right") and one string naming the pre-tokenizer (GGUF
 * tokenizer.ggml.pre, "" for the default), each u32 length + bytes (no NUL).
 */
#define SQZB_VOCAB_FIXED 36
#define SQZB_VOCAB_ADD_BOS 0x1u
#define SQZB_VOCAB_ADD_EOS 0x2u
#define SQZB_VOCAB_SPACE_PREFIX 0x4u
#define SQZB_VOCAB_SPLIT_WORDS 0x8u /* SPM: each U+2581 starts a word (HF Metaspace split) */
#define SQZB_VOCAB_FUSE_UNK 0x10u   /* SPM: consecutive unknown characters give one <unk> */

/* Tensor dtypes: GGML type ids, and sqz's own schemes from 100 on. */
#define SQZB_DT_F32 0
#define SQZB_DT_F16 1
#define SQZB_DT_Q4_0 2
#define SQZB_DT_Q4_1 3
#define SQZB_DT_Q8_0 8
/* q4_0's blocks (fp16 d, 16 code bytes: element j in the low nibble of byte j, j + 16 in the
 * high one), 8 rows at a time: rows 8g..8g+7 form group g, and for each block column b the group
 * holds 144 bytes: the 8 rows' d (fp16, row order), then 64 bytes of the rows' code bytes 0..7
 * (8 per row, row order), then 64 bytes of their code bytes 8..15. The same bytes as q4_0 in
 * another order (rows a multiple of 8): a product reads one block column of 8 rows at once. */
#define SQZB_DT_Q4_0_X8 64
#define SQZB_DT_I8_ROW 100   /* sqz's int8: w = q * scale[row] (weight-only) */
#define SQZB_DT_U4_GROUP 101 /* sqz's int4: w = scale[row][g] * (code - zero[row][g]), g = col / group */

/*
 * A tensor section of dtype I8_ROW or U4_GROUP (weight matrices (rows, cols) only):
 *     0 u32 scheme (1 I8_ROW, 2 U4_GROUP)   4 u32 group_size (cols for I8_ROW)
 *     8 u32 n_groups (cols / group_size)  12 u32 flags (bit 0: zero points follow)
 *    16..63 zero
 *    64 the codes: rows x cols int8 (I8_ROW), or rows x cols/2 bytes of 4-bit codes, element 2i
 *       in the low nibble of byte i (U4_GROUP)
 *    then, at the next multiple of 4: rows x n_groups f32 scales, then (flag) rows x n_groups
 *       u8 zero points 0..15 (U4_GROUP without them: 8).
 * Layers that quantize their input (W8A8), keep an unfolded smoothing vector, or group
 * columns out of order (act-order g_idx) are not in version 1.
 */
#define SQZB_QHEADER 64
#define SQZB_Q_ZEROS 0x1u

/* Caps that turn absurd counts into errors before anything is sized from them. */
#define SQZB_MAX_SECTIONS (1u << 16)
#define SQZB_MAX_LAYERS 4096u
#define SQZB_MAX_DIM (1u << 24)
#define SQZB_MAX_VOCAB (1u << 22)
#define SQZB_MAX_TOKEN_LEN 4096u
#endif

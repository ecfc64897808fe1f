/*
 * sqz/formats.h - opening checkpoints and writing them.
 *
 * Formats are detected by content (magic bytes, header shape), never by file name
 * alone. A path may be an HF directory (config.json + *.safetensors, sharded with
 * model.safetensors.index.json), a .safetensors file (config.json beside it), a
 * GGUF v3 file, or a llama2.c checkpoint (tokenizer.bin beside it, or given).
 */
#ifndef SQZ_FORMATS_H
#define SQZ_FORMATS_H

#include "sqz/api.h"
#include "sqz/progress.h"
#include "sqz/dtype.h"
#include "sqz/model.h"
#include "sqz/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum sqz_format {
    SQZ_FORMAT_UNKNOWN = 0,
    SQZ_FORMAT_SAFETENSORS = 1, /* HF: safetensors (+ config.json, tokenizer.json) */
    SQZ_FORMAT_GGUF = 2,        /* GGUF v3 */
    SQZ_FORMAT_LLAMA2C = 3,     /* llama2.c legacy .bin (+ tokenizer.bin) */
    SQZ_FORMAT_BUNDLE = 4,      /* sqz's edge bundle .sqzb (docs/bundle.md) */
    SQZ_FORMAT_ONNX = 5,        /* an ONNX decoder directory for onnxruntime(-genai); written only (docs/onnx.md) */
} sqz_format;

/* "safetensors", "gguf", "llama2c", "bundle", "unknown". */
SQZ_API const char *sqz_format_name(sqz_format f);

/* What a format holds and which save options apply to it: the public columns of its row in the
 * format table (formats/detect.c), for callers that pick a target or check their options against it
 * instead of naming formats. */
typedef struct sqz_format_traits {
    const char *name;     /* "gguf", "safetensors", ... (sqz_format_name) */
    bool hf_layouts;      /* an HF directory: sqz's INT8/INT4 scheme-quantized weights (and GGUF Q4_0 / Q8_0 /
                             Q5_0 linear layers of the blocks) are written in an sqz_hf_format layout, q|k|v and
                             gate|up fused where the family's HF files fuse them (sqz_save_opts.hf_format) */
    bool block_types;     /* holds GGUF block-quantized dtypes (q8_0, q4_0, q4_k, ...): a quantized --dtype,
                             the output of a GGUF SPEC */
    bool one_layer_shape; /* states one set of layer dimensions for every block (an HF config.json): a model
                             with per-layer head counts or FFN widths cannot be written */
    bool bundle_opts;     /* sqz_save_opts.sign_key, deflate and provenance_json apply */
    bool onnx_opts;       /* sqz_save_opts.onnx_ops applies */
} sqz_format_traits;

/* The row of f; never NULL: a value without a row gives SQZ_FORMAT_UNKNOWN's ("unknown", nothing
 * applies). Static storage. */
SQZ_API const sqz_format_traits *sqz_format_info(sqz_format f);

/* Looks at the content of `path` (a file, or a directory holding config.json) and
 * says which format it is. SQZ_ERR_FORMAT with a reason if none matches. */
SQZ_API sqz_status sqz_detect_format(const char *path, sqz_format *out);

typedef struct sqz_open_opts {
    const char *tokenizer_path; /* llama2.c tokenizer.bin; NULL: look beside the checkpoint */
} sqz_open_opts;

/* Opens a checkpoint: detects its format, reads its headers, maps its data (nothing
 * is read yet), maps tensor names to roles and checks every shape against the
 * architecture. opts may be NULL. On success *out is owned by the caller
 * (sqz_model_free). On error nothing is allocated and sqz_last_error() names the
 * file, the tensor and the reason. */
SQZ_API sqz_status sqz_model_open(const char *path, const sqz_open_opts *opts, sqz_model **out);

/* Progress of a save: sqz_progress_fn (sqz/progress.h), done and total in bytes of tensor data. */

/* How an HF safetensors directory stores sqz's scheme-quantized weights (sqz/qparams.h: INT8 per
 * row, INT4 per group); docs/formats.md. Weights the chosen layout cannot hold exactly are refused,
 * naming the tensor, never requantized. */
typedef enum sqz_hf_format {
    SQZ_HF_COMPRESSED_TENSORS = 0, /* default: compressed-tensors (llm-compressor's; transformers, vLLM):
                                      INT4 "pack-quantized", INT8 weight-only "pack-quantized" 8-bit,
                                      W8A8 "int-quantized" */
    SQZ_HF_GPTQ = 1,               /* GPTQ, checkpoint_format "gptq" (v1: zero points stored minus 1) */
    SQZ_HF_GPTQ_V2 = 2,            /* GPTQ, checkpoint_format "gptq_v2" (the true zero points) */
    SQZ_HF_SQZ = 3,                /* sqz's own layout (docs/quantization.md), read by sqz only: its
                                      config.json says model_type "sqz-<type>", which transformers refuses */
    SQZ_HF_COMPRESSED_TENSORS_SP24 = 4, /* compressed-tensors with every 2:4-sparse W8A8 weight's int8
                                      values in "sparse-24-bitmask" form (values + bitmask; float 2:4
                                      weights stay dense); read by compressed-tensors <= 0.14, refused by
                                      later ones and by vLLM since March 2026 (docs/formats.md) */
    SQZ_HF_FORMAT_COUNT
} sqz_hf_format;

/* "compressed-tensors", "gptq", "gptq-v2", "sqz", "compressed-tensors-sparse24"; NULL for a value out
 * of range. */
SQZ_API const char *sqz_hf_format_name(sqz_hf_format f);

typedef struct sqz_save_opts {
    sqz_format format;      /* SQZ_FORMAT_GGUF, SQZ_FORMAT_SAFETENSORS, SQZ_FORMAT_BUNDLE or SQZ_FORMAT_ONNX */
    int dtype;              /* an sqz_dtype for weight matrices, or -1 to keep each tensor's */
    sqz_progress_fn progress; /* optional */
    void *progress_user;
    bool replace;           /* safetensors: replace an existing directory sqz did not write */
    /* bundle only (docs/bundle.md): */
    const char *sign_key;   /* Ed25519 secret key file (sqz_bundle_keygen) to sign with, or NULL */
    bool deflate;           /* deflate the sections (a transport form: sqz-edge does not run it) */
    const char *provenance_json; /* JSON (the compress report) kept in the manifest, or NULL */
    /* onnx only (docs/onnx.md): */
    int onnx_ops;           /* quantized weights as 0: com.microsoft MatMulNBits, 1: DequantizeLinear (QDQ) */
    /* safetensors only: the layout of scheme-quantized weights (0: compressed-tensors). With a
     * float dtype every quantized tensor is dequantized instead and no quantization_config written. */
    sqz_hf_format hf_format;
    /* gguf only: llama.cpp's llama_ftype written as general.file_type (a whole-model mix's:
     * sqz_qmix_gguf_ftype), or 0 to derive it from the dtype holding the most matrix elements
     * (which also gives 0, ALL_F32, for a float model). */
    int gguf_file_type;
    /* safetensors only: GGUF block-typed linear layers of the blocks are dequantized to f32 instead
     * of written exactly in the hf_format layout or refused (what `sqz compress` asks for the layers
     * its recipe left unquantized: its report and the layout's "ignore" list call them float). */
    bool gguf_blocks_float;
} sqz_save_opts;

/* Writes the model, one tensor at a time (memory stays at one tensor beyond the
 * mappings). GGUF goes to a single file; safetensors to a directory with
 * model.safetensors, config.json and tokenizer files; ONNX to a directory with model.onnx,
 * model.onnx.data, genai_config.json and tokenizer files (docs/onnx.md). q/k rows are permuted to the
 * target's rotary layout. In safetensors without a float opts->dtype, sqz's INT8/INT4 weights
 * go in opts->hf_format's layout, and so do GGUF Q4_0 / Q8_0 / Q5_0 linear layers of the blocks,
 * exactly (other block types of those layers: SQZ_ERR_UNSUPPORTED naming the tensor and why,
 * unless opts->gguf_blocks_float); other block-typed tensors (embedding, classifier) are
 * dequantized to f32. A float opts->dtype dequantizes every quantized tensor to it. The output is
 * atomic: on error nothing is left at `path`. */
SQZ_API sqz_status sqz_model_save(const sqz_model *m, const char *path, const sqz_save_opts *opts);

/* SQZ_OK when the target format holds every tensor of m as it is (or in opts->dtype where
 * that applies); else SQZ_ERR_UNSUPPORTED naming the first tensor and its dtype (GGUF has no
 * place for sqz's INT8/INT4 schemes, safetensors none for block-quantized dtypes, a bundle
 * holds f32, f16, q8_0, q4_0 and q4_1 llama-family decoders; an ONNX directory holds llama-family
 * decoders whose matrices are float, Q4_0/Q4_1/Q5_0/Q5_1/Q8_0 or sqz int4/int8 weight-only without
 * act-order: docs/onnx.md). sqz_model_save converts what it must (ONNX: refuses what it cannot
 * hold, as here); `sqz export` refuses instead. */
SQZ_API sqz_status sqz_model_check_target(const sqz_model *m, const sqz_save_opts *opts);

/* Makes an Ed25519 key pair for signing bundles: PREFIX.key (64 bytes, libsodium's secret
 * key, created mode 0600, never over an existing file) and PREFIX.pub (32 bytes).
 * SQZ_ERR_UNSUPPORTED when sqz was built without libsodium. */
SQZ_API sqz_status sqz_bundle_keygen(const char *prefix);

#ifdef __cplusplus
}
#endif
#endif

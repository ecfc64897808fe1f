/*
 * formats/formats_internal.h - what the readers and writers of formats/ share.
 * Not public: the public entry points are sqz_model_open / sqz_model_save.
 */
#ifndef SQZ_FORMATS_INTERNAL_H
#define SQZ_FORMATS_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/internal.h"
#include "sqz/family.h"
#include "sqz/formats.h"
#include "sqz/model.h"

/* Limits that turn absurd headers into clear errors before any allocation. */
#define SQZ__MAX_TENSORS (1 << 20)          /* tensors in one checkpoint */
#define SQZ__MAX_KV (1 << 20)               /* GGUF metadata entries */
#define SQZ__MAX_ARRAY (1 << 28)            /* elements in one GGUF metadata array */
#define SQZ__MAX_STRING (1 << 26)           /* bytes in one GGUF string */
#define SQZ__MAX_JSON ((size_t)1 << 28)     /* bytes of a JSON file or safetensors header */
#define SQZ__MAX_VOCAB (1 << 22)            /* tokens */

/* ---- the format table (detect.c): one row per format ---- */
/* Every format sqz reads or writes: its public columns (sqz_format_info), how its first bytes look
 * and how its directory looks, its reader, its writer and its check (NULL: not
 * written), and how the writers shared by GGUF and safetensors (export.c) treat it. */
typedef struct sqz__format_row {
    sqz_format_traits info;
    bool (*looks)(const uint8_t *p, size_t n, uint64_t file_size);
    /* whether a directory is one of this format's (NULL: the format is a single file) */
    bool (*looks_dir)(const char *dir);
    sqz_status (*open)(const char *path, const sqz_open_opts *o, sqz_model *m);
    sqz_status (*save)(const sqz_model *m, const char *path, const sqz_save_opts *o);
    /* sqz_model_check_target's check of m against the target and the options */
    sqz_status (*check)(const sqz_model *m, const sqz_save_opts *o);
    /* sqz__export_dtype: true: a --dtype applies to every float or quantized tensor; false: to the
     * weight matrices, and the other tensors become f32 */
    bool dtype_every_tensor;
    /* sqz__export_dtype: whether the format has a code for dtype d (what it has not is written f32);
     * NULL: every dtype kept */
    bool (*has_dtype)(sqz_dtype d);
    /* sqz__target_rope: the q/k row order of a rotary model in the format; NULL: interleaved */
    sqz_rope_layout (*rope)(const sqz_model *m);
} sqz__format_row;
/* The row of f, or NULL when f has none. */
const sqz__format_row *sqz__format_get(sqz_format f);
/* The check of GGUF and safetensors (export.c): every tensor held as it is or in o->dtype. */
sqz_status sqz__tensors_check(const sqz_model *m, const sqz_save_opts *o);

/* ---- detection (detect.c): look at the first bytes of a file ---- */
bool sqz__looks_gguf(const uint8_t *p, size_t n);
bool sqz__looks_safetensors(const uint8_t *p, size_t n, uint64_t file_size);
bool sqz__looks_llama2c(const uint8_t *p, size_t n, uint64_t file_size);
/* A ModelProto's first bytes (onnx_read.c). */
bool sqz__looks_onnx(const uint8_t *p, size_t n, uint64_t file_size);

/* ---- readers: fill an empty model (m->source_path is set by the caller) ---- */
/* path: an HF directory, or a .safetensors file (config.json and tokenizer files beside it). */
sqz_status sqz__st_open(const char *path, sqz_model *m);
sqz_status sqz__gguf_open(const char *path, sqz_model *m);
sqz_status sqz__llama2c_open(const char *path, const char *tokenizer_path, sqz_model *m);
/* path: a directory sqz's ONNX writer made (model.onnx, model.onnx.data, config.json, tokenizer files), or
 * its model.onnx (onnx_read.c). */
sqz_status sqz__onnx_open(const char *path, sqz_model *m);
/* tokenizer.json (+ tokenizer_config.json) of an HF-style directory into m->vocab when present, the special
 * ids config.json gave kept as the fallback (safetensors_read.c; the ONNX reader's too). */
sqz_status sqz__hf_tokenizer_read(const char *dir, sqz_model *m);

/* ---- writers ---- */
sqz_status sqz__st_save(const sqz_model *m, const char *path, const sqz_save_opts *o);
/* The ONNX writer (formats/onnx_write.c) and its check of what it can write exactly (sqz_model_check_target). */
sqz_status sqz__onnx_save(const sqz_model *m, const char *path, const sqz_save_opts *o);
sqz_status sqz__onnx_check(const sqz_model *m, const sqz_save_opts *o);
sqz_status sqz__gguf_save(const sqz_model *m, const char *path, const sqz_save_opts *o);
/* The writer of o->format from the format table (detect.c). */
sqz_status sqz__format_save(const sqz_model *m, const char *path, const sqz_save_opts *o);

/* ---- HF config.json (hf_config.c) ---- */
/* Fills m->hp (and calls sqz_model_init_layers) from config.json text. `path` names the file in errors. */
sqz_status sqz__hf_config_read(const char *json, size_t len, const char *path, sqz_model *m);
/* config.json text for the model (malloc'd, caller frees); NULL on error. */
char *sqz__hf_config_write(const sqz_model *m);

/* ---- HF rotary settings (hf_rope.c) ---- */
struct cJSON;
/* hp's rope_theta, rope_dim, rope_theta_local and scaling from config.json's root object (hub keys or
 * transformers 5's rope_parameters); adds the ROPE_FREQS / ROPE_FACTORS_* tensors a scaling needs to m.
 * hp->head_dim and hp->ctx_len must be set. */
sqz_status sqz__hf_rope_read(const struct cJSON *root, const char *path, sqz_hparams *hp, sqz_model *m);
/* Adds "rope_scaling" (and longrope's original_max_position_embeddings) for m to object o; false with
 * the error recorded when the model's scaling cannot be stated. */
bool sqz__hf_rope_write(struct cJSON *o, const sqz_model *m);

/* ---- HF tensor names (hf_names.c) ---- */
typedef enum sqz__hf_name_kind {
    SQZ__HF_TENSOR = 0,  /* a model tensor: role, layer (-1 for global roles) and param are set */
    SQZ__HF_IGNORED = 1, /* a buffer transformers derives at load time (rotary inv_freq, position_ids) */
    SQZ__HF_UNKNOWN = 2, /* not a name of this family */
    SQZ__HF_FUSED_QKV = 3, /* Phi-3's qkv_proj: the rows of q, k and v (role is ATTN_Q) */
    SQZ__HF_FUSED_GATE_UP = 4, /* Phi-3's gate_up_proj: the rows of gate, then up (role is FFN_GATE) */
    SQZ__HF_EXPERT = 5,  /* one expert's matrix ("mlp.experts.3.gate_proj"): matrix 3 of the stacked role
                            (FFN_*_EXPS); sqz__hf_name_parse_expert gives the index */
} sqz__hf_name_kind;
/* Maps an HF tensor name of the family ("model.layers.3.self_attn.q_proj.weight",
 * "encoder.layer.0.attention.self.query.bias", optional "bert."/"model." prefix for BERT). */
sqz__hf_name_kind sqz__hf_name_parse(sqz_family family, const char *name, sqz_role *role, int32_t *layer,
                                     sqz_param *param);
/* sqz__hf_name_parse, and *expert: the expert's index for SQZ__HF_EXPERT, else -1. */
sqz__hf_name_kind sqz__hf_name_parse_expert(sqz_family family, const char *name, sqz_role *role, int32_t *layer,
                                            sqz_param *param, int32_t *expert);
/* The HF name of expert e's matrix of stacked role `role` ("model.layers.3.mlp.experts.5.up_proj.weight"); false
 * when the family has no such name or buf is too small. */
bool sqz__hf_expert_name(sqz_family family, sqz_role role, int32_t layer, int32_t e, sqz_param param, char *buf,
                         size_t cap);
/* Canonical HF name of (role, layer, param) into buf (cap bytes, NUL-terminated). False if the
 * role has no HF name in the family, the layer does not fit the role, or buf is too small. */
bool sqz__hf_name_make(sqz_family family, sqz_role role, int32_t layer, sqz_param param, char *buf, size_t cap);
/* Whether the family's HF checkpoints fuse `role` with others into one tensor (Phi-3's qkv_proj,
 * gate_up_proj): n > 0 when role is the first of n members (members[0..n), *base the fused name's base),
 * -1 when it is a later member (written inside the first's tensor), 0 when it is not fused. */
int sqz__hf_fused(sqz_family family, sqz_role role, sqz_role members[3], const char **base);
/* The HF name of a fused tensor of layer `layer` ("model.layers.3.self_attn.qkv_proj.weight"). */
bool sqz__hf_fused_name(sqz_family family, int32_t layer, const char *base, sqz_param param, char *buf, size_t cap);
/* config.json text as sqz__hf_config_write, with torch_dtype naming `weight_dtype` (the dtype
 * the writer stores the weight matrices in). malloc'd; NULL on error. */
char *sqz__hf_config_write_dtype(const sqz_model *m, sqz_dtype weight_dtype);

/* ---- tokenizer files (tokenizer_*.c) ---- */
/* llama.cpp's tokenizer.ggml.pre name of an HF Split pre-tokenizer regex ("llama-bpe", "qwen2", "gpt-4o"),
 * or NULL when sqz knows none for it. */
const char *sqz__hf_pre_name(const char *split);
/* The name of the pre-tokenizer made of single digits and GPT-2's ByteLevel split (SmolLM's; llama.cpp's "smollm",
 * whose regex its starcoder, refact and others share): what a tokenizer.json of that shape is written as. */
const char *sqz__hf_pre_name_digits(void);
/* HF tokenizer.json (+ tokenizer_config.json text, may be NULL) into v; keeps the texts verbatim. */
sqz_status sqz__tokenizer_json_read(const char *json, size_t len, const char *config_json, const char *path,
                                    sqz_vocab *v);
/* tokenizer.json text for v: the verbatim original when v->hf_json is set, else synthesised
 * from the vocab (SPM -> BPE with byte fallback and merges derived from the scores, BPE ->
 * byte-level BPE, WPM -> WordPiece). malloc'd; NULL on error. */
char *sqz__tokenizer_json_write(const sqz_vocab *v);
/* tokenizer_config.json text (verbatim or synthesised). malloc'd; NULL on error. */
char *sqz__tokenizer_config_write(const sqz_vocab *v);
/* llama2.c tokenizer.bin with vocab_size entries into v (kind SPM). */
sqz_status sqz__llama2c_tokenizer_read(const char *path, int32_t vocab_size, sqz_vocab *v);

/* ---- names and layouts shared by the writers (export.c) ---- */
/* Rotary layout a target expects for this model's architecture. */
sqz_rope_layout sqz__target_rope(const sqz_model *m, sqz_format target);
/* dtype a tensor is written with in `target` under the options. */
sqz_dtype sqz__export_dtype(const sqz_tensor *t, const sqz_save_opts *o, sqz_format target);
/* Converts tensor t to dtype `to` into dst (capacity cap bytes), permuting q/k rows from the
 * model's rotary layout to `rope`. `scratch` holds nelements floats or is NULL. */
sqz_status sqz__tensor_export(const sqz_model *m, const sqz_tensor *t, sqz_dtype to, sqz_rope_layout rope,
                              void *dst, size_t cap, float *scratch);
/* Row permutation between rotary layouts for a (n_heads*head_dim, ...) tensor of
 * row_bytes-sized rows (works for any dtype: whole rows move). */
void sqz__rope_permute_rows(const uint8_t *src, uint8_t *dst, int64_t n_heads, int64_t head_dim, size_t row_bytes,
                            sqz_rope_layout from, sqz_rope_layout to);

/* ---- scheme-quantized weights in safetensors: one row per layout (st_layout.c's table) ----
 * A quantized weight P.weight (sqz/qparams.h) is written as parts named stem + suffix, stem
 * being its HF name less "weight" ("model.layers.0.self_attn.q_proj."). */
typedef struct sqz__st_part {
    char suffix[24];        /* "weight", "weight_packed", "weight_scale", "qweight", ... */
    sqz_dtype dtype;
    int32_t ndim;
    int64_t shape[2];
    void *data;             /* nbytes, little-endian, as written */
    size_t nbytes;
    bool owned;             /* data was allocated for the part (sqz__st_parts_free) */
} sqz__st_part;
#define SQZ__ST_MAX_PARTS 6
/* A tensor entry of the files, for the reader. */
typedef struct sqz__st_view {
    const char *name;
    sqz_dtype dtype;
    int32_t ndim;
    const int64_t *shape;
    const uint8_t *data;
    const char *file;
} sqz__st_view;

/* Expert x's matrix v of stacked role `role` in layer `layer` into the model's (n_expert, rows, cols) tensor,
 * made (heap, owned) on the layer's first expert; counts[i] counts the experts copied into tensor i
 * (st_experts.c). sqz__st_experts_check then refuses a stacked tensor with an expert missing. */
sqz_status sqz__st_add_expert(sqz_model *m, const sqz__st_view *v, sqz_role role, int32_t layer, sqz_param param,
                              int32_t x, int32_t *counts);
sqz_status sqz__st_experts_check(const sqz_model *m, const int32_t *counts, const char *path);

/* A weight of 8-bit codes in groups along the input with one f32 scale each, w = scales[r][c /
 * group] * q[r][c]: a GGUF Q8_0 or Q5_0 weight on its way to a layout (st_blocks.c). */
typedef struct sqz__st_i8g {
    int64_t n_out, n_in;
    int32_t group;          /* 32 */
    const int8_t *q;        /* (n_out, n_in) */
    const float *scales;    /* (n_out, n_in / group), each an fp16 value */
} sqz__st_i8g;

typedef struct sqz__st_layout sqz__st_layout;
struct sqz__st_layout {
    sqz_hf_format id;
    const char *quant_method;   /* config.json quantization_config.quant_method it writes and reads */
    /* The parts of weight t (t->qp set, rows already in the file's rotary order), at most
     * SQZ__ST_MAX_PARTS, their data owned or borrowed from t. SQZ_ERR_UNSUPPORTED naming t and the
     * way out for what the layout cannot hold exactly. */
    sqz_status (*parts)(const sqz__st_layout *L, const sqz_tensor *t, sqz__st_part *parts, int *n);
    /* config.json text cfg (freed) with quantization_config added for m's quantized weights;
     * sparse[i] true for tensor i written in sparse-24-bitmask parts (NULL: none); NULL with the
     * error set. */
    char *(*config)(const sqz__st_layout *L, const sqz_model *m, const bool *sparse, char *cfg);
    /* optional: the parts (all owned) of weight t held as w, 8-bit groups; NULL: the layout has
     * no such form and GGUF Q8_0 / Q5_0 weights are refused (st_blocks.c) */
    sqz_status (*i8g_parts)(const sqz__st_layout *L, const sqz_tensor *t, const sqz__st_i8g *w, sqz__st_part *parts,
                            int *n);
    /* reading: true for a tensor name that attach consumes (add_tensors skips it) */
    bool (*is_part)(const char *name);
    /* reading: turns the parts among v[0..n) into quantized weights of m (config.json's
     * quantization_config qc, a cJSON object); checks every dtype, shape and value (SQZ_ERR_FORMAT) */
    sqz_status (*attach)(sqz_model *m, const void *qc, const sqz__st_view *v, size_t n);
};
/* The row of a layout. */
const sqz__st_layout *sqz__st_layout_get(sqz_hf_format f);
/* The layout config.json (text cfg) declares, or NULL for a plain float checkpoint; a
 * quant_method sqz does not read is SQZ_ERR_UNSUPPORTED naming it. *qc: the parsed config, which
 * the caller frees with sqz__st_layout_config_free. */
sqz_status sqz__st_layout_detect(const char *cfg, size_t len, const char *path, const sqz__st_layout **out,
                                 void **qc);
void sqz__st_layout_config_free(void *qc);
void sqz__st_parts_free(sqz__st_part *parts, int n);
/* A new part p[(*n)++] of dtype dt and shape (d0) or (d0, d1) (d1 = 0: 1-D), data not set. */
sqz__st_part *sqz__st_part_new(sqz__st_part *p, int *n, const char *suffix, sqz_dtype dt, int64_t d0, int64_t d1);
/* Allocates the part's data (owned). */
sqz_status sqz__st_part_alloc(sqz__st_part *q);
/* The view named prefix + "." + suffix, or NULL. */
const sqz__st_view *sqz__st_view_find(const sqz__st_view *v, size_t n, const char *prefix, const char *suffix);
/* True if view v is dt with d0 rows and d0 * d1 elements. */
bool sqz__st_view_is(const sqz__st_view *v, sqz_dtype dt, int64_t d0, int64_t d1);
/* Float element i of a float view (F32, F16, BF16). */
float sqz__st_view_f32(const sqz__st_view *v, size_t i);
/* True for a linear layer's weight that a quantization_config's "ignore" lists when float. */
bool sqz__st_is_linear(const sqz_tensor *t);

extern const sqz__st_layout sqz__st_layout_sqz, sqz__st_layout_ctensors, sqz__st_layout_ctensors_sp24,
    sqz__st_layout_gptq, sqz__st_layout_gptq_v2;

/* ---- compressed-tensors' sparse-24-bitmask (st_sparse24.c) ---- */
/* True for the dtypes it holds (F32, F16, BF16, I8). */
bool sqz__sp24_dtype_ok(sqz_dtype dt);
/* True when w (n, k) of dtype dt has at most 2 non-zeros in every 4 columns of every row. */
bool sqz__sp24_fits(const uint8_t *w, sqz_dtype dt, int64_t n, int64_t k);
/* The parts compressed, bitmask, shape of w appended at p[*np];
 * SQZ_ERR_INVALID_ARG naming the row and columns of a group with 3 or 4 non-zeros. */
sqz_status sqz__sp24_parts(const char *name, const uint8_t *w, sqz_dtype dt, int64_t n, int64_t k, sqz__st_part *p,
                           int *np);
/* dense (n, k) of vals' dtype = vals put where mask's bits are set; SQZ_ERR_FORMAT when the bit
 * count is not n * k / 2. */
sqz_status sqz__sp24_decompress(const sqz__st_view *vals, const sqz__st_view *mask, int64_t n, int64_t k,
                                uint8_t *dense);

/* ---- GGUF block-quantized linear weights in an HF directory (st_blocks.c) ---- */
/* A linear layer inside the blocks stored in a GGUF block type (no qparams). */
bool sqz__st_block_linear(const sqz_tensor *t);
/* SQZ_OK when layout L holds block linear t exactly (Q4_0; Q8_0 and Q5_0 where L has
 * i8g_parts), else SQZ_ERR_UNSUPPORTED naming t, the reason and the ways out. */
sqz_status sqz__st_block_check(const sqz__st_layout *L, const sqz_tensor *t);
/* The parts of block linear t (rows in the file's rotary order) in layout L, all owned. */
sqz_status sqz__st_block_parts(const sqz__st_layout *L, const sqz_tensor *t, sqz__st_part *parts, int *n);
/* *shadow: m with a copy of its tensors (*tensors) in which every block linear with an exact form
 * points to a descriptor qparams in *qps (scheme, shape, group 32, symmetric; no scales) for the
 * layouts' config writers. Q8_0 / Q5_0's descriptor is I8_ROW with group_size 32 < n_in (8-bit
 * groups): only config writers see it, never sqz_qparams_check. The caller frees both arrays. */
sqz_status sqz__st_block_config_model(const sqz_model *m, sqz_model *shadow, sqz_tensor **tensors,
                                      struct sqz_qparams **qps);


#endif

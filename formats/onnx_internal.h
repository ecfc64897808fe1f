/* formats/onnx_internal.h - what the ONNX writer's files share (formats/onnx_*.c; docs/onnx.md).
 *
 * onnx_pb.c:    a protobuf encoder of the few ONNX messages the writer needs (onnx.proto3's field
 *               numbers), into sqz__bytebuf; a submessage is encoded into its own buffer and then
 *               appended with its length, so every length is known when it is written.
 * onnx_graph.c: the decoder graph (nodes, inputs, outputs, small constants) over the weights the
 *               plan names (onnx_plan.c), written as external data (DIR/model.onnx.data).
 * onnx_plan.c:  which initializer each tensor becomes (f32/f16 MatMul weight, MatMulNBits or
 *               DequantizeLinear parts), their sizes and offsets, and their bytes one tensor at a time.
 * onnx_write.c: the save entry point: the plan, the data file streamed, model.onnx,
 *               genai_config.json, config.json and the tokenizer files, in one atomic directory.
 * onnx_read_pb.c: a bounds-checked protobuf decoder of what the reader needs (initializers, nodes).
 * onnx_read.c:  reading such a directory back (docs/onnx.md, "Reading back"): config.json and the
 *               tokenizer as an HF directory, the weights from the initializers. */
#ifndef SQZ_FORMATS_ONNX_INTERNAL_H
#define SQZ_FORMATS_ONNX_INTERNAL_H

#include "formats/formats_internal.h"

/* ---- protobuf (onnx_pb.c) ---- */
void sqz__pb_varint(sqz__bytebuf *b, uint64_t v);
void sqz__pb_int(sqz__bytebuf *b, int field, int64_t v);           /* varint field (int64/int32/enum) */
void sqz__pb_f32(sqz__bytebuf *b, int field, float v);             /* fixed32 field */
void sqz__pb_bytes(sqz__bytebuf *b, int field, const void *p, size_t n); /* length-delimited */
void sqz__pb_str(sqz__bytebuf *b, int field, const char *s);
void sqz__pb_msg(sqz__bytebuf *b, int field, const sqz__bytebuf *sub);   /* sub's bytes as a submessage */
/* Frees sub after appending it (sub->oom propagates into b). */
void sqz__pb_msg_take(sqz__bytebuf *b, int field, sqz__bytebuf *sub);

/* TensorProto.DataType values used here */
enum {
    SQZ__ONNX_FLOAT = 1, SQZ__ONNX_UINT8 = 2, SQZ__ONNX_INT8 = 3, SQZ__ONNX_INT32 = 6, SQZ__ONNX_INT64 = 7,
    SQZ__ONNX_BOOL = 9, SQZ__ONNX_FLOAT16 = 10, SQZ__ONNX_FLOAT8E4M3FN = 17, SQZ__ONNX_UINT4 = 21,
    SQZ__ONNX_INT4 = 22,
};

/* ---- protobuf decoding (onnx_read_pb.c) ---- */
/* Bytes inside the decoded buffer (not NUL-terminated); p NULL when absent. */
typedef struct sqz__pb_span {
    const char *p;
    size_t n;
} sqz__pb_span;
bool sqz__pb_is(sqz__pb_span s, const char *lit); /* s equals the C string lit */
bool sqz__pb_eq(sqz__pb_span a, sqz__pb_span b);  /* both present and equal */

#define SQZ__ONNX_MAX_DIMS 8
/* A TensorProto initializer as stored: data in raw_data or external data (location/offset/length). */
typedef struct sqz__onnx_init {
    sqz__pb_span name, location, doc; /* doc: doc_string ("sqz dtype NAME": onnx_graph.c) */
    int64_t data_type;
    int ndim;
    int64_t dims[SQZ__ONNX_MAX_DIMS];
    bool external;                 /* data_location EXTERNAL */
    bool has_offset, has_length;
    uint64_t offset, length;
    const uint8_t *raw;            /* raw_data (raw_n bytes) when has_raw */
    size_t raw_n;
    bool has_raw;
    bool typed_data;               /* float_data, int32_data, ...: values sqz does not read */
} sqz__onnx_init;

/* The attributes the reader asks (integer values only). */
enum { SQZ__ONNX_ATTR_K, SQZ__ONNX_ATTR_N, SQZ__ONNX_ATTR_BITS, SQZ__ONNX_ATTR_BLOCK, SQZ__ONNX_ATTR_AXIS,
       SQZ__ONNX_ATTR_TO, SQZ__ONNX_ATTR_COUNT };
#define SQZ__ONNX_NODE_INPUTS 4
typedef struct sqz__onnx_node {
    sqz__pb_span op, domain, out;          /* out: the first output */
    sqz__pb_span in[SQZ__ONNX_NODE_INPUTS]; /* the first inputs ("" for an omitted optional one) */
    int n_in;                               /* all inputs, also those beyond in[] */
    int64_t attr[SQZ__ONNX_ATTR_COUNT];
    bool has_attr[SQZ__ONNX_ATTR_COUNT];
} sqz__onnx_node;

typedef struct sqz__onnx_proto {
    int64_t ir_version;
    sqz__pb_span producer;     /* producer_name ("sqz" for sqz's exports) */
    sqz__onnx_init *init;
    int64_t n_init;
    sqz__onnx_node *node;
    int64_t n_node;
} sqz__onnx_proto;
/* Decodes the ModelProto bytes[0..n) (spans point into bytes, which must outlive *out); SQZ_ERR_FORMAT
 * naming `file` and the byte where it breaks. The caller frees with sqz__onnx_proto_free. */
sqz_status sqz__onnx_proto_read(const uint8_t *bytes, size_t n, const char *file, sqz__onnx_proto *out);
void sqz__onnx_proto_free(sqz__onnx_proto *p);

/* ---- reading a directory back (onnx_read.c: the directory, initializers, float tensors; onnx_read_q.c:
 * the quantized forms) ---- */
typedef struct sqz__onnx_rd {
    const char *file;            /* model.onnx's path (messages) */
    const char *data_file;       /* model.onnx.data's path */
    const sqz__onnx_proto *pb;
    const uint8_t **data;        /* per initializer: its bytes in the data mapping (NULL: inline constant) */
    uint64_t *nbytes;            /* per initializer: its byte count */
    bool *used;                  /* per initializer: read into the model (or skipped on purpose) */
    int64_t *by_name;            /* initializer indices sorted by name */
    int64_t *by_in;              /* (node, input slot) pairs sorted by input name: node * 4 + slot */
    int64_t n_by_in;
    sqz_model *m;
} sqz__onnx_rd;
/* The initializer named `name` (its index in *idx), or NULL. */
const sqz__onnx_init *sqz__onnx_rd_init(const sqz__onnx_rd *r, sqz__pb_span name, int64_t *idx);
/* The node with op_type `op` that takes `name` as input `slot`, or NULL. */
const sqz__onnx_node *sqz__onnx_rd_consumer(const sqz__onnx_rd *r, sqz__pb_span name, int slot, const char *op);
/* The node whose first output is `name`, or NULL (a linear scan: used for a few FP8 weights only). */
const sqz__onnx_node *sqz__onnx_rd_producer(const sqz__onnx_rd *r, sqz__pb_span name);
/* Initializer i (named stem + "_Q") as linear weight *t (role, layer, param and name set by the caller):
 * its dtype, bytes and qparams from the MatMulNBits or DequantizeLinear node that reads it, the value
 * sqz's forward dequantizes; added to the model. Marks the parts it reads as used. */
sqz_status sqz__onnx_read_quant(sqz__onnx_rd *r, int64_t i, sqz_tensor *t);
/* Element size in bits of an ONNX data type sqz reads (0: not one). */
int sqz__onnx_type_bits(int64_t data_type);

/* ---- the plan of initializers (onnx_plan.c) ---- */
typedef enum sqz__onnx_ops { SQZ__ONNX_OPS_MATMULNBITS = 0, SQZ__ONNX_OPS_QDQ = 1 } sqz__onnx_ops;

/* How a linear weight (out, in) is computed in the graph. */
typedef enum sqz__onnx_lin {
    SQZ__LIN_FLOAT = 0, /* part 0: W^T (in, out) f32 or f16 (then Cast), MatMul */
    SQZ__LIN_NBITS,     /* parts: B (out, k_blocks, block*bits/8) u8, scales (out*k_blocks) f32, [zero points] */
    SQZ__LIN_QDQ,       /* parts: W^T (in, out) int4/uint4/int8/uint8, scales (in/block, out) f32, [zero points] */
    SQZ__LIN_FP8,       /* parts: W^T (in, out) FLOAT8E4M3FN, scales (out) f32: DequantizeLinear along axis 1 */
} sqz__onnx_lin;

#define SQZ__ONNX_NAME 96
#define SQZ__ONNX_MAX_PARTS 3

typedef struct sqz__onnx_part {
    char name[SQZ__ONNX_NAME];
    int onnx_type;       /* TensorProto.DataType */
    int ndim;
    int64_t dims[3];
    uint64_t nbytes, offset; /* in model.onnx.data */
} sqz__onnx_part;

/* One entry of the plan: a tensor of the model (or the rotary tables: t == NULL). */
typedef struct sqz__onnx_entry {
    const sqz_tensor *t;
    sqz__onnx_lin lin;   /* linear weights; other tensors are FLOAT parts as they are (f32) */
    bool is_linear;
    sqz_dtype dtype;     /* linear weights: the dtype whose values are written (the tensor's, or --dtype) */
    int bits, block;     /* NBITS / QDQ */
    bool zp_float;       /* NBITS zero points in f32 (Q4_1/Q5_1 minimums) */
    bool act_fp8;        /* FP8: W8A8-FP8, the input rounded to FP8 first (core/fp8.c's semantics) */
    float act_scale;     /* act_fp8: > 0 the static scale of every value (fp8_static), 0 absmax / 448 per token */
    int n_parts;
    sqz__onnx_part part[SQZ__ONNX_MAX_PARTS];
} sqz__onnx_entry;

typedef struct sqz__onnx_plan {
    sqz__onnx_entry *e;
    int64_t n;
    int64_t rope_len;    /* rows of the rotary tables (positions) */
    uint64_t data_bytes;
    sqz__onnx_ops ops;
} sqz__onnx_plan;

/* Builds the plan: which parts every tensor becomes, refusing (SQZ_ERR_UNSUPPORTED, naming the tensor and
 * the way out) what the graph cannot compute exactly. The caller frees with sqz__onnx_plan_free. */
sqz_status sqz__onnx_plan_make(const sqz_model *m, const sqz_save_opts *o, sqz__onnx_plan *p);
void sqz__onnx_plan_free(sqz__onnx_plan *p);
/* The entry of (role, layer, weight/bias), or NULL. */
const sqz__onnx_entry *sqz__onnx_plan_find(const sqz__onnx_plan *p, sqz_role r, int32_t layer, sqz_param k);
/* The bytes of entry e's parts (rows in rotate-half order), into bufs[i] (caller's, part[i].nbytes each). */
sqz_status sqz__onnx_entry_bytes(const sqz_model *m, const sqz__onnx_plan *p, const sqz__onnx_entry *e,
                                 uint8_t *const bufs[SQZ__ONNX_MAX_PARTS]);

/* ---- the graph (onnx_graph.c) ---- */
/* The ModelProto (graph, opsets, external data references to data_file) into *out (caller frees out->p). */
sqz_status sqz__onnx_model_proto(const sqz_model *m, const sqz__onnx_plan *p, const char *data_file,
                                 sqz__bytebuf *out);

#endif

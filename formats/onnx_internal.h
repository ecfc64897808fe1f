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
 *               genai_config.json and the tokenizer files, in one atomic directory. */
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
    bool act_fp8;        /* FP8: W8A8-FP8, the input rounded to FP8 per token first (core/fp8.c's semantics) */
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

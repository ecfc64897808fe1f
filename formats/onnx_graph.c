/* formats/onnx_graph.c - the decoder as an ONNX graph (opset 21; MatMulNBits from com.microsoft).
 *
 * What runtime/llama.c computes, in standard operators (docs/onnx.md, "The graph"):
 *   inputs  input_ids (B, S) int64, attention_mask (B, T) int64, position_ids (B, S) int64,
 *           past_key_values.L.key / .value (B, kv_L, P, head_dim) f32, T = P + S
 *   outputs logits (B, S, vocab) f32, present.L.key / .value (B, kv_L, T, head_dim)
 *   x = Gather(embedding, input_ids); per block: RMSNorm, q/k/v (+ biases), rotate-half RoPE at
 *   position_ids (q/k rows are written in that order), K/V = Concat(past, new), grouped-query
 *   attention by reshaping q to (B, kv, group, S, hd) against K/V broadcast over the group, an
 *   additive mask (causal over T, and attention_mask), softmax, o, residual; SwiGLU FFN, residual;
 *   final RMSNorm and the classifier (the embedding transposed when tied).
 * Standard attention rather than com.microsoft GroupQueryAttention: the same graph runs in any ONNX
 * runtime (TensorRT, QNN: only MatMulNBits is a contrib operator, and --onnx-ops qdq removes it),
 * per-layer head counts need nothing special, and the KV cache is the plain layout genai's default
 * cache feeds (past_present_share_buffer false). */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "formats/onnx_internal.h"

enum { ATTR_FLOAT = 1, ATTR_INT = 2, ATTR_STRING = 3, ATTR_INTS = 7 };

typedef struct attr {
    const char *name;
    int type;
    int64_t i;
    float f;
    const int64_t *ints;
    int n;
} attr;

#define MAX_CONSTS 1024
typedef char nm[SQZ__ONNX_NAME];

typedef struct gb {
    sqz__bytebuf g;   /* GraphProto fields: node 1, initializer 5, input 11, output 12 */
    int next;
    const sqz_model *m;
    const sqz__onnx_plan *p;
    const char *data_file;
    char (*consts)[48]; /* names of the constants already emitted */
    int n_consts;
    bool nbits;       /* a com.microsoft operator was used */
    nm fp8_in, fp8_out; /* the last input fp8_act rounded and its result: q/k/v and gate/up share one */
    float fp8_scale;    /* and its static scale (0: dynamic) */
} gb;

static const char *fresh(gb *b, char *out) {
    snprintf(out, SQZ__ONNX_NAME, "t%d", b->next++);
    return out;
}

static void put_attr(sqz__bytebuf *n, const attr *a) {
    sqz__bytebuf s = {0};
    sqz__pb_str(&s, 1, a->name);
    sqz__pb_int(&s, 20, a->type);
    if (a->type == ATTR_FLOAT) sqz__pb_f32(&s, 2, a->f);
    else if (a->type == ATTR_INT) sqz__pb_int(&s, 3, a->i);
    else for (int k = 0; k < a->n; k++) sqz__pb_int(&s, 8, a->ints[k]);
    sqz__pb_msg_take(n, 5, &s);
}

/* One node: inputs (NULL-terminated varargs; "" = an omitted optional input), one output. */
static const char *node(gb *b, const char *out, const char *op, const char *domain, const attr *a, int na, ...) {
    sqz__bytebuf n = {0};
    va_list ap;
    va_start(ap, na);
    for (const char *in = va_arg(ap, const char *); in; in = va_arg(ap, const char *)) sqz__pb_str(&n, 1, in);
    va_end(ap);
    sqz__pb_str(&n, 2, out);
    char name[SQZ__ONNX_NAME + 8];
    snprintf(name, sizeof name, "%s_%s", op, out);
    sqz__pb_str(&n, 3, name);
    sqz__pb_str(&n, 4, op);
    if (domain) sqz__pb_str(&n, 7, domain);
    for (int k = 0; k < na; k++) put_attr(&n, &a[k]);
    sqz__pb_msg_take(&b->g, 1, &n);
    return out;
}

#define OP(b, out, op, ...) node(b, out, op, NULL, NULL, 0, __VA_ARGS__, (const char *)NULL)
#define OPA(b, out, op, a, ...) node(b, out, op, NULL, a, (int)(sizeof a / sizeof a[0]), __VA_ARGS__, (const char *)NULL)

/* A small constant initializer inline (raw_data), emitted once per name. */
static const char *constant(gb *b, const char *name, int type, const void *data, size_t elem, int n, bool scalar) {
    for (int i = 0; i < b->n_consts; i++)
        if (strcmp(b->consts[i], name) == 0) return b->consts[i];
    if (b->n_consts == MAX_CONSTS) { b->g.oom = true; return ""; }
    char *slot = b->consts[b->n_consts++];
    snprintf(slot, 48, "%s", name);
    sqz__bytebuf t = {0};
    if (!scalar) sqz__pb_int(&t, 1, n);
    sqz__pb_int(&t, 2, type);
    sqz__pb_str(&t, 8, slot);
    sqz__pb_bytes(&t, 9, data, elem * (size_t)n); /* little-endian hosts only (formats' writers assume it) */
    sqz__pb_msg_take(&b->g, 5, &t);
    return slot;
}

static const char *const_i64s(gb *b, const int64_t *v, int n) {
    char name[48];
    int k = snprintf(name, sizeof name, "c_i");
    for (int i = 0; i < n && k < (int)sizeof name; i++) k += snprintf(name + k, sizeof name - (size_t)k, "_%lld", (long long)v[i]);
    for (char *c = name; *c; c++) if (*c == '-') *c = 'm';
    return constant(b, name, SQZ__ONNX_INT64, v, 8, n, false);
}

static const char *const_i64(gb *b, int64_t v) {
    char name[48];
    snprintf(name, sizeof name, "c_s%lld", (long long)v);
    for (char *c = name; *c; c++) if (*c == '-') *c = 'm';
    return constant(b, name, SQZ__ONNX_INT64, &v, 8, 1, true);
}

static const char *const_f32(gb *b, const char *name, float v) {
    return constant(b, name, SQZ__ONNX_FLOAT, &v, 4, 1, true);
}

/* dtype: a tensor stored in f32 with another dtype's values (the embedding under --dtype, f16 / bf16
 * norms): "sqz dtype NAME" in its doc_string, so that the reader gives it that dtype again (onnx_read.c). */
static void ext_initializer(gb *b, const sqz__onnx_part *p, const char *dtype) {
    sqz__bytebuf t = {0};
    for (int d = 0; d < p->ndim; d++) sqz__pb_int(&t, 1, p->dims[d]);
    sqz__pb_int(&t, 2, p->onnx_type);
    sqz__pb_str(&t, 8, p->name);
    if (dtype) {
        char doc[48];
        snprintf(doc, sizeof doc, "sqz dtype %s", dtype);
        sqz__pb_str(&t, 12, doc);
    }
    char num[32];
    const char *keys[3] = {"location", "offset", "length"};
    for (int k = 0; k < 3; k++) {
        sqz__bytebuf kv = {0};
        sqz__pb_str(&kv, 1, keys[k]);
        if (k == 0) sqz__pb_str(&kv, 2, b->data_file);
        else {
            snprintf(num, sizeof num, "%llu", (unsigned long long)(k == 1 ? p->offset : p->nbytes));
            sqz__pb_str(&kv, 2, num);
        }
        sqz__pb_msg_take(&t, 13, &kv);
    }
    sqz__pb_int(&t, 14, 1); /* EXTERNAL */
    sqz__pb_msg_take(&b->g, 5, &t);
}

/* ValueInfoProto of a graph input (field 11) or output (12); dims: > 0 fixed, else the symbolic name. */
static void value_info(gb *b, int field, const char *name, int type, int nd, const int64_t *dims,
                       const char *const *syms) {
    sqz__bytebuf shape = {0}, tt = {0}, tp = {0}, vi = {0};
    for (int d = 0; d < nd; d++) {
        sqz__bytebuf dim = {0};
        if (dims[d] > 0) sqz__pb_int(&dim, 1, dims[d]);
        else sqz__pb_str(&dim, 2, syms[d]);
        sqz__pb_msg_take(&shape, 1, &dim);
    }
    sqz__pb_int(&tt, 1, type);
    sqz__pb_msg_take(&tt, 2, &shape);
    sqz__pb_msg_take(&tp, 1, &tt);
    sqz__pb_str(&vi, 1, name);
    sqz__pb_msg_take(&vi, 2, &tp);
    sqz__pb_msg_take(&b->g, field, &vi);
}

static const char *weight(gb *b, sqz_role r, int32_t layer, sqz_param k) {
    const sqz__onnx_entry *e = sqz__onnx_plan_find(b->p, r, layer, k);
    return e ? e->part[0].name : NULL;
}

static const char *rmsnorm(gb *b, char *out, const char *x, sqz_role r, int32_t layer) {
    static const int64_t last[1] = {-1};
    nm sq, ms, mse, rt, nx;
    OP(b, fresh(b, sq), "Mul", x, x);
    const attr keep[] = {{.name = "keepdims", .type = ATTR_INT, .i = 1}};
    OPA(b, fresh(b, ms), "ReduceMean", keep, sq, const_i64s(b, last, 1));
    OP(b, fresh(b, mse), "Add", ms, const_f32(b, "c_eps", b->m->hp.norm_eps));
    OP(b, fresh(b, rt), "Sqrt", mse);
    OP(b, fresh(b, nx), "Div", x, rt);
    return OP(b, fresh(b, out), "Mul", nx, weight(b, r, layer, SQZ_PARAM_WEIGHT));
}

/* W8A8-FP8's input, as core/fp8.c rounds it: x_q = fp8(clamp(x / s, +-448)) * s (Cast's saturate clamps,
 * rounding to nearest even) with s = absmax / 448 per token (scale 0; s is raised to the least subnormal
 * only where it is 0, where x is 0 too and stays so) or s = scale, a constant "c_fp8_in_XXXXXXXX" named by
 * its bits (static). The layers that read one input with one scale share its rounding. */
static const char *fp8_act(gb *b, const char *x, float scale) {
    if (strcmp(x, b->fp8_in) == 0 && b->fp8_scale == scale) return b->fp8_out;
    static const int64_t last[1] = {-1};
    nm ax, am, s0, sd, xs, x8, xf;
    const char *s = sd;
    const attr keep[] = {{.name = "keepdims", .type = ATTR_INT, .i = 1}};
    const attr to8[] = {{.name = "to", .type = ATTR_INT, .i = SQZ__ONNX_FLOAT8E4M3FN},
                        {.name = "saturate", .type = ATTR_INT, .i = 1}};
    const attr to32[] = {{.name = "to", .type = ATTR_INT, .i = SQZ__ONNX_FLOAT}};
    if (scale > 0) {
        char name[32];
        uint32_t bits;
        memcpy(&bits, &scale, 4);
        snprintf(name, sizeof name, "c_fp8_in_%08x", (unsigned)bits);
        s = const_f32(b, name, scale);
    } else {
        OP(b, fresh(b, ax), "Abs", x);
        OPA(b, fresh(b, am), "ReduceMax", keep, ax, const_i64s(b, last, 1));
        OP(b, fresh(b, s0), "Div", am, const_f32(b, "c_fp8_max", 448.0f));
        OP(b, fresh(b, sd), "Max", s0, const_f32(b, "c_fp8_tiny", 1.40129846e-45f));
    }
    OP(b, fresh(b, xs), "Div", x, s);
    OPA(b, fresh(b, x8), "Cast", to8, xs);
    OPA(b, fresh(b, xf), "Cast", to32, x8);
    snprintf(b->fp8_in, sizeof b->fp8_in, "%s", x);
    b->fp8_scale = scale;
    return OP(b, fresh(b, b->fp8_out), "Mul", xf, s);
}

/* y = x W^T (+ b) for the linear layer (role, layer), into `out` (or a fresh name). */
static const char *linear(gb *b, char *out, const char *x, sqz_role r, int32_t layer, const char *final_name) {
    const sqz__onnx_entry *e = sqz__onnx_plan_find(b->p, r, layer, SQZ_PARAM_WEIGHT);
    const sqz__onnx_entry *bias = sqz__onnx_plan_find(b->p, r, layer, SQZ_PARAM_BIAS);
    nm y, w;
    const char *dst = bias || !final_name ? fresh(b, y) : final_name;
    if (e->lin == SQZ__LIN_NBITS) {
        const attr a[] = {{.name = "K", .type = ATTR_INT, .i = e->t->shape[1]},
                          {.name = "N", .type = ATTR_INT, .i = e->t->shape[0]},
                          {.name = "bits", .type = ATTR_INT, .i = e->bits},
                          {.name = "block_size", .type = ATTR_INT, .i = e->block}};
        b->nbits = true;
        node(b, dst, "MatMulNBits", "com.microsoft", a, 4, x, e->part[0].name, e->part[1].name,
             e->n_parts > 2 ? e->part[2].name : NULL, (const char *)NULL);
    } else {
        const char *wt = e->part[0].name;
        if (e->lin == SQZ__LIN_FP8) {
            const attr a[] = {{.name = "axis", .type = ATTR_INT, .i = 1}};
            wt = OPA(b, fresh(b, w), "DequantizeLinear", a, e->part[0].name, e->part[1].name);
            if (e->act_fp8) x = fp8_act(b, x, e->act_scale);
        } else if (e->lin == SQZ__LIN_QDQ) {
            const attr a[] = {{.name = "axis", .type = ATTR_INT, .i = 0},
                              {.name = "block_size", .type = ATTR_INT, .i = e->block}};
            wt = node(b, fresh(b, w), "DequantizeLinear", NULL, a, 2, e->part[0].name, e->part[1].name,
                      e->n_parts > 2 ? e->part[2].name : NULL, (const char *)NULL);
        } else if (e->part[0].onnx_type == SQZ__ONNX_FLOAT16) {
            const attr a[] = {{.name = "to", .type = ATTR_INT, .i = SQZ__ONNX_FLOAT}};
            wt = OPA(b, fresh(b, w), "Cast", a, e->part[0].name);
        }
        OP(b, dst, "MatMul", x, wt);
    }
    if (!bias) return final_name ? final_name : strcpy(out, dst);
    return OP(b, final_name ? final_name : fresh(b, out), "Add", dst, bias->part[0].name);
}

/* (B, S, heads*hd) -> (B, heads, S, hd) */
static const char *heads_first(gb *b, char *out, const char *x, int64_t heads) {
    nm r;
    const int64_t shape[4] = {0, 0, heads, b->m->hp.head_dim};
    const int64_t perm[4] = {0, 2, 1, 3};
    const attr a[] = {{.name = "perm", .type = ATTR_INTS, .ints = perm, .n = 4}};
    OP(b, fresh(b, r), "Reshape", x, const_i64s(b, shape, 4));
    return OPA(b, fresh(b, out), "Transpose", a, r);
}

/* x * cos + rotate_half(x) * sin, x (B, h, S, hd); cos/sin (B, 1, S, hd) */
static const char *rope(gb *b, char *out, const char *x, const char *cos4, const char *sin4) {
    nm x1, x2, nx2, rh, a, c;
    const attr split[] = {{.name = "axis", .type = ATTR_INT, .i = -1}, {.name = "num_outputs", .type = ATTR_INT, .i = 2}};
    sqz__bytebuf n = {0}; /* Split has two outputs */
    fresh(b, x1);
    fresh(b, x2);
    sqz__pb_str(&n, 1, x);
    sqz__pb_str(&n, 2, x1);
    sqz__pb_str(&n, 2, x2);
    sqz__pb_str(&n, 3, x1);
    sqz__pb_str(&n, 4, "Split");
    for (int k = 0; k < 2; k++) put_attr(&n, &split[k]);
    sqz__pb_msg_take(&b->g, 1, &n);
    OP(b, fresh(b, nx2), "Neg", x2);
    const attr cat[] = {{.name = "axis", .type = ATTR_INT, .i = -1}};
    OPA(b, fresh(b, rh), "Concat", cat, nx2, x1);
    OP(b, fresh(b, a), "Mul", x, cos4);
    OP(b, fresh(b, c), "Mul", rh, sin4);
    return OP(b, fresh(b, out), "Add", a, c);
}

/* The additive mask (B, 1, 1, S, T): 0 where key j <= P + i and attention_mask[j] = 1, else -FLT_MAX. */
static const char *attention_mask(gb *b, char *out) {
    nm T, S, P, Ts, Ps, kp, qp, kp2, qp2, causal, pad, pad3, ok, add;
    const attr s1[] = {{.name = "start", .type = ATTR_INT, .i = 1}, {.name = "end", .type = ATTR_INT, .i = 2}};
    OPA(b, fresh(b, T), "Shape", s1, "attention_mask");
    OPA(b, fresh(b, S), "Shape", s1, "input_ids");
    OP(b, fresh(b, P), "Sub", T, S);
    OP(b, fresh(b, Ts), "Squeeze", T);
    OP(b, fresh(b, Ps), "Squeeze", P);
    OP(b, fresh(b, kp), "Range", const_i64(b, 0), Ts, const_i64(b, 1));
    OP(b, fresh(b, qp), "Range", Ps, Ts, const_i64(b, 1));
    const int64_t ax0[1] = {0}, ax1[1] = {1}, ax12[2] = {1, 2};
    OP(b, fresh(b, kp2), "Unsqueeze", kp, const_i64s(b, ax0, 1));
    OP(b, fresh(b, qp2), "Unsqueeze", qp, const_i64s(b, ax1, 1));
    OP(b, fresh(b, causal), "LessOrEqual", kp2, qp2);
    const attr to_bool[] = {{.name = "to", .type = ATTR_INT, .i = SQZ__ONNX_BOOL}};
    OPA(b, fresh(b, pad), "Cast", to_bool, "attention_mask");
    OP(b, fresh(b, pad3), "Unsqueeze", pad, const_i64s(b, ax1, 1));
    OP(b, fresh(b, ok), "And", causal, pad3);
    OP(b, fresh(b, add), "Where", ok, const_f32(b, "c_zero", 0.0f), const_f32(b, "c_masked", -3.4028234663852886e38f));
    return OP(b, fresh(b, out), "Unsqueeze", add, const_i64s(b, ax12, 2));
}

typedef struct shared { const char *mask, *cos4, *sin4; } shared;

static const char *attention(gb *b, char *out, const char *h, int32_t l, const shared *sh) {
    const sqz_layer_dims *ld = &b->m->layers[l];
    const int64_t hd = b->m->hp.head_dim, H = ld->n_heads, KV = ld->n_kv_heads, g = H / KV;
    nm q, k, v, q4, k4, v4, qr, kr, pk, pv, q5, k5, kt, sc, ss, sm, pr, v5, o5, o4, ot, o3;
    char past_k[64], past_v[64], pres_k[64], pres_v[64];
    snprintf(past_k, sizeof past_k, "past_key_values.%d.key", l);
    snprintf(past_v, sizeof past_v, "past_key_values.%d.value", l);
    snprintf(pres_k, sizeof pres_k, "present.%d.key", l);
    snprintf(pres_v, sizeof pres_v, "present.%d.value", l);
    linear(b, q, h, SQZ_ROLE_ATTN_Q, l, NULL);
    linear(b, k, h, SQZ_ROLE_ATTN_K, l, NULL);
    linear(b, v, h, SQZ_ROLE_ATTN_V, l, NULL);
    heads_first(b, q4, q, H);
    heads_first(b, k4, k, KV);
    heads_first(b, v4, v, KV);
    rope(b, qr, q4, sh->cos4, sh->sin4);
    rope(b, kr, k4, sh->cos4, sh->sin4);
    const attr ax2[] = {{.name = "axis", .type = ATTR_INT, .i = 2}};
    snprintf(pk, sizeof pk, "%s", OPA(b, pres_k, "Concat", ax2, past_k, kr));
    snprintf(pv, sizeof pv, "%s", OPA(b, pres_v, "Concat", ax2, past_v, v4));
    const int64_t s5[5] = {0, KV, g, -1, hd}, s4[4] = {0, H, -1, hd}, s3[3] = {0, 0, H * hd}, a2[1] = {2};
    const int64_t pk5[5] = {0, 1, 2, 4, 3}, p4[4] = {0, 2, 1, 3};
    OP(b, fresh(b, q5), "Reshape", qr, const_i64s(b, s5, 5));
    OP(b, fresh(b, k5), "Unsqueeze", pk, const_i64s(b, a2, 1));
    const attr tk[] = {{.name = "perm", .type = ATTR_INTS, .ints = pk5, .n = 5}};
    OPA(b, fresh(b, kt), "Transpose", tk, k5);
    OP(b, fresh(b, sc), "MatMul", q5, kt);
    OP(b, fresh(b, ss), "Mul", sc, const_f32(b, "c_att_scale", 1.0f / sqrtf((float)hd)));
    OP(b, fresh(b, sm), "Add", ss, sh->mask);
    const attr last[] = {{.name = "axis", .type = ATTR_INT, .i = -1}};
    OPA(b, fresh(b, pr), "Softmax", last, sm);
    OP(b, fresh(b, v5), "Unsqueeze", pv, const_i64s(b, a2, 1));
    OP(b, fresh(b, o5), "MatMul", pr, v5);
    OP(b, fresh(b, o4), "Reshape", o5, const_i64s(b, s4, 4));
    const attr tp[] = {{.name = "perm", .type = ATTR_INTS, .ints = p4, .n = 4}};
    OPA(b, fresh(b, ot), "Transpose", tp, o4);
    OP(b, fresh(b, o3), "Reshape", ot, const_i64s(b, s3, 3));
    return linear(b, out, o3, SQZ_ROLE_ATTN_OUT, l, NULL);
}

static const char *ffn(gb *b, char *out, const char *h, int32_t l) {
    nm gt, up, sg, sl, a;
    linear(b, gt, h, SQZ_ROLE_FFN_GATE, l, NULL);
    linear(b, up, h, SQZ_ROLE_FFN_UP, l, NULL);
    OP(b, fresh(b, sg), "Sigmoid", gt);
    OP(b, fresh(b, sl), "Mul", gt, sg);
    OP(b, fresh(b, a), "Mul", sl, up);
    return linear(b, out, a, SQZ_ROLE_FFN_DOWN, l, NULL);
}

static void graph_io(gb *b) {
    const sqz_model *m = b->m;
    const char *bs[4] = {"batch_size", "sequence_length", "", ""};
    const int64_t ids[2] = {0, 0};
    value_info(b, 11, "input_ids", SQZ__ONNX_INT64, 2, ids, bs);
    const char *bt[2] = {"batch_size", "total_sequence_length"};
    value_info(b, 11, "attention_mask", SQZ__ONNX_INT64, 2, ids, bt);
    value_info(b, 11, "position_ids", SQZ__ONNX_INT64, 2, ids, bs);
    for (int l = 0; l < (int)m->hp.n_layers; l++) {
        char name[64];
        const int64_t d[4] = {0, m->layers[l].n_kv_heads, 0, m->hp.head_dim};
        const char *sp[4] = {"batch_size", "", "past_sequence_length", ""};
        const char *st[4] = {"batch_size", "", "total_sequence_length", ""};
        for (int kv = 0; kv < 2; kv++) {
            snprintf(name, sizeof name, "past_key_values.%d.%s", l, kv ? "value" : "key");
            value_info(b, 11, name, SQZ__ONNX_FLOAT, 4, d, sp);
            snprintf(name, sizeof name, "present.%d.%s", l, kv ? "value" : "key");
            value_info(b, 12, name, SQZ__ONNX_FLOAT, 4, d, st);
        }
    }
    const int64_t ld[3] = {0, 0, m->hp.vocab_size};
    value_info(b, 12, "logits", SQZ__ONNX_FLOAT, 3, ld, bs);
}

static void graph_body(gb *b) {
    const sqz_model *m = b->m;
    nm x, mask, cos, sin, cos4, sin4, hn, y;
    shared sh = {attention_mask(b, mask), NULL, NULL};
    const int64_t ax1[1] = {1};
    OP(b, fresh(b, cos), "Gather", "rotary.cos", "position_ids");
    OP(b, fresh(b, sin), "Gather", "rotary.sin", "position_ids");
    sh.cos4 = OP(b, fresh(b, cos4), "Unsqueeze", cos, const_i64s(b, ax1, 1));
    sh.sin4 = OP(b, fresh(b, sin4), "Unsqueeze", sin, const_i64s(b, ax1, 1));
    OP(b, fresh(b, x), "Gather", weight(b, SQZ_ROLE_TOKEN_EMBD, -1, SQZ_PARAM_WEIGHT), "input_ids");
    for (int32_t l = 0; l < (int32_t)m->hp.n_layers; l++) {
        nm x1, x2;
        rmsnorm(b, hn, x, SQZ_ROLE_ATTN_NORM, l);
        attention(b, y, hn, l, &sh);
        OP(b, fresh(b, x1), "Add", x, y);
        rmsnorm(b, hn, x1, SQZ_ROLE_FFN_NORM, l);
        ffn(b, y, hn, l);
        OP(b, fresh(b, x2), "Add", x1, y);
        strcpy(x, x2);
    }
    rmsnorm(b, hn, x, SQZ_ROLE_OUTPUT_NORM, -1);
    if (m->hp.tied_embeddings) {
        nm et;
        const int64_t perm[2] = {1, 0};
        const attr a[] = {{.name = "perm", .type = ATTR_INTS, .ints = perm, .n = 2}};
        OPA(b, fresh(b, et), "Transpose", a, weight(b, SQZ_ROLE_TOKEN_EMBD, -1, SQZ_PARAM_WEIGHT));
        const sqz__onnx_entry *bias = sqz__onnx_plan_find(b->p, SQZ_ROLE_OUTPUT, -1, SQZ_PARAM_BIAS);
        if (!bias) OP(b, "logits", "MatMul", hn, et);
        else OP(b, "logits", "Add", OP(b, fresh(b, y), "MatMul", hn, et), bias->part[0].name);
    } else {
        linear(b, y, hn, SQZ_ROLE_OUTPUT, -1, "logits");
    }
}

sqz_status sqz__onnx_model_proto(const sqz_model *m, const sqz__onnx_plan *p, const char *data_file,
                                 sqz__bytebuf *out) {
    gb b = {.m = m, .p = p, .data_file = data_file};
    b.consts = sqz__calloc(MAX_CONSTS, sizeof *b.consts);
    if (!b.consts) return SQZ_ERR_NOMEM;
    sqz__pb_str(&b.g, 2, "sqz_decoder");
    for (int64_t i = 0; i < p->n; i++) {
        const sqz__onnx_entry *e = &p->e[i];
        const char *dt = e->t && !e->is_linear && e->dtype != SQZ_DTYPE_F32 ? sqz_dtype_name(e->dtype) : NULL;
        for (int k = 0; k < e->n_parts; k++) ext_initializer(&b, &e->part[k], dt);
    }
    graph_io(&b);
    graph_body(&b);
    free(b.consts);
    sqz__bytebuf mp = {0}, ops = {0};
    sqz__pb_int(&mp, 1, 10); /* IR version 10 (opset 21) */
    sqz__pb_str(&mp, 2, "sqz");
    sqz__pb_str(&mp, 3, SQZ_VERSION_STRING);
    sqz__pb_msg_take(&mp, 7, &b.g);
    sqz__pb_str(&ops, 1, "");
    sqz__pb_int(&ops, 2, 21);
    sqz__pb_msg_take(&mp, 8, &ops);
    if (b.nbits) {
        sqz__pb_str(&ops, 1, "com.microsoft");
        sqz__pb_int(&ops, 2, 1);
        sqz__pb_msg_take(&mp, 8, &ops);
    }
    if (mp.oom) {
        free(mp.p);
        return SQZ_ERR_NOMEM;
    }
    *out = mp;
    return SQZ_OK;
}

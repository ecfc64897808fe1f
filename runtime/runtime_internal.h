/*
 * runtime/runtime_internal.h - what the files of runtime/ share: the session and the
 * helpers the llama and BERT passes are built from. Not public.
 */
#ifndef SQZ_RUNTIME_INTERNAL_H
#define SQZ_RUNTIME_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "core/internal.h"
#include "kernels/cpu/attn.h"
#include "kernels/cpu/fwd_ops.h"
#include "kernels/cpu/pool.h"
#include "kernels/cpu/qmatmul.h"
#include "sqz/family.h"
#include "sqz/runtime.h"

typedef struct sqz__family_ops sqz__family_ops;

/* The tensors of one layer by (role, param), resolved once when the session is made. */
typedef struct sqz__layer_tensors {
    const sqz_tensor *t[SQZ_ROLE_COUNT][2];
} sqz__layer_tensors;


/* A weight's copy in transparent huge pages (resident.c). */
typedef struct sqz__resident_copy {
    void *p;    /* the copy, or NULL */
    size_t len; /* bytes mapped for it */
    bool skip;  /* not copied: under 2 MB, not in a file mapping, or no memory for it */
} sqz__resident_copy;

struct sqz_session {
    const sqz_model *m;
    sqz_backend *be;
    bool own_be;
    sqz__pool *pool;
    int64_t max_tokens;
    sqz_weight_mode wmode;
    sqz_activations acts;   /* how products on stored weights take their input (sqz_session_opts) */
    sqz_hook_fn hook;
    void *hook_user;

    sqz__layer_tensors *lt;      /* n_layers entries */
    const sqz_tensor *glob[SQZ_ROLE_COUNT][2]; /* global tensors */
    const sqz_tensor *classifier; /* OUTPUT, or TOKEN_EMBD when tied */
    const sqz_family_info *fam;  /* the model's row of the family table */
    const sqz__family_ops *ops;  /* its runtime passes (family_ops.c) */

    void **wcache;               /* per tensor index: float copy (f32) or NULL; matrices and vectors */
    int64_t n_wcache;            /* entries of wcache: the model's tensors when the session was made (a
                                    pass may add tensors later; the session is then only freed) */
    int64_t wcache_bytes;
    sqz__resident_copy *wres;    /* per tensor index (n_wcache entries): its copy in huge pages
                                    (resident.c), or NULL when the session multiplies from the mapping */
    int64_t wres_bytes;

    /* dims: maxima over the layers */
    int64_t d, hd, max_q, max_kv, max_ff;

    float *rope_cos, *rope_sin;  /* (max_tokens, rope_dim/2): full-attention layers */
    float *rope_cos_l, *rope_sin_l; /* the same for sliding-window layers (their own base), or NULL */
    int64_t rope_dim;            /* dimensions rotated per head (hp.rope_dim or head_dim) */
    float *kcache, *vcache;      /* per layer (max_tokens, kv_dim_l), at kv_off[l] */
    int64_t *kv_off;
    int64_t *kv_valid;           /* per layer: positions [0, kv_valid) hold keys/values */
    /* sqz_forward_spans's window (NULL outside it): the spans, and per token its visible keys
     * (3 slots: its parent's [lo, hi) and its own span's first slot) */
    const sqz_span *spans;
    int64_t n_spans;
    const int64_t *span_vis;

    /* scratch, each for max_tokens rows */
    float *h;                    /* (T, d): normed input / block temporaries */
    float *q;                    /* (T, max_q) */
    float *att;                  /* (T, max_q): attention output */
    float *ff_a, *ff_b;          /* (T, max_ff) */
    float *scores;               /* (max_group * QB, T) attention scores of one query block */
    float *qg;                   /* (max_group * QB, hd) gathered queries / attention output */
    int64_t max_group;           /* largest n_heads / n_kv_heads over the layers */
    sqz__dot_fn dot;             /* the CPU kernels' f32 dot product (attention of few queries) */
    float *panel;                /* stream mode: (PANEL_ROWS, max k) dequantized rows */
    float *panel_out;            /* stream mode: (T, PANEL_ROWS) */
    float *xq;                   /* (T, max_k): the input of a scheme-quantized layer, made on first use */
    float *moe_x, *moe_y;        /* (T, d): a mixture's tokens gathered for one expert, and its output (NULL
                                    in a dense model) */
    float *moe_p;                /* (T, max_expert): router probabilities */
    int32_t *moe_sel;            /* (T, n_expert_used): the experts each token goes to; moe_w their weights */
    float *moe_w;
    int32_t *moe_rows;           /* (T): the (token, slot) entries t * k + j routed to one expert */
    float *moe_rw;               /* (T): their routing weights, for the hook */
    int64_t max_k;               /* the largest in_features among the matrices */
    /* a device backend (device.c): per tensor index its f32 copy in device memory, or NULL; the
     * input and output rows of one product */
    void **dcache;
    int64_t dcache_bytes;
    float *dx, *dy;
    size_t dx_cap, dy_cap;
    struct sqz__dev_fwd *dfwd;   /* the device block's activations (device_block.c), made on first use */
    struct sqz__dev_pf *dpf;     /* a layer's weights on their way to the device (device_prefetch.c) */
    void *pinned[32];            /* scratch buffers page-locked by the device backend (host_pin) */
    int n_pinned;
    int64_t scratch_bytes;
};

enum {
    SQZ__QBLOCK = SQZ__ATTN_QBLOCK, /* queries per attention block (causal blocking; kernels/cpu/attn.h) */
    SQZ__PANEL_ROWS = 256, /* rows per dequantized panel in stream mode */
};

/* The tensor of (role, layer, param) from the session's tables; NULL if absent. layer -1: global. */
const sqz_tensor *sqz__st(const sqz_session *s, sqz_role role, int32_t layer, sqz_param param);

/* A 1-D parameter (norm weight, bias) as f32 in *out: the tensor's own data when f32, else a
 * cached conversion. t NULL gives *out NULL and SQZ_OK. */
sqz_status sqz__vec(sqz_session *s, const sqz_tensor *t, const float **out);
/* sqz__vec of (role, layer, param). */
sqz_status sqz__param(sqz_session *s, sqz_role role, int32_t layer, sqz_param param, const float **out);

/* y (m, n) = x (m, k) . W^T + bias, W = t (n, k), through the backend; bias may be NULL.
 * Handles weights of any dtype with a float view (cache or stream mode). */
sqz_status sqz__linear(sqz_session *s, const float *x, int64_t m, const sqz_tensor *w, const float *bias, float *y);

/* y (m, rows) = x (m, k) . W_e^T for matrix e of a stacked 3-D weight (an expert of FFN_*_EXPS: shape
 * (n_expert, rows, k)), no bias; float or block types on the host backend. */
sqz_status sqz__linear_slice(sqz_session *s, const float *x, int64_t m, const sqz_tensor *w, int64_t e, float *y);
/* The FFN of a mixture-of-experts layer (moe.c): out (n, d) = sum over each token's top-k experts of
 * weight * down(act(gate(h)) * up(h)), the router's softmax choosing them. out may not alias h. */
sqz_status sqz__moe_ffn(sqz_session *s, int32_t layer, const float *h, int64_t n, float *out);
/* The scratch of a mixture of experts (none for a dense model; a device backend is refused), counted in
 * scratch_bytes; and its release. */
sqz_status sqz__moe_setup(sqz_session *s);
void sqz__moe_free(sqz_session *s);

/* The index of t in the session's model (its slot in wcache and dcache). */
int64_t sqz__tensor_index(const sqz_session *s, const sqz_tensor *t);
/* The bytes a product of m tokens reads for weight t: its copy in huge pages where the session
 * keeps such copies (resident.c; made on the first product of few tokens), else t->data. */
const void *sqz__resident(sqz_session *s, const sqz_tensor *t, int64_t m);
/* Forgets the copies of layer `layer`'s weights (-1: the global ones, -2: all). */
void sqz__resident_invalidate(sqz_session *s, int32_t layer);
void sqz__resident_free(sqz_session *s);

/* A device backend's products (device.c): y (m, n) = x (m, k) . W^T (no bias) with x and y in host
 * memory; init makes the weight table, invalidate drops the device copies of a layer (-2: all),
 * free releases everything on the device. */
sqz_status sqz__dev_init(sqz_session *s);
sqz_status sqz__dev_linear(sqz_session *s, const float *x, int64_t m, const sqz_tensor *w, float *y);
void sqz__dev_invalidate(sqz_session *s, int32_t layer);
void sqz__dev_free(sqz_session *s);
/* The tensor t as f32 in device memory (*out), uploaded (F16/BF16 widened on the device, other
 * types dequantized on the host) on first use and kept until its layer is invalidated. */
sqz_status sqz__dev_weight(sqz_session *s, const sqz_tensor *t, const float **out);
/* Whether t travels as stored F16/BF16 and is widened on the device (its to_f32 slot). */
bool sqz__dev_widens(const sqz_session *s, const sqz_tensor *t);
/* A stored block or float matrix t widened to f32 into dst (host) on the session's pool. */
sqz_status sqz__dev_widen_host(sqz_session *s, const sqz_tensor *t, float *dst);
/* The pending prefetch (sqz_session_prefetch) landed: its copies waited for, F16/BF16 widened, the
 * staging freed, its tensors' device copies in dcache. SQZ_OK when none is pending. */
typedef struct sqz__dev_pf sqz__dev_pf;
sqz_status sqz__dev_prefetch_finish(sqz_session *s);
/* Whether a prefetch of `layer` (-2: of any layer) is pending. */
bool sqz__dev_prefetch_pending(const sqz_session *s, int32_t layer);
/* A block with its activations in device memory (device_block.c): true when the session can run
 * `layer` at `pos` so (a device backend with its family's forward slots, a window from position 0,
 * no scheme-quantized matrix in the layer, SQZ_HOST_FORWARD unset); run computes what
 * sqz__llama_block / sqz__bert_block computes, hooks included (each hook's rows downloaded once, the device copy
 * offered beside them). free releases the activations. */
bool sqz__dev_block_ok(const sqz_session *s, int32_t layer, int64_t pos);
sqz_status sqz__dev_block_run(sqz_session *s, int32_t layer, float *x, int64_t n, int64_t pos);
void sqz__dev_block_free(sqz_session *s);
/* A hook event whose rows also sit in the session's backend memory at x_dev. */
sqz_status sqz__hook_dev(sqz_session *s, sqz_hook_point pt, int32_t layer, uint32_t roles, const float *x,
                         const float *x_dev, int64_t n, int64_t dim, int64_t pos);

/* A scratch buffer of a device session page-locked for fast products (large ones, while slots
 * last; nothing otherwise), and every such buffer unlocked before the scratch is freed. */
void sqz__dev_pin(sqz_session *s, void *p, size_t bytes);
void sqz__dev_unpin_all(sqz_session *s);

/* Checks every tensor once: quantization parameters (sqz_qparams_check), in_scale > 0, a float
 * view for every dtype. */
sqz_status sqz__check_weights(const sqz_session *s);

/* Embedding rows: out[i] = row tokens[i] of t (any dtype), for n tokens (ids checked by caller). */
sqz_status sqz__embed_rows(const sqz_tensor *t, const int32_t *tokens, int64_t n, float *out);

/* Multi-head attention of n queries at positions [pos, pos+n) of layer `layer`:
 * q (n, n_heads*hd) row stride ldq, keys/values from the layer's cache rows [0, pos+n),
 * causal or not; out (n, n_heads*hd) row stride ldo. */
void sqz__attention(sqz_session *s, int32_t layer, const float *q, int64_t ldq, int64_t n, int64_t pos, bool causal,
                    float *out, int64_t ldo);

/* Calls the hook, if any. */
sqz_status sqz__hook(sqz_session *s, sqz_hook_point pt, int32_t layer, uint32_t roles, const float *x, int64_t n,
                     int64_t dim, int64_t pos);

/* The runtime row of a family (family_ops.c): its passes. embed and block are required; head
 * is NULL for an encoder (sqz_family_info.lm_head false). Each is called after session.c
 * checked the window. */
struct sqz__family_ops {
    /* x (n, d_model) = the embedding of tokens (and types: NULL = all 0) at positions [pos, pos+n) */
    sqz_status (*embed)(sqz_session *s, const int32_t *tokens, const int32_t *types, int64_t n, int64_t pos,
                        float *x);
    /* block `layer` on x (n, d_model) in place at positions [pos, pos+n) */
    sqz_status (*block)(sqz_session *s, int32_t layer, float *x, int64_t n, int64_t pos);
    /* logits (n - logits_from, vocab) of rows [logits_from, n) of x; NULL: an encoder */
    sqz_status (*head)(sqz_session *s, const float *x, int64_t n, int64_t logits_from, float *logits);
};

/* The runtime row of family f; NULL when it has none. */
const sqz__family_ops *sqz__family_ops_get(sqz_family f);

/* Registers a family defined at run time: row in the family table (sqz__family_register) and
 * its passes here, under one new id in *out. For tests; the same rules as sqz__family_register.
 * Returns SQZ_OK, SQZ_ERR_INVALID_ARG (a pass missing), SQZ_ERR_UNSUPPORTED (no free slot). */
sqz_status sqz__family_ops_register(sqz_family_info *row, const sqz__family_ops *fops, sqz_family *out);

/* The per-family passes (llama.c, bert.c), the rows of family_ops.c. */
sqz_status sqz__llama_embed(sqz_session *s, const int32_t *tokens, const int32_t *types, int64_t n, int64_t pos,
                            float *x);
sqz_status sqz__llama_block(sqz_session *s, int32_t layer, float *x, int64_t n, int64_t pos);
sqz_status sqz__llama_head(sqz_session *s, const float *x, int64_t n, int64_t logits_from, float *logits);
sqz_status sqz__bert_embed(sqz_session *s, const int32_t *tokens, const int32_t *types, int64_t n, int64_t pos,
                           float *x);
sqz_status sqz__bert_block(sqz_session *s, int32_t layer, float *x, int64_t n, int64_t pos);

#endif

/*
 * runtime/device_block.c - a block with its activations in device memory (a session on a device
 * backend that has its family's block-forward slots, sqz/backend.h: llama rmsnorm, rope, attention,
 * silu_mul, add; BERT layernorm, attention, gelu, add; docs/device.md).
 *
 * The residual stream is uploaded when the block starts and downloaded when it ends; in between,
 * the norms, products (bias in the product), rotary, attention, SwiGLU / GELU and residual adds run
 * on the device, in the order and with the definitions of sqz__llama_block (runtime/llama.c) or
 * sqz__bert_block (runtime/bert.c, post-LN, the FFN's GELU), so that the
 * CPU's slots behind the device interface (cpu-offload) give its bits. Each hook's rows are
 * downloaded once, only when a hook is installed, and the event also carries the device copy (the
 * observers' Hessians then need no upload). The layer's keys and values go back into the host
 * cache, so that a later window that continues this one (pos > 0) finds them there; such a window,
 * and any layer with scheme-quantized matrices (in_scale, W8A8 inputs), runs the host block.
 */
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/backend_impl.h"
#include "runtime/runtime_internal.h"

#define ROLE_BIT(r) (1u << (unsigned)(r))

/* The device activations, each for max_tokens rows of the widest layer. */
typedef struct sqz__dev_fwd {
    float *res, *h, *q, *k, *v, *att, *fa, *fb; /* residual, normed / product out, q, k, v, attention, ffn */
    float *cos_t, *sin_t;                        /* the rotary tables */
} sqz__dev_fwd;

/* The slots each family's device block takes (with the f32 matmul). */
static const sqz_op llama_ops[] = {SQZ_OP_RMSNORM, SQZ_OP_ROPE, SQZ_OP_ATTENTION, SQZ_OP_SILU_MUL, SQZ_OP_ADD};
static const sqz_op bert_ops[] = {SQZ_OP_LAYERNORM, SQZ_OP_ATTENTION, SQZ_OP_GELU, SQZ_OP_ADD};

static bool has_slots(const sqz_backend *b, const sqz_op *ops, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!sqz_backend_supports(b, ops[i], SQZ_DTYPE_F32)) return false;
    return sqz_backend_supports(b, SQZ_OP_MATMUL, SQZ_DTYPE_F32);
}

/* The family row's block: post-LayerNorm with GELU (BERT's), else pre-RMSNorm with SwiGLU (llama's). */
static bool is_bert(const sqz_session *s) { return s->fam->norm == SQZ_NORM_LAYER && !s->fam->pre_norm; }

/* What the device block does not do (the newer decoders' parts: runtime/llama.c): such a layer runs
 * on the host, its products still on the device. */
static bool host_parts(const sqz_session *s, int32_t layer) {
    const sqz_hparams *hp = &s->m->hp;
    static const sqz_role extra[] = {SQZ_ROLE_ATTN_Q_NORM, SQZ_ROLE_ATTN_K_NORM, SQZ_ROLE_ATTN_POST_NORM,
                                     SQZ_ROLE_FFN_POST_NORM};
    for (size_t i = 0; i < sizeof extra / sizeof *extra; i++)
        if (s->lt[layer].t[extra[i]][SQZ_PARAM_WEIGHT]) return true;
    return s->m->layers[layer].window > 0 || hp->attn_scale != 0.0f || (s->rope_dim > 0 && s->rope_dim != s->hd) ||
           hp->act == SQZ_ACT_GELU_TANH;
}

bool sqz__dev_block_ok(const sqz_session *s, int32_t layer, int64_t pos) {
    if (!s->dcache || pos != 0 || host_parts(s, layer)) return false;
    if (is_bert(s) ? !has_slots(s->be, bert_ops, sizeof bert_ops / sizeof *bert_ops)
                   : !has_slots(s->be, llama_ops, sizeof llama_ops / sizeof *llama_ops) || !s->rope_cos)
        return false;
    const char *env = getenv("SQZ_HOST_FORWARD");
    if (env && *env && strcmp(env, "0") != 0) return false;
    for (int r = 0; r < SQZ_ROLE_COUNT; r++) {
        const sqz_tensor *t = s->lt[layer].t[r][SQZ_PARAM_WEIGHT];
        if (t && t->qp) return false;
    }
    return true;
}

void sqz__dev_block_free(sqz_session *s) {
    sqz__dev_fwd *f = s->dfwd;
    if (!f) return;
    float *all[] = {f->res, f->h, f->q, f->k, f->v, f->att, f->fa, f->fb, f->cos_t, f->sin_t};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) s->be->ops->free(s->be->ctx, all[i]);
    free(f);
    s->dfwd = NULL;
}

static sqz_status dev_buf(sqz_session *s, int64_t rows, int64_t cols, const char *what, float **out) {
    *out = s->be->ops->alloc(s->be->ctx, (size_t)(rows > 0 ? rows : 1) * (size_t)(cols > 0 ? cols : 1) * sizeof(float));
    if (*out) return SQZ_OK;
    sqz__error_prefix("runtime: the device block's %s (%lld x %lld floats) on %s", what, (long long)rows,
                      (long long)cols, s->be->ops->name);
    return SQZ_ERR_NOMEM;
}

static sqz_status make_fwd(sqz_session *s) {
    sqz__dev_fwd *f = sqz__calloc(1, sizeof *f);
    if (!f) return SQZ_ERR_NOMEM;
    s->dfwd = f;
    const int64_t T = s->max_tokens, half = s->hd / 2;
    SQZ_TRY(dev_buf(s, T, s->d, "residual stream", &f->res));
    SQZ_TRY(dev_buf(s, T, s->d > s->max_q ? s->d : s->max_q, "normed rows", &f->h));
    SQZ_TRY(dev_buf(s, T, s->max_q, "queries", &f->q));
    SQZ_TRY(dev_buf(s, T, s->max_kv, "keys", &f->k));
    SQZ_TRY(dev_buf(s, T, s->max_kv, "values", &f->v));
    SQZ_TRY(dev_buf(s, T, s->max_q, "attention output", &f->att));
    SQZ_TRY(dev_buf(s, T, s->max_ff, "gate rows", &f->fa));
    SQZ_TRY(dev_buf(s, T, s->max_ff, "up rows", &f->fb));
    if (!s->rope_cos) return SQZ_OK; /* absolute positions (BERT) */
    SQZ_TRY(dev_buf(s, T, half, "rotary cosines", &f->cos_t));
    SQZ_TRY(dev_buf(s, T, half, "rotary sines", &f->sin_t));
    const size_t tb = (size_t)T * (size_t)half * sizeof(float);
    SQZ_TRY(s->be->ops->upload(s->be->ctx, f->cos_t, s->rope_cos, tb));
    return s->be->ops->upload(s->be->ctx, f->sin_t, s->rope_sin, tb);
}

/* y (n, out) = x W^T + b on the device, for the linear layer of role r. */
static sqz_status dev_linear(sqz_session *s, sqz_role r, int32_t layer, const float *x, int64_t n, float *y) {
    const sqz_tensor *w = sqz__st(s, r, layer, SQZ_PARAM_WEIGHT), *bt = sqz__st(s, r, layer, SQZ_PARAM_BIAS);
    SQZ_RETURN_IF(!w->data, SQZ_ERR_INVALID_ARG, "runtime: tensor '%s' has no data loaded", w->name);
    const float *dw, *db = NULL;
    double t0 = sqz__prof_begin();
    SQZ_TRY(sqz__dev_weight(s, w, &dw));
    if (bt) SQZ_TRY(sqz__dev_weight(s, bt, &db));
    sqz__prof_end(SQZ__PROF_DEV_WEIGHT, t0);
    const sqz_matmul_args a = {.m = n, .n = w->shape[0], .k = sqz_tensor_row_len(w), .x = x, .w = dw,
                               .w_dtype = SQZ_DTYPE_F32, .bias = db, .y = y};
    t0 = sqz__prof_begin();
    const sqz_status st = s->be->ops->matmul(s->be->ctx, &a);
    sqz__prof_end(SQZ__PROF_DEV_MATMUL, t0);
    sqz__prof_end(SQZ__PROF_FWD_LINEAR, t0);
    if (st != SQZ_OK) sqz__error_prefix("runtime: tensor '%s' on %s", w->name, s->be->ops->name);
    return st;
}

static sqz_status download(sqz_session *s, float *host, const float *dev, int64_t rows, int64_t cols) {
    const sqz_backend_ops *ops = s->be->ops;
    const double t0 = sqz__prof_begin();
    sqz_status st = ops->download(s->be->ctx, host, dev, (size_t)rows * (size_t)cols * sizeof(float));
    if (st == SQZ_OK) st = ops->synchronize(s->be->ctx);
    sqz__prof_end(SQZ__PROF_DEV_BLOCK_XFER, t0);
    return st;
}

/* The LINEAR_IN hook of `roles` on device rows d (n, dim): downloaded into host scratch first. */
static sqz_status hook_in(sqz_session *s, int32_t layer, uint32_t roles, const float *d, float *host, int64_t n,
                          int64_t dim) {
    if (!s->hook) return SQZ_OK;
    SQZ_TRY(download(s, host, d, n, dim));
    return sqz__hook_dev(s, SQZ_HOOK_LINEAR_IN, layer, roles, host, d, n, dim, 0);
}

static sqz_status norm(sqz_session *s, sqz_role r, int32_t layer, const float *x, int64_t n, float *y) {
    const float *w;
    SQZ_TRY(sqz__dev_weight(s, sqz__st(s, r, layer, SQZ_PARAM_WEIGHT), &w));
    const sqz_rmsnorm_args a = {x, w, y, s->m->hp.norm_eps, n, s->d};
    return s->be->ops->rmsnorm(s->be->ctx, &a);
}

static sqz_status eltwise(sqz_session *s, bool silu, float *x, const float *y, int64_t n) {
    const sqz_eltwise_args a = {x, y, n};
    return silu ? s->be->ops->silu_mul(s->be->ctx, &a) : s->be->ops->add(s->be->ctx, &a);
}

static sqz_status rope(sqz_session *s, float *x, int64_t ld, int64_t n, int64_t heads) {
    const sqz_rope_args a = {x, ld, n, heads, s->hd, 0, s->m->hp.rope_layout == SQZ_ROPE_HALF, s->dfwd->cos_t,
                             s->dfwd->sin_t};
    return s->be->ops->rope(s->be->ctx, &a);
}

/* q, k, v of the input rows in (hooked as q|k|v's input from host rows in_host), rotated when the
 * model is rotary; the keys and values back into the host cache; attention into f->att. */
static sqz_status qkv_attention(sqz_session *s, int32_t layer, const float *in, float *in_host, bool download_in,
                                int64_t n) {
    const sqz_layer_dims *ld = &s->m->layers[layer];
    const int64_t hd = s->hd, qd = ld->n_heads * hd, kvd = ld->n_kv_heads * hd;
    sqz__dev_fwd *f = s->dfwd;
    const uint32_t qkv = ROLE_BIT(SQZ_ROLE_ATTN_Q) | ROLE_BIT(SQZ_ROLE_ATTN_K) | ROLE_BIT(SQZ_ROLE_ATTN_V);
    if (download_in) SQZ_TRY(hook_in(s, layer, qkv, in, in_host, n, s->d));
    else SQZ_TRY(sqz__hook_dev(s, SQZ_HOOK_LINEAR_IN, layer, qkv, in_host, in, n, s->d, 0));
    SQZ_TRY(dev_linear(s, SQZ_ROLE_ATTN_Q, layer, in, n, f->q));
    SQZ_TRY(dev_linear(s, SQZ_ROLE_ATTN_K, layer, in, n, f->k));
    SQZ_TRY(dev_linear(s, SQZ_ROLE_ATTN_V, layer, in, n, f->v));
    if (f->cos_t) {
        SQZ_TRY(rope(s, f->q, qd, n, ld->n_heads));
        SQZ_TRY(rope(s, f->k, kvd, n, ld->n_kv_heads));
    }
    SQZ_TRY(download(s, s->kcache + s->kv_off[layer], f->k, n, kvd));
    SQZ_TRY(download(s, s->vcache + s->kv_off[layer], f->v, n, kvd));
    s->kv_valid[layer] = n;
    const sqz_attention_args a = {.q = f->q, .ldq = qd, .k = f->k, .v = f->v, .ldkv = kvd, .out = f->att,
                                  .ldo = qd, .n = n, .pos = 0, .n_heads = ld->n_heads,
                                  .n_kv_heads = ld->n_kv_heads, .head_dim = hd, .causal = s->fam->causal};
    const double t0 = sqz__prof_begin();
    SQZ_TRY(s->be->ops->attention(s->be->ctx, &a));
    sqz__prof_end(SQZ__PROF_FWD_ATTN, t0);
    return hook_in(s, layer, ROLE_BIT(SQZ_ROLE_ATTN_OUT), f->att, s->att, n, qd);
}

/* llama: the attention half on the normed rows in f->h; the output product added to the residual. */
static sqz_status attention(sqz_session *s, int32_t layer, int64_t n) {
    sqz__dev_fwd *f = s->dfwd;
    SQZ_TRY(qkv_attention(s, layer, f->h, s->h, true, n));
    SQZ_TRY(dev_linear(s, SQZ_ROLE_ATTN_OUT, layer, f->att, n, f->h));
    return eltwise(s, false, f->res, f->h, n * s->d);
}

static sqz_status feed_forward(sqz_session *s, int32_t layer, int64_t n) {
    const int64_t ff = s->m->layers[layer].d_ff;
    sqz__dev_fwd *f = s->dfwd;
    SQZ_TRY(norm(s, SQZ_ROLE_FFN_NORM, layer, f->res, n, f->h));
    SQZ_TRY(hook_in(s, layer, ROLE_BIT(SQZ_ROLE_FFN_GATE) | ROLE_BIT(SQZ_ROLE_FFN_UP), f->h, s->h, n, s->d));
    SQZ_TRY(dev_linear(s, SQZ_ROLE_FFN_GATE, layer, f->h, n, f->fa));
    SQZ_TRY(dev_linear(s, SQZ_ROLE_FFN_UP, layer, f->h, n, f->fb));
    SQZ_TRY(eltwise(s, true, f->fa, f->fb, n * ff));
    SQZ_TRY(hook_in(s, layer, ROLE_BIT(SQZ_ROLE_FFN_DOWN), f->fa, s->ff_a, n, ff));
    SQZ_TRY(dev_linear(s, SQZ_ROLE_FFN_DOWN, layer, f->fa, n, f->h));
    return eltwise(s, false, f->res, f->h, n * s->d);
}

static sqz_status layernorm(sqz_session *s, sqz_role r, int32_t layer, float *x, int64_t n) {
    const float *w, *b = NULL;
    const sqz_tensor *bt = sqz__st(s, r, layer, SQZ_PARAM_BIAS);
    SQZ_TRY(sqz__dev_weight(s, sqz__st(s, r, layer, SQZ_PARAM_WEIGHT), &w));
    if (bt) SQZ_TRY(sqz__dev_weight(s, bt, &b));
    const sqz_layernorm_args a = {x, w, b, x, s->m->hp.norm_eps, n, s->d};
    return s->be->ops->layernorm(s->be->ctx, &a);
}

/* BERT (post-LN, runtime/bert.c): the residual stream itself is the attention's and the FFN's input. */
static sqz_status bert(sqz_session *s, int32_t layer, float *x, int64_t n) {
    const int64_t ff = s->m->layers[layer].d_ff;
    sqz__dev_fwd *f = s->dfwd;
    SQZ_TRY(qkv_attention(s, layer, f->res, x, false, n));
    SQZ_TRY(dev_linear(s, SQZ_ROLE_ATTN_OUT, layer, f->att, n, f->h));
    SQZ_TRY(eltwise(s, false, f->res, f->h, n * s->d));
    SQZ_TRY(layernorm(s, SQZ_ROLE_ATTN_OUT_NORM, layer, f->res, n));
    SQZ_TRY(hook_in(s, layer, ROLE_BIT(SQZ_ROLE_FFN_UP), f->res, s->h, n, s->d));
    SQZ_TRY(dev_linear(s, SQZ_ROLE_FFN_UP, layer, f->res, n, f->fa));
    const sqz_eltwise_args g = {f->fa, NULL, n * ff};
    SQZ_TRY(s->be->ops->gelu(s->be->ctx, &g));
    SQZ_TRY(hook_in(s, layer, ROLE_BIT(SQZ_ROLE_FFN_DOWN), f->fa, s->ff_a, n, ff));
    SQZ_TRY(dev_linear(s, SQZ_ROLE_FFN_DOWN, layer, f->fa, n, f->h));
    SQZ_TRY(eltwise(s, false, f->res, f->h, n * s->d));
    return layernorm(s, SQZ_ROLE_LAYER_OUT_NORM, layer, f->res, n);
}

static sqz_status run(sqz_session *s, int32_t layer, float *x, int64_t n) {
    if (!s->dfwd) {
        const sqz_status st = make_fwd(s);
        if (st != SQZ_OK) { /* no half-made activations left for a later call */
            sqz__dev_block_free(s);
            return st;
        }
    }
    sqz__dev_fwd *f = s->dfwd;
    SQZ_TRY(sqz__hook(s, SQZ_HOOK_BLOCK_IN, layer, 0, x, n, s->d, 0));
    SQZ_TRY(s->be->ops->upload(s->be->ctx, f->res, x, (size_t)n * (size_t)s->d * sizeof(float)));
    if (is_bert(s)) {
        SQZ_TRY(bert(s, layer, x, n));
    } else {
        SQZ_TRY(norm(s, SQZ_ROLE_ATTN_NORM, layer, f->res, n, f->h));
        SQZ_TRY(attention(s, layer, n));
        SQZ_TRY(feed_forward(s, layer, n));
    }
    SQZ_TRY(download(s, x, f->res, n, s->d));
    return sqz__hook_dev(s, SQZ_HOOK_BLOCK_OUT, layer, 0, x, f->res, n, s->d, 0);
}

sqz_status sqz__dev_block_run(sqz_session *s, int32_t layer, float *x, int64_t n, int64_t pos) {
    (void)pos;
    const sqz_status st = run(s, layer, x, n);
    if (st != SQZ_OK) sqz__error_prefix("runtime: block %d on %s", layer, s->be->ops->name);
    return st;
}

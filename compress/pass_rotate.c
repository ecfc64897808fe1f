/*
 * compress/pass_rotate.c - `--rotate WHAT`: an offline orthogonal rotation folded into the
 * weights (QuaRot's R1 and R2, Ashkboos et al. 2024; SpinQuant's R1/R2 with a fixed randomized
 * Hadamard instead of a learned one), exact in real arithmetic: the rotated model computes the
 * same function, and stock runtimes (llama.cpp, transformers) run it unchanged. What it buys is
 * weights without the outlier channels that 3-4-bit grids choke on, so it goes before --quant.
 *
 *   SPEC := WHAT (':' PART)*     WHAT: all | residual | heads
 *   PART := seed=N               the random signs of the Hadamard transform (0: none)
 *   e.g. all  residual  heads  all:seed=7
 *
 * residual (R1): the residual stream x becomes x Q (Q: d_model x d_model, quant/rotate.c):
 *   - every RMSNorm weight g is folded into the linears that read the norm's output
 *     (W <- W diag(g), g <- 1), because RMSNorm(x Q) = RMSNorm(x) Q only without a per-channel g;
 *   - the linears that read the stream (q, k, v, gate, up, the classifier) rotate their input
 *     columns: W <- W Q;
 *   - those that write it (attn_output, ffn_down) rotate their output rows: W <- Q^T W
 *     (and a bias b <- Q^T b); the token embedding rotates its rows: E <- E Q;
 *   - a tied classifier cannot stay tied (the embedding is E Q, the classifier E diag(g) Q): an
 *     untied output tensor is added and the model written untied.
 * heads (R2): each value head's output space is rotated by H (head_dim x head_dim): the rows of
 *   every kv head's block of attn_v (and its bias) become H^T V_g, the columns of every query
 *   head's block of attn_output become O_h H (GQA: one H for all heads, so a value head shared by
 *   several query heads works).
 * Widths that are not powers of two: Q = diag(s) (H_{2^k} (x) C_m) with C_m the orthonormal DCT
 * of the odd factor m (quant/rotate.c).
 *
 * Refused with the reason: families whose norm is not a pre-norm RMSNorm (BERT's LayerNorm
 * subtracts the mean and adds a bias, which a rotation does not commute with), norms with a
 * bias, learned position embeddings. Every tensor the rotation touches becomes F32 (a quantized
 * source is dequantized first: put --rotate before --quant).
 */
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compress/compress_internal.h"
#include "quant/quant_internal.h"
#include "sqz/edit.h"
#include "sqz/family.h"

enum { ROT_RESIDUAL = 1, ROT_HEADS = 2, ROT_ALL = 3 };

typedef struct rotate_args {
    int what;
    int64_t seed;
} rotate_args;

static const int what_values[] = {ROT_ALL, ROT_RESIDUAL, ROT_HEADS};

static const sqz_opt rotate_opts[] = {
    {.name = "what", .type = SQZ_OPT_CHOICE, .offset = offsetof(rotate_args, what),
     .flags = SQZ_OPT_POSITIONAL | SQZ_OPT_REQUIRED, .choices = "all|residual|heads", .values = what_values,
     .metavar = "WHAT",
     .help = "residual: the residual stream (R1: norms folded, embedding and classifier rotated); heads: each "
             "value head (R2: attn_v rows, attn_output columns); all: both"},
    {.name = "seed", .type = SQZ_OPT_INT, .offset = offsetof(rotate_args, seed), .min = 0, .max = 4e18,
     .def = "1" /* SQZ__ROTATE_SEED */, .help = "random signs of the Hadamard transform (0: none)"},
};

/* A tensor's values as a new f32 buffer (NULL: error set). */
static float *f32_copy(const sqz_tensor *t) {
    float *x = sqz__malloc((size_t)sqz_tensor_nelements(t) * sizeof(float));
    if (x && sqz_tensor_to_f32(t, x) != SQZ_OK) {
        free(x);
        return NULL;
    }
    return x;
}

/* Replaces t's data by the f32 buffer x (taken). */
static sqz_status put_f32(sqz_model *m, sqz_tensor *t, float *x) {
    sqz_status st = sqz_tensor_replace(m, t, SQZ_DTYPE_F32, t->ndim, t->shape, x,
                                       (size_t)sqz_tensor_nelements(t) * sizeof(float), true);
    if (st != SQZ_OK) free(x);
    return st;
}

/* W <- W diag(g) Q (g NULL: W Q) for a 2-D weight (rows, d). */
static sqz_status rotate_in(sqz_model *m, sqz_tensor *t, const float *g, const float *q, int64_t d) {
    SQZ_RETURN_IF(t->ndim != 2 || t->shape[1] != d, SQZ_ERR_SHAPE, "--rotate: tensor '%s' is not (rows, %" PRId64 ")",
                  t->name, d);
    const int64_t rows = t->shape[0];
    float *w = f32_copy(t), *o = sqz__malloc((size_t)rows * (size_t)d * sizeof(float));
    if (!w || !o) {
        free(w);
        free(o);
        return SQZ_ERR_NOMEM;
    }
    for (int64_t r = 0; g && r < rows; r++)
        for (int64_t j = 0; j < d; j++) w[r * d + j] *= g[j];
    sqz__rotate_right(w, rows, d, q, o);
    free(w);
    return put_f32(m, t, o);
}

/* W <- Q^T W for a weight (d, cols) or a bias (d). */
static sqz_status rotate_out(sqz_model *m, sqz_tensor *t, const float *q, int64_t d) {
    if (!t) return SQZ_OK;
    SQZ_RETURN_IF(t->shape[0] != d, SQZ_ERR_SHAPE, "--rotate: tensor '%s' has %" PRId64 " rows, not %" PRId64, t->name,
                  t->shape[0], d);
    const int64_t cols = sqz_tensor_nelements(t) / d;
    float *w = f32_copy(t), *o = sqz__malloc((size_t)sqz_tensor_nelements(t) * sizeof(float));
    if (!w || !o) {
        free(w);
        free(o);
        return SQZ_ERR_NOMEM;
    }
    sqz__rotate_left_t(q, d, w, cols, o);
    free(w);
    return put_f32(m, t, o);
}

/* The norm's weight as f32 (into g) and the norm reset to ones. */
static sqz_status take_norm(sqz_model *m, sqz_tensor *t, float *g, int64_t d) {
    SQZ_RETURN_IF(!t || sqz_tensor_nelements(t) != d, SQZ_ERR_SHAPE,
                  "--rotate: a norm weight of %" PRId64 " entries is missing", d);
    SQZ_TRY(sqz_tensor_to_f32(t, g));
    float *one = sqz__malloc((size_t)d * sizeof(float));
    if (!one) return SQZ_ERR_NOMEM;
    for (int64_t j = 0; j < d; j++) one[j] = 1.0f;
    return put_f32(m, t, one);
}

/* The untied classifier: a copy of the token embedding, as an OUTPUT tensor. */
static sqz_status untie(sqz_model *m, const sqz_tensor *e) {
    float *w = f32_copy(e);
    if (!w) return SQZ_ERR_NOMEM;
    sqz_tensor t = {.name = (char *)"output.weight", .role = SQZ_ROLE_OUTPUT, .param = SQZ_PARAM_WEIGHT, .layer = -1,
                    .dtype = SQZ_DTYPE_F32, .ndim = 2, .shape = {e->shape[0], e->shape[1], 1, 1}, .data = w,
                    .nbytes = (size_t)sqz_tensor_nelements(e) * sizeof(float), .owned = true};
    if (!sqz_model_add_tensor(m, &t)) {
        free(w);
        return SQZ_ERR_NOMEM;
    }
    m->hp.tied_embeddings = false;
    return SQZ_OK;
}

static sqz_status rotate_residual(sqz_model *m, const float *q) {
    const int64_t d = m->hp.d_model;
    float *g = sqz__malloc((size_t)d * sizeof(float));
    if (!g) return SQZ_ERR_NOMEM;
    sqz_status st = SQZ_OK;
    sqz_tensor *e = sqz_model_get(m, SQZ_ROLE_TOKEN_EMBD, -1, SQZ_PARAM_WEIGHT);
    if (m->hp.tied_embeddings && e) st = untie(m, e);
    if (st == SQZ_OK && e) st = rotate_in(m, e, NULL, q, d);
    static const sqz_role attn_in[] = {SQZ_ROLE_ATTN_Q, SQZ_ROLE_ATTN_K, SQZ_ROLE_ATTN_V};
    static const sqz_role ffn_in[] = {SQZ_ROLE_FFN_GATE, SQZ_ROLE_FFN_UP};
    for (int32_t l = 0; st == SQZ_OK && l < m->hp.n_layers; l++) {
        st = take_norm(m, sqz_model_get(m, SQZ_ROLE_ATTN_NORM, l, SQZ_PARAM_WEIGHT), g, d);
        for (int i = 0; st == SQZ_OK && i < 3; i++)
            st = rotate_in(m, sqz_model_get(m, attn_in[i], l, SQZ_PARAM_WEIGHT), g, q, d);
        if (st == SQZ_OK) st = rotate_out(m, sqz_model_get(m, SQZ_ROLE_ATTN_OUT, l, SQZ_PARAM_WEIGHT), q, d);
        if (st == SQZ_OK) st = rotate_out(m, sqz_model_get(m, SQZ_ROLE_ATTN_OUT, l, SQZ_PARAM_BIAS), q, d);
        if (st == SQZ_OK) st = take_norm(m, sqz_model_get(m, SQZ_ROLE_FFN_NORM, l, SQZ_PARAM_WEIGHT), g, d);
        for (int i = 0; st == SQZ_OK && i < 2; i++) {
            sqz_tensor *t = sqz_model_get(m, ffn_in[i], l, SQZ_PARAM_WEIGHT);
            if (t) st = rotate_in(m, t, g, q, d);
        }
        if (st == SQZ_OK) st = rotate_out(m, sqz_model_get(m, SQZ_ROLE_FFN_DOWN, l, SQZ_PARAM_WEIGHT), q, d);
        if (st == SQZ_OK) st = rotate_out(m, sqz_model_get(m, SQZ_ROLE_FFN_DOWN, l, SQZ_PARAM_BIAS), q, d);
        if (st != SQZ_OK) sqz__error_prefix("layer %d", (int)l);
    }
    if (st == SQZ_OK) st = take_norm(m, sqz_model_get(m, SQZ_ROLE_OUTPUT_NORM, -1, SQZ_PARAM_WEIGHT), g, d);
    sqz_tensor *out = sqz_model_get(m, SQZ_ROLE_OUTPUT, -1, SQZ_PARAM_WEIGHT);
    if (st == SQZ_OK && out) st = rotate_in(m, out, g, q, d);
    free(g);
    return st;
}

/* R2 on layer l: V_g <- H^T V_g (rows of each kv head, and its bias), O_h <- O_h H (columns). */
static sqz_status rotate_heads_layer(sqz_model *m, int32_t l, const float *h, int64_t hd) {
    sqz_tensor *v = sqz_model_get(m, SQZ_ROLE_ATTN_V, l, SQZ_PARAM_WEIGHT);
    sqz_tensor *vb = sqz_model_get(m, SQZ_ROLE_ATTN_V, l, SQZ_PARAM_BIAS);
    sqz_tensor *o = sqz_model_get(m, SQZ_ROLE_ATTN_OUT, l, SQZ_PARAM_WEIGHT);
    const int64_t nkv = m->layers[l].n_kv_heads, nh = m->layers[l].n_heads, d = m->hp.d_model;
    SQZ_RETURN_IF(!v || !o || v->shape[0] != nkv * hd || o->shape[1] != nh * hd, SQZ_ERR_SHAPE,
                  "--rotate heads: attn_v / attn_output of layer %d do not hold %" PRId64 " x %" PRId64 " heads",
                  (int)l, nkv, hd);
    float *vw = f32_copy(v), *ow = f32_copy(o), *vbw = vb ? f32_copy(vb) : NULL;
    float *tmp = sqz__malloc((size_t)(hd * d) * sizeof(float));
    float *oo = sqz__malloc((size_t)(d * nh * hd) * sizeof(float));
    sqz_status st = SQZ_ERR_NOMEM;
    if (!vw || !ow || (vb && !vbw) || !tmp || !oo) goto done;
    for (int64_t g = 0; g < nkv; g++) { /* the hd rows of head g: H^T V_g */
        sqz__rotate_left_t(h, hd, vw + g * hd * d, d, tmp);
        memcpy(vw + g * hd * d, tmp, (size_t)(hd * d) * sizeof(float));
        if (vbw) {
            sqz__rotate_left_t(h, hd, vbw + g * hd, 1, tmp);
            memcpy(vbw + g * hd, tmp, (size_t)hd * sizeof(float));
        }
    }
    /* attn_output (d, nh * hd) read as (d * nh, hd): every block of hd columns is one row, O_h H */
    sqz__rotate_right(ow, d * nh, hd, h, oo);
    st = put_f32(m, v, vw);
    vw = NULL;
    if (st == SQZ_OK) st = put_f32(m, o, oo);
    oo = NULL;
    if (st == SQZ_OK && vb) st = put_f32(m, vb, vbw);
    vbw = NULL;
done:
    free(vw);
    free(ow);
    free(vbw);
    free(tmp);
    free(oo);
    return st;
}

/* The families a rotation (what) folds into exactly, or the reason it does not (spec: the
 * SPEC errors name). */
static sqz_status check_rotatable(const sqz_model *m, int what, const char *spec) {
    const sqz_family_info *fi = sqz_family_get(m->hp.family);
    SQZ_RETURN_IF(!fi, SQZ_ERR_UNSUPPORTED, "--rotate: unknown model family");
    if (what & ROT_RESIDUAL) {
        SQZ_RETURN_IF(fi->norm != SQZ_NORM_RMS || !fi->pre_norm, SQZ_ERR_UNSUPPORTED,
                      "--rotate %s: the %s family normalizes with %s: a rotation of the residual stream does not "
                      "commute with mean subtraction and a bias, so it cannot be folded into the weights (use --rotate "
                      "heads)", spec, fi->name, fi->norm == SQZ_NORM_LAYER ? "LayerNorm" : "a post-norm");
        SQZ_RETURN_IF(fi->no_rotation != NULL, SQZ_ERR_UNSUPPORTED, "--rotate %s: the %s family: %s (use --rotate heads)",
                      spec, fi->name, fi->no_rotation);
        SQZ_RETURN_IF(sqz_model_get(m, SQZ_ROLE_POS_EMBD, -1, SQZ_PARAM_WEIGHT) != NULL, SQZ_ERR_UNSUPPORTED,
                      "--rotate %s: learned position embeddings are added to the stream (not supported)", spec);
        for (int64_t i = 0; i < m->n_tensors; i++) {
            const sqz_tensor *t = &m->tensors[i];
            const bool norm = t->role == SQZ_ROLE_ATTN_NORM || t->role == SQZ_ROLE_FFN_NORM ||
                              t->role == SQZ_ROLE_OUTPUT_NORM;
            SQZ_RETURN_IF(norm && t->param == SQZ_PARAM_BIAS, SQZ_ERR_UNSUPPORTED,
                          "--rotate %s: tensor '%s': a norm with a bias cannot be folded", spec, t->name);
        }
    }
    return SQZ_OK;
}

static sqz_status rotate_check_model(const sqz_stage *s, const sqz_model *m, int64_t *n_layers, bool have_windows) {
    (void)n_layers;
    (void)have_windows;
    return check_rotatable(m, ((const rotate_args *)s->args)->what, s->spec);
}

/* The rotation (what, seed) folded into m's weights; errors prefixed with spec. */
static sqz_status rotate_model(sqz_model *m, int what, int64_t seed, const char *spec) {
    float *q = NULL;
    if (what & ROT_RESIDUAL) {
        SQZ_TRY(sqz__rotation_make(m->hp.d_model, (uint64_t)seed, &q));
        sqz_status st = rotate_residual(m, q);
        free(q);
        if (st != SQZ_OK) {
            sqz__error_prefix("--rotate '%s'", spec);
            return st;
        }
    }
    if (what & ROT_HEADS) {
        SQZ_TRY(sqz__rotation_make(m->hp.head_dim, (uint64_t)seed, &q));
        sqz_status st = SQZ_OK;
        for (int32_t l = 0; st == SQZ_OK && l < m->hp.n_layers; l++) st = rotate_heads_layer(m, l, q, m->hp.head_dim);
        free(q);
        if (st != SQZ_OK) {
            sqz__error_prefix("--rotate '%s'", spec);
            return st;
        }
    }
    return SQZ_OK;
}

sqz_status sqz__rotate_check_all(const sqz_model *m) { return check_rotatable(m, ROT_ALL, "all"); }

sqz_status sqz__rotate_all(sqz_model *m) { return rotate_model(m, ROT_ALL, SQZ__ROTATE_SEED, "all"); }

static sqz_status rotate_model_step(sqz_pass_ctx *c, const void *args) {
    const rotate_args *a = args;
    sqz_model *m = c->m;
    const double t0 = sqz_now_seconds();
    const bool untied = (a->what & ROT_RESIDUAL) && m->hp.tied_embeddings;
    SQZ_TRY(rotate_model(m, a->what, a->seed, c->stage->spec));
    snprintf(c->stage->note, sizeof c->stage->note, "rotated %s%s%s (randomized Hadamard, seed %" PRId64 "; %.1f s)%s",
             a->what & ROT_RESIDUAL ? "the residual stream (R1, norms folded)" : "",
             a->what == ROT_ALL ? " and " : "", a->what & ROT_HEADS ? "each value head (R2)" : "", a->seed,
             sqz_now_seconds() - t0, untied ? "; the tied classifier is now a tensor of its own" : "");
    return SQZ_OK;
}

const sqz_pass sqz__pass_rotate = {
    .name = "rotate", .metavar = "WHAT",
    .summary = "fold an orthogonal (randomized Hadamard) rotation of the residual stream and/or each value head "
               "into the weights: the same function, fewer outliers for a following --quant",
    .examples = "all residual heads all:seed=7",
    .opts = rotate_opts, .n_opts = (int)(sizeof rotate_opts / sizeof rotate_opts[0]), .args_size = sizeof(rotate_args),
    .reshapes = true, /* the stored tensors change: a later stage calibrates on a fresh session */
    .check_model = rotate_check_model,
    .model_step = rotate_model_step,
};

/* tests/unit/test_model_edit.c - the model-editing API (sqz/edit.h) and the family table
 * (sqz/family.h) on the real models, checked through the forward pass on real text:
 *   layers    removing layer L of stories260K gives exactly (bit for bit) the logits of the
 *             full model run with sqz_session_embed / _block / _head skipping L; removing the
 *             last k equals the full model's block n-k-1 output (a hook) through the head;
 *             names and layer indices renumbered, borrowed data not copied, refusals clean.
 *   heads     keeping heads (a whole KV group dropped; one query head of every group dropped)
 *             == the full model with those heads' o columns zeroed (stories260K, interleaved
 *             rotary; tinystories-656K, rotate_half; MiniLM), uneven GQA groups refused.
 *   neurons   keeping FFN neurons == the full model with their down columns zeroed.
 *   channels  keeping all is the identity (bit for bit); keeping some == the full model with
 *             those channels zeroed, every RMSNorm weight times sqrt(d'/d) and eps times d'/d
 *             (what sqz/family.h documents), and differs from it without that rescaling.
 *   blocks    GGUF Q8_0 / Q4_0 (tinystories-656K written by sqz) and Q4_1 (SmolLM2): rows kept
 *             byte for byte, columns refused naming the tensor, a refused structural edit leaves
 *             the model unchanged, layers removed from a quantized model run exactly;
 *             sqz-quantized I8 / U4 tensors keep their rows' scales and zero points.
 *   writers   after removing a layer, pruning heads / neurons (per-layer dims) and channels:
 *             GGUF and HF safetensors written, reopened, value-equal tensor by tensor (HF's
 *             rotate_half q/k rows mapped back); HF refuses per-layer dims.
 *   table     sqz_family_linear_groups: the groups and folds of compress/'s quantizer, the
 *             o -> v fold only where a layer is MHA.
 * Zeroed-vs-removed comparisons differ only by float summation order: relative error
 * (max |a - b| / max |b|) below 1e-5. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test_util.h"

#define N_TOK 40

static const char *stories(void) { return sqz_test_data("models/stories260K/stories260K.bin"); }
static const char *tinyst(void) { return sqz_test_data("models/tinystories-656K"); }

static sqz_model *open_model(const char *path) {
    sqz_model *m = NULL;
    SQZ_ASSERT_OK(sqz_model_open(path, NULL, &m));
    return m;
}

/* N_TOK tokens of wiki.test.raw (from byte 2000 on), specials as the vocab wants them. */
static void text_tokens(const sqz_model *m, int32_t *out) {
    const char *path = sqz_test_data("data/wiki.test.raw");
    SQZ_SKIP_UNLESS(path);
    char text[4000];
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    assert_int_equal(fread(text, 1, sizeof text, f), sizeof text);
    fclose(f);
    sqz_tokenizer *tok;
    SQZ_ASSERT_OK(sqz_tokenizer_new(&m->vocab, &tok));
    int32_t *ids;
    size_t n;
    SQZ_ASSERT_OK(sqz_tokenize(tok, text + 2000, 2000, true, &ids, &n));
    assert_true(n >= N_TOK);
    memcpy(out, ids, N_TOK * sizeof *out);
    free(ids);
    sqz_tokenizer_free(tok);
}

static sqz_session *new_session(const sqz_model *m) {
    sqz_session_opts o = sqz_session_default_opts();
    o.max_tokens = N_TOK;
    o.n_threads = 1;
    sqz_session *s = NULL;
    SQZ_ASSERT_OK(sqz_session_new(m, &o, &s));
    return s;
}

/* The model's output on ids: decoder logits (N_TOK x vocab) or encoder states (N_TOK x d). */
static float *run(const sqz_model *m, const int32_t *ids) {
    const bool bert = m->hp.family == SQZ_FAMILY_BERT;
    float *y = malloc((size_t)N_TOK * (size_t)(bert ? m->hp.d_model : m->hp.vocab_size) * sizeof *y);
    sqz_session *s = new_session(m);
    if (bert) SQZ_ASSERT_OK(sqz_encode(s, ids, NULL, N_TOK, y));
    else SQZ_ASSERT_OK(sqz_forward(s, ids, N_TOK, 0, 0, y));
    sqz_session_free(s);
    return y;
}

/* The same output computed block by block, leaving out the blocks with skip[l]. */
static float *run_skipping(const sqz_model *m, const int32_t *ids, const bool *skip) {
    const bool bert = m->hp.family == SQZ_FAMILY_BERT;
    float *x = malloc((size_t)N_TOK * (size_t)m->hp.d_model * sizeof *x);
    sqz_session *s = new_session(m);
    SQZ_ASSERT_OK(sqz_session_embed(s, ids, NULL, N_TOK, 0, x));
    for (int32_t l = 0; l < (int32_t)m->hp.n_layers; l++)
        if (!skip[l]) SQZ_ASSERT_OK(sqz_session_block(s, l, x, N_TOK, 0));
    if (bert) {
        sqz_session_free(s);
        return x;
    }
    float *y = malloc((size_t)N_TOK * (size_t)m->hp.vocab_size * sizeof *y);
    SQZ_ASSERT_OK(sqz_session_head(s, x, N_TOK, 0, y));
    sqz_session_free(s);
    free(x);
    return y;
}

static int64_t out_len(const sqz_model *m) {
    return N_TOK * (m->hp.family == SQZ_FAMILY_BERT ? m->hp.d_model : m->hp.vocab_size);
}

static double rel_diff(const float *a, const float *b, int64_t n) {
    double d = 0, r = 0;
    for (int64_t i = 0; i < n; i++) {
        d = fmax(d, fabs((double)a[i] - b[i]));
        r = fmax(r, fabs((double)b[i]));
    }
    return d / r;
}

static float *f32_of(const sqz_tensor *t) {
    float *v = malloc((size_t)sqz_tensor_nelements(t) * sizeof *v);
    SQZ_ASSERT_OK(sqz_tensor_to_f32(t, v));
    return v;
}

static sqz_tensor *get(const sqz_model *m, sqz_role r, int32_t l) {
    sqz_tensor *t = sqz_model_get(m, r, l, SQZ_PARAM_WEIGHT);
    assert_non_null(t);
    return t;
}

/* Sets width-wide blocks idx[0..n) of axis (0 rows, 1 columns; 1-D: entries) of t to zero
 * (and scales every value by `scale`), as an owned f32 tensor. */
static void edit_f32(sqz_model *m, sqz_tensor *t, int axis, const int64_t *idx, int64_t n, int64_t width,
                     float scale) {
    float *v = f32_of(t);
    const int64_t rows = t->ndim == 1 ? 1 : t->shape[0], cols = t->shape[t->ndim - 1];
    for (int64_t i = 0; i < rows * cols; i++) v[i] *= scale;
    for (int64_t k = 0; k < n; k++)
        for (int64_t j = idx[k] * width; j < (idx[k] + 1) * width; j++)
            for (int64_t o = 0; o < (t->ndim == 1 || axis == 0 ? cols : rows); o++) {
                if (t->ndim == 1) v[j] = 0;
                else if (axis == 0) v[j * cols + o] = 0;
                else v[o * cols + j] = 0;
                if (t->ndim == 1) break;
            }
    SQZ_ASSERT_OK(sqz_tensor_replace(m, t, SQZ_DTYPE_F32, t->ndim, t->shape, v,
                                     (size_t)rows * (size_t)cols * sizeof(float), true));
}

/* keep = [0, total) without drop[0..n_drop); returns its length. */
static int64_t complement(const int64_t *drop, int64_t n_drop, int64_t total, int64_t *keep) {
    int64_t n = 0;
    for (int64_t i = 0, k = 0; i < total; i++) {
        if (k < n_drop && drop[k] == i) k++;
        else keep[n++] = i;
    }
    return n;
}

/* ---- layers ------------------------------------------------------------------------------- */

static void test_remove_middle_layer(void **state) {
    (void)state;
    SQZ_SKIP_UNLESS(stories());
    sqz_model *m = open_model(stories()), *e = open_model(stories());
    int32_t ids[N_TOK];
    text_tokens(m, ids);
    const void *wq3 = get(e, SQZ_ROLE_ATTN_Q, 3)->data;
    const int32_t drop[1] = {2};
    SQZ_ASSERT_OK(sqz_model_remove_layers(e, drop, 1));
    assert_int_equal(e->hp.n_layers, 4);
    assert_int_equal(e->n_tensors, m->n_tensors - 9);
    /* layer 3 is now layer 2, under its renumbered name, its data still the file's */
    int64_t i = sqz_model_find(e, "layers.2.attention.wq.weight");
    assert_true(i >= 0);
    assert_int_equal(e->tensors[i].layer, 2);
    assert_ptr_equal(e->tensors[i].data, wq3);
    assert_false(e->tensors[i].owned);
    assert_int_equal(sqz_model_find(e, "layers.4.attention.wq.weight"), -1);
    assert_true(sqz_model_find(e, "layers.3.feed_forward.w2.weight") >= 0);
    const bool skip[5] = {false, false, true, false, false};
    float *want = run_skipping(m, ids, skip), *got = run(e, ids);
    assert_memory_equal(got, want, (size_t)out_len(m) * sizeof(float));
    free(want);
    free(got);
    sqz_model_free(m);
    sqz_model_free(e);
}

typedef struct capture {
    int32_t layer;
    float *x;
} capture;

static sqz_status capture_block_out(void *user, const sqz_hook_event *ev) {
    capture *c = user;
    if (ev->point == SQZ_HOOK_BLOCK_OUT && ev->layer == c->layer)
        memcpy(c->x, ev->x, (size_t)(ev->n_tokens * ev->dim) * sizeof(float));
    return SQZ_OK;
}

static void test_remove_last_layers(void **state) {
    (void)state;
    SQZ_SKIP_UNLESS(stories());
    sqz_model *m = open_model(stories()), *e = open_model(stories());
    int32_t ids[N_TOK];
    text_tokens(m, ids);
    capture c = {2, malloc((size_t)N_TOK * (size_t)m->hp.d_model * sizeof(float))};
    float *want = malloc((size_t)out_len(m) * sizeof *want);
    sqz_session *s = new_session(m);
    sqz_session_set_hook(s, capture_block_out, &c);
    SQZ_ASSERT_OK(sqz_forward(s, ids, N_TOK, 0, 0, NULL));
    SQZ_ASSERT_OK(sqz_session_head(s, c.x, N_TOK, 0, want));
    sqz_session_free(s);
    const int32_t drop[2] = {3, 4};
    SQZ_ASSERT_OK(sqz_model_remove_layers(e, drop, 2));
    float *got = run(e, ids);
    assert_memory_equal(got, want, (size_t)out_len(m) * sizeof(float));
    free(got);
    free(want);
    free(c.x);
    sqz_model_free(m);
    sqz_model_free(e);
}

static void test_remove_layers_refused(void **state) {
    (void)state;
    SQZ_SKIP_UNLESS(stories());
    sqz_model *m = open_model(stories());
    const int32_t all[5] = {0, 1, 2, 3, 4}, unsorted[2] = {3, 1}, beyond[1] = {5};
    assert_int_equal(sqz_model_remove_layers(m, all, 5), SQZ_ERR_INVALID_ARG);
    assert_non_null(strstr(sqz_last_error(), "leaves no layer"));
    assert_int_equal(sqz_model_remove_layers(m, unsorted, 2), SQZ_ERR_INVALID_ARG);
    assert_int_equal(sqz_model_remove_layers(m, beyond, 1), SQZ_ERR_INVALID_ARG);
    assert_int_equal(sqz_model_remove_layers(m, NULL, 0), SQZ_OK);
    assert_int_equal(m->hp.n_layers, 5);
    assert_int_equal(m->n_tensors, 47);
    SQZ_ASSERT_OK(sqz_model_validate(m));
    sqz_model_free(m);
}

static void test_replace(void **state) {
    (void)state;
    SQZ_SKIP_UNLESS(stories());
    sqz_model *m = open_model(stories());
    sqz_tensor *t = get(m, SQZ_ROLE_ATTN_NORM, 0);
    static float borrowed[64];
    for (int i = 0; i < 64; i++) borrowed[i] = (float)i;
    int64_t shape[2] = {64, 1};
    /* borrowed: stored as given, never freed by the model */
    SQZ_ASSERT_OK(sqz_tensor_replace(m, t, SQZ_DTYPE_F32, 1, shape, borrowed, sizeof borrowed, false));
    assert_ptr_equal(t->data, borrowed);
    assert_false(t->owned);
    /* taken: freed by the model, and at once when refused */
    uint16_t *h = malloc(64 * sizeof *h);
    for (int i = 0; i < 64; i++) h[i] = sqz_fp32_to_fp16((float)i);
    assert_int_equal(sqz_tensor_replace(m, t, SQZ_DTYPE_F16, 1, shape, h, 63 * sizeof *h, true), SQZ_ERR_SHAPE);
    assert_non_null(strstr(sqz_last_error(), t->name));
    assert_ptr_equal(t->data, borrowed); /* unchanged */
    h = malloc(64 * sizeof *h);
    for (int i = 0; i < 64; i++) h[i] = sqz_fp32_to_fp16((float)i);
    SQZ_ASSERT_OK(sqz_tensor_replace(m, t, SQZ_DTYPE_F16, 1, shape, h, 64 * sizeof *h, true));
    assert_true(t->owned && t->dtype == SQZ_DTYPE_F16 && t->qp == NULL);
    float *v = f32_of(t);
    assert_memory_equal(v, borrowed, sizeof borrowed);
    free(v);
    /* a step: a wrong shape is taken and the model no longer validates until fixed */
    shape[0] = 32;
    SQZ_ASSERT_OK(sqz_tensor_replace(m, t, SQZ_DTYPE_F32, 1, shape, borrowed, 32 * sizeof(float), false));
    assert_int_equal(sqz_model_validate(m), SQZ_ERR_SHAPE);
    const int64_t keep[2] = {1, 3};
    assert_int_equal(sqz_model_keep_neurons(m, 0, keep, 2), SQZ_ERR_SHAPE); /* whole edits refuse it */
    sqz_model_free(m);
}

/* ---- heads and neurons --------------------------------------------------------------------- */

/* Drops heads of two layers: all query heads of KV group 1 in layer 1, and query head 2j+1 of
 * every group in layer 0 (leaving one query head per KV head: MHA). */
static void check_heads(const char *path) {
    sqz_model *ref = open_model(path), *e = open_model(path);
    int32_t ids[N_TOK];
    text_tokens(ref, ids);
    const int64_t hd = ref->hp.head_dim, H = ref->layers[0].n_heads, KV = ref->layers[0].n_kv_heads;
    assert_int_equal(H, 2 * KV); /* both llama models: 8 heads, 4 KV heads */
    const int64_t drop1[2] = {2, 3}, drop0[4] = {1, 3, 5, 7};
    int64_t keep[8];
    const int64_t uneven[3] = {0, 1, 2};
    assert_int_equal(sqz_model_keep_heads(e, 1, uneven, 3), SQZ_ERR_INVALID_ARG);
    assert_int_equal(get(e, SQZ_ROLE_ATTN_Q, 1)->shape[0], H * hd); /* unchanged */
    SQZ_ASSERT_OK(sqz_model_keep_heads(e, 1, keep, complement(drop1, 2, H, keep)));
    SQZ_ASSERT_OK(sqz_model_keep_heads(e, 0, keep, complement(drop0, 4, H, keep)));
    assert_int_equal(e->layers[1].n_heads, 6);
    assert_int_equal(e->layers[1].n_kv_heads, 3);
    assert_int_equal(e->layers[0].n_heads, 4);
    assert_int_equal(e->layers[0].n_kv_heads, 4);
    assert_int_equal(get(e, SQZ_ROLE_ATTN_K, 1)->shape[0], 3 * hd);
    assert_int_equal(get(e, SQZ_ROLE_ATTN_OUT, 0)->shape[1], 4 * hd);
    /* the reference keeps every head but the dropped ones write nothing */
    edit_f32(ref, get(ref, SQZ_ROLE_ATTN_OUT, 1), 1, drop1, 2, hd, 1.0f);
    edit_f32(ref, get(ref, SQZ_ROLE_ATTN_OUT, 0), 1, drop0, 4, hd, 1.0f);
    float *want = run(ref, ids), *got = run(e, ids);
    const double d = rel_diff(got, want, out_len(ref));
    print_message("%s: heads kept vs o columns zeroed: relative difference %.3g\n", path, d);
    assert_true(d < 1e-5);
    /* the o -> v fold holds in the layer that became MHA only */
    sqz_linear_group g[SQZ_LINEAR_GROUPS_MAX];
    assert_int_equal(sqz_family_linear_groups(e, 0, g), 4);
    assert_int_equal(g[0].fold, SQZ_FOLD_LINEAR);
    assert_int_equal(g[0].fold_role, SQZ_ROLE_ATTN_V);
    assert_int_equal(sqz_family_linear_groups(e, 1, g), 4);
    assert_int_equal(g[0].fold, SQZ_FOLD_NONE);
    free(want);
    free(got);
    sqz_model_free(ref);
    sqz_model_free(e);
}

static void test_keep_heads(void **state) {
    (void)state;
    SQZ_SKIP_UNLESS(stories());
    SQZ_SKIP_UNLESS(tinyst());
    check_heads(stories()); /* interleaved rotary rows */
    check_heads(tinyst());  /* rotate_half rows */
}

/* Drops every fifth FFN neuron (from 2) of layer 1. */
static void check_neurons(const char *path) {
    sqz_model *ref = open_model(path), *e = open_model(path);
    int32_t ids[N_TOK];
    text_tokens(ref, ids);
    const int64_t ff = ref->layers[1].d_ff;
    int64_t *drop = malloc((size_t)ff * sizeof *drop), *keep = malloc((size_t)ff * sizeof *keep), nd = 0;
    for (int64_t j = 2; j < ff; j += 5) drop[nd++] = j;
    const int64_t nk = complement(drop, nd, ff, keep);
    SQZ_ASSERT_OK(sqz_model_keep_neurons(e, 1, keep, nk));
    assert_int_equal(e->layers[1].d_ff, nk);
    assert_int_equal(e->layers[0].d_ff, ff);
    assert_int_equal(e->hp.d_ff, ff); /* the largest over the layers */
    assert_int_equal(get(e, SQZ_ROLE_FFN_GATE, 1)->shape[0], nk);
    assert_int_equal(get(e, SQZ_ROLE_FFN_DOWN, 1)->shape[1], nk);
    edit_f32(ref, get(ref, SQZ_ROLE_FFN_DOWN, 1), 1, drop, nd, 1, 1.0f);
    float *want = run(ref, ids), *got = run(e, ids);
    const double d = rel_diff(got, want, out_len(ref));
    print_message("%s: %lld neurons kept vs down columns zeroed: relative difference %.3g\n", path, (long long)nk, d);
    assert_true(d < 1e-5);
    free(want);
    free(got);
    free(drop);
    free(keep);
    sqz_model_free(ref);
    sqz_model_free(e);
}

static void test_keep_neurons(void **state) {
    (void)state;
    SQZ_SKIP_UNLESS(stories());
    SQZ_SKIP_UNLESS(tinyst());
    check_neurons(stories());
    check_neurons(tinyst());
}

/* ---- channels ------------------------------------------------------------------------------ */

static void test_keep_all_channels_is_identity(void **state) {
    (void)state;
    SQZ_SKIP_UNLESS(stories());
    sqz_model *m = open_model(stories()), *e = open_model(stories());
    int32_t ids[N_TOK];
    text_tokens(m, ids);
    int64_t keep[64];
    for (int64_t c = 0; c < 64; c++) keep[c] = c;
    SQZ_ASSERT_OK(sqz_model_keep_channels(e, keep, 64));
    for (int64_t i = 0; i < e->n_tensors; i++) assert_true(e->tensors[i].owned); /* all copied */
    float *want = run(m, ids), *got = run(e, ids);
    assert_memory_equal(got, want, (size_t)out_len(m) * sizeof(float));
    free(want);
    free(got);
    sqz_model_free(m);
    sqz_model_free(e);
}

/* Zeroes channels drop[0..n) of the residual stream of a llama model (embedding columns, rows
 * of o and down, norm entries) and scales every RMSNorm weight by `norm_scale`. */
static void zero_channels(sqz_model *m, const int64_t *drop, int64_t n, float norm_scale) {
    edit_f32(m, get(m, SQZ_ROLE_TOKEN_EMBD, -1), 1, drop, n, 1, 1.0f);
    edit_f32(m, get(m, SQZ_ROLE_OUTPUT_NORM, -1), 0, drop, n, 1, norm_scale);
    for (int32_t l = 0; l < (int32_t)m->hp.n_layers; l++) {
        edit_f32(m, get(m, SQZ_ROLE_ATTN_OUT, l), 0, drop, n, 1, 1.0f);
        edit_f32(m, get(m, SQZ_ROLE_FFN_DOWN, l), 0, drop, n, 1, 1.0f);
        edit_f32(m, get(m, SQZ_ROLE_ATTN_NORM, l), 0, drop, n, 1, norm_scale);
        edit_f32(m, get(m, SQZ_ROLE_FFN_NORM, l), 0, drop, n, 1, norm_scale);
    }
}

static void test_keep_channels_rmsnorm(void **state) {
    (void)state;
    SQZ_SKIP_UNLESS(stories());
    sqz_model *e = open_model(stories()), *ref = open_model(stories()), *ref0 = open_model(stories());
    int32_t ids[N_TOK];
    text_tokens(e, ids);
    const int64_t drop[6] = {5, 12, 33, 40, 41, 63}, d = 64, dk = 58;
    int64_t keep[64];
    assert_int_equal(complement(drop, 6, d, keep), dk);
    SQZ_ASSERT_OK(sqz_model_keep_channels(e, keep, dk));
    assert_int_equal(e->hp.d_model, dk);
    assert_int_equal(e->hp.head_dim, 8);
    assert_int_equal(get(e, SQZ_ROLE_TOKEN_EMBD, -1)->shape[1], dk);
    assert_int_equal(get(e, SQZ_ROLE_ATTN_Q, 4)->shape[0], 64);
    assert_int_equal(get(e, SQZ_ROLE_ATTN_Q, 4)->shape[1], dk);
    assert_int_equal(get(e, SQZ_ROLE_FFN_DOWN, 0)->shape[0], dk);
    assert_int_equal(get(e, SQZ_ROLE_OUTPUT_NORM, -1)->shape[0], dk);
    /* the documented equivalence: zeroed channels, RMSNorm weights * sqrt(d'/d), eps * d'/d */
    zero_channels(ref, drop, 6, (float)sqrt((double)dk / (double)d));
    ref->hp.norm_eps *= (float)dk / (float)d;
    zero_channels(ref0, drop, 6, 1.0f);
    float *got = run(e, ids), *want = run(ref, ids), *plain = run(ref0, ids);
    const double diff = rel_diff(got, want, out_len(e)), diff0 = rel_diff(got, plain, out_len(e));
    print_message("channels %lld -> %lld: vs zeroed + rescaled norms %.3g; vs zeroed only %.3g\n", (long long)d,
                  (long long)dk, diff, diff0);
    assert_true(diff < 1e-5);
    assert_true(diff0 > 1e-3); /* the norms' statistics did change */
    free(got);
    free(want);
    free(plain);
    sqz_model_free(e);
    sqz_model_free(ref);
    sqz_model_free(ref0);
}

/* ---- BERT ---------------------------------------------------------------------------------- */

static void test_bert_minilm(void **state) {
    (void)state;
    const char *path = sqz_test_minilm();
    SQZ_SKIP_UNLESS(path);
    sqz_model *m = open_model(path), *e = open_model(path), *ref = open_model(path);
    int32_t ids[N_TOK];
    text_tokens(m, ids);
    const int32_t drop_l[1] = {2};
    char want_name[256];
    snprintf(want_name, sizeof want_name, "%s", get(e, SQZ_ROLE_ATTN_Q, 3)->name);
    SQZ_ASSERT_OK(sqz_model_remove_layers(e, drop_l, 1));
    assert_non_null(strstr(want_name, ".3."));
    *strstr(want_name, ".3.") = 0;
    assert_non_null(strstr(get(e, SQZ_ROLE_ATTN_Q, 2)->name, want_name)); /* same prefix */
    assert_non_null(strstr(get(e, SQZ_ROLE_ATTN_Q, 2)->name, ".2."));
    bool skip[6] = {false, false, true, false, false, false};
    float *want = run_skipping(m, ids, skip), *got = run(e, ids);
    assert_memory_equal(got, want, (size_t)out_len(m) * sizeof(float));
    free(want);
    free(got);
    /* a head and some neurons: kept vs zeroed */
    const int64_t hd = m->hp.head_dim, H = m->layers[0].n_heads, ff = m->layers[1].d_ff;
    int64_t drop_h[1] = {5}, keep[1536], drop_n[256], nd = 0;
    for (int64_t j = 3; j < ff && nd < 256; j += 7) drop_n[nd++] = j;
    sqz_model *p = open_model(path);
    SQZ_ASSERT_OK(sqz_model_keep_heads(p, 0, keep, complement(drop_h, 1, H, keep)));
    SQZ_ASSERT_OK(sqz_model_keep_neurons(p, 1, keep, complement(drop_n, nd, ff, keep)));
    edit_f32(ref, get(ref, SQZ_ROLE_ATTN_OUT, 0), 1, drop_h, 1, hd, 1.0f);
    edit_f32(ref, get(ref, SQZ_ROLE_FFN_DOWN, 1), 1, drop_n, nd, 1, 1.0f);
    want = run(ref, ids);
    got = run(p, ids);
    const double d = rel_diff(got, want, out_len(m));
    print_message("MiniLM: head + %lld neurons kept vs zeroed: relative difference %.3g\n", (long long)nd, d);
    assert_true(d < 1e-5);
    free(want);
    sqz_linear_group g[SQZ_LINEAR_GROUPS_MAX];
    assert_int_equal(sqz_family_linear_groups(m, 0, g), 4);
    assert_int_equal(g[0].fold, SQZ_FOLD_LINEAR); /* MHA: o folds into v */
    assert_int_equal(g[2].fold, SQZ_FOLD_NONE);   /* post-norm: q|k|v nowhere */
    /* channels: all is the identity; some: every member follows */
    const int64_t dm = m->hp.d_model;
    for (int64_t c = 0; c < dm; c++) keep[c] = c;
    SQZ_ASSERT_OK(sqz_model_keep_channels(p, keep, dm));
    float *again = run(p, ids);
    assert_memory_equal(again, got, (size_t)out_len(m) * sizeof(float));
    free(again);
    free(got);
    sqz_model *q = open_model(path);
    SQZ_ASSERT_OK(sqz_model_keep_channels(q, keep, dm - 100));
    assert_int_equal(q->hp.d_model, dm - 100);
    assert_int_equal(get(q, SQZ_ROLE_POS_EMBD, -1)->shape[1], dm - 100);
    assert_int_equal(get(q, SQZ_ROLE_ATTN_OUT_NORM, 5)->shape[0], dm - 100);
    assert_int_equal(sqz_model_get(q, SQZ_ROLE_FFN_DOWN, 5, SQZ_PARAM_BIAS)->shape[0], dm - 100);
    const sqz_tensor *pool = sqz_model_get(q, SQZ_ROLE_POOLER, -1, SQZ_PARAM_WEIGHT);
    if (pool) { /* rows and columns */
        assert_int_equal(pool->shape[0], dm - 100);
        assert_int_equal(pool->shape[1], dm - 100);
    }
    float *states = run(q, ids); /* runs, (N_TOK, d') */
    free(states);
    sqz_model_free(q);
    sqz_model_free(p);
    sqz_model_free(m);
    sqz_model_free(e);
    sqz_model_free(ref);
}

/* ---- block-quantized and sqz-quantized tensors ------------------------------------------- */

/* tinystories-656K written by sqz as GGUF with its weight matrices in dtype dt. */
static void gguf_copy(sqz_dtype dt, const char *dir, char *path, size_t cap) {
    sqz_model *m = open_model(tinyst());
    snprintf(path, cap, "%s/tiny-%s.gguf", dir, sqz_dtype_name(dt));
    sqz_save_opts o = {.format = SQZ_FORMAT_GGUF, .dtype = (int)dt};
    SQZ_ASSERT_OK(sqz_model_save(m, path, &o));
    sqz_model_free(m);
}

/* Rows kept equal the rows they were, dequantized. */
static void assert_rows_kept(const float *before, const sqz_tensor *t, const int64_t *keep, int64_t n) {
    const int64_t cols = t->shape[1];
    assert_int_equal(t->shape[0], n);
    float *after = f32_of(t);
    for (int64_t i = 0; i < n; i++)
        assert_memory_equal(after + i * cols, before + keep[i] * cols, (size_t)cols * sizeof(float));
    free(after);
}

static void check_block_type(sqz_dtype dt) {
    const char *dir = sqz_test_tmpdir();
    char path[4096];
    gguf_copy(dt, dir, path, sizeof path);
    sqz_model *g = open_model(path), *e = open_model(path);
    sqz_tensor *t = get(g, SQZ_ROLE_FFN_GATE, 0);
    assert_int_equal(t->dtype, dt);
    float *before = f32_of(t);
    const int64_t keep[6] = {0, 5, 6, 7, 100, 383};
    SQZ_ASSERT_OK(sqz_tensor_keep_rows(g, t, keep, 6));
    assert_int_equal(t->dtype, dt);
    assert_true(t->owned);
    assert_rows_kept(before, t, keep, 6);
    free(before);
    /* columns: refused, naming the tensor */
    sqz_tensor *u = get(g, SQZ_ROLE_FFN_UP, 0);
    const int64_t cols[3] = {0, 64, 127};
    assert_int_equal(sqz_tensor_keep_cols(g, u, cols, 3), SQZ_ERR_UNSUPPORTED);
    assert_non_null(strstr(sqz_last_error(), u->name));
    assert_int_equal(u->shape[1], 128);
    /* a structural edit with such a member: refused, the model untouched */
    const void *gate1 = get(e, SQZ_ROLE_FFN_GATE, 1)->data;
    assert_int_equal(sqz_model_keep_neurons(e, 1, keep, 6), SQZ_ERR_UNSUPPORTED);
    assert_non_null(strstr(sqz_last_error(), get(e, SQZ_ROLE_FFN_DOWN, 1)->name));
    assert_ptr_equal(get(e, SQZ_ROLE_FFN_GATE, 1)->data, gate1);
    assert_int_equal(get(e, SQZ_ROLE_FFN_GATE, 1)->shape[0], 384);
    assert_int_equal(e->layers[1].d_ff, 384);
    SQZ_ASSERT_OK(sqz_model_validate(e));
    /* removing a layer of the quantized model: exact, and nothing copied */
    int32_t ids[N_TOK];
    text_tokens(e, ids);
    const bool skip[2] = {true, false};
    float *want = run_skipping(e, ids, skip);
    const int32_t drop[1] = {0};
    SQZ_ASSERT_OK(sqz_model_remove_layers(e, drop, 1));
    for (int64_t i = 0; i < e->n_tensors; i++) assert_false(e->tensors[i].owned);
    assert_true(sqz_model_find(e, "blk.0.ffn_down.weight") >= 0);
    assert_int_equal(sqz_model_find(e, "blk.1.ffn_down.weight"), -1);
    float *got = run(e, ids);
    assert_memory_equal(got, want, (size_t)out_len(e) * sizeof(float));
    free(want);
    free(got);
    sqz_model_free(g);
    sqz_model_free(e);
    remove(path);
    rmdir(dir);
}

static void test_gguf_block_types(void **state) {
    (void)state;
    SQZ_SKIP_UNLESS(tinyst());
    check_block_type(SQZ_DTYPE_Q8_0);
    check_block_type(SQZ_DTYPE_Q4_0);
}

static void test_smollm2_q4_1(void **state) {
    (void)state;
    const char *path = sqz_test_smollm2();
    SQZ_SKIP_UNLESS(path);
    sqz_model *m = open_model(path);
    const int64_t nl = m->hp.n_layers;
    const void *q_last = get(m, SQZ_ROLE_ATTN_Q, (int32_t)nl - 1)->data;
    int32_t drop[64];
    for (int32_t l = 0; l < nl - 4; l++) drop[l] = l; /* keep the last 4 */
    SQZ_ASSERT_OK(sqz_model_remove_layers(m, drop, nl - 4));
    assert_int_equal(m->hp.n_layers, 4);
    const int64_t i = sqz_model_find(m, "blk.3.attn_q.weight");
    assert_true(i >= 0);
    assert_ptr_equal(m->tensors[i].data, q_last);
    char name[64];
    snprintf(name, sizeof name, "blk.%d.attn_q.weight", (int)nl - 1);
    assert_int_equal(sqz_model_find(m, name), -1);
    sqz_tensor *t = get(m, SQZ_ROLE_FFN_GATE, 2);
    const sqz_dtype dt = t->dtype;
    float *before = f32_of(t);
    const int64_t keep[4] = {1, 2, 500, (int64_t)t->shape[0] - 1};
    SQZ_ASSERT_OK(sqz_tensor_keep_rows(m, t, keep, 4));
    assert_int_equal(t->dtype, dt);
    assert_rows_kept(before, t, keep, 4);
    free(before);
    sqz_model_free(m);
}

/* sqz's own I8-per-row and U4-per-group tensors: the kept rows keep their scales and zero
 * points; in_scale (per column) stays; columns are refused. */
static void check_qp_rows(sqz_model *m, sqz_tensor *t, sqz_qformat fmt) {
    const int64_t rows = t->shape[0], cols = t->shape[1];
    float *w = f32_of(t), s[64];
    for (int64_t c = 0; c < cols; c++) s[c] = 1.0f + 0.01f * (float)c;
    sqz_qtarget tg = {fmt, 32};
    SQZ_ASSERT_OK(sqz_qtarget_check(&tg));
    sqz_qmatrix q;
    SQZ_ASSERT_OK(sqz_quant_rtn_one(w, rows, cols, &tg, &q));
    SQZ_ASSERT_OK(sqz_qmatrix_set_in_scale(&q, s));
    SQZ_ASSERT_OK(sqz_qmatrix_attach(m, t, &q));
    float *before = f32_of(t);
    const int64_t keep[5] = {0, 1, 9, 40, rows - 1};
    SQZ_ASSERT_OK(sqz_tensor_keep_rows(m, t, keep, 5));
    assert_non_null(t->qp);
    assert_int_equal(t->qp->n_out, 5);
    SQZ_ASSERT_OK(sqz_qparams_check(t->qp, t->dtype, t->nbytes, t->name));
    assert_memory_equal(t->qp->in_scale, s, (size_t)cols * sizeof(float));
    if (fmt == SQZ_QFMT_I4_ASYM) assert_non_null(t->qp->zeros);
    assert_rows_kept(before, t, keep, 5);
    assert_int_equal(sqz_tensor_keep_cols(m, t, keep, 4), SQZ_ERR_UNSUPPORTED);
    assert_non_null(strstr(sqz_last_error(), t->name));
    free(before);
    free(w);
}

static void test_sqz_quantized_rows(void **state) {
    (void)state;
    SQZ_SKIP_UNLESS(stories());
    sqz_model *m = open_model(stories());
    check_qp_rows(m, get(m, SQZ_ROLE_FFN_GATE, 0), SQZ_QFMT_I8);
    check_qp_rows(m, get(m, SQZ_ROLE_FFN_UP, 0), SQZ_QFMT_I4_ASYM);
    check_qp_rows(m, get(m, SQZ_ROLE_ATTN_Q, 1), SQZ_QFMT_I4_SYM);
    sqz_model_free(m);
}

/* ---- writers -------------------------------------------------------------------------------- */

/* Row r of a q/k tensor of model `from` is row rope_row(r) of the same tensor written for a
 * model whose rotary layout is `to` (formats/export.c's permutation). */
static int64_t rope_row(int64_t r, int64_t hd, sqz_rope_layout from, sqz_rope_layout to) {
    if (from == to) return r;
    const int64_t h = r / hd, k = r % hd, half = hd / 2;
    /* HALF row i*half + j <-> INTERLEAVED row 2j + i */
    if (from == SQZ_ROPE_INTERLEAVED) return h * hd + (k % 2) * half + k / 2;
    return h * hd + 2 * (k % half) + k / half;
}

/* Every tensor of a is in b under (role, layer, param) with the same shape and values. */
static void assert_models_equal(const sqz_model *a, const sqz_model *b) {
    assert_int_equal(a->hp.n_layers, b->hp.n_layers);
    assert_int_equal(a->hp.d_model, b->hp.d_model);
    assert_int_equal(a->n_tensors, b->n_tensors);
    assert_int_equal(a->hp.n_heads, b->hp.n_heads); /* defaults: the largest over the layers */
    assert_int_equal(a->hp.n_kv_heads, b->hp.n_kv_heads);
    assert_int_equal(a->hp.d_ff, b->hp.d_ff);
    for (int64_t l = 0; l < a->hp.n_layers; l++)
        assert_memory_equal(&a->layers[l], &b->layers[l], sizeof(sqz_layer_dims));
    for (int64_t i = 0; i < a->n_tensors; i++) {
        const sqz_tensor *t = &a->tensors[i], *u = sqz_model_get(b, t->role, t->layer, t->param);
        assert_non_null(u);
        assert_int_equal(t->ndim, u->ndim);
        assert_memory_equal(t->shape, u->shape, sizeof t->shape);
        const bool rope = t->role == SQZ_ROLE_ATTN_Q || t->role == SQZ_ROLE_ATTN_K;
        const int64_t rows = t->ndim == 1 ? 1 : t->shape[0], cols = t->shape[t->ndim - 1];
        float *x = f32_of(t), *y = f32_of(u);
        for (int64_t r = 0; r < rows; r++) {
            const int64_t r2 = rope ? rope_row(r, a->hp.head_dim, a->hp.rope_layout, b->hp.rope_layout) : r;
            assert_memory_equal(x + r * cols, y + r2 * cols, (size_t)cols * sizeof(float));
        }
        free(x);
        free(y);
    }
}

/* Writes m in `fmt` under dir, reopens it and compares. Returns the writer's status. */
static sqz_status roundtrip(const sqz_model *m, sqz_format fmt, const char *dir, const char *name) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    sqz_save_opts o = {.format = fmt, .dtype = -1};
    sqz_status st = sqz_model_save(m, path, &o);
    if (st != SQZ_OK) return st;
    sqz_model *r = open_model(path);
    assert_models_equal(m, r);
    sqz_model_free(r);
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", path);
    assert_int_equal(system(cmd), 0);
    return SQZ_OK;
}

static void test_writers(void **state) {
    (void)state;
    SQZ_SKIP_UNLESS(stories());
    const char *dir = sqz_test_tmpdir();
    sqz_model *m = open_model(stories());
    const int32_t drop[1] = {1};
    SQZ_ASSERT_OK(sqz_model_remove_layers(m, drop, 1));
    SQZ_ASSERT_OK(roundtrip(m, SQZ_FORMAT_GGUF, dir, "l4.gguf"));
    SQZ_ASSERT_OK(roundtrip(m, SQZ_FORMAT_SAFETENSORS, dir, "l4-hf"));
    /* per-layer dims: GGUF ("deci" arrays) keeps them; a plain HF config cannot */
    const int64_t heads[4] = {0, 2, 4, 6};
    int64_t neurons[100];
    for (int64_t j = 0; j < 100; j++) neurons[j] = j + (j >= 50 ? 40 : 0);
    SQZ_ASSERT_OK(sqz_model_keep_heads(m, 0, heads, 4));
    SQZ_ASSERT_OK(sqz_model_keep_neurons(m, 2, neurons, 100));
    SQZ_ASSERT_OK(roundtrip(m, SQZ_FORMAT_GGUF, dir, "pruned.gguf"));
    assert_int_equal(roundtrip(m, SQZ_FORMAT_SAFETENSORS, dir, "pruned-hf"), SQZ_ERR_UNSUPPORTED);
    /* channels: GGUF always (head_dim is written, hidden size no longer heads x head_dim); HF
     * only while hidden_size stays a multiple of the head count, which transformers' config
     * validation requires even with an explicit head_dim (50 of 8 heads: refused, naming GGUF) */
    sqz_model *c = open_model(stories());
    int64_t keep[64];
    for (int64_t i = 0; i < 50; i++) keep[i] = i + (i >= 20 ? 14 : 0);
    SQZ_ASSERT_OK(sqz_model_keep_channels(c, keep, 50));
    SQZ_ASSERT_OK(roundtrip(c, SQZ_FORMAT_GGUF, dir, "c50.gguf"));
    assert_int_equal(roundtrip(c, SQZ_FORMAT_SAFETENSORS, dir, "c50-hf"), SQZ_ERR_UNSUPPORTED);
    assert_non_null(strstr(sqz_last_error(), "GGUF"));
    sqz_model_free(c);
    c = open_model(stories());
    for (int64_t i = 0; i < 48; i++) keep[i] = i + (i >= 20 ? 16 : 0);
    SQZ_ASSERT_OK(sqz_model_keep_channels(c, keep, 48));
    SQZ_ASSERT_OK(roundtrip(c, SQZ_FORMAT_SAFETENSORS, dir, "c48-hf"));
    sqz_model_free(c);
    sqz_model_free(m);
    rmdir(dir);
}

/* ---- the family table ---------------------------------------------------------------------- */

/* The groups compress/pass_quant_block.c's sqz__block_groups hard-coded (llama, GQA layers). */
static void test_family_table(void **state) {
    (void)state;
    SQZ_SKIP_UNLESS(stories());
    sqz_model *m = open_model(stories());
    sqz_linear_group g[SQZ_LINEAR_GROUPS_MAX];
    assert_int_equal(sqz_family_linear_groups(m, 0, g), 4);
    const sqz_role want_roles[4][3] = {{SQZ_ROLE_ATTN_OUT},
                                       {SQZ_ROLE_FFN_DOWN},
                                       {SQZ_ROLE_ATTN_Q, SQZ_ROLE_ATTN_K, SQZ_ROLE_ATTN_V},
                                       {SQZ_ROLE_FFN_GATE, SQZ_ROLE_FFN_UP}};
    const int want_n[4] = {1, 1, 3, 2};
    const sqz_fold want_fold[4] = {SQZ_FOLD_NONE, SQZ_FOLD_LINEAR, SQZ_FOLD_NORM, SQZ_FOLD_NORM};
    const sqz_role want_into[4] = {SQZ_ROLE_COUNT, SQZ_ROLE_FFN_UP, SQZ_ROLE_ATTN_NORM, SQZ_ROLE_FFN_NORM};
    for (int i = 0; i < 4; i++) {
        assert_int_equal(g[i].n, want_n[i]);
        for (int k = 0; k < g[i].n; k++) assert_int_equal(g[i].roles[k], want_roles[i][k]);
        assert_int_equal(g[i].fold, want_fold[i]);
        assert_int_equal(g[i].fold_role, want_into[i]);
    }
    assert_int_equal(sqz_family_linear_groups(m, 5, g), 0);
    const sqz_family_info *fl = sqz_family_get(SQZ_FAMILY_LLAMA), *fb = sqz_family_get(SQZ_FAMILY_BERT);
    assert_non_null(fl);
    assert_non_null(fb);
    assert_null(sqz_family_get((sqz_family)7));
    assert_true(fl->pre_norm && fl->gated_ffn && fl->norm == SQZ_NORM_RMS);
    assert_true(!fb->pre_norm && !fb->gated_ffn && fb->norm == SQZ_NORM_LAYER);
    assert_int_equal(fb->groups[3].roles[0], SQZ_ROLE_FFN_UP);
    sqz_model_free(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_remove_middle_layer),
        cmocka_unit_test(test_remove_last_layers),
        cmocka_unit_test(test_remove_layers_refused),
        cmocka_unit_test(test_replace),
        cmocka_unit_test(test_keep_heads),
        cmocka_unit_test(test_keep_neurons),
        cmocka_unit_test(test_keep_all_channels_is_identity),
        cmocka_unit_test(test_keep_channels_rmsnorm),
        cmocka_unit_test(test_bert_minilm),
        cmocka_unit_test(test_gguf_block_types),
        cmocka_unit_test(test_smollm2_q4_1),
        cmocka_unit_test(test_sqz_quantized_rows),
        cmocka_unit_test(test_writers),
        cmocka_unit_test(test_family_table),
    };
    return sqz_test_run(tests, NULL, NULL);
}

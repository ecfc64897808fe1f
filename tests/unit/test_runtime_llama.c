/* tests/unit/test_runtime_llama.c - the decoder forward pass on the real models:
 *   stories260K (llama2.c, interleaved rotary): greedy from BOS reproduces llama2.c's published
 *     sample (doc/stories260K.md, tests/data/runtime/stories260K_greedy.txt) token for token;
 *     one window == token-by-token over the cache == embed/block/head == stream weights;
 *     hooks see every block and linear input with the right shapes; errors are clean.
 *   tinystories-656K (HF safetensors, rotate_half): logits within 1e-4 relative of the numpy
 *     re-implementation of transformers' LlamaForCausalLM (tests/ref/make_tinystories_ref.py).
 *   SmolLM2-135M Q4_1 GGUF: greedy continuation equal and logits within 1e-3 relative of the
 *     reference that loads the GGUF as transformers does (tests/ref/make_smollm2_ref.py).
 * Relative error of a row = max |sqz - ref| / max |ref| over the stored entries. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime_fixture.h"
#include "sqz/tokenizer.h"
#include "test_util.h"

static const char *fixture(const char *name) {
    static char bufs[4][4096];
    static int next;
    char *b = bufs[next++ % 4];
    const char *src = getenv("SQZ_SOURCE_DIR");
    snprintf(b, 4096, "%s/tests/data/runtime/%s", src && *src ? src : ".", name);
    return b;
}

static sqz_model *open_model(const char *path) {
    sqz_model *m = NULL;
    SQZ_ASSERT_OK(sqz_model_open(path, NULL, &m));
    return m;
}

static sqz_session *new_session(const sqz_model *m, int64_t max_tokens, sqz_weight_mode w) {
    sqz_session_opts o = sqz_session_default_opts();
    o.max_tokens = max_tokens;
    o.weights = w;
    sqz_session *s = NULL;
    SQZ_ASSERT_OK(sqz_session_new(m, &o, &s));
    return s;
}

static double max_abs_diff(const float *a, const float *b, int64_t n) {
    double d = 0;
    for (int64_t i = 0; i < n; i++) d = fmax(d, fabs((double)a[i] - b[i]));
    return d;
}

/* ---- stories260K ---------------------------------------------------------------------------- */

static void test_stories260k_published_sample(void **state) {
    (void)state;
    const char *path = sqz_test_data("models/stories260K/stories260K.bin");
    SQZ_SKIP_UNLESS(path);
    char *want = NULL;
    size_t want_len;
    SQZ_ASSERT_OK(sqz_read_file(fixture("stories260K_greedy.txt"), 1 << 20, &want, &want_len));
    sqz_model *m = open_model(path);
    sqz_session *s = new_session(m, 512, SQZ_WEIGHTS_CACHE);
    /* run.c: prompt "" is BOS alone; 256 steps; stop when BOS (1) comes out. */
    int32_t prompt[1] = {m->vocab.bos}, out[256];
    int64_t n = 0;
    sqz_sample_opts greedy = {0};
    SQZ_ASSERT_OK(sqz_generate(s, prompt, 1, 256, m->vocab.bos, &greedy, NULL, NULL, out, &n));
    assert_int_equal(n, 256);
    sqz_tokenizer *tok;
    SQZ_ASSERT_OK(sqz_tokenizer_new(&m->vocab, &tok));
    int32_t ids[257];
    ids[0] = m->vocab.bos;
    memcpy(ids + 1, out, sizeof out);
    char *text;
    size_t len;
    SQZ_ASSERT_OK(sqz_detokenize(tok, ids, 257, false, &text, &len));
    /* run.c prints a newline at the end; the fixture keeps it. */
    assert_int_equal(len + 1, want_len);
    assert_memory_equal(text, want, len);
    free(text);
    free(want);
    sqz_tokenizer_free(tok);
    sqz_session_free(s);
    sqz_model_free(m);
}

/* A window at once, token by token over the cache, block by block, and in stream mode. */
static void test_stories260k_consistency(void **state) {
    (void)state;
    const char *path = sqz_test_data("models/stories260K/stories260K.bin");
    SQZ_SKIP_UNLESS(path);
    sqz_model *m = open_model(path);
    enum { N = 300 };
    int64_t V = m->hp.vocab_size, d = m->hp.d_model;
    int32_t ids[N];
    for (int i = 0; i < N; i++) ids[i] = (int32_t)((i * 37 + 11) % V);
    ids[0] = m->vocab.bos;
    float *full = malloc(sizeof(float) * N * V), *step = malloc(sizeof(float) * V), *x = malloc(sizeof(float) * N * d);
    float *blk = malloc(sizeof(float) * N * V);
    sqz_session *s = new_session(m, 512, SQZ_WEIGHTS_CACHE);
    SQZ_ASSERT_OK(sqz_forward(s, ids, N, 0, 0, full));
    /* token by token */
    double worst = 0;
    for (int i = 0; i < N; i++) {
        SQZ_ASSERT_OK(sqz_forward(s, ids + i, 1, i, 0, step));
        worst = fmax(worst, max_abs_diff(step, full + (size_t)i * V, V));
    }
    assert_true(worst < 1e-4);
    /* two halves: a prefill then a continuation */
    SQZ_ASSERT_OK(sqz_forward(s, ids, 100, 0, 100, NULL));
    SQZ_ASSERT_OK(sqz_forward(s, ids + 100, N - 100, 100, N - 101, step));
    assert_true(max_abs_diff(step, full + (size_t)(N - 1) * V, V) < 1e-4);
    /* embed / block / head */
    SQZ_ASSERT_OK(sqz_session_embed(s, ids, NULL, N, 0, x));
    for (int32_t l = 0; l < (int32_t)m->hp.n_layers; l++) SQZ_ASSERT_OK(sqz_session_block(s, l, x, N, 0));
    SQZ_ASSERT_OK(sqz_session_head(s, x, N, 10, blk));
    assert_true(max_abs_diff(blk, full + 10 * V, (N - 10) * V) < 1e-5); /* BLAS may block m = 290 differently */
    sqz_session_free(s);
    /* stream mode (f32 weights go straight to the backend either way: same numbers) */
    s = new_session(m, N, SQZ_WEIGHTS_STREAM);
    SQZ_ASSERT_OK(sqz_forward(s, ids, N, 0, 0, blk));
    assert_true(max_abs_diff(blk, full, N * V) < 1e-5);
    sqz_session_free(s);
    free(full);
    free(step);
    free(x);
    free(blk);
    sqz_model_free(m);
}

typedef struct hook_log {
    int block_in, block_out, linear;
    uint32_t roles_seen[8];
    int abort_at; /* abort on this event index (-1 never) */
    int events;
    int64_t d, ff, q;
    int bad;
} hook_log;

static sqz_status record_hook(void *user, const sqz_hook_event *e) {
    hook_log *h = user;
    if (h->events++ == h->abort_at) return SQZ_ERR_INTERRUPTED;
    if (e->n_tokens != 7 || e->pos != 0) h->bad++;
    switch (e->point) {
    case SQZ_HOOK_BLOCK_IN: h->block_in++; if (e->dim != h->d) h->bad++; break;
    case SQZ_HOOK_BLOCK_OUT: h->block_out++; if (e->dim != h->d) h->bad++; break;
    case SQZ_HOOK_LINEAR_IN:
        h->linear++;
        if (e->layer >= 0) h->roles_seen[e->layer] |= e->roles;
        if (e->roles & (1u << SQZ_ROLE_FFN_DOWN) && e->dim != h->ff) h->bad++;
        if (e->roles & (1u << SQZ_ROLE_ATTN_OUT) && e->dim != h->q) h->bad++;
        break;
    case SQZ_HOOK_EXPERT_OUT: h->bad++; break; /* a dense model has no experts */
    }
    return SQZ_OK;
}

static void test_stories260k_hooks(void **state) {
    (void)state;
    const char *path = sqz_test_data("models/stories260K/stories260K.bin");
    SQZ_SKIP_UNLESS(path);
    sqz_model *m = open_model(path);
    sqz_session *s = new_session(m, 64, SQZ_WEIGHTS_CACHE);
    hook_log h = {.abort_at = -1, .d = m->hp.d_model, .ff = m->hp.d_ff, .q = m->hp.n_heads * m->hp.head_dim};
    sqz_session_set_hook(s, record_hook, &h);
    int32_t ids[7] = {1, 403, 407, 261, 378, 432, 383};
    float *logits = malloc(sizeof(float) * 7 * 512);
    SQZ_ASSERT_OK(sqz_forward(s, ids, 7, 0, 0, logits));
    int L = (int)m->hp.n_layers;
    assert_int_equal(h.block_in, L);
    assert_int_equal(h.block_out, L);
    assert_int_equal(h.linear, 4 * L + 1); /* qkv, out, gate|up, down per layer; the classifier */
    uint32_t all = 0;
    for (sqz_role r = SQZ_ROLE_ATTN_Q; r <= SQZ_ROLE_FFN_DOWN; r++) {
        if (r != SQZ_ROLE_ATTN_OUT_NORM && r != SQZ_ROLE_FFN_NORM) all |= 1u << r;
    }
    for (int l = 0; l < L; l++) assert_int_equal(h.roles_seen[l], all);
    assert_int_equal(h.bad, 0);
    /* a hook's error stops the pass */
    hook_log h2 = {.abort_at = 5, .d = h.d, .ff = h.ff, .q = h.q};
    sqz_session_set_hook(s, record_hook, &h2);
    assert_int_equal(sqz_forward(s, ids, 7, 0, 0, logits), SQZ_ERR_INTERRUPTED);
    sqz_session_set_hook(s, NULL, NULL);
    SQZ_ASSERT_OK(sqz_forward(s, ids, 7, 0, 0, logits));
    free(logits);
    sqz_session_free(s);
    sqz_model_free(m);
}

static void test_stories260k_errors(void **state) {
    (void)state;
    const char *path = sqz_test_data("models/stories260K/stories260K.bin");
    SQZ_SKIP_UNLESS(path);
    sqz_model *m = open_model(path);
    sqz_session *s = new_session(m, 16, SQZ_WEIGHTS_CACHE);
    assert_int_equal(sqz_session_max_tokens(s), 16);
    float logits[512 * 2];
    int32_t ids[20] = {1, 2, 3};
    ids[1] = 512;
    assert_int_equal(sqz_forward(s, ids, 2, 0, 0, logits), SQZ_ERR_INVALID_ARG);
    assert_non_null(strstr(sqz_last_error(), "512"));
    ids[1] = -1;
    assert_int_equal(sqz_forward(s, ids, 2, 0, 0, logits), SQZ_ERR_INVALID_ARG);
    memset(ids, 0, sizeof ids);
    assert_int_equal(sqz_forward(s, ids, 17, 0, 17, NULL), SQZ_ERR_INVALID_ARG); /* window too long */
    assert_int_equal(sqz_forward(s, ids, 2, 15, 2, NULL), SQZ_ERR_INVALID_ARG);  /* beyond the end */
    assert_int_equal(sqz_forward(s, ids, 2, 0, 3, logits), SQZ_ERR_INVALID_ARG); /* logits_from > n */
    SQZ_ASSERT_OK(sqz_forward(s, ids, 4, 0, 4, NULL));
    assert_int_equal(sqz_forward(s, ids, 1, 6, 0, logits), SQZ_ERR_INVALID_ARG); /* cache holds 4 */
    SQZ_ASSERT_OK(sqz_forward(s, ids, 1, 4, 0, logits));
    float e[64];
    assert_int_equal(sqz_embed(s, ids, NULL, 2, true, e), SQZ_ERR_ARCH);
    int32_t out[20];
    int64_t n;
    sqz_sample_opts g = {0};
    assert_int_equal(sqz_generate(s, ids, 10, 10, -1, &g, NULL, NULL, out, &n), SQZ_ERR_INVALID_ARG);
    sqz_session_free(s);
    sqz_session_free(NULL);
    sqz_model_free(m);
}

/* ---- tinystories-656K ------------------------------------------------------------------------ */

static void check_fixture_logits(const char *model_path, const char *fix, double tol, bool greedy) {
    ref_file f;
    if (!ref_load(fixture(fix), &f)) fail_msg("cannot read fixture %s", fix);
    sqz_model *m = open_model(model_path);
    sqz_session *s = new_session(m, 256, SQZ_WEIGHTS_CACHE);
    int64_t V = m->hp.vocab_size;
    for (uint32_t c = 0; c < f.n_cases; c++) {
        const ref_case *rc = &f.cases[c];
        float *logits = malloc(sizeof(float) * rc->n_ids * V);
        SQZ_ASSERT_OK(sqz_forward(s, rc->ids, rc->n_ids, 0, 0, logits));
        for (uint32_t r = 0; r < rc->n_rows; r++) {
            double e = ref_rel_err(&rc->rows[r], rc->n_cols, logits + (size_t)rc->rows[r].pos * V);
            print_message("%s case %u pos %d: relative error %.2e\n", fix, c, rc->rows[r].pos, e);
            assert_true(e <= tol);
        }
        if (greedy && rc->n_out) {
            int32_t *out = malloc(sizeof(int32_t) * rc->n_out);
            int64_t n = 0;
            sqz_sample_opts g = {0};
            SQZ_ASSERT_OK(sqz_generate(s, rc->ids, rc->n_ids, rc->n_out, m->vocab.eos, &g, NULL, NULL, out, &n));
            assert_int_equal(n, rc->n_out);
            assert_memory_equal(out, rc->out, sizeof(int32_t) * rc->n_out);
            free(out);
        }
        free(logits);
    }
    sqz_session_free(s);
    sqz_model_free(m);
    ref_free(&f);
}

static void test_tinystories_logits(void **state) {
    (void)state;
    const char *path = sqz_test_data("models/tinystories-656K");
    SQZ_SKIP_UNLESS(path);
    check_fixture_logits(path, "tinystories656K_logits.ref", 1e-4, false);
}

/* ---- SmolLM2-135M Q4_1 ----------------------------------------------------------------------- */

static void test_smollm2_reference(void **state) {
    (void)state;
    const char *path = sqz_test_smollm2();
    SQZ_SKIP_UNLESS(path);
    check_fixture_logits(path, "smollm2_ref.ref", 1e-3, true);
}

/* The CPU backend multiplies the Q4_1 / Q8_0 blocks as they are stored: neither weight mode holds
 * an f32 copy of the model (it was > 400 MB for cache mode), and both give the same numbers. By
 * default the blocks of each weight of 2 MB or more are copied into huge pages (runtime/resident.c):
 * at most the stored bytes more, and the very same logits as products straight from the mapping. */
static void test_smollm2_stream_equals_cache(void **state) {
    (void)state;
    const char *path = sqz_test_smollm2();
    SQZ_SKIP_UNLESS(path);
    sqz_model *m = open_model(path);
    int32_t ids[6] = {504, 3575, 282, 4649, 314, 7042};
    int64_t V = m->hp.vocab_size, stored = 0;
    for (int64_t i = 0; i < m->n_tensors; i++) stored += (int64_t)m->tensors[i].nbytes;
    float *a = malloc(sizeof(float) * 2 * V), *b = malloc(sizeof(float) * 2 * V);
    float *c = malloc(sizeof(float) * 2 * V);
    sqz_session *s = new_session(m, 8, SQZ_WEIGHTS_CACHE);
    SQZ_ASSERT_OK(sqz_forward(s, ids, 6, 0, 4, a));
    const int64_t with_copies = sqz_session_bytes(s);
    assert_true(with_copies > 20 * 1000 * 1000 && with_copies < 20 * 1000 * 1000 + stored);
    sqz_session_free(s);
    s = new_session(m, 8, SQZ_WEIGHTS_STREAM);
    SQZ_ASSERT_OK(sqz_forward(s, ids, 6, 0, 4, b));
    assert_true(sqz_session_bytes(s) < 20 * 1000 * 1000 + stored);
    sqz_session_free(s);
    sqz_session_opts o = sqz_session_default_opts();
    o.max_tokens = 8;
    o.map_weights = true;
    SQZ_ASSERT_OK(sqz_session_new(m, &o, &s));
    SQZ_ASSERT_OK(sqz_forward(s, ids, 6, 0, 4, c));
    assert_true(sqz_session_bytes(s) < 20 * 1000 * 1000); /* scratch and KV cache only */
    sqz_session_free(s);
    assert_memory_equal(a, c, sizeof(float) * 2 * (size_t)V); /* the same bytes multiplied */
    double e = max_abs_diff(a, b, 2 * V);
    print_message("stream vs cache: max abs diff %.3g; session with its huge-page copies %.1f MB\n", e, with_copies / 1e6);
    assert_true(e < 1e-4);
    free(a);
    free(b);
    free(c);
    sqz_model_free(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stories260k_published_sample),
        cmocka_unit_test(test_stories260k_consistency),
        cmocka_unit_test(test_stories260k_hooks),
        cmocka_unit_test(test_stories260k_errors),
        cmocka_unit_test(test_tinystories_logits),
        cmocka_unit_test(test_smollm2_reference),
        cmocka_unit_test(test_smollm2_stream_equals_cache),
    };
    return sqz_test_run(tests, NULL, NULL);
}

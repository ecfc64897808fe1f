/* tests/unit/test_llama2c.c - the llama2.c checkpoint and tokenizer.bin readers: the real
 * stories260K model and tok512 tokenizer, the tiny golden files (tests/data/llama2c/) and the
 * hostile samples (tests/data/hostile/llama2c/), all written by tests/data/hostile/make_llama2c.py. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/internal.h"
#include "formats/formats_internal.h"
#include "test_util.h"

/* tests/data/llama2c/NAME for the golden samples, tests/data/hostile/llama2c/NAME otherwise. */
static const char *sample(const char *name) {
    static char bufs[4][4096];
    static int next;
    char *b = bufs[next++ % 4];
    const char *src = getenv("SQZ_SOURCE_DIR");
    bool golden = strcmp(name, "tiny.bin") == 0 || strcmp(name, "tiny_unshared.bin") == 0 ||
                  strcmp(name, "tok8.bin") == 0;
    snprintf(b, 4096, "%s/tests/data/%sllama2c/%s", src && *src ? src : ".", golden ? "" : "hostile/", name);
    return b;
}

/* Bytes of a file (test helper; small files). */
static uint8_t *slurp(const char *path, size_t *n) {
    char *buf = NULL;
    if (sqz_read_file(path, (size_t)1 << 26, &buf, n) != SQZ_OK) fail_msg("cannot read %s", path);
    return (uint8_t *)buf;
}

static void test_stories260k(void **state) {
    (void)state;
    const char *path = sqz_test_data("models/stories260K/stories260K.bin");
    SQZ_SKIP_UNLESS(path);
    sqz_format fmt;
    SQZ_ASSERT_OK(sqz_detect_format(path, &fmt));
    assert_int_equal(fmt, SQZ_FORMAT_LLAMA2C);
    sqz_model *m;
    SQZ_ASSERT_OK(sqz_model_open(path, NULL, &m));
    const sqz_hparams *hp = &m->hp;
    assert_string_equal(hp->arch, "llama");
    assert_int_equal(hp->family, SQZ_FAMILY_LLAMA);
    assert_int_equal(hp->d_model, 64);
    assert_int_equal(hp->d_ff, 172);
    assert_int_equal(hp->n_layers, 5);
    assert_int_equal(hp->n_heads, 8);
    assert_int_equal(hp->n_kv_heads, 4);
    assert_int_equal(hp->head_dim, 8);
    assert_int_equal(hp->vocab_size, 512);
    assert_int_equal(hp->ctx_len, 512);
    assert_true(hp->tied_embeddings); /* the header's vocab_size is +512 */
    assert_int_equal(hp->rope_layout, SQZ_ROPE_INTERLEAVED);
    assert_true(hp->rope_theta == 10000.f);
    assert_true(hp->norm_eps == 1e-5f);
    assert_int_equal(hp->act, SQZ_ACT_SILU);
    assert_string_equal(m->name, "stories260K");
    /* 1 embedding + 9 per layer + final norm; no classifier (tied), no freq_cis (derived). */
    assert_int_equal(m->n_tensors, 1 + 9 * 5 + 1);
    /* 512*64 + 5*(64 + 64*64 + 2*32*64 + 64*64 + 64 + 3*172*64) + 64: the file's floats minus
     * the 2*512*4 freq_cis floats. */
    assert_int_equal(sqz_model_param_count(m), 260032);
    assert_int_equal(sqz_model_data_bytes(m), 4 * 260032);
    assert_null(sqz_model_get(m, SQZ_ROLE_OUTPUT, -1, SQZ_PARAM_WEIGHT));

    /* Spot checks against the file bytes at the computed offsets. */
    size_t n;
    uint8_t *file = slurp(path, &n);
    assert_int_equal(n, 28 + 4 * (260032 + 2 * 512 * 4));
    const sqz_tensor *e = sqz_model_get(m, SQZ_ROLE_TOKEN_EMBD, -1, SQZ_PARAM_WEIGHT);
    assert_string_equal(e->name, "tok_embeddings.weight");
    assert_int_equal(e->shape[0], 512);
    assert_int_equal(e->shape[1], 64);
    assert_memory_equal(e->data, file + 28, 16);
    /* wk of layer 3: after emb (512*64), rms_att (5*64), wq (5*64*64), wk layers 0..2 (3*32*64). */
    const sqz_tensor *wk = sqz_model_get(m, SQZ_ROLE_ATTN_K, 3, SQZ_PARAM_WEIGHT);
    assert_string_equal(wk->name, "layers.3.attention.wk.weight");
    assert_int_equal(wk->shape[0], 32);
    assert_int_equal(wk->shape[1], 64);
    size_t off = 28 + 4 * (512 * 64 + 5 * 64 + 5 * 64 * 64 + 3 * 32 * 64);
    assert_memory_equal(wk->data, file + off, wk->nbytes);
    const sqz_tensor *w2 = sqz_model_get(m, SQZ_ROLE_FFN_DOWN, 4, SQZ_PARAM_WEIGHT);
    assert_string_equal(w2->name, "layers.4.feed_forward.w2.weight");
    assert_int_equal(w2->shape[0], 64);
    assert_int_equal(w2->shape[1], 172);
    const sqz_tensor *nrm = sqz_model_get(m, SQZ_ROLE_OUTPUT_NORM, -1, SQZ_PARAM_WEIGHT);
    assert_string_equal(nrm->name, "norm.weight");
    assert_memory_equal(nrm->data, file + 28 + 4 * (260032 - 64), 64 * 4);
    free(file);

    /* tok512.bin, found beside the checkpoint as tok<vocab>.bin. */
    const sqz_vocab *v = &m->vocab;
    assert_int_equal(v->kind, SQZ_VOCAB_SPM);
    assert_int_equal(v->n_tokens, 512);
    assert_int_equal(v->max_token_len, 7);
    assert_string_equal(v->tokens[0], "<unk>");
    assert_string_equal(v->tokens[1], "<s>");
    assert_string_equal(v->tokens[2], "</s>");
    assert_string_equal(v->tokens[3], "<0x00>");
    assert_string_equal(v->tokens[258], "<0xFF>");
    assert_string_equal(v->tokens[259], "\xe2\x96\x81t"); /* " t" in the file */
    assert_string_equal(v->tokens[265], "\xe2\x96\x81the");
    assert_int_equal(v->types[0], SQZ_TOKEN_UNKNOWN);
    assert_int_equal(v->types[1], SQZ_TOKEN_CONTROL);
    assert_int_equal(v->types[2], SQZ_TOKEN_CONTROL);
    assert_int_equal(v->types[3], SQZ_TOKEN_BYTE);
    assert_int_equal(v->types[258], SQZ_TOKEN_BYTE);
    assert_int_equal(v->types[259], SQZ_TOKEN_NORMAL);
    assert_true(v->scores[260] == -1.f);
    assert_true(v->scores[511] == -252.f);
    assert_int_equal(v->unk, 0);
    assert_int_equal(v->bos, 1);
    assert_int_equal(v->eos, 2);
    assert_true(v->add_bos);
    assert_false(v->add_eos);
    assert_true(v->add_space_prefix);
    sqz_model_free(m);
}

static void test_tokenizer_option(void **state) {
    (void)state;
    const char *path = sqz_test_data("models/stories260K/stories260K.bin");
    const char *tok = sqz_test_data("models/stories260K/tok512.bin");
    SQZ_SKIP_UNLESS(path);
    sqz_open_opts o = {.tokenizer_path = tok};
    sqz_model *m;
    SQZ_ASSERT_OK(sqz_model_open(path, &o, &m));
    assert_int_equal(m->vocab.n_tokens, 512);
    sqz_model_free(m);
    /* A named tokenizer that is missing is an error. */
    o.tokenizer_path = sample("no_such_tokenizer.bin");
    assert_int_equal(sqz_model_open(path, &o, &m), SQZ_ERR_NOT_FOUND);
    assert_null(m);
    assert_non_null(strstr(sqz_last_error(), "no_such_tokenizer.bin"));

    /* The checkpoint alone in a directory: no tokenizer is not an error; tokenizer.bin beside
     * it is found. */
    const char *dir = sqz_test_tmpdir();
    char *link = sqz__path_join(dir, "model.bin");
    char *tlink = sqz__path_join(dir, "tokenizer.bin");
    assert_int_equal(symlink(path, link), 0);
    SQZ_ASSERT_OK(sqz_model_open(link, NULL, &m));
    assert_int_equal(m->vocab.kind, SQZ_VOCAB_NONE);
    assert_int_equal(m->vocab.n_tokens, 0);
    assert_string_equal(m->name, "model");
    sqz_model_free(m);
    assert_int_equal(symlink(tok, tlink), 0);
    SQZ_ASSERT_OK(sqz_model_open(link, NULL, &m));
    assert_int_equal(m->vocab.n_tokens, 512);
    sqz_model_free(m);
    unlink(tlink);
    unlink(link);
    rmdir(dir);
    free(link);
    free(tlink);
}

/* tiny.bin: float k of the payload holds k, so each tensor's first float is its offset. */
static void check_tiny(const char *file, bool shared) {
    sqz_model *m;
    SQZ_ASSERT_OK(sqz_model_open(sample(file), NULL, &m));
    assert_int_equal(m->hp.d_model, 4);
    assert_int_equal(m->hp.d_ff, 6);
    assert_int_equal(m->hp.n_layers, 2);
    assert_int_equal(m->hp.n_heads, 2);
    assert_int_equal(m->hp.n_kv_heads, 1);
    assert_int_equal(m->hp.head_dim, 2);
    assert_int_equal(m->hp.vocab_size, 8);
    assert_int_equal(m->hp.ctx_len, 4);
    assert_int_equal(m->hp.tied_embeddings, shared);
    /* emb 32 | att_norm 2x4 | wq 2x16 | wk 2x8 | wv 2x8 | wo 2x16 | ffn_norm 2x4 | w1 2x24 | w2 2x24 |
     * w3 2x24 | norm 4 | freq_cis 2x4x1 | wcls 32 */
    static const struct { const char *name; float first; int64_t rows, cols; } want[] = {
        {"tok_embeddings.weight", 0, 8, 4},
        {"layers.0.attention_norm.weight", 32, 4, 1},
        {"layers.1.attention_norm.weight", 36, 4, 1},
        {"layers.0.attention.wq.weight", 40, 4, 4},
        {"layers.1.attention.wq.weight", 56, 4, 4},
        {"layers.0.attention.wk.weight", 72, 2, 4},
        {"layers.1.attention.wk.weight", 80, 2, 4},
        {"layers.1.attention.wv.weight", 96, 2, 4},
        {"layers.1.attention.wo.weight", 120, 4, 4},
        {"layers.1.ffn_norm.weight", 140, 4, 1},
        {"layers.0.feed_forward.w1.weight", 144, 6, 4},
        {"layers.1.feed_forward.w2.weight", 216, 4, 6},
        {"layers.1.feed_forward.w3.weight", 264, 6, 4},
        {"norm.weight", 288, 4, 1},
    };
    for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
        int64_t k = sqz_model_find(m, want[i].name);
        if (k < 0) fail_msg("%s: no tensor %s", file, want[i].name);
        const sqz_tensor *t = &m->tensors[k];
        assert_int_equal(t->shape[0], want[i].rows);
        assert_int_equal(t->ndim, want[i].cols > 1 ? 2 : 1);
        assert_true(((const float *)t->data)[0] == want[i].first);
        assert_false(t->owned);
    }
    const sqz_tensor *w1 = sqz_model_get(m, SQZ_ROLE_FFN_GATE, 1, SQZ_PARAM_WEIGHT);
    const sqz_tensor *w3 = sqz_model_get(m, SQZ_ROLE_FFN_UP, 0, SQZ_PARAM_WEIGHT);
    assert_string_equal(w1->name, "layers.1.feed_forward.w1.weight");
    assert_string_equal(w3->name, "layers.0.feed_forward.w3.weight");
    const sqz_tensor *out = sqz_model_get(m, SQZ_ROLE_OUTPUT, -1, SQZ_PARAM_WEIGHT);
    if (shared) {
        assert_null(out);
    } else {
        assert_non_null(out);
        assert_string_equal(out->name, "output.weight");
        assert_true(((const float *)out->data)[0] == 300.f);
        assert_true(((const float *)out->data)[31] == 331.f);
    }
    assert_int_equal(sqz_model_param_count(m), 292 + (shared ? 0 : 32));
    /* tok8.bin beside it. */
    const sqz_vocab *v = &m->vocab;
    assert_int_equal(v->n_tokens, 8);
    assert_string_equal(v->tokens[1], "<s>");
    assert_string_equal(v->tokens[3], "<0x41>");
    assert_int_equal(v->types[3], SQZ_TOKEN_BYTE);
    assert_string_equal(v->tokens[4], "\xe2\x96\x81" "a");
    assert_string_equal(v->tokens[6], "\xe2\x96\x81" "ab");
    assert_string_equal(v->tokens[7], "\xc3\xa9");
    assert_true(v->scores[7] == -7.f);
    sqz_model_free(m);
}

static void test_tiny(void **state) {
    (void)state;
    check_tiny("tiny.bin", true);
    check_tiny("tiny_unshared.bin", false);
}

typedef struct hostile {
    const char *file;
    const char *reason; /* a substring of the message */
} hostile;

static const hostile bad_models[] = {
    {"header_short.bin", "too short for the 28-byte llama2.c header"},
    {"data_truncated.bin", "predicts 1228 bytes, the file has 628"},
    {"dim_zero.bin", "dim 0 out of range"},
    {"layers_negative.bin", "n_layers -2 out of range"},
    {"vocab_zero.bin", "vocab_size 0 out of range"},
    {"vocab_int_min.bin", "vocab_size -2147483648 out of range"},
    {"heads_zero.bin", "n_heads 0 out of range"},
    {"heads_not_dividing.bin", "n_heads 4 does not divide dim 6"},
    {"kv_not_dividing.bin", "n_kv_heads 3 must divide n_heads 4"},
    {"head_size_odd.bin", "head size 3 is odd"},
    {"dims_absurd.bin", "overflows"},
    {"one_float_extra.bin", "predicts 1228 bytes, the file has 1232"},
    {"one_float_missing.bin", "predicts 1228 bytes, the file has 1224"},
    {"seq_huge_overflow.bin", "overflows"},
};

static const hostile bad_tokenizers[] = {
    {"tok_header_short.bin", "too short for the tokenizer header"},
    {"tok_max_len_negative.bin", "max_token_length -7 out of range"},
    {"tok_truncated.bin", "token 7 at byte 88: 2 bytes exceed the 1 left"},
    {"tok_too_few.bin", "token 7: truncated at byte 88"},
    {"tok_negative_len.bin", "token 4 at byte 58: length -2 outside"},
    {"tok_len_over_max.bin", "token 5 at byte 68: length 9 outside [1, max_token_length 6]"},
    {"tok_len_beyond_file.bin", "token 7 at byte 88: 1000 bytes exceed the 2 left"},
    {"tok_bad_utf8.bin", "token 7 at byte 88 is not valid UTF-8"},
    {"tok_nul.bin", "token 7 holds a NUL byte"},
    {"tok_trailing.bin", "2 bytes left after 8 tokens"},
};

static void expect_error(sqz_status s, const char *file, const char *reason) {
    if (s == SQZ_OK) fail_msg("%s: accepted", file);
    if (!strstr(sqz_last_error(), file) || !strstr(sqz_last_error(), reason))
        fail_msg("%s: message '%s' lacks the file name or '%s'", file, sqz_last_error(), reason);
}

static void test_hostile_models(void **state) {
    (void)state;
    for (size_t i = 0; i < sizeof bad_models / sizeof *bad_models; i++) {
        const char *path = sample(bad_models[i].file);
        sqz_model *m = sqz_model_new();
        assert_non_null(m);
        expect_error(sqz__llama2c_open(path, NULL, m), bad_models[i].file, bad_models[i].reason);
        sqz_model_free(m);
        /* Through the public entry point: detection or the reader rejects it, naming the file. */
        sqz_model *m2 = (sqz_model *)1;
        sqz_status s = sqz_model_open(path, NULL, &m2);
        assert_int_not_equal(s, SQZ_OK);
        assert_null(m2);
        assert_non_null(strstr(sqz_last_error(), bad_models[i].file));
    }
}

static void test_hostile_tokenizers(void **state) {
    (void)state;
    for (size_t i = 0; i < sizeof bad_tokenizers / sizeof *bad_tokenizers; i++) {
        const char *path = sample(bad_tokenizers[i].file);
        sqz_vocab v;
        sqz_vocab_init(&v);
        expect_error(sqz__llama2c_tokenizer_read(path, 8, &v), bad_tokenizers[i].file, bad_tokenizers[i].reason);
        assert_int_equal(v.n_tokens, 0);
        assert_null(v.tokens);
        /* A present-and-broken tokenizer fails the model open. */
        sqz_open_opts o = {.tokenizer_path = path};
        sqz_model *m = (sqz_model *)1;
        expect_error(sqz_model_open(sample("tiny.bin"), &o, &m), bad_tokenizers[i].file, bad_tokenizers[i].reason);
        assert_null(m);
    }
    /* The vocab size must match the file exactly. */
    sqz_vocab v;
    sqz_vocab_init(&v);
    expect_error(sqz__llama2c_tokenizer_read(sample("tok8.bin"), 9, &v), "tok8.bin", "token 8: truncated");
    expect_error(sqz__llama2c_tokenizer_read(sample("tok8.bin"), 7, &v), "tok8.bin", "left after 7 tokens");
    expect_error(sqz__llama2c_tokenizer_read(sample("tok8.bin"), 1 << 20, &v), "tok8.bin", "cannot hold");
    SQZ_ASSERT_OK(sqz__llama2c_tokenizer_read(sample("tok8.bin"), 8, &v));
    assert_int_equal(v.n_tokens, 8);
    sqz_vocab_clear(&v);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stories260k),     cmocka_unit_test(test_tokenizer_option),
        cmocka_unit_test(test_tiny),            cmocka_unit_test(test_hostile_models),
        cmocka_unit_test(test_hostile_tokenizers),
    };
    return sqz_test_run(tests, NULL, NULL);
}

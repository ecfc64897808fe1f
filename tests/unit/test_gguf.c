/* tests/unit/test_gguf.c - the GGUF reader and writer: the golden tiny file, the hostile
 * corpus (tests/data/hostile/gguf, MANIFEST.md), the tiny BERT, every truncation and byte flip of the
 * golden file, synthetic llama (pruned, HF rotary order) / qwen2 / BERT round trips,
 * and SmolLM2-135M (real Q4_1 GGUF): hyperparameters, parameter count, and a
 * byte-identical gguf -> gguf rewrite. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/internal.h"
#include "formats/gguf_internal.h"
#include "test_util.h"

/* ---- helpers ---- */

static const char *source_dir(void) {
    const char *s = getenv("SQZ_SOURCE_DIR");
    return s && *s ? s : NULL;
}

static char *read_all(const char *path, size_t *n) {
    char *buf = NULL;
    if (sqz_read_file(path, (size_t)1 << 30, &buf, n) != SQZ_OK) fail_msg("cannot read %s: %s", path, sqz_last_error());
    return buf;
}

static void write_all(const char *path, const void *p, size_t n) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(p, 1, n, f), n);
    assert_int_equal(fclose(f), 0);
}

static bool files_equal(const char *a, const char *b) {
    size_t na, nb;
    char *pa = read_all(a, &na), *pb = read_all(b, &nb);
    bool eq = na == nb && memcmp(pa, pb, na) == 0;
    free(pa);
    free(pb);
    return eq;
}

/* Opening must fail with a message naming the file. */
static sqz_status open_must_fail(const char *path) {
    sqz_model *m = (sqz_model *)1;
    sqz_status s = sqz_model_open(path, NULL, &m);
    if (s == SQZ_OK) {
        sqz_model_free(m);
        fail_msg("%s: opened, but must be rejected", path);
    }
    assert_null(m);
    if (!strstr(sqz_last_error(), sqz__basename(path))) fail_msg("%s: message does not name the file: %s", path,
                                                                 sqz_last_error());
    return s;
}

static uint32_t rng = 12345;
static float frand(void) {
    rng = rng * 1664525u + 1013904223u;
    return (float)(rng >> 8) / 16777216.0f - 0.5f;
}

static void add_f32(sqz_model *m, sqz_role role, int32_t layer, sqz_param param, int64_t d0, int64_t d1) {
    char name[96];
    assert_true(sqz__gguf_tensor_name(role, layer, param, name, sizeof name));
    sqz_tensor t = {.name = name, .role = role, .param = param, .layer = layer, .dtype = SQZ_DTYPE_F32,
                    .ndim = d1 ? 2 : 1, .shape = {d0, d1 ? d1 : 1, 1, 1}, .owned = true};
    int64_t n = d0 * (d1 ? d1 : 1);
    float *p = malloc((size_t)n * sizeof *p);
    assert_non_null(p);
    for (int64_t i = 0; i < n; i++) p[i] = frand();
    t.data = p;
    t.nbytes = (size_t)n * sizeof *p;
    assert_non_null(sqz_model_add_tensor(m, &t));
}

static void fill_vocab(sqz_vocab *v, sqz_vocab_kind kind, int32_t n) {
    v->kind = kind;
    v->n_tokens = n;
    v->tokens = calloc((size_t)n, sizeof *v->tokens);
    v->types = calloc((size_t)n, sizeof *v->types);
    v->scores = calloc((size_t)n, sizeof *v->scores);
    for (int32_t i = 0; i < n; i++) {
        char b[32];
        snprintf(b, sizeof b, i == 3 ? "\xc3\xa9t%d" : "t%d", (int)i);
        v->tokens[i] = strdup(b);
        v->types[i] = i < 3 ? SQZ_TOKEN_CONTROL : SQZ_TOKEN_NORMAL;
        v->scores[i] = -(float)i;
    }
    v->n_merges = 2;
    v->merges = calloc(2, sizeof *v->merges);
    v->merges[0] = strdup("t t");
    v->merges[1] = strdup("t1 t2");
    v->bos = 1;
    v->eos = 2;
    v->unk = 0;
}

static void assert_vocab_equal(const sqz_vocab *a, const sqz_vocab *b) {
    assert_int_equal(a->kind, b->kind);
    assert_int_equal(a->n_tokens, b->n_tokens);
    for (int32_t i = 0; i < a->n_tokens; i++) assert_string_equal(a->tokens[i], b->tokens[i]);
    assert_int_equal(a->scores != NULL, b->scores != NULL);
    if (a->scores) assert_memory_equal(a->scores, b->scores, (size_t)a->n_tokens * sizeof *a->scores);
    assert_int_equal(a->types != NULL, b->types != NULL);
    if (a->types) assert_memory_equal(a->types, b->types, (size_t)a->n_tokens * sizeof *a->types);
    assert_int_equal(a->n_merges, b->n_merges);
    for (int32_t i = 0; i < a->n_merges; i++) assert_string_equal(a->merges[i], b->merges[i]);
    assert_int_equal(a->bos, b->bos);
    assert_int_equal(a->eos, b->eos);
    assert_int_equal(a->unk, b->unk);
    assert_int_equal(a->pad, b->pad);
    assert_int_equal(a->sep, b->sep);
    assert_int_equal(a->cls, b->cls);
    assert_int_equal(a->mask, b->mask);
    assert_int_equal(a->add_bos, b->add_bos);
    assert_int_equal(a->add_eos, b->add_eos);
    assert_int_equal(a->add_space_prefix, b->add_space_prefix);
    assert_int_equal(a->pre != NULL, b->pre != NULL);
    if (a->pre) assert_string_equal(a->pre, b->pre);
    assert_int_equal(a->chat_template != NULL, b->chat_template != NULL);
    if (a->chat_template) assert_string_equal(a->chat_template, b->chat_template);
}

static void assert_hparams_equal(const sqz_model *a, const sqz_model *b) {
    const sqz_hparams *x = &a->hp, *y = &b->hp;
    assert_int_equal(x->family, y->family);
    assert_int_equal(x->n_layers, y->n_layers);
    assert_int_equal(x->d_model, y->d_model);
    assert_int_equal(x->head_dim, y->head_dim);
    assert_int_equal(x->vocab_size, y->vocab_size);
    assert_int_equal(x->ctx_len, y->ctx_len);
    assert_int_equal(x->n_token_types, y->n_token_types);
    assert_true(x->norm_eps == y->norm_eps);
    assert_true(x->rope_theta == y->rope_theta);
    assert_int_equal(x->act, y->act);
    assert_int_equal(x->tied_embeddings, y->tied_embeddings);
    assert_int_equal(x->attn_bias, y->attn_bias);
    for (int64_t l = 0; l < x->n_layers; l++) {
        assert_int_equal(a->layers[l].n_heads, b->layers[l].n_heads);
        assert_int_equal(a->layers[l].n_kv_heads, b->layers[l].n_kv_heads);
        assert_int_equal(a->layers[l].d_ff, b->layers[l].d_ff);
    }
}

/* Every tensor of a (but skipped roles) is in b with the same shape, dtype and bytes;
 * q/k rows are compared through the rotary permutation when the layouts differ. */
static void assert_tensors_equal(const sqz_model *a, const sqz_model *b, sqz_role skip) {
    int64_t n = 0;
    for (int64_t i = 0; i < a->n_tensors; i++) {
        const sqz_tensor *t = &a->tensors[i];
        if (t->role == skip) {
            assert_null(sqz_model_get(b, t->role, t->layer, t->param));
            continue;
        }
        n++;
        const sqz_tensor *u = sqz_model_get(b, t->role, t->layer, t->param);
        if (!u) fail_msg("tensor '%s' is missing after the round trip", t->name);
        assert_int_equal(t->dtype, u->dtype);
        assert_int_equal(t->ndim, u->ndim);
        for (int d = 0; d < t->ndim; d++) assert_int_equal(t->shape[d], u->shape[d]);
        assert_int_equal(t->nbytes, u->nbytes);
        bool qk = t->role == SQZ_ROLE_ATTN_Q || t->role == SQZ_ROLE_ATTN_K;
        if (!qk || a->hp.rope_layout == b->hp.rope_layout) {
            if (memcmp(t->data, u->data, t->nbytes) != 0) fail_msg("tensor '%s' differs", t->name);
            continue;
        }
        size_t row = t->nbytes / (size_t)t->shape[0];
        int64_t hd = a->hp.head_dim, half = hd / 2, heads = t->shape[0] / hd;
        for (int64_t h = 0; h < heads; h++)
            for (int64_t i2 = 0; i2 < 2; i2++)
                for (int64_t j = 0; j < half; j++) {
                    int64_t r_half = h * hd + i2 * half + j, r_int = h * hd + 2 * j + i2;
                    int64_t ra = a->hp.rope_layout == SQZ_ROPE_HALF ? r_half : r_int;
                    int64_t rb = b->hp.rope_layout == SQZ_ROPE_HALF ? r_half : r_int;
                    assert_memory_equal((const uint8_t *)t->data + ra * row, (const uint8_t *)u->data + rb * row, row);
                }
    }
    assert_int_equal(n, b->n_tensors);
}

static sqz_model *reopen(const char *path) {
    sqz_model *m = NULL;
    SQZ_ASSERT_OK(sqz_model_open(path, NULL, &m));
    return m;
}

static void save(const sqz_model *m, const char *path, int dtype) {
    sqz_save_opts o = {.format = SQZ_FORMAT_GGUF, .dtype = dtype};
    SQZ_ASSERT_OK(sqz_model_save(m, path, &o));
}

/* ---- the golden tiny file and the hostile corpus ---- */

static void test_names(void **state) {
    (void)state;
    for (int r = 0; r < SQZ_ROLE_COUNT; r++) {
        for (int p = 0; p < 2; p++) {
            char name[80];
            int32_t layer = sqz_role_per_layer((sqz_role)r) ? 17 : -1;
            assert_true(sqz__gguf_tensor_name((sqz_role)r, layer, (sqz_param)p, name, sizeof name));
            sqz_role r2;
            int32_t l2;
            sqz_param p2;
            assert_true(sqz__gguf_parse_tensor_name(name, &r2, &l2, &p2));
            assert_int_equal(r2, r);
            assert_int_equal(l2, layer);
            assert_int_equal(p2, p);
        }
    }
    sqz_role r;
    int32_t l;
    sqz_param p;
    static const char *bad[] = {"blk.attn_q.weight", "blk.01.attn_q.weight", "blk.1.token_embd.weight",
                                "attn_q.weight", "output.scale", "blk.-1.attn_q.weight", "blk.99999999.attn_q.weight",
                                ".weight", "", "blk.0.rope_freqs.weight", "blk.0.attn_q"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        if (sqz__gguf_parse_tensor_name(bad[i], &r, &l, &p)) fail_msg("'%s' parsed", bad[i]);
    }
}

static const char *golden_file(const char *name) {
    static char buf[4096];
    if (!source_dir()) return NULL;
    snprintf(buf, sizeof buf, "%s/tests/data/gguf/%s", source_dir(), name);
    return buf;
}

static const char *golden_path(void) { return golden_file("tiny_llama.gguf"); }

static void test_golden_tiny(void **state) {
    (void)state;
    const char *path = golden_path();
    SQZ_SKIP_UNLESS(path);
    sqz_model *m = reopen(path);
    assert_string_equal(m->hp.arch, "llama");
    assert_int_equal(m->hp.n_layers, 1);
    assert_int_equal(m->hp.d_model, 4);
    assert_int_equal(m->hp.n_heads, 2);
    assert_int_equal(m->hp.n_kv_heads, 1);
    assert_int_equal(m->hp.head_dim, 2);
    assert_int_equal(m->hp.d_ff, 8);
    assert_int_equal(m->hp.vocab_size, 4);
    assert_int_equal(m->hp.ctx_len, 16);
    assert_true(m->hp.tied_embeddings);
    assert_int_equal(m->hp.rope_layout, SQZ_ROPE_INTERLEAVED);
    assert_int_equal(m->n_tensors, 11);
    assert_string_equal(m->name, "tiny");
    assert_int_equal(m->vocab.kind, SQZ_VOCAB_SPM);
    assert_string_equal(m->vocab.tokens[3], "\xe2\x96\x81" "a");
    assert_true(m->vocab.add_bos && m->vocab.add_space_prefix); /* llama.cpp's SPM defaults */
    /* float k of the data section is k/64 (make_gguf.py): attn_q sits at data offset 128 */
    const sqz_tensor *q = sqz_model_get(m, SQZ_ROLE_ATTN_Q, 0, SQZ_PARAM_WEIGHT);
    assert_int_equal(q->shape[0], 4);
    assert_int_equal(q->shape[1], 4);
    const float *f = q->data;
    for (int i = 0; i < 16; i++) assert_true(f[i] == (float)(128 / 4 + i) / 64.0f);
    assert_int_equal(sqz_model_param_count(m), 16 + 4 + 4 + 16 + 8 + 8 + 16 + 4 + 32 * 3);
    sqz_model_free(m);
}

static void test_golden_bert(void **state) {
    (void)state;
    const char *path = golden_file("tiny_bert.gguf");
    SQZ_SKIP_UNLESS(path);
    sqz_model *m = reopen(path);
    assert_string_equal(m->hp.arch, "bert");
    assert_int_equal(m->hp.family, SQZ_FAMILY_BERT);
    assert_int_equal(m->hp.act, SQZ_ACT_GELU);
    assert_int_equal(m->hp.rope_layout, SQZ_ROPE_NONE);
    assert_int_equal(m->hp.n_kv_heads, 2); /* no head_count_kv: as many as heads */
    assert_int_equal(m->hp.head_dim, 2);
    assert_int_equal(m->hp.n_token_types, 2);
    assert_int_equal(m->hp.vocab_size, 5);
    assert_true(m->hp.attn_bias);
    assert_false(m->hp.tied_embeddings);
    assert_true(m->hp.norm_eps == 1e-12f);
    assert_int_equal(m->n_tensors, 21);
    const sqz_vocab *v = &m->vocab;
    assert_int_equal(v->kind, SQZ_VOCAB_WPM);
    static const char *const want[] = {"[PAD]", "[CLS]", "[SEP]", "a", "##b"}; /* HF's spelling */
    for (int i = 0; i < 5; i++) assert_string_equal(v->tokens[i], want[i]);
    assert_int_equal(v->cls, 1);
    assert_int_equal(v->sep, 2);
    assert_int_equal(v->pad, 0);
    assert_int_equal(v->bos, -1);
    sqz_model_free(m);
}

static void test_hostile_corpus(void **state) {
    (void)state;
    SQZ_SKIP_UNLESS(source_dir());
    char dir[4096], manifest[4200];
    snprintf(dir, sizeof dir, "%s/tests/data/hostile/gguf", source_dir());
    snprintf(manifest, sizeof manifest, "%s/MANIFEST.md", dir);
    size_t n;
    char *text = read_all(manifest, &n);
    int count = 0;
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        if (strncmp(line, "| ", 2) != 0 || !strstr(line, ".gguf |")) continue;
        char *file = line + 2, *status = strstr(file, " | ");
        assert_non_null(status);
        *status = 0;
        status += 3;
        char *reason = strstr(status, " |");
        assert_non_null(reason);
        *reason = 0;
        reason += 2;
        if (*reason == ' ') reason++;
        char *end = strstr(reason, " |");
        if (end) *end = 0;
        else if (reason[0] == '|') reason[0] = 0;
        char path[8400];
        snprintf(path, sizeof path, "%s/%s", dir, file);
        sqz_status s = open_must_fail(path);
        if (strncmp(sqz_status_name(s), status, strlen(status)) != 0 || !strstr(sqz_last_error(), reason)) {
            fail_msg("%s: got %s \"%s\", expected %s \"%s\"", file, sqz_status_name(s), sqz_last_error(), status,
                     reason);
        }
        count++;
    }
    free(text);
    print_message("hostile GGUF corpus: %d files rejected as listed\n", count);
    assert_true(count >= 60);
}

static void test_truncations_and_flips(void **state) {
    (void)state;
    const char *golden = golden_path();
    SQZ_SKIP_UNLESS(golden);
    size_t n;
    char *img = read_all(golden, &n);
    char dir[4096], path[4200];
    snprintf(dir, sizeof dir, "%s", sqz_test_tmpdir());
    snprintf(path, sizeof path, "%s/cut.gguf", dir);
    /* the file ends with the last tensor's data: every strict prefix must be rejected */
    for (size_t cut = 0; cut < n; cut++) {
        write_all(path, img, cut);
        open_must_fail(path);
    }
    /* single-byte corruption anywhere: rejected with a message, or opened; never a crash */
    int opened = 0;
    for (size_t i = 0; i < n; i++) {
        char saved = img[i];
        img[i] = (char)(saved ^ 0xA5);
        write_all(path, img, n);
        sqz_model *m;
        if (sqz_model_open(path, NULL, &m) == SQZ_OK) {
            opened++;
            sqz_model_free(m);
        } else {
            assert_non_null(strstr(sqz_last_error(), "cut.gguf"));
        }
        img[i] = saved;
    }
    print_message("byte flips: %d of %zu still open (data bytes)\n", opened, n);
    unlink(path);
    rmdir(dir);
    free(img);
}

/* ---- synthetic round trips ---- */

static sqz_model *make_llama(const char *arch, sqz_rope_layout rope, bool pruned, bool tied, bool bias) {
    sqz_model *m = sqz_model_new();
    assert_non_null(m);
    sqz_hparams *hp = &m->hp;
    snprintf(hp->arch, sizeof hp->arch, "%s", arch);
    hp->family = SQZ_FAMILY_LLAMA;
    hp->n_layers = 2;
    hp->d_model = 64;
    hp->n_heads = 4;
    hp->n_kv_heads = 2;
    hp->head_dim = 16;
    hp->d_ff = 96;
    hp->vocab_size = 40;
    hp->ctx_len = 128;
    hp->norm_eps = 1e-6f;
    hp->rope_theta = 500000.0f;
    hp->rope_layout = rope;
    hp->act = SQZ_ACT_SILU;
    hp->tied_embeddings = tied;
    hp->attn_bias = bias;
    SQZ_ASSERT_OK(sqz_model_init_layers(m));
    if (pruned) m->layers[1] = (sqz_layer_dims){.n_heads = 2, .n_kv_heads = 1, .d_ff = 64};
    add_f32(m, SQZ_ROLE_TOKEN_EMBD, -1, SQZ_PARAM_WEIGHT, 40, 64);
    for (int32_t l = 0; l < 2; l++) {
        const sqz_layer_dims *ld = &m->layers[l];
        add_f32(m, SQZ_ROLE_ATTN_NORM, l, SQZ_PARAM_WEIGHT, 64, 0);
        add_f32(m, SQZ_ROLE_ATTN_Q, l, SQZ_PARAM_WEIGHT, ld->n_heads * 16, 64);
        add_f32(m, SQZ_ROLE_ATTN_K, l, SQZ_PARAM_WEIGHT, ld->n_kv_heads * 16, 64);
        add_f32(m, SQZ_ROLE_ATTN_V, l, SQZ_PARAM_WEIGHT, ld->n_kv_heads * 16, 64);
        if (bias) {
            add_f32(m, SQZ_ROLE_ATTN_Q, l, SQZ_PARAM_BIAS, ld->n_heads * 16, 0);
            add_f32(m, SQZ_ROLE_ATTN_K, l, SQZ_PARAM_BIAS, ld->n_kv_heads * 16, 0);
            add_f32(m, SQZ_ROLE_ATTN_V, l, SQZ_PARAM_BIAS, ld->n_kv_heads * 16, 0);
        }
        add_f32(m, SQZ_ROLE_ATTN_OUT, l, SQZ_PARAM_WEIGHT, 64, ld->n_heads * 16);
        add_f32(m, SQZ_ROLE_FFN_NORM, l, SQZ_PARAM_WEIGHT, 64, 0);
        add_f32(m, SQZ_ROLE_FFN_GATE, l, SQZ_PARAM_WEIGHT, ld->d_ff, 64);
        add_f32(m, SQZ_ROLE_FFN_UP, l, SQZ_PARAM_WEIGHT, ld->d_ff, 64);
        add_f32(m, SQZ_ROLE_FFN_DOWN, l, SQZ_PARAM_WEIGHT, 64, ld->d_ff);
    }
    add_f32(m, SQZ_ROLE_OUTPUT_NORM, -1, SQZ_PARAM_WEIGHT, 64, 0);
    if (!tied) add_f32(m, SQZ_ROLE_OUTPUT, -1, SQZ_PARAM_WEIGHT, 40, 64);
    fill_vocab(&m->vocab, SQZ_VOCAB_BPE, 40);
    m->vocab.pre = strdup("smollm");
    m->vocab.chat_template = strdup("{{ messages }}");
    m->name = strdup("synthetic");
    SQZ_ASSERT_OK(sqz_model_validate(m));
    return m;
}

static int progress_calls;
static int64_t progress_done, progress_total;
static void on_progress(void *user, int64_t done, int64_t total) {
    (void)user;
    assert_true(done > progress_done && done <= total);
    progress_calls++;
    progress_done = done;
    progress_total = total;
}

static void test_llama_pruned_hf_order(void **state) {
    (void)state;
    sqz_model *m = make_llama("llama", SQZ_ROPE_HALF, true, true, false);
    char dir[4096], p1[4200], p2[4200], p3[4200];
    snprintf(dir, sizeof dir, "%s", sqz_test_tmpdir());
    snprintf(p1, sizeof p1, "%s/a.gguf", dir);
    snprintf(p2, sizeof p2, "%s/b.gguf", dir);
    snprintf(p3, sizeof p3, "%s/c.gguf", dir);
    sqz_save_opts o = {.format = SQZ_FORMAT_GGUF, .dtype = -1, .progress = on_progress};
    progress_calls = 0;
    progress_done = 0;
    SQZ_ASSERT_OK(sqz_model_save(m, p1, &o));
    assert_int_equal(progress_calls, m->n_tensors);
    assert_true(progress_done == progress_total);

    sqz_model *r = reopen(p1);
    /* layers differ: llama.cpp's "llama" sizes every layer like the first, "deci" does not */
    assert_string_equal(r->hp.arch, "deci");
    assert_int_equal(r->hp.rope_layout, SQZ_ROPE_INTERLEAVED); /* llama.cpp's order for llama/deci */
    assert_int_equal(r->hp.n_heads, 4);
    assert_int_equal(r->layers[1].n_heads, 2);
    assert_int_equal(r->layers[1].n_kv_heads, 1);
    assert_int_equal(r->layers[1].d_ff, 64);
    assert_string_equal(r->name, "synthetic");
    assert_hparams_equal(m, r);
    assert_tensors_equal(m, r, SQZ_ROLE_COUNT); /* q/k through the permutation */
    assert_vocab_equal(&m->vocab, &r->vocab);

    /* the reopened (interleaved) model writes the same file again */
    save(r, p2, -1);
    assert_true(files_equal(p1, p2));

    /* q8_0: matrices quantized exactly as sqz_convert does, vectors stay f32 */
    save(r, p3, SQZ_DTYPE_Q8_0);
    sqz_model *q = reopen(p3);
    for (int64_t i = 0; i < q->n_tensors; i++) {
        const sqz_tensor *t = &q->tensors[i];
        const sqz_tensor *src = sqz_model_get(r, t->role, t->layer, t->param);
        assert_int_equal(t->dtype, t->ndim == 2 ? SQZ_DTYPE_Q8_0 : SQZ_DTYPE_F32);
        void *want = malloc(t->nbytes);
        SQZ_ASSERT_OK(sqz_convert(src->dtype, src->data, t->dtype, want, sqz_tensor_nelements(src), NULL));
        assert_memory_equal(want, t->data, t->nbytes);
        free(want);
    }
    sqz_model_free(q);
    sqz_model_free(r);
    sqz_model_free(m);
    unlink(p1);
    unlink(p2);
    unlink(p3);
    rmdir(dir);
}

static void test_qwen2_untied_bias(void **state) {
    (void)state;
    sqz_model *m = make_llama("qwen2", SQZ_ROPE_HALF, false, false, true);
    char dir[4096], p1[4200];
    snprintf(dir, sizeof dir, "%s", sqz_test_tmpdir());
    snprintf(p1, sizeof p1, "%s/q.gguf", dir);
    save(m, p1, -1);
    sqz_model *r = reopen(p1);
    assert_string_equal(r->hp.arch, "qwen2");
    assert_int_equal(r->hp.rope_layout, SQZ_ROPE_HALF); /* NEOX: HF order kept */
    assert_false(r->hp.tied_embeddings);
    assert_true(r->hp.attn_bias);
    assert_hparams_equal(m, r);
    assert_tensors_equal(m, r, SQZ_ROLE_COUNT);
    assert_vocab_equal(&m->vocab, &r->vocab);
    sqz_model_free(r);
    sqz_model_free(m);
    unlink(p1);
    rmdir(dir);
}

static void test_bert_pooler_skipped(void **state) {
    (void)state;
    sqz_model *m = sqz_model_new();
    sqz_hparams *hp = &m->hp;
    snprintf(hp->arch, sizeof hp->arch, "bert");
    hp->family = SQZ_FAMILY_BERT;
    hp->n_layers = 2;
    hp->d_model = 32;
    hp->n_heads = hp->n_kv_heads = 4;
    hp->head_dim = 8;
    hp->d_ff = 64;
    hp->vocab_size = 30;
    hp->ctx_len = 64;
    hp->n_token_types = 2;
    hp->norm_eps = 1e-12f;
    hp->act = SQZ_ACT_GELU;
    hp->attn_bias = true;
    SQZ_ASSERT_OK(sqz_model_init_layers(m));
    add_f32(m, SQZ_ROLE_TOKEN_EMBD, -1, SQZ_PARAM_WEIGHT, 30, 32);
    add_f32(m, SQZ_ROLE_POS_EMBD, -1, SQZ_PARAM_WEIGHT, 64, 32);
    add_f32(m, SQZ_ROLE_TYPE_EMBD, -1, SQZ_PARAM_WEIGHT, 2, 32);
    add_f32(m, SQZ_ROLE_EMBD_NORM, -1, SQZ_PARAM_WEIGHT, 32, 0);
    add_f32(m, SQZ_ROLE_EMBD_NORM, -1, SQZ_PARAM_BIAS, 32, 0);
    static const sqz_role roles[] = {SQZ_ROLE_ATTN_Q, SQZ_ROLE_ATTN_K, SQZ_ROLE_ATTN_V, SQZ_ROLE_ATTN_OUT,
                                     SQZ_ROLE_ATTN_OUT_NORM, SQZ_ROLE_FFN_UP, SQZ_ROLE_FFN_DOWN,
                                     SQZ_ROLE_LAYER_OUT_NORM};
    for (int32_t l = 0; l < 2; l++) {
        for (size_t i = 0; i < sizeof roles / sizeof *roles; i++) {
            sqz_role r = roles[i];
            bool norm = r == SQZ_ROLE_ATTN_OUT_NORM || r == SQZ_ROLE_LAYER_OUT_NORM;
            int64_t rows = r == SQZ_ROLE_FFN_UP ? 64 : 32, cols = r == SQZ_ROLE_FFN_DOWN ? 64 : 32;
            add_f32(m, r, l, SQZ_PARAM_WEIGHT, rows, norm ? 0 : cols);
            add_f32(m, r, l, SQZ_PARAM_BIAS, rows, 0);
        }
    }
    add_f32(m, SQZ_ROLE_POOLER, -1, SQZ_PARAM_WEIGHT, 32, 32);
    add_f32(m, SQZ_ROLE_POOLER, -1, SQZ_PARAM_BIAS, 32, 0);
    fill_vocab(&m->vocab, SQZ_VOCAB_WPM, 30);
    m->vocab.cls = 1;
    m->vocab.sep = 2;
    m->vocab.mask = 4;
    m->vocab.pad = 0;
    /* HF WordPiece spelling in sqz; llama.cpp's ("\u2581word", "piece") in the file */
    static const char *const hf[] = {"[PAD]", "[CLS]", "[SEP]", "\xc3\xa9t3", "t4", "##t5", "##"};
    static const char *const gg[] = {"[PAD]", "[CLS]", "[SEP]", "\xe2\x96\x81\xc3\xa9t3", "\xe2\x96\x81t4", "t5", ""};
    for (int i = 0; i < 7; i++) {
        free(m->vocab.tokens[i]);
        m->vocab.tokens[i] = strdup(hf[i]);
    }
    m->vocab.n_merges = 0;
    free(m->vocab.merges[0]);
    free(m->vocab.merges[1]);
    free(m->vocab.merges);
    m->vocab.merges = NULL;
    SQZ_ASSERT_OK(sqz_model_validate(m));

    char dir[4096], p1[4200];
    snprintf(dir, sizeof dir, "%s", sqz_test_tmpdir());
    snprintf(p1, sizeof p1, "%s/bert.gguf", dir);
    save(m, p1, -1);
    size_t n;
    char *img = read_all(p1, &n);
    sqz__gguf g;
    SQZ_ASSERT_OK(sqz__gguf_parse(p1, (const uint8_t *)img, n, &g));
    const sqz__gguf_kv *kv = sqz__gguf_find(&g, "tokenizer.ggml.tokens");
    assert_non_null(kv);
    sqz__gguf_str_iter it;
    sqz__gguf_str_iter_init(&g, kv, &it);
    for (int i = 0; i < 7; i++) {
        size_t len;
        const char *tok = sqz__gguf_str_next(&it, &len);
        assert_non_null(tok);
        assert_int_equal(len, strlen(gg[i]));
        assert_memory_equal(tok, gg[i], len);
    }
    int64_t v;
    bool found, causal = true;
    SQZ_ASSERT_OK(sqz__gguf_get_int(&g, "bert.pooling_type", &found, &v));
    assert_true(found && v == 1);
    SQZ_ASSERT_OK(sqz__gguf_get_bool(&g, "bert.attention.causal", &found, &causal));
    assert_true(found && !causal);
    SQZ_ASSERT_OK(sqz__gguf_get_int(&g, "tokenizer.ggml.token_type_count", &found, &v));
    assert_true(found && v == 2);
    sqz__gguf_free(&g);
    free(img);
    sqz_model *r = reopen(p1);
    assert_string_equal(r->hp.arch, "bert");
    assert_int_equal(r->hp.rope_layout, SQZ_ROPE_NONE);
    assert_true(r->hp.rope_theta == 0);
    assert_hparams_equal(m, r);
    assert_tensors_equal(m, r, SQZ_ROLE_POOLER);
    assert_vocab_equal(&m->vocab, &r->vocab);
    sqz_model_free(r);
    sqz_model_free(m);
    unlink(p1);
    rmdir(dir);
}

static void test_save_is_atomic(void **state) {
    (void)state;
    sqz_model *m = make_llama("llama", SQZ_ROPE_INTERLEAVED, false, true, false);
    sqz_save_opts o = {.format = SQZ_FORMAT_GGUF, .dtype = -1};
    assert_int_not_equal(sqz_model_save(m, "/nonexistent-sqz-dir/x.gguf", &o), SQZ_OK);
    /* a tensor without data fails after the file was opened: nothing may be left */
    char dir[4096], p1[4200];
    snprintf(dir, sizeof dir, "%s", sqz_test_tmpdir());
    snprintf(p1, sizeof p1, "%s/x.gguf", dir);
    sqz_tensor *t = sqz_model_get(m, SQZ_ROLE_FFN_DOWN, 1, SQZ_PARAM_WEIGHT);
    void *keep = t->data;
    t->data = NULL;
    assert_int_not_equal(sqz_model_save(m, p1, &o), SQZ_OK);
    assert_non_null(strstr(sqz_last_error(), "has no data"));
    t->data = keep;
    assert_false(sqz_test_exists(p1));
    assert_int_equal(rmdir(dir), 0); /* empty: no temporary left behind */
    sqz_model_free(m);
}

/* ---- SmolLM2-135M-Instruct Q4_1 ---- */

static void test_smollm2_open(void **state) {
    (void)state;
    const char *path = sqz_test_smollm2();
    SQZ_SKIP_UNLESS(path);
    sqz_model *m = reopen(path);
    const sqz_hparams *hp = &m->hp;
    assert_string_equal(hp->arch, "llama");
    assert_int_equal(hp->family, SQZ_FAMILY_LLAMA);
    assert_int_equal(hp->n_layers, 30);
    assert_int_equal(hp->d_model, 576);
    assert_int_equal(hp->n_heads, 9);
    assert_int_equal(hp->n_kv_heads, 3);
    assert_int_equal(hp->head_dim, 64);
    assert_int_equal(hp->d_ff, 1536);
    assert_int_equal(hp->vocab_size, 49152);
    assert_int_equal(hp->ctx_len, 8192);
    assert_true(hp->rope_theta == 100000.0f);
    assert_true(fabsf(hp->norm_eps - 1e-5f) < 1e-9f);
    assert_int_equal(hp->rope_layout, SQZ_ROPE_INTERLEAVED);
    assert_true(hp->tied_embeddings); /* no output.weight */
    assert_false(hp->attn_bias);
    assert_int_equal(m->n_tensors, 272);
    assert_string_equal(m->name, "Smollm2 135M 8k Lc100K Mix1 Ep2");
    const sqz_tensor *embd = sqz_model_get(m, SQZ_ROLE_TOKEN_EMBD, -1, SQZ_PARAM_WEIGHT);
    assert_int_equal(embd->dtype, SQZ_DTYPE_Q8_0);
    for (int64_t i = 0; i < m->n_tensors; i++) {
        const sqz_tensor *t = &m->tensors[i];
        if (t->role == SQZ_ROLE_TOKEN_EMBD) continue;
        assert_int_equal(t->dtype, t->ndim == 2 ? SQZ_DTYPE_Q4_1 : SQZ_DTYPE_F32);
    }
    const sqz_vocab *v = &m->vocab;
    assert_int_equal(v->kind, SQZ_VOCAB_BPE);
    assert_int_equal(v->n_tokens, 49152);
    assert_int_equal(v->n_merges, 48900);
    assert_int_equal(v->bos, 1);
    assert_int_equal(v->eos, 2);
    assert_int_equal(v->unk, 0);
    assert_int_equal(v->pad, 2);
    assert_string_equal(v->tokens[1], "<|im_start|>");
    assert_string_equal(v->pre, "smollm");
    assert_non_null(v->chat_template);
    assert_non_null(v->types);
    assert_null(v->scores);
    assert_false(v->add_bos);
    assert_false(v->add_space_prefix);

    /* parameters from the architecture: embedding + 30 x (attention + MLP + 2 norms) + final norm */
    int64_t d = hp->d_model, q = hp->n_heads * hp->head_dim, kv = hp->n_kv_heads * hp->head_dim;
    int64_t emb = hp->vocab_size * d;
    int64_t per_layer = d * q + 2 * d * kv + q * d + 3 * d * hp->d_ff + 2 * d;
    int64_t want = emb + hp->n_layers * per_layer + d;
    int64_t got = sqz_model_param_count(m);
    print_message("SmolLM2-135M: %" PRId64 " parameters = embedding %" PRId64 " (tied) + %" PRId64
                  " (30 layers of %" PRId64 ", final norm %" PRId64 ")\n", got, emb, got - emb, per_layer, d);
    assert_int_equal(got, want);
    assert_int_equal(got, 134515008);
    sqz_model_free(m);
}

static void test_smollm2_rewrite_identical(void **state) {
    (void)state;
    const char *path = sqz_test_smollm2();
    SQZ_SKIP_UNLESS(path);
    sqz_model *m = reopen(path);
    char dir[4096], p1[4200], p2[4200];
    snprintf(dir, sizeof dir, "%s", sqz_test_tmpdir());
    snprintf(p1, sizeof p1, "%s/smol.gguf", dir);
    snprintf(p2, sizeof p2, "%s/smol2.gguf", dir);
    save(m, p1, -1);
    sqz_model *r = reopen(p1);
    assert_string_equal(r->hp.arch, m->hp.arch);
    assert_string_equal(r->name, m->name);
    assert_hparams_equal(m, r);
    assert_tensors_equal(m, r, SQZ_ROLE_COUNT);
    for (int64_t i = 0; i < m->n_tensors; i++) assert_string_equal(m->tensors[i].name, r->tensors[i].name);
    assert_vocab_equal(&m->vocab, &r->vocab);
    save(r, p2, -1);
    assert_true(files_equal(p1, p2)); /* deterministic */
    sqz_model_free(r);
    sqz_model_free(m);
    unlink(p1);
    unlink(p2);
    rmdir(dir);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_golden_tiny),
        cmocka_unit_test(test_golden_bert),
        cmocka_unit_test(test_hostile_corpus),
        cmocka_unit_test(test_truncations_and_flips),
        cmocka_unit_test(test_llama_pruned_hf_order),
        cmocka_unit_test(test_qwen2_untied_bias),
        cmocka_unit_test(test_bert_pooler_skipped),
        cmocka_unit_test(test_save_is_atomic),
        cmocka_unit_test(test_smollm2_open),
        cmocka_unit_test(test_smollm2_rewrite_identical),
    };
    return sqz_test_run(tests, NULL, NULL);
}

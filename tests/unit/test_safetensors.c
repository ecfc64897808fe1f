/* tests/unit/test_safetensors.c - the HF reader and writer on the real models
 * (tinystories-656K, all-MiniLM-L6-v2), sharded checkpoints built at test time, and the
 * hostile corpus of tests/data/hostile/safetensors and the golden tiny files of tests/data/safetensors
 * (both written by tests/data/hostile/make_safetensors.py). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "formats/formats_internal.h"
#include "test_util.h"

static const char *tinystories(void) { return sqz_test_data("models/tinystories-656K"); }

/* <source>/tests/data/<dir>/<rel> (make_safetensors.py writes both folders). */
static char *sample(const char *dir, const char *rel) {
    static char buf[8][4096];
    static int next;
    char *b = buf[next++ % 8];
    const char *src = getenv("SQZ_SOURCE_DIR");
    snprintf(b, 4096, "%s/tests/data/%s/%s", src && *src ? src : ".", dir, rel);
    return b;
}
static char *hostile(const char *rel) { return sample("hostile/safetensors", rel); }
static char *golden(const char *rel) { return sample("safetensors", rel); }

static char *slurp(const char *path, size_t *len) {
    char *buf = NULL;
    if (sqz_read_file(path, (size_t)1 << 30, &buf, len) != SQZ_OK) fail_msg("%s", sqz_last_error());
    return buf;
}

static void spit(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, n, f), n);
    assert_int_equal(fclose(f), 0);
}

static char *join(const char *a, const char *b) {
    static char buf[8][4096];
    static int next;
    char *r = buf[next++ % 8];
    snprintf(r, 4096, "%s/%s", a, b);
    return r;
}

/* Every tensor of a equals the tensor of b with the same (role, layer, param), byte for byte. */
static void assert_same_tensors(const sqz_model *a, const sqz_model *b) {
    assert_int_equal(a->n_tensors, b->n_tensors);
    for (int64_t i = 0; i < a->n_tensors; i++) {
        const sqz_tensor *t = &a->tensors[i];
        const sqz_tensor *u = sqz_model_get(b, t->role, t->layer, t->param);
        if (!u) fail_msg("tensor '%s' missing after reopening", t->name);
        assert_int_equal(t->dtype, u->dtype);
        assert_int_equal(t->ndim, u->ndim);
        for (int d = 0; d < SQZ_MAX_DIMS; d++) assert_int_equal(t->shape[d], u->shape[d]);
        assert_int_equal(t->nbytes, u->nbytes);
        if (memcmp(t->data, u->data, t->nbytes) != 0) fail_msg("tensor '%s' differs", t->name);
    }
}

static void assert_same_hparams(const sqz_hparams *a, const sqz_hparams *b) {
    assert_string_equal(a->arch, b->arch);
    assert_int_equal(a->family, b->family);
    assert_int_equal(a->n_layers, b->n_layers);
    assert_int_equal(a->d_model, b->d_model);
    assert_int_equal(a->n_heads, b->n_heads);
    assert_int_equal(a->n_kv_heads, b->n_kv_heads);
    assert_int_equal(a->head_dim, b->head_dim);
    assert_int_equal(a->d_ff, b->d_ff);
    assert_int_equal(a->vocab_size, b->vocab_size);
    assert_int_equal(a->ctx_len, b->ctx_len);
    assert_int_equal(a->n_token_types, b->n_token_types);
    assert_true(a->norm_eps == b->norm_eps);
    assert_true(a->rope_theta == b->rope_theta);
    assert_int_equal(a->rope_layout, b->rope_layout);
    assert_int_equal(a->act, b->act);
    assert_int_equal(a->tied_embeddings, b->tied_embeddings);
    assert_int_equal(a->attn_bias, b->attn_bias);
}

/* Checks each tensor's data against the bytes the file's own header names, parsed here
 * independently with cJSON. `rename` maps a file name to the model's name (tied lm_head). */
static void assert_matches_file(const sqz_model *m, const char *file, const char *from, const char *to) {
    size_t len;
    char *buf = slurp(file, &len);
    uint64_t hl;
    memcpy(&hl, buf, 8);
    cJSON *h = cJSON_ParseWithLength(buf + 8, (size_t)hl);
    assert_non_null(h);
    const uint8_t *data = (const uint8_t *)buf + 8 + hl;
    int matched = 0;
    for (const cJSON *it = h->child; it; it = it->next) {
        if (strcmp(it->string, "__metadata__") == 0) continue;
        const char *name = from && strcmp(it->string, from) == 0 ? to : it->string;
        int64_t k = sqz_model_find(m, name);
        if (k < 0) continue; /* ignored buffers */
        const cJSON *off = cJSON_GetObjectItem(it, "data_offsets");
        size_t b = (size_t)off->child->valuedouble, e = (size_t)off->child->next->valuedouble;
        assert_int_equal(m->tensors[k].nbytes, e - b);
        if (memcmp(m->tensors[k].data, data + b, e - b) != 0) fail_msg("tensor '%s' differs from the file", name);
        matched++;
    }
    assert_int_equal(matched, m->n_tensors);
    cJSON_Delete(h);
    free(buf);
}

static void test_open_tinystories(void **state) {
    (void)state;
    SQZ_SKIP_UNLESS(tinystories());
    sqz_model *m;
    SQZ_ASSERT_OK(sqz_model_open(tinystories(), NULL, &m));
    assert_int_equal(m->source_format, SQZ_FORMAT_SAFETENSORS);
    assert_string_equal(m->hp.arch, "llama");
    assert_int_equal(m->hp.family, SQZ_FAMILY_LLAMA);
    assert_int_equal(m->hp.n_layers, 2);
    assert_int_equal(m->hp.d_model, 128);
    assert_int_equal(m->hp.d_ff, 384);
    assert_int_equal(m->hp.n_heads, 8);
    assert_int_equal(m->hp.n_kv_heads, 4);
    assert_int_equal(m->hp.head_dim, 16);
    assert_int_equal(m->hp.vocab_size, 2048);
    assert_int_equal(m->hp.ctx_len, 512);
    assert_true(m->hp.norm_eps == 1e-6f);
    assert_true(m->hp.rope_theta == 10000.0f);
    assert_int_equal(m->hp.rope_layout, SQZ_ROPE_HALF);
    assert_int_equal(m->hp.act, SQZ_ACT_SILU);
    assert_false(m->hp.attn_bias);
    assert_true(m->hp.tied_embeddings);
    assert_null(sqz_model_get(m, SQZ_ROLE_OUTPUT, -1, SQZ_PARAM_WEIGHT));
    assert_non_null(sqz_model_get(m, SQZ_ROLE_TOKEN_EMBD, -1, SQZ_PARAM_WEIGHT));
    assert_int_equal(sqz_model_param_count(m), 656000);
    assert_int_equal(m->n_tensors, 20);
    assert_int_equal(m->vocab.bos, 1);
    assert_int_equal(m->vocab.eos, 2);
    for (int64_t i = 0; i < m->n_tensors; i++) assert_false(m->tensors[i].owned); /* borrowed from the mapping */
    /* the file keeps only lm_head.weight (__metadata__ aliases the embedding to it) */
    assert_matches_file(m, join(tinystories(), "model.safetensors"), "lm_head.weight", "model.embed_tokens.weight");
    sqz_model_free(m);

    /* the single file opens the same, with config.json found beside it */
    SQZ_ASSERT_OK(sqz_model_open(join(tinystories(), "model.safetensors"), NULL, &m));
    assert_int_equal(sqz_model_param_count(m), 656000);
    assert_true(m->hp.tied_embeddings);
    sqz_model_free(m);
}

static void test_open_minilm(void **state) {
    (void)state;
    const char *dir = sqz_test_minilm();
    SQZ_SKIP_UNLESS(dir);
    sqz_model *m;
    SQZ_ASSERT_OK(sqz_model_open(dir, NULL, &m));
    assert_string_equal(m->hp.arch, "bert");
    assert_int_equal(m->hp.family, SQZ_FAMILY_BERT);
    assert_int_equal(m->hp.n_layers, 6);
    assert_int_equal(m->hp.d_model, 384);
    assert_int_equal(m->hp.n_heads, 12);
    assert_int_equal(m->hp.n_kv_heads, 12);
    assert_int_equal(m->hp.head_dim, 32);
    assert_int_equal(m->hp.d_ff, 1536);
    assert_int_equal(m->hp.vocab_size, 30522);
    assert_int_equal(m->hp.ctx_len, 512);
    assert_int_equal(m->hp.n_token_types, 2);
    assert_true(m->hp.norm_eps == 1e-12f);
    assert_int_equal(m->hp.act, SQZ_ACT_GELU);
    assert_int_equal(m->hp.rope_layout, SQZ_ROPE_NONE);
    assert_true(m->hp.attn_bias);
    assert_false(m->hp.tied_embeddings);
    assert_int_equal(m->n_tensors, 103); /* 104 in the file, embeddings.position_ids ignored */
    assert_int_equal(sqz_model_param_count(m), 22713216);
    assert_non_null(sqz_model_get(m, SQZ_ROLE_POOLER, -1, SQZ_PARAM_BIAS));
    assert_non_null(sqz_model_get(m, SQZ_ROLE_EMBD_NORM, -1, SQZ_PARAM_BIAS));
    assert_non_null(sqz_model_get(m, SQZ_ROLE_LAYER_OUT_NORM, 5, SQZ_PARAM_WEIGHT));
    assert_matches_file(m, join(dir, "model.safetensors"), NULL, NULL);
    sqz_model_free(m);
}

typedef struct progress_log {
    int calls;
    int64_t last_done, total;
    bool monotonic;
} progress_log;

static void on_progress(void *user, int64_t done, int64_t total) {
    progress_log *p = user;
    if (p->calls && done < p->last_done) p->monotonic = false;
    p->calls++;
    p->last_done = done;
    p->total = total;
}

static void roundtrip(const char *src, int dtype) {
    sqz_model *a, *b;
    SQZ_ASSERT_OK(sqz_model_open(src, NULL, &a));
    const char *tmp = sqz_test_tmpdir();
    char *out = sqz__path_join(tmp, "out");
    progress_log log = {0, 0, 0, true};
    sqz_save_opts o = {.format = SQZ_FORMAT_SAFETENSORS, .dtype = dtype, .progress = on_progress, .progress_user = &log};
    SQZ_ASSERT_OK(sqz_model_save(a, out, &o));
    assert_true(log.calls >= 2 && log.monotonic);
    assert_int_equal(log.last_done, log.total);
    /* the data section starts 8-byte aligned */
    char *st = sqz__path_join(out, "model.safetensors");
    size_t len;
    char *bytes = slurp(st, &len);
    uint64_t hl;
    memcpy(&hl, bytes, 8);
    assert_int_equal((8 + hl) % 8, 0);
    assert_int_equal(len, 8 + hl + (uint64_t)log.total);
    free(bytes);

    SQZ_ASSERT_OK(sqz_model_open(out, NULL, &b));
    assert_same_hparams(&a->hp, &b->hp);
    assert_int_equal(sqz_model_param_count(a), sqz_model_param_count(b));
    if (dtype < 0) {
        assert_same_tensors(a, b);
    } else {
        /* every float tensor converted with the reference conversion */
        assert_int_equal(a->n_tensors, b->n_tensors);
        for (int64_t i = 0; i < a->n_tensors; i++) {
            const sqz_tensor *t = &a->tensors[i];
            const sqz_tensor *u = sqz_model_get(b, t->role, t->layer, t->param);
            assert_non_null(u);
            assert_int_equal(u->dtype, dtype);
            void *want = malloc(u->nbytes);
            SQZ_ASSERT_OK(sqz_convert(t->dtype, t->data, (sqz_dtype)dtype, want, sqz_tensor_nelements(t), NULL));
            assert_memory_equal(want, u->data, u->nbytes);
            free(want);
        }
    }
    sqz_model_free(b);
    /* writing over an existing output directory works too */
    SQZ_ASSERT_OK(sqz_model_save(a, out, &o));
    SQZ_ASSERT_OK(sqz_model_open(out, NULL, &b));
    sqz_model_free(b);
    sqz_model_free(a);

    const char *files[] = {"model.safetensors", "config.json", "generation_config.json", "tokenizer.json",
                           "tokenizer_config.json"};
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) unlink(join(out, files[i]));
    rmdir(out);
    rmdir(tmp);
    free(st);
    free(out);
}

static void test_roundtrip_tinystories(void **state) {
    (void)state;
    SQZ_SKIP_UNLESS(tinystories());
    roundtrip(tinystories(), -1);
    roundtrip(tinystories(), SQZ_DTYPE_F16);
    roundtrip(tinystories(), SQZ_DTYPE_BF16);
}

static void test_roundtrip_minilm(void **state) {
    (void)state;
    const char *dir = sqz_test_minilm();
    SQZ_SKIP_UNLESS(dir);
    roundtrip(dir, -1);
}

/* ---- sharded checkpoints built from tinystories at test time ---- */

/* Writes the entries [lo, hi) of the parsed header h (data at `data`) as one shard. */
static void write_shard(const char *path, const cJSON *h, const uint8_t *data, int lo, int hi, const char *meta) {
    char *json = malloc(1 << 16);
    size_t n = (size_t)snprintf(json, 1 << 16, "{\"__metadata__\":%s", meta);
    uint64_t off = 0;
    int i = 0;
    for (const cJSON *it = h->child; it; it = it->next) {
        if (strcmp(it->string, "__metadata__") == 0) continue;
        if (i >= lo && i < hi) {
            const cJSON *o = cJSON_GetObjectItem(it, "data_offsets");
            uint64_t b = (uint64_t)o->child->valuedouble, e = (uint64_t)o->child->next->valuedouble;
            char *shape = cJSON_PrintUnformatted(cJSON_GetObjectItem(it, "shape"));
            n += (size_t)snprintf(json + n, (1 << 16) - n, ",\"%s\":{\"dtype\":\"F32\",\"shape\":%s,\"data_offsets\":"
                                  "[%" PRIu64 ",%" PRIu64 "]}", it->string, shape, off, off + e - b);
            free(shape);
            off += e - b;
        }
        i++;
    }
    n += (size_t)snprintf(json + n, (1 << 16) - n, "}");
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    uint64_t hl = n;
    fwrite(&hl, 8, 1, f);
    fwrite(json, 1, n, f);
    i = 0;
    for (const cJSON *it = h->child; it; it = it->next) {
        if (strcmp(it->string, "__metadata__") == 0) continue;
        if (i >= lo && i < hi) {
            const cJSON *o = cJSON_GetObjectItem(it, "data_offsets");
            uint64_t b = (uint64_t)o->child->valuedouble, e = (uint64_t)o->child->next->valuedouble;
            fwrite(data + b, 1, e - b, f);
        }
        i++;
    }
    assert_int_equal(fclose(f), 0);
    free(json);
}

/* Writes the index; `wrong` names a tensor listed under the other shard, `extra` adds a
 * name no shard holds. */
static void write_index(const char *dir, const cJSON *h, int split, const char *wrong, const char *extra) {
    char *json = malloc(1 << 16);
    size_t n = (size_t)snprintf(json, 1 << 16, "{\"metadata\":{\"total_size\":2624000},\"weight_map\":{");
    int i = 0;
    for (const cJSON *it = h->child; it; it = it->next) {
        if (strcmp(it->string, "__metadata__") == 0) continue;
        bool first = i < split;
        if (wrong && strcmp(wrong, it->string) == 0) first = !first;
        n += (size_t)snprintf(json + n, (1 << 16) - n, "%s\"%s\":\"model-0000%d-of-00002.safetensors\"", i ? "," : "",
                              it->string, first ? 1 : 2);
        i++;
    }
    if (extra) n += (size_t)snprintf(json + n, (1 << 16) - n, ",\"%s\":\"model-00001-of-00002.safetensors\"", extra);
    n += (size_t)snprintf(json + n, (1 << 16) - n, "}}");
    spit(join(dir, "model.safetensors.index.json"), json, n);
    free(json);
}

static void test_sharded(void **state) {
    (void)state;
    SQZ_SKIP_UNLESS(tinystories());
    size_t len, cfg_len;
    char *file = slurp(join(tinystories(), "model.safetensors"), &len);
    char *cfg = slurp(join(tinystories(), "config.json"), &cfg_len);
    uint64_t hl;
    memcpy(&hl, file, 8);
    cJSON *h = cJSON_ParseWithLength(file + 8, (size_t)hl);
    assert_non_null(h);
    const uint8_t *data = (const uint8_t *)file + 8 + hl;
    const char *dir = sqz_test_tmpdir();
    spit(join(dir, "config.json"), cfg, cfg_len);
    /* lm_head.weight (the first entry) goes to shard 1 with the alias, as save_model would */
    const int split = 9;
    write_shard(join(dir, "model-00001-of-00002.safetensors"), h, data, 0, split,
                "{\"format\":\"pt\",\"model.embed_tokens.weight\":\"lm_head.weight\"}");
    write_shard(join(dir, "model-00002-of-00002.safetensors"), h, data, split, 1000, "{\"format\":\"pt\"}");
    write_index(dir, h, split, NULL, NULL);

    sqz_model *a, *b;
    SQZ_ASSERT_OK(sqz_model_open(tinystories(), NULL, &a));
    SQZ_ASSERT_OK(sqz_model_open(dir, NULL, &b));
    assert_same_hparams(&a->hp, &b->hp);
    assert_int_equal(sqz_model_param_count(b), 656000);
    assert_same_tensors(a, b);
    sqz_model_free(b);

    /* a tensor listed under the wrong shard */
    write_index(dir, h, split, "model.norm.weight", NULL);
    assert_int_not_equal(sqz_model_open(dir, NULL, &b), SQZ_OK);
    assert_non_null(strstr(sqz_last_error(), "model.norm.weight"));
    assert_non_null(strstr(sqz_last_error(), "model-00002-of-00002.safetensors"));
    /* the index names a tensor no shard holds */
    write_index(dir, h, split, NULL, "model.layers.9.mlp.up_proj.weight");
    assert_int_not_equal(sqz_model_open(dir, NULL, &b), SQZ_OK);
    assert_non_null(strstr(sqz_last_error(), "model.safetensors.index.json"));
    /* a shard that is missing */
    write_index(dir, h, split, NULL, NULL);
    unlink(join(dir, "model-00002-of-00002.safetensors"));
    assert_int_not_equal(sqz_model_open(dir, NULL, &b), SQZ_OK);
    assert_non_null(strstr(sqz_last_error(), "model-00002-of-00002.safetensors"));

    sqz_model_free(a);
    unlink(join(dir, "model-00001-of-00002.safetensors"));
    unlink(join(dir, "model.safetensors.index.json"));
    unlink(join(dir, "config.json"));
    rmdir(dir);
    cJSON_Delete(h);
    free(cfg);
    free(file);
}

/* ---- the golden tiny files ---- */

static void check_tiny(const sqz_model *m) {
    assert_int_equal(m->hp.d_model, 8);
    assert_int_equal(m->hp.n_layers, 1);
    assert_int_equal(m->hp.n_kv_heads, 1);
    assert_true(m->hp.tied_embeddings);
    assert_int_equal(m->n_tensors, 11);
    for (int64_t j = 0; j < m->n_tensors; j++) {
        const sqz_tensor *t = &m->tensors[j];
        assert_int_equal((uintptr_t)t->data % 4, 0);
        const float *f = t->data;
        for (int64_t k = 0; k < sqz_tensor_nelements(t); k++) assert_true(f[k] == (float)(j * 1000 + k));
    }
}

static void test_tiny(void **state) {
    (void)state;
    sqz_model *m;
    SQZ_ASSERT_OK(sqz_model_open(golden("tiny.safetensors"), NULL, &m));
    check_tiny(m);
    for (int64_t j = 0; j < m->n_tensors; j++) assert_false(m->tensors[j].owned);
    sqz_model_free(m);
    /* an unpadded header leaves the data unaligned: the reader hands out aligned copies */
    SQZ_ASSERT_OK(sqz_model_open(golden("tiny_unaligned.safetensors"), NULL, &m));
    check_tiny(m);
    sqz_model_free(m);

    /* without config.json beside it the file cannot be opened, and says why */
    const char *dir = sqz_test_tmpdir();
    size_t len;
    char *bytes = slurp(golden("tiny.safetensors"), &len);
    spit(join(dir, "lonely.safetensors"), bytes, len);
    free(bytes);
    assert_int_equal(sqz_model_open(join(dir, "lonely.safetensors"), NULL, &m), SQZ_ERR_NOT_FOUND);
    assert_non_null(strstr(sqz_last_error(), "lonely.safetensors"));
    assert_non_null(strstr(sqz_last_error(), "config.json"));
    /* a directory with config.json but no weights */
    spit(join(dir, "config.json"), "{}", 2);
    assert_int_equal(sqz_model_open(dir, NULL, &m), SQZ_ERR_NOT_FOUND);
    assert_non_null(strstr(sqz_last_error(), "model.safetensors"));
    unlink(join(dir, "config.json"));
    unlink(join(dir, "lonely.safetensors"));
    rmdir(dir);
}

/* ---- the hostile corpus ---- */

typedef struct hostile_case {
    const char *path;    /* under tests/data/hostile/safetensors */
    const char *file;    /* the file the message must name */
    const char *reason;  /* a word of the reason */
    bool model_level;    /* the header is fine; sqz_model_validate rejects the model */
} hostile_case;

static const hostile_case cases[] = {
    {"empty.safetensors", "empty.safetensors", "too short", false},
    {"header_short.safetensors", "header_short.safetensors", "too short", false},
    {"header_len_beyond_file.safetensors", "header_len_beyond_file.safetensors", "exceeds the file size", false},
    {"header_len_huge.safetensors", "header_len_huge.safetensors", "exceeds the file size", false},
    {"truncated.safetensors", "truncated.safetensors", "exceed the data section", false},
    {"bad_json.safetensors", "bad_json.safetensors", "not valid JSON", false},
    {"not_object.safetensors", "not_object.safetensors", "JSON object", false},
    {"trailing_garbage.safetensors", "trailing_garbage.safetensors", "after the header", false},
    {"bad_utf8_name.safetensors", "bad_utf8_name.safetensors", "UTF-8", false},
    {"offsets_out_of_range.safetensors", "offsets_out_of_range.safetensors", "exceed the data section", false},
    {"offsets_reversed.safetensors", "offsets_reversed.safetensors", "reversed", false},
    {"offsets_huge.safetensors", "offsets_huge.safetensors", "data_offsets", false},
    {"offsets_not_int.safetensors", "offsets_not_int.safetensors", "data_offsets", false},
    {"overlap.safetensors", "overlap.safetensors", "overlap", false},
    {"shape_mismatch.safetensors", "shape_mismatch.safetensors", "needs 64", false},
    {"shape_overflow.safetensors", "shape_overflow.safetensors", "overflows 64 bits", false},
    {"shape_product_wraps.safetensors", "shape_product_wraps.safetensors", "overflows 64 bits", false},
    {"shape_negative.safetensors", "shape_negative.safetensors", "non-negative", false},
    {"shape_too_many_dims.safetensors", "shape_too_many_dims.safetensors", "dimensions", false},
    {"shape_not_array.safetensors", "shape_not_array.safetensors", "shape", false},
    {"duplicate_names.safetensors", "duplicate_names.safetensors", "appears twice", false},
    {"unknown_dtype.safetensors", "unknown_dtype.safetensors", "X99", false},
    {"missing_dtype.safetensors", "missing_dtype.safetensors", "dtype", false},
    {"entry_not_object.safetensors", "entry_not_object.safetensors", "not a JSON object", false},
    {"metadata_not_object.safetensors", "metadata_not_object.safetensors", "__metadata__", false},
    {"deep_nesting.safetensors", "deep_nesting.safetensors", "not valid JSON", false},
    {"missing_layer_tensor.safetensors", "missing_layer_tensor.safetensors", "attn_k", true},
    {"wrong_shape.safetensors", "wrong_shape.safetensors", "q_proj", true},
    {"unknown_arch", "config.json", "gpt_neox", false},
    {"bad_config", "config.json", "not valid JSON", false},
    {"config_types", "config.json", "hidden_size", false},
    {"config_absurd", "config.json", "out of range", false},
    {"heads_not_dividing", "config.json", "not a multiple", false},
    {"unknown_tensor", "model.safetensors", "model.layers.0.mlp.extra_proj.weight", false},
    {"shard_escape", "model.safetensors.index.json", "not a file name", false},
};

static void test_hostile(void **state) {
    (void)state;
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const hostile_case *c = &cases[i];
        const char *path = hostile(c->path);
        if (!sqz_test_exists(path)) fail_msg("%s missing: run tests/data/hostile/make_safetensors.py", path);
        /* the reader itself */
        sqz_model *m = sqz_model_new();
        m->source_path = strdup(path);
        sqz_status s = sqz__st_open(path, m);
        if (s == SQZ_OK && c->model_level) s = sqz_model_validate(m);
        if (s == SQZ_OK) fail_msg("%s: accepted", c->path);
        const char *msg = sqz_last_error();
        if (!strstr(msg, c->file) || !strstr(msg, c->reason))
            fail_msg("%s: message \"%s\" should name %s and say \"%s\"", c->path, msg, c->file, c->reason);
        sqz_model_free(m);
        /* and the public entry point (format detection may reject first: still naming the file) */
        sqz_model *out = NULL;
        s = sqz_model_open(path, NULL, &out);
        if (s == SQZ_OK) fail_msg("%s: accepted by sqz_model_open", c->path);
        assert_null(out);
        if (!strstr(sqz_last_error(), c->file))
            fail_msg("%s: \"%s\" does not name the file", c->path, sqz_last_error());
    }
    sqz_model *m;
    assert_int_equal(sqz_model_open(hostile("unknown_arch"), NULL, &m), SQZ_ERR_ARCH);
}

/* More than SQZ__MAX_TENSORS header entries: too large to commit, built here. */
static void test_absurd_tensor_count(void **state) {
    (void)state;
    const char *dir = sqz_test_tmpdir();
    size_t cap = (size_t)(SQZ__MAX_TENSORS + 2) * 16 + 64, n = 0;
    char *h = malloc(cap);
    h[n++] = '{';
    for (int i = 0; i <= SQZ__MAX_TENSORS; i++) n += (size_t)snprintf(h + n, cap - n, "%s\"t%d\":{}", i ? "," : "", i);
    h[n++] = '}';
    while ((8 + n) % 8) h[n++] = ' ';
    const char *path = join(dir, "absurd_count.safetensors");
    FILE *f = fopen(path, "wb");
    uint64_t hl = n;
    fwrite(&hl, 8, 1, f);
    fwrite(h, 1, n, f);
    fclose(f);
    free(h);
    sqz_model *m = sqz_model_new();
    assert_int_equal(sqz__st_open(path, m), SQZ_ERR_FORMAT);
    assert_non_null(strstr(sqz_last_error(), "absurd_count.safetensors"));
    assert_non_null(strstr(sqz_last_error(), "1048577 header entries"));
    sqz_model_free(m);
    unlink(path);
    rmdir(dir);
}

/* A model the HF config cannot describe fails before anything is written. */
static void test_save_refuses_per_layer_dims(void **state) {
    (void)state;
    sqz_model *m;
    SQZ_ASSERT_OK(sqz_model_open(golden("tiny.safetensors"), NULL, &m));
    m->layers[0].d_ff = 8; /* as a pruning pass would, with the tensors (unchanged here) */
    sqz_tensor *t;
    t = sqz_model_get(m, SQZ_ROLE_FFN_GATE, 0, SQZ_PARAM_WEIGHT); t->shape[0] = 8; t->nbytes /= 2;
    t = sqz_model_get(m, SQZ_ROLE_FFN_UP, 0, SQZ_PARAM_WEIGHT); t->shape[0] = 8; t->nbytes /= 2;
    t = sqz_model_get(m, SQZ_ROLE_FFN_DOWN, 0, SQZ_PARAM_WEIGHT); t->shape[1] = 8; t->nbytes /= 2;
    SQZ_ASSERT_OK(sqz_model_validate(m));
    /* one layer only: a uniform d_ff is expressible */
    const char *dir = sqz_test_tmpdir();
    char *out = sqz__path_join(dir, "pruned");
    sqz_save_opts o = {.format = SQZ_FORMAT_SAFETENSORS, .dtype = -1};
    SQZ_ASSERT_OK(sqz_model_save(m, out, &o));
    sqz_model *b;
    SQZ_ASSERT_OK(sqz_model_open(out, NULL, &b));
    assert_int_equal(b->hp.d_ff, 8);
    sqz_model_free(b);
    const char *files[] = {"model.safetensors", "config.json", "generation_config.json"};
    for (size_t i = 0; i < 3; i++) unlink(join(out, files[i]));
    rmdir(out);
    sqz_model_free(m);
    rmdir(dir);
    free(out);
}

/* Two layers with different widths: refused, nothing left behind. */
static void test_save_refuses_mixed_widths(void **state) {
    (void)state;
    SQZ_SKIP_UNLESS(tinystories());
    sqz_model *m;
    sqz_tensor *t;
    SQZ_ASSERT_OK(sqz_model_open(tinystories(), NULL, &m));
    m->layers[1].n_heads = 4;
    t = sqz_model_get(m, SQZ_ROLE_ATTN_Q, 1, SQZ_PARAM_WEIGHT); t->shape[0] = 64; t->nbytes /= 2;
    t = sqz_model_get(m, SQZ_ROLE_ATTN_OUT, 1, SQZ_PARAM_WEIGHT); t->shape[1] = 64; t->nbytes /= 2;
    SQZ_ASSERT_OK(sqz_model_validate(m));
    const char *dir = sqz_test_tmpdir();
    char *out = sqz__path_join(dir, "mixed");
    sqz_save_opts o = {.format = SQZ_FORMAT_SAFETENSORS, .dtype = -1};
    assert_int_equal(sqz_model_save(m, out, &o), SQZ_ERR_UNSUPPORTED);
    assert_non_null(strstr(sqz_last_error(), "per-layer"));
    assert_false(sqz_test_exists(out));
    sqz_model_free(m);
    rmdir(dir);
    free(out);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_open_tinystories),
        cmocka_unit_test(test_open_minilm),
        cmocka_unit_test(test_roundtrip_tinystories),
        cmocka_unit_test(test_roundtrip_minilm),
        cmocka_unit_test(test_sharded),
        cmocka_unit_test(test_tiny),
        cmocka_unit_test(test_hostile),
        cmocka_unit_test(test_absurd_tensor_count),
        cmocka_unit_test(test_save_refuses_per_layer_dims),
        cmocka_unit_test(test_save_refuses_mixed_widths),
    };
    return sqz_test_run(tests, NULL, NULL);
}

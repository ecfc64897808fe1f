/*
 * tests/layers/formats_alone.c - formats/ with core/ and quant/gguf/ ALONE: this program links
 * libsqz_formats.a, libsqz_quant_gguf.a (the GGUF block quantizers the writers convert with) and
 * libsqz_core.a and no other sqz module (tests/CMakeLists.txt), so a call from formats/, quant/gguf/
 * or core/ into a higher module is an undefined reference and the build fails. At run time it
 * converts a real model both ways: tinystories-656K (HF safetensors) -> GGUF -> HF directory,
 * then opens the result and checks that hyperparameters, vocabulary and every tensor equal the
 * source bit for bit (the rotary rows that the GGUF step permutes come back in HF order), but for
 * the <0xNN> byte tokens the GGUF step adds to a SentencePiece vocabulary that lacks them (llama.cpp
 * needs them: docs/formats.md), which come back as tokens after the source's and zero rows after
 * its embedding rows.
 * Model from $SQZ_TEST_DATA (else $SQZ_TEST_DATA_DEFAULT, else ../shared); exit 77 without it.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sqz/formats.h"
#include "sqz/model.h"
#include "sqz/status.h"

static int failures;

#define CHECK(cond, ...)                                   \
    do {                                                   \
        if (!(cond)) {                                     \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
            fprintf(stderr, __VA_ARGS__);                  \
            fputc('\n', stderr);                           \
            failures++;                                    \
        }                                                  \
    } while (0)

static int ok(sqz_status st, const char *what) {
    if (st == SQZ_OK) return 1;
    fprintf(stderr, "FAIL: %s: %s: %s\n", what, sqz_status_name(st), sqz_last_error());
    failures++;
    return 0;
}

/* Removes dir's plain files, then dir (the writers leave a flat directory). */
static void rm_dir(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    char p[4096];
    while ((e = readdir(d))) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        struct stat sb;
        if (lstat(p, &sb) == 0 && S_ISDIR(sb.st_mode)) rm_dir(p);
        else unlink(p);
    }
    closedir(d);
    rmdir(dir);
}

/* The byte tokens a GGUF writer adds to a's vocabulary: 256 minus those it has, for SentencePiece. */
static int32_t bytes_added(const sqz_model *a) {
    if (a->vocab.kind != SQZ_VOCAB_SPM) return 0;
    int32_t have = 0;
    for (int32_t i = 0; i < a->vocab.n_tokens; i++) {
        const char *t = a->vocab.tokens[i];
        have += strlen(t) == 6 && strncmp(t, "<0x", 3) == 0 && t[5] == '>';
    }
    return 256 - have;
}

/* b's rows beyond a's of a vocabulary-sized matrix are zero; a's rows compared by the caller. */
static void check_added_rows(const sqz_tensor *tb, int64_t from, const float *vb) {
    const int64_t row = tb->shape[1], n = sqz_tensor_nelements(tb);
    for (int64_t i = from * row; i < n; i++)
        if (vb[i] != 0.0f) {
            CHECK(0, "tensor '%s': added row %lld is not zero", tb->name, (long long)(i / row));
            return;
        }
}

/* Every tensor of a, found by (role, layer, param) in b, has b's dtype, shape and float values
 * (b's vocabulary-sized matrices may have `added` zero rows more). */
static void compare_models(const sqz_model *a, const sqz_model *b) {
    const int32_t added = b->vocab.n_tokens - a->vocab.n_tokens;
    CHECK(added == 0 || added == bytes_added(a), "%d tokens added (the missing byte tokens: %d)", added,
          bytes_added(a));
    CHECK(strcmp(a->hp.arch, b->hp.arch) == 0, "arch %s vs %s", a->hp.arch, b->hp.arch);
    CHECK(a->hp.n_layers == b->hp.n_layers && a->hp.d_model == b->hp.d_model && a->hp.n_heads == b->hp.n_heads &&
              a->hp.n_kv_heads == b->hp.n_kv_heads && a->hp.d_ff == b->hp.d_ff &&
              a->hp.vocab_size + added == b->hp.vocab_size && a->hp.tied_embeddings == b->hp.tied_embeddings,
          "hyperparameters differ");
    CHECK(a->hp.rope_layout == b->hp.rope_layout, "rope layout %d vs %d", (int)a->hp.rope_layout,
          (int)b->hp.rope_layout);
    CHECK(a->n_tensors == b->n_tensors, "%lld vs %lld tensors", (long long)a->n_tensors, (long long)b->n_tensors);
    for (int32_t i = a->vocab.n_tokens; i < b->vocab.n_tokens; i++)
        CHECK(strncmp(b->vocab.tokens[i], "<0x", 3) == 0, "added token %d is '%s', not a byte token", i,
              b->vocab.tokens[i]);
    for (int32_t i = 0; i < a->vocab.n_tokens && i < b->vocab.n_tokens; i++) {
        if (strcmp(a->vocab.tokens[i], b->vocab.tokens[i]) != 0) {
            CHECK(0, "token %d: '%s' vs '%s'", i, a->vocab.tokens[i], b->vocab.tokens[i]);
            break;
        }
    }
    for (int64_t i = 0; i < a->n_tensors; i++) {
        const sqz_tensor *ta = &a->tensors[i];
        const sqz_tensor *tb = sqz_model_get(b, ta->role, ta->layer, ta->param);
        if (!tb) {
            CHECK(0, "tensor '%s' missing after the round trip", ta->name);
            continue;
        }
        CHECK(ta->dtype == tb->dtype && ta->ndim == tb->ndim, "tensor '%s': dtype or rank differs", ta->name);
        const bool vocab_rows = ta->ndim == 2 && ta->shape[0] == a->hp.vocab_size &&
                                (ta->role == SQZ_ROLE_TOKEN_EMBD || ta->role == SQZ_ROLE_OUTPUT);
        for (int d = 0; d < ta->ndim; d++)
            CHECK(ta->shape[d] + (d == 0 && vocab_rows ? added : 0) == tb->shape[d], "tensor '%s': dim %d is %lld vs %lld",
                  ta->name, d, (long long)ta->shape[d], (long long)tb->shape[d]);
        const int64_t n = sqz_tensor_nelements(ta), nb = sqz_tensor_nelements(tb);
        if (nb != n + (vocab_rows ? added * ta->shape[1] : 0)) continue;
        float *va = malloc((size_t)n * sizeof(float)), *vb = malloc((size_t)nb * sizeof(float));
        if (va && vb && ok(sqz_tensor_to_f32(ta, va), ta->name) && ok(sqz_tensor_to_f32(tb, vb), tb->name)) {
            CHECK(memcmp(va, vb, (size_t)n * sizeof(float)) == 0, "tensor '%s': values differ", ta->name);
            if (nb > n) check_added_rows(tb, ta->shape[0], vb);
        }
        free(va);
        free(vb);
    }
}

int main(void) {
    const char *data = getenv("SQZ_TEST_DATA");
    if (!data || !*data) data = getenv("SQZ_TEST_DATA_DEFAULT");
    if (!data || !*data) data = "../shared";
    char src[4096], cfg[4200];
    snprintf(src, sizeof src, "%s/models/tinystories-656K", data);
    snprintf(cfg, sizeof cfg, "%s/config.json", src);
    if (access(cfg, R_OK) != 0) {
        printf("skipping: %s not found\n", cfg);
        return 77;
    }
    const char *tmpenv = getenv("TMPDIR");
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s/sqz-formats-alone-XXXXXX", tmpenv && *tmpenv ? tmpenv : "/tmp");
    if (!mkdtemp(tmp)) {
        perror("mkdtemp");
        return 1;
    }
    char gguf[4200], hf[4200];
    snprintf(gguf, sizeof gguf, "%s/tiny.gguf", tmp);
    snprintf(hf, sizeof hf, "%s/tiny-hf", tmp);

    sqz_model *m = NULL, *g = NULL, *h = NULL;
    sqz_format f = SQZ_FORMAT_UNKNOWN;
    if (ok(sqz_detect_format(src, &f), "detect")) CHECK(f == SQZ_FORMAT_SAFETENSORS, "detected %s", sqz_format_name(f));
    if (ok(sqz_model_open(src, NULL, &m), src)) {
        CHECK(m->n_tensors > 0 && sqz_model_param_count(m) > 600000, "%lld tensors, %lld parameters",
              (long long)m->n_tensors, (long long)sqz_model_param_count(m));
        const sqz_save_opts to_gguf = {.format = SQZ_FORMAT_GGUF, .dtype = -1};
        if (ok(sqz_model_save(m, gguf, &to_gguf), "save GGUF") && ok(sqz_model_open(gguf, NULL, &g), gguf)) {
            CHECK(g->source_format == SQZ_FORMAT_GGUF, "GGUF reopened as format %d", g->source_format);
            CHECK(g->n_tensors == m->n_tensors, "GGUF has %lld tensors", (long long)g->n_tensors);
            const sqz_save_opts to_hf = {.format = SQZ_FORMAT_SAFETENSORS, .dtype = -1};
            if (ok(sqz_model_save(g, hf, &to_hf), "save HF") && ok(sqz_model_open(hf, NULL, &h), hf))
                compare_models(m, h);
        }
    }
    sqz_model_free(h);
    sqz_model_free(g);
    sqz_model_free(m);
    unlink(gguf);
    rm_dir(hf);
    rmdir(tmp);
    if (failures) {
        fprintf(stderr, "%d failure(s)\n", failures);
        return 1;
    }
    printf("formats + core alone: tinystories-656K -> GGUF -> HF, every tensor identical\n");
    return 0;
}

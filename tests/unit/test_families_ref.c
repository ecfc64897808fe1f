/* tests/unit/test_families_ref.c - the four newer families (Llama 3.x, Qwen3, Gemma 3, Phi-3) and the two
 * mixtures of experts (Qwen3-MoE, Mixtral) on their random-initialised test models (tests/data/families/ and
 * tests/data/moe/, made by transformers with tests/ref/make_family_models.py and make_moe_models.py) against transformers' logits (ref.bin: dense rows of every position
 * of a 96- and a 24-token case):
 *   - config.json as transformers 5 writes it and config.hub.json as hub checkpoints state it
 *     (rope_theta / rope_scaling / rope_local_base_freq) give the reference's logits within 1e-4 of the
 *     largest logit, at every position (Gemma 3's sliding window of 16 is shorter than the case);
 *   - the KV cache: the 96 ids as a prefix of 40 and then one token at a time, every row again;
 *   - the greedy continuation of the short case;
 *   - the GGUF and the HF directory sqz writes reopen to the same logits.
 * The session is sized to the case, so Phi-3's longrope takes its long factors for the 96-token case
 * and its short ones for the 24-token case, as transformers does. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/internal.h"
#include "runtime_fixture.h"
#include "test_util.h"

#define TOL 1e-4

/* The mixtures of experts live in tests/data/moe/ (tests/ref/make_moe_models.py), the others in families/. */
static const char *fam_path(const char *fam, const char *file) {
    static char bufs[4][4096];
    static int next;
    char *b = bufs[next++ % 4];
    const char *src = getenv("SQZ_SOURCE_DIR");
    const bool moe = strcmp(fam, "qwen3moe") == 0 || strcmp(fam, "mixtral") == 0;
    snprintf(b, 4096, "%s/tests/data/%s/%s%s%s", src && *src ? src : ".", moe ? "moe" : "families", fam,
             file ? "/" : "", file ? file : "");
    return b;
}

static sqz_session *session(const sqz_model *m, int64_t max_tokens) {
    sqz_session_opts o = sqz_session_default_opts();
    o.max_tokens = max_tokens;
    sqz_session *s = NULL;
    SQZ_ASSERT_OK(sqz_session_new(m, &o, &s));
    return s;
}

/* Every row of every case, one window per case; the greedy continuation where the case has one. */
static void check_model(const char *what, const sqz_model *m, const ref_file *f) {
    const int64_t V = m->hp.vocab_size;
    for (uint32_t c = 0; c < f->n_cases; c++) {
        const ref_case *rc = &f->cases[c];
        sqz_session *s = session(m, rc->n_ids);
        float *logits = malloc(sizeof(float) * rc->n_ids * V);
        SQZ_ASSERT_OK(sqz_forward(s, rc->ids, rc->n_ids, 0, 0, logits));
        double worst = 0;
        for (uint32_t r = 0; r < rc->n_rows; r++)
            worst = fmax(worst, ref_rel_err(&rc->rows[r], rc->n_cols, logits + (size_t)rc->rows[r].pos * V));
        print_message("%s: case %u (%u ids): worst relative error %.2e over %u rows\n", what, c, rc->n_ids, worst,
                      rc->n_rows);
        assert_true(worst <= TOL);
        if (rc->n_out) {
            int32_t out[64];
            int64_t n = 0;
            sqz_session *g = session(m, rc->n_ids + rc->n_out);
            sqz_sample_opts so = {0};
            SQZ_ASSERT_OK(sqz_generate(g, rc->ids, rc->n_ids, rc->n_out, -1, &so, NULL, NULL, out, &n));
            assert_int_equal(n, rc->n_out);
            assert_memory_equal(out, rc->out, sizeof(int32_t) * rc->n_out);
            sqz_session_free(g);
        }
        free(logits);
        sqz_session_free(s);
    }
}

/* The long case through the cache: a prefix of 40, then one token at a time. */
static void check_cache(const char *what, const sqz_model *m, const ref_file *f) {
    const ref_case *rc = &f->cases[0];
    const int64_t V = m->hp.vocab_size, pre = 40;
    sqz_session *s = session(m, rc->n_ids);
    float *logits = malloc(sizeof(float) * rc->n_ids * V);
    SQZ_ASSERT_OK(sqz_forward(s, rc->ids, pre, 0, 0, logits));
    for (int64_t i = pre; i < rc->n_ids; i++) SQZ_ASSERT_OK(sqz_forward(s, rc->ids + i, 1, i, 0, logits + i * V));
    double worst = 0;
    for (uint32_t r = 0; r < rc->n_rows; r++)
        worst = fmax(worst, ref_rel_err(&rc->rows[r], rc->n_cols, logits + (size_t)rc->rows[r].pos * V));
    print_message("%s: through the cache: worst relative error %.2e\n", what, worst);
    assert_true(worst <= TOL);
    free(logits);
    sqz_session_free(s);
}

/* A directory holding the model's files with config.hub.json as its config.json. */
static const char *hub_dir(const char *fam) {
    static char dir[1024];
    assert_true(snprintf(dir, sizeof dir, "%s/%s-hub", sqz_test_tmpdir(), fam) < (int)sizeof dir);
    assert_true(mkdir(dir, 0755) == 0 || access(dir, F_OK) == 0);
    static const char *files[] = {"model.safetensors", "tokenizer.json", "tokenizer_config.json",
                                  "special_tokens_map.json", "tokenizer.model"};
    char cwd[1024], src[3072], dst[2048];
    assert_non_null(getcwd(cwd, sizeof cwd));
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
        const char *p = fam_path(fam, files[i]);
        if (access(p, F_OK) != 0) continue;
        assert_true(snprintf(src, sizeof src, "%s%s%s", p[0] == '/' ? "" : cwd, p[0] == '/' ? "" : "/", p) <
                    (int)sizeof src);
        assert_true(snprintf(dst, sizeof dst, "%s/%s", dir, files[i]) < (int)sizeof dst);
        unlink(dst);
        assert_int_equal(symlink(src, dst), 0);
    }
    assert_true(snprintf(dst, sizeof dst, "%s/config.json", dir) < (int)sizeof dst);
    FILE *in = fopen(fam_path(fam, "config.hub.json"), "rb"), *out = fopen(dst, "wb");
    assert_true(in && out);
    char buf[8192];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, in)) > 0) assert_int_equal(fwrite(buf, 1, n, out), n);
    fclose(in);
    fclose(out);
    return dir;
}

/* An HF mixture's stacked experts: a scratch file's mapping (core's sqz__map_spill, pages dropped as they
 * are copied), or heap memory where no scratch file can be made. */
static void check_experts_held(const sqz_model *m, bool spilled) {
    for (int64_t i = 0; i < m->n_tensors; i++) {
        const sqz_tensor *t = &m->tensors[i];
        if (t->ndim != 3) continue;
        assert_int_equal(t->owned, !spilled);
        assert_int_equal(sqz__mapping_at(t->data) != NULL, spilled);
    }
}

static void check_family(const char *fam) {
    ref_file f;
    if (!ref_load(fam_path(fam, "ref.bin"), &f)) fail_msg("cannot read %s", fam_path(fam, "ref.bin"));
    sqz_model *m = NULL;
    SQZ_ASSERT_OK(sqz_model_open(fam_path(fam, NULL), NULL, &m));
    check_experts_held(m, true);
    char what[128];
    snprintf(what, sizeof what, "%s (config.json)", fam);
    check_model(what, m, &f);
    check_cache(what, m, &f);

    sqz_model *h = NULL;
    SQZ_ASSERT_OK(sqz_model_open(hub_dir(fam), NULL, &h));
    snprintf(what, sizeof what, "%s (config.hub.json)", fam);
    check_model(what, h, &f);
    sqz_model_free(h);

    /* no scratch file possible: the experts in heap memory, the same model */
    const char *tmp = getenv("TMPDIR");
    char *saved = tmp ? strdup(tmp) : NULL;
    setenv("TMPDIR", "/nonexistent/sqz-no-scratch", 1);
    SQZ_ASSERT_OK(sqz_model_open(fam_path(fam, NULL), NULL, &h));
    if (saved) setenv("TMPDIR", saved, 1);
    else unsetenv("TMPDIR");
    free(saved);
    check_experts_held(h, false);
    snprintf(what, sizeof what, "%s (experts in heap memory)", fam);
    check_model(what, h, &f);
    sqz_model_free(h);

    char out[4096];
    snprintf(out, sizeof out, "%s/%s.gguf", sqz_test_tmpdir(), fam);
    sqz_save_opts so = {.format = SQZ_FORMAT_GGUF, .dtype = -1};
    SQZ_ASSERT_OK(sqz_model_save(m, out, &so));
    sqz_model *g = NULL;
    SQZ_ASSERT_OK(sqz_model_open(out, NULL, &g));
    snprintf(what, sizeof what, "%s (sqz's GGUF)", fam);
    check_model(what, g, &f);
    sqz_model_free(g);
    unlink(out);

    snprintf(out, sizeof out, "%s/%s-hf", sqz_test_tmpdir(), fam);
    so.format = SQZ_FORMAT_SAFETENSORS;
    SQZ_ASSERT_OK(sqz_model_save(m, out, &so));
    SQZ_ASSERT_OK(sqz_model_open(out, NULL, &g));
    snprintf(what, sizeof what, "%s (sqz's HF directory)", fam);
    check_model(what, g, &f);
    sqz_model_free(g);

    sqz_model_free(m);
    ref_free(&f);
}

static void test_llama3(void **state) {
    (void)state;
    check_family("llama3");
}
static void test_qwen3(void **state) {
    (void)state;
    check_family("qwen3");
}
static void test_gemma3(void **state) {
    (void)state;
    check_family("gemma3");
}
static void test_phi3(void **state) {
    (void)state;
    check_family("phi3");
}

/* Mixtures of experts: 8 experts, top-2, in every one of 3 layers. */
static void test_qwen3moe(void **state) {
    (void)state;
    check_family("qwen3moe");
}
static void test_mixtral(void **state) {
    (void)state;
    check_family("mixtral");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_llama3),
        cmocka_unit_test(test_qwen3),
        cmocka_unit_test(test_gemma3),
        cmocka_unit_test(test_phi3),
        cmocka_unit_test(test_qwen3moe),
        cmocka_unit_test(test_mixtral),
    };
    return sqz_test_run(tests, NULL, NULL);
}

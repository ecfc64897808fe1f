/* tests/unit/test_tokenizer_json.c - HF tokenizer.json reading and writing: the real
 * tinystories-656K and all-MiniLM-L6-v2 tokenizers, the stories260K vocab synthesised to
 * tokenizer.json and read back exactly, small hand-made vocabs and hostile JSON.
 * (tests/py/test_tokenizer_json.py checks the synthesised files with the `tokenizers` package.) */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cjson/cJSON.h>

#include "core/internal.h"
#include "formats/formats_internal.h"
#include "test_util.h"

#define SPM_SPACE "\xe2\x96\x81"

/* Reads dir/tokenizer.json (+ tokenizer_config.json when present). */
static sqz_status read_dir(const char *dir, sqz_vocab *v) {
    char *p = sqz__path_join(dir, "tokenizer.json"), *cp = sqz__path_join(dir, "tokenizer_config.json");
    char *json = NULL, *cfg = NULL;
    size_t len = 0;
    sqz_status s = sqz_read_file(p, SQZ__MAX_JSON, &json, &len);
    if (s == SQZ_OK && sqz__is_file(cp)) s = sqz_read_file(cp, SQZ__MAX_JSON, &cfg, NULL);
    if (s == SQZ_OK) s = sqz__tokenizer_json_read(json, len, cfg, p, v);
    free(json);
    free(cfg);
    free(p);
    free(cp);
    return s;
}

/* Synthesises tokenizer.json + tokenizer_config.json for v (ignoring verbatim texts) and reads
 * them back into out. */
static void synth_roundtrip(const sqz_vocab *v, sqz_vocab *out) {
    sqz_vocab w = *v;
    w.hf_json = w.hf_config_json = NULL;
    char *json = sqz__tokenizer_json_write(&w);
    char *cfg = sqz__tokenizer_config_write(&w);
    if (!json || !cfg) fail_msg("write: %s", sqz_last_error());
    sqz_vocab_init(out);
    SQZ_ASSERT_OK(sqz__tokenizer_json_read(json, strlen(json), cfg, "synth/tokenizer.json", out));
    free(json);
    free(cfg);
}

static void assert_same_vocab(const sqz_vocab *a, const sqz_vocab *b) {
    assert_int_equal(a->kind, b->kind);
    assert_int_equal(a->n_tokens, b->n_tokens);
    for (int32_t i = 0; i < a->n_tokens; i++) {
        if (strcmp(a->tokens[i], b->tokens[i]) != 0) fail_msg("token %d: '%s' vs '%s'", i, a->tokens[i], b->tokens[i]);
        int32_t ta = a->types ? a->types[i] : SQZ_TOKEN_NORMAL, tb = b->types ? b->types[i] : SQZ_TOKEN_NORMAL;
        if (ta != tb) fail_msg("token %d '%s': type %d vs %d", i, a->tokens[i], ta, tb);
    }
    assert_int_equal(a->scores != NULL, b->scores != NULL);
    if (a->scores) assert_memory_equal(a->scores, b->scores, (size_t)a->n_tokens * sizeof(float)); /* bit exact */
    assert_int_equal(a->bos, b->bos);
    assert_int_equal(a->eos, b->eos);
    assert_int_equal(a->unk, b->unk);
    assert_int_equal(a->add_bos, b->add_bos);
    assert_int_equal(a->add_eos, b->add_eos);
    assert_int_equal(a->add_space_prefix, b->add_space_prefix);
}

static void test_tinystories_656k(void **state) {
    (void)state;
    const char *dir = sqz_test_data("models/tinystories-656K");
    SQZ_SKIP_UNLESS(dir);
    sqz_vocab v;
    sqz_vocab_init(&v);
    SQZ_ASSERT_OK(read_dir(dir, &v));
    assert_int_equal(v.kind, SQZ_VOCAB_SPM); /* BPE + byte_fallback + Prepend("▁") */
    assert_int_equal(v.n_tokens, 2048);
    assert_string_equal(v.tokens[0], "<unk>");
    assert_string_equal(v.tokens[1], "<|start_story|>");
    assert_string_equal(v.tokens[2], "<|end_story|>");
    assert_string_equal(v.tokens[3], "\n");
    assert_string_equal(v.tokens[258], "play" SPM_SPACE);
    assert_int_equal(v.types[0], SQZ_TOKEN_UNKNOWN);
    assert_int_equal(v.types[1], SQZ_TOKEN_CONTROL);
    assert_int_equal(v.types[2], SQZ_TOKEN_CONTROL);
    assert_int_equal(v.types[3], SQZ_TOKEN_NORMAL);
    assert_int_equal(v.unk, 0);
    assert_int_equal(v.bos, 1);
    assert_int_equal(v.eos, 2);
    assert_int_equal(v.pad, 0);
    assert_true(v.add_bos);
    assert_false(v.add_eos);
    assert_true(v.add_space_prefix);
    assert_int_equal(v.n_merges, 1967);
    assert_string_equal(v.merges[0], "e " SPM_SPACE);
    assert_string_equal(v.merges[2], "t h");
    /* Scores derived from merge ranks: "th" is made by merge 2. */
    int32_t th = -1;
    for (int32_t i = 0; i < v.n_tokens; i++) {
        if (strcmp(v.tokens[i], "th") == 0) th = i;
    }
    assert_true(th > 0);
    assert_true(v.scores[th] == -2.f);
    assert_true(v.scores[1] == 0.f);
    assert_non_null(v.hf_json);
    assert_non_null(v.hf_config_json);
    /* Verbatim write-back. */
    char *p = sqz__path_join(dir, "tokenizer.json");
    char *orig = NULL;
    SQZ_ASSERT_OK(sqz_read_file(p, SQZ__MAX_JSON, &orig, NULL));
    char *w = sqz__tokenizer_json_write(&v);
    assert_non_null(w);
    assert_string_equal(w, orig);
    char *wc = sqz__tokenizer_config_write(&v);
    assert_string_equal(wc, v.hf_config_json);
    /* Synthesised from the vocab (merges kept, scores embedded): reads back the same. */
    sqz_vocab back;
    synth_roundtrip(&v, &back);
    assert_same_vocab(&v, &back);
    assert_int_equal(back.n_merges, v.n_merges);
    for (int32_t i = 0; i < v.n_merges; i++) assert_string_equal(back.merges[i], v.merges[i]);
    sqz_vocab_clear(&back);
    free(p);
    free(orig);
    free(w);
    free(wc);
    sqz_vocab_clear(&v);
}

static void test_stories260k_synth(void **state) {
    (void)state;
    const char *tok = sqz_test_data("models/stories260K/tok512.bin");
    SQZ_SKIP_UNLESS(tok);
    sqz_vocab v;
    sqz_vocab_init(&v);
    SQZ_ASSERT_OK(sqz__llama2c_tokenizer_read(tok, 512, &v));
    char *json = sqz__tokenizer_json_write(&v);
    assert_non_null(json);
    /* The merges derived from the scores: " t" (score -0, id 259) is the best merge. */
    cJSON *root = cJSON_Parse(json);
    assert_non_null(root);
    cJSON *model = cJSON_GetObjectItem(root, "model");
    assert_string_equal(cJSON_GetObjectItem(model, "type")->valuestring, "BPE");
    assert_true(cJSON_IsTrue(cJSON_GetObjectItem(model, "byte_fallback")));
    cJSON *merges = cJSON_GetObjectItem(model, "merges");
    assert_int_equal(cJSON_GetArraySize(merges), 165); /* 151 multi-character tokens, some with two splits */
    assert_string_equal(cJSON_GetArrayItem(merges, 0)->valuestring, SPM_SPACE " t");
    assert_string_equal(cJSON_GetArrayItem(merges, 1)->valuestring, "h e");
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(root, "added_tokens")), 3);
    cJSON_Delete(root);
    free(json);

    sqz_vocab back;
    synth_roundtrip(&v, &back);
    assert_same_vocab(&v, &back);
    assert_int_equal(back.types[3], SQZ_TOKEN_BYTE);
    sqz_vocab_clear(&back);

    char *cfg = sqz__tokenizer_config_write(&v);
    root = cJSON_Parse(cfg);
    assert_non_null(root);
    assert_string_equal(cJSON_GetObjectItem(root, "tokenizer_class")->valuestring, "LlamaTokenizerFast");
    assert_string_equal(cJSON_GetObjectItem(root, "bos_token")->valuestring, "<s>");
    assert_string_equal(cJSON_GetObjectItem(root, "eos_token")->valuestring, "</s>");
    assert_true(cJSON_IsTrue(cJSON_GetObjectItem(root, "add_bos_token")));
    assert_true(cJSON_GetObjectItem(root, "model_max_length")->valuedouble > 1e29);
    cJSON_Delete(root);
    free(cfg);
    sqz_vocab_clear(&v);
}

static void test_minilm(void **state) {
    (void)state;
    const char *dir = sqz_test_minilm();
    SQZ_SKIP_UNLESS(dir);
    sqz_vocab v;
    sqz_vocab_init(&v);
    SQZ_ASSERT_OK(read_dir(dir, &v));
    assert_int_equal(v.kind, SQZ_VOCAB_WPM);
    assert_int_equal(v.n_tokens, 30522);
    assert_string_equal(v.tokens[0], "[PAD]");
    assert_string_equal(v.tokens[101], "[CLS]");
    assert_string_equal(v.tokens[7592], "hello"); /* HF form, as runtime/tokenizer_wpm.c expects */
    assert_int_equal(v.cls, 101);
    assert_int_equal(v.sep, 102);
    assert_int_equal(v.bos, 101);
    assert_int_equal(v.eos, 102);
    assert_int_equal(v.unk, 100);
    assert_int_equal(v.pad, 0);
    assert_int_equal(v.mask, 103);
    assert_true(v.add_bos && v.add_eos);
    assert_int_equal(v.types[101], SQZ_TOKEN_CONTROL);
    assert_int_equal(v.types[100], SQZ_TOKEN_UNKNOWN);
    assert_int_equal(v.types[1], SQZ_TOKEN_NORMAL); /* [unused0]: in the vocab, not an added token */
    assert_string_equal(v.tokens[1], "[unused0]");
    assert_null(v.scores);
    int n_cont = 0;
    for (int32_t i = 0; i < v.n_tokens; i++) n_cont += strncmp(v.tokens[i], "##", 2) == 0;
    assert_true(n_cont > 5000); /* continuations keep their "##" */
    sqz_vocab back;
    synth_roundtrip(&v, &back);
    assert_same_vocab(&v, &back);
    assert_int_equal(back.cls, 101);
    assert_int_equal(back.sep, 102);
    sqz_vocab_clear(&back);
    sqz_vocab_clear(&v);
}

/* A hand-made vocab of each kind, with odd scores, holes and user-defined tokens. */
static void make_vocab(sqz_vocab *v, sqz_vocab_kind kind, const char *const *toks, int32_t n) {
    sqz_vocab_init(v);
    v->kind = kind;
    v->n_tokens = n;
    v->tokens = calloc((size_t)n, sizeof *v->tokens);
    v->types = calloc((size_t)n, sizeof *v->types);
    for (int32_t i = 0; i < n; i++) {
        v->tokens[i] = strdup(toks[i]);
        v->types[i] = SQZ_TOKEN_NORMAL;
    }
}

static void test_small_vocabs(void **state) {
    (void)state;
    /* SPM with non-finite scores, an unused and a user-defined token. */
    static const char *const spm[] = {"<unk>", "<s>", "</s>", "<0x41>", SPM_SPACE, "a", "b", SPM_SPACE "a",
                                      "ab", "[PAD9]", "<tool>"};
    sqz_vocab v, back;
    make_vocab(&v, SQZ_VOCAB_SPM, spm, 11);
    v.scores = calloc(11, sizeof(float));
    v.scores[5] = INFINITY;
    v.scores[6] = -INFINITY;
    v.scores[7] = NAN;
    v.scores[8] = -1.5e-7f;
    v.types[0] = SQZ_TOKEN_UNKNOWN;
    v.types[1] = v.types[2] = SQZ_TOKEN_CONTROL;
    v.types[3] = SQZ_TOKEN_BYTE;
    v.types[9] = SQZ_TOKEN_UNUSED;
    v.types[10] = SQZ_TOKEN_USER_DEFINED;
    v.unk = 0, v.bos = 1, v.eos = 2, v.add_bos = true, v.add_space_prefix = true;
    synth_roundtrip(&v, &back);
    assert_same_vocab(&v, &back); /* NaN compared bit for bit */
    sqz_vocab_clear(&back);
    sqz_vocab_clear(&v);

    /* Byte-level BPE with merges and a pre-tokenizer name. */
    static const char *const bpe[] = {"<|endoftext|>", "a", "b", "\u0120", "\u0120a", "ab", "1"};
    make_vocab(&v, SQZ_VOCAB_BPE, bpe, 7);
    v.types[0] = SQZ_TOKEN_CONTROL;
    v.n_merges = 2;
    v.merges = calloc(2, sizeof *v.merges);
    v.merges[0] = strdup("\xc4\xa0 a");
    v.merges[1] = strdup("a b");
    v.bos = v.eos = 0;
    v.pre = strdup("smollm");
    synth_roundtrip(&v, &back);
    assert_same_vocab(&v, &back);
    assert_int_equal(back.n_merges, 2);
    assert_string_equal(back.merges[0], "\xc4\xa0 a");
    assert_null(back.scores);
    sqz_vocab_clear(&back);
    char *json = sqz__tokenizer_json_write(&v);
    assert_non_null(strstr(json, "\"Digits\""));
    free(json);
    char *cfg = sqz__tokenizer_config_write(&v);
    assert_non_null(strstr(cfg, "GPT2TokenizerFast"));
    free(cfg);
    sqz_vocab_clear(&v);

    /* An empty vocab cannot be written. */
    sqz_vocab_init(&v);
    assert_null(sqz__tokenizer_json_write(&v));
}

static void test_ids_and_holes(void **state) {
    (void)state;
    /* An added token beyond the model vocab leaves a hole: [PAD3] of type UNUSED. */
    const char *j = "{\"added_tokens\":[{\"id\":4,\"content\":\"<x>\",\"special\":true},"
                    "{\"id\":1,\"content\":\"b\",\"special\":false}],"
                    "\"pre_tokenizer\":{\"type\":\"ByteLevel\"},"
                    "\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":1,\"ab\":2},\"merges\":[[\"a\",\"b\"]]}}";
    sqz_vocab v;
    sqz_vocab_init(&v);
    SQZ_ASSERT_OK(sqz__tokenizer_json_read(j, strlen(j), NULL, "t.json", &v));
    assert_int_equal(v.kind, SQZ_VOCAB_BPE);
    assert_int_equal(v.n_tokens, 5);
    assert_string_equal(v.tokens[3], "[PAD3]");
    assert_int_equal(v.types[3], SQZ_TOKEN_UNUSED);
    assert_int_equal(v.types[4], SQZ_TOKEN_CONTROL);
    assert_int_equal(v.types[1], SQZ_TOKEN_USER_DEFINED);
    assert_int_equal(v.n_merges, 1);
    assert_string_equal(v.merges[0], "a b");
    assert_null(v.hf_config_json);
    sqz_vocab_clear(&v);
}

static const struct {
    const char *json, *cfg, *reason;
    sqz_status status;
} hostile[] = {
    {"{\"model\":", NULL, "not valid JSON", SQZ_ERR_FORMAT},
    {"[1,2]", NULL, "not a JSON object", SQZ_ERR_FORMAT},
    {"{\"version\":\"1.0\"}", NULL, "no \"model\" object", SQZ_ERR_FORMAT},
    {"{\"model\":{\"type\":\"WordLevel\",\"vocab\":{}}}", NULL, "'WordLevel' is not supported", SQZ_ERR_UNSUPPORTED},
    {"{\"model\":{\"type\":\"BPE\",\"vocab\":[]}}", NULL, "model.vocab is not an object", SQZ_ERR_FORMAT},
    {"{\"model\":{\"type\":\"BPE\",\"vocab\":{}}}", NULL, "no tokens", SQZ_ERR_FORMAT},
    {"{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":-1}}}", NULL, "token 'a' has no valid id", SQZ_ERR_FORMAT},
    {"{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":1.5}}}", NULL, "token 'a' has no valid id", SQZ_ERR_FORMAT},
    {"{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":1e300}}}", NULL, "token 'a' has no valid id", SQZ_ERR_FORMAT},
    {"{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":\"0\"}}}", NULL, "token 'a' has no valid id", SQZ_ERR_FORMAT},
    {"{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":0}}}", NULL, "id 0 given to both 'a' and 'b'",
     SQZ_ERR_FORMAT},
    {"{\"model\":{\"type\":\"BPE\",\"vocab\":{\"\":0}}}", NULL, "empty or not valid UTF-8", SQZ_ERR_FORMAT},
    {"{\"model\":{\"type\":\"BPE\",\"vocab\":{\"\xff\":0}}}", NULL, "empty or not valid UTF-8", SQZ_ERR_FORMAT},
    {"{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":{}}}", NULL, "model.merges is not an array",
     SQZ_ERR_FORMAT},
    {"{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[\"ab\"]}}", NULL, "merges[0] 'ab' is not",
     SQZ_ERR_FORMAT},
    {"{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[[\"a\"]]}}", NULL, "merges[0] is not a pair",
     SQZ_ERR_FORMAT},
    {"{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[7]}}", NULL, "merges[0] is not a pair",
     SQZ_ERR_FORMAT},
    {"{\"added_tokens\":{},\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0}}}", NULL, "added_tokens is not an array",
     SQZ_ERR_FORMAT},
    {"{\"added_tokens\":[{\"id\":1}],\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0}}}", NULL,
     "an entry without a valid id and content", SQZ_ERR_FORMAT},
    {"{\"added_tokens\":[{\"id\":99999999,\"content\":\"x\"}],\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0}}}",
     NULL, "an entry without a valid id", SQZ_ERR_FORMAT},
    {"{\"model\":{\"type\":\"Unigram\",\"vocab\":[[\"a\"]]}}", NULL, "model.vocab[0] is not a [piece, score] pair",
     SQZ_ERR_FORMAT},
    {"{\"model\":{\"type\":\"Unigram\",\"vocab\":{}}}", NULL, "not an array", SQZ_ERR_FORMAT},
    {"{\"model\":{\"type\":\"BPE\",\"byte_fallback\":true,\"vocab\":{\"a\":0},\"scores\":[\"x\"]}}", NULL,
     "model.scores[0] is not a number", SQZ_ERR_FORMAT},
    {"{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0}}}", "{\"bos_token\":", "tokenizer_config.json",
     SQZ_ERR_FORMAT},
};

static void test_hostile(void **state) {
    (void)state;
    for (size_t i = 0; i < sizeof hostile / sizeof *hostile; i++) {
        sqz_vocab v;
        sqz_vocab_init(&v);
        sqz_status s = sqz__tokenizer_json_read(hostile[i].json, strlen(hostile[i].json), hostile[i].cfg,
                                                "bad/tokenizer.json", &v);
        if (s != hostile[i].status || !strstr(sqz_last_error(), "bad/tokenizer.json") ||
            !strstr(sqz_last_error(), hostile[i].reason))
            fail_msg("case %zu: %s, '%s' (wanted '%s')", i, sqz_status_name(s), sqz_last_error(), hostile[i].reason);
        assert_int_equal(v.n_tokens, 0);
        assert_null(v.tokens);
    }
}

/* A Unigram model: scores from the vocab, kind SPM. */
static void test_unigram(void **state) {
    (void)state;
    const char *j = "{\"pre_tokenizer\":{\"type\":\"Metaspace\",\"replacement\":\"\\u2581\",\"prepend_scheme\":"
                    "\"always\"},\"model\":{\"type\":\"Unigram\",\"unk_id\":0,\"vocab\":[[\"<unk>\",0.0],"
                    "[\"\\u2581a\",-1.25],[\"b\",-3.5]]}}";
    sqz_vocab v;
    sqz_vocab_init(&v);
    SQZ_ASSERT_OK(sqz__tokenizer_json_read(j, strlen(j), "{\"unk_token\":\"<unk>\"}", "u.json", &v));
    assert_int_equal(v.kind, SQZ_VOCAB_SPM);
    assert_int_equal(v.n_tokens, 3);
    assert_string_equal(v.tokens[1], SPM_SPACE "a");
    assert_true(v.scores[1] == -1.25f && v.scores[2] == -3.5f);
    assert_int_equal(v.unk, 0);
    assert_int_equal(v.types[0], SQZ_TOKEN_UNKNOWN);
    assert_true(v.add_space_prefix);
    sqz_vocab_clear(&v);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tinystories_656k), cmocka_unit_test(test_stories260k_synth),
        cmocka_unit_test(test_minilm),           cmocka_unit_test(test_small_vocabs),
        cmocka_unit_test(test_ids_and_holes),    cmocka_unit_test(test_hostile),
        cmocka_unit_test(test_unigram),
    };
    return sqz_test_run(tests, NULL, NULL);
}

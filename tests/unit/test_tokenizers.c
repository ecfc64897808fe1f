/* tests/unit/test_tokenizers.c - the tokenizers (runtime/tokenizer*.c) against the reference ids in
 * tests/data/tokens/ (written once by tests/ref/make_token_goldens.py: HF `tokenizers` for
 * tinystories-656K, all-MiniLM-L6-v2 and SmolLM2, a port of llama2.c's encode() for tok512.bin), on
 * vocabularies loaded from the real models by sqz_model_open:
 *   every sample encodes to exactly the reference ids (special tokens added), decodes back to the
 *   text where the tokenizer is lossless (SPM with byte fallback, byte-level BPE) and to the
 *   reference's decoded text for WordPiece;
 *   edge cases: empty text, invalid UTF-8, NUL bytes, random bytes, special-token parsing, pieces, bad ids,
 *   scores vs merge ranks and the leftmost tie-break on hand-made vocabularies, bad vocabularies,
 *   several threads sharing one tokenizer.
 * `test_tokenizers --wiki` (ctest test_tokenizers_wiki) encodes all of wiki.test.raw with each
 * tokenizer and checks the token count and a hash of all the ids the reference gave for the whole
 * file (and that SPM/BPE decode it back byte for byte). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "sqz/tokenizer.h"
#include "test_util.h"

typedef struct model_case {
    const char *name; /* fixture tests/data/tokens/<name>.json */
    sqz_vocab_kind kind;
    bool lossless;    /* decode(encode(x)) == x unless <unk> appears */
} model_case;

static const model_case CASES[] = {
    {"tok512", SQZ_VOCAB_SPM, true},
    {"ts656", SQZ_VOCAB_SPM, true},
    {"smollm2", SQZ_VOCAB_BPE, true},
    {"minilm", SQZ_VOCAB_WPM, false},
};

static const char *model_path(const char *name) {
    if (!strcmp(name, "tok512")) return sqz_test_data("models/stories260K/stories260K.bin");
    if (!strcmp(name, "ts656")) return sqz_test_data("models/tinystories-656K");
    if (!strcmp(name, "smollm2")) return sqz_test_smollm2();
    return sqz_test_minilm();
}

static cJSON *read_json(const char *name) {
    char path[4096];
    const char *src = getenv("SQZ_SOURCE_DIR");
    snprintf(path, sizeof path, "%s/tests/data/tokens/%s.json", src && *src ? src : ".", name);
    char *text = NULL;
    size_t len;
    SQZ_ASSERT_OK(sqz_read_file(path, 1 << 24, &text, &len));
    cJSON *j = cJSON_ParseWithLength(text, len);
    free(text);
    if (!j) fail_msg("%s: not valid JSON", path);
    return j;
}

/* Opens the model of `c` and builds its tokenizer; NULL when the model is missing.
 * *unk (may be NULL) receives the vocabulary's unknown token id. */
static sqz_tokenizer *open_tokenizer(const model_case *c, int32_t *unk) {
    const char *path = model_path(c->name);
    if (!path || !sqz_test_exists(path)) return NULL;
    sqz_model *m = NULL;
    SQZ_ASSERT_OK(sqz_model_open(path, NULL, &m));
    sqz_tokenizer *t = NULL;
    SQZ_ASSERT_OK(sqz_tokenizer_new(&m->vocab, &t));
    if (unk) *unk = m->vocab.unk;
    sqz_model_free(m); /* the tokenizer keeps what it needs */
    assert_int_equal(sqz_tokenizer_kind(t), c->kind);
    return t;
}

/* open_tokenizer for a case that needs this model: skips the case when it is missing. */
static sqz_tokenizer *need_tokenizer(const model_case *c, int32_t *unk) {
    SQZ_SKIP_UNLESS(model_path(c->name));
    sqz_tokenizer *t = open_tokenizer(c, unk);
    assert_non_null(t);
    return t;
}

static void check_case(const model_case *c) {
    int32_t unk;
    sqz_tokenizer *t = need_tokenizer(c, &unk);
    cJSON *samples = read_json("samples"), *gold = read_json(c->name);
    const cJSON *texts = cJSON_GetObjectItem(samples, "texts"), *ids = cJSON_GetObjectItem(gold, "ids");
    const cJSON *decoded = cJSON_GetObjectItem(gold, "decoded");
    assert_int_equal(cJSON_GetArraySize(texts), cJSON_GetArraySize(ids));
    for (int i = 0; i < cJSON_GetArraySize(texts); i++) {
        const char *text = cJSON_GetArrayItem(texts, i)->valuestring;
        const cJSON *want = cJSON_GetArrayItem(ids, i);
        int32_t *got;
        size_t n;
        SQZ_ASSERT_OK(sqz_tokenize(t, text, strlen(text), true, &got, &n));
        assert_non_null(got);
        bool same = n == (size_t)cJSON_GetArraySize(want), has_unk = false;
        for (size_t k = 0; same && k < n; k++) same = got[k] == cJSON_GetArrayItem(want, (int)k)->valueint;
        if (!same) {
            size_t k = 0;
            while (k < n && k < (size_t)cJSON_GetArraySize(want) && got[k] == cJSON_GetArrayItem(want, (int)k)->valueint) k++;
            fail_msg("%s sample %d: %zu ids, reference %d; first difference at %zu", c->name, i, n,
                     cJSON_GetArraySize(want), k);
        }
        for (size_t k = 0; k < n; k++) has_unk = has_unk || got[k] == unk;
        char *back;
        size_t blen;
        SQZ_ASSERT_OK(sqz_detokenize(t, got, n, false, &back, &blen));
        assert_int_equal(strlen(back), blen);
        if (c->lossless && !has_unk) {
            if (blen != strlen(text) || memcmp(back, text, blen)) fail_msg("%s sample %d: decodes to '%s'", c->name, i, back);
        }
        if (decoded) assert_string_equal(back, cJSON_GetArrayItem(decoded, i)->valuestring);
        free(back);
        free(got);
    }
    cJSON_Delete(samples);
    cJSON_Delete(gold);
    sqz_tokenizer_free(t);
}

static void test_tok512(void **s) { (void)s; check_case(&CASES[0]); }
static void test_ts656(void **s) { (void)s; check_case(&CASES[1]); }
static void test_smollm2(void **s) { (void)s; check_case(&CASES[2]); }
static void test_minilm(void **s) { (void)s; check_case(&CASES[3]); }

/* ---- edge cases on the real vocabularies ------------------------------------------------------ */

static sqz_tokenizer *need(int i) { return need_tokenizer(&CASES[i], NULL); }

static void roundtrip(sqz_tokenizer *t, const char *text, size_t len, unsigned flags) {
    int32_t *ids;
    size_t n;
    SQZ_ASSERT_OK(sqz_tokenize_ex(t, text, len, flags, &ids, &n));
    char *back;
    size_t blen;
    SQZ_ASSERT_OK(sqz_detokenize(t, ids, n, false, &back, &blen));
    assert_int_equal(blen, len);
    assert_memory_equal(back, text, len);
    free(back);
    free(ids);
}

static void test_edge_spm(void **s) {
    (void)s;
    sqz_tokenizer *t = need(0);
    int32_t *ids;
    size_t n;
    /* empty text: BOS alone with special tokens, nothing (but a non-NULL array) without */
    SQZ_ASSERT_OK(sqz_tokenize(t, "", 0, true, &ids, &n));
    assert_int_equal(n, 1);
    assert_int_equal(ids[0], sqz_tokenizer_bos(t));
    free(ids);
    SQZ_ASSERT_OK(sqz_tokenize(t, NULL, 0, false, &ids, &n));
    assert_non_null(ids);
    assert_int_equal(n, 0);
    free(ids);
    /* invalid UTF-8 and NUL bytes go through byte tokens, losslessly */
    static const char bad[] = "a\xff\xfe b\xc3(\x00z\xe2\x82";
    roundtrip(t, bad, sizeof bad - 1, 0);
    roundtrip(t, bad, sizeof bad - 1, SQZ_TOKENIZE_ADD_SPECIAL);
    SQZ_ASSERT_OK(sqz_tokenize(t, "\n", 1, false, &ids, &n)); /* " " then <0x0A> */
    assert_int_equal(n, 2);
    size_t pl;
    const char *p = sqz_token_piece(t, ids[1], &pl);
    assert_int_equal(pl, 1);
    assert_int_equal(p[0], '\n');
    free(ids);
    assert_true(sqz_token_is_control(t, sqz_tokenizer_bos(t)));
    assert_false(sqz_token_is_control(t, 300));
    assert_true(sqz_tokenizer_adds_bos(t));
    assert_false(sqz_tokenizer_adds_eos(t));
    assert_null(sqz_token_piece(t, -1, &pl));
    assert_int_equal(pl, 0);
    assert_null(sqz_token_piece(t, sqz_tokenizer_n_tokens(t), NULL));
    /* decoding: bad ids are an error; control tokens only with `special` */
    int32_t bad_ids[] = {1, 300, 512};
    char *text;
    assert_int_equal(sqz_detokenize(t, bad_ids, 3, false, &text, NULL), SQZ_ERR_INVALID_ARG);
    assert_null(text);
    assert_non_null(strstr(sqz_last_error(), "position 2"));
    int32_t with_bos[] = {1, 300};
    SQZ_ASSERT_OK(sqz_detokenize(t, with_bos, 2, true, &text, NULL));
    assert_non_null(strstr(text, "<s>"));
    free(text);
    assert_int_equal(sqz_tokenize(t, NULL, 3, true, &ids, &n), SQZ_ERR_INVALID_ARG);
    assert_null(ids);
    sqz_tokenizer_free(t);
    sqz_tokenizer_free(NULL);
}

static void test_edge_bpe(void **s) {
    (void)s;
    sqz_tokenizer *t = need(2);
    /* invalid UTF-8 (stray continuation, surrogate, > U+10FFFF, truncated) and NUL: one-byte words */
    static const char bad[] = "x\x80\xbf y\x00\xed\xa0\x80 \xf4\x90\x80\x80 \xe2\x82 12345";
    roundtrip(t, bad, sizeof bad - 1, 0);
    char *text;
    int32_t *ids;
    size_t n;
    SQZ_ASSERT_OK(sqz_tokenize(t, "a\xff" "b", 3, false, &ids, &n)); /* SmolLM2 has no token for byte 0xFF */
    SQZ_ASSERT_OK(sqz_detokenize(t, ids, n, false, &text, NULL));
    assert_string_equal(text, "ab"); /* dropped, as HF and llama.cpp do */
    free(text);
    free(ids);
    const char *chat = "<|im_start|>user\nHi there<|im_end|>\n";
    SQZ_ASSERT_OK(sqz_tokenize_ex(t, chat, strlen(chat), SQZ_TOKENIZE_PARSE_SPECIAL, &ids, &n));
    assert_true(n > 4);
    assert_int_equal(ids[0], 1); /* <|im_start|> */
    bool end = false;
    for (size_t k = 0; k < n; k++) end = end || ids[k] == 2;
    assert_true(end);
    SQZ_ASSERT_OK(sqz_detokenize(t, ids, n, true, &text, NULL));
    assert_string_equal(text, chat);
    free(text);
    SQZ_ASSERT_OK(sqz_detokenize(t, ids, n, false, &text, NULL)); /* control tokens left out */
    assert_string_equal(text, "user\nHi there\n");
    free(text);
    free(ids);
    SQZ_ASSERT_OK(sqz_tokenize_ex(t, chat, strlen(chat), 0, &ids, &n)); /* as plain text */
    for (size_t k = 0; k < n; k++) assert_true(ids[k] > 16);
    free(ids);
    roundtrip(t, chat, strlen(chat), 0);
    size_t pl;
    SQZ_ASSERT_OK(sqz_tokenize(t, " the", 4, false, &ids, &n));
    assert_int_equal(n, 1);
    assert_string_equal(sqz_token_piece(t, ids[0], &pl), " the");
    free(ids);
    assert_false(sqz_tokenizer_adds_bos(t));
    /* a long whitespace run (deep backtracking in \s+(?!\S)) and a long word */
    size_t big = 200000;
    char *ws = malloc(big + 2);
    memset(ws, ' ', big);
    ws[big] = 'x';
    roundtrip(t, ws, big + 1, 0);
    memset(ws, 'a', big);
    roundtrip(t, ws, big, 0);
    free(ws);
    sqz_tokenizer_free(t);
}

static void test_edge_wpm(void **s) {
    (void)s;
    sqz_tokenizer *t = need(3);
    int32_t *ids;
    size_t n;
    const char *s1 = "[CLS] héllo [MASK]";
    SQZ_ASSERT_OK(sqz_tokenize_ex(t, s1, strlen(s1), SQZ_TOKENIZE_PARSE_SPECIAL, &ids, &n));
    assert_int_equal(n, 3);
    assert_int_equal(ids[0], 101);
    assert_int_equal(ids[2], 103);
    assert_string_equal(sqz_token_piece(t, ids[1], NULL), "hello");
    free(ids);
    SQZ_ASSERT_OK(sqz_tokenize(t, "\xff\xfe", 2, true, &ids, &n)); /* invalid bytes: dropped like U+FFFD */
    assert_int_equal(n, 2);
    free(ids);
    char word[260];
    memset(word, 'a', sizeof word - 1);
    word[sizeof word - 1] = 0;
    SQZ_ASSERT_OK(sqz_tokenize(t, word, strlen(word), false, &ids, &n)); /* > 100 characters */
    assert_int_equal(n, 1);
    assert_int_equal(ids[0], 100);
    free(ids);
    assert_int_equal(sqz_tokenizer_bos(t), 101);
    assert_int_equal(sqz_tokenizer_eos(t), 102);
    sqz_tokenizer_free(t);
}

/* Random bytes (biased towards spaces, newlines, UTF-8 lead/continuation bytes and '<'): every
 * tokenizer encodes them without error and decodes its ids; SPM with byte fallback is lossless. */
static void test_random_bytes(void **s) {
    (void)s;
    static const char alphabet[] = " \n\t<|>[]'0123456789aeIs\x80\xbf\xc3\xa9\xe2\x96\x81\xf0\x9f\xff";
    uint32_t seed = 12345;
    int tested = 0;
    for (int c = 0; c < 4; c++) {
        sqz_tokenizer *t = open_tokenizer(&CASES[c], NULL);
        if (!t) {
            print_message("%s: model not installed, not tested\n", CASES[c].name);
            continue;
        }
        tested++;
        for (int r = 0; r < 300; r++) {
            char buf[512];
            size_t len = 0, want = (seed = seed * 1103515245u + 12345u) >> 23;
            while (len < want && len < sizeof buf) {
                seed = seed * 1103515245u + 12345u;
                buf[len++] = (seed >> 28) < 12 ? alphabet[(seed >> 16) % (sizeof alphabet - 1)] : (char)(seed >> 16);
            }
            int32_t *ids;
            size_t n;
            SQZ_ASSERT_OK(sqz_tokenize_ex(t, buf, len, (unsigned)r & 3u, &ids, &n));
            for (size_t k = 0; k < n; k++) assert_true(ids[k] >= 0 && ids[k] < sqz_tokenizer_n_tokens(t));
            char *back;
            size_t blen;
            SQZ_ASSERT_OK(sqz_detokenize(t, ids, n, (r & 2) != 0, &back, &blen));
            if (c == 0 && !(r & 2)) { /* tok512 without special-token parsing */
                assert_int_equal(blen, len);
                assert_memory_equal(back, buf, len);
            }
            free(back);
            free(ids);
        }
        sqz_tokenizer_free(t);
    }
    if (!tested) SQZ_SKIP("no model installed");
}

/* ---- hand-made vocabularies --------------------------------------------------------------------- */

static void make_vocab(sqz_vocab *v, sqz_vocab_kind kind, const char *const *tokens, int32_t n) {
    sqz_vocab_init(v);
    v->kind = kind;
    v->n_tokens = n;
    v->tokens = calloc((size_t)n, sizeof *v->tokens);
    for (int32_t i = 0; i < n; i++) v->tokens[i] = strdup(tokens[i]);
}

static void encode_expect(const sqz_vocab *v, const char *text, const int32_t *want, size_t n_want) {
    sqz_tokenizer *t;
    SQZ_ASSERT_OK(sqz_tokenizer_new(v, &t));
    int32_t *ids;
    size_t n;
    SQZ_ASSERT_OK(sqz_tokenize(t, text, strlen(text), false, &ids, &n));
    assert_int_equal(n, n_want);
    assert_memory_equal(ids, want, n * sizeof *ids);
    free(ids);
    sqz_tokenizer_free(t);
}

static void test_scores_vs_ranks(void **s) {
    (void)s;
    static const char *const toks[] = {"<unk>", "\xe2\x96\x81", "a", "b", "aa", "ab", "\xe2\x96\x81\x61" /* ▁a */};
    sqz_vocab v;
    make_vocab(&v, SQZ_VOCAB_SPM, toks, 7);
    v.unk = 0;
    v.add_space_prefix = true;
    v.scores = calloc(7, sizeof *v.scores);
    v.scores[4] = -1; /* aa */
    v.scores[5] = -2; /* ab */
    v.scores[6] = -3; /* ▁a */
    /* scores: "▁aab" -> aa wins (-1) over ▁a and ab -> ▁ aa b */
    encode_expect(&v, "aab", (const int32_t[]){1, 4, 3}, 3);
    /* ties go left: "aaaa" -> aa aa */
    encode_expect(&v, "aaaa", (const int32_t[]){1, 4, 4}, 3);
    /* with merges, ranks decide, whatever the scores: "a b" first -> ▁ a ab; then "▁ a" */
    v.merges = calloc(3, sizeof *v.merges);
    v.merges[0] = strdup("a b");
    v.merges[1] = strdup("\xe2\x96\x81 a");
    v.merges[2] = strdup("x y"); /* names unknown tokens: ignored */
    v.n_merges = 3;
    encode_expect(&v, "aab", (const int32_t[]){6, 5}, 2);
    /* a character with neither a token nor byte tokens becomes <unk> */
    encode_expect(&v, "c", (const int32_t[]){1, 0}, 2);
    sqz_vocab_clear(&v);
}

static void test_bad_vocab(void **s) {
    (void)s;
    static const char *const toks[] = {"a", "b", "ab"};
    sqz_vocab v;
    sqz_tokenizer *t = NULL;
    make_vocab(&v, SQZ_VOCAB_NONE, toks, 3);
    assert_int_equal(sqz_tokenizer_new(&v, &t), SQZ_ERR_UNSUPPORTED);
    assert_null(t);
    v.kind = SQZ_VOCAB_BPE;
    v.bos = 3;
    assert_int_equal(sqz_tokenizer_new(&v, &t), SQZ_ERR_FORMAT);
    assert_non_null(strstr(sqz_last_error(), "BOS"));
    v.bos = -1;
    v.pre = strdup("no-such-pre-tokenizer");
    assert_int_equal(sqz_tokenizer_new(&v, &t), SQZ_ERR_UNSUPPORTED);
    assert_non_null(strstr(sqz_last_error(), "no-such-pre-tokenizer"));
    free(v.pre);
    v.pre = NULL;
    v.hf_json = strdup("{\"pre_tokenizer\": {\"type\": \"Split\", \"pattern\": {\"Regex\": \"(unclosed\"},"
                       " \"behavior\": \"Isolated\"}}");
    assert_int_equal(sqz_tokenizer_new(&v, &t), SQZ_ERR_FORMAT);
    free(v.hf_json);
    v.hf_json = NULL;
    free(v.tokens[1]);
    v.tokens[1] = NULL;
    assert_int_equal(sqz_tokenizer_new(&v, &t), SQZ_ERR_FORMAT);
    v.tokens[1] = strdup("b");
    v.n_tokens = 0;
    assert_int_equal(sqz_tokenizer_new(&v, &t), SQZ_ERR_FORMAT);
    v.n_tokens = 3;
    assert_int_equal(sqz_tokenizer_new(NULL, &t), SQZ_ERR_INVALID_ARG);
    /* no pre-tokenizer name: GPT-2's regex; bytes without tokens are dropped */
    v.merges = calloc(1, sizeof *v.merges);
    v.merges[0] = strdup("a b");
    v.n_merges = 1;
    SQZ_ASSERT_OK(sqz_tokenizer_new(&v, &t));
    int32_t *ids;
    size_t n;
    SQZ_ASSERT_OK(sqz_tokenize(t, "ab ba", 5, true, &ids, &n));
    assert_int_equal(n, 3); /* ab, b, a (the space has no token) */
    free(ids);
    sqz_tokenizer_free(t);
    sqz_vocab_clear(&v);
}

/* ---- one tokenizer, several threads ---------------------------------------------------------- */

typedef struct job {
    const sqz_tokenizer *t;
    const char *text;
    size_t len, n;
    int32_t *ids;
    sqz_status st;
} job;

static void *run_job(void *p) {
    job *j = p;
    for (int r = 0; r < 5 && j->st == SQZ_OK; r++) {
        free(j->ids);
        j->st = sqz_tokenize(j->t, j->text, j->len, true, &j->ids, &j->n);
    }
    return NULL;
}

static void test_threads(void **s) {
    (void)s;
    sqz_tokenizer *t = need(2);
    const char *text = "Once upon a time, there were 3 cats and 12 dogs. \xc3\xa9\xe6\x97\xa5 The end.\n";
    job jobs[4];
    pthread_t th[4];
    for (int i = 0; i < 4; i++) {
        jobs[i] = (job){t, text, strlen(text), 0, NULL, SQZ_OK};
        assert_int_equal(pthread_create(&th[i], NULL, run_job, &jobs[i]), 0);
    }
    for (int i = 0; i < 4; i++) pthread_join(th[i], NULL);
    for (int i = 0; i < 4; i++) {
        SQZ_ASSERT_OK(jobs[i].st);
        assert_int_equal(jobs[i].n, jobs[0].n);
        assert_memory_equal(jobs[i].ids, jobs[0].ids, jobs[0].n * sizeof(int32_t));
    }
    for (int i = 0; i < 4; i++) free(jobs[i].ids);
    sqz_tokenizer_free(t);
}

/* ---- the whole of wiki.test.raw ------------------------------------------------------------- */

static void wiki_case(const model_case *c) {
    const char *path = sqz_test_data("data/wiki.test.raw");
    SQZ_SKIP_UNLESS(path);
    sqz_tokenizer *t = need_tokenizer(c, NULL);
    char *text;
    size_t len;
    SQZ_ASSERT_OK(sqz_read_file(path, 1 << 26, &text, &len));
    cJSON *gold = read_json(c->name);
    int32_t *ids;
    size_t n;
    SQZ_ASSERT_OK(sqz_tokenize(t, text, len, true, &ids, &n));
    assert_int_equal(n, (size_t)cJSON_GetObjectItem(gold, "wiki_tokens")->valuedouble);
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a 64 over the ids as int32 little-endian */
    for (size_t k = 0; k < n; k++)
        for (int b = 0; b < 4; b++) h = (h ^ (((uint32_t)ids[k] >> (8 * b)) & 0xff)) * 0x100000001b3ull;
    char hex[17];
    snprintf(hex, sizeof hex, "%016llx", (unsigned long long)h);
    assert_string_equal(hex, cJSON_GetObjectItem(gold, "wiki_ids_fnv1a64")->valuestring);
    if (c->lossless && strcmp(c->name, "ts656") != 0) { /* tinystories-656K has <unk>s here */
        char *back;
        size_t blen;
        SQZ_ASSERT_OK(sqz_detokenize(t, ids, n, false, &back, &blen));
        assert_int_equal(blen, len);
        assert_memory_equal(back, text, len);
        free(back);
    }
    free(ids);
    free(text);
    cJSON_Delete(gold);
    sqz_tokenizer_free(t);
}

static void test_wiki_tok512(void **s) { (void)s; wiki_case(&CASES[0]); }
static void test_wiki_ts656(void **s) { (void)s; wiki_case(&CASES[1]); }
static void test_wiki_smollm2(void **s) { (void)s; wiki_case(&CASES[2]); }
static void test_wiki_minilm(void **s) { (void)s; wiki_case(&CASES[3]); }

int main(int argc, char **argv) {
    if (argc > 1 && !strcmp(argv[1], "--wiki")) {
        const struct CMUnitTest wiki[] = {
            cmocka_unit_test(test_wiki_tok512),
            cmocka_unit_test(test_wiki_ts656),
            cmocka_unit_test(test_wiki_smollm2),
            cmocka_unit_test(test_wiki_minilm),
        };
        return sqz_test_run_name("tokenizers on wiki.test.raw", wiki, NULL, NULL);
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tok512),       cmocka_unit_test(test_ts656),   cmocka_unit_test(test_smollm2),
        cmocka_unit_test(test_minilm),       cmocka_unit_test(test_edge_spm), cmocka_unit_test(test_edge_bpe),
        cmocka_unit_test(test_edge_wpm),     cmocka_unit_test(test_scores_vs_ranks),
        cmocka_unit_test(test_bad_vocab),    cmocka_unit_test(test_threads),
        cmocka_unit_test(test_random_bytes),
    };
    return sqz_test_run_name("tokenizers", tests, NULL, NULL);
}

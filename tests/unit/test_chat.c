/*
 * tests/unit/test_chat.c - chat templates (sqz/chat.h, runtime/chat.c):
 *   SmolLM2-135M-Instruct's own template (its GGUF tokenizer.chat_template) renders to exactly
 *     what transformers' apply_chat_template gave (tests/data/chat/, its README says how), with
 *     the template's default system message and with a given one;
 *   the rows by their markers, a format named without a template, the BOS only where the
 *     template writes it, and the refusals: no template, an unrecognised one, a dated one
 *     (strftime_now), an unknown format name, a system message not first, an unknown role.
 * The comparison with Jinja on real models' templates is tests/py/test_chat_templates.py.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "sqz/chat.h"
#include "sqz/formats.h"
#include "sqz/model.h"
#include "test_util.h"

static char *read_golden(const char *name) {
    char path[1024];
    const char *src = getenv("SQZ_SOURCE_DIR");
    snprintf(path, sizeof path, "%s/tests/data/chat/%s", src ? src : ".", name);
    FILE *f = fopen(path, "rb");
    if (!f) fail_msg("%s: cannot open", path);
    char *s = calloc(1, 4096);
    size_t n = fread(s, 1, 4095, f);
    fclose(f);
    s[n] = 0;
    return s;
}

static char *render(const char *format, const char *tmpl, const sqz_chat_msg *m, size_t n) {
    char *out = NULL;
    SQZ_ASSERT_OK(sqz_chat_apply(format, tmpl, "<s>", "</s>", m, n, true, &out));
    return out;
}

static void test_smollm2(void **state) {
    (void)state;
    const char *path = sqz_test_smollm2();
    SQZ_SKIP_UNLESS(path);
    sqz_model *m = NULL;
    SQZ_ASSERT_OK(sqz_model_open(path, NULL, &m));
    const char *tmpl = m->vocab.chat_template;
    assert_non_null(tmpl);
    assert_string_equal(sqz_chat_detect(tmpl), "chatml");
    const sqz_chat_msg msgs[2] = {{"system", "You are terse."}, {"user", "What is the capital of France?"}};
    const char *bos = m->vocab.tokens[m->vocab.bos], *eos = m->vocab.tokens[m->vocab.eos];
    char *got = NULL, *want = read_golden("smollm2_user.txt");
    SQZ_ASSERT_OK(sqz_chat_apply(NULL, tmpl, bos, eos, msgs + 1, 1, true, &got));
    assert_string_equal(got, want);
    free(got);
    free(want);
    want = read_golden("smollm2_system_user.txt");
    SQZ_ASSERT_OK(sqz_chat_apply(NULL, tmpl, bos, eos, msgs, 2, true, &got));
    assert_string_equal(got, want);
    free(got);
    free(want);
    sqz_model_free(m);
}

static void test_rows(void **state) {
    (void)state;
    const sqz_chat_msg u[2] = {{"system", "Be brief."}, {"user", " Hi "}};
    /* markers pick the row; the BOS text only where the template writes bos_token */
    assert_string_equal(sqz_chat_detect("{{ '<|im_start|>' + m + '<|im_end|>' }}"), "chatml");
    assert_string_equal(sqz_chat_detect("{{ bos_token }}<|start_header_id|>x<|end_header_id|><|eot_id|>"), "llama3");
    assert_string_equal(sqz_chat_detect("<start_of_turn>x<end_of_turn>"), "gemma");
    assert_string_equal(sqz_chat_detect("<|user|> <|assistant|> <|end|>"), "phi3");
    assert_string_equal(sqz_chat_detect("'[INST] ' + content + ' [/INST]' <<SYS>>"), "llama2");
    assert_string_equal(sqz_chat_detect("\"[INST]\" + content + \"[/INST]\""), "mistral");
    char *s = render(NULL, "{{ bos_token }}<|start_header_id|>x<|end_header_id|><|eot_id|>", u, 2);
    assert_string_equal(s, "<s><|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
                           "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
                           "<|start_header_id|>assistant<|end_header_id|>\n\n");
    free(s);
    s = render("chatml", NULL, u + 1, 1); /* a format without a template: no default system, no BOS */
    assert_string_equal(s, "<|im_start|>user\n Hi <|im_end|>\n<|im_start|>assistant\n");
    free(s);
    s = render("gemma", "{{ bos_token }}<start_of_turn>", u, 2); /* Gemma 3: system before the first turn */
    assert_string_equal(s, "<s><start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n<start_of_turn>model\n");
    free(s);
    s = render("llama2", NULL, u, 2); /* Meta's reference format: the system block inside the first [INST] */
    assert_string_equal(s, "<s>[INST] <<SYS>>\nBe brief.\n<</SYS>>\n\n Hi [/INST]");
    free(s);
    /* a ChatML default system message, the newline escaped as Jinja source writes it */
    s = render(NULL, "{{- '<|im_start|>system\\nYou are Q.<|im_end|>\\n' }}{{ '<|im_start|>' + r }}", u + 1, 1);
    assert_string_equal(s, "<|im_start|>system\nYou are Q.<|im_end|>\n<|im_start|>user\n Hi <|im_end|>\n"
                           "<|im_start|>assistant\n");
    free(s);
}

static void test_refusals(void **state) {
    (void)state;
    const sqz_chat_msg u[3] = {{"user", "a"}, {"system", "b"}, {"tool", "c"}};
    char *s = (char *)1;
    assert_null(sqz_chat_detect("{{ messages }}"));
    assert_null(sqz_chat_detect("<|im_start|>{{ strftime_now('%d') }}<|im_end|>")); /* a date at render time */
    assert_int_equal(sqz_chat_apply(NULL, "{{ messages }}", "", "", u, 1, true, &s), SQZ_ERR_INVALID_ARG);
    assert_null(s);
    assert_non_null(strstr(sqz_last_error(), "not one sqz renders"));
    assert_non_null(strstr(sqz_last_error(), "chatml|"));
    assert_int_equal(sqz_chat_apply(NULL, NULL, "", "", u, 1, true, &s), SQZ_ERR_INVALID_ARG);
    assert_non_null(strstr(sqz_last_error(), "no chat template"));
    assert_int_equal(sqz_chat_apply("vicuna", NULL, "", "", u, 1, true, &s), SQZ_ERR_INVALID_ARG);
    assert_non_null(strstr(sqz_last_error(), "'vicuna'"));
    assert_false(sqz_chat_format_known("vicuna"));
    assert_true(sqz_chat_format_known("llama3.1"));
    assert_int_equal(sqz_chat_apply("chatml", NULL, "", "", u, 2, true, &s), SQZ_ERR_INVALID_ARG);
    assert_non_null(strstr(sqz_last_error(), "only comes first"));
    const sqz_chat_msg t[2] = {{"user", "a"}, {"tool", "c"}};
    assert_int_equal(sqz_chat_apply("chatml", NULL, "", "", t, 2, true, &s), SQZ_ERR_INVALID_ARG);
    assert_non_null(strstr(sqz_last_error(), "'tool'"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_smollm2),
        cmocka_unit_test(test_rows),
        cmocka_unit_test(test_refusals),
    };
    return sqz_test_run(tests, NULL, NULL);
}

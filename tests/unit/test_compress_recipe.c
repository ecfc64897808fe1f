/* tests/unit/test_compress_recipe.c - the pass table, recipes and the pipeline API
 * (compress/passes.c, recipe.c, pipeline.c): table invariants, stage parsing and its errors,
 * JSON recipes (both forms) and their round trip, and sqz_compress_run on stories260K
 * (drop a block then quantize, against the same stages done by hand). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compress/pass.h"
#include "test_util.h"

static void test_table(void **state) {
    (void)state;
    int n = 0, nm = 0;
    const sqz_pass *const *p = sqz_passes(&n);
    assert_true(n >= 2);
    for (int i = 0; i < n; i++) {
        assert_non_null(p[i]->name);
        assert_non_null(p[i]->summary);
        assert_true(p[i]->n_opts > 0 && p[i]->opts && p[i]->args_size > 0);
        assert_true(p[i]->model_step || p[i]->run_block);
        assert_ptr_equal(sqz_pass_find(p[i]->name), p[i]);
        char *h = sqz_opts_help_spec(p[i]->opts, p[i]->n_opts, 2);
        assert_non_null(h);
        for (int k = 0; k < p[i]->n_opts; k++) assert_non_null(strstr(h, p[i]->opts[k].name));
        free(h);
    }
    assert_null(sqz_pass_find("prun"));
    /* the quant pass's method choices are the method table's names */
    const sqz_pass *q = sqz_pass_find("quant");
    const sqz_opt *mo = sqz_opts_find(q->opts, q->n_opts, "method");
    const sqz_qmethod *m = sqz_qmethods(&nm);
    for (int i = 0; i < nm; i++) assert_non_null(strstr(mo->choices, m[i].name));
}

static void test_stages(void **state) {
    (void)state;
    sqz_recipe r = {0};
    SQZ_ASSERT_OK(sqz_recipe_add(&r, "drop-layers", "3,1-2"));
    SQZ_ASSERT_OK(sqz_recipe_add(&r, "quant", "int4:gptq:g64:damp=0.02"));
    assert_int_equal(r.n, 2);
    static const struct { const char *pass, *spec, *names; } bad[] = {
        {"prun", "x", "'prun'"},            {"drop-layers", "", "empty"},
        {"prune", "x", "'x'"},             {"prune", "heads=1", "'heads=1'"},
        {"drop-layers", "1,,2", "empty"},   {"drop-layers", "a", "'a'"},
        {"drop-layers", "3-1", "'3-1'"},    {"drop-layers", "2,2", "twice"},
        {"drop-layers", "-1", "'-1'"},      {"quant", "int4:g96", "'g96'"},
        {"quant", "q4_0:gptq:gptq", "twice"}, {"quant", "damp=0.1", "format"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(sqz_recipe_add(&r, bad[i].pass, bad[i].spec), SQZ_ERR_INVALID_ARG);
        if (!strstr(sqz_last_error(), bad[i].names))
            fail_msg("--%s '%s': '%s' does not name %s", bad[i].pass, bad[i].spec, sqz_last_error(), bad[i].names);
        assert_int_equal(r.n, 2); /* unchanged */
    }
    sqz_recipe_free(&r);
}

static const char *write_tmp(const char *name, const char *text) {
    static char path[8][512];
    static int k;
    char *p = path[k++ % 8];
    snprintf(p, 512, "%s/%s", sqz_test_tmpdir(), name);
    FILE *f = fopen(p, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    return p;
}

static void test_json(void **state) {
    (void)state;
    sqz_recipe a = {0}, b = {0}, c = {0};
    SQZ_ASSERT_OK(sqz_recipe_load(&a, write_tmp("a.json", "{\"sqz_recipe\": 1, \"stages\": [{\"drop-layers\": \"2\"}, "
                                                         "{\"quant\": \"int4:gptq:g64:damp=0.02\"}]}")));
    SQZ_ASSERT_OK(sqz_recipe_load(&b, write_tmp("b.json", "{\"stages\": [{\"drop-layers\": 2}, {\"quant\": {\"format\": "
                                                         "\"int4\", \"method\": \"gptq\", \"group\": \"g64\", "
                                                         "\"damp\": 0.02}}]}")));
    assert_int_equal(a.n, 2);
    assert_int_equal(b.n, 2);
    for (int i = 0; i < 2; i++) assert_ptr_equal(a.stages[i].pass, b.stages[i].pass);
    assert_memory_equal(a.stages[0].args, b.stages[0].args, a.stages[0].pass->args_size);
    /* the object form is the SPEC "int4:method=gptq:group=g64:damp=0.02": the same quantization */
    assert_string_equal(b.stages[1].spec, "int4:method=gptq:group=g64:damp=0.02");
    sqz_compress_spec sa, sb;
    SQZ_ASSERT_OK(sqz_compress_spec_parse(a.stages[1].spec, &sa));
    SQZ_ASSERT_OK(sqz_compress_spec_parse(b.stages[1].spec, &sb));
    assert_ptr_equal(sa.method, sb.method);
    assert_memory_equal(&sa.q, &sb.q, sizeof sa.q);
    /* JSON out and back in: the same stages */
    char *j = sqz_recipe_json(&a);
    assert_non_null(j);
    SQZ_ASSERT_OK(sqz_recipe_load(&c, write_tmp("c.json", j)));
    free(j);
    assert_int_equal(c.n, 2);
    for (int i = 0; i < 2; i++) {
        assert_string_equal(a.stages[i].spec, c.stages[i].spec);
        assert_memory_equal(a.stages[i].args, c.stages[i].args, a.stages[i].pass->args_size);
    }
    static const struct { const char *text, *names; } bad[] = {
        {"[", "not valid JSON"},
        {"{\"stages\": {}}", "stages"},
        {"{\"sqz_recipe\": 2, \"stages\": [{\"quant\": \"int8\"}]}", "version"},
        {"{\"sqz_recipe\": 1, \"stages\": []}", "no stages"},
        {"{\"stages\": [{\"quant\": \"int8\"}], \"extra\": 1}", "'extra'"},
        {"{\"stages\": [{\"quant\": \"int8\", \"drop-layers\": \"1\"}]}", "one key"},
        {"{\"stages\": [{\"quant\": {\"format\": \"q4_0\", \"frob\": 1}}]}", "'frob'"},
        {"{\"stages\": [{\"quant\": [1]}]}", "SPEC string or an object"},
        {"{\"stages\": [{\"quant\": \"int8\"}, {\"quant\": \"int4:g96\"}]}", "stage 1"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const int n0 = c.n;
        assert_int_not_equal(sqz_recipe_load(&c, write_tmp("bad.json", bad[i].text)), SQZ_OK);
        if (!strstr(sqz_last_error(), bad[i].names) || !strstr(sqz_last_error(), "bad.json"))
            fail_msg("recipe %s: '%s' does not name the file and %s", bad[i].text, sqz_last_error(), bad[i].names);
        assert_int_equal(c.n, n0); /* unchanged on failure */
    }
    sqz_recipe_free(&a);
    sqz_recipe_free(&b);
    sqz_recipe_free(&c);
}

/* The tensors of a and b are value-equal (float views). */
static void assert_models_equal(const sqz_model *a, const sqz_model *b) {
    assert_int_equal(a->n_tensors, b->n_tensors);
    assert_int_equal(a->hp.n_layers, b->hp.n_layers);
    for (int64_t i = 0; i < a->n_tensors; i++) {
        const sqz_tensor *x = &a->tensors[i], *y = sqz_model_get(b, x->role, x->layer, x->param);
        assert_non_null(y);
        assert_int_equal(x->dtype, y->dtype);
        assert_int_equal(x->nbytes, y->nbytes);
        assert_memory_equal(x->data, y->data, x->nbytes);
    }
}

static void test_run(void **state) {
    (void)state;
    const char *path = sqz_test_data("models/stories260K/stories260K.bin");
    SQZ_SKIP_UNLESS(path);
    sqz_model *m = NULL, *ref = NULL;
    SQZ_ASSERT_OK(sqz_model_open(path, NULL, &m));
    SQZ_ASSERT_OK(sqz_model_open(path, NULL, &ref));
    sqz_recipe r = {0};
    SQZ_ASSERT_OK(sqz_recipe_add(&r, "drop-layers", "1,3"));
    SQZ_ASSERT_OK(sqz_recipe_add(&r, "quant", "q8_0:pure"));
    sqz_compress_opts o = sqz_compress_default_opts();
    sqz_compress_env env = {.session_opts = sqz_session_default_opts()};
    sqz_compress_report rep;
    SQZ_ASSERT_OK(sqz_compress_run(m, &r, &env, &o, &rep));
    assert_int_equal(rep.n_stages, 2);
    assert_int_equal(rep.n_layers_before, 5);
    assert_int_equal(rep.n_layers_after, 3);
    assert_non_null(strstr(rep.stages[0].note, "1, 3"));
    assert_string_equal(rep.spec, "q8_0:pure");
    assert_true(rep.params_after < rep.params);
    /* the same by hand: remove the blocks, quantize with the one-stage API */
    const int32_t drop[] = {1, 3};
    SQZ_ASSERT_OK(sqz_model_remove_layers(ref, drop, 2));
    sqz_compress_report rep2;
    SQZ_ASSERT_OK(sqz_compress_spec_parse("q8_0:pure", &o.spec));
    SQZ_ASSERT_OK(sqz_compress_model(ref, NULL, NULL, NULL, &o, &rep2));
    assert_models_equal(m, ref);
    sqz_compress_report_free(&rep2);
    sqz_compress_report_free(&rep);
    /* a stage that needs statistics without any: refused, saying what to give */
    sqz_recipe g = {0};
    SQZ_ASSERT_OK(sqz_recipe_add(&g, "quant", "q4_0:gptq:pure"));
    assert_int_equal(sqz_compress_run(m, &g, &env, &o, &rep), SQZ_ERR_INVALID_ARG);
    assert_non_null(strstr(sqz_last_error(), "--calib"));
    sqz_compress_report_free(&rep);
    sqz_recipe_free(&g);
    sqz_recipe_free(&r);
    sqz_model_free(m);
    sqz_model_free(ref);
}

/* --keep-float parsed once: the grammar, the model check (an item naming nothing is an error naming
 * it), matching; a library caller's typo fails the run instead of keeping nothing float. */
static void test_keep_float(void **state) {
    (void)state;
    const char *path = sqz_test_data("models/stories260K/stories260K.bin");
    SQZ_SKIP_UNLESS(path);
    sqz_model *m = NULL;
    SQZ_ASSERT_OK(sqz_model_open(path, NULL, &m));
    sqz_keep_float k;
    SQZ_ASSERT_OK(sqz_keep_float_parse("attn_v,blk.2,blk.4.ffn_down", m, &k));
    assert_int_equal(k.n, 3);
    int kept = 0;
    for (int64_t i = 0; i < m->n_tensors; i++) {
        const sqz_tensor *t = &m->tensors[i];
        const bool want = t->role == SQZ_ROLE_ATTN_V || t->layer == 2 || (t->layer == 4 && t->role == SQZ_ROLE_FFN_DOWN);
        assert_int_equal(sqz_keep_float_match(&k, t), want);
        kept += want;
    }
    assert_true(kept > 5);
    SQZ_ASSERT_OK(sqz_keep_float_parse(NULL, m, &k));
    assert_int_equal(k.n, 0);
    static const struct { const char *list, *names; } bad[] = {
        {"atn_v", "'atn_v' is not a role"}, {"blk.x", "'blk.x'"},       {"blk.-1", "'blk.-1'"},
        {"blk.2.frob", "'blk.2.frob'"},     {"attn_q,,attn_v", "''"},      {"blk.99", "'blk.99' names no tensor"},
        {"blk.5.attn_q", "'blk.5.attn_q' names no tensor"}, {"token_types", "'token_types' names no tensor"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(sqz_keep_float_parse(bad[i].list, m, &k), SQZ_ERR_INVALID_ARG);
        if (!strstr(sqz_last_error(), bad[i].names))
            fail_msg("--keep-float %s: '%s' does not name %s", bad[i].list, sqz_last_error(), bad[i].names);
    }
    /* the library path: sqz_compress_model refuses the typo before any work, the model unchanged */
    sqz_compress_opts o = sqz_compress_default_opts();
    o.keep_float = "blk.99";
    sqz_compress_report rep;
    const int64_t bytes = sqz_model_data_bytes(m);
    assert_int_equal(sqz_compress_model(m, NULL, NULL, NULL, &o, &rep), SQZ_ERR_INVALID_ARG);
    assert_non_null(strstr(sqz_last_error(), "blk.99"));
    assert_int_equal(sqz_model_data_bytes(m), bytes);
    sqz_compress_report_free(&rep);
    sqz_model_free(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table),
        cmocka_unit_test(test_stages),
        cmocka_unit_test(test_json),
        cmocka_unit_test(test_run),
        cmocka_unit_test(test_keep_float),
    };
    return sqz_test_run(tests, NULL, NULL);
}

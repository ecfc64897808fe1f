/* tests/unit/test_hf_config.c - HF config.json reading and writing, and HF tensor names. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "formats/formats_internal.h"
#include "test_util.h"

static sqz_status parse(const char *json, sqz_model **out) {
    sqz_model *m = sqz_model_new();
    assert_non_null(m);
    sqz_status s = sqz__hf_config_read(json, strlen(json), "dir/config.json", m);
    *out = m;
    return s;
}

#define LLAMA_BASE                                                                                     \
    "\"hidden_size\": 128, \"num_hidden_layers\": 2, \"num_attention_heads\": 8, "                     \
    "\"intermediate_size\": 384, \"vocab_size\": 2048"

static void test_llama_defaults(void **state) {
    (void)state;
    sqz_model *m;
    SQZ_ASSERT_OK(parse("{\"model_type\": \"llama\", " LLAMA_BASE "}", &m));
    assert_string_equal(m->hp.arch, "llama");
    assert_int_equal(m->hp.family, SQZ_FAMILY_LLAMA);
    assert_int_equal(m->hp.n_kv_heads, 8); /* defaults to the head count */
    assert_int_equal(m->hp.head_dim, 16);
    assert_int_equal(m->hp.ctx_len, 2048);
    assert_true(m->hp.rope_theta == 10000.0f);
    assert_true(m->hp.norm_eps == 1e-6f);
    assert_int_equal(m->hp.rope_layout, SQZ_ROPE_HALF);
    assert_int_equal(m->hp.act, SQZ_ACT_SILU);
    assert_false(m->hp.tied_embeddings); /* LlamaConfig's default */
    assert_false(m->hp.attn_bias);
    assert_int_equal(m->vocab.bos, -1);
    assert_non_null(m->layers);
    assert_int_equal(m->layers[1].d_ff, 384);
    assert_int_equal(m->layers[1].n_kv_heads, 8);
    sqz_model_free(m);
}

static void test_archs(void **state) {
    (void)state;
    sqz_model *m;
    SQZ_ASSERT_OK(parse("{\"model_type\": \"qwen2\", " LLAMA_BASE ", \"num_key_value_heads\": 2, "
                        "\"rope_theta\": 1000000.0, \"tie_word_embeddings\": true, \"eos_token_id\": [7, 9]}", &m));
    assert_string_equal(m->hp.arch, "qwen2");
    assert_true(m->hp.attn_bias); /* qwen2's q/k/v always have biases */
    assert_true(m->hp.tied_embeddings);
    assert_int_equal(m->hp.n_kv_heads, 2);
    assert_true(m->hp.rope_theta == 1e6f);
    assert_int_equal(m->vocab.eos, 7);
    sqz_model_free(m);

    SQZ_ASSERT_OK(
        parse("{\"model_type\": \"mistral\", " LLAMA_BASE ", \"head_dim\": 32, \"sliding_window\": null}", &m));
    assert_string_equal(m->hp.arch, "mistral");
    assert_int_equal(m->hp.head_dim, 32);
    sqz_model_free(m);

    SQZ_ASSERT_OK(parse("{\"model_type\": \"smollm\", " LLAMA_BASE "}", &m));
    assert_string_equal(m->hp.arch, "llama");
    sqz_model_free(m);

    /* no model_type: the class name decides */
    SQZ_ASSERT_OK(parse("{\"architectures\": [\"LlamaForCausalLM\"], " LLAMA_BASE ", \"attention_bias\": true}", &m));
    assert_string_equal(m->hp.arch, "llama");
    assert_true(m->hp.attn_bias);
    sqz_model_free(m);

    SQZ_ASSERT_OK(parse("{\"model_type\": \"bert\", \"hidden_size\": 384, \"num_hidden_layers\": 6, "
                        "\"num_attention_heads\": 12, \"intermediate_size\": 1536, \"vocab_size\": 30522, "
                        "\"hidden_act\": \"gelu\", \"layer_norm_eps\": 1e-12, \"pad_token_id\": 0}", &m));
    assert_int_equal(m->hp.family, SQZ_FAMILY_BERT);
    assert_int_equal(m->hp.ctx_len, 512);
    assert_int_equal(m->hp.n_token_types, 2);
    assert_int_equal(m->hp.act, SQZ_ACT_GELU);
    assert_int_equal(m->hp.rope_layout, SQZ_ROPE_NONE);
    assert_true(m->hp.rope_theta == 0.0f);
    assert_true(m->hp.norm_eps == 1e-12f);
    assert_true(m->hp.attn_bias);
    assert_int_equal(m->vocab.pad, 0);
    sqz_model_free(m);
}

typedef struct bad_config {
    const char *json;
    sqz_status status;
    const char *reason;
} bad_config;

static const bad_config bad[] = {
    {"{\"model_type\": \"gpt_neox\", " LLAMA_BASE "}", SQZ_ERR_ARCH, "gpt_neox"},
    {"{\"architectures\": [\"FalconForCausalLM\"], " LLAMA_BASE "}", SQZ_ERR_ARCH, "FalconForCausalLM"},
    {"{" LLAMA_BASE "}", SQZ_ERR_ARCH, "model_type"},
    {"{\"model_type\": \"llama\", \"hidden_size\": 128}", SQZ_ERR_FORMAT, "num_hidden_layers"},
    {"{\"model_type\": \"llama\", " LLAMA_BASE ", \"num_key_value_heads\": 3}", SQZ_ERR_FORMAT, "not a multiple"},
    {"{\"model_type\": \"llama\", " LLAMA_BASE ", \"num_key_value_heads\": 16}", SQZ_ERR_FORMAT, "out of range"},
    {"{\"model_type\": \"llama\", \"hidden_size\": 100, \"num_hidden_layers\": 2, \"num_attention_heads\": 8, "
     "\"intermediate_size\": 384, \"vocab_size\": 2048}", SQZ_ERR_FORMAT, "not a multiple"},
    {"{\"model_type\": \"llama\", \"hidden_size\": 1e15, \"num_hidden_layers\": 2, \"num_attention_heads\": 8, "
     "\"intermediate_size\": 384, \"vocab_size\": 2048}", SQZ_ERR_FORMAT, "out of range"},
    {"{\"model_type\": \"llama\", \"hidden_size\": -128, \"num_hidden_layers\": 2, \"num_attention_heads\": 8, "
     "\"intermediate_size\": 384, \"vocab_size\": 2048}", SQZ_ERR_FORMAT, "hidden_size"},
    {"{\"model_type\": \"llama\", \"hidden_size\": 128.5, \"num_hidden_layers\": 2, \"num_attention_heads\": 8, "
     "\"intermediate_size\": 384, \"vocab_size\": 2048}", SQZ_ERR_FORMAT, "integer"},
    {"{\"model_type\": \"llama\", \"hidden_size\": \"128\", \"num_hidden_layers\": 2, \"num_attention_heads\": 8, "
     "\"intermediate_size\": 384, \"vocab_size\": 2048}", SQZ_ERR_FORMAT, "integer"},
    /* a key given twice counts with its last value (Python's json) */
    {"{\"model_type\": \"llama\", " LLAMA_BASE ", \"num_hidden_layers\": 1000000}", SQZ_ERR_FORMAT, "out of range"},
    {"{\"model_type\": \"llama\", " LLAMA_BASE ", \"rms_norm_eps\": 0}", SQZ_ERR_FORMAT, "rms_norm_eps"},
    {"{\"model_type\": \"llama\", " LLAMA_BASE ", \"rope_theta\": -1}", SQZ_ERR_FORMAT, "rope_theta"},
    {"{\"model_type\": \"llama\", " LLAMA_BASE ", \"tie_word_embeddings\": 1}", SQZ_ERR_FORMAT, "true or false"},
    {"{\"model_type\": \"llama\", " LLAMA_BASE ", \"hidden_act\": \"relu2\"}", SQZ_ERR_UNSUPPORTED, "relu2"},
    {"{\"model_type\": \"llama\", " LLAMA_BASE ", \"rope_scaling\": {\"rope_type\": \"yarn\"}}", SQZ_ERR_UNSUPPORTED,
     "yarn"},
    {"{\"model_type\": \"llama\", " LLAMA_BASE ", \"rope_scaling\": {\"rope_type\": \"llama3\"}}", SQZ_ERR_FORMAT,
     "needs \"factor\""},
    {"{\"model_type\": \"llama\", " LLAMA_BASE ", \"head_dim\": 15}", SQZ_ERR_FORMAT, "odd"},
    {"{\"model_type\": \"bert\", " LLAMA_BASE ", \"num_key_value_heads\": 4}", SQZ_ERR_FORMAT, "grouped-query"},
    {"{\"model_type\": \"bert\", " LLAMA_BASE ", \"position_embedding_type\": \"relative_key\"}",
     SQZ_ERR_UNSUPPORTED, "relative_key"},
    {"{\"model_type\": \"llama\", " LLAMA_BASE, SQZ_ERR_FORMAT, "not valid JSON"},
    {"{\"model_type\": \"llama\", " LLAMA_BASE "} {}", SQZ_ERR_FORMAT, "trailing"},
    {"[1, 2]", SQZ_ERR_FORMAT, "not a JSON object"},
    {"", SQZ_ERR_FORMAT, "not valid JSON"},
};

static void test_bad_configs(void **state) {
    (void)state;
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        sqz_model *m;
        sqz_status s = parse(bad[i].json, &m);
        if (s != bad[i].status)
            fail_msg("case %zu: %s, expected %s (%s)", i, sqz_status_name(s), sqz_status_name(bad[i].status),
                     sqz_last_error());
        if (!strstr(sqz_last_error(), "dir/config.json") || !strstr(sqz_last_error(), bad[i].reason))
            fail_msg("case %zu: \"%s\" should name the file and say \"%s\"", i, sqz_last_error(), bad[i].reason);
        sqz_model_free(m);
    }
}

/* write -> read gives the same hyperparameters, for each architecture */
static void test_write_roundtrip(void **state) {
    (void)state;
    const char *srcs[] = {
        ("{\"model_type\": \"llama\", " LLAMA_BASE ", \"num_key_value_heads\": 4, \"rms_norm_eps\": 1e-5, "
         "\"tie_word_embeddings\": true, \"bos_token_id\": 1, \"eos_token_id\": 2, \"max_position_embeddings\": 512}"),
        "{\"model_type\": \"qwen2\", " LLAMA_BASE ", \"num_key_value_heads\": 2, \"rope_theta\": 1000000.0}",
        "{\"model_type\": \"mistral\", " LLAMA_BASE ", \"head_dim\": 32}",
        ("{\"model_type\": \"bert\", \"hidden_size\": 384, \"num_hidden_layers\": 6, \"num_attention_heads\": 12, "
         "\"intermediate_size\": 1536, \"vocab_size\": 30522, \"layer_norm_eps\": 1e-12, \"type_vocab_size\": 2}"),
    };
    const char *classes[] = {"LlamaForCausalLM", "Qwen2ForCausalLM", "MistralForCausalLM", "BertModel"};
    for (size_t i = 0; i < sizeof srcs / sizeof *srcs; i++) {
        sqz_model *a, *b;
        SQZ_ASSERT_OK(parse(srcs[i], &a));
        char *text = sqz__hf_config_write_dtype(a, SQZ_DTYPE_BF16);
        if (!text) fail_msg("%s", sqz_last_error());
        SQZ_ASSERT_OK(parse(text, &b));
        assert_string_equal(a->hp.arch, b->hp.arch);
        const int64_t ia[] = {a->hp.family, a->hp.n_layers, a->hp.d_model, a->hp.n_heads, a->hp.n_kv_heads,
                              a->hp.head_dim, a->hp.d_ff, a->hp.vocab_size, a->hp.ctx_len, a->hp.n_token_types,
                              a->hp.rope_layout, a->hp.act, a->hp.tied_embeddings, a->hp.attn_bias};
        const int64_t ib[] = {b->hp.family, b->hp.n_layers, b->hp.d_model, b->hp.n_heads, b->hp.n_kv_heads,
                              b->hp.head_dim, b->hp.d_ff, b->hp.vocab_size, b->hp.ctx_len, b->hp.n_token_types,
                              b->hp.rope_layout, b->hp.act, b->hp.tied_embeddings, b->hp.attn_bias};
        for (size_t k = 0; k < sizeof ia / sizeof *ia; k++) assert_int_equal(ia[k], ib[k]);
        assert_true(a->hp.norm_eps == b->hp.norm_eps);
        assert_true(a->hp.rope_theta == b->hp.rope_theta);
        assert_int_equal(a->vocab.bos, b->vocab.bos);
        assert_int_equal(a->vocab.eos, b->vocab.eos);
        cJSON *j = cJSON_Parse(text);
        assert_non_null(j);
        assert_string_equal(cJSON_GetArrayItem(cJSON_GetObjectItem(j, "architectures"), 0)->valuestring, classes[i]);
        assert_string_equal(cJSON_GetObjectItem(j, "torch_dtype")->valuestring, "bfloat16");
        /* floats are written in their shortest form */
        const char *eps_key = i == 3 ? "\"layer_norm_eps\"" : "\"rms_norm_eps\"";
        const char *eps = strstr(text, eps_key);
        assert_non_null(eps);
        const char *v = eps + strlen(eps_key);
        assert_true(strncmp(v, ":\t1e-", 5) == 0 || strncmp(v, ": 1e-", 5) == 0);
        cJSON_Delete(j);
        free(text);
        sqz_model_free(a);
        sqz_model_free(b);
    }
}

static void test_write_refuses(void **state) {
    (void)state;
    sqz_model *m;
    SQZ_ASSERT_OK(parse("{\"model_type\": \"llama\", " LLAMA_BASE "}", &m));
    m->layers[1].d_ff = 100;
    assert_null(sqz__hf_config_write(m));
    assert_non_null(strstr(sqz_last_error(), "per-layer"));
    m->layers[1].d_ff = 384;
    /* a uniform pruning is written as the new width */
    m->layers[0].n_heads = m->layers[1].n_heads = 4;
    char *text = sqz__hf_config_write(m);
    assert_non_null(text);
    assert_non_null(strstr(text, "\"num_attention_heads\":\t4"));
    free(text);
    sqz_model_free(m);
}

/* ---- names ---- */

static void test_names(void **state) {
    (void)state;
    sqz_role r;
    int32_t l;
    sqz_param p;
    assert_int_equal(sqz__hf_name_parse(SQZ_FAMILY_LLAMA, "model.layers.17.self_attn.k_proj.bias", &r, &l, &p),
                     SQZ__HF_TENSOR);
    assert_int_equal(r, SQZ_ROLE_ATTN_K);
    assert_int_equal(l, 17);
    assert_int_equal(p, SQZ_PARAM_BIAS);
    assert_int_equal(sqz__hf_name_parse(SQZ_FAMILY_LLAMA, "lm_head.weight", &r, &l, &p), SQZ__HF_TENSOR);
    assert_int_equal(r, SQZ_ROLE_OUTPUT);
    assert_int_equal(l, -1);
    assert_int_equal(sqz__hf_name_parse(SQZ_FAMILY_LLAMA, "model.layers.0.self_attn.rotary_emb.inv_freq", &r, &l, &p),
                     SQZ__HF_IGNORED);
    assert_int_equal(sqz__hf_name_parse(SQZ_FAMILY_BERT, "embeddings.position_ids", &r, &l, &p), SQZ__HF_IGNORED);
    assert_int_equal(sqz__hf_name_parse(SQZ_FAMILY_BERT, "bert.encoder.layer.3.output.LayerNorm.bias", &r, &l, &p),
                     SQZ__HF_TENSOR);
    assert_int_equal(r, SQZ_ROLE_LAYER_OUT_NORM);
    assert_int_equal(l, 3);
    assert_int_equal(p, SQZ_PARAM_BIAS);
    assert_int_equal(sqz__hf_name_parse(SQZ_FAMILY_BERT, "embeddings.LayerNorm.gamma", &r, &l, &p), SQZ__HF_TENSOR);
    assert_int_equal(r, SQZ_ROLE_EMBD_NORM);
    assert_int_equal(p, SQZ_PARAM_WEIGHT);
    const char *unknown[] = {
        "model.layers.01.mlp.up_proj.weight", "model.layers.-1.mlp.up_proj.weight",
        "model.layers.1234567.mlp.up_proj.weight", "model.layers.1.mlp.up_proj", "model.layers.1.mlp.up_proj.scale",
        "model.layers..mlp.up_proj.weight", "model.layers.1.mlp.up_proj.weight.x", "lm_head.gamma",
        "model.embed_tokens.weight.", "", ".", "weight", "model.layers.3",
        "encoder.layer.0.attention.self.query.weight",
    };
    for (size_t i = 0; i < sizeof unknown / sizeof *unknown; i++) {
        if (sqz__hf_name_parse(SQZ_FAMILY_LLAMA, unknown[i], &r, &l, &p) != SQZ__HF_UNKNOWN)
            fail_msg("'%s' should be unknown", unknown[i]);
    }
    assert_int_equal(sqz__hf_name_parse(SQZ_FAMILY_BERT, "cls.predictions.bias", &r, &l, &p), SQZ__HF_UNKNOWN);
    assert_int_equal(sqz__hf_name_parse(SQZ_FAMILY_BERT, "model.layers.0.mlp.up_proj.weight", &r, &l, &p),
                     SQZ__HF_UNKNOWN);

    /* every role a family names survives make -> parse */
    for (int f = 0; f <= SQZ_FAMILY_BERT; f++) {
        int made = 0;
        for (int role = 0; role < SQZ_ROLE_COUNT; role++) {
            for (int param = 0; param < 2; param++) {
                int32_t layer = sqz_role_per_layer((sqz_role)role) ? 11 : -1;
                char buf[128];
                if (!sqz__hf_name_make((sqz_family)f, (sqz_role)role, layer, (sqz_param)param, buf, sizeof buf))
                    continue;
                made++;
                assert_int_equal(sqz__hf_name_parse((sqz_family)f, buf, &r, &l, &p), SQZ__HF_TENSOR);
                assert_int_equal(r, role);
                assert_int_equal(l, layer);
                assert_int_equal(p, param);
                /* too small a buffer fails cleanly */
                assert_false(sqz__hf_name_make((sqz_family)f, (sqz_role)role, layer, (sqz_param)param, buf, 8));
            }
        }
        assert_int_equal(made, f == SQZ_FAMILY_LLAMA ? 24 : 26);
    }
    char buf[64];
    assert_true(sqz__hf_name_make(SQZ_FAMILY_LLAMA, SQZ_ROLE_FFN_DOWN, 3, SQZ_PARAM_WEIGHT, buf, sizeof buf));
    assert_string_equal(buf, "model.layers.3.mlp.down_proj.weight");
    assert_true(sqz__hf_name_make(SQZ_FAMILY_BERT, SQZ_ROLE_ATTN_OUT_NORM, 0, SQZ_PARAM_BIAS, buf, sizeof buf));
    assert_string_equal(buf, "encoder.layer.0.attention.output.LayerNorm.bias");
    assert_false(sqz__hf_name_make(SQZ_FAMILY_BERT, SQZ_ROLE_FFN_GATE, 0, SQZ_PARAM_WEIGHT, buf, sizeof buf));
    assert_false(sqz__hf_name_make(SQZ_FAMILY_LLAMA, SQZ_ROLE_ATTN_Q, -1, SQZ_PARAM_WEIGHT, buf, sizeof buf));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_llama_defaults),
        cmocka_unit_test(test_archs),
        cmocka_unit_test(test_bad_configs),
        cmocka_unit_test(test_write_roundtrip),
        cmocka_unit_test(test_write_refuses),
        cmocka_unit_test(test_names),
    };
    return sqz_test_run(tests, NULL, NULL);
}

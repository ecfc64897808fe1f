/* tests/unit/test_family.c - families are table rows (core/family.c, runtime/family_ops.c):
 *   the built-in rows are complete and name their family;
 *   a family defined here, by a row registered in the family table and a runtime row whose
 *   passes count their calls around llama's, is what sqz_model_validate and the runtime read:
 *   stories260K relabelled as that family validates by the row's layer roles (and fails when
 *   the row asks for a role it lacks), runs through the row's passes (one embed, a block per
 *   layer, one head) with llama's logits bit for bit, lets position 0 see a later token only
 *   when the row is not causal,
 *   is refused by sqz_forward when the row says it has no classifier head, and is costed by
 *   sqz_forward_flops from the row (gated FFN, causal).
 * The test family is not a real architecture: it shows that adding a row is all the core and
 * the runtime need, not that another checkpoint format is read. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/runtime_internal.h"
#include "test_util.h"

static const char *stories(void) { return sqz_test_data("models/stories260K/stories260K.bin"); }

/* ---- the test family ---- */

static sqz_family_info row;   /* llama's row with its own name; cases change fields and restore them */
static sqz_family fam_id;
static int n_embed, n_block, n_head;

static sqz_status count_embed(sqz_session *s, const int32_t *tok, const int32_t *types, int64_t n, int64_t pos,
                              float *x) {
    n_embed++;
    return sqz__family_ops_get(SQZ_FAMILY_LLAMA)->embed(s, tok, types, n, pos, x);
}
static sqz_status count_block(sqz_session *s, int32_t layer, float *x, int64_t n, int64_t pos) {
    n_block++;
    return sqz__family_ops_get(SQZ_FAMILY_LLAMA)->block(s, layer, x, n, pos);
}
static sqz_status count_head(sqz_session *s, const float *x, int64_t n, int64_t from, float *logits) {
    n_head++;
    return sqz__family_ops_get(SQZ_FAMILY_LLAMA)->head(s, x, n, from, logits);
}
static const sqz__family_ops test_ops = {count_embed, count_block, count_head};

static int setup(void **state) {
    (void)state;
    row = *sqz_family_get(SQZ_FAMILY_LLAMA);
    row.name = "llama-test";
    return sqz__family_ops_register(&row, &test_ops, &fam_id) == SQZ_OK ? 0 : -1;
}

static void reset_row(void) {
    const sqz_family f = row.family;
    row = *sqz_family_get(SQZ_FAMILY_LLAMA);
    row.family = f;
    row.name = "llama-test";
}

static sqz_model *open_as_test_family(void) {
    sqz_model *m = NULL;
    SQZ_ASSERT_OK(sqz_model_open(stories(), NULL, &m));
    m->hp.family = fam_id;
    return m;
}

/* logits (n, vocab) of ids through a new session of m */
static float *forward(const sqz_model *m, const int32_t *ids, int64_t n) {
    sqz_session_opts o = sqz_session_default_opts();
    o.max_tokens = 64;
    sqz_session *s = NULL;
    SQZ_ASSERT_OK(sqz_session_new(m, &o, &s));
    float *logits = malloc((size_t)(n * m->hp.vocab_size) * sizeof(float));
    assert_non_null(logits);
    SQZ_ASSERT_OK(sqz_forward(s, ids, n, 0, 0, logits));
    sqz_session_free(s);
    return logits;
}

static const int32_t ids[] = {1, 403, 407, 261, 378, 429, 370, 261, 406, 282, 416, 261};
#define N_IDS ((int64_t)(sizeof ids / sizeof *ids))

/* ---- cases ---- */

static void test_builtin_rows(void **state) {
    (void)state;
    static const char *names[SQZ_FAMILY_COUNT] = {[SQZ_FAMILY_LLAMA] = "llama", [SQZ_FAMILY_BERT] = "bert",
                                                  [SQZ_FAMILY_QWEN3] = "qwen3", [SQZ_FAMILY_GEMMA3] = "gemma3",
                                                  [SQZ_FAMILY_PHI3] = "phi3", [SQZ_FAMILY_QWEN3MOE] = "qwen3moe",
                                                  [SQZ_FAMILY_MIXTRAL] = "mixtral"};
    for (int f = 0; f < SQZ_FAMILY_COUNT; f++) {
        const sqz_family_info *fi = sqz_family_get((sqz_family)f);
        assert_non_null(fi);
        assert_int_equal(fi->family, f);
        assert_string_equal(fi->name, names[f]);
        assert_string_equal(sqz_family_name((sqz_family)f), names[f]);
        assert_true(fi->n_layer_roles > 0 && fi->layer_roles);
        assert_true(fi->eval_ctx > 0);
        const sqz__family_ops *ops = sqz__family_ops_get((sqz_family)f);
        assert_non_null(ops);
        assert_true(ops->embed && ops->block);
        assert_true(!fi->lm_head == !ops->head); /* a head exactly for decoders */
    }
    assert_true(sqz_family_get(SQZ_FAMILY_LLAMA)->prune_channels);
    assert_false(sqz_family_get(SQZ_FAMILY_BERT)->prune_channels);
    assert_true(sqz_family_get(SQZ_FAMILY_MIXTRAL)->experts && sqz_family_get(SQZ_FAMILY_QWEN3MOE)->experts);
    assert_false(sqz_family_get(SQZ_FAMILY_QWEN3)->experts);
    assert_null(sqz_family_get((sqz_family)99));
    assert_string_equal(sqz_family_name((sqz_family)99), "unknown");
    assert_string_equal(sqz_family_name(fam_id), "llama-test");
}

static void test_validate_reads_row(void **state) {
    (void)state;
    SQZ_SKIP_UNLESS(stories());
    reset_row();
    sqz_model *m = open_as_test_family();
    SQZ_ASSERT_OK(sqz_model_validate(m));
    static const sqz_role more[] = {SQZ_ROLE_ATTN_NORM, SQZ_ROLE_ATTN_OUT_NORM};
    row.layer_roles = more;
    row.n_layer_roles = 2;
    assert_int_equal(sqz_model_validate(m), SQZ_ERR_FORMAT);
    char want[96];
    snprintf(want, sizeof want, "layer 0 has no %s tensor", sqz_role_name(SQZ_ROLE_ATTN_OUT_NORM));
    assert_non_null(strstr(sqz_last_error(), want));
    reset_row();
    m->hp.family = (sqz_family)(SQZ_FAMILY_COUNT + 3); /* a slot nobody registered */
    assert_int_equal(sqz_model_validate(m), SQZ_ERR_ARCH);
    assert_non_null(strstr(sqz_last_error(), "has no row in the family table"));
    sqz_model_free(m);
}

static void test_runtime_runs_row(void **state) {
    (void)state;
    SQZ_SKIP_UNLESS(stories());
    reset_row();
    sqz_model *m = open_as_test_family();
    m->hp.family = SQZ_FAMILY_LLAMA;
    float *want = forward(m, ids, N_IDS);
    m->hp.family = fam_id;
    n_embed = n_block = n_head = 0;
    float *got = forward(m, ids, N_IDS);
    assert_int_equal(n_embed, 1);
    assert_int_equal(n_block, m->hp.n_layers);
    assert_int_equal(n_head, 1);
    assert_memory_equal(got, want, (size_t)(N_IDS * m->hp.vocab_size) * sizeof(float));
    free(got);

    /* Whether position 0 sees a later token is the row's causal flag. */
    int32_t other[N_IDS];
    memcpy(other, ids, sizeof other);
    other[N_IDS - 1] = 300;
    const size_t row0 = (size_t)m->hp.vocab_size * sizeof(float);
    for (int causal = 1; causal >= 0; causal--) {
        row.causal = causal;
        float *a = forward(m, ids, N_IDS), *b = forward(m, other, N_IDS);
        assert_int_equal(memcmp(a, b, row0) == 0, causal);
        free(a);
        free(b);
    }
    free(want);
    reset_row();
    sqz_model_free(m);
}

static void test_encoder_row(void **state) {
    (void)state;
    SQZ_SKIP_UNLESS(stories());
    reset_row();
    row.lm_head = false;
    sqz_model *m = open_as_test_family();
    sqz_session *s = NULL;
    SQZ_ASSERT_OK(sqz_session_new(m, NULL, &s));
    float *x = malloc((size_t)(N_IDS * m->hp.d_model) * sizeof(float));
    assert_non_null(x);
    assert_int_equal(sqz_forward(s, ids, N_IDS, 0, 0, x), SQZ_ERR_ARCH);
    assert_non_null(strstr(sqz_last_error(), "sqz_forward runs decoders"));
    n_block = n_head = 0;
    SQZ_ASSERT_OK(sqz_encode(s, ids, NULL, N_IDS, x));
    assert_int_equal(n_block, m->hp.n_layers);
    assert_int_equal(n_head, 0);
    free(x);
    sqz_session_free(s);
    sqz_model_free(m);
    reset_row();
}

static void test_flops_read_row(void **state) {
    (void)state;
    SQZ_SKIP_UNLESS(stories());
    reset_row();
    sqz_model *m = open_as_test_family();
    const double n = 32, base = sqz_forward_flops(m, 32, 1);
    m->hp.family = SQZ_FAMILY_LLAMA;
    assert_true(sqz_forward_flops(m, 32, 1) == base);
    m->hp.family = fam_id;
    double ffn = 0, att = 0;
    for (int64_t l = 0; l < m->hp.n_layers; l++) {
        ffn += 2 * n * (double)m->hp.d_model * (double)m->layers[l].d_ff;        /* one matrix fewer */
        att += 2 * 2 * (n * n - n * (n + 1) / 2) * (double)(m->layers[l].n_heads * m->hp.head_dim);
    }
    row.gated_ffn = false;
    assert_true(fabs(base - sqz_forward_flops(m, 32, 1) - ffn) <= 1e-9 * base);
    row.gated_ffn = true;
    row.causal = false;
    assert_true(fabs(sqz_forward_flops(m, 32, 1) - base - att) <= 1e-9 * base);
    reset_row();
    sqz_model_free(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_builtin_rows),
        cmocka_unit_test(test_validate_reads_row),
        cmocka_unit_test(test_runtime_runs_row),
        cmocka_unit_test(test_encoder_row),
        cmocka_unit_test(test_flops_read_row),
    };
    return sqz_test_run(tests, setup, NULL);
}

/* tests/unit/test_calib_compress.c - the sequential driver and compress on the real models.
 *   driver: the statistics of a block collected block by block equal those an observer sees
 *     during plain sqz_forward passes over the same windows (stories260K, no compression);
 *   compress int8 (RTN, no statistics): every block matrix is quantized as the policy says and
 *     the model's logits stay close to the original's;
 *   sequential GPTQ (q4_0): deterministic (two runs give identical bytes) and its per-layer
 *     output errors are below RTN's on the same calibration rows;
 *   AWQ with smoothing folded into the norms (llama) and into v / up rows (BERT, MHA), and kept
 *     as in_scale where no fold exists: the compressed model computes nearly the original
 *     function (int8 weights), which a wrong fold would not;
 *   statistics from a file give the same bytes as the same statistics in memory (imatrix). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sqz/calib.h"
#include "test_util.h"

enum { NW = 6, CTX = 64 };

static const char *stories(void) { return sqz_test_data("models/stories260K/stories260K.bin"); }

static sqz_calib_windows windows_for(const sqz_model *m, int64_t nw, int64_t ctx) {
    char *text;
    size_t len;
    SQZ_ASSERT_OK(sqz_read_file(sqz_test_data("data/wiki.test.raw"), (size_t)1 << 31, &text, &len));
    if (len > 200000) len = 200000;
    sqz_tokenizer *tok;
    SQZ_ASSERT_OK(sqz_tokenizer_new(&m->vocab, &tok));
    sqz_calib_windows w;
    SQZ_ASSERT_OK(sqz_calib_windows_make(tok, text, len, nw, ctx, 11, &w));
    sqz_tokenizer_free(tok);
    free(text);
    return w;
}

static sqz_session *session_for(const sqz_model *m, int64_t ctx) {
    sqz_session_opts o = sqz_session_default_opts();
    o.max_tokens = ctx;
    o.n_threads = 1;
    sqz_session *s;
    SQZ_ASSERT_OK(sqz_session_new(m, &o, &s));
    return s;
}

/* ---- driver vs plain forward passes ---- */

typedef struct keep_ctx {
    int32_t layer;
    sqz_calib_block b;
} keep_ctx;

static sqz_status keep_block(void *user, sqz_session *s, int32_t layer, const sqz_calib_block *st) {
    (void)s;
    keep_ctx *k = user;
    if (layer != k->layer) return SQZ_OK;
    /* copy what the test compares */
    k->b = *st;
    for (int i = 0; i < st->n_inputs; i++) {
        const int64_t n = st->in[i].st.n_in;
        float *x2 = malloc((size_t)n * sizeof(float));
        memcpy(x2, st->in[i].x2, (size_t)n * sizeof(float));
        memset(&k->b.in[i], 0, sizeof k->b.in[i]);
        k->b.in[i].roles = st->in[i].roles;
        k->b.in[i].st.n_in = n;
        k->b.in[i].st.n_tokens = st->in[i].st.n_tokens;
        k->b.in[i].x2 = x2;
        k->b.in[i].have = SQZ_QSTAT_X2;
    }
    return SQZ_OK;
}

static void test_driver_matches_forward(void **state) {
    (void)state;
    SQZ_SKIP_UNLESS(stories());
    sqz_model *m;
    SQZ_ASSERT_OK(sqz_model_open(stories(), NULL, &m));
    sqz_calib_windows w = windows_for(m, NW, CTX);
    sqz_session *s = session_for(m, CTX);
    keep_ctx k = {.layer = 3};
    sqz_calib_run_opts ro = {.observe = {.needs = SQZ_QSTAT_X2, .block_io = true}, .on_block = keep_block, .user = &k};
    SQZ_ASSERT_OK(sqz_calib_run(s, &w, &ro));
    /* the same windows through sqz_forward with an observer on block 3 */
    sqz_calib_observe_opts oo = {.needs = SQZ_QSTAT_X2, .block_io = true};
    sqz_calib_observer *ob;
    SQZ_ASSERT_OK(sqz_calib_observer_new(3, &oo, &ob));
    sqz_session_set_hook(s, sqz_calib_observer_hook, ob);
    for (int64_t i = 0; i < w.n_windows; i++) SQZ_ASSERT_OK(sqz_forward(s, w.tokens + i * CTX, CTX, 0, CTX, NULL));
    sqz_session_set_hook(s, NULL, NULL);
    sqz_calib_block ref;
    SQZ_ASSERT_OK(sqz_calib_observer_finish(ob, &ref));
    sqz_calib_observer_free(ob);
    assert_int_equal(k.b.n_inputs, 4);
    assert_int_equal(ref.n_inputs, 4);
    for (int i = 0; i < 4; i++) {
        assert_int_equal(k.b.in[i].roles, ref.in[i].roles);
        assert_int_equal(k.b.in[i].st.n_tokens, NW * CTX);
        for (int64_t j = 0; j < ref.in[i].st.n_in; j++)
            assert_float_equal(k.b.in[i].x2[j], ref.in[i].x2[j], 1e-5 * ref.in[i].x2[j] + 1e-12);
    }
    assert_float_equal(k.b.cos_mean, ref.cos_mean, 1e-6);
    assert_true(ref.cos_mean > 0 && ref.cos_mean < 1);
    sqz_calib_block_free(&k.b);
    sqz_calib_block_free(&ref);
    sqz_session_free(s);
    sqz_calib_windows_free(&w);
    sqz_model_free(m);
}

/* ---- compress ---- */

/* Relative L2 distance between the logits of two models on one window. */
static double logits_err(const sqz_model *a, const sqz_model *b, const int32_t *ids, int64_t n) {
    const int64_t v = a->hp.vocab_size;
    float *la = malloc((size_t)(n * v) * sizeof(float)), *lb = malloc((size_t)(n * v) * sizeof(float));
    sqz_session *sa = session_for(a, n), *sb = session_for(b, n);
    SQZ_ASSERT_OK(sqz_forward(sa, ids, n, 0, 0, la));
    SQZ_ASSERT_OK(sqz_forward(sb, ids, n, 0, 0, lb));
    double num = 0, den = 0;
    for (int64_t i = 0; i < n * v; i++) {
        num += ((double)la[i] - lb[i]) * ((double)la[i] - lb[i]);
        den += (double)la[i] * la[i];
    }
    sqz_session_free(sa);
    sqz_session_free(sb);
    free(la);
    free(lb);
    return sqrt(num / den);
}

static sqz_compress_report run(sqz_model *m, const char *spec, const sqz_calib_windows *w) {
    sqz_compress_opts o = sqz_compress_default_opts();
    SQZ_ASSERT_OK(sqz_compress_spec_parse(spec, &o.spec));
    sqz_session *s = w ? session_for(m, w->ctx) : NULL;
    sqz_compress_report r;
    SQZ_ASSERT_OK(sqz_compress_model(m, s, w, NULL, &o, &r));
    sqz_session_free(s);
    return r;
}

static void test_int8_rtn(void **state) {
    (void)state;
    SQZ_SKIP_UNLESS(stories());
    sqz_model *base, *m;
    SQZ_ASSERT_OK(sqz_model_open(stories(), NULL, &base));
    SQZ_ASSERT_OK(sqz_model_open(stories(), NULL, &m));
    sqz_compress_report r = run(m, "int8", NULL);
    assert_int_equal(r.n_layers, 5 * 7);
    for (int64_t i = 0; i < r.n_layers; i++) {
        assert_true(r.layers[i].quantized);
        assert_true(isnan(r.layers[i].out_err)); /* no calibration rows */
        assert_true(r.layers[i].weight_err > 0 && r.layers[i].weight_err < 0.01);
        const sqz_tensor *t = sqz_model_get(m, r.layers[i].role, r.layers[i].layer, SQZ_PARAM_WEIGHT);
        assert_int_equal(t->dtype, SQZ_DTYPE_I8);
        assert_non_null(t->qp);
    }
    assert_true(r.bytes_after < r.bytes_before);
    assert_float_equal(r.bpw_quantized, r.bits_quantized / (double)r.params_quantized, 1e-9);
    int32_t ids[48];
    for (int i = 0; i < 48; i++) ids[i] = (i * 37 + 1) % 512;
    double e = logits_err(base, m, ids, 48);
    print_message("int8 logits relative error %.4f\n", e);
    assert_true(e < 0.02);
    sqz_compress_report_free(&r);
    sqz_model_free(m);
    sqz_model_free(base);
}

static double mean_out_err(const sqz_compress_report *r) {
    double s = 0;
    int n = 0;
    for (int64_t i = 0; i < r->n_layers; i++)
        if (r->layers[i].quantized) {
            s += r->layers[i].out_err;
            n++;
        }
    return s / n;
}

static void test_gptq_sequential(void **state) {
    (void)state;
    SQZ_SKIP_UNLESS(stories());
    sqz_model *a, *b, *c;
    SQZ_ASSERT_OK(sqz_model_open(stories(), NULL, &a));
    SQZ_ASSERT_OK(sqz_model_open(stories(), NULL, &b));
    SQZ_ASSERT_OK(sqz_model_open(stories(), NULL, &c));
    sqz_calib_windows w = windows_for(a, NW, CTX);
    sqz_compress_report ra = run(a, "q4_0:gptq:pure", &w), rb = run(b, "q4_0:gptq:pure", &w), rc = run(c, "q4_0:pure", &w);
    for (int64_t i = 0; i < a->n_tensors; i++) {
        assert_int_equal(a->tensors[i].dtype, b->tensors[i].dtype);
        assert_int_equal(a->tensors[i].nbytes, b->tensors[i].nbytes);
        assert_memory_equal(a->tensors[i].data, b->tensors[i].data, a->tensors[i].nbytes);
    }
    assert_int_equal(ra.n_blocks, 5);
    assert_int_equal(ra.n_windows, NW);
    const double eg = mean_out_err(&ra), er = mean_out_err(&rc);
    print_message("mean output error: gptq %.4f, rtn %.4f\n", eg, er);
    assert_true(eg < er);
    /* ffn_down (172 inputs) does not fit blocks of 32: it stays float and says why */
    int kept = 0;
    for (int64_t i = 0; i < ra.n_layers; i++)
        if (!ra.layers[i].quantized) {
            kept++;
            assert_int_equal(ra.layers[i].role, SQZ_ROLE_FFN_DOWN);
            assert_non_null(strstr(ra.layers[i].why, "multiple"));
        }
    assert_int_equal(kept, 5);
    char *j = sqz_compress_report_json(&ra, "in", "out");
    assert_non_null(strstr(j, "\"out_err\""));
    free(j);
    sqz_compress_report_free(&ra);
    sqz_compress_report_free(&rb);
    sqz_compress_report_free(&rc);
    sqz_calib_windows_free(&w);
    sqz_model_free(a);
    sqz_model_free(b);
    sqz_model_free(c);
}

static void test_awq_folds_llama(void **state) {
    (void)state;
    SQZ_SKIP_UNLESS(stories());
    sqz_model *base, *m;
    SQZ_ASSERT_OK(sqz_model_open(stories(), NULL, &base));
    SQZ_ASSERT_OK(sqz_model_open(stories(), NULL, &m));
    sqz_calib_windows w = windows_for(m, NW, CTX);
    sqz_compress_report r = run(m, "int8:awq", &w);
    /* q|k|v and gate|up: folded into the norms (now f32 copies); o (GQA): kept as in_scale */
    int64_t smoothed = 0;
    for (int64_t i = 0; i < r.n_layers; i++) smoothed += r.layers[i].alpha > 0;
    print_message("%lld of %lld layers smoothed\n", (long long)smoothed, (long long)r.n_layers);
    const sqz_tensor *o = sqz_model_get(m, SQZ_ROLE_ATTN_OUT, 0, SQZ_PARAM_WEIGHT);
    const sqz_tensor *n0 = sqz_model_get(m, SQZ_ROLE_ATTN_NORM, 0, SQZ_PARAM_WEIGHT);
    assert_int_equal(n0->dtype, SQZ_DTYPE_F32);
    (void)o;
    double e = logits_err(base, m, w.tokens, CTX);
    print_message("int8:awq logits relative error %.4f\n", e);
    assert_true(e < 0.03);
    sqz_compress_report_free(&r);
    sqz_calib_windows_free(&w);
    sqz_model_free(m);
    sqz_model_free(base);
}

static void test_awq_folds_bert(void **state) {
    (void)state;
    const char *path = sqz_test_minilm();
    SQZ_SKIP_UNLESS(path);
    SQZ_SKIP_UNLESS(sqz_test_data("data/wiki.test.raw"));
    sqz_model *base, *m;
    SQZ_ASSERT_OK(sqz_model_open(path, NULL, &base));
    SQZ_ASSERT_OK(sqz_model_open(path, NULL, &m));
    sqz_calib_windows w = windows_for(m, 4, 48);
    sqz_compress_report r = run(m, "int8:awq", &w);
    int64_t smoothed = 0;
    for (int64_t i = 0; i < r.n_layers; i++) smoothed += r.layers[i].alpha > 0;
    assert_true(smoothed > 0);
    /* sentence embeddings stay nearly the same */
    sqz_session *sa = session_for(base, 48), *sb = session_for(m, 48);
    float ea[384], eb[384];
    SQZ_ASSERT_OK(sqz_embed(sa, w.tokens, NULL, 48, true, ea));
    SQZ_ASSERT_OK(sqz_embed(sb, w.tokens, NULL, 48, true, eb));
    double dot = 0;
    for (int i = 0; i < 384; i++) dot += (double)ea[i] * eb[i];
    print_message("MiniLM int8:awq embedding cosine %.6f (%lld layers smoothed)\n", dot, (long long)smoothed);
    assert_true(dot > 0.999);
    sqz_session_free(sa);
    sqz_session_free(sb);
    sqz_compress_report_free(&r);
    sqz_calib_windows_free(&w);
    sqz_model_free(m);
    sqz_model_free(base);
}

/* ---- statistics from a file == the same statistics in memory ---- */

typedef struct file_ctx {
    sqz_stats_writer *wr;
    sqz_model *m;
    const sqz_compress_opts *o;
    sqz_compress_report *rep;
} file_ctx;

static sqz_status write_and_compress(void *user, sqz_session *s, int32_t layer, const sqz_calib_block *b) {
    (void)s;
    file_ctx *c = user;
    sqz_status st = sqz_stats_writer_add(c->wr, b);
    if (st != SQZ_OK) return st;
    return sqz_compress_block(c->m, layer, b, c->o, c->rep); /* on a second model: s is not affected */
}

static void test_stats_file_compress(void **state) {
    (void)state;
    SQZ_SKIP_UNLESS(stories());
    sqz_model *a, *b;
    SQZ_ASSERT_OK(sqz_model_open(stories(), NULL, &a));
    SQZ_ASSERT_OK(sqz_model_open(stories(), NULL, &b));
    sqz_calib_windows w = windows_for(a, NW, CTX);
    char path[4200];
    snprintf(path, sizeof path, "%s/s.sqzs", sqz_test_tmpdir());
    sqz_compress_opts o = sqz_compress_default_opts();
    SQZ_ASSERT_OK(sqz_compress_spec_parse("q4_0:imatrix:pure", &o.spec));
    sqz_compress_report ra, rb;
    memset(&ra, 0, sizeof ra);
    const unsigned have = SQZ_QSTAT_X2 | SQZ_QSTAT_ABSMAX | SQZ_QSTAT_ABSMEAN | SQZ_QSTAT_SAMPLE | SQZ_QSTAT_HIST;
    file_ctx c = {NULL, a, &o, &ra};
    SQZ_ASSERT_OK(sqz_stats_writer_open(path, b, &w, have, 64, &c.wr));
    sqz_session *s = session_for(b, CTX); /* b stays uncompressed: statistics of the original */
    sqz_calib_run_opts ro = {.observe = {.needs = have, .sample_rows = 64, .expected_tokens = 0, .block_io = true},
                             .on_block = write_and_compress, .user = &c};
    SQZ_ASSERT_OK(sqz_calib_run(s, &w, &ro));
    SQZ_ASSERT_OK(sqz_stats_writer_commit(c.wr));
    sqz_session_free(s);
    sqz_calib_stats *st;
    SQZ_ASSERT_OK(sqz_calib_stats_read(path, &st));
    SQZ_ASSERT_OK(sqz_compress_model(b, NULL, NULL, st, &o, &rb));
    for (int64_t i = 0; i < a->n_tensors; i++) {
        assert_int_equal(a->tensors[i].dtype, b->tensors[i].dtype);
        assert_memory_equal(a->tensors[i].data, b->tensors[i].data, a->tensors[i].nbytes);
    }
    /* GPTQ needs the Hessian, which this file lacks: a clear error */
    sqz_compress_opts og = sqz_compress_default_opts();
    SQZ_ASSERT_OK(sqz_compress_spec_parse("q4_0:gptq:pure", &og.spec));
    sqz_compress_report rg;
    assert_int_equal(sqz_compress_model(b, NULL, NULL, st, &og, &rg), SQZ_ERR_INVALID_ARG);
    assert_non_null(strstr(sqz_last_error(), "Hessian"));
    sqz_compress_report_free(&rg);
    sqz_calib_stats_free(st);
    remove(path);
    sqz_compress_report_free(&ra);
    sqz_compress_report_free(&rb);
    sqz_calib_windows_free(&w);
    sqz_model_free(a);
    sqz_model_free(b);
}

/* ---- sqz's packed safetensors layout: write, read back, same weights and parameters ---- */

static void same_qp(const sqz_tensor *a, const sqz_tensor *b) {
    assert_int_equal(a->dtype, b->dtype);
    assert_int_equal(a->nbytes, b->nbytes);
    assert_memory_equal(a->data, b->data, a->nbytes);
    if (!a->qp) {
        assert_null(b->qp);
        return;
    }
    const sqz_qparams *p = a->qp, *q = b->qp;
    assert_non_null(q);
    assert_int_equal(p->scheme, q->scheme);
    assert_int_equal(p->group_size, q->group_size);
    assert_int_equal(p->n_groups, q->n_groups);
    assert_memory_equal(p->scales, q->scales, (size_t)(p->n_out * p->n_groups) * sizeof(float));
    assert_int_equal(p->zeros != NULL, q->zeros != NULL);
    if (p->zeros) assert_memory_equal(p->zeros, q->zeros, (size_t)(p->n_out * p->n_groups));
    assert_int_equal(p->g_idx != NULL, q->g_idx != NULL);
    if (p->g_idx) assert_memory_equal(p->g_idx, q->g_idx, (size_t)p->n_in * sizeof(int32_t));
    assert_int_equal(p->act_mode, q->act_mode);
    assert_true(p->act_scale == q->act_scale);
    assert_int_equal(p->in_scale != NULL, q->in_scale != NULL);
    if (p->in_scale) assert_memory_equal(p->in_scale, q->in_scale, (size_t)p->n_in * sizeof(float));
}

static void test_safetensors_layout(void **state) {
    (void)state;
    const char *tiny = sqz_test_data("models/tinystories-656K");
    SQZ_SKIP_UNLESS(tiny);
    static const char *specs[] = {"int4:gptq:g32:asym:act-order:dynamic-groups", "w8a8:smoothquant", "w8a8:dynamic", "int4:awq:g64"};
    for (size_t k = 0; k < sizeof specs / sizeof specs[0]; k++) {
        sqz_model *m, *r;
        SQZ_ASSERT_OK(sqz_model_open(tiny, NULL, &m));
        sqz_calib_windows w = windows_for(m, 4, CTX);
        sqz_compress_report rep = run(m, specs[k], &w);
        char dir[4200];
        snprintf(dir, sizeof dir, "%s/st", sqz_test_tmpdir());
        sqz_save_opts so = {.format = SQZ_FORMAT_SAFETENSORS, .dtype = -1, .hf_format = SQZ_HF_SQZ}; /* every scheme */
        SQZ_ASSERT_OK(sqz_model_save(m, dir, &so));
        SQZ_ASSERT_OK(sqz_model_open(dir, NULL, &r));
        int64_t n_qp = 0, n_gidx = 0, n_in_scale = 0;
        for (int64_t i = 0; i < m->n_tensors; i++) {
            const sqz_tensor *a = &m->tensors[i];
            if (a->role == SQZ_ROLE_OUTPUT && m->hp.tied_embeddings) continue;
            const sqz_tensor *b = sqz_model_get(r, a->role, a->layer, a->param);
            assert_non_null(b);
            same_qp(a, b);
            n_qp += a->qp != NULL;
            n_gidx += a->qp && a->qp->g_idx;
            n_in_scale += a->qp && a->qp->in_scale;
        }
        print_message("%s: %lld quantized tensors (%lld with g_idx, %lld with in_scale) read back exactly\n", specs[k],
                      (long long)n_qp, (long long)n_gidx, (long long)n_in_scale);
        assert_int_equal(n_qp, 2 * 7);
        if (k == 0) assert_int_equal(n_gidx, 14);
        /* the reloaded model runs and computes the same logits */
        assert_true(logits_err(m, r, w.tokens, CTX) < 1e-6);
        sqz_model_free(r);
        sqz_compress_report_free(&rep);
        sqz_calib_windows_free(&w);
        sqz_model_free(m);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_driver_matches_forward),
        cmocka_unit_test(test_int8_rtn),
        cmocka_unit_test(test_gptq_sequential),
        cmocka_unit_test(test_awq_folds_llama),
        cmocka_unit_test(test_awq_folds_bert),
        cmocka_unit_test(test_stats_file_compress),
        cmocka_unit_test(test_safetensors_layout),
    };
    return sqz_test_run(tests, NULL, NULL);
}

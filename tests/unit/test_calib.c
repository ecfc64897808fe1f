/* tests/unit/test_calib.c - calib/: windows, observers, the statistics file, the SPEC grammar.
 *   windows: deterministic for a seed, stratified over the text, BOS first, clear errors;
 *   observers: x2 / absmax / absmean / histogram / sample equal sqz_qstats_compute on the same
 *     rows (the quant module's batch reference), the Hessian equals X^T X summed in double,
 *     inputs are told apart by their role bits, block cosine similarity is exact;
 *   statistics file: a write/read round trip is bit-exact; every truncation, every flipped
 *     byte of a payload, a bad magic and a wrong version are rejected with SQZ_ERR_FORMAT;
 *   SPEC: each documented form parses to the right target/method/options; each bad part is an
 *     error whose message names it. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sqz/calib.h"
#include "test_util.h"

static float frand(uint32_t *s) {
    *s = *s * 1664525u + 1013904223u;
    return (float)(*s >> 8) / 16777216.0f - 0.5f;
}

/* ---- windows --------------------------------------------------------------------------- */

static void test_windows(void **state) {
    (void)state;
    enum { N = 10000 };
    int32_t *ids = malloc(N * sizeof *ids);
    for (int i = 0; i < N; i++) ids[i] = i;
    sqz_calib_windows a, b, c;
    SQZ_ASSERT_OK(sqz_calib_windows_from_ids(ids, N, 7, 16, 100, 42, &a));
    SQZ_ASSERT_OK(sqz_calib_windows_from_ids(ids, N, 7, 16, 100, 42, &b));
    SQZ_ASSERT_OK(sqz_calib_windows_from_ids(ids, N, -1, 16, 100, 43, &c));
    assert_int_equal(a.n_windows, 16);
    assert_memory_equal(a.tokens, b.tokens, 16 * 100 * sizeof(int32_t));
    assert_memory_equal(a.starts, b.starts, 16 * sizeof(int64_t));
    bool differ = false;
    const int64_t span = N - 100 + 1;
    for (int i = 0; i < 16; i++) {
        /* one window per stratum, in order, inside the text */
        assert_true(a.starts[i] >= span * i / 16 && a.starts[i] < span * (i + 1) / 16);
        assert_int_equal(a.tokens[i * 100], 7);  /* BOS */
        for (int t = 1; t < 100; t++) assert_int_equal(a.tokens[i * 100 + t], a.starts[i] + t);
        assert_int_equal(c.tokens[i * 100], c.starts[i]);  /* no BOS */
        differ |= a.starts[i] != c.starts[i];
    }
    assert_true(differ);
    sqz_calib_windows_free(&a);
    sqz_calib_windows_free(&b);
    sqz_calib_windows_free(&c);
    /* a short text: windows overlap but stay inside */
    SQZ_ASSERT_OK(sqz_calib_windows_from_ids(ids, 150, -1, 8, 100, 1, &a));
    for (int i = 0; i < 8; i++) assert_true(a.starts[i] >= 0 && a.starts[i] <= 50);
    sqz_calib_windows_free(&a);
    /* too short: the message says both counts */
    assert_int_equal(sqz_calib_windows_from_ids(ids, 99, -1, 8, 100, 1, &a), SQZ_ERR_INVALID_ARG);
    assert_non_null(strstr(sqz_last_error(), "99 tokens"));
    assert_non_null(strstr(sqz_last_error(), "100"));
    assert_int_equal(sqz_calib_windows_from_ids(ids, N, -1, 0, 100, 1, &a), SQZ_ERR_INVALID_ARG);
    free(ids);
}

/* ---- observers --------------------------------------------------------------------------- */

#define QKV ((1u << SQZ_ROLE_ATTN_Q) | (1u << SQZ_ROLE_ATTN_K) | (1u << SQZ_ROLE_ATTN_V))
#define DOWN (1u << SQZ_ROLE_FFN_DOWN)
enum { K1 = 24, K2 = 40, T = 37 };
static const unsigned ALL = SQZ_QSTAT_XTX | SQZ_QSTAT_X2 | SQZ_QSTAT_ABSMAX | SQZ_QSTAT_ABSMEAN |
                            SQZ_QSTAT_SAMPLE | SQZ_QSTAT_HIST;

/* Feeds rows x1 (T, K1) as q|k|v and x2 (T, K2) as down in batches of 5, block in/out pairs. */
static sqz_calib_block observe(const float *x1, const float *x2, int64_t sample_rows) {
    sqz_calib_observe_opts o = {.needs = ALL, .sample_rows = sample_rows, .expected_tokens = T, .block_io = true};
    sqz_calib_observer *ob;
    SQZ_ASSERT_OK(sqz_calib_observer_new(3, &o, &ob));
    for (int64_t t0 = 0; t0 < T; t0 += 5) {
        int64_t n = T - t0 < 5 ? T - t0 : 5;
        sqz_hook_event e = {SQZ_HOOK_BLOCK_IN, 3, 0, x1 + t0 * K1, n, K1, t0, NULL, NULL, 0, NULL};
        SQZ_ASSERT_OK(sqz_calib_observer_hook(ob, &e));
        e = (sqz_hook_event){SQZ_HOOK_LINEAR_IN, 3, QKV, x1 + t0 * K1, n, K1, t0, NULL, NULL, 0, NULL};
        SQZ_ASSERT_OK(sqz_calib_observer_hook(ob, &e));
        e = (sqz_hook_event){SQZ_HOOK_LINEAR_IN, 2, QKV, x2, 1, K2, t0, NULL, NULL, 0, NULL}; /* another layer: ignored */
        SQZ_ASSERT_OK(sqz_calib_observer_hook(ob, &e));
        e = (sqz_hook_event){SQZ_HOOK_LINEAR_IN, 3, DOWN, x2 + t0 * K2, n, K2, t0, NULL, NULL, 0, NULL};
        SQZ_ASSERT_OK(sqz_calib_observer_hook(ob, &e));
        /* the block output: the input scaled by 2 (cos 1) except one sign-flipped token (cos -1) */
        float out[5 * K1];
        for (int64_t i = 0; i < n * K1; i++) out[i] = 2 * x1[t0 * K1 + i] * (t0 + i / K1 == 11 ? -1 : 1);
        e = (sqz_hook_event){SQZ_HOOK_BLOCK_OUT, 3, 0, out, n, K1, t0, NULL, NULL, 0, NULL};
        SQZ_ASSERT_OK(sqz_calib_observer_hook(ob, &e));
    }
    sqz_calib_block b;
    SQZ_ASSERT_OK(sqz_calib_observer_finish(ob, &b));
    sqz_calib_observer_free(ob);
    return b;
}

static void check_input(const sqz_calib_input *in, const float *x, int64_t k, int64_t sample_rows) {
    sqz_qstats_buf ref;
    SQZ_ASSERT_OK(sqz_qstats_compute(x, T, k, ALL & ~(unsigned)SQZ_QSTAT_SAMPLE, 0, &ref));
    assert_int_equal(in->st.n_in, k);
    assert_int_equal(in->st.n_tokens, T);
    assert_int_equal(in->have, ALL);
    for (int64_t j = 0; j < k; j++) {
        assert_float_equal(in->absmax[j], ref.s.absmax[j], 0);
        assert_float_equal(in->x2[j], ref.s.x2[j], 1e-6 * ref.s.x2[j]);
        assert_float_equal(in->absmean[j], ref.s.absmean[j], 1e-6 * ref.s.absmean[j]);
        for (int64_t c = 0; c < k; c++) {
            double want = 0;
            for (int t = 0; t < T; t++) want += (double)x[t * k + j] * x[t * k + c];
            assert_float_equal(in->xtx[j * k + c], want, 1e-12 * fabs(want) + 1e-15);
            assert_true(in->xtx[j * k + c] == in->xtx[c * k + j]);
        }
    }
    assert_float_equal(in->hist.total, ref.hist.total, 0);
    assert_float_equal(in->hist.absmax, ref.hist.absmax, 0);
    /* the sample: every ceil(T / rows)-th row */
    const int64_t stride = (T + sample_rows - 1) / sample_rows;
    assert_int_equal(in->st.n_x, (T + stride - 1) / stride);
    for (int64_t r = 0; r < in->st.n_x; r++) assert_memory_equal(in->x + r * k, x + r * stride * k, k * sizeof(float));
    sqz_qstats_buf_free(&ref);
}

static void test_observer(void **state) {
    (void)state;
    uint32_t s = 5;
    float x1[T * K1], x2[T * K2];
    for (int i = 0; i < T * K1; i++) x1[i] = frand(&s) * (i % K1 == 3 ? 20.0f : 1.0f);
    for (int i = 0; i < T * K2; i++) x2[i] = frand(&s);
    sqz_calib_block b = observe(x1, x2, 10);
    assert_int_equal(b.layer, 3);
    assert_int_equal(b.n_inputs, 2);
    assert_int_equal(b.n_tokens, T);
    assert_ptr_equal(sqz_calib_block_input(&b, SQZ_ROLE_ATTN_K), &b.in[0]);
    assert_ptr_equal(sqz_calib_block_input(&b, SQZ_ROLE_FFN_DOWN), &b.in[1]);
    assert_null(sqz_calib_block_input(&b, SQZ_ROLE_FFN_UP));
    check_input(&b.in[0], x1, K1, 10);
    check_input(&b.in[1], x2, K2, 10);
    assert_float_equal(b.cos_mean, (double)(T - 2) / T, 1e-6);
    assert_float_equal(b.cos_min, -1.0, 1e-6);
    sqz_calib_block_free(&b);
    /* an input that changes width is an error */
    sqz_calib_observe_opts o = {.needs = SQZ_QSTAT_X2};
    sqz_calib_observer *ob;
    SQZ_ASSERT_OK(sqz_calib_observer_new(0, &o, &ob));
    sqz_hook_event e = {SQZ_HOOK_LINEAR_IN, 0, DOWN, x2, 2, K2, 0, NULL, NULL, 0, NULL};
    SQZ_ASSERT_OK(sqz_calib_observer_hook(ob, &e));
    e.dim = K1;
    assert_int_equal(sqz_calib_observer_hook(ob, &e), SQZ_ERR_INVALID_ARG);
    sqz_calib_observer_free(ob);
}

/* ---- statistics file ------------------------------------------------------------------- */

static char *tmp_path(const char *name) {
    static char buf[4][4096];
    static int k;
    char *b = buf[k++ % 4];
    snprintf(b, 4096, "%s/%s", sqz_test_tmpdir(), name);
    return b;
}

static void write_stats(const char *path, const sqz_calib_block *b) {
    sqz_model *m = sqz_model_new();
    snprintf(m->hp.arch, sizeof m->hp.arch, "llama");
    m->hp.n_layers = 4;
    m->hp.d_model = K1;
    m->hp.vocab_size = 100;
    sqz_calib_windows w = {.n_windows = 3, .ctx = 17, .n_text_tokens = 999, .seed = 77};
    sqz_stats_writer *wr;
    SQZ_ASSERT_OK(sqz_stats_writer_open(path, m, &w, ALL, 10, &wr));
    SQZ_ASSERT_OK(sqz_stats_writer_add(wr, b));
    SQZ_ASSERT_OK(sqz_stats_writer_commit(wr));
    sqz_model_free(m);
}

static uint8_t *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    *n = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *p = malloc(*n);
    assert_int_equal(fread(p, 1, *n, f), *n);
    fclose(f);
    return p;
}

static void spit(const char *path, const uint8_t *p, size_t n) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(p, 1, n, f), n);
    fclose(f);
}

static void test_stats_file(void **state) {
    (void)state;
    uint32_t s = 9;
    float x1[T * K1], x2[T * K2];
    for (int i = 0; i < T * K1; i++) x1[i] = frand(&s);
    for (int i = 0; i < T * K2; i++) x2[i] = frand(&s) * 3;
    sqz_calib_block b = observe(x1, x2, 10);
    const char *path = tmp_path("stats.sqzs");
    write_stats(path, &b);
    sqz_calib_stats *st;
    SQZ_ASSERT_OK(sqz_calib_stats_read(path, &st));
    assert_int_equal(st->n_layers, 4);
    assert_int_equal(st->d_model, K1);
    assert_string_equal(st->arch, "llama");
    assert_int_equal(st->n_windows, 3);
    assert_int_equal(st->ctx, 17);
    assert_int_equal(st->seed, 77);
    assert_int_equal(st->sample_rows, 10);
    assert_int_equal(st->n_blocks, 1);
    const sqz_calib_block *r = sqz_calib_stats_block(st, 3);
    assert_non_null(r);
    assert_null(sqz_calib_stats_block(st, 2));
    assert_true(r->cos_mean == b.cos_mean && r->cos_min == b.cos_min && r->n_tokens == b.n_tokens);
    assert_int_equal(r->n_inputs, 2);
    for (int i = 0; i < 2; i++) {
        const sqz_calib_input *a = &b.in[i], *c = &r->in[i];
        const int64_t k = a->st.n_in;
        assert_int_equal(c->roles, a->roles);
        assert_int_equal(c->have, a->have);
        assert_int_equal(c->st.n_x, a->st.n_x);
        assert_memory_equal(c->x2, a->x2, k * 4);
        assert_memory_equal(c->absmax, a->absmax, k * 4);
        assert_memory_equal(c->absmean, a->absmean, k * 4);
        assert_memory_equal(c->xtx, a->xtx, k * k * 8);
        assert_memory_equal(c->x, a->x, a->st.n_x * k * 4);
        assert_int_equal(c->hist.n_bins, a->hist.n_bins);
        assert_memory_equal(c->hist.counts, a->hist.counts, a->hist.n_bins * 8);
        assert_true(c->hist.width == a->hist.width && c->hist.total == a->hist.total);
        assert_ptr_equal(c->st.hist, &c->hist);
    }
    sqz_calib_stats_free(st);
    sqz_calib_block_free(&b);

    /* hostile copies: every truncation, flipped payload bytes, bad magic and version */
    size_t n;
    uint8_t *p = slurp(path, &n);
    const char *bad = tmp_path("bad.sqzs");
    for (size_t len = 0; len < n; len += (len < 200 ? 1 : 97)) {
        spit(bad, p, len);
        assert_int_equal(sqz_calib_stats_read(bad, &st), SQZ_ERR_FORMAT);
    }
    for (size_t i = 0; i < n; i += 13) {
        p[i] ^= 0x40;
        spit(bad, p, n);
        sqz_status rc = sqz_calib_stats_read(bad, &st);
        if (rc == SQZ_OK) sqz_calib_stats_free(st); /* only reserved bytes may be flipped harmlessly */
        else assert_int_equal(rc, SQZ_ERR_FORMAT);
        p[i] ^= 0x40;
    }
    p[0] = 'X';
    spit(bad, p, n);
    assert_int_equal(sqz_calib_stats_read(bad, &st), SQZ_ERR_FORMAT);
    assert_non_null(strstr(sqz_last_error(), "SQZSTAT1"));
    free(p);
    remove(path);
    remove(bad);
}

/* ---- SPEC -------------------------------------------------------------------------------- */

static void test_spec(void **state) {
    (void)state;
    sqz_compress_spec s;
    SQZ_ASSERT_OK(sqz_compress_spec_parse("int8", &s));
    assert_string_equal(s.method->name, "rtn");
    assert_int_equal(s.q.target.fmt, SQZ_QFMT_I8);
    assert_int_equal(s.q.act_mode, SQZ_ACT_FLOAT);
    SQZ_ASSERT_OK(sqz_compress_spec_parse("w8a8", &s));
    assert_int_equal(s.q.act_mode, SQZ_ACT_STATIC_TENSOR);
    assert_int_equal(s.q.act_calib, SQZ_ACT_CALIB_MINMAX);
    SQZ_ASSERT_OK(sqz_compress_spec_parse("w8a8:entropy", &s));
    assert_int_equal(s.q.act_calib, SQZ_ACT_CALIB_KL);
    SQZ_ASSERT_OK(sqz_compress_spec_parse("w8a8:percentile:pct=99.9", &s));
    assert_int_equal(s.q.act_calib, SQZ_ACT_CALIB_PERCENTILE);
    assert_float_equal(s.q.act_percentile, 99.9, 1e-12);
    SQZ_ASSERT_OK(sqz_compress_spec_parse("w8a8:dynamic", &s));
    assert_int_equal(s.q.act_mode, SQZ_ACT_DYNAMIC_TOKEN);
    SQZ_ASSERT_OK(sqz_compress_spec_parse("w8a8:smoothquant:alpha=0.5", &s));
    assert_string_equal(s.method->name, "smoothquant");
    assert_float_equal(s.q.sq_alpha, 0.5, 0);
    SQZ_ASSERT_OK(sqz_compress_spec_parse("int4", &s));
    assert_int_equal(s.q.target.fmt, SQZ_QFMT_I4_SYM);
    assert_int_equal(s.q.target.group, 128);
    SQZ_ASSERT_OK(sqz_compress_spec_parse("int4:gptq:g64:act-order:asym:damp=0.05:dynamic-groups", &s));
    assert_string_equal(s.method->name, "gptq");
    assert_int_equal(s.q.target.fmt, SQZ_QFMT_I4_ASYM);
    assert_int_equal(s.q.target.group, 64);
    assert_true(s.q.act_order);
    assert_float_equal(s.q.percdamp, 0.05, 1e-12);
    SQZ_ASSERT_OK(sqz_compress_spec_parse("q4_0:gptq:pure", &s));
    assert_true(s.q.act_order); /* GPTQ's default */
    assert_true(s.q.static_groups);
    SQZ_ASSERT_OK(sqz_compress_spec_parse("int4:gptq:dynamic-groups", &s));
    assert_false(s.q.static_groups);
    SQZ_ASSERT_OK(sqz_compress_spec_parse("q4_0:gptq:no-act-order:pure", &s));
    assert_false(s.q.act_order);
    SQZ_ASSERT_OK(sqz_compress_spec_parse("q4_0:imatrix:pure", &s));
    assert_false(s.q.act_order);
    assert_int_equal(s.q.target.fmt, SQZ_QFMT_Q4_0);
    assert_int_equal(s.q.target.group, 32);
    SQZ_ASSERT_OK(sqz_compress_spec_parse("q4_1:awq:pure", &s));
    SQZ_ASSERT_OK(sqz_compress_spec_parse("q8_0:gptq:static-groups:pure", &s));
    assert_true(s.q.static_groups);
    assert_int_equal(sqz_compress_needs(&s) & SQZ_QSTAT_XTX, SQZ_QSTAT_XTX);

    static const struct { const char *spec, *names; } bad[] = {
        {"", "empty"},
        {"int3", "'int3'"},
        {"int4:g96", "'g96'"},
        {"int4:gptq:awq", "'awq'"},
        {"q4_0:g64", "'g64'"},
        {"int8:asym", "'asym'"},
        {"int4:imatrix", "imatrix"},
        {"int4:smoothquant", "smoothquant"},
        {"w8a8:awq", "awq"},
        {"int8:entropy", "'entropy'"},
        {"w8a8:minmax:dynamic", "'dynamic'"},
        {"q4_0:act-order", "act-order"},
        {"q4_0:gptq:act-order:no-act-order", "act-order"},
        {"int4:gptq:static-groups:dynamic-groups", "dynamic-groups"},
        {"int4:gptq:damp=-1", "'damp=-1'"},
        {"w8a8:alpha=0.5", "alpha="},
        {"w8a8:smoothquant:alpha=2", "'alpha=2'"},
        {"w8a8:pct=99", "pct="},
        {"q4_0:frobnicate", "'frobnicate'"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(sqz_compress_spec_parse(bad[i].spec, &s), SQZ_ERR_INVALID_ARG);
        if (!strstr(sqz_last_error(), bad[i].names))
            fail_msg("SPEC '%s': message '%s' does not name %s", bad[i].spec, sqz_last_error(), bad[i].names);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_windows),
        cmocka_unit_test(test_observer),
        cmocka_unit_test(test_stats_file),
        cmocka_unit_test(test_spec),
    };
    return sqz_test_run(tests, NULL, NULL);
}

/* tests/unit/test_layerdrop.c - layer importance, selection and compensation (layerdrop/) on
 * stories260K (5 blocks) with wiki.test.raw windows: the scores equal a direct computation
 * from the session's block steps (bi and the angular distance of a run from the block inputs;
 * the KLD of removing a block from a model that really lost it), each method picks the argmin
 * of its score, iterative selection scores the shortened model again, compensation's reported
 * errors equal the errors of the compensated model run directly, lower the calibration
 * reconstruction error and the KLD on held-out text, and sqz_layerdrop_run leaves a model
 * with the chosen blocks removed. Exits 77 without the model or the text. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tests/test_util.h"

typedef struct fix {
    sqz_model *m;
    sqz_calib_windows w;
    sqz_session *s;
    sqz_layerdrop_scores sc;
    char *text;
    size_t len;
} fix;

static const char *model_path(void) { return sqz_test_data("models/stories260K/stories260K.bin"); }
static const char *text_path(void) { return sqz_test_data("data/wiki.test.raw"); }

enum { NW = 6, CTX = 96 };

static int setup(void **state) {
    fix *f = calloc(1, sizeof *f);
    sqz_tokenizer *tok = NULL;
    if (!f || sqz_model_open(model_path(), NULL, &f->m) != SQZ_OK ||
        sqz_read_file(text_path(), (size_t)1 << 31, &f->text, &f->len) != SQZ_OK ||
        sqz_tokenizer_new(&f->m->vocab, &tok) != SQZ_OK ||
        sqz_calib_windows_make(tok, f->text, f->len / 4, NW, CTX, 7, &f->w) != SQZ_OK)
        return -1;
    sqz_tokenizer_free(tok);
    sqz_session_opts so = sqz_session_default_opts();
    so.max_tokens = CTX;
    sqz_layerdrop_score_opts o = {.kld = true, .kld_windows = 3};
    if (sqz_session_new(f->m, &so, &f->s) != SQZ_OK || sqz_layerdrop_score(f->s, &f->w, &o, &f->sc) != SQZ_OK)
        return -1;
    *state = f;
    return 0;
}

static int teardown(void **state) {
    fix *f = *state;
    if (!f) return 0;
    sqz_layerdrop_scores_free(&f->sc);
    sqz_session_free(f->s);
    sqz_calib_windows_free(&f->w);
    sqz_model_free(f->m);
    free(f->text);
    free(f);
    return 0;
}

/* The input of every block and the last output of window `win`: (L + 1) x CTX x d floats. */
static float *states(fix *f, sqz_session *s, int64_t win) {
    const int64_t L = f->m->hp.n_layers, d = f->m->hp.d_model;
    float *x = malloc((size_t)((L + 1) * CTX * d) * sizeof(float));
    assert_non_null(x);
    SQZ_ASSERT_OK(sqz_session_embed(s, f->w.tokens + win * CTX, NULL, CTX, 0, x));
    for (int32_t l = 0; l < L; l++) {
        memcpy(x + (l + 1) * CTX * d, x + l * CTX * d, (size_t)(CTX * d) * sizeof(float));
        SQZ_ASSERT_OK(sqz_session_block(s, l, x + (l + 1) * CTX * d, CTX, 0));
    }
    return x;
}

static double cosine(const float *a, const float *b, int64_t d) {
    double ab = 0, aa = 0, bb = 0;
    for (int64_t k = 0; k < d; k++) ab += (double)a[k] * b[k], aa += (double)a[k] * a[k], bb += (double)b[k] * b[k];
    const double c = ab / sqrt(aa * bb);
    return c > 1 ? 1 : c < -1 ? -1 : c;
}

static void test_bi_and_angular_direct(void **state) {
    fix *f = *state;
    const int64_t d = f->m->hp.d_model;
    double bi1 = 0, bi3 = 0, ang13 = 0;
    for (int64_t win = 0; win < NW; win++) {
        float *x = states(f, f->s, win);
        for (int64_t t = 0; t < CTX; t++) {
            bi1 += 1 - cosine(x + (1 * CTX + t) * d, x + (2 * CTX + t) * d, d);
            bi3 += 1 - cosine(x + (3 * CTX + t) * d, x + (4 * CTX + t) * d, d);
            ang13 += acos(cosine(x + (1 * CTX + t) * d, x + (3 * CTX + t) * d, d)) / M_PI;
        }
        free(x);
    }
    const double T = NW * CTX;
    assert_true(fabs(f->sc.bi[1] - bi1 / T) < 1e-9);
    assert_true(fabs(f->sc.bi[3] - bi3 / T) < 1e-9);
    assert_true(fabs(sqz_layerdrop_ang(&f->sc, 1, 2) - ang13 / T) < 1e-9);
    assert_true(f->sc.bi[1] > 0 && f->sc.bi[1] < 1);
    assert_true(isnan(sqz_layerdrop_ang(&f->sc, 4, 2))); /* past the end */
}

/* KL(full || model without block 2) over the scored half, from a model that really lost it. */
static void test_kld_direct(void **state) {
    fix *f = *state;
    sqz_model *m2 = NULL;
    sqz_session *s2 = NULL;
    SQZ_ASSERT_OK(sqz_model_open(model_path(), NULL, &m2));
    const int32_t drop = 2;
    SQZ_ASSERT_OK(sqz_model_remove_layers(m2, &drop, 1));
    sqz_session_opts so = sqz_session_default_opts();
    so.max_tokens = CTX;
    SQZ_ASSERT_OK(sqz_session_new(m2, &so, &s2));
    const int64_t V = f->m->hp.vocab_size, h = CTX / 2, n = CTX - h;
    float *p = malloc((size_t)(CTX * V) * sizeof(float)), *q = malloc((size_t)(CTX * V) * sizeof(float));
    double kl = 0;
    for (int64_t win = 0; win < 3; win++) {
        SQZ_ASSERT_OK(sqz_forward(f->s, f->w.tokens + win * CTX, CTX, 0, h, p));
        SQZ_ASSERT_OK(sqz_forward(s2, f->w.tokens + win * CTX, CTX, 0, h, q));
        for (int64_t r = 0; r < n; r++) {
            double mp = -1e30, mq = -1e30, sp = 0, sq = 0, s = 0;
            const float *a = p + r * V, *b = q + r * V;
            for (int64_t v = 0; v < V; v++) mp = fmax(mp, a[v]), mq = fmax(mq, b[v]);
            for (int64_t v = 0; v < V; v++) sp += exp(a[v] - mp), sq += exp(b[v] - mq);
            for (int64_t v = 0; v < V; v++) {
                const double lp = a[v] - mp - log(sp), lq = b[v] - mq - log(sq);
                s += exp(lp) * (lp - lq);
            }
            kl += s;
        }
    }
    free(p);
    free(q);
    sqz_session_free(s2);
    sqz_model_free(m2);
    assert_true(fabs(f->sc.kld[2] - kl / (3.0 * n)) < 1e-4 * (1 + kl / (3.0 * n)));
    assert_true(f->sc.kld_tokens == 3 * n);
    for (int32_t l = 0; l < 5; l++) assert_true(f->sc.kld[l] > 0 && f->sc.top1[l] >= 0 && f->sc.top1[l] <= 1);
}

static int32_t argmin(const double *v, int32_t n, int32_t skip) {
    int32_t b = -1;
    for (int32_t i = 0; i < n; i++)
        if (i != skip && (b < 0 || v[i] < v[b])) b = i;
    return b;
}

static void test_choose_argmin(void **state) {
    fix *f = *state;
    sqz_layerdrop_opts o = sqz_layerdrop_default_opts();
    int32_t out[5];
    o.count = 1;
    o.method = SQZ_LAYERDROP_BI;
    SQZ_ASSERT_OK(sqz_layerdrop_choose(&f->sc, 5, &o, out));
    assert_int_equal(out[0], argmin(f->sc.bi, 5, -1));
    o.method = SQZ_LAYERDROP_KLD;
    o.count = 2;
    SQZ_ASSERT_OK(sqz_layerdrop_choose(&f->sc, 5, &o, out));
    const int32_t k0 = argmin(f->sc.kld, 5, -1), k1 = argmin(f->sc.kld, 5, k0);
    assert_int_equal(out[0], k0 < k1 ? k0 : k1);
    assert_int_equal(out[1], k0 < k1 ? k1 : k0);
    o.method = SQZ_LAYERDROP_ANGULAR;
    double a[4];
    for (int32_t i = 0; i < 4; i++) a[i] = sqz_layerdrop_ang(&f->sc, i, 2);
    SQZ_ASSERT_OK(sqz_layerdrop_choose(&f->sc, 5, &o, out));
    assert_int_equal(out[0], argmin(a, 4, -1));
    assert_int_equal(out[1], out[0] + 1);
    o.method = SQZ_LAYERDROP_LAST;
    SQZ_ASSERT_OK(sqz_layerdrop_choose(NULL, 5, &o, out));
    assert_true(out[0] == 3 && out[1] == 4);
    o.method = SQZ_LAYERDROP_RANDOM;
    int32_t again[5];
    SQZ_ASSERT_OK(sqz_layerdrop_choose(NULL, 5, &o, out));
    SQZ_ASSERT_OK(sqz_layerdrop_choose(NULL, 5, &o, again));
    assert_true(out[0] < out[1] && out[0] == again[0] && out[1] == again[1]);
    o.count = 5; /* every block */
    assert_int_equal(sqz_layerdrop_choose(NULL, 5, &o, out), SQZ_ERR_INVALID_ARG);
}

/* sqz_layerdrop_run: the argmin goes; iterative bi scores the shortened model again. */
static void test_run_and_iterative(void **state) {
    fix *f = *state;
    sqz_model *m = NULL;
    SQZ_ASSERT_OK(sqz_model_open(model_path(), NULL, &m));
    sqz_layerdrop_opts o = sqz_layerdrop_default_opts();
    o.method = SQZ_LAYERDROP_BI;
    o.count = 2;
    o.iterative = true;
    sqz_layerdrop_result r;
    SQZ_ASSERT_OK(sqz_layerdrop_run(m, &f->w, NULL, &o, &r));
    assert_int_equal(m->hp.n_layers, 3);
    const int32_t first = argmin(f->sc.bi, 5, -1);
    assert_int_equal(r.layers[first].step, 1);
    int32_t second = -1;
    for (int32_t l = 0; l < 5; l++)
        if (r.layers[l].step == 2) second = l;
    /* the second step's choice: lowest bi of the model without `first`, scored directly */
    bool skip[5] = {false};
    skip[first] = true;
    sqz_layerdrop_score_opts so = {.skip = skip};
    sqz_layerdrop_scores s2;
    SQZ_ASSERT_OK(sqz_layerdrop_score(f->s, &f->w, &so, &s2));
    assert_true(isnan(s2.bi[first]) && s2.n_active == 4);
    assert_int_equal(second, argmin(s2.bi, 5, first));
    sqz_layerdrop_scores_free(&s2);
    sqz_layerdrop_result_free(&r);
    sqz_model_free(m);
}

/* Compensation: the reported errors are those of the compensated model run directly; the
 * calibration error drops; held-out KLD does not rise. */
static void test_compensation(void **state) {
    fix *f = *state;
    const int32_t rm[2] = {3, 4}, p = 2;
    const int64_t d = f->m->hp.d_model;
    sqz_model *mc = NULL, *mp = NULL;
    SQZ_ASSERT_OK(sqz_model_open(model_path(), NULL, &mc));
    sqz_layerdrop_result r = {0};
    SQZ_ASSERT_OK(sqz_layerdrop_compensate(mc, &f->w, NULL, rm, 2, 1e-4, &r));
    assert_int_equal(r.n_comp, 1);
    assert_true(r.comp[0].into == p && r.comp[0].first == 3 && r.comp[0].last == 4);
    assert_true(r.comp[0].err_after < r.comp[0].err_before);
    sqz_session *sc = NULL;
    sqz_session_opts so = sqz_session_default_opts();
    so.max_tokens = CTX;
    SQZ_ASSERT_OK(sqz_session_new(mc, &so, &sc));
    double e0 = 0, e1 = 0, ll = 0;
    for (int64_t win = 0; win < NW; win++) {
        float *x = states(f, f->s, win), *y = states(f, sc, win);
        const float *L = x + 5 * CTX * d, *O = x + 3 * CTX * d, *O1 = y + 3 * CTX * d; /* after block p = 2 */
        for (int64_t k = 0; k < CTX * d; k++)
            e0 += (O[k] - L[k]) * (double)(O[k] - L[k]), e1 += (O1[k] - L[k]) * (double)(O1[k] - L[k]),
                ll += (double)L[k] * L[k];
        free(x);
        free(y);
    }
    assert_true(fabs(sqrt(e0 / ll) - r.comp[0].err_before) < 1e-4);
    assert_true(fabs(sqrt(e1 / ll) - r.comp[0].err_after) < 1e-3);
    sqz_session_free(sc);
    /* held out: the second half of the text, never windowed */
    SQZ_ASSERT_OK(sqz_model_remove_layers(mc, rm, 2));
    SQZ_ASSERT_OK(sqz_model_open(model_path(), NULL, &mp));
    SQZ_ASSERT_OK(sqz_model_remove_layers(mp, rm, 2));
    sqz_compress_eval_opts eo = sqz_compress_eval_default_opts();
    eo.ctx = 128;
    eo.max_chunks = 16;
    sqz_compress_eval ec, ep;
    const size_t half = f->len / 2;
    SQZ_ASSERT_OK(sqz_compress_eval_run(mc, f->m, "second half", f->text + half, f->len - half, NULL, &eo, &ec));
    SQZ_ASSERT_OK(sqz_compress_eval_run(mp, f->m, "second half", f->text + half, f->len - half, NULL, &eo, &ep));
    print_message("held-out KLD without compensation %.4f, with %.4f\n", ep.kld_mean, ec.kld_mean);
    assert_true(ec.kld_mean < ep.kld_mean);
    sqz_layerdrop_result_free(&r);
    sqz_model_free(mc);
    sqz_model_free(mp);
}

static void test_errors(void **state) {
    fix *f = *state;
    sqz_model *m = NULL;
    SQZ_ASSERT_OK(sqz_model_open(model_path(), NULL, &m));
    sqz_layerdrop_opts o = sqz_layerdrop_default_opts();
    sqz_layerdrop_result r;
    o.method = SQZ_LAYERDROP_BI;
    o.count = 2;
    assert_int_equal(sqz_layerdrop_run(m, NULL, NULL, &o, &r), SQZ_ERR_INVALID_ARG); /* no windows */
    assert_non_null(strstr(sqz_last_error(), "calibration"));
    sqz_layerdrop_result_free(&r);
    o.count = 5;
    assert_int_equal(sqz_layerdrop_run(m, &f->w, NULL, &o, &r), SQZ_ERR_INVALID_ARG);
    sqz_layerdrop_result_free(&r);
    o.count = 2;
    o.method = SQZ_LAYERDROP_LAST;
    o.iterative = true;
    assert_int_equal(sqz_layerdrop_run(m, &f->w, NULL, &o, &r), SQZ_ERR_INVALID_ARG);
    sqz_layerdrop_result_free(&r);
    assert_int_equal(m->hp.n_layers, 5); /* unchanged */
    sqz_model_free(m);
}

int main(void) {
    if (!sqz_test_needs(model_path()) || !sqz_test_needs(text_path())) return SQZ_TEST_SKIP;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bi_and_angular_direct), cmocka_unit_test(test_kld_direct),
        cmocka_unit_test(test_choose_argmin),         cmocka_unit_test(test_run_and_iterative),
        cmocka_unit_test(test_compensation),          cmocka_unit_test(test_errors),
    };
    return sqz_test_run(tests, setup, teardown);
}

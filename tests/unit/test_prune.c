/* tests/unit/test_prune.c - structured pruning (prune/, sqz/prune.h) on tinystories-656K
 * (llama, 8 heads in 4 KV groups, head_dim 16, d_ff 384) calibrated on wiki.test.raw: every
 * score against a direct computation from the layer's weights and statistics (the OBS score
 * and the least-squares correction with an independent Gauss-Jordan inverse); compensation
 * lowers the output error on the calibration tokens (none > bias, none > lsq >= both); a
 * pruned block equals the full block with the removed heads / neurons zeroed; the GQA head
 * choice; the --prune pass through sqz_compress_run, composed with GPTQ; bad SPECs. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sqz/calib.h"
#include "sqz/edit.h"
#include "sqz/prune.h"
#include "test_util.h"

enum { NW = 8, CTX = 64 };
#define DAMP 0.01

static const char *model_path(void) { return sqz_test_data("models/tinystories-656K"); }

static sqz_model *open_model(void) {
    sqz_model *m = NULL;
    SQZ_ASSERT_OK(sqz_model_open(model_path(), NULL, &m));
    return m;
}

static sqz_calib_windows windows_for(const sqz_model *m) {
    char *text;
    size_t len;
    SQZ_ASSERT_OK(sqz_read_file(sqz_test_data("data/wiki.test.raw"), (size_t)1 << 31, &text, &len));
    if (len > 200000) len = 200000;
    sqz_tokenizer *tok;
    SQZ_ASSERT_OK(sqz_tokenizer_new(&m->vocab, &tok));
    sqz_calib_windows w;
    SQZ_ASSERT_OK(sqz_calib_windows_make(tok, text, len, NW, CTX, 5, &w));
    sqz_tokenizer_free(tok);
    free(text);
    return w;
}

static float *weights(const sqz_model *m, sqz_role r, int32_t layer, sqz_param p) {
    const sqz_tensor *t = sqz_model_get(m, r, layer, p);
    if (!t) return NULL;
    float *v = malloc((size_t)sqz_tensor_nelements(t) * sizeof(float));
    assert_non_null(v);
    SQZ_ASSERT_OK(sqz_tensor_to_f32(t, v));
    return v;
}

/* Inverse of a (n, n) by Gauss-Jordan with partial pivoting, in place (independent of prune/). */
static void invert(double *a, int64_t n) {
    double *b = calloc((size_t)(n * n), sizeof(double));
    assert_non_null(b);
    for (int64_t i = 0; i < n; i++) b[i * n + i] = 1;
    for (int64_t c = 0; c < n; c++) {
        int64_t p = c;
        for (int64_t r = c + 1; r < n; r++)
            if (fabs(a[r * n + c]) > fabs(a[p * n + c])) p = r;
        for (int64_t j = 0; j < n; j++) {
            double t = a[c * n + j];
            a[c * n + j] = a[p * n + j];
            a[p * n + j] = t;
            t = b[c * n + j];
            b[c * n + j] = b[p * n + j];
            b[p * n + j] = t;
        }
        const double d = a[c * n + c];
        assert_true(fabs(d) > 0);
        for (int64_t j = 0; j < n; j++) {
            a[c * n + j] /= d;
            b[c * n + j] /= d;
        }
        for (int64_t r = 0; r < n; r++) {
            if (r == c || a[r * n + c] == 0) continue;
            const double f = a[r * n + c];
            for (int64_t j = 0; j < n; j++) {
                a[r * n + j] -= f * a[c * n + j];
                b[r * n + j] -= f * b[c * n + j];
            }
        }
    }
    memcpy(a, b, (size_t)(n * n) * sizeof(double));
    free(b);
}

/* H restricted to idx, damped as prune/ documents (dead inputs 1, + damp * mean diagonal). */
static double *damped(const sqz_qstats *st, const int64_t *idx, int64_t n) {
    double *a = malloc((size_t)(n * n) * sizeof(double)), diag = 0;
    assert_non_null(a);
    for (int64_t i = 0; i < n; i++) {
        for (int64_t j = 0; j < n; j++) a[i * n + j] = st->xtx[idx[i] * st->n_in + idx[j]];
        diag += a[i * n + i];
    }
    for (int64_t i = 0; i < n; i++) a[i * n + i] = (a[i * n + i] == 0 ? 1.0 : a[i * n + i]) + DAMP * diag / (double)n;
    return a;
}

static void assert_close(double got, double want, double rel, const char *what, int64_t i) {
    if (fabs(got - want) > rel * fabs(want) + 1e-12)
        fail_msg("%s[%lld]: %.9g, direct %.9g", what, (long long)i, got, want);
}

/* ---- scores ------------------------------------------------------------------------------ */

/* The direct score of structure s (width columns of w (n_out, n_in)) for `score`. */
static double direct_score(const sqz_model *m, sqz_structure k, sqz_prune_score score, const sqz_qstats *st,
                           const float *w, int64_t n_out, int64_t width, int64_t s) {
    const int64_t n_in = st->n_in;
    double v = 0;
    for (int64_t j = s * width; j < (s + 1) * width; j++)
        for (int64_t i = 0; i < n_out; i++) {
            const double x = w[i * n_in + j];
            if (score == SQZ_PRUNE_MAGNITUDE) v += x * x;
            if (score == SQZ_PRUNE_WANDA) v += fabs(x) * sqrt((double)st->x2[j] * (double)st->n_tokens);
            if (score == SQZ_PRUNE_FLAP) v += x * x * ((double)st->x2[j] - (double)st->mean[j] * st->mean[j]);
        }
    if (score == SQZ_PRUNE_MAGNITUDE) { /* the rows it owns: q (heads), gate and up (neurons) */
        const sqz_role rows[2] = {k == SQZ_STRUCT_HEAD ? SQZ_ROLE_ATTN_Q : SQZ_ROLE_FFN_GATE, SQZ_ROLE_FFN_UP};
        for (int r = 0; r < (k == SQZ_STRUCT_HEAD ? 1 : 2); r++) {
            const sqz_tensor *t = sqz_model_get(m, rows[r], 0, SQZ_PARAM_WEIGHT);
            float *q = weights(m, rows[r], 0, SQZ_PARAM_WEIGHT);
            for (int64_t i = s * width * t->shape[1]; i < (s + 1) * width * t->shape[1]; i++) v += (double)q[i] * q[i];
            free(q);
        }
    }
    if (score == SQZ_PRUNE_OBS) { /* tr(W_S [(H^-1)_SS]^-1 W_S^T) */
        int64_t *all = malloc((size_t)n_in * sizeof(int64_t));
        for (int64_t j = 0; j < n_in; j++) all[j] = j;
        double *hi = damped(st, all, n_in), *a = malloc((size_t)(width * width) * sizeof(double));
        invert(hi, n_in);
        for (int64_t i = 0; i < width; i++)
            for (int64_t j = 0; j < width; j++) a[i * width + j] = hi[(s * width + i) * n_in + s * width + j];
        invert(a, width);
        for (int64_t r = 0; r < n_out; r++)
            for (int64_t i = 0; i < width; i++)
                for (int64_t j = 0; j < width; j++)
                    v += (double)w[r * n_in + s * width + i] * a[i * width + j] * w[r * n_in + s * width + j];
        free(all);
        free(hi);
        free(a);
    }
    return v;
}

typedef struct calib_case {
    sqz_model *m;
    int checked;
    void (*check)(struct calib_case *c, const sqz_calib_block *b);
} calib_case;

static sqz_status on_block(void *user, sqz_session *s, int32_t layer, const sqz_calib_block *b) {
    (void)s;
    calib_case *c = user;
    if (layer == 0) {
        c->check(c, b);
        c->checked++;
    }
    return SQZ_OK;
}

/* Calibrates c->m on wiki.test.raw and calls c->check with block 0's statistics. */
static void calibrate(calib_case *c) {
    sqz_calib_windows w = windows_for(c->m);
    sqz_session_opts so = sqz_session_default_opts();
    so.max_tokens = CTX;
    so.n_threads = 1;
    sqz_session *s;
    SQZ_ASSERT_OK(sqz_session_new(c->m, &so, &s));
    sqz_calib_run_opts ro;
    memset(&ro, 0, sizeof ro);
    ro.observe.needs = SQZ_QSTAT_XTX | SQZ_QSTAT_X2 | SQZ_QSTAT_MEAN;
    ro.on_block = on_block;
    ro.user = c;
    SQZ_ASSERT_OK(sqz_calib_run(s, &w, &ro));
    assert_int_equal(c->checked, 1);
    sqz_session_free(s);
    sqz_calib_windows_free(&w);
}

static void check_scores(calib_case *c, const sqz_calib_block *b) {
    for (int k = 0; k < 2; k++) {
        const sqz_structure st_k = k ? SQZ_STRUCT_NEURON : SQZ_STRUCT_HEAD;
        const sqz_role out = k ? SQZ_ROLE_FFN_DOWN : SQZ_ROLE_ATTN_OUT;
        const sqz_qstats *st = &sqz_calib_block_input(b, out)->st;
        assert_non_null(st->mean);
        const sqz_tensor *t = sqz_model_get(c->m, out, 0, SQZ_PARAM_WEIGHT);
        const int64_t width = k ? 1 : c->m->hp.head_dim, n = t->shape[1] / width;
        float *w = weights(c->m, out, 0, SQZ_PARAM_WEIGHT);
        double *got = malloc((size_t)n * sizeof(double));
        for (int sc = 0; sc < SQZ_PRUNE_SCORE_COUNT; sc++) {
            SQZ_ASSERT_OK(sqz_prune_scores(c->m, 0, st_k, (sqz_prune_score)sc, st, DAMP, got));
            char what[64];
            snprintf(what, sizeof what, "%s %s", k ? "neuron" : "head", sqz_prune_score_name((sqz_prune_score)sc));
            const int64_t step = sc == SQZ_PRUNE_OBS && k ? 37 : 1; /* OBS of neurons: a sample (n^3 each) */
            for (int64_t s = 0; s < n; s += step)
                assert_close(got[s], direct_score(c->m, st_k, (sqz_prune_score)sc, st, w, t->shape[0], width, s),
                             sc == SQZ_PRUNE_OBS ? 1e-4 : 1e-6, what, s);
        }
        /* the statistics a score needs: missing ones are refused naming them */
        sqz_qstats no_mean = *st;
        no_mean.mean = NULL;
        assert_int_equal(sqz_prune_scores(c->m, 0, st_k, SQZ_PRUNE_FLAP, &no_mean, DAMP, got), SQZ_ERR_INVALID_ARG);
        assert_non_null(strstr(sqz_last_error(), "E[x]"));
        free(got);
        free(w);
    }
}

static void test_scores(void **state) {
    (void)state;
    SQZ_SKIP_UNLESS(model_path());
    calib_case c = {.m = open_model(), .check = check_scores};
    calibrate(&c);
    sqz_model_free(c.m);
}

/* ---- compensation ------------------------------------------------------------------------ */

/* (1/T) sum_t ||W x - (W~ x + db)||^2 on the calibration tokens, from H and E[x]: W~ is the
 * pruned layer's weight with zero columns at the removed inputs, db its bias change. */
static double output_error(const float *w, const float *wk, const float *db, int64_t n_out, const int64_t *keep,
                           int64_t nk, const sqz_qstats *st) {
    const int64_t n = st->n_in, T = st->n_tokens;
    double *d = calloc((size_t)n, sizeof(double)), e = 0;
    for (int64_t i = 0; i < n_out; i++) {
        for (int64_t j = 0; j < n; j++) d[j] = w[i * n + j];
        for (int64_t j = 0; j < nk; j++) d[keep[j]] -= wk[i * nk + j];
        double q = 0, dm = 0;
        for (int64_t a = 0; a < n; a++) {
            dm += d[a] * st->mean[a];
            for (int64_t b = 0; b < n; b++) q += d[a] * st->xtx[a * n + b] * d[b];
        }
        const double bi = db ? db[i] : 0;
        e += q / (double)T - 2 * bi * dm + bi * bi;
    }
    free(d);
    return e;
}

static void check_compensation(calib_case *c, const sqz_calib_block *b) {
    const sqz_qstats *st = &sqz_calib_block_input(b, SQZ_ROLE_FFN_DOWN)->st;
    const int64_t n = st->n_in, n_out = c->m->hp.d_model, nk = n - n * 3 / 10;
    double *sc = malloc((size_t)n * sizeof(double));
    int64_t *keep = malloc((size_t)n * sizeof(int64_t));
    SQZ_ASSERT_OK(sqz_prune_scores(c->m, 0, SQZ_STRUCT_NEURON, SQZ_PRUNE_FLAP, st, DAMP, sc));
    sqz_prune_choose_top(n, sc, n - nk, keep);
    float *w = weights(c->m, SQZ_ROLE_FFN_DOWN, 0, SQZ_PARAM_WEIGHT);
    double err[4];
    for (int comp = 0; comp < 4; comp++) {
        sqz_model *p = open_model();
        SQZ_ASSERT_OK(sqz_prune_apply(p, 0, SQZ_STRUCT_NEURON, keep, nk, (sqz_prune_comp)comp, st, DAMP));
        assert_int_equal(p->layers[0].d_ff, nk);
        float *wk = weights(p, SQZ_ROLE_FFN_DOWN, 0, SQZ_PARAM_WEIGHT), *db = weights(p, SQZ_ROLE_FFN_DOWN, 0, SQZ_PARAM_BIAS);
        assert_true((db != NULL) == (comp == SQZ_PRUNE_COMP_BIAS || comp == SQZ_PRUNE_COMP_BOTH));
        err[comp] = output_error(w, wk, db, n_out, keep, nk, st);
        if (comp == SQZ_PRUNE_COMP_LSQ) { /* W_K' = W_K + W_S H_SK H_KK^-1, solved independently */
            int64_t *drop = malloc((size_t)n * sizeof(int64_t)), ns = 0;
            for (int64_t j = 0, i = 0; j < n; j++)
                if (i < nk && keep[i] == j) i++;
                else drop[ns++] = j;
            double *hkk = damped(st, keep, nk);
            invert(hkk, nk);
            for (int64_t r = 0; r < n_out; r += 17)
                for (int64_t j = 0; j < nk; j += 5) {
                    double want = w[r * n + keep[j]];
                    for (int64_t a = 0; a < ns; a++)
                        for (int64_t q = 0; q < nk; q++)
                            want += (double)w[r * n + drop[a]] * st->xtx[drop[a] * n + keep[q]] * hkk[q * nk + j];
                    assert_close(wk[r * nk + j], want, 1e-3, "lsq W_K'", r * nk + j);
                }
            free(drop);
            free(hkk);
        }
        free(wk);
        free(db);
        sqz_model_free(p);
    }
    printf("FFN of layer 0, 30%% removed by flap: output error none %.5g, bias %.5g, lsq %.5g, both %.5g\n", err[0],
           err[1], err[2], err[3]);
    assert_true(err[SQZ_PRUNE_COMP_BIAS] < err[SQZ_PRUNE_COMP_NONE]);
    assert_true(err[SQZ_PRUNE_COMP_LSQ] < 0.9 * err[SQZ_PRUNE_COMP_NONE]);
    assert_true(err[SQZ_PRUNE_COMP_BOTH] <= err[SQZ_PRUNE_COMP_LSQ] * (1 + 1e-6));
    free(w);
    free(sc);
    free(keep);
}

static void test_compensation(void **state) {
    (void)state;
    SQZ_SKIP_UNLESS(model_path());
    calib_case c = {.m = open_model(), .check = check_compensation};
    calibrate(&c);
    sqz_model_free(c.m);
}

/* ---- a pruned block against the full block with the structures zeroed ------------------- */

/* Zeroes columns [c0, c1) of the o or down weight of layer 0 (as F32). */
static void zero_cols(sqz_model *m, sqz_role r, const int64_t *keep, int64_t nk, int64_t width) {
    sqz_tensor *t = sqz_model_get(m, r, 0, SQZ_PARAM_WEIGHT);
    float *v = weights(m, r, 0, SQZ_PARAM_WEIGHT);
    const int64_t n_in = t->shape[1];
    for (int64_t s = 0, i = 0; s < n_in / width; s++) {
        if (i < nk && keep[i] == s) {
            i++;
            continue;
        }
        for (int64_t row = 0; row < t->shape[0]; row++)
            for (int64_t j = s * width; j < (s + 1) * width; j++) v[row * n_in + j] = 0;
    }
    SQZ_ASSERT_OK(sqz_tensor_replace(m, t, SQZ_DTYPE_F32, 2, t->shape, v, (size_t)sqz_tensor_nelements(t) * 4, true));
}

static void block_out(const sqz_model *m, const int32_t *tok, int64_t n, float *x) {
    sqz_session_opts so = sqz_session_default_opts();
    so.max_tokens = n;
    so.n_threads = 1;
    sqz_session *s;
    SQZ_ASSERT_OK(sqz_session_new(m, &so, &s));
    SQZ_ASSERT_OK(sqz_session_embed(s, tok, NULL, n, 0, x));
    SQZ_ASSERT_OK(sqz_session_block(s, 0, x, n, 0));
    sqz_session_free(s);
}

static void test_block(void **state) {
    (void)state;
    SQZ_SKIP_UNLESS(model_path());
    sqz_model *full = open_model(), *pruned = open_model();
    sqz_calib_windows w = windows_for(full);
    const double hs[8] = {3, 1, 4, 1.5, 5, 9, 2, 6}; /* KV group 0 (heads 0, 1) is the weakest pair */
    int64_t keep_h[8], nh, keep_n[384];
    SQZ_ASSERT_OK(sqz_prune_choose_heads(8, 4, hs, 2, keep_h, &nh));
    assert_int_equal(nh, 6); /* 3 groups x 2 */
    const int64_t want_h[6] = {2, 3, 4, 5, 6, 7};
    assert_memory_equal(keep_h, want_h, sizeof want_h);
    for (int64_t i = 0; i < 384; i++) keep_n[i] = i < 100 ? 2 * i : 200 + i - 100; /* 284 neurons */
    SQZ_ASSERT_OK(sqz_prune_apply(pruned, 0, SQZ_STRUCT_HEAD, keep_h, nh, SQZ_PRUNE_COMP_NONE, NULL, DAMP));
    SQZ_ASSERT_OK(sqz_prune_apply(pruned, 0, SQZ_STRUCT_NEURON, keep_n, 284, SQZ_PRUNE_COMP_NONE, NULL, DAMP));
    assert_int_equal(pruned->layers[0].n_heads, nh);
    assert_int_equal(pruned->layers[0].d_ff, 284);
    zero_cols(full, SQZ_ROLE_ATTN_OUT, keep_h, nh, full->hp.head_dim);
    zero_cols(full, SQZ_ROLE_FFN_DOWN, keep_n, 284, 1);
    const int64_t d = full->hp.d_model;
    float *a = malloc((size_t)(CTX * d) * sizeof(float)), *b = malloc((size_t)(CTX * d) * sizeof(float));
    block_out(full, w.tokens, CTX, a);
    block_out(pruned, w.tokens, CTX, b);
    double diff = 0, scale = 0; /* the same sums in another order: float rounding only */
    for (int64_t i = 0; i < CTX * d; i++) {
        diff = fmax(diff, fabs((double)b[i] - a[i]));
        scale = fmax(scale, fabs((double)a[i]));
    }
    if (diff > 1e-5 * scale) fail_msg("block 0 output: max difference %g (max |x| %g)", diff, scale);
    free(a);
    free(b);
    sqz_calib_windows_free(&w);
    sqz_model_free(full);
    sqz_model_free(pruned);
}

/* ---- GQA head choice ---------------------------------------------------------------------- */

static void test_choose_heads(void **state) {
    (void)state;
    int64_t keep[9], n;
    /* 9 heads in 3 groups of 3, remove 3: group 1 is weak everywhere -> drop the whole group */
    const double g[9] = {5, 6, 7, 1, 1, 1, 8, 9, 7};
    SQZ_ASSERT_OK(sqz_prune_choose_heads(9, 3, g, 3, keep, &n));
    assert_int_equal(n, 6);
    const int64_t want_g[6] = {0, 1, 2, 6, 7, 8};
    assert_memory_equal(keep, want_g, sizeof want_g);
    /* one weak head in every group -> thin each group to 2 */
    const double t[9] = {5, 1, 7, 6, 8, 1, 1, 9, 7};
    SQZ_ASSERT_OK(sqz_prune_choose_heads(9, 3, t, 3, keep, &n));
    assert_int_equal(n, 6);
    const int64_t want_t[6] = {0, 2, 3, 4, 7, 8};
    assert_memory_equal(keep, want_t, sizeof want_t);
    /* 2 of 9 asked: 7 is not feasible (3 x k or k x 3 ... ), the nearest feasible count is 6 */
    SQZ_ASSERT_OK(sqz_prune_choose_heads(9, 3, t, 2, keep, &n));
    assert_int_equal(n, 6);
    SQZ_ASSERT_OK(sqz_prune_choose_heads(9, 3, t, 8, keep, &n));
    assert_int_equal(n, 1);
    assert_int_equal(sqz_prune_choose_heads(9, 3, t, 9, keep, &n), SQZ_ERR_INVALID_ARG);
    assert_non_null(strstr(sqz_last_error(), "every head"));
}

/* The shapes a count can take (uniform's question) and the choice with the shape fixed. */
static void test_heads_shapes(void **state) {
    (void)state;
    int64_t keep[9], n;
    int shapes;
    SQZ_ASSERT_OK(sqz_prune_heads_shapes(9, 3, 3, &n, &shapes)); /* 6 = 2 groups x 3 or 3 x 2 */
    assert_int_equal(n, 6);
    assert_int_equal(shapes, 2);
    SQZ_ASSERT_OK(sqz_prune_heads_shapes(8, 4, 2, &n, &shapes)); /* 6 = 3 x 2 only */
    assert_int_equal(n, 6);
    assert_int_equal(shapes, 1);
    SQZ_ASSERT_OK(sqz_prune_heads_shapes(8, 8, 3, &n, &shapes)); /* MHA: one shape for any count */
    assert_int_equal(n, 5);
    assert_int_equal(shapes, 1);
    /* group 1 weak: free choice drops it, the shape 3 x 2 thins every group instead */
    const double g[9] = {5, 6, 7, 1, 1, 2, 8, 9, 7};
    SQZ_ASSERT_OK(sqz_prune_choose_heads_shape(9, 3, g, 3, 2, keep));
    const int64_t want[6] = {1, 2, 3, 5, 6, 7}; /* ties: the lower index */
    assert_memory_equal(keep, want, sizeof want);
    SQZ_ASSERT_OK(sqz_prune_choose_heads_shape(9, 3, g, 2, 3, keep));
    const int64_t want2[6] = {0, 1, 2, 6, 7, 8};
    assert_memory_equal(keep, want2, sizeof want2);
    assert_int_equal(sqz_prune_choose_heads_shape(9, 3, g, 4, 1, keep), SQZ_ERR_INVALID_ARG);
}

/* ---- the pass ----------------------------------------------------------------------------- */

static void test_pass(void **state) {
    (void)state;
    SQZ_SKIP_UNLESS(model_path());
    sqz_model *m = open_model();
    sqz_calib_windows w = windows_for(m);
    sqz_recipe r = {0};
    SQZ_ASSERT_OK(sqz_recipe_add(&r, "prune", "heads=0.25:ffn=0.3:flap"));
    SQZ_ASSERT_OK(sqz_recipe_add(&r, "quant", "q4_0:gptq:pure"));
    sqz_compress_opts o = sqz_compress_default_opts();
    sqz_compress_env env = {.windows = &w, .session_opts = sqz_session_default_opts()};
    env.session_opts.n_threads = 1;
    sqz_compress_report rep;
    SQZ_ASSERT_OK(sqz_compress_run(m, &r, &env, &o, &rep));
    SQZ_ASSERT_OK(sqz_model_validate(m));
    for (int64_t l = 0; l < m->hp.n_layers; l++) {
        assert_int_equal(m->layers[l].n_heads, 6); /* 8 - 2: 3 groups of 2 */
        assert_int_equal(m->layers[l].n_heads % m->layers[l].n_kv_heads, 0);
        assert_int_equal(m->layers[l].d_ff, 256); /* 384 - 115 = 269, to the nearest multiple of 32 */
        /* bias compensation (flap's default) gave o and down a bias; GPTQ quantized the pruned down */
        assert_non_null(sqz_model_get(m, SQZ_ROLE_FFN_DOWN, (int32_t)l, SQZ_PARAM_BIAS));
        assert_int_equal(sqz_model_get(m, SQZ_ROLE_FFN_DOWN, (int32_t)l, SQZ_PARAM_WEIGHT)->dtype, SQZ_DTYPE_Q4_0);
    }
    assert_non_null(strstr(rep.stages[0].note, "heads 16 -> 12, FFN neurons 768 -> 512"));
    assert_true(rep.params_after < rep.params);
    sqz_compress_report_free(&rep);
    sqz_recipe_free(&r);
    /* a budget that removes every head of a layer, and statistics that are not there */
    sqz_recipe bad = {0};
    SQZ_ASSERT_OK(sqz_recipe_add(&bad, "prune", "heads=0.95"));
    sqz_compress_env none = {.session_opts = sqz_session_default_opts()};
    assert_int_equal(sqz_compress_run(m, &bad, &none, &o, &rep), SQZ_ERR_INVALID_ARG);
    assert_non_null(strstr(sqz_last_error(), "'heads=0.95' removes every head of layer 0"));
    sqz_compress_report_free(&rep);
    sqz_recipe_free(&bad);
    SQZ_ASSERT_OK(sqz_recipe_add(&bad, "prune", "ffn=0.2:obs"));
    assert_int_equal(sqz_compress_run(m, &bad, &none, &o, &rep), SQZ_ERR_INVALID_ARG);
    assert_non_null(strstr(sqz_last_error(), "--calib"));
    sqz_compress_report_free(&rep);
    sqz_recipe_free(&bad);
    sqz_calib_windows_free(&w);
    sqz_model_free(m);
}

static void test_specs(void **state) {
    (void)state;
    static const struct { const char *spec, *names; } bad[] = {
        {"heads=1", "'heads=1'"}, {"ffn=1", "'ffn=1'"},   {"ffn=1.5", "'ffn=1.5'"}, {"heads=0", "nothing to remove"},
        {"flap", "nothing"},      {"ffn=0.2:l2", "'l2'"}, {"ffn=0.2:damp=0", "'damp=0'"},
        {"ffn=0.2:flap:obs", "twice"}, {"channels=1", "'channels=1'"}, {"params=0.2:ffn=0.1", "'params=0.2'"},
    };
    sqz_recipe r = {0};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(sqz_recipe_add(&r, "prune", bad[i].spec), SQZ_ERR_INVALID_ARG);
        if (!strstr(sqz_last_error(), bad[i].names))
            fail_msg("--prune '%s': '%s' does not name %s", bad[i].spec, sqz_last_error(), bad[i].names);
    }
    SQZ_ASSERT_OK(sqz_recipe_add(&r, "prune", "heads=0.25:ffn=0.3:obs:both:damp=0.05:align=1"));
    sqz_recipe_free(&r);
}

/* channels=: the whole model loses hidden channels (Minitron), decided on activations; BERT's
 * post-LayerNorm blocks are refused before anything runs */
static void test_channels(void **state) {
    (void)state;
    SQZ_SKIP_UNLESS(model_path());
    sqz_model *m = open_model(), *orig = open_model();
    sqz_calib_windows w = windows_for(m);
    sqz_recipe r = {0};
    SQZ_ASSERT_OK(sqz_recipe_add(&r, "prune", "channels=0.25:ffn=0.3:wanda:lsq"));
    SQZ_ASSERT_OK(sqz_recipe_check_model(&r, m, true));
    sqz_compress_opts o = sqz_compress_default_opts();
    sqz_compress_env env = {.windows = &w, .session_opts = sqz_session_default_opts()};
    env.session_opts.n_threads = 1;
    sqz_compress_report rep;
    SQZ_ASSERT_OK(sqz_compress_run(m, &r, &env, &o, &rep));
    assert_int_equal(m->hp.d_model, 96);
    assert_int_equal(sqz_model_get(m, SQZ_ROLE_TOKEN_EMBD, -1, SQZ_PARAM_WEIGHT)->shape[1], 96);
    assert_int_equal(sqz_model_get(m, SQZ_ROLE_FFN_DOWN, 1, SQZ_PARAM_WEIGHT)->shape[0], 96);
    assert_int_equal(m->layers[1].d_ff, 256);
    assert_non_null(strstr(rep.stages[0].note, "hidden 128 -> 96"));
    /* the pruned decoder is compared with the original by its logits (other width, same vocabulary) */
    sqz_compress_eval_opts eo = sqz_compress_eval_default_opts();
    eo.ctx = 128;
    eo.max_chunks = 2;
    eo.threads = 1;
    sqz_compress_eval ev;
    SQZ_ASSERT_OK(sqz_compress_eval_run(m, orig, sqz_test_data("data/wiki.test.raw"), NULL, 0, NULL, &eo, &ev));
    assert_true(ev.done && ev.kld_mean > 0 && isfinite(ev.ppl));
    sqz_compress_report_free(&rep);
    sqz_recipe_free(&r);
    sqz_calib_windows_free(&w);
    sqz_model_free(m);
    sqz_model_free(orig);
    const char *bert = sqz_test_minilm();
    if (!bert) return;
    sqz_model *b = NULL;
    SQZ_ASSERT_OK(sqz_model_open(bert, NULL, &b));
    SQZ_ASSERT_OK(sqz_recipe_add(&r, "prune", "channels=0.1"));
    assert_int_equal(sqz_recipe_check_model(&r, b, true), SQZ_ERR_INVALID_ARG);
    assert_non_null(strstr(sqz_last_error(), "'channels=0.1'"));
    sqz_recipe_free(&r);
    sqz_model_free(b);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_scores),  cmocka_unit_test(test_compensation), cmocka_unit_test(test_block),
        cmocka_unit_test(test_choose_heads), cmocka_unit_test(test_heads_shapes), cmocka_unit_test(test_pass),    cmocka_unit_test(test_specs),
        cmocka_unit_test(test_channels),
    };
    return sqz_test_run(tests, NULL, NULL);
}

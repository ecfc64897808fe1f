/* tests/unit/quant_fixture.h - real weights and real activations for the quantization tests:
 * a model from shared/ (or the SmolLM2 package), text from wiki.test.raw tokenized with the
 * model's own tokenizer, run through the runtime up to block `layer` while a hook copies the
 * inputs of that block's linear layers. Rows of the first three quarters of the windows
 * calibrate, the last quarter is held out for measuring output error. */
#ifndef SQZ_TESTS_QUANT_FIXTURE_H
#define SQZ_TESTS_QUANT_FIXTURE_H

#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sqz/quant.h"
#include "sqz/runtime.h"
#include "sqz/tokenizer.h"
#include "test_util.h"

/* The four inputs of a llama block: q|k|v, o, gate|up, down. */
enum { QF_QKV = 0, QF_O = 1, QF_GATEUP = 2, QF_DOWN = 3, QF_N = 4 };

typedef struct qfix {
    sqz_model *m;
    int32_t layer;
    float *x[QF_N];    /* (n_rows, dim[g]) captured inputs */
    int64_t dim[QF_N];
    int64_t n_rows, cap;
    int64_t n_calib;   /* rows [0, n_calib) calibrate, [n_calib, n_rows) are held out (1/4) */
} qfix;

static inline sqz_status qfix__hook(void *user, const sqz_hook_event *e) {
    qfix *f = user;
    if (e->point != SQZ_HOOK_LINEAR_IN || e->layer != f->layer) return SQZ_OK;
    int g = (e->roles & (1u << SQZ_ROLE_ATTN_Q)) ? QF_QKV
            : (e->roles & (1u << SQZ_ROLE_ATTN_OUT)) ? QF_O
            : (e->roles & (1u << SQZ_ROLE_FFN_DOWN)) ? QF_DOWN
                                                     : QF_GATEUP;
    /* the four inputs come in block order; n_rows advances with the last one (down) */
    const int64_t have = f->n_rows;
    if (!f->x[g]) {
        f->dim[g] = e->dim;
        f->x[g] = malloc((size_t)f->cap * (size_t)e->dim * sizeof(float));
        if (!f->x[g]) return SQZ_ERR_NOMEM;
    }
    if (have + e->n_tokens > f->cap || e->dim != f->dim[g]) return SQZ_ERR_INVALID_ARG;
    memcpy(f->x[g] + have * e->dim, e->x, (size_t)(e->n_tokens * e->dim) * sizeof(float));
    if (g == QF_DOWN) f->n_rows += e->n_tokens;
    return SQZ_OK;
}

static inline void qfix_free(qfix *f) {
    for (int g = 0; g < QF_N; g++) free(f->x[g]);
    sqz_model_free(f->m);
    memset(f, 0, sizeof *f);
}

/* Opens `path` and captures `windows` windows of `win` tokens from wiki.test.raw at block
 * `layer`. Skips the case when the model or the text is missing. */
static inline void qfix_load(qfix *f, const char *path, int32_t layer, int64_t win, int windows) {
    memset(f, 0, sizeof *f);
    const char *text_path = sqz_test_data("data/wiki.test.raw");
    SQZ_SKIP_UNLESS(text_path);
    SQZ_SKIP_UNLESS(path);
    SQZ_ASSERT_OK(sqz_model_open(path, NULL, &f->m));
    f->layer = layer;
    f->cap = win * windows;
    FILE *fp = fopen(text_path, "rb");
    assert_non_null(fp);
    char *text = malloc(1 << 18);
    size_t len = fread(text, 1, (1 << 18) - 1, fp);
    fclose(fp);
    sqz_tokenizer *tok;
    SQZ_ASSERT_OK(sqz_tokenizer_new(&f->m->vocab, &tok));
    int32_t *ids;
    size_t n_ids;
    SQZ_ASSERT_OK(sqz_tokenize(tok, text, len, true, &ids, &n_ids));
    free(text);
    sqz_tokenizer_free(tok);
    assert_true((int64_t)n_ids >= f->cap);
    sqz_session_opts so = sqz_session_default_opts();
    so.max_tokens = win;
    sqz_session *s;
    SQZ_ASSERT_OK(sqz_session_new(f->m, &so, &s));
    sqz_session_set_hook(s, qfix__hook, f);
    float *x = malloc((size_t)win * (size_t)f->m->hp.d_model * sizeof(float));
    for (int w = 0; w < windows; w++) {
        SQZ_ASSERT_OK(sqz_session_embed(s, ids + (int64_t)w * win, NULL, win, 0, x));
        for (int32_t l = 0; l <= layer; l++) SQZ_ASSERT_OK(sqz_session_block(s, l, x, win, 0));
    }
    free(x);
    free(ids);
    sqz_session_free(s);
    assert_int_equal(f->n_rows, f->cap);
    f->n_calib = win * (windows - windows / 4);
}

/* The f32 weight of (role, layer) (malloc'd), its n_out in *n_out. */
static float *qfix_weight(const qfix *f, sqz_role role, int64_t *n_out, int64_t *n_in) {
    const sqz_tensor *t = sqz_model_get(f->m, role, f->layer, SQZ_PARAM_WEIGHT);
    assert_non_null(t);
    float *w = malloc((size_t)sqz_tensor_nelements(t) * sizeof(float));
    SQZ_ASSERT_OK(sqz_tensor_to_f32(t, w));
    *n_out = t->shape[0];
    *n_in = t->shape[1];
    return w;
}

/* Relative output error ||X W^T - X Q^T||_F / ||X W^T||_F over rows [r0, r1) of x. */
static inline double qfix_rel_err(const float *x, int64_t r0, int64_t r1, int64_t n_in, const float *w, const float *q,
                           int64_t n_out) {
    const int64_t m = r1 - r0;
    float *ya = malloc((size_t)(m * n_out) * sizeof(float)), *yb = malloc((size_t)(m * n_out) * sizeof(float));
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)m, (int)n_out, (int)n_in, 1.0f, x + r0 * n_in,
                (int)n_in, w, (int)n_in, 0.0f, ya, (int)n_out);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)m, (int)n_out, (int)n_in, 1.0f, x + r0 * n_in,
                (int)n_in, q, (int)n_in, 0.0f, yb, (int)n_out);
    double num = 0, den = 0;
    for (int64_t i = 0; i < m * n_out; i++) {
        num += ((double)ya[i] - yb[i]) * ((double)ya[i] - yb[i]);
        den += (double)ya[i] * ya[i];
    }
    free(ya);
    free(yb);
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

/* The same for a quantized layer run as it would run (sqz_qmatrix_forward: W8A8 included). */
static inline double qfix_rel_err_q(const float *x, int64_t r0, int64_t r1, int64_t n_in, const float *w,
                             const sqz_qmatrix *q) {
    const int64_t m = r1 - r0, n_out = q->n_out;
    float *ya = malloc((size_t)(m * n_out) * sizeof(float)), *yb = malloc((size_t)(m * n_out) * sizeof(float));
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)m, (int)n_out, (int)n_in, 1.0f, x + r0 * n_in,
                (int)n_in, w, (int)n_in, 0.0f, ya, (int)n_out);
    SQZ_ASSERT_OK(sqz_qmatrix_forward(q, x + r0 * n_in, m, yb));
    double num = 0, den = 0;
    for (int64_t i = 0; i < m * n_out; i++) {
        num += ((double)ya[i] - yb[i]) * ((double)ya[i] - yb[i]);
        den += (double)ya[i] * ya[i];
    }
    free(ya);
    free(yb);
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

#endif

/* tests/unit/calib_backend_util.h - what the backend tests of the calibration loop share
 * (unit/test_backend_calib.c on the CPU, gpu/test_gpu_calib.c on CUDA): block LAYER's statistics
 * of tinystories-656K over windows of wiki.test.raw by sqz_calib_run with a given backend, and
 * their comparison (everything but X^T X bit for bit, X^T X within 1e-12 of sqrt(H_ii H_jj)). */
#ifndef SQZ_TESTS_CALIB_BACKEND_UTIL_H
#define SQZ_TESTS_CALIB_BACKEND_UTIL_H

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/backend_impl.h"
#include "sqz/calib.h"
#include "test_util.h"

/* |a - b| within rel of the scale sqrt(H_ii H_jj) of entry (i, j) (the Cauchy-Schwarz bound). */
static inline bool cb_close_h(double a, double b, double hii, double hjj, double rel) {
    return fabs(a - b) <= rel * sqrt(hii * hjj) + 1e-300;
}

enum { NW = 3, CTX = 300, LAYER = 1 }; /* 300 rows per event: two chunks of SQZ_XTX_CHUNK */
static const unsigned NEEDS = SQZ_QSTAT_XTX | SQZ_QSTAT_X2 | SQZ_QSTAT_ABSMAX | SQZ_QSTAT_ABSMEAN | SQZ_QSTAT_HIST |
                              SQZ_QSTAT_SAMPLE;

static inline const char *cb_model_path(void) { return sqz_test_data("models/tinystories-656K"); }

static inline void *cb_dup(const void *p, size_t n) {
    if (!p) return NULL;
    void *q = malloc(n);
    memcpy(q, p, n);
    return q;
}

/* A deep copy of block LAYER's statistics. */
static inline sqz_status cb_keep(void *user, sqz_session *s, int32_t layer, const sqz_calib_block *b) {
    (void)s;
    if (layer != LAYER) return SQZ_OK;
    sqz_calib_block *k = user;
    *k = *b;
    for (int i = 0; i < b->n_inputs; i++) {
        const sqz_calib_input *in = &b->in[i];
        sqz_calib_input *d = &k->in[i];
        const size_t n = (size_t)in->st.n_in;
        d->xtx = cb_dup(in->xtx, n * n * sizeof(double));
        d->x2 = cb_dup(in->x2, n * sizeof(float));
        d->absmax = cb_dup(in->absmax, n * sizeof(float));
        d->absmean = cb_dup(in->absmean, n * sizeof(float));
        d->mean = NULL;
        d->x = cb_dup(in->x, (size_t)in->st.n_x * n * sizeof(float));
        d->hist.counts = cb_dup(in->hist.counts, (size_t)in->hist.n_bins * sizeof(double));
    }
    return SQZ_OK;
}

/* The statistics of block LAYER with the observers on backend be, the session's forward on
 * session_be (NULL: its own CPU backend; be: the block forward on the device, the hooks' rows
 * there too). */
static inline void cb_run_stats_fwd(sqz_model *m, const sqz_calib_windows *w, sqz_backend *be, sqz_backend *session_be,
                                    sqz_calib_block *out) {
    sqz_session_opts so = sqz_session_default_opts();
    so.backend = session_be;
    so.max_tokens = CTX;
    so.n_threads = 1;
    sqz_session *s;
    SQZ_ASSERT_OK(sqz_session_new(m, &so, &s));
    memset(out, 0, sizeof *out);
    sqz_calib_run_opts ro = {.observe = {.needs = NEEDS, .sample_rows = 64, .backend = be, .block_io = true},
                             .on_block = cb_keep,
                             .user = out};
    SQZ_ASSERT_OK(sqz_calib_run(s, w, &ro));
    sqz_session_free(s);
    assert_int_equal(out->n_inputs, 4);
}

static inline void cb_run_stats(sqz_model *m, const sqz_calib_windows *w, sqz_backend *be, sqz_calib_block *out) {
    cb_run_stats_fwd(m, w, be, NULL, out);
}

/* Everything but X^T X bit for bit; X^T X the same bits (exact) or within 1e-12 of its scale. */
static inline void cb_compare(const sqz_calib_block *a, const sqz_calib_block *b, bool exact, const char *what) {
    assert_int_equal(a->n_inputs, b->n_inputs);
    assert_true(a->cos_mean == b->cos_mean && a->cos_min == b->cos_min); /* layer scoring's cosines */
    for (int i = 0; i < a->n_inputs; i++) {
        const sqz_calib_input *x = &a->in[i], *y = &b->in[i];
        const int64_t n = x->st.n_in;
        assert_int_equal(x->roles, y->roles);
        assert_int_equal(x->st.n_tokens, y->st.n_tokens);
        assert_int_equal(x->st.n_x, y->st.n_x);
        assert_memory_equal(x->x2, y->x2, (size_t)n * sizeof(float));
        assert_memory_equal(x->absmax, y->absmax, (size_t)n * sizeof(float));
        assert_memory_equal(x->absmean, y->absmean, (size_t)n * sizeof(float));
        assert_memory_equal(x->x, y->x, (size_t)(x->st.n_x * n) * sizeof(float));
        assert_int_equal(x->hist.n_bins, y->hist.n_bins);
        assert_memory_equal(x->hist.counts, y->hist.counts, (size_t)x->hist.n_bins * sizeof(double));
        int64_t same = 0;
        double worst = 0;
        for (int64_t r = 0; r < n; r++)
            for (int64_t c = 0; c < n; c++) {
                const double p = x->xtx[r * n + c], q = y->xtx[r * n + c];
                same += memcmp(&p, &q, sizeof p) == 0;
                const double e = fabs(p - q) / sqrt(x->xtx[r * n + r] * x->xtx[c * n + c]);
                if (e > worst) worst = e;
                assert_true(cb_close_h(p, q, x->xtx[r * n + r], x->xtx[c * n + c], 1e-12));
            }
        print_message("%s: input %d (%lld wide): X^T X %lld of %lld entries the same bits, largest difference "
                      "%.3g of sqrt(H_ii H_jj)\n", what, i, (long long)n, (long long)same, (long long)(n * n), worst);
        if (exact) assert_int_equal(same, n * n);
    }
}

/* nw windows of CTX tokens of wiki.test.raw (its first 200 kB) for model m. */
static inline sqz_calib_windows cb_windows(const sqz_model *m, int64_t nw, uint64_t seed) {
    char *text;
    size_t len;
    SQZ_ASSERT_OK(sqz_read_file(sqz_test_data("data/wiki.test.raw"), (size_t)1 << 31, &text, &len));
    if (len > 200000) len = 200000;
    sqz_tokenizer *tok;
    SQZ_ASSERT_OK(sqz_tokenizer_new(&m->vocab, &tok));
    sqz_calib_windows w;
    SQZ_ASSERT_OK(sqz_calib_windows_make(tok, text, len, nw, CTX, seed, &w));
    sqz_tokenizer_free(tok);
    free(text);
    return w;
}

#endif

/*
 * eval/stats.c - log-softmax, KL divergence and percentiles.
 */
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>

#include "eval/eval_internal.h"

sqz__lsm sqz__log_softmax(const float *x, int64_t n) {
    sqz__lsm r = {x[0], 0, 0};
    for (int64_t i = 1; i < n; i++) {
        if (x[i] > r.max) {
            r.max = x[i];
            r.argmax = (int32_t)i;
        }
    }
    double s = 0;
    for (int64_t i = 0; i < n; i++) s += exp((double)x[i] - r.max);
    r.lse = log(s);
    return r;
}

typedef struct lsm_job {
    const float *x;
    int64_t n, r0, r1;
    sqz__lsm *out;
} lsm_job;

static void *lsm_run(void *p) {
    const lsm_job *j = p;
    for (int64_t r = j->r0; r < j->r1; r++) j->out[r] = sqz__log_softmax(j->x + r * j->n, j->n);
    return NULL;
}

void sqz__log_softmax_rows(const float *x, int64_t rows, int64_t n, int threads, sqz__lsm *out) {
    enum { MAX_THREADS = 16 };
    if (threads > MAX_THREADS) threads = MAX_THREADS;
    if ((int64_t)threads > rows) threads = (int)rows;
    if (threads < 1 || rows * n < (1 << 20)) threads = 1; /* under a million values a thread costs more */
    lsm_job jobs[MAX_THREADS];
    pthread_t th[MAX_THREADS];
    bool started[MAX_THREADS] = {false};
    for (int t = 0; t < threads; t++) {
        jobs[t] = (lsm_job){x, n, rows * t / threads, rows * (t + 1) / threads, out};
        if (t > 0) started[t] = pthread_create(&th[t], NULL, lsm_run, &jobs[t]) == 0;
    }
    lsm_run(&jobs[0]);
    for (int t = 1; t < threads; t++) {
        if (started[t]) pthread_join(th[t], NULL);
        else lsm_run(&jobs[t]); /* no thread: its rows here */
    }
}

double sqz__kld_rows(const float *base, const sqz__lsm *lb, const float *model, const sqz__lsm *lm, int64_t n) {
    double k = 0, ob = lb->max + lb->lse, om = lm->max + lm->lse;
    for (int64_t i = 0; i < n; i++) {
        double lpb = (double)base[i] - ob, lpm = (double)model[i] - om;
        k += exp(lpb) * (lpb - lpm);
    }
    /* Rounding can leave -1e-17 for identical rows; KL is non-negative. */
    return k > 0 ? k : 0;
}

static int cmp_float(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

double sqz__percentile(const float *v, int64_t n, double p) {
    if (n <= 0) return 0;
    float *c = malloc((size_t)n * sizeof *c);
    if (!c) return NAN;
    for (int64_t i = 0; i < n; i++) c[i] = v[i];
    qsort(c, (size_t)n, sizeof *c, cmp_float);
    double pos = p * (double)(n - 1);
    int64_t lo = (int64_t)floor(pos);
    if (lo < 0) lo = 0;
    if (lo > n - 1) lo = n - 1;
    int64_t hi = lo + 1 < n ? lo + 1 : lo;
    double f = pos - (double)lo, r = (double)c[lo] + f * ((double)c[hi] - (double)c[lo]);
    free(c);
    return r;
}

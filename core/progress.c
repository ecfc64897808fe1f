/* core/progress.c - throttled progress line on stderr (terminals only). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sqz/progress.h"

struct sqz_progress {
    char label[64];
    char unit[16];
    int64_t total, done;
    double t0, last;
    int shown;
};

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

sqz_progress *sqz_progress_start(const char *label, int64_t total, const char *unit) {
    sqz_progress *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    snprintf(p->label, sizeof p->label, "%s", label);
    snprintf(p->unit, sizeof p->unit, "%s", unit ? unit : "");
    p->total = total;
    p->t0 = p->last = now_s();
    const char *env = getenv("SQZ_PROGRESS");
    p->shown = env ? atoi(env) != 0 : isatty(STDERR_FILENO);
    return p;
}

static void draw(sqz_progress *p, double t) {
    double el = t - p->t0, rate = el > 0 ? (double)p->done / el : 0;
    double pct = p->total > 0 ? 100.0 * (double)p->done / (double)p->total : 0;
    double eta = rate > 0 && p->total > p->done ? (double)(p->total - p->done) / rate : 0;
    if (strcmp(p->unit, "B") == 0) {
        fprintf(stderr, "\r%s %5.1f%% %.1f/%.1f MB  %.1f MB/s  eta %.0fs   ", p->label, pct, p->done / 1e6,
                p->total / 1e6, rate / 1e6, eta);
    } else {
        fprintf(stderr, "\r%s %5.1f%% %lld/%lld %s  %.1f %s/s  eta %.0fs   ", p->label, pct, (long long)p->done,
                (long long)p->total, p->unit, rate, p->unit, eta);
    }
    fflush(stderr);
}

void sqz_progress_update(sqz_progress *p, int64_t done) {
    if (!p) return;
    p->done = done;
    if (!p->shown) return;
    double t = now_s();
    if (t - p->last < 0.1) return;
    p->last = t;
    draw(p, t);
}

void sqz_progress_end(sqz_progress *p) {
    if (!p) return;
    if (p->shown) {
        draw(p, now_s());
        fputc('\n', stderr);
    }
    free(p);
}

void sqz_progress_cb(void *user, int64_t done, int64_t total) {
    sqz_progress *p = user;
    if (!p) return;
    p->total = total;
    sqz_progress_update(p, done);
}

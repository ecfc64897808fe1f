/* core/progress.c - progress of long work on stderr: a throttled line redrawn with '\r' on a
 * terminal, plain lines (a start line, one about every 10 s, an end line) into a log. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sqz/progress.h"

/* Seconds between two plain lines: often enough that a log shows the run is alive, rarely
 * enough that a long run's log stays short. */
#define LINE_INTERVAL_S 10.0

enum { FORM_OFF, FORM_TERMINAL, FORM_LINES };

struct sqz_progress {
    char label[64];
    char unit[16];
    int64_t total, done;
    double t0, last;
    double r0;   /* the rate is measured from r0: a count that goes back (a second phase reusing the
                    callback, as auto's second scan) starts it again */
    int form;
};

/* Units per second since the count last started again. */
static double rate_of(const sqz_progress *p, double t) {
    return t > p->r0 ? (double)p->done / (t - p->r0) : 0;
}

double sqz_now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* SQZ_PROGRESS: 0 none, 1 the terminal form, "lines" plain lines; unset (or anything else):
 * the terminal form on a terminal, plain lines otherwise. */
static int form_of(sqz_progress_mode mode) {
    if (mode == SQZ_PROGRESS_OFF) return FORM_OFF;
    const char *env = getenv("SQZ_PROGRESS");
    int form = isatty(STDERR_FILENO) ? FORM_TERMINAL : FORM_LINES;
    if (env && strcmp(env, "0") == 0) form = FORM_OFF;
    else if (env && strcmp(env, "1") == 0) form = FORM_TERMINAL;
    else if (env && strcmp(env, "lines") == 0) form = FORM_LINES;
    if (mode == SQZ_PROGRESS_LINES_ONLY && form == FORM_TERMINAL) form = FORM_OFF;
    return form;
}

/* "12/60 blocks" or "12.3/96.6 MB"; without a total "12 blocks". */
static void amount(const sqz_progress *p, char *buf, size_t cap) {
    const bool mb = strcmp(p->unit, "B") == 0;
    if (mb && p->total > 0) snprintf(buf, cap, "%.1f/%.1f MB", p->done / 1e6, p->total / 1e6);
    else if (mb) snprintf(buf, cap, "%.1f MB", p->done / 1e6);
    else if (p->total > 0) snprintf(buf, cap, "%lld/%lld %s", (long long)p->done, (long long)p->total, p->unit);
    else snprintf(buf, cap, "%lld %s", (long long)p->done, p->unit);
}

static void print_start(const sqz_progress *p) {
    if (p->total <= 0) fprintf(stderr, "sqz progress: %s: started\n", p->label);
    else if (strcmp(p->unit, "B") == 0) fprintf(stderr, "sqz progress: %s: started, %.1f MB\n", p->label, p->total / 1e6);
    else fprintf(stderr, "sqz progress: %s: started, %lld %s\n", p->label, (long long)p->total, p->unit);
}

/* One plain line: "sqz progress: compress: 12/60 blocks (20.0%), 0.40 blocks/s, eta 120 s";
 * at the end "... done, 60/60 blocks in 150.2 s", or "... stopped at 12/60 blocks after 30.1 s"
 * when the work ended short of its total (an error, which is reported on its own line). */
static void print_line(const sqz_progress *p, double t, bool end) {
    const double el = t - p->t0, rate = rate_of(p, t);
    const bool mb = strcmp(p->unit, "B") == 0;
    char am[96];
    amount(p, am, sizeof am);
    if (end) {
        const bool complete = p->total > 0 ? p->done >= p->total : p->done > 0;
        if (complete) fprintf(stderr, "sqz progress: %s: done, %s in %.1f s\n", p->label, am, el);
        else fprintf(stderr, "sqz progress: %s: stopped at %s after %.1f s\n", p->label, am, el);
        return;
    }
    char pct[32] = "", eta[48] = "";
    if (p->total > 0) snprintf(pct, sizeof pct, " (%.1f%%)", 100.0 * (double)p->done / (double)p->total);
    if (p->total > p->done && rate > 0) snprintf(eta, sizeof eta, ", eta %.0f s", (double)(p->total - p->done) / rate);
    fprintf(stderr, "sqz progress: %s: %s%s, %.2f %s/s%s\n", p->label, am, pct, mb ? rate / 1e6 : rate,
            mb ? "MB" : p->unit, eta);
}

sqz_progress *sqz_progress_start_mode(const char *label, int64_t total, const char *unit, sqz_progress_mode mode) {
    sqz_progress *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    snprintf(p->label, sizeof p->label, "%s", label);
    snprintf(p->unit, sizeof p->unit, "%s", unit ? unit : "");
    p->total = total;
    p->t0 = p->last = p->r0 = sqz_now_seconds();
    p->form = form_of(mode);
    if (p->form == FORM_LINES) print_start(p);
    return p;
}

sqz_progress *sqz_progress_start(const char *label, int64_t total, const char *unit) {
    return sqz_progress_start_mode(label, total, unit, SQZ_PROGRESS_AUTO);
}

static void draw(sqz_progress *p, double t) {
    double rate = rate_of(p, t);
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
    double t = sqz_now_seconds();
    if (done < p->done) p->r0 = t; /* counting again from the start: the rate too */
    p->done = done;
    if (p->form == FORM_OFF) return;
    if (t - p->last < (p->form == FORM_LINES ? LINE_INTERVAL_S : 0.1)) return;
    p->last = t;
    if (p->form == FORM_LINES) print_line(p, t, false);
    else draw(p, t);
}

void sqz_progress_end(sqz_progress *p) {
    if (!p) return;
    if (p->form == FORM_TERMINAL) {
        draw(p, sqz_now_seconds());
        fputc('\n', stderr);
    } else if (p->form == FORM_LINES) {
        print_line(p, sqz_now_seconds(), true);
    }
    free(p);
}

void sqz_progress_cb(void *user, int64_t done, int64_t total) {
    sqz_progress *p = user;
    if (!p) return;
    p->total = total;
    sqz_progress_update(p, done);
}

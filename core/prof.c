/*
 * core/prof.c - the phase table of core/prof.h: nanoseconds and counts in atomics.
 */
#include "core/prof.h"
#include "sqz/progress.h"

#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>

static const char *const kLabels[SQZ__PROF_COUNT] = {
#define SQZ__PROF_LABEL(id, label) label,
    SQZ__PROF_PHASES(SQZ__PROF_LABEL)
#undef SQZ__PROF_LABEL
};

static _Atomic int64_t g_ns[SQZ__PROF_COUNT];
static _Atomic int64_t g_n[SQZ__PROF_COUNT];
static atomic_int g_on = -1; /* -1: not read yet */

bool sqz__prof_on(void) {
    int on = atomic_load_explicit(&g_on, memory_order_relaxed);
    if (on < 0) {
        const char *e = getenv("SQZ_PROFILE");
        on = e && *e && *e != '0';
        atomic_store(&g_on, on);
    }
    return on;
}

double sqz__prof_begin(void) { return sqz__prof_on() ? sqz_now_seconds() : 0.0; }

void sqz__prof_end(sqz__prof_phase p, double t0) {
    if (t0 == 0.0 || (int)p < 0 || p >= SQZ__PROF_COUNT) return;
    atomic_fetch_add_explicit(&g_ns[p], (int64_t)((sqz_now_seconds() - t0) * 1e9), memory_order_relaxed);
    atomic_fetch_add_explicit(&g_n[p], 1, memory_order_relaxed);
}

void sqz_profile_print(FILE *f) { sqz__prof_print(f); }

void sqz__prof_print(FILE *f) {
    if (!sqz__prof_on()) return;
    for (int p = 0; p < SQZ__PROF_COUNT; p++) {
        const int64_t n = atomic_load(&g_n[p]);
        if (n) fprintf(f, "profile  %9.3f s %9lldx  %s\n", (double)atomic_load(&g_ns[p]) * 1e-9, (long long)n, kLabels[p]);
    }
}

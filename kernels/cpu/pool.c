/*
 * kernels/cpu/pool.c - fork-join pool: workers wait for a new generation of the job counter,
 * claim chunks with an atomic counter, and the caller claims chunks too and waits for the last
 * worker to finish.
 *
 * Waiting spins first, then sleeps: a worker that finished a job polls the generation for up to
 * SQZ_POOL_SPIN_US microseconds (default 100; 0: sleep at once) before it sleeps on a condition
 * variable, and the caller polls the busy count as long before it sleeps on another. A
 * generation step of a 1.5 B model dispatches ~300 products and element-wise jobs per token, a
 * few microseconds apart: waking a sleeping thread for each (a futex round trip, tens of
 * microseconds in a VM) cost more than a small product takes. The bound keeps an oversubscribed
 * machine or an idle session from burning a core for long. The generation is incremented under
 * the mutex and a sleeper re-checks it under the mutex, so no wake-up is lost.
 */
#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT */
#include "kernels/cpu/pool.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define CPU_RELAX() _mm_pause()
#elif defined(__aarch64__)
#define CPU_RELAX() __asm__ volatile("yield")
#else
#define CPU_RELAX() ((void)0)
#endif

#include "core/internal.h"

enum { SQZ__POOL_MAX_THREADS = 256 };

struct sqz__pool {
    int n_threads;
    pthread_t *threads;
    pthread_mutex_t mu;
    pthread_cond_t wake, done;
    atomic_uint_fast64_t generation; /* incremented under mu */
    atomic_int busy;                 /* workers still in the current job */
    atomic_bool quit;                /* set under mu */
    atomic_int_fast64_t spin_ns;     /* how long a waiter polls before it sleeps */
    /* the current job */
    sqz__pool_fn fn;
    void *ctx;
    int64_t n, chunk;
    atomic_int_fast64_t next;
    void *scratch[3]; /* sqz__pool_scratch */
    size_t scratch_bytes[3];
};

typedef struct {
    sqz__pool *p;
    int index;
} worker_arg;

static void run_chunks(sqz__pool *p, int thread) {
    for (;;) {
        int64_t b = atomic_fetch_add(&p->next, p->chunk);
        if (b >= p->n) break;
        int64_t e = b + p->chunk < p->n ? b + p->chunk : p->n;
        p->fn(p->ctx, b, e, thread);
    }
}

static int64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* Polls until done(p, arg) or spin_ns have passed; true if done. */
static bool spin_until(const sqz__pool *p, bool (*done)(const sqz__pool *, uint64_t), uint64_t arg) {
    const int64_t spin = atomic_load(&((sqz__pool *)(uintptr_t)p)->spin_ns);
    if (spin <= 0) return done(p, arg);
    const int64_t end = now_ns() + spin;
    for (int i = 1;; i++) {
        if (done(p, arg)) return true;
        CPU_RELAX();
        if (i % 64 == 0) {
            if (now_ns() > end) return done(p, arg);
            sched_yield(); /* a thread this one keeps from running (an oversubscribed machine) runs */
        }
    }
}

static bool new_job(const sqz__pool *p, uint64_t seen) {
    return atomic_load(&p->generation) != seen || atomic_load(&p->quit);
}

static bool all_done(const sqz__pool *p, uint64_t unused) {
    (void)unused;
    return atomic_load(&p->busy) == 0;
}

static void *worker(void *argp) {
    worker_arg *a = argp;
    sqz__pool *p = a->p;
    int index = a->index;
    free(a);
    uint64_t seen = 0;
    for (;;) {
        if (!spin_until(p, new_job, seen)) {
            pthread_mutex_lock(&p->mu);
            while (!atomic_load(&p->quit) && atomic_load(&p->generation) == seen) pthread_cond_wait(&p->wake, &p->mu);
            pthread_mutex_unlock(&p->mu);
        }
        if (atomic_load(&p->quit)) break;
        seen = atomic_load(&p->generation);
        run_chunks(p, index);
        if (atomic_fetch_sub(&p->busy, 1) == 1) { /* the last one: wake a sleeping caller */
            pthread_mutex_lock(&p->mu);
            pthread_cond_signal(&p->done);
            pthread_mutex_unlock(&p->mu);
        }
    }
    return NULL;
}

sqz_status sqz__pool_new(int n_threads, sqz__pool **out) {
    *out = NULL;
    if (n_threads <= 0) { /* the cores this process may run on (a container's cpuset), not the host's */
        cpu_set_t cs;
        long c = sched_getaffinity(0, sizeof cs, &cs) == 0 ? CPU_COUNT(&cs) : sysconf(_SC_NPROCESSORS_ONLN);
        n_threads = c > 0 ? (int)c : 1;
    }
    if (n_threads > SQZ__POOL_MAX_THREADS) n_threads = SQZ__POOL_MAX_THREADS;
    sqz__pool *p = sqz__calloc(1, sizeof *p);
    if (!p) return SQZ_ERR_NOMEM;
    p->n_threads = 1;
    const char *spin = getenv("SQZ_POOL_SPIN_US");
    atomic_init(&p->spin_ns, (spin && *spin ? atol(spin) : 100) * 1000);
    atomic_init(&p->generation, 0);
    atomic_init(&p->busy, 0);
    atomic_init(&p->quit, false);
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->wake, NULL);
    pthread_cond_init(&p->done, NULL);
    atomic_init(&p->next, 0);
    if (n_threads > 1) {
        p->threads = sqz__calloc((size_t)n_threads, sizeof *p->threads);
        if (!p->threads) { sqz__pool_free(p); return SQZ_ERR_NOMEM; }
        for (int i = 1; i < n_threads; i++) {
            worker_arg *a = sqz__malloc(sizeof *a);
            if (!a) { sqz__pool_free(p); return SQZ_ERR_NOMEM; }
            a->p = p;
            a->index = i;
            if (pthread_create(&p->threads[i], NULL, worker, a) != 0) {
                free(a);
                sqz__pool_free(p);
                return SQZ_ERROR(SQZ_ERR_NOMEM, "runtime: cannot start worker thread %d of %d", i, n_threads);
            }
            p->n_threads = i + 1;
        }
    }
    *out = p;
    return SQZ_OK;
}

void sqz__pool_free(sqz__pool *p) {
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    atomic_store(&p->quit, true);
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
    for (int i = 1; i < p->n_threads; i++) pthread_join(p->threads[i], NULL);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->wake);
    pthread_cond_destroy(&p->done);
    free(p->threads);
    for (int i = 0; i < 3; i++) free(p->scratch[i]);
    free(p);
}

int sqz__pool_threads(const sqz__pool *p) { return p ? p->n_threads : 1; }

void *sqz__pool_scratch(sqz__pool *p, int slot, size_t bytes) {
    if (!p || slot < 0 || slot > 2) return NULL;
    if (p->scratch_bytes[slot] < bytes) {
        free(p->scratch[slot]);
        p->scratch[slot] = sqz__malloc(bytes);
        p->scratch_bytes[slot] = p->scratch[slot] ? bytes : 0;
    }
    return p->scratch[slot];
}

void sqz__pool_for(sqz__pool *p, int64_t n, int64_t grain, sqz__pool_fn fn, void *ctx) {
    if (n <= 0) return;
    if (grain < 1) grain = 1;
    int nt = p ? p->n_threads : 1;
    /* About four chunks per thread balance uneven work without much claiming. */
    int64_t chunk = (n + 4 * (int64_t)nt - 1) / (4 * (int64_t)nt);
    if (chunk < grain) chunk = grain;
    if (nt == 1 || chunk >= n) {
        fn(ctx, 0, n, 0);
        return;
    }
    p->fn = fn; /* no worker reads these until the generation changes */
    p->ctx = ctx;
    p->n = n;
    p->chunk = chunk;
    atomic_store(&p->next, 0);
    atomic_store(&p->busy, p->n_threads - 1);
    pthread_mutex_lock(&p->mu);
    atomic_fetch_add(&p->generation, 1);
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
    run_chunks(p, 0);
    if (!spin_until(p, all_done, 0)) {
        pthread_mutex_lock(&p->mu);
        while (atomic_load(&p->busy) > 0) pthread_cond_wait(&p->done, &p->mu);
        pthread_mutex_unlock(&p->mu);
    }
}

int64_t sqz__pool_set_spin(sqz__pool *p, int64_t ns) {
    return p ? atomic_exchange(&p->spin_ns, ns) : 0;
}

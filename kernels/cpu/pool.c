/*
 * kernels/cpu/pool.c - fork-join pool: workers sleep on a condition variable, wake on a
 * new generation, claim chunks with an atomic counter, and the last one to finish
 * signals the caller (who claims chunks too).
 */
#include "kernels/cpu/pool.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

#include "core/internal.h"

enum { SQZ__POOL_MAX_THREADS = 256 };

struct sqz__pool {
    int n_threads;
    pthread_t *threads;
    pthread_mutex_t mu;
    pthread_cond_t wake, done;
    uint64_t generation; /* under mu */
    int busy;            /* workers still in the current job, under mu */
    bool quit;
    /* the current job */
    sqz__pool_fn fn;
    void *ctx;
    int64_t n, chunk;
    atomic_int_fast64_t next;
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

static void *worker(void *argp) {
    worker_arg *a = argp;
    sqz__pool *p = a->p;
    int index = a->index;
    free(a);
    uint64_t seen = 0;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (!p->quit && p->generation == seen) pthread_cond_wait(&p->wake, &p->mu);
        if (p->quit) break;
        seen = p->generation;
        pthread_mutex_unlock(&p->mu);
        run_chunks(p, index);
        pthread_mutex_lock(&p->mu);
        if (--p->busy == 0) pthread_cond_signal(&p->done);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

sqz_status sqz__pool_new(int n_threads, sqz__pool **out) {
    *out = NULL;
    if (n_threads <= 0) {
        long c = sysconf(_SC_NPROCESSORS_ONLN);
        n_threads = c > 0 ? (int)c : 1;
    }
    if (n_threads > SQZ__POOL_MAX_THREADS) n_threads = SQZ__POOL_MAX_THREADS;
    sqz__pool *p = sqz__calloc(1, sizeof *p);
    if (!p) return SQZ_ERR_NOMEM;
    p->n_threads = 1;
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
    p->quit = true;
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
    for (int i = 1; i < p->n_threads; i++) pthread_join(p->threads[i], NULL);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->wake);
    pthread_cond_destroy(&p->done);
    free(p->threads);
    free(p);
}

int sqz__pool_threads(const sqz__pool *p) { return p ? p->n_threads : 1; }

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
    pthread_mutex_lock(&p->mu);
    p->fn = fn;
    p->ctx = ctx;
    p->n = n;
    p->chunk = chunk;
    atomic_store(&p->next, 0);
    p->busy = p->n_threads - 1;
    p->generation++;
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
    run_chunks(p, 0);
    pthread_mutex_lock(&p->mu);
    while (p->busy > 0) pthread_cond_wait(&p->done, &p->mu);
    pthread_mutex_unlock(&p->mu);
}
